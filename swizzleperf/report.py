"""The bottleneck report: what one profile of one remap says about L2 behaviour.

Every profiler (simulator, ncu, rocprofv3) produces this model, so the loop, the history and
the proposers never care where the numbers came from, and every record says it. Hit rates
are percentages. A simulated report is a prediction, and says so.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

Source = Literal["sim", "ncu", "rocprofv3"]


def ceiling_text(ceiling_pct: float | None) -> str:
    """The ceiling beside every hit rate; hardware counters cannot give it (no unique-line count)."""
    if ceiling_pct is None:
        return "ceiling n/a (counters do not count unique lines; `--profiler sim` predicts it)"
    return f"ceiling {ceiling_pct:.2f}%"


class _ReadsItsOwnJSON(BaseModel):
    """Computed fields are written for people reading the JSON; drop them when reading it back."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data):
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k not in cls.model_computed_fields}
        return data


class DomainStats(_ReadsItsOwnJSON):
    """One L2 domain (XCD) of the simulated or measured GPU."""

    domain: int
    programs: int | None = None
    accesses: int
    hits: int
    unique_lines: int | None = None

    @computed_field
    @property
    def misses(self) -> int:
        return self.accesses - self.hits

    @computed_field
    @property
    def hit_pct(self) -> float:
        return 100.0 * self.hits / self.accesses if self.accesses else 0.0


class Timing(BaseModel):
    """Kernel time over repeats (never the harness): median and spread, with the L2 state."""

    model_config = ConfigDict(extra="forbid")
    median_ms: float
    p20_ms: float
    p80_ms: float
    repeats: int
    l2_state: Literal["flushed", "warm"]
    source: str = "do_bench"


class BottleneckReport(_ReadsItsOwnJSON):
    schema_version: int = 1

    source: Source
    hardware: str
    kernel: str
    size: str

    hit_pct: float = Field(description="L2 hit rate in percent")
    ceiling_pct: float | None = Field(
        None, description="best any remap can reach: 1 - unique lines / accesses, in percent")
    accesses: int | None = None
    hits: int | None = None
    unique_lines: int | None = None
    bytes_from_next_level: int | None = None
    per_domain: list[DomainStats] = Field(default_factory=list)
    timing: Timing | None = None
    notes: list[str] = Field(default_factory=list, description="how the numbers were obtained")

    @computed_field
    @property
    def simulated(self) -> bool:
        return self.source == "sim"

    @property
    def label(self) -> str:
        """How to introduce this report's hit rate to a reader."""
        return "predicted (simulator)" if self.simulated else f"measured ({self.source})"

    def summary(self) -> str:
        """One line for histories and prompts."""
        parts = [f"L2 hit {self.hit_pct:.2f}% {self.label}"]
        parts.append(ceiling_text(self.ceiling_pct))
        if self.per_domain and self.unique_lines is not None:
            per_die = sum(d.unique_lines or 0 for d in self.per_domain)
            parts.append(f"lines fetched per die summed {per_die} vs {self.unique_lines} unique")
        if self.timing is not None:
            parts.append(f"time {self.timing.median_ms:.4f} ms [{self.timing.p20_ms:.4f}, {self.timing.p80_ms:.4f}]")
        return "; ".join(parts)
