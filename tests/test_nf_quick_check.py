"""The normalization quick check of the compiled route (ctok/_nf_check.h, _encoder.unchanged_by): a tokenizer.json
file with an NFC / NFKC / NFD / NFKD normalizer sends a text straight to the compiled encoder only when the check
says the normalizer leaves it as it is.  Saying so wrongly would encode text HF normalizes first, so:

* wherever the C check alone answers Yes, for every code point in a dozen contexts (after a letter, between
  letters, after starters that compose with a following starter or mark, twice) and for every ordered and
  unordered pair of marks, unicodedata2 (Unicode 16) and HF tokenizers' own normalizers leave the text as it is;
* its table is the derivation of tools/gen_unicode_tables.py from unicodedata2 16.0.0 (not a stale header);
* unchanged_by (the C check, then the native normalizer on the stretches it doubts) equals "every one of HF's
  normalizers leaves it as it is" both ways, on random texts where the doubtful stretches sit near each other, far
  apart and at the ends;
* the doubt stays rare on real text: every corpus file the normalizer leaves alone passes the C check alone.
"""
from __future__ import annotations

import os
import random
import sys
from array import array

import pytest
import unicodedata2

from _shared import REPO_ROOT, corpus_names, corpus_text

E = pytest.importorskip("ctok._encoder")
tokenizers = pytest.importorskip("tokenizers")
from tokenizers import normalizers  # noqa: E402

FORMS = ("NFC", "NFKC", "NFD", "NFKD")
HF = {"NFC": normalizers.NFC(), "NFKC": normalizers.NFKC(), "NFD": normalizers.NFD(), "NFKD": normalizers.NFKD()}
SEED = int(os.environ.get("CTOK_SEED", "20261203"))
ALL = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]

# Every context starts with a character that nothing before it affects under any form (ASCII, U+1100, U+0928...),
# so the contexts of one form can be checked joined, in a few calls.  Each {} is the code point under test.
CONTEXTS = [
    "x{}",            # after a letter, before the next context's letter
    "a{}b",
    "x{}{}",          # twice: a mark after itself
    "e{}x",           # e composes with many marks
    "\u1100{}x",      # L jamo + V jamo composes
    "\uac00{}x",      # LV syllable + T jamo composes
    "\u0928{}x",      # DEVANAGARI NA + NUKTA composes
    "\u09c7{}x",      # BENGALI E + AA / AU length mark: starter + starter
    "\u0b92{}x",      # TAMIL O + AU length mark
    "\U00016d63{}x",  # KIRAT RAI VOWEL SIGN E (Unicode 16): + U+16D68 (= U+16D67 U+16D67) composes
]                    # (Gurung Khema's and Tulu-Tigalari's such firsts are seconds themselves: always doubted)


def _changed(form, s, chunk=200_000):
    """None when unicodedata2 and HF's normalizer both leave s as it is, else (which, the text around the first
    change): a short message, where pytest's own would diff strings of millions of characters."""
    u = unicodedata2.normalize(form, s)
    if u != s:
        i = next((i for i, (x, y) in enumerate(zip(s, u)) if x != y), min(len(s), len(u)))
        return "unicodedata2", s[max(0, i - 8):i + 8]
    # In chunks: HF keeps an alignment per byte, a 10M-character string at once costs gigabytes.  Each chunk is
    # cut at a character that nothing before it affects (a context's first), so the cuts change nothing.
    cuts = [0]
    while cuts[-1] < len(s):
        j = min(len(s), cuts[-1] + chunk)
        while j < len(s) and s[j] not in "xae\u1100\uac00\u0928\u09c7\u0b92\U00016d63":
            j += 1
        cuts.append(j)
    for a, b in zip(cuts, cuts[1:]):
        u = HF[form].normalize_str(s[a:b])
        if u != s[a:b]:
            i = next((i for i, (x, y) in enumerate(zip(s[a:b], u)) if x != y), min(b - a, len(u)))
            return "tokenizers", s[a + max(0, i - 8):a + i + 8]
    return None


def _joined_yes(form, texts, padded=False):
    yes = E._nf_quick(texts, (form,))
    if padded:
        # The same texts padded to 16 characters and more with U+00D7 (a starter every form leaves alone, even
        # in a 1-byte str): the check then takes its 16-character steps (the byte table of boundary characters,
        # then the branch-free block check), which must answer as the character-by-character path does.
        steps = E._nf_quick([t + "\u00d7" * 16 for t in texts], (form,))
        assert steps == yes, next(t for t, a, b in zip(texts, steps, yes) if a != b)
    return "".join(t for t, ok in zip(texts, yes) if ok), sum(yes)


@pytest.mark.parametrize("form", FORMS)
def test_every_code_point_in_context(form):
    for ctx in CONTEXTS:
        a, b = ctx.split("{}", 1)
        texts = [a + c + b.replace("{}", c) for c in ALL]
        s, n = _joined_yes(form, texts, padded=ctx == CONTEXTS[0])
        # A check that doubted much would make the route useless on real text: all but 2% pass (NFD and NFKD
        # refuse precomposed letters and the 11,172 Hangul syllables).
        assert n > len(ALL) * 0.98 or ctx.startswith("\uac00") and form in ("NFD", "NFKD"), (ctx, n)
        assert _changed(form, s) is None, (form, ctx, _changed(form, s))


