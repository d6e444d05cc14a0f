"""optimize at a size where no remap can matter says so in one line, and report.md claims no headroom."""

from typer.testing import CliRunner

from swizzleperf.cli.main import app


def test_a_toy_size_is_said_to_be_one(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "300")
    result = CliRunner().invoke(app, ["optimize", "softmax", "--size", "tiny", "--hardware", "h100", "-n", "1",
                                      "--workers", "1", "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    line = ("size tiny: 15 programs fit in one wave of h100 (264 resident at once): they all run together on one L2, "
            "so no remap can change what it sees; size medium (16384 programs) is large enough")
    assert result.output.count(line) == 2  # when the run starts, and in its summary
    report = (next((tmp_path / "runs").iterdir()) / "report.md").read_text()
    assert "headroom" not in report and line[0].upper() + line[1:] in report
