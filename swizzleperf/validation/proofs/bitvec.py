"""Arithmetic on z3 bit-vectors: compiled Triton's integers exactly, wrap-around included.

The mathematical-integer encoding (backends.IntBackend) is what z3 proves fastest when the
hook divides by grid extents, but it needs "no intermediate overflows" as a side condition.
Bit-vectors need none: an int32 is a 32-bit vector, `+` wraps, `//` is bvsdiv (truncating),
`%` is bvsrem (the dividend's sign), `>>` is arithmetic on signed types. The SAT solver behind
them is fastest when the constants are powers of two (the chunked and grouped orders), and it
proves hooks whose intermediates wrap and come back. Only undefined operations (division by
zero, INT_MIN // -1, shifts out of range) are recorded, as with the other backends.
"""

from __future__ import annotations

import ast

import z3

from swizzleperf.remaps.evaluate.values import INT1, IntType
from swizzleperf.validation.proofs.backends import BackendState, Violation, Z3Logic, compare_values, key

INDEX_BITS = 64  # results and extents are compared as int64, as remaps/evaluate compares them


class BitVecBackend(Z3Logic, BackendState):
    """Run-time values as bit-vectors of their type's width (int1 as Bool)."""

    def __init__(self, ctx: z3.Context):
        super().__init__(pc=z3.BoolVal(True, ctx))
        self.ctx = ctx
        self.true, self.false = z3.BoolVal(True, ctx), z3.BoolVal(False, ctx)

    def note(self, kind: str, node: ast.AST, bad) -> None:
        bad = z3.simplify(z3.And(self.pc, bad))
        if not z3.is_false(bad):
            self.violations.append(Violation(kind, key(node), bad))

    def literal(self, value: int, ty: IntType):
        if ty is INT1:
            return z3.BoolVal(bool(value), self.ctx)
        return z3.BitVecVal(int(value) % 2 ** ty.bits, ty.bits, self.ctx)

    @staticmethod
    def index(term, ty: IntType):
        extend = z3.SignExt if ty.signed else z3.ZeroExt
        return extend(INDEX_BITS - ty.bits, term) if ty.bits < INDEX_BITS else term

    @staticmethod
    def checked(value, ty: IntType, node: ast.AST):
        return value  # bit-vector arithmetic already wraps as the hardware does

    def divide(self, a, b, ty: IntType, node: ast.AST, remainder: bool):
        self.note("div_zero", node, b == 0)
        if ty.signed:
            self.note("div_overflow", node, z3.And(a == ty.min % 2 ** ty.bits, b == -1))
            return z3.SRem(a, b) if remainder else a / b
        return z3.URem(a, b) if remainder else z3.UDiv(a, b)

    @staticmethod
    def bitwise(op: type, a, b, ty: IntType):
        return {ast.BitAnd: a & b, ast.BitOr: a | b, ast.BitXor: a ^ b}[op]

    def shift(self, a, b, ty: IntType, node: ast.AST, left: bool, arithmetic: bool):
        self.note("shift_range", node, z3.Or(b < 0, b >= ty.bits) if ty.signed else z3.UGE(b, ty.bits))
        if left:
            return a << b
        return a >> b if arithmetic else z3.LShR(a, b)

    @staticmethod
    def cast(a, source: IntType, target: IntType):
        if source is INT1:
            return a if target is INT1 else z3.If(a, z3.BitVecVal(1, target.bits, a.ctx),
                                                  z3.BitVecVal(0, target.bits, a.ctx))
        if target is INT1:
            return a != 0
        if target.bits < source.bits:
            return z3.Extract(target.bits - 1, 0, a)
        if target.bits > source.bits:
            return (z3.SignExt if source.signed else z3.ZeroExt)(target.bits - source.bits, a)
        return a

    @staticmethod
    def compare(op: type, a, b, ty: IntType):
        if ty is INT1 or ty.signed or op in (ast.Eq, ast.NotEq):
            return compare_values(op, a, b, ty)
        return {ast.Lt: z3.ULT, ast.LtE: z3.ULE, ast.Gt: z3.UGT, ast.GtE: z3.UGE}[op](a, b)

    @staticmethod
    def constant(term) -> int | None:
        term = z3.simplify(term)
        return term.as_long() if z3.is_bv_value(term) else None

