"""Proof by composition: a hook cut into an order (a 1D hook of the program count) and a raster."""

from __future__ import annotations

import pytest

pytest.importorskip("z3")

from swizzleperf.kernel.contract import HookSignature  # noqa: E402
from swizzleperf.remaps.check import static_check  # noqa: E402
from swizzleperf.remaps.families import FamilyInstance  # noqa: E402
from swizzleperf.validation.proofs.compose import cuts  # noqa: E402
from swizzleperf.validation.proofs.entry import prove_bijective  # noqa: E402

HOOK = HookSignature("swizzle", "pid", ("num_pid_m", "num_pid_n"), ("NUM_XCDS",))
HOOK_3D = HookSignature("swizzle", "pid", ("num_q_blocks", "batch_size", "num_heads"), ("NUM_XCDS",))


def _hook(*lines: str, hook: HookSignature = HOOK) -> str:
    return "\n".join(["@triton.jit", f"{hook.render()}:", *(f"    {line}" for line in lines)]) + "\n"


def _cuts(source: str, hook: HookSignature = HOOK):
    return cuts(static_check(source, hook), hook)


def test_an_xcd_order_under_a_group_m_raster_cuts_at_the_linear_id():
    source = FamilyInstance("xcd_grouped", (("group_m", 8),)).render(HOOK)
    (halves,) = _cuts(source)
    order, order_hook = halves.order
    raster, raster_hook = halves.raster
    assert halves.through == "lid"
    assert order_hook.grid_params == ("count",) and "num_pid" not in order and order.rstrip().endswith("return lid")
    # the raster gets the linear id as its program id, and none of the order's names (both have a `local`)
    assert raster_hook == HOOK and "    lid = pid\n" in raster and "xcd" not in raster and "tall" not in raster


def test_no_cut_where_the_raster_reads_the_program_id_or_the_order_reads_an_extent_with_the_program_id():
    reads_pid = _hook("lid = (pid + 1) % (num_pid_m * num_pid_n)", "return lid // num_pid_n, pid % num_pid_n")
    assert _cuts(reads_pid) == []
    order_reads_extent = _hook("lid = (pid + num_pid_n) % (num_pid_m * num_pid_n)",  # not a size: it reads pid
                               "return lid // num_pid_n, lid % num_pid_n")
    assert _cuts(order_reads_extent) == []
    early_return = _hook("lid = pid", "if lid < 0:", "    return 0, 0", "return lid // num_pid_n, lid % num_pid_n")
    assert _cuts(early_return) == []


def test_the_chunked_xcd_order_under_a_group_m_raster_is_proven_in_halves():
    source = FamilyInstance("xcd_chunked_grouped", (("chunk", 4), ("group_m", 8))).render(HOOK)
    verdict = prove_bijective(source, HOOK, die_counts=(8,), in_child=False, time_limit_s=6.0)
    assert verdict.status == "proven", verdict.message
    assert verdict.method.startswith("in two halves through `lid`") and "two halves" in verdict.message


def test_an_order_that_leaves_the_grid_on_odd_counts_is_not_proven_in_halves_and_is_refuted_whole():
    # pid ^ 1 swaps neighbours: a bijection of [0, count) only when count is even
    source = _hook("count = num_pid_m * num_pid_n", "lid = pid ^ 1", "return lid // num_pid_n, lid % num_pid_n")
    assert [h.through for h in _cuts(source)] == ["lid"]
    verdict = prove_bijective(source, HOOK, die_counts=(1,), in_child=False, time_limit_s=4.0)
    assert verdict.status == "counterexample" and verdict.method is None
    grid = verdict.counterexample.grid
    assert (grid[0] * grid[1]) % 2 == 1


def test_an_order_that_reads_a_size_of_the_extents_takes_it_as_a_size_proven_in_range_separately():
    swizzled = FamilyInstance("swizzled_head_first", (("group", 2),)).render(HOOK_3D)
    (halves,) = _cuts(swizzled, HOOK_3D)
    order, order_hook = halves.order
    assert order_hook.grid_params == ("count",) and order_hook.sizes == ("cluster",)
    assert order.startswith("@triton.jit\ndef swizzle(pid, count, cluster, NUM_XCDS: tl.constexpr):")
    assert "num_q_blocks" not in order and "min(" not in order
    sizes, sizes_hook = halves.sizes
    assert sizes_hook == HOOK_3D and "cluster = min(2, batch_size * num_heads) * num_q_blocks" in sizes
    verdict = prove_bijective(sizes, sizes_hook, die_counts=(8,), in_child=False, time_limit_s=4.0)
    assert verdict.status == "proven", verdict.message


def test_a_size_that_is_zero_on_some_grid_is_refuted_by_its_range_hook():
    source = _hook("count = num_pid_m * num_pid_n", "step = num_pid_n - 1", "lid = pid",
                   "if step > 0:", "    lid = (pid + step) % count", "return lid // num_pid_n, lid % num_pid_n")
    (halves,) = _cuts(source)
    assert halves.order[1].sizes == ("step",)
    sizes, sizes_hook = halves.sizes
    verdict = prove_bijective(sizes, sizes_hook, die_counts=(1,), in_child=False, time_limit_s=4.0)
    assert verdict.status == "counterexample" and verdict.counterexample.grid[1] == 1  # step = 0
    whole = prove_bijective(source, HOOK, die_counts=(1,), in_child=False, time_limit_s=4.0)
    assert whole.status != "counterexample" and whole.method is None  # a bijection, but not proven in halves
