"""Pieces cut between 2- and 3-byte characters that no token holds side by side (_bpe.char_cuts, merge_parts).

A regex pretokenizer leaves a run of letters whole, one piece of many characters (CJK above all; Arabic, Cyrillic
or Greek words where the vocabulary holds few of their letters' pairs).  A merge makes a token of two
neighbouring symbols, so a merge across a point between two characters would make a token holding bytes on both
sides of it.  Where no token holds the whole character before next to the whole one after (Vocab.char_bigrams)
and none holds a part of either next to the other's bytes (the seam tests), BPE never joins across, and the
piece's ids are its parts' ids in turn.  Parts of up to 15 bytes are kept in the scratch's table of recent pieces
under keys no piece has: a part equal to a token is its bytes' BPE, which a piece equal to that token (tiktoken's
rule) need not be.  Pieces whose first character has a 2-byte lead are cut only where few tokens hold characters
of that lead (BpeOptions.cut_leads); the tests also force every lead on.

Checked here: the ids against tiktoken and HF tokenizers and against the same encoder with the cutting off, on
random text of CJK and of 2-byte scripts, and malformed bytes; every cut point against the vocabulary itself (no
token spans it); the bigram set and the lead counts against every token; synthetic rank files whose tokens join
parts of characters, and one whose two-character token its own bytes do not rebuild; parts of one character
beside a stray byte at a piece's ends."""
from __future__ import annotations

import random
import re

import pytest

from _shared import assert_same_ids, corpus_text, reference_encoding, vocab_path

ctok = pytest.importorskip("ctok")
from ctok._encoder import CoreEncoder  # noqa: E402
from ctok._vocab import Vocab  # noqa: E402
from ctok.patterns import PRETOK_O200K  # noqa: E402

SEED = 20261206
RANK_FAMILIES = ["o200k_base", "cl100k_base", "llama3-tiktoken", "kimi-k2"]
HF_FAMILIES = ["qwen3", "deepseek-v3", "llama3-hf"]
# A valid 3-byte UTF-8 character (not overlong, no surrogate), at any byte position.
CHAR3 = re.compile(rb"(?=(\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|\xed[\x80-\x9f][\x80-\xbf]))")
# A valid 2-byte one.
CHAR2 = re.compile(rb"(?=([\xc2-\xdf][\x80-\xbf]))")
ALL_LEADS = (1 << 48) - 1                               # BpeOptions.cut_leads: every lead byte 0xC0-0xEF


def _pool():
    # Common characters of the corpus's Japanese and Chinese, rare Han, kana, Hangul, Thai, Devanagari, CJK
    # punctuation and full-width forms: most pairs of the rare ones are in no token.
    text = corpus_text("ja_wagahaiwa_nekodearu.txt", 20000) + corpus_text("zh_classical.txt", 20000)
    common = sorted({c for c in text if 0x800 <= ord(c) < 0x10000})
    rare = [chr(c) for c in range(0x4E00, 0xA000, 37)] + [chr(c) for c in range(0x3041, 0x30FF, 3)]
    rare += [chr(c) for c in range(0xAC00, 0xD7A4, 97)] + [chr(c) for c in range(0x0E01, 0x0E5C)]
    rare += [chr(c) for c in range(0x0905, 0x0970, 2)] + list("。、「」『』・ー〜！？（）ＡＢｃ１２")
    return common, rare


OTHERS = ["a", " ", "1", "23", "é", "ж", "\U0001F600", "\u200d", "\n", "'s", ",", "\u3000"]


def _random_texts(rnd, n):
    common, rare = _pool()
    out = []
    for _ in range(n):
        src = rnd.choice([common, rare, common + rare])
        k = rnd.choice([2, 3, 5, 12, 31, 32, 33, 64, 65, 97, 200])
        chars = [rnd.choice(src) for _ in range(k)]
        for _ in range(rnd.randint(0, 3)):
            chars.insert(rnd.randint(0, len(chars)), rnd.choice(OTHERS))
        out.append("".join(chars))
    return out


