"""Does the simulator hold when fewer of a kernel's programs run at once? (needs an NVIDIA GPU and ncu)

stencil2d launched under each remap fidelity.py measures, at its small and medium sizes, as usual ("free"), and
with every program waiting until the one launched `lag` before it has all its data (lag 1: one program at a
time; lag K: at most K at once). The waits are flags in global memory, read and set with relaxed atomics (ncu
counts them apart from reads, and they leave the SM's L1 alone, as an acquire would not); `--compare` checks
that every launch requested the same read sectors of the L2 as the free one. The kernel body is
kernels/stencil2d.py's own, taken from the file; the wrapper adds the wait and stores each program's %smid.
Every launch runs under ncu (`--cache-control all`): the SMs' read requests, and where they were served (near
partition, far partition, DRAM).

Why: the simulator issues a program's independent loads together and the programs of a turn one after the
other, so for stencil2d (one round of loads per program) its prediction is the one-at-a-time order whatever the
lag. Where the GPU agrees with it under a lag and not free, what the model leaves out is in how the programs run
together, not in the caches' rules.

What it showed (H100, tests/fixtures/probes/probe-serial-*h100*.json.gz, nine machines, 2026-11-27): free (1,320
programs at once) the simulator counts up to 1.0-1.2 points too many near hits on five machines (rank correlation
over the ten remaps 0.67-0.89, as in the fidelity recordings) and none on four (0.15-0.31 on average, with and
without the timer reads). Where the excess is, waits of 256-1,280 programs bring the simulator within 0.1-0.6
(ranks 0.95-1.00), and one atomic round trip before each program's loads, with no wait (`-1`), halves it, as a lag
above the resident count does (1,600: nothing really waits); the release alone (`-2`) does little. With few at once
the machines part by up to 3 points (three buffers on one machine agree). `--timing` prints when each program's
loads went out and came back. Ten more machines the same evening all had the excess, and showed what else decides
it: the remap's own code (identity and grouped(group_m=1), one launch order on the same SMs, measure 15.7 and 14.7 %
near), fading as horizontal neighbours launch further apart (`--remaps "grouped(group_m=2);..."`); not which load a
program issues first (`--load-orders`), and not a one-sided halo alone (`--kernel benchmarks/outside_suite/halo1d.py`):
both halos together make it (`halo1d_two_sided.py`).

    python benchmarks/probe_serial.py OUT.json.gz          # on the GPU: runs ncu on itself (a few minutes)
    python benchmarks/probe_serial.py OUT.json.gz --lags "medium:0,-1,-2,1280"   # other lags (-1, -2: no wait)
    python benchmarks/probe_serial.py OUT.json.gz --buffers 3 --repeats 1   # inputs at three places in memory
    python benchmarks/probe_serial.py OUT.json.gz --lags "medium:0" --remaps "identity;grouped(group_m=1)"
    python benchmarks/probe_serial.py OUT.json.gz --lags "medium:0" --load-orders "own;right,center,up,down,left"
    python benchmarks/probe_serial.py OUT.json.gz --kernel benchmarks/outside_suite/halo1d.py --remaps "identity"
    python benchmarks/probe_serial.py --compare OUT.json.gz  # anywhere: the h100 preset on the recorded SMs
    TRITON_INTERPRET=1 python benchmarks/probe_serial.py --check [--kernel K]   # on the CPU: exact, flags set
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from swizzleperf.profilers import ncu  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probed_kernel import (  # noqa: E402
    STENCIL2D,
    family_remap,
    kernel_source,
    load_module,
    load_statements,
    probed_module,
)

FREE, TOUCH, RELEASE = 0, -1, -2  # lags that wait for nothing: the kernel as is; one atomic before the loads and
#                                  the release after them; only the release
LAGS = {"small": (FREE, 1), "medium": (FREE, 1, 8, 64, 256, 1024)}
REPEATS = 2
METRICS = (ncu.READ_HIT, ncu.READ_MISS, ncu.FAR_READ_HIT, ncu.FAR_READ_MISS, ncu.DRAM_FILLS, ncu.DRAM_READ,
           ncu.SM_READ_SECTORS, ncu.L1_HIT, ncu.L1_MISS, ncu.DURATION)


def lag_name(lag: int) -> str:
    return {FREE: "free", TOUCH: "atomic, no wait", RELEASE: "release only"}.get(lag, f"lag {lag}")

def kernel_file(step: dict) -> Path:
    """The kernel a launch ran: stencil2d unless the step names another (records before `--kernel` name none)."""
    return ROOT / step["kernel"] if "kernel" in step else STENCIL2D


def launches(lags: dict[str, tuple[int, ...]] = LAGS, buffers: int = 1, repeats: int = REPEATS,
             load_orders: tuple[tuple[str, ...], ...] = ((),), remap_labels: tuple[str, ...] = (),
             kernel_path: Path = STENCIL2D) -> list[dict]:
    """What the child launches, in order: every (size, input buffer, remap, load order, lag), `repeats` times (load
    order (): the kernel file's). The remaps: fidelity.py's ten, or family instances by label. The kernel must
    take stencil2d's arguments (x, out, M, N, strides, BLOCK_M, BLOCK_N, NUM_XCDS)."""
    from swizzleperf.hardware.presets import PRESETS
    from swizzleperf.kernel.contract import load_kernel
    from swizzleperf.lab.fidelity.measure import fidelity_remaps

    kernel = load_kernel(kernel_path)
    which = {} if kernel_path.resolve() == STENCIL2D else {"kernel": str(kernel_path.resolve().relative_to(ROOT))}
    remaps = ([(label, family_remap(label, kernel)) for label in remap_labels] if remap_labels
              else fidelity_remaps(kernel, PRESETS["h100"]))
    return [{"size": size, "buffer": buffer, "remap": label, "source": source, "lag": lag, "repeat": repeat}
            | which | ({"load_order": list(order)} if order else {})
            for repeat in range(repeats) for size, sizes_lags in lags.items() for buffer in range(buffers)
            for label, source in remaps for order in load_orders for lag in sizes_lags]


def launch(module, kernel, size: dict, lag: int, x):
    """One launch of the probed kernel on input `x` (`lag`: LAGS) -> (output, reference, flags, SMs, times: per
    program when its loads went out and when they were back, ns of %globaltimer)."""
    import torch
    import triton

    from swizzleperf.hardware.presets import PRESETS

    block_m, block_n, device = kernel.module.BLOCK_M, kernel.module.BLOCK_N, x.device
    out = torch.empty_like(x)
    slots = triton.cdiv(size["M"], block_m) * triton.cdiv(size["N"], block_n)
    done = torch.zeros(slots, dtype=torch.int32, device=device)
    sms = torch.full((slots,), -1, dtype=torch.int32, device=device)
    times = torch.zeros((slots, 2), dtype=torch.int64, device=device)
    module.probed_kernel[(slots,)](x, out, size["M"], size["N"], x.stride(0), out.stride(0), done_ptr=done,
                                   smid_ptr=sms, times_ptr=times, lag=max(lag, 0), START=lag > 0 or lag == TOUCH,
                                   END=lag != FREE, BLOCK_M=block_m, BLOCK_N=block_n,
                                   NUM_XCDS=PRESETS["h100"].num_domains)
    return out, kernel.fn("reference")({"x": x}, size)["out"], done, sms, times


def parse_load_orders(text: str | None) -> tuple[tuple[str, ...], ...]:
    """`own;right,center,up,down,left` -> ((), ("right", ...)): `own` is the kernel file's order."""
    if not text:
        return ((),)
    return tuple(() if part == "own" else tuple(part.split(",")) for part in text.split(";"))


def mode_name(row: dict) -> str:
    """A launch's mode: its lag, and its load order where it is not the file's."""
    order = row.get("load_order")
    return lag_name(row["lag"]) + (f", {order[0]} first" if order else "")


def parse_lags(text: str | None) -> dict[str, tuple[int, ...]]:
    """`medium:0,1024,1280;small:0,1` -> {size: lags}; None: LAGS."""
    if not text:
        return LAGS
    return {size: tuple(int(k) for k in lags.split(",")) for size, _, lags in
            (part.partition(":") for part in text.split(";"))}


def run_child(plan_file: str) -> int:
    """ncu's child: every launch of the plan the parent wrote (`main`) in order; each checked against the reference,
    its SMs (and load times) written where the plan says. Each (size, buffer) has its own input tensor, all kept
    alive: buffers lie at different places in memory."""
    import torch

    from swizzleperf.kernel.contract import load_kernel

    spec = json.loads(Path(plan_file).read_text())
    plan, times, meta = spec["launches"], spec["times"], spec["meta"]
    modules, inputs, smids, clocks = {}, {}, [], []
    with tempfile.TemporaryDirectory() as tmp:
        for step in plan:
            kernel = load_kernel(kernel_file(step))
            which = (kernel_file(step), step["source"], tuple(step.get("load_order", ())))
            if which not in modules:
                source = probed_module(step["source"], which[0], times=times, load_order=which[2])
                modules[which] = load_module(source, Path(tmp), len(modules))
            size = kernel.size(step["size"])
            key = (which[0], step["size"], step["buffer"])
            if key not in inputs:
                inputs[key] = kernel.fn("make_inputs")(size, 0, "cuda")["x"]
            out, expected, done, sms, stamps = launch(modules[which], kernel, size, step["lag"], inputs[key])
            torch.testing.assert_close(out, expected, **kernel.module.TOLERANCE)
            assert done.sum().item() == (0 if step["lag"] == FREE else done.numel()), "a flag is wrong"
            smids.append(sms.tolist())
            clocks.append((stamps - stamps[:, 0].min()).T.tolist())
    Path(meta).write_text(json.dumps({"device": torch.cuda.get_device_name(0), "smids": smids, "times": clocks}))
    return 0


def check_on_cpu(kernel_path: Path = STENCIL2D) -> int:
    """Under TRITON_INTERPRET=1: the probed kernel (without %smid, which the interpreter lacks), free, with lags 1
    and 2, an atomic without a wait and the release alone, and free with its loads in reverse order, under every
    remap at the tiny size, computes the kernel's reference exactly and sets every flag."""
    import torch

    from swizzleperf.hardware.presets import PRESETS
    from swizzleperf.kernel.contract import load_kernel
    from swizzleperf.lab.fidelity.measure import fidelity_remaps

    kernel = load_kernel(kernel_path)
    order = tuple(reversed(load_statements(kernel_source(kernel_path)[1])))
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, source) in enumerate(fidelity_remaps(kernel, PRESETS["h100"])):
            module = load_module(probed_module(source, kernel_path, record_sm=False), Path(tmp), i)
            for lag in (FREE, 1, 2, TOUCH, RELEASE):
                size = kernel.size("tiny")
                x = kernel.fn("make_inputs")(size, 0, "cpu")["x"]
                out, expected, done, _, _ = launch(module, kernel, size, lag, x)
                torch.testing.assert_close(out, expected, atol=0, rtol=0)
                flags = int(done.sum())
                assert flags == (0 if lag == FREE else done.numel()), f"{label}, {lag_name(lag)}: {flags} flags set"
                print(f"{label}, {lag_name(lag)}: exact, {flags} of {done.numel()} flags set")
            reordered = probed_module(source, kernel_path, record_sm=False, load_order=order)
            module = load_module(reordered, Path(tmp), 100 + i)
            out, expected, _, _, _ = launch(module, kernel, size, FREE, x)
            torch.testing.assert_close(out, expected, atol=0, rtol=0)
            print(f"{label}, free, loads in the order {','.join(order)}: exact")
    return 0


