"""Exactness of the regex-free pretokenizer (ctok._pretok) and of the regex fallback (ctok.patterns).

References
----------
* HF kinds (GPT-2 ByteLevel, Llama 3, Qwen, DeepSeek): ``tokenizers.pre_tokenizers.Split(Regex(p), "isolated")``
  (a ``Sequence`` of them for DeepSeek), i.e. Oniguruma exactly as tokenizers 0.23.3 runs it.
* tiktoken kinds (r50k/p50k, cl100k, o200k, Llama 3, Qwen, Kimi, Tekken): tiktoken 0.14.0 itself.  tiktoken does
  not expose its pieces, so ``assert_tiktoken_splits`` checks a candidate split exactly: it builds an Encoding with
  the pattern and a vocabulary of the 256 single bytes + every candidate piece + every concatenation of two
  adjacent candidate pieces, and compares ``encode_ordinary(text)`` with the ids of the candidate pieces.
  Why this is exact: tiktoken emits a piece as one token when the whole piece is in the vocabulary, and otherwise
  BPE-merges it, stopping only when no adjacent pair's concatenation is in the vocabulary.  At the first piece
  where tiktoken's piece Q differs from the candidate piece P (same start): if Q is shorter than P, every token of
  Q is shorter than P, so the next id differs; if Q is longer, either Q is a vocabulary entry (id(Q) != id(P)) or
  BPE(Q) would have to start with P followed by the next candidate piece P' (or by a proper prefix of it, whose id
  differs) -- but P+P' is in the vocabulary, so BPE would have merged them.  Any difference therefore changes the
  id sequence.

Every code point
----------------
``test_unicode_tables`` checks, on all 1,112,064 scalar values, that the classes of ctok/_unicode_tables.h equal
what both reference engines match for \\p{L}, [\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}], [\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}],
\\p{M}, \\p{N}, \\s, \\p{P}, \\p{S}, \\p{Han}, [\\p{L}\\p{M}] and [\\p{P}\\p{S}].  The patterns depend on a character
only through these classes and, for a few literal characters, its identity; so in ``test_every_code_point`` each
code point is split by ctok inside a dozen contexts (letters, spaces, digits, apostrophes, newlines, marks, Han)
and must give the same boundaries as a representative of its class (Latin and case-folding candidates are their
own representatives), and the representatives in the same contexts are checked against the reference.
"""
from __future__ import annotations

import base64
import json
import random
import subprocess
import sys
import textwrap

import pytest

from ctok import patterns as pt

P = pytest.importorskip("ctok._pretok")
tiktoken = pytest.importorskip("tiktoken")
tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Regex, pre_tokenizers  # noqa: E402

from _shared import FULL, corpus_texts, shared_dir  # noqa: E402

ALL_KINDS = [pt.PRETOK_GPT2, pt.PRETOK_CL100K, pt.PRETOK_O200K, pt.PRETOK_LLAMA3, pt.PRETOK_QWEN, pt.PRETOK_KIMI,
             pt.PRETOK_TEKKEN, pt.PRETOK_DEEPSEEK]
TIKTOKEN_KINDS = [pt.PRETOK_GPT2, pt.PRETOK_CL100K, pt.PRETOK_O200K, pt.PRETOK_LLAMA3, pt.PRETOK_QWEN,
                  pt.PRETOK_KIMI, pt.PRETOK_TEKKEN]
HF_KINDS = [pt.PRETOK_GPT2, pt.PRETOK_LLAMA3, pt.PRETOK_QWEN, pt.PRETOK_DEEPSEEK]
NAME = pt.KIND_NAMES


def _ids(kinds):
    return [NAME[k] for k in kinds]


# ------------------------------------------------------------------------------------------------ references
def hf_pretokenizer(kind):
    if kind == pt.PRETOK_DEEPSEEK:
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(p), "isolated") for p in pt.PATTERNS[kind]])
    pattern = pt.GPT2_BYTELEVEL_PATTERN if kind == pt.PRETOK_GPT2 else pt.PATTERNS[kind]
    return pre_tokenizers.Split(Regex(pattern), "isolated")


def hf_pieces(kind, text):
    return [p for p, _ in hf_pretokenizer(kind).pre_tokenize_str(text)]


