"""rocprofv3 backend: measured L2 (TCC) hits and misses per dispatch on AMD Instinct GPUs.

Command: `rocprofv3 --pmc TCC_HIT_sum TCC_MISS_sum --kernel-include-regex RE
--output-format csv -d OUTDIR -o NAME -- python -m swizzleperf.profilers.runner ...`. csv is
passed explicitly because ROCm 7 writes a database by default.

Output, and what changed across releases (all parsed by header name, never by position):
- the file is `NAME_counter_collection.csv` directly in OUTDIR, or under `pmc_1/` or
  `pass_1/` in older releases: found with a recursive glob;
- one row per (dispatch, counter); the first releases had no Start/End_Timestamp, later ones
  added Kernel_Id and Accum_VGPR_Count, ROCm 7 writes Agent_Id as "Agent N";
- Counter_Value is an integer in old releases, "%.6f" or "%.8e" in newer ones;
- the SDK sums a counter over its hardware instances before writing the row, so a row is
  the whole GPU's (or with a `select`, one XCD's) value for that dispatch.
Grid_Size counts work-items, not workgroups. `NAME_agent_info.csv`, when present, gives the
XCD count of each GPU (Num_Xcc).

Aggregation: the runner's measured launches are the last `iters` dispatches of the kernel,
each after an L2 flush; earlier dispatches (warm-up, autotuning) are dropped. Counters are
summed over the kept dispatches and reported per launch (the mean); the hit rate is
100*TCC_HIT_sum/(TCC_HIT_sum+TCC_MISS_sum), rocprof-compute's definition, in which a hit on
a line whose miss is still in flight counts as a hit.

Per-XCD hit rates (off by default) come from extra counters defined in a YAML file passed
with `-E` (rocprofv3 of ROCm 7): `select(TCC_HIT,[DIMENSION_XCC=[i]])` for each XCD.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Mapping

import yaml

from swizzleperf.errors import ProfilerError
from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.profilers.runner import (
    L2State,
    child_env,
    expected_programs,
    find_tool,
    kernel_name_regex,
    launched_kernel_names,
    run_tool,
    runner_command,
    write_candidate,
)
from swizzleperf.profilers.timer import summarize_times
from swizzleperf.records.report import RUN_TO_RUN_PTS, BottleneckReport, DomainStats

HIT, MISS = "TCC_HIT_sum", "TCC_MISS_sum"
OUTPUT_NAME = "swizzleperf"
KERNEL_NAME_SUFFIX = r"(\.kd)?"  # some releases print the code-object symbol, "name.kd"
EXTRA_COUNTER_ARCHITECTURES = ("gfx940", "gfx941", "gfx942", "gfx950")  # MI300A/X, MI325X, MI350X/MI355X
_REQUIRED_COLUMNS = ("Dispatch_Id", "Kernel_Name", "Counter_Name", "Counter_Value")
_HINTS = {
    "unrecognized arguments: -E": "per-XCD counters need a rocprofv3 with -E/--extra-counters (ROCm 7); "
                                  "profile without per_xcd",
    "unrecognized arguments: --output-format": "this rocprofv3 predates --output-format; use ROCm 6.2 or newer",
}


def install_dirs() -> tuple[str | None, ...]:
    rocm = os.environ.get("ROCM_PATH")
    return (os.path.join(rocm, "bin") if rocm else None, "/opt/rocm/bin")


def xcd_counter(kind: Literal["HIT", "MISS"], xcd: int) -> str:
    """Name of the extra counter holding one XCD's TCC hits or misses."""
    return f"SWZ_TCC_{kind}_XCC{xcd}"


def extra_counters_yaml(num_xcds: int) -> str:
    """Counter definitions for rocprofv3 -E: TCC_HIT and TCC_MISS restricted to each XCD."""
    counters = [
        {"name": xcd_counter(kind, xcd),
         "description": f"TCC_{kind} on XCC {xcd}, summed over its L2 channels (swizzleperf)",
         "properties": [],
         "definitions": [{"architectures": list(EXTRA_COUNTER_ARCHITECTURES),
                          "expression": f"select(TCC_{kind},[DIMENSION_XCC=[{xcd}]])"}]}
        for xcd in range(num_xcds) for kind in ("HIT", "MISS")
    ]
    return yaml.safe_dump({"rocprofiler-sdk": {"counters-schema-version": 1, "counters": counters}},
                          sort_keys=False)


# --- parsing ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class RocprofDispatch:
    dispatch_id: int
    kernel_name: str
    counters: Mapping[str, float]
    grid_size: int | None = None  # work-items
    workgroup_size: int | None = None
    start_ns: int | None = None
    end_ns: int | None = None

    @property
    def workgroups(self) -> int | None:
        if self.grid_size is None or not self.workgroup_size:
            return None
        return self.grid_size // self.workgroup_size


