"""Auditing a parallel run from its records: two profiles on one GPU, and attempts that should match."""

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

from swizzleperf.lab.audit import (
    attempt_occupancy,
    bench_occupancy,
    bench_records,
    compare_attempts,
    optimize_records,
    peak_concurrency,
    shared_gpu,
)
from swizzleperf.loop.executors.base import placed_gpu
from swizzleperf.records.attempt import Attempt, StageResult
from swizzleperf.records.report import BottleneckReport
from swizzleperf.workflows.bench.results import KernelResult

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)


def _attempt(iteration, start_s, seconds, device, family="f", hit_pct=50.0, ok=True) -> Attempt:
    report = BottleneckReport(source="ncu", hardware="h100", kernel="k", size="s", hit_pct=hit_pct) if ok else None
    return Attempt(iteration=iteration, origin="search", family=family, source=f"src {family}", diff="",
                   stages=[StageResult(stage="bijectivity", ok=ok, detail="d", seconds=0.0)], report=report,
                   started_at=T0 + timedelta(seconds=start_s), seconds=seconds, device=device)


def test_two_profiles_overlapping_on_one_gpu_are_found_and_touching_ones_are_not():
    attempts = [_attempt(1, 0, 10, "h GPU 0"), _attempt(2, 0, 12, "h GPU 1"), _attempt(3, 10, 5, "h GPU 0"),
                _attempt(4, 11, 4, "h GPU 1"), _attempt(0, 0, 30, None)]  # the baseline ran in-process
    spans = attempt_occupancy(attempts)
    assert len(spans) == 4
    clashes = shared_gpu(spans)
    assert [(a.what, b.what) for a, b in clashes] == [("attempt 2 (f)", "attempt 4 (f)")]
    assert peak_concurrency(spans) == 3  # at 11 s: attempt 3 on GPU 0, and the clashing 2 and 4 on GPU 1


def test_peak_concurrency_counts_all_gpus_and_a_serial_run_is_one():
    serial = attempt_occupancy([_attempt(i, 5 * i, 5, "h GPU 0") for i in range(4)])
    assert peak_concurrency(serial) == 1 and shared_gpu(serial) == []
    wide = attempt_occupancy([_attempt(i, 1, 5, f"h GPU {i}") for i in range(3)])
    assert peak_concurrency(wide) == 3 and shared_gpu(wide) == []


def test_bench_rows_occupy_their_gpu_for_the_loop_and_the_other_sizes():
    rows = [KernelResult(kernel=k, kernel_path=f"{k}.py", status="finished", run_seconds=10, generalise_seconds=5,
                         started_at=T0 + timedelta(seconds=start), gpu=gpu)
            for k, start, gpu in (("softmax", 0, "h GPU 0"), ("gemm", 0, "h GPU 1"), ("attention", 14, "h GPU 0"))]
    spans = bench_occupancy(rows)
    assert [s.end - s.start for s in spans] == [timedelta(seconds=15)] * 3
    assert [(a.what, b.what) for a, b in shared_gpu(spans)] == [("kernel softmax", "kernel attention")]


def test_runs_with_the_same_decisions_compare_identical_within_the_noise():
    one = [_attempt(0, 0, 3, None, "identity", 60.0), _attempt(1, 3, 3, "h GPU 0", "grouped", 70.0),
           _attempt(2, 6, 3, "h GPU 0", "bad", ok=False)]
    many = [_attempt(0, 0, 3, None, "identity", 60.3), _attempt(1, 3, 3, "h GPU 1", "grouped", 69.8),
            _attempt(2, 3, 3, "h GPU 0", "bad", ok=False)]
    result = compare_attempts(one, many, tolerance_pts=0.5)
    assert result.identical and result.compared == 3
    assert abs(result.max_hit_difference_pts - 0.3) < 1e-9
    strict = compare_attempts(one, many, tolerance_pts=0.1)
    assert len(strict.differences) == 2 and "60.00% against 60.30%" in strict.differences[0]


