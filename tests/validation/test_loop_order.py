"""Loop-order hooks (issue 16): a permutation of the steps for every trip count and local tile."""

import pytest

from swizzleperf.errors import RemapRejected
from swizzleperf.remaps.loop_orders import bind_local_tile
from swizzleperf.validation.loop_order import LOCAL_TILES, LoopOrderSignature, check_loop_order

SIG = LoopOrderSignature("kv_order", "step", "n_steps", "local_tile", ("NUM_XCDS",))
HOOK = "@triton.jit\ndef kv_order(step, n_steps, local_tile, NUM_XCDS: tl.constexpr):\n    {}\n"
CYCLIC = HOOK.format("return step")
SAWTOOTH = HOOK.format("return tl.where(local_tile % 2 == 0, step, n_steps - 1 - step)")
TRIPS = [16, 2048]  # what a kernel's sizes reach; the check adds 1, 2, primes and ~1M


def check(source: str):
    return check_loop_order(source, SIG, TRIPS, 1, {"NUM_XCDS": 1})


@pytest.mark.parametrize("source", [CYCLIC, SAWTOOTH])
def test_cyclic_and_sawtooth_permute_the_steps_for_every_trip_count(source):
    report = check(source)
    assert report.ok and report.local_tiles == list(LOCAL_TILES)
    assert report.every_tile.status == "proven" and all(c.proof is None for c in report.checks)  # one proof for all
    assert report.message == ("a permutation of the steps for every local tile and every trip count up to "
                              "2,147,483,647 (z3); sampled on local tiles 0-7")


@pytest.mark.parametrize("condition,tile", [
    ("local_tile == 9", 9), ("local_tile >= 8", 8), ("local_tile % 16 == 12", 12), ("local_tile >= 1000", 1000)])
def test_a_hook_that_breaks_only_past_the_sampled_local_tiles_is_refuted_by_the_proof(condition, tile):
    """The sampled tiles 0-7 all pass; the proof over every local tile names the one that does not."""
    report = check(HOOK.format(f"return tl.where({condition}, 0, step)"))
    assert all(c.ok for c in report.checks) and report.every_tile.status == "counterexample"
    assert not report.ok
    assert report.message.startswith(f"with local_tile = {tile}: collision with ")
    assert report.message.endswith("(z3, over every local tile)")


def test_a_hook_that_folds_a_block_twice_on_some_local_tiles_is_caught_there():
    report = check(HOOK.format("return tl.where(local_tile % 4 == 3, step // 2, step)"))
    assert not report.ok and report.local_tiles == [0, 1, 2, 3]  # stops at the first local tile that fails
    assert report.message == ("with local_tile = 3: grid (16,): steps 0 and 1 both map to 0; logical 8 is never "
                              "produced (8 of 16 logical ids missing)")


def test_a_block_past_the_scan_is_out_of_range():
    report = check(HOOK.format("return n_steps - step"))
    assert report.message.startswith("with local_tile = 0: grid (16,): step 0 maps to 16, outside the grid")


def test_local_tile_is_bound_by_rewriting_the_syntax_tree():
    assert bind_local_tile(SAWTOOTH, SIG, 3) == (
        "@triton.jit\ndef kv_order(step, n_steps, NUM_XCDS: tl.constexpr):\n    local_tile = 3\n"
        "    return tl.where(local_tile % 2 == 0, step, n_steps - 1 - step)\n")


@pytest.mark.parametrize("source,reason", [
    ("@triton.jit\ndef kv_order(step, n_steps, NUM_XCDS: tl.constexpr):\n    return step\n",
     "wrong parameters (step, n_steps, NUM_XCDS): the signature must be exactly `def kv_order(step, n_steps, "
     "local_tile, NUM_XCDS: tl.constexpr)`"),
    ("def kv_order(step, n_steps, local_tile, NUM_XCDS: tl.constexpr):\n    return step\n",
     "kv_order() must be decorated with @triton.jit"),
    ("import os\n" + CYCLIC, "imports are not allowed"),
    (HOOK.format("return open('x')"), "open"),
])
def test_text_outside_the_hook_subset_is_rejected_with_its_reason(source, reason):
    with pytest.raises(RemapRejected) as exc:
        check(source)
    assert exc.value.stage == "static" and reason in exc.value.reason
