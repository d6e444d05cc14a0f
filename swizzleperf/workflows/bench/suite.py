"""`swizzleperf bench`: the optimize loop over a suite of kernels, and whether each best remap generalises.

For each kernel: one optimize run (an ordinary run directory under --runs-dir), then its best
remap is re-validated and re-profiled at every other declared size of the kernel, beside the
kernel's own remap at that size (other_sizes.py). A remap found at one size is worth keeping only
if it stays a bijection, stays correct and still helps at the other sizes the kernel is launched
with. Writes bench.md, bench.json (records.BenchReport) and bench.png into --out (output.py).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from swizzleperf.errors import ContractError, SwizzlePerfError
from swizzleperf.hardware.select import resolve as resolve_hardware
from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import KERNELS_DIR, find_kernel, load_kernel
from swizzleperf.loop.driver import DEFAULT_BATCH
from swizzleperf.loop.executors import Executor, InProcess
from swizzleperf.loop.executors.base import placed_gpu
from swizzleperf.loop.history import misses
from swizzleperf.loop.reverify import run_kernel
from swizzleperf.loop.rundir import RunDir
from swizzleperf.profilers.select import select_profiler
from swizzleperf.validation.correctness import default_device
from swizzleperf.workflows.bench.other_sizes import (
    DEFAULT_CAPTURE_TIMEOUT_S,
    DEFAULT_SIM_ACCESSES,
    SimBudget,
    Status,
    _first_line,
    generalise,
)
from swizzleperf.workflows.bench.output import write_outputs
from swizzleperf.workflows.bench.results import BenchReport, KernelResult, Speedup
from swizzleperf.workflows.optimize import OptimizeRequest, run_quietly

__all__ = ["BenchReport", "BenchRequest", "SimBudget", "find_kernels", "generalise", "run_bench"]


@dataclass
class BenchRequest:
    kernels: list[Path]
    hardware: str | None
    profiler: str = "sim"
    proposer: str = "search"
    iterations: int = 24
    seed: int = 0
    model: str | None = None
    api_base: str | None = None
    runs_dir: Path = Path("runs")
    out: Path | None = None
    max_sim_accesses: int = DEFAULT_SIM_ACCESSES
    capture_timeout_s: float = DEFAULT_CAPTURE_TIMEOUT_S
    other_sizes: list[str] | None = None  # None: every declared size; names a kernel lacks are ignored for it
    batch: int = DEFAULT_BATCH  # proposals per snapshot of each kernel's history


def find_kernels(names: list[str], kernels_dir: Path = KERNELS_DIR) -> list[Path]:
    """Kernel files by name (softmax -> kernels/softmax.py) or path; none named: the whole directory."""
    available = sorted(p for p in kernels_dir.glob("*.py") if not p.name.startswith("_"))
    if not names:
        if not available:
            raise ContractError(f"no kernel files in {kernels_dir}/; name kernel files or run from the repository root")
        return available
    return [find_kernel(name, kernels_dir) for name in names]


def check_other_sizes(names: list[str] | None, kernels: list[Path]) -> None:
    """Refuse an --other-sizes name that no kernel of the suite declares (a typo would check nothing)."""
    if not names:
        return
    declared: dict[str, list[str]] = {}
    for path in kernels:
        try:
            declared[path.stem] = list(load_kernel(path).sizes)
        except SwizzlePerfError:
            continue  # reported when its turn comes
    unknown = [name for name in names if declared and not any(name in sizes for sizes in declared.values())]
    if unknown:
        listed = "; ".join(f"{kernel} declares {', '.join(sizes)}" for kernel, sizes in declared.items())
        raise ContractError(f"--other-sizes: no kernel declares {', '.join(map(repr, unknown))} ({listed})")


# --- one kernel, the suite -----------------------------------------------------------------------------

def summarise_run(run: RunDir, kernel_path: Path, run_seconds: float) -> KernelResult:
    """The run's own numbers, straight from its history."""
    history = run.load_history()
    best, baseline = history.best(), history.baseline()
    report, base = best.report, baseline.report
    return KernelResult(
        kernel=run.record.kernel.name, kernel_path=str(kernel_path), status="finished", run_dir=str(run.path),
        size=run.record.size, source=report.source, misses_ratio=_ratio(misses(best), misses(baseline)),
        baseline_hit_pct=base.hit_pct, best_hit_pct=report.hit_pct,
        ceiling_pct=report.ceiling_pct, improvement_pts=report.hit_pct - base.hit_pct,
        speedup=Speedup.between(base, report),
        best_family=best.family, best_iteration=best.iteration, attempts=len(history),
        seconds_to_best=sum(a.seconds for a in history.attempts if a.iteration <= best.iteration),
        run_seconds=run_seconds)


