"""Kernel- and wrapper-side expressions rewritten over the declaration's `size` dict.

grid(size) and make_outputs(size, device) must compute, from the named problem sizes alone, what
the wrapper computes from its tensors: `tl.cdiv(M, BLOCK_SIZE_M)` in the kernel becomes
`triton.cdiv(size["M"], MATMUL_KERNEL_CONFIG["BLOCK_SIZE_M"])`. A name that cannot be traced to a
size, the pinned config, a literal or a module constant raises Unresolved, naming it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from swizzleperf.workflows.adopt.scan import Launch, Scan
from swizzleperf.workflows.adopt.text import quoted


class Unresolved(Exception):
    """An expression depends on something the declaration cannot compute from `size`."""


def _simple_assigns(body: list[ast.stmt]) -> dict[str, ast.expr]:
    """name -> value of single-name assignments in a function body (the first one wins)."""
    found: dict[str, ast.expr] = {}
    for stmt in body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            found.setdefault(stmt.targets[0].id, stmt.value)
    return found


def shape_dims(wrapper: ast.FunctionDef) -> dict[str, tuple[str, int]]:
    """Wrapper names bound to tensor dimensions: `M, K = a.shape` / `M = a.shape[0]` -> {M: (a, 0)}."""
    dims: dict[str, tuple[str, int]] = {}
    for stmt in wrapper.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        target, value = stmt.targets[0], stmt.value
        if isinstance(value, ast.Attribute) and value.attr == "shape" and isinstance(value.value, ast.Name) \
                and isinstance(target, ast.Tuple):
            for i, elt in enumerate(target.elts):
                if isinstance(elt, ast.Name):
                    dims.setdefault(elt.id, (value.value.id, i))
        elif isinstance(value, ast.Subscript) and isinstance(target, ast.Name) \
                and ast.unparse(value.value).endswith(".shape") and isinstance(value.value, ast.Attribute) \
                and isinstance(value.value.value, ast.Name) and isinstance(value.slice, ast.Constant):
            dims.setdefault(target.id, (value.value.value.id, value.slice.value))
    return dims


def tensor_shapes(wrapper: ast.FunctionDef) -> dict[str, list[str]]:
    """Each tensor parameter's dimensions by axis, as the wrapper names them (`K, N = b.shape` -> b: [K, N])."""
    shapes: dict[str, dict[int, str]] = {}
    for stmt in wrapper.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        target, value = stmt.targets[0], stmt.value
        if isinstance(value, ast.Attribute) and value.attr == "shape" and isinstance(value.value, ast.Name) \
                and isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            shapes.setdefault(value.value.id, {}).update({i: e.id for i, e in enumerate(target.elts)})
        elif isinstance(target, ast.Name) and isinstance(value, ast.Subscript) \
                and isinstance(value.value, ast.Attribute) and value.value.attr == "shape" \
                and isinstance(value.value.value, ast.Name) and isinstance(value.slice, ast.Constant):
            shapes.setdefault(value.value.value.id, {})[value.slice.value] = target.id
    return {p: [axes[i] for i in sorted(axes)] for p, axes in shapes.items()
            if sorted(axes) == list(range(len(axes)))}


