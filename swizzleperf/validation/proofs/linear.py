"""A linear abstraction of an integer query: what z3 decides reliably, where the exact query is erratic.

z3's nonlinear integer reasoning (products of run-time values, division by them) takes 0.2 M to
5 M resource units on the same GROUP_M raster query depending on its seed: too erratic for a
budget of one second per hook. Most remap proofs need no real nonlinear reasoning, only
congruence ("equal factors give equal products") and the division identity. So each nonlinear
term is rewritten, bottom-up:

- a product or a division whose operand has a small known range (a die index `pid % 8`, a
  group's rows `min(M - first_m, 8)`) becomes a select over that operand's values, each branch
  linear (`x * 3`, `x // 5`), with the original operation, abstracted as below, as the last
  branch: an exact rewriting, whatever the range;
- any other product or division becomes an uninterpreted function of its rewritten operands
  (one function per operation, so congruence holds), with the division identity as an axiom:
  for y != 0, x = mul(y, x div y) + x mod y and 0 <= x mod y < |y| (z3's Euclidean division).

Every model of the exact query, with the functions read as real multiplication and division,
is a model of the abstraction and its axioms (the axioms are theorems of the integers). So
"unsatisfiable" is a proof of the exact query; "satisfiable" proves nothing (the functions may
be read otherwise) and the caller asks the exact query. The result is linear integer arithmetic
with uninterpreted functions, which z3 decides by a complete procedure, fast and steadily.
"""

from __future__ import annotations

import z3

from swizzleperf.validation.proofs import direct
from swizzleperf.validation.proofs.cuts import interval

MAX_CASES = 64  # a bounded operand with more values than this is abstracted, not enumerated


class Linearizer:
    """Rewrites formulas of one z3 context; each term once (memoised by id)."""

    def __init__(self, ctx: z3.Context, known: dict[int, tuple[int, int]]):
        self.ctx, self.known = ctx, known
        self.memo: dict[int, z3.ExprRef] = {}
        sort = z3.IntSort(ctx)
        self.mul = z3.Function("mul", sort, sort, sort)
        self.div = z3.Function("div", sort, sort, sort)
        self.mod = z3.Function("mod", sort, sort, sort)
        self.products: dict[int, tuple] = {}  # abstracted products by id: (term, x, y)
        self.divisions: dict[tuple[int, int], tuple] = {}  # (x, y) by ids: (x, y)
        self.intervals: dict[int, tuple] = {}  # cases(), by id: (term, its values or None)

    def rewrite(self, term: z3.ExprRef) -> z3.ExprRef:
        stack, kids = [term], {}
        while stack:  # iterative post-order: hooks unroll into terms deeper than Python recurses
            node = stack[-1]
            key = node.get_id()
            if key in self.memo:
                stack.pop()
                continue
            if key not in kids:  # each node's children once: z3's Python wrappers are the cost here
                kids[key] = self.children(node)
                todo = [k for k in kids[key] if k.get_id() not in self.memo]
                if todo:
                    stack.extend(todo)
                    continue
            stack.pop()
            self.memo[key] = self._node(node, [self.memo[k.get_id()] for k in kids[key]])
        return self.memo[term.get_id()]

    def _node(self, node: z3.ExprRef, kids: list) -> z3.ExprRef:
        if z3.is_mul(node) and len(kids) >= 2:
            out = kids[0]
            for kid in kids[1:]:
                out = self.times(out, kid)
            return out
        if (z3.is_idiv(node) or z3.is_mod(node)) and not z3.is_int_value(kids[1]):
            return self.division(kids[0], kids[1], z3.is_mod(node))
        return direct.app(node.decl(), kids) if kids else node

    def children(self, node: z3.ExprRef) -> list:
        return node.children()

    def cases(self, term: z3.ExprRef) -> list[int] | None:
        """The values of a small-range operand (interval arithmetic), or None; each term's once (the
        term held, so that its id stays its own)."""
        if term.get_id() not in self.intervals:
            self.intervals[term.get_id()] = (term, self._cases(term))
        return self.intervals[term.get_id()][1]

    def _cases(self, term: z3.ExprRef) -> list[int] | None:
        try:
            lo, hi = interval(term, self.known)
        except RecursionError:
            return None
        if hi is None:  # unbounded above: a count, not a small index
            return None
        if lo is None:  # `min(M - first_m, 8)`: the positive values are the ones a remap means
            lo = min(hi, 0)
        return list(range(lo, hi + 1)) if hi - lo < MAX_CASES else None

    def times(self, x: z3.ExprRef, y: z3.ExprRef) -> z3.ExprRef:
        """x * y: a constant factor stays linear, a small-range factor is enumerated, anything
        else is abstracted. (Distributing over sums first was tried: it shares more monomials
        but made the raster's injectivity 6x slower.)"""
        if z3.is_int_value(x) or z3.is_int_value(y):
            return x * y
        for a, b in ((x, y), (y, x)):
            values = self.cases(a)
            if values is not None:
                out = self.abstract_mul(a, b)
                for v in reversed(values):
                    out = z3.If(a == v, b * v, out)
                return out
        return self.abstract_mul(x, y)

    def abstract_mul(self, x, y):
        x, y = sorted((x, y), key=lambda t: t.get_id())  # one function value per unordered pair
        term = self.mul(x, y)
        self.products[term.get_id()] = (term, x, y)
        return term

    def division(self, x, y, remainder: bool) -> z3.ExprRef:
        out = self.abstract_division(x, y, remainder)
        for v in reversed(self.cases(y) or []):
            if v != 0:
                out = z3.If(y == v, x % v if remainder else x / v, out)
        return out

    def abstract_division(self, x, y, remainder: bool):
        key = (x.get_id(), y.get_id())
        if key not in self.divisions:
            self.divisions[key] = (x, y)
            self.abstract_mul(y, self.div(x, y))
        return self.mod(x, y) if remainder else self.div(x, y)

    def axioms(self) -> list:
        """The division identity of each abstracted division (z3's Euclidean division). More
        axioms (the order form `z * y <= x iff z <= x div y`, signs of products) were tried: they
        slowed the injectivity queries 2-10x and did not decide the range queries."""
        out = []
        for x, y in self.divisions.values():
            q, r = self.div(x, y), self.mod(x, y)
            out.append(z3.Implies(y != 0, z3.And(x == self.abstract_mul(y, q) + r, r >= 0,
                                                  r < z3.If(y >= 0, y, -y))))
        return out


def linearize(formulas: list, known: dict[int, tuple[int, int]]) -> list:
    """The abstraction of `formulas` with its axioms (see the module docstring)."""
    if not formulas:
        return []
    rewriter = Linearizer(formulas[0].ctx, known)
    out = [rewriter.rewrite(f) for f in formulas]
    return out + rewriter.axioms()
