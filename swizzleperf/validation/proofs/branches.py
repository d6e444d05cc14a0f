"""Proof by cases: a 1D hook whose top-level `if` splits the programs at a bound, one side at a time.

The cluster-round order (families._order_cluster_rounds) is `if pid < rounds_end:` whole rounds
`else:` an XCD-contiguous tail. With a run-time chunk (`min(group, batch * heads) * blocks`),
z3 decides neither query (1) nor (2) of the whole order in seconds: each formula holds both
branches, and a collision between them needs the range of both. Each side alone is quick for the
abstraction with product theorems (products.py): ~0.1-1 M units where the whole takes > 20 M.

The rule. Let P(x) be the `if`'s condition as a function of the program id x (and the grid). If,
for each side s in (true, false),

1. query (1) holds for the programs with P(x) = s (the hook run along that side's branch only),
2. every such program maps to a result r in the grid with P(r) = s (P read as the same function
   of r), and
3. query (2) holds for two programs with P = s,

then the hook is one-to-one on the grid: two programs on one side are distinct by (3), and on
different sides their results differ in P by (2). With (1) and (2) for both sides it maps
[0, total) into [0, total), so it is a bijection. Nothing here depends on what P is, but (2)
asks that the hook maps each side onto itself, which an order does when P compares the program id
with a bound that does not depend on it (`pid < rounds_end`): only such an `if` is tried, so that
no budget goes to a split that cannot hold. (2)'s z3 term for P(r) is the condition's term with
the program id replaced by r; every operation in it is one of the hook's own at the program r,
which (1) proved defined and exact for every program of the grid.

Each side is an ordinary Prover whose copies run the `if` along that side's branch only
(BranchExecutor) and assume P = s: its models are programs of that side, re-evaluated exactly on
the whole hook before they count, as always. A model of (2) is no counterexample (a bijection
may swap programs across the bound): the rule then does not apply and the caller proves the
hook whole. The hook is translated whole before this rule runs (portfolio: the encodings are
chosen by translating it), so a hook Triton would reject never gets here.
"""

from __future__ import annotations

import ast
import dataclasses

import z3

from swizzleperf.kernel.contract import HookSignature
from swizzleperf.remaps.check import hook_body
from swizzleperf.validation.proofs.cuts import mentions
from swizzleperf.validation.proofs.outcome import Outcome
from swizzleperf.validation.proofs.queries import UNDECIDED, Prover
from swizzleperf.validation.proofs.symexec import Executor

_COMPARISONS = {z3.Z3_OP_LT, z3.Z3_OP_LE, z3.Z3_OP_GT, z3.Z3_OP_GE, z3.Z3_OP_SLT, z3.Z3_OP_SLEQ, z3.Z3_OP_SGT,
                z3.Z3_OP_SGEQ, z3.Z3_OP_ULT, z3.Z3_OP_ULEQ, z3.Z3_OP_UGT, z3.Z3_OP_UGEQ}


class NotApplicable(Exception):
    """The split does not apply to this hook: its condition is no bound on the program id, or a side
    maps a program to the other side."""


def split_points(fn: ast.FunctionDef, hook: HookSignature) -> list[ast.If]:
    """The top-level `if`s of a 1D hook that the rule may split at (none with a `return` inside)."""
    if hook.ndim != 1:
        return []
    return [stmt for stmt in hook_body(fn) if isinstance(stmt, ast.If)
            and not any(isinstance(node, ast.Return) for node in ast.walk(stmt))]


def bounds_program(condition, pid) -> bool:
    """Whether `condition` compares the program id itself with a term that does not depend on it."""
    if not z3.is_app(condition) or condition.decl().kind() not in _COMPARISONS:
        return False
    left, right = condition.children()
    return (left.eq(pid) and not mentions(right, pid)) or (right.eq(pid) and not mentions(left, pid))


class BranchExecutor(Executor):
    """An Executor that runs the `if` at `branch` along one side only, recording its condition (`split`).
    The names it keeps after that `if` agree with the whole hook's on that side; any the whole hook
    drops there are never read (the hook was translated whole first)."""

    def __init__(self, *args, branch: ast.If, side: bool):
        super().__init__(*args)
        self.branch, self.side, self.split = branch, side, None

    def if_(self, stmt: ast.If, env: dict) -> dict:
        if stmt is not self.branch:
            return super().if_(stmt, env)
        cond = self.condition(stmt.test, env)
        if isinstance(cond, bool):
            raise NotApplicable(f"`{ast.unparse(stmt.test)}` is decided at compile time")
        self.split, entry = cond, self.b.pc
        self.b.pc = self.b.and_(entry, cond if self.side else self.b.not_(cond))
        out = self.block(stmt.body if self.side else stmt.orelse, dict(env))
        self.b.pc = entry
        return out


