"""`swizzleperf bench`: the suite table agrees with the run directories and with the simulator at other sizes."""

import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console
from terminal_tables import cells, render

from swizzleperf.cli import bench_command
from swizzleperf.cli.bench_command import run_bench
from swizzleperf.errors import ContractError
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.loop.history import misses
from swizzleperf.loop.rundir import RunDir
from swizzleperf.profilers.sim import SimProfiler
from swizzleperf.workflows.bench.suite import (
    BenchReport,
    BenchRequest,
    SimBudget,
    find_kernels,
    generalise,
)

ROOT = Path(__file__).resolve().parents[2]
MI300X = PRESETS["mi300x"]
COLUMNS = ["kernel", "size", "source", "read misses (x own)", "baseline hit %", "best hit %", "ceiling %", "improvement (pts)", "speedup",
           "iterations to best", "s to best", "best family", "other sizes: baseline -> best hit % (ceiling)"]
# Correct only when the die count divides the grid: softmax's tiny (5 rows x 3 chunks = 15 programs) is not.
NAIVE = ("@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n"
         "    return (pid % NUM_XCDS) * (num_pids // NUM_XCDS) + pid // NUM_XCDS\n")


def _small_copy(directory: Path, name: str, sizes: dict[str, dict] | None = None, extra: str = "",
                stem: str | None = None) -> Path:
    """The real kernel file, declared at its tiny and small sizes (plus `sizes`), optimised at small."""
    text = (ROOT / "kernels" / f"{name}.py").read_text()
    text += ('\nSIZES = {name: SIZES[name] for name in ("tiny", "small")}\nDEFAULT_SIZE = "small"\n'
             'CHECK_SIZES = ["tiny"]\n')
    text += "".join(f"SIZES[{k!r}] = {v!r}\n" for k, v in (sizes or {}).items()) + extra
    path = directory / f"{stem or name}.py"
    path.write_text(text)
    return path


def _table_row(markdown: str, kernel: str) -> list[str]:
    line = next(line for line in markdown.splitlines() if line.startswith(f"| {kernel} |"))
    return [cell.strip() for cell in line.strip().strip("|").split(" | ")]


