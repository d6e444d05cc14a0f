"""Real-hardware profiler backends (ncu, rocprofv3), the runner and the timer.

Without a GPU: recorded outputs (tests/fixtures) parse to exact reports, command lines are
built exactly, and fake `ncu` / `rocprofv3` executables on PATH drive the full `profile()`
path. Expected numbers are worked out by hand from the fixture files, in the comments.
GPU tests are opt-in markers and skip with a reason.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import sys
import types
from pathlib import Path

import pytest
import yaml

from swizzleperf.errors import ProfilerError
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import HookSignature, KernelFile, load_kernel
from swizzleperf.profilers import ncu, rocprof, select, timer
from swizzleperf.profilers.bounded import BoundedProfiler
from swizzleperf.profilers.runner import (
    child_env,
    kernel_name_regex,
    launched_kernel_names,
    run_tool,
    runner_command,
    write_candidate,
)
from swizzleperf.profilers.timed import TimedProfiler
from swizzleperf.records.report import Timing

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NCU_H100 = FIXTURES / "ncu" / "ncu-2023.3-h100-softmax-medium.csv"
NCU_H200 = FIXTURES / "ncu" / "ncu-2025.1-h200-auto-units.csv"
NCU_2021 = FIXTURES / "ncu" / "ncu-2021.2-a100-unfiltered.csv"
ROCPROF = FIXTURES / "rocprofv3"
SOFTMAX_RE = "^(softmax_kernel)$"
SOFTMAX_ROCPROF_RE = r"^(softmax_kernel)(\.kd)?$"
FILL_ROCM = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >"
             "(int, at::native::FillFunctor<int>, std::array<char*, 1ul>)")
H100, H200, MI300X = PRESETS["h100"], PRESETS["h200"], PRESETS["mi300x"]


@pytest.fixture(scope="module")
def softmax() -> KernelFile:
    return load_kernel(REPO / "kernels" / "softmax.py")


def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory at the front of PATH for fake profiler executables."""
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
    return directory


# --- ncu: parsing recorded output ----------------------------------------------------------

def test_ncu_h100_fixture_parses_to_the_exact_report():
    result = ncu.parse_ncu_csv(NCU_H100.read_text(), SOFTMAX_RE)
    assert [launch.launch_id for launch in result.launches] == [0, 1, 2]
    assert result.launches[1].metrics[ncu.LOOKUP_HIT] == 19_923_391  # "19,923,391": separators removed
    assert [m for m in result.messages if m.startswith("==WARNING==")] == [result.messages[1]]

    report = ncu.ncu_report(result, hw=H100, kernel_name="softmax", size="medium", iters=3, cache_control="all",
                            expected_programs=16384)
    # hits 19,923,108 + 19,923,391 + 19,922,967 = 59,769,466; misses 5,243,492 + 5,243,201 + 5,243,615 = 15,730,308
    assert report.hit_pct == pytest.approx(100 * 59_769_466 / 75_499_774, rel=1e-12)
    assert report.metric == "all"  # a recording from before the read/write split: the totals, labelled so
    assert report.accesses == 25_166_591  # 75,499,774 / 3 = 25,166,591.3
    assert report.hits == 19_923_155  # 59,769,466 / 3 = 19,923,155.3
    assert report.bytes_from_next_level == 134_744_661  # (134,745,856 + 134,737,920 + 134,750,208) / 3
    assert (report.source, report.hardware, report.kernel, report.size) == ("ncu", "h100", "softmax", "medium")
    timing = report.timing
    assert (timing.median_ms, timing.repeats, timing.l2_state) == (0.118304, 3, "flushed")
    assert timing.p20_ms == pytest.approx(0.118112)  # 117,984 + 0.4 * (118,304 - 117,984) ns
    assert timing.p80_ms == pytest.approx(0.1184768)  # 118,304 + 0.6 * (118,592 - 118,304) ns
    notes = "\n".join(report.notes)
    assert "104.36" in notes and "can exceed 100%" in notes  # the >100% .pct value is reported, not used
    assert "--cache-control all" in notes and "32-byte sectors" in notes
    assert "grid: 16384 blocks" in notes and "WARNING: the kernel contract" not in notes


def test_ncu_auto_scaled_units_and_appended_rule_columns_are_read_by_name():
    result = ncu.parse_ncu_csv(NCU_H200.read_text(), SOFTMAX_RE)
    assert result.launches[0].metrics[ncu.DRAM_READ] == pytest.approx(538.21e6)  # "538.21" Mbyte, decimal prefix
    assert result.launches[0].metrics[ncu.DURATION] == pytest.approx(437_980)  # "437.98" usecond -> ns
    assert result.launches[0].grid_blocks == 65536 and result.launches[0].block_threads == 128
    report = ncu.ncu_report(result, hw=H200, kernel_name="softmax", size="large", iters=3, cache_control="all",
                            expected_programs=65536)
    # hits 148,902,317 + 148,903,022 + 148,901,876 = 446,707,215; misses 18,870,635 + 18,869,958 + 18,871,101
    assert report.hit_pct == pytest.approx(100 * 446_707_215 / (446_707_215 + 56_611_694), rel=1e-12)
    assert report.accesses == 167_772_970  # 503,318,909 / 3 = 167,772,969.7
    assert report.bytes_from_next_level == 538_213_333  # 1,614.64e6 / 3
    assert report.timing.median_ms == pytest.approx(0.43798)


