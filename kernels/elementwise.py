"""Fused elementwise op out = gelu(a * b + c) with b a row vector broadcast over the rows.

a, c and out are (M, N) fp32; b is (N,) fp32, the same for every row (a per-feature scale
shared by a batch, or a (seq, hidden) table broadcast over a batch and flattened). Every program
handles one BLOCK_N-wide column block of one row: program (pid_m, pid_n) reads and writes its
own segment of a, c and out (touched by no other program) and reads block pid_n of b, which
every program of tile column pid_n reads too. So the only data programs share is b, and it is
shared down tile columns.

Whether that sharing turns into L2 hits depends on how much of b a die must hold. With
round-robin dispatch and the row-major identity, a die runs tile columns pid_n = x, x + 8, ...
(mod num_pid_n): when num_pid_n is odd every die sees every block of b, between two reads of
one block it streams a whole row of a, c and out, and once b outgrows the L2 every read of b
misses. Rows spread over dies (XCD-contiguous alone) keep every die on the whole of b as well.
A remap wins by giving each die a set of whole tile columns and running each column's rows
close together, so a die holds only its 1/8 of b. When num_pid_n is a multiple of the die count
the identity already pins each tile column to one die.

Launch order: one 1D grid of num_pid_m * num_pid_n programs; the hook is 2D because the
sharing runs down tile columns, against the row-major launch order, and a remap needs
(pid_m, pid_n) to group them. The identity is row-major.
"""

import torch
import triton
import triton.language as tl


# --- the remap hook: swizzleperf rewrites only this function -----------------------------
@triton.jit
def swizzle(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr):
    """Launch-order program id -> (row, column block) (a bijection onto the tile grid)."""
    return pid // num_pid_n, pid % num_pid_n


# --- the kernel ------------------------------------------------------------------------------
@triton.jit
def gelu_fma_kernel(
    # pointers
    a_ptr, b_ptr, c_ptr, out_ptr,
    # shape and strides
    M, N, stride_a_row, stride_c_row, stride_out_row,
    # meta-parameters
    BLOCK_N: tl.constexpr, NUM_XCDS: tl.constexpr,
):
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = swizzle(tl.program_id(0), M, num_pid_n, NUM_XCDS)

    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # A row outside the grid (only a wrong remap names one) has no columns, so touches no memory.
    row_cols = tl.where(pid_m < M, N, 0)
    mask = offs_n < row_cols
    row = pid_m.to(tl.int64)
    a = tl.load(a_ptr + row * stride_a_row + offs_n, mask=mask)
    b = tl.load(b_ptr + offs_n, mask=mask)
    c = tl.load(c_ptr + row * stride_c_row + offs_n, mask=mask)
    x = a * b + c
    # The exact (erf) GELU, as torch.nn.functional.gelu's default.
    y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(out_ptr + row * stride_out_row + offs_n, y, mask=mask)


# --- host wrapper ---------------------------------------------------------------------------
# 1024 fp32 = 32 lines per load: the usual elementwise block, line-aligned when N * 4 is a
# multiple of 128 B.
BLOCK_N = 1024


def gelu_fma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, num_xcds: int = 8,
             out: torch.Tensor | None = None) -> torch.Tensor:
    assert a.ndim == 2 and a.shape == c.shape, f"a and c must be the same 2D shape, got {tuple(a.shape)}, {tuple(c.shape)}"
    M, N = a.shape
    assert b.shape == (N,) and b.is_contiguous(), f"b must be a contiguous ({N},) row vector, got {tuple(b.shape)}"
    assert a.stride(1) == 1 and c.stride(1) == 1, "a and c must be row-major"
    y = torch.empty_like(a) if out is None else out
    assert y.shape == a.shape and y.stride(1) == 1, "out must be a row-major tensor shaped like a"
    num_programs = M * triton.cdiv(N, BLOCK_N)
    gelu_fma_kernel[(num_programs,)](
        a, b, c, y, M, N, a.stride(0), c.stride(0), y.stride(0),
        BLOCK_N=BLOCK_N, NUM_XCDS=num_xcds,
    )
    return y


# --- swizzleperf problem declaration --------------------------------------------------------
REMAP_HOOK = "swizzle"
SIZES = {
    "tiny": {"M": 3, "N": 2500},     # 3 x 3 = 9 programs; the last column block is ragged
    "small": {"M": 12, "N": 9000},   # 12 x 9 = 108 programs
    # A 4 MB operand (one XCD's whole L2) broadcast over 32 rows: 32 x 977 = 31,264 programs,
    # each 32 lines of a, b, c and out: 3.0 M line reads, of which 2.03 M are compulsory (all of a
    # and c, b once), so the read ceiling is 32.3 %. 977 tile columns is odd, so under the identity
    # every XCD fetches all of b and sweeps 977 programs x 16 KB = 15.6 MB between two reads of a
    # block. The simulator (mi300x preset) predicts L2 read hit rates of 0.0 % for the identity and
    # for XCD-contiguous rows (each XCD runs 4 whole rows, so all of b, in turn), and 27.7 % for
    # XCD-contiguous over a column-major order (each XCD owns ~122 tile columns, 0.5 MB of b, and
    # runs their rows together): its misses are the compulsory 2.03 M, and the rate stays under the
    # ceiling only because the CU's L1 catches 6 % of the reads.
    "medium": {"M": 32, "N": 1_000_000},
    "large": {"M": 64, "N": 2_000_000},
}
DEFAULT_SIZE = "medium"
CHECK_SIZES = ["tiny", "small"]  # cheap enough for the CPU interpreter
# One fp32 multiply-add, then erf in fp32 against torch's fp32 erf: measured at most 1.2e-6 from
# torch on the check sizes, seeds 0-2 (one ulp at |out| ~ 12), so 1e-5 + 1e-5 |out| leaves a ~10x
# margin for a GPU that fuses the multiply-add or uses another erf; a misplaced block is off by O(1).
TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}


def grid(size: dict) -> tuple[int, int]:
    return (size["M"], triton.cdiv(size["N"], BLOCK_N))


def make_inputs(size: dict, seed: int, device: str) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.randn(size["M"], size["N"], generator=gen)
    b = torch.randn(size["N"], generator=gen)
    c = torch.randn(size["M"], size["N"], generator=gen)
    return {"a": a.to(device), "b": b.to(device), "c": c.to(device)}


def make_outputs(size: dict, device: str) -> dict[str, torch.Tensor]:
    return {"out": torch.empty(size["M"], size["N"], device=device)}


def launch(inputs: dict, outputs: dict, size: dict, num_xcds: int) -> None:
    gelu_fma(inputs["a"], inputs["b"], inputs["c"], num_xcds, out=outputs["out"])


def reference(inputs: dict, size: dict) -> dict[str, torch.Tensor]:
    x = inputs["a"].float() * inputs["b"].float() + inputs["c"].float()
    return {"out": torch.nn.functional.gelu(x)}


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name in CHECK_SIZES:
        size = SIZES[name]
        inputs, outputs = make_inputs(size, 0, device), make_outputs(size, device)
        launch(inputs, outputs, size, num_xcds=8)
        torch.testing.assert_close(outputs["out"], reference(inputs, size)["out"], **TOLERANCE)
        print(f"elementwise {name} {size}: ok")
