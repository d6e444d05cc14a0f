"""Fidelity: recorded real counters parse to the exact numbers, and the comparison's statistics."""

import json
from pathlib import Path

import numpy as np
import pytest

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.lab.fidelity.compare import (
    KernelComparison,
    RemapComparison,
    hardware_for,
    measured_lookup_hit_pct,
    measured_resources,
    measured_split,
    predicted_split,
)
from swizzleperf.lab.fidelity.measure import fidelity_remaps, kernel_record
from swizzleperf.lab.fidelity.measurement import Measurement, merged
from swizzleperf.lab.fidelity.ranks import spearman, spearman_with_ties, tie_groups, told_apart
from swizzleperf.lab.fidelity.recordings import averaged, measured_read_hit_pct, reproducibility, same_remaps
from swizzleperf.profilers import ncu

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "fidelity"
H100 = PRESETS["h100"]


def _measurement() -> Measurement:
    return Measurement.model_validate_json((FIXTURES / "measured-h100-ncu2025.3.json").read_text())


def test_raw_ncu_output_becomes_one_record_per_remap_in_launch_order():
    kernel = load_kernel(ROOT / "kernels" / "softmax.py")
    record = kernel_record(kernel, H100, "medium", (FIXTURES / "ncu-h100-softmax-medium-6-remaps.csv").read_text())
    assert [r.label for r in record.remaps] == [label for label, _ in fidelity_remaps(kernel, H100)] == [
        "identity", "best (recorded)", "xcd_chunked(chunk=4, dies=2)", "xcd_contiguous(dies=2)",
        "xcd_chunked(chunk=128, dies=16)", "xcd_contiguous(dies=16)"]
    identity = record.remaps[0].metrics
    # the counters as ncu printed them ("13,295,560" sectors), in base units
    assert identity["l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum"] == 13_295_560
    assert identity["dram__bytes_read.sum"] == 135_088_640
    assert identity["launch__occupancy_limit_registers"] == 12
    # 20,263,020 read sectors returned to the SMs, 6,352,280 L2 read lookup misses: 68.65 % served without a
    # miss; the L2 looked up only 17,352,752 of them (11,000,472 hits: 63.39 %), the rest were merged before it
    assert measured_read_hit_pct(identity) == pytest.approx(68.65, abs=0.005)
    assert measured_lookup_hit_pct(identity) == pytest.approx(63.39, abs=0.005)
    # writes always hit: the L2 allocates written sectors without a fetch
    assert identity["lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum"] == 0
    measured = next(k for k in _measurement().kernels if k.kernel == "softmax")
    # the same counters per remap (sources are rendered from the current families, so they may be reworded)
    assert [(r.label, r.metrics) for r in record.remaps] == [(r.label, r.metrics) for r in measured.remaps]


def test_the_simulator_gets_the_measured_occupancy_and_l1_carve_out():
    records = {k.kernel: k for k in _measurement().kernels}
    assert measured_resources(records["softmax"]) == (12, 100 * 1024)
    assert measured_resources(records["gemm"]) == (2, 228 * 1024)
    softmax, gemm = hardware_for(records["softmax"], H100), hardware_for(records["gemm"], H100)
    assert (softmax.programs_per_cu, softmax.l1_bytes_per_cu) == (12, 156 * 1024)
    assert (gemm.programs_per_cu, gemm.l1_bytes_per_cu) == (2, 28 * 1024)


def test_merged_requests_are_served_reads_so_the_rate_follows_dram_traffic():
    """On elementwise, column-major gathers each column's programs in time: the coalescer merges their reads of
    b, so the L2's own lookup hit rate falls while DRAM reads fall too; the SMs' read hit rate rises with them."""
    remaps = {r.label: r.metrics for r in next(k for k in _measurement().kernels if k.kernel == "elementwise").remaps}
    row, col = remaps["identity"], remaps["col_major"]
    assert col["dram__bytes_read.sum"] < 0.95 * row["dram__bytes_read.sum"]
    assert measured_lookup_hit_pct(col) < measured_lookup_hit_pct(row) - 5
    assert measured_read_hit_pct(col) > measured_read_hit_pct(row) + 5
    # without the returned-sector count, the L1 misses stand in; without those, the lookups
    older = {k: v for k, v in col.items() if k != ncu.SM_READ_SECTORS}
    assert measured_read_hit_pct(older) == pytest.approx(
        100 * (1 - older[ncu.READ_MISS] / older[ncu.L1_MISS]))
    oldest = {k: v for k, v in older.items() if k != ncu.L1_MISS}
    assert measured_read_hit_pct(oldest) == pytest.approx(measured_lookup_hit_pct(col))


