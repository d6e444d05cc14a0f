"""Proof by splitting off the slowest axis: a hook that cuts the launch id into two values, returns the
first as its first coordinate and computes the others from the second alone.

A block-first attention order (`block = pid // units`, `position = pid % units`, then a permutation
of the units inside each q block) is no order followed by a raster: the cut after `position`
holds two values, not one linear id. But if, after that cut, the only live values that depend
on the program id are `outer` and `inner`, the hook returns `outer` as its first coordinate, and
nothing else reads `outer`, the hook is (outer, rest(inner)) with

- prefix: pid -> (outer, inner), a 2D hook of the grid (first extent, `units`), where `units` is
  the hook's own product of the other extents (`units = batch * heads`) taken as one extent;
- rest: inner -> the other coordinates, a hook of the other extents alone.

If the prefix is a bijection onto [0, first) x [0, units) for every such grid and the rest maps
[0, units) one-to-one onto the other extents' grid, the hook maps [0, first * units) one-to-one
onto the whole grid: a product of bijections. Both parts are proven with the same die counts and
semantics; each part's operations are the hook's own (the rest recomputes the grid-only values
it reads as the hook does, and takes `inner` as its program id, as compose's raster takes its
linear id), so neither can wrap where the hook would not.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from swizzleperf.kernel.contract import HookSignature
from swizzleperf.remaps.check import hook_body
from swizzleperf.validation.proofs.compose import (
    _grid_product,
    _live,
    _needed,
    _program_dependent,
    _reads,
    _source,
    _unparse,
    _writes,
)


@dataclass(frozen=True)
class Split:
    """A hook split at (`outer`, `inner`): the prefix as a 2D hook, the rest as a hook of the other extents."""

    outer: str
    inner: str
    prefix: tuple[str, HookSignature]
    rest: tuple[str, HookSignature]


def _returned(body: list[ast.stmt], ndim: int) -> list[ast.expr] | None:
    """The coordinates of the hook's only return, its last statement, if the first is a name."""
    last = body[-1]
    if any(isinstance(n, ast.Return) for stmt in body[:-1] for n in ast.walk(stmt)) or not isinstance(last, ast.Return):
        return None
    values = last.value.elts if isinstance(last.value, ast.Tuple) else None
    return values if values and len(values) == ndim and isinstance(values[0], ast.Name) else None


def _prefix(hook: HookSignature, prefix: list[ast.stmt], outer: str, inner: str) -> tuple[str, HookSignature] | None:
    """pid -> (outer, inner) as a hook of (first extent, units), where units is the hook's product of the
    other extents (or the second extent, in 2D); None if the prefix reads those extents otherwise."""
    first, others = hook.grid_params[0], hook.grid_params[1:]
    products = [(stmt, name) for stmt in prefix if (name := _grid_product(stmt, others))]
    if len(products) > 1 or (not products and len(others) > 1):
        return None
    product, units = products[0] if products else (None, others[0])
    kept = [stmt for stmt in prefix if stmt is not product]
    if len(others) > 1 and any(_reads(stmt) & set(others) for stmt in kept):
        return None
    if any(_writes(stmt) & {first, units} for stmt in kept):
        return None
    signature = HookSignature(hook.name, hook.pid, (first, units), hook.constexprs)
    return _source(signature, _unparse(kept) + [f"return {outer}, {inner}"]), signature


def _rest(hook: HookSignature, grid_only: list[ast.stmt], suffix: list[ast.stmt], inner: str,
          coordinates: list[ast.expr]) -> tuple[str, HookSignature]:
    """inner -> the other coordinates, as a hook of the other extents (its program id is `inner`)."""
    signature = HookSignature(hook.name, hook.pid, hook.grid_params[1:], hook.constexprs)
    returned = ", ".join(ast.unparse(c) for c in coordinates)
    lines = (_unparse(_needed(grid_only, _reads(ast.Module(body=suffix, type_ignores=[]))))
             + [f"{inner} = {hook.pid}"] + _unparse(suffix[:-1]) + [f"return {returned}"])
    return _source(signature, lines), signature


def split(fn: ast.FunctionDef, hook: HookSignature) -> Split | None:
    """The earliest split of a 2D or 3D hook into a prefix and a rest (see the module docstring), or None:
    the smallest prefix (a row-major unravel, usually), leaving the order and raster to the rest."""
    body = hook_body(fn)
    coordinates = _returned(body, hook.ndim) if hook.ndim >= 2 else None
    if coordinates is None:
        return None
    outer = coordinates[0].id
    dependent = _program_dependent(body, hook.pid)
    for k in range(len(body) - 1):
        suffix = body[k + 1:]
        tainted = set().union(*(_writes(stmt) for stmt, d in zip(body[:k + 1], dependent) if d), {hook.pid})
        live = _live(suffix) & tainted
        if len(live) != 2 or hook.pid in live or outer not in live:
            continue
        inner = (live - {outer}).pop()
        others = ast.Module(body=[*suffix[:-1], *(ast.Expr(c) for c in coordinates[1:])], type_ignores=[])
        if outer in _reads(others) | set().union(*map(_writes, suffix)):
            continue
        prefix = _prefix(hook, body[:k + 1], outer, inner)
        if prefix is None:
            continue
        grid_only = [stmt for stmt, d in zip(body[:k + 1], dependent) if not d]
        return Split(outer, inner, prefix, _rest(hook, grid_only, suffix, inner, coordinates[1:]))
    return None
