"""The kernel contract: what a kernel file must declare, and the loader that checks it.

A kernel file is a plain Triton module (it never imports swizzleperf). It defines one
`@triton.jit` remap hook, called at the top of the kernel, and a problem declaration in
module-level names. `CONTRACT` below is the shape the loader expects; it is printed in
every contract error and shown in the README.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from swizzleperf.errors import ContractError
from swizzleperf.kernel import candidate, user_errors
from swizzleperf.untrusted import source_text

CONTRACT = '''\
@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):     # the remap hook
    return pid                                          # launch id -> logical id

@triton.jit
def my_kernel(..., NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    ...

REMAP_HOOK = "swizzle"                       # name of the hook above
SIZES = {"small": {...}, "medium": {...}}    # named problem sizes (dicts of ints)
DEFAULT_SIZE = "medium"
CHECK_SIZES = ["small"]                      # sizes cheap enough for the CPU interpreter
TOLERANCE = {"atol": 1e-6, "rtol": 1e-5}     # needed with a reference(); without one: exact by default
PROGRAMS_PER_CU = 1                          # optional: resident programs per CU/SM that the kernel's
                                             # registers and shared memory allow (the simulator's occupancy)
PERSISTENT = False                           # optional: True when launch() starts a fixed number of programs
                                             # that loop over the hook's grid, calling the hook per tile
LOOP_ORDER_HOOK = "kv_order"                 # optional: a second hook, (step, n_steps, local_tile, NUM_XCDS)
                                             # -> block, a permutation of [0, n_steps) (persistent kernels)
CPU_CHECK_FLOAT32 = True                     # optional: the CPU check runs every float tensor as float32 (a
                                             # dtype-generic kernel whose half-precision tl.dot the interpreter
                                             # gets wrong)

def grid(size) -> tuple[int, ...]:           # values of the hook's grid parameters
def make_inputs(size, seed, device) -> dict[str, Tensor]
def make_outputs(size, device) -> dict[str, Tensor]
def launch(inputs, outputs, size, num_xcds) -> None   # one 1D launch of prod(grid(size)) programs
def reference(inputs, size) -> dict[str, Tensor]       # optional, same keys as make_outputs; without it a
                                                       # remap must reproduce the kernel run with its own hook

2D tile grids: def swizzle(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr) -> (pid_m, pid_n)
3D (attention): def swizzle(pid, num_q_blocks, batch_size, num_heads, NUM_XCDS: tl.constexpr)
                -> (q_block, batch_index, head)   (extents from the slowest to the fastest axis)
Outputs are floating point (they are prefilled with NaN to catch programs that never ran), and
the file is self-contained (it is loaded from a copy in a temporary directory).'''

_REQUIRED_FUNCTIONS = ("grid", "make_inputs", "make_outputs", "launch")
_REQUIRED_VALUES = ("REMAP_HOOK", "SIZES", "DEFAULT_SIZE", "CHECK_SIZES")
EXACT = {"atol": 0.0, "rtol": 0.0}  # the tolerance without a reference(): a bijective remap reproduces the kernel


@dataclass(frozen=True)
class HookSignature:
    """The remap hook's parameters: `pid`, then one grid extent per logical axis, then constexprs.

    The hook returns one logical index per grid parameter, so a 1D hook maps an id to an id and
    a 2D hook maps an id to `(pid_m, pid_n)`.
    """

    name: str
    pid: str
    grid_params: tuple[str, ...]
    constexprs: tuple[str, ...]

    @property
    def params(self) -> tuple[str, ...]:
        return (self.pid, *self.grid_params, *self.constexprs)

    @property
    def ndim(self) -> int:
        return len(self.grid_params)

    def render(self) -> str:
        consts = [f"{c}: tl.constexpr" for c in self.constexprs]
        return f"def {self.name}({', '.join([self.pid, *self.grid_params, *consts])})"


@dataclass(frozen=True)
class LoopOrderSignature:
    """`name(step, n_steps, local_tile, CONSTEXPRS...)`, with the kernel's own parameter names."""

    name: str
    step: str
    n_steps: str
    local_tile: str
    constexprs: tuple[str, ...]

    def as_hook(self) -> HookSignature:
        """The signature as written, for the signature check (its 'grid' is the two loop values)."""
        return HookSignature(self.name, self.step, (self.n_steps, self.local_tile), self.constexprs)

    def over_steps(self) -> HookSignature:
        """The hook with local_tile bound: a 1D remap of the steps on the grid (n_steps,)."""
        return HookSignature(self.name, self.step, (self.n_steps,), self.constexprs)

    def render(self) -> str:
        return self.as_hook().render()