def test_a_different_proposal_or_verdict_or_length_is_a_difference():
    one = [_attempt(0, 0, 3, None, "identity"), _attempt(1, 3, 3, None, "grouped")]
    other = [_attempt(0, 0, 3, None, "identity"), _attempt(1, 3, 3, None, "xcd_chunked")]
    assert compare_attempts(one, other).differences == [
        "attempt 1: grouped (accepted) against xcd_chunked (accepted)"]
    rejected = [_attempt(0, 0, 3, None, "identity"), _attempt(1, 3, 3, None, "grouped", ok=False)]
    assert "rejected at bijectivity" in compare_attempts(one, rejected).differences[0]
    assert compare_attempts(one, one[:1]).differences == ["2 attempts against 1"]


def test_placed_gpu_names_the_host_and_the_visible_device(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    assert placed_gpu() is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert placed_gpu() == f"{os.uname().nodename} GPU 1"


RECORDED = Path(__file__).resolve().parents[2] / "benchmarks" / "recorded" / "multi-gpu-h100x2"


def test_the_recorded_two_h100_runs_never_shared_a_gpu_and_match_the_one_gpu_runs():
    # benchmarks/multi_gpu.py on two H100s (Ray, ncu): optimize gemm -n 8, and bench (softmax and gemm
    # finished before the run's time limit)
    two, spans_two = optimize_records(RECORDED / "optimize-2gpu" / "runs")
    one, spans_one = optimize_records(RECORDED / "optimize-1gpu" / "runs")
    assert shared_gpu(spans_two) == [] and peak_concurrency(spans_two) == 2
    assert {s.gpu for s in spans_two} == {"vm GPU 0", "vm GPU 1"} and {s.gpu for s in spans_one} == {"vm GPU 0"}
    result = compare_attempts(two[0].load_history().attempts, one[0].load_history().attempts, tolerance_pts=1.0)
    assert result.identical and result.compared == 9 and 0.2 < result.max_hit_difference_pts < 0.4
    bench_two, kernels_two = bench_records(RECORDED / "bench-2gpu" / "bench" / "bench.json")
    bench_one, _ = bench_records(RECORDED / "bench-1gpu" / "bench" / "bench.json")
    assert [r.record.kernel.name for r in bench_two] == ["softmax", "gemm"]  # found beside bench.json, moved here
    assert shared_gpu(kernels_two) == [] and peak_concurrency(kernels_two) == 2
    for a, b in zip(bench_two, bench_one):
        assert compare_attempts(a.load_history().attempts, b.load_history().attempts, tolerance_pts=1.0).identical



def test_the_recorded_h200_bench_ran_both_sides_at_once_on_their_own_gpus_with_the_same_attempts():
    # benchmarks/multi_gpu.py --together on a host with four H200s: bench on GPUs 0 and 1, and on GPU 2,
    # in one call; every kernel finished on both sides
    recorded = RECORDED.parent / "multi-gpu-h200x4"
    two, kernels_two = bench_records(recorded / "bench-2gpu" / "bench" / "bench.json")
    one, kernels_one = bench_records(recorded / "bench-1gpu" / "bench" / "bench.json")
    assert [r.record.kernel.name for r in two] == [r.record.kernel.name for r in one] == ["softmax", "gemm", "attention"]
    assert shared_gpu(kernels_two + kernels_one) == []  # not within a side, nor across the two
    assert {s.gpu for s in kernels_two} == {"vm GPU 0", "vm GPU 1"} and {s.gpu for s in kernels_one} == {"vm GPU 2"}
    assert peak_concurrency(kernels_two) == 2 and peak_concurrency(kernels_one) == 1
    for a, b in zip(two, one):
        result = compare_attempts(a.load_history().attempts, b.load_history().attempts, tolerance_pts=1.3)
        assert result.identical and result.compared == 5, result.differences
