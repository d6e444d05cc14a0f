"""Reference points for remaps: the achievable multi-die bound, the fewest L2 fetches of a die
assignment with the dispatcher's part sizes that hypergraph partitioning (Mt-KaHyPar) finds."""

from swizzleperf.sim.bounds.partition import (
    PartitionBound,
    PartitionerFailed,
    PartitionerMissing,
    dispatcher_part_sizes,
    partition_bound,
)

__all__ = [
    "PartitionBound",
    "PartitionerFailed",
    "PartitionerMissing",
    "dispatcher_part_sizes",
    "partition_bound",
]
