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

from pydantic import BaseModel, ConfigDict, Field

from swizzleperf.kernel.contract import KernelFile, LoopOrderSignature
from swizzleperf.remaps.loop_orders import bind_local_tile
from swizzleperf.validation.bijectivity import BijectivityReport, bijectivity_grids, check_bijective

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
