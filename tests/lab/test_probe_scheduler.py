"""The block scheduler alone (H100, benchmarks/probe_scheduler.py): programs that only spin on the timer."""

import gzip
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("probe_scheduler", ROOT / "benchmarks" / "probe_scheduler.py")
probe = sys.modules["probe_scheduler"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)


def test_statistics_of_a_hand_made_fifo_schedule():
    """4 SMs (2 per side, one TPC each), 1 slot each (warps 64): every program starts 10 ns after the one before it on
    its SM ended, and slot w runs on the SM of w - 4; in start order the SMs go 0, 1, 2, 3, 0, ..."""
    sides, rank = np.array([0, 0, 1, 1]), np.arange(4)
    smid = np.tile(np.arange(4), 5)
    start = np.arange(20) * 100 + (np.arange(20) // 4) * 10
    run = {"warps": 64, "smid": smid.tolist(), "start_ns": start.tolist(), "end_ns": (start + 390).tolist()}
    stats = probe.run_statistics(run, sides, rank)
    assert stats["fifo"] == 1.0 and stats["same_sm"] == 0.0 and stats["walk"] == 1.0
    # after the first wave 16 programs, 15 pairs: 0->1 and 2->3 share a TPC (8 of them), 1->2 and 3->0 do not
    assert stats["same_tpc"] == 8 / 15 and stats["same_side"] == 8 / 15
    assert stats["free_p50"] == 20.0  # start 400 + 10 after the program that ended at 390 (started at 0)


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_the_scheduler_alone_walks_its_sm_order_the_more_often_slots_free(gpu):
    """With nothing but a timer spin (1-40 us, equal or spread by half, 8 or 16 programs per SM), programs consecutive
    in launch order share an L2 side 55-77 % of the time (50 % at random) and step 1-8 SMs along the scheduler's order
    14-57 % (6 % at random), most where slots free most often (1 us programs, 16 per SM); a freed slot does not go to
    the next program in launch order. In start order the same runs look random: the timer cannot order the starts."""
    with gzip.open(ROOT / "tests" / "fixtures" / "probes" / f"probe-scheduler-{gpu}.json.gz", "rt") as f:
        runs = json.load(f)["runs"]
    sides, rank = probe.sides_and_rank("h100")  # the H200 has the H100's SM layout
    assert len(runs) == 6
    for run in runs:
        stats = probe.run_statistics(run, sides, rank)
        assert stats["walk"] > 0.13 and stats["same_side"] > 0.54, run["label"]
        assert stats["fifo"] < 0.03, run["label"]
        earlier = np.mean(np.diff(np.asarray(run["start_ns"])) < 0)
        assert 0.4 < earlier < 0.5, run["label"]  # starts recorded before the previous launch slot's
    short = probe.run_statistics(next(r for r in runs if r["label"].startswith("equal 1us")), sides, rank)
    assert short["walk"] > 0.5 and short["same_side"] > 0.75
    assert short["free_p50"] <= 64  # a freed slot is refilled within a few timer ticks (32 ns each)
