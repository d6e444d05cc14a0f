"""The user's command run with the launch recorder in it, and what it recorded.

The command runs as it would on its own (its own working directory, arguments and output, which
goes to a log), in a child whose PYTHONPATH starts with the recorder's sitecustomize. Without a
GPU it runs on Triton's CPU interpreter with the stand-ins of `standins.py`. `python` at the
head of the command means the interpreter swizzleperf runs on, so that a venv need not be active.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import swizzleperf
from swizzleperf.errors import CaptureError
from swizzleperf.kernel.launches import instrument, journal, launch_record
from swizzleperf.kernel.launches.launch_record import LaunchRecord

BOOTSTRAP = Path(instrument.__file__).parent / "bootstrap"


@dataclass
class Captured:
    """What a command launched: the records read back, the ones refused, the notes, its exit status."""

    records: list[LaunchRecord]
    returncode: int
    log: Path
    notes: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def log_tail(self, lines: int = 12) -> str:
        text = self.log.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


@dataclass(frozen=True)
class CaptureSettings:
    kernel: str | None = None
    config: int = 0
    sm_count: int = 132
    vendor: str = "nvidia"
    arch: int | str = 90
    preset: str = "h100"
    gpu: bool = False
    record: bool = True  # False: only the stand-ins (a re-run of the command, not a capture)


def executable(command: list[str]) -> list[str]:
    """`python`/`python3` -> this interpreter; anything else must be on PATH."""
    if not command:
        raise CaptureError("no command to run: give it after --, e.g. swizzleperf capture -- python -m pytest tests/")
    if command[0] in ("python", "python3"):
        return [sys.executable, *command[1:]]
    if shutil.which(command[0]) is None:
        raise CaptureError(f"{command[0]}: command not found (give the command after --, as you would run it)")
    return command


def _environment(folder: Path, settings: CaptureSettings) -> dict[str, str]:
    env = dict(os.environ)
    env[journal.DIR_ENV] = str(folder)
    env[instrument.SETTINGS_ENV] = json.dumps({"kernel": settings.kernel, "config": settings.config,
                                               "stand_in": not settings.gpu, "sm_count": settings.sm_count,
                                               "vendor": settings.vendor, "arch": settings.arch, "preset": settings.preset,
                                               "record": settings.record})
    package_root = str(Path(swizzleperf.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BOOTSTRAP), package_root, env.get("PYTHONPATH")) if p)
    if not settings.gpu:
        env["TRITON_INTERPRET"] = "1"
    return env


def run_command(command: list[str], folder: Path, settings: CaptureSettings,
                on_progress: Callable[[int, float], None] | None = None, cwd: Path | None = None) -> Captured:
    """Run `command` (in `cwd`, default here) with the recorder; the records land in `folder` (which must exist)."""
    argv = executable(command)
    log = folder / "command.log"
    started = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        try:
            proc = subprocess.Popen(argv, env=_environment(folder, settings), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=cwd)
        except OSError as exc:
            raise CaptureError(f"cannot run {argv[0]}: {exc.strerror}") from None
        while proc.poll() is None:
            if on_progress is not None:
                on_progress(len(list(folder.glob("launch-*.json"))), time.perf_counter() - started)
            time.sleep(0.2)
    return collect(folder, proc.returncode, log)


def collect(folder: Path, returncode: int, log: Path) -> Captured:
    """The records and notes a command left in `folder`, each record checked as untrusted input."""
    records, refused = [], []
    for path in sorted(folder.glob("launch-*.json")):
        try:
            records.append(launch_record.read(path))
        except CaptureError as exc:
            refused.append(str(exc))
    notes: dict[str, None] = {}
    for path in sorted(folder.glob("notes-*.txt")):
        notes.update(dict.fromkeys(line for line in path.read_text(errors="replace").splitlines() if line))
    return Captured(records=records, returncode=returncode, log=log, notes=list(notes), refused=refused)


def by_kernel(records: list[LaunchRecord]) -> dict[str, list[LaunchRecord]]:
    """Launches grouped by kernel, keyed `name` (or `name@file:line` where two kernels share a name)."""
    groups: dict[tuple, list[LaunchRecord]] = {}
    for r in records:
        groups.setdefault((r.kernel.name, r.kernel.file, r.kernel.line), []).append(r)
    names = [k[0] for k in groups]
    return {(k[0] if names.count(k[0]) == 1 else f"{k[0]}@{Path(k[1]).name}:{k[2]}"): v for k, v in groups.items()}
