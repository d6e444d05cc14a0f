"""Which events a program issues together (swizzleperf/sim/rounds.py), by hand."""

import numpy as np

from swizzleperf.sim.rounds import round_starts


def starts(programs: list[list[tuple[int, bool]]]) -> list[list[int]]:
    """programs[p] = [(site, is_store), ...] -> per program, the indices of the events that begin a round."""
    sites = np.array([s for p in programs for s, _ in p], np.int32)
    stores = np.array([st for p in programs for _, st in p], bool)
    flags = round_starts(sites, stores, np.array([len(p) for p in programs]))
    out, e = [], 0
    for p in programs:
        out.append([i for i in range(len(p)) if flags[e + i]])
        e += len(p)
    return out


LOAD, STORE = False, True


def test_straight_line_loads_go_together_and_the_store_waits_for_them():
    stencil = [(1, LOAD), (2, LOAD), (3, LOAD), (4, LOAD), (5, LOAD), (6, STORE)]
    assert starts([stencil]) == [[0, 5]]


def test_each_loop_iteration_is_a_round_and_the_code_after_the_loop_joins_its_last():
    gemm = [(1, LOAD), (2, LOAD)] * 3 + [(3, STORE)]  # A and B tiles per iteration, then C
    assert starts([gemm]) == [[0, 2, 4, 6]]
    softmax = [(1, LOAD)] * 4 + [(2, LOAD), (3, STORE)]  # a reduction loop, then a second pass
    assert starts([softmax]) == [[0, 1, 2, 3, 5]]
    attention = [(9, LOAD)] + [(1, LOAD), (2, LOAD)] * 2 + [(3, STORE)]  # Q, then K and V per iteration
    assert starts([attention]) == [[0, 3, 5]]


def test_rounds_restart_with_every_program_and_stores_without_loads_share_one():
    assert starts([[(1, LOAD), (2, LOAD)], [(1, LOAD), (2, LOAD)], [(5, STORE), (6, STORE), (7, LOAD)]]) == [
        [0], [0], [0]]


def test_without_sites_every_event_is_a_round():
    assert round_starts(None, np.zeros(3, bool), np.array([2, 1])).tolist() == [True, True, True]
