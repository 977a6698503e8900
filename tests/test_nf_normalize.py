"""The native Unicode normalizer (ctok/_nf_normalize.h through ctok._encoder.nf_normalize) against HF tokenizers' own
NFC / NFKC / NFD / NFKD normalizers, the reference for tokenizer.json files:

* every code point but the surrogates, alone and in contexts where it can decompose, reorder or compose: after a
  letter and before marks of low and high combining class, after a Hangul L or LV, between two marks;
* every canonical composition (from unicodedata2's decomposition data, not from the generated table): the pair
  side by side, with a mark between of lower class (composes past it), of equal or higher class and a starter
  between (blocked);
* random Hangul jamo sequences and random mixtures of those pieces;
* and that tools/gen_nf_tables.py still writes the header the build uses.
"""
import os
import random
import sys

import pytest
import unicodedata2
from tokenizers import normalizers

from _shared import REPO_ROOT

from ctok._encoder import nf_normalize

SEED = int(os.environ.get("CTOK_SEED", "1234"))
FORMS = {"NFC": normalizers.NFC(), "NFKC": normalizers.NFKC(), "NFD": normalizers.NFD(), "NFKD": normalizers.NFKD()}
EVERY = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
CONTEXTS = ["{}", "a{}", "{}\u0323\u0301", "e{}\u0316", "\u1100{}", "\uac00{}\u11a8", "\u0301{}\u0300", "{}\u093c"]


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("context", CONTEXTS)
def test_every_code_point_in_context(form, context):
    text = "\n".join(context.format(c) for c in EVERY)
    got = nf_normalize(text, form)
    want = FORMS[form].normalize_str(text)
    if got != want:                                     # name the first code point that differs
        for c in EVERY:
            s = context.format(c)
            assert nf_normalize(s, form) == FORMS[form].normalize_str(s), (form, hex(ord(c)), context)
    assert got == want


def _compositions():
    out = []
    for cp in range(0x110000):
        d = unicodedata2.decomposition(chr(cp))
        if d and not d.startswith("<"):
            parts = [chr(int(x, 16)) for x in d.split()]
            if len(parts) == 2:
                out.append(parts)
    return out


@pytest.mark.parametrize("form", ["NFC", "NFKC"])
def test_every_composition_and_what_blocks_it(form):
    marks = ["", "\u0323", "\u0301", "\u0300\u0301", "\u05b0", "\u0315", "b", "\u1161"]   # classes 220 230 230 10 232; starters
    cases = [a + m + b for a, b in _compositions() for m in marks]
    text = "\n".join(cases)
    got, want = nf_normalize(text, form), FORMS[form].normalize_str(text)
    if got != want:
        for s in cases:
            assert nf_normalize(s, form) == FORMS[form].normalize_str(s), (form, [hex(ord(c)) for c in s])
    assert got == want


@pytest.mark.parametrize("form", list(FORMS))
def test_hangul_jamo_and_mixtures(form):
    rnd = random.Random(SEED + len(form))
    jamo = [chr(c) for c in list(range(0x1100, 0x1114)) + list(range(0x1160, 0x1177)) + list(range(0x11A7, 0x11C4))]
    pieces = jamo + ["\uac00", "\uac01", "\ud7a3", "\u0301", "\u0323", "e", "\u00e9", "\u1e0b", "\ufb01", "\u2460",
                     "\u0344", "\u0f73", "\u3099", "\u304b", "\U00016d63", "\U00016d67", "\U000113c2", "\u0d3c"]
    for _ in range(300):
        s = "".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 40)))
        assert nf_normalize(s, form) == FORMS[form].normalize_str(s), (form, [hex(ord(c)) for c in s])


@pytest.mark.parametrize("form", list(FORMS))
def test_long_dense_stretches(form):
    # doubt on every other character, past the longest joined stretch (NF_STRETCH, 4,096 characters)
    for s in ["e\u0301" * 3000 + "\u1100\u1161" * 2500 + "x\u0323\u0307" * 2000, "\u0301" * 9000 + "a",
              "x\u0301" * 5000, ("\uac00\u11a8\u0301" * 3000)]:
        assert nf_normalize(s, form) == FORMS[form].normalize_str(s)


@pytest.mark.parametrize("form", list(FORMS))
def test_runs_of_marks_in_every_order(form):
    # Canonical ordering sorts a run of marks by class, stably: insertion up to 32 marks, a counting sort beyond;
    # runs around that length, classes alternating, descending and repeated, with what composes around them.
    rnd = random.Random(SEED + 3 * len(form))
    marks = ["\u0301", "\u0316", "\u0323", "\u05b0", "\u0315", "\u0345", "\u031b", "\u0f72", "\u3099", "\u0308"]
    for length in (2, 31, 32, 33, 34, 100, 1000):
        for _ in range(6):
            run = "".join(rnd.choice(marks) for _ in range(length))
            for s in (run, "e" + run, "a" + run + "\u1161x", "\u1100" + run[::-1]):
                assert nf_normalize(s, form) == FORMS[form].normalize_str(s), (form, length)


def test_long_runs_of_marks_grow_linearly():
    """A run of marks whose classes alternate made insertion sort quadratic (unicodedata2's canonical ordering
    is too: 1.5 s for 80,000 marks).  From n marks to 16n the best-of-three time may grow by at most 100x (linear:
    16, quadratic: 256); up to three attempts, so that another process's burst does not decide it."""
    import time

    def best(s):
        t = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            nf_normalize(s, "NFC")
            t = min(t, time.perf_counter() - t0)
        return t
    small, big = "\u0301\u0316" * 20_000, "\u0301\u0316" * 320_000
    seen = []
    for _ in range(3):
        t1, t16 = best(small), best(big)
        seen.append(f"{t1 * 1e3:.2f} ms, {t16 * 1e3:.2f} ms")
        if t16 < 100 * t1 + 0.002:
            return
    raise AssertionError("not linear: " + "; ".join(seen))


def test_unchanged_text_comes_back_as_itself():
    for s in ["", "ascii", "\u65e5\u672c\u8a9e \u00e9", "e\u0301" * 3]:
        for form in ("NFD", "NFKD") if "\u0301" in s else FORMS:
            if FORMS[form].normalize_str(s) == s:
                assert nf_normalize(s, form) is s
    with pytest.raises(ValueError):
        nf_normalize("x", "NFX")


def test_generated_header_is_current(tmp_path, monkeypatch):
    sys.path.insert(0, str(REPO_ROOT / "tools"))
    try:
        import gen_nf_tables as gen
    finally:
        sys.path.pop(0)
    monkeypatch.setattr(gen, "OUT", str(tmp_path / "_nf_tables.h"))
    gen.main()
    with open(REPO_ROOT / "ctok" / "_nf_tables.h", encoding="ascii") as f:
        kept = f.read()
    assert (tmp_path / "_nf_tables.h").read_text(encoding="ascii") == kept
