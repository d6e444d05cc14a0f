"""The linear abstraction, with theorems about its products: for the orders whose sizes are run-time values.

linear.py abstracts each product of two run-time values as an uninterpreted function `mul`, and
knows nothing of it but congruence and the division identity. That decides the GROUP_M raster,
but not a cluster-round order (`(pid // per_round) * per_round + (pid % N) * cluster + ...` with
a run-time cluster): its proof needs that a multiple of `cluster` changes by at least `cluster`
when its other factor changes, which congruence cannot say. Here every product stays one
function value, a numeral factor is pulled out (`mul(8 * c, r)` is `8 * mul(c, r)`, so that
products of one size share a factor), and these theorems of integer multiplication are added:

- zero and magnitude: a zero factor gives zero; |x * y| >= |x|, with the product's sign, when
  y != 0;
- gaps: for two products with a common factor f >= 0, mul(f, s) >= mul(f, t) + f when s > t;
- small factors (a die index, `pid % 8`): x == v implies mul(x, y) == v * y, for each value v
  that interval arithmetic allows;
- nested divisions: (y div c) div d == y div (c * d) for positive c, d (facts.py).

Each is true of every integer model with `mul` read as multiplication, so, as in linear.py,
"unsatisfiable" proves the exact query and a model proves nothing.
"""

from __future__ import annotations

import itertools

import z3

from swizzleperf.proofs.facts import nested_division_facts
from swizzleperf.proofs.linear import MAX_CASES, Linearizer


def _coefficient(term: z3.ExprRef) -> tuple[int, z3.ExprRef]:
    """`8 * c` as (8, c); any other term as (1, term)."""
    if z3.is_mul(term) and term.num_args() == 2:
        for k in (0, 1):
            if z3.is_int_value(term.arg(k)) and not z3.is_int_value(term.arg(1 - k)):
                return term.arg(k).as_long(), term.arg(1 - k)
    return 1, term


def _guessable(term: z3.ExprRef) -> bool:
    """Whether a factor may be small though its interval is unknown: a computed value (`tall`), not an
    input or a quotient, which are as large as the grid."""
    return not (z3.is_const(term) or z3.is_app(term) and term.decl().kind() == z3.Z3_OP_UNINTERPRETED)


class ProductLinearizer(Linearizer):
    """A Linearizer whose products are each one `mul` value, with the theorems above as axioms."""

    def __init__(self, ctx: z3.Context, known: dict[int, tuple[int, int]], small: int):
        super().__init__(ctx, known)
        self.guesses = list(range(-small, small + 1))
        self.seen: set[int] = set()
        self.small: list[tuple[z3.ExprRef, z3.ExprRef, z3.ExprRef, list[int]]] = []  # (x, y, mul, x's values)

    def times(self, x: z3.ExprRef, y: z3.ExprRef) -> z3.ExprRef:
        if z3.is_int_value(x) or z3.is_int_value(y):
            return x * y
        (cx, x), (cy, y) = _coefficient(x), _coefficient(y)
        product = self.abstract_mul(x, y)
        if product.get_id() not in self.seen:
            self.seen.add(product.get_id())
            for a, b in ((x, y), (y, x)):
                values = self.cases(a) or (self.guesses if _guessable(a) else None)
                if values:
                    self.small.append((a, b, product, values))
        return product if cx * cy == 1 else cx * cy * product

    def division(self, x, y, remainder: bool) -> z3.ExprRef:
        return self.abstract_division(x, y, remainder)

    def abstract_division(self, x, y, remainder: bool):
        if (x.get_id(), y.get_id()) not in self.divisions:
            self.divisions[x.get_id(), y.get_id()] = (x, y)
            self.times(y, self.div(x, y))
        return self.mod(x, y) if remainder else self.div(x, y)

    def axioms(self) -> list:
        out = []
        for x, y in self.divisions.values():
            q, r = self.div(x, y), self.mod(x, y)
            out.append(z3.Implies(y != 0, z3.And(x == self.times(y, q) + r, r >= 0, r < z3.If(y >= 0, y, -y))))
        return out + self.sign_axioms() + self.gap_axioms() + self.small_axioms()

    def sign_axioms(self) -> list:
        """Zero, signs, and |x * y| >= |x| when y != 0."""
        out = []
        for m, x, y in self.products.values():
            out.append(z3.Implies(z3.Or(x == 0, y == 0), m == 0))
            for a, b in ((x, y), (y, x)):
                out += [z3.Implies(z3.And(a >= 0, b >= 1), m >= a), z3.Implies(z3.And(a >= 0, b <= -1), m <= -a),
                        z3.Implies(z3.And(a <= 0, b >= 1), m <= a), z3.Implies(z3.And(a <= 0, b <= -1), m >= -a)]
        return out

    def gap_axioms(self) -> list:
        """mul(f, s) >= mul(f, t) + f when f >= 0 and s > t, for products that share the factor f."""
        by_factor: dict[int, list] = {}
        for m, x, y in self.products.values():
            by_factor.setdefault(x.get_id(), []).append((x, y, m))
            if y.get_id() != x.get_id():
                by_factor.setdefault(y.get_id(), []).append((y, x, m))
        out = []
        for group in by_factor.values():
            for (f, s, ms), (_, t, mt) in itertools.combinations(group, 2):
                out += [z3.Implies(z3.And(f >= 0, s > t), ms >= mt + f), z3.Implies(z3.And(f >= 0, t > s), mt >= ms + f)]
        return out

    def small_axioms(self) -> list:
        return [z3.Implies(x == v, m == v * y) for x, y, m, values in self.small for v in values]


def _small(formulas: list) -> int:
    """The largest numeral of the formulas up to MAX_CASES: the range of the values a factor is
    tried at when interval arithmetic does not bound it (`tall` in [1, N])."""
    seen, stack, top = set(), list(formulas), 1
    while stack:
        node = stack.pop()
        if node.get_id() in seen:
            continue
        seen.add(node.get_id())
        if z3.is_int_value(node) and abs(node.as_long()) <= MAX_CASES:
            top = max(top, abs(node.as_long()))
        stack.extend(node.children())
    return top


def linearize_products(formulas: list, known: dict[int, tuple[int, int]]) -> list:
    """The abstraction of `formulas` and of the nested-division theorems about them, with its axioms."""
    if not formulas:
        return []
    rewriter = ProductLinearizer(formulas[0].ctx, known, _small(formulas))
    out = [rewriter.rewrite(f) for f in [*formulas, *nested_division_facts(formulas)]]
    return out + rewriter.axioms()
