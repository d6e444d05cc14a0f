"""Which instruction of the kernel a recorded load or store comes from (its *site*).

The simulator issues the loads a program can have in flight together as one round (rounds.py), and
where a loop begins its next iteration is where an instruction repeats. So capture tags every event
with its site: a stable number for the place in the kernel's source that issued it, through every
call of a helper function (the same load in a helper called from two places is two sites). Both
interpreters run the kernel's Python code, so the kernel's frames on the stack name the site; the
frames of the interpreter, Triton, numpy, torch and the standard library are left out.
"""

from __future__ import annotations

import functools
import sys
import sysconfig
import zlib
from pathlib import Path


@functools.cache
def _library_prefixes() -> tuple[str, ...]:
    """Where the code that runs around the kernel lives; a frame under any of these is not the kernel's."""
    import numpy
    import triton

    import swizzleperf

    roots = {Path(m.__file__).resolve().parent for m in (numpy, triton, swizzleperf)}
    roots |= {Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "platstdlib")}
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__file__", None):
        roots.add(Path(torch.__file__).resolve().parent)
    return tuple(str(r) + "/" for r in roots)


@functools.lru_cache(maxsize=4096)
def _is_library(filename: str) -> bool:
    if filename.startswith("<"):  # exec'd strings: the interpreter's generated code
        return True
    resolved = str(Path(filename).resolve())
    return resolved.startswith(_library_prefixes())


def instruction_site() -> int:
    """A number for the kernel source position that made the current memory instruction: the kernel's
    frames on the call stack (function name, line, bytecode offset), hashed; 0 when no kernel frame is
    found. The same for every program and every capture of the same source, so the fast and the
    reference interpreter agree."""
    frame = sys._getframe(1)
    key = []
    while frame is not None:
        code = frame.f_code
        if not _is_library(code.co_filename):
            key.append(f"{code.co_name}:{frame.f_lineno}:{frame.f_lasti}")
        frame = frame.f_back
    return zlib.crc32("|".join(key).encode()) & 0x7FFFFFFF if key else 0
