"""`swizzleperf apply`: put a library remap into another kernel, prove it there, compare.

A remap proven bijective for one kernel's grids says nothing about another's, and a remap
that helped one access pattern may not help another: so the transplant is validated and
profiled from scratch, beside the kernel's own remap.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.profilers.base import Profiler
from swizzleperf.records.attempt import Attempt
from swizzleperf.records.proposal import Proposal
from swizzleperf.records.report import BottleneckReport
from swizzleperf.remaps.library import LibraryEntry, transplant


@dataclass
class Applied:
    entry: LibraryEntry
    source: str            # the remap as the kernel's hook
    notes: list[str]       # what was adapted (renamed parameters, ...)
    attempt: Attempt       # static, bijectivity, correctness, profile of the transplant
    baseline: BottleneckReport | None  # the kernel's own remap, same profiler


def apply_entry(entry: LibraryEntry, kernel: KernelFile, hw: HardwareSpec, profiler: Profiler, size: str,
                on_stage=None) -> Applied:
    source, notes = transplant(entry, kernel.hook, kernel.name)
    evaluator = CandidateEvaluator(kernel, hw, profiler, size)
    attempt = evaluator.evaluate(
        Proposal(source=source, family=f"library:{entry.name}", origin="library", rationale=entry.summary()),
        iteration=1, on_stage=on_stage)
    baseline = profiler.profile(kernel, kernel.hook_source, size) if attempt.accepted else None
    return Applied(entry=entry, source=source, notes=notes, attempt=attempt, baseline=baseline)


def write_patched(kernel: KernelFile, applied: Applied, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(kernel.with_hook(applied.source))
    return out
