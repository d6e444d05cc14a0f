"""The z3 queries that prove a hook bijective for one die count in one encoding, and what their
models mean.

1. Soundness of the encoding, and range: is there a grid and a program for which some
   operation is undefined, or the result lies outside the grid? In the integer encoding also:
   some intermediate leaves its integer type (int32 would wrap), or some dividend is negative
   (where the encoding used Euclidean division). Asked statement by statement, in program
   order. A model is re-evaluated exactly: an undefined operation or a result out of range is a
   counterexample; a negative dividend switches that division to the truncating encoding and
   starts again; an overflow ends this attempt ("overflow": the caller shrinks the domain).
2. Injectivity, once (1) holds: two programs a < b of one grid with equal results.
   Unsatisfiable means one-to-one; with (1), the hook maps [0, total) onto the grid.

In the integer encoding, if (1) holds then no program of any grid in the domain meets any of
those conditions, so mathematical integers equal Triton's values on every path taken (by
induction over the operations in evaluation order: the first one where they would differ is a
model of (1)). Both queries go through cuts (swizzleperf.validation.proofs.cuts) when the whole formula
is too hard for z3. Query (2) asks first the linear abstraction (swizzleperf.validation.proofs.linear) of
itself, with what (1) proved of both programs as facts (no undefined operation, results in the
grid: true of every program once (1) holds); only its "unsat" counts. It decides the GROUP_M
raster's injectivity in ~30 K z3 units where the exact query takes 0.8-5 M. Where it does not
decide, and for each stage of query (1), the abstraction with product theorems
(swizzleperf.validation.proofs.products) is asked once, in the first round: it proves the XCD-contiguous
order's injectivity in 0.3-0.6 M units where the exact query takes 1.5-3 M. A stage of query (1)
is asked exactly in one short solver run before that: on the family bench this halved the work of
the XCD-contiguous orders, whose 16-die tail the abstraction does not decide.
"""

from __future__ import annotations

import ast
import time

import z3

from swizzleperf.kernel.contract import HookSignature
from swizzleperf.validation.proofs import concrete
from swizzleperf.validation.proofs.cuts import (
    Copy,
    Cut,
    determines,
    generalize_products,
    lemma_candidates,
    live_after,
    make_cut,
    mentions,
    mirror,
    statement_index,
)
from swizzleperf.validation.proofs.encoding import Domain
from swizzleperf.validation.proofs.linear import linearize
from swizzleperf.validation.proofs.outcome import Outcome, Timeout
from swizzleperf.validation.proofs.products import ProductAbstraction
from swizzleperf.validation.proofs.symexec import Executor
from swizzleperf.validation.proofs.verdict import Counterexample
from swizzleperf.validation.proofs.z3_call import (
    ABSTRACTION_STRATEGIES,
    AFTER_SHORT_RUN,
    PRODUCTS_STRATEGIES,
    SHORT_RUNS,
    STRATEGIES,
    WORK_PER_S,
    Budget,
    solve,
)

MAX_REFINEMENTS = 32  # divisions switched to the truncating encoding, at most one restart each
FIRST_SLICE = WORK_PER_S // 4  # a query's work in the first round (z3 resource units); it doubles every round
MIN_WORK = 1000  # less than this left is no budget at all
ABSTRACTION_WEIGHT = 0.1  # of a round's slice: the abstraction decides fast (~30 K units) or not at all
PRODUCTS_WEIGHT = 0.5  # of a round's slice: the abstraction with product theorems takes 0.1-2 M units
EXACT_FIRST_WEIGHT = STRATEGIES[0][0]  # 0.15 of the first round's slice: a stage of query (1) asked exactly, one run
UNDECIDED = object()  # a query z3 could not decide in this round's slice


