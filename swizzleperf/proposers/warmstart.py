"""Warm start: try the library's fitting remaps first, then hand over to the real proposer.

A remap that raised the hit rate of one kernel is a strong first guess for a kernel with the
same sharing pattern; trying it costs one attempt and the history records where it came from.
"""

from __future__ import annotations

from swizzleperf.errors import LibraryError, RemapRejected
from swizzleperf.proposers.base import ProposalContext, Proposer, batch_of
from swizzleperf.records.proposal import Proposal
from swizzleperf.remaps.library import LibraryEntry, transplant


class WarmStart:
    def __init__(self, entries: list[LibraryEntry], inner: Proposer):
        self.entries = entries
        self.inner = inner
        self.name = inner.name

    def propose(self, context: ProposalContext) -> Proposal | None:
        tried = {v.family for v in context.every_attempt if v.origin == "library"}
        for entry in self.entries:
            family = f"library:{entry.name}"
            if family in tried:
                continue
            try:
                source, notes = transplant(entry, context.kernel.hook, context.kernel.name)
            except (LibraryError, RemapRejected):
                continue  # does not fit this kernel's hook: not worth an attempt
            why = f"warm start from the library: {entry.summary()}" + (f" ({'; '.join(notes)})" if notes else "")
            return Proposal(source=source, family=family, origin="library", rationale=why)
        return self.inner.propose(context)

    def propose_batch(self, context: ProposalContext, n: int) -> list[Proposal]:
        """The untried library entries, then the inner proposer's; one at a time where the inner proposer
        proposes one at a time (an LLM's turn sees the previous one's result)."""
        return batch_of(self.propose, context, n if hasattr(self.inner, "propose_batch") else 1)
