"""Does the simulator agree with real counters? Measure remaps on a GPU, simulate them, compare.

    python benchmarks/fidelity.py measure OUT.json [--kernels K ...]   # on an NVIDIA GPU with ncu
    python benchmarks/fidelity.py compare OUT.json [--hardware h100] [--repeats OUT2.json ...]  # anywhere
    python benchmarks/fidelity.py compare benchmarks/recorded/streams-start-apart-ncu-h200.json --hardware h200
        # attention's Q blocks that share a head's K/V but start apart (probe_stream_starts.py)
        [--placement RECORD.json.gz]  # also on the SMs probe_placement.py --remaps recorded
        [--walk-seeds 1,2,3]  # also under other draws of the scheduler walk (h100, h200): the ranges
        [--younger-slowdown S]  # a CU's k-th oldest program at 1 / (1 + S k) instead of the preset's pace
    python benchmarks/fidelity.py merge OUT.json PART.json ... [--kernels K ...]  # parts measured side by side
    python benchmarks/fidelity.py requests OUT.json ... [--hardware h100] [--l1-ways N]  # the L1's filtering

`measure` profiles every suite kernel at its default size (attention at mha64_4k) under the
identity, the recorded best remap and the search space's family defaults (one ncu run per kernel,
`--cache-control all`), and writes the raw counters. `compare` simulates the same remaps with the
preset of the measured GPU and prints, per kernel, the rank correlation and mean absolute error of
the read hit rate and of DRAM bytes, and the pooled figures; with `--placement`, the same once more
with each slot on the SM the GPU ran it on (what error is left there is not the scheduler model's).
`requests` checks what the L1 passes on: the L2 read requests of each kernel's identity launch,
predicted and counted by ncu.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

SUITE = ("softmax", "gemm", "transpose", "layernorm", "attention", "elementwise", "spmv", "blackscholes",
         "fdtd2d", "stencil2d", "smithwaterman")
SIZE_OVERRIDES = {"attention": "mha64_4k"}


OUTSIDE = ("colsum", "gemv_batched")  # benchmarks/outside_suite: patterns the model was not built around


STREAMS = re.compile(r"attention_h128_(\d+)k_(\d)per_sm")  # benchmarks/probe_stream_starts.py's variants


def kernel_path(name: str) -> Path:
    """A suite kernel, one of benchmarks/outside_suite, a variant of attention probe_stream_starts.py measured
    (written to a temporary folder), or a path."""
    if name.endswith(".py"):
        return Path(name)
    if variant := STREAMS.fullmatch(name):
        from probe_stream_starts import write_variant

        folder = Path(tempfile.mkdtemp(prefix="swizzleperf-streams-"))
        return write_variant(folder, int(variant[1]) * 1024, int(variant[2]))
    suite = ROOT / "kernels" / f"{name}.py"
    return suite if suite.exists() else ROOT / "benchmarks" / "outside_suite" / f"{name}.py"


def _kernels(names: list[str]):
    from swizzleperf.kernel.contract import load_kernel

    found = []
    for name in names:
        kernel = load_kernel(kernel_path(name))
        found.append((kernel, SIZE_OVERRIDES.get(kernel.name, kernel.default_size)))
    return found


def cmd_measure(args) -> int:
    from swizzleperf.hardware.detect import detect
    from swizzleperf.hardware.presets import PRESETS
    from swizzleperf.lab.fidelity.measure import measure

    hw = detect() or PRESETS["h100"]
    out = Path(args.out)

    def done(result):
        record = result.kernels[-1]
        status = record.error or f"{len(record.remaps)} remaps, compiled {record.compiled}"
        print(f"{record.kernel} ({record.size}): {status}", flush=True)
        out.write_text(result.model_dump_json(indent=1))  # kept whole after every kernel

    result = measure(_kernels(args.kernels), hw, raw_dir=out.parent / "raw", on_kernel=done,
                     extra_metrics=args.extra_metrics)
    out.write_text(result.model_dump_json(indent=1))
    print(f"wrote {out} ({result.device}, {result.tool}; dropped metrics: {result.dropped_metrics or 'none'})")
    return 0


def cmd_compare(args) -> int:
    from swizzleperf.hardware.select import resolve
    from swizzleperf.kernel.contract import load_kernel
    from swizzleperf.lab.fidelity.compare import compare_kernel
    from swizzleperf.lab.fidelity.measurement import Measurement
    from swizzleperf.lab.fidelity.recordings import averaged, reproducibility, same_remaps
    from swizzleperf.lab.fidelity.sm_placements import load_placements

    measurement = Measurement.model_validate_json(Path(args.measurement).read_text())
    placements = load_placements(args.placement) if args.placement else None
    repeats = [Measurement.model_validate_json(Path(p).read_text()) for p in args.repeats]
    hw, _ = resolve(args.hardware)
    if args.younger_slowdown is not None:
        hw = hw.model_copy(update={"dispatch": hw.dispatch.model_copy(
            update={"younger_slowdown": args.younger_slowdown})})
    if args.walk_seeds and hw.dispatch.walk is None:
        print(f"--walk-seeds: {hw.name} has no scheduler walk to draw again", file=sys.stderr)
        return 2
    print(f"measured: {measurement.device}, {measurement.tool}, --cache-control {measurement.cache_control}; "
          f"simulated: preset {hw.name} with each kernel's measured occupancy and L1 carve-out")
    print("read hit = the SMs' L2 read requests that did not miss (ncu: 1 - srcunit_tex op_read lookup misses / read "
          "sectors returned to the SMs, so requests merged before the lookup count as served; sim: 1 - L2 read misses "
          "/ L1 read misses); 'lookup' = the L2's own read lookup hit rate, which the simulator does not predict")
    results = []
    for record in measurement.kernels:
        if record.error or (args.kernels and record.kernel not in args.kernels):
            continue
        recordings = [record] + [k for m in repeats for k in m.kernels if not k.error and same_remaps(record, k)]
        noise = reproducibility(recordings) if len(recordings) > 1 else None
        kernel, measured = load_kernel(kernel_path(record.kernel)), averaged(recordings)
        result = compare_kernel(kernel, measured, hw, noise=noise, placements=placements)
        _print_kernel(result, placements.device if placements else None)
        if args.walk_seeds:
            _print_over_seeds([result] + [compare_kernel(kernel, measured, hw.with_walk_seed(seed), noise=noise)
                                          for seed in args.walk_seeds], [hw.dispatch.walk.seed] + args.walk_seeds)
        results.append(result)
    if results:
        _print_pooled(results, placements.device if placements else None)
    return 0


def _print_kernel(result, placed_by: str | None = None) -> None:
    noise = result.noise
    print(f"\n{result.kernel} ({result.size}): {result.hardware.programs_per_cu} programs/SM, "
          f"L1 {result.hardware.l1_bytes_per_cu // 1024} KB")
    if noise is not None:
        rho = noise.worst_rank_correlation
        print(f"  measured: the mean of {noise.recordings} recordings; between two of them the rank correlation "
              f"is as low as {'n/a' if rho is None else f'{rho:.2f}'} and a remap's read hit rate moves by up to "
              f"{noise.largest_difference:.2f} points")
    print(f"  {'remap':42s} {'lookup':>7s} {'ncu read':>9s} {'sim read':>9s} {'ceiling':>8s} {'ncu DRAM MB':>12s} "
          f"{'sim DRAM MB':>12s}")
    for r in result.remaps:
        print(f"  {r.label[:42]:42s} {r.measured_lookup_pct:7.2f} {r.measured_read_pct:9.2f} "
              f"{r.predicted_read_pct:9.2f} {r.ceiling_pct:8.2f} "
              f"{r.measured_dram_bytes / 1e6:12.2f} {r.predicted_dram_bytes / 1e6:12.2f}")
    _print_split(result)
    print(f"  MAE {result.read_mae:.2f} points; {_ranking(result)} (measured spread {result.measured_spread:.2f}); "
          f"DRAM mean |rel err| {100 * result.dram_mean_abs_rel_error:.1f}%; measured - ceiling max "
          f"{result.worst_over_ceiling:+.2f}")
    distinct = result.distinct_launches()
    if distinct is not None:
        same = "; ".join(r.label for r in distinct.remaps if " = " in r.label)
        print(f"  the same launch order at this size: {same}; over the {len(distinct.remaps)} distinct orders "
              f"(each at its measured mean): MAE {distinct.read_mae:.2f} points; {_ranking(distinct)}")
    placed = result.on_recorded_placement()
    if placed is not None:
        print(f"  sim, each slot on the SM the --placement record gives ({placed_by}):")
        for r in placed.remaps:
            print(f"  {r.label[:42]:42s} {'':7s} {r.measured_read_pct:9.2f} {r.predicted_read_pct:9.2f}")
        print(f"  MAE {placed.read_mae:.2f} points; {_ranking(placed)}")


def _print_over_seeds(results, seeds: list[int]) -> None:
    """The ranking and error under several draws of the walk's disorder: how much of them is the draw's."""
    def span(values) -> str:
        values = [v for v in values if v is not None]
        return f"{min(values):.2f}-{max(values):.2f}" if values else "n/a"
    ties = "" if results[0].noise is None else \
        f", with measured ties {span(r.rank_correlation_beyond_noise for r in results)}"
    distinct = [d for r in results if (d := r.distinct_launches()) is not None]
    over_distinct = "" if not distinct else (
        f"; over the distinct orders rank corr {span(d.rank_correlation for d in distinct)}" +
        ("" if distinct[0].noise is None else
         f", with measured ties {span(d.rank_correlation_beyond_noise for d in distinct)}"))
    print(f"  over walk seeds {', '.join(map(str, seeds))}: rank corr {span(r.rank_correlation for r in results)}"
          f"{ties}; MAE {span(r.read_mae for r in results)}{over_distinct}")


def _ranking(result) -> str:
    rho, firm = result.rank_correlation, result.rank_correlation_beyond_noise
    agree, pairs = result.ordered_pairs()
    ties = "" if result.noise is None else f", {'n/a' if firm is None else f'{firm:.2f}'} with measured ties"
    return (f"rank corr {'n/a' if rho is None else f'{rho:.2f}'}{ties}; pairs apart by > 1 point ordered as "
            f"measured: {agree:g}/{pairs}")


def _print_split(result) -> None:
    """Where the reads were served, measured and predicted, for recordings with the far partition's counters."""
    rows = [r for r in result.remaps if r.measured_split and r.predicted_split]
    if not rows:
        return
    print(f"  {'served from (% of read requests)':42s} {'near ncu':>9s} {'sim':>6s} {'far ncu':>8s} {'sim':>6s} "
          f"{'DRAM ncu':>9s} {'sim':>6s}")
    for r in rows:
        (near, far, dram), (p_near, p_far, p_dram) = r.measured_split, r.predicted_split
        print(f"  {r.label[:42]:42s} {near:9.2f} {p_near:6.2f} {far:8.2f} {p_far:6.2f} {dram:9.2f} {p_dram:6.2f}")


