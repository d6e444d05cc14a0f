"""`swizzleperf capture`'s refusals: one line each, exit status 2, nothing written."""

import textwrap
from pathlib import Path

import pytest

from swizzleperf.cli.main import main
from swizzleperf.workflows.adopt.inline import inline_pid_helpers

PACKAGES = Path(__file__).resolve().parents[2] / "fixtures" / "packages"


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")


def _capture(tmp_path, monkeypatch, capsys, *args) -> tuple[str, Path]:
    """Run `swizzleperf capture -o tmp/k.py ARGS` as the command line does; its error line (exit status 2)."""
    out = tmp_path / "k.py"
    monkeypatch.setattr("sys.argv", ["swizzleperf", "capture", "-o", str(out), *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    last = capsys.readouterr().out.rstrip("\n").splitlines()[-1]
    assert last.startswith("error: ")
    return last, out


@pytest.mark.parametrize("command,message", [
    (["--", "python", "-c", "print('no kernel here')"],
     "`python -c 'print('\"'\"'no kernel here'\"'\"')'` ran (exit 0) but launched no Triton kernel; give a "
     "command that launches it"),
    (["--", "python", "-c", "raise SystemExit(3)"], "`python -c 'raise SystemExit(3)'` exited 3 before any Triton "
                                                    "launch (its last lines are above)"),
    (["--", "no-such-command-here", "x"], "no-such-command-here: command not found (give the command after --, "
                                          "as you would run it)"),
    (["--kernel", "nothing", "--", "python", "-c", "print(1)"], "ran (exit 0) but launched no Triton kernel named "
                                                                "nothing"),
])
def test_no_launch_is_one_line(tmp_path, monkeypatch, capsys, command, message):
    line, out = _capture(tmp_path, monkeypatch, capsys, *command)
    assert message in line
    assert not out.exists()


def test_several_kernels_need_a_choice(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(PACKAGES / "aliasfx")
    test = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/"]
    line, out = _capture(tmp_path, monkeypatch, capsys, "--", *test)
    assert line == ("error: 2 kernels were launched: _softmax_fwd_kernel (3), _log_softmax_fwd_kernel (2); pick "
                    "one with --kernel NAME")
    assert not out.exists()
    line, out = _capture(tmp_path, monkeypatch, capsys, "--kernel", "_softmax_fwd_kernel", "--launch", "7", "--", *test)
    assert line == "error: --launch 7: _softmax_fwd_kernel has launches 0..2"
    assert not out.exists()


HELPERS = textwrap.dedent('''\
    import triton
    import triton.language as tl


    @triton.jit
    def get_pid():
        return tl.program_id(0)


    @triton.jit
    def band(pid, n, GROUP: tl.constexpr = 4):
        per = GROUP * n
        first = (pid // per) * GROUP
        return first + pid % GROUP, (pid % per) // GROUP


    @triton.jit
    def kernel(x_ptr, n):
        pid = get_pid()
        pid_m, pid_n = band(pid, n + 1)
        per = pid_m * n
        tl.store(x_ptr + per + pid_n, 1.0)
''')


def test_program_id_helpers_are_inlined_on_the_pid_path_only():
    done = inline_pid_helpers(HELPERS, "kernel")
    assert done.helpers == ["get_pid", "band"]
    kernel = done.text[done.text.index("def kernel"):]
    assert kernel == textwrap.dedent('''\
        def kernel(x_ptr, n):
            pid = tl.program_id(0)
            _band_n = n + 1
            _band_per = 4 * _band_n
            first = pid // _band_per * 4
            pid_m, pid_n = first + pid % 4, pid % _band_per // 4
            per = pid_m * n
            tl.store(x_ptr + per + pid_n, 1.0)
    ''')


def test_at_a_terminal_the_kernel_is_asked_for(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from swizzleperf.cli import capture_command
    from swizzleperf.cli.main import app
    monkeypatch.setattr(capture_command, "_interactive", lambda: True)
    monkeypatch.chdir(PACKAGES / "aliasfx")
    out = tmp_path / "k.py"
    result = CliRunner().invoke(app, ["capture", "-o", str(out), "--", "python", "-m", "pytest", "-q", "-p",
                                      "no:cacheprovider", "tests/"], input="3\n2\n")
    assert result.exit_code == 0, result.output
    assert "a number from 1 to 2" in result.output  # 3 is not one of them
    assert "from 2 launches of _log_softmax_fwd_kernel" in " ".join(result.output.split())
    assert out.exists()


def test_an_existing_output_is_refused_before_the_command_runs(tmp_path, monkeypatch, capsys):
    (tmp_path / "k.py").write_text("mine\n")
    line, out = _capture(tmp_path, monkeypatch, capsys, "--", "python", "-c", "raise SystemExit(9)")
    assert line == f"error: {out} already exists; pass --force to replace it, or -o to write elsewhere"
    assert out.read_text() == "mine\n"
