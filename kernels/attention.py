"""FlashAttention-2 forward: O = softmax(Q K^T / sqrt(D)) V, one Q block per program.

q is (B, H, S, D); k and v are (B, H_KV, S, D) with H a multiple of H_KV (grouped-query
attention: query head h reads K/V head h // (H / H_KV); MHA when H_KV == H). Inputs are fp16
or bf16, the output has the input dtype; scores, the softmax statistics and the output
accumulator are fp32. Causal masking (query i sees keys j <= i) is a size parameter.

Each program owns BLOCK_M query rows of one (batch, head) and streams that head's whole K and
V (up to the diagonal when causal) through an online softmax, BLOCK_N keys at a time. So every
program of one *attention compute cluster* -- all Q blocks of one head in MHA, of one KV group
(H / H_KV heads) in GQA -- reads the same K and V, 2 x S x D elements. On a GPU whose
L2 is split over dies, that K/V is fetched once per die that runs a program of the cluster;
what decides the hit rate is whether a cluster's programs share a die and run close in time.

Launch order: one 1D grid of num_q_blocks * batch * num_heads programs. The remap hook's grid
parameters are (num_q_blocks, batch_size, num_heads): the axes from slowest to fastest in the
*block-first* order many production kernels launch in (consecutive program ids cycle over the
heads, then the batch, and the Q block changes slowest). The shipped hook is the identity on
that order, i.e. the C-order unravel of the program id, so its logical linear index is the id
itself. Under round-robin dispatch it puts head h on die (b * H + h) % 8 for every Q block when
8 divides B * H: each MHA head then stays on one die, but the H / H_KV heads of a GQA group
land on as many different dies, and each die interleaves all its heads Q block by Q block.
"""

import math

import torch
import triton
import triton.language as tl


# --- the remap hook: swizzleperf rewrites only this function -----------------------------
@triton.jit
def swizzle(pid, num_q_blocks, batch_size, num_heads, NUM_XCDS: tl.constexpr):
    """Launch id -> (q_block, batch_index, head); block-first: heads cycle fastest, then batch."""
    per_q_block = batch_size * num_heads
    return pid // per_q_block, (pid // num_heads) % batch_size, pid % num_heads


