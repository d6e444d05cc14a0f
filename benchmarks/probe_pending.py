"""Probe what an NVIDIA GPU's two L2 partitions do when two SMs read one buffer (needs a GPU with two L2
partitions and Nsight Compute; writes OUT.json).

Two programs, pinned by %smid to two SMs (same L2 side, or opposite sides), read the same fresh 1 MB buffer
(`.cg`: the L1 is bypassed), one 32-byte sector or all four of each 128-byte line: the first SM alone, the
second once the first has all its data (staggered), or both at once after a barrier (together). Each launch
runs under ncu with `--cache-control all`, counting the SMs' read requests, the L2's lookups and misses of
them, the far partition's lookups (`lts__t_sectors_srcunit_ltcfabric_op_read_lookup_*`) and DRAM reads.

What the H100 showed (tests/fixtures/probes/probe-pending-h100.json, 2026-11-27):
- a one-sector read that misses is two sector misses and 64 bytes from DRAM: the L2 fetches the 64-byte
  half of the line (its fetch granularity, CUDA's cudaLimitMaxL2FetchGranularity); a hit is one lookup;
- half of a side's misses cross to the other partition: a line has a home partition, as modelled;
- a second SM of the same side reading during the first one's fills makes no far lookups of its own
  (together = staggered): a side's copy serves its SMs while the fill is in flight;
- SMs on opposite sides reading together miss more than one after the other (both sides miss a line
  before either copy exists).
- a far hit leaves a copy on the reader's side (--copies, tests/fixtures/probes/probe-copies-h100.json): a third
  SM, of the second reader's side, then reads everything as near hits.
- one SM reading the last sector of each line and another all four (--halo, probe-halo-h100.json), in either
  order or together, on one side or opposite sides: the lookups, misses, far hits and DRAM fills are what the
  model's partitions and 64 B fetch give (to 3 %); on opposite sides the order changes only the lookups.

    python benchmarks/probe_pending.py OUT.json          # runs ncu on itself
    python benchmarks/probe_pending.py --summary OUT.json
    python benchmarks/probe_pending.py --granularity OUT.json   # one reader under L2 fetch limits 32/64/128 B
    python benchmarks/probe_pending.py --copies OUT.json        # does a far hit leave a copy on the reader's side?
    python benchmarks/probe_pending.py --halo OUT.json          # one SM reads sector 3 of each line, the other all 4
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import triton
import triton.language as tl

LINES = 8192  # 1 MB of 128-byte lines: far below a partition, so nothing is evicted
LINE_INTS = 32
# (name, which pair of SMs, mode: 0 the first SM alone, 1 staggered, 2 together, sectors read per line)
CASES = [(f"{who}, {how}, {sectors} sector{'s' * (sectors > 1)}/line", pair, mode, sectors)
         for sectors in (1, 4) for who, pair in (("same side", "same"), ("opposite sides", "opposite"))
         for how, mode in (("alone", 0), ("staggered", 1), ("together", 2)) if not (mode == 0 and pair == "opposite")]
REPEATS = 3
FAR_HIT, FAR_MISS = "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_hit.sum", "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_miss.sum"
TEX_HIT, TEX_MISS = "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum"
METRICS = [FAR_HIT, FAR_MISS, TEX_HIT, TEX_MISS, "lts__t_requests_srcunit_tex_op_read.sum",
           "lts__t_requests_srcunit_ltcfabric_op_read.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
           "l1tex__m_xbar2l1tex_read_sectors_mem_lg_op_ld.sum", "lts__d_sectors_fill_device.sum", "dram__bytes_read.sum"]


@triton.jit
def _smid(x):
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _read_lines(buf_ptr, sink_ptr, LINES: tl.constexpr, BLOCK: tl.constexpr, SECTORS: tl.constexpr,
                FIRST: tl.constexpr):
    """Read SECTORS 32-byte sectors from sector FIRST of each of LINES lines past the L1 (.cg); BLOCK sums to
    `sink_ptr` so the loads are kept."""
    acc = tl.zeros((BLOCK, 8 * SECTORS), tl.int32)
    for start in range(0, LINES, BLOCK):
        lines = (start + tl.arange(0, BLOCK))[:, None] * 32 + 8 * FIRST + tl.arange(0, 8 * SECTORS)[None, :]
        acc += tl.load(buf_ptr + lines, cache_modifier=".cg")
    tl.store(sink_ptr + tl.arange(0, BLOCK), tl.sum(acc, 1))


@triton.jit
def pair_kernel(buf_ptr, sync_ptr, sink_ptr, sm_a, sm_b, mode, LINES: tl.constexpr, BLOCK: tl.constexpr,
                SECTORS: tl.constexpr):
    """sync: [tickets of A, of B, arrivals, A done]. The first program on each of the two SMs reads the buffer
    (mode 0: A alone, 1: B once A has its data, 2: both at once), SECTORS 32-byte sectors of every line."""
    sm = _smid(tl.program_id(0))
    role = tl.where(sm == sm_a, 0, tl.where((sm == sm_b) & (mode > 0), 1, -1))
    if role >= 0:
        if tl.atomic_add(sync_ptr + role, 1) == 0:
            if mode == 2:
                tl.atomic_add(sync_ptr + 2, 1)
                while tl.atomic_add(sync_ptr + 2, 0) < 2:
                    pass
            elif role == 1:
                while tl.atomic_add(sync_ptr + 3, 0) == 0:
                    pass
            _read_lines(buf_ptr, sink_ptr + role * BLOCK, LINES, BLOCK, SECTORS, 0)
            if role == 0:
                tl.atomic_xchg(sync_ptr + 3, 1)


@triton.jit
def chain_kernel(buf_ptr, sync_ptr, sink_ptr, sm_a, sm_b, sm_c, LINES: tl.constexpr, BLOCK: tl.constexpr):
    """sync: [tickets of A, B, C, A done, B done]. The first program on SM A reads every sector of the buffer,
    then the first on SM B, then the first on SM C, each once the one before has all its data."""
    sm = _smid(tl.program_id(0))
    role = tl.where(sm == sm_a, 0, tl.where(sm == sm_b, 1, tl.where(sm == sm_c, 2, -1)))
    if role >= 0:
        if tl.atomic_add(sync_ptr + role, 1) == 0:
            if role > 0:
                while tl.atomic_add(sync_ptr + 2 + role, 0) == 0:
                    pass
            _read_lines(buf_ptr, sink_ptr + role * BLOCK, LINES, BLOCK, 4, 0)
            if role < 2:
                tl.atomic_xchg(sync_ptr + 3 + role, 1)


@triton.jit
def halo_kernel(buf_ptr, sync_ptr, sink_ptr, sm_a, sm_b, mode, LINES: tl.constexpr, BLOCK: tl.constexpr):
    """sync: [tickets of A, of B, arrivals, first reader done]. The first program on SM A reads the last sector of
    every line (as a stencil's left halo reads its neighbour's line), the first on SM B all four (mode 1: A then
    B, 3: B then A, 2: both at once)."""
    sm = _smid(tl.program_id(0))
    role = tl.where(sm == sm_a, 0, tl.where(sm == sm_b, 1, -1))
    if role >= 0:
        if tl.atomic_add(sync_ptr + role, 1) == 0:
            waits = (mode == 1) & (role == 1) | (mode == 3) & (role == 0)
            if mode == 2:
                tl.atomic_add(sync_ptr + 2, 1)
                while tl.atomic_add(sync_ptr + 2, 0) < 2:
                    pass
            elif waits:
                while tl.atomic_add(sync_ptr + 3, 0) == 0:
                    pass
            if role == 0:
                _read_lines(buf_ptr, sink_ptr, LINES, BLOCK, 1, 3)
            else:
                _read_lines(buf_ptr, sink_ptr + BLOCK, LINES, BLOCK, 4, 0)
            if (mode != 2) & (waits == 0):
                tl.atomic_xchg(sync_ptr + 3, 1)


HALO_CASES = [(f"{who}, {order}", pair, mode) for who, pair in (("same side", "same"), ("opposite sides", "opposite"))
              for order, mode in (("A (sector 3) then B (all)", 1), ("B (all) then A (sector 3)", 3),
                                  ("together", 2))]


def run_halo(out: str) -> int:
    """The child for --halo: every HALO_CASES case REPEATS times, one launch each, on a fresh buffer."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from swizzleperf.hardware.layouts.measured import sm_partition

    sms = pair_sms(sm_partition("h100"))
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    for _ in range(REPEATS):
        for _, pair, mode in HALO_CASES:
            buf = torch.ones(LINES * LINE_INTS, dtype=torch.int32, device="cuda")
            sync = torch.zeros(4, dtype=torch.int32, device="cuda")
            halo_kernel[(num_sms * 8,)](buf, sync, torch.zeros(2 * 32, dtype=torch.int32, device="cuda"), *sms[pair],
                                        mode, LINES=LINES, BLOCK=32, num_warps=1)
            torch.cuda.synchronize()
            assert sync[0].item() >= 1 and sync[1].item() >= 1, "a chosen SM ran no program"
    Path(out).write_text(json.dumps({"sms": sms, "device": torch.cuda.get_device_name(0)}))
    return 0


