"""Unicode normalization of long texts, part by part (ctok.hf._unicode_normalize cuts a text between two ASCII
characters): equal to HF tokenizers' own NFC / NFKC / NFD / NFKD normalizers on texts built so that cuts fall
next to combining marks, Hangul jamo, singletons, compatibility characters and code points HF does not know."""
import os
import random

import pytest
from tokenizers import normalizers

from ctok import hf
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


@pytest.mark.parametrize("part", [2, 8, 64, hf._NORMALIZE_PART])
@pytest.mark.parametrize("form", list(FORMS))
def test_parts_equal_hf_normalizer(monkeypatch, form, part):
    monkeypatch.setattr(hf, "_NORMALIZE_PART", part)
    rnd = random.Random(SEED + part)
    for _ in range(30 if part < 100 else 4):
        text = _text(rnd, rnd.randint(2 * part + 1, 6 * part + 50))
        assert hf._unicode_normalize(form, text) == FORMS[form].normalize_str(text)


@pytest.mark.parametrize("form", ["NFC", "NFKD"])
def test_parts_equal_hf_normalizer_on_corpus(monkeypatch, form):
    monkeypatch.setattr(hf, "_NORMALIZE_PART", 512)
    for name in corpus_names():
        text = corpus_text(name, 200_000)
        assert hf._unicode_normalize(form, text) == FORMS[form].normalize_str(text), name


def test_a_normalized_text_comes_back_as_itself():
    text = corpus_text(corpus_names()[0], 200_000)
    if not text.isascii():
        text = hf._unicode_normalize("NFC", text)
    assert hf._unicode_normalize("NFC", text) is text
