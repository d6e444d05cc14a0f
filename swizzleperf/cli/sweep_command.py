"""`swizzleperf sweep` in a terminal: a progress bar over the shapes, then the table."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from swizzleperf.cli.render import progress_bar
from swizzleperf.hardware.select import resolve as resolve_hardware
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.loop.executors import Executor, InProcess
from swizzleperf.workflows.sweep.output import base_text, hits, write_outputs
from swizzleperf.workflows.sweep.shapes import MAPPINGS, SweepGrid, SweepReport, mappings_for, run_sweep


def _short(name: str) -> str:
    return name.replace("naive ", "").replace("swizzled ", "sw. ").replace(" + sawtooth", " +saw")


def rich_table(report: SweepReport) -> Table:
    """The table for a terminal: short headers, hit rates only."""
    table = Table(title=f"{report.kernel} on {report.hardware.name}: L2 read hit rate, % ({report.label})",
                  title_justify="left", caption_justify="left",
                  caption=f"block-first, head-first: naive; sw.: swizzled, one KV group per die"
                          f"{'; +saw: with the sawtooth K/V order' if len(report.mappings) > len(MAPPINGS) else ''}. "
                          f"{base_text(report)}. "
                          f"Wall time {report.total_seconds:.1f} s.")
    for col in ("batch", "heads", "kv", "seq", "M acc.", *map(_short, report.mappings), "ceiling", "note"):
        table.add_column(col, justify="left" if col == "note" else "right")
    for cell in report.cells:
        s = cell.shape
        shown = hits(report, cell)
        ceiling = "" if cell.ceiling_pct is None else f"{cell.ceiling_pct:.2f}"
        note = "skipped: " + cell.reason if cell.reason else ""
        table.add_row(str(s.batch), str(s.heads), str(s.kv_heads), str(s.seq), f"{cell.line_accesses / 1e6:.3g}",
                      *shown, ceiling, note)
    return table


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
    progress = progress_bar(console)
    with progress:
        task = progress.add_task("sweep", total=None)

        def shown(what: str, done: int, total: int) -> None:
            progress.update(task, description=what, completed=done, total=total)

        report = run_sweep(kernel_path, hw, hw_reason, grid, access_cap, shown, like=like, executor=executor)
    console.print(rich_table(report))
    paths = write_outputs(report, out)
    console.print(f"wrote {', '.join(str(p) for p in paths)} (wall time {report.total_seconds:.1f} s)")
    return report