def source_sha256(source: str) -> str:
    """A kernel file's identity in run records: the sha256 of its decoded text."""
    return hashlib.sha256(source.encode()).hexdigest()


@dataclass(frozen=True)
class KernelFile:
    """A loaded kernel file that satisfies the contract."""

    path: Path
    source: str
    module: ModuleType = field(repr=False)
    hook: HookSignature
    hook_lines: tuple[int, int]  # 1-based, inclusive, decorators included
    sizes: dict[str, dict[str, int]]
    default_size: str
    check_sizes: tuple[str, ...]
    tolerance: dict[str, float]
    programs_per_cu: int | None = None  # PROGRAMS_PER_CU: an occupancy limit the kernel declares
    has_reference: bool = True  # False: correctness compares with the kernel run with its own hook
    persistent: bool = False  # PERSISTENT: resident programs loop over the tiles; the remap changes each one's work
    loop_order: LoopOrderSignature | None = None  # LOOP_ORDER_HOOK's signature, when the kernel declares one
    loop_order_lines: tuple[int, int] | None = None
    cpu_float32: bool = False  # CPU_CHECK_FLOAT32: the CPU check runs every float tensor as float32

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def sha256(self) -> str:
        return source_sha256(self.source)

    @property
    def loop_order_source(self) -> str | None:
        """The loop-order hook's lines (None without LOOP_ORDER_HOOK)."""
        if self.loop_order_lines is None:
            return None
        start, end = self.loop_order_lines
        return "".join(source_text.lines(self.source)[start - 1:end])

    @property
    def hook_source(self) -> str:
        """The hook's lines, cut where the parser that numbered them splits lines (not splitlines())."""
        start, end = self.hook_lines
        return "".join(source_text.lines(self.source)[start - 1:end])

    def fn(self, name: str) -> Callable[..., Any]:
        return getattr(self.module, name)

    def size(self, name: str | None = None) -> dict[str, int]:
        name = name or self.default_size
        if name not in self.sizes:
            raise ContractError(f"{self.path.name} has no size '{name}'; declared: {', '.join(self.sizes)}")
        return self.sizes[name]

    def grid(self, size_name: str | None = None) -> tuple[int, ...]:
        """The hook's grid extents at a size, checked against the hook's arity."""
        name = size_name or self.default_size
        size = self.size(name)
        returned = user_errors.call(f"grid(SIZES[{name!r}])", self.fn("grid"), size, path=self.path, size_name=name,
                                    size=size, reproduce=user_errors.check_command(self.path, name))
        try:
            extents = tuple(int(v) for v in returned)
        except (TypeError, ValueError):
            extents = None
        if extents is None or len(extents) != self.hook.ndim or min(extents, default=0) < 1:
            raise ContractError(
                f"{self.path.name}: grid({name}) returned {returned if extents is None else extents!r}, but the hook "
                f"{self.hook.render()} needs {self.hook.ndim} positive extent(s) ({', '.join(self.hook.grid_params)})")
        return extents

    def with_hook(self, hook_source: str) -> str:
        """The kernel file's text with the candidate in place: its remap for the remap hook and, where it
        has one (`kernel.candidate`), its loop order for the loop-order hook."""
        parts = self.parts(hook_source)
        spans = [(self.hook_lines, parts.remap)]
        if parts.loop_order is not None:
            spans.append((self.loop_order_lines, parts.loop_order))
        text = self.source
        for span, replacement in sorted(spans, key=lambda s: s[0], reverse=True):  # the later first: lines stay put
            text = source_text.replace_lines(text, span, replacement)
        return text

    def parts(self, hook_source: str) -> candidate.Schedule:
        """A candidate taken apart: its remap, and its loop order where it rewrites this kernel's."""
        return candidate.split(hook_source, self.loop_order.name if self.loop_order else None)

    def remap_of(self, hook_source: str) -> str:
        """The remap hook's part of a candidate (the whole of it for a kernel without a loop-order hook)."""
        return self.parts(hook_source).remap


def _contract_error(path: Path, problem: str) -> ContractError:
    return ContractError(f"{path.name} breaks the kernel contract: {problem}\n\nExpected shape:\n{CONTRACT}")


def _is_triton_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target) in ("triton.jit", "jit")


