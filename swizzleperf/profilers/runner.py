"""The measurement process: one kernel file, one size, N launches on the GPU.

Every real-hardware number (rocprofv3 counters, ncu metrics, timings) comes from this
process, so a profiler only has to wrap one command line:

    python -m swizzleperf.profilers.runner KERNEL_FILE SIZE [--num-xcds N] [--warmup K]
        [--iters K] [--l2 flushed|warm] [--profiler-range] [--times-json PATH]

KERNEL_FILE is a kernel file with the candidate hook already spliced in (the parent writes
it to a private directory). The child builds inputs and outputs through the kernel
contract on device "cuda" (ROCm builds of torch use the same name), launches `warmup`
times, then `iters` measured times, and synchronises.

Rules that the parsers rely on:
- each measured launch is one dispatch of the kernel (the contract: one 1D launch), and the
  measured launches are the *last* `iters` dispatches of it; warm-up and autotuning
  dispatches come first, so a parser that keeps the last `iters` dispatches drops them;
- with `--l2 flushed` a 256 MB buffer is zeroed before every measured launch, as
  triton.testing.do_bench does, so every measured dispatch starts from a cold L2 (the
  zeroing kernel is a separate dispatch that the kernel-name filters drop);
- with `--profiler-range` the measured launches run between cudaProfilerStart/Stop, so
  `ncu --profile-from-start off` profiles them and nothing else.

The second half of this module is the parent side: the command line, the temporary
candidate file, and running a tool around the child with a time limit.
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Literal, Sequence

from pydantic import BaseModel, ConfigDict

from swizzleperf.errors import ProfilerError
from swizzleperf.kernel.contract import KernelFile

L2State = Literal["flushed", "warm"]

FLUSH_BYTES = 256 * 1024 * 1024  # triton.testing.do_bench's cache buffer; also covers MI300X's 256 MB MALL
EXIT_NO_GPU = 3


class RunnerTimes(BaseModel):
    """What the child writes for the timer: one event-timed sample per measured launch."""

    model_config = ConfigDict(extra="forbid")
    times_ms: list[float]
    l2_state: L2State
    warmup: int
    num_xcds: int
    device: str


# --- child side ------------------------------------------------------------------------------

def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m swizzleperf.profilers.runner", description=__doc__.split("\n")[0])
    parser.add_argument("kernel_file", type=Path)
    parser.add_argument("size")
    parser.add_argument("--num-xcds", type=int, default=None,
                        help="value of the kernel's NUM_XCDS constexpr (default: the local GPU's XCD count)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--l2", choices=("flushed", "warm"), default="flushed")
    parser.add_argument("--profiler-range", action="store_true",
                        help="run the measured launches between cudaProfilerStart/Stop")
    parser.add_argument("--times-json", type=Path, default=None, help="write per-launch event times here")
    args = parser.parse_args(argv)
    if args.iters < 1 or args.warmup < 0:
        parser.error("--iters must be >= 1 and --warmup >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    import torch

    from swizzleperf.hardware.detect import detect
    from swizzleperf.kernel.contract import load_kernel

    if not torch.cuda.is_available():
        print("swizzleperf runner: torch sees no CUDA or ROCm GPU; the runner measures on a GPU, "
              "run it on a machine with one (or use the simulator profiler)", file=sys.stderr)
        return EXIT_NO_GPU
    kernel = load_kernel(args.kernel_file)
    size = kernel.size(args.size)
    num_xcds = args.num_xcds
    if num_xcds is None:
        spec = detect()
        num_xcds = spec.num_domains if spec is not None else 1

    inputs = kernel.fn("make_inputs")(size, 0, "cuda")
    outputs = kernel.fn("make_outputs")(size, "cuda")

    def launch() -> None:
        kernel.fn("launch")(inputs, outputs, size, num_xcds)

    for _ in range(args.warmup):  # compilation, autotuning, first-touch of the inputs
        launch()
    torch.cuda.synchronize()

    times_ms = _timed_launches(launch, args)
    if args.times_json is not None:
        times = RunnerTimes(times_ms=times_ms, l2_state=args.l2, warmup=args.warmup, num_xcds=num_xcds,
                            device=torch.cuda.get_device_name(0))
        args.times_json.write_text(times.model_dump_json())
    return 0


def _timed_launches(launch, args) -> list[float]:
    """args.iters launches, each timed with CUDA events (the L2 flushed before each when asked), inside the
    profiler range when asked; their times in ms."""
    import torch

    flush_buffer = None
    if args.l2 == "flushed":
        l2_bytes = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0))
        flush_buffer = torch.empty(max(FLUSH_BYTES, 4 * l2_bytes) // 4, dtype=torch.int32, device="cuda")
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.iters)]
    if args.profiler_range:
        torch.cuda.profiler.start()
    for start, end in zip(starts, ends):
        if flush_buffer is not None:
            flush_buffer.zero_()  # outside the timed region, as in do_bench
        start.record()
        launch()
        end.record()
    torch.cuda.synchronize()
    if args.profiler_range:
        torch.cuda.profiler.stop()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


# --- parent side -----------------------------------------------------------------------------

def runner_command(candidate: Path, size: str, *, num_xcds: int | None, warmup: int, iters: int,
                   l2: L2State, profiler_range: bool = False, times_json: Path | None = None) -> list[str]:
    """The child's command line, with this interpreter (so the child sees the same packages)."""
    cmd = [sys.executable, "-m", "swizzleperf.profilers.runner", str(candidate), size]
    if num_xcds is not None:
        cmd += ["--num-xcds", str(num_xcds)]
    cmd += ["--warmup", str(warmup), "--iters", str(iters), "--l2", l2]
    if profiler_range:
        cmd.append("--profiler-range")
    if times_json is not None:
        cmd += ["--times-json", str(times_json)]
    return cmd


