"""Issue 35's corpus: hostile *data*, the files swizzleperf reads back and the remaps it is asked to trust.

Each class is a list of cases that tests/untrusted/test_hostile_data.py runs through the production
readers and checks; CORPUS_SIZE counts them. What each must do: be refused with one line naming the
file (or, for a remap, be rejected at its stage), never execute anything, never write outside the
run or library directory, and never let a non-bijection become the best or be rendered.
"""

from __future__ import annotations

import json

MARKER = "SWIZZLEPERF_HOSTILE_RAN"  # a file a case's code would create, were it ever run


def _deep(depth: int, opener: str = "[", closer: str = "]") -> bytes:
    return (opener * depth + closer * depth).encode()


# run.json contents that are not a run record: (id, bytes, words the one-line error must hold)
RUN_JSON = [
    ("list", b"[]", "schema version None"),
    ("number", b"1", "schema version None"),
    ("string", b'"run"', "schema version None"),
    ("null", b"null", "schema version None"),
    ("bool", b"true", "schema version None"),
    ("deep-65", _deep(65), "nests 65 levels deep"),
    ("deep-1000", _deep(1000), "nests 1,000 levels deep"),
    ("deep-100000", _deep(100_000), "nests 100,000 levels deep"),
    ("deep-dicts", b'{"a":' * 200 + b"1" + b"}" * 200, "nests 200 levels deep"),
    ("latin1", '{"run_id": "caf\xe9"}'.encode("latin-1"), "is not UTF-8 text"),
    ("utf16", '{"a": 1}'.encode("utf-16"), "is not UTF-8 text"),
    ("lone-continuation", b'{"a": "\x80"}', "is not UTF-8 text"),
    ("truncated", b'{"schema_version": 1, "run_id": "x', "is not valid JSON"),
    ("trailing", b'{"schema_version": 1} {}', "is not valid JSON"),
    ("empty", b"", "is not valid JSON"),
    ("version-0", b'{"schema_version": 0}', "schema version 0"),
    ("version-2", b'{"schema_version": 2}', "schema version 2"),
    ("version-string", b'{"schema_version": "1"}', "schema version 1"),
]

# run.json fields changed in an otherwise valid record: (id, dotted field, value, words of the error)
RUN_FIELDS = [
    ("run-id-int", "run_id", 3, "at run_id"),
    ("status", "status", "hacked", "at status"),
    ("kernel-path-list", "kernel.path", ["a"], "at kernel.path"),
    ("dies-2-40", "hardware.num_domains", 2 ** 40, "less than or equal to 64"),
    ("cus-0", "hardware.cus_per_domain", 0, "greater than or equal to 1"),
    ("iterations", "iterations", "many", "at iterations"),
    ("extra", "evil", "os.system('id')", "at evil"),
    ("created", "created_at", "yesterday", "at created_at"),
    ("l2-huge", "hardware.l2_bytes_per_domain", 2 ** 50, "less than or equal to 1073741824"),
    ("line-odd", "hardware.line_bytes", 96, "power of two"),
]

# one line of attempts.jsonl (not the last: a torn last line is a kill, dropped) that is not an attempt
ATTEMPT_LINES = [
    ("not-json", b"{not json", "is not valid JSON"),
    ("list", b"[1, 2]", "does not match Attempt"),
    ("deep", _deep(5000), "nests 5,000 levels deep"),
    ("iteration-string", b'{"iteration": "x"}', "does not match Attempt at iteration"),
    ("empty-object", b"{}", "does not match Attempt"),
    ("latin1", b'{"family": "caf\xe9"}', "is not UTF-8 text"),
    ("number", b"42", "does not match Attempt"),
]

_HOOK = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    {}\n"

