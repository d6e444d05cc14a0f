"""Nsight Compute backend: measured L2 sector hits and misses per launch on NVIDIA GPUs.

Command: `ncu --csv --print-units base --metrics <METRICS> --cache-control all
--profile-from-start off --kernel-name regex:RE python -m swizzleperf.profilers.runner ...
--profiler-range`. Two flags beyond the usual L2 metrics, both for exact numbers:
`--print-units base` stops ncu from rescaling values per row ("1.23 Msector" keeps three
digits); `--profile-from-start off` with the runner's cudaProfilerStart/Stop range profiles
the measured launches only, so warm-up and autotuning launches are never replayed.

Output (the "details" page as CSV): `==PROF==`/`==WARNING==`/`==ERROR==` lines mixed with CSV
lines, which all start with `"`; one row per (launch, metric); values may carry thousands
separators ("1,234,567"); a units column. Columns are read by header name: older releases
have a "Kernel Time" column and no launch geometry, current ones have "Block Size"/"Grid Size"
(in blocks, e.g. "(16384, 1, 1)"), and some append rule columns.

Numbers: the read hit rate is that of the SMs' read requests, over 32-byte sectors: 1 - L2 read
lookup misses (srcunit_tex) / read sectors the L2 returned to the SMs (`SM_READ_SECTORS`). Not the
L2's own lookup_hit / (lookup_hit + lookup_miss): on an H100 the L2 request coalescer merges
requests from several SMs for one sector before the tag lookup (ncu's `lrc__*` counters), so 0-20 %
of the SMs' reads are served without a lookup of their own. Such a read is not a miss (no fetch, no
DRAM traffic), and the remaps that gather sharers in time make the most of them, so the lookup
rate ranks them backwards (elementwise: col-major reads 6 % fewer DRAM bytes than row-major
and shows a lookup hit rate 7 points lower). The lookup rate is in the notes; recordings without
`SM_READ_SECTORS` fall back to the L1 misses of global loads (equal within 0.3 % on the suite)
and, without those, to the lookups. `lts__t_sector_hit_rate.pct` is kept in the notes only: its hits and lookups come from
different replay passes and it can exceed 100 %. `dram__bytes_read.sum` is the bytes fetched
from the next level. Counters are summed over the kept launches and reported per launch;
time is the median gpu__time_duration. With `--cache-control all` ncu flushes every cache
before each replay pass, so every launch is measured from a cold L2.
"""

from __future__ import annotations

import csv
import os
import re
import tempfile
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Literal, Mapping, Sequence

from swizzleperf.errors import ProfilerError
from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.profilers.runner import (
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
from swizzleperf.records.report import RUN_TO_RUN_PTS, BottleneckReport

HIT_RATE_PCT = "lts__t_sector_hit_rate.pct"
SECTORS = "lts__t_sectors.sum"
LOOKUP_HIT = "lts__t_sectors_lookup_hit.sum"
LOOKUP_MISS = "lts__t_sectors_lookup_miss.sum"
DURATION = "gpu__time_duration.sum"
DRAM_READ = "dram__bytes_read.sum"
# requests from the SMs (srcunit_tex), split by operation; the plain lookups above also count traffic
# between the H100's two L2 partitions (srcunit_ltcfabric)
READ_HIT = "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum"
READ_MISS = "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum"
WRITE_HIT = "lts__t_sectors_srcunit_tex_op_write_lookup_hit.sum"
WRITE_MISS = "lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum"
TEX_HIT = "lts__t_sectors_srcunit_tex_lookup_hit.sum"
TEX_MISS = "lts__t_sectors_srcunit_tex_lookup_miss.sum"
L1_HIT = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum"
L1_MISS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss.sum"
# read sectors the L2 returned to the SMs for global/local loads: every L1 miss, including the requests
# merged before the L2's tag lookup (which the lookup counters above never see)
SM_READ_SECTORS = "l1tex__m_xbar2l1tex_read_sectors_mem_lg_op_ld.sum"
# where the SMs' read misses were served (fidelity recordings): the other L2 partition's lookups of what
# the near one lacked (a far hit is a read miss on the SM side with no DRAM traffic) and the sectors
# filled from DRAM; on the H100 the SM-side read misses equal far hits + fills (to 0.5 % of the reads)
FAR_READ_HIT = "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_hit.sum"
FAR_READ_MISS = "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_miss.sum"
DRAM_FILLS = "lts__d_sectors_fill_device.sum"
OCCUPANCY_LIMITS = ("launch__occupancy_limit_blocks", "launch__occupancy_limit_registers",
                    "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_warps")
METRICS = (HIT_RATE_PCT, SECTORS, LOOKUP_HIT, LOOKUP_MISS, DURATION, DRAM_READ, READ_HIT, READ_MISS, WRITE_HIT,
           WRITE_MISS, TEX_HIT, TEX_MISS, L1_HIT, L1_MISS, SM_READ_SECTORS, *OCCUPANCY_LIMITS)

CacheControl = Literal["all", "none"]
_REQUIRED_COLUMNS = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")
_TIME_TO_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
               "second": 1e9, "s": 1e9}
