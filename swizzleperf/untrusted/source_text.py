"""Source text as Python's parser sees it: decoded bytes, its line breaks, and a function's lines.

The parser ends a line only at `\\n`, `\\r\\n` or `\\r`. `str.splitlines()` also breaks at form
feed, U+2028, U+0085 and others, so syntax-tree line numbers applied to `splitlines()` text
point at the wrong lines: a file with such a character in a comment loses the end of its hook,
and one with several in a string can have a decoy cut out instead of the real hook. Every cut
of a function out of a file, and every splice into one, goes through `lines` here.
"""

from __future__ import annotations

import ast
import re

_PARSER_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def decode(data: bytes) -> str:
    """UTF-8 text without a leading byte-order mark (which `ast.parse` of a str refuses).

    Strict: raises UnicodeDecodeError rather than guessing at bytes the parser would not see.
    """
    return data.decode("utf-8-sig")


def lines(source: str) -> list[str]:
    """The source's lines with their endings, split exactly where the parser splits them."""
    return _PARSER_LINE.findall(source)


def function_span(node: ast.FunctionDef) -> tuple[int, int]:
    """1-based inclusive line numbers of a function, its decorators included."""
    return min([node.lineno, *(d.lineno for d in node.decorator_list)]), node.end_lineno or node.lineno


def function_text(source: str, node: ast.FunctionDef) -> str:
    """The whole lines of `source` that hold `node` (parsed from that same source)."""
    start, end = function_span(node)
    return "".join(lines(source)[start - 1:end])


def replace_lines(source: str, span: tuple[int, int], text: str) -> str:
    """`source` with lines span[0]..span[1] (1-based, inclusive) replaced by `text`."""
    all_lines = lines(source)
    start, end = span
    body = text if text.endswith(("\n", "\r")) else text + "\n"
    return "".join(all_lines[:start - 1]) + body + "".join(all_lines[end:])
