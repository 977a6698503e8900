"""atheris target: the compiled vocabulary tables (Vocab.from_bytes) on forged input.

The cache file's checksum catches accidental damage (tests/test_hostile.py); this target models a forgery: the tables
of a small vocabulary (tiktoken semantics, or HF merges) are edited at fuzzer-chosen places, the size left as it
is, and handed to Vocab.from_bytes as if the checksum matched.  from_bytes must refuse them with ValueError, or
accept them only if every index the encoder follows is in range: then encoding any bytes with every pretokenizer
kind and decoding any id must not crash (results may be wrong: a forged vocabulary is a different vocabulary).

    python fuzz/fuzz_vocab_cache.py -runs=1000000 [corpus_dir]
"""
import sys

import atheris

import _common  # noqa: F401 - puts the repository on sys.path

with atheris.instrument_imports(include=["ctok"]):
    from ctok import _pretok
    from ctok._encoder import CoreEncoder
    from ctok._vocab import Vocab
    from ctok.errors import CtokError

BLOBS = []
KINDS = []


def setup():
    singles = [bytes([b]) for b in range(256)]
    extra = [b"he", b"ll", b"hell", b"hello", b" w", b"or", b" wor", b"ld", b" world", b"\xe4\xb8", b"\xe4\xb8\xad"]
    v1 = Vocab(singles + extra, None, {300: b"<|end|>"})
    BLOBS.append(v1.to_bytes())
    tokens = singles + extra
    index = {t: i for i, t in enumerate(tokens)}
    merges = [(index[b"h"], index[b"e"]), (index[b"l"], index[b"l"]), (index[b"he"], index[b"ll"]),
              (index[b"hell"], index[b"o"]), (index[b" "], index[b"w"]), (index[b"o"], index[b"r"])]
    v2 = Vocab(tokens, merges, {400: b"</s>"})
    BLOBS.append(v2.to_bytes())
    # Merge regions with index levels (Tables.pair_region): 258 merges after "a" (two levels), 40 after "b" (one).
    wide = singles + [b"he", b"ll"] + [b"a" + bytes([x]) for x in range(256)] + [b"ahe", b"all"]
    wide += [b"b" + bytes([x]) for x in range(40)]
    BLOBS.append(Vocab(wide, None, {600: b"<|end|>"}).to_bytes())
    KINDS.extend(sorted(set(getattr(_pretok, "KINDS", {"whole": 0}).values())))


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    good = BLOBS[fdp.ConsumeIntInRange(0, len(BLOBS) - 1)]
    b = bytearray(good)
    for _ in range(fdp.ConsumeIntInRange(1, 8)):
        i = fdp.ConsumeIntInRange(0, len(b) - 1)
        width = fdp.PickValueInList([1, 1, 2, 4, 8])
        val = fdp.ConsumeInt(width)
        b[i:i + width] = (val & ((1 << (8 * width)) - 1)).to_bytes(width, "little")[:len(b) - i]
    try:
        v = Vocab.from_bytes(bytes(b))
    except ValueError:
        return
    kind = KINDS[fdp.ConsumeIntInRange(0, len(KINDS) - 1)]
    core = CoreEncoder(vocab=v, pretok_kind=kind, piece_cache_bytes=4096 if fdp.ConsumeBool() else 0)
    text = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 600))
    for piece in (text, b"hello world", "\u4e2d\u6587 hello".encode(), b"ahe all abba bb\x01a\xff"):
        ids = core.encode_ordinary(piece)
        assert all(0 <= i < v.size for i in ids), ("id out of range", ids)
        try:
            core.decode_bytes(ids)
        except CtokError:
            pass
    for i in fdp.ConsumeIntListInRange(8, -2, v.size + 2):
        v.token_bytes(i)
        try:
            core.decode_bytes([i])
        except (CtokError, OverflowError):
            pass


if __name__ == "__main__":
    setup()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
