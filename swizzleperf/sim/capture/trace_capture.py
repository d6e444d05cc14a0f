"""Capture a kernel's memory trace from the real Triton kernel, once per problem, cached on disk.

`capture_trace(kernel, size)` runs the kernel through its contract (`make_inputs(size, seed=0,
device="cpu")`, `make_outputs`, `launch(..., num_xcds=8)` with the file's original hook) on the
Triton CPU interpreter and records every load and store (see sim/trace/record.py for what a trace
holds, sim/trace/line_runs.py for how it is stored). The trace does not depend on the remap: the simulator permutes programs, so a second call for the same
kernel source and size is a cache hit, whatever remap is being evaluated.

Capture runs in a child process: the interpreter must be enabled (TRITON_INTERPRET=1) before the
kernel module is imported, and capture patches interpreter internals. The child streams progress
lines to the parent and writes the trace, batch by batch, to a file beside its cache place; the parent
renames it into place (metadata first).

Two modes, both exact:
- "reference": the stock interpreter, program by program, its memory ops observed
  (interp_reference.py). Slow (~0.03 M line accesses/s) and tolerant of interpreter versions.
- "fast" (default): program-batched, lazily evaluated interpretation (interp_batched.py),
  pinned to triton 3.9. After a fast capture a few programs (the first, the last, two random)
  are re-run in reference mode and compared; where fast mode cannot be exact (or that check
  disagrees) it hands the launch to reference mode and says why in `TraceMeta.fallback_reason`.

A problem must be one kernel launch; `launch()` starting a second one is a TraceCaptureError.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from swizzleperf.errors import CaptureTimedOut, SwizzlePerfError, TraceCaptureError
from swizzleperf.kernel.contract import KernelFile, load_kernel
from swizzleperf.sim.capture.events import sector_shifts
from swizzleperf.sim.trace import cache as trace_cache
from swizzleperf.sim.trace.record import TRACE_FORMAT_VERSION, Trace, TraceMeta, meta_path
from swizzleperf.sim.trace.stored import StoredTrace, write_trace

Mode = Literal["fast", "reference"]

CAPTURE_VERSION = 2  # bump when capture semantics change: it is part of every cache key
# Every trace records which 32-byte sectors of each line an access touches (NVIDIA's L2 and L1 look
# up and fill sectors); a model of a coarser cache merges them (see sim.engine).
SECTOR_BYTES = 32
VERIFY_PROGRAMS = 4
_PROGRESS, _WARNING = "@@swizzleperf-progress", "@@swizzleperf-warning"
_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def sector_bytes_of(line_bytes: int) -> int:
    return min(SECTOR_BYTES, line_bytes)


# --- the cache -------------------------------------------------------------------------------

def default_cache_dir() -> Path:
    return trace_cache.default_cache_dir()


def versions() -> dict[str, str]:
    """Versions a trace depends on (read from package metadata: importing torch is slow)."""
    from swizzleperf import __version__

    found = {name: importlib.metadata.version(name) for name in ("triton", "torch", "numpy")}
    return {**found, "swizzleperf": __version__, "capture": f"{CAPTURE_VERSION}.{TRACE_FORMAT_VERSION}"}


def cache_key(kernel: KernelFile, size: str, line_bytes: int) -> str:
    blob = json.dumps({"kernel_sha256": kernel.sha256, "size": size, "size_values": kernel.size(size),
                       "line_bytes": line_bytes, "versions": versions()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def cached_trace_path(kernel: KernelFile, size: str, line_bytes: int = 128, cache_dir: Path | None = None) -> Path:
    key = cache_key(kernel, size, line_bytes)
    return Path(cache_dir or default_cache_dir()) / f"{kernel.name}-{size}-{line_bytes}B-{key[:24]}.runs"


def capture_trace(kernel: KernelFile, size: str, line_bytes: int = 128, cache_dir: Path | None = None,
                  progress: Callable[[int, int], None] | None = None, *, mode: Mode = "fast",
                  use_cache: bool = True, timeout: float | None = None) -> StoredTrace:
    """The kernel's trace at `size`: from the cache, else captured in a child process and cached.

    The trace stays on disk in compact form (stored.py); it is expanded in memory only if asked.
    `progress(done, total)` is called with programs captured so far (never on a cache hit).
    Both modes record the same trace, so a cached trace serves either. `use_cache=False` neither
    reads nor writes the cache; `timeout` (seconds) kills a capture that runs longer. Storing a
    trace evicts the least recently used others past the cache's size bound (trace_cache.py)."""
    if mode not in ("fast", "reference"):
        raise TraceCaptureError(f"unknown capture mode {mode!r}; use 'fast' or 'reference'")
    kernel.size(size)  # a ContractError naming the declared sizes
    sector_shifts(line_bytes, sector_bytes_of(line_bytes))  # a power of two of at most 8 sectors, or an error
    path = cached_trace_path(kernel, size, line_bytes, cache_dir)
    if use_cache and not path.exists():
        _convert_legacy(path)
    if use_cache and path.exists() and meta_path(path).exists():
        try:
            trace = StoredTrace(path)
            trace_cache.touch(path)
            return trace
        except TraceCaptureError as exc:
            warnings.warn(f"{exc}; capturing it again", RuntimeWarning, stacklevel=2)
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="swizzleperf-capture-") as tmp:
        # written beside its cache place, so storing it is a rename however large it is
        out = path.with_name(f".{path.stem}.{os.getpid()}.tmp.runs") if use_cache else Path(tmp) / "trace.runs"
        request = CaptureRequest(kernel_path=str(kernel.path), kernel_sha256=kernel.sha256, size=size,
                                 line_bytes=line_bytes, mode=mode, out_path=str(out),
                                 cache_key=cache_key(kernel, size, line_bytes))
        try:
            _run_capture_child(request, Path(tmp), progress, timeout)
            trace = StoredTrace(out)  # keeps the file open: readable after the rename (or the temp dir's removal)
            if use_cache:
                os.replace(meta_path(out), meta_path(path))
                os.replace(out, path)
                trace.path = trace.file.path = path
                trace_cache.evict(path.parent, keep=path)
        finally:
            for leftover in (out, meta_path(out), *out.parent.glob(f"{out.name}.*.part")):
                leftover.unlink(missing_ok=True)
    return trace


