"""Compact traces: each event as runs of consecutive lines, written to disk as capture goes.

A tile load touches a block of consecutive lines with the same sectors, so an event is stored as
runs (start line, length, sector mask) instead of one record per line: an attention K tile of
128 lines is one 13-byte run instead of 128 x 21 bytes. A run breaks where the next line is not
the next address or its sector mask differs, so partial tiles keep their exact masks.

On disk a trace is one file: a JSON header, then six columns (run starts, lengths, masks; runs
per event, store flag and site per event), then a per-program index and the merged line intervals. The
columns are appended batch by batch while capture runs (`RunWriter`), so capture holds one batch,
not the trace; `RunFile` reads any set of programs back (the simulator's chunks).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

from swizzleperf.errors import TraceCaptureError

MAGIC = b"SWZRUNS2"  # 2: the site column
HEADER_BYTES = 4096
COLUMNS = (("starts", np.int64), ("lens", np.int32), ("masks", np.uint8), ("ev_runs", np.int32),
           ("ev_store", np.uint8), ("ev_site", np.int32))
INDEX = ("run_lo", "nruns", "ev_lo", "nev", "accesses")  # int64 per program (launch id)


@numba.njit(cache=True, nogil=True)
def _encode(lines, masks, ev_off, starts, lens, rmasks, ev_runs):
    """Split each event's lines into runs of consecutive lines with one mask; returns the run count."""
    r = 0
    for e in range(ev_off.shape[0] - 1):
        first = r
        for k in range(ev_off[e], ev_off[e + 1]):
            if r > first and lines[k] == starts[r - 1] + lens[r - 1] and masks[k] == rmasks[r - 1]:
                lens[r - 1] += 1
            else:
                starts[r], lens[r], rmasks[r] = lines[k], 1, masks[k]
                r += 1
        ev_runs[e] = r - first
    return r


def encode_runs(lines: np.ndarray, masks: np.ndarray, event_offsets: np.ndarray):
    """(starts int64, lens int32, masks uint8, runs per event int32) of program-major line arrays."""
    n = lines.shape[0]
    starts, lens, rmasks = np.empty(n, np.int64), np.empty(n, np.int32), np.empty(n, np.uint8)
    ev_runs = np.empty(event_offsets.shape[0] - 1, np.int32)
    r = _encode(np.ascontiguousarray(lines, np.int64), np.ascontiguousarray(masks, np.uint8),
                np.ascontiguousarray(event_offsets, np.int64), starts, lens, rmasks, ev_runs)
    return starts[:r].copy(), lens[:r].copy(), rmasks[:r].copy(), ev_runs


@numba.njit(cache=True, nogil=True)
def expand_runs(starts, lens):
    """The lines of runs, one per line (for small traces and checks)."""
    out = np.empty(lens.astype(np.int64).sum(), np.int64)
    k = 0
    for r in range(starts.shape[0]):
        for j in range(lens[r]):
            out[k] = starts[r] + j
            k += 1
    return out


