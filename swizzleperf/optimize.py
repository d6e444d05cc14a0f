"""The optimization loop: propose -> validate -> profile -> record, until done.

The loop only knows the protocols (Proposer, Profiler) and the evaluator; everything a run
needs to continue after a kill is on disk in its run directory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from swizzleperf import artifacts
from swizzleperf.errors import LLMError, RunError, SwizzlePerfError
from swizzleperf.evaluate import CandidateEvaluator
from swizzleperf.hardware import HardwareSpec
from swizzleperf.history import RANKING_RULE, Attempt, History, Stage
from swizzleperf.kernel import KernelFile, load_kernel
from swizzleperf.profilers.base import Profiler
from swizzleperf.proposers.base import LLMUsage, Proposal, ProposalContext, Proposer
from swizzleperf.remap import normalise
from swizzleperf.runs import BestRef, KernelRef, RunDir
from swizzleperf.untrusted import echo


@dataclass
class LoopSettings:
    iterations: int = 24
    patience: int = 10  # stop after this many attempts without a better hit rate
    stop_at_ceiling: bool = True  # no remap can beat the ceiling: stop once the best reaches it
    seed: int = 0


class Observer:
    """What the loop tells the outside world; the CLI renders it with rich."""

    def stage(self, iteration: int, proposal: Proposal, stage: Stage) -> None: ...
    def proposing(self, iteration: int) -> None: ...
    def attempt(self, attempt: Attempt, history: History) -> None: ...
    def stopped(self, reason: str) -> None: ...


def start_run(root: Path, kernel: KernelFile, size: str, hw: HardwareSpec, hw_reason: str,
              profiler: Profiler, profiler_reason: str, proposer: Proposer, proposer_options: dict,
              settings: LoopSettings) -> RunDir:
    return RunDir.create(root, dict(
        kernel=KernelRef(path=str(kernel.path), name=kernel.name, sha256=kernel.sha256), size=size,
        hardware=hw, hardware_reason=hw_reason, profiler=profiler.name, profiler_reason=profiler_reason,
        proposer=proposer.name, proposer_options=proposer_options, seed=settings.seed,
        iterations=settings.iterations, patience=settings.patience, stop_at_ceiling=settings.stop_at_ceiling,
        ranking_rule=RANKING_RULE))


def reopen_kernel(run: RunDir) -> KernelFile:
    """The run's kernel, refusing to continue if the file changed since the run started."""
    kernel = load_kernel(run.record.kernel.path)
    if kernel.sha256 != run.record.kernel.sha256:
        raise RunError(f"{kernel.path} changed since run {run.record.run_id} started; start a new run instead "
                       f"of resuming (resuming would mix results of two different kernels)")
    return kernel


def baseline_proposal(kernel: KernelFile) -> Proposal:
    return Proposal(source=kernel.hook_source, family="identity (original hook)", origin="baseline",
                    rationale="the kernel's own remap, profiled first as the baseline")


def run_loop(run: RunDir, kernel: KernelFile, proposer: Proposer, evaluator: CandidateEvaluator,
             history: History, observer: Observer, should_stop: Callable[[], bool] = lambda: False) -> History:
    """Continue `run` from its history until the iteration budget, patience or the proposer runs out."""
    record = run.record
    if not history.attempts:
        _record(run, history, evaluator.evaluate(baseline_proposal(kernel), 0,
                                                 lambda s: observer.stage(0, baseline_proposal(kernel), s)), observer)
        if history.baseline() is None:
            failure = history.attempts[0].failure
            raise RunError(f"the kernel's own remap failed {failure.stage if failure else 'profiling'}: "
                           f"{failure.detail if failure else ''} -- fix the kernel before optimizing it")
    reason = f"reached {record.iterations} iterations"
    while len(history) <= record.iterations:
        if should_stop():
            reason = "stopped by the user"
            break
        best = history.best().report
        if record.stop_at_ceiling and best.at_ceiling:
            reason = (f"the best remap reaches the ceiling ({best.ceiling_pct:.2f}%): no remap can do better"
                      if best.hit_pct >= best.ceiling_pct - 1e-9 else
                      f"the best remap fetches only the compulsory misses ({best.unique_lines:,}): no remap can fetch "
                      f"less (its hit rate stays below the ceiling because the L1 serves some reads)")
            break
        since_best = _attempts_since_best(history)
        if since_best >= record.patience:
            reason = f"no better hit rate in the last {since_best} attempts (patience {record.patience})"
            break
        iteration = len(history)
        observer.proposing(iteration)
        try:
            proposal = proposer.propose(_context(kernel, record.hardware, history, iteration))
        except LLMError as exc:  # the client already retried: record it and stop rather than burn patience
            # tokens spent earlier in this proposal (the memory analysis) travel on the error
            _record(run, history, _failed_proposal(evaluator, proposer, iteration, exc, exc.usage,
                                                   exc.memory_analysis), observer)
            reason = f"the model failed: {exc}"
            break
        except Exception as exc:  # noqa: BLE001 -- a bad answer (or a bug reading it) is an attempt, not the end
            _record(run, history, _failed_proposal(evaluator, proposer, iteration, exc), observer)
            continue
        if proposal is None:
            reason = f"the {proposer.name} proposer has nothing new to try"
            break
        _record(run, history, _evaluated(evaluator, proposal, iteration, observer), observer)
    observer.stopped(reason)
    record.status, record.status_detail = "finished", reason
    run.save()
    return history


