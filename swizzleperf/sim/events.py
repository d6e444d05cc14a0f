"""From the pointer arrays of load and store instructions to a `Trace`.

One event = one memory instruction of one program = the distinct, sorted cache lines its active
lanes touch, in the virtual layout. Two extractors compute exactly that:

- `distinct_lines_reference`: plain numpy (mask, map, np.unique) for one program at a time; the
  oracle, used by reference mode.
- `distinct_lines`: a numba kernel over a (lanes, programs) block, used by fast mode, where one
  instruction covers a whole batch of programs. Lanes of a block are usually in address order,
  so it keeps a line whenever it changes and sorts only the columns that turn out unsorted.

`TraceBuilder` collects events batch by batch (a batch's programs need not be contiguous: fast
mode splits batches whose programs take different branches) and lays them out program-major.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from swizzleperf.errors import TraceCaptureError
from swizzleperf.sim.layout import VirtualLayout
from swizzleperf.sim.trace import Trace


def line_shift(line_bytes: int) -> int:
    if line_bytes < 1 or line_bytes & (line_bytes - 1):
        raise TraceCaptureError(f"line_bytes must be a power of two, got {line_bytes}")
    return line_bytes.bit_length() - 1


def distinct_lines_reference(layout: VirtualLayout, shift: int, ptrs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The sorted distinct virtual lines of the active lanes of one program's instruction."""
    ptrs, mask = np.broadcast_arrays(np.asarray(ptrs), np.asarray(mask, dtype=bool))
    active = ptrs[mask]
    if not active.size:
        return np.empty(0, np.int64)
    return np.unique(layout.to_virtual(active) >> shift)


def _distinct_lines_impl(ptrs, mask, host_starts, host_ends, virtual_starts, shift, scratch, out, counts):
    """Per column j of `ptrs` (lanes x programs): distinct lines of active lanes, appended to `out`.

    Walks the block row by row (memory order), appending a column's line to `scratch[:, j]` whenever
    it changes, then compacts the columns into `out` and sorts only those that came out of order.
    Returns the number of lines written, or -1 - (flat lane index) of an active lane that lies
    outside every region."""
    n_lanes, n_cols = ptrs.shape
    n_regions = host_starts.shape[0]
    last = np.full(n_cols, -1, np.int64)
    in_order = np.ones(n_cols, np.bool_)
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
            line = (virtual_starts[r] + (a - host_starts[r])) >> shift
            if line != last[j]:
                if line < last[j]:
                    in_order[j] = False
                scratch[counts[j], j] = line
                counts[j] += 1
                last[j] = line
    pos = 0
    for j in range(n_cols):
        start = pos
        for k in range(counts[j]):
            out[pos] = scratch[k, j]
            pos += 1
        if not in_order[j]:
            seg = np.sort(out[start:pos])
            pos = start
            prev = -1
            for v in seg:
                if v != prev:
                    out[pos] = v
                    pos += 1
                    prev = v
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

    vec, flags = types.Array(types.int64, 1, "C"), types.Array(types.boolean, 1, "C")
    matrix = types.Array(types.int64, 2, "C")
    if name == "distinct_lines":
        block = types.Array(types.int64, 2, "A", readonly=True)  # broadcast views: any strides, read-only
        lanes = types.Array(types.boolean, 2, "A", readonly=True)
        sig, fn = types.int64(block, lanes, vec, vec, vec, types.int64, matrix, vec, vec), _distinct_lines_impl
    else:
        sig, fn = types.none(vec, matrix, flags, vec), _interleave_impl
    return numba.njit(sig, cache=True, nogil=True)(fn)


