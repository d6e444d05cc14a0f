"""What happens when the kernel's `launch()` reaches the interpreter during capture.

`LaunchCapture.intercept()` replaces `GridExecutor.__call__`, so the launch is captured rather
than merely run:

- fast: prepare the launch, run it batched (interp_batched.py), then re-run a sample of programs
  (first, last, two random) on the stock interpreter and compare. If fast mode cannot be exact
  (`NeedsReference`), fails, or disagrees with the sample, the launch is captured in reference
  mode instead and the reason is kept (`fallback_reason`) and reported through `warn`.
- reference: the stock launch, observed (interp_reference.py).

Memory is never written by fast mode, so a fallback starts from the launch's initial memory;
the sample check undoes each re-run program's writes for the same reason.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from swizzleperf.errors import SwizzlePerfError, TraceCaptureError
from swizzleperf.sim.capture.batched_ops import check_version
from swizzleperf.sim.capture.batched_values import NeedsReference
from swizzleperf.sim.capture.interp_batched import ProgramFault, capture_batched
from swizzleperf.sim.capture.interp_reference import (
    PreparedLaunch,
    ReferenceRecorder,
    prepare_launch,
    reference_hooks,
    run_programs,
)
from swizzleperf.sim.trace.record import Trace


def _interp():
    from triton.runtime import interpreter
    return interpreter


def as_capture_error(exc: BaseException) -> SwizzlePerfError:
    """The interpreter wraps kernel failures in InterpreterError(repr(e)); find ours or say what failed."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, SwizzlePerfError):
            return cause
        root, cause = cause, cause.__cause__
    return TraceCaptureError(f"the kernel failed in the Triton interpreter: {type(root).__name__}: {root}. "
                             f"Check that it runs with TRITON_INTERPRET=1 (block pointers, for one, were "
                             f"removed in triton 3.9; use tensor descriptors)")


