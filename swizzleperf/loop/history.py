"""The bottleneck history buffer: every attempt, ranked, and the bounded view proposers get.

An attempt is recorded whatever happened to it: a candidate rejected by the static checks is
as informative to the next proposal as one that was profiled.
"""

from __future__ import annotations

import difflib

from swizzleperf.kernel.contract import KernelFile
from swizzleperf.profilers.timer import speedup
from swizzleperf.records.attempt import Attempt
from swizzleperf.records.proposal import AttemptView
from swizzleperf.records.report import RUN_TO_RUN_PTS

RANKING_RULE = ("accepted attempts ranked by L2 read misses (fewer first: the fetches a remap saves; where the "
                "L1 passes the same reads to the L2 this is the L2 read hit rate's order, and where it does not, "
                "a higher hit rate can hide more fetches), then by L2 read hit rate (higher first), then by "
                "median kernel time (lower first) where measured, then by iteration (earlier first); an attempt "
                "measurably slower than the kernel's own remap ranks after every attempt that is not: where time "
                "is measured, its p20 time above the baseline's p80; on a persistent kernel under the simulator, "
                "its busiest program issuing more than 5 % more loads and stores than the baseline's busiest")
RANKING_SHORT = ("ranked by L2 read misses (fewer first), then L2 read hit rate, then measured time; the full rule "
                 "is in each run's run.json")
PREDICTED_SLOWER = 1.05  # a static schedule's time is its busiest program's: the issue's own tolerance


def kernel_diff(kernel: KernelFile, hook_source: str) -> str:
    """The unified diff a person would review: the kernel file before and after the remap."""
    after = kernel.with_hook(hook_source)
    return "".join(difflib.unified_diff(
        kernel.source.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"a/{kernel.path.name}", tofile=f"b/{kernel.path.name}"))


def slower_reason(attempt: Attempt, baseline: Attempt | None) -> str | None:
    """Why the attempt is measurably slower than the kernel's own remap (None if it is not): timed, its
    fast end above the baseline's slow end; untimed, the simulator's static schedule (persistent kernels)
    with a busiest program more than 5 % busier than the baseline's."""
    mine, base = attempt.report, baseline.report if baseline else None
    if mine is None or base is None or attempt is baseline:
        return None
    if mine.timing is not None and base.timing is not None:
        if mine.timing.p20_ms > base.timing.p80_ms:
            return (f"measurably slower: p20 {mine.timing.p20_ms:.4f} ms above the kernel's own p80 "
                    f"{base.timing.p80_ms:.4f} ms")
        return None
    busiest, base_busiest = mine.busiest_program_events, base.busiest_program_events
    if busiest is not None and base_busiest is not None and busiest > PREDICTED_SLOWER * base_busiest:
        return (f"predicted slower: its busiest program issues {busiest:,} loads and stores, the kernel's own "
                f"{base_busiest:,} ({busiest / base_busiest:.2f}x)")
    return None


def gain_noise(source: str | None, gain_pts: float) -> float | None:
    """The counters' run-to-run movement when a gain of `gain_pts` measured by `source` is smaller than
    it (None if the gain is larger, or the source has no such noise, as the simulator has not)."""
    noise = RUN_TO_RUN_PTS.get(source or "")
    return noise if noise is not None and abs(gain_pts) < noise else None


def within_noise(best: Attempt, baseline: Attempt | None) -> str | None:
    """Why a measured gain over the kernel's own remap is no gain (None if it is one, or is predicted):
    smaller than the counters' run-to-run movement."""
    if baseline is None or best is baseline or best.report is None or baseline.report is None:
        return None
    gain = best.report.hit_pct - baseline.report.hit_pct
    noise = gain_noise(best.report.source, gain)
    if noise is None:
        return None
    return (f"{gain:+.2f} points is within {best.report.source}'s run-to-run noise (one remap's read hit rate moved "
            f"up to {noise} points between identical runs on an H100): not a measured improvement")


def measurably_slower(attempt: Attempt, baseline: Attempt | None) -> bool:
    return slower_reason(attempt, baseline) is not None


