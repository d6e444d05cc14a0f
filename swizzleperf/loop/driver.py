"""The optimization loop: propose -> validate -> profile -> record, until done.

The loop only knows the protocols (Proposer, Profiler) and the evaluator; everything a run
needs to continue after a kill is on disk in its run directory.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from swizzleperf.errors import ContextWindowError, LLMError, RunError, SwizzlePerfError
from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.loop import artifacts
from swizzleperf.loop.executors import Candidate, Executor, InProcess
from swizzleperf.loop.executors.base import evaluate_candidate
from swizzleperf.loop.history import RANKING_RULE, History
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.loop.reverify import verified_best
from swizzleperf.loop.rundir import RunDir
from swizzleperf.profilers.base import Profiler
from swizzleperf.proposers.base import ProposalContext, Proposer, propose_batch
from swizzleperf.records.attempt import Attempt, Stage
from swizzleperf.records.proposal import LLMUsage, Proposal
from swizzleperf.records.run import BestRef, KernelRef, PendingBatch, RunRecord
from swizzleperf.remaps.check import normalise
from swizzleperf.untrusted.parse import echo

DEFAULT_BATCH = 4  # proposals per snapshot of the history: the same on every machine, so runs are too


@dataclass
class LoopSettings:
    iterations: int = 24
    patience: int = 10  # stop after this many attempts without a better hit rate
    stop_at_ceiling: bool = True  # no remap can beat the ceiling: stop once the best reaches it
    seed: int = 0
    batch: int = 1  # proposals made from one snapshot of the history (and evaluated together)
    allow_unproven: bool = False  # accept remaps whose proof does not cover the declared grids (marked so)


class Observer:
    """What the loop tells the outside world; the CLI renders it with rich."""

    def stage(self, iteration: int, proposal: Proposal, stage: Stage) -> None: ...
    def proposing(self, iteration: int) -> None: ...
    def batch(self, candidates: list[Candidate], executor: str) -> None: ...
    def attempt(self, attempt: Attempt, history: History) -> None: ...
    def stopped(self, reason: str) -> None: ...

    # the proposers' ModelWatcher (proposers/base.py): model calls while they run, notes about the model
    def model_call(self, what: str) -> AbstractContextManager[None]:
        return nullcontext()

    def model_note(self, line: str) -> None: ...


def start_run(root: Path, kernel: KernelFile, size: str, hw: HardwareSpec, hw_reason: str,
              profiler: Profiler, profiler_reason: str, proposer: Proposer, proposer_options: dict,
              settings: LoopSettings) -> RunDir:
    return RunDir.create(root, dict(
        kernel=KernelRef(path=str(kernel.path), name=kernel.name, sha256=kernel.sha256), size=size,
        hardware=hw, hardware_reason=hw_reason, profiler=profiler.name, profiler_reason=profiler_reason,
        proposer=proposer.name, proposer_options=proposer_options, seed=settings.seed,
        iterations=settings.iterations, patience=settings.patience, stop_at_ceiling=settings.stop_at_ceiling,
        batch=settings.batch, allow_unproven=settings.allow_unproven, ranking_rule=RANKING_RULE))


def baseline_proposal(kernel: KernelFile) -> Proposal:
    return Proposal(source=kernel.hook_source, family="identity (original hook)", origin="baseline",
                    rationale="the kernel's own remap, profiled first as the baseline")


def run_loop(run: RunDir, kernel: KernelFile, proposer: Proposer, evaluator: CandidateEvaluator,
             history: History, observer: Observer, should_stop: Callable[[], bool] = lambda: False,
             executor: Executor | None = None) -> History:
    """Continue `run` from its history until the iteration budget, patience or the proposer runs out.

    Proposals come in batches of up to `run.record.batch`, all made from one snapshot of the history;
    `executor` evaluates a batch (default: in this process) and the attempts are recorded in proposal
    order, so the run is the same whichever executor evaluated it. A batch is kept in batch.json until
    its last attempt is recorded: a run stopped mid-batch resumes with the rest of it, as proposed.
    A stop condition met mid-batch (ceiling, patience) drops the rest of the batch.
    """
    executor = executor or InProcess()
    record = run.record
    if not history.attempts:
        baseline = Candidate(0, baseline_proposal(kernel))
        _record(run, history, evaluate_candidate(evaluator, baseline, observer.stage), observer)
        if history.baseline() is None:
            failure = history.attempts[0].failure
            raise RunError(f"the kernel's own remap failed {failure.stage if failure else 'profiling'}: "
                           f"{failure.detail if failure else ''} -- fix the kernel before optimizing it")
    while True:
        reason = (f"reached {record.iterations} iterations" if len(history) > record.iterations else
                  "stopped by the user" if should_stop() else _stop_reason(record, history))
        if reason is not None:
            break
        batch = _resumable_batch(run, len(history))
        if batch is None:
            batch, reason = _propose(run, kernel, proposer, evaluator, history, observer)
            if reason is not None:
                break
            if batch is None:  # the proposer failed: recorded as an attempt
                continue
        _evaluate_batch(run, batch, evaluator, executor, history, observer, should_stop)
    observer.stopped(reason)
    record.status, record.status_detail = "finished", reason
    run.save()
    return history


def _stop_reason(record: RunRecord, history: History) -> str | None:
    """Why the run should stop now (iterations, the ceiling, patience), or None."""
    if len(history) > record.iterations:
        return f"reached {record.iterations} iterations"
    best = history.best().report
    if record.stop_at_ceiling and best.at_ceiling:
        return (f"the best remap reaches the ceiling ({best.ceiling_pct:.2f}%): no remap can do better"
                if best.hit_pct >= best.ceiling_pct - 1e-9 else
                f"the best remap fetches only the compulsory misses ({best.unique_lines:,}): no remap can fetch "
                f"less (its hit rate stays below the ceiling because the L1 serves some reads)")
    since_best = _attempts_since_best(history)
    if since_best >= record.patience:
        return f"no better hit rate in the last {since_best} attempts (patience {record.patience})"
    return None


def _resumable_batch(run: RunDir, recorded: int) -> PendingBatch | None:
    """The batch a stop left part-evaluated (batch.json), or None; a finished or stale one is removed."""
    batch = run.pending_batch()
    if batch is not None and batch.start <= recorded < batch.start + len(batch.proposals):
        return batch
    run.clear_batch()
    return None


def _propose(run: RunDir, kernel: KernelFile, proposer: Proposer, evaluator: CandidateEvaluator,
             history: History, observer: Observer) -> tuple[PendingBatch | None, str | None]:
    """(the next batch, saved to batch.json, None) or (None, why the run stops); (None, None) when the
    proposer failed, which is recorded as an attempt."""
    record, iteration = run.record, len(history)
    observer.proposing(iteration)
    try:
        proposals = propose_batch(proposer, _context(kernel, record.hardware, history, iteration, observer),
                                  min(record.batch, record.iterations + 1 - iteration))
    except ContextWindowError:  # found before any model call: nothing to record, the run cannot go on
        raise
    except LLMError as exc:  # the client already retried: record it and stop rather than burn patience
        # tokens spent earlier in this proposal (the memory analysis) travel on the error
        _record(run, history, _failed_proposal(evaluator, proposer, iteration, exc, exc.usage,
                                               exc.memory_analysis, exc.llm_calls), observer)
        return None, f"the model failed: {exc}"
    except Exception as exc:  # noqa: BLE001 -- a bad answer (or a bug reading it) is an attempt, not the end
        _record(run, history, _failed_proposal(evaluator, proposer, iteration, exc), observer)
        return None, None
    if not proposals:
        return None, f"the {proposer.name} proposer has nothing new to try"
    batch = PendingBatch(start=iteration, proposals=proposals)
    run.save_batch(batch)
    return batch, None


def _evaluate_batch(run: RunDir, batch: PendingBatch, evaluator: CandidateEvaluator, executor: Executor,
                    history: History, observer: Observer, should_stop: Callable[[], bool]) -> None:
    """Evaluate what of `batch` is not recorded yet and record it in order. A stop condition met on the
    way (the ceiling, patience: the batch's size respects the iteration budget) drops the rest."""
    end = batch.start + len(batch.proposals)
    candidates = [Candidate(batch.start + i, p) for i, p in enumerate(batch.proposals)][len(history) - batch.start:]
    if len(candidates) > 1:
        observer.batch(candidates, executor.describe())
    evaluation = executor.evaluate(evaluator, candidates, observer.stage)
    for attempt in evaluation:
        _record(run, history, attempt, observer)
        if should_stop():
            evaluation.cancel()  # nothing new starts; what runs finishes and is recorded in order
        if len(history) < end and _stop_reason(run.record, history) is not None:
            evaluation.cancel()
            break
    else:
        if len(history) < end:
            return  # stopped by the user: batch.json keeps the rest for a resume
    run.clear_batch()


def _context(kernel: KernelFile, hardware: HardwareSpec, history: History, iteration: int,
             observer: Observer) -> ProposalContext:
    return ProposalContext(
        kernel=kernel, hardware=hardware, baseline=history.baseline().report, history=history.views(),
        every_attempt=tuple(history.all_views()), iteration=iteration,
        seen_sources=frozenset(_normalised(a.source) for a in history.attempts),
        best=history.best().report, memory_analysis=history.memory_analysis(), watcher=observer)


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
                     usage: LLMUsage | None = None, memory_analysis: str | None = None,
                     llm_calls: tuple = ()) -> Attempt:
    what = str(exc) if isinstance(exc, SwizzlePerfError) else f"{type(exc).__name__}: {exc}"
    proposal = Proposal(source="", family="(proposer failed)", origin=_origin(proposer),
                        extraction_error=echo(f"the proposer failed: {what}", 1000), usage=usage,
                        memory_analysis=memory_analysis, llm_calls=list(llm_calls))
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
    verified_best(run, kernel, history)  # an attempt read back from disk is checked again before best/ shows it
    lend = getattr(profiler, "achievable_assignment", None)
    artifacts.write_all(run, kernel, history, lend(kernel, run.record.size) if lend else None)

