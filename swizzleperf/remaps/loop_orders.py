"""Loop orders: the loop-order hook bound to one local tile, and the orders the search pairs with remaps.

A loop-order hook, `kv_order(step, n_steps, local_tile, NUM_XCDS: tl.constexpr) -> block`, picks which
block a persistent program's tile folds in at each step of its scan. With `local_tile` bound to a value
it is a one-dimensional remap of the steps, which is how validation/loop_order.py checks it.
"""

from __future__ import annotations

import ast

from swizzleperf.errors import RemapRejected
from swizzleperf.kernel.contract import LoopOrderSignature
from swizzleperf.remaps.check import check_signature
from swizzleperf.untrusted import parse as untrusted
from swizzleperf.untrusted.parse import MAX_SOURCE_CHARS


def bind_local_tile(source: str, signature: LoopOrderSignature, value: int) -> str:
    """The hook's text as a remap of the steps alone: local_tile removed from the parameters and set
    to `value` on the first line of the body (a syntax-tree rewrite; nothing is executed)."""
    module = untrusted.parse(source, MAX_SOURCE_CHARS)
    fn = next((s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == signature.name), None)
    if fn is None:
        raise RemapRejected("static", f"no function {signature.name}(); define `{signature.render()}`")
    check_signature(fn, signature.as_hook())
    fn.args.args = [a for a in fn.args.args if a.arg != signature.local_tile]
    first = 1 if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else 0
    bind = ast.Assign(targets=[ast.Name(signature.local_tile, ast.Store())], value=ast.Constant(int(value)))
    fn.body.insert(first, bind)
    return ast.unparse(ast.fix_missing_locations(module)) + "\n"


def symbolic_local_tile(source: str, signature: LoopOrderSignature) -> tuple[str, str]:
    """The hook's text with `local_tile` read from a run-time size one above it (a prover's size is at least
    1), so one proof covers every local tile: the text and that size's name (a syntax-tree rewrite)."""
    module = untrusted.parse(source, MAX_SOURCE_CHARS)
    fn = next((s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == signature.name), None)
    if fn is None:
        raise RemapRejected("static", f"no function {signature.name}(); define `{signature.render()}`")
    check_signature(fn, signature.as_hook())
    taken = {n.id for n in ast.walk(module) if isinstance(n, ast.Name)} | {a.arg for a in fn.args.args}
    size = f"{signature.local_tile}_plus_one"
    while size in taken:
        size += "_"
    next(a for a in fn.args.args if a.arg == signature.local_tile).arg = size
    first = 1 if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else 0
    bind = ast.Assign(targets=[ast.Name(signature.local_tile, ast.Store())],
                      value=ast.BinOp(ast.Name(size, ast.Load()), ast.Sub(), ast.Constant(1)))
    fn.body.insert(first, bind)
    return ast.unparse(ast.fix_missing_locations(module)) + "\n", size


def sawtooth(signature: LoopOrderSignature) -> str:
    """Forward on even local tiles, backward on odd ones: each scan starts on the blocks the program's
    previous scan ended on, which are still in the cache (Zhu, Pan, Ding: Sawtooth Wavefront Reordering)."""
    step, n, tile = signature.step, signature.n_steps, signature.local_tile
    return _render(signature, "sawtooth: forward on even local tiles, backward on odd ones (each scan starts "
                              "where the last ended)",
                   f"return tl.where({tile} % 2 == 0, {step}, {n} - 1 - {step})")


def _render(signature: LoopOrderSignature, doc: str, body: str) -> str:
    return f'@triton.jit\n{signature.render()}:\n    """{doc}"""\n    {body}\n'


LOOP_ORDERS = {"sawtooth": sawtooth}  # beside the kernel's own order (cyclic in attention_persistent)
