"""Replay a captured trace under one remap: the dispatch model feeds each CU's L1 and each domain's L2.

A swizzle only changes which launch slot runs which captured program, never the trace, so the
work splits in two: `prepare` (once per trace: validation, a dense id per distinct line, the
remap-independent bounds) and `simulate` (once per candidate remap: one numba pass per domain,
replay.py, that interleaves that domain's programs as `dispatch` describes and feeds `cache`). The
pass reads the trace as runs of consecutive lines, from memory or from a stored trace's file in
chunks under a memory bound (chunks.py); past a size threshold it simulates a sample of the L2
sets (sampling.py).

The hierarchy follows what the vendors document and the counters show (NVIDIA H100, ncu):
loads go through the CU's L1, and only the sectors it lacks reach the L2; stores write through
to the L2, which allocates written sectors without fetching them, so every write lookup hits.
Where the L2 is split in partitions (A100/H100), an SM looks up its near partition; sectors it
lacks come from the line's home partition when that is the other one (a far hit: a read miss
on the SM's side, but no DRAM traffic) or from DRAM, and the near side keeps a copy. A read miss fetches
the aligned block of the L2's fetch granularity around each missing sector (64 B on Hopper, measured), and
the sectors fetched beside the requested ones count as misses of that read, as ncu counts them.
A swizzle changes read reuse, so the primary number is the L2 *read* hit rate of requests from
the CUs; the overall rate (reads and writes) is reported beside it. The assumptions are
repeated in every report's notes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from swizzleperf.errors import HardwareSpecError, TraceCaptureError
from swizzleperf.hardware.dispatch import as_permutation, domain_queues, simulated_domains
from swizzleperf.hardware.presets import MiB
from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.records.report import BottleneckReport, DomainStats
from swizzleperf.sim import settings
from swizzleperf.sim.cache_model import CacheGeometry
from swizzleperf.sim.chunks import MemoryRuns, program_rounds, replay_domain
from swizzleperf.sim.prepared import PreparedTrace, TraceBounds, prepare  # noqa: F401 (part of the engine's API)
from swizzleperf.sim.replay import (
    DRAM_FETCHES,
    FIRST_FETCHES,
    L1_HITS,
    L1_LOOKUPS,
    N_COUNTS,
    PROMOTED_MISSES,
    RATE_ONE,
    READ_HITS,
    READ_LOOKUPS,
    WRITE_LOOKUPS,
)
from swizzleperf.sim.sampling import choose_sample, scale_counts
from swizzleperf.sim.scheduler import walked_cus

if TYPE_CHECKING:
    from swizzleperf.sim.trace.record import Trace


# --- the result --------------------------------------------------------------------------------
@dataclass(frozen=True)
class SimResult:
    """Per-domain counts of one trace replayed under one remap, in sectors (lines where a line is one
    sector); `counts[d]` is indexed by READ_LOOKUPS, READ_HITS, ... above."""

    counts: np.ndarray  # int64[num_domains, N_COUNTS]
    programs: np.ndarray  # int64[num_domains]: programs dispatched to the domain
    bounds: TraceBounds  # remap-independent counts of the whole trace
    sector_bytes: int
    sampling: str | None = None  # set sampling's note when only some L2 sets were simulated

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
        """Read requests served without a miss, less the sectors their misses fetched beside them (counted as
        misses of those requests, as ncu counts them)."""
        return self.counts[:, READ_HITS] - self.counts[:, PROMOTED_MISSES]

    @property
    def unique_lines(self) -> np.ndarray:
        """Sectors (lines) each domain fetched for the first time: its share of the compulsory misses."""
        return self.counts[:, FIRST_FETCHES]

    @property
    def read_lookups(self) -> int:
        return self.total(READ_LOOKUPS)

    @property
    def read_hits(self) -> int:
        return int(self.hits.sum())

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
        """The read hit rate no remap can beat (TraceBounds.ceiling_pct)."""
        return self.bounds.ceiling_pct

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
                        hits=int(self.hits[d]), unique_lines=int(c[FIRST_FETCHES]))
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
            per_domain=per_domain, notes=model_notes(hw) + ([self.sampling] if self.sampling else []))


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
          f"(stores write through); its hit rate counts a program's load of a sector once, where ncu counts every "
          f"warp's lookup (spmv: 40 % here, 85 % measured, for the same L2 requests)"
          if hw.l1_bytes_per_cu else "no L1 modelled: every load reaches the L2")
    return [
        "prediction, not a measurement: the captured memory trace replayed through a model of the caches",
        dispatch,
        f"{hw.resident_programs_per_domain} programs resident per domain ({hw.cus_per_domain} CUs x "
        f"{hw.programs_per_cu} per CU), turning in the order they started, each issuing rounds (the loads it has in "
        "flight together: straight-line loads, one loop iteration, then its stores; a load whose address comes from "
        "loaded data is not told apart)" + _pace_note(hw) + "; a finished program is replaced by the next queued "
        "one" + _refill_note(hw),
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
        *([f"a read miss fetches the {hw.l2_fetch_bytes} B block around each missing sector (the L2's fetch "
           f"granularity, measured on an H100); the sectors fetched beside the requested ones count as misses of "
           f"that read, as ncu counts them"] if hw.fetch_sectors > 1 else []),
        "ceiling = 1 - read-only sectors / read sectors: each fetched once, no L1 filtering",
    ]


def _pace_note(hw: HardwareSpec) -> str:
    slowdown = hw.dispatch.younger_slowdown
    if slowdown == 0:
        return ", one round per turn"
    return (f": a CU's oldest program one round per turn, its k-th oldest 1 / (1 + {slowdown:g} k) of one "
            f"(measured on an H200: younger programs go slower, so waves dissolve)")


def _refill_note(hw: HardwareSpec) -> str:
    walk = hw.dispatch.walk
    if walk is None:
        return " on a CU a finished one freed, taken in a hashed order"
    return (f"; the SM it runs on is the scheduler's walk (measured on an H100, fitted on programs that only spin): "
            f"freed slots, taken {walk.window_ns:g} ns at a time, get the next programs walking the SM order on from "
            f"the SM served last, each program running its rounds x the longer of {walk.dram_latency_ns:g} ns (a DRAM "
            f"round trip) and the kernel's compulsory DRAM traffic at {walk.peak_dram_bytes_per_ns / 1000:g} TB/s "
            f"shared over its rounds, +- {walk.finish_jitter_ns:g} ns of disorder (seed {walk.seed}; no compute "
            f"term; stretched by the same pace rule)")


# --- the entry point ---------------------------------------------------------------------------
def simulate(trace: "Trace | PreparedTrace", program_for_slot, hw: HardwareSpec, threads: int = 1,
             sample: int | None = None, memory_bytes: int | None = None,
             recorded_cus: np.ndarray | None = None) -> SimResult:
    """Predict per-domain cache behaviour when launch slot w runs captured program `program_for_slot[w]`.

    Pass a `PreparedTrace` (from `prepare`) when simulating many remaps of one trace. Domains are
    independent, so `threads > 1` replays several at once (the numba pass releases the GIL); the
    result does not depend on it. `sample`: simulate one L2 set in that many (1: all; None: the
    settings' default for the trace's size, sampling.py). `memory_bytes` bounds the trace data a
    stored trace's replay keeps in memory (default `settings.sim_memory_bytes()`). `recorded_cus`: the CU
    (within its domain) each launch slot ran on in a launch recorded on a GPU (benchmarks/probe_placement.py);
    it replaces the dispatch model's placement (the scheduler's walk where `hw.dispatch.walk` has one), to tell the
    model's placement error from the caches' (fidelity).
    """
    prepared = prepare(trace)
    if prepared.line_bytes != hw.line_bytes:
        raise TraceCaptureError(f"trace was captured with {prepared.line_bytes} B lines but {hw.name} has "
                                f"{hw.line_bytes} B lines; re-capture with line_bytes={hw.line_bytes}")
    perm = as_permutation(program_for_slot, prepared.num_programs)
    queues = [perm[slots] for slots in domain_queues(perm.shape[0], hw)]
    spl = hw.sectors_per_line
    chosen = choose_sample(hw, prepared.accesses, sample)
    budget = (memory_bytes or settings.sim_memory_bytes()) // max(1, min(threads, len(queues)))
    source = run_source(prepared, budget)
    model = _model(hw)
    if recorded_cus is None and hw.dispatch.walk is not None:
        recorded_cus = _walked(prepared, source, perm, hw, budget)
    cu_of_program = _placed(recorded_cus, perm, hw)

    def replay(queue: np.ndarray) -> np.ndarray:
        counts = np.zeros(N_COUNTS + 1, dtype=np.int64)
        l2, l1 = model["l2"].empty_state(copies=hw.l2_partitions), model["l1"].empty_state(
            copies=hw.cus_per_domain if hw.l1_sets else 0)
        seen_bits = np.zeros((prepared.unique_lines * spl + 63) // 64, dtype=np.uint64)
        sets = chosen.mask() if chosen else np.zeros(0, np.uint8)
        replay_domain(source, queue, spl, model["first_wave"], budget,
                      (model["pace_of_rank"], l2, (*model["l2"].kernel_args, hw.fetch_sectors), model["partition_of_cu"], hw.l2_partitions,
                       l1, model["l1_args"],
                       seen_bits, sets), counts, cu_of_program)
        return counts

    if threads > 1:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            counts = list(pool.map(replay, queues))
    else:
        counts = [replay(queue) for queue in queues]
    raw = np.array(counts, dtype=np.int64).reshape(len(queues), N_COUNTS + 1)
    return SimResult(counts=scale_counts(raw), programs=np.array([len(q) for q in queues], dtype=np.int64),
                     bounds=prepared.bounds(spl), sector_bytes=hw.line_bytes // spl,
                     sampling=chosen.note(prepared.accesses) if chosen else None)


def run_source(prepared, budget: int):
    """Where the replay reads runs: a stored trace's own (chunked from disk), else the trace's runs in memory."""
    if hasattr(prepared, "run_source"):
        return prepared.run_source(budget)
    if "runs" not in prepared._resampled:
        prepared._resampled["runs"] = MemoryRuns(prepared)
    return prepared._resampled["runs"]


def _walked(prepared, source, perm: np.ndarray, hw: HardwareSpec, budget: int) -> np.ndarray:
    """The SM of each launch slot under the scheduler's walk (scheduler.py): programs run as long as their rounds,
    at the pace of the kernel's compulsory DRAM traffic (every read-only sector once, every written one)."""
    spl = hw.sectors_per_line
    bounds = prepared.bounds(spl)
    compulsory = (bounds.read_only_unique + bounds.write_sectors) * (hw.line_bytes // spl)
    return walked_cus(program_rounds(source, budget)[perm], hw, compulsory)


def _placed(recorded_cus, perm: np.ndarray, hw: HardwareSpec) -> np.ndarray | None:
    """Per trace program, the CU its launch slot ran on in a recorded launch (None without a recording)."""
    if recorded_cus is None:
        return None
    cus = np.asarray(recorded_cus, dtype=np.int64)
    if cus.shape != perm.shape or cus.min(initial=0) < 0 or cus.max(initial=0) >= hw.cus_per_domain:
        raise HardwareSpecError(f"recorded placement: need one CU in [0, {hw.cus_per_domain}) per launch slot "
                                f"({perm.shape[0]}), got shape {cus.shape} with values {cus.min(initial=0)}.."
                                f"{cus.max(initial=0)}")
    cu_of_program = np.empty_like(cus)
    cu_of_program[perm] = cus
    return cu_of_program


def _model(hw: HardwareSpec) -> dict:
    """The cache geometries and CU tables of `hw`, checked (model_copy skips validation)."""
    first_wave = np.asarray(hw.first_wave_cus(), dtype=np.int64)
    partition_of_cu = np.asarray(hw.partition_of_cu, dtype=np.int64)
    if partition_of_cu.max() >= hw.l2_partitions or first_wave.max() >= hw.cus_per_domain:
        raise HardwareSpecError(f"{hw.name}: cu_partition or dispatch.first_wave does not fit {hw.l2_partitions} "
                                f"partitions of {hw.cus_per_domain} CUs")
    l1 = CacheGeometry(num_sets=max(1, hw.l1_sets), ways=hw.l1_ways, set_index="hash")
    return {"l2": CacheGeometry(num_sets=hw.sets_per_partition, ways=hw.l2_ways, set_index=hw.set_index),
            "l1": l1, "l1_args": (hw.l1_sets, l1.set_bits, hw.l1_ways), "first_wave": first_wave,
            "partition_of_cu": partition_of_cu, "pace_of_rank": pace_of_rank(hw, first_wave.shape[0])}


def pace_of_rank(hw: HardwareSpec, positions: int) -> np.ndarray:
    """int64[positions + 1]: how far a CU's k-th oldest resident program gets per turn, in RATE_ONE units of a
    round: 1 / (1 + slowdown x k) of the oldest's (dispatch.py)."""
    ranks = np.arange(positions + 1)
    return np.round(RATE_ONE / (1.0 + hw.dispatch.younger_slowdown * ranks)).astype(np.int64)
