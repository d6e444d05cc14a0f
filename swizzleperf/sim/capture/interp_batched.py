"""Program-batched interpretation: the kernel body runs once for a whole batch of programs.

The Triton interpreter spends its time in per-op Python overhead (~130 softmax programs/s), not
in arithmetic. Running the body once for P programs divides that overhead by P; values carry a
trailing program axis (batched_ops.py). Three rules keep the result exact:

1. Divergence. A Python `if`, `while` or `range()` on a per-program value reaches
   `tensor.__bool__` / `__index__`. When the programs of the batch disagree, the batch is
   abandoned (its events dropped) and rerun as groups that agree. A group of one cannot diverge.
2. Lazy data (batched_values.py). Memory ops record their events from pointers and masks, which
   depend on program ids and arguments and rarely on data. A loaded value, and all arithmetic on
   it, is computed only if something reads it: a pointer, a mask, a branch. Softmax's exp and
   sums or GEMM's dots are never computed.
3. Read-only memory. Stores and atomics record their events but write nothing, so every load
   reads the launch's initial memory. That is exact unless a loaded value is needed from a line
   this launch already wrote, or an atomic's result is needed; then fast capture gives up
   (`NeedsReference`) and the caller falls back to reference mode.

What stays inexact is a race: a program that reads what another program of the same launch
wrote, which the GPU does not order either (reference mode orders programs by id).
"""

from __future__ import annotations

import time
import weakref
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np

from swizzleperf.errors import TraceCaptureError
from swizzleperf.sim.capture.batched_ops import batched_interpreter
from swizzleperf.sim.capture.batched_values import Diverged, Expired
from swizzleperf.sim.capture.events import EventBatch, TraceBuilder, distinct_lines, sector_shifts
from swizzleperf.sim.capture.interp_reference import PreparedLaunch, language_patched
from swizzleperf.sim.capture.sites import instruction_site

LANE_BUDGET = 1 << 20   # lanes of one memory instruction across a batch (pointer arrays of 8 MiB)
HELD_BUDGET = 1 << 23   # lanes of pointer arrays that unforced lazy loads may keep alive
MAX_BATCH = 4096


class ProgramFault(BaseException):
    """Program `program` accessed memory outside every tensor (`error` says where).

    Raised instead of the error itself so the caller can confirm it in reference mode first."""

    def __init__(self, program: int, error: TraceCaptureError):
        super().__init__(str(error))
        self.program = program
        self.error = error


# --- the engine ----------------------------------------------------------------------------


