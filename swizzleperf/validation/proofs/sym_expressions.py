"""Expressions of the symbolic executor: Triton's typing, then the backend's arithmetic.

Compile-time operands fold in Python (Python's floor division, as Triton folds constexprs);
anything else is cast to one type by remaps/evaluate's promotion rules and handed to the backend,
which knows int32 wrap-around and C's truncating division. Constructs the prover does not
translate raise ProofError("unsupported").
"""

from __future__ import annotations

import ast
import operator

from swizzleperf.remaps.evaluate.values import CASTS, INT1, Dropped
from swizzleperf.validation.proofs.sym_values import (
    Const,
    Run,
    Value,
    constant_as,
    invalid,
    operand_type,
    type_of_constant,
    unsupported,
)

_CONST_LIMIT = 2 ** 256  # as remaps/evaluate: a larger compile-time int is a denial of service, not a remap
_CONST_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                 ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.LShift: operator.lshift,
                 ast.RShift: operator.rshift, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
                 ast.BitXor: operator.xor}
_CONST_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}
_CONST_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
                  ast.Gt: operator.gt, ast.GtE: operator.ge}
_BITWISE = (ast.BitAnd, ast.BitOr, ast.BitXor)


class Expressions:
    """Mixed into the Executor: `self.b` is the backend, whose `pc` is the current path condition."""

    b: object

    def lookup(self, name: str, env: dict, node: ast.AST) -> Value:
        value = env.get(name)
        if value is None:
            raise invalid(node, f"`{name}` is used before it is assigned")
        if isinstance(value, Dropped):
            raise invalid(node, value.why)
        return value

    def expr(self, node: ast.expr, env: dict) -> Value:
        if isinstance(node, ast.Constant):
            return Const(node.value)
        if isinstance(node, ast.Name):
            return self.lookup(node.id, env, node)
        if isinstance(node, ast.BinOp):
            return self.binary(node.op, self.expr(node.left, env), self.expr(node.right, env), node)
        if isinstance(node, ast.UnaryOp):
            return self.unary(node, self.expr(node.operand, env))
        if isinstance(node, ast.BoolOp):
            return self.boolean(node, (self.expr(v, env) for v in node.values))
        if isinstance(node, ast.Compare):
            return self.compare(node, env)
        if isinstance(node, ast.IfExp):
            return self.if_expr(node, env)
        if isinstance(node, ast.Call):
            return self.call(node, env)
        raise unsupported(node, f"`{ast.unparse(node)}` is not translated")

    def to_run(self, value: Value, node: ast.AST) -> Run:
        """Assignments and selects store run-time values, even of a constant (as compiled Triton)."""
        if isinstance(value, Run):
            return value
        ty = type_of_constant(value.value, node)
        return Run(ty, self.b.literal(value.value, ty))

    def as_type(self, value: Value, ty, node: ast.AST):
        if isinstance(value, Const):
            return self.b.literal(constant_as(value.value, ty, node), ty)
        return value.term if value.ty == ty else self.b.cast(value.term, value.ty, ty)

    def operands(self, left: Value, right: Value, node: ast.AST, div_or_mod: bool = False):
        ty = operand_type(left, right, node, div_or_mod)
        return ty, self.as_type(left, ty, node), self.as_type(right, ty, node)

    def condition(self, node: ast.expr, env: dict):
        """A Python bool at compile time, else the backend's truth value."""
        value = self.expr(node, env)
        if isinstance(value, Const):
            return bool(value.value)
        return self.truth(value)

    def truth(self, value: Run):
        zero = self.b.literal(0, value.ty)
        return value.term if value.ty is INT1 else self.b.compare(ast.NotEq, value.term, zero, value.ty)

    def if_expr(self, node: ast.IfExp, env: dict) -> Value:
        cond = self.condition(node.test, env)
        if isinstance(cond, bool):
            return self.expr(node.body if cond else node.orelse, env)
        entry, sides = self.b.pc, []
        for branch, guard in ((node.body, cond), (node.orelse, self.b.not_(cond))):
            self.b.pc = self.b.and_(entry, guard)
            sides.append(self.to_run(self.expr(branch, env), branch))
        self.b.pc = entry
        then, other = sides
        if then.ty != other.ty:
            raise invalid(node, f"the two sides of `{ast.unparse(node)}` are {then.ty.name} and {other.ty.name}")
        return Run(then.ty, self.b.ite(cond, then.term, other.term))

    def compare(self, node: ast.Compare, env: dict) -> Value:
        def pairs():
            left = self.expr(node.left, env)
            for op, right_node in zip(node.ops, node.comparators):
                right = self.expr(right_node, env)
                if isinstance(left, Const) and isinstance(right, Const):
                    yield Const(_CONST_COMPARE[type(op)](left.value, right.value))
                else:
                    ty, a, b = self.operands(left, right, node)
                    yield Run(INT1, self.b.compare(type(op), a, b, ty))
                left = right
        if len(node.ops) == 1:
            return next(pairs())
        return self.boolean(ast.BoolOp(op=ast.And(), values=[], lineno=node.lineno), pairs())

    def boolean(self, node: ast.BoolOp, values) -> Value:
        """Constants short-circuit at compile time; run-time operands are all evaluated, booleans only."""
        is_and = isinstance(node.op, ast.And)
        runtime, value = [], None
        for value in values:
            if isinstance(value, Const):
                if bool(value.value) != is_and:
                    return value
                continue
            if value.ty is not INT1:
                raise invalid(node, f"`and`/`or`/`not` need booleans; an operand is {value.ty.name}")
            runtime.append(value.term)
        if not runtime:
            return value
        return Run(INT1, (self.b.and_ if is_and else self.b.or_)(*runtime))

    def unary(self, node: ast.UnaryOp, value: Value) -> Value:
        op = node.op
        if isinstance(value, Const):
            return Const(not value.value) if isinstance(op, ast.Not) else Const(_CONST_UNARY[type(op)](value.value))
        if isinstance(op, ast.UAdd):
            return value
        if isinstance(op, ast.Not) or (isinstance(op, ast.Invert) and value.ty is INT1):
            if value.ty is not INT1:
                raise invalid(node, f"`not` needs a boolean; `{ast.unparse(node.operand)}` is {value.ty.name}")
            return Run(INT1, self.b.not_(value.term))
        if value.ty is INT1:  # 0 - x wraps to x at 1 bit
            return value
        if isinstance(op, ast.Invert):
            term = -value.term - 1 if value.ty.signed else value.ty.max - value.term
            return Run(value.ty, term)
        return Run(value.ty, self.b.checked(-value.term, value.ty, node))

    def binary(self, op: ast.operator, left: Value, right: Value, node: ast.AST) -> Value:
        if isinstance(left, Const) and isinstance(right, Const):
            return self.const_binary(op, left.value, right.value, node)
        div_or_mod = isinstance(op, (ast.FloorDiv, ast.Mod))
        ty, a, b = self.operands(left, right, node, div_or_mod)
        if ty is INT1:
            return Run(INT1, self.bool_binary(op, a, b, node))
        if isinstance(op, (ast.Add, ast.Sub, ast.Mult)):
            math = a + b if isinstance(op, ast.Add) else a - b if isinstance(op, ast.Sub) else a * b
            return Run(ty, self.b.checked(math, ty, node))
        if isinstance(op, _BITWISE):
            return Run(ty, self.b.bitwise(type(op), a, b, ty))
        if div_or_mod:
            return Run(ty, self.b.divide(a, b, ty, node, remainder=isinstance(op, ast.Mod)))
        signed_tensor = (left if isinstance(left, Run) else right).ty.signed  # `>>` follows the tensor operand
        return Run(ty, self.b.shift(a, b, ty, node, left=isinstance(op, ast.LShift), arithmetic=signed_tensor))

    def bool_binary(self, op: ast.operator, a, b, node: ast.AST):
        """Triton's bool is a 1-bit integer: + and - are xor, * is and; the rest is not translated."""
        if isinstance(op, (ast.Add, ast.Sub, ast.BitXor)):
            return self.b.bool_xor(a, b)
        if isinstance(op, (ast.Mult, ast.BitAnd)):
            return self.b.and_(a, b)
        if isinstance(op, ast.BitOr):
            return self.b.or_(a, b)
        raise unsupported(node, f"`{ast.unparse(node)}` divides or shifts booleans; the prover does not translate it")

    @staticmethod
    def const_binary(op: ast.operator, x: int, y: int, node: ast.AST) -> Const:
        if isinstance(op, (ast.FloorDiv, ast.Mod)) and y == 0:
            raise invalid(node, f"`{ast.unparse(node)}` divides by zero at compile time")
        if isinstance(op, (ast.LShift, ast.RShift)) and not 0 <= y <= 256:
            raise invalid(node, f"`{ast.unparse(node)}` shifts by {y}; compile-time shifts must be in [0, 256]")
        if isinstance(op, ast.Mult) and max(abs(x), abs(y)) >= _CONST_LIMIT:
            raise invalid(node, f"`{ast.unparse(node)}` is larger than 2**256 at compile time")
        result = _CONST_BINOPS[type(op)](x, y)
        if abs(result) >= _CONST_LIMIT:
            raise invalid(node, f"`{ast.unparse(node)}` is larger than 2**256 at compile time")
        return Const(result)

    # --- calls ---------------------------------------------------------------------------------

    def call(self, node: ast.Call, env: dict) -> Value:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "to":
            value = self.expr(func.value, env)
            if isinstance(value, Const):
                raise invalid(node, f"`.to()` needs a run-time value; `{ast.unparse(func.value)}` is a constant")
            ty = CASTS[node.args[0].attr]
            return Run(ty, self.b.cast(value.term, value.ty, ty))
        name = ast.unparse(func)
        args = [self.expr(arg, env) for arg in node.args]
        if name in ("min", "max") and all(isinstance(a, Const) for a in args):
            return Const((min if name == "min" else max)(a.value for a in args))
        if name in ("min", "max", "tl.minimum", "tl.maximum"):
            result = args[0]
            for arg in args[1:]:
                result = self.extremum(name.endswith("min") or name.endswith("minimum"), result, arg, node)
            return result
        if name == "tl.cdiv":  # a @triton.jit helper: (x + (div - 1)) // div, in the callers' semantics
            x, div = args
            minus_one = self.binary(ast.Sub(), div, Const(1), node)
            return self.binary(ast.FloorDiv(), self.binary(ast.Add(), x, minus_one, node), div, node)
        if name == "tl.where":
            return self.where(node, *args)
        if name == "tl.abs":
            return self.absolute(node, self.to_run(args[0], node))
        raise unsupported(node, f"`{name}` is not translated")

    def extremum(self, is_min: bool, left: Value, right: Value, node: ast.AST) -> Run:
        ty, a, b = self.operands(left, right, node)
        if ty is INT1:
            return Run(INT1, (self.b.and_ if is_min else self.b.or_)(a, b))
        return Run(ty, self.b.ite(self.b.compare(ast.Lt if is_min else ast.Gt, a, b, ty), a, b))

    def where(self, node: ast.Call, cond: Value, x: Value, y: Value) -> Run:
        """A select: both sides are computed on every program (a division in either can fail)."""
        truth = self.truth(self.to_run(cond, node))
        ty, a, b = self.operands(x, y, node)
        return Run(ty, self.b.ite(truth, a, b))

    def absolute(self, node: ast.Call, x: Run) -> Run:
        if not x.ty.signed:
            return x
        negative = self.b.compare(ast.Lt, x.term, self.b.literal(0, x.ty), x.ty)
        entry = self.b.pc
        self.b.pc = self.b.and_(entry, negative)
        flipped = self.b.checked(-x.term, x.ty, node)
        self.b.pc = entry
        return Run(x.ty, self.b.ite(negative, flipped, x.term))