def _pool2():
    # Letters of 2-byte scripts: the corpus's Russian and Arabic words and its multilingual declaration's Greek,
    # Hebrew, Armenian and accented Latin, then whole ranges (Cyrillic, Greek, Armenian, Hebrew and Arabic with
    # their marks, Syriac, Thaana, N'Ko, Latin Extended, IPA, combining diacritics): most pairs of the rare ones
    # are in no token, and the marks sit inside words.
    text = (corpus_text("ru_bible_synodal.txt", 8000) + corpus_text("ar_1001_nights.txt", 8000)
            + corpus_text("udhr_multilingual.txt", 40000))
    words = [w for w in re.findall(r"\w+", text) if any(0x80 <= ord(c) < 0x800 for c in w)]
    rare = [chr(c) for c in range(0x0100, 0x0800, 3) if chr(c).isprintable() or 0x300 <= c < 0x370]
    return words, rare


def _random_texts2(rnd, n):
    # Words of 2-byte scripts, runs of rare 2-byte characters, and both mixed with CJK, ASCII letters (a letter
    # run takes them into the same piece) and the other characters.
    words, rare = _pool2()
    cjk = _pool()[1]
    out = []
    for _ in range(n):
        kind = rnd.randrange(4)
        if kind == 0:
            text = " ".join(rnd.choice(words) for _ in range(rnd.randint(1, 6)))
        elif kind == 1:
            text = "".join(rnd.choice(rare) for _ in range(rnd.choice([2, 3, 5, 12, 33, 70])))
        elif kind == 2:
            text = "".join(rnd.choice(rare + list("abzXY") + cjk[:40]) for _ in range(rnd.randint(2, 40)))
        else:
            text = rnd.choice(words) + rnd.choice(["", "a", "ab", "中", "é"]) + rnd.choice(words)
        chars = list(text)
        for _ in range(rnd.randint(0, 2)):
            chars.insert(rnd.randint(0, len(chars)), rnd.choice(OTHERS))
        out.append("".join(chars))
    return out


def _malformed(rnd, text):
    # Stray continuation bytes, cut characters and bytes no UTF-8 holds, inside CJK text.
    data = bytearray(text.encode())
    for _ in range(rnd.randint(1, 4)):
        i = rnd.randint(0, len(data))
        data[i:i] = bytes([rnd.choice([0x80, 0xA5, 0xBF, 0xE3, 0xE6, 0xED, 0xEF, 0xFF, 0xC3, 0xD0, 0xD8, 0xC1])])
    if len(data) > 4 and rnd.random() < 0.5:
        del data[rnd.randrange(len(data))]
    return bytes(data)


def _rank_encoding(family):
    if family in ("o200k_base", "cl100k_base"):
        return ctok.get_encoding(family)
    path = vocab_path(family)
    if not path.exists():
        pytest.skip(f"{path} not in shared")
    import json
    recipe = json.loads((path / "recipe.json").read_text(encoding="utf-8"))
    return ctok.load(str(path / recipe["file"]))


@pytest.fixture(scope="module", params=RANK_FAMILIES)
def rank_family(request):
    # The loaded encoding (piece cache on), a core over the same vocabulary without a piece cache (switched
    # between cutting and not around each text), and tiktoken.
    pytest.importorskip("tiktoken")
    enc = _rank_encoding(request.param)
    bare = CoreEncoder(pretok_kind=enc._core.pretok_kind, vocab=enc._core.vocab, piece_cache_bytes=0)
    return enc, bare, reference_encoding(request.param)


def _cut_and_whole(core, data):
    core._set_cuts(False)
    try:
        whole = core.encode_ordinary(data)
    finally:
        core._set_cuts(True)
    return core.encode_ordinary(data), whole


def _all_leads(core):
    # Every 2- and 3-byte lead byte's pieces looked at for cuts (a context manager-free pair: returns the old mask).
    old = core.cut_leads
    core._set_cuts(True, leads=ALL_LEADS)
    return old


