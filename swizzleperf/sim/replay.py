"""The numba pass over one domain, fed a compact (run) trace chunk by chunk.

The dispatch model (dispatch.py) interleaves a domain's resident programs in turns, each issuing rounds at
its pace, so the pass needs only the programs resident now and the next ones of the queue. `replay_domain`
loads the queue in chunks that fit a memory budget: a chunk holds the programs still running (from
the event they reached) and the next queued ones; the pass stops at a turn boundary when fewer
queued programs are left in the chunk than a turn could start, and resumes in the next chunk with
its state (rotation, credits, caches, counters) intact. A trace that fits the budget is one chunk; the
counts do not depend on the chunking.
"""

from __future__ import annotations

import numba
import numpy as np

from swizzleperf.sim.cache_model import HASH, add_to_last, first_touch, home_partition, lookup, mix64, set_of

# what the pass counts, in sectors (lines where a line is one sector); read lookups and hits are the
# SM side's (near partition); DRAM_FETCHES are the sectors no partition could serve (those fetched beside
# a miss included); PROMOTED_MISSES: sectors a read's miss fetched beside the ones it asked for (the L2's
# fetch granularity), misses of that read as ncu counts them; SAMPLED_LOOKUPS: read lookups of lines in the
# simulated L2 sets (all of them without sampling)
(READ_LOOKUPS, READ_HITS, WRITE_LOOKUPS, L1_LOOKUPS, L1_HITS, FIRST_FETCHES, DRAM_FETCHES, PROMOTED_MISSES,
 SAMPLED_LOOKUPS) = range(9)
N_COUNTS = 8  # the result's columns; SAMPLED_LOOKUPS only scales them
POSITIONS, TURN, QUEUED = range(3)  # the scalar state between chunks
RATE_ONE = 1 << 16  # a program's pace in fixed point: one round per turn

_SECTOR_COUNT = np.array([bin(m).count("1") for m in range(256)], dtype=np.int64)


@numba.njit(cache=True, nogil=True, inline="always")
def _popcount(mask):
    return _SECTOR_COUNT[mask]


def _blocks_table() -> np.ndarray:
    """_FETCH_BLOCKS[size, mask] for size 1, 2, 4, 8: every sector of each aligned block of `size` sectors that
    holds a sector of `mask`."""
    table = np.zeros((9, 256), dtype=np.int64)
    for size in (1, 2, 4, 8):
        for mask in range(256):
            for first in range(0, 8, size):
                if mask >> first & ((1 << size) - 1):
                    table[size, mask] |= ((1 << size) - 1) << first
    return table


# A read miss fetches the aligned block of the L2's fetch granularity around each missing sector (NVIDIA: the
# 64-byte half of a line around a missing 32-byte sector); a table, since it is asked on every miss.
_FETCH_BLOCKS = _blocks_table()


@numba.njit(cache=True, nogil=True, inline="always")
def _l2_access(line, s, mask, near, l2, l2_geometry, partitions, promote):
    """Sectors `mask` of `line` (in set `s`) from an SM near partition `near`: (valid near before, valid nowhere
    before, sectors fetched beside). Sectors missing near come from the line's home partition if that is another
    one (which keeps or gets them too); the near partition keeps a copy either way. One partition: near is home.
    With `promote` (reads), a miss also fetches the rest of the L2's fetch block around each missing sector
    (l2_geometry[4] sectors) where the near partition lacks it: added to the line just looked up (most recently
    used, so no search), and asked of the home partition with the missing ones."""
    tags, recency = l2
    _, num_sets, _, ways, fetch_sectors = l2_geometry
    near_set = near * num_sets + s
    in_near = lookup(tags, recency, near_set, line, mask, ways) & mask
    missed = mask & ~in_near
    beside = _FETCH_BLOCKS[fetch_sectors, missed] & ~mask if promote and missed else 0
    if beside:
        beside = add_to_last(tags, recency, near_set, beside, ways)
    fetched = missed | beside
    if fetched and partitions > 1:
        home = home_partition(line, partitions)
        if home != near:
            fetched &= ~lookup(tags, recency, home * num_sets + s, line, fetched, ways)
    return in_near, fetched, beside


