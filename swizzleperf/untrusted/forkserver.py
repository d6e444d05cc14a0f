"""A warm parent for the confined children: the imports once, a fresh process for every call.

A child's imports are most of its cost: swizzleperf's correctness module with torch and Triton takes
2.3 s to import on a 2-core machine, where checking a small kernel on the interpreter takes 0.5 s
more. So each parent process keeps, per target module and environment, one fork server: a process
started exactly as a child is (`python -I`, the allowlisted environment, a session of its own) that
imports the target's module and the modules it lists in `CHILD_PRELOAD`, swizzleperf's own code and
its libraries, never a candidate, and then waits.

For each call the server forks. The fork closes every descriptor it inherited (it cannot reach the
server's pipes), starts its own session (the parent kills that group at the time limit), enters its
fresh working directory, sets its limits and cuts its network as a newly started child does (the
fork is single-threaded), reads its payload from a file and runs the target as the child entry point
does. The server reports the fork's pid and, once it has reaped it, its exit status, on its own
stdout, which no fork can write to. A fork's memory is its own copy: nothing it does reaches the
server or the next call.

Calls through one server are serialised; a process keeps a few servers, the least recently used
closed first. A server that does not start, or stops answering, is
dropped and the call runs in a child started afresh; `SWIZZLEPERF_FORK_SERVER=0` turns servers off.
The server exits when its parent closes its stdin, or dies.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from swizzleperf.untrusted import child
from swizzleperf.untrusted.isolation import Confinement, apply, command

PAYLOAD_FILE = "payload.json"
_START_S = 120.0  # to import torch and Triton on a loaded machine
_REAP_S = 30.0  # after the fork's group was killed
_MOST_SERVERS = 3  # an idle server with torch loaded holds about 350 MB: the least recently used goes
_SERVER = Confinement(memory_mb=None, cpu_s=None, file_mb=None, network=True, threads=None)


class ServerGone(Exception):
    """The server stopped answering: the caller runs the call in a child started afresh."""


class _Server:
    """The parent's end of one fork server."""

    def __init__(self, module: str, env: dict[str, str]):
        self._process = subprocess.Popen(command(_SERVER, "swizzleperf.untrusted.forkserver", module),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        self._buffer = b""
        self.lock = threading.Lock()
        if self._receive(time.monotonic() + _START_S).get("ready") is not True:
            raise ServerGone("the server did not start")

    def run(self, target: str, workdir: Path, confinement: Confinement, timeout: float) -> int:
        """The fork's exit status as Popen.returncode gives it; subprocess.TimeoutExpired past `timeout`."""
        request = {"target": target, "workdir": str(workdir), "confinement": asdict(confinement)}
        self._process.stdin.write((json.dumps(request) + "\n").encode())
        self._process.stdin.flush()
        pid = int(self._receive(time.monotonic() + _START_S)["pid"])
        try:
            return int(self._receive(time.monotonic() + timeout)["exit"])
        except BaseException:  # the time limit, a Ctrl-C: the fork's whole group goes, then the server reaps it
            _kill_group(pid)
            self._receive(time.monotonic() + _REAP_S)
            raise

    def _receive(self, deadline: float) -> dict:
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired("fork server", 0)
            with selectors.DefaultSelector() as selector:
                selector.register(self._process.stdout, selectors.EVENT_READ)
                if not selector.select(remaining):
                    continue
            chunk = os.read(self._process.stdout.fileno(), 65536)
            if not chunk:
                raise ServerGone("the server closed its pipe")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        try:
            self._process.stdin.close()
            self._process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self._process.kill()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


_servers: dict[tuple, _Server] = {}
_servers_lock = threading.Lock()


def enabled() -> bool:
    return os.environ.get("SWIZZLEPERF_FORK_SERVER", "1") != "0" and hasattr(os, "fork")


def run(target: str, workdir: Path, confinement: Confinement, env: dict[str, str], timeout: float) -> int:
    """Run `target` in a fork of the warm server for its module: the fork's exit status.

    Raises ServerGone where no server answers (the caller starts a child afresh) and
    subprocess.TimeoutExpired past `timeout`, the fork's group killed by then."""
    key = (target.split(":")[0], tuple(sorted(env.items())), sys.executable, os.getpid())
    with _servers_lock:
        server = _servers.pop(key, None)
        if server is None:
            try:
                server = _Server(key[0], env)
            except (ServerGone, subprocess.TimeoutExpired, OSError, ValueError) as exc:
                raise ServerGone(str(exc)) from None
        _servers[key] = server  # the most recently used last
        while len(_servers) > _MOST_SERVERS:
            _servers.pop(next(iter(_servers))).close()
    with server.lock:
        try:
            return server.run(target, workdir, confinement, timeout)
        except subprocess.TimeoutExpired:
            raise  # the fork was killed and reaped: the server is ready for the next call
        except (ServerGone, OSError, ValueError, KeyError, TypeError) as exc:
            _drop(key, server)
            raise ServerGone(str(exc)) from None
        except BaseException:
            _drop(key, server)  # its pipe may hold an answer nobody will read
            raise


def _drop(key: tuple, server: _Server) -> None:
    with _servers_lock:
        if _servers.get(key) is server:
            del _servers[key]
    server.close()


@atexit.register
def _close_all() -> None:
    """This process's servers (a process forked from this one inherits the table, not the servers)."""
    for key, server in list(_servers.items()):
        if key[-1] == os.getpid():
            server.close()
    _servers.clear()


# --- server side ------------------------------------------------------------------------------


def _send(message: dict) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def serve(module_name: str) -> None:
    module = importlib.import_module(module_name)
    for name in getattr(module, "CHILD_PRELOAD", ()):
        importlib.import_module(name)
    _send({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _forked(request)  # never returns
        _send({"pid": pid})
        _, status = os.waitpid(pid, 0)
        _send({"exit": os.waitstatus_to_exitcode(status)})


def _forked(request: dict) -> None:
    """The fork: cut off from the server, confined, then the target as a child runs it."""
    code = 1
    try:
        workdir = Path(request["workdir"])
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        errors = os.open(workdir / child.STDERR_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(errors, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.chdir(workdir)
        apply(Confinement(**request["confinement"]))
        child.main(request["target"], str(workdir), (workdir / PAYLOAD_FILE).read_text())
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 -- whatever it was, the fork ends here and the parent reads its files
        code = 1
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    serve(sys.argv[1])
