"""Known remap families, written out as remap-hook source code (docs/kernel-contract.md says what a hook is).

Each family is a function `(hook, **params) -> source` that renders a complete `@triton.jit`
hook with the kernel's own parameter names, so its output is validated exactly like an
LLM's. 1D hooks map a launch id to a logical id; 2D hooks map it to `(pid_m, pid_n)`: the
2D families first pick a linear logical order (XCD-contiguous or not) and then a raster
(row-major, column-major or GROUP_M super-tiles) inside it.

3D hooks are attention grids, read as `(q blocks, batch, heads)`: the axes from slowest to
fastest in block-first launch order (kernels/attention.py), so the 3D identity is block-first.
A *unit* is one (batch, head) pair, `unit = b * heads + h`; a *cluster* is `group` consecutive
units, which is one KV group in GQA when `group` is the heads per K/V head (the hook cannot
see that ratio, so it is a family parameter). All programs of a cluster read the same K/V.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from swizzleperf.kernel import candidate
from swizzleperf.kernel.contract import HookSignature, LoopOrderSignature
from swizzleperf.remaps.loop_orders import LOOP_ORDERS


@dataclass(frozen=True)
class FamilyInstance:
    """One family with concrete parameters: a candidate the search proposer can render; with `loop_order`
    (a name in remaps.loop_orders.LOOP_ORDERS) it rewrites the kernel's loop-order hook too."""

    family: str
    params: tuple[tuple[str, int], ...] = ()
    loop_order: str | None = None

    @property
    def label(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self.params)
        remap = f"{self.family}({inner})" if inner else self.family
        return remap if self.loop_order is None else f"{remap} + {self.loop_order}"

    def render(self, hook: HookSignature, loop_order_hook: LoopOrderSignature | None = None) -> str:
        remap = FAMILIES[self.family](hook, **dict(self.params))
        if self.loop_order is None:
            return remap
        if loop_order_hook is None:
            raise ValueError(f"{self.label} rewrites a loop-order hook, and the kernel declares none")
        return candidate.join(remap, LOOP_ORDERS[self.loop_order](loop_order_hook))


def _header(hook: HookSignature, doc: str) -> list[str]:
    return ["@triton.jit", f"{hook.render()}:", f'    """{doc}"""']


def die_count_code(hook: HookSignature, dies: int | None) -> str:
    """The die count as code: the kernel's NUM_XCDS-like constexpr, or a literal override."""
    if dies is None:
        if not hook.constexprs:
            raise ValueError(f"{hook.name} has no constexpr for the die count; pass dies=")
        return hook.constexprs[0]
    return str(dies)


def _count(hook: HookSignature) -> str:
    return " * ".join(hook.grid_params)


# --- linear orders: launch id -> linear logical id, as lines assigning `lid` -------------------

def _order_identity(hook: HookSignature) -> list[str]:
    return [f"    lid = {hook.pid}"]


def _order_xcd_contiguous(hook: HookSignature, dies: int | None = None) -> list[str]:
    # Die d receives programs d, d+N, d+2N, ... and gives them one contiguous logical range. The
    # first t dies ("tall") get q = ceil(G/N) programs, the rest q-1; t = N when N divides G.
    # ceil(G/N) as (G - 1) // N + 1: `G + N - 1` wraps in int32 for grids within N of 2**31.
    n = die_count_code(hook, dies)
    return [
        f"    count = {_count(hook)}",
        f"    xcd = {hook.pid} % {n}",
        f"    local = {hook.pid} // {n}",
        f"    q = (count - 1) // {n} + 1",
        f"    tall = count - (q - 1) * {n}",
        "    if xcd < tall:",
        "        lid = xcd * q + local",
        "    else:",
        "        lid = tall * q + (xcd - tall) * (q - 1) + local",
    ]


def _order_xcd_chunked(hook: HookSignature, chunk: int, dies: int | None = None) -> list[str]:
    # Rounds of N*chunk launch ids: within a round, die d takes `chunk` consecutive logical ids, so
    # neighbours share a die and run at about the same time. The tail that does not fill a round
    # keeps the identity.
    n = die_count_code(hook, dies)
    return [
        f"    count = {_count(hook)}",
        f"    per_round = {n} * {chunk}",
        "    full = count - count % per_round",
        f"    lid = {hook.pid}",
        f"    if {hook.pid} < full:",
        f"        r = {hook.pid} // per_round",
        f"        xcd = {hook.pid} % {n}",
        f"        k = ({hook.pid} // {n}) % {chunk}",
        f"        lid = r * per_round + xcd * {chunk} + k",
    ]


# --- rasters for 2D hooks: linear logical id `lid` -> (pid_m, pid_n) ----------------------------

