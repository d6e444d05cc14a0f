"""A proposer that replays a fixed list of remaps: a test double, and a way to re-check a set.

It is the proposer tests use to drive the loop through exactly the cases they need (garbage,
non-bijective, crashing), and what a user can use to validate and profile remaps written by
hand: each is treated exactly like any other proposal.
"""

from __future__ import annotations

from swizzleperf.proposers.base import ProposalContext, batch_of
from swizzleperf.records.proposal import Origin, Proposal


class ScriptedProposer:
    name = "scripted"

    def __init__(self, sources: list[str | tuple[str, str]], origin: Origin = "search"):
        """`sources`: remap texts, or (family label, text) pairs, proposed in order."""
        self.items = [s if isinstance(s, tuple) else (f"scripted #{i + 1}", s) for i, s in enumerate(sources)]
        self.origin = origin

    def propose(self, context: ProposalContext) -> Proposal | None:
        done = sum(1 for v in context.every_attempt if v.origin == self.origin)
        if done >= len(self.items):
            return None
        family, source = self.items[done]
        return Proposal(source=source, family=family, origin=self.origin, rationale="scripted")

    def propose_batch(self, context: ProposalContext, n: int) -> list[Proposal]:
        return batch_of(self.propose, context, n)
