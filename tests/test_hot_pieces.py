"""The table of recent pieces (BpeScratch.hot, read in _encoder.encode_state_span): a piece of up to 15 bytes
met lately is answered from the scratch's table, keyed by its bytes zero padded and its length.  The ids must
be tiktoken's whether the piece is met for the first time, again in the same call, or in a later call; pieces
that differ only by NUL bytes after them (equal padded words, different lengths), pieces at the text's end
(too close to it for the two 8-byte loads, so they take the long way), 15- and 16-byte pieces, and pieces of
1 to 4 ids."""
from __future__ import annotations

import random

import pytest

from _shared import assert_same_ids, corpus_text, tiktoken_reference, vocab_path

ctok = pytest.importorskip("ctok")

SEED = 20261206


@pytest.fixture(scope="module")
def pair():
    ref, _ = tiktoken_reference("o200k_base")
    enc = ctok.load(str(vocab_path("o200k_base", "o200k_base.tiktoken")))
    enc.set_prefix_cache(0)                 # every call encodes its pieces (no prefix reused)
    return enc, ref


def _atoms():
    # NUL-padded look-alikes: " " / " \0" / " \0\0", "ab" then "\0\0", whitespace runs around NULs
    out = [" \x00", " \x00\x00", "\x00", "\x00\x00", "\x00\x00\x00", " ", "  ", "ab", " ab", "\x00 ab"]
    # lengths 13-17 around the 15-byte limit, as words and as runs
    out += [" " + "x" * k for k in range(12, 18)] + ["-" * k for k in range(13, 18)] + [" " * k for k in range(13, 18)]
    # pieces of several ids: rare words, digit groups, punctuation runs
    out += [" zxqvbnm", " qwrtpsdfg", " Xyzzyplugh", "1234567", "?!?!?!?!", " électricité", " 中文字",
            "😀😃😄"]
    return out


def _texts(rnd, n):
    atoms = _atoms()
    prose = corpus_text("en_dracula.txt", 20000)
    out = []
    for _ in range(n):
        parts = [rnd.choice(atoms) + rnd.choice(["", " ", "\n", "x"]) for _ in range(rnd.randint(1, 40))]
        if rnd.random() < 0.3:
            a = rnd.randrange(len(prose) - 300)
            parts.insert(rnd.randrange(len(parts) + 1), prose[a:a + rnd.randint(1, 300)])
        out.append("".join(parts))
    return out


def test_recent_pieces_keep_the_reference_ids(pair):
    enc, ref = pair
    rnd = random.Random(SEED)
    texts = _texts(rnd, 400)
    want = [ref.encode_ordinary(t) for t in texts]
    for rounds in range(2):                 # the second round meets every piece again, in a warm table
        for text, ids in zip(texts, want):
            assert_same_ids(enc.encode_ordinary(text), ids, text, label=f"round {rounds}")
    # all of them in one text: pieces met earlier in the same call, and in the same batch of pieces
    joined = "".join(texts)
    assert_same_ids(enc.encode_ordinary(joined), ref.encode_ordinary(joined), joined, label="joined")


def test_padded_look_alikes_in_one_batch(pair):
    """A piece and the same bytes followed by NULs, side by side within one batch of pieces and at the text's end
    (the zero padding alone would make their keys equal)."""
    enc, ref = pair
    for tail in ["", " \x00", " \x00\x00", "ab", "ab\x00\x00"]:
        for text in [" \x00 \x00\x00 x \x00\x00 \x00" * 8 + tail, "ab\x00\x00 ab ab\x00 ab" * 9 + tail,
                     " \x00" * 50 + " " * 3 + tail]:
            want = ref.encode_ordinary(text)
            for _ in range(3):
                assert_same_ids(enc.encode_ordinary(text), want, text)


def test_batches_and_threads(pair):
    """Batches take a pooled scratch per thread (each with its own table); ids as one by one."""
    enc, ref = pair
    rnd = random.Random(SEED + 1)
    texts = _texts(rnd, 300)
    want = [ref.encode_ordinary(t) for t in texts]
    for threads in (1, 2, 4):
        assert enc.encode_ordinary_batch(texts, num_threads=threads) == want
        ids, offsets = enc.encode_batch_flat(texts, num_threads=threads)
        assert ids.tolist() == [i for w in want for i in w]


