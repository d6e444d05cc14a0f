"""Counters from a profiler, time from the timer: a hardware profiler plus honest timing.

A profiler's own kernel duration is taken with counters on and replays in between, so it is
not the time a user would see. When a GPU runs the measurement, each profile is followed by
a do_bench-style timing of the same kernel and remap (median and spread over repeats, L2
flushed before each), which is what ranks equal hit rates and what speedups are computed from.
"""

from __future__ import annotations

from swizzleperf.kernel.contract import KernelFile
from swizzleperf.profilers.base import Profiler
from swizzleperf.profilers.timer import time_kernel
from swizzleperf.records.report import BottleneckReport


class TimedProfiler:
    def __init__(self, inner: Profiler, num_xcds: int, repeats: int = 100):
        self.inner = inner
        self.name = inner.name
        self.measures = inner.measures
        self.run_to_run_pts = inner.run_to_run_pts
        self.num_xcds = num_xcds
        self.repeats = repeats

    def profile(self, kernel: KernelFile, remap_source: str, size: str) -> BottleneckReport:
        report = self.inner.profile(kernel, remap_source, size)
        timing = time_kernel(kernel, remap_source, size, repeats=self.repeats, l2="flushed", num_xcds=self.num_xcds)
        note = (f"time: triton do_bench-style median of {timing.repeats} launches, L2 flushed before each "
                f"(the profiler's own duration is taken with counters on and is not used)")
        return report.model_copy(update={"timing": timing, "notes": [*report.notes, note]})
