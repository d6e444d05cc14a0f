"""The achievable multi-die bound: the fewest fetches a balanced program-to-die assignment makes.

With one private L2 per die and caches big enough that only first touches miss, a cache sector
read by programs on lambda dies is fetched lambda times. Programs are vertices, sectors are nets
over their readers, and total fetches = sum(weight) + km1 (connectivity minus one): a balanced
hypergraph partition. The dispatcher gives every die a fixed number of programs, and any
assignment with exactly those part sizes is a remap (die d's programs go to slots = d mod N), so
the partition found here is achievable. Mt-KaHyPar is a heuristic: the number is "achievable by
the best assignment found", not a proof that no remap does better.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from swizzleperf.errors import SwizzlePerfError
from swizzleperf.sim.bounds.hypergraph import (
    Reads,
    _distinct,
    _fetches,
    _Hypergraph,
    _merge_identical,
    _ranges,
    _shared_nets,
    reduce_reads,
)

INSTALL_HINT = ("the achievable multi-die bound needs Mt-KaHyPar: "
                "pip install 'swizzleperf[bounds]' (or pip install mtkahypar)")
PRESETS = ("default", "quality", "highest_quality", "deterministic", "deterministic_quality")
_INT32_MAX = 2**31 - 1  # Mt-KaHyPar's net weights and objective are 32-bit

# Mt-KaHyPar keeps random state across calls in one process (set_seed does not rewind it) and fixes
# its thread count at the first initialize, so every call runs in a fresh process: a seed then
# reproduces, `threads` may differ per call and a time limit can stop it. The child imports only
# Mt-KaHyPar (not numpy or swizzleperf), which keeps its start-up near 0.15 s. Seeds are the outer
# loop so that the runs of n attempts are the first runs of n + 1: more attempts never do worse.
_CHILD = """
import json, sys
import mtkahypar
job = json.load(open(sys.argv[1]))
initializer = mtkahypar.initialize(job["threads"], False)
preset = getattr(mtkahypar.PresetType, job["preset"].upper())
pins, starts = job["pins"], job["starts"]
nets = [pins[a:b] for a, b in zip(starts, starts[1:])]
parts = []
for seed in job["seeds"]:
    for epsilon in job["epsilons"]:
        context = initializer.context_from_preset(preset)
        context.logging = False
        context.set_partitioning_parameters(job["parts"], epsilon, mtkahypar.Objective.KM1)
        hypergraph = initializer.create_hypergraph(
            context, job["vertices"], len(nets), nets, [1] * job["vertices"], job["weights"])
        mtkahypar.set_seed(seed)
        parts.append(hypergraph.partition(context).get_partition())