@dataclass(frozen=True)
class RocprofCounters:
    """The dispatches of the target kernel in one counter-collection file, in dispatch order."""

    dispatches: tuple[RocprofDispatch, ...]
    other_kernels: tuple[str, ...] = field(default=())  # names of kernels the regex filtered out

    def last(self, n: int) -> "RocprofCounters":
        return RocprofCounters(self.dispatches[-n:], self.other_kernels)

    def total(self, counter: str) -> float:
        missing = [d.dispatch_id for d in self.dispatches if counter not in d.counters]
        if missing:
            raise ProfilerError(f"counter {counter} is missing for dispatch(es) {missing}; the counters found are "
                                f"{sorted(self.dispatches[0].counters)}")
        return sum(d.counters[counter] for d in self.dispatches)

    def has(self, counter: str) -> bool:
        return bool(self.dispatches) and all(counter in d.counters for d in self.dispatches)

    @property
    def hits(self) -> float:
        return self.total(HIT)

    @property
    def misses(self) -> float:
        return self.total(MISS)

    @property
    def hit_pct(self) -> float:
        lookups = self.hits + self.misses
        if lookups <= 0:
            raise ProfilerError(f"{HIT} + {MISS} is 0 over {len(self.dispatches)} dispatch(es): the kernel made no "
                                f"L2 requests, or the counters were not collected")
        return 100.0 * self.hits / lookups

    def durations_ns(self) -> list[int] | None:
        if not self.dispatches or any(d.start_ns is None or d.end_ns is None for d in self.dispatches):
            return None
        return [d.end_ns - d.start_ns for d in self.dispatches]


def _text_of(path_or_text: str | Path) -> str:
    if isinstance(path_or_text, Path):
        return path_or_text.read_text()
    if "\n" not in path_or_text and Path(path_or_text).is_file():
        return Path(path_or_text).read_text()
    return path_or_text


def _optional_int(row: Mapping[str, str | None], column: str) -> int | None:
    value = (row.get(column) or "").strip()
    return int(float(value)) if value else None


def parse_counter_csv(path_or_text: str | Path, kernel_regex: str) -> RocprofCounters:
    """Read a rocprofv3 `*_counter_collection.csv` (any release) and keep the target kernel's dispatches.

    A counter that appears on several rows of one dispatch is summed, as the SDK itself does
    across hardware instances.
    """
    pattern = re.compile(kernel_regex)
    reader = csv.DictReader(io.StringIO(_text_of(path_or_text)))
    header = reader.fieldnames or []
    missing = [c for c in _REQUIRED_COLUMNS if c not in header]
    if missing:
        raise ProfilerError(f"not a rocprofv3 counter-collection CSV: no column(s) {', '.join(missing)} in header "
                            f"{header}; was it written with --output-format csv?")
    first_rows: dict[int, Mapping[str, str]] = {}
    values: dict[int, dict[str, float]] = {}
    others: list[str] = []
    for row in reader:
        name = row["Kernel_Name"]
        if not pattern.search(name):
            if name not in others:
                others.append(name)
            continue
        dispatch_id = int(row["Dispatch_Id"])
        try:
            value = float(row["Counter_Value"])
        except ValueError:
            raise ProfilerError(f"dispatch {dispatch_id}: counter {row['Counter_Name']} has a non-numeric value "
                                f"{row['Counter_Value']!r}") from None
        first_rows.setdefault(dispatch_id, row)
        counters = values.setdefault(dispatch_id, {})
        counters[row["Counter_Name"]] = counters.get(row["Counter_Name"], 0.0) + value
    dispatches = tuple(
        RocprofDispatch(dispatch_id=i, kernel_name=row["Kernel_Name"], counters=values[i],
                        grid_size=_optional_int(row, "Grid_Size"), workgroup_size=_optional_int(row, "Workgroup_Size"),
                        start_ns=_optional_int(row, "Start_Timestamp"), end_ns=_optional_int(row, "End_Timestamp"))
        for i, row in sorted(first_rows.items()))
    return RocprofCounters(dispatches, tuple(others))


def parse_agent_info(path_or_text: str | Path) -> list[int]:
    """XCD counts (Num_Xcc) of the GPU agents in a rocprofv3 `*_agent_info.csv`."""
    reader = csv.DictReader(io.StringIO(_text_of(path_or_text)))
    if "Num_Xcc" not in (reader.fieldnames or []):
        return []
    return [int(row["Num_Xcc"]) for row in reader if row.get("Agent_Type", "GPU") == "GPU"]


