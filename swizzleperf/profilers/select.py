"""Choose a profiler by name, or let "auto" (the default) pick the best one this machine can run.

auto: the registry's profiler for the local GPU's runtime when its tool is found (rocprofv3 on
ROCm, ncu on CUDA), the simulator otherwise, and also when the local GPU is another vendor's than
the target hardware. The reason string says what was found, so a run records why its numbers are
measured or predicted.
"""

from __future__ import annotations

from typing import Any, Literal

from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.profilers.base import Profiler
from swizzleperf.profilers.registry import PROFILERS, entry
from swizzleperf.profilers.runner import find_tool

RUNTIME_LABEL = {"rocm": "ROCm GPU", "cuda": "CUDA GPU"}
VENDOR = {"rocm": "amd", "cuda": "nvidia"}


def local_gpu_runtime() -> Literal["rocm", "cuda"] | None:
    """Which GPU runtime torch sees here, if any."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return "rocm" if getattr(torch.version, "hip", None) else "cuda"


def _predicting(hw: HardwareSpec, options: dict[str, Any]) -> Profiler:
    return next(e for e in PROFILERS.values() if not e.measures).load()(hw, **options)


def select_profiler(name: str, hw: HardwareSpec, **sim_options: Any) -> tuple[Profiler, str]:
    """The profiler called `name` for `hw`, and one line saying why it was chosen.

    `sim_options` (e.g. progress, cache_dir) go to the simulator when it is the one chosen;
    the hardware profilers measure, so they have nothing to report progress on.
    """
    if name != "auto":
        chosen = entry(name)
        if not chosen.measures:
            return chosen.load()(hw, **sim_options), "requested: simulator"
        profiler = chosen.load()(hw)
        return _timed(profiler, hw), f"requested: {name} at {profiler.binary}"
    runtime = local_gpu_runtime()
    if runtime is None:
        return _predicting(hw, sim_options), "auto: no GPU here (torch sees none), so the simulator predicts"
    label = RUNTIME_LABEL[runtime]
    if hw.vendor != VENDOR[runtime]:
        # measuring an H100 says nothing about an MI300X's XCDs, and the report would claim it did
        return _predicting(hw, sim_options), (f"auto: a {label} here, but the target {hw.name} is {hw.vendor}, so the "
                                              f"simulator predicts")
    chosen = next(e for e in PROFILERS.values() if e.runtime == runtime)
    dirs = [d for d in chosen.install_dirs() if d]
    path = find_tool(chosen.tool, dirs)
    if path is None:
        return _predicting(hw, sim_options), (f"auto: a {label} but no {chosen.tool} on PATH or in {', '.join(dirs)}, "
                                              f"so the simulator predicts")
    why = f"auto: a {label} and {chosen.tool} at {path}, so {chosen.tool} measures"
    return _timed(chosen.load()(hw, binary=path), hw), why


def _timed(profiler: Profiler, hw: HardwareSpec) -> Profiler:
    """Hardware counters plus do_bench timing, when a GPU is here to time on, and the bounds counters cannot give,
    from a capture of the launch (bounded.py)."""
    from swizzleperf.profilers.bounded import BoundedProfiler
    if local_gpu_runtime() is None:
        return BoundedProfiler(profiler, hw)
    from swizzleperf.profilers.timed import TimedProfiler
    return BoundedProfiler(TimedProfiler(profiler, num_xcds=hw.num_domains), hw)
