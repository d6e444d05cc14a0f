"""Proof by composition: an order (launch id -> one linear id) followed by a raster (linear id ->
coordinates) is proven one half at a time.

A cut is a top-level statement after which the only live name that depends on the program id is
one name, `v`: the hook is then raster(order(pid)), with order: pid -> v and raster: v -> results.
When the order reads the grid only through one product of every extent (`count = M * N`), it is
a 1D hook of that count; the raster, given `v` as its program id after the statements that depend
on the grid alone, is a hook of the original grid. If the order is a bijection of [0, count) for
every count up to the domain's bound, and the raster maps [0, total) one-to-one onto the grid, the
hook is a bijection, since count = total on every grid (both halves are proven with the same die
count and the same integer semantics; each half's operations are the hook's own, so neither can
wrap where the hook would not). z3 decides each half fast, where the whole formula (a chunked XCD
order under a GROUP_M raster, say) can exhaust the budget. Only "proven" counts: a counterexample
to one half need not be one to the hook, so the caller then proves the hook whole.

An order may also read values the hook computes from the extents one by one (a cluster size,
`min(group, batch * heads) * blocks`): it then takes each as a size, any value in [1, max_programs]
(encoding.SizedHook), and a third hook, of the original grid, proves that the hook's own computation
of them never leaves that range (it maps programs out of the grid where it would).
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass

from swizzleperf.kernel.contract import HookSignature
from swizzleperf.remaps.check import hook_body
from swizzleperf.validation.proofs.encoding import SizedHook
from swizzleperf.validation.proofs.verdict import INT32_MAX


@dataclass(frozen=True)
class Halves:
    """A hook cut at `through`: the order as a 1D hook, the raster as a hook of the original grid, and,
    where the order takes sizes, the hook whose bijectivity says they are in range on every grid."""

    through: str
    order: tuple[str, SizedHook]
    raster: tuple[str, HookSignature]
    sizes: tuple[str, HookSignature] | None = None


def _reads(node: ast.AST) -> set[str]:
    """The names a statement reads (`x += 1` reads x)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} | {
        n.target.id for n in ast.walk(node) if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)}


