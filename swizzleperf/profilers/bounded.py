"""Counters from a profiler, bounds from a capture: what a measured run cannot count, taken from the same launch.

Hardware counters say how many L2 reads missed, not how many had to (they do not count unique lines), so
a measured report has no read-hit ceiling and no compulsory misses of its own. Both depend only on the
kernel and its size, not on the remap, so one capture of the launch on the CPU (the simulator's trace, run
by the Triton interpreter in a child) gives them for every measured report of a run: the ceiling (every
read-only sector fetched once), the compulsory misses in the counters' unit (32-byte sectors), and on one
shared L2 the achievable bound (= the ceiling: every assignment of programs shares it). The capture runs once
per kernel and size within a time budget (`SWIZZLEPERF_BOUNDS_CAPTURE_S`, default 120 s); a launch that takes
longer gets no bounds and a note saying so. Counters that mix reads and writes (rocprofv3's) are not bounded
by a read-hit ceiling: their reports get a note instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from swizzleperf.errors import CaptureTimedOut, SwizzlePerfError
from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.profilers.base import Profiler
from swizzleperf.records.report import BottleneckReport
from swizzleperf.sim.capture.batched_ops import SUPPORTED_TRITON
from swizzleperf.sim.settings import bounds_capture_seconds


def _triton() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("triton")
    except PackageNotFoundError:
        return "(not installed)"


def capture_mode() -> str:
    """The fast capture where this machine's triton is the one it hooks, else the slow version-tolerant one."""
    return "fast" if _triton().startswith(SUPPORTED_TRITON) else "reference"


@dataclass(frozen=True)
class LaunchBounds:
    """The remap-independent bounds of one launch, from its trace (None where the capture did not fit)."""

    ceiling_pct: float | None
    compulsory: int | None  # read-only sectors: the fewest read misses any order can make
    note: str


class BoundedProfiler:
    def __init__(self, inner: Profiler, hw: HardwareSpec, budget_s: float | None = None):
        self.inner = inner
        self.name = inner.name
        self.measures = inner.measures
        self.run_to_run_pts = inner.run_to_run_pts
        self.hw = hw
        self.budget_s = bounds_capture_seconds() if budget_s is None else budget_s
        self._bounds: dict[tuple[str, str], LaunchBounds] = {}

    def profile(self, kernel: KernelFile, remap_source: str, size: str) -> BottleneckReport:
        report = self.inner.profile(kernel, remap_source, size)
        if report.metric != "read":
            return report.model_copy(update={"notes": [*report.notes, (
                "read-hit ceiling n/a: these counters mix reads and writes, and the ceiling bounds reads")]})
        bounds = self.bounds(kernel, size)
        update = {"notes": [*report.notes, bounds.note]}
        if bounds.ceiling_pct is not None and report.granule_bytes == self.hw.sector_bytes:
            update |= {"ceiling_pct": bounds.ceiling_pct, "unique_lines": bounds.compulsory}
            if self.hw.num_domains == 1:
                update["achievable_pct"] = bounds.ceiling_pct
        return report.model_copy(update=update)

    def bounds(self, kernel: KernelFile, size: str) -> LaunchBounds:
        """The launch's bounds, captured once per kernel and size."""
        key = (kernel.sha256, size)
        if key not in self._bounds:
            self._bounds[key] = self._capture(kernel, size)
        return self._bounds[key]

    def _capture(self, kernel: KernelFile, size: str) -> LaunchBounds:
        from swizzleperf.sim.capture.trace_capture import capture_trace
        from swizzleperf.sim.engine import prepare

        budget = f"{self.budget_s:g} s"
        over = LaunchBounds(None, None, (
            f"read-hit ceiling n/a: capturing this launch on the CPU takes over {budget} (the budget; "
            f"SWIZZLEPERF_BOUNDS_CAPTURE_S raises it; `--profiler sim` predicts it at a smaller size)"))
        if self.budget_s <= 0:
            return over
        mode = capture_mode()
        try:
            trace = capture_trace(kernel, size, line_bytes=self.hw.line_bytes, mode=mode, timeout=self.budget_s)
        except CaptureTimedOut:
            return over if mode == "fast" else LaunchBounds(None, None, over.note + (
                f"; this machine's triton {_triton()} takes the slow reference capture (the fast one needs "
                f"{SUPPORTED_TRITON}x)"))
        except SwizzlePerfError as exc:
            why = "" if mode == "fast" else (f"; this machine's triton {_triton()} takes the reference capture, the "
                                             f"fast one needs {SUPPORTED_TRITON}x")
            return LaunchBounds(None, None, f"read-hit ceiling n/a: the launch could not be captured ({exc}){why}")
        b = prepare(trace).bounds(self.hw.sectors_per_line)
        return LaunchBounds(b.ceiling_pct, b.read_only_unique, (
            f"read-hit ceiling and compulsory misses computed from a capture of the same launch on the CPU "
            f"({trace.num_accesses / 1e6:.3g} M line accesses, within the {budget} budget), not counted by the GPU: "
            f"{b.read_only_unique:,} read-only sectors of {b.read_sectors:,} read"))
