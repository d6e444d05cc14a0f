"""Splitting a hook at two values (swizzleperf.validation.proofs.split) and the product theorems of the linear
abstraction (swizzleperf.validation.proofs.products): what they prove, and near misses they must never prove."""

from __future__ import annotations

import math
import textwrap

import pytest

z3 = pytest.importorskip("z3")

from swizzleperf.kernel.contract import HookSignature  # noqa: E402
from swizzleperf.remaps.check import static_check  # noqa: E402
from swizzleperf.remaps.families import FAMILIES  # noqa: E402
from swizzleperf.validation.proofs.concrete import evaluate_program  # noqa: E402
from swizzleperf.validation.proofs.encoding import Domain  # noqa: E402
from swizzleperf.validation.proofs.entry import prove_bijective  # noqa: E402
from swizzleperf.validation.proofs.products import linearize_products  # noqa: E402
from swizzleperf.validation.proofs.queries import Prover  # noqa: E402
from swizzleperf.validation.proofs.split import split  # noqa: E402
from swizzleperf.validation.proofs.z3_call import Budget  # noqa: E402

H1 = HookSignature("swizzle", "pid", ("num_pids",), ("NUM_XCDS",))
H3 = HookSignature("swizzle", "pid", ("num_q_blocks", "batch_size", "num_heads"), ("NUM_XCDS",))


def hook(signature: HookSignature, body: str) -> str:
    return f"@triton.jit\n{signature.render()}:\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"


BLOCK_FIRST = FAMILIES["swizzled_block_first"](H3, group=2, dies=8)


def test_block_first_splits_at_the_q_block_and_the_position_in_it():
    parts = split(static_check(BLOCK_FIRST, H3), H3)
    assert (parts.outer, parts.inner) == ("block", "position")
    assert parts.prefix[1].grid_params == ("num_q_blocks", "units")
    assert parts.rest[1].grid_params == ("batch_size", "num_heads")
    assert "return block, position" in parts.prefix[0] and "position = pid" in parts.rest[0]


def test_block_first_is_proven_through_the_split():
    verdict = prove_bijective(BLOCK_FIRST, H3, time_limit_s=10.0, in_child=False)
    assert verdict.status == "proven", verdict.message
    assert verdict.method.startswith("split at `block`, `position`") and "through `unit`" in verdict.method


@pytest.mark.parametrize("body", [
    # the rest reads the q block: no split (the proof is asked whole)
    """
    units = batch_size * num_heads
    block = pid // units
    position = pid % units
    return block, (position + block) // num_heads % batch_size, position % num_heads
    """,
    # the prefix reads a trailing extent by itself: no split
    """
    units = batch_size * num_heads
    block = pid // units
    position = pid % units + 0 * num_heads
    return block, position // num_heads, position % num_heads
    """,
])
def test_no_split_where_the_rest_reads_the_first_value_or_the_prefix_an_extent(body):
    source = hook(H3, body)
    assert split(static_check(source, H3), H3) is None


NEAR_MISSES = {
    "rest collides": """
    units = batch_size * num_heads
    block = pid // units
    position = pid % units
    return block, position // num_heads, position % batch_size
    """,
    "prefix leaves the grid": """
    units = batch_size * num_heads
    block = (pid + 1) // units
    position = pid % units
    return block, position // num_heads, position % num_heads
    """,
    "prefix collides": """
    units = batch_size * num_heads
    block = pid // units
    position = pid % units // 2 * 2
    return block, position // num_heads, position % num_heads
    """,
    "round order collides": BLOCK_FIRST.replace("(position // 8) % 2", "(position // 8) % 2 // 2"),
}


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_near_misses_of_a_split_hook_are_refuted_never_proven(name):
    body = NEAR_MISSES[name]
    source = body if body.startswith("@triton.jit") else hook(H3, body)
    verdict = prove_bijective(source, H3, die_counts=(8,), time_limit_s=5.0, in_child=False)
    assert verdict.status != "proven", verdict.message
    if name != "round order collides":  # the whole hook's collision is beyond the budget: unknown, never proven
        assert verdict.status == "counterexample", verdict.message


def test_the_round_order_near_miss_is_the_family_with_one_change():
    assert NEAR_MISSES["round order collides"].count("% 2 // 2") == 1


XCD_WRONG_TALL = hook(H1, """
    count = num_pids
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    q = (count - 1) // NUM_XCDS + 1
    tall = count - (q - 1) * NUM_XCDS + 1
    if xcd < tall:
        lid = xcd * q + local
    else:
        lid = tall * q + (xcd - tall) * (q - 1) + local
    return lid
""")


def test_an_xcd_order_with_one_die_too_many_tall_is_refuted():
    verdict = prove_bijective(XCD_WRONG_TALL, H1, die_counts=(8,), time_limit_s=5.0, in_child=False)
    assert verdict.status == "counterexample", verdict.message


def test_the_xcd_order_is_proven_at_sixteen_dies_within_a_second_of_work():
    verdict = prove_bijective(FAMILIES["xcd_contiguous"](H1), H1, die_counts=(16,), time_limit_s=1.0, in_child=False)
    assert verdict.status == "proven", verdict.message


@pytest.mark.parametrize("source", [FAMILIES["xcd_contiguous"](H1), XCD_WRONG_TALL])
def test_every_real_model_is_a_model_of_the_product_abstraction(source):
    """Pinned to values the hook really computes (colliding ones for the wrong order), the abstraction
    with its product theorems must stay satisfiable: an "unsat" from it would prove something false."""
    fn = static_check(source, H1)
    ctx = z3.Context()
    domain = Domain.make("int", H1, 2 ** 31 - 1, ctx)
    prover = Prover(fn, H1, source, {"NUM_XCDS": 8}, domain, Budget(10 ** 9, math.inf), {})
    a, b = prover.translate("pid_a", frozenset()), prover.translate("pid_b", frozenset())
    for grid, pids in [((13,), (0, 12)), ((61,), (7, 60)), ((8,), (3, 4)), ((1,), (0, 0)), ((20,), (19, 18))]:
        runs = [evaluate_program(fn, H1, {"NUM_XCDS": 8}, grid, p) for p in pids]
        pinned = [domain.extents[0] == grid[0]]
        for copy, run in zip((a, b), runs):
            pinned += [copy.pid == run.pid, *[o == v for o, v in zip(copy.outputs, run.logical)]]
        solver = z3.Solver(ctx=ctx)
        solver.add(*linearize_products([*domain.constraints, *a.bounds, *b.bounds, *pinned], prover.known()))
        assert solver.check() == z3.sat, (grid, pids)
