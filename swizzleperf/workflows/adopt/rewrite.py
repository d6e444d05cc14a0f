"""`swizzleperf adopt`: a stock Triton module rewritten as a kernel file that follows the contract.

The original is only read; a new file gets the remap hook, NUM_XCDS, a pinned autotune config,
import-time driver and test code under `__main__`, and the declaration. What could not be
inferred is a TODO in the file and a line of the result, never a silent guess.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from swizzleperf.kernel.contract import _is_triton_jit
from swizzleperf.untrusted import source_text
from swizzleperf.workflows.adopt import declare, mainguard, pin, translate, usage, wrapper
from swizzleperf.workflows.adopt.hook import HookPlan, plan_hook
from swizzleperf.workflows.adopt.scan import AdoptError, Scan, scan
from swizzleperf.workflows.adopt.text import Edit, apply, collapse_blank_lines

__all__ = ["AdoptError", "Adopted", "adopt"]


@dataclass
class Adopted:
    """What was written and what the user still has to do."""

    path: Path
    kernel: str
    hook: str  # how the hook was inserted
    pinned: str | None  # which config, and why
    moved: list[str]  # what moved under __main__
    todos: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    evidence: dict[str, str] = field(default_factory=dict)  # declaration written -> where it came from ("" guessed)


def _constants(found: Scan, pinned: pin.Pin | None) -> dict[str, int]:
    """Constexpr values the hook and SIZES may use: the pinned config's, and int literals the launch passes."""
    values = {k: v for k, v in ((pinned.values or {}) if pinned else {}).items() if type(v) is int}
    if found.launch is not None:
        for k in found.launch.call.keywords:
            if k.arg and isinstance(k.value, ast.Constant) and type(k.value.value) is int:
                values.setdefault(k.arg, k.value.value)
    return {k: v for k, v in values.items() if k in found.constexprs()}


def _tolerance(decl: declare.Declaration, use: usage.Usage | None) -> None:
    if use is not None and use.tolerance is not None:
        tol = ", ".join(f'"{k}": {v!r}' for k, v in sorted(use.tolerance.items()))
        decl.blocks.append(f"TOLERANCE = {{{tol}}}  # from {use.tolerance_from}\n")
        return
    decl.notes.append("TOLERANCE: the module compares with nothing, so torch.testing's float32 defaults were written")
    decl.blocks.append('TOLERANCE = {"atol": 1e-5, "rtol": 1.3e-6}  # torch.testing\'s float32 defaults: '
                       'loosen for half precision\n')


def _declaration(found: Scan, hook: HookPlan, pinned, moves, outputs, constants) -> declare.Declaration:
    decl = declare.Declaration(blocks=[f'REMAP_HOOK = "{hook.name}"\n'])
    if found.launch is None:
        decl.todo("SIZES, grid, make_inputs, make_outputs, launch", f"no host function launches "
                  f"{found.name}[grid](...)", "def launch(inputs, outputs, size, num_xcds): ...")
        return decl
    ctx = translate.Context(scan=found, launch=found.launch, dims=translate.shape_dims(found.launch.wrapper),
                            config_name=pinned.config_name if pinned else None,
                            shapes=translate.tensor_shapes(found.launch.wrapper),
                            config_keys=set((pinned.values or {}) if pinned else ()),
                            module_constants=translate.module_constants(found.tree, moves.moved_names()))
    use = usage.find_usage(found.tree, found.launch.wrapper)
    declare.sizes_block(decl, ctx, pinned, use, constants)
    _tolerance(decl, use)
    declare.grid_block(decl, ctx, hook)
    tensors = declare.inputs_block(decl, ctx, use)
    declare.outputs_block(decl, ctx, outputs, use)
    declare.launch_block(decl, ctx, outputs, tensors, use)
    declare.reference_block(decl, outputs, use)
    broken = moves.broken_functions.get(found.launch.wrapper.name)
    if broken:
        decl.todo("launch", f"{found.launch.wrapper.name}() reads {', '.join(broken)}, set at import from the "
                  f"active driver or the test (now under __main__)", "give it a value that works without a GPU")
    return decl


def _edits(found: Scan, hook: HookPlan, pinned, moves, outputs) -> list[Edit]:
    src = found.src
    edits = list(hook.edits)
    first = min([found.kernel.lineno, *(d.lineno for d in found.kernel.decorator_list)])
    at = src.line_start(src.comments_above(first))
    header = "# --- the remap hook (added by `swizzleperf adopt`): swizzleperf rewrites only this function ---\n"
    config = pin.config_text(pinned) + "\n\n" if pinned is not None and pinned.values is not None else ""
    edits.append(Edit(at, at, config + header + hook.text + "\n\n"))
    if pinned is not None:
        d = pinned.decorator
        edits.append(Edit(src.line_start(d.lineno), src.line_end(d.end_lineno), ""))
    for stmt in moves.statements:
        first_line, last_line = mainguard.removed_lines(src, stmt)
        edits.append(Edit(src.line_start(first_line), src.line_end(last_line), ""))
    for block in moves.main_blocks:
        edits.append(Edit(src.line_start(block.lineno), src.line_end(block.end_lineno), ""))
    if found.launch is not None:
        edits += wrapper.wrapper_edits(found, found.launch, outputs, hook, pinned)
    return edits