json.dump(parts, open(sys.argv[2], "w"))
"""


class PartitionerMissing(SwizzlePerfError, ImportError):
    """Mt-KaHyPar is not installed; the message says how to install it."""

    def __init__(self) -> None:
        super().__init__(INSTALL_HINT)


class PartitionerFailed(SwizzlePerfError):
    """Mt-KaHyPar crashed or ran past the time limit."""


class PartitionBound(BaseModel):
    """What the bound is and how it was found; the assignment itself is returned beside it."""

    model_config = ConfigDict(extra="forbid")

    vertices: int  # programs
    num_parts: int  # dies
    part_sizes: list[int]  # programs per die: the dispatcher's round-robin counts
    fetches: int  # sum over nets of weight * dies reading it, for the returned assignment
    min_fetches: int  # sum of net weights: what a single shared cache would fetch
    km1: int  # fetches - min_fetches: the refetches multiple dies cost
    nets: int  # nets read by at least one program, before merging
    distinct_nets: int  # after merging nets with identical reader sets
    pins: int  # distinct (net, program) pairs of the input
    seconds: float  # wall time of the whole computation
    tool: str  # partitioner, version and settings; "trivial" when none was needed
    chosen: str  # the run that gave the assignment ("seed 3, epsilon 0.2"), or the identity
    rebalanced_moves: int  # programs that run's partition moved to reach the exact part sizes


def dispatcher_part_sizes(num_vertices: int, num_parts: int) -> list[int]:
    """Programs per die under round-robin dispatch: die d gets slots d, d + N, d + 2N, ..."""
    if num_vertices < 0 or num_parts < 1:
        raise ValueError(f"need num_vertices >= 0 and num_parts >= 1, got {num_vertices}, {num_parts}")
    base, extra = divmod(num_vertices, num_parts)
    return [base + (d < extra) for d in range(num_parts)]


def _move_costs(hg: _Hypergraph, counts: np.ndarray, part: np.ndarray, pins: np.ndarray) -> np.ndarray:
    """For each pin (an index into hg.pins) and part b: the fetches its net adds if the pin's vertex
    moves to b. The net gains a part if b holds none of its pins, and loses one if the vertex was
    its only pin in its part."""
    net = hg.pin_net[pins]
    here = counts[net, part[hg.pins[pins]]]
    return hg.weights[net, None] * ((counts[net] == 0).astype(np.int64) - (here == 1)[:, None])


def _relabel(part: np.ndarray, sizes: list[int]) -> np.ndarray:
    """Rename parts so the largest gets the largest target size, and so on: part names are
    arbitrary, and matching them by size leaves the repair the fewest moves."""
    by_size = np.argsort(-np.bincount(part, minlength=len(sizes)), kind="stable")
    name = np.empty(len(sizes), np.int64)
    name[by_size] = np.argsort(-np.asarray(sizes), kind="stable")
    return name[part]


def _rebalance(hg: _Hypergraph, part: np.ndarray, sizes: list[int]) -> int:
    """Move vertices from over-full to under-full parts until the sizes are exact, each time taking
    the move that adds the fewest fetches: the partitioner only honours an imbalance allowance.
    A move changes the costs of the pins of its vertex's nets only, so just those are updated.
    Returns the number of moves; `part` is updated in place.
    """
    num_parts, pin_net = len(sizes), hg.pin_net
    if not (np.bincount(part, minlength=num_parts) - sizes).any():
        return 0  # nothing to move: skip building the move costs, the bulk of the work on large graphs
    counts = np.zeros((len(hg.weights), num_parts), np.int64)
    np.add.at(counts, (pin_net, part[hg.pins]), 1)
    cost = np.zeros((len(part), num_parts), np.int64)
    np.add.at(cost, hg.pins, _move_costs(hg, counts, part, np.arange(len(hg.pins))))
    by_vertex = np.argsort(hg.pins, kind="stable")
    vertex_starts = np.searchsorted(hg.pins[by_vertex], np.arange(len(part) + 1))
    moves = 0
    while (excess := np.bincount(part, minlength=num_parts) - sizes).any():
        movable, under = np.flatnonzero(excess[part] > 0), np.flatnonzero(excess < 0)
        i, j = np.unravel_index(np.argmin(cost[np.ix_(movable, under)]), (len(movable), len(under)))
        v, target = movable[i], under[j]
        nets = pin_net[by_vertex[vertex_starts[v]:vertex_starts[v + 1]]]
        touched = _ranges(hg.starts[nets], np.diff(hg.starts)[nets])
        before = _move_costs(hg, counts, part, touched)
        counts[nets, part[v]] -= 1
        counts[nets, target] += 1
        part[v] = target
        np.add.at(cost, hg.pins[touched], _move_costs(hg, counts, part, touched) - before)
        moves += 1
    return moves


def _mtkahypar_version() -> str:
    """The installed Mt-KaHyPar's version; raises PartitionerMissing when it cannot be imported."""
    try:
        import mtkahypar  # noqa: F401  (imported only to fail early, in this process)
    except ImportError as error:
        raise PartitionerMissing() from error
    return importlib.metadata.version("mtkahypar")


