"""The `swizzleperf` command line: hw, check, profile, optimize, runs.

Expected failures (SwizzlePerfError) become one red line and exit code 2, and so does anything
unexpected (an "internal error" line, never a traceback); set SWIZZLEPERF_DEBUG=1 or pass --debug
to see the traceback instead. `check` exits 1 for a rejected remap.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax

from swizzleperf import __version__, hardware, source_text, untrusted
from swizzleperf.errors import ContractError, RemapRejected, SwizzlePerfError
from swizzleperf.kernel import KernelFile, find_kernel, load_kernel
from swizzleperf.report import ceiling_text

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Find program-id remaps (swizzles) that raise the L2 hit rate of Triton kernels.")
runs_app = typer.Typer(no_args_is_help=True, help="Inspect run directories under runs/.")
app.add_typer(runs_app, name="runs")
library_app = typer.Typer(no_args_is_help=True, help="The swizzle library: remaps kept for reuse.")
app.add_typer(library_app, name="library")
cache_app = typer.Typer(help="The simulator's trace cache ($SWIZZLEPERF_CACHE).")
app.add_typer(cache_app, name="cache")
console = Console()
_state = {"debug": False}


def _debug_from_env() -> bool:
    return os.environ.get("SWIZZLEPERF_DEBUG", "") not in ("", "0")

HardwareOpt = typer.Option(None, "--hardware", "-H", help="preset name (see `swizzleperf hw`) or a .yaml/.json spec; "
                                                          "default: the local GPU, else mi300x")
ProfilerOpt = typer.Option("auto", "--profiler", help="auto (measured where a GPU and its profiler are here, "
                                                      "else simulated) | sim | ncu | rocprofv3")
ProposerOpt = typer.Option(None, "--proposer", help="search | llm | hybrid; default search, or llm with --model")
RunsDirOpt = typer.Option(Path("runs"), "--runs-dir", help="where run directories live")
LibraryOpt = typer.Option(None, "--library", help="library directory (default ./swizzles or $SWIZZLEPERF_LIBRARY)")
WorkersOpt = typer.Option(None, "--workers", min=1, help="evaluate on a local process pool of N workers (1: in this "
                                                        "process); default one per core, at most 8")
RayOpt = typer.Option(None, "--ray", metavar="auto|ADDRESS", help="evaluate on a Ray cluster: auto (found, or started "
                                                                  "here) or its address; needs swizzleperf[ray]")
BatchOpt = typer.Option(4, "--batch", min=1, help="proposals made from one snapshot of the history and evaluated "
                                                  "together (an LLM proposes one at a time; a resumed run keeps "
                                                  "its own)")  # = optimize.DEFAULT_BATCH, not imported: it is heavy


@app.callback()
def _main(debug: bool = typer.Option(False, "--debug", help="show tracebacks instead of one-line errors"),
          version: bool = typer.Option(False, "--version", help="print the version and exit")) -> None:
    if version:
        console.print(f"swizzleperf {__version__}")
        raise typer.Exit()
    _state["debug"] = debug or _debug_from_env()  # set on every invocation: one command's --debug is not the next's


def _remap_from_file(path: Path, kernel: KernelFile) -> str:
    """The hook-named function from a file (a bare remap, or a whole kernel file), cut from the text the
    parser read. Raises RemapRejected for a file no remap could be in (too large, not UTF-8, too deep)."""
    try:
        text = untrusted.read_file(path)
    except OSError as exc:
        raise ContractError(f"cannot read remap file {path}: {exc.strerror}") from exc
    tree = untrusted.parse(text, untrusted.MAX_FILE_BYTES)  # a syntax error is reported with the file's line
    hooks = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == kernel.hook.name]
    if len(hooks) > 1:
        lines = ", ".join(str(source_text.function_span(node)[0]) for node in hooks)
        raise RemapRejected("static", f"the file defines {kernel.hook.name}() {len(hooks)} times (lines {lines}); "
                                      f"keep one")
    return source_text.function_text(text, hooks[0]) if hooks else text


# --- hw --------------------------------------------------------------------------------------

@app.command()
def hw(show: Optional[str] = typer.Option(None, "--show", help="print one spec in full (preset or file)"),
       as_json: bool = typer.Option(False, "--json", help="print JSON (a valid spec file)")) -> None:
    """List hardware presets and the detected local GPU."""
    from swizzleperf.render import spec_table
    if show is not None:
        spec, why = hardware.resolve(show)
        if as_json:
            print(spec.model_dump_json(indent=2))
            return
        console.print(spec_table([(spec.name, spec)], console.width))
        console.print(f"{spec.describe()}\nsource: {spec.source}\n({why})")
        return
    detected = hardware.detect()
    rows = [(name, spec) for name, spec in hardware.PRESETS.items()]
    if detected is not None:
        rows.insert(0, (f"{detected.name} (detected)", detected))
    if as_json:
        print(json.dumps({label: s.model_dump(mode="json") for label, s in rows}, indent=2))
        return
    console.print(spec_table(rows, console.width))
    if detected is None:
        console.print(f"No GPU detected: commands default to the [bold]{hardware.DEFAULT_PRESET}[/] preset.")


# --- check -----------------------------------------------------------------------------------

KernelArg = typer.Argument(..., metavar="KERNEL", help="a kernel file, or a name under kernels/ (softmax)")


@app.command()
def check(kernel_path: str = KernelArg,
          remap: Optional[Path] = typer.Option(None, "--remap", help="file with a remap to check instead of the kernel's own"),
          hw_name: Optional[str] = HardwareOpt,
          seeds: int = typer.Option(2, "--seeds", help="random inputs per size for the correctness check"),
          size: Optional[str] = typer.Option(None, "--size", help="check correctness at this size only (default: "
                                                                  "CHECK_SIZES on the CPU, every size on a GPU)"),
          seed: Optional[int] = typer.Option(None, "--seed", help="check correctness with this seed only "
                                                                  "(default: seeds 0 .. --seeds - 1)")) -> None:
    """Check a kernel against the contract and a remap (static, bijectivity, correctness).

    Exit status: 0 the remap passed every check; 1 it was rejected (the line says at which stage and
    why); 2 it could not be checked (the kernel breaks the contract or its own code fails, a file
    cannot be read, or the checker itself failed).
    """
    from swizzleperf.evaluate import CandidateEvaluator
    from swizzleperf.proposers.base import Proposal

    kernel = load_kernel(find_kernel(kernel_path))
    spec, why = hardware.resolve(hw_name)
    console.print(f"[green]✓[/] contract: {kernel.path.name} hook [bold]{kernel.hook.render()}[/], "
                  f"sizes {', '.join(kernel.sizes)} (default {kernel.default_size})")
    console.print(f"  hardware {spec.name} ({why})")
    try:
        source = _remap_from_file(remap, kernel) if remap else kernel.hook_source
    except RemapRejected as exc:
        console.print(f"[red]✗[/] {exc.stage}: {escape(exc.reason)}")
        console.print(f"[red]REJECTED[/] at {exc.stage}")
        raise typer.Exit(1) from None
    if size is not None:
        kernel.size(size)  # an unknown size is an error naming the declared ones
    evaluator = CandidateEvaluator(kernel, spec, profiler=None, size=size or kernel.default_size,
                                   correctness_seeds=(seed,) if seed is not None else tuple(range(seeds)),
                                   correctness_sizes=[size] if size else None)
    proposal = Proposal(source=source, family=remap.name if remap else "original hook", origin="baseline")
    with console.status("checking") as status:
        attempt = evaluator.evaluate(proposal, 0, lambda stage: status.update(f"checking: {stage}"))
    for stage in attempt.stages:
        mark = "[green]✓[/]" if stage.ok else "[red]✗[/]"
        console.print(f"{mark} {stage.stage}: {escape(stage.detail)} [dim]({stage.seconds:.1f} s)[/]", soft_wrap=True)
    if attempt.failure is not None and attempt.failure.checker_failed:
        console.print(f"[red]COULD NOT CHECK[/] at {attempt.failure.stage}: the check itself failed, not the remap")
        raise typer.Exit(2)
    if attempt.failure is not None and remap is None:
        console.print(f"[red]BROKEN KERNEL[/] at {attempt.failure.stage}: the kernel fails with its own remap; fix "
                      f"the kernel file")
        raise typer.Exit(2)
    if attempt.failure is not None:
        console.print(f"[red]REJECTED[/] at {attempt.failure.stage}")
        raise typer.Exit(1)
    console.print("[green]OK[/]: the remap is safe to use with this kernel")


# --- profile ---------------------------------------------------------------------------------

def _progress():
    from swizzleperf.render import progress_bar
    return progress_bar(console)


def _capture_progress(progress):
    from swizzleperf.render import capture_progress
    return capture_progress(progress)


@app.command()
def profile(kernel_path: str = KernelArg,
            remap: Optional[Path] = typer.Option(None, "--remap", help="file with the remap to profile"),
            hw_name: Optional[str] = HardwareOpt,
            size: Optional[str] = typer.Option(None, "--size", help="named size (default: the kernel's)"),
            profiler_name: str = ProfilerOpt,
            json_out: Optional[Path] = typer.Option(None, "--json", help="also write the report(s) as JSON here"),
            picture: Optional[Path] = typer.Option(None, "--picture", help="write the tile-to-die PNG here"),
            set_index_spread: bool = typer.Option(False, "--set-index-spread",
                                                  help="simulator: also predict under every set-index function "
                                                       "(the hardware's is unpublished) to show the spread")) -> None:
    """Profile the kernel's own remap, and a candidate beside it with --remap."""
    from swizzleperf.profilers.select import select_profiler
    from swizzleperf.render import report_table

    kernel = load_kernel(find_kernel(kernel_path))
    size = size or kernel.default_size
    kernel.size(size)
    spec, why = hardware.resolve(hw_name)
    with _progress() as progress:
        prof, prof_why = select_profiler(profiler_name, spec, progress=_capture_progress(progress))
        console.print(f"hardware {spec.name} ({why}); profiler {prof.name} ({prof_why})")
        progress.add_task("profiling the original remap", total=None)
        baseline = prof.profile(kernel, kernel.hook_source, size)
        candidate = None
        if remap is not None:
            source = _remap_from_file(remap, kernel)
            _validate_or_exit(kernel, spec, source)
            candidate = prof.profile(kernel, source, size)
    console.print(report_table(baseline))
    if candidate is not None:
        console.print(report_table(candidate, baseline=baseline))
        console.print(f"{remap}: {candidate.metric_name} {candidate.hit_pct:.2f}% vs {baseline.hit_pct:.2f}% for the original "
                      f"({candidate.hit_pct - baseline.hit_pct:+.2f} points, {candidate.label}); "
                      f"{ceiling_text(candidate.ceiling_pct)}", highlight=False)
    if set_index_spread:
        _print_set_index_spread(kernel, spec, size, [("original", kernel.hook_source)] +
                                ([(remap.name, _remap_from_file(remap, kernel))] if remap else []))
    if json_out is not None:
        payload = {"original": baseline.model_dump(mode="json")}
        if candidate is not None:
            payload["candidate"] = candidate.model_dump(mode="json")
        json_out.write_text(json.dumps(payload, indent=2) + "\n")
        console.print(f"wrote {json_out}")
    if picture is not None:
        _write_tile_picture(kernel, spec, size, remap, picture)
        console.print(f"wrote {picture}")


