"""Proof by cases at a top-level `if pid < bound` (swizzleperf.validation.proofs.branches): the head-first orders
it proves, and the near misses it must never prove (a model is re-evaluated on the whole hook, and a
program mapped across the bound only sends the proof back to the whole hook)."""

from __future__ import annotations

import itertools
import math
import textwrap

import pytest

pytest.importorskip("z3")

from swizzleperf.kernel.contract import HookSignature  # noqa: E402
from swizzleperf.remaps.check import static_check  # noqa: E402
from swizzleperf.remaps.families import FAMILIES  # noqa: E402
from swizzleperf.validation.proofs.branches import split_points  # noqa: E402
from swizzleperf.validation.proofs.concrete import evaluate_program  # noqa: E402
from swizzleperf.validation.proofs.entry import prove_bijective  # noqa: E402

H1 = HookSignature("swizzle", "pid", ("num_pids",), ("NUM_XCDS",))
H3 = HookSignature("swizzle", "pid", ("num_q_blocks", "batch_size", "num_heads"), ("NUM_XCDS",))
HEAD_FIRST = FAMILIES["swizzled_head_first"](H3, group=2)


def hook(signature: HookSignature, body: str) -> str:
    return f"@triton.jit\n{signature.render()}:\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"


def first_failure(source: str, signature: HookSignature, dies: int, extents: list[range]) -> tuple | None:
    """The first small grid on which the hook is no bijection, evaluated exactly (None: it is one on all)."""
    fn = static_check(source, signature)
    for grid in itertools.product(*extents):
        seen = set()
        for pid in range(math.prod(grid)):
            run = evaluate_program(fn, signature, {"NUM_XCDS": dies}, grid, pid)
            if not run.in_range or run.logical in seen:
                return grid
            seen.add(run.logical)
    return None


@pytest.mark.parametrize("dies", [(2,), (16,)])
def test_head_first_is_proven_by_cases_and_the_verdict_says_so(dies):
    verdict = prove_bijective(HEAD_FIRST, H3, die_counts=dies, time_limit_s=2.0, in_child=False)
    assert verdict.status == "proven", verdict.message
    assert "by cases on `pid < rounds_end`, each side mapped onto itself" in verdict.method


def test_block_first_order_is_proven_by_cases_at_the_position():
    source = FAMILIES["swizzled_block_first"](H3, group=8, dies=16)
    verdict = prove_bijective(source, H3, die_counts=(1,), time_limit_s=2.0, in_child=False)
    assert verdict.status == "proven", verdict.message
    assert "by cases on `position < rounds_end`" in verdict.method


HEAD_FIRST_NEAR_MISSES = {
    "tail off by one": HEAD_FIRST.replace("tall = tail - (tail_q - 1) * NUM_XCDS",
                                          "tall = tail - (tail_q - 1) * NUM_XCDS - 1"),
    "tail local shifted": HEAD_FIRST.replace("tail_local = (pid - rounds_end) // NUM_XCDS",
                                             "tail_local = (pid - rounds_end + 1) // NUM_XCDS"),
    "chunk wrong at 8 units": HEAD_FIRST.replace(
        "    rounds_end =", "    chunk = cluster + num_q_blocks if batch_size * num_heads == 8 else cluster\n"
                           "    rounds_end =").replace("(pid // NUM_XCDS) % cluster", "(pid // NUM_XCDS) % chunk"),
}


@pytest.mark.parametrize("name", sorted(HEAD_FIRST_NEAR_MISSES))
def test_head_first_near_misses_are_no_bijections_and_never_proven(name):
    source = HEAD_FIRST_NEAR_MISSES[name]
    assert source != HEAD_FIRST
    assert first_failure(source, H3, 2, [range(1, 4), range(1, 3), range(1, 5)]) is not None
    verdict = prove_bijective(source, H3, die_counts=(2,), time_limit_s=1.0, in_child=False)
    assert verdict.status != "proven", verdict.message
    if name == "tail local shifted":
        assert verdict.status == "counterexample", verdict.message


ROTATION = hook(H1, """
    half = num_pids // 2
    if pid < half:
        lid = pid + (num_pids - half)
    else:
        lid = pid - half
    return lid
""")
CROSSING_COLLISION = hook(H1, """
    half = num_pids // 2
    if pid < half:
        lid = pid
    else:
        lid = max(pid - 1, half - 1)
    return lid
""")
SIDE_COLLISION = hook(H1, """
    half = num_pids // 2
    if pid < half:
        lid = pid
    else:
        lid = half + (pid - half) // 2 * 2
    return lid
""")