def _run_mtkahypar(hg: _Hypergraph, job: dict, time_limit: float | None) -> np.ndarray:
    """Mt-KaHyPar's partitions (one row per seed and epsilon of `job`), from a child process.

    Its weights are 32-bit, so they are divided down (rounding up) where the objective could
    overflow; the fetches are counted here, exactly, in any case.
    """
    scale = max(1, -(-int(hg.weights.sum()) * (job["parts"] - 1) // _INT32_MAX))
    weights = -(-hg.weights // scale)
    job = {**job, "starts": hg.starts.tolist(), "pins": hg.pins.tolist(), "weights": weights.tolist()}
    with tempfile.TemporaryDirectory(prefix="swizzleperf-partition-") as tmp:
        job_file, result_file = Path(tmp) / "job.json", Path(tmp) / "result.json"
        job_file.write_text(json.dumps(job))
        try:
            done = subprocess.run([sys.executable, "-c", _CHILD, str(job_file), str(result_file)],
                                  capture_output=True, text=True, timeout=time_limit)
        except subprocess.TimeoutExpired as error:
            raise PartitionerFailed(
                f"Mt-KaHyPar ran past time_limit={time_limit} s: raise it, or use fewer attempts") from error
        if done.returncode != 0:
            tail = done.stderr.strip()[-2000:]
            raise PartitionerFailed(f"Mt-KaHyPar failed (exit {done.returncode}): {tail}")
        return np.asarray(json.loads(result_file.read_text()), np.int64)


def _best_partition(hg: _Hypergraph, sizes: list[int], job: dict,
                    time_limit: float | None) -> tuple[np.ndarray, int, str]:
    """Repair every partition Mt-KaHyPar returned to the exact sizes and keep the cheapest, or the
    dispatcher's own identity assignment when none beats it (it is achievable too, and the
    partitioner can do worse on large grids). The first among equals wins, so the choice is
    reproducible. Returns the assignment, its repair's move count and which run it came from."""
    best, moves, chosen = np.arange(sum(sizes), dtype=np.int64) % len(sizes), 0, "identity (v % parts)"
    best_fetches = _fetches(hg, best, len(sizes))
    runs = [(seed, epsilon) for seed in job["seeds"] for epsilon in job["epsilons"]]
    for part, (seed, epsilon) in zip(_run_mtkahypar(hg, job, time_limit), runs):
        part = _relabel(part, sizes)
        part_moves = _rebalance(hg, part, sizes)
        fetches = _fetches(hg, part, len(sizes))
        if fetches < best_fetches:
            best, best_fetches, moves, chosen = part, fetches, part_moves, f"seed {seed}, epsilon {epsilon}"
    return best, moves, chosen


def _grouped_partition(reads: Reads, shared: _Hypergraph, sizes: list[int], group: int, job: dict,
                       time_limit: float | None) -> tuple[np.ndarray, int, str]:
    """Partition groups of `group` consecutive vertices (equal-sized, so equal group counts per part
    are near-equal vertex counts), give every vertex its group's part, and repair the sizes exactly.
    The partitioner's time grows with vertices and pins; a gather over 262 K programs takes it 30 s,
    its 16 K groups under 2. Still an assignment the dies can run, so still achievable; where it
    does worse than the dispatcher's own (v % parts), that is kept."""
    num_vertices, num_parts = sum(sizes), len(sizes)
    num_groups = -(-num_vertices // group)
    coarse_net, coarse_vertex = np.divmod(_distinct(reads.net * num_groups + reads.vertex // group), num_groups)
    coarse_hg = _shared_nets(_merge_identical(coarse_net, coarse_vertex, reads.weights, num_groups))
    identity = np.arange(num_vertices, dtype=np.int64) % num_parts
    if len(coarse_hg.weights):
        coarse_part, _, chosen = _best_partition(coarse_hg, dispatcher_part_sizes(num_groups, num_parts),
                                                 {**job, "vertices": num_groups}, time_limit)
    else:  # every net lies within one group: any balanced assignment of whole groups fetches each once
        coarse_part, chosen = np.arange(num_groups, dtype=np.int64) % num_parts, "whole groups round-robin"
    part = coarse_part[np.arange(num_vertices) // group]
    moves = _rebalance(shared, part, sizes)
    if _fetches(shared, part, num_parts) >= _fetches(shared, identity, num_parts):
        return identity, 0, "identity (v % parts)"
    return part, moves, chosen


def partition_bound(offsets: np.ndarray, nets: np.ndarray, num_nets: int, num_parts: int, *,
                    net_weights: np.ndarray | None = None, **options) -> tuple[PartitionBound, np.ndarray]:
    """The achievable multi-die bound and the assignment (int64 part per vertex) that reaches it.

    Vertex v reads nets[offsets[v]:offsets[v + 1]] (repeats allowed); `net_weights` (default 1)
    is what one fetch of a net costs, e.g. the number of sectors it stands for. `options` are
    `partition_reads`'."""
    began = time.perf_counter()
    return partition_reads(reduce_reads(offsets, nets, num_nets, net_weights), num_parts, began=began, **options)


def partition_reads(reads: Reads, num_parts: int, *, seed: int = 0, attempts: int = 4,
                    epsilons: tuple[float, ...] = (0.0, 0.2), preset: str = "highest_quality", threads: int = 1,
                    time_limit: float | None = None, max_vertices: int = 4096,
                    began: float | None = None) -> tuple[PartitionBound, np.ndarray]:
    """`partition_bound` of reads already reduced (`reduce_reads`).

    Mt-KaHyPar runs once per seed (seed, seed + 1, ...: `attempts` of them) and epsilon (imbalance
    allowance); each result is repaired to exactly dispatcher_part_sizes and the cheapest kept: slack
    helps on grid-like instances, none on small ones. `time_limit` (seconds) bounds Mt-KaHyPar's
    process. Past `max_vertices`, consecutive vertices are partitioned in groups (`_grouped_partition`).

    The preset defaults to Mt-KaHyPar's slowest and best: on a 64x64 GEMM grid its "default" preset
    does worse than the identity. Reproducible for a seed with threads=1 unless one of Mt-KaHyPar's
    wall-clock limits trips (a refinement round past 5 s, a flow search past 8x the average and
    0.1 s): the "deterministic" presets are immune but ignore the seed and partition worse.
    """
    began = time.perf_counter() if began is None else began
    if preset not in PRESETS or attempts < 1 or not epsilons or min(epsilons) < 0:
        raise ValueError(f"need attempts >= 1, epsilons >= 0 and a preset of {PRESETS}, "
                         f"got {attempts}, {epsilons}, {preset!r}")
    num_vertices, hg = reads.num_vertices, reads.merged
    sizes = dispatcher_part_sizes(num_vertices, num_parts)
    shared = _shared_nets(hg)
    identity = np.arange(num_vertices, dtype=np.int64) % num_parts
    part, moves, tool, chosen = identity, 0, "trivial", "trivial"
    if num_parts > 1 and num_vertices > num_parts and len(shared.weights):
        group = -(-num_vertices // max_vertices)  # consecutive programs per partitioned vertex
        tool = (f"mtkahypar {_mtkahypar_version()}, preset {preset.upper()}, "
                f"epsilons {list(epsilons)}, seeds {seed}..{seed + attempts - 1}, threads {threads}"
                + (f", programs in groups of {group} consecutive ids" if group > 1 else ""))
        job = dict(parts=num_parts, threads=threads, preset=preset, epsilons=list(epsilons),
                   seeds=list(range(seed, seed + attempts)))
        if group == 1:
            part, moves, chosen = _best_partition(shared, sizes, {**job, "vertices": num_vertices}, time_limit)
        else:
            part, moves, chosen = _grouped_partition(reads, shared, sizes, group, job, time_limit)
    fetches = reads.fetches(part, num_parts)
    return PartitionBound(
        vertices=num_vertices, num_parts=num_parts, part_sizes=sizes, fetches=fetches,
        min_fetches=reads.min_fetches, km1=fetches - reads.min_fetches, nets=reads.distinct_nets,
        distinct_nets=len(hg.weights), pins=len(reads.net), seconds=time.perf_counter() - began,
        tool=tool, chosen=chosen, rebalanced_moves=moves,
    ), part
