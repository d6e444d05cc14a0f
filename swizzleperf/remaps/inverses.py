"""Each remap family's inverse, written out as source: logical coordinates -> launch id.

The prover (swizzleperf.validation.proofs.certificates) takes an inverse as a certificate: if g(f(x)) = x
for every program x of every grid, the remap f is one-to-one, and with its range proven, a
bijection; one copy of f is easier for z3 than injectivity's two. An inverse is only a hint: a
wrong one proves nothing, and the prover goes on with its other proofs. So these are written for
clarity, in the remap subset (the prover translates them like a hook), and mirror families.py
statement for statement. The prover uses the 1D orders' (order_inverses): a 2D or 3D family's
proof stalls on its range, not on injectivity, and is cut into an order and a raster anyway;
render_inverse gives every family's, checked against the families in the tests.

`render_inverse(instance, hook)` gives `def <name>_inverse(<one parameter per logical axis>,
<the hook's extents>, <its constexprs>)`, returning the launch id; `coordinates(hook)` names the
logical-axis parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.remaps.families import FamilyInstance, die_count_code
from swizzleperf.remaps.space import candidate_space


@dataclass(frozen=True)
class InverseSignature(HookSignature):
    """An inverse's parameters: one per logical axis (`coords`), then the hook's extents and constexprs.
    It returns one value, the launch id (`pid` names the first coordinate, for code that wants one)."""

    coords: tuple[str, ...] = ()

    @property
    def params(self) -> tuple[str, ...]:
        return (*self.coords, *self.grid_params, *self.constexprs)

    @property
    def ndim(self) -> int:
        return 1

    def render(self) -> str:
        consts = [f"{c}: tl.constexpr" for c in self.constexprs]
        return f"def {self.name}({', '.join([*self.coords, *self.grid_params, *consts])})"


def coordinates(hook: HookSignature) -> tuple[str, ...]:
    """Parameter names for the logical coordinates, clear of the hook's own names and the inverses' locals."""
    taken = set(hook.params) | _LOCALS
    names = []
    for k in range(hook.ndim):
        name = f"logical_{k}"
        while name in taken:
            name += "_"
        names.append(name)
    return tuple(names)


def inverse_signature(hook: HookSignature) -> InverseSignature:
    coords = coordinates(hook)
    return InverseSignature(f"{hook.name}_inverse", coords[0], hook.grid_params, hook.constexprs, coords)


# --- orders: linear logical id `lid` -> launch id `launch` ------------------------------------

def _order_identity(hook: HookSignature, lid: str) -> list[str]:
    return [f"    launch = {lid}"]


def _xcd_contiguous_inverse(n: str, index: str, count: str, target: str, indent: str = "    ") -> list[str]:
    """The XCD-contiguous order's inverse: die `xcd` runs logical ids [start, start + its share)."""
    return [f"{indent}q = ({count} - 1) // {n} + 1",
            f"{indent}tall = {count} - (q - 1) * {n}",
            f"{indent}if {index} < tall * q:",
            f"{indent}    xcd = {index} // q",
            f"{indent}    local = {index} % q",
            f"{indent}else:",
            f"{indent}    xcd = tall + ({index} - tall * q) // (q - 1)",
            f"{indent}    local = ({index} - tall * q) % (q - 1)",
            f"{indent}{target} = local * {n} + xcd"]


def _order_xcd_contiguous(hook: HookSignature, lid: str, dies: int | None = None) -> list[str]:
    return [f"    count = {' * '.join(hook.grid_params)}"] + _xcd_contiguous_inverse(die_count_code(hook, dies), lid, "count",
                                                                                     "launch")


def _rounds_inverse(n: str, index: str, per_round: str, chunk: str, target: str, indent: str) -> list[str]:
    """Within a round, the forward order sends slot k*N + d to d*chunk + k: back again."""
    return [f"{indent}offset = {index} % {per_round}",
            f"{indent}{target} = {index} - offset + (offset % {chunk}) * {n} + offset // {chunk}"]


def _order_xcd_chunked(hook: HookSignature, lid: str, chunk: int, dies: int | None = None) -> list[str]:
    n = die_count_code(hook, dies)
    return [f"    count = {' * '.join(hook.grid_params)}",
            f"    per_round = {n} * {chunk}",
            "    full = count - count % per_round",
            f"    launch = {lid}",
            f"    if {lid} < full:"] + _rounds_inverse(n, lid, "per_round", str(chunk), "launch", "        ")


# --- rasters: coordinates (row, col) -> linear logical id `lid` --------------------------------

def _raster_row_major(hook: HookSignature, row: str, col: str) -> list[str]:
    return [f"    lid = {row} * {hook.grid_params[1]} + {col}"]


def _raster_col_major(hook: HookSignature, row: str, col: str) -> list[str]:
    return [f"    lid = {col} * {hook.grid_params[0]} + {row}"]


def _raster_grouped(hook: HookSignature, row: str, col: str, group_m: int) -> list[str]:
    m, n = hook.grid_params
    return [f"    first_m = {row} - {row} % {group_m}",
            f"    rows = min({m} - first_m, {group_m})",
            f"    lid = first_m * {n} + {col} * rows + ({row} - first_m)"]


