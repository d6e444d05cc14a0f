"""The block scheduler's recorded placement (H100): the first wave and the steady state's L2 sides."""

import gzip
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from swizzleperf.hardware.layouts.measured import sm_partition

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("probe_placement", ROOT / "benchmarks" / "probe_placement.py")
probe = sys.modules["probe_placement"] = importlib.util.module_from_spec(_spec)  # dataclasses look it up
_spec.loader.exec_module(probe)


def _recorded() -> dict:
    with gzip.open(ROOT / "tests" / "fixtures" / "probes" / "placement-h100.json.gz", "rt") as f:
        return {k["kernel"]: k for k in json.load(f)["kernels"]}


def test_the_first_wave_fills_every_sm_to_the_kernels_occupancy():
    """ncu's launch statistics give these occupancies (programs per SM); the first wave is that many per SM."""
    kernels = _recorded()
    occupancy = {"spmv": 16, "stencil2d": 10, "softmax": 12, "elementwise": 12, "fdtd2d": 3, "gemm": 2, "attention": 1}
    for name, programs in occupancy.items():
        assert probe.first_wave(np.array(kernels[name]["smid"]), 132) == 132 * programs, name


def test_short_programs_run_next_to_each_other_on_one_side_the_others_nearly_at_random():
    kernels, sides = _recorded(), sm_partition("h100")
    spmv = probe.steady_state(kernels["spmv"]["smid"], sides)
    softmax = probe.steady_state(kernels["softmax"]["smid"], sides)
    assert spmv.same_side[0] > 0.8 and spmv.side_run > 5  # 19 line accesses a program
    assert softmax.same_side[0] < 0.56 and softmax.side_run < 2.3
    assert spmv.same_sm < 0.01 and softmax.same_sm < 0.01  # consecutive programs never share an SM


def test_steady_state_statistics_on_known_sequences():
    sides = [0, 1] * 4  # SM i is on side i % 2
    alternating = probe.steady_state([0, 1] * 50, sides)
    assert alternating.same_side == (0.0, 1.0, 1.0) and alternating.side_run == 1.0 and alternating.same_sm == 0.0
    random_sides = probe.steady_state(np.random.default_rng(0).integers(0, 8, 100_000), sides)
    assert random_sides.side_run == pytest.approx(2.0, abs=0.05)
    assert random_sides.same_sm == pytest.approx(1 / 8, abs=0.01)
    walking = probe.steady_state(list(range(8)) * 20, sides, order=[0, 2, 4, 6, 1, 3, 5, 7])
    assert walking.walk == pytest.approx(1.0)  # steps of 4 or 5 of the 8 SMs: always 1-8 further on
    assert probe.steady_state([0] * 40, sides[:1], order=[0]).walk == 0.0  # one SM: a step of 0 is not a walk


def test_the_scheduler_walks_its_sm_order_under_every_remap():
    """Recorded under each remap (all programs): where a slot runs does not depend on which program it runs.
    spmv's next program went 1-8 SMs further on in the first wave's SM order 72-74 % of the time (6 % at random):
    the scheduler gives programs out walking its SM order, so consecutive slots share an L2 side."""
    from swizzleperf.hardware.layouts.measured import first_wave_sequence

    with gzip.open(ROOT / "tests" / "fixtures" / "probes" / "placement-remaps-h100.json.gz", "rt") as f:
        records = json.load(f)["kernels"]
    sides, order = sm_partition("h100"), list(dict.fromkeys(first_wave_sequence("h100")))
    spmv = [probe.steady_state(r["smid"], sides, order) for r in records if r["kernel"] == "spmv"]
    stencil = [probe.steady_state(r["smid"], sides, order) for r in records if r["kernel"] == "stencil2d"]
    assert len(spmv) == 6 and len(stencil) == 10
    assert all(0.7 < s.walk < 0.76 and 0.8 < s.same_side[0] < 0.85 for s in spmv)
    assert all(0.18 < s.walk < 0.3 and s.same_side[0] < 0.63 for s in stencil)


def test_programs_start_in_launch_order_after_the_first_wave():
    """Start times recorded on an H200 (32 ns timer): after the first wave a program starts before the one launched
    just ahead of it at most 22 % of the time (gemm col_major 5 %; elementwise's identity, whose programs are
    shorter than two timer ticks, 42 %), before the one 16 ahead at most 5 % (elementwise's identity 32 %), and
    never before the one 256 ahead (0.2 %). So the replay turns placed programs in the order they started."""
    with gzip.open(ROOT / "tests" / "fixtures" / "probes" / "placement-starts-h200.json.gz", "rt") as f:
        records = json.load(f)["kernels"]
    sides = sm_partition("h100")  # the H200 has the H100's SM layout
    states = {(r["kernel"], r["remap"]): probe.steady_state(r["smid"], sides, start_ns=r["start_ns"]) for r in records}
    assert len(states) == 14
    for (kernel, remap), state in states.items():
        one, sixteen, far = state.started_before
        assert far <= 0.003, (kernel, remap)
        if (kernel, remap) != ("elementwise", "identity"):
            assert one <= 0.23 and sixteen <= 0.06, (kernel, remap)
    shuffled = probe.steady_state([0, 1] * 500, [0, 1], start_ns=np.random.default_rng(0).permutation(1000))
    assert all(p == pytest.approx(0.5, abs=0.1) for p in shuffled.started_before)
    assert probe.steady_state([0, 1] * 500, [0, 1], start_ns=np.arange(1000)).started_before == (0.0, 0.0, 0.0)
