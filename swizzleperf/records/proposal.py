"""What a proposer hands the loop (Proposal) and what it is shown of earlier attempts (AttemptView)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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
