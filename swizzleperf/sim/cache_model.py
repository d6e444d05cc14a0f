"""The cache model (each die's L2, each CU's L1): set-associative, true-LRU, sectored, in numba.

The simulator replays tens of millions of line accesses per candidate remap, so one access must
cost a few dozen instructions and touch little memory. State per set:

- `ways` tags, each the full line address (-1 = empty), with the way's valid-sector mask in its
  low 8 bits. Storing the whole line keeps the tag correct for any set-index function.
- for up to 16 ways, the recency order packed as 4-bit way numbers in one 64-bit word: nibble 0
  is the most recently used way, nibble `ways-1` the victim. A hit moves its way's nibble to the
  front; a miss refills the victim's way and moves it to the front. Empty ways start at the back
  of the order, so a set fills up before it evicts anything.
- above 16 ways (no room for the order in one word) the tags themselves are kept in recency
  order and a hit moves its tag to the front. Same results, more data moved per access.

- the valid-sector mask: NVIDIA tags 128-byte lines but fills 32-byte
  sectors: a lookup asks for some sectors of a line and hits on those already valid. A tag miss
  evicts the LRU line and starts the new one with only the sectors asked for. Where a line is
  one sector (AMD), the mask is a single bit.

What a lookup means (read or write, fetch or not) is the caller's business: `lookup` only says
which sectors were there. The set-index function is pluggable
(`SET_INDEX`): MI300X's hash is unpublished, so the simulator can show how much a prediction
depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

# --- set-index functions -----------------------------------------------------------------------
MODULO = 0  # set = line % num_sets: the textbook index, any set count
XOR_FOLD = 1  # set = XOR of the line address cut into log2(num_sets)-bit pieces (power-of-two sets)
HASH = 2  # set = mix64(line) mapped onto num_sets: every address bit affects every set bit (any set count)
SET_INDEX = {"modulo": MODULO, "xor_fold": XOR_FOLD, "hash": HASH}

# mix64: the 64-bit finaliser of MurmurHash3 (xor-shift, multiply, twice). Real GPUs hash
# addresses over channels and sets so that power-of-two strides do not pile into a few sets;
# the exact functions are unpublished, and a thoroughly mixing hash is the neutral stand-in.
MIX_MUL1 = np.uint64(0xFF51AFD7ED558CCD)
MIX_MUL2 = np.uint64(0xC4CEB9FE1A85EC53)
_U33 = np.uint64(33)
_U32 = np.uint64(32)
HOME_SALT = np.uint64(0x5851F42D4C957F2D)

PACKED_MAX_WAYS = 16  # 16 nibbles fill one 64-bit recency word
_NIBBLE = np.int64(15)
# A way's entry is (line << 8) | valid-sector mask: one word per way, so a lookup touches one array
# (the simulator is bound by its own memory traffic). Lines must stay below 2**55; -1 is empty.
_VALID_BITS = np.int64(8)
_VALID_MASK = np.int64(255)
MAX_LINE = 2**55


@numba.njit(cache=True, nogil=True, inline="always")
def mix64(x):
    """MurmurHash3's 64-bit finaliser: every input bit affects every output bit."""
    x ^= x >> _U33
    x *= MIX_MUL1
    x ^= x >> _U33
    x *= MIX_MUL2
    x ^= x >> _U33
    return x


@numba.njit(cache=True, nogil=True, inline="always")
def _onto(x, n):
    """The high 32 bits of hash `x` scaled onto 0..n-1: a multiply, not a division (n < 2**32)."""
    return np.int64(((x >> _U32) * np.uint64(n)) >> _U32)


@numba.njit(cache=True, nogil=True, inline="always")
def home_partition(line, partitions):
    """The L2 partition a line's home is in: unpublished, measured balanced and with no single address
    bit deciding it, so a hash independent of the set index (a different input to the same mixer)."""
    if partitions == 1:
        return 0
    return _onto(mix64(np.uint64(line) ^ HOME_SALT), partitions)


