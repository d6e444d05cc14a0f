"""Inverse certificates (swizzleperf.validation.proofs.certificates, swizzleperf.remaps.inverses): the family inverses
undo their families, a certificate proves only what is true, and a wrong or foreign one changes
no verdict (it only costs its budget)."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("z3")

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import HookSignature  # noqa: E402
from swizzleperf.remaps.check import static_check  # noqa: E402
from swizzleperf.remaps.families import FamilyInstance  # noqa: E402
from swizzleperf.remaps.inverses import inverse_signature, render_inverse  # noqa: E402
from swizzleperf.remaps.space import candidate_space
from swizzleperf.validation.proofs import concrete  # noqa: E402
from swizzleperf.validation.proofs.backends import ConcreteBackend  # noqa: E402
from swizzleperf.validation.proofs.certificates import certificate, certificates_for  # noqa: E402
from swizzleperf.validation.proofs.prover import prove_checked  # noqa: E402
from swizzleperf.validation.proofs.symexec import Executor  # noqa: E402
from swizzleperf.validation.proofs.verdict import INT32_MAX  # noqa: E402

HOOKS = (HookSignature("swizzle", "pid", ("num_pids",), ("NUM_XCDS",)),
         HookSignature("swizzle", "pid", ("num_pid_m", "num_pid_n"), ("NUM_XCDS",)),
         HookSignature("swizzle", "pid", ("num_q_blocks", "batch_size", "num_heads"), ("NUM_XCDS",)))
ONE_D = HOOKS[0]
DIES = [1, 2, 4, 8, 16]
LIMIT_S = 4.0
CHUNKED = FamilyInstance("xcd_chunked", (("chunk", 4),))


def _instances():
    seen = set()
    for hw in ("mi300x", "h100"):
        for hook in HOOKS:
            for family, instances in candidate_space(hook, PRESETS[hw]).items():
                for instance in instances[:2] + instances[-1:]:
                    if (hook.ndim, instance.label) not in seen:
                        seen.add((hook.ndim, instance.label))
                        yield pytest.param(hook, instance, id=f"{hook.ndim}d-{hw}-{instance.label}")


@pytest.mark.parametrize("hook,instance", list(_instances()))
def test_every_family_inverse_undoes_its_family_on_small_grids(hook, instance):
    fn = static_check(instance.render(hook), hook)
    inverse = render_inverse(instance, hook)
    signature = inverse_signature(hook)
    gn = static_check(inverse, signature)
    rng = random.Random(hook.ndim)
    for _ in range(4):
        grid = tuple(rng.choice([1, 2, 3, 5, 7, 12, 33]) for _ in hook.grid_params)
        for dies in (1, 3, 8):
            total = 1
            for extent in grid:
                total *= extent
            for pid in range(total):
                run = concrete.evaluate_program(fn, hook, {"NUM_XCDS": dies}, grid, pid)
                inputs = {**dict(zip(signature.coords, run.logical)), **dict(zip(hook.grid_params, grid))}
                back = Executor(gn, signature, ConcreteBackend(), inputs, {"NUM_XCDS": dies}).outputs()[0]
                assert back == pid, (instance.label, grid, dies, pid, run.logical)


def _prove(source: str, certificates, hook: HookSignature = ONE_D):
    return prove_checked(static_check(source, hook), source, hook, DIES, LIMIT_S, INT32_MAX,
                         certificates=certificates)


def _inverse(instance: FamilyInstance, hook: HookSignature = ONE_D):
    return certificate(instance.label, render_inverse(instance, hook), hook)


def test_a_family_hook_is_proven_through_its_inverse_and_the_verdict_says_so():
    verdict = _prove(CHUNKED.render(ONE_D), None)
    assert verdict.proven, verdict.message
    assert "inverse certificate (xcd_chunked(chunk=4))" in verdict.message


@pytest.mark.parametrize("bug", [("+ k\n", "+ k // 2\n"), ("per_round + xcd", "per_round + xcd // 2")])
def test_a_near_miss_non_bijection_is_never_proven_with_the_right_familys_inverse(bug):
    source = CHUNKED.render(ONE_D).replace(*bug)
    assert source != CHUNKED.render(ONE_D)
    given = _prove(source, [_inverse(CHUNKED)])
    plain = _prove(source, [])
    assert plain.status == "counterexample", plain.message
    assert given.status == "counterexample", given.message
    assert "inverse" not in given.message


def test_an_inverse_that_forgets_half_the_programs_proves_nothing():
    source = ("@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n"
              "    return pid // 2\n")  # in range, not one-to-one: pid 2k and 2k + 1 collide
    inverse = ("@triton.jit\ndef swizzle_inverse(logical_0, num_pids, NUM_XCDS: tl.constexpr):\n"
               "    return logical_0 * 2\n")
    verdict = _prove(source, [certificate("halving", inverse, ONE_D)])
    assert verdict.status == "counterexample", verdict.message


def test_a_wrong_inverse_for_a_true_bijection_falls_back_to_the_other_proofs():
    source = CHUNKED.render(ONE_D)
    reverse = ("@triton.jit\ndef swizzle_inverse(logical_0, num_pids, NUM_XCDS: tl.constexpr):\n"
               "    return num_pids - 1 - logical_0\n")
    given = _prove(source, [certificate("reverse", reverse, ONE_D)])
    plain = _prove(source, [])
    assert given.status == plain.status == "proven", (given.message, plain.message)
    assert "inverse" not in (given.method or "")


def test_an_inverse_right_at_one_die_count_only_proves_that_die_count():
    # chunk 8's inverse undoes chunk 4's order with one die (both are the identity there), no other
    given = _prove(CHUNKED.render(ONE_D), [_inverse(FamilyInstance("xcd_chunked", (("chunk", 8),)))])
    assert given.proven, given.message
    assert given.method == "one-to-one by an inverse certificate (xcd_chunked(chunk=8)) with NUM_XCDS=1"


def test_certificates_for_another_signature_are_ignored():
    two_d = HOOKS[1]
    renamed = HookSignature("swizzle", "pid", ("n",), ("NUM_XCDS",))
    assert certificate("2D", render_inverse(FamilyInstance("xcd_row_major"), two_d), ONE_D) is None
    assert certificate("renamed", render_inverse(CHUNKED, renamed), ONE_D) is None
    assert certificate("not an inverse", CHUNKED.render(ONE_D), ONE_D) is None
    source = FamilyInstance("xcd_grouped", (("group_m", 8),)).render(two_d)
    assert certificates_for(static_check(source, two_d), two_d, DIES) == []  # 2D: its order gets them


def test_the_sample_filter_keeps_the_right_inverse_and_drops_the_others():
    for instance in (CHUNKED, FamilyInstance("xcd_chunked", (("chunk", 128), ("dies", 16))),
                     FamilyInstance("xcd_contiguous", (("dies", 8),))):
        fn = static_check(instance.render(ONE_D), ONE_D)
        found = certificates_for(fn, ONE_D, DIES)
        assert found and found[0].label == instance.label, [c.label for c in found]


def test_an_inverse_the_executor_rejects_is_dropped_and_the_hook_still_proven():
    comparison = ("@triton.jit\ndef swizzle_inverse(logical_0, num_pids, NUM_XCDS: tl.constexpr):\n"
                  "    return logical_0 < num_pids\n")  # a boolean, not a launch id
    made = certificate("comparison", comparison, ONE_D)
    assert made is not None  # the subset admits it; the executor does not
    verdict = _prove(CHUNKED.render(ONE_D), [made])
    assert verdict.proven and "inverse" not in (verdict.method or ""), verdict.message
