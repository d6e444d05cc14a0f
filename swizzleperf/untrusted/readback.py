"""Files read back from disk, bounded: run directories, library entries, hardware specs, recorded
launches, trace-cache entries.

swizzleperf wrote most of them, but anyone may have edited, replaced or linked them since, so each
is read as input: a regular file (no device, no pipe, no link that leaves the directory it is read
from), at most a stated size (checked before it is read, and again while), UTF-8, and for JSON and
YAML at most MAX_NESTING levels deep; then the caller validates it against its schema. Every
refusal is one StoredFileError line naming the file.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from swizzleperf.errors import SwizzlePerfError
from swizzleperf.untrusted.parse import echo

MB = 1024 * 1024
MAX_NESTING = 64  # the deepest record swizzleperf writes is under 10 levels
RECORD_BYTES = 16 * MB  # one JSON record: run.json, batch.json, a library entry, a spec, a launch record
LOG_BYTES = 512 * MB  # attempts.jsonl: a 1,000-attempt LLM run writes about 30 MB

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")

Model = TypeVar("Model", bound=BaseModel)


class StoredFileError(SwizzlePerfError):
    """A file read back from disk that is not what swizzleperf writes there."""


def read_bytes(path: Path, what: str, max_bytes: int = RECORD_BYTES, inside: Path | None = None) -> bytes:
    """The file's bytes: a regular file of at most `max_bytes`, under `inside` (default: its own directory)
    once links are resolved. OSError (a missing file) is the caller's to report."""
    inside = (inside or path.parent).resolve()
    real = path.resolve()
    if real != inside and inside not in real.parents:
        raise StoredFileError(f"{what} {path} links outside {inside} (to {real}); refusing to read it")
    fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block the open
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise StoredFileError(f"{what} {path} is not a regular file")
        if info.st_size > max_bytes:
            raise StoredFileError(f"{what} {path} is {info.st_size:,} bytes; the limit is {max_bytes:,}")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise StoredFileError(f"{what} {path} grew past {max_bytes:,} bytes while it was read")
    return data


def read_text(path: Path, what: str, max_bytes: int = RECORD_BYTES, inside: Path | None = None) -> str:
    data = read_bytes(path, what, max_bytes, inside)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StoredFileError(f"{what} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                              f"{exc.start:,})") from None


def parse_json(text: str, what: str):
    """JSON text at most MAX_NESTING deep (checked before parsing: Python's parser recurses)."""
    depth = nesting(text)
    if depth > MAX_NESTING:
        raise StoredFileError(f"{what} nests {depth:,} levels deep; the limit is {MAX_NESTING}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise StoredFileError(f"{what} is not valid JSON ({echo(str(exc))})") from None


def nesting(text: str) -> int:
    """The deepest bracket nesting outside double-quoted strings, counted without recursion (0 where it cannot
    pass MAX_NESTING)."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return 0  # cannot be deeper than the limit
    depth = deepest = 0
    for bracket in _BRACKET.findall(_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def read_json(path: Path, what: str, max_bytes: int = RECORD_BYTES, inside: Path | None = None):
    return parse_json(read_text(path, what, max_bytes, inside), f"{what} {path}")


def validate(data, model: type[Model], what: str) -> Model:
    """`data` as `model`, or one line saying where it differs."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "the top level"
        raise StoredFileError(f"{what} does not match {model.__name__} at {echo(where, 80)}: "
                              f"{echo(error['msg'], 160)}") from None


def read_model(path: Path, model: type[Model], what: str, max_bytes: int = RECORD_BYTES,
               inside: Path | None = None) -> Model:
    return validate(read_json(path, what, max_bytes, inside), model, f"{what} {path}")
