"""Where the recorder writes inside the user's process: one JSON file per launch, and notes.

The capture directory is named by $SWIZZLEPERF_CAPTURE_DIR (set by `swizzleperf capture`); each
process writes its own files (`launch-<pid>-<n>.json`, `notes-<pid>.txt`), so test runners that
fork or spawn workers record side by side.
"""

from __future__ import annotations

import json
import os

DIR_ENV = "SWIZZLEPERF_CAPTURE_DIR"


def write(record: dict) -> None:
    """One launch record, written whole (a temporary name, then renamed)."""
    folder = os.environ[DIR_ENV]
    name = f"launch-{os.getpid()}-{record['seq']:04d}.json"
    tmp = os.path.join(folder, name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1, default=repr)
    os.replace(tmp, os.path.join(folder, name))


def note(line: str) -> None:
    """A line for the capture summary (a stand-in used, a launch not recorded and why)."""
    folder = os.environ.get(DIR_ENV)
    if folder:
        with open(os.path.join(folder, f"notes-{os.getpid()}.txt"), "a", encoding="utf-8") as f:
            f.write(line.replace("\n", " ") + "\n")