@numba.njit(cache=True, nogil=True, inline="always")
def _read(line, line_id, mask, cu, near, l2, l2_geometry, partitions, l1, l1_geometry, spl, seen_bits, sample,
          counts):
    """One line of a load: the CU's L1 first (when modelled), the sectors it lacks to the L2 (in a sampled
    set, or always without sampling); L2 read misses are fetched from the next level."""
    l1_tags, l1_recency = l1
    l1_sets, l1_set_bits, l1_ways = l1_geometry
    if l1_sets > 0:
        s1 = cu * l1_sets + set_of(line, HASH, l1_sets, l1_set_bits)
        in_l1 = lookup(l1_tags, l1_recency, s1, line, mask, l1_ways) & mask
        counts[L1_LOOKUPS] += _popcount(mask)
        counts[L1_HITS] += _popcount(in_l1)
        mask &= ~in_l1
        if mask == 0:
            return
    counts[READ_LOOKUPS] += _popcount(mask)
    s = set_of(line, l2_geometry[0], l2_geometry[1], l2_geometry[2])
    if sample.shape[0] and not sample[s]:
        return
    counts[SAMPLED_LOOKUPS] += _popcount(mask)
    in_l2, from_dram, beside = _l2_access(line, s, mask, near, l2, l2_geometry, partitions, True)
    counts[READ_HITS] += _popcount(in_l2)
    counts[DRAM_FETCHES] += _popcount(from_dram)
    counts[PROMOTED_MISSES] += _popcount(beside)  # fetched beside the missing sectors: misses of this read
    missed = mask & ~in_l2
    sector = 0
    while missed:
        if missed & 1:
            counts[FIRST_FETCHES] += first_touch(seen_bits, line_id * spl + sector)
        missed >>= 1
        sector += 1


@numba.njit(cache=True, nogil=True, inline="always")
def _issue_event(event, cu, chunk, l2, l2_geometry, partition_of_cu, partitions, l1, l1_geometry, spl, seen_bits,
                 sample, counts):
    """One load or store instruction of a program on CU `cu`: each line of each of its runs, in order.
    Stores go straight to the L2, which allocates the written sectors without fetching them (a write
    lookup always hits), and leave the L1 alone."""
    starts, lens, masks, ids, ev_off, ev_store, _ = chunk
    near = partition_of_cu[cu]
    store = ev_store[event]
    for r in range(ev_off[event], ev_off[event + 1]):
        mask = masks[r]
        for j in range(lens[r]):
            line = starts[r] + j
            if store:
                counts[WRITE_LOOKUPS] += _popcount(mask)
                s = set_of(line, l2_geometry[0], l2_geometry[1], l2_geometry[2])
                if sample.shape[0] == 0 or sample[s]:
                    _l2_access(line, s, mask, near, l2, l2_geometry, partitions, False)
            else:
                _read(line, ids[r] + j, mask, cu, near, l2, l2_geometry, partitions, l1, l1_geometry, spl,
                      seen_bits, sample, counts)


@numba.njit(cache=True, nogil=True)
def refill_key(turn, position):
    """Sort key for the positions that finished in one turn: the order their CUs take new programs in, without a
    placement. A hash, arbitrary but reproducible."""
    return mix64((np.uint64(turn) << np.uint64(32)) | np.uint64(position))


@numba.njit(cache=True, nogil=True)
def _start_next(queued, prog_lo, prog_hi, rotation, i, cu):
    """Put the chunk's next queued program that has events into position i, on CU `cu`, owed its first round on
    the next turn; returns the queue index (position i stays idle when the queue has none)."""
    next_event, end_event, cu_of, prog_of, credit = rotation
    while queued < prog_lo.shape[0]:
        q = queued
        queued += 1
        if prog_hi[q] > prog_lo[q]:
            next_event[i], end_event[i], prog_of[i], cu_of[i], credit[i] = prog_lo[q], prog_hi[q], q, cu, RATE_ONE
            return queued
    next_event[i] = end_event[i]
    return queued


