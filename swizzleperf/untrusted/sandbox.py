"""Run a function in a confined child Python process with a time limit.

Candidate remaps are untrusted: they are only ever evaluated or compiled in a child, started
as `swizzleperf.untrusted.isolation` describes (isolated interpreter, fresh working directory, allowlisted
environment, resource limits), and nothing the child sends back is unpickled. The parent sends
a JSON payload; the child answers with JSON and may leave numpy arrays (`.npy`, loaded with
allow_pickle=False) in its private directory, which is also its working directory.

Every failure is one line: a crash, an exception, a limit or the time limit becomes a
SandboxError saying which; a child that could not even start its function (an installation
problem, not the candidate's doing) raises ChildSetupError, a SandboxError.

The child entry point is `python -m swizzleperf.untrusted.sandbox MODULE:FUNCTION WORKDIR`; the function
takes `(payload: dict, workdir: Path)` and returns a JSON-serialisable dict.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from swizzleperf.errors import ChildSetupError, SandboxError
from swizzleperf.untrusted.isolation import Confinement, child_env, command
from swizzleperf.untrusted.parse import echo

_RESULT_FILE = "result.json"
_ERROR_FILE = "error.json"
_STARTED_FILE = "started"
_STDERR_FILE = "stderr.txt"
_OUT_OF_MEMORY = 86  # the child's exit status after a MemoryError (nothing else is safe to do then)
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
        with open(workdir / _STDERR_FILE, "wb") as stderr:
            proc = subprocess.Popen(
                command(confinement, "swizzleperf.untrusted.sandbox", target, str(workdir)), cwd=workdir,
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr,
                env=child_env(confinement, env), start_new_session=True)
            try:
                proc.communicate(json.dumps(payload).encode(), timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the whole group: the child may have spawned more
                proc.communicate()
                raise SandboxError(f"{what} ran past its time limit of {timeout:g} s and was killed") from None
            except BaseException:  # a second Ctrl-C (the child has its own session: it never saw the first)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise
        stderr_tail = _tail(workdir / _STDERR_FILE)
        result_path = workdir / _RESULT_FILE
        if proc.returncode != 0 or not result_path.exists():
            raise _failure(what, proc.returncode, workdir, stderr_tail, confinement)
        try:
            value = json.loads(result_path.read_text())
            arrays = {p.stem: np.load(p, allow_pickle=False) for p in workdir.glob("*.npy")}
        except (ValueError, OSError) as exc:
            raise SandboxError(f"{what} returned an unreadable result ({echo(str(exc))})") from None
        return ChildResult(value=value, arrays=arrays, stderr=stderr_tail)


def _tail(path: Path) -> str:
    with open(path, "rb") as handle:
        handle.seek(max(0, path.stat().st_size - _STDERR_TAIL_BYTES))
        return handle.read().decode("utf-8", "replace")


def _failure(what: str, code: int, workdir: Path, stderr_tail: str, confinement: Confinement) -> SandboxError:
    """Why the child gave no result, in one line."""
    error = _read_error(workdir / _ERROR_FILE)
    if code == _OUT_OF_MEMORY or (error or "").startswith("MemoryError"):
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
    if (workdir / _STARTED_FILE).exists():
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


def save_array(workdir: Path, name: str, array: np.ndarray) -> None:
    """Child side: hand an array back to the parent."""
    np.save(workdir / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)


def _write_error(workdir: Path, exc: BaseException) -> None:
    """Child side: the exception as one line for the parent (a traceback is no reason)."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__
    (workdir / _ERROR_FILE).write_text(json.dumps({"error": echo(text, 300)}))


def _child_main(target: str, workdir: str) -> None:
    work = Path(workdir)
    try:
        module_name, func_name = target.split(":")
        func = getattr(importlib.import_module(module_name), func_name)
        payload = json.loads(sys.stdin.read())
        (work / _STARTED_FILE).touch()
        result = func(payload, work)
        text = json.dumps(result)
    except MemoryError:
        os._exit(_OUT_OF_MEMORY)  # formatting anything now could fail again
    except BaseException as exc:  # noqa: BLE001 -- every failure reaches the parent as one line
        try:
            _write_error(work, exc)
        except BaseException:  # noqa: BLE001
            pass
        sys.exit(1)
    # Written last and atomically: its presence means the function returned.
    tmp = work / (_RESULT_FILE + ".tmp")
    tmp.write_text(text)
    tmp.rename(work / _RESULT_FILE)


if __name__ == "__main__":
    _child_main(sys.argv[1], sys.argv[2])
