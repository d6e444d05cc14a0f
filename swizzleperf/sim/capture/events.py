"""From the pointer arrays of load and store instructions to a `Trace`.

One event = one memory instruction of one program = the distinct, sorted cache lines its active
lanes touch, in the virtual layout, each with a bit mask of the sectors touched (bit i: the i-th
sector of the line; at most 8 sectors per line). Two extractors compute exactly that:

- `distinct_lines_reference`: plain numpy (mask, map, np.unique) for one program at a time; the
  oracle, used by reference mode.
- `distinct_lines`: a numba kernel over a (lanes, programs) block, used by fast mode, where one
  instruction covers a whole batch of programs. Lanes of a block are usually in address order,
  so it looks only at lanes that enter a new sector, keeps a line whenever it changes, and sorts
  only the columns that turn out unsorted.

`TraceBuilder` collects events batch by batch (a batch's programs need not be contiguous: fast
mode splits batches whose programs take different branches) and lays them out program-major.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from swizzleperf.errors import TraceCaptureError
from swizzleperf.sim.capture.address_space import VirtualLayout
from swizzleperf.sim.trace.line_runs import RunWriter
from swizzleperf.sim.trace.record import Trace

MAX_SECTORS_PER_LINE = 8  # a line's sector mask is a uint8


def line_shift(line_bytes: int) -> int:
    if line_bytes < 1 or line_bytes & (line_bytes - 1):
        raise TraceCaptureError(f"line_bytes must be a power of two, got {line_bytes}")
    return line_bytes.bit_length() - 1


def sector_shifts(line_bytes: int, sector_bytes: int) -> tuple[int, int]:
    """(line shift, sector shift), checked once: the extractors assume 1 to 8 sectors per line."""
    shift, sector_shift = line_shift(line_bytes), line_shift(sector_bytes)
    if not 1 <= line_bytes // sector_bytes <= MAX_SECTORS_PER_LINE:
        raise TraceCaptureError(f"cannot record {sector_bytes} B sectors of {line_bytes} B lines "
                                f"(1 to {MAX_SECTORS_PER_LINE} sectors per line)")
    return shift, sector_shift


def distinct_lines_reference(layout: VirtualLayout, shifts: tuple[int, int], ptrs: np.ndarray,
                             mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct virtual lines of the active lanes of one program's instruction, and their sector masks.

    Sectors first, then grouped: the plainest statement of what `distinct_lines` computes."""
    shift, sector_shift = shifts
    ptrs, mask = np.broadcast_arrays(np.asarray(ptrs), np.asarray(mask, dtype=bool))
    active = ptrs[mask]
    if not active.size:
        return np.empty(0, np.int64), np.empty(0, np.uint8)
    sectors = np.unique(layout.to_virtual(active) >> sector_shift)
    lines = sectors >> (shift - sector_shift)
    bits = np.left_shift(1, sectors & ((1 << (shift - sector_shift)) - 1)).astype(np.uint8)
    first = np.flatnonzero(np.concatenate([[True], lines[1:] != lines[:-1]]))
    return lines[first], np.bitwise_or.reduceat(bits, first)


