"""Evaluate a checked remap hook for every program of a grid at once, with Triton's semantics.

The hook's syntax tree is interpreted (never exec'd) over numpy arrays: one lane per launch id.
Statements run on the lanes still active: a run-time `if` splits them, its results merge back
lane by lane, and `return` retires the lanes that reach it. Values follow compiled Triton:

* Compile-time values (literals, constexpr parameters, `tl.static_range` indices, and
  expressions of only those) are Python ints with Python semantics: `(-7) // 2 == -4`.
* Run-time values (program ids, grid extents, `range` indices, anything mixed with them) are
  int32/int64/uint32/uint64/bool with wraparound, C division and remainder (`-7 // 2 == -3`,
  `-7 % 2 == -1`), arithmetic `>>` on signed values, and Triton's promotion rules: a literal
  takes the run-time operand's type (and must fit it); mixing widths promotes like C.
  Verified against TRITON_INTERPRET=1 in tests/test_remap.py.
* Undefined behaviour is an error, not a value: division by zero or INT_MIN // -1 on a lane
  that evaluates it, and a value shifted by a negative or too-large amount that reaches a
  branch, a division or the result (a `tl.where` may discard it, as LLVM allows).
* Where the Triton interpreter and the compiler disagree, the compiler wins (checked against
  Triton's own front end in the tests): an assignment stores a run-time value even when the
  right side is a constant (`x = -7; x // 2 == -3`, where the interpreter says -4); `range`
  indices are run-time int32; names defined in one branch of a run-time `if`, inside a `range`
  loop, or a `range` index are gone afterwards; and what the compiler refuses is rejected
  (rebinding a constexpr parameter under a run-time `if` or in a `range` loop, branches or
  returns of different types, `and`/`not` on integers, `//` across signedness, constants that
  do not fit the other operand's type).

Errors raise RemapRejected("evaluation", "line L: ...").
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from swizzleperf.errors import RemapRejected
from swizzleperf.kernel import HookSignature
from swizzleperf.remap import LOOP_TRIP_CAP, hook_body, static_check, trip_count
from swizzleperf.sandbox import save_array
from swizzleperf.untrusted import echo, show_int

_CONST_LIMIT = 2 ** 256  # compile-time ints beyond this are a denial of service, not a remap


@dataclass(frozen=True)
class IntType:
    name: str
    bits: int
    signed: bool
    np_dtype: type

    @property
    def min(self) -> int:
        return -(2 ** (self.bits - 1)) if self.signed else 0

    @property
    def max(self) -> int:
        return 2 ** (self.bits - 1) - 1 if self.signed else 2 ** self.bits - 1


INT1 = IntType("int1", 1, False, np.bool_)  # Triton's bool is an unsigned 1-bit integer
INT32 = IntType("int32", 32, True, np.int32)
UINT32 = IntType("uint32", 32, False, np.uint32)
INT64 = IntType("int64", 64, True, np.int64)
UINT64 = IntType("uint64", 64, False, np.uint64)
CASTS = {t.name: t for t in (INT32, INT64, UINT32, UINT64)}


class Const:
    """A compile-time value (Python int or bool). Each assignment makes a new object, so identity
    tells whether a branch rebound a name, as Triton's code generator compares SSA handles."""

    __slots__ = ("value",)

    def __init__(self, value: int | bool):
        self.value = value


class Tensor:
    """A run-time value: `data` is 0-d (the same on every lane) or one entry per active lane.
    `poison` marks lanes whose value is undefined (an out-of-range shift)."""

    __slots__ = ("ty", "data", "poison")

    def __init__(self, ty: IntType, data: np.ndarray, poison: np.ndarray | None = None):
        self.ty = ty
        self.data = np.asarray(data, dtype=ty.np_dtype)
        self.poison = poison if poison is None or poison.any() else None

    def select(self, mask: np.ndarray) -> Tensor:
        """The lanes where mask holds (a uniform value stays as it is)."""
        if self.data.ndim == 0 and self.poison is None:
            return self
        data = self.data if self.data.ndim == 0 else self.data[mask]
        poison = None if self.poison is None else np.broadcast_to(self.poison, mask.shape)[mask]
        return Tensor(self.ty, data, poison)


