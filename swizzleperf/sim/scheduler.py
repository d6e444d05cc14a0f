"""Where an NVIDIA GPU's block scheduler runs each program: a walk over its SM order, as measured.

An H100 does not scatter a launch's programs over its SMs. In launch order, consecutive programs
share an L2 side 55-82 % of the time and step 1-8 SMs along the scheduler's SM order 14-72 % of the
time, in real kernels and in programs that only spin on the timer alike (benchmarks/probe_scheduler.py,
benchmarks/probe_placement.py). The rule that reproduces that (`HardwareSpec.dispatch.walk`):

  - the first wave starts in the measured SM order (`dispatch.first_wave`), one program every
    `first_wave_ns`;
  - a slot frees when its program ends, late or early by a normal disorder of `finish_jitter_ns`
    (the free's way back through the SM and the scheduler); a program's duration is its work alone,
    stretched while it is not its SM's oldest: the k-th oldest goes 1 / (1 + younger_slowdown x k) as
    fast, and moves up a rank when an older one leaves (dispatch.py, measured: benchmarks/fit_pace.py);
  - the scheduler takes the frees in time order, `window_ns` at a time, and gives the frees of one
    window the next programs walking its SM order on from the SM it served last.

Its two constants were fitted on programs of known duration that only spin (six runs recorded on an
H100, outside the suite; the H200's six runs agree within 0.09 without refitting). Placement then
depends on how long programs run: a program's duration is its rounds (rounds.py) times the kernel's time
per round, the longer of one DRAM round trip and the kernel's compulsory DRAM traffic at the vendor's peak
bandwidth shared out over its rounds (no compute term: a compute-bound kernel's programs come out short).
The disorder is drawn from a fixed seed (`dispatch.walk.seed`), so a prediction is reproducible; another
seed is another draw of the GPU's run-to-run placement: it moves a suite remap's predicted hit rate by up to
0.6 points, and the order of remaps closer than that with it (README, the fidelity tables' seed columns).
"""

from __future__ import annotations

import heapq

import numba
import numpy as np

from swizzleperf.hardware.spec import HardwareSpec


@numba.njit(cache=True, nogil=True)
def _older(k, prog, neighbours):
    """How many programs on position k's SM started before k's (lower ids: programs start in launch order)."""
    rank = 0
    for i in neighbours[k]:
        rank += i >= 0 and 0 <= prog[i] < prog[k]
    return rank


@numba.njit(cache=True, nogil=True)
def _pace(k, t, state, slowdown, durations, jitter, frees):
    """Position k's program goes at its age rank's pace from `t` on; its free is pushed again for when it ends."""
    prog, done, since, rate, version, neighbours = state
    done[k] += rate[k] * (t - since[k])
    since[k], rate[k] = t, 1.0 / (1.0 + slowdown * _older(k, prog, neighbours))
    version[k] += 1
    left = max(0.0, durations[prog[k]] - done[k])
    heapq.heappush(frees, (t + left / rate[k] + jitter[prog[k]], k, version[k]))


@numba.njit(cache=True, nogil=True)
def _leave(k, t, state, slowdown, durations, jitter, frees):
    """Position k's program leaves at `t`: the younger ones on its SM move up a rank and go faster."""
    prog, neighbours = state[0], state[5]
    left, prog[k] = prog[k], -1
    for i in neighbours[k]:
        if slowdown > 0 and i >= 0 and prog[i] > left:
            _pace(i, t, state, slowdown, durations, jitter, frees)


@numba.njit(cache=True, nogil=True)
def _begin(k, p, t, state, slowdown, durations, jitter, frees):
    """Program p starts on position k at `t`, behind the programs already on its SM."""
    prog, done, since = state[0], state[1], state[2]
    prog[k], done[k], since[k] = p, 0.0, t
    _pace(k, t, state, slowdown, durations, jitter, frees)


