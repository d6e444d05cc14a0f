"""`swizzleperf bench`: the optimize loop over a suite of kernels, and whether each best remap generalises.

For each kernel: one optimize run (an ordinary run directory under --runs-dir), then its best
remap is re-validated and re-profiled at every other declared size of the kernel, beside the
kernel's own remap at that size. A remap found at one size is worth keeping only if it stays a
bijection, stays correct and still helps at the other sizes the kernel is launched with.

Validation at another size: bijectivity on that size's grid (the loop already proved the general
extra grids) and correctness at that size through `CandidateEvaluator`, where this device can
run it: any size on a GPU, only CHECK_SIZES on the CPU interpreter. Elsewhere on the CPU only
bijectivity is checked, and the result says so.

The simulator's budget (`SimBudget`): a size is simulated when its trace holds at most
`max_sim_accesses` line accesses -- exact when the trace is already cached, otherwise estimated
as the run's accesses per program times the size's program count. The estimate is low where a
program's work grows with the size (attention's sequence length, GEMM's K), so capture is also
time-boxed. Sizes over the budget are reported as skipped: they are GPU-profiler work.

Writes bench.md, bench.json (`BenchReport`) and bench.png into --out.
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from swizzleperf import hardware
from swizzleperf.bijectivity import check_bijective
from swizzleperf.correctness import default_device
from swizzleperf.errors import ContractError, RemapRejected, SwizzlePerfError, TraceCaptureError
from swizzleperf.evaluate import CandidateEvaluator, hook_constants
from swizzleperf.executors import Executor, InProcess
from swizzleperf.hardware import HardwareSpec
from swizzleperf.kernel import KERNELS_DIR, KernelFile, find_kernel, load_kernel
from swizzleperf.optimize import DEFAULT_BATCH, reopen_kernel
from swizzleperf.profilers.select import select_profiler
from swizzleperf.proposers.base import Proposal
from swizzleperf.render import progress_bar
from swizzleperf.report import BottleneckReport, Source
from swizzleperf.runs import RunDir
from swizzleperf.session import OptimizeRequest, run_optimize

DEFAULT_SIM_ACCESSES = 60_000_000
DEFAULT_CAPTURE_TIMEOUT_S = 600.0

Status = Callable[[str], None]


# --- the records -------------------------------------------------------------------------------

class Speedup(BaseModel):
    """Baseline time over best time (do_bench medians), with the p20/p80 range."""

    model_config = ConfigDict(extra="forbid")
    ratio: float
    low: float
    high: float
    l2_state: str

    @classmethod
    def between(cls, baseline: BottleneckReport, best: BottleneckReport) -> Speedup | None:
        """None unless both reports carry a timing."""
        if baseline.timing is None or best.timing is None:
            return None
        from swizzleperf.profilers.timer import speedup

        ratio, low, high = speedup(baseline.timing, best.timing)
        return cls(ratio=ratio, low=low, high=high, l2_state=best.timing.l2_state)

    def cell(self) -> str:
        return f"{self.ratio:.3f}x [{self.low:.3f}-{self.high:.3f}]"


class SizeResult(BaseModel):
    """The best remap at one other size of the kernel, next to the kernel's own remap there."""

    model_config = ConfigDict(extra="forbid")
    size: str
    status: Literal["profiled", "rejected", "skipped", "failed"]
    reason: str | None = Field(None, description="why it was rejected, skipped or failed")
    validation: str = Field("", description="what was checked at this size, in words")
    baseline_hit_pct: float | None = None
    best_hit_pct: float | None = None
    ceiling_pct: float | None = None
    line_accesses: int | None = Field(None, description="the trace's line accesses (simulator only)")
    accesses_estimated: bool = Field(False, description="line_accesses is an estimate: the trace was not captured")
    speedup: Speedup | None = Field(None, description="only where the profiler measured time")
    seconds: float

    def cell(self) -> str:
        if self.status == "profiled":
            ceiling = "n/a" if self.ceiling_pct is None else f"{self.ceiling_pct:.2f}"
            timed = "" if self.speedup is None else f", {self.speedup.cell()}"
            return f"{self.size}: {self.baseline_hit_pct:.2f} -> {self.best_hit_pct:.2f} (ceiling {ceiling}{timed})"
        return f"{self.size}: {self.status}: {self.reason}"


