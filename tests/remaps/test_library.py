"""The swizzle library: export a run's best remap, import it, apply it to another kernel."""

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from swizzleperf.cli.optimize_command import run_optimize
from swizzleperf.errors import LibraryError, RunError
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.loop.driver import LoopSettings, Observer, run_loop, start_run
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.loop.rundir import RunDir
from swizzleperf.profilers.sim import SimProfiler
from swizzleperf.proposers.scripted import ScriptedProposer
from swizzleperf.remaps.library import Library, transplant
from swizzleperf.workflows.apply import apply_entry
from swizzleperf.workflows.export import entry_from_run
from swizzleperf.workflows.optimize import OptimizeRequest

ROOT = Path(__file__).resolve().parents[2]


def _request(kernel_path, runs_dir, **overrides):
    fields = dict(kernel_path=kernel_path, hardware="mi300x", profiler="sim", proposer="search", iterations=2,
                  patience=10, size="small", seed=0, model=None, api_base=None, llm_mode="aware", llm_timeout=180.0,
                  llm_retries=3, library=None, write=False, resume=None, runs_dir=runs_dir)
    fields.update(overrides)
    return OptimizeRequest(**fields)


@pytest.fixture(scope="module")
def softmax_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lib")
    text = (ROOT / "kernels/softmax.py").read_text().replace('CHECK_SIZES = ["tiny", "small"]', 'CHECK_SIZES = ["tiny"]')
    kernel = tmp / "softmax.py"
    kernel.write_text(text)
    run = run_optimize(_request(kernel, tmp / "runs"), Console(file=io.StringIO()))
    return run, load_kernel(kernel)


@pytest.fixture()
def library(softmax_run, tmp_path):
    run, kernel = softmax_run
    lib = Library(tmp_path / "swizzles")
    lib.add(entry_from_run(run, "softmax_rows_mi300x", kernel))
    return lib


def test_export_writes_an_importable_package_with_provenance(softmax_run, library):
    run, _ = softmax_run
    entry = library.get("softmax_rows_mi300x")
    best = run.load_history().best()
    assert entry.family == best.family and entry.hit_pct == best.report.hit_pct and entry.numbers_from == "sim"
    assert entry.metric == "read" and f"L2 read hit {entry.hit_pct:.2f}% predicted by the simulator" in entry.summary()
    older = entry.model_copy(update={"metric": "all"})  # entries exported before the read/write split
    assert "L2 hit (reads and writes)" in older.summary()
    assert entry.run_id == run.record.run_id and entry.params == ["pid", "num_pids", "NUM_XCDS"]
    assert [64 * 4] in entry.proven_grids and [97] in entry.proven_grids  # declared and extra grids checked
    assert entry.proof.startswith("proven bijective for all grid sizes (z3: every grid of up to 2,147,483,647")
    module = (library.root / "softmax_rows_mi300x.py").read_text()
    assert "Proven bijective for all grid sizes (z3), die counts 1, 2, 4, 8, 16." in module
    assert "def softmax_rows_mi300x(pid, num_pids, NUM_XCDS: tl.constexpr):" in module
    assert f"run {run.record.run_id}" in module and "predicted (simulator)" in module
    assert "from .softmax_rows_mi300x import softmax_rows_mi300x" in (library.root / "__init__.py").read_text()
    assert json.loads((library.root / "softmax_rows_mi300x.json").read_text())["kernel"] == "softmax"
    with pytest.raises(LibraryError, match="already has"):
        library.add(entry)


def test_export_refuses_bad_names_and_runs_without_an_improvement(softmax_run, tmp_path):
    run, kernel = softmax_run
    with pytest.raises(LibraryError, match="Python identifier"):
        entry_from_run(run, "my-remap", kernel)
    hw = PRESETS["mi300x"]
    profiler = SimProfiler(hw, cache_dir=tmp_path / "cache")
    proposer = ScriptedProposer(["not a remap at all"])
    flat = start_run(tmp_path / "runs", kernel, "tiny", hw, "test", profiler, "test", proposer, {}, LoopSettings())
    run_loop(flat, kernel, proposer, CandidateEvaluator(kernel, hw, profiler, "tiny"), flat.load_history(), Observer())
    with pytest.raises(RunError, match="nothing to export"):
        entry_from_run(flat, "x", kernel)


def test_apply_to_layernorm_passes_bijectivity_and_correctness(library, tmp_path):
    layernorm = load_kernel(ROOT / "kernels/layernorm.py")
    hw = PRESETS["mi300x"]
    applied = apply_entry(library.get("softmax_rows_mi300x"), layernorm, hw, SimProfiler(hw, cache_dir=tmp_path),
                          "small")
    stages = {s.stage: s for s in applied.attempt.stages}
    assert stages["bijectivity"].ok and stages["correctness"].ok and applied.attempt.accepted
    assert applied.source.startswith("@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS")
    assert applied.attempt.report.hit_pct >= applied.baseline.hit_pct


def test_a_mismatched_signature_is_refused_naming_the_parameters(library):
    gemm = load_kernel(ROOT / "kernels/gemm.py")
    with pytest.raises(LibraryError) as err:
        transplant(library.get("softmax_rows_mi300x"), gemm.hook, "gemm")
    message = str(err.value)
    assert "softmax_rows_mi300x(pid, num_pids, NUM_XCDS)" in message
    assert "swizzle(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr)" in message


def test_parameter_names_are_adapted_where_they_correspond(library, tmp_path):
    other = (ROOT / "kernels/softmax.py").read_text().replace("def swizzle(pid, num_pids, NUM_XCDS",
                                                               "def swizzle(wid, n_programs, XCDS")
    other = other.replace("pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)",
                          "pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)")
    other = other.replace("    return pid\n", "    return wid\n", 1)
    path = tmp_path / "renamed.py"
    path.write_text(other)
    kernel = load_kernel(path)
    source, notes = transplant(library.get("softmax_rows_mi300x"), kernel.hook, "renamed")
    assert "def swizzle(wid, n_programs, XCDS: tl.constexpr)" in source
    assert any("renamed parameters" in n for n in notes)


SCRATCH_KERNEL = '''
    """Written from scratch: doubles x, with its program ids remapped by a library swizzle."""
    import sys
    import torch
    import triton
    import triton.language as tl
    from swizzles import softmax_rows_mi300x

    @triton.jit
    def double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, NUM_XCDS: tl.constexpr):
        pid = softmax_rows_mi300x(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    x = torch.randn(37 * 64)
    y = torch.full_like(x, float("nan"))
    double_kernel[(37,)](x, y, x.numel(), BLOCK=64, NUM_XCDS=8)
    torch.testing.assert_close(y, 2 * x)
    print("scratch kernel ok")
'''


def test_a_kernel_written_from_scratch_imports_a_library_remap(library, tmp_path):
    script = tmp_path / "scratch.py"
    script.write_text(textwrap.dedent(SCRATCH_KERNEL))
    env = {"TRITON_INTERPRET": "1", "PYTHONPATH": str(library.root.parent), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "scratch kernel ok" in done.stdout


def test_optimize_warm_starts_from_the_library(library, softmax_run, tmp_path):
    _, kernel = softmax_run
    run = run_optimize(_request(kernel.path, tmp_path / "runs", iterations=1, library=library.root),
                       Console(file=io.StringIO()))
    first = RunDir.open(run.path).load_history().attempts[1]
    assert first.origin == "library" and first.family == "library:softmax_rows_mi300x"
    assert "warm start from the library" in first.rationale and first.accepted
