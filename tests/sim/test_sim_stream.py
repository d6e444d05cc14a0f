"""Compact stored traces: replayed from disk in chunks they give exactly the in-memory counts; set
sampling's estimate against full simulation."""

import numpy as np
import pytest
from test_sim_engine import CONFIGS, engine_counts, make_spec, make_trace, random_programs

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.sim import chunks
from swizzleperf.sim.engine import prepare, simulate
from swizzleperf.sim.trace.record import Trace
from swizzleperf.sim.trace.stored import StoredTrace, write_trace


def as_trace(local) -> Trace:
    return Trace(lines=local.lines, is_store=local.is_store, event_offsets=local.event_offsets,
                 program_offsets=local.program_offsets, line_bytes=local.line_bytes, sectors=local.sectors,
                 sector_bytes=local.sector_bytes, sites=local.sites)


def random_case(seed: int, programs: int = 40, line_range: int = 80):
    rng = np.random.default_rng(seed)
    progs = random_programs(rng, programs, line_range)
    stores = {(p, e) for p, program in enumerate(progs) for e in range(len(program)) if rng.random() < 0.2}
    masks = {line: int(rng.integers(1, 16)) for line in range(400)}
    sites = [rng.integers(0, 4, len(program)).tolist() for program in progs] if seed % 2 else None  # rounds
    return as_trace(make_trace(progs, stores, masks, sites)), rng.permutation(len(progs))


def count_chunks(monkeypatch) -> list[int]:
    calls = []
    real = chunks.replay_chunk

    def counted(*args):
        calls.append(1)
        return real(*args)
    monkeypatch.setattr(chunks, "replay_chunk", counted)
    return calls


@pytest.mark.parametrize("name", ["rr8-chunk1-res2-2way", "inorder-res5-17way-3sets", "rr4-res4-2cus-l1",
                                  "inorder-res6-3cus-l1-sectors"])
def test_stored_trace_in_tiny_chunks_equals_in_memory_simulation(name, tmp_path, monkeypatch):
    hw = CONFIGS[name]
    for seed in range(3):
        trace, perm = random_case(seed)
        stored = StoredTrace(write_trace(trace, tmp_path / f"t{seed}.runs"))
        assert stored.equals(trace) and stored.num_accesses == trace.num_accesses
        calls = count_chunks(monkeypatch)
        streamed = simulate(stored, perm, hw, memory_bytes=1)  # a bound no program fits: as many chunks as can be
        assert len(calls) > hw.num_domains, "a tiny bound must force several chunks"
        in_memory = simulate(trace, perm, hw)
        assert engine_counts(streamed) == engine_counts(in_memory)
        assert prepare(stored).bounds(hw.sectors_per_line) == prepare(trace).bounds(hw.sectors_per_line)
        calls.clear()
        assert engine_counts(simulate(stored, perm, hw)) == engine_counts(in_memory) and len(calls) == hw.num_domains
        # a recorded placement survives the chunks: running programs keep their CU from one chunk to the next
        cus = np.random.default_rng(seed).integers(0, hw.cus_per_domain, len(perm))
        assert engine_counts(simulate(stored, perm, hw, memory_bytes=1, recorded_cus=cus)) == \
            engine_counts(simulate(trace, perm, hw, recorded_cus=cus))


def test_stored_program_matches_the_trace(tmp_path):
    trace, _ = random_case(5, programs=12)
    stored = StoredTrace(write_trace(trace, tmp_path / "t.runs"))
    for p in (0, 5, 11):
        want, got = trace.program(p), stored.program(p)
        for field in ("lines", "is_store", "event_offsets", "sectors", "sites"):
            assert np.array_equal(getattr(want, field), getattr(got, field)), field
    without = StoredTrace(write_trace(random_case(4, programs=12)[0], tmp_path / "u.runs"))
    assert without.expanded.sites is None  # a trace that did not record sites reads back without them


# --- set sampling ------------------------------------------------------------------------------------
def test_sampling_every_set_is_full_simulation():
    trace, perm = random_case(1)
    hw = CONFIGS["inorder-res6-3cus-l1-sectors"]
    assert engine_counts(simulate(trace, perm, hw, sample=1)) == engine_counts(simulate(trace, perm, hw))
    one_set = make_spec(1, sets=1, ways=4, policy="in_order", resident=4, cus=2, l1_sets=2)
    full = simulate(trace, perm, one_set)
    sampled = simulate(trace, perm, one_set, sample=4)  # 1 set in 4 of a 1-set cache: every set
    assert engine_counts(sampled) == engine_counts(full) and sampled.sampling and full.sampling is None


def test_sampling_estimate_is_close_on_a_large_synthetic_trace():
    """256 programs streaming tiles with reuse between neighbours, on the h100 preset cut to 512 sets
    per partition: 1 set in 8 estimates the read hit rate within 1 point."""
    rng = np.random.default_rng(0)
    programs = [[list(range(b, b + 16)) for b in rng.integers(0, 60_000, size=40) // 16 * 16] for _ in range(256)]
    trace = as_trace(make_trace(programs))
    hw = PRESETS["h100"].model_copy(update={"l2_bytes_per_domain": 2 * 512 * 16 * 128, "sector_bytes": None,
                                            "l1_bytes_per_cu": 4 * 8 * 128})
    perm = np.arange(256)
    full, sampled = simulate(trace, perm, hw), simulate(trace, perm, hw, sample=8)
    assert sampled.read_lookups == full.read_lookups  # the L1 sees every load: its misses are exact
    assert 5 < full.read_hit_pct < 95
    assert abs(sampled.read_hit_pct - full.read_hit_pct) < 1.0
    assert "1 L2 set in 8" in sampled.to_report("k", "s", hw).notes[-1]
