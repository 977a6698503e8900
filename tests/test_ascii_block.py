"""The bit-parallel 64-byte windows of the o200k-family and cl100k-family pretokenizers (ctok/_ascii_block.h,
ctok/_ascii_block_cl100k.h).

``next_piece_ends`` (the encoder's path) classifies 64 bytes of ASCII after a piece start and reads every
piece end it can trust off bit masks; the per-piece scanner (``next_piece_end``, checked exhaustively in
test_pretok.py) is not used there.  These tests put each rule of the window at every offset of a window and
around its edges, and compare the pieces with tiktoken (the reference, through ``assert_tiktoken_splits_many``),
with tokenizers for the HF kinds (Llama 3, Qwen) and with the per-piece scanner, at several batch sizes (a
window is only used with room for 8 ends).
"""
from __future__ import annotations

import random

import pytest

from ctok import patterns as pt

P = pytest.importorskip("ctok._pretok")
pytest.importorskip("tiktoken")

from test_pretok import HF_KINDS, assert_tiktoken_splits_many, hf_pretokenizer  # noqa: E402

O200K_KINDS = [pt.PRETOK_O200K, pt.PRETOK_KIMI, pt.PRETOK_TEKKEN]
CL100K_KINDS = [pt.PRETOK_CL100K, pt.PRETOK_LLAMA3, pt.PRETOK_QWEN]
KINDS = O200K_KINDS + CL100K_KINDS
IDS = [pt.KIND_NAMES[k] for k in KINDS]

# Pieces and joints that each rule of the window decides (see the comments at the top of _ascii_block.h and
# _ascii_block_cl100k.h).
SNIPPETS = [
    "word", " word", "Word", " Word", "camelCase", "HTTPServer", "ABC", "aBcD", "x",  # runs, [A-Z] after [a-z]
    "7", "12", "123", "1234", "1234567", " 42", "a1", "1a",                            # digit groups
    "don't", "it's", "we're", "I'LL", "you've", "I'm", "he'd", "it'S", "x'lL", "can'tell", "it's's",  # contractions
    "o'clock", "'s", "'", "''", "' s", "rock'n'roll", "'re", "'ll", "a'", "'x",
    "(", "((", " (", "((x", " (x", "(x", ".", "...", " ...", "!x", "->", "=", " = ", "#",  # punctuation, prefixes
    "}\n", "}\n\n", "}\n  ", ";\n/", ";\n//", ";\n/(x", "/*", "//", "\n/", "x/\n/y", ":\r\n",  # punctuation tails
    " ", "  ", "   ", "\n", "\n\n", "\r\n", "\t", "\t\t", " \n", "\n ", "\n  ", " \n \n ", "  \n\n  ",  # whitespace
    "\x0b", "\x0c", "\t(", " \t", "\x00", "\x1f", "\x7f", "\x1c",
    # cl100k family: a contraction is a piece of its own wherever a piece starts with an apostrophe
    "'sa", "'s's", " 's", "  's", "\t's", "\n's", " \n's", ".\n's", "x.'s", "''s", "'1", "1'd", "' ", "'\n", "'LL",
    "'Re", "'vE", "'M", "'D", "'T", "'l", "'r", "'v", "'rx", "'lx", "'vx", "'ll'x", "'t'", "'re's", "\x00's", "-'s",
    "\tx", "\x00x", ")\r\n\r\n", ".\n\n  x", "'\r\n", "a'b'c",
]


def pieces_of(data: bytes, ends):
    out, start = [], 0
    for e in ends:
        out.append(data[start:e].decode("utf-8"))
        start = e
    return out


def check(kind, texts, label):
    """Windows' pieces equal the per-piece scanner's at batch sizes that use windows, and tiktoken's (and
    tokenizers' for the HF kinds)."""
    all_pieces = []
    hf = hf_pretokenizer(kind) if kind in HF_KINDS else None
    for t in texts:
        data = t.encode("utf-8")
        ends = P.piece_ends(kind, data)
        for m in (8, 16, 64, 9):
            got = P.piece_ends_batched(kind, data, m)
            assert got == ends, f"{label}: {pt.KIND_NAMES[kind]} batched by {m} on {t!r}"
        pieces = pieces_of(data, ends)
        if hf is not None:
            ref = [p for p, _ in hf.pre_tokenize_str(t)]
            assert pieces == ref, f"{label}: {pt.KIND_NAMES[kind]} vs tokenizers on {t!r}"
        all_pieces.append(pieces)
    assert_tiktoken_splits_many(pt.PATTERNS[kind], texts, f"{label} {pt.KIND_NAMES[kind]}", all_pieces)


