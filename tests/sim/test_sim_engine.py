"""The dispatch model and the engine: exact per-domain counts against a plain-Python replay,
and hand-computed cases that show what a remap changes."""

from collections import OrderedDict, deque
from dataclasses import dataclass

import numpy as np
import pytest
from test_sim_cache import oracle_set

from swizzleperf.errors import HardwareSpecError, RemapRejected, TraceCaptureError
from swizzleperf.hardware.dispatch import domain_queues, placement, slot_domains, slot_start_ranks
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.sim.engine import DRAM_FETCHES, L1_HITS, PROMOTED_MISSES, WRITE_LOOKUPS, prepare, simulate

LINE = 128


# --- test traces ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class LocalTrace:
    """The fields of swizzleperf.sim.trace.record.Trace; the engine takes any object that has them."""

    lines: np.ndarray
    is_store: np.ndarray
    event_offsets: np.ndarray
    program_offsets: np.ndarray
    line_bytes: int
    sectors: np.ndarray | None = None
    sector_bytes: int | None = None
    sites: np.ndarray | None = None


def make_trace(programs: list[list[list[int]]], stores: set[tuple[int, int]] = frozenset(),
               masks: dict[int, int] | None = None, sites: list[list[int]] | None = None) -> LocalTrace:
    """programs[p][e] = the lines of event e of captured program p; `stores` holds the (p, e) that are
    stores; `masks` (line -> 4-bit mask of 32 B sectors) makes a sectored trace; `sites[p][e]` is the
    instruction of event e of program p."""
    events = [(p, e, event) for p, program in enumerate(programs) for e, event in enumerate(program)]
    lines = np.array([line for _, _, event in events for line in event], dtype=np.int64)
    store = np.array([(p, e) in stores for p, e, event in events for _ in event], dtype=bool)
    sectored = {} if masks is None else {"sector_bytes": 32, "sectors": np.array(
        [masks[line] for line in lines.tolist()], dtype=np.uint8)}
    return LocalTrace(
        lines=lines, is_store=store.reshape(lines.shape),
        event_offsets=np.cumsum([0] + [len(event) for _, _, event in events], dtype=np.int64),
        program_offsets=np.cumsum([0] + [len(p) for p in programs], dtype=np.int64),
        line_bytes=LINE, sites=None if sites is None else np.array([x for ps in sites for x in ps], np.int32),
        **sectored)


def make_spec(num_domains=8, sets=4, ways=2, set_index="modulo", policy="round_robin", chunk=1,
              resident=2, cus=None, l1_sets=0, l1_ways=2, sector_bytes=None, partitions=1, cu_partition=None,
              first_wave=None, fetch_bytes=None, walk=None, slowdown=0.0) -> HardwareSpec:
    """`resident` programs per domain on `cus` CUs (default: one program per CU); `sets` per partition; `walk`:
    the scheduler walk's fields (sim/scheduler.py); `slowdown`: how much slower each younger program of a CU goes."""
    cus = cus or resident
    return HardwareSpec.model_validate({
        **PRESETS["mi300x"].model_dump(), "name": "test", "num_domains": num_domains,
        "cus_per_domain": cus, "programs_per_cu": resident // cus,
        "l2_bytes_per_domain": partitions * sets * ways * LINE, "l2_ways": ways, "set_index": set_index,
        "dispatch": {"policy": policy, "chunk": chunk, "first_wave": first_wave, "walk": walk,
                     "younger_slowdown": slowdown},
        "l2_partitions": partitions,
        "cu_partition": cu_partition, "l1_bytes_per_cu": l1_sets * l1_ways * LINE, "l1_ways": l1_ways,
        "sector_bytes": sector_bytes, "l2_fetch_bytes": fetch_bytes})


def no_l1(hw: HardwareSpec) -> HardwareSpec:
    return hw.model_copy(update={"l1_bytes_per_cu": 0})


# --- the oracle: the documented dispatch model, written plainly ------------------------------------
def oracle_first_wave(hw: HardwareSpec) -> list[int]:
    """Walk the measured first-wave sequence (or 0..cus-1) again and again, giving each CU at most
    programs_per_cu programs, until every resident position has a CU."""
    sequence = hw.dispatch.first_wave or list(range(hw.cus_per_domain))
    wave = []
    while len(wave) < hw.cus_per_domain * hw.programs_per_cu:
        for cu in sequence:
            if wave.count(cu) < hw.programs_per_cu:
                wave.append(cu)
    return wave


def oracle_round_starts(program_sites: list[int], program_stores: list[bool]) -> list[bool]:
    """rounds.py's rule, plainly: a round begins at the first event, at an instruction already in the round,
    and at a store once the round holds a load."""
    starts, current = [], []
    for site, store in zip(program_sites, program_stores):
        start = not current or site in [s for s, _ in current] or (store and any(not st for _, st in current))
        if start:
            current = []
        current.append((site, store))
        starts.append(start)
    return starts


ONE = 1 << 16  # a round, in the fixed point the replay counts a program's progress in