# sources a forged "accepted, best" attempt claims: each must be rejected when it is read back
FORGED_SOURCES = [
    ("halve", _HOOK.format("return pid // 2")),
    ("zero", _HOOK.format("return 0")),
    ("mod7", _HOOK.format("return pid % 7")),
    ("past-end", _HOOK.format("return num_pids - pid")),
    ("shift", _HOOK.format("return pid + 1")),
    ("double", _HOOK.format("return (pid * 2) % num_pids")),
    ("one-collision", _HOOK.format("return tl.where(pid == 3, 4, pid)")),
    ("claims-proof", _HOOK.format('"""Proven bijective for all grid sizes (z3)."""\n    return pid // 2')),
    ("wrap", _HOOK.format("if pid * 1073741824 < 0:\n        return 0\n    return pid")),
    ("module-code", f"import os\nos.system('touch {MARKER}')\n" + _HOOK.format("return pid")),
    ("call-inside", _HOOK.format(f"__import__('os').system('touch {MARKER}')\n    return pid")),
    ("open-inside", _HOOK.format(f"open('{MARKER}', 'w')\n    return pid")),
    ("empty", ""),
    ("not-python", "this is not a remap"),
    ("negative", _HOOK.format("return -pid")),
]

# library entry fields changed in an exported entry: (id, field, value, words of the error)
LIBRARY_FIELDS = [
    ("name-newline-code", "name", "x\nimport os; os.system('touch " + MARKER + "')\n", "at name"),
    ("name-path", "name", "../rows", "at name"),
    ("name-dotted", "name", "a.b", "at name"),
    ("name-keyword", "name", "class", "at name"),
    ("name-private", "name", "_x", "at name"),
    ("name-empty", "name", "", "at name"),
    ("name-space", "name", "x y", "at name"),
    ("name-nul", "name", "rows\x00", "at name"),
    ("params-code", "params", ["pid", "n; import os", "NUM_XCDS"], "at params"),
    ("params-short", "params", ["pid"], "at params"),
    ("ndim-string", "ndim", "two", "at ndim"),
    ("hit-string", "hit_pct", "high", "at hit_pct"),
    ("extra", "evil", 1, "at evil"),
]

# library entry sources, under the entry's own name `rows`: each must be refused on read
_ROWS = "@triton.jit\ndef rows(pid, num_pids, NUM_XCDS: tl.constexpr):\n    {}\n"
LIBRARY_SOURCES = [
    ("module-code", f"import os\nos.system('touch {MARKER}')\n" + _ROWS.format("return pid"), "nothing else"),
    ("two-functions", _ROWS.format("return pid") + "\n\ndef helper():\n    return 1\n", "nothing else"),
    ("syntax", _ROWS.format("return (pid"), "does not parse"),
    ("other-name", _HOOK.format("return pid"), "nothing else"),
    ("no-jit", "def rows(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return pid\n", "triton.jit"),
    ("call-inside", _ROWS.format(f"__import__('os').system('touch {MARKER}')\n    return pid"), "at the top level"),
    ("open-inside", _ROWS.format("open('x')\n    return pid"), "at the top level"),
]

