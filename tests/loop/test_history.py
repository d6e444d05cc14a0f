"""The ranking rule: read hit rate first, but never a remap measurably slower than the kernel's own."""

from datetime import datetime, timezone

from swizzleperf.loop.history import RANKING_RULE, History, within_noise
from swizzleperf.records.attempt import Attempt, StageResult
from swizzleperf.records.report import BottleneckReport, Timing


def _attempt(iteration: int, hit_pct: float, times: tuple[float, float, float] | None, origin="search",
             lookups: int | None = None) -> Attempt:
    timing = None if times is None else Timing(median_ms=times[1], p20_ms=times[0], p80_ms=times[2], repeats=100,
                                               l2_state="flushed")
    hits = None if lookups is None else round(lookups * hit_pct / 100)
    report = BottleneckReport(source="ncu", hardware="h100", kernel="k", size="s", hit_pct=hit_pct, timing=timing,
                              accesses=lookups, hits=hits)
    return Attempt(iteration=iteration, origin=origin, family=f"f{iteration}", source="src", diff="",
                   stages=[StageResult(stage="profile", ok=True, detail="ok", seconds=0.0)], report=report,
                   started_at=datetime.now(timezone.utc), seconds=0.0)


def test_a_measurably_slower_remap_never_outranks_the_kernels_own():
    # attention at its default size on an H100: head-first +1.3 points of hit rate but 0.990x time
    baseline = _attempt(0, 91.43, (0.985, 1.000, 1.004), origin="baseline")
    slower = _attempt(1, 92.70, (1.006, 1.010, 1.015))
    history = History([baseline, slower])
    assert history.best() is baseline
    assert [a.iteration for a in history.ranked()] == [0, 1]
    assert "measurably slower" in RANKING_RULE and "read hit rate" in RANKING_RULE


def test_fewer_fetches_win_over_a_higher_hit_rate_of_more_lookups():
    # spmv on mi300x (sim): XCD-contiguous lets each CU's L1 catch more, so the L2 sees half the reads
    # at a lower hit rate (60.33 % of 1,775,772) but fetches half as much as the identity (64.46 % of
    # 3,734,212)
    identity = _attempt(0, 64.46, None, origin="baseline", lookups=3_734_212)
    contiguous = _attempt(1, 60.33, None, lookups=1_775_772)
    assert History([identity, contiguous]).best() is contiguous
    assert "fewer first" in RANKING_RULE


def test_within_the_spread_the_higher_hit_rate_wins_and_untimed_runs_rank_by_hit_rate():
    baseline = _attempt(0, 60.0, (1.00, 1.02, 1.04), origin="baseline")
    overlapping = _attempt(1, 84.0, (1.03, 1.05, 1.07))  # its p20 is below the baseline's p80
    faster = _attempt(2, 70.0, (0.90, 0.91, 0.93))
    assert [a.iteration for a in History([baseline, overlapping, faster]).ranked()] == [1, 2, 0]
    untimed = History([_attempt(0, 10.0, None, origin="baseline"), _attempt(1, 30.0, None), _attempt(2, 20.0, None)])
    assert [a.iteration for a in untimed.ranked()] == [1, 2, 0]


def test_the_grouping_sentence_names_what_die_0_runs():
    import numpy as np

    from swizzleperf.hardware.presets import PRESETS
    from swizzleperf.loop.artifacts import grouping_sentence

    # XCD-contiguous on 8 dies: slot w -> logical (w % 8) * 4 + w // 8, so die 0 runs logical 0-3
    slots = np.arange(32)
    contiguous = (slots % 8) * 4 + slots // 8
    assert grouping_sentence(contiguous, (32,), PRESETS["mi300x"]) == "die 0 of 8 runs logical programs 0-3"
    assert grouping_sentence(slots, (4, 8), PRESETS["mi300x"]) == (
        "die 0 of 8 runs logical programs 0, 8, 16, 24 (tile rows 0-3, columns 0-0 of 4 x 8)")
    # one L2: the first wave (132 SMs x 2) of a reversed order
    sentence = grouping_sentence(np.arange(300)[::-1].copy(), (300,), PRESETS["h100"])
    assert sentence == "the first wave (264 programs resident at once) runs logical programs 36-299"


