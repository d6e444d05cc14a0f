"""Pull usable parts out of a model's free text: answer fields, and the remap hook's source.

Models wrap code in fences, chat around it, return the whole kernel file, rename the function
or its parameters, or answer with no code at all. Everything here works on the syntax tree
(`ast.parse`) and never executes what it reads. When a repair is unambiguous it is made and
written down in `notes`; otherwise `error` says what was wrong in words the model can act on
next time (the loop shows it as the attempt's reason).
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

from swizzleperf.kernel import HookSignature

# ChatAdapter's section marker `[[ ## name ## ]]`, tolerant of spacing.
_FIELD_HEADER = re.compile(r"^\s*\[\[\s*##\s*(\w+)\s*##\s*\]\]\s*(.*)$")
# An opening fence (``` or ~~~, optional language tag) and its closing twin.
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+.-]*)[^\n]*$")
_CODE_LANGS = {"", "python", "py", "python3", "triton"}
# A line that opens top-level Python code in unfenced prose.
_CODE_START = re.compile(r"(@|def |import |from \S+ import )")
_DEFINES_FUNCTION = re.compile(r"^\s*def\s+\w+\s*\(", re.M)
_SHRINK_TRIES = 20  # per region: drop trailing lines (prose glued to the code) at most this often
_MAX_REGION_LINES = 400  # a remap is a few lines; a whole kernel file a few hundred
_PARSE_BUDGET_LINES = 20_000  # lines parsed per answer in unfenced prose: a hostile answer cannot stall the loop
_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError)  # null bytes, absurd nesting


def split_fields(text: str, names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """The `[[ ## name ## ]]` sections of a chat-format answer, for the names asked for.

    Used when DSPy's strict parser rejects an answer (a missing field, a malformed JSON
    value): whatever sections are present are still worth having.
    """
    wanted = set(names)
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = _FIELD_HEADER.match(line)
        if match:
            name = match.group(1)
            current = sections.setdefault(name, []) if name in wanted and name not in sections else None
            if current is not None and match.group(2):
                current.append(match.group(2))
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in sections.items()}


@dataclass(frozen=True)
class CodeBlock:
    text: str
    fenced: bool


def code_blocks(text: str) -> list[CodeBlock]:
    """Fenced code blocks in document order; the whole text when there are none.

    An unclosed fence (an answer cut off by the token limit) runs to the end of the text.
    Blocks tagged with a language other than Python are skipped.
    """
    lines = text.splitlines()
    blocks: list[CodeBlock] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, lang = opening.group("fence"), opening.group("lang").lower()
        body: list[str] = []
        i += 1
        while i < len(lines):
            stripped = lines[i].rstrip()
            if stripped.endswith(fence):  # a closing fence, alone or after the last code line
                before = stripped[:-len(fence)]
                if before.strip():
                    body.append(before)
                break
            body.append(lines[i])
            i += 1
        i += 1  # past the closing fence
        if lang in _CODE_LANGS:
            blocks.append(CodeBlock(textwrap.dedent("\n".join(body)), fenced=True))
    return blocks or [CodeBlock(text, fenced=False)]


def _parse_loose(text: str) -> list[tuple[ast.Module, list[str]]]:
    """Code regions of unfenced prose that parse and define a function, in order.

    A region starts at a column-0 line that opens code (`@`, `def`, `import`) and runs over the
    indented or blank lines after it (prose sits at column 0). A region that does not parse is
    retried with trailing lines dropped a bounded number of times, then from its next line;
    the whole search stops after parsing _PARSE_BUDGET_LINES lines.
    """
    lines = textwrap.dedent(text).splitlines()
    regions: list[tuple[ast.Module, list[str]]] = []
    budget = _PARSE_BUDGET_LINES
    i = 0
    while i < len(lines) and budget > 0:
        if not _CODE_START.match(lines[i]):
            i += 1
            continue
        end, limit = i + 1, min(len(lines), i + _MAX_REGION_LINES)
        while end < limit and (not lines[end].strip() or lines[end][0] in " \t)]"
                               or _CODE_START.match(lines[end])):
            end += 1
        for stop in range(end, max(i, end - _SHRINK_TRIES), -1):
            budget -= stop - i
            try:
                tree = ast.parse("\n".join(lines[i:stop]))
            except _PARSE_ERRORS:
                continue
            if any(isinstance(node, ast.FunctionDef) for node in tree.body):
                regions.append((tree, lines[i:stop]))
            i = stop
            break
        else:
            i += 1  # a prose line that looked like code (`@someone`): the region may start on a later line
    return regions


def _looks_like_kernel(node: ast.FunctionDef) -> bool:
    """A kernel, not a remap: it reads its own program id or touches memory."""
    calls = {ast.unparse(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    return bool(calls & {"tl.program_id", "tl.load", "tl.store", "tl.atomic_add"})


@dataclass(frozen=True)
class Extraction:
    """The hook's source as proposed, or why there is none."""

    source: str
    error: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None


