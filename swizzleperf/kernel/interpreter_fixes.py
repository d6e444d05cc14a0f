"""One way the CPU interpreter differs from a GPU that kernels rely on, made as the GPU does it.

A float argument reaches a compiled kernel as an fp32 scalar (with `.to`, `.dtype`); Triton's CPU
interpreter (3.9) passes the Python float through, so `eps.to(tl.float32)`, which every RMSNorm of
a well-known training library writes, fails there. Wherever swizzleperf runs a kernel on the
interpreter (capture, the correctness check, the kernel file's replay, the simulator's trace), a
float argument becomes an fp32 scalar, as on the GPU. Nothing else is changed.
"""

from __future__ import annotations


def float_scalars_as_fp32() -> None:
    """Patch the interpreter's argument conversion (idempotent; a no-op where it has none)."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    original = getattr(interpreter, "_implicit_cvt", None)
    if original is None or getattr(original, "swizzleperf_fp32", False):
        return

    def convert(arg):
        if type(arg) is float:
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return original(arg)

    convert.swizzleperf_fp32 = True
    interpreter._implicit_cvt = convert
