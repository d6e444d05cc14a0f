"""The memory trace of one kernel launch: per program, the cache lines each load and store touches.

This is the simulator's input. Programs are indexed by launch program id (x + y*nx + z*nx*ny)
under the kernel's original remap hook; a candidate remap only permutes which launch slot runs
which program, so one trace serves every candidate.

Addresses live in a stable virtual layout (see `layout.py`): every tensor argument of the launch
gets its own aligned base, so a trace is identical across runs and processes. An *event* is one
load or store instruction of one program; it holds the distinct lines its active lanes touch,
sorted, and for each line a bit mask of the sectors touched (bit i: bytes [i*S, (i+1)*S) of the
line for sectors of S bytes), and the instruction's site (sites.py: which load or store of the
kernel's source it is, so a loop's iterations can be told apart). Events with no active lane are
not recorded; an atomic read-modify-write is one store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from swizzleperf.errors import TraceCaptureError
from swizzleperf.untrusted import readback

TRACE_FORMAT_VERSION = 3  # 3: each event's site


@dataclass(frozen=True)
class ProgramTrace:
    """A view of one program's events; `event_offsets` start at 0."""

    lines: np.ndarray
    is_store: np.ndarray
    event_offsets: np.ndarray
    sectors: np.ndarray | None = None  # as Trace.sectors
    sites: np.ndarray | None = None  # as Trace.sites

    @property
    def num_events(self) -> int:
        return len(self.event_offsets) - 1

    def event(self, e: int) -> tuple[np.ndarray, bool]:
        """The distinct sorted lines of event `e` and whether it is a store."""
        lo, hi = self.event_offsets[e], self.event_offsets[e + 1]
        return self.lines[lo:hi], bool(self.is_store[lo])


