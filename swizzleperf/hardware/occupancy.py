"""Programs resident per SM: from the compiled kernel where the GPU can say, else what the kernel declares.

Occupancy decides which programs share the caches at once, so the simulator takes it from the
best source at hand, and every report's notes say which:

1. A local NVIDIA GPU of the simulated kind (same SM count): the kernel is compiled at the size
   by one launch in a child process, and the driver says how many of its blocks fit an SM
   (`cuOccupancyMaxActiveBlocksPerMultiprocessor`: registers, shared memory and warps counted as
   the hardware counts them). Its shared memory also sizes the L1, which shares one array with
   it: the carve-out is estimated as the smallest option that holds those blocks' shared memory
   plus the 1 KB per block the driver reserves. The driver may choose a larger one (an H100 gave
   softmax 100 KB where 64 KB would do); ncu's `launch__shared_mem_config_size` shows the real one.
2. The kernel's `PROGRAMS_PER_CU` (its author's statement about registers and shared memory).
3. The hardware preset's assumption.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from swizzleperf.errors import SandboxError
from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.untrusted.sandbox import run_in_child

# Hopper's shared-memory carve-outs (KB; CUDA programming guide). 0, 8 and 16 exist too, but an H100
# gave kernels without shared memory 32 KB (ncu launch__shared_mem_config_size), so the estimate starts there.
HOPPER_CARVEOUTS_KB = (32, 64, 100, 132, 164, 196, 228)
RESERVED_SHARED_PER_BLOCK = 1024
COMPILE_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class CompiledOccupancy:
    """What the compiled kernel and the driver said."""

    num_warps: int
    shared_bytes: int  # per program (dynamic shared memory at launch)
    registers: int  # per thread
    programs_per_sm: int
    device: str

    @property
    def carveout_bytes(self) -> int:
        need = self.programs_per_sm * (self.shared_bytes + RESERVED_SHARED_PER_BLOCK) if self.shared_bytes else 0
        return next((kb * 1024 for kb in HOPPER_CARVEOUTS_KB if kb * 1024 >= need), HOPPER_CARVEOUTS_KB[-1] * 1024)


def compiled_kernels(module):
    """Triton's compiled kernels held by the @triton.jit functions of `module`, launched ones only."""
    for value in vars(module).values():
        for cache in (getattr(value, "device_caches", None) or {}).values():
            for compiled in (cache[0] if isinstance(cache, tuple) else cache).values():
                if hasattr(compiled, "_init_handles"):
                    compiled._init_handles()
                yield compiled


def compiled_metadata(module) -> dict[str, int]:
    """num_warps, shared (bytes), n_regs and n_spills of the first compiled kernel in `module` ({} if none)."""
    for compiled in compiled_kernels(module):
        meta = compiled.metadata
        return {"num_warps": int(meta.num_warps), "shared": int(meta.shared),
                "n_regs": int(getattr(compiled, "n_regs", -1)), "n_spills": int(getattr(compiled, "n_spills", -1))}
    return {}


def max_blocks_per_sm(function_handle: int, block_threads: int, shared_bytes: int) -> int:
    """The CUDA driver's occupancy calculator for one compiled function (call in the process that loaded it)."""
    cuda = ctypes.CDLL("libcuda.so.1")
    blocks = ctypes.c_int(0)
    status = cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        ctypes.byref(blocks), ctypes.c_void_p(function_handle), ctypes.c_int(block_threads),
        ctypes.c_size_t(shared_bytes))
    if status != 0:
        raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor failed with CUresult {status}")
    return blocks.value


def measure_in_child(payload: dict, workdir: Path) -> dict:
    """Child side: launch the kernel once at the size, then read the compiled kernel and the driver."""
    import torch

    from swizzleperf.kernel.contract import load_kernel

    kernel = load_kernel(payload["kernel"])
    size = kernel.size(payload["size"])
    inputs = kernel.fn("make_inputs")(size, 0, "cuda")
    outputs = kernel.fn("make_outputs")(size, "cuda")
    kernel.fn("launch")(inputs, outputs, size, payload["num_xcds"])
    torch.cuda.synchronize()
    compiled = next(compiled_kernels(kernel.module), None)
    if compiled is None:
        raise RuntimeError(f"{kernel.path.name}: no compiled Triton kernel found after one launch")
    meta = compiled.metadata
    threads = int(meta.num_warps) * 32
    return {"num_warps": int(meta.num_warps), "shared_bytes": int(meta.shared),
            "registers": int(getattr(compiled, "n_regs", -1)), "device": torch.cuda.get_device_name(),
            "programs_per_sm": max_blocks_per_sm(compiled.function, threads, int(meta.shared))}


def local_gpu_matches(hw: HardwareSpec) -> bool:
    """A local NVIDIA GPU with as many SMs as `hw`: its compiled occupancy is `hw`'s."""
    if hw.vendor != "nvidia":
        return False
    try:
        import torch
    except ImportError:
        return False
    if not torch.cuda.is_available() or getattr(torch.version, "hip", None):
        return False
    return torch.cuda.get_device_properties(0).multi_processor_count == hw.cus_per_domain


def measure(kernel: KernelFile, size: str, num_xcds: int = 1) -> CompiledOccupancy:
    """Compile and launch `kernel` at `size` on the local GPU (in a child) and ask the driver."""
    result = run_in_child("swizzleperf.hardware.occupancy:measure_in_child",
                          {"kernel": str(kernel.path), "size": size, "num_xcds": num_xcds},
                          timeout=COMPILE_TIMEOUT_S, what=f"compiling {kernel.name} ({size}) for its occupancy")
    return CompiledOccupancy(**result.value)


def resolve(kernel: KernelFile, size: str, hw: HardwareSpec, use_gpu: bool = True) -> tuple[HardwareSpec, str]:
    """`hw` with the occupancy (and L1) this kernel runs at, and a note saying where it came from."""
    failure = ""
    if use_gpu and local_gpu_matches(hw):
        try:
            found = measure(kernel, size)
        except SandboxError as exc:
            failure = f" (compiling on the local GPU failed: {str(exc).splitlines()[0]})"
        else:
            tuned = hw.model_copy(update={"programs_per_cu": max(1, found.programs_per_sm)})
            tuned = tuned.with_shared_carveout(found.carveout_bytes)
            return tuned, (f"occupancy from the compiled kernel on {found.device}: {found.programs_per_sm} per SM "
                           f"({found.num_warps} warps, {found.registers} registers/thread, {found.shared_bytes} B "
                           f"shared); L1 {tuned.l1_bytes_per_cu // 1024} KB (carve-out estimated "
                           f"{found.carveout_bytes // 1024} KB)")
    declared = hw.with_occupancy(kernel.programs_per_cu)
    if declared is not hw:
        return declared, (f"occupancy: {kernel.name} declares PROGRAMS_PER_CU = {declared.programs_per_cu}, so "
                          f"{declared.programs_per_cu} per CU instead of {hw.name}'s {hw.programs_per_cu}{failure}")
    return hw, f"occupancy: {hw.name}'s assumption of {hw.programs_per_cu} programs per CU{failure}"
