"""Whole characters as first BPE symbols (ctok._bpe.symbolize_chars) against the references.

The shortcut merges each multi-byte character of a byte-level piece to its own BPE before any merge
between characters, which is exact only under conditions the vocabulary is checked for (no merge using a
character's token ranked below the character's own merges, no token joining part of a character to a
neighbour in that context).  These tests compare with tiktoken (rank files) and HF tokenizers
(tokenizer.json) on text built to hit those conditions: characters of scripts whose tokens do join partial
characters (Cyrillic, Indic, Georgian, Hangul, CJK), random BMP characters, characters next to the byte
contexts the vocabulary flags, and a vocabulary whose ranks break the order for one character.
"""
import random

import pytest

import ctok
from ctok._bpe import _chars_for_test, _merge_for_test
from _shared import reference_encoding, vocab_path

SEED = 20261202
SCRIPTS = [
    (0x0400, 0x04FF), (0x0900, 0x097F), (0x10A0, 0x10FF), (0xAC00, 0xD7A3), (0x4E00, 0x9FFF),
    (0x3040, 0x30FF), (0x0600, 0x06FF), (0x0E00, 0x0E7F), (0x00A0, 0x024F), (0x2000, 0x2BFF),
    (0x0370, 0x03FF), (0x0590, 0x05FF), (0xFF00, 0xFFEF),
]


def _random_text(rnd, n_chars):
    out = []
    span = rnd.choice(SCRIPTS)
    for _ in range(n_chars):
        r = rnd.random()
        if r < 0.7:
            out.append(chr(rnd.randint(*span)))
        elif r < 0.8:
            span = rnd.choice(SCRIPTS)
            out.append(chr(rnd.randint(*span)))
        elif r < 0.9:
            cp = rnd.randint(0x80, 0xFFFF)
            out.append(chr(cp) if not 0xD800 <= cp < 0xE000 else "x")
        else:
            out.append(rnd.choice("aZ '1"))
    return "".join(out)


def _pieces(rnd, count):
    return [_random_text(rnd, rnd.randint(1, 40)).encode("utf-8") for _ in range(count)]


@pytest.mark.parametrize("family", ["o200k_base", "cl100k_base"])
def test_pieces_equal_tiktoken(family):
    enc = ctok.get_encoding(family)
    vocab = enc._core.vocab
    assert vocab.char_table_stats() is not None, "rank files have monotone ranks: the tables must be on"
    ref = reference_encoding(family).enc
    rnd = random.Random(SEED)
    taken = demoted = 0
    for piece in _pieces(rnd, 4000):
        want = ref._encode_single_piece(piece)
        got = enc._core.encode_piece(piece)
        assert got == want, piece
        first = _chars_for_test(vocab, piece)
        if first is not None:
            taken += 1
            demoted += first != _chars_alone(vocab, piece)
    # Every path must have run: whole characters throughout, characters beside a risky seam left as bytes,
    # and the byte path (a test where a shortcut never applies proves nothing about it).
    assert taken < 4000 and demoted > 100 and taken - demoted > 100, (taken, demoted)


def _chars_alone(vocab, piece):
    # The first symbols each character of `piece` gets on its own, concatenated: what symbolize_chars gives
    # when no seam leaves a character as bytes.
    out = []
    for ch in piece.decode("utf-8"):
        b = ch.encode("utf-8")
        out += [vocab.token_id(b)] if len(b) == 1 else _chars_for_test(vocab, b)
    return out


@pytest.mark.parametrize("family", ["o200k_base", "cl100k_base"])
def test_corpus_sentences_equal_tiktoken(family):
    # Real text of many scripts, cut into random spans so that every boundary context occurs.
    from _shared import corpus_names, corpus_text
    enc = ctok.get_encoding(family)
    ref = reference_encoding(family).enc
    rnd = random.Random(SEED + 1)
    for name in corpus_names():
        text = corpus_text(name)
        for _ in range(60):
            a = rnd.randrange(max(1, len(text) - 200))
            span = text[a:a + rnd.randint(1, 200)]
            assert enc.encode_ordinary(span) == ref.encode_ordinary(span), (name, a)


