"""What a confined child costs: each check started afresh, or forked from a warm server (untrusted/forkserver).

    .venv/bin/python benchmarks/bench_children.py [KERNEL] [--calls N]

Runs the kernel's own hook through the correctness check (the CPU interpreter: torch and Triton in the
child) and the bijectivity check (sampled grids and the z3 proof: two children) N times each, with
SWIZZLEPERF_FORK_SERVER=0 and =1, and prints the seconds per call and the ratio. The first call with
servers on starts them; it is counted.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.hardware.spec import hook_constants
from swizzleperf.kernel.contract import find_kernel, load_kernel
from swizzleperf.untrusted import forkserver
from swizzleperf.validation import proof_status
from swizzleperf.validation.bijectivity import bijectivity_grids, check_bijective
from swizzleperf.validation.correctness import check_correctness


def _per_call(check, calls: int, servers: bool) -> float:
    os.environ["SWIZZLEPERF_FORK_SERVER"] = "1" if servers else "0"
    forkserver._close_all()  # servers on: the first call starts them and pays for it
    t0 = time.perf_counter()
    for _ in range(calls):
        check()
    return (time.perf_counter() - t0) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kernel", nargs="?", default="softmax")
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    kernel = load_kernel(find_kernel(args.kernel))
    hw = PRESETS["mi300x"]
    grids = bijectivity_grids(kernel.hook, [kernel.grid(n) for n in kernel.sizes], hw.num_domains)
    checks = {
        "correctness (CPU interpreter)": lambda: check_correctness(kernel, kernel.hook_source, seeds=(0,)),
        "bijectivity (sampled + z3)": lambda: (proof_status._cache.clear(),  # the proof again each time
                                               check_bijective(kernel.hook_source, kernel.hook, grids,
                                                               hook_constants(kernel, hw))),
    }
    table = Table(title=f"{Path(kernel.path).name}: seconds per check, {args.calls} calls, on {os.cpu_count()} cores",
                  title_justify="left")
    for col in ("check", "started afresh", "forked from a server", "ratio"):
        table.add_column(col, justify="left" if col == "check" else "right")
    for name, check in checks.items():
        fresh, forked = _per_call(check, args.calls, False), _per_call(check, args.calls, True)
        table.add_row(name, f"{fresh:.2f}", f"{forked:.2f}", f"{fresh / forked:.1f}x")
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