def test_a_bijection_that_maps_across_its_bound_is_proven_whole_not_refuted():
    assert first_failure(ROTATION, H1, 1, [range(1, 40)]) is None
    verdict = prove_bijective(ROTATION, H1, die_counts=(1,), time_limit_s=2.0, in_child=False)
    assert verdict.status == "proven", verdict.message
    assert verdict.method is None or "by cases" not in verdict.method


@pytest.mark.parametrize("source", [CROSSING_COLLISION, SIDE_COLLISION])
def test_a_collision_across_or_within_a_side_is_a_confirmed_counterexample(source):
    verdict = prove_bijective(source, H1, die_counts=(1,), time_limit_s=2.0, in_child=False)
    assert verdict.status == "counterexample", verdict.message
    example = verdict.counterexample
    fn = static_check(source, H1)
    runs = [evaluate_program(fn, H1, {"NUM_XCDS": 1}, example.grid, p) for p in example.programs]
    if example.kind == "collision":
        assert runs[0].logical == runs[1].logical and runs[0].pid != runs[1].pid
    else:
        assert example.kind == "out_of_range" and not runs[0].in_range


def test_only_a_1d_hooks_top_level_ifs_are_split_points():
    assert len(split_points(static_check(ROTATION, H1), H1)) == 1
    assert split_points(static_check(HEAD_FIRST, H3), H3) == []  # 3D: compose cuts its order out first


def test_leanings_carried_over_die_counts_prove_the_order_and_refute_its_near_miss():
    """Prover.stage carries how a stage was decided from one die count to the next (`leanings`): a choice of
    which query to ask first only, so over several die counts the order is proven and a near miss refuted."""
    verdict = prove_bijective(HEAD_FIRST, H3, die_counts=(2, 4, 8), time_limit_s=2.0, in_child=False)
    assert verdict.status == "proven", verdict.message
    source = HEAD_FIRST_NEAR_MISSES["tail local shifted"]
    verdict = prove_bijective(source, H3, die_counts=(2, 4, 8), time_limit_s=2.0, in_child=False)
    assert verdict.status == "counterexample", verdict.message


def test_the_sides_of_a_proof_by_cases_share_one_abstraction_cache(monkeypatch):
    """prove_by_cases hands the first side's ProductAbstraction to the second (one domain, one z3 context): its
    terms and axioms are built once, and each query still gets what a fresh cache gives it alone."""
    from swizzleperf.validation.proofs import branches, products

    prove, abstract, caches, fresh = branches.SideProver.prove, products.ProductAbstraction.abstract, [], []

    def record(self):
        out = prove(self)
        caches.append((self.side, self.products))
        return out

    def compare(self, formulas, known):
        out = abstract(self, formulas, known)
        alone = abstract(products.ProductAbstraction(formulas[0].ctx), formulas, known)
        fresh.append([f.get_id() for f in out] == [f.get_id() for f in alone])
        return out

    monkeypatch.setattr(branches.SideProver, "prove", record)
    monkeypatch.setattr(products.ProductAbstraction, "abstract", compare)
    verdict = prove_bijective(HEAD_FIRST, H3, die_counts=(4,), time_limit_s=2.0, in_child=False)
    assert verdict.status == "proven", verdict.message
    assert [side for side, _ in caches] == [True, False] and caches[0][1] is caches[1][1] is not None
    assert len(fresh) >= 5 and all(fresh), fresh


def test_a_stage_before_the_split_is_asked_once_for_both_sides(monkeypatch):
    """SideProver.stage asks a stage before the `if` (the order's `rounds_end`, statement 0) without the side's
    condition: one query for both sides (the second finds it proven); each side's own stages keep it."""
    from swizzleperf.validation.proofs import queries as solve

    stage, asked = solve.Prover.stage, []

    def record(self, copy, index, bad, what):
        asked.append((getattr(self, "side", None), index, len(copy.bounds)))
        return stage(self, copy, index, bad, what)

    monkeypatch.setattr(solve.Prover, "stage", record)
    verdict = prove_bijective(HEAD_FIRST, H3, die_counts=(4,), time_limit_s=2.0, in_child=False)
    assert verdict.status == "proven", verdict.message
    before = {bounds for side, index, bounds in asked if index == 0 and side is not None}
    after = {bounds for side, index, bounds in asked if index > 0 and side is not None}
    assert {side for side, index, _ in asked if index == 0} >= {True, False}
    assert len(before) == 1 and after == {before.pop() + 1}, asked
