"""Issue 14: the original kernel is the default reference. A kernel file without reference() (or
TOLERANCE) is checked against itself run with its own hook, exactly."""

from pathlib import Path

import pytest

from swizzleperf.kernel.contract import load_kernel
from swizzleperf.validation.correctness import check_correctness

ROOT = Path(__file__).resolve().parents[2]
NO_REFERENCE = ROOT / "tests" / "data" / "no_reference.py"
REVERSE = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return num_pids - 1 - pid\n"
HALVES = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return pid // 2\n"


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """The kernel as written, and the same kernel storing by launch order (any remap but the identity
    changes its output, though every one is a bijection)."""
    mixed = tmp_path_factory.mktemp("mixed") / "no_reference.py"
    mixed.write_text(NO_REFERENCE.read_text().replace("MIX_LAUNCH_ID = False", "MIX_LAUNCH_ID = True"))
    return load_kernel(NO_REFERENCE), load_kernel(mixed)


def test_a_kernel_file_without_reference_or_tolerance_loads_and_compares_exactly(kernels):
    plain, _ = kernels
    assert not plain.has_reference and plain.tolerance == {"atol": 0.0, "rtol": 0.0}


def test_a_right_remap_reproduces_the_kernel(kernels):
    plain, _ = kernels
    report = check_correctness(plain, REVERSE, seeds=(0, 1), device="cpu")
    assert report.ok and report.against == "the kernel run with its own hook"
    assert report.summary == ("matches the kernel run with its own hook on 2 case(s): sizes tiny x seeds 0, 1 on "
                              "cpu (8 XCDs)")


def test_a_wrong_remap_is_caught(kernels):
    plain, mixed = kernels
    report = check_correctness(mixed, REVERSE, seeds=(0,), device="cpu")  # a bijection, but not for this kernel
    assert report.failure.startswith("size tiny seed 0: output y: 384 of 384 elements differ from the kernel run "
                                     "with its own hook (compared exactly) (max abs error ")
    assert report.failure.endswith(", first at index (0,))")
    unwritten = check_correctness(plain, HALVES, seeds=(0,), device="cpu")  # half the blocks never stored
    assert unwritten.failure == ("size tiny seed 0: output y has 192 NaN elements of 384 (programs never ran?) and "
                                 "192 mismatches in all (max abs error 0, first at index (192,))")
    assert check_correctness(mixed, mixed.hook_source, seeds=(0,), device="cpu").ok  # its own hook: itself


def test_a_reference_without_tolerance_is_refused_naming_it(tmp_path):
    text = NO_REFERENCE.read_text() + "\n\ndef reference(inputs, size):\n    return {'y': 3 * inputs['x'] + 1}\n"
    path = tmp_path / "with_reference.py"
    path.write_text(text)
    from swizzleperf.errors import ContractError
    with pytest.raises(ContractError, match=r"with_reference.py breaks the kernel contract: missing TOLERANCE "
                                            r"\(TOLERANCE says how far reference\(\) may differ\)"):
        load_kernel(path)
    path.write_text(text + "TOLERANCE = {'atol': 1e-6, 'rtol': 1e-6}\n")
    kernel = load_kernel(path)
    assert kernel.has_reference
    report = check_correctness(kernel, REVERSE, seeds=(0,), device="cpu")
    assert report.ok and report.summary.startswith("matches the reference on 1 case(s)")
