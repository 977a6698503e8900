"""`ctok.load(..., long_input_split=True)`: the long-input behaviour of Meta's Llama 3 / Llama 4 and Moonshot's Kimi
tokenizer wrappers, against a plain reimplementation of their loop on top of tiktoken (built from the recipe).

The wrappers cut text into 400,000-character pieces, cut each piece wherever a run of whitespace or of
non-whitespace characters (str.isspace) would exceed 25,000 characters, and call tiktoken on every piece.  With
the option off, ctok must stay equal to plain tiktoken on the same inputs.
"""
from __future__ import annotations

import pickle
import random

import pytest

from _shared import assert_same_ids, corpus_text, reference_encoding, vocab_path

import ctok
from ctok.long_input import split_long_input

pytest.importorskip("tiktoken")

PIECE = 400_000
RUN = 25_000


def wrapper_pieces(text):
    """The wrappers' cutting, written as a character loop."""
    pieces = []
    for i in range(0, len(text), PIECE):
        chunk = text[i:i + PIECE]
        start, run, in_space = 0, 0, chunk[:1].isspace()
        for j, ch in enumerate(chunk):
            if ch.isspace() != in_space:
                in_space, run = ch.isspace(), 1
                continue
            run += 1
            if run > RUN:
                pieces.append(chunk[start:j])
                start, run = j, 1
        pieces.append(chunk[start:])
    return pieces


def wrapper_encode(encode_piece, text):
    out = []
    for piece in wrapper_pieces(text):
        out += encode_piece(piece)
    return out