def soup(rng, n, snippets=SNIPPETS):
    """Snippets, often glued together, sometimes with a space; long enough for several windows."""
    out = []
    size = 0
    while size < n:
        s = rng.choice(snippets)
        if rng.random() < 0.3:
            s += " "
        out.append(s)
        size += len(s)
    return "".join(out)


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_random_snippets(kind):
    rng = random.Random(kind)
    check(kind, [soup(rng, rng.randint(64, 400)) for _ in range(1500)], "snippets")


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_random_bytes_of_the_classes(kind):
    # Every class the window tells apart, and the letters contractions test, in random order.
    alphabet = "aAsStTmMdDlLrReEvVxZ" + "0123456789" + "  \n\r\t\x0b\x0c" + "''//" + ".,;(){}-\"#*\x00\x7f"
    rng = random.Random(100 + kind)
    check(kind, ["".join(rng.choice(alphabet) for _ in range(rng.randint(64, 300))) for _ in range(1500)],
          "class bytes")


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_each_snippet_at_every_offset(kind):
    # A snippet between two fillers, at each offset from 0 to 80: its rule decided at each position of a
    # window, at a window's edge (the last 3 bytes are not trusted) and across two windows.
    texts = []
    for s in SNIPPETS:
        for filler in ("ab ", "x\n", "  "):
            for off in range(0, 81):
                head = (filler * 40)[:off]
                texts.append(head + s + (filler * 40)[:90])
    check(kind, texts, "snippet at offset")


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_long_runs_and_bytes_above_ascii(kind):
    # Runs longer than a window (no piece decided: the scalar scanner goes on), and characters >= 0x80 (a
    # letter, a digit, a space, punctuation) at each offset: the window must stop trusting before them.
    texts = []
    for run in ("a" * 70, "A" * 70, "1" * 70, " " * 70, "\n" * 70, "." * 70, " \n" * 35, "/" * 70):
        texts += ["x " + run + " y" * 40, run + "z" * 3 + " w" * 40]
    # "'\u017f" and "'l\u017f" put an apostrophe one and two bytes before the first byte >= 0x80, where the
    # long s (U+017F) folds onto s: the first is a contraction under (?i).
    for ch in ("é", "٣", "\u00a0", "\u3000", "\u2019", "\u201d", "中", "\U0001F600", "\u0301", "'\u017f", "'l\u017f"):
        for off in range(0, 70, 1):
            texts.append(("it's a test, " * 10)[:off] + ch + (" we're 12 CamelCase\n" * 5))
            texts.append((" " * off) + ch + ("x " * 40))
    check(kind, texts, "runs and non-ASCII")


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_random_class_bytes_around_bytes_above_ascii(kind):
    # The trust limit at a byte >= 0x80 with random ASCII of every class before it (the cl100k windows trust
    # the byte right before it): one to three such characters at random places, among them the long s and
    # the Kelvin sign (which fold onto ASCII letters under (?i)), a combining mark (punctuation in the cl100k
    # patterns) and non-ASCII spaces.
    alphabet = "aAsStTmMdDlLrReEvVxZ" + "0123456789" + "  \n\r\t\x0b\x0c" + "''''//" + ".,;(){}-\"#*\x00\x7f"
    highs = ["é", "٣", "\u00a0", "\u3000", "\u2019", "中", "\U0001F600", "\u0301", "\u017f", "\u212a", "\u0085"]
    rng = random.Random(200 + kind)
    texts = []
    for _ in range(1500):
        t = [rng.choice(alphabet) for _ in range(rng.randint(64, 200))]
        for _ in range(rng.randint(1, 3)):
            t.insert(rng.randint(0, len(t)), rng.choice(highs))
        texts.append("".join(t))
    check(kind, texts, "class bytes around non-ASCII")


