"""Rich renderings shared by the CLI commands: reports, attempts, runs, specs."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.loop.history import History, slower_reason, time_cells
from swizzleperf.records.attempt import Attempt
from swizzleperf.records.report import BottleneckReport, ceiling_text

MiB = 1024 * 1024


class _CountColumn(ProgressColumn):
    """done/total, or nothing for a task without a total (a wait: the spinner and the time say it)."""

    def __init__(self, unit: str = ""):
        super().__init__()
        self.unit = f" {unit}" if unit else ""

    def render(self, task: Task) -> Text:
        return Text("" if task.total is None else f"{task.completed}/{task.total}{self.unit}")


def progress_bar(console: Console, unit: str = "") -> Progress:
    """The one progress display every long command uses: spinner, what, bar, count, time."""
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), _CountColumn(unit),
                    TimeElapsedColumn(), console=console, transient=True)


def capture_progress(progress: Progress) -> Callable[[int, int], None]:
    """A callback that shows trace capture (programs done of total) as a task of `progress`."""
    task: dict[str, TaskID] = {}

    def update(done: int, total: int) -> None:
        if "id" not in task:
            task["id"] = progress.add_task("capturing the memory trace (Triton interpreter)", total=total)
        progress.update(task["id"], completed=done, total=total)
    return update


# Below this many columns the full spec table folds its cells into slivers; the narrow one keeps
# the fields that decide placement (`hw --show NAME` prints every field).
_FULL_SPEC_WIDTH = 120


def spec_table(specs: list[tuple[str, HardwareSpec]], width: int = _FULL_SPEC_WIDTH) -> Table:
    """Hardware specs, a row each, with fewer columns on a terminal narrower than the full table."""
    narrow = width < _FULL_SPEC_WIDTH
    table = Table(title="Hardware", title_justify="left", caption_justify="left",
                  caption="line size, ways, set index, next level: swizzleperf hw --show NAME" if narrow else None)
    if narrow:  # short headers for the fields that decide placement
        headers = {"name": "name", "vendor": "vendor", "L2 domains": "dies", "CUs/domain": "CUs/die",
                   "L2/domain": "L2/die", "dispatch": "dispatch", "resident/CU": "per CU"}
    else:
        headers = {c: c for c in ("name", "vendor", "L2 domains", "CUs/domain", "L2/domain", "line", "ways",
                                  "dispatch", "resident/CU", "next level")}
    for col, header in headers.items():
        table.add_column(header, justify="left" if col in ("name", "vendor", "dispatch", "next level") else "right")
    for label, s in specs:
        if s.dispatch.policy != "round_robin":
            dispatch = "in order" + (", SM walk" if s.dispatch.walk else "")
        else:
            dispatch = "round-robin" + (f", chunk {s.dispatch.chunk}" if s.dispatch.chunk != 1 or not narrow else "")
        nxt = f"{s.next_level} {s.next_level_bytes // MiB} MB" if s.next_level and s.next_level_bytes else (s.next_level or "")
        cells = {"name": label, "vendor": s.vendor, "L2 domains": str(s.num_domains), "CUs/domain": str(s.cus_per_domain),
                 "L2/domain": f"{s.l2_bytes_per_domain / MiB:g} MB", "line": f"{s.line_bytes} B", "ways": str(s.l2_ways),
                 "dispatch": dispatch, "resident/CU": str(s.programs_per_cu), "next level": nxt}
        table.add_row(*(cells[col] for col in headers))
    return table


def report_table(report: BottleneckReport, baseline: BottleneckReport | None = None) -> Table:
    """Totals and per-die rows of one report, with the baseline beside it when given."""
    achievable = "" if report.achievable_pct is None else f", achievable {report.achievable_pct:.2f}%"
    title = (f"{report.kernel} (size {report.size}) on {report.hardware}: {report.metric_name} {report.hit_pct:.2f}% "
             f"{report.label}, {ceiling_text(report.ceiling_pct)}{achievable}")
    table = Table(title=title, title_justify="left")
    table.add_column("die", justify="right")
    table.add_column("programs", justify="right")
    table.add_column("accesses", justify="right")
    table.add_column("hit %", justify="right")
    if baseline is not None:
        table.add_column("baseline hit %", justify="right")
    table.add_column("unique lines", justify="right")
    if baseline is not None:
        table.add_column("baseline unique", justify="right")
    base = {d.domain: d for d in baseline.per_domain} if baseline else {}
    for d in report.per_domain:
        row = [str(d.domain), str(d.programs or ""), f"{d.accesses:,}", f"{d.hit_pct:.2f}"]
        if baseline is not None:
            row.append(f"{base[d.domain].hit_pct:.2f}" if d.domain in base else "")
        row.append(f"{d.unique_lines:,}" if d.unique_lines is not None else "")
        if baseline is not None:
            b = base.get(d.domain)
            row.append(f"{b.unique_lines:,}" if b and b.unique_lines is not None else "")
        table.add_row(*row)
    total = ["all", "", f"{report.accesses:,}" if report.accesses else "", f"{report.hit_pct:.2f}"]
    if baseline is not None:
        total.append(f"{baseline.hit_pct:.2f}")
    per_die_sum = sum(d.unique_lines or 0 for d in report.per_domain)
    total.append(f"{per_die_sum:,} (sum) / {report.unique_lines:,} unique" if report.unique_lines else "")
    if baseline is not None:
        total.append(f"{sum(d.unique_lines or 0 for d in baseline.per_domain):,} (sum)")
    table.add_row(*total, style="bold")
    if report.bytes_from_next_level is not None:
        table.caption = f"bytes from the next level: {report.bytes_from_next_level / MiB:,.1f} MiB; " + "; ".join(report.notes)
    return table


def verdict_text(attempt: Attempt, baseline: Attempt | None) -> Text:
    if attempt.accepted:
        slower = slower_reason(attempt, baseline)  # report.md has the whole sentence; a table cell, its head
        return Text(f"accepted; {slower.split(':')[0]}", style="yellow") if slower else Text("accepted", style="green")
    failure = attempt.failure
    if failure is None:
        return Text("incomplete", style="yellow")
    return Text(f"rejected at {failure.stage}: {(failure.detail.splitlines() or [''])[0][:90]}", style="red")


def attempts_table(history: History, title: str) -> Table:
    """Every attempt; under a measured profiler, each one's kernel time and speedup over the kernel's own order."""
    best, baseline = history.best(), history.baseline()
    timed = history.timed()
    table = Table(title=title, title_justify="left")
    columns = [("#", "right"), ("origin", "left"), ("family", "left"), ("L2 read hit %", "right")]
    columns += [("median ms", "right"), ("p20-p80 ms", "right"), ("speedup", "right")] if timed else []
    for col, justify in columns + [("s", "right"), ("verdict", "left")]:
        table.add_column(col, justify=justify)
    for a in history.attempts:
        hit = f"{a.report.hit_pct:.2f}" if a.report else ""
        style = "bold" if best is not None and a.iteration == best.iteration else None
        times = list(time_cells(a, baseline)) if timed else []
        table.add_row(str(a.iteration), a.origin, Text(a.family), hit, *times, f"{a.seconds:.1f}",
                      verdict_text(a, baseline), style=style)
    return table


def print_unclipped(console: Console, renderable) -> None:
    """Print at the terminal's width; piped or redirected, as wide as the content needs (rich assumes 80
    columns without a terminal, which cut a table's run ids to "2026…" in a file)."""
    if console.is_terminal:
        console.print(renderable)
        return
    from rich.measure import Measurement
    needed = Measurement.get(console, console.options.update_width(100_000), renderable).maximum
    pinned = console._width  # noqa: SLF001 -- rich keeps no public way to widen one print past the console
    console.width = max(needed, console.width)
    try:
        console.print(renderable)
    finally:
        console._width = pinned  # noqa: SLF001
