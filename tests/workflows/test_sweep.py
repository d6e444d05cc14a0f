"""`swizzleperf sweep attention`: shapes as kernel copies, the access cap, and hit rates vs the simulator."""

import json
from pathlib import Path

import pytest

from swizzleperf.errors import ContractError
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.profilers.sim import SimProfiler
from swizzleperf.remaps.families import FAMILIES
from swizzleperf.workflows.sweep.output import write_outputs
from swizzleperf.workflows.sweep.shapes import (
    MAPPINGS,
    Shape,
    SweepGrid,
    SweepReport,
    check_sweepable,
    kernel_with_size,
    line_accesses,
    run_sweep,
    sweep_shape,
)

ROOT = Path(__file__).resolve().parents[2]
ATTENTION = ROOT / "kernels" / "attention.py"

# Two CUs of one resident program per die and a 256 KB L2: one head's K/V at S = 300 (150 KB) fits a
# die's L2, two heads' do not. Block-first order with 16 heads puts two heads on every die.
SMALL_L2 = PRESETS["mi300x"].model_copy(update=dict(name="mi300x-256k", l2_bytes_per_domain=256 * 1024,
                                                    cus_per_domain=2, programs_per_cu=1))
FAMILY_OF = {"naive block-first": "identity", "naive head-first": "head_first",
             "swizzled block-first": "swizzled_block_first", "swizzled head-first": "swizzled_head_first"}