def test_regex_files_cut_between_characters(rank_family):
    enc, bare, _ = rank_family
    assert enc._core.cuts_chars and bare.cuts_chars
    assert not enc._core.cuts_pieces                    # the byte-pair cuts stay the marker-word kinds'
    # Japanese is cut at most points between its characters (o200k: 78%).
    piece = corpus_text("ja_wagahaiwa_nekodearu.txt", 3000).encode()
    assert len(enc._core._char_cuts(piece)) > len(piece) // 30


def test_cjk_text_matches_tiktoken_with_and_without_cuts(rank_family):
    enc, bare, ref = rank_family
    rnd = random.Random(SEED)
    for text in _random_texts(rnd, 500):
        want = ref.encode_ordinary(text)
        for _ in range(2):                              # the second time from the caches
            assert_same_ids(enc.encode_ordinary(text), want, text, "loaded")
        cut, whole = _cut_and_whole(bare, text.encode())
        assert_same_ids(cut, want, text, "no piece cache, cuts")
        assert_same_ids(whole, want, text, "no piece cache, no cuts")


def test_malformed_bytes_cut_as_whole(rank_family):
    # Bytes that are no UTF-8: a cut falls only between two valid characters, so the parts hold what the
    # whole piece does.  Equal with the cutting on and off (the core's byte path is tested against tiktoken
    # elsewhere).
    enc, bare, _ = rank_family
    rnd = random.Random(SEED + 1)
    for text in _random_texts(rnd, 300):
        data = _malformed(rnd, text)
        cut, whole = _cut_and_whole(bare, data)
        assert cut == whole, data
        assert enc._core.encode_ordinary(data) == whole, data


def _char_starting(data, i):
    # The valid 2- or 3-byte character at data[i:], or None.
    for pattern in (CHAR3, CHAR2):
        m = pattern.match(data, i) if 0 <= i < len(data) else None
        if m:
            return m.group(1)
    return None


def _char_ending(data, i):
    # The valid 2- or 3-byte character that ends at data[:i], or None.
    for k in (3, 2):
        got = _char_starting(data, i - k)
        if got is not None and len(got) == k:
            return got
    return None


def _spanning_token(tokens, piece, c, max_len):
    for i in range(max(0, c - max_len + 1), c):
        for j in range(c + 1, min(len(piece), i + max_len) + 1):
            if piece[i:j] in tokens:
                return piece[i:j]
    return None


def test_no_token_spans_a_cut(rank_family):
    # The premise of the cut, checked against the vocabulary itself: every point found lies between two valid
    # 3-byte characters, and no token's bytes occur in the piece across it.
    enc, _, _ = rank_family
    vocab = enc._core.vocab
    # A token across a point between two multi-byte characters holds a byte >= 0x80 on each side of it.
    tokens = {t for t in map(vocab.token_bytes, range(vocab.size)) if t is not None and max(t) >= 0x80}
    max_len = max(map(len, tokens))
    rnd = random.Random(SEED + 2)
    found = twos = 0
    for text in _random_texts(rnd, 120) + _random_texts2(rnd, 120):
        for data in (text.encode(), _malformed(rnd, text)):
            cuts = enc._core._char_cuts(data)
            assert cuts == sorted(set(cuts))
            assert set(enc._core._char_cuts(data, False)) <= set(cuts)       # 3-byte characters only: fewer
            for c in cuts:
                before, after = _char_ending(data, c), _char_starting(data, c)
                assert before and after, (data, c)
                assert _spanning_token(tokens, data, c, max_len) is None, (data, c)
                twos += len(before) == 2 or len(after) == 2
            found += len(cuts)
    assert found > 1000 and twos > 50


