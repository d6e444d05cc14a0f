"""kernels/smithwaterman.py: the contract, correctness under three remaps, its trace, its reference.

The kernel is checked through the public entry points (`check_correctness`, `capture_trace`),
each of which runs the Triton interpreter in its own child process. The reference is checked
against a plain O(n*m) loop DP, on hand-worked cases and random ones, and so is the claim that the
windows' overlap loses no alignment. The trace is compared line for line with what the kernel's
loads and stores must touch.
"""

import math
import warnings

import numpy as np
import pytest
from reference_remaps import NAIVE_REMAP, NUM_XCDS, XCD_ROW_MAJOR_2D
from test_suite_kernels import MAX_CHECK_PROGRAMS, ROOT, naive_logical

from swizzleperf.kernel.contract import load_kernel
from swizzleperf.sim.capture.trace_capture import cached_trace_path, capture_trace
from swizzleperf.sim.trace.record import TraceMeta
from swizzleperf.validation.correctness import check_correctness

KERNEL_PATH = ROOT / "kernels" / "smithwaterman.py"
CODES = {c: i for i, c in enumerate("ACGT")}


@pytest.fixture(scope="module")
def kernel():
    return load_kernel(KERNEL_PATH)


@pytest.fixture(scope="module")
def sw(kernel):
    return kernel.module


def encode(text: str) -> np.ndarray:
    return np.array([CODES[c] for c in text], np.int8)


def loop_dp(query: np.ndarray, ref: np.ndarray, match: int, mismatch: int, gap: int) -> int:
    """The textbook Smith-Waterman recurrence, cell by cell: the best local score."""
    h = [[0] * (len(ref) + 1) for _ in range(len(query) + 1)]
    best = 0
    for i in range(1, len(query) + 1):
        for j in range(1, len(ref) + 1):
            s = match if query[i - 1] == ref[j - 1] else mismatch
            h[i][j] = max(0, h[i - 1][j - 1] + s, h[i - 1][j] - gap, h[i][j - 1] - gap)
            best = max(best, h[i][j])
    return best


def loop_window_scores(sw, queries: np.ndarray, ref: np.ndarray, chunk_stride: int) -> np.ndarray:
    query_len = queries.shape[1]
    chunk_len = chunk_stride + sw.window_overlap(query_len)
    chunks = sw.num_chunks(len(ref), query_len, chunk_stride)
    return np.array([[loop_dp(q, ref[r * chunk_stride:r * chunk_stride + chunk_len], sw.MATCH, sw.MISMATCH, sw.GAP)
                      for r in range(chunks)] for q in queries])


# --- the contract --------------------------------------------------------------------------------

def test_loads_with_a_2d_hook_and_exact_tolerance(kernel):
    assert kernel.hook.ndim == 2 and kernel.hook.constexprs == ("NUM_XCDS",)
    assert list(kernel.sizes) == ["tiny", "small", "medium", "large"] and kernel.default_size == "medium"
    assert kernel.check_sizes == ("tiny", "small") and kernel.tolerance == {"atol": 0.0, "rtol": 0.0}
    for size in kernel.check_sizes:
        assert math.prod(kernel.grid(size)) < MAX_CHECK_PROGRAMS, f"{size} is too slow for the interpreter"
    assert math.prod(kernel.grid("tiny")) % NUM_XCDS, "tiny must give the naive remap something to break"
    assert kernel.grid("medium") == (64, 125)
    assert "import swizzleperf" not in kernel.source and "from swizzleperf" not in kernel.source


