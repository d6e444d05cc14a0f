"""Hostile and awkward remap files for softmax's hook, generated here (several are hundreds of KB).

HOSTILE: (id, file bytes, stage, fragment): `check --remap` must reject each at `stage` with one
line holding `fragment`. VALID: files a model or a person may well write, which must be accepted.
Classes from issue 13: range bounds past 2**63, undecodable bytes, deep nesting and long chains
(RecursionError/MemoryError in the parser), integer literals too large to print, text that other
line splitting would cut differently (a decoy), and candidate text echoed back at length.
"""

HEAD = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n"


def hook(body: str) -> str:
    return HEAD + "".join(f"    {line}\n" for line in body.split("\n"))


def _text(source: str) -> bytes:
    return source.encode()


# Six U+2028 in a string shift str.splitlines() numbering by six lines, onto a bijective decoy
# inside the string; the parser numbers the real hook, which sends every program to 0.
DECOY = ('"""\u2028\u2028\u2028\u2028\u2028\u2028\n' + HEAD + '    return pid\n"""\n\n\n' + HEAD + "    return 0\n")
LONG = 18_000  # the length of the longest echo the issue saw (18,110 characters)

HOSTILE = [
    ("range_past_2_63", _text(hook("for i in range(9223372036854775808):\n    pass\nreturn pid")), "static",
     "the loop runs 9223372036854775808 times; the cap is 64"),
    ("range_span_2_64", _text(hook("for i in range(-9223372036854775808, 9223372036854775807):\n    pass\n"
                                   "return pid")), "static", "the loop runs 18446744073709551615 times"),
    ("range_compile_time_2_100", _text(hook("for i in range(1 << 100):\n    pass\nreturn pid")), "bijectivity",
     "the loop runs 1267650600228229401496703205376 times"),
    ("not_utf8", b"\xff\xfe" + _text(hook("return pid")), "static", "is not UTF-8 text: byte 0xff at offset 0"),
    ("latin1_comment", _text(hook("return pid  # caf")).replace(b"caf", b"caf\xe9"), "static",
     "is not UTF-8 text: byte 0xe9"),
    ("unary_chain", _text(hook("return " + "-" * 30_000 + "pid")), "static", "nested more than 100 levels deep"),
    ("not_chain", _text(hook("return " + "not " * 20_000 + "pid")), "static", "nested more than 100 levels deep"),
    ("parentheses", _text(hook("return " + "(" * 150 + "pid" + ")" * 150)), "static",
     "nested more than 100 levels deep"),
    ("binop_chain", _text(hook("return pid" + " + 0" * 60_000)), "static", "nested too deeply for the parser"),
    ("attribute_chain", _text(hook("return pid" + ".x" * 100_000)), "static", "nested too deeply for the parser"),
    ("hex_literal", _text(hook("return pid + 0x" + "f" * 5_000)), "static", "an integer literal of about 20,000 bits"),
    ("decimal_literal", _text(hook("return pid + " + "9" * 5_000)), "static", "an integer literal of about"),
    ("literal_2_256", _text(hook("return pid + 0x1" + "0" * 64)), "static", "an integer literal of 257 bits"),
    ("null_byte", _text(hook("return pid\0")), "static", "does not parse"),
    ("long_name", _text(hook("return " + "a" * LONG)), "static", f"({LONG:,} characters)"),
    ("long_string_target", _text(hook('"' + "s" * LONG + '".x = 1\nreturn pid')), "static",
     "only plain names can be assigned"),
    ("too_large", _text(hook("return pid") + "# " + "x" * 300_000 + "\n"), "static", "bytes; the limit is 262,144"),
    ("two_hooks", _text(hook("return pid") + "\n\n" + hook("return 0")), "static", "defines swizzle() 2 times"),
    ("decoy_in_string", _text(DECOY), "bijectivity", "all map to 0"),
]