def test_char_bigrams_hold_every_pair_of_characters_in_a_token(rank_family):
    enc, _, _ = rank_family
    vocab = enc._core.vocab
    bits, shift, _ = vocab.char_pair_tables()
    assert len(bits) * 8 == 1 << (32 - shift) and 19 <= 32 - shift <= 21

    def held(a, b):
        k = Vocab._char_bigram_bit(a, b, shift)
        return (bits[k >> 3] >> (k & 7)) & 1

    pairs = twos = 0
    for i in range(vocab.size):
        t = vocab.token_bytes(i)
        if t is None or len(t) < 4:
            continue
        # Every valid 2- or 3-byte character, wherever it starts (lead bytes are no continuation bytes, so
        # these are the characters a reader of the token from its start decodes).
        starts = {m.start(): m.group(1) for m in CHAR3.finditer(t)}
        starts.update((m.start(), m.group(1)) for m in CHAR2.finditer(t))
        for q, a in starts.items():
            b = starts.get(q + len(a))
            if b is not None:
                pairs += 1
                twos += len(a) == 2 or len(b) == 2
                assert held(ord(a.decode()), ord(b.decode())), (i, t)
    assert pairs > 300 and twos > 100
    # At least 32 bits a pair set, unless the largest size cannot give that; else the smallest size that does.
    set_bits = sum(bin(x).count("1") for x in bits)
    assert set_bits * 32 <= len(bits) * 8 or 32 - shift == 21
    assert 32 - shift != 21 or set_bits * 32 > 1 << 20


def test_long_runs_cut_in_several_rounds(rank_family):
    # More cuts than one round of char_cuts finds (32), ending in a part of one character after a round.
    enc, bare, ref = rank_family
    _, rare = _pool()
    han = [c for c in rare if 0x4E00 <= ord(c) < 0xA000]
    for n in (31, 32, 33, 34, 64, 65, 66, 129, 400):
        text = "".join(han[(7 * i) % len(han)] for i in range(n))
        want = ref.encode_ordinary(text)
        cuts = enc._core._char_cuts(text.encode())
        assert len(cuts) > n // 2 and (n < 66 or len(cuts) > 32)
        assert_same_ids(enc.encode_ordinary(text), want, text)
        cut, _ = _cut_and_whole(bare, text.encode())
        assert_same_ids(cut, want, text)


def test_two_byte_scripts_match_tiktoken(rank_family):
    # The loaded encoding as it is (its own leads), then with every lead's pieces cut; the bare core with every
    # lead, cutting and not.
    enc, bare, ref = rank_family
    rnd = random.Random(SEED + 5)
    texts = _random_texts2(rnd, 400)
    old = enc._core.cut_leads
    try:
        for leads in (old, ALL_LEADS):
            enc._core._set_cuts(True, leads=leads)
            for text in texts:
                want = ref.encode_ordinary(text)
                for _ in range(2):
                    assert_same_ids(enc.encode_ordinary(text), want, text, f"loaded, leads {leads:#x}")
    finally:
        enc._core._set_cuts(True, leads=old)
    bare_old = _all_leads(bare)
    try:
        cuts = 0
        for text in texts:
            want = ref.encode_ordinary(text)
            cut, whole = _cut_and_whole(bare, text.encode())
            assert_same_ids(cut, want, text, "no piece cache, cuts")
            assert_same_ids(whole, want, text, "no piece cache, no cuts")
            cuts += len(bare._char_cuts(text.encode()))
            data = _malformed(rnd, text)
            cut, whole = _cut_and_whole(bare, data)
            assert cut == whole, data
        assert cuts > 200
    finally:
        bare._set_cuts(True, leads=bare_old)


