"""The profilers `--profiler NAME` can name, and what `auto` needs to know to pick one.

Each entry says which GPU runtime the profiler measures on (None: it predicts, anywhere), the tool
it runs and where that tool is usually installed, and how to build it. Built-ins register here;
factories import their module only when chosen (the simulator pulls in numba). A new profiler is
one module with a class that follows `base.Profiler` and one `register(...)` call (docs/extending.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from swizzleperf.errors import ProfilerError

Runtime = Literal["cuda", "rocm"]


@dataclass(frozen=True)
class ProfilerEntry:
    name: str
    target: str                     # "module:Class"; the class takes (hw, binary=...) or, predicting, (hw, **options)
    runtime: Runtime | None = None  # the GPU runtime it measures on; None: a prediction, runs anywhere
    tool: str | None = None         # the binary it runs (found on PATH or in install_dirs)
    install_dirs: Callable[[], tuple[str | None, ...]] = field(default=lambda: ())

    @property
    def measures(self) -> bool:
        return self.runtime is not None

    def load(self) -> type:
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)


PROFILERS: dict[str, ProfilerEntry] = {}


def register(entry: ProfilerEntry) -> ProfilerEntry:
    if entry.name in PROFILERS or entry.name == "auto":
        raise ValueError(f"profiler {entry.name} is registered twice (or is named auto)")
    PROFILERS[entry.name] = entry
    return entry


def entry(name: str) -> ProfilerEntry:
    if name not in PROFILERS:
        raise ProfilerError(f"unknown profiler {name!r}: choose one of {', '.join([*PROFILERS, 'auto'])}")
    return PROFILERS[name]


def _install_dirs(module: str) -> Callable[[], tuple[str | None, ...]]:
    return lambda: importlib.import_module(module).install_dirs()


register(ProfilerEntry("sim", "swizzleperf.profilers.sim:SimProfiler"))
register(ProfilerEntry("ncu", "swizzleperf.profilers.ncu:NcuProfiler", runtime="cuda", tool="ncu",
                       install_dirs=_install_dirs("swizzleperf.profilers.ncu")))
register(ProfilerEntry("rocprofv3", "swizzleperf.profilers.rocprof:RocprofV3Profiler", runtime="rocm",
                       tool="rocprofv3", install_dirs=_install_dirs("swizzleperf.profilers.rocprof")))
