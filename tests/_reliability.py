"""Helpers for the reliability tests (issue 8): families with their references, encodings with chosen cache
sizes, hypothesis strategies for hostile text, and the fuzzing budget.

Budget (environment):

* ``CTOK_FUZZ_EXAMPLES`` -- hypothesis examples per test and family (default 40: a short, repeatable run in CI).
* ``CTOK_FUZZ_SEED`` -- an integer: generate from this seed instead of the fixed CI seed (each family mixes in its
  own name), so a long run explores new inputs; a failure prints the falsifying text and the seed.

A long run, e.g.: ``CTOK_FUZZ_EXAMPLES=5000 CTOK_FUZZ_SEED=$RANDOM python -m pytest -q tests/test_fuzz_diff.py``.
"""
from __future__ import annotations

import contextlib
import functools
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import _shared

FUZZ_EXAMPLES = int(os.environ.get("CTOK_FUZZ_EXAMPLES", "40"))
_SEED_ENV = os.environ.get("CTOK_FUZZ_SEED", "").strip()
FUZZ_SEED = int(_SEED_ENV) if _SEED_ENV else 20261202

HF_FILES = [
    "gpt2/tokenizer.json",
    "gpt-neox-20b/tokenizer.json",
    "llama3-hf/tokenizer.json",
    "qwen3/tokenizer.json",
    "deepseek-v3/tokenizer.json",
    "mistral-7b-v0.1/tokenizer.json",
    "mistral-7b-v0.1/tokenizer.metaspace.json",
    "mistral-7b-v0.3/tokenizer.json",
    "llama2/tokenizer.json",
]


@contextlib.contextmanager
def env(**values):
    """Set (or, with None, remove) environment variables for the duration of the block."""
    old = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = str(v)
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def fresh_encoding(path, *, pattern=None, special_tokens=None, piece_cache_bytes=None, prefix_cache_bytes=None):
    """A new ``Encoding`` for ``path`` that ``ctok.load``'s cache of loaded encodings does not hold, built with the
    given piece-cache size (``CTOK_PIECE_CACHE_BYTES`` at construction) and prefix-cache size (0 = off)."""
    import ctok

    with env(CTOK_PIECE_CACHE_BYTES=piece_cache_bytes):
        enc = ctok._build(os.path.abspath(str(path)), pattern, None if special_tokens is None else dict(special_tokens),
                          None)
    if piece_cache_bytes is not None and piece_cache_bytes < 2048:
        assert enc._core.piece_cache_bytes == 0, "the piece cache should be off"
    if prefix_cache_bytes is not None:
        enc.set_prefix_cache(prefix_cache_bytes)
    return enc


# ---------------------------------------------------------------------------------------------------------------
# Families


@dataclass
class TiktokenCase:
    """A tiktoken-format family: ctok with default caches (``on``), with both caches off (``off``), and tiktoken."""

    id: str
    on: object
    off: object
    ref: object
    path: str
    load_kwargs: dict = field(default_factory=dict)

    def __repr__(self):
        return f"TiktokenCase({self.id})"


def tiktoken_case(family, tmp_dir) -> TiktokenCase:
    import ctok

    r = family.recipe_data()
    src = family.source_file()
    if family.view_lines:
        src = _shared.write_first_lines(src, Path(tmp_dir) / f"{family.id}.tiktoken", family.view_lines)
    kwargs = dict(pattern=r["pat_str"], special_tokens=r["special_tokens"]) if family.load == "explicit" else {}
    on = ctok.load(str(src), **kwargs)
    off = fresh_encoding(src, piece_cache_bytes=0, prefix_cache_bytes=0, **kwargs)
    ref = _shared.reference_encoding(family.folder, family.recipe)
    return TiktokenCase(family.id, on, off, ref, str(src), kwargs)


@dataclass
class HFCase:
    """A tokenizer.json family: ctok (default caches / piece cache off) and HF tokenizers."""

    id: str
    on: object
    off: object
    ref: object
    path: str

    def __repr__(self):
        return f"HFCase({self.id})"

    def ref_ids(self, text, *, add_special_tokens=False, encode_special_tokens=False):
        self.ref.encode_special_tokens = encode_special_tokens
        try:
            return self.ref.encode(text, add_special_tokens=add_special_tokens).ids
        finally:
            self.ref.encode_special_tokens = False


def hf_case(rel) -> HFCase:
    import ctok
    tokenizers = pytest.importorskip("tokenizers")

    path = str(_shared.vocab_path(*rel.split("/")))
    on = ctok.load(path)
    off = fresh_encoding(path, piece_cache_bytes=0, prefix_cache_bytes=0)
    return HFCase(rel, on, off, tokenizers.Tokenizer.from_file(path), path)


def has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


# ---------------------------------------------------------------------------------------------------------------
# Hypothesis: settings and strategies


