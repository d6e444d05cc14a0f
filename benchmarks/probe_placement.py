"""Record where an NVIDIA GPU's block scheduler runs each program of real kernels (needs a GPU).

The kernel's own remap hook is wrapped by one that stores %smid and %globaltimer of every
program before returning the kernel's remap, so the kernel runs unchanged (same registers,
shared memory and occupancy) and the record shows the scheduler's placement in steady state,
not only the first wave. Written to OUT.json: per kernel, the SM and start time (ns, the
timer's resolution is coarse) of each launch slot.

    python benchmarks/probe_placement.py OUT.json kernels/softmax.py:medium kernels/gemm.py:medium ...
    python benchmarks/probe_placement.py OUT.json --remaps kernels/spmv.py   # under each remap fidelity.py measures
    python benchmarks/probe_placement.py --summary RECORD.json[.gz] [--gpu h100]

--summary (no GPU needed) prints, after each kernel's first wave, how often programs 1, 2 and 4 apart
in launch order ran on one SM and on one L2 side (the sides from the measured layout), and the mean
length of the runs of consecutive programs on one side: 2.0 if the scheduler picked sides at random.
The recorded H100 runs are `tests/fixtures/probes/placement-h100.json.gz` (every suite kernel's own
launch; spmv cut to its first 32768 programs) and `placement-remaps-h100.json.gz` (the seven kernels
whose remaps move the hit rate, under each remap fidelity.py measures, every program; `fidelity.py compare
--placement` simulates them); `placement-starts-h200.json.gz` keeps the start times (an H200: stencil2d
under its ten remaps, elementwise and gemm under two), which --summary turns into how often a program started
before the ones launched 1, 16 and 256 ahead of it.
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

WRAPPER = '''
@triton.jit
def {name}({params}):
    slot = {pid}.to(tl.int64)
    tl.inline_asm_elementwise(
        "{{ .reg .u32 s; .reg .u64 t; mov.u32 s, %smid; mov.u64 t, %globaltimer; "
        "st.global.u32 [$1], s; st.global.u64 [$2], t; mov.u32 $0, s; }}",
        "=r,l,l", [{smids} + slot * 4, {starts} + slot * 8], dtype=tl.int32, is_pure=False, pack=1)
    return _probe_inner({args})
'''


@dataclass(frozen=True)
class SteadyState:
    """Where consecutive programs ran once the first wave was placed."""

    first_wave: int            # programs of the first wave (every SM the same count), left out
    same_sm: float             # P(programs 1 apart ran on one SM)
    same_side: tuple[float, float, float]  # P(one L2 side) for programs 1, 2 and 4 apart
    side_run: float            # mean run of consecutive programs on one side (2.0 at random)
    walk: float | None = None  # P(the next program's SM is 1-8 SMs further on in the scheduler's SM order)
    started_before: tuple[float, float, float] | None = None  # P(a program started before the one 1 / 16 / 256
    #                                                           launched ahead of it), from recorded start times


def first_wave(smids: np.ndarray, num_sms: int, most: int = 64) -> int:
    """The shortest prefix of k * num_sms programs (k <= most) in which every SM ran exactly k programs (0 if
    none): the first wave fills every SM to its occupancy, visiting some SMs earlier than others."""
    for k in range(1, min(most, len(smids) // num_sms) + 1):
        if (np.bincount(smids[:k * num_sms], minlength=num_sms) == k).all():
            return k * num_sms
    return 0


def steady_state(smids, sides, order=None, start_ns=None) -> SteadyState:
    """`smids` of successive programs and each SM's L2 side -> the statistics after the first wave; with `order`
    (the SMs in the order the first wave fills them), how often the next program went a few SMs further on:
    the scheduler walking its SM order from where it last gave a program (8 / num_sms if SMs were random); with
    `start_ns`, how often a program started before one launched ahead of it (ties, at the timer's 32 ns, are
    not counted)."""
    smids, sides = np.asarray(smids), np.asarray(sides)
    skip = first_wave(smids, len(sides))
    rest, side = smids[skip:], sides[smids[skip:]]
    same = tuple(float(np.mean(side[:-d] == side[d:])) for d in (1, 2, 4))
    changes = np.flatnonzero(side[1:] != side[:-1])
    runs = np.diff(np.concatenate([[-1], changes, [len(side) - 1]]))
    walk = None
    if order is not None:
        rank = np.empty(len(sides), dtype=np.int64)
        rank[np.asarray(order)] = np.arange(len(sides))
        step = (rank[rest[1:]] - rank[rest[:-1]]) % len(sides)
        walk = float(np.mean((step >= 1) & (step <= 8)))
    started_before = None
    if start_ns is not None:
        starts = np.asarray(start_ns)[skip:]
        started_before = tuple(float(np.mean(starts[d:] < starts[:-d])) for d in (1, 16, 256))
    return SteadyState(first_wave=skip, same_sm=float(np.mean(rest[:-1] == rest[1:])), same_side=same,
                       side_run=float(runs.mean()), walk=walk, started_before=started_before)


def summary(path: str, gpu: str = "h100") -> int:
    from swizzleperf.hardware.layouts.measured import first_wave_sequence, sm_partition

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        record = json.load(f)
    sides = sm_partition(gpu)
    order = list(dict.fromkeys(first_wave_sequence(gpu)))
    print(f"{record['device']}: after the first wave, programs 1 / 2 / 4 apart on one L2 side, on one SM, and the mean "
          f"run on one side (2.0 at random); how often the next program ran 1-8 SMs further on in the scheduler's SM "
          f"order ({8 / len(sides):.2f} at random); where start times were recorded, how often a program started "
          f"before the one launched 1 / 16 / 256 ahead of it")
    for kernel in record["kernels"]:
        state = steady_state(kernel["smid"], sides, order, kernel.get("start_ns"))
        remap = kernel.get("remap", "")[:24]
        started = "" if state.started_before is None else \
            f"  started before {' / '.join(f'{p:.3f}' for p in state.started_before)}"
        print(f"  {kernel['kernel']:14s} {kernel['size']:9s} {remap:24s} first wave {state.first_wave:5d}  same side "
              f"{' / '.join(f'{p:.2f}' for p in state.same_side)}  same SM {state.same_sm:.3f}  side run "
              f"{state.side_run:.2f}  next 1-8 SMs on {state.walk:.2f}{started}")
    return 0


def instrumented_file(kernel, smids: torch.Tensor, starts: torch.Tensor, workdir: Path,
                      remap: str | None = None) -> Path:
    """The kernel file with its hook (or `remap`, a hook of the same name) renamed `_probe_inner` and a recording
    hook of the same signature."""
    hook = kernel.hook
    inner = (remap or kernel.hook_source).replace(f"def {hook.name}(", "def _probe_inner(", 1)
    wrapper = WRAPPER.format(name=hook.name, params=hook.render()[len(f"def {hook.name}("):-1], pid=hook.pid,
                             smids=smids.data_ptr(), starts=starts.data_ptr(), args=", ".join(hook.params))
    path = workdir / kernel.path.name
    path.write_text(kernel.with_hook(inner + wrapper))
    return path


def placements(spec: str, workdir: Path, remaps: bool) -> list[dict]:
    """The kernel's own launch, or with `remaps` each remap a fidelity run measures (fidelity_remaps)."""
    from swizzleperf.hardware.presets import PRESETS
    from swizzleperf.kernel.contract import load_kernel
    from swizzleperf.lab.fidelity.measure import fidelity_remaps

    path, _, size_name = spec.partition(":")
    kernel = load_kernel(path)
    chosen = fidelity_remaps(kernel, PRESETS["h100"]) if remaps else [("identity", None)]
    return [{**placement(kernel, size_name or kernel.default_size, workdir, source), "remap": label,
             "source": source or kernel.hook_source} for label, source in chosen]


