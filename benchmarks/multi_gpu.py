"""Parallel GPU evaluation: the same optimize and bench on one GPU and on every GPU of this host.

    python benchmarks/multi_gpu.py OUT [--only optimize|bench] [--executor ray|pool] [--timeout S]
                                       [--other-sizes SIZES]

For each command (`optimize kernels/gemm.py --profiler ncu -n 8` and `bench softmax gemm attention
--profiler ncu -n 4`, each with `--ray auto`, or `--workers N` with `--executor pool`) it runs the
request with all GPUs visible, then with CUDA_VISIBLE_DEVICES=0, each from a cold Triton cache of its
own, times both, and audits what they recorded (swizzleperf.executors.audit): which GPUs ran profiles,
whether two profiles ever shared a GPU (from each attempt's device, start and length; bench: each
kernel's), the most that ran at once, and whether the two runs recorded the same attempts apart from
timings (proposals, stages and verdicts exactly; ncu's hit rates within its run-to-run noise, the
largest difference printed). Needs torch (CUDA), triton, ncu and, for Ray, `ray`. Writes OUT/summary.md,
the runs under OUT/<command>-<n>gpu/ and each run's console log beside it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from swizzleperf.bench.records import BenchReport
from swizzleperf.executors.audit import (
    attempt_occupancy, bench_occupancy, compare_attempts, peak_concurrency, shared_gpu)
from swizzleperf.runs import RunDir

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "optimize": ["optimize", "kernels/gemm.py", "--profiler", "ncu", "-n", "8", "--no-library"],
    "bench": ["bench", "softmax", "gemm", "attention", "--profiler", "ncu", "-n", "4"],
}
NCU_NOISE_PTS = 1.0  # read hit rates of one remap moved up to ~0.3 points between ncu runs (fidelity repeats)


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


def run(command: str, gpus: int, executor: str, out: Path, timeout: float, other_sizes: str | None) -> dict:
    """One command on the first `gpus` GPUs; its wall time and where it wrote."""
    where = out / f"{command}-{gpus}gpu"
    where.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "swizzleperf", *COMMANDS[command], "--runs-dir", str(where / "runs")]
    args += ["--ray", "auto"] if executor == "ray" else ["--workers", str(gpus)]
    if command == "bench":
        args += ["--out", str(where / "bench")] + (["--other-sizes", other_sizes] if other_sizes else [])
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(gpus))),
           "TRITON_CACHE_DIR": str(where / "triton-cache")}
    t0 = time.perf_counter()
    with open(where / "console.log", "w") as log:
        try:
            code = subprocess.run(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = "timed out"
    return {"where": where, "seconds": time.perf_counter() - t0, "exit": code, "args": args}


def recorded_runs(where: Path, command: str) -> tuple[list[RunDir], list]:
    """The run directories a command wrote (bench: in its kernels' order) and the GPU spans it recorded."""
    if command == "bench":
        report = BenchReport.model_validate_json((where / "bench" / "bench.json").read_text())
        runs = [RunDir.open(Path(row.run_dir)) for row in report.kernels if row.run_dir]
        return runs, bench_occupancy(report.kernels)
    runs = [RunDir.open(path) for path in sorted((where / "runs").iterdir()) if path.is_dir()]
    return runs, [span for r in runs for span in attempt_occupancy(r.load_history().attempts)]


def audit(command: str, many: dict, one: dict) -> list[str]:
    """The summary's lines for one command: times, GPUs, clashes, and the two runs' attempts compared."""
    lines = [f"## {command}: `{' '.join(many['args'][1:])}`", "",
             "| GPUs | wall time | exit | GPUs that ran profiles | most at once | two on one GPU |", "|---|---|---|---|---|---|"]
    runs = {}
    for n, result in ((many["gpus"], many), (1, one)):
        try:
            runs[n], spans = recorded_runs(result["where"], command)
        except (OSError, ValueError) as exc:
            lines.append(f"| {n} | {result['seconds']:.1f} s | {result['exit']} | records unreadable: {exc} | | |")
            continue
        gpus = sorted({s.gpu for s in spans})
        clashes = shared_gpu(spans)
        lines.append(f"| {n} | {result['seconds']:.1f} s | {result['exit']} | {', '.join(gpus) or 'none recorded'} | "
                     f"{peak_concurrency(spans)} | {len(clashes)}"
                     + "".join(f"; {a.what} and {b.what} on {a.gpu}" for a, b in clashes[:3]) + " |")
    lines += ["", f"Wall time, 1 GPU / {many['gpus']} GPUs: {one['seconds'] / many['seconds']:.2f}x.", ""]
    if len(runs) == 2:
        for a, b in zip(runs[many["gpus"]], runs[1]):
            result = compare_attempts(a.load_history().attempts, b.load_history().attempts, NCU_NOISE_PTS)
            verdict = "identical apart from timings" if result.identical else "; ".join(result.differences[:4])
            lines.append(f"- {a.record.kernel.name}: {result.compared} attempts compared: {verdict} (measured hit "
                         f"rates at most {result.max_hit_difference_pts:.2f} points apart)")
    return lines + [""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", choices=sorted(COMMANDS), action="append")
    parser.add_argument("--executor", choices=["ray", "pool"], default="ray")
    parser.add_argument("--timeout", type=float, default=280.0, help="seconds per run (each command runs twice)")
    parser.add_argument("--other-sizes", help="bench's --other-sizes (default: every other declared size)")
    options = parser.parse_args()
    gpus = gpu_count()
    if gpus < 2:
        print(f"this host has {gpus} GPU(s): the comparison needs two or more", file=sys.stderr)
        return 2
    summary = [f"# Parallel GPU evaluation: {gpus} GPUs against 1 ({options.executor})", ""]
    for command in options.only or list(COMMANDS):
        many = {**run(command, gpus, options.executor, options.out, options.timeout, options.other_sizes), "gpus": gpus}
        one = run(command, 1, options.executor, options.out, options.timeout, options.other_sizes)
        summary += audit(command, many, one)
        (options.out / "summary.md").write_text("\n".join(summary))
        print("\n".join(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