class KernelResult(BaseModel):
    """One kernel of the suite: its optimize run and the best remap at the other sizes."""

    model_config = ConfigDict(extra="forbid")
    kernel: str
    kernel_path: str
    status: Literal["finished", "failed"]
    error: str | None = None
    run_dir: str | None = None
    size: str | None = None
    source: Source | None = Field(None, description="where the hit rates come from: sim (predicted), ncu, rocprofv3")
    baseline_hit_pct: float | None = None
    best_hit_pct: float | None = None
    ceiling_pct: float | None = None
    improvement_pts: float | None = None
    speedup: Speedup | None = Field(None, description="only where the profiler measured time")
    best_family: str | None = None
    best_iteration: int | None = None
    attempts: int = 0
    seconds_to_best: float | None = Field(None, description="attempt seconds up to and including the best "
                                                            "(the baseline's trace capture included)")
    run_seconds: float = Field(description="the whole optimize run")
    other_sizes: list[SizeResult] = Field(default_factory=list)
    generalise_seconds: float = 0.0


class BenchReport(BaseModel):
    """bench.json (schema 2 added other_sizes, kernels_planned and per-size speedups)."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 2
    created_at: datetime
    hardware: HardwareSpec
    hardware_reason: str
    profiler: str
    profiler_reason: str
    proposer: str
    iterations: int
    seed: int
    correctness_device: str
    max_sim_accesses: int
    capture_timeout_s: float
    other_sizes: list[str] | None = Field(None, description="the other sizes asked for; None: every declared size")
    kernels: list[KernelResult]
    kernels_planned: int = Field(description="kernels in the suite; more than len(kernels) while it runs")
    total_seconds: float

    @property
    def complete(self) -> bool:
        return len(self.kernels) == self.kernels_planned

    @property
    def label(self) -> str:
        return "predicted by the simulator" if self.profiler == "sim" else f"measured by {self.profiler}"


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


# --- the simulator's budget ----------------------------------------------------------------------

@dataclass(frozen=True)
class SimBudget:
    """Which other sizes the simulator takes on, and a time box for their capture."""

    max_accesses: int
    accesses_per_program: float  # at the run's own size, from its trace
    reference_size: str
    capture_timeout_s: float

    def line_accesses(self, kernel: KernelFile, size: str, line_bytes: int) -> tuple[int, bool]:
        """(line accesses at `size`, estimated?): exact from the trace cache, else estimated."""
        from swizzleperf.sim.capture import cached_trace_path
        from swizzleperf.sim.trace import TraceMeta, meta_path

        path = cached_trace_path(kernel, size, line_bytes)
        if path.exists() and meta_path(path).exists():
            return TraceMeta.read(path).num_accesses, False
        return round(self.accesses_per_program * math.prod(kernel.grid(size))), True

    def skip_reason(self, accesses: int, estimated: bool) -> str | None:
        if accesses <= self.max_accesses:
            return None
        how = f"~{accesses / 1e6:.3g} M line accesses (est. from {self.reference_size})" if estimated \
            else f"{accesses / 1e6:.3g} M line accesses"
        return f"{how} > the simulator's {self.max_accesses / 1e6:g} M budget: profile it on a GPU"

    def capture(self, kernel: KernelFile, size: str, line_bytes: int,
                progress: Callable[[int, int], None] | None) -> None:
        """Capture into the trace cache under the time box (the profiler then reads it from there)."""
        from swizzleperf.sim.capture import capture_trace

        capture_trace(kernel, size, line_bytes, progress=progress, timeout=self.capture_timeout_s)


# --- generalisation --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Validation:
    """What re-validating a remap at one size found."""

    failure: str | None  # "stage: reason" of the first failed check; None when it passed
    checked: str  # what was checked, in words


def validate_at(kernel: KernelFile, remap_source: str, size: str, hw: HardwareSpec, device: str) -> Validation:
    """Bijectivity on `size`'s grid, and correctness at `size` where this device can run it.

    The loop already proved the general extra grids (and ran the z3 proof), so only this size's
    grid is checked, without the proof: the question is whether it works at this size. On the
    CPU interpreter only CHECK_SIZES are affordable: at any other size correctness is not run
    (re-running the check sizes would blame this size for their failures).
    """
    grid = kernel.grid(size)
    if device == "cpu" and size not in kernel.check_sizes:
        try:
            report = check_bijective(remap_source, kernel.hook, [grid], hook_constants(kernel, hw), prove=False)
        except RemapRejected as exc:
            return Validation(failure=str(exc), checked=f"static: {exc.reason}")
        checked = (f"bijectivity: {report.message}; correctness not run at {size} "
                   f"(the CPU interpreter runs CHECK_SIZES only)")
        return Validation(failure=None if report.ok else f"bijectivity: {report.message}", checked=checked)
    evaluator = CandidateEvaluator(kernel, hw, None, size, correctness_sizes=[size], grids=[grid])
    attempt = evaluator.evaluate(Proposal(source=remap_source, family="best remap", origin="search"), 0)
    failure = attempt.failure
    checked = "; ".join(f"{s.stage}: {s.detail}" for s in attempt.stages if s.stage in ("bijectivity", "correctness"))
    return Validation(failure=None if failure is None else f"{failure.stage}: {failure.detail}", checked=checked)


def check_size(kernel: KernelFile, remap_source: str, size: str, hw: HardwareSpec, profiler_name: str, device: str,
               budget: SimBudget | None, status: Status = lambda text: None) -> SizeResult:
    """A remap at one size: rejected, skipped, failed, or profiled beside the kernel's own remap."""
    t0 = time.perf_counter()

    def result(**fields) -> SizeResult:
        return SizeResult(size=size, seconds=time.perf_counter() - t0, **fields)

    own_hook = remap_source.strip() == kernel.hook_source.strip()
    validation = "the kernel's own remap: nothing to validate"
    if not own_hook:
        status(f"{size}: validating")
        checked = validate_at(kernel, remap_source, size, hw, device)
        validation = checked.checked
        if checked.failure is not None:
            return result(status="rejected", reason=checked.failure, validation=validation)
    accesses, estimated = None, False
    if budget is not None:
        accesses, estimated = budget.line_accesses(kernel, size, hw.line_bytes)
        reason = budget.skip_reason(accesses, estimated)
        if reason is not None:
            return result(status="skipped", reason=reason, validation=validation, line_accesses=accesses,
                          accesses_estimated=estimated)

    def capture_progress(done: int, total: int) -> None:
        status(f"{size}: capturing the trace, {done}/{total} programs")

    try:
        if budget is not None and estimated:
            started = time.perf_counter()
            try:
                budget.capture(kernel, size, hw.line_bytes, capture_progress)
            except TraceCaptureError:
                if time.perf_counter() - started < budget.capture_timeout_s:
                    raise  # the capture failed by itself: reported below
                return result(status="skipped", validation=validation, line_accesses=accesses, accesses_estimated=True,
                              reason=f"the trace capture ran past the {budget.capture_timeout_s:g} s time box "
                                     f"(~{accesses / 1e6:.3g} M line accesses, est. from {budget.reference_size})")
        profiler, _ = select_profiler(profiler_name, hw, progress=capture_progress)
        status(f"{size}: profiling")
        baseline = profiler.profile(kernel, kernel.hook_source, size)
        candidate = baseline if own_hook else profiler.profile(kernel, remap_source, size)
    except SwizzlePerfError as exc:
        return result(status="failed", reason=_first_line(exc), validation=validation,
                      line_accesses=accesses, accesses_estimated=estimated)
    return result(status="profiled", validation=validation, baseline_hit_pct=baseline.hit_pct,
                  best_hit_pct=candidate.hit_pct, ceiling_pct=baseline.ceiling_pct,
                  line_accesses=baseline.trace_accesses if budget is not None else None,
                  speedup=Speedup.between(baseline, candidate))


