"""The proposer protocol: read the problem and the history, return the next remap to try.

A proposal is untrusted text until validation says otherwise: the loop runs the static
checks, bijectivity and correctness on it exactly as on anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from swizzleperf.hardware import HardwareSpec
from swizzleperf.kernel import KernelFile
from swizzleperf.report import BottleneckReport

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
    name: str

    def propose(self, context: ProposalContext) -> Proposal | None:
        """The next remap to try, or None when this proposer has nothing new."""
        ...