def test_inputs_are_seeded_int8_codes_and_reads_come_from_the_reference(sw):
    size = sw.SIZES["small"]
    a, b, c = (sw.make_inputs(size, seed, "cpu") for seed in (0, 0, 1))
    assert all(np.array_equal(a[k], b[k]) for k in a) and not np.array_equal(a["queries"], c["queries"])
    queries, ref = a["queries"].numpy(), a["reference"].numpy()
    assert queries.shape == (size["queries"], size["query_len"]) and ref.shape == (size["ref_len"],)
    assert queries.dtype == ref.dtype == np.int8 and queries.min() >= 0 and max(queries.max(), ref.max()) < 4
    # A read is its origin with a few edits: it scores far above a random sequence's background.
    full = [loop_dp(q, ref, sw.MATCH, sw.MISMATCH, sw.GAP) for q in queries]
    assert min(full) >= sw.MATCH * size["query_len"] // 2


# --- the reference ---------------------------------------------------------------------------------

def test_reference_matches_hand_worked_alignments(sw):
    score = lambda q, r: int(sw.window_scores(encode(q)[None], encode(r), chunk_stride=len(r))[0, 0])  # noqa: E731
    assert (sw.MATCH, sw.MISMATCH, sw.GAP) == (3, -3, 2)
    # Wikipedia's worked example with this scoring: GTT-AC over GTTGAC, 5 matches and one gap: 15 - 2.
    assert score("TGTTACGG", "GGTTGACTA") == 13
    # ACGT-ACGT over ACGTTACGT: 8 matches and one gap (22) beat any ungapped run (TACGT: 15).
    assert score("ACGTACGT", "ACGTTACGT") == 22
    assert score("ACGT", "TTACGTTT") == 12          # an exact occurrence: 4 matches
    assert score("AAAA", "CCCCCC") == 0             # nothing in common: the empty alignment
    assert score("AAAA", "ACACACA") == 6            # 4 matches across 3 skipped Cs: 12 - 6 beats one A
    assert loop_dp(encode("TGTTACGG"), encode("GGTTGACTA"), 3, -3, 2) == 13


@pytest.mark.parametrize("seed", range(4))
def test_reference_matches_the_loop_dp_on_random_windows(sw, seed):
    rng = np.random.default_rng(seed)
    query_len, chunk_stride = int(rng.integers(3, 9)), int(rng.integers(4, 13))
    ref = rng.integers(0, 4, int(rng.integers(20, 60)), dtype=np.int8)
    queries = np.stack([rng.integers(0, 4, query_len, dtype=np.int8),
                        *(sw.sample_read(ref, query_len, rng) for _ in range(3))])
    got = sw.window_scores(queries, ref, chunk_stride)
    np.testing.assert_array_equal(got, loop_window_scores(sw, queries, ref, chunk_stride))


@pytest.mark.parametrize("seed", range(3))
def test_windows_lose_no_alignment(sw, seed):
    """The best window score of a query is its best score against the whole reference."""
    rng = np.random.default_rng(100 + seed)
    query_len, chunk_stride = 6, 5
    ref = rng.integers(1, 4, 70, dtype=np.int8)  # no A but the planted ones
    # 6 As matched across 5 skipped Cs (18 - 10 = 8): a reference span of 11, placed across window
    # borders. An overlap of only query_len - 1 (windows of 10) would cut it and lose the score.
    ref[17:28] = encode("ACACACACACA")
    queries = np.stack([encode("AAAAAA"), *(sw.sample_read(ref, query_len, rng) for _ in range(4))])
    windows = sw.window_scores(queries, ref, chunk_stride)
    full = [loop_dp(q, ref, sw.MATCH, sw.MISMATCH, sw.GAP) for q in queries]
    np.testing.assert_array_equal(windows.max(axis=1), full)
    assert full[0] == 8 and windows.shape[1] == sw.num_chunks(70, query_len, chunk_stride) == 12
    ungapped_overlap = [loop_dp(queries[0], ref[s:s + chunk_stride + query_len - 1], 3, -3, 2) for s in range(0, 70, 5)]
    assert max(ungapped_overlap) < 8


# --- correctness with three remaps -----------------------------------------------------------

