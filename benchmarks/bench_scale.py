"""Scale: memory and throughput of capture + simulation on long-context attention, and set sampling's error.

    .venv/bin/python benchmarks/bench_scale.py                  everything below
    .venv/bin/python benchmarks/bench_scale.py memory [--long] attention at 128 heads x 16K (and 8 x 64K)
    .venv/bin/python benchmarks/bench_scale.py sampling         set sampling vs full on the suite
    .venv/bin/python benchmarks/bench_scale.py workers          optimize -n 8 and bench, 1 vs 2 workers

Each measured step (a capture, one simulation) runs in a fresh child process, so its peak resident
memory is its own: `ru_maxrss` of the child and of the capture process it starts. Captures go to the
trace cache (a cached trace is reported as such, with the time of its original capture from its
metadata). The machine may be shared: the load average is printed with the results.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LONG = {"heads": 8, "kv_heads": 8, "seq": 65536}  # 8 heads x 64K, otherwise as mha128_16k


def _peak_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024


def _kernel(size: str):
    """kernels/attention.py, with the 8 x 64K size added in a copy when asked for (sweep's mechanism)."""
    from swizzleperf.kernel.contract import load_kernel
    from swizzleperf.workflows.sweep.shapes import kernel_with_size

    kernel = load_kernel(ROOT / "kernels" / "attention.py")
    if size == "h8_s64k":
        workdir = Path(tempfile.gettempdir()) / "swizzleperf-bench-scale"
        workdir.mkdir(exist_ok=True)
        kernel = kernel_with_size(kernel, size, {**kernel.size("mha128_16k"), **LONG}, workdir)
    return kernel


def _phase(spec: dict) -> dict:
    """One measured step, in this (child) process."""
    from swizzleperf.hardware.presets import PRESETS
    from swizzleperf.kernel.contract import load_kernel
    from swizzleperf.profilers.sim import SimProfiler
    from swizzleperf.sim.capture.trace_capture import cached_trace_path, capture_trace
    from swizzleperf.sim.engine import simulate

    kernel = _kernel(spec["size"]) if spec.get("attention") else load_kernel(spec["kernel"])
    start = time.perf_counter()
    if spec["what"] == "capture":
        cached = cached_trace_path(kernel, spec["size"]).exists()
        trace = capture_trace(kernel, spec["size"])
        return {"seconds": time.perf_counter() - start, "accesses": trace.num_accesses, "cached": cached,
                "file_mb": trace.path.stat().st_size / 2**20, "peak_mb": _peak_mb()}
    if spec["what"] == "sampling":
        return _sampling(kernel, spec["every"])
    profiler = SimProfiler(PRESETS[spec["hardware"]], gpu_occupancy=False)
    trace = profiler.trace(kernel, spec["size"])
    hw, _ = profiler.kernel_hardware(kernel, spec["size"])
    results = {}
    for remap, source in _remaps(kernel, spec.get("remaps", ["identity"])).items():
        t0 = time.perf_counter()
        result = simulate(trace, profiler.program_for_slot(kernel, source, spec["size"]), hw, sample=spec["sample"])
        results[remap] = {"read_hit_pct": result.read_hit_pct, "seconds": time.perf_counter() - t0}
    return {"seconds": time.perf_counter() - start, "accesses": int(result.bounds.trace_accesses),
            "results": results, "peak_mb": _peak_mb()}


def _sampling(kernel, every: int | None) -> dict:
    """Read hit rate of the kernel's own remap, full and sampled (`every`, or the default sample a
    trace past the sampling threshold gets), on mi300x and h100."""
    from swizzleperf.hardware.presets import PRESETS
    from swizzleperf.profilers.sim import SimProfiler
    from swizzleperf.sim.engine import simulate
    from swizzleperf.sim.sampling import choose_sample

    if kernel.persistent:  # its trace is captured with the schedule, per hardware: not one trace to resample
        return {"skipped": "a persistent kernel, captured per schedule"}
    out = {}
    for preset in ("mi300x", "h100"):
        profiler = SimProfiler(PRESETS[preset], gpu_occupancy=False)
        size = kernel.default_size
        trace, (hw, _) = profiler.trace(kernel, size), profiler.kernel_hardware(kernel, size)
        perm = profiler.program_for_slot(kernel, kernel.hook_source, size)
        n = every or choose_sample(hw, 2**62).every
        out[preset] = {"1": simulate(trace, perm, hw, sample=1).read_hit_pct,
                       "sampled": simulate(trace, perm, hw, sample=n).read_hit_pct, "every": n}
    return out


def _remaps(kernel, names: list[str]) -> dict[str, str]:
    from swizzleperf.remaps.families import FamilyInstance

    return {name: kernel.hook_source if name == "identity" else FamilyInstance(name, ()).render(kernel.hook)
            for name in names}


def run_phase(**spec) -> dict:
    proc = subprocess.run([sys.executable, __file__, "_phase", json.dumps(spec)], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_attention_memory(long: bool = False) -> list[dict]:
    """Capture, then full and sampled simulation of block-first (the kernel's order) and head-first,
    at 128 heads x 16K (and 8 heads x 64K with `long`), on the h100 preset."""
    rows = []
    for size in ["mha128_16k"] + (["h8_s64k"] if long else []):
        rows.append({"size": size, "step": "capture", **run_phase(what="capture", size=size, attention=True)})
        if rows[-1].get("cached"):
            rows[-1]["step"] = "capture (cached: opening only)"
        print(_memory_row(rows[-1]), flush=True)
        for sample in (8, 1):
            step = "simulate, full" if sample == 1 else f"simulate, 1 set in {sample}"
            rows.append({"size": size, "step": step, **run_phase(what="sim", size=size, attention=True,
                                                                 hardware="h100", sample=sample,
                                                                 remaps=["identity", "head_first"])})
            print(_memory_row(rows[-1]), flush=True)
    return rows


def _memory_row(row: dict) -> str:
    if "error" in row:
        return f"| {row['size']} | {row['step']} | failed: {row['error']} | | | |"
    rate = "-" if row.get("cached") else f"{row['accesses'] / row['seconds'] / 1e6:.1f} M/s"
    hits = ", ".join(f"{k} {v['read_hit_pct']:.2f}% ({v['seconds']:.0f} s)" for k, v in row.get("results", {}).items())
    return (f"| {row['size']} | {row['step']} | {row['accesses'] / 1e9:.2f} G | {row['seconds']:.0f} s | "
            f"{rate} | {row['peak_mb']:,.0f} MB | {hits} |")


def bench_sampling_error(every: int | None = None) -> float:
    """Read hit rate, full against sampled (1 set in `every`; default: what a trace past the sampling
    threshold gets), for every suite kernel at its default size on mi300x and h100 (the kernel's own
    remap); returns the largest difference in points."""
    worst = 0.0
    print("| kernel | preset | full | sampled | sets simulated | difference (points) |\n|---|---|---|---|---|---|")
    for path in sorted((ROOT / "kernels").glob("*.py")):
        got = run_phase(what="sampling", kernel=str(path), size="", every=every)
        if "skipped" in got:
            print(f"| {path.stem} | | skipped: {got['skipped']} | | | |")
            continue
        if "error" in got:
            print(f"| {path.stem} | | failed: {got['error']} | | | |")
            continue
        for preset, pct in got.items():
            diff = pct["sampled"] - pct["1"]
            worst = max(worst, abs(diff))
            print(f"| {path.stem} | {preset} | {pct['1']:.2f}% | {pct['sampled']:.2f}% | 1 in {pct['every']} | "
                  f"{diff:+.2f} |", flush=True)
    print(f"largest difference: {worst:.2f} points")
    return worst


# --- the executors: 1 and 2 workers (issue 15 item 3) ------------------------------------------------

_TIMING = ("seconds", "started_at", "run_dir", "created_at")  # wall-clock fields (and where a run was written)


def _untimed(value):
    """A record (parsed JSON) without its wall-clock fields, nor the partitioner's time inside a note."""
    import re

    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if not any(t in k for t in _TIMING)}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return re.sub(r"(threads \d+), [\d.]+ s\)", r"\1)", value) if isinstance(value, str) else value


def _optimize(kernel: Path, root: Path, iterations: int, workers: int) -> tuple[float, list]:
    from swizzleperf.workflows.optimize import OptimizeRequest, run_quietly

    request = OptimizeRequest(
        kernel_path=kernel, hardware="mi300x", profiler="sim", proposer="search", iterations=iterations,
        patience=iterations, size="small", seed=0, model=None, api_base=None, llm_mode="aware", llm_timeout=180.0,
        llm_retries=3, library=None, write=False, resume=None, runs_dir=root, stop_at_ceiling=False,
        workers=workers)
    t0 = time.perf_counter()
    run = run_quietly(request)
    return time.perf_counter() - t0, [_untimed(json.loads(line)) for line in run.attempts_path.read_text().splitlines()]


def bench_optimize_workers(kernel: str = "softmax", iterations: int = 8) -> dict[int, float]:
    """Wall time of one `optimize -n 8` (simulator, search, size small, mi300x, batches of 4) with 1 worker
    (in-process) and 2 (a process pool), the trace captured beforehand so both time the loop itself."""
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        root = Path(tmp)
        os.environ["SWIZZLEPERF_CACHE"] = str(root / "cache")
        path = ROOT / "kernels" / f"{kernel}.py"
        _optimize(path, root / "warm-up", 1, 1)  # captures the trace: both timed runs read it from the cache
        times, records = {}, {}
        for workers in (1, 2):
            times[workers], records[workers] = _optimize(path, root / f"w{workers}", iterations, workers)
        print(f"optimize {kernel} -n {iterations} (size small, mi300x, simulator, batches of 4, warm trace cache): "
              f"1 worker {times[1]:.1f} s, 2 workers {times[2]:.1f} s, speedup {times[1] / times[2]:.2f}x; "
              f"attempts identical apart from timings: {records[1] == records[2]}")
        return times


def bench_bench_workers(iterations: int = 4) -> dict[int, float]:
    """Wall time of `bench` over the whole suite with 1 and 2 workers, every kernel run at its size small and
    re-checked at tiny (the default sizes take well over ten minutes a run here), each run from an empty
    trace cache so both pay for the captures."""
    from swizzleperf.loop.executors import make_executor
    from swizzleperf.workflows.bench.suite import BenchRequest, find_kernels, run_bench

    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        root = Path(tmp)
        kernels = []
        for path in find_kernels([]):
            kernels.append(root / path.name)
            kernels[-1].write_text(path.read_text() + '\nDEFAULT_SIZE = "small"\n')
        times, tables = {}, {}
        for workers in (1, 2):
            os.environ["SWIZZLEPERF_CACHE"] = str(root / f"cache{workers}")
            request = BenchRequest(kernels=kernels, hardware="mi300x", profiler="sim", iterations=iterations,
                                   runs_dir=root / f"runs{workers}", out=root / f"out{workers}", other_sizes=["tiny"])
            executor = make_executor(workers)
            t0 = time.perf_counter()
            try:
                report = run_bench(request, executor)
            finally:
                executor.close()
            times[workers] = time.perf_counter() - t0
            tables[workers] = _untimed(report.model_dump(mode="json"))
        print(f"bench, {len(kernels)} kernels at size small (other size: tiny), -n {iterations}, mi300x, simulator, "
              f"cold trace caches: 1 worker {times[1]:.1f} s, 2 workers {times[2]:.1f} s, speedup "
              f"{times[1] / times[2]:.2f}x; results identical apart from timings: {tables[1] == tables[2]}")
        return times


def main(argv: list[str]) -> None:
    if argv[:1] == ["_phase"]:
        print(json.dumps(_phase(json.loads(argv[1]))))
        return
    what = argv[0] if argv else "all"
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if what in ("all", "memory"):
        print("| size | step | line accesses | wall | rate | peak RSS | read hit (h100 preset) |\n"
              "|---|---|---|---|---|---|---|")
        bench_attention_memory(long="--long" in argv or what == "all")
    if what in ("all", "sampling"):
        bench_sampling_error()
    if what in ("all", "workers"):
        bench_optimize_workers()
        bench_bench_workers()
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
