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


ANSWER_CHARS = 8000  # of an answer kept in its call's record; a 2,048-token answer is about this long


class LLMCall(BaseModel):
    """One request to the model: what was sent (measured before), what the server answered (counted by it)."""

    model_config = ConfigDict(extra="forbid")
    call: str = Field(description="memory analysis | proposal")
    outcome: Literal["answered", "timed out"]
    prompt_tokens: int | None = Field(None, description="as the server counted them; None when it gave no count")
    completion_tokens: int | None = Field(None, description="as the server counted them")
    finish_reason: str | None = Field(None, description="the server's: stop, or length (cut at max_tokens)")
    max_tokens: int = Field(description="the answer's limit sent with the request")
    seconds: float
    answer: str | None = Field(None, description="the answer's text as the server sent it (clipped to "
                                                 "ANSWER_CHARS), also when nothing in it could be used")
    # how the prompt was fitted (None for a call made without the context budget)
    window: int | None = Field(None, description="the context window the prompt was fitted to")
    prompt_measured: int | None = Field(None, description="the prompt's tokens as measured before the call (chat "
                                                          "template allowance included)")
    measured_by: str | None = Field(None, description="the server's tokenizer, or an estimate")
    parts: dict[str, int] = Field(default_factory=dict, description="tokens of each input field, measured alike")
    left_out: list[str] = Field(default_factory=list, description="what the prompt left out to fit the window")


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
    llm_calls: list[LLMCall] = Field(default_factory=list, description="each request to the model behind it")


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