def _ratio(mine: int | None, theirs: int | None) -> float | None:
    return mine / theirs if mine is not None and theirs else None


def _quiet(text: str) -> None:
    """The status of a kernel benched in another process: nobody there to show it to."""


def bench_kernel(path: Path, request: BenchRequest, hw: HardwareSpec, profiler_name: str, device: str,
                 status: Status = _quiet) -> KernelResult:
    """Optimize one kernel (quietly), then check its best remap at the kernel's other sizes."""
    t0, started_at, gpu = time.perf_counter(), datetime.now(timezone.utc), placed_gpu()
    status("optimize loop")
    optimize = OptimizeRequest(
        kernel_path=path, hardware=request.hardware, profiler=profiler_name, proposer=request.proposer,
        iterations=request.iterations, patience=request.iterations, size=None, seed=request.seed, model=request.model,
        api_base=request.api_base, llm_mode="aware", llm_timeout=180.0, llm_retries=3, library=None, write=False,
        resume=None, runs_dir=request.runs_dir, batch=request.batch)  # in-process: the executor spreads kernels
    try:
        run = run_quietly(optimize)
    except SwizzlePerfError as exc:
        return KernelResult(kernel=path.stem, kernel_path=str(path), status="failed", error=_first_line(exc),
                            run_seconds=time.perf_counter() - t0, started_at=started_at, gpu=gpu)
    result = summarise_run(run, path, time.perf_counter() - t0)
    result.started_at, result.gpu = started_at, gpu
    t1 = time.perf_counter()
    kernel, history, size = run_kernel(run, path), run.load_history(), run.record.size
    budget = None
    if profiler_name == "sim":
        budget = SimBudget(max_accesses=request.max_sim_accesses, reference_size=size,
                           accesses_per_program=history.baseline().report.trace_accesses / math.prod(kernel.grid(size)),
                           capture_timeout_s=request.capture_timeout_s)
    result.other_sizes = generalise(kernel, history.best().source, size, hw, profiler_name, device, budget, status,
                                    request.other_sizes)
    result.generalise_seconds = time.perf_counter() - t1
    return result


class BenchWatcher:
    """What a bench tells whoever watches it (the CLI renders it; by default nobody watches)."""

    def started(self, request: BenchRequest, report: BenchReport, out: Path, executor: Executor) -> None: ...

    def status(self, path: Path) -> Status:
        """Where kernel `path`'s optimize run and generalisation stand, as they go (in this process only)."""
        return _quiet

    def kernel_done(self, result: KernelResult, report: BenchReport) -> None: ...

    def finished(self, report: BenchReport, paths: list[Path]) -> None: ...


def run_bench(request: BenchRequest, executor: Executor | None = None,
              watcher: BenchWatcher | None = None) -> BenchReport:
    """Every kernel of the request, one per call of `executor` (default: in turn, in this process); writes
    bench.md/.json/.png after each kernel, in the request's order."""
    executor, watcher = executor or InProcess(), watcher or BenchWatcher()
    t0 = time.perf_counter()
    check_other_sizes(request.other_sizes, request.kernels)
    spec, hw_reason = resolve_hardware(request.hardware)
    profiler, profiler_reason = select_profiler(request.profiler, spec)  # fails now, not once per kernel
    device = default_device()
    out = request.out or request.runs_dir / f"bench-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    report = BenchReport(
        created_at=datetime.now(timezone.utc), hardware=spec, hardware_reason=hw_reason, profiler=profiler.name,
        profiler_reason=profiler_reason, proposer=request.proposer, iterations=request.iterations, seed=request.seed,
        correctness_device=device, max_sim_accesses=request.max_sim_accesses,
        capture_timeout_s=request.capture_timeout_s, other_sizes=request.other_sizes, kernels=[],
        kernels_planned=len(request.kernels), total_seconds=0.0)
    watcher.started(request, report, out, executor)
    paths: list[Path] = []
    local = executor.name == "in-process"  # elsewhere: the kernels' lines say how it goes
    calls = [(path, request, spec, profiler.name, device, watcher.status(path) if local else _quiet)
             for path in request.kernels]
    for result in executor.map(bench_kernel, calls, gpu=profiler.measures):
        report.kernels.append(result)
        report.total_seconds = time.perf_counter() - t0
        paths = write_outputs(report, out)  # after every kernel: a bench stopped part-way keeps what it finished
        watcher.kernel_done(result, report)
    watcher.finished(report, paths)
    return report