def test_ncu_old_format_drops_warmup_and_other_kernels():
    """ncu 2021: "Kernel Time" column, no launch geometry; recorded without a kernel filter."""
    result = ncu.parse_ncu_csv(NCU_2021.read_text(), SOFTMAX_RE)
    assert [launch.launch_id for launch in result.launches] == [0, 2, 4, 6]
    assert len(result.other_kernels) == 1 and "FillFunctor" in result.other_kernels[0]
    report = ncu.ncu_report(result, hw=H100, kernel_name="softmax", size="small", iters=3, cache_control="all",
                            expected_programs=256)
    # launches 2, 4, 6: hits 155,652 + 155,649 + 155,655 = 466,956; misses 41,052 + 41,055 + 41,049 = 123,156
    assert report.hit_pct == pytest.approx(100 * 466_956 / 590_112, rel=1e-12)
    assert (report.accesses, report.hits) == (196_704, 155_652)
    assert report.bytes_from_next_level == 1_314_816  # 3,944,448 / 3
    assert report.timing.median_ms == pytest.approx(0.007968)
    notes = "\n".join(report.notes)
    assert "dropped the first 1 profiled launch" in notes and "FillFunctor" in notes
    assert "grid:" not in notes  # this release prints no Grid Size


def test_ncu_grid_that_disagrees_with_the_contract_is_flagged():
    result = ncu.parse_ncu_csv(NCU_H100.read_text(), SOFTMAX_RE)
    report = ncu.ncu_report(result, hw=H100, kernel_name="softmax", size="small", iters=3, cache_control="none",
                            expected_programs=256)
    notes = "\n".join(report.notes)
    assert "expects 256 programs but the launch has 16384 blocks" in notes
    assert report.timing.l2_state == "warm" and "--cache-control none" in notes


_NCU_HEADER = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'


def test_ncu_missing_value_names_the_metric():
    # a recording without the read/write split falls back to the totals, which must then be there
    rows = [f'"0","softmax_kernel","{m}","sector","{"n/a" if m == ncu.LOOKUP_MISS else "1,000"}"'
            for m in ncu.METRICS[:6]]
    text = "\n".join([_NCU_HEADER, *rows])
    result = ncu.parse_ncu_csv(text, SOFTMAX_RE)
    with pytest.raises(ProfilerError, match=r"no value for lts__t_sectors_lookup_miss\.sum in launch\(es\) \[0\]"):
        ncu.ncu_report(result, hw=H100, kernel_name="softmax", size="small", iters=3, cache_control="all")


def test_ncu_unknown_unit_is_refused():
    with pytest.raises(ProfilerError, match="unit 'furlong'"):
        ncu.parse_ncu_csv(_NCU_HEADER + '\n"0","softmax_kernel","dram__bytes_read.sum","furlong","3"', SOFTMAX_RE)


def test_ncu_raw_page_is_refused_with_the_reason():
    text = '"ID","Kernel Name","dram__bytes_read.sum"\n"0","softmax_kernel","3"'
    with pytest.raises(ProfilerError, match="no column.*Metric Name.*not --page raw"):
        ncu.parse_ncu_csv(text, SOFTMAX_RE)


@pytest.mark.parametrize("value, unit, base", [
    (1.5, "usecond", 1500.0), (2.0, "msecond", 2e6), (7.0, "ns", 7.0), (3.0, "Kbyte", 3e3), (2.5, "Gbyte", 2.5e9),
    (4.0, "Msector", 4e6), (12.0, "sector", 12.0), (99.5, "%", 99.5),
])
def test_ncu_units_convert_to_base(value, unit, base):
    assert ncu.to_base_unit(value, unit, "m") == pytest.approx(base)


# --- rocprofv3: parsing recorded output ----------------------------------------------------

# (fixture dir, hits summed over the last 3 dispatches, per-launch hits, median time in ms or None)
ROCPROF_RELEASES = [
    ("rocm-6.1-preview", 1_048_993 + 1_049_118 + 1_048_871, 1_048_994, None),
    ("rocm-6.2-unfiltered", 1_048_702 + 1_048_659 + 1_048_734, 1_048_698, 0.13912),
    ("rocm-6.4", 1_048_810 + 1_048_771 + 1_048_858, 1_048_813, 0.13888),
    ("rocm-7.0-per-xcd", 1_048_475 + 1_048_485 + 1_048_476, 1_048_479, 0.138496),
]