def main(out: str, plan: list[dict], timed: bool) -> int:
    """Run `plan` under ncu (the child reads it from a file), then write the record to `out` and compare."""
    from swizzleperf.errors import ProfilerError

    meta = Path(out).with_suffix(".sms.json")
    with tempfile.TemporaryDirectory() as tmp:
        plan_file = Path(tmp) / "plan.json"
        plan_file.write_text(json.dumps({"launches": plan, "times": timed, "meta": str(meta)}))
        try:
            measured = ncu.profile_program([sys.executable, __file__, "--child", str(plan_file)], METRICS,
                                           "^probed_kernel$").launches
        except ProfilerError as exc:
            print(exc, file=sys.stderr)
            return 1
    if len(measured) != len(plan) or not meta.exists():
        print(f"ncu profiled {len(measured)} launches of the {len(plan)} planned", file=sys.stderr)
        return 1
    recorded = json.loads(meta.read_text())  # without the timer reads the times are zeros: not kept
    rows = [{**step, "metrics": dict(launch.metrics), "smid": sms}
            | ({"loads_out_ns": out_ns, "loads_back_ns": back_ns} if timed else {})
            for step, launch, sms, (out_ns, back_ns) in zip(plan, measured, recorded["smids"], recorded["times"])]
    with gzip.open(out, "wt") as f:
        json.dump({"device": recorded["device"], "nvidia_smi": _gpu_facts(), "rows": rows}, f)
    from swizzleperf.errors import TraceCaptureError

    try:
        return compare(out)
    except TraceCaptureError as exc:  # e.g. a GPU machine with another triton than the simulator's capture needs
        print(f"recorded {len(rows)} launches to {out}; the simulator cannot capture the kernel here ({exc}): run "
              f"`python benchmarks/probe_serial.py --compare {out}` where the README's set-up is")
        return 0