def _print_pooled(results, placed_by: str | None = None) -> None:
    import numpy as np

    pooled = [r for result in results for r in result.remaps]
    agree, pairs = (sum(column) for column in zip(*(result.ordered_pairs() for result in results)))
    mae = np.mean([abs(r.measured_read_pct - r.predicted_read_pct) for r in pooled])
    lookup_mae = np.mean([abs(r.measured_lookup_pct - r.predicted_read_pct) for r in pooled])
    dram = np.mean([abs(r.predicted_dram_bytes - r.measured_dram_bytes) / max(r.measured_dram_bytes, 1)
                    for r in pooled])
    print(f"\npooled over {len(pooled)} (kernel, remap) pairs: read hit MAE {mae:.2f} points, DRAM mean |rel err| "
          f"{100 * dram:.1f}%, max measured - ceiling {max(r.worst_over_ceiling for r in results):+.2f} points, "
          f"pairs apart by > 1 point ordered as measured {agree:g}/{pairs}; against the L2's own lookup "
          f"hit rate the read hit MAE would be {lookup_mae:.2f}")
    placed = [(result, on) for result in results if (on := result.on_recorded_placement()) is not None]
    if placed:
        rows = [r for result, _ in placed for r in result.remaps]
        agree, pairs = (sum(column) for column in zip(*(on.ordered_pairs() for _, on in placed)))
        mae = np.mean([abs(r.measured_read_pct - r.placed_read_pct) for r in rows])
        model = np.mean([abs(r.measured_read_pct - r.predicted_read_pct) for r in rows])
        print(f"sim on the SMs of the --placement record ({placed_by}), over the {len(rows)} pairs it has: read hit "
              f"MAE {mae:.2f} points (sim, the dispatch model's placement: {model:.2f}), pairs apart by > 1 point "
              f"ordered as measured {agree:g}/{pairs}")