class Dropped:
    """A name Triton does not keep (defined in one branch of a run-time `if`, or in a loop body)."""

    __slots__ = ("why",)

    def __init__(self, why: str):
        self.why = why


Value = Const | Tensor


def scalar_type(value: int | bool, where: ast.AST) -> IntType:
    """The type Triton gives a Python int when it meets a tensor (semantic.to_tensor_type)."""
    if isinstance(value, bool):
        return INT1
    for ty in (INT32, UINT32, INT64, UINT64):
        if ty.min <= value <= ty.max:
            return ty
    raise _fail(where, f"the integer {show_int(value)} does not fit in 64 bits")


def integer_promote(a: IntType, b: IntType) -> IntType:
    """C's usual arithmetic conversions, as Triton implements them."""
    if a.signed == b.signed:
        return a if a.bits > b.bits else b
    if not a.signed:
        return a if a.bits >= b.bits else b
    return b if b.bits >= a.bits else a


def _kind(ty: IntType) -> int:
    return 0 if ty is INT1 else 1  # bool < integer; signed and unsigned are one kind


def _fail(node: ast.AST | None, message: str) -> RemapRejected:
    where = f"line {node.lineno}: " if node is not None and hasattr(node, "lineno") else ""
    return RemapRejected("evaluation", echo(where + message, 600))  # bounded: it may quote candidate text


def _src(node: ast.AST) -> str:
    return echo(node)


def _any(mask: np.ndarray | None, n: int) -> bool:
    return mask is not None and n > 0 and bool(np.broadcast_to(mask, (n,)).any())


def _first(mask: np.ndarray, lanes: np.ndarray) -> int:
    return int(lanes[int(np.flatnonzero(np.broadcast_to(mask, lanes.shape))[0])])


def _or(*masks: np.ndarray | None) -> np.ndarray | None:
    present = [m for m in masks if m is not None]
    if not present:
        return None
    out = present[0]
    for m in present[1:]:
        out = out | m
    return out


_CONST_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                 ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.LShift: operator.lshift,
                 ast.RShift: operator.rshift, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
                 ast.BitXor: operator.xor}
_CONST_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}
_COMPARE = {ast.Eq: np.equal, ast.NotEq: np.not_equal, ast.Lt: np.less, ast.LtE: np.less_equal,
            ast.Gt: np.greater, ast.GtE: np.greater_equal}
_CONST_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
                  ast.Gt: operator.gt, ast.GtE: operator.ge}
_ARITH = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply}
_BITWISE = {ast.BitAnd: np.bitwise_and, ast.BitOr: np.bitwise_or, ast.BitXor: np.bitwise_xor}


