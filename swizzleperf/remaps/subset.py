"""The remap subset: what a candidate hook may contain, and why anything else is rejected.

A walk over the hook's syntax tree in source order (`SubsetChecker`), raising RemapRejected("static",
why) at the first construct outside a small integer subset of Triton; `static_check` (this package's __init__) runs it
after the checks of the module and the signature.
"""

from __future__ import annotations

import ast

from swizzleperf.errors import RemapRejected
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.untrusted import parse as untrusted
from swizzleperf.untrusted.parse import echo, show_int

LOOP_TRIP_CAP = 64  # most loop-body executions per program, nested loops multiplied
_REASON_CHARS = 600  # a reason quotes candidate text: bounded, with the full length said

# Calls a candidate may make: builtins by name, `tl.` functions by attribute, with their arity.
ALLOWED_BUILTINS = {"min": (2, None), "max": (2, None)}
ALLOWED_TL_FUNCTIONS = {"cdiv": (2, 2), "minimum": (2, 2), "maximum": (2, 2), "where": (3, 3), "abs": (1, 1)}
LOOP_ITERATORS = ("range", "tl.range", "tl.static_range")
CAST_DTYPES = ("int32", "int64", "uint32", "uint64")
_RESERVED_NAMES = {"tl", "triton", "range", "abs", *ALLOWED_BUILTINS}

_ARITHMETIC = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%", ast.LShift: "<<",
               ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}
_COMPARISONS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_ALLOWED_CALLS_TEXT = "min, max, tl.cdiv, tl.minimum, tl.maximum, tl.where, tl.abs and x.to(tl.int32/int64/...)"

# Statements and expressions outside the subset, each with the reason a reader needs.
_REJECTED = {
    ast.Import: "imports are not allowed", ast.ImportFrom: "imports are not allowed",
    ast.While: "`while` loops are not allowed: use `for i in tl.static_range(C)` with a constant bound",
    ast.With: "`with` is not allowed", ast.Try: "`try` is not allowed", ast.Raise: "`raise` is not allowed",
    ast.Assert: "`assert` is not allowed", ast.Global: "`global` is not allowed",
    ast.Nonlocal: "`nonlocal` is not allowed", ast.Delete: "`del` is not allowed",
    ast.FunctionDef: "nested function definitions are not allowed",
    ast.AsyncFunctionDef: "nested function definitions are not allowed",
    ast.ClassDef: "class definitions are not allowed", ast.AsyncFor: "`async for` is not allowed",
    ast.AsyncWith: "`async with` is not allowed", ast.Match: "`match` is not allowed",
    ast.AnnAssign: "annotated assignments are not allowed: write `x = ...`",
    ast.Break: "`break` is not supported by Triton", ast.Continue: "`continue` is not supported by Triton",
    ast.Lambda: "lambdas are not allowed", ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed", ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "generator expressions are not allowed", ast.List: "lists are not allowed",
    ast.Set: "sets are not allowed", ast.Dict: "dicts are not allowed",
    ast.Subscript: "subscripts (`x[i]`) are not allowed", ast.Slice: "slices are not allowed",
    ast.JoinedStr: "f-strings are not allowed", ast.NamedExpr: "`:=` is not allowed",
    ast.Starred: "`*` unpacking is not allowed", ast.Await: "`await` is not allowed",
    ast.Yield: "`yield` is not allowed", ast.YieldFrom: "`yield` is not allowed",
    ast.Div: "true division `/` gives a float: use `//`",
    ast.Pow: "`**` is not supported: multiply, or shift by a constant",
    ast.MatMult: "`@` is not allowed", ast.Is: "`is` is not allowed: use `==`",
    ast.IsNot: "`is not` is not allowed: use `!=`", ast.In: "`in` is not allowed",
    ast.NotIn: "`not in` is not allowed",
}


