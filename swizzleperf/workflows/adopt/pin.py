"""Pin an @triton.autotune'd kernel to one config, read from the syntax tree.

Why: the autotuner times every config on a GPU the first time it sees a new key, so which config
runs depends on the machine; the simulator and the correctness check need one fixed program
shape, and on the CPU interpreter there is nothing to time. The decorator is removed and the
chosen config becomes a module-level dict that the wrapper's launch passes on.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field

from swizzleperf.workflows.adopt.scan import Scan

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


@dataclass
class Pin:
    """The chosen config and where the autotune decorator was."""

    decorator: ast.expr
    config_name: str  # the module-level dict written into the adopted file
    values: dict[str, object] | None  # None: the configs could not be read (a TODO)
    key: list[str] = field(default_factory=list)
    why: str = ""
    dropped: list[str] = field(default_factory=list)  # autotune arguments that go with the decorator

    def constant(self, name: str) -> int | None:
        """The pinned value of a constexpr, when the config sets it to an int."""
        value = (self.values or {}).get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_autotune(decorator: ast.expr) -> bool:
    return isinstance(decorator, ast.Call) and ast.unparse(decorator.func) in ("triton.autotune", "autotune")


def _config(node: ast.expr) -> dict[str, object] | None:
    """A triton.Config(...) call as one dict of constexprs and launch options, or None."""
    if not (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "Config"):
        return None
    kwargs = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "kwargs"), None)
    try:
        values = dict(ast.literal_eval(kwargs)) if kwargs is not None else {}
        for k in node.keywords:
            if k.arg in LAUNCH_OPTIONS:
                values[k.arg] = ast.literal_eval(k.value)
    except ValueError:
        return None
    return values


def _configs(expr: ast.expr, scan: Scan, depth: int = 0) -> tuple[list[dict], str] | None:
    """The configs an expression evaluates to: a literal list, or what a module function returns first."""
    if isinstance(expr, (ast.List, ast.Tuple)):
        found = [_config(e) for e in expr.elts]
        return (found, "") if found and all(c is not None for c in found) else None
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in scan.functions \
            and depth < 4:
        returns = sorted((n for n in ast.walk(scan.functions[expr.func.id]) if isinstance(n, ast.Return)),
                         key=lambda n: n.lineno)
        for node in returns:  # in source order: the first branch's list (CUDA's, in the tutorials)
            if node.value is not None:
                got = _configs(node.value, scan, depth + 1)
                if got is not None:
                    return got[0], got[1] or f"{expr.func.id}()"
    if isinstance(expr, ast.Name):  # a module-level CONFIGS = [...]
        for stmt in scan.tree.body:
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == expr.id for t in stmt.targets):
                return _configs(stmt.value, scan, depth + 1)
    return None


def pin(scan: Scan) -> Pin | None:
    """The pin for the kernel's autotune decorator, or None when it is not autotuned."""
    decorator = next((d for d in scan.kernel.decorator_list if _is_autotune(d)), None)
    if decorator is None:
        return None
    args = {k.arg: k.value for k in decorator.keywords if k.arg}
    configs_expr = args.pop("configs", decorator.args[0] if decorator.args else None)
    key_expr = args.pop("key", decorator.args[1] if len(decorator.args) > 1 else None)
    try:
        key = [str(k) for k in ast.literal_eval(key_expr)] if key_expr is not None else []
    except ValueError:
        key = []
    pinned = Pin(decorator=decorator, config_name=f"{scan.name.upper()}_CONFIG", values=None, key=key,
                 dropped=[f"{name}={ast.unparse(value)}" for name, value in args.items()])
    found = _configs(configs_expr, scan) if configs_expr is not None else None
    if not found:
        what = ast.unparse(configs_expr) if configs_expr is not None else "nothing"
        pinned.why = (f"its configs ({what}) are not a list of triton.Config(...) literals that can be read "
                      f"without running the module")
        return pinned
    configs, origin = found
    pinned.values = configs[0]
    source = f" (from {origin}, the first list the configs expression returns in source order)" if origin else ""
    pinned.why = (f"the first of its {len(configs)} autotune configs{source}: the autotuner would time them all on "
                  f"the GPU for each new {'/'.join(key) or 'key'}, which the CPU interpreter and the simulator "
                  f"cannot; the first listed is the author's first choice. Edit {pinned.config_name} to pin "
                  f"another")
    return pinned


def config_text(pinned: Pin) -> str:
    """The module-level dict of the pinned config, with a comment that says why."""
    values = ", ".join(f"{k!r}: {v!r}".replace("'", '"') for k, v in (pinned.values or {}).items())
    why = textwrap.wrap(f"Pinned by `swizzleperf adopt` in place of @triton.autotune: {pinned.why}.", 98)
    return "".join(f"# {line}\n" for line in why) + f"{pinned.config_name} = {{{values}}}\n"