def _failure(reason: str, hook: HookSignature) -> Extraction:
    return Extraction(source="", error=f"{reason}. Answer with the complete remap function "
                                        f"`@triton.jit {hook.render()}` in a ```python block in the code field.")


def _choose_function(tree: ast.Module, hook: HookSignature) -> tuple[ast.FunctionDef | None, str | None, list[str]]:
    """The function meant as the hook: (node, error, notes)."""
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    named = [f for f in functions if f.name == hook.name]
    if named:
        return named[-1], None, []
    arity = [f for f in functions if len(f.args.args) == len(hook.params) and not _looks_like_kernel(f)]
    if len(arity) == 1:
        return arity[0], None, [f"renamed function {arity[0].name}() to {hook.name}()"]
    names = ", ".join(f"{f.name}()" for f in functions)
    if not arity:
        return None, f"none of the functions in the answer ({names}) is the remap function {hook.name}()", []
    return None, (f"several functions in the answer ({names}) could be the remap function and none is named "
                  f"{hook.name}(); name the remap function {hook.name}"), []


def _helpers_called(node: ast.FunctionDef, tree: ast.Module) -> list[str]:
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n is not node}
    called = {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return sorted(called & defined)


def _names_used(node: ast.FunctionDef) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.mapping.get(node.id, node.id)
        return node


def _fit_signature(node: ast.FunctionDef, hook: HookSignature) -> tuple[str | None, list[str], bool]:
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

    constexpr_from = len(hook.params) - len(hook.constexprs)
    for index, arg in enumerate(args.args):
        annotation = None if arg.annotation is None else ast.unparse(arg.annotation)
        wanted = "tl.constexpr" if index >= constexpr_from else None
        if annotation == wanted:
            continue
        arg.annotation = None if wanted is None else ast.parse(wanted, mode="eval").body
        if wanted is not None:
            notes.append(f"annotated {arg.arg} as tl.constexpr" + (f" (was {annotation})" if annotation else ""))
        else:
            notes.append(f"removed the annotation {annotation} of {arg.arg} (the hook takes it unannotated)")
        changed = True
    if node.returns is not None:
        notes.append(f"removed the return annotation {ast.unparse(node.returns)}")
        node.returns = None
        changed = True
    return None, notes, changed


def _render(node: ast.FunctionDef, lines: list[str], changed: bool, old_name: str) -> tuple[str, list[str]]:
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


def _from_tree(tree: ast.Module, lines: list[str], hook: HookSignature) -> Extraction:
    node, error, notes = _choose_function(tree, hook)
    if node is None:
        return _failure(error, hook)
    helpers = _helpers_called(node, tree)
    if helpers:
        return _failure(f"the remap function calls {', '.join(helpers)}() defined outside it; only the remap "
                        f"function is kept, so inline that logic into {hook.name}()", hook)
    old_name, node.name = node.name, hook.name
    error, fit_notes, changed = _fit_signature(node, hook)
    if error:
        return _failure(error, hook)
    source, render_notes = _render(node, lines, changed, old_name)
    return Extraction(source=source, notes=tuple(notes + fit_notes + render_notes))


def _parsed(block: CodeBlock) -> list[tuple[ast.Module, list[str]]] | str:
    """The block's syntax tree(s) with their lines, or why a fenced block does not parse."""
    try:
        return [(ast.parse(block.text), block.text.splitlines())]
    except _PARSE_ERRORS as exc:
        if block.fenced:
            where = f"line {exc.lineno}: {exc.msg}" if isinstance(exc, SyntaxError) else type(exc).__name__
            return f"the code in the answer does not parse ({where})"
        return _parse_loose(block.text)


def extract_hook(text: str, hook: HookSignature) -> Extraction:
    """The remap hook's source from a model's answer (a code field or the whole reply).

    The last block that defines a function is the answer: models quote the original function
    before giving the new one. If that block is unusable, its problem is reported rather than
    falling back to an earlier block (which would usually be the quoted original).
    """
    if not text or not text.strip():
        return _failure("the answer contained no code", hook)
    for block in reversed(code_blocks(text)):
        if not _DEFINES_FUNCTION.search(block.text):
            continue
        parsed = _parsed(block)
        if isinstance(parsed, str):
            return _failure(parsed, hook)
        trees = [(tree, lines) for tree, lines in parsed if any(isinstance(n, ast.FunctionDef) for n in tree.body)]
        if not trees:
            continue
        named = [t for t in trees if any(isinstance(n, ast.FunctionDef) and n.name == hook.name for n in t[0].body)]
        result = _from_tree(*(named or trees)[-1], hook)
        if result.ok and not block.fenced:
            return Extraction(source=result.source, notes=("the code was not in a fenced block", *result.notes))
        return result
    return _failure("no Python function was found in the answer", hook)
