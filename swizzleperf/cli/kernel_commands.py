"""The commands that take a kernel: hw, check, profile, optimize, bench, sweep and adopt."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from swizzleperf.cli.app import (
    AllowUnprovenOpt,
    BatchOpt,
    ContextTokensOpt,
    HardwareOpt,
    KernelArg,
    MaxTokensOpt,
    ProfilerOpt,
    ProposerOpt,
    RayOpt,
    RunsDirOpt,
    WorkersOpt,
    _capture_progress,
    _executor,
    _progress,
    _remap_from_file,
    app,
    console,
)
from swizzleperf.errors import ContractError, RemapRejected
from swizzleperf.hardware import detect as detection
from swizzleperf.hardware import presets
from swizzleperf.hardware.select import resolve as resolve_hardware
from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import KernelFile, find_kernel, load_kernel
from swizzleperf.records.report import ceiling_text

# --- hw --------------------------------------------------------------------------------------

@app.command()
def hw(show: Optional[str] = typer.Option(None, "--show", help="print one spec in full (preset or file)"),
       as_json: bool = typer.Option(False, "--json", help="print JSON (a valid spec file)")) -> None:
    """List hardware presets and the detected local GPU."""
    from swizzleperf.cli.render import spec_table
    if show is not None:
        spec, why = resolve_hardware(show)
        if as_json:
            print(spec.model_dump_json(indent=2))
            return
        console.print(spec_table([(spec.name, spec)], console.width))
        console.print(f"{spec.describe()}\nsource: {spec.source}\n({why})")
        return
    detected = detection.detect()
    rows = [(name, spec) for name, spec in presets.PRESETS.items()]
    if detected is not None:
        rows.insert(0, (f"{detected.name} (detected)", detected))
    if as_json:
        print(json.dumps({label: s.model_dump(mode="json") for label, s in rows}, indent=2))
        return
    console.print(spec_table(rows, console.width))
    if detected is None:
        console.print(f"No GPU detected: commands default to the [bold]{presets.DEFAULT_PRESET}[/] preset.")


# --- check -----------------------------------------------------------------------------------

@app.command()
def check(kernel_path: str = KernelArg,
          remap: Optional[Path] = typer.Option(None, "--remap", help="file with a remap to check instead of the kernel's own"),
          hw_name: Optional[str] = HardwareOpt,
          seeds: int = typer.Option(2, "--seeds", help="random inputs per size for the correctness check"),
          size: Optional[str] = typer.Option(None, "--size", help="check correctness at this size only (default: "
                                                                  "CHECK_SIZES on the CPU, every size on a GPU)"),
          seed: Optional[int] = typer.Option(None, "--seed", help="check correctness with this seed only "
                                                                  "(default: seeds 0 .. --seeds - 1)"),
          allow_unproven: bool = AllowUnprovenOpt,
          fp32: bool = typer.Option(False, "--fp32", help="on the CPU, run every float tensor as float32 (a "
                                    "dtype-generic kernel whose half-precision tl.dot the interpreter gets wrong)"))\
        -> None:
    """Check a kernel against the contract and a remap (static, bijectivity, correctness).

    Exit status: 0 the remap passed every check; 1 it was rejected (the line says at which stage and
    why); 2 it could not be checked (the kernel breaks the contract or its own code fails, a file
    cannot be read, or the checker itself failed).
    """
    from swizzleperf.loop.pipeline import CandidateEvaluator
    from swizzleperf.records.proposal import Proposal

    kernel = load_kernel(find_kernel(kernel_path))
    if fp32:
        kernel = dataclasses.replace(kernel, cpu_float32=True)
    spec, why = resolve_hardware(hw_name)
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
                                   correctness_sizes=[size] if size else None, allow_unproven=allow_unproven)
    proposal = Proposal(source=source, family=remap.name if remap else "original hook", origin="baseline")
    with console.status("checking") as status:
        attempt = evaluator.evaluate(proposal, 0, lambda stage: status.update(f"checking: {stage}"))
    _print_check(attempt, kernel, spec, own_remap=remap is None)


def _interpreter_limit(attempt, kernel: KernelFile) -> str | None:
    """Why a kernel that fails with its own remap on the CPU may well be fine on a GPU, or None."""
    from swizzleperf.kernel import interpreter_limits
    from swizzleperf.validation.correctness import default_device
    detail = next((s.detail for s in attempt.stages if s.stage == attempt.failure.stage), "")
    return interpreter_limits.own_failure(detail, kernel.source, kernel.path.name, kernel.cpu_float32) \
        if default_device() == "cpu" else None


def _print_check(attempt, kernel: KernelFile, spec: HardwareSpec, own_remap: bool) -> None:
    """Each stage on a line, then the verdict; exits 1 for a rejected remap, 2 for what could not be checked
    or a kernel that fails with its own remap."""
    for stage in attempt.stages:
        mark = "[green]✓[/]" if stage.ok else "[red]✗[/]"
        console.print(f"{mark} {stage.stage}: {escape(stage.detail)} [dim]({stage.seconds:.1f} s)[/]", soft_wrap=True)
    if attempt.failure is not None and attempt.failure.checker_failed:
        console.print(f"[red]COULD NOT CHECK[/] at {attempt.failure.stage}: the check itself failed, not the remap")
        raise typer.Exit(2)
    if kernel.loop_order is not None and not _check_own_loop_order(kernel, spec):
        console.print("[red]BROKEN KERNEL[/] at loop order: its loop-order hook skips or repeats blocks; fix the "
                      "kernel file")
        raise typer.Exit(2)
    if attempt.failure is not None and own_remap:
        limit = _interpreter_limit(attempt, kernel)
        if limit:
            console.print(f"[yellow]INTERPRETER LIMIT[/] at {attempt.failure.stage}: {escape(limit)}", soft_wrap=True)
        else:
            console.print(f"[red]BROKEN KERNEL[/] at {attempt.failure.stage}: the kernel fails with its own remap; "
                          f"fix the kernel file")
        raise typer.Exit(2)
    if attempt.failure is not None:
        console.print(f"[red]REJECTED[/] at {attempt.failure.stage}")
        raise typer.Exit(1)
    console.print("[green]OK[/]: the remap is safe to use with this kernel")


def _check_own_loop_order(kernel: KernelFile, spec: HardwareSpec) -> bool:
    """The kernel's LOOP_ORDER_HOOK: a permutation of the steps for every trip count (one line)."""
    from swizzleperf.validation.loop_order import check_kernel_loop_order
    try:
        report = check_kernel_loop_order(kernel.loop_order_source, kernel, spec.num_domains)
    except RemapRejected as exc:
        console.print(f"[red]✗[/] loop order {kernel.loop_order.name}(): {exc.stage}: {escape(exc.reason)}")
        return False
    mark = "[green]✓[/]" if report.ok else "[red]✗[/]"
    console.print(f"{mark} loop order {kernel.loop_order.name}(): {escape(report.message)}", soft_wrap=True)
    return report.ok