def _context(kernel: KernelFile, hardware: HardwareSpec, history: History, iteration: int) -> ProposalContext:
    return ProposalContext(
        kernel=kernel, hardware=hardware, baseline=history.baseline().report, history=history.views(),
        every_attempt=tuple(history.all_views()), iteration=iteration,
        seen_sources=frozenset(_normalised(a.source) for a in history.attempts),
        best=history.best().report, memory_analysis=history.memory_analysis())


def _evaluated(evaluator: CandidateEvaluator, proposal: Proposal, iteration: int, observer: Observer) -> Attempt:
    """The proposal's attempt; an exception evaluate() itself did not turn into one becomes one here."""
    try:
        return evaluator.evaluate(proposal, iteration, lambda s: observer.stage(iteration, proposal, s))
    except Exception as exc:  # noqa: BLE001 -- the loop survives anything one attempt does
        failed = _as_failed(proposal, f"the attempt could not be evaluated: {type(exc).__name__}: {exc}")
        return evaluator.evaluate(failed, iteration)


def _as_failed(proposal: Proposal, error: str) -> Proposal:
    """The proposal marked as failed before its checks, its text kept for the record."""
    return proposal.model_copy(update={"extraction_error": echo(error, 1000)})


def _record(run: RunDir, history: History, attempt: Attempt, observer: Observer) -> None:
    """Append to disk first: what is on disk is what survives a kill."""
    run.append_attempt(attempt)
    history.append(attempt)
    record = run.record
    baseline = history.baseline()
    if baseline is not None and baseline.report is not None:
        record.baseline_hit_pct = baseline.report.hit_pct
        record.ceiling_pct = baseline.report.ceiling_pct
    best = history.best()
    if best is not None and best.report is not None:
        record.best = BestRef(iteration=best.iteration, family=best.family, hit_pct=best.report.hit_pct,
                              source=best.report.source)
    if attempt.usage is not None:
        record.usage = record.usage + attempt.usage
    run.save()
    try:
        observer.attempt(attempt, history)
    except Exception:  # noqa: BLE001 -- a display problem must not end a run that is recorded on disk
        pass


def _failed_proposal(evaluator: CandidateEvaluator, proposer: Proposer, iteration: int, exc: Exception,
                     usage: LLMUsage | None = None, memory_analysis: str | None = None) -> Attempt:
    what = str(exc) if isinstance(exc, SwizzlePerfError) else f"{type(exc).__name__}: {exc}"
    proposal = Proposal(source="", family="(proposer failed)", origin=_origin(proposer),
                        extraction_error=echo(f"the proposer failed: {what}", 1000), usage=usage,
                        memory_analysis=memory_analysis)
    return evaluator.evaluate(proposal, iteration)


def _attempts_since_best(history: History) -> int:
    best = history.best()
    return 0 if best is None else len(history) - 1 - best.iteration


def _normalised(source: str) -> str:
    try:
        return normalise(source)
    except Exception:  # noqa: BLE001 -- SyntaxError, or anything else: an earlier attempt must never stop the run
        return source


def _origin(proposer: Proposer):
    return "llm" if proposer.name in ("llm", "hybrid") else "search"


def finish(run: RunDir, kernel: KernelFile, history: History, profiler: Profiler | None = None) -> None:
    """Write best/, report.md and the pictures; a profiler that found the achievable bound's assignment
    (the simulator's `achievable_assignment`) lends it to tiles.png."""
    lend = getattr(profiler, "achievable_assignment", None)
    artifacts.write_all(run, kernel, history, lend(kernel, run.record.size) if lend else None)

