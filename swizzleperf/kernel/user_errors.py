"""Failures in the user's kernel file, in one line: what failed, where in the file, and what to do.

Whatever a kernel file's own code raises (its import, `grid`, `make_inputs`, `make_outputs`,
`launch`, `reference`, a `SIZES` entry one of them reads) is reported as: the function, the
file:line of the deepest frame in the kernel file with that line's text, the exception (its root
cause: the Triton interpreter wraps the kernel's own error), a hint where the cause is a known
quirk, and a command that reproduces it.
"""

from __future__ import annotations

import os
import re
import shlex
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from swizzleperf.errors import ContractError
from swizzleperf.kernel import interpreter_limits

# (substring of the root exception's message, the fix): quirks of Triton's CPU interpreter and of
# kernel files written for a GPU
HINTS = (
    ("mask has unsupported dtype",
     "the CPU interpreter rejects a mask built as `block_mask & scalar_condition` (a GPU compiles it): broadcast "
     "the scalar, e.g. `(offs < n) & ((flag + tl.zeros_like(offs)) > 0)`, or use `tl.where(flag, offs < n, False)`"),
    ("active drivers",
     "the CPU interpreter has no GPU driver, so module-level `triton.runtime.driver.active...` calls (e.g. "
     "`DEVICE = triton.runtime.driver.active.get_active_torch_device()`) fail on import: move them, and any test "
     "code, under `if __name__ == \"__main__\":` and use the `device` argument of make_inputs/make_outputs"),
    ("Torch not compiled with CUDA enabled",
     "the kernel file asks for a CUDA device where there is none: use the `device` argument of "
     "make_inputs/make_outputs instead of \"cuda\""),
)


class UserCodeError(ContractError):
    """The kernel file's own code raised: the message names the function, the line and a reproduction."""


@dataclass(frozen=True)
class FileMap:
    """How lines of a file that was run (a copy, maybe with another remap hook) map to the user's file."""

    shown: str  # the user's file as a command line would name it
    hook_start: int = 0  # the remap hook's first line (the same in both files); 0: the files are the same
    hook_end_run: int = 0  # its last line in the file that was run
    shift: int = 0  # the file that was run has this many more lines after the hook

    def describe(self, line: int) -> str:
        if self.hook_start and self.hook_start <= line <= self.hook_end_run:
            return f"line {line - self.hook_start + 1} of the remap hook"
        return f"{self.shown}:{line - self.shift if self.hook_start and line > self.hook_end_run else line}"

    def to_json(self) -> dict:
        return {"shown": self.shown, "hook_start": self.hook_start, "hook_end_run": self.hook_end_run,
                "shift": self.shift}


def shown_path(path: Path) -> str:
    """`path` relative to the working directory when it is under it (what a user typed), else absolute."""
    resolved = Path(path).resolve()
    return os.path.relpath(resolved) if resolved.is_relative_to(Path.cwd().resolve()) else str(resolved)


