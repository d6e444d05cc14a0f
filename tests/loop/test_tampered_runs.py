"""A run directory is read back as untrusted input: a forged attempt never becomes the best, best/ or a
library entry; run.json cannot make swizzleperf import another file; a broken file is one line."""

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from swizzleperf.cli.main import app
from swizzleperf.cli.optimize_command import run_optimize
from swizzleperf.errors import RunError
from swizzleperf.loop.reverify import REREAD, run_kernel
from swizzleperf.loop.rundir import RunDir
from swizzleperf.remaps.library import Library
from swizzleperf.workflows.export import export_run
from swizzleperf.workflows.optimize import OptimizeRequest

ROOT = Path(__file__).resolve().parents[2]
FORGED = '@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    """Proven bijective (z3)."""\n    return pid // 2\n'
runner = CliRunner()


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A real two-iteration run of the softmax kernel, kept pristine: each test tampers with a copy."""
    tmp = tmp_path_factory.mktemp("run")
    kernel = tmp / "softmax.py"
    kernel.write_text((ROOT / "kernels/softmax.py").read_text().replace('CHECK_SIZES = ["tiny", "small"]',
                                                                        'CHECK_SIZES = ["tiny"]'))
    request = OptimizeRequest(kernel_path=kernel, hardware="mi300x", profiler="sim", proposer="search", iterations=2,
                              size="small", runs_dir=tmp / "runs")
    return run_optimize(request, Console(file=io.StringIO())).path


@pytest.fixture()
def run(finished, tmp_path) -> RunDir:
    shutil.copytree(finished.parents[1], tmp_path / "project")
    path = tmp_path / "project" / "runs" / finished.name
    record = json.loads((path / "run.json").read_text())
    record["kernel"]["path"] = str(tmp_path / "project" / "softmax.py")  # the copy's own kernel
    (path / "run.json").write_text(json.dumps(record))
    return RunDir.open(path)


def _forge_best(run: RunDir) -> int:
    """Append a line claiming a non-bijective remap fetched nothing: it would rank first."""
    lines = run.attempts_path.read_text().splitlines()
    forged = json.loads(lines[-1])
    forged["iteration"] = len(lines)
    forged["source"], forged["family"] = FORGED, "forged"
    forged["report"]["hits"] = forged["report"]["accesses"]
    forged["report"]["hit_pct"] = 100.0
    run.attempts_path.write_text("\n".join([*lines, json.dumps(forged)]) + "\n")
    return forged["iteration"]


def test_a_forged_attempt_is_rechecked_rejected_and_never_exported(run, tmp_path, monkeypatch):
    monkeypatch.chdir(run.path.parents[1])
    iteration = _forge_best(run)
    assert RunDir.open(run.path).load_history().best().family == "forged"  # as written, it ranks first
    _, entry, module = export_run(str(run.path), "rows", tmp_path / "lib", run.path.parent)
    assert entry.family != "forged" and "pid // 2" not in module.read_text()
    again = RunDir.open(run.path).load_history()
    forged = next(a for a in again.attempts if a.iteration == iteration)
    assert forged.verdict == "rejected at bijectivity" and forged.report is None
    assert forged.failure.detail.startswith(REREAD) and "logical" in forged.failure.detail
    assert again.best().family == entry.family


def test_a_resumed_run_renders_best_from_a_rechecked_attempt(run, monkeypatch):
    monkeypatch.chdir(run.path.parents[1])
    _forge_best(run)
    result = runner.invoke(app, ["optimize", "--resume", str(run.path), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "pid // 2" not in (run.best_dir / "remap.py").read_text()
    report = (run.path / "report.md").read_text()
    assert "| `forged` |" in report and "rejected (bijectivity): " + REREAD in report
    assert "forged" not in report.split("## Best remap")[1]


def test_run_json_cannot_make_another_file_run(run, tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    elsewhere = tmp_path / "elsewhere" / "evil.py"
    elsewhere.parent.mkdir()
    elsewhere.write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(run.path.parents[1])
    record = json.loads((run.path / "run.json").read_text())
    record["kernel"]["path"] = str(elsewhere)
    record["kernel"]["sha256"] = hashlib.sha256(elsewhere.read_bytes()).hexdigest()
    (run.path / "run.json").write_text(json.dumps(record))
    with pytest.raises(RunError, match="outside this directory and the one holding its runs; give the kernel file"):
        run_kernel(RunDir.open(run.path))
    inside = run.path.parents[1] / "evil.py"  # beside the runs, but not the file the run was started on
    inside.write_text(elsewhere.read_text())
    record["kernel"]["path"], record["kernel"]["sha256"] = str(inside), "0" * 64
    (run.path / "run.json").write_text(json.dumps(record))
    with pytest.raises(RunError, match="changed since run .* or is another file"):
        run_kernel(RunDir.open(run.path))
    assert not marker.exists()


@pytest.mark.parametrize("content,message", [
    (b"[1, 2]", "has schema version None"),
    (b"[" * 100_000 + b"]" * 100_000, "nests 100,000 levels deep; the limit is 64"),
    (b"\xff\xfe{}", "is not UTF-8 text (byte 0xff at offset 0)"),
    (b'{"schema_version": 1, "run_id": 3}', "does not match RunRecord at run_id: Input should be a valid string"),
])
def test_a_broken_run_json_is_one_line(run, content, message):
    (run.path / "run.json").write_bytes(content)
    with pytest.raises(RunError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RunDir.open(run.path)
    shown = subprocess.run([sys.executable, "-m", "swizzleperf", "runs", "show", str(run.path)], capture_output=True,
                           text=True, env={**os.environ, "COLUMNS": "400"})
    assert shown.returncode == 2 and shown.stdout.startswith("error: ") and "internal error" not in shown.stdout
    assert len(shown.stdout.strip().splitlines()) == 1, shown.stdout


def test_files_linked_out_of_the_run_are_not_read(run):
    run.attempts_path.unlink()
    os.symlink("/dev/zero", run.attempts_path)
    with pytest.raises(RunError, match="links outside .* refusing to read it"):
        RunDir.open(run.path).load_history()
    os.unlink(run.path / "run.json")
    os.symlink("/dev/zero", run.path / "run.json")
    with pytest.raises(RunError, match="links outside"):
        RunDir.open(run.path)


def test_a_forged_line_inside_the_log_is_one_line(run):
    lines = run.attempts_path.read_text().splitlines()
    run.attempts_path.write_text("\n".join([lines[0], '{"iteration": "x"}', *lines[1:]]) + "\n")
    with pytest.raises(RunError, match=r"attempts.jsonl:2 does not match Attempt at iteration"):
        RunDir.open(run.path).load_history()


def test_library_entries_are_checked_on_read(tmp_path, finished, monkeypatch):
    monkeypatch.chdir(finished.parents[1])
    lib_dir = tmp_path / "lib"
    _, entry, _ = export_run(str(finished), "rows", lib_dir, finished.parent)
    lib = Library(lib_dir)
    record = json.loads((lib_dir / "rows.json").read_text())
    (lib_dir / "evil.json").write_text(json.dumps({**record, "name": "x\nimport os; os.system('id')\n"}))
    with pytest.raises(Exception, match="evil.json does not match LibraryEntry at name"):
        lib.entries()
    (lib_dir / "evil.json").unlink()
    (lib_dir / "other.json").write_text(json.dumps(record))
    with pytest.raises(Exception, match="other.json is named 'rows', not 'other'"):
        lib.entries()
    (lib_dir / "other.json").write_text(json.dumps({**record, "name": "other"}))
    with pytest.raises(Exception, match="other.json does not match LibraryEntry at the top level: .*must be the function other and nothing else"):
        lib.entries()
    (lib_dir / "other.json").unlink()
    with pytest.raises(Exception, match="cannot be a library name"):
        lib.get("../rows")
    assert [e.name for e in lib.entries()] == ["rows"] and lib.get("rows").family == entry.family
