"""Record where an NVIDIA GPU's block scheduler runs each program of real kernels (needs a GPU).

The kernel's own remap hook is wrapped by one that stores %smid and %globaltimer of every
program before returning the kernel's remap, so the kernel runs unchanged (same registers,
shared memory and occupancy) and the record shows the scheduler's placement in steady state,
not only the first wave. Written to OUT.json: per kernel, the SM and start time (ns, the
timer's resolution is coarse) of each launch slot.

    python benchmarks/probe_placement.py OUT.json kernels/softmax.py:medium kernels/gemm.py:medium ...
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

from swizzleperf.kernel import load_kernel

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


def instrumented_file(kernel, smids: torch.Tensor, starts: torch.Tensor, workdir: Path) -> Path:
    """The kernel file with its hook renamed `_probe_inner` and a recording hook of the same signature."""
    hook = kernel.hook
    inner = kernel.hook_source.replace(f"def {hook.name}(", "def _probe_inner(", 1)
    wrapper = WRAPPER.format(name=hook.name, params=hook.render()[len(f"def {hook.name}("):-1], pid=hook.pid,
                             smids=smids.data_ptr(), starts=starts.data_ptr(), args=", ".join(hook.params))
    path = workdir / kernel.path.name
    path.write_text(kernel.with_hook(inner + wrapper))
    return path


def placement(spec: str, workdir: Path) -> dict:
    path, _, size_name = spec.partition(":")
    kernel = load_kernel(path)
    size_name = size_name or kernel.default_size
    slots = 1
    for extent in kernel.grid(size_name):
        slots *= extent
    smids = torch.full((slots,), -1, dtype=torch.int32, device="cuda")
    starts = torch.zeros(slots, dtype=torch.int64, device="cuda")
    probe = load_kernel(instrumented_file(kernel, smids, starts, workdir))
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
    props = torch.cuda.get_device_properties(0)
    with tempfile.TemporaryDirectory() as tmp:
        records = [placement(spec, Path(tmp)) for spec in specs]
    with open(out, "w") as f:
        json.dump({"device": props.name, "num_sms": props.multi_processor_count, "kernels": records}, f)
    for r in records:
        missing = sum(s < 0 for s in r["smid"])
        print(f"{r['kernel']} ({r['size']}): {len(r['smid'])} programs, {missing} unrecorded; first 24 SMs "
              f"{r['smid'][:24]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
