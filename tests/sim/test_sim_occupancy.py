"""A kernel's PROGRAMS_PER_CU lowers the simulator's residency (never raises it) and says so."""

from pathlib import Path

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import KernelFile, load_kernel
from swizzleperf.profilers.sim import SimProfiler

ROOT = Path(__file__).resolve().parents[2]
# Two CUs per die and a 64 KB L2: softmax's small size then depends on how many programs share a die.
BASE = PRESETS["mi300x"].model_copy(update=dict(cus_per_domain=2, l2_bytes_per_domain=64 * 1024))


def _softmax(tmp_path: Path, folder: str, extra: str = "") -> KernelFile:
    (tmp_path / folder).mkdir()
    path = tmp_path / folder / "softmax.py"
    path.write_text((ROOT / "kernels" / "softmax.py").read_text() + extra)
    return load_kernel(path)


def test_declared_occupancy_is_simulated_as_that_many_programs_per_cu(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    plain = _softmax(tmp_path, "plain")
    one = _softmax(tmp_path, "one", "\nPROGRAMS_PER_CU = 1\n")
    four = _softmax(tmp_path, "four", "\nPROGRAMS_PER_CU = 4\n")
    two_per_cu = BASE.model_copy(update=dict(programs_per_cu=2))
    one_per_cu = BASE.model_copy(update=dict(programs_per_cu=1))

    def run(kernel, hw):
        return SimProfiler(hw).profile(kernel, kernel.hook_source, "small")

    expected, default = run(plain, one_per_cu), run(plain, two_per_cu)
    assert expected.hits != default.hits  # the case is sensitive to residency

    declared = run(one, two_per_cu)
    assert (declared.hits, declared.accesses, declared.hardware) == (expected.hits, expected.accesses, "mi300x")
    assert "occupancy: softmax declares PROGRAMS_PER_CU = 1, so 1 per CU instead of mi300x's 2" in declared.notes
    assert "2 programs resident per domain (2 CUs x 1 per CU)" in " ".join(declared.notes)

    above = run(four, two_per_cu)  # more than the hardware allows: the hardware's assumption stands
    assert above.hits == default.hits and "occupancy: mi300x's assumption of 2 programs per CU" in above.notes
