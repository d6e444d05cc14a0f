"""The search space: every remap family instance the offline search may propose for a hook, by family.

The first instance of each family is its default (the explore phase tries those first); the rest are
its parameters, which the exploit phase walks nearest first. Proofs use the same space to find the
inverses of the 1D orders it contains (remaps/inverses.py). A new family goes into families.py and here.
"""

from __future__ import annotations

from dataclasses import replace

from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import HookSignature, LoopOrderSignature
from swizzleperf.remaps.families import FamilyInstance

_CHUNKS = (2, 4, 8, 16, 32, 64, 128)
_GROUPS = (2, 4, 8, 16, 32)
_VIRTUAL_DIES = (2, 4, 8, 16)  # on one shared L2 a "die" count is just a stride of the reorder
_HEAD_GROUPS = (1, 2, 4, 8)  # heads per attention cluster: 1 for MHA, the heads per K/V head for GQA


def candidate_space(hook: HookSignature, hw: HardwareSpec,
                    loop_order: LoopOrderSignature | None = None) -> dict[str, list[FamilyInstance]]:
    """Every instance the search may propose, grouped by family; the first of each is its default. With a
    loop-order hook, every remap family also comes with the sawtooth order (a family of its own: `F +
    sawtooth`), and the kernel's own remap with it (`identity + sawtooth`)."""
    space = _remap_space(hook, hw)
    if loop_order is None:
        return space
    combined = {f"{family} + sawtooth": [replace(i, loop_order="sawtooth") for i in instances]
                for family, instances in space.items()}
    return {**space, "identity + sawtooth": [FamilyInstance("identity", (), "sawtooth")], **combined}


def _remap_space(hook: HookSignature, hw: HardwareSpec) -> dict[str, list[FamilyInstance]]:
    def inst(family: str, **params: int) -> FamilyInstance:
        return FamilyInstance(family, tuple(params.items()))

    dies = [None] if hw.num_domains > 1 else list(_VIRTUAL_DIES)

    def with_dies(family: str, **params: int) -> list[FamilyInstance]:
        return [inst(family, **params) if d is None else inst(family, **params, dies=d) for d in dies]

    if hook.ndim == 1:
        return {
            "xcd_chunked": [i for c in (4, *[c for c in _CHUNKS if c != 4]) for i in with_dies("xcd_chunked", chunk=c)],
            "xcd_contiguous": with_dies("xcd_contiguous"),
        }
    if hook.ndim == 2:
        groups = (8, *[g for g in _GROUPS if g != 8])
        return {
            "grouped": [inst("grouped", group_m=g) for g in groups],
            "col_major": [inst("col_major")],
            "xcd_row_major": with_dies("xcd_row_major"),
            "xcd_col_major": with_dies("xcd_col_major"),
            "xcd_grouped": [i for g in groups for i in with_dies("xcd_grouped", group_m=g)],
            "xcd_chunked_grouped": [i for c in (4, 2, 8, 16) for g in (8, 4, 16)
                                    for i in with_dies("xcd_chunked_grouped", chunk=c, group_m=g)],
        }
    if hook.ndim == 3:  # attention: (q blocks, batch, heads); the identity (the baseline) is naive block-first
        # Swizzled block-first with group 1 is the identity whenever N divides batch * heads: left out.
        return {
            "head_first": [inst("head_first")],
            "swizzled_head_first": [i for g in _HEAD_GROUPS for i in with_dies("swizzled_head_first", group=g)],
            "swizzled_block_first": [i for g in _HEAD_GROUPS[1:]
                                     for i in with_dies("swizzled_block_first", group=g)],
        }
    return {}