def write_candidate(kernel: KernelFile, remap_source: str, directory: Path) -> Path:
    """The kernel file with `remap_source` as its hook, under the kernel's own file name."""
    path = directory / kernel.path.name
    path.write_text(kernel.with_hook(remap_source))
    return path


def expected_programs(kernel: KernelFile, size: str) -> int | None:
    """The programs a launch of this kernel has: the grid's, or None for a persistent kernel (its launch has
    as many as fit the GPU, not one per tile), so a profiler's launch-size sanity check is skipped."""
    return None if kernel.persistent else math.prod(kernel.grid(size))


def child_env() -> dict[str, str]:
    """The environment for a measuring child: never the CPU interpreter, whatever the parent uses."""
    return {**os.environ, "TRITON_INTERPRET": "0"}


def _is_triton_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target) in ("triton.jit", "jit")


def launched_kernel_names(kernel: KernelFile) -> tuple[str, ...]:
    """Names of the @triton.jit kernels that (directly or through helpers) call the remap hook.

    Profilers see a Triton kernel under its Python function name, so these names are what the
    kernel-name filters match. A jit function called by another jit function is a helper
    (inlined), not a launched kernel.
    """
    tree = ast.parse(kernel.source)
    jitted = {node.name: node for node in tree.body
              if isinstance(node, ast.FunctionDef) and any(_is_triton_jit(d) for d in node.decorator_list)}
    calls = {name: {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                    and c.func.id in jitted and c.func.id != name}
             for name, node in jitted.items()}
    hook = kernel.hook.name
    reaching = {hook}  # functions whose body ends up running the hook
    while grown := {name for name, callees in calls.items() if name not in reaching and callees & reaching}:
        reaching |= grown
    called = set().union(*calls.values())
    names = tuple(name for name in jitted if name in reaching and name != hook and name not in called)
    if not names:
        raise ProfilerError(f"{kernel.path.name}: no @triton.jit kernel calls the remap hook {hook}(), so there is "
                            f"no kernel name to profile; call the hook at the top of the kernel")
    return names


def kernel_name_regex(names: Sequence[str], suffix: str = "") -> str:
    """An anchored regex matching exactly these kernel names (plain groups: every tool's engine reads them)."""
    return "^(" + "|".join(re.escape(n) for n in names) + ")" + suffix + "$"


def find_tool(binary: str, install_dirs: Sequence[str | None] = ()) -> str | None:
    """Absolute path of a profiler binary: an explicit path, PATH, then the usual install directories."""
    if os.sep in binary:
        return binary if os.access(binary, os.X_OK) and Path(binary).is_file() else None
    found = shutil.which(binary)
    if found:
        return found
    for directory in install_dirs:
        if directory and os.access(candidate := os.path.join(directory, binary), os.X_OK):
            return candidate
    return None


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_tool(cmd: Sequence[str], *, timeout: float, what: str, env: dict[str, str] | None = None,
             hints: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a profiler (or the bare runner) and return its output; any failure is a ProfilerError.

    The message always carries the exact command line, so it can be pasted into a shell, and
    the tail of what the tool printed. `hints` maps a substring of the output to the fix.
    """
    line = shlex.join(cmd)
    try:
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, start_new_session=True)
    except OSError as exc:
        raise ProfilerError(f"cannot start {what}: {exc.strerror or exc}\n  command: {line}") from exc
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # our own session: the tool and the runner under it
        proc.communicate()
        raise ProfilerError(f"{what} ran past its time limit of {timeout:g} s and was killed; raise the "
                            f"profiler's timeout or profile a smaller size\n  command: {line}") from None
    if proc.returncode != 0:
        how = f"was killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exited with {proc.returncode}"
        output = stderr + "\n" + stdout
        advice = [fix for needle, fix in (hints or {}).items() if needle in output]
        tail = _tail(stderr) or _tail(stdout)
        raise ProfilerError(f"{what} {how}\n  command: {line}" + (f"\n{tail}" if tail else "")
                            + "".join(f"\n  fix: {a}" for a in advice))
    return subprocess.CompletedProcess(list(cmd), proc.returncode, stdout, stderr)


if __name__ == "__main__":
    sys.exit(main())
