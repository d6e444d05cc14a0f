"""Confinement of the child processes that handle untrusted remaps: interpreter, environment, limits.

A candidate is never executed as Python, but children evaluate it (and, for correctness, compile
and launch it), so a child is where a bug in those checks would be exploited. Each child starts
as `python -I` (neither the current directory, the user's site nor PYTHON* variables reach its
path: a planted json.py is not imported; the installed swizzleperf still is), in a fresh working
directory, with an environment cut down to an allowlist (no provider keys), and sets its own
resource limits before it reads its payload.

The child sets the limits itself (`python -I -m swizzleperf.untrusted.isolation LIMITS MODULE ARGS...`)
rather than a preexec_fn in the parent: the parent runs threads (the LLM client's), and
preexec_fn is not safe in a threaded process. Cutting the network needs a single-threaded
process too, so it happens here, before numpy or torch start theirs.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import resource
import runpy
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

MB = 1024 * 1024
# One memory policy for every child that runs on the CPU (the bijectivity check, the prover, the
# interpreter's correctness check, the capture's replay): 8 GB of address space. The largest is the
# interpreter with torch and Triton loaded (about 1 GB of address space, 330 MB resident, for the suite's
# kernels); the evaluator works in chunks of programs (its memory does not grow with the grid) and z3 is
# told to stop at 1.5 GB, so the cap is what bounds a hostile candidate. A child that drives a GPU has no
# address-space cap (the driver reserves terabytes of it), only CPU time and file size.
CPU_CHILD_MEMORY_MB = 8192
# Exact names, no prefixes: a prefix lets any TRITON_CACHE_PASS or SWIZZLEPERF_BEARER through.
_ALLOWED_NAMES = frozenset({
    # the process
    "PATH", "HOME", "TMPDIR", "TMP", "TEMP", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_MESSAGES",
    "TZ", "USER", "LOGNAME", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "CC", "XDG_CACHE_HOME",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MALLOC_ARENA_MAX",
    # swizzleperf's own settings that its children read
    "SWIZZLEPERF_CACHE", "SWIZZLEPERF_CACHE_MAX_GB", "SWIZZLEPERF_SIM_MEMORY_MB", "SWIZZLEPERF_SAMPLE_ABOVE",
    "SWIZZLEPERF_SAMPLE_EVERY", "SWIZZLEPERF_DEBUG",
    # Triton's settings for compiling and caching (its knobs), not its remote caches or profilers
    "TRITON_INTERPRET", "TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR", "TRITON_DEBUG",
    "TRITON_ALWAYS_COMPILE", "TRITON_DEFAULT_FP_FUSION", "TRITON_F32_DEFAULT", "TRITON_DISABLE_LINE_INFO",
    "TRITON_ALLOW_NON_CONSTEXPR_GLOBALS", "TRITON_PRINT_AUTOTUNING", "TRITON_CACHE_AUTOTUNING",
    "TRITON_DEFAULT_BACKEND", "TRITON_OVERRIDE_ARCH", "TRITON_LIBDEVICE_PATH", "TRITON_LIBCUDA_PATH",
    "TRITON_CUDART_PATH", "TRITON_CUDACRT_PATH", "TRITON_PTXAS_PATH", "TRITON_LIBHIP_PATH", "TRITON_HSA_RUNTIME_PATH",
    "TRITON_HIP_USE_ASYNC_COPY", "TRITON_HIP_USE_BLOCK_PINGPONG", "TRITON_HIP_USE_IN_THREAD_TRANSPOSE",
    # which GPU, and where its runtime lives
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME", "CUDA_PATH", "CUDA_LAUNCH_BLOCKING",
    "CUDA_MODULE_LOADING", "CUDA_CACHE_PATH", "CUDA_CACHE_MAXSIZE", "CUDA_CACHE_DISABLE",
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL", "HIP_PATH", "ROCM_PATH", "ROCM_HOME", "HSA_OVERRIDE_GFX_VERSION", "HSA_XNACK",
    "AMD_SERIALIZE_KERNEL", "AMD_LOG_LEVEL", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "TORCH_HOME",
})
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_CLONE_NEWNET, _CLONE_NEWUSER = 0x40000000, 0x10000000


@dataclass(frozen=True)
class Confinement:
    """Limits a child sets on itself. None: no limit of that kind."""

    memory_mb: int | None = None  # address space (RLIMIT_AS); None where a GPU driver reserves terabytes of it
    cpu_s: float | None = None  # CPU seconds (RLIMIT_CPU): stops a child whose parent died and cannot kill it
    file_mb: int | None = 1024  # largest file it may write (RLIMIT_FSIZE)
    network: bool = True  # False: a new network namespace with no interfaces, where the OS allows one
    threads: int | None = None  # OMP/OpenBLAS/MKL threads: each reserves address space, so a cap needs few


def allowed_variable(name: str) -> bool:
    return name in _ALLOWED_NAMES


def child_env(confinement: Confinement, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The parent's environment cut to the allowlist, the thread settings, then the caller's `extra`."""
    env = {name: value for name, value in os.environ.items() if allowed_variable(name)}
    if confinement.threads is not None:
        env.update({name: str(confinement.threads) for name in _THREAD_VARIABLES})
    return {**env, **(extra or {})}