def _raster_row_major(hook: HookSignature) -> list[str]:
    _, n = hook.grid_params
    return [f"    return lid // {n}, lid % {n}"]


def _raster_col_major(hook: HookSignature) -> list[str]:
    m, _ = hook.grid_params
    return [f"    return lid % {m}, lid // {m}"]


def _raster_grouped(hook: HookSignature, group_m: int) -> list[str]:
    # GROUP_M rows of tiles are walked column by column, so consecutive programs reuse the same
    # rows of A and the same columns of B; the last group may be shorter. (Not `GROUP_M * n`:
    # it wraps in int32 on tall grids; every value here is at most the grid's program count.)
    m, n = hook.grid_params
    return [
        f"    row = lid // {n}",
        f"    first_m = row - row % {group_m}",
        f"    rows = min({m} - first_m, {group_m})",
        f"    local = lid - first_m * {n}",
        "    return first_m + local % rows, local // rows",
    ]


# --- attention orders for 3D hooks (q blocks, batch, heads) ------------------------------------

def _order_cluster_rounds(hook: HookSignature, index: str, count: str, chunk: str, target: str,
                          dies: int | None = None) -> list[str]:
    """`target` = a permutation of `index` in [0, count) that gives each die whole chunks.

    Rounds of N*chunk ids: launch id i runs on die i % N, which takes the round's chunk
    number i % N, in order; that pins every chunk of a full round to one die. The tail (fewer
    than N chunks) is split XCD-contiguously: each die runs one contiguous piece of it, so a
    tail chunk spans few dies rather than all. Always a bijection; it pins chunks to dies when
    `index` % N is the die of the launch slot (the ids before `index`'s range are a multiple of N).
    No intermediate exceeds `count` (int32 would wrap): the round size is formed only where a
    round fits, and ceil(tail/N) is (tail - 1) // N + 1.
    """
    n = die_count_code(hook, dies)
    return [
        f"    rounds_end = {count} // {chunk} // {n} * {n} * {chunk}",
        f"    if {index} < rounds_end:",
        f"        per_round = {n} * {chunk}",
        f"        {target} = ({index} // per_round) * per_round + ({index} % {n}) * {chunk} "
        f"+ ({index} // {n}) % {chunk}",
        "    else:",
        f"        tail = {count} - rounds_end",
        f"        tail_q = (tail - 1) // {n} + 1",
        f"        tall = tail - (tail_q - 1) * {n}",
        f"        tail_xcd = ({index} - rounds_end) % {n}",
        f"        tail_local = ({index} - rounds_end) // {n}",
        "        if tail_xcd < tall:",
        f"            {target} = rounds_end + tail_xcd * tail_q + tail_local",
        "        else:",
        f"            {target} = rounds_end + tall * tail_q + (tail_xcd - tall) * (tail_q - 1) + tail_local",
    ]


def _unravel_3d(hook: HookSignature, block: str, unit: str) -> list[str]:
    _, _, heads = hook.grid_params
    return [f"    return {block}, {unit} // {heads}, {unit} % {heads}"]


def _attention_naive_head_first(hook: HookSignature) -> list[str]:
    blocks, _, _ = hook.grid_params
    return [f"    unit = {hook.pid} // {blocks}"] + _unravel_3d(hook, f"{hook.pid} % {blocks}", "unit")


def _attention_swizzled_head_first(hook: HookSignature, group: int, dies: int | None) -> list[str]:
    # A cluster is `group` heads x all their q blocks: group * blocks consecutive ids in head-first
    # order. Whole clusters are pinned to dies; each die walks its clusters head by head.
    # More heads per cluster than units make one cluster of everything (`group * blocks` could wrap).
    blocks, batch, heads = hook.grid_params
    return ([f"    count = {_count(hook)}", f"    cluster = min({group}, {batch} * {heads}) * {blocks}"]
            + _order_cluster_rounds(hook, hook.pid, "count", "cluster", "lid", dies)
            + ["    unit = lid // " + blocks] + _unravel_3d(hook, f"lid % {blocks}", "unit"))


def _attention_swizzled_block_first(hook: HookSignature, group: int, dies: int | None) -> list[str]:
    # Block-first rows (one q block, every unit) keep their order; inside each row, the units are
    # permuted so that die i % N gets whole clusters of `group` units. When N divides the units
    # per row, the die of row position i is i % N in every row, so a cluster stays on one die for
    # all its q blocks; otherwise the assignment rotates from row to row (still a bijection).
    _, batch, heads = hook.grid_params
    return ([f"    units = {batch} * {heads}", f"    block = {hook.pid} // units", f"    position = {hook.pid} % units"]
            + _order_cluster_rounds(hook, "position", "units", str(group), "unit", dies)
            + _unravel_3d(hook, "block", "unit"))


