"""A run's report and tiles.png: the achievable bound's grouping appears only where the best remap misses it."""

import struct
from datetime import datetime, timezone
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.loop import artifacts, plots
from swizzleperf.loop.history import RANKING_RULE, History
from swizzleperf.loop.rundir import RunDir
from swizzleperf.records.attempt import Attempt, StageResult
from swizzleperf.records.report import BottleneckReport
from swizzleperf.records.run import KernelRef
from swizzleperf.remaps.placement import partition_sentence

ROOT = Path(__file__).resolve().parents[2]
MI300X = PRESETS["mi300x"]
REVERSED = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return num_pids - 1 - pid\n"
PARTITION = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 7, 0])  # softmax "tiny": 15 programs
PANEL_PX = 572  # plot_tile_map: 5.2 inches at 110 dpi per panel


@pytest.fixture(scope="module")
def softmax():
    return load_kernel(ROOT / "kernels" / "softmax.py")


def _attempt(iteration: int, source: str, hits: int) -> Attempt:
    report = BottleneckReport(
        source="sim", hardware="mi300x", kernel="softmax", size="tiny", hit_pct=100 * hits / 400, ceiling_pct=90.0,
        achievable_pct=82.0, achievable_fetches=80, accesses=400, hits=hits, unique_lines=40,
        achievable_grouping=partition_sentence(PARTITION, (15,), 8))
    return Attempt(iteration=iteration, origin="baseline" if iteration == 0 else "search", family=f"f{iteration}",
                   source=source, diff="", stages=[StageResult(stage="profile", ok=True, detail="ok", seconds=0.0)],
                   report=report, started_at=datetime.now(timezone.utc), seconds=0.0)


def _run(tmp_path: Path, softmax, best_hits: int, hardware=MI300X) -> RunDir:
    run = RunDir.create(tmp_path, dict(
        kernel=KernelRef(path=str(softmax.path), name="softmax", sha256=softmax.sha256), size="tiny",
        hardware=hardware, hardware_reason="test", profiler="sim", profiler_reason="test", proposer="search", seed=0,
        iterations=1, patience=1, ranking_rule=RANKING_RULE, ceiling_pct=90.0))
    history = History([_attempt(0, softmax.hook_source, 200), _attempt(1, REVERSED, best_hits)])
    artifacts.write_all(run, softmax, history, achievable=PARTITION)
    return run


def _png_width(path: Path) -> int:
    return struct.unpack(">I", path.read_bytes()[16:20])[0]  # the IHDR chunk's width


def test_a_remap_short_of_the_bound_gets_the_partition_panel_and_sentence(tmp_path, softmax):
    run = _run(tmp_path, softmax, best_hits=300)  # 100 fetches against the bound's 80
    assert _png_width(run.path / "tiles.png") == 3 * PANEL_PX
    report = (run.path / "report.md").read_text()
    assert ("The achievable bound's assignment puts logical programs 0-1, 14 on die 0 of 8 (3 of 15 programs): "
            "the best remap fetches 100 against that assignment's 80.") in report
    assert report.index("Bounds:") < report.index("The achievable bound's") < report.index("Where the best remap")


def test_a_remap_at_the_bound_gets_neither(tmp_path, softmax):
    run = _run(tmp_path, softmax, best_hits=320)  # 80 fetches: the bound's, though an L1 keeps its rate at 80%
    assert _png_width(run.path / "tiles.png") == 2 * PANEL_PX
    report = (run.path / "report.md").read_text()
    assert "The best remap already reaches the achievable bound." in report
    assert "assignment puts" not in report


def test_a_size_below_two_waves_says_so_and_names_a_larger_size(tmp_path, softmax):
    report = (_run(tmp_path, softmax, best_hits=300).path / "report.md").read_text()
    assert "points below the read-hit ceiling" in report
    assert ("Size tiny: 15 programs are fewer than two waves of mi300x (1216): a remap can choose each program's "
            "die, hardly when it runs; size medium (16384 programs) is large enough.") in report


def test_a_size_where_no_remap_can_matter_claims_no_headroom(tmp_path, softmax):
    sixteen_dies = MI300X.model_copy(update={"num_domains": 16})
    report = (_run(tmp_path, softmax, best_hits=300, hardware=sixteen_dies).path / "report.md").read_text()
    assert "headroom" not in report
    assert "Size tiny: 15 programs on 16 dies: each die runs at most one, so no remap can change which programs " \
           "share an L2" in report


