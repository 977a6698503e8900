"""The prefix cache (ctok._prefix) never changes results: PrefixCache.encode(core, b) == core.encode_ordinary(b)
for every native pretokenizer kind, with prefixes cut adversarially (inside whitespace runs, letter runs,
digit groups, contractions, \\r\\n pairs, multi-byte characters, before special-token text), under eviction
and under concurrent use; and the read bound behind the safe cut is checked directly on piece boundaries."""
import os
import random
import threading

import pytest

import ctok
from ctok import _pretok
from ctok._encoder import CoreEncoder
from ctok._prefix import PrefixCache, read_bound, BLOCK

SEED = int(os.environ.get("CTOK_SEED", "1234"))
KINDS = {name: v for name, v in _pretok.KINDS.items() if v != _pretok.PRETOK_WHOLE}

# Characters and fragments that make pretokenizer decisions look ahead or depend on the end of text.
ATOMS = [
    b" ", b"  ", b"    ", b"\t", b"\n", b"\r\n", b"\r", b"\n\n", " ".encode(), "\u3000".encode(),
    "\u2028".encode(), b"a", b"b", b"s", b"t", b"re", b"ve", b"ll", b"d", b"m", b"A", b"B", b"S", b"LL", b"RE",
    b"Hello", b"WORLD", b"it", b"'", b"'s", b"'re", b"'LL", "\u017f".encode(), b"0", b"1", b"12", b"123", b"4567",
    "\u0663".encode(), "\u00b2".encode(), b".", b",", b"!", b"/", b"(", b"<", b"|", b">", b"-", b"_",
    "\u02b0".encode(), "\u01c5".encode(), "\u00e9".encode(), "e\u0301".encode(), "\u0301".encode(),
    "\u4e2d".encode(), "\u6587".encode(), "\u3072".encode(), "\u30a2".encode(), "\ud55c".encode(),
    "\u0436".encode(), "\u0416".encode(), "\U0001f642".encode(), "\U0001f44d\U0001f3fd".encode(), b"\xff",
    b"\xe4", b"\xe4\xb8", b"\xf0\x9f", b"\xc3", b"<|endoftext|>", b"<|im_start|>",
]


def rand_text(rnd, n_atoms):
    return b"".join(rnd.choice(ATOMS) for _ in range(n_atoms))


@pytest.fixture(scope="module")
def o200k():
    return ctok.get_encoding("o200k_base")


@pytest.fixture(scope="module")
def cores(o200k):
    vocab = o200k._core.vocab
    return {name: CoreEncoder(vocab=vocab, pretok_kind=kind) for name, kind in KINDS.items()}


@pytest.mark.parametrize("kind_name", sorted(KINDS))
def test_read_bound_proves_piece_boundaries(kind_name):
    """For every piece boundary p of a random text A, any B agreeing with A on the first read_bound(A, p) + 1
    bytes has the same pieces before p."""
    kind = KINDS[kind_name]
    rnd = random.Random(SEED + kind)
    checked = 0
    for _ in range(150):
        a = rand_text(rnd, rnd.randint(1, 40))
        ends_a = [0] + _pretok.piece_ends(kind, a)
        for p in ends_a[:-1]:
            r = read_bound(a, p)
            assert r >= min(p + 3, len(a))
            if r >= len(a):
                continue
            q = r + 1
            for _ in range(3):
                b = a[:q] + rand_text(rnd, rnd.randint(0, 4))
                ends_b = [0] + _pretok.piece_ends(kind, b)
                assert [e for e in ends_a if e <= p] == [e for e in ends_b if e <= p], (a, b, p, r)
                checked += 1
    assert checked > 500


def _check(cache, core, data):
    got = cache.encode(core, data)
    want = core.encode_ordinary(data)
    assert got == want, (data[:80], len(data))


@pytest.mark.parametrize("kind_name", sorted(KINDS))
def test_cut_prefixes_adversarially(cores, kind_name):
    core = cores[kind_name]
    rnd = random.Random(SEED * 7 + KINDS[kind_name])
    cache = PrefixCache(1 << 22, min_bytes=0)
    for _ in range(12):
        a = rand_text(rnd, rnd.randint(60, 400))
        _check(cache, core, a)
        for _ in range(40):
            q = rnd.randint(0, len(a))
            b = a[:q] + rand_text(rnd, rnd.randint(0, 30))
            _check(cache, core, b)
            if q and rnd.random() < 0.3:          # continue the same run: byte of a, or a different byte
                _check(cache, core, a[:q] + a[q - 1:q] * rnd.randint(1, 5))
        _check(cache, core, a)                    # exact repeat
        _check(cache, core, a + b" tail")        # extension replaces the entry
    st = cache.stats()
    assert st["hits"] > 100 and st["reused_bytes"] > 0


@pytest.mark.parametrize("kind_name", sorted(KINDS))
@pytest.mark.parametrize("cut", [
    (b"it'", [b"s", b"S", b"re", b"ll", b"\xc5\xbf", b"x", b""]),
    (b"words and ", [b" ", b"  x", b"\n", b"x", b""]),
    (b"line\r", [b"\n", b"\r\n", b"x", b" \n"]),
    (b"spaces   ", [b"   x", b"\n\n", b"y", b""]),
    (b"Hello Wor", [b"ld", b"LD", b"ld's", b" ", b"\xe4\xb8\xad"]),
    (b"num 12", [b"3", b"34567", b" ", b"a"]),
    ("caf".encode() + b"\xc3", [b"\xa9", b"\xa9s", b"x", b""]),
    ("\u4e2d".encode() + b"\xe6", [b"\x96\x87", b"x"]),
    (b"ABC" + "\u02b0".encode(), [b"DEF", b"DEFg", b" ", "\u02b0".encode()]),
    (b"text ", [b"<|endoftext|>", b"<|endoftext|> more"]),
])
def test_named_cuts(cores, kind_name, cut):
    core = cores[kind_name]
    head, tails = cut
    filler = (b"The quick brown fox jumps over the lazy dog. " * 8)[:BLOCK * 3]
    cache = PrefixCache(1 << 22, min_bytes=0)
    for prefix_filler in (filler, filler + b"\n\n  "):
        base = prefix_filler + head
        _check(cache, core, base)
        for t in tails:
            _check(cache, core, base + t)
            _check(cache, core, base + t + b" after")


def test_corpus_chat_growth_and_shared_system_prompt(o200k):
    from _shared import corpus_text
    core = o200k._core
    text = corpus_text("en_botchan.txt", 30_000).encode()
    cache = PrefixCache(1 << 24, min_bytes=0)
    chat = b""
    for turn in range(20):                          # a chat growing by one turn per request
        chat += b"\nuser: " + text[turn * 700:(turn + 1) * 700]
        _check(cache, core, chat)
    st = cache.stats()
    # the first request only marks its first block as seen (admission), the second is kept, then each
    # request extends, and replaces, the last one
    assert st["hits"] == 18 and st["misses"] == 2 and st["entries"] == 1
    assert st["encoded_bytes"] < len(chat) * 2
    system = text[:8000]
    for i in range(30):
        _check(cache, core, system + text[10_000 + 200 * i:10_000 + 200 * (i + 1)])
    assert cache.stats()["hits"] >= 18 + 28