class BatchedCapture:
    """Runs a prepared launch batch by batch and collects its events into a TraceBuilder."""

    def __init__(self, launch: PreparedLaunch, line_bytes: int, sector_bytes: int,
                 progress: Callable[[int, int], None] | None = None, expire: bool = True, spill: Path | None = None):
        self.launch = launch
        self.layout = launch.layout
        self.shifts = sector_shifts(line_bytes, sector_bytes)
        self.grid = launch.grid
        self.num_programs = int(np.prod(self.grid))
        self.builder = TraceBuilder(self.num_programs, line_bytes, sector_bytes, spill)
        self.progress = progress
        self.batch: EventBatch | None = None
        self.coords: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._poisoned: np.ndarray | None = None
        self._poison_log: list[tuple[np.ndarray, np.ndarray]] = []
        self._max_lanes = 0
        self._held = 0
        self.expire = expire
        self._live: deque[tuple[weakref.ref, int]] = deque()  # unforced lazy loads, oldest first
        self._live_lanes = 0
        self.batches = 0
        self.Lazy = None  # the TensorHandle subclass, set by batched_interpreter()

    # memory instructions
    def record(self, ptrs: np.ndarray, mask: np.ndarray | None, is_store: bool) -> tuple[np.ndarray, np.ndarray]:
        """Record one instruction for every program of the batch; returns the lines it touches and their sectors."""
        ptrs, mask = _address_order(ptrs, mask)
        p = ptrs.reshape(-1, ptrs.shape[-1])
        m = None if mask is None else mask.reshape(-1, mask.shape[-1])
        if m is not None and m.shape[0] != p.shape[0]:
            raise TraceCaptureError(f"internal: mask lanes {mask.shape} do not match pointer lanes {ptrs.shape}")
        lines, sectors, counts = distinct_lines(self.layout, self.shifts, p, m, self._fault)
        self.batch.add(lines, sectors, counts, is_store, instruction_site())
        self._max_lanes = max(self._max_lanes, p.shape[0])
        return lines, sectors

    def _fault(self, address: int, column: int) -> None:
        program = int(self.batch.programs[column if len(self.batch.programs) > 1 else 0])
        try:
            self.layout.raise_out_of_bounds(address)
        except TraceCaptureError as error:
            raise ProgramFault(program, error) from None

    def poison(self, lines: np.ndarray, sectors: np.ndarray) -> None:
        """Mark sectors this launch wrote (a line's mask of them; programs of a batch may repeat a line)."""
        if self._poisoned is None:
            self._poisoned = np.zeros((self.layout.virtual_end >> self.shifts[0]) + 1, np.uint8)
        new = sectors & ~self._poisoned[lines]
        np.bitwise_or.at(self._poisoned, lines, new)
        self._poison_log.append((lines, new))

    def touches_poison(self, lines: np.ndarray, sectors: np.ndarray) -> bool:
        return self._poisoned is not None and bool((self._poisoned[lines] & sectors).any())

    def hold(self, load, lanes: int) -> None:
        """A lazy load keeps `lanes` pointer lanes alive. Past the budget, the oldest are expired:

        values that nothing reads (GEMM's operands feeding a never-read accumulator) need not stay."""
        self._held += lanes
        if not self.expire:
            return
        self._live.append((weakref.ref(load), lanes))
        self._live_lanes += lanes
        while self._live_lanes > HELD_BUDGET and len(self._live) > 1:
            ref, n = self._live.popleft()
            self._live_lanes -= n
            old = ref()
            if old is not None and old._value is None:
                old.expire()

    # the loop
    def run(self, fn: Callable, kernel_args: dict) -> TraceBuilder:
        n = self.num_programs
        queue: deque[np.ndarray] = deque([np.arange(min(1, n), dtype=np.int64)])  # a probe: program 0 alone
        next_id, batch_size, last_report = min(1, n), None, 0.0
        while queue or next_id < n:
            if not queue:
                queue.append(np.arange(next_id, min(n, next_id + batch_size), dtype=np.int64))
                next_id += len(queue[0])
            ids = queue.popleft()
            try:
                self._run_batch(fn, kernel_args, ids)
            except Diverged as d:
                _, group = np.unique(d.key, return_inverse=True)
                queue.extendleft(reversed([ids[group == g] for g in range(group.max() + 1)]))
                continue
            if batch_size is None:
                batch_size = self._batch_size()
            if self.progress and (time.monotonic() - last_report > 0.2 or self.builder.done == n):
                last_report = time.monotonic()
                self.progress(self.builder.done, n)
        return self.builder

    def _batch_size(self) -> int:
        """From the probe program: keep each instruction and the lazily held pointers within budget."""
        per_instr = LANE_BUDGET // max(self._max_lanes, 1)
        per_held = MAX_BATCH if self.expire else HELD_BUDGET // max(self._held, 1)
        return int(max(1, min(MAX_BATCH, per_instr, per_held)))

    def _run_batch(self, fn: Callable, kernel_args: dict, ids: np.ndarray) -> None:
        nx, ny, _ = self.grid
        coords = (ids % nx, (ids // nx) % ny, ids // (nx * ny))
        self.coords = tuple((c[:1] if (c == c[0]).all() else c).astype(np.int32) for c in coords)
        self.batch = EventBatch(programs=ids)
        self._poison_log = []
        self._held = 0
        self._live.clear()
        self._live_lanes = 0
        self.batches += 1
        try:
            fn(**kernel_args)
        except BaseException:
            if self._poisoned is not None:
                for lines, new in self._poison_log:
                    np.bitwise_and.at(self._poisoned, lines, ~new)
            raise
        finally:
            self._poison_log = []
        self.builder.commit(self.batch)
        self.batch = None


def _address_order(ptrs: np.ndarray, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Permute a block's lane axes so the one with the smallest address step is innermost.

    The line extractor is fastest when lanes come in address order; a transposed tile (a K^T
    load) comes column by column. The set of lines is the same in any lane order."""
    lane_dims = ptrs.ndim - 1
    if lane_dims < 2 or ptrs.size == 0:
        return ptrs, mask
    origin = (0,) * ptrs.ndim
    steps = []
    for k in range(lane_dims):
        if ptrs.shape[k] == 1:
            steps.append(-1)  # a unit axis can go anywhere: keep it outermost
            continue
        step = tuple(1 if i == k else 0 for i in range(ptrs.ndim))
        steps.append(abs(int(ptrs[step]) - int(ptrs[origin])))
    order = sorted(range(lane_dims), key=lambda k: -steps[k])  # stable: among equal steps, later axes last
    if steps[order[-1]] == steps[lane_dims - 1]:
        return ptrs, mask
    perm = (*order, lane_dims)  # masks have the pointers' lane shape; only the program axis may differ
    return ptrs.transpose(perm), None if mask is None else mask.transpose(perm)


def capture_batched(launch: PreparedLaunch, line_bytes: int, sector_bytes: int,
                    progress: Callable[[int, int], None] | None = None, spill: Path | None = None) -> BatchedCapture:
    """Run the whole launch batched (its events written to `spill` as they come, if given).
    Raises NeedsReference when only reference mode can be exact."""
    try:
        return _capture_batched(launch, line_bytes, sector_bytes, progress, expire=True, spill=spill)
    except Expired:  # a value was read long after its load: keep every load, in smaller batches
        return _capture_batched(launch, line_bytes, sector_bytes, progress, expire=False, spill=spill)


def _capture_batched(launch: PreparedLaunch, line_bytes: int, sector_bytes: int, progress,
                     expire: bool, spill: Path | None) -> BatchedCapture:
    engine = BatchedCapture(launch, line_bytes, sector_bytes, progress, expire, spill)
    with batched_interpreter(engine), language_patched(launch) as kernel_args:
        engine.run(launch.executor.fn, kernel_args)
    return engine