@pytest.mark.parametrize("release, hit_sum, hits, median_ms", ROCPROF_RELEASES)
def test_rocprof_releases_parse_to_the_exact_report(release, hit_sum, hits, median_ms):
    counters, num_xcc = rocprof.read_output_dir(ROCPROF / release, SOFTMAX_ROCPROF_RE)
    assert [d.dispatch_id for d in counters.dispatches] == [1, 3, 5, 7]  # 1 is the warm-up
    assert counters.dispatches[0].workgroups == 16384  # Grid_Size counts work-items: 4,194,304 / 256
    report = rocprof.counters_report(counters, hw=MI300X, kernel_name="softmax", size="medium", iters=3,
                                     l2_state="flushed", expected_programs=16384, num_xcc=num_xcc)
    # every dispatch makes 6,291,456 TCC requests, so 3 dispatches make 18,874,368
    assert report.hit_pct == pytest.approx(100 * hit_sum / 18_874_368, rel=1e-12)
    assert (report.accesses, report.hits) == (6_291_456, hits)
    assert (report.source, report.hardware) == ("rocprofv3", "mi300x")
    assert report.metric == "all" and report.metric_name == "L2 hit (reads and writes)"  # TCC_HIT counts both
    if median_ms is None:
        assert report.timing is None and any("no dispatch timestamps" in n for n in report.notes)
    else:
        assert (report.timing.median_ms, report.timing.repeats) == (pytest.approx(median_ms), 3)
    notes = "\n".join(report.notes)
    assert "dropped the first 1 dispatch" in notes and "grid: 16384 workgroups (4194304 work-items / 256)" in notes


def test_rocprof_other_kernels_in_the_file_are_filtered_out():
    counters = rocprof.parse_counter_csv(
        ROCPROF / "rocm-6.2-unfiltered" / "pass_1" / "swizzleperf_counter_collection.csv", SOFTMAX_ROCPROF_RE)
    assert counters.other_kernels == (FILL_ROCM,)
    assert {d.kernel_name for d in counters.dispatches} == {"softmax_kernel"}
    # without the filter the fill dispatches 2, 4, 6 would add ~2,097,152 misses each
    assert counters.last(3).misses == 5_242_754 + 5_242_797 + 5_242_722


def test_rocprof_per_xcd_counters_and_agent_info():
    counters, num_xcc = rocprof.read_output_dir(ROCPROF / "rocm-7.0-per-xcd", SOFTMAX_ROCPROF_RE)
    assert num_xcc == [8, 8]  # two GPU agents; the CPU agents are skipped
    report = rocprof.counters_report(counters, hw=MI300X, kernel_name="softmax", size="medium", iters=3,
                                     l2_state="flushed", expected_programs=16384, num_xcc=num_xcc, per_xcd=8)
    # per XCD: hits of dispatches 3, 5, 7 summed (e.g. XCD 0: 131,208 + 131,190 + 131,221 = 393,619) / 3;
    # every XCD serves 786,432 requests per launch
    assert [(d.domain, d.accesses, d.hits) for d in report.per_domain] == [
        (0, 786_432, 131_206), (1, 786_432, 130_981), (2, 786_432, 131_101), (3, 786_432, 131_046),
        (4, 786_432, 130_888), (5, 786_432, 131_160), (6, 786_432, 131_012), (7, 786_432, 131_083)]
    notes = "\n".join(report.notes)
    assert "Num_Xcc=8" in notes and "WARNING" not in notes  # per-XCD requests add up to the totals


def test_rocprof_xcd_count_that_disagrees_with_the_spec_is_flagged():
    counters, _ = rocprof.read_output_dir(ROCPROF / "rocm-6.4", SOFTMAX_ROCPROF_RE)
    report = rocprof.counters_report(counters, hw=MI300X, kernel_name="softmax", size="medium", iters=3,
                                     l2_state="flushed", num_xcc=[4])
    assert any("has 8 L2 domains but the GPU reports 4 XCDs" in n for n in report.notes)


def test_rocprof_per_xcd_request_without_the_counters_is_an_error():
    counters, _ = rocprof.read_output_dir(ROCPROF / "rocm-6.4", SOFTMAX_ROCPROF_RE)
    with pytest.raises(ProfilerError, match="SWZ_TCC_HIT_XCC0, SWZ_TCC_MISS_XCC0.*are missing"):
        rocprof.counters_report(counters, hw=MI300X, kernel_name="softmax", size="medium", iters=3,
                                l2_state="flushed", per_xcd=8)


def test_rocprof_text_and_path_parse_alike_and_duplicate_rows_add_up():
    path = ROCPROF / "rocm-6.4" / "swizzleperf_counter_collection.csv"
    assert rocprof.parse_counter_csv(path, SOFTMAX_ROCPROF_RE) == rocprof.parse_counter_csv(
        path.read_text(), SOFTMAX_ROCPROF_RE)
    text = ('"Dispatch_Id","Kernel_Name","Counter_Name","Counter_Value"\n'
            '4,"softmax_kernel.kd","TCC_HIT_sum",10\n4,"softmax_kernel.kd","TCC_HIT_sum",5\n'
            '4,"softmax_kernel.kd","TCC_MISS_sum",1.50000000e+01\n')
    counters = rocprof.parse_counter_csv(text, SOFTMAX_ROCPROF_RE)
    assert (counters.hits, counters.misses, counters.hit_pct) == (15.0, 15.0, 50.0)
    assert counters.durations_ns() is None


def test_rocprof_csv_without_the_counter_columns_is_refused():
    with pytest.raises(ProfilerError, match="no column.*Counter_Name, Counter_Value"):
        rocprof.parse_counter_csv('"Dispatch_Id","Kernel_Name"\n1,"softmax_kernel"\n', SOFTMAX_ROCPROF_RE)


