"""A kernel's reads as a hypergraph: programs are vertices, read-only sectors are nets over their readers.

The bounds only care which programs read a sector, so sectors with the same reader set are one net
with their summed weight (a GEMM's millions of sectors have only thousands of reader sets). What
the partitioner and the fetch counts share is built here once: the distinct (net, program) pairs
are the one sort over every read the bounds pay for.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

_HASH_SEED = 0x5EED  # fixed, so that merging (and hence the partitioner's input) is reproducible


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


def _net_weights(net_weights: np.ndarray | None, num_nets: int) -> np.ndarray:
    """The weight of every net as int64, 1 where none is given."""
    weights = np.ones(num_nets, np.int64) if net_weights is None else np.asarray(net_weights, np.int64)
    if weights.shape != (num_nets,) or np.any(weights < 0):
        raise ValueError(f"net_weights must be {num_nets} non-negative integers")
    return weights


@dataclass(frozen=True)
class Reads:
    """Distinct (net, vertex) reader pairs, sorted by net, and the same nets merged by reader set."""

    net: np.ndarray
    vertex: np.ndarray
    weights: np.ndarray  # per original net
    num_vertices: int
    merged: _Hypergraph

    @property
    def min_fetches(self) -> int:
        """What one shared cache fetches: every net once."""
        return int(self.merged.weights.sum())

    @property
    def distinct_nets(self) -> int:
        """Nets read by at least one vertex (before merging)."""
        return int(len(self.net) and 1 + np.count_nonzero(self.net[1:] != self.net[:-1]))

    def fetches(self, part: np.ndarray, num_parts: int) -> int:
        """Fetches of an assignment with caches that only miss on first touch: weight x dies reading."""
        return _fetches(self.merged, np.asarray(part, np.int64), num_parts)


def reduce_reads(offsets: np.ndarray, nets: np.ndarray, num_nets: int,
                 net_weights: np.ndarray | None = None) -> Reads:
    """Vertex v reads nets[offsets[v]:offsets[v + 1]] (repeats allowed), net i costs net_weights[i]
    (default 1) per fetch: the validated, deduplicated and merged hypergraph."""
    net, vertex = _reader_pairs(offsets, nets, num_nets)
    weights = _net_weights(net_weights, num_nets)
    num_vertices = len(offsets) - 1
    return Reads(net, vertex, weights, num_vertices, _merge_identical(net, vertex, weights, max(num_vertices, 1)))
