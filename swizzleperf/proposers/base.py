"""The proposer protocol: read the problem and the history, return the next remap to try.

A proposal is untrusted text until validation says otherwise: the loop runs the static
checks, bijectivity and correctness on it exactly as on anything else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.remaps.check import normalise
from swizzleperf.records.report import BottleneckReport

Origin = Literal["baseline", "search", "llm", "library"]


class LLMUsage(BaseModel):
    """Tokens and cost of the model calls behind one proposal (as the provider reported them)."""

    model_config = ConfigDict(extra="forbid")
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None

    def __add__(self, other: "LLMUsage") -> "LLMUsage":
        cost = None if self.cost_usd is None and other.cost_usd is None else (self.cost_usd or 0) + (other.cost_usd or 0)
        return LLMUsage(calls=self.calls + other.calls, prompt_tokens=self.prompt_tokens + other.prompt_tokens,
                        completion_tokens=self.completion_tokens + other.completion_tokens, cost_usd=cost)


class Proposal(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str = Field(description="the remap function's source, as proposed (untrusted)")
    family: str = Field(description="short name of the idea, e.g. xcd_contiguous(chunk=4)")
    rationale: str = ""
    origin: Origin
    usage: LLMUsage | None = None
    extraction_error: str | None = Field(
        None, description="set when the proposer could not extract code from its model's answer")
    memory_analysis: str | None = Field(
        None, description="the model's analysis of the kernel, on the proposal whose calls asked for it")


class AttemptView(BaseModel):
    """What a proposer is shown of one earlier attempt (a bounded summary, not the record)."""

    model_config = ConfigDict(extra="forbid")
    iteration: int
    origin: Origin
    family: str
    source: str = Field("", description="the remap as proposed")
    diff: str = Field(description="unified diff of the remap hook against the original")
    accepted: bool
    stage: str | None = Field(None, description="where a rejected attempt failed: static, bijectivity, ...")
    reason: str | None = None
    hit_pct: float | None = None
    report: str | None = Field(None, description="one-line bottleneck report")


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
