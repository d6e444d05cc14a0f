"""Replay a captured trace under one remap: the dispatch model feeds each domain's L2 model.

A swizzle only changes which launch slot runs which captured program, never the trace, so the
work splits in two: `prepare` (once per trace: validation, a dense id per distinct line, the
remap-independent unique-line count) and `simulate` (once per candidate remap: one numba pass
per domain that interleaves that domain's programs as `dispatch` describes and feeds `cache`).
The assumptions are stated in `dispatch` and `cache`, and repeated in every report's notes.
"""

from __future__ import annotations

import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numba
import numpy as np

from swizzleperf.errors import TraceCaptureError
from swizzleperf.hardware import MiB, HardwareSpec
from swizzleperf.report import BottleneckReport, DomainStats
from swizzleperf.sim.cache import CacheGeometry, access_range
from swizzleperf.sim.dispatch import as_permutation, domain_queues, simulated_domains

if TYPE_CHECKING:
    from swizzleperf.sim.trace import Trace


# --- once per trace ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PreparedTrace:
    """A validated trace plus what every remap's simulation reuses."""

    lines: np.ndarray  # int64[n_accesses]
    event_offsets: np.ndarray  # int64[n_events + 1]
    program_offsets: np.ndarray  # int64[n_programs + 1]
    line_ids: np.ndarray  # int32[n_accesses]: dense id of each access's line, 0..unique_lines-1
    unique_lines: int  # distinct lines in the whole trace: the compulsory misses of any remap
    line_bytes: int

    @property
    def num_programs(self) -> int:
        return self.program_offsets.shape[0] - 1

    @property
    def accesses(self) -> int:
        return self.lines.shape[0]


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


def prepare(trace: "Trace | PreparedTrace") -> PreparedTrace:
    """Validate `trace` and precompute line ids. Accepts any object with the Trace fields.

    The result is remembered while `trace` lives (traces are immutable), so a profiler that
    passes the same Trace for every candidate remap pays for this once.
    """
    if isinstance(trace, PreparedTrace):
        return trace
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


def _prepare(trace: "Trace") -> PreparedTrace:
    lines = np.ascontiguousarray(trace.lines, dtype=np.int64)
    if lines.ndim != 1:
        raise TraceCaptureError(f"malformed trace: lines must be 1D, got shape {lines.shape}; re-capture the trace")
    if lines.size and lines.min() < 0:
        raise TraceCaptureError("malformed trace: line addresses must be non-negative (byte address // line_bytes)")
    event_offsets = _offsets("event_offsets", trace.event_offsets, 0, lines.shape[0])
    program_offsets = _offsets("program_offsets", trace.program_offsets, 0, event_offsets.shape[0] - 1)
    if lines.shape[0] >= 2**31:
        raise TraceCaptureError(f"trace of {lines.shape[0]} accesses exceeds the simulator's 2**31 limit; "
                                f"capture a smaller problem size")
    # a stable sort is fast on traces, which are mostly runs of ascending lines
    line_ids = np.empty(lines.shape[0], dtype=np.int32)
    unique = _dense_line_ids(lines, np.argsort(lines, kind="stable"), line_ids)
    return PreparedTrace(lines=lines, event_offsets=event_offsets, program_offsets=program_offsets,
                         line_ids=line_ids, unique_lines=int(unique), line_bytes=int(trace.line_bytes))


# --- once per remap: the numba pass over one domain --------------------------------------------
@numba.njit(cache=True, nogil=True)
def _start_next(queue, queued, program_offsets, next_event, end_event, i):
    """Put the next program of `queue` (from index `queued`) that has events into rotation position i,
    or leave i idle when none is left; returns the new queue index."""
    while queued < queue.shape[0]:
        program = queue[queued]
        queued += 1
        if program_offsets[program + 1] > program_offsets[program]:
            next_event[i] = program_offsets[program]
            end_event[i] = program_offsets[program + 1]
            return queued
    next_event[i] = end_event[i]
    return queued


@numba.njit(cache=True, nogil=True)
def _replay_domain(lines, line_ids, event_offsets, program_offsets, queue, resident,
                   tags, recency, scheme, num_sets, set_bits, ways, seen_bits):
    """Interleave `queue`'s programs (captured ids, launch order) through one cold L2.

    Rotation position i holds a program's next event `next_event[i]` and its end `end_event[i]`
    (equal: idle). `seen_bits` is a zeroed bitset over line ids. Returns (accesses, hits,
    unique lines).
    """
    no_flags = np.zeros(0, dtype=np.bool_)
    positions = min(resident, queue.shape[0])
    next_event = np.zeros(positions, dtype=np.int64)
    end_event = np.zeros(positions, dtype=np.int64)
    queued = 0
    active = 0
    for i in range(positions):
        queued = _start_next(queue, queued, program_offsets, next_event, end_event, i)
        active += next_event[i] != end_event[i]

    accesses = 0
    hits = 0
    unique = 0
    while active > 0:
        for i in range(positions):  # one turn
            event = next_event[i]
            if event == end_event[i]:
                continue
            start, stop = event_offsets[event], event_offsets[event + 1]
            event_hits, first_touches = access_range(lines, start, stop, tags, recency, scheme, num_sets, set_bits,
                                                     ways, line_ids, seen_bits, no_flags)
            hits += event_hits
            unique += first_touches
            accesses += stop - start
            next_event[i] = event + 1
            if event + 1 == end_event[i]:  # finished: the next queued program takes this position
                queued = _start_next(queue, queued, program_offsets, next_event, end_event, i)
                active -= next_event[i] == end_event[i]
        if queued == queue.shape[0] and 2 * active < positions:
            # idle positions are never refilled now: drop them, keeping the rotation order
            kept = 0
            for i in range(positions):
                if next_event[i] != end_event[i]:
                    next_event[kept] = next_event[i]
                    end_event[kept] = end_event[i]
                    kept += 1
            positions = kept
    return accesses, hits, unique


