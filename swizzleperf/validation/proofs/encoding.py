"""The two encodings a proof can run in: the grid, the program ids and a backend for each.

"int": z3 integers, fast on divisions by grid extents, valid only once no intermediate can
overflow (the prover checks that first). "bv": 32-bit vectors, compiled Triton's exact
semantics, fast when the constants are powers of two. Both describe the same domain: every
extent in [1, max_programs], at most max_programs programs in all, programs in [0, total).
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

from swizzleperf.kernel.contract import HookSignature
from swizzleperf.validation.proofs.backends import IntBackend
from swizzleperf.validation.proofs.bitvec import INDEX_BITS, BitVecBackend

GRID_BITS = 32  # program ids and extents are int32 in Triton


@dataclass(frozen=True)
class SizedHook(HookSignature):
    """A hook of the prover's own making (an order cut from a hook, swizzleperf.validation.proofs.compose): beside
    its grid, run-time sizes it reads, each in [1, max_programs], that add no programs (a cluster
    size the original computed from the extents)."""

    sizes: tuple[str, ...] = ()

    @property
    def params(self) -> tuple[str, ...]:
        return (self.pid, *self.grid_params, *self.sizes, *self.constexprs)

    def render(self) -> str:
        consts = [f"{c}: tl.constexpr" for c in self.constexprs]
        return f"def {self.name}({', '.join([self.pid, *self.grid_params, *self.sizes, *consts])})"


def sizes_of(hook: HookSignature) -> tuple[str, ...]:
    return hook.sizes if isinstance(hook, SizedHook) else ()


@dataclass
class Domain:
    """The grid of one encoding: `extents` feed the hook, `indices` bound its results."""

    kind: str
    ctx: z3.Context
    extents: list
    indices: list
    total: z3.ExprRef
    constraints: list
    max_programs: int
    sizes: list  # a SizedHook's extra sizes, each in [1, max_programs], no part of `total`

    @classmethod
    def make(cls, kind: str, hook: HookSignature, max_programs: int, ctx: z3.Context) -> Domain:
        make = (lambda n: z3.Int(n, ctx)) if kind == "int" else (lambda n: z3.BitVec(n, GRID_BITS, ctx))
        extents = [make(f"grid_{name}") for name in hook.grid_params]
        sizes = [make(f"size_{name}") for name in sizes_of(hook)]
        indices = extents if kind == "int" else [z3.ZeroExt(INDEX_BITS - GRID_BITS, e) for e in extents]
        constraints = [z3.And(e >= 1, e <= max_programs) for e in [*extents, *sizes]]
        total = indices[0]
        for index in indices[1:]:  # bound each partial product, so none is unbounded (or wraps)
            total = total * index
            constraints.append(total <= max_programs)
        return cls(kind, ctx, extents, indices, total, constraints, max_programs, sizes)

    @property
    def bounded(self) -> list:
        """The inputs in [1, max_programs]: the extents, then any sizes."""
        return [*self.extents, *self.sizes]

    def inputs(self, hook: HookSignature, pid: z3.ExprRef) -> dict:
        """The hook's run-time parameters: its program id, the extents and any sizes."""
        return {hook.pid: pid, **dict(zip(hook.grid_params, self.extents)),
                **dict(zip(sizes_of(hook), self.sizes))}

    def program(self, name: str) -> tuple[z3.ExprRef, list]:
        """A program id and the constraint that it lies in [0, total)."""
        if self.kind == "int":
            pid = z3.Int(name, self.ctx)
            return pid, [pid >= 0, pid < self.total]
        pid = z3.BitVec(name, GRID_BITS, self.ctx)
        return pid, [pid >= 0, self.widen(pid) < self.total]

    def backend(self, signed: frozenset):
        return IntBackend(self.ctx, signed) if self.kind == "int" else BitVecBackend(self.ctx)

    def widen(self, term: z3.ExprRef) -> z3.ExprRef:
        """A value comparable with `total` (bit-vectors sign-extended to INDEX_BITS)."""
        if self.kind == "int" or term.size() >= INDEX_BITS:
            return term
        return z3.SignExt(INDEX_BITS - term.size(), term)

    def is_value(self, term: z3.ExprRef) -> bool:
        """Whether a term is an integer value of this encoding (not a boolean)."""
        return z3.is_int(term) if self.kind == "int" else z3.is_bv(term)

    def outside(self, outputs: list) -> list:
        """Per axis, the condition that a result lies outside the grid."""
        return [z3.Or(o < 0, o >= e) for o, e in zip(outputs, self.indices)]

    def model_value(self, model: z3.ModelRef, term: z3.ExprRef) -> int:
        value = model.eval(term, model_completion=True)
        return value.as_long() if self.kind == "int" else value.as_signed_long()
