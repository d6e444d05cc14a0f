"""The FA2 forward kernel file and the attention (3D) remap families.

The kernel: its hook is the identity on block-first launch order, it matches the fp32
reference with its own hook and with the swizzled head-first family (GQA causal at "tiny", MHA
non-causal at "small"), a non-bijective remap leaves exactly the never-computed rows NaN, it
lowers through Triton's compiler front end (the GPU path the interpreter does not exercise), and
its captured trace has the sharing structure the families rely on. The families: bijective on
every grid of `bijectivity_grids`, and the head-first ones put each attention compute cluster
(one head in MHA, one KV group in GQA) on one die under round-robin dispatch.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import triton

from swizzleperf.hardware.dispatch import slot_domains
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.remaps.check import static_check
from swizzleperf.remaps.evaluate.evaluator import evaluate
from swizzleperf.remaps.families import FamilyInstance
from swizzleperf.remaps.space import candidate_space
from swizzleperf.sim.capture.trace_capture import cached_trace_path, capture_trace
from swizzleperf.sim.trace.record import TraceMeta
from swizzleperf.validation.bijectivity import (
    bijectivity_grids,
    check_bijective,
    find_bijectivity_failure,
    logical_ids,
)
from swizzleperf.validation.correctness import check_correctness

ROOT = Path(__file__).resolve().parents[2]
MI300X = PRESETS["mi300x"]
N = MI300X.num_domains
CONSTS = {"NUM_XCDS": N}


@pytest.fixture(scope="module")
def kernel():
    return load_kernel(ROOT / "kernels" / "attention.py")


def family(kernel, name: str, **params: int) -> str:
    return FamilyInstance(name, tuple(params.items())).render(kernel.hook)


def block_first(grid, pid):
    """The launch order the kernel's own hook implements, written out: heads fastest, then batch."""
    _, batch, heads = grid
    return pid // (batch * heads), (pid // heads) % batch, pid % heads


# --- the kernel file -------------------------------------------------------------------------

def test_hook_is_the_identity_on_block_first_launch_order(kernel):
    assert kernel.hook.grid_params == ("num_q_blocks", "batch_size", "num_heads")
    assert kernel.hook.constexprs == ("NUM_XCDS",)
    for grid in [(3, 1, 4), (2, 2, 4), (5, 3, 7)]:
        pids = np.arange(math.prod(grid))
        for source in (kernel.hook_source, family(kernel, "identity")):
            coords = evaluate(source, kernel.hook, grid, CONSTS)
            assert [tuple(c) for c in coords.tolist()] == [block_first(grid, int(p)) for p in pids]
            assert np.array_equal(np.ravel_multi_index(tuple(coords.T), grid), pids)  # logical id == launch id


def test_sizes_are_consistent_and_cover_mha_gqa_causal_and_not(kernel):
    for name, size in kernel.sizes.items():
        assert size["heads"] % size["kv_heads"] == 0, name
        assert kernel.grid(name) == (triton.cdiv(size["seq"], kernel.module.BLOCK_M), size["batch"], size["heads"])
    checked = [kernel.size(name) for name in kernel.check_sizes]
    assert {(s["heads"] == s["kv_heads"], bool(s["causal"])) for s in checked} == {(False, True), (True, False)}
    assert all(s["seq"] % kernel.module.BLOCK_N for s in checked), "check sizes must exercise a partial key block"
    medium = kernel.size("medium")
    kv_bytes = 2 * medium["batch"] * medium["kv_heads"] * medium["seq"] * medium["head_dim"] * 2
    assert kv_bytes > MI300X.l2_bytes_per_domain, "the default size must not fit one XCD's L2"


def test_passes_with_its_own_hook_and_the_swizzled_head_first_family(kernel):
    for source in (kernel.hook_source, family(kernel, "swizzled_head_first", group=2)):
        report = check_correctness(kernel, source, seeds=(0,), device="cpu")
        assert report.ok, report.failure
        assert [c.size for c in report.cases] == ["tiny", "small"]
        for case in report.cases:
            (out,) = case.outputs
            assert out.mismatches == 0 and out.nans == 0 and out.max_abs_error < 1e-3


# The XCD-contiguous remap without its tail fix: a bijection only when N divides the grid.
NAIVE_XCD = """\
@triton.jit
def swizzle(pid, num_q_blocks, batch_size, num_heads, NUM_XCDS: tl.constexpr):
    per_q_block = batch_size * num_heads
    count = num_q_blocks * per_q_block
    lid = (pid % NUM_XCDS) * (count // NUM_XCDS) + pid // NUM_XCDS
    return lid // per_q_block, (lid // num_heads) % batch_size, lid % num_heads
"""


