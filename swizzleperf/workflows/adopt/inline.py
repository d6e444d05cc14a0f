"""Program-id helpers inlined into the kernel, so the hook can take the whole mapping as it is written.

Kernels often get their program ids through helpers: `pid = get_pid()`, or a library's own remap,
`pid = remap_xcd(pid, n)` then `pid_m, pid_n = pid_grid(pid, num_pid_m, num_pid_n, GROUP)`.
Where such a call is a statement of the kernel and the helper is straight-line index arithmetic
(assignments, then `return`), its body replaces the call: parameters become the arguments (a
temporary where an argument is an expression), locals keep their names unless the kernel uses
them. The hook planner then sees the derivation the helpers spelled out, so the identity hook is
the kernel's current order, and a 2D derivation gives a 2D hook.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from swizzleperf.kernel.contract import _is_triton_jit
from swizzleperf.workflows.adopt.scan import language_aliases, tl_call
from swizzleperf.workflows.adopt.text import Edit, Source, apply


@dataclass
class Inlined:
    text: str
    helpers: list[str] = field(default_factory=list)  # the helpers inlined, in call order


def _body(fn: ast.FunctionDef) -> list[ast.stmt]:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return body


def _inlinable(fn: ast.FunctionDef) -> bool:
    body = _body(fn)
    simple = lambda t: isinstance(t, ast.Name) or (isinstance(t, ast.Tuple) and all(  # noqa: E731
        isinstance(e, ast.Name) for e in t.elts))
    return (bool(body) and isinstance(body[-1], ast.Return) and body[-1].value is not None
            and all(isinstance(s, ast.Assign) and len(s.targets) == 1 and simple(s.targets[0]) for s in body[:-1])
            and not fn.args.vararg and not fn.args.kwarg and not fn.args.kwonlyargs)


def _reads_program_id(fn: ast.FunctionDef, aliases) -> bool:
    return any(tl_call(n, "program_id", aliases) for n in ast.walk(fn))


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, ast.expr]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name):
        if node.id in self.mapping:
            new = self.mapping[node.id]
            return ast.Name(id=new.id, ctx=node.ctx) if isinstance(new, ast.Name) else new
        return node


def _bindings(fn: ast.FunctionDef, call: ast.Call) -> dict[str, ast.expr] | None:
    params = [a.arg for a in fn.args.args]
    defaults = dict(zip(params[len(params) - len(fn.args.defaults):], fn.args.defaults))
    given = dict(zip(params, call.args))
    given.update({k.arg: k.value for k in call.keywords if k.arg})
    if len(call.args) > len(params) or any(p not in given and p not in defaults for p in params):
        return None
    return {p: given.get(p, defaults.get(p)) for p in params}


def _expansion(fn: ast.FunctionDef, stmt: ast.Assign, taken: set[str]) -> list[str] | None:
    bound = _bindings(fn, stmt.value)
    if bound is None:
        return None
    body = _body(fn)
    targets = stmt.targets[0].elts if isinstance(stmt.targets[0], ast.Tuple) else [stmt.targets[0]]
    returned = body[-1].value.elts if isinstance(body[-1].value, ast.Tuple) else [body[-1].value]
    if len(targets) != len(returned) or not all(isinstance(t, ast.Name) for t in targets):
        return None
    keep = {r.id for r, t in zip(returned, targets) if isinstance(r, ast.Name) and r.id == t.id}
    local_names = {n.id for s in body[:-1] for n in ast.walk(s.targets[0]) if isinstance(n, ast.Name)}
    mapping: dict[str, ast.expr] = {n: ast.Name(id=f"_{fn.name}_{n}" if n in taken and n not in keep else n)
                                    for n in local_names}
    lines = []
    for p, arg in bound.items():
        if isinstance(arg, (ast.Name, ast.Constant)):
            mapping[p] = arg
        else:
            mapping[p] = ast.Name(id=f"_{fn.name}_{p}")
            lines.append(f"_{fn.name}_{p} = {ast.unparse(arg)}")
    for s in body[:-1]:
        lines.append(ast.unparse(_Rename(mapping).visit(ast.parse(ast.unparse(s)).body[0])))
    values = [ast.unparse(_Rename(mapping).visit(ast.parse(ast.unparse(r), mode="eval").body)) for r in returned]
    pairs = [(t.id, v) for t, v in zip(targets, values) if t.id != v]
    if pairs:
        lines.append(f"{', '.join(t for t, _ in pairs)} = {', '.join(v for _, v in pairs)}")
    return lines


def inline_pid_helpers(text: str, kernel_name: str) -> Inlined:
    """Inline the helper calls on the kernel's program-id path (statements `x = helper(...)`)."""
    tree = ast.parse(text)
    aliases = language_aliases(tree)
    helpers = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef) and any(_is_triton_jit(d) for d in f.decorator_list) and _inlinable(f)}
    kernel = next((f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == kernel_name), None)
    if kernel is None:
        return Inlined(text)
    taken = {n.id for n in ast.walk(kernel) if isinstance(n, ast.Name)} | {a.arg for a in kernel.args.args}
    src, edits, used, derived = Source(text), [], [], set()
    for stmt in kernel.body:
        call = stmt.value if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) else None
        fn = helpers.get(call.func.id) if call is not None and isinstance(call.func, ast.Name) else None
        reads = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)} if isinstance(stmt, ast.Assign) else set()
        on_path = fn is not None and (_reads_program_id(fn, aliases) or reads & derived)
        lines = _expansion(fn, stmt, taken) if on_path else None
        if lines is not None:
            indent = " " * stmt.col_offset
            edits.append(Edit(src.line_start(stmt.lineno), src.line_end(stmt.end_lineno),
                              "".join(f"{indent}{line}\n" for line in lines)))
            used.append(fn.name)
        if isinstance(stmt, ast.Assign) and (reads & derived or any(tl_call(n, "program_id", aliases)
                                                                     for n in ast.walk(stmt.value)) or lines):
            derived |= {n.id for n in ast.walk(stmt.targets[0]) if isinstance(n, ast.Name)}
    return Inlined(apply(text, edits), used)
