"""The ranking rule: read hit rate first, but never a remap measurably slower than the kernel's own."""

from datetime import datetime, timezone

from swizzleperf.history import RANKING_RULE, Attempt, History, StageResult
from swizzleperf.report import BottleneckReport, Timing


def _attempt(iteration: int, hit_pct: float, times: tuple[float, float, float] | None, origin="search") -> Attempt:
    timing = None if times is None else Timing(median_ms=times[1], p20_ms=times[0], p80_ms=times[2], repeats=100,
                                               l2_state="flushed")
    report = BottleneckReport(source="ncu", hardware="h100", kernel="k", size="s", hit_pct=hit_pct, timing=timing)
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


def test_within_the_spread_the_higher_hit_rate_wins_and_untimed_runs_rank_by_hit_rate():
    baseline = _attempt(0, 60.0, (1.00, 1.02, 1.04), origin="baseline")
    overlapping = _attempt(1, 84.0, (1.03, 1.05, 1.07))  # its p20 is below the baseline's p80
    faster = _attempt(2, 70.0, (0.90, 0.91, 0.93))
    assert [a.iteration for a in History([baseline, overlapping, faster]).ranked()] == [1, 2, 0]
    untimed = History([_attempt(0, 10.0, None, origin="baseline"), _attempt(1, 30.0, None), _attempt(2, 20.0, None)])
    assert [a.iteration for a in untimed.ranked()] == [1, 2, 0]