def read_output_dir(outdir: Path, kernel_regex: str) -> tuple[RocprofCounters, list[int]]:
    """Find and parse the counter file holding the target kernel, wherever this release put it."""
    files = sorted(outdir.glob("**/*_counter_collection.csv"))
    if not files:
        found = sorted(str(p.relative_to(outdir)) for p in outdir.rglob("*") if p.is_file())
        raise ProfilerError(f"rocprofv3 wrote no *_counter_collection.csv under {outdir} (found: "
                            f"{', '.join(found) or 'nothing'}); check that the counters exist on this GPU "
                            f"(rocprofv3 --list-avail) and that the kernel ran")
    parsed = {path: parse_counter_csv(path, kernel_regex) for path in files}
    with_target = [path for path, counters in parsed.items() if counters.dispatches]
    if not with_target:
        others = sorted({name for c in parsed.values() for name in c.other_kernels})
        raise ProfilerError(f"no dispatch in {', '.join(map(str, files))} matches {kernel_regex!r}; kernels seen: "
                            f"{', '.join(others) or 'none'}")
    if len(with_target) > 1:
        raise ProfilerError(f"the kernel's dispatches are split over several counter files "
                            f"({', '.join(map(str, with_target))}): the counters took more than one pass; "
                            f"collect fewer counters at once")
    xccs = [n for path in sorted(outdir.glob("**/*_agent_info.csv")) for n in parse_agent_info(path)]
    return parsed[with_target[0]], xccs


# --- the report ------------------------------------------------------------------------------

def counters_report(counters: RocprofCounters, *, hw: HardwareSpec, kernel_name: str, size: str, iters: int,
                    l2_state: L2State, expected_programs: int | None = None, num_xcc: list[int] | None = None,
                    per_xcd: int | None = None) -> BottleneckReport:
    """Turn the parsed dispatches into a report: the last `iters` dispatches, per launch."""
    if not counters.dispatches:
        raise ProfilerError("rocprofv3 recorded no dispatch of the kernel")
    kept = counters.last(iters)
    n = len(kept.dispatches)
    hits, misses = kept.hits, kept.misses
    notes = _dispatch_notes(counters, kept, iters, l2_state, expected_programs)
    if num_xcc:
        distinct = sorted(set(num_xcc))
        notes.append(f"GPU reports Num_Xcc={'/'.join(map(str, distinct))} (agent_info)")
        if hw.num_domains not in distinct:
            notes.append(f"WARNING: the hardware spec {hw.name} has {hw.num_domains} L2 domains but the GPU reports "
                         f"{'/'.join(map(str, distinct))} XCDs; pass the matching spec")
    per_domain = _per_xcd_stats(kept, per_xcd, notes) if per_xcd else []
    durations = kept.durations_ns()
    timing = None
    if durations is not None:
        timing = summarize_times([ns / 1e6 for ns in durations], l2_state,
                                 source="rocprofv3 dispatch timestamps (counters on)")
    else:
        notes.append("no dispatch timestamps in this rocprofv3 release's CSV: no time")
    return BottleneckReport(source="rocprofv3", hardware=hw.name, kernel=kernel_name, size=size, metric="all",
                            hit_pct=kept.hit_pct, accesses=round((hits + misses) / n), hits=round(hits / n),
                            per_domain=per_domain, timing=timing, notes=notes)


def _dispatch_notes(counters: RocprofCounters, kept: RocprofCounters, iters: int, l2_state: L2State,
                    expected_programs: int | None) -> list[str]:
    """What the report's numbers are, and which dispatches they come from (warnings where they look wrong)."""
    found, n = len(counters.dispatches), len(kept.dispatches)
    names = sorted({d.kernel_name for d in kept.dispatches})
    notes = [
        f"rocprofv3 {HIT} and {MISS} over the last {n} dispatch(es) of {', '.join(names)}; counts are per launch "
        f"(mean); accesses are L2 (TCC) requests",
        f"hit rate = 100*{HIT}/({HIT}+{MISS}) (rocprof-compute's definition: a hit on an in-flight miss is a hit); "
        f"reads and writes together: these counters do not split them, so it is not the simulator's read hit rate",
        "L2 flushed before every measured launch (256 MB buffer zeroed, as do_bench)" if l2_state == "flushed"
        else "L2 warm: measured launches ran back to back",
    ]
    if found > n:
        notes.append(f"dropped the first {found - n} dispatch(es) of the kernel (warm-up and autotuning)")
    if n < iters:
        notes.append(f"WARNING: expected {iters} measured dispatches, found {n}")
    if counters.other_kernels:
        notes.append(f"ignored dispatches of other kernels: {', '.join(counters.other_kernels)}")
    groups = {d.workgroups for d in kept.dispatches}
    if len(groups) == 1 and (workgroups := groups.pop()) is not None:
        first = kept.dispatches[0]
        notes.append(f"grid: {workgroups} workgroups ({first.grid_size} work-items / {first.workgroup_size})")
        if expected_programs is not None and workgroups != expected_programs:
            notes.append(f"WARNING: the kernel contract expects {expected_programs} programs but the dispatch has "
                         f"{workgroups} workgroups: the regex may match another kernel")
    return notes


