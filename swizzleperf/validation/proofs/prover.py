"""From a checked hook to a verdict: one proof per die count, under one time budget."""

from __future__ import annotations

import ast
import time

from swizzleperf.errors import RemapRejected
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.remaps.check import hook_body, static_check
from swizzleperf.validation.proofs.certificates import Certificate, certificates_for
from swizzleperf.validation.proofs.compose import cuts
from swizzleperf.validation.proofs.outcome import Outcome
from swizzleperf.validation.proofs.portfolio import prove_die_count
from swizzleperf.validation.proofs.split import split
from swizzleperf.validation.proofs.verdict import ProofVerdict
from swizzleperf.validation.proofs.z3_call import WORK_PER_S

BACKSTOP_FACTOR = 10.0  # the wall-clock backstop, in time limits: at load 6 on 2 cores 4x was reached first
# A hook's proof runs at most five times under the limit: a split's prefix, its rest as an order, a raster and
# sizes, then the hook whole (a hook cut in halves: order, raster, sizes, the whole).
PROOF_PARTS = 5


def backstop_s(time_limit_s: float) -> float:
    return BACKSTOP_FACTOR * time_limit_s + 1.0


def _mentions(fn: ast.FunctionDef, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for stmt in hook_body(fn) for n in ast.walk(stmt))


def prove_composed(fn: ast.FunctionDef, hook: HookSignature, die_counts: list[int], time_limit_s: float,
                   max_programs: int) -> ProofVerdict | None:
    """The hook proven in parts at its latest cut (swizzleperf.validation.proofs.compose): the order, the raster
    and any sizes' range, each within the time limit and only while the parts before it hold; None
    unless every part is proven."""
    started = time.perf_counter()
    halves = next(iter(cuts(fn, hook, max_programs)), None)
    if halves is None:
        return prove_split(fn, hook, die_counts, time_limit_s, max_programs)
    verdicts = []
    for source, signature in [halves.order, halves.raster] + ([halves.sizes] if halves.sizes else []):
        try:
            part = static_check(source, signature)
        except RemapRejected:
            return None
        verdicts.append(prove_checked(part, source, signature, die_counts, time_limit_s, max_programs, compose=False))
        if not verdicts[-1].proven:
            return None
    sizes = halves.order[1].sizes
    taken = (f", taking {', '.join(f'`{s}`' for s in sizes)} as sizes in [1, {max_programs:,}] "
             f"({verdicts[2].seconds:.2f} s to prove that range)" if sizes else "")
    return _proven_in_parts(
        hook, die_counts, time_limit_s, max_programs, started,
        f"in two halves through `{halves.through}`: the order as a 1D hook of the program count "
        f"({verdicts[0].seconds:.2f} s{_how(verdicts[0])}){taken}, the raster on the grid "
        f"({verdicts[1].seconds:.2f} s{_how(verdicts[1])})")


def _how(verdict: ProofVerdict) -> str:
    return f", {verdict.method}" if verdict.method else ""


def _proven_in_parts(hook: HookSignature, die_counts: list[int], time_limit_s: float, max_programs: int,
                     started: float, method: str) -> ProofVerdict:
    """The whole hook's verdict once every part is proven: bijections compose."""
    return ProofVerdict(
        status="proven", hook=hook.render(), die_counts=list(die_counts), proven_die_counts=list(die_counts),
        time_limit_s=time_limit_s, max_programs=max_programs, seconds=time.perf_counter() - started, method=method)


def prove_split(fn: ast.FunctionDef, hook: HookSignature, die_counts: list[int], time_limit_s: float,
                max_programs: int) -> ProofVerdict | None:
    """The hook proven as a prefix and a rest (swizzleperf.validation.proofs.split), the rest in parts where it
    cuts (not also whole: the caller then proves the hook whole); None unless both are proven."""
    started = time.perf_counter()
    parts = split(fn, hook)
    if parts is None:
        return None
    verdicts = []
    for index, (source, signature) in enumerate((parts.prefix, parts.rest)):
        try:
            part = static_check(source, signature)
        except RemapRejected:
            return None
        args = (die_counts, time_limit_s, max_programs)
        if index == 1 and cuts(part, signature, max_programs):  # the rest in parts only: the hook whole comes next
            verdicts.append(prove_composed(part, signature, *args))
        else:
            verdicts.append(prove_checked(part, source, signature, *args, compose=False))
        if verdicts[-1] is None or not verdicts[-1].proven:
            return None
    rest = f" ({verdicts[1].method})" if verdicts[1].method else ""
    return _proven_in_parts(
        hook, die_counts, time_limit_s, max_programs, started,
        f"split at `{parts.outer}`, `{parts.inner}`: `{parts.outer}` and `{parts.inner}` from the program id "
        f"({verdicts[0].seconds:.2f} s), the other coordinates from `{parts.inner}` ({verdicts[1].seconds:.2f} s){rest}")


