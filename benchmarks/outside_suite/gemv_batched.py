"""Batched GEMV with one shared matrix: y[b] = A @ x[b], one program per (batch entry, row block).

Outside the suite: a kernel for checking the simulator against real counters. A is (M, K) fp32
and read by every batch entry; program (b, m) reads rows [32m, 32m + 32) of A (512 KB at K = 4096)
and all of x[b]. So the programs of one row block share their A rows across the batch. The
row-major identity runs batch entry after batch entry, streaming all of A (128 MB, more than any
L2) once per entry; an order that runs a row block's batch entries together reads A once.

Launch order: one 1D grid of B * M / 32 programs; the hook maps a launch id to (b, row block).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def swizzle(pid, num_pid_b, num_pid_m, NUM_XCDS: tl.constexpr):
    """Launch-order program id -> (batch entry, row block) (a bijection onto the grid)."""
    return pid // num_pid_m, pid % num_pid_m


@triton.jit
def gemv_kernel(a_ptr, x_ptr, y_ptr, B, M, K, stride_a, stride_x, stride_y,
                BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, NUM_XCDS: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    b, m = swizzle(tl.program_id(0), B, num_pid_m, NUM_XCDS)
    rows = m * BLOCK_M + tl.arange(0, BLOCK_M)
    # a pair outside the grid (only a wrong remap names one) has no rows and no k: it touches nothing
    in_rows = rows < tl.where(b < B, M, 0)
    k_end = tl.where(b < B, K, 0)
    acc = tl.zeros((BLOCK_M,), tl.float32)
    for start in range(0, K, BLOCK_K):
        ks = start + tl.arange(0, BLOCK_K)
        in_k = ks < k_end
        a = tl.load(a_ptr + rows[:, None].to(tl.int64) * stride_a + ks[None, :],
                    mask=in_rows[:, None] & in_k[None, :], other=0.0)
        x = tl.load(x_ptr + b.to(tl.int64) * stride_x + ks, mask=in_k, other=0.0)
        acc += tl.sum(a * x[None, :], axis=1)
    tl.store(y_ptr + b.to(tl.int64) * stride_y + rows, acc, mask=in_rows)


BLOCK_M, BLOCK_K = 32, 256


def gemv_batched(a: torch.Tensor, x: torch.Tensor, num_xcds: int = 8, out: torch.Tensor | None = None):
    (M, K), (B, K2) = a.shape, x.shape
    assert K == K2 and a.stride(1) == 1 and x.stride(1) == 1, "a is (M, K) and x is (B, K), both row-major"
    y = torch.empty(B, M, device=a.device, dtype=torch.float32) if out is None else out
    gemv_kernel[(B * triton.cdiv(M, BLOCK_M),)](a, x, y, B, M, K, a.stride(0), x.stride(0), y.stride(0),
                                                BLOCK_M=BLOCK_M, BLOCK_K=BLOCK_K, NUM_XCDS=num_xcds)
    return y


REMAP_HOOK = "swizzle"
SIZES = {
    "tiny": {"B": 3, "M": 70, "K": 300},      # 3 x 3 programs, ragged rows and K
    "small": {"B": 4, "M": 256, "K": 512},    # 4 x 8 programs
    "medium": {"B": 8, "M": 8192, "K": 4096},  # 8 x 256 programs; A is 128 MB
}
DEFAULT_SIZE = "medium"
CHECK_SIZES = ["tiny", "small"]
# fp32 dot products of at most 512 N(0, 1) terms summed in another order than torch's
TOLERANCE = {"atol": 1e-3, "rtol": 1e-4}


def grid(size: dict) -> tuple[int, int]:
    return (size["B"], triton.cdiv(size["M"], BLOCK_M))


def make_inputs(size: dict, seed: int, device: str) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.randn(size["M"], size["K"], generator=gen)
    x = torch.randn(size["B"], size["K"], generator=gen)
    return {"a": a.to(device), "x": x.to(device)}


def make_outputs(size: dict, device: str) -> dict[str, torch.Tensor]:
    return {"y": torch.empty(size["B"], size["M"], device=device)}


def launch(inputs: dict, outputs: dict, size: dict, num_xcds: int) -> None:
    gemv_batched(inputs["a"], inputs["x"], num_xcds, out=outputs["y"])


def reference(inputs: dict, size: dict) -> dict[str, torch.Tensor]:
    return {"y": inputs["x"].float() @ inputs["a"].float().T}