def _writes(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _live(statements: list[ast.stmt]) -> set[str]:
    """The names `statements` read before assigning them (only a plain top-level assignment
    counts as assigning: one inside a branch may not run)."""
    live: set[str] = set()
    assigned: set[str] = set()
    for stmt in statements:
        live |= _reads(stmt) - assigned
        if isinstance(stmt, ast.Assign):
            assigned |= _writes(stmt)
    return live


def _program_dependent(body: list[ast.stmt], pid: str) -> list[bool]:
    """Per top-level statement, whether it reads the program id or a name that depends on it. A
    statement that does not reads only the grid and constants (over-approximated: any read counts)."""
    tainted, marks = {pid}, []
    for stmt in body:
        dependent = bool(_reads(stmt) & tainted)
        if dependent:
            tainted |= _writes(stmt)
        marks.append(dependent)
    return marks


def _grid_product(stmt: ast.stmt, grid: tuple[str, ...]) -> str | None:
    """`count` for `count = M * N` (every extent once, in any order), else None."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    factors, stack = [], [stmt.value]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            stack += [node.left, node.right]
        elif isinstance(node, ast.Name):
            factors.append(node.id)
        else:
            return None
    return stmt.targets[0].id if sorted(factors) == sorted(grid) else None


def _needed(statements: list[ast.stmt], names: set[str]) -> list[ast.stmt]:
    """Those of `statements` that assign `names` or what they are computed from (in order)."""
    kept = []
    for stmt in reversed(statements):
        if _writes(stmt) & names:
            kept.append(stmt)
            names = names | _reads(stmt)
    return kept[::-1]


def _source(signature: HookSignature, lines: list[str]) -> str:
    return "\n".join(["@triton.jit", f"{signature.render()}:", *(f"    {line}" for line in lines)]) + "\n"


def _unparse(body: list[ast.stmt]) -> list[str]:
    return [line for stmt in body for line in ast.unparse(stmt).splitlines()]


def _fresh(fn: ast.FunctionDef, stem: str) -> str:
    """`stem`, or `stem1`, `stem2`, ...: a name the hook does not use."""
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {a.arg for a in fn.args.args}
    return next(name for name in (stem if i == 0 else f"{stem}{i}" for i in itertools.count()) if name not in names)


def _order_hook(fn: ast.FunctionDef, hook: HookSignature, prefix: list[ast.stmt], dependent: list[bool],
                through: str) -> tuple[tuple[str, SizedHook], list[ast.stmt]] | None:
    """The statements up to the cut as a 1D hook of the grid's program count, returning `through`,
    and the statements it no longer computes: those that read the extents one by one, whose values it
    takes as sizes instead (None if it would read an extent, or reassigns the count or a size)."""
    products = [(i, name) for i, stmt in enumerate(prefix) if (name := _grid_product(stmt, hook.grid_params))]
    if len(products) > 1:
        return None
    index, count = products[0] if products else (None, _fresh(fn, "programs"))
    extents = set(hook.grid_params)
    sized = [stmt for i, (stmt, d) in enumerate(zip(prefix, dependent)) if i != index and not d and _reads(stmt) & extents]
    kept = [stmt for i, stmt in enumerate(prefix) if i != index and stmt not in sized]
    sizes = sorted(set().union(*map(_writes, sized)) & set().union(*map(_reads, kept))) if sized else []
    written = set().union(*map(_writes, kept)) if kept else set()
    if any(_reads(stmt) & extents for stmt in kept) or written & {count, *sizes}:
        return None
    for size in sizes:  # one value all along: assigned once, before anything reads it
        writers = [i for i, stmt in enumerate(prefix) if size in _writes(stmt)]
        first_read = min(i for i, stmt in enumerate(prefix) if stmt in kept and size in _reads(stmt))
        if len(writers) != 1 or writers[0] > first_read:
            return None
    signature = SizedHook(hook.name, hook.pid, (count,), hook.constexprs, tuple(sizes))
    return (_source(signature, _unparse(kept) + [f"return {through}"]), signature), sized


def _sizes_hook(fn: ast.FunctionDef, hook: HookSignature, grid_only: list[ast.stmt], sizes: tuple[str, ...],
                max_programs: int) -> tuple[str, HookSignature]:
    """A hook of the original grid that is a bijection exactly when every size the order takes is in
    [1, max_programs] on every grid: it computes them as the hook does, then maps each program to its
    row-major coordinates, or out of the grid when a size is out of range."""
    outside = _fresh(fn, "size_out_of_range")
    test = " or ".join(f"{s} < 1 or {s} > {max_programs}" for s in sizes)
    extents = hook.grid_params
    coords = []
    for axis, extent in enumerate(extents):
        inner = " * ".join(extents[axis + 1:])
        index = f"{hook.pid} // ({inner})" if inner else hook.pid
        coords.append(index if axis == 0 else f"{index} % {extent}")
    coords[0] = f"{extents[0]} if {outside} else {coords[0]}"
    lines = _unparse(_needed(grid_only, set(sizes))) + [f"{outside} = {test}", f"return {', '.join(coords)}"]
    return _source(hook, lines), hook


def cuts(fn: ast.FunctionDef, hook: HookSignature, max_programs: int = INT32_MAX) -> list[Halves]:
    """Every way to cut a 2D or 3D hook into an order and a raster, the latest cut first (the prover
    tries only that one: each part costs a time limit)."""
    body = hook_body(fn)
    if hook.ndim < 2 or any(isinstance(n, ast.Return) for stmt in body[:-1] for n in ast.walk(stmt)):
        return []  # 1D hooks are proven whole; an early return leaves no single order
    dependent = _program_dependent(body, hook.pid)
    found = []
    for k in reversed(range(len(body) - 1)):
        later = _live(body[k + 1:])
        tainted = set().union(*(_writes(stmt) for stmt, d in zip(body[:k + 1], dependent) if d), {hook.pid})
        live = later & tainted
        if len(live) != 1 or hook.pid in live:
            continue
        through = live.pop()
        cut = _order_hook(fn, hook, body[:k + 1], dependent[:k + 1], through)
        if cut is None:
            continue
        order, sized = cut
        grid_only = [stmt for stmt, d in zip(body[:k + 1], dependent) if not d]
        raster = _source(hook, _unparse(_needed(grid_only, later)) + [f"{through} = {hook.pid}"]
                         + _unparse(body[k + 1:]))
        sizes = order[1].sizes
        found.append(Halves(through, order, (raster, hook),
                            _sizes_hook(fn, hook, grid_only, sizes, max_programs) if sizes else None))
    return found
