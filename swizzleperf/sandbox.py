"""Run a function in a child Python process with a time limit.

Candidate remaps are untrusted code: they are only ever evaluated or compiled in a child,
and nothing the child sends back is unpickled. The parent sends a JSON payload; the child
answers with JSON and may leave numpy arrays (`.npy`, loaded with allow_pickle=False) in a
private directory. A crash, a non-zero exit or the time limit becomes a SandboxError that
carries the tail of the child's stderr.

The child entry point is `python -m swizzleperf.sandbox MODULE:FUNCTION WORKDIR`; the function
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

from swizzleperf.errors import SandboxError

_RESULT_FILE = "result.json"


@dataclass
class ChildResult:
    value: dict
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    stderr: str = ""


def run_in_child(target: str, payload: dict, timeout: float, env: dict[str, str] | None = None,
                 what: str = "child process") -> ChildResult:
    """Call `target` ("module:function") in a fresh interpreter; raise SandboxError on failure."""
    with tempfile.TemporaryDirectory(prefix="swizzleperf-sandbox-") as tmp:
        workdir = Path(tmp)
        child_env = {**os.environ, **(env or {})}
        proc = subprocess.Popen(
            [sys.executable, "-m", "swizzleperf.sandbox", target, str(workdir)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=child_env, start_new_session=True, text=True)
        try:
            _, stderr = proc.communicate(json.dumps(payload), timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group: the child may have spawned more
            proc.communicate()
            raise SandboxError(f"{what} ran past its time limit of {timeout:g} s and was killed") from None
        result_path = workdir / _RESULT_FILE
        if proc.returncode != 0 or not result_path.exists():
            tail = "\n".join(stderr.strip().splitlines()[-12:])
            how = f"was killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exited with {proc.returncode}"
            raise SandboxError(f"{what} {how}" + (f":\n{tail}" if tail else ""))
        value = json.loads(result_path.read_text())
        arrays = {p.stem: np.load(p, allow_pickle=False) for p in workdir.glob("*.npy")}
        return ChildResult(value=value, arrays=arrays, stderr=stderr)


def save_array(workdir: Path, name: str, array: np.ndarray) -> None:
    """Child side: hand an array back to the parent."""
    np.save(workdir / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)


def _child_main(target: str, workdir: str) -> None:
    module_name, func_name = target.split(":")
    func = getattr(importlib.import_module(module_name), func_name)
    payload = json.loads(sys.stdin.read())
    result = func(payload, Path(workdir))
    # Written last and atomically: its presence means the function returned.
    tmp = Path(workdir) / (_RESULT_FILE + ".tmp")
    tmp.write_text(json.dumps(result))
    tmp.rename(Path(workdir) / _RESULT_FILE)


if __name__ == "__main__":
    _child_main(sys.argv[1], sys.argv[2])
