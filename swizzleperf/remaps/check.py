"""Remap candidates: the static check and normalised text.

A candidate is the source text of the kernel's remap hook, written by an LLM or a search, so it
is untrusted. It is never executed in this process: `static_check` only parses it and admits a
small integer subset of Triton (listed in `static_check`, walked by `remap.subset`). Everything that needs values
(swizzleperf.validation.bijectivity) runs `swizzleperf.remaps.evaluate`, an AST interpreter over numpy arrays
with no exec, in a time-limited child process.
"""

from __future__ import annotations

import ast

from swizzleperf.errors import RemapRejected
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.remaps.subset import (
    LOOP_TRIP_CAP,
    SubsetChecker,
    body_terminates,
    depth,
    hook_body,
    is_docstring,
    reject,
    trip_count,
)
from swizzleperf.untrusted import parse as untrusted
from swizzleperf.untrusted.parse import MAX_SOURCE_CHARS, echo

__all__ = ["LOOP_TRIP_CAP", "MAX_DEPTH", "MAX_NODES", "check_signature", "hook_body", "normalise", "static_check",
           "trip_count"]

MAX_NODES = 4_000
MAX_DEPTH = 100  # syntax-tree nesting; keeps every recursive walk far from Python's recursion limit


def check_signature(fn: ast.FunctionDef, hook: HookSignature) -> None:
    """The candidate's decorator and parameters are exactly the hook's (names, order, constexprs)."""
    expected = hook.render()
    for deco in fn.decorator_list:
        if ast.unparse(deco) != "triton.jit":
            raise reject(f"the only decorator allowed is @triton.jit, not @{echo(deco)}", deco)
    if not fn.decorator_list:
        raise reject(f"{echo(fn.name)}() must be decorated with @triton.jit", fn)
    args = fn.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults or fn.returns:
        raise reject(f"the signature must be exactly `{expected}` (no defaults, *args, **kwargs or annotations "
                      f"other than tl.constexpr)", fn)
    got = [a.arg for a in args.args]
    if got != list(hook.params):
        raise reject(f"wrong parameters ({echo(', '.join(got))}): the signature must be exactly `{expected}`", fn)
    for arg in args.args:
        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else None
        wanted = "tl.constexpr" if arg.arg in hook.constexprs else None
        if annotation != wanted:
            how = f"annotated `{arg.arg}: tl.constexpr`" if wanted else f"not annotated (got `{echo(str(annotation))}`)"
            raise reject(f"parameter `{echo(arg.arg)}` must be {how}: the signature must be exactly `{expected}`", fn)


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
        raise reject(f"the candidate has more than {MAX_NODES} syntax nodes; a remap is a few lines")
    if depth(module) > MAX_DEPTH:
        raise reject(f"expressions are nested more than {MAX_DEPTH} levels deep: use intermediate variables")
    for stmt in module.body:
        if type(stmt) in (ast.Import, ast.ImportFrom):
            raise reject("imports are not allowed: send only the hook function (the kernel file already "
                          "imports triton and tl)", stmt)
    functions = [s for s in module.body if isinstance(s, ast.FunctionDef)]
    others = [s for s in module.body if not isinstance(s, ast.FunctionDef)]
    if others:
        raise reject(f"only the function {hook.name}() may be defined; found a `{type(others[0]).__name__}` "
                      f"statement outside it", others[0])
    if len(functions) != 1:
        names = ", ".join(f.name for f in functions) or "none"
        raise reject(f"defines {len(functions)} functions ({echo(names)}); define exactly one, `{hook.render()}`")
    fn = functions[0]
    if fn.name != hook.name:
        raise reject(f"the function is named {echo(fn.name)}(); it must be {hook.name}() with signature "
                      f"`{hook.render()}`", fn)
    check_signature(fn, hook)
    body = hook_body(fn)
    if not body:
        raise reject(f"{hook.name}() has no statements", fn)
    checker = SubsetChecker(hook, fn)
    checker.block(body, in_loop=False)
    if not body_terminates(body):
        raise reject(f"{hook.name}() can reach its end without returning: end every path with `return`",
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
                and is_docstring(node.body[0]):
            node.body = node.body[1:] or [ast.Pass()]
    try:
        return ast.unparse(module)
    except (RecursionError, ValueError, MemoryError):  # absurdly nested: compare the text as it is
        return source.strip()
