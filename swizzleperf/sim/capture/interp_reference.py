"""Reference capture: the stock Triton interpreter, one program at a time, its memory ops observed.

The interpreter routes every global memory access of a kernel through a few builder methods:
`create_masked_load` / `create_masked_store` (plain loads and stores, atomic loads and stores and
tensor-descriptor loads and stores all end there), `create_atomic_rmw` and `create_atomic_cas`.
`reference_hooks` wraps exactly those and records one event per call; `set_grid_idx` says which
program is running. Nothing else is changed, so this mode is as exact as the interpreter itself
and survives interpreter changes that keep those method names (checked at install time).

An atomic read-modify-write is recorded as one store event: at the L2 it is one access to a
line that ends up dirty.

`run_programs` is the interpreter's launch loop restricted to chosen programs (fast mode
re-runs a sample through it to check its own result, undoing each program's writes after it);
it mirrors `GridExecutor.__call__` of triton 3.9 and is used only where that version is pinned.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from swizzleperf.errors import TraceCaptureError
from swizzleperf.sim.capture.address_space import VirtualLayout
from swizzleperf.sim.capture.events import EventBatch, TraceBuilder, distinct_lines_reference, sector_shifts
from swizzleperf.sim.capture.sites import instruction_site
from swizzleperf.sim.trace.record import ProgramTrace, Trace

HOOKED_BUILDER_METHODS = ("set_grid_idx", "create_masked_load", "create_masked_store",
                          "create_atomic_rmw", "create_atomic_cas")


def _interpreter():
    from triton.runtime import interpreter  # needs TRITON_INTERPRET=1 only for kernels, not to import
    return interpreter


def program_id(coords: tuple[int, int, int], grid: tuple[int, int, int]) -> int:
    x, y, z = coords
    return x + y * grid[0] + z * grid[0] * grid[1]


def program_coords(pid: int, grid: tuple[int, int, int]) -> tuple[int, int, int]:
    return pid % grid[0], (pid // grid[0]) % grid[1], pid // (grid[0] * grid[1])


class ReferenceRecorder:
    """Events of whichever program the interpreter is running, kept per program."""

    def __init__(self, line_bytes: int, sector_bytes: int, on_program: Callable[[int], None] | None = None,
                 keep_undo: bool = False):
        self.line_bytes, self.sector_bytes = line_bytes, sector_bytes
        self.shifts = sector_shifts(line_bytes, sector_bytes)
        self.undo: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = [] if keep_undo else None
        self.layout: VirtualLayout | None = None
        self.events: dict[int, EventBatch] = {}
        self.current: EventBatch | None = None
        self.on_program = on_program

    def set_layout(self, layout: VirtualLayout) -> None:
        self.layout = layout

    def start_program(self, pid: int) -> None:
        self.current = self.events.setdefault(pid, EventBatch(programs=np.array([pid], np.int64)))
        if self.on_program:
            self.on_program(len(self.events))

    def record(self, ptrs: np.ndarray, mask: np.ndarray | None, is_store: bool) -> None:
        if self.current is None or self.layout is None:
            raise TraceCaptureError("internal: a memory access before the launch set up its program")
        lines, sectors = distinct_lines_reference(self.layout, self.shifts, ptrs, True if mask is None else mask)
        if lines.size:
            self.current.add(lines, sectors, np.array([lines.size], np.int64), is_store, instruction_site())

    def save_old(self, ptrs: np.ndarray, mask: np.ndarray | None, dtype: np.dtype) -> None:
        """Before a write: remember what it overwrites, so `undo_writes` can put memory back."""
        if self.undo is None:
            return
        from triton._C.libtriton import interpreter as native

        mask = np.ones(ptrs.shape, bool) if mask is None else np.broadcast_to(mask, ptrs.shape)
        self.undo.append((ptrs, native.load(ptrs, mask, np.zeros(ptrs.shape, dtype), dtype), mask))

    def undo_writes(self) -> None:
        from triton._C.libtriton import interpreter as native

        while self.undo:
            ptrs, old, mask = self.undo.pop()
            native.store(ptrs, old, mask)

    def _batch(self, pid: int, index: int) -> EventBatch:
        batch = self.events.get(pid) or EventBatch(programs=np.array([pid], np.int64))
        return EventBatch(np.array([index], np.int64), batch.lines, batch.sectors, batch.counts, batch.stores,
                          batch.sites)

    def build(self, programs: Sequence[int]) -> Trace:
        """The trace of `programs`, renumbered 0..len-1 in the order given."""
        builder = TraceBuilder(len(programs), self.line_bytes, self.sector_bytes)
        for index, pid in enumerate(programs):
            builder.commit(self._batch(pid, index))
        return builder.build()

    def program_trace(self, pid: int) -> ProgramTrace:
        lines, sectors, sizes, stores, sites = self._batch(pid, 0).program_major()
        sizes = sizes[0]
        return ProgramTrace(lines, np.repeat(stores, sizes), np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                            sectors, sites[sizes > 0])


@contextlib.contextmanager
def reference_hooks(recorder: ReferenceRecorder) -> Iterator[None]:
    """Observe the stock interpreter's memory ops and program changes while the context is open."""
    interp = _interpreter()
    builder_cls, executor_cls = interp.InterpreterBuilder, interp.GridExecutor
    missing = [m for m in (*HOOKED_BUILDER_METHODS, "set_grid_dim") if not hasattr(builder_cls, m)]
    if missing or not hasattr(executor_cls, "_init_args_hst"):
        raise TraceCaptureError(
            f"this Triton interpreter has no {', '.join(missing) or 'GridExecutor._init_args_hst'}; "
            f"reference capture hooks those. Install the triton version from the README")
    saved = {name: getattr(builder_cls, name) for name in HOOKED_BUILDER_METHODS}
    saved_init_args = executor_cls._init_args_hst

    def init_args_hst(self, args_dev, kwargs):
        args_hst, kwargs_hst = saved_init_args(self, args_dev, kwargs)
        recorder.set_layout(VirtualLayout.from_args(args_hst, kwargs_hst))
        return args_hst, kwargs_hst

    for name, fn in _builder_hooks(recorder, saved).items():
        setattr(builder_cls, name, fn)
    executor_cls._init_args_hst = init_args_hst
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(builder_cls, name, fn)
        executor_cls._init_args_hst = saved_init_args


