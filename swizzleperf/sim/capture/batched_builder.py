"""The batched builder: the interpreter's builder methods rewritten for a trailing program axis
(see batched_ops.py), and the plan that classifies every builder method of the supported triton."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from swizzleperf.sim.capture.batched_values import NeedsReference, for_programs, lazy_aware, lazy_split, unforced

if TYPE_CHECKING:
    from swizzleperf.sim.capture.interp_batched import BatchedCapture

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
# Replaced, and called as they are: they handle lazy values themselves (or never see any).
_RAW = frozenset({"create_masked_load", "create_masked_store", "create_load", "create_store", "create_atomic_rmw",
                  "create_atomic_cas", "create_get_program_id", "create_make_range", "create_print"})
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


def _batched_ops(engine: "BatchedCapture", interp) -> dict[str, Callable]:
    """Builder methods that create, move or read axes, rewritten for a trailing program axis."""
    return _shape_ops(engine, interp) | _arithmetic_ops(interp) | _memory_ops(engine, interp)


def _shape_ops(engine: "BatchedCapture", interp) -> dict[str, Callable]:
    """Program ids, ranges, and the methods that reshape, join or cut blocks."""
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
        return TH(np.concatenate([for_programs(l, q), for_programs(r, q)], axis=0), lhs.dtype.scalar)

    def create_join(self, lhs, rhs):
        l, r = lhs.data, rhs.data
        q = max(l.shape[-1], r.shape[-1])
        return TH(np.stack([for_programs(l, q), for_programs(r, q)], axis=l.ndim - 1), lhs.dtype.scalar)

    def create_split(self, val):
        d = val.data
        return TH(d[..., 0, :], val.dtype.scalar), TH(d[..., 1, :], val.dtype.scalar)

    def create_gather(self, src, indices, axis):
        s, i = src.data, indices.data
        q = max(s.shape[-1], i.shape[-1])
        return TH(np.take_along_axis(for_programs(s, q), for_programs(i, q), axis=axis), src.dtype.scalar)

    return {name: fn for name, fn in locals().items() if name.startswith("create_")}


def _arithmetic_ops(interp) -> dict[str, Callable]:
    """tl.dot over the program axis, and pointer arithmetic on compacted broadcasts."""
    TH, tl = interp.TensorHandle, interp.tl

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        a_data, b_data = a.data, b.data
        if (a.dtype.primitive_bitwidth == 8 and a.dtype.is_floating()) or \
           (b.dtype.primitive_bitwidth == 8 and b.dtype.is_floating()):
            a_data = interp._convert_float(a_data, a.dtype, tl.float16, None).view(np.float16)
            b_data = interp._convert_float(b_data, b.dtype, tl.float16, None).view(np.float16)
        acc = d.data
        out = np.matmul(np.moveaxis(a_data, -1, 0), np.moveaxis(b_data, -1, 0), dtype=acc.dtype)
        return TH(np.moveaxis(out + np.moveaxis(acc, -1, 0), 0, -1), d.dtype.scalar)

    def create_addptr(self, ptr, offset):
        width = np.uint64(max(1, ptr.get_element_ty().primitive_bitwidth // 8))  # int1 is stored in bytes
        off = offset.data
        cut = _compact([off])
        if cut:
            off = np.broadcast_to(cut[0][0].astype(np.uint64) * width, cut[1])
        else:
            off = off.astype(np.uint64) * width
        return TH(ptr.data + off, ptr.dtype)

    return {name: fn for name, fn in locals().items() if name.startswith("create_")}


def _memory_ops(engine: "BatchedCapture", interp) -> dict[str, Callable]:
    """Loads and stores: recorded into the trace; loaded values computed only when something reads them."""
    TH, np_dtype = interp.TensorHandle, interp._get_np_dtype

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

    def create_atomic_rmw(self, rmw_op, ptr, val, mask, sem, scope):
        engine.poison(*engine.record(ptr.data, mask.data, is_store=True))
        return _atomic_result(engine, "an atomic read-modify-write")

    def create_atomic_cas(self, ptr, cmp, val, sem, scope):
        engine.poison(*engine.record(ptr.data, None, is_store=True))
        return _atomic_result(engine, "tl.atomic_cas")

    def create_print(self, prefix, hex, values, is_signed):
        pass  # values of a batch would print interleaved and unforced; reference mode prints them

    return {name: fn for name, fn in locals().items() if name.startswith("create_")}


def _atomic_result(engine: "BatchedCapture", what: str):
    """The value an atomic returns: computing it (the kernel reading it) needs the reference interpreter."""
    def compute():
        raise NeedsReference(f"the kernel uses the value returned by {what}")
    return engine.Lazy(compute)


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


def quick_overflow_check(stock: Callable) -> Callable:
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


def builder_plan(engine: "BatchedCapture", interp) -> dict[str, Callable]:
    """Every builder method of this triton, classified: replaced (batched), wrapped (lazy-aware, or run
    on compacted broadcasts), refused (unbatchable), or left stock (routed, passthrough). A method this
    classification does not know ends the fast capture (NeedsReference)."""
    B = interp.InterpreterBuilder
    ops = _batched_ops(engine, interp)
    names = [n for n in dir(B) if n.startswith("create_")] + ["binary_op", "unary_op", "ternary_op", "cast_impl"]
    plan: dict[str, Callable] = {}
    for name in names:
        if name == "create_split":
            plan[name] = lazy_split(ops[name], engine.Lazy)
        elif name in _RAW:
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
    return plan
