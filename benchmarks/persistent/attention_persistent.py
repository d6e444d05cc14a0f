"""FlashAttention-2 forward, persistent: a fixed number of programs loop over the Q tiles (issue 16).

A kernel file (the contract's PERSISTENT = True: `swizzleperf check/profile/optimize` take it; the
simulator captures each candidate remap's own trace), not yet one of the suite: the loop-order hook
`kv_order` is chosen by a size's `sawtooth` value, not yet rewritten by swizzleperf like the remap
hook. `python benchmarks/persistent/attention_persistent.py` checks it on the CPU interpreter or the
GPU; `benchmarks/persistent/bench_persistent.py` times it against kernels/attention.py.

Same math and layout as kernels/attention.py (q (B, H, S, D), k and v (B, H_KV, S, D), GQA when
H_KV < H, causal or not, fp32 statistics). Program p of G runs tiles p, p + G, p + 2G, ... (its
local tiles 0, 1, 2, ...); the remap hook `swizzle` maps a tile slot to (q_block, batch, head) as
the non-persistent kernel's hook maps a program id. The loop-order hook `kv_order` picks which K/V
block a tile folds in at each step of its scan: the identity is the cyclic scan (forward every
time); the sawtooth scans backward on odd local tiles, so a scan starts on the blocks the previous
one just left in the L2 (Zhu, Pan, Ding, "Sawtooth Wavefront Reordering").

A backward causal scan starts at the diagonal block, where the first rows of the tile see no key
at all: the online softmax's running maximum stays -inf there, and exp2(-inf - -inf) is NaN. The
exponent's base is therefore 0 while a row's maximum is -inf (its p and its correction are then 0).
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
def head_first(tile, num_q_blocks, batch_size, num_heads, NUM_XCDS: tl.constexpr):
    """Tile slot -> (q_block, batch_index, head); head-first: a head's Q blocks are consecutive."""
    per_head = num_q_blocks * batch_size
    return tile % num_q_blocks, (tile // num_q_blocks) % batch_size, tile // per_head


@triton.jit
def kv_order(step, n_steps, local_tile, NUM_XCDS: tl.constexpr):
    """Step of a tile's K/V scan -> K/V block to fold in (a permutation of [0, n_steps)): cyclic."""
    return step


@triton.jit
def sawtooth(step, n_steps, local_tile, NUM_XCDS: tl.constexpr):
    """Forward on even local tiles, backward on odd ones."""
    return tl.where(local_tile % 2 == 0, step, n_steps - 1 - step)


@triton.jit
def _fold(acc, l_i, m_i, q, k, v, qk_scale, visible):
    """One K/V block into the running (acc, l_i, m_i); scores where not `visible` are -inf."""
    s = tl.where(visible, tl.dot(q, k), float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    base = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: p = 0, no NaN
    p = tl.math.exp2(s * qk_scale - base[:, None])
    alpha = tl.math.exp2(m_i - base)
    l_i = l_i * alpha + tl.sum(p, 1)
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
    SAWTOOTH: tl.constexpr, HEAD_FIRST: tl.constexpr, NUM_XCDS: tl.constexpr,
):
    pid, programs = tl.program_id(0), tl.num_programs(0)
    num_q_blocks = tl.cdiv(seq_len, BLOCK_M)
    num_tiles = num_q_blocks * batch_size * num_heads
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    for local in range(0, tl.cdiv(num_tiles - pid, programs)):
        if HEAD_FIRST:
            q_block, batch_index, head = head_first(pid + local * programs, num_q_blocks, batch_size, num_heads,
                                                    NUM_XCDS)
        else:
            q_block, batch_index, head = swizzle(pid + local * programs, num_q_blocks, batch_size, num_heads,
                                                 NUM_XCDS)
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
        stop = seq_len  # keys [0, stop) are attended
        if CAUSAL:
            stop = tl.minimum((q_block + 1) * BLOCK_M, seq_len)
        n_steps = tl.where(in_grid, tl.cdiv(stop, BLOCK_N), 0)
        for step in range(0, n_steps):
            if SAWTOOTH:
                block = sawtooth(step, n_steps, local, NUM_XCDS)
            else:
                block = kv_order(step, n_steps, local, NUM_XCDS)
            cols = block * BLOCK_N + offs_n
            in_seq = cols < seq_len
            visible = in_seq[None, :]
            if CAUSAL:
                visible = visible & (offs_m[:, None] >= cols[None, :])
            # one masked path for every block (no branch on the block): a branch in the loop body
            # stops Triton from pipelining the K/V loads, which cost 35-40 % on an H100
            k = tl.load(k_base + cols[None, :] * stride_ks + offs_d[:, None] * stride_kd, mask=in_seq[None, :],
                        other=0.0)
            v = tl.load(v_base + cols[:, None] * stride_vs + offs_d[None, :] * stride_vd, mask=in_seq[:, None],
                        other=0.0)
            acc, l_i, m_i = _fold(acc, l_i, m_i, q, k, v, qk_scale, visible)
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


def attention_persistent(q, k, v, causal: bool, sawtooth_order: bool = False, programs: int | None = None,
                         num_xcds: int = 8, out=None, head_first_order: bool = False):
    batch, heads, seq, dim = q.shape
    kv_heads = k.shape[1]
    assert k.shape == v.shape == (batch, kv_heads, seq, dim) and heads % kv_heads == 0
    o = torch.empty_like(q) if out is None else out
    tiles = triton.cdiv(seq, BLOCK_M) * batch * heads
    grid = (min(tiles, programs or resident_programs(dim)),)
    attention_persistent_kernel[grid](
        q, k, v, o, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        batch, heads, heads // kv_heads, seq, math.log2(math.e) / math.sqrt(dim),
        HEAD_DIM=dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=causal, SAWTOOTH=sawtooth_order,
        HEAD_FIRST=head_first_order, NUM_XCDS=num_xcds,
        num_warps=8 if dim >= 64 else 4,
    )
    return o


def _reference(q, k, v, causal: bool) -> torch.Tensor:
    group = q.shape[1] // k.shape[1]
    k, v = (t.float().repeat_interleave(group, dim=1) for t in (k, v))
    scores = (q.float() @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[2]
        scores = scores.masked_fill(torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


# --- the kernel file contract (swizzleperf.kernel.CONTRACT) -----------------------------------
REMAP_HOOK = "swizzle"
LOOP_ORDER_HOOK = "kv_order"  # checked (a permutation of the steps); not yet rewritten by optimize
PERSISTENT = True  # `programs` resident programs (the launch grid) loop over grid()'s tiles
def _both_orders(name: str, heads: int, seq: int, programs: int) -> dict[str, dict[str, int]]:
    """A non-causal MHA shape at D = 128 twice: `name` scans cyclically, `name`_sawtooth in a sawtooth."""
    shape = {"batch": 1, "heads": heads, "kv_heads": heads, "seq": seq, "head_dim": 128, "causal": 0,
             "programs": programs}
    return {name: {**shape, "sawtooth": 0}, f"{name}_sawtooth": {**shape, "sawtooth": 1}}


SIZES = {
    # as kernels/attention.py's check sizes; 5 programs run 2-3 tiles each, forward and (sawtooth) back
    "tiny": {"batch": 1, "heads": 4, "kv_heads": 2, "seq": 300, "head_dim": 16, "causal": 1, "programs": 5,
             "sawtooth": 1},
    "small": {"batch": 2, "heads": 4, "kv_heads": 4, "seq": 200, "head_dim": 32, "causal": 0, "programs": 5,
              "sawtooth": 0},
    # GB10 (48 SMs, 24 MB L2): one head's K/V is 8 MB at 16K (fits), 32 MB at 64K (does not)
    **_both_orders("gb10_1x16k", heads=1, seq=16384, programs=48),
    **_both_orders("gb10_1x64k", heads=1, seq=65536, programs=48),
    # the H100 measurement of issue 16 (one program per SM): GPU only
    **_both_orders("h100_8x128k", heads=8, seq=131072, programs=132),
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
    return {name: torch.randn(shape, generator=gen).to(torch.float16).to(device) for name, shape in shapes.items()}


def make_outputs(size: dict, device: str) -> dict[str, torch.Tensor]:
    shape = (size["batch"], size["heads"], size["seq"], size["head_dim"])
    return {"o": torch.empty(shape, device=device, dtype=torch.float16)}


def launch(inputs: dict, outputs: dict, size: dict, num_xcds: int) -> None:
    attention_persistent(inputs["q"], inputs["k"], inputs["v"], bool(size["causal"]),
                         sawtooth_order=bool(size["sawtooth"]), programs=size["programs"], num_xcds=num_xcds,
                         out=outputs["o"])


def reference(inputs: dict, size: dict) -> dict[str, torch.Tensor]:
    return {"o": _reference(inputs["q"], inputs["k"], inputs["v"], bool(size["causal"])).to(torch.float16)}


CHECKS = [  # (batch, heads, kv_heads, seq, head_dim, causal): ragged, GQA, causal and not
    (1, 4, 2, 300, 16, True), (2, 4, 4, 200, 32, False), (1, 2, 1, 257, 16, True),
]

if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float16
    checks = CHECKS + ([(1, 8, 8, 4096, 128, True), (1, 8, 8, 4096, 128, False)] if device == "cuda" else [])
    for batch, heads, kv_heads, seq, dim, causal in checks:
        gen = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(batch, h, seq, dim, generator=gen).to(dtype).to(device)
                   for h in (heads, kv_heads, kv_heads))
        expected = _reference(q, k, v, causal)
        for order, head_first_order in ((False, False), (True, False), (True, True)):
            o = attention_persistent(q, k, v, causal, sawtooth_order=order, head_first_order=head_first_order,
                                     programs=None if device == "cuda" else 5)
            error = (o.float() - expected).abs().max().item()
            assert not torch.isnan(o).any(), "NaN in the output"
            torch.testing.assert_close(o.float(), expected, atol=4e-3, rtol=8e-3)
            print(f"B={batch} H={heads} H_KV={kv_heads} S={seq} D={dim} causal={causal} "
                  f"{'sawtooth' if order else 'cyclic'}{', head-first' if head_first_order else ''}: ok "
                  f"(max abs error {error:.1e})")