def _linear(hook: HookSignature, order: Callable[..., list[str]], raster: Callable[..., list[str]] | None,
            **params: int) -> list[str]:
    """A raster's inverse (2D) or nothing (1D), then the order's; `return launch`."""
    coords = coordinates(hook)
    raster_params = {k: v for k, v in params.items() if k == "group_m"}
    order_params = {k: v for k, v in params.items() if k != "group_m"}
    lines = raster(hook, *coords, **raster_params) if raster else []
    lid = "lid" if raster else coords[0]
    return lines + order(hook, lid, **order_params) + ["    return launch"]


# --- attention (q blocks, batch, heads) --------------------------------------------------------

def _cluster_rounds_inverse(hook: HookSignature, index: str, count: str, chunk: str, target: str,
                            dies: int | None) -> list[str]:
    """families._order_cluster_rounds backwards: whole rounds, then the XCD-contiguous tail."""
    n = die_count_code(hook, dies)
    return ([f"    rounds_end = {count} // {chunk} // {n} * {n} * {chunk}",
             f"    if {index} < rounds_end:",
             f"        per_round = {n} * {chunk}"]
            + _rounds_inverse(n, index, "per_round", chunk, target, "        ")
            + ["    else:", f"        tail = {count} - rounds_end", f"        tail_index = {index} - rounds_end"]
            + _xcd_contiguous_inverse(n, "tail_index", "tail", "tail_launch", "        ")
            + [f"        {target} = rounds_end + tail_launch"])


def _attention(hook: HookSignature, family: str, group: int = 1, dies: int | None = None) -> list[str]:
    blocks, batch, heads = hook.grid_params
    block, b, h = coordinates(hook)
    if family == "identity":
        return [f"    return ({block} * {batch} + {b}) * {heads} + {h}"]
    if family == "head_first":
        return [f"    return ({b} * {heads} + {h}) * {blocks} + {block}"]
    if family == "swizzled_head_first":
        return ([f"    count = {blocks} * {batch} * {heads}",
                 f"    cluster = min({group}, {batch} * {heads}) * {blocks}",
                 f"    lid = ({b} * {heads} + {h}) * {blocks} + {block}"]
                + _cluster_rounds_inverse(hook, "lid", "count", "cluster", "launch", dies) + ["    return launch"])
    return ([f"    units = {batch} * {heads}", f"    unit = {b} * {heads} + {h}"]
            + _cluster_rounds_inverse(hook, "unit", "units", str(group), "position", dies)
            + [f"    return {block} * units + position"])


_LINEAR = {  # family -> (order, raster) of its inverse, for 1D and 2D hooks
    "xcd_contiguous": (_order_xcd_contiguous, None), "xcd_chunked": (_order_xcd_chunked, None),
    "col_major": (_order_identity, _raster_col_major), "grouped": (_order_identity, _raster_grouped),
    "xcd_row_major": (_order_xcd_contiguous, _raster_row_major),
    "xcd_col_major": (_order_xcd_contiguous, _raster_col_major),
    "xcd_grouped": (_order_xcd_contiguous, _raster_grouped),
    "xcd_chunked_grouped": (_order_xcd_chunked, _raster_grouped),
}
_ATTENTION = ("identity", "head_first", "swizzled_head_first", "swizzled_block_first")
_LOCALS = {"count", "q", "tall", "xcd", "local", "launch", "per_round", "full", "offset", "lid", "first_m", "rows",
           "cluster", "rounds_end", "tail", "tail_index", "tail_launch", "units", "unit", "position"}


def _source(hook: HookSignature, label: str, body: list[str]) -> str:
    signature = inverse_signature(hook)
    doc = f'    """Inverse of {label}: logical coordinates -> launch id."""'
    return "\n".join(["@triton.jit", f"{signature.render()}:", doc, *body]) + "\n"


def order_inverses(hook: HookSignature) -> list[tuple[str, str]]:
    """(label, inverse source) of every 1D order the offline search's instances use, for a 1D hook
    (a hook, or the order a 2D or 3D hook is cut into): the 1D families, and the cluster rounds of
    block-first attention with their constant cluster size."""
    if hook.ndim != 1:
        return []
    found: dict[str, str] = {}
    attention = HookSignature(hook.name, hook.pid, ("blocks", "batch", "heads"), hook.constexprs)
    for hw in PRESETS.values():
        for instances in candidate_space(hook, hw).values():
            for instance in instances:
                found.setdefault(instance.label, render_inverse(instance, hook))
        for instance in candidate_space(attention, hw).get("swizzled_block_first", []):
            params = dict(instance.params)
            label = f"the order of {instance.label}"
            body = _cluster_rounds_inverse(hook, coordinates(hook)[0], hook.grid_params[0], str(params["group"]),
                                           "launch", params.get("dies"))
            found.setdefault(label, _source(hook, label, body + ["    return launch"]))
    return [(label, source) for label, source in found.items() if source is not None]


def render_inverse(instance: FamilyInstance, hook: HookSignature) -> str | None:
    """The instance's inverse for this hook, or None where the family has none written (or the
    hook's dimensions do not fit it)."""
    params = dict(instance.params)
    if hook.ndim == 3 and instance.family in _ATTENTION:
        body = _attention(hook, instance.family, **params)
    elif instance.family == "identity" and hook.ndim in (1, 2):
        body = _linear(hook, _order_identity, _raster_row_major if hook.ndim == 2 else None)
    elif instance.family in _LINEAR and hook.ndim == (1 if _LINEAR[instance.family][1] is None else 2):
        order, raster = _LINEAR[instance.family]
        body = _linear(hook, order, raster, **params)
    else:
        return None
    return _source(hook, instance.label, body)