def assert_tiktoken_splits(pattern, text, pieces, label=""):
    """tiktoken with ``pattern`` splits ``text`` into exactly ``pieces`` (see the module docstring)."""
    assert "".join(pieces) == text
    ranks = {bytes([i]): i for i in range(256)}
    bs = [p.encode("utf-8") for p in pieces]
    for b in bs:
        ranks.setdefault(b, len(ranks))
    for a, b in zip(bs, bs[1:]):
        ranks.setdefault(a + b, len(ranks))
    enc = tiktoken.Encoding("ctok-split-oracle", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    got = enc.encode_ordinary(text)
    expected = [ranks[b] for b in bs]
    if got != expected:
        i = next((k for k, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        inv = {v: k for k, v in ranks.items()}
        raise AssertionError(f"{label}: tiktoken splits differently at piece {i}: candidate "
                             f"{[inv[x] for x in expected[max(0, i - 2):i + 3]]}, tiktoken tokens "
                             f"{[inv[x] for x in got[max(0, i - 2):i + 3]]}")


def assert_tiktoken_splits_many(pattern, texts, label, pieces=None):
    """assert_tiktoken_splits for many separate segments with one Encoding (the union of their vocabularies)."""
    kind = pt.recognise(pattern)
    if pieces is None:
        pieces = [ctok_pieces(kind, t) for t in texts]
    ranks = {bytes([i]): i for i in range(256)}
    for got in pieces:
        bs = [p.encode() for p in got]
        for b in bs:
            ranks.setdefault(b, len(ranks))
        for a, b in zip(bs, bs[1:]):
            ranks.setdefault(a + b, len(ranks))
    enc = tiktoken.Encoding("o", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    for t, got, ids in zip(texts, pieces, enc.encode_ordinary_batch(texts, num_threads=2)):
        assert ids == [ranks[p.encode()] for p in got], f"{label} {t!r}: ctok {got}"


def ctok_pieces(kind, text):
    return [b.decode("utf-8") for b in P.split(kind, text.encode("utf-8"))]


def first_diff(a, b):
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"first difference at piece {i}: ctok {a[max(0, i - 2):i + 3]!r} vs reference {b[max(0, i - 2):i + 3]!r}"


def check_kind(kind, text, label="", hf=True, tk=True):
    got = ctok_pieces(kind, text)
    assert "".join(got) == text
    # next_piece_ends (the encoder's path, with o200k's pairs of pieces) gives the same ends, at any batch size
    data = text.encode("utf-8")
    ends = P.piece_ends(kind, data)
    for m in (1, 2, 3, 16):
        assert P.piece_ends_batched(kind, data, m) == ends, f"{label} [{NAME[kind]} batched by {m}]"
    if hf and kind in HF_KINDS:
        ref = hf_pieces(kind, text)
        assert got == ref, f"{label} [{NAME[kind]} vs tokenizers] {first_diff(got, ref)}"
    if tk and kind in TIKTOKEN_KINDS:
        assert_tiktoken_splits(pt.PATTERNS[kind], text, got, f"{label} [{NAME[kind]} vs tiktoken]")
    return got


# ------------------------------------------------------------------------------------------------ tables
ALL_CPS = [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
ALL_TEXT = "".join(map(chr, ALL_CPS))
F = P.FLAGS

CLASS_PROBES = [
    (r"\p{L}", F["CT_L"]),
    (r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", F["CT_UP"]),
    (r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]", F["CT_LO"]),
    (r"\p{M}", F["CT_M"]),
    (r"\p{N}", F["CT_N"]),
    (r"\s", F["CT_WS"]),
    (r"\p{P}", F["CT_P"]),
    (r"\p{S}", F["CT_S"]),
    (r"\p{Han}", F["CT_HAN"]),
    (r"[\p{L}\p{M}]", F["CT_L"] | F["CT_M"]),
    (r"[\p{P}\p{S}]", F["CT_P"] | F["CT_S"]),
    ("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]", F["CT_DSCJK"]),
]

_BYTE_RANKS = {bytes([i]): i for i in range(256)}


@pytest.fixture(scope="module")
def flags():
    return P.table_flags()


@pytest.mark.parametrize("probe,bits", CLASS_PROBES, ids=[p for p, _ in CLASS_PROBES])
def test_unicode_tables(probe, bits, flags):
    ours = {cp for cp in ALL_CPS if flags[cp] & bits}
    # tiktoken keeps only the matched text: with single-byte ranks, decode(encode(all)) = the matched characters
    # runs ((?:X)+) keep the number of pieces small; the matched characters are the same
    enc = tiktoken.Encoding("probe", pat_str=f"(?:{probe})+", mergeable_ranks=_BYTE_RANKS, special_tokens={})
    tk = set(map(ord, enc.decode_bytes(enc.encode_ordinary(ALL_TEXT)).decode("utf-8")))
    assert tk == ours, f"tiktoken {probe}: extra {sorted(tk - ours)[:5]}, missing {sorted(ours - tk)[:5]}"
    # tokenizers, behaviour "removed": the pieces are what the pattern does not match
    # (in 50,000-character chunks: tokenizers is much slower on one long string; membership is per character)
    hf, pos = set(), 0
    split = pre_tokenizers.Split(Regex(f"(?:{probe})+"), "removed")
    gaps = [(a + i, b + i) for i in range(0, len(ALL_TEXT), 50_000)
            for _, (a, b) in split.pre_tokenize_str(ALL_TEXT[i:i + 50_000])]
    for a, b in gaps + [(len(ALL_CPS), len(ALL_CPS))]:
        hf.update(ALL_CPS[pos:a])  # between two gaps: matched
        pos = b
    assert hf == ours, f"tokenizers {probe}: extra {sorted(hf - ours)[:5]}, missing {sorted(ours - hf)[:5]}"


def test_han_ranges_agree():
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "tools" / "unicode16_han.txt"
    ranges = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            lo, _, hi = line.split(";")[0].strip().partition("..")
            ranges.append((int(lo, 16), int(hi or lo, 16)))
    assert tuple(ranges) == pt._HAN16


def test_unicode_version_recorded():
    assert P.UNICODE_VERSION == "16.0.0"
    with open(P.__file__.rsplit("/", 1)[0] + "/_unicode_tables.h", encoding="utf-8") as f:
        head = f.read(600)
    assert "16.0.0" in head and "GENERATED" in head
    assert P.table_flags()[0x1C89] & F["CT_L"]  # U+1C89 is Lu in Unicode 16, unassigned in Python 3.11


# ------------------------------------------------------------------------------------------------ every code point
def _contexts(c):
    """A dozen contexts for the character c (the representatives' texts are checked against the references)."""
    return (f"{c} a{c}b {c}{c}{c}1{c}23{c}'s{c}'S {c}'ll{c}'{c}\n{c}  {c}\r\n{c}.{c}\u0301{c}A{c}中{c}Ab{c}"
            f"/{c}\n\n{c}ſ{c}  ")


def _short_contexts(c):
    """Shorter contexts for the run over all 1.1 million code points."""
    return f"{c} a{c}b{c}{c}1{c}'s{c}\n{c}  {c}.{c}A{c}\u0301 "


def _identity(cp):
    return (cp < 0x250 or 0x1E00 <= cp < 0x1F00 or 0x2100 <= cp < 0x2150 or 0xFB00 <= cp < 0xFB50
            or 0x3000 <= cp < 0x3100)


def _utf8_len(cp):
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


@pytest.fixture(scope="module")
def reps(flags):
    """code point -> representative with the same flags and UTF-8 length (itself for Latin, CJK punctuation and
    case-folding candidates); and the sorted set of representatives."""
    groups = {}
    for cp in ALL_CPS:
        if not _identity(cp):
            groups.setdefault((flags[cp], _utf8_len(cp)), []).append(cp)
    mapping, chosen_all = {}, set()
    for key, cps in groups.items():
        k = min(len(cps), 8)
        chosen = [cps[(i * (len(cps) - 1)) // max(k - 1, 1)] for i in range(k)]
        chosen_all.update(chosen)
        for i, cp in enumerate(cps):
            mapping[cp] = chosen[i % k]
    rep_set = sorted({cp for cp in ALL_CPS if _identity(cp)} | chosen_all)
    return mapping, rep_set


@pytest.fixture(scope="module")
def all_cp_texts(reps):
    mapping, _ = reps
    cps = [cp for cp in ALL_CPS if not _identity(cp)]
    t_all = "".join(_short_contexts(chr(cp)) for cp in cps).encode("utf-8")
    t_rep = "".join(_short_contexts(chr(mapping[cp])) for cp in cps).encode("utf-8")
    assert len(t_all) == len(t_rep)
    return t_all, t_rep


@pytest.mark.parametrize("kind", ALL_KINDS, ids=_ids(ALL_KINDS))
def test_every_code_point(kind, reps, all_cp_texts):
    _, rep_set = reps
    t_all, t_rep = all_cp_texts
    at = P.first_difference(kind, t_all, t_rep)
    assert at < 0, (f"{NAME[kind]}: a code point is split unlike its class representative near "
                    f"{t_all[max(0, at - 20):at + 40].decode('utf-8', 'replace')!r} / "
                    f"{t_rep[max(0, at - 20):at + 40].decode('utf-8', 'replace')!r}")
    # the representatives (and all identity code points) against the reference, in the long and short contexts
    text = "".join(_contexts(chr(cp)) + _short_contexts(chr(cp)) for cp in rep_set)
    check_kind(kind, text, "code points")


# ------------------------------------------------------------------------------------------------ mixed text
POOL = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") * 3
        + list("0123456789") * 2
        + [" "] * 30 + ["\n"] * 6 + ["\r\n", "\r", "\t", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "\x85",
                                      "\xa0", "\u3000", "\u2028", "\u2029", "\u200b", "\u2003", "\u180e"]
        + list("'''’’\"!?.,;:-_/\\()[]{}<>@#$%^&*+=|~`") + ["'s", "'S", "'ll", "'LL", "'ve", "'RE", "'d", "'M",
                                                            "’s", "'ſ", "ſ"]
        + list("éÉüßẞıİǅǈΣσςΩДжЖ") + list("中文字漢々〇日本語ひらがなカタカナ・ー゠ヿ한국어") + ["𠀀", "𪛖", "\U0002ebf0"]
        + list("١٢٣۴۵०१२৩௪๕໖༧၈႙០᠑߀᥆𝟎𝟙𝟤１２") + ["½", "²", "Ⅻ", "①"]
        + ["\u0301", "\u0308", "\u20dd", "\u0903", "\u093f", "\u0e31", "\u05b7", "\u064b"]
        + list("عربيةעבריתहिन्दीไทยქართულიአማርኛ") + ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "1️⃣", "\u200d", "\ufe0f"]
        + ["\x00", "\x01", "\x7f", "\ufeff", "\ufffd", "\U0010ffff", "\ue000", "\u1c89", "\U0001e5d0", "\u0897"])


def random_text(seed, n):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.15:
            out.append(rng.choice(POOL) * rng.randint(2, 5))
        else:
            out.append(rng.choice(POOL))
    return "".join(out)


@pytest.mark.parametrize("kind", ALL_KINDS, ids=_ids(ALL_KINDS))
def test_random_mixed(kind):
    for seed in range(3):
        check_kind(kind, random_text(1000 * kind + seed, 20_000), f"random seed {seed}")


@pytest.mark.parametrize("kind", ALL_KINDS, ids=_ids(ALL_KINDS))
def test_adversarial(kind):
    import _shared
    if not hasattr(_shared, "adversarial_strings"):
        pytest.skip("tests/_shared.py has no adversarial_strings")
    texts = [t for _, t in _shared.adversarial_strings()]
    texts = [t.encode("utf-8", "replace").decode("utf-8") for t in texts]
    # one by one (each is a whole segment: its start and end matter) and joined
    for t in texts:
        if t:
            check_kind(kind, t, repr(t[:40]), tk=False)
    check_kind(kind, "".join(texts), "adversarial joined")
    if kind in TIKTOKEN_KINDS:
        assert_tiktoken_splits_many(pt.PATTERNS[kind], [t for t in texts if t], NAME[kind])


# ASCII shapes that the scanners answer inline (o200k_ascii, cl100k_ascii, gpt2_ascii, deepseek_ascii), the edges
# where they hand over to the general scanner (a non-ASCII letter, digit or punctuation mark right after an ASCII
# run), and segment ends.
ASCII_POOL = (list("abcdefghijklmnopqrstuvwxyz") * 2 + list("ABCDEFGHIJKLMNOPQRSTUVWXYZ") * 2 + list("0123456789")
              + [" "] * 12 + ["\n", "\r", "\t", "\r\n", "  ", "\x0b", "\x1c"]
              + list("'''\"!?.,;:-_/\\()[]{}<>@#$%^&*+=|~`") + ["'s", "'S", "'ll", "'Ve", "'d", "'x", "/\n", "\n/"]
              + ["é", "É", "ſ", "’", "“", "٣", "½", "\u0301", "中", "\u00a0", "ǅ", "…", "😀"])


@pytest.mark.parametrize("kind", ALL_KINDS, ids=_ids(ALL_KINDS))
def test_ascii_shapes_and_their_edges(kind):
    rng = random.Random(77 + kind)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    texts = []
    for _ in range(400):
        words = []
        for _ in range(rng.randint(1, 12)):
            if rng.random() < 0.5:
                words.append(rng.choice([" ", "", "(", '"', "'", "\n"])
                             + "".join(rng.choice(letters) for _ in range(rng.randint(1, 9))))
            else:
                words.append(rng.choice(ASCII_POOL) * rng.randint(1, 4))
        texts.append("".join(words))
    for t in texts[:150]:                 # each its own segment: its end is the regex's $
        check_kind(kind, t, repr(t), tk=False)
    check_kind(kind, "".join(texts), "ascii shapes joined")
    if kind in TIKTOKEN_KINDS:
        assert_tiktoken_splits_many(pt.PATTERNS[kind], texts[:150], NAME[kind])


# The inline ASCII shapes of GPT-2, DeepSeek and Tekken (gpt2_ascii, deepseek_ascii, o200k_ascii under Tekken's
# rules) and where they hand over: DeepSeek's digits ending a run of spaces (a sub-segment end), a newline before
# a letter, control characters (DeepSeek's gaps), contractions, whitespace runs at the end of the segment, runs
# of one character whose lengths straddle the 16-byte blocks of _ascii_runs.h, and next to each of them the
# non-ASCII characters (letters, marks, digits, punctuation, spaces, CJK) that may continue a class.
EDGE_PIECES = (["a", "Ab", "ABC", "abc", " ", "  ", "\n", "\r\n", "\r", "\t", "\x0b", "\x00", "\x1f", "\x7f", "1",
                "12", "1234", "'", "'s", "'LL", "'ve", "(", "((", "/", "/\n", ".\n", " (", " 1", " '", "!a", "\na",
                "\x00a", "\tb", " \n", "_x", "x_"]
               + ["é", "É", "\u0301", "’", "…", "٣", "½", "\u00a0", "\u3000", "\x85", "中", "カ", "ſ", "😀"])


# Code's line ends and indentation, which o200k's next_piece_ends answers two pieces at a time (o200k_ascii_pair):
# a newline or a punctuation piece ending with one, then 0..33 spaces, then what follows the indentation.
PAIR_HEADS = ["\n", ":\n", "):\n", ",\n", "/\n", "(\n", "\r\n", "\n\n", ",", " =", "a", "  "]
PAIR_TAILS = ["x", "Ab", "AB", "'s", "'", "=", " =", "(", "#", "1", "\n", "\t", "é", "É", "’", "٣", "中",
              "\u00a0", "\u0301", "a\u0301", "ab'", "Ab'LL", "/", ""]


@pytest.mark.parametrize("kind", ALL_KINDS, ids=_ids(ALL_KINDS))
def test_inline_ascii_shapes_edges(kind):
    rng = random.Random(4242 + kind)
    texts = []
    for _ in range(600):
        parts = []
        for _ in range(rng.randint(1, 8)):
            if rng.random() < 0.3:
                parts.append(rng.choice("aZ 1(\n\t-") * rng.choice([1, 2, 3, 4, 15, 16, 17, 31, 32, 33]))
            elif rng.random() < 0.3:
                parts.append(rng.choice(PAIR_HEADS) + " " * rng.choice([0, 1, 2, 3, 4, 8, 15, 16, 17, 33])
                             + rng.choice(PAIR_TAILS))
            else:
                parts.append(rng.choice(EDGE_PIECES))
        texts.append("".join(parts))
    for h in PAIR_HEADS:                  # every pair shape whole, and as the segment's end
        for sp in (0, 1, 2, 3, 17):
            texts += [h + " " * sp + t for t in PAIR_TAILS]
            texts += ["x" + h + " " * sp + t + " y" for t in PAIR_TAILS]
    for t in texts[:300] + texts[600:]:   # each its own segment: its end is the regex's $
        check_kind(kind, t, repr(t), tk=False)
    check_kind(kind, "".join(texts), "edges joined")
    if kind in TIKTOKEN_KINDS:
        assert_tiktoken_splits_many(pt.PATTERNS[kind], texts, NAME[kind])


def test_short_segments_exhaustive():
    """Every string of length <= 3 over a small alphabet of class representatives, as its own segment."""
    alphabet = ["a", "A", "s", "ſ", "'", " ", "\n", "\r", "1", "!", "/", "\u0301", "中", "・", "\u00a0", "ǅ"]
    texts = [a for a in alphabet]
    texts += [a + b for a in alphabet for b in alphabet]
    texts += [a + b + c for a in alphabet for b in alphabet for c in alphabet]
    for kind in ALL_KINDS:
        sep_pieces, joined = [], []
        for t in texts:
            got = ctok_pieces(kind, t)
            if kind in HF_KINDS:
                ref = hf_pieces(kind, t)
                assert got == ref, f"{NAME[kind]} {t!r}: ctok {got} vs tokenizers {ref}"
            sep_pieces.append(got)
        if kind in TIKTOKEN_KINDS:
            assert_tiktoken_splits_many(pt.PATTERNS[kind], texts, NAME[kind], sep_pieces)


# ------------------------------------------------------------------------------------------------ corpus
def _corpus():
    shared_dir()
    return corpus_texts(None if FULL else 30_000)


@pytest.mark.parametrize("kind", ALL_KINDS, ids=_ids(ALL_KINDS))
def test_corpus(kind):
    for name, text in _corpus():
        check_kind(kind, text, name)


def test_corpus_with_real_rank_files():
    """ctok's pieces, BPE-encoded by tiktoken piece by piece with the real rank files, give encode_ordinary."""
    base = shared_dir() / "vocab"
    from tiktoken.load import load_tiktoken_bpe
    folders = {pt.PRETOK_CL100K: "cl100k_base", pt.PRETOK_O200K: "o200k_base", pt.PRETOK_KIMI: "kimi-k2"}
    for kind, folder in folders.items():
        r = json.load(open(base / folder / "recipe.json", encoding="utf-8"))
        ranks = load_tiktoken_bpe(str(base / folder / r["file"]))
        enc = tiktoken.Encoding(folder, pat_str=r["pat_str"], mergeable_ranks=ranks, special_tokens={})
        assert pt.recognise(r["pat_str"]) == kind
        for name, text in corpus_texts(8_000):
            want = enc.encode_ordinary(text)
            got = []
            for piece in P.split(kind, text.encode()):
                got += enc._encode_single_piece(piece)
            assert got == want, f"{folder} {name}"


# ------------------------------------------------------------------------------------------------ recognise
def _hf_split_patterns(obj):
    if isinstance(obj, dict):
        if obj.get("type") == "Split":
            yield obj
        for v in obj.values():
            yield from _hf_split_patterns(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _hf_split_patterns(v)


def test_recognise_real_files():
    base = shared_dir() / "vocab"
    expected = {"cl100k_base": pt.PRETOK_CL100K, "o200k_base": pt.PRETOK_O200K, "p50k_base": pt.PRETOK_GPT2,
                "kimi-k2": pt.PRETOK_KIMI, "qwen-tiktoken": pt.PRETOK_QWEN, "llama3-tiktoken": pt.PRETOK_LLAMA3,
                "mistral-tekken": pt.PRETOK_TEKKEN}
    seen = 0
    for recipe in sorted(base.glob("*/recipe*.json")):
        r = json.load(open(recipe, encoding="utf-8"))
        assert pt.recognise(r["pat_str"]) == expected[recipe.parent.name], recipe
        seen += 1
    assert seen >= 9
    llama4 = json.load(open(base / "known" / "llama4.json", encoding="utf-8"))
    assert pt.recognise(llama4["pat_str"]) == pt.PRETOK_O200K
    hf_expected = {"llama3-hf": pt.PRETOK_LLAMA3, "qwen3": pt.PRETOK_QWEN, "deepseek-v3": pt.PRETOK_DEEPSEEK}
    for folder, kind in hf_expected.items():
        tok = json.load(open(base / folder / "tokenizer.json", encoding="utf-8"))
        splits = list(_hf_split_patterns(tok["pre_tokenizer"]))
        assert all(s["behavior"] == "Isolated" and not s["invert"] for s in splits)
        assert pt.recognise_sequence([s["pattern"]["Regex"] for s in splits]) == kind, folder
        if len(splits) == 1:
            assert pt.recognise(splits[0]["pattern"]["Regex"], engine="hf") == kind
    assert pt.recognise(pt.GPT2_BYTELEVEL_PATTERN) == pt.PRETOK_GPT2
    assert pt.recognise(pt.GPT2_BYTELEVEL_PATTERN, engine="hf") == pt.PRETOK_GPT2
    assert pt.recognise(pt.PATTERNS[pt.PRETOK_CL100K], engine="hf") is None  # {1,3}+ is not possessive there
    assert pt.recognise(r"\p{L}+") is None
    assert pt.recognise_sequence([r"\p{N}{1,3}", r"\p{L}+"]) is None
    assert pt.recognise(pt.PATTERNS[pt.PRETOK_O200K] + "|x") is None


@pytest.mark.parametrize("kind", [pt.PRETOK_GPT2, pt.PRETOK_CL100K], ids=["gpt2", "cl100k"])
def test_equivalent_spellings(kind, reps):
    """Every alternative spelling recognise() accepts splits like the canonical one in its reference."""
    _, rep_set = reps
    text = "".join(_contexts(chr(cp)) for cp in rep_set[::3]) + random_text(7, 20_000)
    pieces = ctok_pieces(kind, text)
    hf_checked = 0
    for spelling in [pt.PATTERNS[kind]] + pt._EQUIVALENT[kind]:
        assert pt.recognise(spelling) == kind
        assert_tiktoken_splits(spelling, text, pieces, f"tiktoken {spelling!r}")
        ref = [p for p, _ in pre_tokenizers.Split(Regex(spelling), "isolated").pre_tokenize_str(text)]
        if pt.recognise(spelling, engine="hf") == kind:
            assert ref == pieces, f"tokenizers {spelling!r}: {first_diff(pieces, ref)}"
            hf_checked += 1
        else:  # refused for HF because Oniguruma reads it differently: make sure it does
            assert ref != pieces, spelling
    assert hf_checked >= (3 if kind == pt.PRETOK_GPT2 else 0)


def test_gpt2_bytelevel_builtin_regex():
    """HF ByteLevel(use_regex=True) splits where Split(GPT2_BYTELEVEL_PATTERN) does."""
    text = random_text(11, 20_000)
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True).pre_tokenize_str(text)
    sp = pre_tokenizers.Split(Regex(pt.GPT2_BYTELEVEL_PATTERN), "isolated").pre_tokenize_str(text)
    assert [o for _, o in bl] == [o for _, o in sp]


# ------------------------------------------------------------------------------------------------ fallback
@pytest.mark.parametrize("kind", ALL_KINDS, ids=_ids(ALL_KINDS))
def test_fallback_matches_references(kind, reps):
    _, rep_set = reps
    text = "".join(_contexts(chr(cp)) for cp in rep_set[::2]) + random_text(99 + kind, 20_000)
    if kind == pt.PRETOK_DEEPSEEK:
        # compose the three Isolated splits
        parts = [text]
        for p in pt.PATTERNS[kind]:
            c = pt.compile_fallback(p, engine="hf")
            nxt = []
            for part in parts:
                pos = 0
                for a, b in pt.finditer_spans(c, part):
                    if a > pos:
                        nxt.append(part[pos:a])
                    if b > a:
                        nxt.append(part[a:b])
                    pos = b
                if pos < len(part):
                    nxt.append(part[pos:])
            parts = nxt
        assert parts == hf_pieces(kind, text)
        return
    if kind in TIKTOKEN_KINDS:
        got = pt.split_fallback(pt.compile_fallback(pt.PATTERNS[kind]), text)
        assert_tiktoken_splits(pt.PATTERNS[kind], text, got, "fallback")
    if kind in HF_KINDS:
        pattern = pt.GPT2_BYTELEVEL_PATTERN if kind == pt.PRETOK_GPT2 else pt.PATTERNS[kind]
        c = pt.compile_fallback(pattern, engine="hf")
        got = [text[a:b] for a, b in pt.finditer_spans(c, text)]
        assert got == hf_pieces(kind, text)


@pytest.mark.parametrize("pattern,text", [
    (r"(?i)ss", "aßbSSc ss ẞ"),
    (r"\s+$", "a  \n  b  \r\n c  "),
    (r"^a|\n", "ab\nab\na"),
    (r"\p{L}+|\P{L}+", "ab\u1c89\U0001e5d0\u088f12 \U00010940x"),
    (r"[\p{L}&&[^\p{Han}]]+|\p{Han}+|.", "ab中文cd\U0002ebf0\U00031350"),
    (r"\d+|\D", "12٣\U0001e5f1x"),
    (r"[^\p{N}\s]+", "a1 b\u0897 \U00016ea0"),
    (r"\p{N}{1,3}+|\D", "1234567 12 ab"),          # possessive in Rust, (?:\p{N}{1,3})+ in Oniguruma
    (r"(?:ab){1,2}+|.", "ababababc"),
    (r"(?i:'s|'t)|\s+$|.", "'S 'ſ 'ß  \n  x  "),
])
def test_fallback_general_patterns(pattern, text):
    """The rewrite gives tiktoken's and Oniguruma's results on patterns beyond the known ones."""
    tk = tiktoken.Encoding("p", pat_str=pattern, mergeable_ranks=_BYTE_RANKS, special_tokens={})
    got = pt.split_fallback(pt.compile_fallback(pattern), text)
    # matched text in order, and the split itself through the oracle when every character is matched
    assert "".join(got) == tk.decode_bytes(tk.encode_ordinary(text)).decode()
    if "".join(got) == text:
        assert_tiktoken_splits(pattern, text, got, pattern)
    hf = [(a, b) for _, (a, b) in pre_tokenizers.Split(Regex(pattern), "removed").pre_tokenize_str(text)]
    spans = [s for s in pt.finditer_spans(pt.compile_fallback(pattern, engine="hf"), text) if s[1] > s[0]]
    gaps, pos = [], 0
    for a, b in spans:
        if a > pos:
            gaps.append((pos, a))
        pos = b
    if pos < len(text):
        gaps.append((pos, len(text)))
    assert gaps == hf


# ------------------------------------------------------------------------------------------------ robustness
def test_invalid_utf8_and_bounds():
    rng = random.Random(5)
    samples = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) for _ in range(3000)]
    samples += [b"\xe4\xb8", b"\xf0\x9f\x98", b"\xc3", b"a\xff's", b"'\xc5", b"' \xe3\x80", b"\xed\xa0\x80",
                b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xe0\x80\x80", b"1\xe4", b" \xf0"]
    for kind in [0] + ALL_KINDS:
        for s in samples:
            ends = P.piece_ends(kind, s)
            assert ends and ends[-1] == len(s) and all(a < b for a, b in zip([0] + ends, ends))
            assert b"".join(P.split(kind, s)) == s
    with pytest.raises(ValueError):
        P.split(99, b"x")


def test_cjk_runs_with_invalid_utf8():
    """The runs of 3-byte characters (_bmp_run.h) stop at anything ctok_char would not decode as a 3-byte
    character of the class: each byte of an overlong form (E0 80..9F, here also one that decodes to a letter),
    a surrogate, a cut character, a 4-byte form above U+10FFFF, a stray continuation or a lead byte without
    its continuations counts as a one-byte character with no class, as a stray continuation byte does.  Runs of
    Han, kana, Lm and Hangul around each such sequence, at every distance from the segment's end."""
    runs = ["中国語", "ひらがな", "カタカナー", "漢字々", "한국어", "ꀀꀁ", "\u0800\u0801"]
    bad = [b"\xe0\x80\x80", b"\xe0\x81\x81", b"\xe0\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xe4\xb8",
           b"\xe4", b"\x80", b"\xbf\xbf\xbf", b"\xf0\x9f\x98", b"\xe4\xb8a",
           b"\xe4\x3e\xad", b"\xef\xbf", b"\xf4\x90\x80\x80"]
    for kind in ALL_KINDS:
        for r in runs:
            a = r.encode("utf-8")
            for b in bad:
                same = bytes(c if c < 0x80 else 0x80 for c in b)  # ASCII kept, each other byte a stray one
                for tail in (b"", a[:3], a, a + a):
                    text, ref = a + b + tail, a + same + tail
                    assert P.piece_ends(kind, text) == P.piece_ends(kind, ref), (kind, r, b, tail)
                    assert P.piece_ends_batched(kind, text) == P.piece_ends(kind, text), (kind, r, b, tail)


def test_whole_and_empty():
    assert P.split(P.PRETOK_WHOLE, b"a b  c") == [b"a b  c"]
    for kind in ALL_KINDS:
        assert P.split(kind, b"") == []
        assert P.count_pieces(kind, b"Hello world") == len(P.split(kind, b"Hello world"))


def test_constants_match():
    for name, value in P.KINDS.items():
        assert getattr(pt, name) == value == getattr(P, name)


def test_without_regex_module():
    """With the regex module unavailable, every known kind is recognised and split natively."""
    code = textwrap.dedent("""
        import sys
        sys.modules["regex"] = None
        from ctok import patterns as pt
        import ctok._pretok as P
        kinds = {k: pt.recognise(p) for k, p in pt.PATTERNS.items() if k != pt.PRETOK_DEEPSEEK}
        assert all(k == v for k, v in kinds.items()), kinds
        assert pt.recognise_sequence(pt.PATTERNS[pt.PRETOK_DEEPSEEK]) == pt.PRETOK_DEEPSEEK
        for k in list(kinds) + [pt.PRETOK_DEEPSEEK]:
            assert b"".join(P.split(k, "Hello, world's 123 中文".encode())) == "Hello, world's 123 中文".encode()
        try:
            pt.compile_fallback(r"\\p{L}+")
        except ImportError as e:
            assert "regex" in str(e)
        else:
            raise AssertionError("compile_fallback worked without regex")
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(
        __import__("pathlib").Path(__file__).resolve().parent.parent))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