@pytest.mark.parametrize("folder", ["qwen3", "deepseek-v3", "llama3-hf", "gpt2", "gpt-neox-20b"])
def test_hf_files_equal_tokenizers(folder):
    tokenizers = pytest.importorskip("tokenizers")
    path = vocab_path(folder, "tokenizer.json")
    enc = ctok.load(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    rnd = random.Random(SEED + 2)
    texts = [_random_text(rnd, rnd.randint(1, 60)) for _ in range(1500)]
    for t in texts:
        assert enc.encode_ordinary(t) == ref.encode(t, add_special_tokens=False).ids, t


def _rank_order_vocab():
    # Byte tokens, then: "é" (C3 A9) made at rank 5 but used by "xé" at rank 1, below it; "ñ" (C3 B1) made
    # at rank 0 and used by "ñx" at rank 9, above it; "yx" at rank 3.  Ranks 2, 4, 6-8 are fillers.
    from ctok._vocab import Vocab
    tokens = [bytes([i]) for i in range(256)]
    names = ["é", "xé", "ñ", "ñx", "yx", "pq", "rs", "tu", "vw", "kl"]
    ids = {}
    for name in names:
        ids[name] = len(tokens)
        tokens.append(name.encode())
    B = lambda c: c if isinstance(c, int) else ord(c)                     # noqa: E731
    merges = [
        (0xC3, 0xB1, ids["ñ"]),           # 0
        (B("x"), ids["é"], ids["xé"]),    # 1: uses é below the rank that makes it
        (B("p"), B("q"), ids["pq"]),      # 2
        (B("y"), B("x"), ids["yx"]),      # 3
        (B("r"), B("s"), ids["rs"]),      # 4
        (0xC3, 0xA9, ids["é"]),           # 5
        (B("t"), B("u"), ids["tu"]),      # 6
        (B("v"), B("w"), ids["vw"]),      # 7
        (B("k"), B("l"), ids["kl"]),      # 8
        (ids["ñ"], B("x"), ids["ñx"]),    # 9: uses ñ above the rank that makes it
    ]
    return Vocab(tokens, merges), ids


def test_characters_whose_token_merges_early_start_as_bytes():
    # "yxé" by the merge rule: (y, x) at rank 3 comes before (C3, A9) at rank 5, so y and x join first and
    # "é" stays alone: [yx, é].  Merging "é" first would let (x, é) at rank 1 win: [y, xé], which is wrong.
    # So "é" must not start as a whole character, while "ñ" (all its uses rank above its making) may.
    v, ids = _rank_order_vocab()
    assert v.char_table_stats() is not None
    assert _merge_for_test(v, "yxé".encode(), False, whole_piece_first=False) == [ids["yx"], ids["é"]]
    assert _merge_for_test(v, "yxé".encode(), True, whole_piece_first=False) == [ids["yx"], ids["é"]]
    # "é" starts as its bytes, and so does its neighbour x (no seam check clears it); y starts whole.
    assert _chars_for_test(v, "yxé".encode()) == [ord("y"), ord("x"), 0xC3, 0xA9]
    assert _chars_for_test(v, "éé".encode()) == [0xC3, 0xA9, 0xC3, 0xA9]
    assert _chars_for_test(v, "yxñ".encode()) == [ord("y"), ord("x"), ids["ñ"]]
    # (C3 B1) at 0, (C3 A9) at 5, then (x, é) at 1 before (ñ, x) at 9.
    assert _merge_for_test(v, "ñxé".encode(), False, whole_piece_first=False) == [ids["ñ"], ids["xé"]]


def _llama3_full_list(enc):
    # A core over Llama 3's whole merge list, as loaded before only the merges that can fire were kept: its
    # merges ranked before their parts' make cp_token refuse some characters, a path no loaded file takes now.
    from ctok._encoder import CoreEncoder
    from ctok._vocab import Vocab
    from ctok.hf import load_tokenizer_json
    spec, _ = load_tokenizer_json(enc.source)
    return CoreEncoder(pretok_kind=enc._core.pretok_kind, vocab=Vocab(spec.token_bytes, spec.merges),
                       ignore_merges=True)


@pytest.mark.parametrize("merges", ["live", "full"])
def test_llama3_tokenizer_json_corpus_equal_tokenizers(merges):
    # Llama 3's tokenizer.json lists merges ranked below the merges that make their parts.  Loaded, only the
    # merges that can fire are kept (_vocab._keep_live_pairs) and every character starts whole; over the full
    # list some characters are refused (above) and the rest start whole: real text of every script against HF.
    tokenizers = pytest.importorskip("tokenizers")
    from _shared import corpus_names, corpus_text
    path = vocab_path("llama3-hf", "tokenizer.json")
    enc = ctok.load(str(path))
    core = enc._core if merges == "live" else _llama3_full_list(enc)
    encode = enc.encode_ordinary if merges == "live" else core.encode_str
    single, _ = core.vocab.char_table_stats()
    if merges == "full":
        assert 60000 < single < 63360                   # on, and some characters refused
    else:
        assert single == 63360
    ref = tokenizers.Tokenizer.from_file(str(path))
    rnd = random.Random(SEED + 4)
    for name in corpus_names():
        text = corpus_text(name, 400_000)
        assert encode(text) == ref.encode(text, add_special_tokens=False).ids, name
        for _ in range(40):
            a = rnd.randrange(max(1, len(text) - 300))
            span = text[a:a + rnd.randint(1, 300)]
            assert encode(span) == ref.encode(span, add_special_tokens=False).ids, (name, a)


def _chars_ending_with(suffix):
    # Valid BMP characters whose UTF-8 ends with `suffix` (1-2 continuation bytes).
    out = []
    for lead in range(0xE1, 0xF0):
        for mid in range(0x80, 0xC0, 7):
            b = bytes([lead, mid]) + suffix if len(suffix) == 1 else bytes([lead]) + suffix
            try:
                out.append(b.decode("utf-8"))
            except UnicodeDecodeError:
                pass
            if len(suffix) == 2:
                break
    return out


@pytest.mark.parametrize("family", ["o200k_base", "cl100k_base"])
def test_flagged_contexts_equal_tiktoken(family):
    # Text made around every token that joins part of a character to its neighbour: the shortcut must see
    # these contexts and take the byte path (or be exact anyway).
    enc = ctok.get_encoding(family)
    vocab = enc._core.vocab
    ref = reference_encoding(family).enc
    rnd = random.Random(SEED + 3)
    checked = 0
    for tid in range(vocab.size):
        b = vocab.token_bytes(tid)
        if b is None or len(b) < 2:
            continue
        k = 0
        while k < len(b) and 0x80 <= b[k] < 0xC0:
            k += 1
        if not 0 < k < len(b) or k > 2:
            continue
        rest = b[k:].decode("utf-8", "ignore")
        for c in _chars_ending_with(b[:k])[:3]:
            text = rnd.choice(["", "日本", "мир"]) + c + rest + rnd.choice(["", "語", "x"])
            assert enc.encode_ordinary(text) == ref.encode_ordinary(text), text
            checked += 1
    assert checked > 50


def _mutated_cjk_pieces(rnd, count):
    # Runs of 3-byte characters (the case symbolize_chars takes a character per step) with one or two
    # bytes made wrong: overlong and surrogate sequences, a lead byte cut short at the end or in the middle,
    # stray continuation bytes, 4-byte and 2-byte characters and ASCII inside the run.
    bad = [b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xe6\x97", b"\xe6",
           b"\x80", b"\xbf\xbf", b"\xf0\x9f\x98\x80", b"\xd0\xb6", b"a", b"\xef\xbf\xbf", b"\xe0\xa0\x80",
           b"\xc0\x80", b"\xe3\x81"]
    out = []
    for _ in range(count):
        chars = [chr(rnd.choice([rnd.randint(0x3041, 0x30FF), rnd.randint(0x4E00, 0x9FFF)]))
                 for _ in range(rnd.randint(1, 12))]
        b = bytearray("".join(chars).encode("utf-8"))
        for _ in range(rnd.randint(1, 2)):
            at = rnd.choice([0, len(b), rnd.randrange(len(b) + 1), 3 * rnd.randrange(len(b) // 3 + 1)])
            b[at:at] = rnd.choice(bad)
        out.append(bytes(b))
    return out


@pytest.mark.parametrize("family", ["o200k_base", "cl100k_base"])
def test_mutated_cjk_runs_equal_tiktoken(family):
    # A piece that is not UTF-8 of BMP characters throughout must take the byte path (symbolize_chars
    # returns None), and every piece must encode as tiktoken encodes its bytes.
    enc = ctok.get_encoding(family)
    vocab = enc._core.vocab
    ref = reference_encoding(family).enc
    rnd = random.Random(SEED + 5)
    invalid = 0
    for piece in _mutated_cjk_pieces(rnd, 3000):
        assert enc._core.encode_piece(piece) == ref._encode_single_piece(piece), piece
        try:
            valid = all(ord(c) < 0x10000 for c in piece.decode("utf-8"))
        except UnicodeDecodeError:
            valid = False
        if not valid:
            invalid += 1
            assert _chars_for_test(vocab, piece) is None, piece
    assert invalid > 1000


def _two_char_tokens(vocab):
    # (left, right, merged) for every merge of two whole characters' tokens: each such merge makes a token
    # of exactly two multi-byte characters whose tokens are what symbolize_chars gives each alone.
    out = []
    for tid in range(vocab.size):
        b = vocab.token_bytes(tid)
        if b is None or not 4 <= len(b) <= 6:
            continue
        try:
            chars = b.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(chars) != 2 or any(ord(c) < 0x80 or ord(c) > 0xFFFF for c in chars):
            continue
        a, c = (_chars_for_test(vocab, ch.encode("utf-8")) for ch in chars)
        if a is None or c is None or len(a) != 1 or len(c) != 1:
            continue
        if vocab.merge_of(a[0], c[0]) is not None:
            out.append((a[0], c[0], tid))
    return out


@pytest.mark.parametrize("family", ["o200k_base", "cl100k_base", "llama3-hf"])
def test_char_pairs_cover_every_merge_of_two_characters(family):
    # symbolize_chars leaves a pair of whole characters unlooked-up when its CHAR_PAIRS bit is clear: every
    # merge of two characters' tokens must have its bit set (a clear one would lose that merge).
    from ctok._bpe import _char_pair_bit
    enc = (ctok.load(str(vocab_path(family, "tokenizer.json"))) if family.endswith("-hf")
           else ctok.get_encoding(family))
    vocab = enc._core.vocab
    merges = _two_char_tokens(vocab)
    assert len(merges) > (4000 if family == "o200k_base" else 200), len(merges)
    assert all(_char_pair_bit(vocab, a, b) for a, b, _ in merges)
    # ... and the bits are a filter, not all set (else the lookups it saves would all still run).
    rnd = random.Random(SEED + 6)
    ids = sorted({a for a, _, _ in merges} | {b for _, b, _ in merges})
    clear = sum(not _char_pair_bit(vocab, rnd.choice(ids), rnd.choice(ids)) for _ in range(2000))
    assert clear > 1500, clear


@pytest.mark.parametrize("family", ["o200k_base", "cl100k_base"])
def test_two_character_tokens_in_runs_equal_tiktoken(family):
    # Every token of two whole characters inside a run of 3-byte characters (where symbolize_chars decides
    # pairs by their CHAR_PAIRS bit), against tiktoken.
    enc = ctok.get_encoding(family)
    vocab = enc._core.vocab
    ref = reference_encoding(family).enc
    rnd = random.Random(SEED + 7)
    for _, _, tid in _two_char_tokens(vocab):
        tok = vocab.token_bytes(tid)
        before = "".join(chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(rnd.randint(1, 3))).encode()
        after = "".join(chr(rnd.randint(0x3041, 0x3096)) for _ in range(rnd.randint(0, 2))).encode()
        piece = before + tok + after
        assert enc._core.encode_piece(piece) == ref._encode_single_piece(piece), piece


TWO_BYTE = [(0x0400, 0x04FF), (0x0600, 0x06FF), (0x0370, 0x03FF), (0x0590, 0x05FF), (0x00A0, 0x024F),
            (0x0530, 0x058F), (0x0700, 0x07FF), (0x0080, 0x07FF)]


def _two_byte_pieces(rnd, count):
    # Words of 2-byte characters (the characters symbolize_chars may start as their token beside a risky
    # seam, pair_first), after every kind of byte a lead byte can follow in UTF-8: ASCII, the last byte of
    # a 2-byte or 3-byte character; and before every kind it can precede.  Mostly one script, as in text,
    # so that the frequent pairs of a script (whose partial-character tokens make the risky seams) occur.
    heads = ["", " ", "x", "'", " ", "日", "अ", "ж", "ب", "é"]
    tails = ["", "", "x", "語", "ं", "ж", "ا", "ñ", "1"]
    out = []
    for _ in range(count):
        span = rnd.choice(TWO_BYTE)
        word = []
        for _ in range(rnd.randint(1, 14)):
            if rnd.random() < 0.1:
                span = rnd.choice(TWO_BYTE)
            word.append(chr(rnd.randint(*span)))
        out.append((rnd.choice(heads) + "".join(word) + rnd.choice(tails)).encode("utf-8"))
    return out


@pytest.mark.parametrize("family", ["o200k_base", "cl100k_base"])
def test_two_byte_characters_beside_risky_seams_equal_tiktoken(family):
    # pair_first's proof rests on Tables.byte_ctx holding, for the byte before a lead byte and the byte after
    # a trail byte, the lowest rank of every merge that could join them: pieces against tiktoken, and real
    # words of the Cyrillic and Arabic files with every character's context.
    from _shared import corpus_text
    enc = ctok.get_encoding(family)
    ref = reference_encoding(family).enc
    rnd = random.Random(SEED + 8)
    for piece in _two_byte_pieces(rnd, 20000):
        assert enc._core.encode_piece(piece) == ref._encode_single_piece(piece), piece
    for name in ("ru_bible_synodal.txt", "ar_1001_nights.txt"):
        words = sorted(set(corpus_text(name, 300_000).split()))
        for w in words:
            for piece in ((" " + w).encode("utf-8"), w.encode("utf-8")):
                assert enc._core.encode_piece(piece) == ref._encode_single_piece(piece), piece


def test_two_byte_characters_beside_risky_seams_llama3_equal_tokenizers():
    # The same for Llama 3's tokenizer.json, whose merge ranks are not monotone.
    tokenizers = pytest.importorskip("tokenizers")
    path = vocab_path("llama3-hf", "tokenizer.json")
    enc = ctok.load(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    rnd = random.Random(SEED + 9)
    pieces = [p.decode("utf-8") for p in _two_byte_pieces(rnd, 20000)]
    for k in range(0, len(pieces), 50):
        text = " ".join(pieces[k:k + 50])
        assert enc.encode_ordinary(text) == ref.encode(text, add_special_tokens=False).ids, text


def test_refused_characters_beside_flagged_contexts_llama3_equal_tokenizers():
    # Characters cp_token refuses (Llama 3's whole merge list: their token merges before it is whole) start as
    # their bytes in a piece of whole characters; their neighbours must still pass the seam check, which the
    # refused character's own flags (never computed) cannot ask for: each such character followed by the rest
    # of every token that starts with a suffix of its bytes, against HF.
    tokenizers = pytest.importorskip("tokenizers")
    path = vocab_path("llama3-hf", "tokenizer.json")
    core = _llama3_full_list(ctok.load(str(path)))
    vocab = core.vocab
    ref = tokenizers.Tokenizer.from_file(str(path))
    byte_ids = [vocab.token_id(bytes([b])) for b in range(256)]
    refused = []
    for cp in list(range(0x80, 0x800)) + list(range(0x3040, 0x3100)) + list(range(0x4E00, 0x5200)):
        b = chr(cp).encode("utf-8")
        if _chars_for_test(vocab, b) == [byte_ids[x] for x in b] and len(core.encode_str(chr(cp))) == 1:
            refused.append(b)
    assert len(refused) > 10, len(refused)
    by_suffix = {}
    for tid in range(vocab.size):
        t = vocab.token_bytes(tid)
        if t is None or len(t) < 2:
            continue
        k = 0
        while k < len(t) and 0x80 <= t[k] < 0xC0:
            k += 1
        if 0 < k < len(t) and k <= 2:
            rest = t[k:]
            try:
                rest.decode("utf-8")
            except UnicodeDecodeError:
                continue
            by_suffix.setdefault(t[:k], []).append(rest)
    checked = 0
    for c in refused:
        for k in (1, 2):
            for rest in by_suffix.get(c[-k:], []):
                text = ("ж" + c.decode("utf-8") + rest.decode("utf-8"))
                assert core.encode_str(text) == ref.encode(text, add_special_tokens=False).ids, text
                checked += 1
    assert checked > 50, checked
