"""Simulate the remaps a fidelity run measured and compare, kernel by kernel.

The simulator gets what the GPU showed about the kernel itself, as it would on that GPU: the
programs resident per SM (the tightest of ncu's `launch__occupancy_limit_*`) and the shared-memory
carve-out that sizes the L1 (`launch__shared_mem_config_size`). Nothing is fitted to the counters.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.lab.fidelity.measurement import MeasuredKernel, MeasuredRemap
from swizzleperf.lab.fidelity.ranks import spearman, spearman_with_ties
from swizzleperf.lab.fidelity.recordings import Reproducibility, measured_read_hit_pct
from swizzleperf.lab.fidelity.sm_placements import PlacementRecord, RecordedPlacement
from swizzleperf.profilers.ncu import (
    DRAM_FILLS,
    DRAM_READ,
    FAR_READ_HIT,
    OCCUPANCY_LIMITS,
    READ_HIT,
    READ_MISS,
    read_requests,
)
from swizzleperf.profilers.sim import SimProfiler
from swizzleperf.records.report import BottleneckReport
from swizzleperf.sim.engine import SimResult, simulate

CARVEOUT = "launch__shared_mem_config_size"


def measured_lookup_hit_pct(metrics: dict[str, float]) -> float:
    """The L2's own read lookup hit rate (what ncu's lookup counters say; merged requests are not in it)."""
    hits, misses = metrics[READ_HIT], metrics[READ_MISS]
    return 100.0 * hits / (hits + misses) if hits + misses else 0.0


def measured_split(metrics: dict[str, float]) -> tuple[float, float, float] | None:
    """Where the SMs' read requests were served, in percent: (near partition, far partition, DRAM); None for
    recordings without the far partition's counters. The three add up to 100 within the counters' noise."""
    requests, misses, _ = read_requests(metrics)
    if FAR_READ_HIT not in metrics or not requests:
        return None
    fills = metrics.get(DRAM_FILLS, metrics.get(DRAM_READ, 0.0) / 32)
    return 100.0 * (requests - misses) / requests, 100.0 * metrics[FAR_READ_HIT] / requests, 100.0 * fills / requests


def predicted_split(report: BottleneckReport) -> tuple[float, float, float] | None:
    """The simulator's (near, far, DRAM) shares of the read requests: far = read misses that DRAM did not serve."""
    if not report.accesses or report.bytes_from_next_level is None or not report.granule_bytes:
        return None
    dram = 100.0 * report.bytes_from_next_level / report.granule_bytes / report.accesses
    return report.hit_pct, max(0.0, 100.0 - report.hit_pct - dram), dram


def measured_resources(record: MeasuredKernel) -> tuple[int | None, int | None]:
    """(programs per SM, shared-memory carve-out bytes) of the identity launch, where ncu reported them."""
    metrics = record.remaps[0].metrics if record.remaps else {}
    limits = [metrics[m] for m in OCCUPANCY_LIMITS if m in metrics]
    return (int(min(limits)) if limits else None), (int(metrics[CARVEOUT]) if CARVEOUT in metrics else None)


def hardware_for(record: MeasuredKernel, hw: HardwareSpec) -> HardwareSpec:
    """`hw` running this kernel as measured: its occupancy and L1 size."""
    programs, carveout = measured_resources(record)
    if programs is not None:
        hw = hw.model_copy(update={"programs_per_cu": programs})
    return hw.with_shared_carveout(carveout) if carveout is not None else hw


@dataclass(frozen=True)
class RemapComparison:
    label: str
    measured_read_pct: float
    predicted_read_pct: float
    ceiling_pct: float
    measured_dram_bytes: float
    predicted_dram_bytes: float
    measured_lookup_pct: float | None = None  # the L2's own lookup hit rate, for the record
    measured_split: tuple[float, float, float] | None = None  # near, far, DRAM shares of the read requests (%)
    predicted_split: tuple[float, float, float] | None = None
    placed_read_pct: float | None = None  # predicted on the placement recorded on the GPU, where one was


