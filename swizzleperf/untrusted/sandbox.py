"""Run a function in a confined child Python process with a time limit.

Candidate remaps are untrusted: they are only ever evaluated or compiled in a child, started
as `swizzleperf.untrusted.isolation` describes (isolated interpreter, fresh working directory, allowlisted
environment, resource limits), and nothing the child sends back is unpickled. The parent sends
a JSON payload; the child answers with JSON and may leave numpy arrays (`.npy`, loaded with
allow_pickle=False) in its private directory, which is also its working directory.

Every failure is one line: a crash, an exception, a limit or the time limit becomes a
SandboxError saying which; a child that could not even start its function (an installation
problem, not the candidate's doing) raises ChildSetupError, a SandboxError.

The child's side is swizzleperf.untrusted.child; a call runs in a fork of a warm server that has done
the imports (swizzleperf.untrusted.forkserver) where one answers, else in a child started afresh.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from swizzleperf.errors import ChildSetupError, SandboxError
from swizzleperf.untrusted import forkserver
from swizzleperf.untrusted.child import ERROR_FILE, OUT_OF_MEMORY, RESULT_FILE, STARTED_FILE, STDERR_FILE
from swizzleperf.untrusted.isolation import Confinement, child_env, command
from swizzleperf.untrusted.parse import echo

_STDERR_TAIL_BYTES = 4096


@dataclass
class ChildResult:
    value: dict
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    stderr: str = ""


def default_confinement(timeout: float) -> Confinement:
    """Limits for a child that may use every core (torch, a GPU compiler): CPU time scales with them."""
    return Confinement(cpu_s=timeout * (os.cpu_count() or 1) + 10)


def run_in_child(target: str, payload: dict, timeout: float, env: dict[str, str] | None = None,
                 what: str = "child process", confinement: Confinement | None = None) -> ChildResult:
    """Call `target` ("module:function") in a fresh confined interpreter; raise SandboxError on failure."""
    confinement = confinement or default_confinement(timeout)
    with tempfile.TemporaryDirectory(prefix="swizzleperf-sandbox-") as tmp:
        workdir = Path(tmp)
        try:
            returncode = _run(target, payload, workdir, timeout, child_env(confinement, env), confinement)
        except subprocess.TimeoutExpired:
            raise SandboxError(f"{what} ran past its time limit of {timeout:g} s and was killed") from None
        stderr_tail = _tail(workdir / STDERR_FILE)
        result_path = workdir / RESULT_FILE
        if returncode != 0 or not result_path.exists():
            raise _failure(what, returncode, workdir, stderr_tail, confinement)
        try:
            value = json.loads(result_path.read_text())
            arrays = {p.stem: np.load(p, allow_pickle=False) for p in workdir.glob("*.npy")}
        except (ValueError, OSError) as exc:
            raise SandboxError(f"{what} returned an unreadable result ({echo(str(exc))})") from None
        return ChildResult(value=value, arrays=arrays, stderr=stderr_tail)


def _run(target: str, payload: dict, workdir: Path, timeout: float, env: dict[str, str],
         confinement: Confinement) -> int:
    """The child's exit status: a fork of the warm server for its module where one answers, else a
    child started afresh. subprocess.TimeoutExpired past `timeout`, the child's whole group killed."""
    if forkserver.enabled():
        (workdir / forkserver.PAYLOAD_FILE).write_text(json.dumps(payload))
        try:
            return forkserver.run(target, workdir, confinement, env, timeout)
        except forkserver.ServerGone:  # whatever a fork left here goes before a child starts afresh
            for path in workdir.iterdir():
                if path.name != forkserver.PAYLOAD_FILE:
                    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    with open(workdir / STDERR_FILE, "wb") as stderr:
        proc = subprocess.Popen(command(confinement, "swizzleperf.untrusted.child", target, str(workdir)), cwd=workdir,
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr, env=env,
                                start_new_session=True)
        try:
            proc.communicate(json.dumps(payload).encode(), timeout=timeout)
        except BaseException:  # the time limit, or a second Ctrl-C (the child has its own session: it never saw
            os.killpg(proc.pid, signal.SIGKILL)  # the first): the whole group, the child may have spawned more
            proc.communicate()
            raise
    return proc.returncode


def _tail(path: Path) -> str:
    with open(path, "rb") as handle:
        handle.seek(max(0, path.stat().st_size - _STDERR_TAIL_BYTES))
        return handle.read().decode("utf-8", "replace")


def _failure(what: str, code: int, workdir: Path, stderr_tail: str, confinement: Confinement) -> SandboxError:
    """Why the child gave no result, in one line."""
    error = _read_error(workdir / ERROR_FILE)
    if code == OUT_OF_MEMORY or (error or "").startswith("MemoryError"):
        limit = f"its limit of {confinement.memory_mb} MB of address space" if confinement.memory_mb else "memory"
        reason = f"ran out of memory ({limit}) and was stopped"
    elif error:
        reason = f"raised {error}"
    elif code == -signal.SIGXCPU:
        reason = f"reached its limit of {confinement.cpu_s:g} s of CPU time and was stopped"
    elif code < 0:
        reason = f"was killed by signal {-code} ({_signal_name(-code)})"
    else:
        last = [line for line in stderr_tail.splitlines() if line.strip()][-1:]
        reason = f"exited with status {code} and no result" + (f": {echo(last[0], 300)}" if last else "")
    if (workdir / STARTED_FILE).exists():
        return SandboxError(f"{what} {reason}")
    return ChildSetupError(f"{what} could not start its work: it {reason} (is swizzleperf installed in this "
                           f"interpreter? the child runs `python -I`)")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def _read_error(path: Path) -> str | None:
    try:
        return json.loads(path.read_text())["error"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
