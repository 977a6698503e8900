"""The bit-parallel 64-byte windows of DeepSeek-V3's and GPT-2's pretokenizers (ctok/_ascii_block_ds.h,
ctok/_ascii_block_gpt2.h).

As tests/test_ascii_block.py does for the o200k family: ``next_piece_ends`` (the encoder's path) reads piece ends
off windows of ASCII; these tests put each rule of the windows (numbered in the headers' comments) at every offset
of a window and around its edges, and compare the pieces with tokenizers (DeepSeek's three Split steps, GPT-2's
ByteLevel regex), with tiktoken for GPT-2 (tiktoken cannot run DeepSeek's sequence of patterns) and with the
per-piece scanner, at batch sizes that use windows (a window is only used with room for 8 ends).
"""
from __future__ import annotations

import functools
import random

import pytest

from ctok import patterns as pt

P = pytest.importorskip("ctok._pretok")
pytest.importorskip("tokenizers")

from test_ascii_block import assert_windows_used, pieces_of, soup  # noqa: E402
from test_pretok import assert_tiktoken_splits_many, hf_pretokenizer  # noqa: E402

KINDS = [pt.PRETOK_DEEPSEEK, pt.PRETOK_GPT2]
IDS = [pt.KIND_NAMES[k] for k in KINDS]

# Pieces and joints that each rule of the window decides (see the comment at the top of _ascii_block_ds.h).
SNIPPETS = [
    "word", " word", "Word", "camelCase", "HTTPServer", "x", "ab", " x",                     # 1. runs
    "7", "12", "123", "1234", "1234567", " 42", "a1", "1a", "1.", ".1", "1\n", "1 ", "x1y",   # 2. digit groups
    "\x00", "\x01a", "\x01\x02ab", "\x1f", "\x7f", "\x7fx", "\x00.", "\x00 ", " \x00a", "\x1c\x1d",  # 3. gaps
    "\x00\n", "\x01\x01", "a\x01", "(\x01x",
    " ", "  ", "   ", "\n", "\n\n", "\r\n", "\t", "\t\t", " \n", "\n ", "\n  ", " \n \n ",   # 4. whitespace
    "  \n\n  ", "\x0b", "\x0c", "\t(", " \t", "  1", "\t\t2", "\n  3", " \n4", "\n5", "  \x01", "\t\x01",
    "}\n", "}\n\n", "}\n  ", ":\r\n", ".\n\nx", "(\n\tx", ".\n1", ";\n \n", ".\r\r\n\n ",  # 5. punctuation tails
    " (", " ...", " = ", " .abc", " (x", " .", "  (", "\t.", " \n.",                         # 6. ' ?'
    "(x", "((x", "!x", ".abc", "..abc", "\tb", "\nb", "'s", "it's", "don't", "_x", "x_", "a.b",  # 7. prefixes
    "->", "#", "'", "''", "\x0bx", "\x0cy", "\ry",
    # GPT-2's rule 4, contractions (lower case only, at a piece start, left to right)
    "we're", "I'LL", "you've", "I'm", "he'd", "it'S", "x'lL", "can'tell", "it's's", "o'clock", "' s", " 's",
    "rock'n'roll", "'re", "'ll", "a'", "'x", "''s", "('s", "'d've", "'r", "'l", "'v", "'ree", " ''", "1's",
]

_HF = functools.lru_cache(maxsize=None)(hf_pretokenizer)


