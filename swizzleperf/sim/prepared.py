"""A trace made ready for simulation, once: validated, lines numbered densely, remap-independent bounds.

A swizzle never changes the trace, so everything here is computed once per trace and reused by
every candidate remap's `simulate` (engine.py).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numba
import numpy as np

from swizzleperf.errors import TraceCaptureError
from swizzleperf.sim.cache_model import MAX_LINE

if TYPE_CHECKING:
    from swizzleperf.sim.trace.record import Trace


@dataclass(frozen=True)
class PreparedTrace:
    """A validated trace plus what every remap's simulation reuses."""

    lines: np.ndarray  # int64[n_accesses]
    is_store: np.ndarray  # bool[n_accesses]
    sectors: np.ndarray  # uint8[n_accesses]: sector mask of each access, `sectors_per_line` bits
    event_offsets: np.ndarray  # int64[n_events + 1]
    program_offsets: np.ndarray  # int64[n_programs + 1]
    line_ids: np.ndarray  # int32[n_accesses]: dense id of each access's line, 0..unique_lines-1
    unique_lines: int  # distinct lines in the whole trace
    line_bytes: int
    sectors_per_line: int
    sites: np.ndarray | None = None  # int32[n_events]: each event's instruction (sites.py); None: unknown
    _resampled: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def num_programs(self) -> int:
        return self.program_offsets.shape[0] - 1

    @property
    def accesses(self) -> int:
        return self.lines.shape[0]

    def masks_for(self, sectors_per_line: int) -> np.ndarray:
        """The sector masks at another granularity (a coarser sector is touched if any part of it is)."""
        if sectors_per_line not in self._resampled:
            self._resampled[sectors_per_line] = resample_masks(self.sectors, self.sectors_per_line, sectors_per_line)
        return self._resampled[sectors_per_line]

    def bounds(self, sectors_per_line: int) -> TraceBounds:
        """Counts that bound every remap's result, at a sector granularity (remembered per granularity)."""
        key = ("bounds", sectors_per_line)
        if key not in self._resampled:
            self._resampled[key] = _trace_bounds(self, sectors_per_line)
        return self._resampled[key]


@dataclass(frozen=True)
class TraceBounds:
    """Remap-independent counts, in sectors (lines where a line is one sector).

    Every read sector that the kernel never writes must be fetched at least once, whatever the order,
    and no remap makes more lookups than the trace has sector reads (an L1 only removes some)."""

    trace_accesses: int  # line accesses in the trace, loads and stores: the simulator's work
    read_sectors: int  # sector reads of all loads, before any L1
    write_sectors: int
    read_only_unique: int  # distinct sectors read and never written: the compulsory fetches

    @property
    def ceiling_pct(self) -> float:
        """The read hit rate no remap can beat: every read-only sector fetched once, and every read reaching the L2
        (an L1 only lowers the lookups, never the compulsory fetches)."""
        return 100.0 * (self.read_sectors - self.read_only_unique) / self.read_sectors if self.read_sectors else 0.0


def resample_masks(masks: np.ndarray, have: int, want: int) -> np.ndarray:
    """Sector masks of `have` sectors per line as masks of `want` sectors per line (powers of two)."""
    if have == want:
        return masks
    table = np.zeros(256, dtype=np.uint8)
    for mask in range(1 << have):
        out = 0
        for bit in range(have):
            if mask >> bit & 1:  # the byte range of sector `bit` of `have`, in sectors of `want`
                lo, hi = bit * want // have, max(bit * want // have + 1, (bit + 1) * want // have)
                out |= ((1 << (hi - lo)) - 1) << lo
        table[mask] = out
    return table[masks]


def read_only_masks(prepared: PreparedTrace, sectors_per_line: int) -> np.ndarray:
    """uint8[n_accesses]: each load's sectors that the kernel never writes (0 for stores). Written
    sectors are allocated without a fetch, so only these can cost a fetch: the ceiling's and the
    achievable bound's unit."""
    masks = prepared.masks_for(sectors_per_line)
    written = np.zeros(prepared.unique_lines, dtype=np.uint8)
    np.bitwise_or.at(written, prepared.line_ids[prepared.is_store], masks[prepared.is_store])
    return np.where(prepared.is_store, 0, masks & ~written[prepared.line_ids]).astype(np.uint8)


def _trace_bounds(prepared: PreparedTrace, sectors_per_line: int) -> TraceBounds:
    counts = _POPCOUNT[prepared.masks_for(sectors_per_line)]
    read_only = np.zeros(prepared.unique_lines, dtype=np.uint8)
    np.bitwise_or.at(read_only, prepared.line_ids, read_only_masks(prepared, sectors_per_line))
    return TraceBounds(trace_accesses=prepared.accesses, read_sectors=int(counts[~prepared.is_store].sum()),
                       write_sectors=int(counts[prepared.is_store].sum()),
                       read_only_unique=int(_POPCOUNT[read_only].sum()))


