"""Remap candidates: static checks, the vectorised evaluator against Triton, bijectivity, sandboxing."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from swizzleperf.errors import RemapRejected, SandboxError
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.remaps.check import LOOP_TRIP_CAP, normalise, static_check
from swizzleperf.remaps.evaluate.evaluator import evaluate
from swizzleperf.validation.bijectivity import (
    BijectivityReport,
    bijectivity_grids,
    check_bijective,
    find_bijectivity_failure,
    logical_ids,
)

N = 8  # XCDs
HOOK_1D = HookSignature(name="swizzle", pid="pid", grid_params=("num_pids",), constexprs=("NUM_XCDS",))
HOOK_2D = HookSignature(name="swizzle", pid="pid", grid_params=("num_pid_m", "num_pid_n"),
                        constexprs=("GROUP_M", "NUM_XCDS"))
HOOK_3D = HookSignature(name="swizzle", pid="pid", grid_params=("num_b", "num_h", "num_q"), constexprs=())
CONSTS_1D = {"NUM_XCDS": N}
CONSTS_2D = {"GROUP_M": 4, "NUM_XCDS": N}


def hook(body: str, sig: HookSignature = HOOK_1D) -> str:
    """A complete candidate: decorator, the hook's exact signature, and `body` (dedented)."""
    return f"@triton.jit\n{sig.render()}:\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"


IDENTITY = hook("return pid")

# The XCD-contiguous order: q = ceil(G/N); the first t = G mod N dies ("tall", t = N when N | G) get q
# programs, the rest q - 1. (ceil as (G - 1) // N + 1: `G + N - 1` wraps in int32 near 2**31, and
# the z3 proof in check_bijective finds that grid.)
XCD_CONTIGUOUS = hook('''
    """XCD-contiguous: die d owns one contiguous range of logical ids."""
    q = (num_pids - 1) // NUM_XCDS + 1
    t = num_pids % NUM_XCDS
    if t == 0:
        t = NUM_XCDS
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    if xcd < t:
        return xcd * q + local
    return t * q + (xcd - t) * (q - 1) + local
''')

NAIVE_XCD = hook('''
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    return xcd * (num_pids // NUM_XCDS) + local
''')

XCD_GROUPED_2D = hook('''
    total = num_pid_m * num_pid_n
    q = tl.cdiv(total, NUM_XCDS)
    t = total - (q - 1) * NUM_XCDS
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    lid = tl.where(xcd < t, xcd * q + local, t * q + (xcd - t) * (q - 1) + local)
    group_size = GROUP_M * num_pid_n
    first_m = (lid // group_size) * GROUP_M
    rows = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (lid % group_size) % rows
    pid_n = (lid % group_size) // rows
    return pid_m, pid_n
''', HOOK_2D)


