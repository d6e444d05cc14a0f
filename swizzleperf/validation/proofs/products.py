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
  that interval arithmetic allows, or, for a computed factor it does not bound (`tall`), each v in
  [1, the formulas' largest numeral]: the sizes a remap means (0 is the zero theorem's; with the
  negative guesses too, twice the axioms, the mi300x swizzled block-first orders took up to 1.5x the work);
- nested divisions: (y div c) div d == y div (c * d) for positive c, d (facts.py).

Each is true of every integer model with `mul` read as multiplication, so, as in linear.py,
"unsatisfiable" proves the exact query and a model proves nothing.

A Prover asks this abstraction of 5-60 queries over one hook's terms; built anew for each, it was a
third of a family proof's time. ProductAbstraction rewrites each term and builds each axiom once per
z3 context, and gives each query exactly what a fresh rewriting of that query alone would.
"""

from __future__ import annotations

import itertools

import z3

from swizzleperf.validation.proofs import direct
from swizzleperf.validation.proofs.facts import nested_division, nested_division_fact, nested_division_facts
from swizzleperf.validation.proofs.linear import MAX_CASES, Linearizer
from swizzleperf.validation.proofs.terms import Terms


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
    """A Linearizer whose products are each one `mul` value, for every query of one context: it logs,
    per term it rewrites, the products and divisions that term's rewriting makes (`events`), so that a
    query's axioms can be those of its own terms (ProductAbstraction)."""

    def __init__(self, ctx: z3.Context, terms: Terms):
        super().__init__(ctx, {})
        self.terms = terms
        self.events: dict[int, list] = {}  # by term id: ("mul", product, x, y) and ("div", (x, y) by ids)
        self.log: list = []
        self.divisions: dict[tuple[int, int], tuple] = {}  # (x, y, x's identity's product, its events)

    def children(self, node: z3.ExprRef) -> list:
        return self.terms.children(node)

    def _node(self, node: z3.ExprRef, kids: list) -> z3.ExprRef:
        self.log = self.events.setdefault(node.get_id(), [])
        return super()._node(node, kids)

    def times(self, x: z3.ExprRef, y: z3.ExprRef) -> z3.ExprRef:
        if z3.is_int_value(x) or z3.is_int_value(y):
            return x * y
        (cx, x), (cy, y) = _coefficient(x), _coefficient(y)
        product = self.abstract_mul(x, y)
        self.log.append(("mul", product, x, y))
        return product if cx * cy == 1 else cx * cy * product

    def division(self, x, y, remainder: bool) -> z3.ExprRef:
        key = (x.get_id(), y.get_id())
        if key not in self.divisions:
            log, self.log = self.log, []
            identity = self.times(y, self.div(x, y))
            self.divisions[key], self.log = (x, y, identity, self.log), log
        self.log.append(("div", key))
        return self.mod(x, y) if remainder else self.div(x, y)


class Used:
    """The products and divisions one query's terms make, in the order a fresh rewriting of it makes
    them, and the small factors to case on (the values of each)."""

    def __init__(self, rewriter: ProductLinearizer, small: int):
        self.rewriter, self.guesses = rewriter, list(range(1, small + 1))  # a computed size's (module docstring)
        self.products: dict[int, tuple] = {}  # by id: (product, x, y), as Linearizer.products
        self.divisions: dict[tuple[int, int], tuple] = {}
        self.small: list[tuple[z3.ExprRef, z3.ExprRef, z3.ExprRef, list[int]]] = []  # (x, y, mul, x's values)

    def add(self, event: tuple) -> None:
        if event[0] == "div":
            if event[1] not in self.divisions:
                self.divisions[event[1]] = entry = self.rewriter.divisions[event[1]]
                for inner in entry[3]:
                    self.add(inner)
            return
        _, product, x, y = event
        if product.get_id() in self.products:
            return
        self.products[product.get_id()] = self.rewriter.products[product.get_id()]
        for a, b in ((x, y), (y, x)):
            values = self.rewriter.cases(a) or (self.guesses if _guessable(a) else None)
            if values:
                self.small.append((a, b, product, values))


