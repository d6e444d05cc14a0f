"""The correctness check: what it catches, what it reports, and that a bad remap cannot hurt the caller.

Tests that go through `check_correctness` start a child process (a Python start-up with torch and
triton, ~3 s here) and use the tiny sizes; the comparison itself is also tested in-process.
"""

import os
import textwrap
import time
from pathlib import Path

import pytest
import torch

from swizzleperf.errors import ContractError, RemapRejected
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.validation.correctness import (
    CorrectnessReport,
    check_correctness,
    compare,
    default_device,
    sizes_to_check,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def layernorm():
    return load_kernel(ROOT / "kernels/layernorm.py")


def hook_1d(body: str, after: str = "") -> str:
    """A 1D remap hook with the given body, and module-level code to splice in after it."""
    return ("@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n"
            + textwrap.indent(textwrap.dedent(body), "    ") + "\n" + textwrap.dedent(after))


# --- through the child -----------------------------------------------------------------------

def test_own_hook_passes_every_check_size_and_seed():
    kernel = load_kernel(ROOT / "kernels/transpose.py")
    report = check_correctness(kernel, kernel.hook_source)
    assert report.ok and report.failure is None
    assert report.device == "cpu" and report.sizes == ["tiny", "small"] and report.seeds == [0, 1]
    assert [(c.size, c.seed, c.ok) for c in report.cases] == [
        ("tiny", 0, True), ("tiny", 1, True), ("small", 0, True), ("small", 1, True)]
    assert report.cases[0].outputs[0].numel == 100 * 70 and report.cases[0].outputs[0].max_abs_error == 0.0
    assert report.summary.startswith("matches the reference on 4 case(s)")
    report.raise_if_failed()
    assert CorrectnessReport.model_validate_json(report.model_dump_json()) == report


def test_a_duplicated_program_leaves_exactly_its_missing_chunk_nan(layernorm):
    # Programs 0 and 1 both compute logical 0; logical 1 (row 0, chunk 1 = columns 334..667) never runs.
    # Every element written is right, so only the NaN prefill can catch this.
    duplicate = hook_1d("return tl.where(pid == 1, 0, pid)")
    report = check_correctness(layernorm, duplicate, sizes=["tiny"], seeds=(0,))
    assert not report.ok
    (out,) = report.cases[0].outputs
    assert (out.nans, out.mismatches, out.first_mismatch) == (334, 334, [0, 334])
    assert out.max_abs_error <= layernorm.tolerance["atol"]
    assert report.failure == ("size tiny seed 0: output y has 334 NaN elements of 5000 (programs never ran?) and "
                              f"334 mismatches in all (max abs error {out.max_abs_error:.3g}, first at index (0, 334))")
    with pytest.raises(RemapRejected) as err:
        report.raise_if_failed()
    assert err.value.stage == "correctness" and err.value.reason == report.failure


def test_a_remap_that_raises_is_a_failed_case_naming_the_line(layernorm):
    report = check_correctness(layernorm, hook_1d("return pid + 1 // 0"), sizes=["tiny"], seeds=(0, 1))
    assert not report.ok and [c.seed for c in report.cases] == [0, 1]
    assert all(c.error and not c.outputs for c in report.cases)
    # decorator, def, then the body: the remap's own line, not a line of the user's file
    assert report.failure == ("size tiny seed 0: launch raised ZeroDivisionError: integer division or modulo "
                              "by zero at line 3 of the remap hook (`return pid + 1 // 0`)")


def test_a_remap_that_crashes_the_child_is_a_failed_report(layernorm):
    crash = hook_1d("return pid", after="import ctypes\nctypes.string_at(0)  # reads address 0: SIGSEGV\n")
    report = check_correctness(layernorm, crash, sizes=["tiny"], seeds=(0,))
    assert not report.ok and report.cases == []
    assert report.failure.startswith("the correctness check was killed by signal 11")


@pytest.mark.slow  # waits out its 8 s time limit
def test_an_endless_remap_is_killed_at_the_time_limit(layernorm, tmp_path):
    pid_file = tmp_path / "child.pid"
    endless = hook_1d("""\
        while pid >= 0:
            pid = pid + 0
        return pid""", after=f"import os\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n")
    t0 = time.monotonic()
    report = check_correctness(layernorm, endless, sizes=["tiny"], seeds=(0,), timeout=8.0)
    assert time.monotonic() - t0 < 8.0 + 5.0
    assert not report.ok and report.cases == []
    assert report.failure == "the correctness check ran past its time limit of 8 s and was killed"
    child = int(pid_file.read_text())  # the child got as far as importing the kernel
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # ... and is gone: nothing left running in the background


def test_a_remap_that_breaks_the_contract_is_a_failed_report(layernorm):
    renamed = hook_1d("return pid").replace("def swizzle(", "def swizzle_v2(")
    report = check_correctness(layernorm, renamed, sizes=["tiny"], seeds=(0,))
    assert not report.ok and report.cases == []
    assert report.failure == ("the kernel with this remap does not load: layernorm.py breaks the kernel contract: "
                              "REMAP_HOOK = 'swizzle' but no top-level function swizzle() is defined")


# A minimal kernel file: y = 2 x, one program per 32 elements. BUG, when set, writes into x too.
SCRIBBLER = '''
from pathlib import Path

import torch
import triton
import triton.language as tl

{prelude}

@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    return pid


@triton.jit
def double_kernel(x_ptr, y_ptr, n, BUG: tl.constexpr, BLOCK: tl.constexpr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, 2 * x, mask=offs < n)
    if BUG:
        tl.store(x_ptr + offs, x * 0 + 1, mask=(offs < n) & (offs % 3 == 0))


REMAP_HOOK = "swizzle"
SIZES = {{"tiny": {{"n": 100}}}}
DEFAULT_SIZE = "tiny"
CHECK_SIZES = ["tiny"]
TOLERANCE = {{"atol": 0.0, "rtol": 0.0}}


def grid(size):
    return (triton.cdiv(size["n"], 32),)


def make_inputs(size, seed, device):
    return {{"x": torch.randn(size["n"], generator=torch.Generator().manual_seed(seed)).to(device)}}


def make_outputs(size, device):
    return {{"y": torch.empty(size["n"], device=device)}}


def launch(inputs, outputs, size, num_xcds):
    double_kernel[grid(size)](inputs["x"], outputs["y"], size["n"], BUG={bug}, BLOCK=32, NUM_XCDS=num_xcds)


def reference(inputs, size):
    return {{"y": 2 * inputs["x"]}}
'''


def write_scribbler(tmp_path: Path, bug: bool, prelude: str = "") -> Path:
    path = tmp_path / "scribbler.py"
    path.write_text(SCRIBBLER.format(bug=bug, prelude=prelude))
    return path


def test_a_kernel_that_writes_its_input_is_caught(tmp_path):
    kernel = load_kernel(write_scribbler(tmp_path, bug=True))
    report = check_correctness(kernel, kernel.hook_source, seeds=(0,))
    (case,) = report.cases
    assert case.modified_inputs == {"x": 34}  # x[0], x[3], ..., x[99]
    assert all(o.ok for o in case.outputs)  # compared with the reference of the inputs as they were
    assert report.failure == "size tiny seed 0: the kernel modified its input x (34 elements changed)"


def test_a_kernel_file_that_does_not_load_on_its_own_raises_contract_error(tmp_path):
    # Loads beside its data file, not from the copy the check writes to a temp dir.
    (tmp_path / "scale.txt").write_text("2")
    path = write_scribbler(tmp_path, bug=False, prelude='SCALE = (Path(__file__).parent / "scale.txt").read_text()')
    kernel = load_kernel(path)
    with pytest.raises(ContractError, match=r"scribbler.py does not load from a copy in a fresh process .*"
                                            r"FileNotFoundError.*a kernel file must be self-contained"):
        check_correctness(kernel, kernel.hook_source, seeds=(0,))


# --- in this process -------------------------------------------------------------------------

def test_sizes_default_to_check_sizes_on_cpu_and_all_sizes_on_a_gpu(layernorm):
    assert sizes_to_check(layernorm, None, "cpu") == ["tiny", "small"]
    assert sizes_to_check(layernorm, None, "cuda") == ["tiny", "small", "medium", "large"]
    assert sizes_to_check(layernorm, ["small"], "cpu") == ["small"]
    with pytest.raises(ContractError, match="layernorm.py has no size 'huge'; declared: tiny, small, medium, large"):
        check_correctness(layernorm, layernorm.hook_source, sizes=["huge"])
    assert default_device() == ("cuda" if torch.cuda.is_available() else "cpu")


def test_compare_counts_mismatches_and_unwritten_elements():
    ref = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    out = ref.clone()
    out[0, 2] = float("nan")  # never written
    out[1, 1] += 0.5          # wrong
    out[2, 3] += 1e-7         # within tolerance
    check = compare("y", out, ref, atol=1e-6, rtol=0.0)
    assert (check.mismatches, check.nans, check.first_mismatch, check.numel) == (2, 1, [0, 2], 12)
    assert check.max_abs_error == 0.5 and not check.ok


def test_compare_accepts_nan_only_where_the_reference_has_it_and_checks_shapes():
    ref = torch.tensor([1.0, float("nan"), 3.0])
    assert compare("y", ref.clone(), ref, atol=0.0, rtol=0.0).ok
    shape = compare("y", torch.zeros(2, 2), torch.zeros(4), atol=0.0, rtol=0.0)
    assert not shape.ok and shape.shape_error == "has shape (2, 2), the reference (4,)"


def test_compare_uses_relative_tolerance_on_large_values():
    ref = torch.tensor([1000.0, 1.0])
    out = torch.tensor([1000.5, 1.5])
    check = compare("y", out, ref, atol=0.0, rtol=1e-3)  # allows 1.0 at 1000, 0.001 at 1
    assert (check.mismatches, check.first_mismatch) == (1, [1])
