"""A kernel that is fine on a GPU but fails on the CPU interpreter is said to meet an interpreter limit,
with the line that uses it and what to do, not called broken."""

from pathlib import Path

import pytest

from swizzleperf.cli.main import main
from swizzleperf.kernel import interpreter_limits

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "interpreter"


def _check(argv, monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.chdir(FIXTURES)  # the files as a user in that folder names them
    monkeypatch.setattr("sys.argv", ["swizzleperf", "check", *argv])
    with pytest.raises(SystemExit) as exit_info:
        main()
    return exit_info.value.code, capsys.readouterr().out.rstrip("\n").splitlines()[-1]


def test_half_precision_dot_is_the_interpreters_and_fp32_checks_it(monkeypatch, capsys):
    code, line = _check(["half_dot.py"], monkeypatch, capsys)
    assert code == 2
    assert line == ("INTERPRETER LIMIT at correctness: this is a limit of Triton's CPU interpreter (tl.dot on "
                    "half-precision or fp8 tensors at half_dot.py:19), not of the kernel: the interpreter computes it "
                    "wrongly; check on a GPU, or run the CPU check in float32 (`swizzleperf check KERNEL --fp32`, or "
                    "CPU_CHECK_FLOAT32 = True in the kernel file) when the kernel is dtype-generic")
    code, line = _check(["half_dot.py", "--fp32"], monkeypatch, capsys)
    assert (code, line) == (0, "OK: the remap is safe to use with this kernel")


def test_a_libdevice_call_failing_later_names_the_call(monkeypatch, capsys):
    code, line = _check(["libdevice_rsqrt.py"], monkeypatch, capsys)
    assert code == 2
    assert line == ("INTERPRETER LIMIT at correctness: this is a limit of Triton's CPU interpreter (libdevice or "
                    "extern calls at libdevice_rsqrt.py:20), not of the kernel: the interpreter has no libdevice: the "
                    "call returns None and a later line fails; check on a GPU")


@pytest.mark.parametrize("message,source,what", [
    ("AssertionError: ", "    tl.assume(n > 0)\n", "tl.assume"),
    ("RuntimeError: no asm", "y = tl.inline_asm_elementwise('', '', [x], tl.float32, True, 1)\n", "inline assembly"),
])
def test_each_limit_is_told_by_its_failure_and_source(message, source, what):
    limit, _ = interpreter_limits.explain_failure(message, source)
    assert limit.what == what
    assert interpreter_limits.explain_failure(message, "x = 1\n") is None


def test_a_failure_the_source_does_not_explain_is_the_kernels():
    assert interpreter_limits.explain_failure("AssertionError: ", "x = tl.load(p)\n") is None