def _gpu_facts() -> str | None:
    """nvidia-smi's line for the GPU (which chip, driver, clocks, power): the free launch's error differs from
    machine to machine, so every record says which it was."""
    query = "name,uuid,driver_version,vbios_version,clocks.max.sm,clocks.sm,clocks.mem,power.limit,temperature.gpu"
    try:
        done = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def predicted(rows: list[dict]) -> list[tuple[float, float, float]]:
    """The h100 preset's (near, far, DRAM) for each recorded launch, on the SMs it ran on (stencil2d: with the
    occupancy and L1 of its fidelity recording; another kernel: the preset's L1 and its declared occupancy, which
    a kernel of one round of loads on recorded SMs does not depend on; one at a time or not, the model's order is
    the same)."""
    from swizzleperf.hardware.presets import PRESETS
    from swizzleperf.kernel.contract import load_kernel
    from swizzleperf.lab.fidelity.compare import hardware_for, predicted_split, simulated_on_sms
    from swizzleperf.lab.fidelity.measurement import Measurement
    from swizzleperf.profilers.sim import SimProfiler

    recording = Measurement.model_validate_json(
        (ROOT / "tests/fixtures/fidelity/measured-h100-ncu2025.3.json").read_text())
    record = next(k for k in recording.kernels if k.kernel == "stencil2d")
    profilers, results = {}, []
    for row in rows:
        path = kernel_file(row)
        if path not in profilers:
            hw = hardware_for(record, PRESETS["h100"]) if path == STENCIL2D else PRESETS["h100"]
            profilers[path] = load_kernel(path), SimProfiler(hw, gpu_occupancy=False)
        kernel, profiler = profilers[path]
        hw, _ = profiler.kernel_hardware(kernel, row["size"])
        slots = profiler.program_for_slot(kernel, row["source"], row["size"])
        result = simulated_on_sms(profiler, kernel, row["size"], slots, row["smid"])
        results.append(predicted_split(result.to_report(kernel.name, row["size"], hw)))
    return results