VALID = [
    ("bom_crlf", ("\ufeff" + hook("return pid")).replace("\n", "\r\n").encode()),
    ("form_feed_comment", _text(hook("# one page\x0canother\nreturn pid"))),
    ("line_separator_comment", _text(hook("# one line\u2028another\nreturn pid"))),
    ("paragraph_separator_docstring", _text(hook('"""Identity.\u2029Kept as is."""\nreturn pid'))),
]


# --- the generated corpus: every class of issue 13, for softmax (1D), gemm (2D), attention (3D) ----

from dataclasses import dataclass  # noqa: E402

SIGNATURES = {1: "pid, num_pids, NUM_XCDS: tl.constexpr",
              2: "pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr",
              3: "pid, num_q_blocks, batch_size, num_heads, NUM_XCDS: tl.constexpr"}
MARKER = "/tmp/swizzleperf-corpus-marker"  # code that ran would leave this file


@dataclass(frozen=True)
class Case:
    """One candidate: `text` is a remap file's text, or a model's whole answer when kind is "llm".
    `stage` is where it must be rejected (None: it must be accepted); `fragment` is in the reason."""

    id: str
    kind: str
    text: str
    stage: str | None
    fragment: str = ""
    ndim: int = 1


def hook_of(ndim: int, body: str) -> str:
    return (f"@triton.jit\ndef swizzle({SIGNATURES[ndim]}):\n"
            + "".join(f"    {line}\n" for line in body.split("\n")))


def _whole_file(body: str) -> bool:
    return body.startswith(("#!", "def swizzle(")) or "@triton" in body


def _static(cases: list[tuple[str, str, str]], kind: str) -> list[Case]:
    """Hook bodies (or whole files) the static check must refuse, with a fragment of the reason."""
    return [Case(f"{kind}-{name}", kind, body if _whole_file(body) else hook(body), "static", fragment)
            for name, body, fragment in cases]


