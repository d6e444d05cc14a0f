"""A loop-order hook, `kv_order(step, n_steps, local_tile, NUM_XCDS: tl.constexpr) -> block`, checked.

The hook picks which block a persistent program's tile folds in at each step of its scan (FA2's
K/V loop: cyclic is `step`, the sawtooth scans backward on odd local tiles). It must be a
permutation of [0, n_steps) for every trip count and local tile the kernel reaches, or blocks are
skipped or folded twice. For each local tile value checked (LOCAL_TILES: both parities, and the
residues a hook that looks at local_tile % 4 or % 8 could treat apart), the hook with that value
bound is a one-dimensional remap of the steps, `step -> block` on the grid (n_steps,), and goes
through the remap's own check: the static subset, every sampled trip count in a child process,
and the z3 proof for every trip count up to 2**31 - 1.
"""

from __future__ import annotations

import ast

from pydantic import BaseModel, ConfigDict, Field

from swizzleperf.untrusted import parse as untrusted
from swizzleperf.validation.bijectivity import BijectivityReport, bijectivity_grids, check_bijective
from swizzleperf.errors import RemapRejected
from swizzleperf.kernel.contract import KernelFile, LoopOrderSignature
from swizzleperf.remaps.check import check_signature, static_check
from swizzleperf.untrusted.parse import MAX_SOURCE_CHARS

LOCAL_TILES = tuple(range(8))


class LoopOrderReport(BaseModel):
    """Whether a loop-order hook permutes the steps, per local tile checked (stored with the attempt)."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 1
    hook: str
    local_tiles: list[int] = Field(description="local tile values checked, in order, up to the first failure")
    checks: list[BijectivityReport] = Field(description="per local tile: the steps' bijectivity and its proof")

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def message(self) -> str:
        bad = next(((t, c) for t, c in zip(self.local_tiles, self.checks) if not c.ok), None)
        if bad is not None:
            return f"with local_tile = {bad[0]}: {bad[1].message.replace('program', 'step')}"
        verdicts = [c.proof for c in self.checks]
        if all(v is not None and v.status == "proven" for v in verdicts):
            proof = f"; proven for every trip count up to {min(v.max_programs for v in verdicts):,} (z3)"
        else:
            first = next((c.proof_text for c in self.checks if c.proof_text), None)
            proof = f"; not proven for every trip count ({first})" if first else ""
        return (f"a permutation of the steps for local tiles {self.local_tiles[0]}-{self.local_tiles[-1]} on all "
                f"{len(self.checks[0].grids)} sampled trip counts{proof}")


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


def static_check_loop_order(source: str, signature: LoopOrderSignature) -> None:
    """The remap's static subset for a loop-order hook (RemapRejected("static", why) outside it)."""
    static_check(bind_local_tile(source, signature, 0), signature.over_steps())


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


def check_kernel_loop_order(source: str, kernel: KernelFile, num_domains: int) -> LoopOrderReport:
    """`source` as `kernel`'s loop-order hook, on every local tile checked and every trip count (the sampled
    ones and, by z3, all), its constexprs (the die count, as the remap's) set to `num_domains`."""
    constexprs = {name: num_domains for name in kernel.loop_order.constexprs}
    return check_loop_order(source, kernel.loop_order, [], num_domains, constexprs)


def check_loop_order(source: str, signature: LoopOrderSignature, trip_counts: list[int], num_domains: int,
                     constexprs: dict[str, int], local_tiles=LOCAL_TILES, prove: bool = True,
                     isolate: bool = True) -> LoopOrderReport:
    """Check the hook on every local tile in `local_tiles`, stopping at the first that fails.

    `trip_counts` are the ones the kernel's declared sizes reach (bijectivity_grids adds the usual
    edge cases: 1, 2, primes, one ~1M). Raises RemapRejected for text outside the static subset."""
    grids = bijectivity_grids(signature.over_steps(), [(n,) for n in trip_counts], num_domains)
    checked, reports = [], []
    for value in local_tiles:
        bound = bind_local_tile(source, signature, value)
        reports.append(check_bijective(bound, signature.over_steps(), grids, constexprs, prove=prove, isolate=isolate))
        checked.append(int(value))
        if not reports[-1].ok:
            break
    return LoopOrderReport(hook=signature.render(), local_tiles=checked, checks=reports)