def _is_constexpr(arg: ast.arg) -> bool:
    return arg.annotation is not None and ast.unparse(arg.annotation).endswith("constexpr")


def _declared_function(path: Path, tree: ast.Module, setting: str, name: str) -> ast.FunctionDef:
    """The last top-level function `name` that the contract value `setting` names."""
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if not defs:
        raise _contract_error(path, f"{setting} = {name!r} but no top-level function {name}() is defined")
    return defs[-1]


def _is_called(tree: ast.Module, name: str) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name for n in ast.walk(tree))


def parse_hook(path: Path, tree: ast.Module, hook_name: str) -> tuple[HookSignature, tuple[int, int]]:
    """Find the hook in the file's syntax tree and read its signature."""
    node = _declared_function(path, tree, "REMAP_HOOK", hook_name)
    if not any(_is_triton_jit(d) for d in node.decorator_list):
        raise _contract_error(path, f"the remap hook {hook_name}() must be decorated with @triton.jit")
    args = node.args.args
    if node.args.vararg or node.args.kwarg or node.args.kwonlyargs or node.args.posonlyargs:
        raise _contract_error(path, f"the remap hook {hook_name}() must take plain positional parameters")
    constexprs = tuple(a.arg for a in args if _is_constexpr(a))
    plain = [a.arg for a in args if not _is_constexpr(a)]
    if len(plain) < 2 or [a.arg for a in args[:len(plain)]] != plain:
        raise _contract_error(path, f"the remap hook must take (pid, grid extents..., CONSTEXPRS...); "
                                    f"got {hook_name}({', '.join(a.arg for a in args)})")
    if len(constexprs) != 1:
        raise _contract_error(path, f"the remap hook must end with exactly one constexpr, the die count "
                                    f"(e.g. NUM_XCDS: tl.constexpr); got {len(constexprs)}")
    if not _is_called(tree, hook_name):
        raise _contract_error(path, f"the remap hook {hook_name}() is never called; call it at the top of the kernel")
    signature = HookSignature(name=hook_name, pid=plain[0], grid_params=tuple(plain[1:]), constexprs=constexprs)
    return signature, source_text.function_span(node)


def parse_loop_order_hook(path: Path, tree: ast.Module, name: str) -> tuple[LoopOrderSignature, tuple[int, int]]:
    """The LOOP_ORDER_HOOK function: @triton.jit, (step, n_steps, local_tile, one constexpr), called."""
    node = _declared_function(path, tree, "LOOP_ORDER_HOOK", name)
    args = node.args.args
    shape_ok = (len(args) == 4 and not any(map(_is_constexpr, args[:3])) and _is_constexpr(args[3])
                and not (node.args.vararg or node.args.kwarg or node.args.kwonlyargs or node.args.posonlyargs))
    if not any(_is_triton_jit(d) for d in node.decorator_list) or not shape_ok:
        raise _contract_error(path, f"the loop-order hook must be `@triton.jit def {name}(step, n_steps, local_tile, "
                                    f"NUM_XCDS: tl.constexpr)` (names your own); got {name}("
                                    f"{', '.join(a.arg for a in args)})")
    if not _is_called(tree, name):
        raise _contract_error(path, f"the loop-order hook {name}() is never called; call it where the loop picks its "
                                    f"next block")
    signature = LoopOrderSignature(name, args[0].arg, args[1].arg, args[2].arg, (args[3].arg,))
    return signature, source_text.function_span(node)


def import_module_from(path: Path, module_name: str | None = None) -> ModuleType:
    """Import a Python file by path under a private module name."""
    module_name = module_name or f"swizzleperf_kernel_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ContractError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # triton.jit looks functions up through their module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise user_errors.import_error(path, exc) from exc
    return module


KERNELS_DIR = Path("kernels")


def find_kernel(name: str | Path, kernels_dir: Path = KERNELS_DIR) -> Path:
    """A kernel file by path, or by bare name from `kernels_dir` (softmax -> kernels/softmax.py)."""
    path = Path(name)
    if path.is_file():
        return path
    if path.suffix == ".py" or len(path.parts) > 1:
        raise ContractError(f"kernel file {path.resolve()} does not exist")
    named = kernels_dir / f"{name}.py"
    if named.is_file():
        return named
    available = sorted(p.stem for p in kernels_dir.glob("*.py") if not p.name.startswith("_"))
    raise ContractError(f"no kernel '{name}': not a file and not {named} "
                        f"({kernels_dir}/ has {', '.join(available) or 'no kernel files'})")