def prove_checked(fn: ast.FunctionDef, source: str, hook: HookSignature, die_counts: list[int],
                  time_limit_s: float, max_programs: int, compose: bool = True,
                  certificates: list[Certificate] | None = None) -> ProofVerdict:
    """Prove a hook that passed static_check. With `compose`, a hook that cuts into an order and a
    raster is first proven half by half, then, if that fails, whole: each within the time limit, so
    at most PROOF_PARTS times its work in all. `certificates`: the inverses to try (None: those
    certificates.certificates_for finds), for the hook whole, not its parts."""
    composed = prove_composed(fn, hook, die_counts, time_limit_s, max_programs) if compose else None
    if composed is not None:
        return composed
    return prove_each_die_count(fn, source, hook, die_counts, time_limit_s, max_programs, certificates)


def prove_each_die_count(fn: ast.FunctionDef, source: str, hook: HookSignature, die_counts: list[int],
                         time_limit_s: float, max_programs: int, certificates: list[Certificate] | None = None) \
        -> ProofVerdict:
    """The hook proven whole for each die count; one that never reads its die count is proven once.
    Injectivity is asked first through `certificates` (None: certificates_for's) where there are some.

    The budget is counted work, time_limit_s * WORK_PER_S z3 resource units, so that the verdict
    does not depend on the machine's load; each die count gets an equal share of what the ones
    before it left (a few die counts are hard: 8 and 16 cost the XCD-contiguous order 5-8 times
    what 1, 2 and 4 do). The wall clock is only a backstop, BACKSTOP_FACTOR times the limit. The first
    counterexample ends the proof; an unknown die count does not, so a counterexample at a later one is still found.
    """
    started = time.perf_counter()
    deadline = time.monotonic() + backstop_s(time_limit_s)
    verdict = dict(hook=hook.render(), die_counts=list(die_counts), time_limit_s=time_limit_s,
                   max_programs=max_programs)
    if len(hook.constexprs) != 1:
        return ProofVerdict(status="unknown", unknown_kind="unsupported", seconds=time.perf_counter() - started,
                            reason=f"the prover needs exactly one constexpr (the die count); {hook.render()} has "
                                   f"{len(hook.constexprs)}", **verdict)
    todo = die_counts if _mentions(fn, hook.constexprs[0]) else die_counts[:1]
    if certificates is None:
        certificates = certificates_for(fn, hook, todo)
    outcomes: dict[int, Outcome] = {}
    pool, leanings = int(time_limit_s * WORK_PER_S), {}
    for index, die_count in enumerate(todo):
        share = max(pool, 0) // (len(todo) - index)
        outcomes[die_count] = prove_die_count(fn, hook, source, {hook.constexprs[0]: die_count}, max_programs, share,
                                              deadline, certificates, leanings)
        pool -= outcomes[die_count].work
        if outcomes[die_count].counterexample is not None:
            break
    return _verdict(outcomes, hook, die_counts, time.perf_counter() - started, verdict)


def _verdict(outcomes: dict[int, Outcome], hook: HookSignature, die_counts: list[int], seconds: float,
             verdict: dict) -> ProofVerdict:
    """The die counts' outcomes as one verdict: the first counterexample, else the first unknown, else proven
    (saying which die counts an inverse certificate proved)."""
    proven = [d for d, o in outcomes.items() if o.decisive and o.counterexample is None]
    for die_count, outcome in outcomes.items():
        if outcome.counterexample is not None:
            return ProofVerdict(status="counterexample", counterexample=outcome.counterexample,
                                proven_die_counts=proven, seconds=seconds, **verdict)
    for die_count, outcome in outcomes.items():
        if not outcome.decisive:
            reason = outcome.reason
            if reason and not reason.startswith("with "):
                reason = f"with {hook.constexprs[0]}={die_count}: {reason}"
            return ProofVerdict(status="unknown", unknown_kind=outcome.unknown_kind, reason=reason,
                                proven_die_counts=proven, proven_max_programs=outcome.proven_max_programs,
                                seconds=seconds, **verdict)
    ways = [_way(outcomes, hook, "cases", "by cases on {}, each side mapped onto itself"),
            _way(outcomes, hook, "certificate", "one-to-one by an inverse certificate ({})")]
    method = "; ".join(w for w in ways if w) or None
    return ProofVerdict(status="proven", proven_die_counts=list(die_counts), seconds=seconds, method=method, **verdict)


def _way(outcomes: dict[int, Outcome], hook: HookSignature, field: str, text: str) -> str | None:
    """How the die counts whose outcomes name `field` (an Outcome attribute) were proven, or None."""
    named = {d: getattr(o, field) for d, o in outcomes.items() if getattr(o, field)}
    if not named:
        return None
    quote = "`{}`" if field == "cases" else "{}"
    scope = "" if len(named) == len(outcomes) else f" with {hook.constexprs[0]}={', '.join(map(str, named))}"
    return text.format(", ".join(quote.format(v) for v in sorted(set(named.values())))) + scope
