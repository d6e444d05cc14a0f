"""Ctrl-C during `optimize` (issue 14): once, the attempt in flight finishes, the run is summarised
with the exact --resume command and the exit status is 130; twice, it stops at once with one line
and 130. Either way every finished attempt is on disk and the run resumes."""

import json
import os
import signal
import time
from pathlib import Path

import pytest

from swizzleperf.cli.main import main
from swizzleperf.records.proposal import Proposal
from swizzleperf.workflows import optimize as session

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "tests" / "data" / "no_reference.py"
REVERSE = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return num_pids - 1 - pid\n"
ROTATE = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return (pid + 1) % num_pids\n"
HALF = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return (pid + num_pids // 2) % num_pids\n"


class CtrlC:
    """Proposes REVERSE, ROTATE, HALF in turn; before proposing ROTATE, the user presses Ctrl-C `presses` times."""

    name = "search"

    def __init__(self, presses: int):
        self.presses = presses

    def propose(self, context):
        done = sum(1 for view in context.every_attempt if view.origin == "search")
        if done == 1 and self.presses:
            for _ in range(self.presses):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # the handler runs before the next press
            self.presses = 0
        sources = [REVERSE, ROTATE, HALF]
        if done >= len(sources):
            return None
        return Proposal(source=sources[done], family=f"scripted #{done + 1}", origin="search")


@pytest.fixture()
def optimize(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("COLUMNS", "2000")
    monkeypatch.chdir(tmp_path)

    def run(presses: int, *extra: str) -> tuple[int, list[str]]:
        monkeypatch.setattr(session, "make_proposer", lambda name, seed, options: CtrlC(presses))
        monkeypatch.setattr("sys.argv", ["swizzleperf", "optimize", str(KERNEL), "--hardware", "mi300x", "--profiler",
                                         "sim", "--keep-going", "-n", "3", *extra])
        with pytest.raises(SystemExit) as exit_info:
            main()
        captured = capsys.readouterr()
        assert "Traceback" not in captured.out + captured.err and "Aborted" not in captured.err
        return exit_info.value.code, captured.out.splitlines()
    return run


def on_disk(tmp_path: Path) -> tuple[Path, dict, list[str]]:
    (run_dir,) = (tmp_path / "runs").iterdir()
    record = json.loads((run_dir / "run.json").read_text())
    families = [json.loads(line)["family"] for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
    return run_dir, record, families


def test_ctrl_c_once_finishes_the_attempt_summarises_and_exits_130(optimize, tmp_path):
    code, lines = optimize(1)
    run_dir, record, families = on_disk(tmp_path)
    assert code == 130
    assert "stopping after the current attempt (Ctrl-C again to stop at once)" in lines
    assert families == ["identity (original hook)", "scripted #1", "scripted #2"]  # #2 was in flight: it finished
    assert record["status"] == "interrupted" and record["status_detail"] == "stopped by the user"
    assert (run_dir / "report.md").is_file() and (run_dir / "best" / "remap.py").is_file()
    # the kernel lies outside this directory and the runs' one: the command names it (swizzleperf.loop.reverify)
    assert lines[-1] == f"stopped by Ctrl-C; continue with: swizzleperf optimize {KERNEL} --resume runs/{run_dir.name}"
    # the command it printed continues the run without repeating an attempt
    code, lines = optimize(0, "--resume", f"runs/{run_dir.name}")
    _, record, families = on_disk(tmp_path)
    assert code == 0 and record["status"] == "finished"
    assert families == ["identity (original hook)", "scripted #1", "scripted #2", "scripted #3"]


def test_ctrl_c_twice_stops_at_once_with_one_line_and_exits_130(optimize, tmp_path):
    code, lines = optimize(2)
    run_dir, record, families = on_disk(tmp_path)
    assert code == 130
    assert families == ["identity (original hook)", "scripted #1"]  # nothing finished is lost
    assert record["status"] == "interrupted" and record["status_detail"] == "stopped at once by a second Ctrl-C"
    assert lines[-1] == (f"interrupted: 2 finished attempts are kept in runs/{run_dir.name}; continue with: "
                         f"swizzleperf optimize {KERNEL} --resume runs/{run_dir.name}")
    code, _ = optimize(0, "--resume", "latest")
    _, record, families = on_disk(tmp_path)
    assert code == 0 and families == ["identity (original hook)", "scripted #1", "scripted #2", "scripted #3"]


def _main(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setenv("COLUMNS", "2000")
    monkeypatch.setattr("sys.argv", ["swizzleperf", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def test_ctrl_c_in_any_other_command_exits_130_without_a_traceback(monkeypatch, capsys):
    def pressed(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C while check loads the kernel

    monkeypatch.setattr("swizzleperf.cli.kernel_commands.load_kernel", pressed)
    code, out, err = _main(monkeypatch, capsys, "check", str(KERNEL))
    assert code == 130 and "Aborted" not in out + err and "Traceback" not in out + err


def test_usage_errors_and_version_keep_clicks_wording_and_exit_codes(monkeypatch, capsys):
    code, out, err = _main(monkeypatch, capsys, "check", "--bogus")
    assert code == 2 and "No such option: --bogus" in out + err
    code, out, _ = _main(monkeypatch, capsys, "--version")
    assert code == 0 and out.strip().startswith("swizzleperf ")
    code, _, _ = _main(monkeypatch, capsys, "hw")
    assert code == 0
