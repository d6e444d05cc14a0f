"""A recorded launch replayed on seeded inputs: the same tensors in the user's process and in the kernel file.

The recorder runs the user's own kernel once more on inputs rebuilt from the record (seed 0) and
keeps a fingerprint of what it wrote; the kernel file, replaying the same record under its identity
hook, must write the same bits. `make_tensor` is written into every kernel file as its `_tensor`
(from this source, so the two cannot drift apart), and `tensor_spec` chooses what of a recorded
tensor the rebuild uses. Standard library and torch only: this runs inside the user's process.
"""

from __future__ import annotations

import hashlib
import inspect

ROLES_GENERATED = ("input", "in_place")  # the roles make_inputs rebuilds, in parameter order, from one generator


def role(param: dict) -> str:
    """A recorded tensor's role: "in_place" (written after reading it), "output" (written) or "input"."""
    return "in_place" if param.get("in_place") else "output" if param.get("written") else "input"


def tensor_spec(param: dict) -> dict:
    """What the rebuild of a recorded tensor uses: its layout, and its values, zeros or value range."""
    spec = {k: param[k] for k in ("dtype", "shape", "strides", "offset", "extent")}
    if param.get("values") is not None:
        spec["values"] = param["values"]
    elif param.get("zeros") and param["dtype"] != "bool":
        spec["zeros"] = True
    elif param.get("range") is not None:
        spec.update(range=param["range"], sorted=bool(param.get("sorted")))
    return spec


def make_tensor(spec, generator, device):
    import torch
    dtype = getattr(torch, spec["dtype"])
    n = spec["extent"]
    if "values" in spec:
        flat = torch.tensor([0] * spec["offset"] + spec["values"], dtype=dtype)
    elif spec.get("zeros"):
        flat = torch.zeros(n, dtype=dtype)
    elif dtype.is_floating_point:
        flat = torch.randn(n, generator=generator).to(dtype)
    elif dtype == torch.bool:
        flat = torch.randint(0, 2, (n,), generator=generator).bool()
    else:
        low, high = spec["range"]
        flat = torch.randint(low, high + 1, (n,), generator=generator).to(dtype)
        flat = flat.sort().values if spec["sorted"] else flat
    return flat.to(device).as_strided(spec["shape"], spec["strides"], spec["offset"])


def template_source() -> str:
    """`make_tensor` as the kernel file's `_tensor`."""
    return inspect.getsource(make_tensor).replace("def make_tensor(", "def _tensor(", 1)


def seeded_arguments(params: list[dict], seed: int, device) -> dict:
    """Every argument as the kernel file's make_inputs/make_outputs/launch build them for `seed`: generated
    inputs, poisoned outputs, in-place tensors seeded; scalars as recorded."""
    import torch

    from swizzleperf.kernel.launches.describe import poison
    generator = torch.Generator().manual_seed(seed)
    args = {}
    for p in params:
        if p["kind"] != "tensor":
            args[p["name"]] = _value(p)
            continue
        if role(p) in ROLES_GENERATED:
            args[p["name"]] = make_tensor(tensor_spec(p), generator, device)
        else:
            spec = tensor_spec(p)
            out = torch.empty(spec["extent"], dtype=getattr(torch, spec["dtype"]), device=device)
            poison(out)
            args[p["name"]] = out.as_strided(spec["shape"], spec["strides"], spec["offset"])
    return args


def _value(param: dict):
    """A recorded scalar or constexpr as the launch passes it."""
    kind, value = param["kind"], param["value"]
    if kind == "triton_dtype":
        import triton.language as tl
        return getattr(tl, value)
    if kind == "torch_dtype":
        import torch
        return getattr(torch, value)
    return float(value) if kind == "float" and isinstance(value, str) else value


def fingerprint(tensors: dict) -> dict[str, str]:
    """sha256 of each tensor's storage span, by its bits."""
    from swizzleperf.kernel.launches.describe import bits, span
    return {name: hashlib.sha256(bits(span(t)).cpu().numpy().tobytes()).hexdigest()[:16]
            for name, t in tensors.items()}