def _print_set_index_spread(kernel: KernelFile, spec, size: str, remaps: list[tuple[str, str]]) -> None:
    """Predicted hit rate of each remap under each set-index function the geometry allows."""
    from rich.table import Table

    from swizzleperf.profilers.sim import SimProfiler
    table = Table(title="Predicted L2 hit % by set-index function (the hardware's is unpublished)",
                  title_justify="left")
    table.add_column("remap")
    schemes = ["hash", "modulo", "xor_fold"]
    for scheme in schemes:
        table.add_column(scheme + (" (preset)" if scheme == spec.set_index else ""), justify="right")
    rows: dict[str, list[str]] = {name: [] for name, _ in remaps}
    for scheme in schemes:
        if scheme == "xor_fold" and spec.sets_per_partition & (spec.sets_per_partition - 1):
            for name in rows:
                rows[name].append(f"n/a ({spec.sets_per_partition} sets: not a power of two)")
            continue
        prof = SimProfiler(spec.model_copy(update={"set_index": scheme}))
        for name, source in remaps:
            rows[name].append(f"{prof.profile(kernel, source, size).hit_pct:.2f}")
    for name, cells in rows.items():
        table.add_row(escape(name), *cells)
    console.print(table)


def _validate_or_exit(kernel: KernelFile, spec: hardware.HardwareSpec, source: str) -> None:
    """Static checks and bijectivity before a candidate is profiled (correctness: use `check`)."""
    from swizzleperf.bijectivity import bijectivity_grids, check_bijective
    from swizzleperf.evaluate import hook_constants
    from swizzleperf.remap import static_check
    static_check(source, kernel.hook)
    grids = bijectivity_grids(kernel.hook, [kernel.grid(n) for n in kernel.sizes], spec.num_domains)
    result = check_bijective(source, kernel.hook, grids, hook_constants(kernel, spec))
    if not result.ok:
        console.print(f"[red]✗ bijectivity[/]: {result.message}")
        raise typer.Exit(1)


