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

from swizzleperf.errors import RemapRejected
from swizzleperf.kernel import candidate
from swizzleperf.kernel.contract import HookSignature, LoopOrderSignature
from swizzleperf.remaps.fit import fit_signature, render_function
from swizzleperf.untrusted import parse as untrusted
from swizzleperf.untrusted import source_text

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
_MAX_ANSWER_CHARS = 1_000_000  # a model's whole answer; a remap is a few hundred characters


def split_fields(text: str, names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """The `[[ ## name ## ]]` sections of a chat-format answer, for the names asked for.

    Used when DSPy's strict parser rejects an answer (a missing field, a malformed JSON
    value): whatever sections are present are still worth having.
    """
    wanted = set(names)
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in _lines(text):
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
    lines = _lines(text)
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
    lines = _lines(textwrap.dedent(text))
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


def _lines(text: str) -> list[str]:
    """Lines without their endings, split where the parser splits (splitlines() also splits at form
    feed and U+2028, so a comment holding one would break the code in two)."""
    return [line.rstrip("\r\n") for line in source_text.lines(text)]


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
    names = untrusted.echo(", ".join(f"{f.name}()" for f in functions))
    if not arity:
        return None, f"none of the functions in the answer ({names}) is the remap function {hook.name}()", []
    return None, (f"several functions in the answer ({names}) could be the remap function and none is named "
                  f"{hook.name}(); name the remap function {hook.name}"), []


def _helpers_called(node: ast.FunctionDef, tree: ast.Module) -> list[str]:
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n is not node}
    called = {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return sorted(called & defined)


def _from_tree(tree: ast.Module, lines: list[str], hook: HookSignature,
               loop_order: LoopOrderSignature | None = None) -> Extraction:
    node, error, notes = _choose_function(tree, hook)
    if node is None:
        return _failure(error, hook)
    order = _loop_order_text(tree, lines, node, loop_order)
    helpers = _helpers_called(node, tree)
    if helpers:
        return _failure(f"the remap function calls {', '.join(helpers)}() defined outside it; only the remap "
                        f"function is kept, so inline that logic into {hook.name}()", hook)
    old_name, node.name = node.name, hook.name
    error, fit_notes, changed = fit_signature(node, hook)
    if error:
        return _failure(error, hook)
    source, render_notes = render_function(node, lines, changed, old_name)
    if order is not None:
        notes.append(f"kept the loop-order function {loop_order.name}() beside the remap")
    return Extraction(source=candidate.join(source, order), notes=tuple(notes + fit_notes + render_notes))


def _loop_order_text(tree: ast.Module, lines: list[str], remap: ast.FunctionDef,
                     loop_order: LoopOrderSignature | None) -> str | None:
    """The kernel's loop-order hook where the answer defines it beside the remap (as written: its checks
    come later, like the remap's), else None."""
    if loop_order is None:
        return None
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == loop_order.name and n is not remap]
    if not found:
        return None
    start, end = source_text.function_span(found[-1])
    return "\n".join(lines[start - 1:end]) + "\n"


def _parsed(block: CodeBlock) -> list[tuple[ast.Module, list[str]]] | str:
    """The block's syntax tree(s) with their lines, or why a fenced block does not parse."""
    try:
        untrusted.scan(block.text, untrusted.MAX_FILE_BYTES)
    except RemapRejected as exc:  # too long, too deep, or a literal too large to print
        return f"the code in the answer was not parsed: {exc.reason}"
    try:
        return [(ast.parse(block.text), _lines(block.text))]
    except _PARSE_ERRORS as exc:
        if block.fenced:
            where = f"line {exc.lineno}: {exc.msg}" if isinstance(exc, SyntaxError) else type(exc).__name__
            return f"the code in the answer does not parse ({where})"
        return _parse_loose(block.text)


def extract_hook(text: str, hook: HookSignature, loop_order: LoopOrderSignature | None = None) -> Extraction:
    """The remap hook's source from a model's answer (a code field or the whole reply).

    The last block that defines a function is the answer: models quote the original function
    before giving the new one. If that block is unusable, its problem is reported rather than
    falling back to an earlier block (which would usually be the quoted original). It never
    raises: whatever goes wrong reading an answer is the attempt's reason.
    """
    if not text or not text.strip():
        return _failure("the answer contained no code", hook)
    if len(text) > _MAX_ANSWER_CHARS:
        return _failure(f"the answer is {len(text):,} characters long; the limit is {_MAX_ANSWER_CHARS:,}", hook)
    try:
        return _extract(text, hook, loop_order)
    except Exception as exc:  # noqa: BLE001 -- e.g. a tree too large to print back
        return _failure(f"the code in the answer could not be read ({untrusted.echo(f'{type(exc).__name__}: {exc}')})",
                        hook)


def _extract(text: str, hook: HookSignature, loop_order: LoopOrderSignature | None) -> Extraction:
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
        result = _from_tree(*(named or trees)[-1], hook, loop_order)
        if result.ok and not block.fenced:
            return Extraction(source=result.source, notes=("the code was not in a fenced block", *result.notes))
        return result
    return _failure("no Python function was found in the answer", hook)