# --- profile ---------------------------------------------------------------------------------

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
    from swizzleperf.cli.render import report_table
    from swizzleperf.profilers.select import select_profiler

    kernel = load_kernel(find_kernel(kernel_path))
    size = size or kernel.default_size
    kernel.size(size)
    spec, why = resolve_hardware(hw_name)
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


def _validate_or_exit(kernel: KernelFile, spec: HardwareSpec, source: str) -> None:
    """Static checks and bijectivity (of its loop order too) before a candidate is profiled (correctness:
    use `check`)."""
    from swizzleperf.hardware.spec import hook_constants
    from swizzleperf.remaps.checked import check_candidate
    from swizzleperf.validation.bijectivity import bijectivity_grids, check_bijective
    from swizzleperf.validation.loop_order import check_kernel_loop_order
    checked = check_candidate(source, kernel)
    parts = checked.schedule
    grids = bijectivity_grids(kernel.hook, [kernel.grid(n) for n in kernel.sizes], spec.num_domains)
    result = check_bijective(parts.remap, kernel.hook, grids, hook_constants(kernel, spec), checked=checked.remap)
    if not result.ok:
        console.print(f"[red]✗ bijectivity[/]: {result.message}")
        raise typer.Exit(1)
    if parts.loop_order is not None:
        order = check_kernel_loop_order(parts.loop_order, kernel, spec.num_domains)
        if not order.ok:
            console.print(f"[red]✗ loop order[/]: {order.message}")
            raise typer.Exit(1)


