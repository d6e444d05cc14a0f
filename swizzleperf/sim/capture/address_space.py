"""A stable virtual address space for the tensors of one launch.

Host addresses change from run to run, so traces are recorded in a virtual layout instead:
every distinct storage among the launch's tensor arguments gets a base, in the order the
arguments are first seen, aligned to 2 MiB (the granularity at which GPU caching allocators
hand out large blocks, so each tensor starts where a real one would: at cache set 0). An
address maps to `base + (address - storage start)`, so views of one storage share one region.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from swizzleperf.errors import TraceCaptureError

REGION_ALIGN = 2 << 20


def _align_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def tensors_in(arg):
    """Tensors inside a launch argument: plain, wrapped (reinterpreted dtype), descriptors, tuples."""
    if isinstance(arg, (tuple, list)):
        for a in arg:
            yield from tensors_in(a)
        return
    base = getattr(arg, "base", None)  # triton TensorWrapper and TensorDescriptor keep the tensor here
    if base is not None and hasattr(base, "untyped_storage"):
        yield base
    elif hasattr(arg, "untyped_storage"):
        yield arg


@dataclass(frozen=True)
class VirtualLayout:
    """Storage regions sorted by host address; `virtual_starts` are their bases."""

    host_starts: np.ndarray     # int64, sorted
    host_ends: np.ndarray       # int64, exclusive
    virtual_starts: np.ndarray  # int64
    names: tuple[str, ...]      # argument position of each region, for error messages

    @classmethod
    def from_args(cls, args, kwargs: dict | None = None) -> VirtualLayout:
        regions: dict[int, tuple[int, str]] = {}  # host start -> (nbytes, name), first seen first
        items = [(f"arg {i}", a) for i, a in enumerate(args)] + [(k, v) for k, v in (kwargs or {}).items()]
        for name, arg in items:
            for t in tensors_in(arg):
                storage = t.untyped_storage()
                regions.setdefault(int(storage.data_ptr()), (int(storage.nbytes()), name))
        base, rows = REGION_ALIGN, []
        for start, (nbytes, name) in regions.items():
            rows.append((start, start + nbytes, base, name))
            base = _align_up(base + max(nbytes, 1), REGION_ALIGN)
        rows.sort()
        return cls(host_starts=np.array([r[0] for r in rows], np.int64),
                   host_ends=np.array([r[1] for r in rows], np.int64),
                   virtual_starts=np.array([r[2] for r in rows], np.int64),
                   names=tuple(r[3] for r in rows))

    @property
    def virtual_end(self) -> int:
        """One past the last virtual byte of any region."""
        if not len(self.host_starts):
            return REGION_ALIGN
        return int((self.virtual_starts + (self.host_ends - self.host_starts)).max())

    def to_virtual(self, host: np.ndarray) -> np.ndarray:
        """Host byte addresses (any integer dtype) -> virtual byte addresses (int64)."""
        host = np.asarray(host).astype(np.int64, copy=False)
        region = np.searchsorted(self.host_starts, host, side="right") - 1
        ok = region >= 0
        ok[ok] = host[ok] < self.host_ends[region[ok]]
        if not ok.all():
            self.raise_out_of_bounds(int(host[~ok][0]))
        return self.virtual_starts[region] + (host - self.host_starts[region])

    def raise_out_of_bounds(self, address: int) -> None:
        spans = ", ".join(f"{n}: [{s:#x}, {e:#x})" for n, s, e in zip(self.names, self.host_starts, self.host_ends))
        raise TraceCaptureError(
            f"the kernel accesses address {address:#x}, outside every tensor argument of the launch "
            f"({spans or 'no tensor arguments'}); an unmasked out-of-bounds access would fault on the GPU. "
            f"Fix the kernel's mask, or pass scratch buffers as tensor arguments")