class ProductAbstraction:
    """linearize_products for every query of one context, each term rewritten and each axiom built once.

    A query's output is the one a fresh ProductLinearizer gives for it alone, formula for formula
    and in the same order: a term's rewriting depends on the term only (and on the interval bounds
    of the inputs, which are fixed per context), and the axioms are of the products and divisions
    that this query's terms make (Used, replayed from the rewriter's events in its order), never of
    another query's."""

    def __init__(self, ctx: z3.Context):
        self.terms = Terms()
        self.rewriter = ProductLinearizer(ctx, self.terms)
        self.nested: dict[int, tuple | None] = {}  # a division term's nested_division, by id
        self.facts: dict[int, z3.ExprRef] = {}  # nested-division theorems, by their left side's id
        self.tops: dict[int, int] = {}  # the largest numeral up to MAX_CASES in a term (at least 1), by id
        self.topped: set[int] = set()  # the keys of tops
        self.built: dict[tuple, list] = {}  # axioms, by what they are of

    def abstract(self, formulas: list, known: dict[int, tuple[int, int]]) -> list:
        """The abstraction of `formulas` and of the nested-division theorems about them, with its axioms."""
        if not formulas:
            return []
        self.rewriter.known.update(known)  # each input's bounds are the same in every query
        roots = self.terms.add(formulas)
        used = Used(self.rewriter, self.small(roots))
        roots += self.terms.add(self.division_facts(formulas))
        out = [self.rewriter.rewrite(self.terms.nodes[k]) for k in roots]
        for key in self.terms.post_order(roots):
            for event in self.rewriter.events[key]:
                used.add(event)
        return out + self.axioms(used)

    def small(self, roots: list[int]) -> int:
        """The largest numeral of the formulas up to MAX_CASES: the range of the values a factor is
        tried at when interval arithmetic does not bound it (`tall` in [1, N])."""
        for key in self.terms.post_order(roots, self.topped):
            value = abs(self.terms.numerals.get(key, 1))
            own = value if value <= MAX_CASES else 1
            self.tops[key] = max([own, *(self.tops[k] for k in self.terms.kids[key])])
        return max(self.tops[k] for k in roots)

    def division_facts(self, formulas: list) -> list:
        """facts.nested_division_facts(formulas), the same list, each term read and each theorem built once."""
        divisions = [self.terms.nodes[k] for k in self.terms.depth_first(self.terms.add(formulas))
                     if k in self.terms.divisions]
        return nested_division_facts(formulas, divisions, self.nested_of, self.fact_of)

    def nested_of(self, term: z3.ExprRef) -> tuple | None:
        key = term.get_id()
        if key not in self.nested:
            self.nested[key] = nested_division(term)
        return self.nested[key]

    def fact_of(self, outer, y, c, d) -> z3.ExprRef:
        if outer.get_id() not in self.facts:
            self.facts[outer.get_id()] = nested_division_fact(outer, y, c, d)
        return self.facts[outer.get_id()]

    def once(self, key: tuple, build) -> list:
        if key not in self.built:
            self.built[key] = build()
        return self.built[key]

    def axioms(self, used: Used) -> list:
        out = []
        for key, (x, y, identity, _) in used.divisions.items():
            out += self.once(("div", *key), lambda: [division_axiom(x, y, identity, self.rewriter)])
        for key, (m, x, y) in used.products.items():
            out += self.once(("sign", key), lambda: sign_axioms(m, x, y))
        out += self.gap_axioms(used.products)
        for x, y, m, values in used.small:
            out += [self.once(("small", x.get_id(), m.get_id(), v), lambda: [small_axiom(x, y, m, v)])[0]
                    for v in values]
        return out

    def gap_axioms(self, products: dict[int, tuple]) -> list:
        """mul(f, s) >= mul(f, t) + f when f >= 0 and s > t, for products that share the factor f."""
        by_factor: dict[int, list] = {}
        for m, x, y in products.values():
            by_factor.setdefault(x.get_id(), []).append((x, y, m))
            if y.get_id() != x.get_id():
                by_factor.setdefault(y.get_id(), []).append((y, x, m))
        out = []
        for group in by_factor.values():
            for (f, s, ms), (_, t, mt) in itertools.combinations(group, 2):
                out += self.once(("gap", f.get_id(), ms.get_id(), mt.get_id()),
                                 lambda: [gap_axiom(f, s, t, ms, mt), gap_axiom(f, t, s, mt, ms)])
        return out


def division_axiom(x, y, identity, rewriter: ProductLinearizer) -> z3.ExprRef:
    """x == y * (x div y) + x mod y with 0 <= x mod y < |y|, for y != 0 (z3's Euclidean division)."""
    r = rewriter.mod(x, y)
    return z3.Implies(y != 0, z3.And(x == identity + r, r >= 0, r < z3.If(y >= 0, y, -y)))


def sign_axioms(m, x, y) -> list:
    """Zero, signs, and |x * y| >= |x| when y != 0 (built through direct: thousands per proof)."""
    out = [direct.implies(direct.or_(direct.eq(x, 0), direct.eq(y, 0)), direct.eq(m, 0))]
    for a, b in ((x, y), (y, x)):
        out += [direct.implies(direct.and_(direct.ge(a, 0), direct.ge(b, 1)), direct.ge(m, a)),
                direct.implies(direct.and_(direct.ge(a, 0), direct.le(b, -1)), direct.le(m, direct.neg(a))),
                direct.implies(direct.and_(direct.le(a, 0), direct.ge(b, 1)), direct.le(m, a)),
                direct.implies(direct.and_(direct.le(a, 0), direct.le(b, -1)), direct.ge(m, direct.neg(a)))]
    return out


def gap_axiom(f, s, t, ms, mt) -> z3.BoolRef:
    """mul(f, s) >= mul(f, t) + f when f >= 0 and s > t."""
    return direct.implies(direct.and_(direct.ge(f, 0), direct.gt(s, t)), direct.ge(ms, direct.add(mt, f)))


def small_axiom(x, y, m, value: int) -> z3.BoolRef:
    """x == value implies mul(x, y) == value * y."""
    return direct.implies(direct.eq(x, value), direct.eq(m, direct.scale(value, y)))


def linearize_products(formulas: list, known: dict[int, tuple[int, int]]) -> list:
    """The abstraction of `formulas` and of the nested-division theorems about them, with its axioms
    (a Prover keeps one ProductAbstraction for all its queries instead)."""
    return ProductAbstraction(formulas[0].ctx).abstract(formulas, known) if formulas else []
