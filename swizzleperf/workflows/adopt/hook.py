"""The remap hook inserted into the kernel, and the kernel's program ids routed through it.

The identity of the inserted hook must reproduce the kernel's original order exactly, so that
every remap swizzleperf then proposes is measured against what the kernel did before:
- 1D: `tl.program_id(0)` becomes `swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)`.
- 2D: a kernel that derives (pid_m, pid_n) from one program id (the grouped order of a tutorial
  matmul) has that derivation moved into the hook, constexprs replaced by their pinned values;
  the kernel keeps `pid_m, pid_n = swizzle(tl.program_id(0), num_pid_m, num_pid_n, NUM_XCDS)`.
- 3D (or 2D) by axes: a kernel that reads several `tl.program_id` axes is launched as one 1D
  grid instead (the contract's launch), and the hook returns its axes' indices, slowest axis
  first, in the order the GPU would have run them (axis 0 fastest).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from swizzleperf.errors import RemapRejected
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.remaps.check import static_check
from swizzleperf.workflows.adopt.scan import LANGUAGE, Scan, axis_of, tl_call
from swizzleperf.workflows.adopt.text import Edit, Source, apply, indent_of, reindent

_HOOK_DOC = "Launch-order program id -> {what}; this identity is {kernel}'s original order."


@dataclass
class HookPlan:
    """The hook's text, the kernel's edits, and what grid() must return."""

    name: str
    ndim: int
    text: str
    edits: list[Edit]
    extents: list[ast.expr] | None  # kernel-side extents (2D); None: grid() is the launch's program count
    axis_params: list[str] = field(default_factory=list)  # by axes: per-axis extents the launch must pass
    grid_params: list[str] = field(default_factory=list)  # the hook's extents, in its parameter order
    how: str = ""


def hook_name(scan: Scan) -> str:
    taken = {n.id for n in ast.walk(scan.tree) if isinstance(n, ast.Name)} | set(scan.functions)
    return next(n for n in ("swizzle", "remap_pid", "swizzleperf_hook") if n not in taken)


def _num_xcds_edit(src: Source, kernel: ast.FunctionDef) -> Edit:
    """`, NUM_XCDS: tl.constexpr = 8` after the kernel's last parameter: with a default, a launch that does not
    pass it (one adopt did not see) still runs, in the kernel's own order."""
    last = kernel.args.args[-1]
    at = src.end(kernel.args.defaults[-1]) if kernel.args.defaults else src.end(last)
    return Edit(at, at, ", NUM_XCDS: tl.constexpr = 8")


def _tl(call: ast.Call) -> str:
    return ast.unparse(call.func.value) + "." if isinstance(call.func, ast.Attribute) else "tl."


def plan_hook(scan: Scan, constants: dict[str, int]) -> HookPlan:
    """The hook for this kernel: by axes when it reads several, else 2D when it can, else 1D."""
    name = hook_name(scan)
    if len(scan.axes) > 1 or scan.axes != [0]:
        return _by_axes(scan, name)
    two = _two_d(scan, name, constants)
    return two if two is not None else _one_d(scan, name)


def _hook_text(name: str, params: list[str], doc: str, body: str) -> str:
    return (f"@triton.jit\ndef {name}({', '.join(params)}, NUM_XCDS: tl.constexpr):\n"
            f'    """{doc}"""\n{body}')


def _one_d(scan: Scan, name: str, why: str = "") -> HookPlan:
    src = scan.src
    edits = [_num_xcds_edit(src, scan.kernel)]
    for call in scan.program_ids:
        edits.append(Edit(src.start(call), src.end(call),
                          f"{name}({src.segment(call)}, {_tl(call)}num_programs(0), NUM_XCDS)"))
    doc = _HOOK_DOC.format(what="logical program id (a bijection on [0, num_pids))", kernel=scan.name)
    text = _hook_text(name, ["pid", "num_pids"], doc, "    return pid\n")
    how = f"1D hook: tl.program_id(0) of {scan.name} goes through {name}(){why}"
    return HookPlan(name=name, ndim=1, text=text, edits=edits, extents=None, grid_params=["num_pids"], how=how)


# --- 2D: the kernel's own (pid_m, pid_n) derivation moves into the hook ------------------------

