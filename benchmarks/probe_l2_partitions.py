"""Probe how an NVIDIA GPU's L2 partitions serve the SMs (needs a GPU; writes OUT.json).

NVIDIA documents the A100/H100 L2 as two partitions, each caching data for the SMs of the GPCs
wired to it, kept coherent by hardware; it does not document which SMs sit on which side, whether
the near partition keeps a copy of a line whose home is the far one, or how addresses map to a
home. The simulator needs all three, so this measures them with dependent loads (one load in
flight per SM, latency read with %clock64 around each load, `.cg` so the L1 is bypassed):

  cold   every SM chases its own 32 KB region after the L2 is flushed (DRAM latency);
  again  the same chase right after (the SM's own near copy, if the near side keeps one);
  warmed the L2 flushed, one SM (the "warmer") reads every region, then every SM chases its own:
         SMs on the warmer's side hit near; SMs on the far side hit near only for lines whose
         home is their side and cross the fabric for the rest.

Also records where the block scheduler puts programs at a few occupancies (%smid and start time).

  pressure  (`--pressure`) the same warmed chase with the regions at the front of an X MB buffer that
         the warmer then streams to its end (X = 8 ... 48): whether the warmer's partition keeps its
         copies of far-homed lines as long as its own home lines when the partitions fill (the
         simulator assumes one LRU over both), read from which SMs still hit near, hit far or miss.

    python benchmarks/probe_l2_partitions.py OUT.json [--pressure]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

LINE_INTS = 32  # int32 per 128-byte line
LINES_PER_REGION = 256
PROGRAMS_PER_SM_LAUNCHED = 8


@triton.jit
def _smid(x):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _clock_after(x):
    """%clock64 read once `x` has arrived, plus x (an unused input would not make the read wait)."""
    return tl.inline_asm_elementwise(
        "{ .reg .u64 z; .reg .u64 c; cvt.u64.u32 z, $1; mov.u64 c, %clock64; add.u64 $0, c, z; }",
        "=l,r", [x], dtype=tl.int64, is_pure=False, pack=1) - x.to(tl.int64)


@triton.jit
def _now(x):
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [x], dtype=tl.int64, is_pure=False,
                                     pack=1)


@triton.jit
def chase_kernel(chain_ptr, starts_ptr, tickets_ptr, lat_ptr, total_ptr, STEPS: tl.constexpr):
    """The first program on each SM chases its SM's region, timing every load and the whole chase."""
    pid = tl.program_id(0)
    sm = _smid(pid)
    ticket = tl.atomic_add(tickets_ptr + sm, 1)
    if ticket == 0:
        idx = tl.load(starts_ptr + sm)
        start = _clock_after(idx)
        for i in range(STEPS):
            t0 = _clock_after(idx)
            idx = tl.load(chain_ptr + idx, cache_modifier=".cg")
            t1 = _clock_after(idx)
            tl.store(lat_ptr + sm * STEPS + i, t1 - t0)
        tl.store(total_ptr + sm, _clock_after(idx) - start)


@triton.jit
def warm_kernel(buf_ptr, tickets_ptr, sink_ptr, n_ints, warmer, BLOCK: tl.constexpr):
    """The first program on SM `warmer` reads the whole buffer; every other program leaves."""
    pid = tl.program_id(0)
    sm = _smid(pid)
    if sm == warmer:
        ticket = tl.atomic_add(tickets_ptr + sm, 1)
        if ticket == 0:
            offs = tl.arange(0, BLOCK)
            acc = tl.zeros((BLOCK,), tl.int32)
            for start in range(0, n_ints, BLOCK):
                acc += tl.load(buf_ptr + start + offs, cache_modifier=".cg")
            tl.store(sink_ptr + offs, acc)


@triton.jit
def placement_kernel(smids_ptr, starts_ptr, spin):
    pid = tl.program_id(0)
    t0 = _now(pid)
    tl.store(smids_ptr + pid, _smid(pid))
    tl.store(starts_ptr + pid, t0)
    while _now(pid) - t0 < spin:  # stay resident, as a real kernel would
        pass


def make_chain(num_sms: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, list[list[int]]]:
    """A random cycle through the lines of each SM's region: chain[line start] = next line start."""
    gen = torch.Generator().manual_seed(seed)
    chain = torch.zeros(num_sms * LINES_PER_REGION * LINE_INTS, dtype=torch.int32)
    starts, orders = [], []
    for sm in range(num_sms):
        lines = (sm * LINES_PER_REGION + torch.randperm(LINES_PER_REGION, generator=gen)).tolist()
        for a, b in zip(lines, lines[1:] + lines[:1]):
            chain[a * LINE_INTS] = b * LINE_INTS
        starts.append(lines[0] * LINE_INTS)
        orders.append(lines[1:] + lines[:1])  # the line each timed load reads
    return chain.cuda(), torch.tensor(starts, dtype=torch.int32).cuda(), orders


def flush_l2() -> None:
    scratch = torch.empty(512 * 2**20, dtype=torch.uint8, device="cuda")
    scratch.fill_(1)
    scratch.sum()
    torch.cuda.synchronize()


