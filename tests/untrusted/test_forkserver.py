"""The fork server (swizzleperf.untrusted.forkserver): each call runs in a fresh fork of a warm server,
cut off from the server's pipes, and nothing one call does reaches the next; a time limit or a dead
server costs only that call's speed, never its verdict."""

import os
import signal

import pytest

from swizzleperf.errors import SandboxError
from swizzleperf.untrusted import forkserver
from swizzleperf.untrusted.isolation import Confinement
from swizzleperf.untrusted.sandbox import run_in_child


def probe(timeout: float = 60, confinement: Confinement | None = None, **payload) -> dict:
    return run_in_child("swizzleperf.untrusted.isolation:probe", payload, timeout, what="the probe",
                        confinement=confinement).value


@pytest.fixture(autouse=True)
def servers_on(monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_FORK_SERVER", "1")


def test_calls_fork_from_one_warm_server_and_leave_nothing_behind():
    first = probe(mark=True)
    second = probe()
    assert first["ppid"] == second["ppid"] != os.getpid()  # both forked by the same server, not by this process
    assert "SWIZZLEPERF_PROBE_MARK" not in second["env"]  # the first call's change stayed in its own fork
    assert first["cwd"] != second["cwd"]


def test_a_fork_holds_no_descriptor_of_the_server():
    fds = probe()["fds"]
    assert fds[:3] == [0, 1, 2] and len(fds) <= 4, fds  # stdin, stdout, stderr, and the listing's own


def test_a_fork_past_its_time_limit_is_killed_and_the_server_serves_the_next_call():
    server = probe()["ppid"]
    with pytest.raises(SandboxError) as info:
        probe(timeout=1, confinement=Confinement(cpu_s=60), spin_s=30)
    assert str(info.value) == "the probe ran past its time limit of 1 s and was killed"
    assert probe()["ppid"] == server


def test_a_process_keeps_few_servers_the_least_recently_used_closed():
    servers = []
    for n in range(forkserver._MOST_SERVERS + 1):  # the environment (here its thread counts) is part of the key
        servers.append(probe(confinement=Confinement(threads=n + 1))["ppid"])
    assert len(set(servers)) == len(servers) and len(forkserver._servers) == forkserver._MOST_SERVERS
    with pytest.raises(ProcessLookupError):
        os.kill(servers[0], 0)  # closed and reaped


def test_a_dead_server_costs_one_restart_not_the_call():
    server = probe()["ppid"]
    os.kill(server, signal.SIGKILL)
    seen = probe(allocate_mb=10)
    assert seen["isolated"] == 1 and seen["ppid"] == os.getpid()  # this call: a child started afresh
    assert probe()["ppid"] not in (server, os.getpid())  # the next: a new server