@pytest.mark.parametrize("recording", ["measured-h100-ncu2025.3.json", "measured-h100-outside-suite.json",
                                       "measured-h200-ncu2025.3.json", "measured-h200-outside-suite.json"])
def test_every_measured_read_hit_rate_is_a_rate_and_writes_always_hit(recording):
    for record in Measurement.model_validate_json((FIXTURES / recording).read_text()).kernels:
        for remap in record.remaps:
            m = remap.metrics
            assert 0.0 <= measured_read_hit_pct(m) <= 100.0
            assert m["lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum"] == 0, (record.kernel, remap.label)


def test_rank_correlation_and_errors():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 2, 2, 3]) == pytest.approx(1.0)  # ties share a rank
    assert spearman([5, 5, 5], [1, 2, 3]) is None  # nothing to rank
    rows = [RemapComparison("a", 60.0, 64.0, 80.0, 100.0, 110.0), RemapComparison("b", 80.0, 78.0, 80.0, 50.0, 45.0)]
    comparison = KernelComparison("k", "s", H100, rows)
    assert comparison.read_mae == pytest.approx(3.0)
    assert comparison.measured_spread == pytest.approx(20.0)
    assert comparison.rank_correlation == pytest.approx(1.0)
    assert comparison.dram_mean_abs_rel_error == pytest.approx(0.1)
    assert comparison.worst_over_ceiling == pytest.approx(0.0)


def test_pair_order_ignores_measured_near_ties_and_halves_predicted_ties():
    rows = [RemapComparison(label, measured, predicted, 90.0, 1.0, 1.0) for label, measured, predicted in [
        ("a", 10.0, 5.0), ("b", 10.5, 6.0),  # 0.5 apart as measured: not compared
        ("c", 30.0, 5.0),  # above a and b as measured; predicted tied with a, below b
        ("d", 50.0, 40.0)]]  # above everything, predicted so
    agree, pairs = KernelComparison("k", "s", H100, rows).ordered_pairs(min_gap=1.0)
    # pairs: a-c (tie: 0.5), a-d (1), b-c (wrong: 0), b-d (1), c-d (1)
    assert (agree, pairs) == (3.5, 5)


def test_recordings_tell_remaps_apart_by_a_paired_t_test():
    base = [10.0, 10.1, 9.9, 10.2]
    # a steady offset is real however small; the same mean difference with recording-to-recording swings is not
    assert told_apart(base, [x + 0.05 for x in base])
    assert told_apart([x + d for x, d in zip(base, (0.2, 0.4, 0.3, 0.5))], base)  # 0.35 > t(3) * se = 0.205
    assert not told_apart([x + d for x, d in zip(base, (0.2, -0.1, 0.5, 0.1))], base)  # 0.175 < 0.398
    assert not told_apart(base, base)
    assert told_apart([1.0], [2.0]) and not told_apart([1.0], [1.0])  # one recording: every difference counts


def test_measured_ties_group_from_the_highest_mean_down():
    # three recordings of four remaps: a and b swap places, c is steadily below them, d below c
    rates = [[50.0, 50.2, 45.0, 30.0], [50.3, 49.9, 45.1, 30.2], [50.1, 50.0, 44.8, 29.9]]
    assert tie_groups(rates) == (0, 0, 1, 2)
    # a group is closed by any member it cannot hold: c is within noise of b, but told apart from a
    a, b, c = [50.0, 50.0, 50.0], [49.8, 49.4, 49.9], [49.2, 49.3, 48.7]
    assert not told_apart(a, b) and not told_apart(b, c) and told_apart(a, c)
    assert tie_groups(list(zip(a, b, c))) == (0, 0, 1)


def test_rank_correlation_scores_measured_ties_as_ties():
    """spmv's six H100 remaps: identity and the recorded best are one order (a tie the simulator predicts)."""
    measured = [58.06, 58.05, 57.11, 57.02, 54.36, 54.24]
    predicted = [56.98, 56.98, 56.82, 56.97, 56.60, 56.70]
    assert spearman(measured, predicted) == pytest.approx(15 / 17.5 ** 0.5 / 17 ** 0.5)
    # ranks (4.5, 4.5, 2.5, 2.5, 0.5, 0.5) against (4.5, 4.5, 2, 3, 0, 1): 16 / sqrt(16 * 17)
    assert spearman_with_ties(measured, predicted, (0, 0, 1, 1, 2, 2)) == pytest.approx(16 / (16 * 17) ** 0.5)
    assert spearman_with_ties(measured, predicted, range(6)) == spearman(measured, predicted)