class SideProver(Prover):
    """Queries (1), (2) and (3) of the module docstring for the programs on one side of the split."""

    def __init__(self, *args, branch: ast.If, side: bool):
        super().__init__(*args)
        self.branch, self.side = branch, side
        self.conditions: dict[int, z3.ExprRef] = {}  # by program id term: the condition's term for it

    def executor(self, backend, inputs: dict) -> Executor:
        return BranchExecutor(self.fn, self.hook, backend, inputs, self.constexprs, branch=self.branch,
                              side=self.side)

    def assumptions(self, executor: BranchExecutor, pid) -> list:
        if executor.split is None or not bounds_program(executor.split, pid):
            raise NotApplicable(f"`{ast.unparse(self.branch.test)}` does not bound the program id")
        self.conditions[pid.get_id()] = executor.split
        return [self.on_side(executor.split)]

    def stage(self, copy, index: int, bad, what: str):
        """A stage before the split, asked without this side's condition (the last of copy.bounds): the same query
        for both sides, so the second finds it proven (`proven` is theirs). Its "unsat" proves more; a model is a
        program of the grid, re-evaluated on the whole hook as always."""
        if index < hook_body(self.fn).index(self.branch):
            copy = dataclasses.replace(copy, bounds=copy.bounds[:-1])
        return super().stage(copy, index, bad, what)

    def stage_key(self, index: int) -> tuple:
        key = super().stage_key(index)
        return key if index >= hook_body(self.fn).index(self.branch) else (key[0], None, *key[2:])

    def on_side(self, condition):
        return condition if self.side else z3.Not(condition)

    def first_violation(self, copy):
        model = super().first_violation(copy)
        return self.stays_on_side(copy) if model is None else model

    def stays_on_side(self, copy):
        """None if every program of this side maps to a result on it (query (2)), UNDECIDED if z3 cannot
        tell; NotApplicable if one does not. Asked once query (1) holds: the results lie in the grid."""
        result = copy.outputs[0]
        if self.domain.kind != "int":  # an index in [0, total) is exact in the program id's width
            result = z3.Extract(copy.pid.size() - 1, 0, result)
        image = z3.substitute(self.conditions[copy.pid.get_id()], (copy.pid, result))
        inside = [z3.Not(c) for c in self.domain.outside(copy.outputs)]
        leaves = [*copy.bounds, *inside, z3.Not(self.on_side(image))]
        what = f"whether a program with `{ast.unparse(self.branch.test)}` {self.side} maps to the other side"
        model = self.abstractly([*self.domain.constraints, *leaves], what)
        if model is UNDECIDED:
            model = self.check(leaves, what)
        if model is None or model is UNDECIDED:
            return model
        raise NotApplicable(f"program {model.get(str(copy.pid))} maps across `{ast.unparse(self.branch.test)}`")

    def grid_values(self, copy) -> list:
        """The nonlinear values the hook computes from the grid alone before the split (`rounds_end`)."""
        index = hook_body(self.fn).index(self.branch)
        terms = {}
        for env in copy.points[:index]:
            for value in env.values():
                term = getattr(value, "term", None)
                if term is not None and z3.is_int(term) and term.num_args() and not mentions(term, copy.pid):
                    terms[term.get_id()] = term
        return list(terms.values())

    def injectivity(self) -> Outcome | None:
        """Query (3), first with the grid's nonlinear values before the split taken as any integers (generalize):
        the tail of a cluster-round order needs nothing of `rounds_end` but that its programs lie at or above
        it, and z3 then sees the XCD-contiguous order it is (0.3-0.5 M units at 8 and 16 dies, > 3 M exactly)."""
        a, b = self.translate("pid_a", self.signed), self.translate("pid_b", self.signed)
        values = self.grid_values(a) if self.domain.kind == "int" else []
        if values:
            query = [*self.domain.constraints, *a.bounds, *b.bounds, a.pid < b.pid,  # no holds(): 2x the axioms
                     *[x == y for x, y in zip(a.outputs, b.outputs)]]
            if self.abstractly(generalize(query, values), "whether two programs share a logical index", 2.0) is None:
                return Outcome(proven=True)
        return super().injectivity()

    def prove(self) -> Outcome:
        try:
            return super().prove()
        except NotApplicable as exc:
            return Outcome(unknown_kind="unsupported", reason=str(exc))


def prove_by_cases(fn: ast.FunctionDef, args: tuple) -> Outcome | None:
    """The hook proven side by side at its first split point where the rule applies: proven (saying
    where it was split), a counterexample or an overflow (the whole hook's, as every model is
    re-evaluated on it), or None when no split proves it (the caller proves the hook whole).
    `args`: a Prover's (fn, hook, source, constexprs, domain, budget, proven, leanings)."""
    for branch in split_points(fn, args[1]):
        outcomes, products = [], None
        for side in (True, False):
            prover = SideProver(*args, branch=branch, side=side)
            prover.products = products  # one domain: the abstraction's terms and axioms, built once for both sides
            outcomes.append(prover.prove())
            products = prover.products
            if not outcomes[-1].proven:
                break
        last = outcomes[-1]
        if last.proven:
            return Outcome(proven=True, cases=ast.unparse(branch.test))
        if last.counterexample is not None or last.unknown_kind == "overflow":
            return last
        if last.unknown_kind != "unsupported":  # undecided: another split would spend the same budget
            return None
    return None


def generalize(formulas: list, terms: list) -> list:
    """The formulas with each of `terms` (values of the grid alone) replaced by a free integer. A
    generalisation: every model of the formulas is one of the result, with the values the grid gives those
    terms, so "unsatisfiable" still proves."""
    pairs = [(term, z3.Int(f"grid_value_{k}", term.ctx)) for k, term in enumerate(terms)]
    return [z3.substitute(f, *pairs) for f in formulas] if pairs else list(formulas)