def test_rocprof_output_dir_problems_name_what_was_found(tmp_path: Path):
    with pytest.raises(ProfilerError, match="no \\*_counter_collection.csv.*found: nothing"):
        rocprof.read_output_dir(tmp_path, SOFTMAX_ROCPROF_RE)
    shutil.copytree(ROCPROF / "rocm-6.2-unfiltered", tmp_path, dirs_exist_ok=True)
    with pytest.raises(ProfilerError, match="no dispatch .* matches '\\^\\(gemm_kernel\\)\\$'.*FillFunctor"):
        rocprof.read_output_dir(tmp_path, "^(gemm_kernel)$")
    shutil.copytree(ROCPROF / "rocm-6.4", tmp_path / "pass_2")
    with pytest.raises(ProfilerError, match="split over several counter files"):
        rocprof.read_output_dir(tmp_path, SOFTMAX_ROCPROF_RE)


def test_extra_counter_definitions_select_each_xcd():
    definitions = yaml.safe_load(rocprof.extra_counters_yaml(8))["rocprofiler-sdk"]
    assert definitions["counters-schema-version"] == 1
    counters = definitions["counters"]
    assert [c["name"] for c in counters[:4]] == ["SWZ_TCC_HIT_XCC0", "SWZ_TCC_MISS_XCC0", "SWZ_TCC_HIT_XCC1",
                                                 "SWZ_TCC_MISS_XCC1"]
    assert len(counters) == 16
    assert counters[7]["definitions"] == [{"architectures": ["gfx940", "gfx941", "gfx942", "gfx950"],
                                           "expression": "select(TCC_MISS,[DIMENSION_XCC=[3]])"}]


# --- command lines -----------------------------------------------------------------------

def test_runner_command_is_exact():
    assert runner_command(Path("/w/softmax.py"), "medium", num_xcds=8, warmup=1, iters=3, l2="flushed") == [
        sys.executable, "-m", "swizzleperf.profilers.runner", "/w/softmax.py", "medium",
        "--num-xcds", "8", "--warmup", "1", "--iters", "3", "--l2", "flushed"]
    assert runner_command(Path("/w/k.py"), "s", num_xcds=None, warmup=0, iters=5, l2="warm", profiler_range=True,
                          times_json=Path("/w/t.json"))[3:] == [
        "/w/k.py", "s", "--warmup", "0", "--iters", "5", "--l2", "warm", "--profiler-range",
        "--times-json", "/w/t.json"]


def test_ncu_command_is_exact(fake_bin: Path):
    binary = _executable(fake_bin / "ncu", "#!/bin/sh\nexit 0\n")
    profiler = ncu.NcuProfiler(H100)
    assert profiler.binary == str(binary)
    assert profiler.command(Path("/w/softmax.py"), "medium", SOFTMAX_RE) == [
        str(binary), "--csv", "--print-units", "base", "--metrics",
        "lts__t_sector_hit_rate.pct,lts__t_sectors.sum,lts__t_sectors_lookup_hit.sum,lts__t_sectors_lookup_miss.sum,"
        "gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,"
        "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,lts__t_sectors_srcunit_tex_op_write_lookup_hit.sum,"
        "lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum,lts__t_sectors_srcunit_tex_lookup_hit.sum,"
        "lts__t_sectors_srcunit_tex_lookup_miss.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,"
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss.sum,l1tex__m_xbar2l1tex_read_sectors_mem_lg_op_ld.sum,"
        "launch__occupancy_limit_blocks,"
        "launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__occupancy_limit_warps",
        "--cache-control", "all", "--profile-from-start", "off", "--kernel-name", "regex:^(softmax_kernel)$",
        sys.executable, "-m", "swizzleperf.profilers.runner", "/w/softmax.py", "medium", "--num-xcds", "1",
        "--warmup", "1", "--iters", "3", "--l2", "warm", "--profiler-range"]


def test_rocprof_command_is_exact(fake_bin: Path):
    binary = _executable(fake_bin / "rocprofv3", "#!/bin/sh\nexit 0\n")
    profiler = rocprof.RocprofV3Profiler(MI300X)
    runner = [sys.executable, "-m", "swizzleperf.profilers.runner", "/w/softmax.py", "medium", "--num-xcds", "8",
              "--warmup", "1", "--iters", "3", "--l2", "flushed"]
    assert profiler.command(Path("/w/softmax.py"), "medium", SOFTMAX_ROCPROF_RE, Path("/w/out")) == [
        str(binary), "--pmc", "TCC_HIT_sum", "TCC_MISS_sum", "--kernel-include-regex", SOFTMAX_ROCPROF_RE,
        "--output-format", "csv", "-d", "/w/out", "-o", "swizzleperf", "--", *runner]
    with_xcds = profiler.command(Path("/w/softmax.py"), "medium", SOFTMAX_ROCPROF_RE, Path("/w/out"),
                                 extra_counters=Path("/w/c.yaml"))
    assert with_xcds[:3] == [str(binary), "-E", "/w/c.yaml"]
    pmc = with_xcds[with_xcds.index("--pmc") + 1:with_xcds.index("--kernel-include-regex")]
    assert pmc == ["TCC_HIT_sum", "TCC_MISS_sum", *(f"SWZ_TCC_{k}_XCC{x}" for x in range(8) for k in ("HIT", "MISS"))]


def _kernel_file(tmp_path: Path, source: str) -> KernelFile:
    """A KernelFile for the AST-only helpers (no import needed)."""
    return KernelFile(path=tmp_path / "k.py", source=source, module=types.ModuleType("k"),
                      hook=HookSignature("swizzle", "pid", ("n",), ("NUM_XCDS",)), hook_lines=(1, 3), sizes={"s": {}},
                      default_size="s", check_sizes=(), tolerance={"atol": 0.0, "rtol": 0.0})


