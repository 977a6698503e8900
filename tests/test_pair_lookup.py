"""The merge-pair lookup (Tables.pair_start / pair_list, searched by _vocab.tables_pair) against a plain dict.

The search narrows a left token's sorted list to one item with masked steps, so its edge cases are list
lengths (0, 1, 2, every length up to past 64, one long list) and right ids below, between, equal to and
above the list's: every (left, right) of a synthetic vocabulary is asked, on the built tables and on the
compiled round trip (Vocab.from_bytes reads the same lists from a buffer).
"""
import random

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


@pytest.fixture(scope="module")
def synthetic():
    return _synthetic()


def _check_all(vocab, want):
    wrong = []
    for left in range(N_TOKENS):
        for right in range(N_TOKENS):
            got = vocab.merge_of(left, right)
            if got != want.get((left, right)):
                wrong.append((left, right, got, want.get((left, right))))
    assert not wrong, wrong[:10]


def test_every_pair_of_a_synthetic_vocabulary(synthetic):
    vocab, want = synthetic
    assert vocab.pair_count == len(want)
    _check_all(vocab, want)


def test_every_pair_after_the_compiled_round_trip(synthetic):
    vocab, want = synthetic
    _check_all(Vocab.from_bytes(vocab.to_bytes()), want)


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
