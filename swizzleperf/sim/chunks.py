"""Where the replay's run chunks come from (memory or a trace file), and the chunked domain loop.

Both sources hand `replay.replay_chunk` the same arrays, so a trace gives the same counts whether it
is replayed from memory in one chunk or from disk in many; only memory and speed differ.
"""

from __future__ import annotations

import numba
import numpy as np

from swizzleperf.sim.prepared import PreparedTrace, TraceBounds, resample_masks
from swizzleperf.sim.replay import QUEUED, fill_first_wave, replay_chunk
from swizzleperf.sim.rounds import round_starts
from swizzleperf.sim.trace.line_runs import RunFile, encode_runs, line_ids

# in a chunk: a run (start, length, mask, line id), an event (offset, store flag, site, round start)
RUN_BYTES, EVENT_BYTES = 21, 14


class MemoryRuns:
    """The runs of an in-memory trace: one chunk, no copies (program i = its events in the trace)."""

    in_memory = True

    def __init__(self, prepared: PreparedTrace):
        starts, lens, masks, ev_runs = encode_runs(prepared.lines, prepared.sectors, prepared.event_offsets)
        first_access = np.concatenate([[0], np.cumsum(lens, dtype=np.int64)[:-1]])
        self.starts, self.lens, self.masks = starts, lens, masks
        self.ids = prepared.line_ids[first_access].astype(np.int64) if starts.size else np.empty(0, np.int64)
        self.ev_off = np.concatenate([[0], np.cumsum(ev_runs, dtype=np.int64)])
        nonempty = np.diff(prepared.event_offsets) > 0
        self.ev_store = np.zeros(nonempty.shape[0], np.bool_)
        self.ev_store[nonempty] = prepared.is_store[prepared.event_offsets[:-1][nonempty]]
        self.program_offsets = prepared.program_offsets
        self.nev = np.diff(prepared.program_offsets)
        self.ev_round = round_starts(prepared.sites, self.ev_store, self.nev)
        self.spl = prepared.sectors_per_line
        self._masks: dict[int, np.ndarray] = {}
        self.rounds: np.ndarray | None = None  # per program, once asked (program_rounds)

    def gather(self, programs: np.ndarray, spl: int):
        if spl not in self._masks:
            self._masks[spl] = resample_masks(self.masks, self.spl, spl)
        chunk = (self.starts, self.lens, self._masks[spl], self.ids, self.ev_off, self.ev_store, self.ev_round)
        return chunk, self.program_offsets[programs], self.program_offsets[programs + 1]


class FileRuns:
    """The runs of a trace file: read whole once where they fit `budget` bytes, else a chunk at a time."""

    def __init__(self, file: RunFile, sectors_per_line: int, budget: int):
        self.file = file
        self.nev = file.index["nev"]
        self.spl = sectors_per_line
        self.bytes_per_program = file.index["nruns"] * RUN_BYTES + file.index["nev"] * EVENT_BYTES
        self.has_sites = bool(file.header.get("has_sites", True))
        self.in_memory = int(self.bytes_per_program.sum()) <= budget
        self._whole: dict[int, tuple] = {}
        self.rounds: np.ndarray | None = None  # per program, once asked (program_rounds)

    def gather(self, programs: np.ndarray, spl: int):
        if not self.in_memory:
            return self._read(programs, spl)
        if spl not in self._whole:
            self._whole[spl] = self._read(np.arange(self.nev.shape[0]), spl)
        chunk, lo, hi = self._whole[spl]
        return chunk, lo[programs], hi[programs]

    def _read(self, programs: np.ndarray, spl: int):
        g = self.file.gather(programs)
        ids = line_ids(self.file.index["iv_lo"], self.file.iv_base, g.starts)
        rounds = round_starts(g.ev_site if self.has_sites else None, g.ev_store, g.prog_hi - g.prog_lo)
        chunk = (g.starts, g.lens, resample_masks(g.masks, self.spl, spl), ids, g.ev_off, g.ev_store, rounds)
        return chunk, g.prog_lo, g.prog_hi


