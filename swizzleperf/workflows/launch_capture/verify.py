"""The kernel file checked against the user's kernel before capture says done.

The recorder ran the user's own kernel on the inputs the kernel file builds (seed 0) and kept a
fingerprint of what it wrote; here the kernel file, loaded in a confined child, replays each size
under its identity hook on the same device, and must write the same bits. A difference means the
kernel file does not reproduce the kernel (a copied helper that differs, an argument rebuilt wrong),
and is said with the size and the output.
"""

from __future__ import annotations

from pathlib import Path

from swizzleperf.errors import SandboxError, SwizzlePerfError
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.kernel.interpreter_fixes import float_scalars_as_fp32
from swizzleperf.kernel.launches import describe, rebuild
from swizzleperf.kernel.launches.launch_record import LaunchRecord
from swizzleperf.untrusted.sandbox import run_in_child

_TARGET = "swizzleperf.workflows.launch_capture.verify:replay_child"
CHILD_PRELOAD = ("torch", "triton", "triton.language")  # imported once by the fork server (untrusted.forkserver)


def replay_child(payload: dict, workdir: Path) -> dict:
    """Sandbox entry point: each size of the kernel file, seed 0, its own hook; the fingerprints of its outputs."""
    import torch
    device, found = payload["device"], {}
    if device == "cpu":
        float_scalars_as_fp32()
    kernel = load_kernel(payload["kernel_path"])
    for name in payload["sizes"]:
        size = kernel.size(name)
        inputs = kernel.fn("make_inputs")(size, 0, device)
        outputs = kernel.fn("make_outputs")(size, device)
        for t in outputs.values():
            describe.poison(describe.span(t))
        kernel.fn("launch")(inputs, outputs, size, 8)
        if device != "cpu":
            torch.cuda.synchronize()
        found[name] = rebuild.fingerprint(outputs)
    return {"fingerprints": found}


def verify(kernel_path: Path, records: list[LaunchRecord], sizes: list[str], device: str,
           timeout: float = 300.0) -> tuple[int, list[str]]:
    """(sizes compared, differences): the kernel file against the fingerprints the user's kernel left."""
    here = device == "cpu"  # bits compare only on the kind of device the launch was recorded on
    expected = {name: r.replay.outputs for name, r in zip(sizes, records)
                if r.replay is not None and r.device.startswith("cpu") == here}
    if not expected:
        return 0, []
    env = {"TRITON_INTERPRET": "1" if device == "cpu" else "0"}
    try:
        child = run_in_child(_TARGET, {"kernel_path": str(kernel_path.resolve()), "sizes": list(expected), "device": device},
                             timeout, env=env, what="replaying the kernel file")
    except (SandboxError, SwizzlePerfError) as exc:
        return 0, [f"the kernel file could not be replayed: {exc}"]
    got = child.value["fingerprints"]
    problems = [f"size {name}: output {out} differs from what the kernel wrote" for name, want in expected.items()
                for out, digest in want.items() if got.get(name, {}).get(out) != digest]
    return len(expected), problems
