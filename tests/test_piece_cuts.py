"""Pieces cut where no merge can cross (CoreEncoder.cuts_pieces, _encoder.encode_parts).

A merge makes a token of two neighbouring symbols, so the token holds the byte on each side of their boundary.
Where no token holds the two bytes around a boundary side by side (Vocab.token_bigrams), BPE never joins across
it, and the piece's ids are its parts' ids one after another.  SentencePiece-style files (words run from one
marker run to the next, punctuation and newlines included) and pretokenizer-less kinds use this.  The ids must
stay HF tokenizers' and those of the same encoder with the cutting off, for text of every kind, and for bytes
that are no UTF-8 (the parts must start their characters where the whole piece does)."""
from __future__ import annotations

import random

import pytest

from _shared import adversarial_strings, assert_same_ids, corpus_texts, vocab_path

ctok = pytest.importorskip("ctok")
from ctok._encoder import CoreEncoder  # noqa: E402
from ctok._vocab import Vocab  # noqa: E402

SP_FILES = ["mistral-7b-v0.1/tokenizer.json", "mistral-7b-v0.3/tokenizer.json", "llama2/tokenizer.json"]
SEED = 20261204
PRETOK_WHOLE = 0

# Words with punctuation, newlines and digits glued to them (a marker word holds all of these), and
# characters of other scripts next to ASCII.
PARTS = ["said", "hello", "world", ",", ".", "!", "?", ":", ";", "(", ")", "[", "]", "'", '"', "\n", "\n\n", "\t",
         " ", "  ", "    ", "42", "3.14", "-", "--", "_", "/", "#", "é", "über", "Привет", "中文", "日本語", "。", "،",
         "كلمة", "\U0001F600", "\U0001F468\u200d\U0001F469", "\u2581", "x", "a", "s"]


def _random_texts(rnd, n):
    return ["".join(rnd.choice(PARTS) for _ in range(rnd.randint(1, 30))) for _ in range(n)]


@pytest.fixture(scope="module", params=SP_FILES)
def sp(request, tmp_path_factory):
    # The loaded encoding (piece cache on), and a second one over a copy of the file with the piece cache
    # off, whose cutting is switched off and on around each text: a cached result cannot hide a difference.
    import os
    import shutil
    tokenizers = pytest.importorskip("tokenizers")
    path = vocab_path(*request.param.split("/"))
    if not path.exists():
        pytest.skip(f"{path} not in shared")
    on = ctok.load(str(path))
    copy = tmp_path_factory.mktemp("cuts") / "tokenizer.json"
    shutil.copy(path, copy)
    old = os.environ.get("CTOK_PIECE_CACHE_BYTES")
    os.environ["CTOK_PIECE_CACHE_BYTES"] = "0"
    try:
        bare = ctok.load(str(copy))
    finally:
        if old is None:
            del os.environ["CTOK_PIECE_CACHE_BYTES"]
        else:
            os.environ["CTOK_PIECE_CACHE_BYTES"] = old
    assert bare._core is not on._core and bare._core.piece_cache_bytes == 0
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.encode_special_tokens = True
    return on, bare, ref


def _both(bare, text):
    bare._core._set_cuts(False)
    try:
        whole = bare.encode_ordinary(text)
    finally:
        bare._core._set_cuts(True)
    return bare.encode_ordinary(text), whole


def test_sentencepiece_files_cut_their_pieces(sp):
    on, bare, _ = sp
    assert on._core.cuts_pieces and bare._core.cuts_pieces


def test_corpus_and_adversarial_text_match_hf_with_and_without_cuts(sp):
    on, bare, ref = sp
    texts = [t for _, t in corpus_texts()] + [t for _, t in adversarial_strings()]
    texts += _random_texts(random.Random(SEED), 400)
    for text in texts:
        if any("\ud800" <= c <= "\udfff" for c in text):
            continue                                    # tokenizer.json files refuse lone surrogates
        want = ref.encode(text, add_special_tokens=False).ids
        assert_same_ids(on.encode_ordinary(text), want, text, "cache on, cuts on")
        cut, whole = _both(bare, text)
        assert_same_ids(cut, want, text, "cache off, cuts on")
        assert_same_ids(whole, want, text, "cache off, cuts off")


