"""The simulator's size settings, from the environment (read at call time, so tests can set them)."""

from __future__ import annotations

import os

MiB = 1 << 20


def _number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        return float(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None


def sim_memory_bytes() -> int:
    """Trace data one simulation keeps in memory at once (SWIZZLEPERF_SIM_MEMORY_MB, default 1024):
    a trace whose compact form is larger is replayed from disk in chunks of about this size."""
    return int(_number("SWIZZLEPERF_SIM_MEMORY_MB", 1024) * MiB)


def cache_max_bytes() -> int:
    """The trace cache's size bound (SWIZZLEPERF_CACHE_MAX_GB, default 20): least recently used
    traces are deleted past it."""
    return int(_number("SWIZZLEPERF_CACHE_MAX_GB", 20) * 1024 * MiB)


def sample_above() -> int:
    """Traces with more line accesses than this are simulated on a sample of the L2 sets by default
    (SWIZZLEPERF_SAMPLE_ABOVE, default 600 M: ~100 s of full simulation per remap on the h100
    preset; 0 never samples)."""
    return int(_number("SWIZZLEPERF_SAMPLE_ABOVE", 600e6))


def sample_every() -> int:
    """Sampling simulates one L2 set in this many (SWIZZLEPERF_SAMPLE_EVERY, default 8)."""
    return max(1, int(_number("SWIZZLEPERF_SAMPLE_EVERY", 8)))


def bounds_capture_seconds() -> float:
    """How long a measured run may spend capturing its launch on the CPU for the bounds its counters cannot give
    (SWIZZLEPERF_BOUNDS_CAPTURE_S, default 120; 0 never captures)."""
    return max(0.0, _number("SWIZZLEPERF_BOUNDS_CAPTURE_S", 120))
