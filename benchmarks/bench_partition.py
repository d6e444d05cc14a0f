"""The achievable multi-die bound: time and fetches of Mt-KaHyPar's assignment, on a synthetic GEMM or the suite.

    .venv/bin/python benchmarks/bench_partition.py [--rows 24] [--cols 36] [--lines 64] [--parts 8]
                                                   [--attempts 1 4 16] [--preset highest_quality]
    .venv/bin/python benchmarks/bench_partition.py --suite [--hardware mi300x]

`--suite` times the bound as optimize computes it (achievable_bound, once per run) for every suite
kernel at its default size, traces captured beforehand (not timed), and prints the total: the
budget is 10 s on a 2-core machine.

Program (r, c) of a rows x cols tile grid reads the `lines` nets of A's tile row r and the `lines`
nets of B's tile column c, the access pattern of a GEMM without K split. Printed: the instance's
size, then fetches next to the single-cache minimum: the dispatcher's identity (program v on die
v % parts), the partition for each --attempts, the best tiling of the grid into equal rectangles
(where one exists), and a lower bound no assignment can beat: a die whose programs lie in r tile
rows and c tile columns holds at most r * c programs and fetches (r + c) * lines.
"""

from __future__ import annotations

import argparse

import numpy as np

from swizzleperf.sim.bounds.partition import dispatcher_part_sizes, partition_bound


def gemm_reads(rows: int, cols: int, lines: int) -> tuple[np.ndarray, np.ndarray, int]:
    """CSR of the nets each program reads: its A row's lines, then its B column's lines."""
    program = np.arange(rows * cols)
    line = np.arange(lines)
    a_nets = (program // cols)[:, None] * lines + line
    b_nets = rows * lines + (program % cols)[:, None] * lines + line
    offsets = np.arange(rows * cols + 1, dtype=np.int64) * 2 * lines
    return offsets, np.concatenate([a_nets, b_nets], axis=1).ravel(), (rows + cols) * lines


def grid_fetches(part: np.ndarray, rows: int, cols: int, lines: int) -> int:
    """Fetches of an assignment: every tile row and column costs `lines` per die it reaches."""
    grid = part.reshape(rows, cols)
    dies_per_row = sum(len(np.unique(row)) for row in grid)
    dies_per_col = sum(len(np.unique(col)) for col in grid.T)
    return (dies_per_row + dies_per_col) * lines


def best_tiling(rows: int, cols: int, parts: int) -> np.ndarray | None:
    """Die of each tile when the grid is cut into `parts` equal rectangles with the fewest rows +
    columns each; None when no such tiling exists."""
    area, left = divmod(rows * cols, parts)
    shapes = [(h, area // h) for h in range(1, rows + 1)
              if not left and area % h == 0 and rows % h == 0 and cols % (area // h) == 0]
    if not shapes:
        return None
    h, w = min(shapes, key=sum)
    r, c = np.divmod(np.arange(rows * cols), cols)
    return (r // h) * (cols // w) + c // w


def grid_lower_bound(rows: int, cols: int, lines: int, parts: int) -> int:
    """Fewest fetches any assignment can make: a die holding s programs spans r rows and c columns
    with r * c >= s, and pays (r + c) * lines; each die's cheapest such r + c is summed."""
    def cheapest(size: int) -> int:
        spans = [r + -(-size // r) for r in range(1, rows + 1) if -(-size // r) <= cols]
        return min(spans) if size else 0
    return lines * sum(cheapest(size) for size in dispatcher_part_sizes(rows * cols, parts))


def line(label: str, fetches: int, minimum: int, tail: str = "") -> None:
    print(f"{label:<34}{fetches:>9}{fetches / minimum:>11.3f}{tail}")


SUITE = ("softmax", "gemm", "transpose", "layernorm", "attention", "elementwise", "spmv", "blackscholes",
         "fdtd2d", "stencil2d", "smithwaterman")


def suite(hardware: str) -> None:
    import time
    from pathlib import Path

    from swizzleperf.hardware.presets import PRESETS
    from swizzleperf.kernel.contract import load_kernel
    from swizzleperf.profilers.sim import SimProfiler
    from swizzleperf.sim.bounds.achievable import achievable_bound
    from swizzleperf.sim.prepared import prepare

    hw, total = PRESETS[hardware], 0.0
    print(f"{'kernel':<14}{'programs':>9}{'seconds':>9}{'fetches':>11}{'x minimum':>11}  how")
    for name in SUITE:
        kernel = load_kernel(Path(__file__).resolve().parents[1] / "kernels" / f"{name}.py")
        prepared = prepare(SimProfiler(hw, gpu_occupancy=False).trace(kernel, kernel.default_size))
        began = time.perf_counter()
        found = achievable_bound(prepared, hw)
        seconds = time.perf_counter() - began
        total += seconds
        print(f"{name:<14}{prepared.num_programs:>9}{seconds:>9.2f}{found.fetches:>11}"
              f"{found.fetches / max(found.min_fetches, 1):>11.4f}  {found.how}", flush=True)
    print(f"total {total:.1f} s for {len(SUITE)} kernels on {hardware} (budget: 10 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="store_true", help="time the bound on every suite kernel instead")
    parser.add_argument("--hardware", default="mi300x")
    parser.add_argument("--rows", type=int, default=24)
    parser.add_argument("--cols", type=int, default=36)
    parser.add_argument("--lines", type=int, default=64)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--attempts", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--preset", default="highest_quality")
    args = parser.parse_args()
    if args.suite:
        return suite(args.hardware)
    grid = (args.rows, args.cols, args.lines)
    offsets, nets, num_nets = gemm_reads(*grid)
    runs = [(n, *partition_bound(offsets, nets, num_nets, args.parts, attempts=n, preset=args.preset))
            for n in args.attempts]
    first = runs[0][1]
    print(f"grid {args.rows}x{args.cols}, {args.lines} lines per row/column, {args.parts} dies, "
          f"part sizes {sorted(set(first.part_sizes))}")
    print(f"vertices {first.vertices}  pins {first.pins}  nets {first.nets}  distinct nets {first.distinct_nets}")
    print(f"{'assignment':<34}{'fetches':>9}{'x minimum':>11}{'seconds':>9}")
    line("identity (v % parts)", grid_fetches(np.arange(first.vertices) % args.parts, *grid), first.min_fetches)
    for attempts, bound, part in runs:
        assert bound.fetches == grid_fetches(part, *grid)  # its own count agrees with the direct one
        line(f"partition, {attempts} attempt(s)", bound.fetches, bound.min_fetches,
             f"{bound.seconds:>9.2f}  ({bound.chosen}, {bound.rebalanced_moves} moves)")
    tiling = best_tiling(args.rows, args.cols, args.parts)
    if tiling is not None:
        line("best rectangle tiling", grid_fetches(tiling, *grid), first.min_fetches)
    line("lower bound (rows + columns)", grid_lower_bound(*grid, args.parts), first.min_fetches)
    line("minimum (one shared cache)", first.min_fetches, first.min_fetches)
    print(f"tool: {runs[-1][1].tool}")


if __name__ == "__main__":
    main()