def test_repeated_pieces_come_back_the_same_from_the_cache(sp):
    # A cut piece's ids are stored whole in the piece cache; a later sighting must read the same ids.
    on, _, ref = sp
    text = "Then he said, quietly: (well...) 'no'; 42.\n" * 3 + "said, said. said!\n"
    for _ in range(3):
        assert on.encode_ordinary(text) == ref.encode(text, add_special_tokens=False).ids


def test_regex_pretokenizers_do_not_cut(o200k):
    # Their pieces are cut nearly everywhere a byte-pair cut could go already (their CJK runs are cut by
    # character pairs instead: test_char_cuts.py).
    assert not o200k._core.cuts_pieces


# ---- synthetic vocabularies: bytes that are no UTF-8, every cut position ----

ALPHABET = ["a", "b", "c", ",", ".", " ", "\n", "(", ")", "é", "ü", "中", "文", "\U0001F600"]


def _byte_level(rnd, n_merges=80):
    tokens = [bytes([i]) for i in range(256)]
    pool = sorted({b for ch in ALPHABET for b in ch.encode()})
    return _grow(rnd, tokens, pool, n_merges)


def _char_level(rnd, n_merges=80):
    tokens = [ch.encode() for ch in ALPHABET] + [f"<0x{i:02X}>".encode() for i in range(256)]
    return _grow(rnd, tokens, list(range(len(ALPHABET))), n_merges)


def _grow(rnd, tokens, pool, n_merges):
    # Random merges of the pool's tokens, each making the concatenation of its two sides (ranked in order).
    seen = set(tokens)
    merges = []
    while len(merges) < n_merges:
        a, b = rnd.choice(pool), rnd.choice(pool)
        t = tokens[a] + tokens[b]
        if t in seen or len(t) > 12:
            continue
        seen.add(t)
        tokens.append(t)
        merges.append((a, b, len(tokens) - 1))
        pool.append(len(tokens) - 1)
    return tokens, merges


def _random_bytes(rnd, n):
    # Mostly the alphabet's characters, with stray continuation bytes, lead bytes without their
    # continuations (which the char-level first symbols read greedily) and bytes no token starts with.
    out = bytearray()
    while len(out) < n:
        r = rnd.random()
        if r < 0.75:
            out += rnd.choice(ALPHABET).encode()
        elif r < 0.85:
            out.append(rnd.choice([0x80, 0xA9, 0xBF]))
        elif r < 0.95:
            out.append(rnd.choice([0xC3, 0xE4, 0xF0]))
        else:
            out.append(rnd.choice([0x00, 0x7F, 0xFF, 0x41]))
    return bytes(out)


@pytest.mark.parametrize("level", ["byte", "char"])
@pytest.mark.parametrize("cache", [0, 1 << 20])
def test_cut_and_whole_agree_on_any_bytes(level, cache):
    rnd = random.Random(SEED + (level == "char") + 2 * bool(cache))
    for trial in range(12):
        tokens, merges = (_byte_level if level == "byte" else _char_level)(rnd)
        kw = dict(pretok_kind=PRETOK_WHOLE, piece_cache_bytes=cache)
        if level == "char":
            kw.update(char_level=True, byte_fallback=True, ignore_merges=False)
        on = CoreEncoder(tokens, merges, **kw)
        off = CoreEncoder(tokens, merges, **kw)
        off._set_cuts(False)
        assert on.cuts_pieces and not off.cuts_pieces
        for _ in range(150):
            data = _random_bytes(rnd, rnd.randint(1, 90))
            assert on.encode_ordinary(data) == off.encode_ordinary(data), (trial, data)


def test_no_cuts_where_unknowns_fuse_or_special_symbols_merge():
    rnd = random.Random(SEED + 7)
    tokens, merges = _char_level(rnd, 20)
    unk = len(tokens)
    tokens = tokens + [b"<unk>"]
    # fuse_unk joins unknowns on both sides of a cut into one id
    fused = CoreEncoder(tokens, merges, pretok_kind=PRETOK_WHOLE, char_level=True, unk_id=unk, fuse_unk=True,
                        ignore_merges=False)
    assert not fused.cuts_pieces
    plain = CoreEncoder(tokens, merges, pretok_kind=PRETOK_WHOLE, char_level=True, unk_id=unk,
                        ignore_merges=False)
    assert plain.cuts_pieces
    # a merge that takes a byte-fallback token joins bytes that no token shows side by side
    fb = tokens.index(b"<0xC3>")
    merges2 = merges + [(fb, 0, len(tokens))]
    tokens2 = tokens + [b"<0xC3>" + tokens[0]]
    odd = CoreEncoder(tokens2, merges2, pretok_kind=PRETOK_WHOLE, char_level=True, byte_fallback=True,
                      ignore_merges=False)
    assert not odd.cuts_pieces


