"""Orders, not texts: two remaps that send every program of the run's grid to the same logical tile are one
order there, however differently they are written (a family whose chunk spans the whole grid is the kernel's
own order; two chunk sizes can coincide on a small grid). The search asks this before it spends an attempt.

Only sources swizzleperf generates (the search space's instances) and the kernel's own hook are evaluated,
in this process, with the evaluator that never executes code; a model's or a library's text is not.
"""

from __future__ import annotations

import hashlib
import math

from swizzleperf.errors import RemapRejected
from swizzleperf.hardware.spec import HardwareSpec, hook_constants
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.remaps.evaluate.evaluator import evaluate

MAX_PROGRAMS = 1 << 18  # evaluating every instance of the space stays within a second or two here


class OrderKeys:
    """The order each source gives on one grid, as a digest; None where it is not computed."""

    def __init__(self, kernel: KernelFile, hw: HardwareSpec, size: str):
        self.kernel, self.size = kernel, size
        self.grid = kernel.grid(size) if size in kernel.sizes else None
        self.constants = hook_constants(kernel, hw)
        self._keys: dict[str, bytes | None] = {}

    def key(self, source: str) -> bytes | None:
        if source not in self._keys:
            self._keys[source] = self._digest(source)
        return self._keys[source]

    def _digest(self, source: str) -> bytes | None:
        if self.grid is None or math.prod(self.grid) > MAX_PROGRAMS or self.kernel.loop_order is not None:
            return None  # a loop order pairs with the remap: the texts decide
        try:
            return hashlib.sha1(evaluate(source, self.kernel.hook, self.grid, self.constants).tobytes()).digest()
        except (RemapRejected, ValueError):
            return None
