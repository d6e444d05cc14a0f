"""The L2 model against a plain-Python LRU: exact hit/miss agreement, access by access."""

from collections import OrderedDict

import numpy as np
import pytest

from swizzleperf.sim.cache_model import CacheGeometry, access_range, set_indices, set_of, simulate_stream


# --- the oracle: written from the definitions, sharing nothing with the numba code -------------
def oracle_set(line: int, num_sets: int, scheme: str) -> int:
    if scheme == "modulo":
        return line % num_sets
    if scheme == "hash":  # MurmurHash3's fmix64, in Python integers
        mask = 2**64 - 1
        x = line
        x ^= x >> 33
        x = (x * 0xFF51AFD7ED558CCD) & mask
        x ^= x >> 33
        x = (x * 0xC4CEB9FE1A85EC53) & mask
        x ^= x >> 33
        if num_sets & (num_sets - 1) == 0:
            return x % num_sets
        return (x >> 32) * num_sets >> 32  # the high half scaled onto the sets (no division)
    bits = num_sets.bit_length() - 1
    folded = 0
    while line and bits:
        folded ^= line % num_sets
        line //= num_sets
    return folded


def oracle_hits(lines, num_sets: int, ways: int, scheme: str) -> list[bool]:
    """True LRU per set: an OrderedDict from oldest to newest."""
    sets = [OrderedDict() for _ in range(num_sets)]
    out = []
    for line in map(int, lines):
        lru = sets[oracle_set(line, num_sets, scheme)]
        hit = line in lru
        out.append(hit)
        if hit:
            lru.move_to_end(line)
        else:
            lru[line] = None
            if len(lru) > ways:
                lru.popitem(last=False)
    return out


