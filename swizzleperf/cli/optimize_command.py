"""`swizzleperf optimize` in a terminal: a line per attempt, a live status line, Ctrl-C once to stop
after the attempt in flight (twice: at once), and the run's summary. The work is workflows/optimize.py's."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, TaskID

from swizzleperf.cli.render import attempts_table, capture_progress, progress_bar
from swizzleperf.loop.artifacts import size_advice_for
from swizzleperf.loop.driver import Observer
from swizzleperf.loop.executors import Candidate, make_executor
from swizzleperf.loop.history import History, ranked_headline, within_noise
from swizzleperf.loop.rundir import RunDir
from swizzleperf.records.attempt import Attempt, Stage
from swizzleperf.records.proposal import Proposal
from swizzleperf.records.report import ceiling_text
from swizzleperf.workflows.optimize import OpenedRun, OptimizeRequest, drive, open_run, resume_command, write_best


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
            context = ([f"baseline {baseline.report.hit_pct:.2f}%"] if baseline and baseline.report else []) + \
                ([ceiling_text(r.ceiling_pct)] if r.ceiling_pct is not None else [])  # n/a is said once, at the end
            context_text = f" ({', '.join(context)})" if context else ""
            best = history.best()
            star = " [bold yellow]★ best[/]" if best is not None and best.iteration == attempt.iteration else ""
            self.console.print(
                f"[green]✓[/] #{attempt.iteration:<3} {escape(attempt.family):<38} {r.metric_name} [bold]{r.hit_pct:6.2f}%[/]"
                f"{context_text}{star} [dim]{attempt.seconds:.1f}s[/]",
                highlight=False)
        else:
            failure = attempt.failure
            why = escape(f"{failure.stage}: {(failure.detail.splitlines() or [''])[0][:100]}") if failure else "incomplete"
            self.console.print(f"[red]✗[/] #{attempt.iteration:<3} {escape(attempt.family):<38} rejected at {why}",
                               highlight=False)

    def stopped(self, reason: str) -> None:
        self.progress.update(self.task, description=f"stopped: {reason}")

    @contextmanager
    def model_call(self, what: str) -> Iterator[None]:
        """A spinner line of its own while the model answers: which model, which call, and the time it takes."""
        task = self.progress.add_task(f"waiting for {escape(what)}", total=None)
        try:
            yield
        finally:
            self.progress.remove_task(task)

    def model_note(self, line: str) -> None:
        self.console.print(f"  {escape(line)}", highlight=False, soft_wrap=True)


def run_optimize(request: OptimizeRequest, console: Console) -> RunDir:
    executor = make_executor(request.workers, request.ray)  # first: a missing Ray stops before a run exists
    progress = progress_bar(console)
    opened = open_run(request, capture_progress(progress), say=lambda line: console.print(line, highlight=False))
    _announce(console, opened)
    run, rec = opened.run, opened.run.record
    history = run.load_history()
    console.print(f"  evaluation: {executor.describe()}; up to {rec.batch} proposals per batch", highlight=False)
    with _CtrlC(console) as ctrl_c:
        try:
            with progress:
                drive(opened, executor, history, ConsoleObserver(console, progress), lambda: bool(ctrl_c.pressed))
            _summarise(console, run, history, opened.kernel)
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
        console.print(write_best(run, opened.kernel))
    return run


def _announce(console: Console, opened: OpenedRun) -> None:
    rec = opened.run.record
    if opened.resumed:
        console.print(f"resuming [bold]{rec.run_id}[/]: {rec.status_detail}")
        return
    console.print(f"[bold]swizzleperf optimize[/] {opened.kernel.path.name} (size {rec.size}) on {rec.hardware.name} "
                  f"({opened.hardware_reason})\n  profiler {opened.profiler.name} ({opened.profiler_reason}); "
                  f"proposer {opened.proposer.name}; run {opened.run.path}")
    advice, _ = size_advice_for(opened.kernel, rec.size, rec.hardware)
    if advice:
        console.print(f"  [yellow]{advice}[/]", highlight=False)


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


def _summarise(console: Console, run: RunDir, history: History, kernel) -> None:
    rec = run.record
    advice, _ = size_advice_for(kernel, rec.size, rec.hardware)
    console.print(attempts_table(history, f"{rec.kernel.name} (size {rec.size}) on {rec.hardware.name}: "
                                          f"{len(history)} attempts ({rec.status_detail})"))
    best, baseline = history.best(), history.baseline()
    if best and baseline and best.report and baseline.report:
        console.print(
            f"best: [bold green]{best.family}[/] (iteration {best.iteration}): [bold]{ranked_headline(best, baseline)}"
            f"[/]; {ceiling_text(rec.ceiling_pct)}"
            + (f"; achievable {best.report.achievable_pct:.2f}%" if best.report.achievable_pct is not None else ""),
            highlight=False)
        if (noise := within_noise(best, baseline)) is not None:
            console.print(f"[yellow]{noise}; recommendation: keep the kernel's own order[/]", highlight=False)
    if advice:
        console.print(f"[yellow]{advice}[/]", highlight=False)
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