_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


def _offsets(name: str, values, first: int, last: int) -> np.ndarray:
    offsets = np.ascontiguousarray(values, dtype=np.int64)
    if offsets.ndim != 1 or offsets.shape[0] < 1 or offsets[0] != first or offsets[-1] != last:
        raise TraceCaptureError(f"malformed trace: {name} must run from {first} to {last}; re-capture the trace")
    if np.any(np.diff(offsets) < 0):
        raise TraceCaptureError(f"malformed trace: {name} must be non-decreasing; re-capture the trace")
    return offsets


@numba.njit(cache=True, nogil=True)
def _dense_line_ids(lines, order, out):
    """Number distinct lines 0, 1, ... in sorted order; `order` sorts `lines`. Returns the count."""
    count = 0
    previous = -1  # lines are non-negative
    for i in range(order.shape[0]):
        k = order[i]
        if lines[k] != previous:
            previous = lines[k]
            count += 1
        out[k] = count - 1
    return count


_prepared: dict[int, tuple[weakref.ref, PreparedTrace]] = {}


def prepare(trace: "Trace | PreparedTrace"):
    """Validate `trace` and precompute line ids. Accepts any object with the Trace fields.

    The result is remembered while `trace` lives (traces are immutable), so a profiler that
    passes the same Trace for every candidate remap pays for this once.
    """
    if isinstance(trace, PreparedTrace):
        return trace
    if hasattr(trace, "stream_prepared"):  # a stored trace (stored.py): replayed from disk, never expanded
        return trace.stream_prepared()
    key = id(trace)
    if key in _prepared and _prepared[key][0]() is trace:
        return _prepared[key][1]
    prepared = _prepare(trace)
    try:
        alive = weakref.ref(trace, lambda _, key=key: _prepared.pop(key, None))
    except TypeError:  # an object without weak references: nothing to remember it by
        return prepared
    _prepared[key] = (alive, prepared)
    return prepared


def _sector_masks(trace, n_accesses: int) -> tuple[np.ndarray, int]:
    """(masks, sectors per line) of any object with the Trace fields; no masks: whole lines."""
    masks, sector_bytes = getattr(trace, "sectors", None), getattr(trace, "sector_bytes", None)
    if masks is None:
        return np.ones(n_accesses, dtype=np.uint8), 1
    per_line = int(trace.line_bytes) // int(sector_bytes)
    masks = np.ascontiguousarray(masks, dtype=np.uint8)
    if masks.shape != (n_accesses,) or (n_accesses and (masks.min() == 0 or int(masks.max()) >> per_line)):
        raise TraceCaptureError(f"malformed trace: sector masks must be one non-empty {per_line}-bit mask per access")
    return masks, per_line


def _sites(trace: "Trace", n_events: int) -> np.ndarray | None:
    sites = getattr(trace, "sites", None)
    if sites is None:
        return None
    sites = np.ascontiguousarray(sites, dtype=np.int32)
    if sites.shape != (n_events,):
        raise TraceCaptureError(f"malformed trace: {sites.shape[0]} sites for {n_events} events; re-capture the trace")
    return sites


def _prepare(trace: "Trace") -> PreparedTrace:
    lines = np.ascontiguousarray(trace.lines, dtype=np.int64)
    if lines.ndim != 1:
        raise TraceCaptureError(f"malformed trace: lines must be 1D, got shape {lines.shape}; re-capture the trace")
    if lines.size and (lines.min() < 0 or lines.max() >= MAX_LINE):
        raise TraceCaptureError("malformed trace: line addresses must be non-negative (byte address // line_bytes) "
                                "and below 2**55")
    event_offsets = _offsets("event_offsets", trace.event_offsets, 0, lines.shape[0])
    program_offsets = _offsets("program_offsets", trace.program_offsets, 0, event_offsets.shape[0] - 1)
    if lines.shape[0] >= 2**31:
        raise TraceCaptureError(f"trace of {lines.shape[0]} accesses exceeds the simulator's 2**31 limit; "
                                f"capture a smaller problem size")
    masks, per_line = _sector_masks(trace, lines.shape[0])
    # a stable sort is fast on traces, which are mostly runs of ascending lines
    line_ids = np.empty(lines.shape[0], dtype=np.int32)
    unique = _dense_line_ids(lines, np.argsort(lines, kind="stable"), line_ids)
    return PreparedTrace(lines=lines, is_store=np.ascontiguousarray(trace.is_store, dtype=np.bool_), sectors=masks,
                         event_offsets=event_offsets, program_offsets=program_offsets, line_ids=line_ids,
                         unique_lines=int(unique), line_bytes=int(trace.line_bytes), sectors_per_line=per_line,
                         sites=_sites(trace, event_offsets.shape[0] - 1))
