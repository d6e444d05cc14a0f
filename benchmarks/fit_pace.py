"""How much slower a CU's younger programs go: `dispatch.younger_slowdown`, from recorded start times.

    python benchmarks/fit_pace.py RECORD.json[.gz] ...   # anywhere

A record is what `benchmarks/probe_placement.py` writes (each program's SM and start, `kernels`) or
`benchmarks/probe_stream_starts.py`'s starts (`records`). A kernel's first wave starts together: every SM
takes k programs within a microsecond (k found as the programs before the first gap of over 200 ns in the
sorted starts, divided by the SMs). The second wave's programs on an SM start as its first-wave programs
free their slots, so their starts, relative to the SM's first start, are when the first wave ended there.
On an H200 those ends are spread, not equal: the k-th slot of an SM frees later than the first by a
roughly even step (softmax at 12 per SM: 1.00, 1.03, 1.06, ... 1.46 times the first). The model
(sim/replay.py, sim/scheduler.py): an SM's k-th oldest resident program goes 1 / (1 + s x k) as fast as
its oldest, moving up a rank whenever an older one ends. For each kernel this prints the measured frees,
the s that reproduces them best (least squares over the free times, s in steps of 0.001), and the
model's frees at that s; then each kernel's median s (over its launches) and the median over kernels, the
preset's figure (one vote per kernel, however many launches recorded it).
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import defaultdict

import numpy as np

FIRST_WAVE_GAP_NS = 200.0


def model_frees(k: int, slowdown: float) -> np.ndarray:
    """When the k programs that start together on one SM end, as multiples of the first end."""
    left, ends, t = np.ones(k), [], 0.0
    alive = list(range(k))
    while alive:
        rates = 1.0 / (1.0 + slowdown * np.arange(len(alive)))
        step = min(left[p] / r for p, r in zip(alive, rates))
        t += step
        for p, r in zip(alive, rates):
            left[p] -= r * step
        ends += [t for p in alive if left[p] <= 1e-12]
        alive = [p for p in alive if left[p] > 1e-12]
    return np.array(ends) / ends[0]


def measured_frees(smid: np.ndarray, start: np.ndarray, num_sms: int) -> tuple[int, np.ndarray] | None:
    """(k, median frees of an SM's first-wave slots relative to its first), or None where the first wave cannot
    be told apart or there is no second wave."""
    ordered = np.sort(start)
    gaps = np.flatnonzero(np.diff(ordered) > FIRST_WAVE_GAP_NS)
    first = int(gaps[0]) + 1 if gaps.size else ordered.shape[0]
    if first % num_sms:
        return None
    k = first // num_sms
    by_sm = defaultdict(list)
    for p in np.argsort(start, kind="stable"):
        by_sm[int(smid[p])].append(start[p])
    rows = [np.array(times[k:2 * k]) - times[0] for times in by_sm.values() if len(times) >= 2 * k]
    if not rows:
        return None
    frees = np.median(np.array(rows), axis=0)
    return (k, frees / frees[0]) if frees[0] > 0 else None


def fit(frees: np.ndarray) -> float:
    grid = np.arange(0.0, 0.5005, 0.001)
    errors = [float(np.sum((model_frees(frees.shape[0], s) - frees) ** 2)) for s in grid]
    return float(grid[int(np.argmin(errors))])


def _launches(path: str):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as handle:
        record = json.load(handle)
    for launch in record.get("kernels", []):
        yield launch["kernel"], f"{launch['kernel']} ({launch['size']})", launch, record["num_sms"]
    for launch in record.get("records", []):
        yield "attention h128", f"attention h128, {launch['tokens']} tokens, {launch['order']}", launch, \
            record["num_sms"]


def main(paths: list[str]) -> int:
    fits = defaultdict(list)
    for path in paths:
        for kernel, label, launch, num_sms in _launches(path):
            found = measured_frees(np.array(launch["smid"]), np.array(launch["start_ns"], float), num_sms)
            if found is None or found[0] < 2:
                print(f"{label}: {'one program per SM' if found else 'no separable first wave and second wave'}")
                continue
            k, frees = found
            s = fit(frees)
            fits[kernel].append(s)
            print(f"{label}: {k} per SM; frees measured {np.round(frees, 3).tolist()}")
            print(f"    s = {s:.3f}: model {np.round(model_frees(k, s), 3).tolist()}")
    if not fits:
        print("no launch with two or more programs per SM and a second wave")
        return 1
    per_kernel = {kernel: float(np.median(values)) for kernel, values in fits.items()}
    print("per kernel: " + ", ".join(f"{kernel} {s:.3f}" for kernel, s in sorted(per_kernel.items(), key=lambda x: x[1])))
    print(f"median over {len(per_kernel)} kernels: {np.median(list(per_kernel.values())):.3f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    sys.exit(main(sys.argv[1:]))