SYNTAX_AND_CONTRACT = _static([
    ("no_decorator", "def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return pid\n", "decorated"),
    ("wrong_decorator", "@triton.autotune\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return pid\n",
     "decorator"),
    ("wrong_name", "@triton.jit\ndef remap(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return pid\n", "named"),
    ("missing_param", "@triton.jit\ndef swizzle(pid, num_pids):\n    return pid\n", "wrong parameters"),
    ("extra_param", "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr, X):\n    return pid\n",
     "wrong parameters"),
    ("renamed_param", "@triton.jit\ndef swizzle(p, num_pids, NUM_XCDS: tl.constexpr):\n    return p\n",
     "wrong parameters"),
    ("default_value", "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr = 8):\n    return pid\n",
     "no defaults"),
    ("no_constexpr", "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS):\n    return pid\n", "tl.constexpr"),
    ("varargs", "@triton.jit\ndef swizzle(*args):\n    return args[0]\n", "signature"),
    ("syntax_error", "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return (pid\n",
     "does not parse"),
    ("bad_indent", "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\nreturn pid\n",
     "does not parse"),
    ("empty_file", "#!empty\n", "define exactly one"),
    ("no_return", "x = pid", "return"),
    ("return_nothing", "return", "needs a value"),
    ("return_tuple_1d", "return pid, 0", "returns 2 value(s)"),
    ("return_float", "return pid * 1.0", "float"),
    ("return_string", "return 'pid'", "str"),
    ("true_division", "return pid / 1", "/"),
    ("power", "return pid ** 1", "**"),
    ("builtin_abs", "return abs(pid)", "tl.abs()"),
    ("while_loop", "while pid > 0:\n    pid -= 1\nreturn pid", "while"),
    ("runtime_range", "acc = 0\nfor i in range(num_pids):\n    acc += 1\nreturn pid", "not static"),
    ("return_in_loop", "for i in range(2):\n    return pid\nreturn pid", "inside a loop"),
    ("for_else", "for i in range(2):\n    pass\nelse:\n    pass\nreturn pid", "for ... else"),
    ("list_literal", "x = [pid]\nreturn pid", "lists are not allowed"),
    ("dict_literal", "x = {0: pid}\nreturn pid", "dicts are not allowed"),
    ("comprehension", "x = [i for i in range(3)]\nreturn pid", "comprehensions are not allowed"),
    ("lambda", "f = lambda x: x\nreturn pid", "lambdas are not allowed"),
    ("walrus", "return (x := pid)", "`:=` is not allowed"),
    ("fstring", "x = f'{pid}'\nreturn pid", "f-strings are not allowed"),
    ("is_compare", "return pid if pid is not None else 0", "is"),
    ("in_compare", "return pid if pid in (1, 2) else pid", "in"),
    ("subscript", "return (pid,)[0]", "subscripts"),
    ("starred", "a, *b = pid, pid\nreturn pid", "only plain names can be assigned"),
    ("nested_def", "def inner(x):\n    return x\nreturn pid", "nested function definitions"),
    ("class_def", "class A:\n    pass\nreturn pid", "class definitions are not allowed"),
    ("try_block", "try:\n    x = pid\nexcept Exception:\n    x = 0\nreturn x", "`try` is not allowed"),
    ("with_block", "with open('x') as f:\n    pass\nreturn pid", "`with` is not allowed"),
    ("assert_stmt", "assert pid >= 0\nreturn pid", "`assert` is not allowed"),
    ("del_stmt", "x = pid\ndel x\nreturn pid", "`del` is not allowed"),
    ("global_stmt", "global X\nreturn pid", "`global` is not allowed"),
    ("raise_stmt", "raise ValueError()\nreturn pid", "`raise` is not allowed"),
    ("yield_stmt", "yield pid\nreturn pid", "`yield` is not allowed"),
    ("await_expr", "return await pid", "`await` is not allowed"),
    ("undefined_name", "return pid + offset", "not defined"),
    ("reassign_tl", "tl = 0\nreturn pid", "cannot be reassigned"),
    ("tl_load", "return tl.load(pid)", "tl.load"),
    ("program_id", "return tl.program_id(0)", "tl.program_id"),
    ("bad_cast", "return pid.to(tl.float32)", "integer dtype"),
    ("keyword_args", "return tl.where(pid > 0, x=pid, y=pid)", "keyword"),
], "syntax")