def _first_line(exc: BaseException) -> str:
    """An error's first line; its type when the message is empty."""
    return next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


def generalise(kernel: KernelFile, remap_source: str, run_size: str, hw: HardwareSpec, profiler_name: str,
               device: str, budget: SimBudget | None, status: Status = lambda text: None,
               only: list[str] | None = None) -> list[SizeResult]:
    """A remap at every declared size of the kernel except the run's own (or those of them in
    `only`), in declaration order."""
    return [check_size(kernel, remap_source, size, hw, profiler_name, device, budget, status)
            for size in kernel.sizes if size != run_size and (only is None or size in only)]


# --- one kernel, the suite -----------------------------------------------------------------------------

def summarise_run(run: RunDir, kernel_path: Path, run_seconds: float) -> KernelResult:
    """The run's own numbers, straight from its history."""
    history = run.load_history()
    best, baseline = history.best(), history.baseline()
    report, base = best.report, baseline.report
    return KernelResult(
        kernel=run.record.kernel.name, kernel_path=str(kernel_path), status="finished", run_dir=str(run.path),
        size=run.record.size, source=report.source, baseline_hit_pct=base.hit_pct, best_hit_pct=report.hit_pct,
        ceiling_pct=report.ceiling_pct, improvement_pts=report.hit_pct - base.hit_pct,
        speedup=Speedup.between(base, report),
        best_family=best.family, best_iteration=best.iteration, attempts=len(history),
        seconds_to_best=sum(a.seconds for a in history.attempts if a.iteration <= best.iteration),
        run_seconds=run_seconds)


