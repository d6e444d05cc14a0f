"""The profiler protocol: one remap of one kernel at one size in, one bottleneck report out."""

from __future__ import annotations

from typing import Protocol

from swizzleperf.kernel.contract import KernelFile
from swizzleperf.records.report import BottleneckReport


class Profiler(Protocol):
    name: str  # the report's source: "sim", "ncu", "rocprofv3" (registry.py lists them)
    measures: bool  # counters of a real GPU (True) or a prediction (False); a measuring one needs a GPU of its own
    run_to_run_pts: float  # how far one remap's read hit rate moves between identical runs (0: deterministic)

    def profile(self, kernel: KernelFile, remap_source: str, size: str) -> BottleneckReport:
        """Profile `kernel` with its hook replaced by `remap_source` (already validated)."""
        ...
