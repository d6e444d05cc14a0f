"""The achievable multi-die bound of one kernel trace: its read-only sectors as a hypergraph.

Nets are the sectors (lines where a line is one sector) that the kernel reads and never writes:
written sectors are allocated without a fetch, so where they are read costs nothing. Each program
is a vertex over the nets it reads. The bound's hit rate uses the ceiling's denominator (every
read sector, before any L1), so achievable <= ceiling, with equality on one die.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.sim.bounds.hypergraph import reduce_reads
from swizzleperf.sim.bounds.partition import PartitionerFailed, partition_reads
from swizzleperf.sim.prepared import PreparedTrace, read_only_masks


def read_only_nets(prepared: PreparedTrace, sectors_per_line: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(offsets over programs, net ids, number of net ids): the read-only sectors each program reads."""
    read_only = read_only_masks(prepared, sectors_per_line)
    if sectors_per_line == 1:  # AMD: a line is one sector
        access, sector = np.flatnonzero(read_only), 0
    else:  # row-major: accesses in trace order, so programs stay contiguous
        bits = np.unpackbits(read_only[:, None], axis=1, bitorder="little")[:, :sectors_per_line].astype(bool)
        access, sector = np.nonzero(bits)
    nets = prepared.line_ids[access].astype(np.int64) * sectors_per_line + sector
    # accesses -> programs: program p owns accesses event_offsets[program_offsets[p]] ...
    access_start = prepared.event_offsets[prepared.program_offsets]
    offsets = np.searchsorted(access, access_start, side="left")
    return offsets.astype(np.int64), nets, prepared.unique_lines * sectors_per_line


def assignment_fetches(offsets: np.ndarray, nets: np.ndarray, part: np.ndarray, num_parts: int) -> int:
    """Fetches with caches big enough for every first touch: distinct (net, die) pairs."""
    vertex = np.repeat(np.arange(offsets.shape[0] - 1), np.diff(offsets))
    keys = np.sort(nets * num_parts + part[vertex])
    return int(keys.size and 1 + np.count_nonzero(keys[1:] != keys[:-1]))


@dataclass(frozen=True)
class Achievable:
    """The best assignment found: its read hit rate, fetches, the die of each program, and how it was found."""

    hit_pct: float
    fetches: int
    min_fetches: int
    part: np.ndarray
    how: str


def achievable_bound(prepared: PreparedTrace, hw: HardwareSpec, seed: int = 0, time_limit: float = 10.0,
                     attempts: int = 1, preset: str = "default", max_pins: int = 50_000_000) -> Achievable:
    """The achievable multi-die bound of `prepared` on `hw`'s dies.

    The dispatcher's own assignment (program p on die p % N) is achievable too: where it already
    fetches every sector once, where the trace has more than `max_pins` (program, sector) reads (a
    memory guard), or where Mt-KaHyPar runs past `time_limit`, it is the answer. One run of the
    default preset takes 0.3-4 s on each of the suite's default sizes (past 4096 programs they are
    partitioned in groups of consecutive ids: `partition_reads`); more attempts and the quality
    presets find better assignments on grids (bench_partition.py)."""
    spl = hw.sectors_per_line
    offsets, nets, num_nets = read_only_nets(prepared, spl)
    reads = prepared.bounds(spl).read_sectors
    dispatcher = np.arange(offsets.shape[0] - 1, dtype=np.int64) % hw.num_domains

    def result(fetches: int, part: np.ndarray, how: str) -> Achievable:
        return Achievable(hit_pct=100.0 * (reads - fetches) / reads if reads else 0.0, fetches=fetches,
                          min_fetches=minimum, part=part, how=how)

    if nets.size > max_pins:
        minimum = assignment_fetches(offsets, nets, np.zeros_like(dispatcher), 1)
        return result(assignment_fetches(offsets, nets, dispatcher, hw.num_domains), dispatcher,
                      f"the dispatcher's own assignment: {nets.size:,} (program, sector) pins are more than the "
                      f"partitioner's budget of {max_pins:,}")
    reduced = reduce_reads(offsets, nets, num_nets)
    own, minimum = reduced.fetches(dispatcher, hw.num_domains), reduced.min_fetches
    if own == minimum:
        return result(own, dispatcher, "the dispatcher's own assignment already fetches every sector once")
    try:
        bound, part = partition_reads(reduced, hw.num_domains, seed=seed, attempts=attempts, epsilons=(0.2,),
                                      preset=preset, time_limit=time_limit)
    except PartitionerFailed as exc:
        return result(own, dispatcher, f"the dispatcher's own assignment (the partitioner failed: {exc})")
    return result(bound.fetches, part, f"{bound.tool}, {bound.seconds:.1f} s")