@numba.njit(cache=True, nogil=True, inline="always")
def set_of(line, scheme, num_sets, set_bits):
    """The set `line` maps to. `set_bits` is log2(num_sets) for power-of-two counts, else -1."""
    if num_sets == 1:
        return 0
    if scheme == HASH:
        x = mix64(np.uint64(line))
        if set_bits >= 0:  # the low bits for the usual power-of-two set counts
            return np.int64(x & np.uint64(num_sets - 1))
        return _onto(x, num_sets)
    if scheme == XOR_FOLD:
        mask = num_sets - 1
        folded = 0
        while line:
            folded ^= line & mask
            line >>= set_bits
        return folded
    if set_bits >= 0:
        return line & (num_sets - 1)
    return line % num_sets


@numba.njit(cache=True, nogil=True, inline="always")
def _lookup_packed(tags, recency, s, line, mask, ways):
    """One lookup of `line`'s sectors `mask` in set `s` (recency packed in `recency[s]`).

    Returns the sectors of the line that were valid before (0 on a tag miss); afterwards the line
    is most recently used and holds `mask` too (a tag miss evicts the LRU way and starts it empty)."""
    order = recency[s]
    way = -1
    for w in range(ways):
        if tags[s, w] >> _VALID_BITS == line:
            way = w
            break
    if way >= 0:
        prior = tags[s, way] & _VALID_MASK
        pos = 0
        while ((order >> (4 * pos)) & _NIBBLE) != way:
            pos += 1
    else:
        prior = 0
        pos = ways - 1
        way = (order >> (4 * pos)) & _NIBBLE
        tags[s, way] = line << _VALID_BITS
    tags[s, way] |= mask
    # nibbles below `pos` move up by one, `way` goes to nibble 0, nibbles above `pos` stay
    below = order & ((np.int64(1) << (4 * pos)) - 1)
    above = order & ((np.int64(-1) << (4 * pos)) << 4)  # two shifts: 4 * (pos + 1) may be 64
    recency[s] = above | (below << 4) | way
    return prior


@numba.njit(cache=True, nogil=True, inline="always")
def _lookup_ordered(tags, s, line, mask, ways):
    """`_lookup_packed` for a set whose entries are kept most-recent first."""
    pos = ways - 1
    entry = line << _VALID_BITS
    for w in range(ways):
        if tags[s, w] >> _VALID_BITS == line:
            pos = w
            entry = tags[s, w]
            break
    for w in range(pos, 0, -1):
        tags[s, w] = tags[s, w - 1]
    tags[s, 0] = entry | mask
    return entry & _VALID_MASK


@numba.njit(cache=True, nogil=True, inline="always")
def lookup(tags, recency, s, line, mask, ways):
    """Look up (and fill) sectors `mask` of `line` in set `s`; returns the sectors that were valid."""
    if ways <= PACKED_MAX_WAYS:
        return _lookup_packed(tags, recency, s, line, mask, ways)
    return _lookup_ordered(tags, s, line, mask, ways)


@numba.njit(cache=True, nogil=True, inline="always")
def add_to_last(tags, recency, s, mask, ways):
    """Make sectors `mask` valid in the line `lookup` just touched in set `s` (its most recently used way: no
    search); returns those of them that were not valid before."""
    way = recency[s] & _NIBBLE if ways <= PACKED_MAX_WAYS else 0
    added = mask & ~tags[s, way] & _VALID_MASK
    tags[s, way] |= added
    return added


@numba.njit(cache=True, nogil=True, inline="always")
def first_touch(seen_bits, line_id):
    """Mark `line_id` seen; True if it was not seen before."""
    word, bit = line_id >> 6, np.uint64(1) << np.uint64(line_id & 63)
    if seen_bits[word] & bit:
        return False
    seen_bits[word] |= bit
    return True