class _Evaluator:
    def __init__(self, fn: ast.FunctionDef, hook: HookSignature, grid: tuple[int, ...], constexprs: dict[str, int]):
        self.fn = fn
        self.hook = hook
        self.grid = grid
        self.size = math.prod(grid)
        self.out = np.zeros((self.size, hook.ndim), dtype=np.int64)
        self.returned = np.zeros(self.size, dtype=bool)
        self.return_types: list[IntType | Const] | None = None
        self.trip_budget = LOOP_TRIP_CAP  # loop-body executions left per program, nested loops multiplied
        self._mentions: dict[int, frozenset[str]] = {}
        self.env0: dict[str, Value] = {hook.pid: Tensor(INT32, np.arange(self.size, dtype=np.int32))}
        for name, extent in zip(hook.grid_params, grid):
            self.env0[name] = Tensor(INT32, np.int32(extent))
        for name in hook.constexprs:
            self.env0[name] = Const(constexprs[name])

    def run(self) -> np.ndarray:
        body = hook_body(self.fn)
        with np.errstate(all="ignore"):  # integer wraparound is the semantics, not an accident
            _, lanes = self.block(body, dict(self.env0), np.arange(self.size, dtype=np.int64))
        if lanes.size or not self.returned.all():
            p = int(lanes[0]) if lanes.size else int(np.flatnonzero(~self.returned)[0])
            raise _fail(None, f"program {p} reaches the end of {self.hook.name}() without returning")
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
                    raise _fail(node, f"returns the constant {show_int(value.value)}; a logical index is an integer")
                types.append(value)
                self.out[lanes, k] = value.value
                continue
            if value.ty is INT1:
                raise _fail(node, f"`{_src(node)}` is a comparison (a boolean), not a logical index")
            if _any(value.poison, lanes.size):
                raise _fail(node, f"program {_first(value.poison, lanes)} returns an undefined value: `{_src(node)}` "
                                  f"depends on a shift by a negative or too-large amount")
            types.append(value.ty)
            self.out[lanes, k] = value.data.astype(np.int64)
        self._check_return_types(types, stmt)
        self.returned[lanes] = True

    def _check_return_types(self, types: list[IntType | Const], stmt: ast.Return) -> None:
        """Triton gives a function one return type: constants of equal value, or equal types."""
        if self.return_types is None:
            self.return_types = types
            return
        merged = []
        for k, (a, b) in enumerate(zip(self.return_types, types)):
            if isinstance(a, Const) and isinstance(b, Const) and a.value == b.value:
                merged.append(a)
                continue
            ta = scalar_type(a.value, stmt) if isinstance(a, Const) else a
            tb = scalar_type(b.value, stmt) if isinstance(b, Const) else b
            if ta != tb:
                raise _fail(stmt, f"return value {k + 1} is {tb.name} here but {ta.name} on another path; "
                                  f"Triton needs one return type: cast with .to(tl.{ta.name})")
            merged.append(ta)
        self.return_types = merged

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
        if isinstance(live, Const):
            raise _fail(stmt, f"`{name}` is the compile-time constant {show_int(live.value)} (a constexpr parameter or "
                              f"static_range index) and is reassigned under the run-time condition "
                              f"`{_src(stmt.test)}`; Triton does not compile that: use a new name")
        if live is not None:
            for value, branch in ((t_val, "then"), (e_val, "else")):
                if value.ty != live.ty:
                    raise _fail(stmt, f"`{name}` is {live.ty.name} before the `if` but the {branch} branch makes it "
                                      f"{value.ty.name}; Triton needs the same type: cast with .to(tl.{live.ty.name})")
        elif t_val.ty != e_val.ty:
            raise _fail(stmt, f"`{name}` is {t_val.ty.name} in the then branch and {e_val.ty.name} in the else "
                              f"branch; Triton needs the same type in both")
        return _scatter(t_val, e_val, t_pos, e_pos, n)

    def for_(self, stmt: ast.For, env: dict, lanes: np.ndarray) -> dict:
        iterator = ast.unparse(stmt.iter.func)
        bounds = []
        for node in stmt.iter.args:
            value = self.expr(node, env, lanes)
            if not isinstance(value, Const) or isinstance(value.value, bool):
                raise _fail(node, f"loop bound `{_src(node)}` must be a compile-time integer")
            bounds.append(value.value)
        if len(bounds) == 3 and bounds[2] == 0:
            raise _fail(stmt, "range() step must not be zero")
        count = trip_count(bounds)  # len(range()) fails past 2**63, and constexpr bounds reach 2**256
        budget = self.trip_budget
        if count > budget:
            nested = " inside other loops" if budget < LOOP_TRIP_CAP else ""
            raise _fail(stmt, f"the loop runs {show_int(count)} times{nested}; the cap is {LOOP_TRIP_CAP} loop-body "
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
                    raise _fail(stmt, f"`{name}` is the compile-time constant {show_int(live.value)} (a constexpr "
                                      f"parameter or static_range index) and is reassigned in the `range` loop; "
                                      f"Triton does not compile that: use a new name, or tl.static_range")
                if new.ty != live.ty:
                    raise _fail(stmt, f"loop-carried `{name}` is {live.ty.name} before the loop but {new.ty.name} "
                                      f"after an iteration; Triton needs the type to stay the same")
                carried[name] = new
        out = {**env, **carried}
        for name in sorted(self.mentions(stmt.body) - set(carried) - {target}):
            out[name] = Dropped(f"`{name}` is defined inside the `range` loop at line {stmt.lineno}; Triton does not "
                                f"keep loop-local names after the loop: assign it before the loop")
        out[target] = Dropped(f"`{target}` is the index of the `range` loop at line {stmt.lineno}; Triton leaves it "
                              f"undefined after the loop")
        return out

    # --- expressions ---------------------------------------------------------------------------

    def lookup(self, name: str, env: dict, node: ast.AST) -> Value:
        value = env.get(name)
        if value is None:
            raise _fail(node, f"`{name}` is used before it is assigned")
        if isinstance(value, Dropped):
            raise _fail(node, value.why)
        return value

    def expr(self, node: ast.expr, env: dict, lanes: np.ndarray) -> Value:
        if isinstance(node, ast.Constant):
            return Const(node.value)
        if isinstance(node, ast.Name):
            return self.lookup(node.id, env, node)
        if isinstance(node, ast.BinOp):
            return self.binary(node.op, self.expr(node.left, env, lanes), self.expr(node.right, env, lanes), node,
                               lanes)
        if isinstance(node, ast.UnaryOp):
            return self.unary(node, self.expr(node.operand, env, lanes))
        if isinstance(node, ast.BoolOp):
            return self.boolean(node, (self.expr(v, env, lanes) for v in node.values))
        if isinstance(node, ast.Compare):
            return self.compare(node, env, lanes)
        if isinstance(node, ast.IfExp):
            return self.if_expr(node, env, lanes)
        if isinstance(node, ast.Call):
            return self.call(node, env, lanes)
        raise _fail(node, f"`{_src(node)}` cannot be evaluated")  # static_check admits nothing else

    def condition(self, node: ast.expr, env: dict, lanes: np.ndarray) -> bool | np.ndarray:
        """A compile-time bool, or the per-lane truth of a run-time condition."""
        value = self.expr(node, env, lanes)
        if isinstance(value, Const):
            return bool(value.value)
        if _any(value.poison, lanes.size):
            raise _fail(node, f"program {_first(value.poison, lanes)} branches on an undefined value "
                              f"(`{_src(node)}` depends on a shift by a negative or too-large amount)")
        truth = value.data if value.ty is INT1 else value.data != 0
        return np.broadcast_to(truth, lanes.shape).copy()

    def if_expr(self, node: ast.IfExp, env: dict, lanes: np.ndarray) -> Value:
        cond = self.condition(node.test, env, lanes)
        if isinstance(cond, bool):
            return self.expr(node.body if cond else node.orelse, env, lanes)
        values = []
        for branch, mask in ((node.body, cond), (node.orelse, ~cond)):
            sub_env = {name: self.restrict(env[name], mask) for name in self.mentions(branch) if name in env}
            values.append(self.to_tensor(self.expr(branch, sub_env, lanes[mask]), branch))
        then, other = values
        if then.ty != other.ty:
            raise _fail(node, f"the two sides of `{_src(node)}` are {then.ty.name} and {other.ty.name}; a conditional "
                              f"expression with a run-time condition needs one type")
        return _scatter(then, other, np.flatnonzero(cond), np.flatnonzero(~cond), lanes.size)

    def compare(self, node: ast.Compare, env: dict, lanes: np.ndarray) -> Value:
        def comparisons():
            left = self.expr(node.left, env, lanes)
            for op, right_node in zip(node.ops, node.comparators):
                right = self.expr(right_node, env, lanes)
                yield self.compare_pair(op, left, right, node)
                left = right
        if len(node.ops) == 1:
            return next(comparisons())
        return self.boolean(ast.BoolOp(op=ast.And(), values=[], lineno=node.lineno), comparisons())

    def compare_pair(self, op: ast.cmpop, left: Value, right: Value, node: ast.AST) -> Value:
        if isinstance(left, Const) and isinstance(right, Const):
            return Const(_CONST_COMPARE[type(op)](left.value, right.value))
        a, b = self.typecheck(left, right, node)
        return Tensor(INT1, _COMPARE[type(op)](a.data, b.data), _or(a.poison, b.poison))

    def boolean(self, node: ast.BoolOp, values) -> Value:
        """`and`/`or` as Triton's code generator applies them: constants short-circuit at compile
        time, run-time operands are all evaluated and must be booleans."""
        is_and = isinstance(node.op, ast.And)
        runtime: list[Tensor] = []
        value = None
        for value in values:
            if isinstance(value, Const):
                if bool(value.value) != is_and:
                    return value
                continue
            if value.ty is not INT1:
                raise _fail(node, f"`and`/`or`/`not` need booleans; an operand is {value.ty.name}: compare it, "
                                  f"e.g. `x != 0`")
            runtime.append(value)
        if not runtime:
            return value
        combine = np.logical_and if is_and else np.logical_or
        result = runtime[0]
        for other in runtime[1:]:
            result = Tensor(INT1, combine(result.data, other.data), _or(result.poison, other.poison))
        return result

    def unary(self, node: ast.UnaryOp, value: Value) -> Value:
        op = node.op
        if isinstance(value, Const):
            if isinstance(op, ast.Not):
                return Const(not value.value)
            return Const(_CONST_UNARY[type(op)](value.value))
        if isinstance(op, ast.UAdd):
            return value
        if isinstance(op, ast.Not):
            if value.ty is not INT1:
                raise _fail(node, f"`not` needs a boolean; `{_src(node.operand)}` is {value.ty.name}: write "
                                  f"`{_src(node.operand)} == 0`")
            return Tensor(INT1, np.logical_not(value.data), value.poison)
        if isinstance(op, ast.Invert):
            return Tensor(value.ty, np.invert(value.data), value.poison)
        if value.ty is INT1:  # 0 - x wraps to x at 1 bit
            return value
        return Tensor(value.ty, np.negative(value.data), value.poison)

    def binary(self, op: ast.operator, left: Value, right: Value, node: ast.AST, lanes: np.ndarray) -> Value:
        if isinstance(left, Const) and isinstance(right, Const):
            return self.const_binary(op, left.value, right.value, node)
        div_or_mod = isinstance(op, (ast.FloorDiv, ast.Mod))
        a, b = self.typecheck(left, right, node, div_or_mod)
        if a.ty is INT1 and not isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            return self.bool_arithmetic(op, a, b, node, lanes)
        poison = _or(a.poison, b.poison)
        if isinstance(op, (ast.Add, ast.Sub, ast.Mult)):
            return Tensor(a.ty, _ARITH[type(op)](a.data, b.data), poison)
        if isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            return Tensor(a.ty, _BITWISE[type(op)](a.data, b.data), poison)
        if div_or_mod:
            return self.divide(op, a, b, node, lanes)
        # `>>` is arithmetic when the tensor operand (the left one, if both are) is signed.
        tensor_operand = left if isinstance(left, Tensor) else right
        return _shift(op, a, b, arithmetic=tensor_operand.ty.signed)

    def bool_arithmetic(self, op: ast.operator, a: Tensor, b: Tensor, node: ast.AST, lanes: np.ndarray) -> Tensor:
        """Triton's bool is a 1-bit unsigned integer, so arithmetic on two booleans wraps mod 2."""
        poison = _or(a.poison, b.poison)
        if isinstance(op, (ast.Add, ast.Sub)):
            return Tensor(INT1, a.data ^ b.data, poison)
        if isinstance(op, ast.Mult):
            return Tensor(INT1, a.data & b.data, poison)
        if isinstance(op, (ast.LShift, ast.RShift)):  # only a shift by 0 is defined at 1 bit
            return Tensor(INT1, a.data, _or(poison, np.asarray(b.data)))
        self.divide(op, Tensor(UINT32, a.data), Tensor(UINT32, b.data, b.poison), node, lanes)  # raises on x // False
        quotient = isinstance(op, ast.FloorDiv)
        return Tensor(INT1, a.data if quotient else np.zeros_like(a.data), poison)

    def divide(self, op: ast.operator, a: Tensor, b: Tensor, node: ast.AST, lanes: np.ndarray) -> Tensor:
        """Signed: LLVM sdiv/srem (truncate toward zero, remainder takes the dividend's sign)."""
        zero = b.data == 0
        overflow = (a.data == a.ty.min) & (b.data == -1) if a.ty.signed else np.zeros((), dtype=bool)
        what = "divides" if isinstance(op, ast.FloorDiv) else "takes a remainder"
        if _any(b.poison, lanes.size):
            raise _fail(node, f"`{_src(node)}` {what} by an undefined value for program {_first(b.poison, lanes)}")
        if _any(zero, lanes.size):
            raise _fail(node, f"`{_src(node)}` {what} by zero for program {_first(zero, lanes)} (undefined in Triton): "
                              f"guard it with an `if` on the divisor")
        if _any(overflow, lanes.size):
            raise _fail(node, f"`{_src(node)}` overflows ({a.ty.name} minimum by -1) for program "
                              f"{_first(overflow, lanes)}")
        divisor = np.where(zero | overflow, np.ones((), a.ty.np_dtype), b.data)
        if a.ty.signed:
            remainder = np.fmod(a.data, divisor)
            result = remainder if isinstance(op, ast.Mod) else (a.data - remainder) // divisor
        else:
            result = a.data % divisor if isinstance(op, ast.Mod) else a.data // divisor
        return Tensor(a.ty, result, a.poison)

    def const_binary(self, op: ast.operator, x: int, y: int, node: ast.AST) -> Const:
        if isinstance(op, (ast.FloorDiv, ast.Mod)) and y == 0:
            raise _fail(node, f"`{_src(node)}` divides by zero at compile time")
        if isinstance(op, (ast.LShift, ast.RShift)) and not 0 <= y <= 256:
            raise _fail(node, f"`{_src(node)}` shifts by {show_int(y)}; compile-time shifts must be in [0, 256]")
        result = _CONST_BINOPS[type(op)](x, y)
        if abs(result) >= _CONST_LIMIT:
            raise _fail(node, f"`{_src(node)}` is larger than 2**256 at compile time")
        return Const(result)

    def typecheck(self, left: Value, right: Value, node: ast.AST, div_or_mod: bool = False) -> tuple[Tensor, Tensor]:
        """Triton's binary_op_type_checking_impl for integers: both operands cast to one type."""
        a_ty = scalar_type(left.value, node) if isinstance(left, Const) else left.ty
        b_ty = scalar_type(right.value, node) if isinstance(right, Const) else right.ty
        a_scalar, b_scalar = isinstance(left, Const), isinstance(right, Const)
        if a_scalar != b_scalar:  # a constant of no higher kind takes the tensor's type
            scalar_ty, tensor_ty = (a_ty, b_ty) if a_scalar else (b_ty, a_ty)
            if _kind(scalar_ty) <= _kind(tensor_ty):
                a_ty = b_ty = tensor_ty
        if div_or_mod and a_ty.signed != b_ty.signed:
            raise _fail(node, f"`{_src(node)}` mixes {a_ty.name} and {b_ty.name}; Triton refuses // and % across "
                              f"signedness: cast one side with .to()")
        ty = integer_promote(a_ty, b_ty)
        return self.cast(left, ty, node), self.cast(right, ty, node)

    def cast(self, value: Value, ty: IntType, node: ast.AST) -> Tensor:
        if isinstance(value, Tensor):
            return value if value.ty == ty else Tensor(ty, value.data.astype(ty.np_dtype), value.poison)
        v = value.value
        if v < 0 and not ty.signed:
            raise _fail(node, f"`{_src(node)}` combines the negative constant {show_int(v)} with an unsigned {ty.name} value; "
                              f"cast one side explicitly")
        if not ty.min <= v <= ty.max:
            raise _fail(node, f"the constant {show_int(v)} in `{_src(node)}` is out of range for {ty.name} (the other operand's "
                              f"type): cast that operand with .to(tl.int64)")
        return Tensor(ty, np.asarray(v, dtype=ty.np_dtype))

    def to_tensor(self, value: Value, node: ast.AST) -> Tensor:
        return value if isinstance(value, Tensor) else self.cast(value, scalar_type(value.value, node), node)

    # --- calls ---------------------------------------------------------------------------------

    def call(self, node: ast.Call, env: dict, lanes: np.ndarray) -> Value:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "to":
            value = self.expr(func.value, env, lanes)
            if isinstance(value, Const):
                raise _fail(node, f"`.to()` needs a run-time value; `{_src(func.value)}` is a compile-time constant")
            ty = CASTS[node.args[0].attr]
            return Tensor(ty, value.data.astype(ty.np_dtype), value.poison)
        name = ast.unparse(func)
        args = [self.expr(arg, env, lanes) for arg in node.args]
        if name in ("min", "max"):
            if all(isinstance(a, Const) for a in args):
                return Const((min if name == "min" else max)(a.value for a in args))
            result = args[0]
            for arg in args[1:]:
                result = self.extremum(name == "min", result, arg, node)
            return result
        if name in ("tl.minimum", "tl.maximum"):
            return self.extremum(name == "tl.minimum", args[0], args[1], node)
        if name == "tl.cdiv":  # a @triton.jit helper: (x + (div - 1)) // div, in the callers' semantics
            x, div = args
            return self.binary(ast.FloorDiv(), self.binary(ast.Add(), x, self.binary(ast.Sub(), div, Const(1),
                                                                                     node, lanes), node, lanes),
                               div, node, lanes)
        if name == "tl.where":
            return self.where(node, *args)
        if name == "tl.abs":
            x = self.to_tensor(args[0], node)
            return Tensor(x.ty, np.abs(x.data), x.poison) if x.ty.signed else x
        raise _fail(node, f"`{name}` cannot be called")  # static_check admits nothing else

    def extremum(self, is_min: bool, left: Value, right: Value, node: ast.AST) -> Tensor:
        a, b = self.typecheck(left, right, node)
        return Tensor(a.ty, (np.minimum if is_min else np.maximum)(a.data, b.data), _or(a.poison, b.poison))

    def where(self, node: ast.Call, cond: Value, x: Value, y: Value) -> Tensor:
        c = self.to_tensor(cond, node)
        truth = c.data if c.ty is INT1 else c.data != 0
        a, b = self.typecheck(x, y, node)
        poison = None
        if a.poison is not None or b.poison is not None:  # a select keeps only the chosen side's poison
            a_p = np.zeros((), bool) if a.poison is None else a.poison
            b_p = np.zeros((), bool) if b.poison is None else b.poison
            poison = np.where(truth, a_p, b_p)
        return Tensor(a.ty, np.where(truth, a.data, b.data), _or(poison, c.poison))

    # --- lanes ---------------------------------------------------------------------------------

    def mentions(self, owner: list[ast.stmt] | ast.expr) -> frozenset[str]:
        """Names a statement list or an expression of the tree mentions (cached by identity)."""
        key = id(owner)
        if key not in self._mentions:
            nodes = owner if isinstance(owner, list) else [owner]
            self._mentions[key] = frozenset(n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name))
        return self._mentions[key]

    @staticmethod
    def restrict(value, mask: np.ndarray):
        return value.select(mask) if isinstance(value, Tensor) else value

    @staticmethod
    def restrict_to(value: Value, lanes: np.ndarray, sub_lanes: np.ndarray) -> Value:
        """`value` (aligned with lanes) on the lanes of sub_lanes, a sorted subset of lanes."""
        if not isinstance(value, Tensor):
            return value
        mask = np.zeros(lanes.size, dtype=bool)
        mask[np.searchsorted(lanes, sub_lanes)] = True
        return value.select(mask)


