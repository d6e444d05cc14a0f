"""`swizzleperf optimize`: assemble hardware, profiler, proposer and run directory, then loop.

Kept apart from the loop itself (loop/driver.py) so the loop stays free of CLI concerns: this is
where settings are resolved, progress is rendered and the user's kernel is (only with --write)
rewritten.
"""

from __future__ import annotations

import shlex
import signal
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, TaskID

from swizzleperf.hardware.select import resolve as resolve_hardware
from swizzleperf.errors import ContractError
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.loop.history import History, within_noise
from swizzleperf.records.attempt import Attempt, Stage
from swizzleperf.kernel.contract import find_kernel, load_kernel
from swizzleperf.loop.executors import Candidate, Executor, make_executor
from swizzleperf.loop.driver import DEFAULT_BATCH, LoopSettings, Observer, finish, reopen_kernel, run_loop, start_run
from swizzleperf.profilers.select import select_profiler
from swizzleperf.proposers.base import Proposer
from swizzleperf.records.proposal import Proposal
from swizzleperf.proposers.registry import make_proposer, resolve_proposer
from swizzleperf.workflows.render import attempts_table, capture_progress, progress_bar
from swizzleperf.records.report import ceiling_text
from swizzleperf.loop.rundir import RunDir, find_run


@dataclass
class OptimizeRequest:
    kernel_path: str | Path | None  # a file, or a name under kernels/
    hardware: str | None
    profiler: str
    proposer: str | None  # None: search, or llm when a model is given
    iterations: int
    patience: int
    size: str | None
    seed: int
    model: str | None
    api_base: str | None
    llm_mode: str
    llm_timeout: float
    llm_retries: int
    library: Path | None
    write: bool
    resume: str | None
    runs_dir: Path
    stop_at_ceiling: bool = True
    batch: int = DEFAULT_BATCH  # proposals per snapshot of the history (a resumed run keeps its own)
    workers: int | None = 1  # None: one per core (default_workers()); 1: in this process
    ray: str | None = None  # 'auto' or a cluster address: evaluate on Ray instead


class ConsoleObserver(Observer):
    """One line per finished attempt, a live status line for the one in flight."""

    def __init__(self, console: Console, progress: Progress):
        self.console = console
        self.progress = progress
        self.task: TaskID = progress.add_task("starting", total=None)

    def proposing(self, iteration: int) -> None:
        self.progress.update(self.task, description=f"#{iteration} asking the proposer")

    def batch(self, candidates: list[Candidate], executor: str) -> None:
        self.progress.update(self.task, description=f"#{candidates[0].iteration}-#{candidates[-1].iteration}: "
                                                    f"{len(candidates)} candidates, {executor}")

    def stage(self, iteration: int, proposal: Proposal, stage: Stage) -> None:
        self.progress.update(self.task, description=f"#{iteration} {proposal.family}: {stage}")

    def attempt(self, attempt: Attempt, history: History) -> None:
        baseline = history.baseline()
        if attempt.accepted and attempt.report is not None:
            r = attempt.report
            base = f" (baseline {baseline.report.hit_pct:.2f}%" if baseline and baseline.report else " ("
            best = history.best()
            star = " [bold yellow]★ best[/]" if best is not None and best.iteration == attempt.iteration else ""
            self.console.print(
                f"[green]✓[/] #{attempt.iteration:<3} {escape(attempt.family):<38} {r.metric_name} [bold]{r.hit_pct:6.2f}%[/]"
                f"{base}, {ceiling_text(r.ceiling_pct)}){star} [dim]{attempt.seconds:.1f}s[/]", highlight=False)
        else:
            failure = attempt.failure
            why = escape(f"{failure.stage}: {(failure.detail.splitlines() or [''])[0][:100]}") if failure else "incomplete"
            self.console.print(f"[red]✗[/] #{attempt.iteration:<3} {escape(attempt.family):<38} rejected at {why}",
                               highlight=False)

    def stopped(self, reason: str) -> None:
        self.progress.update(self.task, description=f"stopped: {reason}")


