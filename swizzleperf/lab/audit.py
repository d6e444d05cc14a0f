"""Checks on what a parallel run recorded: did two profiles ever share a GPU, and did the run record the
same attempts as a serial one?

Both answers come from the records alone (attempts.jsonl, bench.json), so a run made on a cluster can be
audited anywhere. A profile occupies its GPU from the attempt's `started_at` for its `seconds`; a bench row
occupies its GPU for the kernel's whole loop. Two runs of the same request should propose the same
candidates and reach the same verdicts; a measured number (ncu, rocprofv3) moves between runs by the
counters' own noise, so it is compared with a tolerance and its largest difference reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from swizzleperf.loop.rundir import RunDir
from swizzleperf.records.attempt import Attempt
from swizzleperf.workflows.bench.results import BenchReport, KernelResult


@dataclass(frozen=True)
class Occupancy:
    """One stretch of time a GPU was busy with one thing (an attempt, a bench kernel)."""

    gpu: str
    start: datetime
    end: datetime
    what: str


def attempt_occupancy(attempts: Iterable[Attempt]) -> list[Occupancy]:
    """The GPU time of every attempt that recorded the GPU it was placed on."""
    return [Occupancy(a.device, a.started_at, a.started_at + timedelta(seconds=a.seconds),
                      f"attempt {a.iteration} ({a.family})") for a in attempts if a.device]


def bench_occupancy(rows: Iterable[KernelResult]) -> list[Occupancy]:
    """The GPU time of every bench kernel that recorded its GPU (its loop and its other sizes)."""
    return [Occupancy(r.gpu, r.started_at, r.started_at + timedelta(seconds=r.run_seconds + r.generalise_seconds),
                      f"kernel {r.kernel}") for r in rows if r.gpu and r.started_at]


def optimize_records(runs_dir: Path) -> tuple[list[RunDir], list[Occupancy]]:
    """The optimize runs under `runs_dir` (oldest first) and the GPU time their attempts recorded."""
    runs = [RunDir.open(path) for path in sorted(runs_dir.iterdir()) if (path / "run.json").is_file()]
    return runs, [span for run in runs for span in attempt_occupancy(run.load_history().attempts)]


def bench_records(bench_json: Path) -> tuple[list[RunDir], list[Occupancy]]:
    """A bench's kernel runs, in the suite's order, and the GPU time its kernels recorded. A run directory
    that moved with bench.json (copied from the machine that ran it) is found under its `runs/` sibling."""
    report = BenchReport.model_validate_json(bench_json.read_text())
    runs = []
    for row in report.kernels:
        if row.run_dir:
            path = Path(row.run_dir)
            runs.append(RunDir.open(path if path.exists() else bench_json.parent.parent / "runs" / path.name))
    return runs, bench_occupancy(report.kernels)


def shared_gpu(spans: Sequence[Occupancy]) -> list[tuple[Occupancy, Occupancy]]:
    """Every pair of spans on the same GPU that overlap in time (touching ends do not overlap)."""
    ordered = sorted(spans, key=lambda s: (s.gpu, s.start))
    clashes = []
    for i, span in enumerate(ordered):
        for later in ordered[i + 1:]:
            if later.gpu != span.gpu or later.start >= span.end:
                break
            clashes.append((span, later))
    return clashes


def peak_concurrency(spans: Sequence[Occupancy]) -> int:
    """The most spans running at one moment, over all GPUs (1: the run never ran two things at once)."""
    events = sorted([(s.start, 1) for s in spans] + [(s.end, -1) for s in spans], key=lambda e: (e[0], e[1]))
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


@dataclass
class AttemptComparison:
    """Two runs' attempts side by side: what differs beyond timing, and how far their measurements moved."""

    compared: int
    differences: list[str]
    max_hit_difference_pts: float

    @property
    def identical(self) -> bool:
        return not self.differences


def _outline(attempt: Attempt) -> tuple:
    """What a run decides, as opposed to what it measures: the proposal and each stage's verdict."""
    return (attempt.iteration, attempt.origin, attempt.family, attempt.source,
            tuple((s.stage, s.ok) for s in attempt.stages), attempt.report is not None)


def compare_attempts(first: Sequence[Attempt], second: Sequence[Attempt],
                     tolerance_pts: float = 0.0) -> AttemptComparison:
    """Attempt by attempt: the same proposals, stages and verdicts, and hit rates within `tolerance_pts`."""
    differences = []
    if len(first) != len(second):
        differences.append(f"{len(first)} attempts against {len(second)}")
    worst = 0.0
    for a, b in zip(first, second):
        if _outline(a) != _outline(b):
            differences.append(f"attempt {a.iteration}: {a.family} ({a.verdict}) against {b.family} ({b.verdict})")
            continue
        if a.report is not None and b.report is not None:
            gap = abs(a.report.hit_pct - b.report.hit_pct)
            worst = max(worst, gap)
            if gap > tolerance_pts:
                differences.append(f"attempt {a.iteration} ({a.family}): hit rate {a.report.hit_pct:.2f}% against "
                                   f"{b.report.hit_pct:.2f}%, {gap:.2f} points apart")
    return AttemptComparison(min(len(first), len(second)), differences, worst)
