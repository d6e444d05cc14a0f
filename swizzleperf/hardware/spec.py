"""What the loop and the simulator need to know about a GPU's last private cache level.

A spec answers four questions: how many L2 domains (dies) there are, how big each one's L2
is and how it is organised, how programs are dispatched to the domains, and how many programs
a domain runs at once. Presets carry sourced values; `detect()` reads the local GPU; a user
can supply a YAML/JSON file with the same fields.
"""

from __future__ import annotations

import ctypes
import difflib
import json
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from swizzleperf.errors import HardwareSpecError
from swizzleperf.hardware.layouts.measured import first_wave_sequence, sm_partition

MiB = 1024 * 1024


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
    scheduler's SM order (the first wave's), else in a hashed order.
    """

    model_config = ConfigDict(extra="forbid")
    policy: Literal["round_robin", "in_order"]
    chunk: int = Field(1, ge=1, description="consecutive ids sent to one domain per turn")
    first_wave: list[int] | None = Field(
        None, description="the CU/SM each successive program of a domain's first wave starts on, as measured "
                          "(benchmarks/probe_l2_partitions.py); a CU recurs once per program it takes; "
                          "None: 0, 1, 2, ... round and round")
    walk: SchedulerWalk | None = Field(None, description="in_order only: where programs after the first wave run")

    @model_validator(mode="after")
    def _walk_needs_in_order(self) -> "Dispatch":
        if self.walk is not None and self.policy != "in_order":
            raise ValueError("dispatch.walk models NVIDIA's block scheduler: it needs policy in_order")
        return self


class HardwareSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    vendor: Literal["amd", "nvidia", "other"]
    num_domains: int = Field(ge=1, description="L2 domains: XCDs on AMD, 1 on NVIDIA (one shared L2)")
    cus_per_domain: int = Field(ge=1, description="compute units (AMD) or SMs (NVIDIA) per domain")
    l2_bytes_per_domain: int = Field(gt=0)
    line_bytes: int = Field(128, gt=0)
    sector_bytes: int | None = Field(
        None, gt=0, description="L2 lookup and fill granularity (NVIDIA: 32-byte sectors of a 128-byte line); "
                                "None: the whole line")
    l2_fetch_bytes: int | None = Field(
        None, gt=0, description="what the L2 fetches for a read miss: the aligned block of this size around each "
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
    programs_per_cu: int = Field(2, ge=1, description="resident programs per CU/SM (an occupancy assumption)")
    l1_bytes_per_cu: int = Field(0, ge=0, description="L1 data cache per CU/SM that global loads go through "
                                                      "(0: no L1 model); stores write through to the L2")
    l1_ways: int = Field(4, ge=1, le=16)
    unified_l1_bytes_per_cu: int | None = Field(
        None, gt=0, description="NVIDIA: L1 and shared memory are one array; the L1 gets what the kernel's "
                                "shared-memory carve-out leaves")
    next_level: str | None = Field(None, description="what serves L2 misses, e.g. 'Infinity Cache 256 MB'")
    next_level_bytes: int | None = Field(None, gt=0)
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


KiB = 1024
_CDNA3 = dict(vendor="amd", num_domains=8, l2_bytes_per_domain=4 * MiB, line_bytes=128, l2_ways=16,
              dispatch=Dispatch(policy="round_robin", chunk=1), next_level="Infinity Cache (MALL)",
              next_level_bytes=256 * MiB, l1_bytes_per_cu=32 * KiB)
# Hopper: 256 KB of L1 and shared memory per SM; a kernel without shared memory still gets a 32 KB
# carve-out (ncu launch__shared_mem_config_size on an H100), which leaves 224 KB of L1.
_HOPPER = dict(vendor="nvidia", num_domains=1, line_bytes=128, sector_bytes=32, l2_ways=16,
               dispatch=Dispatch(policy="in_order"), unified_l1_bytes_per_cu=256 * KiB, l1_bytes_per_cu=224 * KiB)
# GH100 with 132 SMs (H100 SXM, H200): two L2 partitions; SM sides, scheduler order and the L1 as measured on an
# H100. The L1's index is an unpublished hash (benchmarks/probe_l1.py): a random cycle of lines re-walked
# conflicts like an 8-way cache with a random index (mean error 0.06 of the hit fraction; 16 ways: 0.08), but
# lines at power-of-two strides (1 to 1024 lines apart) all hit up to 192 KB, which no random index gives, and
# real tile loads miss only compulsorily (stencil2d: 337 sectors per program requested from L2, 336 compulsory).
# Of the random-index models, 16 ways comes closest to the L1 -> L2 read requests ncu counted on 13 kernels
# (mean error 1.4 %; 8 ways: 1.8 %, whose conflicts on stencil2d's tiles cost +7.5 %), so the model takes 16.
# A read miss fetches the 64-byte half of the line around each missing sector (benchmarks/probe_pending.py on an
# H100: one 32 B sector read per line, cold, costs two sector misses and 64 B of DRAM; a hit is one lookup).
# The scheduler walks the H100's SM order (sim/scheduler.py); the H200's walk was recorded too, the same within 0.012.
_GH100_132 = dict(l2_partitions=2, cu_partition=sm_partition("h100"), l1_ways=16, l2_fetch_bytes=64)


def _gh100_dispatch(peak_dram_gb_per_s: float) -> Dispatch:
    return Dispatch(policy="in_order", first_wave=first_wave_sequence("h100"),
                    walk=SchedulerWalk(peak_dram_bytes_per_ns=peak_dram_gb_per_s))


PRESETS: dict[str, HardwareSpec] = {
    spec.name: spec
    for spec in [
        HardwareSpec(name="mi300x", cus_per_domain=38, **_CDNA3,
                     source="AMD CDNA3 white paper: 8 XCDs x 38 CUs, 4 MB 16-way L2 per XCD, 128 B lines, "
                            "32 KB vector L1 per CU (associativity unpublished, 4 assumed), 256 MB Infinity "
                            "Cache; round-robin workgroup dispatch (AMD MI300X tuning guide)"),
        HardwareSpec(name="mi325x", cus_per_domain=38, **_CDNA3,
                     source="same CDNA3 compute dies as MI300X (AMD MI325X data sheet)"),
        HardwareSpec(name="mi355x", cus_per_domain=32, **{**_CDNA3, "l1_bytes_per_cu": 32 * KiB},
                     source="AMD CDNA4 white paper: 8 XCDs x 32 CUs, 4 MB L2 per XCD, 32 KB vector L1 per CU, "
                            "256 MB Infinity Cache"),
        HardwareSpec(name="h100", cus_per_domain=132, l2_bytes_per_domain=50 * MiB, next_level="HBM3",
                     **{**_HOPPER, **_GH100_132, "dispatch": _gh100_dispatch(3350.0)},
                     source="NVIDIA H100 SXM: 132 SMs, 50 MB L2 in two partitions, 128 B lines of four 32 B sectors, "
                            "256 KB L1/shared per SM (Hopper tuning guide, A100/H100 whitepapers); which SMs are near "
                            "which partition and the scheduler's SM order measured on an H100 "
                            "(benchmarks/probe_l2_partitions.py), its walk fitted on spin programs "
                            "(benchmarks/scheduler_model.py); HBM3 3.35 TB/s peak (H100 SXM data sheet); L1 "
                            "hash-indexed 16-way LRU, chosen against measured L1 traffic (benchmarks/probe_l1.py); a "
                            "read miss fetches 64 B (L2 fetch granularity, measured: benchmarks/probe_pending.py); L2 "
                            "associativity unpublished, 16 assumed"),
        HardwareSpec(name="h200", cus_per_domain=132, l2_bytes_per_domain=60 * MiB, next_level="HBM3e",
                     **{**_HOPPER, **_GH100_132, "dispatch": _gh100_dispatch(4800.0)},
                     source="NVIDIA H200: 132 SMs; L2 60 MB as reported by torch.cuda.get_device_properties; "
                            "HBM3e 4.8 TB/s peak (H200 data sheet); scheduler walk as the H100's (recorded on an "
                            "H200 too); otherwise as H100, SM layout, L1 ways and the 64 B fetch as measured on an "
                            "H100 (not verified on an H200); L2 associativity unpublished, 16 assumed"),
        HardwareSpec(name="gb10", cus_per_domain=48, l2_bytes_per_domain=24 * MiB, next_level="LPDDR5x",
                     **{**_HOPPER, "unified_l1_bytes_per_cu": 128 * KiB, "l1_bytes_per_cu": 96 * KiB},
                     source="NVIDIA GB10: 48 SMs, 24 MB L2, 128 KB L1/shared per SM (Blackwell consumer SM); "
                            "associativity unpublished, 16 (L2) and 4 (L1) assumed"),
    ]
}

DEFAULT_PRESET = "mi300x"


def load_spec_file(path: Path) -> HardwareSpec:
    """Read a user spec (YAML or JSON) and validate it; errors name the offending field."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise HardwareSpecError(f"cannot read hardware spec {path}: {exc.strerror}") from exc
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise HardwareSpecError(f"{path} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}") from exc
    if not isinstance(data, dict):
        raise HardwareSpecError(f"{path} must hold a mapping of spec fields, e.g. the output of "
                                f"`swizzleperf hw --show mi300x --json`")
    base = data.pop("base", None)
    if base is not None:  # `base: mi300x` plus overrides is the common way to write a variant
        if base not in PRESETS:
            raise HardwareSpecError(f"{path}: base '{base}' is not a preset ({', '.join(PRESETS)})")
        data = {**PRESETS[base].model_dump(), "name": f"{base}-custom", **data}
    try:
        return HardwareSpec.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_problem_text(e) for e in exc.errors())
        raise HardwareSpecError(f"invalid hardware spec {path}: {problems}") from exc


