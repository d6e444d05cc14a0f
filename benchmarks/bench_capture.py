"""Trace capture speed: fast mode at each kernel's default size, reference mode for scale.

    .venv/bin/python benchmarks/bench_capture.py [kernel ...]     (names or paths; default: kernels/*.py)

Fast mode runs through the public `capture_trace` with an empty cache (a fresh temporary cache
directory), so it includes the child process, imports and the sample check against reference
mode. Two rates are printed: over the capture itself (`TraceMeta.seconds - setup_seconds`, which
leaves out building the inputs) and end to end. Reference mode runs in this process on a prefix
of the launch (up to 64 programs, about 15 s at most), its rate over the same capture time.
The goal for softmax "medium" is >= 2 M line accesses/s over the capture. The machine may be
shared: the load average is printed with the results.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported (reference prefix runs here)
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # as capture_trace's child does
    os.environ.setdefault(var, "1")

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from swizzleperf.kernel.contract import load_kernel  # noqa: E402
from swizzleperf.sim.capture.trace_capture import cached_trace_path, capture_trace, record_trace  # noqa: E402
from swizzleperf.sim.trace.record import TraceMeta  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_PROGRAMS = 64
REFERENCE_SECONDS = 15.0


def kernel_paths(names: list[str]) -> list[Path]:
    if not names:
        return sorted((ROOT / "kernels").glob("*.py"))
    return [Path(n) if n.endswith(".py") else ROOT / "kernels" / f"{n}.py" for n in names]


def capture_rate(meta: TraceMeta, accesses: int) -> float:
    return accesses / max(meta.seconds - meta.setup_seconds, 1e-9) / 1e6


def bench_fast(kernel, size: str) -> tuple[TraceMeta, float]:
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as cache:
        start = time.perf_counter()
        capture_trace(kernel, size, cache_dir=Path(cache))
        wall = time.perf_counter() - start
        return TraceMeta.read(cached_trace_path(kernel, size, 128, Path(cache))), wall


def bench_reference(kernel, size: str, num_programs: int) -> tuple[int, float]:
    """(programs run, M line accesses/s) of reference mode on a prefix of the launch."""
    probe = min(4, num_programs)
    trace, meta = record_trace(kernel, size, mode="reference", programs=range(probe))
    per_program = (meta.seconds - meta.setup_seconds) / probe
    count = max(probe, min(REFERENCE_PROGRAMS, num_programs, int(REFERENCE_SECONDS / max(per_program, 1e-9))))
    if count > probe:
        trace, meta = record_trace(kernel, size, mode="reference", programs=range(count))
    return count, capture_rate(meta, trace.num_accesses)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", nargs="*", help="kernel names in kernels/ or paths (default: all)")
    args = parser.parse_args()
    header = (f"{'kernel':<12} {'size':<8} {'programs':>9} {'accesses':>12} {'capture s':>10} {'fast M/s':>9} "
              f"{'end-to-end s':>13} {'e2e M/s':>8} {'ref progs':>9} {'ref M/s':>8} {'speedup':>8}  mode")
    print(header)
    for path in kernel_paths(args.kernels):
        kernel = load_kernel(path)
        size = kernel.default_size
        meta, wall = bench_fast(kernel, size)
        fast = capture_rate(meta, meta.num_accesses)
        ref_programs, ref = bench_reference(kernel, size, meta.num_programs)
        mode = meta.mode + (f" (fell back: {meta.fallback_reason})" if meta.fallback_reason else "")
        print(f"{kernel.name:<12} {size:<8} {meta.num_programs:>9,} {meta.num_accesses:>12,} "
              f"{meta.seconds - meta.setup_seconds:>10.2f} {fast:>9.2f} {wall:>13.2f} "
              f"{meta.num_accesses / wall / 1e6:>8.2f} {ref_programs:>9} {ref:>8.3f} {fast / ref:>7.0f}x  {mode}",
              flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