def _distinct_lines_impl(ptrs, mask, host_starts, host_ends, virtual_starts, shift, sector_shift,
                         scratch, scratch_sectors, in_order, counts):
    """Per column j of `ptrs` (lanes x programs): distinct lines of active lanes and their sector masks.

    Walks the block row by row (memory order). Lanes usually come in address order, so a lane in the
    sector its column was last in is skipped at once; on a new sector, its bit joins the mask of the
    column's current line, or a new line is appended to `scratch[:, j]`. `in_order[j]` says whether
    column j's lines came out sorted. Returns 0, or -1 - (flat lane index) of an active lane that
    lies outside every region."""
    n_lanes, n_cols = ptrs.shape
    n_regions = host_starts.shape[0]
    per_line = shift - sector_shift
    last = np.full(n_cols, -1, np.int64)  # the sector each column was last in (its line: last >> per_line)
    in_order[:] = True
    counts[:] = 0
    r = 0
    for i in range(n_lanes):
        for j in range(n_cols):
            if not mask[i, j]:
                continue
            a = ptrs[i, j]
            if r >= n_regions or a < host_starts[r] or a >= host_ends[r]:
                lo, hi = 0, n_regions  # binary search for the region holding a
                while lo < hi:
                    mid = (lo + hi) // 2
                    if host_starts[mid] <= a:
                        lo = mid + 1
                    else:
                        hi = mid
                r = lo - 1
                if r < 0 or a >= host_ends[r]:
                    return -1 - (i * n_cols + j)
            sector = (virtual_starts[r] + (a - host_starts[r])) >> sector_shift
            if sector == last[j]:
                continue
            line, bit, c = sector >> per_line, np.uint8(1 << (sector & ((1 << per_line) - 1))), counts[j]
            if line == last[j] >> per_line:
                scratch_sectors[c - 1, j] |= bit
            else:
                if line < last[j] >> per_line:
                    in_order[j] = False
                scratch[c, j] = line
                scratch_sectors[c, j] = bit
                counts[j] = c + 1
            last[j] = sector
    return 0


def _compact_impl(scratch, scratch_sectors, in_order, counts, out, out_sectors):
    """The columns of `scratch` back to back; an unsorted column is sorted and its repeated lines merged.

    Returns the number of lines written (`counts` is updated for merged columns)."""
    pos = 0
    for j in range(scratch.shape[1]):
        start = pos
        for k in range(counts[j]):
            out[pos] = scratch[k, j]
            out_sectors[pos] = scratch_sectors[k, j]
            pos += 1
        if in_order[j]:
            continue
        keys = np.sort((out[start:pos] << 8) | out_sectors[start:pos])  # by line, then mask: one sort
        pos = start
        for key in keys:
            line, bits = key >> 8, np.uint8(key & 0xFF)
            if pos > start and out[pos - 1] == line:
                out_sectors[pos - 1] |= bits
            else:
                out[pos] = line
                out_sectors[pos] = bits
                pos += 1
        counts[j] = pos - start
    return pos


def _interleave_impl(values, counts, shared, out):
    """Event-major columns -> program-major runs: event e of program j goes after its earlier events.

    `values` holds each event's columns back to back (one column only for a shared event)."""
    n_ev, n_prog = counts.shape
    cursor = np.empty(n_prog, np.int64)
    pos = 0
    for j in range(n_prog):
        cursor[j] = pos
        for e in range(n_ev):
            pos += counts[e, j]
    src = 0
    for e in range(n_ev):
        for j in range(n_prog):
            c = counts[e, j]
            out[cursor[j]:cursor[j] + c] = values[src:src + c]
            cursor[j] += c
            if not shared[e]:
                src += c
        if shared[e]:
            src += counts[e, 0]


@functools.lru_cache(maxsize=None)
def _compiled(name: str):
    """The numba kernels, compiled on first use (and cached on disk): only capture needs them."""
    import numba
    from numba import types

    vec, flags, bytes_ = (types.Array(t, 1, "C") for t in (types.int64, types.boolean, types.uint8))
    matrix, byte_matrix = types.Array(types.int64, 2, "C"), types.Array(types.uint8, 2, "C")
    if name == "distinct_lines":
        block = types.Array(types.int64, 2, "A", readonly=True)  # broadcast views: any strides, read-only
        lanes = types.Array(types.boolean, 2, "A", readonly=True)
        sigs = [types.int64(block, lanes, vec, vec, vec, types.int64, types.int64, matrix, byte_matrix, flags, vec)]
        fn = _distinct_lines_impl
    elif name == "compact":
        sigs, fn = [types.int64(matrix, byte_matrix, flags, vec, vec, bytes_)], _compact_impl
    else:  # interleave: lines, then sector masks
        sigs, fn = [types.none(v, matrix, flags, v) for v in (vec, bytes_)], _interleave_impl
    return numba.njit(sigs, cache=True, nogil=True)(fn)


