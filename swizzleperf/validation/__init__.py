"""Validation of an untrusted candidate, the stage between proposal and profile.

Remaps come from a model or from anyone's file, so nothing here runs candidate code in the main
process: `untrusted` bounds the text before and while it is parsed, `work` counts what evaluating it
costs before anything runs, `isolation` and `sandbox` start the confined child processes that do
evaluate it, `bijectivity` checks the remap on many grids (in a child) and `proof_status` adds the z3
proof for every grid size (swizzleperf.validation.proofs.entry), and `correctness` runs the kernel with the remap
against its reference (in a child). The static check of the hook's subset is `swizzleperf.remaps.check`.
"""