def _write_tile_picture(kernel: KernelFile, spec, size: str, remap: Path | None, path: Path) -> None:
    from swizzleperf.evaluate import hook_constants
    from swizzleperf.plots import plot_tile_map
    from swizzleperf.bijectivity import logical_ids
    from swizzleperf.sim.dispatch import slot_domains
    grid, consts = kernel.grid(size), hook_constants(kernel, spec)
    panels = [("original remap", logical_ids(kernel.hook_source, kernel.hook, grid, consts))]
    if remap is not None:
        panels.append((remap.name, logical_ids(_remap_from_file(remap, kernel), kernel.hook, grid, consts)))
    plot_tile_map(panels, slot_domains(int(panels[0][1].size), spec), grid, spec.num_domains, path)


# --- optimize --------------------------------------------------------------------------------

@app.command()
def optimize(kernel_path: Optional[str] = typer.Argument(None, metavar="KERNEL",
                                                      help="a kernel file, or a name under kernels/ (softmax)"),
             hw_name: Optional[str] = HardwareOpt,
             profiler_name: str = ProfilerOpt,
             proposer_name: Optional[str] = ProposerOpt,
             iterations: int = typer.Option(24, "--iterations", "-n", min=1, help="attempts after the baseline"),
             patience: int = typer.Option(10, "--patience", min=1, help="stop after this many attempts without improvement"),
             keep_going: bool = typer.Option(False, "--keep-going", help="go on after the best remap reaches the "
                                                                           "ceiling (e.g. to rank equal hit rates by time)"),
             size: Optional[str] = typer.Option(None, "--size", help="named size to optimise for"),
             seed: int = typer.Option(0, "--seed", help="makes the search deterministic"),
             model: Optional[str] = typer.Option(None, "--model", help="LLM as provider/name, e.g. openai/gpt-4o"),
             api_base: Optional[str] = typer.Option(None, "--api-base", help="OpenAI-compatible endpoint for --model"),
             llm_mode: str = typer.Option("aware", "--llm-context", help="aware | unaware | overload (paper baselines)"),
             llm_timeout: float = typer.Option(180.0, "--llm-timeout", help="seconds to wait for one model answer"),
             llm_retries: int = typer.Option(3, "--llm-retries", help="retries of a transient model error"),
             library: Optional[Path] = typer.Option(None, "--library", help="warm-start from this swizzle library "
                                                   "(default: ./swizzles or $SWIZZLEPERF_LIBRARY when it exists)"),
             no_library: bool = typer.Option(False, "--no-library", help="do not warm-start from a library"),
             write: bool = typer.Option(False, "--write", help="write the best remap into KERNEL itself"),
             resume: Optional[str] = typer.Option(None, "--resume", help="continue a run (path, name or 'latest')"),
             workers: Optional[int] = WorkersOpt,
             ray: Optional[str] = RayOpt,
             batch: int = BatchOpt,
             runs_dir: Path = RunsDirOpt) -> None:
    """Search for a remap that raises the kernel's L2 hit rate; writes a run directory."""
    from swizzleperf.session import OptimizeRequest, run_optimize
    request = OptimizeRequest(kernel_path=kernel_path, hardware=hw_name, profiler=profiler_name,
                              proposer=proposer_name, iterations=iterations, patience=patience, size=size,
                              seed=seed, model=model, api_base=api_base, llm_mode=llm_mode, llm_timeout=llm_timeout,
                              llm_retries=llm_retries, library=_library_for_warm_start(library, no_library),
                              write=write,
                              resume=resume, runs_dir=runs_dir, stop_at_ceiling=not keep_going, batch=batch,
                              workers=workers, ray=ray)
    run_optimize(request, console)


