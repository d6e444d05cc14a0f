"""The commands on what runs left behind: runs list/show/diff, export, library, apply and cache."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.syntax import Syntax

from swizzleperf.cli.app import (
    HardwareOpt,
    LibraryOpt,
    ProfilerOpt,
    RunsDirOpt,
    _capture_progress,
    _progress,
    app,
    cache_app,
    console,
    library_app,
    runs_app,
)
from swizzleperf.errors import SwizzlePerfError
from swizzleperf.hardware.select import resolve as resolve_hardware
from swizzleperf.kernel.contract import find_kernel, load_kernel
from swizzleperf.records.report import ceiling_text

# --- runs ------------------------------------------------------------------------------------

@runs_app.command("list")
def runs_list(runs_dir: Path = RunsDirOpt) -> None:
    """One line per run: kernel, hardware, status, baseline -> best (ceiling)."""
    from rich.table import Table

    from swizzleperf.cli.render import print_unclipped
    from swizzleperf.loop.rundir import RunDir, list_runs
    table = Table(title=f"Runs in {runs_dir}", title_justify="left")
    for col in ("run", "kernel", "size", "hardware", "profiler", "proposer", "status", "baseline %", "best %", "ceiling %"):
        table.add_column(col)
    for path in list_runs(runs_dir):
        try:
            r = RunDir.open(path).record
        except SwizzlePerfError as exc:
            table.add_row(path.name, f"[red]{exc}[/]")
            continue
        fmt = lambda v: f"{v:.2f}" if v is not None else ""  # noqa: E731
        table.add_row(r.run_id, r.kernel.name, r.size, r.hardware.name, r.profiler, r.proposer, r.status,
                      fmt(r.baseline_hit_pct), fmt(r.best.hit_pct if r.best else None), fmt(r.ceiling_pct))
    print_unclipped(console, table)


@runs_app.command("show")
def runs_show(run_ref: str = typer.Argument("latest", metavar="RUN"), runs_dir: Path = RunsDirOpt) -> None:
    """The run's settings and its attempts table."""
    from swizzleperf.cli.render import attempts_table
    from swizzleperf.loop.rundir import RunDir, find_run
    from swizzleperf.records.report import bounds_text
    run = RunDir.open(find_run(run_ref, runs_dir))
    r = run.record
    console.print(f"[bold]{r.run_id}[/] {r.status} ({r.status_detail})\n  kernel {r.kernel.path} size {r.size}\n"
                  f"  hardware {r.hardware.name}; profiler {r.profiler}; proposer {r.proposer} seed {r.seed}\n"
                  f"  ranking: {r.ranking_rule}")
    history = run.load_history()
    console.print(attempts_table(history, "Attempts"))
    best = history.best()
    if best is not None:
        console.print(f"best: {best.family} (iteration {best.iteration}), {best.report.metric_name} "
                      f"{best.report.hit_pct:.2f}% {best.report.label}; {bounds_text(best.report)}")
    console.print(f"report: {run.path / 'report.md'}")


@runs_app.command("diff")
def runs_diff(run_ref: str = typer.Argument("latest", metavar="RUN"),
              attempt: Optional[int] = typer.Argument(None, help="iteration (default: the best)"),
              runs_dir: Path = RunsDirOpt) -> None:
    """The unified diff of an attempt's kernel against the original."""
    from swizzleperf.errors import RunError
    from swizzleperf.loop.rundir import RunDir, find_run
    history = RunDir.open(find_run(run_ref, runs_dir)).load_history()
    chosen = history.best() if attempt is None else next((a for a in history.attempts if a.iteration == attempt), None)
    if chosen is None:
        raise RunError(f"no attempt {attempt} in that run" if attempt is not None else "that run has no accepted attempt")
    console.print(f"iteration {chosen.iteration}: {chosen.family} ({chosen.verdict})")
    console.print(Syntax(chosen.diff or "(no diff: the original remap)", "diff", theme="ansi_dark"))


# --- library ---------------------------------------------------------------------------------

@app.command()
def export(run_ref: str = typer.Argument(..., metavar="RUN"),
           name: str = typer.Option(..., "--name", help="the remap's name in the library (a Python identifier)"),
           library: Optional[Path] = LibraryOpt,
           force: bool = typer.Option(False, "--force", help="replace an entry of the same name"),
           runs_dir: Path = RunsDirOpt) -> None:
    """Store the best remap of a run in the swizzle library."""
    from swizzleperf.workflows.export import export_run
    lib, entry, path = export_run(run_ref, name, library, runs_dir, replace=force)
    console.print(f"[green]✓[/] {name}: {escape(entry.summary())}\n  wrote {path}; use it with "
                  f"[bold]from {lib.root.name} import {name}[/] (with {lib.root.parent.resolve()} on sys.path)")


@library_app.command("list")
def library_list(library: Optional[Path] = LibraryOpt) -> None:
    """The library's entries."""
    from rich.table import Table

    from swizzleperf.remaps.library import Library
    lib = Library(library)
    table = Table(title=f"Swizzle library {lib.root}", title_justify="left")
    for col in ("name", "shape", "family", "found on", "hardware", "L2 hit %", "baseline %", "ceiling %", "numbers"):
        table.add_column(col)
    fmt = lambda v: "" if v is None else f"{v:.2f}"  # noqa: E731
    for e in lib.entries():
        table.add_row(e.name, f"{e.ndim}D", escape(e.family), f"{e.kernel} ({e.size})", e.hardware, fmt(e.hit_pct),
                      fmt(e.baseline_hit_pct), fmt(e.ceiling_pct), "sim (predicted)" if e.numbers_from == "sim"
                      else e.numbers_from)
    console.print(table)


