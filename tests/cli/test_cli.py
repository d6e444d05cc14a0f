"""The command line as a user meets it: readable output, exit codes, files written."""

import json
from pathlib import Path

import pytest
from terminal_tables import cells, render
from typer.testing import CliRunner

from swizzleperf.cli.main import app, main
from swizzleperf.cli.render import spec_table
from swizzleperf.hardware.presets import PRESETS

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
XCD = ROOT / "tests" / "data" / "xcd_contiguous.py"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")


def test_hw_lists_presets_and_says_no_gpu():
    result = runner.invoke(app, ["hw"])
    assert result.exit_code == 0
    for name in ("mi300x", "mi325x", "mi355x", "h100", "h200"):
        assert name in result.output
    assert "No GPU detected" in result.output


def test_hw_json_is_a_valid_spec_file(tmp_path):
    result = runner.invoke(app, ["hw", "--show", "mi355x", "--json"])
    path = tmp_path / "spec.json"
    path.write_text(result.output)
    shown = runner.invoke(app, ["hw", "--show", str(path)])
    assert shown.exit_code == 0 and "32 CUs" in shown.output


def test_check_accepts_the_kernels_own_remap():
    result = runner.invoke(app, ["check", str(ROOT / "kernels/softmax.py"), "--seeds", "1"])
    assert result.exit_code == 0, result.output
    for stage in ("contract", "static", "bijectivity", "correctness"):
        assert stage in result.output
    assert "OK" in result.output


def test_check_rejects_a_non_bijective_remap_with_exit_1(tmp_path):
    naive = tmp_path / "naive.py"
    naive.write_text("@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n"
                     "    return (pid % NUM_XCDS) * (num_pids // NUM_XCDS) + pid // NUM_XCDS\n")
    result = runner.invoke(app, ["check", str(ROOT / "kernels/softmax.py"), "--remap", str(naive)])
    assert result.exit_code == 1
    assert "bijectivity" in result.output and "both map to" in result.output and "REJECTED" in result.output


def test_profile_prints_predictions_with_ceiling_and_writes_json_and_picture(tmp_path):
    out, png = tmp_path / "r.json", tmp_path / "tiles.png"
    result = runner.invoke(app, ["profile", str(ROOT / "kernels/softmax.py"), "--size", "small", "--hardware",
                                 "mi300x", "--remap", str(XCD), "--json", str(out), "--picture", str(png),
                                 "--set-index-spread"])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert "predicted (simulator)" in result.output and "L2 read hit" in result.output
    assert f"ceiling {data['original']['ceiling_pct']:.2f}%" in result.output
    assert data["original"]["simulated"] and data["candidate"]["source"] == "sim"
    # the candidate fetches every line once (only compulsory misses); an L1 keeps it below the ceiling,
    # whose denominator counts every read before the L1 filters some
    candidate = data["candidate"]
    assert candidate["accesses"] - candidate["hits"] == candidate["unique_lines"]
    assert candidate["hit_pct"] < candidate["ceiling_pct"] == candidate["achievable_pct"]
    assert data["original"]["hit_pct"] < candidate["hit_pct"]
    # why, in numbers: each die fetches each row once instead of every die fetching rows it shares
    per_die = {k: sum(d["unique_lines"] for d in data[k]["per_domain"]) for k in ("original", "candidate")}
    assert per_die["candidate"] == data["candidate"]["unique_lines"] < per_die["original"]
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "hash (preset)" in result.output and "xor_fold" in result.output


def test_errors_are_one_line_with_exit_2_and_debug_shows_the_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["swizzleperf", "check", str(tmp_path / "missing.py")])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().out
    assert "error:" in err and "does not exist" in err and "Traceback" not in err
    monkeypatch.setattr("sys.argv", ["swizzleperf", "--debug", "check", str(tmp_path / "missing.py")])
    from swizzleperf.errors import ContractError
    with pytest.raises(ContractError):
        main()


def test_a_kernel_without_a_hook_is_refused_showing_the_expected_shape(tmp_path):
    bare = tmp_path / "bare.py"
    bare.write_text("import triton\n\n@triton.jit\ndef k(x):\n    pass\n")
    result = runner.invoke(app, ["check", str(bare)])
    assert result.exit_code != 0
    assert "missing REMAP_HOOK" in str(result.exception) and "Expected shape" in str(result.exception)


def test_cache_info_and_clear_by_kernel(tmp_path, monkeypatch):
    cache = tmp_path / "traces"
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(cache))
    profiled = runner.invoke(app, ["profile", str(ROOT / "kernels/softmax.py"), "--size", "tiny", "--hardware", "mi300x"])
    assert profiled.exit_code == 0, profiled.output
    (cache / "other-x-128B-k.json").write_text(json.dumps({"kernel": "other"}))
    (cache / "other-x-128B-k.npz").write_bytes(b"x")
    info = runner.invoke(app, ["cache", "info"])
    assert "2 traces" in info.output and "other (1)" in info.output and "softmax (1)" in info.output
    cleared = runner.invoke(app, ["cache", "clear", "--kernel", "other"])
    assert "deleted 1 traces" in cleared.output
    assert sorted(p.suffix for p in cache.iterdir()) == [".json", ".runs"]  # softmax's trace stays
    assert "deleted 1 traces" in runner.invoke(app, ["cache", "clear"]).output
    assert list(cache.iterdir()) == []


def test_hw_table_fits_an_80_column_terminal_and_shows_every_field_when_wide():
    rows = list(PRESETS.items())
    for width, headers in ((80, ["name", "vendor", "dies", "CUs/die", "L2/die", "dispatch", "per CU"]),
                           (160, ["name", "vendor", "L2 domains", "CUs/domain", "L2/domain", "line", "ways",
                                  "dispatch", "resident/CU", "next level"])):
        lines = render(lambda columns: spec_table(rows, columns), width)
        assert max(len(line) for line in lines) <= width
        assert cells(lines, "name", "vendor") == headers
        mi300x = cells(lines, "mi300x")
        assert mi300x[:5] == ["mi300x", "amd", "8", "38", "4 MB"]
        assert ("round-robin" if width == 80 else "round-robin, chunk 1") in mi300x
