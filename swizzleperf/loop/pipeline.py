"""One candidate through the pipeline: static checks -> bijectivity -> correctness -> profile.

Each stage either passes or records why not; a failure ends the candidate's run through the
pipeline but never the loop. The result is an `Attempt`, whatever happened.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from swizzleperf.errors import RemapRejected, SwizzlePerfError
from swizzleperf.hardware.spec import HardwareSpec, hook_constants
from swizzleperf.kernel.contract import KernelFile, load_kernel
from swizzleperf.loop.history import kernel_diff
from swizzleperf.profilers.base import Profiler
from swizzleperf.records.attempt import Attempt, Stage, StageResult
from swizzleperf.records.proposal import Proposal
from swizzleperf.remaps.checked import CheckedCandidate, check_candidate
from swizzleperf.untrusted.parse import echo
from swizzleperf.validation import bijectivity, correctness, loop_order
from swizzleperf.validation.proof_status import unproven_reason

_DETAIL_CHARS = 2000  # a stage's detail is one sentence; this bounds one that quotes too much



class CandidateEvaluator:
    def __init__(self, kernel: KernelFile, hw: HardwareSpec, profiler: Profiler | None, size: str,
                 correctness_seeds: tuple[int, ...] = (0,), correctness_sizes: list[str] | None = None,
                 grids: list[tuple[int, ...]] | None = None, allow_unproven: bool = False):
        """`grids`: where to prove bijectivity; by default every declared grid plus the usual suspects.
        `allow_unproven`: accept a remap whose proof does not cover the kernel's declared grids (marked so)."""
        self.kernel = kernel
        self.hw = hw
        self.profiler = profiler
        self.size = size
        self.seeds = correctness_seeds
        self.correctness_sizes = correctness_sizes
        if grids is None:
            declared = [kernel.grid(name) for name in kernel.sizes]
            grids = bijectivity.bijectivity_grids(kernel.hook, declared, hw.num_domains)
        self.grids = grids
        self.allow_unproven = allow_unproven
        self.needed_programs = max(math.prod(kernel.grid(name)) for name in kernel.sizes)

    def __reduce__(self):
        """Pickled for an executor's worker: the kernel as its path, hash and text (a module does not pickle)."""
        kernel = self.kernel
        return (_rebuilt, ((str(kernel.path), kernel.sha256, kernel.source), self.hw, self.profiler, self.size,
                           self.seeds, self.correctness_sizes, self.grids, self.allow_unproven))

    def evaluate(self, proposal: Proposal, iteration: int, on_stage: Callable[[Stage], None] | None = None,
                 until: Stage = "profile") -> Attempt:
        """The proposal through the stages up to `until` (the last one run), stopping at the first that fails."""
        started, t0 = datetime.now(timezone.utc), time.perf_counter()
        stages: list[StageResult] = []
        report, checked = None, None
        for stage, run in (("propose", self._propose), ("static", self._static),
                           ("bijectivity", self._bijectivity), ("correctness", self._correctness),
                           ("profile", self._profile)):
            if stage == "profile" and self.profiler is None:
                break
            if on_stage:
                on_stage(stage)
            s0 = time.perf_counter()
            broken = False
            try:
                ok, detail, data, produced = run(proposal, checked)
            except RemapRejected as exc:  # the candidate's failure; the stage is named beside the reason
                ok, detail, data, produced = False, exc.reason if exc.stage == stage else str(exc), None, None
            except Exception as exc:  # the check's own (a profiler crash, a bug): recorded, never raised
                ok, detail, data, produced, broken = False, _error_text(exc), None, None, True
            stages.append(StageResult(stage=stage, ok=ok, detail=echo(detail, _DETAIL_CHARS),
                                      seconds=time.perf_counter() - s0, data=data, checker_failed=broken))
            if isinstance(produced, CheckedCandidate):  # the static stage's: what the later stages read
                checked = produced
            elif produced is not None:
                report = produced
            if not ok or stage == until:
                break
        diff = self._diff(proposal.source)
        return Attempt(iteration=iteration, origin=proposal.origin, family=proposal.family,
                       rationale=proposal.rationale, source=proposal.source, diff=diff, stages=stages,
                       report=report, usage=proposal.usage, memory_analysis=proposal.memory_analysis,
                       llm_calls=proposal.llm_calls, started_at=started, seconds=time.perf_counter() - t0)

    def _diff(self, source: str) -> str:
        try:
            return kernel_diff(self.kernel, source) if source.strip() else ""
        except Exception:  # noqa: BLE001 -- a diff is for reading; its absence must not lose the attempt
            return ""

    # Each stage takes the proposal and the static stage's CheckedCandidate (None before it) and returns (ok,
    # one-sentence detail, stage data for the record, what it produced: the checked candidate, a report, None).

    def _propose(self, proposal: Proposal, checked: None):
        if proposal.extraction_error:
            return False, proposal.extraction_error, None, None
        if not proposal.source.strip():
            return False, "the proposer returned no code", None, None
        return True, "code extracted", None, None

    def _static(self, proposal: Proposal, checked: None):
        checked = check_candidate(proposal.source, self.kernel)  # raises RemapRejected
        return True, checked.what, None, checked

    def _bijectivity(self, proposal: Proposal, checked: CheckedCandidate):
        parts = checked.schedule
        constants = hook_constants(self.kernel, self.hw)
        result = bijectivity.check_bijective(parts.remap, self.kernel.hook, self.grids, constants,
                                             checked=checked.remap)
        ok, detail, data = result.ok, result.message, result.model_dump(mode="json")
        unproven = unproven_reason(result.proof, self.needed_programs) if ok else None
        if ok and parts.loop_order is not None:  # the loop order: a permutation of the steps on every local tile
            order = loop_order.check_kernel_loop_order(parts.loop_order, self.kernel, self.hw.num_domains)
            ok, detail = order.ok, f"remap: {detail}; loop order: {order.message}"
            data["loop_order"] = order.model_dump(mode="json")
            if ok and unproven is None and (order.every_tile is None or order.every_tile.status != "proven"):
                unproven = "the loop order is not proven for every local tile"
        if ok and unproven and proposal.source.strip() != self.kernel.hook_source.strip():  # the kernel's own: as is
            if not self.allow_unproven:
                return False, f"{unproven}; --allow-unproven accepts it on its sampled grids ({detail})", data, None
            detail = f"UNPROVEN, accepted with --allow-unproven: {unproven}; {detail}"
        return ok, detail, data, None

    def _correctness(self, proposal: Proposal, checked: CheckedCandidate):
        result = correctness.check_correctness(self.kernel, proposal.source, sizes=self.correctness_sizes,
                                               seeds=self.seeds, num_xcds=self.hw.num_domains, checked=checked)
        return result.ok, result.summary, result.model_dump(mode="json"), None

    def _profile(self, proposal: Proposal, checked: CheckedCandidate):
        assert self.profiler is not None
        report = self.profiler.profile(self.kernel, proposal.source, self.size)
        return True, report.summary(), None, report


