"""`apply --to`: a remap written into the original module at its program-id site; the project's own
tests still pass on the patched copy (the remap is a bijection, so the outputs do not change)."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from swizzleperf.cli.main import app
from swizzleperf.errors import CaptureError
from swizzleperf.remaps.library import LibraryEntry
from swizzleperf.workflows.launch_capture.write_back import patch_module

PACKAGES = Path(__file__).resolve().parents[2] / "fixtures" / "packages"
runner = CliRunner()


def _entry(params: list[str], ndim: int, body: str) -> LibraryEntry:
    source = f"@triton.jit\ndef flip({', '.join(params)}: tl.constexpr):\n" + textwrap.indent(body, "    ")
    return LibraryEntry(name="flip", family="test", params=params, ndim=ndim, source=source, kernel="k",
                        kernel_sha256="0" * 64, size="s", hardware="mi300x", num_domains=8, run_id="r", iteration=1,
                        hit_pct=50.0, baseline_hit_pct=40.0, ceiling_pct=60.0, numbers_from="sim", proven_grids=[],
                        created_at=datetime.now(timezone.utc))


ONE_D = _entry(["pid", "num_pids", "NUM_XCDS"], 1, "return num_pids - 1 - pid\n")
TWO_D = _entry(["pid", "num_pid_m", "num_pid_n", "NUM_XCDS"], 2, "return pid % num_pid_m, pid // num_pid_m\n")
THREE_D = _entry(["pid", "num_pid_axis_2", "num_pid_axis_1", "num_pid_axis_0", "NUM_XCDS"], 3,
                 "n = num_pid_axis_2 * num_pid_axis_1 * num_pid_axis_0\nq = n - 1 - pid\n"
                 "return q % num_pid_axis_2, (q // num_pid_axis_2) % num_pid_axis_1, "
                 "q // (num_pid_axis_2 * num_pid_axis_1)\n")


def _patched_project(tmp_path, project, module, kernel, entry, helpers=frozenset()):
    root = shutil.copytree(PACKAGES / project, tmp_path / project)
    patch = patch_module(root / module, kernel, entry, helpers)
    assert (root / module).read_text() == patch.before  # only read
    (root / module).write_text(patch.after)
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/"], cwd=root,
                           capture_output=True, text=True, env={**os.environ, "TRITON_INTERPRET": "1"})
    return patch, tests


def test_one_d_wraps_the_program_id_read(tmp_path):
    patch, tests = _patched_project(tmp_path, "rowops", "rowops/kernels/rmsnorm.py", "rms_norm_fwd_kernel", ONE_D)
    assert "-    row = tl.program_id(0)\n+    row = flip(tl.program_id(0), tl.num_programs(0), 8)\n" in patch.diff()
    assert patch.how == "flip() before rms_norm_fwd_kernel, called with NUM_XCDS = 8; 1 program-id read wrapped"
    assert tests.returncode == 0, tests.stdout[-2000:]


def test_a_helper_that_returns_the_program_id_is_wrapped(tmp_path):
    patch, tests = _patched_project(tmp_path, "pidstyles", "pidstyles/vector.py", "_axpby_kernel", ONE_D,
                                    frozenset({"get_pid"}))
    assert "flip(get_pid(), tl.num_programs(0), 8)" in patch.after
    assert tests.returncode == 0, tests.stdout[-2000:]


def test_two_d_replaces_the_existing_remap_helpers(tmp_path):
    patch, tests = _patched_project(tmp_path, "xcdgemm", "xcdgemm/gemm.py", "gemm_kernel", TWO_D)
    diff = patch.diff()
    assert "-    pid = tl.program_id(0)\n-    pid = remap_xcd(pid, num_pid_m * num_pid_n, NUM_XCDS)\n" in diff
    assert "+    pid_m, pid_n = flip(tl.program_id(0), num_pid_m, num_pid_n, 8)\n" in diff
    assert patch.how.endswith("the 3 statements deriving (pid_m, pid_n) replaced by one call")
    assert tests.returncode == 0, tests.stdout[-2000:]


def test_two_d_outputs_assigned_in_separate_statements(tmp_path):
    patch, tests = _patched_project(tmp_path, "tunedmm", "tunedmm/matmul.py", "matmul_kernel", TWO_D)
    assert "+    pid_m, pid_n = flip(tl.program_id(0), num_pid_m, num_pid_n, 8)\n" in patch.diff()
    assert tests.returncode == 0, tests.stdout[-2000:]


def test_several_axes_keep_the_launch_and_remap_together(tmp_path):
    patch, tests = _patched_project(tmp_path, "pagedattn", "pagedattn/attention.py", "_paged_attention_kernel",
                                    THREE_D)
    assert "_launch_pid = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0) + tl.program_id(2) * " \
           "tl.num_programs(0) * tl.num_programs(1)" in patch.after
    assert patch.how.endswith("program ids of axes 0, 1, 2 remapped together (launch unchanged)")
    assert tests.returncode == 0, tests.stdout[-2000:]


def test_a_missing_kernel_is_named(tmp_path):
    with pytest.raises(CaptureError, match=r"rmsnorm.py has no @triton.jit kernel named nope \(it has: "
                                           r"rms_norm_fwd_kernel\)"):
        patch_module(PACKAGES / "rowops" / "rowops" / "kernels" / "rmsnorm.py", "nope", ONE_D)


def test_apply_run_to_the_original_writes_only_with_write_and_reruns_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")
    root = shutil.copytree(PACKAGES / "rowops", tmp_path / "rowops")
    monkeypatch.chdir(root)
    kernel, runs = tmp_path / "k" / "rms.py", tmp_path / "runs"
    module = root / "rowops" / "kernels" / "rmsnorm.py"
    original = module.read_text()
    assert runner.invoke(app, ["capture", "-o", str(kernel), "--", "python", "-m", "pytest", "-q", "-p",
                               "no:cacheprovider", "tests/"]).exit_code == 0
    assert runner.invoke(app, ["optimize", str(kernel), "-n", "4", "--runs-dir", str(runs)]).exit_code == 0
    shown = runner.invoke(app, ["apply", "latest", "--runs-dir", str(runs), "--to", str(module)])
    assert shown.exit_code == 0, shown.output
    assert "+    row = remap_pid(tl.program_id(0), tl.num_programs(0), 8)" in shown.output
    assert module.read_text() == original  # nothing written without --write
    written = runner.invoke(app, ["apply", "latest", "--runs-dir", str(runs), "--to", str(module), "--write"])
    assert written.exit_code == 0, written.output
    assert "passes with the patched module (exit 0)" in written.output
    assert "remap_pid(tl.program_id(0)" in module.read_text()
    # a command that fails against the patch: the module is put back as it was
    module.write_text(original)
    launches = kernel.with_suffix(".launches.json")
    data = json.loads(launches.read_text())
    launches.write_text(json.dumps({**data, "command": ["python", "-c", "raise SystemExit(4)"]}))
    failed = runner.invoke(app, ["apply", "latest", "--runs-dir", str(runs), "--to", str(module), "--write"])
    assert failed.exit_code == 1
    assert "fails with the patched module (exit 4; its last lines above)" in " ".join(failed.output.split())
    assert module.read_text() == original
