"""SM layouts measured on real GPUs: which L2 partition each SM is near, and where the first wave goes.

NVIDIA documents that the A100/H100 L2 is two partitions, each caching data for the SMs of the
GPCs wired to it, but not which SM ids those are; and that thread blocks are spread over the GPCs,
but not in what order. Both decide which programs share an L1 and a partition, so they are
measured with `benchmarks/probe_l2_partitions.py` (dependent-load latencies and %smid; see its
docstring) and kept as data in `layouts/<gpu>.json`. What the H100 showed:

- a line read by one SM is a near hit (about 290 cycles) for the 65 other SMs on its side and,
  for the other 66, a near hit only when the line's home is their side (about half of the lines,
  no single address bit deciding which) and a far hit otherwise (about 440 cycles); DRAM is about
  720 cycles. Re-reading is a near hit for every SM: the near side keeps its own copy.
- the block scheduler visits SMs 124..131 first and more often, then pairs of SMs (one TPC) from one
  GPC after another; every SM ends the first wave with the same number of programs. A launch at
  4 programs per SM follows the 16-per-SM sequence with each SM's later visits left out (94% of
  positions agree; the rest swap SMs of the same side).

Floorsweeping differs between chips, so another H100 can differ in detail; the shape (two
sides of 66 SMs in TPC pairs, GPC-interleaved dispatch) is the architecture's.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources


@cache
def _layout(gpu: str) -> dict:
    return json.loads(resources.files("swizzleperf.hardware.layouts").joinpath(f"{gpu}.json").read_text())


def sm_partition(gpu: str) -> list[int]:
    """The L2 partition each SM is near (0: SM 0's side)."""
    return [int(c) for c in _layout(gpu)["sm_partition"]]


def first_wave_sequence(gpu: str) -> list[int]:
    """The SM each successive program of a full first wave started on, in launch order."""
    return list(_layout(gpu)["first_wave_sm_sequence"])
