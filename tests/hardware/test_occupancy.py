"""Occupancy: the compiled kernel's (through the driver) where a matching GPU is local, else the declared one."""

from __future__ import annotations

from pathlib import Path

import pytest

from swizzleperf.errors import SandboxError
from swizzleperf.hardware import occupancy
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def compiled(programs: int, shared: int) -> occupancy.CompiledOccupancy:
    return occupancy.CompiledOccupancy(num_warps=4, shared_bytes=shared, registers=64, programs_per_sm=programs,
                                       device="NVIDIA H100 80GB HBM3")


@pytest.mark.parametrize("programs, shared, carveout_kb", [
    (12, 0, 32),  # no shared memory: the smallest carve-out an H100 gave (ncu)
    (12, 2048, 64),  # 12 x (2 KB + 1 KB reserved) = 36 KB
    (2, 98304, 196),  # gemm: 2 x 97 KB
    (1, 131072, 132),  # attention: 129 KB
    (3, 98304, 228),  # more than fits: the largest carve-out
])
def test_carveout_is_the_smallest_option_holding_the_blocks_shared_memory(programs, shared, carveout_kb):
    assert compiled(programs, shared).carveout_bytes == carveout_kb * 1024


def test_without_a_matching_gpu_the_declared_occupancy_is_used_and_named(monkeypatch):
    monkeypatch.setattr(occupancy, "local_gpu_matches", lambda hw: False)
    attention = load_kernel(KERNELS / "attention.py")  # declares PROGRAMS_PER_CU
    hw, note = occupancy.resolve(attention, "mha64_4k", PRESETS["h100"])
    assert hw.programs_per_cu == attention.programs_per_cu and "declares PROGRAMS_PER_CU" in note
    softmax = load_kernel(KERNELS / "softmax.py")
    hw, note = occupancy.resolve(softmax, "medium", PRESETS["h100"])
    assert hw is PRESETS["h100"] and "h100's assumption of 2 programs per CU" in note


def test_a_matching_gpu_gives_the_compiled_occupancy_and_l1(monkeypatch):
    monkeypatch.setattr(occupancy, "local_gpu_matches", lambda hw: True)
    monkeypatch.setattr(occupancy, "measure", lambda kernel, size: compiled(12, 2048))
    hw, note = occupancy.resolve(load_kernel(KERNELS / "softmax.py"), "medium", PRESETS["h100"])
    assert hw.programs_per_cu == 12 and hw.l1_bytes_per_cu == (256 - 64) * 1024
    assert "from the compiled kernel on NVIDIA H100" in note and "carve-out estimated 64 KB" in note


def test_a_failed_compile_falls_back_and_says_why(monkeypatch):
    def broken(kernel, size):
        raise SandboxError("compiling softmax (medium) for its occupancy exited with 1:\nCUDA error: out of memory")

    monkeypatch.setattr(occupancy, "local_gpu_matches", lambda hw: True)
    monkeypatch.setattr(occupancy, "measure", broken)
    hw, note = occupancy.resolve(load_kernel(KERNELS / "softmax.py"), "medium", PRESETS["h100"])
    assert hw is PRESETS["h100"] and "compiling on the local GPU failed: compiling softmax (medium)" in note


def test_an_amd_spec_never_takes_a_local_nvidia_gpus_occupancy():
    assert not occupancy.local_gpu_matches(PRESETS["mi300x"])
