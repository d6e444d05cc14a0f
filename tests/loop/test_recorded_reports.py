"""report.md rebuilt from runs recorded on 2026-11-28 (tests/fixtures/runs/README.md says how each was made): what a
user reads in each is the decision the run supports."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from swizzleperf.loop import artifacts
from swizzleperf.loop.rundir import RunDir

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


def report_of(name: str, tmp_path: Path) -> str:
    """The recorded run's report.md, written again from its run.json and attempts.jsonl."""
    copy = shutil.copytree(RUNS / name, tmp_path / name)
    run = RunDir.open(copy)
    artifacts.write_report(run, run.load_history(), [])
    return (copy / "report.md").read_text()


def test_a_measured_run_shows_each_attempts_kernel_time(tmp_path):
    """gemm on an H200 under ncu: three remaps, each timed with do_bench beside its counters."""
    report = report_of("ncu-h200-gemm", tmp_path)
    assert "| # | origin | family | L2 read hit % | median ms | p20-p80 ms | speedup | seconds | verdict |" in report
    assert "| 2 | search | `xcd_chunked_grouped(chunk=4, group_m=8, dies=2)` | 88.95 | 0.3023 |" in report
    assert "| 1.055x |" in report.split("| 2 | search |")[1].split("\n")[0]
    assert ("**Best: `xcd_chunked_grouped(chunk=4, group_m=8, dies=2)` (iteration 2) — L2 read misses 21,238,271 -> "
            "7,818,703 (0.37x the kernel's own order), measured (ncu); L2 read hit rate 69.99% -> 88.95%") in report
    assert "Time (do_bench median, L2 flushed): 0.3189 ms -> 0.3023 ms, speedup 1.055x" in report


def test_a_measured_run_without_a_gain_beyond_noise_keeps_the_kernels_own_order(tmp_path):
    """softmax on an H200: every remap within noise of the kernel's own time and no fewer misses."""
    report = report_of("ncu-h200-softmax", tmp_path)
    assert "**Best: `identity (original hook)` (iteration 0)" in report
    assert report.count("(within noise)") == 3  # every other attempt's speedup
    assert "read-hit ceiling n/a (counters do not count unique lines, and the launch was not captured" in report


def test_fewer_misses_at_a_lower_hit_rate_is_headlined_as_the_gain_it_is(tmp_path):
    """spmv on mi300x: the best remap halves the read misses while its read hit rate dips 0.2 points."""
    report = report_of("mi300x-spmv", tmp_path)
    assert ("**Best: `xcd_contiguous` (iteration 2) — L2 read misses 1,326,991 -> 704,470 (0.53x the kernel's own "
            "order), predicted (simulator); L2 read hit rate 59.02% -> 58.82% (-0.21 points;") in report


def test_reads_the_l1_absorbs_are_not_headroom(tmp_path):
    """An RMSNorm launch on h100: every row's weights come from the L1, so the read hit rate sits far below the
    read-hit ceiling while the L2 fetches only the compulsory misses; two remaps tie the kernel's own order
    exactly, and the own order stays the best."""
    report = report_of("h100-rmsnorm", tmp_path)
    assert ("**Best: `identity (original hook)` (iteration 0) — L2 read misses 1,049,368 -> 1,049,368 (1.00x the "
            "kernel's own order), predicted (simulator); L2 read hit rate 5.98% -> 5.98% (+0.00 points; no headroom: "
            "it fetches only the compulsory misses (the rest of the gap to the read-hit ceiling is reads the L1 "
            "absorbs)); read-hit ceiling 49.98%.**") in report
    assert "points below the read-hit ceiling" not in report


@pytest.mark.parametrize("name", ["mi300x-gemm"])
def test_what_is_left_above_the_achievable_bound_is_capacity_not_assignment(tmp_path, name):
    """gemm on mi300x: the best remap fetches 2.12x the compulsory misses, but with caches big enough for every
    first touch its dies would fetch exactly what the partitioner's assignment does: no remap can win the rest."""
    report = report_of(name, tmp_path)
    assert ("L2 read hit rate 68.16% -> 85.77% (+17.61 points; it fetches 2.12x the compulsory misses, the excess all "
            "capacity (refetches after evictions), which no remap's assignment removes); read-hit ceiling 93.29%.**") \
        in report
    assert "the L2 fetched 2,518,166 vs 1,187,840 compulsory (2.12x)" in report
    assert ("Its assignment is as good as that one (its dies first-touch 1,802,240, that assignment fetches "
            "1,802,240): the 715,926 fetches above are capacity, lines fetched again after an eviction, which no "
            "other remap's assignment removes.") in report
