"""Symbolic execution of a checked remap hook: its syntax tree becomes one term per logical axis.

Only the tree is walked; nothing is exec'd. Statements run under a path condition: a run-time
`if` runs both branches (each under its condition) and merges the names they rebind with a
select, and a `return` records its values with the condition that reaches it. `range` and
`tl.static_range` loops are unrolled (their bounds are compile-time constants and the static
check caps the trip count at LOOP_TRIP_CAP), so the result is loop-free. The scoping rules
(which names survive an `if` or a loop, which rebinding Triton refuses) follow remaps/evaluate.
"""

from __future__ import annotations

import ast

from swizzleperf.errors import RemapRejected
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.remaps.check import LOOP_TRIP_CAP, hook_body
from swizzleperf.remaps.evaluate.values import (
    INT1,
    INT32,
    INT64,
    Dropped,
    check_branch_types,
    integer_promote,
    merged_return_types,
)
from swizzleperf.validation.proofs.sym_expressions import Expressions
from swizzleperf.validation.proofs.sym_values import Const, Run, Value, invalid, type_of_constant, unsupported


def _terminates(body: list[ast.stmt]) -> bool:
    """Every path through `body` ends in a `return` (the static check allows nothing after one)."""
    last = body[-1] if body else None
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and _terminates(last.body) and _terminates(last.orelse)


