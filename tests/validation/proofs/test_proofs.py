"""The bijectivity prover (swizzleperf.validation.proofs.entry): backdoors, Triton's semantics, unknowns, the API.

Every counterexample is checked against a hand-written Python copy of the hook with C-style
division and int32 wrap-around, not against the prover's own evaluator.
"""

from __future__ import annotations

import json
import math
import textwrap

import numpy as np
import pytest

pytest.importorskip("z3")

from swizzleperf.kernel.contract import HookSignature  # noqa: E402
from swizzleperf.remaps.check import static_check  # noqa: E402
from swizzleperf.remaps.evaluate.evaluator import evaluate  # noqa: E402
from swizzleperf.remaps.families import FAMILIES  # noqa: E402
from swizzleperf.validation.bijectivity import bijectivity_grids  # noqa: E402
from swizzleperf.validation.proofs.concrete import evaluate_program  # noqa: E402
from swizzleperf.validation.proofs.entry import ProofVerdict, prove_bijective  # noqa: E402

H1 = HookSignature("swizzle", "pid", ("num_pids",), ("NUM_XCDS",))
H2 = HookSignature("swizzle", "pid", ("num_pid_m", "num_pid_n"), ("NUM_XCDS",))
H3 = HookSignature("swizzle", "pid", ("num_q_blocks", "batch_size", "num_heads"), ("NUM_XCDS",))
INT32_MAX = 2 ** 31 - 1


def hook(body: str, sig: HookSignature = H1) -> str:
    return f"@triton.jit\n{sig.render()}:\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"


def prove(source: str, sig: HookSignature = H1, **kwargs) -> ProofVerdict:
    kwargs.setdefault("time_limit_s", 20.0)
    return prove_bijective(source, sig, in_child=False, **kwargs)


# --- plain-Python copies of the hooks: C division, int32 wrap-around --------------------------

def i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - 2 ** 32 if x >= 2 ** 31 else x


def cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def cmod(a: int, b: int) -> int:
    return a - b * cdiv(a, b)


def xcd_contiguous_py(pid: int, count: int, n: int) -> int:
    """families.xcd_contiguous, every operation wrapped to int32 as compiled Triton does."""
    xcd, local = cmod(pid, n), cdiv(pid, n)
    q = cdiv(i32(i32(count + n) - 1), n)
    tall = i32(count - i32((q - 1) * n))
    if xcd < tall:
        return i32(i32(xcd * q) + local)
    return i32(i32(i32(tall * q) + i32((xcd - tall) * i32(q - 1))) + local)


def assert_collision(verdict: ProofVerdict, fn, dies: int | None = None) -> None:
    """The verdict names two distinct programs the Python copy maps to one in-range index."""
    assert verdict.status == "counterexample", verdict.message
    cex = verdict.counterexample
    assert cex.kind == "collision", cex.message
    a, b = cex.programs
    n = dies if dies is not None else cex.constexprs["NUM_XCDS"]
    assert a != b and 0 <= a < math.prod(cex.grid) and 0 <= b < math.prod(cex.grid)
    assert fn(a, *cex.grid, n) == fn(b, *cex.grid, n) == cex.logical
    assert all(0 <= c < e for c, e in zip(cex.logical, cex.grid))


# --- backdoors: wrong only somewhere the sampled check does not look ---------------------------

GRID_1000001 = hook('''
    """XCD-contiguous, with a "special case" for one grid size."""
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    q = (num_pids + NUM_XCDS - 1) // NUM_XCDS
    tall = num_pids - (q - 1) * NUM_XCDS
    if xcd < tall:
        lid = xcd * q + local
    else:
        lid = tall * q + (xcd - tall) * (q - 1) + local
    if num_pids == 1000001:
        lid = lid // 2 * 2
    return lid
''')


def grid_1000001_py(pid, count, n):
    lid = xcd_contiguous_py(pid, count, n)
    return (cdiv(lid, 2) * 2 if count == 1000001 else lid,)


def test_a_remap_wrong_only_on_grid_1000001_passes_the_sampled_check_but_not_the_proof():
    assert (1000001,) not in bijectivity_grids(H1, [], 8)  # the sampled check looks elsewhere
    verdict = prove(GRID_1000001, max_programs=2 ** 24 - 1)
    assert_collision(verdict, grid_1000001_py)
    assert verdict.counterexample.grid == (1000001,)


def test_the_1000001_backdoor_is_found_on_the_full_int32_domain_too():
    """Past ~2**31 - N programs this remap's `count + N - 1` wraps; the prover shrinks the domain
    for the integer encoding and still finds the one bad grid below it."""
    verdict = prove(GRID_1000001)
    assert_collision(verdict, grid_1000001_py)
    assert verdict.counterexample.grid == (1000001,)