def cmd_from_raw(args) -> int:
    """Rebuild OUT.json from the raw ncu CSVs a measurement saved (no GPU needed)."""
    from swizzleperf.hardware.presets import PRESETS
    from swizzleperf.lab.fidelity.measure import kernel_record
    from swizzleperf.lab.fidelity.measurement import Measurement

    raw = Path(args.raw_dir)
    kernels = [kernel_record(k, PRESETS[args.hardware], size, (raw / f"{k.name}-{size}.csv").read_text())
               for k, size in _kernels(args.kernels) if (raw / f"{k.name}-{size}.csv").exists()]
    result = Measurement(device=args.device, tool=args.tool, cache_control="all", versions={}, kernels=kernels)
    Path(args.out).write_text(result.model_dump_json(indent=1))
    print(f"wrote {args.out}: {len(kernels)} kernels")
    return 0


def cmd_requests(args) -> int:
    """The L2 read requests (the L1's misses) of each kernel's identity launch, predicted against ncu's."""
    import numpy as np

    from swizzleperf.hardware.select import resolve
    from swizzleperf.kernel.contract import load_kernel
    from swizzleperf.lab.fidelity.compare import hardware_for
    from swizzleperf.lab.fidelity.measurement import Measurement
    from swizzleperf.profilers.ncu import read_requests
    from swizzleperf.profilers.sim import SimProfiler

    hw, _ = resolve(args.hardware)
    if args.l1_ways:
        hw = hw.model_copy(update={"l1_ways": args.l1_ways})
    errors = []
    print(f"L2 read requests (sectors) of each identity launch: sim ({hw.name}, {hw.l1_ways}-way L1) against ncu")
    for path in args.measurements:
        for record in Measurement.model_validate_json(Path(path).read_text()).kernels:
            if record.error or not record.remaps:
                continue
            kernel, remap = load_kernel(kernel_path(record.kernel)), record.remaps[0]
            profiler = SimProfiler(hardware_for(record, hw), gpu_occupancy=False)
            report = profiler.profile(kernel, remap.source, record.size)
            measured = read_requests(remap.metrics)[0]
            programs = int(np.prod(kernel.grid(record.size)))
            errors.append((report.accesses - measured) / measured)
            print(f"  {record.kernel:14s} sim {report.accesses:>12,} ncu {measured:>14,.0f} "
                  f"({100 * errors[-1]:+.1f} %); "
                  f"per program {report.accesses / programs:,.1f} / {measured / programs:,.1f}", flush=True)
    if errors:
        print(f"mean |error| {100 * np.mean(np.abs(errors)):.1f} % over {len(errors)} kernels")
    return 0


