"""The child's side of a sandboxed call (swizzleperf.untrusted.sandbox): run the target on its payload and
leave, in its working directory, the result or one line of error for the parent.

Entry point: `python -m swizzleperf.untrusted.child MODULE:FUNCTION WORKDIR` with the JSON payload on
stdin (a child started afresh), or `main(..., payload_text)` in a fork of the warm server
(swizzleperf.untrusted.forkserver). The function takes `(payload: dict, workdir: Path)` and returns a
JSON-serialisable dict; it may hand arrays back with `save_array`.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import numpy as np

from swizzleperf.untrusted.parse import echo

RESULT_FILE = "result.json"
ERROR_FILE = "error.json"
STARTED_FILE = "started"
STDERR_FILE = "stderr.txt"
OUT_OF_MEMORY = 86  # the child's exit status after a MemoryError (nothing else is safe to do then)


def save_array(workdir: Path, name: str, array: np.ndarray) -> None:
    """Child side: hand an array back to the parent."""
    np.save(workdir / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)


def _write_error(workdir: Path, exc: BaseException) -> None:
    """Child side: the exception as one line for the parent (a traceback is no reason)."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__
    (workdir / ERROR_FILE).write_text(json.dumps({"error": echo(text, 300)}))


def main(target: str, workdir: str, payload_text: str | None = None) -> None:
    """Child side: run `target` on the payload (from stdin unless given) and leave its result or error."""
    work = Path(workdir)
    try:
        module_name, func_name = target.split(":")
        func = getattr(importlib.import_module(module_name), func_name)
        payload = json.loads(sys.stdin.read() if payload_text is None else payload_text)
        (work / STARTED_FILE).touch()
        result = func(payload, work)
        text = json.dumps(result)
    except MemoryError:
        os._exit(OUT_OF_MEMORY)  # formatting anything now could fail again
    except BaseException as exc:  # noqa: BLE001 -- every failure reaches the parent as one line
        try:
            _write_error(work, exc)
        except BaseException:  # noqa: BLE001
            pass
        sys.exit(1)
    # Written last and atomically: its presence means the function returned.
    tmp = work / (RESULT_FILE + ".tmp")
    tmp.write_text(text)
    tmp.rename(work / RESULT_FILE)



if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