def _quiet(text: str) -> None:
    """The status of a kernel benched in another process: nobody there to show it to."""


def bench_kernel(path: Path, request: BenchRequest, hw: HardwareSpec, profiler_name: str, device: str,
                 status: Status = _quiet) -> KernelResult:
    """Optimize one kernel (quietly), then check its best remap at the kernel's other sizes."""
    t0 = time.perf_counter()
    status("optimize loop")
    optimize = OptimizeRequest(
        kernel_path=path, hardware=request.hardware, profiler=profiler_name, proposer=request.proposer,
        iterations=request.iterations, patience=request.iterations, size=None, seed=request.seed, model=request.model,
        api_base=request.api_base, llm_mode="aware", llm_timeout=180.0, llm_retries=3, library=None, write=False,
        resume=None, runs_dir=request.runs_dir, batch=request.batch)  # in-process: the executor spreads kernels
    try:
        run = run_optimize(optimize, Console(file=io.StringIO()))
    except SwizzlePerfError as exc:
        return KernelResult(kernel=path.stem, kernel_path=str(path), status="failed", error=_first_line(exc),
                            run_seconds=time.perf_counter() - t0)
    result = summarise_run(run, path, time.perf_counter() - t0)
    t1 = time.perf_counter()
    kernel, history, size = reopen_kernel(run), run.load_history(), run.record.size
    budget = None
    if profiler_name == "sim":
        budget = SimBudget(max_accesses=request.max_sim_accesses, reference_size=size,
                           accesses_per_program=history.baseline().report.trace_accesses / math.prod(kernel.grid(size)),
                           capture_timeout_s=request.capture_timeout_s)
    result.other_sizes = generalise(kernel, history.best().source, size, hw, profiler_name, device, budget, status,
                                    request.other_sizes)
    result.generalise_seconds = time.perf_counter() - t1
    return result


