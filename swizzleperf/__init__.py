"""swizzleperf: find program-id remaps that raise L2 hit rate of Triton kernels on multi-die GPUs.

The public API, loaded on first use: `import swizzleperf` itself imports nothing else, so a confined
child that needs one module of the package does not pay for all of it. Everything listed in
`__all__` is stable; the modules behind it (docs/architecture.md) may move.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_API = {
    # a kernel file and the GPU
    "load_kernel": "swizzleperf.kernel.contract", "KernelFile": "swizzleperf.kernel.contract",
    "HookSignature": "swizzleperf.kernel.contract",
    "HardwareSpec": "swizzleperf.hardware.spec", "PRESETS": "swizzleperf.hardware.presets",
    "resolve_hardware": ("swizzleperf.hardware.select", "resolve"),
    # the records every stage speaks
    "Proposal": "swizzleperf.records.proposal", "Attempt": "swizzleperf.records.attempt",
    "BottleneckReport": "swizzleperf.records.report", "RunRecord": "swizzleperf.records.run",
    # remaps: the families, checks and the library
    "FAMILIES": "swizzleperf.remaps.families", "candidate_space": "swizzleperf.remaps.space",
    "static_check": "swizzleperf.remaps.check", "Library": "swizzleperf.remaps.library",
    "check_bijective": "swizzleperf.validation.bijectivity", "prove_bijective": "swizzleperf.validation.proofs.entry",
    # profiling, proposing, the loop
    "select_profiler": "swizzleperf.profilers.select", "make_proposer": "swizzleperf.proposers.registry",
    "CandidateEvaluator": "swizzleperf.loop.pipeline", "History": "swizzleperf.loop.history",
    "RunDir": "swizzleperf.loop.rundir", "OptimizeRequest": "swizzleperf.workflows.optimize",
    "run_quietly": "swizzleperf.workflows.optimize",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'swizzleperf' has no attribute {name!r}")
    module, attribute = _API[name] if isinstance(_API[name], tuple) else (_API[name], name)
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
