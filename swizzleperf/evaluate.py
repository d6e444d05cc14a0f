"""One candidate through the pipeline: static checks -> bijectivity -> correctness -> profile.

Each stage either passes or records why not; a failure ends the candidate's run through the
pipeline but never the loop. The result is an `Attempt`, whatever happened.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone

from swizzleperf import correctness, remap
from swizzleperf.errors import SwizzlePerfError
from swizzleperf.hardware import HardwareSpec
from swizzleperf.history import Attempt, Stage, StageResult, kernel_diff
from swizzleperf.kernel import KernelFile
from swizzleperf.profilers.base import Profiler
from swizzleperf.proposers.base import Proposal


def hook_constants(kernel: KernelFile, hw: HardwareSpec) -> dict[str, int]:
    """Values of the hook's constexpr parameters: the die count."""
    return {name: hw.num_domains for name in kernel.hook.constexprs}


class CandidateEvaluator:
    def __init__(self, kernel: KernelFile, hw: HardwareSpec, profiler: Profiler | None, size: str,
                 correctness_seeds: tuple[int, ...] = (0,), correctness_sizes: list[str] | None = None,
                 grids: list[tuple[int, ...]] | None = None):
        """`grids`: where to prove bijectivity; by default every declared grid plus the usual suspects."""
        self.kernel = kernel
        self.hw = hw
        self.profiler = profiler
        self.size = size
        self.seeds = correctness_seeds
        self.correctness_sizes = correctness_sizes
        if grids is None:
            grids = remap.bijectivity_grids(kernel.hook, [kernel.grid(name) for name in kernel.sizes], hw.num_domains)
        self.grids = grids

    def evaluate(self, proposal: Proposal, iteration: int,
                 on_stage: Callable[[Stage], None] | None = None) -> Attempt:
        started, t0 = datetime.now(timezone.utc), time.perf_counter()
        stages: list[StageResult] = []
        report = None
        for stage, run in (("propose", self._propose), ("static", self._static),
                           ("bijectivity", self._bijectivity), ("correctness", self._correctness),
                           ("profile", self._profile)):
            if stage == "profile" and self.profiler is None:
                break
            if on_stage:
                on_stage(stage)
            s0 = time.perf_counter()
            try:
                ok, detail, data, produced = run(proposal)
            except SwizzlePerfError as exc:  # a stage's own failure, e.g. a profiler crash
                ok, detail, data, produced = False, str(exc), None, None
            stages.append(StageResult(stage=stage, ok=ok, detail=detail, seconds=time.perf_counter() - s0, data=data))
            if produced is not None:
                report = produced
            if not ok:
                break
        diff = kernel_diff(self.kernel, proposal.source) if proposal.source.strip() else ""
        return Attempt(iteration=iteration, origin=proposal.origin, family=proposal.family,
                       rationale=proposal.rationale, source=proposal.source, diff=diff, stages=stages,
                       report=report, usage=proposal.usage, memory_analysis=proposal.memory_analysis,
                       started_at=started, seconds=time.perf_counter() - t0)

    # Each stage returns (ok, one-sentence detail, stage data for the record, bottleneck report or None).

    def _propose(self, proposal: Proposal):
        if proposal.extraction_error:
            return False, proposal.extraction_error, None, None
        if not proposal.source.strip():
            return False, "the proposer returned no code", None, None
        return True, "code extracted", None, None

    def _static(self, proposal: Proposal):
        remap.static_check(proposal.source, self.kernel.hook)  # raises RemapRejected
        return True, "parses, right signature, only allowed constructs", None, None

    def _bijectivity(self, proposal: Proposal):
        result = remap.check_bijective(proposal.source, self.kernel.hook, self.grids,
                                       hook_constants(self.kernel, self.hw))
        return result.ok, result.message, result.model_dump(mode="json"), None

    def _correctness(self, proposal: Proposal):
        result = correctness.check_correctness(self.kernel, proposal.source, sizes=self.correctness_sizes,
                                               seeds=self.seeds, num_xcds=self.hw.num_domains)
        return result.ok, result.summary, result.model_dump(mode="json"), None

    def _profile(self, proposal: Proposal):
        assert self.profiler is not None
        report = self.profiler.profile(self.kernel, proposal.source, self.size)
        return True, report.summary(), None, report
