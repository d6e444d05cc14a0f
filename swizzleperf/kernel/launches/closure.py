"""The source a kernel needs to stand alone, resolved from the live objects at its launch.

Static reading cannot follow a kernel into the helpers another module exports, through an alias
(`import triton.language as tle`), or to a constant re-exported from elsewhere; the running
module can. For the kernel and, transitively, each @triton.jit helper it calls, every global name
it reads is resolved in that function's own globals and becomes one unit: an import (a module),
a constant (a number, a string, a `tl.constexpr`, a triton dtype), or another function's source
(decorators dropped: the kernel file writes `@triton.jit`). What cannot be copied is named with
its module, so the kernel file can import it from there.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import math
import textwrap
import types

_MISSING = object()


def _jit_python_fn(value):
    """The Python function behind a JITFunction / InterpretedFunction (None for anything else)."""
    if type(value).__name__ in ("JITFunction", "InterpretedFunction") and callable(getattr(value, "fn", None)):
        return value.fn
    return None


def function_source(fn) -> tuple[str, str, int]:
    """The function's text from its `def` line (decorators dropped), its file and that line."""
    text = textwrap.dedent(inspect.getsource(fn))
    node = ast.parse(text).body[0]
    lines = text.splitlines(keepends=True)
    start = node.lineno
    first_line = inspect.getsourcelines(fn)[1] + (start - min([start, *(d.lineno for d in node.decorator_list)]))
    return "".join(lines[start - 1:]), inspect.getsourcefile(fn) or "", first_line


def global_loads(source: str) -> list[str]:
    """Names a function reads that it does not bind itself, in order of first use."""
    fn = ast.parse(source).body[0]
    bound = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    bound |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    seen: dict[str, None] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound:
            seen.setdefault(n.id)
    return list(seen)


def _constant_text(value) -> str | None:
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        inner = _constant_text(value.value)
        return None if inner is None else f"tl.constexpr({inner})"
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    if type(value) in (bool, int, float, str, type(None)):
        return repr(value)
    name = language_name(value)
    return f"tl.{name}" if name else None


def language_name(value) -> str | None:
    """The name triton.language gives a triton dtype (`float16` for tl.float16), else None."""
    if type(value).__name__ != "dtype" or not type(value).__module__.startswith("triton"):
        return None
    import triton.language as tl
    return next((n for n in dir(tl) if not n.startswith("_") and getattr(tl, n) is value), None)


def _library_import(name: str, value) -> str | None:
    """`from triton.language import constexpr` for a class or function of triton (or torch, math)."""
    module, qualname = getattr(value, "__module__", None) or "", getattr(value, "__qualname__", "")
    if module.split(".")[0] not in ("triton", "torch", "math") or "." in qualname or not qualname:
        return None
    import sys
    for home in ("triton.language", module):
        if getattr(sys.modules.get(home), qualname, None) is value:
            return f"from {home} import {qualname}" + (f" as {name}" if name != qualname else "")
    return None


def _unit(name: str, value, owner) -> dict:
    """What the kernel file writes for global `name` of function `owner`."""
    if isinstance(value, types.ModuleType):
        module = value.__name__
        text = f"import {module}" if module == name else f"import {module} as {name}"
        return {"kind": "import", "name": name, "text": text}
    if _jit_python_fn(value) is not None:
        return {"kind": "function", "name": name}
    text = _constant_text(value)
    if text is not None:
        return {"kind": "constant", "name": name, "text": f"{name} = {text}"}
    library = _library_import(name, value)
    if library is not None:
        return {"kind": "import", "name": name, "text": library}
    module = getattr(owner, "__module__", "?")
    return {"kind": "unresolved", "name": name, "module": module, "text": f"from {module} import {name}",
            "why": f"a {type(value).__qualname__}, which is not copied"}


def collect(kernel_fn) -> dict:
    """The kernel's closure: imports, constants, functions (helpers first, the kernel last), unresolved."""
    units: dict[str, dict] = {}
    identities: dict[str, int] = {}
    functions: list[dict] = []
    clashes: list[str] = []
    queue, done = [kernel_fn], set()
    while queue:
        fn = queue.pop(0)
        if id(fn) in done:
            continue
        done.add(id(fn))
        source, path, line = function_source(fn)
        functions.append({"name": fn.__name__, "module": fn.__module__, "file": path, "line": line,
                          "source": source})
        for name in global_loads(source):
            value = fn.__globals__.get(name, _MISSING)
            if value is _MISSING:
                if not hasattr(builtins, name):
                    clashes.append(f"{name} (read by {fn.__name__}) is not defined in {fn.__module__}")
                continue
            if name in identities and identities[name] != id(value):
                clashes.append(f"{name} means two things ({units[name]['kind']} in one function, another value "
                               f"in {fn.__name__})")
                continue
            identities[name] = id(value)
            units.setdefault(name, _unit(name, value, fn))
            if (inner := _jit_python_fn(value)) is not None:
                queue.append(inner)
    functions.reverse()  # helpers before the functions that call them, the kernel last
    by_kind = lambda kind: [u for u in units.values() if u["kind"] == kind]  # noqa: E731
    return {"imports": by_kind("import"), "constants": by_kind("constant"), "functions": functions,
            "unresolved": by_kind("unresolved"), "problems": clashes}
