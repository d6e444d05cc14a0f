"""Hardware specs: presets, spec files and their errors."""

import pytest

from swizzleperf.errors import HardwareSpecError
from swizzleperf.hardware import detect as detection
from swizzleperf.hardware import presets
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.hardware.select import resolve as resolve_hardware
from swizzleperf.hardware.spec import HardwareSpec


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_validates_and_round_trips(name):
    spec = PRESETS[name]
    again = HardwareSpec.model_validate_json(spec.model_dump_json())
    assert again == spec
    assert spec.num_sets * spec.line_bytes * spec.l2_ways == spec.l2_bytes_per_domain
    assert spec.source, "every preset says where its numbers come from"


def test_mi300x_matches_the_published_layout():
    mi300x = PRESETS["mi300x"]
    assert (mi300x.num_domains, mi300x.cus_per_domain, mi300x.l2_bytes_per_domain) == (8, 38, 4 * 2**20)
    assert mi300x.dispatch.policy == "round_robin" and mi300x.dispatch.chunk == 1
    assert mi300x.num_sets == 2048
    assert PRESETS["mi355x"].cus_per_domain == 32
    assert PRESETS["h100"].num_domains == 1 and PRESETS["h100"].dispatch.policy == "in_order"


def test_spec_file_with_base_and_overrides(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("base: mi300x\nname: mi300x-xor\nset_index: xor_fold\nprograms_per_cu: 4\n")
    spec, why = resolve_hardware(str(path))
    assert spec.name == "mi300x-xor" and spec.set_index == "xor_fold" and spec.programs_per_cu == 4
    assert spec.num_domains == 8 and "spec file" in why


def test_full_json_spec_file(tmp_path):
    path = tmp_path / "h.json"
    path.write_text(PRESETS["h100"].model_dump_json())
    assert resolve_hardware(str(path))[0] == PRESETS["h100"]


@pytest.mark.parametrize("text, field", [
    ("base: mi300x\nnum_domains: 0\n", "num_domains"),
    ("base: mi300x\nl2_ways: many\n", "l2_ways"),
    ("base: mi300x\nline_bytes: 100\n", "line_bytes must be a power of two"),
    ("base: mi300x\nl2_bytes_per_domain: 1000000\n", "whole number of sets"),
    ("base: mi300x\ncolour: blue\n", "colour"),
    ("base: mi300x\ndispatch: {policy: sideways}\n", "dispatch.policy"),
    ("base: h100\ncu_partition: [0, 1]\n", "cu_partition must give each of the 132 CUs"),
    ("base: h100\nl2_partitions: 3\n", "must split into 3 partitions"),
    ("base: h100\ndispatch: {policy: in_order, first_wave: [0, 1, 500]}\n", "must name every CU"),
    ("base: mi999\n", "base 'mi999' is not a preset"),
    ("- just\n- a list\n", "must hold a mapping"),
    ("name: [unclosed\n", "not valid YAML"),
])
def test_malformed_spec_is_rejected_naming_the_field(tmp_path, text, field):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(HardwareSpecError) as err:
        resolve_hardware(str(path))
    assert field in str(err.value)


def test_unknown_name_and_missing_file():
    with pytest.raises(HardwareSpecError, match="unknown hardware 'mi3000'.*mi300x"):
        resolve_hardware("mi3000")
    with pytest.raises(HardwareSpecError, match="does not exist"):
        resolve_hardware("/nonexistent/spec.yaml")


def test_default_without_gpu_is_mi300x():
    spec, why = resolve_hardware(None)
    assert spec.name == "mi300x" and "no GPU detected" in why


def test_describe_is_the_methods_hardware_sentence():
    text = PRESETS["mi300x"].describe()
    assert "8 L2 domains" in text and "38 CUs" in text and "4 MB L2" in text and "round-robin" in text
    assert "one 50 MB L2 (128 B lines of 32 B sectors); each SM has a 224 KB L1" in PRESETS["h100"].describe()
    assert "each CU has a 32 KB L1 for loads" in text


class _Props:
    def __init__(self, name, sms, l2, arch="", major=9):
        self.name, self.multi_processor_count, self.L2_cache_size, self.gcnArchName = name, sms, l2, arch
        self.major = major


def _fake_gpu(monkeypatch, props, hip: str | None):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    monkeypatch.setattr(torch.version, "hip", hip, raising=False)


def test_detect_cuda_reads_torch_properties(monkeypatch):
    _fake_gpu(monkeypatch, _Props("NVIDIA H200", 132, 60 * 2**20), hip=None)
    spec = detection.detect()
    assert (spec.vendor, spec.num_domains, spec.cus_per_domain, spec.l2_bytes_per_domain) == ("nvidia", 1, 132, 60 * 2**20)
    assert spec.dispatch.policy == "in_order" and "132 SMs" in spec.source
    # Hopper: 32 B sectors and the unified L1 (224 KB once a kernel's minimum carve-out is taken)
    assert (spec.sector_bytes, spec.l1_bytes_per_cu, spec.unified_l1_bytes_per_cu) == (32, 224 * 2**10, 256 * 2**10)
    # 132 SMs: a GH100 with the measured two-partition layout
    assert (spec.l2_partitions, spec.cu_partition) == (2, presets.PRESETS["h100"].cu_partition)
    assert "two L2 partitions" in spec.source
    _fake_gpu(monkeypatch, _Props("NVIDIA A100", 108, 40 * 2**20, major=8), hip=None)
    other = detection.detect()
    assert other.l1_bytes_per_cu == 0 and "L1 not modelled" in other.source


def test_detect_rocm_uses_the_hip_xcc_count_and_normalises_l2_per_xcd(monkeypatch):
    _fake_gpu(monkeypatch, _Props("AMD Instinct MI300X", 304, 32 * 2**20, "gfx942:sramecc+:xnack-"), hip="6.4")
    monkeypatch.setattr(detection, "_hip_xcc_count", lambda device: 8)
    spec = detection.detect()
    assert (spec.num_domains, spec.cus_per_domain, spec.l2_bytes_per_domain) == (8, 38, 4 * 2**20)  # total / 8
    assert "hipDeviceAttributeNumberOfXccs" in spec.source


def test_detect_rocm_without_the_hip_attribute_falls_back_to_the_arch_and_says_so(monkeypatch):
    _fake_gpu(monkeypatch, _Props("AMD Instinct MI300X", 304, 4 * 2**20, "gfx942:sramecc+:xnack-"), hip="6.0")
    monkeypatch.setattr(detection, "_hip_xcc_count", lambda device: None)
    spec = detection.detect()
    assert spec.num_domains == 8 and spec.l2_bytes_per_domain == 4 * 2**20  # older ROCm reports one XCD's L2
    assert "assumed from gfx942 (HIP attribute unavailable)" in spec.source


def test_a_kernels_occupancy_lowers_the_residency_and_never_raises_it():
    mi300x = PRESETS["mi300x"]
    assert mi300x.with_occupancy(None) is mi300x and mi300x.with_occupancy(3) is mi300x
    one = mi300x.with_occupancy(1)
    assert (one.programs_per_cu, one.resident_programs_per_domain, one.name) == (1, 38, "mi300x")
    assert mi300x.programs_per_cu == 2  # the preset itself is untouched


def test_the_h100_layout_is_the_measured_one_and_fills_the_first_wave_evenly():
    h100 = presets.PRESETS["h100"]
    assert h100.l2_partitions == 2 and sorted(set(h100.cu_partition)) == [0, 1] and sum(h100.cu_partition) == 66
    assert h100.cu_partition[:8] == [0, 0, 1, 1, 1, 1, 1, 1]  # SM pairs (TPCs) share a side
    for per_sm in (1, 4, 12, 16, 20):  # 20: beyond the measured 16 per SM, the sequence repeats
        wave = h100.model_copy(update={"programs_per_cu": per_sm}).first_wave_cus()
        assert len(wave) == 132 * per_sm and all(wave.count(sm) == per_sm for sm in range(132))
    assert h100.first_wave_cus()[:10] == [128, 129, 130, 131, 124, 125, 126, 127, 0, 1]
    # without a measured sequence: CU 0, 1, 2, ... round and round
    plain = presets.PRESETS["mi300x"].model_copy(update={"programs_per_cu": 2})
    assert plain.first_wave_cus()[:40] == list(range(38)) + [0, 1]


@pytest.mark.parametrize("fetch", [16, 48, 256])
def test_an_l2_fetch_granularity_that_is_no_block_of_sectors_is_refused(fetch):
    spec = {**PRESETS["h100"].model_dump(), "l2_fetch_bytes": fetch}
    with pytest.raises(ValueError, match="l2_fetch_bytes must be a power of two from the sector size"):
        HardwareSpec.model_validate(spec)
    assert PRESETS["h100"].fetch_sectors == 2 and PRESETS["mi300x"].fetch_sectors == 1
