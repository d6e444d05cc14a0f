"""FlashAttention-2 forward, persistent: a fixed number of programs loop over the Q tiles.

A kernel file with both hooks swizzleperf rewrites (PERSISTENT = True, LOOP_ORDER_HOOK): the remap
hook `swizzle` decides which tiles each resident program runs, the loop-order hook `kv_order` in
which order a tile scans K/V. `python kernels/attention_persistent.py` checks its own hooks on the
CPU interpreter (or every size on a GPU); `swizzleperf check kernels/attention_persistent.py --remap
benchmarks/persistent/head_first_sawtooth.py` checks head-first tiles with the sawtooth order, and
`benchmarks/persistent/bench_persistent.py` times the orders against kernels/attention.py.

Same math and layout as kernels/attention.py (q (B, H, S, D), k and v (B, H_KV, S, D), GQA when
H_KV < H, causal or not, fp32 statistics). Program p of G runs tiles p, p + G, p + 2G, ... (its
local tiles 0, 1, 2, ...); the remap hook `swizzle` maps a tile slot to (q_block, batch, head) as
the non-persistent kernel's hook maps a program id. The loop-order hook `kv_order` picks which K/V
block a tile folds in at each step of its scan over the blocks that need no mask (whole, and left of
the diagonal when causal): the identity is the cyclic scan (forward every time); the sawtooth scans
backward on odd local tiles, so a scan starts on the blocks the previous one just left in the L2
(Zhu, Pan, Ding, "Sawtooth Wavefront Reordering"). The masked blocks (the diagonal, a partial last
block) follow in forward order, as in kernels/attention.py, so the hot loop carries no mask.

A backward causal scan that started at the diagonal block would find the first rows of the tile
with no key at all: the online softmax's running maximum stays -inf, and exp2(-inf - -inf) is NaN.
Here the diagonal comes last, and every fold still takes an exponent base of 0 while a row's
maximum is -inf (its p and its correction are then 0), whatever order a hook picks.
"""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def swizzle(tile, num_q_blocks, batch_size, num_heads, NUM_XCDS: tl.constexpr):
    """Tile slot -> (q_block, batch_index, head); block-first, as kernels/attention.py."""
    per_q_block = batch_size * num_heads
    return tile // per_q_block, (tile // num_heads) % batch_size, tile % num_heads


@triton.jit
def kv_order(step, n_steps, local_tile, NUM_XCDS: tl.constexpr):
    """Step of a tile's K/V scan -> K/V block to fold in (a permutation of [0, n_steps)): cyclic."""
    return step


@triton.jit
def _fold(acc, l_i, m_i, q, k_ptrs, v_ptrs, cols, offs_m, seq_len, qk_scale, MASKED: tl.constexpr,
          CAUSAL: tl.constexpr):
    """One K/V block (keys `cols`) into the running (acc, l_i, m_i).

    MASKED blocks may hold keys past the sequence or (CAUSAL) right of the diagonal; the others are
    loaded and scored without a mask or a select, which the hot loop cannot afford.
    """
    if MASKED:
        k = tl.load(k_ptrs, mask=cols[None, :] < seq_len, other=0.0)
        visible = cols[None, :] < seq_len
        if CAUSAL:
            visible = visible & (offs_m[:, None] >= cols[None, :])
        s = tl.where(visible, tl.dot(q, k), float("-inf"))
    else:
        s = tl.dot(q, tl.load(k_ptrs))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    base = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: p = 0, no NaN
    p = tl.math.exp2(s * qk_scale - base[:, None])
    alpha = tl.math.exp2(m_i - base)
    l_i = l_i * alpha + tl.sum(p, 1)
    if MASKED:
        v = tl.load(v_ptrs, mask=cols[:, None] < seq_len, other=0.0)
    else:
        v = tl.load(v_ptrs)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, l_i, m_new


