"""One z3 query: a fresh context, two strategies in turn, and the model as plain integers.

z3's nonlinear integer arithmetic is erratic: the same formula can take 0.05 s or time out
depending on the strategy, and on everything created before it in the same context (term ids
steer its heuristics). So each query is copied into a fresh context, which makes the answer
depend on the formula alone, and runs with three strategies in turn, each for a share of its
time: the default solver without Groebner bases (the GROUP_M raster's injectivity: 1.6 s with
them, 0.3 s without), equation solving then the SMT core, and z3's qfnia tactic. (Each of the
later ones decides a few queries the first cannot.)
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import z3

SHARES = (0.5, 0.5, 1.0)  # of the time left when each strategy starts


@dataclass
class Answer:
    status: str  # "unsat", "sat" or "unknown"
    model: dict[str, int]  # the values of the asked-for constants, when sat
    why: str = ""


class Cancel:
    """Lets another thread stop the queries of a proof that is no longer needed."""

    def __init__(self):
        self.stopped = False
        self._lock = threading.Lock()
        self._running: set[z3.Context] = set()

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            for ctx in self._running:
                ctx.interrupt()

    def enter(self, ctx: z3.Context) -> bool:
        with self._lock:
            if not self.stopped:
                self._running.add(ctx)
            return not self.stopped

    def leave(self, ctx: z3.Context) -> None:
        with self._lock:
            self._running.discard(ctx)


def _strategies(ctx: z3.Context):
    def then(*names: str) -> z3.Solver:
        return z3.Then(*[z3.Tactic(n, ctx) for n in names], ctx=ctx).solver()
    plain = z3.Solver(ctx=ctx)
    plain.set("arith.nl.grobner", False)  # Groebner bases only slow the division-by-extent queries down
    yield plain
    yield then("simplify", "propagate-values", "solve-eqs", "smt")
    yield then("simplify", "propagate-values", "solve-eqs", "purify-arith", "qfnia")


def _value(model: z3.ModelRef, term: z3.ExprRef) -> int:
    value = model.eval(term, model_completion=True)
    return value.as_signed_long() if z3.is_bv(term) else value.as_long()


def solve(formulas: list, wanted: list, seconds: float, cancel: Cancel | None = None) -> Answer:
    """Check the conjunction within `seconds`; on sat, the values of the constants `wanted`, by name."""
    ctx = z3.Context()
    moved = [f.translate(ctx) for f in formulas]
    deadline = time.monotonic() + seconds
    cancel = cancel or Cancel()
    if not cancel.enter(ctx):
        return Answer("unknown", {}, "cancelled")
    try:
        why = "no time"
        for k, solver in enumerate(_strategies(ctx)):
            left = deadline - time.monotonic()
            if left <= 0.001 or cancel.stopped:
                break
            solver.set("timeout", max(1, int(1000 * left * SHARES[k])))
            solver.add(*moved)
            result = solver.check()
            if result == z3.unsat:
                return Answer("unsat", {})
            if result == z3.sat:
                model = solver.model()
                return Answer("sat", {str(t): _value(model, t.translate(ctx)) for t in wanted})
            why = solver.reason_unknown()
        return Answer("unknown", {}, "cancelled" if cancel.stopped else why)
    finally:
        cancel.leave(ctx)
