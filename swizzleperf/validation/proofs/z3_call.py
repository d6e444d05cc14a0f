"""One z3 query: a fresh context, restarts with several strategies, and the model as plain integers.

z3's nonlinear integer arithmetic is erratic: the same formula can take 0.05 s or time out
depending on the strategy, the random seed, facts that are true but not needed, and on
everything created before it in the same context (term ids steer its heuristics). So each
query is copied into a fresh context, which makes the answer depend on the formula alone, and
runs as a sequence of restarts (STRATEGIES): short runs of the default solver without Groebner
bases (the GROUP_M raster's injectivity: 1.6 s with them, 0.3 s without) under different
seeds, with and without the hints (facts.py), then equation solving with the SMT core, then
z3's qfnia tactic. Restarts are the usual cure for heavy-tailed solver times. Each query's
budget is counted work (z3's rlimit), not seconds: the same verdict under any load, as long as
the process runs one query at a time (z3's counts drift when two contexts solve in parallel).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import z3
from z3 import z3core

# z3 resource units ("rlimit") per second of one core on the prover's queries (measured: 3-10 M/s
# on the family proofs' queries, unloaded). Budgets are counted in these units, so that a verdict
# is the same on a loaded machine; seconds only convert a user's time limit into units.
WORK_PER_S = 5_000_000


@dataclass
class Budget:
    """What a proof may still spend: z3 resource units, and a wall-clock backstop (time.monotonic)
    far above what that work takes, for a solver that ignores its resource limit."""

    work: int
    deadline: float


@dataclass
class Answer:
    status: str  # "unsat", "sat" or "unknown"
    model: dict[str, int]  # the values of the asked-for constants, when sat
    why: str = ""
    work: int = 0  # z3 resource units used


def _plain(ctx: z3.Context, seed: int) -> z3.Solver:
    solver = z3.Solver(ctx=ctx)
    solver.set("arith.nl.grobner", False)  # Groebner bases only slow the division-by-extent queries down
    solver.set("random_seed", seed)
    return solver


def _then(ctx: z3.Context, *names: str) -> z3.Solver:
    return z3.Then(*[z3.Tactic(n, ctx) for n in names], ctx=ctx).solver()


def _seed_zero(ctx: z3.Context) -> z3.Solver:
    return _plain(ctx, 0)


# (share of the time left, with the hints?, solver): short restarts first, since one query's time
# varies tenfold with the seed and with the hints; then the longer strategies.
STRATEGIES = (
    (0.15, True, _seed_zero),
    (0.2, False, lambda ctx: _plain(ctx, 0)),
    (0.25, True, lambda ctx: _then(ctx, "simplify", "propagate-values", "solve-eqs", "smt")),
    (0.3, False, lambda ctx: _plain(ctx, 1)),
    (0.5, True, lambda ctx: _plain(ctx, 2)),
    (1.0, True, lambda ctx: _then(ctx, "simplify", "propagate-values", "solve-eqs", "purify-arith", "qfnia")),
)

# The linear abstractions (linear.py, products.py) are decided by the plain solver, steadily: one run.
ABSTRACTION_STRATEGIES = ((1.0, True, _seed_zero),)

# A stage of query (1) about the grid alone (its condition names no program id: the range of a product of
# extents) in one run of equation solving with the SMT core, before the plain solver: on the family bench
# that run decided all 227 such stages in 0.8 s CPU, where the plain solver's short run left 20 undecided
# (at its whole share each) and took 2.5 s. Stages about a program take 1.6x longer in it (rejected there).
GRID_FIRST_STRATEGIES = ((1.0, True, STRATEGIES[2][2]),)
SHORT_RUNS = {False: ABSTRACTION_STRATEGIES, True: GRID_FIRST_STRATEGIES}  # by "about the grid alone"

# The product abstraction's queries (linear but for division and remainder, and the uninterpreted products;
# products.py) in one run of purify-arith, then the SMT core: on the family bench it decided all 582 of them,
# as the plain solver did, in 7.5 s CPU instead of 9.8 s and within 53 % of a query's budget instead of 83 %
# (the block-first whole rounds at 8 dies: 19 K units instead of 1.0 M; the chunked orders' 1.2x slower).
PRODUCTS_STRATEGIES = ((1.0, True, lambda ctx: _then(ctx, "simplify", "purify-arith", "smt")),)

# STRATEGIES after its first run, for a query already asked in one run of ABSTRACTION_STRATEGIES with at least
# that run's work that came back undecided: that run again (the same solver, seed and hints on the same formulas,
# in a fresh context) would be undecided again, and only spend its share.
AFTER_SHORT_RUN = STRATEGIES[1:]


def _value(model: z3.ModelRef, term: z3.ExprRef) -> int:
    value = model.eval(term, model_completion=True)
    return value.as_signed_long() if z3.is_bv(term) else value.as_long()


def _work(solver: z3.Solver) -> int:
    """z3's resource count of the solver's context so far (cumulative over the context's checks)."""
    stats = solver.statistics()
    return int(stats.get_key_value("rlimit count")) if "rlimit count" in stats.keys() else 0


def _translate(formulas: list, ctx: z3.Context) -> z3.AstVector:
    """The formulas in `ctx`, copied in one call: one z3 translation walks their shared terms once."""
    if not formulas:
        return z3.AstVector(ctx=ctx)
    vector = z3.AstVector(ctx=formulas[0].ctx)
    for f in formulas:
        vector.push(f)
    return vector.translate(ctx)


def _assert(solver: z3.Solver, vector: z3.AstVector, count: int) -> None:
    """Assert the first `count` formulas of `vector` straight from it: Solver.add would wrap each in Python
    and check its sort again (~4 K formulas a family proof, 0.05 s)."""
    ctx = solver.ctx.ref()
    for i in range(count):
        z3core.Z3_solver_assert(ctx, solver.solver, z3core.Z3_ast_vector_get(ctx, vector.vector, i))


def solve(formulas: list, wanted: list, work: int, hints: list = (), backstop_s: float = 60.0,
          strategies=STRATEGIES) -> Answer:
    """Check the conjunction within `work` z3 resource units (a count, so the answer does not
    depend on the machine's load); `backstop_s` is a wall-clock limit far above that. On sat,
    the values of the constants `wanted`, by name. `hints` are theorems (true of every model),
    given to some strategies only. Answer.work is what the query used."""
    ctx = z3.Context()
    moved = _translate([*formulas, *hints], ctx)
    deadline = time.monotonic() + backstop_s
    used, why = 0, "no work left"
    for share, with_hints, make in strategies:
        if work - used < 1000 or time.monotonic() >= deadline:
            break
        if not with_hints and not hints:
            continue  # the same query as a strategy with them
        solver = make(ctx)
        solver.set("rlimit", max(1000, int((work - used) * share)))
        solver.set("timeout", max(1, int(1000 * (deadline - time.monotonic()))))
        _assert(solver, moved, len(formulas) + (len(hints) if with_hints else 0))
        result = solver.check()
        used = _work(solver)
        if result == z3.unsat:
            return Answer("unsat", {}, work=used)
        if result == z3.sat:
            model = solver.model()
            return Answer("sat", {str(t): _value(model, t.translate(ctx)) for t in wanted}, work=used)
        why = solver.reason_unknown()
    return Answer("unknown", {}, why, work=max(used, 1))
