"""Pieces of 3-byte characters read at once (ctok/_cjk3.h) against the references.

_cjk3.h classifies 3-byte characters four at a time (a step of 12 bytes, taken only when 14 bytes remain), then
one at a time near the segment's end or when the step holds something that is no 3-byte character, and decides
a piece's end from the class of the character that stops its run.  Each test here puts a class boundary at every
offset of that step (runs of 0..9 characters before it), with each kind of character after it (other 3-byte
classes, ASCII letters, digits, spaces, newlines, apostrophes and slashes, 2-byte and 4-byte characters) and
tails that end the segment at every place of the next step.  References: the regex module running the pattern
(ctok.patterns.compile_fallback, itself checked against tiktoken and tokenizers in test_pretok), tiktoken 0.14.0
(assert_tiktoken_splits_many) and, for the HF kinds, tokenizers' Split.  Invalid UTF-8: ctok takes each byte
of a bad sequence as a one-byte character of no class, which is what an ASCII '#' is to these patterns, so the
reference splits the text with each byte Python cannot decode replaced by '#' (same offsets).
"""
from __future__ import annotations

import re

import pytest

from ctok import patterns as pt

P = pytest.importorskip("ctok._pretok")
pytest.importorskip("regex")
pytest.importorskip("tiktoken")

from test_pretok import HF_KINDS, NAME, assert_tiktoken_splits_many, hf_pieces  # noqa: E402

KINDS = [pt.PRETOK_KIMI, pt.PRETOK_O200K, pt.PRETOK_TEKKEN, pt.PRETOK_CL100K, pt.PRETOK_LLAMA3, pt.PRETOK_QWEN]

# 3-byte characters of every class _cjk3.h tells apart, and of those it leaves to the general scanner: Han
# (Lo), Han that is Lm, Nl or So (U+3005, U+3007, U+2E80), kana, the prolonged sound mark (Lm), Hangul, CJK and
# fullwidth punctuation, a symbol, fullwidth Lu / Ll / Nd, the ideographic space and U+2028 (White_Space), a
# combining mark (M: UP and LO for o200k, no letter for cl100k), the first 3-byte code point (Devanagari).
WIDE = ["中", "語", "々", "〇", "⺀", "あ", "カ", "ー", "한", "、", "。", "「", "」", "！", "€", "Ａ", "ａ", "１",
        "\u3000", "\u2028", "\u3099", "\u0800"]
# Everything else a run can meet.
NARROW = ["a", "Z", "1", " ", "\n", "\r", "\t", "'", "/", "!", "#", "é", "Д", "ا", "\u0301", "𠀀", "😀", "𝐀"]
ALL = WIDE + NARROW


def _pattern_ends(kind, text):
    """Byte offsets of the ends of the regex module's matches of kind's pattern over text."""
    rx = _compiled(kind)
    out, pos, acc = [], 0, 0
    for m in rx.finditer(text):
        acc += len(text[pos:m.end()].encode("utf-8", "surrogatepass"))
        pos = m.end()
        out.append(acc)
    return out


_CACHE = {}


def _compiled(kind):
    if kind not in _CACHE:
        _CACHE[kind] = pt.compile_fallback(pt.PATTERNS[kind])
    return _CACHE[kind]


def _check_all_paths(kind, data, ref, label):
    assert P.piece_ends(kind, data) == ref, f"{label} [{NAME[kind]}]"
    for m in (1, 2, 5, 16):
        assert P.piece_ends_batched(kind, data, m) == ref, f"{label} [{NAME[kind]} batched by {m}]"


def _boundary_texts():
    """A run of k characters of one 3-byte class, then any character, then a tail: every offset of the step."""
    texts = []
    for a in WIDE:
        for b in ALL:
            for k in range(10):
                for tail in ("", a, "カ" * 5, "中" * 5, "、" * 5, a * 7 + "\n", "a'll", "'s", "\n/x"):
                    for lead in ("", "「", " "):
                        texts.append(lead + a * k + b + tail)
    return texts