def run_optimize(request: OptimizeRequest, console: Console) -> RunDir:
    executor = make_executor(request.workers, request.ray)  # first: a missing Ray stops before a run exists
    progress = progress_bar(console)
    on_capture = capture_progress(progress)
    if request.resume:
        run, kernel, profiler, proposer = _resumed_run(request, console, on_capture)
    else:
        run, kernel, profiler, proposer = _new_run(request, console, on_capture)
    rec = run.record
    evaluator = CandidateEvaluator(kernel, rec.hardware, profiler, rec.size)
    history = run.load_history()
    console.print(f"  evaluation: {executor.describe()}; up to {rec.batch} proposals per batch", highlight=False)
    with _CtrlC(console) as ctrl_c:
        try:
            _loop(run, kernel, proposer, evaluator, executor, history, ConsoleObserver(console, progress), progress,
                  ctrl_c)
            finish(run, kernel, history, profiler)
            _summarise(console, run, history)
        except KeyboardInterrupt:  # the second Ctrl-C: what is on disk is every finished attempt
            rec.status, rec.status_detail = "interrupted", "stopped at once by a second Ctrl-C"
            run.save()
            console.print(f"[yellow]interrupted[/]: {len(run.load_history())} finished attempts are kept in "
                          f"{run.path}; continue with: {resume_command(run)}", highlight=False, soft_wrap=True)
            raise typer.Exit(130) from None
        finally:
            executor.close()
    if ctrl_c.pressed:
        console.print(f"stopped by Ctrl-C; continue with: {resume_command(run)}", highlight=False, soft_wrap=True)
        if request.write:
            console.print("--write: not applied to a stopped run (best/ holds its best remap so far)")
        raise typer.Exit(130)
    if request.write:
        _write_kernel(console, run, kernel)
    return run


def _resumed_run(request: OptimizeRequest, console: Console, on_capture):
    run = RunDir.open(find_run(request.resume, request.runs_dir))
    kernel = reopen_kernel(run)
    rec = run.record
    profiler, _ = select_profiler(rec.profiler, rec.hardware, progress=on_capture)
    proposer = make_proposer(rec.proposer, rec.seed, rec.proposer_options)
    rec.status, rec.status_detail = "running", f"resumed with {len(run.load_history())} attempts on disk"
    run.save()
    console.print(f"resuming [bold]{rec.run_id}[/]: {rec.status_detail}")
    return run, kernel, profiler, proposer


def _new_run(request: OptimizeRequest, console: Console, on_capture):
    if request.kernel_path is None:
        raise ContractError("give a kernel file (e.g. kernels/softmax.py) or --resume RUN")
    kernel = load_kernel(find_kernel(request.kernel_path))
    size = request.size or kernel.default_size
    kernel.size(size)
    spec, hw_why = resolve_hardware(request.hardware)
    profiler, prof_why = select_profiler(request.profiler, spec, progress=on_capture)
    proposer_name, note = resolve_proposer(request.proposer, request.model)
    if note:
        console.print(note, highlight=False)
    options = {} if proposer_name == "search" else {
        "model": request.model, "api_base": request.api_base, "mode": request.llm_mode,
        "timeout_s": request.llm_timeout, "retries": request.llm_retries}
    if request.library is not None:
        options["library"] = str(request.library.resolve())
    proposer = make_proposer(proposer_name, request.seed, options)
    run = start_run(request.runs_dir, kernel, size, spec, hw_why, profiler, prof_why, proposer, options,
                    LoopSettings(iterations=request.iterations, patience=request.patience, seed=request.seed,
                                 stop_at_ceiling=request.stop_at_ceiling, batch=request.batch))
    console.print(f"[bold]swizzleperf optimize[/] {kernel.path.name} (size {size}) on {spec.name} ({hw_why})\n"
                  f"  profiler {profiler.name} ({prof_why}); proposer {proposer.name}; run {run.path}")
    return run, kernel, profiler, proposer


