"""Merge paths of the session that changed them, against the references, on inputs built to reach them.

- The last-long-piece memo (bpe_merge_piece, 49..4096 bytes): its buffers are allocated once at their
  largest, so pieces at both ends of the range, just past it, and of equal length but different bytes
  must follow one another in one call without a stale answer.
- merge_tree (pieces of more than 48 symbols): byte-level pieces of scripts that take the byte path, and
  long CJK runs, whose merges re-rank both neighbours in one climb.
- A SentencePiece file with byte fallback (Mistral 7B) on the same inputs: char-level symbols and <0xXX>
  tokens go through the same merges.
- merge_linear (2..48 symbols) scans its keys four at a time over cleared places past the last pair: every
  length, runs of equal pairs (ties go to the leftmost), and pieces whose last pair merges first.
"""
import random

import pytest

import ctok
from _shared import reference_encoding, vocab_path

SEED = 5150


def _long_pieces(rnd):
    cjk = "".join(chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(1500))
    deva = "".join(chr(rnd.randint(0x0905, 0x0939)) for _ in range(1500))
    out = []
    for n in (48, 49, 50, 255, 256, 257, 4095, 4096, 4097):
        out.append("q" * n)
        out.append("r" * n)                       # same length, other bytes: the memo must not answer
        out.append("q" * n)                       # and the first again
    for n in (17, 20, 40, 90, 400, 1400):         # 3 bytes a character: from 51 bytes up
        out.append(cjk[:n])
        out.append(cjk[n:2 * n])
        out.append(deva[:n])
        out.append(deva[:n])
    rnd.shuffle(out)
    return out


def test_long_pieces_in_one_call_equal_tiktoken():
    enc = ctok.get_encoding("o200k_base")
    ref = reference_encoding("o200k_base").enc
    rnd = random.Random(SEED)
    pieces = _long_pieces(rnd)
    # Separated by a newline and a digit so that each stays one piece of its own.
    text = "\n1".join(pieces)
    assert enc.encode_ordinary(text) == ref.encode_ordinary(text)
    for p in pieces:
        assert enc.encode_ordinary(p) == ref.encode_ordinary(p), (p[:20], len(p))


def test_long_pieces_with_byte_fallback_equal_tokenizers():
    tokenizers = pytest.importorskip("tokenizers")
    path = vocab_path("mistral-7b-v0.1", "tokenizer.json")
    enc = ctok.load(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    rnd = random.Random(SEED + 1)
    pieces = _long_pieces(rnd)
    # Characters Mistral has no token for (byte fallback) inside long runs.
    pieces += ["\U0001F9EC" * 30 + "q" * 60, "\u4E00" * 70 + "\U0001F9EC" + "\u4E00" * 70]
    for p in pieces:
        assert enc.encode_ordinary(p) == ref.encode(p, add_special_tokens=False).ids, (p[:20], len(p))
    text = " ".join(pieces)
    assert enc.encode_ordinary(text) == ref.encode(text, add_special_tokens=False).ids


def _short_pieces(rnd):
    # Lowercase letter runs are one o200k piece each; none of these is a token, so every one is merged.
    out = []
    for n in range(2, 49):
        out.append("".join(rnd.choice("etaoinshrdlucmfwypvbgkqjxz") for _ in range(n)))
        out.append("".join(rnd.choice("qxzjkv") for _ in range(n)))       # pairs that rarely merge
        out.append(("ab" * n)[:n])                                       # equal pairs: leftmost first
        out.append("a" * n)
        out.append("zq" * (n // 2) + "ing")                              # the last pair merges early
    return out


@pytest.mark.parametrize("cache", [True, False])
def test_short_pieces_every_length_equal_tiktoken(cache, monkeypatch):
    if not cache:
        monkeypatch.setenv("CTOK_PIECE_CACHE_BYTES", "0")
    enc = ctok.load(str(vocab_path("o200k_base", "o200k_base.tiktoken")))
    ref = reference_encoding("o200k_base").enc
    pieces = _short_pieces(random.Random(SEED + 2))
    for p in pieces:
        assert enc.encode_ordinary(p) == ref.encode_ordinary(p), (p, len(p))
    text = "\n1".join(pieces)
    assert enc.encode_ordinary(text) == ref.encode_ordinary(text)
