"""Measure a set of remaps of each kernel with Nsight Compute, one ncu process per kernel.

All remaps of a kernel run in one child (`python -m swizzleperf.lab.fidelity.child`): it builds the
inputs once, compiles and warms up every candidate outside the profiler range, then launches each
candidate once inside it. ncu (`--cache-control all`: every replay pass starts from flushed caches)
numbers the profiled launches in order, so launch i is remap i. Counters come back raw, keyed by
metric name; `compare` turns them into hit rates.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from swizzleperf.errors import ProfilerError
from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.lab.fidelity.measurement import MeasuredKernel, MeasuredRemap, Measurement
from swizzleperf.profilers import ncu
from swizzleperf.profilers.ncu import install_dirs, ncu_arguments, parse_ncu_csv
from swizzleperf.profilers.runner import (
    child_env,
    find_tool,
    kernel_name_regex,
    launched_kernel_names,
    run_tool,
    write_candidate,
)
from swizzleperf.remaps.families import FamilyInstance
from swizzleperf.remaps.space import candidate_space

# The SM-side L2 traffic split by operation (what a swizzle changes is read reuse; writes allocate
# without a fetch), where the read misses were served (far partition or DRAM), L1's filtering of global
# loads, DRAM traffic, and what sets occupancy.
METRICS = (ncu.READ_HIT, ncu.READ_MISS, ncu.WRITE_HIT, ncu.WRITE_MISS, ncu.TEX_HIT, ncu.TEX_MISS, ncu.LOOKUP_HIT,
           ncu.LOOKUP_MISS, ncu.L1_HIT, ncu.L1_MISS, ncu.SM_READ_SECTORS, "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
           ncu.FAR_READ_HIT, ncu.FAR_READ_MISS, ncu.DRAM_FILLS, "lts__t_sectors_srcunit_tex_op_read.sum",
           "lts__t_requests_srcunit_tex_op_read.sum",
           ncu.DRAM_READ, "dram__bytes_write.sum", ncu.DURATION, *ncu.OCCUPANCY_LIMITS,
           "launch__shared_mem_config_size", "launch__shared_mem_per_block_static",
           "launch__shared_mem_per_block_dynamic", "launch__registers_per_thread", "launch__block_size",
           "launch__grid_size", "sm__warps_active.avg.pct_of_peak_sustained_active")
_UNKNOWN_METRIC = re.compile(r"Failed to find metric (\S+)")
BEST_REMAPS = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "best_remaps"


def fidelity_remaps(kernel: KernelFile, hw: HardwareSpec, limit: int = 10) -> list[tuple[str, str]]:
    """(label, source) pairs: the identity, the recorded best, and the search space's family defaults

    then each family's last instance (the longest strides: deliberately poor orders on one L2).
    Deduplicated by source; at most `limit`."""
    chosen = [("identity", kernel.hook_source)]
    best = BEST_REMAPS / f"{kernel.name}.py"
    if best.exists():
        chosen.append(("best (recorded)", _hook_of(best.read_text(), kernel)))
    space = candidate_space(kernel.hook, hw)
    instances: list[FamilyInstance] = [family[0] for family in space.values()]
    instances += [family[-1] for family in space.values()]
    for instance in instances:
        chosen.append((instance.label, instance.render(kernel.hook)))
    seen, unique = set(), []
    for label, source in chosen:
        if source.strip() not in seen:
            seen.add(source.strip())
            unique.append((label, source))
    return unique[:limit]


def _hook_of(text: str, kernel: KernelFile) -> str:
    """The @triton.jit function of a best-remap file, renamed to the kernel's hook."""
    start = text.index("@triton.jit")
    hook = text[start:]
    name = re.search(r"def\s+(\w+)\s*\(", hook).group(1)
    return re.sub(rf"def\s+{name}\s*\(", f"def {kernel.hook.name}(", hook, count=1)


