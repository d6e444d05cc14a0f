"""One attempt of a run (a line of attempts.jsonl): the candidate, each stage's verdict, its report."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from swizzleperf.records.proposal import AttemptView, LLMCall, LLMUsage, Origin
from swizzleperf.records.report import BottleneckReport

Stage = Literal["propose", "static", "bijectivity", "correctness", "profile"]
STAGES: tuple[Stage, ...] = ("propose", "static", "bijectivity", "correctness", "profile")


class StageResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stage: Stage
    ok: bool
    detail: str = Field(description="one sentence a person can read")
    seconds: float
    data: dict | None = Field(None, description="the stage's own report (bijectivity, correctness), as JSON")
    checker_failed: bool = Field(False, description="the check itself failed (a kernel that does not load, a "
                                                    "crash in swizzleperf), not the candidate")


class Attempt(BaseModel):
    """One line of attempts.jsonl."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 1
    iteration: int
    origin: Origin
    family: str
    rationale: str = ""
    source: str
    diff: str = Field(description="unified diff of the kernel file against the original")
    stages: list[StageResult]
    report: BottleneckReport | None = None
    usage: LLMUsage | None = None
    memory_analysis: str | None = Field(None, description="the LLM's analysis of the kernel, asked once per run "
                                                          "and recorded on the attempt that asked")
    llm_calls: list[LLMCall] = Field(default_factory=list, description="each request to the model behind the "
                                                                       "proposal, with the server's token counts")
    started_at: datetime
    seconds: float
    device: str | None = Field(None, description="the GPU the candidate was profiled on, where an executor gave "
                                                 "it one of several: host and GPU id (a pool worker's, or a Ray task's)")

    @property
    def accepted(self) -> bool:
        return self.report is not None and all(s.ok for s in self.stages)

    @property
    def failure(self) -> StageResult | None:
        return next((s for s in self.stages if not s.ok), None)

    @property
    def verdict(self) -> str:
        failure = self.failure
        if failure is not None:
            return f"rejected at {failure.stage}"
        return "accepted" if self.report is not None else "incomplete"

    def view(self, max_diff_lines: int = 40) -> AttemptView:
        diff = self.diff.splitlines()
        if len(diff) > max_diff_lines:
            diff = diff[:max_diff_lines] + [f"... ({len(diff) - max_diff_lines} more lines)"]
        failure = self.failure
        return AttemptView(
            iteration=self.iteration, origin=self.origin, family=self.family, source=self.source,
            diff="\n".join(diff),
            accepted=self.accepted, stage=failure.stage if failure else None,
            reason=failure.detail if failure else None,
            hit_pct=self.report.hit_pct if self.report else None,
            report=self.report.summary() if self.report else None)
