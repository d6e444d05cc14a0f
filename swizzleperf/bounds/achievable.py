"""The achievable multi-die bound of one kernel trace: its read-only sectors as a hypergraph.

Nets are the sectors (lines where a line is one sector) that the kernel reads and never writes:
written sectors are allocated without a fetch, so where they are read costs nothing. Each program
is a vertex over the nets it reads. The bound's hit rate uses the ceiling's denominator (every
read sector, before any L1), so achievable <= ceiling, with equality on one die.
"""

from __future__ import annotations

import numpy as np

from swizzleperf.bounds.partition import PartitionBound, partition_bound
from swizzleperf.hardware import HardwareSpec
from swizzleperf.sim.engine import PreparedTrace


def read_only_nets(prepared: PreparedTrace, sectors_per_line: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(offsets over programs, net ids, number of net ids): the read-only sectors each program reads."""
    masks = prepared.masks_for(sectors_per_line)
    written = np.zeros(prepared.unique_lines, dtype=np.uint8)
    np.bitwise_or.at(written, prepared.line_ids[prepared.is_store], masks[prepared.is_store])
    read_only = np.where(prepared.is_store, 0, masks & ~written[prepared.line_ids]).astype(np.uint8)
    bits = np.unpackbits(read_only[:, None], axis=1, bitorder="little")[:, :sectors_per_line].astype(bool)
    access, sector = np.nonzero(bits)  # row-major: accesses in trace order, so programs stay contiguous
    nets = prepared.line_ids[access].astype(np.int64) * sectors_per_line + sector
    # accesses -> programs: program p owns accesses event_offsets[program_offsets[p]] ...
    access_start = prepared.event_offsets[prepared.program_offsets]
    offsets = np.searchsorted(access, access_start, side="left")
    return offsets.astype(np.int64), nets, prepared.unique_lines * sectors_per_line


def achievable_bound(prepared: PreparedTrace, hw: HardwareSpec, seed: int = 0,
                     time_limit: float | None = 60.0) -> tuple[float, PartitionBound, np.ndarray]:
    """(read hit % of the best balanced assignment found, the partition's record, the die of each program)."""
    spl = hw.sectors_per_line
    offsets, nets, num_nets = read_only_nets(prepared, spl)
    bound, part = partition_bound(offsets, nets, num_nets, hw.num_domains, seed=seed, time_limit=time_limit)
    reads = prepared.bounds(spl).read_sectors
    return (100.0 * (reads - bound.fetches) / reads if reads else 0.0), bound, part
