"""The batched language: `tensor.__bool__`/`__index__` that agree across programs or diverge, and
`tl.reduce`/`tl.associative_scan` over every axis but the trailing program axis (see batched_ops.py);
and the interpreter's `_patch_lang`, run once per language module."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from swizzleperf.sim.batched_values import Diverged, NeedsReference, for_programs, unforced

if TYPE_CHECKING:
    from swizzleperf.sim.interp_batched import BatchedCapture


def _per_program_scalar(data: np.ndarray) -> np.ndarray | None:
    """One value per program (length P or 1), or None when each program holds a block."""
    return data.reshape(-1) if data.size == data.shape[-1] else None


def _tensor_bool(self) -> bool:
    values = _per_program_scalar(self.handle.data)
    if values is None:
        return True  # the interpreter treats blocks as truthy; so do we, program by program
    first = bool(values[0])
    if values.size == 1 or (values.astype(bool) == first).all():
        return first
    raise Diverged(values.astype(bool))


def _tensor_index(self) -> int:
    values = _per_program_scalar(self.handle.data)
    if values is None:
        raise TypeError("only single-element tensors can be used as Python integers")
    if values.size == 1 or (values == values[0]).all():
        return int(values[0])
    raise Diverged(values)


def language_patches(engine: "BatchedCapture", interp):
    """Replacements for interpreter._patch_lang_tensor and _patch_reduce_scan."""
    tl, TH = interp.tl, interp.TensorHandle

    def mapped(handle, fn: Callable, dtype=None):
        """A handle whose data is fn(handle.data), lazy if `handle` is."""
        def compute():
            return TH(fn(handle.data), dtype if dtype is not None else handle.dtype.scalar)
        return engine.Lazy(compute, [handle]) if unforced([handle]) else compute()

    def as_tensor(handle, shape: list[int], dtype):
        ty = tl.block_type(dtype, list(shape)) if shape else dtype
        return tl.core.tensor(handle, ty)

    def transpose(self):
        rank = len(self.shape)
        perm = (*reversed(range(rank)), rank)
        shape = list(self.type.shape)
        shape[-1], shape[-2] = shape[-2], shape[-1]
        return as_tensor(mapped(self.handle, lambda d: np.transpose(d, perm)), shape, self.dtype)

    def patch_lang_tensor(tensor, scope):
        scope.set_attr(tensor, "__index__", _tensor_index)
        scope.set_attr(tensor, "__bool__", _tensor_bool)
        scope.set_attr(tensor, "__repr__", lambda self: repr(self.handle.data))
        scope.set_attr(tensor, "__str__", lambda self: str(self.handle.data))
        scope.set_attr(tensor, "T", property(transpose))

    def normalise(inputs, axis):
        """(inputs as (flat) tensors, reduction axis, per-program shape) as the interpreter defines them."""
        axis = tl.core._unwrap_if_constexpr(axis)
        shape = [int(tl.core._unwrap_if_constexpr(s)) for s in inputs[0].shape]
        if axis is None:
            n = int(np.prod(shape))
            flat = tuple(as_tensor(mapped(t.handle, lambda d: d.reshape(n, d.shape[-1])), [n], t.dtype)
                         for t in inputs)
            return flat, 0, shape
        if not -len(shape) <= axis < len(shape):
            raise ValueError(f"axis {axis} out of bounds for shape {shape}")
        return tuple(inputs), axis % len(shape), shape

    def slice_at(t, axis: int, k: int, shape: list[int]):
        rest = shape[:axis] + shape[axis + 1:]
        return as_tensor(mapped(t.handle, lambda d: np.take(d, k, axis=axis)), rest, t.dtype)

    def fold(inputs, axis, combine_fn, shape):
        acc = tuple(slice_at(t, axis, 0, shape) for t in inputs)
        for k in range(1, shape[axis]):
            ret = combine_fn.fn(*acc, *(slice_at(t, axis, k, shape) for t in inputs))
            acc = ret if isinstance(ret, tuple) else (ret,)
            if not all(isinstance(a, tl.core.tensor) for a in acc):
                raise NeedsReference("a reduction's combine function returns a non-tensor")
        return acc

    def reduce(input, axis, combine_fn, keep_dims=False, **kwargs):
        if not isinstance(input, tuple):
            return reduce((input,), axis, combine_fn, keep_dims)[0]
        whole = tl.core._unwrap_if_constexpr(axis) is None
        inputs, ax, shape = normalise(input, axis)
        red_shape = [int(np.prod(shape))] if whole else shape
        out_shape = red_shape[:ax] + red_shape[ax + 1:]
        keep = tl.core._unwrap_if_constexpr(keep_dims)
        final_shape = ([1] * len(shape) if whole else red_shape[:ax] + [1] + red_shape[ax + 1:]) if keep else out_shape

        def finish(handle, op: Callable, dtype):
            """op(data) reduced along `ax`, shaped and typed as the interpreter returns it."""
            npd = interp._get_np_dtype(dtype)

            def fn(d):
                r = op(d)
                return r.reshape((*final_shape, r.shape[-1])).astype(npd)
            return as_tensor(mapped(handle, fn, dtype.scalar), final_shape, dtype)

        cf = combine_fn
        std = tl.standard
        argmin = (std._argmin_combine_tie_break_left, std._argmin_combine_tie_break_fast)
        argmax = (std._argmax_combine_tie_break_left, std._argmax_combine_tie_break_fast)
        if cf in argmin or cf in argmax:
            val_op, idx_op = (np.nanmin, np.nanargmin) if cf in argmin else (np.nanmax, np.nanargmax)
            src = inputs[0]
            return (finish(src.handle, lambda d: val_op(d, axis=ax), src.dtype),
                    finish(src.handle, lambda d: idx_op(d, axis=ax), tl.int32))
        simple = {std._elementwise_max: np.nanmax, std._elementwise_min: np.nanmin, std._sum_combine: np.sum}
        if cf in simple:
            src, op = inputs[0], simple[cf]
            return (finish(src.handle, lambda d: op(d, axis=ax), src.dtype),)
        acc = fold(inputs, ax, cf, red_shape)
        return tuple(finish(a.handle, lambda d: d, t.dtype) for a, t in zip(acc, inputs))

    def scan(input, axis, combine_fn, reverse=False, **kwargs):
        if not isinstance(input, tuple):
            return scan((input,), axis, combine_fn, reverse)[0]
        inputs, ax, shape = normalise(input, axis)
        if tl.core._unwrap_if_constexpr(axis) is None:
            raise NeedsReference("associative_scan over all axes")
        flip = (lambda d: np.ascontiguousarray(np.flip(d, axis=ax))) if reverse else (lambda d: d)
        std = tl.standard
        simple = {std._sum_combine: np.cumsum, std._prod_combine: np.cumprod}
        if combine_fn in simple:
            src, op = inputs[0], simple[combine_fn]
            npd = interp._get_np_dtype(src.dtype)
            return (as_tensor(mapped(src.handle, lambda d: flip(op(flip(d), axis=ax)).astype(npd)), shape, src.dtype),)
        flipped = tuple(as_tensor(mapped(t.handle, flip), shape, t.dtype) for t in inputs)
        steps = [tuple(slice_at(t, ax, 0, shape) for t in flipped)]
        for k in range(1, shape[ax]):
            ret = combine_fn.fn(*steps[-1], *(slice_at(t, ax, k, shape) for t in flipped))
            steps.append(ret if isinstance(ret, tuple) else (ret,))
        outs = []
        for j, t in enumerate(inputs):
            parts = [s[j].handle for s in steps]
            npd = interp._get_np_dtype(t.dtype)

            def stack(parts=parts, npd=npd, t=t):
                data = [p.data for p in parts]
                q = max(d.shape[-1] for d in data)
                return TH(flip(np.stack([for_programs(d, q) for d in data], axis=ax)).astype(npd), t.dtype.scalar)
            waiting = unforced(parts)
            handle = engine.Lazy(stack, waiting) if waiting else stack()
            outs.append(as_tensor(handle, shape, t.dtype))
        return tuple(outs)

    def patch_reduce_scan(scope):
        for mod in (tl, tl.core):
            scope.set_attr(mod, "reduce", reduce)
            scope.set_attr(mod, "associative_scan", scan)

    return patch_lang_tensor, patch_reduce_scan


class PatchLangOnce:
    """interpreter._patch_lang that skips language modules it has already patched.

    Every device-function call (tl.max, tl.cdiv, user helpers) re-runs _patch_lang, which walks
    all of triton.language with inspect.getmembers (~1 ms) to reach the same, idempotent result.
    Batched, that is most of the Python time of a kernel with helpers in its inner loop."""

    def __init__(self, stock: Callable, tl):
        self.stock = stock
        self.langs = (tl, tl.core)
        self.patched: set[int] = set()
        self.done: set[Callable] = set()

    def __call__(self, fn):
        if fn in self.done:
            return _NO_SCOPE
        langs = {id(v) for v in fn.__globals__.values() if any(v is m for m in self.langs)}
        if langs and langs <= self.patched:
            self.done.add(fn)
            return _NO_SCOPE
        scope = self.stock(fn)
        self.patched |= langs
        return scope


class _NoScope:
    def restore(self) -> None:
        pass


_NO_SCOPE = _NoScope()