def _block_first_kv_bytes_per_die(shape: Shape, hw) -> int:
    """K/V bytes that block-first order streams through one die: its heads (h -> die h % 8), fp16, D = 128."""
    return (shape.batch * shape.heads // hw.num_domains) * 2 * shape.seq * 128 * 2


def test_sweep_hit_rates_are_the_simulators_and_head_first_wins_where_kv_exceeds_l2(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    grid = SweepGrid(heads=(8, 16), seq=(300, 512))
    cap = 100_000  # 16 heads at S = 512 is 114,688 line accesses: skipped
    report = run_sweep(ATTENTION, SMALL_L2, "test spec", grid, access_cap=cap)

    assert [c.shape.name for c in report.cells] == ["b1_h8_kv8_s300", "b1_h8_kv8_s512", "b1_h16_kv16_s300",
                                                    "b1_h16_kv16_s512"]
    skipped = report.cells[3]
    assert skipped.status == "skipped" and skipped.hit_pct == {} and skipped.line_accesses == 114_688
    assert skipped.reason == "0.115 M line accesses > the 0.1 M cap"

    kernel = load_kernel(ATTENTION)
    for cell in report.cells[:3]:
        assert cell.status == "profiled" and list(cell.hit_pct) == [m.name for m in MAPPINGS]
        # the trace holds exactly the line accesses the cap was computed from
        assert cell.line_accesses == line_accesses(kernel, cell.shape.problem(kernel.size()), 128)
        shaped = kernel_with_size(kernel, cell.shape.name, cell.shape.problem(kernel.size()), tmp_path / "shapes")
        profiler = SimProfiler(SMALL_L2)
        for name, hit in cell.hit_pct.items():
            params = {"group": cell.shape.group} if "swizzled" in name else {}
            expected = profiler.profile(shaped, FAMILIES[FAMILY_OF[name]](shaped.hook, **params), cell.shape.name)
            assert hit == expected.hit_pct, (cell.shape.name, name)
            assert cell.ceiling_pct == expected.ceiling_pct
        head_first, block_first = cell.hit_pct["swizzled head-first"], cell.hit_pct["naive block-first"]
        if _block_first_kv_bytes_per_die(cell.shape, SMALL_L2) > SMALL_L2.l2_bytes_per_domain:
            assert head_first > block_first + 20, cell.shape.name
        else:  # one head per die: round-robin already co-locates each head
            assert head_first == block_first, cell.shape.name

    paths = write_outputs(report, tmp_path / "out")
    markdown = paths[0].read_text()
    assert ("| batch | heads | K/V heads | seq | group | line accesses (M) | naive block-first % | naive head-first % "
            "| swizzled block-first % | swizzled head-first % | ceiling % | best mapping | note |") in markdown
    h16 = report.cells[2]
    assert (f"| 1 | 16 | 16 | 300 | 1 | 0.06 | {h16.hit_pct['naive block-first']:.2f} | "
            f"{h16.hit_pct['naive head-first']:.2f} | {h16.hit_pct['swizzled block-first']:.2f} | "
            f"{h16.hit_pct['swizzled head-first']:.2f} | {h16.ceiling_pct:.2f} | swizzled head-first | "
            f"simulated whole |") in markdown
    sampled = h16.model_copy(update={"sampling": "set sampling (1,080 M line accesses): 1 L2 set in 8 simulated "
                                                 "exactly, the rest scaled"})
    from swizzleperf.workflows.sweep.output import _row
    assert _row(report, sampled)[-1] == "set sampling (1,080 M line accesses): 1 L2 set in 8"
    assert "| 1 | 16 | 16 | 512 | 1 | 0.11 |  |  |  |  |  |  | skipped: 0.115 M line accesses > the 0.1 M cap |" \
        in markdown
    assert "predicted by the simulator" in markdown
    assert SweepReport.model_validate(json.loads(paths[1].read_text())) == report
    assert paths[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_shapes_that_do_not_fit_are_skipped_with_the_reason_before_any_capture(tmp_path):
    kernel = load_kernel(ATTENTION)
    cell = sweep_shape(kernel, Shape(batch=1, heads=8, kv_heads=3, seq=1024), SMALL_L2, 10**9, tmp_path)
    assert cell.status == "skipped" and cell.reason == "8 heads are not a multiple of 3 K/V heads"
    big = sweep_shape(kernel, Shape(batch=4, heads=128, kv_heads=128, seq=16384), PRESETS["mi300x"], 60_000_000,
                      tmp_path)
    assert big.status == "skipped" and big.line_accesses == 4 * 128 * (128 * 2 * 256 + 512 * 128 * 129 // 2)
    assert big.reason == f"{big.line_accesses / 1e6:.3g} M line accesses > the 60 M cap"
    assert not list(tmp_path.iterdir())  # no kernel copy was written, nothing captured


def test_line_accesses_match_the_attention_files_own_count():
    kernel = load_kernel(ATTENTION)
    # kernels/attention.py: medium is "32 heads x (512 x 32 + 512 x 528) = 9.2 M line accesses"
    assert line_accesses(kernel, kernel.size("medium"), 128) == 32 * (512 * 32 + 512 * 528)
    non_causal = {**kernel.size("medium"), "causal": 0}
    assert line_accesses(kernel, non_causal, 128) == 32 * 32 * (512 + 2 * 4096 * 2)


def test_grid_parsing_names_the_option_and_gqa_grids_pair_every_kv_count():
    grid = SweepGrid.parse(heads="8, 16", seq="1024", batch="1,4", kv_heads="2")
    assert [s.name for s in grid.shapes()] == ["b1_h8_kv2_s1024", "b1_h16_kv2_s1024", "b4_h8_kv2_s1024",
                                               "b4_h16_kv2_s1024"]
    assert [s.group for s in grid.shapes()] == [4, 8, 4, 8]
    assert SweepGrid.parse(heads="8", seq="1024", batch="1", kv_heads=None).shapes()[0].kv_heads == 8
    with pytest.raises(ValueError, match="--seq takes comma-separated positive integers.*'1k'"):
        SweepGrid.parse(heads="8", seq="1k", batch="1", kv_heads=None)
    with pytest.raises(ValueError, match="--batch"):
        SweepGrid.parse(heads="8", seq="1024", batch="0", kv_heads=None)


def test_kernel_copies_add_a_size_and_leave_the_kernel_file_alone(tmp_path):
    before = ATTENTION.read_bytes()
    kernel = load_kernel(ATTENTION)
    values = Shape(batch=2, heads=4, kv_heads=2, seq=300).problem(kernel.size())
    shaped = kernel_with_size(kernel, "b2_h4_kv2_s300", values, tmp_path)
    assert shaped.name == "attention" and shaped.sizes["b2_h4_kv2_s300"] == values
    assert shaped.grid("b2_h4_kv2_s300") == (3, 2, 4) and set(kernel.sizes) < set(shaped.sizes)
    assert shaped.hook_source == kernel.hook_source
    assert ATTENTION.read_bytes() == before


def test_only_attention_shaped_kernels_can_be_swept():
    with pytest.raises(ContractError, match="softmax.py cannot be swept.*3D remap hook"):
        check_sweepable(load_kernel(ROOT / "kernels" / "softmax.py"))


def test_like_takes_the_other_parameters_from_a_named_size(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    kernel = load_kernel(ATTENTION)
    grid = SweepGrid(heads=(8,), seq=(256,))
    report = run_sweep(ATTENTION, SMALL_L2, "test spec", grid, access_cap=10**6, like="small")
    (cell,) = report.cells
    assert report.base_size == "small" and report.base_values == kernel.size("small")
    values = cell.shape.problem(kernel.size("small"))
    assert (values["causal"], values["head_dim"], values["heads"], values["seq"]) == (0, 32, 8, 256)
    # non-causal at D = 32 (64 B rows): every program reads all 256 keys' K and V, half a line per row
    assert cell.status == "profiled" and cell.line_accesses == line_accesses(kernel, values, 128)
    causal = line_accesses(kernel, cell.shape.problem(kernel.size()), 128)
    assert cell.line_accesses != causal
    write_outputs(report, tmp_path / "out")
    assert "Other parameters from size 'small': head_dim=32, causal=0, bf16=0" in (tmp_path / "out" / "sweep.md").read_text()
    with pytest.raises(ContractError, match="has no size 'nosuch'; declared: tiny, small, medium"):
        run_sweep(ATTENTION, SMALL_L2, "test spec", grid, like="nosuch")


def test_a_kernel_with_a_loop_order_hook_is_swept_with_and_without_the_sawtooth(tmp_path, monkeypatch):
    """One head of 1024 tokens, 2 programs of 4 tiles each, K/V of 64 KB behind a 32 KB L2: with every
    mapping, the sawtooth finds blocks its previous scan left in the L2 and the cyclic order does not."""
    from swizzleperf.hardware.spec import Dispatch, HardwareSpec

    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    persistent = load_kernel(ROOT / "kernels" / "attention_persistent.py")
    path = tmp_path / "kernel" / "attention_persistent.py"
    path.parent.mkdir()
    extra = '"two_programs": {"batch": 1, "heads": 1, "kv_heads": 1, "seq": 1024, "head_dim": 16, "causal": 0, ' \
            '"programs": 2, "bf16": 0},\n'
    path.write_text(persistent.source.replace("SIZES = {\n", "SIZES = {\n    " + extra))
    hw = HardwareSpec(name="small-l2", vendor="nvidia", num_domains=1, cus_per_domain=2, l2_bytes_per_domain=32 * 1024,
                      line_bytes=128, sector_bytes=32, l2_ways=16, dispatch=Dispatch(policy="in_order"),
                      programs_per_cu=1)
    report = run_sweep(path, hw, "test spec", SweepGrid(heads=(1,), seq=(1024,)), like="two_programs")
    (cell,) = report.cells
    assert report.mappings == [m.name for m in MAPPINGS] + [f"{m.name} + sawtooth" for m in MAPPINGS]
    assert cell.families["swizzled head-first + sawtooth"] == "swizzled_head_first(group=1) + sawtooth"
    for m in MAPPINGS:
        assert cell.hit_pct[f"{m.name} + sawtooth"] > cell.hit_pct[m.name], m.name
    markdown = write_outputs(report, tmp_path / "out")[0].read_text()
    assert "| naive block-first + sawtooth % |" in markdown