@pytest.mark.slow
def test_bench_table_matches_the_runs_and_the_simulator_at_other_sizes(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    kernels = [_small_copy(tmp_path, "softmax"), _small_copy(tmp_path, "transpose"),
               _small_copy(tmp_path, "softmax", stem="broken", extra='DEFAULT_SIZE = "huge"\n')]
    console = Console(file=io.StringIO(), width=300)
    report = run_bench(BenchRequest(kernels=kernels, hardware="mi300x", iterations=1, runs_dir=tmp_path / "runs",
                                    out=tmp_path / "out"), console)

    markdown = (tmp_path / "out" / "bench.md").read_text()
    assert "| " + " | ".join(COLUMNS) + " |" in markdown
    assert "predicted by the simulator" in markdown and f"Total wall time {report.total_seconds:.1f} s" in markdown
    assert BenchReport.model_validate(json.loads((tmp_path / "out" / "bench.json").read_text())) == report
    assert (tmp_path / "out" / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"total wall time {report.total_seconds:.1f} s" in console.file.getvalue()

    softmax, transpose, broken = report.kernels
    assert broken.status == "failed" and broken.run_dir is None  # the suite went on past it
    assert broken.error == "broken.py breaks the kernel contract: DEFAULT_SIZE/CHECK_SIZES name undeclared sizes: huge"
    assert _table_row(markdown, "broken") == ["broken", *[""] * 10, f"failed: {broken.error}", ""]

    for result, path in ((softmax, kernels[0]), (transpose, kernels[1])):
        history = RunDir.open(Path(result.run_dir)).load_history()
        best, base = history.best(), history.baseline()
        assert result.status == "finished" and result.size == "small" and result.source == "sim"
        assert (result.baseline_hit_pct, result.best_hit_pct) == (base.report.hit_pct, best.report.hit_pct)
        assert result.ceiling_pct == best.report.ceiling_pct
        assert result.improvement_pts == best.report.hit_pct - base.report.hit_pct
        assert (result.best_family, result.best_iteration, result.attempts) == (best.family, best.iteration, 2)
        assert result.seconds_to_best == sum(a.seconds for a in history.attempts[:best.iteration + 1])
        assert result.speedup is None
        assert result.misses_ratio == misses(best) / misses(base)
        assert _table_row(markdown, result.kernel)[:12] == [
            result.kernel, "small", "sim (predicted)", f"{result.misses_ratio:.2f}x", f"{base.report.hit_pct:.2f}", f"{best.report.hit_pct:.2f}",
            f"{best.report.ceiling_pct:.2f}", f"{best.report.hit_pct - base.report.hit_pct:+.2f}", "n/a (not timed)",
            str(best.iteration), f"{result.seconds_to_best:.1f}", best.family]

        # the other size, profiled on its own by an independent simulator
        (tiny,) = result.other_sizes
        kernel = load_kernel(path)
        profiler = SimProfiler(MI300X)
        own = profiler.profile(kernel, kernel.hook_source, "tiny")
        remapped = profiler.profile(kernel, best.source, "tiny")
        assert tiny.status == "profiled" and (tiny.size, tiny.baseline_hit_pct, tiny.best_hit_pct, tiny.ceiling_pct) \
            == ("tiny", own.hit_pct, remapped.hit_pct, own.ceiling_pct)
        # a best remap is re-validated at the other size; the kernel's own remap needs no validation
        own_remap = best.source == kernel.hook_source
        assert tiny.line_accesses == own.trace_accesses and ("the kernel's own remap" if own_remap else
                                                        "correctness: matches the reference") in tiny.validation
        assert _table_row(markdown, result.kernel)[12] == \
            f"tiny: {own.hit_pct:.2f} -> {remapped.hit_pct:.2f} (ceiling {own.ceiling_pct:.2f})"
    assert softmax.best_hit_pct > softmax.baseline_hit_pct + 20  # a row's chunks on one die


def test_a_remap_that_breaks_at_another_size_is_rejected_there_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    # rows16: 16 rows x 4 chunks = 64 programs, where NAIVE is a bijection; not a check size
    kernel = load_kernel(_small_copy(tmp_path, "softmax", {"rows16": {"rows": 16, "cols": 4096, "chunks": 4}}))

    per_program = 96.0
    budget = SimBudget(max_accesses=1000, accesses_per_program=per_program, reference_size="small",
                       capture_timeout_s=60)
    tiny, rows16 = generalise(kernel, NAIVE, "small", MI300X, "sim", "cpu", budget)
    assert tiny.status == "rejected" and tiny.reason.startswith("bijectivity: grid (15,): programs ")
    assert "never produced" in tiny.reason and tiny.baseline_hit_pct is None
    assert rows16.status == "skipped" and rows16.accesses_estimated and rows16.line_accesses == 64 * per_program
    assert rows16.reason == ("~0.00614 M line accesses (est. from small) > the simulator's 0.001 M budget: "
                             "profile it on a GPU")
    assert "bijective on all 1 grids ((64,))" in rows16.validation

    boxed = SimBudget(max_accesses=10**9, accesses_per_program=per_program, reference_size="small",
                      capture_timeout_s=0.5)  # a capture child needs seconds to import torch and triton
    _, rows16 = generalise(kernel, NAIVE, "small", MI300X, "sim", "cpu", boxed)
    assert rows16.status == "skipped" and rows16.best_hit_pct is None
    assert rows16.reason == "the trace capture ran past the 0.5 s time box (~0.00614 M line accesses, est. from small)"

    _, rows16 = generalise(kernel, NAIVE, "small", MI300X, "sim", "cpu", budget=None)
    profiler = SimProfiler(MI300X)
    own, remapped = profiler.profile(kernel, kernel.hook_source, "rows16"), profiler.profile(kernel, NAIVE, "rows16")
    assert rows16.status == "profiled" and (rows16.baseline_hit_pct, rows16.best_hit_pct) == (own.hit_pct,
                                                                                              remapped.hit_pct)
    assert rows16.validation.endswith("correctness not run at rows16 (the CPU interpreter runs CHECK_SIZES only)")

    # now the trace is cached, the budget uses its exact count
    exact = SimBudget(max_accesses=own.trace_accesses - 1, accesses_per_program=1.0, reference_size="small",
                      capture_timeout_s=60)
    assert exact.line_accesses(kernel, "rows16", 128) == (own.trace_accesses, False)
    (_, rows16) = generalise(kernel, NAIVE, "small", MI300X, "sim", "cpu", exact)
    assert rows16.status == "skipped" and not rows16.accesses_estimated
    assert rows16.reason.startswith(f"{own.trace_accesses / 1e6:.3g} M line accesses > the simulator's")
    assert math.prod(kernel.grid("rows16")) == 64

    # --other-sizes: only the sizes named (and declared) are re-checked, in declaration order
    (only,) = generalise(kernel, NAIVE, "small", MI300X, "sim", "cpu", exact, only=["rows16", "nosuch"])
    assert (only.size, only.status) == ("rows16", "skipped")
    assert generalise(kernel, NAIVE, "small", MI300X, "sim", "cpu", exact, only=["small"]) == []


def test_a_bench_stopped_part_way_keeps_the_kernels_it_finished(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    from swizzleperf.workflows.bench import suite as bench

    finished = []
    real = bench.bench_kernel

    def stop_at_second(path, *args):
        if finished:
            raise KeyboardInterrupt  # Ctrl-C (or a time limit) while the second kernel runs
        finished.append(real(path, *args))
        return finished[-1]

    monkeypatch.setattr(bench, "bench_kernel", stop_at_second)
    kernels = [_small_copy(tmp_path, "transpose"), _small_copy(tmp_path, "softmax")]
    with pytest.raises(KeyboardInterrupt):
        run_bench(BenchRequest(kernels=kernels, hardware="mi300x", iterations=1, runs_dir=tmp_path / "runs",
                               out=tmp_path / "out", other_sizes=["small"]), Console(file=io.StringIO()))
    report = BenchReport.model_validate_json((tmp_path / "out" / "bench.json").read_text())
    assert not report.complete and report.kernels_planned == 2 and report.kernels == finished
    # small is the run's own size: no other size asked for (tiny is not)
    assert report.kernels[0].kernel == "transpose" and report.kernels[0].other_sizes == []
    markdown = (tmp_path / "out" / "bench.md").read_text()
    assert "PARTIAL: 1 of 2 kernels finished so far." in markdown and "Other sizes limited to small." in markdown
    assert "ranked by L2 read misses (fewer first)" in markdown and "ranked by L2 read hit rate" not in markdown
    from swizzleperf.workflows.bench.output import to_markdown
    none_asked = to_markdown(report.model_copy(update={"other_sizes": []}))
    assert "No other sizes were asked for." in none_asked and "limited to ." not in none_asked
    assert _table_row(markdown, "transpose")[0] == "transpose" and "| softmax |" not in markdown

    # a terminal 80 columns wide gets the numbers whole, not folded into slivers
    (done,) = report.kernels
    for width, headers in ((80, ["kernel", "misses", "base %", "best %", "ceiling %", "speedup", "best family"]),
                           (200, ["kernel", "size", "source", "misses", "base %", "best %", "ceiling %", "+pts", "speedup",
                                  "iter", "s", "best family", "other sizes: base -> best % (ceiling)"])):
        lines = render(lambda columns: bench_command.rich_table(report, columns), width)
        assert cells(lines, "kernel", "best") == headers
        row = cells(lines, "transpose")
        assert row[0] == "transpose" and f"{done.best_hit_pct:.2f}" in row
        assert max(len(line) for line in lines) <= width


def test_kernels_are_found_by_name_or_path_and_unknown_names_list_the_suite(tmp_path):
    kernels_dir = ROOT / "kernels"
    assert find_kernels(["softmax"], kernels_dir) == [kernels_dir / "softmax.py"]
    assert find_kernels([str(kernels_dir / "gemm.py")], kernels_dir) == [kernels_dir / "gemm.py"]
    every = find_kernels([], kernels_dir)
    assert kernels_dir / "attention.py" in every and every == sorted(every)
    with pytest.raises(ContractError, match=r"no kernel 'nosuch'.*has attention, attention_persistent, blackscholes"):
        find_kernels(["nosuch"], kernels_dir)
    with pytest.raises(ContractError, match="no kernel files in"):
        find_kernels([], tmp_path)


def test_other_sizes_carry_the_speedup_where_the_profiler_times(tmp_path, monkeypatch):
    """A timing profiler (ncu, rocprofv3) times both remaps at the other size: the cell shows the ratio."""
    from swizzleperf.records.report import BottleneckReport, Timing
    from swizzleperf.workflows.bench import other_sizes

    kernel = load_kernel(_small_copy(tmp_path, "softmax"))
    timed = {kernel.hook_source.strip(): (40.0, 2.0, 2.1, 2.2), NAIVE.strip(): (90.0, 1.5, 1.6, 1.7)}

    class TimingProfiler:
        name = "ncu"
        measures = True
        run_to_run_pts = 1.3

        def profile(self, kernel, source, size):
            hit, p20, median, p80 = timed[source.strip()]
            return BottleneckReport(source="ncu", hardware="h100", kernel=kernel.name, size=size, hit_pct=hit,
                                    timing=Timing(median_ms=median, p20_ms=p20, p80_ms=p80, repeats=100,
                                                  l2_state="flushed"))

    monkeypatch.setattr(other_sizes, "select_profiler", lambda name, hw, progress=None: (TimingProfiler(), "fake"))
    (tiny,) = generalise(kernel, NAIVE, "small", MI300X, "ncu", "cpu", None, only=["tiny"])
    assert tiny.status == "rejected"  # NAIVE is no bijection on tiny's 15 programs: never profiled
    (own,) = generalise(kernel, kernel.hook_source, "small", MI300X, "ncu", "cpu", None, only=["tiny"])
    assert own.speedup.ratio == 1.0 and own.cell() == "tiny: 40.00 -> 40.00 (ceiling n/a, 1.000x [0.909-1.100])"

    kernel = load_kernel(_small_copy(tmp_path, "softmax", {"rows16": {"rows": 16, "cols": 4096, "chunks": 4}}))
    (rows16,) = generalise(kernel, NAIVE, "small", MI300X, "ncu", "cpu", None, only=["rows16"])
    assert rows16.status == "profiled" and rows16.speedup.l2_state == "flushed"
    assert (rows16.speedup.ratio, rows16.speedup.low, rows16.speedup.high) == (2.1 / 1.6, 2.0 / 1.7, 2.2 / 1.5)
    assert rows16.cell() == "rows16: 40.00 -> 90.00 (ceiling n/a, 1.312x [1.176-1.467])"


def test_the_recorded_bench_marks_softmaxs_noise_level_gain_and_not_gemms():
    from swizzleperf.workflows.bench.output import row_cells, to_markdown

    # bench softmax gemm attention --profiler ncu on two H100s (benchmarks/multi_gpu.py)
    recorded = Path(__file__).resolve().parents[2] / "benchmarks" / "recorded" / "multi-gpu-h100x2"
    report = BenchReport.model_validate_json((recorded / "bench-2gpu" / "bench" / "bench.json").read_text())
    softmax, gemm = report.kernels
    assert row_cells(softmax, "; ")[7] == "+0.04 (within noise)"  # xcd_chunked(chunk=2, dies=2), 0.999x
    assert row_cells(gemm, "; ")[7] == "+18.78"
    assert "(within noise) is smaller than the ncu run-to-run movement" in to_markdown(report)