def chase(chain: torch.Tensor, starts: torch.Tensor, num_sms: int) -> list[list[int]]:
    tickets = torch.zeros(num_sms, dtype=torch.int32, device="cuda")
    lat = torch.full((num_sms, LINES_PER_REGION), -1, dtype=torch.int64, device="cuda")
    total = torch.full((num_sms,), -1, dtype=torch.int64, device="cuda")
    compiled = chase_kernel[(num_sms * PROGRAMS_PER_SM_LAUNCHED,)](chain, starts, tickets, lat, total,
                                                       STEPS=LINES_PER_REGION, num_warps=1)
    torch.cuda.synchronize()
    return {"per_load": lat.tolist(), "total": total.tolist(), "ptx": compiled.asm.get("ptx", "")}


def warm(chain: torch.Tensor, warmer: int, num_sms: int) -> bool:
    tickets = torch.zeros(num_sms, dtype=torch.int32, device="cuda")
    sink = torch.zeros(1024, dtype=torch.int32, device="cuda")
    warm_kernel[(num_sms * PROGRAMS_PER_SM_LAUNCHED,)](chain, tickets, sink, chain.numel(), warmer, BLOCK=1024,
                                                      num_warps=4)
    torch.cuda.synchronize()
    return bool(tickets[warmer].item() > 0)


def placement(num_sms: int, num_warps: int, waves: int = 3) -> dict:
    n = num_sms * waves * (64 // num_warps)
    smids = torch.full((n,), -1, dtype=torch.int32, device="cuda")
    starts = torch.zeros(n, dtype=torch.int64, device="cuda")
    placement_kernel[(n,)](smids, starts, 20_000, num_warps=num_warps)
    torch.cuda.synchronize()
    t = starts - starts.min()
    return {"num_warps": num_warps, "smid": smids.tolist(), "start_ns": t.tolist()}


PRESSURE_MB = (8, 16, 20, 24, 28, 32, 40, 48)
NEAR_BELOW, FAR_BELOW = 360, 600  # cycles: near hits ~290, far hits ~440, DRAM ~720 (this probe's cold/warmed runs)


def pressure(num_sms: int, warmer: int = 0) -> dict:
    """Per buffer size: each SM's chase latencies after `warmer` streamed the whole buffer (L2 flushed before)."""
    chain, starts, _ = make_chain(num_sms)
    runs = {}
    for mb in PRESSURE_MB:
        big = torch.zeros(mb * 2**20 // 4, dtype=torch.int32, device="cuda")
        big[:chain.numel()] = chain
        chase(big, starts, num_sms)  # compile and settle
        flush_l2()
        ok = warm(big, warmer, num_sms)
        runs[str(mb)] = {"warmed": ok, **chase(big, starts, num_sms)}
        runs[str(mb)].pop("ptx", None)
        if mb == PRESSURE_MB[0]:  # the same chase again: does a far hit leave a near copy behind?
            runs[f"{mb} again"] = {"warmed": ok, **chase(big, starts, num_sms)}
            runs[f"{mb} again"].pop("ptx", None)
    return runs


def summarize_pressure(runs: dict, sides: list[int], warmer: int) -> None:
    """Fractions of near hits / far hits / DRAM per side of the warmer, per buffer size."""
    print(f"after SM {warmer} streamed X MB: fraction of each side's chase loads that hit near / far / went to DRAM")
    for mb, run in runs.items():
        cells = []
        for side in (sides[warmer], 1 - sides[warmer]):
            lat = [v for sm, row in enumerate(run["per_load"]) if sides[sm] == side for v in row]
            near = sum(v < NEAR_BELOW for v in lat) / len(lat)
            far = sum(NEAR_BELOW <= v < FAR_BELOW for v in lat) / len(lat)
            cells.append(f"{near:.2f} / {far:.2f} / {1 - near - far:.2f}")
        print(f"  {mb:>9}: warmer's side {cells[0]}   other side {cells[1]}")


def main(out: str, pressure_only: bool = False) -> int:
    if pressure_only:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from swizzleperf.hardware.layouts.measured import sm_partition
        num_sms = torch.cuda.get_device_properties(0).multi_processor_count
        runs = pressure(num_sms)
        sides = list(sm_partition("h100"))
        summarize_pressure(runs, sides, 0)
        with open(out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "num_sms": num_sms, "warmer": 0, "sides": sides,
                       "near_below": NEAR_BELOW, "far_below": FAR_BELOW, "runs": runs}, f)
        return 0
    props = torch.cuda.get_device_properties(0)
    num_sms = props.multi_processor_count
    chain, starts, orders = make_chain(num_sms)
    record = {"device": props.name, "num_sms": num_sms, "lines_per_region": LINES_PER_REGION,
              "base_address": chain.data_ptr(), "line_of_load": orders, "runs": {}}
    chase(chain, starts, num_sms)  # compile and settle
    flush_l2()
    record["runs"]["cold"] = chase(chain, starts, num_sms)
    record["runs"]["again"] = chase(chain, starts, num_sms)
    for warmer in (0, num_sms // 2, num_sms - 1):
        flush_l2()
        record[f"warmed_{warmer}_ok"] = warm(chain, warmer, num_sms)
        record["runs"][f"warmed_{warmer}"] = chase(chain, starts, num_sms)
    record["placement"] = [placement(num_sms, w) for w in (4, 16)]
    with open(out, "w") as f:
        json.dump(record, f)
    for name, run in record["runs"].items():
        med = [sorted(row)[len(row) // 2] for row in run["per_load"]]
        print(f"{name:>12}: median cycles per load, then whole chase / loads, SMs 0..{num_sms - 1}:")
        print("   ", med)
        print("   ", [t // LINES_PER_REGION for t in run["total"]])
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    sys.exit(main(sys.argv[1], pressure_only="--pressure" in sys.argv[2:]))
