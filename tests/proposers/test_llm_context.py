"""What the model is shown: prompt files, hardware context per mode, the bounded history."""

import re
import shutil

import pytest

from swizzleperf.errors import LLMError
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.hardware.spec import Dispatch
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.proposers.llm.context import (
    NO_HARDWARE,
    describe_history,
    describe_profile,
    hardware_context,
    report_summary,
    select_attempts,
)
from swizzleperf.proposers.llm.templates import FILES, PromptSet
from swizzleperf.records.proposal import AttemptView
from swizzleperf.records.report import BottleneckReport, DomainStats

HOOK = HookSignature(name="swizzle", pid="pid", grid_params=("num_pids",), constexprs=("NUM_XCDS",))


@pytest.fixture(scope="module")
def prompts():
    return PromptSet.load()


def mi300x_report(source="sim"):
    """4096 rows x 4 chunks: every XCD holds programs of every row (identity remap)."""
    per = [DomainStats(domain=d, programs=2048, accesses=1_000_000 + d, hits=400_000 + 1000 * d, unique_lines=262_144)
           for d in range(8)]
    return BottleneckReport(source=source, hardware="mi300x", kernel="softmax", size="medium", hit_pct=40.35,
                            ceiling_pct=96.88, accesses=sum(p.accesses for p in per), hits=sum(p.hits for p in per),
                            unique_lines=262_144, per_domain=per)


def test_every_prompt_file_ships_and_loads(prompts):
    assert set(prompts.texts) == set(FILES)
    assert all(text.strip() for text in prompts.texts.values())


def test_aware_context_states_the_spec_dispatch_and_per_die_profile(prompts):
    text = hardware_context("aware", PRESETS["mi300x"], mi300x_report(), prompts, HOOK)
    assert "There are 8 XCDs" in text and "38 CUs" in text and "private 4 MB L2" in text
    assert "program id w runs on XCD w % 8" in text
    assert "receives the XCD count as NUM_XCDS (= 8)" in text
    assert "predicted by the simulator" in text
    assert "read-hit ceiling 96.88%" in text and "56.53 points below the read-hit ceiling" in text
    # 8 XCDs x 262,144 distinct lines each, 262,144 in the kernel: every line is fetched by all 8
    assert "summed over the 8 XCDs: 2,097,152" in text and "fetched by 8.00 XCDs" in text
    rows = [line.split() for line in text.splitlines() if re.match(r"^\s+\d+\s+2,048\s", line)]
    assert [int(r[0]) for r in rows] == list(range(8))
    assert [r[3] for r in rows] == [f"{100 * (400_000 + 1000 * d) / (1_000_000 + d):.2f}" for d in range(8)]
    assert "$" not in text  # every placeholder was filled


