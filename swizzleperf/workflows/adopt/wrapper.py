"""The host wrapper, made launchable by the contract: into given outputs, with a die count.

Why: `launch(inputs, outputs, size, num_xcds)` must write into the NaN-filled outputs that the
correctness check made and pass NUM_XCDS to the kernel. Rather than copy the wrapper's grid and
argument logic into `launch`, the wrapper gains `out=None` (its allocation becomes
`... if out is None else out`) and `num_xcds=8`, and its launch passes the pinned config and
NUM_XCDS. Called as before, it behaves as before.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from swizzleperf.workflows.adopt.hook import HookPlan
from swizzleperf.workflows.adopt.pin import Pin
from swizzleperf.workflows.adopt.scan import Launch, Scan
from swizzleperf.workflows.adopt.text import Edit, indent_of


@dataclass
class Outputs:
    """The tensors the wrapper allocates and returns: name -> its allocation statement."""

    allocations: dict[str, ast.Assign]

    def param(self, name: str) -> str:
        return "out" if len(self.allocations) == 1 else f"out_{name}"


def find_outputs(wrapper: ast.FunctionDef) -> Outputs:
    """Returned names that the wrapper allocates with a torch call (torch.empty, empty_like, zeros...)."""
    returned: list[str] = []
    for node in ast.walk(wrapper):
        if isinstance(node, ast.Return) and node.value is not None:
            elts = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            returned = [e.id for e in elts if isinstance(e, ast.Name)]
    allocations = {}
    for stmt in wrapper.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and stmt.targets[0].id in returned and isinstance(stmt.value, ast.Call) \
                and ast.unparse(stmt.value.func).startswith("torch."):
            allocations.setdefault(stmt.targets[0].id, stmt)
    return Outputs(allocations={n: allocations[n] for n in returned if n in allocations})


def wrapper_edits(scan: Scan, launch: Launch, outputs: Outputs, hook: HookPlan, pinned: Pin | None) -> list[Edit]:
    """out=/num_xcds= parameters, the allocation fallback, and the launch's extra keywords."""
    src, wrapper = scan.src, launch.wrapper
    args = wrapper.args
    anchor = args.defaults[-1] if args.defaults else (args.args[-1] if args.args else None)
    new_params = [f"{outputs.param(n)}=None" for n in outputs.allocations] + ["num_xcds=8"]
    if anchor is None:
        at = src.offset(wrapper.lineno, wrapper.col_offset) + len(f"def {wrapper.name}(")
        edits = [Edit(at, at, ", ".join(new_params))]
    else:
        at = src.end(anchor)
        edits = [Edit(at, at, ", " + ", ".join(new_params))]
    for name, stmt in outputs.allocations.items():
        value = stmt.value
        given = outputs.param(name)
        edits.append(Edit(src.end(value), src.end(value), f" if {given} is None else {given}"))
    extra = ([f"**{pinned.config_name}"] if pinned is not None and pinned.values is not None else [])
    extra += [f"{p}=launch_grid[{i}]" for i, p in enumerate(hook.axis_params)] + ["NUM_XCDS=num_xcds"]
    call = launch.call
    last = max([*call.args, *(k.value for k in call.keywords)], key=lambda n: (n.end_lineno, n.end_col_offset),
               default=None)
    if last is None:
        at = src.end(call) - 1
        edits.append(Edit(at, at, ", ".join(extra)))
    else:
        edits.append(Edit(src.end(last), src.end(last), ", " + ", ".join(extra)))
    if hook.axis_params:
        edits += _one_d_launch(scan, launch, hook, pinned)
    return edits


def _one_d_launch(scan: Scan, launch: Launch, hook: HookPlan, pinned: Pin | None) -> list[Edit]:
    """A multi-axis launch becomes one 1D launch of the grid's product; the grid goes to the hook."""
    src = scan.src
    grid = src.segment(launch.grid)
    is_lambda = isinstance(launch.grid, ast.Lambda) or _bound_to_lambda(launch)
    if is_lambda:
        meta = [f"**{pinned.config_name}"] if pinned is not None and pinned.values is not None else []
        meta += [f'"{k.arg}": {src.segment(k.value)}' for k in launch.call.keywords if k.arg]
        grid = f"({grid})({{{', '.join(meta)}}})"
    indent = indent_of(src, launch.statement)
    count = len(hook.axis_params)
    before = (f"{indent}launch_grid = tuple({grid})\n"
              f"{indent}launch_grid = launch_grid + (1,) * ({count} - len(launch_grid))  # one 1D launch of the "
              f"product: the hook gives each axis its index\n")
    at = src.line_start(launch.statement.lineno)
    product = " * ".join(f"launch_grid[{i}]" for i in range(count))
    return [Edit(at, at, before), Edit(src.start(launch.grid), src.end(launch.grid), f"({product},)")]


def _bound_to_lambda(launch: Launch) -> bool:
    if not isinstance(launch.grid, ast.Name):
        return False
    return any(isinstance(s, ast.Assign) and isinstance(s.value, ast.Lambda)
               and any(isinstance(t, ast.Name) and t.id == launch.grid.id for t in s.targets)
               for s in launch.wrapper.body)
