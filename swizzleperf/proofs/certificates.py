"""Inverse certificates: a hook proven one-to-one by a function that undoes it.

If some g satisfies g(f(x)) = x for every program x of every grid, f is one-to-one, and with
query (1) (every result in the grid: swizzleperf.proofs.solve) it maps [0, total) onto the grid,
total cells, so it is a bijection. Asking z3 for an x with g(f(x)) != x takes one copy of f where
injectivity takes two, and z3 settles it fast where f divides by symbolic sizes (the cluster
rounds of swizzled attention orders, which no other proof here settles within the budget).

Nothing about g needs to be trusted: it is any function of f's results, the extents and the die
count. Translated by the same executor (its operations are z3 terms, total functions even where
it divides by zero; what it would do in Triton does not matter), so a wrong g only fails to
prove: a model of g(f(x)) != x is no counterexample to f, and the caller falls back to the other
proofs. The hook itself is still translated from its own source; a family label only picks
which inverse (swizzleperf.inverses) to try: those of the family instances the search proposes
whose normalised source equals the hook's.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

import z3

from swizzleperf.errors import RemapRejected
from swizzleperf.hardware import PRESETS
from swizzleperf.inverses import InverseSignature, inverse_signature, render_inverse
from swizzleperf.kernel import HookSignature
from swizzleperf.proofs.solve import UNDECIDED, Outcome, Prover
from swizzleperf.proofs.solver import ABSTRACTION_STRATEGIES
from swizzleperf.proofs.symexec import Executor
from swizzleperf.remap import normalise, static_check


# g(f(x)) != x is decided by the plain solver in one run or not soon: restarts only split its work (the
# XCD-contiguous order's at 4 dies: 0.26 M units in one run, undecided in 4 M split six ways).
CERTIFICATE_STRATEGIES = ABSTRACTION_STRATEGIES


@dataclass(frozen=True)
class Certificate:
    """A claimed inverse of a hook: `label` says where it came from (a family instance)."""

    label: str
    source: str
    fn: ast.FunctionDef
    signature: InverseSignature


def certificate(label: str, source: str, hook: HookSignature) -> Certificate | None:
    """The inverse source as a certificate for `hook`, or None if it is not an inverse's signature
    for this hook or leaves the remap subset (then it is ignored)."""
    signature = inverse_signature(hook)
    try:
        return Certificate(label, source, static_check(source, signature), signature)
    except RemapRejected:
        return None


@functools.lru_cache(maxsize=16)
def _family_inverses(hook: HookSignature) -> dict[str, tuple[str, str]]:
    """Normalised source -> (label, inverse source) of every instance the offline search proposes for
    this hook on any preset (one-L2 presets render literal die counts, multi-die ones NUM_XCDS)."""
    from swizzleperf.proposers.search import candidate_space

    found: dict[str, tuple[str, str]] = {}
    for hw in PRESETS.values():
        for instances in candidate_space(hook, hw).values():
            for instance in instances:
                inverse = render_inverse(instance, hook)
                if inverse is not None:
                    found.setdefault(normalise(instance.render(hook)), (instance.label, inverse))
    return found


def certificates_for(source: str, hook: HookSignature) -> list[Certificate]:
    """The inverse of the family instance whose normalised source is the hook's, if there is one."""
    try:
        match = _family_inverses(hook).get(normalise(source))
    except SyntaxError:
        return []
    made = certificate(*match, hook) if match else None
    return [made] if made else []


class CertifiedProver(Prover):
    """A Prover whose query (2) is "is there a program x with g(f(x)) != x?", for one certificate g.

    Query (1) runs as usual; its unsat makes g's question a proof of injectivity. Undecided in a
    round, the question is asked again with twice the work; a model means g is no inverse: the
    attempt ends, not decisive (the caller proves the hook otherwise)."""

    def __init__(self, *args, certificate: Certificate):
        super().__init__(*args)
        self.certificate = certificate

    def inverse_of(self, outputs: list):
        """g applied to the hook's results (as int32 values in the bit-vector encoding), widened."""
        if self.domain.kind != "int":
            outputs = [z3.Extract(31, 0, o) for o in outputs]
        sig = self.certificate.signature
        inputs = {**dict(zip(sig.coords, outputs)), **dict(zip(sig.grid_params, self.domain.extents))}
        backend = self.domain.backend(frozenset())  # g's own events do not matter: it is any function
        return Executor(self.certificate.fn, sig, backend, inputs, self.constexprs).outputs()[0]

    def injectivity(self) -> Outcome | None:
        a = self.translate("pid_a", self.signed)
        back = self.inverse_of(a.outputs)
        query = [*a.bounds, back != self.domain.widen(a.pid)]
        what = f"whether the inverse of {self.certificate.label} undoes the hook"
        import os
        if os.environ.get("CERT_ABS") and self.abstractly([*self.domain.constraints, *query], what) is None:
            return Outcome(proven=True)
        model = self.check(query, what, strategies=CERTIFICATE_STRATEGIES)
        if model is None:
            return Outcome(proven=True)
        if model is UNDECIDED:
            return None
        return Outcome(unknown_kind="error", reason=f"the inverse of {self.certificate.label} does not undo the hook "
                                                    f"(program {model.get('pid_a')}); no counterexample to the hook")