def check(kind, texts, label):
    """Windows' pieces equal the per-piece scanner's at batch sizes that use windows, and tokenizers'."""
    hf = _HF(kind)
    all_pieces = []
    for t in texts:
        data = t.encode("utf-8")
        ends = P.piece_ends(kind, data)
        for m in (8, 16, 64, 9):
            got = P.piece_ends_batched(kind, data, m)
            assert got == ends, f"{label}: {pt.KIND_NAMES[kind]} batched by {m} on {t!r}"
        pieces = pieces_of(data, ends)
        ref = [p for p, _ in hf.pre_tokenize_str(t)]
        assert pieces == ref, f"{label}: {pt.KIND_NAMES[kind]} vs tokenizers on {t!r}"
        all_pieces.append(pieces)
    if kind == pt.PRETOK_GPT2:
        assert_tiktoken_splits_many(pt.PATTERNS[kind], texts, f"{label} {pt.KIND_NAMES[kind]}", all_pieces)


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_random_snippets(kind):
    rng = random.Random(7 + kind)
    check(kind, [soup(rng, rng.randint(64, 400), SNIPPETS) for _ in range(2000)], "snippets")


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_random_bytes_of_the_classes(kind):
    # Every class the windows tell apart (letters, digits, each space, punctuation, control characters, the
    # letters of contractions) in random order, and with fewer classes so that runs get long.
    full = "aAzZxbsStTmMdDlLrReEvV" + "0123456789" + "  \n\r\t\x0b\x0c" + ".,;(){}-\"#*'_" + "\x00\x01\x1f\x7f"
    rng = random.Random(101 + kind)
    texts = []
    for _ in range(2000):
        alphabet = full if rng.random() < 0.6 else "".join(rng.sample(full, rng.randint(2, 6)))
        texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(64, 300))))
    check(kind, texts, "class bytes")


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_each_snippet_at_every_offset(kind):
    # A snippet between two fillers, at each offset from 0 to 80: its rule decided at each position of a
    # window, at a window's edge (the last 2 bytes are not trusted) and across two windows.
    texts = []
    for s in SNIPPETS:
        for filler in ("ab ", "x\n", "  ", "7."):
            for off in range(0, 81):
                head = (filler * 40)[:off]
                texts.append(head + s + (filler * 40)[:90])
    check(kind, texts, "snippet at offset")


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_long_runs_and_bytes_above_ascii(kind):
    # Runs longer than a window (no piece decided: the scalar scanner goes on), and characters >= 0x80 (a
    # letter, a mark, digits, spaces, punctuation, CJK, an emoji) at each offset: the window must stop trusting
    # before them.
    texts = []
    for run in ("a" * 70, "A" * 70, "1" * 70, " " * 70, "\n" * 70, "." * 70, " \n" * 35, "\x01" * 70, "\t" * 70,
                " 1" * 35, ".\n" * 35, "\x01a" * 35, "'" * 70, "'s" * 35, " 's" * 24):
        texts += ["x " + run + " y" * 40, run + "z" * 3 + " w" * 40, run + "1" + " w" * 40]
    for ch in ("é", "\u0301", "٣", "²", "\u00a0", "\x85", "\u3000", "\u2019", "\u201d", "\u00ab", "中", "カ", "한",
               "\U0001F600"):
        for off in range(0, 70, 1):
            texts.append(("it's a test, 12 " * 10)[:off] + ch + (" we're 12 CamelCase\n" * 5))
            texts.append((" " * off) + ch + ("x " * 40))
            texts.append(("ab.\x01\n 123" * 10)[:off] + ch + ("(x) " * 20))
            texts.append(("\x01" * off) + ch + ("\x01a" * 30))
    check(kind, texts, "runs and non-ASCII")


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_windows_are_used(kind):
    assert_windows_used(kind, b"Pretokenization considers whitespace carefully; extraordinary 42.\n" * 40)


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_the_text_end(kind):
    # As test_ascii_block.test_the_text_end: the text's last window, padded past the end.
    from test_ascii_block import text_end_cases
    rng = random.Random(400 + kind)
    alphabet = "aAsStTmMdDxZ" + "0123456789" + "  \n\r\t" + "''" + ".,;()-\x00\x01\x7f"
    check(kind, rng.sample(text_end_cases(rng, SNIPPETS, alphabet), 6000), "text end")


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_last_window_is_used(kind):
    from test_ascii_block import assert_last_window_used
    assert_last_window_used(kind)