def root_cause(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def exception_text(exc: BaseException) -> str:
    """Type and last message line of the root cause (the interpreter wraps the kernel's own error twice)."""
    root = root_cause(exc)
    lines = str(root).strip().splitlines()
    return f"{type(root).__name__}: {lines[-1]}" if lines else type(root).__name__


def innermost(exc: BaseException, run_path: Path) -> traceback.FrameSummary | None:
    """The deepest frame in the kernel file, over the whole cause chain."""
    frames: list[traceback.FrameSummary] = []
    seen: BaseException | None = exc
    while seen is not None:
        frames += [f for f in traceback.extract_tb(seen.__traceback__) if Path(f.filename) == Path(run_path)]
        seen = seen.__cause__
    return frames[-1] if frames and frames[-1].lineno is not None else None


def where(exc: BaseException, run_path: Path, files: FileMap) -> str:
    """' at FILE:LINE (`text`)' for the innermost frame in the kernel file."""
    frame = innermost(exc, run_path)
    if frame is None:
        return ""
    text = (frame.line or "").strip()
    return f" at {files.describe(frame.lineno)}" + (f" (`{text}`)" if text else "")


def hint(exc: BaseException) -> str:
    message = f"{type(root_cause(exc)).__name__}: {root_cause(exc)}"
    return next((f"; hint: {fix}" for needle, fix in HINTS if needle in message), "")


def limit_hint(message: str, path: Path, files: FileMap | None = None) -> str:
    """'; this is a limit of Triton's CPU interpreter ...' when the kernel file uses what explains `message`."""
    try:
        source = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    found = interpreter_limits.explain_failure(message, source)
    if found is None:
        return ""
    lim, line = found
    where = (files or FileMap(shown_path(path))).describe(line) if line else ""
    return f"; {interpreter_limits.sentence(lim, where)}"


def describe(step: str, exc: BaseException, run_path: Path, files: FileMap) -> str:
    """'STEP raised EXC at FILE:LINE (`text`); hint: ...' in one line."""
    text = exception_text(exc)
    return f"{step} raised {text}{where(exc, run_path, files)}{hint(exc) or limit_hint(text, run_path, files)}"


def size_hint(exc: BaseException, run_path: Path, size_name: str, size: dict) -> str:
    """A KeyError for a parameter the SIZES entry lacks (the failing line reads size[KEY]), said as such."""
    root, frame = root_cause(exc), innermost(exc, run_path)
    key = root.args[0] if isinstance(root, KeyError) and root.args else None
    if isinstance(key, str) and key not in size and frame is not None and re.search(
            rf"size\s*\[\s*['\"]{re.escape(key)}['\"]", frame.line or ""):
        return (f"; SIZES[{size_name!r}] has no {root.args[0]!r} (it has {', '.join(map(str, size)) or 'nothing'}): "
                f"add it to that entry")
    return ""


def check_command(path: Path, size: str, seed: int | None = None) -> str:
    """The `swizzleperf check` command that runs one case again."""
    command = f"swizzleperf check {shlex.quote(shown_path(path))} --size {shlex.quote(size)}"
    return command + (f" --seed {seed}" if seed is not None else "")


def call(step: str, fn: Callable[..., Any], *args: Any, path: Path, reproduce: str, size_name: str | None = None,
         size: dict | None = None) -> Any:
    """fn(*args) from the kernel file; whatever it raises becomes one UserCodeError line."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 -- the user's code: anything it raises is reported, not a crash
        extra = size_hint(exc, path, size_name, size) if size is not None else ""
        message = describe(step, exc, path, FileMap(shown_path(path)))
        raise UserCodeError(f"{message}{extra}; reproduce with: {reproduce}") from exc


def import_error(path: Path, exc: BaseException) -> UserCodeError:
    """Importing the kernel file failed: where, why, and the command that shows it again."""
    message = describe(f"importing {path.name}", exc, path, FileMap(shown_path(path)))
    return UserCodeError(f"{message}; reproduce with: TRITON_INTERPRET=1 python {shlex.quote(shown_path(path))}")


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)\s*$')


def from_traceback_text(text: str, path: Path, size: str, what: str) -> str | None:
    """A child's printed traceback through the kernel file, as one line; None when it never reached it.

    `what` says what the child was doing (e.g. "capturing the trace"); the reproduction is the
    check command at `size`, which runs the same functions with the same size."""
    lines = text.splitlines()
    frames = [(n, m) for n, line in enumerate(lines) if (m := _FRAME.match(line)) and Path(m["file"]) == Path(path)]
    last = next((line.strip() for line in reversed(lines) if line.strip() and not line.startswith(" ")), "")
    if not frames or not re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b", last):
        return None
    n, frame = frames[-1]
    code = lines[n + 1].strip() if n + 1 < len(lines) and not _FRAME.match(lines[n + 1]) else ""
    error = RuntimeError(last)  # for the hint table, which matches on the text
    return (f"{frame['fn']} raised {last} while {what} at {shown_path(path)}:{frame['line']}"
            + (f" (`{code}`)" if code else "") + hint(error)
            + f"; reproduce with: {check_command(path, size)}")
