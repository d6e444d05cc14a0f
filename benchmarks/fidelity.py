"""Does the simulator agree with real counters? Measure remaps on a GPU, simulate them, compare.

    python benchmarks/fidelity.py measure OUT.json [--kernels K ...]   # on an NVIDIA GPU with ncu
    python benchmarks/fidelity.py compare OUT.json [--hardware h100]   # anywhere: simulate the same remaps

`measure` profiles every suite kernel at its default size (attention at mha64_4k) under the
identity, the recorded best remap and the search space's family defaults (one ncu run per kernel,
`--cache-control all`), and writes the raw counters. `compare` simulates the same remaps with the
preset of the measured GPU and prints, per kernel, the rank correlation and mean absolute error of
the read hit rate and of DRAM bytes, and the pooled figures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SUITE = ("softmax", "gemm", "transpose", "layernorm", "attention", "elementwise", "spmv", "blackscholes",
         "fdtd2d", "stencil2d", "smithwaterman")
SIZE_OVERRIDES = {"attention": "mha64_4k"}


def _kernels(names: list[str]):
    from swizzleperf.kernel import load_kernel

    found = []
    for name in names:
        path = Path(name) if name.endswith(".py") else ROOT / "kernels" / f"{name}.py"
        kernel = load_kernel(path)
        found.append((kernel, SIZE_OVERRIDES.get(kernel.name, kernel.default_size)))
    return found


def cmd_measure(args) -> int:
    from swizzleperf.fidelity.measure import measure
    from swizzleperf.hardware import PRESETS, detect

    hw = detect() or PRESETS["h100"]
    out = Path(args.out)

    def done(result):
        record = result.kernels[-1]
        status = record.error or f"{len(record.remaps)} remaps, compiled {record.compiled}"
        print(f"{record.kernel} ({record.size}): {status}", flush=True)
        out.write_text(result.model_dump_json(indent=1))  # kept whole after every kernel

    result = measure(_kernels(args.kernels), hw, raw_dir=out.parent / "raw", on_kernel=done)
    out.write_text(result.model_dump_json(indent=1))
    print(f"wrote {out} ({result.device}, {result.tool}; dropped metrics: {result.dropped_metrics or 'none'})")
    return 0


def cmd_from_raw(args) -> int:
    """Rebuild OUT.json from the raw ncu CSVs a measurement saved (no GPU needed)."""
    from swizzleperf.fidelity.measure import kernel_record
    from swizzleperf.fidelity.records import Measurement
    from swizzleperf.hardware import PRESETS

    raw = Path(args.raw_dir)
    kernels = [kernel_record(k, PRESETS[args.hardware], size, (raw / f"{k.name}-{size}.csv").read_text())
               for k, size in _kernels(args.kernels) if (raw / f"{k.name}-{size}.csv").exists()]
    result = Measurement(device=args.device, tool=args.tool, cache_control="all", versions={}, kernels=kernels)
    Path(args.out).write_text(result.model_dump_json(indent=1))
    print(f"wrote {args.out}: {len(kernels)} kernels")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="profile the remaps with ncu (needs an NVIDIA GPU)")
    m.add_argument("out")
    m.add_argument("--kernels", nargs="+", default=list(SUITE))
    r = sub.add_parser("from-raw", help="rebuild the measurement JSON from saved raw ncu CSVs")
    r.add_argument("raw_dir")
    r.add_argument("out")
    r.add_argument("--kernels", nargs="+", default=list(SUITE))
    r.add_argument("--hardware", default="h100")
    r.add_argument("--device", required=True)
    r.add_argument("--tool", required=True)
    args = parser.parse_args()
    return {"measure": cmd_measure, "from-raw": cmd_from_raw}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