def distinct_lines(layout: VirtualLayout, shift: int, ptrs: np.ndarray, mask: np.ndarray | None,
                   out_of_bounds: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct sorted lines per column of a (lanes, columns) block; columns broadcast (1 or Q).

    Returns (lines of all columns, column-major concatenated; count per column). An active lane
    outside every region calls `out_of_bounds(address, column)`, which must raise (by default
    the layout's TraceCaptureError)."""
    ptrs = np.asarray(ptrs)
    mask = np.ones((1, 1), bool) if mask is None else np.asarray(mask, dtype=bool)
    n_lanes = max(ptrs.shape[0], mask.shape[0])
    n_cols = max(ptrs.shape[1], mask.shape[1])
    p = np.broadcast_to(ptrs, (n_lanes, n_cols)).view(np.int64)
    m = np.broadcast_to(mask, (n_lanes, n_cols))
    scratch = np.empty((n_lanes, n_cols), np.int64)  # only the rows holding distinct lines get touched
    out = np.empty(n_lanes * n_cols, np.int64)
    counts = np.empty(n_cols, np.int64)
    n = _compiled("distinct_lines")(p, m, layout.host_starts, layout.host_ends, layout.virtual_starts, shift,
                                    scratch, out, counts)
    if n < 0:
        i, j = divmod(-1 - n, n_cols)
        (out_of_bounds or (lambda address, column: layout.raise_out_of_bounds(address)))(int(p[i, j]), j)
    return out[:n], counts


@dataclass
class EventBatch:
    """The events of one batch of programs, in instruction order.

    Each event holds either one column per program, or one column shared by all programs of the
    batch (an instruction whose pointers and mask do not depend on the program)."""

    programs: np.ndarray                      # int64 [P]
    values: list[np.ndarray] = field(default_factory=list)
    counts: list[np.ndarray] = field(default_factory=list)  # [P] or [1]
    stores: list[bool] = field(default_factory=list)

    def add(self, values: np.ndarray, counts: np.ndarray, is_store: bool) -> None:
        self.values.append(values)
        self.counts.append(counts)
        self.stores.append(is_store)

    def lanes_touched(self) -> int:
        return sum(int(v.size) for v in self.values)

    def program_major(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lines, per-event sizes, per-event store flags) ordered program by program, empty events dropped."""
        n_prog, n_ev = len(self.programs), len(self.values)
        if not n_ev:
            return np.empty(0, np.int64), np.zeros((n_prog, 0), np.int64), np.zeros(n_ev, bool)
        counts = np.stack([np.broadcast_to(c, (n_prog,)) for c in self.counts]).astype(np.int64)  # [E, P]
        shared = np.array([c.shape[0] == 1 and n_prog > 1 for c in self.counts])
        out = np.empty(int(counts.sum()), np.int64)
        _compiled("interleave")(np.concatenate(self.values).astype(np.int64, copy=False), counts, shared, out)
        return out, counts.T, np.array(self.stores, bool)


class TraceBuilder:
    """Accumulates committed batches; `build()` orders programs by launch id."""

    def __init__(self, num_programs: int, line_bytes: int):
        self.num_programs = num_programs
        self.line_bytes = line_bytes
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.done = 0

    def commit(self, batch: EventBatch) -> None:
        lines, sizes, stores = batch.program_major()
        self._parts.append((batch.programs, lines, sizes, stores))
        self.done += len(batch.programs)

    def build(self) -> Trace:
        if self.done != self.num_programs:
            raise TraceCaptureError(f"internal: captured {self.done} of {self.num_programs} programs")
        cols: dict[str, list[np.ndarray]] = {k: [np.empty(0, d)] for k, d in (
            ("programs", np.int64), ("lines", np.int64), ("ev_sizes", np.int64), ("ev_store", bool),
            ("n_events", np.int64), ("n_accesses", np.int64))}
        for progs, ln, sizes, stores in self._parts:  # sizes: [P, E], empty events included
            keep = sizes > 0
            for k, v in (("programs", progs), ("lines", ln), ("ev_sizes", sizes[keep]),
                         ("ev_store", np.broadcast_to(stores, sizes.shape)[keep]),
                         ("n_events", keep.sum(axis=1)), ("n_accesses", sizes.sum(axis=1))):
                cols[k].append(v)
        programs, lines, ev_sizes, ev_store, n_events, n_accesses = (
            np.concatenate(cols[k]) for k in ("programs", "lines", "ev_sizes", "ev_store", "n_events", "n_accesses"))
        if not np.array_equal(np.sort(programs), np.arange(self.num_programs)):
            raise TraceCaptureError("internal: batches do not cover every program exactly once")

        if not np.all(programs[1:] > programs[:-1]):  # batches came out of order (split ones): reorder
            order = np.argsort(programs, kind="stable")
            ev_start = np.cumsum(n_events) - n_events
            ev_idx = _gather_runs(ev_start[order], n_events[order])
            acc_start = np.cumsum(n_accesses) - n_accesses
            lines = lines[_gather_runs(acc_start[order], n_accesses[order])]
            ev_sizes, ev_store, n_events = ev_sizes[ev_idx], ev_store[ev_idx], n_events[order]
        event_offsets = np.concatenate([[0], np.cumsum(ev_sizes)]).astype(np.int64)
        program_offsets = np.concatenate([[0], np.cumsum(n_events)]).astype(np.int64)
        return Trace(lines=lines, is_store=np.repeat(ev_store, ev_sizes), event_offsets=event_offsets,
                     program_offsets=program_offsets, line_bytes=self.line_bytes)


def _gather_runs(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Indices of the concatenated runs [starts[i], starts[i] + lengths[i])."""
    total = int(lengths.sum())
    if not total:
        return np.empty(0, np.int64)
    run_offsets = np.cumsum(lengths) - lengths
    return np.repeat(starts - run_offsets, lengths) + np.arange(total)