_KERNELS: dict[tuple[str, str], KernelFile] = {}  # a worker's kernels, loaded once per process


def _rebuilt(kernel: tuple[str, str, str], *args) -> CandidateEvaluator:
    return CandidateEvaluator(worker_kernel(*kernel), *args)


def worker_kernel(path: str, sha256: str, source: str) -> KernelFile:
    """The kernel a worker evaluates: the file at `path` when it still has this hash (the same machine),
    else a copy of `source` under the same file name (another node, or the file changed since)."""
    key = (path, sha256)
    if key not in _KERNELS:
        try:
            kernel = load_kernel(path)
        except SwizzlePerfError:  # gone, or no longer a kernel: the text travelled with the evaluator
            kernel = None
        if kernel is None or kernel.sha256 != sha256:
            copy = Path(tempfile.mkdtemp(prefix="swizzleperf-kernel-")) / Path(path).name
            copy.write_text(source)
            kernel = load_kernel(copy)
        _KERNELS[key] = kernel
    return _KERNELS[key]


def _error_text(exc: Exception) -> str:
    """A stage's exception in one line: its own message if it is an expected failure, else its type too."""
    if isinstance(exc, SwizzlePerfError):
        return str(exc)
    return f"could not check: {type(exc).__name__}: {exc}"
