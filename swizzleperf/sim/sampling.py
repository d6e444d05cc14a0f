"""Set sampling: simulate a fixed subset of the L2 sets exactly, and scale up.

L2 sets never interact: a line only ever occupies its own set, in the near and the home partition
alike. So the sampled sets see exactly what they would in a full simulation, provided what reaches
them is exact, and that is the L1's business: each CU's L1 is indexed by its own hash of the line,
so a sampled line shares L1 sets with unsampled ones, and dropping those would make L1 hits rise.
The L1 therefore sees every load (every sampled line's whole history is simulated, behind an exact
L1) and only the L2 lookups of unsampled lines are skipped. Read lookups (the L1's misses) are then
exact; read hits, DRAM fetches and first fetches are scaled by read lookups / sampled lookups per
domain. The error is the sampling's alone: how far the sampled sets' hit rate is from all sets'.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.sim import settings
from swizzleperf.sim.replay import (
    DRAM_FETCHES,
    FIRST_FETCHES,
    N_COUNTS,
    PROMOTED_MISSES,
    READ_HITS,
    READ_LOOKUPS,
    SAMPLED_LOOKUPS,
)

# benchmarks/bench_scale.py, every suite kernel at its default size on mi300x and h100 at the default
# sample: the largest difference from full simulation in read hit rate, in points
MEASURED_ERROR_POINTS = 0.27
# Sets interact with nothing, but how full each one is varies from set to set, and a kernel near the
# L2's capacity turns that into hit-rate differences between sets: with 256 sets of MI300X's 2048
# sampled, layernorm's estimate was 1.4 points off (0.03 with 512). So at least this many sets of
# each partition are simulated, whatever the setting asks.
MIN_SAMPLED_SETS = 512


@dataclass(frozen=True)
class SetSample:
    """One L2 set in `every` is simulated: sets s with s % every == 0 (of each partition)."""

    every: int
    num_sets: int

    def mask(self) -> np.ndarray:
        sets = np.zeros(self.num_sets, np.uint8)
        sets[::self.every] = 1
        return sets

    def note(self, accesses: int) -> str:
        measured = (f"at most {MEASURED_ERROR_POINTS:.2f} points of read hit rate on every suite kernel "
                    f"(benchmarks/bench_scale.py)" if MEASURED_ERROR_POINTS is not None else "not yet measured")
        return (f"set sampling ({accesses / 1e6:,.0f} M line accesses): 1 L2 set in {self.every} simulated exactly "
                f"(every access to its lines, behind L1s that see every load); read hits, DRAM and first fetches "
                f"scaled by read lookups / sampled lookups; error against full simulation: {measured}")


def choose_sample(hw: HardwareSpec, accesses: int, every: int | None = None) -> SetSample | None:
    """The sample to simulate: `every` if given (1: all sets), else 1 in `settings.sample_every()` for
    traces past `settings.sample_above()` line accesses (at least MIN_SAMPLED_SETS sets per partition),
    else none (full simulation)."""
    if every is None:
        above = settings.sample_above()
        every = settings.sample_every() if above and accesses > above else 1
        every = min(every, max(1, hw.sets_per_partition // MIN_SAMPLED_SETS))
    if every < 1:
        raise ValueError(f"set sampling takes one set in N for N >= 1, got {every}")
    return SetSample(every=every, num_sets=hw.sets_per_partition) if every > 1 else None


def scale_counts(raw: np.ndarray) -> np.ndarray:
    """int64[D, N_COUNTS] from the pass's counts int64[D, N_COUNTS + 1]: the sampled sets' read hits,
    DRAM, first fetches and promoted misses scaled to all of the domain's read lookups (exact when every set
    is sampled). A domain none of whose lookups fell in a sampled set takes the pooled ratio of all domains."""
    out = raw[:, :N_COUNTS].copy()
    pooled_sampled = int(raw[:, SAMPLED_LOOKUPS].sum())
    for d in range(raw.shape[0]):
        whole, sampled = int(raw[d, READ_LOOKUPS]), int(raw[d, SAMPLED_LOOKUPS])
        if sampled == whole:
            continue
        for what in (READ_HITS, DRAM_FETCHES, FIRST_FETCHES, PROMOTED_MISSES):
            value, den = (int(raw[d, what]), sampled) if sampled else (int(raw[:, what].sum()), pooled_sampled)
            out[d, what] = (value * whole + den // 2) // den if den else 0
    return out
