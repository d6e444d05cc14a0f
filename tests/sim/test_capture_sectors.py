"""Sector masks recorded natively equal sectors captured as lines and grouped afterwards.

Capture used to record 32-byte sectors as if they were lines and group them into 128-byte lines
with masks in a second pass; it now records each line's mask as it extracts lines. Capturing at
`line_bytes=SECTOR_BYTES` still yields the sector-level trace, so the old path stays checkable:
group it here, in plain numpy, and compare. Kernels run on the interpreter in a child process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from swizzleperf.sim.capture.trace_capture import SECTOR_BYTES
from swizzleperf.sim.trace.record import Trace, TraceMeta

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ["softmax", "gemm", "transpose", "smithwaterman"]  # smithwaterman: columns out of address order

CHILD = r'''
import sys
from pathlib import Path
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.sim.capture.trace_capture import SECTOR_BYTES, record_trace

out = Path(sys.argv[1])
for path in sys.argv[2:]:
    for line_bytes in (128, SECTOR_BYTES):
        trace, meta = record_trace(load_kernel(path), "small", line_bytes=line_bytes)
        trace.save(out / f"{Path(path).stem}.{line_bytes}.npz", meta)
'''


def group_sectors(fine: Trace, line_bytes: int) -> Trace:
    """A trace of sector-sized lines as `line_bytes` lines with sector masks (the replaced pass)."""
    per_line = line_bytes // fine.line_bytes
    lines = fine.lines >> (per_line.bit_length() - 1)
    bits = (1 << (fine.lines & (per_line - 1))).astype(np.uint8)
    starts = np.ones(lines.shape[0], dtype=bool)  # an event's sectors are sorted: one line's are adjacent
    starts[1:] = lines[1:] != lines[:-1]
    starts[fine.event_offsets[:-1][np.diff(fine.event_offsets) > 0]] = True
    first = np.flatnonzero(starts)
    event_offsets = np.concatenate([[0], np.cumsum(starts)])[fine.event_offsets]
    return Trace(lines=lines[first], is_store=fine.is_store[first], event_offsets=event_offsets,
                 program_offsets=fine.program_offsets, line_bytes=line_bytes,
                 sectors=np.bitwise_or.reduceat(bits, first), sector_bytes=fine.line_bytes, sites=fine.sites)


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sectors")
    env = {**os.environ, "TRITON_INTERPRET": "1", "OPENBLAS_NUM_THREADS": "1"}
    paths = [str(ROOT / "kernels" / f"{name}.py") for name in KERNELS]
    proc = subprocess.run([sys.executable, "-c", CHILD, str(out), *paths], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.mark.parametrize("name", KERNELS)
def test_sector_masks_equal_sectors_captured_as_lines_and_grouped(captured, name):
    paths = [captured / f"{name}.{line_bytes}.npz" for line_bytes in (128, SECTOR_BYTES)]
    assert [TraceMeta.read(path).mode for path in paths] == ["fast", "fast"]  # no fallback hid a difference
    lines, sectors = (Trace.load(path) for path in paths)
    assert np.all(sectors.sectors == 1) and lines.num_accesses < sectors.num_accesses
    grouped = group_sectors(sectors, 128)
    for field in ("program_offsets", "event_offsets", "is_store", "lines", "sectors"):
        assert np.array_equal(getattr(lines, field), getattr(grouped, field)), field
    assert lines.equals(grouped)