def random_stream(rng, geometry: CacheGeometry, n: int) -> np.ndarray:
    """Lines over twice the cache's capacity, with a hot region so there are hits and evictions."""
    capacity = geometry.num_sets * geometry.ways
    cold = rng.integers(0, 2 * capacity + 2, n)
    hot = rng.integers(0, max(1, capacity // 2), n)
    offset = int(rng.integers(0, 4)) << 33  # high address bits matter to xor_fold
    return np.where(rng.random(n) < 0.5, hot, cold) + offset


def structured_streams(geometry: CacheGeometry) -> dict[str, np.ndarray]:
    capacity = geometry.num_sets * geometry.ways
    row_len = max(1, capacity // 4)
    return {
        # a loop just under / just over capacity: LRU keeps all of it, or (cyclic) none of it
        "loop_fits": np.tile(np.arange(capacity), 4),
        "loop_overflows": np.tile(np.arange(capacity + geometry.num_sets), 4),
        # a stride that lands every line in one set under modulo indexing
        "set_stride": np.tile(np.arange(0, 3 * geometry.ways * geometry.num_sets, geometry.num_sets), 3),
        # rows of a quarter of the cache, each read by three readers in turn, far above 2**32
        "shared_rows": np.concatenate([np.tile(np.arange(row_len) + r * row_len, 3) for r in range(20)]) + (5 << 36),
    }


GEOMETRIES = [
    CacheGeometry(num_sets, ways, scheme)
    for ways in (1, 2, 3, 4, 8, 12, 16, 17, 32)
    for num_sets, scheme in ((1, "modulo"), (4, "modulo"), (6, "modulo"), (16, "modulo"), (1, "xor_fold"),
                             (4, "xor_fold"), (16, "xor_fold"), (6, "hash"), (16, "hash"))
]


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"{g.num_sets}x{g.ways}-{g.set_index}")
def test_matches_oracle_access_by_access(geometry):
    rng = np.random.default_rng(geometry.num_sets * 100 + geometry.ways)
    streams = {"random": random_stream(rng, geometry, 3000), **structured_streams(geometry)}
    for name, lines in streams.items():
        expected = oracle_hits(lines, geometry.num_sets, geometry.ways, geometry.set_index)
        got = simulate_stream(lines, geometry)
        first_wrong = np.flatnonzero(got != np.array(expected))
        assert first_wrong.size == 0, f"{name}: first disagreement at access {first_wrong[:1]}"
    random_hits = simulate_stream(streams["random"], geometry).mean()
    assert 0.05 < random_hits < 0.95, "the random stream must exercise both hits and evictions"


def test_compulsory_misses_count_each_distinct_line_once():
    geometry = CacheGeometry(4, 2)
    lines = random_stream(np.random.default_rng(3), geometry, 2000)
    distinct, line_ids = np.unique(lines, return_inverse=True)
    seen_bits = np.zeros(len(distinct) // 64 + 1, dtype=np.uint64)
    hits, compulsory = access_range(lines, 0, len(lines), *geometry.empty_state(), *geometry.kernel_args,
                                    line_ids.astype(np.int32), seen_bits, np.zeros(0, dtype=bool))
    assert hits == sum(oracle_hits(lines, 4, 2, "modulo"))
    assert compulsory == len(distinct) < len(lines) - hits  # capacity and conflict misses are not counted


def test_lru_evicts_the_least_recently_used_way():
    # one set, two ways: A B A C -> C evicts B (A was used more recently); B then evicts A
    a, b, c = 7, 8, 9
    hits = simulate_stream(np.array([a, b, a, c, b, a, c]), CacheGeometry(1, 2))
    assert hits.tolist() == [False, False, True, False, False, False, False]
    # a cyclic loop one line larger than the set never hits under LRU
    assert not simulate_stream(np.tile(np.arange(5), 10), CacheGeometry(1, 4)).any()


def test_a_pure_stream_never_hits():
    for geometry in (CacheGeometry(2048, 16, "modulo"), CacheGeometry(2048, 16, "xor_fold"), CacheGeometry(64, 24)):
        assert not simulate_stream(np.arange(200_000) + (1 << 40), geometry).any()


def test_set_index_functions_by_hand():
    # xor_fold with 16 sets XORs the address's hex digits
    assert set_of(0x123, 1, 16, 4) == 0x3 ^ 0x2 ^ 0x1
    assert set_of(0xABC, 1, 16, 4) == 0xC ^ 0xB ^ 0xA == 13
    assert set_of(0x10, 1, 16, 4) == 1
    # modulo with a non-power-of-two set count, and the power-of-two mask path
    assert set_of(25, 0, 12, -1) == 1
    assert set_of(0x1234, 0, 16, 4) == 4
    assert set_of(12345, 1, 1, 0) == 0


@pytest.mark.parametrize("geometry", [CacheGeometry(2048, 16, "xor_fold"), CacheGeometry(2048, 16, "modulo"),
                                      CacheGeometry(2048, 16, "hash"), CacheGeometry(25600, 16, "hash"),
                                      CacheGeometry(12, 4, "modulo")], ids=lambda g: f"{g.num_sets}-{g.set_index}")
def test_vectorised_set_indices_agree(geometry):
    lines = np.random.default_rng(1).integers(0, 1 << 45, 2000)
    expected = [oracle_set(int(line), geometry.num_sets, geometry.set_index) for line in lines]
    assert set_indices(lines, geometry).tolist() == expected
    assert [set_of(line, *geometry.kernel_args[:3]) for line in lines] == expected


def test_xor_fold_spreads_a_power_of_two_stride_that_modulo_piles_into_one_set():
    lines = np.arange(64) * 2048  # a 256 KB stride of 128 B lines on a 2048-set cache
    assert len(set(set_indices(lines, CacheGeometry(2048, 16, "modulo")))) == 1
    assert len(set(set_indices(lines, CacheGeometry(2048, 16, "xor_fold")))) == 64
    assert len(set(set_indices(lines, CacheGeometry(2048, 16, "hash")))) > 60  # 64 lines, few collisions


def test_rejected_geometries_and_inputs():
    with pytest.raises(ValueError, match="power-of-two"):
        CacheGeometry(6, 4, "xor_fold")
    with pytest.raises(ValueError, match="unknown set index"):
        CacheGeometry(4, 4, "crc")
    with pytest.raises(ValueError, match="at least one set"):
        CacheGeometry(0, 4)
    with pytest.raises(ValueError, match="non-negative"):
        simulate_stream(np.array([3, -1]), CacheGeometry(4, 4))
