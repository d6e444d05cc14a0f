"""Probe where an NVIDIA GPU's block scheduler puts consecutive programs (needs a GPU).

A launch of `waves x SMs` short programs records the SM (%smid) each program ran on, so the
simulator's placement assumption can be checked against the real scheduler. Written to OUT.json.

    python benchmarks/probe_l2_partitions.py OUT.json
"""

from __future__ import annotations

import json
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _smid(x):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _now(x):
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [x], dtype=tl.int64, is_pure=False,
                                     pack=1)


@triton.jit
def placement_kernel(smids_ptr, spin, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    tl.store(smids_ptr + pid, _smid(pid))
    # stay resident a little, as a real kernel would, so later programs wait for a free slot
    t0 = _now(pid)
    while _now(pid) - t0 < spin:
        pass


def placement(num_sms: int, waves: int = 4) -> list[int]:
    smids = torch.full((num_sms * waves,), -1, dtype=torch.int32, device="cuda")
    placement_kernel[(num_sms * waves,)](smids, 20_000, BLOCK=32, num_warps=4)
    torch.cuda.synchronize()
    return smids.tolist()


def main(out: str) -> int:
    props = torch.cuda.get_device_properties(0)
    num_sms = props.multi_processor_count
    order = placement(num_sms)
    with open(out, "w") as f:
        json.dump({"device": props.name, "num_sms": num_sms, "smid_of_program": order}, f, indent=1)
    print(f"{props.name}: {num_sms} SMs; program -> SM for the first {num_sms} programs:")
    print(order[:num_sms])
    print(f"distinct SMs among them: {len(set(order[:num_sms]))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