def test_token_bigrams_hold_every_pair_inside_a_token():
    v = Vocab([b"ab", b"c", b"xyz"], [])
    bits = v.token_bigrams()
    assert len(bits) == 8192

    def has(a, b):
        k = (a << 8) | b
        return bool((bits[k >> 3] >> (k & 7)) & 1)

    assert has(ord("a"), ord("b")) and has(ord("x"), ord("y")) and has(ord("y"), ord("z"))
    assert not has(ord("b"), ord("c")) and not has(ord("b"), ord("a")) and not has(ord("z"), ord("x"))


def _reference_bpe(tokens, merges, symbols):
    # Plain BPE over a list of token ids: merge the adjacent pair of lowest rank, the leftmost of equals.
    rank = {(a, b): (r, new) for r, (a, b, new) in enumerate(merges)}
    syms = list(symbols)
    while len(syms) > 1:
        best = min(((rank[p][0], i) for i, p in enumerate(zip(syms, syms[1:])) if p in rank), default=None)
        if best is None:
            return syms
        i = best[1]
        syms[i:i + 2] = [rank[(syms[i], syms[i + 1])][1]]
    return syms


@pytest.mark.parametrize("level", ["byte", "char"])
def test_a_part_equal_to_a_token_bpe_does_not_rebuild_is_merged(level):
    # "abc" is a token, but BPE of its bytes gives [ab, c] ((a, b) ranks before (a, bc)).  In "abc," the pair
    # "c," is in no token, so the piece is cut into "abc" and ",": the part must come out as [ab, c].
    chars = ["a", "b", "c", ","]
    tokens = [bytes([i]) for i in range(256)] if level == "byte" else [c.encode() for c in chars]
    tid = {t: i for i, t in enumerate(tokens)}
    sym = lambda c: tid[c.encode()]                                     # noqa: E731
    for t in (b"ab", b"bc", b"abc"):
        tokens.append(t)
    ab, bc, abc = len(tokens) - 3, len(tokens) - 2, len(tokens) - 1
    merges = [(sym("a"), sym("b"), ab), (sym("b"), sym("c"), bc), (sym("a"), bc, abc)]
    kw = dict(pretok_kind=PRETOK_WHOLE, ignore_merges=False)
    if level == "char":
        kw.update(char_level=True)
    core = CoreEncoder(tokens, merges, **kw)
    assert core.cuts_pieces
    assert _reference_bpe(tokens, merges, [sym(c) for c in "abc,"]) == [ab, sym("c"), sym(",")]
    for text in ("abc,", ",abc,", "abc,abc", "abc"):
        want = _reference_bpe(tokens, merges, [sym(c) for c in text])
        assert core.encode_ordinary(text.encode()) == want, text


@pytest.mark.parametrize("level", ["byte", "char"])
def test_random_vocabularies_match_plain_bpe(level):
    # Valid UTF-8 of the alphabet (char-level symbols are its characters), against _reference_bpe.
    rnd = random.Random(SEED + 11 + (level == "char"))
    for _ in range(8):
        tokens, merges = (_byte_level if level == "byte" else _char_level)(rnd)
        kw = dict(pretok_kind=PRETOK_WHOLE, ignore_merges=False)
        if level == "char":
            kw.update(char_level=True, byte_fallback=True)
        core = CoreEncoder(tokens, merges, **kw)
        assert core.cuts_pieces
        tid = {t: i for i, t in enumerate(tokens)}
        for _ in range(100):
            text = "".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(1, 25)))
            units = list(text.encode()) if level == "byte" else [tid[c.encode()] for c in text]
            assert core.encode_ordinary(text.encode()) == _reference_bpe(tokens, merges, units), text