def assert_windows_used(kind, data):
    """The batched path takes windows on this ASCII text (else the window tests test nothing new), counted
    without timing by the number of pieces a batch of 16 ends at: a window returns early when fewer than 8 ends
    of room are left, the scalar scanner never does before the text's end."""
    ends = P.piece_ends(kind, data)
    batches = P.batch_sizes(kind, data, 16)
    assert sum(batches) == len(ends)
    assert any(b < 16 for b in batches[:-1]), "no batch was cut short by a window"


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_windows_are_used(kind):
    # Words long enough that a window holds fewer than 16 pieces of every kind.
    assert_windows_used(kind, b"The quickest brown foxes jumped over the laziest dogs; it's 42.\n" * 40)


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_general_punctuation_block(kind):
    # Windows take U+2000..U+207F's punctuation (three bytes) as punctuation and stop at its spaces, letters
    # and digits: every code point of the range, in the contexts where a character's class decides (a word's
    # prefix, ' ?', runs, tails, whitespace before it), at offsets around a window's edges.
    contexts = ["{c}word", " {c}word", "{c}{c}word", "x{c}y", "{c} ", "  {c}", "{c}\n\n", "{c}\n/x", "it{c}s",
                "a{c}'s", "{c}12", "'{c}", "\n{c}", "{c}(", "({c}x", ". {c}"]
    texts = []
    for cp in range(0x2000, 0x2080):
        ch = chr(cp)
        for i, ctx in enumerate(contexts):
            off = (cp * 7 + i * 13) % 70
            texts.append(("ab cd " * 20)[:off] + ctx.format(c=ch) + " more words, then 42.\n" * 4)
    check(kind, texts, "general punctuation")


def test_general_punctuation_windows_are_used():
    # English with curly quotes and dashes keeps taking windows (batches cut short by them).
    data = ("\u201cThe quick brown fox jumps over the lazy dog, and the dog sleeps on,\u201d he said. It was "
            "late \u2014 far too late for a walk, and the moon was up over the hills.\n" * 30).encode()
    batches = P.batch_sizes(pt.PRETOK_O200K, data, 16)
    assert sum(b < 16 for b in batches[:-1]) > len(batches) // 2


def text_end_cases(rng, snippets, alphabet):
    """Texts of every length from 1 to 140 bytes (the last window is the whole text below 64 bytes, a copy of its
    last 64 bytes above), ending in each snippet, in random bytes of the classes and in a character >= 0x80."""
    texts = []
    for n in range(1, 141):
        for s in snippets:
            texts.append((soup(rng, n, snippets) + s)[-n:])
        texts.append("".join(rng.choice(alphabet) for _ in range(n)))
        high = rng.choice(["é", "\u2019", "中", "\u3000"])
        texts.append(("".join(rng.choice(alphabet) for _ in range(n)) + high)[-n:])
    return texts


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_the_text_end(kind):
    # The text's last bytes are one window padded with 0xFF past the end (next_piece_ends' last_window): it must
    # trust no start that the end of the text decides (a word, digits, whitespace or a contraction cut by it).
    rng = random.Random(300 + kind)
    alphabet = "aAsStTmMdDlLrReEvVxZ" + "0123456789" + "  \n\r\t" + "''//" + ".,;(){}-\"#\x00"
    texts = text_end_cases(rng, SNIPPETS, alphabet)
    check(kind, rng.sample(texts, 6000), "text end")


def assert_last_window_used(kind):
    """A text shorter than 64 bytes takes the last window: a batch of 16 ends after the window's pieces (fewer
    than 8 ends of room left), where the scalar scanner would have given the text's 11 pieces in one batch."""
    data = b"one two three four five six seven eight nine ten eleven"          # 55 bytes, 11 pieces
    assert len(P.piece_ends(kind, data)) == 11
    assert P.batch_sizes(kind, data, 16) == [10, 1]


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_last_window_is_used(kind):
    assert_last_window_used(kind)
