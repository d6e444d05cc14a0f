"""A found remap written back into the user's original module, at its program-id site, in its style.

The kernel keeps its launch, its signature and its code; what changes is where its programs get
their ids. The remap goes in as a `@triton.jit` function before the kernel, called with the die
count it was found for as a literal (no new parameter, no change at any launch site):
- 1D: each `tl.program_id(0)` (or call of a helper that returns it) is wrapped;
- several axes: the launch keeps its grid; the kernel linearises its program ids in the order the
  GPU dispatches them (axis 0 fastest), the remap returns one index per axis, and the reads of
  `tl.program_id(a)` become those indices;
- 2D: the statements that derive (pid_m, pid_n) from the program id (the kernel's own grouping,
  or its library's remap helpers) are replaced by one call of the remap, whose identity they were.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from pathlib import Path

from swizzleperf.errors import CaptureError
from swizzleperf.kernel.contract import _is_triton_jit
from swizzleperf.remaps.library import LibraryEntry, rename_function
from swizzleperf.untrusted import source_text
from swizzleperf.workflows.adopt.hook import _arithmetic
from swizzleperf.workflows.adopt.scan import axis_of, language_aliases, tl_call
from swizzleperf.workflows.adopt.text import Edit, Source, apply


@dataclass
class Patch:
    path: Path
    before: str
    after: str
    how: str

    def diff(self) -> str:
        name = str(self.path)
        return "".join(difflib.unified_diff(self.before.splitlines(keepends=True), self.after.splitlines(keepends=True),
                                            f"a/{name}", f"b/{name}"))


class _Site:
    """The kernel in the module, and how it reads triton.language."""

    def __init__(self, path: Path, text: str, kernel: str, pid_helpers: set[str]):
        self.path, self.src, self.tree = path, Source(text), ast.parse(text)
        self.aliases = language_aliases(self.tree)
        jitted = [f for f in self.tree.body if isinstance(f, ast.FunctionDef)
                  and any(_is_triton_jit(d) for d in f.decorator_list)]
        self.fn = next((f for f in jitted if f.name == kernel), None)
        if self.fn is None:
            raise CaptureError(f"{path} has no @triton.jit kernel named {kernel} "
                               f"(it has: {', '.join(f.name for f in jitted) or 'none'})")
        self.pid_helpers = pid_helpers
        calls = [n for n in ast.walk(self.fn) if tl_call(n, "program_id", self.aliases)]
        bound = [a.asname or a.name for n in ast.walk(self.tree) if isinstance(n, ast.Import) for a in n.names
                 if a.name == "triton.language"]
        bound += [a.asname or a.name for n in ast.walk(self.tree) if isinstance(n, ast.ImportFrom)
                  and n.module == "triton" for a in n.names if a.name == "language"]
        self.tl = ast.unparse(calls[0].func.value) if calls and isinstance(calls[0].func, ast.Attribute) else \
            "tl" if "tl" in bound else bound[0] if bound else "triton.language"

    def is_pid_source(self, node: ast.AST, axis: int = 0) -> bool:
        if tl_call(node, "program_id", self.aliases):
            return axis_of(node) == axis
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.pid_helpers

    def free_name(self, wanted: str) -> str:
        taken = {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name)} | {
            f.name for f in self.tree.body if isinstance(f, (ast.FunctionDef, ast.ClassDef))}
        return next(n for n in (wanted, f"{wanted}_remap", f"swizzleperf_{wanted}") if n not in taken)


def _one_d(site: _Site, hook: str, dies: int) -> tuple[list[Edit], str]:
    calls = [n for n in ast.walk(site.fn) if site.is_pid_source(n)]
    if not calls:
        raise CaptureError(f"{site.fn.name} in {site.path} reads no program id of axis 0 that the remap could wrap")
    edits = [Edit(site.src.start(c), site.src.end(c), f"{hook}({site.src.segment(c)}, {site.tl}.num_programs(0), "
                  f"{dies})") for c in calls]
    return edits, f"{len(calls)} program-id read{'s' * (len(calls) > 1)} wrapped"


def _by_axes(site: _Site, hook: str, dies: int, count: int) -> tuple[list[Edit], str]:
    tl = site.tl
    terms, scale = [], []
    for a in range(count):
        terms.append(" * ".join([f"{tl}.program_id({a})", *scale]))
        scale.append(f"{tl}.num_programs({a})")
    slow_first = list(range(count - 1, -1, -1))
    body = [s for s in site.fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    indent = " " * body[0].col_offset
    lines = (f"{indent}_launch_pid = {' + '.join(terms)}  # the GPU's order: axis 0 fastest\n"
             f"{indent}{', '.join(f'_pid_axis_{a}' for a in slow_first)} = {hook}(_launch_pid, "
             f"{', '.join(f'{tl}.num_programs({a})' for a in slow_first)}, {dies})\n")
    edits = [Edit(site.src.line_start(body[0].lineno), site.src.line_start(body[0].lineno), lines)]
    for node in ast.walk(site.fn):
        if tl_call(node, "program_id", site.aliases) and axis_of(node) is not None:
            edits.append(Edit(site.src.start(node), site.src.end(node), f"_pid_axis_{axis_of(node)}"))
    return edits, f"program ids of axes {', '.join(map(str, range(count)))} remapped together (launch unchanged)"


def _assigned(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        return {n.id for n in ast.walk(stmt.targets[0]) if isinstance(n, ast.Name)}
    return set()


def _two_d(site: _Site, hook: str, dies: int, extents: list[str], order: list[str] | None) -> tuple[list[Edit], str]:
    body = site.fn.body
    start = next((i for i, s in enumerate(body) if _assigned(s) and any(site.is_pid_source(n) for n in ast.walk(s))),
                 None)
    if start is None:
        raise CaptureError(f"{site.fn.name} in {site.path} assigns no program id that a 2D remap could replace")
    derived, path = set(_assigned(body[start])), [start]
    for i in range(start + 1, len(body)):
        reads = {n.id for n in ast.walk(body[i]) if isinstance(n, ast.Name)}
        if not reads & derived:
            continue
        value = body[i].value if _assigned(body[i]) else None
        helper_call = isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
        if value is None or not (helper_call or _arithmetic(value, site.aliases)):
            break
        derived |= _assigned(body[i])
        path.append(i)
    later = {n.id for s in body[path[-1] + 1:] for n in ast.walk(s) if isinstance(n, ast.Name)}
    # in the order the hook returns them: as the kernel file calls it, else by where each is first assigned
    first = {n: (body[i].lineno, k) for i in reversed(path) for k, n in enumerate(_ordered_targets(body[i]))}
    outputs = sorted((derived & later) - set(_ordered_targets(body[start])), key=first.get)
    if order and set(order) == set(outputs):
        outputs = list(order)
    if len(outputs) != 2:
        raise CaptureError(f"{site.fn.name} in {site.path}: the program-id derivation ends in {outputs}, not the two "
                           f"indices the 2D remap returns")
    pid_source = next(n for n in ast.walk(body[start]) if site.is_pid_source(n))
    src = site.src
    edits = [Edit(src.line_start(body[i].lineno), src.line_end(body[i].end_lineno), "") for i in path[:-1]]
    last = body[path[-1]]
    call = (f"{' ' * last.col_offset}{', '.join(outputs)} = {hook}({src.segment(pid_source)}, {', '.join(extents)}, "
            f"{dies})\n")
    edits.append(Edit(src.line_start(last.lineno), src.line_end(last.end_lineno), call))
    return edits, f"the {len(path)} statements deriving ({', '.join(outputs)}) replaced by one call"


def _ordered_targets(stmt: ast.stmt) -> list[str]:
    target = stmt.targets[0]
    return [e.id for e in (target.elts if isinstance(target, ast.Tuple) else [target]) if isinstance(e, ast.Name)]


def _hook_text(entry: LibraryEntry, hook: str, tl: str) -> str:
    source = rename_function(entry.source, entry.name, hook)
    if tl != "tl":
        tree = ast.parse(source)
        src = Source(source)
        source = apply(source, [Edit(src.start(n), src.end(n), tl) for n in ast.walk(tree)
                                if isinstance(n, ast.Name) and n.id == "tl"])
    if not source.lstrip().startswith("@"):
        source = "@triton.jit\n" + source
    return f"{source.rstrip()}\n\n\n"  # its docstring says where it comes from


def patch_module(path: Path, kernel: str, entry: LibraryEntry, pid_helpers: set[str] = frozenset(),
                 order: list[str] | None = None) -> Patch:
    """The module `path` with `entry` as its kernel's program-id remap (the file is only read). `order`: the
    names a 2D hook's results go to, as the run's kernel file assigns them (`pid_m, pid_n = swizzle(...)`)."""
    try:
        text = source_text.decode(path.read_bytes())
    except OSError as exc:
        raise CaptureError(f"cannot read {path}: {exc.strerror}") from None
    site = _Site(path, text, kernel, set(pid_helpers))
    hook = site.free_name(entry.name)
    grid = list(entry.params[1:-1])
    if entry.ndim == 1:
        edits, how = _one_d(site, hook, entry.num_domains)
    elif all(p.startswith("num_pid_axis_") for p in grid):
        edits, how = _by_axes(site, hook, entry.num_domains, entry.ndim)
    else:
        edits, how = _two_d(site, hook, entry.num_domains, grid, order)
    first = min([site.fn.lineno, *(d.lineno for d in site.fn.decorator_list)])
    at = site.src.line_start(first)
    edits.append(Edit(at, at, _hook_text(entry, hook, site.tl)))
    after = apply(text, edits)
    ast.parse(after)  # a bug here must not be offered as a patch
    return Patch(path=path, before=text, after=after,
                 how=f"{hook}() before {kernel}, called with NUM_XCDS = {entry.num_domains}; {how}")