DECLARATIONS = ("SIZES", "DEFAULT_SIZE", "CHECK_SIZES", "TOLERANCE", "grid", "make_inputs", "make_outputs",
                "launch", "reference")


def _evidence(found: Scan, written: str) -> dict[str, str]:
    """For each declaration the written file holds: the module's line it was read from, or "" (a guess)."""
    names = {t.id for n in ast.parse(written).body for t in (n.targets if isinstance(n, ast.Assign) else [])
             if isinstance(t, ast.Name)} | {n.name for n in ast.parse(written).body if isinstance(n, ast.FunctionDef)}
    where: dict[str, str] = {}
    if found.launch is not None:
        wrapper, name = found.launch.wrapper, found.path.name
        launch = f"{wrapper.name}()'s launch at {name}:{found.launch.call.lineno}"
        where.update(grid=launch, launch=launch, make_outputs=f"{wrapper.name}() at {name}:{wrapper.lineno}")
        use = usage.find_usage(found.tree, wrapper)
        if use is not None:
            test = f"the module's call of {wrapper.name}() at {name}:{use.call.lineno}"
            where.update(SIZES=test, DEFAULT_SIZE=test, make_inputs=test)
            if use.tolerance is not None:
                where["TOLERANCE"] = use.tolerance_from
            if use.reference is not None:
                where["reference"] = f"the module's comparison at {name}:{use.reference.lineno}"
    return {d: where.get(d, "") for d in DECLARATIONS if d in names}


def adopt(path: Path, out: Path, kernel: str | None = None) -> Adopted:
    """Write the adopted kernel file `out` from the stock module `path` (which is never written); `kernel`
    picks one of several kernels."""
    if out.resolve() == path.resolve():
        raise AdoptError(f"-o {out} is the stock module itself; adopt never edits the original: pick another path")
    try:
        text = source_text.decode(path.read_bytes())
    except OSError as exc:
        raise AdoptError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise AdoptError(f"{path.name} is not UTF-8 text (byte offset {exc.start})") from None
    found = scan(path, text, kernel)
    pinned = pin.pin(found)
    jitted = {n for n, f in found.functions.items() if any(_is_triton_jit(d) for d in f.decorator_list)}
    moves = mainguard.plan(found.tree, jitted)
    constants = _constants(found, pinned)
    hook = plan_hook(found, constants)
    outputs = wrapper.find_outputs(found.launch.wrapper) if found.launch else wrapper.Outputs({})
    decl = _declaration(found, hook, pinned, moves, outputs, constants)
    if pinned is not None and pinned.values is None:
        decl.todo(pinned.config_name, pinned.why, f"{pinned.config_name} = {{...}}  # one config: constexprs, "
                  f"num_warps, num_stages; and pass **{pinned.config_name} in the launch")
    body = collapse_blank_lines(apply(text, _edits(found, hook, pinned, moves, outputs))).rstrip("\n") + "\n"
    header = ("\n\n# --- swizzleperf problem declaration (written by `swizzleperf adopt` from "
              f"{path.name}) ---\n")
    blocks = "".join(("\n\n" if i and (b.startswith(("def ", "# TODO")) or decl.blocks[i - 1].startswith(
        ("def ", "# TODO"))) else "") + b for i, b in enumerate(decl.blocks))
    result = body + header + blocks + "\n\n" + mainguard.main_block_text(found.src, moves)
    ast.parse(result)  # a bug here must not leave an unparseable file behind
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(result)
    moved = [ast.unparse(s).splitlines()[0] for s in moves.statements]
    notes = decl.notes + [f"{found.name} adopted; also @triton.jit kernels reading program ids: "
                          f"{', '.join(found.other_kernels)} (left as they are)"] * bool(found.other_kernels)
    if pinned is not None and pinned.dropped:
        notes.append(f"dropped with @triton.autotune: {', '.join(pinned.dropped)}")
    config = pin.config_text(pinned).splitlines()[-1] if pinned is not None and pinned.values is not None else ""
    return Adopted(path=out, kernel=found.name, hook=hook.how,
                   pinned=f"{config}: {pinned.why}" if config else None,
                   moved=moved, todos=decl.todos, notes=notes, evidence=_evidence(found, result))