def test_launched_kernel_names_follow_helpers_and_skip_unrelated_kernels(tmp_path: Path, softmax: KernelFile):
    assert launched_kernel_names(softmax) == ("softmax_kernel",)
    source = '''
@triton.jit
def swizzle(pid, n, NUM_XCDS: tl.constexpr):
    return pid

@triton.jit
def tile_id(n, NUM_XCDS: tl.constexpr):
    return swizzle(tl.program_id(0), n, NUM_XCDS)

@triton.autotune(configs=[], key=["M"])
@triton.jit
def matmul_kernel(a_ptr, M, NUM_XCDS: tl.constexpr):
    pid = tile_id(M, NUM_XCDS)

@triton.jit
def reduce_kernel(x_ptr):
    pass

@triton.jit
def split_k_kernel(a_ptr, M, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), M, NUM_XCDS)
'''
    assert launched_kernel_names(_kernel_file(tmp_path, source)) == ("matmul_kernel", "split_k_kernel")
    regex = kernel_name_regex(["matmul_kernel", "split_k_kernel"], r"(\.kd)?")
    assert regex == r"^(matmul_kernel|split_k_kernel)(\.kd)?$"
    with pytest.raises(ProfilerError, match="no @triton.jit kernel calls the remap hook swizzle"):
        launched_kernel_names(_kernel_file(tmp_path, "@triton.jit\ndef swizzle(pid, n):\n    return pid\n"))


def test_candidate_file_carries_the_new_hook(tmp_path: Path, softmax: KernelFile):
    hook = ("@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n"
            "    return (pid % NUM_XCDS) * (num_pids // NUM_XCDS) + pid // NUM_XCDS\n")
    path = write_candidate(softmax, hook, tmp_path)
    assert path.name == "softmax.py"
    assert hook in path.read_text() and "    return pid\n" not in path.read_text()
    assert child_env()["TRITON_INTERPRET"] == "0"  # a measuring child never runs the CPU interpreter


# --- the full profile() path with fake profilers ---------------------------------------------

def _recording_tool(path: Path, body: str) -> Path:
    """A fake tool that records its argv (one per line) beside itself, then runs `body`."""
    return _executable(path, f'#!/bin/sh\nprintf "%s\\n" "$@" > "{path}.argv"\n{body}\n')


def test_ncu_profile_end_to_end_with_a_fake_ncu(fake_bin: Path, softmax: KernelFile, tmp_path: Path):
    binary = _recording_tool(fake_bin / "ncu", f'cat "{NCU_H100}"')
    profiler = ncu.NcuProfiler(H100, raw_dir=tmp_path / "raw")
    report = profiler.profile(softmax, softmax.hook_source, "medium")
    assert report.hit_pct == pytest.approx(100 * 59_769_466 / 75_499_774, rel=1e-12)
    assert (report.accesses, report.kernel, report.timing.median_ms) == (25_166_591, "softmax", 0.118304)
    argv = Path(f"{binary}.argv").read_text().splitlines()
    assert argv[argv.index("--kernel-name") + 1] == "regex:^(softmax_kernel)$"
    candidate = Path(argv[argv.index("swizzleperf.profilers.runner") + 1])
    assert candidate.name == "softmax.py" and not candidate.exists()  # written to a private dir, then removed
    assert (tmp_path / "raw" / "softmax-medium-ncu.csv").read_text() == NCU_H100.read_text()


def test_a_probe_runs_its_program_under_ncu_from_the_start(fake_bin: Path, monkeypatch: pytest.MonkeyPatch):
    """profile_program (benchmarks/probe_*.py): the program's argv after ncu's own flags, no profiler range,
    the launches of the named kernel; an error naming the regex when ncu profiled none, and when ncu is missing."""
    binary = _recording_tool(fake_bin / "ncu", f'cat "{NCU_H100}"')
    result = ncu.profile_program(["python", "probe.py", "--child", "meta.json"], ["a.sum", "b.sum"], SOFTMAX_RE)
    assert [launch.launch_id for launch in result.launches] == [0, 1, 2]
    assert Path(f"{binary}.argv").read_text().splitlines() == [
        "--csv", "--print-units", "base", "--metrics", "a.sum,b.sum", "--cache-control", "all", "--kernel-name",
        f"regex:{SOFTMAX_RE}", "python", "probe.py", "--child", "meta.json"]
    with pytest.raises(ProfilerError, match=r"profiled no launch matching '\^probed_kernel\$'"):
        ncu.profile_program(["python", "probe.py"], ["a.sum"], "^probed_kernel$")
    monkeypatch.setenv("PATH", str(fake_bin / "empty"))
    monkeypatch.setattr(ncu, "install_dirs", lambda: (None,))
    with pytest.raises(ProfilerError, match="ncu not found"):
        ncu.profile_program(["python", "probe.py"], ["a.sum"], SOFTMAX_RE)