def measure_kernel(kernel: KernelFile, hw: HardwareSpec, size: str, binary: str, metrics: list[str],
                   raw_dir: Path | None = None, timeout: float = 600.0) -> tuple[MeasuredKernel, list[str]]:
    """Every fidelity remap of `kernel` at `size` under one ncu run; returns it and the dropped metrics."""
    remaps = fidelity_remaps(kernel, hw)
    regex = kernel_name_regex(launched_kernel_names(kernel))
    dropped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="swizzleperf-fidelity-") as tmp:
        files = []
        for i, (_, source) in enumerate(remaps):
            (Path(tmp) / str(i)).mkdir()
            files.append(str(write_candidate(kernel, source, Path(tmp) / str(i))))
        compiled_json = Path(tmp) / "compiled.json"
        child = [sys.executable, "-m", "swizzleperf.lab.fidelity.child", size, str(hw.num_domains), str(compiled_json),
                 *files]
        while True:
            try:
                command = [*ncu_arguments(binary, metrics, regex, from_start=False), *child]
                done = run_tool(command, timeout=timeout, what="ncu", env=child_env())
                break
            except ProfilerError as exc:  # an unknown metric fails the whole run: drop it and go again
                unknown = _UNKNOWN_METRIC.search(str(exc))
                if not unknown or unknown.group(1) not in metrics:
                    raise
                metrics.remove(unknown.group(1))
                dropped.append(unknown.group(1))
        compiled = json.loads(compiled_json.read_text()) if compiled_json.exists() else {}
    if raw_dir is not None:
        raw_dir.mkdir(parents=True, exist_ok=True)
        (raw_dir / f"{kernel.name}-{size}.csv").write_text(done.stdout)
    return kernel_record(kernel, hw, size, done.stdout + "\n" + done.stderr, compiled), dropped


def kernel_record(kernel: KernelFile, hw: HardwareSpec, size: str, ncu_output: str,
                  compiled: dict[str, int] | None = None) -> MeasuredKernel:
    """ncu's output for one kernel's fidelity run -> its record (launch i is remap i)."""
    remaps = fidelity_remaps(kernel, hw)
    result = parse_ncu_csv(ncu_output, kernel_name_regex(launched_kernel_names(kernel)))
    if len(result.launches) != len(remaps):
        raise ProfilerError(f"{kernel.name}: ncu profiled {len(result.launches)} launches for {len(remaps)} remaps")
    measured = [MeasuredRemap(label=label, source=source, metrics=dict(launch.metrics))
                for (label, source), launch in zip(remaps, result.launches)]
    return MeasuredKernel(kernel=kernel.name, kernel_sha256=kernel.sha256, size=size, num_xcds=hw.num_domains,
                          remaps=measured, compiled=compiled or {})


def measure(kernels: list[tuple[KernelFile, str]], hw: HardwareSpec, raw_dir: Path | None = None,
            on_kernel=None, extra_metrics: list[str] = ()) -> Measurement:
    """Measure every (kernel, size); a kernel that fails is recorded with its error, never fatal.

    `on_kernel(measurement)` sees the measurement so far after every kernel (to save it as it grows)."""
    binary = find_tool("ncu", install_dirs())
    if binary is None:
        raise ProfilerError("ncu not found: the fidelity measurement needs NVIDIA Nsight Compute on PATH")
    import torch

    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    result = Measurement(
        device=torch.cuda.get_device_name(0), tool=f"ncu {version[-1] if version else '?'}", cache_control="all",
        versions={n: importlib.metadata.version(n) for n in ("torch", "triton")} | {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}, kernels=[])
    metrics = list(dict.fromkeys([*METRICS, *extra_metrics]))
    for kernel, size in kernels:
        try:
            record, lost = measure_kernel(kernel, hw, size, binary, metrics, raw_dir)
            result.dropped_metrics += lost
        except Exception as exc:  # noqa: BLE001 - one kernel's failure is recorded, the run goes on
            record = MeasuredKernel(kernel=kernel.name, kernel_sha256=kernel.sha256, size=size,
                                    num_xcds=hw.num_domains, remaps=[], error=f"{type(exc).__name__}: {exc}")
        result.kernels.append(record)
        if on_kernel:
            on_kernel(result)
    return result