class LaunchCapture:
    def __init__(self, mode: str, line_bytes: int, sector_bytes: int, progress: Callable[[int, int], None] | None,
                 warn: Callable[[str], None], programs: Sequence[int] | None = None, verify: int = 4,
                 spill: Path | None = None):
        self.mode = mode
        self.spill = spill  # fast mode writes its events here as it goes (a run file)
        self.line_bytes, self.sector_bytes = line_bytes, sector_bytes
        self.progress = progress
        self.warn = warn
        self.programs = programs
        self.verify = verify
        self.launches = 0
        self.trace: Trace | None = None
        self.grid: tuple[int, int, int] = (1, 1, 1)
        self.mode_used = mode
        self.fallback_reason: str | None = None
        self.batches = 0
        self.verified: list[int] = []

    @contextlib.contextmanager
    def intercept(self) -> Iterator[None]:
        executor_cls = _interp().GridExecutor
        stock_call = executor_cls.__call__

        def call(executor, *args_dev, **kwargs):
            self.launches += 1
            if self.launches > 1:
                raise TraceCaptureError(
                    "launch() started a second Triton kernel launch; trace capture supports exactly one launch "
                    "per problem (the simulator replays one grid). Fuse the kernels, or declare each launch as "
                    "its own kernel file")
            self._capture(stock_call, executor, args_dev, kwargs)

        executor_cls.__call__ = call
        try:
            yield
        except SwizzlePerfError:
            raise
        except Exception as exc:
            raise as_capture_error(exc) from exc
        finally:
            executor_cls.__call__ = stock_call

    def result(self) -> Trace:
        if self.trace is None:
            raise TraceCaptureError("launch() returned without launching a Triton kernel; it must launch the "
                                    "kernel exactly once (on the interpreter: TRITON_INTERPRET=1)")
        return self.trace

    # the modes
    def _capture(self, stock_call, executor, args_dev, kwargs) -> None:
        if self.programs is not None:
            self._capture_subset(executor, args_dev, kwargs)
            return
        if self.mode == "fast":
            try:
                self._capture_fast(executor, args_dev, kwargs)
                return
            except NeedsReference as exc:
                reason = exc.reason
            except SwizzlePerfError:
                raise
            except Exception as exc:  # a batching limitation or a kernel bug: reference mode tells them apart
                reason = f"batched interpretation failed: {type(exc).__name__}: {exc}"
            self.fallback_reason = reason
            self.mode_used = "reference"
            self.warn(f"fast trace capture fell back to reference mode (slow): {reason}")
        self._capture_reference(stock_call, executor, args_dev, kwargs)

    def _capture_fast(self, executor, args_dev, kwargs) -> None:
        check_version()
        launch = prepare_launch(executor, args_dev, kwargs)
        self.grid = launch.grid
        try:
            engine = capture_batched(launch, self.line_bytes, self.sector_bytes, self.progress, self.spill)
        except ProgramFault as fault:  # reference mode has the last word on a kernel's errors
            self._run_alone(launch, fault.program, self._recorder(keep_undo=True))
            raise NeedsReference(f"fast mode reported for program {fault.program}: {fault.error}; "
                                 f"reference mode runs that program without error") from None
        self.batches = engine.batches
        trace = engine.builder.build()
        self._check_sample(launch, trace)
        self.trace = trace

    def _capture_reference(self, stock_call, executor, args_dev, kwargs) -> None:
        interp = _interp()
        report = _throttled(self.progress, lambda: int(np.prod(interp.interpreter_builder.grid_dim)))
        recorder = self._recorder(on_program=report)
        with reference_hooks(recorder):
            try:
                stock_call(executor, *args_dev, **kwargs)
            except SwizzlePerfError:
                raise
            except Exception as exc:
                raise as_capture_error(exc) from exc
        self.grid = tuple(int(g) for g in interp.interpreter_builder.grid_dim)
        self.trace = recorder.build(range(int(np.prod(self.grid))))

    def _capture_subset(self, executor, args_dev, kwargs) -> None:
        launch = prepare_launch(executor, args_dev, kwargs)
        self.grid = launch.grid
        report = _throttled(self.progress, lambda: len(self.programs))
        recorder = self._recorder(on_program=report)
        run_programs(launch, self.programs, recorder)
        self.trace = recorder.build(self.programs)

    def _check_sample(self, launch: PreparedLaunch, trace: Trace) -> None:
        """Re-run a few programs on the stock interpreter; any difference means fast mode is wrong here."""
        n = trace.num_programs
        rng = np.random.default_rng(0)
        extra = rng.choice(n, size=min(max(self.verify - 2, 0), n), replace=False)
        sample = sorted({0, n - 1, *(int(p) for p in extra)})[:max(self.verify, 0)] if self.verify else []
        with _blas_fp16_dot():
            self._compare_programs(launch, trace, sample)
        self.verified = sample

    def _recorder(self, **kwargs) -> ReferenceRecorder:
        return ReferenceRecorder(self.line_bytes, self.sector_bytes, **kwargs)

    def _run_alone(self, launch: PreparedLaunch, pid: int, recorder: ReferenceRecorder) -> None:
        """One program on the stock interpreter; its writes are undone, so memory stays initial."""
        try:
            run_programs(launch, [pid], recorder)
        except SwizzlePerfError:
            raise
        except Exception as exc:
            raise as_capture_error(exc) from exc
        finally:
            recorder.undo_writes()

    def _compare_programs(self, launch: PreparedLaunch, trace: Trace, sample: list[int]) -> None:
        for pid in sample:
            recorder = self._recorder(keep_undo=True)
            self._run_alone(launch, pid, recorder)
            want, got = recorder.program_trace(pid), trace.program(pid)
            if not all(np.array_equal(getattr(want, f), getattr(got, f))
                       for f in ("lines", "sectors", "is_store", "event_offsets", "sites")):
                raise NeedsReference(
                    f"program {pid} re-run in reference mode recorded {want.num_events} events / "
                    f"{len(want.lines)} lines, fast mode {got.num_events} / {len(got.lines)}")


@contextlib.contextmanager
def _blas_fp16_dot() -> Iterator[None]:
    """During the sample check only: fp16 tl.dot through float32 BLAS.

    The stock interpreter multiplies fp16 tiles with numpy's generic loop (~20 ms per 128x64x128
    tile, seconds per GEMM program). fp16 products are exact in fp32, so only the summation order
    differs; the check compares addresses, which a GEMM never derives from its accumulator."""
    interp = _interp()
    builder_cls = interp.InterpreterBuilder
    stock = builder_cls.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.data.dtype == np.float16 and b.data.dtype == np.float16 and d.data.dtype == np.float32:
            product = np.matmul(a.data.astype(np.float32), b.data.astype(np.float32))
            return interp.TensorHandle(product + d.data, d.dtype.scalar)
        return stock(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder_cls.create_dot = create_dot
    try:
        yield
    finally:
        builder_cls.create_dot = stock


def _throttled(progress: Callable[[int, int], None] | None, total: Callable[[], int]) -> Callable[[int], None]:
    """A per-program callback that reports at most five times a second (and the last program)."""
    last = [0.0]

    def report(done: int) -> None:
        if progress is None:
            return
        now, n = time.monotonic(), total()
        if now - last[0] > 0.2 or done >= n:
            last[0] = now
            progress(done, n)
    return report
