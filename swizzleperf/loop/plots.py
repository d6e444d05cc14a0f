"""The two pictures of a run: hit rate per iteration, and which die runs which logical tile."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from swizzleperf.loop.history import History  # noqa: E402

_MAX_TILES_SHOWN = (32, 48)  # rows, columns of logical tiles drawn; larger grids show their top-left corner


def plot_hit_rate(history: History, ceiling_pct: float | None, label: str, path: Path) -> Path:
    """Hit rate of every accepted attempt, the best so far, the baseline and the ceiling."""
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    accepted = [a for a in history.attempts if a.accepted]
    rejected = [a for a in history.attempts if not a.accepted]
    colours = {"baseline": "#444444", "search": "#1f77b4", "llm": "#d62728", "library": "#2ca02c"}
    for origin in colours:
        pts = [(a.iteration, a.report.hit_pct) for a in accepted if a.origin == origin and a.report]
        if pts:
            ax.scatter(*zip(*pts), s=28, color=colours[origin], label=origin, zorder=3)
    if accepted:
        xs = [a.iteration for a in history.attempts]
        best, running = [], -math.inf
        for a in history.attempts:
            if a.accepted and a.report:
                running = max(running, a.report.hit_pct)
            best.append(running if running > -math.inf else np.nan)
        ax.step(xs, best, where="post", color="#ff7f0e", lw=1.8, label="best so far")
    if rejected:
        ax.scatter([a.iteration for a in rejected], [0] * len(rejected), marker="x", color="#999999",
                   label="rejected", zorder=3, clip_on=False)
    if ceiling_pct is not None:
        ax.axhline(ceiling_pct, color="#2ca02c", ls="--", lw=1.2, label=f"ceiling {ceiling_pct:.1f}%")
    ax.set_xlabel("iteration")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(f"L2 read hit rate, % ({label})")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _tile_layout(grid: tuple[int, ...]) -> tuple[int, int]:
    """Rows and columns to draw a logical grid in: 2D as is, 1D wrapped into a near-square."""
    if len(grid) == 2:
        return grid[0], grid[1]
    total = int(np.prod(grid))
    cols = min(total, max(8, int(math.ceil(math.sqrt(total)))))
    return int(math.ceil(total / cols)), cols


@dataclass(frozen=True)
class DiePanel:
    """A panel that already says which die runs each logical tile (a partition, not a launch order): it
    has no launch order to fade by, so it is drawn at full colour."""

    title: str
    die_of_logical: np.ndarray


Panel = tuple[str, np.ndarray] | DiePanel  # (title, logical id of every launch slot), or a DiePanel


def _die_and_order(panel: Panel, slot_domain: np.ndarray, total: int) -> tuple[str, np.ndarray, np.ndarray]:
    """A panel's title, the die of each logical tile, and its launch order in [0, 1] (0: first, or no order)."""
    if isinstance(panel, DiePanel):
        return f"{panel.title}, full colour (no launch order)", panel.die_of_logical, np.zeros(total)
    title, logical_of_slot = panel
    slot_of_logical = np.empty(total, dtype=np.int64)
    slot_of_logical[logical_of_slot] = np.arange(total)
    return title, slot_domain[slot_of_logical], slot_of_logical / max(1, total - 1)


def tile_map_figure(panels: list[Panel], slot_domain: np.ndarray, grid: tuple[int, ...], num_domains: int):
    """The tile map as a figure, one axes per panel (plot_tile_map saves it)."""
    rows, cols = _tile_layout(grid)
    shown_r, shown_c = min(rows, _MAX_TILES_SHOWN[0]), min(cols, _MAX_TILES_SHOWN[1])
    total = int(np.prod(grid))
    base = plt.get_cmap("tab10" if num_domains <= 10 else "tab20")
    cmap = ListedColormap([base(i % base.N) for i in range(num_domains)])
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.6), dpi=110, squeeze=False)
    for ax, panel in zip(axes[0], panels):
        title, die_of_logical, order_of_logical = _die_and_order(panel, slot_domain, total)
        die = np.full(rows * cols, np.nan)
        order = np.full(rows * cols, np.nan)
        die[:total], order[:total] = die_of_logical, order_of_logical
        die = die.reshape(rows, cols)[:shown_r, :shown_c]
        order = order.reshape(rows, cols)[:shown_r, :shown_c]
        rgba = cmap(np.nan_to_num(die).astype(int))
        rgba[..., :3] = rgba[..., :3] + (1 - rgba[..., :3]) * 0.75 * np.nan_to_num(order)[..., None]
        rgba[np.isnan(die)] = (1, 1, 1, 1)
        ax.imshow(rgba, interpolation="nearest", aspect="auto")
        crop = "" if (shown_r, shown_c) == (rows, cols) else f" (top-left {shown_r}x{shown_c} of {rows}x{cols})"
        ax.set_title(f"{title}{crop}", fontsize=9)
        ax.set_xlabel("logical tile column" if len(grid) == 2 else f"logical id mod {cols}")
        ax.set_ylabel("logical tile row" if len(grid) == 2 else f"logical id // {cols}")
    handles = [plt.Rectangle((0, 0), 1, 1, color=cmap(i)) for i in range(num_domains)]
    fig.legend(handles, [f"die {i}" for i in range(num_domains)], loc="lower center",
               ncol=min(num_domains, 8), fontsize=8, frameon=False)
    fig.suptitle("Which die runs each logical tile (paler = launched later)", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    return fig


def plot_tile_map(panels: list[Panel], slot_domain: np.ndarray, grid: tuple[int, ...],
                  num_domains: int, path: Path) -> Path:
    """For each panel, colour each logical tile by the die that runs it; in a launch-order panel
    brightness falls with launch order, so early tiles are vivid and late ones pale."""
    fig = tile_map_figure(panels, slot_domain, grid, num_domains)
    fig.savefig(path)
    plt.close(fig)
    return path
