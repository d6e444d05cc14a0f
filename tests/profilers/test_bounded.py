"""A measured report gets the bounds its counters cannot give from a capture of the same launch, within a budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import KernelFile, load_kernel
from swizzleperf.profilers.bounded import BoundedProfiler
from swizzleperf.profilers.sim import SimProfiler
from swizzleperf.records.report import BottleneckReport, bounds_text, headroom_text

REPO = Path(__file__).resolve().parents[2]
H100, MI300X = PRESETS["h100"], PRESETS["mi300x"]


class Recorded:
    """A measuring profiler that returns one recorded report (what ncu gave), whatever it is asked."""

    name, measures, run_to_run_pts = "ncu", True, 1.3

    def __init__(self, report: BottleneckReport):
        self.report = report

    def profile(self, kernel: KernelFile, remap_source: str, size: str) -> BottleneckReport:
        return self.report.model_copy(update={"size": size})


def measured(metric: str = "read", accesses: int = 200_000, hits: int = 100_000) -> BottleneckReport:
    return BottleneckReport(source="ncu", hardware="h100", kernel="softmax", size="small", metric=metric,
                            hit_pct=100 * hits / accesses, accesses=accesses, hits=hits, granule_bytes=32,
                            notes=["ncu counters"])


@pytest.fixture(scope="module")
def softmax() -> KernelFile:
    return load_kernel(REPO / "kernels" / "softmax.py")


def test_a_measured_report_gets_the_ceiling_and_compulsory_misses_of_its_launch(softmax, tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path))
    report = BoundedProfiler(Recorded(measured()), H100, budget_s=600).profile(softmax, softmax.hook_source, "small")
    predicted = SimProfiler(H100, cache_dir=tmp_path).profile(softmax, softmax.hook_source, "small")
    assert (report.ceiling_pct, report.unique_lines) == (predicted.ceiling_pct, predicted.unique_lines)
    assert report.unique_lines == 64 * 4096 * 4 // 32  # every input element read once: 32-byte sectors of fp32
    assert report.achievable_pct == report.ceiling_pct  # one shared L2: every assignment shares it
    assert (report.source, report.hit_pct, report.accesses, report.hits) == ("ncu", 50.0, 200_000, 100_000)
    assert "counted on a CPU capture of the same launch" in bounds_text(report)
    assert f"{report.unique_lines:,} read-only sectors" in report.notes[-1] and "within the 600 s budget" in \
        report.notes[-1]
    assert headroom_text(report, report.ceiling_pct) == (f"it fetches {100_000 / report.unique_lines:.2f}x the "
                                                         f"compulsory misses, {report.ceiling_pct - 50.0:.2f} points "
                                                         f"below the read-hit ceiling")


def test_a_launch_whose_capture_does_not_fit_the_budget_says_so(softmax, tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path))
    for budget in (0.0, 0.001):  # never capture; a capture killed at its time limit
        report = BoundedProfiler(Recorded(measured()), H100, budget_s=budget).profile(softmax, softmax.hook_source,
                                                                                       "small")
        assert report.ceiling_pct is None and report.unique_lines is None and report.achievable_pct is None
        assert report.notes[-1].startswith(f"read-hit ceiling n/a: capturing this launch on the CPU takes over "
                                           f"{budget:g} s (the budget; SWIZZLEPERF_BOUNDS_CAPTURE_S raises it")
        assert "the launch was not captured" in bounds_text(report)
    assert not list(tmp_path.rglob("*.runs"))  # nothing half-captured was kept


def test_counters_that_mix_reads_and_writes_are_not_bounded_by_the_read_ceiling(softmax, tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path))
    report = BoundedProfiler(Recorded(measured("all")), MI300X, budget_s=600).profile(softmax, softmax.hook_source,
                                                                                      "small")
    assert report.ceiling_pct is None
    assert report.notes[-1] == "read-hit ceiling n/a: these counters mix reads and writes, and the ceiling bounds reads"
    assert not list(tmp_path.rglob("*.runs"))  # and nothing was captured for it


def test_a_machine_with_another_triton_takes_the_slow_reference_capture(softmax, tmp_path, monkeypatch):
    """A GPU machine's triton is the one its torch came with; the fast capture hooks 3.9 only."""
    from swizzleperf.profilers import bounded
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path))
    monkeypatch.setattr(bounded, "_triton", lambda: "3.6.0")
    assert bounded.capture_mode() == "reference"
    report = BoundedProfiler(Recorded(measured()), H100, budget_s=600).profile(softmax, softmax.hook_source, "tiny")
    predicted = SimProfiler(H100, cache_dir=tmp_path).profile(softmax, softmax.hook_source, "tiny")
    assert (report.ceiling_pct, report.unique_lines) == (predicted.ceiling_pct, predicted.unique_lines)
    slow = BoundedProfiler(Recorded(measured()), H100, budget_s=0.001).profile(softmax, softmax.hook_source, "small")
    assert slow.ceiling_pct is None and slow.notes[-1].endswith(
        "; this machine's triton 3.6.0 takes the slow reference capture (the fast one needs 3.9.x)")
