"""How the stock module calls its own wrapper: the best evidence of sizes, inputs and a reference.

A tutorial tests itself: it builds tensors (`a = torch.randn((512, 512), dtype=torch.float16)`),
calls the wrapper (`matmul(a, b)`), computes the same thing with torch (`torch.matmul(a, b)`) and
compares (`torch.allclose(..., atol=1e-2, rtol=0)`). Each of those becomes a declaration.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

# torch's own defaults: allclose, and assert_close per dtype
_ALLCLOSE = {"atol": 1e-8, "rtol": 1e-5}
_ASSERT_CLOSE = {"float16": {"atol": 1e-5, "rtol": 1e-3}, "bfloat16": {"atol": 1e-5, "rtol": 1.6e-2},
                 "float32": {"atol": 1e-5, "rtol": 1.3e-6}}
RANDOM = ("randn", "rand")


@dataclass
class Usage:
    """One call of the wrapper with tensors the module built itself."""

    call: ast.Call
    result: str | None
    tensors: dict[str, str] = field(default_factory=dict)  # wrapper param -> the caller's variable
    constructions: dict[str, ast.Call] = field(default_factory=dict)  # caller's variable -> torch.randn(...)
    literals: dict[str, ast.expr] = field(default_factory=dict)  # wrapper param -> literal argument
    reference: ast.expr | None = None
    tolerance: dict[str, float] | None = None
    tolerance_from: str = ""


def _assigned(tree: ast.Module, name: str, before: int) -> ast.expr | None:
    """The value last assigned to `name` before line `before`, anywhere in the module."""
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and n.lineno < before
             and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
    return max(found, key=lambda n: n.lineno).value if found else None


def _is_random(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RANDOM \
        and ast.unparse(node.func.value) == "torch"


def find_usage(tree: ast.Module, wrapper: ast.FunctionDef) -> Usage | None:
    """The first call of the wrapper outside it whose tensor arguments are built with torch.randn/rand."""
    params = [a.arg for a in wrapper.args.args]
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                    and n.func.id == wrapper.name and not _inside(n, wrapper)), key=lambda n: n.lineno)
    for call in calls:
        usage = Usage(call=call, result=_result_of(tree, call))
        for param, arg in zip(params, call.args):
            value = _assigned(tree, arg.id, call.lineno) if isinstance(arg, ast.Name) else None
            if _is_random(value):
                usage.tensors[param] = arg.id
                usage.constructions[arg.id] = value
            elif isinstance(arg, ast.Constant):
                usage.literals[param] = arg
        for kw in call.keywords:
            if kw.arg in params and isinstance(kw.value, ast.Constant):
                usage.literals[kw.arg] = kw.value
        if usage.tensors:
            _comparison(tree, usage)
            return usage
    return None


def _inside(node: ast.AST, fn: ast.FunctionDef) -> bool:
    return fn.lineno <= node.lineno <= (fn.end_lineno or fn.lineno)


def _result_of(tree: ast.Module, call: ast.Call) -> str | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.value is call and isinstance(node.targets[0], ast.Name):
            return node.targets[0].id
    return None


def _comparison(tree: ast.Module, usage: Usage) -> None:
    """The torch expression the result is compared with, and the comparison's tolerance."""
    if usage.result is None:
        return
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in
                ("allclose", "assert_close", "assert_allclose") and len(node.args) >= 2):
            continue
        names = [a.id if isinstance(a, ast.Name) else None for a in node.args[:2]]
        if usage.result not in names:
            continue
        other_arg = node.args[1 - names.index(usage.result)]
        other = names[1 - names.index(usage.result)]
        expr = _assigned(tree, other, node.lineno) if other else other_arg  # a name, or the expression itself
        allowed = set(usage.tensors.values()) | {"torch", "F", "math"}
        if expr is not None and {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)} <= allowed:
            usage.reference = expr
        usage.tolerance, usage.tolerance_from = _tolerance(node, usage)
        return


def _tolerance(node: ast.Call, usage: Usage) -> tuple[dict[str, float], str]:
    func = ast.unparse(node.func)
    given, computed = {}, []
    for kw in node.keywords:
        if kw.arg in ("atol", "rtol"):
            try:
                given[kw.arg] = float(ast.literal_eval(kw.value))
            except (ValueError, TypeError, SyntaxError):
                computed.append(f"{kw.arg}={ast.unparse(kw.value)}")
    where = f"the module's {func}(...) at line {node.lineno}"
    if computed:  # an expression (`rtol=0 if is_hip() else 1e-2`): not guessed at, said
        where += f"; its {', '.join(computed)} is computed, so the defaults stand for it: check them"
    if func.endswith("allclose"):
        return {**_ALLCLOSE, **given}, where + ("" if given or computed else " (torch's defaults)")
    dtype = next((ast.unparse(kw.value).split(".")[-1] for c in usage.constructions.values() for kw in c.keywords
                  if kw.arg == "dtype"), "float32")
    defaults = _ASSERT_CLOSE.get(dtype, _ASSERT_CLOSE["float32"])
    return {**defaults, **given}, where + ("" if given or computed else f" ({dtype} defaults)")
