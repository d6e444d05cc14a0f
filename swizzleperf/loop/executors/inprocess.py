"""The in-process executor: one candidate after another in this process (the serial behaviour).

The only executor whose stages are seen live (`on_stage`); a process pool falls back to it for a
batch of one candidate, where starting workers would buy nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from swizzleperf.loop.executors.base import Candidate, StageCallback, evaluate_candidate
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.records.attempt import Attempt

T = TypeVar("T")


class SerialEvaluation:
    def __init__(self, evaluator: CandidateEvaluator, batch: Sequence[Candidate], on_stage: StageCallback | None):
        self.evaluator = evaluator
        self.batch = batch
        self.on_stage = on_stage
        self.cancelled = False

    def __iter__(self) -> Iterator[Attempt]:
        for candidate in self.batch:
            if self.cancelled:
                return
            yield evaluate_candidate(self.evaluator, candidate, self.on_stage)

    def cancel(self) -> None:
        self.cancelled = True


class InProcess:
    name = "in-process"
    workers = 1

    def describe(self) -> str:
        return "in-process (one candidate at a time)"

    def evaluate(self, evaluator: CandidateEvaluator, batch: Sequence[Candidate],
                 on_stage: StageCallback | None = None) -> SerialEvaluation:
        return SerialEvaluation(evaluator, batch, on_stage)

    def map(self, fn: Callable[..., T], calls: Sequence[tuple], gpu: bool = False) -> Iterator[T]:
        return (fn(*call) for call in calls)

    def close(self) -> None:
        pass
