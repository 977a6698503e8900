"""Unicode normalization stretch by stretch (ctok.hf._unicode_normalize, that is ctok._encoder.nf_normalize,
normalizes only the stretches the quick check doubts, ctok._encoder._nf_spans, and keeps the rest): equal to HF
tokenizers' own NFC / NFKC / NFD / NFKD normalizers on texts built so that stretches start and end next to
combining marks, Hangul jamo, singletons, compatibility characters and code points HF does not know, close enough
to be joined or far enough apart not to be; and the stretches themselves checked against unicodedata2: what lies
outside them is normalized, and every stretch's ends are places where normalizing the two sides apart changes
nothing."""
import os
import random

import pytest
import unicodedata2
from tokenizers import normalizers

from ctok import hf
from ctok._encoder import _nf_spans
from _shared import corpus_names, corpus_text

SEED = int(os.environ.get("CTOK_SEED", "1234"))
FORMS = {"NFC": normalizers.NFC(), "NFKC": normalizers.NFKC(), "NFD": normalizers.NFD(), "NFKD": normalizers.NFKD()}

# Pieces a cut could separate from what they combine or reorder with.
PIECES = [
    "e\u0301", "a\u0308\u0304", "o\u0323\u0302", "o\u0302\u0323", "A\u030a", "\u212b", "\u2126", "\u1100\u1161\u11a8",
    "\u1100", "\u1161", "\u11a8", "\uac00\u11a8", "\u0301", "\u0316\u0301", "\ufb01", "\u00bd", "\uff21", "\u2460",
    "\uf900", "\U0002f800", "\u0958", "\u1e9b\u0323", "\u0344", "\u0f73", "\u3099", "\u304b\u3099", "\u00c5",
    "\u1ac1\u0301", "x\u1df6\u0316", "\U000113b8\U000113c2", "\U00016d63\U00016d67", "\u0d3b\u0d3c", "\u07fd",
    "\U0001d15e", "\U0001d160", "\u0340\u0341", "\u0345", "\u05b0\u05b1",
]


def _text(rnd, n):
    out, size = [], 0
    while size < n:
        if rnd.random() < 0.45:
            out.append("".join(rnd.choice("abcdeoAEO xy,.\n") for _ in range(rnd.randint(1, 6))))
        else:
            out.append(rnd.choice(PIECES))
        size += len(out[-1])
    return "".join(out)


# Filler between the pieces: ASCII, and starters outside ASCII that the quick check passes (Cyrillic, CJK, a
# Hangul syllable, an emoji), in runs short enough for the stretches around the pieces to be joined (NF_JOIN_GAP,
# 8 characters) and long enough not to be.
FILLER = "abcdeoAEO xy,.\n" + "\u0436\u4e2d\uac00\U0001f600"


def _text(rnd, n):
    out, size = [], 0
    while size < n:
        if rnd.random() < 0.5:
            run = rnd.choice((rnd.randint(0, 12), rnd.randint(1, 6), rnd.randint(200, 320), rnd.randint(0, 700)))
            out.append("".join(rnd.choice(FILLER) for _ in range(run)))
        else:
            out.append(rnd.choice(PIECES))
        size += len(out[-1])
    return "".join(out)


@pytest.mark.parametrize("form", list(FORMS))
def test_stretches_equal_hf_normalizer(form):
    rnd = random.Random(SEED + len(form))
    for _ in range(40):
        text = _text(rnd, rnd.randint(1, 5000))
        assert hf._unicode_normalize(form, text) == FORMS[form].normalize_str(text)


@pytest.mark.parametrize("form", list(FORMS))
def test_doubtful_spans_cover_every_change(form):
    rnd = random.Random(SEED + 7 * len(form))
    for _ in range(40):
        text = _text(rnd, rnd.randint(1, 3000))
        spans = _nf_spans(text, form)
        whole = unicodedata2.normalize(form, text)
        pos = 0
        for a, b in spans:
            assert pos <= a < b <= len(text)
            outside = text[pos:a]
            assert unicodedata2.normalize(form, outside) == outside
            for cut in (a, b):
                assert unicodedata2.normalize(form, text[:cut]) + unicodedata2.normalize(form, text[cut:]) == whole
            pos = b
        assert unicodedata2.normalize(form, text[pos:]) == text[pos:]
    assert _nf_spans("plain ASCII", form) == []


@pytest.mark.parametrize("form", ["NFC", "NFKD"])
def test_stretches_equal_hf_normalizer_on_corpus(form):
    for name in corpus_names():
        text = corpus_text(name, 200_000)
        assert hf._unicode_normalize(form, text) == FORMS[form].normalize_str(text), name


def test_a_normalized_text_comes_back_as_itself():
    text = corpus_text(corpus_names()[0], 200_000)
    if not text.isascii():
        text = hf._unicode_normalize("NFC", text)
    assert hf._unicode_normalize("NFC", text) is text
