"""A kernel file that follows the contract, written from recorded launches of one kernel.

The kernel's source and everything it reads (helpers from other modules, aliases, constants) come
from the record's closure, so the file stands alone: it imports neither the user's package nor
swizzleperf, and nothing of the user's module runs when it is loaded. The remap hook is inserted
as `adopt` inserts it (its identity is the kernel's own order), and the declaration replays the
recorded launches.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from pathlib import Path

from swizzleperf.errors import CaptureError
from swizzleperf.kernel.launches.launch_record import LaunchRecord
from swizzleperf.workflows.adopt.hook import HookPlan, plan_hook
from swizzleperf.workflows.adopt.inline import inline_pid_helpers
from swizzleperf.workflows.adopt.scan import AdoptError, scan
from swizzleperf.workflows.adopt.text import Edit, Source, apply, collapse_blank_lines
from swizzleperf.workflows.launch_capture import declaration

_BASE_IMPORTS = ("import torch", "import triton", "import triton.language as tl")


@dataclass
class Written:
    path: Path
    kernel: str
    hook: str
    sizes: list[str]


def _header(records: list[LaunchRecord], command: str) -> str:
    r = records[0]
    helpers = [f"{f.name} ({_short(f.file)}:{f.line})" for f in r.closure.functions[:-1]]
    chosen = "".join(f"\n{c.by}: {c.config or c.values} ({c.how})." for c in r.chosen)
    return (f'"""{r.kernel.name} from {_short(r.kernel.file)}:{r.kernel.line}, captured by `swizzleperf capture` '
            f"from\n`{command}` ({len(records)} launch{'es' * (len(records) > 1)}, {r.device}).\n\n"
            f"The kernel's source is a copy{' with its helpers ' + ', '.join(helpers) if helpers else ''}; "
            f"swizzleperf\nrewrites only the remap hook.{chosen}\n\"\"\"\n\n")


def _short(path: str) -> str:
    p = Path(path)
    return str(p.relative_to(Path.cwd())) if p.is_absolute() and p.is_relative_to(Path.cwd()) else path


def module_text(records: list[LaunchRecord], command: str) -> str:
    """The kernel and its closure as a module: imports, constants, helpers, the kernel."""
    c = records[0].closure
    if c.problems:
        raise CaptureError(f"{records[0].kernel.name} cannot stand alone: {c.problems[0]}")
    imports = list(dict.fromkeys([*_BASE_IMPORTS, *(u.text for u in c.imports)]))
    for u in c.unresolved:
        if u.module == "__main__":
            raise CaptureError(f"{records[0].kernel.name} reads {u.name} ({u.why}) from the script it was "
                               f"defined in, which a kernel file cannot import")
        imports.append(f"{u.text}  # {u.why}: imported from the user's package")
    constants = [u.text for u in c.constants]
    functions = ["@triton.jit\n" + f.source.rstrip() + "\n" for f in c.functions]
    return (_header(records, command) + "\n".join(imports) + "\n\n" + "\n".join(constants) + "\n\n\n"
            + "\n\n".join(functions))


def _constants(records: list[LaunchRecord]) -> dict[str, int]:
    return {p.name: p.value for p in records[0].params if p.constexpr and p.kind == "int"}