def cmd_merge(args) -> int:
    """One measurement from parts of one run measured side by side, one `measure --kernels` per GPU."""
    from swizzleperf.lab.fidelity.measurement import Measurement, merged

    parts = [Measurement.model_validate_json(Path(p).read_text()) for p in args.parts]
    try:
        result = merged(parts, order=(*SUITE, *OUTSIDE), keep=tuple(args.kernels))
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    Path(args.out).write_text(result.model_dump_json(indent=1))
    print(f"wrote {args.out}: {len(result.kernels)} kernels from {len(parts)} parts ({result.device})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="profile the remaps with ncu (needs an NVIDIA GPU)")
    m.add_argument("out")
    m.add_argument("--kernels", nargs="+", default=list(SUITE),
                   help=f"suite kernels, paths, or the kernels outside the suite: {', '.join(OUTSIDE)}")
    m.add_argument("--extra-metrics", nargs="*", default=[],
                   help="more ncu metrics to record beside the standard set (unknown ones are dropped and listed)")
    c = sub.add_parser("compare", help="simulate the measured remaps and compare (no GPU needed)")
    c.add_argument("measurement")
    c.add_argument("--hardware", default="h100")
    c.add_argument("--kernels", nargs="*", default=[])
    c.add_argument("--repeats", nargs="*", default=[], metavar="MEASUREMENT",
                   help="more recordings of the same remaps: compared against the mean, with how much they disagree")
    c.add_argument("--placement", metavar="RECORD",
                   help="SMs recorded by probe_placement.py --remaps: also simulate each remap on them")
    c.add_argument("--younger-slowdown", type=float, default=None, metavar="S",
                   help="simulate with this pace rule instead of the preset's (a kernel's own, from fit_pace.py)")
    c.add_argument("--walk-seeds", type=lambda text: [int(x) for x in text.split(",")], default=[], metavar="S,...",
                   help="simulate again with the scheduler walk's disorder drawn from these seeds too (h100, h200) "
                        "and print each kernel's range of rank correlation and error")
    r = sub.add_parser("from-raw", help="rebuild the measurement JSON from saved raw ncu CSVs")
    r.add_argument("raw_dir")
    r.add_argument("out")
    r.add_argument("--kernels", nargs="+", default=list(SUITE))
    r.add_argument("--hardware", default="h100")
    r.add_argument("--device", required=True)
    r.add_argument("--tool", required=True)
    g = sub.add_parser("merge", help="one measurement from parts measured side by side (one per GPU)")
    g.add_argument("out")
    g.add_argument("parts", nargs="+")
    g.add_argument("--kernels", nargs="*", default=[], help="keep only these (default: all)")
    q = sub.add_parser("requests", help="the L2 read requests the L1 passes on, predicted against ncu (no GPU needed)")
    q.add_argument("measurements", nargs="+")
    q.add_argument("--hardware", default="h100")
    q.add_argument("--l1-ways", type=int, default=0, help="override the preset's L1 associativity")
    args = parser.parse_args()
    return {"measure": cmd_measure, "compare": cmd_compare, "from-raw": cmd_from_raw, "merge": cmd_merge,
            "requests": cmd_requests}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
