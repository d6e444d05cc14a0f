"""Several recordings of one kernel's remaps: their mean, and how far they agree with each other.

A fidelity run is noisy (ncu replays each remap's launch; the scheduler places programs differently
every time), so a kernel is recorded more than once and compared against the mean; the recordings'
own disagreement says how firm the measured order is, which no model can be asked to beat.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from swizzleperf.lab.fidelity.measurement import MeasuredKernel
from swizzleperf.lab.fidelity.ranks import spearman, tie_groups
from swizzleperf.profilers.ncu import read_requests


def measured_read_hit_pct(metrics: dict[str, float]) -> float:
    """The SMs' read requests that did not miss in the L2 (`ncu.read_requests`: merged requests count as served)."""
    requests, misses, _ = read_requests(metrics)
    return 100.0 * (requests - misses) / requests if requests else 0.0


@dataclass(frozen=True)
class Reproducibility:
    """How well a kernel's measurement agrees with itself across recordings."""

    recordings: int
    worst_rank_correlation: float | None  # the lowest Spearman between two recordings' read hit rates
    largest_difference: float             # points: the most one remap's read hit rate moved between recordings
    tie_groups: tuple[int, ...]           # per remap: remaps of one group are ones the recordings cannot tell apart
    rates: tuple[tuple[float, ...], ...] = ()  # [recording][remap]: the read hit rates compared

    def merged(self, launch_of: tuple[int, ...]) -> Reproducibility:
        """The same recordings with the remaps of one launch order (`launch_of[i]`: the first remap that
        runs remap i's order) merged into one, their rates averaged: for comparing distinct launch orders."""
        columns = sorted(set(launch_of))
        rates = np.array(self.rates)
        merged = np.stack([rates[:, [i for i, g in enumerate(launch_of) if g == c]].mean(axis=1) for c in columns], 1)
        return reproducibility_of(merged)


def same_remaps(a: MeasuredKernel, b: MeasuredKernel) -> bool:
    return (a.kernel, a.size) == (b.kernel, b.size) and [r.label for r in a.remaps] == [r.label for r in b.remaps]


def averaged(records: list[MeasuredKernel]) -> MeasuredKernel:
    """One record whose counters are the mean of the recordings' (same kernel, size and remaps); a counter
    that some recordings lack is left out."""
    first = records[0]
    assert all(same_remaps(first, r) for r in records), "recordings of different remaps cannot be averaged"
    remaps = []
    for i, remap in enumerate(first.remaps):
        values = [r.remaps[i].metrics for r in records]
        common = set.intersection(*(set(v) for v in values))
        remaps.append(remap.model_copy(update={"metrics": {name: float(np.mean([v[name] for v in values]))
                                                           for name in remap.metrics if name in common}}))
    return first.model_copy(update={"remaps": remaps})


def reproducibility(records: list[MeasuredKernel]) -> Reproducibility:
    return reproducibility_of(np.array([[measured_read_hit_pct(r.metrics) for r in record.remaps]
                                      for record in records]))


def reproducibility_of(rates: np.ndarray) -> Reproducibility:
    """From rates[recording, remap]."""
    pairs = [(a, b) for i, a in enumerate(rates) for b in rates[i + 1:]]
    rhos = [rho for a, b in pairs if (rho := spearman(a, b)) is not None]
    moved = [abs(x - y) for a, b in pairs for x, y in zip(a, b)]
    return Reproducibility(recordings=len(rates), worst_rank_correlation=min(rhos) if rhos else None,
                           largest_difference=float(max(moved, default=0.0)), tie_groups=tie_groups(rates),
                           rates=tuple(tuple(float(x) for x in row) for row in rates))
