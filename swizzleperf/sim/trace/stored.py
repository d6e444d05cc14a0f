"""A trace kept on disk in compact form (line_runs.py), usable wherever a `Trace` is.

`StoredTrace` answers the questions a profiler asks (sizes, one program's events) from the file,
and expands itself into an in-memory `Trace` only when something reads the per-line arrays (tests,
small traces). `prepare` turns it into a `StoredPrepared`, which the simulator replays in chunks
without ever expanding it.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np

from swizzleperf.sim.trace.line_runs import RunFile, RunWriter, expand_runs
from swizzleperf.sim.trace.record import ProgramTrace, Trace

EXPANDED_BYTES = 22  # an in-memory Trace plus its PreparedTrace line ids, per line access


def write_trace(trace: Trace, path: Path) -> Path:
    """Write an in-memory trace as a run file (launch order)."""
    writer = RunWriter(path, trace.num_programs, trace.line_bytes, trace.sector_bytes)
    try:
        sizes = np.diff(trace.event_offsets)
        store = np.zeros(sizes.shape[0], np.bool_)
        store[sizes > 0] = trace.is_store[trace.event_offsets[:-1][sizes > 0]]
        sites = np.zeros(sizes.shape[0], np.int32) if trace.sites is None else trace.sites
        writer.meta["has_sites"] = trace.sites is not None
        writer.add(np.arange(trace.num_programs), trace.lines, trace.sector_masks(), sizes, store,
                   np.diff(trace.program_offsets), sites)
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


class StoredTrace:
    """A run file seen as a trace: launch-ordered programs, their events and lines."""

    def __init__(self, path: Path):
        self.file = RunFile(path)
        header = self.file.header
        self.path = Path(path)
        self.line_bytes = int(header["line_bytes"])
        self.sector_bytes = header["sector_bytes"]
        self.num_programs = int(header["num_programs"])
        self.num_events = int(header["num_events"])
        self.num_accesses = int(header["num_accesses"])
        self.has_sites = bool(header.get("has_sites", True))

    def __reduce__(self):
        """Pickled by path (an executor's worker reopens the file; the open handle cannot travel)."""
        return (StoredTrace, (self.path,))

    @property
    def sectors_per_line(self) -> int:
        return self.line_bytes // (self.sector_bytes or self.line_bytes)

    @property
    def expanded_bytes(self) -> int:
        return self.num_accesses * EXPANDED_BYTES

    def program(self, p: int) -> ProgramTrace:
        return self._expand(np.array([p])).program(0)

    def _expand(self, programs: np.ndarray) -> Trace:
        g = self.file.gather(programs)
        lens = g.lens.astype(np.int64)
        run_cum = np.concatenate([[0], np.cumsum(lens)])
        ev_lines = run_cum[g.ev_off[1:]] - run_cum[g.ev_off[:-1]]
        masks = np.repeat(g.masks, lens)
        return Trace(lines=expand_runs(g.starts, g.lens), is_store=np.repeat(g.ev_store, ev_lines),
                     event_offsets=np.concatenate([[0], np.cumsum(ev_lines)]).astype(np.int64),
                     program_offsets=np.concatenate([g.prog_lo[:1], g.prog_hi]).astype(np.int64),
                     line_bytes=self.line_bytes, sectors=masks if self.sector_bytes else None,
                     sector_bytes=self.sector_bytes, sites=g.ev_site if self.has_sites else None)

    @cached_property
    def expanded(self) -> Trace:
        """The whole trace in memory (~22 bytes per line access: for small traces only)."""
        return self._expand(np.arange(self.num_programs))

    # the Trace interface, through the expanded trace
    lines = property(lambda self: self.expanded.lines)
    is_store = property(lambda self: self.expanded.is_store)
    event_offsets = property(lambda self: self.expanded.event_offsets)
    program_offsets = property(lambda self: self.expanded.program_offsets)
    sectors = property(lambda self: self.expanded.sectors)
    sites = property(lambda self: self.expanded.sites)

    def accesses_per_program(self) -> np.ndarray:
        return self.file.index["accesses"].copy()

    def events_per_program(self) -> np.ndarray:
        return self.file.index["nev"].astype(np.int64)

    def sector_masks(self) -> np.ndarray:
        return self.expanded.sector_masks()

    def unique_lines(self) -> np.ndarray:
        return self.expanded.unique_lines()

    def equals(self, other) -> bool:
        return self.expanded.equals(other if isinstance(other, Trace) else other.expanded)

    def stream_prepared(self) -> "StoredPrepared":
        """What `prepare` returns for a stored trace (remembered: bounds are computed once)."""
        if not hasattr(self, "_prepared"):
            self._prepared = StoredPrepared(self)
        return self._prepared


class StoredPrepared:
    """A stored trace made ready for `simulate`: replayed from its file, bounds computed in one pass."""

    def __init__(self, trace: StoredTrace):
        self.trace = trace
        self.num_programs, self.line_bytes = trace.num_programs, trace.line_bytes
        self.accesses, self.unique_lines = trace.num_accesses, trace.file.unique_lines
        self._sources: dict[int, object] = {}
        self._bounds: dict[int, object] = {}

    def run_source(self, budget: int):
        from swizzleperf.sim.chunks import FileRuns

        if budget not in self._sources:
            self._sources[budget] = FileRuns(self.trace.file, self.trace.sectors_per_line, budget)
        return self._sources[budget]

    def bounds(self, sectors_per_line: int):
        from swizzleperf.sim import settings
        from swizzleperf.sim.chunks import streamed_bounds

        if sectors_per_line not in self._bounds:
            budget = settings.sim_memory_bytes()
            self._bounds[sectors_per_line] = streamed_bounds(self.run_source(budget), sectors_per_line, budget)
        return self._bounds[sectors_per_line]
