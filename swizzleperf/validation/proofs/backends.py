"""Arithmetic for the symbolic executor: z3 integers for proofs, Python ints to check a model.

(The third backend, exact bit-vectors, is swizzleperf.validation.proofs.bitvec.) Each gives one meaning to
every operation of a checked hook on Triton's integer types. The integer backend keeps each
run-time value as a mathematical integer and records, next to it, the condition under which
that stops being Triton's value: the result leaves its type's range (int32 wraps), or a
division's dividend is negative (then `z3.Int` division, which is Euclidean, differs from
Triton's truncation). If no grid meets any such condition, mathematical integers *are* Triton's
values everywhere, and a proof about them is a proof about the kernel. Division by zero,
INT_MIN // -1 and shifts by an amount outside [0, bits) are recorded the same way: the first two
are undefined in Triton, the last is LLVM poison.

The concrete backend computes exactly what compiled Triton computes (wrap-around, truncating
division) for one program, and logs the same events, so a solver's model can be checked and
explained without trusting the solver or the translation of the z3 terms.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import z3

from swizzleperf.remaps.evaluate.values import INT1, IntType
from swizzleperf.validation.proofs import direct

NodeKey = tuple[int, int]  # (line, column) of the operation in the hook's source

# Events that are undefined behaviour in Triton, so bugs of the hook. (A shift out of range is
# LLVM poison, harmless if a select discards it; the prover does not track that, see concrete.py.)
# The other events, "overflow" and "negative_dividend", only mean the integer encoding does not apply.
UNDEFINED = ("div_zero", "div_overflow")


def key(node: ast.AST) -> NodeKey:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def wrap(value: int, ty: IntType) -> int:
    """`value` reduced to ty's range, as two's-complement hardware does."""
    if ty is INT1:
        return int(bool(value & 1))
    value %= 2 ** ty.bits
    return value - 2 ** ty.bits if ty.signed and value > ty.max else value


def fits(value: int, ty: IntType) -> bool:
    return ty.min <= value <= ty.max


@dataclass
class Violation:
    kind: str
    node: NodeKey
    condition: object  # z3 BoolRef for the z3 backend, True for a concrete event
    detail: str = ""


@dataclass
class BackendState:
    """What every backend tracks: the current path condition, and the events recorded under it."""

    pc: object = True
    violations: list[Violation] = field(default_factory=list)


class Z3Logic:
    """The boolean and select terms every z3 backend builds the same way."""

    @staticmethod
    def ite(cond, a, b):
        return z3.If(cond, a, b)

    and_, or_, not_ = staticmethod(z3.And), staticmethod(z3.Or), staticmethod(z3.Not)

    @staticmethod
    def bool_xor(a, b):
        return z3.Xor(a, b)


class IntBackend(Z3Logic, BackendState):
    """Run-time values as z3 Ints holding the mathematical value; see the module docstring."""

    def __init__(self, ctx: z3.Context, signed_divisions: frozenset[NodeKey] = frozenset()):
        super().__init__(pc=z3.BoolVal(True, ctx))
        self.ctx = ctx
        self.true, self.false = z3.BoolVal(True, ctx), z3.BoolVal(False, ctx)
        self.signed_divisions = signed_divisions
        self.bit_vectors = False  # some bitwise operation had to go through bit vectors (slow for z3)

    def note(self, kind: str, node: ast.AST, bad) -> None:
        """Record `bad` under the path condition (built through direct, as z3.And would: ~1 K a proof)."""
        terms = isinstance(bad, z3.BoolRef) and isinstance(self.pc, z3.BoolRef)
        bad = z3.simplify(direct.and_(self.pc, bad) if terms else z3.And(self.pc, bad))
        if not z3.is_false(bad):
            self.violations.append(Violation(kind, key(node), bad))

    def literal(self, value: int, ty: IntType):
        return z3.BoolVal(bool(value), self.ctx) if ty is INT1 else z3.IntVal(int(value), self.ctx)

    @staticmethod
    def index(term, ty: IntType):
        """A result as a logical index, comparable with the grid extents."""
        return term

    @staticmethod
    def constant(term) -> int | None:
        term = z3.simplify(term)
        return term.as_long() if z3.is_int_value(term) else None

    def checked(self, value, ty: IntType, node: ast.AST):
        if isinstance(value, z3.ArithRef):  # the terms the operators make, in their order
            self.note("overflow", node, direct.or_(direct.lt(value, ty.min), direct.gt(value, ty.max)))
        else:
            self.note("overflow", node, z3.Or(value < ty.min, value > ty.max))
        return value

    def divide(self, a, b, ty: IntType, node: ast.AST, remainder: bool):
        self.note("div_zero", node, b == 0)
        if ty.signed:
            self.note("div_overflow", node, z3.And(a == ty.min, b == -1))
        if ty.signed and key(node) in self.signed_divisions:
            if remainder:
                return z3.If(a >= 0, a % b, -((-a) % b))
            return z3.If(a >= 0, a / b, -((-a) / b))
        if ty.signed:  # Euclidean division equals truncation when the dividend is not negative
            self.note("negative_dividend", node, a < 0)
        return a % b if remainder else a / b

    def bitwise(self, op: type, a, b, ty: IntType):
        mask = self.constant(b)
        if op is ast.BitAnd and mask is not None and mask >= 0 and (mask + 1) & mask == 0:
            return a % (mask + 1)  # Euclidean remainder is the two's-complement low bits
        self.bit_vectors = True
        x, y = z3.Int2BV(a, ty.bits), z3.Int2BV(b, ty.bits)
        bits = {ast.BitAnd: x & y, ast.BitOr: x | y, ast.BitXor: x ^ y}[op]
        return z3.BV2Int(bits, is_signed=ty.signed)

    def shift(self, a, b, ty: IntType, node: ast.AST, left: bool, arithmetic: bool):
        self.note("shift_range", node, z3.Or(b < 0, b >= ty.bits))
        amount = self.constant(b)
        if amount is not None and 0 <= amount < ty.bits and (left or arithmetic == ty.signed):
            return self.checked(a * 2 ** amount, ty, node) if left else a / 2 ** amount
        self.bit_vectors = True
        x, y = z3.Int2BV(a, ty.bits), z3.Int2BV(b, ty.bits)
        bits = x << y if left else (x >> y if arithmetic else z3.LShR(x, y))
        return z3.BV2Int(bits, is_signed=ty.signed)

    def cast(self, a, source: IntType, target: IntType):
        if source is INT1:
            return z3.If(a, 1, 0) if target is not INT1 else a
        if target is INT1:
            return a != 0
        if source.min >= target.min and source.max <= target.max:
            return a
        size = 2 ** target.bits
        return z3.If(z3.And(a >= target.min, a <= target.max), a, (a - target.min) % size + target.min)

    compare = staticmethod(lambda op, a, b, ty: compare_values(op, a, b, ty))


def compare_values(op: type, a, b, ty: IntType):
    """A comparison of two values of type ty, as numbers (booleans: false < true)."""
    if op is ast.Eq:
        return a == b
    if op is ast.NotEq:
        return a != b
    if ty is INT1 and not isinstance(a, bool):
        return {ast.Lt: z3.And(z3.Not(a), b), ast.LtE: z3.Or(z3.Not(a), b), ast.Gt: z3.And(a, z3.Not(b)),
                ast.GtE: z3.Or(a, z3.Not(b))}[op]
    return {ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b, ast.GtE: a >= b}[op]


class ConcreteBackend(BackendState):
    """One program's values, exactly as compiled Triton computes them; events where pc holds."""

    true, false = True, False

    def note(self, kind: str, node: ast.AST, bad: bool, detail: str = "") -> None:
        if self.pc and bad:
            self.violations.append(Violation(kind, key(node), True, detail))

    @staticmethod
    def literal(value: int, ty: IntType):
        return bool(value) if ty is INT1 else wrap(int(value), ty)

    @staticmethod
    def ite(cond, a, b):
        return a if cond else b

    @staticmethod
    def and_(*values):
        return all(values)

    @staticmethod
    def or_(*values):
        return any(values)

    @staticmethod
    def not_(value):
        return not value

    @staticmethod
    def bool_xor(a, b):
        return a != b

    @staticmethod
    def constant(term) -> int | None:
        return int(term)

    def checked(self, value: int, ty: IntType, node: ast.AST) -> int:
        self.note("overflow", node, not fits(value, ty), f"= {value}")
        return wrap(value, ty)

    def divide(self, a: int, b: int, ty: IntType, node: ast.AST, remainder: bool) -> int:
        self.note("div_zero", node, b == 0, f"{a} by 0")
        self.note("div_overflow", node, ty.signed and a == ty.min and b == -1, f"{a} by -1")
        self.note("negative_dividend", node, a < 0)
        if b == 0:
            return 0
        quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        return wrap(a - b * quotient if remainder else quotient, ty)

    @staticmethod
    def bitwise(op: type, a: int, b: int, ty: IntType) -> int:
        return wrap({ast.BitAnd: a & b, ast.BitOr: a | b, ast.BitXor: a ^ b}[op], ty)

    def shift(self, a: int, b: int, ty: IntType, node: ast.AST, left: bool, arithmetic: bool) -> int:
        self.note("shift_range", node, not 0 <= b < ty.bits, f"by {b}")
        if not 0 <= b < ty.bits:
            return 0
        if left:
            return wrap(a << b, ty)
        bits = wrap(a, IntType("s", ty.bits, True, int)) if arithmetic else a % 2 ** ty.bits
        return wrap(bits >> b, ty)

    @staticmethod
    def cast(a, source: IntType, target: IntType):
        if target is INT1:
            return bool(a)
        return wrap(int(a), target)

    compare = staticmethod(lambda op, a, b, ty: compare_values(op, a, b, ty))

    @staticmethod
    def index(term, ty: IntType):
        return term
