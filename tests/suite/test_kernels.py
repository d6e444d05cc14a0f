"""The kernel files: each loads, matches its reference with its own hook, with a known-good XCD
remap and with the best remap the bench found for it (fixtures/best_remaps/), and is caught by the
correctness check with the naive non-bijective remap. The fidelity checks' kernels outside the suite
(benchmarks/outside_suite/) with their own hook and the known-good remap.

All checks run in ONE child process (the Triton interpreter must be switched on before triton is
imported) through the same case logic as `check_correctness`'s child (`run_cases`); the remaps
here are our own, so the per-candidate isolation tested in test_correctness.py would only add a
Python start-up per check.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import triton
from reference_remaps import NAIVE_REMAP, NUM_XCDS, XCD_CONTIGUOUS_1D, XCD_GROUPED_2D

from swizzleperf.cli.main import _remap_from_file
from swizzleperf.kernel.contract import KernelFile, load_kernel
from swizzleperf.validation.correctness import CorrectnessReport

ROOT = Path(__file__).resolve().parents[2]
KERNEL_FILES = sorted((ROOT / "kernels").glob("*.py"))
OUTSIDE_FILES = sorted((ROOT / "benchmarks" / "outside_suite").glob("*.py"))  # the fidelity checks' own kernels
KNOWN = ["softmax", "gemm", "transpose", "layernorm"]  # with size conventions and ownership oracles
BEST_REMAPS = ROOT / "tests" / "fixtures" / "best_remaps"

GOOD_REMAP = {1: XCD_CONTIGUOUS_1D, 2: XCD_GROUPED_2D}


# The child: load each spliced kernel file under the interpreter and check it, one report per job.
_CHILD = """
import json, sys, traceback
from swizzleperf.validation.correctness import CorrectnessReport, run_cases
from swizzleperf.kernel.contract import load_kernel
reports = {}
for job in json.load(open(sys.argv[1])):
    try:
        kernel = load_kernel(job["path"])
        cases = run_cases(kernel, job["sizes"], job["seeds"], job["num_xcds"], "cpu")
        report = CorrectnessReport.from_cases(kernel, cases, device="cpu", num_xcds=job["num_xcds"],
                                              sizes=job["sizes"], seeds=job["seeds"], seconds=0.0)
        reports[job["id"]] = report.model_dump(mode="json")
    except Exception:
        reports[job["id"]] = traceback.format_exc()
