"""Inside the user's process: Triton's launch path instrumented, each distinct launch written as JSON.

`swizzleperf capture` runs the user's command with `bootstrap/` first on PYTHONPATH; its
sitecustomize calls `install()`. Nothing happens until triton is imported; then the launch paths
are wrapped (`recorder.py`) and, on a machine without a GPU, the driver and CUDA calls are stood
in for (`standins.py`). This code runs in the user's environment, which need not have
swizzleperf's dependencies: it uses the standard library, torch and triton only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

from swizzleperf.kernel.launches.journal import DIR_ENV, note

SETTINGS_ENV = "SWIZZLEPERF_CAPTURE_SETTINGS"

SETTINGS: dict = {
    "kernel": None,  # record only this kernel (its function name); None: every kernel
    "config": 0,  # on the CPU, the autotune config to run (the first by default; never benchmark all)
    "stand_in": False,  # no GPU here: stand in for the driver and torch.cuda
    "sm_count": 132,  # what the stand-in driver reports: the target preset's CUs/SMs,
    "vendor": "nvidia",  # ... its vendor (the backend, warp size and shared memory of its kind of GPU),
    "arch": 90,  # ... and architecture (an int for CUDA, "gfx942" for HIP)
    "preset": "h100",
    "max_values": 65536,  # integer tensors up to this many elements keep their values in the record
    "max_per_kernel": 16,  # distinct launches recorded per kernel
    "record": True,  # False: stand-ins only (a re-run of a captured command)
}


def install() -> None:
    """Arm the recorder (a no-op unless `swizzleperf capture` set $SWIZZLEPERF_CAPTURE_DIR)."""
    if not os.environ.get(DIR_ENV):
        return
    SETTINGS.update(json.loads(os.environ.get(SETTINGS_ENV) or "{}"))
    if SETTINGS["stand_in"]:
        _after_import("torch", _torch_ready)
    _after_import("triton", _triton_ready)


def _torch_ready() -> None:
    from swizzleperf.kernel.launches import standins
    standins.torch_cuda(SETTINGS)


def _triton_ready() -> None:
    from swizzleperf.kernel.launches import recorder, standins
    if SETTINGS["stand_in"]:
        standins.triton_driver(SETTINGS)
    recorder.install(SETTINGS)


class _AfterImport:
    """A meta-path finder that runs `then()` once the module `name` has been executed."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then(module):
            exec_module(module)
            try:
                self.then()
            except Exception as exc:  # the user's program must not fail because of the recorder
                note(f"the recorder could not be set up after importing {name}: {exc!r}")

        spec.loader.exec_module = exec_then
        return spec


def _after_import(name: str, then) -> None:
    if name in sys.modules:
        then()
    else:
        sys.meta_path.insert(0, _AfterImport(name, then))