def _convert_legacy(path: Path) -> None:
    """A trace cached before compact traces (`.npz`, same key: the trace itself is unchanged) becomes a
    `.runs` file instead of being captured again."""
    legacy = path.with_suffix(".npz")
    if not (legacy.exists() and meta_path(path).exists()):
        return
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.runs")
    try:
        write_trace(Trace.load(legacy), tmp)
        os.replace(tmp, path)
        legacy.unlink(missing_ok=True)
    except (TraceCaptureError, OSError) as exc:
        warnings.warn(f"cannot convert the cached trace {legacy.name}: {exc}", RuntimeWarning, stacklevel=3)
    finally:
        tmp.unlink(missing_ok=True)


# --- the child process -----------------------------------------------------------------------

class CaptureRequest(BaseModel):
    """What the parent asks the capture child to do (written as JSON, never pickled)."""

    model_config = ConfigDict(extra="forbid")

    kernel_path: str
    kernel_sha256: str
    size: str
    line_bytes: int
    mode: Mode
    out_path: str
    cache_key: str


def _run_capture_child(request: CaptureRequest, workdir: Path, progress: Callable[[int, int], None] | None,
                       timeout: float | None) -> None:
    """Start the child, relay its progress and warnings, turn its failures into TraceCaptureError."""
    request_path, error_path, stderr_path = workdir / "request.json", workdir / "error.json", workdir / "stderr.txt"
    request_path.write_text(request.model_dump_json())
    # Capture is single-threaded; small BLAS calls spread over threads stall whenever one thread is
    # descheduled (measured 0.1 ms -> 20 ms per tile product on a busy machine), so use one.
    env = {**os.environ, "TRITON_INTERPRET": "1", **{v: os.environ.get(v, "1") for v in _THREAD_VARS}}
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "swizzleperf.sim.capture.trace_capture", str(request_path), str(error_path)],
                                stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL, env=env,
                                text=True, start_new_session=True)
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill) if timeout else None
        if timer:
            timer.start()
        try:
            for line in proc.stdout:
                if line.startswith(_PROGRESS) and progress:
                    done, total = line.split()[1:3]
                    progress(int(done), int(total))
                elif line.startswith(_WARNING):
                    warnings.warn(line[len(_WARNING):].strip(), RuntimeWarning, stacklevel=3)
            proc.wait()
        finally:
            if timer:
                timer.cancel()
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            proc.stdout.close()
    what = f"trace capture of {Path(request.kernel_path).name} at size {request.size!r}"
    if timed_out.is_set():
        raise CaptureTimedOut(f"{what} ran past its time limit of {timeout:g} s and was killed; "
                                f"raise the timeout or capture a smaller size")
    if error_path.exists():
        raise TraceCaptureError(json.loads(error_path.read_text())["message"])
    if proc.returncode != 0 or not Path(request.out_path).exists():
        tail = "\n".join(stderr_path.read_text().strip().splitlines()[-15:])
        raise TraceCaptureError(f"{what} crashed (exit code {proc.returncode})" + (f":\n{tail}" if tail else ""))