def _library_for_warm_start(library: Path | None, disabled: bool) -> Path | None:
    from swizzleperf.library import default_library_dir
    if disabled:
        return None
    chosen = library or default_library_dir()
    if library is not None and not library.is_dir():
        raise ContractError(f"--library {library} is not a directory")
    return chosen if chosen.is_dir() else None


# --- runs ------------------------------------------------------------------------------------

@runs_app.command("list")
def runs_list(runs_dir: Path = RunsDirOpt) -> None:
    """One line per run: kernel, hardware, status, baseline -> best (ceiling)."""
    from rich.table import Table

    from swizzleperf.render import print_unclipped
    from swizzleperf.runs import RunDir, list_runs
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
    from swizzleperf.render import attempts_table
    from swizzleperf.report import bounds_text
    from swizzleperf.runs import RunDir, find_run
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
    from swizzleperf.runs import RunDir, find_run
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
    from swizzleperf.library import Library, entry_from_run
    from swizzleperf.runs import RunDir, find_run
    run = RunDir.open(find_run(run_ref, runs_dir))
    kernel_hook = load_kernel(run.record.kernel.path).hook if Path(run.record.kernel.path).exists() else None
    if kernel_hook is None:
        raise ContractError(f"the run's kernel {run.record.kernel.path} no longer exists; its hook signature is needed")
    lib = Library(library)
    entry = entry_from_run(run, name, kernel_hook)
    path = lib.add(entry, replace=force)
    console.print(f"[green]✓[/] {name}: {escape(entry.summary())}\n  wrote {path}; use it with "
                  f"[bold]from {lib.root.name} import {name}[/] (with {lib.root.parent.resolve()} on sys.path)")