def test_warm_text_with_a_few_new_pieces(pair):
    """Warm text (nearly every piece answered by the table, so batches take the one-pass way: each piece probed
    and written at once) with a new piece every so often: a rare word, a piece longer than 15 bytes or of more
    than 3 ids, a token not met yet, a piece at the text's end; each miss goes the long way on the spot."""
    enc, ref = pair
    rnd = random.Random(SEED + 2)
    prose = corpus_text("en_dracula.txt", 60000)
    enc.encode_ordinary(prose)
    enc.encode_ordinary(prose)                  # the table holds the prose's pieces
    news = [" zxqvbnm", " Xyzzyplugh", " " + "y" * 20, "-" * 30, " électricité", " 中文字", "1234567",
            "😀😃😄", " \x00", "ab\x00\x00", " Transylvania", " " * 17]
    for _ in range(60):
        a = rnd.randrange(len(prose) - 3000)
        words = prose[a:a + rnd.randint(200, 3000)].split(" ")
        for _ in range(rnd.randint(1, 1 + len(words) // 40)):
            words.insert(rnd.randrange(len(words) + 1), rnd.choice(news).strip(" ") or "\x00")
        text = " ".join(words) + rnd.choice(["", rnd.choice(news)])
        assert_same_ids(enc.encode_ordinary(text), ref.encode_ordinary(text), text, label="warm, few new")
    texts = [prose[a:a + 500] + rnd.choice(news) for a in range(0, 50000, 500)]
    ids, offsets = enc.encode_batch_flat(texts, num_threads=1)
    assert ids.tolist() == [i for t in texts for i in ref.encode_ordinary(t)]


def _long_piece_text(rnd, long_tokens):
    """Pieces of 17-48 bytes, met again and again: Russian and Greek words, long English and code words, long
    punctuation runs, and pieces of that length that are themselves tokens."""
    words = [" достопримечательность", " человеколюбие", " Благословенный", " προσωπικότητα", " internationalization",
             " counterproductive", "_initialize_components", " electroencephalography", "=" * 20, "-" * 33,
             " " + "ж" * 12, "…" * 6]
    words += long_tokens
    return "".join(rnd.choice(words) + rnd.choice(["", " и", ",", "\n", " the"]) for _ in range(3000))


@pytest.mark.parametrize("family", ["o200k", "cl100k", "llama3-hf", "qwen3", "gpt2"])
def test_long_pieces_again(family):
    """A piece of more than 16 bytes met again is answered by the piece cache before the token table is asked
    (_encoder.encode_piece_hashed): the ids of a first and of later passes, and of pieces that are tokens of that
    length, must be the reference's, for rank files (whole pieces first) and tokenizer.json files (with and
    without ignore_merges)."""
    rnd = random.Random(SEED + 3)
    if family in ("o200k", "cl100k"):
        name = family + "_base"
        ref, _ = tiktoken_reference(name)
        enc = ctok.load(str(vocab_path(name, name + ".tiktoken")))
        want = ref.encode_ordinary
        eligible = [b.decode() for b in ref.token_byte_values() if 17 <= len(b) <= 48 and b.isascii()]
        long_tokens = eligible[::max(1, len(eligible) // 40)][:40]
    else:
        tokenizers = pytest.importorskip("tokenizers")
        path = str(vocab_path(family, "tokenizer.json"))
        hf = tokenizers.Tokenizer.from_file(path)
        enc = ctok.load(path)
        want = lambda t: hf.encode(t, add_special_tokens=False).ids      # noqa: E731
        added = hf.get_added_tokens_decoder()
        eligible = [text for text in (hf.decode([tid]) for tid in sorted(hf.get_vocab().values()) if tid not in added)
                    if 17 <= len(text.encode()) <= 48 and text.isascii()]
        long_tokens = eligible[::max(1, len(eligible) // 40)][:40]
    assert long_tokens
    text = _long_piece_text(rnd, long_tokens)
    expected = want(text)
    enc.set_prefix_cache(0)                 # every call encodes its pieces; ctok.load may share this object
    try:
        for rounds in range(3):
            assert_same_ids(enc.encode_ordinary(text), expected, text, label=f"{family} round {rounds}")
        # the pieces alone, each its own call (a text of one piece), after the cache holds them
        for piece in sorted(set(long_tokens))[:40]:
            assert_same_ids(enc.encode_ordinary(piece), want(piece), piece, label=f"{family} alone")
    finally:
        enc.set_prefix_cache(None)          # back to the default for the tests that share it