def oracle_domain_streams(programs, program_for_slot, hw, detail=False, round_starts=None,
                          recorded_cus=None) -> list[list]:
    """Per domain, the line stream its CUs issue; with `detail`, (cu, program, event, line) items. The resident
    programs turn in the order they started; a CU's k-th oldest gains 1 / (1 + younger_slowdown x k) of a round per
    turn and issues one when it has gained a whole one. `round_starts[p][e]`: event e of program p begins a round
    (default: every event does). `recorded_cus[w]`: the CU launch slot w runs on (default: the first wave's CUs,
    then the CUs programs free)."""
    cu_of_program = {int(program): int(cu) for program, cu in zip(program_for_slot, recorded_cus)} \
        if recorded_cus is not None else None
    domains = 1 if hw.dispatch.policy == "in_order" else hw.num_domains
    queues = [[] for _ in range(domains)]
    for slot, program in enumerate(program_for_slot):
        domain = 0 if hw.dispatch.policy == "in_order" else (slot // hw.dispatch.chunk) % hw.num_domains
        queues[domain].append(int(program))
    streams = []
    for queue in queues:
        waiting = deque(queue)

        def start_next():
            while waiting:
                program = waiting.popleft()
                events = deque((program, e, ev) for e, ev in enumerate(programs[program]))
                if events:
                    return events
            return None

        def joined(running, cu):  # [events left, CU, credit]: owed its first round on its first turn
            return [running, cu if cu_of_program is None else cu_of_program[running[0][0]], ONE]

        wave = oracle_first_wave(hw)
        rotation = []  # the resident programs in the order they started
        while len(rotation) < len(wave) and (running := start_next()):
            rotation.append(joined(running, wave[len(rotation)]))
        stream, turn = [], 0
        while rotation:
            finished = []
            for index, entry in enumerate(rotation):
                running, cu = entry[0], entry[1]
                rank = sum(other[1] == cu for other in rotation[:index])  # older programs on its CU
                entry[2] += round(ONE / (1 + hw.dispatch.younger_slowdown * rank))
                if entry[2] < ONE:
                    continue
                entry[2] -= ONE
                while True:  # one round
                    program, e, event = running.popleft()
                    stream.extend((cu, program, e, line) if detail else line for line in event)
                    if not running or round_starts is None or round_starts[program][running[0][1]]:
                        break
                if not running:
                    finished.append(index)
            # the finished leave; as many next programs join the end, on the CUs they freed in a hashed order
            freed = [rotation[i][1] for i in sorted(finished, key=lambda i: oracle_fmix64(turn << 32 | i))]
            rotation = [entry for entry in rotation if entry[0]]
            for cu in freed:
                if not (running := start_next()):
                    break
                rotation.append(joined(running, cu))
            turn += 1
        streams.append(stream)
    return streams


class OracleCache:
    """True LRU per set over lines, each holding a set of valid sectors (plain Python)."""

    def __init__(self, num_sets, ways, scheme):
        self.sets, self.ways, self.scheme = [OrderedDict() for _ in range(num_sets)], ways, scheme

    def lookup(self, line, sectors: set) -> set:
        lru = self.sets[oracle_set(line, len(self.sets), self.scheme)]
        present = lru.pop(line, set())
        lru[line] = present | sectors
        if len(lru) > self.ways:
            lru.popitem(last=False)
        return present & sectors


def oracle_fmix64(x: int) -> int:
    """MurmurHash3's 64-bit finaliser in Python integers."""
    mask = 2**64 - 1
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & mask
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & mask
    return x ^ (x >> 33)


def oracle_home(line: int, partitions: int) -> int:
    """The home partition of a line: fmix64 of the line xor a salt, high half scaled onto the partitions."""
    return (oracle_fmix64(line ^ 0x5851F42D4C957F2D) >> 32) * partitions >> 32


class OraclePartitionedL2:
    """One L2 cache per partition; an SM asks its near one, which gets what it lacks from the line's home."""

    def __init__(self, hw: HardwareSpec):
        self.partitions = hw.l2_partitions
        self.caches = [OracleCache(hw.num_sets // self.partitions, hw.l2_ways, hw.set_index)
                       for _ in range(self.partitions)]

    def access(self, near: int, line: int, sectors: set) -> tuple[set, set]:
        """(sectors valid near before, sectors valid in no partition before)."""
        in_near = self.caches[near].lookup(line, sectors)
        missing = sectors - in_near
        home = oracle_home(line, self.partitions)
        if missing and home != near:
            missing -= self.caches[home].lookup(line, missing)
        return in_near, missing


def oracle_fetched_beside(missing: set, sectors: set, hw: HardwareSpec) -> set:
    """The sectors a read's misses fetch beside the requested ones: the rest of each aligned block of the L2's
    fetch granularity that holds a missing sector."""
    block = hw.fetch_sectors
    return {s for m in missing for s in range(m // block * block, m // block * block + block)} - sectors


def oracle_sectors(fine: int, spl: int) -> set:
    """The sectors (of `spl` per line) a 4-bit mask of 32 B sectors touches."""
    return {s for s in range(spl) if any(fine >> b & 1 for b in range(s * 4 // spl, (s + 1) * 4 // spl))}


def oracle_walk_cus(programs, program_for_slot, hw, stores, masks, round_starts) -> list[int]:
    """The SM of each launch slot under the scheduler's walk (sim/scheduler.py's rule, plainly): programs run their
    rounds x the longer of the DRAM latency and the compulsory traffic at peak bandwidth over all rounds; the
    first wave starts first_wave_ns apart; frees (end + the k-th normal draw of seed 0 x jitter, k the program's
    launch index) are taken window_ns at a time and served walking the SM order from the SM served last."""
    import heapq

    walk, spl = hw.dispatch.walk, hw.sectors_per_line
    rounds = [sum(round_starts[p]) if round_starts else len(programs[p]) for p in range(len(programs))]
    read, written, write_sectors = set(), set(), 0
    for p, program in enumerate(programs):
        for e, event in enumerate(program):
            for line in event:
                sectors = {(line, s) for s in oracle_sectors(masks[line] if masks else 0b1111, spl)}
                if (p, e) in stores:
                    written |= sectors
                    write_sectors += len(sectors)
                else:
                    read |= sectors
    compulsory = (len(read - written) + write_sectors) * hw.line_bytes // spl
    total = sum(rounds)
    per_round = max(walk.dram_latency_ns,
                    compulsory * hw.cus_per_domain * hw.programs_per_cu / (walk.peak_dram_bytes_per_ns * total))
    busy = [w for w, program in enumerate(program_for_slot) if rounds[program] > 0]
    durations = [rounds[program_for_slot[w]] * per_round for w in busy]
    jitter = walk.finish_jitter_ns * np.random.default_rng(0).standard_normal(len(busy))
    order = list(dict.fromkeys(hw.dispatch.first_wave or range(hw.cus_per_domain)))
    wave = oracle_first_wave(hw)[:len(busy)]
    slow = hw.dispatch.younger_slowdown
    prog, done, since, rate, version = [None] * len(wave), [0.0] * len(wave), [0.0] * len(wave), [1.0] * len(wave), \
        [0] * len(wave)
    frees = []

    def pace(k, t):  # from t, position k's program goes 1 / (1 + slow x the programs older than it on its SM)
        older = sum(1 for i in range(len(wave)) if i != k and wave[i] == wave[k] and prog[i] is not None
                    and prog[i] < prog[k])
        done[k] += rate[k] * (t - since[k])
        since[k], rate[k] = t, 1.0 / (1.0 + slow * older)
        version[k] += 1
        heapq.heappush(frees, (t + max(0.0, durations[prog[k]] - done[k]) / rate[k] + jitter[prog[k]], k, version[k]))

    def begin(k, p, t):
        prog[k], done[k], since[k] = p, 0.0, t
        pace(k, t)

    def leave(k, t):
        gone, prog[k] = prog[k], None
        for i in range(len(wave)):
            if slow > 0 and i != k and wave[i] == wave[k] and prog[i] is not None and prog[i] > gone:
                pace(i, t)

    for k in range(len(wave)):
        begin(k, k, k * walk.first_wave_ns)
    sms = list(wave)
    last = order.index(sms[-1]) if sms else 0
    while len(sms) < len(busy):
        while frees[0][2] != version[frees[0][1]]:
            heapq.heappop(frees)
        opened, ready = frees[0][0], []
        while frees and frees[0][0] < opened + walk.window_ns:
            t, k, seen = heapq.heappop(frees)
            if seen == version[k]:
                leave(k, t)
                ready.append(k)
        for k in sorted(ready, key=lambda k: ((order.index(wave[k]) - last - 1) % len(order), k)):
            if len(sms) == len(busy):
                break
            last = order.index(wave[k])
            sms.append(wave[k])
            begin(k, len(sms) - 1, opened + walk.window_ns)
    cus = [0] * len(program_for_slot)
    for w, sm in zip(busy, sms):
        cus[w] = sm
    return cus


def oracle_counts(programs, program_for_slot, hw, stores=frozenset(), masks=None, sites=None, recorded_cus=None):
    """Per domain: (L2 read lookups, read hits, first fetches, write lookups, L1 lookups, L1 hits, DRAM
    fetches, promoted misses), in sectors, from the definitions: loads through the CU's L1, then its near L2
    partition and the line's home; a miss fetches its whole fetch block; stores allocate in the L2. A spec with a
    scheduler walk places programs by it unless a placement is recorded."""
    spl = hw.sectors_per_line
    out = []
    round_starts = None if sites is None else [
        # an event without lines carries no store flag in a trace (its flags live on its lines)
        oracle_round_starts(sites[p], [(p, e) in stores and bool(ev) for e, ev in enumerate(programs[p])])
        for p in range(len(programs))]
    if hw.dispatch.walk is not None and recorded_cus is None:
        recorded_cus = oracle_walk_cus(programs, program_for_slot, hw, stores, masks, round_starts)
    for stream in oracle_domain_streams(programs, program_for_slot, hw, detail=True, round_starts=round_starts,
                                        recorded_cus=recorded_cus):
        l2 = OraclePartitionedL2(hw)
        l1 = [OracleCache(hw.l1_sets, hw.l1_ways, "hash") for _ in range(hw.cus_per_domain)]
        fetched, c = set(), dict(reads=0, hits=0, first=0, writes=0, l1=0, l1_hits=0, dram=0, promoted=0)
        for cu, program, e, line in stream:
            sectors = oracle_sectors(masks[line] if masks else 0b1111, spl)  # from 32 B sectors of the 128 B line
            near = hw.partition_of_cu[cu]
            if (program, e) in stores:
                l2.access(near, line, sectors)
                c["writes"] += len(sectors)
                continue
            if hw.l1_bytes_per_cu:
                in_l1 = l1[cu].lookup(line, sectors)
                c["l1"], c["l1_hits"] = c["l1"] + len(sectors), c["l1_hits"] + len(in_l1)
                sectors -= in_l1
                if not sectors:
                    continue
            hit, from_dram = l2.access(near, line, sectors)
            c["reads"], c["hits"], c["dram"] = c["reads"] + len(sectors), c["hits"] + len(hit), c["dram"] + len(from_dram)
            beside = oracle_fetched_beside(sectors - hit, sectors, hw)
            if beside:
                present, beside_dram = l2.access(near, line, beside)
                c["promoted"], c["dram"] = c["promoted"] + len(beside - present), c["dram"] + len(beside_dram)
            new = {(line, s) for s in sectors - hit} - fetched
            c["first"] += len(new)
            fetched |= new
        out.append((c["reads"], c["hits"], c["first"], c["writes"], c["l1"], c["l1_hits"], c["dram"], c["promoted"]))
    return out


def engine_counts(result):
    from swizzleperf.sim.engine import (
        DRAM_FETCHES,
        FIRST_FETCHES,
        L1_HITS,
        L1_LOOKUPS,
        PROMOTED_MISSES,
        READ_HITS,
        READ_LOOKUPS,
        WRITE_LOOKUPS,
    )
    order = (READ_LOOKUPS, READ_HITS, FIRST_FETCHES, WRITE_LOOKUPS, L1_LOOKUPS, L1_HITS, DRAM_FETCHES, PROMOTED_MISSES)
    return [tuple(int(c[i]) for i in order) for c in result.counts]


def random_programs(rng, num_programs: int, line_range: int) -> list[list[list[int]]]:
    """Programs of 0-6 events, each event 0-4 distinct lines; neighbouring programs overlap."""
    programs = []
    for p in range(num_programs):
        base = (p // 3) * (line_range // 4)  # groups of three programs share a window of lines
        programs.append([sorted(set((base + rng.integers(0, line_range, rng.integers(0, 5))).tolist()))
                         for _ in range(rng.integers(0, 7))])
    return programs


CONFIGS = {
    "rr8-chunk1-res1-direct": make_spec(8, sets=4, ways=1, resident=1),
    "rr8-chunk1-res2-2way": make_spec(8, sets=4, ways=2, resident=2),
    "rr8-chunk1-res3-4way-xor": make_spec(8, sets=4, ways=4, set_index="xor_fold", resident=3),
    "rr4-chunk3-res2-8way-xor": make_spec(4, sets=2, ways=8, set_index="xor_fold", chunk=3, resident=2),
    "rr3-chunk2-res4-16way": make_spec(3, sets=1, ways=16, chunk=2, resident=4),
    "rr2-chunk1-res5-12way-6sets": make_spec(2, sets=6, ways=12, resident=5),
    "inorder-res1-2way": make_spec(1, sets=2, ways=2, policy="in_order", resident=1),
    "inorder-res5-17way-3sets": make_spec(1, sets=3, ways=17, policy="in_order", resident=5),
    "inorder-res64-32way-xor": make_spec(1, sets=4, ways=32, set_index="xor_fold", policy="in_order", resident=64),
    # L1s: several programs per CU share one; sectored lines (NVIDIA) and whole lines (AMD)
    "rr4-res4-2cus-l1": make_spec(4, sets=4, ways=4, resident=4, cus=2, l1_sets=2, l1_ways=2),
    "inorder-res6-3cus-l1-sectors": make_spec(1, sets=4, ways=4, policy="in_order", resident=6, cus=3, l1_sets=2,
                                              l1_ways=2, sector_bytes=32),
    "inorder-res2-sectors64-no-l1": make_spec(1, sets=2, ways=4, policy="in_order", resident=2, sector_bytes=64),
    "rr2-res3-l1-17way-l2": make_spec(2, sets=3, ways=17, resident=3, cus=1, l1_sets=1, l1_ways=3),
    # NVIDIA's partitioned L2: near partitions from a measured-style SM layout, a scheduler fill order
    "inorder-2parts-res8-4cus-l1-sectors": make_spec(1, sets=2, ways=4, policy="in_order", resident=8, cus=4,
                                                     l1_sets=1, l1_ways=2, sector_bytes=32, partitions=2,
                                                     cu_partition=[1, 0, 0, 1],
                                                     first_wave=[2, 0, 2, 3, 1, 0, 2]),
    "inorder-3parts-res6-hash": make_spec(1, sets=3, ways=2, set_index="hash", policy="in_order", resident=6,
                                          cus=3, partitions=3),
    # a miss fetches the 64 B half of its line (the H100's L2 fetch granularity), with and without partitions
    "inorder-2parts-res6-3cus-l1-fetch64": make_spec(1, sets=2, ways=4, policy="in_order", resident=6, cus=3,
                                                     l1_sets=1, l1_ways=2, sector_bytes=32, partitions=2,
                                                     cu_partition=[0, 1, 1], fetch_bytes=64),
    "rr2-res3-sectors-fetch64": make_spec(2, sets=3, ways=2, resident=3, sector_bytes=32, fetch_bytes=64),
    "inorder-res4-17way-2parts-fetch64": make_spec(1, sets=1, ways=17, policy="in_order", resident=4, cus=2,
                                                   sector_bytes=32, partitions=2, fetch_bytes=64),
    # NVIDIA's scheduler walk: programs take SMs by when they end; rounds at DRAM latency (plenty of bandwidth),
    # then paced by the compulsory traffic (a trickle of bandwidth), frees in wide and narrow windows
    "inorder-2parts-res8-4cus-l1-walk-latency": make_spec(
        1, sets=2, ways=4, policy="in_order", resident=8, cus=4, l1_sets=1, l1_ways=2, sector_bytes=32,
        partitions=2, cu_partition=[1, 0, 0, 1], first_wave=[2, 0, 2, 3, 1, 0, 2], fetch_bytes=64,
        walk={"window_ns": 400.0, "finish_jitter_ns": 300.0, "peak_dram_bytes_per_ns": 1e6}),
    "inorder-2parts-res6-3cus-l1-walk-bandwidth": make_spec(
        1, sets=3, ways=2, set_index="hash", policy="in_order", resident=6, cus=3, l1_sets=2, l1_ways=2,
        sector_bytes=32, partitions=2, cu_partition=[0, 1, 1],
        walk={"window_ns": 6.0, "finish_jitter_ns": 900.0, "peak_dram_bytes_per_ns": 0.05}),
    # a CU's younger programs go slower (by their age rank), in the replay and in the walk's timing
    "rr2-res6-2cus-slowdown": make_spec(2, sets=4, ways=2, resident=6, cus=2, slowdown=0.4),
    "inorder-res4-2cus-l1-slowdown": make_spec(1, sets=2, ways=4, policy="in_order", resident=4, cus=2, l1_sets=1,
                                               l1_ways=2, slowdown=1.5),
    "inorder-2parts-res8-4cus-l1-walk-slowdown": make_spec(
        1, sets=2, ways=4, policy="in_order", resident=8, cus=4, l1_sets=1, l1_ways=2, sector_bytes=32,
        partitions=2, cu_partition=[1, 0, 0, 1], first_wave=[2, 0, 2, 3, 1, 0, 2], fetch_bytes=64, slowdown=0.3,
        walk={"window_ns": 400.0, "finish_jitter_ns": 300.0, "peak_dram_bytes_per_ns": 1e6}),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_matches_oracle_on_random_traces_and_remaps(name):
    hw = CONFIGS[name]
    rng = np.random.default_rng(sorted(CONFIGS).index(name))
    totals = np.zeros(8, dtype=int)
    for trial in range(6):
        programs = random_programs(rng, int(rng.integers(1, 41)), line_range=int(rng.integers(4, 80)))
        stores = {(p, e) for p, program in enumerate(programs) for e in range(len(program)) if rng.random() < 0.2}
        masks = {line: int(rng.integers(1, 16)) for line in range(400)}
        # half the traces name each event's instruction from a few, so rounds (and loops) occur
        sites = [rng.integers(0, 4, len(program)).tolist() for program in programs] if trial % 2 else None
        trace = make_trace(programs, stores, masks, sites)
        for perm in (np.arange(len(programs)), rng.permutation(len(programs))):
            expected = oracle_counts(programs, perm, hw, stores, masks, sites)
            assert engine_counts(simulate(trace, perm, hw)) == expected
            totals += np.array(expected).sum(axis=0)
        # a placement recorded on a GPU: each launch slot on a CU of its own
        cus = rng.integers(0, hw.cus_per_domain, len(programs))
        assert engine_counts(simulate(trace, perm, hw, recorded_cus=cus)) == \
            oracle_counts(programs, perm, hw, stores, masks, sites, recorded_cus=cus)
    assert totals[1] > 0 and totals[3] > 0, "the random traces must produce read hits and writes to compare"
    assert (totals[5] > 0) == bool(hw.l1_bytes_per_cu), "L1 hits exactly where an L1 is modelled"
    assert (totals[7] > 0) == (hw.fetch_sectors > 1), "misses of sectors fetched beside exactly where fetches are wider"
    if hw.fetch_sectors == 1:
        far_hits = totals[0] - totals[1] - totals[6]  # near misses that another partition served
        assert (far_hits > 0) == (hw.l2_partitions > 1), "far hits exactly where the L2 is partitioned"


def test_matches_oracle_when_rotation_drains_unevenly():
    # one long program among many short ones: the rotation empties out around it
    hw = make_spec(2, sets=2, ways=2, resident=6)
    programs = [[[i % 5] for i in range(40)]] + [[[p % 7, p % 7 + 1]] * (p % 3 + 1) for p in range(1, 25)]
    trace = make_trace(programs)
    for perm in (np.arange(25), np.roll(np.arange(25), 7)):
        assert engine_counts(simulate(trace, perm, hw)) == oracle_counts(programs, perm, hw)


def test_interleaving_order_by_hand():
    # one domain, two positions, a one-line cache: an access hits only if the previous access had
    # the same line. A = [1],[2],[3]; B = [1]; C = [2],[3]. The documented rotation issues
    # A0 B0 | A1 C0 | A2 C1 (C takes B's position when B finishes), i.e. lines 1 1 2 2 3 3: 3 hits.
    # Starting C only after A would give 1 1 2 3 2 3 (1 hit); one program at a time, 1 2 3 1 2 3 (0).
    hw = make_spec(1, sets=1, ways=1, policy="in_order", resident=2)
    result = simulate(make_trace([[[1], [2], [3]], [[1]], [[2], [3]]]), np.arange(3), hw)
    assert result.hits.tolist() == [3]
    assert oracle_domain_streams([[[1], [2], [3]], [[1]], [[2], [3]]], [0, 1, 2], hw) == [[1, 1, 2, 2, 3, 3]]


def test_threads_give_the_same_result():
    hw = make_spec(8, sets=4, ways=4, resident=3)
    programs = random_programs(np.random.default_rng(7), 40, 60)
    perm = np.random.default_rng(8).permutation(40)
    one, two = simulate(make_trace(programs), perm, hw), simulate(make_trace(programs), perm, hw, threads=2)
    assert (one.accesses.tolist(), one.hits.tolist(), one.unique_lines.tolist()) == \
        (two.accesses.tolist(), two.hits.tolist(), two.unique_lines.tolist())


# --- hand-computed behaviour -----------------------------------------------------------------------
def pair_sharing_trace(lines_per_pair: int) -> LocalTrace:
    """16 programs; programs 2k and 2k+1 read the same lines, one line per event; pairs share nothing."""
    return make_trace([[[(p // 2) * lines_per_pair + i] for i in range(lines_per_pair)] for p in range(16)])


def test_colocating_sharing_programs_turns_their_second_reads_into_hits():
    hw, n = no_l1(PRESETS["mi300x"]), 10
    trace = pair_sharing_trace(n)
    # identity: slot w -> domain w % 8, so programs 2k and 2k+1 run on different dies; each die
    # runs two programs of two different pairs: 2n accesses, 2n distinct lines, no hits.
    spread = simulate(trace, np.arange(16), hw)
    assert spread.hits.tolist() == [0] * 8
    assert spread.unique_lines.tolist() == [2 * n] * 8
    # slots k and k + 8 (both on die k) run the pair 2k, 2k + 1: the second reader hits every line
    colocated = np.empty(16, dtype=np.int64)
    colocated[:8], colocated[8:] = np.arange(0, 16, 2), np.arange(1, 16, 2)
    together = simulate(trace, colocated, hw)
    assert together.hits.tolist() == [n] * 8
    assert together.unique_lines.tolist() == [n] * 8
    assert together.hit_pct == together.ceiling_pct == 50.0
    assert spread.bounds.read_only_unique == together.bounds.read_only_unique == 8 * n
    # colocating only the pairs of dies 0..3 helps exactly those dies
    # dies 0..3 (slots k, k+8) get pairs 0..3; dies 4..7 get one program of two different pairs
    half = np.array([0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 11, 13, 15, 9])
    assert simulate(trace, half, hw).hits.tolist() == [n] * 4 + [0] * 4


def test_a_recorded_placement_decides_which_reads_the_l1_and_the_near_partition_serve():
    """Two programs read the 4 sectors of one line. Recorded on one SM, the second read hits that SM's L1 and the
    L2 sees one request; on two SMs of one side, the near partition serves the second; on opposite sides of a line
    whose home is the first reader's side, the second misses near (a far hit) and DRAM serves only the first."""
    hw = make_spec(1, sets=2, ways=4, policy="in_order", resident=4, cus=4, l1_sets=1, l1_ways=2, sector_bytes=32,
                   partitions=2, cu_partition=[0, 0, 1, 1])
    line = next(x for x in range(100) if oracle_home(x, 2) == 0)
    trace = make_trace([[[line]], [[line]]])
    # (L2 read lookups, read hits, first fetches, writes, L1 lookups, L1 hits, DRAM fetches, promoted misses)
    assert engine_counts(simulate(trace, np.arange(2), hw, recorded_cus=[0, 0])) == [(4, 0, 4, 0, 8, 4, 4, 0)]
    assert engine_counts(simulate(trace, np.arange(2), hw, recorded_cus=[0, 1])) == [(8, 4, 4, 0, 8, 0, 4, 0)]
    assert engine_counts(simulate(trace, np.arange(2), hw, recorded_cus=[0, 2])) == [(8, 0, 4, 0, 8, 0, 4, 0)]


def test_a_recorded_placement_must_name_a_cu_for_every_slot():
    hw = make_spec(1, policy="in_order", resident=2, cus=2)
    trace = make_trace([[[1]], [[2]], [[3]]])
    with pytest.raises(HardwareSpecError, match=r"one CU in \[0, 2\) per launch slot \(3\)"):
        simulate(trace, np.arange(3), hw, recorded_cus=[0, 1])
    with pytest.raises(HardwareSpecError, match="values 0..2"):
        simulate(trace, np.arange(3), hw, recorded_cus=[0, 1, 2])


def test_chunked_dispatch_keeps_consecutive_slots_together():
    # chunk 2: slots 2k and 2k+1 share a die, so the identity remap already colocates the pairs
    hw = PRESETS["mi300x"].model_copy(update={"dispatch": PRESETS["mi300x"].dispatch.model_copy(update={"chunk": 2})})
    result = simulate(pair_sharing_trace(10), np.arange(16), hw)
    assert result.hits.tolist() == [10] * 8
    assert result.programs.tolist() == [2] * 8


def test_writes_allocate_without_a_fetch_and_later_reads_hit():
    # program 0 writes sectors 0-1 of lines 1 and 2; program 1 then reads them and all of line 3
    masks = {1: 0b0011, 2: 0b0011, 3: 0b1111}
    trace = make_trace([[[1, 2]], [[1, 2], [3]]], stores={(0, 0)}, masks=masks)
    result = simulate(trace, np.arange(2), no_l1(PRESETS["h100"]))
    # writes: 4 sector lookups, all hits; reads: 4 + 4 sectors, of which the 4 written ones hit
    assert (result.total(WRITE_LOOKUPS), result.read_lookups, result.read_hits) == (4, 8, 4)
    assert result.overall_hit_pct == pytest.approx(100 * 8 / 12)
    assert result.bytes_fetched == 4 * 32
    # the bound: 8 read sectors, of which line 3's 4 were never written and must be fetched
    assert (result.bounds.read_sectors, result.bounds.read_only_unique) == (8, 4)
    assert result.ceiling_pct == pytest.approx(50.0) == pytest.approx(result.hit_pct)
    # on AMD (a line is one sector) the written lines are whole-line hits
    amd = simulate(trace, np.arange(2), make_spec(1, sets=4, ways=4, policy="in_order", resident=2))
    assert (amd.total(WRITE_LOOKUPS), amd.read_lookups, amd.read_hits) == (2, 3, 2)


def test_programs_reading_different_sectors_of_one_line_share_nothing_on_a_sectored_l2():
    # a column reduction over 64 B strips: program p reads half p % 2 of every line
    halves = [[[line] for line in range(16)] for _ in range(2)]
    trace = make_trace(halves, masks={line: 0b0011 for line in range(16)})
    trace = LocalTrace(**{**trace.__dict__, "sectors": np.concatenate([np.full(16, 0b0011), np.full(16, 0b1100)])
                          .astype(np.uint8)})
    assert simulate(trace, np.arange(2), no_l1(PRESETS["h100"])).read_hits == 0
    # a whole-line L2 counts the second half as a hit
    assert simulate(trace, np.arange(2), no_l1(PRESETS["h100"]).model_copy(update={"sector_bytes": None})).read_hits == 16


def test_a_pure_stream_has_no_hits():
    programs = [[[p * 100 + e * 4 + i for i in range(4)] for e in range(25)] for p in range(64)]
    trace = make_trace(programs)
    for hw in (PRESETS["mi300x"], PRESETS["h100"]):
        result = simulate(trace, np.random.default_rng(0).permutation(64), hw)
        assert result.read_hits == 0 and result.total(L1_HITS) == 0
        assert result.unique_lines.tolist() == result.accesses.tolist()
        assert result.ceiling_pct == 0.0


def test_every_program_reading_one_tile_reaches_the_ceiling_on_one_l2():
    tile = list(range(1000, 1008))
    trace = make_trace([[tile, tile[:4]] for _ in range(100)])  # 12 accesses per program
    one_l2 = simulate(trace, np.arange(100), no_l1(PRESETS["h100"]).model_copy(update={"l2_partitions": 1,
                                                                                           "cu_partition": None}))
    assert one_l2.read_hits == 4 * (1200 - 8)  # whole lines: 4 sectors each
    assert one_l2.hit_pct == pytest.approx(one_l2.ceiling_pct)
    # the H100's two partitions: a line first read on its home side misses once more on the other side
    # (a far hit); first read on the other side, the fetch fills its home too. DRAM serves each sector once.
    h100 = no_l1(PRESETS["h100"])
    first_side = h100.partition_of_cu[h100.first_wave_cus()[0]]
    far_hits = sum(oracle_home(line, 2) == first_side for line in tile)
    assert 0 < far_hits < len(tile)  # this tile has lines homed on both sides
    two = simulate(trace, np.arange(100), h100)
    assert (two.read_hits, two.bytes_fetched) == (4 * (1200 - 8 - far_hits), 32 * 32)
    assert two.hit_pct < two.ceiling_pct
    # eight dies each fetch the tile once: the ceiling (one fetch in the whole GPU) is out of reach
    dies = simulate(trace, np.arange(100), no_l1(PRESETS["mi300x"]))
    assert dies.read_hits == 1200 - 8 * 8
    assert dies.unique_lines.tolist() == [8] * 8
    # with the CUs' L1s, each program's second read of the tile's first half never reaches the L2
    with_l1 = simulate(trace, np.arange(100), PRESETS["mi300x"])
    assert (with_l1.total(L1_HITS), with_l1.read_lookups, with_l1.read_hits) == (400, 800, 800 - 64)
    assert with_l1.hit_pct < with_l1.ceiling_pct


def test_capacity_misses_appear_once_the_rotation_outgrows_the_cache():
    # one set of 4 ways, in-order dispatch: each program reads its own 2 lines twice (2 events)
    programs = [[[2 * p, 2 * p + 1], [2 * p, 2 * p + 1]] for p in range(8)]
    trace = make_trace(programs)
    # two resident programs hold 4 lines: every second read hits
    assert simulate(trace, np.arange(8), make_spec(1, sets=1, ways=4, policy="in_order", resident=2)).read_hits == 16
    # four resident programs cycle 8 lines through 4 ways: LRU evicts each line before its re-read
    assert simulate(trace, np.arange(8), make_spec(1, sets=1, ways=4, policy="in_order", resident=4)).read_hits == 0


# --- the dispatch model --------------------------------------------------------------------------
def test_round_robin_queues_and_start_ranks_by_hand():
    hw = make_spec(4, chunk=2)
    assert slot_domains(10, hw).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 0, 0]
    assert [q.tolist() for q in domain_queues(10, hw)] == [[0, 1, 8, 9], [2, 3], [4, 5], [6, 7]]
    assert slot_start_ranks(10, hw).tolist() == [0, 1, 0, 1, 0, 1, 0, 1, 2, 3]
    assert [q.tolist() for q in domain_queues(3, make_spec(4))] == [[0], [1], [2], []]


def test_in_order_puts_every_slot_on_one_domain():
    hw = PRESETS["h100"]
    assert slot_domains(5, hw).tolist() == [0] * 5
    assert [q.tolist() for q in domain_queues(5, hw)] == [[0, 1, 2, 3, 4]]
    with pytest.raises(HardwareSpecError, match="set num_domains to 1"):
        slot_domains(5, hw.model_copy(update={"num_domains": 2}))


def test_placement_says_where_each_captured_program_ran():
    hw = make_spec(2)  # slot w -> domain w % 2; rank w // 2
    where = placement(np.array([3, 0, 2, 1]), hw)  # slot 0 runs program 3, slot 1 runs program 0, ...
    assert where.domain.tolist() == [1, 1, 0, 0]
    assert where.start_rank.tolist() == [0, 1, 1, 0]


# --- rejected inputs -------------------------------------------------------------------------------
def test_a_remap_that_is_not_a_permutation_is_rejected():
    trace, hw = make_trace([[[p]] for p in range(4)]), make_spec(2)
    with pytest.raises(RemapRejected, match="program 3 never runs and program 1 runs 2 times") as caught:
        simulate(trace, np.array([0, 1, 1, 2]), hw)
    assert caught.value.stage == "bijectivity"
    with pytest.raises(RemapRejected, match="ids outside"):
        simulate(trace, np.array([0, 1, 2, 4]), hw)
    with pytest.raises(RemapRejected, match="3 slots but the trace holds 4 programs"):
        simulate(trace, np.arange(3), hw)


def test_malformed_traces_are_rejected():
    good = make_trace([[[1, 2], [3]], [[4]]])
    hw = make_spec(2)
    cases = {
        "event_offsets must run from 0 to 4": dict(event_offsets=np.array([0, 2, 3, 3])),
        "program_offsets must be non-decreasing": dict(program_offsets=np.array([0, 3, 2, 3])),
        "non-negative": dict(lines=np.array([1, 2, -3, 4])),
    }
    for message, change in cases.items():
        bad = LocalTrace(**{**good.__dict__, **change})
        with pytest.raises(TraceCaptureError, match=message):
            simulate(bad, np.arange(2), hw)
    with pytest.raises(TraceCaptureError, match="re-capture with line_bytes=64"):
        simulate(good, np.arange(2), hw.model_copy(update={"line_bytes": 64}))


# --- the report ------------------------------------------------------------------------------------
def test_report_carries_counts_and_states_the_model():
    hw = no_l1(PRESETS["mi300x"])
    result = simulate(pair_sharing_trace(10), np.arange(16), hw)
    report = result.to_report("pairs", "small", hw)
    assert report.source == "sim" and report.simulated
    assert (report.kernel, report.size, report.hardware) == ("pairs", "small", "mi300x")
    assert report.accesses == 160 and report.hits == 0 and report.unique_lines == 80
    assert report.hit_pct == 0.0 and report.ceiling_pct == 50.0
    assert report.bytes_from_next_level == 160 * LINE
    assert [(d.domain, d.programs, d.accesses, d.hits, d.unique_lines) for d in report.per_domain] == \
        [(d, 2, 20, 0, 20) for d in range(8)]
    notes = " | ".join(report.notes)
    for phrase in ("prediction, not a measurement", "round-robin over 8 L2 domains, chunk 1",
                   "76 programs resident per domain", "set index hash", "LRU", "allocate without a fetch",
                   "no L1 modelled"):
        assert phrase in notes
    with pytest.raises(ValueError, match="pass the spec it was simulated with"):
        result.to_report("pairs", "small", PRESETS["h100"])


def test_prepare_is_reused_for_the_same_trace():
    trace = pair_sharing_trace(3)
    assert prepare(trace) is prepare(trace)
    assert prepare(prepare(trace)) is prepare(trace)


def test_a_one_sector_read_that_misses_fetches_the_64_byte_half_as_the_h100_showed():
    """benchmarks/probe_pending.py on an H100 (tests/fixtures/probes/probe-pending-h100.json): one SM reading
    one 32 B sector of each of 8192 cold lines made 16384 sector misses and read 16384 sectors from DRAM; a second
    SM of its side reading them afterwards made 8192 lookups, all hits. The h100 preset, the same reads:"""
    hw = PRESETS["h100"].model_copy(update={"l1_bytes_per_cu": 0})  # the probe's loads bypass the L1 (.cg)
    lines = [[line] for line in range(0, 4096, 4)]  # one event per line, lines apart
    alone = simulate(make_trace([lines], masks={line: 0b0001 for line in range(4096)}), np.arange(1), hw)
    assert (alone.read_lookups, alone.read_hits, alone.total(PROMOTED_MISSES), alone.total(DRAM_FETCHES)) == (
        1024, -1024, 1024, 2048)  # each request: its sector and the one beside it missed, both from DRAM
    assert alone.read_hit_pct == -100.0  # ncu's read hit rate of the probe: 1 - 16384 misses / 8192 requests
    wide = simulate(make_trace([lines], masks={line: 0b0011 for line in range(4096)}), np.arange(1), hw)
    assert (wide.total(PROMOTED_MISSES), wide.total(DRAM_FETCHES)) == (0, 2048)  # a whole half: nothing beside it
    assert any("fetches the 64 B block" in note for note in alone.to_report("k", "s", hw).notes)


def test_a_round_reaches_the_cache_before_the_next_program_issues():
    # one domain, two positions, a one-line cache. A and B each load line 1 then line 2. Issued one event
    # per turn they interleave 1 1 2 2 (two hits); as rounds (two instructions, no loop), each program's
    # loads go out together: 1 2 1 2, no hit.
    hw = make_spec(1, sets=1, ways=1, policy="in_order", resident=2)
    programs = [[[1], [2]], [[1], [2]]]
    assert simulate(make_trace(programs), np.arange(2), hw).hits.tolist() == [2]
    rounds = simulate(make_trace(programs, sites=[[7, 8], [7, 8]]), np.arange(2), hw)
    assert rounds.hits.tolist() == [0]
    # the same instruction twice is a loop: one event per round again
    assert simulate(make_trace(programs, sites=[[7, 7], [7, 7]]), np.arange(2), hw).hits.tolist() == [2]
    assert oracle_domain_streams(programs, [0, 1], hw, round_starts=[[True, False], [True, False]]) == [[1, 2, 1, 2]]
