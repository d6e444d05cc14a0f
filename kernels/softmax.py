"""Row softmax with several programs per row.

Each row of `x` is split into CHUNKS column chunks and every chunk gets its own program.
A program first reduces over the *whole* row (phase 1: running max and sum of exponentials,
block by block), then normalises and writes only its own chunk (phase 2). So the CHUNKS
programs of one row all read the same row: on a GPU whose L2 is split over dies, they share
data only if they run on the same die. With round-robin dispatch, consecutive program ids
land on different dies, so the identity remap fetches each row once per die it touches.

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
def softmax_kernel(
    # pointers
    x_ptr, y_ptr,
    # shape and strides
    n_rows, n_cols, stride_x_row, stride_y_row,
    # meta-parameters
    CHUNKS: tl.constexpr, BLOCK: tl.constexpr, NUM_XCDS: tl.constexpr,
):
    pid = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    row = pid // CHUNKS
    chunk = pid % CHUNKS
    # A remap that names a row past the end must not touch memory: it then loads and stores nothing.
    row_cols = tl.where(row < n_rows, n_cols, 0)
    offs = tl.arange(0, BLOCK)
    x_row_ptr = x_ptr + row.to(tl.int64) * stride_x_row

    # Phase 1: online max and sum of exp over the whole row.
    run_max = tl.full((BLOCK,), float("-inf"), tl.float32)
    run_sum = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(x_row_ptr + cols, mask=cols < row_cols, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(run_max, x)
        # lanes that have seen only -inf keep a zero sum (avoid inf - inf = nan)
        scale = tl.where(new_max == float("-inf"), 0.0, tl.exp(run_max - new_max))
        run_sum = run_sum * scale + tl.where(new_max == float("-inf"), 0.0, tl.exp(x - new_max))
        run_max = new_max
    row_max = tl.max(run_max, 0)
    row_sum = tl.sum(run_sum * tl.exp(run_max - row_max), 0)

    # Phase 2: normalise and write this program's chunk only.
    chunk_cols = tl.cdiv(n_cols, CHUNKS)
    for start in range(0, chunk_cols, BLOCK):
        cols = chunk * chunk_cols + start + offs
        mask = (cols < row_cols) & (start + offs < chunk_cols)
        x = tl.load(x_row_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = tl.exp(x - row_max) / row_sum
        tl.store(y_ptr + row.to(tl.int64) * stride_y_row + cols, y, mask=mask)


# --- host wrapper ---------------------------------------------------------------------------
BLOCK = 1024


def softmax(x: torch.Tensor, chunks: int, num_xcds: int = 8, out: torch.Tensor | None = None) -> torch.Tensor:
    assert x.ndim == 2 and x.stride(1) == 1, "x must be a row-major 2D tensor"
    rows, cols = x.shape
    y = torch.empty_like(x) if out is None else out
    softmax_kernel[(rows * chunks,)](
        x, y, rows, cols, x.stride(0), y.stride(0),
        CHUNKS=chunks, BLOCK=BLOCK, NUM_XCDS=num_xcds,
    )
    return y


# --- swizzleperf problem declaration --------------------------------------------------------
REMAP_HOOK = "swizzle"
SIZES = {
    "tiny": {"rows": 5, "cols": 1500, "chunks": 3},
    "small": {"rows": 64, "cols": 4096, "chunks": 4},
    "medium": {"rows": 4096, "cols": 8192, "chunks": 4},
    "large": {"rows": 8192, "cols": 16384, "chunks": 8},
}
DEFAULT_SIZE = "medium"
CHECK_SIZES = ["tiny", "small"]  # cheap enough for the CPU interpreter
# float32 exp/sum in a different order than torch: relative error stays near 1e-6.
TOLERANCE = {"atol": 1e-6, "rtol": 1e-5}


def grid(size: dict) -> tuple[int]:
    return (size["rows"] * size["chunks"],)


def make_inputs(size: dict, seed: int, device: str) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(size["rows"], size["cols"], generator=gen) * 4
    return {"x": x.to(device)}


def make_outputs(size: dict, device: str) -> dict[str, torch.Tensor]:
    return {"y": torch.empty(size["rows"], size["cols"], device=device)}


def launch(inputs: dict, outputs: dict, size: dict, num_xcds: int) -> None:
    softmax(inputs["x"], size["chunks"], num_xcds, out=outputs["y"])


def reference(inputs: dict, size: dict) -> dict[str, torch.Tensor]:
    return {"y": torch.softmax(inputs["x"].float(), dim=-1)}


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name in CHECK_SIZES:
        size = SIZES[name]
        inputs, outputs = make_inputs(size, 0, device), make_outputs(size, device)
        launch(inputs, outputs, size, num_xcds=8)
        torch.testing.assert_close(outputs["y"], reference(inputs, size)["y"], **TOLERANCE)
        print(f"softmax {name} {size}: ok")
