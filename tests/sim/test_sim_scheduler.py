"""sim/scheduler.py: NVIDIA's block scheduler walking its SM order, by hand, against the spin runs recorded on an
H100 and an H200, and through the engine (the oracle comparison itself runs in test_sim_engine's configs)."""

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from test_sim_engine import CONFIGS, engine_counts, make_spec, make_trace
from test_sim_stream import random_case

from swizzleperf.errors import HardwareSpecError
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.hardware.spec import Dispatch, SchedulerWalk
from swizzleperf.sim.engine import simulate
from swizzleperf.sim.scheduler import ns_per_round, sm_order, walk, walked_cus
from swizzleperf.sim.trace.stored import StoredTrace, write_trace

ROOT = Path(__file__).resolve().parents[2]
H100 = PRESETS["h100"]


def wave_of(programs_per_sm: int, gpu: str = "h100") -> np.ndarray:
    return np.asarray(PRESETS[gpu].model_copy(update={"programs_per_cu": programs_per_sm}).first_wave_cus())


def test_frees_one_window_apart_are_served_first_come_first_served():
    """Equal programs, no disorder, a window shorter than the first wave's 0.36 ns between starts: each slot frees
    alone, so program P + k runs where program k did, wave after wave."""
    wave = wave_of(2)
    sms = walk(wave, sm_order(H100), np.full(5 * len(wave), 1000.0), window_ns=0.1, finish_jitter_ns=0.0,
               first_wave_ns=0.36)
    assert np.array_equal(sms, np.tile(wave, 5))