_SI_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}  # ncu scales decimally
# counts: "sector", "byte", and launch statistics such as "block", "register/thread", "byte/block"
_COUNT_UNIT = re.compile(r"^([KMGT]?)(byte|sector|block|register|warp|thread|request|cycle|inst)(/[a-z]+)?$")
_PERMISSION_FIX = ("this user may not read GPU performance counters: run as root, or load the nvidia driver with "
                   "NVreg_RestrictProfilingToAdminUsers=0 (https://developer.nvidia.com/ERR_NVGPUCTRPERM)")
_HINTS = {"ERR_NVGPUCTRPERM": _PERMISSION_FIX}


def install_dirs() -> tuple[str | None, ...]:
    cuda = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    return (os.path.join(cuda, "bin") if cuda else None, "/usr/local/cuda/bin")


def ncu_arguments(binary: str, metrics: Sequence[str], kernel_regex: str, *, cache_control: str = "all",
                  from_start: bool = True) -> list[str]:
    """ncu's command line up to the profiled program: CSV in base units, `metrics`, the caches as
    `cache_control` says between replay passes, only the launches of kernels matching `kernel_regex`;
    `from_start=False`: only inside the program's profiler range (the runner's)."""
    return [binary, "--csv", "--print-units", "base", "--metrics", ",".join(metrics), "--cache-control", cache_control,
            *(() if from_start else ("--profile-from-start", "off")), "--kernel-name", f"regex:{kernel_regex}"]


def profile_program(argv: Sequence[str], metrics: Sequence[str], kernel_regex: str,
                    timeout: float = 900.0) -> NcuResult:
    """`argv` run under ncu (`--cache-control all`, from its start), its launches of kernels matching
    `kernel_regex`: how the probes in benchmarks/ measure. A ProfilerError, with ncu's last words, when ncu is
    missing, fails, or profiled no such launch."""
    binary = find_tool("ncu", install_dirs())
    if binary is None:
        raise ProfilerError(f"ncu not found (looked on PATH and in {', '.join(d for d in install_dirs() if d)})")
    done = run_tool([*ncu_arguments(binary, metrics, kernel_regex), *argv], timeout=timeout, what="ncu",
                    hints=_HINTS)
    result = parse_ncu_csv(done.stdout + "\n" + done.stderr, kernel_regex)
    if not result.launches:
        raise ProfilerError(f"ncu profiled no launch matching {kernel_regex!r}\n{done.stdout[-2000:]}"
                            f"{done.stderr[-2000:]}")
    return result


def to_base_unit(value: float, unit: str, metric: str) -> float:
    """A metric value in ncu's base unit (ns, byte, sector, %), whatever scale ncu printed."""
    if unit in ("", "%"):
        return value
    if unit in _TIME_TO_NS:
        return value * _TIME_TO_NS[unit]
    if match := _COUNT_UNIT.match(unit):
        return value * _SI_PREFIX[match.group(1)]
    raise ProfilerError(f"ncu printed {metric} in unit {unit!r}, which swizzleperf does not know; "
                        f"profile with --print-units base")


def _geometry(text: str | None) -> int | None:
    """'(16384, 1, 1)' -> 16384 (ncu prints grid and block sizes per dimension)."""
    dims = re.findall(r"\d+", text or "")
    return prod(int(d) for d in dims) if dims else None


@dataclass(frozen=True)
class NcuLaunch:
    launch_id: int
    kernel_name: str
    metrics: Mapping[str, float]  # base units: sector, byte, ns, %
    grid_blocks: int | None = None
    block_threads: int | None = None