def _letters(rng, n, alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-'.,"):
    return "".join(rng.choice(alphabet) for _ in range(n))


def long_inputs():
    rng = random.Random(6)
    prose = corpus_text("en_botchan.txt")
    han = corpus_text("zh_classical.txt")
    return {
        "letters_60001": _letters(rng, 60_001),
        "spaces_between_words": "start " + " " * 60_001 + " end\n",
        "newlines_and_tabs": "x\n" + "\n\t" * 30_000 + "y",
        "unicode_space_run": "a" + "\u3000" * 26_000 + "\u2003\u00a0" * 13_000 + "b",
        "han_run_no_spaces": "".join(c for c in han if not c.isspace())[:30_000] * 2,
        "exact_boundaries": "a" * RUN + " " + "b" * (RUN + 1) + " " * (2 * RUN) + "c" * (2 * RUN + 1),
        "over_400k": (prose * (900_000 // len(prose) + 1))[:900_000] + _letters(rng, 30_000),
        "special_text_in_run": "q" * 24_990 + "<|eot_id|><|im_end|>[EOS]" + "r" * 10,
        "digits": "1234567890" * 6_000,
    }


def test_split_long_input_equals_the_wrapper_loop():
    rng = random.Random(7)
    texts = list(long_inputs().values()) + ["", "short", "a" * RUN, "a" * (RUN + 1)]
    for _ in range(40):
        texts.append("".join(rng.choice([" ", "\n", "\u3000", "\x1c", "\x85", "a", "語", "\u200b"])
                             * rng.choice([1, 7, RUN - 1, RUN, RUN + 1, 3 * RUN + 5, 130_000])
                             for _ in range(rng.randint(1, 6))))
    for text in texts:
        want = wrapper_pieces(text) if text else [text]
        got = split_long_input(text)
        assert "".join(got) == text
        assert [len(p) for p in got] == [len(p) for p in want or [""]]


FAMILIES = ["llama3-tiktoken", "kimi-k2", "o200k_base"]


@pytest.fixture(scope="module")
def inputs():
    return long_inputs()


@pytest.mark.parametrize("family", FAMILIES)
def test_option_equals_wrapper_and_default_equals_tiktoken(family, inputs):
    ref = reference_encoding(family)
    path = vocab_path(family)
    plain = ctok.load(path)
    split = ctok.load(path, long_input_split=True)
    assert split.long_input_split and not plain.long_input_split
    changed = 0
    for name, text in inputs.items():
        want_split = wrapper_encode(ref.encode_ordinary, text)
        want_plain = ref.encode_ordinary(text)
        changed += want_split != want_plain
        assert_same_ids(split.encode_ordinary(text), want_split, text, f"{family} {name} split")
        assert_same_ids(plain.encode_ordinary(text), want_plain, text, f"{family} {name} plain")
        # Kimi's wrapper encodes with allowed_special="all"; Llama's passes the caller's policy on.
        assert_same_ids(split.encode(text, allowed_special="all"),
                        wrapper_encode(lambda p: ref.encode(p, allowed_special="all"), text), text, name)
        assert_same_ids(plain.encode(text, allowed_special="all"), ref.encode(text, allowed_special="all"), text,
                        name)
        assert split.count(text, disallowed_special=()) == len(
            wrapper_encode(lambda p: ref.encode(p, disallowed_special=()), text))
    assert changed >= 3, "the inputs should include some on which the wrappers differ from plain tiktoken"


@pytest.mark.parametrize("family", ["llama3-tiktoken", "kimi-k2"])
def test_option_in_batches_and_segments(family, inputs):
    ref = reference_encoding(family)
    split = ctok.load(vocab_path(family), long_input_split=True)
    texts = [inputs["letters_60001"], "short text", inputs["spaces_between_words"], inputs["exact_boundaries"]]
    want = [wrapper_encode(ref.encode_ordinary, t) for t in texts]
    assert split.encode_ordinary_batch(texts, num_threads=2) == want
    assert split.encode_batch(texts, num_threads=2) == want
    ids, offsets = split.encode_batch_flat(texts, num_threads=2)
    assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == want
    trusted = "<|im_end|>" if family == "kimi-k2" else "<|eot_id|>"
    got = split.encode_segments([(trusted, True), (texts[0], False)])
    assert got == [ref.special_tokens[trusted]] + want[0]


def test_disallowed_special_checked_per_piece(inputs):
    """The wrappers check each piece for disallowed special text; a piece with none encodes normally."""
    ref = reference_encoding("llama3-tiktoken")
    split = ctok.load(vocab_path("llama3-tiktoken"), long_input_split=True)
    text = inputs["special_text_in_run"]
    with pytest.raises(ValueError):
        ref.encode(text)
    with pytest.raises(ctok.DisallowedSpecialError):
        split.encode(text)
    # A special token's text cut by the 25,000-character rule is no longer special text in either piece.
    cut = "q" * (RUN - 3) + "<|eot_id|>" + "r"
    assert wrapper_encode(ref.encode, cut) == split.encode(cut)


def test_hf_tokenizer_json_with_option(inputs):
    """tokenizer.json families accept the option too; the BOS template is applied once, around the whole."""
    tokenizers = pytest.importorskip("tokenizers")
    path = vocab_path("llama3-hf", "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(path))
    split = ctok.load(path, long_input_split=True)
    plain = ctok.load(path)
    for name in ("letters_60001", "spaces_between_words", "exact_boundaries"):
        text = inputs[name]
        want = wrapper_encode(lambda p: hf.encode(p, add_special_tokens=False).ids, text)
        assert_same_ids(split.encode(text), want, text, name)
        assert_same_ids(split.encode(text, add_special_tokens=True), [128000] + want, text, name)
        assert_same_ids(plain.encode(text), hf.encode(text, add_special_tokens=False).ids, text, name)


def test_option_is_kept_by_pickle_and_shares_tables():
    path = vocab_path("llama3-tiktoken")
    split = ctok.load(path, long_input_split=True)
    plain = ctok.load(path)
    assert split is ctok.load(path, long_input_split=True)
    assert split is not plain and split._core is plain._core
    back = pickle.loads(pickle.dumps(split))
    assert back.long_input_split
    assert "long_input_split=True" in repr(split)
    assert pickle.loads(pickle.dumps(plain)).long_input_split is False
    with pytest.raises(ctok.UnsupportedOptionError):
        ctok.load(path, long_input_split="yes")
