"""The process ncu profiles in a fidelity run: several candidate files of one kernel, one launch each.

    python -m swizzleperf.lab.fidelity.child SIZE NUM_XCDS COMPILED_JSON CANDIDATE.py [CANDIDATE.py ...]

Inputs come from the first candidate's contract (the files differ only in their remap hook).
Every candidate is compiled and launched once before the profiler range, then launched once
inside it, in the order given. Triton's metadata of the first candidate's compiled kernel
(warps, shared memory, registers) goes to COMPILED_JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    import torch

    from swizzleperf.hardware.occupancy import compiled_metadata
    from swizzleperf.kernel.contract import load_kernel

    size_name, num_xcds, compiled_json, *files = argv
    kernels = [load_kernel(f) for f in files]
    size = kernels[0].size(size_name)
    inputs = kernels[0].fn("make_inputs")(size, 0, "cuda")
    outputs = kernels[0].fn("make_outputs")(size, "cuda")
    for kernel in kernels:
        kernel.fn("launch")(inputs, outputs, size, int(num_xcds))
    torch.cuda.synchronize()
    try:
        Path(compiled_json).write_text(json.dumps(compiled_metadata(kernels[0].module)))
    except Exception as exc:  # noqa: BLE001 - metadata is a bonus; the counters are the point
        print(f"fidelity child: no compiled metadata ({type(exc).__name__}: {exc})", file=sys.stderr)
    torch.cuda.profiler.start()
    for kernel in kernels:
        kernel.fn("launch")(inputs, outputs, size, int(num_xcds))
        torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
