"""Where candidates are evaluated: in this process, on a local process pool, or on a Ray cluster.

`make_executor` turns the command-line choice (`--workers N`, `--ray auto|ADDRESS`) into one; see
`base.py` for the protocol and the guarantee every executor keeps (attempts in proposal order).
"""

from __future__ import annotations

import os

from swizzleperf.errors import ContractError
from swizzleperf.loop.executors.base import Candidate, Evaluation, Executor
from swizzleperf.loop.executors.inprocess import InProcess

__all__ = ["Candidate", "Evaluation", "Executor", "InProcess", "default_workers", "make_executor"]

MAX_DEFAULT_WORKERS = 8  # each worker holds its own copy of the simulator's trace


def default_workers() -> int:
    """One worker per core this process may use, at most MAX_DEFAULT_WORKERS."""
    return max(1, min(len(os.sched_getaffinity(0)), MAX_DEFAULT_WORKERS))


def make_executor(workers: int | None = None, ray: str | None = None) -> Executor:
    """`ray` (auto or an address) picks Ray; else `workers` (None: default_workers()) > 1 a process pool."""
    if ray is not None:
        if workers is not None:
            raise ContractError("--workers and --ray exclude each other: Ray decides where candidates run")
        from swizzleperf.loop.executors.ray_cluster import RayCluster
        return RayCluster(ray)
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise ContractError(f"--workers {workers}: give 1 (in-process) or more")
    if workers == 1:
        return InProcess()
    from swizzleperf.loop.executors.pool import ProcessPool
    return ProcessPool(workers)
