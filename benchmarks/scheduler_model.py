"""A candidate model of where an NVIDIA GPU's block scheduler runs each program, tried against measurements.

The simulator's dispatch model (swizzleperf/sim/dispatch.py) hands the positions that finish in one turn
their next programs in a hashed order, so consecutive programs land on unrelated SMs. On an H100 they do
not: in launch order they share an L2 side 55-82 % of the time and step 1-8 SMs along the scheduler's
SM order 14-72 % of the time, in real kernels and in programs that only spin on the timer alike
(`probe_scheduler.py`'s and `probe_placement.py`'s recordings, read in launch order). The candidate:

  - the first wave starts in the measured SM order at the measured rate (0.36 ns a program);
  - a slot frees when its program ends, late or early by a disorder drawn from a normal of SIGMA ns
    (the free's way through the SM and the scheduler, which the spin programs show);
  - the scheduler takes the frees in time order, a window of WINDOW ns at a time, and gives the frees
    of one window the next programs walking its SM order from the SM it served last.

`fit` draws the placements of the six spin runs recorded in `tests/fixtures/probes/probe-scheduler-h100.json.gz`
(outside the suite: the programs' durations are known exactly) for a grid of (WINDOW, SIGMA) and prints how
far the TPC, side and walk fractions of consecutive programs fall from the measured ones. `place` writes, for
every (kernel, remap) of a fidelity measurement, the model's SM of each launch slot in `probe_placement.py`'s
format, so `fidelity.py compare --placement OUT.json.gz` scores it exactly as it scores the GPU's own
placement. A program's duration is the kernel's time shared out by the program's rounds: ncu's measured
`gpu__time_duration` by default (a yardstick for the rule), or with `--predicted-time` the longer of the
kernel's DRAM traffic at peak bandwidth and its waves of rounds at DRAM latency (what the simulator could
use offline; it has no compute term, so compute-bound kernels come out short). The README has the results.

    python benchmarks/scheduler_model.py fit [--windows 4,6,8] [--sigmas 150,300,600]
    python benchmarks/scheduler_model.py place MEASURED.json OUT.json.gz [--window 6] [--sigma 300] [--kernels ...]
        [--hardware h100|h200] [--predicted-time] [--time-scale X]
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

SPIN_RUNS = ROOT / "tests" / "fixtures" / "probes" / "probe-scheduler-h100.json.gz"
FIRST_WAVE_NS = 0.36  # the H100's first wave: 2,112 programs started in 0.77 us (probe_placement.py)
SMS = 132


class Scheduler:
    """The scheduler's SM order and each SM's L2 side (the measured H100 layout)."""

    def __init__(self, gpu: str = "h100"):
        from swizzleperf.measured_layouts import first_wave_sequence, sm_partition

        self.side = np.asarray(sm_partition(gpu))
        self.rank = np.empty(len(self.side), np.int64)
        self.rank[np.asarray(list(dict.fromkeys(first_wave_sequence(gpu))))] = np.arange(len(self.side))

    def place(self, first_wave: np.ndarray, durations: np.ndarray, window: float, sigma: float,
              seed: int = 0) -> np.ndarray:
        """The SM of each program (in launch order) when `first_wave` gives the positions' SMs."""
        rng = np.random.default_rng(seed)
        n, positions = len(durations), min(len(first_wave), len(durations))
        sms = np.empty(n, np.int64)
        sms[:positions] = first_wave[:positions]
        frees = [(k * FIRST_WAVE_NS + durations[k] + sigma * rng.standard_normal(), k) for k in range(positions)]
        heapq.heapify(frees)
        given, last = positions, self.rank[first_wave[positions - 1]]
        while given < n:
            opened = frees[0][0]
            ready = []
            while frees and frees[0][0] < opened + window:
                ready.append(heapq.heappop(frees)[1])
            ready.sort(key=lambda k: ((self.rank[first_wave[k]] - last - 1) % SMS, k))  # walk on from `last`
            for k in ready[:n - given]:
                sms[given], last = first_wave[k], self.rank[first_wave[k]]
                heapq.heappush(frees, (opened + window + durations[given] + sigma * rng.standard_normal(), k))
                given += 1
        return sms

    def consecutive(self, sms: np.ndarray) -> np.ndarray:
        """(same TPC, other SM), same L2 side, 1-8 SMs further on in the scheduler's order: for programs 1 apart."""
        a, b = sms[:-1], sms[1:]
        step = (self.rank[b] - self.rank[a]) % SMS
        return np.array([np.mean((a // 2 == b // 2) & (a != b)), np.mean(self.side[a] == self.side[b]),
                         np.mean((step >= 1) & (step <= 8))])


def first_wave(programs_per_sm: int) -> np.ndarray:
    from swizzleperf.hardware import PRESETS

    return np.asarray(PRESETS["h100"].model_copy(update={"programs_per_cu": programs_per_sm}).first_wave_cus())


def cmd_fit(args) -> int:
    from probe_scheduler import spin_durations

    scheduler = Scheduler()
    with gzip.open(SPIN_RUNS, "rt") as f:
        runs = json.load(f)["runs"]
    print("consecutive programs after the first wave, model / measured: TPC, L2 side, walk 1-8 SMs")
    for window in args.windows:
        for sigma in args.sigmas:
            error, cells = 0.0, []
            for run in runs:
                wave = first_wave(64 // run["warps"])
                spins = spin_durations(run["spin_ns"], run["spread"], run["programs"])
                model = scheduler.consecutive(scheduler.place(wave, spins, window, sigma)[len(wave):])
                measured = scheduler.consecutive(np.asarray(run["smid"])[len(wave):])
                error += float(np.abs(model - measured).sum())
                cells.append(" ".join(f"{m:.2f}/{g:.2f}" for m, g in zip(model, measured)))
            print(f"window {window:4g} ns, sigma {sigma:5g} ns: sum |error| {error:.2f}  " + " | ".join(cells))
    return 0


def rounds_per_program(profiler, kernel, size: str) -> np.ndarray:
    """How many rounds (rounds.py) each trace program issues: its share of the kernel's time."""
    from swizzleperf.sim.engine import prepare, run_source

    prepared = prepare(profiler.trace(kernel, size))
    source = run_source(prepared, 1 << 40)
    chunk, lo, hi = source.gather(np.arange(prepared.num_programs), 1)
    starts = np.concatenate([[0], np.cumsum(chunk[6], dtype=np.int64)])
    return starts[hi] - starts[lo]


# what the predicted kernel time stands on: the vendor's peak DRAM bandwidth, and the DRAM latency
# probe_l2_partitions.py measured on the H100 (~720 cycles at ~1.75 GHz); the H200's HBM3e is faster
PEAK_DRAM_BYTES_PER_NS = {"h100": 3350.0, "h200": 4800.0}
DRAM_LATENCY_NS = 410.0


def predicted_time(profiler, kernel, size: str, source: str, rounds: np.ndarray, wave: np.ndarray) -> float:
    """The kernel time without a measurement: the longer of its DRAM traffic (the simulator's reads under the
    dispatch model, and every written sector) at peak bandwidth and its waves of rounds at DRAM latency."""
    from swizzleperf.sim.engine import simulate

    hw, _ = profiler.kernel_hardware(kernel, size)
    result = simulate(profiler.trace(kernel, size), profiler.program_for_slot(kernel, source, size), hw)
    traffic = result.bytes_fetched + result.bounds.write_sectors * result.sector_bytes
    busy = rounds[rounds > 0]
    return max(traffic / PEAK_DRAM_BYTES_PER_NS[hw.name], busy.size / len(wave) * busy.mean() * DRAM_LATENCY_NS)


def cmd_place(args) -> int:
    from fidelity import kernel_path
    from swizzleperf.fidelity.compare import hardware_for
    from swizzleperf.fidelity.placement import PlacementRecord, RecordedPlacement
    from swizzleperf.fidelity.records import Measurement
    from swizzleperf.hardware import PRESETS
    from swizzleperf.kernel import load_kernel
    from swizzleperf.profilers.sim import SimProfiler

    scheduler = Scheduler()
    measurement = Measurement.model_validate_json(Path(args.measurement).read_text())
    placed = []
    for record in measurement.kernels:
        if record.error or (args.kernels and record.kernel not in args.kernels):
            continue
        hw = hardware_for(record, PRESETS[args.hardware])
        kernel = load_kernel(kernel_path(record.kernel))
        profiler = SimProfiler(hw, gpu_occupancy=False)
        rounds = rounds_per_program(profiler, kernel, record.size)
        wave = np.asarray(hw.first_wave_cus())
        for remap in record.remaps:
            program = rounds[profiler.program_for_slot(kernel, remap.source, record.size)].astype(float)
            busy = program > 0  # programs without events never take a slot
            kernel_ns = args.time_scale * (remap.metrics["gpu__time_duration.sum"] if not args.predicted_time else
                                           predicted_time(profiler, kernel, record.size, remap.source, program, wave))
            durations = kernel_ns * len(wave) / busy.sum() * program[busy] / program[busy].mean()
            smid = np.zeros(len(program), np.int64)
            smid[busy] = scheduler.place(wave, durations, args.window, args.sigma)
            placed.append(RecordedPlacement(kernel=record.kernel, size=record.size, remap=remap.label,
                                            source=remap.source, smid=smid.tolist()))
        print(f"{record.kernel}: {len(record.remaps)} remaps placed", flush=True)
    out = PlacementRecord(device=f"scheduler_model.py (window {args.window:g} ns, sigma {args.sigma:g} ns)",
                          num_sms=SMS, kernels=placed)
    Path(args.out).write_bytes(gzip.compress(out.model_dump_json().encode()))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    floats = lambda text: [float(x) for x in text.split(",")]  # noqa: E731
    f = sub.add_parser("fit", help="the model against the recorded spin runs, over a grid of window and sigma")
    f.add_argument("--windows", type=floats, default=[4.0, 6.0, 8.0])
    f.add_argument("--sigmas", type=floats, default=[150.0, 300.0, 600.0])
    p = sub.add_parser("place", help="the model's placement of every measured remap, for fidelity.py --placement")
    p.add_argument("measurement")
    p.add_argument("out")
    p.add_argument("--window", type=float, default=6.0)
    p.add_argument("--sigma", type=float, default=300.0)
    p.add_argument("--kernels", nargs="*", default=[])
    p.add_argument("--hardware", default="h100", help="the preset of the measured GPU (h100, h200: one SM layout)")
    p.add_argument("--predicted-time", action="store_true",
                   help="the kernel times from DRAM traffic and rounds (no measurement) instead of ncu's")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="scale the measured kernel times (how much the placement depends on them)")
    args = parser.parse_args()
    return {"fit": cmd_fit, "place": cmd_place}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