@library_app.command("list")
def library_list(library: Optional[Path] = LibraryOpt) -> None:
    """The library's entries."""
    from rich.table import Table

    from swizzleperf.library import Library
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
    from swizzleperf.library import Library
    e = Library(library).get(name)
    console.print(f"[bold]{e.name}[/]: {escape(e.summary())}\n  run {e.run_id} iteration {e.iteration}; "
                  f"signature ({', '.join(e.params)}); proven bijective on "
                  f"{', '.join('x'.join(map(str, g)) for g in e.proven_grids) or 'no recorded grids'} "
                  f"with {e.num_domains} dies")
    console.print(f"  {escape(e.proof or 'no proof for all grid sizes recorded (exported before the z3 prover)')}")
    console.print(Syntax(e.source, "python", theme="ansi_dark"))


@app.command()
def apply(name: str = typer.Argument(..., help="library entry"),
          kernel_path: str = KernelArg,
          library: Optional[Path] = LibraryOpt,
          hw_name: Optional[str] = HardwareOpt,
          size: Optional[str] = typer.Option(None, "--size", help="named size to profile (default: the kernel's)"),
          profiler_name: str = ProfilerOpt,
          out: Optional[Path] = typer.Option(None, "--out", help="where to write the patched copy "
                                                                 "(default runs/applied/KERNEL-NAME.py)"),
          write: bool = typer.Option(False, "--write", help="write the remap into KERNEL itself")) -> None:
    """Put a library remap into a kernel's hook, validate and profile it, compare with the kernel's own."""
    from swizzleperf.apply import apply_entry, write_patched
    from swizzleperf.library import Library
    from swizzleperf.profilers.select import select_profiler

    entry = Library(library).get(name)
    kernel = load_kernel(find_kernel(kernel_path))
    size = size or kernel.default_size
    spec, why = hardware.resolve(hw_name)
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


