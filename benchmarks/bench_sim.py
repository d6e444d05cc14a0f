"""Simulator throughput on a realistic trace: M line accesses per second, one core.

    .venv/bin/python benchmarks/bench_sim.py [--rows 8192] [--cols 16384] [--chunks 8] [--hardware mi300x]

The trace is built directly (no capture) with the access pattern of kernels/softmax.py on fp32:
each of `rows * chunks` programs reads its whole row in 4 KB blocks (phase 1), then re-reads and
writes its own chunk block by block (phase 2), each loop's load and store instructions named as a capture
names them (a site each), so the replay issues them in rounds as it would softmax's; tensors sit in the
capture's virtual layout (2 MiB aligned). The defaults ("large": 65536 programs) give 42 M line accesses.

Printed: trace build and `prepare` time (once per trace), numba warm-up (compile, or load from
the on-disk cache after the first run; excluded from throughput), then per remap and set-index
function the predicted hit rate and the single-thread simulation throughput (`simulate(...,
threads=1)`, best of --repeats), and finally the same with --threads workers for comparison.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.sim.engine import prepare, simulate
from swizzleperf.sim.trace.record import Trace

REGION_ALIGN = 2 << 20  # the capture's virtual layout aligns every tensor to 2 MiB
FLOAT_BYTES = 4
BLOCK = 1024  # elements per load/store instruction, as in kernels/softmax.py


def softmax_trace(rows: int, cols: int, chunks: int, line_bytes: int) -> Trace:
    """The trace kernels/softmax.py would produce; program p handles row p // chunks, chunk p % chunks."""
    if cols % BLOCK or (cols // chunks) % BLOCK:
        raise SystemExit(f"--cols must be a multiple of {BLOCK} * --chunks")
    lines_per_block = BLOCK * FLOAT_BYTES // line_bytes
    row_lines = cols * FLOAT_BYTES // line_bytes
    chunk_blocks = cols // chunks // BLOCK
    x_base = REGION_ALIGN // line_bytes
    y_base = x_base + -(-rows * cols * FLOAT_BYTES // REGION_ALIGN) * REGION_ALIGN // line_bytes

    program = np.arange(rows * chunks, dtype=np.int64)
    row_start = (program // chunks * row_lines)[:, None]
    chunk_start = row_start + (program % chunks * chunk_blocks * lines_per_block)[:, None]
    block = np.arange(lines_per_block, dtype=np.int64)
    phase1 = x_base + row_start + np.arange(row_lines, dtype=np.int64)  # whole row, block by block
    phase2 = []  # per block of the chunk: load x, store y
    for b in range(chunk_blocks):
        offset = chunk_start + b * lines_per_block + block
        phase2 += [x_base + offset, y_base + offset]
    lines = np.concatenate([phase1, *phase2], axis=1)
    phase1_events = row_lines // lines_per_block
    events_per_program = phase1_events + 2 * chunk_blocks
    store_event = np.r_[np.zeros(phase1_events, bool), np.tile([False, True], chunk_blocks)]
    site = np.r_[np.zeros(phase1_events, np.int32), np.tile(np.array([1, 2], np.int32), chunk_blocks)]  # rounds.py
    return Trace(
        lines=lines.ravel(),
        is_store=np.broadcast_to(np.repeat(store_event, lines_per_block), lines.shape).ravel(),
        event_offsets=np.arange(program.size * events_per_program + 1, dtype=np.int64) * lines_per_block,
        program_offsets=np.arange(program.size + 1, dtype=np.int64) * events_per_program,
        line_bytes=line_bytes, sites=np.tile(site, program.size))


def row_grouped(num_programs: int, num_domains: int) -> np.ndarray:
    """XCD-contiguous remap: die d runs the d-th contiguous range of programs (all chunks of its rows)."""
    slot = np.arange(num_programs)
    per_die = num_programs // num_domains
    assert per_die * num_domains == num_programs, "the benchmark sizes divide evenly"
    return slot % num_domains * per_die + slot // num_domains


def timed(fn, repeats: int):
    """Best wall and CPU seconds over `repeats` calls, and the last result."""
    wall = cpu = float("inf")
    result = None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        wall, cpu = min(wall, time.perf_counter() - start), min(cpu, time.process_time() - start_cpu)
    return wall, cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--cols", type=int, default=16384)
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--hardware", default="mi300x", choices=sorted(PRESETS))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=min(8, os.cpu_count() or 1))
    args = parser.parse_args()
    hw = PRESETS[args.hardware]

    seconds, _, trace = timed(lambda: softmax_trace(args.rows, args.cols, args.chunks, hw.line_bytes), 1)
    print(f"trace: softmax {args.rows}x{args.cols} fp32, {args.chunks} programs per row -> "
          f"{trace.num_programs} programs, {trace.num_events} events, {trace.num_accesses / 1e6:.1f} M line accesses "
          f"(built in {seconds:.2f} s)")
    seconds, _, prepared = timed(lambda: prepare(trace), 1)
    print(f"prepare (once per trace: checks, line ids): {seconds:.2f} s, "
          f"{prepared.unique_lines / 1e6:.2f} M unique lines")

    start = time.perf_counter()
    tiny = Trace(lines=np.arange(4), is_store=np.zeros(4, bool), event_offsets=np.arange(5),
                 program_offsets=np.array([0, 2, 4]), line_bytes=hw.line_bytes)
    pow2 = hw.sets_per_partition & (hw.sets_per_partition - 1) == 0
    set_indices = ("hash", "modulo", "xor_fold") if pow2 else ("hash", "modulo")  # xor_fold: power-of-two sets only
    for set_index in set_indices:
        simulate(tiny, np.arange(2), hw.model_copy(update={"set_index": set_index}))
    print(f"numba warm-up (compile or load from cache, excluded below): {time.perf_counter() - start:.2f} s")

    print(f"\n{hw.describe()}")
    print(f"{'remap':<12} {'set index':<9} {'hit %':>7} {'ceiling %':>9} {'wall s':>7} {'M acc/s wall':>12} "
          f"{'M acc/s/core (CPU time)':>24}")
    remaps = {"identity": np.arange(trace.num_programs),
              "row-grouped": row_grouped(trace.num_programs, hw.num_domains)}
    per_core = []
    for name, perm in remaps.items():
        for set_index in set_indices:
            variant = hw.model_copy(update={"set_index": set_index})
            wall, cpu, result = timed(lambda: simulate(prepared, perm, variant), args.repeats)
            per_core.append(trace.num_accesses / cpu / 1e6)
            print(f"{name:<12} {set_index:<9} {result.hit_pct:7.2f} {result.ceiling_pct:9.2f} {wall:7.2f} "
                  f"{trace.num_accesses / wall / 1e6:12.1f} {per_core[-1]:24.1f}")
    print(f"single-thread throughput: {min(per_core):.1f} to {max(per_core):.1f} M line accesses/s per core "
          f"(CPU time of simulate(..., threads=1); numba compile and prepare excluded; wall-clock rates are lower "
          f"when other processes share the cores)")

    if args.threads > 1:
        wall, _, _ = timed(lambda: simulate(prepared, remaps["identity"], hw, threads=args.threads), args.repeats)
        print(f"identity with {args.threads} threads (one domain per thread): {wall:.2f} s wall, "
              f"{trace.num_accesses / wall / 1e6:.1f} M line accesses/s in total ({os.cpu_count()} cores here)")


if __name__ == "__main__":
    main()
