"""The suite's further kernel files: elementwise, spmv, blackscholes, fdtd2d, stencil2d.

Each loads under the contract; matches its reference with its own hook and with a known-good XCD
remap at its CHECK_SIZES; is caught by the correctness check with the naive non-bijective remap,
exactly the elements no program wrote left NaN; and captures its trace on the simulator's fast,
one-batch path. The references themselves are checked against plain loops or closed-form facts.

Everything that needs the Triton interpreter runs in ONE child process (the interpreter must be
switched on before triton is imported), through the same case logic as `check_correctness`'s
child (`run_cases`) and the capture child (`record_trace`).
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import triton
from reference_remaps import NAIVE_REMAP, NUM_XCDS, XCD_CONTIGUOUS_1D, XCD_ROW_MAJOR_2D

from swizzleperf.kernel.contract import KernelFile, load_kernel
from swizzleperf.validation.correctness import CorrectnessReport

ROOT = Path(__file__).resolve().parents[2]
HOOK_NDIM = {"elementwise": 2, "spmv": 1, "blackscholes": 1, "fdtd2d": 2, "stencil2d": 2}
SUITE = list(HOOK_NDIM)
MAX_CHECK_PROGRAMS = 200  # the CPU interpreter runs ~100-300 programs/s


def kernel_path(name: str) -> Path:
    return ROOT / "kernels" / f"{name}.py"


GOOD_REMAP = {1: XCD_CONTIGUOUS_1D, 2: XCD_ROW_MAJOR_2D}


def naive_logical(num_pids: int) -> np.ndarray:
    pid = np.arange(num_pids)
    return (pid % NUM_XCDS) * (num_pids // NUM_XCDS) + pid // NUM_XCDS


# --- one child: correctness jobs and fast captures ---------------------------------------------

_CHILD = """
import json, sys, traceback
from swizzleperf.validation.correctness import CorrectnessReport, run_cases
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.sim.capture.trace_capture import record_trace
jobs = json.load(open(sys.argv[1]))
results = {}
for job in jobs["correctness"]:
    try:
        kernel = load_kernel(job["path"])
        cases = run_cases(kernel, job["sizes"], [0], job["num_xcds"], "cpu")
        report = CorrectnessReport.from_cases(kernel, cases, device="cpu", num_xcds=job["num_xcds"],
                                              sizes=job["sizes"], seeds=[0], seconds=0.0)
        results[job["id"]] = report.model_dump(mode="json")
    except Exception:
        results[job["id"]] = traceback.format_exc()
for job in jobs["capture"]:
    try:
        warnings = []
        trace, meta = record_trace(load_kernel(job["path"]), job["size"], mode="fast", warn=warnings.append)
        results[job["id"]] = {"meta": meta.model_dump(mode="json"), "warnings": warnings,
                              "unique_lines": int(len(set(trace.lines.tolist())))}
    except Exception:
        results[job["id"]] = traceback.format_exc()