def _write_tile_picture(kernel: KernelFile, spec, size: str, remap: Path | None, path: Path) -> None:
    from swizzleperf.hardware.dispatch import slot_domains
    from swizzleperf.hardware.spec import hook_constants
    from swizzleperf.loop.plots import plot_tile_map
    from swizzleperf.validation.bijectivity import logical_ids
    grid, consts = kernel.grid(size), hook_constants(kernel, spec)
    panels = [("original remap", logical_ids(kernel.hook_source, kernel.hook, grid, consts))]
    if remap is not None:
        panels.append((remap.name, logical_ids(kernel.remap_of(_remap_from_file(remap, kernel)), kernel.hook, grid,
                                               consts)))
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
             llm_timeout: Optional[float] = typer.Option(None, "--llm-timeout", help="seconds to wait for one model "
                                                         "answer (default 180; with --resume: the run's)"),
             llm_retries: int = typer.Option(3, "--llm-retries", help="retries of a transient model error"),
             context_tokens: Optional[int] = ContextTokensOpt,
             max_tokens: Optional[int] = MaxTokensOpt,
             library: Optional[Path] = typer.Option(None, "--library", help="warm-start from this swizzle library "
                                                   "(default: ./swizzles or $SWIZZLEPERF_LIBRARY when it exists)"),
             no_library: bool = typer.Option(False, "--no-library", help="do not warm-start from a library"),
             write: bool = typer.Option(False, "--write", help="write the best remap into KERNEL itself"),
             resume: Optional[str] = typer.Option(None, "--resume", help="continue a run (path, name or 'latest'); "
                                                  "KERNEL, if given, must be the run's kernel file"),
             allow_unproven: bool = AllowUnprovenOpt,
             workers: Optional[int] = WorkersOpt,
             ray: Optional[str] = RayOpt,
             batch: int = BatchOpt,
             runs_dir: Path = RunsDirOpt) -> None:
    """Search for a remap that raises the kernel's L2 hit rate; writes a run directory."""
    from swizzleperf.cli.optimize_command import run_optimize
    from swizzleperf.workflows.optimize import OptimizeRequest
    request = OptimizeRequest(kernel_path=kernel_path, hardware=hw_name, profiler=profiler_name,
                              proposer=proposer_name, iterations=iterations, patience=patience, size=size,
                              seed=seed, model=model, api_base=api_base, llm_mode=llm_mode, llm_timeout=llm_timeout,
                              llm_retries=llm_retries, context_tokens=context_tokens, max_tokens=max_tokens,
                              library=_library_for_warm_start(library, no_library),
                              write=write,
                              resume=resume, runs_dir=runs_dir, stop_at_ceiling=not keep_going, batch=batch,
                              workers=workers, ray=ray, allow_unproven=allow_unproven)
    run_optimize(request, console)


def _library_for_warm_start(library: Path | None, disabled: bool) -> Path | None:
    from swizzleperf.remaps.library import default_library_dir
    if disabled:
        return None
    chosen = library or default_library_dir()
    if library is not None and not library.is_dir():
        raise ContractError(f"--library {library} is not a directory")
    return chosen if chosen.is_dir() else None




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
    from swizzleperf.cli.bench_command import run_bench
    from swizzleperf.proposers.registry import resolve_proposer
    from swizzleperf.workflows.bench.suite import BenchRequest, find_kernels
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
    from swizzleperf.cli.sweep_command import run_sweep_command
    from swizzleperf.workflows.bench.suite import find_kernels
    from swizzleperf.workflows.sweep.shapes import SweepGrid
    try:
        grid = SweepGrid.parse(heads=heads, seq=seq, batch=batch, kv_heads=kv_heads)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    with _executor(workers, ray) as executor:
        run_sweep_command(find_kernels([kernel])[0], hw_name, grid, max_accesses, out, console, like=like,
                          executor=executor)


# --- adopt -----------------------------------------------------------------------------------

@app.command("adopt")
def adopt_command(module: Path = typer.Argument(..., metavar="MODULE", help="a stock Triton module (never edited)"),
                  output: Optional[Path] = typer.Option(None, "-o", "--output",
                                                        help="the kernel file to write (default kernels/<name>.py)"),
                  kernel: Optional[str] = typer.Option(None, "--kernel", help="the kernel to adopt when the module "
                                                       "has several (default: the first that a host function "
                                                       "launches)"),
                  force: bool = typer.Option(False, "--force", help="replace an existing output file")) -> None:
    """Write a kernel file that follows the contract from a stock Triton module.

    Exit status: 0 the file is complete; 1 it was written with TODOs (each named); 2 nothing written.
    """
    from swizzleperf.cli.adopt_command import run_adopt
    raise typer.Exit(run_adopt(module, output, force, console, kernel))