def test_a_non_bijective_remap_leaves_exactly_the_missing_rows_nan(kernel):
    grid, size = kernel.grid("tiny"), kernel.size("tiny")
    count = math.prod(grid)
    assert count % N, "tiny must give the naive remap something to break"
    produced = {block_first(grid, (p % N) * (count // N) + p // N) for p in range(count)}
    block_m = kernel.module.BLOCK_M
    missing_rows = sum(min(block_m, size["seq"] - q * block_m)
                       for q, b, h in (block_first(grid, p) for p in range(count)) if (q, b, h) not in produced)
    nans = missing_rows * size["head_dim"]
    assert nans > 0

    report = check_correctness(kernel, NAIVE_XCD, sizes=["tiny"], seeds=(0,), device="cpu")
    (case,) = report.cases
    (out,) = case.outputs
    assert not report.ok and out.nans == out.mismatches == nans
    assert f"has {nans} NaN elements" in report.failure


_FRONT_END = r'''
import json, sys
from pathlib import Path
from triton._C.libtriton import ir
from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from triton.compiler.compiler import ASTSource
from swizzleperf.kernel.contract import load_kernel

results = {}
for job in json.load(sys.stdin):
    fn = load_kernel(job["path"]).module.attention_fwd_kernel
    constexprs = {"HEAD_DIM": 128, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": job["causal"], "NUM_XCDS": 8}
    signature = {name: "*bf16" if name.endswith("_ptr") else "fp32" if name == "qk_scale" else "i32"
                 for name in fn.arg_names if name not in constexprs}
    signature.update({name: "constexpr" for name in constexprs})
    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    options = backend.parse_options({"num_warps": 8})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    source = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    try:
        source.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(),
                       context)
        results[job["id"]] = "ok"
    except Exception as exc:
        while exc.__cause__ is not None:
            exc = exc.__cause__
        results[job["id"]] = f"{type(exc).__name__}: {exc}"
json.dump(results, sys.stdout)
'''


def test_lowers_through_the_compiler_front_end_with_every_attention_family(kernel, tmp_path):
    """The interpreter runs Python; compiled Triton types every branch. No GPU needed for this."""
    sources = {"own": kernel.hook_source, "head_first": family(kernel, "head_first"),
               "swizzled_head_first": family(kernel, "swizzled_head_first", group=4),
               "swizzled_block_first": family(kernel, "swizzled_block_first", group=4)}
    jobs = []
    for tag, source in sources.items():
        path = tmp_path / f"attention_{tag}.py"
        path.write_text(kernel.with_hook(source))
        jobs += [{"id": f"{tag}/causal={c}", "path": str(path), "causal": c} for c in (False, True)]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", _FRONT_END], input=json.dumps(jobs), capture_output=True,
                          text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    assert results == {job["id"]: "ok" for job in jobs}


def test_captures_in_fast_mode_with_one_kv_stream_per_head(kernel, tmp_path):
    """At "small" (MHA, non-causal): the programs of one head read the same K/V lines, programs of
    different heads share no line at all, and the line count is what the kernel's tiles imply."""
    trace = capture_trace(kernel, "small", cache_dir=tmp_path)
    meta = TraceMeta.read(cached_trace_path(kernel, "small", cache_dir=tmp_path))
    assert meta.mode == "fast" and meta.fallback_reason is None

    size, grid = kernel.size("small"), kernel.grid("small")
    block_m, block_n = kernel.module.BLOCK_M, kernel.module.BLOCK_N
    rows_per_line = 128 // (size["head_dim"] * 2)  # fp16 rows of one 128-byte line
    key_steps = triton.cdiv(size["seq"], block_n)
    kv_lines = 2 * size["seq"] // rows_per_line
    assert trace.num_programs == math.prod(grid)
    expected_accesses = 0
    kv_of_unit, all_lines_of_unit = {}, {}
    for p in range(trace.num_programs):
        q_block, b, h = block_first(grid, p)
        program = trace.program(p)
        assert program.num_events == 1 + 2 * key_steps + 1  # Q, then K and V per step, then the O store
        q_rows = min(block_m, size["seq"] - q_block * block_m)
        expected_accesses += 2 * triton.cdiv(q_rows, rows_per_line) + kv_lines
        kv = set(program.lines[program.event_offsets[1]:program.event_offsets[-2]].tolist())
        assert len(kv) == kv_lines
        assert kv_of_unit.setdefault((b, h), kv) == kv
        all_lines_of_unit.setdefault((b, h), set()).update(program.lines.tolist())
    assert trace.num_accesses == expected_accesses
    units = list(all_lines_of_unit.values())
    assert all(not (units[i] & units[j]) for i in range(len(units)) for j in range(i + 1, len(units)))


# --- the families ----------------------------------------------------------------------------

def test_candidate_space_offers_the_attention_families_for_3d_hooks(kernel):
    space = candidate_space(kernel.hook, MI300X)
    assert {name: [i.label for i in instances] for name, instances in space.items()} == {
        "head_first": ["head_first"],
        "swizzled_head_first": [f"swizzled_head_first(group={g})" for g in (1, 2, 4, 8)],
        "swizzled_block_first": [f"swizzled_block_first(group={g})" for g in (2, 4, 8)],
    }
    one_l2 = candidate_space(kernel.hook, PRESETS["h100"])  # a "die" count becomes a stride there
    assert [i.label for i in one_l2["swizzled_head_first"]][:2] == [
        "swizzled_head_first(group=1, dies=2)", "swizzled_head_first(group=1, dies=4)"]


def test_every_attention_family_is_bijective_on_the_bijectivity_grids(kernel):
    grids = bijectivity_grids(kernel.hook, [kernel.grid(name) for name in kernel.sizes], N)
    assert (1, 1, 1) in grids and (7, 11, 13) in grids and (128, 1, 128) in grids
    defaults = [FamilyInstance("identity"), *(instances[0] for instances in candidate_space(kernel.hook, MI300X).values())]
    for inst in defaults:  # through the checker the loop uses (a child process per candidate)
        report = check_bijective(inst.render(kernel.hook), kernel.hook, grids, CONSTS)
        assert report.ok and report.grids == grids, (inst.label, report.message)
    # every other parameter, and the virtual die counts of a one-L2 GPU, evaluated here (our own code)
    others = [i for hw in ("mi300x", "h100") for instances in candidate_space(kernel.hook, PRESETS[hw]).values()
              for i in instances if i not in defaults]
    assert len(others) == 5 + 7 * 4  # mi300x: 3 + 2 more groups; h100: 7 groups x 4 virtual die counts
    for inst in others:
        source = inst.render(kernel.hook)
        static_check(source, kernel.hook)
        for grid in grids:
            failure = find_bijectivity_failure(evaluate(source, kernel.hook, grid, CONSTS), grid)
            assert failure is None, (inst.label, failure.message)


def dies_of_clusters(kernel, source: str, grid, group: int) -> dict[tuple[int, int], set[int]]:
    """(batch, cluster) -> the dies that run its programs, under MI300X round-robin dispatch."""
    logical = logical_ids(source, kernel.hook, grid, CONSTS)  # launch slot -> C-order logical index
    die_of_slot = slot_domains(logical.size, MI300X)
    out: dict[tuple[int, int], set[int]] = {}
    for slot, lid in enumerate(logical.tolist()):
        _, b, h = block_first(grid, lid)
        out.setdefault((b, h // group), set()).add(int(die_of_slot[slot]))
    return out


def test_head_first_families_pin_each_gqa_group_to_one_die(kernel):
    grid, group = kernel.grid("medium"), 4  # 32 Q blocks x 32 heads in 8 KV groups of 4
    for name in ("swizzled_head_first", "swizzled_block_first"):
        dies = dies_of_clusters(kernel, family(kernel, name, group=group), grid, group)
        assert sorted(d for ds in dies.values() for d in ds) == list(range(N)), name  # one group per die
    # what the others do with the same groups: block-first puts heads h on die h % 8 (4 dies per
    # group); naive head-first stripes every head over all dies; group 1 pins heads, not groups
    assert {len(d) for d in dies_of_clusters(kernel, kernel.hook_source, grid, group).values()} == {4}
    assert {len(d) for d in dies_of_clusters(kernel, family(kernel, "head_first"), grid, group).values()} == {N}
    pinned_heads = dies_of_clusters(kernel, family(kernel, "swizzled_head_first", group=1), grid, group)
    assert {len(d) for d in pinned_heads.values()} == {4}


def test_swizzled_head_first_pins_mha_heads_and_spreads_only_the_tail(kernel):
    """Whole rounds of 8 clusters are pinned, one per die; the clusters left over are split
    XCD-contiguously (each die runs one contiguous piece of them)."""
    source = family(kernel, "swizzled_head_first", group=1)
    dies = dies_of_clusters(kernel, source, (3, 2, 8), 1)  # 16 (batch, head) clusters: two full rounds
    assert all(len(d) == 1 for d in dies.values()) and len(dies) == 16
    assert [sum(d in ds for ds in dies.values()) for d in range(N)] == [2] * N  # ceil(16 / 8) heads per die

    dies = dies_of_clusters(kernel, source, (5, 1, 12), 1)  # one round of 8 heads, then a tail of 4
    assert all(dies[(0, h)] == {h} for h in range(8))
    # the tail's 20 programs: dies 0-3 run 3 consecutive ones, dies 4-7 run 2; heads are 5 long
    assert [dies[(0, h)] for h in range(8, 12)] == [{0, 1}, {1, 2, 3}, {3, 4, 5}, {5, 6, 7}]
