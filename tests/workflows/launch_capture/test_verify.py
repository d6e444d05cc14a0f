"""Before capture says done, the kernel file replays the recorded launches under its identity hook and
must write the bits the user's kernel wrote; a kernel file that does not is named, size and output."""

from pathlib import Path

from typer.testing import CliRunner

from swizzleperf.cli.main import app
from swizzleperf.workflows.launch_capture import select, verify

PACKAGES = Path(__file__).resolve().parents[2] / "fixtures" / "packages"


def test_a_kernel_file_that_drifts_from_the_kernel_is_caught(tmp_path, monkeypatch):
    monkeypatch.chdir(PACKAGES / "rowops")
    out = tmp_path / "rms.py"
    result = CliRunner().invoke(app, ["capture", "-o", str(out), "--", "python", "-m", "pytest", "-q", "-p",
                                      "no:cacheprovider", "tests/"])
    assert result.exit_code == 0, result.output
    assert ("replayed: under its own hook the kernel file writes the same bits as rms_norm_fwd_kernel on 3 "
            "recorded launches") in " ".join(result.output.split())
    records = select.read_records(out.with_suffix(".launches.json")).records
    sizes = ["n_cols48", "n_cols64", "n_cols80"]
    assert verify.verify(out, records, sizes, "cpu") == (3, [])
    text = out.read_text()
    out.write_text(text.replace("y = x * rstd * w", "y = x * rstd * w * 1.0001"))  # no longer the kernel
    compared, problems = verify.verify(out, records, sizes, "cpu")
    assert compared == 3
    assert problems == [f"size {s}: output Y differs from what the kernel wrote" for s in sizes]


def test_add_puts_more_launches_in_the_kernel_file_and_gpu_ones_are_not_compared_here(tmp_path, monkeypatch):
    monkeypatch.chdir(PACKAGES / "rowops")
    out, runner = tmp_path / "rms.py", CliRunner()
    test = ["--", "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/"]
    first = runner.invoke(app, ["capture", "-o", str(out), *test, "-k", "strided"])
    assert first.exit_code == 0, first.output
    added = runner.invoke(app, ["capture", "--add", "-o", str(out), *test, "-k", "matches"])
    assert added.exit_code == 0, added.output
    said = " ".join(added.output.split())
    assert "from 3 launches of rms_norm_fwd_kernel (sizes: n_cols80, n_cols48, n_cols64)" in said
    assert "writes the same bits as rms_norm_fwd_kernel on 3 recorded launches" in said
    records = select.read_records(out.with_suffix(".launches.json")).records
    on_gpu = [r.model_copy(update={"device": "NVIDIA H200"}) for r in records]  # bits differ across devices
    assert verify.verify(out, on_gpu, ["n_cols80", "n_cols48", "n_cols64"], "cpu") == (0, [])
    refused = runner.invoke(app, ["capture", "--add", "-o", str(tmp_path / "none.py"), *test])
    assert "--add needs -o naming a kernel file that capture wrote" in str(refused.exception)