def resume_command(run: RunDir) -> str:
    """The exact command that continues `run`, for a shell in this directory."""
    return f"swizzleperf optimize --resume {shlex.quote(str(run.path))}"


class _CtrlC:
    """Ctrl-C once: the attempt in flight finishes, the loop stops and the run is summarised; twice:
    KeyboardInterrupt at once (every finished attempt is already on disk)."""

    def __init__(self, console: Console):
        self.console = console
        self.pressed = 0

    def __enter__(self) -> "_CtrlC":
        self.previous = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc_info) -> None:
        signal.signal(signal.SIGINT, self.previous)

    def _on_sigint(self, signum, frame) -> None:
        self.pressed += 1
        if self.pressed > 1:
            raise KeyboardInterrupt
        self.console.print("[yellow]stopping after the current attempt (Ctrl-C again to stop at once)[/]")


def _loop(run: RunDir, kernel, proposer: Proposer, evaluator: CandidateEvaluator, executor: Executor,
          history: History, observer: Observer, progress: Progress, ctrl_c: _CtrlC) -> None:
    """The loop, recording in run.json how it ended: stopped by Ctrl-C, or failed."""
    rec = run.record
    try:
        with progress:
            run_loop(run, kernel, proposer, evaluator, history, observer, should_stop=lambda: bool(ctrl_c.pressed),
                     executor=executor)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        rec.status, rec.status_detail = "failed", f"{type(exc).__name__}: {exc}"
        run.save()
        raise
    if ctrl_c.pressed:
        rec.status = "interrupted"  # the detail says "stopped by the user"
        run.save()


def _summarise(console: Console, run: RunDir, history: History) -> None:
    rec = run.record
    console.print(attempts_table(history, f"{rec.kernel.name} (size {rec.size}) on {rec.hardware.name}: "
                                          f"{len(history)} attempts ({rec.status_detail})"))
    best, baseline = history.best(), history.baseline()
    if best and baseline and best.report and baseline.report:
        label = best.report.label
        console.print(
            f"[bold]{best.report.metric_name} rate, {label}[/]: baseline {baseline.report.hit_pct:.2f}% -> best "
            f"[bold green]{best.report.hit_pct:.2f}%[/] ({best.family}, iteration {best.iteration}); "
            f"{ceiling_text(rec.ceiling_pct)}"
            + (f"; achievable {best.report.achievable_pct:.2f}%" if best.report.achievable_pct is not None else ""),
            highlight=False)
        if (noise := within_noise(best, baseline)) is not None:
            console.print(f"[yellow]{noise}[/]", highlight=False)
    if best and baseline and best.report and baseline.report and best.report.timing and baseline.report.timing:
        from swizzleperf.profilers.timer import speedup
        ratio, low, high = speedup(baseline.report.timing, best.report.timing)
        console.print(f"time (do_bench median, L2 {best.report.timing.l2_state}): {baseline.report.timing.median_ms:.4f} ms "
                      f"-> {best.report.timing.median_ms:.4f} ms, speedup {ratio:.3f}x (p20/p80 range {low:.3f}-{high:.3f})",
                      highlight=False)
    if rec.usage.calls:
        cost = f", ${rec.usage.cost_usd:.4f} as priced by LiteLLM" if rec.usage.cost_usd is not None else ""
        console.print(f"LLM: {rec.usage.calls} calls, {rec.usage.prompt_tokens} prompt + "
                      f"{rec.usage.completion_tokens} completion tokens{cost}")
    console.print(f"run: {run.path}  (report.md, best/remap.py, attempts.jsonl)")


def _write_kernel(console: Console, run: RunDir, kernel) -> None:
    best = run.best_dir / kernel.path.name
    history = run.load_history()
    if history.best() is None or history.best().origin == "baseline" or not best.exists():
        console.print("--write: the original remap is still the best; the kernel file is unchanged")
        return
    kernel.path.write_text(best.read_text())
    console.print(f"--write: wrote the best remap into {kernel.path}")
