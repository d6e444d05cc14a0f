"""Ray (`--ray auto|ADDRESS`): candidates as tasks on a Ray cluster, from one machine to many.

`auto` connects to the cluster Ray finds (RAY_ADDRESS, or one started here with `ray start`) and
otherwise starts one on this machine; an ADDRESS (`ray://head:10001`, `head:6379`) names one. A
process that already called `ray.init` (the tests: `ray.init(num_cpus=2)`) keeps its cluster.

The evaluator, with the simulator's state and so the kernel's trace, is put in the object store
once per run; every task reads it from there (numpy arrays without a copy on the same node). A
simulator candidate is a CPU task; a candidate profiled by ncu or rocprofv3 is a task with
`num_gpus=1`, so Ray never gives two of them one GPU, and its attempt records the node and the
GPU it ran on. A task whose worker dies is retried once by Ray, then recorded as failed with the
reason. After cancel() (the first Ctrl-C) the finished attempts are kept in order and the
unfinished tasks are cancelled: Ray cannot tell a queued task from a running one.

Ray is optional: `pip install 'swizzleperf[ray]'`. Nodes other than this one need swizzleperf
installed; the kernel file travels with the evaluator (its text), so they need no copy of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from swizzleperf.errors import SwizzlePerfError
from swizzleperf.loop.executors.base import (
    Candidate,
    StageCallback,
    evaluate_candidate,
    failed_attempt,
    placed_gpu,
    uses_gpu,
)
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.records.attempt import Attempt

T = TypeVar("T")
INSTALL_HINT = "pip install 'swizzleperf[ray]'"


class RayMissing(SwizzlePerfError):
    """--ray without Ray installed."""


def _ray():
    try:
        import ray
    except ImportError:
        raise RayMissing(f"--ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


def connect(address: str) -> Any:
    """The ray module, connected to the cluster `address` names ('auto': found or started here)."""
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=None if address == "auto" else address, log_to_driver=False,
                 configure_logging=False)
    return ray


def _evaluate_task(evaluator: CandidateEvaluator, candidate: Candidate, gpu: bool) -> Attempt:
    return evaluate_candidate(evaluator, candidate, device=placed_gpu() if gpu else None)


def _call_task(fn: Callable[..., T], call: tuple) -> T:
    return fn(*call)


class RayCluster:
    name = "ray"

    def __init__(self, address: str = "auto"):
        self.ray = connect(address)
        self.address = address
        self._stored: tuple[CandidateEvaluator, Any] | None = None  # the evaluator put in the object store

    @property
    def workers(self) -> int:
        return int(self.ray.cluster_resources().get("CPU", 1))

    def describe(self) -> str:
        resources = self.ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        return (f"ray ({self.address}), {int(resources.get('CPU', 0))} CPUs"
                + (f" and {gpus} GPUs" if gpus else "") + f" on {len(self.ray.nodes())} node(s)")

    def evaluate(self, evaluator: CandidateEvaluator, batch: Sequence[Candidate],
                 on_stage: StageCallback | None = None) -> "RayEvaluation":
        gpu = uses_gpu(evaluator)
        task = self.ray.remote(_evaluate_task).options(num_gpus=1 if gpu else 0, max_retries=1)
        stored = self._store(evaluator)
        return RayEvaluation(self.ray, evaluator, batch, [task.remote(stored, c, gpu) for c in batch])

    def map(self, fn: Callable[..., T], calls: Sequence[tuple], gpu: bool = False) -> Iterator[T]:
        task = self.ray.remote(_call_task).options(num_gpus=1 if gpu else 0, max_retries=1)
        refs = [task.remote(fn, call) for call in calls]
        return (self.ray.get(ref) for ref in refs)

    def close(self) -> None:
        self._stored = None  # the object store frees the evaluator; the cluster stays for its other users

    def _store(self, evaluator: CandidateEvaluator):
        if self._stored is None or self._stored[0] is not evaluator:
            self._stored = (evaluator, self.ray.put(evaluator))
        return self._stored[1]


class RayEvaluation:
    def __init__(self, ray, evaluator: CandidateEvaluator, batch: Sequence[Candidate], refs: list):
        self.ray, self.evaluator, self.batch, self.refs = ray, evaluator, list(batch), refs
        self.cancelled = False

    def __iter__(self) -> Iterator[Attempt]:
        for index, ref in enumerate(self.refs):
            if self.cancelled and not self.ray.wait([ref], timeout=0)[0]:
                for pending in self.refs[index:]:
                    self.ray.cancel(pending)
                return
            yield self._result(index, ref)

    def cancel(self) -> None:
        self.cancelled = True

    def _result(self, index: int, ref) -> Attempt:
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:
            what = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return failed_attempt(self.evaluator, self.batch[index],
                                  f"the Ray task evaluating it failed after a retry: {type(exc).__name__}: {what}")