def distinct_lines(layout: VirtualLayout, shifts: tuple[int, int], ptrs: np.ndarray, mask: np.ndarray | None,
                   out_of_bounds: Callable[[int, int], None] | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct sorted lines per column of a (lanes, columns) block; columns broadcast (1 or Q).

    Returns (lines of all columns, column-major concatenated; their sector masks; count per
    column). `shifts` come from `sector_shifts`. An active lane outside every region calls
    `out_of_bounds(address, column)`, which must raise (by default the layout's TraceCaptureError)."""
    ptrs = np.asarray(ptrs)
    mask = np.ones((1, 1), bool) if mask is None else np.asarray(mask, dtype=bool)
    n_lanes = max(ptrs.shape[0], mask.shape[0])
    n_cols = max(ptrs.shape[1], mask.shape[1])
    p = np.broadcast_to(ptrs, (n_lanes, n_cols)).view(np.int64)
    m = np.broadcast_to(mask, (n_lanes, n_cols))
    scratch = np.empty((n_lanes, n_cols), np.int64)  # only the rows holding distinct lines get touched
    scratch_sectors = np.empty((n_lanes, n_cols), np.uint8)
    in_order, counts = np.empty(n_cols, bool), np.empty(n_cols, np.int64)
    fault = _compiled("distinct_lines")(p, m, layout.host_starts, layout.host_ends, layout.virtual_starts,
                                        *shifts, scratch, scratch_sectors, in_order, counts)
    if fault < 0:
        i, j = divmod(-1 - fault, n_cols)
        (out_of_bounds or (lambda address, column: layout.raise_out_of_bounds(address)))(int(p[i, j]), j)
    total = int(counts.sum())
    out, out_sectors = np.empty(total, np.int64), np.empty(total, np.uint8)
    n = _compiled("compact")(scratch, scratch_sectors, in_order, counts, out, out_sectors)
    return out[:n], out_sectors[:n], counts


@dataclass
class EventBatch:
    """The events of one batch of programs, in instruction order.

    Each event holds either one column per program, or one column shared by all programs of the
    batch (an instruction whose pointers and mask do not depend on the program)."""

    programs: np.ndarray                      # int64 [P]
    lines: list[np.ndarray] = field(default_factory=list)
    sectors: list[np.ndarray] = field(default_factory=list)  # uint8, one mask per line
    counts: list[np.ndarray] = field(default_factory=list)   # [P] or [1]
    stores: list[bool] = field(default_factory=list)
    sites: list[int] = field(default_factory=list)  # the instruction of each event (sites.py)

    def add(self, lines: np.ndarray, sectors: np.ndarray, counts: np.ndarray, is_store: bool, site: int) -> None:
        self.lines.append(lines)
        self.sectors.append(sectors)
        self.counts.append(counts)
        self.stores.append(is_store)
        self.sites.append(site)

    def program_major(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(lines, sector masks, per-event sizes, per-event store flags, per-event sites) ordered program by
        program, empty events dropped."""
        n_prog, n_ev = len(self.programs), len(self.lines)
        if not n_ev:
            return (np.empty(0, np.int64), np.empty(0, np.uint8), np.zeros((n_prog, 0), np.int64), np.zeros(n_ev, bool),
                    np.zeros(n_ev, np.int32))
        counts = np.stack([np.broadcast_to(c, (n_prog,)) for c in self.counts]).astype(np.int64)  # [E, P]
        shared = np.array([c.shape[0] == 1 and n_prog > 1 for c in self.counts])
        total = int(counts.sum())
        lines, sectors = np.empty(total, np.int64), np.empty(total, np.uint8)
        interleave = _compiled("interleave")
        interleave(np.concatenate(self.lines).astype(np.int64, copy=False), counts, shared, lines)
        interleave(np.concatenate(self.sectors).astype(np.uint8, copy=False), counts, shared, sectors)
        return lines, sectors, counts.T, np.array(self.stores, bool), np.array(self.sites, np.int32)


class TraceBuilder:
    """Accumulates committed batches; `build()` orders programs by launch id.

    With `spill` (a path), each batch is written there as runs when committed (sim/trace/line_runs.py) and `build()`
    returns the stored trace: capture then holds one batch in memory, not the whole trace."""

    def __init__(self, num_programs: int, line_bytes: int, sector_bytes: int, spill: Path | None = None):
        self.num_programs = num_programs
        self.line_bytes = line_bytes
        self.sector_bytes = sector_bytes
        self._parts: list[tuple[np.ndarray, ...]] = []
        self.done = 0
        self.writer = None if spill is None else RunWriter(spill, num_programs, line_bytes, sector_bytes)

    def commit(self, batch: EventBatch) -> None:
        if self.writer is None:
            self._parts.append((batch.programs, *batch.program_major()))
        else:
            lines, sectors, sizes, stores, sites = batch.program_major()  # sizes: [P, E], empty events included
            keep = sizes > 0
            self.writer.add(batch.programs, lines, sectors, sizes[keep], np.broadcast_to(stores, sizes.shape)[keep],
                            keep.sum(axis=1), np.broadcast_to(sites, sizes.shape)[keep])
        self.done += len(batch.programs)

    def build(self) -> Trace:
        if self.done != self.num_programs:
            raise TraceCaptureError(f"internal: captured {self.done} of {self.num_programs} programs")
        if self.writer is not None:
            from swizzleperf.sim.trace.stored import StoredTrace

            return StoredTrace(self.writer.finish())
        cols: dict[str, list[np.ndarray]] = {k: [np.empty(0, d)] for k, d in (
            ("programs", np.int64), ("lines", np.int64), ("sectors", np.uint8), ("ev_sizes", np.int64),
            ("ev_store", bool), ("ev_site", np.int32), ("n_events", np.int64), ("n_accesses", np.int64))}
        for progs, ln, sectors, sizes, stores, sites in self._parts:  # sizes: [P, E], empty events included
            keep = sizes > 0
            for k, v in (("programs", progs), ("lines", ln), ("sectors", sectors), ("ev_sizes", sizes[keep]),
                         ("ev_store", np.broadcast_to(stores, sizes.shape)[keep]),
                         ("ev_site", np.broadcast_to(sites, sizes.shape)[keep]),
                         ("n_events", keep.sum(axis=1)), ("n_accesses", sizes.sum(axis=1))):
                cols[k].append(v)
        names = ("programs", "lines", "sectors", "ev_sizes", "ev_store", "ev_site", "n_events", "n_accesses")
        programs, lines, sectors, ev_sizes, ev_store, ev_site, n_events, n_accesses = (
            np.concatenate(cols[k]) for k in names)
        if not np.array_equal(np.sort(programs), np.arange(self.num_programs)):
            raise TraceCaptureError("internal: batches do not cover every program exactly once")

        if not np.all(programs[1:] > programs[:-1]):  # batches came out of order (split ones): reorder
            order = np.argsort(programs, kind="stable")
            ev_start = np.cumsum(n_events) - n_events
            ev_idx = _gather_runs(ev_start[order], n_events[order])
            acc_start = np.cumsum(n_accesses) - n_accesses
            acc_idx = _gather_runs(acc_start[order], n_accesses[order])
            lines, sectors = lines[acc_idx], sectors[acc_idx]
            ev_sizes, ev_store, ev_site, n_events = ev_sizes[ev_idx], ev_store[ev_idx], ev_site[ev_idx], n_events[order]
        event_offsets = np.concatenate([[0], np.cumsum(ev_sizes)]).astype(np.int64)
        program_offsets = np.concatenate([[0], np.cumsum(n_events)]).astype(np.int64)
        return Trace(lines=lines, is_store=np.repeat(ev_store, ev_sizes), event_offsets=event_offsets,
                     program_offsets=program_offsets, line_bytes=self.line_bytes, sectors=sectors,
                     sector_bytes=self.sector_bytes, sites=ev_site)


def _gather_runs(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Indices of the concatenated runs [starts[i], starts[i] + lengths[i])."""
    total = int(lengths.sum())
    if not total:
        return np.empty(0, np.int64)
    run_offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - run_offsets, lengths) + np.arange(total)
