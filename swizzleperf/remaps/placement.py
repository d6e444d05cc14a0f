"""Which logical programs share a die, in one sentence: for a remap, and for the achievable bound's assignment.

One wording for both, so the report and the model read the remap's grouping and the bound's side
by side. Free of plotting, so the profiler can write the bound's sentence onto its reports.
"""

from __future__ import annotations

import numpy as np

from swizzleperf.hardware.dispatch import slot_domains


def id_ranges(ids: np.ndarray, limit: int = 6) -> str:
    """Sorted ids as "0-3, 32-35, ..." (at most `limit` runs shown)."""
    if not ids.size:
        return "none"
    breaks = np.flatnonzero(np.diff(ids) != 1) + 1
    runs = [(int(r[0]), int(r[-1])) for r in np.split(ids, breaks)]
    text = ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs[:limit])
    return text + (f", ... ({len(runs)} runs)" if len(runs) > limit else "")


def tile_span(ids: np.ndarray, grid: tuple[int, ...]) -> str:
    """The tile rows and columns that linear ids cover on a 2D grid ("" for other grids)."""
    if len(grid) != 2 or not ids.size:
        return ""
    rows, cols = ids // grid[1], ids % grid[1]
    return f"tile rows {rows.min()}-{rows.max()}, columns {cols.min()}-{cols.max()} of {grid[0]} x {grid[1]}"


def grouping_sentence(logical_of_slot: np.ndarray, grid: tuple[int, ...], hw) -> str:
    """Which logical programs a remap puts together: on die 0, or (one L2) in the first wave."""
    domains = slot_domains(int(logical_of_slot.size), hw)
    if hw.num_domains > 1:
        die_of = np.empty_like(domains)
        die_of[logical_of_slot] = domains
        ids, where = np.flatnonzero(die_of == 0), f"die 0 of {hw.num_domains}"
    else:
        ids = np.sort(logical_of_slot[:hw.resident_programs_per_domain])
        where = f"the first wave ({ids.size} programs resident at once)"
    span = tile_span(ids, grid)
    return f"{where} runs logical programs {id_ranges(ids)}" + (f" ({span})" if span else "")


def partition_sentence(die_of_logical: np.ndarray, grid: tuple[int, ...], num_domains: int) -> str:
    """What the achievable bound's assignment puts on die 0: the grouping a remap would have to imitate."""
    ids = np.flatnonzero(die_of_logical == 0)
    span = tile_span(ids, grid)
    return (f"The achievable bound's assignment puts logical programs {id_ranges(ids)} on die 0 of {num_domains} "
            f"({ids.size:,} of {die_of_logical.size:,} programs" + (f"; {span})" if span else ")"))
