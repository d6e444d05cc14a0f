"""`swizzleperf bench` in a terminal: a line per kernel as it finishes, a progress bar, the table."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, TaskID
from rich.table import Table

from swizzleperf.cli.render import progress_bar
from swizzleperf.loop.executors import Executor
from swizzleperf.workflows.bench.other_sizes import Status
from swizzleperf.workflows.bench.output import SHORT_COLUMNS, row_cells
from swizzleperf.workflows.bench.results import BenchReport, KernelResult, misses_cell
from swizzleperf.workflows.bench.suite import BenchRequest, BenchWatcher
from swizzleperf.workflows.bench.suite import run_bench as run_bench_quietly


class ConsoleWatcher(BenchWatcher):
    def __init__(self, console: Console):
        self.console = console
        self.progress: Progress = progress_bar(console, unit="kernels")
        self.task: TaskID | None = None

    def started(self, request: BenchRequest, report: BenchReport, out: Path, executor: Executor) -> None:
        self.console.print(
            f"[bold]swizzleperf bench[/] {len(request.kernels)} kernels on {report.hardware.name} "
            f"({report.hardware_reason}); profiler {report.profiler} ({report.profiler_reason}); proposer "
            f"{request.proposer}, {request.iterations} iterations; runs in {request.runs_dir}, results in {out}; "
            f"kernels: {executor.describe()}")
        self.progress.start()
        self.task = self.progress.add_task("bench", total=report.kernels_planned)

    def status(self, path: Path) -> Status:
        return lambda text: self.progress.update(self.task, description=f"{path.stem}: {text}")

    def kernel_done(self, result: KernelResult, report: BenchReport) -> None:
        self.progress.advance(self.task)
        self.console.print(progress_line(result), highlight=False)

    def finished(self, report: BenchReport, paths: list[Path]) -> None:
        self.progress.stop()
        self.console.print(rich_table(report, self.console.width))
        self.console.print(f"wrote {', '.join(str(p) for p in paths)}; total wall time {report.total_seconds:.1f} s")


def run_bench(request: BenchRequest, console: Console, executor: Executor | None = None) -> BenchReport:
    """The bench, shown in `console` as it goes."""
    watcher = ConsoleWatcher(console)
    try:
        return run_bench_quietly(request, executor, watcher)
    finally:
        watcher.progress.stop()


# Below this many columns the full table folds every cell into slivers; the narrow one keeps the
# numbers a glance needs (the sizes and other sizes are in the per-kernel lines above it and in bench.md).
_FULL_TABLE_WIDTH = 150
_NARROW_COLUMNS = ("kernel", "misses", "base %", "best %", "ceiling %", "speedup", "best family")


def rich_table(report: BenchReport, width: int = _FULL_TABLE_WIDTH) -> Table:
    """The table for a terminal `width` columns wide: COLUMNS with short headers, or fewer of them."""
    narrow = width < _FULL_TABLE_WIDTH
    columns = _NARROW_COLUMNS if narrow else SHORT_COLUMNS
    caption = ("other sizes: in the lines above and in bench.md. " if narrow else
               "iter, s: iterations and seconds to the best attempt. ")
    table = Table(title=f"swizzleperf bench on {report.hardware.name}: L2 read hit rates {report.label}",
                  title_justify="left", caption_justify="left",
                  caption=f"{caption}Total wall time {report.total_seconds:.1f} s.")
    for col in columns:
        table.add_column(col, justify="left" if col in ("kernel", "size", "source", "best family") or "other" in col
                         else "right", overflow="fold")
    for result in report.kernels:
        cells = dict(zip(SHORT_COLUMNS, row_cells(result, "\n")))
        table.add_row(*(escape(cells[col]) for col in columns))
    return table


def progress_line(result: KernelResult) -> str:
    if result.status == "failed":
        return f"[red]✗[/] {escape(result.kernel)}: {escape(result.error or '')}"
    misses = f"read misses {misses_cell(result.misses_ratio)} the kernel's own, " if result.misses_ratio else ""
    return (f"[green]✓[/] {escape(result.kernel)} ({result.size}): {misses}read hit {result.baseline_hit_pct:.2f}% -> "
            f"{result.best_hit_pct:.2f}% ({escape(result.best_family or '')}); other sizes: "
            f"{escape('; '.join(s.cell() for s in result.other_sizes)) or 'none'} "
            f"[dim]{result.run_seconds + result.generalise_seconds:.0f}s[/]")
