"""The product abstraction's cache (swizzleperf.validation.proofs.products.ProductAbstraction): one per Prover, reused
by all its queries. A cached abstraction must be the abstraction of that query's formulas alone, never
carry another query's products, divisions or axioms, and a non-bijection must still be refuted after a
bijection of the same shape was proven."""

from __future__ import annotations

import math

import pytest

z3 = pytest.importorskip("z3")

from swizzleperf.kernel.contract import HookSignature  # noqa: E402
from swizzleperf.remaps.check import static_check  # noqa: E402
from swizzleperf.remaps.families import FAMILIES  # noqa: E402
from swizzleperf.validation.proofs import products  # noqa: E402
from swizzleperf.validation.proofs.concrete import evaluate_program  # noqa: E402
from swizzleperf.validation.proofs.encoding import Domain  # noqa: E402
from swizzleperf.validation.proofs.entry import prove_bijective  # noqa: E402
from swizzleperf.validation.proofs.queries import Prover  # noqa: E402
from swizzleperf.validation.proofs.z3_call import Budget  # noqa: E402

H1 = HookSignature("swizzle", "pid", ("num_pids",), ("NUM_XCDS",))
H3 = HookSignature("swizzle", "pid", ("num_q_blocks", "batch_size", "num_heads"), ("NUM_XCDS",))
CONTIGUOUS = FAMILIES["xcd_contiguous"](H1)
TAIL_OFF_BY_ONE = CONTIGUOUS.replace("tall = count - (q - 1) * NUM_XCDS", "tall = count - (q - 1) * NUM_XCDS - 1")


def ids(formulas: list) -> list[int]:
    return [f.get_id() for f in formulas]


def test_every_cached_abstraction_of_a_proof_is_the_fresh_one(monkeypatch):
    """Each query of a proof by cases (range stages, sides, the generalised injectivity) gets, from its
    Prover's cache, formula for formula what a new ProductAbstraction gives that query alone."""
    cached, checked = products.ProductAbstraction.abstract, []

    def compare(self, formulas, known):
        out = cached(self, formulas, known)
        fresh = cached(products.ProductAbstraction(formulas[0].ctx), formulas, known)
        checked.append(ids(out) == ids(fresh))
        return out

    monkeypatch.setattr(products.ProductAbstraction, "abstract", compare)
    verdict = prove_bijective(FAMILIES["swizzled_head_first"](H3, group=2), H3, die_counts=(8,), time_limit_s=2.0,
                              in_child=False)
    assert verdict.status == "proven", verdict.message
    assert len(checked) >= 5 and all(checked), checked


def test_a_query_gets_no_axioms_of_an_earlier_querys_products():
    ctx = z3.Context()
    x, y, z, w = (z3.Int(n, ctx) for n in "xyzw")
    cache = products.ProductAbstraction(ctx)
    first = cache.abstract([x * y > 3, z / w == 2], {})
    assert len(first) > 2  # the products' and the division's axioms
    assert ids(cache.abstract([z > 0], {})) == ids([z > 0])
    again = [x * y > 3]
    assert ids(cache.abstract(again, {})) == ids(products.ProductAbstraction(ctx).abstract(again, {}))
    assert len(cache.abstract(again, {})) < len(first)


@pytest.mark.parametrize("dies", [8, 16])
def test_a_real_model_is_a_model_of_every_cached_abstraction(dies):
    """The XCD-contiguous order's queries, abstracted by one cache after each other, with the grid and
    programs pinned to what the hook computes: every abstraction stays satisfiable."""
    fn = static_check(CONTIGUOUS, H1)
    ctx = z3.Context()
    domain = Domain.make("int", H1, 2 ** 31 - 1, ctx)
    prover = Prover(fn, H1, CONTIGUOUS, {"NUM_XCDS": dies}, domain, Budget(10 ** 9, math.inf), {})
    a, b = prover.translate("pid_a", frozenset()), prover.translate("pid_b", frozenset())
    cache = products.ProductAbstraction(ctx)
    same = [x == y for x, y in zip(a.outputs, b.outputs)]
    cache.abstract([*domain.constraints, *a.bounds, *b.bounds, a.pid < b.pid, *same], prover.known())
    for total, pids in [(37, (5, 36)), (16, (0, 15)), (1000, (999, 3)), (dies + 1, (dies, 0))]:
        runs = [evaluate_program(fn, H1, {"NUM_XCDS": dies}, (total,), p) for p in pids]
        pinned = [domain.extents[0] == total]
        for copy, run in zip((a, b), runs):
            pinned += [copy.pid == run.pid, *[o == v for o, v in zip(copy.outputs, run.logical)]]
        solver = z3.Solver(ctx=ctx)
        solver.add(*cache.abstract([*domain.constraints, *a.bounds, *b.bounds, *pinned], prover.known()))
        assert solver.check() == z3.sat, (total, pids)


def test_a_near_miss_is_refuted_after_the_bijection_of_its_shape_is_proven():
    proven = prove_bijective(CONTIGUOUS, H1, die_counts=(8, 16), time_limit_s=2.0, in_child=False)
    assert proven.status == "proven", proven.message
    assert TAIL_OFF_BY_ONE != CONTIGUOUS
    refuted = prove_bijective(TAIL_OFF_BY_ONE, H1, die_counts=(8, 16), time_limit_s=2.0, in_child=False)
    assert refuted.status == "counterexample", refuted.message


def test_the_cached_division_facts_are_the_fresh_ones():
    from swizzleperf.validation.proofs.facts import nested_division_facts

    source = FAMILIES["swizzled_head_first"](H3, group=2)
    fn = static_check(source, H3)
    ctx = z3.Context()
    domain = Domain.make("int", H3, 2 ** 31 - 1, ctx)
    prover = Prover(fn, H3, source, {"NUM_XCDS": 8}, domain, Budget(10 ** 9, math.inf), {})
    a, b = prover.translate("pid_a", frozenset()), prover.translate("pid_b", frozenset())
    cache = products.ProductAbstraction(ctx)
    queries = [[*domain.constraints, *a.bounds, z3.Or(*domain.outside(a.outputs))],
               [*domain.constraints, *a.bounds, *b.bounds, a.pid < b.pid,
                *[x == y for x, y in zip(a.outputs, b.outputs)]]]
    for formulas in queries + queries:
        fresh = nested_division_facts(formulas)
        assert fresh and ids(cache.division_facts(formulas)) == ids(fresh)


def test_a_computed_factor_is_guessed_at_the_positive_sizes_only():
    """A factor interval arithmetic does not bound (`tall`) is tried at 1..N (N: the largest numeral); 0 is the
    zero theorem's, and every guess is a theorem, so a real model satisfies them all."""
    ctx = z3.Context()
    t, q, y = (z3.Int(n, ctx) for n in ("t", "q", "y"))
    tall = t - (q - 1) * 8
    out = products.ProductAbstraction(ctx).abstract([tall * y > 3], {})
    guessed = [f for f in out if z3.is_implies(f) and z3.is_eq(f.arg(0)) and f.arg(0).arg(0).eq(tall)]
    assert sorted(f.arg(0).arg(1).as_long() for f in guessed) == list(range(1, 9))
    solver = z3.Solver(ctx=ctx)
    solver.add(*[f for f in out[1:]], t == 13, q == 2, y == 5)
    assert solver.check() == z3.sat
