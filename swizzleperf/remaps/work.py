"""Counted work: what evaluating a remap costs, from its syntax tree, before anything runs.

A wall-clock limit gives different verdicts under different load (issue 13: one candidate kept
`check` busy 143 s, and timed out at a different stage on a busy machine). So each evaluation is
bounded by a count instead: the hook's syntax nodes, each multiplied by the trip counts of the
loops around it, times the programs it is evaluated for. A candidate over the budget is
rejected with that number before it runs; the wall-clock limits stay as a backstop far above
what the budget admits. The static check already caps loops (LOOP_TRIP_CAP body executions per
program) and size (MAX_NODES), so the count is small for every remap a person would write.
"""

from __future__ import annotations

import ast
import math

from swizzleperf.errors import RemapRejected
from swizzleperf.remaps.check import LOOP_TRIP_CAP, hook_body, trip_count

# Budgets, in node evaluations. The sampled bijectivity check evaluates every program of every
# grid at once on numpy lanes (~1-2 ns per node and program; the families need 1-2e8 on the 1D
# and 2D grids); the CPU correctness check runs each program through Triton's interpreter
# (tens of microseconds per node; the families need a few thousand).
BIJECTIVITY_WORK = 5_000_000_000
INTERPRETER_WORK = 200_000
# A loop-order hook runs at every K/V step of every tile, a count the kernel sets (attention_persistent's
# check sizes make ~70 calls a seed), so it is bounded per call: the sawtooth needs 18 node evaluations,
# and 1,000 a call keeps a check's loop orders within about the remaps' interpreter budget.
LOOP_ORDER_CALL_WORK = 1_000


def _trips(loop: ast.For, constexprs: dict[str, int]) -> int:
    """A loop's trip count: exact for literal or constexpr-name bounds, else the per-program cap."""
    bounds = []
    for node in loop.iter.args:
        sign = -1 if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) else 1
        node = node.operand if sign < 0 else node
        if isinstance(node, ast.Constant) and type(node.value) is int:
            bounds.append(sign * node.value)
        elif isinstance(node, ast.Name) and node.id in constexprs:
            bounds.append(sign * int(constexprs[node.id]))
        else:
            return LOOP_TRIP_CAP
    return min(trip_count(bounds), LOOP_TRIP_CAP) if bounds else LOOP_TRIP_CAP


def per_program(fn: ast.FunctionDef, constexprs: dict[str, int]) -> int:
    """Node evaluations of one program: every statement and expression node, times the loops
    around it (the product capped at LOOP_TRIP_CAP, as the evaluator caps it; both branches of
    an `if` count)."""
    total, stack = 0, [(stmt, 1) for stmt in hook_body(fn)]
    while stack:
        node, times = stack.pop()
        total += times if isinstance(node, (ast.stmt, ast.expr)) else 0
        if isinstance(node, ast.For):
            inner = min(times * max(1, _trips(node, constexprs)), LOOP_TRIP_CAP)
            stack.extend((child, inner) for child in node.body)
            stack.extend((child, times) for child in ast.iter_child_nodes(node) if child not in node.body)
        else:
            stack.extend((child, times) for child in ast.iter_child_nodes(node))
    return total


def require_work(fn: ast.FunctionDef, constexprs: dict[str, int], programs: int, budget: int, stage: str,
                 what: str) -> int:
    """The counted work of evaluating the hook for `programs` programs; RemapRejected(stage) past `budget`."""
    nodes = per_program(fn, constexprs)
    work = nodes * programs
    if work > budget:
        raise RemapRejected(stage, f"counted work {work:,} ({nodes:,} node evaluations per program x {programs:,} "
                                   f"programs of {what}) exceeds the budget of {budget:,}: simplify the remap "
                                   f"(fewer operations, shorter loops)")
    return work


def programs_of(grids: list[tuple[int, ...]]) -> int:
    return sum(math.prod(g) for g in grids)
