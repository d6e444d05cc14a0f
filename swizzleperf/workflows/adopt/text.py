"""Edits of the stock module's text located by syntax-tree positions, never by searching the text.

Positions come from `ast` (1-based lines, UTF-8 byte columns); lines are split where the parser
splits them (`source_text.lines`), so a form feed or U+2028 in a comment cannot shift an edit.
Every change to the user's code goes through `Edit`, so what is not edited stays byte for byte.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

from swizzleperf.untrusted import source_text


@dataclass(frozen=True)
class Edit:
    """Replace source[start:end] (character offsets) with `text`."""

    start: int
    end: int
    text: str


class Source:
    """The stock module's text with offset lookups for syntax-tree positions."""

    def __init__(self, text: str):
        self.text = text
        self.lines = source_text.lines(text)
        self._line_starts = [0]
        for line in self.lines:
            self._line_starts.append(self._line_starts[-1] + len(line))

    def offset(self, lineno: int, col: int) -> int:
        """Character offset of a (1-based line, UTF-8 byte column) position."""
        line = self.lines[lineno - 1] if lineno <= len(self.lines) else ""
        return self._line_starts[lineno - 1] + len(line.encode()[:col].decode(errors="ignore"))

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)

    def segment(self, node: ast.AST) -> str:
        return self.text[self.start(node):self.end(node)]

    def line_start(self, lineno: int) -> int:
        return self._line_starts[lineno - 1]

    def line_end(self, lineno: int) -> int:
        """Offset just past line `lineno`'s line break."""
        return self._line_starts[lineno]

    def block(self, first_line: int, last_line: int) -> str:
        """Whole lines first_line..last_line (1-based, inclusive), line breaks included."""
        return "".join(self.lines[first_line - 1:last_line])

    def comments_above(self, lineno: int) -> int:
        """The first line of the comment lines directly above `lineno` (no blank line between)."""
        while lineno > 1 and self.lines[lineno - 2].lstrip().startswith("#"):
            lineno -= 1
        return lineno


def apply(text: str, edits: list[Edit]) -> str:
    """`text` with every edit applied; overlapping edits are a bug in the caller."""
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    for before, after in zip(ordered, ordered[1:]):
        if after.start < before.end:
            raise ValueError(f"overlapping edits at {before.start}-{before.end} and {after.start}-{after.end}")
    for edit in reversed(ordered):
        text = text[:edit.start] + edit.text + text[edit.end:]
    return text


def reindent(block: str, indent: str) -> str:
    """`block` moved to a new indentation (blank lines stay empty)."""
    return textwrap.indent(textwrap.dedent(block), indent)


def indent_of(src: Source, node: ast.AST) -> str:
    line = src.lines[node.lineno - 1]
    return line[:len(line) - len(line.lstrip())]


def collapse_blank_lines(text: str) -> str:
    """At most two blank lines in a row, outside string literals (which stay byte for byte).

    Moving statements out leaves the blank lines around them; this keeps the file PEP 8 shaped."""
    import io
    import tokenize
    in_string: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
            in_string.update(range(tok.start[0] + 1, tok.end[0] + 1))
    kept, blanks = [], 0
    for number, line in enumerate(source_text.lines(text), start=1):
        blanks = blanks + 1 if not line.strip() and number not in in_string else 0
        if blanks <= 2:
            kept.append(line)
    return "".join(kept)


def quoted(expr_text: str) -> str:
    """ast.unparse's 'single' quotes as "double" ones, where no quote character is inside."""
    return expr_text.replace("'", '"') if '"' not in expr_text else expr_text