@dataclass(frozen=True)
class NcuResult:
    """The target kernel's profiled launches, in launch order, and ncu's own messages."""

    launches: tuple[NcuLaunch, ...]
    other_kernels: tuple[str, ...] = field(default=())
    messages: tuple[str, ...] = field(default=())  # ==PROF== / ==WARNING== / ==ERROR== lines

    def last(self, n: int) -> "NcuResult":
        return NcuResult(self.launches[-n:], self.other_kernels, self.messages)

    def values(self, metric: str) -> list[float]:
        missing = [launch.launch_id for launch in self.launches if metric not in launch.metrics]
        if missing:
            raise ProfilerError(f"ncu reported no value for {metric} in launch(es) {missing} (n/a or absent); "
                                f"check the metric exists on this GPU: ncu --query-metrics")
        return [launch.metrics[metric] for launch in self.launches]

    def total(self, metric: str) -> float:
        return sum(self.values(metric))


def parse_ncu_csv(text: str, kernel_regex: str) -> NcuResult:
    """Read `ncu --csv` output (any mix of messages and CSV) and keep the target kernel's launches."""
    pattern = re.compile(kernel_regex)
    lines = text.splitlines()
    messages = tuple(line for line in lines if line.startswith("=="))
    reader = csv.DictReader([line for line in lines if line.startswith('"')])
    header = reader.fieldnames or []
    if not header:
        return NcuResult((), (), messages)
    missing = [c for c in _REQUIRED_COLUMNS if c not in header]
    if missing:
        raise ProfilerError(f"unexpected ncu CSV: no column(s) {', '.join(missing)} in header {header}; swizzleperf "
                            f"reads the details page (one row per metric), not --page raw")
    first_rows: dict[int, Mapping[str, str]] = {}
    values: dict[int, dict[str, float]] = {}
    others: list[str] = []
    for row in reader:
        name = row["Kernel Name"]
        if not pattern.search(name):
            if name not in others:
                others.append(name)
            continue
        launch_id = int(row["ID"].replace(",", ""))
        first_rows.setdefault(launch_id, row)
        metrics = values.setdefault(launch_id, {})
        raw = row["Metric Value"].replace(",", "").strip()
        if raw.lower() in ("", "n/a"):
            continue
        try:
            number = float(raw)
        except ValueError:
            raise ProfilerError(f"ncu launch {launch_id}: {row['Metric Name']} = {row['Metric Value']!r} is not "
                                f"a number") from None
        metrics[row["Metric Name"]] = to_base_unit(number, row["Metric Unit"], row["Metric Name"])
    launches = tuple(
        NcuLaunch(launch_id=i, kernel_name=row["Kernel Name"], metrics=values[i],
                  grid_blocks=_geometry(row.get("Grid Size")), block_threads=_geometry(row.get("Block Size")))
        for i, row in sorted(first_rows.items()))
    return NcuResult(launches, tuple(others), messages)


def read_requests(metrics: Mapping[str, float]) -> tuple[float, float, str]:
    """(read sectors the SMs requested from the L2, how many of them missed there, the definition in words).

    A request merged before the L2's tag lookup is served without a miss, so hits = requests - misses."""
    misses = metrics[READ_MISS]
    for total, what in ((SM_READ_SECTORS, "read sectors the L2 returned to the SMs"),
                        (L1_MISS, "L1 misses of global loads (no SM_READ_SECTORS in this recording)")):
        if total in metrics and metrics[total] > 0:
            requests = metrics[total]
            return requests, min(misses, requests), f"read hit rate = 1 - {READ_MISS} / {total} ({what})"
    return metrics[READ_HIT] + misses, misses, f"read hit rate = {READ_HIT} / lookups (no request count recorded)"


def _fmt(values: list[float]) -> str:
    return ", ".join(f"{v:g}" for v in values)


