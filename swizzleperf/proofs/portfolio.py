"""One die count, both encodings at once (two threads): the first decisive answer wins.

The integer encoding proves hooks that divide by grid extents; the bit-vector encoding proves
the power-of-two orders and anything whose intermediates wrap. Each runs in its own z3
context (contexts are not shared between threads; z3 releases the GIL while it solves), and
the first to prove or refute stops the other. A hook that divides by a run-time value (a grid
extent) gets the integer encoding alone: bit-blasted division by a variable decided none of the
family proofs in time, and the second thread would only take CPU from the first. When an
intermediate can overflow int32, the integer encoding retries on smaller domains, so its answer
is still useful: a counterexample among smaller grids, or the largest domain it proved.
"""

from __future__ import annotations

import ast
import threading
import time

import z3

from swizzleperf.kernel import HookSignature
from swizzleperf.proofs.encoding import Domain
from swizzleperf.proofs.solve import Outcome, Prover
from swizzleperf.proofs.solver import Budget, Cancel
from swizzleperf.proofs.symexec import Executor
from swizzleperf.proofs.values import ProofError

ENCODINGS = ("int", "bv")
MIN_SHRUNK_PROGRAMS = 2 ** 16  # below this, a domain proof is no longer worth reporting
LATE_S = 1.0  # how long a thread may overrun the backstop (or the race's end) before it is abandoned


def _attempt(kind: str, fn: ast.FunctionDef, hook: HookSignature, source: str, constexprs: dict[str, int],
             max_programs: int, budget: Budget, cancel: Cancel) -> Outcome:
    """One encoding's answer, in a fresh z3 context; the integer one shrinks the domain past each overflow."""
    ctx, proven = z3.Context(), {}
    limit, overflow = max_programs, None
    while True:
        domain = Domain.make(kind, hook, limit, ctx)
        outcome = Prover(fn, hook, source, constexprs, domain, budget, proven, cancel).prove()
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


def _encodings(fn: ast.FunctionDef, hook: HookSignature, constexprs: dict[str, int]) -> tuple[str, ...]:
    """Both encodings, or only "int" when some division's divisor is not a constant."""
    ctx = z3.Context()
    domain = Domain.make("int", hook, 1, ctx)
    backend = domain.backend(frozenset())
    inputs = {hook.pid: domain.program("pid")[0], **dict(zip(hook.grid_params, domain.extents))}
    Executor(fn, hook, backend, inputs, constexprs).run()
    divides = any(v.kind == "div_zero" for v in backend.violations)  # recorded only for non-constant divisors
    return ("int",) if divides else ENCODINGS


def _guarded(kind: str, args: tuple, results: dict, cancels: dict, done: threading.Event) -> None:
    """Run an attempt in a thread and record its outcome; a decisive one ends the race."""
    try:
        outcome = _attempt(kind, *args, cancels[kind])
    except ProofError as exc:
        outcome = Outcome(unknown_kind=exc.kind, reason=str(exc))
    except Exception as exc:  # an untrusted hook must not take the prover down
        outcome = Outcome(unknown_kind="error", reason=f"internal error in the {kind} encoding: "
                                                       f"{type(exc).__name__}: {exc}")
    results[kind] = outcome
    if outcome.decisive or len(results) == len(cancels):
        done.set()


def prove_die_count(fn: ast.FunctionDef, hook: HookSignature, source: str, constexprs: dict[str, int],
                    max_programs: int, work: int, deadline: float) -> Outcome:
    """Both encodings in parallel, each with `work` z3 resource units, until one decides (or
    the wall-clock backstop `deadline` passes).

    Each encoding starts from a fresh context, so its answer is a function of the hook and the
    work alone: reusing a context (or its proven queries) from an earlier die count would carry
    over wherever the losing thread of that race happened to be cancelled, and the same run
    recorded different verdicts at different loads."""
    try:
        encodings = _encodings(fn, hook, constexprs)
    except ProofError as exc:
        return Outcome(unknown_kind=exc.kind, reason=str(exc))
    results: dict[str, Outcome] = {}
    cancels = {kind: Cancel() for kind in encodings}
    done = threading.Event()
    threads = []
    for kind in encodings:
        args = (fn, hook, source, constexprs, max_programs, Budget(work, deadline))
        threads.append(threading.Thread(target=_guarded, args=(kind, args, results, cancels, done), daemon=True))
    for thread in threads:
        thread.start()
    done.wait(max(0.0, deadline - time.monotonic()) + LATE_S)
    for cancel in cancels.values():  # the race is over: interrupt whoever is still solving
        cancel.stop()
    for thread in threads:
        thread.join(LATE_S)
    return _combine(dict(results))


def _combine(results: dict[str, Outcome]) -> Outcome:
    decisive = [results[k] for k in ENCODINGS if k in results and results[k].decisive]
    if len({o.proven for o in decisive}) > 1:
        return Outcome(unknown_kind="error", reason="internal: the two encodings disagree")
    if decisive:
        return decisive[0]
    for kind in ENCODINGS:  # the integer encoding's overflow report says the most
        if kind in results:
            return results[kind]
    return Outcome(unknown_kind="timeout", reason="z3 did not answer before the wall-clock backstop")
