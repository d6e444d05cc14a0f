"""Inverse certificates: a hook proven one-to-one by a function that undoes it.

If some g satisfies g(f(x)) = x for every program x of every grid, f is one-to-one, and with
query (1) (every result in the grid: swizzleperf.validation.proofs.queries) it maps [0, total) onto the grid,
total cells, so it is a bijection. Asking z3 for an x with g(f(x)) != x takes one copy of f where
injectivity takes two: the chunked XCD order's injectivity is 0.1-0.2 s with its inverse (in bit
vectors), 0.2-0.3 s per die count without.

Nothing about g needs to be trusted: it is any function of f's results, the extents and the die
count, translated by the same executor (its operations are z3 terms, total functions even where
it divides by zero; what it would do in Triton does not matter). So a wrong g only fails to prove:
a model of g(f(x)) != x is no counterexample to f, and the prover goes on with query (2). The hook
is still translated from its own source; the family labels only name which inverses
(swizzleperf.remaps.inverses) are tried: for a 1D hook (a hook, or the order a 2D or 3D hook is cut
into), those of the 1D orders the offline search uses that undo it on a few sample grids.
"""

from __future__ import annotations

import ast
import functools
import itertools
from dataclasses import dataclass

import z3

from swizzleperf.errors import RemapRejected
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.remaps.check import static_check
from swizzleperf.remaps.inverses import InverseSignature, inverse_signature, order_inverses
from swizzleperf.validation.proofs import concrete
from swizzleperf.validation.proofs.backends import ConcreteBackend
from swizzleperf.validation.proofs.encoding import sizes_of
from swizzleperf.validation.proofs.outcome import Outcome
from swizzleperf.validation.proofs.queries import FIRST_SLICE, Prover
from swizzleperf.validation.proofs.sym_values import ProofError
from swizzleperf.validation.proofs.symexec import Executor
from swizzleperf.validation.proofs.terms import children
from swizzleperf.validation.proofs.z3_call import ABSTRACTION_STRATEGIES

# g(f(x)) != x is decided by the plain solver in one run or not soon: restarts only split its work (the
# XCD-contiguous order's at 4 dies: 0.26 M units in one run, undecided in 4 M split six ways).
CERTIFICATE_STRATEGIES = ABSTRACTION_STRATEGIES
# (program count, stride): the programs of 1D grids a certificate must invert before z3 is asked, at the
# smallest and largest die count; 4099 is above 16 dies x 128-id chunks, and neither divides by 16.
SAMPLES = ((4099, 97), (37, 1))
MAX_CERTIFICATES = 2  # z3 is asked about at most this many (two orders can agree on every sample grid)


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
def _order_inverses(hook: HookSignature) -> list[Certificate]:
    """The 1D orders' inverses, parsed only (our own source; static_check comes once one passes the samples)."""
    signature = inverse_signature(hook)
    return [Certificate(label, source, ast.parse(source).body[0], signature)
            for label, source in order_inverses(hook)]


def certificates_for(fn: ast.FunctionDef, hook: HookSignature, die_counts: list[int]) -> list[Certificate]:
    """The inverses worth asking z3 about, for a 1D hook (a hook, or the order a hook is cut into):
    those of the 1D orders (swizzleperf.remaps.inverses.order_inverses) that undo it on the sample grids.
    None for other hooks: their proofs stall on the range, not on injectivity (and the orders they
    are cut into get theirs), nor for an order that takes sizes."""
    if hook.ndim != 1 or sizes_of(hook) or len(hook.constexprs) != 1:
        return []

    @functools.cache
    def hook_at(count: int, die_count: int, pid: int) -> int:
        return concrete.evaluate_program(fn, hook, {hook.constexprs[0]: die_count}, (count,), pid).logical[0]

    tried = sorted({min(die_counts), max(die_counts)}, reverse=True)
    found = []
    for candidate in _order_inverses(hook):
        try:
            undoes = _undoes(candidate, hook_at, hook, tried)
        except ProofError:  # the hook (or the inverse) is outside what the executor translates: no certificate
            return found
        checked = certificate(candidate.label, candidate.source, hook) if undoes else None
        found += [checked] if checked else []
        if len(found) == MAX_CERTIFICATES:
            break
    return found