def run_bench(request: BenchRequest, console: Console, executor: Executor | None = None) -> BenchReport:
    """Every kernel of the request, one per call of `executor` (default: in turn, in this process); prints
    the table and writes bench.md/.json/.png after each kernel, in the request's order."""
    executor = executor or InProcess()
    t0 = time.perf_counter()
    check_other_sizes(request.other_sizes, request.kernels)
    spec, hw_reason = hardware.resolve(request.hardware)
    profiler, profiler_reason = select_profiler(request.profiler, spec)  # fails now, not once per kernel
    device = default_device()
    out = request.out or request.runs_dir / f"bench-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    console.print(f"[bold]swizzleperf bench[/] {len(request.kernels)} kernels on {spec.name} ({hw_reason}); profiler "
                  f"{profiler.name} ({profiler_reason}); proposer {request.proposer}, {request.iterations} iterations; "
                  f"runs in {request.runs_dir}, results in {out}; kernels: {executor.describe()}")
    report = BenchReport(
        created_at=datetime.now(timezone.utc), hardware=spec, hardware_reason=hw_reason, profiler=profiler.name,
        profiler_reason=profiler_reason, proposer=request.proposer, iterations=request.iterations, seed=request.seed,
        correctness_device=device, max_sim_accesses=request.max_sim_accesses,
        capture_timeout_s=request.capture_timeout_s, other_sizes=request.other_sizes, kernels=[],
        kernels_planned=len(request.kernels), total_seconds=0.0)
    paths: list[Path] = []
    progress = progress_bar(console, unit="kernels")
    with progress:
        task = progress.add_task("bench", total=len(request.kernels))

        def status(path: Path) -> Status:
            if executor.name != "in-process":  # elsewhere: the kernels' lines below say how it goes
                return _quiet
            return lambda text: progress.update(task, description=f"{path.stem}: {text}")

        calls = [(path, request, spec, profiler.name, device, status(path)) for path in request.kernels]
        for result in executor.map(bench_kernel, calls, gpu=profiler.name != "sim"):
            report.kernels.append(result)
            report.total_seconds = time.perf_counter() - t0
            # Written after every kernel: a bench stopped part-way keeps what it finished.
            paths = write_outputs(report, out)
            progress.advance(task)
            console.print(_progress_line(result), highlight=False)
    console.print(rich_table(report, console.width))
    console.print(f"wrote {', '.join(str(p) for p in paths)}; total wall time {report.total_seconds:.1f} s")
    return report


def _progress_line(result: KernelResult) -> str:
    if result.status == "failed":
        return f"[red]✗[/] {escape(result.kernel)}: {escape(result.error or '')}"
    return (f"[green]✓[/] {escape(result.kernel)} ({result.size}): {result.baseline_hit_pct:.2f}% -> "
            f"{result.best_hit_pct:.2f}% ({escape(result.best_family or '')}); other sizes: "
            f"{escape('; '.join(s.cell() for s in result.other_sizes)) or 'none'} "
            f"[dim]{result.run_seconds + result.generalise_seconds:.0f}s[/]")


# --- output -----------------------------------------------------------------------------------------

COLUMNS = ("kernel", "size", "source", "baseline hit %", "best hit %", "ceiling %", "improvement (pts)", "speedup",
           "iterations to best", "s to best", "best family", "other sizes: baseline -> best hit % (ceiling)")


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _source_text(source: Source | None) -> str:
    return "" if source is None else "sim (predicted)" if source == "sim" else f"{source} (measured)"


def row_cells(result: KernelResult, separator: str) -> list[str]:
    """One table row, in COLUMNS order; `separator` joins the other sizes (a line break)."""
    if result.status == "failed":
        return [result.kernel, "", "", "", "", "", "", "", "", "", f"failed: {result.error}", ""]
    ceiling = _pct(result.ceiling_pct) if result.ceiling_pct is not None else "n/a (counters)"
    speedup = result.speedup.cell() if result.speedup else "n/a (not timed)"
    return [result.kernel, result.size or "", _source_text(result.source), _pct(result.baseline_hit_pct),
            _pct(result.best_hit_pct), ceiling, f"{result.improvement_pts:+.2f}", speedup, str(result.best_iteration),
            f"{result.seconds_to_best:.1f}", result.best_family or "",
            separator.join(s.cell() for s in result.other_sizes) or "(no other sizes)"]


def _header(report: BenchReport) -> str:
    hw = report.hardware
    return (f"L2 read hit rates {report.label} on {hw.name} ({report.hardware_reason}; profiler: "
            f"{report.profiler_reason}). Proposer {report.proposer}, {report.iterations} iterations per kernel, "
            f"seed {report.seed}; ranked by L2 read hit rate. Other sizes: the best remap re-validated (bijectivity on "
            f"that size's grid, correctness on {report.correctness_device}) and re-profiled beside the kernel's own "
            f"remap; the simulator takes sizes up to {report.max_sim_accesses / 1e6:g} M line accesses (exact when "
            f"cached, else estimated from the run's accesses per program) with a "
            f"{report.capture_timeout_s:g} s capture time box. "
            + ("" if report.other_sizes is None else f"Other sizes limited to {', '.join(report.other_sizes)}. ")
            + ("" if report.complete else f"PARTIAL: {len(report.kernels)} of {report.kernels_planned} kernels "
                                          f"finished so far. ")
            + f"Total wall time {report.total_seconds:.1f} s ({report.total_seconds / 60:.1f} min).")