@dataclass(frozen=True, eq=False)
class Trace:
    lines: np.ndarray            # int64 [n_accesses]: virtual byte address // line_bytes
    is_store: np.ndarray         # bool [n_accesses]
    event_offsets: np.ndarray    # int64 [n_events + 1]: event e = lines[event_offsets[e]:event_offsets[e+1]]
    program_offsets: np.ndarray  # int64 [n_programs + 1]: program p owns events program_offsets[p]..[p+1]-1
    line_bytes: int
    sectors: np.ndarray | None = None  # uint8 [n_accesses]: sectors of the line touched; None: the whole line
    sector_bytes: int | None = None    # None: one sector per line
    sites: np.ndarray | None = None    # int32 [n_events]: each event's instruction (sites.py); None: unknown

    def __post_init__(self):
        n_acc, n_ev = len(self.lines), len(self.event_offsets) - 1
        if (self.sectors is None) != (self.sector_bytes is None) or (
                self.sectors is not None and len(self.sectors) != n_acc):
            raise TraceCaptureError("inconsistent trace arrays: sector masks need a sector size and one mask per line")
        if self.sites is not None and len(self.sites) != n_ev:
            raise TraceCaptureError(f"inconsistent trace arrays: {len(self.sites)} sites for {n_ev} events")
        if (len(self.is_store) != n_acc or n_ev < 0 or len(self.program_offsets) < 1
                or self.event_offsets[0] != 0 or self.event_offsets[-1] != n_acc
                or self.program_offsets[0] != 0 or self.program_offsets[-1] != n_ev):
            raise TraceCaptureError(
                f"inconsistent trace arrays: {n_acc} lines, {len(self.is_store)} store flags, "
                f"event_offsets {self.event_offsets[:1]}..{self.event_offsets[-1:]}, "
                f"program_offsets {self.program_offsets[:1]}..{self.program_offsets[-1:]}")

    @property
    def num_programs(self) -> int:
        return len(self.program_offsets) - 1

    @property
    def num_events(self) -> int:
        return len(self.event_offsets) - 1

    @property
    def num_accesses(self) -> int:
        return len(self.lines)

    def unique_lines(self) -> np.ndarray:
        """Every line the launch touches, once, sorted (its size is the compulsory-miss count)."""
        return np.unique(self.lines)

    def program(self, p: int) -> ProgramTrace:
        e0, e1 = self.program_offsets[p], self.program_offsets[p + 1]
        offsets = self.event_offsets[e0:e1 + 1]
        lo, hi = offsets[0], offsets[-1]
        sectors = None if self.sectors is None else self.sectors[lo:hi]
        sites = None if self.sites is None else self.sites[e0:e1]
        return ProgramTrace(self.lines[lo:hi], self.is_store[lo:hi], offsets - lo, sectors, sites)

    def accesses_per_program(self) -> np.ndarray:
        return np.diff(self.event_offsets[self.program_offsets])

    def events_per_program(self) -> np.ndarray:
        """Load and store instructions per program (an event is one)."""
        return np.diff(self.program_offsets)

    @property
    def sectors_per_line(self) -> int:
        return self.line_bytes // (self.sector_bytes or self.line_bytes)

    def sector_masks(self) -> np.ndarray:
        """uint8 [n_accesses]: the sector mask of every access (all sectors where none were recorded)."""
        if self.sectors is not None:
            return self.sectors
        return np.full(self.num_accesses, (1 << self.sectors_per_line) - 1, dtype=np.uint8)

    def equals(self, other: Trace) -> bool:
        return (self.line_bytes == other.line_bytes and self.sector_bytes == other.sector_bytes
                and all(np.array_equal(getattr(self, f), getattr(other, f))
                        for f in ("lines", "is_store", "event_offsets", "program_offsets"))
                and all((a is None) == (b is None) and (a is None or np.array_equal(a, b))
                        for a, b in ((self.sectors, other.sectors), (self.sites, other.sites))))

    def save(self, path: Path, meta: TraceMeta) -> None:
        """Write `path` (.npz) and its metadata beside it (.json)."""
        path = Path(path)
        optional = {} if self.sectors is None else {"sectors": self.sectors,
                                                    "sector_bytes": np.int64(self.sector_bytes)}
        optional |= {} if self.sites is None else {"sites": self.sites}
        with open(path, "wb") as f:
            np.savez(f, lines=self.lines, is_store=self.is_store, event_offsets=self.event_offsets,
                     program_offsets=self.program_offsets, line_bytes=np.int64(self.line_bytes), **optional)
        meta_path(path).write_text(meta.model_dump_json(indent=1))

    @classmethod
    def load(cls, path: Path) -> Trace:
        try:
            with np.load(Path(path), allow_pickle=False) as z:
                sectored = "sectors" in z.files
                return cls(lines=z["lines"], is_store=z["is_store"], event_offsets=z["event_offsets"],
                           program_offsets=z["program_offsets"], line_bytes=int(z["line_bytes"]),
                           sectors=z["sectors"] if sectored else None,
                           sector_bytes=int(z["sector_bytes"]) if sectored else None,
                           sites=z["sites"] if "sites" in z.files else None)
        except (OSError, KeyError, ValueError) as exc:
            raise TraceCaptureError(f"cannot read trace {path}: {exc}; delete it to capture again") from exc


class TraceMeta(BaseModel):
    """What a trace was captured from and how; written beside every saved trace."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = TRACE_FORMAT_VERSION
    kernel: str
    kernel_sha256: str
    size_name: str
    size: dict[str, int]
    grid: tuple[int, ...]                 # the hook's grid extents (kernel.grid(size))
    launch_grid: tuple[int, int, int]     # the Triton launch grid (x, y, z)
    line_bytes: int
    sector_bytes: int | None = None       # granularity of the sector masks (None: whole lines)
    mode: str                             # "fast" or "reference": how the trace was actually recorded
    requested_mode: str
    fallback_reason: str | None = None    # why fast mode handed over to reference mode
    num_programs: int
    num_events: int
    num_accesses: int
    batches: int = 0                      # fast mode: kernel bodies run (one per batch of programs)
    verified_programs: list[int] = []     # fast mode: programs re-run in reference mode and compared
    seconds: float                        # whole capture, including setup
    setup_seconds: float = 0.0            # of which make_inputs and make_outputs
    versions: dict[str, str]
    cache_key: str = ""

    @classmethod
    def read(cls, trace_path: Path) -> TraceMeta:
        """The metadata beside a trace, read back as untrusted input (untrusted.readback)."""
        try:
            return readback.read_model(meta_path(Path(trace_path)), cls, "the trace metadata")
        except readback.StoredFileError as exc:
            raise TraceCaptureError(f"{exc}; delete it to capture again") from None


def meta_path(trace_path: Path) -> Path:
    return Path(trace_path).with_suffix(".json")
