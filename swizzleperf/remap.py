"""Remap candidates: the static check and normalised text.

A candidate is the source text of the kernel's remap hook, written by an LLM or a search, so it
is untrusted. It is never executed in this process: `static_check` only parses it and admits a
small integer subset of Triton (listed in `static_check`). Everything that needs values
(swizzleperf.bijectivity) runs `swizzleperf.remap_eval`, an AST interpreter over numpy arrays
with no exec, in a time-limited child process.
"""

from __future__ import annotations

import ast

from swizzleperf import untrusted
from swizzleperf.errors import RemapRejected
from swizzleperf.kernel import HookSignature
from swizzleperf.untrusted import MAX_SOURCE_CHARS, echo, show_int

MAX_NODES = 4_000
MAX_DEPTH = 100  # syntax-tree nesting; keeps every recursive walk far from Python's recursion limit
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


def _reject(reason: str, node: ast.AST | None = None) -> RemapRejected:
    where = f"line {node.lineno}: " if node is not None and hasattr(node, "lineno") else ""
    return RemapRejected("static", echo(where + reason, _REASON_CHARS))  # names may be 18,000 characters long


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def hook_body(fn: ast.FunctionDef) -> list[ast.stmt]:
    """The function's statements without its docstring."""
    return fn.body[1:] if _is_docstring(fn.body[0]) else fn.body


def _dotted(node: ast.AST) -> str | None:
    """`tl.cdiv` for Attribute(Name('tl'), 'cdiv'); None for anything that is not a dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _body_terminates(body: list[ast.stmt]) -> bool:
    """Every path through `body` ends in a `return`."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and _body_terminates(last.body) and _body_terminates(last.orelse)


