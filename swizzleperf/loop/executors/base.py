"""The executor protocol: evaluate a batch of candidates, hand back their attempts in proposal order.

An attempt is everything the loop does after a proposal: static checks, bijectivity, correctness
and the profile (`CandidateEvaluator.evaluate`). An executor may run the candidates of a batch
at once, anywhere, but it yields their attempts in the order they were proposed, so the loop
records exactly what a serial run records. `cancel()` starts no further candidate: iteration
then ends at the first candidate that did not run (the loop keeps the rest for a resume).

Executors also run plain functions over a list of calls (`map`, results in call order): `bench`
spreads its kernels and `sweep` its shapes that way. Whatever crosses to a worker is pickled:
the evaluator travels as its kernel's path and hash plus its profiler (whose simulator state,
the trace included, comes along), never as the kernel's imported module.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.records.attempt import Attempt, Stage
from swizzleperf.records.proposal import Proposal
from swizzleperf.untrusted.parse import echo

T = TypeVar("T")
StageCallback = Callable[[int, Proposal, Stage], None]


@dataclass(frozen=True)
class Candidate:
    """One proposal of a batch and the iteration it will be recorded as."""

    iteration: int
    proposal: Proposal


class Evaluation(Protocol):
    def __iter__(self) -> Iterator[Attempt]:
        """The batch's attempts in proposal order (fewer after cancel())."""
        ...

    def cancel(self) -> None:
        """Start no further candidate; the ones running finish."""
        ...


class Executor(Protocol):
    name: str  # "in-process", "process pool", "ray"
    workers: int

    def describe(self) -> str:
        """One line for the run's output: which executor, how many workers."""
        ...

    def evaluate(self, evaluator: CandidateEvaluator, batch: Sequence[Candidate],
                 on_stage: StageCallback | None = None) -> Evaluation:
        """Evaluate `batch`; `on_stage` hears of stages where they run in this process."""
        ...

    def map(self, fn: Callable[..., T], calls: Sequence[tuple], gpu: bool = False) -> Iterator[T]:
        """fn(*call) for each call, results in call order; `gpu`: each call needs a GPU of its own."""
        ...

    def close(self) -> None: ...


def uses_gpu(evaluator: CandidateEvaluator) -> bool:
    """Whether the evaluator's profiler measures on a GPU (ncu, rocprofv3): such profiles never share one."""
    return evaluator.profiler is not None and evaluator.profiler.measures


def placed_gpu() -> str | None:
    """The GPU an executor gave this process, as attempts and bench rows record it ("host GPU id"): the id
    in CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES, which the pool sets for its worker and Ray for a task
    with num_gpus=1. None where nothing narrowed this process's devices."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES")
    return f"{socket.gethostname()} GPU {listed}" if listed else None


def evaluate_candidate(evaluator: CandidateEvaluator, candidate: Candidate, on_stage: StageCallback | None = None,
                       device: str | None = None) -> Attempt:
    """The candidate's attempt; an exception evaluate() itself did not turn into one becomes one here.
    `device`: the GPU the candidate was placed on, recorded on the attempt."""
    proposal, iteration = candidate.proposal, candidate.iteration
    stage = (lambda s: on_stage(iteration, proposal, s)) if on_stage else None
    try:
        attempt = evaluator.evaluate(proposal, iteration, stage)
    except Exception as exc:  # noqa: BLE001 -- the loop survives anything one attempt does
        attempt = failed_attempt(evaluator, candidate,
                                 f"the attempt could not be evaluated: {type(exc).__name__}: {exc}")
    return attempt if device is None else attempt.model_copy(update={"device": device})


def failed_attempt(evaluator: CandidateEvaluator, candidate: Candidate, error: str) -> Attempt:
    """The candidate recorded as failed before its checks (its text kept), with `error` as the reason."""
    failed = candidate.proposal.model_copy(update={"extraction_error": echo(error, 1000)})
    return evaluator.evaluate(failed, candidate.iteration)


class OrderedFutures:
    """Futures' results in submission order; a future that was cancelled ends the iteration."""

    def __init__(self, futures: list[Future], result: Callable[[int, Future], Any]):
        self.futures = futures
        self._result = result  # (index, future) -> its value; may resubmit or turn an error into a value

    def __iter__(self) -> Iterator[Any]:
        for index, future in enumerate(self.futures):
            if future.cancelled():
                return
            yield self._result(index, future)

    def cancel(self) -> None:
        for future in self.futures:
            future.cancel()  # only those not yet running
