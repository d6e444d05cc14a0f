"""Trace capture: fast mode records exactly the reference trace; layout, cache and errors.

Kernels run on the Triton interpreter only in a child process (TRITON_INTERPRET=1 must be set
before a kernel module is imported). To keep the suite fast, one child (the `captured` fixture)
records every kernel below in both modes and saves the traces; the tests compare them here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from swizzleperf.errors import TraceCaptureError
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.sim.capture import trace_capture as capture
from swizzleperf.sim.capture.address_space import REGION_ALIGN, VirtualLayout
from swizzleperf.sim.capture.events import EventBatch, TraceBuilder, distinct_lines, distinct_lines_reference
from swizzleperf.sim.rounds import round_starts
from swizzleperf.sim.trace.record import Trace, TraceMeta

ROOT = Path(__file__).resolve().parents[2]

# --- purpose-written kernels -------------------------------------------------------------------
HEADER = '''
import torch
import triton
import triton.language as tl


@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    return pid

'''
FOOTER = '''
REMAP_HOOK = "swizzle"
DEFAULT_SIZE = "s"
CHECK_SIZES = ["s"]
TOLERANCE = {"atol": 0.0, "rtol": 0.0}


def reference(inputs, size):
    return {}
'''

KERNELS = {
    # 6 programs of 64 fp32 (two 128 B lines), the last one masked down to 10 elements.
    "copy": '''
@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

SIZES = {"s": {"n": 330}}
def grid(size): return (triton.cdiv(size["n"], 64),)
def make_inputs(size, seed, device): return {"x": torch.arange(size["n"], dtype=torch.float32)}
def make_outputs(size, device): return {"y": torch.zeros(size["n"])}
def launch(inputs, outputs, size, num_xcds):
    copy_kernel[grid(size)](inputs["x"], outputs["y"], size["n"], BLOCK=64, NUM_XCDS=num_xcds)
''',
    # 2D tiles: [:, None] broadcasting, tl.dot, int64 row offsets, ragged tails in M, N and K.
    "dot2d": '''
@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    num_n = tl.cdiv(N, BN)
    pm = pid // num_n
    pn = pid % num_n
    offs_m = pm * BM + tl.arange(0, BM)
    offs_n = pn * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + offs_k
        a = tl.load(a_ptr + offs_m[:, None].to(tl.int64) * stride_am + ks[None, :],
                    mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + offs_n[None, :],
                    mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc.T.T,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))

SIZES = {"s": {"M": 40, "N": 24, "K": 36}}
def grid(size): return (triton.cdiv(size["M"], 16) * triton.cdiv(size["N"], 16),)
def make_inputs(size, seed, device):
    g = torch.Generator().manual_seed(seed)
    return {"a": torch.randn(size["M"], size["K"], generator=g), "b": torch.randn(size["K"], size["N"], generator=g)}
def make_outputs(size, device): return {"c": torch.zeros(size["M"], size["N"])}
def launch(inputs, outputs, size, num_xcds):
    a, b, c = inputs["a"], inputs["b"], outputs["c"]
    dot_kernel[grid(size)](a, b, c, size["M"], size["N"], size["K"], a.stride(0), b.stride(0), c.stride(0),
                           BM=16, BN=16, BK=16, NUM_XCDS=num_xcds)
''',
    # A range() bound loaded per program: batches split into groups of equal length.
    "ragged": '''
@triton.jit
def ragged_kernel(x_ptr, starts_ptr, lens_ptr, out_ptr, BLOCK: tl.constexpr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    start = tl.load(starts_ptr + pid)
    n = tl.load(lens_ptr + pid)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(0, n, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + start + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + pid, tl.sum(acc, 0))

LENS = [0, 5, 40, 40, 100, 7, 5, 40, 33, 0, 100, 64, 65, 5, 40, 1]
SIZES = {"s": {"programs": 16}}
def grid(size): return (size["programs"],)
def make_inputs(size, seed, device):
    lens = torch.tensor(LENS, dtype=torch.int32)
    starts = (torch.cumsum(lens, 0) - lens).to(torch.int32)
    return {"x": torch.randn(int(lens.sum())), "starts": starts, "lens": lens}
def make_outputs(size, device): return {"out": torch.zeros(size["programs"])}
def launch(inputs, outputs, size, num_xcds):
    ragged_kernel[grid(size)](inputs["x"], inputs["starts"], inputs["lens"], outputs["out"], BLOCK=16,
                              NUM_XCDS=num_xcds)
''',
    # if / early return on program ids, a while loop on a loaded per-program flag.
    "branchy": '''
@triton.jit
def branchy_kernel(x_ptr, y_ptr, flags_ptr, n_valid, BLOCK: tl.constexpr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    if pid >= n_valid:
        return
    offs = tl.arange(0, BLOCK)
    if pid % 3 == 0:
        v = tl.load(x_ptr + pid * BLOCK + offs)
    else:
        v = tl.load(x_ptr + (pid // 2) * BLOCK + offs) + tl.load(x_ptr + offs)
    flag = tl.load(flags_ptr + pid)
    j = 0
    while j < flag:
        tl.store(y_ptr + (pid * 4 + j) * BLOCK + offs, v)
        j += 1

SIZES = {"s": {"programs": 20, "valid": 17}}
def grid(size): return (size["programs"],)
def make_inputs(size, seed, device):
    return {"x": torch.randn(size["programs"] * 32), "flags": torch.tensor([p % 4 for p in range(size["programs"])],
                                                                            dtype=torch.int32)}
def make_outputs(size, device): return {"y": torch.zeros(size["programs"] * 4 * 32)}
def launch(inputs, outputs, size, num_xcds):
    branchy_kernel[grid(size)](inputs["x"], outputs["y"], inputs["flags"], size["valid"], BLOCK=32,
                               NUM_XCDS=num_xcds)
''',
    # Addresses from loaded indices, from reductions (argmax, max, custom combine) and scans.
    "gather": '''
@triton.jit
def _pick_larger(a, b):
    return tl.where(a > b, a, b)

@triton.jit
def _add(a, b):
    return a + b

@triton.jit
def gather_kernel(x_ptr, idx_ptr, out_ptr, n_idx, stride, BLOCK: tl.constexpr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    live = offs < n_idx
    idx = tl.load(idx_ptr + offs, mask=live, other=0)
    rows = tl.load(x_ptr + idx.to(tl.int64) * stride, mask=live, other=0.0)
    best = tl.argmax(rows, 0)
    tl.store(out_ptr + pid * 4 + best % 4, tl.max(rows, 0))
    top = tl.reduce(idx, 0, _pick_larger)
    tl.store(out_ptr + 64 + top % 16, tl.sum(rows, 0))
    run = tl.associative_scan(idx, 0, _add)
    tl.store(out_ptr + 128 + run % 32, rows, mask=live)
    csum = tl.cumsum(idx, 0)
    tl.store(out_ptr + 160 + csum % 32, rows, mask=live)
    grid2 = tl.reshape(idx, (BLOCK // 4, 4))
    col = tl.sum(grid2, 1)
    tl.store(out_ptr + 192 + col % 8 + tl.arange(0, BLOCK // 4), col.to(tl.float32))
    whole = tl.sum(grid2)
    kept = tl.max(grid2, axis=1, keep_dims=True)
    tl.store(out_ptr + 224 + whole % 8 + kept % 4 + tl.zeros((1, 4), tl.int32), kept.to(tl.float32))

SIZES = {"s": {"n_idx": 150, "rows": 50}}
def grid(size): return (triton.cdiv(size["n_idx"], 32),)
def make_inputs(size, seed, device):
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(size["rows"], 8, generator=g),
            "idx": torch.randint(0, size["rows"], (size["n_idx"],), generator=g, dtype=torch.int32)}
def make_outputs(size, device): return {"out": torch.zeros(256)}
def launch(inputs, outputs, size, num_xcds):
    gather_kernel[grid(size)](inputs["x"], inputs["idx"], outputs["out"], size["n_idx"], 8, BLOCK=32,
                              NUM_XCDS=num_xcds)
''',
    # Loaded data through join/split/permute/reshape/cat/gather/trans, then used as addresses.
    "shapes": '''
@triton.jit
def shapes_kernel(x_ptr, out_ptr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    offs = tl.arange(0, 8)
    a = tl.load(x_ptr + pid * 8 + offs)
    b = offs * 3 + pid
    j = tl.join(a, b)
    lo, hi = tl.split(j)
    p = tl.permute(tl.reshape(j, (2, 4, 2)), (2, 0, 1))
    flat = tl.reshape(p, (16,))
    c = tl.cat(lo, hi, can_reorder=True)
    g = tl.gather(flat, (offs * 5) % 16, 0)
    t = tl.reshape(tl.trans(tl.reshape(c, (4, 4))), (16,))
    e = tl.broadcast_to(tl.expand_dims(hi, 0), (2, 8))
    tl.store(out_ptr + flat % 64, flat)
    tl.store(out_ptr + 64 + c % 64, c)
    tl.store(out_ptr + 128 + g % 64, g)
    tl.store(out_ptr + 192 + t % 64, t)
    tl.store(out_ptr + 256 + e % 64, e)

SIZES = {"s": {"programs": 7}}
def grid(size): return (size["programs"],)
def make_inputs(size, seed, device):
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randint(0, 1000, (size["programs"] * 8,), generator=g, dtype=torch.int32)}
def make_outputs(size, device): return {"out": torch.zeros(320, dtype=torch.int32)}
def launch(inputs, outputs, size, num_xcds):
    shapes_kernel[grid(size)](inputs["x"], outputs["out"], NUM_XCDS=num_xcds)
''',
    # A 2D launch grid: programs are numbered x + y * nx.
    "grid2d": '''
@triton.jit
def grid2d_kernel(x_ptr, y_ptr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0) + tl.program_id(1) * tl.num_programs(0), tl.num_programs(0), NUM_XCDS)
    offs = tl.program_id(1) * 256 + tl.program_id(0) * 32 + tl.arange(0, 32)
    tl.store(y_ptr + pid * 32 + tl.arange(0, 32), tl.load(x_ptr + offs))

SIZES = {"s": {"nx": 3, "ny": 4}}
def grid(size): return (size["nx"] * size["ny"],)
def make_inputs(size, seed, device): return {"x": torch.randn(size["ny"] * 256)}
def make_outputs(size, device): return {"y": torch.zeros(size["nx"] * size["ny"] * 32)}
def launch(inputs, outputs, size, num_xcds):
    grid2d_kernel[(size["nx"], size["ny"])](inputs["x"], outputs["y"], NUM_XCDS=num_xcds)
''',
    # Views with storage offsets and strides, int64 row math; two arguments share one storage.
    "views": '''
@triton.jit
def views_kernel(x_ptr, base_ptr, y_ptr, cols, sxr, sxc, syr, BLOCK: tl.constexpr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    r = pid.to(tl.int64)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + r * sxr + offs * sxc, mask=offs < cols)
    w = tl.load(base_ptr + pid)
    tl.store(y_ptr + r * syr + offs, v + w, mask=offs < cols)

SIZES = {"s": {"rows": 40, "cols": 64}}
def grid(size): return (size["rows"] - 3,)
def make_inputs(size, seed, device):
    base = torch.arange(size["rows"] * size["cols"], dtype=torch.float32).reshape(size["rows"], size["cols"])
    return {"x": base[3:, 1::2], "base": base}
def make_outputs(size, device): return {"y": torch.zeros(size["rows"] + 5, size["cols"])[5:, 2:]}
def launch(inputs, outputs, size, num_xcds):
    x, y = inputs["x"], outputs["y"]
    views_kernel[grid(size)](x, inputs["base"], y, x.shape[1], x.stride(0), x.stride(1), y.stride(0), BLOCK=64,
                             NUM_XCDS=num_xcds)
''',
    # Atomics whose results are not used: recorded as stores, fast mode stays fast.
    "atomic_acc": '''
@triton.jit
def acc_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.atomic_add(out_ptr + pid % 3, tl.sum(v, 0))
    tl.atomic_max(out_ptr + 3 + offs % 8, v, mask=offs < n)

SIZES = {"s": {"n": 300}}
def grid(size): return (triton.cdiv(size["n"], 64),)
def make_inputs(size, seed, device): return {"x": torch.randn(size["n"])}
def make_outputs(size, device): return {"out": torch.zeros(16)}
def launch(inputs, outputs, size, num_xcds):
    acc_kernel[grid(size)](inputs["x"], outputs["out"], size["n"], BLOCK=64, NUM_XCDS=num_xcds)
''',
    # An atomic's result decides an address: only reference mode can be exact.
    "ticket": '''
@triton.jit
def ticket_kernel(counter_ptr, out_ptr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    t = tl.atomic_add(counter_ptr, 1)
    tl.store(out_ptr + t * 32, pid)

SIZES = {"s": {"programs": 8}}
def grid(size): return (size["programs"],)
def make_inputs(size, seed, device): return {"counter": torch.zeros(1, dtype=torch.int32)}
def make_outputs(size, device): return {"out": torch.zeros(size["programs"] * 32, dtype=torch.int32)}
def launch(inputs, outputs, size, num_xcds):
    ticket_kernel[grid(size)](inputs["counter"], outputs["out"], NUM_XCDS=num_xcds)
''',
    # A program reads back an index it stored and addresses memory with it.
    "readback": '''
@triton.jit
def readback_kernel(x_ptr, scratch_ptr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    tl.store(scratch_ptr + pid, (pid * 37) % 64)
    j = tl.load(scratch_ptr + pid)
    tl.store(x_ptr + j * 32, 1.0)

SIZES = {"s": {"programs": 6}}
def grid(size): return (size["programs"],)
def make_inputs(size, seed, device): return {"x": torch.zeros(64 * 32)}
def make_outputs(size, device): return {"scratch": torch.zeros(size["programs"], dtype=torch.int32)}
def launch(inputs, outputs, size, num_xcds):
    readback_kernel[grid(size)](inputs["x"], outputs["scratch"], NUM_XCDS=num_xcds)
''',
    # Tensor descriptors: fast mode hands over to reference mode, which records their box loads.
    "descriptor": '''
@triton.jit
def desc_kernel(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    pm = pid // tl.cdiv(N, BN)
    pn = pid % tl.cdiv(N, BN)
    desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    tile = desc.load([pm * BM, pn * BN])
    offs_m = pm * BM + tl.arange(0, BM)
    offs_n = pn * BN + tl.arange(0, BN)
    tl.store(y_ptr + offs_m[:, None] * N + offs_n[None, :], tile, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))

SIZES = {"s": {"M": 20, "N": 36}}
def grid(size): return (triton.cdiv(size["M"], 8) * triton.cdiv(size["N"], 16),)
def make_inputs(size, seed, device): return {"x": torch.randn(size["M"], size["N"])}
def make_outputs(size, device): return {"y": torch.zeros(size["M"], size["N"])}
def launch(inputs, outputs, size, num_xcds):
    desc_kernel[grid(size)](inputs["x"], outputs["y"], size["M"], size["N"], BM=8, BN=16, NUM_XCDS=num_xcds)
''',
    # The same tiles through masked pointers: must record what the descriptor kernel records.
    "descriptor_twin": '''
@triton.jit
def twin_kernel(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    pm = pid // tl.cdiv(N, BN)
    pn = pid % tl.cdiv(N, BN)
    offs_m = pm * BM + tl.arange(0, BM)
    offs_n = pn * BN + tl.arange(0, BN)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tile = tl.load(x_ptr + offs_m[:, None] * N + offs_n[None, :], mask=mask, other=0.0)
    tl.store(y_ptr + offs_m[:, None] * N + offs_n[None, :], tile, mask=mask)

SIZES = {"s": {"M": 20, "N": 36}}
def grid(size): return (triton.cdiv(size["M"], 8) * triton.cdiv(size["N"], 16),)
def make_inputs(size, seed, device): return {"x": torch.randn(size["M"], size["N"])}
def make_outputs(size, device): return {"y": torch.zeros(size["M"], size["N"])}
def launch(inputs, outputs, size, num_xcds):
    twin_kernel[grid(size)](inputs["x"], outputs["y"], size["M"], size["N"], BM=8, BN=16, NUM_XCDS=num_xcds)
''',
    "two_launches": '''
@triton.jit
def fill_kernel(y_ptr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    tl.store(y_ptr + pid, 1.0)

SIZES = {"s": {"n": 4}}
def grid(size): return (size["n"],)
def make_inputs(size, seed, device): return {}
def make_outputs(size, device): return {"y": torch.zeros(size["n"])}
def launch(inputs, outputs, size, num_xcds):
    fill_kernel[grid(size)](outputs["y"], NUM_XCDS=num_xcds)
    fill_kernel[grid(size)](outputs["y"], NUM_XCDS=num_xcds)
''',
    "block_ptr": '''
@triton.jit
def bp_kernel(x_ptr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    p = tl.make_block_ptr(x_ptr, shape=(16,), strides=(1,), offsets=(pid * 4,), block_shape=(4,), order=(0,))
    tl.store(p, tl.load(p) + 1.0)

SIZES = {"s": {"n": 4}}
def grid(size): return (size["n"],)
def make_inputs(size, seed, device): return {"x": torch.zeros(16)}
def make_outputs(size, device): return {}
def launch(inputs, outputs, size, num_xcds):
    bp_kernel[grid(size)](inputs["x"], NUM_XCDS=num_xcds)
''',
    "out_of_bounds": '''
@triton.jit
def oob_kernel(x_ptr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    tl.store(x_ptr + pid * 4096 + tl.arange(0, 16), tl.zeros((16,), tl.float32))

SIZES = {"s": {"n": 3}}
def grid(size): return (size["n"],)
def make_inputs(size, seed, device): return {"x": torch.zeros(64)}
def make_outputs(size, device): return {}
def launch(inputs, outputs, size, num_xcds):
    oob_kernel[grid(size)](inputs["x"], NUM_XCDS=num_xcds)
''',
    # int32 products that wrap around (the interpreter checks overflow only in debug mode).
    "int32_wrap": '''
@triton.jit
def wrap_kernel(x_ptr, NUM_XCDS: tl.constexpr):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    tl.store(x_ptr + (pid + 1) * 1_500_000_000 - (pid + 1) * 1_500_000_000 + pid, 1.0)

SIZES = {"s": {"n": 3}}
def grid(size): return (size["n"],)
def make_inputs(size, seed, device): return {"x": torch.zeros(8)}
def make_outputs(size, device): return {}
def launch(inputs, outputs, size, num_xcds):
    wrap_kernel[grid(size)](inputs["x"], NUM_XCDS=num_xcds)
''',
}

# Every kernel of the suite at its first check size (None), softmax also at "small": (file, size).
SUITE = {f"{path.stem}-check": (path, None) for path in sorted((ROOT / "kernels").glob("*.py"))}
SUITE["softmax-small"] = (ROOT / "kernels/softmax.py", "small")
BATCHED = ["copy", "dot2d", "views", "gather", "shapes", "grid2d", "atomic_acc", "descriptor_twin",
           "int32_wrap"]  # probe + one batch
DIVERGENT = ["ragged", "branchy"]  # batches split on the way
FALLBACK = {"ticket": "atomic", "readback": "wrote", "descriptor": "tensor descriptors"}
FAILING = {"two_launches": "exactly one launch", "block_ptr": "Block pointers",
           "out_of_bounds": "outside every tensor argument"}

CHILD = r'''
import json, sys
from pathlib import Path
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.sim.capture.trace_capture import record_trace

out = Path(sys.argv[2])
for name, (path, size) in json.loads(Path(sys.argv[1]).read_text()).items():
    kernel = load_kernel(path)
    size = size or kernel.check_sizes[0]
    for mode in ("reference", "fast"):
        try:  # fallback warnings are checked through TraceMeta.fallback_reason
            trace, meta = record_trace(kernel, size, mode=mode, warn=lambda message: None)
            trace.save(out / f"{name}.{mode}.npz", meta)
        except Exception as exc:
            error = {"type": type(exc).__name__, "message": str(exc)}
            (out / f"{name}.{mode}.error.json").write_text(json.dumps(error))
'''


class Captured:
    """Traces, metadata and errors the child recorded, by case name and mode."""

    def __init__(self, out: Path):
        self.out = out

    def trace(self, name: str, mode: str) -> Trace:
        path = self.out / f"{name}.{mode}.npz"
        assert path.exists(), f"{name} ({mode}) failed: {self.error(name, mode)}"
        return Trace.load(path)

    def meta(self, name: str, mode: str) -> TraceMeta:
        return TraceMeta.read(self.out / f"{name}.{mode}.npz")

    def error(self, name: str, mode: str) -> dict | None:
        path = self.out / f"{name}.{mode}.error.json"
        return json.loads(path.read_text()) if path.exists() else None


def _write_kernel(directory: Path, name: str, body: str) -> Path:
    path = directory / f"{name}.py"
    path.write_text(HEADER + textwrap.dedent(body) + FOOTER)
    return path


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> Captured:
    work = tmp_path_factory.mktemp("capture")
    cases = {name: (str(_write_kernel(work, name, body)), "s") for name, body in KERNELS.items()}
    cases.update({name: (str(path), size) for name, (path, size) in SUITE.items()})
    (work / "cases.json").write_text(json.dumps(cases))
    out = work / "out"
    out.mkdir()
    env = {**os.environ, "TRITON_INTERPRET": "1", "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(work / "cases.json"), str(out)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Captured(out)


def _assert_same(a: Trace, b: Trace, sites: bool = True) -> None:
    assert (a.line_bytes, a.sector_bytes) == (b.line_bytes, b.sector_bytes)
    for field in ("program_offsets", "event_offsets", "is_store", "lines", "sectors", *(("sites",) if sites else ())):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field


def _rounds_of(trace: Trace, p: int) -> list[list[int]]:
    """Program p's events grouped into the rounds the simulator issues together, as event indices."""
    program = trace.program(p)
    stores = np.array([program.is_store[program.event_offsets[e]] for e in range(program.num_events)], bool)
    starts = np.flatnonzero(round_starts(program.sites, stores, np.array([program.num_events])))
    return [list(range(a, b)) for a, b in zip(starts, [*starts[1:], program.num_events])]


