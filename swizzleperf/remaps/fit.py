"""Fit a remap function to a kernel's hook: its name, parameter names and annotations.

Used when an LLM's answer names things differently and when a library remap is transplanted
into another kernel. A change is made only when it is unambiguous (parameters mapped by
position, no reordering guessed at, no clash with a name the body uses); otherwise the reason
is returned in words a person (or a model) can act on.
"""

from __future__ import annotations

import ast
import re
import textwrap

from swizzleperf.errors import RemapRejected
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.untrusted import source_text


def _names_used(node: ast.FunctionDef) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.mapping.get(node.id, node.id)
        return node


def fit_signature(node: ast.FunctionDef, hook: HookSignature) -> tuple[str | None, list[str], bool]:
    """Make the function's parameters the hook's, where that is unambiguous.

    Returns (error, notes, changed). Parameters are mapped by position only when the counts
    match, no expected name sits at another position (a reordering is not guessed at), and
    no new name collides with a name the body already uses.
    """
    args = node.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
        return "the remap function must take plain positional parameters without defaults", [], False
    got = [a.arg for a in args.args]
    want = list(hook.params)
    expected = f"`{hook.render()}`"
    if len(got) != len(want):
        return f"the remap function takes ({', '.join(got)}) but the hook's signature is {expected}", [], False

    notes: list[str] = []
    changed = False
    mapping = {g: w for g, w in zip(got, want) if g != w}
    if mapping:
        moved = [g for g in mapping if g in want]
        if moved:
            return (f"the remap function's parameters ({', '.join(got)}) are not in the hook's order; "
                    f"use exactly {expected}"), [], False
        params = set(got)
        clashes = sorted((_names_used(node) - params) & set(mapping.values()))
        if clashes:
            return (f"the remap function's parameters ({', '.join(got)}) differ from {expected} and its body "
                    f"already uses {', '.join(clashes)}; use the hook's parameter names"), [], False
        _Rename(mapping).visit(node)
        for arg in args.args:
            arg.arg = mapping.get(arg.arg, arg.arg)
        notes.append("renamed parameters " + ", ".join(f"{g} -> {w}" for g, w in mapping.items())
                     + " (by position) to match the hook's signature")
        changed = True

    annotation_notes = _fit_annotations(node, hook)
    return None, notes + annotation_notes, changed or bool(annotation_notes)


def _fit_annotations(node: ast.FunctionDef, hook: HookSignature) -> list[str]:
    """Annotate the hook's constexpr parameters as tl.constexpr and no other; drop a return annotation.
    Returns a note per change."""
    notes = []
    constexpr_from = len(hook.params) - len(hook.constexprs)
    for index, arg in enumerate(node.args.args):
        annotation = None if arg.annotation is None else ast.unparse(arg.annotation)
        wanted = "tl.constexpr" if index >= constexpr_from else None
        if annotation == wanted:
            continue
        arg.annotation = None if wanted is None else ast.parse(wanted, mode="eval").body
        if wanted is not None:
            notes.append(f"annotated {arg.arg} as tl.constexpr" + (f" (was {annotation})" if annotation else ""))
        else:
            notes.append(f"removed the annotation {annotation} of {arg.arg} (the hook takes it unannotated)")
    if node.returns is not None:
        notes.append(f"removed the return annotation {ast.unparse(node.returns)}")
        node.returns = None
    return notes


def render_function(node: ast.FunctionDef, lines: list[str], changed: bool, old_name: str) -> tuple[str, list[str]]:
    """The function's source: its own text when only its name changed (comments kept), else unparsed."""
    notes: list[str] = []
    decorators = [ast.unparse(d) for d in node.decorator_list]
    if decorators != ["triton.jit"]:
        node.decorator_list = [ast.parse("triton.jit", mode="eval").body]
        notes.append(f"replaced the decorators {', '.join('@' + d for d in decorators)} with @triton.jit"
                     if decorators else "added the @triton.jit decorator")
        changed = True
    if changed:
        notes.append("rewrote the function from its syntax tree (comments are not kept)")
        return ast.unparse(node) + "\n", notes
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    text = lines[start - 1:node.end_lineno]
    def_line = node.lineno - start
    text[def_line] = re.sub(rf"\bdef\s+{re.escape(old_name)}\b", f"def {node.name}", text[def_line], count=1)
    return textwrap.dedent("\n".join(text)) + "\n", notes


def adapt_to_hook(source: str, hook: HookSignature) -> tuple[str, list[str]]:
    """`source`'s single function renamed and re-parametrised as `hook`; raises RemapRejected."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise RemapRejected("signature", f"line {exc.lineno}: {exc.msg}") from exc
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(functions) != 1:
        raise RemapRejected("signature", f"expected one function, found {len(functions)}")
    node = functions[0]
    old_name, node.name = node.name, hook.name
    error, notes, changed = fit_signature(node, hook)
    if error:
        raise RemapRejected("signature", error)
    lines = [line.rstrip("\r\n") for line in source_text.lines(source)]  # the lines the parser numbered
    text, render_notes = render_function(node, lines, changed, old_name)
    return text, notes + render_notes