def fuzz_settings(scale=1.0, salt=""):
    """A decorator: hypothesis settings for the fuzz budget and a seed mixed with ``salt`` (e.g. the family), so
    every family sees different inputs, the same ones on every CI run."""
    from hypothesis import HealthCheck, seed, settings

    s = settings(max_examples=max(1, int(FUZZ_EXAMPLES * scale)), deadline=None, database=None,
                 suppress_health_check=list(HealthCheck), print_blob=True)
    sd = seed((FUZZ_SEED ^ zlib.crc32(salt.encode("utf-8"))) & 0xFFFFFFFF)

    def deco(f):
        return sd(s(f))

    return deco


@functools.lru_cache(maxsize=None)
def unicode_segments():
    """Assigned code points (Unicode 16, surrogates and private use excluded) in runs that approximate Unicode
    blocks: consecutive 16-code-point pages whose first assigned character's name starts with the same word
    ("LATIN", "CJK", "HANGUL", "TANGUT", ...).  About 600 runs; sampling a run first gives every block a chance."""
    try:
        import unicodedata2 as ud
    except ImportError:  # pragma: no cover
        import unicodedata as ud
    segs = []
    cur = None
    for page in range(0x110000 >> 4):
        cps = [cp for cp in range(page << 4, (page + 1) << 4) if ud.category(chr(cp)) not in ("Cn", "Cs", "Co")]
        if not cps:
            cur = None
            continue
        word = ud.name(chr(cps[0]), "?").split(" ")[0].split("-")[0]
        if cur is not None and cur[0] == word and cur[2] == page - 1:
            cur[1].extend(cps)
            cur[2] = page
        else:
            cur = [word, cps, page]
            segs.append(cur)
    return tuple(tuple(s[1]) for s in segs)


@functools.lru_cache(maxsize=None)
def _by_category():
    table, _ = _shared._category_table()
    return table


SPECIAL_NAMES = [
    "<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|im_start|>",
    "<|im_end|>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|reserved_special_token_0|>", "<s>", "</s>", "<unk>", "[INST]", "[/INST]", "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>", "<|extra_0|>", "<|im_sep|>", "<think>", "</think>", "[TOOL_CALLS]", "<SPECIAL_20>",
    "<|vision_start|>", "<|fim_pad|>", "<|repo_name|>", "[BOS]",
]
APOSTROPHES = ["'", "’", "‘", "ʼ", "＇", "`"]
CONTRACTION_TAILS = ["s", "t", "re", "ve", "m", "ll", "d"]
EMOJI_BASES = ["😀", "👍", "👨", "👩", "👧", "👦", "🧑", "🤝", "❤", "☺", "🏳", "🏴", "👁", "🗨", "💻", "🌈", "🔥", "🎉",
               "🙂", "🤖", "🦀", "🐍", "⭐", "✋", "🫶", "🪿", "🏻", "⚕", "✈"]


def _case_variants(s):
    from hypothesis import strategies as st

    return st.lists(st.booleans(), min_size=len(s), max_size=len(s)).map(
        lambda flags: "".join(c.upper() if f else c for c, f in zip(s, flags)))


