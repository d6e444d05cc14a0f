"""The profiler protocol: one remap of one kernel at one size in, one bottleneck report out."""

from __future__ import annotations

from typing import Protocol

from swizzleperf.kernel.contract import KernelFile
from swizzleperf.records.report import BottleneckReport


class Profiler(Protocol):
    name: str  # "sim", "ncu" or "rocprofv3": the report's source

    def profile(self, kernel: KernelFile, remap_source: str, size: str) -> BottleneckReport:
        """Profile `kernel` with its hook replaced by `remap_source` (already validated)."""
        ...