@app.command()
def bench(kernels: Optional[list[str]] = typer.Argument(None, metavar="[KERNELS]...",
                                                       help="names under kernels/ or paths (default: all of kernels/)"),
          hw_name: Optional[str] = HardwareOpt,
          profiler_name: str = ProfilerOpt,
          proposer_name: Optional[str] = ProposerOpt,
          iterations: int = typer.Option(24, "--iterations", "-n", min=1, help="attempts after the baseline, per kernel"),
          seed: int = typer.Option(0, "--seed", help="makes the search deterministic"),
          model: Optional[str] = typer.Option(None, "--model", help="LLM for --proposer llm/hybrid, e.g. openai/gpt-4o"),
          api_base: Optional[str] = typer.Option(None, "--api-base", help="OpenAI-compatible endpoint for --model"),
          max_sim_accesses: int = typer.Option(60_000_000, "--max-sim-accesses", help="the simulator skips other sizes "
                                                 "whose trace would hold more line accesses"),
          other_sizes: Optional[str] = typer.Option(None, "--other-sizes", help="comma-separated sizes to re-check "
                                                      "each best remap at (a kernel lacking one skips it); default: "
                                                      "all the kernel declares"),
          out: Optional[Path] = typer.Option(None, "--out", help="where bench.md/.json/.png go "
                                                                 "(default RUNS_DIR/bench-<timestamp>/)"),
          workers: Optional[int] = WorkersOpt,
          ray: Optional[str] = RayOpt,
          batch: int = BatchOpt,
          runs_dir: Path = RunsDirOpt) -> None:
    """Optimize every kernel of a suite, then check each best remap at the kernel's other sizes."""
    from swizzleperf.bench import BenchRequest, find_kernels, run_bench
    from swizzleperf.session import resolve_proposer
    only = None if other_sizes is None else [name.strip() for name in other_sizes.split(",") if name.strip()]
    proposer, note = resolve_proposer(proposer_name, model)
    if note:
        console.print(note, highlight=False)
    request = BenchRequest(kernels=find_kernels(kernels or []), hardware=hw_name, profiler=profiler_name,
                           proposer=proposer, iterations=iterations, seed=seed, model=model, api_base=api_base,
                           runs_dir=runs_dir, out=out, max_sim_accesses=max_sim_accesses, other_sizes=only, batch=batch)
    with _executor(workers, ray) as executor:
        run_bench(request, console, executor)


