"""Row LayerNorm with several programs per row.

y = (x - mean) / sqrt(var + eps) * weight + bias, with mean and (biased) variance taken over each
row of `x`. Each row is split into CHUNKS column chunks and every chunk gets its own program.
A program first reduces over the *whole* row (phase 1: mean and variance in one pass), then
normalises and writes only its own chunk (phase 2), reading its slice of `weight` and `bias`.
So the CHUNKS programs of one row all read the same row, and every program reads the same two
parameter vectors. On a GPU whose L2 is split over dies, a row is fetched once per die that runs
one of its chunks: with round-robin dispatch, consecutive program ids land on different dies, so
the identity remap fetches each row up to CHUNKS times. The parameter vectors are small and hot
on every die whatever the schedule.

Launch order: one 1D grid of rows * CHUNKS programs; logical program `l` handles row
`l // CHUNKS`, chunk `l % CHUNKS`. The remap hook `swizzle` decides which logical program
each launched program id runs.
"""

import torch
import triton
import triton.language as tl


# --- the remap hook: swizzleperf rewrites only this function -----------------------------
@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    """Launch-order program id -> logical program id (a bijection on [0, num_pids))."""
    return pid


# --- the kernel ------------------------------------------------------------------------------
@triton.jit
def layernorm_kernel(
    # pointers
    x_ptr, weight_ptr, bias_ptr, y_ptr,
    # shape and strides
    n_rows, n_cols, stride_x_row, stride_y_row,
    # normalisation
    eps,
    # meta-parameters
    CHUNKS: tl.constexpr, BLOCK: tl.constexpr, NUM_XCDS: tl.constexpr,
):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    row = pid // CHUNKS
    chunk = pid % CHUNKS
    # A row past the grid (only a wrong remap names one) has no columns, so touches no memory.
    row_cols = tl.where(row < n_rows, n_cols, 0)
    offs = tl.arange(0, BLOCK)
    x_row_ptr = x_ptr + row.to(tl.int64) * stride_x_row

    # Phase 1: mean and variance of the whole row in one pass. Each lane keeps Welford's running
    # count, mean and sum of squared deviations (m2) over the blocks; Chan's formula then merges
    # the lanes. Stable where sum(x^2) - n mean^2 would cancel (rows with a large mean).
    count = tl.zeros((BLOCK,), tl.float32)
    mean = tl.zeros((BLOCK,), tl.float32)
    m2 = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < row_cols
        x = tl.load(x_row_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        count += mask.to(tl.float32)
        delta = tl.where(mask, x - mean, 0.0)
        mean += delta / tl.maximum(count, 1.0)
        m2 += delta * (x - mean)  # zero on masked lanes, where delta is zero
    row_mean = tl.sum(count * mean, 0) / n_cols
    spread = mean - row_mean
    row_var = (tl.sum(m2, 0) + tl.sum(count * spread * spread, 0)) / n_cols
    rstd = 1.0 / tl.sqrt(row_var + eps)

    # Phase 2: normalise and write this program's chunk only.
    chunk_cols = tl.cdiv(n_cols, CHUNKS)
    for start in range(0, chunk_cols, BLOCK):
        cols = chunk * chunk_cols + start + offs
        mask = (cols < row_cols) & (start + offs < chunk_cols)
        x = tl.load(x_row_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        bias = tl.load(bias_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - row_mean) * rstd * weight + bias
        tl.store(y_ptr + row.to(tl.int64) * stride_y_row + cols, y, mask=mask)


# --- host wrapper ---------------------------------------------------------------------------
BLOCK = 1024  # 4 KB of fp32: 32 lines per load
EPS = 1e-5


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, chunks: int, num_xcds: int = 8,
              eps: float = EPS, out: torch.Tensor | None = None) -> torch.Tensor:
    assert x.ndim == 2 and x.stride(1) == 1, "x must be a row-major 2D tensor"
    rows, cols = x.shape
    assert weight.shape == (cols,) and bias.shape == (cols,), f"weight and bias must have shape ({cols},)"
    assert weight.is_contiguous() and bias.is_contiguous(), "weight and bias must be contiguous"
    y = torch.empty_like(x) if out is None else out
    assert y.shape == x.shape and y.stride(1) == 1, "out must be a row-major tensor shaped like x"
    layernorm_kernel[(rows * chunks,)](
        x, weight, bias, y, rows, cols, x.stride(0), y.stride(0), eps,
        CHUNKS=chunks, BLOCK=BLOCK, NUM_XCDS=num_xcds,
    )
    return y


# --- swizzleperf problem declaration --------------------------------------------------------
REMAP_HOOK = "swizzle"
SIZES = {
    "tiny": {"rows": 5, "cols": 1000, "chunks": 3},    # 15 programs; chunks of 334, 334, 332
    "small": {"rows": 20, "cols": 5000, "chunks": 3},  # 60 programs; a chunk spans two blocks
    # Llama-2-13B hidden size over 4096 tokens, 5 chunks of 1024 columns: 20,480 programs, each
    # 5 x 32 lines of the row (phase 1) + 32 lines each of x, weight, bias and y (phase 2) =
    # 288 line accesses: 5.9 M in all. Under the identity a row's 5 programs run on 5 different
    # XCDs. The simulator (mi300x preset) predicts L2 read hit rates of 30 % for the identity and
    # 86 % for XCD-contiguous (all chunks of a row on one XCD; read ceiling 87 %), which fetches
    # within 0.4 % of the compulsory lines.
    "medium": {"rows": 4096, "cols": 5120, "chunks": 5},
    "large": {"rows": 8192, "cols": 8192, "chunks": 8},
}
DEFAULT_SIZE = "medium"
CHECK_SIZES = ["tiny", "small"]  # cheap enough for the CPU interpreter
# fp32 statistics summed in another order than torch's, then a handful of fp32 operations on
# |y| <= 5: measured at most 1e-6 from torch on the check sizes (both seeds), so 1e-5 leaves a
# 10x margin, while a wrong row statistic or a misplaced chunk is off by O(1).
TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}


def grid(size: dict) -> tuple[int]:
    return (size["rows"] * size["chunks"],)


def make_inputs(size: dict, seed: int, device: str) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    # A non-zero mean, so a variance computed as E[x^2] - E[x]^2 would show its cancellation.
    x = torch.randn(size["rows"], size["cols"], generator=gen) * 2 + 3
    weight = 1 + 0.1 * torch.randn(size["cols"], generator=gen)
    bias = 0.1 * torch.randn(size["cols"], generator=gen)
    return {"x": x.to(device), "weight": weight.to(device), "bias": bias.to(device)}


def make_outputs(size: dict, device: str) -> dict[str, torch.Tensor]:
    return {"y": torch.empty(size["rows"], size["cols"], device=device)}


def launch(inputs: dict, outputs: dict, size: dict, num_xcds: int) -> None:
    layernorm(inputs["x"], inputs["weight"], inputs["bias"], size["chunks"], num_xcds, out=outputs["y"])


def reference(inputs: dict, size: dict) -> dict[str, torch.Tensor]:
    y = torch.nn.functional.layer_norm(inputs["x"].float(), (size["cols"],), inputs["weight"].float(),
                                       inputs["bias"].float(), EPS)
    return {"y": y}


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name in CHECK_SIZES:
        size = SIZES[name]
        inputs, outputs = make_inputs(size, 0, device), make_outputs(size, device)
        launch(inputs, outputs, size, num_xcds=8)
        torch.testing.assert_close(outputs["y"], reference(inputs, size)["y"], **TOLERANCE)
        print(f"layernorm {name} {size}: ok")