class Prover:
    """Proves one hook for one die count in one encoding, within a Budget of z3 work.

    The proof runs in rounds. In each, every query gets the round's slice of work (doubled each
    round) and the cheap formulations come first: through cuts, then the whole formula. A round
    that leaves a query undecided is repeated with twice the work; what was proven stays proven.
    """

    def __init__(self, fn: ast.FunctionDef, hook: HookSignature, source: str, constexprs: dict[str, int],
                 domain: Domain, budget: Budget, proven: dict, leanings: dict | None = None):
        self.fn, self.hook, self.constexprs, self.domain = fn, hook, constexprs, domain
        self.leanings = {} if leanings is None else leanings  # stage_key -> "abstract": shared by a hook's die counts
        self.lines = source.splitlines()
        self.budget, self.proven = budget, proven
        self.live = live_after(fn)
        self.lemmas: dict[tuple[int, ...], tuple[float, list]] = {}
        self.pids: list = []
        self.copies: dict[tuple[str, frozenset], Copy] = {}
        self.slice = FIRST_SLICE
        self.signed: frozenset = frozenset()  # divisions that need the truncating encoding (integers only)
        self.range_holds = False  # query (1) holds
        self.chained = False  # a cut of query (2) holds
        self.undecided = ""  # the last query left undecided, for the timeout's reason
        self.refuted_abstractions: dict = {}  # linear abstractions with a model (held, as `proven`)
        self.products: ProductAbstraction | None = None  # the queries' abstractions and facts (abstraction())
        self.lean = False  # a stage's short run left it to the abstraction: the later stages go there first

    def translate(self, name: str, signed: frozenset) -> Copy:
        """The hook for program `name` (cached: every round asks for the same copies)."""
        if (name, signed) not in self.copies:
            self.copies[name, signed] = self._translate(name, signed)
        return self.copies[name, signed]

    def _translate(self, name: str, signed: frozenset) -> Copy:
        pid, bounds = self.domain.program(name)
        self.pids.append(pid)
        backend = self.domain.backend(signed)
        executor = self.executor(backend, self.domain.inputs(self.hook, pid))
        outputs = executor.outputs()
        return Copy(pid, [*bounds, *self.assumptions(executor, pid)], outputs, executor.points, backend.violations)

    def executor(self, backend, inputs: dict) -> Executor:
        """The symbolic executor of one copy (a subclass may translate the hook otherwise)."""
        return Executor(self.fn, self.hook, backend, inputs, self.constexprs)

    def assumptions(self, executor: Executor, pid) -> list:
        """What a copy's program is assumed to satisfy beside lying in the grid (nothing, here)."""
        return []

    def check(self, formulas: list, what: str, weight: float = 1.0, generalize: bool = False, strategies=None):
        """Values of a model (by name), None if unsatisfiable, or UNDECIDED within `weight` times
        this round's slice. Timeout once the budget is spent or the backstop passed.
        `generalize`: the products of extents are replaced by free variables (integers only)."""
        formulas = [*self.domain.constraints, *formulas]
        if generalize:
            formulas = generalize_products(formulas, self.domain.extents, self.domain.max_programs)
        hints = self.abstraction().division_facts(formulas) if self.domain.kind == "int" else []
        return self.ask(formulas, hints, what, weight, strategies=strategies)

    def ask(self, formulas: list, hints: list, what: str, weight: float, abstraction: bool = False,
            strategies=None):
        """One z3 query (check), remembered: what is proven stays proven, an abstraction with a
        model is not asked again. `strategies`: solver.STRATEGIES unless given."""
        if self.budget.work < MIN_WORK:
            raise Timeout(self.undecided or what, "its work budget is spent")
        backstop = self.budget.deadline - time.monotonic()
        if backstop <= 0:
            raise Timeout(self.undecided or what, "the wall-clock backstop passed")
        key = tuple(sorted(f.get_id() for f in formulas))
        if key in self.proven:
            return None
        if abstraction and key in self.refuted_abstractions:
            return UNDECIDED
        answer = solve(formulas, [*self.domain.bounded, *self.pids],
                       min(self.budget.work, int(self.slice * weight)),
                       hints, backstop, strategies or (ABSTRACTION_STRATEGIES if abstraction else STRATEGIES))
        self.budget.work -= answer.work
        if answer.status == "unsat":
            self.proven[key] = formulas  # held, so that no other formula can reuse these ids
            return None
        if answer.status == "sat" and abstraction:  # a model of the abstraction says nothing, and will again
            self.refuted_abstractions[key] = formulas
            return UNDECIDED
        if answer.status == "sat":
            return answer.model
        if not abstraction:
            self.undecided = what
        return UNDECIDED

    def abstractly(self, formulas: list, what: str, weight: float = PRODUCTS_WEIGHT):
        """None if the abstraction with product theorems (swizzleperf.validation.proofs.products) of `formulas`
        is unsatisfiable, else UNDECIDED (integers only: it proves, it never refutes). Asked in the
        first round only: it decides there or not at all, and a larger slice rarely changes that."""
        if self.domain.kind != "int" or self.slice != FIRST_SLICE:
            return UNDECIDED
        abstracted = self.abstraction().abstract(formulas, self.known())
        if [f.get_id() for f in abstracted] == [f.get_id() for f in formulas]:
            return UNDECIDED  # linear already: the exact query is the same question
        return self.ask(abstracted, [], what, weight, abstraction=True, strategies=PRODUCTS_STRATEGIES)

    def abstraction(self) -> ProductAbstraction:
        if self.products is None:
            self.products = ProductAbstraction(self.domain.ctx)
        return self.products

    def known(self) -> dict[int, tuple[int, int]]:
        """Interval bounds of the inputs, by term id: every program id and extent."""
        top = self.domain.max_programs
        return {**{p.get_id(): (0, top - 1) for p in self.pids},
                **{e.get_id(): (1, top) for e in self.domain.bounded}}

    def holds(self, copy: Copy) -> list:
        """What query (1) proved of every program, once it holds: no violation, results in the grid."""
        return [z3.Not(c) for stage in self.stages(copy) for c in stage] if self.range_holds else []

    def grid_of(self, model: dict) -> tuple[int, ...]:
        return tuple(model[str(e)] for e in self.domain.extents)

    def evaluate(self, model: dict, pid: str) -> concrete.Run:
        sizes = tuple(model[str(s)] for s in self.domain.sizes)
        return concrete.evaluate_program(self.fn, self.hook, self.constexprs, self.grid_of(model), model[pid], sizes)

    def prove(self) -> Outcome:
        try:
            while True:
                outcome = None if self.range_holds else self.encoding_and_range()
                if outcome is None and self.range_holds:
                    outcome = self.injectivity()
                if outcome is not None:
                    return outcome
                self.slice *= 2
        except Timeout as exc:
            return Outcome(unknown_kind="timeout", reason=f"z3 could not decide {exc.what} within the work budget "
                                                          f"({exc.why})")

    # --- cuts ----------------------------------------------------------------------------------

    def live_terms(self, copy: Copy, index: int) -> list:
        return copy.live_terms(index, self.live[index], self.domain.is_value)

    def cut(self, copy: Copy, index: int, tag: str) -> Cut | None:
        terms = self.live_terms(copy, index)
        if not terms:
            return None
        known = {}
        if self.domain.kind == "int":  # interval lemmas from the domain's bounds
            top = self.domain.max_programs
            known = {copy.pid.get_id(): (0, top - 1),
                     **{e.get_id(): (1, top) for e in self.domain.bounded}}
        return make_cut(terms, tag, lambda ts: self.proven_lemmas(copy, ts), known)

    def proven_lemmas(self, copy: Copy, terms: list) -> list:
        """The first candidate range every term satisfies for every program (cached by term)."""
        key = tuple(t.get_id() for t in terms)  # the terms live in cached copies: ids stay unique
        if key not in self.lemmas or self.lemmas[key][0] != self.slice and not self.lemmas[key][1]:
            self.lemmas[key] = (self.slice, [])  # a failure is retried in the next round
            for lemmas in lemma_candidates(self.domain.total, self.domain.widen):
                violated = z3.Or(*[z3.Not(lemma(t)) for t in terms for lemma in lemmas])
                if self.check([*copy.bounds, violated], "a range lemma of a cut", 0.5) is None:
                    self.lemmas[key] = (self.slice, lemmas)
                    break
        return self.lemmas[key][1]

    def distinct_points(self, copy: Copy, before: int) -> list[int]:
        """Top-level points before `before` to cut at, latest first: one per distinct set of live
        values, and only where no more values are live than the hook has results (a linear id, or
        coordinates; a cut through more values rarely determines them) and the program id itself
        is not one of them (a cut there asks the whole question again)."""
        points, seen = [], []
        for point in reversed(range(before)):
            ids = [t.get_id() for t in self.live_terms(copy, point)]
            if ids and ids not in seen and len(ids) <= self.hook.ndim and copy.pid.get_id() not in ids:
                seen.append(ids)
                points.append(point)
        return points

    def cut_order(self, copy: Copy) -> list[int]:
        """Cut points for query (2): through one value first (an order, then a raster: each half
        is a problem z3 solves fast), then from the results back."""
        points = self.distinct_points(copy, len(copy.points) - 1)
        return sorted(points, key=lambda p: (len(self.live_terms(copy, p)) > 1, -p))

    # --- query 1 -------------------------------------------------------------------------------

    def encoding_and_range(self) -> Outcome | None:
        """Query (1), refined until it holds (then range_holds) or is undecided in this round (None)."""
        for _ in range(MAX_REFINEMENTS):
            copy = self.translate("pid_a", self.signed)
            model = self.first_violation(copy)
            if model is None or model is UNDECIDED:
                self.range_holds = model is None
                return None
            run = self.evaluate(model, "pid_a")
            found = concrete.undefined(run, self.constexprs)
            poison = None if found else concrete.poison_text(run, self.constexprs)
            if poison is not None:
                return Outcome(unknown_kind="unsupported", reason=poison)
            found = found or concrete.out_of_range(run, self.constexprs)
            if found is not None:
                return self.refuted(found, run)
            negative = {e.node for e in run.events if e.kind == "negative_dividend"} - self.signed
            if self.domain.kind == "int" and run.first(("overflow",)) is not None:
                return Outcome(unknown_kind="overflow", overflow_total=run.total,
                               reason=concrete.overflow_text(run, self.constexprs, self.lines))
            if self.domain.kind != "int" or not negative:
                return Outcome(unknown_kind="error", reason=f"internal: the model (grid {run.grid}, program "
                                                            f"{run.pid}) does not reproduce when evaluated")
            self.signed |= negative
        return Outcome(unknown_kind="error", reason=f"more than {MAX_REFINEMENTS} divisions take negative dividends")

    def refuted(self, found: Counterexample, *runs: concrete.Run) -> Outcome:
        """A counterexample, unless an int32 intermediate wrapped on the way to it: then the hook is
        limited by its integer range rather than wrong by design (`(G + N - 1) // N` near 2**31),
        and the caller proves it on the grids below that ("overflow", with the domain proven)."""
        wrapped = next((run for run in runs if run.first(("overflow",)) is not None), None)
        if wrapped is None:
            return Outcome(counterexample=found)
        return Outcome(unknown_kind="overflow", overflow_total=wrapped.total,
                       reason=concrete.overflow_text(wrapped, self.constexprs, self.lines))

    def stages(self, copy: Copy) -> list[list]:
        """Per top-level statement, the conditions under which it breaks; the range check last."""
        stages: list[list] = [[] for _ in self.live]
        for violation in copy.violations:
            stages[statement_index(self.fn, violation.node[0])].append(violation.condition)
        stages[-1] += self.domain.outside(copy.outputs)
        return stages

    def first_violation(self, copy: Copy):
        """A model of query (1), None when it holds, UNDECIDED when a stage is undecided."""
        what, undecided = "whether any program leaves the grid or wraps around", False
        for index, conditions in enumerate(self.stages(copy)):
            if not conditions:
                continue
            bad = z3.Or(*conditions)
            model = self.stage(copy, index, bad, what)
            if model is UNDECIDED:
                model = None if any(self.cut_holds(copy, p, bad) for p in self.distinct_points(copy, index)) else model
            if model is UNDECIDED:
                undecided = True
            elif model is not None:
                return model
        return UNDECIDED if undecided else None

    def stage(self, copy: Copy, index: int, bad, what: str):
        """One stage of query (1) (a model, None, or UNDECIDED). In the first round of the integer encoding,
        exactly in one solver run with a small share of the slice first (of the bench's stages z3 decides
        exactly, 99 % take < 0.2 M units; one about the grid alone otherwise: solver.SHORT_RUNS), then by the
        abstraction with product theorems (which decides the cluster-round sides' stages, but spends its whole
        share, 0.6 M, on the 16-die XCD-contiguous tail's); then exactly with the whole slice, less the short run
        (solver.AFTER_SHORT_RUN). A stage the short run left to the abstraction goes to it first at the next die
        counts (`leanings`), and so do this prover's later stages (`lean`: both head-first stages at 2 dies)."""
        model, key, grid = UNDECIDED, self.stage_key(index), not mentions(bad, copy.pid)
        first = self.domain.kind == "int" and self.slice == FIRST_SLICE and self.leanings.get(key) != "abstract"
        if short := first and (grid or not self.lean):
            model = self.check([*copy.bounds, bad], what, EXACT_FIRST_WEIGHT, strategies=SHORT_RUNS[grid])
        if model is UNDECIDED:
            model = self.abstractly([*self.domain.constraints, *copy.bounds, bad], what)
            if first and model is None:
                self.leanings[key], self.lean = "abstract", True
        return model if model is not UNDECIDED else self.check([*copy.bounds, bad], what,
                                                               strategies=AFTER_SHORT_RUN if short and not grid else None)

    def stage_key(self, index: int) -> tuple:
        """A stage of query (1), the same at every die count: the prover's kind and the statement."""
        return type(self).__name__, getattr(self, "side", None), self.domain.kind, index

    def cut_holds(self, copy: Copy, point: int, bad) -> bool:
        cut = self.cut(copy, point, "cut")
        return cut is not None and self.check([*copy.bounds, *cut.lemmas, cut.apply(bad)], "a stage through a cut") \
            is None

    # --- query 2 -------------------------------------------------------------------------------

    def injectivity(self) -> Outcome | None:
        """Query (2): the abstractions, through the chain of cuts, then the whole formula; None if undecided."""
        a, b = self.translate("pid_a", self.signed), self.translate("pid_b", self.signed)
        return Outcome(proven=True) if self.abstractions_hold(a, b) else self.exactly(a, b)

    def abstractions_hold(self, a: Copy, b: Copy) -> bool:
        """Query (2)'s linear abstraction, then with product theorems, is unsat (integers only)."""
        if self.domain.kind != "int":  # the linear abstraction of the whole formula settles most remaps at once
            return False
        facts = [*self.holds(a), *self.holds(b)]
        same = [x == y for x, y in zip(a.outputs, b.outputs)]
        order = self.domain.widen(a.pid) < self.domain.widen(b.pid)
        query = [*self.domain.constraints, *a.bounds, *b.bounds, order, *same, *facts]
        what = "whether two programs share a logical index"
        return self.ask(linearize(query, self.known()), [], what, ABSTRACTION_WEIGHT, abstraction=True) is None \
            or self.abstractly(query, what) is None

    def exactly(self, a: Copy, b: Copy) -> Outcome | None:
        outcome = self.through_cuts(a, b)
        if outcome is not None or self.chained:  # once a cut holds, the rounds spend their time on what it leaves
            return outcome
        return self.no_collision(a, b, a.outputs, b.outputs)

    def through_cuts(self, a: Copy, b: Copy) -> Outcome | None:
        """Cut by cut (cut_order), replace the results by the cut values that determine them, and
        ask query (2) about those each time one does: an order then a raster is settled at `lid`."""
        targets_a, targets_b = a.outputs, b.outputs
        outputs = [t.get_id() for t in a.outputs]
        last = len(a.points)
        for index in self.cut_order(a):
            if index >= last or [t.get_id() for t in self.live_terms(a, index)] == outputs:
                continue
            cut_a = self.cut(a, index, "cut_a")
            cut_b = mirror(cut_a, self.live_terms(b, index), "cut_b")
            if cut_b is None:
                continue
            if not determines(self.check, targets_a, targets_b, cut_a, cut_b):
                continue
            targets_a, targets_b = [t for t, _ in cut_a.pairs], [t for t, _ in cut_b.pairs]
            last, self.chained = index, True
            if self.domain.kind == "int" and len(self.domain.extents) > 1:
                outcome = self.no_collision(a, b, targets_a, targets_b, generalize=True)
                if outcome is not None and outcome.proven:
                    return outcome
            outcome = self.no_collision(a, b, targets_a, targets_b)
            if outcome is not None:
                return outcome
        return None

    def no_collision(self, a: Copy, b: Copy, targets_a: list, targets_b: list, generalize: bool = False) \
            -> Outcome | None:
        """Query (2) on these targets: proven, a collision, or None (undecided, or a model of a cut's
        targets or of a generalisation whose results differ)."""
        same = [x == y for x, y in zip(targets_a, targets_b)]
        order = self.domain.widen(a.pid) < self.domain.widen(b.pid)
        model = self.check([*a.bounds, *b.bounds, order, *same], "whether two programs share a logical index",
                           generalize=generalize)
        if model is None:
            return Outcome(proven=True)
        if model is UNDECIDED or generalize:
            return None
        runs = self.evaluate(model, "pid_a"), self.evaluate(model, "pid_b")
        found = concrete.collision(*runs, self.constexprs)
        if found is not None:
            return self.refuted(found, *runs)
        if targets_a is a.outputs:
            return Outcome(unknown_kind="error", reason="internal: a collision z3 found does not reproduce when "
                                                        "evaluated")
        return None
