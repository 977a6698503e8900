"""_encoder._find_char (ctok/_find_char.h), the search behind the compiled route's added-token test, answers as
str.find does on strings of each storage kind, wherever the character sits in or across its 16-unit blocks,
and with the code units that share a byte with it (U+043C holds the byte 0x3C of "<")."""
import random

import pytest

from ctok._encoder import _find_char

SEED = 7301

FILLERS = {
    "ascii": "abc def<|\n",
    "latin1": "abc\u00e9\u00ff<",
    "ucs2": "\u043c\u0430\u3c3c\u3c00\u003c\u0100\u4e2d<",
    "ucs4": "\U0001F600\U0001003c\u043c\u3c3c<a",
}
TARGETS = ["<", "\u043c", "\u3c3c", "\u00ff", "\U0001F600", "\U0001003c", "\u0100", "\uffff", "z"]


@pytest.mark.parametrize("kind", sorted(FILLERS))
def test_find_char_equals_str_find(kind):
    rnd = random.Random(SEED)
    alphabet = FILLERS[kind]
    for _ in range(400):
        n = rnd.randint(0, 70)
        text = "".join(rnd.choice(alphabet) for _ in range(n))
        for ch in TARGETS + [rnd.choice(alphabet)] if text else TARGETS:
            start = rnd.randint(0, n)
            end = rnd.randint(start, n)
            assert _find_char(text, ord(ch), start, end) == text.find(ch, start, end), (text, ch, start, end)
            assert _find_char(text, ord(ch), 0, n) == text.find(ch), (text, ch)


@pytest.mark.parametrize("kind", sorted(FILLERS))
def test_find_char_each_position(kind):
    # One occurrence at every position of a text long enough for several blocks, the rest fillers without it.
    base = FILLERS[kind].replace("<", "")
    for n in (1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 100):
        text0 = (base * (n // len(base) + 1))[:n]
        for pos in range(n):
            text = text0[:pos] + "<" + text0[pos + 1:]
            assert _find_char(text, ord("<"), 0, n) == text.find("<")
            assert _find_char(text, ord("<"), pos + 1, n) == text.find("<", pos + 1)
            assert _find_char(text, ord("<"), 0, pos) == text.find("<", 0, pos)


def test_find_char_refuses_bounds_outside_the_text():
    with pytest.raises(ValueError):
        _find_char("abc", ord("a"), 0, 4)