def reject(reason: str, node: ast.AST | None = None) -> RemapRejected:
    where = f"line {node.lineno}: " if node is not None and hasattr(node, "lineno") else ""
    return RemapRejected("static", echo(where + reason, _REASON_CHARS))  # names may be 18,000 characters long


def is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def hook_body(fn: ast.FunctionDef) -> list[ast.stmt]:
    """The function's statements without its docstring."""
    return fn.body[1:] if is_docstring(fn.body[0]) else fn.body


def _dotted(node: ast.AST) -> str | None:
    """`tl.cdiv` for Attribute(Name('tl'), 'cdiv'); None for anything that is not a dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def body_terminates(body: list[ast.stmt]) -> bool:
    """Every path through `body` ends in a `return`."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and body_terminates(last.body) and body_terminates(last.orelse)


class SubsetChecker:
    """Walks a hook's body in source order and raises on the first construct outside the subset."""

    def __init__(self, hook: HookSignature, fn: ast.FunctionDef):
        self.hook = hook
        self.constexprs = set(hook.constexprs)
        self.defined = set(hook.params) | {
            n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}

    # --- statements ----------------------------------------------------------------------------

    def block(self, body: list[ast.stmt], in_loop: bool) -> None:
        for i, stmt in enumerate(body):
            self.statement(stmt, in_loop)
            ends = isinstance(stmt, ast.Return) or (
                isinstance(stmt, ast.If) and body_terminates(stmt.body) and body_terminates(stmt.orelse))
            if ends and i + 1 < len(body):
                raise reject("unreachable code after `return`", body[i + 1])

    def statement(self, stmt: ast.stmt, in_loop: bool) -> None:
        if type(stmt) in _REJECTED:
            raise reject(_REJECTED[type(stmt)], stmt)
        if isinstance(stmt, ast.Assign):
            self.assign(stmt)
        elif isinstance(stmt, ast.AugAssign):
            self.target(stmt.target)
            self.operator(stmt.op, stmt)
            self.expr(stmt.value)
        elif isinstance(stmt, ast.If):
            self.expr(stmt.test)
            self.block(stmt.body, in_loop)
            self.block(stmt.orelse, in_loop)
        elif isinstance(stmt, ast.For):
            self.loop(stmt)
        elif isinstance(stmt, ast.Return):
            self.return_(stmt, in_loop)
        elif isinstance(stmt, ast.Pass):
            pass
        elif isinstance(stmt, ast.Expr):
            if is_docstring(stmt):
                raise reject("a string on its own line has no effect (a docstring is allowed only first)", stmt)
            self.expr(stmt.value)  # a forbidden call reports its own reason first
            raise reject("an expression on its own line has no effect", stmt)
        else:
            raise reject(f"`{type(stmt).__name__}` statements are not allowed", stmt)

    def assign(self, stmt: ast.Assign) -> None:
        if len(stmt.targets) != 1:
            raise reject("chained assignment `a = b = ...` is not supported by Triton: assign one at a time", stmt)
        target = stmt.targets[0]
        if isinstance(target, ast.Tuple):
            for elt in target.elts:
                self.target(elt)
            if not isinstance(stmt.value, ast.Tuple) or len(stmt.value.elts) != len(target.elts):
                raise reject(f"tuple assignment needs a tuple of {len(target.elts)} values on the right", stmt)
            for elt in stmt.value.elts:
                self.expr(elt)
        else:
            self.target(target)
            self.expr(stmt.value)

    def target(self, node: ast.expr) -> None:
        if not isinstance(node, ast.Name):
            raise reject(f"only plain names can be assigned, not `{echo(node)}`", node)
        self.name(node)
        if node.id in _RESERVED_NAMES:
            raise reject(f"`{echo(node.id)}` cannot be reassigned", node)

    def loop(self, stmt: ast.For) -> None:
        self.target(stmt.target)
        if stmt.orelse:
            raise reject("`for ... else` is not supported by Triton", stmt)
        it = stmt.iter
        iterator = _dotted(it.func) if isinstance(it, ast.Call) else None
        if iterator not in LOOP_ITERATORS:
            raise reject(f"loops must be `for i in range(C)` or `tl.static_range(C)` with a constant C, "
                          f"not `for ... in {echo(it)}`", stmt)
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise reject(f"{iterator}() takes 1 to 3 positional bounds", stmt)
        for bound in it.args:
            self.expr(bound)
            runtime = sorted({n.id for n in ast.walk(bound) if isinstance(n, ast.Name)} - self.constexprs)
            if runtime:
                raise reject(f"loop bounds must be constants or constexpr parameters; `{echo(bound)}` "
                              f"uses {', '.join(runtime)}, so the trip count is not static", stmt)
        trips = _static_trip_count(it.args)
        if trips is not None and trips > LOOP_TRIP_CAP:
            raise reject(f"the loop runs {show_int(trips)} times; the cap is {LOOP_TRIP_CAP}", stmt)
        self.block(stmt.body, in_loop=True)

    def return_(self, stmt: ast.Return, in_loop: bool) -> None:
        if in_loop:
            raise reject("Triton cannot `return` from inside a loop: compute the value in the loop and return "
                          "after it", stmt)
        if stmt.value is None:
            raise reject(f"`return` needs a value: {self._returns_what()}", stmt)
        values = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
        if len(values) != self.hook.ndim or (self.hook.ndim == 1 and isinstance(stmt.value, ast.Tuple)):
            raise reject(f"returns {len(values)} value(s); {self._returns_what()}", stmt)
        for value in values:
            self.expr(value)

    def _returns_what(self) -> str:
        if self.hook.ndim == 1:
            return "the hook returns one logical id"
        return f"the hook returns {self.hook.ndim} logical indices ({', '.join(self.hook.grid_params)} order)"

    # --- expressions ---------------------------------------------------------------------------

    def expr(self, node: ast.expr) -> None:
        if type(node) in _REJECTED:
            raise reject(_REJECTED[type(node)], node)
        if isinstance(node, ast.Constant):
            self.constant(node)
        elif isinstance(node, ast.Name):
            self.name(node)
            if node.id not in self.defined:
                raise reject(f"`{echo(node.id)}` is not defined: only the hook's parameters and local variables "
                              f"can be used", node)
        elif isinstance(node, ast.BinOp):
            self.operator(node.op, node)
            self.expr(node.left)
            self.expr(node.right)
        elif isinstance(node, ast.UnaryOp):
            self.expr(node.operand)
        elif isinstance(node, ast.BoolOp):
            for value in node.values:
                self.expr(value)
        elif isinstance(node, ast.Compare):
            for op in node.ops:
                if type(op) in _REJECTED:
                    raise reject(_REJECTED[type(op)], node)
            for value in [node.left, *node.comparators]:
                self.expr(value)
        elif isinstance(node, ast.IfExp):
            for value in (node.test, node.body, node.orelse):
                self.expr(value)
        elif isinstance(node, ast.Call):
            self.call(node)
        elif isinstance(node, ast.Attribute):
            self.attribute(node)
            raise reject(f"`{echo(node)}` can only be called, not used as a value", node)
        elif isinstance(node, ast.Tuple):
            raise reject("tuples are only allowed in `return` and in tuple assignment", node)
        else:
            raise reject(f"`{type(node).__name__}` expressions are not allowed", node)

    def constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, int):  # bools included
            if value.bit_length() > untrusted.MAX_LITERAL_BITS:
                raise reject(f"an integer literal of {value.bit_length()} bits; remap constants fit in "
                              f"{untrusted.MAX_LITERAL_BITS} bits", node)
            return
        if isinstance(value, str):
            raise reject("string literals are not allowed (only the docstring)", node)
        if isinstance(value, float):
            raise reject(f"float literal {value!r} is not allowed: remaps are integer arithmetic", node)
        raise reject(f"the literal {echo(repr(value))} is not allowed: only integers and True/False", node)

    def name(self, node: ast.Name) -> None:
        if node.id.startswith("__"):
            raise reject(f"dunder names (`{echo(node.id)}`) are not allowed", node)

    def operator(self, op: ast.operator, node: ast.AST) -> None:
        if type(op) in _REJECTED:
            raise reject(_REJECTED[type(op)], node)
        if type(op) not in _ARITHMETIC:
            raise reject(f"the operator `{type(op).__name__}` is not allowed", node)

    def attribute(self, node: ast.Attribute) -> None:
        for sub in ast.walk(node):
            name = sub.attr if isinstance(sub, ast.Attribute) else sub.id if isinstance(sub, ast.Name) else ""
            if name.startswith("__"):
                raise reject(f"dunder names (`{echo(name)}`) are not allowed", node)

    def call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            self.attribute(func)
        if node.keywords:
            raise reject(f"keyword arguments are not allowed (in `{echo(node)}`)", node)
        if isinstance(func, ast.Attribute) and func.attr == "to" and _dotted(func) != "tl.to":
            self.cast(node)
            return
        name = _dotted(func)
        if name is None:
            raise reject(f"only {_ALLOWED_CALLS_TEXT} can be called, not `{echo(func)}`", node)
        if isinstance(func, ast.Name) and func.id.startswith("__"):
            raise reject(f"dunder names (`{echo(func.id)}`) are not allowed", node)
        if name == "abs":
            raise reject("abs() is not defined inside Triton kernels: use tl.abs()", node)
        arity = ALLOWED_BUILTINS.get(name) if isinstance(func, ast.Name) else None
        if name.startswith("tl.") and name.count(".") == 1:
            arity = ALLOWED_TL_FUNCTIONS.get(name[3:])
        if arity is None:
            raise reject(f"calls to `{echo(name)}` are not allowed: only {_ALLOWED_CALLS_TEXT}", node)
        low, high = arity
        if len(node.args) < low or (high is not None and len(node.args) > high):
            want = f"{low}" if low == high else f"at least {low}"
            raise reject(f"{echo(name)}() takes {want} argument(s), got {len(node.args)}", node)
        for arg in node.args:
            self.expr(arg)

    def cast(self, node: ast.Call) -> None:
        dtype = _dotted(node.args[0]) if len(node.args) == 1 else None
        if dtype is None or not dtype.startswith("tl.") or dtype[3:] not in CAST_DTYPES:
            allowed = ", ".join(f"tl.{d}" for d in CAST_DTYPES)
            raise reject(f"`.to()` takes one integer dtype ({allowed}), not `{echo(node)}`", node)
        self.expr(node.func.value)


def trip_count(bounds: list[int]) -> int:
    """len(range(*bounds)) without len()'s OverflowError past 2**63 (bounds may reach 2**256)."""
    start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds, 1)[:3]
    if step > 0:
        return max(0, -((start - stop) // step))
    return max(0, -((stop - start) // -step))


def _static_trip_count(bounds: list[ast.expr]) -> int | None:
    """The trip count of range(*bounds) when every bound is an integer literal, else None."""
    values = []
    for bound in bounds:
        sign = 1
        while isinstance(bound, ast.UnaryOp) and isinstance(bound.op, (ast.USub, ast.UAdd)):
            sign = -sign if isinstance(bound.op, ast.USub) else sign
            bound = bound.operand
        if not (isinstance(bound, ast.Constant) and type(bound.value) is int):
            return None
        values.append(sign * bound.value)
    if len(values) == 3 and values[2] == 0:
        raise reject("range() step must not be zero", bounds[2])
    return trip_count(values)


def depth(tree: ast.AST) -> int:
    """Nesting depth of a syntax tree, measured without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest
