"""What the loop and the simulator need to know about a GPU's last private cache level.

A spec answers four questions: how many L2 domains (dies) there are, how big each one's L2
is and how it is organised, how programs are dispatched to the domains, and how many programs
a domain runs at once. Presets (presets.py) carry sourced values; detect.py reads the local GPU;
a user can supply a YAML/JSON file with the same fields.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from swizzleperf.errors import HardwareSpecError
from swizzleperf.kernel.contract import KernelFile

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


class SchedulerWalk(BaseModel):
    """NVIDIA's block scheduler as measured: it gives freed slots the next programs walking its SM order
    (swizzleperf/sim/scheduler.py). How long programs run decides which slots free together, so the
    DRAM figures the durations are estimated from sit here too."""

    model_config = ConfigDict(extra="forbid")
    window_ns: float = Field(6.0, gt=0, description="frees taken together and served walking the SM order "
                                                    "(fitted on spin programs, benchmarks/scheduler_model.py)")
    finish_jitter_ns: float = Field(300.0, ge=0, description="normal disorder of when a slot's free reaches the "
                                                             "scheduler (fitted with window_ns)")
    first_wave_ns: float = Field(0.36, ge=0, description="between first-wave starts (measured: 2,112 programs in "
                                                         "0.77 us, benchmarks/probe_placement.py)")
    dram_latency_ns: float = Field(410.0, gt=0, description="the shortest round: one DRAM round trip (measured, "
                                                            "benchmarks/probe_l2_partitions.py)")
    peak_dram_bytes_per_ns: float = Field(gt=0, description="the vendor's peak DRAM bandwidth (GB/s)")
    seed: int = Field(0, ge=0, description="which draw of the disorder: another seed is another of the GPU's "
                                           "run-to-run placements")


class Dispatch(BaseModel):
    """How launch-order program ids are assigned to L2 domains.

    round_robin: program `w` goes to domain `(w // chunk) % num_domains` (AMD's workgroup
    dispatcher, chunk 1 by default). in_order: every program shares one L2 and programs
    start in increasing id order (NVIDIA); with `walk`, freed slots take the next programs walking the
    scheduler's SM order (the first wave's), else take the CUs finished programs freed, in a hashed order.
    """

    model_config = ConfigDict(extra="forbid")
    policy: Literal["round_robin", "in_order"]
    chunk: int = Field(1, ge=1, le=1 << 20, description="consecutive ids sent to one domain per turn")
    first_wave: list[int] | None = Field(
        None, description="the CU/SM each successive program of a domain's first wave starts on, as measured "
                          "(benchmarks/probe_l2_partitions.py); a CU recurs once per program it takes; "
                          "None: 0, 1, 2, ... round and round")
    walk: SchedulerWalk | None = Field(None, description="in_order only: where programs after the first wave run")
    younger_slowdown: float = Field(0.0, ge=0, le=10, description="a CU's k-th oldest resident program goes 1 / (1 + "
                                                                  "younger_slowdown x k) as fast as its oldest (0: all "
                                                                  "together; measured: benchmarks/fit_pace.py)")

    @model_validator(mode="after")
    def _walk_needs_in_order(self) -> "Dispatch":
        if self.walk is not None and self.policy != "in_order":
            raise ValueError("dispatch.walk models NVIDIA's block scheduler: it needs policy in_order")
        return self


class HardwareSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    vendor: Literal["amd", "nvidia", "other"]
    num_domains: int = Field(ge=1, le=64, description="L2 domains: XCDs on AMD, 1 on NVIDIA (one shared L2)")
    cus_per_domain: int = Field(ge=1, le=1024, description="compute units (AMD) or SMs (NVIDIA) per domain")
    l2_bytes_per_domain: int = Field(ge=16, le=GiB, description="up to 1 GB (a few lines: the tests' oracles)")
    line_bytes: int = Field(128, ge=16, le=1024, description="a power of two, 16 B to 1 KB")
    sector_bytes: int | None = Field(
        None, gt=0, le=1024, description="L2 lookup and fill granularity (NVIDIA: 32-byte sectors of a 128-byte line); "
                                "None: the whole line")
    l2_fetch_bytes: int | None = Field(
        None, gt=0, le=1024, description="what the L2 fetches for a read miss: the aligned block of this size around each "
                                "missing sector (NVIDIA: the driver's L2 fetch granularity limit, "
                                "cudaLimitMaxL2FetchGranularity, 64 B by default; measured on an H100 at 32, 64 and "
                                "128 B, benchmarks/probe_pending.py); None: the missing sectors alone")
    l2_ways: int = Field(16, ge=1, le=64)
    l2_partitions: int = Field(
        1, ge=1, le=8, description="NVIDIA A100/H100: the L2 is split in partitions; an SM looks up its near one, "
                                   "which keeps copies of lines homed in the other, and a near miss is served by "
                                   "the line's home partition before DRAM")
    cu_partition: list[int] | None = Field(
        None, description="the L2 partition each CU/SM is near (measured); None: contiguous equal blocks")
    set_index: Literal["hash", "modulo", "xor_fold"] = Field(
        "hash", description="how a line address picks its L2 set: the real functions are unpublished; 'hash' "
                            "spreads addresses like hardware hashing does, 'modulo' and 'xor_fold' show the "
                            "sensitivity to that choice")
    dispatch: Dispatch
    programs_per_cu: int = Field(2, ge=1, le=64, description="resident programs per CU/SM (an occupancy assumption)")
    l1_bytes_per_cu: int = Field(0, ge=0, le=16 * MiB, description="L1 data cache per CU/SM that global loads go through "
                                                      "(0: no L1 model); stores write through to the L2")
    l1_ways: int = Field(4, ge=1, le=16)
    unified_l1_bytes_per_cu: int | None = Field(
        None, gt=0, le=16 * MiB, description="NVIDIA: L1 and shared memory are one array; the L1 gets what the kernel's "
                                "shared-memory carve-out leaves")
    next_level: str | None = Field(None, description="what serves L2 misses, e.g. 'Infinity Cache 256 MB'")
    next_level_bytes: int | None = Field(None, gt=0, le=64 * GiB)
    source: str = Field("", description="where the numbers come from")

    @model_validator(mode="after")
    def _geometry_is_consistent(self) -> "HardwareSpec":
        if self.line_bytes & (self.line_bytes - 1):
            raise ValueError(f"line_bytes must be a power of two, got {self.line_bytes}")
        per_set = self.line_bytes * self.l2_ways
        if self.l2_bytes_per_domain % per_set:
            raise ValueError(
                f"l2_bytes_per_domain ({self.l2_bytes_per_domain}) must be a multiple of "
                f"line_bytes * l2_ways ({per_set}) so the cache has a whole number of sets")
        if self.set_index == "xor_fold" and self.sets_per_partition & (self.sets_per_partition - 1):
            raise ValueError(f"set_index xor_fold needs a power-of-two set count, got {self.sets_per_partition}")
        sector = self.sector_bytes or self.line_bytes
        if sector & (sector - 1) or self.line_bytes % sector or self.line_bytes // sector > 8:
            raise ValueError(f"sector_bytes must be a power of two dividing line_bytes ({self.line_bytes}) into at "
                             f"most 8 sectors, got {self.sector_bytes}")
        fetch = self.l2_fetch_bytes or sector
        if fetch & (fetch - 1) or fetch < sector or self.line_bytes % fetch:
            raise ValueError(f"l2_fetch_bytes must be a power of two from the sector size ({sector}) to the line size "
                             f"({self.line_bytes}), got {self.l2_fetch_bytes}")
        if self.l2_bytes_per_domain % (per_set * self.l2_partitions):
            raise ValueError(f"l2_bytes_per_domain ({self.l2_bytes_per_domain}) must split into {self.l2_partitions} "
                             f"partitions of whole sets ({per_set} B each)")
        if self.cu_partition is not None and (len(self.cu_partition) != self.cus_per_domain
                                              or not all(0 <= p < self.l2_partitions for p in self.cu_partition)):
            raise ValueError(f"cu_partition must give each of the {self.cus_per_domain} CUs a partition in "
                             f"0..{self.l2_partitions - 1}")
        wave = self.dispatch.first_wave
        if wave is not None and set(wave) != set(range(self.cus_per_domain)):
            raise ValueError(f"dispatch.first_wave must name every CU 0..{self.cus_per_domain - 1} and no other")
        if self.l1_bytes_per_cu % (self.line_bytes * self.l1_ways):
            raise ValueError(f"l1_bytes_per_cu ({self.l1_bytes_per_cu}) must be a multiple of line_bytes * l1_ways "
                             f"({self.line_bytes * self.l1_ways})")
        return self

    @property
    def num_sets(self) -> int:
        return self.l2_bytes_per_domain // (self.line_bytes * self.l2_ways)

    @property
    def sets_per_partition(self) -> int:
        return self.num_sets // self.l2_partitions

    @property
    def partition_of_cu(self) -> list[int]:
        """The L2 partition each CU is near (all 0 where the L2 is not partitioned)."""
        if self.cu_partition is not None:
            return self.cu_partition
        return [cu * self.l2_partitions // self.cus_per_domain for cu in range(self.cus_per_domain)]

    def first_wave_cus(self) -> list[int]:
        """The CU each of a domain's first `resident_programs_per_domain` programs starts on: the measured
        sequence with each CU's visits beyond `programs_per_cu` left out (repeated if it runs short)."""
        sequence = self.dispatch.first_wave or list(range(self.cus_per_domain))
        taken, wave = [0] * self.cus_per_domain, []
        while len(wave) < self.resident_programs_per_domain:
            for cu in sequence:
                if taken[cu] < self.programs_per_cu:
                    taken[cu] += 1
                    wave.append(cu)
        return wave

    @property
    def resident_programs_per_domain(self) -> int:
        return self.cus_per_domain * self.programs_per_cu

    @property
    def sectors_per_line(self) -> int:
        return self.line_bytes // (self.sector_bytes or self.line_bytes)

    @property
    def fetch_sectors(self) -> int:
        """Sectors the L2 fetches for a read miss of one (1: just the missing ones)."""
        return (self.l2_fetch_bytes or self.sector_bytes or self.line_bytes) // (self.sector_bytes or self.line_bytes)

    @property
    def l1_sets(self) -> int:
        return self.l1_bytes_per_cu // (self.line_bytes * self.l1_ways)

    def with_shared_carveout(self, carveout_bytes: int) -> HardwareSpec:
        """This hardware running a kernel whose shared memory takes `carveout_bytes` of the unified L1
        (ncu: launch__shared_mem_config_size); no change where L1 and shared memory are separate."""
        if self.unified_l1_bytes_per_cu is None:
            return self
        granule = self.line_bytes * self.l1_ways
        l1 = max(0, self.unified_l1_bytes_per_cu - carveout_bytes) // granule * granule
        return self.model_copy(update={"l1_bytes_per_cu": l1})

    def with_walk_seed(self, seed: int) -> HardwareSpec:
        """This hardware with its scheduler walk's disorder drawn from `seed`: another of the GPU's run-to-run
        placements (sim/scheduler.py)."""
        if self.dispatch.walk is None:
            raise HardwareSpecError(f"{self.name} has no scheduler walk to draw again (only in_order presets with a "
                                    f"measured walk have one: h100, h200)")
        walk = self.dispatch.walk.model_copy(update={"seed": seed})
        return self.model_copy(update={"dispatch": self.dispatch.model_copy(update={"walk": walk})})

    def with_occupancy(self, programs_per_cu: int | None) -> HardwareSpec:
        """This hardware running a kernel that fits `programs_per_cu` programs per CU (a kernel's
        PROGRAMS_PER_CU): lowers the assumption, never raises it; None changes nothing."""
        if programs_per_cu is None or programs_per_cu >= self.programs_per_cu:
            return self
        return self.model_copy(update={"programs_per_cu": programs_per_cu})

    def describe(self) -> str:
        """The one-line hardware text the method puts in front of the proposer."""
        l2 = self.l2_bytes_per_domain / MiB
        l1 = f"; each CU has a {self.l1_bytes_per_cu // 1024} KB L1 for loads" if self.l1_bytes_per_cu else ""
        if self.dispatch.policy == "round_robin":
            chunk = "" if self.dispatch.chunk == 1 else f" in chunks of {self.dispatch.chunk}"
            how = f"programs are dispatched round-robin to the {self.num_domains} L2 domains{chunk}"
            return (f"{self.name}: {self.num_domains} L2 domains (XCDs), each with {self.cus_per_domain} "
                    f"CUs and a private {l2:g} MB L2 ({self.l2_ways}-way, {self.line_bytes} B lines){l1}; {how}.")
        sectors = f" of {self.sector_bytes} B sectors" if self.sectors_per_line > 1 else ""
        return (f"{self.name}: {self.cus_per_domain} SMs sharing one {l2:g} MB L2 ({self.line_bytes} B lines{sectors})"
                f"{l1.replace('CU', 'SM')}; programs start in increasing id order, so the remap changes which tiles "
                f"share a wave" + ("; the scheduler gives freed slots the next programs walking its SM order, so "
                                   "consecutive programs often share an L2 partition and sometimes an SM's L1."
                                   if self.dispatch.walk else "."))


def hook_constants(kernel: KernelFile, hw: HardwareSpec) -> dict[str, int]:
    """Values of the hook's constexpr parameters: the die count."""
    return {name: hw.num_domains for name in kernel.hook.constexprs}
