"""The simulator as a profiler: capture the kernel's trace once, then replay it per remap.

A remap never changes what a logical program accesses, only which launch slot (and so which
die, and when) runs it. So a trace captured under the kernel's original hook is permuted, not
re-captured: slot w runs logical program candidate(w), which was captured as the program the
original hook mapped to that logical id.

Two kinds of candidate change what a program loads, and are captured each on its own (in a child,
from a copy of the kernel with the candidate in place): any remap of a persistent kernel (its
programs call the hook in their loop) and any loop-order hook (it reorders a program's loads).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from swizzleperf.errors import TraceCaptureError
from swizzleperf.hardware import occupancy
from swizzleperf.hardware.spec import HardwareSpec, hook_constants
from swizzleperf.kernel import user_errors
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.records.report import BottleneckReport
from swizzleperf.remaps.placement import partition_sentence
from swizzleperf.sim.capture.trace_capture import capture_trace
from swizzleperf.sim.engine import prepare, simulate
from swizzleperf.sim.settings import sim_memory_bytes
from swizzleperf.sim.trace.cache import default_cache_dir
from swizzleperf.sim.trace.record import Trace
from swizzleperf.sim.trace.stored import StoredTrace
from swizzleperf.validation.bijectivity import logical_ids

if TYPE_CHECKING:
    from swizzleperf.sim.bounds.achievable import Achievable


ONE_L2_NOTE = "achievable = ceiling: one shared L2, so every assignment of programs shares it"


def schedule_balance(trace: Trace | StoredTrace) -> tuple[int, str]:
    """A persistent kernel's static schedule: the busiest program's loads and stores, and a note.

    Each resident program runs its own tiles, so the kernel ends with its busiest program; a remap
    that deals the long tiles (causal attention's late q blocks) to a few programs is slower though
    its L2 hit rate is higher, which the ranking must see (history.measurably_slower)."""
    events = trace.events_per_program()
    busiest, mean = int(events.max()), float(events.mean())
    return busiest, (f"static schedule: the busiest of the {events.size} programs issues {busiest:,} loads and stores, "
                     f"the mean {mean:,.0f} ({busiest / mean:.2f}x); the kernel takes as long as its busiest program")


class SimProfiler:
    name = "sim"
    measures = False
    run_to_run_pts = 0.0

    def __init__(self, hw: HardwareSpec, cache_dir: Path | None = None,
                 progress: Callable[[int, int], None] | None = None, gpu_occupancy: bool = True):
        self.hw = hw
        self.cache_dir = cache_dir
        self.progress = progress
        self.gpu_occupancy = gpu_occupancy  # False: never compile on a local GPU (e.g. occupancy already measured)
        self._occupancy: dict[tuple[str, str], tuple[HardwareSpec, str]] = {}
        self._traces: dict[tuple[str, str], Trace] = {}
        self._captured_as: dict[tuple[str, str], np.ndarray] = {}
        self._achievable: dict[tuple[str, str], tuple[float | None, str]] = {}
        self._bound_found: dict[tuple[str, str], Achievable] = {}  # where a multi-die assignment exists

    def __getstate__(self) -> dict:
        """For an executor's workers: everything computed so far (the trace, the achievable bound), not
        the progress display, which belongs to this process."""
        return {**self.__dict__, "progress": None}

    def trace(self, kernel: KernelFile, size: str) -> Trace | StoredTrace:
        """The kernel's trace: expanded in memory where that fits the simulator's memory setting (faster
        for many remaps), else left on disk and replayed in chunks (the same counts either way)."""
        key = (kernel.sha256, size)
        if key not in self._traces:
            try:
                stored = capture_trace(kernel, size, line_bytes=self.hw.line_bytes, cache_dir=self.cache_dir,
                                       progress=self.progress)
                self._traces[key] = stored.expanded if stored.expanded_bytes <= sim_memory_bytes() else stored
            except TraceCaptureError as exc:  # the kernel file's own code, printed as a traceback: one line
                short = user_errors.from_traceback_text(str(exc), kernel.path, size, "capturing the trace")
                if short is None:
                    raise
                raise user_errors.UserCodeError(short) from exc
        return self._traces[key]

    def logical_of_slot(self, kernel: KernelFile, remap_source: str, size: str) -> np.ndarray:
        """Per launch slot, the logical program (C-order linear index) the remap sends it."""
        return logical_ids(kernel.remap_of(remap_source), kernel.hook, kernel.grid(size),
                           hook_constants(kernel, self.hw))

    def captured_program(self, kernel: KernelFile, size: str) -> np.ndarray:
        """Per logical program, the index of the trace program that ran it (the original hook's launch slot)."""
        key = (kernel.sha256, size)
        if key not in self._captured_as:
            original = self.logical_of_slot(kernel, kernel.hook_source, size)
            captured = np.empty_like(original)
            captured[original] = np.arange(original.size)
            self._captured_as[key] = captured
        return self._captured_as[key]

    def program_for_slot(self, kernel: KernelFile, remap_source: str, size: str) -> np.ndarray:
        return self.captured_program(kernel, size)[self.logical_of_slot(kernel, remap_source, size)]

    def profile(self, kernel: KernelFile, remap_source: str, size: str) -> BottleneckReport:
        if kernel.persistent or kernel.parts(remap_source).loop_order is not None:
            return self._profile_captured(kernel, remap_source, size)
        trace = self.trace(kernel, size)
        hw, occupancy_note = self.kernel_hardware(kernel, size)
        report = simulate(trace, self.program_for_slot(kernel, remap_source, size), hw).to_report(kernel.name, size, hw)
        report.notes.append(occupancy_note)
        report.achievable_pct, note = self.achievable(kernel, size, report.ceiling_pct)
        report.notes.append(note)
        part = self.achievable_assignment(kernel, size)
        if part is not None:
            report.achievable_fetches = self._bound_found[(kernel.sha256, size)].fetches
            report.achievable_grouping = partition_sentence(part, kernel.grid(size), self.hw.num_domains)
        return report

    def candidate_kernel(self, kernel: KernelFile, remap_source: str) -> KernelFile:
        """The kernel with candidate `remap_source` in place, as a file of its own under the trace cache
        (the kernel itself for its own remap and loop order).

        Its trace is captured in a child from this copy (the candidate is never imported here). The
        copy is what the kernel file contract already asks for: self-contained."""
        source = kernel.with_hook(remap_source)
        if source == kernel.source:
            return kernel
        candidate = dataclasses.replace(kernel, source=source)
        copies = (self.cache_dir or default_cache_dir()) / "persistent-candidates"
        path = copies / candidate.sha256[:16] / kernel.path.name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(candidate.source)
        return dataclasses.replace(candidate, path=path)

    def _profile_captured(self, kernel: KernelFile, remap_source: str, size: str) -> BottleneckReport:
        """Capture the kernel with this candidate in place and replay its programs in launch order."""
        candidate = self.candidate_kernel(kernel, remap_source)
        trace = self.trace(candidate, size)
        if candidate is not kernel:  # one trace per candidate: keep the disk copy, not the memory
            self._traces.pop((candidate.sha256, size), None)
        hw, occupancy_note = self.kernel_hardware(kernel, size)
        report = simulate(trace, np.arange(trace.num_programs), hw).to_report(kernel.name, size, hw)
        what = (f"persistent kernel: {trace.num_programs} programs, each on one CU for all its tiles"
                if kernel.persistent else f"{trace.num_programs} programs")
        report.notes += [occupancy_note, f"{what}; captured with this candidate in place (its loop order too, if it "
                                         f"has one)"]
        if kernel.persistent:
            report.busiest_program_events, note = schedule_balance(trace)
            report.notes.append(note)
        if self.hw.num_domains == 1:
            report.achievable_pct = report.ceiling_pct
            report.notes.append(ONE_L2_NOTE)
        else:
            report.notes.append("achievable bound n/a for a candidate captured on its own: the partition assigns "
                                "whole programs to dies, and here the candidate decides what a program loads")
        return report

    def kernel_hardware(self, kernel: KernelFile, size: str) -> tuple[HardwareSpec, str]:
        """The hardware as this kernel runs on it (occupancy and L1: swizzleperf.hardware.occupancy), once per size.
        Occupancy decides which programs share the caches at once: FA2 at D = 128 fills an SM with one
        program, and simulated at the preset's 2 it would run two Q blocks side by side."""
        key = (kernel.sha256, size)
        if key not in self._occupancy:
            self._occupancy[key] = occupancy.resolve(kernel, size, self.hw, use_gpu=self.gpu_occupancy)
        return self._occupancy[key]

    def achievable(self, kernel: KernelFile, size: str, ceiling_pct: float | None) -> tuple[float | None, str]:
        """The multi-die achievable bound for this kernel and size (once per trace) and a note saying what it is."""
        key = (kernel.sha256, size)
        if key not in self._achievable:
            pct, note, found = self._compute_achievable(kernel, size, ceiling_pct)
            self._achievable[key] = pct, note
            if found is not None:
                self._bound_found[key] = found
        return self._achievable[key]

    def achievable_assignment(self, kernel: KernelFile, size: str) -> np.ndarray | None:
        """The die of each logical program in the achievable bound's assignment, as found by `achievable`
        (never computed here: it costs a partitioner run); None before that, on one L2, or where n/a."""
        found = self._bound_found.get((kernel.sha256, size))
        # the partitioner's vertices are trace programs; a logical program is the one its captured program ran
        return None if found is None else found.part[self.captured_program(kernel, size)]

    def _compute_achievable(self, kernel: KernelFile, size: str,
                            ceiling_pct: float | None) -> tuple[float | None, str, Achievable | None]:
        if self.hw.num_domains == 1:
            return ceiling_pct, ONE_L2_NOTE, None
        from swizzleperf.sim.bounds.achievable import achievable_bound
        from swizzleperf.sim.bounds.partition import PartitionerMissing

        trace = self.trace(kernel, size)
        if isinstance(trace, StoredTrace):
            return None, (f"achievable bound n/a: the trace ({trace.num_accesses / 1e6:,.0f} M line accesses) is "
                          f"replayed from disk; the partitioner needs it in memory (SWIZZLEPERF_SIM_MEMORY_MB)"), None
        try:
            found = achievable_bound(prepare(trace), self.hw)
        except PartitionerMissing as exc:
            return None, f"achievable bound n/a: {exc}", None
        note = (f"achievable = the read hit rate of the best balanced assignment of programs to the "
                f"{self.hw.num_domains} dies found ({found.how}), with caches big enough that only "
                f"first touches miss: {found.fetches:,} fetches vs {found.min_fetches:,} on one cache")
        return found.hit_pct, note, found