def _checked_declarations(path: Path, module, has_reference: bool) -> tuple[dict, dict, int | None, bool]:
    """The contract's values, each checked: SIZES, TOLERANCE, PROGRAMS_PER_CU and PERSISTENT; the required
    names and functions are present and callable."""
    required = (*_REQUIRED_VALUES, *(("TOLERANCE",) if has_reference else ()), *_REQUIRED_FUNCTIONS)
    missing = [n for n in required if not hasattr(module, n)]
    if missing:
        raise _contract_error(path, f"missing {', '.join(missing)}" + (
            " (TOLERANCE says how far reference() may differ)" if missing == ["TOLERANCE"] else ""))
    not_callable = [n for n in (*_REQUIRED_FUNCTIONS, *(("reference",) if has_reference else ()))
                    if not callable(getattr(module, n))]
    if not_callable:
        raise _contract_error(path, f"{', '.join(not_callable)} must be "
                                    f"{'a function' if len(not_callable) == 1 else 'functions'}")

    sizes = module.SIZES
    if not isinstance(sizes, dict) or not sizes or not all(
            isinstance(v, dict) and all(isinstance(x, int) for x in v.values()) for v in sizes.values()):
        raise _contract_error(path, "SIZES must be a non-empty dict of name -> dict of integer parameters")
    unknown = [s for s in [module.DEFAULT_SIZE, *module.CHECK_SIZES] if s not in sizes]
    if unknown:
        raise _contract_error(path, f"DEFAULT_SIZE/CHECK_SIZES name undeclared sizes: {', '.join(map(str, unknown))}")
    tol = getattr(module, "TOLERANCE", EXACT)
    if not isinstance(tol, dict) or set(tol) - {"atol", "rtol"}:
        raise _contract_error(path, "TOLERANCE must be a dict with keys atol and rtol")

    occupancy = getattr(module, "PROGRAMS_PER_CU", None)
    if occupancy is not None and (type(occupancy) is not int or occupancy < 1):
        raise _contract_error(path, f"PROGRAMS_PER_CU must be a positive integer, got {occupancy!r}")

    for flag in ("PERSISTENT", "CPU_CHECK_FLOAT32"):
        if type(getattr(module, flag, False)) is not bool:
            raise _contract_error(path, f"{flag} must be True or False, got {getattr(module, flag)!r}")
    return sizes, tol, occupancy, getattr(module, "PERSISTENT", False)


def load_kernel(path: str | Path) -> KernelFile:
    """Import a kernel file and check it against the contract, naming whatever is missing."""
    path = Path(path).resolve()
    if not path.is_file():
        raise ContractError(f"kernel file {path} does not exist")
    try:
        source = source_text.decode(path.read_bytes())
        tree = ast.parse(source, filename=str(path))
    except UnicodeDecodeError as exc:
        raise ContractError(f"{path.name} is not UTF-8 text (byte offset {exc.start})") from None
    except SyntaxError as exc:
        raise ContractError(f"{path.name} does not parse: line {exc.lineno}: {exc.msg}") from exc

    module = import_module_from(path)
    has_reference = hasattr(module, "reference")
    sizes, tol, occupancy, persistent = _checked_declarations(path, module, has_reference)

    hook, lines = parse_hook(path, tree, module.REMAP_HOOK)
    loop_name = getattr(module, "LOOP_ORDER_HOOK", None)
    if loop_name is not None and not isinstance(loop_name, str):
        raise _contract_error(path, f"LOOP_ORDER_HOOK must name a function, got {loop_name!r}")
    loop_order, loop_lines = parse_loop_order_hook(path, tree, loop_name) if loop_name else (None, None)
    kernel = KernelFile(path=path, source=source, module=module, hook=hook, hook_lines=lines, sizes=sizes,
                        default_size=module.DEFAULT_SIZE, check_sizes=tuple(module.CHECK_SIZES),
                        tolerance={"atol": float(tol.get("atol", 0.0)), "rtol": float(tol.get("rtol", 0.0))},
                        programs_per_cu=occupancy, has_reference=has_reference, persistent=persistent,
                        loop_order=loop_order, loop_order_lines=loop_lines,
                        cpu_float32=getattr(module, "CPU_CHECK_FLOAT32", False))
    for name in sizes:
        kernel.grid(name)  # raises a ContractError naming the size if grid() disagrees with the hook
    return kernel
