"""The achievable bound of a trace: read-only sectors as nets, the fallbacks that keep it fast, and the
assignment the simulator profiler keeps (die per logical program)."""

from pathlib import Path

import numpy as np
import pytest

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.profilers.sim import SimProfiler
from swizzleperf.sim.bounds import achievable as bound_module
from swizzleperf.sim.bounds.achievable import Achievable, achievable_bound, assignment_fetches, read_only_nets
from swizzleperf.sim.engine import prepare
from swizzleperf.sim.trace.record import Trace

MI300X = PRESETS["mi300x"]


def _rows_trace(rows: int, chunks: int, lines_per_row: int) -> Trace:
    """`rows * chunks` programs; the chunks of a row read the row's lines, then each writes one line."""
    lines, stores, events = [], [], [0]
    for p in range(rows * chunks):
        row = p // chunks
        lines += list(range(row * lines_per_row, (row + 1) * lines_per_row)) + [10**6 + p]
        stores += [False] * lines_per_row + [True]
        events += [events[-1] + lines_per_row, events[-1] + lines_per_row + 1]
    return Trace(lines=np.array(lines, np.int64), is_store=np.array(stores), event_offsets=np.array(events),
                 program_offsets=np.arange(0, 2 * rows * chunks + 1, 2), line_bytes=128)


def test_written_sectors_are_not_nets_and_each_program_reads_its_row():
    prepared = prepare(_rows_trace(rows=2, chunks=3, lines_per_row=4))
    offsets, nets, num_nets = read_only_nets(prepared, 1)
    assert offsets.tolist() == [0, 4, 8, 12, 16, 20, 24]
    assert [sorted(nets[offsets[p]:offsets[p + 1]].tolist()) for p in (0, 5)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert num_nets == prepared.unique_lines


def test_fetch_counts_by_hand():
    offsets, nets = np.array([0, 2, 4, 6]), np.array([0, 1, 0, 1, 1, 2])  # three programs
    assert assignment_fetches(offsets, nets, np.array([0, 0, 0]), 1) == 3
    assert assignment_fetches(offsets, nets, np.array([0, 1, 0]), 2) == 5  # nets 0 and 1 on both dies


def test_grouping_rows_on_dies_reaches_the_single_cache_minimum():
    pytest.importorskip("mtkahypar")
    # 16 rows of 8 chunks on 8 dies: round-robin spreads every row over all dies; whole rows per die
    # (two rows each) fetch every line once
    prepared = prepare(_rows_trace(rows=16, chunks=8, lines_per_row=4))
    found = achievable_bound(prepared, MI300X)
    assert found.min_fetches == 64 and found.fetches == 64 and "mtkahypar" in found.how
    assert np.bincount(found.part, minlength=8).tolist() == [16] * 8
    reads = 16 * 8 * 4
    assert found.hit_pct == pytest.approx(100 * (reads - 64) / reads)


def test_large_hypergraphs_fall_back_to_the_dispatchers_assignment():
    prepared = prepare(_rows_trace(rows=16, chunks=8, lines_per_row=4))
    found = achievable_bound(prepared, MI300X, max_pins=100)
    assert found.fetches == 16 * 4 * 8 and "more than the partitioner's budget of 100" in found.how


def test_the_profiler_keeps_the_assignment_per_logical_program_and_never_recomputes_it(tmp_path, monkeypatch):
    """The partitioner's vertices are trace programs; under a reversing original hook trace program p ran
    logical 255 - p, so the die of logical l is part[255 - l]."""
    text = (Path(__file__).resolve().parents[2] / "kernels/softmax.py").read_text()
    text = text.replace("    return pid\n", "    return num_pids - 1 - pid\n", 1)
    (tmp_path / "softmax.py").write_text(text)
    kernel = load_kernel(tmp_path / "softmax.py")
    assert kernel.grid("small") == (256,)
    part = np.arange(256) // 3 % 8  # by trace program: not symmetric under the reversal
    calls = []

    def fake_bound(prepared, hw):
        calls.append(prepared.num_programs)
        return Achievable(hit_pct=90.0, fetches=123, min_fetches=100, part=part, how="by hand")

    monkeypatch.setattr(bound_module, "achievable_bound", fake_bound)
    profiler = SimProfiler(MI300X)
    profiler._traces[(kernel.sha256, "small")] = _rows_trace(rows=64, chunks=4, lines_per_row=2)
    assert profiler.achievable_assignment(kernel, "small") is None  # not computed yet, and not computed by asking
    assert calls == []
    assert profiler.achievable(kernel, "small", None)[0] == 90.0
    profiler.achievable(kernel, "small", None)
    assignment = profiler.achievable_assignment(kernel, "small")
    assert calls == [256]
    assert assignment.tolist() == part[::-1].tolist()
    one_l2 = SimProfiler(PRESETS["h100"])
    one_l2._traces[(kernel.sha256, "small")] = profiler._traces[(kernel.sha256, "small")]
    one_l2.achievable(kernel, "small", 95.0)
    assert one_l2.achievable_assignment(kernel, "small") is None and calls == [256]
