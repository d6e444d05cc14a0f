"""A candidate schedule: the remap hook's text, and the loop-order hook's where it is rewritten too.

A candidate is one piece of text, as a proposer writes it and as the history stores it: the remap
function, and, for a kernel that declares LOOP_ORDER_HOOK, optionally that function after it (e.g.
swizzled head-first and the sawtooth K/V order). One text keeps one identity per idea (the search
and the LLM loop never retry it), one diff and one file to apply. The checks take it apart here:
the remap goes where a remap goes, the loop order through `validation.loop_order`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from swizzleperf.errors import RemapRejected
from swizzleperf.untrusted import parse as untrusted
from swizzleperf.untrusted import source_text
from swizzleperf.untrusted.parse import MAX_SOURCE_CHARS


@dataclass(frozen=True)
class Schedule:
    remap: str                      # the remap hook's text (everything of the candidate but the loop order)
    loop_order: str | None = None   # the loop-order hook's text, when the candidate rewrites it


def split(source: str, loop_order_name: str | None) -> Schedule:
    """The candidate's parts. Without a loop-order hook in the kernel, or text that does not parse, the whole
    text is the remap (whose own check says what is wrong with it)."""
    if loop_order_name is None or loop_order_name not in source:
        return Schedule(source)
    try:
        module = untrusted.parse(source, MAX_SOURCE_CHARS)
    except RemapRejected:
        return Schedule(source)
    found = [s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == loop_order_name]
    if len(found) != 1:
        return Schedule(source)
    start, end = source_text.function_span(found[0])
    lines = source_text.lines(source)
    remap = "".join(lines[:start - 1] + lines[end:]).strip("\n") + "\n"
    return Schedule(remap=remap, loop_order="".join(lines[start - 1:end]))


def join(remap: str, loop_order: str | None) -> str:
    """One candidate's text from its parts (the loop order after the remap, a blank line apart)."""
    if loop_order is None:
        return remap
    return remap.rstrip("\n") + "\n\n\n" + loop_order.strip("\n") + "\n"
