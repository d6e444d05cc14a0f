"""The optimization loop end to end: run directory, failed attempts, kill and resume, --write."""

import hashlib
import io
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from swizzleperf.cli.optimize_command import run_optimize
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.loop.driver import LoopSettings, Observer, run_loop, start_run
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.profilers.sim import SimProfiler
from swizzleperf.proposers.scripted import ScriptedProposer
from swizzleperf.remaps.families import FAMILIES
from swizzleperf.workflows.optimize import OptimizeRequest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def small_softmax(tmp_path):
    """The real softmax kernel, declared at sizes that keep each attempt to a few seconds."""
    text = (ROOT / "kernels/softmax.py").read_text()
    text = text.replace('DEFAULT_SIZE = "medium"', 'DEFAULT_SIZE = "small"')
    text = text.replace('CHECK_SIZES = ["tiny", "small"]', 'CHECK_SIZES = ["tiny"]')
    path = tmp_path / "softmax.py"
    path.write_text(text)
    return path


def _request(kernel_path, runs_dir, **overrides):
    fields = dict(kernel_path=kernel_path, hardware="mi300x", profiler="sim", proposer="search", iterations=3,
                  patience=10, size=None, seed=0, model=None, api_base=None, llm_mode="aware", llm_timeout=180.0,
                  llm_retries=3, library=None, write=False, resume=None, runs_dir=runs_dir)
    fields.update(overrides)
    return OptimizeRequest(**fields)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_optimize_writes_a_complete_run_and_leaves_the_kernel_alone(small_softmax, tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    before = _sha(small_softmax)
    run = run_optimize(_request(small_softmax, tmp_path / "runs", stop_at_ceiling=False), Console(file=io.StringIO()))
    assert _sha(small_softmax) == before

    record = json.loads((run.path / "run.json").read_text())
    assert record["status"] == "finished" and record["kernel"]["sha256"] == before
    assert record["hardware"]["name"] == "mi300x" and record["profiler"] == "sim"
    assert "L2 read hit rate" in record["ranking_rule"] and record["versions"]["triton"]
    lines = (run.path / "attempts.jsonl").read_text().splitlines()
    assert [json.loads(line)["iteration"] for line in lines] == [0, 1, 2, 3]

    history = run.load_history()
    base, best = history.baseline(), history.best()
    assert best.report.hit_pct > base.report.hit_pct + 20  # grouping a row's chunks on one die pays
    assert best.report.ceiling_pct == pytest.approx(record["ceiling_pct"])
    assert record["best"]["iteration"] == best.iteration

    remap = (run.path / "best" / "remap.py").read_text()
    assert "@triton.jit" in remap and f"run {run.record.run_id}" in remap and "predicted (simulator)" in remap
    assert "ceiling" in remap and "Proven bijective for all grid sizes (z3), die counts 1, 2, 4, 8, 16." in remap
    applied = (run.path / "best" / "softmax.py").read_text()
    assert applied != small_softmax.read_text() and "def softmax_kernel(" in applied
    report = (run.path / "report.md").read_text()
    assert f"**Best: `{best.family}`" in report and "| 3 | search |" in report
    assert "Bijectivity of the best remap: proven bijective for all grid sizes (z3: every grid of up to " in report
    assert "| ok; proven for all grid sizes (z3) |" in report
    assert f"Bounds: read-hit ceiling {best.report.ceiling_pct:.2f}%" in report and "achievable" in report
    assert "Where the best remap puts programs: die 0 of 8 runs logical programs" in report
    # the simulator says what the achievable bound's assignment groups; tiles.png and report.md show it only
    # where the best remap fetches more than that assignment
    assert best.report.achievable_grouping.startswith("The achievable bound's assignment puts logical programs")
    assert base.report.short_of_achievable  # the identity spreads each row's chunks over 4 dies
    short = best.report.short_of_achievable
    assert (best.report.achievable_grouping in report) == short
    assert ("The best remap already reaches the achievable bound." in report) != short
    panels = struct.unpack(">I", (run.path / "tiles.png").read_bytes()[16:20])[0] / 572  # 5.2 in at 110 dpi each
    assert panels == (3 if short else 2)
    for png in ("hit_rate.png", "tiles.png"):
        assert (run.path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


GARBAGE = "Sure! Here is a better remap: just make it faster."
IMPORTS_OS = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    import os\n    return pid\n"
NAIVE = ("@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n"
         "    return (pid % NUM_XCDS) * (num_pids // NUM_XCDS) + pid // NUM_XCDS\n")
REVERSED = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return num_pids - 1 - pid\n"


class _Quiet(Observer):
    pass


def _loop(kernel_path, tmp_path, proposer, iterations):
    kernel = load_kernel(kernel_path)
    hw = PRESETS["mi300x"]
    profiler = SimProfiler(hw, cache_dir=tmp_path / "cache")
    run = start_run(tmp_path / "runs", kernel, "small", hw, "test", profiler, "test", proposer, {},
                    LoopSettings(iterations=iterations, patience=iterations))
    history = run_loop(run, kernel, proposer, CandidateEvaluator(kernel, hw, profiler, "small"), run.load_history(),
                       _Quiet())
    return run, history


def test_bad_candidates_become_recorded_failures_and_the_loop_goes_on(small_softmax, tmp_path):
    good = FAMILIES["xcd_chunked"](load_kernel(small_softmax).hook, chunk=4)
    proposer = ScriptedProposer([GARBAGE, IMPORTS_OS, NAIVE, good])
    run, history = _loop(small_softmax, tmp_path, proposer, iterations=10)
    verdicts = [(a.iteration, a.failure.stage if a.failure else "ok") for a in history.attempts]
    assert verdicts == [(0, "ok"), (1, "static"), (2, "static"), (3, "bijectivity"), (4, "ok")]
    reasons = {a.iteration: a.failure.detail for a in history.attempts if a.failure}
    assert "import" in reasons[2]
    assert "both map to" in reasons[3] and "never produced" in reasons[3]
    assert history.best().iteration == 4
    assert run.record.status_detail.startswith("the best remap fetches only the compulsory misses")
    # what the next proposal would be shown: the failures with their reasons
    views = history.views()
    assert any(v.stage == "bijectivity" and "both map to" in v.reason for v in views)
    assert len(run.load_history()) == 5  # all on disk


def test_a_kernel_that_crashes_with_a_candidate_is_a_failed_attempt(small_softmax, tmp_path):
    # A kernel with a bug that only a remap exposes: it reads far out of bounds unless the
    # logical id equals the launch id. The interpreter then segfaults in the child.
    text = small_softmax.read_text().replace(
        "    row = pid // CHUNKS\n",
        "    tl.load(x_ptr + (pid - tl.program_id(0)).to(tl.int64) * (1 << 44))\n    row = pid // CHUNKS\n", 1)
    small_softmax.write_text(text)
    run, history = _loop(small_softmax, tmp_path, ScriptedProposer([REVERSED]), iterations=3)
    attempt = history.attempts[1]
    assert attempt.failure.stage == "correctness"
    assert "signal" in attempt.failure.detail or "crash" in attempt.failure.detail
    assert history.best().iteration == 0


def test_a_killed_run_resumes_without_losing_or_repeating_attempts(small_softmax, tmp_path):
    runs_dir = tmp_path / "runs"
    env = {**os.environ, "SWIZZLEPERF_CACHE": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "swizzleperf", "optimize", str(small_softmax), "--hardware", "mi300x",
           "--runs-dir", str(runs_dir), "-n", "5", "--patience", "5", "--keep-going"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 240
    attempts_file = None
    while time.time() < deadline:
        found = list(runs_dir.glob("*/attempts.jsonl"))
        if found and len(found[0].read_text().splitlines()) >= 3:
            attempts_file = found[0]
            break
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.2)
    assert attempts_file is not None, "the run never reached 3 attempts"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = attempts_file.read_text().splitlines()
    kept = [line for line in kept if line.endswith("}")]
    assert json.loads((attempts_file.parent / "run.json").read_text())["status"] == "running"

    run = run_optimize(_request(None, runs_dir, resume=attempts_file.parent.name), Console(file=io.StringIO()))
    lines = (run.path / "attempts.jsonl").read_text().splitlines()
    assert lines[:len(kept)] == kept  # nothing lost or rewritten
    records = [json.loads(line) for line in lines]
    assert [r["iteration"] for r in records] == list(range(len(records)))
    assert len(records) == 6 and run.record.status == "finished"
    sources = [r["source"] for r in records]
    assert len(set(sources)) == len(sources)  # nothing repeated


def test_the_loop_stops_once_the_best_reaches_the_ceiling(small_softmax, tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    run = run_optimize(_request(small_softmax, tmp_path / "runs", iterations=10), Console(file=io.StringIO()))
    history = run.load_history()
    best = history.best().report
    assert best.at_ceiling and best.accesses - best.hits == best.unique_lines  # only compulsory fetches
    assert len(history) == history.best().iteration + 1 < 11  # nothing tried after it
    assert run.record.status_detail.startswith("the best remap fetches only the compulsory misses")


def test_write_is_the_only_way_the_kernel_changes(small_softmax, tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    run = run_optimize(_request(small_softmax, tmp_path / "runs", iterations=1, write=True),
                       Console(file=io.StringIO()))
    assert small_softmax.read_text() == (run.path / "best" / "softmax.py").read_text()
    assert load_kernel(small_softmax).hook_source != load_kernel(ROOT / "kernels/softmax.py").hook_source


def test_resume_refuses_a_changed_kernel(small_softmax, tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    run = run_optimize(_request(small_softmax, tmp_path / "runs", iterations=1), Console(file=io.StringIO()))
    small_softmax.write_text(small_softmax.read_text() + "\n# edited\n")
    from swizzleperf.errors import RunError
    with pytest.raises(RunError, match="changed since run"):
        run_optimize(_request(None, tmp_path / "runs", resume=str(run.path)), Console(file=io.StringIO()))