def _compose(doc: str, order: list[str], raster: list[str] | None, hook: HookSignature) -> str:
    tail = raster if raster is not None else ["    return lid"]
    return "\n".join(_header(hook, doc) + order + tail) + "\n"


def _needs(hook: HookSignature, ndim: int, family: str) -> None:
    if hook.ndim != ndim:
        raise ValueError(f"family {family} needs a {ndim}D hook; {hook.render()} is {hook.ndim}D")


# --- the families ------------------------------------------------------------------------------

def identity(hook: HookSignature) -> str:
    if hook.ndim == 1:
        return _compose("Identity: launch order is logical order.", _order_identity(hook), None, hook)
    if hook.ndim == 3:
        blocks, batch, heads = hook.grid_params
        return _compose("Identity (naive block-first): heads cycle fastest, then batch, q block slowest.", [],
                        [f"    return {hook.pid} // ({batch} * {heads}), ({hook.pid} // {heads}) % {batch}, "
                         f"{hook.pid} % {heads}"], hook)
    _needs(hook, 2, "identity")
    return _compose("Identity: row-major tiles in launch order.", _order_identity(hook), _raster_row_major(hook), hook)


def xcd_contiguous(hook: HookSignature, dies: int | None = None) -> str:
    _needs(hook, 1, "xcd_contiguous")
    return _compose("XCD-contiguous: each die runs one contiguous range of logical ids.",
                    _order_xcd_contiguous(hook, dies), None, hook)


def xcd_chunked(hook: HookSignature, chunk: int, dies: int | None = None) -> str:
    _needs(hook, 1, "xcd_chunked")
    return _compose(f"Chunked XCD-contiguous: {chunk} consecutive logical ids per die per round.",
                    _order_xcd_chunked(hook, chunk, dies), None, hook)


def col_major(hook: HookSignature) -> str:
    _needs(hook, 2, "col_major")
    return _compose("Column-major tiles in launch order.", _order_identity(hook), _raster_col_major(hook), hook)


def grouped(hook: HookSignature, group_m: int) -> str:
    _needs(hook, 2, "grouped")
    return _compose(f"GROUP_M={group_m} super-tile raster in launch order.",
                    _order_identity(hook), _raster_grouped(hook, group_m), hook)


def xcd_row_major(hook: HookSignature, dies: int | None = None) -> str:
    _needs(hook, 2, "xcd_row_major")
    return _compose("XCD-contiguous ranges of row-major tiles.",
                    _order_xcd_contiguous(hook, dies), _raster_row_major(hook), hook)


def xcd_col_major(hook: HookSignature, dies: int | None = None) -> str:
    _needs(hook, 2, "xcd_col_major")
    return _compose("XCD-contiguous ranges of column-major tiles.",
                    _order_xcd_contiguous(hook, dies), _raster_col_major(hook), hook)


def xcd_grouped(hook: HookSignature, group_m: int, dies: int | None = None) -> str:
    _needs(hook, 2, "xcd_grouped")
    return _compose(f"XCD-contiguous ranges, GROUP_M={group_m} super-tile raster inside each.",
                    _order_xcd_contiguous(hook, dies), _raster_grouped(hook, group_m), hook)


def xcd_chunked_grouped(hook: HookSignature, chunk: int, group_m: int, dies: int | None = None) -> str:
    _needs(hook, 2, "xcd_chunked_grouped")
    return _compose(f"Chunked XCD order ({chunk} per die per round), GROUP_M={group_m} raster.",
                    _order_xcd_chunked(hook, chunk, dies), _raster_grouped(hook, group_m), hook)


def head_first(hook: HookSignature) -> str:
    _needs(hook, 3, "head_first")
    return _compose("Naive head-first: all q blocks of one head consecutively, striped over the dies.", [],
                    _attention_naive_head_first(hook), hook)


def swizzled_head_first(hook: HookSignature, group: int, dies: int | None = None) -> str:
    _needs(hook, 3, "swizzled_head_first")
    return _compose(f"Swizzled head-first: clusters of {group} heads pinned to one die each, head by head.", [],
                    _attention_swizzled_head_first(hook, group, dies), hook)


def swizzled_block_first(hook: HookSignature, group: int, dies: int | None = None) -> str:
    _needs(hook, 3, "swizzled_block_first")
    return _compose(f"Swizzled block-first: clusters of {group} heads pinned to one die each, q block by q block.",
                    [], _attention_swizzled_block_first(hook, group, dies), hook)


FAMILIES: dict[str, Callable[..., str]] = {
    f.__name__: f for f in (identity, xcd_contiguous, xcd_chunked, col_major, grouped, xcd_row_major,
                            xcd_col_major, xcd_grouped, xcd_chunked_grouped, head_first, swizzled_head_first,
                            swizzled_block_first)
}