def _evaluate(expr: ast.expr, values: dict[str, int]) -> int:
    """A kernel-side grid extent (`tl.cdiv(M, BLOCK_M)`) for one recorded launch."""
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return expr.value
    if isinstance(expr, ast.Name) and expr.id in values:
        return int(values[expr.id])
    if isinstance(expr, ast.BinOp):
        a, b = _evaluate(expr.left, values), _evaluate(expr.right, values)
        ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
        if type(expr.op) in ops:
            return ops[type(expr.op)]
        if isinstance(expr.op, (ast.FloorDiv, ast.Mod)) and b:
            return a // b if isinstance(expr.op, ast.FloorDiv) else a % b
    if isinstance(expr, ast.Call) and getattr(expr.func, "attr", None) == "cdiv" and len(expr.args) == 2:
        return -(-_evaluate(expr.args[0], values) // _evaluate(expr.args[1], values))
    raise CaptureError(f"cannot evaluate the grid extent {ast.unparse(expr)} from the recorded arguments")


def _grid_values(records: list[LaunchRecord], hook: HookPlan) -> list[dict[str, int]]:
    out = []
    for r in records:
        if hook.axis_params:
            values = {p: r.grid[int(p.rsplit("_", 1)[1])] for p in hook.grid_params}
        elif hook.extents is None:
            values = {hook.grid_params[0]: r.programs}
        else:
            known = {p.name: p.value for p in r.params if p.kind == "int"}
            values = {p: _evaluate(e, known) for p, e in zip(hook.grid_params, hook.extents)}
        if math.prod(values.values()) != r.programs:
            raise CaptureError(f"{r.kernel.name}: the hook's grid {values} has {math.prod(values.values())} "
                               f"programs but the launch had {r.programs} (grid {r.grid})")
        out.append(values)
    return out


def _drop_unused(text: str, names: list[str]) -> str:
    """Remove the inlined helpers nothing calls any more."""
    tree = ast.parse(text)
    loads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    src = Source(text)
    edits = [Edit(src.line_start(min([f.lineno, *(d.lineno for d in f.decorator_list)])), src.line_end(f.end_lineno), "")
             for f in tree.body if isinstance(f, ast.FunctionDef) and f.name in names and f.name not in loads]
    return apply(text, edits)


def _own_num_xcds(text: str, records: list[LaunchRecord], kernel: str) -> tuple[str, list[LaunchRecord], bool]:
    """A kernel with its own NUM_XCDS parameter keeps it as KERNEL_NUM_XCDS (the hook's NUM_XCDS is the target's)."""
    tree = ast.parse(text)
    fn = next(f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == kernel)
    if "NUM_XCDS" not in {a.arg for a in fn.args.args}:
        return text, records, False
    src = Source(text)
    edits = [Edit(src.start(n), src.start(n) + len("NUM_XCDS"), "KERNEL_NUM_XCDS") for n in ast.walk(fn)
             if (isinstance(n, ast.Name) and n.id == "NUM_XCDS") or (isinstance(n, ast.arg) and n.arg == "NUM_XCDS")]
    renamed = [r.model_copy(update={"params": [p.model_copy(update={"name": "KERNEL_NUM_XCDS"})
                                               if p.name == "NUM_XCDS" else p for p in r.params]}) for r in records]
    return apply(text, edits), renamed, True


def write_kernel_file(records: list[LaunchRecord], out: Path, command: str) -> Written:
    """Write the kernel file `out` from launches of one kernel (same name, same source)."""
    name = records[0].kernel.name
    objects = [p for r in records for p in r.params if p.kind == "object"]
    if objects:
        raise CaptureError(f"{name}'s argument {objects[0].name} is a {objects[0].type or 'Python object'} "
                           f"({str(objects[0].value)[:60]}), which a kernel file cannot rebuild")
    inlined = inline_pid_helpers(module_text(records, command), name)
    text, records, own = _own_num_xcds(_drop_unused(inlined.text, inlined.helpers), records, name)
    try:
        found = scan(out, text, kernel_name=name)
    except AdoptError as exc:
        raise CaptureError(str(exc).replace(out.name, name, 1)) from None
    constants = {k: v for k, v in _constants(records).items() if k in found.constexprs()}
    hook = plan_hook(found, constants)
    if inlined.helpers:
        hook.how += f"; the kernel's own program-id mapping ({', '.join(inlined.helpers)}) is inlined and wrapped"
    if own:
        hook.how += "; its own NUM_XCDS is KERNEL_NUM_XCDS, pinned at the launch's value"
    grid_values = _grid_values(records, hook)
    at = found.src.line_start(found.kernel.lineno - 1)  # the kernel's @triton.jit line
    marker = "# --- the remap hook (added by `swizzleperf capture`): swizzleperf rewrites only this function ---\n"
    body = apply(text, [*hook.edits, Edit(at, at, marker + hook.text + "\n\n")])
    sources = [f.source for f in records[0].closure.functions]
    result = collapse_blank_lines(body).rstrip("\n") + "\n\n\n# --- swizzleperf problem declaration (written " \
        "by `swizzleperf capture` from the recorded launches) ---" + declaration.declaration(
            records, hook, grid_values, sources)
    ast.parse(result)  # a bug here must not leave an unparseable file behind
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(result)
    return Written(path=out, kernel=name, hook=hook.how, sizes=declaration.size_names(records))
