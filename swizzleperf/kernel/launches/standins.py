"""Stand-ins for the GPU on a machine without one, so that real modules reach their launches.

Real modules touch the GPU at import and in their wrappers: the device from
`triton.runtime.driver.active`, the SM count from its device properties, `device="cuda"`,
`torch.cuda.synchronize()`. Under the CPU interpreter none of that exists. While capturing,
the driver is replaced by one that reports the CPU device and the target preset's SM count,
tensors asked for on "cuda" are made on the CPU, and a handful of `torch.cuda` queries answer as
one GPU would. Each stand-in used is noted once, so the capture summary can say what was not real.
"""

from __future__ import annotations

import types

from swizzleperf.kernel.launches import journal

_noted: set[str] = set()


def _used(what: str) -> None:
    if what not in _noted:
        _noted.add(what)
        journal.note(f"stand-in: {what}")


# What each vendor's GPU reports, for the target preset's kind: (backend, warp size, shared memory per CU/SM)
_VENDOR = {"amd": ("hip", 64, 65536), "nvidia": ("cuda", 32, 232448), "other": ("cuda", 32, 232448)}


def device_properties(settings: dict) -> dict:
    """What `driver.active.utils.get_device_properties` answers: the target preset's CU/SM count, and its
    vendor's warp size and shared memory (an MI300X's on AMD, an H100's on NVIDIA)."""
    _, warp, shared = _VENDOR[settings["vendor"]]
    return {"multiprocessor_count": settings["sm_count"], "max_shared_mem": shared, "max_num_regs": 65536,
            "warpSize": warp, "max_threads_per_sm": 2048, "sm_clock_rate": 1755000, "mem_clock_rate": 2619000, "mem_bus_width": 5120,
            "arch": str(settings["arch"])}


class _CpuDriver:
    """`triton.runtime.driver.active` for the CPU interpreter."""

    def __init__(self, settings: dict):
        import torch
        from triton.backends.compiler import GPUTarget
        backend, warp, _ = _VENDOR[settings["vendor"]]
        self._torch, self._target = torch, GPUTarget(backend, settings["arch"], warp)
        props = device_properties(settings)

        def get_device_properties(device=0):
            _used(f"device properties (multiprocessor_count={props['multiprocessor_count']}, warpSize "
                  f"{props['warpSize']}, max_shared_mem {props['max_shared_mem']}: the target preset "
                  f"{settings['preset']}'s kind of GPU)")
            return dict(props)

        self.utils = types.SimpleNamespace(get_device_properties=get_device_properties)

    def is_active(self):
        return True

    def get_current_device(self):
        return 0

    def set_current_device(self, device):
        return None

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        _used("triton's active torch device is the CPU")
        return self._torch.device("cpu")

    def get_current_target(self):
        _used(f"triton's current target reads as {self._target.backend} {self._target.arch} (the target preset's "
              f"kind)")
        return self._target

    def get_device_capability(self, device=0):
        return (9, 0)

    def get_benchmarker(self):
        from triton.testing import do_bench
        return do_bench

    def get_empty_cache_for_benchmark(self):
        return self._torch.empty(1 << 20, dtype=self._torch.int8)

    def clear_cache(self, cache):
        cache.zero_()


def triton_driver(settings: dict) -> None:
    """Install the CPU driver (not probing for a real one: with torch.cuda stood in, CUDA's would claim to be there)."""
    from triton.runtime import driver
    driver.set_active(_CpuDriver(settings))
    driver._default = driver._active


def _cuda_to_cpu(value):
    text = str(value) if value is not None else ""
    return "cpu" if text == "cuda" or text.startswith("cuda:") else value


def torch_cuda(settings: dict) -> None:
    """Tensors asked for on "cuda" are made on the CPU; a few torch.cuda queries answer as one GPU."""
    import torch
    from torch.overrides import TorchFunctionMode

    class CudaIsCpu(TorchFunctionMode):
        def __torch_function__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "device" in kwargs and _cuda_to_cpu(kwargs["device"]) != kwargs["device"]:
                _used('tensors made on "cuda" are made on the CPU')
                kwargs["device"] = "cpu"
            if func is torch.Tensor.cuda:
                return args[0]
            if func is torch.Tensor.to:
                args = tuple(_cuda_to_cpu(a) if isinstance(a, (str, torch.device)) else a for a in args)
            return func(*args, **kwargs)

    CudaIsCpu().__enter__()  # for the rest of the process (its main thread)
    props = device_properties(settings)
    gpu = types.SimpleNamespace(name=f"CPU stand-in for {settings['preset']}", multi_processor_count=props["multiprocessor_count"],
                                total_memory=80 << 30, major=9, minor=0, warp_size=32)
    answers = {"is_available": lambda: True, "device_count": lambda: 1, "current_device": lambda: 0,
               "set_device": lambda device: None, "synchronize": lambda device=None: None,
               "get_device_name": lambda device=None: gpu.name, "get_device_capability": lambda device=None: (9, 0),
               "get_device_properties": lambda device=None: gpu, "empty_cache": lambda: None}
    for name, answer in answers.items():
        setattr(torch.cuda, name, answer)
    _used("torch.cuda answers as one GPU (is_available, synchronize, get_device_properties, ...)")
