"""Persistent FA2 under each schedule against kernels/attention.py: time on the local GPU.

    python benchmarks/persistent/bench_persistent.py [--shapes 8x131072:0 8x16384:1 ...]

A shape is HEADSxSEQ:CAUSAL (batch 1, MHA, D = 128, bf16). The persistent kernel is built with each
schedule in place (`KernelFile.with_hook`, as swizzleperf builds a candidate): block-first and
head-first tiles, each with the cyclic and the sawtooth K/V order. Printed per shape: do_bench median
(ms) and p20-p80 of kernels/attention.py under both tile orders (block-first, its own, and head-first)
and of each schedule, with its speed-up over attention.py in the same tile order (the issue asks for
within 5 %).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
import triton.testing

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from swizzleperf.kernel.contract import import_module_from, load_kernel  # noqa: E402
from swizzleperf.remaps.families import FamilyInstance  # noqa: E402

ORDERS = {"block-first": "identity", "head-first": "head_first"}  # tile orders, as attention.py's remaps
SCHEDULES = {"block-first cyclic": FamilyInstance("identity"),
             "block-first sawtooth": FamilyInstance("identity", (), "sawtooth"),
             "head-first cyclic": FamilyInstance("head_first"),
             "head-first sawtooth": FamilyInstance("head_first", (), "sawtooth")}


def built(out: Path, name: str, schedules: dict, function: str) -> dict:
    """Each schedule's `function`, from a copy of kernels/NAME.py with the schedule in place."""
    kernel = load_kernel(ROOT / "kernels" / f"{name}.py")
    functions = {}
    for i, (label, schedule) in enumerate(schedules.items()):
        path = out / f"{name}_{i}.py"
        path.write_text(kernel.with_hook(schedule.render(kernel.hook, kernel.loop_order)))
        functions[label] = getattr(import_module_from(path, f"{name}_{i}"), function)
    return functions


def timed(fn) -> tuple[float, float, float]:
    p20, p50, p80 = triton.testing.do_bench(fn, quantiles=[0.2, 0.5, 0.8], rep=500)
    return p50, p20, p80


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["8x131072:0", "8x131072:1", "8x16384:0", "8x16384:1", "128x4096:0"])
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="bench-persistent-"))
    baselines = built(out, "attention", {order: FamilyInstance(family) for order, family in ORDERS.items()},
                      "attention")
    schedules = built(out, "attention_persistent", SCHEDULES, "attention_persistent")
    print(f"{torch.cuda.get_device_name(0)}; bf16, D = 128, batch 1, MHA; do_bench median (p20-p80) ms")
    for shape in args.shapes:
        dims, causal = shape.split(":")
        heads, seq = map(int, dims.split("x"))
        causal = bool(int(causal))
        q, k, v = (torch.randn(1, heads, seq, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        expected = baselines["block-first"](q, k, v, causal).float()
        base = {order: timed(lambda fn=fn: fn(q, k, v, causal)) for order, fn in baselines.items()}
        print(f"{heads} heads x {seq} {'causal' if causal else 'non-causal'}: attention.py " + ", ".join(
            f"{order} {t[0]:.3f} ({t[1]:.3f}-{t[2]:.3f})" for order, t in base.items()), flush=True)
        for name, fn in schedules.items():
            out = fn(q, k, v, causal)
            assert not torch.isnan(out).any(), f"{name}: NaN"
            torch.testing.assert_close(out.float(), expected, atol=4e-3, rtol=8e-3)
            t = timed(lambda: fn(q, k, v, causal))
            order = name.rsplit(" ", 1)[0]
            print(f"  {name:22s} {t[0]:9.3f} ({t[1]:.3f}-{t[2]:.3f})  {base[order][0] / t[0]:.3f}x attention.py "
                  f"{order}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