def merge_intervals(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of half-open intervals [lo, hi), as sorted disjoint, non-touching intervals."""
    if not lo.size:
        return lo.astype(np.int64), hi.astype(np.int64)
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], np.maximum.accumulate(hi[order])
    new = np.concatenate([[True], lo[1:] > hi[:-1]])
    starts = np.flatnonzero(new)
    ends = np.concatenate([starts[1:], [lo.shape[0]]]) - 1
    return lo[starts].astype(np.int64), hi[ends].astype(np.int64)


class Intervals:
    """The lines a trace touches as merged intervals, built incrementally; dense ids by rank."""

    def __init__(self):
        self.lo, self.hi = np.empty(0, np.int64), np.empty(0, np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_n = 0

    def add(self, starts: np.ndarray, lens: np.ndarray) -> None:
        self._pending.append(merge_intervals(starts, starts + lens))
        self._pending_n += self._pending[-1][0].shape[0]
        if self._pending_n > 1 << 20:
            self.flush()

    def flush(self) -> None:
        parts = [(self.lo, self.hi), *self._pending]
        self.lo, self.hi = merge_intervals(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
        self._pending, self._pending_n = [], 0


def line_ids(lo: np.ndarray, base: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Dense id of each line `starts` (ids number every touched line in address order)."""
    idx = np.searchsorted(lo, starts, side="right") - 1
    return base[idx] + (starts - lo[idx])


class RunWriter:
    """Appends batches of programs' runs to column files, then joins them into one trace file."""

    def __init__(self, path: Path, num_programs: int, line_bytes: int, sector_bytes: int | None):
        self.path = Path(path)
        self.meta = {"num_programs": num_programs, "line_bytes": line_bytes, "sector_bytes": sector_bytes}
        self.parts = {name: open(f"{self.path}.{name}.part", "wb") for name, _ in COLUMNS}
        self.written = dict.fromkeys(self.parts, 0)
        self.index = {k: np.full(num_programs, -1 if k in ("run_lo", "ev_lo") else 0, np.int64) for k in INDEX}
        self.intervals = Intervals()

    def add(self, programs: np.ndarray, lines: np.ndarray, masks: np.ndarray, ev_sizes: np.ndarray,
            ev_store: np.ndarray, prog_nev: np.ndarray, ev_site: np.ndarray) -> None:
        """Programs' non-empty events, program-major: `ev_sizes` lines each, `prog_nev` events per program."""
        ev_off = np.concatenate([[0], np.cumsum(ev_sizes)]).astype(np.int64)
        starts, lens, rmasks, ev_runs = encode_runs(lines, masks, ev_off)
        first_ev = np.concatenate([[0], np.cumsum(prog_nev)]).astype(np.int64)
        run_cum = np.concatenate([[0], np.cumsum(ev_runs, dtype=np.int64)])
        idx = self.index
        idx["run_lo"][programs] = self.written["starts"] + run_cum[first_ev[:-1]]
        idx["nruns"][programs] = np.diff(run_cum[first_ev])
        idx["ev_lo"][programs] = self.written["ev_runs"] + first_ev[:-1]
        idx["nev"][programs] = prog_nev
        idx["accesses"][programs] = np.diff(ev_off[first_ev])
        for name, values in (("starts", starts), ("lens", lens), ("masks", rmasks), ("ev_runs", ev_runs),
                             ("ev_store", ev_store.astype(np.uint8)), ("ev_site", ev_site.astype(np.int32))):
            self.parts[name].write(np.ascontiguousarray(values).tobytes())
            self.written[name] += values.shape[0]
        self.intervals.add(starts, lens.astype(np.int64))

    def finish(self) -> Path:
        """Write the trace file (header, columns, index, intervals) and remove the parts."""
        if np.any(self.index["run_lo"] < 0):
            raise TraceCaptureError("internal: the trace's batches do not cover every program")
        self.intervals.flush()
        tail = {**{k: self.index[k] for k in INDEX}, "iv_lo": self.intervals.lo, "iv_hi": self.intervals.hi}
        layout, offset = {}, HEADER_BYTES
        for name, dtype in COLUMNS:
            layout[name] = (offset, self.written[name], np.dtype(dtype).str)
            offset += self.written[name] * np.dtype(dtype).itemsize
        for name, values in tail.items():
            layout[name] = (offset, values.shape[0], values.dtype.str)
            offset += values.nbytes
        header = json.dumps({**self.meta, "layout": layout, "num_accesses": int(self.index["accesses"].sum()),
                             "num_events": self.written["ev_runs"], "num_runs": self.written["starts"]}).encode()
        if len(header) + len(MAGIC) > HEADER_BYTES:
            raise TraceCaptureError("internal: trace header too long")
        with open(self.path, "wb") as out:
            out.write(MAGIC + header.ljust(HEADER_BYTES - len(MAGIC)))
            for name, _ in COLUMNS:
                self.parts[name].close()
                with open(f"{self.path}.{name}.part", "rb") as part:
                    shutil.copyfileobj(part, out, 16 << 20)
                os.unlink(f"{self.path}.{name}.part")
            for values in tail.values():
                out.write(np.ascontiguousarray(values).tobytes())
        return self.path

    def abort(self) -> None:
        for name, f in self.parts.items():
            f.close()
            Path(f"{self.path}.{name}.part").unlink(missing_ok=True)


@dataclass(frozen=True)
class Gathered:
    """Some programs' events, back to back in the order asked: what one replay chunk holds."""

    starts: np.ndarray  # int64[R]
    lens: np.ndarray  # int32[R]
    masks: np.ndarray  # uint8[R]
    ev_off: np.ndarray  # int64[E + 1]: event e = runs ev_off[e]:ev_off[e+1]
    ev_store: np.ndarray  # bool[E]
    ev_site: np.ndarray  # int32[E]
    prog_lo: np.ndarray  # int64[Q]: program i = events prog_lo[i]:prog_hi[i]
    prog_hi: np.ndarray


_DTYPES = {np.dtype(t).str for _, t in COLUMNS} | {np.dtype(np.int64).str}


def _checked_header(header, file_bytes: int) -> dict:
    """The header of a trace read back from disk (untrusted: the cache is anyone's directory): every
    column inside the file, of a dtype the writer uses; ValueError saying what is wrong."""
    if not isinstance(header, dict) or not isinstance(header.get("layout"), dict):
        raise ValueError("its header is not a trace header")
    for name in ("line_bytes", "num_programs", "num_events", "num_accesses"):
        if type(header.get(name)) is not int or header[name] < 0:
            raise ValueError(f"its header's {name} is not a count")
    sector = header.get("sector_bytes")
    for size in (header["line_bytes"], sector or header["line_bytes"]):
        if not 0 < size <= 1024 or size & (size - 1):
            raise ValueError(f"its header's line or sector size {size} is not a power of two up to 1024")
    for name in (*(c for c, _ in COLUMNS), *INDEX, "iv_lo", "iv_hi"):
        entry = header["layout"].get(name)
        if (not isinstance(entry, list) or len(entry) != 3 or type(entry[0]) is not int or type(entry[1]) is not int
                or entry[2] not in _DTYPES or entry[0] < HEADER_BYTES or entry[1] < 0
                or entry[0] + entry[1] * np.dtype(entry[2]).itemsize > file_bytes):
            raise ValueError(f"its column {name} does not lie inside the file")
    if any(header["layout"][k][1] != header["num_programs"] for k in INDEX):
        raise ValueError("its per-program index does not have one entry per program")
    return header


def _check_index(index: dict, layout: dict) -> None:
    """Every program's runs and events inside their columns."""
    for lo, n, column in (("run_lo", "nruns", "starts"), ("ev_lo", "nev", "ev_runs")):
        if index[lo].size and (index[lo].min() < 0 or index[n].min() < 0
                               or (index[lo] + index[n]).max() > layout[column][1]):
            raise ValueError(f"its index points outside the {column} column")


class RunFile:
    """A trace file, open for reading programs (the index and intervals stay in memory)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self._f = open(self.path, "rb")  # kept open: the data stays readable if the file is replaced
            head = self._f.read(HEADER_BYTES)
            if head[:len(MAGIC)] != MAGIC:
                raise ValueError("not a swizzleperf run trace")
            self.header = _checked_header(json.loads(head[len(MAGIC):].rstrip(b" \0")), os.fstat(self._f.fileno()).st_size)
            self.index = {k: self._read(k, 0, self.header["layout"][k][1]) for k in (*INDEX, "iv_lo", "iv_hi")}
            _check_index(self.index, self.header["layout"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TraceCaptureError(f"cannot read trace {path}: {exc}; delete it to capture again") from None
        lengths = self.index["iv_hi"] - self.index["iv_lo"]
        self.iv_base = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        self.unique_lines = int(lengths.sum())

    def _read(self, name: str, lo: int, count: int, out: np.ndarray | None = None) -> np.ndarray:
        offset, _, dtype = self.header["layout"][name]
        dtype = np.dtype(dtype)
        out = np.empty(count, dtype) if out is None else out
        got = os.preadv(self._f.fileno(), [memoryview(out).cast("B")], offset + lo * dtype.itemsize) if count else 0
        if got != count * dtype.itemsize:
            raise TraceCaptureError(f"trace {self.path} is truncated; delete it to capture again")
        return out

    def _gather_column(self, name: str, lo: np.ndarray, n: np.ndarray, dtype) -> np.ndarray:
        """Concatenate column slices [lo[i], lo[i]+n[i]); adjacent slices are read as one."""
        out = np.empty(int(n.sum()), dtype)
        if not n.size:
            return out
        breaks = np.flatnonzero(lo[1:] != lo[:-1] + n[:-1]) + 1
        first = np.concatenate([[0], breaks])
        last = np.concatenate([breaks, [lo.shape[0]]])
        pos = np.concatenate([[0], np.cumsum(n)])
        for a, b in zip(first, last):
            self._read(name, int(lo[a]), int(pos[b] - pos[a]), out[pos[a]:pos[b]])
        return out

    def gather(self, programs: np.ndarray) -> Gathered:
        ix = {k: self.index[k][programs] for k in ("run_lo", "nruns", "ev_lo", "nev")}
        ev_runs = self._gather_column("ev_runs", ix["ev_lo"], ix["nev"], np.int32)
        ev_off = np.concatenate([[0], np.cumsum(ev_runs, dtype=np.int64)])
        prog_ev = np.concatenate([[0], np.cumsum(ix["nev"])]).astype(np.int64)
        return Gathered(starts=self._gather_column("starts", ix["run_lo"], ix["nruns"], np.int64),
                        lens=self._gather_column("lens", ix["run_lo"], ix["nruns"], np.int32),
                        masks=self._gather_column("masks", ix["run_lo"], ix["nruns"], np.uint8),
                        ev_off=ev_off,
                        ev_store=self._gather_column("ev_store", ix["ev_lo"], ix["nev"], np.uint8).view(np.bool_),
                        ev_site=self._gather_column("ev_site", ix["ev_lo"], ix["nev"], np.int32),
                        prog_lo=prog_ev[:-1], prog_hi=prog_ev[1:])

    def close(self) -> None:
        self._f.close()