def test_the_model_sees_the_bounds_grouping_to_imitate_where_the_remap_misses_it(prompts):
    import numpy as np

    from swizzleperf.remaps.placement import partition_sentence

    report = mi300x_report()
    misses = report.accesses - report.hits
    grouping = partition_sentence(np.arange(16_384) // 2048, (16_384,), 8)  # whole rows: 512 rows per XCD
    assert grouping.startswith("The achievable bound's assignment puts logical programs 0-2047 on die 0 of 8")
    short = report.model_copy(update=dict(achievable_pct=96.0, achievable_fetches=300_000,
                                          achievable_grouping=grouping))
    text = hardware_context("aware", PRESETS["mi300x"], short, prompts, HOOK)
    assert f"- {grouping} (die = XCD). A remap that gives every XCD a group like this one" in text
    reached = short.model_copy(update=dict(achievable_fetches=misses))  # an L1 keeps its rate below 96%
    assert grouping not in hardware_context("aware", PRESETS["mi300x"], reached, prompts, HOOK)
    assert hardware_context("unaware", PRESETS["mi300x"], short, prompts, HOOK) == NO_HARDWARE
    assert grouping not in report_summary("aware", short)  # one line per attempt: the grouping is said once


def test_measured_reports_say_so(prompts):
    text = describe_profile(mi300x_report(source="rocprofv3"), PRESETS["mi300x"])
    assert "measured with rocprofv3" in text and "simulator" not in text


def test_chunked_dispatch_is_described_with_its_chunk(prompts):
    spec = PRESETS["mi300x"].model_copy(update={"dispatch": Dispatch(policy="round_robin", chunk=4)})
    assert "program id w runs on XCD (w // 4) % 8" in hardware_context("aware", spec, mi300x_report(), prompts, HOOK)


def test_shared_l2_gpu_gets_the_temporal_locality_text(prompts):
    report = BottleneckReport(source="ncu", hardware="h100", kernel="gemm", size="medium", hit_pct=55.0)
    text = hardware_context("aware", PRESETS["h100"], report, prompts, HOOK)
    assert "132 SMs sharing one 50 MB L2" in text and "temporal locality" in text
    assert "XCDs" not in text and "measured with ncu" in text
    # the scheduler walk, where the spec has one: consecutive blocks share an L2 partition; not on gb10
    assert "walking its SM order" in text and "on one of the L2's 2 partitions" in text
    gb10 = hardware_context("aware", PRESETS["gb10"], report.model_copy(update={"hardware": "gb10"}), prompts, HOOK)
    assert "48 SMs sharing one 24 MB L2" in gb10 and "walking its SM order" not in gb10


def test_unaware_mode_shows_no_hardware_at_all(prompts):
    report = mi300x_report()
    assert hardware_context("unaware", PRESETS["mi300x"], report, prompts, HOOK) == NO_HARDWARE
    summary = report_summary("unaware", report)
    assert summary == "L2 read hit 40.35% predicted (simulator); ceiling 96.88%"
    assert "die" in report_summary("aware", report)  # the aware summary does carry the per-die line count


def test_overload_mode_is_the_long_uncurated_text(prompts):
    text = hardware_context("overload", PRESETS["mi300x"], mi300x_report(), prompts, HOOK)
    assert text.startswith("Target GPU: mi300x.")
    assert len(text.split()) > 3000  # several thousand tokens
    assert "round-robin" in text  # the relevant fact is in there, buried
    assert "Per XCD" not in text  # but no curated profile


def test_unknown_mode_is_rejected(prompts):
    with pytest.raises(ValueError, match="choose one of aware, unaware, overload"):
        hardware_context("verbose", PRESETS["mi300x"], mi300x_report(), prompts, HOOK)


def test_a_placeholder_the_code_does_not_supply_names_the_file(tmp_path):
    for name in FILES:
        shutil.copy(PromptSet.load().directory / name, tmp_path / name)
    (tmp_path / "goal.md").write_text("Raise the hit rate of $kernel on $gpu_model.")
    with pytest.raises(LLMError, match=r"goal.md uses the placeholder \$gpu_model"):
        PromptSet.load(tmp_path).render("goal.md", kernel="softmax", hook_name="swizzle")


def test_a_prompt_directory_missing_files_is_refused(tmp_path):
    (tmp_path / "goal.md").write_text("x")
    with pytest.raises(LLMError, match="lacks hardware_multi_die.md.*SWIZZLEPERF_PROMPTS"):
        PromptSet.load(tmp_path)


def test_prompts_are_read_at_run_time_from_the_environment_directory(tmp_path, monkeypatch):
    for name in FILES:
        shutil.copy(PromptSet.load().directory / name, tmp_path / name)
    (tmp_path / "goal.md").write_text("Edited goal for $kernel.")
    monkeypatch.setenv("SWIZZLEPERF_PROMPTS", str(tmp_path))
    assert PromptSet.load().render("goal.md", kernel="softmax") == "Edited goal for softmax."


# --- history ----------------------------------------------------------------------------------

def attempt(iteration, accepted=True, hit=None, diff_lines=3, **kw):
    diff = "\n".join(f"+    line {i}" for i in range(diff_lines))
    return AttemptView(iteration=iteration, origin="llm", family=f"llm:idea-{iteration}", diff=diff, accepted=accepted,
                       hit_pct=hit, report=f"L2 hit {hit:.2f}% predicted (simulator)" if hit is not None else None,
                       **kw)


def test_history_keeps_the_best_and_the_latest_within_the_limit():
    history = [attempt(i, hit=50.0 + (30 if i == 2 else i)) for i in range(1, 11)]
    shown, omitted = select_attempts(history, limit=4)
    assert [a.iteration for a in shown] == [2, 8, 9, 10] and omitted == 6


def test_history_text_shows_diffs_outcomes_and_failure_reasons():
    history = [attempt(1, hit=61.25),
               attempt(2, accepted=False, stage="bijectivity", reason="logical id 7 is produced twice at grid 15"),
               attempt(3, accepted=False, stage="extraction", reason="x" * 2000, diff_lines=0)]
    text = describe_history(history, limit=8)
    assert "### iteration 1 (llm, llm:idea-1)\nOutcome: accepted; L2 hit 61.25% predicted (simulator)" in text
    assert "Outcome: REJECTED at bijectivity: logical id 7 is produced twice at grid 15" in text
    assert "[1400 more characters]" in text  # a long reason is clipped
    assert "(no diff: no usable code was recorded)" in text
    assert text.endswith("Do not repeat any of these implementations.")


def test_long_diffs_are_clipped_and_omitted_attempts_counted():
    history = [attempt(1, hit=70.0, diff_lines=100)] + [attempt(i, hit=40.0) for i in range(2, 12)]
    text = describe_history(history, limit=3)
    assert text.startswith("8 older attempt(s) are not shown (the best accepted attempt is among those shown).")
    assert "... [60 more diff lines]" in text
    assert describe_history([], limit=3) == "No attempts yet: this is the first one."