# --- the kernel ------------------------------------------------------------------------------
@triton.jit
def _attend_keys(
    acc, l_i, m_i, q, k_ptrs, v_ptrs,
    offs_m, offs_n, start, stop, seq_len, qk_scale, stride_ks, stride_vs,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Fold keys [start, stop) into the running (acc, l_i, m_i), BLOCK_N keys per step.

    MASKED steps may hold keys past the end of the sequence or (CAUSAL) above the diagonal;
    the caller sends unmasked steps only where neither can happen, so they skip the selects.
    Scores are in log2 units (qk_scale includes log2(e)) so the exponentials are exp2.
    """
    k_ptrs += start * stride_ks
    v_ptrs += start * stride_vs
    for block_start in range(start, stop, BLOCK_N):
        cols = block_start + offs_n
        if MASKED:
            k = tl.load(k_ptrs, mask=cols[None, :] < seq_len, other=0.0)
        else:
            k = tl.load(k_ptrs)
        s = tl.dot(q, k)
        if MASKED:
            visible = cols[None, :] < seq_len
            if CAUSAL:
                visible = visible & (offs_m[:, None] >= cols[None, :])
            s = tl.where(visible, s, float("-inf"))
        # The scale goes onto the row maxima and into one multiply-add per score: a separate
        # multiply of the whole tile cost 2 % at 128 heads x 16K on an H100 (head-first 35.07 ->
        # 34.38 ms). Every row sees key 0 in its first step, so m_new is finite: no inf - inf.
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        p = tl.math.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        if MASKED:
            v = tl.load(v_ptrs, mask=cols[:, None] < seq_len, other=0.0)
        else:
            v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
        k_ptrs += BLOCK_N * stride_ks
        v_ptrs += BLOCK_N * stride_vs
    return acc, l_i, m_i


@triton.jit
def attention_fwd_kernel(
    # pointers
    q_ptr, k_ptr, v_ptr, o_ptr,
    # strides (batch, head, sequence, head dim)
    stride_qb, stride_qh, stride_qs, stride_qd,
    stride_kb, stride_kh, stride_ks, stride_kd,
    stride_vb, stride_vh, stride_vs, stride_vd,
    stride_ob, stride_oh, stride_os, stride_od,
    # shapes
    batch_size, num_heads, heads_per_kv, seq_len,
    # softmax scale times log2(e)
    qk_scale,
    # meta-parameters
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
    NUM_XCDS: tl.constexpr,
):
    num_q_blocks = tl.cdiv(seq_len, BLOCK_M)
    q_block, batch_index, head = swizzle(tl.program_id(0), num_q_blocks, batch_size, num_heads, NUM_XCDS)
    kv_head = head // heads_per_kv

    offs_m = q_block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    # A remap that names a head or batch outside the grid reads and writes nothing (its missing
    # programs are then caught by the correctness check), as do query rows past the end.
    in_grid = (head < num_heads) & (batch_index < batch_size)
    rows_ok = offs_m < tl.where(in_grid, seq_len, 0)

    q_base = q_ptr + batch_index.to(tl.int64) * stride_qb + head.to(tl.int64) * stride_qh
    k_base = k_ptr + batch_index.to(tl.int64) * stride_kb + kv_head.to(tl.int64) * stride_kh
    v_base = v_ptr + batch_index.to(tl.int64) * stride_vb + kv_head.to(tl.int64) * stride_vh
    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :] * stride_qd, mask=rows_ok[:, None],
                other=0.0)
    k_ptrs = k_base + offs_n[None, :] * stride_ks + offs_d[:, None] * stride_kd  # K^T tile: (HEAD_DIM, BLOCK_N)
    v_ptrs = v_base + offs_n[:, None] * stride_vs + offs_d[None, :] * stride_vd  # V tile: (BLOCK_N, HEAD_DIM)

    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)

    # Keys this program attends to: all of them, or (CAUSAL) those up to its last row. Keys
    # [0, unmasked_end) need no mask: whole blocks below the diagonal (BLOCK_M is a multiple of
    # BLOCK_N) and inside the sequence. The bounds depend only on the Q block, so programs of one
    # Q block -- consecutive in block-first order -- loop the same number of times.
    stop = seq_len
    unmasked_end = (seq_len // BLOCK_N) * BLOCK_N
    if CAUSAL:
        stop = tl.minimum((q_block + 1) * BLOCK_M, seq_len)
        unmasked_end = tl.minimum(q_block * BLOCK_M, unmasked_end)
    stop = tl.where(in_grid, stop, 0)
    unmasked_end = tl.where(in_grid, unmasked_end, 0)
    acc, l_i, m_i = _attend_keys(acc, l_i, m_i, q, k_ptrs, v_ptrs, offs_m, offs_n, 0, unmasked_end, seq_len,
                                 qk_scale, stride_ks, stride_vs, False, CAUSAL, BLOCK_N)
    acc, l_i, m_i = _attend_keys(acc, l_i, m_i, q, k_ptrs, v_ptrs, offs_m, offs_n, unmasked_end, stop, seq_len,
                                 qk_scale, stride_ks, stride_vs, True, CAUSAL, BLOCK_N)

    out = acc / l_i[:, None]
    o_base = o_ptr + batch_index.to(tl.int64) * stride_ob + head.to(tl.int64) * stride_oh
    tl.store(o_base + offs_m[:, None] * stride_os + offs_d[None, :] * stride_od, out.to(o_ptr.dtype.element_ty),
             mask=rows_ok[:, None])


# --- host wrapper ---------------------------------------------------------------------------
# 128 x 64 tiles are the usual FA2 forward choice for D = 128 in fp16/bf16 on MI300X and H100.
# BLOCK_M must be a multiple of BLOCK_N (the causal loop splits at q_block * BLOCK_M).
BLOCK_M, BLOCK_N = 128, 64


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, num_xcds: int = 8,
              out: torch.Tensor | None = None) -> torch.Tensor:
    assert q.ndim == k.ndim == v.ndim == 4, "q, k and v must be (batch, heads, seq, head_dim)"
    assert k.shape == v.shape, f"k and v must have one shape, got {tuple(k.shape)} and {tuple(v.shape)}"
    batch, heads, seq, dim = q.shape
    kv_heads = k.shape[1]
    assert k.shape == (batch, kv_heads, seq, dim), f"k must be ({batch}, H_KV, {seq}, {dim}), got {tuple(k.shape)}"
    assert heads % kv_heads == 0, f"query heads ({heads}) must be a multiple of K/V heads ({kv_heads})"
    assert q.dtype == k.dtype == v.dtype and q.dtype in (torch.float16, torch.bfloat16), \
        f"q, k and v must share fp16 or bf16, got {q.dtype}, {k.dtype}, {v.dtype}"
    assert dim in (16, 32, 64, 128, 256), f"head_dim must be a power of two in [16, 256], got {dim}"
    o = torch.empty_like(q) if out is None else out
    assert o.shape == q.shape and o.dtype == q.dtype, f"out must be {tuple(q.shape)} {q.dtype}"
    num_programs = triton.cdiv(seq, BLOCK_M) * batch * heads
    attention_fwd_kernel[(num_programs,)](
        q, k, v, o,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        batch, heads, heads // kv_heads, seq,
        math.log2(math.e) / math.sqrt(dim),
        HEAD_DIM=dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=causal, NUM_XCDS=num_xcds,
        **_launch_config(dim),
    )
    return o


def _launch_config(dim: int) -> dict[str, int]:
    """Warps and pipeline stages, from offline compiles with triton 3.9 (no GPU was at hand).

    At D = 128 with 4 warps, sm_90 spills (255 registers + 752 B of stack, cuobjdump) and gfx942
    needs 271 VGPRs (occupancy 1); with 8 warps sm_90 fits in 248 registers and gfx942 in 256
    VGPRs without spills. On gfx942 one stage keeps it that way (two spill a VGPR) and within
    the 64 KB of LDS; sm_90 keeps Triton's default stages (128 KB of its 227 KB shared memory).
    """
    config = {"num_warps": 8 if dim >= 64 else 4}
    if torch.version.hip:
        config["num_stages"] = 1
    return config


# --- swizzleperf problem declaration --------------------------------------------------------
REMAP_HOOK = "swizzle"
SIZES = {
    # GQA (2 heads per K/V head), causal; 300 = 2 full Q blocks + 44 rows: 12 programs, the
    # partial key block and the diagonal both exercised.
    "tiny": {"batch": 1, "heads": 4, "kv_heads": 2, "seq": 300, "head_dim": 16, "causal": 1, "bf16": 0},
    # MHA, non-causal, two batches: 16 programs, the last key block partial.
    "small": {"batch": 2, "heads": 4, "kv_heads": 4, "seq": 200, "head_dim": 32, "causal": 0, "bf16": 0},
    # Llama-3-8B prefill of 4096 tokens: 32 query heads in 8 KV groups of 4, D = 128, causal, fp16.
    # K/V: 8 x 2 x 4096 x 128 x 2 B = 16 MB, 2 MB per group, against a 4 MB L2 per XCD. 32 x 32 =
    # 1024 programs; Q block i reads 256 lines of Q, 2 x (i + 1) x 128 rows x 2 lines of K and V,
    # and writes 256 lines of O: 32 heads x (512 x 32 + 512 x 528) = 9.2 M line accesses.
    # Block-first order spreads each KV group over 4 XCDs (heads h -> XCD h % 8). Simulated mi300x
    # L2 read hit rates (1 program per CU, `swizzleperf sweep attention --hardware mi300x --heads 32
    # --kv-heads 8 --seq 4096 --batch 1`): identity 51.55 %, naive head-first 85.36 %, swizzled
    # block-first 95.59 % and swizzled head-first 95.27 % with one KV group per XCD; ceiling 95.59 %
    # (a KV group's 2 MB fits one L2, so both pinned orders come close to it).
    "medium": {"batch": 1, "heads": 32, "kv_heads": 8, "seq": 4096, "head_dim": 128, "causal": 1, "bf16": 0},
    # Many MHA heads: 64 x 2 MB of K/V, 8 heads per XCD under block-first order. 2048 programs,
    # 18.4 M line accesses. Simulated mi300x L2 read hit rates (`sweep attention --hardware mi300x
    # --heads 64 --kv-heads 64 --seq 4096 --batch 1 --like mha64_4k`): identity and swizzled
    # block-first 9.59 % (each XCD streams 8 heads' K/V, 16 MB, through 4 MB), naive head-first
    # 53.31 %, swizzled head-first (group 1) 91.17 %, the ceiling 91.18 %.
    "mha64_4k": {"batch": 1, "heads": 64, "kv_heads": 64, "seq": 4096, "head_dim": 128, "causal": 1, "bf16": 0},
    # Llama-3-70B-like prefill of 8192 tokens (64 heads, 8 KV groups of 8): GPU only.
    "large": {"batch": 1, "heads": 64, "kv_heads": 8, "seq": 8192, "head_dim": 128, "causal": 1, "bf16": 0},
    # The attention NUMA study's measurement on an H200 with ncu: block-first 0.45 % L2 hit rate and 138 GB
    # from DRAM, head-first ~100 % and 1.6 GB, 1.38x faster. This kernel on an H100 (ncu,
    # `optimize --size mha128_16k`): 0.44 % -> 97.36 %, 45.9 -> 35.1 ms (1.31x). GPU only.
    "mha128_16k": {"batch": 1, "heads": 128, "kv_heads": 128, "seq": 16384, "head_dim": 128, "causal": 0,
                   "bf16": 1},
    # The same, 32 heads at 32K: 55 % -> 97 %, 1.11x. GPU only.
    "mha32_32k": {"batch": 1, "heads": 32, "kv_heads": 32, "seq": 32768, "head_dim": 128, "causal": 0,
                  "bf16": 1},
}
DEFAULT_SIZE = "medium"
CHECK_SIZES = ["tiny", "small"]  # cheap enough for the CPU interpreter
# One program fills an SM or CU at D = 128 (every size but the check sizes): on sm_90, 8 warps x
# 248 registers take 63.5K of 64K, and 128 KB of shared memory; on gfx942, 8 waves x 256 VGPRs fill
# the CU's four SIMDs and Q + K + V take its 64 KB of LDS. The simulator otherwise assumes 2 per CU,
# and two Q blocks of one head side by side would share its K/V: the sim h100 preset predicted
# 48 % for block-first at 128 heads x 4K where ncu measures ~0.5 % at 16K (with 1: 2.2 % today).
PROGRAMS_PER_CU = 1
# The kernel rounds P to the input dtype before P @ V (as FA2 does) and O on the store; the rest
# is fp32. A bf16 store is off by up to 2^-9 = 2e-3 relative (fp16: 2^-11): rtol = 4x that.
# P's rounding adds an absolute error that is largest on short causal rows (few keys, |O| up
# to ~4): an emulation of this kernel's arithmetic in torch (seeds 0-4) needs at most 1.8e-3
# beyond rtol for bf16 at S = 256 and 1e-4 at S = 16K; fp16 needs 4e-5 (the CPU interpreter
# measures 5.4e-4 max abs error at the check sizes). At S = 16K outputs average V over many
# keys (|O| ~ 0.01), so a misplaced tile still misses this band on most of its elements, and a
# program that never ran leaves NaN.
TOLERANCE = {"atol": 4e-3, "rtol": 8e-3}


def grid(size: dict) -> tuple[int, int, int]:
    return (triton.cdiv(size["seq"], BLOCK_M), size["batch"], size["heads"])


def _dtype(size: dict) -> torch.dtype:
    return torch.bfloat16 if size["bf16"] else torch.float16


def make_inputs(size: dict, seed: int, device: str) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    b, h, h_kv, s, d = size["batch"], size["heads"], size["kv_heads"], size["seq"], size["head_dim"]
    shapes = {"q": (b, h, s, d), "k": (b, h_kv, s, d), "v": (b, h_kv, s, d)}
    return {name: torch.randn(shape, generator=gen).to(_dtype(size)).to(device) for name, shape in shapes.items()}


def make_outputs(size: dict, device: str) -> dict[str, torch.Tensor]:
    shape = (size["batch"], size["heads"], size["seq"], size["head_dim"])
    return {"o": torch.empty(shape, device=device, dtype=_dtype(size))}


def launch(inputs: dict, outputs: dict, size: dict, num_xcds: int) -> None:
    attention(inputs["q"], inputs["k"], inputs["v"], bool(size["causal"]), num_xcds, out=outputs["o"])


_REFERENCE_ROWS = 1024  # query rows per step: the score matrix stays below heads_per_kv x 1024 x S fp32


def reference(inputs: dict, size: dict) -> dict[str, torch.Tensor]:
    """fp32 softmax attention, one K/V head and 1024 query rows at a time to bound memory."""
    q, k, v = (inputs[name].float() for name in ("q", "k", "v"))
    seq, group = size["seq"], size["heads"] // size["kv_heads"]
    scale = 1.0 / math.sqrt(size["head_dim"])
    out = torch.empty_like(q)
    for kv_head in range(size["kv_heads"]):
        heads = slice(kv_head * group, (kv_head + 1) * group)
        k_t = k[:, kv_head, None].transpose(-1, -2)  # (B, 1, D, S): broadcast over the group's heads
        for start in range(0, seq, _REFERENCE_ROWS):
            rows = torch.arange(start, min(seq, start + _REFERENCE_ROWS), device=q.device)
            scores = (q[:, heads, rows] @ k_t) * scale
            if size["causal"]:
                above = rows[:, None] < torch.arange(seq, device=q.device)[None, :]
                scores = scores.masked_fill(above, float("-inf"))
            out[:, heads, rows] = torch.softmax(scores, dim=-1) @ v[:, kv_head, None]
    return {"o": out}


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name in CHECK_SIZES if device == "cpu" else SIZES:
        size = SIZES[name]
        inputs, outputs = make_inputs(size, 0, device), make_outputs(size, device)
        launch(inputs, outputs, size, num_xcds=8)
        expected = reference(inputs, size)["o"]
        torch.testing.assert_close(outputs["o"].float(), expected, **TOLERANCE)
        error = (outputs["o"].float() - expected).abs().max().item()
        print(f"attention {name} {size}: ok (max abs error {error:.2e})")
