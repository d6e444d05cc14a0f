"""Expressions: a value per lane for each expression of the hook (Triton's operators, calls and
conversions), mixed into the evaluator."""

from __future__ import annotations

import ast

import numpy as np

from swizzleperf.remaps.evaluate.values import (
    ARITH,
    BITWISE,
    CASTS,
    COMPARE,
    CONST_BINOPS,
    CONST_COMPARE,
    CONST_LIMIT,
    CONST_UNARY,
    INT1,
    UINT32,
    Const,
    Dropped,
    IntType,
    Tensor,
    Value,
    any_lane,
    first_lane,
    integer_promote,
    kind_of,
    or_masks,
    reject,
    scalar_type,
    scatter,
    shift,
    source_of,
)
from swizzleperf.untrusted.parse import show_int


class Expressions:
    """The expression half of the evaluator (it needs the evaluator's `_mentions` cache)."""

    def lookup(self, name: str, env: dict, node: ast.AST) -> Value:
        value = env.get(name)
        if value is None:
            raise reject(node, f"`{name}` is used before it is assigned")
        if isinstance(value, Dropped):
            raise reject(node, value.why)
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
        raise reject(node, f"`{source_of(node)}` cannot be evaluated")  # static_check admits nothing else

    def condition(self, node: ast.expr, env: dict, lanes: np.ndarray) -> bool | np.ndarray:
        """A compile-time bool, or the per-lane truth of a run-time condition."""
        value = self.expr(node, env, lanes)
        if isinstance(value, Const):
            return bool(value.value)
        if any_lane(value.poison, lanes.size):
            raise reject(node, f"program {first_lane(value.poison, lanes)} branches on an undefined value "
                              f"(`{source_of(node)}` depends on a shift by a negative or too-large amount)")
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
            raise reject(node, f"the two sides of `{source_of(node)}` are {then.ty.name} and {other.ty.name}; a conditional "
                              f"expression with a run-time condition needs one type")
        return scatter(then, other, np.flatnonzero(cond), np.flatnonzero(~cond), lanes.size)

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
            return Const(CONST_COMPARE[type(op)](left.value, right.value))
        a, b = self.typecheck(left, right, node)
        return Tensor(INT1, COMPARE[type(op)](a.data, b.data), or_masks(a.poison, b.poison))

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
                raise reject(node, f"`and`/`or`/`not` need booleans; an operand is {value.ty.name}: compare it, "
                                  f"e.g. `x != 0`")
            runtime.append(value)
        if not runtime:
            return value
        combine = np.logical_and if is_and else np.logical_or
        result = runtime[0]
        for other in runtime[1:]:
            result = Tensor(INT1, combine(result.data, other.data), or_masks(result.poison, other.poison))
        return result

    def unary(self, node: ast.UnaryOp, value: Value) -> Value:
        op = node.op
        if isinstance(value, Const):
            if isinstance(op, ast.Not):
                return Const(not value.value)
            return Const(CONST_UNARY[type(op)](value.value))
        if isinstance(op, ast.UAdd):
            return value
        if isinstance(op, ast.Not):
            if value.ty is not INT1:
                raise reject(node, f"`not` needs a boolean; `{source_of(node.operand)}` is {value.ty.name}: write "
                                  f"`{source_of(node.operand)} == 0`")
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
        poison = or_masks(a.poison, b.poison)
        if isinstance(op, (ast.Add, ast.Sub, ast.Mult)):
            return Tensor(a.ty, ARITH[type(op)](a.data, b.data), poison)
        if isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            return Tensor(a.ty, BITWISE[type(op)](a.data, b.data), poison)
        if div_or_mod:
            return self.divide(op, a, b, node, lanes)
        # `>>` is arithmetic when the tensor operand (the left one, if both are) is signed.
        tensor_operand = left if isinstance(left, Tensor) else right
        return shift(op, a, b, arithmetic=tensor_operand.ty.signed)

    def bool_arithmetic(self, op: ast.operator, a: Tensor, b: Tensor, node: ast.AST, lanes: np.ndarray) -> Tensor:
        """Triton's bool is a 1-bit unsigned integer, so arithmetic on two booleans wraps mod 2."""
        poison = or_masks(a.poison, b.poison)
        if isinstance(op, (ast.Add, ast.Sub)):
            return Tensor(INT1, a.data ^ b.data, poison)
        if isinstance(op, ast.Mult):
            return Tensor(INT1, a.data & b.data, poison)
        if isinstance(op, (ast.LShift, ast.RShift)):  # only a shift by 0 is defined at 1 bit
            return Tensor(INT1, a.data, or_masks(poison, np.asarray(b.data)))
        self.divide(op, Tensor(UINT32, a.data), Tensor(UINT32, b.data, b.poison), node, lanes)  # raises on x // False
        quotient = isinstance(op, ast.FloorDiv)
        return Tensor(INT1, a.data if quotient else np.zeros_like(a.data), poison)

    def divide(self, op: ast.operator, a: Tensor, b: Tensor, node: ast.AST, lanes: np.ndarray) -> Tensor:
        """Signed: LLVM sdiv/srem (truncate toward zero, remainder takes the dividend's sign)."""
        zero = b.data == 0
        overflow = (a.data == a.ty.min) & (b.data == -1) if a.ty.signed else np.zeros((), dtype=bool)
        what = "divides" if isinstance(op, ast.FloorDiv) else "takes a remainder"
        if any_lane(b.poison, lanes.size):
            raise reject(node, f"`{source_of(node)}` {what} by an undefined value for program {first_lane(b.poison, lanes)}")
        if any_lane(zero, lanes.size):
            raise reject(node, f"`{source_of(node)}` {what} by zero for program {first_lane(zero, lanes)} (undefined in Triton): "
                              f"guard it with an `if` on the divisor")
        if any_lane(overflow, lanes.size):
            raise reject(node, f"`{source_of(node)}` overflows ({a.ty.name} minimum by -1) for program "
                              f"{first_lane(overflow, lanes)}")
        divisor = np.where(zero | overflow, np.ones((), a.ty.np_dtype), b.data)
        if a.ty.signed:
            remainder = np.fmod(a.data, divisor)
            result = remainder if isinstance(op, ast.Mod) else (a.data - remainder) // divisor
        else:
            result = a.data % divisor if isinstance(op, ast.Mod) else a.data // divisor
        return Tensor(a.ty, result, a.poison)

    def const_binary(self, op: ast.operator, x: int, y: int, node: ast.AST) -> Const:
        if isinstance(op, (ast.FloorDiv, ast.Mod)) and y == 0:
            raise reject(node, f"`{source_of(node)}` divides by zero at compile time")
        if isinstance(op, (ast.LShift, ast.RShift)) and not 0 <= y <= 256:
            raise reject(node, f"`{source_of(node)}` shifts by {show_int(y)}; compile-time shifts must be in [0, 256]")
        result = CONST_BINOPS[type(op)](x, y)
        if abs(result) >= CONST_LIMIT:
            raise reject(node, f"`{source_of(node)}` is larger than 2**256 at compile time")
        return Const(result)

    def typecheck(self, left: Value, right: Value, node: ast.AST, div_or_mod: bool = False) -> tuple[Tensor, Tensor]:
        """Triton's binary_op_type_checking_impl for integers: both operands cast to one type."""
        a_ty = scalar_type(left.value, node) if isinstance(left, Const) else left.ty
        b_ty = scalar_type(right.value, node) if isinstance(right, Const) else right.ty
        a_scalar, b_scalar = isinstance(left, Const), isinstance(right, Const)
        if a_scalar != b_scalar:  # a constant of no higher kind takes the tensor's type
            scalar_ty, tensor_ty = (a_ty, b_ty) if a_scalar else (b_ty, a_ty)
            if kind_of(scalar_ty) <= kind_of(tensor_ty):
                a_ty = b_ty = tensor_ty
        if div_or_mod and a_ty.signed != b_ty.signed:
            raise reject(node, f"`{source_of(node)}` mixes {a_ty.name} and {b_ty.name}; Triton refuses // and % across "
                              f"signedness: cast one side with .to()")
        ty = integer_promote(a_ty, b_ty)
        return self.cast(left, ty, node), self.cast(right, ty, node)

    def cast(self, value: Value, ty: IntType, node: ast.AST) -> Tensor:
        if isinstance(value, Tensor):
            return value if value.ty == ty else Tensor(ty, value.data.astype(ty.np_dtype), value.poison)
        v = value.value
        if v < 0 and not ty.signed:
            raise reject(node, f"`{source_of(node)}` combines the negative constant {show_int(v)} with an unsigned {ty.name} value; "
                              f"cast one side explicitly")
        if not ty.min <= v <= ty.max:
            raise reject(node, f"the constant {show_int(v)} in `{source_of(node)}` is out of range for {ty.name} (the other operand's "
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
                raise reject(node, f"`.to()` needs a run-time value; `{source_of(func.value)}` is a compile-time constant")
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
        raise reject(node, f"`{name}` cannot be called")  # static_check admits nothing else

    def extremum(self, is_min: bool, left: Value, right: Value, node: ast.AST) -> Tensor:
        a, b = self.typecheck(left, right, node)
        return Tensor(a.ty, (np.minimum if is_min else np.maximum)(a.data, b.data), or_masks(a.poison, b.poison))

    def where(self, node: ast.Call, cond: Value, x: Value, y: Value) -> Tensor:
        c = self.to_tensor(cond, node)
        truth = c.data if c.ty is INT1 else c.data != 0
        a, b = self.typecheck(x, y, node)
        poison = None
        if a.poison is not None or b.poison is not None:  # a select keeps only the chosen side's poison
            a_p = np.zeros((), bool) if a.poison is None else a.poison
            b_p = np.zeros((), bool) if b.poison is None else b.poison
            poison = np.where(truth, a_p, b_p)
        return Tensor(a.ty, np.where(truth, a.data, b.data), or_masks(poison, c.poison))

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
