"""Candidates that rewrite the loop-order hook beside the remap (issue 16): one text, taken apart for the
checks, put together in the kernel, proposed by the search and the LLM, simulated from its own capture."""

from pathlib import Path

import pytest

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.hardware.spec import Dispatch, HardwareSpec
from swizzleperf.kernel import candidate
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.profilers.sim import SimProfiler
from swizzleperf.proposers.llm.extract import extract_hook
from swizzleperf.proposers.search import render
from swizzleperf.records.proposal import Proposal
from swizzleperf.remaps.families import FamilyInstance
from swizzleperf.remaps.loop_orders import sawtooth
from swizzleperf.remaps.space import candidate_space

ROOT = Path(__file__).resolve().parents[2]
KERNEL = load_kernel(ROOT / "kernels" / "attention_persistent.py")
SAWTOOTH = sawtooth(KERNEL.loop_order)
HEAD_FIRST = FamilyInstance("head_first").render(KERNEL.hook)
ORDER = "@triton.jit\ndef kv_order(step, n_steps, local_tile, NUM_XCDS: tl.constexpr):\n    {}\n"


def test_a_candidate_is_taken_apart_and_put_together_again():
    text = candidate.join(HEAD_FIRST, SAWTOOTH)
    parts = candidate.split(text, "kv_order")
    assert (parts.remap, parts.loop_order) == (HEAD_FIRST, SAWTOOTH)
    assert candidate.split(text, None) == candidate.Schedule(text)  # a kernel without the hook: all of it is remap
    assert candidate.split(HEAD_FIRST, "kv_order") == candidate.Schedule(HEAD_FIRST)
    assert candidate.split("def (", "kv_order") == candidate.Schedule("def (")  # the remap's check says why


def test_the_kernel_gets_both_hooks_of_a_candidate_and_keeps_its_own_loop_order_otherwise():
    both = KERNEL.with_hook(candidate.join(HEAD_FIRST, SAWTOOTH))
    assert HEAD_FIRST in both and SAWTOOTH in both
    assert KERNEL.hook_source not in both and KERNEL.loop_order_source not in both
    remap_only = KERNEL.with_hook(HEAD_FIRST)
    assert HEAD_FIRST in remap_only and KERNEL.loop_order_source in remap_only
    # everything else is the kernel's own, line for line
    rest = KERNEL.source.replace(KERNEL.hook_source, "").replace(KERNEL.loop_order_source, "")
    assert both.replace(HEAD_FIRST, "").replace(SAWTOOTH, "") == rest
    assert KERNEL.remap_of(candidate.join(HEAD_FIRST, SAWTOOTH)) == HEAD_FIRST


def _stages(source: str) -> list[tuple[str, bool, str]]:
    evaluator = CandidateEvaluator(KERNEL, PRESETS["h100"], profiler=None, size="tiny", correctness_sizes=["tiny"])
    attempt = evaluator.evaluate(Proposal(source=source, family="test", origin="search"), iteration=1)
    return [(s.stage, s.ok, s.detail) for s in attempt.stages]


def test_a_loop_order_that_folds_a_block_twice_is_rejected_at_bijectivity_with_the_local_tile():
    stages = _stages(candidate.join(HEAD_FIRST, ORDER.format("return tl.where(local_tile % 2 == 1, step // 2, step)")))
    stage, ok, detail = stages[-1]
    assert (stage, ok) == ("bijectivity", False)
    assert detail.startswith("remap: bijective on all ")
    assert detail.endswith("; loop order: with local_tile = 1: grid (2,): steps 0 and 1 both map to 0; logical 1 is "
                           "never produced (1 of 2 logical ids missing)")


def test_a_loop_order_outside_the_subset_is_rejected_statically():
    stages = _stages(candidate.join(HEAD_FIRST, ORDER.format("return tl.load(step)")))
    assert stages[-1][:2] == ("static", False) and "tl.load" in stages[-1][2]


def test_head_first_with_the_sawtooth_passes_every_stage_on_the_interpreter_causal_size():
    stages = _stages(candidate.join(HEAD_FIRST, SAWTOOTH))
    assert [(s, ok) for s, ok, _ in stages] == [("propose", True), ("static", True), ("bijectivity", True),
                                                ("correctness", True)]
    assert stages[1][2] == "both hooks parse, right signatures, only allowed constructs"
    assert "loop order: a permutation of the steps for every local tile and every trip count" in stages[2][2]


