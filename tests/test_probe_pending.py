"""What the L2 did with two SMs reading one buffer (H100, benchmarks/probe_pending.py, recorded)."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
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
