"""Bounds on untrusted text (a model's answer, anyone's remap file) before and while it is parsed,
and safe echoes of it in messages.

Python's parser and printer have limits of their own that surface as exceptions, not reasons:
a 13 MB file is parsed whole, 30,000 unary minuses exhaust the parser's stack (MemoryError), a
long `a.b.c...` chain its recursion (RecursionError), and an integer literal of more than 4,300
digits cannot be printed (ValueError), so a message that quotes it crashes whoever formats it.
So a file's size is checked before it is read, text is scanned token by token before it is
parsed, and every message that quotes candidate text goes through `echo` or `show_int`.
"""

from __future__ import annotations

import ast
import io
import stat
import tokenize
from pathlib import Path

from swizzleperf.errors import ContractError, RemapRejected
from swizzleperf.untrusted import source_text

MAX_SOURCE_CHARS = 20_000  # a candidate's text: a remap (and a loop order) is a few lines

MAX_FILE_BYTES = 256 * 1024  # a remap file may be a whole kernel file: the largest in kernels/ is 17 KB
MAX_LITERAL_BITS = 256  # die counts and tile sizes; the evaluator's compile-time values stop at 2**256 too
MAX_NESTING = 100  # brackets plus unary operators in a row, before parsing (remap.MAX_DEPTH bounds the tree)
ECHO_CHARS = 160  # candidate text quoted in a reason
_PREFIX_OPERATORS = {"-", "+", "~", "not"}
_PARSE_FAILURES = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)


def reject(reason: str, line: int | None = None) -> RemapRejected:
    return RemapRejected("static", (f"line {line}: " if line else "") + reason)


def read_file(path: Path, what: str = "remap file") -> str:
    """The file's text, refused before it is read whole when it is too large, and when it is not UTF-8.

    A leading byte-order mark is dropped. OSError (a missing file) is the caller's to report.
    """
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise ContractError(f"the {what} {path} is not a regular file")
    if info.st_size > MAX_FILE_BYTES:
        raise reject(f"the {what} is {info.st_size:,} bytes; the limit is {MAX_FILE_BYTES:,} (a remap is a few "
                     f"lines, a whole kernel file a few hundred)")
    with path.open("rb") as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise reject(f"the {what} grew past {MAX_FILE_BYTES:,} bytes while it was read")
    try:
        return source_text.decode(data)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise reject(f"the {what} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start:,} "
                     f"(line {line})") from None


def scan(source: str, max_chars: int) -> None:
    """Refuse, before parsing, text longer than max_chars, nesting and integer literals no remap needs.

    Syntax errors are left to the parser, which reports them with their line.
    """
    if len(source) > max_chars:
        raise reject(f"the candidate is {len(source):,} characters long; the limit is {max_chars}")
    depth = run = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(source, newline="").readline):
            text = token.string
            if token.type == tokenize.OP and text in ("(", "[", "{"):
                depth += 1
            elif token.type == tokenize.OP and text in (")", "]", "}"):
                depth = max(0, depth - 1)
            run = run + 1 if text in _PREFIX_OPERATORS else 0
            if depth + run > MAX_NESTING:
                raise reject(f"expressions are nested more than {MAX_NESTING} levels deep (brackets and unary "
                             f"operators): use intermediate variables", token.start[0])
            if token.type == tokenize.NUMBER:
                _check_literal(text, token.start[0])
    except (tokenize.TokenError, SyntaxError):
        return


def _check_literal(text: str, line: int) -> None:
    digits = text.replace("_", "").lower()
    if digits.endswith("j") or "." in digits or ("e" in digits and not digits.startswith("0x")):
        return  # a float or imaginary literal: the static check refuses those by name
    base = {"0x": 16, "0o": 8, "0b": 2}.get(digits[:2], 10)
    significant = (digits[2:] if base != 10 else digits).lstrip("0")
    bits_per_digit = {16: 4, 8: 3, 2: 1, 10: 3.33}[base]
    if len(significant) * bits_per_digit > MAX_LITERAL_BITS + 4:
        raise reject(f"an integer literal of about {int(len(significant) * bits_per_digit):,} bits ({len(text):,} "
                     f"characters); remap constants fit in {MAX_LITERAL_BITS} bits", line)


def parse(source: str, max_chars: int) -> ast.Module:
    """`scan`, then the syntax tree; every parser failure becomes RemapRejected("static", why)."""
    scan(source, max_chars)
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        where = f"line {exc.lineno}: " if exc.lineno else ""
        raise reject(f"does not parse: {where}{echo(exc.msg)}") from None
    except _PARSE_FAILURES as exc:  # null bytes; nesting the scan cannot see (a.b.c..., 1+1+...)
        what = "nested too deeply for the parser" if isinstance(exc, (RecursionError, MemoryError)) else echo(str(exc))
        raise reject(f"does not parse: {type(exc).__name__}: {what}") from None


def echo(item: ast.AST | str, limit: int = ECHO_CHARS) -> str:
    """Candidate text (or a syntax tree of it) for a message: one line, at most `limit` characters."""
    if isinstance(item, ast.AST):
        try:
            item = ast.unparse(item)
        except (ValueError, RecursionError, MemoryError):
            return f"<a {type(item).__name__} too large to print>"
    text = " ".join(item.splitlines())
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def show_int(value: int) -> str:
    """An integer for a message: its digits when short, else its size (str() refuses > 4,300 digits)."""
    if isinstance(value, bool) or value.bit_length() <= 128:
        return repr(value)
    return f"{'-' if value < 0 else ''}<an integer of {value.bit_length():,} bits>"
