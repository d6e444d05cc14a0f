"""Tiled matrix multiply C = A @ B with fp32 accumulation.

A is (M, K), B is (K, N), both fp16, bf16 or fp32; C is (M, N) in the output's dtype (fp32 in
the problem below). C is cut into BLOCK_M x BLOCK_N tiles and every tile gets one program,
which walks the whole K dimension: tile (pid_m, pid_n) reads row panel pid_m of A and column
panel pid_n of B. So all tiles of one tile row share an A panel and all tiles of one tile column
share a B panel. On a GPU whose L2 is split over dies, a panel is fetched once per die that runs
a tile needing it: the cheapest schedule gives each die a compact block of tiles (few rows times
few columns) rather than a long strip or a scattered set.

Launch order: one 1D grid of num_pid_m * num_pid_n programs. The remap hook `swizzle` turns
the launched program id into the tile `(pid_m, pid_n)` it computes; the identity is row-major
without grouping, so both the die assignment and a GROUP_M raster are left for a remap to find.
"""

import torch
import triton
import triton.language as tl


# --- the remap hook: swizzleperf rewrites only this function -----------------------------
@triton.jit
def swizzle(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr):
    """Launch-order program id -> output tile (pid_m, pid_n) (a bijection onto the tile grid)."""
    return pid // num_pid_n, pid % num_pid_n


# --- the kernel ------------------------------------------------------------------------------
@triton.jit
def matmul_kernel(
    # pointers
    a_ptr, b_ptr, c_ptr,
    # shapes
    M, N, K,
    # strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    # meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr, NUM_XCDS: tl.constexpr,
):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = swizzle(tl.program_id(0), num_pid_m, num_pid_n, NUM_XCDS)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Rows and columns past the edge are masked, so a remap that names a tile outside the grid
    # touches no memory (its missing tile is then caught by the correctness check).
    mask_m = offs_m < M
    mask_n = offs_n < N
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None].to(tl.int64) * stride_bk + offs_n[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K  # the last step may be a partial tile
        a = tl.load(a_ptrs, mask=mask_m[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & mask_n[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


# --- host wrapper ---------------------------------------------------------------------------
# A common MI300X fp16 configuration. With BLOCK_K = 64 a tile row of fp16 A is exactly one
# 128 B line, and a tile row of B is two.
BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64


def matmul(a: torch.Tensor, b: torch.Tensor, num_xcds: int = 8, out: torch.Tensor | None = None) -> torch.Tensor:
    assert a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0], \
        f"cannot multiply {tuple(a.shape)} by {tuple(b.shape)}"
    assert a.dtype == b.dtype and a.dtype in (torch.float16, torch.bfloat16, torch.float32), \
        f"A and B must share one of fp16, bf16, fp32; got {a.dtype} and {b.dtype}"
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=torch.float32) if out is None else out
    assert c.shape == (M, N), f"out must be ({M}, {N}), got {tuple(c.shape)}"
    num_programs = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    matmul_kernel[(num_programs,)](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        # fp32 inputs: exact fp32 products (NVIDIA would round them to tf32 by default);
        # fp16/bf16: the backend's native matrix cores, whose products are exact in fp32 anyway.
        DOT_PRECISION="ieee" if a.dtype == torch.float32 else None,
        NUM_XCDS=num_xcds,
    )
    return c


# --- swizzleperf problem declaration --------------------------------------------------------
REMAP_HOOK = "swizzle"
SIZES = {
    # M, N, K not multiples of the blocks: every tail mask is exercised; 3 x 2 = 6 tiles.
    "tiny": {"M": 300, "N": 200, "K": 100},
    # 5 x 4 = 20 tiles: a GROUP_M = 8 raster gets one partial group; K = 2 full steps + 22.
    "small": {"M": 520, "N": 400, "K": 150},
    # A Llama-2-13B MLP up-projection over 1024 tokens. 8 x 108 = 864 tiles; per tile and K step
    # 128 lines of A + 64 rows x 2 lines of B = 256 lines, 80 steps, plus 128 x 4 lines of fp32 C:
    # 864 * 20,992 = 18.1 M line accesses. On MI300X (8 XCDs x 76 resident programs), the identity
    # gives each XCD 27 of the 108 tile columns (gcd(108, 8) = 4) over ~6 tile rows: ~33 panels per
    # 152 tile loads per K step, where an 8 x 9.5 block needs ~18. The simulator (mi300x preset)
    # predicts L2 read hit rates of 68 % for the identity, 86 % for XCD-contiguous + GROUP_M = 8 (84 %
    # with GROUP_M = 4) and 48 % for XCD-contiguous alone (each XCD then sweeps one tile row at a
    # time), read ceiling 93 %; a scratch model with an XOR-folded set index agreed. K = 5120 is not a
    # power of two, so A's row stride does not fold a group's A tiles into a few L2 sets under
    # modulo indexing (with K = 4096 the scratch model drops XCD-contiguous + GROUP_M = 8 to ~42 %).
    "medium": {"M": 1024, "N": 13824, "K": 5120},
    "large": {"M": 4096, "N": 13824, "K": 5120},
}
DEFAULT_SIZE = "medium"
CHECK_SIZES = ["tiny", "small"]  # cheap enough for the CPU interpreter
# fp16 products are exact in fp32; only the fp32 summation order differs from torch's. Measured
# on the CPU at K = 5120 (|C| up to 300): at most 1.5e-4 from torch's fp32 matmul. Matrix cores
# may add with truncation, so allow a few times more; a misplaced tile is off by O(sqrt(K)) >= 10.
TOLERANCE = {"atol": 2e-3, "rtol": 1e-4}


def grid(size: dict) -> tuple[int, int]:
    return (triton.cdiv(size["M"], BLOCK_M), triton.cdiv(size["N"], BLOCK_N))


def make_inputs(size: dict, seed: int, device: str) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.randn(size["M"], size["K"], generator=gen, dtype=torch.float32).to(torch.float16)
    b = torch.randn(size["K"], size["N"], generator=gen, dtype=torch.float32).to(torch.float16)
    return {"a": a.to(device), "b": b.to(device)}


def make_outputs(size: dict, device: str) -> dict[str, torch.Tensor]:
    return {"c": torch.empty(size["M"], size["N"], device=device, dtype=torch.float32)}


def launch(inputs: dict, outputs: dict, size: dict, num_xcds: int) -> None:
    matmul(inputs["a"], inputs["b"], num_xcds, out=outputs["c"])


def reference(inputs: dict, size: dict) -> dict[str, torch.Tensor]:
    return {"c": inputs["a"].float() @ inputs["b"].float()}


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name in CHECK_SIZES:
        size = SIZES[name]
        inputs, outputs = make_inputs(size, 0, device), make_outputs(size, device)
        launch(inputs, outputs, size, num_xcds=8)
        torch.testing.assert_close(outputs["c"], reference(inputs, size)["c"], **TOLERANCE)
        print(f"gemm {name} {size}: ok")