def _targets(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        elts = target.elts if isinstance(target, ast.Tuple) else [target]
        if all(isinstance(e, ast.Name) for e in elts):
            return {e.id for e in elts}
    return set()


def _used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


_ARITH = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp, ast.Call,
          ast.Attribute, ast.Load, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


def _callee(func: ast.expr, aliases: frozenset[str]) -> str:
    """`tle.cdiv` -> `tl.cdiv` for any alias of triton.language."""
    if isinstance(func, ast.Attribute) and ast.unparse(func.value) in aliases:
        return "tl." + func.attr
    return ast.unparse(func)


def _arithmetic(expr: ast.expr, aliases: frozenset[str] = LANGUAGE) -> bool:
    """Scalar index arithmetic only (what a remap may hold); tl.arange and loads are not."""
    calls_ok = all(_callee(n.func, aliases) in ("min", "max", "tl.cdiv", "tl.minimum", "tl.maximum", "tl.where")
                   for n in ast.walk(expr) if isinstance(n, ast.Call))
    return calls_ok and all(isinstance(n, _ARITH) for n in ast.walk(expr))


def _two_d(scan: Scan, name: str, constants: dict[str, int]) -> HookPlan | None:
    body = scan.kernel.body
    start = next((i for i, s in enumerate(body) if len(_targets(s)) == 1 and scan.tl_call(s.value, "program_id")), None)
    if start is None:
        return None
    pid = next(iter(_targets(body[start])))
    derived, steps = {pid}, [start]
    for i in range(start + 1, len(body)):
        if _targets(body[i]) and _used(body[i].value) & derived and _arithmetic(body[i].value, scan.aliases):
            derived |= _targets(body[i])
            steps.append(i)
    region = range(start, steps[-1] + 1)
    outside = [s for i, s in enumerate(body) if i not in steps]
    outputs = sorted({n for n in derived if any(n in _used(s) for s in outside)},
                     key=lambda n: next((body[i].lineno, _position(body[i], n)) for i in steps
                                        if n in _targets(body[i]) or n == pid))
    if len(outputs) != 2 or pid in outputs:
        return None
    moved = _with_helpers(body, region, set(steps), scan.aliases)
    free = set().union(*(_used(body[i].value) for i in moved if i != start)) - derived \
        - set().union(*(_targets(body[i]) for i in moved)) - {"min", "max", "tl"}
    extents = sorted(free - set(constants), key=lambda n: _defined_at(body, n))
    params = {a.arg for a in scan.kernel.args.args}
    if len(extents) != 2 or not all(e in params or 0 < _defined_at(body, e) <= body[steps[-1]].lineno
                                    for e in extents):
        return None
    extents = _pair(outputs, extents)
    return _two_d_plan(scan, name, body, start, sorted(moved), outputs, extents, constants)


def _position(stmt: ast.stmt, name: str) -> int:
    """Where `name` stands in the statement's tuple target (`pid_m, pid_n = ...`: pid_m first), 0 otherwise."""
    target = stmt.targets[0] if isinstance(stmt, ast.Assign) else None
    names = [e.id for e in target.elts if isinstance(e, ast.Name)] if isinstance(target, ast.Tuple) else []
    return names.index(name) if name in names else 0


def _defined_at(body: list[ast.stmt], name: str) -> int:
    return next((s.lineno for s in body if name in _targets(s)), 0)


def _with_helpers(body: list[ast.stmt], region: range, moved: set[int], aliases: frozenset[str]) -> set[int]:
    """The derivation plus the region's helper lines used only by it (tiles_per_group = GROUP_SIZE_M * n).

    A `tl.cdiv(...)` line is never a helper: it is a grid extent, which the hook takes as a parameter."""
    while True:
        more = {i for i in region if i not in moved and _targets(body[i]) and _arithmetic(body[i].value, aliases)
                and not tl_call(body[i].value, "cdiv", aliases)
                and any(_targets(body[i]) & _used(body[j]) for j in moved)
                and not any(_targets(body[i]) & _used(s) for j, s in enumerate(body) if j not in moved and j != i)}
        if not more:
            return moved
        moved |= more


def _pair(outputs: list[str], extents: list[str]) -> list[str]:
    """Extents in the order of the outputs they bound (pid_m <-> num_pid_m), else in definition order."""
    first, second = extents
    suffix = "_" + outputs[0].split("_")[-1]
    return [second, first] if second.endswith(suffix) and not first.endswith(suffix) else extents


def _two_d_plan(scan: Scan, name: str, body, start: int, moved: list[int], outputs: list[str],
                extents: list[str], constants: dict[str, int]) -> HookPlan | None:
    src = scan.src
    last = max(moved)
    chunks_in, chunks_out = [], []
    for i in range(start, last + 1):
        first_line = body[i].lineno if i == start else body[i - 1].end_lineno + 1
        chunk_start, chunk_end = src.line_start(first_line), src.line_end(body[i].end_lineno)
        edits = [Edit(src.start(n) - chunk_start, src.end(n) - chunk_start, str(constants[n.id]))
                 for n in ast.walk(body[i]) if isinstance(n, ast.Name) and n.id in constants and i in moved]
        text = apply(src.text[chunk_start:chunk_end], edits)
        (chunks_in if i in moved else chunks_out).append(text if i != start else "")
    call = scan.program_ids[0]
    indent = indent_of(src, body[start])
    hook_call = f"{indent}{', '.join(outputs)} = {name}({src.segment(call)}, {', '.join(extents)}, NUM_XCDS)\n"
    pinned = ", ".join(f"{k} = {v}" for k, v in constants.items() if any(
        k in _used(body[i]) for i in moved))
    doc = _HOOK_DOC.format(what=f"({', '.join(outputs)})", kernel=scan.name) + \
        (f"\n    Moved here from {scan.name} with {pinned} as pinned." if pinned else "")
    hook_body = reindent("".join(chunks_in), "    ") + f"    return {', '.join(outputs)}\n"
    text = _hook_text(name, [ast.unparse(body[start].targets[0]), *extents], doc, hook_body)
    ndim_hook = HookSignature(name=name, pid="pid", grid_params=tuple(extents), constexprs=("NUM_XCDS",))
    try:
        static_check(text, ndim_hook)
    except RemapRejected:
        return None
    region = Edit(src.line_start(body[start].lineno), src.line_end(body[last].end_lineno),
                  "".join(chunks_out) + hook_call)
    local = {s.targets[0].id: s.value for s in body if len(_targets(s)) == 1 and isinstance(s.targets[0], ast.Name)}
    params = {a.arg: ast.Name(id=a.arg) for a in scan.kernel.args.args}
    kernel_extents = [local.get(e, params.get(e)) for e in extents]
    how = (f"2D hook: {scan.name} derives ({', '.join(outputs)}) from one program id; that derivation moved "
           f"into {name}() ({len(moved) - 1} lines), so its identity is the original order")
    return HookPlan(name=name, ndim=2, text=text, edits=[_num_xcds_edit(src, scan.kernel), region],
                    extents=kernel_extents, grid_params=extents, how=how)


# --- several axes: one 1D launch, the hook gives each axis its index -------------------------

def _by_axes(scan: Scan, name: str) -> HookPlan:
    src = scan.src
    count = max(scan.axes) + 1
    params = [f"num_pid_axis_{a}" for a in range(count)]
    indices = [f"pid_axis_{a}" for a in range(count)]
    slow_first = list(range(count - 1, -1, -1))
    lines, rest = [], "pid"
    for a in range(count - 1):  # axis 0 is the fastest, as the GPU runs a multi-axis grid
        lines.append(f"    {indices[a]} = {rest} % {params[a]}\n")
        rest = f"{rest} // {params[a]}"
    lines.append(f"    {indices[count - 1]} = {rest}\n")
    body = "".join(lines) + f"    return {', '.join(indices[a] for a in slow_first)}\n"
    doc = _HOOK_DOC.format(what=f"({', '.join(f'axis {a}' for a in slow_first)}) indices", kernel=scan.name)
    text = _hook_text(name, ["pid", *(params[a] for a in slow_first)], doc, body)
    kernel_body = [s for s in scan.kernel.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    first = kernel_body[0]
    tl = _tl(scan.program_ids[0])
    call = (f"{indent_of(src, first)}{', '.join(indices[a] for a in slow_first)} = "
            f"{name}({tl}program_id(0), {', '.join(params[a] for a in slow_first)}, NUM_XCDS)\n")
    edits = [Edit(src.line_start(first.lineno), src.line_start(first.lineno), call)]
    for node in ast.walk(scan.kernel):
        if scan.tl_call(node, "program_id"):
            edits.append(Edit(src.start(node), src.end(node), indices[axis_of(node)]))
        elif scan.tl_call(node, "num_programs") and axis_of(node) is not None and axis_of(node) < count:
            edits.append(Edit(src.start(node), src.end(node), params[axis_of(node)]))
    last = scan.kernel.args.args[-1]
    edits.append(Edit(src.end(last), src.end(last), ", " + ", ".join(params) + ", NUM_XCDS: tl.constexpr"))
    how = (f"{count}D hook: {scan.name} reads program id axes {', '.join(map(str, scan.axes))}; it is now "
           f"launched as one 1D grid and {name}() returns each axis' index, slowest first, in the GPU's order "
           f"(axis 0 fastest)")
    return HookPlan(name=name, ndim=count, text=text, edits=edits, extents=None, axis_params=params,
                    grid_params=[params[a] for a in slow_first], how=how)