def test_the_partition_panel_is_drawn_at_full_colour_from_logical_to_die():
    grid, slot_domain = (2, 8), np.arange(16) % 8
    fig = plots.tile_map_figure([("identity", np.arange(16)), plots.DiePanel("bound", np.arange(16) // 2)],
                                slot_domain, grid, 8)
    launch, partition = fig.axes
    cmap = [plt.get_cmap("tab10")(i) for i in range(8)]
    drawn = partition.images[0].get_array()
    assert drawn.shape[:2] == grid and "full colour" in partition.get_title()
    assert all(np.allclose(drawn[r, c], cmap[(r * 8 + c) // 2]) for r in range(2) for c in range(8))
    faded = launch.images[0].get_array()
    assert np.allclose(faded[0, 0], cmap[0]) and not np.allclose(faded[1, 0], cmap[0])  # die 0, launched later


def _timed(attempt: Attempt, median: float, p20: float, p80: float, source: str = "ncu") -> Attempt:
    from swizzleperf.records.report import Timing
    report = attempt.report.model_copy(update={"source": source, "timing": Timing(
        median_ms=median, p20_ms=p20, p80_ms=p80, repeats=50, l2_state="flushed")})
    return attempt.model_copy(update={"report": report})


def test_a_measured_run_shows_each_attempts_time_and_speedup(tmp_path, softmax):
    from swizzleperf.cli.render import attempts_table
    from swizzleperf.loop.history import time_cells
    base = _timed(_attempt(0, softmax.hook_source, 200), 2.0, 1.98, 2.02)
    faster = _timed(_attempt(1, REVERSED, 300), 1.6, 1.58, 1.62)
    same = _timed(_attempt(2, REVERSED, 210), 1.99, 1.95, 2.03)
    assert time_cells(faster, base) == ("1.6000", "1.5800-1.6200", "1.250x")
    assert time_cells(same, base) == ("1.9900", "1.9500-2.0300", "1.005x (within noise)")
    assert time_cells(base, base) == ("2.0000", "1.9800-2.0200", "")
    table = attempts_table(History([base, faster, same]), "t")
    assert [c.header for c in table.columns][4:7] == ["median ms", "p20-p80 ms", "speedup"]
    run = RunDir.create(tmp_path, dict(
        kernel=KernelRef(path=str(softmax.path), name="softmax", sha256=softmax.sha256), size="tiny",
        hardware=MI300X, hardware_reason="test", profiler="ncu", profiler_reason="test", proposer="search", seed=0,
        iterations=1, patience=1, ranking_rule=RANKING_RULE))
    artifacts.write_report(run, History([base, faster, same]), [])
    report = (run.path / "report.md").read_text()
    assert "| # | origin | family | L2 read hit % | median ms | p20-p80 ms | speedup | seconds | verdict |" in report
    assert "| 1 | search | `f1` | 75.00 | 1.6000 | 1.5800-1.6200 | 1.250x | 0.0 |" in report
    assert "| 2 | search | `f2` | 52.50 | 1.9900 | 1.9500-2.0300 | 1.005x (within noise) | 0.0 |" in report


def test_the_headline_leads_with_the_ranked_quantity(tmp_path, softmax):
    from swizzleperf.loop.history import ranked_headline
    base, best = _attempt(0, softmax.hook_source, 200), _attempt(1, REVERSED, 300)
    assert ranked_headline(best, base) == ("L2 read misses 200 -> 100 (0.50x the kernel's own order), predicted "
                                           "(simulator); L2 read hit rate 50.00% -> 75.00%")
    report = (_run(tmp_path, softmax, 300).path / "report.md").read_text()
    assert "**Best: `f1` (iteration 1) — L2 read misses 200 -> 100 (0.50x the kernel's own order)" in report


def test_a_measured_gain_within_noise_recommends_the_kernels_own_order(tmp_path, softmax):
    base = _attempt(0, softmax.hook_source, 200).model_copy()
    base = base.model_copy(update={"report": base.report.model_copy(update={"source": "ncu"})})
    best = _attempt(1, REVERSED, 201)
    best = best.model_copy(update={"report": best.report.model_copy(update={"source": "ncu"})})
    run = RunDir.create(tmp_path, dict(
        kernel=KernelRef(path=str(softmax.path), name="softmax", sha256=softmax.sha256), size="tiny",
        hardware=MI300X, hardware_reason="test", profiler="ncu", profiler_reason="test", proposer="search", seed=0,
        iterations=1, patience=1, ranking_rule=RANKING_RULE))
    artifacts.write_report(run, History([base, best]), [])
    assert "Recommendation: keep the kernel's own order." in (run.path / "report.md").read_text()


def test_a_best_remap_at_the_compulsory_misses_claims_no_headroom(tmp_path, softmax):
    """360 of 400 reads hit: the L2 fetched 40 sectors, the 40 compulsory ones; the 10 points up to the read-hit
    ceiling (90 %) are reads the L1 absorbs, not something another order could win."""
    report = (_run(tmp_path, softmax, 360).path / "report.md").read_text()
    assert "no headroom: it fetches only the compulsory misses" in report and "points below the read-hit ceiling" not in report
    assert "read-hit ceiling 90.00%" in report


def test_a_remap_that_beats_the_partitioners_assignment_says_so():
    from swizzleperf.records.report import bounds_text
    report = _attempt(1, REVERSED, 330).report  # fetches 70, the assignment 80
    assert "fewer than the partitioner's assignment (80): the achievable figure is the best assignment found, and " \
           "this remap beat it" in bounds_text(report)
    assert "beat it" not in bounds_text(_attempt(1, REVERSED, 300).report)  # fetches 100


@pytest.mark.parametrize("first_touch,said", [
    (45, "Of the 20 fetches above that assignment, 10 are its assignment (its dies first-touch 90) and 10 capacity "
         "(fetched again after an eviction, which no assignment removes)."),
    (35, "Its assignment is as good as that one (its dies first-touch 70, that assignment fetches 80): the 20 fetches "
         "above are capacity, lines fetched again after an eviction, which no other remap's assignment removes."),
])
def test_what_is_left_above_the_achievable_bound_is_split_into_assignment_and_capacity(first_touch, said):
    from swizzleperf.records.report import DomainStats
    report = _attempt(1, REVERSED, 300).report.model_copy(update={"per_domain": [
        DomainStats(domain=d, accesses=200, hits=150, unique_lines=first_touch) for d in (0, 1)]})
    assert artifacts.achievable_sentence(report, 8).endswith(said)  # 100 fetched against the assignment's 80