def test_bounds_text_says_how_close_the_fetches_are_to_the_minimum():
    from swizzleperf.records.report import bounds_text

    report = BottleneckReport(source="sim", hardware="mi300x", kernel="k", size="s", hit_pct=50.0, ceiling_pct=75.0,
                              achievable_pct=70.0, accesses=400, hits=200, unique_lines=100)
    assert bounds_text(report) == (
        "read-hit ceiling 75.00% (every read-only sector fetched once, every read reaching the L2); achievable 70.00% "
        "(the best balanced assignment of programs to dies found, caches big enough for every first touch); "
        "the L2 fetched 200 vs 100 compulsory (2.00x)")


def test_the_partition_sentence_names_what_the_bound_puts_on_die_0():
    import numpy as np

    from swizzleperf.remaps.placement import partition_sentence

    # 4 x 8 tiles on 8 dies in 2 x 2 blocks: die (row // 2) * 4 + col // 2, so die 0 has tiles (0-1, 0-1)
    rows, cols = np.divmod(np.arange(32), 8)
    blocks = (rows // 2) * 4 + cols // 2
    assert partition_sentence(blocks, (4, 8), 8) == (
        "The achievable bound's assignment puts logical programs 0-1, 8-9 on die 0 of 8 "
        "(4 of 32 programs; tile rows 0-1, columns 0-1 of 4 x 8)")
    assert partition_sentence(np.arange(32) // 4 % 8, (32,), 8) == (
        "The achievable bound's assignment puts logical programs 0-3 on die 0 of 8 (4 of 32 programs)")


def test_short_of_the_bound_counts_fetches_not_the_hit_rate():
    def report(hits, **bound):
        return BottleneckReport(source="sim", hardware="mi300x", kernel="k", size="s", hit_pct=100 * hits / 400,
                                ceiling_pct=90.0, achievable_pct=85.0, accesses=400, hits=hits, unique_lines=50,
                                **bound)

    # 80 misses against the bound's 80 fetches: an L1 kept its hit rate (80%) below the bound's 85%
    assert not report(320, achievable_fetches=80).short_of_achievable
    assert report(319, achievable_fetches=80).short_of_achievable
    assert report(320).short_of_achievable  # fetches unknown: the hit rate decides
    assert not report(341).short_of_achievable  # 85.25%: at the bound's hit rate
    assert not report(350, achievable_fetches=10).short_of_achievable  # 50 misses: only the compulsory ones
    assert not BottleneckReport(source="sim", hardware="h", kernel="k", size="s", hit_pct=1.0).short_of_achievable


def test_reports_written_before_the_bounds_grouping_still_load():
    old = ('{"schema_version": 2, "source": "sim", "hardware": "mi300x", "kernel": "k", "size": "s", "metric": "read",'
           ' "hit_pct": 50.0, "achievable_pct": 70.0, "simulated": true}')
    report = BottleneckReport.model_validate_json(old)
    assert report.achievable_pct == 70.0 and report.achievable_grouping is None and report.achievable_fetches is None


def test_the_report_and_the_table_say_why_an_accepted_attempt_ranks_last():
    from swizzleperf.cli.render import verdict_text
    from swizzleperf.loop.artifacts import _row

    baseline = _attempt(0, 91.43, (0.985, 1.000, 1.004), origin="baseline")
    slower = _attempt(1, 92.70, (1.006, 1.010, 1.015))
    reason = "measurably slower: p20 1.0060 ms above the kernel's own p80 1.0040 ms"
    assert _row(slower, baseline, False) == f"| 1 | search | `f1` | 92.70 | 0.0 | ok; tested on 0 grids; {reason} |"
    assert verdict_text(slower, baseline).plain == "accepted; measurably slower"
    assert verdict_text(baseline, baseline).plain == "accepted"


def test_a_measured_gain_smaller_than_the_counters_run_to_run_noise_is_called_so():
    # bench on two H100s recommended xcd_chunked for softmax at +0.04 points; an identical run kept identity
    baseline = _attempt(0, 68.54, None, origin="baseline")
    noise = within_noise(_attempt(4, 68.58, None), baseline)
    assert noise is not None and noise.startswith("+0.04 points is within ncu's run-to-run noise")
    assert within_noise(_attempt(4, 88.74, None), baseline) is None  # gemm: +18.8 points
    assert within_noise(baseline, baseline) is None
    predicted = _attempt(1, 68.58, None).model_copy(
        update={"report": _attempt(1, 68.58, None).report.model_copy(update={"source": "sim"})})
    assert within_noise(predicted, baseline) is None  # the simulator has no run-to-run noise
