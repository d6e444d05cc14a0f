"""The sweep's outputs: sweep.md, sweep.json, sweep.png and the terminal table; the CLI's entry point."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from swizzleperf.hardware.select import resolve as resolve_hardware
from swizzleperf.loop.executors import Executor, InProcess
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.workflows.sweep.shapes import (
    MAPPINGS,
    Shape,
    SweepCell,
    SweepGrid,
    SweepReport,
    mappings_for,
    run_sweep,
)


def columns(report: SweepReport) -> tuple[str, ...]:
    return ("batch", "heads", "K/V heads", "seq", "group", "line accesses (M)",
            *(f"{name} %" for name in report.mappings), "ceiling %", "best mapping", "note")


def _hits(report: SweepReport, cell: SweepCell) -> list[str]:
    return [f"{cell.hit_pct[name]:.2f}" if name in cell.hit_pct else "" for name in report.mappings]


def _row(report: SweepReport, cell: SweepCell) -> list[str]:
    s = cell.shape
    hits = _hits(report, cell)
    ceiling = "" if cell.ceiling_pct is None else f"{cell.ceiling_pct:.2f}"
    note = f"skipped: {cell.reason}" if cell.status == "skipped" else ""
    return [str(s.batch), str(s.heads), str(s.kv_heads), str(s.seq), str(s.group), f"{cell.line_accesses / 1e6:.2f}",
            *hits, ceiling, " = ".join(cell.best_mappings()), note]


def _base_text(report: SweepReport) -> str:
    fixed = {k: v for k, v in report.base_values.items() if k not in ("batch", "heads", "kv_heads", "seq")}
    return f"Other parameters from size '{report.base_size}': {', '.join(f'{k}={v}' for k, v in fixed.items())}"


def to_markdown(report: SweepReport) -> str:
    skipped = sum(c.status == "skipped" for c in report.cells)
    lines = [
        f"# Attention mappings on {report.hardware.name}: {report.kernel}",
        "",
        f"L2 read hit rates {report.label} (hardware: {report.hardware_reason}). {_base_text(report)}. "
        f"The swizzled mappings pin one KV group (group = heads / K/V heads) per die. Shapes above "
        f"{report.access_cap / 1e6:g} M line accesses are skipped ({skipped} of {len(report.cells)}). "
        f"Wall time {report.total_seconds:.1f} s.",
        "",
        "| " + " | ".join(columns(report)) + " |",
        "|" + "|".join("---" for _ in columns(report)) + "|",
    ]
    lines += ["| " + " | ".join(_row(report, c)) + " |" for c in report.cells]
    return "\n".join(lines) + "\n\n![hit rate per mapping](sweep.png)\n"


def _short(name: str) -> str:
    return name.replace("naive ", "").replace("swizzled ", "sw. ").replace(" + sawtooth", " +saw")


def rich_table(report: SweepReport) -> Table:
    """The table for a terminal: short headers, hit rates only."""
    table = Table(title=f"{report.kernel} on {report.hardware.name}: L2 read hit rate, % ({report.label})",
                  title_justify="left", caption_justify="left",
                  caption=f"block-first, head-first: naive; sw.: swizzled, one KV group per die"
                          f"{'; +saw: with the sawtooth K/V order' if len(report.mappings) > len(MAPPINGS) else ''}. "
                          f"{_base_text(report)}. "
                          f"Wall time {report.total_seconds:.1f} s.")
    for col in ("batch", "heads", "kv", "seq", "M acc.", *map(_short, report.mappings), "ceiling", "note"):
        table.add_column(col, justify="left" if col == "note" else "right")
    for cell in report.cells:
        s = cell.shape
        hits = _hits(report, cell)
        ceiling = "" if cell.ceiling_pct is None else f"{cell.ceiling_pct:.2f}"
        note = "skipped: " + cell.reason if cell.reason else ""
        table.add_row(str(s.batch), str(s.heads), str(s.kv_heads), str(s.seq), f"{cell.line_accesses / 1e6:.3g}",
                      *hits, ceiling, note)
    return table


def plot_heatmaps(report: SweepReport, path: Path) -> Path:
    """One heatmap per mapping and one of the ceiling (heads x seq), a row per (batch, K/V heads)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid = report.grid
    by_shape = {c.shape: c for c in report.cells}
    titles = [*report.mappings, "ceiling"]
    panels = grid.panels()
    width = 1.5 + len(titles) * max(1.9, 0.75 * len(grid.seq))
    height = 0.9 + len(panels) * (1.0 + 0.4 * len(grid.heads))
    fig, axes = plt.subplots(len(panels), len(titles), squeeze=False, dpi=110, figsize=(width, height),
                             layout="constrained")
    image = None
    for row, (batch, kv) in enumerate(panels):
        for col, title in enumerate(titles):
            ax = axes[row][col]
            values = np.full((len(grid.heads), len(grid.seq)), np.nan)
            for i, heads in enumerate(grid.heads):
                for j, seq in enumerate(grid.seq):
                    cell = by_shape[Shape(batch=batch, heads=heads, kv_heads=heads if kv is None else kv, seq=seq)]
                    value = cell.ceiling_pct if title == "ceiling" else cell.hit_pct.get(title)
                    values[i, j] = np.nan if value is None else value
                    ax.text(j, i, "skip" if value is None else f"{value:.0f}", ha="center", va="center", fontsize=7,
                            color="#555555" if value is None else ("white" if value < 60 else "black"))
            image = ax.imshow(np.ma.masked_invalid(values), vmin=0, vmax=100, cmap="viridis", aspect="auto")
            ax.set_facecolor("#dddddd")
            ax.set_xticks(range(len(grid.seq)), [str(s) for s in grid.seq], fontsize=7)
            ax.set_yticks(range(len(grid.heads)), [str(h) for h in grid.heads], fontsize=7)
            ax.set_title(title if row == 0 else "", fontsize=9)
            ax.set_xlabel("seq" if row == len(panels) - 1 else "", fontsize=8)
            ax.set_ylabel(f"heads\nbatch {batch}, {grid.kv_label(kv)}" if col == 0 else "", fontsize=7)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.9, label="L2 read hit rate, %")
    fig.suptitle(f"{report.kernel}: L2 read hit rate per mapping, {report.label}; grey: skipped", fontsize=10)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path