@app.command()
def sweep(kernel: str = typer.Argument("attention", metavar="KERNEL", help="attention, or a kernel file like it"),
          hw_name: Optional[str] = HardwareOpt,
          heads: str = typer.Option("8,16,32,64,128", "--heads", help="query heads, comma-separated"),
          seq: str = typer.Option("1024,4096,16384", "--seq", help="sequence lengths, comma-separated"),
          batch: str = typer.Option("1,4", "--batch", help="batch sizes, comma-separated"),
          kv_heads: Optional[str] = typer.Option(None, "--kv-heads", help="K/V heads (GQA), comma-separated; "
                                                                          "default: as many as heads (MHA)"),
          max_accesses: int = typer.Option(60_000_000, "--max-accesses", help="skip shapes whose trace would hold more "
                                                                          "line accesses"),
          like: Optional[str] = typer.Option(None, "--like", help="declared size whose other parameters (head dim, "
                                                               "causal, dtype) every shape takes; default: the "
                                                               "kernel's default size"),
          out: Optional[Path] = typer.Option(None, "--out", help="default runs/sweep-<timestamp>/"),
          workers: Optional[int] = WorkersOpt,
          ray: Optional[str] = RayOpt) -> None:
    """Simulate the four attention mappings (block-first or head-first, naive or swizzled) over a grid of
    shapes: table and heatmaps."""
    from swizzleperf.bench import find_kernels
    from swizzleperf.sweep import SweepGrid, run_sweep_command
    try:
        grid = SweepGrid.parse(heads=heads, seq=seq, batch=batch, kv_heads=kv_heads)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    with _executor(workers, ray) as executor:
        run_sweep_command(find_kernels([kernel])[0], hw_name, grid, max_accesses, out, console, like=like,
                          executor=executor)


@contextmanager
def _executor(workers: int | None, ray: str | None):
    """The executor --workers/--ray ask for (by default a process pool on a machine with several cores),
    stopped when the command ends."""
    from swizzleperf.executors import make_executor
    executor = make_executor(workers, ray)
    try:
        yield executor
    finally:
        executor.close()


# --- trace cache -----------------------------------------------------------------------------

@cache_app.callback(invoke_without_command=True)
def cache_default(ctx: typer.Context) -> None:
    """The simulator's trace cache ($SWIZZLEPERF_CACHE): bare `cache` shows it, as `cache info` does."""
    if ctx.invoked_subcommand is None:
        cache_info()


@cache_app.command("info")
def cache_info() -> None:
    """Where captured traces are kept: each with its size and last use, the total and the size bound."""
    from swizzleperf.sim import trace_cache
    for line in trace_cache.describe(trace_cache.default_cache_dir()):
        console.print(escape(line), highlight=False, soft_wrap=True)


@cache_app.command("clear")
def cache_clear(kernel: Optional[str] = typer.Option(None, "--kernel", help="only this kernel's traces")) -> None:
    """Delete captured traces (they are captured again when needed)."""
    from swizzleperf.sim import trace_cache
    root = trace_cache.default_cache_dir()
    console.print(f"deleted {trace_cache.clear(root, kernel)} traces from {root}")


def main() -> None:
    _state["debug"] = _debug_from_env()
    try:
        app()
    except SwizzlePerfError as exc:
        if _state["debug"]:
            raise
        console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)  # one line in a pipe
        sys.exit(2)
    except Exception as exc:  # a bug, still one line and "could not" (2); --debug shows the traceback
        if _state["debug"]:
            raise
        what = untrusted.echo(f"{type(exc).__name__}: {exc}", 500)
        console.print(f"[red]internal error:[/] {escape(what)} (--debug shows the traceback)", highlight=False,
                      soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        sys.exit(130)


# --- adopt -----------------------------------------------------------------------------------

@app.command("adopt")
def adopt_command(module: Path = typer.Argument(..., metavar="MODULE", help="a stock Triton module (never edited)"),
                  output: Optional[Path] = typer.Option(None, "-o", "--output",
                                                        help="the kernel file to write (default kernels/<name>.py)"),
                  force: bool = typer.Option(False, "--force", help="replace an existing output file")) -> None:
    """Write a kernel file that follows the contract from a stock Triton module.

    Exit status: 0 the file is complete; 1 it was written with TODOs (each named); 2 nothing written.
    """
    from swizzleperf.adopt.command import run_adopt
    raise typer.Exit(run_adopt(module, output, force, console))
