"""Import-time driver calls, tests and benchmarks move under `if __name__ == "__main__":`.

Why: swizzleperf imports the kernel file to read its declaration, and the CPU interpreter has no
active driver, so `triton.runtime.driver.active...` at module level fails on import ("0 active
drivers"); an import-time test or benchmark would also run on every import. Definitions,
imports and plain constants stay; everything that runs something, or needs something that moved,
moves (in its original order, after the declaration).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from swizzleperf.workflows.adopt.text import Source, reindent

_KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass
class Moves:
    """Module-level statements that move, and kept functions that read a moved name."""

    statements: list[ast.stmt]
    main_blocks: list[ast.If]  # existing `if __name__ == "__main__":` blocks (their bodies move)
    broken_functions: dict[str, list[str]]  # function -> moved names it reads at call time

    def moved_names(self) -> set[str]:
        return {n for stmt in self.statements for n in _bound(stmt)}


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _free(fn: ast.FunctionDef) -> set[str]:
    """Names a function reads from the module: loaded, and neither a parameter nor assigned inside it."""
    local = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    local |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - local


def _bound(stmt: ast.stmt) -> set[str]:
    """Module-level names a statement binds."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    return {n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)}


def is_main_block(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and "__name__" in _names(stmt.test) and "__main__" in ast.unparse(stmt.test)


def _touches_driver(node: ast.AST) -> bool:
    return any((isinstance(n, ast.Attribute) and n.attr == "driver") or (isinstance(n, ast.Name) and n.id == "driver")
               for n in ast.walk(node))


def _driver_functions(tree: ast.Module) -> set[str]:
    """Module functions that reach the active driver when called (directly or through each other)."""
    funcs = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
    tainted = {name for name, f in funcs.items() if _touches_driver(f)}
    while True:
        more = {name for name, f in funcs.items() if name not in tainted and _calls(f) & tainted}
        if not more:
            return tainted
        tainted |= more


def _calls(node: ast.AST) -> set[str]:
    return {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def _guarded_imports(stmt: ast.stmt) -> bool:
    """`try: from ... import X except ImportError: ...`, or imports under a version test: imports (and aliases
    of what they import) only, so they stay where they are: the kernel may need what they bind."""
    if not isinstance(stmt, (ast.Try, ast.If)) or (isinstance(stmt, ast.If) and _touches_driver(stmt.test)):
        return False
    inner = [s for s in ast.walk(stmt) if isinstance(s, ast.stmt) and s is not stmt]
    return bool(inner) and all(
        isinstance(s, (ast.Import, ast.ImportFrom, ast.Pass, ast.Try, ast.If))
        or (isinstance(s, ast.Assign) and isinstance(s.value, (ast.Constant, ast.Name, ast.Attribute)))
        for s in inner)


def _runs_at_import(stmt: ast.stmt, driver_fns: set[str], jitted: set[str]) -> bool:
    """Whether a kept-looking statement does work at import that must not happen there."""
    if _guarded_imports(stmt):
        return False
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return any(_touches_driver(d) or "testing" in ast.unparse(d) or _calls(d) & driver_fns
                   for d in stmt.decorator_list) and stmt.name not in jitted
    if isinstance(stmt, _KEEP):
        return False
    if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
        return True  # calls, loops, asserts, prints...: import-time test or benchmark code
    value = stmt.value
    makes_tensors = any(isinstance(n, ast.Call) and ast.unparse(n.func).startswith("torch.") for n in ast.walk(value))
    return _touches_driver(value) or bool(_calls(value) & driver_fns) or makes_tensors


def plan(tree: ast.Module, jitted: set[str]) -> Moves:
    """Which module-level statements move under __main__ (to a fixed point: dependents move too)."""
    body = [s for s in tree.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                         and s is tree.body[0])]
    main_blocks = [s for s in body if is_main_block(s)]
    driver_fns = _driver_functions(tree)
    moved = [s for s in body if s not in main_blocks and _runs_at_import(s, driver_fns, jitted)]
    while True:
        names = {n for s in moved for n in _bound(s)}
        more = [s for s in body if s not in moved and s not in main_blocks
                and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Import, ast.ImportFrom))
                and _names(s) & names]
        more += [s for s in body if isinstance(s, ast.FunctionDef) and s not in moved and s.decorator_list
                 and s.name not in jitted and any(_names(d) & names for d in s.decorator_list)]
        if not more:
            break
        moved += more
    moved.sort(key=lambda s: s.lineno)
    names = {n for s in moved for n in _bound(s)}
    broken = {s.name: sorted(_free(s) & names) for s in body
              if isinstance(s, ast.FunctionDef) and s not in moved and _free(s) & names}
    return Moves(statements=moved, main_blocks=main_blocks, broken_functions=broken)


def main_block_text(src: Source, moves: Moves) -> str:
    """The `if __name__ == "__main__":` block of everything that moved, original order and comments kept."""
    chunks, previous_end = [], None
    for stmt in sorted([*moves.statements, *moves.main_blocks], key=lambda s: s.lineno):
        if is_main_block(stmt):
            first, last = src.comments_above(stmt.body[0].lineno), stmt.body[-1].end_lineno
            block = reindent(src.block(first, last), "    ")
        else:
            first, last = statement_lines(src, stmt)
            block = "".join("    " + line if line.strip() else line for line in src.block(first, last).splitlines(True))
        if previous_end is not None and first > previous_end + 1:
            chunks.append("\n")  # the blank line that separated them in the original
        chunks.append(block)
        previous_end = last
    body = "".join(c if c.endswith("\n") else c + "\n" for c in chunks)
    return 'if __name__ == "__main__":\n' + (body or "    pass\n")


def statement_lines(src: Source, stmt: ast.stmt) -> tuple[int, int]:
    """The lines of a moved statement: its decorators and the comments directly above it."""
    first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
    return src.comments_above(first), stmt.end_lineno


def removed_lines(src: Source, stmt: ast.stmt) -> tuple[int, int]:
    """The lines removed for a moved statement: with the blank lines after it when one precedes it too,
    so that moving a statement out of a run of definitions leaves no widening gap."""
    first, last = statement_lines(src, stmt)
    if first == 1 or not src.lines[first - 2].strip():
        while last < len(src.lines) and not src.lines[last].strip():
            last += 1
    return first, last
