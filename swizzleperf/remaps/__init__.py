"""The remap catalogue and its checks: the static subset, the evaluator, families, loop orders, the search space, inverses, the library."""
