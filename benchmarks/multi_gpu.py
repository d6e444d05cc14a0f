"""Parallel GPU evaluation: the same optimize and bench on one GPU and on every GPU of this host.

    python benchmarks/multi_gpu.py OUT [--only optimize|bench] [--gpus N ...] [--together] [--executor ray|pool]
                                       [--timeout S] [--other-sizes SIZES]
    python benchmarks/multi_gpu.py OUT --audit            the summary of what OUT holds, running nothing

For each command (`optimize kernels/gemm.py --profiler ncu -n 8` and `bench softmax gemm attention
--profiler ncu -n 4`, each with `--ray auto`, or `--workers N` with `--executor pool`) it runs the
request on the first N GPUs for each N of `--gpus` (default: all of them, then 1), each from a cold
Triton cache of its own, into OUT/<command>-<N>gpu/ (its runs, its console log and wall.json with its
wall time). Then it audits what the sides recorded (swizzleperf.lab.audit): which GPUs ran
profiles, whether two profiles ever shared a GPU (from each attempt's device, start and length; bench:
each kernel's), the most that ran at once, the wall-time ratio, and whether the sides recorded the same
attempts apart from timings (proposals, stages and verdicts exactly; ncu's hit rates within its
run-to-run noise, the largest difference printed). The sides can run in separate calls (`--gpus 2`,
then `--gpus 1`) and be audited anywhere later with `--audit`; `--together` runs them at the same time,
each on GPUs of its own (side N on the next N GPUs), so that one call on one host measures all of them
(four GPUs: 2 and 1, with one to spare; each ncu profile flushes and reads only its own GPU).
Needs torch (CUDA), triton, ncu and, for
Ray, `ray` (on a machine that cannot fetch it, carry what benchmarks/gpu_wheels.sh builds). Writes
OUT/summary.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from swizzleperf.lab.audit import bench_records, compare_attempts, optimize_records, peak_concurrency, shared_gpu
from swizzleperf.records.report import RUN_TO_RUN_PTS

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "optimize": ["optimize", "kernels/gemm.py", "--profiler", "ncu", "-n", "8", "--no-library"],
    "bench": ["bench", "softmax", "gemm", "attention", "--profiler", "ncu", "-n", "4"],
}


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


def start(command: str, devices: list[int], options: argparse.Namespace) -> tuple[subprocess.Popen, dict]:
    """One command on `devices`, into OUT/<command>-<N>gpu/; the running process and its wall record."""
    where = options.out / f"{command}-{len(devices)}gpu"
    where.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "swizzleperf", *COMMANDS[command], "--runs-dir", str(where / "runs")]
    args += ["--ray", "auto"] if options.executor == "ray" else ["--workers", str(len(devices))]
    if command == "bench":
        args += ["--out", str(where / "bench")] + (["--other-sizes", options.other_sizes] if options.other_sizes else [])
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(map(str, devices)),
           "TRITON_CACHE_DIR": str(where / "triton-cache")}
    with open(where / "console.log", "w") as log:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    wall = {"gpus": len(devices), "devices": devices, "together": options.together, "command": " ".join(args[3:]),
            "where": str(where), "started": time.perf_counter()}
    return process, wall


def finish(process: subprocess.Popen, wall: dict, deadline: float) -> None:
    """Wait for one side until `deadline` (perf_counter), then write its wall.json."""
    try:
        code: int | str = process.wait(timeout=max(deadline - time.perf_counter(), 0.0))
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        code = f"timed out at {deadline - wall['started']:.0f} s"
    where, started = Path(wall.pop("where")), wall.pop("started")
    wall = {**wall, "seconds": time.perf_counter() - started, "exit": code}
    (where / "wall.json").write_text(json.dumps(wall, indent=1))


def run_sides(command: str, counts: list[int], options: argparse.Namespace) -> None:
    """Each side of `command`: one after the other on the first N GPUs, or (--together) all at once, each
    on GPUs of its own, so that one call on one host measures every side."""
    if not options.together:
        for gpus in counts:
            process, wall = start(command, list(range(gpus)), options)
            finish(process, wall, time.perf_counter() + options.timeout)
        return
    running, first = [], 0
    for gpus in counts:
        running.append(start(command, list(range(first, first + gpus)), options))
        first += gpus
    deadline = time.perf_counter() + options.timeout
    for process, wall in running:
        finish(process, wall, deadline)


def sides(out: Path, command: str) -> list[dict]:
    """The sides of `command` that OUT holds, most GPUs first, each with its records (or why unreadable)."""
    found = []
    for where in out.glob(f"{command}-*gpu"):
        if not (where / "wall.json").is_file():
            continue
        side = json.loads((where / "wall.json").read_text())
        try:
            side["runs"], side["spans"] = (bench_records(where / "bench" / "bench.json") if command == "bench"
                                           else optimize_records(where / "runs"))
        except (OSError, ValueError) as exc:
            side["unreadable"] = f"{type(exc).__name__}: {exc}"
        found.append(side)
    return sorted(found, key=lambda side: -side["gpus"])


def audit(out: Path, command: str) -> list[str]:
    """The summary's lines for one command: times, GPUs, clashes, and the sides' attempts compared."""
    found = sides(out, command)
    if not found:
        return []
    lines = [f"## {command}: `swizzleperf {found[0]['command']}`", "",
             "| GPUs | wall time | exit | GPUs that ran profiles | most at once | two on one GPU |", "|---|---|---|---|---|---|"]
    for side in found:
        if "unreadable" in side:
            lines.append(f"| {side['gpus']} | {side['seconds']:.1f} s | {side['exit']} | records unreadable: "
                         f"{side['unreadable']} | | |")
            continue
        spans = side["spans"]
        clashes = shared_gpu(spans)
        lines.append(f"| {side['gpus']} | {side['seconds']:.1f} s | {side['exit']} | "
                     f"{', '.join(sorted({s.gpu for s in spans})) or 'none recorded'} | {peak_concurrency(spans)} | "
                     f"{len(clashes)}" + "".join(f"; {a.what} and {b.what} on {a.gpu}" for a, b in clashes[:3]) + " |")
    lines.append("")
    readable = [side for side in found if "unreadable" not in side]
    if len(readable) >= 2:
        many, one = readable[0], readable[-1]
        finished = all(side["exit"] == 0 for side in (many, one))
        lines += [f"Wall time, {one['gpus']} GPU(s) / {many['gpus']} GPUs: {one['seconds'] / many['seconds']:.2f}x"
                  + ("" if finished else " (not a speed-up: a side did not finish)")
                  + ("; the sides ran at the same time, on GPUs "
                     + " and ".join(",".join(map(str, side["devices"])) for side in (many, one))
                     if many.get("together") else "") + ".", ""]
        for a, b in zip(many["runs"], one["runs"]):
            result = compare_attempts(a.load_history().attempts, b.load_history().attempts, RUN_TO_RUN_PTS["ncu"])
            verdict = "identical apart from timings" if result.identical else "; ".join(result.differences[:4])
            lines.append(f"- {a.record.kernel.name}: {result.compared} attempts compared: {verdict} (measured hit "
                         f"rates at most {result.max_hit_difference_pts:.2f} points apart)")
    return lines + [""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", choices=sorted(COMMANDS), action="append")
    parser.add_argument("--gpus", type=int, action="append", help="run on the first N GPUs (default: all, then 1)")
    parser.add_argument("--executor", choices=["ray", "pool"], default="ray")
    parser.add_argument("--together", action="store_true",
                        help="run the sides at the same time on disjoint GPUs (default: N-1 GPUs and 1)")
    parser.add_argument("--timeout", type=float, default=580.0, help="seconds per run")
    parser.add_argument("--other-sizes", help="bench's --other-sizes (default: every other declared size)")
    parser.add_argument("--audit", action="store_true", help="run nothing: summarise what OUT holds")
    options = parser.parse_args()
    commands = options.only or list(COMMANDS)
    if options.audit and not options.out.is_dir():
        print(f"{options.out}: no such directory (it is what a run without --audit writes)", file=sys.stderr)
        return 2
    if not options.audit:
        available = gpu_count()
        counts = options.gpus or ([available - 1, 1] if options.together else [available, 1])
        needed = sum(counts) if options.together else max(counts)
        if available < 2 or needed > available:
            print(f"this host has {available} GPU(s): the comparison needs two or more, and {needed} for "
                  f"--gpus {counts}" + (" side by side" if options.together else ""), file=sys.stderr)
            return 2
        for command in commands:
            run_sides(command, counts, options)
    summary = ["# Parallel GPU evaluation", ""] + [line for command in commands for line in audit(options.out, command)]
    (options.out / "summary.md").write_text("\n".join(summary))
    print("\n".join(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