def ncu_report(result: NcuResult, *, hw: HardwareSpec, kernel_name: str, size: str, iters: int,
               cache_control: CacheControl, expected_programs: int | None = None) -> BottleneckReport:
    """Turn the parsed launches into a report: the last `iters` launches, per launch."""
    if not result.launches:
        raise ProfilerError("ncu profiled no launch of the kernel")
    found = len(result.launches)
    kept = result.last(iters)
    n = len(kept.launches)
    split, totals, requests, hits, definition = _hit_counts(kept)
    names = sorted({launch.kernel_name for launch in kept.launches})
    extra = _split_fields(kept, n) if split else {}
    notes = [
        f"ncu over the last {n} launch(es) of {', '.join(names)}; counts are per launch (mean), in 32-byte "
        f"sectors; {definition}",
        *([f"L2 lookup hit rate {100 * totals[READ_HIT] / (totals[READ_HIT] + totals[READ_MISS]):.2f}% "
           f"({READ_HIT} / lookups): {100 * max(0.0, 1 - (totals[READ_HIT] + totals[READ_MISS]) / requests):.1f}% of "
           f"the SMs' reads were merged before the lookup"] if split and totals[READ_HIT] + totals[READ_MISS] else []),
        f"{HIT_RATE_PCT} per launch: {_fmt(kept.values(HIT_RATE_PCT))} (not used: its hits and lookups come from "
        f"different replay passes, so it can exceed 100%)" if all(HIT_RATE_PCT in x.metrics for x in kept.launches)
        else f"{HIT_RATE_PCT} not reported",
        f"{SECTORS} per launch (mean): {kept.total(SECTORS) / n:.0f} sectors" if all(
            SECTORS in x.metrics for x in kept.launches) else f"{SECTORS} not reported",
        f"bytes from the next level = {DRAM_READ} (DRAM reads)",
        "--cache-control all: ncu flushed all caches before every replay pass (cold L2)" if cache_control == "all"
        else "--cache-control none: caches kept across replay passes and launches (warm L2)",
    ]
    if found > n:
        notes.append(f"dropped the first {found - n} profiled launch(es) of the kernel (warm-up)")
    if n < iters:
        notes.append(f"WARNING: expected {iters} measured launches, found {n}")
    if result.other_kernels:
        notes.append(f"ignored launches of other kernels: {', '.join(result.other_kernels)}")
    grids = {launch.grid_blocks for launch in kept.launches}
    if len(grids) == 1 and (blocks := grids.pop()) is not None:
        notes.append(f"grid: {blocks} blocks (ncu's Grid Size counts blocks)")
        if expected_programs is not None and blocks != expected_programs:
            notes.append(f"WARNING: the kernel contract expects {expected_programs} programs but the launch has "
                         f"{blocks} blocks: the regex may match another kernel")
    notes += [f"ncu: {m}" for m in result.messages if m.startswith(("==WARNING==", "==ERROR=="))][:5]
    timing = summarize_times([ns / 1e6 for ns in kept.values(DURATION)],
                             "flushed" if cache_control == "all" else "warm", source=f"ncu {DURATION}")
    return BottleneckReport(source="ncu", hardware=hw.name, kernel=kernel_name, size=size,
                            metric="read" if split else "all", hit_pct=100.0 * hits / requests,
                            accesses=round(requests / n), hits=round(hits / n), granule_bytes=32,
                            bytes_from_next_level=round(kept.total(DRAM_READ) / n), timing=timing, notes=notes,
                            **extra)


def _hit_counts(kept: NcuResult) -> tuple[bool, dict[str, float], float, float, str]:
    """(read/write split recorded?, the totals used, requests, hits, the definition in words)."""
    def has(metric: str) -> bool:
        return all(metric in launch.metrics for launch in kept.launches)

    split = has(READ_HIT) and has(READ_MISS)  # recordings from before the read/write split have only the totals
    totals = {m: kept.total(m) for m in (READ_HIT, READ_MISS, SM_READ_SECTORS, L1_MISS) if has(m)}
    if split:
        requests, misses, definition = read_requests(totals)
    else:
        hits, misses = kept.total(LOOKUP_HIT), kept.total(LOOKUP_MISS)  # names a missing one
        requests, definition = hits + misses, (f"hit rate = {LOOKUP_HIT} / ({LOOKUP_HIT} + {LOOKUP_MISS}) (reads "
                                               f"and writes together: this recording has no read/write split)")
    if requests <= 0:
        raise ProfilerError("ncu counted no L2 lookups of the SMs' reads: the kernel read nothing through the L2")
    return split, totals, requests, requests - misses, definition


