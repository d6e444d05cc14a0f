"""The linear abstraction (swizzleperf.validation.proofs.linear): sound, and broken rasters are still refuted.

The abstraction only ever proves; a model of it is never a counterexample. So (1) every true
model of a hook's formulas must remain a model of its abstraction (else "unsat" would not mean
"proven"), and (2) GROUP_M rasters with realistic bugs, whose injectivity query now goes
through the abstraction first, must still get a counterexample that a plain-Python copy of the
hook (C division, int32 wrap) confirms.
"""

from __future__ import annotations

import math
import textwrap

import pytest

z3 = pytest.importorskip("z3")

from swizzleperf.kernel.contract import HookSignature  # noqa: E402
from swizzleperf.remaps.check import static_check  # noqa: E402
from swizzleperf.remaps.families import FAMILIES  # noqa: E402
from swizzleperf.validation.proofs.concrete import evaluate_program  # noqa: E402
from swizzleperf.validation.proofs.encoding import Domain  # noqa: E402
from swizzleperf.validation.proofs.entry import prove_bijective  # noqa: E402
from swizzleperf.validation.proofs.linear import linearize  # noqa: E402
from swizzleperf.validation.proofs.queries import Prover  # noqa: E402
from swizzleperf.validation.proofs.z3_call import Budget  # noqa: E402

H2 = HookSignature("swizzle", "pid", ("num_pid_m", "num_pid_n"), ("NUM_XCDS",))


def hook(body: str) -> str:
    return f"@triton.jit\n{H2.render()}:\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"


def cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def cmod(a: int, b: int) -> int:
    return a - b * cdiv(a, b)


def raster_py(lid: int, m: int, n: int, row_shift: int = 0, tail_rows: bool = True) -> tuple[int, int]:
    """The GROUP_M=8 raster with C division; row_shift and tail_rows=False are the two bugs."""
    row = cdiv(lid + row_shift, n)
    first_m = row - cmod(row, 8)
    rows = min(m - first_m, 8)
    local = lid - first_m * n
    return first_m + cmod(local, rows), cdiv(local, rows if tail_rows else 8)


WRONG_TAIL = hook('''
    """GROUP_M=8, but the column divides by 8 even in the last, shorter group."""
    row = pid // num_pid_n
    first_m = row - row % 8
    rows = min(num_pid_m - first_m, 8)
    local = pid - first_m * num_pid_n
    return first_m + local % rows, local // 8
''')

OFF_BY_ONE = hook('''
    """GROUP_M=8 with the row of the next program: wrong at each group's last program."""
    row = (pid + 1) // num_pid_n
    first_m = row - row % 8
    rows = min(num_pid_m - first_m, 8)
    local = pid - first_m * num_pid_n
    return first_m + local % rows, local // rows
''')


def test_a_group_raster_with_a_wrong_tail_gets_a_confirmed_collision():
    """In range everywhere, so the injectivity query (abstraction first) must find it."""
    verdict = prove_bijective(WRONG_TAIL, H2, die_counts=(1,), time_limit_s=10.0, in_child=False)
    assert verdict.status == "counterexample" and verdict.counterexample.kind == "collision", verdict.message
    cex = verdict.counterexample
    (m, n), (a, b) = cex.grid, cex.programs
    assert m % 8 != 0 and a != b and 0 <= a < m * n and 0 <= b < m * n
    python = [raster_py(p, m, n, tail_rows=False) for p in (a, b)]
    assert python[0] == python[1] == cex.logical and 0 <= cex.logical[0] < m and 0 <= cex.logical[1] < n


def test_a_group_raster_with_an_off_by_one_row_is_refuted():
    """The last program's row is one past the grid: rows = num_pid_m - first_m is 0 there."""
    verdict = prove_bijective(OFF_BY_ONE, H2, die_counts=(1,), time_limit_s=10.0, in_child=False)
    assert verdict.status == "counterexample", verdict.message
    cex = verdict.counterexample
    (m, n), p = cex.grid, cex.programs[0]
    if cex.kind == "undefined":
        with pytest.raises(ZeroDivisionError):
            raster_py(p, m, n, row_shift=1)
    elif cex.kind == "collision":
        assert raster_py(p, m, n, row_shift=1) == raster_py(cex.programs[1], m, n, row_shift=1) == cex.logical
    else:
        assert cex.kind == "out_of_range" and raster_py(p, m, n, row_shift=1) == cex.logical


def test_the_correct_group_raster_is_proven_through_the_abstraction():
    verdict = prove_bijective(FAMILIES["grouped"](H2, group_m=8), H2, die_counts=(1,), time_limit_s=1.0,
                              in_child=False)
    assert verdict.status == "proven", verdict.message


@pytest.mark.parametrize("source", [FAMILIES["xcd_grouped"](H2, group_m=8), WRONG_TAIL, OFF_BY_ONE])
def test_every_real_model_is_a_model_of_the_abstraction(source):
    """Pin the grid, both programs and their results to concrete values the hook really computes
    (some colliding, for the broken ones): the abstraction must stay satisfiable, or an "unsat"
    from it would prove something false."""
    fn = static_check(source, H2)
    ctx = z3.Context()
    domain = Domain.make("int", H2, 2 ** 31 - 1, ctx)
    prover = Prover(fn, H2, source, {"NUM_XCDS": 8}, domain, Budget(10 ** 9, math.inf), {})
    a, b = prover.translate("pid_a", frozenset()), prover.translate("pid_b", frozenset())
    for grid, pids in [((13, 5), (0, 64)), ((9, 7), (55, 62)), ((20, 3), (47, 48)), ((1, 1), (0, 0))]:
        runs = [evaluate_program(fn, H2, {"NUM_XCDS": 8}, grid, p) for p in pids]
        pinned = [e == v for e, v in zip(domain.extents, grid)]
        for copy, run in zip((a, b), runs):
            pinned += [copy.pid == run.pid, *[o == v for o, v in zip(copy.outputs, run.logical)]]
        formulas = linearize([*domain.constraints, *a.bounds, *b.bounds, *pinned], prover.known())
        solver = z3.Solver(ctx=ctx)
        solver.add(*formulas)
        assert solver.check() == z3.sat, (grid, pids)
