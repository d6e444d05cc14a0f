"""What `swizzleperf bench` writes (bench.json): per kernel, its run and its best remap at the other sizes."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.records.report import BottleneckReport, Source

# --- the records -------------------------------------------------------------------------------

class Speedup(BaseModel):
    """Baseline time over best time (do_bench medians), with the p20/p80 range."""

    model_config = ConfigDict(extra="forbid")
    ratio: float
    low: float
    high: float
    l2_state: str

    @classmethod
    def between(cls, baseline: BottleneckReport, best: BottleneckReport) -> Speedup | None:
        """None unless both reports carry a timing."""
        if baseline.timing is None or best.timing is None:
            return None
        from swizzleperf.profilers.timer import speedup

        ratio, low, high = speedup(baseline.timing, best.timing)
        return cls(ratio=ratio, low=low, high=high, l2_state=best.timing.l2_state)

    def cell(self) -> str:
        return f"{self.ratio:.3f}x [{self.low:.3f}-{self.high:.3f}]"


class SizeResult(BaseModel):
    """The best remap at one other size of the kernel, next to the kernel's own remap there."""

    model_config = ConfigDict(extra="forbid")
    size: str
    status: Literal["profiled", "rejected", "skipped", "failed"]
    reason: str | None = Field(None, description="why it was rejected, skipped or failed")
    validation: str = Field("", description="what was checked at this size, in words")
    baseline_hit_pct: float | None = None
    best_hit_pct: float | None = None
    ceiling_pct: float | None = None
    line_accesses: int | None = Field(None, description="the trace's line accesses (simulator only)")
    accesses_estimated: bool = Field(False, description="line_accesses is an estimate: the trace was not captured")
    speedup: Speedup | None = Field(None, description="only where the profiler measured time")
    seconds: float

    def cell(self) -> str:
        if self.status == "profiled":
            ceiling = "n/a" if self.ceiling_pct is None else f"{self.ceiling_pct:.2f}"
            timed = "" if self.speedup is None else f", {self.speedup.cell()}"
            return f"{self.size}: {self.baseline_hit_pct:.2f} -> {self.best_hit_pct:.2f} (ceiling {ceiling}{timed})"
        return f"{self.size}: {self.status}: {self.reason}"


class KernelResult(BaseModel):
    """One kernel of the suite: its optimize run and the best remap at the other sizes."""

    model_config = ConfigDict(extra="forbid")
    kernel: str
    kernel_path: str
    status: Literal["finished", "failed"]
    error: str | None = None
    run_dir: str | None = None
    size: str | None = None
    source: Source | None = Field(None, description="where the hit rates come from: sim (predicted), ncu, rocprofv3")
    misses_ratio: float | None = Field(None, description="the best remap's L2 read misses over the kernel's own "
                                                         "order's: the quantity runs rank by")
    baseline_hit_pct: float | None = None
    best_hit_pct: float | None = None
    ceiling_pct: float | None = None
    improvement_pts: float | None = None
    speedup: Speedup | None = Field(None, description="only where the profiler measured time")
    best_family: str | None = None
    best_iteration: int | None = None
    attempts: int = 0
    seconds_to_best: float | None = Field(None, description="attempt seconds up to and including the best "
                                                            "(the baseline's trace capture included)")
    run_seconds: float = Field(description="the whole optimize run")
    started_at: datetime | None = Field(None, description="when the kernel's optimize run began")
    gpu: str | None = Field(None, description="host and GPU id the kernel ran on, where an executor gave it one "
                                              "of several")
    other_sizes: list[SizeResult] = Field(default_factory=list)
    generalise_seconds: float = 0.0


class BenchReport(BaseModel):
    """bench.json (schema 2 added other_sizes, kernels_planned and per-size speedups)."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 2
    created_at: datetime
    hardware: HardwareSpec
    hardware_reason: str
    profiler: str
    profiler_reason: str
    proposer: str
    iterations: int
    seed: int
    correctness_device: str
    max_sim_accesses: int
    capture_timeout_s: float
    other_sizes: list[str] | None = Field(None, description="the other sizes asked for; None: every declared size")
    kernels: list[KernelResult]
    kernels_planned: int = Field(description="kernels in the suite; more than len(kernels) while it runs")
    total_seconds: float

    @property
    def complete(self) -> bool:
        return len(self.kernels) == self.kernels_planned

    @property
    def label(self) -> str:
        return "predicted by the simulator" if self.profiler == "sim" else f"measured by {self.profiler}"


def misses_cell(ratio: float | None) -> str:
    """The ranked quantity in a table: the best remap's read misses as a multiple of the kernel's own."""
    return "" if ratio is None else f"{ratio:.2f}x"