@functools.lru_cache(maxsize=None)
def fragment_strategy():
    """One fragment of hostile text; ``text_strategy`` joins several."""
    from hypothesis import strategies as st

    cats = _by_category()
    segs = unicode_segments()
    block_char = st.sampled_from(segs).flatmap(st.sampled_from).map(chr)
    block_run = st.lists(block_char, min_size=1, max_size=6).map("".join)
    any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF)
    marks = st.sampled_from(cats["Mn"] + cats["Mc"] + cats["Me"]).map(chr)
    letters = st.sampled_from(cats["Lu"] + cats["Ll"] + cats["Lt"] + cats["Lm"] + cats["Lo"]).map(chr)
    bases = st.one_of(letters, st.sampled_from(["", " ", "a", "1", "'", "中", "😀", "\n", "ǅ"]))
    combining = st.tuples(bases, st.lists(marks, min_size=1, max_size=24)).map(lambda t: t[0] + "".join(t[1]))
    whitespace = st.lists(st.sampled_from(_shared.WHITESPACE + ["\r\n", "  ", "\n\n"]), min_size=1,
                          max_size=8).map("".join)
    digit_zeros = [cp for cp in cats["Nd"] if _shared._digit2(cp) == 0]
    digit_run = st.tuples(st.sampled_from(digit_zeros), st.lists(st.integers(0, 9), min_size=1, max_size=12)).map(
        lambda t: "".join(chr(t[0] + d) if _shared._ok_cp(t[0] + d) else str(d) for d in t[1]))
    numbers = st.sampled_from(cats["Nl"] + cats["No"]).map(chr)
    contraction = st.tuples(
        st.sampled_from(["", "I", "it", "DON", "we", "they", " ", "中", "1", "é", "\n", "x'"]),
        st.sampled_from(APOSTROPHES),
        st.sampled_from(CONTRACTION_TAILS).flatmap(_case_variants),
        st.sampled_from(["", " ", "s", "x", "'", "\n", "1"]),
    ).map("".join)
    han = st.lists(st.one_of(st.integers(0x4E00, 0x9FFF), st.integers(0x3400, 0x4DBF), st.integers(0x20000, 0x2A6DF),
                             st.integers(0xF900, 0xFAD9), st.sampled_from([0x3005, 0x3007, 0x3006, 0x303B])),
                   min_size=1, max_size=10).map(lambda cps: "".join(map(chr, cps)))
    kana = st.lists(st.one_of(st.integers(0x3041, 0x3096), st.integers(0x30A1, 0x30FA), st.just(0x30FC),
                              st.integers(0xFF66, 0xFF9D)), min_size=1, max_size=10).map(lambda c: "".join(map(chr, c)))
    hangul = st.lists(st.one_of(st.integers(0xAC00, 0xD7A3), st.integers(0x1100, 0x11FF), st.integers(0x3131, 0x318E)),
                      min_size=1, max_size=10).map(lambda c: "".join(map(chr, c)))
    skin = st.sampled_from(["", "", "\U0001F3FB", "\U0001F3FC", "\U0001F3FD", "\U0001F3FE", "\U0001F3FF"])
    emoji_one = st.tuples(st.sampled_from(EMOJI_BASES), skin, st.sampled_from(["", "", "\ufe0f"])).map("".join)
    zwj_seq = st.lists(emoji_one, min_size=1, max_size=4).map("\u200d".join)
    flags = st.lists(st.integers(0x1F1E6, 0x1F1FF), min_size=1, max_size=5).map(lambda c: "".join(map(chr, c)))
    tag_seq = st.lists(st.integers(0xE0061, 0xE007A), max_size=6).map(
        lambda c: "\U0001F3F4" + "".join(map(chr, c)) + "\U000E007F")
    keycap = st.sampled_from("0123456789#*").map(lambda c: c + "\ufe0f\u20e3")
    emoji = st.one_of(zwj_seq, flags, tag_seq, keycap, st.integers(0x1F300, 0x1FAFF).map(chr))
    surrogate = st.integers(0xD800, 0xDFFF).map(chr)
    controls = st.lists(st.one_of(st.integers(0, 0x1F), st.integers(0x7F, 0x9F),
                                  st.sampled_from([0xAD, 0x200B, 0x200C, 0x200D, 0x200E, 0x2060, 0xFEFF, 0xE0001,
                                                   0xFFF9, 0xFFFD, 0xFFFE, 0xFFFF, 0x10FFFF, 0xE000, 0xF8FF])),
                        min_size=1, max_size=6).map(lambda c: "".join(map(chr, c)))
    nul = st.integers(1, 5).map(lambda n: "\x00" * n)

    def cut(name):
        # a prefix, a suffix or a middle part of a special token's text
        return st.tuples(st.integers(0, len(name)), st.integers(0, len(name))).map(
            lambda ab: name[min(ab):max(ab)] or name[:1])

    lookalike = st.one_of(
        st.sampled_from(SPECIAL_NAMES),
        st.sampled_from(SPECIAL_NAMES).flatmap(cut),
        st.sampled_from(SPECIAL_NAMES).flatmap(_case_variants),
        st.sampled_from(_shared.SPECIAL_LOOKALIKES),
    )
    ascii_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=12)
    punct = st.text(alphabet="!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", min_size=1, max_size=6)
    crlf = st.sampled_from(["\r\n", "\n\r", "\r\r\n", " \r\n ", "\r", "\n", "\t\r\n\t", "x\r\ny", " \n \n "])
    words = st.sampled_from(["hello", " world", " the", "The", " don't", "naïve", " Ωmega", " привет", " مرحبا",
                             " नमस्ते", " 日本語", "def", " return", "()", " {", "}\n", "    ", "https://x.y/z?q=1"])
    basic = st.one_of(
        block_run, block_run, any_char, combining, whitespace, whitespace, digit_run, numbers, contraction,
        contraction, han, kana, hangul, emoji, emoji, surrogate, controls, nul, lookalike, lookalike, ascii_word,
        ascii_word, punct, crlf, words, words,
    )
    repeated = st.tuples(basic, st.integers(2, 40)).map(lambda t: t[0] * t[1])
    return st.one_of(basic, basic, basic, basic, basic, basic, basic, repeated)


def text_strategy(max_fragments=24, surrogates=True):
    """Hostile text: fragments from every block-like run of Unicode 16 and the tricky classes, joined."""
    from hypothesis import strategies as st

    t = st.lists(fragment_strategy(), max_size=max_fragments).map("".join)
    if not surrogates:
        t = t.map(lambda s: s.encode("utf-8", "replace").decode("utf-8") if has_surrogate(s) else s)
    return t
