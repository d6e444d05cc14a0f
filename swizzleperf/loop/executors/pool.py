"""A local process pool (`--workers N`): the candidates of a batch evaluated side by side.

Workers are fresh interpreters ("spawn": the parent has numba and torch threads, which a fork
would copy mid-flight), started at the first batch of two or more candidates; a batch of one runs
in this process, where starting workers would buy nothing and its stages are shown live. Each
worker receives the evaluator once, when it starts (its simulator state, the trace included),
and then only (iteration, proposal) pairs.

With a GPU profiler (ncu, rocprofv3) each worker owns one GPU (CUDA_VISIBLE_DEVICES and
HIP_VISIBLE_DEVICES set before it imports anything that opens one), so there are at most as many
workers as GPUs and two profiles never share a GPU; the attempt records which GPU it ran on.

Workers ignore Ctrl-C (the parent decides: the first press lets the running candidates finish,
the second terminates the workers, whose sandbox children die with them). A worker that dies
mid-candidate breaks the pool: the candidate is run again alone in a fresh pool, and recorded as
failed, with the reason, if its worker dies again; the candidates after it are resubmitted.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

from swizzleperf.loop.executors.base import (
    Candidate,
    OrderedFutures,
    StageCallback,
    evaluate_candidate,
    failed_attempt,
    placed_gpu,
    uses_gpu,
)
from swizzleperf.loop.executors.inprocess import SerialEvaluation
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.records.attempt import Attempt

T = TypeVar("T")
_WORKER: dict = {"evaluator": None, "device": None, "busy": False}  # a worker's own state
UNWIND_SECONDS = 5.0  # how long a terminated worker's call may take to unwind before the worker ends anyway


def visible_gpus() -> list[str]:
    """The GPU ids this process may use, as CUDA_VISIBLE_DEVICES would name them to a child."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES")
    if listed:
        return [part.strip() for part in listed.split(",") if part.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def _start_worker(evaluator: bytes | None, gpus) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_terminate)
    sys.unraisablehook = _quiet_about_termination
    if gpus is not None:
        gpu = gpus.get()
        os.environ["CUDA_VISIBLE_DEVICES"] = os.environ["HIP_VISIBLE_DEVICES"] = gpu
        _WORKER["device"] = placed_gpu()
    _WORKER["evaluator"] = None if evaluator is None else pickle.loads(evaluator)


def _on_terminate(signum, frame) -> None:
    """Busy: unwind the call, which kills the sandbox child running for it (in a session of its own, it
    would outlive this worker), and end the worker however the unwinding goes (a call may turn the
    interrupt into an ordinary failure and return; back in the pool's loop the worker would wait for the
    call queue's lock, which an idle worker terminated while waiting for work may have taken with it,
    and close() would wait for it forever); idle: leave quietly."""
    if _WORKER["busy"]:
        _WORKER["busy"] = False
        threading.Timer(UNWIND_SECONDS, os._exit, (0,)).start()
        raise KeyboardInterrupt
    os._exit(0)