def test_a_remap_wrong_only_for_program_2_pow_20():
    source = hook("return tl.where(pid == 1048576, 0, pid)")
    verdict = prove(source)
    assert_collision(verdict, lambda p, g, n: (0 if p == 2 ** 20 else p,))
    assert verdict.counterexample.programs == [0, 2 ** 20]
    assert verdict.counterexample.grid[0] > 2 ** 20


def test_a_2d_remap_wrong_only_when_num_pid_m_is_33():
    source = hook('''
        pid_m = pid // num_pid_n
        pid_n = pid % num_pid_n
        if num_pid_m == 33:
            pid_n = pid_n // 2 * 2
        return pid_m, pid_n
    ''', H2)

    def python(p, m, n, dies):
        pid_m, pid_n = cdiv(p, n), cmod(p, n)
        return (pid_m, cdiv(pid_n, 2) * 2 if m == 33 else pid_n)
    verdict = prove(source, H2)
    assert_collision(verdict, python)
    assert verdict.counterexample.grid[0] == 33


def test_a_remap_wrong_only_at_grid_32768():
    source = hook('''
        if num_pids == 32768:
            return (pid * 2) % num_pids
        return pid
    ''')
    verdict = prove(source)
    assert_collision(verdict, lambda p, g, n: ((p * 2) % g if g == 32768 else p,))
    assert verdict.counterexample.grid == (32768,)


UNLESS_8 = hook('''
    """A transpose onto 8 rows that reads the die count in one place and hard-codes 8 in another."""
    if num_pids % 8 != 0:
        return pid
    rows = num_pids // 8
    return (pid % NUM_XCDS) * rows + pid // 8
''')