def _builder_hooks(recorder: ReferenceRecorder, saved: dict) -> dict:
    """The stock builder's program change and memory ops (`saved`), each told to `recorder` first."""
    def set_grid_idx(self, x, y, z):
        saved["set_grid_idx"](self, x, y, z)
        recorder.start_program(program_id((x, y, z), self.grid_dim))

    def create_masked_load(self, ptrs, mask, other, cache_policy, is_volatile):
        recorder.record(ptrs.data, mask.data, is_store=False)
        return saved["create_masked_load"](self, ptrs, mask, other, cache_policy, is_volatile)

    def create_masked_store(self, ptrs, value, mask, cache_policy):
        recorder.record(ptrs.data, mask.data, is_store=True)
        recorder.save_old(ptrs.data, mask.data, value.data.dtype)
        return saved["create_masked_store"](self, ptrs, value, mask, cache_policy)

    def create_atomic_rmw(self, rmw_op, ptr, val, mask, sem, scope):
        recorder.record(ptr.data, mask.data, is_store=True)
        recorder.save_old(ptr.data, mask.data, val.data.dtype)
        return saved["create_atomic_rmw"](self, rmw_op, ptr, val, mask, sem, scope)

    def create_atomic_cas(self, ptr, cmp, val, sem, scope):
        recorder.record(ptr.data, None, is_store=True)
        recorder.save_old(ptr.data, None, val.data.dtype)
        return saved["create_atomic_cas"](self, ptr, cmp, val, sem, scope)

    return dict(set_grid_idx=set_grid_idx, create_masked_load=create_masked_load,
                create_masked_store=create_masked_store, create_atomic_rmw=create_atomic_rmw,
                create_atomic_cas=create_atomic_cas)


@dataclass
class PreparedLaunch:
    """A launch up to the interpreter's program loop: host args, converted kernel args, grid."""

    executor: object
    args_hst: list
    kwargs_hst: dict
    layout: VirtualLayout
    grid: tuple[int, int, int]


def prepare_launch(executor, args_dev: tuple, kwargs: dict) -> PreparedLaunch:
    """`GridExecutor.__call__` (triton 3.9) up to `_patch_lang`: host copies, pre-run hooks, grid."""
    argspec = inspect.getfullargspec(executor.fn)
    kwargs = {k: v for k, v in kwargs.items() if k in argspec.args or k in argspec.kwonlyargs}
    args_hst, kwargs_hst = executor._init_args_hst(args_dev, kwargs)
    for hook in executor.pre_run_hooks:
        hook(*args_hst, **kwargs_hst)
    layout = VirtualLayout.from_args(args_hst, kwargs_hst)
    call_args = inspect.getcallargs(executor.fn, *args_hst, **kwargs_hst)
    grid = executor.grid(call_args) if callable(executor.grid) else executor.grid
    grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
    return PreparedLaunch(executor, args_hst, kwargs_hst, layout, grid)


@contextlib.contextmanager
def language_patched(launch: PreparedLaunch) -> Iterator[dict]:
    """The interpreter's own language patches, and the kernel arguments converted under them."""
    interp = _interpreter()
    ex = launch.executor
    scope = interp._patch_lang(ex.fn)
    try:
        args = inspect.getcallargs(ex.fn, *launch.args_hst, **launch.kwargs_hst)
        kernel_args = {name: arg if name in ex.constexprs else interp._implicit_cvt(arg) for name, arg in args.items()}
        interp.interpreter_builder.set_grid_dim(*launch.grid)
        yield kernel_args
    finally:
        scope.restore()


def run_programs(launch: PreparedLaunch, programs: Iterable[int], recorder: ReferenceRecorder) -> None:
    """Run the chosen programs, in order, on the stock interpreter with `recorder` observing."""
    interp = _interpreter()
    recorder.set_layout(launch.layout)
    with reference_hooks(recorder), language_patched(launch) as kernel_args:
        for pid in programs:
            interp.interpreter_builder.set_grid_idx(*program_coords(pid, launch.grid))
            launch.executor.fn(**kernel_args)