def test_lead_counts_and_the_leads_cut(rank_family):
    # char_pair_tables' counts against the tokens themselves, and the rule the encoder draws from them: every
    # 3-byte lead, and the 2-byte leads fewer than CUT_LEAD_TOKENS_LIMIT tokens hold.
    from ctok._encoder import CUT_LEAD_TOKENS_LIMIT
    enc, _, _ = rank_family
    vocab = enc._core.vocab
    counts = [0] * 32
    for i in range(vocab.size):
        t = vocab.token_bytes(i)
        if t is not None:
            for lead in {m.group(1)[0] for m in CHAR2.finditer(t)}:
                counts[lead - 0xC0] += 1
    assert vocab.char_pair_tables()[2] == counts
    mask = enc._core.cut_leads
    for b in range(0xC0, 0xF0):
        want = b >= 0xE0 or counts[b - 0xC0] < CUT_LEAD_TOKENS_LIMIT
        assert bool(mask >> (b - 0xC0) & 1) == want, hex(b)


def test_which_pieces_are_looked_at():
    # The first lead byte decides: a 3-byte one, or a 2-byte one whose bit is set, as it is; a 2-byte one whose
    # bit is clear, a 3-byte one after it (the walk over 3-byte characters) or none.
    enc = ctok.get_encoding("o200k_base")
    core = enc._core
    on = [b for b in range(0xC2, 0xE0) if core.cut_leads >> (b - 0xC0) & 1]
    off = [b for b in range(0xC2, 0xE0) if not core.cut_leads >> (b - 0xC0) & 1]
    assert on and off                                   # o200k holds many Cyrillic tokens, few of some leads
    c_off = bytes([off[0], 0x80]).decode()              # a character of a lead whose bit is clear
    c_on = bytes([on[0], 0x80]).decode()
    for text, want in [("abcdefgh", 0), ("ab\U0001F600cd", 0), ("日本語の", 0xE6), ("ab日本", 0xE6),
                       (c_on * 3, on[0]), ("abcdefghij" + c_on * 2, on[0]), (c_off * 3, 0), (c_off + "本日", 0xE0),
                       (c_off + "abcdefghijk本", 0xE0), (c_off * 6 + "日", 0xE0), (c_off + c_on * 3, 0),
                       ("本" + c_off * 3, 0xE6)]:
        assert core._cut_lead(text.encode()) == want, (text, want)


def test_parts_of_one_character_beside_a_byte():
    # Every point between the Cyrillic letters is a cut (no token joins them), so a piece's first part can be a
    # byte and a 2-byte character (3 bytes, as one 3-byte character is) and its last one a 2-byte character and
    # a byte; neither is that character alone.  Each letter is a token of its own.
    tokens = [bytes([i]) for i in range(256)]
    letters = "ждщя"
    tokens += [c.encode() for c in letters] + [b"ab", "яa".encode(), "aж".encode()]
    ref = _tiktoken_for(tokens)
    for kind in (PRETOK_O200K,):
        core = CoreEncoder(tokens, None, pretok_kind=kind)
        bare = CoreEncoder(tokens, None, pretok_kind=kind, piece_cache_bytes=0)
        assert core.cut_leads & (1 << (0xD0 - 0xC0)) and core.cuts_chars
        assert core._char_cuts("aжд".encode()) == [3]
        assert core._char_cuts("ждa".encode()) == [2]
        for text in ["aжд", "ждa", "bжд", "ждb", "aждb", "жд", "aжb", "яжa", "aжя", "ждщяa", "bждщя", "жaд",
                     "абв", "zжщz", "ждab", "abжд"]:
            for t in (text, " " + text, text + " and more text to pass 16 bytes"):
                want = ref.encode_ordinary(t)
                assert core.encode_ordinary(t.encode()) == want, t
                assert bare.encode_ordinary(t.encode()) == want, t


@pytest.mark.parametrize("family", HF_FAMILIES)
def test_tokenizer_json_files_match_hf(family):
    tokenizers = pytest.importorskip("tokenizers")
    path = vocab_path(family, "tokenizer.json")
    if not path.exists():
        pytest.skip(f"{path} not in shared")
    enc = ctok.load(str(path))
    assert enc._core.cuts_chars
    ref = tokenizers.Tokenizer.from_file(str(path))
    rnd = random.Random(SEED + 3)
    texts = _random_texts(rnd, 300) + _random_texts2(rnd, 300)
    old = enc._core.cut_leads
    try:
        for leads in (old, ALL_LEADS):
            enc._core._set_cuts(True, leads=leads)
            for text in texts:
                want = ref.encode(text, add_special_tokens=False).ids
                for _ in range(2):
                    assert_same_ids(enc.encode_ordinary(text), want, text, f"leads {leads:#x}")
    finally:
        enc._core._set_cuts(True, leads=old)


