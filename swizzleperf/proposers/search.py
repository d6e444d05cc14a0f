"""The offline proposer: a deterministic search over the known remap families.

It first tries every family once at a default parameter (in an order fixed by the seed),
then spends the remaining iterations on the parameters of whichever family has done best so
far, nearest neighbours first. Under counters that move between identical runs (ncu), families
within that movement of the best are tied and refined in the seeded order, so that noise does not
steer the search (and two runs of one request propose the same remaps). All of its state is
derived from the history it is shown, so
a resumed run proposes exactly what the original run would have proposed next.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import TypeVar

from swizzleperf.kernel.contract import KernelFile
from swizzleperf.proposers.base import ProposalContext, batch_of
from swizzleperf.proposers.orders import OrderKeys
from swizzleperf.records.proposal import AttemptView, Proposal
from swizzleperf.records.report import RUN_TO_RUN_PTS
from swizzleperf.remaps.check import normalise
from swizzleperf.remaps.families import FamilyInstance
from swizzleperf.remaps.space import candidate_space

T = TypeVar("T")


def render(instance: FamilyInstance, kernel: KernelFile) -> str:
    """The instance as a candidate for this kernel (its remap, and its loop order where it has one)."""
    return instance.render(kernel.hook, kernel.loop_order)


def _distance(a: FamilyInstance, b: FamilyInstance) -> float:
    """How far apart two instances of one family are, on a log scale of their parameters."""
    pa, pb = dict(a.params), dict(b.params)
    return sum(abs(math.log2(pa.get(k) or 1) - math.log2(pb.get(k) or 1)) for k in set(pa) | set(pb))


class SearchProposer:
    """Explore each family once, then exploit the best family's nearest untried neighbours.

    What counts is the code, not who proposed it or what it was called: an instance whose
    normalised source was already tried (by this search, the library or an LLM) is tried, and
    scores with that attempt's hit rate.
    """

    name = "search"

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._orders: OrderKeys | None = None

    def propose(self, context: ProposalContext) -> Proposal | None:
        space = candidate_space(context.kernel.hook, context.hardware, context.kernel.loop_order)
        code = {i.label: normalise(render(i, context.kernel)) for f in space.values() for i in f}
        scores = _scores_by_code(context.every_attempt)
        orders = self._order_keys(context)
        tried_orders = {orders.key(context.kernel.hook_source)} | {
            orders.key(render(i, context.kernel)) for f in space.values() for i in f if code[i.label] in context.seen_sources}

        def tried(i: FamilyInstance) -> bool:
            """Its text was tried, or (at this size) an order equal to its own: the kernel's, or an instance's."""
            if code[i.label] in context.seen_sources:
                return True
            key = orders.key(render(i, context.kernel))
            return key is not None and key in tried_orders

        def score(i: FamilyInstance) -> float:
            return scores.get(code[i.label], -1.0)

        order = sorted(space)
        random.Random(self.seed).shuffle(order)
        for family in order:  # explore: every family once, at its first instance whose order is new here
            if not any(code[i.label] in context.seen_sources for i in space[family]):
                first = next((i for i in space[family] if not tried(i)), None)
                if first is not None:
                    return self._proposal(first, context, f"explore: first try of family {family}")

        noise = RUN_TO_RUN_PTS.get(context.baseline.source, 0.0)
        top = max(score(i) for f in order for i in space[f])
        for family in _leaders(order, lambda f: max(score(i) for i in space[f]), noise):
            best = _leaders(space[family], score, noise)[0]  # exploit: neighbours of the best family's best
            if score(best) < 0:
                continue  # never worked: not worth refining
            untried = sorted((i for i in space[family] if not tried(i)),
                             key=lambda i: (_distance(i, best), space[family].index(i)))
            if untried:
                tie = (f", within {context.baseline.source}'s run-to-run noise ({noise} points) of the top, "
                       f"{top:.2f}%" if score(best) < top else "")
                return self._proposal(
                    untried[0], context, f"exploit: {family} is the best family so far ({best.label} at "
                                         f"{score(best):.2f}%{tie}); trying its nearest untried neighbour")
        return None

    def _order_keys(self, context: ProposalContext) -> OrderKeys:
        size = context.baseline.size
        if self._orders is None or self._orders.kernel is not context.kernel or self._orders.size != size:
            self._orders = OrderKeys(context.kernel, context.hardware, size)
        return self._orders

    def propose_batch(self, context: ProposalContext, n: int) -> list[Proposal]:
        """n distinct proposals: what `propose` gives with the ones before it tried but not yet scored
        (in the explore phase, the next n families; then the best family's n nearest untried instances)."""
        return batch_of(self.propose, context, n)

    def refine(self, context: ProposalContext, anchor: FamilyInstance, why: str) -> Proposal | None:
        """The untried instance of `anchor`'s family nearest to it (the anchor itself first)."""
        space = candidate_space(context.kernel.hook, context.hardware).get(anchor.family, [])
        untried = [i for i in space if normalise(render(i, context.kernel)) not in context.seen_sources]
        if not untried:
            return None
        nearest = min(untried, key=lambda i: (_distance(i, anchor), space.index(i)))
        return self._proposal(nearest, context, why)

    def _proposal(self, instance: FamilyInstance, context: ProposalContext, why: str) -> Proposal:
        return Proposal(source=render(instance, context.kernel), family=instance.label, rationale=why,
                        origin="search")


def _leaders(items: list[T], score: Callable[[T], float], noise: float) -> list[T]:
    """`items` best score first, except that those within the counters' run-to-run `noise` of the top come
    first in their given order: a difference measurement noise can reverse does not choose what is refined
    (the simulator has none, so there it is only the order of exact ties)."""
    top = max(score(item) for item in items)
    tied = [item for item in items if top - score(item) <= noise]
    return tied + sorted((item for item in items if item not in tied), key=lambda item: -score(item))


def _scores_by_code(history: tuple[AttemptView, ...]) -> dict[str, float]:
    """Best hit rate per normalised remap; a rejected attempt scores -1 so it is never exploited."""
    out: dict[str, float] = {}
    for view in history:
        try:
            key = normalise(view.source)
        except SyntaxError:
            continue
        score = view.hit_pct if view.accepted and view.hit_pct is not None else -1.0
        out[key] = max(out.get(key, -1.0), score)
    return out
