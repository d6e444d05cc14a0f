"""Replay a captured trace under one remap: the dispatch model feeds each CU's L1 and each domain's L2.

A swizzle only changes which launch slot runs which captured program, never the trace, so the
work splits in two: `prepare` (once per trace: validation, a dense id per distinct line, the
remap-independent bounds) and `simulate` (once per candidate remap: one numba pass per domain
that interleaves that domain's programs as `dispatch` describes and feeds `cache`).

The hierarchy follows what the vendors document and the counters show (NVIDIA H100, ncu):
loads go through the CU's L1, and only the sectors it lacks reach the L2; stores write through
to the L2, which allocates written sectors without fetching them, so every write lookup hits.
Where the L2 is split in partitions (A100/H100), an SM looks up its near partition; sectors it
lacks come from the line's home partition when that is the other one (a far hit: a read miss
on the SM's side, but no DRAM traffic) or from DRAM, and the near side keeps a copy.
A swizzle changes read reuse, so the primary number is the L2 *read* hit rate of requests from
the CUs; the overall rate (reads and writes) is reported beside it. The assumptions are
repeated in every report's notes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numba
import numpy as np

from swizzleperf.errors import HardwareSpecError, TraceCaptureError
from swizzleperf.hardware import MiB, HardwareSpec
from swizzleperf.report import BottleneckReport, DomainStats
from swizzleperf.sim.cache import HASH, CacheGeometry, first_touch, home_partition, lookup, mix64, set_of
from swizzleperf.sim.prepared import PreparedTrace, TraceBounds, prepare  # noqa: F401 (part of the engine's API)
from swizzleperf.sim.dispatch import as_permutation, domain_queues, simulated_domains

if TYPE_CHECKING:
    from swizzleperf.sim.trace import Trace


# --- once per remap: the numba pass over one domain --------------------------------------------
# what `_replay_domain` counts, in sectors (lines where a line is one sector); read lookups and hits
# are the SM side's (near partition); DRAM_FETCHES are the read misses no partition could serve
READ_LOOKUPS, READ_HITS, WRITE_LOOKUPS, L1_LOOKUPS, L1_HITS, FIRST_FETCHES, DRAM_FETCHES = range(7)
N_COUNTS = 7


_SECTOR_COUNT = np.array([bin(m).count("1") for m in range(256)], dtype=np.int64)  # sectors in a mask


@numba.njit(cache=True, nogil=True)
def _popcount(mask):
    return _SECTOR_COUNT[mask]


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
def _l2_access(line, mask, near, l2, l2_geometry, partitions):
    """Sectors `mask` of `line` from an SM near partition `near`: (valid near before, valid nowhere before).

    Sectors missing near come from the line's home partition if that is another one (which keeps
    or gets them too); the near partition keeps a copy either way. One partition: near is home."""
    tags, recency = l2
    scheme, num_sets, set_bits, ways = l2_geometry
    s = set_of(line, scheme, num_sets, set_bits)
    in_near = lookup(tags, recency, near * num_sets + s, line, mask, ways) & mask
    missed = mask & ~in_near
    if missed and partitions > 1:
        home = home_partition(line, partitions)
        if home != near:
            missed &= ~lookup(tags, recency, home * num_sets + s, line, missed, ways)
    return in_near, missed


@numba.njit(cache=True, nogil=True)
def _issue_event(start, stop, cu, lines, masks, is_store, line_ids, l2, l2_geometry, partition_of_cu, partitions,
                 l1, l1_geometry, sectors_per_line, seen_bits, counts):
    """One load or store instruction of a program on CU `cu`: each of its lines through L1 and L2.

    Loads look up the CU's L1 first (when modelled) and send the sectors it lacks to the L2; L2
    read misses are fetched from the next level. Stores go straight to the L2, which allocates the
    written sectors without fetching them (a write lookup always hits), and leave the L1 alone."""
    l1_tags, l1_recency = l1
    l1_sets, l1_set_bits, l1_ways = l1_geometry
    near = partition_of_cu[cu]
    for k in range(start, stop):
        line = lines[k]
        mask = masks[k]
        if is_store[k]:
            _l2_access(line, mask, near, l2, l2_geometry, partitions)
            counts[WRITE_LOOKUPS] += _popcount(mask)
            continue
        if l1_sets > 0:
            s1 = cu * l1_sets + set_of(line, HASH, l1_sets, l1_set_bits)
            in_l1 = lookup(l1_tags, l1_recency, s1, line, mask, l1_ways) & mask
            counts[L1_LOOKUPS] += _popcount(mask)
            counts[L1_HITS] += _popcount(in_l1)
            mask &= ~in_l1
            if mask == 0:
                continue
        in_l2, from_dram = _l2_access(line, mask, near, l2, l2_geometry, partitions)
        counts[READ_LOOKUPS] += _popcount(mask)
        counts[READ_HITS] += _popcount(in_l2)
        counts[DRAM_FETCHES] += _popcount(from_dram)
        missed = mask & ~in_l2
        sector = 0
        while missed:
            if missed & 1:
                counts[FIRST_FETCHES] += first_touch(seen_bits, line_ids[k] * sectors_per_line + sector)
            missed >>= 1
            sector += 1


@numba.njit(cache=True, nogil=True)
def refill_key(turn, position):
    """Sort key for the positions that finished in one turn: the order they take new programs in.
    Programs that finish together start their successors in no fixed order on real GPUs (measured on
    an H100: four consecutive programs span both L2 partitions 44-80% of the time in steady state,
    against 3% in the first wave's order), so the order is a hash: arbitrary but reproducible."""
    return mix64((np.uint64(turn) << np.uint64(32)) | np.uint64(position))


@numba.njit(cache=True, nogil=True)
def _refill(finished, count, turn, queue, queued, program_offsets, next_event, end_event):
    """Give the positions that finished in `turn` the next queued programs, in an order the hardware
    does not fix (a hash of turn and position): returns (queue index, positions left idle)."""
    keys = np.empty(count, dtype=np.uint64)
    for j in range(count):
        keys[j] = refill_key(turn, finished[j])
    idle = 0
    for j in np.argsort(keys):
        i = finished[j]
        queued = _start_next(queue, queued, program_offsets, next_event, end_event, i)
        idle += next_event[i] == end_event[i]
    return queued, idle


@numba.njit(cache=True, nogil=True)
def _replay_domain(lines, masks, is_store, line_ids, event_offsets, program_offsets, queue, first_wave,
                   l2, l2_geometry, partition_of_cu, partitions, l1, l1_geometry, sectors_per_line, seen_bits, counts):
    """Interleave `queue`'s programs (captured ids, launch order) through one cold L2 and its CUs' L1s.

    Rotation position i holds a program's next event `next_event[i]` and its end `end_event[i]`
    (equal: idle) and runs on CU `cu_of[i]` (position i starts on CU first_wave[i], one entry per
    resident program; a program that replaces a finished one takes its CU). Positions that finish
    in one turn take the next queued programs in hashed order (`_refill`). `seen_bits` is a zeroed
    bitset over sector ids (line id * sectors_per_line + sector); `counts` (int64[N_COUNTS], zeroed)
    receives the totals.
    """
    positions = min(first_wave.shape[0], queue.shape[0])
    next_event = np.zeros(positions, dtype=np.int64)
    end_event = np.zeros(positions, dtype=np.int64)
    cu_of = first_wave[:positions].copy()
    finished = np.empty(positions, dtype=np.int64)
    queued = 0
    active = 0
    for i in range(positions):
        queued = _start_next(queue, queued, program_offsets, next_event, end_event, i)
        active += next_event[i] != end_event[i]

    turn = 0
    while active > 0:
        count = 0
        for i in range(positions):  # one turn
            event = next_event[i]
            if event == end_event[i]:
                continue
            _issue_event(event_offsets[event], event_offsets[event + 1], cu_of[i], lines, masks, is_store, line_ids,
                         l2, l2_geometry, partition_of_cu, partitions, l1, l1_geometry, sectors_per_line, seen_bits,
                         counts)
            next_event[i] = event + 1
            if event + 1 == end_event[i]:
                finished[count] = i
                count += 1
        if count:
            queued, idle = _refill(finished, count, turn, queue, queued, program_offsets, next_event, end_event)
            active -= idle
        turn += 1
        if queued == queue.shape[0] and 2 * active < positions:
            # idle positions are never refilled now: drop them, keeping the rotation order
            kept = 0
            for i in range(positions):
                if next_event[i] != end_event[i]:
                    next_event[kept] = next_event[i]
                    end_event[kept] = end_event[i]
                    cu_of[kept] = cu_of[i]
                    kept += 1
            positions = kept


# --- the result --------------------------------------------------------------------------------
@dataclass(frozen=True)
class SimResult:
    """Per-domain counts of one trace replayed under one remap, in sectors (lines where a line is one
    sector); `counts[d]` is indexed by READ_LOOKUPS, READ_HITS, ... above."""

    counts: np.ndarray  # int64[num_domains, N_COUNTS]
    programs: np.ndarray  # int64[num_domains]: programs dispatched to the domain
    bounds: TraceBounds  # remap-independent counts of the whole trace
    sector_bytes: int

    @property
    def num_domains(self) -> int:
        return self.counts.shape[0]

    def total(self, what: int) -> int:
        return int(self.counts[:, what].sum())

    # per-domain views (what a die's L2 saw of reads) and their totals
    @property
    def accesses(self) -> np.ndarray:
        return self.counts[:, READ_LOOKUPS]

    @property
    def hits(self) -> np.ndarray:
        return self.counts[:, READ_HITS]

    @property
    def unique_lines(self) -> np.ndarray:
        """Sectors (lines) each domain fetched for the first time: its share of the compulsory misses."""
        return self.counts[:, FIRST_FETCHES]

    @property
    def read_lookups(self) -> int:
        return self.total(READ_LOOKUPS)

    @property
    def read_hits(self) -> int:
        return self.total(READ_HITS)

    @property
    def read_hit_pct(self) -> float:
        return _pct(self.read_hits, self.read_lookups)

    hit_pct = read_hit_pct

    @property
    def overall_hit_pct(self) -> float:
        """Reads and writes together (what an unfiltered L2 hit-rate counter shows): writes always hit."""
        writes = self.total(WRITE_LOOKUPS)
        return _pct(self.read_hits + writes, self.read_lookups + writes)

    @property
    def ceiling_pct(self) -> float:
        """The read hit rate no remap can beat: every read-only sector fetched once, and every read
        reaching the L2 (an L1 only lowers the lookups, never the compulsory fetches)."""
        b = self.bounds
        return _pct(b.read_sectors - b.read_only_unique, b.read_sectors)

    @property
    def bytes_fetched(self) -> int:
        """Read bytes from DRAM (the next level): misses on the SM side that no partition could serve."""
        return self.total(DRAM_FETCHES) * self.sector_bytes

    def to_report(self, kernel_name: str, size_name: str, hw: HardwareSpec) -> BottleneckReport:
        if simulated_domains(hw) != self.num_domains:
            raise ValueError(f"this result has {self.num_domains} domains but {hw.name} has "
                             f"{simulated_domains(hw)}: pass the spec it was simulated with")
        per_domain = [
            DomainStats(domain=d, programs=int(self.programs[d]), accesses=int(c[READ_LOOKUPS]),
                        hits=int(c[READ_HITS]), unique_lines=int(c[FIRST_FETCHES]))
            for d, c in enumerate(self.counts)
        ]
        l1 = self.total(L1_LOOKUPS)
        return BottleneckReport(
            source="sim", hardware=hw.name, kernel=kernel_name, size=size_name, metric="read",
            hit_pct=self.read_hit_pct, ceiling_pct=self.ceiling_pct, accesses=self.read_lookups,
            hits=self.read_hits, unique_lines=self.bounds.read_only_unique, granule_bytes=self.sector_bytes,
            overall_hit_pct=self.overall_hit_pct, write_accesses=self.total(WRITE_LOOKUPS),
            write_hit_pct=100.0 if self.total(WRITE_LOOKUPS) else None,
            l1_hit_pct=_pct(self.total(L1_HITS), l1) if l1 else None, l1_accesses=l1 if hw.l1_bytes_per_cu else None,
            bytes_from_next_level=self.bytes_fetched, programs_per_cu=hw.programs_per_cu,
            trace_accesses=self.bounds.trace_accesses,
            per_domain=per_domain, notes=model_notes(hw))


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def model_notes(hw: HardwareSpec) -> list[str]:
    """The simulator's assumptions in short, for a report's notes."""
    if hw.dispatch.policy == "round_robin":
        chunk = hw.dispatch.chunk
        dispatch = (f"dispatch: round-robin over {hw.num_domains} L2 domains, chunk {chunk} "
                    f"(launch slot w -> domain (w // {chunk}) % {hw.num_domains})")
    else:
        order = "in the scheduler's measured order" if hw.dispatch.first_wave else "SM 0, 1, 2, ... round and round"
        dispatch = f"dispatch: in launch order onto one shared L2; the first wave fills the SMs {order}"
    granule = (f"{hw.line_bytes} B lines of {hw.sectors_per_line} {hw.sector_bytes} B sectors (lookups and fills "
               f"per sector)" if hw.sectors_per_line > 1 else f"{hw.line_bytes} B lines")
    l1 = (f"L1 per CU: {hw.l1_bytes_per_cu // 1024} KB, {hw.l1_ways}-way, hash-indexed, LRU, for loads only "
          f"(stores write through)" if hw.l1_bytes_per_cu else "no L1 modelled: every load reaches the L2")
    return [
        "prediction, not a measurement: the captured memory trace replayed through a model of the caches",
        dispatch,
        f"{hw.resident_programs_per_domain} programs resident per domain ({hw.cus_per_domain} CUs x "
        f"{hw.programs_per_cu} per CU), issuing one load/store each per turn in rotation; "
        f"a finished program is replaced by the next queued one on the same CU",
        l1,
        f"L2 per domain: {hw.l2_bytes_per_domain / MiB:g} MB, {hw.l2_ways}-way, {hw.num_sets} sets, {granule}, "
        f"set index {hw.set_index}, true LRU, cold at kernel start",
        *([f"L2 in {hw.l2_partitions} partitions of {hw.l2_bytes_per_domain / hw.l2_partitions / MiB:g} MB: an SM "
           f"looks up its near one ({'measured SM layout' if hw.cu_partition else 'SMs split in equal blocks'}); "
           f"what it lacks comes from the line's home partition (a hash of the address) or DRAM, and the near side "
           f"keeps a copy; a far hit is a read miss on the SM side"] if hw.l2_partitions > 1 else []),
        "read hit rate = 1 - L2 read misses / read requests from the CUs (their L1 misses): fills are instant, so "
        "a request for a sector already on its way counts as served, as on the GPU, where such requests join the "
        "fetch (NVIDIA: merged by the L2 request coalescer before the tag lookup); writes allocate without a fetch "
        "(always a hit) and count only in the overall rate",
        "ceiling = 1 - read-only sectors / read sectors: each fetched once, no L1 filtering",
    ]


# --- the entry point ---------------------------------------------------------------------------
def simulate(trace: "Trace | PreparedTrace", program_for_slot, hw: HardwareSpec, threads: int = 1) -> SimResult:
    """Predict per-domain cache behaviour when launch slot w runs captured program `program_for_slot[w]`.

    Pass a `PreparedTrace` (from `prepare`) when simulating many remaps of one trace. Domains are
    independent, so `threads > 1` replays several at once (the numba pass releases the GIL); the
    result does not depend on it.
    """
    prepared = prepare(trace)
    if prepared.line_bytes != hw.line_bytes:
        raise TraceCaptureError(f"trace was captured with {prepared.line_bytes} B lines but {hw.name} has "
                                f"{hw.line_bytes} B lines; re-capture with line_bytes={hw.line_bytes}")
    perm = as_permutation(program_for_slot, prepared.num_programs)
    queues = [perm[slots] for slots in domain_queues(perm.shape[0], hw)]
    spl = hw.sectors_per_line
    masks = prepared.masks_for(spl)
    partitions = hw.l2_partitions
    l2 = CacheGeometry(num_sets=hw.sets_per_partition, ways=hw.l2_ways, set_index=hw.set_index)
    first_wave = np.asarray(hw.first_wave_cus(), dtype=np.int64)
    partition_of_cu = np.asarray(hw.partition_of_cu, dtype=np.int64)
    if partition_of_cu.max() >= partitions or first_wave.max() >= hw.cus_per_domain:  # model_copy skips validation
        raise HardwareSpecError(f"{hw.name}: cu_partition or dispatch.first_wave does not fit {partitions} "
                                f"partitions of {hw.cus_per_domain} CUs")
    l1 = CacheGeometry(num_sets=max(1, hw.l1_sets), ways=hw.l1_ways, set_index="hash")
    l1_args = (hw.l1_sets, l1.set_bits, hw.l1_ways)
    bitset_words = (prepared.unique_lines * spl + 63) // 64

    def replay(queue: np.ndarray) -> np.ndarray:
        counts = np.zeros(N_COUNTS, dtype=np.int64)
        l1_state = l1.empty_state(copies=hw.cus_per_domain if hw.l1_sets else 0)
        _replay_domain(prepared.lines, masks, prepared.is_store, prepared.line_ids, prepared.event_offsets,
                       prepared.program_offsets, queue, first_wave,
                       l2.empty_state(copies=partitions), l2.kernel_args, partition_of_cu, partitions, l1_state, l1_args,
                       spl,
                       np.zeros(bitset_words, dtype=np.uint64), counts)
        return counts

    if threads > 1:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            counts = list(pool.map(replay, queues))
    else:
        counts = [replay(queue) for queue in queues]
    return SimResult(counts=np.array(counts, dtype=np.int64).reshape(len(queues), N_COUNTS),
                     programs=np.array([len(q) for q in queues], dtype=np.int64), bounds=prepared.bounds(spl),
                     sector_bytes=hw.line_bytes // spl)
