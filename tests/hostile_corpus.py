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