def _undoes(cert: Certificate, hook_at, hook: HookSignature, die_counts: list[int]) -> bool:
    """Whether g(f(x)) = x on the sample grids, evaluated exactly (a cheap filter, not a proof);
    hook_at(count, die count, pid) is f's result."""
    for (count, step), die_count in itertools.product(SAMPLES, die_counts):
        constexprs = {hook.constexprs[0]: die_count}
        for pid in range(0, count, step):
            inputs = {cert.signature.coords[0]: hook_at(count, die_count, pid), hook.grid_params[0]: count}
            if Executor(cert.fn, cert.signature, ConcreteBackend(), inputs, constexprs).outputs()[0] != pid:
                return False
    return True


def prefers_bit_vectors(outputs: list, cert: Certificate, domain, constexprs: dict[str, int]) -> bool:
    """Whether the hook's results (integer terms) and the certificate's, on free coordinates, multiply
    and divide only by constants: then bit vectors decide g(f(x)) = x fast (the chunked XCD order at 4
    dies: 0.05 s, 1 M units as integers), where the integer encoding is better at the rest."""
    coords = {c: z3.Int(c, domain.ctx) for c in cert.signature.coords}
    inputs = {**coords, **dict(zip(cert.signature.grid_params, domain.extents))}
    try:
        back = Executor(cert.fn, cert.signature, domain.backend(frozenset()), inputs, constexprs).outputs()
    except ProofError:  # no use as a certificate (CertifiedProver drops it); the hook's encodings stay as they were
        return False
    return _constant_arithmetic([*outputs, *back])


def _constant_arithmetic(terms: list) -> bool:
    seen, todo = set(), list(terms)
    while todo:
        term = todo.pop()
        if term.get_id() in seen or not z3.is_app(term):
            continue
        seen.add(term.get_id())
        args = children(term)  # read through z3's C API (swizzleperf.validation.proofs.terms)
        variable = [not isinstance(a, z3.IntNumRef) for a in args]
        op = term.decl().kind() if args else None
        if op == z3.Z3_OP_MUL and sum(variable) > 1 or op in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD) and variable[1]:
            return False
        todo += args
    return True


class CertifiedProver(Prover):
    """A Prover whose query (2) asks, for each certificate g, "is there a program x with g(f(x)) != x?",
    in the first round (one solver run with the round's slice: it decides there or not soon), in bit
    vectors only. As integers the block-first order's inverse decides in 0.3-1.5 s (group 2 at 4 dies:
    0.75 s instead of 1.6 s), but what it spends, decided or not, costs other instances near the budget
    their proof (group 2 at 8 or 16 dies, whether asked once or every round, with or without hints).
    Its unsat, with query (1), proves the hook one-to-one; a model only means g is no inverse. Then,
    or if none decides, the usual query (2)."""

    def __init__(self, *args, certificates: list[Certificate] = ()):
        super().__init__(*args)
        self.pending = list(certificates)

    def inverse_of(self, certificate: Certificate, outputs: list):
        """g applied to the hook's results (as int32 values in the bit-vector encoding), widened."""
        if self.domain.kind != "int":
            outputs = [z3.Extract(31, 0, o) for o in outputs]
        sig = certificate.signature
        inputs = {**dict(zip(sig.coords, outputs)), **dict(zip(sig.grid_params, self.domain.extents))}
        backend = self.domain.backend(frozenset())  # g's own events do not matter: it is any function
        return Executor(certificate.fn, sig, backend, inputs, self.constexprs).outputs()[0]

    def injectivity(self) -> Outcome | None:
        """The cheap abstractions first (they settle the XCD-contiguous order at 8 and 16 dies, where its
        inverse does not within a slice), then each certificate, then the exact query (2)."""
        a, b = self.translate("pid_a", self.signed), self.translate("pid_b", self.signed)
        if self.abstractions_hold(a, b):
            return Outcome(proven=True)
        while self.pending and self.slice == FIRST_SLICE and self.domain.kind == "bv":
            certificate = self.pending.pop(0)
            try:
                back = self.inverse_of(certificate, a.outputs)
            except ProofError:  # an inverse the executor cannot translate proves nothing; the hook's proof goes on
                continue
            model = self.check([*a.bounds, back != self.domain.widen(a.pid)],
                               f"whether the inverse of {certificate.label} undoes the hook",
                               strategies=CERTIFICATE_STRATEGIES)
            if model is None:
                return Outcome(proven=True, certificate=certificate.label)
        return self.exactly(a, b)
