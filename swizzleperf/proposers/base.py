"""The proposer protocol: read the problem and the history, return the next remap to try.

A proposal is untrusted text until validation says otherwise: the loop runs the static
checks, bijectivity and correctness on it exactly as on anything else.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Protocol

from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.records.proposal import AttemptView, Proposal
from swizzleperf.records.report import BottleneckReport
from swizzleperf.remaps.check import normalise


class ModelWatcher(Protocol):
    """Whoever watches a run: shown each model call while it runs, told what a person should know about them."""

    def model_call(self, what: str) -> AbstractContextManager[None]:
        """Entered for the duration of one request to the model (`what`: the model, the call, its tokens)."""
        ...

    def model_note(self, line: str) -> None:
        """One line about the model or its server (the context window, a chat template that seems wrong)."""
        ...


@dataclass(frozen=True)
class ProposalContext:
    kernel: KernelFile
    hardware: HardwareSpec
    baseline: BottleneckReport  # the original remap's report
    history: list[AttemptView]  # bounded: the best few and the latest, with diffs (what a prompt shows)
    iteration: int
    every_attempt: tuple[AttemptView, ...] = ()  # all attempts, without diffs (what a search learns from)
    seen_sources: frozenset[str] = frozenset()  # normalised sources already tried: never repeat one
    best: BottleneckReport | None = None  # the best accepted attempt's report so far
    memory_analysis: str | None = None  # the analysis an earlier attempt recorded (a resumed run reuses it)
    watcher: ModelWatcher | None = None  # sees the model calls a proposal makes (the CLI's spinner)


class Proposer(Protocol):
    """Proposers may also have `propose_batch(context, n) -> list[Proposal]`: up to n distinct proposals
    from one snapshot of the history, evaluated together (the search has it; an LLM turn is one
    proposal, so the LLM proposers do not). `propose_batch()` below asks whichever a proposer has."""

    name: str

    def propose(self, context: ProposalContext) -> Proposal | None:
        """The next remap to try, or None when this proposer has nothing new."""
        ...


def propose_batch(proposer: Proposer, context: ProposalContext, n: int) -> list[Proposal]:
    """Up to n proposals from one snapshot (empty: nothing new); one where the proposer only proposes one."""
    own = getattr(proposer, "propose_batch", None)
    if own is not None and n > 1:
        return own(context, n)
    proposal = proposer.propose(context)
    return [] if proposal is None else [proposal]


def batch_of(propose: Callable[[ProposalContext], Proposal | None], context: ProposalContext,
             n: int) -> list[Proposal]:
    """Up to n proposals, each made as if the ones before it were attempts not yet evaluated: tried (in
    seen_sources) and unscored (in every_attempt, not accepted). A proposer whose choice depends only on
    what was tried and how it scored proposes, n times in a row, n distinct remaps this way."""
    batch: list[Proposal] = []
    while len(batch) < n:
        proposal = propose(context)
        if proposal is None:
            break
        batch.append(proposal)
        context = with_pending(context, proposal)
    return batch


def with_pending(context: ProposalContext, proposal: Proposal) -> ProposalContext:
    """The context a proposer sees next when `proposal` is pending evaluation in the same batch."""
    try:
        key = normalise(proposal.source)
    except Exception:  # noqa: BLE001 -- as the loop does: unparsable text is its own key
        key = proposal.source
    pending = AttemptView(iteration=context.iteration, origin=proposal.origin, family=proposal.family,
                          source=proposal.source, diff="", accepted=False,
                          reason="pending: evaluated in the same batch")
    return replace(context, iteration=context.iteration + 1, every_attempt=(*context.every_attempt, pending),
                   seen_sources=context.seen_sources | {key})
