"""Values of the symbolic executor, with Triton's split between compile time and run time.

Literals, constexpr parameters and `tl.static_range` indices are compile-time Python ints (with
Python's own semantics, as Triton folds them); everything the grid or the program id touches is
a typed run-time value whose term belongs to a backend (z3 or concrete). The typing rules are
remaps/evaluate's (they were checked there against Triton's front end), reused rather than restated.
"""

from __future__ import annotations

import ast

from swizzleperf.errors import RemapRejected
from swizzleperf.remaps.evaluate.values import INT1, IntType, integer_promote, scalar_type


class ProofError(Exception):
    """The hook cannot be translated: `kind` is "invalid" (Triton would reject it too) or
    "unsupported" (valid, but outside what the prover translates)."""

    def __init__(self, kind: str, node: ast.AST | None, message: str):
        where = f"line {node.lineno}: " if node is not None and hasattr(node, "lineno") else ""
        super().__init__(where + message)
        self.kind = kind
        self.line = getattr(node, "lineno", None)


def invalid(node: ast.AST | None, message: str) -> ProofError:
    return ProofError("invalid", node, message)


def unsupported(node: ast.AST | None, message: str) -> ProofError:
    return ProofError("unsupported", node, message)


class Const:
    """A compile-time value. Each assignment makes a new object: identity tells rebinding."""

    __slots__ = ("value",)

    def __init__(self, value: int | bool):
        self.value = value


class Run:
    """A run-time value of type `ty`; `term` is the backend's (a z3 term or a Python int/bool)."""

    __slots__ = ("ty", "term")

    def __init__(self, ty: IntType, term):
        self.ty = ty
        self.term = term


Value = Const | Run


def type_of_constant(value: int | bool, node: ast.AST) -> IntType:
    try:
        return scalar_type(value, node)
    except RemapRejected as exc:
        raise invalid(None, exc.reason) from None


def _kind(ty: IntType) -> int:
    return 0 if ty is INT1 else 1  # bool < integer; signed and unsigned are one kind


def operand_type(left: Value, right: Value, node: ast.AST, div_or_mod: bool) -> IntType:
    """The type both operands are cast to (Triton's binary_op_type_checking_impl for integers)."""
    a_ty = type_of_constant(left.value, node) if isinstance(left, Const) else left.ty
    b_ty = type_of_constant(right.value, node) if isinstance(right, Const) else right.ty
    if isinstance(left, Const) != isinstance(right, Const):  # a constant of no higher kind takes the other's type
        scalar_ty, tensor_ty = (a_ty, b_ty) if isinstance(left, Const) else (b_ty, a_ty)
        if _kind(scalar_ty) <= _kind(tensor_ty):
            a_ty = b_ty = tensor_ty
    if div_or_mod and a_ty.signed != b_ty.signed:
        raise invalid(node, f"`{ast.unparse(node)}` mixes {a_ty.name} and {b_ty.name}; Triton refuses // and % "
                            f"across signedness")
    return integer_promote(a_ty, b_ty)


def constant_as(value: int | bool, ty: IntType, node: ast.AST) -> int:
    """A compile-time constant meeting a run-time operand of type ty: it must fit."""
    if value < 0 and not ty.signed:
        raise invalid(node, f"`{ast.unparse(node)}` combines the negative constant {value} with an unsigned "
                            f"{ty.name} value")
    if not ty.min <= value <= ty.max:
        raise invalid(node, f"the constant {value} in `{ast.unparse(node)}` is out of range for {ty.name}")
    return int(value)
