"""The problem declaration written under the adopted kernel, and a TODO for what cannot be inferred.

Each declaration is inferred from evidence in the module (the wrapper's shape unpacking, its
launch grid, the autotune key, the module's own test); one that cannot be is left out, with a
`TODO(swizzleperf adopt)` block saying what to write and why it could not be inferred, so
`swizzleperf check` names it as missing rather than running a guess.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from swizzleperf.workflows.adopt import translate
from swizzleperf.workflows.adopt.hook import HookPlan
from swizzleperf.workflows.adopt.pin import Pin
from swizzleperf.workflows.adopt.translate import Context, Unresolved
from swizzleperf.workflows.adopt.usage import Usage
from swizzleperf.workflows.adopt.wrapper import Outputs

UNLINKED_TINY = 40  # a dimension no block size divides (rows of a softmax, one program each): 40 programs


@dataclass
class Declaration:
    """The declaration's text blocks, and what the user still has to write."""

    blocks: list[str] = field(default_factory=list)
    todos: list[tuple[str, str]] = field(default_factory=list)  # (declaration, why it was not inferred)
    notes: list[str] = field(default_factory=list)

    def todo(self, name: str, why: str, template: str) -> None:
        self.todos.append((name, why))
        body = "".join(f"# {line}\n" if line else "#\n" for line in template.splitlines())
        self.blocks.append(f"# TODO(swizzleperf adopt): {name} -- {why}. Write it, e.g.:\n{body}")


def size_keys(ctx: Context, pinned: Pin | None) -> tuple[list[str], str]:
    """Size names: the autotune key's (what the author said the kernel's speed depends on), then the rest."""
    dims = list(ctx.dims)
    key = [k for k in (pinned.key if pinned else []) if k in ctx.dims]
    rest = [d for d in dims if d not in key]
    why = "the autotune key" if key else f"the shapes {ctx.launch.wrapper.name}() unpacks"
    return key + rest, why + (f" and {', '.join(rest)} from {ctx.launch.wrapper.name}()'s shapes" if key and rest
                              else "")


def tested_values(ctx: Context, usage: Usage | None) -> dict[str, int]:
    """Each dimension as the module's own test built it (`torch.randn((384, 256))` for `M, K = a.shape`)."""
    values: dict[str, int] = {}
    for param, dims in ctx.shapes.items():
        call = usage.constructions.get(usage.tensors.get(param, ""), None) if usage else None
        shape = _shape_args(call) if call is not None else None
        for axis, dim in enumerate(dims if shape is not None and len(shape) == len(dims) else []):
            values.setdefault(dim, shape[axis])
    return values


def _shape_args(call: ast.Call) -> list[int] | None:
    args = call.args
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = args[0].elts
    try:
        return [int(ast.literal_eval(a)) for a in args]
    except (ValueError, TypeError):
        return None


def block_of(ctx: Context, dim: str, constants: dict[str, int]) -> int | None:
    """The block size a dimension is cut by (`cdiv(M, BLOCK_SIZE_M)` in the wrapper or the kernel)."""
    passed = {k: v for k, v in ctx.launch.kernel_args(ctx.scan.kernel).items() if isinstance(v, ast.Name)}
    for fn, names in ((ctx.launch.wrapper, {dim}), (ctx.scan.kernel, {k for k, v in passed.items() if v.id == dim})):
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("tl.cdiv", "triton.cdiv") \
                    and len(node.args) == 2 and isinstance(node.args[0], ast.Name) and node.args[0].id in names:
                block = node.args[1]
                key = block.slice.value if isinstance(block, ast.Subscript) and isinstance(block.slice,
                                                                                          ast.Constant) else None
                name = key if isinstance(key, str) else (block.id if isinstance(block, ast.Name) else None)
                if name in constants:
                    return constants[name]
                if isinstance(block, ast.Constant) and isinstance(block.value, int):
                    return block.value
    return None


