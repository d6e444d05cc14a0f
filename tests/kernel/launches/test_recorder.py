"""The recorder, run inside a user's script: which tensors a launch wrote, and which it read first.

A launch's outputs are the tensors whose bits it changed, and those it overwrote with what they
already held (an autotuner's benchmark runs, or an earlier call, wrote the same result): a probe
with such a tensor alone poisoned shows the launch writes it. In-place tensors are the outputs
whose prior contents the launch reads.
"""

import json
import textwrap

import pytest
from typer.testing import CliRunner

from swizzleperf.cli.main import app

SCRIPT = textwrap.dedent('''\
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def copy_and_bump(x_ptr, y_ptr, z_ptr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs))
        tl.store(z_ptr + offs, tl.load(z_ptr + offs) + 1.0)


    x = torch.randn(256, device="cuda")
    y = x.clone()  # already holds what the launch writes
    z = torch.zeros(256, device="cuda")
    copy_and_bump[(256 // 64,)](x, y, z, BLOCK=64)
    assert torch.equal(y, x) and torch.equal(z, torch.ones(256, device="cuda"))
''')


def test_outputs_and_in_place_tensors_are_found(tmp_path, monkeypatch):
    (tmp_path / "job.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["capture", "-o", "k.py", "--", "python", "job.py"])
    assert result.exit_code == 0, result.output
    launch = json.loads((tmp_path / "k.launches.json").read_text())["launches"][0]
    roles = {p["name"]: (p["written"], p["in_place"], p["zeros"]) for p in launch["params"] if p["kind"] == "tensor"}
    assert roles == {"x_ptr": (False, False, False), "y_ptr": (True, False, False), "z_ptr": (True, True, True)}
    assert "('z_ptr', \"in_place\", {'dtype': 'float32'" in (tmp_path / "k.py").read_text()


LIBDEVICE = textwrap.dedent('''\
    import torch
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice


    @triton.jit
    def rsqrt_kernel(x_ptr, y_ptr, eps, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        y = libdevice.rsqrt(tl.load(x_ptr + offs) + eps.to(tl.float32))
        tl.store(y_ptr + offs, y.to(tl.float32))


    x = torch.rand(256, device="cuda")
    rsqrt_kernel[(4,)](x, torch.empty_like(x), 1e-6, BLOCK=64)
''')


def test_a_launch_that_fails_in_the_interpreter_is_named_with_the_limit(tmp_path, monkeypatch, capsys):
    from swizzleperf.cli.main import main
    (tmp_path / "job.py").write_text(LIBDEVICE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setattr("sys.argv", ["swizzleperf", "capture", "-o", "k.py", "--", "python", "job.py"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    assert capsys.readouterr().out.rstrip("\n").splitlines()[-1] == (
        "error: `python job.py` exited 1: the launch of rsqrt_kernel (job.py:8) raised AttributeError: 'NoneType' "
        "object has no attribute 'to'; this is a limit of Triton's CPU interpreter (libdevice or extern calls at "
        "job.py:10), not of the kernel: the interpreter has no libdevice: the call returns None and a later line "
        "fails; check on a GPU")
    assert not (tmp_path / "k.py").exists()


def test_a_float_argument_is_an_fp32_scalar_as_on_a_gpu(tmp_path, monkeypatch):
    (tmp_path / "job.py").write_text(LIBDEVICE.replace("libdevice.rsqrt(", "tl.sqrt(").replace(
        "from triton.language.extra import libdevice\n", ""))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["capture", "-o", "k.py", "--", "python", "job.py"])
    assert result.exit_code == 0, result.output  # `eps.to(tl.float32)` fails on the stock interpreter
    assert "replayed: under its own hook" in result.output
