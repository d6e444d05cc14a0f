"""What the L2 did with two SMs reading one buffer (H100, benchmarks/probe_pending.py, recorded)."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.sim.engine import DRAM_FETCHES, PROMOTED_MISSES, READ_HITS, READ_LOOKUPS, simulate
from swizzleperf.sim.trace.record import Trace

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "tests" / "fixtures" / "probes" / "probe-pending-h100.json"
_spec = importlib.util.spec_from_file_location("probe_pending", ROOT / "benchmarks" / "probe_pending.py")
probe = sys.modules["probe_pending"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)


def _mean(case: str, metric: str) -> float:
    rows = [r for r in json.loads(RECORD.read_text())["rows"] if r["case"] == case]
    assert len(rows) == probe.REPEATS
    return sum(r[metric] for r in rows) / len(rows)


def test_a_one_sector_miss_is_two_sector_misses_and_64_bytes_from_dram():
    lines = 8192
    for sectors, misses, dram in ((1, 2 * lines, 2 * lines), (4, 4 * lines, 4 * lines)):
        case = f"same side, alone, {sectors} sector{'s' * (sectors > 1)}/line"
        assert _mean(case, "l1tex__m_xbar2l1tex_read_sectors_mem_lg_op_ld.sum") == sectors * lines  # requested
        assert _mean(case, probe.TEX_MISS) == misses
        assert _mean(case, "dram__bytes_read.sum") / 32 == pytest.approx(dram, rel=0.02)
        # half of a side's misses cross to the other partition: lines have a home, hashed
        far = _mean(case, probe.FAR_HIT) + _mean(case, probe.FAR_MISS)
        assert far == pytest.approx(misses / 2, rel=0.05)


def test_a_same_side_reader_arriving_during_the_fill_does_not_cross_to_the_far_partition():
    """The lead the fidelity section named (copies usable only once filled) is refuted: together or one after
    the other, a second SM of the same side makes the same far lookups and misses, none of its own."""
    for sectors in ("1 sector", "4 sectors"):
        staggered, together = (f"same side, {how}, {sectors}/line" for how in ("staggered", "together"))
        for metric in (probe.FAR_HIT, probe.FAR_MISS, probe.TEX_MISS):
            assert _mean(together, metric) == pytest.approx(_mean(staggered, metric), rel=0.05, abs=64)
        # while readers on opposite sides race: more misses when they read together than one after the other
        opposite = (f"opposite sides, {how}, {sectors}/line" for how in ("staggered", "together"))
        assert _mean(next(opposite), probe.TEX_MISS) < 0.95 * _mean(next(opposite), probe.TEX_MISS)


def test_the_summary_reads_the_record(capsys):
    probe.summarize(json.loads(RECORD.read_text()))
    out = capsys.readouterr().out
    assert "same side, together, 1 sector/line" in out and len(out.splitlines()) == 2 + len(probe.CASES)


def test_the_fetch_is_the_drivers_l2_fetch_granularity_limit():
    """The same one-sector reads under CU_LIMIT_MAX_L2_FETCH_GRANULARITY set to 32, 64 (the default) and 128 B:
    a miss fetches exactly the limit, so the presets' l2_fetch_bytes is that limit's default."""
    record = json.loads((ROOT / "tests" / "fixtures" / "probes" / "probe-fetch-granularity-h100.json").read_text())
    assert record["default_limit"] == 64 and record["effective_limits"] == [32, 64, 128]
    for limit in (32, 64, 128):
        rows = [r for r in record["rows"] if r["limit"] == limit]
        misses = sum(r[probe.TEX_MISS] for r in rows) / len(rows) / record["lines"]
        dram = sum(r["dram__bytes_read.sum"] for r in rows) / len(rows) / record["lines"]
        assert misses == limit // 32 and dram == pytest.approx(limit, rel=0.05)


def test_a_far_hit_leaves_a_copy_on_the_readers_side_as_modelled():
    """probe_pending.py --copies (H100, tests/fixtures/probes/probe-copies-h100.json): SM A (side 0) reads every
    sector of a fresh 1 MB buffer, then SM B (side 1), then SM C (side 1, another TPC). C's 32768 sectors are all
    near hits: B's far hits left copies on side 1, as the simulator's partitions do (`replay._l2_access`)."""
    record = json.loads((ROOT / "tests" / "fixtures" / "probes" / "probe-copies-h100.json").read_text())
    requested = "l1tex__m_xbar2l1tex_read_sectors_mem_lg_op_ld.sum"
    for repeat in range(probe.REPEATS):
        with_c, without_c = (next(r for r in record["rows"] if r["repeat"] == repeat and r["case"] == case)
                             for case in ("A (side 0), then B, then C (side 1)", "A (side 0), then B (side 1)"))
        assert with_c[requested] - without_c[requested] == 32768  # C ran and read the whole buffer
        for metric in (probe.TEX_MISS, probe.FAR_HIT, probe.FAR_MISS):
            assert with_c[metric] == without_c[metric], metric  # C made no misses and no far lookups
        assert with_c[probe.TEX_HIT] - without_c[probe.TEX_HIT] == 32768


def test_a_halo_read_and_a_whole_line_read_count_as_the_model_counts_them():
    """probe_pending.py --halo (H100, tests/fixtures/probes/probe-halo-h100.json): SM A reads the last sector of each
    of 8192 fresh lines (a stencil's halo read), SM B all four, one after the other in either order or together.
    The h100 preset's partitions, 64 B fetch and ncu accounting, run in the same order on the same SMs, give the
    same lookups, misses, far hits and DRAM sectors to 3 % in every staggered case: a partial block read first or
    second costs what the model says, and on opposite sides the order does not change the misses or far hits (the
    GPU's 'together' counts are the staggered ones)."""
    record = json.loads((ROOT / "tests" / "fixtures" / "probes" / "probe-halo-h100.json").read_text())
    lines = record["lines"]
    hw = PRESETS["h100"].model_copy(update={"l1_bytes_per_cu": 0})  # the probe's loads bypass the L1 (.cg)
    for name, pair, mode in probe.HALO_CASES:
        rows = [r for r in record["rows"] if r["case"] == name]
        assert len(rows) == probe.REPEATS
        measured = {m: sum(r[m] for r in rows) / len(rows) for m in (probe.TEX_HIT, probe.TEX_MISS, probe.FAR_HIT)}
        measured["dram"] = sum(r["lts__d_sectors_fill_device.sum"] for r in rows) / len(rows)
        if mode == 2:  # together: the staggered counts, either order
            other = next(n for n, p, m in probe.HALO_CASES if p == pair and m == 1)
            staggered = [r for r in record["rows"] if r["case"] == other]
            for metric in (probe.TEX_MISS, probe.FAR_HIT):
                expected = sum(r[metric] for r in staggered) / len(staggered)
                assert measured[metric] == pytest.approx(expected, rel=0.03, abs=64), (name, metric)
            continue
        a, b = record["sms"][pair]
        first, second = ((a, 0b1000), (b, 0b1111)) if mode == 1 else ((b, 0b1111), (a, 0b1000))
        result = _two_readers(lines, (first[1], second[1]), (first[0], second[0]), hw)
        lookups = result.total(READ_LOOKUPS) + result.total(PROMOTED_MISSES)
        misses = lookups - result.total(READ_HITS)
        far_hits = misses - result.total(DRAM_FETCHES)
        assert lookups == pytest.approx(measured[probe.TEX_HIT] + measured[probe.TEX_MISS], rel=0.03), name
        assert misses == pytest.approx(measured[probe.TEX_MISS], rel=0.03), name
        assert far_hits == pytest.approx(measured[probe.FAR_HIT], rel=0.06, abs=400), name
        assert result.total(DRAM_FETCHES) == pytest.approx(measured["dram"], rel=0.03), name


def _two_readers(lines: int, masks: tuple[int, int], sms: tuple[int, int], hw):
    """Two programs, each one load of the same `lines` lines with its own sector mask, run one after the other
    (each load is one round) on the given SMs."""
    trace = Trace(lines=np.tile(np.arange(lines, dtype=np.int64), 2), is_store=np.zeros(2 * lines, bool),
                  event_offsets=np.array([0, lines, 2 * lines], np.int64),
                  program_offsets=np.array([0, 1, 2], np.int64), line_bytes=128,
                  sectors=np.repeat(np.array(masks, np.uint8), lines), sector_bytes=32)
    return simulate(trace, np.arange(2), hw, recorded_cus=np.array(sms))