@pytest.mark.parametrize("remap", ["own", "good"])
def test_matches_the_reference_with_its_own_hook_and_an_xcd_remap(kernel, remap):
    source = kernel.hook_source if remap == "own" else XCD_ROW_MAJOR_2D
    report = check_correctness(kernel, source, seeds=(0,), num_xcds=NUM_XCDS, device="cpu")
    assert report.ok, report.failure
    assert [(c.size, c.seed) for c in report.cases] == [("tiny", 0), ("small", 0)]
    for case in report.cases:
        (out,) = case.outputs
        assert (out.name, out.mismatches, out.nans, out.max_abs_error) == ("scores", 0, 0, 0.0)
        assert not case.modified_inputs


def test_naive_remap_leaves_exactly_the_scores_of_programs_that_never_ran_nan(kernel):
    num_q, num_r = kernel.grid("tiny")
    ran = np.unique(naive_logical(num_q * num_r))
    never_ran = sorted(set(range(num_q * num_r)) - set(ran.tolist()))
    assert never_ran == list(range(8, 15))  # 15 programs: xcd * (15 // 8) + local names ids 0..7 only

    report = check_correctness(kernel, NAIVE_REMAP[2], sizes=["tiny"], seeds=(0,), num_xcds=NUM_XCDS, device="cpu")
    assert not report.ok
    (case,) = report.cases
    (out,) = case.outputs
    assert (out.nans, out.mismatches) == (len(never_ran), len(never_ran))
    assert out.first_mismatch == [never_ran[0] // num_r, never_ran[0] % num_r]
    assert report.failure.startswith(f"size tiny seed 0: output scores has {len(never_ran)} NaN elements of 15")


# --- the simulator's trace ---------------------------------------------------------------------------

def expected_program_lines(sw, size: dict, q: int, r: int, bases: dict[str, int]) -> list[list[int]]:
    """The lines of each event of program (q, r): its query, one gather per diagonal, its score."""
    query_len, stride = size["query_len"], size["chunk_stride"]
    chunks = sw.num_chunks(size["ref_len"], query_len, stride)
    window_len = min(stride + sw.window_overlap(query_len), size["ref_len"] - r * stride)
    lines = lambda base, offsets: sorted({base + int(o) // 128 for o in offsets})  # noqa: E731
    events = [lines(bases["queries"], q * query_len + np.arange(query_len))]
    i = np.arange(query_len)
    for t in range(query_len + window_len - 1):
        j = t - i[(t - i >= 0) & (t - i < window_len)]
        events.append(lines(bases["reference"], r * stride + j))
    events.append(lines(bases["scores"], [4 * (q * chunks + r)]))
    return events


def test_captures_in_fast_mode_as_one_batch_with_one_gather_per_diagonal(kernel, sw, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        trace = capture_trace(kernel, "small", cache_dir=tmp_path)
    meta = TraceMeta.read(cached_trace_path(kernel, "small", cache_dir=tmp_path))
    assert (meta.mode, meta.fallback_reason) == ("fast", None)
    assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
    num_q, num_r = kernel.grid("small")
    assert meta.batches == 2 and meta.num_programs == trace.num_programs == num_q * num_r

    size = kernel.size("small")
    first = trace.program(0)  # program (0, 0): its query load, then its first gather at reference[0]
    bases = {"queries": int(first.event(0)[0][0]), "reference": int(first.event(1)[0][0])}
    bases["scores"] = int(first.event(first.num_events - 1)[0][0])
    assert len({bases["queries"], bases["reference"], bases["scores"]}) == 3
    for p in range(trace.num_programs):
        q, r = divmod(p, num_r)  # the identity hook is row-major
        program = trace.program(p)
        got = [program.event(e)[0].tolist() for e in range(program.num_events)]
        assert got == expected_program_lines(sw, size, q, r, bases), f"program ({q}, {r})"
        assert [program.event(e)[1] for e in range(program.num_events)] == [False] * (len(got) - 1) + [True]