# ---- synthetic rank files: tokens that join parts of characters, a token its bytes do not rebuild ----

ALPHABET = ["日", "本", "時", "文", "中", "人", "の", "は", "。", " ", "a"]


def _synthetic_ranks(rnd, n_merges=60):
    # Byte tokens, then random concatenations of tokens over the alphabet's bytes (whole characters, parts
    # of characters, across their seams), each ranked after its parts as in a trained rank file.
    tokens = [bytes([i]) for i in range(256)]
    pool = sorted({b for ch in ALPHABET for b in ch.encode()})
    seen = set(tokens)
    while len(tokens) < 256 + n_merges:
        t = tokens[rnd.choice(pool)] + tokens[rnd.choice(pool)]
        if t in seen or len(t) > 12:
            continue
        seen.add(t)
        tokens.append(t)
        pool.append(len(tokens) - 1)
    return tokens


def _tiktoken_for(tokens):
    tiktoken = pytest.importorskip("tiktoken")
    from ctok.patterns import PATTERNS
    return tiktoken.Encoding("synthetic", pat_str=PATTERNS[PRETOK_O200K], mergeable_ranks={t: i for i, t in enumerate(tokens)},
                             special_tokens={})


def test_synthetic_rank_files_match_tiktoken():
    rnd = random.Random(SEED + 4)
    for trial in range(10):
        tokens = _synthetic_ranks(rnd)
        ref = _tiktoken_for(tokens)
        core = CoreEncoder(tokens, None, pretok_kind=PRETOK_O200K)
        bare = CoreEncoder(tokens, None, pretok_kind=PRETOK_O200K, piece_cache_bytes=0)
        assert core.cuts_chars
        cuts = 0
        for _ in range(200):
            text = "".join(rnd.choice(ALPHABET[:8]) for _ in range(rnd.randint(1, 40)))
            want = ref.encode_ordinary(text)
            assert core.encode_ordinary(text.encode()) == want, (trial, text)
            cut, whole = _cut_and_whole(bare, text.encode())
            assert cut == want and whole == want, (trial, text)
            cuts += len(core._char_cuts(text.encode()))
        assert cuts > 0, trial


def test_a_part_equal_to_a_token_its_bytes_do_not_rebuild():
    # "日本" is a token, but BPE of its bytes joins the end of 日 to the start of 本 first (the token A5 E6
    # ranks below both characters), so it never forms: a piece "日本" is that token (tiktoken's rule), a part
    # "日本" of "中日本中" is its bytes' BPE.  Both must come out right whichever the table of recent pieces
    # met first.
    zh, ri, ben = "中".encode(), "日".encode(), "本".encode()
    tokens = [bytes([i]) for i in range(256)]
    tokens += [ri[2:] + ben[:1], ri[:2], ri, ben[:2], ben, zh[:2], zh, ri + ben]
    ref = _tiktoken_for(tokens)
    assert ref.encode_ordinary("日本") == [len(tokens) - 1]
    assert ref.encode_ordinary("中日本中") != [len(tokens) - 2, len(tokens) - 1, len(tokens) - 2]
    core = CoreEncoder(tokens, None, pretok_kind=PRETOK_O200K)
    assert core._char_cuts("中日本中".encode()) == [3, 9]
    # Texts of 16 bytes or more: shorter ones do not use the table of recent pieces.
    for text in ["日本", "中日本中", "日本", "中日本中", "日本。日本", "中日本中日本中"] * 2:
        text += " and some more text"
        assert core.encode_ordinary(text.encode()) == ref.encode_ordinary(text), text