@pytest.mark.parametrize("script", ["ascii", "mixed"])
def test_growing_chat_keeps_one_entry_with_a_node_per_block(o200k, script):
    """A chat growing by a turn per request (str prompts, answered by the str front, and bytes): each request
    replaces the entry it extends, which then owns exactly one node per full block of the longer text, none
    left over and none missing; a prompt that shares only the first turns still finds the grown entry."""
    from _shared import corpus_text
    core = o200k._core
    text = corpus_text("en_botchan.txt" if script == "ascii" else "ru_bible_synodal.txt", 40_000)
    for as_bytes in (False, True):
        cache = PrefixCache(1 << 24)
        chat = ""
        for turn in range(16):
            chat += ("\nuser: " if turn % 2 == 0 else "\nassistant: ") + text[turn * 900:(turn + 1) * 900]
            data = chat.encode() if as_bytes else chat
            got = cache.encode(core, data) if as_bytes else cache.encode_str(core, data)
            assert got == core.encode_str(chat), (script, as_bytes, turn)
            st = cache.stats()
            if turn >= 2:                   # the first is short (passed through), the second only noted (admission)
                assert st["entries"] == 1 and st["nodes"] == len(chat.encode()) // BLOCK, (script, turn, st)
        if not as_bytes:
            assert cache.stats()["front_hits"] >= 13
        for share in (3, 10):                           # a prompt sharing 1/3, then 9/10, of the chat
            st = cache.stats()
            other = chat[:len(chat) * (share - 1) // share] + " and now something else entirely. " * 200   # kept: the trie answers
            data = other.encode() if as_bytes else other
            got = cache.encode(core, data) if as_bytes else cache.encode_str(core, data)
            assert got == core.encode_str(other)
            after = cache.stats()
            assert after["hits"] == st["hits"] + 1
            # reached through the nodes the grown entry added (found by the deepest node, not an older one)
            assert after["reused_bytes"] - st["reused_bytes"] > len(other[:len(chat) * (share - 1) // share]
                                                                  .encode()) - 2 * BLOCK


# Added tokens the core splits at (HF's added vocabulary, leftmost-longest), with prefixes of one another and
# fragments of them, so that prompts part from cached ones inside a token, right before or after one.
SPLIT_TOKENS = [b"<think>", b"</think>", b"<thinking>", b"<t", b"ab", b"[x]", b"<|im_start|>", b"<|im_end|>"]
SPLIT_ATOMS = SPLIT_TOKENS + [b"<", b"<th", b"<thi", b"think>", b">", b"</", b"</th", b"a", b"b", b"[", b"]", b"x",
                              b"<|", b"<|im", b"<|im_st", b"art|>", b"|>", b"_"]
# Text between the tokens: long enough runs that checkpoints fall inside them too.
PLAIN_ATOMS = [b" ", b"  ", b"\n", b"word", b" word", b" Word", b"12", b"345", b"'s", b".", b", ", b"(x)",
               "\u4e2d".encode(), "\u00e9".encode(), b"\t", b"  \n"]


def _split_text(rnd, n_atoms, atoms=SPLIT_ATOMS, share=0.08):
    return b"".join(rnd.choice(atoms) if rnd.random() < share else rnd.choice(PLAIN_ATOMS)
                    for _ in range(n_atoms)).decode()


def _prompts_parting_anywhere(cache, core, rnd, atoms, share):
    """16 texts of atoms (about `share` of them from `atoms`, the others PLAIN_ATOMS), each followed by 40 prompts
    parting from it anywhere (a few atoms inserted or appended there; now and then the next base): each through
    the split cache gives core.encode_str_split's ids.  Returns the last base."""
    for _ in range(16):
        base = _split_text(rnd, rnd.randint(60, 600), atoms, share)
        assert cache.encode_str(core, base) == core.encode_str_split(base)
        for _ in range(40):
            k = rnd.randint(0, len(base))
            tail = b"".join(rnd.choice(atoms) for _ in range(rnd.randint(0, 8))).decode()
            v = base[:k] + tail + base[k:] if rnd.random() < 0.3 else base[:k] + tail
            assert cache.encode_str(core, v) == core.encode_str_split(v), (base, v)
            if rnd.random() < 0.1:
                base = v if len(v) > 100 else base
    return base


@pytest.fixture(scope="module")
def split_core(o200k):
    core = CoreEncoder(vocab=o200k._core.vocab, pretok_kind=o200k._core.pretok_kind)
    core.set_added_split([(t, 199_000 + i) for i, t in enumerate(SPLIT_TOKENS)])
    return core


def test_split_cache_cuts_adversarially(split_core):
    """A split cache (texts split at the encoder's added tokens first): prompts parting from cached ones anywhere,
    inside an added token or one of its prefixes, give core.encode_str_split's ids; reuse still happens across
    added tokens."""
    core = split_core
    rnd = random.Random(SEED * 19)
    cache = PrefixCache(1 << 22, min_bytes=0, split=True)
    base = _prompts_parting_anywhere(cache, core, rnd, SPLIT_ATOMS, 0.08)
    st = cache.stats()
    assert st["hits"] > 100 and st["reused_bytes"] > 0 and st["front_hits"] == 0
    plain = PrefixCache(1 << 22, min_bytes=0)
    assert plain.encode_str(core, base) == core.encode_str(base)      # a plain cache keeps the plain reading


# HF's two passes (AddedSplit): raw tokens first, then normalized ones between them.  The normalized tokens
# overlap raw ones on either side, inside them, and hold characters other than ASCII.  "!cdefghij", the longest,
# found in one prompt and not in another (which parts from it at its last byte) lets "a....!" be found in the
# other, five bytes before it: the piece boundary after "a" is then decided within both prompts' common part
# plus the longest raw token, but not within the common part less both passes' longest tokens.
SPLIT2_RAW = [b"!cdefghij", b"<think>", "\uff5cX\uff5c".encode(), b"qq"]
SPLIT2_NORM = [b"a....!", b"think", b"j>", "\uff5cX".encode(), b"q", b" x"]
SPLIT2_ATOMS = SPLIT2_RAW + SPLIT2_NORM + [b"!", b"a.", b"....", b"!cdefghi", b"x", b"j", b">", b"<", b"<th",
                                           "\uff5c".encode(), b"X", b"Z", b"th"]


@pytest.fixture(scope="module")
def split2_core(o200k):
    core = CoreEncoder(vocab=o200k._core.vocab, pretok_kind=o200k._core.pretok_kind)
    core.set_added_split([(t, 199_000 + i, False) for i, t in enumerate(SPLIT2_RAW)]
                         + [(t, 199_100 + i, True) for i, t in enumerate(SPLIT2_NORM)])
    return core


def test_split_cache_of_two_passes_cuts_adversarially(split2_core):
    """A split cache whose encoder splits in two passes: prompts parting from cached ones anywhere give
    core.encode_str_split's ids.  A prompt "... a....!cdefghiZ" after a cached "... a....!cdefghij" (where the
    raw "!cdefghij" kept the normalized "a....!" out) must not reuse the cached reading of "a": the cut backs
    off by the longest raw and the longest normalized token together, not by the longest of all."""
    core = split2_core
    assert core.encode_str_split("a....!cdefghij") == core.encode_str_split("a....") + [199_000]
    assert core.encode_str_split("a....!cdefghiZ")[0] == 199_100
    filler = "word 12 Word, " * 200
    for lead in ["\n", " ", "x", ", "]:
        cache = PrefixCache(1 << 22, min_bytes=0, split=True)
        texts = [filler + lead + "a....!cdefghij more"] * 2 + [filler + lead + "a....!cdefghiZ more"]
        for t in texts:                                   # kept at its second sighting, then reused
            assert cache.encode_str(core, t) == core.encode_str_split(t), repr(lead)
        assert cache.stats()["hits"] == 1
    rnd = random.Random(SEED * 37)
    cache = PrefixCache(1 << 22, min_bytes=0, split=True)
    _prompts_parting_anywhere(cache, core, rnd, SPLIT2_ATOMS, 0.1)
    assert cache.stats()["hits"] > 100


def test_split_cache_serves_split_encoders_only(o200k, split_core, sp_cores):
    cache = PrefixCache(1 << 20, min_bytes=0, split=True)
    text = "x" * 300 + "<think>" + "y" * 300
    bare = CoreEncoder(vocab=o200k._core.vocab, pretok_kind=o200k._core.pretok_kind)
    with pytest.raises(ValueError):
        cache.encode_str(bare, text)                  # no added tokens to split at
    with pytest.raises(ValueError):
        cache.encode_marked(sp_cores["mistral-7b-v0.1"], text)
    assert cache.encode_str(split_core, text) == split_core.encode_str_split(text)


@pytest.mark.parametrize("folder", ["qwen3", "deepseek-v3"])
def test_tokenizer_json_texts_with_added_tokens_use_their_cache(folder):
    """Qwen 3 and DeepSeek-V3: text holding their non-special added tokens (<think>, <tool_call>; DeepSeek-V3's
    split in HF's two passes) is split by the core and goes through the encoding's split cache; a chat growing by
    turns that hold them gets HF's ids and reuses its prefix."""
    tokenizers = pytest.importorskip("tokenizers")
    from _shared import vocab_path, corpus_text
    path = str(vocab_path(folder, "tokenizer.json"))
    enc = ctok.load(path)
    enc.set_prefix_cache(None)                   # a fresh cache: ctok.load's encodings are shared by other tests
    ref = tokenizers.Tokenizer.from_file(path)
    text = corpus_text("en_dracula.txt", 40_000)
    chat = ""
    for i in range(16):
        chat += "\nuser: " + text[i * 1000:i * 1000 + 600]
        chat += "\nassistant: <think>\n" + text[20_000 + i * 300:20_000 + i * 300 + 300] + "</think>" + \
            rnd_tail(i) + "<tool_call>{}</tool_call>"
        assert enc.encode(chat) == ref.encode(chat, add_special_tokens=False).ids, i
        assert enc.encode_ordinary(chat) == ref.encode(chat, add_special_tokens=False).ids, i
    split = enc.prefix_cache_stats()["split"]
    assert split["hits"] >= 20 and split["entries"] >= 1
    enc.set_prefix_cache(None)


def _overlapping(a, b):
    # Some text holds a and b overlapping: one contains the other, or one ends with the other's start.
    return a in b or b in a or any(a.endswith(b[:k]) or b.endswith(a[:k]) for k in range(1, min(len(a), len(b))))


@pytest.mark.parametrize("rel", ["qwen3/tokenizer.json", "llama3-hf/tokenizer.json", "gpt2/tokenizer.json",
                                 "deepseek-v3/tokenizer.json"])
def test_tokenizer_json_templates_split_at_specials_through_their_cache(rel):
    """encode(text, allowed_special="all") of a tokenizer.json file whose every added token the core can split at
    (a chat template's output): the core splits at the special and added tokens together (in HF's two passes
    where some are matched raw and some normalized: DeepSeek-V3), through a cache of its own.  Random texts of
    special and added tokens (those of the second pass with every first-pass token they overlap), fragments of
    them and ordinary text, prompts parting anywhere, and a growing templated chat give HF tokenizers' ids (with
    its post-processor too)."""
    tokenizers = pytest.importorskip("tokenizers")
    from _shared import vocab_path
    path = str(vocab_path(*rel.split("/")))
    enc = ctok.load(path)
    assert enc._specials_cache is not None and enc._core.has_specials_split
    enc.set_prefix_cache(None)                   # a fresh cache: ctok.load's encodings are shared by other tests
    ref = tokenizers.Tokenizer.from_file(path)
    rnd = random.Random(SEED * 29 + len(rel))
    names = sorted(enc.special_tokens)
    names = [names[0], names[-1]] + rnd.sample(names, min(4, len(names)))
    added = [t for t, _ in enc._core.added_split][:4]
    names += [t.decode() for t in added]
    first, second = enc._core.added_split_passes(specials=True)
    crossing = [t for t, _ in second if any(_overlapping(t, u) for u, _ in first)]
    for t in crossing[:4] + [t for t, _ in rnd.sample(second, min(2, len(second)))]:
        names += [t.decode()] + [u.decode() for u, _ in first if _overlapping(t, u)][:3]
    atoms = names + [n[:k] for n in names for k in (1, 2, len(n) // 2, len(n) - 1) if k > 0] + \
        [a.decode("utf-8", "replace") for a in ATOMS if b"\xff" not in a and b"\xe4" not in a]
    atoms = [a for a in atoms if "\ufffd" not in a]
    for _ in range(5):
        base = "".join(rnd.choice(atoms) for _ in range(rnd.randint(200, 500)))
        for _ in range(2):
            assert enc.encode(base, allowed_special="all") == ref.encode(base, add_special_tokens=False).ids
        for _ in range(16):
            k = rnd.randint(0, len(base))
            v = base[:k] + "".join(rnd.choice(atoms) for _ in range(rnd.randint(0, 10)))
            assert enc.encode(v, allowed_special="all") == ref.encode(v, add_special_tokens=False).ids, (base, v)
            if rnd.random() < 0.2 and len(v) > 300:
                base = v
    chat = ""
    words = [a for a in atoms[len(names):] if a.isascii()]    # text no normal form changes (Qwen 3 has NFC)
    for i in range(12):
        chat += names[0] + "user\n" + "".join(rnd.choice(words) for _ in range(120)) + names[1]
        assert enc.encode(chat, allowed_special="all") == ref.encode(chat, add_special_tokens=False).ids, i
    assert enc.encode(chat, allowed_special="all", add_special_tokens=True) == ref.encode(chat).ids
    assert enc.prefix_cache_stats()["specials"]["hits"] >= 6          # the chat from its third request on
    enc.set_prefix_cache(0)
    assert enc.encode(chat, allowed_special="all") == ref.encode(chat, add_special_tokens=False).ids
    enc.set_prefix_cache(None)


def rnd_tail(i):
    return ["", " ", "\n", "  x", "<thi", "<think"][i % 6]


def _auto_families():
    from _shared import TIKTOKEN_FAMILIES
    return [f for f in TIKTOKEN_FAMILIES if f.load == "auto" and not f.view_lines]


@pytest.mark.parametrize("family", _auto_families(), ids=lambda f: f.id)
def test_every_special_allowed_splits_natively_through_its_cache(family):
    """allowed_special="all" in a tiktoken file whose special tokens are all ASCII: the core splits at them and
    the split cache serves the text (a chat template's output).  Random texts of special tokens, fragments of
    them and ordinary text, prompts parting from cached ones anywhere, and a growing templated chat give
    tiktoken's ids, with the cache on and off."""
    from _shared import reference_encoding, shared_dir
    shared_dir()
    enc = ctok.load(str(family.source_file()))
    if enc._split_all is None:
        pytest.skip("special tokens the core cannot split at")
    ref = reference_encoding(family.folder, family.recipe)   # tiktoken, with the file's id offset (Tekken)
    enc.set_prefix_cache(None)                   # a fresh cache: ctok.load's encodings are shared by other tests
    rnd = random.Random(SEED * 23 + len(family.id))
    names = sorted(enc.special_tokens)
    names = [names[0], names[-1]] + rnd.sample(names, min(4, len(names)))
    atoms = names + [n[:k] for n in names for k in (1, 2, len(n) // 2, len(n) - 1) if k > 0] + \
        [a.decode("utf-8", "replace") for a in ATOMS]
    for _ in range(6):
        base = "".join(rnd.choice(atoms) for _ in range(rnd.randint(200, 500)))
        for _ in range(2):
            assert enc.encode(base, allowed_special="all") == ref.encode(base, allowed_special="all")
        for _ in range(20):
            k = rnd.randint(0, len(base))
            v = base[:k] + "".join(rnd.choice(atoms) for _ in range(rnd.randint(0, 10)))
            assert enc.encode(v, allowed_special="all") == ref.encode(v, allowed_special="all"), (base, v)
            if rnd.random() < 0.2 and len(v) > 300:
                base = v
    chat = ""
    for i in range(12):
        chat += names[0] + "user\n" + "".join(rnd.choice(atoms[len(names):]) for _ in range(120)) + names[1]
        assert enc.encode(chat, allowed_special="all") == ref.encode(chat, allowed_special="all"), i
    assert enc.prefix_cache_stats()["specials"]["hits"] >= 6       # the chat from its third request on
    enc.set_prefix_cache(0)
    assert enc.encode(chat, allowed_special="all") == ref.encode(chat, allowed_special="all")
    enc.set_prefix_cache(None)
    # Lone surrogates: U+FFFD, as tiktoken makes them, on the compiled route as on the Python one
    for t in ["a\ud800" + names[0] + "b", (names[1] + "\udfff x") * 300, "\ud800" * 2000 + names[0]]:
        assert enc.encode(t, allowed_special="all") == ref.encode(t, allowed_special="all")


@pytest.mark.parametrize("family", _auto_families(), ids=lambda f: f.id)
def test_real_encodings_with_special_tokens(family):
    """Through an Encoding: segments between allowed special tokens (not all of them: all go to the core's
    split, above) go through the cache separately."""
    from _shared import shared_dir
    shared_dir()
    enc = ctok.load(str(family.source_file()))
    if not enc._native_plain():
        pytest.skip("not a native-plain encoding")
    cache = PrefixCache(1 << 22, min_bytes=0)
    ref_plain = enc._encode_plain
    enc_cached = _with_cache(enc, cache)
    rnd = random.Random(SEED)
    system = (b"You are a helpful assistant. Answer briefly, cite sources.\n" * 10).decode()
    specials = sorted(enc.special_tokens)[:2]
    allowed = set(specials[:1]) if len(enc.special_tokens) > 1 else "all"
    for i in range(30):
        sp = specials[i % len(specials)] if specials else ""
        text = system + sp + rand_text(rnd, 30).decode("utf-8", "replace") + sp
        assert enc_cached.encode(text, allowed_special=allowed, disallowed_special=()) == \
            enc.encode(text, allowed_special=allowed, disallowed_special=())
        assert enc_cached._encode_plain(text) == ref_plain(text)
    assert cache.stats()["hits"] > 0


@pytest.mark.parametrize("family", _auto_families(), ids=lambda f: f.id)
def test_real_encodings_str_front(family):
    """Through an Encoding with its default cache (str in): long prompts sharing a 2-byte-kind system prompt,
    with allowed special tokens between segments, equal the same Encoding's results with the cache off, and
    the front answers segments."""
    from _shared import shared_dir, corpus_text
    shared_dir()
    loaded = ctok.load(str(family.source_file()))
    if not loaded._native_plain() or loaded.prefix_cache_stats() is None:
        pytest.skip("no prefix cache for this encoding")
    enc = loaded._with_options(long_input_split=loaded.long_input_split)   # copies sharing the tables
    enc.set_prefix_cache(1 << 24)                                          # a fresh cache of its own
    off = loaded._with_options(long_input_split=loaded.long_input_split)
    off.set_prefix_cache(0)
    assert off.prefix_cache_stats() is None
    rnd = random.Random(SEED + 9)
    system = corpus_text("en_dracula.txt", 3000) + " \u201cquoted\u201d \u2014 "
    specials = sorted(enc.special_tokens)[:2] or [""]
    for i in range(30):
        sp = specials[i % len(specials)]
        text = system + rand_text(rnd, 30).decode("utf-8", "replace") + (sp + system if i % 3 == 0 else "")
        assert enc.encode(text, allowed_special="all") == off.encode(text, allowed_special="all")
        assert enc.encode_ordinary(text) == off.encode_ordinary(text)
    assert enc.prefix_cache_stats()["front_hits"] > 20


def _with_cache(enc, cache):
    """A copy of enc whose ordinary text goes through cache (what the Encoding integration does).  Not
    copy.copy: an Encoding reduces to its loader, which returns the same shared object, and the patch below
    would stay on it for every later test."""
    from ctok.core import _utf8
    c = enc._with_options(long_input_split=enc.long_input_split)
    core = enc._core
    c._encode_plain = lambda text: cache.encode(core, _utf8(text))
    return c


def test_eviction_bounds_memory_and_stays_exact(o200k):
    core = o200k._core
    rnd = random.Random(SEED + 99)
    cache = PrefixCache(200_000, min_bytes=0)
    bases = [rand_text(rnd, 300) for _ in range(8)]
    for _ in range(300):
        b = rnd.choice(bases)
        _check(cache, core, b[:rnd.randint(0, len(b))] + rand_text(rnd, 20))
        assert cache.stats()["bytes_used"] <= 200_000
    st = cache.stats()
    assert st["evictions"] > 0 and st["hits"] > 0
    cache.clear()
    st = cache.stats()
    assert st["entries"] == 0 and st["bytes_used"] == 0 and st["nodes"] == 0
    _check(cache, core, bases[0])


def test_admission_keeps_a_text_once_its_start_was_seen(o200k):
    core = o200k._core
    cache = PrefixCache(min_bytes=0)
    rnd = random.Random(SEED + 3)
    for _ in range(50):                             # unrelated texts: none is kept
        _check(cache, core, rand_text(rnd, 200))
    assert cache.stats()["entries"] == 0 and cache.stats()["misses"] == 50
    base = rand_text(rnd, 200)
    _check(cache, core, base)
    _check(cache, core, base + b" one")
    assert cache.stats()["entries"] == 1
    _check(cache, core, base + b" two")
    assert cache.stats()["hits"] == 1


def test_off_and_short_texts_pass_through(o200k):
    core = o200k._core
    off = PrefixCache(0)
    _check(off, core, b"x" * 1000)
    assert off.stats()["passthrough"] == 1 and off.stats()["entries"] == 0
    cache = PrefixCache()
    _check(cache, core, b"short")
    _check(cache, core, b"")
    _check(cache, core, b"x" * 1000)                # below min_bytes (1024 by default)
    assert cache.stats()["passthrough"] == 3
    with pytest.raises(ValueError):
        PrefixCache(-1)
    with pytest.raises(TypeError):
        cache.encode(core, None)
    with pytest.raises(TypeError):
        cache.encode(None, b"x" * 2000)


def test_threads_share_one_cache(o200k):
    core = o200k._core
    rnd = random.Random(SEED + 5)
    bases = [rand_text(rnd, 400) for _ in range(4)]
    cache = PrefixCache(300_000, min_bytes=0)
    errors = []

    def work(k):
        r = random.Random(k)
        try:
            for _ in range(150):
                b = r.choice(bases)
                d = b[:r.randint(0, len(b))] + rand_text(r, r.randint(0, 40))
                if cache.encode(core, d) != core.encode_ordinary(d):
                    errors.append(d)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert cache.stats()["bytes_used"] <= 300_000


def test_threads_share_the_str_front(o200k):
    """Str prompts from several threads (half of them through bind) while a small budget evicts entries
    that the front names: always the uncached ids."""
    core = o200k._core
    rnd = random.Random(SEED + 6)
    bases = ["".join(rnd.choice(STR_POOLS[k]) for _ in range(3000)) for k in ("ucs2", "ucs4", "latin1", "ucs2")]
    cache = PrefixCache(150_000)
    bound = cache.bind(core)
    errors = []

    def work(k):
        r = random.Random(k)
        try:
            for _ in range(120):
                b = r.choice(bases)
                d = b[:r.randint(len(b) // 2, len(b))] + "".join(r.choice(STR_ATOMS) for _ in range(r.randint(0, 40)))
                got = bound(d) if k % 2 else cache.encode_str(core, d)
                if got != core.encode_str(d):
                    errors.append(d)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert cache.stats()["bytes_used"] <= 150_000
    assert cache.stats()["front_hits"] > 50


def test_str_entry_points_and_bind(o200k):
    """encode_str / bind(core) take a str (its UTF-8 form cached by CPython) and equal core.encode_str."""
    core = o200k._core
    cache = PrefixCache(1 << 22)
    enc = cache.bind(core)
    rnd = random.Random(SEED + 11)
    system = "Système: réponds brièvement. 日本語も話せます。 " * 40 + "\r\n  "
    for i in range(40):
        text = system + rand_text(rnd, 40).decode("utf-8", "replace") * (1 + i % 3)
        assert enc(text) == core.encode_str(text) == core.encode_ordinary(text.encode("utf-8"))
        assert cache.encode_str(core, text[:len(system) + i]) == core.encode_str(text[:len(system) + i])
    assert cache.stats()["hits"] > 30
    # A long non-ASCII text's UTF-8 is ctok's own copy (the entry owns it): the str gets no UTF-8 cache of
    # CPython's, and its entry stays valid after the str is gone.
    import sys
    for k, chunk in enumerate(["Привет, мир! ", "naïve café “quoted” — ", "中文字符和日本語 ", "🙂 emoji 👍🏽 "]):
        text = (chunk * 400) + str(k)
        size = sys.getsizeof(text)
        assert enc(text) == core.encode_ordinary(text.encode("utf-8"))
        assert sys.getsizeof(text) == size
        again = (chunk * 400) + str(k) + chunk * 3           # reuses the entry made from `text`
        del text
        assert enc(again) == core.encode_ordinary(again.encode("utf-8"))
        assert cache.encode_str(core, again) == core.encode_str(again)
    lone = system + "\ud800 tail"                  # lone surrogate: the encoder's repair path
    assert enc(lone) == core.encode_str(lone)
    assert enc("short") == core.encode_str("short")
    assert enc.__self__.cache is cache
    with pytest.raises(TypeError):
        enc(b"bytes")


# The str front (PrefixCache._encode_front) compares a str prompt's code units with the str a cached entry was
# made from and converts only the rest.  Characters whose UTF-8 shares its lead bytes with a neighbour's (a
# prompt that differs from the cached one inside a multi-byte character), of every str kind.
STR_ATOMS = sorted({a.decode("utf-8", "replace") for a in ATOMS} | {
    "\u00e9", "\u00e8", "\u00ff", "\u00df", "\u4e2d", "\u4e30", "\u0436", "\u0437", "\U0001f642", "\U0001f643",
    "\U0001f44d\U0001f3fd", "\u00a0", "\u3000 ", "'S", " 12 ", "\r\n  "})
STR_POOLS = {
    "ascii": [a for a in STR_ATOMS if a.isascii()],
    "latin1": [a for a in STR_ATOMS if max(map(ord, a)) < 0x100],
    "ucs2": [a for a in STR_ATOMS if max(map(ord, a)) < 0x10000],
    "ucs4": STR_ATOMS,
}


class _Str(str):
    pass


def _str_variant(rnd, base, pool):
    k = rnd.randint(0, len(base))
    tail = "".join(rnd.choice(pool) for _ in range(rnd.randint(0, 30)))
    way = rnd.randrange(9)
    if way == 0:
        return base
    if way == 1:
        return base[:k]
    if way == 2:
        return base + tail
    if way == 3 and k < len(base):                    # a neighbouring code point: often the same lead bytes
        c = ord(base[k]) ^ rnd.choice((1, 2, 0x40))
        if 0xD800 <= c < 0xE000:
            c = 0x41
        return base[:k] + chr(c) + base[k + 1:]
    if way == 4:
        return base[:k] + "\ud800" + tail            # a lone surrogate in the converted part
    if way == 5:
        return _Str(base[:k] + tail)
    if way == 6:                                      # another kind from k on
        return base[:k] + rnd.choice(STR_ATOMS) + tail
    return base[:k] + tail


@pytest.mark.parametrize("kind_name", sorted(KINDS))
def test_str_front_equals_uncached(cores, kind_name):
    """Str prompts sharing a start with a cached str, cut at random code points of every str kind (and the
    same text, a prefix, an extension, another kind, a lone surrogate, a str subclass): always the uncached
    ids; and the front answers most of them."""
    core = cores[kind_name]
    rnd = random.Random(SEED * 13 + KINDS[kind_name])
    front = 0
    for pool_name, pool in STR_POOLS.items():
        cache = PrefixCache(1 << 22, min_bytes=200)
        for _ in range(8):
            base = "".join(rnd.choice(pool) for _ in range(rnd.randint(250, 900)))
            for _ in range(2):                         # the second sighting is kept (admission)
                assert cache.encode_str(core, base) == core.encode_str(base)
            for _ in range(25):
                v = _str_variant(rnd, base, pool)
                assert cache.encode_str(core, v) == core.encode_str(v), (pool_name, base, v)
                if rnd.random() < 0.2 and "\ud800" not in v:
                    base = v if len(v) > 80 else base      # a growing chat: the text extends the entry
        stats = cache.stats()
        assert stats["bytes_used"] <= stats["max_bytes"]
        front += stats["front_hits"]
    assert front > 100


def test_str_front_tells_prompts_opening_alike_apart(o200k):
    """Two system prompts with the same first 300 characters, then prompts for each in turn: the front's key
    (samples of the first 512 code points) names each one's own entry, so every prompt is answered there."""
    core = o200k._core
    rnd = random.Random(SEED + 8)
    opening = "".join(rnd.choice(STR_POOLS["ucs2"]) for _ in range(300))[:300]
    systems = [opening + "".join(rnd.choice(STR_POOLS["ucs2"]) for _ in range(2000)) for _ in range(2)]
    cache = PrefixCache(1 << 22)
    for s in systems:
        for k in range(2):
            assert cache.encode_str(core, s + str(k)) == core.encode_str(s + str(k))
    before = cache.stats()["front_hits"]
    for i in range(20):
        t = systems[i % 2] + " message %d " % i
        assert cache.encode_str(core, t) == core.encode_str(t)
    assert cache.stats()["front_hits"] == before + 20


def test_str_front_bounded_and_cleared(o200k):
    """Entries made from str keep their str for the front: charged to the budget, dropped on eviction (the
    front then misses), and a cleared cache's front answers nothing."""
    core = o200k._core
    rnd = random.Random(SEED + 5)
    texts = ["".join(rnd.choice(STR_POOLS["ucs2"]) for _ in range(3000)) for _ in range(12)]
    cache = PrefixCache(200_000)
    for t in texts:
        for _ in range(3):
            assert cache.encode_str(core, t) == core.encode_str(t)
        assert cache.stats()["bytes_used"] <= 200_000
    assert cache.stats()["evictions"] > 0 and cache.stats()["front_hits"] > 0
    before = cache.stats()["front_hits"]
    assert cache.encode_str(core, texts[0] + "x") == core.encode_str(texts[0] + "x")   # evicted long ago
    assert cache.stats()["front_hits"] == before
    assert cache.encode_str(core, texts[-1][:-9] + "x") == core.encode_str(texts[-1][:-9] + "x")
    assert cache.stats()["front_hits"] == before + 1
    cache.clear()
    assert cache.encode_str(core, texts[-1][:-9] + "y") == core.encode_str(texts[-1][:-9] + "y")
    assert cache.stats()["front_hits"] == before + 1


# GPT-NeoX has no token for the bytes C0, C1 and F5-FF, which valid UTF-8 never holds: the cache serves its
# str input (and passes bytes input through; see test_vocabulary_without_every_byte_serves_text_only).
HF_ROUTE_FILES = ["gpt2/tokenizer.json", "llama3-hf/tokenizer.json", "qwen3/tokenizer.json",
                  "deepseek-v3/tokenizer.json", "gpt-neox-20b/tokenizer.json"]


@pytest.mark.parametrize("rel", HF_ROUTE_FILES)
def test_tokenizer_json_files_use_the_cache_exactly(rel):
    """tokenizer.json files whose ordinary text takes the compiled route have the cache on by default; prompts
    sharing a long prefix reuse it, and every result equals HF tokenizers' (texts holding added-token look-alikes
    or characters the normalizer changes take the Python pipeline, past the cache)."""
    tokenizers = pytest.importorskip("tokenizers")
    from _shared import vocab_path, corpus_text
    path = str(vocab_path(*rel.split("/")))
    enc = ctok.load(path)
    assert enc.prefix_cache_stats() is not None
    enc.set_prefix_cache(None)                   # a fresh cache: ctok.load's encodings are shared by other tests
    ref = tokenizers.Tokenizer.from_file(path)
    ref.encode_special_tokens = True
    rnd = random.Random(SEED)
    system = corpus_text("en_dracula.txt", 6000)
    tails = [rand_text(rnd, 40).decode("utf-8", "replace") for _ in range(12)]
    tails += [" <|endoftext|> after", " <｜end▁of▁sentence｜>", " cafe\u0301 ", "<|im_start|>user", "\u00a0tail"]
    tails += [f" A plain question, number {k}?" for k in range(4)]     # the compiled route for every file
    for i, tail in enumerate(tails * 2):
        text = system + tail + str(i)
        assert enc.encode_ordinary(text) == ref.encode(text, add_special_tokens=False).ids, (rel, tail)
    stats = enc.prefix_cache_stats()
    assert stats["hits"] > 0 and stats["reused_bytes"] > 0 and stats["front_hits"] > 0
    enc.set_prefix_cache(0)
    assert enc.prefix_cache_stats() is None
    assert enc.encode_ordinary(system + tails[0]) == ref.encode(system + tails[0], add_special_tokens=False).ids
    enc.set_prefix_cache(None)


def test_vocabulary_without_every_byte_serves_text_only():
    # A byte-level vocabulary with no token for bytes that valid UTF-8 never holds (GPT-NeoX): str input
    # shares prefixes; bytes input, which may hold those bytes, passes through; both give the core's ids.
    from _shared import vocab_path, corpus_text
    enc = ctok.load(str(vocab_path("gpt-neox-20b", "tokenizer.json")))
    core = enc._core
    system = corpus_text("en_dracula.txt", 6000)
    cache = PrefixCache(1 << 24)
    for k in range(6):
        text = system + f" question {k}?"
        assert cache.encode_str(core, text) == core.encode_str(text)
    assert cache.stats()["hits"] > 0
    before = cache.stats()["passthrough"]
    data = system.encode() + b" \xc0\xff tail"
    for _ in range(3):
        assert cache.encode(core, data) == core.encode_ordinary(data)
    assert cache.stats()["passthrough"] == before + 3


# ---------------------------------------------------------------- SentencePiece-style files (marker words)

SP_FILES = ["mistral-7b-v0.1", "mistral-7b-v0.3", "llama2"]
# Characters whose UTF-8 starts like the marker U+2581 (E2 96 81): a prompt may part from a cached one inside
# what would have been a marker.  Plus spaces (each becomes a marker), marker runs, byte-fallback characters.
SP_ATOMS = [" ", "  ", "    ", "\u2581", "\u2581\u2581", "\u2580", "\u2582", "\u2590", "\u2500", "\t", "\n",
            "\n\n", "\r\n", "a", "the", "The", "word", "s", ",", ".", "!", "(x)", "'s", "0", "12", "345",
            "\u00e9", "e\u0301", "\u4e2d\u6587", "\u3072", "\u0436", "\U0001f642", "\U0001f44d\U0001f3fd",
            "\u00a0", "\u3000", "<s>", "</s>", "\x00", "\U000e0001", "\uffff"]


@pytest.fixture(scope="module")
def sp_cores():
    from _shared import vocab_path
    return {rel: ctok.load(str(vocab_path(rel, "tokenizer.json")))._core for rel in SP_FILES}


def _sp_text(rnd, n_atoms):
    return "".join(rnd.choice(SP_ATOMS) for _ in range(n_atoms))


@pytest.mark.parametrize("rel", SP_FILES)
def test_marker_words_cut_adversarially(sp_cores, rel):
    """PrefixCache.encode_marked(core, text) == core.encode_marked(text), with prompts parting from cached ones
    anywhere: inside space runs and marker runs, inside a character that starts like the marker, right after a
    marker; and the bytes entry point, over any bytes, equals encode_ordinary."""
    core = sp_cores[rel]
    rnd = random.Random(SEED * 11 + len(rel))
    cache = PrefixCache(1 << 22, min_bytes=0)
    for _ in range(10):
        a = _sp_text(rnd, rnd.randint(40, 300))
        assert cache.encode_marked(core, a) == core.encode_marked(a)
        for _ in range(40):
            q = rnd.randint(0, len(a))
            b = a[:q] + _sp_text(rnd, rnd.randint(0, 12))
            assert cache.encode_marked(core, b) == core.encode_marked(b), (a[:q][-20:], b[q:q + 20])
        assert cache.encode_marked(core, a) == core.encode_marked(a)
        assert cache.encode_marked(core, a + " tail") == core.encode_marked(a + " tail")
    assert cache.stats()["hits"] > 20 and cache.stats()["reused_bytes"] > 0
    raw = PrefixCache(1 << 22, min_bytes=0)
    for _ in range(6):
        marker = "\u2581".encode()              # raw bytes have pieces only where markers are
        a = b"".join(rnd.choice(ATOMS + [marker] * 12 + [marker * 2]) for _ in range(rnd.randint(60, 300)))
        assert raw.encode(core, a) == core.encode_ordinary(a)
        for _ in range(30):
            q = rnd.randint(0, len(a))
            b = a[:q] + rnd.choice([b"", b"\xe2", b"\xe2\x96", b"\xe2\x96\x80", "\u2581".encode(), b" "]) \
                + rand_text(rnd, rnd.randint(0, 8))
            assert raw.encode(core, b) == core.encode_ordinary(b)
    assert raw.stats()["hits"] > 5


SP_POOLS = {
    "ascii": [a for a in SP_ATOMS if a.isascii()],
    "latin1": [a for a in SP_ATOMS if max(map(ord, a)) < 0x100],
    "ucs4": SP_ATOMS,
}


@pytest.mark.parametrize("rel", SP_FILES)
def test_marked_str_front_equals_uncached(sp_cores, rel):
    """The str front for encode_marked: prompts parting from a cached str anywhere (inside space and marker
    runs, at a character that starts like the marker), opening with a space, a marker or a letter (the
    marker-in-front rule), a prefix, an extension (a growing chat), a lone surrogate: always
    core.encode_marked's ids, and the front answers most of them."""
    core = sp_cores[rel]
    rnd = random.Random(SEED * 17 + len(rel))
    front = 0
    for pool_name, pool in SP_POOLS.items():
        cache = PrefixCache(1 << 22, min_bytes=200)
        for opening in (" ", "\u2581", "  x", "a"):
            base = opening + "".join(rnd.choice(pool) for _ in range(rnd.randint(300, 700)))
            for _ in range(2):                         # the second sighting is kept (admission)
                assert cache.encode_marked(core, base) == core.encode_marked(base)
            for _ in range(25):
                v = _str_variant(rnd, base, pool)
                if "\ud800" in v:
                    with pytest.raises(UnicodeEncodeError):
                        cache.encode_marked(core, v)
                    continue
                assert cache.encode_marked(core, v) == core.encode_marked(v), (pool_name, base, v)
                if rnd.random() < 0.2:
                    base = v if len(v) > 600 else base     # a growing chat: the text extends the entry
        stats = cache.stats()
        assert stats["bytes_used"] <= stats["max_bytes"]
        front += stats["front_hits"]
    assert front > 60
    # One cache asked for both readings of the same strs: an entry made for one never answers the other.
    cache = PrefixCache(1 << 22, min_bytes=200)
    base = " " + "".join(rnd.choice(SP_POOLS["latin1"]) for _ in range(800))
    for i in range(12):
        t = base + " turn %d " % i
        assert cache.encode_marked(core, t) == core.encode_marked(t)
        assert cache.encode_str(core, t + "!") == core.encode_str(t + "!")


@pytest.mark.parametrize("rel", SP_FILES)
def test_marked_growing_chat_keeps_one_entry_with_a_node_per_block(sp_cores, rel):
    """A chat growing by a turn per request through encode_marked: the front keeps each request in place of the
    last (one entry, one node per block of its marked bytes), and every result is core.encode_marked's."""
    from _shared import corpus_text
    core = sp_cores[rel]
    text = corpus_text("en_dracula.txt", 30_000)
    cache = PrefixCache(1 << 24)
    chat = ""
    for turn in range(12):
        chat += ("\nuser: " if turn % 2 == 0 else "\nassistant: ") + text[turn * 900:(turn + 1) * 900]
        assert cache.encode_marked(core, chat) == core.encode_marked(chat), (rel, turn)
        st = cache.stats()
        if turn >= 2:
            assert st["entries"] == 1 and st["nodes"] == len(core.marked_bytes(chat)) // BLOCK, (rel, turn, st)
    assert cache.stats()["front_hits"] >= 9


@pytest.mark.parametrize("rel", SP_FILES)
def test_sentencepiece_files_use_the_cache_exactly(rel):
    """SentencePiece-style tokenizer.json files have the cache on by default; prompts sharing a long start reuse
    it, and every result equals HF tokenizers'."""
    tokenizers = pytest.importorskip("tokenizers")
    from _shared import vocab_path, corpus_text
    path = str(vocab_path(rel, "tokenizer.json"))
    enc = ctok.load(path)
    enc.set_prefix_cache(None)                   # a fresh cache: ctok.load's encodings are shared by other tests
    assert enc.prefix_cache_stats() is not None
    ref = tokenizers.Tokenizer.from_file(path)
    ref.encode_special_tokens = True             # "<s>" in the text is text, as encode_ordinary reads it
    rnd = random.Random(SEED + 5)
    system = corpus_text("en_dracula.txt", 5000) + "\n" + corpus_text("ja_wagahaiwa_nekodearu.txt", 1500)
    tails = [_sp_text(rnd, 30) for _ in range(10)] + [" ", "", "  ", "\u2581x", "\u2580x", f" question {rnd.random()}?"]
    for i, tail in enumerate(tails * 2):
        text = system[: len(system) - rnd.randint(0, 300)] + tail + str(i)
        assert enc.encode_ordinary(text) == ref.encode(text, add_special_tokens=False).ids, (rel, tail)
    stats = enc.prefix_cache_stats()
    assert stats["hits"] > 0 and stats["reused_bytes"] > 0
    enc.set_prefix_cache(0)
    assert enc.prefix_cache_stats() is None
    assert enc.encode_ordinary(system + tails[0]) == ref.encode(system + tails[0], add_special_tokens=False).ids
    enc.set_prefix_cache(None)                   # ctok.load's encodings are shared: back to the default


def test_marker_words_cut_waits_for_the_whole_marker():
    """A prompt that parts from a cached one inside the marker's last byte ("x\u2581" against "x\u2580", which
    share E2 96): the cached text had a piece boundary at the marker, the new one does not, and in this
    vocabulary "x\u2580" is a token, so a cut there would split what BPE merges.  (The real files have no token
    joining a letter to U+2580, which is why this needs its own vocabulary.)"""
    from ctok._encoder import MARKER_WORDS
    marker, block = "\u2581".encode(), "\u2580".encode()
    chars = [c.encode() for c in "abcdefghijklmnopqrstuvwxyz .,\n"] + [marker, block]
    tokens = list(chars)
    tid = {t: i for i, t in enumerate(tokens)}
    merges = []
    for left, right in ((b"x", block), (marker, b"a"), (marker + b"a", b"b")):
        tokens.append(left + right)
        merges.append((tid[left], tid[right], len(tokens) - 1))
        tid[left + right] = len(tokens) - 1
    core = CoreEncoder(tokens, merges, pretok_kind=MARKER_WORDS, char_level=True, ignore_merges=False,
                       marker=marker)
    filler = (marker + b"ab" + marker + b"the" + marker + b"x.") * (BLOCK // 4)
    # Cuts go at checkpoints only: the end of the encoder's batch of 16 pieces that crossed PREFIX_CK_EVERY (64)
    # bytes past the last one.  Heads of 0-47 more words put the marker after "x" at such an end in some of them.
    hits = 0
    for k in range(48):
        head = (marker + b"ab") * k
        cache = PrefixCache(1 << 22, min_bytes=0)
        a = filler + head + b"x" + marker + b"ab" + marker + b"y"
        assert cache.encode(core, a + b"!") == core.encode_ordinary(a + b"!")     # seen, then kept:
        assert cache.encode(core, a) == core.encode_ordinary(a)
        for tail in (block + b"y", block, block + marker + b"ab", marker[:2], marker[:1] + b"q"):
            b = filler + head + b"x" + tail
            assert cache.encode(core, b) == core.encode_ordinary(b), (head, tail)
            assert tid[b"x" + block] in core.encode_ordinary(b) or not tail.startswith(block)
        hits += cache.stats()["hits"]
    assert hits > 0


@pytest.mark.parametrize("rel", ["llama3-hf/tokenizer.json", "qwen3/tokenizer.json", "mistral-7b-v0.1/tokenizer.json",
                                 "llama2/tokenizer.json"])
def test_segments_between_special_tokens_use_the_cache_exactly(rel):
    """Text holding special tokens (a chat rendered by its template), some of them allowed.  With the others
    encodable as text (disallowed_special=()) it is encoded segment by segment by the Python pipeline, whose long
    segments go through the prefix cache (HFPipeline.segment_cache); by default (the others then absent, or it
    raises) it takes the core's split at every special token and its cache, as allowed_special="all" does
    (test_tokenizer_json_templates_split_at_specials_through_their_cache).  The ids stay HF's either way."""
    tokenizers = pytest.importorskip("tokenizers")
    from _shared import vocab_path, corpus_text
    path = str(vocab_path(*rel.split("/")))
    enc = ctok.load(path)
    enc.set_prefix_cache(None)                   # a fresh cache: ctok.load's encodings are shared by other tests
    ref = tokenizers.Tokenizer.from_file(path)
    # two of the file's special tokens, never all of them (all allowed is the core's split, whatever the policy)
    special = sorted(t.content for t in ref.get_added_tokens_decoder().values() if t.special)[:2]
    turns = [corpus_text("en_dracula.txt", 40_000)[1500 * i:1500 * (i + 1)] for i in range(12)]
    rnd = random.Random(SEED + 9)
    chat = ""
    allowed = set(special)
    assert allowed != set(enc.special_tokens)
    for i, turn in enumerate(turns):
        chat += rnd.choice(special) + turn + rnd.choice(["", " ", "\n", "  x"])
        want = ref.encode(chat, add_special_tokens=False).ids
        assert enc.encode(chat, allowed_special=allowed, disallowed_special=()) == want, (rel, i)
        assert enc.encode(chat, allowed_special=allowed) == want, (rel, i)
    stats = enc.prefix_cache_stats()
    assert stats["hits"] > 0 and stats["specials"]["hits"] > 0
    enc.set_prefix_cache(0)
    assert enc._hf.segment_cache is None
    assert enc.encode(chat, allowed_special=allowed, disallowed_special=()) == want
    assert enc.encode(chat, allowed_special=allowed) == want
    enc.set_prefix_cache(None)                   # ctok.load's encodings are shared: back to the default
    assert enc._hf.segment_cache is not None
