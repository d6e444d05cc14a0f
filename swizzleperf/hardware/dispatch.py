"""The dispatch model: which L2 domain runs each launch slot, and in what order programs interleave.

A launch slot `w` is a hardware program id, 0..G-1 in launch order. Everything the simulator
assumes about the hardware scheduler lives here, so it can be read (and argued with) in one place:

Placement
  - round_robin (AMD): slot `w` goes to domain `(w // chunk) % num_domains`. MI300X's workgroup
    dispatcher does this with chunk 1; real hardware may skip a busy XCD, which the model ignores.
  - in_order (NVIDIA): one domain, one shared L2; every slot is queued there in launch order. A
    spec with in_order and more than one domain is rejected (the two statements contradict).
  - Each domain's queue holds its slots in launch order; a slot's *start rank* is its position
    in that queue (0 starts first).

Residency
  - A domain runs at most `hw.resident_programs_per_domain` (= cus_per_domain * programs_per_cu)
    programs at once. The first that many programs of its queue start together.
  - Occupancy is a fixed assumption: it does not depend on the kernel's registers or shared memory.

Interleaving (what the cache sees)
  - The resident programs sit in a rotation, in the order they started; the first wave's position i
    starts on the CU the measured first-wave sequence gives it (`HardwareSpec.first_wave_cus`). A
    *turn* visits the rotation in order; a program issues a *round* on a turn: the load and store
    instructions it has in flight together, each with all its distinct lines, back to back
    (rounds.py: the loads of straight-line code, one loop iteration, a store after the loads it
    writes). A trace without the instructions' sites issues one instruction per round. A turn is one
    memory round trip of a CU's oldest program.
  - A CU's programs do not go at one pace (`dispatch.younger_slowdown`, s): its k-th oldest resident
    program (k = 0 the oldest) gains 1 / (1 + s k) of a round per turn and issues a round on the
    turns it has gained a whole one; it moves up a rank when an older one ends. A program issues its
    first round on its first turn. Measured on an H200 (benchmarks/fit_pace.py): an SM's first-wave
    programs, started together, free their slots in a spread that this rule reproduces with s from
    0.021 (gemm) to 0.25 (attention), 0.066 the median over nine kernels. So waves dissolve: a
    program starts when a slot frees, which happens at a different time on every SM, and programs
    that read one stream (a head's K/V) but start a wave apart no longer share it turn for turn
    (docs/measurements/streams-start-apart-2026-11-28.md). With s = 0 every program issues a round
    every turn (lock-step).
  - When programs finish, they leave the rotation and as many next programs of the domain's queue
    join its end, each issuing its first round on the next turn. Without a placement each takes a CU
    one of the finished freed, in a hashed (arbitrary, reproducible) order; with one (the scheduler
    walk's, or one recorded on a GPU) each runs on its own. Programs with no events are skipped. When
    the queue is empty, the rotation shrinks.
  - Where the spec has a scheduler walk (h100, h200: `dispatch.walk`), the CU of each program follows
    NVIDIA's block scheduler instead (scheduler.py): it gives freed slots the next programs walking its
    SM order from the SM it served last, so consecutive programs share an L2 side and an L1 more often
    than at random, as measured (55-82 % side, benchmarks/probe_placement.py). The walk needs when slots
    free, so it runs over program durations in ns (rounds times a per-kernel time per round, stretched by
    the same pace rule) before the replay. The turns take the resident programs in the order they started,
    as the GPU starts programs in launch order (start times recorded on an H200,
    tests/fixtures/probes/placement-starts-h200.json.gz). What placement is worth is measured:
    `fidelity.py compare --placement` simulates measured remaps on the SMs an H100 ran them on (README).
  - Domains run independently: each has its own L2 and no access of one domain affects another,
    so the relative timing between domains is irrelevant to the hit rate.
  - Every domain's L2 starts cold (no data from a previous kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from swizzleperf.errors import HardwareSpecError, RemapRejected
from swizzleperf.hardware.spec import HardwareSpec


def _check_policy(hw: HardwareSpec) -> None:
    if hw.dispatch.policy == "in_order" and hw.num_domains != 1:
        raise HardwareSpecError(
            f"{hw.name}: in_order dispatch models one shared L2, but num_domains is {hw.num_domains}; "
            f"set num_domains to 1, or use round_robin dispatch for several L2 domains")


def simulated_domains(hw: HardwareSpec) -> int:
    """How many independent L2 domains the simulator models for `hw`."""
    _check_policy(hw)
    return hw.num_domains


def slot_domains(num_slots: int, hw: HardwareSpec) -> np.ndarray:
    """int64[num_slots]: the domain each launch slot runs on."""
    _check_policy(hw)
    if hw.dispatch.policy == "in_order":
        return np.zeros(num_slots, dtype=np.int64)
    return np.arange(num_slots, dtype=np.int64) // hw.dispatch.chunk % hw.num_domains


def domain_queues(num_slots: int, hw: HardwareSpec) -> list[np.ndarray]:
    """For each domain, its launch slots in the order they start (int64 arrays)."""
    domains = slot_domains(num_slots, hw)
    # a stable sort keeps launch order inside each domain
    order = np.argsort(domains, kind="stable")
    counts = np.bincount(domains, minlength=hw.num_domains)
    return np.split(order.astype(np.int64), np.cumsum(counts)[:-1])


def slot_start_ranks(num_slots: int, hw: HardwareSpec) -> np.ndarray:
    """int64[num_slots]: each slot's position in its domain's queue (0 = starts first)."""
    ranks = np.empty(num_slots, dtype=np.int64)
    for queue in domain_queues(num_slots, hw):
        ranks[queue] = np.arange(len(queue), dtype=np.int64)
    return ranks


def as_permutation(program_for_slot, num_programs: int | None = None) -> np.ndarray:
    """`program_for_slot` as a contiguous int64 array, checked to be a permutation of 0..G-1.

    A remap that is not a bijection skips some programs and runs others twice; simulating it
    would report a hit rate for a different kernel.
    """
    perm = np.ascontiguousarray(program_for_slot, dtype=np.int64)
    if perm.ndim != 1:
        raise RemapRejected("bijectivity", f"program_for_slot must be 1D (one entry per launch slot), "
                                           f"got shape {perm.shape}")
    if num_programs is not None and perm.shape[0] != num_programs:
        raise RemapRejected("bijectivity", f"program_for_slot has {perm.shape[0]} slots but the trace holds "
                                           f"{num_programs} programs; capture the trace at the same grid size")
    counts = np.bincount(perm[(perm >= 0) & (perm < perm.shape[0])], minlength=perm.shape[0])
    missing = np.flatnonzero(counts == 0)
    if missing.size:
        repeated = np.flatnonzero(counts > 1)
        out_of_range = perm[(perm < 0) | (perm >= perm.shape[0])]
        detail = (f"{out_of_range.size} ids outside [0, {perm.shape[0]}), e.g. {out_of_range[0]}"
                  if out_of_range.size else f"program {repeated[0]} runs {counts[repeated[0]]} times")
        raise RemapRejected("bijectivity", f"program_for_slot is not a permutation: program {missing[0]} "
                                           f"never runs and {detail} ({missing.size} programs missing)")
    return perm


@dataclass(frozen=True)
class Placement:
    """Where each captured program (logical tile) ran under one remap: for the tile-to-die picture."""

    domain: np.ndarray  # int64[G]: the domain that ran captured program p
    start_rank: np.ndarray  # int64[G]: its position in that domain's queue (0 = started first)


def placement(program_for_slot: np.ndarray, hw: HardwareSpec) -> Placement:
    """Invert the remap: slot `w` runs program `program_for_slot[w]`, so that program gets slot w's place."""
    program_for_slot = as_permutation(program_for_slot)
    num_slots = program_for_slot.shape[0]
    domain = np.empty(num_slots, dtype=np.int64)
    start_rank = np.empty(num_slots, dtype=np.int64)
    domain[program_for_slot] = slot_domains(num_slots, hw)
    start_rank[program_for_slot] = slot_start_ranks(num_slots, hw)
    return Placement(domain=domain, start_rank=start_rank)
