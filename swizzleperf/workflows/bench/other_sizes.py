"""Whether a best remap generalises: re-validated and re-profiled at the kernel's other sizes.

Validation at another size: bijectivity on that size's grid (the loop already proved the general
extra grids) and correctness at that size through `CandidateEvaluator`, where this device can
run it: any size on a GPU, only CHECK_SIZES on the CPU interpreter. Elsewhere on the CPU only
bijectivity is checked, and the result says so.

The simulator's budget (`SimBudget`): a size is simulated when its trace holds at most
`max_sim_accesses` line accesses -- exact when the trace is already cached, otherwise estimated
as the run's accesses per program times the size's program count. The estimate is low where a
program's work grows with the size (attention's sequence length, GEMM's K), so capture is also
time-boxed. Sizes over the budget are reported as skipped: they are GPU-profiler work.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from swizzleperf.errors import RemapRejected, SwizzlePerfError, TraceCaptureError
from swizzleperf.hardware.spec import HardwareSpec, hook_constants
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.profilers.select import select_profiler
from swizzleperf.records.proposal import Proposal
from swizzleperf.validation.bijectivity import check_bijective
from swizzleperf.workflows.bench.results import SizeResult, Speedup

DEFAULT_SIM_ACCESSES = 60_000_000
DEFAULT_CAPTURE_TIMEOUT_S = 600.0

Status = Callable[[str], None]


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
        from swizzleperf.sim.capture.trace_capture import cached_trace_path
        from swizzleperf.sim.trace.record import TraceMeta, meta_path

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
        from swizzleperf.sim.capture.trace_capture import capture_trace

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
            report = check_bijective(kernel.remap_of(remap_source), kernel.hook, [grid], hook_constants(kernel, hw),
                                     prove=False)
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
