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
