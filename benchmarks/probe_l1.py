"""Probe the capacity and associativity of an NVIDIA SM's L1 for global loads (needs a GPU; writes OUT.json).

NVIDIA documents the L1's size (the unified L1/shared array minus the shared-memory carve-out) but
not its associativity or replacement, and the simulator needs both: with a 4-way hashed L1 the
simulator lost a quarter of stencil2d's L1 hits to conflicts that the H100 did not show. So this
measures them. One thread on one SM chases a random cycle through `lines` distinct 128-byte lines
of a 64 MB buffer twice (default caching: through the L1), under ncu, which counts the L1 hits
(`l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit`): the first walk cannot hit, so the hits
are the second walk's. (Timing each load with %clock64 does not work here: ptxas may read the clock
before the load's result arrives; every load measured 14 cycles.)

What the curve says: re-walking a cycle in the same order under LRU, a set holding more lines than
it has ways misses on every one of them, a set within its ways hits on all. So with S sets of W
ways and lines placed at random (a hashed index), the second pass hits on the lines of the sets
that got at most W of them; a fully associative cache hits on all of them up to its capacity.
`predicted` lists that fraction for each W at the same line counts (capacity from the knee).

    python benchmarks/probe_l1.py OUT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

LINE_INTS = 32  # int32 per 128-byte line
REGION_LINES = (64 << 20) // 128
LINE_COUNTS = (256, 512, 1024, 1280, 1408, 1536, 1664, 1728, 1792, 1856, 1920, 2048, 2304, 2560, 3072)
SEEDS = (0, 1, 2)
WAYS = (4, 8, 16, 32, 64, 0)  # 0: fully associative


@triton.jit
def l1_chase_kernel(chain_ptr, out_ptr, start, N: tl.constexpr):
    """Walk the chain twice from `start` (dependent loads through the L1); keep where it ends."""
    idx = start
    for _ in range(2 * N):
        idx = tl.load(chain_ptr + idx)
    tl.store(out_ptr, idx)


def chain(lines: int, seed: int, stride: int = 0) -> tuple[torch.Tensor, int]:
    """A buffer in which `lines` distinct lines form one cycle (each line's first int holds the index
    of the next line's first int): random lines in random order, or (`stride` > 0) lines 0, stride,
    2 stride, ... in that order, the regular pattern of a stencil's rows."""
    rng = np.random.default_rng(seed)
    chosen = (np.arange(lines) * stride if stride else rng.choice(REGION_LINES, size=lines, replace=False))
    buf = np.zeros(max(REGION_LINES, int(chosen.max()) + 1) * LINE_INTS, dtype=np.int32)
    buf[chosen * LINE_INTS] = np.roll(chosen, -1) * LINE_INTS
    return torch.from_numpy(buf).cuda(), int(chosen[0] * LINE_INTS)


STRIDES = (1, 2, 3, 32, 128, 1024)  # in lines; 128 lines = 16 KB, a 4096-float row
STRIDE_COUNTS = (1024, 1536, 1792, 2048)


def child() -> None:
    """Under ncu: one launch per (line count, seed), then per (stride, line count), in that order."""
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    runs = [(lines, seed, 0) for lines in LINE_COUNTS for seed in SEEDS]
    runs += [(lines, 0, stride) for stride in STRIDES for lines in STRIDE_COUNTS]
    for lines, seed, stride in runs:
        buf, start = chain(lines, seed, stride)
        l1_chase_kernel[(1,)](buf, out, start, N=lines, num_warps=1)
        torch.cuda.synchronize()


def measure() -> tuple[dict[int, list[float]], dict[tuple[int, int], float]]:
    """Second-walk L1 hit fraction per line count and seed: the walk's L1 hits / lines (the first walk
    touches distinct lines, so it cannot hit)."""
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    from swizzleperf.profilers.ncu import L1_HIT, L1_MISS, profile_program

    launches = profile_program([sys.executable, __file__, "--child"], [L1_HIT, L1_MISS], "^l1_chase$").launches
    runs = iter(launches)
    measured = {}
    for lines in LINE_COUNTS:
        fractions = []
        for _ in SEEDS:
            m = next(runs).metrics
            assert m[L1_HIT] + m[L1_MISS] == 2 * lines, (lines, m)
            fractions.append(m[L1_HIT] / lines)
        measured[lines] = fractions
    strided = {}
    for stride in STRIDES:
        for lines in STRIDE_COUNTS:
            m = next(runs).metrics
            strided[(stride, lines)] = m[L1_HIT] / lines
    return measured, strided


def predicted_hits(lines: int, capacity_lines: int, ways: int, seed: int = 0, trials: int = 20) -> float:
    """Second-walk hit fraction of an LRU cache of `capacity_lines` with `ways` ways and a random index."""
    if ways == 0:
        return 1.0 if lines <= capacity_lines else 0.0
    sets = capacity_lines // ways
    rng = np.random.default_rng(seed)
    fractions = []
    for _ in range(trials):
        counts = np.bincount(rng.integers(0, sets, size=lines), minlength=sets)
        fractions.append(counts[counts <= ways].sum() / lines)
    return float(np.mean(fractions))


def main(out: str) -> int:
    measured, strided = measure()
    print("regular strides (lines apart), second-walk hit fraction:")
    for stride in STRIDES:
        print(f"  stride {stride:5d}: " + "  ".join(f"{n} lines {strided[(stride, n)]:.3f}" for n in STRIDE_COUNTS))
    capacity = 224 * 1024 // 128  # the L1 left by the 32 KB carve-out a kernel without shared memory gets
    predicted = {str(w or "full"): {n: predicted_hits(n, capacity, w) for n in LINE_COUNTS} for w in WAYS}
    print(f"{'lines':>6} {'KB':>5} {'measured':>9} " + " ".join(f"{w + '-way':>9}" for w in predicted))
    for n in LINE_COUNTS:
        print(f"{n:6d} {n * 128 // 1024:5d} {np.mean(measured[n]):9.3f} "
              + " ".join(f"{p[n]:9.3f}" for p in predicted.values()))
    error = {w: float(np.mean([abs(p[n] - np.mean(measured[n])) for n in LINE_COUNTS])) for w, p in predicted.items()}
    print("mean |predicted - measured|: " + ", ".join(f"{w}-way {e:.3f}" for w, e in error.items()))
    json.dump({"device": torch.cuda.get_device_name(0), "capacity_lines": capacity,
               "measured": {str(n): v for n, v in measured.items()}, "predicted": predicted,
               "mean_abs_error": error,
               "strided": {f"{stride}x{n}": v for (stride, n), v in strided.items()}}, open(out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    if sys.argv[1:] == ["--child"]:
        child()
    else:
        sys.exit(main(sys.argv[1]))
