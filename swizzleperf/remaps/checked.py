"""A candidate split into its hooks and statically checked, once per evaluation.

The stages of one evaluation read this value rather than the text: the split is what a kernel copy
gets, and the checked trees (the remap hook; the loop-order hook bound to local tile 0, checked as a
remap of the steps) are what the counted-work bounds walk. Only the confined children that evaluate
the candidate parse its text again: they are handed text, never objects.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from swizzleperf.kernel.candidate import Schedule
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.remaps.check import static_check
from swizzleperf.remaps.loop_orders import bind_local_tile


@dataclass(frozen=True)
class CheckedCandidate:
    source: str                          # the candidate as proposed
    schedule: Schedule                   # its remap hook's text, and its loop-order hook's where it has one
    remap: ast.FunctionDef               # the remap hook, inside the subset (parsed, never executed)
    loop_order: ast.FunctionDef | None   # the loop-order hook at local tile 0, inside the subset

    @property
    def what(self) -> str:
        if self.loop_order is None:
            return "parses, right signature, only allowed constructs"
        return "both hooks parse, right signatures, only allowed constructs"


def check_candidate(source: str, kernel: KernelFile) -> CheckedCandidate:
    """Split `source` for `kernel` and check each hook's subset; RemapRejected("static", why) otherwise."""
    schedule = kernel.parts(source)
    remap = static_check(schedule.remap, kernel.hook)
    order = None
    if schedule.loop_order is not None and kernel.loop_order is not None:
        order = static_check(bind_local_tile(schedule.loop_order, kernel.loop_order, 0), kernel.loop_order.over_steps())
    return CheckedCandidate(source=source, schedule=schedule, remap=remap, loop_order=order)