def _warn_of_extra_requests(rows: list[dict]) -> None:
    """A launch under a lag should request the free launch's read sectors: the waits are atomics, not reads."""
    def key(r):
        return r["size"], r.get("buffer", 0), r["remap"], r["repeat"], r.get("load_order")

    for row in rows:
        free = next((r for r in rows if key(r) == key(row) and r["lag"] == FREE), None)
        if free is None:
            continue
        extra = row["metrics"][ncu.SM_READ_SECTORS] / free["metrics"][ncu.SM_READ_SECTORS] - 1
        if abs(extra) > 0.01:
            print(f"  warning: {row['size']} {row['remap']} {mode_name(row)} requested {100 * extra:+.1f} % of "
                  f"the free launch's read sectors (the waits' own traffic?)")


def compare(path: str) -> int:
    """Per size, remap and mode (lag, load order): the near hits ncu counted and the simulator predicts on the same
    SMs (and far hits and DRAM fills, measured), then per mode the rank correlation of the near hits over the
    remaps. The simulator replays the kernel file's trace: the order of a program's loads is not in its model."""
    from swizzleperf.lab.fidelity.compare import measured_split
    from swizzleperf.lab.fidelity.ranks import spearman

    with gzip.open(path, "rt") as f:
        record = json.load(f)
    rows = record["rows"]
    sims = predicted(rows)
    _warn_of_extra_requests(rows)
    kernels = ", ".join(dict.fromkeys(kernel_file(r).stem for r in rows))
    print(f"{record['device']}, {kernels}, % of the SMs' read requests, mean of the launches: ncu near / far / DRAM, "
          f"then the h100 preset's predicted near hits on the same SMs (sim); lag K: each program waits for the one launched K "
          f"earlier; atomic, no wait: one atomic round trip before the loads")
    for size in dict.fromkeys(r["size"] for r in rows):
        modes = list(dict.fromkeys(mode_name(r) for r in rows if r["size"] == size))
        labels = list(dict.fromkeys(r["remap"] for r in rows if r["size"] == size))
        print(f"  {size}: {'remap':22s}" + "".join(f"{mode[:20] + ': ncu, sim':>26s}" for mode in modes))
        near = {mode: ([], []) for mode in modes}
        for label in labels:
            cells = []
            for mode in modes:
                mine = [i for i, r in enumerate(rows) if (r["size"], r["remap"], mode_name(r)) == (size, label, mode)]
                got = [sum(measured_split(rows[i]["metrics"])[k] for i in mine) / len(mine) for k in range(3)]
                sim = sum(sims[i][0] for i in mine) / len(mine)
                near[mode][0].append(got[0])
                near[mode][1].append(sim)
                cells.append(f"{got[0]:5.1f}/{got[1]:4.1f}/{got[2]:5.1f}, {sim:5.1f}".rjust(26))
            print(f"  {'':{len(size) + 1}s} {label[:22]:22s}" + "".join(cells))
        print(f"  {'':{len(size) + 1}s} {'rank corr., near':22s}"
              + "".join(f"{spearman(*near[mode]):26.2f}" for mode in modes))
    return 0


