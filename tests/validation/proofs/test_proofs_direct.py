"""direct.py builds the very terms z3's Python operators build (same ids), so proofs keep their answers and work."""

import pytest

z3 = pytest.importorskip("z3")

from swizzleperf.validation.proofs import direct  # noqa: E402
from swizzleperf.validation.proofs.products import gap_axiom, sign_axioms, small_axiom  # noqa: E402


def _terms():
    ctx = z3.Context()
    x, y = z3.Ints("x y", ctx)
    mul = z3.Function("mul", z3.IntSort(ctx), z3.IntSort(ctx), z3.IntSort(ctx))
    return x, y, mul(x, y), mul(y, x)


def test_builders_make_the_operators_terms():
    x, y, m, n = _terms()
    pairs = [(direct.ge(x, 0), x >= 0), (direct.le(x, -1), x <= -1), (direct.gt(x, y), x > y),
             (direct.eq(m, 0), m == 0), (direct.implies(x == 0, y == 0), z3.Implies(x == 0, y == 0)),
             (direct.and_(x >= 0, y >= 1), z3.And(x >= 0, y >= 1)), (direct.or_(x == 0, y == 0), z3.Or(x == 0, y == 0)),
             (direct.add(m, x), m + x), (direct.scale(3, y), 3 * y), (direct.neg(x), -x),
             (direct.app((x + y).decl(), [m, n]), m + n)]
    for built, expected in pairs:
        assert built.get_id() == expected.get_id(), (built, expected)


def test_theorems_are_the_operator_written_ones():
    x, y, m, n = _terms()
    assert sign_axioms(m, x, y)[1].eq(z3.Implies(z3.And(x >= 0, y >= 1), m >= x))
    assert gap_axiom(x, y, x, m, n).eq(z3.Implies(z3.And(x >= 0, y > x), m >= n + x))
    assert small_axiom(x, y, m, 4).eq(z3.Implies(x == 4, m == 4 * y))
