"""Every test runs as a user with an empty swizzle library and a private trace cache.

A library or trace cache in the developer's checkout or home must never change what a test
sees (a warm start from ./swizzles would change the first proposals of every optimize run).
Tests that want a library or a cache of their own set these variables themselves.
"""

import os

import pytest

# pytest-xdist's workers start with COLUMNS=80, and a rich Console built at import (swizzleperf.cli.main's)
# keeps the width it saw then; without it, each test's own COLUMNS (set where it reads whole lines) holds.
os.environ.pop("COLUMNS", None)
MAX_WORKERS = 4  # each worker imports torch, numba and triton (~1 GB); past 4 the slowest files decide


def pytest_xdist_auto_num_workers(config):
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cores))


@pytest.fixture(autouse=True)
def _fresh_user_state(tmp_path_factory, monkeypatch):
    state = tmp_path_factory.getbasetemp() / "user-state"
    monkeypatch.setenv("SWIZZLEPERF_LIBRARY", str(state / "no-library-here"))
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(state / "trace-cache"))
