"""What a stock Triton module holds: its kernels, their program-id reads, and the host launch.

Everything is read from the syntax tree; nothing of the stock module is imported or run (on a
machine without a GPU, a tutorial file fails on import: the CPU interpreter has no driver).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from swizzleperf.errors import SwizzlePerfError
from swizzleperf.kernel.contract import _is_triton_jit
from swizzleperf.workflows.adopt.text import Source

LANGUAGE = frozenset({"tl", "triton.language", "language"})


class AdoptError(SwizzlePerfError):
    """The module cannot be adopted at all (no kernel, no program id, already adopted...)."""


@dataclass
class Launch:
    """`kernel[grid](args...)` inside a host function (the wrapper)."""

    wrapper: ast.FunctionDef
    statement: ast.stmt  # the top-level statement of the wrapper that holds the launch
    call: ast.Call
    grid: ast.expr

    def kernel_args(self, kernel: ast.FunctionDef) -> dict[str, ast.expr]:
        """Kernel parameter name -> the wrapper expression passed for it."""
        names = [a.arg for a in kernel.args.args]
        bound = {names[i]: arg for i, arg in enumerate(self.call.args) if i < len(names)
                 and not isinstance(arg, ast.Starred)}
        bound.update({k.arg: k.value for k in self.call.keywords if k.arg})
        return bound


@dataclass
class Scan:
    """The parts of the module that adoption reads."""

    path: Path
    src: Source
    tree: ast.Module
    kernel: ast.FunctionDef
    program_ids: list[ast.Call]  # tl.program_id(axis) calls in the kernel, in source order
    axes: list[int]  # the axes they read, sorted
    launch: Launch | None
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    other_kernels: list[str] = field(default_factory=list)
    aliases: frozenset[str] = LANGUAGE

    def tl_call(self, node: ast.AST, name: str) -> bool:
        return tl_call(node, name, self.aliases)

    @property
    def name(self) -> str:
        return self.kernel.name

    def constexprs(self) -> list[str]:
        return [a.arg for a in self.kernel.args.args
                if a.annotation is not None and ast.unparse(a.annotation).endswith("constexpr")]


def language_aliases(tree: ast.Module) -> frozenset[str]:
    """Names the module binds to triton.language (`import triton.language as tle`), with the usual ones."""
    found = set(LANGUAGE)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.asname for a in node.names if a.name == "triton.language" and a.asname}
        elif isinstance(node, ast.ImportFrom) and node.module == "triton":
            found |= {a.asname or a.name for a in node.names if a.name == "language"}
    return frozenset(found)


def tl_call(node: ast.AST, name: str, aliases: frozenset[str] = LANGUAGE) -> bool:
    """Whether `node` calls tl.<name> (through any alias of triton.language, or a bare imported <name>)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr == name and ast.unparse(func.value) in aliases
    return isinstance(func, ast.Name) and func.id == name


def axis_of(call: ast.Call) -> int | None:
    """The constant axis of tl.program_id / tl.num_programs (0 when omitted), else None."""
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "axis"), None)
    if arg is None:
        return 0
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, int) else None


def _launch_in(fn: ast.FunctionDef, kernel: str) -> Launch | None:
    for stmt in fn.body:
        for node in ast.walk(stmt):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == kernel):
                return Launch(wrapper=fn, statement=stmt, call=node, grid=node.func.slice)
    return None


def scan(path: Path, text: str, kernel_name: str | None = None) -> Scan:
    """Parse the module and pick the kernel to adopt: `kernel_name`, else the first @triton.jit one that
    reads a program id (the first that a host function in the module launches, if any does)."""
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise AdoptError(f"{path.name} does not parse: line {exc.lineno}: {exc.msg}") from None
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    jitted = [f for f in functions.values() if any(_is_triton_jit(d) for d in f.decorator_list)]
    if not jitted:
        raise AdoptError(f"{path.name} defines no @triton.jit kernel at module level: nothing to adopt here; a "
                         f"kernel it launches from another module is captured from your own command: swizzleperf "
                         f"capture -- python -m pytest tests/...")
    aliases = language_aliases(tree)
    reading = [(f, [n for n in ast.walk(f) if tl_call(n, "program_id", aliases)]) for f in jitted]
    if kernel_name is not None:
        reading = _named(path, reading, kernel_name)
    reading = [(f, calls) for f, calls in reading if calls]
    if not reading:
        names = ", ".join(f.name for f in jitted)
        raise AdoptError(f"{path.name}: no @triton.jit kernel ({names}) calls tl.program_id, so there is no "
                         f"program order to remap")
    if any(a.arg == "NUM_XCDS" for f, _ in reading for a in f.args.args):
        raise AdoptError(f"{path.name} already has a NUM_XCDS parameter: it looks adopted; run swizzleperf check on it")
    hosts = [f for f in functions.values() if f not in jitted]
    launched = [(f, calls, next((lc for h in hosts if (lc := _launch_in(h, f.name))), None)) for f, calls in reading]
    kernel, calls, launch = next((item for item in launched if item[2] is not None), launched[0])
    calls.sort(key=lambda c: (c.lineno, c.col_offset))
    axes = [axis_of(c) for c in calls]
    if None in axes:
        raise AdoptError(f"{path.name}:{calls[axes.index(None)].lineno}: tl.program_id needs a constant axis "
                         f"(0, 1 or 2) to be remapped")
    return Scan(path=path, src=Source(text), tree=tree, kernel=kernel, program_ids=calls, axes=sorted(set(axes)),
                launch=launch, functions=functions,
                other_kernels=[f.name for f, _ in reading if f is not kernel], aliases=aliases)


def _named(path: Path, reading: list, name: str) -> list:
    chosen = [(f, calls) for f, calls in reading if f.name == name]
    if not chosen:
        names = ", ".join(f.name for f, _ in reading)
        raise AdoptError(f"{path.name} has no @triton.jit kernel named {name} (it has: {names})")
    if not chosen[0][1]:
        raise AdoptError(f"{path.name}: {name} does not call tl.program_id itself, so there is no program order "
                         f"to remap in it")
    return chosen
