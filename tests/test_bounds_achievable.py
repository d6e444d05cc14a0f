"""The achievable bound of a trace: read-only sectors as nets, and the fallbacks that keep it fast."""

import numpy as np
import pytest

from swizzleperf.bounds.achievable import achievable_bound, assignment_fetches, read_only_nets
from swizzleperf.hardware import PRESETS
from swizzleperf.sim.engine import prepare
from swizzleperf.sim.trace import Trace

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