class _SubsetChecker:
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
                isinstance(stmt, ast.If) and _body_terminates(stmt.body) and _body_terminates(stmt.orelse))
            if ends and i + 1 < len(body):
                raise _reject("unreachable code after `return`", body[i + 1])

    def statement(self, stmt: ast.stmt, in_loop: bool) -> None:
        if type(stmt) in _REJECTED:
            raise _reject(_REJECTED[type(stmt)], stmt)
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
            if _is_docstring(stmt):
                raise _reject("a string on its own line has no effect (a docstring is allowed only first)", stmt)
            self.expr(stmt.value)  # a forbidden call reports its own reason first
            raise _reject("an expression on its own line has no effect", stmt)
        else:
            raise _reject(f"`{type(stmt).__name__}` statements are not allowed", stmt)

    def assign(self, stmt: ast.Assign) -> None:
        if len(stmt.targets) != 1:
            raise _reject("chained assignment `a = b = ...` is not supported by Triton: assign one at a time", stmt)
        target = stmt.targets[0]
        if isinstance(target, ast.Tuple):
            for elt in target.elts:
                self.target(elt)
            if not isinstance(stmt.value, ast.Tuple) or len(stmt.value.elts) != len(target.elts):
                raise _reject(f"tuple assignment needs a tuple of {len(target.elts)} values on the right", stmt)
            for elt in stmt.value.elts:
                self.expr(elt)
        else:
            self.target(target)
            self.expr(stmt.value)

    def target(self, node: ast.expr) -> None:
        if not isinstance(node, ast.Name):
            raise _reject(f"only plain names can be assigned, not `{echo(node)}`", node)
        self.name(node)
        if node.id in _RESERVED_NAMES:
            raise _reject(f"`{echo(node.id)}` cannot be reassigned", node)

    def loop(self, stmt: ast.For) -> None:
        self.target(stmt.target)
        if stmt.orelse:
            raise _reject("`for ... else` is not supported by Triton", stmt)
        it = stmt.iter
        iterator = _dotted(it.func) if isinstance(it, ast.Call) else None
        if iterator not in LOOP_ITERATORS:
            raise _reject(f"loops must be `for i in range(C)` or `tl.static_range(C)` with a constant C, "
                          f"not `for ... in {echo(it)}`", stmt)
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise _reject(f"{iterator}() takes 1 to 3 positional bounds", stmt)
        for bound in it.args:
            self.expr(bound)
            runtime = sorted({n.id for n in ast.walk(bound) if isinstance(n, ast.Name)} - self.constexprs)
            if runtime:
                raise _reject(f"loop bounds must be constants or constexpr parameters; `{echo(bound)}` "
                              f"uses {', '.join(runtime)}, so the trip count is not static", stmt)
        trips = _static_trip_count(it.args)
        if trips is not None and trips > LOOP_TRIP_CAP:
            raise _reject(f"the loop runs {show_int(trips)} times; the cap is {LOOP_TRIP_CAP}", stmt)
        self.block(stmt.body, in_loop=True)

    def return_(self, stmt: ast.Return, in_loop: bool) -> None:
        if in_loop:
            raise _reject("Triton cannot `return` from inside a loop: compute the value in the loop and return "
                          "after it", stmt)
        if stmt.value is None:
            raise _reject(f"`return` needs a value: {self._returns_what()}", stmt)
        values = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
        if len(values) != self.hook.ndim or (self.hook.ndim == 1 and isinstance(stmt.value, ast.Tuple)):
            raise _reject(f"returns {len(values)} value(s); {self._returns_what()}", stmt)
        for value in values:
            self.expr(value)

    def _returns_what(self) -> str:
        if self.hook.ndim == 1:
            return "the hook returns one logical id"
        return f"the hook returns {self.hook.ndim} logical indices ({', '.join(self.hook.grid_params)} order)"

    # --- expressions ---------------------------------------------------------------------------

    def expr(self, node: ast.expr) -> None:
        if type(node) in _REJECTED:
            raise _reject(_REJECTED[type(node)], node)
        if isinstance(node, ast.Constant):
            self.constant(node)
        elif isinstance(node, ast.Name):
            self.name(node)
            if node.id not in self.defined:
                raise _reject(f"`{echo(node.id)}` is not defined: only the hook's parameters and local variables "
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
                    raise _reject(_REJECTED[type(op)], node)
            for value in [node.left, *node.comparators]:
                self.expr(value)
        elif isinstance(node, ast.IfExp):
            for value in (node.test, node.body, node.orelse):
                self.expr(value)
        elif isinstance(node, ast.Call):
            self.call(node)
        elif isinstance(node, ast.Attribute):
            self.attribute(node)
            raise _reject(f"`{echo(node)}` can only be called, not used as a value", node)
        elif isinstance(node, ast.Tuple):
            raise _reject("tuples are only allowed in `return` and in tuple assignment", node)
        else:
            raise _reject(f"`{type(node).__name__}` expressions are not allowed", node)

    def constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, int):  # bools included
            if value.bit_length() > untrusted.MAX_LITERAL_BITS:
                raise _reject(f"an integer literal of {value.bit_length()} bits; remap constants fit in "
                              f"{untrusted.MAX_LITERAL_BITS} bits", node)
            return
        if isinstance(value, str):
            raise _reject("string literals are not allowed (only the docstring)", node)
        if isinstance(value, float):
            raise _reject(f"float literal {value!r} is not allowed: remaps are integer arithmetic", node)
        raise _reject(f"the literal {echo(repr(value))} is not allowed: only integers and True/False", node)

    def name(self, node: ast.Name) -> None:
        if node.id.startswith("__"):
            raise _reject(f"dunder names (`{echo(node.id)}`) are not allowed", node)

    def operator(self, op: ast.operator, node: ast.AST) -> None:
        if type(op) in _REJECTED:
            raise _reject(_REJECTED[type(op)], node)
        if type(op) not in _ARITHMETIC:
            raise _reject(f"the operator `{type(op).__name__}` is not allowed", node)

    def attribute(self, node: ast.Attribute) -> None:
        for sub in ast.walk(node):
            name = sub.attr if isinstance(sub, ast.Attribute) else sub.id if isinstance(sub, ast.Name) else ""
            if name.startswith("__"):
                raise _reject(f"dunder names (`{echo(name)}`) are not allowed", node)

    def call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            self.attribute(func)
        if node.keywords:
            raise _reject(f"keyword arguments are not allowed (in `{echo(node)}`)", node)
        if isinstance(func, ast.Attribute) and func.attr == "to" and _dotted(func) != "tl.to":
            self.cast(node)
            return
        name = _dotted(func)
        if name is None:
            raise _reject(f"only {_ALLOWED_CALLS_TEXT} can be called, not `{echo(func)}`", node)
        if isinstance(func, ast.Name) and func.id.startswith("__"):
            raise _reject(f"dunder names (`{echo(func.id)}`) are not allowed", node)
        if name == "abs":
            raise _reject("abs() is not defined inside Triton kernels: use tl.abs()", node)
        arity = ALLOWED_BUILTINS.get(name) if isinstance(func, ast.Name) else None
        if name.startswith("tl.") and name.count(".") == 1:
            arity = ALLOWED_TL_FUNCTIONS.get(name[3:])
        if arity is None:
            raise _reject(f"calls to `{echo(name)}` are not allowed: only {_ALLOWED_CALLS_TEXT}", node)
        low, high = arity
        if len(node.args) < low or (high is not None and len(node.args) > high):
            want = f"{low}" if low == high else f"at least {low}"
            raise _reject(f"{echo(name)}() takes {want} argument(s), got {len(node.args)}", node)
        for arg in node.args:
            self.expr(arg)

    def cast(self, node: ast.Call) -> None:
        dtype = _dotted(node.args[0]) if len(node.args) == 1 else None
        if dtype is None or not dtype.startswith("tl.") or dtype[3:] not in CAST_DTYPES:
            allowed = ", ".join(f"tl.{d}" for d in CAST_DTYPES)
            raise _reject(f"`.to()` takes one integer dtype ({allowed}), not `{echo(node)}`", node)
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
        raise _reject("range() step must not be zero", bounds[2])
    return trip_count(values)


