"""One die count, in one encoding and then, if it did not decide, the other.

The integer encoding proves hooks that divide by grid extents; the bit-vector encoding proves
the power-of-two orders and anything whose intermediates wrap. A hook that divides by a run-time
value (a grid extent) gets the integer encoding alone: bit-blasted division by a variable decided
none of the family proofs in time. When an intermediate can overflow int32, the integer encoding
retries on smaller domains, so its answer is still useful: a counterexample among smaller grids,
or the largest domain it proved.
"""

from __future__ import annotations

import ast

import z3

from swizzleperf.kernel.contract import HookSignature
from swizzleperf.validation.proofs.branches import prove_by_cases, split_points
from swizzleperf.validation.proofs.certificates import Certificate, CertifiedProver, prefers_bit_vectors
from swizzleperf.validation.proofs.encoding import Domain
from swizzleperf.validation.proofs.outcome import Outcome
from swizzleperf.validation.proofs.queries import Prover
from swizzleperf.validation.proofs.sym_values import ProofError
from swizzleperf.validation.proofs.symexec import Executor
from swizzleperf.validation.proofs.z3_call import Budget

ENCODINGS = ("int", "bv")
MIN_SHRUNK_PROGRAMS = 2 ** 16  # below this, a domain proof is no longer worth reporting


def _attempt(kind: str, fn: ast.FunctionDef, hook: HookSignature, source: str, constexprs: dict[str, int],
             max_programs: int, budget: Budget, certificates: list[Certificate], leanings: dict) -> Outcome:
    """One encoding's answer, in a fresh z3 context; the integer one shrinks the domain past each overflow.
    A hook is proven by cases at a top-level `if pid < bound` first (branches.py), except in bit vectors
    where it has inverse certificates: those settle the chunked orders at once (0.05 s, where the cases
    take 1.5x as long); what the cases do not settle goes to the whole hook's proof."""
    ctx, proven = None, {}  # made when first needed: a proof by cases needs none
    limit, overflow = max_programs, None
    while True:
        outcome = None
        if split_points(fn, hook) and not (certificates and kind == "bv"):
            # in its own context (its terms would reorder the next proof's), made only where there is an `if` to split
            outcome = prove_by_cases(fn, (fn, hook, source, constexprs, Domain.make(kind, hook, limit, z3.Context()),
                                          budget, {}, leanings))
        if outcome is None:
            ctx = z3.Context() if ctx is None else ctx
            args = (fn, hook, source, constexprs, Domain.make(kind, hook, limit, ctx), budget, proven, leanings)
            prover = CertifiedProver(*args, certificates=certificates) if certificates else Prover(*args)
            outcome = prover.prove()
        if outcome.unknown_kind != "overflow" or outcome.overflow_total is None:
            break
        overflow = overflow or outcome
        limit = min(outcome.overflow_total - 1, limit // 2)
        if limit < MIN_SHRUNK_PROGRAMS:
            return overflow
    if overflow is None or outcome.counterexample is not None:
        return outcome
    if outcome.proven:
        overflow.proven_max_programs = limit
    return overflow


def _encodings(fn: ast.FunctionDef, hook: HookSignature, constexprs: dict[str, int],
               certificates: list[Certificate]) -> tuple[str, ...]:
    """The encodings to try, in order: only "int" when some division's divisor is not a constant;
    "bv" first when the integer encoding would convert to bit vectors and back (xor, or, and with
    a non-mask, shifts by a variable: z3 decides those mixed terms slowly), or when the hook and its
    first certificate multiply and divide by constants only (certificates.prefers_bit_vectors); else
    "int" first."""
    ctx = z3.Context()
    domain = Domain.make("int", hook, 1, ctx)
    backend = domain.backend(frozenset())
    inputs = domain.inputs(hook, domain.program("pid")[0])
    outputs = Executor(fn, hook, backend, inputs, constexprs).outputs()
    if any(v.kind == "div_zero" for v in backend.violations):  # recorded only for non-constant divisors
        return ("int",)
    if backend.bit_vectors or (certificates and prefers_bit_vectors(outputs, certificates[0], domain, constexprs)):
        return ("bv", "int")
    return ENCODINGS


def prove_die_count(fn: ast.FunctionDef, hook: HookSignature, source: str, constexprs: dict[str, int],
                    max_programs: int, work: int, deadline: float, certificates: list[Certificate] = (),
                    leanings: dict | None = None) -> Outcome:
    """The encodings one after the other, each with `work` z3 resource units in a fresh z3
    context, until one decides (or the wall-clock backstop `deadline` passes); the outcome says
    what they spent. Injectivity is asked through `certificates` first (swizzleperf.validation.proofs.certificates).
    `leanings`: how the hook's queries were decided at the die counts before (Prover.stage), shared by them.

    One after the other, not raced in two threads: z3's resource counts are only reproducible in
    a process that runs one solver at a time (raced, the same query took 1.06-1.08 M units, and a
    family hook at 8 dies was proven or not depending on the machine's load). A fresh context per
    die count keeps each answer a function of the hook and the work alone."""
    try:
        encodings = _encodings(fn, hook, constexprs, certificates)
    except ProofError as exc:
        return Outcome(unknown_kind=exc.kind, reason=str(exc))
    results: dict[str, Outcome] = {}
    spent = 0
    for kind in encodings:
        budget = Budget(work, deadline)
        results[kind] = _guarded(kind, fn, hook, source, constexprs, max_programs, budget, certificates,
                                 {} if leanings is None else leanings)
        spent += work - budget.work
        if results[kind].decisive:
            break
    outcome = _combine(results)
    outcome.work = spent
    return outcome


def _guarded(kind: str, *args) -> Outcome:
    """One encoding's attempt; whatever it raises becomes an unknown outcome."""
    try:
        return _attempt(kind, *args)
    except ProofError as exc:
        return Outcome(unknown_kind=exc.kind, reason=str(exc))
    except Exception as exc:  # an untrusted hook must not take the prover down
        return Outcome(unknown_kind="error",
                       reason=f"internal error in the {kind} encoding: {type(exc).__name__}: {exc}")


def _combine(results: dict[str, Outcome]) -> Outcome:
    decisive = [results[k] for k in ENCODINGS if k in results and results[k].decisive]
    if decisive:
        return decisive[0]
    for kind in ENCODINGS:  # the integer encoding's overflow report says the most
        if kind in results:
            return results[kind]
    return Outcome(unknown_kind="timeout", reason="z3 did not answer before the wall-clock backstop")