def test_the_ncu_profiler_reports_the_read_hit_rate_from_real_counters():
    result = ncu.parse_ncu_csv((FIXTURES / "ncu-h100-softmax-medium-6-remaps.csv").read_text(), "^softmax_kernel$")
    report = ncu.ncu_report(result, hw=H100, kernel_name="softmax", size="medium", iters=1, cache_control="all")
    last = result.launches[-1].metrics  # the last launch: xcd_contiguous(dies=16)
    assert report.metric == "read" and report.hit_pct == pytest.approx(measured_read_hit_pct(last))
    assert report.write_hit_pct == 100.0 and report.programs_per_cu == 12
    assert report.l1_hit_pct == pytest.approx(100 * last[ncu.L1_HIT] / (last[ncu.L1_HIT] + last[ncu.L1_MISS]))
    assert report.overall_hit_pct > report.hit_pct  # the writes, all hits, raise the overall rate
    assert "dropped the first 5 profiled launch(es)" in " ".join(report.notes)
    assert report.accesses == last[ncu.SM_READ_SECTORS] and report.hits == last[ncu.SM_READ_SECTORS] - last[ncu.READ_MISS]
    lookup = 100 * last[ncu.READ_HIT] / (last[ncu.READ_HIT] + last[ncu.READ_MISS])
    assert f"L2 lookup hit rate {lookup:.2f}%" in " ".join(report.notes)


def test_repeated_recordings_are_averaged_and_their_own_disagreement_is_reported():
    """gemm's eight good remaps measure within a point of each other, and ncu does not order them the same way
    twice: no model can rank them better than the recordings rank each other."""
    names = ("measured-h100-ncu2025.3.json", "repeat1-h100-ncu2025.3.json", "repeat2-h100-ncu2025.3.json")
    recordings = [next(k for k in Measurement.model_validate_json((FIXTURES / n).read_text()).kernels
                       if k.kernel == "gemm") for n in names]
    assert all(same_remaps(recordings[0], r) for r in recordings)
    mean = averaged(recordings)
    misses = "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum"
    # the identity's read misses were 21,510,464, 21,397,984 and 21,462,096 sectors of 70,778,880 requested
    assert mean.remaps[0].metrics[misses] == 21_456_848
    assert measured_read_hit_pct(mean.remaps[0].metrics) == pytest.approx(100 * (1 - 21_456_848 / 70_778_880))
    # the first recording has a counter the repeats lack: left out of the mean rather than averaged over one
    assert "lts__t_sectors_srcunit_tex_op_read.sum" in recordings[0].remaps[0].metrics
    assert "lts__t_sectors_srcunit_tex_op_read.sum" not in mean.remaps[0].metrics
    noise = reproducibility(recordings)
    assert noise.recordings == 3
    assert noise.worst_rank_correlation == pytest.approx(0.6606, abs=1e-4)
    assert noise.largest_difference == pytest.approx(0.575, abs=1e-3)
    # three recordings resolve four levels: six of the eight good orders are one measured tie, xcd_grouped and
    # xcd_row_major(dies=16) a little below them another, then xcd_row_major(dies=2), then the identity
    assert noise.tie_groups == (3, 0, 0, 0, 2, 0, 1, 0, 0, 1)
    assert not same_remaps(recordings[0], recordings[0].model_copy(update={"remaps": recordings[0].remaps[:-1]}))


def test_parts_of_one_run_measured_side_by_side_merge_into_one_measurement_in_suite_order():
    """The H200 recording was measured as four parts, one per GPU of one host, then merged."""
    whole = Measurement.model_validate_json((FIXTURES / "measured-h200-ncu2025.3.json").read_text())
    parts = [whole.model_copy(update={"kernels": whole.kernels[i::3]}) for i in (2, 0, 1)]
    order = tuple(k.kernel for k in whole.kernels)
    assert merged(parts, order=order) == whole
    assert [k.kernel for k in merged(parts, order=order, keep=("spmv", "gemm")).kernels] == ["gemm", "spmv"]
    with pytest.raises(ValueError, match="more than one part: gemm"):
        merged([parts[2], whole.model_copy(update={"kernels": [whole.kernels[1]]})], order=order)
    h100 = _measurement()
    with pytest.raises(ValueError, match="different set-ups"):
        merged([parts[0], h100.model_copy(update={"kernels": []})])


