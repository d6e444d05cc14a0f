"""Persistent FA2 (cyclic and sawtooth K/V order) against kernels/attention.py: time on the local GPU.

    python benchmarks/persistent/bench_persistent.py [--shapes 8x16384:0 8x16384:1 32x4096:1]

A shape is HEADSxSEQ:CAUSAL (batch 1, MHA, D = 128, bf16). Printed per shape: do_bench median
(ms) and p20-p80 of the non-persistent kernel, the persistent one with the cyclic order and with
the sawtooth, and their ratios to the non-persistent kernel (the issue asks within 5 %).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton.testing

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "kernels"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention import attention  # noqa: E402
from attention_persistent import attention_persistent  # noqa: E402


def timed(fn) -> tuple[float, float, float]:
    p20, p50, p80 = triton.testing.do_bench(fn, quantiles=[0.2, 0.5, 0.8], rep=500)
    return p50, p20, p80


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["8x16384:0", "8x16384:1", "32x4096:1", "128x4096:0"])
    parser.add_argument("--head-first", action="store_true",
                        help="persistent tiles in head-first order (attention.py keeps its block-first order)")
    args = parser.parse_args()
    print(f"{torch.cuda.get_device_name(0)}; bf16, D = 128, batch 1, MHA; do_bench median (p20-p80) ms")
    for shape in args.shapes:
        dims, causal = shape.split(":")
        heads, seq = map(int, dims.split("x"))
        causal = bool(int(causal))
        q, k, v = (torch.randn(1, heads, seq, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        base = timed(lambda: attention(q, k, v, causal))
        cyclic = timed(lambda: attention_persistent(q, k, v, causal, head_first_order=args.head_first))
        saw = timed(lambda: attention_persistent(q, k, v, causal, sawtooth_order=True, head_first_order=args.head_first))
        torch.testing.assert_close(attention_persistent(q, k, v, causal, sawtooth_order=True).float(),
                                   attention(q, k, v, causal).float(), atol=4e-3, rtol=8e-3)
        line = f"{heads:4d} heads x {seq:6d} {'causal' if causal else 'full  '}: attention.py {base[0]:8.3f} " \
               f"({base[1]:.3f}-{base[2]:.3f})"
        for name, t in (("persistent cyclic", cyclic), ("sawtooth", saw)):
            line += f" | {name} {t[0]:8.3f} ({t[1]:.3f}-{t[2]:.3f}) {base[0] / t[0]:.3f}x"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