@triton.jit
def attention_persistent_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr,
    stride_qb, stride_qh, stride_qs, stride_qd,
    stride_kb, stride_kh, stride_ks, stride_kd,
    stride_vb, stride_vh, stride_vs, stride_vd,
    stride_ob, stride_oh, stride_os, stride_od,
    batch_size, num_heads, heads_per_kv, seq_len, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
    NUM_XCDS: tl.constexpr,
):
    pid, programs = tl.program_id(0), tl.num_programs(0)
    num_q_blocks = tl.cdiv(seq_len, BLOCK_M)
    num_tiles = num_q_blocks * batch_size * num_heads
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    for local in range(0, tl.cdiv(num_tiles - pid, programs)):
        q_block, batch_index, head = swizzle(pid + local * programs, num_q_blocks, batch_size, num_heads, NUM_XCDS)
        kv_head = head // heads_per_kv
        offs_m = q_block * BLOCK_M + tl.arange(0, BLOCK_M)
        in_grid = (head < num_heads) & (batch_index < batch_size)
        rows_ok = offs_m < tl.where(in_grid, seq_len, 0)
        q_base = q_ptr + batch_index.to(tl.int64) * stride_qb + head.to(tl.int64) * stride_qh
        k_base = k_ptr + batch_index.to(tl.int64) * stride_kb + kv_head.to(tl.int64) * stride_kh
        v_base = v_ptr + batch_index.to(tl.int64) * stride_vb + kv_head.to(tl.int64) * stride_vh
        q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :] * stride_qd, mask=rows_ok[:, None],
                    other=0.0)
        acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
        l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
        m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
        # Keys [0, stop) are attended. Blocks [0, n_open) need no mask (whole, inside the sequence and,
        # CAUSAL, left of the diagonal): the loop-order hook orders those. The masked rest (the
        # diagonal blocks, a partial last block) follows in forward order, so every row has seen a
        # key before its diagonal block, and the hot loop has no mask and no branch (a branch in
        # the loop body stops Triton from pipelining the K/V loads: 35-40 % on an H100).
        stop = seq_len
        open_end = seq_len // BLOCK_N
        if CAUSAL:
            stop = tl.minimum((q_block + 1) * BLOCK_M, seq_len)
            open_end = tl.minimum(q_block * BLOCK_M // BLOCK_N, open_end)
        n_open = tl.where(in_grid, open_end, 0)
        n_steps = tl.where(in_grid, tl.cdiv(stop, BLOCK_N), 0)
        for step in range(0, n_open):
            cols = kv_order(step, n_open, local, NUM_XCDS) * BLOCK_N + offs_n
            acc, l_i, m_i = _fold(acc, l_i, m_i, q, k_base + cols[None, :] * stride_ks + offs_d[:, None] * stride_kd,
                                  v_base + cols[:, None] * stride_vs + offs_d[None, :] * stride_vd, cols, offs_m,
                                  seq_len, qk_scale, False, CAUSAL)
        for block in range(n_open, n_steps):
            cols = block * BLOCK_N + offs_n
            acc, l_i, m_i = _fold(acc, l_i, m_i, q, k_base + cols[None, :] * stride_ks + offs_d[:, None] * stride_kd,
                                  v_base + cols[:, None] * stride_vs + offs_d[None, :] * stride_vd, cols, offs_m,
                                  seq_len, qk_scale, True, CAUSAL)
        out = acc / l_i[:, None]
        o_base = o_ptr + batch_index.to(tl.int64) * stride_ob + head.to(tl.int64) * stride_oh
        tl.store(o_base + offs_m[:, None] * stride_os + offs_d[None, :] * stride_od,
                 out.to(o_ptr.dtype.element_ty), mask=rows_ok[:, None])


BLOCK_M, BLOCK_N = 128, 64


def resident_programs(dim: int) -> int:
    """Programs that fit at once: one per SM at D = 128 (as kernels/attention.py), else two."""
    if not torch.cuda.is_available():
        return 8  # the CPU interpreter: a few, so that every program runs several tiles
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return sms * (1 if dim >= 128 else 2)


def attention_persistent(q, k, v, causal: bool, programs: int | None = None, num_xcds: int = 8, out=None):
    batch, heads, seq, dim = q.shape
    kv_heads = k.shape[1]
    assert k.shape == v.shape == (batch, kv_heads, seq, dim) and heads % kv_heads == 0
    o = torch.empty_like(q) if out is None else out
    tiles = triton.cdiv(seq, BLOCK_M) * batch * heads
    grid = (min(tiles, programs or resident_programs(dim)),)
    attention_persistent_kernel[grid](
        q, k, v, o, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        batch, heads, heads // kv_heads, seq, math.log2(math.e) / math.sqrt(dim),
        HEAD_DIM=dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=causal, NUM_XCDS=num_xcds,
        num_warps=8 if dim >= 64 else 4,
    )
    return o


_REFERENCE_ROWS = 1024  # query rows per step: the score matrix stays below heads_per_kv x 1024 x S fp32


def _reference(q, k, v, causal: bool) -> torch.Tensor:
    """fp32 softmax attention, one K/V head and 1024 query rows at a time (so 128K tokens fit a GPU)."""
    q, k, v = q.float(), k.float(), v.float()
    seq, group = q.shape[2], q.shape[1] // k.shape[1]
    out = torch.empty_like(q)
    for kv_head in range(k.shape[1]):
        heads = slice(kv_head * group, (kv_head + 1) * group)
        k_t = k[:, kv_head, None].transpose(-1, -2)
        for start in range(0, seq, _REFERENCE_ROWS):
            rows = torch.arange(start, min(seq, start + _REFERENCE_ROWS), device=q.device)
            scores = (q[:, heads, rows] @ k_t) / math.sqrt(q.shape[-1])
            if causal:
                scores = scores.masked_fill(rows[:, None] < torch.arange(seq, device=q.device)[None, :], float("-inf"))
            out[:, heads, rows] = torch.softmax(scores, dim=-1) @ v[:, kv_head, None]
    return out


# --- the kernel file contract (swizzleperf.kernel.contract.CONTRACT) -----------------------------------
REMAP_HOOK = "swizzle"
LOOP_ORDER_HOOK = "kv_order"  # a permutation of the steps; the sawtooth is one (swizzleperf.validation.loop_order)
PERSISTENT = True  # `programs` resident programs (the launch grid) loop over grid()'s tiles


def _mha(heads: int, seq: int, programs: int) -> dict[str, int]:
    """A non-causal MHA shape at D = 128 in bf16, `programs` resident (one per SM or CU)."""
    return {"batch": 1, "heads": heads, "kv_heads": heads, "seq": seq, "head_dim": 128, "causal": 0,
            "programs": programs, "bf16": 1}


SIZES = {
    # as kernels/attention.py's check sizes; 5 programs run 2-3 tiles each (a sawtooth scans back on the 2nd)
    "tiny": {"batch": 1, "heads": 4, "kv_heads": 2, "seq": 300, "head_dim": 16, "causal": 1, "programs": 5,
             "bf16": 0},
    "small": {"batch": 2, "heads": 4, "kv_heads": 4, "seq": 200, "head_dim": 32, "causal": 0, "programs": 5,
              "bf16": 0},
    # GB10 (48 SMs, 24 MB L2): one head's K/V is 8 MB at 16K (fits), 32 MB at 64K (does not)
    "gb10_1x16k": _mha(1, 16384, 48),
    "gb10_1x64k": _mha(1, 65536, 48),
    # H100 (132 SMs, 50 MB L2): one head's K/V is 64 MB at 128K. One head is the largest shape the
    # simulator takes here (1.07 G line accesses); eight is the shape of issue 16: GPU only
    "h100_1x128k": _mha(1, 131072, 132),
    "h100_8x128k": _mha(8, 131072, 132),
    # MI300X (304 CUs, 4 MB of L2 per XCD): one head's K/V (4 MB at 8K tokens) exceeds a die's L2 past 8K;
    # `swizzleperf sweep kernels/attention_persistent.py --like mi300x_8x16k` varies heads and tokens
    "mi300x_8x16k": _mha(8, 16384, 304),
    # a causal scan at D = 128 on the GPU (a backward causal scan starts on fully masked rows): GPU only
    "gpu_causal_8x4k": {**_mha(8, 4096, 132), "causal": 1},
}
DEFAULT_SIZE = "small"
CHECK_SIZES = ["tiny", "small"]
PROGRAMS_PER_CU = 1  # as kernels/attention.py at D = 128
TOLERANCE = {"atol": 4e-3, "rtol": 8e-3}  # kernels/attention.py's, same arithmetic


def grid(size: dict) -> tuple[int, int, int]:
    return (triton.cdiv(size["seq"], BLOCK_M), size["batch"], size["heads"])


def make_inputs(size: dict, seed: int, device: str) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    b, h, h_kv, s, d = size["batch"], size["heads"], size["kv_heads"], size["seq"], size["head_dim"]
    shapes = {"q": (b, h, s, d), "k": (b, h_kv, s, d), "v": (b, h_kv, s, d)}
    dtype = torch.bfloat16 if size["bf16"] else torch.float16
    return {name: torch.randn(shape, generator=gen).to(dtype).to(device) for name, shape in shapes.items()}


def make_outputs(size: dict, device: str) -> dict[str, torch.Tensor]:
    shape = (size["batch"], size["heads"], size["seq"], size["head_dim"])
    return {"o": torch.empty(shape, device=device, dtype=torch.bfloat16 if size["bf16"] else torch.float16)}


def launch(inputs: dict, outputs: dict, size: dict, num_xcds: int) -> None:
    attention_persistent(inputs["q"], inputs["k"], inputs["v"], bool(size["causal"]), programs=size["programs"],
                         num_xcds=num_xcds, out=outputs["o"])


def reference(inputs: dict, size: dict) -> dict[str, torch.Tensor]:
    return {"o": _reference(inputs["q"], inputs["k"], inputs["v"], bool(size["causal"])).to(inputs["q"].dtype)}


if __name__ == "__main__":  # the kernel's own hooks; other orders: `swizzleperf check --remap FILE`
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name in CHECK_SIZES if device == "cpu" else SIZES:
        size = SIZES[name]
        inputs, outputs = make_inputs(size, 0, device), make_outputs(size, device)
        launch(inputs, outputs, size, num_xcds=8)
        assert not torch.isnan(outputs["o"]).any(), f"{name}: NaN in the output"
        torch.testing.assert_close(outputs["o"].float(), reference(inputs, size)["o"].float(), **TOLERANCE)
        print(f"attention_persistent {name}: ok")