def command(confinement: Confinement, module: str, *args: str) -> list[str]:
    """The command line that runs `python -m module args...` confined."""
    return [sys.executable, "-I", "-m", "swizzleperf.untrusted.isolation", json.dumps(asdict(confinement)), module, *args]


def apply(confinement: Confinement) -> None:
    """Child side, first thing: the limits, then (still single-threaded) the network."""
    if confinement.memory_mb is not None:
        _limit(resource.RLIMIT_AS, confinement.memory_mb * MB, confinement.memory_mb * MB)
    if confinement.cpu_s is not None:
        soft = math.ceil(confinement.cpu_s)
        _limit(resource.RLIMIT_CPU, soft, soft + 5)  # SIGXCPU at soft, SIGKILL at hard
    if confinement.file_mb is not None:
        _limit(resource.RLIMIT_FSIZE, confinement.file_mb * MB, confinement.file_mb * MB)
    _limit(resource.RLIMIT_CORE, 0, 0)  # a child killed at a limit leaves no core file behind
    if not confinement.network:
        cut_network()


def _limit(kind: int, soft: int, hard: int) -> None:
    _, current_hard = resource.getrlimit(kind)
    if current_hard != resource.RLIM_INFINITY:  # never ask for more than the process may have
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(kind, (soft, hard))


def cut_network() -> bool:
    """Move this single-threaded process into a new network namespace (no interfaces up).

    Directly where it may (root, CAP_SYS_ADMIN), else inside a new user namespace that maps
    only its own ids; False where the OS allows neither (the child then runs with the network).
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(_CLONE_NEWNET) == 0:
            return True
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
            return False
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
        return True
    except (OSError, AttributeError):  # no unshare (not Linux), or /proc refused the id maps
        return False


def probe(payload: dict, workdir: Path) -> dict:
    """A sandbox target that reports what a confined child sees, for tests and for checking a machine.

    payload: `connect` (a port on 127.0.0.1 to try), `allocate_mb` (memory to take and touch),
    `spin_s` (CPU seconds to burn), `write_mb` (a file to write in the working directory), `mark` (a
    variable to set in its environment, after it was reported: a later child must not see it).
    """
    import json as json_module
    import socket
    import time

    import swizzleperf

    seen = {"env": sorted(os.environ), "sys_path": list(sys.path), "cwd": os.getcwd(), "isolated": sys.flags.isolated,
            "json_module": json_module.__file__, "swizzleperf": swizzleperf.__file__, "ppid": os.getppid(),
            "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")) if Path("/proc/self/fd").is_dir() else []}
    if payload.get("mark"):
        os.environ["SWIZZLEPERF_PROBE_MARK"] = "1"
    if payload.get("connect"):
        try:
            socket.create_connection(("127.0.0.1", int(payload["connect"])), timeout=2).close()
            seen["connected"] = True
        except OSError:
            seen["connected"] = False
    if payload.get("allocate_mb"):
        block = bytearray(int(payload["allocate_mb"]) * MB)
        block[::4096] = b"x" * len(range(0, len(block), 4096))
    end = time.process_time() + float(payload.get("spin_s", 0))
    while time.process_time() < end:
        pass
    if payload.get("write_mb"):
        (workdir / "written").write_bytes(b"x" * int(payload["write_mb"]) * MB)
    return seen


def main(argv: list[str]) -> None:
    apply(Confinement(**json.loads(argv[1])))
    sys.argv = [argv[2], *argv[3:]]
    runpy.run_module(argv[2], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv)
