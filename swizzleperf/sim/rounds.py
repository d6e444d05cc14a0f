"""Which events a program issues together: its rounds.

A GPU program issues a load and goes on to the next instruction; it waits only where it needs the
data. So the loads of straight-line code leave back to back (a stencil's five shifted tile loads
reach the L2 together, the program that started first ahead of the next), and a loop waits each
iteration for the data the iteration consumes. The simulator's turn (dispatch.py) therefore issues
one *round* per program: the events from one round start to the next. A round starts at a program's
first event, at an event whose instruction (its site, sites.py) already issued in the current round
(the loop's next iteration), and at a store once the round holds a load (a store writes data the
loads bring). Not detected: a load whose address comes from loaded data (spmv's gather through its
column indices) joins its round although the GPU must wait for the index first; the code after a
loop joins the loop's last iteration (a round that also waited for the loop's last data made
softmax's and layernorm's predictions worse against the H100's counters: Triton pipelines a loop's
loads ahead of the code that consumes them); and a loop pipelined several iterations deep issues
one iteration per round here. A trace without sites issues every event as its own round.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _round_starts(sites, stores, program_events, out):
    first = 0
    for p in range(program_events.shape[0]):
        round_first = first
        for e in range(first, first + program_events[p]):
            repeated = False
            has_load = False
            for k in range(round_first, e):
                repeated |= sites[k] == sites[e]
                has_load |= not stores[k]
            start = e == first or repeated or (stores[e] and has_load)
            if start:
                round_first = e
            out[e] = start
        first += program_events[p]


def round_starts(sites: np.ndarray | None, stores: np.ndarray, program_events: np.ndarray) -> np.ndarray:
    """bool[E]: where each round begins, for E events program-major (`program_events` per program, each
    event's site and store flag). Without sites every event begins a round."""
    if sites is None:
        return np.ones(stores.shape[0], np.bool_)
    out = np.empty(stores.shape[0], np.bool_)
    _round_starts(np.ascontiguousarray(sites, np.int32), np.ascontiguousarray(stores, np.bool_),
                  np.ascontiguousarray(program_events, np.int64), out)
    return out
