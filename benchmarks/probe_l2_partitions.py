"""Probe how an NVIDIA GPU's L2 partitions and block scheduler look from the SMs (needs a GPU).

Two measurements, written to OUT.json and summarised on stdout:

1. Placement: a launch of `waves x SMs` programs records the SM (%smid) each program ran on,
   so the simulator's "program i of the first wave starts on SM i" can be checked against the
   real block scheduler.
2. Partitions: program on SM 0 walks one pointer chain per SM (bypassing L1: `.cg` loads), so
   every chain is in SM 0's L2 partition (and its home partition). Then, in a second launch, the
   program on each SM s walks chain s and times it (%globaltimer). SMs whose near partition is
   the reference SM's find every element there; the others go across to the far partition for the elements
   it homes, which takes longer. Clustering the per-SM latencies gives the SM -> partition map.

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


@triton.jit
def chase_kernel(chain_ptr, first_ptr, steps, sm_to_chain_ptr, smids_ptr, times_ptr, WARM_ALL: tl.constexpr):
    pid = tl.program_id(0)
    sm = _smid(pid)
    tl.store(smids_ptr + pid, sm)
    if WARM_ALL:  # program 0 walks every chain (its SM is the reference); the others do nothing
        if pid == 0:
            n_chains = tl.load(sm_to_chain_ptr + 1024)
            for c in range(n_chains):
                i = tl.load(first_ptr + c)
                for _ in range(steps):
                    i = tl.load(chain_ptr + i, cache_modifier=".cg")
                tl.store(times_ptr + 1024 + c, i)
    else:
        c = tl.load(sm_to_chain_ptr + sm)
        if c >= 0:
            i = tl.load(first_ptr + c)
            t0 = _now(pid)
            for _ in range(steps):
                i = tl.load(chain_ptr + i, cache_modifier=".cg")
            t1 = _now(i.to(tl.int32))  # depends on the last load
            tl.store(times_ptr + pid, t1 - t0)


def placement(num_sms: int, waves: int = 4) -> list[int]:
    smids = torch.full((num_sms * waves,), -1, dtype=torch.int32, device="cuda")
    placement_kernel[(num_sms * waves,)](smids, 20_000, BLOCK=32, num_warps=4)
    torch.cuda.synchronize()
    return smids.tolist()


def partitions(num_sms: int, steps: int = 256, stride_elems: int = 32) -> dict:
    """Per SM: nanoseconds per dependent load of a chain that SM 0 touched first."""
    n = num_sms  # one chain per SM id
    length = steps * stride_elems
    g = torch.Generator().manual_seed(0)
    chain = torch.zeros(n * length, dtype=torch.int32)
    firsts = []
    for c in range(n):  # a random cyclic walk over elements 32 apart (one 128 B line each)
        order = torch.randperm(steps, generator=g) * stride_elems + c * length
        chain[order] = torch.roll(order, -1).to(torch.int32)
        firsts.append(int(order[0]))
    chain, first = chain.cuda(), torch.tensor(firsts, dtype=torch.int32, device="cuda")
    sm_to_chain = torch.arange(1025, dtype=torch.int32, device="cuda")
    sm_to_chain[n:] = -1
    sm_to_chain[1024] = n
    times = torch.zeros(2048, dtype=torch.int64, device="cuda")
    smids = torch.zeros(num_sms, dtype=torch.int32, device="cuda")
    chase_kernel[(num_sms,)](chain, first, steps, sm_to_chain, smids, times, WARM_ALL=True, num_warps=1)
    torch.cuda.synchronize()
    reference = int(smids[0])
    chase_kernel[(num_sms,)](chain, first, steps, sm_to_chain, smids, times, WARM_ALL=False, num_warps=1)
    torch.cuda.synchronize()
    per_pid = times[:num_sms].tolist()
    return {"reference_sm": reference, "ns": {int(sm): per_pid[pid] / steps for pid, sm in enumerate(smids.tolist())}}


def main(out: str) -> int:
    props = torch.cuda.get_device_properties(0)
    num_sms = props.multi_processor_count
    order = placement(num_sms)
    runs = [partitions(num_sms) for _ in range(3)]
    reference = runs[0]["reference_sm"]
    per_sm = {sm: sorted(run["ns"].get(sm, float("nan")) for run in runs)[1] for sm in runs[0]["ns"]}  # median of 3
    cut = (min(per_sm.values()) + max(per_sm.values())) / 2
    near = sorted(sm for sm, t in per_sm.items() if t < cut)
    result = {"device": props.name, "num_sms": num_sms, "first_wave_smids": order[:num_sms],
              "all_smids": order, "reference_sm": reference, "reference_sms_per_run": [r["reference_sm"] for r in runs],
              "ns_per_load": per_sm, "near_reference": near, "far_reference": sorted(set(per_sm) - set(near))}
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{props.name}: {num_sms} SMs")
    print(f"first wave, program -> SM: {order[:40]} ...")
    print(f"second wave: {order[num_sms:num_sms + 40]} ...")
    times = sorted(per_sm.values())
    print(f"ns per dependent load after SM 0 warmed the data: min {times[0]:.0f}, median {times[len(times) // 2]:.0f}, "
          f"max {times[-1]:.0f}; {len(near)} SMs near SM {reference}: {near}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