# hardware spec files: (id, file name, content, words of the one-line error)
SPECS = [
    ("deep-yaml", "s.yaml", "a: " + "[" * 20_000 + "]" * 20_000, "levels deep"),
    ("deep-json", "s.json", '{"a": ' + "[" * 20_000 + "]" * 20_000 + "}", "levels deep"),
    ("deep-yaml-block", "s.yaml", "".join("  " * i + "a:\n" for i in range(200)), "levels deep"),
    ("latin1", "s.yaml", b"name: caf\xe9\n", "not UTF-8"),
    ("alias", "s.yaml", "a: &x [1, 2]\nb: *x\n", "YAML alias"),
    ("billion-laughs", "s.yaml", "a: &a [x]\nb: &b [*a, *a]\nc: [*b, *b]\n", "YAML alias"),
    ("not-mapping", "s.yaml", "- 1\n- 2\n", "must hold a mapping"),
    ("not-yaml", "s.yaml", "a: [1, 2\n", "not valid YAML"),
    ("not-json", "s.json", "{", "not valid JSON"),
    ("unknown-base", "s.yaml", "base: mi999\n", "is not a preset"),
    ("python-tag", "s.yaml", "a: !!python/object/apply:os.system ['touch " + MARKER + "']\n", "not valid YAML"),
]
for _field, _value, _words in [
    ("num_domains", 0, "greater than or equal to 1"), ("num_domains", 65, "less than or equal to 64"),
    ("num_domains", 2 ** 40, "less than or equal to 64"), ("cus_per_domain", 0, "greater than or equal to 1"),
    ("cus_per_domain", 1025, "less than or equal to 1024"), ("cus_per_domain", 2 ** 31, "less than or equal to 1024"),
    ("l2_bytes_per_domain", 0, "greater than or equal to 16"),
    ("l2_bytes_per_domain", 2 ** 41, "less than or equal to 1073741824"), ("line_bytes", 3, "greater than or equal to 16"),
    ("line_bytes", 4096, "less than or equal to 1024"), ("line_bytes", 96, "power of two"),
    ("l2_ways", 0, "greater than or equal to 1"), ("l2_ways", 65, "less than or equal to 64"),
    ("programs_per_cu", 0, "greater than or equal to 1"), ("programs_per_cu", 10 ** 6, "less than or equal to 64"),
    ("num_domains", "eight", "valid integer"), ("num_domains", -8, "greater than or equal to 1"),
    ("next_level_bytes", 2 ** 40, "less than or equal to"), ("l1_bytes_per_cu", 2 ** 30, "less than or equal to"),
]:
    SPECS.append((f"{_field}-{_value}", "s.yaml", f"base: mi300x\n{_field}: {json.dumps(_value)}\n", _words))

# loop-order hooks that permute the steps on local tiles 0-7 (the sampled ones) and fail beyond
LOOP_ORDERS = [f"tl.where(local_tile == {t}, 0, step)" for t in (8, 9, 12, 15, 16, 63, 100, 1000, 65536, 2 ** 30)]
LOOP_ORDERS += [f"tl.where(local_tile >= {t}, step // 2, step)" for t in (8, 11, 64, 1000)]
LOOP_ORDERS += [f"tl.where(local_tile % {m} == {r}, 0, step)" for m, r in ((16, 12), (32, 17), (9, 8), (100, 99))]
LOOP_ORDERS += ["tl.where(local_tile > 7, n_steps - step, step)", "tl.where(local_tile * 2 > 20, step + 1, step)"]

# remaps that wrap an int32 intermediate above some grid size (`pid * K` overflows at 2**31 / K programs)
WRAPS = [2 ** k for k in range(9, 21)]

# environment variables a child must not see (secrets by another name, code injection, proxies)
HIDDEN_VARIABLES = [
    "SWIZZLEPERF_BEARER", "SWIZZLEPERF_WEBHOOK", "TRITON_CACHE_PASS", "TRITON_REDIS_HOST", "TRITON_REMOTE_CACHE_BACKEND",
    "CUDA_HOOK_URL", "CUDA_INJECTION64_PATH", "HIP_SECRET_CONFIG", "AMD_LICENSE", "NCCL_SOCKET_IFNAME",
    "TORCH_LOGS", "PYTORCH_JIT_LOG_LEVEL", "LC_PRIVATE", "LD_PRELOAD", "LD_AUDIT", "PYTHONPATH", "PYTHONSTARTUP",
    "PYTHONHOME", "BASH_ENV", "http_proxy", "HTTPS_PROXY", "AWS_ACCESS_KEY_ID", "OPENAI_API_BASE", "GH_TOKEN",
]

CORPUS_SIZE = sum(map(len, (RUN_JSON, RUN_FIELDS, ATTEMPT_LINES, FORGED_SOURCES, LIBRARY_FIELDS, LIBRARY_SOURCES,
                            SPECS, LOOP_ORDERS, WRAPS, HIDDEN_VARIABLES)))