def _per_xcd_stats(kept: RocprofCounters, per_xcd: int, notes: list[str]) -> list[DomainStats]:
    """Each XCD's requests and hits per launch, from the per-XCD counters (a note says how they were read)."""
    n = len(kept.dispatches)
    absent = [c for c in (xcd_counter(k, x) for x in range(per_xcd) for k in ("HIT", "MISS")) if not kept.has(c)]
    if absent:
        raise ProfilerError(f"per-XCD counters {', '.join(absent)} are missing from the output; the -E counter "
                            f"definitions were not applied (needs rocprofv3 of ROCm 7)")
    per_domain, summed = [], 0.0
    for xcd in range(per_xcd):
        xh, xm = kept.total(xcd_counter("HIT", xcd)), kept.total(xcd_counter("MISS", xcd))
        per_domain.append(DomainStats(domain=xcd, accesses=round((xh + xm) / n), hits=round(xh / n)))
        summed += xh + xm
    total = kept.hits + kept.misses
    notes.append(f"per-XCD counters: select(TCC_HIT|TCC_MISS,[DIMENSION_XCC=[i]]) for i < {per_xcd}")
    if abs(summed - total) > 1e-3 * total:
        notes.append(f"WARNING: per-XCD requests sum to {summed:.0f} but {HIT}+{MISS} is {total:.0f}")
    return per_domain


# --- the profiler ----------------------------------------------------------------------------

class RocprofV3Profiler:
    """Measure L2 hit rate on the local AMD GPU with rocprofv3."""

    name = "rocprofv3"
    measures = True
    run_to_run_pts = RUN_TO_RUN_PTS.get("rocprofv3", 0.0)  # not measured yet

    def __init__(self, hw: HardwareSpec, binary: str = "rocprofv3", per_xcd: bool = False, timeout: float = 900.0,
                 *, warmup: int = 1, iters: int = 3, l2: L2State = "flushed", num_xcds: int | None = None,
                 raw_dir: Path | None = None):
        path = find_tool(binary, install_dirs())
        if path is None:
            raise ProfilerError(
                f"{binary} not found (looked on PATH and in {', '.join(d for d in install_dirs() if d)}): install "
                f"ROCm's rocprofiler-sdk (it ships rocprofv3 in /opt/rocm/bin) and put it on PATH, or use the "
                f"simulator profiler")
        self.hw, self.binary, self.per_xcd, self.timeout = hw, path, per_xcd, timeout
        self.warmup, self.iters, self.l2 = warmup, iters, l2
        self.num_xcds = num_xcds if num_xcds is not None else hw.num_domains
        self.raw_dir = raw_dir

    def command(self, candidate: Path, size: str, kernel_regex: str, outdir: Path,
                extra_counters: Path | None = None) -> list[str]:
        counters = [HIT, MISS]
        cmd = [self.binary]
        if extra_counters is not None:
            cmd += ["-E", str(extra_counters)]
            counters += [xcd_counter(k, x) for x in range(self.num_xcds) for k in ("HIT", "MISS")]
        cmd += ["--pmc", *counters, "--kernel-include-regex", kernel_regex, "--output-format", "csv",
                "-d", str(outdir), "-o", OUTPUT_NAME, "--"]
        return cmd + runner_command(candidate, size, num_xcds=self.num_xcds, warmup=self.warmup, iters=self.iters,
                                    l2=self.l2)

    def profile(self, kernel: KernelFile, remap_source: str, size: str) -> BottleneckReport:
        regex = kernel_name_regex(launched_kernel_names(kernel), KERNEL_NAME_SUFFIX)
        with tempfile.TemporaryDirectory(prefix="swizzleperf-rocprofv3-") as tmp:
            workdir = Path(tmp)
            candidate = write_candidate(kernel, remap_source, workdir)
            extra = None
            if self.per_xcd:
                extra = workdir / "swizzleperf_counters.yaml"
                extra.write_text(extra_counters_yaml(self.num_xcds))
            outdir = workdir / "rocprof"
            run_tool(self.command(candidate, size, regex, outdir, extra), timeout=self.timeout, what="rocprofv3",
                     env=child_env(), hints=_HINTS)
            if self.raw_dir is not None:
                shutil.copytree(outdir, self.raw_dir / f"{kernel.name}-{size}-rocprofv3", dirs_exist_ok=True)
            counters, num_xcc = read_output_dir(outdir, regex)
        return counters_report(counters, hw=self.hw, kernel_name=kernel.name, size=size, iters=self.iters,
                               l2_state=self.l2, expected_programs=expected_programs(kernel, size), num_xcc=num_xcc,
                               per_xcd=self.num_xcds if self.per_xcd else None)
