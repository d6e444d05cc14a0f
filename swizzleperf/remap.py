"""Remap candidates: static checks, normalised text, and the bijectivity check.

A candidate is the source text of the kernel's remap hook, written by an LLM or a search, so it
is untrusted. It is never executed in this process: `static_check` only parses it and admits a
small integer subset of Triton (listed in `static_check`), and everything that needs values runs
`swizzleperf.remap_eval` (an AST interpreter over numpy arrays, no exec) in a time-limited
child process.

A remap must be a bijection on every grid the kernel is launched with, or programs are skipped
or run twice. `bijectivity_grids` adds the sizes that catch the usual bugs (fewer programs than
dies, counts the die count does not divide, primes, one ~1M grid) to the kernel's own.
"""

from __future__ import annotations

import ast
import math
import time
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from swizzleperf import untrusted
from swizzleperf.errors import ChildSetupError, RemapRejected, SandboxError
from swizzleperf.isolation import Confinement
from swizzleperf.kernel import HookSignature
from swizzleperf.proofs.verdict import ProofVerdict
from swizzleperf.sandbox import run_in_child
from swizzleperf.untrusted import echo, show_int

MAX_SOURCE_CHARS = 20_000
MAX_NODES = 4_000
MAX_DEPTH = 100  # syntax-tree nesting; keeps every recursive walk far from Python's recursion limit
LOOP_TRIP_CAP = 64  # most loop-body executions per program, nested loops multiplied
# The evaluating child's address space: the suite's hooks peak at 190-225 MB on their ~1M-program grids
# (70-106 MB resident), so this leaves room for many intermediates and keeps any candidate under 1 GB.
CHECK_MEMORY_MB = 1024
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


def _check_signature(fn: ast.FunctionDef, hook: HookSignature) -> None:
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
    _check_signature(fn, hook)
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


# --- bijectivity -----------------------------------------------------------------------------

_PRIMES = (97, 1009, 65537)
_LARGE_1D = 1_000_003  # prime, ~1M programs


def bijectivity_grids(hook: HookSignature, declared_grids: list[tuple[int, ...]],
                      num_domains: int) -> list[tuple[int, ...]]:
    """The kernel's declared grids, then extra grids that catch the usual remap bugs, small first.

    1D: fewer programs than dies, equal, counts the die count does not divide (N+1, 2N+3, ...),
    primes, and one ~1M grid. 2D and 3D: analogous shapes, thin, square and coprime extents.
    """
    n = max(1, num_domains)
    if hook.ndim == 1:
        extra = [(g,) for g in (1, 2, n - 1, n, n + 1, 2 * n, 2 * n + 3, 3 * n - 1, n * n + 1, *_PRIMES, _LARGE_1D)]
    elif hook.ndim == 2:
        extra = [(1, 1), (1, 7), (7, 1), (3, 5), (n, n), (n + 1, n - 1), (1, n + 1), (2 * n + 3, 3), (13, 17),
                 (31, 29), (1000, 1000)]
    else:
        base = [(1,) * hook.ndim, (2, 3, 5), (n, 3, 7), (3, n + 1, 5), (7, 11, 13), (100, 100, 101)]
        extra = [g[:hook.ndim] + (1,) * (hook.ndim - len(g)) for g in base]
    grids: list[tuple[int, ...]] = []
    for grid in [tuple(int(v) for v in g) for g in declared_grids] + sorted(extra, key=math.prod):
        if len(grid) == hook.ndim and min(grid) >= 1 and grid not in grids:
            grids.append(grid)
    return grids


class BijectivityFailure(BaseModel):
    """The first grid on which a remap is not a bijection, and the evidence."""

    model_config = ConfigDict(extra="forbid")
    grid: tuple[int, ...] | None = Field(description="None when the evaluation as a whole failed")
    kind: Literal["evaluation", "out_of_range", "not_one_to_one", "sandbox", "counterexample"]
    message: str
    programs: list[int] = Field(default_factory=list, description="launch ids that collide or leave the grid")
    logical: tuple[int, ...] | None = Field(None, description="the logical index they map to")
    missing: tuple[int, ...] | None = Field(None, description="the first logical index no program produces")