def to_markdown(report: BenchReport) -> str:
    escape_md = lambda text: text.replace("|", "\\|")  # noqa: E731
    lines = [f"# swizzleperf bench on {report.hardware.name}", "", _header(report), "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(escape_md(c) for c in row_cells(k, "<br>")) + " |" for k in report.kernels]
    lines += ["", "![baseline, best and ceiling per kernel](bench.png)", ""]
    return "\n".join(lines)


_SHORT_COLUMNS = ("kernel", "size", "source", "base %", "best %", "ceiling %", "+pts", "speedup", "iter", "s",
                  "best family", "other sizes: base -> best % (ceiling)")


# Below this many columns the full table folds every cell into slivers; the narrow one keeps the
# numbers a glance needs (the other sizes are in the per-kernel lines above it and in bench.md).
_FULL_TABLE_WIDTH = 150
_NARROW_COLUMNS = ("kernel", "size", "base %", "best %", "ceiling %", "speedup", "best family")


def rich_table(report: BenchReport, width: int = _FULL_TABLE_WIDTH) -> Table:
    """The table for a terminal `width` columns wide: COLUMNS with short headers, or fewer of them."""
    narrow = width < _FULL_TABLE_WIDTH
    columns = _NARROW_COLUMNS if narrow else _SHORT_COLUMNS
    caption = ("other sizes: in the lines above and in bench.md. " if narrow else
               "iter, s: iterations and seconds to the best attempt. ")
    table = Table(title=f"swizzleperf bench on {report.hardware.name}: L2 read hit rates {report.label}",
                  title_justify="left", caption_justify="left",
                  caption=f"{caption}Total wall time {report.total_seconds:.1f} s.")
    for col in columns:
        table.add_column(col, justify="left" if col in ("kernel", "size", "source", "best family") or "other" in col
                         else "right", overflow="fold")
    for result in report.kernels:
        cells = dict(zip(_SHORT_COLUMNS, row_cells(result, "\n")))
        table.add_row(*(escape(cells[col]) for col in columns))
    return table


def plot_bench(report: BenchReport, path: Path) -> Path:
    """Baseline, best and ceiling per kernel, as grouped bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [k for k in report.kernels if k.status == "finished"]
    x = np.arange(len(rows))
    width = 0.27
    fig, ax = plt.subplots(figsize=(max(6.0, 1.0 * len(rows) + 2.0), 4.4), dpi=110)
    for offset, values, colour, label in (
            (-width, [k.baseline_hit_pct for k in rows], "#888888", "baseline (kernel's own remap)"),
            (0.0, [k.best_hit_pct for k in rows], "#1f77b4", "best remap"),
            (width, [k.ceiling_pct for k in rows], "#2ca02c", "ceiling")):
        bars = ax.bar(x + offset, [v or 0.0 for v in values], width, color=colour, label=label)
        ax.bar_label(bars, labels=["n/a" if v is None else f"{v:.0f}" for v in values], fontsize=6, padding=1)
    ax.set_xticks(x, [f"{k.kernel}\n({k.size})" for k in rows], fontsize=8)
    ax.set_ylim(0, 112)  # room for the legend above 100 %
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel(f"L2 read hit rate, % ({report.label})", fontsize=9)
    ax.set_title(f"swizzleperf bench on {report.hardware.name}: {report.proposer}, {report.iterations} iterations "
                 f"per kernel, {report.total_seconds / 60:.1f} min", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", ncols=3, frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_outputs(report: BenchReport, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    markdown, data = out / "bench.md", out / "bench.json"
    markdown.write_text(to_markdown(report))
    data.write_text(report.model_dump_json(indent=2) + "\n")
    return [markdown, data, plot_bench(report, out / "bench.png")]
