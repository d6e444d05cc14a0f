"""The interpreter's builder and language, rewritten for a trailing program axis.

In program-batched interpretation every value carries a trailing program axis: per-program
scalars have data shape (P,), blocks (*shape, P), and values shared by all programs keep a
trailing axis of 1, so numpy broadcasting mixes the two. Elementwise builder methods work on
that as they are; those that create, move or read axes (batched_builder.py), branch on values
(`tensor.__bool__`, `__index__`) or reduce (`tl.reduce`, `tl.associative_scan`; batched_language.py)
are replaced. This module installs both for the length of a capture and restores the interpreter.
Memory ops record events through the engine (interp_batched.py) and never write memory.

This hooks interpreter internals of triton 3.9 (`SUPPORTED_TRITON`): `batched_interpreter`
classifies every builder method of that version and refuses one it does not know.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from swizzleperf.errors import TraceCaptureError
from swizzleperf.sim.capture.batched_builder import builder_plan, quick_overflow_check
from swizzleperf.sim.capture.batched_language import BatchedLanguage, PatchLangOnce
from swizzleperf.sim.capture.batched_values import lazy_class

if TYPE_CHECKING:
    from swizzleperf.sim.capture.interp_batched import BatchedCapture


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


@contextlib.contextmanager
def batched_interpreter(engine: "BatchedCapture") -> Iterator[None]:
    """Install the batched builder and language patches; restore everything on exit."""
    check_version()
    interp = _interp()
    B = interp.InterpreterBuilder
    engine.Lazy = lazy_class(interp.TensorHandle)
    plan = builder_plan(engine, interp)
    saved = {name: B.__dict__[name] for name in plan if name in B.__dict__}
    language = BatchedLanguage(engine, interp)
    saved_module = {name: getattr(interp, name) for name in ("_patch_lang_tensor", "_patch_reduce_scan", "_patch_lang")}
    tl = interp.tl
    leaked = [(cls, ("__index__", "__bool__", "__repr__", "__str__", "T")) for cls in {tl.tensor, tl.core.tensor}]
    leaked += [(mod, ("reduce", "associative_scan")) for mod in (tl, tl.core)]
    saved_lang = [(obj, a, obj.__dict__.get(a, _MISSING)) for obj, attrs in leaked for a in attrs]
    semantic_cls = type(interp.interpreter_semantic)
    stock_sanitize = semantic_cls.binary_op_sanitize_overflow_impl
    for name, fn in plan.items():
        setattr(B, name, fn)
    interp._patch_lang_tensor, interp._patch_reduce_scan = language.patch_lang_tensor, language.patch_reduce_scan
    interp._patch_lang = PatchLangOnce(saved_module["_patch_lang"], tl)
    semantic_cls.binary_op_sanitize_overflow_impl = quick_overflow_check(stock_sanitize)
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
