"""Run directories: `runs/<timestamp>-<kernel>/`, readable without the tool.

    run.json        what was run, with what, and how it ended (RunRecord)
    attempts.jsonl  one Attempt per line, appended and fsynced as each finishes
    best/           the kernel with the best remap applied, and the remap alone
    report.md       a table of attempts and the pictures
    batch.json      only while a batch is evaluated: its proposals (PendingBatch), for a resume

A run killed at any moment keeps every finished attempt: attempts.jsonl is append-only and a
torn last line (the kill landed mid-write) is ignored on load; run.json is replaced atomically.
"""

from __future__ import annotations

import os
import platform
from contextlib import contextmanager
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from swizzleperf.errors import RunError
from swizzleperf.loop.history import History
from swizzleperf.records.attempt import Attempt
from swizzleperf.records.run import RUN_SCHEMA_VERSION, PendingBatch, RunRecord
from swizzleperf.untrusted import readback


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("swizzleperf", "torch", "triton", "numpy", "numba", "dspy", "pydantic"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class RunDir:
    """One run directory on disk."""

    def __init__(self, path: Path, record: RunRecord):
        self.path = path
        self.record = record

    @property
    def attempts_path(self) -> Path:
        return self.path / "attempts.jsonl"

    @property
    def best_dir(self) -> Path:
        return self.path / "best"

    @classmethod
    def create(cls, root: Path, record_fields: dict) -> "RunDir":
        root.mkdir(parents=True, exist_ok=True)
        now = _now()
        stem = f"{now.strftime('%Y%m%d-%H%M%S')}-{record_fields['kernel'].name}"
        path, n = root / stem, 1
        while path.exists():
            n += 1
            path = root / f"{stem}-{n}"
        path.mkdir()
        record = RunRecord(run_id=path.name, created_at=now, updated_at=now, status="running",
                           versions=library_versions(), **record_fields)
        run = cls(path, record)
        run.save()
        run.attempts_path.touch()
        return run

    @classmethod
    def open(cls, path: Path) -> "RunDir":
        """A run directory read back as untrusted input (untrusted.readback): one RunError line if it is not one."""
        run_json = path / "run.json"
        if not run_json.exists():
            raise RunError(f"{path} is not a run directory (no run.json); list runs with `swizzleperf runs list`")
        with _as_run_error():
            data = readback.read_json(run_json, "the run record", inside=path)
            version = data.get("schema_version") if isinstance(data, dict) else None
            if version != RUN_SCHEMA_VERSION:
                raise RunError(f"{run_json} has schema version {version}; this swizzleperf reads {RUN_SCHEMA_VERSION}")
            return cls(path, readback.validate(data, RunRecord, f"the run record {run_json}"))

    def save(self) -> None:
        self.record.updated_at = _now()
        _write_atomic(self.path / "run.json", self.record.model_dump_json(indent=2) + "\n")

    @property
    def batch_path(self) -> Path:
        return self.path / "batch.json"

    def save_batch(self, batch: PendingBatch) -> None:
        _write_atomic(self.batch_path, batch.model_dump_json(indent=2) + "\n")

    def pending_batch(self) -> PendingBatch | None:
        """The batch a stop left part-evaluated, if any."""
        if not self.batch_path.exists():
            return None
        with _as_run_error():
            return readback.read_model(self.batch_path, PendingBatch, "the pending batch", inside=self.path)

    def clear_batch(self) -> None:
        self.batch_path.unlink(missing_ok=True)

    def append_attempt(self, attempt: Attempt) -> None:
        with open(self.attempts_path, "a") as f:
            f.write(attempt.model_dump_json() + "\n")
            f.flush()
            os.fsync(f.fileno())

    def rewrite_attempts(self, history: History) -> None:
        """attempts.jsonl replaced (atomically) by `history`'s attempts: a re-check changed a verdict."""
        _write_atomic(self.attempts_path, "".join(a.model_dump_json() + "\n" for a in history.attempts))

    def load_history(self) -> History:
        """Every complete attempt; a torn last line from a kill mid-write is dropped."""
        if not self.attempts_path.exists():
            return History()
        with _as_run_error():
            text = readback.read_text(self.attempts_path, "the attempts log", readback.LOG_BYTES, inside=self.path)
        # One record per "\n": JSON escapes line breaks inside strings, but not U+2028 or U+0085, where
        # splitlines() would also break (a remap with one in a comment is valid and is recorded as written).
        lines = [(number, line) for number, line in enumerate(text.split("\n"), 1) if line.strip()]
        attempts: list[Attempt] = []
        for number, line in lines:
            where = f"{self.attempts_path}:{number}"
            try:
                attempts.append(readback.validate(readback.parse_json(line, where), Attempt, where))
            except readback.StoredFileError as exc:
                if number == lines[-1][0]:
                    break  # torn final write
                raise RunError(f"{exc}; a run's attempts are only ever appended by swizzleperf") from None
        if len(attempts) < len(lines):
            # Drop the torn line from the file too, so appends continue on a clean line.
            _write_atomic(self.attempts_path, "".join(a.model_dump_json() + "\n" for a in attempts))
        return History(attempts)


@contextmanager
def _as_run_error():
    try:
        yield
    except readback.StoredFileError as exc:
        raise RunError(str(exc)) from None
    except OSError as exc:
        raise RunError(f"cannot read {exc.filename}: {exc.strerror}") from None


def find_run(ref: str, root: Path) -> Path:
    """A run by path, by directory name under `root`, or `latest`."""
    candidate = Path(ref)
    if (candidate / "run.json").exists():
        return candidate
    if ref == "latest":
        runs = list_runs(root)
        if not runs:
            raise RunError(f"no runs under {root}")
        return runs[-1]
    matches = [p for p in list_runs(root) if p.name == ref or p.name.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunError(f"no run '{ref}' under {root}; see `swizzleperf runs list`")
    raise RunError(f"'{ref}' matches several runs: {', '.join(p.name for p in matches)}")


def list_runs(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if (p / "run.json").exists()), key=lambda p: p.name)

