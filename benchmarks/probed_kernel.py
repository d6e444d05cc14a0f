"""The module probe_serial.py launches: a kernel file's own body, under the wrapper that records each program's SM
and the time its loads go out, and can make every program wait for one launched earlier.

The body is taken from the kernel file as written (ast finds the kernel: the first @triton.jit function other than
the remap hook), so the loads measured are the suite's. Only its one-line load statements may be reordered, whole.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STENCIL2D = ROOT / "kernels" / "stencil2d.py"

MODULE = '''
import triton
import triton.language as tl


{remap}


@triton.jit
def _smid(x):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _now(x):
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [x], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def probed_kernel({params}, done_ptr, smid_ptr, times_ptr, lag, START: tl.constexpr, END: tl.constexpr):
    slot = tl.program_id(0)
    if START:  # wait for the flag of the program launched `lag` earlier; lag 0: one look at this program's own
        # flag, which nobody has set: no wait, one atomic round trip. Relaxed: an acquire would invalidate the
        # SM's L1, which the kernel reuses. A max, not an add of 0, which the compiler turns into a plain load.
        if slot >= lag:
            while tl.atomic_max(done_ptr + slot - lag, 0, sem="relaxed") < (lag > 0):
                pass
    tl.store(times_ptr + 2 * slot, _now(slot))  # its loads go out now
{body}
    tl.store(times_ptr + 2 * slot + 1, _now(slot))  # they are back (the stores used them)
    tl.store(smid_ptr + slot, _smid(slot))
    if END:
        tl.debug_barrier()  # every warp has stored, so every load it issued has returned
        tl.atomic_xchg(done_ptr + slot, 1, sem="relaxed")
'''


def _kernel_function(tree: ast.Module) -> ast.FunctionDef:
    """The file's kernel: its first @triton.jit function other than the remap hook."""
    hook = next(node.value.value for node in tree.body if isinstance(node, ast.Assign)
                and any(getattr(t, "id", None) == "REMAP_HOOK" for t in node.targets))
    return next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name != hook
                and any("jit" in ast.unparse(d) for d in node.decorator_list))


def kernel_source(kernel_path: Path) -> tuple[str, str]:
    """(parameters, body) of the kernel in `kernel_path`, as written there (without a docstring)."""
    text = kernel_path.read_text()
    fn = _kernel_function(ast.parse(text))
    lines = text.splitlines()
    first = 1 if isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else 0
    return (", ".join(ast.get_source_segment(text, arg) for arg in fn.args.args),
            "\n".join(lines[fn.body[first].lineno - 1:fn.end_lineno]))


def probed_module(remap: str, kernel_path: Path = STENCIL2D, record_sm: bool = True, times: bool = True,
                  load_order: tuple[str, ...] = ()) -> str:
    """The source of a module holding `remap` and the kernel's body under a wrapper that records each program's SM
    and the time its loads go out and are back (-1 and 0 without `record_sm`) and, with START and END, makes every
    program wait for the one launched `lag` before it. `load_order`: the body's load statements (by the name each
    assigns) in this order instead of the file's."""
    params, body = kernel_source(kernel_path)
    module = MODULE.format(remap=remap, params=params, body=reordered_loads(body, load_order) if load_order else body)
    if not times:  # the timer reads are inline assembly around the loads, which may change their schedule
        module = "\n".join(line for line in module.splitlines() if "_now(slot)" not in line)
    return module if record_sm else module.replace("_smid(slot)", "-1").replace("_now(slot)", "0")


def load_statements(body: str) -> dict[str, int]:
    """The line of each one-line `NAME = tl.load(...)` statement of `body`, by NAME, in order."""
    return {m.group(1): i for i, line in enumerate(body.splitlines())
            if (m := re.match(r"\s*(\w+) = tl\.load\(.*\)$", line))}


def reordered_loads(body: str, order: tuple[str, ...]) -> str:
    """`body` with its one-line `NAME = tl.load(...)` statements, which must stand together, in `order` (every
    one of them named once). They are independent, so only when each goes out changes."""
    lines = body.splitlines()
    at = load_statements(body)
    if sorted(at) != sorted(order):
        raise ValueError(f"load order {','.join(order)}: the kernel's loads are {','.join(at)}")
    first, last = min(at.values()), max(at.values())
    if last - first + 1 != len(at):
        raise ValueError("the kernel's load statements do not stand together: they cannot be reordered")
    return "\n".join(lines[:first] + [lines[at[name]] for name in order] + lines[last + 1:])


def load_module(source: str, workdir: Path, index: int):
    """`source` written to `workdir` and imported (Triton compiles only functions defined in files)."""
    path = workdir / f"probed_{index}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def family_remap(label: str, kernel) -> str:
    """The source of a family instance named as the search labels it: `grouped(group_m=8)`, `col_major`."""
    from swizzleperf.remaps.families import FAMILIES

    match = re.fullmatch(r"(\w+)(?:\((.*)\))?", label.strip())
    if not match or match.group(1) not in FAMILIES:
        raise ValueError(f"{label!r}: not a family instance (families: {', '.join(FAMILIES)})")
    params = {k.strip(): int(v) for k, _, v in (p.partition("=") for p in (match.group(2) or "").split(",") if p)}
    return FAMILIES[match.group(1)](kernel.hook, **params)
