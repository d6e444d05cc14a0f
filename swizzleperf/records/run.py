"""A run directory's records: run.json (RunRecord) and batch.json (PendingBatch)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.records.proposal import LLMUsage, Proposal

RUN_SCHEMA_VERSION = 1
Status = Literal["running", "finished", "interrupted", "failed"]


class KernelRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    name: str
    sha256: str


class BestRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    iteration: int
    family: str
    hit_pct: float
    source: str  # "sim", "ncu", ...


class RunRecord(BaseModel):
    """run.json."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = RUN_SCHEMA_VERSION
    run_id: str
    created_at: datetime
    updated_at: datetime
    status: Status
    status_detail: str = ""
    kernel: KernelRef
    size: str
    hardware: HardwareSpec
    hardware_reason: str
    profiler: str
    profiler_reason: str
    proposer: str
    proposer_options: dict = Field(default_factory=dict)
    seed: int
    iterations: int
    patience: int
    stop_at_ceiling: bool = True
    batch: int = Field(1, description="proposals made from one snapshot of the history (runs before batches: 1)")
    allow_unproven: bool = Field(False, description="--allow-unproven: remaps whose proof does not cover the "
                                                    "kernel's declared grids were accepted, marked UNPROVEN")
    ranking_rule: str
    versions: dict[str, str]
    baseline_hit_pct: float | None = None
    ceiling_pct: float | None = None
    best: BestRef | None = None
    usage: LLMUsage = Field(default_factory=LLMUsage)


class PendingBatch(BaseModel):
    """batch.json: a batch of proposals being evaluated. Written before the first is evaluated and
    removed once the last is recorded, so a resume evaluates what a stop left out, as proposed."""

    model_config = ConfigDict(extra="forbid")
    start: int = Field(description="the iteration of the batch's first proposal")
    proposals: list[Proposal]