_ESCAPES = [
    ("dunder_import", "__import__('os').system('touch " + MARKER + "')\nreturn pid", "__import__"),
    ("eval", "return eval('pid')", "eval"),
    ("exec", "exec('import os')\nreturn pid", "exec"),
    ("open_file", "open('" + MARKER + "', 'w')\nreturn pid", "open"),
    ("compile", "compile('1', 'x', 'eval')\nreturn pid", "compile"),
    ("getattr", "return getattr(pid, '__class__')", "getattr"),
    ("globals", "x = globals()\nreturn pid", "calls to `globals`"),
    ("locals", "x = locals()\nreturn pid", "calls to `locals`"),
    ("vars", "x = vars()\nreturn pid", "calls to `vars`"),
    ("breakpoint", "breakpoint()\nreturn pid", "breakpoint"),
    ("dunder_class", "return pid.__class__", "__class__"),
    ("mro_walk", "x = ().__class__.__bases__[0].__subclasses__()\nreturn pid", "dunder names"),
    ("dunder_globals", "return swizzle.__globals__", "__globals__"),
    ("dunder_builtins", "return __builtins__", "__builtins__"),
    ("tl_inline_asm", "return tl.inline_asm_elementwise('mov', '=r', [pid], dtype=tl.int32, is_pure=True, pack=1)",
     "tl.inline_asm_elementwise"),
    ("tl_device_print", "tl.device_print('x', pid)\nreturn pid", "tl.device_print"),
    ("tl_static_print", "tl.static_print(pid)\nreturn pid", "tl.static_print"),
    ("tl_extra", "return tl.extra.cuda.libdevice.abs(pid)", "tl.extra"),
    ("triton_language", "return triton.language.abs(pid)", "triton.language"),
    ("os_attribute", "return os.getpid()", "os.getpid"),
    ("sys_modules", "return sys.modules['os'].getpid()", "sys.modules"),
    ("print_call", "print(pid)\nreturn pid", "print"),
    ("input_call", "input()\nreturn pid", "input"),
    ("type_call", "return type(pid)(0)", "type"),
    ("str_format", "x = '{0.__class__}'.format(pid)\nreturn pid", "format"),
    ("fullwidth_eval", "return \uff45\uff56\uff41\uff4c('pid')", "eval"),
    ("fullwidth_import", "\uff3f\uff3fimport\uff3f\uff3f('os')\nreturn pid", "does not parse"),
    ("decorator_call", "@triton.jit\n@(lambda f: f)\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n"
                       "    return pid\n", "decorator"),
    ("default_side_effect", "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr = __import__('os')):\n"
                            "    return pid\n", "no defaults"),
    ("annotation_side_effect", "@triton.jit\ndef swizzle(pid: __import__('os'), num_pids, "
                               "NUM_XCDS: tl.constexpr):\n    return pid\n", "annotated"),
    ("import_inside", "import os\nreturn pid", "imports are not allowed"),
    ("from_import_inside", "from os import system\nreturn pid", "imports are not allowed"),
    ("module_import", "import os\n@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n"
                      "    return pid\n", "imports are not allowed"),
    ("module_statement", "open('" + MARKER + "', 'w')\n@triton.jit\n"
                         "def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return pid\n", "outside it"),
    ("module_class", "class X:\n    pass\n@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n"
                     "    return pid\n", "outside it"),
    ("second_function", "@triton.jit\ndef helper(x):\n    return x\n@triton.jit\n"
                        "def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return helper(pid)\n",
     "calls to `helper`"),
    ("attribute_on_constant", "return (1).__add__(pid)", "__add__"),
    ("tl_constexpr_call", "x = tl.constexpr(__import__('os'))\nreturn pid", "tl.constexpr"),
    ("tl_tensor_method", "return pid.__index__()", "__index__"),
    ("string_exec_in_docstring", '"""exec(\'import os\')"""\nreturn eval("pid")', "eval"),
]
_CUT_AWAY = {"module_import", "module_statement", "module_class"}  # outside the hook: cut away, never run
EXECUTION = [c if c.id[len("exec-"):] not in _CUT_AWAY else Case(c.id, c.kind, c.text, None)
             for c in _static(_ESCAPES, "exec")]

_TERMS = " + ".join(f"(acc ^ {k})" for k in range(1, 31))
RESOURCE = _static([
    *[(f"range_{n}", f"for i in range({n}):\n    pass\nreturn pid", "the cap is 64")
      for n in (65, 1000, 10 ** 6, 2 ** 31, 2 ** 62, 2 ** 63, 2 ** 64, 10 ** 30)],
    *[(f"static_range_{n}", f"for i in tl.static_range({n}):\n    pass\nreturn pid", "the cap is 64")
      for n in (65, 4096, 2 ** 40)],
    ("range_negative_step", "for i in range(1000000, 0, -1):\n    pass\nreturn pid", "the cap is 64"),
    ("range_zero_step", "for i in range(0, 10, 0):\n    pass\nreturn pid", "must not be zero"),
    *[(f"literal_{bits}_bits", f"return pid + {2 ** bits}", "bits") for bits in (257, 1000, 4000)],
    *[(f"nesting_{depth}", "return " + "(" * depth + "pid" + ")" * depth, "nested more than 100 levels deep")
      for depth in (101, 500, 5000)],
    ("many_statements", "\n".join(["x = pid"] * 1500) + "\nreturn x", "syntax nodes"),
    # 600 terms parse (a chain is as deep as it is long) and the tree's depth is refused; at ~3,000 whether the
    # parser's own recursion gives out first depends on the caller's stack depth (binop_chain above: 60,000)
    ("long_sum", "return " + " + ".join(["pid"] * 600), "nested more than 100 levels deep"),
], "resource") + [
    Case(f"resource-counted_work_{trips}", "resource",
         hook(f"acc = pid\nfor i in range({trips}):\n    acc = ({_TERMS}) - ({_TERMS}) + acc\nreturn acc"),
         "bijectivity", "counted work") for trips in (32, 48, 64)
] + [
    Case(f"resource-nested_counted_work_{inner}", "resource",
         hook(f"acc = pid\nfor i in range(8):\n    for j in range({inner}):\n"
              f"        acc = ({_TERMS}) - ({_TERMS}) + acc\nreturn acc"), "bijectivity", "counted work")
    for inner in (4, 8)
]

