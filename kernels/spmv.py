"""Sparse matrix-vector product y = A x, A in CSR, one row per program.

A is (n, n) with fp32 values; the CSR arrays are `row_ptr` (n + 1 int32 offsets), `col_idx`
(int32) and `values` (fp32), x and y are (n,) fp32. Program `row` reads its two row_ptr entries,
then its nonzeros' column indices and values in BLOCK-wide steps, gathers x at those columns
(reads whose addresses come from loaded data), and writes y[row].

The matrix is banded, as discretised PDEs and many meshes ordered by a bandwidth-reducing
permutation are: row i keeps about K nonzeros scattered over columns [i - W, i + W]. So which
programs share data:
  - neighbouring rows gather x from overlapping windows: a line of x is read by ~2W rows;
  - row_ptr, y, and the col_idx / values lines that straddle two rows' nonzeros are shared by
    consecutive rows (32 rows per line of row_ptr or y).
All of it is shared between programs with nearby ids. With round-robin dispatch consecutive rows
run on different dies, so every die fetches all of x and the straddling lines; a remap that gives
each die a contiguous range of rows fetches each of them about once.

Launch order: one 1D grid of n programs; logical program `l` computes row `l`. The remap hook
`swizzle` decides which logical program each launched program id runs.

Every program loops to the longest row's length (masked past its own): one loop bound for all
programs, fine on a GPU for near-uniform rows, and it keeps the simulator's batched trace capture
on its fast path (per-program bounds would have it interpret programs one at a time).
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
def spmv_csr_kernel(
    # pointers: the CSR matrix, then the vectors
    row_ptr_ptr, col_idx_ptr, values_ptr, x_ptr, y_ptr,
    # shape
    n_rows, max_row_nnz,
    # meta-parameters
    BLOCK: tl.constexpr, NUM_XCDS: tl.constexpr,
):
    row = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)
    # A row outside the matrix (only a wrong remap names one) reads an empty row and stores nothing.
    in_matrix = row < n_rows
    row_start = tl.load(row_ptr_ptr + row, mask=in_matrix, other=0)
    row_end = tl.load(row_ptr_ptr + row + 1, mask=in_matrix, other=0)
    row_nnz = row_end - row_start
    offs = tl.arange(0, BLOCK)

    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, max_row_nnz, BLOCK):
        k = start + offs
        mask = k < row_nnz
        cols = tl.load(col_idx_ptr + row_start + k, mask=mask, other=0)
        vals = tl.load(values_ptr + row_start + k, mask=mask, other=0.0)
        x = tl.load(x_ptr + cols, mask=mask, other=0.0)
        acc += vals * x
    tl.store(y_ptr + row, tl.sum(acc, 0), mask=in_matrix)


# --- host wrapper ---------------------------------------------------------------------------
BLOCK = 32  # 32 int32 column indices = one 128 B line per step


def spmv_csr(row_ptr: torch.Tensor, col_idx: torch.Tensor, values: torch.Tensor, x: torch.Tensor,
             num_xcds: int = 8, out: torch.Tensor | None = None) -> torch.Tensor:
    n = row_ptr.numel() - 1
    assert row_ptr.dtype == col_idx.dtype == torch.int32, "row_ptr and col_idx must be int32"
    assert col_idx.shape == values.shape and values.ndim == 1, "col_idx and values must be 1D, one entry per nonzero"
    assert x.ndim == 1 and all(t.is_contiguous() for t in (row_ptr, col_idx, values, x)), \
        "CSR arrays and x must be contiguous 1D tensors"
    y = torch.empty(n, device=x.device, dtype=torch.float32) if out is None else out
    assert y.shape == (n,) and y.is_contiguous(), f"out must be a contiguous ({n},) tensor"
    # The longest row bounds every program's loop (one host sync per launch).
    max_row_nnz = int((row_ptr[1:] - row_ptr[:-1]).max()) if n else 0
    spmv_csr_kernel[(n,)](
        row_ptr, col_idx, values, x, y, n, max_row_nnz,
        BLOCK=BLOCK, NUM_XCDS=num_xcds,
    )
    return y


def banded_csr(n: int, half_width: int, slots: int, seed: int,
               rows_per_chunk: int = 1 << 16) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A random (n, n) banded matrix in CSR: (row_ptr, col_idx, values), the same for the same seed.

    The band [i - half_width, i + half_width] of row i is cut into `slots` equal windows; each
    window holds one nonzero at a random column, kept with probability 7/8 (so row lengths vary)
    and dropped where it falls outside the matrix. Columns come out sorted within each row. Rows
    are drawn in chunks, so the temporaries stay small at the large sizes.
    """
    assert 1 <= slots <= 2 * half_width + 1, "each slot needs at least one column of the band"
    gen = torch.Generator(device="cpu").manual_seed(seed)
    edges = torch.arange(slots + 1, dtype=torch.float64) * ((2 * half_width + 1) / slots)
    lo, width = edges[:-1].floor(), edges[1:].floor() - edges[:-1].floor()
    lengths, col_chunks = [], []
    for first in range(0, n, rows_per_chunk):
        rows = torch.arange(first, min(first + rows_per_chunk, n), dtype=torch.float64)
        pick = (torch.rand(len(rows), slots, generator=gen, dtype=torch.float64) * width).floor()
        cols = (rows[:, None] - half_width + lo + pick).to(torch.int64)
        keep = (cols >= 0) & (cols < n) & (torch.rand(len(rows), slots, generator=gen) < 7 / 8)
        lengths.append(keep.sum(1))
        col_chunks.append(cols[keep].to(torch.int32))
    row_ptr = torch.zeros(n + 1, dtype=torch.int64)
    row_ptr[1:] = torch.cat(lengths).cumsum(0)
    col_idx = torch.cat(col_chunks)
    values = torch.randn(col_idx.numel(), generator=gen)
    return row_ptr.to(torch.int32), col_idx, values