def timing(path: str, skip: int = 1320) -> int:
    """Per launch mode (medium, the first buffer and launch): after the first `skip` programs, how far apart in
    time the loads of programs d launches apart went out (median ns; share within 64 ns, two timer ticks; share
    that went out before the earlier-launched one's), and a program's median time from its loads going out to
    their being back."""
    import numpy as np

    with gzip.open(path, "rt") as f:
        rows = [r for r in json.load(f)["rows"] if "loads_out_ns" in r and r["size"] == "medium"
                and r.get("buffer", 0) == 0 and r["repeat"] == 0]
    if not rows:
        print(f"{path}: no times recorded (records before the probe kept them)")
        return 1
    print("measured (%globaltimer, 32 ns ticks), per mode / remap: loads out, programs d apart: median ns, within "
          "64 ns, earlier; a program's loads back after")
    for row in rows:
        out = np.asarray(row["loads_out_ns"], np.int64)[skip:]
        back = np.asarray(row["loads_back_ns"], np.int64)[skip:]
        cells = []
        for d in (1, 8, 64):
            gap = out[d:] - out[:-d]
            cells.append(f"d={d}: {np.median(gap):5.0f} {np.mean(np.abs(gap) < 64):.2f} {np.mean(gap < 0):.2f}")
        print(f"  {lag_name(row['lag'])[:16]:16s} {row['remap'][:22]:22s} " + "  ".join(cells)
              + f"  back after {np.median(back - out):6.0f} ns")
    return 0


def _arguments(argv: list[str]):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", help="where the GPU run writes its record (.json.gz)")
    parser.add_argument("--compare", metavar="RECORD", help="simulate a record's launches on their SMs (no GPU)")
    parser.add_argument("--check", action="store_true", help="the probed kernel under TRITON_INTERPRET=1 (no GPU)")
    parser.add_argument("--timing", metavar="RECORD", help="when the programs' loads went out (no GPU)")
    parser.add_argument("--child", metavar="PLAN", help=argparse.SUPPRESS)
    parser.add_argument("--lags", help='per size, the lags to launch: "medium:0,-1,-2,1280;small:0,1" (default %s)'
                        % ";".join(f"{k}:{','.join(map(str, v))}" for k, v in LAGS.items()))
    parser.add_argument("--buffers", type=int, default=1,
                        help="input buffers per size, each at its own place in memory")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="launches of each (buffer, remap, lag)")
    parser.add_argument("--no-times", action="store_true", help="leave out the timer reads around the loads")
    parser.add_argument("--kernel", default=str(STENCIL2D.relative_to(ROOT)),
                        help="a kernel taking stencil2d's arguments (default %(default)s)")
    parser.add_argument("--remaps", help='family instances to launch instead of fidelity.py\'s ten: '
                        '"grouped(group_m=2);col_major"')
    parser.add_argument("--load-orders", help='the orders of the kernel\'s loads to launch, by the names they assign: '
                        '"own;right,center,up,down,left" (own: the file\'s, the default)')
    args = parser.parse_args(argv)
    if not (args.out or args.compare or args.check or args.child or args.timing):
        parser.error("give OUT, --compare RECORD, --timing RECORD or --check")
    return args


def _plan(args) -> list[dict]:
    return launches(parse_lags(args.lags), args.buffers, args.repeats, parse_load_orders(args.load_orders),
                    tuple(args.remaps.split(";")) if args.remaps else (), ROOT / args.kernel)


if __name__ == "__main__":
    args = _arguments(sys.argv[1:])
    if args.child:
        sys.exit(run_child(args.child))
    if args.check:
        sys.exit(check_on_cpu(ROOT / args.kernel))
    if args.compare:
        sys.exit(compare(args.compare))
    if args.timing:
        sys.exit(timing(args.timing))
    sys.exit(main(args.out, _plan(args), timed=not args.no_times))