def _depth(tree: ast.AST) -> int:
    """Nesting depth of a syntax tree, measured without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def check_signature(fn: ast.FunctionDef, hook: HookSignature) -> None:
    """The candidate's decorator and parameters are exactly the hook's (names, order, constexprs)."""
    expected = hook.render()
    for deco in fn.decorator_list:
        if ast.unparse(deco) != "triton.jit":
            raise _reject(f"the only decorator allowed is @triton.jit, not @{echo(deco)}", deco)
    if not fn.decorator_list:
        raise _reject(f"{echo(fn.name)}() must be decorated with @triton.jit", fn)
    args = fn.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults or fn.returns:
        raise _reject(f"the signature must be exactly `{expected}` (no defaults, *args, **kwargs or annotations "
                      f"other than tl.constexpr)", fn)
    got = [a.arg for a in args.args]
    if got != list(hook.params):
        raise _reject(f"wrong parameters ({echo(', '.join(got))}): the signature must be exactly `{expected}`", fn)
    for arg in args.args:
        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else None
        wanted = "tl.constexpr" if arg.arg in hook.constexprs else None
        if annotation != wanted:
            how = f"annotated `{arg.arg}: tl.constexpr`" if wanted else f"not annotated (got `{echo(str(annotation))}`)"
            raise _reject(f"parameter `{echo(arg.arg)}` must be {how}: the signature must be exactly `{expected}`", fn)


def static_check(source: str, hook: HookSignature) -> ast.FunctionDef:
    """Parse a candidate and admit it only if it stays inside the remap subset; return its function.

    Allowed: a docstring; int and bool literals; parameters and local names; `+ - * // % << >> &
    | ^ ~`, unary `-`; comparisons; `and or not`; `a if c else b`; `if/elif/else`; assignment,
    augmented and tuple assignment to names; `return` of one value per grid parameter; calls to
    min, max, tl.cdiv, tl.minimum, tl.maximum, tl.where, tl.abs and `x.to(tl.int32)` (or
    int64, uint32, uint64); `for i in range(C)` / `tl.static_range(C)` with constant or constexpr
    bounds and at most LOOP_TRIP_CAP trips. Everything else raises RemapRejected("static", why).
    """
    module = untrusted.parse(source, MAX_SOURCE_CHARS)
    if sum(1 for _ in ast.walk(module)) > MAX_NODES:
        raise _reject(f"the candidate has more than {MAX_NODES} syntax nodes; a remap is a few lines")
    if _depth(module) > MAX_DEPTH:
        raise _reject(f"expressions are nested more than {MAX_DEPTH} levels deep: use intermediate variables")
    for stmt in module.body:
        if type(stmt) in (ast.Import, ast.ImportFrom):
            raise _reject("imports are not allowed: send only the hook function (the kernel file already "
                          "imports triton and tl)", stmt)
    functions = [s for s in module.body if isinstance(s, ast.FunctionDef)]
    others = [s for s in module.body if not isinstance(s, ast.FunctionDef)]
    if others:
        raise _reject(f"only the function {hook.name}() may be defined; found a `{type(others[0]).__name__}` "
                      f"statement outside it", others[0])
    if len(functions) != 1:
        names = ", ".join(f.name for f in functions) or "none"
        raise _reject(f"defines {len(functions)} functions ({echo(names)}); define exactly one, `{hook.render()}`")
    fn = functions[0]
    if fn.name != hook.name:
        raise _reject(f"the function is named {echo(fn.name)}(); it must be {hook.name}() with signature "
                      f"`{hook.render()}`", fn)
    check_signature(fn, hook)
    body = hook_body(fn)
    if not body:
        raise _reject(f"{hook.name}() has no statements", fn)
    checker = _SubsetChecker(hook, fn)
    checker.block(body, in_loop=False)
    if not _body_terminates(body):
        raise _reject(f"{hook.name}() can reach its end without returning: end every path with `return`",
                      body[-1])
    return fn


def normalise(source: str) -> str:
    """The candidate's text modulo formatting, comments and docstrings; SyntaxError if it does not parse.

    Two candidates with equal normalised text are the same implementation. It raises nothing
    else: every earlier attempt, hostile ones included, is normalised at each iteration.
    """
    try:
        untrusted.scan(source, MAX_SOURCE_CHARS)
    except RemapRejected:  # too long, too deep, or a literal too large to print: compare the text as it is
        return source.strip()
    try:
        module = ast.parse(source)
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, nesting the scan cannot see
        raise SyntaxError(f"{type(exc).__name__}: {echo(str(exc))}") from None
    for node in ast.walk(module):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) and node.body \
                and _is_docstring(node.body[0]):
            node.body = node.body[1:] or [ast.Pass()]
    try:
        return ast.unparse(module)
    except (RecursionError, ValueError, MemoryError):  # absurdly nested: compare the text as it is
        return source.strip()
