"""The merge-pair lookup (Tables.pair_region, searched by _vocab.tables_pair_key) against a plain dict.

A left token's merges are a sorted run of at most 16, or a static B-tree of 16-entry nodes over them, so the
edge cases are run lengths (0, 1, 2, every length up to past 64, and around each node boundary: 16/17,
256/257, 4,096/4,097, up to three index levels) and right ids below, between, equal to and above the run's:
every (left, right) of two synthetic vocabularies is asked, on the built tables and on the compiled round
trip (Vocab.from_bytes reads the same regions from a buffer, and refuses a damaged index).
"""
import functools
import random
import struct

import pytest

from ctok._vocab import Vocab

SEED = 4321
N_TOKENS = 420


def _synthetic():
    rnd = random.Random(SEED)
    tokens = [b"t%03d" % i for i in range(N_TOKENS)]
    want = {}
    merges = []
    # Left token L has L merges (0..79), left 80 has 300: rights drawn at random, ranks in a shuffled order.
    sizes = {left: left for left in range(80)}
    sizes[80] = 300
    for left, k in sizes.items():
        for right in rnd.sample(range(N_TOKENS), k):
            new = rnd.randrange(N_TOKENS)
            merges.append((left, right, new))
    rnd.shuffle(merges)
    for rank, (a, b, new) in enumerate(merges):
        want[(a, b)] = (rank, new)
    return Vocab(tokens, merges), want


DEEP_TOKENS = 5200
DEEP_SIZES = [1, 2, 15, 16, 17, 31, 32, 33, 255, 256, 257, 300, 4095, 4096, 4097, DEEP_TOKENS]


def _deep():
    rnd = random.Random(SEED + 1)
    tokens = [b"u%05d" % i for i in range(DEEP_TOKENS)]
    merges = []
    for left, k in enumerate(DEEP_SIZES):
        for right in rnd.sample(range(DEEP_TOKENS), k):
            merges.append((left, right, rnd.randrange(DEEP_TOKENS)))
    rnd.shuffle(merges)
    want = {(a, b): (rank, new) for rank, (a, b, new) in enumerate(merges)}
    return Vocab(tokens, merges), want


@functools.lru_cache(maxsize=None)
def _case(name):
    # (vocab, want, lefts, rights): every left with merges and every right of one synthetic vocabulary.
    if name == "short runs":
        vocab, want = _synthetic()
        return vocab, want, range(N_TOKENS), range(N_TOKENS)
    vocab, want = _deep()
    return vocab, want, range(len(DEEP_SIZES) + 1), range(DEEP_TOKENS)


def _check(vocab, want, lefts, rights):
    wrong = []
    for left in lefts:
        for right in rights:
            got = vocab.merge_of(left, right)
            if got != want.get((left, right)):
                wrong.append((left, right, got, want.get((left, right))))
    assert not wrong, wrong[:10]


@pytest.mark.parametrize("name", ["short runs", "long runs"])
def test_every_pair(name):
    vocab, want, lefts, rights = _case(name)
    assert vocab.pair_count == len(want)
    _check(vocab, want, lefts, rights)


@pytest.mark.parametrize("name", ["short runs", "long runs"])
def test_every_pair_after_the_compiled_round_trip(name):
    vocab, want, lefts, rights = _case(name)
    _check(Vocab.from_bytes(vocab.to_bytes()), want, lefts, rights)


def _pair_sections(data):
    # Byte offsets of the compiled tables' pair_region, pair_right and pair_key (Vocab.to_bytes' layout).
    up8 = lambda x: (x + 7) & ~7
    _, n, blob_len, slot_size, _, _, pair_slots, _ = struct.unpack_from("<8Q", data, 0)
    region = 64 + (n + 1) * 8 + up8(n + 1) + up8(blob_len) + slot_size * 16
    right = region + up8((n + 1) * 4)
    key = right + up8((pair_slots + 16) * 4)
    return n, region, right, key


def test_damaged_index_is_refused():
    # An index entry that is not the largest right under it, or a count that does not fit the region, would
    # send the lookup down the wrong node: from_bytes refuses both.
    vocab = _case("long runs")[0]
    good = vocab.to_bytes()
    n, region, right, key = _pair_sections(good)
    left = DEEP_SIZES.index(4097)
    start = struct.unpack_from("<I", good, region + 4 * left)[0]
    assert struct.unpack_from("<I", good, right + 4 * start)[0] == 4097       # the count
    for slot, value in ((start, 4096), (start + 1, 0), (start + 2, 1)):
        bad = bytearray(good)
        struct.pack_into("<I", bad, right + 4 * slot, value)
        with pytest.raises(ValueError, match="compiled vocabulary"):
            Vocab.from_bytes(bytes(bad))
    bad = bytearray(good)
    struct.pack_into("<Q", bad, key + 8 * (start + 1), 5)                     # an index slot with a key
    with pytest.raises(ValueError, match="compiled vocabulary"):
        Vocab.from_bytes(bytes(bad))


def test_o200k_merges_of_its_own_tokens():
    # A merge found between two tokens that split a token must name the token of their joined bytes
    # (checked against an independent lookup: the token table), and many such merges must be found.
    import ctok
    vocab = ctok.get_encoding("o200k_base")._core.vocab
    rnd = random.Random(SEED)
    ids = rnd.sample(range(256, 199_000), 3000)
    found = 0
    for tid in ids:
        b = vocab.token_bytes(tid)
        if b is None:
            continue
        for cut in range(1, len(b)):
            left, right = vocab.token_id(b[:cut]), vocab.token_id(b[cut:])
            if left < 0 or right < 0:
                continue
            got = vocab.merge_of(left, right)
            if got is not None:
                rank, new = got
                assert vocab.token_bytes(new) == vocab.token_bytes(left) + vocab.token_bytes(right)
                found += 1
    assert found > 1000
