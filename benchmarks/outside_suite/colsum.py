"""Column sums of a row-major matrix, one program per 16-column strip: out[j] = sum_i x[i, j].

Outside the suite: a kernel for checking the simulator against real counters on a pattern it
was not built around. Program p owns columns [16p, 16p + 16) of every row, 64 bytes: half of a
128-byte line, two of its four 32-byte sectors. Programs 2k and 2k + 1 share every line they
read but no sector, so on an L2 that looks up and fills sectors the identity reuses nothing.

Launch order: one 1D grid of N / 16 programs; the hook maps a launch id to a strip.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    """Launch-order program id -> column strip (a bijection on [0, num_pids))."""
    return pid


@triton.jit
def colsum_kernel(x_ptr, out_ptr, M, N, stride_row,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NUM_XCDS: tl.constexpr):
    strip = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    cols = strip * BLOCK_N + tl.arange(0, BLOCK_N)
    in_cols = cols < N  # false everywhere for a strip past the end: a wrong remap touches nothing
    acc = tl.zeros((BLOCK_N,), tl.float32)
    for start in range(0, M, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & in_cols[None, :]
        tile = tl.load(x_ptr + rows[:, None].to(tl.int64) * stride_row + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + cols, acc, mask=in_cols)


BLOCK_M, BLOCK_N = 64, 16  # 16 fp32 = 64 B: half a line per row


def colsum(x: torch.Tensor, num_xcds: int = 8, out: torch.Tensor | None = None) -> torch.Tensor:
    M, N = x.shape
    assert x.stride(1) == 1, "x must be row-major"
    y = torch.empty(N, device=x.device, dtype=torch.float32) if out is None else out
    colsum_kernel[(triton.cdiv(N, BLOCK_N),)](x, y, M, N, x.stride(0), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                              NUM_XCDS=num_xcds)
    return y


REMAP_HOOK = "swizzle"
SIZES = {
    "tiny": {"M": 70, "N": 40},       # 3 strips, the last ragged
    "small": {"M": 130, "N": 512},    # 32 strips
    "medium": {"M": 8192, "N": 8192},  # 512 strips of 8192 rows: 256 MB read once
}
DEFAULT_SIZE = "medium"
CHECK_SIZES = ["tiny", "small"]
# fp32 sums of at most 130 N(0, 1) values in another order than torch's: errors ~1e-5
TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}


def grid(size: dict) -> tuple[int]:
    return (triton.cdiv(size["N"], BLOCK_N),)


def make_inputs(size: dict, seed: int, device: str) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return {"x": torch.randn(size["M"], size["N"], generator=gen).to(device)}


def make_outputs(size: dict, device: str) -> dict[str, torch.Tensor]:
    return {"out": torch.empty(size["N"], device=device)}


def launch(inputs: dict, outputs: dict, size: dict, num_xcds: int) -> None:
    colsum(inputs["x"], num_xcds, out=outputs["out"])


def reference(inputs: dict, size: dict) -> dict[str, torch.Tensor]:
    return {"out": inputs["x"].float().sum(dim=0)}