def placement(kernel, size_name: str, workdir: Path, remap: str | None = None) -> dict:
    import torch

    from swizzleperf.kernel.contract import load_kernel

    slots = 1
    for extent in kernel.grid(size_name):
        slots *= extent
    smids = torch.full((slots,), -1, dtype=torch.int32, device="cuda")
    starts = torch.zeros(slots, dtype=torch.int64, device="cuda")
    probe = load_kernel(instrumented_file(kernel, smids, starts, workdir, remap))
    size = probe.size(size_name)
    inputs = probe.fn("make_inputs")(size, 0, "cuda")
    outputs = probe.fn("make_outputs")(size, "cuda")
    for _ in range(2):  # the first launch compiles; the second is recorded
        smids.fill_(-1)
        probe.fn("launch")(inputs, outputs, size, 1)
        torch.cuda.synchronize()
    return {"kernel": kernel.name, "size": size_name, "smid": smids.tolist(),
            "start_ns": (starts - starts.min()).tolist()}


def main(out: str, specs: list[str]) -> int:
    import torch

    props = torch.cuda.get_device_properties(0)
    remaps = "--remaps" in specs
    with tempfile.TemporaryDirectory() as tmp:
        records = [r for spec in specs if spec != "--remaps" for r in placements(spec, Path(tmp), remaps)]
    with open(out, "w") as f:
        json.dump({"device": props.name, "num_sms": props.multi_processor_count, "kernels": records}, f)
    for r in records:
        missing = sum(s < 0 for s in r["smid"])
        print(f"{r['kernel']} ({r['size']}, {r['remap']}): {len(r['smid'])} programs, {missing} unrecorded; "
              f"first 24 SMs {r['smid'][:24]}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    if sys.argv[1] == "--summary":
        sys.exit(summary(sys.argv[2], sys.argv[4] if sys.argv[3:4] == ["--gpu"] else "h100"))
    sys.exit(main(sys.argv[1], sys.argv[2:]))
