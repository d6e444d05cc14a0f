"""Choose a profiler by name, or let "auto" (the default) pick the best one this machine can run.

auto: rocprofv3 on a ROCm GPU when the binary is found, ncu on a CUDA GPU when found, the
simulator otherwise, and also when the local GPU is another vendor's than the target hardware. The reason string says what was found, so a run records why its
numbers are measured or predicted.
"""

from __future__ import annotations

from typing import Any, Literal

from swizzleperf.errors import ProfilerError
from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.profilers import ncu, rocprof
from swizzleperf.profilers.base import Profiler
from swizzleperf.profilers.runner import find_tool

PROFILERS = ("sim", "ncu", "rocprofv3", "auto")


def local_gpu_runtime() -> Literal["rocm", "cuda"] | None:
    """Which GPU runtime torch sees here, if any."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return "rocm" if getattr(torch.version, "hip", None) else "cuda"


def _simulator(hw: HardwareSpec, options: dict[str, Any]) -> Profiler:
    from swizzleperf.profilers.sim import SimProfiler  # heavy (numba): only when chosen

    return SimProfiler(hw, **options)


def select_profiler(name: str, hw: HardwareSpec, **sim_options: Any) -> tuple[Profiler, str]:
    """The profiler called `name` for `hw`, and one line saying why it was chosen.

    `sim_options` (e.g. progress, cache_dir) go to the simulator when it is the one chosen;
    the hardware profilers measure, so they have nothing to report progress on.
    """
    if name == "sim":
        return _simulator(hw, sim_options), "requested: simulator"
    if name == "ncu":
        profiler = ncu.NcuProfiler(hw)
        return _timed(profiler, hw), f"requested: ncu at {profiler.binary}"
    if name == "rocprofv3":
        profiler = rocprof.RocprofV3Profiler(hw)
        return _timed(profiler, hw), f"requested: rocprofv3 at {profiler.binary}"
    if name != "auto":
        raise ProfilerError(f"unknown profiler {name!r}: choose one of {', '.join(PROFILERS)}")

    runtime = local_gpu_runtime()
    if runtime is None:
        return _simulator(hw, sim_options), "auto: no GPU here (torch sees none), so the simulator predicts"
    tool, module = ("rocprofv3", rocprof) if runtime == "rocm" else ("ncu", ncu)
    label = "ROCm GPU" if runtime == "rocm" else "CUDA GPU"
    if hw.vendor == {"rocm": "nvidia", "cuda": "amd"}[runtime]:
        # measuring an H100 says nothing about an MI300X's XCDs, and the report would claim it did
        return _simulator(hw, sim_options), (f"auto: a {label} here, but the target {hw.name} is {hw.vendor}, so the "
                                             f"simulator predicts")
    dirs = [d for d in module.install_dirs() if d]
    path = find_tool(tool, dirs)
    if path is None:
        return _simulator(hw, sim_options), (f"auto: a {label} but no {tool} on PATH or in {', '.join(dirs)}, so the "
                                             f"simulator predicts")
    profiler = rocprof.RocprofV3Profiler(hw, binary=path) if runtime == "rocm" else ncu.NcuProfiler(hw, binary=path)
    return _timed(profiler, hw), f"auto: a {label} and {tool} at {path}, so {tool} measures"


def _timed(profiler: Profiler, hw: HardwareSpec) -> Profiler:
    """Hardware counters plus do_bench timing, when a GPU is here to time on."""
    if local_gpu_runtime() is None:
        return profiler
    from swizzleperf.profilers.timed import TimedProfiler
    return TimedProfiler(profiler, num_xcds=hw.num_domains)
