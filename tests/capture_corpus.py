"""The corpus of kernel packages (tests/fixtures/packages/) taken through capture, check, optimize and
apply --to: what tests/workflows/launch_capture/test_capture_corpus*.py run, split in two files so
that the test workers share them."""

import json
import re
import shutil
from pathlib import Path

from typer.testing import CliRunner

from swizzleperf.cli.main import app
from swizzleperf.kernel.contract import load_kernel

PACKAGES = Path(__file__).resolve().parent / "fixtures" / "packages"
runner = CliRunner()

# (project, --kernel, hook dimensionality, what the hook line says)
CORPUS = [
    ("rowops", None, 1, "tl.program_id(0) of rms_norm_fwd_kernel goes through swizzle()"),
    ("aliasfx", "_softmax_fwd_kernel", 1, "goes through swizzle()"),
    ("persistsoftmax", None, 1, "tl.program_id(0) of softmax_kernel goes through swizzle()"),
    ("tunedmm", None, 2, "derives (pid_m, pid_n) from one program id"),
    ("yamltune", None, 2, "reads program id axes 0, 1"),
    ("xcdgemm", "gemm_kernel", 2, "the kernel's own program-id mapping (remap_xcd, pid_grid) is inlined"),
    ("pidstyles", "_axpby_kernel", 1, "the kernel's own program-id mapping (get_pid, block_offsets) is inlined"),
    ("pidstyles", "_column_sum_kernel", 1, "tl.program_id(0) of _column_sum_kernel goes through swizzle()"),
    ("moeops", "grouped_gemm_kernel", 2, "reads program id axes 0, 1"),
    ("inplaceops", "_residual_add_kernel", 1, "goes through swizzle()"),
    ("inplaceops", "_add_bias_gelu_kernel", 2, "reads program id axes 0, 1"),
    ("pagedattn", None, 3, "reads program id axes 0, 1, 2"),
    ("bf16mm", None, 1, "goes through swizzle()"),  # its bf16 launches: CPU_CHECK_FLOAT32 (asserted below)
]


def _capture(project: str, kernel: str | None, out: Path, monkeypatch):
    monkeypatch.chdir(shutil.copytree(PACKAGES / project, out.parents[1] / project))  # apply --to writes into it
    args = ["capture", "-o", str(out), *(["--kernel", kernel] if kernel else []), "--",
            "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/"]
    return runner.invoke(app, args)


def ids(cases) -> list[str]:
    return [f"{c[0]}-{c[1] or 'only'}" for c in cases]


def run_case(project, kernel, ndim, how, tmp_path, monkeypatch) -> None:
    """capture -> check -> optimize -n 4 -> apply --to --write, on a copy of the project."""
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")
    out = tmp_path / "kernels" / "captured.py"
    result = _capture(project, kernel, out, monkeypatch)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert how in said
    assert "replayed: under its own hook the kernel file writes the same bits as" in said
    loaded = load_kernel(out)
    assert loaded.hook.ndim == ndim
    records = json.loads(out.with_suffix(".launches.json").read_text())["launches"]
    assert len(records) == len(loaded.sizes) >= 1
    half = any(p.get("dtype") == "bfloat16" for r in records for p in r["params"])
    assert loaded.cpu_float32 == half == (project == "bf16mm")
    checked = runner.invoke(app, ["check", str(out)])
    assert checked.exit_code == 0, checked.output
    assert "OK: the remap is safe to use with this kernel" in checked.output
    optimized = runner.invoke(app, ["optimize", str(out), "-n", "4", "--workers", "1", "--runs-dir",
                                    str(tmp_path / "runs")])  # in-process: the test workers already fill the cores
    assert optimized.exit_code == 0, optimized.output
    run_dir = next((tmp_path / "runs").iterdir())
    attempts = len((run_dir / "attempts.jsonl").read_text().splitlines())
    ended = json.loads((run_dir / "run.json").read_text())["status_detail"]
    said = " ".join(optimized.output.split())
    family, best, achievable = re.search(r"best: (.+?) \(iteration \d+\): .*?% -> ([\d.]+)%; .*achievable ([\d.]+)%",
                                         said).groups()
    # the baseline and four proposals, or fewer where the search stopped at the achievable bound or had no
    # order left that is new at this small size
    assert attempts == 5 or (attempts < 5 and (best == achievable or ended == "the search proposer has nothing new "
                                                                             "to try")), (attempts, ended)
    # the best remap written back into the project's own module, whose own test then passes
    module = records[0]["kernel"]["file"]
    applied = runner.invoke(app, ["apply", "latest", "--runs-dir", str(tmp_path / "runs"), "--to", module, "--write"])
    if family == "identity (original hook)":
        assert "the kernel's own remap is still the best; nothing to export" in str(applied.exception)
    else:
        assert applied.exit_code == 0, applied.output
        rerun = " ".join(applied.output.split())
        # bf16mm's bf16 tests fail on the interpreter (its tl.dot) with the patch and without it: said, patch kept
        assert ("passes with the patched module (exit 0)" in rerun if project != "bf16mm" else
                "fails as it did when it was captured (exit 1 both times" in rerun)