# --- non-bijections the sampled grids catch -------------------------------------------------------

_SAMPLED_1D = [
    ("constant", "return 0"), ("half", "return pid // 2"), ("double", "return pid * 2"),
    ("plus_one", "return pid + 1"), ("minus_one", "return pid - 1"), ("reverse_off_by_one", "return num_pids - pid"),
    ("mod_smaller", "return pid % (num_pids - 1) if num_pids > 1 else pid"), ("square", "return pid * pid % num_pids"),
    ("xcd_naive", "return (pid % NUM_XCDS) * (num_pids // NUM_XCDS) + pid // NUM_XCDS"),
    ("negate", "return -pid"), ("die_only", "return pid % NUM_XCDS"), ("clamp", "return min(pid, num_pids // 2)"),
    ("abs_shift", "return tl.abs(pid - num_pids // 2)"), ("shift_left", "return pid << 1"),
    ("shift_right", "return pid >> 1"), ("and_mask", "return pid & 7"), ("or_one", "return pid | 1"),
    ("max_fold", "return tl.maximum(pid, num_pids - 1 - pid)"), ("wrong_branch", "return pid if pid % 3 else 0"),
    ("swap_collide", "return tl.where(pid == 1, 0, pid)"), ("cdiv", "return tl.cdiv(pid, 2)"),
    ("grid_independent_mod", "return pid % 1000"), ("wraps_int32", "return pid * 65536 % num_pids"),
] + [(f"xor_{k}", f"return pid ^ {k}") for k in (1, 2, 3, 5, 8, 13)] + [
    (f"stride_{k}", f"return (pid * {k}) % num_pids") for k in (2, 4, 6, 8, 10, 12)]
_SAMPLED_2D = [
    ("transpose_wrong", "return pid % num_pid_n, pid // num_pid_n"), ("row_only", "return pid // num_pid_n, 0"),
    ("wrong_modulus", "return pid // num_pid_n, pid % num_pid_m"), ("swapped_extents", "return pid // num_pid_m, pid % num_pid_m"),
    ("diagonal", "return pid % num_pid_m, pid % num_pid_n"), ("constant", "return 0, 0"),
]
_SAMPLED_3D = [
    ("no_batch", "return pid // num_heads, 0, pid % num_heads"),
    ("heads_twice", "return pid // (batch_size * num_heads), pid % num_heads, pid % num_heads"),
    ("blocks_modulo", "return pid % num_q_blocks, (pid // num_heads) % batch_size, pid % num_heads"),
]
NON_BIJECTIONS = [Case(f"sampled-{ndim}d-{name}", "non_bijection", hook_of(ndim, body), "bijectivity", "", ndim)
                  for ndim, cases in ((1, _SAMPLED_1D), (2, _SAMPLED_2D), (3, _SAMPLED_3D)) for name, body in cases]

# --- non-bijections only the proof catches: wrong on grids nobody samples ---------------------------

