"""The kernel contract: loading, the hook, and errors that name what is missing."""

import re
import textwrap
from pathlib import Path

import pytest

from swizzleperf.errors import ContractError
from swizzleperf.kernel.contract import load_kernel

ROOT = Path(__file__).resolve().parents[2]


def test_softmax_loads():
    k = load_kernel(ROOT / "kernels/softmax.py")
    assert k.hook.render() == "def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr)"
    assert k.grid("medium") == (4096 * 4,)
    assert k.hook_source.startswith("@triton.jit\ndef swizzle(")
    assert k.with_hook(k.hook_source) == k.source


def test_with_hook_replaces_only_the_hook():
    k = load_kernel(ROOT / "kernels/softmax.py")
    new = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return num_pids - 1 - pid\n"
    text = k.with_hook(new)
    assert new in text and k.hook_source not in text
    assert text.replace(new, k.hook_source) == k.source


def _write(tmp_path, body: str) -> Path:
    path = tmp_path / "k.py"
    path.write_text(textwrap.dedent(body))
    return path


GOOD = '''
    import triton
    import triton.language as tl

    @triton.jit
    def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
        return pid

    @triton.jit
    def k(x_ptr, NUM_XCDS: tl.constexpr):
        pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)

    REMAP_HOOK = "swizzle"
    SIZES = {"s": {"n": 4}}
    DEFAULT_SIZE = "s"
    CHECK_SIZES = ["s"]
    TOLERANCE = {"atol": 0.0, "rtol": 0.0}
    def grid(size): return (size["n"],)
    def make_inputs(size, seed, device): return {}
    def make_outputs(size, device): return {}
    def launch(inputs, outputs, size, num_xcds): pass
    def reference(inputs, size): return {}
'''


def test_minimal_good_file_loads(tmp_path):
    k = load_kernel(_write(tmp_path, GOOD))
    assert k.hook.grid_params == ("num_pids",) and k.hook.constexprs == ("NUM_XCDS",)
    assert k.programs_per_cu is None  # optional: the hardware's occupancy assumption stands
    assert load_kernel(_write(tmp_path, GOOD + "    PROGRAMS_PER_CU = 3\n")).programs_per_cu == 3


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.replace('REMAP_HOOK = "swizzle"', ""), "missing REMAP_HOOK"),
    (lambda s: s.replace('TOLERANCE = {"atol": 0.0, "rtol": 0.0}', ""), "missing TOLERANCE (TOLERANCE says how far "
                                                                       "reference() may differ)"),
    (lambda s: s.replace("def reference(inputs, size): return {}", "reference = 3"), "reference must be a function"),
    (lambda s: s.replace('REMAP_HOOK = "swizzle"', 'REMAP_HOOK = "remap"'), "no top-level function remap"),
    (lambda s: s.replace("    @triton.jit\n    def swizzle", "    def swizzle"), "must be decorated with @triton.jit"),
    (lambda s: s.replace("pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)", "pass"), "never called"),
    (lambda s: s.replace("NUM_XCDS: tl.constexpr):\n        return", "NUM_XCDS):\n        return"),
     "exactly one constexpr, the die count"),
    (lambda s: s.replace('DEFAULT_SIZE = "s"', 'DEFAULT_SIZE = "big"'), "undeclared sizes: big"),
    (lambda s: s.replace('return (size["n"],)', 'return (size["n"], 2)'), "needs 1 positive extent"),
    (lambda s: s.replace('SIZES = {"s": {"n": 4}}', 'SIZES = {"s": {"n": 4.5}}'), "dict of integer parameters"),
    (lambda s: s + "    PROGRAMS_PER_CU = 0\n", "PROGRAMS_PER_CU must be a positive integer, got 0"),
    (lambda s: s + "    PROGRAMS_PER_CU = True\n", "PROGRAMS_PER_CU must be a positive integer, got True"),
    (lambda s: s + "    PROGRAMS_PER_CU = '2'\n", "PROGRAMS_PER_CU must be a positive integer, got '2'"),
])
def test_contract_errors_name_the_problem_and_show_the_shape(tmp_path, edit, message):
    with pytest.raises(ContractError) as err:
        load_kernel(_write(tmp_path, edit(GOOD)))
    assert message in str(err.value)
    if "extent" not in message:
        assert "Expected shape" in str(err.value)


def test_file_that_does_not_import_or_parse(tmp_path):
    with pytest.raises(ContractError, match="does not parse: line 1"):
        load_kernel(_write(tmp_path, "def (:\n"))
    path = _write(tmp_path, "import no_such_module_here\n")
    with pytest.raises(ContractError) as err:
        load_kernel(path)
    assert str(err.value) == (f"importing k.py raised ModuleNotFoundError: No module named 'no_such_module_here' at "
                              f"{path}:1 (`import no_such_module_here`); reproduce with: TRITON_INTERPRET=1 python "
                              f"{path}")
    with pytest.raises(ContractError, match="does not exist"):
        load_kernel(tmp_path / "absent.py")


def test_documented_example_follows_the_contract(tmp_path):
    doc = (ROOT / "docs" / "kernel-contract.md").read_text()
    block = re.search(r"## A complete 1D example.*?```python\n(.*?)```", doc, re.S).group(1)
    k = load_kernel(_write(tmp_path, block))
    assert k.grid("small") == (16,)
