"""Kernel time, measured the way triton.testing.do_bench measures it, in a child process.

Each sample is one kernel launch between two CUDA events; with `l2="flushed"` a 256 MB
buffer is zeroed before every launch (outside the timed region), as do_bench does, so each
launch starts from a cold L2; with `l2="warm"` launches run back to back and each one finds
what the previous one left. The summary is the median and the 20th/80th percentiles
(linear interpolation, as torch.quantile). Time is the noisy, secondary signal: compare two
timings only through `speedup`, which carries the spread.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from swizzleperf.errors import ProfilerError
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.profilers.runner import L2State, RunnerTimes, child_env, run_tool, runner_command, write_candidate
from swizzleperf.records.report import Timing


def summarize_times(samples_ms: list[float], l2_state: L2State, source: str = "do_bench") -> Timing:
    """Median and 20/80 percentiles of per-launch times."""
    if not samples_ms:
        raise ProfilerError(f"no time samples to summarise ({source}); the kernel was never launched")
    median, p20, p80 = (float(v) for v in np.quantile(np.asarray(samples_ms, dtype=np.float64), [0.5, 0.2, 0.8]))
    return Timing(median_ms=median, p20_ms=p20, p80_ms=p80, repeats=len(samples_ms), l2_state=l2_state,
                  source=source)


def time_kernel(kernel: KernelFile, remap_source: str, size: str, repeats: int = 100, l2: L2State = "flushed",
                *, warmup: int = 10, num_xcds: int | None = None, timeout: float = 600.0) -> Timing:
    """Time `kernel` with its hook replaced by `remap_source`, in a fresh child on the local GPU.

    `num_xcds` is the value of the kernel's NUM_XCDS constexpr; None lets the child use the
    XCD count of the GPU it runs on. Raises ProfilerError naming the command if the child fails.
    """
    if repeats < 1:
        raise ProfilerError(f"repeats must be at least 1, got {repeats}")
    with tempfile.TemporaryDirectory(prefix="swizzleperf-timer-") as tmp:
        candidate = write_candidate(kernel, remap_source, Path(tmp))
        times_path = Path(tmp) / "times.json"
        cmd = runner_command(candidate, size, num_xcds=num_xcds, warmup=warmup, iters=repeats, l2=l2,
                             times_json=times_path)
        run_tool(cmd, timeout=timeout, what=f"timing {kernel.name} ({size})", env=child_env())
        times = RunnerTimes.model_validate_json(times_path.read_text())
    return summarize_times(times.times_ms, times.l2_state)


def speedup(baseline: Timing, candidate: Timing) -> tuple[float, float, float]:
    """baseline / candidate time as (ratio of medians, low, high).

    low pairs the baseline's fast end with the candidate's slow end (p20 / p80), high the
    reverse, so a range that straddles 1.0 says the difference is within the noise.
    """
    if baseline.l2_state != candidate.l2_state:
        raise ProfilerError(f"cannot compare a {baseline.l2_state}-L2 timing with a {candidate.l2_state}-L2 one; "
                            f"time both with the same l2 setting")
    return (baseline.median_ms / candidate.median_ms, baseline.p20_ms / candidate.p80_ms,
            baseline.p80_ms / candidate.p20_ms)