_GRIDS_1D = (1000001, 32768, 4099, 12345, 77777, 999983, 2 ** 20 + 7, 2 ** 24 + 1, 3 ** 13, 500009, 2 ** 31 - 1,
             2 ** 30, 123456789, 65519, 100003)
_PROGRAMS = (2 ** 20, 2 ** 22 + 3, 5_000_000, 2 ** 30, 1_234_567, 2 ** 31 - 2)
BACKDOORS = (
    [Case(f"backdoor-grid_{g}", "backdoor", hook(f"if num_pids == {g}:\n    return pid // 2 * 2\nreturn pid"),
          "bijectivity", f"grid ({g},)") for g in _GRIDS_1D]
    + [Case(f"backdoor-grid_{g}_xcd", "backdoor",
            hook(f"lid = pid\nif num_pids == {g}:\n    lid = (pid % NUM_XCDS) * (num_pids // NUM_XCDS) "
                 f"+ pid // NUM_XCDS\nreturn lid"), "bijectivity", "") for g in (1000001, 12345, 999983)]
    + [Case(f"backdoor-program_{p}", "backdoor", hook(f"return tl.where(pid == {p}, 0, pid)"), "bijectivity",
            f"programs 0 and {p}") for p in _PROGRAMS]
    + [Case(f"backdoor-m_{m}", "backdoor", hook_of(2, f"pid_m = pid // num_pid_n\npid_n = pid % num_pid_n\n"
                                                       f"if num_pid_m == {m}:\n    pid_n = pid_n // 2 * 2\n"
                                                       f"return pid_m, pid_n"), "bijectivity", "", 2)
       for m in (33, 47, 1001, 4097)]
    + [Case(f"backdoor-n_{n}", "backdoor", hook_of(2, f"if num_pid_n == {n}:\n    return pid // num_pid_n, 0\n"
                                                       f"return pid // num_pid_n, pid % num_pid_n"),
            "bijectivity", "", 2) for n in (33, 250, 1023)]
    + [Case(f"backdoor-heads_{h}", "backdoor", hook_of(3, f"if num_heads == {h}:\n    return 0, 0, 0\n"
                                                          "return pid // (batch_size * num_heads), "
                                                          "(pid // num_heads) % batch_size, pid % num_heads"),
            "bijectivity", "", 3) for h in (40, 96)]
    + [Case(f"backdoor-unless_{d}_dies", "backdoor",
            hook(f"if num_pids % {d} != 0:\n    return pid\nrows = num_pids // {d}\n"
                 f"return (pid % NUM_XCDS) * rows + pid // {d}"), "bijectivity") for d in (8, 4, 16)]
    + [Case("backdoor-softmax_8192x4", "backdoor",
            hook("if num_pids == 32768:\n    return (pid * 2) % num_pids\nreturn pid"), "bijectivity", "(32768,)"),
       # Wrong only through an int32 wrap past 2**30 programs: accepted with that limit said, not silently
       Case("backdoor-wrap_collision", "backdoor", hook("return tl.where(num_pids == 2147483647, pid * 2, pid)"),
            None, "proven bijective for every grid of up to 1,073,741,823 programs (z3); on larger grids an int32 "
                  "intermediate wraps")]
)

# --- valid remaps: bijections for every grid size (no int32 intermediate wraps) ---------------------

