"""The block-scheduler rule the simulator uses on NVIDIA (swizzleperf/sim/scheduler.py): fitted here, and tried
with measured kernel times.

The rule: the first wave starts in the measured SM order at the measured rate (0.36 ns a program); a slot frees
when its program ends, late or early by a normal disorder of SIGMA ns; the scheduler takes the frees a window of
WINDOW ns at a time and gives a window's frees the next programs walking its SM order from the SM it served last.

`fit` draws the placements of the six spin runs recorded in `tests/fixtures/probes/probe-scheduler-h100.json.gz`
(outside the suite: the programs' durations are known exactly) for a grid of (WINDOW, SIGMA) and prints how
far the TPC, side and walk fractions of consecutive programs fall from the measured ones; the presets take the
best (6 ns, 300 ns). `place` writes, for every (kernel, remap) of a fidelity measurement, the rule's SM of each
launch slot when programs take ncu's measured kernel time (`gpu__time_duration`) shared out by their rounds,
in `probe_placement.py`'s format: `fidelity.py compare --placement OUT.json.gz` then shows what the simulator's
own estimate of program durations (no measurement: DRAM traffic and latency, sim/scheduler.py) costs against
the measured times. The README has the results.

    python benchmarks/scheduler_model.py fit [--windows 4,6,8] [--sigmas 150,300,600]
    python benchmarks/scheduler_model.py place MEASURED.json OUT.json.gz [--window 6] [--sigma 300] [--kernels ...]
        [--hardware h100|h200] [--time-scale X]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

SPIN_RUNS = ROOT / "tests" / "fixtures" / "probes" / "probe-scheduler-h100.json.gz"
SMS = 132


class Scheduler:
    """The scheduler's SM order and each SM's L2 side (the measured H100 layout)."""

    def __init__(self, gpu: str = "h100"):
        from probe_scheduler import sides_and_rank

        from swizzleperf.hardware.presets import PRESETS
        from swizzleperf.sim.scheduler import sm_order

        self.side, self.rank = sides_and_rank(gpu)
        self.order, self.first_wave_ns = sm_order(PRESETS[gpu]), PRESETS[gpu].dispatch.walk.first_wave_ns

    def place(self, first_wave: np.ndarray, durations: np.ndarray, window: float, sigma: float) -> np.ndarray:
        """The SM of each program (in launch order) when `first_wave` gives the positions' SMs."""
        from swizzleperf.sim.scheduler import walk

        return walk(first_wave, self.order, durations, window, sigma, self.first_wave_ns)

    def consecutive(self, sms: np.ndarray) -> np.ndarray:
        """(same TPC, other SM), same L2 side, 1-8 SMs further on in the scheduler's order: for programs 1 apart."""
        a, b = sms[:-1], sms[1:]
        step = (self.rank[b] - self.rank[a]) % SMS
        return np.array([np.mean((a // 2 == b // 2) & (a != b)), np.mean(self.side[a] == self.side[b]),
                         np.mean((step >= 1) & (step <= 8))])


def first_wave(programs_per_sm: int) -> np.ndarray:
    from swizzleperf.hardware.presets import PRESETS

    return np.asarray(PRESETS["h100"].model_copy(update={"programs_per_cu": programs_per_sm}).first_wave_cus())


def fit(windows: list[float], sigmas: list[float]) -> dict[tuple[float, float], tuple[float, list[str]]]:
    """For each (window, sigma): the summed |model - measured| of the TPC, side and walk fractions over the six
    spin runs, and each run's fractions as 'model/measured' text."""
    from probe_scheduler import spin_durations

    scheduler = Scheduler()
    with gzip.open(SPIN_RUNS, "rt") as f:
        runs = json.load(f)["runs"]
    errors = {}
    for window in windows:
        for sigma in sigmas:
            error, cells = 0.0, []
            for run in runs:
                wave = first_wave(64 // run["warps"])
                spins = spin_durations(run["spin_ns"], run["spread"], run["programs"])
                model = scheduler.consecutive(scheduler.place(wave, spins, window, sigma)[len(wave):])
                measured = scheduler.consecutive(np.asarray(run["smid"])[len(wave):])
                error += float(np.abs(model - measured).sum())
                cells.append(" ".join(f"{m:.2f}/{g:.2f}" for m, g in zip(model, measured)))
            errors[window, sigma] = error, cells
    return errors


def cmd_fit(args) -> int:
    print("consecutive programs after the first wave, model / measured: TPC, L2 side, walk 1-8 SMs")
    for (window, sigma), (error, cells) in fit(args.windows, args.sigmas).items():
        print(f"window {window:4g} ns, sigma {sigma:5g} ns: sum |error| {error:.2f}  " + " | ".join(cells))
    return 0


def rounds_per_program(profiler, kernel, size: str) -> np.ndarray:
    """How many rounds (rounds.py) each trace program issues: its share of the kernel's time."""
    from swizzleperf.sim import settings
    from swizzleperf.sim.chunks import program_rounds
    from swizzleperf.sim.engine import prepare, run_source

    budget = settings.sim_memory_bytes()
    return program_rounds(run_source(prepare(profiler.trace(kernel, size)), budget), budget)


def cmd_place(args) -> int:
    from fidelity import kernel_path

    from swizzleperf.hardware.presets import PRESETS
    from swizzleperf.kernel.contract import load_kernel
    from swizzleperf.lab.fidelity.compare import hardware_for
    from swizzleperf.lab.fidelity.measurement import Measurement
    from swizzleperf.lab.fidelity.sm_placements import PlacementRecord, RecordedPlacement
    from swizzleperf.profilers.sim import SimProfiler

    scheduler, walk = Scheduler(), PRESETS[args.hardware].dispatch.walk
    window = walk.window_ns if args.window is None else args.window
    sigma = walk.finish_jitter_ns if args.sigma is None else args.sigma
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
            kernel_ns = args.time_scale * remap.metrics["gpu__time_duration.sum"]
            durations = kernel_ns * len(wave) / busy.sum() * program[busy] / program[busy].mean()
            smid = np.zeros(len(program), np.int64)
            smid[busy] = scheduler.place(wave, durations, window, sigma)
            placed.append(RecordedPlacement(kernel=record.kernel, size=record.size, remap=remap.label,
                                            source=remap.source, smid=smid.tolist()))
        print(f"{record.kernel}: {len(record.remaps)} remaps placed", flush=True)
    out = PlacementRecord(device=f"scheduler_model.py (window {window:g} ns, sigma {sigma:g} ns)",
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
    p.add_argument("--window", type=float, default=None, help="ns (default: the preset's)")
    p.add_argument("--sigma", type=float, default=None, help="ns of disorder (default: the preset's)")
    p.add_argument("--kernels", nargs="*", default=[])
    p.add_argument("--hardware", default="h100", help="the preset of the measured GPU (h100, h200: one SM layout)")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="scale the measured kernel times (how much the placement depends on them)")
    args = parser.parse_args()
    return {"fit": cmd_fit, "place": cmd_place}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