def _quiet_about_termination(unraisable) -> None:
    """_on_terminate's interrupt, raised while the worker is inside a callback from C (numba compiling, say), cannot
    unwind the call there; Python would print it as an "Exception ignored" traceback on the user's terminal. The
    worker ends anyway (the timer), so say nothing; anything else is reported as usual."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)


def _evaluate_in_worker(candidate: Candidate) -> Attempt:
    return _call_in_worker(evaluate_candidate, (_WORKER["evaluator"], candidate, None, _WORKER["device"]))


def _call_in_worker(fn: Callable[..., T], call: tuple) -> T:
    _WORKER["busy"] = True
    try:
        return fn(*call)
    except KeyboardInterrupt:  # _on_terminate: the pool is closing and the call has unwound; leave now
        os._exit(0)
    finally:
        _WORKER["busy"] = False


class ProcessPool:
    name = "process pool"

    def __init__(self, workers: int):
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._started_for: tuple[CandidateEvaluator | None, bool] | None = None  # (evaluator, gpu) of the workers

    def describe(self) -> str:
        return f"process pool, {self.workers} workers"

    def evaluate(self, evaluator: CandidateEvaluator, batch: Sequence[Candidate],
                 on_stage: StageCallback | None = None):
        if len(batch) < 2:
            return SerialEvaluation(evaluator, batch, on_stage)
        self._ensure(evaluator, uses_gpu(evaluator))
        return _PoolEvaluation(self, evaluator, batch)

    def map(self, fn: Callable[..., T], calls: Sequence[tuple], gpu: bool = False) -> Iterator[T]:
        self._ensure(None, gpu, keep_evaluator=True)
        futures = [self._pool.submit(_call_in_worker, fn, call) for call in calls]
        return iter(OrderedFutures(futures, lambda index, future: future.result()))

    def submit(self, candidate: Candidate) -> Future:
        return self._pool.submit(_evaluate_in_worker, candidate)

    def restart(self) -> None:
        """A fresh pool for the same evaluator (after a worker died)."""
        evaluator, gpu = self._started_for
        self.close()
        self._start(evaluator, gpu)

    def close(self) -> None:
        """Stop the workers at once, whatever they are running."""
        if self._pool is None:
            return
        # ProcessPoolExecutor would wait for running calls; Python 3.14's terminate_workers() does this
        for process in list((self._pool._processes or {}).values()):
            process.terminate()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool, self._started_for = None, None

    def _ensure(self, evaluator: CandidateEvaluator | None, gpu: bool, keep_evaluator: bool = False) -> None:
        """Workers holding `evaluator` (any, for a plain call) and pinned to GPUs when `gpu`."""
        if self._started_for is not None and self._started_for[1] == gpu and \
                (keep_evaluator or self._started_for[0] is evaluator):
            return
        self.close()
        self._start(evaluator, gpu)

    def _start(self, evaluator: CandidateEvaluator | None, gpu: bool) -> None:
        context = multiprocessing.get_context("spawn")
        workers, gpus, ids = self.workers, None, visible_gpus() if gpu else []
        if ids:  # (no GPU seen: the profiler will say so in each attempt)
            workers, gpus = min(workers, len(ids)), context.Queue()
            for gpu_id in ids[:workers]:
                gpus.put(gpu_id)
        blob = None if evaluator is None else pickle.dumps(evaluator)
        self._pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker, initargs=(blob, gpus))
        self._started_for = (evaluator, gpu)


class _PoolEvaluation:
    """A batch on the pool: results in order; a candidate whose worker died is retried once, alone."""

    def __init__(self, pool: ProcessPool, evaluator: CandidateEvaluator, batch: Sequence[Candidate]):
        self.pool, self.evaluator, self.batch = pool, evaluator, list(batch)
        self.ordered = OrderedFutures([pool.submit(c) for c in self.batch], self._result)

    def __iter__(self) -> Iterator[Attempt]:
        return iter(self.ordered)

    def cancel(self) -> None:
        self.ordered.cancel()

    def _result(self, index: int, future: Future) -> Attempt:
        try:
            return future.result()
        except BrokenProcessPool:
            pass
        candidate = self.batch[index]
        self.pool.restart()
        try:
            attempt = self.pool.submit(candidate).result()
        except BrokenProcessPool:
            self.pool.restart()
            attempt = failed_attempt(self.evaluator, candidate, "the worker evaluating it died twice (killed, or "
                                                                "crashed by this candidate): not retried again")
        futures = self.ordered.futures
        for later in range(index + 1, len(futures)):
            if not _kept(futures[later]):
                futures[later] = self.pool.submit(self.batch[later])
        return attempt


def _kept(future: Future) -> bool:
    """A later future that survives a broken pool: cancelled (by the user), or finished before the break."""
    return future.cancelled() or (future.done() and not isinstance(future.exception(), BrokenProcessPool))