def _trip_count(bounds: list[int]) -> int:
    start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds, 1)[:3]
    return max(0, -((start - stop) // step)) if step > 0 else max(0, -((stop - start) // -step))


class Executor(Expressions):
    """Runs the hook once on a backend; `run()` gives the returns, `outputs()` one term per axis."""

    def __init__(self, fn: ast.FunctionDef, hook: HookSignature, backend, inputs: dict[str, object],
                 constexprs: dict[str, int]):
        self.fn, self.hook, self.b = fn, hook, backend
        self.returns: list[tuple[object, list[Value]]] = []
        self.points: list[dict[str, Value]] = []  # the names after each top-level statement
        self.return_types: list | None = None
        self.trip_budget = LOOP_TRIP_CAP
        self.env0: dict[str, Value] = {name: Run(INT32, value) for name, value in inputs.items()}
        self.env0.update({name: Const(int(constexprs[name])) for name in hook.constexprs})

    def run(self) -> list[tuple[object, list[Value]]]:
        env = dict(self.env0)
        for stmt in hook_body(self.fn):
            env = self.statement(stmt, env)
            self.points.append(env)
        return self.returns

    def outputs(self) -> list:
        """Per axis, the value of the return that is reached (the paths exclude each other)."""
        if not self.returns:
            self.run()
        axes = []
        for k in range(self.hook.ndim):
            terms = [self.output_term(values[k]) for _, values in self.returns]
            term = terms[-1]
            for (pc, _), other in zip(reversed(self.returns[:-1]), reversed(terms[:-1])):
                term = self.b.ite(pc, other, term)
            axes.append(term)
        return axes

    def output_term(self, value: Value):
        if isinstance(value, Const):
            return self.b.index(self.b.literal(value.value, INT64), INT64)
        return self.b.index(value.term, value.ty)

    # --- statements ----------------------------------------------------------------------------

    def block(self, body: list[ast.stmt], env: dict) -> dict:
        for stmt in body:
            env = self.statement(stmt, env)
        return env

    def statement(self, stmt: ast.stmt, env: dict) -> dict:
        if isinstance(stmt, ast.Assign):
            target = stmt.targets[0]
            if isinstance(target, ast.Tuple):
                values = [self.to_run(self.expr(v, env), v) for v in stmt.value.elts]
                return {**env, **{t.id: v for t, v in zip(target.elts, values)}}
            return {**env, target.id: self.to_run(self.expr(stmt.value, env), stmt)}
        if isinstance(stmt, ast.AugAssign):
            left = self.lookup(stmt.target.id, env, stmt)
            value = self.binary(stmt.op, left, self.expr(stmt.value, env), stmt)
            return {**env, stmt.target.id: self.to_run(value, stmt)}
        if isinstance(stmt, ast.If):
            return self.if_(stmt, env)
        if isinstance(stmt, ast.For):
            return self.for_(stmt, env)
        if isinstance(stmt, ast.Return):
            self.return_(stmt, env)
        return env

    def return_(self, stmt: ast.Return, env: dict) -> None:
        nodes = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
        values = [self.expr(node, env) for node in nodes]
        types = []
        for node, value in zip(nodes, values):
            if isinstance(value, Const):
                if isinstance(value.value, bool):
                    raise invalid(node, f"returns the constant {value.value!r}; a logical index is an integer")
                types.append(value)
            elif value.ty is INT1:
                raise invalid(node, f"`{ast.unparse(node)}` is a comparison (a boolean), not a logical index")
            else:
                types.append(value.ty)
        self.check_return_types(types, stmt)
        self.returns.append((self.b.pc, values))
        self.b.pc = self.b.false

    def check_return_types(self, types: list, stmt: ast.Return) -> None:
        try:
            self.return_types = merged_return_types(self.return_types, types, stmt)
        except RemapRejected as exc:
            raise invalid(None, exc.reason) from None

    def if_(self, stmt: ast.If, env: dict) -> dict:
        cond = self.condition(stmt.test, env)
        if isinstance(cond, bool):  # compile time: only the taken branch exists
            return self.block(stmt.body if cond else stmt.orelse, env)
        entry = self.b.pc
        ends = []
        for body, guard in ((stmt.body, cond), (stmt.orelse, self.b.not_(cond))):
            self.b.pc = self.b.and_(entry, guard)
            ends.append((self.block(body, dict(env)), self.b.pc, bool(body) and _terminates(body)))
        (t_env, t_pc, t_done), (e_env, e_pc, e_done) = ends
        self.b.pc = self.b.or_(t_pc, e_pc)
        merged = dict(env)
        for name in sorted(set(t_env) | set(e_env)):
            t_new, e_new = self._rebound(name, env, t_env), self._rebound(name, env, e_env)
            if not (t_new or e_new):
                continue
            live = env.get(name)
            live = None if isinstance(live, Dropped) else live
            if live is None and not (t_new and e_new):
                merged[name] = Dropped(f"`{name}` is assigned in only one branch of the run-time `if` at line "
                                       f"{stmt.lineno}, so Triton does not keep it after the `if`")
                continue
            t_val, e_val = (t_env[name] if t_new else live), (e_env[name] if e_new else live)
            if isinstance(t_val, Const) or isinstance(e_val, Const):  # a static_range index inside a branch
                raise unsupported(stmt, f"`{name}` is a compile-time constant in one branch of the run-time `if`")
            self.check_merge(name, live, t_val, e_val, stmt)
            term = e_val.term if t_done else t_val.term if e_done else self.b.ite(cond, t_val.term, e_val.term)
            merged[name] = Run(t_val.ty, term)
        return merged

    @staticmethod
    def _rebound(name: str, start: dict, end: dict) -> bool:
        value = end.get(name)
        return value is not None and not isinstance(value, Dropped) and value is not start.get(name)

    @staticmethod
    def check_merge(name: str, live: Value | None, t_val: Run, e_val: Run, stmt: ast.If) -> None:
        try:
            check_branch_types(name, live, t_val, e_val, stmt)
        except RemapRejected as exc:
            raise invalid(None, exc.reason) from None

    def for_(self, stmt: ast.For, env: dict) -> dict:
        """Unrolled: a bounded loop with compile-time bounds is a fixed sequence of bodies."""
        bounds = []
        for node in stmt.iter.args:
            value = self.expr(node, env)
            if not isinstance(value, Const) or isinstance(value.value, bool):
                raise invalid(node, f"loop bound `{ast.unparse(node)}` must be a compile-time integer")
            bounds.append(value.value)
        if len(bounds) == 3 and bounds[2] == 0:
            raise invalid(stmt, "range() step must not be zero")
        count, budget = _trip_count(bounds), self.trip_budget
        if count > budget:
            raise invalid(stmt, f"the loop runs {count} times; the cap is {LOOP_TRIP_CAP} loop-body executions per "
                                f"program (nested loops multiply)")
        self.trip_budget = budget // max(1, count)
        try:
            if ast.unparse(stmt.iter.func) == "tl.static_range":
                for i in range(*bounds):
                    env = self.block(stmt.body, {**env, stmt.target.id: Const(i)})
                return env
            return self.runtime_loop(stmt, env, bounds)
        finally:
            self.trip_budget = budget

    def runtime_loop(self, stmt: ast.For, env: dict, bounds: list[int]) -> dict:
        """A `range` loop (scf.for): a run-time index, typed loop-carried values, no loop-local names."""
        index_ty = INT32
        for bound in bounds:
            index_ty = integer_promote(index_ty, type_of_constant(bound, stmt))
        target = stmt.target.id
        carried = {k: v for k, v in env.items() if not isinstance(v, Dropped) and k != target}
        mentioned = {n.id for s in stmt.body for n in ast.walk(s) if isinstance(n, ast.Name)}
        for i in range(*bounds):
            start = {**env, **carried, target: Run(index_ty, self.b.literal(i, index_ty))}
            end = self.block(stmt.body, dict(start))
            for name, live in list(carried.items()):
                new = end.get(name)
                if new is start[name] or isinstance(new, Dropped):
                    continue
                if isinstance(live, Const):
                    raise invalid(stmt, f"`{name}` is a compile-time constant reassigned in the `range` loop; "
                                        f"Triton does not compile that")
                if new.ty != live.ty:
                    raise invalid(stmt, f"loop-carried `{name}` is {live.ty.name} before the loop but {new.ty.name} "
                                        f"after an iteration")
                carried[name] = new
        out = {**env, **carried}
        for name in sorted(mentioned - set(carried) - {target}):
            out[name] = Dropped(f"`{name}` is defined inside the `range` loop at line {stmt.lineno}; Triton does "
                                f"not keep loop-local names after the loop")
        out[target] = Dropped(f"`{target}` is the index of the `range` loop at line {stmt.lineno}")
        return out