@pytest.mark.parametrize("form", FORMS)
def test_pairs_of_marks(form):
    # The check lets a mark follow a mark only in canonical order: every pair of marks the form leaves alone,
    # in both orders, after a letter.
    table = array("H", E._nf_props_table())
    marks = [c for c in ALL if table[ord(c)] & 0xFF]
    texts = ["x" + m1 + m2 for m1 in marks for m2 in marks]
    s, n = _joined_yes(form, texts, padded=True)
    assert n > len(texts) // 3
    assert _changed(form, s) is None, _changed(form, s)


def test_table_is_the_generators_derivation():
    sys.path.insert(0, str(REPO_ROOT / "tools"))
    try:
        import gen_unicode_tables as gen
    finally:
        sys.path.pop(0)
    assert unicodedata2.unidata_version == gen.UNICODE_VERSION == "16.0.0"
    want = gen.nf_props(gen.composition_seconds())
    got = array("H", E._nf_props_table())
    assert len(got) == 0x110000
    diff = [hex(cp) for cp in range(0x110000) if got[cp] != want[cp]]
    assert not diff, diff[:10]
    with open(REPO_ROOT / "ctok" / "_unicode_tables.h", encoding="utf-8") as f:
        head = f.read()
    assert "GENERATED" in head[:200] and "quick check (UAX #15 section 9), Unicode 16.0.0" in head


def _exact(text, forms):
    # HF's normalizers are the reference: they leave the code points newer than their Unicode data alone, where
    # unicodedata2 (Unicode 16) may not (U+16D63 U+16D68).
    for form in forms:
        if HF[form].normalize_str(text) != text:
            return False
    return True


# Pieces some form changes or doubts, and filler the check passes at full speed.
DOUBTFUL = [
    "e\u0301", "x\u0301", "\u0301", "a\u0308\u0304", "o\u0323\u0302", "o\u0302\u0323", "A\u030a", "\u212b", "\u212a",
    "\u2126", "\u1100\u1161\u11a8", "\u1100", "\u1161", "\u11a8", "\uac00\u11a8", "\u0316\u0301", "\ufb01", "\u00bd",
    "\uff21", "\u2460", "\uf900", "\U0002f800", "\u0958", "\u0344", "\u0f73", "\u3099", "\u304b\u3099", "\u00c5",
    "\u0928\u093c", "\u0915\u093c", "\u09c7\u09be", "\u0b92\u0bd7", "\u0bd7", "\u0bd7\u0bd7", "\U00016d63\U00016d68",
    "\U00016d68", "\U00016d67\U00016d67", "\u0340", "\u0345", "\u05b0\u05b1", "\u05b1\u05b0", "\u064e\u0651",
    "\u0651\u064e", "\u2adc", "\u00e9", "\ud55c",
]
FILLER = ["hello ", "\u65e5\u672c\u8a9e", "\u043f\u0440\u0438\u0432\u0435\u0442 ", "\U0001f600", "\n", "  ", ".",
          "\ud55c\uad6d\uc5b4", "\u0627\u064e\u0644"]


def _random_text(rnd):
    out = []
    for _ in range(rnd.randint(0, 12)):
        # gaps around NF_JOIN_GAP (8 characters): doubtful stretches joined into one, and not
        out.append("".join(rnd.choice(FILLER) for _ in range(rnd.choice([0, 1, 3, 40, 60, 90, 300]))))
        out.append(rnd.choice(DOUBTFUL))
    return "".join(out)


@pytest.mark.parametrize("forms", [("NFC",), ("NFKC",), ("NFD",), ("NFKD",), ("NFC", "NFKC"), ("NFD", "NFC")])
def test_unchanged_by_is_exact(forms):
    rnd = random.Random(SEED + len("".join(forms)))
    seen = set()
    for _ in range(3000):
        text = _random_text(rnd)
        want = _exact(text, forms)
        assert E._nf_unchanged(text, forms) == want, (forms, text)
        seen.add(want)
    assert seen == {True, False}


def test_unchanged_by_small_cases():
    assert E._nf_unchanged("", ("NFC",)) and E._nf_unchanged("abc", ("NFKD",)) and E._nf_unchanged("\u212a", ())
    assert not E._nf_unchanged("x" * 100_000 + "\u212a", ("NFC",))
    assert not E._nf_unchanged("\u212a" + "\u65e5" * 100_000, ("NFC",))
    assert E._nf_unchanged("x\u0301" * 10_000, ("NFC",))          # doubted everywhere, normalized
    assert not E._nf_unchanged("x\u0301" * 10_000 + "e\u0301", ("NFC",))
    assert E._nf_unchanged("\ud800\u65e5\udfff", ("NFC",))      # lone surrogates: the encoder rejects them
    with pytest.raises(ValueError):
        E._nf_unchanged("\u00e9", ("NFX",))


@pytest.mark.parametrize("name", corpus_names())
def test_corpus_passes_the_c_check(name):
    text = corpus_text(name, 10**9)
    for form in ("NFC", "NFKC"):
        exact = unicodedata2.normalize(form, text) == text
        assert E._nf_unchanged(text, (form,)) == exact, (name, form)
        if exact:   # normalized real text: no doubt, no unicodedata2 call
            assert E._nf_quick([text], (form,)) == b"\x01", (name, form)