def test_a_remap_wrong_unless_num_xcds_is_8():
    def python(p, g, n):
        return (p,) if g % 8 else (cmod(p, n) * (g // 8) + p // 8,)
    verdict = prove(UNLESS_8, die_counts=(1, 2, 4, 8, 16))
    assert verdict.status == "counterexample"
    assert verdict.counterexample.constexprs["NUM_XCDS"] != 8
    if verdict.counterexample.kind == "collision":
        assert_collision(verdict, python)
    else:
        cex = verdict.counterexample
        (value,) = python(cex.programs[0], *cex.grid, cex.constexprs["NUM_XCDS"])
        assert (value,) == cex.logical and not 0 <= value < cex.grid[0]
    assert prove(UNLESS_8, die_counts=(8,)).status == "proven"


def test_a_result_outside_the_grid_is_reported_with_its_program():
    verdict = prove(hook("return (pid + 1) % (num_pids + 1)"), max_programs=2 ** 24 - 1)
    assert verdict.status == "counterexample"
    cex = verdict.counterexample
    assert cex.kind == "out_of_range"
    (p,) = cex.programs
    value = cmod(p + 1, cex.grid[0] + 1)
    assert cex.logical == (value,) and value == cex.grid[0] and p == cex.grid[0] - 1


def test_a_2d_remap_with_the_wrong_modulus_leaves_the_grid():
    verdict = prove(hook("return pid // num_pid_n, pid % num_pid_m", H2), H2)
    cex = verdict.counterexample
    assert verdict.status == "counterexample" and cex.kind == "out_of_range"
    (p,) = cex.programs
    m, n = cex.grid
    assert cex.logical == (cdiv(p, n), cmod(p, m)) and cmod(p, m) >= n


def test_a_division_by_zero_on_small_grids_is_undefined_behaviour():
    source = hook('''
        per = num_pids // 7
        return (pid % per) * 7 + pid // per
    ''')
    verdict = prove(source)
    cex = verdict.counterexample
    assert verdict.status == "counterexample" and cex.kind == "undefined"
    assert cex.grid[0] // 7 == 0 and cex.line == 4 and "divides by zero" in cex.message


WRAPPING_XCD = hook('''
    """XCD-contiguous with ceil(G/N) as (G + N - 1) // N, as the families had it before."""
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    q = (num_pids + NUM_XCDS - 1) // NUM_XCDS
    tall = num_pids - (q - 1) * NUM_XCDS
    if xcd < tall:
        lid = xcd * q + local
    else:
        lid = tall * q + (xcd - tall) * (q - 1) + local
    return lid
''')


def test_an_int32_wrap_near_2_pow_31_limits_the_proof_rather_than_refuting_the_remap():
    """For grids within N of 2**31, `count + N - 1` wraps (the family's (count - 1) // N + 1 does
    not): the verdict says where it wraps and proves the grids below it."""
    verdict = prove(WRAPPING_XCD, time_limit_s=2.0)  # the pipeline's budget (proof_status.PROOF_LIMIT_S)
    assert verdict.status == "unknown" and verdict.unknown_kind == "overflow", verdict.message
    assert "line 6 (`q = (num_pids + NUM_XCDS - 1) // NUM_XCDS`) leaves its integer type's range" in verdict.reason
    count = int(verdict.reason.split("of grid (")[1].split(",)")[0])
    assert count > INT32_MAX - 16
    assert verdict.proven_max_programs == 2 ** 30 - 1
    assert prove(WRAPPING_XCD, max_programs=INT32_MAX - 16, time_limit_s=4.0).status == "proven"
    assert prove(FAMILIES["xcd_contiguous"](H1), time_limit_s=4.0).status == "proven"


def test_a_collision_reached_through_a_wrap_is_not_a_counterexample_but_a_limit():
    """`pid * 2` wraps past 2**30 programs and collides there: proven below, limited above."""
    verdict = prove(hook("return tl.where(num_pids > 1073741824, (pid * 2) % num_pids, pid)"))
    assert verdict.unknown_kind == "overflow" and verdict.proven_max_programs == 2 ** 30 - 1, verdict.message


# --- Triton's semantics ------------------------------------------------------------------------

def test_remainders_and_quotients_truncate_toward_zero():
    """Both hooks are the identity with C's // and %, and not with Python's."""
    mod = hook("return num_pids - 1 + (pid - num_pids + 1) % num_pids")
    div = hook("return -((-pid) // 2) * 2 + pid % 2")
    for source in (mod, div):
        assert [evaluate_program(static_check(source, H1), H1, {"NUM_XCDS": 1}, (9,), p).logical[0]
                for p in range(9)] == list(range(9))
        assert prove(source).status == "proven"


def test_an_intermediate_that_wraps_and_comes_back_is_proven_exactly():
    """Mathematical integers cannot say this is the identity; 32-bit vectors can."""
    source = hook("big = pid + 2147483000\nreturn big - 2147483000")
    assert evaluate_program(static_check(source, H1), H1, {"NUM_XCDS": 1}, (5000,), 4000).logical == (4000,)
    verdict = prove(source)
    assert verdict.status == "proven", verdict.message


def test_bounded_loops_are_unrolled():
    source = hook('''
        lid = pid
        for i in tl.static_range(3):
            lid = lid ^ 0
        acc = 0
        for j in range(4):
            acc += j
        return lid + acc - 6
    ''')
    verdict = prove(source)
    assert verdict.status == "proven", verdict.message
    assert "unrolled" in verdict.semantics


@pytest.mark.parametrize("source", [
    FAMILIES["xcd_chunked"](H1, chunk=4), FAMILIES["xcd_grouped"](H2, group_m=4), GRID_1000001, UNLESS_8,
    hook("return (pid * 3 + 1) % num_pids"), hook("return tl.where(pid % 2 == 0, pid // 2, -(pid // 2) - 1)"),
    hook("x = pid.to(tl.uint32)\nreturn ((x * 2654435761) >> 7).to(tl.int32) % num_pids"),
    hook("return tl.abs(pid - num_pids // 2) + (pid & 3) - (pid | 1) + (pid ^ 5) + (~pid)"),
    hook("return tl.cdiv(pid, 3) if pid > 5 else max(pid, num_pids - 1) - min(pid << 2, 7)"),
    hook("y = pid.to(tl.int64) * 3\nreturn (y // 2 - (y >> 1)).to(tl.int32) + pid"),
    hook("return tl.where((pid > 3) and (pid < 10), pid // -3, pid % -3)"),
    hook("k = NUM_XCDS * 3 // 2\nacc = pid\nfor i in tl.static_range(3):\n    acc = acc * 7 + i\n"
         "return (acc >> 3) % (k + num_pids)"),
    hook("return (pid * 1000003 * 1000003) % 97 + tl.minimum(pid, 3) * tl.maximum(num_pids, 2)"),
])
def test_the_concrete_evaluator_agrees_with_remap_eval(source):
    """The evaluator that checks every model against remap_eval's, program by program (casts,
    wrap-around, shifts, bitwise operators, selects and constexpr folding included)."""
    sig = H2 if "num_pid_m" in source else H1
    fn = static_check(source, sig)
    grids = [(37,), (64,), (1000,)] if sig is H1 else [(5, 7), (8, 8), (13, 3)]
    for dies in (1, 8):
        for grid in grids:
            expected = evaluate(source, sig, grid, {"NUM_XCDS": dies})
            got = [evaluate_program(fn, sig, {"NUM_XCDS": dies}, grid, p).logical for p in range(math.prod(grid))]
            assert np.array_equal(np.array(got), expected), (grid, dies)


# --- unknowns ----------------------------------------------------------------------------------

@pytest.mark.parametrize("source,kind,words", [
    (hook("while pid > 0:\n    pid -= 1\nreturn pid"), "invalid", "`while` loops are not allowed"),
    ("def swizzle(:\n", "invalid", "does not parse"),
    (hook("return pid + (pid > 3) // (pid > 2)"), "unsupported", "divides or shifts booleans"),
    (hook("x = pid\nif pid > 3:\n    x = pid.to(tl.int64)\nreturn x"), "invalid", "int32 before the `if`"),
    (hook("acc = pid\nfor i in range(NUM_XCDS * 100):\n    acc += 0\nreturn acc"), "invalid", "cap is 64"),
    (hook("if pid < 3:\n    return pid.to(tl.int64)\nreturn pid"), "invalid", "Triton needs one return type"),
    (hook("return tl.where(num_pids >= 32, pid, pid + (pid >> num_pids) * 0)"), "unsupported", "poison"),
])
def test_what_cannot_be_translated_is_unknown_with_the_reason(source, kind, words):
    verdict = prove(source)
    assert verdict.status == "unknown" and verdict.unknown_kind == kind, verdict.message
    assert words in verdict.reason


def test_a_hook_with_two_constexprs_is_unsupported():
    sig = HookSignature("swizzle", "pid", ("num_pids",), ("GROUP", "NUM_XCDS"))
    verdict = prove(hook("return pid", sig), sig)
    assert verdict.unknown_kind == "unsupported" and "exactly one constexpr" in verdict.reason


def test_bad_arguments_give_unknown_rather_than_an_exception():
    assert prove(None).unknown_kind == "error"
    assert prove(hook("return pid"), die_counts=(0,)).unknown_kind == "error"


def test_a_hard_proof_past_its_time_limit_is_unknown():
    verdict = prove(FAMILIES["swizzled_head_first"](H3, group=4), H3, time_limit_s=0.2, max_programs=2 ** 24 - 1)
    assert verdict.status == "unknown" and verdict.unknown_kind == "timeout"
    assert verdict.time_limit_s == 0.2 and verdict.seconds < 5


# --- the API -----------------------------------------------------------------------------------

def test_a_hook_that_ignores_its_die_count_is_proven_once_for_all_die_counts():
    verdict = prove(hook("return pid // num_pid_n, pid % num_pid_n", H2), H2, die_counts=(8, 1, 16))
    assert verdict.status == "proven"
    assert verdict.die_counts == verdict.proven_die_counts == [1, 8, 16]
    assert "proven bijective for every grid of up to 2,147,483,647 programs" in verdict.message


def test_the_prover_runs_in_a_child_and_its_verdict_survives_json():
    verdict = prove_bijective(FAMILIES["xcd_chunked"](H1, chunk=8), H1, time_limit_s=20.0)
    assert verdict.status == "proven", verdict.message
    again = ProofVerdict.model_validate(json.loads(verdict.model_dump_json()))
    assert again == verdict
    cex = prove_bijective(hook("return pid // 2"), H1, time_limit_s=20.0)
    assert cex.status == "counterexample" and cex.counterexample.kind == "collision"
    hard = prove_bijective(FAMILIES["swizzled_head_first"](H3, group=4), H3, time_limit_s=0.2,
                           max_programs=2 ** 24 - 1)  # it needs ~0.8 s
    assert hard.status == "unknown" and hard.unknown_kind == "timeout", hard.message


def test_a_stage_asked_in_one_short_run_is_not_asked_that_run_again():
    """Prover.stage's exact query after an undecided short run skips STRATEGIES' first run: the same solver with
    the same hints and no more work than the short run had, so it would be undecided again."""
    from swizzleperf.validation.proofs.queries import EXACT_FIRST_WEIGHT
    from swizzleperf.validation.proofs.z3_call import ABSTRACTION_STRATEGIES, AFTER_SHORT_RUN, STRATEGIES

    assert EXACT_FIRST_WEIGHT == STRATEGIES[0][0]
    assert ABSTRACTION_STRATEGIES[0][1:] == STRATEGIES[0][1:]
    assert AFTER_SHORT_RUN == STRATEGIES[1:]
