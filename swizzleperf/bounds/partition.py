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
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from swizzleperf.errors import SwizzlePerfError

INSTALL_HINT = ("the achievable multi-die bound needs Mt-KaHyPar: "
                "pip install 'swizzleperf[bounds]' (or pip install mtkahypar)")
PRESETS = ("default", "quality", "highest_quality", "deterministic", "deterministic_quality")
_HASH_SEED = 0x5EED  # fixed, so that merging (and hence the partitioner's input) is reproducible
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


@dataclass(frozen=True)
class _Hypergraph:
    """Nets as a CSR over vertices: net i holds pins[starts[i]:starts[i + 1]], sorted."""

    starts: np.ndarray
    pins: np.ndarray
    weights: np.ndarray

    @cached_property
    def pin_net(self) -> np.ndarray:
        """The net of every pin."""
        return np.repeat(np.arange(len(self.weights)), np.diff(self.starts))


def dispatcher_part_sizes(num_vertices: int, num_parts: int) -> list[int]:
    """Programs per die under round-robin dispatch: die d gets slots d, d + N, d + 2N, ..."""
    if num_vertices < 0 or num_parts < 1:
        raise ValueError(f"need num_vertices >= 0 and num_parts >= 1, got {num_vertices}, {num_parts}")
    base, extra = divmod(num_vertices, num_parts)
    return [base + (d < extra) for d in range(num_parts)]