def _problem_text(error: dict) -> str:
    """One validation problem; an unknown field names the field it most likely means."""
    loc = [str(part) for part in error["loc"]]
    where = ".".join(loc) or "spec"
    if error["type"] != "extra_forbidden":
        return f"{where}: {error['msg']}"
    model = Dispatch if loc[:1] == ["dispatch"] else HardwareSpec
    fields = list(model.model_fields)
    # AMD calls a domain an XCD (or XCC), others a die: the spec's own word is "domain"
    spelled = loc[-1].lower().replace("xcds", "domains").replace("xccs", "domains").replace("dies", "domains")
    spelled = spelled.replace("xcd", "domain").replace("xcc", "domain").replace("die", "domain")
    close = difflib.get_close_matches(spelled, fields, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}?" if close else f"the fields are {', '.join(fields)}"
    return f"{where}: not a field of a {'dispatch' if model is Dispatch else 'hardware spec'} ({hint})"


def resolve(name_or_path: str | None) -> tuple[HardwareSpec, str]:
    """The spec to use and a sentence saying why it was chosen.

    None means: the local GPU when one is detected, else the default preset.
    """
    if name_or_path is None:
        detected = detect()
        if detected is not None:
            return detected, f"detected local GPU ({detected.source})"
        return PRESETS[DEFAULT_PRESET], f"no GPU detected; default preset {DEFAULT_PRESET}"
    if name_or_path in PRESETS:
        return PRESETS[name_or_path], f"preset {name_or_path}"
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml", ".json") or path.exists():
        if not path.exists():
            raise HardwareSpecError(f"hardware spec file {path} does not exist")
        return load_spec_file(path), f"spec file {path}"
    raise HardwareSpecError(f"unknown hardware '{name_or_path}': use a preset ({', '.join(PRESETS)}) "
                            f"or a .yaml/.json spec file")