# --- the result --------------------------------------------------------------------------------
@dataclass(frozen=True)
class SimResult:
    """Per-domain counts of one trace replayed under one remap (arrays indexed by domain)."""

    accesses: np.ndarray  # int64[num_domains]: line accesses (loads and stores)
    hits: np.ndarray  # int64[num_domains]
    unique_lines: np.ndarray  # int64[num_domains]: distinct lines the domain touched
    programs: np.ndarray  # int64[num_domains]: programs dispatched to the domain
    total_unique_lines: int  # distinct lines of the whole trace (independent of the remap)
    line_bytes: int

    @property
    def num_domains(self) -> int:
        return self.accesses.shape[0]

    @property
    def total_accesses(self) -> int:
        return int(self.accesses.sum())

    @property
    def total_hits(self) -> int:
        return int(self.hits.sum())

    @property
    def misses(self) -> int:
        return self.total_accesses - self.total_hits

    @property
    def hit_pct(self) -> float:
        return 100.0 * self.total_hits / self.total_accesses if self.total_accesses else 0.0

    @property
    def ceiling_pct(self) -> float:
        """Best any remap can reach: every line fetched once in the whole GPU (infinite caches)."""
        if not self.total_accesses:
            return 0.0
        return 100.0 * (1.0 - self.total_unique_lines / self.total_accesses)

    def to_report(self, kernel_name: str, size_name: str, hw: HardwareSpec) -> BottleneckReport:
        if simulated_domains(hw) != self.num_domains:
            raise ValueError(f"this result has {self.num_domains} domains but {hw.name} has "
                             f"{simulated_domains(hw)}: pass the spec it was simulated with")
        per_domain = [
            DomainStats(domain=d, programs=int(self.programs[d]), accesses=int(self.accesses[d]),
                        hits=int(self.hits[d]), unique_lines=int(self.unique_lines[d]))
            for d in range(self.num_domains)
        ]
        return BottleneckReport(
            source="sim", hardware=hw.name, kernel=kernel_name, size=size_name,
            hit_pct=self.hit_pct, ceiling_pct=self.ceiling_pct, accesses=self.total_accesses,
            hits=self.total_hits, unique_lines=self.total_unique_lines,
            bytes_from_next_level=self.misses * self.line_bytes, per_domain=per_domain,
            notes=model_notes(hw))


def model_notes(hw: HardwareSpec) -> list[str]:
    """The simulator's assumptions in short, for a report's notes."""
    if hw.dispatch.policy == "round_robin":
        chunk = hw.dispatch.chunk
        dispatch = (f"dispatch: round-robin over {hw.num_domains} L2 domains, chunk {chunk} "
                    f"(launch slot w -> domain (w // {chunk}) % {hw.num_domains})")
    else:
        dispatch = "dispatch: in launch order onto one shared L2"
    return [
        "prediction, not a measurement: the captured memory trace replayed through a model of the L2",
        dispatch,
        f"{hw.resident_programs_per_domain} programs resident per domain ({hw.cus_per_domain} CUs x "
        f"{hw.programs_per_cu} per CU), issuing one load/store each per turn in rotation; "
        f"a finished program is replaced by the next queued one",
        f"L2 per domain: {hw.l2_bytes_per_domain / MiB:g} MB, {hw.l2_ways}-way, {hw.num_sets} sets, "
        f"{hw.line_bytes} B lines, set index {hw.set_index}, true LRU, cold at kernel start",
        "write-allocate: stores are accesses like loads; write-backs are not counted",
        "ceiling = 1 - unique lines / accesses: every line fetched once in the whole GPU",
    ]


# --- the entry point ---------------------------------------------------------------------------
def simulate(trace: "Trace | PreparedTrace", program_for_slot, hw: HardwareSpec, threads: int = 1) -> SimResult:
    """Predict per-domain L2 behaviour when launch slot w runs captured program `program_for_slot[w]`.

    Pass a `PreparedTrace` (from `prepare`) when simulating many remaps of one trace. Domains are
    independent, so `threads > 1` replays several at once (the numba pass releases the GIL); the
    result does not depend on it.
    """
    prepared = prepare(trace)
    if prepared.line_bytes != hw.line_bytes:
        raise TraceCaptureError(f"trace was captured with {prepared.line_bytes} B lines but {hw.name} has "
                                f"{hw.line_bytes} B lines; re-capture with line_bytes={hw.line_bytes}")
    perm = as_permutation(program_for_slot, prepared.num_programs)
    geometry = CacheGeometry.of(hw)
    queues = [perm[slots] for slots in domain_queues(perm.shape[0], hw)]
    bitset_words = (prepared.unique_lines + 63) // 64

    def replay(queue: np.ndarray) -> tuple[int, int, int]:
        tags, recency = geometry.empty_state()
        return _replay_domain(prepared.lines, prepared.line_ids, prepared.event_offsets,
                              prepared.program_offsets, queue, hw.resident_programs_per_domain,
                              tags, recency, *geometry.kernel_args, np.zeros(bitset_words, dtype=np.uint64))

    if threads > 1:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            counts = list(pool.map(replay, queues))
    else:
        counts = [replay(queue) for queue in queues]
    accesses, hits, unique = np.array(counts, dtype=np.int64).reshape(len(queues), 3).T
    return SimResult(accesses=accesses, hits=hits, unique_lines=unique,
                     programs=np.array([len(q) for q in queues], dtype=np.int64),
                     total_unique_lines=prepared.unique_lines, line_bytes=prepared.line_bytes)
