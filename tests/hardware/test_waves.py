"""A size too small for a remap to matter is said so, with a size that is large enough."""

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.hardware.waves import cannot_matter, size_advice, wave

MI300X, H100 = PRESETS["mi300x"], PRESETS["h100"]


def test_a_wave_is_every_resident_program():
    assert wave(MI300X) == 8 * 38 * 2
    assert wave(H100) == 132 * 2


def test_no_more_programs_than_dies_cannot_matter():
    # e.g. a 512x512 GEMM in 128x256 tiles: 8 programs
    assert cannot_matter(8, MI300X) == ("8 programs on 8 dies: each die runs at most one, so no remap can change "
                                        "which programs share an L2")
    assert cannot_matter(9, MI300X) is None


def test_one_wave_on_one_l2_cannot_matter():
    assert cannot_matter(264, H100) == ("264 programs fit in one wave of h100 (264 resident at once): they all run "
                                        "together on one L2, so no remap can change what it sees")
    assert cannot_matter(265, H100) is None


def test_the_advice_names_a_large_enough_size_or_asks_for_one():
    sizes = {"tiny": 8, "small": 600, "large": 4096}
    assert size_advice("tiny", sizes, MI300X) == (
        "size tiny: 8 programs on 8 dies: each die runs at most one, so no remap can change which programs share "
        "an L2; size large (4096 programs) is large enough")
    assert size_advice("small", sizes, MI300X) == (
        "size small: 600 programs are fewer than two waves of mi300x (1216): a remap can choose each program's "
        "die, hardly when it runs; size large (4096 programs) is large enough")
    assert size_advice("large", sizes, MI300X) is None
    assert size_advice("tiny", {"tiny": 8}, MI300X).endswith(
        "no declared size is: capture or declare a launch of production size")


def test_between_one_and_two_waves_on_one_l2_most_run_at_once():
    assert size_advice("m", {"m": 512}, H100) == (
        "size m: 512 programs are fewer than two waves of h100 (528): most of them run at once, so a remap changes "
        "little of what the L2 sees; no declared size is: capture or declare a launch of production size")
