"""What Triton's CPU interpreter cannot do that a GPU does: found in the kernel's source and in a failure.

A kernel that is fine on a GPU can fail, or compute garbage, on the CPU interpreter: a half-precision
or fp8 `tl.dot` returns wrong numbers, `tl.assume` is enforced as an assertion, libdevice and other
extern calls return None (the error then points at a later line), and inline assembly does not
run. Where one of these is in the kernel's source, a
failure on the CPU is said to be the interpreter's, with what to do about it.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    what: str
    source: tuple[re.Pattern, ...]  # how it shows in the kernel's source, the telling form first (a call, then
    #                                 the import); empty: the failure alone tells
    failure: str  # a substring of the failure it causes ("" when it fails silently: wrong numbers)
    advice: str


HALF_DOT = Limit("tl.dot on half-precision or fp8 tensors", (re.compile(r"\bdot\s*\("),), "",
                 "the interpreter computes it wrongly; check on a GPU, or run the CPU check in float32 "
                 "(`swizzleperf check KERNEL --fp32`, or CPU_CHECK_FLOAT32 = True in the kernel file) when the "
                 "kernel is dtype-generic")
LIMITS = (
    Limit("tl.assume", (re.compile(r"\bassume\s*\("),), "AssertionError",
          "the interpreter enforces tl.assume as an assertion, a GPU compiler takes it as a promise: check on a GPU"),
    Limit("libdevice or extern calls", (re.compile(r"\blibdevice\.\w+\s*\(|extern_elementwise"),
                                        re.compile(r"\blibdevice\b|\bextra\.\w+")), "NoneType",
          "the interpreter has no libdevice: the call returns None and a later line fails; check on a GPU"),
    Limit("inline assembly", (re.compile(r"inline_asm_elementwise"),), "asm",
          "the interpreter cannot run inline assembly: check on a GPU"),
)  # a float argument's .to() is not one: interpreter_fixes makes float arguments fp32 scalars, as a GPU does
HALF = re.compile(r"\b(float16|bfloat16|float8\w*|half)\b")


def mentions_half(source: str) -> bool:
    """Whether the kernel file makes or records half-precision or fp8 tensors (by their dtype's name)."""
    return bool(HALF.search(source))


def _code(source: str) -> str:
    """The source with its comments and strings blanked (same lines), so a docstring naming a call is not a use."""
    lines = source.splitlines(keepends=True)
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
                  if t.type in (tokenize.COMMENT, tokenize.STRING)]
    except (tokenize.TokenError, SyntaxError):
        return source
    for t in reversed(tokens):
        (r0, c0), (r1, c1) = t.start, t.end
        for r in range(r0, r1 + 1):
            line = lines[r - 1]
            start, end = (c0 if r == r0 else 0), (c1 if r == r1 else len(line.rstrip("\n")))
            lines[r - 1] = line[:start] + " " * (end - start) + line[end:]
    return "".join(lines)


def _line(source: str, patterns: tuple[re.Pattern, ...]) -> int | None:
    """The line of the first pattern's first match (in code, not comments or strings), else the next's."""
    code = _code(source)
    match = next((m for p in patterns if (m := p.search(code))), None)
    return source.count("\n", 0, match.start()) + 1 if match else None


def in_source(source: str, half_inputs: bool) -> list[tuple[Limit, int]]:
    """The limits the source uses, with the line of the first use (`half_inputs`: half or fp8 tensors go in)."""
    found = [(lim, line) for lim in LIMITS if (line := _line(source, lim.source))]
    if half_inputs and (line := _line(source, HALF_DOT.source)):
        found.insert(0, (HALF_DOT, line))
    return found


def explain_failure(message: str, source: str) -> tuple[Limit, int | None] | None:
    """The limit that explains a failure (`message`) of a kernel whose source uses it, and the line of that use."""
    for lim in LIMITS:
        line = _line(source, lim.source)
        if lim.failure in message and (not lim.source or line):
            return lim, line
    return None


def sentence(lim: Limit, where: str) -> str:
    """'this is a limit of Triton's CPU interpreter (WHAT at WHERE), not of the kernel: ADVICE'."""
    at = f" at {where}" if where else ""
    return f"this is a limit of Triton's CPU interpreter ({lim.what}{at}), not of the kernel: {lim.advice}"


def own_failure(detail: str, source: str, name: str, float32: bool) -> str | None:
    """Why a kernel file that fails its CPU check with its own remap (`detail`) may be fine on a GPU: the
    failure's own explanation, else a limit its code uses (half-precision dot unless checked in float32)."""
    if "limit of Triton's CPU interpreter" in detail:
        return detail[detail.index("this is a limit"):].split("; reproduce with:")[0]
    found = in_source(source, mentions_half(source) and not float32)
    return sentence(found[0][0], f"{name}:{found[0][1]}") if found else None
