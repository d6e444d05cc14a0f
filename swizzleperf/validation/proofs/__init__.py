"""Proofs that a remap hook is a bijection for every grid size (z3); the entry point is `entry.prove_bijective`."""