@dataclass(frozen=True)
class KernelComparison:
    kernel: str
    size: str
    hardware: HardwareSpec
    remaps: list[RemapComparison]
    noise: Reproducibility | None = None  # from the recordings averaged into the measured figures, if several
    launch_of: tuple[int, ...] = ()  # per remap: the first remap that runs the same launch order at this size

    @property
    def read_mae(self) -> float:
        return float(np.mean([abs(r.measured_read_pct - r.predicted_read_pct) for r in self.remaps]))

    @property
    def measured_spread(self) -> float:
        values = [r.measured_read_pct for r in self.remaps]
        return max(values) - min(values)

    @property
    def rank_correlation(self) -> float | None:
        return spearman([r.measured_read_pct for r in self.remaps], [r.predicted_read_pct for r in self.remaps])

    @property
    def rank_correlation_beyond_noise(self) -> float | None:
        """The rank correlation with the remaps the recordings cannot tell apart scored as measured ties (the
        plain one, with one recording)."""
        if self.noise is None:
            return self.rank_correlation
        return spearman_with_ties([r.measured_read_pct for r in self.remaps],
                                  [r.predicted_read_pct for r in self.remaps], self.noise.tie_groups)

    def ordered_pairs(self, min_gap: float = 1.0) -> tuple[int, int]:
        """(pairs the simulator orders as measured, pairs compared) among remaps whose measured read hit
        rates differ by more than `min_gap` points; a predicted tie counts half. Rank correlation over
        every remap also scores the order of measured near-ties, which is noise."""
        agree, pairs = 0.0, 0
        rows = self.remaps
        for i, a in enumerate(rows):
            for b in rows[i + 1:]:
                measured = a.measured_read_pct - b.measured_read_pct
                if abs(measured) <= min_gap:
                    continue
                predicted = a.predicted_read_pct - b.predicted_read_pct
                pairs += 1
                agree += 0.5 if predicted == 0 else float((measured > 0) == (predicted > 0))
        return agree, pairs

    def distinct_launches(self) -> KernelComparison | None:
        """The comparison over distinct launch orders (None when every remap has its own): remaps that send every
        slot to the same program at this size run the same launch, so the simulator predicts them alike by
        construction and what the GPU measured between them is not the order's doing; each such group counts
        once, at its measured mean."""
        groups = sorted(set(self.launch_of))
        if len(groups) == len(self.remaps):
            return None
        rows = []
        for g in groups:
            members = [r for r, of in zip(self.remaps, self.launch_of) if of == g]
            rows.append(replace(members[0], label=" = ".join(r.label for r in members),
                                measured_read_pct=float(np.mean([r.measured_read_pct for r in members])),
                                measured_dram_bytes=float(np.mean([r.measured_dram_bytes for r in members])),
                                measured_lookup_pct=None, measured_split=None, placed_read_pct=None))
        noise = self.noise.merged(self.launch_of) if self.noise is not None and self.noise.rates else None
        return replace(self, remaps=rows, noise=noise, launch_of=tuple(range(len(rows))))

    def on_recorded_placement(self) -> KernelComparison | None:
        """The same comparison with the predictions made on the GPU's recorded placement (None unless every
        remap has one): what of the error is left once the scheduler model is out of it."""
        if not self.remaps or any(r.placed_read_pct is None for r in self.remaps):
            return None
        return replace(self, remaps=[replace(r, predicted_read_pct=r.placed_read_pct) for r in self.remaps])

    @property
    def dram_mean_abs_rel_error(self) -> float:
        return float(np.mean([abs(r.predicted_dram_bytes - r.measured_dram_bytes) / max(r.measured_dram_bytes, 1.0)
                              for r in self.remaps]))

    @property
    def worst_over_ceiling(self) -> float:
        """How far the measured read hit rate lies above the ceiling (negative: below, as it must)."""
        return max(r.measured_read_pct - r.ceiling_pct for r in self.remaps)


def compare_kernel(kernel: KernelFile, record: MeasuredKernel, hw: HardwareSpec, profiler_factory=SimProfiler,
                   progress=None, noise: Reproducibility | None = None,
                   placements: PlacementRecord | None = None) -> KernelComparison:
    kernel_hw = hardware_for(record, hw)
    profiler = profiler_factory(kernel_hw, progress=progress, gpu_occupancy=False)  # occupancy as measured
    orders = [profiler.program_for_slot(kernel, remap.source, record.size) for remap in record.remaps]
    rows = []
    for remap, slots in zip(record.remaps, orders):
        row = _compare(profiler.profile(kernel, remap.source, record.size), remap)
        placed = placements.find(record.kernel, record.size, remap.label) if placements else None
        if placed is not None:
            row = replace(row, placed_read_pct=_placed_read_pct(profiler, kernel, record.size, slots, placed))
        rows.append(row)
    return KernelComparison(kernel=record.kernel, size=record.size, hardware=kernel_hw, remaps=rows, noise=noise,
                            launch_of=_launch_orders(orders, kernel.persistent))


def _launch_orders(orders: list[np.ndarray], persistent: bool) -> tuple[int, ...]:
    """Per measured remap, the first remap with the same launch order (slot -> program) at the measured size
    (a persistent kernel's remaps are told apart by their schedules, not compared here: each its own)."""
    if persistent:
        return tuple(range(len(orders)))
    return tuple(next(j for j in range(i + 1) if np.array_equal(orders[j], order)) for i, order in enumerate(orders))


def _placed_read_pct(profiler: SimProfiler, kernel: KernelFile, size: str, slots: np.ndarray,
                     placed: RecordedPlacement) -> float:
    """The read hit rate predicted with every launch slot on the SM the GPU ran it on (`slots`: the measured
    remap's launch order). The recorded remap must send every slot where the measured one does (its source may
    be rendered differently)."""
    if not np.array_equal(profiler.program_for_slot(kernel, placed.source, size), slots):
        raise ValueError(f"{kernel.name} {size}: the placement recorded as {placed.remap!r} ran another remap "
                         f"than the one measured under that label")
    return simulated_on_sms(profiler, kernel, size, slots, placed.smid).read_hit_pct


def simulated_on_sms(profiler: SimProfiler, kernel: KernelFile, size: str, slots: np.ndarray, smid) -> SimResult:
    """The simulator's replay of a launch (`slots`: its launch order) with every slot on the SM a GPU ran it on
    (`smid`, per slot), as probes record them."""
    hw, _ = profiler.kernel_hardware(kernel, size)
    return simulate(profiler.trace(kernel, size), slots, hw, recorded_cus=np.asarray(smid))


def _compare(report: BottleneckReport, remap: MeasuredRemap) -> RemapComparison:
    return RemapComparison(label=remap.label, measured_read_pct=measured_read_hit_pct(remap.metrics),
                           predicted_read_pct=report.hit_pct,
                           ceiling_pct=100.0 if report.ceiling_pct is None else report.ceiling_pct,
                           measured_dram_bytes=remap.metrics.get(DRAM_READ, float("nan")),
                           predicted_dram_bytes=float(report.bytes_from_next_level or 0),
                           measured_lookup_pct=measured_lookup_hit_pct(remap.metrics),
                           measured_split=measured_split(remap.metrics), predicted_split=predicted_split(report))