@numba.njit(cache=True, nogil=True)
def access_range(lines, start, stop, tags, recency, scheme, num_sets, set_bits, ways,
                 line_ids, seen_bits, hit_flags):
    """Replay whole-line accesses `lines[start:stop]` in order; returns (hits, compulsory misses).

    A miss is compulsory when its line was never accessed before: `seen_bits` is a bitset over
    `line_ids` (dense line numbers), consulted only on misses since a hit is never a first
    access; pass it empty to skip the count. `hit_flags` is bool[len(lines)] to record each
    outcome, or empty.
    """
    count_compulsory = seen_bits.shape[0] > 0
    record = hit_flags.shape[0] > 0
    hits = 0
    compulsory = 0
    for k in range(start, stop):
        s = set_of(lines[k], scheme, num_sets, set_bits)
        hit = lookup(tags, recency, s, lines[k], 1, ways) != 0
        if hit:
            hits += 1
        elif count_compulsory:
            compulsory += first_touch(seen_bits, line_ids[k])
        if record:
            hit_flags[k] = hit
    return hits, compulsory


# --- the Python face ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CacheGeometry:
    """One domain's L2 as the model sees it."""

    num_sets: int
    ways: int
    set_index: str = "modulo"

    def __post_init__(self) -> None:
        if self.num_sets < 1 or self.ways < 1:
            raise ValueError(f"a cache needs at least one set and one way, got {self.num_sets} x {self.ways}")
        if self.set_index not in SET_INDEX:
            raise ValueError(f"unknown set index '{self.set_index}': use one of {', '.join(SET_INDEX)}")
        if self.set_index == "xor_fold" and self.set_bits < 0:
            raise ValueError(f"xor_fold needs a power-of-two set count, got {self.num_sets}")

    @property
    def set_bits(self) -> int:
        """log2(num_sets) for a power-of-two set count, else -1."""
        n = self.num_sets
        return n.bit_length() - 1 if n & (n - 1) == 0 else -1

    @property
    def kernel_args(self) -> tuple[int, int, int, int]:
        """(scheme, num_sets, set_bits, ways): what the numba kernels take."""
        return SET_INDEX[self.set_index], self.num_sets, self.set_bits, self.ways

    def empty_state(self, copies: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """`copies` cold caches stacked set after set (copy c owns sets c*num_sets ...): (tags
        int64[copies*num_sets, ways] all -1, recency int64[copies*num_sets])."""
        sets = copies * self.num_sets
        tags = np.full((sets, self.ways), -1, dtype=np.int64)
        # nibble i holds way i: empty ways are evicted from the highest down, all before any filled way
        initial = sum(w << (4 * w) for w in range(min(self.ways, PACKED_MAX_WAYS)))
        recency = np.full(sets, initial, dtype=np.uint64).view(np.int64)  # bit pattern
        return tags, recency


def set_indices(lines: np.ndarray, geometry: CacheGeometry) -> np.ndarray:
    """int64 set index of every line (vectorised; for analysing how lines spread over sets)."""
    lines = np.asarray(lines, dtype=np.int64)
    if geometry.num_sets == 1:
        return np.zeros_like(lines)
    if geometry.set_index == "modulo":
        return lines % geometry.num_sets
    if geometry.set_index == "hash":
        x = lines.astype(np.uint64)
        x ^= x >> _U33
        x *= MIX_MUL1
        x ^= x >> _U33
        x *= MIX_MUL2
        x ^= x >> _U33
        if geometry.set_bits >= 0:
            return (x & np.uint64(geometry.num_sets - 1)).astype(np.int64)
        return (((x >> _U32) * np.uint64(geometry.num_sets)) >> _U32).astype(np.int64)
    mask, folded, rest = geometry.num_sets - 1, np.zeros_like(lines), lines.copy()
    while rest.any():
        folded ^= rest & mask
        rest >>= geometry.set_bits
    return folded


def simulate_stream(lines: np.ndarray, geometry: CacheGeometry) -> np.ndarray:
    """Replay one access stream through one cold cache; bool[len(lines)], True where it hit."""
    lines = np.ascontiguousarray(lines, dtype=np.int64)
    if lines.size and (lines.min() < 0 or lines.max() >= MAX_LINE):
        raise ValueError("line addresses must be non-negative and below 2**55")
    hit_flags = np.zeros(lines.shape[0], dtype=np.bool_)
    no_line_ids, no_seen_bits = np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.uint64)  # the engine's types
    access_range(lines, 0, lines.shape[0], *geometry.empty_state(), *geometry.kernel_args, no_line_ids, no_seen_bits,
                 hit_flags)
    return hit_flags
