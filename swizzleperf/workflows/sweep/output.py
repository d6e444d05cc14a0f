"""The sweep's outputs: sweep.md, sweep.json and sweep.png (the terminal table is cli/sweep_command.py's)."""

from __future__ import annotations

from pathlib import Path

from swizzleperf.workflows.sweep.shapes import Shape, SweepCell, SweepReport


def columns(report: SweepReport) -> tuple[str, ...]:
    return ("batch", "heads", "K/V heads", "seq", "group", "line accesses (M)",
            *(f"{name} %" for name in report.mappings), "ceiling %", "best mapping", "note")


def hits(report: SweepReport, cell: SweepCell) -> list[str]:
    return [f"{cell.hit_pct[name]:.2f}" if name in cell.hit_pct else "" for name in report.mappings]


def _row(report: SweepReport, cell: SweepCell) -> list[str]:
    s = cell.shape
    ceiling = "" if cell.ceiling_pct is None else f"{cell.ceiling_pct:.2f}"
    note = f"skipped: {cell.reason}" if cell.status == "skipped" else \
        (cell.sampling.split(" simulated exactly")[0] if cell.sampling else "simulated whole")
    return [str(s.batch), str(s.heads), str(s.kv_heads), str(s.seq), str(s.group), f"{cell.line_accesses / 1e6:.2f}",
            *hits(report, cell), ceiling, " = ".join(cell.best_mappings()), note]


def base_text(report: SweepReport) -> str:
    fixed = {k: v for k, v in report.base_values.items() if k not in ("batch", "heads", "kv_heads", "seq")}
    return f"Other parameters from size '{report.base_size}': {', '.join(f'{k}={v}' for k, v in fixed.items())}"


def to_markdown(report: SweepReport) -> str:
    skipped = sum(c.status == "skipped" for c in report.cells)
    lines = [
        f"# Attention mappings on {report.hardware.name}: {report.kernel}",
        "",
        f"L2 read hit rates {report.label} (hardware: {report.hardware_reason}). {base_text(report)}. "
        f"The swizzled mappings pin one KV group (group = heads / K/V heads) per die. Shapes above "
        f"{report.access_cap / 1e6:g} M line accesses are skipped ({skipped} of {len(report.cells)}). "
        f"Wall time {report.total_seconds:.1f} s.",
        "",
        "| " + " | ".join(columns(report)) + " |",
        "|" + "|".join("---" for _ in columns(report)) + "|",
    ]
    lines += ["| " + " | ".join(_row(report, c)) + " |" for c in report.cells]
    return "\n".join(lines) + "\n\n![hit rate per mapping](sweep.png)\n"


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