def test_the_search_pairs_every_remap_family_with_the_sawtooth_for_a_kernel_with_a_loop_order_hook():
    hw = PRESETS["mi300x"]
    space = candidate_space(KERNEL.hook, hw, KERNEL.loop_order)
    assert list(space) == ["head_first", "swizzled_head_first", "swizzled_block_first", "identity + sawtooth",
                           "head_first + sawtooth", "swizzled_head_first + sawtooth",
                           "swizzled_block_first + sawtooth"]
    assert space["head_first + sawtooth"][0].label == "head_first + sawtooth"
    assert render(space["head_first + sawtooth"][0], KERNEL) == candidate.join(HEAD_FIRST, SAWTOOTH)
    attention = load_kernel(ROOT / "kernels" / "attention.py")  # no loop-order hook: remaps only
    assert list(candidate_space(attention.hook, hw, attention.loop_order)) == list(space)[:3]


def test_the_llm_answer_keeps_the_loop_order_function_only_for_a_kernel_that_has_the_hook():
    answer = f"```python\n{HEAD_FIRST}\n\n{SAWTOOTH}```"
    kept = extract_hook(answer, KERNEL.hook, KERNEL.loop_order)
    assert kept.ok and candidate.split(kept.source, "kv_order").loop_order.strip() == SAWTOOTH.strip()
    assert "kept the loop-order function kv_order() beside the remap" in kept.notes
    dropped = extract_hook(answer, KERNEL.hook)
    assert dropped.ok and "kv_order" not in dropped.source


@pytest.fixture(scope="module")
def scans(tmp_path_factory):
    """One head, 8 Q tiles, 2 programs (each runs 4 tiles of the head in turn), K/V of 64 KB behind a
    32 KB L2: a cyclic scan finds none of its blocks left by the previous one, a sawtooth finds half."""
    root = tmp_path_factory.mktemp("kernel")
    path = root / "attention_persistent.py"
    extra = '"one_head": {"batch": 1, "heads": 1, "kv_heads": 1, "seq": 1024, "head_dim": 16, "causal": 0, ' \
            '"programs": 2, "bf16": 0},\n'
    path.write_text(KERNEL.source.replace("SIZES = {\n", "SIZES = {\n    " + extra))
    kernel = load_kernel(path)
    hw = HardwareSpec(name="small-l2", vendor="nvidia", num_domains=1, cus_per_domain=2, l2_bytes_per_domain=32 * 1024,
                      line_bytes=128, sector_bytes=32, l2_ways=16, dispatch=Dispatch(policy="in_order"),
                      programs_per_cu=1)
    profiler = SimProfiler(hw, cache_dir=tmp_path_factory.mktemp("traces"))
    cyclic = profiler.profile(kernel, kernel.hook_source, "one_head")
    saw = profiler.profile(kernel, candidate.join(kernel.hook_source, sawtooth(kernel.loop_order)), "one_head")
    return kernel, profiler, cyclic, saw


def test_a_loop_order_candidate_is_captured_with_its_order_and_the_sawtooth_keeps_reuse(scans):
    kernel, profiler, cyclic, saw = scans
    assert saw.accesses == cyclic.accesses  # the same loads in another order
    assert saw.hits > cyclic.hits
    copies = list((profiler.cache_dir / "persistent-candidates").glob("*/attention_persistent.py"))
    assert len(copies) == 1 and "n_steps - 1 - step" in copies[0].read_text()
    assert any("captured with this candidate in place" in n for n in saw.notes)


def test_optimize_finds_the_sawtooth_where_a_scan_outgrows_the_cache_and_writes_both_hooks(scans, tmp_path, monkeypatch):
    from swizzleperf.cli.main import main

    kernel, profiler, _, _ = scans
    spec = tmp_path / "small-l2.json"
    spec.write_text(profiler.hw.model_dump_json())
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(profiler.cache_dir))
    monkeypatch.setattr("sys.argv", ["swizzleperf", "optimize", str(kernel.path), "--size", "one_head", "--hardware",
                                     str(spec), "-n", "7", "--patience", "7", "--workers", "1", "--no-library",
                                     "--runs-dir", str(tmp_path / "runs")])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code in (0, None)
    (run,) = (tmp_path / "runs").iterdir()
    report = (run / "report.md").read_text()
    best = report.split("**Best: `", 1)[1].split("`", 1)[0]
    assert best.endswith("+ sawtooth"), report[:600]
    applied = (run / "best" / kernel.path.name).read_text()
    assert "n_steps - 1 - step" in applied and "def kv_order(" in applied
    assert (run / "best" / "remap.py").read_text().count("def kv_order(") == 1