def _family_cases() -> list[Case]:
    from swizzleperf.kernel.contract import HookSignature
    from swizzleperf.remaps.families import FamilyInstance
    hooks = {1: HookSignature("swizzle", "pid", ("num_pids",), ("NUM_XCDS",)),
             2: HookSignature("swizzle", "pid", ("num_pid_m", "num_pid_n"), ("NUM_XCDS",)),
             3: HookSignature("swizzle", "pid", ("num_q_blocks", "batch_size", "num_heads"), ("NUM_XCDS",))}
    picks = {1: [("xcd_contiguous", {}), *[("xcd_chunked", {"chunk": c}) for c in (2, 4, 8, 16, 32, 64, 128)],
                 ("xcd_contiguous", {"dies": 4}), ("xcd_chunked", {"chunk": 8, "dies": 2})],
             2: [("identity", {}), ("col_major", {}), *[("grouped", {"group_m": g}) for g in (2, 4, 8, 16, 32)],
                 ("xcd_row_major", {}), ("xcd_col_major", {}), ("xcd_grouped", {"group_m": 8}),
                 ("xcd_chunked_grouped", {"chunk": 4, "group_m": 8})],
             3: [("identity", {}), ("head_first", {}), ("swizzled_head_first", {"group": 2}),
                 ("swizzled_block_first", {"group": 4})]}
    return [Case(f"valid-family-{ndim}d-{FamilyInstance(f, tuple(p.items())).label}", "valid",
                 FamilyInstance(f, tuple(p.items())).render(hooks[ndim]), None, "", ndim)
            for ndim, chosen in picks.items() for f, p in chosen]


_VALID_1D = [
    ("identity", "return pid"), ("reverse", "return num_pids - 1 - pid"),
    ("interleave", "half = (num_pids - 1) // 2 + 1\nreturn tl.where(pid < half, pid * 2, (pid - half) * 2 + 1)"),
    ("pairs_swapped", "partner = pid ^ 1\nreturn partner if partner < num_pids else pid"),
    ("if_else_identity", "if pid % 2 == 0:\n    lid = pid\nelse:\n    lid = pid\nreturn lid"),
    ("loop_identity", "acc = pid\nfor i in tl.static_range(4):\n    acc = acc + i - i\nreturn acc"),
    ("runtime_loop", "acc = pid\nfor i in range(3):\n    acc += 1\nreturn acc - 3"),
    ("int64_detour", "x = pid.to(tl.int64) * 2\nreturn (x // 2).to(tl.int32)"),
    ("docstring_and_comments", '"""Identity, said at length."""\n# a comment\nreturn pid  # trailing'),
    ("min_max_identity", "return max(min(pid, num_pids - 1), 0)"),
    ("where_reverse_halves", "half = num_pids // 2\nreturn tl.where(pid < half, half - 1 - pid, pid)"),
    ("die_count_read", "lid = pid\nif NUM_XCDS > 100:\n    lid = 0\nreturn lid"),
    # int32 wraps in `num_pids + NUM_XCDS - 1` within N of 2**31: proven below that, accepted with the limit
    ("wrapping_ceil", "q = (num_pids + NUM_XCDS - 1) // NUM_XCDS\nt = num_pids - (q - 1) * NUM_XCDS\n"
                      "xcd = pid % NUM_XCDS\nif xcd < t:\n    return xcd * q + pid // NUM_XCDS\n"
                      "return t * q + (xcd - t) * (q - 1) + pid // NUM_XCDS"),
] + [(f"rotate_{k}", f"s = {k} % num_pids\nreturn tl.where(pid >= num_pids - s, pid - (num_pids - s), pid + s)")
     for k in (1, 3, 7, 100, 65536, 2 ** 30)] + [
    (f"block_reverse_{b}", f"full = num_pids - num_pids % {b}\n"
                           f"return tl.where(pid < full, pid - pid % {b} + ({b} - 1 - pid % {b}), pid)")
    for b in (2, 4, 8, 16)]
