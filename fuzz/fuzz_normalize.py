"""atheris target: ctok's native Unicode normalizer (ctok/_nf_normalize.h) against HF tokenizers' normalizers.

Each input picks a form (NFC, NFKC, NFD, NFKD) and a mode:
  0  arbitrary text without lone surrogates (HF refuses those);
  1  structure-aware text built from marks of every combining class, composition firsts and seconds, Hangul
     jamo and syllables, singletons, compatibility characters and code points HF does not know (long runs
     included: stretches past the join limit), drawn by a generator seeded with the input: the normalizer is
     compiled without coverage hooks, so libFuzzer mutates blind and its own inputs stay short;
and checks `_encoder.nf_normalize` against HF's normalizer, `_encoder._nf_unchanged` against "HF leaves it as it
is", and, for NFC, Qwen 3's `encode_ordinary` against HF tokenizers' encode of the same text when ../shared has it.

    python fuzz/fuzz_normalize.py -runs=100000 -max_len=4096
"""
import os
import random
import sys

import atheris

import _common

with atheris.instrument_imports(include=["ctok"]):
    import ctok
    from ctok._encoder import _nf_unchanged, nf_normalize

from tokenizers import Tokenizer, normalizers

FORMS = ["NFC", "NFKC", "NFD", "NFKD"]
HF = {"NFC": normalizers.NFC(), "NFKC": normalizers.NFKC(), "NFD": normalizers.NFD(), "NFKD": normalizers.NFKD()}
PIECES = [
    "a", "e", "o", "A", "x", " ", "\n", "\u0301", "\u0300", "\u0323", "\u0307", "\u0308", "\u0304", "\u0316",
    "\u031b", "\u0345", "\u05b0", "\u05b1", "\u0651", "\u064e", "\u093c", "\u0928", "\u09be", "\u09c7", "\u0b3e",
    "\u0b47", "\u0bd7", "\u0b92", "\u102e", "\u1025", "\u3099", "\u309a", "\u304b", "\u30a6", "\u1100", "\u1161",
    "\u11a8", "\u1175", "\u11c2", "\uac00", "\uac01", "\ud7a3", "\u00e9", "\u1e0b", "\u1e9b", "\u212b", "\u2126",
    "\u212a", "\u0344", "\u0f73", "\u0f77", "\ufb01", "\u00bd", "\uff21", "\u2460", "\u3200", "\ufdfa", "\uf900",
    "\U0002f800", "\U0001d15e", "\u1ac1", "\u1df6", "\U000113b8", "\U000113c2", "\U00016d63", "\U00016d67",
    "\U00016d68", "\u0d3b", "\u0d3c", "\u07fd", "\u0340", "\u0341", "\u0958", "\u4e2d", "\U0001f600",
]


def qwen3():
    path = os.path.join(_common.REPO, "..", "shared", "vocab", "qwen3", "tokenizer.json")
    if not os.path.exists(path):
        return None
    hf = Tokenizer.from_file(path)
    hf.encode_special_tokens = True
    return ctok.load(path), hf


QWEN = qwen3()


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    form = FORMS[fdp.ConsumeIntInRange(0, 3)]
    if fdp.ConsumeBool():
        text = fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes())
    else:
        rnd = random.Random(fdp.ConsumeBytes(fdp.remaining_bytes()))
        out = []
        for _ in range(rnd.choice((rnd.randint(0, 20), rnd.randint(0, 3000)))):
            piece = rnd.choice(PIECES)
            out.append(piece * (rnd.randint(1, 600) if rnd.random() < 0.01 else 1))
        text = "".join(out)
    want = HF[form].normalize_str(text)
    got = nf_normalize(text, form)
    assert got == want, (form, text, got, want)
    assert _nf_unchanged(text, (form,)) == (want == text), (form, text)
    if form == "NFC" and QWEN is not None:
        enc, hf = QWEN
        assert enc.encode_ordinary(text) == hf.encode(text, add_special_tokens=False).ids, text


def main():
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