json.dump(results, open(sys.argv[2], "w"))
"""


def _jobs(tmp: Path) -> dict:
    correctness, capture = [], []
    for name in SUITE:
        kernel = load_kernel(kernel_path(name))
        remaps = {"own": (kernel.hook_source, list(kernel.check_sizes)),
                  "good": (GOOD_REMAP[kernel.hook.ndim], list(kernel.check_sizes)),
                  "naive": (NAIVE_REMAP[kernel.hook.ndim], ["tiny"])}
        for tag, (source, sizes) in remaps.items():
            spliced = tmp / f"{name}_{tag}.py"
            spliced.write_text(kernel.with_hook(source))
            correctness.append({"id": f"{name}/{tag}", "path": str(spliced), "sizes": sizes, "num_xcds": NUM_XCDS})
        capture.append({"id": f"{name}/capture", "path": str(kernel.path), "size": "small"})
    return {"correctness": correctness, "capture": capture}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("suite_kernels")
    (tmp / "jobs.json").write_text(json.dumps(_jobs(tmp)))
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(tmp / "jobs.json"), str(tmp / "results.json")],
                          env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((tmp / "results.json").read_text())


def report_for(results: dict, job: str) -> CorrectnessReport:
    raw = results[job]
    assert isinstance(raw, dict), f"{job} raised in the child:\n{raw}"
    return CorrectnessReport.model_validate(raw)


# --- the contract --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", SUITE)
def test_loads_with_the_usual_sizes_and_hook(name):
    kernel = load_kernel(kernel_path(name))
    assert kernel.default_size == "medium" and list(kernel.sizes) == ["tiny", "small", "medium", "large"]
    assert kernel.check_sizes == ("tiny", "small")
    assert kernel.hook.ndim == HOOK_NDIM[name] and kernel.hook.constexprs == ("NUM_XCDS",)
    for size in kernel.check_sizes:
        assert math.prod(kernel.grid(size)) < MAX_CHECK_PROGRAMS, f"{size} is too slow for the interpreter"
    assert math.prod(kernel.grid("tiny")) % NUM_XCDS, "tiny must give the naive remap something to break"
    assert "import swizzleperf" not in kernel.source and "from swizzleperf" not in kernel.source


# --- correctness with three remaps -----------------------------------------------------------

@pytest.mark.parametrize("name", SUITE)
def test_passes_with_its_own_hook(name, results):
    kernel = load_kernel(kernel_path(name))
    report = report_for(results, f"{name}/own")
    assert report.ok, report.failure
    assert [(c.size, c.seed) for c in report.cases] == [(s, 0) for s in kernel.check_sizes]
    for case in report.cases:
        assert not case.modified_inputs
        for out in case.outputs:
            assert out.mismatches == 0 and out.nans == 0 and out.max_abs_error is not None


@pytest.mark.parametrize("name", SUITE)
def test_passes_with_a_known_good_xcd_remap(name, results):
    kernel = load_kernel(kernel_path(name))
    report = report_for(results, f"{name}/good")
    assert report.ok, report.failure
    assert [c.size for c in report.cases] == list(kernel.check_sizes)


def _written(kernel: KernelFile, size_name: str, logical: np.ndarray) -> dict[str, np.ndarray]:
    """Which elements of each output the given logical programs write (an oracle per kernel)."""
    size, mod = kernel.size(size_name), kernel.module
    if kernel.name == "spmv":
        written = np.zeros(size["n"], bool)
        written[logical] = True
        return {"y": written}
    if kernel.name == "blackscholes":
        written = np.zeros(size["n"], bool)
        for block in logical:
            written[block * mod.BLOCK:(block + 1) * mod.BLOCK] = True
        return {"call": written, "put": written}
    num_pid_n = kernel.grid(size_name)[1]
    if kernel.name == "elementwise":
        written = np.zeros((size["M"], size["N"]), bool)
        for row, block in zip(logical // num_pid_n, logical % num_pid_n):
            written[row, block * mod.BLOCK_N:(block + 1) * mod.BLOCK_N] = True
        return {"out": written}
    shape = (size["M"], size["N"]) if kernel.name == "stencil2d" else (size["NX"], size["NY"])
    written = np.zeros(shape, bool)
    bm, bn = mod.BLOCK_M, mod.BLOCK_N
    for pm, pn in zip(logical // num_pid_n, logical % num_pid_n):
        written[pm * bm:(pm + 1) * bm, pn * bn:(pn + 1) * bn] = True
    names = ["out"] if kernel.name == "stencil2d" else ["ex_next", "ey_next", "hz_next"]
    return {name: written for name in names}


@pytest.mark.parametrize("name", SUITE)
def test_naive_remap_fails_with_exactly_the_unwritten_elements_nan(name, results):
    kernel = load_kernel(kernel_path(name))
    num_pids = math.prod(kernel.grid("tiny"))
    unwritten = {out: int((~w).sum()) for out, w in _written(kernel, "tiny", np.unique(naive_logical(num_pids))).items()}
    assert all(n > 0 for n in unwritten.values())

    report = report_for(results, f"{name}/naive")
    assert not report.ok
    (case,) = report.cases
    assert {out.name: (out.nans, out.mismatches) for out in case.outputs} == {
        out: (n, n) for out, n in unwritten.items()}
    first = case.outputs[0]
    assert report.failure.startswith(f"size tiny seed 0: output {first.name} has {unwritten[first.name]} NaN elements")
    assert "programs never ran?" in report.failure


# --- the simulator's fast capture ----------------------------------------------------------------

@pytest.mark.parametrize("name", SUITE)
def test_captures_in_fast_mode_as_one_batch(name, results):
    """Uniform loop bounds and masks keep capture on its fast path: the probe batch, then one batch."""
    raw = results[f"{name}/capture"]
    assert isinstance(raw, dict), f"capture raised in the child:\n{raw}"
    meta = raw["meta"]
    assert (meta["mode"], meta["fallback_reason"], raw["warnings"]) == ("fast", None, [])
    assert meta["batches"] == 2 and meta["num_programs"] == math.prod(load_kernel(kernel_path(name)).grid("small"))


def test_blackscholes_programs_share_no_line(results):
    """Every line is touched once, so no remap can raise the hit rate (the ceiling is 0 %)."""
    raw = results["blackscholes/capture"]
    n = load_kernel(kernel_path("blackscholes")).size("small")["n"]
    lines_per_array = triton.cdiv(n * 4, 128)
    assert raw["meta"]["num_accesses"] == raw["unique_lines"] == 6 * lines_per_array


# --- the references ------------------------------------------------------------------------------

def test_blackscholes_reference_satisfies_put_call_parity_and_a_hand_value():
    bs = load_kernel(kernel_path("blackscholes")).module
    inputs = bs.make_inputs({"n": 1000}, 0, "cpu")
    prices = bs.reference(inputs, {"n": 1000})
    spot, strike, years = (inputs[k].double() for k in ("spot", "strike", "years"))
    parity = spot - strike * torch.exp(-bs.RATE * years)
    torch.testing.assert_close(prices["call"] - prices["put"], parity, atol=1e-9, rtol=0)
    # S = K = 100, T = 1, sigma = 0.2, r = 0.03: d1 = 0.25, d2 = 0.05,
    # call = 100 N(0.25) - 100 e^-0.03 N(0.05) = 59.87063 - 97.04455 * 0.51994 = 9.41340.
    atm = {k: torch.tensor([v]) for k, v in {"spot": 100.0, "strike": 100.0, "years": 1.0, "volatility": 0.2}.items()}
    assert bs.RATE == 0.03
    assert bs.reference(atm, {"n": 1})["call"].item() == pytest.approx(9.41340, abs=1e-4)


def test_spmv_matrix_is_banded_seeded_and_the_reference_is_a_dense_product():
    spmv = load_kernel(kernel_path("spmv")).module
    n, half_width, slots = 90, 20, 16
    row_ptr, col_idx, values = spmv.banded_csr(n, half_width, slots, seed=3)
    again = spmv.banded_csr(n, half_width, slots, seed=3)
    other = spmv.banded_csr(n, half_width, slots, seed=4)
    assert all(torch.equal(a, b) for a, b in zip((row_ptr, col_idx, values), again))
    assert not torch.equal(row_ptr, other[0]) or not torch.equal(col_idx, other[1])

    lengths = (row_ptr[1:] - row_ptr[:-1]).long()
    rows = torch.repeat_interleave(torch.arange(n), lengths)
    assert row_ptr[0] == 0 and row_ptr[-1] == col_idx.numel() and int(lengths.max()) <= slots
    assert len(set(lengths.tolist())) > 1, "row lengths should vary"
    assert ((col_idx >= 0) & (col_idx < n) & ((col_idx - rows).abs() <= half_width)).all()
    for r in range(n):  # strictly increasing columns within each row
        cols = col_idx[row_ptr[r]:row_ptr[r + 1]]
        assert (cols[1:] > cols[:-1]).all()

    x = torch.randn(n, dtype=torch.float64)
    dense = torch.zeros(n, n, dtype=torch.float64)
    dense[rows, col_idx.long()] = values.double()
    size = {"n": n}
    y = spmv.reference({"row_ptr": row_ptr, "col_idx": col_idx, "values": values, "x": x}, size)["y"]
    torch.testing.assert_close(y, dense @ x)


def _fields(shape: tuple[int, int], seed: int, names: list[str]) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {name: torch.randn(shape, generator=gen) for name in names}


def test_fdtd2d_reference_matches_polybench_loops():
    fdtd = load_kernel(kernel_path("fdtd2d")).module
    nx, ny = 6, 9
    inputs = _fields((nx, ny), 0, ["ex", "ey", "hz"])
    got = fdtd.reference(inputs, {"NX": nx, "NY": ny})
    ex, ey, hz = (inputs[k].double().tolist() for k in ("ex", "ey", "hz"))
    for j in range(ny):
        ey[0][j] = fdtd.SOURCE
    for i in range(1, nx):
        for j in range(ny):
            ey[i][j] = ey[i][j] - 0.5 * (hz[i][j] - hz[i - 1][j])
    for i in range(nx):
        for j in range(1, ny):
            ex[i][j] = ex[i][j] - 0.5 * (hz[i][j] - hz[i][j - 1])
    for i in range(nx - 1):
        for j in range(ny - 1):
            hz[i][j] = hz[i][j] - 0.7 * (ex[i][j + 1] - ex[i][j] + ey[i + 1][j] - ey[i][j])
    for name, field in (("ex_next", ex), ("ey_next", ey), ("hz_next", hz)):
        torch.testing.assert_close(got[name].double(), torch.tensor(field, dtype=torch.float64), atol=1e-5, rtol=1e-6)


def test_stencil2d_reference_matches_loops():
    stencil = load_kernel(kernel_path("stencil2d")).module
    m, n = 5, 7
    inputs = _fields((m, n), 1, ["x"])
    got = stencil.reference(inputs, {"M": m, "N": n})["out"]
    x = inputs["x"].double()
    want = x.clone()
    for i in range(1, m - 1):
        for j in range(1, n - 1):
            want[i, j] = 0.2 * (x[i, j] + x[i - 1, j] + x[i + 1, j] + x[i, j - 1] + x[i, j + 1])
    torch.testing.assert_close(got.double(), want, atol=1e-6, rtol=1e-6)
    assert torch.equal(got[0], inputs["x"][0]) and torch.equal(got[:, -1], inputs["x"][:, -1])
