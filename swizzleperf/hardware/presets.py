"""The hardware presets, by name: the registry `--hardware NAME` reads, and spec files built on one.

A new preset is one `register(HardwareSpec(...))` call here, with a `source` that says where each
value comes from (docs/extending.md).
"""

from __future__ import annotations

import difflib
from pathlib import Path

import yaml
from pydantic import ValidationError

from swizzleperf.errors import HardwareSpecError
from swizzleperf.hardware.layouts.measured import first_wave_sequence, sm_partition
from swizzleperf.hardware.spec import Dispatch, HardwareSpec, SchedulerWalk
from swizzleperf.untrusted import readback
from swizzleperf.untrusted.parse import echo

MiB = 1024 * 1024
KiB = 1024
# A CU's k-th oldest resident program goes 1 / (1 + 0.066 k) as fast as its oldest: measured on an H200 from when
# each SM's first-wave programs free their slots (benchmarks/fit_pace.py; the median over nine kernels, whose own
# figures range from 0.021, gemm, to 0.25, attention). Not measured on the other GPUs; the same rule is assumed.
YOUNGER_SLOWDOWN = 0.066
_CDNA3 = dict(vendor="amd", num_domains=8, l2_bytes_per_domain=4 * MiB, line_bytes=128, l2_ways=16,
              dispatch=Dispatch(policy="round_robin", chunk=1, younger_slowdown=YOUNGER_SLOWDOWN), next_level="Infinity Cache (MALL)",
              next_level_bytes=256 * MiB, l1_bytes_per_cu=32 * KiB)
# Hopper: 256 KB of L1 and shared memory per SM; a kernel without shared memory still gets a 32 KB
# carve-out (ncu launch__shared_mem_config_size on an H100), which leaves 224 KB of L1.
_HOPPER = dict(vendor="nvidia", num_domains=1, line_bytes=128, sector_bytes=32, l2_ways=16,
               dispatch=Dispatch(policy="in_order", younger_slowdown=YOUNGER_SLOWDOWN), unified_l1_bytes_per_cu=256 * KiB, l1_bytes_per_cu=224 * KiB)
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
    return Dispatch(policy="in_order", first_wave=first_wave_sequence("h100"), younger_slowdown=YOUNGER_SLOWDOWN,
                    walk=SchedulerWalk(peak_dram_bytes_per_ns=peak_dram_gb_per_s))


PRESETS: dict[str, HardwareSpec] = {}


def register(spec: HardwareSpec) -> HardwareSpec:
    """Add a preset under its name (a second one of the same name is a programming error)."""
    if spec.name in PRESETS:
        raise ValueError(f"preset {spec.name} is registered twice")
    PRESETS[spec.name] = spec
    return spec


for _spec in [
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
]:
    register(_spec)

DEFAULT_PRESET = "mi300x"
SPEC_BYTES = 1024 * 1024  # a spec is a few dozen lines; a measured first-wave order a few KB


def load_spec_file(path: Path) -> HardwareSpec:
    """Read a user spec (YAML or JSON) and validate it; errors name the offending field."""
    kind = "JSON" if path.suffix == ".json" else "YAML"
    try:
        text = readback.read_text(path, "the hardware spec", SPEC_BYTES, inside=path.resolve().parent)
        data = readback.parse_json(text, f"the hardware spec {path}") if kind == "JSON" else _yaml(text, path)
    except OSError as exc:
        raise HardwareSpecError(f"cannot read hardware spec {path}: {exc.strerror}") from None
    except readback.StoredFileError as exc:
        raise HardwareSpecError(str(exc)) from None
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


def _yaml(text: str, path: Path):
    """YAML at most readback.MAX_NESTING deep (the parser recurses) and without aliases (a few lines of
    them expand to gigabytes) or tags outside safe YAML."""
    flow = readback.nesting(text)  # brackets first: PyYAML takes 25 s to parse 20,000 of them
    if flow > readback.MAX_NESTING:
        raise HardwareSpecError(f"{path} nests {flow:,} levels deep; the limit is {readback.MAX_NESTING}")
    try:
        events = list(yaml.parse(text, Loader=yaml.SafeLoader))
        depth = deepest = 0
        for event in events:
            if isinstance(event, yaml.AliasEvent):
                raise HardwareSpecError(f"{path} uses a YAML alias (*{event.anchor}); write the values out")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                deepest = max(deepest, depth)
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        if deepest > readback.MAX_NESTING:
            raise HardwareSpecError(f"{path} nests {deepest:,} levels deep; the limit is {readback.MAX_NESTING}")
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise HardwareSpecError(f"{path} is not valid YAML: {echo(' '.join(str(exc).split()), 200)}") from None


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
