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
