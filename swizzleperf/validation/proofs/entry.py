"""Prove a remap hook bijective for every grid size, beside the sampled check (issue 13).

`prove_bijective(source, signature)` translates the hook's syntax tree (never executed) into
z3 formulas with compiled Triton's integer semantics and asks for a counterexample: a grid
(each extent >= 1, at most `max_programs` programs in all) and a die count for which two
programs map to one logical index, a program maps outside the grid, or an operation is
undefined. No model means proven; a model is re-evaluated exactly before it is reported.

How: a hook that cuts into an order and a raster is first proven half by half (compose, prove), one
that cuts into two values, the first of them a coordinate, as a prefix and a rest (split), and a 1D
hook (or order) with a top-level `if pid < bound` one side of the bound at a time (branches);
symexec (with values, expressions) walks the tree over a backend (backends, bitvec);
a 1D hook (or the order a hook is cut into) may be proven one-to-one by an inverse (certificates);
encoding sets up the grid; solve asks the queries, through cuts, facts and a linear abstraction
(linear, and products for products of two run-time values, built once per context over terms) when z3 needs help,
one z3 call at a time (solver); portfolio tries the integer, then the bit-vector encoding for each
die count (outcome: what each found); prove and verdict make the answer. By default all of it runs in a child process
(swizzleperf.untrusted.sandbox.run_in_child), so a formula that explodes cannot hang or exhaust the
caller. Needs the `proofs` extra (z3-solver).
"""

from __future__ import annotations

import time

from swizzleperf.errors import RemapRejected, SandboxError
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.validation.proofs.verdict import INT32_MAX, Counterexample, ProofVerdict

__all__ = ["DEFAULT_DIE_COUNTS", "Counterexample", "ProofVerdict", "prove_bijective", "prove_in_process"]

# The die counts a hook's NUM_XCDS may take: every preset's L2 domains (1 on NVIDIA, 8 on
# MI300-class parts) and the virtual die counts the offline search gives hooks on one shared L2.
DEFAULT_DIE_COUNTS = (1, 2, 4, 8, 16)
CHILD_STARTUP_S = 15.0  # interpreter, numpy and z3 imports, on a loaded machine


def _unknown(hook: HookSignature | None, die_counts: list[int], kind: str, reason: str, time_limit_s: float,
             max_programs: int, started: float) -> ProofVerdict:
    return ProofVerdict(status="unknown", hook=hook.render() if hook else "?", die_counts=die_counts,
                        unknown_kind=kind, reason=reason, time_limit_s=time_limit_s, max_programs=max_programs,
                        seconds=time.perf_counter() - started)


def _die_counts(die_counts) -> list[int]:
    values = sorted({int(d) for d in die_counts})
    if not values or values[0] < 1:
        raise ValueError(f"die counts must be positive integers, got {list(die_counts)}")
    return values


def prove_bijective(hook_source: str, signature: HookSignature, die_counts=DEFAULT_DIE_COUNTS,
                    time_limit_s: float = 2.0, max_programs: int = INT32_MAX, in_child: bool = True) -> ProofVerdict:
    """Prove the hook bijective on every grid of up to max_programs programs, for each die count.

    Never raises for a bad hook: whatever cannot be proven or refuted is an "unknown" verdict
    with the reason. time_limit_s sets the work budget of the whole proof (all die counts), in
    z3 resource units worth that many seconds on an unloaded core, so the verdict does not depend
    on load; the wall clock is a backstop (prove.backstop_s). In a child process (confined like
    the bijectivity check's: no network, limited memory and CPU), the child is killed
    CHILD_STARTUP_S seconds after the backstops of the proof's parts (prove.PROOF_PARTS).
    """
    started = time.perf_counter()
    try:
        dies = _die_counts(die_counts)
    except (TypeError, ValueError) as exc:
        return _unknown(signature, [], "error", str(exc), time_limit_s, max_programs, started)
    if not in_child:
        return prove_in_process(hook_source, signature, dies, time_limit_s, max_programs)
    from swizzleperf.untrusted.isolation import CPU_CHILD_MEMORY_MB, Confinement
    from swizzleperf.untrusted.sandbox import run_in_child
    from swizzleperf.validation.proofs.prover import PROOF_PARTS, backstop_s

    wall_s = PROOF_PARTS * backstop_s(time_limit_s) + CHILD_STARTUP_S
    confinement = Confinement(memory_mb=CPU_CHILD_MEMORY_MB, cpu_s=wall_s + 10,
                              file_mb=16, network=False, threads=1)
    payload = {"source": hook_source, "hook": {"name": signature.name, "pid": signature.pid,
                                               "grid_params": list(signature.grid_params),
                                               "constexprs": list(signature.constexprs),
                                               "sizes": list(getattr(signature, "sizes", ()))},  # a SizedHook's
               "die_counts": dies, "time_limit_s": time_limit_s, "max_programs": max_programs}
    try:
        result = run_in_child("swizzleperf.validation.proofs.child:prove_child", payload, wall_s,
                              what="the bijectivity prover", confinement=confinement)
        return ProofVerdict.model_validate(result.value)
    except SandboxError as exc:
        kind = "timeout" if "time limit" in str(exc) else "error"
        return _unknown(signature, dies, kind, str(exc), time_limit_s, max_programs, started)


def prove_in_process(hook_source: str, signature: HookSignature, die_counts: list[int], time_limit_s: float,
                     max_programs: int = INT32_MAX) -> ProofVerdict:
    """prove_bijective without the child process (z3 runs here; its own timeout still applies)."""
    started = time.perf_counter()
    try:
        from swizzleperf.remaps.check import static_check
        from swizzleperf.validation.proofs.prover import prove_checked

        fn = static_check(hook_source, signature)
        return prove_checked(fn, hook_source, signature, die_counts, time_limit_s, max_programs)
    except RemapRejected as exc:
        return _unknown(signature, die_counts, "invalid", f"the static check rejects the hook: {exc.reason}",
                        time_limit_s, max_programs, started)
    except ImportError as exc:
        return _unknown(signature, die_counts, "error", f"z3 is not installed ({exc}); install the `proofs` extra: "
                                                        f"pip install -e '.[proofs]'", time_limit_s, max_programs,
                        started)
    except Exception as exc:  # an untrusted hook must never crash the caller
        return _unknown(signature, die_counts, "error", f"internal error: {type(exc).__name__}: {exc}",
                        time_limit_s, max_programs, started)
