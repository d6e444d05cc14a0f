"""Persistent kernels (issue 16): the contract's PERSISTENT, and a simulator that captures each
candidate's own trace, since a persistent program calls the remap hook in its loop over tiles."""

from pathlib import Path

import pytest

from swizzleperf.errors import ContractError
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.profilers.sim import SimProfiler

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "kernels" / "attention_persistent.py"
HOOK = "@triton.jit\ndef swizzle(tile, num_q_blocks, batch_size, num_heads, NUM_XCDS: tl.constexpr):\n    {}\n"
# the kernel's own block-first order, written differently: the same tiles, so the same trace
BLOCK_FIRST = HOOK.format("q = tile // (num_heads * batch_size)\n    return q, (tile // num_heads) % batch_size, "
                          "tile - (tile // num_heads) * num_heads")
HEAD_FIRST = HOOK.format("per_head = num_q_blocks * batch_size\n    return tile % num_q_blocks, "
                         "(tile // num_q_blocks) % batch_size, tile // per_head")


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    cache = tmp_path_factory.mktemp("traces")
    kernel = load_kernel(KERNEL)
    before = KERNEL.read_text()
    profiler = SimProfiler(PRESETS["mi300x"], cache_dir=cache)
    remaps = {"own": kernel.hook_source, "block_first": BLOCK_FIRST, "head_first": HEAD_FIRST}
    reports = {name: profiler.profile(kernel, source, "small") for name, source in remaps.items()}
    return kernel, profiler, cache, reports, before


def test_the_contract_says_persistent_and_refuses_a_non_boolean(tmp_path):
    kernel = load_kernel(KERNEL)
    assert kernel.persistent and kernel.size("small")["programs"] == 5
    bad = tmp_path / "bad.py"
    bad.write_text(KERNEL.read_text().replace("PERSISTENT = True", "PERSISTENT = 1"))
    with pytest.raises(ContractError, match="PERSISTENT must be True or False, got 1"):
        load_kernel(bad)


def test_each_candidate_is_captured_with_its_own_hook_and_replayed_in_launch_order(profiled):
    kernel, profiler, cache, reports, before = profiled
    # 5 resident programs on 8 dies: dies 0-4 run one program each, for all of its tiles
    for report in reports.values():
        assert [d.programs for d in report.per_domain] == [1, 1, 1, 1, 1, 0, 0, 0]
    reads = {name: [d.accesses for d in report.per_domain] for name, report in reports.items()}
    assert reads["block_first"] == reads["own"]  # the same tiles per program: the same trace
    assert reads["head_first"] != reads["own"]  # other tiles per program: another trace
    assert sum(reads["head_first"]) == sum(reads["own"])  # the same tiles in all
    copies = sorted((cache / "persistent-candidates").glob("*/attention_persistent.py"))
    assert len(copies) == 2 and all(BLOCK_FIRST in c.read_text() or HEAD_FIRST in c.read_text() for c in copies)
    assert KERNEL.read_text() == before  # the kernel file itself is never written


def test_the_report_says_what_was_simulated_and_that_the_partition_bound_does_not_apply(profiled):
    _, _, _, reports, _ = profiled
    notes = " ".join(reports["head_first"].notes)
    assert "persistent kernel: 5 programs, each on one CU for all its tiles" in notes
    assert "achievable bound n/a for a candidate captured on its own" in notes and reports["head_first"].achievable_pct is None


def test_the_contract_reads_the_loop_order_hook_and_refuses_a_wrong_shape(tmp_path):
    kernel = load_kernel(KERNEL)
    assert kernel.loop_order.render() == "def kv_order(step, n_steps, local_tile, NUM_XCDS: tl.constexpr)"
    assert kernel.loop_order_source.startswith("@triton.jit\ndef kv_order(step, n_steps, local_tile,")
    bad = tmp_path / "attention_persistent.py"
    bad.write_text(KERNEL.read_text().replace("def kv_order(step, n_steps, local_tile, NUM_XCDS",
                                              "def kv_order(step, n_steps, NUM_XCDS"))
    with pytest.raises(ContractError, match=r"the loop-order hook must be `@triton.jit def kv_order\(step, n_steps, "
                                            r"local_tile, NUM_XCDS: tl.constexpr\)` \(names your own\); got "
                                            r"kv_order\(step, n_steps, NUM_XCDS\)"):
        load_kernel(bad)