class BijectivityReport(BaseModel):
    """Whether a remap is a bijection on each checked grid (stored with the attempt)."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 1
    hook: str
    constexprs: dict[str, int]
    grids: list[tuple[int, ...]] = Field(description="grids checked, in order, up to the first failure")
    failure: BijectivityFailure | None = None
    seconds: float
    proof: ProofVerdict | None = Field(None, description="the z3 proof for every grid size (swizzleperf.proofs)")
    proof_text: str | None = Field(None, description="what is known beyond the sampled grids (proof_status); "
                                                     "None where no proof was asked for")

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def message(self) -> str:
        """One sentence for histories, prompts and the CLI."""
        if self.failure is None:
            sizes = ", ".join(_format_grid(g) for g in self.grids)
            proof = f"; {self.proof_text}" if self.proof_text else ""
            return f"bijective on all {len(self.grids)} grids ({sizes}){proof}"
        return self.failure.message

    def raise_if_failed(self) -> None:
        if self.failure is not None:
            raise RemapRejected("bijectivity", self.failure.message)


def _format_grid(grid: tuple[int, ...]) -> str:
    return f"({grid[0]},)" if len(grid) == 1 else "(" + ", ".join(map(str, grid)) + ")"


def _format_index(index: tuple[int, ...]) -> str:
    return str(index[0]) if len(index) == 1 else "(" + ", ".join(map(str, index)) + ")"


def find_bijectivity_failure(coords: np.ndarray, grid: tuple[int, ...]) -> BijectivityFailure | None:
    """Check one evaluated grid: coords[p] is the logical index launch id p maps to, shape (G, ndim)."""
    size = math.prod(grid)
    label = f"grid {_format_grid(grid)}"
    extents = np.asarray(grid, dtype=np.int64)
    outside = np.flatnonzero(((coords < 0) | (coords >= extents)).any(axis=1))
    if outside.size:
        p = int(outside[0])
        index = tuple(int(v) for v in coords[p])
        return BijectivityFailure(
            grid=grid, kind="out_of_range", programs=[p], logical=index,
            message=f"{label}: program {p} maps to {_format_index(index)}, outside the grid "
                    f"(each index must lie in [0, extent)); {outside.size} program(s) out of range")
    linear = np.ravel_multi_index(tuple(coords.T), grid) if len(grid) > 1 else coords[:, 0]
    counts = np.bincount(linear, minlength=size)
    repeated = np.flatnonzero(counts > 1)
    if not repeated.size:
        return None
    target = int(repeated[0])
    programs = np.flatnonzero(linear == target)[:8].tolist()
    missing = int(np.flatnonzero(counts == 0)[0])
    logical = tuple(int(v) for v in np.unravel_index(target, grid))
    absent = tuple(int(v) for v in np.unravel_index(missing, grid))
    names = ", ".join(map(str, programs[:-1])) + f" and {programs[-1]}"
    more = f" (and {int(counts[target]) - len(programs)} more)" if counts[target] > len(programs) else ""
    verb = "both map" if counts[target] == 2 else "all map"
    n_missing = int((counts == 0).sum())
    return BijectivityFailure(
        grid=grid, kind="not_one_to_one", programs=programs, logical=logical, missing=absent,
        message=f"{label}: programs {names}{more} {verb} to {_format_index(logical)}; "
                f"logical {_format_index(absent)} is never produced ({n_missing} of {size} logical ids missing)")


def _hook_payload(hook: HookSignature) -> dict:
    return {"name": hook.name, "pid": hook.pid, "grid_params": list(hook.grid_params),
            "constexprs": list(hook.constexprs)}


def _evaluate_in_child(source: str, hook: HookSignature, grids: list[tuple[int, ...]],
                       constexprs: dict[str, int], timeout: float, what: str):
    """Coordinates per grid from a child process, and the child's evaluation error if one stopped it."""
    missing = [c for c in hook.constexprs if c not in constexprs]
    if missing:  # a caller's mistake, not the candidate's: fail here rather than in the child
        raise ValueError(f"no value for the hook's constexpr parameter(s) {', '.join(missing)}; pass constexprs=")
    bad = [g for g in grids if len(g) != hook.ndim or min(g) < 1]
    if bad:
        raise ValueError(f"grids {bad} do not fit {hook.render()}: each needs {hook.ndim} positive extent(s)")
    payload = {"source": source, "hook": _hook_payload(hook), "grids": [list(g) for g in grids],
               "constexprs": {k: int(v) for k, v in constexprs.items()}}
    confinement = Confinement(memory_mb=CHECK_MEMORY_MB, cpu_s=timeout + 10, file_mb=256, network=False, threads=1)
    result = run_in_child("swizzleperf.remap_eval:evaluate_grids_child", payload, timeout, what=what,
                          confinement=confinement)
    arrays = []
    for i, grid in enumerate(grids[:int(result.value["evaluated"])]):
        coords = result.arrays.get(f"grid_{i}")
        if coords is None or coords.dtype != np.int64 or coords.shape != (math.prod(grid), hook.ndim):
            raise SandboxError(f"{what} returned no valid result for grid {_format_grid(grid)}")
        arrays.append(coords)
    return arrays, result.value.get("rejected")