def test_a_crashing_ncu_names_the_command_and_its_stderr(fake_bin: Path, softmax: KernelFile):
    binary = _recording_tool(fake_bin / "ncu", 'echo "==PROF== Connected to process 1"\n'
                                               'echo "RuntimeError: Triton Error [CUDA]: out of memory" >&2\nexit 9')
    with pytest.raises(ProfilerError) as caught:
        ncu.NcuProfiler(H100).profile(softmax, softmax.hook_source, "medium")
    argv = Path(f"{binary}.argv").read_text().splitlines()
    message = str(caught.value)
    assert f"command: {shlex.join([str(binary), *argv])}" in message
    assert "exited with 9" in message and "out of memory" in message


def test_ncu_permission_error_gets_the_fix(fake_bin: Path, softmax: KernelFile):
    _recording_tool(fake_bin / "ncu", 'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to '
                                      'access NVIDIA GPU Performance Counters on the target device 0."')
    with pytest.raises(ProfilerError, match="(?s)profiled no launch.*ERR_NVGPUCTRPERM.*NVreg_RestrictProfiling"):
        ncu.NcuProfiler(H100).profile(softmax, softmax.hook_source, "medium")


def _fake_rocprofv3(fake_bin: Path, release: str, body_exit: str = "exit 0") -> Path:
    # Writes the recorded files where a release would: OUTDIR/<its layout>/NAME_*.csv
    return _recording_tool(fake_bin / "rocprofv3", f'''
out=""; name=""
while [ $# -gt 0 ]; do
  case "$1" in
    -d) out="$2"; shift 2;;
    -o) name="$2"; shift 2;;
    --) break;;
    *) shift;;
  esac
done
mkdir -p "$out"
cp -R "{ROCPROF / release}/." "$out/"
for f in $(find "$out" -name 'swizzleperf_*.csv'); do
  mv "$f" "$(dirname "$f")/${{name}}_$(basename "$f" | sed 's/^swizzleperf_//')"
done
{body_exit}''')


def test_rocprof_profile_end_to_end_with_a_fake_rocprofv3(fake_bin: Path, softmax: KernelFile):
    binary = _fake_rocprofv3(fake_bin, "rocm-7.0-per-xcd")
    report = rocprof.RocprofV3Profiler(MI300X, per_xcd=True).profile(softmax, softmax.hook_source, "medium")
    assert report.hit_pct == pytest.approx(100 * 3_145_436 / 18_874_368, rel=1e-12)
    assert (report.accesses, report.hits, report.timing.median_ms) == (6_291_456, 1_048_479, 0.138496)
    assert [d.hits for d in report.per_domain] == [131_206, 130_981, 131_101, 131_046, 130_888, 131_160, 131_012,
                                                   131_083]
    argv = Path(f"{binary}.argv").read_text().splitlines()
    assert argv[0] == "-E" and argv[argv.index("--kernel-include-regex") + 1] == SOFTMAX_ROCPROF_RE
    assert "SWZ_TCC_MISS_XCC7" in argv and argv[argv.index("--l2") + 1] == "flushed"


def test_rocprof_profile_finds_files_in_an_older_layout(fake_bin: Path, softmax: KernelFile):
    _fake_rocprofv3(fake_bin, "rocm-6.2-unfiltered")  # files under pass_1/
    report = rocprof.RocprofV3Profiler(MI300X).profile(softmax, softmax.hook_source, "medium")
    assert (report.hits, report.timing.median_ms) == (1_048_698, 0.13912)


def test_a_crashing_rocprofv3_names_the_command_and_its_stderr(fake_bin: Path, softmax: KernelFile):
    binary = _fake_rocprofv3(fake_bin, "rocm-6.4", 'echo "rocprofv3: error: unrecognized arguments: -E" >&2; exit 2')
    with pytest.raises(ProfilerError) as caught:
        rocprof.RocprofV3Profiler(MI300X, per_xcd=True).profile(softmax, softmax.hook_source, "medium")
    argv = Path(f"{binary}.argv").read_text().splitlines()
    message = str(caught.value)
    assert f"command: {shlex.join([str(binary), *argv])}" in message and "exited with 2" in message
    assert "fix: per-XCD counters need a rocprofv3 with -E/--extra-counters" in message


def test_a_hanging_tool_is_killed_at_its_time_limit(tmp_path: Path):
    tool = _executable(tmp_path / "hang", "#!/bin/sh\nsleep 30\n")
    with pytest.raises(ProfilerError, match=f"(?s)ran past its time limit of 0.5 s.*command: {tool}"):
        run_tool([str(tool)], timeout=0.5, what="hang")