def test_every_read_miss_on_the_sm_side_is_a_far_hit_or_a_dram_fill():
    """Recorded with the far partition's counters (H100, 2026-11-27): near hits + far hits + DRAM fills account for
    every read the SMs requested, to 0.5 % of them (the counters come from different replay passes), on all 5 kernels and 42 remaps; and the far hits are what the
    model misses where it misses (spmv's scattered orders: 6.1-6.5 % measured, 3.9 % predicted), not DRAM traffic."""
    measurement = Measurement.model_validate_json((FIXTURES / "split-h100-ncu2025.3.json").read_text())
    checked = 0
    for record in measurement.kernels:
        for remap in record.remaps:
            near, far, dram = measured_split(remap.metrics)
            assert near + far + dram == pytest.approx(100.0, abs=0.5), (record.kernel, remap.label)
            assert near == pytest.approx(measured_read_hit_pct(remap.metrics))
            checked += 1
    assert checked == 42
    spmv = {r.label: measured_split(r.metrics) for r in next(k for k in measurement.kernels if k.kernel == "spmv").remaps}
    assert spmv["identity"][1] < 2.5 < 6.0 < spmv["xcd_contiguous(dies=16)"][1]
    assert abs(spmv["identity"][2] - spmv["xcd_contiguous(dies=16)"][2]) < 0.1  # the same DRAM traffic
    # recordings made before the far counters were added have no split
    assert measured_split(_measurement().kernels[0].remaps[0].metrics) is None


def test_the_predicted_split_puts_every_read_miss_that_dram_did_not_serve_in_the_far_partition():
    from swizzleperf.records.report import BottleneckReport

    report = BottleneckReport(source="sim", hardware="h100", kernel="k", size="s", hit_pct=60.0, accesses=1000,
                              hits=600, granule_bytes=32, bytes_from_next_level=300 * 32)
    assert predicted_split(report) == pytest.approx((60.0, 10.0, 30.0))
    assert predicted_split(report.model_copy(update={"bytes_from_next_level": None})) is None


def test_a_recorded_placement_is_simulated_beside_the_model_and_must_be_of_the_measured_remap(tmp_path):
    """fidelity.py compare --placement: each measured remap is also simulated with its slots on the SMs the GPU
    ran them on (matched by label; a recording under another remap is refused, however its source is written)."""
    import gzip

    from swizzleperf.lab.fidelity.compare import compare_kernel
    from swizzleperf.lab.fidelity.sm_placements import load_placements

    kernel = load_kernel(ROOT / "kernels" / "elementwise.py")
    measured = next(k for k in _measurement().kernels if k.kernel == "elementwise")
    remaps = [r for r in measured.remaps if r.label in ("identity", "col_major")]
    record = measured.model_copy(update={"size": "tiny", "remaps": remaps})
    # col_major recorded with its source rewritten (the same map): matched; the identity left unrecorded first
    rewritten = remaps[1].source.replace("return lid % num_pid_m, lid // num_pid_m",
                                         "m = lid % num_pid_m\n    return m, lid // num_pid_m")
    assert rewritten != remaps[1].source
    placed = {"kernel": "elementwise", "size": "tiny", "remap": "col_major", "source": rewritten,
              "smid": [0] * 9, "start_ns": [0] * 9}
    path = tmp_path / "placement.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"device": "test", "num_sms": 132, "kernels": [placed]}).encode()))
    result = compare_kernel(kernel, record, H100, placements=load_placements(path))
    identity, col_major = result.remaps
    assert identity.placed_read_pct is None and col_major.placed_read_pct is not None
    assert result.on_recorded_placement() is None  # not every remap has a placement
    # all nine programs on one SM: b's shared blocks are read once into its L1, so no read of the L2 hits (a
    # hair below 0: the sectors the ragged block's misses fetch beside count as misses too, as ncu counts them)
    assert col_major.placed_read_pct == pytest.approx(0.0, abs=0.05) and col_major.predicted_read_pct > 20
    both = [placed, {**placed, "remap": "identity", "source": remaps[0].source}]
    path.write_bytes(gzip.compress(json.dumps({"device": "test", "num_sms": 132, "kernels": both}).encode()))
    on_gpu = compare_kernel(kernel, record, H100, placements=load_placements(path)).on_recorded_placement()
    assert on_gpu.remaps[0].predicted_read_pct == pytest.approx(0.0, abs=0.05)
    assert on_gpu.remaps[1].predicted_read_pct == col_major.placed_read_pct
    swapped = [{**placed, "remap": "identity"}]
    path.write_bytes(gzip.compress(json.dumps({"device": "test", "num_sms": 132, "kernels": swapped}).encode()))
    with pytest.raises(ValueError, match="the placement recorded as 'identity' ran another remap"):
        compare_kernel(kernel, record, H100, placements=load_placements(path))