def test_check_refuses_a_kernel_whose_loop_order_skips_blocks(tmp_path, monkeypatch, capsys):
    from swizzleperf.cli.main import main

    broken = tmp_path / "attention_persistent.py"
    text = KERNEL.read_text()
    own = '    """Step of a tile\'s K/V scan -> K/V block to fold in (a permutation of [0, n_steps)): cyclic."""\n' \
          '    return step\n'
    assert own in text
    broken.write_text(text.replace(own, own.replace("return step", "return step // 2")))
    monkeypatch.setenv("COLUMNS", "2000")
    monkeypatch.setattr("sys.argv", ["swizzleperf", "check", str(broken), "--hardware", "h100", "--size", "tiny",
                                     "--seeds", "1"])
    with pytest.raises(SystemExit) as exc:
        main()
    lines = capsys.readouterr().out.splitlines()
    assert exc.value.code == 2
    assert ("✗ loop order kv_order(): with local_tile = 0: grid (2,): steps 0 and 1 both map to 0; logical 1 is "
            "never produced (1 of 2 logical ids missing)") in lines
    assert lines[-1] == "BROKEN KERNEL at loop order: its loop-order hook skips or repeats blocks; fix the kernel file"


def test_every_report_gives_the_static_schedules_busiest_program(profiled):
    """small: 16 tiles of 4 K/V steps (2 loads each) plus a Q load and an O store; program 0 runs 4 of them."""
    _, _, _, reports, _ = profiled
    for report in reports.values():
        assert report.busiest_program_events == 4 * (4 * 2 + 2)
        assert "static schedule: the busiest of the 5 programs issues 40 loads and stores" in " ".join(report.notes)


def test_a_remap_that_deals_the_long_causal_tiles_to_one_program_ranks_after_the_kernels_own(tmp_path):
    """Causal, 2 heads x 4 q blocks on 2 programs: q block q scans 2q + 2 blocks. Block-first gives each
    program q blocks 0-3 (20 steps); head-first gives program 1 q blocks 1 and 3 of both heads (24 steps):
    a higher hit rate, if any, does not make up for a schedule that ends with its busiest program."""
    from datetime import datetime, timezone

    from swizzleperf.loop.history import History, measurably_slower, slower_reason
    from swizzleperf.records.attempt import Attempt, StageResult

    path = tmp_path / "attention_persistent.py"
    path.write_text(KERNEL.read_text().replace("SIZES = {", 'SIZES = {\n    "causal_2x512": {"batch": 1, "heads": 2, '
                                                            '"kv_heads": 2, "seq": 512, "head_dim": 16, "causal": 1, '
                                                            '"programs": 2, "bf16": 0},', 1))
    kernel = load_kernel(path)
    profiler = SimProfiler(PRESETS["h100"], cache_dir=tmp_path / "traces")
    reports = {name: profiler.profile(kernel, source, "causal_2x512")
               for name, source in {"own": kernel.hook_source, "head_first": HEAD_FIRST}.items()}
    assert reports["own"].busiest_program_events == 2 * 20 + 2 * 4
    assert reports["head_first"].busiest_program_events == 2 * 24 + 2 * 4

    def attempt(iteration, report, hit_pct):
        report = report.model_copy(update={"hit_pct": hit_pct, "accesses": None, "hits": None})
        return Attempt(iteration=iteration, origin="baseline" if iteration == 0 else "search", family=f"f{iteration}",
                       source="src", diff="", stages=[StageResult(stage="profile", ok=True, detail="ok", seconds=0)],
                       report=report, started_at=datetime.now(timezone.utc), seconds=0.0)

    own, head_first = attempt(0, reports["own"], 50.0), attempt(1, reports["head_first"], 90.0)
    assert measurably_slower(head_first, own) and not measurably_slower(own, own)
    assert History([own, head_first]).best() is own
    assert slower_reason(head_first, own) == ("predicted slower: its busiest program issues 56 loads and stores, "
                                              "the kernel's own 48 (1.17x)")