def _split_fields(kept: NcuResult, n: int) -> dict:
    """The report's overall, write, L1 and occupancy fields, from whichever metrics ncu gave."""
    def total(metric: str) -> float | None:
        return kept.total(metric) if all(metric in x.metrics for x in kept.launches) else None

    def pct(hit: float | None, miss: float | None) -> float | None:
        return None if hit is None or miss is None or hit + miss <= 0 else 100.0 * hit / (hit + miss)

    writes = [total(WRITE_HIT), total(WRITE_MISS)]
    limits = [m for m in (total(limit) for limit in OCCUPANCY_LIMITS) if m is not None]
    l1_hit, l1_miss = total(L1_HIT), total(L1_MISS)
    return dict(overall_hit_pct=pct(total(TEX_HIT), total(TEX_MISS)), write_hit_pct=pct(*writes),
                write_accesses=None if None in writes else round(sum(writes) / n), l1_hit_pct=pct(l1_hit, l1_miss),
                l1_accesses=None if l1_hit is None or l1_miss is None else round((l1_hit + l1_miss) / n),
                programs_per_cu=round(min(limits) / n) if limits else None)


class NcuProfiler:
    """Measure L2 hit rate on the local NVIDIA GPU with Nsight Compute."""

    name = "ncu"
    measures = True
    run_to_run_pts = RUN_TO_RUN_PTS["ncu"]

    def __init__(self, hw: HardwareSpec, binary: str = "ncu", cache_control: CacheControl = "all",
                 timeout: float = 900.0, *, warmup: int = 1, iters: int = 3, num_xcds: int | None = None,
                 raw_dir: Path | None = None):
        if cache_control not in ("all", "none"):
            raise ProfilerError(f"cache_control must be 'all' or 'none' (ncu --cache-control), got {cache_control!r}")
        path = find_tool(binary, install_dirs())
        if path is None:
            raise ProfilerError(
                f"{binary} not found (looked on PATH and in {', '.join(d for d in install_dirs() if d)}): install "
                f"NVIDIA Nsight Compute (it comes with the CUDA toolkit) and put the directory holding ncu on "
                f"PATH, or use the simulator profiler")
        self.hw, self.binary, self.cache_control, self.timeout = hw, path, cache_control, timeout
        self.warmup, self.iters = warmup, iters
        self.num_xcds = num_xcds if num_xcds is not None else hw.num_domains
        self.raw_dir = raw_dir

    def command(self, candidate: Path, size: str, kernel_regex: str) -> list[str]:
        cmd = ncu_arguments(self.binary, METRICS, kernel_regex, cache_control=self.cache_control, from_start=False)
        # ncu does the flushing (or deliberately not): the runner must not add its own.
        return cmd + runner_command(candidate, size, num_xcds=self.num_xcds, warmup=self.warmup, iters=self.iters,
                                    l2="warm", profiler_range=True)

    def profile(self, kernel: KernelFile, remap_source: str, size: str) -> BottleneckReport:
        regex = kernel_name_regex(launched_kernel_names(kernel))
        with tempfile.TemporaryDirectory(prefix="swizzleperf-ncu-") as tmp:
            candidate = write_candidate(kernel, remap_source, Path(tmp))
            cmd = self.command(candidate, size, regex)
            done = run_tool(cmd, timeout=self.timeout, what="ncu", env=child_env(), hints=_HINTS)
        if self.raw_dir is not None:
            self.raw_dir.mkdir(parents=True, exist_ok=True)
            (self.raw_dir / f"{kernel.name}-{size}-ncu.csv").write_text(done.stdout)
        output = done.stdout + "\n" + done.stderr  # ncu's ==PROF== messages may go to either stream
        result = parse_ncu_csv(output, regex)
        if not result.launches:
            errors = [m for m in result.messages if m.startswith("==ERROR==")]
            fix = f"\n  fix: {_PERMISSION_FIX}" if "ERR_NVGPUCTRPERM" in output else ""
            raise ProfilerError(f"ncu profiled no launch matching {regex!r} (other kernels: "
                                f"{', '.join(result.other_kernels) or 'none'})" + "".join(f"\n{e}" for e in errors)
                                + fix)
        return ncu_report(result, hw=self.hw, kernel_name=kernel.name, size=size, iters=self.iters,
                          cache_control=self.cache_control, expected_programs=expected_programs(kernel, size))
