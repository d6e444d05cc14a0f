"""Counted work (swizzleperf.remaps.work): evaluation is bounded by a count computed before anything
runs, so a verdict does not depend on the machine's load (issue 13, item 6)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import HookSignature, load_kernel
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.records.proposal import Proposal
from swizzleperf.remaps import work
from swizzleperf.remaps.check import static_check
from swizzleperf.remaps.space import candidate_space
from swizzleperf.validation import correctness
from swizzleperf.validation.bijectivity import bijectivity_grids

ROOT = Path(__file__).resolve().parents[2]
H1 = HookSignature("swizzle", "pid", ("num_pids",), ("NUM_XCDS",))
_TERMS = " + ".join(f"(acc ^ {k})" for k in range(1, 31))
# Before counted work, `check` on softmax spent ~30 s in the sampled bijectivity check and then the
# correctness check's 120 s limit on this (143 s in the issue; a timeout at either stage under load).
HEAVY = f"""@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    acc = pid
    for i in range(64):
        acc = ({_TERMS}) - ({_TERMS}) + acc
    return acc
"""


def nodes(body: str, constexprs=None) -> int:
    source = f"@triton.jit\n{H1.render()}:\n" + "\n".join("    " + line for line in body.splitlines()) + "\n"
    return work.per_program(static_check(source, H1), constexprs or {"NUM_XCDS": 8})


def test_node_evaluations_per_program_are_counted_exactly():
    assert nodes("return pid") == 2  # Return, Name
    assert nodes("x = pid + 1\nreturn x") == 5 + 2  # Assign, Name(x), BinOp, Name, Constant; Return, Name
    loop = "acc = pid\nfor i in range(4):\n    acc += 1\nreturn acc"
    # Assign(3) + For, Name(i), Call, Name(range), Constant(4) + 4 trips x AugAssign(3) + Return(2)
    assert nodes(loop) == 3 + 5 + 4 * 3 + 2
    by_constexpr = "acc = pid\nfor i in tl.static_range(NUM_XCDS):\n    acc += 0\nreturn acc"
    assert nodes(by_constexpr, {"NUM_XCDS": 2}) - nodes(by_constexpr, {"NUM_XCDS": 1}) == 3


def test_nested_loops_multiply_up_to_the_per_program_cap():
    nested = "acc = pid\nfor i in range(16):\n    for j in range(16):\n        acc += 1\nreturn acc"
    assert nodes(nested) == 3 + 5 + 16 * 5 + 64 * 3 + 2  # the inner body runs at most LOOP_TRIP_CAP times


def test_a_candidate_that_took_minutes_is_rejected_at_once_with_its_counted_work():
    kernel = load_kernel(ROOT / "kernels/softmax.py")
    evaluator = CandidateEvaluator(kernel, PRESETS["mi300x"], None, kernel.default_size)
    reasons = []
    for _ in range(2):
        started = time.perf_counter()
        attempt = evaluator.evaluate(Proposal(source=HEAVY, family="heavy", origin="llm"), 1)
        assert time.perf_counter() - started < 5
        assert attempt.failure.stage == "bijectivity" and not attempt.failure.checker_failed
        reasons.append(attempt.failure.detail)
    programs = sum(map(lambda g: g[0], bijectivity_grids(H1, [kernel.grid(s) for s in kernel.sizes], 8)))
    per_program = work.per_program(static_check(HEAVY, H1), {"NUM_XCDS": 8})
    assert reasons[0] == reasons[1] == (
        f"counted work {per_program * programs:,} ({per_program:,} node evaluations per program x {programs:,} "
        f"programs of the sampled grids) exceeds the budget of {work.BIJECTIVITY_WORK:,}: simplify the remap "
        f"(fewer operations, shorter loops)")
    assert "\n" not in reasons[0]


def test_the_cpu_correctness_check_counts_the_interpreters_work_before_starting_it(monkeypatch):
    kernel = load_kernel(ROOT / "kernels/softmax.py")
    light = HEAVY.replace("range(64)", "range(2)")
    monkeypatch.setattr(correctness, "run_in_child", pytest.fail)  # never started
    report = correctness.check_correctness(kernel, light, seeds=(0, 1), device="cpu")
    assert not report.ok and report.failure.startswith("counted work ")
    assert f"exceeds the budget of {work.INTERPRETER_WORK:,}" in report.failure


@pytest.mark.parametrize("path", sorted((ROOT / "kernels").glob("*.py")), ids=lambda p: p.stem)
def test_every_family_instance_is_far_below_the_budgets_on_every_suite_kernel(path):
    """A quarter of each budget at most: every declared grid, and 2 seeds of the CPU correctness check."""
    kernel = load_kernel(path)
    hook, dies = kernel.hook, {name: 8 for name in kernel.hook.constexprs}
    programs = work.programs_of(bijectivity_grids(hook, [kernel.grid(s) for s in kernel.sizes], 8))
    checked = 2 * sum(work.programs_of([kernel.grid(s)]) for s in correctness.sizes_to_check(kernel, None, "cpu"))
    for instances in candidate_space(hook, PRESETS["mi300x"]).values():
        for instance in instances:
            per_program = work.per_program(static_check(instance.render(hook), hook), dies)
            assert per_program * programs * 4 < work.BIJECTIVITY_WORK, instance.label
            assert per_program * checked * 4 < work.INTERPRETER_WORK, instance.label


def _loop_order(body: str) -> str:
    """The persistent attention kernel's own remap with a loop-order hook of `body`."""
    kernel = load_kernel(ROOT / "kernels/attention_persistent.py")
    order = f"@triton.jit\n{kernel.loop_order.render()}:\n" + "\n".join("    " + line for line in body.splitlines())
    return kernel.hook_source + "\n\n" + order + "\n"


def test_a_loop_order_hook_is_counted_per_call_before_the_interpreter_runs_it(monkeypatch):
    """It runs at every K/V step of every tile: 64 trips of 60 xors a call kept the child for minutes."""
    kernel = load_kernel(ROOT / "kernels/attention_persistent.py")
    heavy = _loop_order(f"acc = step\nfor i in range(64):\n    acc = ({_TERMS}) - ({_TERMS}) + acc\nreturn acc")
    monkeypatch.setattr(correctness, "run_in_child", pytest.fail)  # never started
    report = correctness.check_correctness(kernel, heavy, seeds=(0, 1), device="cpu")
    assert not report.ok and report.failure.startswith("counted work ")
    assert "node evaluations per call of the loop-order hook" in report.failure
    assert f"exceeds the budget of {work.LOOP_ORDER_CALL_WORK:,} a call" in report.failure and "\n" not in report.failure


def test_the_sawtooth_is_far_below_the_loop_order_budget():
    from swizzleperf.remaps.loop_orders import bind_local_tile, sawtooth

    kernel = load_kernel(ROOT / "kernels/attention_persistent.py")
    fn = static_check(bind_local_tile(sawtooth(kernel.loop_order), kernel.loop_order, 0), kernel.loop_order.over_steps())
    assert work.per_program(fn, {"NUM_XCDS": 8}) * 10 < work.LOOP_ORDER_CALL_WORK