def test_compare_over_walk_seeds_prints_each_kernels_range_and_refuses_a_preset_without_a_walk(tmp_path, capsys,
                                                                                               monkeypatch):
    """fidelity.py compare --walk-seeds: each kernel simulated again under other draws of the scheduler walk's
    disorder, its rank correlation and error given as ranges; an AMD preset has no walk to draw again."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("fidelity_cli", ROOT / "benchmarks" / "fidelity.py")
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    measurement = _measurement()
    elementwise = next(k for k in measurement.kernels if k.kernel == "elementwise")
    small = elementwise.model_copy(update={"size": "small", "remaps": elementwise.remaps[:3]})
    path = tmp_path / "m.json"
    path.write_text(measurement.model_copy(update={"kernels": [small]}).model_dump_json())
    monkeypatch.setattr(sys, "argv", ["fidelity.py", "compare", str(path), "--walk-seeds", "1,2"])
    assert cli.main() == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("over walk seeds"))
    assert line.strip().startswith("over walk seeds 0, 1, 2: rank corr ") and "MAE " in line
    monkeypatch.setattr(sys, "argv", ["fidelity.py", "compare", str(path), "--walk-seeds", "1", "--hardware", "mi300x"])
    assert cli.main() == 2
    assert "mi300x has no scheduler walk" in capsys.readouterr().err


def test_remaps_with_one_launch_order_count_once_over_distinct_orders():
    """Two remaps that send every slot to the same program are one launch: over distinct orders they count once,
    at their measured mean, and the recordings' rates are merged the same way before the tie test."""
    from swizzleperf.lab.fidelity.compare import KernelComparison, RemapComparison
    from swizzleperf.lab.fidelity.recordings import reproducibility_of

    def row(label, measured, predicted):
        return RemapComparison(label=label, measured_read_pct=measured, predicted_read_pct=predicted,
                               ceiling_pct=90.0, measured_dram_bytes=100.0, predicted_dram_bytes=100.0)

    # a and a' are one order, measured 10 and 12 (noise: the simulator predicts them alike by construction)
    rates = np.array([[10.0, 12.0, 20.0, 5.0], [10.2, 11.8, 20.1, 5.1], [9.8, 12.2, 19.9, 4.9]])
    result = KernelComparison(kernel="k", size="s", hardware=H100, noise=reproducibility_of(rates),
                              remaps=[row("a", 10.0, 11.0), row("a'", 12.0, 11.0), row("b", 20.0, 19.0),
                                      row("c", 5.0, 6.0)], launch_of=(0, 0, 2, 3))
    assert result.rank_correlation < 0.95  # a < a' measured, tied as predicted
    distinct = result.distinct_launches()
    assert [r.label for r in distinct.remaps] == ["a = a'", "b", "c"]
    assert [r.measured_read_pct for r in distinct.remaps] == [11.0, 20.0, 5.0]
    assert distinct.rank_correlation == pytest.approx(1.0)
    assert distinct.rank_correlation_beyond_noise == pytest.approx(1.0)
    assert distinct.noise.recordings == 3 and np.allclose(np.array(distinct.noise.rates)[:, 0], rates[:, :2].mean(1))
    assert distinct.distinct_launches() is None


def test_compare_finds_the_remaps_that_are_one_launch_order_at_the_measured_size():
    """elementwise at its tiny size: a rewritten identity is the identity's launch order; col_major is its own."""
    from swizzleperf.lab.fidelity.compare import compare_kernel

    kernel = load_kernel(ROOT / "kernels" / "elementwise.py")
    measured = next(k for k in _measurement().kernels if k.kernel == "elementwise")
    identity, col_major = (next(r for r in measured.remaps if r.label == name) for name in ("identity", "col_major"))
    rewritten = identity.model_copy(update={"label": "identity, rewritten", "source": identity.source.replace(
        "return pid // num_pid_n, pid % num_pid_n", "row = pid // num_pid_n\n    return row, pid - row * num_pid_n")})
    assert rewritten.source != identity.source
    record = measured.model_copy(update={"size": "tiny", "remaps": [identity, col_major, rewritten]})
    result = compare_kernel(kernel, record, H100)
    assert result.launch_of == (0, 1, 0)
    assert [r.label for r in result.distinct_launches().remaps] == ["identity = identity, rewritten", "col_major"]