def _evaluate_here(fn: ast.FunctionDef, hook: HookSignature, grids: list[tuple[int, ...]],
                   constexprs: dict[str, int]):
    """_evaluate_in_child's result, computed in this process (bounded by the counted work)."""
    from swizzleperf.remap_eval import evaluate_checked

    arrays = []
    for grid in grids:
        try:
            arrays.append(evaluate_checked(fn, hook, grid, constexprs))
        except RemapRejected as exc:
            return arrays, {"grid": list(grid), "reason": exc.reason}
    return arrays, None


def check_bijective(source: str, hook: HookSignature, grids: list[tuple[int, ...]],
                    constexprs: dict[str, int], timeout: float = 30.0, prove: bool = True,
                    isolate: bool = True) -> BijectivityReport:
    """Evaluate the remap on every grid in a child process and check it is one-to-one and in range;
    then (`prove`) the z3 proof for every grid size, whose counterexample is a failure too.
    `isolate=False` evaluates and proves in this process: nothing is executed either way and the
    counted work bounds the evaluation, but only a child bounds memory and the solver's time.

    Static-check failures and counted work over the budget (swizzleperf.work) raise
    RemapRejected; everything after (an evaluation error, a collision, a child past its time
    limit) is a failed report, so the loop can record it.
    """
    fn = static_check(source, hook)
    from swizzleperf.work import BIJECTIVITY_WORK, programs_of, require_work

    require_work(fn, constexprs, programs_of(grids), BIJECTIVITY_WORK, "bijectivity", "the sampled grids")
    t0 = time.perf_counter()
    checked: list[tuple[int, ...]] = []
    failure = None
    try:
        arrays, rejected = _evaluate_in_child(source, hook, grids, constexprs, timeout, "the bijectivity check") \
            if isolate else _evaluate_here(fn, hook, grids, constexprs)
    except ChildSetupError:
        raise  # the installation's fault, not the candidate's
    except SandboxError as exc:
        failure = BijectivityFailure(grid=None, kind="sandbox", message=f"evaluation failed: {exc}")
        arrays, rejected = [], None
    for grid, coords in zip(grids, arrays):
        checked.append(grid)
        failure = find_bijectivity_failure(coords, grid)
        if failure is not None:
            break
    if failure is None and rejected is not None:
        grid = tuple(rejected["grid"])
        checked.append(grid)
        failure = BijectivityFailure(grid=grid, kind="evaluation",
                                     message=f"grid {_format_grid(grid)}: {rejected['reason']}")
    report = BijectivityReport(hook=hook.render(), constexprs=dict(constexprs), grids=checked, failure=failure,
                               seconds=time.perf_counter() - t0)
    return with_proof(report, source, hook, isolate) if prove and failure is None else report


def with_proof(report: BijectivityReport, source: str, hook: HookSignature, isolate: bool = True) -> BijectivityReport:
    """The sampled report with the proof's verdict; a counterexample becomes its failure."""
    from swizzleperf.proof_status import proof_sentence, prove_remap

    verdict = prove_remap(source, hook, report.constexprs, in_child=isolate)
    update = {"proof": verdict, "proof_text": proof_sentence(verdict, len(report.grids)),
              "seconds": report.seconds + (verdict.seconds if verdict else 0.0)}
    if verdict is not None and verdict.counterexample is not None:
        cex = verdict.counterexample
        update["failure"] = BijectivityFailure(grid=cex.grid, kind="counterexample", programs=cex.programs,
                                               logical=cex.logical, message=f"{verdict.message}; found by z3 after "
                                               f"the {len(report.grids)} sampled grids passed")
    return report.model_copy(update=update)


def logical_ids(source: str, hook: HookSignature, grid: tuple[int, ...], constexprs: dict[str, int],
                timeout: float = 30.0) -> np.ndarray:
    """Per launch id, the C-order linear index of the logical coordinates it maps to (int64 [G]).

    Evaluated in a child. Raises RemapRejected when the candidate fails the static check, the
    evaluation, or maps a program outside the grid; SandboxError past the time limit. It does
    not check one-to-one: run check_bijective first.
    """
    static_check(source, hook)
    grid = tuple(int(g) for g in grid)
    arrays, rejected = _evaluate_in_child(source, hook, [grid], constexprs, timeout, "remap evaluation")
    if rejected is not None:
        raise RemapRejected("evaluation", rejected["reason"])
    failure = find_bijectivity_failure(arrays[0], grid)
    if failure is not None and failure.kind == "out_of_range":
        raise RemapRejected("bijectivity", failure.message)
    coords = arrays[0]
    return np.ravel_multi_index(tuple(coords.T), grid).astype(np.int64) if len(grid) > 1 else coords[:, 0].copy()
