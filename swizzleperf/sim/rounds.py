"""Which events a program issues together: its rounds.

A GPU program issues a load and goes on to the next instruction; it waits only where it needs the
data. So the loads of straight-line code leave back to back (a stencil's five shifted tile loads
reach the L2 together, the program that started first ahead of the next), and a loop waits each
iteration for the data the iteration consumes. The simulator's turn (dispatch.py) therefore issues
one *round* per program: the events from one round start to the next. A round starts at a program's
first event, at an event whose instruction (its site, sites.py) already issued in the current round
(the loop's next iteration), at an event of a new instruction after a loop's iteration (the loop
has ended, and its last iteration's data was consumed before the code after it runs), and at a
store once the round holds a load (a store writes data the loads bring). Not detected: a load whose address comes from loaded data (spmv's gather through its
column indices) joins its round although the GPU must wait for the index first. A trace without
sites issues every event as its own round.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _round_starts(sites, stores, first_seen, program_events, out):
    first = 0
    for p in range(program_events.shape[0]):
        round_first, in_loop = first, False
        for e in range(first, first + program_events[p]):
            repeated = False
            has_load = False
            for k in range(round_first, e):
                repeated |= sites[k] == sites[e]
                has_load |= not stores[k]
            start = e == first or repeated or (stores[e] and has_load) or (in_loop and first_seen[e])
            if start:
                round_first, in_loop = e, not first_seen[e]
            out[e] = start
        first += program_events[p]


def round_starts(sites: np.ndarray | None, stores: np.ndarray, program_events: np.ndarray) -> np.ndarray:
    """bool[E]: where each round begins, for E events program-major (`program_events` per program, each
    event's site and store flag). Without sites every event begins a round."""
    if sites is None:
        return np.ones(stores.shape[0], np.bool_)
    sites = np.ascontiguousarray(sites, np.int64)
    program_events = np.ascontiguousarray(program_events, np.int64)
    program = np.repeat(np.arange(program_events.shape[0], dtype=np.int64), program_events)
    first_seen = np.zeros(sites.shape[0], np.bool_)
    first_seen[np.unique((program << 32) | sites, return_index=True)[1]] = True
    out = np.empty(stores.shape[0], np.bool_)
    _round_starts(sites, np.ascontiguousarray(stores, np.bool_), first_seen, program_events, out)
    return out
