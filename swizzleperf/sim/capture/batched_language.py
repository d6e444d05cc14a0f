"""The batched language: `tensor.__bool__`/`__index__` that agree across programs or diverge, and
`tl.reduce`/`tl.associative_scan` over every axis but the trailing program axis (see batched_ops.py);
and the interpreter's `_patch_lang`, run once per language module."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from swizzleperf.sim.capture.batched_values import Diverged, NeedsReference, for_programs, unforced

if TYPE_CHECKING:
    from swizzleperf.sim.capture.interp_batched import BatchedCapture


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


class BatchedLanguage:
    """Replacements for interpreter._patch_lang_tensor and _patch_reduce_scan: tensor dunders, and
    tl.reduce / tl.associative_scan over every axis but the trailing program axis."""

    def __init__(self, engine: "BatchedCapture", interp):
        self.engine, self.interp = engine, interp
        self.tl, self.TH = interp.tl, interp.TensorHandle

    # --- helpers ---------------------------------------------------------------------------------
    def mapped(self, handle, fn: Callable, dtype=None):
        """A handle whose data is fn(handle.data), lazy if `handle` is."""
        def compute():
            return self.TH(fn(handle.data), dtype if dtype is not None else handle.dtype.scalar)
        return self.engine.Lazy(compute, [handle]) if unforced([handle]) else compute()

    def as_tensor(self, handle, shape: list[int], dtype):
        ty = self.tl.block_type(dtype, list(shape)) if shape else dtype
        return self.tl.core.tensor(handle, ty)

    def transpose(self, tensor):
        rank = len(tensor.shape)
        perm = (*reversed(range(rank)), rank)
        shape = list(tensor.type.shape)
        shape[-1], shape[-2] = shape[-2], shape[-1]
        return self.as_tensor(self.mapped(tensor.handle, lambda d: np.transpose(d, perm)), shape, tensor.dtype)

    def normalise(self, inputs, axis):
        """(inputs as (flat) tensors, reduction axis, per-program shape) as the interpreter defines them."""
        unwrap = self.tl.core._unwrap_if_constexpr
        axis = unwrap(axis)
        shape = [int(unwrap(s)) for s in inputs[0].shape]
        if axis is None:
            n = int(np.prod(shape))
            flat = tuple(self.as_tensor(self.mapped(t.handle, lambda d: d.reshape(n, d.shape[-1])), [n], t.dtype)
                         for t in inputs)
            return flat, 0, shape
        if not -len(shape) <= axis < len(shape):
            raise ValueError(f"axis {axis} out of bounds for shape {shape}")
        return tuple(inputs), axis % len(shape), shape

    def slice_at(self, t, axis: int, k: int, shape: list[int]):
        rest = shape[:axis] + shape[axis + 1:]
        return self.as_tensor(self.mapped(t.handle, lambda d: np.take(d, k, axis=axis)), rest, t.dtype)

    def fold(self, inputs, axis, combine_fn, shape):
        acc = tuple(self.slice_at(t, axis, 0, shape) for t in inputs)
        for k in range(1, shape[axis]):
            ret = combine_fn.fn(*acc, *(self.slice_at(t, axis, k, shape) for t in inputs))
            acc = ret if isinstance(ret, tuple) else (ret,)
            if not all(isinstance(a, self.tl.core.tensor) for a in acc):
                raise NeedsReference("a reduction's combine function returns a non-tensor")
        return acc

    # --- tl.reduce ---------------------------------------------------------------------------------
    def reduce(self, input, axis, combine_fn, keep_dims=False, **kwargs):
        if not isinstance(input, tuple):
            return self.reduce((input,), axis, combine_fn, keep_dims)[0]
        unwrap = self.tl.core._unwrap_if_constexpr
        whole = unwrap(axis) is None
        inputs, ax, shape = self.normalise(input, axis)
        red_shape = [int(np.prod(shape))] if whole else shape
        out_shape = red_shape[:ax] + red_shape[ax + 1:]
        if unwrap(keep_dims):
            out_shape = [1] * len(shape) if whole else red_shape[:ax] + [1] + red_shape[ax + 1:]
        finish = self._finisher(out_shape)
        std = self.tl.standard
        argmin = (std._argmin_combine_tie_break_left, std._argmin_combine_tie_break_fast)
        argmax = (std._argmax_combine_tie_break_left, std._argmax_combine_tie_break_fast)
        if combine_fn in argmin or combine_fn in argmax:
            val_op, idx_op = (np.nanmin, np.nanargmin) if combine_fn in argmin else (np.nanmax, np.nanargmax)
            src = inputs[0]
            return (finish(src.handle, lambda d: val_op(d, axis=ax), src.dtype),
                    finish(src.handle, lambda d: idx_op(d, axis=ax), self.tl.int32))
        simple = {std._elementwise_max: np.nanmax, std._elementwise_min: np.nanmin, std._sum_combine: np.sum}
        if combine_fn in simple:
            src, op = inputs[0], simple[combine_fn]
            return (finish(src.handle, lambda d: op(d, axis=ax), src.dtype),)
        acc = self.fold(inputs, ax, combine_fn, red_shape)
        return tuple(finish(a.handle, lambda d: d, t.dtype) for a, t in zip(acc, inputs))

    def _finisher(self, final_shape: list[int]) -> Callable:
        """finish(handle, op, dtype): op(data) reduced along the axis, shaped and typed as the interpreter
        returns it."""
        def finish(handle, op: Callable, dtype):
            npd = self.interp._get_np_dtype(dtype)

            def fn(d):
                r = op(d)
                return r.reshape((*final_shape, r.shape[-1])).astype(npd)
            return self.as_tensor(self.mapped(handle, fn, dtype.scalar), final_shape, dtype)
        return finish

    # --- tl.associative_scan -------------------------------------------------------------------------
    def scan(self, input, axis, combine_fn, reverse=False, **kwargs):
        if not isinstance(input, tuple):
            return self.scan((input,), axis, combine_fn, reverse)[0]
        inputs, ax, shape = self.normalise(input, axis)
        if self.tl.core._unwrap_if_constexpr(axis) is None:
            raise NeedsReference("associative_scan over all axes")
        flip = (lambda d: np.ascontiguousarray(np.flip(d, axis=ax))) if reverse else (lambda d: d)
        std = self.tl.standard
        simple = {std._sum_combine: np.cumsum, std._prod_combine: np.cumprod}
        if combine_fn in simple:
            src, op = inputs[0], simple[combine_fn]
            npd = self.interp._get_np_dtype(src.dtype)
            return (self.as_tensor(self.mapped(src.handle, lambda d: flip(op(flip(d), axis=ax)).astype(npd)), shape,
                                   src.dtype),)
        flipped = tuple(self.as_tensor(self.mapped(t.handle, flip), shape, t.dtype) for t in inputs)
        steps = [tuple(self.slice_at(t, ax, 0, shape) for t in flipped)]
        for k in range(1, shape[ax]):
            ret = combine_fn.fn(*steps[-1], *(self.slice_at(t, ax, k, shape) for t in flipped))
            steps.append(ret if isinstance(ret, tuple) else (ret,))
        return tuple(self._stacked([s[j].handle for s in steps], t, ax, shape, flip) for j, t in enumerate(inputs))

    def _stacked(self, parts, t, ax: int, shape: list[int], flip: Callable):
        """The scan's steps of one input stacked back along `ax` (lazy while any step is)."""
        npd = self.interp._get_np_dtype(t.dtype)

        def stack():
            data = [p.data for p in parts]
            q = max(d.shape[-1] for d in data)
            return self.TH(flip(np.stack([for_programs(d, q) for d in data], axis=ax)).astype(npd), t.dtype.scalar)
        waiting = unforced(parts)
        return self.as_tensor(self.engine.Lazy(stack, waiting) if waiting else stack(), shape, t.dtype)

    # --- what the interpreter calls --------------------------------------------------------------------
    def patch_lang_tensor(self, tensor, scope):
        scope.set_attr(tensor, "__index__", _tensor_index)
        scope.set_attr(tensor, "__bool__", _tensor_bool)
        scope.set_attr(tensor, "__repr__", lambda t: repr(t.handle.data))
        scope.set_attr(tensor, "__str__", lambda t: str(t.handle.data))
        scope.set_attr(tensor, "T", property(self.transpose))

    def patch_reduce_scan(self, scope):
        for mod in (self.tl, self.tl.core):
            scope.set_attr(mod, "reduce", self.reduce)
            scope.set_attr(mod, "associative_scan", self.scan)


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
