"""A launch's arguments as JSON: tensors by layout (and small integer tensors by value), the rest by value.

A tensor is described by what a replay needs to rebuild it: dtype, shape, strides, storage
offset and the storage extent the view reaches. Integer tensors steer addresses (block tables,
offsets, indices), so up to a limit their values are kept; past it, the rule to regenerate them
(their range, and whether they are sorted). Which tensors a launch wrote is found by comparing
their bits before and after it.
"""

from __future__ import annotations

import math

from swizzleperf.kernel.launches import closure

_SCALARS = (bool, int, float, str, type(None))


def is_tensor(value) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "data_ptr") and hasattr(value, "stride")


def extent(t) -> int:
    """Elements of storage the view reaches: offset + the farthest element + 1 (0 for an empty view)."""
    if t.numel() == 0:
        return 0
    return t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1


def span(t):
    """The view's storage region [offset, extent) as a flat tensor: what the replay rebuilds (padding too)."""
    return t.as_strided((extent(t) - t.storage_offset(),), (1,), t.storage_offset())


def copy_with_layout(t, content, dtype=None):
    """A new tensor with `t`'s shape, strides and offset (and dtype, unless given) whose storage span holds
    `content`."""
    base = t.new_empty(extent(t), dtype=dtype or t.dtype)
    base[t.storage_offset():] = content
    return base.as_strided(t.shape, t.stride(), t.storage_offset())


def tensor(t, before, max_values: int) -> dict:
    """`t`'s layout, and for an integer tensor its values before the launch (`before`: its span then)."""
    import torch
    out = {"kind": "tensor", "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
           "strides": list(t.stride()), "offset": t.storage_offset(), "extent": extent(t), "device": str(t.device)}
    if t.dtype.is_floating_point or t.dtype.is_complex or t.numel() == 0:
        return out
    flat = before.detach().cpu().to(dtype=torch.int64)
    out["range"] = [int(flat.min()), int(flat.max())]
    out["sorted"] = bool((flat[1:] >= flat[:-1]).all()) if flat.numel() > 1 else True
    if flat.numel() <= max_values:
        out["values"] = flat.tolist()
    return out


def scalar(value) -> dict:
    if isinstance(value, float) and not math.isfinite(value):
        return {"kind": "float", "value": repr(value)}
    kind = {bool: "bool", int: "int", float: "float", str: "str", type(None): "none"}[type(value)]
    return {"kind": kind, "value": value}


def param(name: str, value, before, constexpr: bool, max_values: int) -> dict:
    """One argument: a tensor, a scalar, a constexpr (its value), or an object a replay cannot rebuild."""
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        value = value.value
    if is_tensor(value):
        out = tensor(value, before, max_values)
    elif type(value) in _SCALARS:
        out = scalar(value)
    elif (name_in_tl := closure.language_name(value)) is not None:  # a triton dtype passed as a constexpr
        out = {"kind": "triton_dtype", "value": name_in_tl}
    elif type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        out = {"kind": "torch_dtype", "value": str(value).removeprefix("torch.")}
    else:
        out = {"kind": "object", "value": repr(value)[:200], "type": type(value).__qualname__}
    return {"name": name, "constexpr": constexpr, **out}


def bits(t):
    """The tensor's bits as integers (so NaN equals NaN and -0.0 differs from 0.0)."""
    import torch
    c = t.detach().contiguous()
    return c.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[c.element_size()])


def same_bits(a, b) -> bool:
    import torch
    return torch.equal(bits(a), bits(b))


def poison(t) -> None:
    """Fill with values a kernel does not compute (NaN; an integer type's minimum)."""
    import torch
    if t.dtype.is_floating_point and t.element_size() == 1:  # fp8: 0xFF is NaN in e4m3fn and e5m2, and fill_
        t.view(torch.uint8).fill_(0xFF)                       # has no fp8 kernel on CUDA
    elif t.dtype.is_floating_point or t.dtype.is_complex:
        t.fill_(float("nan"))
    elif t.dtype != torch.bool:
        t.fill_(torch.iinfo(t.dtype).min)
