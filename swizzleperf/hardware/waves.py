"""Whether a launch is large enough for a remap to matter on a GPU: its programs against the GPU's waves.

A wave is every program the GPU holds at once (its CUs/SMs times the programs each holds). A remap
changes which die a program runs on and when it starts; with no more programs than dies it changes
nothing (each die runs at most one), and on a GPU with one L2 a launch that fits in one wave runs all
at once, so no order changes what the L2 sees. Between that and two waves a remap can still choose
dies on a multi-die GPU, but hardly timing; on one L2 most programs still run at once. The suggestion is the smallest declared size of at least two waves.
"""

from __future__ import annotations

from swizzleperf.hardware.spec import HardwareSpec


def wave(hw: HardwareSpec) -> int:
    """Programs resident on the whole GPU at once."""
    return hw.num_domains * hw.resident_programs_per_domain


def cannot_matter(programs: int, hw: HardwareSpec) -> str | None:
    """Why no remap can change the L2's hits at this many programs, or None."""
    if programs <= hw.num_domains and hw.num_domains > 1:
        return (f"{programs} programs on {hw.num_domains} dies: each die runs at most one, so no remap can change "
                f"which programs share an L2")
    if hw.num_domains == 1 and programs <= wave(hw):
        return (f"{programs} programs fit in one wave of {hw.name} ({wave(hw)} resident at once): they all run "
                f"together on one L2, so no remap can change what it sees")
    return None


def size_advice(size: str, programs_by_size: dict[str, int], hw: HardwareSpec) -> str | None:
    """A sentence for a size below two waves: what a remap can do there, and a size that shows more."""
    programs = programs_by_size[size]
    if programs >= 2 * wave(hw):
        return None
    larger = sorted((n, name) for name, n in programs_by_size.items() if n >= 2 * wave(hw))
    suggest = (f"size {larger[0][1]} ({larger[0][0]} programs) is large enough" if larger else
               "no declared size is: capture or declare a launch of production size")
    between = ("a remap can choose each program's die, hardly when it runs" if hw.num_domains > 1 else
               "most of them run at once, so a remap changes little of what the L2 sees")
    why = cannot_matter(programs, hw) or (f"{programs} programs are fewer than two waves of {hw.name} "
                                          f"({2 * wave(hw)}): {between}")
    return f"size {size}: {why}; {suggest}"
