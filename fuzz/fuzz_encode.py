"""atheris target: ctok's encoders against tiktoken on arbitrary input.

Each input picks an embedded encoding (o200k_base, cl100k_base) and a mode:
  0, 1  arbitrary text (with / without lone surrogates): encode_ordinary, encode(allowed_special="all") and the
        default special-token policy equal tiktoken's; decode(encode(text)) is the text (U+FFFD for surrogates);
        the stream decoder's steps concatenate to decode();
  2     structure-aware text built from tricky fragments (runs, contractions, marks, emoji, special look-alikes),
        the same checks;
  3     arbitrary bytes (not necessarily UTF-8) straight to the native encoder: valid ids, and the ids decode
        back to exactly those bytes (byte-level BPE is lossless);
  4     a batch of texts on two threads equals tiktoken per text;
  5     CJK and 2-byte script text (_common.cjk_text: pieces cut between characters), the checks of mode 0;
  6     the same as bytes with stray bytes inserted, to the native encoder and to a core that cuts pieces of
        every lead byte: equal to a core over the same vocabulary that neither cuts nor caches.

    python fuzz/fuzz_encode.py -runs=1000000 -max_len=8192 [corpus_dir]
"""
import sys

import atheris

import _common  # noqa: F401 - puts the repository on sys.path

with atheris.instrument_imports(include=["ctok"]):
    import ctok
    from ctok._encoder import CoreEncoder

ENCODINGS = []


def setup():
    for name in ("o200k_base", "cl100k_base"):
        ref = _common.tiktoken_reference(name)
        if ref is None:
            import tiktoken

            ref = tiktoken.get_encoding(name)  # needs tiktoken's download cache
        enc = ctok.get_encoding(name)
        bare = CoreEncoder(pretok_kind=enc._core.pretok_kind, vocab=enc._core.vocab, piece_cache_bytes=0)
        bare._set_cuts(False)
        every = CoreEncoder(pretok_kind=enc._core.pretok_kind, vocab=enc._core.vocab)
        every._set_cuts(True, leads=(1 << 48) - 1)      # every 2- and 3-byte lead's pieces looked at for cuts
        ENCODINGS.append((name, enc, ref, bare, every))


def check_text(enc, ref, text):
    exp = ref.encode_ordinary(text)
    got = enc.encode_ordinary(text)
    assert got == exp, ("encode_ordinary", text, got, exp)
    exp_all = ref.encode(text, allowed_special="all")
    assert enc.encode(text, allowed_special="all") == exp_all, ("encode(all)", text)
    try:
        exp_def = ref.encode(text)
    except ValueError:
        try:
            enc.encode(text)
        except ValueError:
            pass
        else:
            raise AssertionError(("encode() should have refused special-token text", text))
    else:
        assert enc.encode(text) == exp_def, ("encode()", text)
    decoded = enc.decode(exp_all)
    assert decoded == ref.decode(exp_all), ("decode", text)
    fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    assert enc.decode(exp) == fixed, ("round trip", text)
    dec = enc.stream_decoder()
    assert "".join(dec.step(i) for i in exp_all) + dec.flush() == decoded, ("stream", text)


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    name, enc, ref, bare, every = ENCODINGS[fdp.ConsumeIntInRange(0, len(ENCODINGS) - 1)]
    mode = fdp.ConsumeIntInRange(0, 6)
    if mode == 0:
        check_text(enc, ref, fdp.ConsumeUnicode(fdp.remaining_bytes()))
    elif mode == 1:
        check_text(enc, ref, fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes()))
    elif mode == 2:
        check_text(enc, ref, _common.fragment_text(fdp))
    elif mode == 3:
        raw = fdp.ConsumeBytes(fdp.remaining_bytes())
        ids = enc._core.encode_ordinary(raw)
        assert all(0 <= i < enc.n_vocab for i in ids), (name, raw)
        assert enc.decode_bytes(ids) == raw, ("bytes round trip", name, raw)
    elif mode == 4:
        texts = [_common.fragment_text(fdp, 8) for _ in range(fdp.ConsumeIntInRange(2, 10))]
        got = enc.encode_ordinary_batch(texts, num_threads=2)
        assert got == [ref.encode_ordinary(t) for t in texts], ("batch", texts)
    elif mode == 5:
        check_text(enc, ref, _common.cjk_text(fdp))
    else:
        raw = bytearray(_common.cjk_text(fdp).encode())
        for _ in range(fdp.ConsumeIntInRange(0, 4)):
            raw.insert(fdp.ConsumeIntInRange(0, len(raw)), fdp.ConsumeIntInRange(0x80, 0xFF))
        raw = bytes(raw)
        want = bare.encode_ordinary(raw)
        assert enc._core.encode_ordinary(raw) == want, ("cjk bytes", name, raw)
        assert every.encode_ordinary(raw) == want, ("cjk bytes, every lead cut", name, raw)


if __name__ == "__main__":
    setup()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
