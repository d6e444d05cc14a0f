"""The offline proposer: a deterministic search over the known remap families.

It first tries every family once at a default parameter (in an order fixed by the seed),
then spends the remaining iterations on the parameters of whichever family has done best so
far, nearest neighbours first. All of its state is derived from the history it is shown, so
a resumed run proposes exactly what the original run would have proposed next.
"""

from __future__ import annotations

import math
import random

from swizzleperf.families import FamilyInstance
from swizzleperf.hardware import HardwareSpec
from swizzleperf.kernel import HookSignature
from swizzleperf.proposers.base import AttemptView, Proposal, ProposalContext
from swizzleperf.remap import normalise

_CHUNKS = (2, 4, 8, 16, 32, 64, 128)
_GROUPS = (2, 4, 8, 16, 32)
_VIRTUAL_DIES = (2, 4, 8, 16)  # on one shared L2 a "die" count is just a stride of the reorder
_HEAD_GROUPS = (1, 2, 4, 8)  # heads per attention cluster: 1 for MHA, the heads per K/V head for GQA


def candidate_space(hook: HookSignature, hw: HardwareSpec) -> dict[str, list[FamilyInstance]]:
    """Every instance the search may propose, grouped by family; the first of each is its default."""
    def inst(family: str, **params: int) -> FamilyInstance:
        return FamilyInstance(family, tuple(params.items()))

    dies = [None] if hw.num_domains > 1 else list(_VIRTUAL_DIES)

    def with_dies(family: str, **params: int) -> list[FamilyInstance]:
        return [inst(family, **params) if d is None else inst(family, **params, dies=d) for d in dies]

    if hook.ndim == 1:
        return {
            "xcd_chunked": [i for c in (4, *[c for c in _CHUNKS if c != 4]) for i in with_dies("xcd_chunked", chunk=c)],
            "xcd_contiguous": with_dies("xcd_contiguous"),
        }
    if hook.ndim == 2:
        groups = (8, *[g for g in _GROUPS if g != 8])
        return {
            "grouped": [inst("grouped", group_m=g) for g in groups],
            "col_major": [inst("col_major")],
            "xcd_row_major": with_dies("xcd_row_major"),
            "xcd_col_major": with_dies("xcd_col_major"),
            "xcd_grouped": [i for g in groups for i in with_dies("xcd_grouped", group_m=g)],
            "xcd_chunked_grouped": [i for c in (4, 2, 8, 16) for g in (8, 4, 16)
                                    for i in with_dies("xcd_chunked_grouped", chunk=c, group_m=g)],
        }
    if hook.ndim == 3:  # attention: (q blocks, batch, heads); the identity (the baseline) is naive block-first
        # Swizzled block-first with group 1 is the identity whenever N divides batch * heads: left out.
        return {
            "head_first": [inst("head_first")],
            "swizzled_head_first": [i for g in _HEAD_GROUPS for i in with_dies("swizzled_head_first", group=g)],
            "swizzled_block_first": [i for g in _HEAD_GROUPS[1:]
                                     for i in with_dies("swizzled_block_first", group=g)],
        }
    return {}


def _distance(a: FamilyInstance, b: FamilyInstance) -> float:
    """How far apart two instances of one family are, on a log scale of their parameters."""
    pa, pb = dict(a.params), dict(b.params)
    return sum(abs(math.log2(pa.get(k) or 1) - math.log2(pb.get(k) or 1)) for k in set(pa) | set(pb))


class SearchProposer:
    name = "search"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def propose(self, context: ProposalContext) -> Proposal | None:
        space = candidate_space(context.kernel.hook, context.hardware)
        tried = {v.family for v in context.every_attempt if v.origin == "search"}
        results = _results_by_label(context.every_attempt)

        order = sorted(space)
        random.Random(self.seed).shuffle(order)
        for family in order:  # explore: every family once
            if not any(i.label in tried for i in space[family]):
                proposal = self._proposal(space[family][0], context, f"explore: first try of family {family}")
                if proposal is not None:
                    return proposal

        ranked = sorted(order, key=lambda f: -max((results.get(i.label, -1.0) for i in space[f]), default=-1.0))
        for family in ranked:  # exploit: neighbours of the best instance of the best family
            scored = [i for i in space[family] if results.get(i.label, -1.0) >= 0]
            if not scored:
                continue
            best = max(scored, key=lambda i: results[i.label])
            untried = [i for i in space[family] if i.label not in tried]
            for candidate in sorted(untried, key=lambda i: (_distance(i, best), space[family].index(i))):
                proposal = self._proposal(
                    candidate, context,
                    f"exploit: {family} is the best family so far ({best.label} at {results[best.label]:.2f}%); "
                    f"trying its nearest untried neighbour")
                if proposal is not None:
                    return proposal
        return None

    def refine(self, context: ProposalContext, anchor: FamilyInstance, why: str) -> Proposal | None:
        """The untried instance of `anchor`'s family nearest to it (the anchor itself first)."""
        space = candidate_space(context.kernel.hook, context.hardware).get(anchor.family, [])
        tried = {v.family for v in context.every_attempt}
        for candidate in sorted((i for i in space if i.label not in tried),
                                key=lambda i: (_distance(i, anchor), space.index(i))):
            proposal = self._proposal(candidate, context, why)
            if proposal is not None:
                return proposal
        return None

    def _proposal(self, instance: FamilyInstance, context: ProposalContext, why: str) -> Proposal | None:
        source = instance.render(context.kernel.hook)
        if normalise(source) in context.seen_sources:
            return None
        return Proposal(source=source, family=instance.label, rationale=why, origin="search")


def _results_by_label(history: tuple[AttemptView, ...]) -> dict[str, float]:
    """Best hit rate per family label; a rejected attempt scores -1 so it is never exploited."""
    out: dict[str, float] = {}
    for view in history:
        score = view.hit_pct if view.accepted and view.hit_pct is not None else -1.0
        out[view.family] = max(out.get(view.family, -1.0), score)
    return out