@numba.njit(cache=True, nogil=True)
def _walk(slot_sm, rank, durations, jitter, window, first_wave_ns, slowdown, neighbours):
    """The SM of each program (launch order) when positions start on `slot_sm` (`neighbours`: the other positions
    on each one's SM, -1 padded): see the module docstring."""
    n, positions, num_sms = durations.shape[0], min(slot_sm.shape[0], durations.shape[0]), rank.shape[0]
    sms = np.empty(n, np.int64)
    if n == 0:
        return sms
    sms[:positions] = slot_sm[:positions]
    state = (np.full(positions, -1, np.int64), np.zeros(positions), np.zeros(positions), np.ones(positions),
             np.zeros(positions, np.int64), neighbours)  # prog, done, since, rate, version, neighbours
    version = state[4]
    frees = [(0.0, 0, 0)]
    frees.pop()
    for k in range(positions):
        _begin(k, k, k * first_wave_ns, state, slowdown, durations, jitter, frees)
    given, last = positions, rank[slot_sm[positions - 1]]
    ready = np.empty(positions, np.int64)
    keys = np.empty(positions, np.int64)
    while given < n:
        while frees[0][2] != version[frees[0][1]]:  # superseded when its program changed pace
            heapq.heappop(frees)
        opened = frees[0][0]
        count = 0
        while len(frees) and frees[0][0] < opened + window:
            t, k, seen = heapq.heappop(frees)
            if seen == version[k]:
                _leave(k, t, state, slowdown, durations, jitter, frees)
                ready[count] = k
                count += 1
        for j in range(count):  # walk on from the SM served last; ties (two slots of one SM) by position
            keys[j] = ((rank[slot_sm[ready[j]]] - last - 1) % num_sms) * positions + ready[j]
        for j in np.argsort(keys[:count]):
            if given == n:
                break
            k = ready[j]
            sms[given], last = slot_sm[k], rank[slot_sm[k]]
            _begin(k, given, opened + window, state, slowdown, durations, jitter, frees)
            given += 1
    return sms


def walk(slot_sm: np.ndarray, sm_order: np.ndarray, durations: np.ndarray, window_ns: float, finish_jitter_ns: float,
         first_wave_ns: float, seed: int = 0, slowdown: float = 0.0) -> np.ndarray:
    """int64[n]: the SM of each of n programs in launch order, of `durations` ns each alone, when the first wave's
    positions start on `slot_sm`, the scheduler walks `sm_order` (every SM once), and an SM's k-th oldest resident
    program goes 1 / (1 + slowdown x k) as fast as its oldest."""
    rank = np.empty(len(sm_order), np.int64)
    rank[np.asarray(sm_order, np.int64)] = np.arange(len(sm_order))
    durations = np.ascontiguousarray(durations, np.float64)
    jitter = finish_jitter_ns * np.random.default_rng(seed).standard_normal(durations.shape[0])
    slot_sm = np.ascontiguousarray(slot_sm, np.int64)
    return _walk(slot_sm, rank, durations, jitter, float(window_ns), float(first_wave_ns), float(slowdown),
                 _neighbours(slot_sm[:durations.shape[0]]))


def _neighbours(slot_sm: np.ndarray) -> np.ndarray:
    """int64[positions, most per SM - 1]: the other positions on each position's SM, padded with -1."""
    order = np.argsort(slot_sm, kind="stable")
    _, starts, counts = np.unique(slot_sm[order], return_index=True, return_counts=True)
    table = np.full((slot_sm.shape[0], max(1, int(counts.max(initial=1)) - 1)), -1, np.int64)
    for start, count in zip(starts, counts):
        members = order[start:start + count]
        for j, k in enumerate(members):
            table[k, :count - 1] = np.delete(members, j)
    return table


def sm_order(hw: HardwareSpec) -> np.ndarray:
    """The scheduler's SM order: the measured first wave's SMs, each at its first appearance."""
    return np.fromiter(dict.fromkeys(hw.dispatch.first_wave or range(hw.cus_per_domain)), np.int64)


def ns_per_round(hw: HardwareSpec, total_rounds: int, compulsory_bytes: int) -> float:
    """How long a program's round takes: one DRAM round trip, or longer where the kernel's compulsory traffic at
    peak bandwidth, shared out over its waves of rounds, takes more."""
    spec = hw.dispatch.walk
    if total_rounds == 0:
        return spec.dram_latency_ns
    streaming = compulsory_bytes * hw.resident_programs_per_domain / (spec.peak_dram_bytes_per_ns * total_rounds)
    return max(spec.dram_latency_ns, streaming)


def walked_cus(rounds_of_slot: np.ndarray, hw: HardwareSpec, compulsory_bytes: int) -> np.ndarray:
    """int64[G]: the SM of each launch slot under `hw.dispatch.walk`, given each slot's program's rounds. Slots
    whose program has no events never take a position; they get SM 0, which nothing reads."""
    spec = hw.dispatch.walk
    rounds = np.asarray(rounds_of_slot, np.int64)
    busy = rounds > 0
    durations = rounds[busy] * ns_per_round(hw, int(rounds.sum()), compulsory_bytes)
    cus = np.zeros(rounds.shape[0], np.int64)
    cus[busy] = walk(np.asarray(hw.first_wave_cus(), np.int64), sm_order(hw), durations, spec.window_ns,
                     spec.finish_jitter_ns, spec.first_wave_ns, spec.seed, hw.dispatch.younger_slowdown)
    return cus