json.dump(reports, open(sys.argv[2], "w"))
"""


def _jobs(tmp: Path) -> list[dict]:
    jobs = []
    for path in KERNEL_FILES + OUTSIDE_FILES:
        kernel = load_kernel(path)
        remaps = {"own": (kernel.hook_source, list(kernel.check_sizes))}
        if kernel.hook.ndim in GOOD_REMAP:
            remaps["good"] = (GOOD_REMAP[kernel.hook.ndim], list(kernel.check_sizes))
        best = BEST_REMAPS / path.name
        if best.is_file():
            remaps["best"] = (_remap_from_file(best, kernel), list(kernel.check_sizes))
        if kernel.name in KNOWN:  # the naive remap's damage is checked against per-kernel oracles
            remaps["naive"] = (NAIVE_REMAP[kernel.hook.ndim], ["tiny"])
        for tag, (source, sizes) in remaps.items():
            spliced = tmp / f"{kernel.name}_{tag}.py"
            spliced.write_text(kernel.with_hook(source))
            jobs.append({"id": f"{kernel.name}/{tag}", "path": str(spliced), "sizes": sizes, "seeds": [0],
                         "num_xcds": NUM_XCDS})
    return jobs


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, CorrectnessReport]:
    tmp = tmp_path_factory.mktemp("kernels")
    (tmp / "jobs.json").write_text(json.dumps(_jobs(tmp)))
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(tmp / "jobs.json"), str(tmp / "reports.json")],
                          env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    raw = json.loads((tmp / "reports.json").read_text())
    return {job: CorrectnessReport.model_validate(r) if isinstance(r, dict) else r for job, r in raw.items()}


def report_for(reports: dict, job: str) -> CorrectnessReport:
    if job not in reports:
        pytest.skip(f"no job {job}: this test has no known-good remap for the kernel's hook")
    report = reports[job]
    assert isinstance(report, CorrectnessReport), f"{job} raised in the child:\n{report}"
    return report


def _ids(path: Path) -> str:
    return path.stem


def test_the_four_kernels_are_there():
    assert set(KNOWN) <= {p.stem for p in KERNEL_FILES}


@pytest.mark.parametrize("name", KNOWN)
def test_declares_the_usual_sizes(name):
    kernel = load_kernel(ROOT / "kernels" / f"{name}.py")
    assert kernel.default_size == "medium" and list(kernel.sizes) == ["tiny", "small", "medium", "large"]
    assert kernel.check_sizes == ("tiny", "small")
    assert kernel.hook.constexprs == ("NUM_XCDS",)
    assert math.prod(kernel.grid("tiny")) % NUM_XCDS, "tiny must give the naive remap something to break"


@pytest.mark.parametrize("path", KERNEL_FILES + OUTSIDE_FILES, ids=_ids)
def test_passes_with_its_own_hook(path, reports):
    kernel = load_kernel(path)
    report = report_for(reports, f"{kernel.name}/own")
    assert report.ok, report.failure
    assert [(c.size, c.seed) for c in report.cases] == [(s, 0) for s in kernel.check_sizes]
    for case in report.cases:
        assert not case.modified_inputs
        for out in case.outputs:
            assert out.mismatches == 0 and out.nans == 0 and out.first_mismatch is None
            assert out.max_abs_error is not None  # every element was compared as a number


@pytest.mark.parametrize("path", KERNEL_FILES + OUTSIDE_FILES, ids=_ids)
def test_passes_with_a_known_good_xcd_remap(path, reports):
    kernel = load_kernel(path)
    report = report_for(reports, f"{kernel.name}/good")
    assert report.ok, report.failure
    assert [c.size for c in report.cases] == list(kernel.check_sizes)


@pytest.mark.parametrize("path", KERNEL_FILES, ids=_ids)
def test_passes_with_the_best_remap_the_bench_found(path, reports):
    assert (BEST_REMAPS / path.name).is_file(), f"record one: see {BEST_REMAPS / 'README.md'}"
    kernel = load_kernel(path)
    report = report_for(reports, f"{kernel.name}/best")
    assert report.ok, report.failure
    assert [c.size for c in report.cases] == list(kernel.check_sizes)


# --- the naive remap: exactly the tiles it never produces stay NaN -----------------------------

def _naive_logical(num_pids: int) -> np.ndarray:
    pid = np.arange(num_pids)
    return (pid % NUM_XCDS) * (num_pids // NUM_XCDS) + pid // NUM_XCDS


def _written(kernel: KernelFile, size_name: str, logical: np.ndarray) -> np.ndarray:
    """Which output elements the given logical programs write (an oracle per kernel file)."""
    size, mod = kernel.size(size_name), kernel.module
    if kernel.name in ("softmax", "layernorm"):
        rows, cols, chunks = size["rows"], size["cols"], size["chunks"]
        width = triton.cdiv(cols, chunks)
        written = np.zeros((rows, cols), bool)
        for row, chunk in zip(logical // chunks, logical % chunks):
            written[row, chunk * width:(chunk + 1) * width] = True
        return written
    num_pid_n = kernel.grid(size_name)[1]
    bm, bn = mod.BLOCK_M, mod.BLOCK_N
    if kernel.name == "gemm":
        written = np.zeros((size["M"], size["N"]), bool)
        for pm, pn in zip(logical // num_pid_n, logical % num_pid_n):
            written[pm * bm:(pm + 1) * bm, pn * bn:(pn + 1) * bn] = True
        return written
    assert kernel.name == "transpose"
    written = np.zeros((size["N"], size["M"]), bool)
    for pm, pn in zip(logical // num_pid_n, logical % num_pid_n):
        written[pn * bn:(pn + 1) * bn, pm * bm:(pm + 1) * bm] = True
    return written


@pytest.mark.parametrize("name", KNOWN)
def test_naive_remap_fails_with_exactly_the_unwritten_elements_nan(name, reports):
    kernel = load_kernel(ROOT / "kernels" / f"{name}.py")
    size = "tiny"
    num_pids = math.prod(kernel.grid(size))
    assert num_pids % NUM_XCDS, "the naive remap is a bijection here; pick a size whose grid 8 does not divide"
    unwritten = int((~_written(kernel, size, np.unique(_naive_logical(num_pids)))).sum())
    assert unwritten > 0

    report = report_for(reports, f"{name}/naive")
    assert not report.ok
    (case,) = report.cases
    (out,) = case.outputs
    assert out.nans == unwritten and out.mismatches == unwritten
    assert f"has {unwritten} NaN elements" in report.failure and "programs never ran?" in report.failure
    assert report.failure.startswith(f"size {size} seed 0: output {out.name} ")
