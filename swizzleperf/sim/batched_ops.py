"""The interpreter's builder and language, rewritten for a trailing program axis.

In program-batched interpretation every value carries a trailing program axis: per-program
scalars have data shape (P,), blocks (*shape, P), and values shared by all programs keep a
trailing axis of 1, so numpy broadcasting mixes the two. Elementwise builder methods work on
that as they are; those that create, move or read axes (`_batched_ops`), branch on values
(`tensor.__bool__`, `__index__`) or reduce (`tl.reduce`, `tl.associative_scan`) are replaced.
Memory ops record events through the engine (interp_batched.py) and never write memory.

This hooks interpreter internals of triton 3.9 (`SUPPORTED_TRITON`): `batched_interpreter`
classifies every builder method of that version and refuses one it does not know.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from swizzleperf.errors import TraceCaptureError
from swizzleperf.sim.batched_values import (
    Diverged, NeedsReference, lazy_aware, lazy_class, lazy_split, unforced,
)

if TYPE_CHECKING:
    from swizzleperf.sim.interp_batched import BatchedCapture


SUPPORTED_TRITON = "3.9."
_MISSING = object()


def check_version() -> None:
    import triton

    if not triton.__version__.startswith(SUPPORTED_TRITON):
        raise TraceCaptureError(
            f"fast trace capture hooks Triton interpreter internals and supports triton {SUPPORTED_TRITON}x, "
            f"but triton {triton.__version__} is installed; install the version from the README, "
            f"or capture with mode='reference' (slow, version-tolerant)")


def _interp():
    from triton.runtime import interpreter
    return interpreter


# --- batched builder methods ---------------------------------------------------------------


_ELEMENTWISE = frozenset({
    "create_add", "create_and", "create_approx_divf", "create_ashr", "create_bitcast",
    "create_ceil", "create_clampf", "create_cos", "create_erf", "create_exp", "create_exp2",
    "create_expand_dims", "create_fabs", "create_fadd", "create_fdiv", "create_floor", "create_fma",
    "create_fmul", "create_fneg", "create_fp_ext", "create_fp_to_fp", "create_fp_to_si", "create_fp_to_ui",
    "create_fp_trunc", "create_frem", "create_fsub", "create_iabs", "create_idiv", "create_int_cast",
    "create_int_to_ptr", "create_log", "create_log2", "create_lshr", "create_maximumf", "create_maxnumf",
    "create_maxsi", "create_maxui", "create_minimumf", "create_minnumf", "create_minsi", "create_minui",
    "create_mul", "create_or", "create_precise_divf", "create_precise_sqrt", "create_ptr_to_int",
    "create_rsqrt", "create_sdiv", "create_select", "create_shl", "create_si_to_fp", "create_sin",
    "create_sqrt", "create_srem", "create_sub", "create_udiv", "create_ui_to_fp", "create_umulhi",
    "create_urem", "create_xor", "binary_op", "unary_op", "ternary_op", "cast_impl",
})  # expand_dims inserts an axis before the program axis: stock works; the rest broadcast.
# The helpers every elementwise method goes through, run on compacted broadcasts.
_COMPACTED = frozenset({"binary_op", "unary_op", "ternary_op", "cast_impl"})
_COMPARISON = re.compile(r"create_[if]cmp[A-Z]+$")
_ROUTED = frozenset({"create_atomic_load", "create_atomic_store"})  # stock calls the masked load/store
_PASSTHROUGH = frozenset({"create_get_num_programs", "create_assert", "create_assume", "create_barrier"})
_UNBATCHABLE = {
    "create_atomic_poll": "tl.atomic_poll", "create_histogram": "tl.histogram", "create_dot_scaled": "tl.dot_scaled",
    "create_make_tensor_descriptor": "tensor descriptors", "create_descriptor_load": "tensor descriptors",
    "create_descriptor_store": "tensor descriptors", "create_descriptor_gather": "tensor descriptors",
    "create_descriptor_scatter": "tensor descriptors", "create_extern_elementwise": "extern_elementwise",
    "create_inline_asm": "inline_asm",
}


def _compact(arrays: list[np.ndarray]) -> tuple[list[np.ndarray], tuple[int, ...]] | None:
    """Views of `arrays` cut to length 1 along axes every one of them only broadcasts along.

    Splats and broadcasts are zero-stride views; an elementwise op on them can run on one slice
    and be broadcast back, with identical values. Returns (cut arrays, full result shape) or None."""
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    nd = len(shape)
    cut = [k for k in range(nd) if shape[k] > 1 and all(
        k < nd - a.ndim or a.shape[k - nd + a.ndim] == 1 or a.strides[k - nd + a.ndim] == 0 for a in arrays)]
    if not cut:
        return None
    out = []
    for a in arrays:
        index = tuple(slice(0, 1) if k + nd - a.ndim in cut else slice(None) for k in range(a.ndim))
        out.append(a[index])
    return out, shape


def _ints(shape) -> tuple[int, ...]:
    return tuple(int(getattr(s, "value", s)) for s in shape)


def _trailing(a: np.ndarray, q: int) -> np.ndarray:
    return np.broadcast_to(a, (*a.shape[:-1], q))


def _batched_ops(engine: "BatchedCapture", interp) -> dict[str, Callable]:
    """Builder methods that create, move or read axes, rewritten for a trailing program axis."""
    TH, tl, np_dtype = interp.TensorHandle, interp.tl, interp._get_np_dtype

    def create_get_program_id(self, axis):
        return TH(engine.coords[axis], tl.int32)

    def create_make_range(self, ret_ty, start, stop):
        return TH(np.arange(start, stop, dtype=np.int32)[:, None], tl.int32)

    def create_splat(self, ret_ty, arg):
        d = arg.data
        first = d.reshape(-1, d.shape[-1])[0].astype(np_dtype(arg.dtype), copy=False)  # a scalar per program
        return TH(np.broadcast_to(first, (*_ints(ret_ty.shape), first.shape[-1])), arg.dtype.scalar)

    def create_unsplat(self, arg):
        d = arg.data
        return TH(d.reshape(-1, d.shape[-1])[0].astype(np_dtype(arg.dtype)), arg.dtype.scalar)

    def create_broadcast(self, arg, shape):
        return TH(np.broadcast_to(arg.data, (*_ints(shape), arg.data.shape[-1])), arg.dtype.scalar)

    def create_reshape(self, arg, shape, allow_reorder):
        return TH(arg.data.reshape((*_ints(shape), arg.data.shape[-1])), arg.dtype.scalar)

    def create_trans(self, arg, perm):
        return TH(np.transpose(arg.data, (*_ints(perm), len(perm))), arg.dtype.scalar)

    def create_cat(self, lhs, rhs):
        l, r = lhs.data, rhs.data
        q = max(l.shape[-1], r.shape[-1])
        return TH(np.concatenate([_trailing(l, q), _trailing(r, q)], axis=0), lhs.dtype.scalar)

    def create_join(self, lhs, rhs):
        l, r = lhs.data, rhs.data
        q = max(l.shape[-1], r.shape[-1])
        return TH(np.stack([_trailing(l, q), _trailing(r, q)], axis=l.ndim - 1), lhs.dtype.scalar)

    def create_split(self, val):
        d = val.data
        return TH(d[..., 0, :], val.dtype.scalar), TH(d[..., 1, :], val.dtype.scalar)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        a_data, b_data = a.data, b.data
        if (a.dtype.primitive_bitwidth == 8 and a.dtype.is_floating()) or \
           (b.dtype.primitive_bitwidth == 8 and b.dtype.is_floating()):
            a_data = interp._convert_float(a_data, a.dtype, tl.float16, None).view(np.float16)
            b_data = interp._convert_float(b_data, b.dtype, tl.float16, None).view(np.float16)
        acc = d.data
        out = np.matmul(np.moveaxis(a_data, -1, 0), np.moveaxis(b_data, -1, 0), dtype=acc.dtype)
        return TH(np.moveaxis(out + np.moveaxis(acc, -1, 0), 0, -1), d.dtype.scalar)

    def create_gather(self, src, indices, axis):
        s, i = src.data, indices.data
        q = max(s.shape[-1], i.shape[-1])
        return TH(np.take_along_axis(_trailing(s, q), _trailing(i, q), axis=axis), src.dtype.scalar)

    def create_addptr(self, ptr, offset):
        width = np.uint64(max(1, ptr.get_element_ty().primitive_bitwidth // 8))  # int1 is stored in bytes
        off = offset.data
        cut = _compact([off])
        if cut:
            off = np.broadcast_to(cut[0][0].astype(np.uint64) * width, cut[1])
        else:
            off = off.astype(np.uint64) * width
        return TH(ptr.data + off, ptr.dtype)

    def create_load(self, ptr, cache_policy, is_volatile):
        return self.create_masked_load(ptr, None, None, cache_policy, is_volatile)

    def create_store(self, ptr, val, cache_policy):
        return self.create_masked_store(ptr, val, None, cache_policy)

    def create_masked_load(self, ptrs, mask, other, cache_policy, is_volatile):
        p = ptrs.data
        m = None if mask is None else mask.data
        tainted = engine.touches_poison(*engine.record(p, m, is_store=False))
        dtype_tt = ptrs.get_element_ty()
        dtype_np = np_dtype(dtype_tt)

        def compute():
            if tainted:
                raise NeedsReference("a loaded value decides addresses or control flow, and the launch "
                                     "wrote part of the memory it was loaded from")
            o = None if other is None else other.data
            shape = np.broadcast_shapes(p.shape, *(x.shape for x in (m, o) if x is not None))
            mb = np.broadcast_to(True if m is None else m, shape)
            ob = np.zeros(shape, dtype_np) if o is None else np.broadcast_to(o, shape)
            return TH(interp._interpreter.load(np.broadcast_to(p, shape), mb, ob, dtype_np), dtype_tt)

        load = engine.Lazy(compute, unforced([other]))
        engine.hold(load, p.size)
        return load

    def create_masked_store(self, ptrs, value, mask, cache_policy):
        engine.poison(*engine.record(ptrs.data, None if mask is None else mask.data, is_store=True))

    def _atomic_result(what: str):
        def compute():
            raise NeedsReference(f"the kernel uses the value returned by {what}")
        return engine.Lazy(compute)

    def create_atomic_rmw(self, rmw_op, ptr, val, mask, sem, scope):
        engine.poison(*engine.record(ptr.data, mask.data, is_store=True))
        return _atomic_result("an atomic read-modify-write")

    def create_atomic_cas(self, ptr, cmp, val, sem, scope):
        engine.poison(*engine.record(ptr.data, None, is_store=True))
        return _atomic_result("tl.atomic_cas")

    def create_print(self, prefix, hex, values, is_signed):
        pass  # values of a batch would print interleaved and unforced; reference mode prints them

    return {name: fn for name, fn in locals().items() if name.startswith("create_")}


def _on_compacted(method: Callable, interp) -> Callable:
    """Run an elementwise builder method on the compacted views of its tensor arguments."""
    TH = interp.TensorHandle

    def wrapper(self, *args):
        handles = [a for a in args if isinstance(a, TH)]
        cut = _compact([h.data for h in handles]) if len(handles) > 0 else None
        if cut is None:
            return method(self, *args)
        small = iter(cut[0])
        ret = method(self, *(TH(next(small), a.dtype) if isinstance(a, TH) else a for a in args))
        return TH(np.broadcast_to(ret.data, cut[1]), ret.dtype)
    return wrapper


def _bounds(a: np.ndarray) -> tuple[int, int]:
    cut = _compact([a])
    a = cut[0][0] if cut else a
    return int(a.min()), int(a.max())


def _quick_overflow_check(stock: Callable) -> Callable:
    """TritonSemantic.binary_op_sanitize_overflow_impl, skipped where it cannot have an effect.

    The stock check recomputes the op in int64 (several passes over the block) and feeds the
    result to device_assert, which does nothing unless the interpreter runs in debug mode. In
    debug mode, when interval arithmetic on the operands' min and max proves every result fits,
    the assertion would pass; only otherwise does the stock check run."""
    def sanitize(self, lhs, rhs, binary_op):
        sca = lhs.type.scalar
        if sca.int_bitwidth >= 64 or not self.builder.options.sanitize_overflow or not self.builder.options.debug:
            return None
        name = getattr(binary_op, "__name__", "")
        if (name in ("add", "sub", "mul") and sca == rhs.type.scalar and sca.is_int()
                and not unforced([lhs.handle, rhs.handle]) and lhs.handle.data.size and rhs.handle.data.size):
            (a0, a1), (b0, b1) = _bounds(lhs.handle.data), _bounds(rhs.handle.data)
            if name == "add":
                lo, hi = a0 + b0, a1 + b1
            elif name == "sub":
                lo, hi = a0 - b1, a1 - b0
            else:
                products = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
                lo, hi = min(products), max(products)
            if sca.get_int_min_value() <= lo and hi <= sca.get_int_max_value():
                return None
        return stock(self, lhs, rhs, binary_op)
    return sanitize


def _unbatchable(what: str) -> Callable:
    def method(self, *args, **kwargs):
        raise NeedsReference(f"fast capture does not batch {what}")
    return method


# --- language patches: branching, indexing, reductions -------------------------------------


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


def _language_patches(engine: "BatchedCapture", interp):
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
                return TH(flip(np.stack([_trailing(d, q) for d in data], axis=ax)).astype(npd), t.dtype.scalar)
            waiting = unforced(parts)
            handle = engine.Lazy(stack, waiting) if waiting else stack()
            outs.append(as_tensor(handle, shape, t.dtype))
        return tuple(outs)

    def patch_reduce_scan(scope):
        for mod in (tl, tl.core):
            scope.set_attr(mod, "reduce", reduce)
            scope.set_attr(mod, "associative_scan", scan)

    return patch_lang_tensor, patch_reduce_scan


@contextlib.contextmanager
def batched_interpreter(engine: "BatchedCapture") -> Iterator[None]:
    """Install the batched builder and language patches; restore everything on exit."""
    check_version()
    interp = _interp()
    B = interp.InterpreterBuilder
    engine.Lazy = lazy_class(interp.TensorHandle)
    ops = _batched_ops(engine, interp)
    names = [n for n in dir(B) if n.startswith("create_")] + ["binary_op", "unary_op", "ternary_op", "cast_impl"]
    plan: dict[str, Callable] = {}
    for name in names:
        if name == "create_split":
            plan[name] = lazy_split(ops[name], engine.Lazy)
        elif name in ("create_masked_load", "create_masked_store", "create_load", "create_store",
                      "create_atomic_rmw", "create_atomic_cas", "create_get_program_id", "create_make_range",
                      "create_print"):
            plan[name] = ops[name]
        elif name in ops:
            plan[name] = lazy_aware(ops[name], engine.Lazy)
        elif name in _COMPACTED:
            plan[name] = lazy_aware(_on_compacted(getattr(B, name), interp), engine.Lazy)
        elif name in _ELEMENTWISE or _COMPARISON.match(name):
            plan[name] = lazy_aware(getattr(B, name), engine.Lazy)
        elif name in _UNBATCHABLE:
            plan[name] = _unbatchable(_UNBATCHABLE[name])
        elif name not in _ROUTED and name not in _PASSTHROUGH:
            raise NeedsReference(f"fast capture does not know the interpreter op {name}")
    saved = {name: B.__dict__[name] for name in plan if name in B.__dict__}
    patch_tensor, patch_reduce = _language_patches(engine, interp)
    saved_module = {name: getattr(interp, name) for name in ("_patch_lang_tensor", "_patch_reduce_scan", "_patch_lang")}
    tl = interp.tl
    leaked = [(cls, ("__index__", "__bool__", "__repr__", "__str__", "T")) for cls in {tl.tensor, tl.core.tensor}]
    leaked += [(mod, ("reduce", "associative_scan")) for mod in (tl, tl.core)]
    saved_lang = [(obj, a, obj.__dict__.get(a, _MISSING)) for obj, attrs in leaked for a in attrs]
    semantic_cls = type(interp.interpreter_semantic)
    stock_sanitize = semantic_cls.binary_op_sanitize_overflow_impl
    for name, fn in plan.items():
        setattr(B, name, fn)
    interp._patch_lang_tensor, interp._patch_reduce_scan = patch_tensor, patch_reduce
    interp._patch_lang = _PatchLangOnce(saved_module["_patch_lang"], tl)
    semantic_cls.binary_op_sanitize_overflow_impl = _quick_overflow_check(stock_sanitize)
    try:
        yield
    finally:
        semantic_cls.binary_op_sanitize_overflow_impl = stock_sanitize
        for name in plan:
            if name in saved:
                setattr(B, name, saved[name])
            else:
                delattr(B, name)
        for name, value in saved_module.items():
            setattr(interp, name, value)
        # Device-function calls re-run _patch_lang without restoring it; undo what leaked.
        for obj, attr, value in saved_lang:
            if value is _MISSING:
                if attr in obj.__dict__:
                    delattr(obj, attr)
            else:
                setattr(obj, attr, value)


class _PatchLangOnce:
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