def test_sites_mark_loop_iterations_and_straight_line_loads(captured):
    gemm = captured.trace("gemm-check", "fast")
    sites = gemm.program(0).sites.tolist()
    steps = (len(sites) - 1) // 2  # A and B tiles per K step, then the C store
    assert steps > 1 and sites[:-1] == sites[:2] * steps and sites[0] != sites[1] and sites[-1] not in sites[:2]
    assert _rounds_of(gemm, 0) == [[2 * k, 2 * k + 1] for k in range(steps)] + [[2 * steps]]
    stencil = captured.trace("stencil2d-check", "fast")
    inner = 4  # a tile with all four neighbours: its five loads go out together, then the store
    assert len(set(stencil.program(inner).sites.tolist())) == 6
    assert _rounds_of(stencil, inner) == [[0, 1, 2, 3, 4], [5]]


# --- fast mode == reference mode --------------------------------------------------------------
@pytest.mark.parametrize("name", [*SUITE, *BATCHED, *DIVERGENT])
def test_fast_trace_equals_reference_trace(captured, name):
    fast, ref = captured.trace(name, "fast"), captured.trace(name, "reference")
    _assert_same(fast, ref)
    meta = captured.meta(name, "fast")
    assert (meta.mode, meta.fallback_reason) == ("fast", None)
    assert meta.verified_programs[0] == 0 and meta.verified_programs[-1] == fast.num_programs - 1
    assert fast.num_accesses > 0