@numba.njit(cache=True, nogil=True)
def _refill(finished, count, turn, positions, queued, prog_lo, prog_hi, rotation, placed):
    """The rotation is the resident programs in the order they started: the `count` that finished in `turn` leave
    it and as many next queued ones join its end, each on its recorded CU (`placed`: per chunk program) or else on
    a CU that one of them freed, taken in an order the hardware does not fix (a hash of turn and position).
    Returns (positions in use, queue index)."""
    keys = np.empty(count, dtype=np.uint64)
    freed = np.empty(count, dtype=np.int64)
    for j in range(count):
        keys[j] = refill_key(turn, finished[j])
        freed[j] = rotation[2][finished[j]]
    kept = _compact(rotation, positions)
    for j in np.argsort(keys):
        if queued == prog_lo.shape[0]:
            break
        cu = placed[queued] if placed.shape[0] else freed[j]
        queued = _start_next(queued, prog_lo, prog_hi, rotation, kept, cu)
        kept += rotation[0][kept] != rotation[1][kept]
    return kept, queued


@numba.njit(cache=True, nogil=True)
def _compact(rotation, positions):
    """Drop idle positions, keeping the rotation order; returns how many are left."""
    kept = 0
    for i in range(positions):
        if rotation[0][i] != rotation[1][i]:
            for a in rotation:
                a[kept] = a[i]
            kept += 1
    return kept


@numba.njit(cache=True, nogil=True)
def _paces(rotation, positions, pace_of_rank, seen, paces):
    """paces[i]: how far position i's program gets this turn (fixed point): by its age rank among its CU's resident
    programs (the rotation is in start order, so the rank is how many earlier positions share its CU)."""
    for i in range(positions):
        seen[rotation[2][i]] = 0
    for i in range(positions):
        cu = rotation[2][i]
        paces[i] = pace_of_rank[min(seen[cu], pace_of_rank.shape[0] - 1)]
        seen[cu] += 1


@numba.njit(cache=True, nogil=True)
def replay_chunk(chunk, prog_lo, prog_hi, placed, final, rotation, state, pace_of_rank, l2, l2_geometry,
                 partition_of_cu, partitions, l1, l1_geometry, spl, seen_bits, sample, counts):
    """Run turns until the domain is done (`final` chunk) or the chunk may run short of queued programs.

    `rotation` = (next_event, end_event, cu_of, prog_of, credit) per position, in start order; `state` = (positions,
    turn, queued) in chunk-local program indices; both persist between chunks. `placed`: the chunk's programs'
    recorded CUs, or empty for the dispatch model's. `pace_of_rank`: how far a CU's k-th oldest resident program gets
    per turn (fixed point, RATE_ONE: one round); a program issues a round on each turn its credit makes a whole one.
    Returns True when done."""
    next_event, end_event, cu_of, _, credit = rotation
    round_start = chunk[6]
    positions, turn, queued = state[POSITIONS], state[TURN], state[QUEUED]
    finished = np.empty(max(positions, 1), dtype=np.int64)
    paces = np.empty(max(positions, 1), dtype=np.int64)
    seen = np.zeros(partition_of_cu.shape[0], dtype=np.int64)
    while positions:
        if not final and prog_lo.shape[0] - queued < positions:
            break
        _paces(rotation, positions, pace_of_rank, seen, paces)
        count = 0
        for i in range(positions):  # one turn
            credit[i] += paces[i]
            if credit[i] < RATE_ONE:
                continue
            credit[i] -= RATE_ONE
            event = next_event[i]
            while True:  # one round: up to the next event that starts one
                _issue_event(event, cu_of[i], chunk, l2, l2_geometry, partition_of_cu, partitions, l1, l1_geometry,
                             spl, seen_bits, sample, counts)
                event += 1
                if event == end_event[i] or round_start[event]:
                    break
            next_event[i] = event
            if event == end_event[i]:
                finished[count] = i
                count += 1
        if count:
            positions, queued = _refill(finished, count, turn, positions, queued, prog_lo, prog_hi, rotation, placed)
        turn += 1
    state[POSITIONS], state[TURN], state[QUEUED] = positions, turn, queued
    return positions == 0


@numba.njit(cache=True, nogil=True)
def fill_first_wave(prog_lo, prog_hi, placed, rotation, state):
    """Start the first `positions` programs of the queue, in position order, each on its recorded CU or its
    position's (the measured first-wave sequence); positions the queue cannot fill are dropped."""
    queued, kept = 0, 0
    for i in range(state[POSITIONS]):
        cu = placed[queued] if placed.shape[0] and queued < placed.shape[0] else rotation[2][i]
        queued = _start_next(queued, prog_lo, prog_hi, rotation, kept, cu)
        kept += rotation[0][kept] != rotation[1][kept]
    state[POSITIONS], state[QUEUED] = kept, queued