@pytest.mark.parametrize("cls, binary", [(ncu.NcuProfiler, "ncu"), (rocprof.RocprofV3Profiler, "rocprofv3")])
def test_a_missing_binary_says_how_to_install_it(cls, binary, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    for var in ("CUDA_HOME", "CUDA_PATH", "ROCM_PATH"):
        monkeypatch.delenv(var, raising=False)
    if any(os.path.exists(os.path.join(d, binary)) for d in ("/usr/local/cuda/bin", "/opt/rocm/bin")):
        pytest.skip(f"{binary} is installed on this machine")
    with pytest.raises(ProfilerError, match=f"{binary} not found \\(looked on PATH.*install.*put .* on PATH"):
        cls(H100 if binary == "ncu" else MI300X)


# --- timer ---------------------------------------------------------------------------------

def test_summarize_times_uses_linear_percentiles():
    timing = timer.summarize_times([float(x) for x in range(10, 0, -1)], "warm")
    assert (timing.median_ms, timing.p20_ms, timing.p80_ms) == (5.5, pytest.approx(2.8), pytest.approx(8.2))
    assert (timing.repeats, timing.l2_state, timing.source) == (10, "warm", "do_bench")
    with pytest.raises(ProfilerError, match="no time samples"):
        timer.summarize_times([], "flushed")


def test_speedup_spread_comes_from_the_percentiles():
    base = Timing(median_ms=2.0, p20_ms=1.9, p80_ms=2.2, repeats=100, l2_state="flushed")
    cand = Timing(median_ms=1.0, p20_ms=0.95, p80_ms=1.1, repeats=100, l2_state="flushed")
    assert timer.speedup(base, cand) == (2.0, pytest.approx(1.9 / 1.1), pytest.approx(2.2 / 0.95))
    with pytest.raises(ProfilerError, match="cannot compare a flushed-L2 timing with a warm-L2 one"):
        timer.speedup(base, cand.model_copy(update={"l2_state": "warm"}))


def test_time_kernel_reads_the_childs_samples(tmp_path: Path, softmax: KernelFile, monkeypatch: pytest.MonkeyPatch):
    # A stand-in child: answers like the runner (RunnerTimes JSON), from the runner's own arguments.
    child = _executable(tmp_path / "child", f'''#!{sys.executable}
import json, sys
args = sys.argv[1:]
def arg(flag):
    return args[args.index(flag) + 1]
iters, out, l2 = int(arg("--iters")), arg("--times-json"), arg("--l2")
json.dump({{"times_ms": [float(i) for i in range(1, iters + 1)], "l2_state": l2, "warmup": 2,
           "num_xcds": int(arg("--num-xcds")), "device": "fake"}}, open(out, "w"))
''')
    real = timer.runner_command
    monkeypatch.setattr(timer, "runner_command", lambda *a, **k: [str(child), *real(*a, **k)[3:]])
    timing = timer.time_kernel(softmax, softmax.hook_source, "small", repeats=5, l2="warm", warmup=2, num_xcds=8)
    assert (timing.median_ms, timing.p20_ms, timing.p80_ms, timing.repeats, timing.l2_state) == (
        3.0, pytest.approx(1.8), pytest.approx(4.2), 5, "warm")


def _gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def test_runner_without_a_gpu_fails_with_the_reason(softmax: KernelFile):
    if _gpu():
        pytest.skip("a GPU is present: this checks the no-GPU failure")
    with pytest.raises(ProfilerError, match="(?s)exited with 3.*swizzleperf.profilers.runner.*torch sees no CUDA"):
        timer.time_kernel(softmax, softmax.hook_source, "tiny", repeats=2, timeout=120)


# --- selection -----------------------------------------------------------------------------

@pytest.fixture
def fake_sim(monkeypatch: pytest.MonkeyPatch) -> type:
    """Stands in for swizzleperf.profilers.sim (another backend), to test the lazy import by name."""
    module = types.ModuleType("swizzleperf.profilers.sim")

    class SimProfiler:
        name = "sim"

        def __init__(self, hw, **options):
            self.hw, self.options = hw, options

    module.SimProfiler = SimProfiler
    monkeypatch.setitem(sys.modules, "swizzleperf.profilers.sim", module)
    return SimProfiler


def test_select_sim_and_auto_without_gpu(fake_sim: type, monkeypatch: pytest.MonkeyPatch):
    profiler, reason = select.select_profiler("sim", MI300X, cache_dir=Path("/c"))
    assert isinstance(profiler, fake_sim) and profiler.hw is MI300X and reason == "requested: simulator"
    assert profiler.options == {"cache_dir": Path("/c")}  # simulator options reach the simulator
    monkeypatch.setattr(select, "local_gpu_runtime", lambda: None)
    profiler, reason = select.select_profiler("auto", MI300X, progress=print)
    assert isinstance(profiler, fake_sim) and reason == "auto: no GPU here (torch sees none), so the simulator predicts"
    assert profiler.options == {"progress": print}


@pytest.mark.parametrize("runtime, hw, tool, cls, label", [
    ("cuda", H100, "ncu", ncu.NcuProfiler, "CUDA GPU"),
    ("rocm", MI300X, "rocprofv3", rocprof.RocprofV3Profiler, "ROCm GPU")])
def test_select_auto_uses_the_vendor_profiler_when_found(runtime, hw, tool, cls, label, fake_bin: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    binary = _executable(fake_bin / tool, "#!/bin/sh\nexit 0\n")
    monkeypatch.setattr(select, "local_gpu_runtime", lambda: runtime)
    profiler, reason = select.select_profiler("auto", hw, progress=print)  # progress is for the simulator only
    # with a GPU here, counters come with do_bench timing of the same kernel, and bounds from a capture of it
    assert isinstance(profiler, BoundedProfiler) and isinstance(profiler.inner, TimedProfiler)
    assert isinstance(profiler.inner.inner, cls)
    assert profiler.name == tool and reason == f"auto: a {label} and {tool} at {binary}, so {tool} measures"


def test_select_auto_does_not_measure_another_vendors_gpu(fake_sim: type, fake_bin: Path,
                                                          monkeypatch: pytest.MonkeyPatch):
    _executable(fake_bin / "ncu", "#!/bin/sh\nexit 0\n")
    monkeypatch.setattr(select, "local_gpu_runtime", lambda: "cuda")
    profiler, reason = select.select_profiler("auto", MI300X)
    assert isinstance(profiler, fake_sim) and reason == "auto: a CUDA GPU here, but the target mi300x is amd, so the simulator predicts"


def test_select_auto_falls_back_to_sim_when_the_tool_is_missing(fake_sim: type, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if os.path.exists("/usr/local/cuda/bin/ncu"):
        pytest.skip("ncu is installed on this machine")
    monkeypatch.setattr(select, "local_gpu_runtime", lambda: "cuda")
    profiler, reason = select.select_profiler("auto", H100)
    assert isinstance(profiler, fake_sim)
    assert reason == "auto: a CUDA GPU but no ncu on PATH or in /usr/local/cuda/bin, so the simulator predicts"


def test_select_explicit_profilers(fake_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    binary = _executable(fake_bin / "rocprofv3", "#!/bin/sh\nexit 0\n")
    profiler, reason = select.select_profiler("rocprofv3", MI300X)
    assert isinstance(profiler, BoundedProfiler) and isinstance(profiler.inner, rocprof.RocprofV3Profiler)
    assert reason == f"requested: rocprofv3 at {binary}"
    with pytest.raises(ProfilerError, match="unknown profiler 'nsys': choose one of sim, ncu, rocprofv3, auto"):
        select.select_profiler("nsys", MI300X)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    if not os.path.exists("/usr/local/cuda/bin/ncu"):
        with pytest.raises(ProfilerError, match="ncu not found"):
            select.select_profiler("ncu", H100)


# --- opt-in: real GPU, ncu, rocprofv3 --------------------------------------------------------

@pytest.mark.gpu
def test_time_kernel_on_the_gpu(softmax: KernelFile):
    if not _gpu():
        pytest.skip("torch sees no GPU")
    timing = timer.time_kernel(softmax, softmax.hook_source, "small", repeats=20)
    assert timing.repeats == 20 and timing.l2_state == "flushed"
    assert 0 < timing.p20_ms <= timing.median_ms <= timing.p80_ms


@pytest.mark.gpu
@pytest.mark.ncu
def test_ncu_profile_on_the_gpu(softmax: KernelFile):
    from swizzleperf.hardware.detect import detect

    if not _gpu() or shutil.which("ncu") is None:
        pytest.skip("needs a CUDA GPU and ncu on PATH")
    report = ncu.NcuProfiler(detect()).profile(softmax, softmax.hook_source, "small")
    assert 0 <= report.hit_pct <= 100 and report.accesses > 0 and report.timing.repeats == 3
    assert "grid: 256 blocks (ncu's Grid Size counts blocks)" in report.notes


@pytest.mark.gpu
@pytest.mark.rocprof
def test_rocprof_profile_on_the_gpu(softmax: KernelFile):
    from swizzleperf.hardware.detect import detect

    if not _gpu() or shutil.which("rocprofv3") is None:
        pytest.skip("needs a ROCm GPU and rocprofv3 on PATH")
    spec = detect()
    report = rocprof.RocprofV3Profiler(spec, per_xcd=spec.num_domains > 1).profile(softmax, softmax.hook_source,
                                                                                   "small")
    assert 0 <= report.hit_pct <= 100 and report.accesses > 0
    assert sum(d.accesses for d in report.per_domain) in (0, report.accesses)
    assert json.loads(report.model_dump_json())["source"] == "rocprofv3"


@pytest.mark.parametrize("kernel, regex, hits, misses, dram, times_ns, grid", [
    # Recorded on an NVIDIA H200 (ncu 2025.3.1, driver 580.159.04) by benchmarks/gpu_validate.sh.
    # Three launches each; the expected numbers are the CSV's values summed by hand.
    ("softmax", "^(softmax_kernel)$", (19769492, 19765187, 19784214), (7917946, 7928966, 7914167),
     (134278656, 134296320, 134279680), (210208, 207424, 206752), 16384),
    ("gemm", "^(matmul_kernel)$", (45994091, 46068471, 46100936), (29538101, 29485391, 29561310),
     (533525504, 533539072, 533534976), (399424, 395808, 395232), 864),
])
def test_recorded_h200_output_parses_to_the_exact_report(kernel, regex, hits, misses, dram, times_ns, grid):
    text = (FIXTURES / "ncu" / f"ncu-2025.3-h200-{kernel}-medium-recorded.csv").read_text()
    report = ncu.ncu_report(ncu.parse_ncu_csv(text, regex), hw=PRESETS["h200"], kernel_name=kernel, size="medium",
                            iters=3, cache_control="all", expected_programs=grid)
    assert report.source == "ncu" and not report.simulated and report.ceiling_pct is None
    assert report.hits == round(sum(hits) / 3) and report.accesses == round((sum(hits) + sum(misses)) / 3)
    assert report.hit_pct == pytest.approx(100 * sum(hits) / (sum(hits) + sum(misses)), abs=1e-9)
    assert report.bytes_from_next_level == round(sum(dram) / 3)
    assert report.timing.median_ms == pytest.approx(sorted(times_ns)[1] / 1e6)
    assert any("--cache-control all" in note for note in report.notes)