def test_frees_of_one_window_are_given_out_walking_the_sm_order_from_the_last_sm_served():
    """All of the first wave frees in one window: the next programs go around the scheduler's SM order, starting
    after the SM that got the first wave's last program, one per free slot (two per SM at 2 programs per SM)."""
    wave, order = wave_of(2), sm_order(H100)
    rank = np.argsort(order)
    sms = walk(wave, order, np.full(2 * len(wave), 10.0), window_ns=1000.0, finish_jitter_ns=0.0, first_wave_ns=0.36)
    second = rank[sms[len(wave):]]
    start = (rank[wave[-1]] + 1) % 132
    assert second[0] == start and np.all(np.diff((second - start) % 132) >= 0)
    assert np.array_equal(np.bincount(sms[len(wave):], minlength=132), np.full(132, 2))


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_the_presets_walk_reproduces_the_spin_runs_outside_the_suite(gpu):
    """With the preset's window and disorder (fitted on the H100's runs by benchmarks/scheduler_model.py fit) the
    walk gives each recorded spin run's L2-side and 1-8 SM walk fractions of consecutive programs within 0.09
    (the 40 us runs the furthest); measured: 0.55-0.77 and 0.14-0.57 on the H100, within 0.012 of those on an H200.
    A hashed refill would give about 0.5 and 0.06."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from probe_scheduler import run_statistics, sides_and_rank, spin_durations

    spec, sides, rank = PRESETS[gpu].dispatch.walk, *sides_and_rank("h100")  # the H200 preset has the H100's layout
    with gzip.open(ROOT / "tests" / "fixtures" / "probes" / f"probe-scheduler-{gpu}.json.gz", "rt") as f:
        runs = json.load(f)["runs"]
    assert len(runs) == 6
    for run in runs:
        wave = wave_of(64 // run["warps"], gpu)
        durations = spin_durations(run["spin_ns"], run["spread"], run["programs"])
        placed = walk(wave, sm_order(PRESETS[gpu]), durations, spec.window_ns, spec.finish_jitter_ns,
                      spec.first_wave_ns)
        predicted = run_statistics({**run, "smid": placed}, sides, rank)
        measured = run_statistics(run, sides, rank)
        for key in ("same_side", "walk"):
            assert abs(predicted[key] - measured[key]) <= 0.095, (run["label"], key, predicted[key], measured[key])


def test_a_round_lasts_a_dram_round_trip_or_the_kernels_share_of_its_traffic():
    spec = H100.dispatch.walk  # 410 ns, 3.35 TB/s; 264 positions at 2 programs per SM
    assert ns_per_round(H100, total_rounds=1000, compulsory_bytes=3350 * 100) == 410.0
    # 1 GB over 10,000 rounds on 264 positions: 1e9 / 3350 B/ns = 298,507 ns of streaming, 37.9 waves of rounds
    assert ns_per_round(H100, total_rounds=10_000, compulsory_bytes=10**9) == pytest.approx(
        10**9 * 264 / (spec.peak_dram_bytes_per_ns * 10_000))
    assert ns_per_round(H100, total_rounds=0, compulsory_bytes=10**9) == 410.0


def test_programs_without_events_take_no_slot():
    """Slots whose program has no rounds get SM 0 and are skipped: the busy ones are placed as if they were alone."""
    rounds = np.array([3, 0, 2, 0, 5] * 200)
    cus = walked_cus(rounds, H100, compulsory_bytes=10**6)
    alone = walked_cus(rounds[rounds > 0], H100, compulsory_bytes=10**6)
    assert np.array_equal(cus[rounds > 0], alone) and not cus[rounds == 0].any()
    assert np.array_equal(alone[:264], H100.first_wave_cus())


def test_the_walk_is_only_for_in_order_dispatch():
    with pytest.raises(ValueError, match="needs policy in_order"):
        Dispatch(policy="round_robin", walk=SchedulerWalk(peak_dram_bytes_per_ns=1000.0))
    assert all(PRESETS[name].dispatch.walk is None for name in ("mi300x", "mi355x", "gb10"))
    with pytest.raises(HardwareSpecError, match="mi300x has no scheduler walk"):
        PRESETS["mi300x"].with_walk_seed(1)


@pytest.mark.parametrize("name", ["inorder-2parts-res8-4cus-l1-walk-latency",
                                  "inorder-2parts-res6-3cus-l1-walk-bandwidth"])
def test_the_walk_survives_chunked_replay_and_a_recorded_placement_overrides_it(name, tmp_path):
    hw = CONFIGS[name]
    for seed in range(3):
        trace, perm = random_case(seed)
        stored = StoredTrace(write_trace(trace, tmp_path / f"t{seed}.runs"))
        assert engine_counts(simulate(stored, perm, hw, memory_bytes=1)) == engine_counts(simulate(trace, perm, hw))
        cus = np.random.default_rng(seed).integers(0, hw.cus_per_domain, len(perm))
        assert engine_counts(simulate(trace, perm, hw, recorded_cus=cus)) == engine_counts(
            simulate(trace, perm, hw.model_copy(update={"dispatch": Dispatch(policy="in_order")}), recorded_cus=cus))


def test_which_sm_a_program_gets_decides_its_l1_hits_by_hand():
    """Two SMs, one program each, rounds of 410 ns, no disorder. P0 reads A then Z (ends at 820 ns), P1 reads B
    (ends at 410.36 ns), P2 reads A. A 1000 ns window takes both frees together and walks on from SM 1 (served
    last): P2 runs on SM 0, where A is in the L1. A 0.1 ns window serves P1's free alone: P2 runs on SM 1 and finds
    A in the L2 instead. (L2 read lookups, hits, first fetches, writes, L1 lookups, L1 hits, DRAM, promoted.)"""
    trace = make_trace([[[1], [2]], [[3]], [[1]]])
    counts = {}
    for window in (1000.0, 0.1):
        hw = make_spec(1, sets=4, ways=4, policy="in_order", resident=2, cus=2, l1_sets=2, l1_ways=2,
                       first_wave=[0, 1], walk={"window_ns": window, "finish_jitter_ns": 0.0,
                                                "peak_dram_bytes_per_ns": 1e9})
        counts[window] = engine_counts(simulate(trace, np.arange(3), hw))
    assert counts[1000.0] == [(3, 0, 3, 0, 4, 1, 3, 0)]
    assert counts[0.1] == [(4, 1, 3, 0, 4, 0, 3, 0)]


def test_programs_turn_in_the_order_they_started_by_hand():
    """Three slots, an L2 of one line. P0 reads A; P1 reads B then C; P2 reads D then E; P3 reads C. P0 ends
    after turn 1 and P3 starts, at the end of the rotation, placed or not, as a GPU starts programs in launch order:
    P1 reads C, P2 evicts it, P3 misses it too. (L2 read lookups, hits, first fetches, writes, L1 lookups, L1 hits,
    DRAM, promoted.)"""
    a, b, c, d, e = range(5)
    trace = make_trace([[[a]], [[b], [c]], [[d], [e]], [[c]]])
    hw = make_spec(1, sets=1, ways=1, policy="in_order", resident=3, cus=3)
    for recorded in (np.array([0, 1, 2, 0]), None):
        assert engine_counts(simulate(trace, np.arange(4), hw, recorded_cus=recorded)) == [(6, 0, 5, 0, 0, 0, 6, 0)]


def test_a_younger_program_falls_behind_by_hand():
    """One CU, two slots, an L2 of one line. P0 reads A, B, C, D; P1 reads A, B. Together (no slowdown) P1 reads
    each line right after P0 and hits twice. At a quarter of the oldest's pace (slowdown 3), P1 issues its first
    round on its first turn (A: a hit), then gains a quarter round a turn: it reads B on turn 4, after P0's D
    evicted it, and misses."""
    a, b, c, d = range(4)
    trace = make_trace([[[a], [b], [c], [d]], [[a], [b]]])
    together = make_spec(1, sets=1, ways=1, policy="in_order", resident=2, cus=1)
    apart = make_spec(1, sets=1, ways=1, policy="in_order", resident=2, cus=1, slowdown=3.0)
    assert engine_counts(simulate(trace, np.arange(2), together)) == [(6, 2, 4, 0, 0, 0, 4, 0)]
    assert engine_counts(simulate(trace, np.arange(2), apart)) == [(6, 1, 4, 0, 0, 0, 5, 0)]


def test_the_seed_is_a_draw_of_the_disorder_and_part_of_the_spec():
    rounds = np.tile([1, 2, 3, 5, 8], 400)
    other = H100.with_walk_seed(1)
    assert other.dispatch.walk.seed == 1 and H100.dispatch.walk.seed == 0
    first, again, drawn = (walked_cus(rounds, hw, 10**6) for hw in (H100, H100, other))
    assert np.array_equal(first, again) and not np.array_equal(first, drawn)
    assert np.array_equal(first[:264], drawn[:264])  # the first wave does not wait on anything


@pytest.mark.parametrize("name", ["rr8-chunk1-res1-direct", "inorder-res1-2way"])
def test_one_program_per_cu_is_never_slowed(name):
    """Every program is its CU's oldest, so the pace rule changes nothing: a persistent kernel at one program per
    SM (whose programs start together by construction) keeps its predictions."""
    hw = CONFIGS[name]
    trace, perm = random_case(7)
    slowed = hw.model_copy(update={"dispatch": hw.dispatch.model_copy(update={"younger_slowdown": 2.0})})
    assert hw.programs_per_cu == 1
    assert engine_counts(simulate(trace, perm, slowed)) == engine_counts(simulate(trace, perm, hw))
