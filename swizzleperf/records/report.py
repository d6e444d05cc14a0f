"""The bottleneck report: what one profile of one remap says about L2 behaviour.

Every profiler (simulator, ncu, rocprofv3) produces this model, so the loop, the history and
the proposers never care where the numbers came from, and every record says it. Hit rates
are percentages. A simulated report is a prediction, and says so.

The primary number is the L2 hit rate of *read* requests from the compute units (`metric =
"read"`): writes allocate in the L2 without a fetch and always hit, so mixing them in dilutes
what a remap changes. Counters that cannot split reads from writes give the overall rate
(`metric = "all"`), and say so. Schema 1 records (before the split) read back as "all".
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

Source = Literal["sim", "ncu", "rocprofv3"]


COMPULSORY_SLACK = 1.005  # fetches within 0.5 % of the compulsory count: nothing an order can still save


def ceiling_text(ceiling_pct: float | None) -> str:
    """The ceiling beside every hit rate, named for the rate it bounds (the L2 read hit rate, not the overall
    one); hardware counters cannot give it (no unique-line count)."""
    if ceiling_pct is None:
        return "read-hit ceiling n/a (counters do not count unique lines, and the launch was not captured: see notes)"
    return f"read-hit ceiling {ceiling_pct:.2f}%"


def bounds_text(report: "BottleneckReport") -> str:
    """The ceiling and the achievable bound in one sentence, and how close the fetches are to the minimum."""
    how = "" if report.simulated else ", counted on a CPU capture of the same launch"
    parts = [ceiling_text(report.ceiling_pct) + (f" (every read-only sector fetched once, every read reaching "
                                                 f"the L2{how})" if report.ceiling_pct is not None else "")]
    if report.achievable_pct is not None:
        parts.append(f"achievable {report.achievable_pct:.2f}% (the best balanced assignment of programs to dies "
                     f"found, caches big enough for every first touch)")
    if report.unique_lines is not None and report.accesses is not None and report.hits is not None:
        fetched = report.accesses - report.hits
        parts.append(f"the L2 fetched {fetched:,} vs {report.unique_lines:,} compulsory "
                     f"({fetched / max(report.unique_lines, 1):.2f}x)")
        if report.achievable_fetches is not None and fetched < report.achievable_fetches:
            parts.append(f"fewer than the partitioner's assignment ({report.achievable_fetches:,}): the achievable "
                         f"figure is the best assignment found, and this remap beat it")
    return "; ".join(parts)


def headroom_text(report: "BottleneckReport", ceiling_pct: float | None) -> str:
    """What is left to win above the best remap, in the ranked quantity's terms (read misses): nothing where it
    fetches only the compulsory misses (the rest of the gap to the read-hit ceiling is reads the L1 absorbs);
    nothing an assignment can win where its dies first-touch no more than the achievable assignment's (the rest is
    capacity); else its fetches against the compulsory ones, and the points to the ceiling."""
    if ceiling_pct is None:
        return ""
    fetched = report.fetches
    if report.unique_lines and fetched is not None and fetched <= report.unique_lines * COMPULSORY_SLACK:
        return ("no headroom: it fetches only the compulsory misses (the rest of the gap to the read-hit ceiling "
                "is reads the L1 absorbs)")
    times = f"it fetches {fetched / report.unique_lines:.2f}x the compulsory misses" \
        if report.unique_lines and fetched is not None else ""
    split = report.assignment_split
    if split is not None and split[1] <= 0:
        return f"{times}, the excess all capacity (refetches after evictions), which no remap's assignment removes"
    points = f"{ceiling_pct - report.hit_pct:.2f} points below the read-hit ceiling"
    return f"{times}, {points}" if times else f"{points}"


# How far one remap's measured read hit rate moves between identical runs: the largest range over 8-13 ncu
# recordings of the same remaps on H100s (stencil2d 1.28 points, gemm's identity 1.24; median 0.25;
# tests/fixtures/fidelity/repeat*). Attention's block-first orders, at 5-8 %, move by up to 2.9 points over
# five recordings on five GPUs: a tie rule among those alone would need that. rocprofv3's is not measured yet.
RUN_TO_RUN_PTS = {"ncu": 1.3}

class _ReadsItsOwnJSON(BaseModel):
    """Computed fields are written for people reading the JSON; drop them when reading it back."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data):
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k not in cls.model_computed_fields}
            if "schema_version" in cls.model_fields and data.get("schema_version") == 1:
                data = {**data, "metric": data.get("metric", "all")}  # schema 1: one overall rate
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
    schema_version: int = 2

    source: Source
    hardware: str
    kernel: str
    size: str

    metric: Literal["read", "all"] = Field(
        "read", description="what hit_pct, accesses, hits and the ceiling count: L2 read requests from the CUs "
                            "(hits: those that did not miss in the L2), or all lookups where the counters cannot "
                            "tell reads from writes")
    hit_pct: float = Field(description="L2 hit rate of `metric` requests, in percent")
    ceiling_pct: float | None = Field(
        None, description="the best any remap can reach for `metric`: every compulsory fetch once, in percent")
    achievable_pct: float | None = Field(
        None, description="multi-die: the hit rate of the best balanced assignment of programs to dies found "
                          "(infinite per-die caches); None where not computed")
    achievable_fetches: int | None = Field(
        None, description="multi-die: the sector fetches of that assignment (read-only sectors, each once per die "
                          "that reads it); None where not computed")
    achievable_grouping: str | None = Field(
        None, description="multi-die: which logical programs that assignment puts on die 0, as a sentence (the "
                          "grouping a remap would imitate); None where not computed")
    accesses: int | None = None
    hits: int | None = None
    unique_lines: int | None = Field(None, description="compulsory fetches: distinct read-only lines or sectors")
    granule_bytes: int | None = Field(None, description="what accesses count: 32 for sectors, the line size for lines")
    overall_hit_pct: float | None = Field(None, description="reads and writes together")
    write_hit_pct: float | None = None
    write_accesses: int | None = None
    l1_hit_pct: float | None = Field(None, description="global-load lookups that hit in the CU's L1")
    l1_accesses: int | None = None
    programs_per_cu: int | None = Field(None, description="resident programs per CU/SM used or measured")
    trace_accesses: int | None = Field(None, description="simulator: line accesses in the trace (loads and stores)")
    bytes_from_next_level: int | None = None
    busiest_program_events: int | None = Field(
        None, description="simulator, persistent kernels: the load and store instructions of the busiest resident "
                          "program; a static schedule takes as long as its busiest program, so this is its time "
                          "in the simulator's units")
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

    @property
    def at_ceiling(self) -> bool:
        """No remap can do better: the hit rate is at the ceiling, or the L2 fetched only the compulsory
        misses (an L1 keeps the hit rate below a ceiling counted before it, but cannot lower those)."""
        if self.ceiling_pct is not None and self.hit_pct >= self.ceiling_pct - 1e-9:
            return True
        return (self.unique_lines is not None and self.accesses is not None and self.hits is not None
                and self.accesses - self.hits <= self.unique_lines)

    @property
    def short_of_achievable(self) -> bool:
        """The achievable bound is known and this remap misses it: it fetches more than the bound's
        assignment (the hit rate can't say: an L1 lowers it without a fetch more), or, where the fetches
        are unknown, its hit rate is more than 0.01 points below. Never at the ceiling."""
        if self.achievable_pct is None or self.at_ceiling:
            return False
        if self.achievable_fetches is not None and self.accesses is not None and self.hits is not None:
            return self.accesses - self.hits > self.achievable_fetches
        return self.hit_pct < self.achievable_pct - 0.01

    @property
    def fetches(self) -> int | None:
        """Read misses: what the ranking ranks (the sectors or lines the L2 fetched for reads)."""
        return self.accesses - self.hits if self.accesses is not None and self.hits is not None else None

    @property
    def assignment_split(self) -> tuple[int, int, int] | None:
        """Multi-die, simulated: (its dies' first touches summed, the part of them above the achievable assignment's
        fetches, its fetches above its own first touches). The first touches are what it would fetch with caches big
        enough for every first touch, so the second part is what another assignment could save, the third capacity
        (fetched again after an eviction), which no assignment removes. None where the per-die first touches or the
        achievable fetches are unknown (measured runs, one L2)."""
        touches = [d.unique_lines for d in self.per_domain]
        if not touches or None in touches or self.achievable_fetches is None or self.fetches is None:
            return None
        first = sum(touches)
        return first, first - self.achievable_fetches, self.fetches - first

    @property
    def metric_name(self) -> str:
        return "L2 read hit" if self.metric == "read" else "L2 hit (reads and writes)"

    def summary(self) -> str:
        """One line for histories and prompts."""
        parts = [f"{self.metric_name} {self.hit_pct:.2f}% {self.label}"]
        parts.append(ceiling_text(self.ceiling_pct))
        if self.achievable_pct is not None:
            parts.append(f"achievable {self.achievable_pct:.2f}%")
        if self.overall_hit_pct is not None and self.metric == "read":
            parts.append(f"overall {self.overall_hit_pct:.2f}%")
        if self.l1_hit_pct is not None:
            parts.append(f"L1 {self.l1_hit_pct:.1f}%")
        if self.per_domain and self.unique_lines is not None:
            per_die = sum(d.unique_lines or 0 for d in self.per_domain)
            unit = "sectors" if self.granule_bytes and self.granule_bytes < 128 else "lines"
            parts.append(f"{unit} fetched per die summed {per_die} vs {self.unique_lines} compulsory")
        if self.timing is not None:
            parts.append(f"time {self.timing.median_ms:.4f} ms [{self.timing.p20_ms:.4f}, {self.timing.p80_ms:.4f}]")
        if self.busiest_program_events is not None:
            parts.append(f"busiest program {self.busiest_program_events:,} loads and stores (the static schedule's "
                         f"length)")
        return "; ".join(parts)