def replay_domain(source, queue: np.ndarray, spl: int, first_wave: np.ndarray, budget: int, model: tuple,
                  counts: np.ndarray, cu_of_program: np.ndarray | None = None) -> int:
    """Replay one domain's queue (programs in start order) chunk by chunk; returns the chunks used.

    `cu_of_program` (indexed by trace program): where each program ran on a GPU, replacing the dispatch model's
    placement (replay.py).

    `model` = (pace_of_rank, l2 state, l2 geometry, partition_of_cu, partitions, l1 state, l1 geometry, seen_bits,
    sample), the arguments of `replay_chunk` after the chunk's."""
    positions = min(first_wave.shape[0], queue.shape[0])
    work = queue[source.nev[queue] > 0]  # programs without events never take a position
    rotation = (np.zeros(positions, np.int64), np.zeros(positions, np.int64), first_wave[:positions].copy(),
                np.zeros(positions, np.int64), np.zeros(positions, np.int64))
    state = np.array([positions, 0, 0], dtype=np.int64)
    pace_of_rank, l2, l2_geometry, partition_of_cu, partitions, l1, l1_geometry, seen_bits, sample = model
    taken, live, live_done, chunks = 0, np.empty(0, np.int64), np.empty(0, np.int64), 0
    while True:
        new = len(work) - taken if source.in_memory else _fitting(source, work, taken, live, budget, positions)
        programs = np.concatenate([live, work[taken:taken + new]])
        chunk, lo, hi = source.gather(programs, spl)
        placed = cu_of_program[programs] if cu_of_program is not None else np.empty(0, np.int64)
        if chunks == 0:
            fill_first_wave(lo, hi, placed, rotation, state)
        else:
            _resume(rotation, state, lo, hi, live_done, len(live))
        final = taken + new == len(work)
        chunks += 1
        if replay_chunk(chunk, lo, hi, placed, final, rotation, state, pace_of_rank, l2, l2_geometry, partition_of_cu,
                        partitions, l1, l1_geometry, spl, seen_bits, sample, counts):
            return chunks
        taken += int(state[QUEUED]) - (len(live) if chunks > 1 else 0)
        running = rotation[3][:state[0]]  # every position in use holds a running program
        live = programs[running]
        live_done = rotation[0][:state[0]] - lo[running]


def _fitting(source, work: np.ndarray, taken: int, live: np.ndarray, budget: int, positions: int) -> int:
    """How many queued programs the next chunk takes: as many as fit the budget beside the live ones,
    and more than one turn can start (so every chunk makes progress)."""
    room = budget - int(source.bytes_per_program[live].sum())
    fit = int(np.searchsorted(np.cumsum(source.bytes_per_program[work[taken:]]), room, side="right"))
    return min(len(work) - taken, max(fit, positions + 1))


def _resume(rotation, state, lo: np.ndarray, hi: np.ndarray, done: np.ndarray, n_live: int) -> None:
    """Point the positions in use at their programs in the new chunk (the live programs come first, in position
    order)."""
    next_event, end_event, _, prog_of = rotation[:4]
    prog_of[:n_live] = np.arange(n_live)
    next_event[:n_live] = lo[:n_live] + done
    end_event[:n_live] = hi[:n_live]
    state[QUEUED] = n_live


_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _bounds_pass(starts, lens, masks, ids, ev_off, ev_store, read, written, totals):
    """Accumulate sector reads and writes and each line's read and written sectors."""
    for e in range(ev_store.shape[0]):
        for r in range(ev_off[e], ev_off[e + 1]):
            m, n = masks[r], lens[r]
            into = written if ev_store[e] else read
            totals[1 if ev_store[e] else 0] += _POPCOUNT[m] * n
            for j in range(n):
                into[ids[r] + j] |= m


def streamed_bounds(source: FileRuns, spl: int, budget: int) -> TraceBounds:
    """The trace's remap-independent bounds in one pass over the file (prepared.TraceBounds' meaning)."""
    read = np.zeros(source.file.unique_lines, np.uint8)
    written = np.zeros(source.file.unique_lines, np.uint8)
    totals = np.zeros(2, np.int64)
    for programs in _slices(source, budget):
        chunk, _, _ = source._read(programs, spl)
        _bounds_pass(*chunk[:6], read, written, totals)
    return TraceBounds(trace_accesses=int(source.file.index["accesses"].sum()), read_sectors=int(totals[0]),
                       write_sectors=int(totals[1]), read_only_unique=int(_POPCOUNT[read & ~written].sum()))


def _slices(source: FileRuns, budget: int):
    """The trace file's programs in consecutive slices of about `budget` bytes each (at least one program)."""
    n, cum, lo = source.nev.shape[0], np.cumsum(source.bytes_per_program), 0
    while lo < n:
        hi = min(n, max(lo + 1, int(np.searchsorted(cum, (cum[lo - 1] if lo else 0) + budget, side="right"))))
        yield np.arange(lo, hi)
        lo = hi


def program_rounds(source, budget: int) -> np.ndarray:
    """int64[G]: the rounds (rounds.py) each trace program issues, i.e. how many turns it runs (remembered on the
    source: a stored trace's file is read once for it, a slice at a time)."""
    if source.rounds is None:
        slices = [np.arange(source.nev.shape[0])] if source.in_memory else _slices(source, budget)
        read = source.gather if source.in_memory else source._read
        parts = []
        for programs in slices:
            chunk, lo, hi = read(programs, source.spl)
            started = np.concatenate([[0], np.cumsum(chunk[6], dtype=np.int64)])
            parts.append(started[hi] - started[lo])
        source.rounds = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return source.rounds
