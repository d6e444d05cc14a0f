"""Integer comparisons and connectives built straight through z3's C API, for the terms built by the thousand.

z3's Python operators coerce and sort-check every operand in Python: ~15 microseconds a node. The product
theorems (products.py) are ~30 K nodes per family proof, 0.1 s of it. These builders make the very terms the
operators make, node for node and in the same order (a numeral operand before the node that reads it, as the
operators' coercion creates it), so term ids, and with them z3's answers and work, do not change. Operands
are Int or Bool terms of one context; numeral operands are Python ints.
"""

from __future__ import annotations

import z3
from z3 import z3core
from z3.z3 import _to_expr_ref  # the term's Python class from its sort, as every z3 call returns it


def _ast(ctx: z3.Context, value) -> z3.ExprRef:
    """An operand as a term: a Python int becomes the numeral the operators' coercion makes."""
    return z3.IntVal(value, ctx) if isinstance(value, int) else value


def _array(terms: list):
    return (z3.Ast * len(terms))(*[t.as_ast() for t in terms])


def _relation(make):
    """The builder of `a OP b` (a a term, b a term or a Python int) for z3's C maker `make` of a Bool term."""
    def build(a, b) -> z3.BoolRef:
        ctx = a.ctx
        a, b = _ast(ctx, a), _ast(ctx, b)
        return z3.BoolRef(make(ctx.ref(), a.as_ast(), b.as_ast()), ctx)
    return build


lt, le, gt, ge, eq, implies = (_relation(make) for make in (z3core.Z3_mk_lt, z3core.Z3_mk_le, z3core.Z3_mk_gt,
                                                            z3core.Z3_mk_ge, z3core.Z3_mk_eq, z3core.Z3_mk_implies))


def and_(*terms) -> z3.BoolRef:
    ctx = terms[0].ctx
    return z3.BoolRef(z3core.Z3_mk_and(ctx.ref(), len(terms), _array(list(terms))), ctx)


def or_(*terms) -> z3.BoolRef:
    ctx = terms[0].ctx
    return z3.BoolRef(z3core.Z3_mk_or(ctx.ref(), len(terms), _array(list(terms))), ctx)


def add(a, b) -> z3.ArithRef:
    """a + b for two terms (the operator's two-argument sum)."""
    return z3.ArithRef(z3core.Z3_mk_add(a.ctx.ref(), 2, _array([a, b])), a.ctx)


def scale(value: int, term) -> z3.ArithRef:
    """`value * term` as the operator writes it: the numeral first."""
    ctx = term.ctx
    factor = _ast(ctx, value)
    return z3.ArithRef(z3core.Z3_mk_mul(ctx.ref(), 2, _array([factor, term])), ctx)


def neg(term) -> z3.ArithRef:
    return z3.ArithRef(z3core.Z3_mk_unary_minus(term.ctx.ref(), term.as_ast()), term.ctx)


def app(decl: z3.FuncDeclRef, kids: list) -> z3.ExprRef:
    """`decl(*kids)` for operands already of its domain's sorts (a term rebuilt over rewritten children):
    the call's per-operand sort casts are what cost."""
    ctx = decl.ctx
    return _to_expr_ref(z3core.Z3_mk_app(ctx.ref(), decl.as_ast(), len(kids), _array(kids)), ctx)