# --- detection ----------------------------------------------------------------------------

_HIP_ATTRIBUTE_NUMBER_OF_XCCS = 10018  # hipDeviceAttributeNumberOfXccs, ROCm 7+
_XCDS_BY_ARCH = {"gfx942": 8, "gfx950": 8}  # MI300X/MI325X, MI350X/MI355X
_LARGEST_SINGLE_XCD_L2 = 8 * MiB  # no XCD has more; a larger value from torch is the total


def _hip_xcc_count(device: int) -> int | None:
    try:
        hip = ctypes.CDLL("libamdhip64.so")
    except OSError:
        return None
    value = ctypes.c_int(0)
    status = hip.hipDeviceGetAttribute(ctypes.byref(value), _HIP_ATTRIBUTE_NUMBER_OF_XCCS, device)
    return value.value if status == 0 and value.value > 0 else None


def detect(device: int = 0) -> HardwareSpec | None:
    """A spec for the local GPU, or None when there is none (or torch cannot see it)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0)) or 4 * MiB
    if getattr(torch.version, "hip", None):
        arch = getattr(props, "gcnArchName", "").split(":")[0]
        xccs = _hip_xcc_count(device)
        how = "hipDeviceAttributeNumberOfXccs"
        if xccs is None:
            xccs = _XCDS_BY_ARCH.get(arch, 1)
            how = f"assumed from {arch or 'unknown arch'} (HIP attribute unavailable)"
        per_xcd = l2 // xccs if l2 > _LARGEST_SINGLE_XCD_L2 else l2
        return HardwareSpec(
            name=f"local-{arch or 'rocm'}", vendor="amd", num_domains=xccs,
            cus_per_domain=max(1, props.multi_processor_count // xccs), l2_bytes_per_domain=per_xcd,
            dispatch=Dispatch(policy="round_robin"), l1_bytes_per_cu=_CDNA3["l1_bytes_per_cu"],
            source=f"{props.name}: {xccs} XCDs ({how}), L2 {per_xcd // MiB} MB per XCD from torch")
    sms = props.multi_processor_count
    hopper = getattr(props, "major", 0) == 9  # the L1/shared sizes are Hopper's; elsewhere the L1 is not modelled
    layout = _GH100_132 if hopper and sms == len(_GH100_132["cu_partition"]) else {}
    sets_unit = 128 * 16 * layout.get("l2_partitions", 1)
    return HardwareSpec(
        name=f"local-{props.name.replace(' ', '-').lower()}", cus_per_domain=sms,
        l2_bytes_per_domain=l2 // sets_unit * sets_unit,
        **(_HOPPER if hopper else {**_HOPPER, "unified_l1_bytes_per_cu": None, "l1_bytes_per_cu": 0}) | layout,
        source=f"{props.name}: {sms} SMs, L2 {l2 / MiB:g} MB from torch"
               + ("; two L2 partitions, SM layout as measured on an H100" if layout else "; L2 modelled as one")
               + ("" if hopper else "; not a Hopper GPU: L1 not modelled"))