def _ranges(begins: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices of several [begin, begin + length) ranges, concatenated, without a Python loop."""
    ends = np.cumsum(lengths)
    return np.repeat(begins - ends + lengths, lengths) + np.arange(ends[-1] if len(ends) else 0)


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values. Not np.unique: without return_inverse, numpy 2.4 takes a hash path
    for integers that took 16 s where sorting takes 0.5 s (8.4 M values); with it, it sorts."""
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def _reader_pairs(offsets: np.ndarray, nets: np.ndarray, num_nets: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (net, vertex) pairs sorted by net then vertex: each net's pins form a sorted set."""
    offsets, nets = np.asarray(offsets, np.int64), np.asarray(nets, np.int64)
    if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(nets):
        raise ValueError("offsets must start at 0 and end at len(nets)")
    if np.any(np.diff(offsets) < 0) or (len(nets) and (nets.min() < 0 or nets.max() >= num_nets)):
        raise ValueError(f"offsets must not decrease and nets must lie in [0, {num_nets})")
    num_vertices = max(len(offsets) - 1, 1)
    vertex = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    return np.divmod(_distinct(nets * num_vertices + vertex), num_vertices)


def _set_hashes(vertex: np.ndarray, starts: np.ndarray, num_vertices: int) -> np.ndarray:
    """A random 64-bit hash of each net's pin set: the (wrapping) sum of a random key per vertex."""
    key = np.random.default_rng(_HASH_SEED).integers(-(2**63), 2**63 - 1, size=num_vertices, dtype=np.int64)
    return np.add.reduceat(key[vertex], starts)


def _merge_identical(net: np.ndarray, vertex: np.ndarray, weights: np.ndarray, num_vertices: int) -> _Hypergraph:
    """One net per distinct reader set, with summed weight: a GEMM's millions of sectors have only
    thousands of reader sets, and the partitioner's cost grows with nets and pins.

    Reader sets are grouped by a random set hash; each net is then compared with its group's first
    net pin by pin, and one that differs (a collision) keeps a group of its own, so the result is
    exact whatever the hash does.
    """
    if not len(net):
        return _Hypergraph(np.zeros(1, np.int64), net, net)
    starts = np.flatnonzero(np.r_[True, net[1:] != net[:-1]])
    sizes = np.diff(np.r_[starts, len(net)])
    _, first, group = np.unique(_set_hashes(vertex, starts, num_vertices), return_index=True, return_inverse=True)
    pin_net, representative = np.repeat(np.arange(len(starts)), sizes), first[group]
    same_place = starts[representative][pin_net] + np.arange(len(net)) - starts[pin_net]
    same_place = np.minimum(same_place, len(net) - 1)  # past the end only where the sizes differ
    differs = (vertex != vertex[same_place]) | (sizes != sizes[representative])[pin_net]
    collided = _distinct(pin_net[differs])
    group[collided] = len(first) + np.arange(len(collided))
    first = np.r_[first, collided].astype(np.int64)
    merged = np.zeros(len(first), np.int64)
    np.add.at(merged, group, weights[net[starts]])
    pins = vertex[_ranges(starts[first], sizes[first])]
    return _Hypergraph(np.r_[0, np.cumsum(sizes[first])], pins, merged)


def _shared_nets(hg: _Hypergraph) -> _Hypergraph:
    """The nets the assignment can change: two or more pins and a weight. A net with one pin costs
    its weight wherever its pin goes."""
    sizes = np.diff(hg.starts)
    keep = (sizes > 1) & (hg.weights > 0)
    return _Hypergraph(np.r_[0, np.cumsum(sizes[keep])], hg.pins[np.repeat(keep, sizes)], hg.weights[keep])


def _fetches(hg: _Hypergraph, part: np.ndarray, num_parts: int) -> int:
    """Sum over nets of weight * number of parts holding a pin: what the dies fetch in all."""
    touched = _distinct(hg.pin_net * num_parts + part[hg.pins]) // num_parts
    return int(hg.weights[touched].sum())


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


def _net_weights(net_weights: np.ndarray | None, num_nets: int) -> np.ndarray:
    """The weight of every net as int64, 1 where none is given."""
    weights = np.ones(num_nets, np.int64) if net_weights is None else np.asarray(net_weights, np.int64)
    if weights.shape != (num_nets,) or np.any(weights < 0):
        raise ValueError(f"net_weights must be {num_nets} non-negative integers")
    return weights


def partition_bound(offsets: np.ndarray, nets: np.ndarray, num_nets: int, num_parts: int, *,
                    net_weights: np.ndarray | None = None, seed: int = 0, attempts: int = 4,
                    epsilons: tuple[float, ...] = (0.0, 0.2), preset: str = "highest_quality", threads: int = 1,
                    time_limit: float | None = None) -> tuple[PartitionBound, np.ndarray]:
    """The achievable multi-die bound and the assignment (int64 part per vertex) that reaches it.

    Vertex v reads nets[offsets[v]:offsets[v + 1]] (repeats allowed); `net_weights` (default 1)
    is what one fetch of a net costs, e.g. the number of sectors it stands for. Mt-KaHyPar runs
    once per seed (seed, seed + 1, ...: `attempts` of them) and epsilon (imbalance allowance);
    each result is repaired to exactly dispatcher_part_sizes and the cheapest kept: slack helps on
    grid-like instances, none on small ones. `time_limit` (seconds) bounds Mt-KaHyPar's process.

    The preset defaults to Mt-KaHyPar's slowest and best: on a 64x64 GEMM grid its "default" preset
    does worse than the identity. Reproducible for a seed with threads=1 unless one of Mt-KaHyPar's wall-clock limits
    trips (a refinement round past 5 s, a flow search past 8x the average and 0.1 s): the
    "deterministic" presets are immune but ignore the seed and partition worse.
    """
    began = time.perf_counter()
    if preset not in PRESETS or attempts < 1 or not epsilons or min(epsilons) < 0:
        raise ValueError(f"need attempts >= 1, epsilons >= 0 and a preset of {PRESETS}, "
                         f"got {attempts}, {epsilons}, {preset!r}")
    num_vertices = len(offsets) - 1
    sizes = dispatcher_part_sizes(num_vertices, num_parts)
    net, vertex = _reader_pairs(offsets, nets, num_nets)
    hg = _merge_identical(net, vertex, _net_weights(net_weights, num_nets), num_vertices)
    shared = _shared_nets(hg)
    part, moves, tool, chosen = np.arange(num_vertices, dtype=np.int64) % num_parts, 0, "trivial", "trivial"
    if num_parts > 1 and num_vertices > num_parts and len(shared.weights):
        tool = (f"mtkahypar {_mtkahypar_version()}, preset {preset.upper()}, "
                f"epsilons {list(epsilons)}, seeds {seed}..{seed + attempts - 1}, threads {threads}")
        job = dict(parts=num_parts, vertices=num_vertices, threads=threads, preset=preset,
                   epsilons=list(epsilons), seeds=list(range(seed, seed + attempts)))
        part, moves, chosen = _best_partition(shared, sizes, job, time_limit)
    fetches, min_fetches = _fetches(hg, part, num_parts), int(hg.weights.sum())
    return PartitionBound(
        vertices=num_vertices, num_parts=num_parts, part_sizes=sizes, fetches=fetches,
        min_fetches=min_fetches, km1=fetches - min_fetches, nets=len(_distinct(net)),
        distinct_nets=len(hg.weights), pins=len(net), seconds=time.perf_counter() - began,
        tool=tool, chosen=chosen, rebalanced_moves=moves,
    ), part
