"""Rank statistics for comparing predicted and measured orders of remaps, and what the recordings can resolve.

A measured order is only as firm as the recordings behind it: two remaps a few hundredths of a point apart
swap places from one recording to the next, and a rank correlation that scores their order scores noise.
With several recordings (each measures every remap once, so their differences are paired), two remaps are
*told apart* when a paired t-test at the 5 % level says their read hit rates differ; remaps the recordings
cannot tell apart are measured ties.
"""

from __future__ import annotations

import numpy as np

# Student's t, two-sided 5 %, for 1..30 degrees of freedom (beyond: the normal 1.96)
_T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
          2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def spearman(a, b) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None when either side is constant."""
    ra, rb = ranks(np.asarray(a, float)), ranks(np.asarray(b, float))
    if len(ra) < 2 or ra.std() == 0 or rb.std() == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    out = np.empty(len(x))
    out[order] = np.arange(len(x), dtype=float)
    for value in np.unique(x):  # ties share their mean rank
        out[x == value] = out[x == value].mean()
    return out


def told_apart(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether paired recordings `a` and `b` (one value per recording) differ beyond their noise."""
    d = np.asarray(a, float) - np.asarray(b, float)
    if len(d) < 2:
        return bool(d.size and d[0] != 0)
    spread = d.std(ddof=1)
    if spread == 0:
        return bool(d.mean() != 0)
    df = len(d) - 1
    t = _T_975[df - 1] if df <= len(_T_975) else 1.96
    return bool(abs(d.mean()) > t * spread / np.sqrt(len(d)))


def tie_groups(rates: np.ndarray) -> tuple[int, ...]:
    """rates[recording, remap] -> a group per remap: remaps of one group are measured ties. From the highest
    mean down, a remap joins the current group unless the recordings tell it apart from one of its members."""
    rates = np.asarray(rates, float)
    order = np.argsort(-rates.mean(axis=0), kind="stable")
    groups = np.empty(rates.shape[1], dtype=int)
    members: list[int] = []
    group = -1
    for i in order:
        if not members or any(told_apart(rates[:, i], rates[:, j]) for j in members):
            group, members = group + 1, []
        members.append(int(i))
        groups[i] = group
    return tuple(int(g) for g in groups)


def spearman_with_ties(measured, predicted, groups) -> float | None:
    """Spearman's rank correlation with the measured values of each tie group replaced by the group's mean."""
    measured, groups = np.asarray(measured, float), np.asarray(groups)
    tied = measured.copy()
    for g in np.unique(groups):
        tied[groups == g] = measured[groups == g].mean()
    return spearman(tied, predicted)
