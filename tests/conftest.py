"""Every test runs as a user with an empty swizzle library and a private trace cache.

A library or trace cache in the developer's checkout or home must never change what a test
sees (a warm start from ./swizzles would change the first proposals of every optimize run).
Tests that want a library or a cache of their own set these variables themselves.
"""

import pytest


@pytest.fixture(autouse=True)
def _fresh_user_state(tmp_path_factory, monkeypatch):
    state = tmp_path_factory.getbasetemp() / "user-state"
    monkeypatch.setenv("SWIZZLEPERF_LIBRARY", str(state / "no-library-here"))
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(state / "trace-cache"))