def _scatter(then: Tensor, other: Tensor, t_pos: np.ndarray, e_pos: np.ndarray, n: int) -> Tensor:
    """One value per lane from the two branches of a run-time condition."""
    data = np.empty(n, dtype=then.ty.np_dtype)
    data[t_pos] = then.data
    data[e_pos] = other.data
    poison = None
    if then.poison is not None or other.poison is not None:
        poison = np.zeros(n, dtype=bool)
        poison[t_pos] = False if then.poison is None else then.poison
        poison[e_pos] = False if other.poison is None else other.poison
    return Tensor(then.ty, data, poison)


def _shift(op: ast.operator, a: Tensor, b: Tensor, arithmetic: bool) -> Tensor:
    """`<<`/`>>` on a's bits; a shift amount outside [0, bits) gives poison (LLVM semantics)."""
    bits = a.ty.bits
    amount = b.data.astype(np.int64) if b.ty.signed else b.data.astype(np.uint64)
    invalid = (amount < 0) | (amount >= bits) if b.ty.signed else amount >= bits
    safe = np.where(invalid, 0, amount).astype(a.ty.np_dtype)
    if isinstance(op, ast.LShift):
        result = np.left_shift(a.data, safe)
    else:
        view = np.dtype(f"{'i' if arithmetic else 'u'}{bits // 8}")
        result = np.right_shift(a.data.view(view), safe.view(view)).view(a.ty.np_dtype)
    return Tensor(a.ty, result, _or(a.poison, b.poison, invalid if np.any(invalid) else None))


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
    return _Evaluator(fn, hook, grid, constexprs).run()


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