@dataclass
class Context:
    """What names mean on the host side (the wrapper) and on the kernel side."""

    scan: Scan
    launch: Launch
    dims: dict[str, tuple[str, int]]
    config_name: str | None
    shapes: dict[str, list[str]] = field(default_factory=dict)  # tensor parameter -> its dimensions by axis
    config_keys: set[str] = field(default_factory=set)
    module_constants: set[str] = field(default_factory=set)

    def size_of(self, dim: str) -> str:
        return f'size["{dim}"]'

    # --- host side -----------------------------------------------------------------------
    def host(self, expr: ast.expr, depth: int = 0) -> str:
        """A wrapper expression over `size` (wrapper locals inlined, META[...] from the launch)."""
        return quoted(ast.unparse(self._host(expr, depth)))

    def _host(self, expr: ast.expr, depth: int) -> ast.expr:
        if depth > 12:
            raise Unresolved(ast.unparse(expr))
        local = _simple_assigns(self.launch.wrapper.body)
        wrapper_params = self._wrapper_defaults()
        ctx = self

        class Rewrite(ast.NodeTransformer):
            def visit_Name(self, node):
                if node.id in ctx.dims:
                    return ast.parse(ctx.size_of(node.id), mode="eval").body
                if node.id in local:
                    return ctx._host(local[node.id], depth + 1)
                if node.id in wrapper_params:
                    return wrapper_params[node.id]
                if node.id in ctx.module_constants or node.id in ("torch", "triton", "tl", "min", "max"):
                    return node
                raise Unresolved(node.id)

            def visit_Subscript(self, node):
                key = node.slice.value if isinstance(node.slice, ast.Constant) else None
                if isinstance(node.value, ast.Name) and node.value.id not in ctx.dims and isinstance(key, str):
                    return ctx._meta(key, depth)  # META["BLOCK_SIZE_M"] in a grid lambda
                return self.generic_visit(node)

        return Rewrite().visit(_copy(expr))

    def _wrapper_defaults(self) -> dict[str, ast.expr]:
        args = self.launch.wrapper.args
        positional = args.args[len(args.args) - len(args.defaults):]
        return {a.arg: d for a, d in zip(positional, args.defaults) if isinstance(d, ast.Constant)}

    def _meta(self, key: str, depth: int) -> ast.expr:
        """A launch-time meta-parameter: from the pinned config or the launch's own keyword."""
        if key in self.config_keys:
            return ast.parse(f'{self.config_name}["{key}"]', mode="eval").body
        passed = {k.arg: k.value for k in self.launch.call.keywords if k.arg}
        if key in passed:
            return self._host(passed[key], depth + 1)
        raise Unresolved(f'META["{key}"]')

    # --- kernel side ---------------------------------------------------------------------
    def kernel(self, expr: ast.expr, depth: int = 0) -> str:
        """A kernel expression over `size`: parameters become what the launch passes for them."""
        return quoted(ast.unparse(self._kernel(expr, depth)))

    def _kernel(self, expr: ast.expr, depth: int) -> ast.expr:
        if depth > 12:
            raise Unresolved(ast.unparse(expr))
        passed = self.launch.kernel_args(self.scan.kernel)
        local = _simple_assigns(self.scan.kernel.body)
        ctx = self

        class Rewrite(ast.NodeTransformer):
            def visit_Attribute(self, node):
                if ast.unparse(node) in ("tl.cdiv", "triton.language.cdiv"):
                    return ast.parse("triton.cdiv", mode="eval").body
                return self.generic_visit(node)

            def visit_Name(self, node):
                if node.id in ctx.config_keys:
                    return ctx._meta(node.id, depth)
                if node.id in passed:
                    return ctx._host(passed[node.id], depth + 1)
                if node.id in local:
                    return ctx._kernel(local[node.id], depth + 1)
                if node.id in ctx.module_constants or node.id in ("triton", "min", "max"):
                    return node
                raise Unresolved(node.id)

        return Rewrite().visit(_copy(expr))


def _copy(expr: ast.expr) -> ast.expr:
    return ast.parse(ast.unparse(expr), mode="eval").body


def module_constants(tree: ast.Module, moved: set[str]) -> set[str]:
    """Module-level names bound to literals that stay at module level (BLOCK = 1024)."""
    names = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
            names |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
    return names - moved


def launch_grid(ctx: Context) -> list[ast.expr]:
    """The launch grid's axis expressions in the wrapper (a tuple, a name bound to one, or a lambda META: tuple)."""
    expr = ctx.launch.grid
    local = _simple_assigns(ctx.launch.wrapper.body)
    if isinstance(expr, ast.Name) and expr.id in local:
        expr = local[expr.id]
    if isinstance(expr, ast.Lambda):
        expr = expr.body
    if isinstance(expr, (ast.Tuple, ast.List)):
        return list(expr.elts)
    raise Unresolved(f"the launch grid {ast.unparse(ctx.launch.grid)}")
