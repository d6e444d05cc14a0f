"""A two-sided halo along one row of tiles: out = x + x shifted one column left and right, one program per tile.

Outside the suite: halo1d.py with the left halo too. Program (0, n) loads its BLOCK_M x BLOCK_N tile of x
and the tile moved one column right and one column left: on every row, the first 32-byte sector of tile
n + 1's first line and the last sector of tile n - 1's last line. stencil2d's horizontal sharing without
its vertical one; `xcd_row_major(dies=D)` launches neighbours D apart (the identity: 1).

Launch order: one 1D grid of num_pid_m * num_pid_n programs, the hook 2D as stencil2d's (same
signature, so benchmarks/probe_serial.py launches either).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def swizzle(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr):
    """Launch-order program id -> tile (pid_m, pid_n) (a bijection onto the tile grid)."""
    return pid // num_pid_n, pid % num_pid_n


@triton.jit
def halo_two_sided_kernel(x_ptr, out_ptr, M, N, stride_x_row, stride_out_row,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NUM_XCDS: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = swizzle(tl.program_id(0), num_pid_m, num_pid_n, NUM_XCDS)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    in_grid = (offs_m[:, None] < M) & (offs_n[None, :] < N)  # false on a tile outside the grid
    has_right = in_grid & (offs_n[None, :] < N - 1)
    x_ptrs = x_ptr + offs_m[:, None].to(tl.int64) * stride_x_row + offs_n[None, :]
    center = tl.load(x_ptrs, mask=in_grid)
    right = tl.load(x_ptrs + 1, mask=has_right, other=0.0)
    left = tl.load(x_ptrs - 1, mask=in_grid & (offs_n[None, :] > 0), other=0.0)
    tl.store(out_ptr + offs_m[:, None].to(tl.int64) * stride_out_row + offs_n[None, :], center + right + left,
             mask=in_grid)


# 32 rows of 64 fp32, as stencil2d: two 128 B lines per tile row, the halo one sector of the next line.
BLOCK_M, BLOCK_N = 32, 64


def halo_two_sided(x: torch.Tensor, num_xcds: int = 8, out: torch.Tensor | None = None) -> torch.Tensor:
    assert x.ndim == 2 and x.stride(1) == 1 and x.dtype == torch.float32, "x must be a row-major 2D fp32 tensor"
    M, N = x.shape
    y = torch.empty_like(x) if out is None else out
    assert y.shape == x.shape and y.stride(1) == 1, "out must be a row-major tensor shaped like x"
    halo_two_sided_kernel[(triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)](
        x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, NUM_XCDS=num_xcds)
    return y


REMAP_HOOK = "swizzle"
SIZES = {
    "tiny": {"M": 32, "N": 300},        # 5 tiles, the last ragged
    "small": {"M": 70, "N": 200},       # 3 x 4 tiles
    "medium": {"M": 32, "N": 524288},   # one row of 8,192 tiles, as many programs as stencil2d's medium
}
DEFAULT_SIZE = "medium"
CHECK_SIZES = ["tiny", "small"]
TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}  # one fp32 addition, as the reference does it


def grid(size: dict) -> tuple[int, int]:
    return (triton.cdiv(size["M"], BLOCK_M), triton.cdiv(size["N"], BLOCK_N))


def make_inputs(size: dict, seed: int, device: str) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return {"x": torch.randn(size["M"], size["N"], generator=gen).to(device)}


def make_outputs(size: dict, device: str) -> dict[str, torch.Tensor]:
    return {"out": torch.empty(size["M"], size["N"], device=device)}


def launch(inputs: dict, outputs: dict, size: dict, num_xcds: int) -> None:
    halo_two_sided(inputs["x"], num_xcds, out=outputs["out"])


def reference(inputs: dict, size: dict) -> dict[str, torch.Tensor]:
    x = inputs["x"].float()
    out = x.clone()
    out[:, :-1] += x[:, 1:]
    out[:, 1:] += x[:, :-1]
    return {"out": out}