# --- swizzleperf problem declaration --------------------------------------------------------
REMAP_HOOK = "swizzle"
SIZES = {
    "tiny": {"n": 13, "half_width": 4, "slots": 6},        # 13 programs; the band is cut at both edges
    "small": {"n": 150, "half_width": 40, "slots": 45},    # 150 programs; up to 45 nonzeros: 2 steps
    # n = 262,144 rows with ~42 of 48 slots over a band of 257 columns: 11 M nonzeros (88 MB of
    # col_idx and values, streamed), x is 1 MB. Per row 2 row_ptr loads, 2 steps of col_idx, values
    # and x gathers (1-2 + 1-2 + ~6 lines, then ~1 + 1 + ~3), one y store: about 19 line accesses,
    # 5.0 M in all. The simulator (mi300x preset) predicts 1.33 M L2 read misses for the identity
    # (every XCD fetches all of x and row_ptr, and both halves of each straddling line; read hit
    # rate 59 %) and 0.70 M for XCD-contiguous, the compulsory count (read hit rate 59 %: each CU's
    # L1 then catches the x lines its neighbouring rows share, so the L2 sees half the reads).
    "medium": {"n": 262_144, "half_width": 128, "slots": 48},
    "large": {"n": 4_194_304, "half_width": 256, "slots": 64},
}
DEFAULT_SIZE = "medium"
CHECK_SIZES = ["tiny", "small"]  # cheap enough for the CPU interpreter
# Up to 45 fp32 products summed in BLOCK lanes then a tree, against a float64 reference:
# measured at most 1.3e-6 off on the check sizes, seeds 0-2 (|y| up to ~19), so 1e-5 + 1e-5 |y|
# leaves a ~10x margin for other summation orders; a missing or misplaced row is off by O(1).
TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}


def grid(size: dict) -> tuple[int]:
    return (size["n"],)


def make_inputs(size: dict, seed: int, device: str) -> dict[str, torch.Tensor]:
    row_ptr, col_idx, values = banded_csr(size["n"], size["half_width"], size["slots"], seed)
    gen = torch.Generator(device="cpu").manual_seed(seed + 1_000_003)
    x = torch.randn(size["n"], generator=gen)
    inputs = {"row_ptr": row_ptr, "col_idx": col_idx, "values": values, "x": x}
    return {name: t.to(device) for name, t in inputs.items()}


def make_outputs(size: dict, device: str) -> dict[str, torch.Tensor]:
    return {"y": torch.empty(size["n"], device=device)}


def launch(inputs: dict, outputs: dict, size: dict, num_xcds: int) -> None:
    spmv_csr(inputs["row_ptr"], inputs["col_idx"], inputs["values"], inputs["x"], num_xcds, out=outputs["y"])


def reference(inputs: dict, size: dict) -> dict[str, torch.Tensor]:
    """y in float64 on the CPU: each nonzero's product added to its row."""
    row_ptr = inputs["row_ptr"].cpu().long()
    rows = torch.repeat_interleave(torch.arange(size["n"]), row_ptr[1:] - row_ptr[:-1])
    products = inputs["values"].cpu().double() * inputs["x"].cpu().double()[inputs["col_idx"].cpu().long()]
    y = torch.zeros(size["n"], dtype=torch.float64).index_add_(0, rows, products)
    return {"y": y.to(inputs["x"].device)}


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name in CHECK_SIZES:
        size = SIZES[name]
        inputs, outputs = make_inputs(size, 0, device), make_outputs(size, device)
        launch(inputs, outputs, size, num_xcds=8)
        torch.testing.assert_close(outputs["y"], reference(inputs, size)["y"].float(), **TOLERANCE)
        print(f"spmv {name} {size}: ok")
