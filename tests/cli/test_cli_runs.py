"""`runs list` and `runs show` as a newcomer reads them, piped to a file or in a terminal (issue 14)."""

from datetime import datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from swizzleperf.cli import main as cli
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.loop.history import RANKING_RULE
from swizzleperf.loop.rundir import RunDir
from swizzleperf.records.attempt import Attempt, StageResult
from swizzleperf.records.report import BottleneckReport
from swizzleperf.records.run import BestRef, KernelRef

runner = CliRunner()


def _attempt(iteration: int, family: str, hits: int) -> Attempt:
    report = BottleneckReport(source="sim", hardware="mi300x", kernel="softmax", size="tiny", hit_pct=hits / 10,
                              ceiling_pct=93.75, achievable_pct=90.0, accesses=1000, hits=hits, unique_lines=62)
    stages = [StageResult(stage=s, ok=True, detail="ok", seconds=0.1) for s in ("propose", "static", "profile")]
    return Attempt(iteration=iteration, origin="baseline" if iteration == 0 else "search", family=family,
                   source="...", diff="", stages=stages, report=report, started_at=datetime.now(timezone.utc),
                   seconds=0.5)


def make_run(root: Path, kernel_name: str) -> RunDir:
    """A finished run of two attempts, written as the loop writes one (no kernel is run)."""
    run = RunDir.create(root, dict(
        kernel=KernelRef(path=f"kernels/{kernel_name}.py", name=kernel_name, sha256="0" * 64), size="tiny",
        hardware=PRESETS["mi300x"], hardware_reason="preset mi300x", profiler="sim",
        profiler_reason="torch sees no GPU: simulator", proposer="search", seed=0, iterations=1, patience=10,
        ranking_rule=RANKING_RULE))
    for attempt in (_attempt(0, "identity (original hook)", 500), _attempt(1, "xcd-contiguous", 880)):
        run.append_attempt(attempt)
    run.record.status, run.record.status_detail = "finished", "reached 1 iterations"
    run.record.baseline_hit_pct, run.record.ceiling_pct = 50.0, 93.75
    run.record.best = BestRef(iteration=1, family="xcd-contiguous", hit_pct=88.0, source="sim")
    run.save()
    return run


@pytest.fixture()
def narrow_console(monkeypatch):
    """The CLI's console at rich's width for output that is not a terminal (80 columns)."""
    monkeypatch.setattr(cli.console, "_width", 80)


def test_runs_list_piped_keeps_whole_run_ids(tmp_path, narrow_console):
    long_name = "a_kernel_with_a_rather_long_descriptive_name"
    run = make_run(tmp_path, long_name)
    result = runner.invoke(cli.app, ["runs", "list", "--runs-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if run.record.run_id in line)
    cells = [cell.strip() for cell in row.strip("│ ").split("│")]
    assert cells == [run.record.run_id, long_name, "tiny", "mi300x", "sim", "search", "finished", "50.00", "88.00",
                     "93.75"]
    assert "…" not in result.output
    assert cli.console.width == 80  # the console is left as it was


def test_runs_show_prints_the_best_with_its_bounds_and_source(tmp_path, monkeypatch):
    monkeypatch.setattr(cli.console, "_width", 2000)  # the line unwrapped
    run = make_run(tmp_path, "softmax")
    result = runner.invoke(cli.app, ["runs", "show", "latest", "--runs-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    best = [line for line in result.output.splitlines() if line.startswith("best: ")]
    assert best == ["best: xcd-contiguous (iteration 1), L2 read hit 88.00% predicted (simulator); read-hit ceiling 93.75% "
                    "(every read-only sector fetched once, every read reaching the L2); achievable 90.00% (the best "
                    "balanced assignment of programs to dies found, caches big enough for every first touch); the "
                    "L2 fetched 120 vs 62 compulsory (1.94x)"]
    assert f"report: {run.path / 'report.md'}" in result.output