@pytest.mark.parametrize("name", [*BATCHED, "softmax-check", "softmax-small"])
def test_uniform_kernels_run_as_one_batch_after_the_probe(captured, name):
    assert captured.meta(name, "fast").batches == 2


@pytest.mark.parametrize("name", DIVERGENT)
def test_divergent_kernels_split_their_batches(captured, name):
    assert captured.meta(name, "fast").batches > 2


def test_ragged_program_lengths_show_in_the_trace(captured):
    """Program p loads its start and length, then ceil(len/16) blocks of its slice."""
    trace = captured.trace("ragged", "fast")
    lens = [0, 5, 40, 40, 100, 7, 5, 40, 33, 0, 100, 64, 65, 5, 40, 1]
    loads = [int((~trace.program(p).is_store[trace.program(p).event_offsets[:-1]]).sum()) for p in range(16)]
    assert loads == [2 + -(-n // 16) for n in lens]


@pytest.mark.parametrize("name, reason", FALLBACK.items())
def test_fast_mode_falls_back_where_it_cannot_be_exact(captured, name, reason):
    _assert_same(captured.trace(name, "fast"), captured.trace(name, "reference"))
    meta = captured.meta(name, "fast")
    assert meta.mode == "reference" and meta.requested_mode == "fast"
    assert reason in meta.fallback_reason


def test_descriptor_loads_record_their_box_like_masked_pointers(captured):
    descriptor, twin = captured.trace("descriptor", "reference"), captured.trace("descriptor_twin", "reference")
    _assert_same(descriptor, twin, sites=False)  # two kernels: the same accesses from different source lines
    assert _rounds_of(descriptor, 0) == _rounds_of(twin, 0)


@pytest.mark.parametrize("mode", ["fast", "reference"])
@pytest.mark.parametrize("name, phrase", FAILING.items())
def test_unsupported_kernels_raise_trace_capture_error(captured, name, phrase, mode):
    error = captured.error(name, mode)
    assert error is not None, f"{name} ({mode}) was captured"
    assert error["type"] == "TraceCaptureError" and phrase in error["message"], error


# --- the format, by hand --------------------------------------------------------------------
def test_copy_kernel_trace_matches_hand_computed_lines(captured):
    """x (330 fp32) gets the first region, y the next 2 MiB-aligned one; 64 fp32 = two 128 B lines."""
    x0 = REGION_ALIGN // 128
    y0 = 2 * REGION_ALIGN // 128
    trace = captured.trace("copy", "fast")
    assert trace.num_programs == 6 and (trace.line_bytes, trace.sector_bytes) == (128, 32)
    for p in range(5):
        prog = trace.program(p)
        assert [prog.event(e)[0].tolist() for e in range(2)] == [[x0 + 2 * p, x0 + 2 * p + 1],
                                                                 [y0 + 2 * p, y0 + 2 * p + 1]]
        assert [prog.event(e)[1] for e in range(2)] == [False, True]
        assert prog.sectors.tolist() == [0b1111] * 4
    last = trace.program(5)
    assert [last.event(e)[0].tolist() for e in range(2)] == [[x0 + 10], [y0 + 10]]  # elements 320..329
    assert last.sectors.tolist() == [0b0011, 0b0011]  # bytes 0..39 of the line: its first two sectors
    assert trace.num_accesses == 5 * 4 + 2
    assert trace.unique_lines().tolist() == [*range(x0, x0 + 11), *range(y0, y0 + 11)]


def test_views_of_one_storage_share_one_region(captured):
    """x is base[3:, 1::2]: its loads land inside base's region, at base's byte offsets."""
    trace = captured.trace("views", "fast")
    x0 = REGION_ALIGN // 128
    prog = trace.program(0)
    x_lines, _ = prog.event(0)          # base[3, 1::2]: bytes 3*256+4 .. 3*256+252
    base_lines, _ = prog.event(1)       # base[0, 0]
    assert x_lines.tolist() == [x0 + 6, x0 + 7] and base_lines.tolist() == [x0]
    y_lines, is_store = prog.event(2)   # y is the second storage, at 2 MiB
    assert is_store and y_lines.min() >= 2 * REGION_ALIGN // 128


def test_layout_is_stable_across_processes(captured, tmp_path):
    kernel = load_kernel(ROOT / "kernels/softmax.py")
    again = capture.capture_trace(kernel, kernel.check_sizes[0], cache_dir=tmp_path, use_cache=False)
    _assert_same(again, captured.trace("softmax-check", "fast"))


# --- the cache ------------------------------------------------------------------------------
def test_cache_hits_and_misses(tmp_path, monkeypatch):
    kernel = load_kernel(ROOT / "kernels/softmax.py")
    calls = []
    first = capture.capture_trace(kernel, "tiny", cache_dir=tmp_path, progress=lambda d, t: calls.append((d, t)))
    assert calls and calls[-1] == (15, 15)
    path = capture.cached_trace_path(kernel, "tiny", 128, tmp_path)
    assert first.path == path and path.suffix == ".runs"  # stored compact, named by its place in the cache
    meta = TraceMeta.read(path)
    assert meta.cache_key == capture.cache_key(kernel, "tiny", 128) and meta.num_programs == 15

    class Spawned(Exception):
        pass

    def no_child(request, *args):
        raise Spawned(request.size)

    monkeypatch.setattr(capture, "_run_capture_child", no_child)
    calls.clear()
    for mode in ("fast", "reference"):  # both modes record the same trace, so either hits
        _assert_same(capture.capture_trace(kernel, "tiny", cache_dir=tmp_path, progress=lambda d, t: calls.append(d),
                                           mode=mode), first)
    assert calls == []

    edited = tmp_path / "softmax.py"
    edited.write_text(kernel.source + "\n# an edit anywhere changes the key\n")
    for k, size, line_bytes in ((load_kernel(edited), "tiny", 128), (kernel, "small", 128), (kernel, "tiny", 64)):
        with pytest.raises(Spawned):
            capture.capture_trace(k, size, line_bytes, cache_dir=tmp_path)


def test_bad_size_mode_and_line_size_are_rejected_before_capture(tmp_path):
    kernel = load_kernel(ROOT / "kernels/softmax.py")
    with pytest.raises(Exception, match="no size 'huge'"):
        capture.capture_trace(kernel, "huge", cache_dir=tmp_path)
    with pytest.raises(TraceCaptureError, match="unknown capture mode"):
        capture.capture_trace(kernel, "tiny", cache_dir=tmp_path, mode="approximate")
    with pytest.raises(TraceCaptureError, match="power of two"):
        capture.capture_trace(kernel, "tiny", line_bytes=96, cache_dir=tmp_path)
    with pytest.raises(TraceCaptureError, match="1 to 8 sectors per line"):
        capture.capture_trace(kernel, "tiny", line_bytes=512, cache_dir=tmp_path)


def test_record_trace_refuses_to_run_without_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(TraceCaptureError, match="TRITON_INTERPRET=1"):
        capture.record_trace(load_kernel(ROOT / "kernels/softmax.py"), "tiny")


def test_reference_hooks_cover_every_native_memory_access():
    """Every builder method that reaches the interpreter's native load/store/atomics is hooked."""
    import inspect
    import re

    from triton.runtime.interpreter import InterpreterBuilder

    from swizzleperf.sim.capture.interp_reference import HOOKED_BUILDER_METHODS
    touching = {name for name, fn in inspect.getmembers(InterpreterBuilder, inspect.isfunction)
                if re.search(r"_interpreter\.(load|store|atomic_\w+)\(", inspect.getsource(fn))}
    assert touching and touching <= set(HOOKED_BUILDER_METHODS), touching - set(HOOKED_BUILDER_METHODS)


def test_fast_mode_names_the_supported_triton_version(monkeypatch):
    import triton

    from swizzleperf.sim.capture.batched_ops import SUPPORTED_TRITON, check_version
    monkeypatch.setattr(triton, "__version__", "3.6.0")
    with pytest.raises(TraceCaptureError, match=f"supports triton {SUPPORTED_TRITON}x.*mode='reference'"):
        check_version()


# --- pieces, in process -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def layout():
    a, b = torch.zeros(100_000), torch.zeros(50_000, dtype=torch.float16)
    return VirtualLayout.from_args([a, b[10:], 3, a]), a, b


def test_layout_orders_regions_by_first_use_and_aligns_them(layout):
    lay, a, b = layout
    assert len(lay.host_starts) == 2  # `a` twice is one region
    va = lay.to_virtual(np.array([a.data_ptr() + 4]))
    vb = lay.to_virtual(np.array([b.data_ptr() + 20]))  # b[10:] starts 20 bytes into b's storage
    assert va.tolist() == [REGION_ALIGN + 4] and vb.tolist() == [2 * REGION_ALIGN + 20]
    with pytest.raises(TraceCaptureError, match="outside every tensor argument"):
        lay.to_virtual(np.array([a.data_ptr() + 400_000]))


def test_numba_extractor_matches_the_numpy_oracle(layout):
    lay, a, b = layout
    rng = np.random.default_rng(0)
    for trial in range(60):
        shifts = ((7, 5), (7, 7), (8, 5))[trial % 3]  # 4, 1 and 8 sectors per line
        n_lanes, n_cols = int(rng.integers(1, 200)), int(rng.integers(1, 12))
        base = np.where(rng.random(n_cols) < 0.5, a.data_ptr(), b.data_ptr()).astype(np.uint64)
        offs = rng.integers(0, 40_000, (n_lanes, n_cols)) * 2
        if trial % 2:  # in address order, as most blocks are
            offs = np.sort(offs, axis=0)
        ptrs = base[None, :] + offs.astype(np.uint64)
        mask = rng.random((n_lanes, n_cols)) < 0.7
        lines, sectors, counts = distinct_lines(lay, shifts, ptrs, mask)
        ends = np.cumsum(counts)[:-1]
        for j, (got_lines, got_sectors) in enumerate(zip(np.split(lines, ends), np.split(sectors, ends))):
            want_lines, want_sectors = distinct_lines_reference(lay, shifts, ptrs[:, j], mask[:, j])
            assert np.array_equal(got_lines, want_lines) and np.array_equal(got_sectors, want_sectors)
    with pytest.raises(TraceCaptureError, match="0x1,"):
        distinct_lines(lay, (7, 5), np.array([[1]], np.uint64), None)


def test_builder_orders_batches_by_program_and_drops_empty_events():
    builder = TraceBuilder(4, 128, 32)
    late = EventBatch(np.array([3, 1]))
    late.add(np.array([7, 8, 9]), np.array([1, 2, 3], np.uint8), np.array([2, 1]), is_store=False,
             site=11)  # 3: [7, 8], 1: [9]
    late.add(np.array([5]), np.array([4], np.uint8), np.array([1]), is_store=True, site=12)  # shared: both store [5]
    early = EventBatch(np.array([0, 2]))
    early.add(np.array([1]), np.array([15], np.uint8), np.array([0, 1]), is_store=False,
              site=13)  # program 0: no active lane
    builder.commit(late)
    builder.commit(early)
    trace = builder.build()
    assert trace.program_offsets.tolist() == [0, 0, 2, 3, 5]
    assert [trace.program(p).lines.tolist() for p in range(4)] == [[], [9, 5], [1], [7, 8, 5]]
    assert [trace.program(p).sectors.tolist() for p in range(4)] == [[], [3, 4], [15], [1, 2, 4]]
    assert trace.is_store.tolist() == [False, True, False, False, False, True]
    assert trace.sites.tolist() == [11, 12, 13, 11, 12]  # per event, the empty one dropped
    assert trace.accesses_per_program().tolist() == [0, 2, 1, 3]


def test_trace_round_trips_through_npz_and_json(tmp_path):
    trace = Trace(lines=np.array([3, 4, 9]), is_store=np.array([False, False, True]),
                  event_offsets=np.array([0, 2, 3]), program_offsets=np.array([0, 1, 2]), line_bytes=128)
    meta = TraceMeta(kernel="k", kernel_sha256="0" * 64, size_name="s", size={"n": 1}, grid=(2,), launch_grid=(2, 1, 1),
                     line_bytes=128, mode="fast", requested_mode="fast", num_programs=2, num_events=2,
                     num_accesses=3, seconds=0.1, versions={})
    trace.save(tmp_path / "t.npz", meta)
    _assert_same(Trace.load(tmp_path / "t.npz"), trace)
    assert TraceMeta.read(tmp_path / "t.npz") == meta
    with pytest.raises(TraceCaptureError, match="inconsistent"):
        Trace(lines=np.array([1]), is_store=np.array([True]), event_offsets=np.array([0, 2]),
              program_offsets=np.array([0, 1]), line_bytes=128)