_VALID_2D = [
    ("row_major", "return pid // num_pid_n, pid % num_pid_n"),
    ("col_major", "return pid % num_pid_m, pid // num_pid_m"),
    ("flipped_rows", "return num_pid_m - 1 - pid // num_pid_n, pid % num_pid_n"),
    ("flipped_cols", "return pid // num_pid_n, num_pid_n - 1 - pid % num_pid_n"),
    ("snake", "row = pid // num_pid_n\ncol = pid % num_pid_n\nreturn row, tl.where(row % 2 == 0, col, num_pid_n - 1 - col)"),
]
_VALID_3D = [
    ("identity_steps", "unit = pid % (batch_size * num_heads)\nreturn pid // (batch_size * num_heads), "
                       "unit // num_heads, unit % num_heads"),
    ("heads_reversed", "return pid // (batch_size * num_heads), (pid // num_heads) % batch_size, "
                       "num_heads - 1 - pid % num_heads"),
]
VALID_REMAPS = _family_cases() + [
    Case(f"valid-{ndim}d-{name}", "valid", hook_of(ndim, body), None,
         "on larger grids an int32 intermediate wraps" if name == "wrapping_ceil" else "", ndim)
    for ndim, cases in ((1, _VALID_1D), (2, _VALID_2D), (3, _VALID_3D)) for name, body in cases]

# --- a model's answers: the code inside prose, fences, thinking, several blocks --------------------

_GOOD = hook("xcd = pid % NUM_XCDS\nreturn pid")
_WRAPPERS = [
    ("fenced", "```python\n{code}```"), ("fenced_py", "```py\n{code}```"), ("fenced_untagged", "```\n{code}```"),
    ("tilde_fence", "~~~python\n{code}~~~"), ("prose_around", "Here is the remap:\n\n```python\n{code}```\n\nIt keeps "
                                                               "neighbours on one die."),
    ("thinking", "<think>\nThe die is pid % 8.\n</think>\n```python\n{code}```"),
    ("two_blocks_last_wins", "The original:\n```python\n" + hook("return 0") + "```\nThe new one:\n```python\n{code}```"),
    ("unfenced", "Sure.\n\n{code}\nThat is all."), ("crlf", "```python\r\n{code_crlf}```"),
    ("with_imports", "```python\nimport triton\nimport triton.language as tl\n\n{code}```"),
    ("dspy_fields", "[[ ## reasoning ## ]]\nKeep rows together.\n\n[[ ## code ## ]]\n```python\n{code}```\n\n"
                    "[[ ## completed ## ]]"),
    ("indented", "    ```python\n{code_indented}    ```"),
    ("renamed_function", "```python\n{code_renamed}```"),
    ("markdown_heading", "## Remap\n\n```python\n{code}```\n\n### Why\nLocality."),
    ("trailing_fence_text", "```python\n{code}```\n```text\nnotes\n```"),
]


def _answers(code: str, accept: bool, prefix: str, stage: str | None, fragment: str = "") -> list[Case]:
    forms = {"code": code, "code_crlf": code.replace("\n", "\r\n"),
             "code_indented": "".join("    " + line + "\n" for line in code.splitlines()),
             "code_renamed": code.replace("def swizzle(", "def my_remap(")}
    return [Case(f"llm-{prefix}-{name}", "llm", template.format(**forms), None if accept else stage, fragment)
            for name, template in _WRAPPERS]


LLM_ANSWERS = (
    _answers(_GOOD, True, "valid", None)
    + _answers(hook("return pid // 2"), False, "halving", "bijectivity")
    + _answers(hook("return eval('pid')"), False, "eval", "static", "eval")
    + [Case("llm-no_code", "llm", "I could not find a better remap.", "propose", "no Python function"),
       Case("llm-empty", "llm", "", "propose", "no code"),
       Case("llm-only_kernel_prose", "llm", "Use XCD-contiguous ordering with chunks of 4.", "propose", "no Python function"),
       Case("llm-broken_fence", "llm", "```python\n" + HEAD + "    return (pid\n```", "propose", ""),
       Case("llm-json_blob", "llm", '{"code": "return pid"}', "propose", "")]
)

CORPUS: list[Case] = SYNTAX_AND_CONTRACT + EXECUTION + RESOURCE + NON_BIJECTIONS + BACKDOORS + VALID_REMAPS \
    + LLM_ANSWERS