@library_app.command("show")
def library_show(name: str, library: Optional[Path] = LibraryOpt) -> None:
    """One entry: where it came from, its numbers, where it is proven, its code."""
    from swizzleperf.remaps.library import Library
    e = Library(library).get(name)
    console.print(f"[bold]{e.name}[/]: {escape(e.summary())}\n  run {e.run_id} iteration {e.iteration}; "
                  f"signature ({', '.join(e.params)}); proven bijective on "
                  f"{', '.join('x'.join(map(str, g)) for g in e.proven_grids) or 'no recorded grids'} "
                  f"with {e.num_domains} dies")
    console.print(f"  {escape(e.proof or 'no proof for all grid sizes recorded (exported before the z3 prover)')}")
    console.print(Syntax(e.source, "python", theme="ansi_dark"))


@app.command()
def apply(name: str = typer.Argument(..., help="library entry (with --to: a run, or a library entry)"),
          kernel_path: Optional[str] = typer.Argument(None, metavar="[KERNEL]", help="a kernel file, or a name "
                                                      "under kernels/ (not with --to)"),
          to: Optional[Path] = typer.Option(None, "--to", help="write the remap into this original module, at its "
                                            "kernel's program-id site (a diff; --write applies it and re-runs the "
                                            "captured command)"),
          kernel_name: Optional[str] = typer.Option(None, "--kernel", help="with --to: the kernel to patch "
                                                    "(default: the one the run captured)"),
          runs_dir: Path = RunsDirOpt,
          library: Optional[Path] = LibraryOpt,
          hw_name: Optional[str] = HardwareOpt,
          size: Optional[str] = typer.Option(None, "--size", help="named size to profile (default: the kernel's)"),
          profiler_name: str = ProfilerOpt,
          out: Optional[Path] = typer.Option(None, "--out", help="where to write the patched copy "
                                                                 "(default runs/applied/KERNEL-NAME.py)"),
          write: bool = typer.Option(False, "--write", help="write the remap into KERNEL itself")) -> None:
    """Put a library remap into a kernel's hook, validate and profile it, compare with the kernel's own;
    or, with --to, write a run's best remap (or a library entry) into your original module."""
    if to is not None:
        from swizzleperf.cli.write_back_command import run_write_back
        raise typer.Exit(run_write_back(name, to, kernel_name, runs_dir, library, write, console))
    if kernel_path is None:
        raise typer.BadParameter("give the KERNEL to apply the entry to (or --to MODULE)")
    from swizzleperf.profilers.select import select_profiler
    from swizzleperf.remaps.library import Library
    from swizzleperf.workflows.apply import apply_entry, write_patched

    entry = Library(library).get(name)
    kernel = load_kernel(find_kernel(kernel_path))
    size = size or kernel.default_size
    spec, why = resolve_hardware(hw_name)
    with _progress() as progress:
        prof, prof_why = select_profiler(profiler_name, spec, progress=_capture_progress(progress))
        task = progress.add_task("validating", total=None)
        applied = apply_entry(entry, kernel, spec, prof, size,
                              on_stage=lambda stage: progress.update(task, description=f"{name}: {stage}"))
    console.print(f"{name} -> {kernel.path.name} on {spec.name} ({why}); profiler {prof.name} ({prof_why})")
    for note in applied.notes:
        console.print(f"  adapted: {escape(note)}")
    for stage in applied.attempt.stages:
        mark = "[green]✓[/]" if stage.ok else "[red]✗[/]"
        console.print(f"{mark} {stage.stage}: {escape(stage.detail)}")
    if not applied.attempt.accepted:
        console.print(f"[red]REJECTED[/]: {name} does not work in {kernel.path.name}; nothing written")
        raise typer.Exit(1)
    report, base = applied.attempt.report, applied.baseline
    console.print(f"{report.metric_name} {report.hit_pct:.2f}% with {name} vs {base.hit_pct:.2f}% with the kernel's own remap "
                  f"({report.hit_pct - base.hit_pct:+.2f} points, {report.label}); {ceiling_text(report.ceiling_pct)}",
                  highlight=False)
    if write:
        kernel.path.write_text(kernel.with_hook(applied.source))
        console.print(f"--write: wrote {name} into {kernel.path}")
    else:
        path = write_patched(kernel, applied, out or Path("runs") / "applied" / f"{kernel.name}-{name}.py")
        console.print(f"wrote the patched copy {path} ({kernel.path.name} is unchanged; --write changes it)")


# --- trace cache -----------------------------------------------------------------------------

@cache_app.callback(invoke_without_command=True)
def cache_default(ctx: typer.Context) -> None:
    """The simulator's trace cache ($SWIZZLEPERF_CACHE): bare `cache` shows it, as `cache info` does."""
    if ctx.invoked_subcommand is None:
        cache_info()


@cache_app.command("info")
def cache_info() -> None:
    """Where captured traces are kept: each with its size and last use, the total and the size bound."""
    from swizzleperf.sim.trace import cache as trace_cache
    for line in trace_cache.describe(trace_cache.default_cache_dir()):
        console.print(escape(line), highlight=False, soft_wrap=True)


@cache_app.command("clear")
def cache_clear(kernel: Optional[str] = typer.Option(None, "--kernel", help="only this kernel's traces")) -> None:
    """Delete captured traces (they are captured again when needed)."""
    from swizzleperf.sim.trace import cache as trace_cache
    root = trace_cache.default_cache_dir()
    console.print(f"deleted {trace_cache.clear(root, kernel)} traces from {root}")
