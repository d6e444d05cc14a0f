"""A loop-order hook, `kv_order(step, n_steps, local_tile, NUM_XCDS: tl.constexpr) -> block`, checked.

The hook picks which block a persistent program's tile folds in at each step of its scan (FA2's
K/V loop: cyclic is `step`, the sawtooth scans backward on odd local tiles). It must be a
permutation of [0, n_steps) for every trip count and local tile the kernel reaches, or blocks are
skipped or folded twice. One z3 proof covers them all: the hook with `local_tile` read from a run-time
size, for every trip count and every local tile up to 2**31 - 2 (remaps.loop_orders.symbolic_local_tile);
its counterexample names the local tile. Before it, for a few values (LOCAL_TILES: both parities, and
the residues a hook that looks at local_tile % 4 or % 8 could treat apart), the hook with that value
bound is a one-dimensional remap of the steps, `step -> block` on the grid (n_steps,), evaluated on
every sampled trip count in a child process, as a remap is; where the symbolic proof does not settle
(the solver's time), each of those values is proven alone, as before, and the verdict says that only
those local tiles are proven.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from swizzleperf.kernel.contract import KernelFile, LoopOrderSignature
from swizzleperf.remaps.loop_orders import bind_local_tile, symbolic_local_tile
from swizzleperf.validation.bijectivity import BijectivityReport, bijectivity_grids, check_bijective
from swizzleperf.validation.proof_status import prove_remap, z3_installed
from swizzleperf.validation.proofs.verdict import ProofVerdict

LOCAL_TILES = tuple(range(8))


class LoopOrderReport(BaseModel):
    """Whether a loop-order hook permutes the steps, per local tile checked (stored with the attempt)."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 1
    hook: str
    local_tiles: list[int] = Field(description="local tile values checked, in order, up to the first failure")
    checks: list[BijectivityReport] = Field(description="per local tile: the steps' bijectivity and its proof")
    every_tile: ProofVerdict | None = Field(None, description="the proof for every local tile and trip count at once "
                                                              "(None: z3 not installed, or a sampled value failed)")
    tile_size: str | None = Field(None, description="the run-time size the proof read local_tile + 1 from")

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks) and (self.every_tile is None or self.every_tile.status != "counterexample")

    @property
    def message(self) -> str:
        bad = next(((t, c) for t, c in zip(self.local_tiles, self.checks) if not c.ok), None)
        if bad is not None:
            return f"with local_tile = {bad[0]}: {bad[1].message.replace('program', 'step')}"
        every = self.every_tile
        if every is not None and every.status == "counterexample" and every.counterexample is not None:
            found = every.counterexample
            tile = found.sizes.get(self.tile_size or "", 0) - 1
            return (f"with local_tile = {tile}: {found.kind.replace('_', ' ')} with {found.grid[0]:,} steps: steps "
                    f"{' and '.join(map(str, found.programs))} -> block {found.logical[0] if found.logical else '?'} "
                    f"(z3, over every local tile)")
        if every is not None and every.status == "proven":
            return (f"a permutation of the steps for every local tile and every trip count up to "
                    f"{every.max_programs:,} (z3); sampled on local tiles {self.local_tiles[0]}-{self.local_tiles[-1]}")
        verdicts = [c.proof for c in self.checks]
        if all(v is not None and v.status == "proven" for v in verdicts):
            proof = f"; proven for every trip count up to {min(v.max_programs for v in verdicts):,} (z3)"
        else:
            first = next((c.proof_text for c in self.checks if c.proof_text), None)
            proof = f"; not proven for every trip count ({first})" if first else ""
        return (f"a permutation of the steps for local tiles {self.local_tiles[0]}-{self.local_tiles[-1]} on all "
                f"{len(self.checks[0].grids)} sampled trip counts{proof}; not proven for every local tile"
                f"{f' ({every.reason})' if every is not None and every.reason else ''}")


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
    every, size = _every_tile(source, signature, constexprs, isolate) if prove else (None, None)
    per_tile = prove and (every is None or every.status == "unknown")  # each sampled tile proven alone instead
    checked, reports = [], []
    for value in local_tiles:
        bound = bind_local_tile(source, signature, value)
        reports.append(check_bijective(bound, signature.over_steps(), grids, constexprs, prove=per_tile,
                                       isolate=isolate))
        checked.append(int(value))
        if not reports[-1].ok:
            break
    return LoopOrderReport(hook=signature.render(), local_tiles=checked, checks=reports, every_tile=every,
                           tile_size=size)


def _every_tile(source: str, signature: LoopOrderSignature, constexprs: dict[str, int],
                isolate: bool) -> tuple[ProofVerdict | None, str | None]:
    """The proof over every local tile and trip count (None without z3)."""
    if not z3_installed():
        return None, None
    from swizzleperf.validation.proofs.encoding import SizedHook  # z3's

    text, size = symbolic_local_tile(source, signature)
    hook = SizedHook(signature.name, signature.step, (signature.n_steps,), signature.constexprs, (size,))
    return prove_remap(text, hook, constexprs, in_child=isolate), size