def xcd_contiguous_reference(grid_size: int, dies: int) -> list[int]:
    q, t = -(-grid_size // dies), grid_size % dies or dies
    out = []
    for pid in range(grid_size):
        xcd, local = pid % dies, pid // dies
        out.append(xcd * q + local if xcd < t else t * q + (xcd - t) * (q - 1) + local)
    return out


def grouped_reference(m: int, n: int, group_m: int, lid: int) -> tuple[int, int]:
    """Grouped raster written the Python way: walk GROUP_M rows column by column."""
    group, within = divmod(lid, group_m * n)
    first = group * group_m
    rows = min(m - first, group_m)
    return first + within % rows, within // rows


# --- static checks ---------------------------------------------------------------------------

def test_static_check_returns_the_function_of_a_valid_candidate():
    fn = static_check(XCD_CONTIGUOUS, HOOK_1D)
    assert fn.name == "swizzle" and [a.arg for a in fn.args.args] == ["pid", "num_pids", "NUM_XCDS"]


REJECTED = [
    ("imports os", "import os\n" + IDENTITY, "line 1: imports are not allowed: send only the hook function"),
    ("import inside", hook("import os\nreturn pid"), "line 3: imports are not allowed"),
    ("while True", hook("while True:\n    pid = pid + 1\nreturn pid"), "line 3: `while` loops are not allowed"),
    ("syntax error", hook("return pid +"), "does not parse: line 3"),
    ("open", hook("f = open('/tmp/x', 'w')\nreturn pid"), "calls to `open` are not allowed"),
    ("print", hook("print(pid)\nreturn pid"), "calls to `print` are not allowed"),
    ("exec", hook("exec('x = 1')\nreturn pid"), "calls to `exec` are not allowed"),
    ("eval", hook("return eval('pid')"), "calls to `eval` are not allowed"),
    ("__class__", hook("x = pid.__class__\nreturn pid"), "dunder names (`__class__`) are not allowed"),
    ("__import__", hook("__import__('os').system('true')\nreturn pid"), "dunder names (`__import__`)"),
    ("os attribute", hook("x = os.getcwd()\nreturn pid"), "calls to `os.getcwd` are not allowed"),
    ("wrong name", IDENTITY.replace("def swizzle", "def remap"), "must be swizzle()"),
    ("wrong parameters", "@triton.jit\ndef swizzle(pid, n, NUM_XCDS: tl.constexpr):\n    return pid\n",
     "wrong parameters (pid, n, NUM_XCDS)"),
    ("missing constexpr", "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS):\n    return pid\n",
     "parameter `NUM_XCDS` must be annotated `NUM_XCDS: tl.constexpr`"),
    ("default value", "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr = 8):\n    return pid\n",
     "no defaults"),
    ("other decorator", "@functools.cache\n" + IDENTITY, "the only decorator allowed is @triton.jit"),
    ("no decorator", IDENTITY.replace("@triton.jit\n", ""), "must be decorated with @triton.jit"),
    ("two functions", IDENTITY + "\n" + IDENTITY.replace("swizzle", "helper"), "defines 2 functions"),
    ("module statement", "X = 3\n" + IDENTITY, "found a `Assign` statement outside it"),
    ("lambda", hook("f = lambda x: x\nreturn pid"), "lambdas are not allowed"),
    ("comprehension", hook("xs = [i for i in range(3)]\nreturn pid"), "comprehensions are not allowed"),
    ("nested def", hook("def f():\n    return 1\nreturn pid"), "nested function definitions are not allowed"),
    ("global", hook("global G\nreturn pid"), "`global` is not allowed"),
    ("with", hook("with open('x') as f:\n    pass\nreturn pid"), "`with` is not allowed"),
    ("try", hook("try:\n    x = 1\nexcept Exception:\n    x = 2\nreturn pid"), "`try` is not allowed"),
    ("string", hook("s = 'abc'\nreturn pid"), "string literals are not allowed"),
    ("float", hook("return pid * 1.5"), "float literal 1.5 is not allowed"),
    ("subscript", hook("return (pid, pid)[0]"), "subscripts (`x[i]`) are not allowed"),
    ("tuple value", hook("x = (pid, pid)\nreturn pid"), "tuples are only allowed in `return`"),
    ("subscript name", hook("x = pid\nreturn x[0]"), "subscripts (`x[i]`) are not allowed"),
    ("true division", hook("return pid / 2"), "true division `/` gives a float: use `//`"),
    ("power", hook("return pid ** 2"), "`**` is not supported"),
    ("abs", hook("return abs(pid)"), "abs() is not defined inside Triton kernels: use tl.abs()"),
    ("tl.load", hook("return tl.load(pid)"), "calls to `tl.load` are not allowed"),
    ("keyword", hook("return tl.minimum(pid, num_pids, propagate_nan=0)"), "keyword arguments are not allowed"),
    ("float cast", hook("return pid.to(tl.float32)"), "`.to()` takes one integer dtype"),
    ("runtime loop bound", hook("for i in range(num_pids):\n    pid = pid + 1\nreturn pid"),
     "uses num_pids, so the trip count is not static"),
    ("loop over a name", hook("for i in pid:\n    pass\nreturn pid"), "loops must be `for i in range(C)`"),
    ("loop cap", hook("for i in range(1000):\n    pid = pid + 1\nreturn pid"), "runs 1000 times; the cap is 64"),
    ("return in loop", hook("for i in range(3):\n    return pid\nreturn pid"),
     "line 4: Triton cannot `return` from inside a loop"),
    ("break", hook("for i in range(3):\n    break\nreturn pid"), "`break` is not supported by Triton"),
    ("falls off the end", hook("if pid < 3:\n    return pid"), "can reach its end without returning"),
    ("unreachable", hook("return pid\nx = 1"), "line 4: unreachable code after `return`"),
    ("wrong arity 1D", hook("return pid, pid"), "returns 2 value(s); the hook returns one logical id"),
    ("wrong arity 2D", hook("return pid", HOOK_2D), "returns 1 value(s); the hook returns 2 logical indices"),
    ("undefined name", hook("return pid + offset"), "`offset` is not defined"),
    ("rebind tl", hook("tl = 3\nreturn pid"), "`tl` cannot be reassigned"),
    ("walrus", hook("return (x := pid)"), "`:=` is not allowed"),
    ("chained assignment", hook("a = b = pid\nreturn a"), "chained assignment"),
    ("is", hook("return pid if pid is None else 0"), "`is` is not allowed"),
    ("none literal", hook("x = None\nreturn pid"), "the literal None is not allowed"),
    ("expression statement", hook("pid + 1\nreturn pid"), "an expression on its own line has no effect"),
    ("deep nesting", hook("return pid" + " + 1" * 150), "nested more than 100 levels deep"),
    ("too long", hook("x = pid\n" * 3000 + "return x"), "the limit is 20000"),
]


@pytest.mark.parametrize("source,reason", [(s, r) for _, s, r in REJECTED], ids=[i for i, _, _ in REJECTED])
def test_static_check_rejects_with_its_reason(source, reason):
    sig = HOOK_2D if "num_pid_m" in source else HOOK_1D
    with pytest.raises(RemapRejected) as info:
        static_check(source, sig)
    assert info.value.stage == "static"
    assert reason in info.value.reason, info.value.reason


def test_rejected_candidates_are_never_executed(tmp_path):
    """Every way a candidate could touch the file system is refused before anything runs it."""
    marker = tmp_path / "executed"
    payloads = [
        f"import os\nos.system('touch {marker}')\n" + IDENTITY,
        hook(f"open('{marker}', 'w').write('x')\nreturn pid"),
        hook(f"__import__('os').system('touch {marker}')\nreturn pid"),
        hook(f"exec(\"open('{marker}', 'w')\")\nreturn pid"),
        hook(f"return eval(\"open('{marker}', 'w')\") + pid"),
        hook("x = ().__class__.__bases__[0].__subclasses__()\nreturn pid"),
        hook(f"f = lambda: open('{marker}', 'w')\nreturn pid"),
        IDENTITY + f"\nopen('{marker}', 'w')\n",
    ]
    for source in payloads:
        for attempt in (lambda: static_check(source, HOOK_1D),
                        lambda: evaluate(source, HOOK_1D, (16,), CONSTS_1D),
                        lambda: check_bijective(source, HOOK_1D, [(16,)], CONSTS_1D),
                        lambda: logical_ids(source, HOOK_1D, (16,), CONSTS_1D)):
            with pytest.raises(RemapRejected) as info:
                attempt()
            assert info.value.stage == "static"
    assert not marker.exists()


def test_normalise_ignores_formatting_comments_and_docstrings():
    a = hook('"""Doc one."""\nx = pid  # comment\nreturn x')
    b = hook('"""A different docstring."""\nx   =   pid\n\nreturn (x)')
    c = hook("x = pid + 1\nreturn x")
    assert normalise(a) == normalise(b)
    assert normalise(a) != normalise(c)
    with pytest.raises(SyntaxError):
        normalise(hook("return pid +"))


# --- the evaluator: exact values -------------------------------------------------------------

def test_xcd_contiguous_matches_the_design_formula_on_every_grid():
    for (size,) in bijectivity_grids(HOOK_1D, [(20480,)], N):
        if size > 100_000:
            continue
        got = evaluate(XCD_CONTIGUOUS, HOOK_1D, (size,), CONSTS_1D)
        assert got.shape == (size, 1) and got.dtype == np.int64
        assert got[:, 0].tolist() == xcd_contiguous_reference(size, N), size


def test_grouped_raster_matches_a_python_reference():
    m, n = 13, 17
    got = evaluate(XCD_GROUPED_2D, HOOK_2D, (m, n), CONSTS_2D)
    lids = xcd_contiguous_reference(m * n, N)
    assert [tuple(row) for row in got.tolist()] == [grouped_reference(m, n, 4, lid) for lid in lids]


def test_three_dimensional_hook():
    source = hook("return pid % num_b, (pid // num_b) % num_h, pid // (num_b * num_h)", HOOK_3D)
    got = evaluate(source, HOOK_3D, (3, 5, 7), {})
    assert [tuple(r) for r in got.tolist()] == [(p % 3, (p // 3) % 5, p // 15) for p in range(105)]


def test_assigned_constants_follow_the_compiler_not_the_interpreter():
    # Triton's code generator stores `x = -7` as a run-time int32, so `x // 2` truncates (-3); the
    # interpreter keeps a Python int and floors (-4). An inline constant expression floors in both.
    assigned = evaluate(hook("x = -7\nreturn pid + x // 2"), HOOK_1D, (4,), CONSTS_1D)
    inline = evaluate(hook("return pid + (-7) // 2"), HOOK_1D, (4,), CONSTS_1D)
    assert assigned[:, 0].tolist() == [-3, -2, -1, 0]
    assert inline[:, 0].tolist() == [-4, -3, -2, -1]


def test_bool_arithmetic_wraps_at_one_bit():
    source = hook("a = pid < 2\nb = pid % 2 == 0\nreturn (a + b).to(tl.int32) * 10 + (a * b).to(tl.int32)")
    got = evaluate(source, HOOK_1D, (4,), CONSTS_1D)[:, 0].tolist()
    assert got == [1, 10, 10, 0]  # (T+T -> F, T*T -> T), (T+F -> T), (F+T -> T), (F+F -> F)


EVALUATION_ERRORS = [
    ("division by zero", hook("d = pid % 3 - 1\nreturn pid // d"), "divides by zero for program 1"),
    ("remainder by zero", hook("return pid % (num_pids - num_pids)"), "takes a remainder by zero for program 0"),
    ("shift returned", hook("return (pid << (pid % 40)) >> 1"), "program 32 returns an undefined value"),
    ("branch on poison", hook("if (pid << 40) > 0:\n    return pid\nreturn pid"), "branches on an undefined value"),
    ("one-branch name", hook("if pid < 3:\n    b = pid\nelse:\n    c = pid\nreturn b"),
     "`b` is assigned in only one branch of the run-time `if` at line 3"),
    ("loop index after loop", hook("for i in range(3):\n    pid = pid + i\nreturn pid + i"),
     "`i` is the index of the `range` loop at line 3"),
    ("loop cap via constexpr", hook("for i in range(NUM_XCDS * 10):\n    pid = pid + 1\nreturn pid"),
     f"the loop runs 80 times; the cap is {LOOP_TRIP_CAP}"),
    ("nested loop cap", hook("for i in range(16):\n    for j in tl.static_range(8):\n        pid = pid + j\n"
                             "return pid"), "the loop runs 8 times inside other loops"),
    ("compile-time division by zero", hook("return pid + NUM_XCDS // (NUM_XCDS - 8)"),
     "divides by zero at compile time"),
    ("returns a bool", hook("return pid < 3"), "is a comparison (a boolean), not a logical index"),
]


@pytest.mark.parametrize("source,reason", [(s, r) for _, s, r in EVALUATION_ERRORS],
                         ids=[i for i, _, _ in EVALUATION_ERRORS])
def test_evaluation_errors_name_the_line_and_program(source, reason):
    with pytest.raises(RemapRejected) as info:
        evaluate(source, HOOK_1D, (64,), CONSTS_1D)
    assert info.value.stage == "evaluation"
    assert info.value.reason.startswith("line ") and reason in info.value.reason, info.value.reason


def test_guarded_division_and_discarded_shifts_are_fine():
    guarded = hook("d = pid % 3 - 1\nif d != 0:\n    return pid // d\nreturn pid")
    assert evaluate(guarded, HOOK_1D, (6,), CONSTS_1D)[:, 0].tolist() == [0, 1, 2, -3, 4, 5]  # d = -1, 0, 1, ...
    selected = hook("return tl.where(pid < 32, 1 << pid, -1)")  # lanes 32.. shift out of range, then discarded
    expected = [1 << p if p < 31 else -2 ** 31 if p == 31 else -1 for p in range(40)]  # 1 << 31 wraps in int32
    assert evaluate(selected, HOOK_1D, (40,), CONSTS_1D)[:, 0].tolist() == expected


# --- the evaluator against Triton: interpreter values, and the compiler's front end ------------

# Remaps whose values the Triton interpreter computes exactly as compiled Triton would (no
# division of an assigned constant, no `range` index in a negative division), over a few
# hundred programs: negative `//`/`%` of every sign, shifts, wraparound, unsigned and int64,
# early returns under if/elif/else, tl.where, min/max, cdiv, loops, 2D and 3D hooks.
AGREE = {
    "negative_div_mod": (hook('''
        x = pid - num_pids // 2
        a = x // 7 + x % 7
        b = x // -3 - x % -3
        c = (0 - x) // NUM_XCDS + (0 - x) % NUM_XCDS
        d = x // (NUM_XCDS - 11)
        e = x % (pid % 5 + 1) * 3 + x // (pid % 4 - 5)
        k = (-7) // 2 + (-7) % 3 + NUM_XCDS // -3
        return a * 1000 + b * 100 + c * 10 + d + e + k
    '''), HOOK_1D, (257,), CONSTS_1D),
    "shifts_wraparound_unsigned": (hook('''
        x = pid - 150
        a = x >> 2
        b = (x << 3) ^ (pid >> 1)
        c = pid * 1000003 * 7919
        d = ~x & 0xFF | (x >> 31)
        h = (pid.to(tl.uint32) * 2654435761) >> 16
        m = (x.to(tl.uint32) >> 28).to(tl.int32)
        w = (x.to(tl.int64) << 40) >> 38
        return a + b + c + d + h.to(tl.int32) + m + w.to(tl.int32)
    '''), HOOK_1D, (257,), CONSTS_1D),
    "early_returns": (hook('''
        xcd = pid % NUM_XCDS
        local = pid // NUM_XCDS
        off = local - xcd
        if pid < 3:
            return num_pids - 1 - pid
        elif xcd == 5:
            off = local * 2
            if local > 10:
                return off + 1
            off += 7
        elif xcd > 5:
            off = -off
        else:
            base = local * 3
            off = base - 1
        d = pid % 3 - 1
        if d != 0:
            off = off + pid // d
        if NUM_XCDS == 8:
            off = off * 3
        else:
            off = off * 5
        return off + xcd
    '''), HOOK_1D, (257,), CONSTS_1D),
    "names_from_a_returning_branch": (hook('''
        if pid % 3 == 0:
            b = pid * 2
            return b
        else:
            b = pid * 3
        return b + 1
    '''), HOOK_1D, (257,), CONSTS_1D),
    "where_min_max_cdiv": (hook('''
        x = pid - 100
        lo = min(x, 5, NUM_XCDS * 2)
        hi = max(x, -3)
        w = tl.where(x < 0, -x, x * 2)
        cl = tl.minimum(tl.maximum(x, -20), 20)
        cd = tl.cdiv(x, 8) + tl.cdiv(pid, NUM_XCDS)
        ab = tl.abs(x)
        t = 1 if (0 <= x < 50) and not (x == 7) else 2
        u = x if (x > 10 or x < -10) else 0 - x
        flag = (x > 3).to(tl.int32) + (x < 0)
        s = pid % 40
        sh = tl.where(s < 31, (pid << s) >> s, pid)
        return lo + hi * 3 + w * 5 + cl * 7 + cd * 11 + ab * 13 + t * 17 + u * 19 + flag + sh
    '''), HOOK_1D, (257,), CONSTS_1D),
    "loops": (hook('''
        acc = pid * 0
        for i in tl.static_range(4):
            acc = acc * 3 + (pid >> i) % 3 - i
        s = pid * 0
        for j in range(1, 6, 2):
            s += pid % (j + 1) * j
        for k in range(NUM_XCDS // 2):
            if pid % 4 == k:
                s = s + k * 100
        return acc + s
    '''), HOOK_1D, (257,), CONSTS_1D),
    "xcd_contiguous": (XCD_CONTIGUOUS, HOOK_1D, (257,), CONSTS_1D),
    "xcd_grouped_2d": (XCD_GROUPED_2D, HOOK_2D, (13, 17), CONSTS_2D),
    "constant_returns_2d": (hook('''
        if pid == 0:
            return 0, 0
        pid_m = (pid * 7) % num_pid_m
        pid_n = tl.where(pid_m > GROUP_M, pid % num_pid_n, (num_pid_n - 1) - pid % num_pid_n)
        return pid_m, pid_n
    ''', HOOK_2D), HOOK_2D, (13, 17), CONSTS_2D),
    "three_dimensional": (hook("return pid % num_b, (pid // num_b) % num_h, pid // (num_b * num_h)", HOOK_3D),
                          HOOK_3D, (3, 5, 7), {}),
}

# Candidates compiled Triton refuses: the evaluator must refuse them too, with this reason.
COMPILER_REFUSES = {
    "rebind_constexpr_in_if": (hook("if pid < 3:\n    NUM_XCDS = 4\nreturn pid + NUM_XCDS"),
                               "is reassigned under the run-time condition"),
    "rebind_constexpr_in_loop": (hook("for i in range(3):\n    NUM_XCDS = pid\nreturn pid + NUM_XCDS"),
                                 "is reassigned in the `range` loop"),
    "branch_type_mismatch": (hook("x = pid\nif pid < 3:\n    x = x.to(tl.int64)\nreturn x"),
                             "`x` is int32 before the `if` but the then branch makes it int64"),
    "one_branch_name": (hook("if pid < 3:\n    return pid\nelse:\n    b = pid * 2\nreturn b"),
                        "`b` is assigned in only one branch"),
    "loop_local_name": (hook("for i in range(2):\n    z = pid\nreturn z"), "`z` is defined inside the `range` loop"),
    "not_of_int": (hook("return pid if not pid else num_pids"), "`not` needs a boolean"),
    "and_of_ints": (hook("return pid if (pid and num_pids) else 0"), "`and`/`or`/`not` need booleans"),
    "constant_too_big": (hook("return pid + 2147483648"), "out of range for int32"),
    "signedness_mod": (hook("return (pid.to(tl.uint32) % num_pids).to(tl.int32)"), "across signedness"),
    "ternary_types": (hook("return 5 if pid < 3 else pid.to(tl.int64)"), "are int32 and int64"),
    "return_types": (hook("if pid < 3:\n    return pid.to(tl.int64)\nreturn pid"), "Triton needs one return type"),
    "cast_constexpr": (hook("return pid + NUM_XCDS.to(tl.int64)"), "`.to()` needs a run-time value"),
}

_ORACLE = r'''
"""Run remap hooks through Triton: `interpret` computes values (TRITON_INTERPRET=1, set before
triton is imported), `compile` lowers them with the compiler front end (no GPU needed)."""
import importlib.util, json, math, os, sys, tempfile
MODE = sys.argv[1]
os.environ["TRITON_INTERPRET"] = "1" if MODE == "interpret" else "0"
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
import torch
import triton

TEMPLATE = """import triton
import triton.language as tl

{hook}

@triton.jit
def oracle(out_ptr, {grid_args}{const_params}):
    pid = tl.program_id(0)
    result = {name}(pid, {grid_args}{const_args})
{stores}
"""

def load(case, tag, tmp):
    ndim = len(case["grid"])
    grid_args = ", ".join(f"g{k}" for k in range(ndim))
    stores = ("    tl.store(out_ptr + pid, result)" if ndim == 1 else
              "\n".join(f"    tl.store(out_ptr + pid * {ndim} + {k}, result[{k}])" for k in range(ndim)))
    text = TEMPLATE.format(hook=case["source"], name=case["name"], grid_args=grid_args,
                           const_params="".join(f", {c}: tl.constexpr" for c in case["constexprs"]),
                           const_args="".join(f", {c}" for c in case["constexprs"]), stores=stores)
    path = os.path.join(tmp, f"oracle_{tag}.py")
    with open(path, "w") as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location(f"oracle_{tag}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.oracle

def interpret(case, tag, tmp):
    size, ndim = math.prod(case["grid"]), len(case["grid"])
    out = torch.zeros(size * ndim, dtype=torch.int64)
    load(case, tag, tmp)[(size,)](out, *case["grid"], **case["constexprs"])
    return out.view(size, ndim).tolist()

def compile_front_end(case, tag, tmp):
    """'ok', or the innermost error of lowering the kernel to Triton IR."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.compiler.compiler import ASTSource
    from triton._C.libtriton import ir
    signature = {"out_ptr": "*i64", **{f"g{k}": "i32" for k in range(len(case["grid"]))},
                 **{c: "constexpr" for c in case["constexprs"]}}
    target = GPUTarget("cuda", 80, 32)
    backend = make_backend(target)
    options = backend.parse_options({})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    source = ASTSource(fn=load(case, tag, tmp), signature=signature, constexprs=dict(case["constexprs"]))
    try:
        source.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(),
                       context)
    except Exception as exc:
        while exc.__cause__ is not None:
            exc = exc.__cause__
        return f"error: {type(exc).__name__}: {exc}"
    return "ok"

cases = json.load(sys.stdin)
with tempfile.TemporaryDirectory() as tmp:
    if MODE == "interpret":
        results = {tag: interpret(case, tag, tmp) for tag, case in cases.items() if case["interpret"]}
    else:
        results = {tag: compile_front_end(case, tag, tmp) for tag, case in cases.items()}
json.dump(results, sys.stdout)
'''


@pytest.fixture(scope="module")
def triton_oracle(tmp_path_factory):
    """Every case through the Triton interpreter (values) and the compiler front end (accepted or not)."""
    script = tmp_path_factory.mktemp("oracle") / "oracle.py"
    script.write_text(_ORACLE)
    cases = {}
    for tag, (source, sig, grid, consts) in AGREE.items():
        cases[tag] = {"source": source, "name": sig.name, "grid": list(grid), "constexprs": consts, "interpret": True}
    for tag, (source, _) in COMPILER_REFUSES.items():
        cases[tag] = {"source": source, "name": "swizzle", "grid": [64], "constexprs": CONSTS_1D, "interpret": False}
    cases["assigned_constant_division"] = {"source": hook("x = -7\nreturn pid + x // 2"), "name": "swizzle",
                                           "grid": [4], "constexprs": CONSTS_1D, "interpret": False}
    results = {}
    for mode in ("interpret", "compile"):
        proc = subprocess.run([sys.executable, str(script), mode], input=json.dumps(cases), capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results[mode] = json.loads(proc.stdout)
    return results


@pytest.mark.parametrize("tag", list(AGREE))
def test_evaluator_matches_the_triton_interpreter_exactly(triton_oracle, tag):
    source, sig, grid, consts = AGREE[tag]
    expected = np.asarray(triton_oracle["interpret"][tag], dtype=np.int64)
    got = evaluate(source, sig, grid, consts)
    assert got.shape == expected.shape == (math.prod(grid), sig.ndim)
    mismatch = np.flatnonzero((got != expected).any(axis=1))
    assert not mismatch.size, f"program {mismatch[0]}: evaluator {got[mismatch[0]]} vs Triton {expected[mismatch[0]]}"
    assert triton_oracle["compile"][tag] == "ok", triton_oracle["compile"][tag]


@pytest.mark.parametrize("tag", list(COMPILER_REFUSES))
def test_evaluator_refuses_what_the_triton_compiler_refuses(triton_oracle, tag):
    source, reason = COMPILER_REFUSES[tag]
    assert triton_oracle["compile"][tag].startswith("error"), "Triton compiles it, so it must be accepted"
    with pytest.raises(RemapRejected) as info:
        evaluate(source, HOOK_1D, (64,), CONSTS_1D)
    assert reason in info.value.reason, info.value.reason


def test_assigned_constant_division_compiles(triton_oracle):
    """The compiler accepts what test_assigned_constants_follow_the_compiler_not_the_interpreter evaluates."""
    assert triton_oracle["compile"]["assigned_constant_division"] == "ok"


# --- bijectivity -----------------------------------------------------------------------------

def test_bijectivity_grids_cover_the_usual_bugs():
    grids = bijectivity_grids(HOOK_1D, [(20480,), (20480,), (12,)], N)
    sizes = [g[0] for g in grids]
    assert grids[:2] == [(20480,), (12,)] and len(set(grids)) == len(grids)
    assert {1, N - 1, N, N + 1, 2 * N + 3, 97, 1009, 65537} <= set(sizes)
    assert max(sizes) > 1_000_000 and any(s % N for s in sizes)
    grids_2d = bijectivity_grids(HOOK_2D, [(64, 32)], N)
    assert grids_2d[0] == (64, 32)
    assert {(1, 1), (1, 7), (3, 5), (N, N), (13, 17), (31, 29), (1000, 1000)} <= set(grids_2d)
    grids_3d = bijectivity_grids(HOOK_3D, [], N)
    assert all(len(g) == 3 for g in grids_3d) and (7, 11, 13) in grids_3d


def test_identity_and_xcd_contiguous_are_bijective_on_all_grids():
    for source in (IDENTITY, XCD_CONTIGUOUS):
        grids = bijectivity_grids(HOOK_1D, [(20480,)], N)
        report = check_bijective(source, HOOK_1D, grids, CONSTS_1D)
        assert report.ok, report.message
        assert report.grids == grids and report.failure is None
        report.raise_if_failed()


def test_naive_xcd_remap_is_caught_with_the_colliding_programs():
    fine = check_bijective(NAIVE_XCD, HOOK_1D, [(64,), (16,)], CONSTS_1D, prove=False)  # fine when N divides G
    assert fine.ok and fine.proof_text is None
    proven = check_bijective(NAIVE_XCD, HOOK_1D, [(64,), (16,)], CONSTS_1D)  # not for every grid size
    proof, n = proven.failure, proven.proof.counterexample.constexprs["NUM_XCDS"]
    (g,), (a, b) = proof.grid, proof.programs
    assert proof.kind == "counterexample" and g % n != 0
    assert (a % n) * (g // n) + a // n == (b % n) * (g // n) + b // n == proof.logical[0]
    assert "found by z3 after the 2 sampled grids passed" in proof.message
    report = check_bijective(NAIVE_XCD, HOOK_1D, [(64,), (12,)], CONSTS_1D)
    failure = report.failure
    assert not report.ok and failure.grid == (12,) and failure.kind == "not_one_to_one"
    mapping = [(p % N) * (12 // N) + p // N for p in range(12)]  # the same map in Python
    dup = min(v for v in mapping if mapping.count(v) > 1)
    assert failure.logical == (dup,) and failure.programs == [p for p in range(12) if mapping[p] == dup]
    assert failure.missing == (min(set(range(12)) - set(mapping)),)
    assert report.message.startswith(f"grid (12,): programs {failure.programs[0]} and {failure.programs[1]} "
                                     f"both map to {dup}; logical {failure.missing[0]} is never produced")
    with pytest.raises(RemapRejected) as info:
        report.raise_if_failed()
    assert info.value.stage == "bijectivity" and "grid (12,)" in info.value.reason


def test_grouped_raster_2d_is_bijective():
    report = check_bijective(XCD_GROUPED_2D, HOOK_2D, bijectivity_grids(HOOK_2D, [(64, 32)], N), CONSTS_2D)
    assert report.ok, report.message


def test_out_of_range_and_evaluation_failures_are_reported():
    out = check_bijective(hook("return pid + 1"), HOOK_1D, [(5,)], CONSTS_1D)
    assert out.failure.kind == "out_of_range" and out.failure.programs == [4] and out.failure.logical == (5,)
    bad = check_bijective(hook("return pid + 0 * (pid // (num_pids - 3))"), HOOK_1D, [(5,), (3,), (9,)], CONSTS_1D)
    assert bad.failure.kind == "evaluation" and bad.failure.grid == (3,) and bad.grids == [(5,), (3,)]
    assert "divides by zero for program 0" in bad.message


def test_caller_mistakes_are_not_blamed_on_the_candidate():
    with pytest.raises(ValueError, match="NUM_XCDS"):
        check_bijective(IDENTITY, HOOK_1D, [(8,)], {})
    with pytest.raises(ValueError, match="2 positive extent"):
        logical_ids(XCD_GROUPED_2D, HOOK_2D, (8,), CONSTS_2D)


def test_find_failure_reports_2d_coordinates():
    coords = np.array([[0, 0], [0, 1], [0, 1], [1, 1]], dtype=np.int64)
    failure = find_bijectivity_failure(coords, (2, 2))
    assert failure.programs == [1, 2] and failure.logical == (0, 1) and failure.missing == (1, 0)
    assert "programs 1 and 2 both map to (0, 1); logical (1, 0) is never produced" in failure.message


def test_report_round_trips_through_json():
    report = check_bijective(NAIVE_XCD, HOOK_1D, [(12,)], CONSTS_1D)
    again = BijectivityReport.model_validate_json(report.model_dump_json())
    assert again == report and not again.ok and again.message == report.message


def test_logical_ids_are_c_order_linear_indices():
    ids = logical_ids(XCD_GROUPED_2D, HOOK_2D, (13, 17), CONSTS_2D)
    coords = evaluate(XCD_GROUPED_2D, HOOK_2D, (13, 17), CONSTS_2D)
    assert ids.dtype == np.int64 and ids.tolist() == (coords[:, 0] * 17 + coords[:, 1]).tolist()
    assert sorted(ids.tolist()) == list(range(13 * 17))
    with pytest.raises(RemapRejected) as info:
        logical_ids(hook("return pid * 2"), HOOK_1D, (8,), CONSTS_1D)
    assert info.value.stage == "bijectivity" and "program 4 maps to 8, outside the grid" in info.value.reason


# --- the time-limited child ------------------------------------------------------------------

SLOW = hook('''
    acc = pid * 0
    for i in tl.static_range(8):
        for j in tl.static_range(8):
            acc = (acc * 31 + (pid ^ (i * 8 + j))) % 1000003 + tl.where(acc > pid, i, j)
    return pid + acc * 0
''')


def test_a_slow_candidate_is_refused_by_counted_work_and_the_clock_is_only_a_backstop():
    assert check_bijective(SLOW, HOOK_1D, [(100,)], CONSTS_1D).ok  # correct, only slow on a huge grid
    start = time.perf_counter()  # counted before anything runs: the same verdict whatever the load
    with pytest.raises(RemapRejected, match=r"counted work [\d,]+ \(.* x 8,000,100 programs of the sampled grids\) "
                                            r"exceeds the budget"):
        check_bijective(SLOW, HOOK_1D, [(100,), (8_000_000,)], CONSTS_1D, timeout=1.5)
    assert time.perf_counter() - start < 5
    with pytest.raises(SandboxError, match="time limit"):  # the evaluation itself still has its wall clock
        logical_ids(SLOW, HOOK_1D, (8_000_000,), CONSTS_1D, timeout=1.5)