def write_outputs(report: SweepReport, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "sweep.md", out / "sweep.json"]
    paths[0].write_text(to_markdown(report))
    paths[1].write_text(report.model_dump_json(indent=2) + "\n")
    paths.append(plot_heatmaps(report, out / "sweep.png"))
    return paths


def run_sweep_command(kernel_path: Path, hardware_name: str | None, grid: SweepGrid, access_cap: int,
                      out: Path | None, console: Console, like: str | None = None,
                      executor: Executor | None = None) -> SweepReport:
    """The CLI's sweep: run, print the table, write sweep.md/.json/.png."""
    executor = executor or InProcess()
    hw, hw_reason = resolve_hardware(hardware_name)
    out = out or Path("runs") / f"sweep-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    mappings = mappings_for(load_kernel(kernel_path))
    console.print(f"[bold]swizzleperf sweep[/] {kernel_path} on {hw.name} ({hw_reason}): "
                  f"{len(grid.shapes())} shapes x {len(mappings)} mappings, simulator, cap {access_cap / 1e6:g} M "
                  f"line accesses; {executor.describe()}")
    report = run_sweep(kernel_path, hw, hw_reason, grid, access_cap, console, like=like, executor=executor)
    console.print(rich_table(report))
    paths = write_outputs(report, out)
    console.print(f"wrote {', '.join(str(p) for p in paths)} (wall time {report.total_seconds:.1f} s)")
    return report
