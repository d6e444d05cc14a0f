"""Time to best: the offline loop (simulator + search proposer) on the suite at default sizes.

    .venv/bin/python benchmarks/bench_optimize.py [KERNEL ...] [--hardware mi300x] [--iterations N]

For each kernel it prints the baseline, best and ceiling hit rates (simulator predictions), the
gap to the ceiling in points, the seconds until the best attempt finished (trace capture
included: the baseline attempt pays for it unless the trace is already cached) and the whole
run's seconds. Runs go to a temporary directory; the trace cache is the user's unless --cold.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from swizzleperf.workflows.optimize import OptimizeRequest, run_quietly

ROOT = Path(__file__).resolve().parents[1]
SUITE = ["softmax", "gemm", "transpose", "layernorm"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kernels", nargs="*", default=SUITE)
    parser.add_argument("--hardware", default="mi300x")
    parser.add_argument("--iterations", type=int, default=24)
    parser.add_argument("--cold", action="store_true", help="use an empty trace cache (measures capture too)")
    args = parser.parse_args()

    out = Console(width=200)
    table = Table(title=f"optimize, simulator on {args.hardware} (hit rates are predictions)", title_justify="left")
    for col in ("kernel", "size", "baseline %", "best %", "ceiling %", "gap (pts)", "best family",
                "attempts", "s to best", "s total"):
        table.add_column(col, justify="left" if col in ("kernel", "size", "best family") else "right")
    with tempfile.TemporaryDirectory() as tmp:
        if args.cold:
            os.environ["SWIZZLEPERF_CACHE"] = str(Path(tmp) / "cache")
        for name in args.kernels:
            t0 = time.perf_counter()
            run = run_quietly(OptimizeRequest(
                kernel_path=ROOT / "kernels" / f"{name}.py", hardware=args.hardware, profiler="sim",
                proposer="search", iterations=args.iterations, patience=args.iterations, size=None, seed=0,
                model=None, api_base=None, llm_mode="aware", llm_timeout=180.0, llm_retries=3, library=None,
                write=False, resume=None, runs_dir=Path(tmp) / "runs"))
            total = time.perf_counter() - t0
            history = run.load_history()
            best, base, rec = history.best(), history.baseline(), run.record
            to_best = sum(a.seconds for a in history.attempts if a.iteration <= best.iteration)
            table.add_row(name, rec.size, f"{base.report.hit_pct:.2f}", f"{best.report.hit_pct:.2f}",
                          f"{rec.ceiling_pct:.2f}", f"{rec.ceiling_pct - best.report.hit_pct:.2f}", best.family,
                          str(len(history)), f"{to_best:.1f}", f"{total:.1f}")
    out.print(table)
    out.print("seconds include validation (bijectivity and CPU-interpreter correctness) of every candidate")


if __name__ == "__main__":
    main()