def chain_sms(sides: list[int]) -> tuple[int, int, int]:
    """An SM of side 0, then two SMs of side 1 in different TPCs."""
    one = [sm for sm, side in enumerate(sides) if side == 1]
    return sides.index(0), one[0], next(sm for sm in one if sm // 2 != one[0] // 2)


def run_copies(out: str) -> int:
    """The child for --copies: A (side 0), B and C (side 1) read one fresh buffer in turn; and A then B alone."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from swizzleperf.hardware.layouts.measured import sm_partition

    a, b, c = chain_sms(sm_partition("h100"))
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    for _ in range(REPEATS):
        for third in (c, -1):
            buf = torch.ones(LINES * LINE_INTS, dtype=torch.int32, device="cuda")
            sync = torch.zeros(5, dtype=torch.int32, device="cuda")
            chain_kernel[(num_sms * 8,)](buf, sync, torch.zeros(3 * 32, dtype=torch.int32, device="cuda"), a, b,
                                         third, LINES=LINES, BLOCK=32, num_warps=1)
            torch.cuda.synchronize()
    Path(out).write_text(json.dumps({"sms": [a, b, c], "device": torch.cuda.get_device_name(0)}))
    return 0


def pair_sms(sides: list[int]) -> dict[str, tuple[int, int]]:
    """Two SMs of side 0 in different TPCs, and one of side 0 with one of side 1."""
    zero = [sm for sm, side in enumerate(sides) if side == 0]
    other = next(sm for sm in zero if sm // 2 != zero[0] // 2)
    return {"same": (zero[0], other), "opposite": (zero[0], sides.index(1))}


def _read_fresh_buffer(a: int, b: int, mode: int, sectors: int) -> None:
    """One launch: the first program on SM `a` (and on SM `b`, unless mode 0) reads a fresh buffer (CASES)."""
    import torch

    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    buf = torch.ones(LINES * LINE_INTS, dtype=torch.int32, device="cuda")
    sync = torch.zeros(4, dtype=torch.int32, device="cuda")
    sink = torch.zeros(2 * 32, dtype=torch.int32, device="cuda")
    pair_kernel[(num_sms * 8,)](buf, sync, sink, a, b, mode, LINES=LINES, BLOCK=32, SECTORS=sectors, num_warps=1)
    torch.cuda.synchronize()
    assert sync[0].item() >= 1 and (mode == 0 or sync[1].item() >= 1), "a chosen SM ran no program"


def run_cases(out: str) -> int:
    """The child ncu profiles: every case REPEATS times, one launch each, in CASES order."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from swizzleperf.hardware.layouts.measured import sm_partition

    sms = pair_sms(sm_partition("h100"))
    for _ in range(REPEATS):
        for _, pair, mode, sectors in CASES:
            _read_fresh_buffer(*sms[pair], mode, sectors)
    Path(out).write_text(json.dumps({"sms": sms, "device": torch.cuda.get_device_name(0)}))
    return 0


GRANULARITIES = (32, 64, 128)  # bytes asked of the driver's L2 fetch granularity limit, in --granularity


def _fetch_limit(value: int | None = None) -> int:
    """The current context's CU_LIMIT_MAX_L2_FETCH_GRANULARITY (5), after setting it to `value` if given (a hint:
    the driver may round it), through the driver API (torch has no call for it)."""
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    if value is not None:
        assert cuda.cuCtxSetLimit(5, ctypes.c_size_t(value)) == 0, "cuCtxSetLimit failed"
    got = ctypes.c_size_t()
    assert cuda.cuCtxGetLimit(ctypes.byref(got), 5) == 0, "cuCtxGetLimit failed"
    return got.value


def run_granularity(out: str) -> int:
    """The child for --granularity: one SM reads one sector of each cold line, under each fetch limit in turn."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from swizzleperf.hardware.layouts.measured import sm_partition

    a, _ = pair_sms(sm_partition("h100"))["same"]
    torch.zeros(1, device="cuda")  # the context the limit belongs to: torch makes it current on first use
    default, effective = _fetch_limit(), []
    for value in GRANULARITIES:
        effective.append(_fetch_limit(value))
        for _ in range(REPEATS):
            _read_fresh_buffer(a, -1, 0, 1)
    Path(out).write_text(json.dumps({"default_limit": default, "effective_limits": effective,
                                     "device": torch.cuda.get_device_name(0), "sm": a}))
    return 0


def _profiled(child_flag: str, meta: Path, kernel: str = "pair_kernel") -> list:
    """The launches of `kernel` that ncu profiled in this script's child run with `child_flag`."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from swizzleperf.errors import ProfilerError
    from swizzleperf.profilers.ncu import profile_program

    try:
        return profile_program([sys.executable, __file__, child_flag, str(meta)], METRICS, f"^{kernel}$",
                               timeout=600).launches
    except ProfilerError as exc:
        print(exc, file=sys.stderr)
        return []


def main(out: str, names: list[str] | None = None, child_flag: str = "--child", kernel: str = "pair_kernel") -> int:
    """Profile the child's launches (CASES, or `names` run by `child_flag`'s child), REPEATS of each, in order."""
    names = names or [name for name, *_ in CASES]
    meta = Path(out).with_suffix(".sms.json")
    launches = _profiled(child_flag, meta, kernel)
    if len(launches) != REPEATS * len(names):
        return 1
    rows = [{"case": names[i % len(names)], "repeat": i // len(names), **dict(launch.metrics)}
            for i, launch in enumerate(launches)]
    record = {**json.loads(meta.read_text()), "lines": LINES, "rows": rows}
    Path(out).write_text(json.dumps(record, indent=1))
    summarize(record)
    return 0


def main_granularity(out: str) -> int:
    """One sector per cold line read by one SM under each L2 fetch granularity limit: misses and DRAM per request."""
    meta = Path(out).with_suffix(".limits.json")
    launches = _profiled("--granularity-child", meta)
    if len(launches) != REPEATS * len(GRANULARITIES):
        return 1
    limits = json.loads(meta.read_text())
    rows = [{"limit": GRANULARITIES[i // REPEATS], "repeat": i % REPEATS, **dict(launch.metrics)}
            for i, launch in enumerate(launches)]
    Path(out).write_text(json.dumps({**limits, "lines": LINES, "rows": rows}, indent=1))
    print(f"{limits['device']}: default L2 fetch granularity limit {limits['default_limit']} B; set to "
          f"{list(GRANULARITIES)} -> {limits['effective_limits']}")
    for value in GRANULARITIES:
        mine = [r for r in rows if r["limit"] == value]
        per = {m: sum(r[m] for r in mine) / len(mine) / LINES for m in (TEX_MISS, "dram__bytes_read.sum")}
        print(f"  limit {value:3d} B: {per[TEX_MISS]:.2f} sector misses and {per['dram__bytes_read.sum']:.0f} B of "
              f"DRAM per one-sector request")
    return 0


def main_copies(out: str) -> int:
    """Whether a far hit leaves a copy on the reader's side: a second SM of that side reading after it."""
    meta = Path(out).with_suffix(".sms.json")
    launches = _profiled("--copies-child", meta, "chain_kernel")
    if len(launches) != 2 * REPEATS:
        return 1
    cases = ("A (side 0), then B, then C (side 1)", "A (side 0), then B (side 1)")
    rows = [{"case": cases[i % 2], "repeat": i // 2, **dict(launch.metrics)} for i, launch in enumerate(launches)]
    Path(out).write_text(json.dumps({**json.loads(meta.read_text()), "lines": LINES, "rows": rows}, indent=1))
    for case in cases:
        mine = [r for r in rows if r["case"] == case]
        mean = {m: round(sum(r[m] for r in mine) / len(mine))
                for m in (TEX_MISS, FAR_HIT, "lts__d_sectors_fill_device.sum")}
        print(f"  {case:40s} misses {mean[TEX_MISS]:7d}  far hits {mean[FAR_HIT]:7d}  DRAM fills "
              f"{mean['lts__d_sectors_fill_device.sum']:7d}")
    print("  C's share = the first row less the second: misses 0 if B's far hits left copies on side 1, else "
          "those of side 0's lines again (half)")
    return 0


def summarize(record: dict) -> None:
    """Per case, the mean over repeats, in sectors: the far partition's read lookups (hits), the SMs' read
    requests and the L2's lookups of them (misses), and the sectors filled from DRAM."""
    print(f"{record['device']}: SMs {record['sms']}; {record['lines']} lines; sectors, mean of the repeats")
    print(f"  {'case':44s} {'requested':>9s} {'lookups':>8s} {'(miss)':>7s} {'far':>7s} {'(hit)':>6s} {'DRAM':>7s}")
    for name in dict.fromkeys(r["case"] for r in record["rows"]):
        rows = [r for r in record["rows"] if r["case"] == name]

        def mean(metric):
            return round(sum(r.get(metric, 0.0) for r in rows) / len(rows))
        print(f"  {name:44s} {mean('l1tex__m_xbar2l1tex_read_sectors_mem_lg_op_ld.sum'):9d} "
              f"{mean(TEX_HIT) + mean(TEX_MISS):8d} {mean(TEX_MISS):7d} {mean(FAR_HIT) + mean(FAR_MISS):7d} "
              f"{mean(FAR_HIT):6d} {mean('dram__bytes_read.sum') // 32:7d}")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help") or len(sys.argv) < 3 and sys.argv[1].startswith("--"):
        print(__doc__)
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    if sys.argv[1:2] == ["--child"]:
        sys.exit(run_cases(sys.argv[2]))
    if sys.argv[1:2] == ["--granularity-child"]:
        sys.exit(run_granularity(sys.argv[2]))
    if sys.argv[1:2] == ["--copies-child"]:
        sys.exit(run_copies(sys.argv[2]))
    if sys.argv[1:2] == ["--halo-child"]:
        sys.exit(run_halo(sys.argv[2]))
    if sys.argv[1:2] == ["--halo"]:  # a one-sector read and a whole-line read of the same lines (HALO_CASES)
        sys.exit(main(sys.argv[2], [name for name, *_ in HALO_CASES], "--halo-child", "halo_kernel"))
    if sys.argv[1:2] == ["--copies"]:
        sys.exit(main_copies(sys.argv[2]))
    if sys.argv[1:2] == ["--granularity"]:
        sys.exit(main_granularity(sys.argv[2]))
    if sys.argv[1:2] == ["--summary"]:
        summarize(json.loads(Path(sys.argv[2]).read_text()))
        sys.exit(0)
    sys.exit(main(sys.argv[1]))
