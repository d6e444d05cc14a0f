"""The evaluator: a checked hook's statements over every program of one grid at once, and the entry
points (in-process, and the bijectivity check's child)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np

from swizzleperf.errors import RemapRejected
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.remaps.check import LOOP_TRIP_CAP, hook_body, static_check, trip_count
from swizzleperf.remaps.evaluate.expressions import Expressions
from swizzleperf.remaps.evaluate.values import (
    INT1,
    INT32,
    INT64,
    Const,
    Dropped,
    IntType,
    Tensor,
    Value,
    any_lane,
    check_branch_types,
    first_lane,
    integer_promote,
    merged_return_types,
    reject,
    scalar_type,
    scatter,
    source_of,
)
from swizzleperf.untrusted.child import save_array
from swizzleperf.untrusted.parse import show_int

CHUNK = 1 << 15  # programs evaluated together: 150 live int64 values take 40 MB, not 1.2 GB on a 1M grid


class _Evaluator(Expressions):
    """One hook over every program of one grid: each statement on the lanes still running, `return`
    retiring the lanes that reach it."""

    def __init__(self, fn: ast.FunctionDef, hook: HookSignature, grid: tuple[int, ...], constexprs: dict[str, int],
                 lo: int, hi: int):
        """Programs [lo, hi) of the grid: lanes are their launch ids, `out` row i is program lo + i."""
        self.fn = fn
        self.hook = hook
        self.grid = grid
        self.lo, self.hi = lo, hi
        self.size = hi - lo
        self.out = np.zeros((self.size, hook.ndim), dtype=np.int64)
        self.returned = np.zeros(self.size, dtype=bool)
        self.return_types: list[IntType | Const] | None = None
        self.trip_budget = LOOP_TRIP_CAP  # loop-body executions left per program, nested loops multiplied
        self._mentions: dict[int, frozenset[str]] = {}
        self.env0: dict[str, Value] = {hook.pid: Tensor(INT32, np.arange(lo, hi, dtype=np.int32))}
        for name, extent in zip(hook.grid_params, grid):
            self.env0[name] = Tensor(INT32, np.int32(extent))
        for name in hook.constexprs:
            self.env0[name] = Const(constexprs[name])

    def run(self) -> np.ndarray:
        body = hook_body(self.fn)
        with np.errstate(all="ignore"):  # integer wraparound is the semantics, not an accident
            _, lanes = self.block(body, dict(self.env0), np.arange(self.lo, self.hi, dtype=np.int64))
        if lanes.size or not self.returned.all():
            p = int(lanes[0]) if lanes.size else self.lo + int(np.flatnonzero(~self.returned)[0])
            raise reject(None, f"program {p} reaches the end of {self.hook.name}() without returning")
        return self.out

    # --- statements ----------------------------------------------------------------------------

    def block(self, body: list[ast.stmt], env: dict, lanes: np.ndarray) -> tuple[dict, np.ndarray]:
        for stmt in body:
            env, lanes = self.statement(stmt, env, lanes)
        return env, lanes

    def statement(self, stmt: ast.stmt, env: dict, lanes: np.ndarray) -> tuple[dict, np.ndarray]:
        if isinstance(stmt, ast.Assign):
            target = stmt.targets[0]
            if isinstance(target, ast.Tuple):
                values = [self.to_tensor(self.expr(v, env, lanes), v) for v in stmt.value.elts]
                env = {**env, **{t.id: v for t, v in zip(target.elts, values)}}
            else:
                env = {**env, target.id: self.to_tensor(self.expr(stmt.value, env, lanes), stmt)}
        elif isinstance(stmt, ast.AugAssign):
            left = self.lookup(stmt.target.id, env, stmt)
            value = self.binary(stmt.op, left, self.expr(stmt.value, env, lanes), stmt, lanes)
            env = {**env, stmt.target.id: self.to_tensor(value, stmt)}
        elif isinstance(stmt, ast.If):
            return self.if_(stmt, env, lanes)
        elif isinstance(stmt, ast.For):
            return self.for_(stmt, env, lanes), lanes
        elif isinstance(stmt, ast.Return):
            self.return_(stmt, env, lanes)
            retired = np.zeros(lanes.size, dtype=bool)  # keep the names and types for the `if` merge
            return {name: self.restrict(v, retired) for name, v in env.items()}, lanes[:0]
        return env, lanes

    def return_(self, stmt: ast.Return, env: dict, lanes: np.ndarray) -> None:
        nodes = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
        values = [self.expr(node, env, lanes) for node in nodes]
        types: list[IntType | Const] = []
        for k, (node, value) in enumerate(zip(nodes, values)):
            if isinstance(value, Const):
                if isinstance(value.value, bool) or not INT64.min <= value.value <= INT64.max:
                    raise reject(node, f"returns the constant {show_int(value.value)}; a logical index is an integer")
                types.append(value)
                self.out[lanes - self.lo, k] = value.value
                continue
            if value.ty is INT1:
                raise reject(node, f"`{source_of(node)}` is a comparison (a boolean), not a logical index")
            if any_lane(value.poison, lanes.size):
                raise reject(node, f"program {first_lane(value.poison, lanes)} returns an undefined value: `{source_of(node)}` "
                                  f"depends on a shift by a negative or too-large amount")
            types.append(value.ty)
            self.out[lanes - self.lo, k] = value.data.astype(np.int64)
        self.return_types = merged_return_types(self.return_types, types, stmt)
        self.returned[lanes - self.lo] = True

    def if_(self, stmt: ast.If, env: dict, lanes: np.ndarray) -> tuple[dict, np.ndarray]:
        cond = self.condition(stmt.test, env, lanes)
        if isinstance(cond, bool):  # compile-time: only the taken branch exists
            return self.block(stmt.body if cond else stmt.orelse, env, lanes)
        branches = []
        for body, mask in ((stmt.body, cond), (stmt.orelse, ~cond)):
            names = self.mentions(body)
            start = {name: self.restrict(env[name], mask) for name in names if name in env}
            end, sub_lanes = self.block(body, dict(start), lanes[mask])
            branches.append((start, end, sub_lanes))
        (t_start, t_end, t_lanes), (e_start, e_end, e_lanes) = branches
        alive = np.zeros(lanes.size, dtype=bool)
        alive[np.searchsorted(lanes, t_lanes)] = True
        alive[np.searchsorted(lanes, e_lanes)] = True
        new_lanes = lanes[alive]
        merged = {name: (v if alive.all() or isinstance(v, (Const, Dropped)) else v.select(alive))
                  for name, v in env.items()}
        t_pos, e_pos = np.searchsorted(new_lanes, t_lanes), np.searchsorted(new_lanes, e_lanes)
        for name in sorted(set(t_end) | set(e_end)):
            t_new = self._rebound(name, t_start, t_end)
            e_new = self._rebound(name, e_start, e_end)
            if not (t_new or e_new):
                continue
            live = env.get(name)
            if isinstance(live, Dropped):
                live = None
            if live is None and not (t_new and e_new):
                merged[name] = Dropped(f"`{name}` is assigned in only one branch of the run-time `if` at line "
                                       f"{stmt.lineno}, so Triton does not keep it after the `if`: assign it in "
                                       f"both branches or before the `if`")
                continue
            t_val = t_end[name] if t_new else self.restrict_to(live, lanes, t_lanes)
            e_val = e_end[name] if e_new else self.restrict_to(live, lanes, e_lanes)
            merged[name] = self.merge_branches(name, live, t_val, e_val, t_pos, e_pos, new_lanes.size, stmt)
        return merged, new_lanes

    @staticmethod
    def _rebound(name: str, start: dict, end: dict) -> bool:
        value = end.get(name)
        return value is not None and not isinstance(value, Dropped) and value is not start.get(name)

    def merge_branches(self, name: str, live: Value | None, t_val: Value, e_val: Value,
                       t_pos: np.ndarray, e_pos: np.ndarray, n: int, stmt: ast.If) -> Value:
        check_branch_types(name, live, t_val, e_val, stmt)
        return scatter(t_val, e_val, t_pos, e_pos, n)

    def for_(self, stmt: ast.For, env: dict, lanes: np.ndarray) -> dict:
        iterator = ast.unparse(stmt.iter.func)
        bounds = []
        for node in stmt.iter.args:
            value = self.expr(node, env, lanes)
            if not isinstance(value, Const) or isinstance(value.value, bool):
                raise reject(node, f"loop bound `{source_of(node)}` must be a compile-time integer")
            bounds.append(value.value)
        if len(bounds) == 3 and bounds[2] == 0:
            raise reject(stmt, "range() step must not be zero")
        count = trip_count(bounds)  # len(range()) fails past 2**63, and constexpr bounds reach 2**256
        budget = self.trip_budget
        if count > budget:
            nested = " inside other loops" if budget < LOOP_TRIP_CAP else ""
            raise reject(stmt, f"the loop runs {show_int(count)} times{nested}; the cap is {LOOP_TRIP_CAP} loop-body "
                              f"executions per program (nested loops multiply)")
        trips = range(*bounds)
        self.trip_budget = budget // max(1, count)
        try:
            if iterator == "tl.static_range":  # unrolled at compile time: the index is a constant
                for i in trips:
                    env, _ = self.block(stmt.body, {**env, stmt.target.id: Const(i)}, lanes)
                return env
            return self.runtime_loop(stmt, env, lanes, bounds, trips)
        finally:
            self.trip_budget = budget

    def runtime_loop(self, stmt: ast.For, env: dict, lanes: np.ndarray, bounds: list[int], trips: range) -> dict:
        """A `range` loop is an scf.for: run-time int32 index, typed loop-carried values, no loop-local names."""
        index_ty = INT32
        for b in bounds:
            index_ty = integer_promote(index_ty, scalar_type(b, stmt))
        target = stmt.target.id
        carried = {k: v for k, v in env.items() if not isinstance(v, Dropped) and k != target}
        for i in trips:
            start = {**env, **carried, target: Tensor(index_ty, np.asarray(i, dtype=index_ty.np_dtype))}
            end, _ = self.block(stmt.body, dict(start), lanes)
            for name, live in list(carried.items()):
                new = end.get(name)
                if new is start[name] or isinstance(new, Dropped):
                    continue
                if isinstance(live, Const):
                    raise reject(stmt, f"`{name}` is the compile-time constant {show_int(live.value)} (a constexpr "
                                      f"parameter or static_range index) and is reassigned in the `range` loop; "
                                      f"Triton does not compile that: use a new name, or tl.static_range")
                if new.ty != live.ty:
                    raise reject(stmt, f"loop-carried `{name}` is {live.ty.name} before the loop but {new.ty.name} "
                                      f"after an iteration; Triton needs the type to stay the same")
                carried[name] = new
        out = {**env, **carried}
        for name in sorted(self.mentions(stmt.body) - set(carried) - {target}):
            out[name] = Dropped(f"`{name}` is defined inside the `range` loop at line {stmt.lineno}; Triton does not "
                                f"keep loop-local names after the loop: assign it before the loop")
        out[target] = Dropped(f"`{target}` is the index of the `range` loop at line {stmt.lineno}; Triton leaves it "
                              f"undefined after the loop")
        return out


def evaluate_checked(fn: ast.FunctionDef, hook: HookSignature, grid: tuple[int, ...],
                     constexprs: dict[str, int]) -> np.ndarray:
    """Evaluate a hook that passed static_check; see `evaluate`."""
    grid = tuple(int(g) for g in grid)
    if len(grid) != hook.ndim or min(grid) < 1 or math.prod(grid) > INT32.max:
        raise ValueError(f"grid {grid} does not fit {hook.render()}: {hook.ndim} positive extent(s) with at most "
                         f"{INT32.max} programs in all")
    missing = [c for c in hook.constexprs if c not in constexprs]
    if missing:
        raise ValueError(f"no value for the hook's constexpr parameter(s) {', '.join(missing)}; pass constexprs=")
    total = math.prod(grid)
    out = np.empty((total, hook.ndim), dtype=np.int64)
    return_types = None  # every return reached, by any chunk's programs, must agree (as one compiled kernel's)
    for lo in range(0, total, CHUNK):  # the evaluator's memory: live values x CHUNK, whatever the grid
        evaluator = _Evaluator(fn, hook, grid, constexprs, lo, min(total, lo + CHUNK))
        evaluator.return_types = return_types
        out[lo:evaluator.hi] = evaluator.run()
        return_types = evaluator.return_types
    return out


def evaluate(source: str, hook: HookSignature, grid: tuple[int, ...], constexprs: dict[str, int]) -> np.ndarray:
    """Logical indices of every program: int64 array of shape (prod(grid), ndim), row p for launch id p.

    Interprets the checked syntax tree over numpy arrays (no exec), so it is safe in-process but
    unbounded in time for adversarial input: untrusted callers use check_bijective/logical_ids,
    which run it in a time-limited child.
    """
    return evaluate_checked(static_check(source, hook), hook, grid, constexprs)


def evaluate_grids_child(payload: dict, workdir: Path) -> dict:
    """Child-process entry point: evaluate on each grid in order, saving `grid_{i}.npy`; stop at
    the first evaluation error and report it."""
    spec = payload["hook"]
    hook = HookSignature(name=spec["name"], pid=spec["pid"], grid_params=tuple(spec["grid_params"]),
                         constexprs=tuple(spec["constexprs"]))
    fn = static_check(payload["source"], hook)
    grids = [tuple(g) for g in payload["grids"]]
    for i, grid in enumerate(grids):
        try:
            coords = evaluate_checked(fn, hook, grid, payload["constexprs"])
        except RemapRejected as exc:
            return {"evaluated": i, "rejected": {"grid": list(grid), "reason": exc.reason}}
        save_array(workdir, f"grid_{i}", coords)
        del coords
    return {"evaluated": len(grids), "rejected": None}
