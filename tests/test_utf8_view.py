"""Long texts (>= 2048 code points) reach the encoder through ctok's own UTF-8 conversion (_utf8.h), which
copies runs of ASCII 8 or 16 code points at a time.  Every storage kind of str (1, 2 and 4 bytes per code
point), a non-ASCII character at every offset of a SIMD block, block tails, and surrogates (paired, lone,
at either end) must encode exactly as tiktoken encodes the same str."""
from __future__ import annotations

import random

import pytest

from _shared import assert_same_ids

ctok = pytest.importorskip("ctok")
pytest.importorskip("tiktoken")

# one character of each UTF-8 length and of each str storage kind
WIDE = {"latin1": "\u00e9", "bmp2": "\u0416", "bmp3": "\u4e2d", "astral": "\U0001F600"}


@pytest.fixture(scope="module")
def pair():
    from _shared import reference_encoding

    enc = ctok.get_encoding("o200k_base")
    enc.set_prefix_cache(0)          # the plain encoder path: the one that converts
    return enc, reference_encoding("o200k_base")


def _base(n, seed):
    rnd = random.Random(seed)
    return "".join(rnd.choice("abcdefgh ij,.\n") for _ in range(n))


@pytest.mark.parametrize("kind", sorted(WIDE))
@pytest.mark.parametrize("length", [2048, 2049, 2055, 2063, 2064, 2071])
def test_one_wide_character_at_every_block_offset(pair, kind, length):
    enc, ref = pair
    base = _base(length, length)
    for pos in list(range(0, 40)) + list(range(length - 20, length)):
        text = base[:pos] + WIDE[kind] + base[pos + 1:]
        assert_same_ids(enc.encode_ordinary(text), ref.encode_ordinary(text), text)


@pytest.mark.parametrize("seed", range(12))
def test_random_mixtures(pair, seed):
    enc, ref = pair
    rnd = random.Random(seed)
    alphabet = list("abc  xyz,\n\t") + list(WIDE.values()) + ["\u00a0", "\u07ff", "\u0800", "\uffff",
                                                               "\U00010000", "\U0010ffff", "\x7f", "\x80"]
    n = rnd.choice([2048, 3000, 5001, 20000])
    text = "".join(rnd.choice(alphabet) for _ in range(n))
    assert_same_ids(enc.encode_ordinary(text), ref.encode_ordinary(text), text)


@pytest.mark.parametrize("sur", ["\ud83d\ude00", "\ud83d", "\ude00", "\ude00\ud83d", "\udfff\ud800"])
@pytest.mark.parametrize("where", ["start", "middle", "end"])
@pytest.mark.parametrize("kind", ["ascii", "bmp3", "astral"])
def test_surrogates_follow_tiktoken(pair, sur, where, kind):
    enc, ref = pair
    base = _base(2100, 7) if kind == "ascii" else _base(2100, 7) + WIDE[kind]
    text = {"start": sur + base, "middle": base[:1000] + sur + base[1000:], "end": base + sur}[where]
    assert_same_ids(enc.encode_ordinary(text), ref.encode_ordinary(text), text)


def test_utf8_already_made_by_cpython_is_used_as_is(pair):
    enc, ref = pair
    text = _base(4000, 3) + "\u4e2d" + _base(100, 4)
    text.encode("utf-8")                      # does not cache; the C API call below does
    import ctypes
    ctypes.pythonapi.PyUnicode_AsUTF8AndSize.restype = ctypes.c_char_p
    ctypes.pythonapi.PyUnicode_AsUTF8AndSize.argtypes = [ctypes.py_object, ctypes.c_void_p]
    ctypes.pythonapi.PyUnicode_AsUTF8AndSize(text, None)
    assert_same_ids(enc.encode_ordinary(text), ref.encode_ordinary(text), text)


def _every_code_point(kind):
    """Every code point a str of this storage kind can hold beside ASCII (no surrogate), as one list."""
    if kind == "latin1":
        return [chr(c) for c in range(0x80, 0x100)]
    if kind == "bmp":
        return [chr(c) for c in range(0x80, 0x10000) if not 0xD800 <= c < 0xE000]
    # astral: one in every 61 beside each UTF-8 length's edges (all of them would be 1.1M code points)
    return [chr(c) for c in list(range(0x10000, 0x110000, 61)) + [0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000,
                                                                  0x10FFFF]]


@pytest.mark.parametrize("kind", ["latin1", "bmp", "astral"])
@pytest.mark.parametrize("ascii_share", [0.0, 0.3])
def test_every_code_point_converts_exactly(pair, kind, ascii_share):
    # Non-ASCII blocks are converted a code point at a time without branches on its length (a word of up to
    # four bytes stored whole, the end advanced by the length): every length next to every other, at every
    # place of a block, must give str.encode's bytes (the round trip) and tiktoken's ids.
    enc, ref = pair
    rnd = random.Random(hash((kind, ascii_share)) & 0xFFFF)
    chars = _every_code_point(kind)
    rnd.shuffle(chars)
    text = "".join(c if rnd.random() >= ascii_share else rnd.choice("a ,\n") + c for c in chars)
    text = text + "x" * max(0, 2048 - len(text))       # long enough for ctok's own conversion
    ids = enc.encode_ordinary(text)
    assert enc.decode_bytes(ids) == text.encode("utf-8")
    assert_same_ids(ids, ref.encode_ordinary(text), text)