def sizes_block(decl: Declaration, ctx: Context, pinned: Pin | None, usage: Usage | None,
                constants: dict[str, int]) -> list[str]:
    """SIZES, DEFAULT_SIZE and CHECK_SIZES; returns the size keys."""
    keys, keys_from = size_keys(ctx, pinned)
    tested = tested_values(ctx, usage)
    missing = [k for k in keys if k not in tested]
    if not keys or missing:
        why = (f"{ctx.launch.wrapper.name}() unpacks no tensor shapes (`M, K = a.shape`)" if not keys else
               f"no call of {ctx.launch.wrapper.name}() with tensors built by torch.randn/rand gives "
               f"{', '.join(missing)}")
        example = ", ".join(f'"{k}": ...' for k in keys) or '"n": ...'
        decl.todo("SIZES", why, f'SIZES = {{\n    "tiny": {{{example}}},  # cheap on the CPU interpreter\n'
                                f'    "tested": {{{example}}},  # the sizes you care about\n}}')
    else:
        tiny = {}
        for k in keys:
            block = block_of(ctx, k, constants)
            tiny[k] = min(tested[k], 2 * block + block // 2 if block else UNLINKED_TINY)
        row = lambda vals: ", ".join(f'"{k}": {vals[k]}' for k in keys)  # noqa: E731
        decl.blocks.append(f"SIZES = {{\n    \"tiny\": {{{row(tiny)}}},  # cheap on the CPU interpreter (a few "
                           f"blocks per dimension)\n    \"tested\": {{{row(tested)}}},  # the shapes the module's "
                           f"own test uses\n}}  # names: {keys_from}\n")
    decl.blocks.append('DEFAULT_SIZE = "tested"\nCHECK_SIZES = ["tiny"]\n')
    return keys


def grid_block(decl: Declaration, ctx: Context, hook: HookPlan) -> None:
    """grid(size): the hook's extents (2D), the axes' extents slowest first, or the launch's program count."""
    try:
        if hook.extents is not None:
            parts = [ctx.kernel(e) for e in hook.extents]
        else:
            axes = [ctx.host(e) for e in translate.launch_grid(ctx)]
            if hook.axis_params:
                axes += ["1"] * (len(hook.axis_params) - len(axes))
                parts = list(reversed(axes))
            else:
                parts = [" * ".join(f"({a})" if " " in a else a for a in axes)]
    except Unresolved as exc:
        params = ", ".join(f"<{p}>" for p in hook.grid_params) or "<programs>"
        decl.todo("grid", f"its extents depend on `{exc}`, which is not a size, a pinned config value or a "
                          f"module constant", f"def grid(size):  # one extent per hook grid parameter\n"
                                              f"    return ({params},)")
        return
    body = ", ".join(parts) + ("," if len(parts) == 1 else "")
    decl.blocks.append(f"def grid(size):  # {hook.ndim} extent(s): the hook's grid parameters\n"
                       f"    return ({body})\n")


def inputs_block(decl: Declaration, ctx: Context, usage: Usage | None) -> list[str]:
    """make_inputs: the module's own torch.randn/rand calls over the sizes, seeded; returns the input names."""
    params = [a.arg for a in ctx.launch.wrapper.args.args]
    tensors = [p for p in params if (usage and p in usage.tensors) or p in ctx.shapes]
    if not tensors:
        decl.todo("make_inputs", f"{ctx.launch.wrapper.name}() takes no tensor this can recognise (no shape "
                                 f"unpacking, no torch.randn argument in a call)",
                  'def make_inputs(size, seed, device):\n    gen = torch.Generator().manual_seed(seed)\n'
                  '    return {"x": torch.randn(size["n"], generator=gen).to(device)}')
        return []
    lines = ["def make_inputs(size, seed, device):", '    gen = torch.Generator(device="cpu").manual_seed(seed)']
    for p in tensors:
        dims = ctx.shapes.get(p, [])
        if not dims:
            decl.todo("make_inputs", f"{ctx.launch.wrapper.name}() never unpacks {p}.shape, so its shape in terms "
                                     f"of the sizes is unknown",
                      f'{p} = torch.randn((size["..."], ...), generator=gen)')
            return []
        shape = "(" + ", ".join(ctx.size_of(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"
        call = usage.constructions.get(usage.tensors.get(p, "")) if usage else None
        if call is None:
            decl.notes.append(f"make_inputs: {p} is float32 torch.randn (no construction of it was seen)")
            lines.append(f"    {p} = torch.randn({shape}, generator=gen)")
            continue
        kept = [f"{k.arg}={ast.unparse(k.value)}" for k in call.keywords if k.arg not in ("device", "generator")]
        lines.append(f"    {p} = {ast.unparse(call.func)}({', '.join([shape, 'generator=gen', *kept])})")
    lines.append("    return {" + ", ".join(f'"{p}": {p}.to(device)' for p in tensors) + "}")
    decl.blocks.append("\n".join(lines) + "\n")
    return tensors


def outputs_block(decl: Declaration, ctx: Context, outputs: Outputs, usage: Usage | None) -> None:
    """make_outputs: the wrapper's own allocation with sizes for shapes and the caller's device."""
    if not outputs.allocations:
        decl.todo("make_outputs", f"{ctx.launch.wrapper.name}() returns no tensor it allocates with torch.empty/"
                                  f"zeros/empty_like", 'def make_outputs(size, device):\n'
                                                       '    return {"y": torch.empty(size["n"], device=device)}')
        return
    try:
        made = {name: _allocation(ctx, stmt.value, usage) for name, stmt in outputs.allocations.items()}
    except Unresolved as exc:
        decl.todo("make_outputs", f"the output's shape depends on `{exc}`, which is not a size",
                  'def make_outputs(size, device):\n    return {"y": torch.empty(size["n"], device=device)}')
        return
    body = ", ".join(f'"{n}": {v}' for n, v in made.items())
    decl.blocks.append(f"def make_outputs(size, device):\n    return {{{body}}}\n")


def _allocation(ctx: Context, call: ast.Call, usage: Usage | None) -> str:
    func = ast.unparse(call.func)
    if func.endswith("_like") and call.args and isinstance(call.args[0], ast.Name):
        like = call.args[0].id
        dims = ctx.shapes.get(like, [])
        if not dims:
            raise Unresolved(f"{like}.shape")
        made = usage.constructions.get(usage.tensors.get(like, "")) if usage else None
        dtype = [f"dtype={ast.unparse(k.value)}" for k in (made.keywords if made else []) if k.arg == "dtype"]
        dtype += [f"{k.arg}={ctx.host(k.value)}" for k in call.keywords if k.arg not in ("device",)]
        shape = "(" + ", ".join(ctx.size_of(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"
        return f"{func[:-len('_like')]}({', '.join([shape, *dtype[:1], *dtype[1:], 'device=device'])})"
    args = [ctx.host(a) for a in call.args]
    kwargs = [f"{k.arg}={ctx.host(k.value)}" for k in call.keywords if k.arg != "device"]
    return f"{func}({', '.join([*args, *kwargs, 'device=device'])})"


def launch_block(decl: Declaration, ctx: Context, outputs: Outputs, tensors: list[str],
                 usage: Usage | None) -> None:
    """launch: the wrapper itself, into the outputs, with the die count."""
    if not tensors or not outputs.allocations:
        decl.todo("launch", "make_inputs or make_outputs could not be written, so neither can the call",
                  f'def launch(inputs, outputs, size, num_xcds):\n    {ctx.launch.wrapper.name}(inputs["x"], '
                  f'out=outputs["y"], num_xcds=num_xcds)')
        return
    args = []
    for a in ctx.launch.wrapper.args.args:
        if a.arg in tensors:
            args.append(f'inputs["{a.arg}"]')
        elif usage and a.arg in usage.literals:
            args.append(f"{a.arg}={ast.unparse(usage.literals[a.arg])}")
    args += [f'{outputs.param(n)}=outputs["{n}"]' for n in outputs.allocations] + ["num_xcds=num_xcds"]
    decl.blocks.append(f"def launch(inputs, outputs, size, num_xcds):  # one 1D launch of prod(grid(size)) "
                       f"programs\n    {ctx.launch.wrapper.name}({', '.join(args)})\n")


def reference_block(decl: Declaration, outputs: Outputs, usage: Usage | None) -> None:
    """reference: the torch expression the module's own test compares the wrapper with."""
    if usage is None or usage.reference is None or len(outputs.allocations) != 1:
        decl.notes.append("reference: left out (the module compares its result with no torch expression of its "
                          "inputs); correctness then compares with the kernel run with its own hook")
        return
    binds = "".join(f'    {var} = inputs["{param}"]\n' for param, var in usage.tensors.items())
    name = next(iter(outputs.allocations))
    decl.blocks.append(f"def reference(inputs, size):  # the module's own test compares with this\n{binds}"
                       f'    return {{"{name}": {ast.unparse(usage.reference)}}}\n')
