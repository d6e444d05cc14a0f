"""The evaluator's values and the operations on them that need no tree: Triton's integer types and
promotion, compile-time constants and run-time tensors (one lane per program, with poison), and the
lane-wise merge and shifts."""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass

import numpy as np

from swizzleperf.errors import RemapRejected
from swizzleperf.untrusted.parse import echo, show_int

CONST_LIMIT = 2 ** 256  # compile-time ints beyond this are a denial of service, not a remap


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
    raise reject(where, f"the integer {show_int(value)} does not fit in 64 bits")


def merged_return_types(previous: list | None, types: list, stmt: ast.Return) -> list:
    """The types a hook's returns have once `stmt`'s `types` (an IntType or a constant each) join those of the
    returns before it (`previous`, None for the first): Triton gives a function one return type, so constants
    must be of equal value or a value's type equal on every path."""
    if previous is None:
        return types
    merged = []
    for k, (a, b) in enumerate(zip(previous, types)):
        if not isinstance(a, IntType) and not isinstance(b, IntType) and a.value == b.value:
            merged.append(a)
            continue
        ta = a if isinstance(a, IntType) else scalar_type(a.value, stmt)
        tb = b if isinstance(b, IntType) else scalar_type(b.value, stmt)
        if ta != tb:
            raise reject(stmt, f"return value {k + 1} is {tb.name} here but {ta.name} on another path; "
                               f"Triton needs one return type: cast with .to(tl.{ta.name})")
        merged.append(ta)
    return merged


def check_branch_types(name: str, live, t_val, e_val, stmt: ast.If) -> None:
    """A name a run-time `if` assigns must keep one type: the type it had before (`live`, None if it had none)
    or, new in both branches, the same type in each; a compile-time constant (no `.ty`) cannot be reassigned."""
    if live is not None and not hasattr(live, "ty"):
        raise reject(stmt, f"`{name}` is the compile-time constant {show_int(live.value)} (a constexpr parameter or "
                           f"static_range index) and is reassigned under the run-time condition "
                           f"`{source_of(stmt.test)}`; Triton does not compile that: use a new name")
    if live is not None:
        for value, branch in ((t_val, "then"), (e_val, "else")):
            if value.ty != live.ty:
                raise reject(stmt, f"`{name}` is {live.ty.name} before the `if` but the {branch} branch makes it "
                                   f"{value.ty.name}; Triton needs the same type: cast with .to(tl.{live.ty.name})")
    elif t_val.ty != e_val.ty:
        raise reject(stmt, f"`{name}` is {t_val.ty.name} in the then branch and {e_val.ty.name} in the else "
                           f"branch; Triton needs the same type in both")


def integer_promote(a: IntType, b: IntType) -> IntType:
    """C's usual arithmetic conversions, as Triton implements them."""
    if a.signed == b.signed:
        return a if a.bits > b.bits else b
    if not a.signed:
        return a if a.bits >= b.bits else b
    return b if b.bits >= a.bits else a


def kind_of(ty: IntType) -> int:
    return 0 if ty is INT1 else 1  # bool < integer; signed and unsigned are one kind


def reject(node: ast.AST | None, message: str) -> RemapRejected:
    where = f"line {node.lineno}: " if node is not None and hasattr(node, "lineno") else ""
    return RemapRejected("evaluation", echo(where + message, 600))  # bounded: it may quote candidate text


def source_of(node: ast.AST) -> str:
    return echo(node)


def any_lane(mask: np.ndarray | None, n: int) -> bool:
    return mask is not None and n > 0 and bool(np.broadcast_to(mask, (n,)).any())


def first_lane(mask: np.ndarray, lanes: np.ndarray) -> int:
    return int(lanes[int(np.flatnonzero(np.broadcast_to(mask, lanes.shape))[0])])


def or_masks(*masks: np.ndarray | None) -> np.ndarray | None:
    present = [m for m in masks if m is not None]
    if not present:
        return None
    out = present[0]
    for m in present[1:]:
        out = out | m
    return out


CONST_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                 ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.LShift: operator.lshift,
                 ast.RShift: operator.rshift, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
                 ast.BitXor: operator.xor}
CONST_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}
COMPARE = {ast.Eq: np.equal, ast.NotEq: np.not_equal, ast.Lt: np.less, ast.LtE: np.less_equal,
            ast.Gt: np.greater, ast.GtE: np.greater_equal}
CONST_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
                  ast.Gt: operator.gt, ast.GtE: operator.ge}
ARITH = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply}
BITWISE = {ast.BitAnd: np.bitwise_and, ast.BitOr: np.bitwise_or, ast.BitXor: np.bitwise_xor}


def scatter(then: Tensor, other: Tensor, t_pos: np.ndarray, e_pos: np.ndarray, n: int) -> Tensor:
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


def shift(op: ast.operator, a: Tensor, b: Tensor, arithmetic: bool) -> Tensor:
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
    return Tensor(a.ty, result, or_masks(a.poison, b.poison, invalid if np.any(invalid) else None))