@pytest.fixture(scope="module")
def boundary_texts():
    return _boundary_texts()


@pytest.mark.parametrize("kind", KINDS, ids=[NAME[k] for k in KINDS])
def test_class_boundaries_against_regex(kind, boundary_texts):
    for t in boundary_texts:
        _check_all_paths(kind, t.encode(), _pattern_ends(kind, t), repr(t))


@pytest.mark.parametrize("kind", KINDS, ids=[NAME[k] for k in KINDS])
def test_class_boundaries_against_tiktoken_and_hf(kind, boundary_texts):
    texts = boundary_texts[::7]            # every lead, tail and run length still occurs
    assert_tiktoken_splits_many(pt.PATTERNS[kind], texts, f"cjk3 {NAME[kind]}")
    if kind in HF_KINDS:
        for t in texts[::5]:
            got = [b.decode() for b in P.split(kind, t.encode())]
            assert got == hf_pieces(kind, t), repr(t)


def _pairs_texts():
    """Two classes alternating in runs of every length 1..6 (Kimi's Han and kana), so that a piece starts at
    every offset of the previous piece's step."""
    out = []
    for a, b in [("中", "あ"), ("中", "、"), ("あ", "、"), ("カ", "。"), ("中", "ー"), ("한", "!"), ("あ", "\n"),
                 ("中", "Ａ"), ("「", "\u3000"), ("語", "ａ")]:
        for i in range(1, 7):
            for j in range(1, 7):
                out.append((a * i + b * j) * 5 + a * (i % 3))
    return out


@pytest.mark.parametrize("kind", KINDS, ids=[NAME[k] for k in KINDS])
def test_alternating_runs(kind):
    texts = _pairs_texts()
    for t in texts:
        _check_all_paths(kind, t.encode(), _pattern_ends(kind, t), repr(t))
    assert_tiktoken_splits_many(pt.PATTERNS[kind], texts, f"cjk3 alternating {NAME[kind]}")


_BAD = [b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xed\xa0\x80", b"\xe4\xb8", b"\xe4", b"\x80", b"\xbf\xbf\xbf",
        b"\xe4\xb8a", b"\xe4\x3e\xad", b"\xef\xbf", b"\xf0\x9f\x98", b"\xf4\x90\x80\x80", b"\xc3", b"\xff"]


def _bad_reference(kind, data):
    text = data.decode("utf-8", "surrogateescape")
    return _pattern_ends(kind, re.sub("[\udc80-\udcff]", "#", text))


@pytest.mark.parametrize("kind", KINDS, ids=[NAME[k] for k in KINDS])
def test_invalid_utf8_inside_steps(kind):
    """A bad sequence at every offset of a step, inside and after runs of each class, and cut at the end."""
    for a in ["中", "あ", "、", "ー", "Ａ"]:
        ab = a.encode()
        for bad in _BAD:
            for k in range(7):
                for tail in (b"", ab, ab * 5, "あ中".encode() * 3):
                    data = ab * k + bad + tail
                    _check_all_paths(kind, data, _bad_reference(kind, data), repr(data))
                    cut = data[:-1]             # a segment that ends inside a character
                    if cut:
                        _check_all_paths(kind, cut, _bad_reference(kind, cut), repr(cut))


def test_corpus_cjk_pieces():
    """The CJK files, every kind, against the regex module (and the three batch sizes)."""
    from _shared import corpus_dir
    d = corpus_dir()
    for name in ("ja_wagahaiwa_nekodearu.txt", "zh_classical.txt", "udhr_multilingual.txt"):
        data = (d / name).read_bytes()[:300_000]
        data = data[:len(data.decode("utf-8", "ignore").encode())]   # whole characters
        text = data.decode()
        for kind in KINDS:
            _check_all_paths(kind, data, _pattern_ends(kind, text), name)
