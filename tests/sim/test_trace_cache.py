"""The trace cache's size bound: least recently used traces go first; `swizzleperf cache` shows it."""

import json
import os

from typer.testing import CliRunner

from swizzleperf.cli.main import app
from swizzleperf.sim.trace import cache as trace_cache


def fake_trace(root, name: str, size: int, used: float, kernel: str = "k"):
    data = root / f"{name}.runs"
    data.write_bytes(b"x" * size)
    meta = data.with_suffix(".json")
    meta.write_text(json.dumps({"kernel": kernel, "size_name": name}))
    os.utime(data, (used, used))
    return data


def test_eviction_removes_least_recently_used_first_and_never_the_new_one(tmp_path):
    paths = {name: fake_trace(tmp_path, name, 1000, used) for name, used in
             (("old", 100.0), ("mid", 200.0), ("new", 300.0))}
    trace_cache.touch(paths["old"])  # used just now: the most recent
    meta = len(json.dumps({"kernel": "k", "size_name": "old"}))
    removed = trace_cache.evict(tmp_path, keep=paths["new"], bound=2 * (1000 + meta))
    assert [e.data.name for e in removed] == ["mid.runs"]
    assert sorted(p.name for p in tmp_path.glob("*.runs")) == ["new.runs", "old.runs"]
    # a bound below the kept trace alone: everything else goes, the kept one stays
    assert [e.data.name for e in trace_cache.evict(tmp_path, keep=paths["new"], bound=10)] == ["old.runs"]
    assert [p.name for p in tmp_path.glob("*")] in (["new.runs", "new.json"], ["new.json", "new.runs"])


def test_cache_command_shows_entries_total_and_bound_and_clears(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path))
    monkeypatch.setenv("SWIZZLEPERF_CACHE_MAX_GB", "0.5")
    fake_trace(tmp_path, "a", 3 * 2**20, 100.0, kernel="softmax")
    fake_trace(tmp_path, "b", 2**20, 200.0, kernel="gemm")
    runner = CliRunner()
    shown = runner.invoke(app, ["cache"])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert "2 traces, 4.0 MiB of 0.5 GiB" in lines[0]
    assert "gemm (1), softmax (1)" in lines[1]
    assert "gemm b" in lines[2] and "softmax a" in lines[3]  # most recently used first, with sizes
    assert "1.0 MiB" in lines[2] and "3.0 MiB" in lines[3]
    assert runner.invoke(app, ["cache", "info"]).output == shown.output
    assert "deleted 1 traces" in runner.invoke(app, ["cache", "clear", "--kernel", "gemm"]).output
    assert [p.name for p in tmp_path.glob("*.runs")] == ["a.runs"]


def test_a_trace_cached_before_compact_traces_is_converted_not_captured_again(tmp_path, monkeypatch):
    import numpy as np
    import pytest

    from swizzleperf.kernel.contract import load_kernel
    from swizzleperf.sim.capture import trace_capture as capture
    from swizzleperf.sim.trace.record import Trace, TraceMeta

    kernel = load_kernel(capture.Path(__file__).resolve().parents[2] / "kernels" / "softmax.py")
    path = capture.cached_trace_path(kernel, "tiny", 128, tmp_path)
    trace = Trace(lines=np.array([1, 2, 3, 9], np.int64), is_store=np.array([0, 0, 0, 1], bool),
                  event_offsets=np.array([0, 3, 4]), program_offsets=np.array([0, 1, 2]), line_bytes=128)
    meta = TraceMeta(kernel="softmax", kernel_sha256=kernel.sha256, size_name="tiny", size={}, grid=(2,),
                     launch_grid=(2, 1, 1), line_bytes=128, mode="fast", requested_mode="fast", num_programs=2,
                     num_events=2, num_accesses=4, seconds=1.0, versions={})
    trace.save(path.with_suffix(".npz"), meta)

    def no_child(*args):
        pytest.fail("a legacy trace must be converted, not captured again")
    monkeypatch.setattr(capture, "_run_capture_child", no_child)
    stored = capture.capture_trace(kernel, "tiny", cache_dir=tmp_path)
    assert stored.equals(trace) and path.exists() and not path.with_suffix(".npz").exists()
    assert [e.data for e in trace_cache.entries(tmp_path)] == [path]