def _rank_key(attempt: Attempt, baseline: Attempt | None) -> tuple[bool, float, float, float, int]:
    report = attempt.report
    assert report is not None
    time = report.timing.median_ms if report.timing else float("inf")
    return (measurably_slower(attempt, baseline), misses(attempt) or 0, -report.hit_pct, time, attempt.iteration)


class History:
    """All attempts of a run, in iteration order."""

    def __init__(self, attempts: list[Attempt] | None = None):
        """`attempts`: read back from disk, so not trusted until loop.reverify re-checks one."""
        self.attempts: list[Attempt] = list(attempts or [])
        self._fresh: set[int] = set()  # id() of the attempts evaluated in this process (or re-checked)

    def __len__(self) -> int:
        return len(self.attempts)

    def append(self, attempt: Attempt) -> None:
        """An attempt evaluated in this process."""
        self.attempts.append(attempt)
        self._fresh.add(id(attempt))

    def timed(self) -> bool:
        """Whether a measured profiler timed any attempt (then tables show time columns)."""
        return any(a.report is not None and a.report.timing is not None for a in self.attempts)

    def is_fresh(self, attempt: Attempt) -> bool:
        return id(attempt) in self._fresh

    def mark_fresh(self, attempt: Attempt) -> None:
        self._fresh.add(id(attempt))

    def replace(self, old: Attempt, new: Attempt) -> None:
        self.attempts[next(i for i, a in enumerate(self.attempts) if a is old)] = new

    def ranked(self) -> list[Attempt]:
        baseline = self.baseline()
        return sorted((a for a in self.attempts if a.accepted), key=lambda a: _rank_key(a, baseline))

    def best(self) -> Attempt | None:
        ranked = self.ranked()
        return ranked[0] if ranked else None

    def baseline(self) -> Attempt | None:
        return next((a for a in self.attempts if a.origin == "baseline" and a.accepted), None)

    def memory_analysis(self) -> str | None:
        """The LLM's analysis of the kernel, as the latest attempt that asked for one recorded it."""
        return next((a.memory_analysis for a in reversed(self.attempts) if a.memory_analysis), None)

    def views(self, last: int = 6, top: int = 3) -> list[AttemptView]:
        """The bounded summary proposers see: the best few and the most recent, in order."""
        keep = {a.iteration for a in self.ranked()[:top]} | {a.iteration for a in self.attempts[-last:]}
        return [a.view() for a in self.attempts if a.iteration in keep]

    def all_views(self) -> list[AttemptView]:
        """Every attempt, compactly (no diffs): what a search proposer learns from."""
        return [a.view(max_diff_lines=0) for a in self.attempts]


def time_cells(attempt: Attempt, baseline: Attempt | None) -> tuple[str, str, str]:
    """The measured time of an attempt for a table: (median ms, p20-p80 ms, speedup over the kernel's own order,
    "within noise" where their p20-p80 ranges give a ratio on both sides of 1); empty where not timed."""
    timing = attempt.report.timing if attempt.report else None
    if timing is None:
        return "", "", ""
    spread = f"{timing.p20_ms:.4f}-{timing.p80_ms:.4f}"
    base = baseline.report.timing if baseline is not None and baseline.report else None
    if base is None or attempt is baseline or base.l2_state != timing.l2_state:
        return f"{timing.median_ms:.4f}", spread, ""
    ratio, low, high = speedup(base, timing)
    return f"{timing.median_ms:.4f}", spread, f"{ratio:.3f}x" + (" (within noise)" if low <= 1.0 <= high else "")


def misses(attempt: Attempt) -> int | None:
    """L2 read misses of an attempt: the quantity runs rank by."""
    return attempt.report.fetches if attempt.report is not None else None


def ranked_headline(best: Attempt, baseline: Attempt) -> str:
    """The best attempt against the kernel's own order, leading with what the ranking ranks (read misses), the
    hit rates beside it."""
    report, base = best.report, baseline.report
    mine, theirs = misses(best), misses(baseline)
    rates = f"{report.metric_name} rate {base.hit_pct:.2f}% -> {report.hit_pct:.2f}%"
    if mine is None or theirs is None or not theirs:
        return f"{rates}, {report.label}"
    return (f"L2 read misses {theirs:,} -> {mine:,} ({mine / theirs:.2f}x the kernel's own order), {report.label}; "
            f"{rates}")