def _child_main(request_path: str, error_path: str) -> int:
    request = CaptureRequest.model_validate_json(Path(request_path).read_text())
    try:
        kernel = load_kernel(request.kernel_path)
        if kernel.sha256 != request.kernel_sha256:
            raise TraceCaptureError(f"{kernel.path} changed while its trace was being captured; capture again")

        def progress(done: int, total: int) -> None:
            print(f"{_PROGRESS} {done} {total}", flush=True)

        def warn(message: str) -> None:
            print(f"{_WARNING} {message}", flush=True)

        out = Path(request.out_path)
        trace, meta = record_trace(kernel, request.size, request.line_bytes, request.mode, progress, warn, spill=out)
        if not isinstance(trace, StoredTrace):  # reference mode (or a fallback to it) records in memory
            write_trace(trace, out)
        meta_path(out).write_text(meta.model_copy(update={"cache_key": request.cache_key}).model_dump_json(indent=1))
        return 0
    except SwizzlePerfError as exc:
        Path(error_path).write_text(json.dumps({"type": type(exc).__name__, "message": str(exc)}))
        return 2


# --- recording (runs where TRITON_INTERPRET=1 was set before the kernel was imported) ------

def record_trace(kernel: KernelFile, size: str, line_bytes: int = 128, mode: Mode = "fast",
                 progress: Callable[[int, int], None] | None = None,
                 warn: Callable[[str], None] | None = None,
                 programs: Sequence[int] | None = None, spill: Path | None = None) -> tuple[Trace, TraceMeta]:
    """Run the kernel's launch on the interpreter in this process and record its trace.

    `programs` restricts capture to those launch ids, renumbered 0..len-1, in reference mode
    only: a measurement aid (benchmarks), never cached. With `spill` (a path), fast mode writes
    the trace there as it goes and returns it as a StoredTrace (bounded memory)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise TraceCaptureError("trace capture needs TRITON_INTERPRET=1 set before the kernel module is "
                                "imported; use capture_trace(), which starts a child process with it")
    if programs is not None and mode != "reference":
        raise TraceCaptureError("capturing a subset of programs is supported in reference mode only")
    from swizzleperf.kernel.interpreter_fixes import float_scalars_as_fp32
    from swizzleperf.sim.capture.launch import LaunchCapture
    float_scalars_as_fp32()

    start = time.perf_counter()
    values = kernel.size(size)
    inputs = kernel.fn("make_inputs")(values, seed=0, device="cpu")
    outputs = kernel.fn("make_outputs")(values, device="cpu")
    setup = time.perf_counter() - start
    sector_bytes = sector_bytes_of(line_bytes)
    session = LaunchCapture(mode, line_bytes, sector_bytes, progress,
                            warn or (lambda m: warnings.warn(m, RuntimeWarning)), programs, verify=VERIFY_PROGRAMS,
                            spill=spill)
    with session.intercept():
        kernel.fn("launch")(inputs, outputs, values, num_xcds=8)
    trace = session.result()
    meta = TraceMeta(kernel=kernel.name, kernel_sha256=kernel.sha256, size_name=size, size=values,
                     grid=kernel.grid(size), launch_grid=session.grid, line_bytes=line_bytes, sector_bytes=sector_bytes,
                     mode=session.mode_used,
                     requested_mode=mode, fallback_reason=session.fallback_reason,
                     num_programs=trace.num_programs, num_events=trace.num_events,
                     num_accesses=trace.num_accesses, batches=session.batches,
                     verified_programs=session.verified, seconds=time.perf_counter() - start,
                     setup_seconds=setup, versions=versions())
    return trace, meta


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1], sys.argv[2]))

