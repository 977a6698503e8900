"""The compiled core on its own: BPE merge strategies agree, the piece cache never changes results (also
under eviction pressure from many threads), the compiled vocabulary survives round trips and refuses
damaged buffers without crashing, and the SentencePiece word split is exact where it is used."""
import os
import random
import threading

import pytest
import tiktoken

import ctok
from ctok._bpe import _long_bucket_for_test, _long_store_for_test, _merge_for_test
from ctok._encoder import CoreEncoder
from ctok._piece_cache import _cache_for_test, _admit_for_test
from ctok._vocab import Vocab
from _shared import corpus_names, corpus_text, reference_encoding

SEED = int(os.environ.get("CTOK_SEED", "1234"))


@pytest.fixture(scope="module")
def o200k():
    return ctok.get_encoding("o200k_base")


@pytest.fixture(scope="module")
def o200k_ref():
    return reference_encoding("o200k_base").enc


def _random_pieces(rnd, n):
    alphabets = [b"ab ", b"aaaaab", "日本語のテキスト".encode(), bytes(range(256)), "ёжик в тумане".encode(),
                 b"    \n\n\t", "🙂👍🏽🇫🇷".encode()]
    out = []
    for _ in range(n):
        alpha = rnd.choice(alphabets)
        out.append(bytes(rnd.choice(alpha) for _ in range(rnd.randint(1, 300))))
    return out


def test_linear_and_tree_merges_equal_tiktoken(o200k, o200k_ref):
    rnd = random.Random(SEED)
    vocab = o200k._core.vocab
    for piece in _random_pieces(rnd, 1500):
        want = o200k_ref._encode_single_piece(piece)
        assert _merge_for_test(vocab, piece, False) == want
        assert _merge_for_test(vocab, piece, True) == want


@pytest.mark.parametrize("cache_bytes", [0, 2048 * 8, 1 << 20])
def test_piece_cache_never_changes_results(o200k, cache_bytes):
    core = CoreEncoder(pretok_kind=o200k._core.pretok_kind, vocab=o200k._core.vocab,
                       piece_cache_bytes=cache_bytes)
    plain = CoreEncoder(pretok_kind=o200k._core.pretok_kind, vocab=o200k._core.vocab, piece_cache_bytes=0)
    assert plain.piece_cache_bytes == 0
    for name in corpus_names():
        data = corpus_text(name, 60_000).encode("utf-8")
        want = plain.encode_ordinary(data)
        assert core.encode_ordinary(data) == want          # cold
        assert core.encode_ordinary(data) == want          # warm


def test_piece_cache_threads_under_eviction(o200k):
    # A tiny cache (16 entries) shared by 8 threads: constant overwrites, every result still exact.
    core = CoreEncoder(pretok_kind=o200k._core.pretok_kind, vocab=o200k._core.vocab,
                       piece_cache_bytes=16 * 128)
    assert core.piece_cache_bytes == 16 * 128
    plain = CoreEncoder(pretok_kind=o200k._core.pretok_kind, vocab=o200k._core.vocab, piece_cache_bytes=0)
    texts = [corpus_text(n, 30_000).encode("utf-8") for n in corpus_names()]
    want = [plain.encode_ordinary(t) for t in texts]
    errors = []

    def work(k):
        for i in range(3):
            for j, t in enumerate(texts):
                if core.encode_ordinary(t) != want[j]:
                    errors.append((k, j))

    _run_threads(work, 8)
    assert not errors


def _run_threads(work, k):
    """work(0) .. work(k - 1), each on its own thread, all started before any is joined."""
    threads = [threading.Thread(target=work, args=(i,)) for i in range(k)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def _distinct_words(rnd, n):
    # Random lowercase "words": almost none is a token, so each one is merged and stored in the piece cache.
    letters = "abcdefghijklmnopqrstuvwxyz"
    return " ".join("".join(rnd.choice(letters) for _ in range(rnd.randint(5, 9))) for _ in range(n))


def test_piece_cache_grows_within_its_budget_while_threads_encode(o200k):
    # A 14 MB budget starts with a 2 MB table (16,384 entries) and adds one of 4 MB, then one of 8 MB, each
    # once as many pieces were stored as the current table holds: never more than the budget, and every
    # result stays exact while threads race the switches (each looks up in whichever table it loaded).
    budget = 14 << 20
    core = CoreEncoder(pretok_kind=o200k._core.pretok_kind, vocab=o200k._core.vocab, piece_cache_bytes=budget)
    plain = CoreEncoder(pretok_kind=o200k._core.pretok_kind, vocab=o200k._core.vocab, piece_cache_bytes=0)
    assert core.piece_cache_bytes == 2 << 20
    rnd = random.Random(SEED)
    texts = [_distinct_words(rnd, 6_000).encode("ascii") for _ in range(24)]
    want = [plain.encode_ordinary(t) for t in texts]
    errors = []

    def work(k):
        for j in range(k, len(texts) + k):
            t = texts[j % len(texts)]
            if core.encode_ordinary(t) != want[j % len(texts)]:
                errors.append((k, j))

    _run_threads(work, 4)
    assert not errors
    assert core.piece_cache_bytes == budget                 # grew twice: 2 + 4 + 8 MB, and no further
    # The replaced tables gave their pages back (a store racing a switch may map one again); the current one
    # is all in memory.
    tables = core._piece_cache_tables()
    assert [size for size, _ in tables] == [8 << 20, 4 << 20, 2 << 20]
    assert tables[0][1] == 8 << 20
    assert all(resident <= 64 << 10 for _, resident in tables[1:]), tables
    # After the growth the stored pieces were carried over: encoding the same texts again stays exact.
    assert [core.encode_ordinary(t) for t in texts] == want


def test_piece_cache_does_not_grow_for_pieces_that_never_come_back(o200k):
    # Stores of pieces seen once bring no hits: the table stays at its first size however many are stored
    # (here three times its 16,384 entries), and results stay exact.  The same words encoded again and again
    # are hits, and then it grows.
    core = CoreEncoder(pretok_kind=o200k._core.pretok_kind, vocab=o200k._core.vocab, piece_cache_bytes=14 << 20)
    plain = CoreEncoder(pretok_kind=o200k._core.pretok_kind, vocab=o200k._core.vocab, piece_cache_bytes=0)
    rnd = random.Random(SEED + 2)
    texts = [_distinct_words(rnd, 6_000).encode("ascii") for _ in range(8)]
    for t in texts:
        assert core.encode_ordinary(t) == plain.encode_ordinary(t)
    assert core.piece_cache_bytes == 2 << 20
    for _ in range(4):
        for t in texts[:3]:
            assert core.encode_ordinary(t) == plain.encode_ordinary(t)
    assert core.piece_cache_bytes > 2 << 20


def test_piece_cache_admits_a_piece_from_its_second_meeting():
    # cache_admit answers False the first time a hash is met (the piece is then merged without a lookup and not
    # stored) and True from the second time on, each hash on its own.  Hash (k << 1) | 1 takes bit k.
    hashes = [(k << 1) | 1 for k in range(100)]
    answers, bits = _admit_for_test(2 << 20, hashes + hashes[::-1])
    assert answers == [False] * 100 + [True] * 100
    assert bits == 1 << 17                                 # 8 bits per entry of a 2 MB budget's 16,384
    assert _admit_for_test(32 << 20, [])[1] == 1 << 20     # at most 128 KB
    # A 16-entry budget gets the smallest filter, 1,024 bits, cleared when its 129th bit is set: a hash marked
    # before the clear reads as new again, one marked after it as met.
    hashes = [(k << 1) | 1 for k in range(200)]
    answers, bits = _admit_for_test(16 * 128, hashes + [hashes[0], hashes[199]])
    assert bits == 1024
    assert answers == [False] * 200 + [False, True]


def test_piece_cache_never_grows_past_a_small_budget(o200k):
    core = CoreEncoder(pretok_kind=o200k._core.pretok_kind, vocab=o200k._core.vocab, piece_cache_bytes=64 * 128)
    rnd = random.Random(SEED + 1)
    for _ in range(3):
        core.encode_ordinary(_distinct_words(rnd, 2_000).encode("ascii"))
    assert core.piece_cache_bytes == 64 * 128


def _aimed(first, second, tag, entries=64):
    # A piece-cache hash whose first pair starts at entry `first` and second pair at entry `second` (even
    # numbers below the table's size, `entries`): the first pair's index is taken from bits 1 and up, the
    # second's from the high half, bit 0 is always set.  tag (below 2 ** (31 - entries.bit_length())) tells
    # equal aims apart, in the bits above the index: an entry of the same hash is the piece's own place, taken over.
    return (second << 32) | (tag << (entries.bit_length() + 1)) | (first << 1) | 1


def test_piece_cache_grows_when_its_stores_replace_pieces():
    # A 2 MB first table (16,384 entries, judged in windows of 2,048 stores) grows after a window in which one
    # store in two replaced another piece, not for stores that find room: filling every entry (two pieces per
    # pair) leaves it at its size; one window more of stores aimed at full pairs doubles it.
    fill = [(b"fill%d" % k, _aimed(2 * (k // 2), 2 * (k // 2), k, 16384), [k % 1000 + 1]) for k in range(16384)]
    crowd = [(b"crowd%d" % j, _aimed(2 * j, 2 * (j + 4096), 20000 + j, 16384), [7]) for j in range(2048)]
    found, size = _cache_for_test(8 << 20, fill, [(fill[5][0], fill[5][1])])
    assert size == 16384 and found == [fill[5][2]]
    found, size = _cache_for_test(8 << 20, fill + crowd, [(crowd[9][0], crowd[9][1])])
    assert size == 32768 and found == [crowd[9][2]]    # grown, the live entries carried over


def test_piece_cache_keeps_pieces_of_a_full_pair_in_their_second_pair():
    # A 16-entry table.  Five pieces share their first pair: two fit there, the others go to their second
    # pairs (two of them share one), and all five are found; without the second choice three would be lost.
    pieces = [(f"piece{i}".encode(), _aimed(0, second, i), [100 + i, 7]) for i, second in enumerate([2, 2, 2, 2, 4])]
    for grow_first in (False, True):            # a growth copies them into a table twice the size, still found
        found, size = _cache_for_test(16 * 128, pieces, [(p, h) for p, h, _ in pieces], grow_first)
        assert size == (32 if grow_first else 16)
        assert found == [ids for _, _, ids in pieces]
    # A sixth piece whose first and second pairs are both full takes an entry of its first pair: one of the
    # two pieces there is lost, the pieces in second pairs are not.
    extra = (b"piece5", _aimed(0, 2, 5), [99])
    found, _ = _cache_for_test(16 * 128, pieces + [extra], [(p, h) for p, h, _ in pieces + [extra]])
    assert found[5] == [99]
    assert found[2:5] == [ids for _, _, ids in pieces[2:5]]
    assert sorted(x is None for x in found[:2]) == [False, True]
    # The bytes decide, not the hash: a piece never stored is a miss whatever its hash.
    found, _ = _cache_for_test(16 * 128, pieces, [(b"other", pieces[3][1]), (b"piece3", pieces[3][1])])
    assert found == [None, [103, 7]]


def test_compiled_vocabulary_round_trip(o200k):
    data = o200k._core.vocab.to_bytes()
    v = Vocab.from_bytes(data)
    assert v.to_bytes() == data
    core = CoreEncoder(pretok_kind=o200k._core.pretok_kind, vocab=v)
    text = corpus_text(corpus_names()[0], 50_000).encode("utf-8")
    assert core.encode_ordinary(text) == o200k._core.encode_ordinary(text)


def test_compiled_vocabulary_damage_never_crashes():
    # A small vocabulary keeps this fast; every damaged buffer must raise ValueError or load tables
    # whose every index is in bounds (then encoding still runs: blob bytes may differ, ids stay valid).
    tb = [bytes([i]) for i in range(256)] + [b"ab", b"abc", b"hello", b" world", b"\xe3\x81\x82"]
    good = Vocab(tb).to_bytes()
    rnd = random.Random(SEED)
    cuts = [0, 1, 63, 64, 100, len(good) - 1, len(good) + 8]
    for n in cuts:
        with pytest.raises(ValueError):
            Vocab.from_bytes((good + b"\0" * 16)[:n])
    for _ in range(400):
        bad = bytearray(good)
        for _ in range(rnd.randint(1, 8)):
            bad[rnd.randrange(len(bad))] = rnd.randrange(256)
        try:
            v = Vocab.from_bytes(bytes(bad))
        except ValueError:
            continue
        core = CoreEncoder(pretok_kind=0, vocab=v, piece_cache_bytes=0)
        for piece in (b"hello world", b"abcabc", "あいう".encode(), bytes(range(256))):
            ids = core.encode_ordinary(piece)
            assert all(0 <= i < v.size for i in ids)


def test_compiled_cache_file_rebuilt_when_stale_or_damaged(tmp_path, monkeypatch):
    from ctok import cache
    monkeypatch.setenv("CTOK_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "ranks.tiktoken"
    import base64
    lines = [base64.b64encode(bytes([i])) + b" %d" % i for i in range(256)]
    lines += [base64.b64encode(b"ab") + b" 256", base64.b64encode(b"abc") + b" 257"]
    src.write_bytes(b"\n".join(lines) + b"\n")
    args = ["tiktoken", r"\S+|\s+", None]
    enc = ctok.load(str(src), pattern=r"\S+|\s+")
    assert enc.encode("abc ab") == [257, 32, 256]
    files = list((tmp_path / "cache").iterdir())
    assert len(files) == 1
    assert cache.load_compiled(str(src), args) is not None
    # Damage the tables: the checksum refuses it, and the next load rebuilds from the source.
    raw = bytearray(files[0].read_bytes())
    raw[-100] ^= 0xFF
    files[0].write_bytes(bytes(raw))
    assert cache.load_compiled(str(src), args) is None
    # A changed source (different size/mtime) makes the entry stale.
    ctok._cache.clear()
    src.write_bytes(b"\n".join(lines[:257]) + b"\n")
    enc2 = ctok.load(str(src), pattern=r"\S+|\s+")
    assert enc2.encode("abc ab") == [256, 99, 32, 256]
    assert cache.load_compiled(str(src), args) is not None


def test_compiled_cache_folder_stays_bounded(tmp_path, monkeypatch):
    # Rank files in temporary folders come and go: their cache files must not pile up, and the folder
    # keeps to CTOK_CACHE_MAX_BYTES by dropping the least recently used files.
    import base64
    import os
    from ctok import cache
    args = ["tiktoken", r"\S+|\s+", None]
    folder = tmp_path / "cache"
    monkeypatch.setenv("CTOK_CACHE_DIR", str(folder))
    lines = [base64.b64encode(bytes([i])) + b" %d" % i for i in range(256)]
    srcs = []
    for k in range(4):
        src = tmp_path / f"ranks{k}.tiktoken"
        src.write_bytes(b"\n".join(lines + [base64.b64encode(b"ab" * (k + 1)) + b" 256"]) + b"\n")
        srcs.append(src)
    ctok.load(str(srcs[0]), pattern=r"\S+|\s+")
    ctok.load(str(srcs[1]), pattern=r"\S+|\s+")
    assert len(list(folder.iterdir())) == 2
    srcs[0].unlink()                                  # its cache file is dropped at the next save
    ctok.load(str(srcs[2]), pattern=r"\S+|\s+")
    assert len(list(folder.iterdir())) == 2
    one = max(f.stat().st_size for f in folder.iterdir())
    monkeypatch.setenv("CTOK_CACHE_MAX_BYTES", str(one + one // 2))   # room for one file only
    enc = ctok.load(str(srcs[3]), pattern=r"\S+|\s+")
    assert [f.name for f in folder.iterdir()] == [os.path.basename(cache.cache_path(str(srcs[3]), args))]
    assert enc.encode("abababab") == [256]


@pytest.mark.parametrize("folder", ["mistral-7b-v0.1", "mistral-7b-v0.3", "llama2"])
def test_marker_word_split_is_safe_on_sentencepiece_files(folder):
    from ctok._encoder import marker_split_is_safe
    from _shared import vocab_path
    import json
    vocab = json.load(open(vocab_path(folder, "tokenizer.json"), encoding="utf-8"))["model"]["vocab"]
    assert marker_split_is_safe([t.encode("utf-8") for t in vocab], "▁".encode())
    assert not marker_split_is_safe([b"a", "a▁".encode()], "▁".encode())
    assert not marker_split_is_safe([b"a", "\xe2▁".encode("utf-8", "surrogatepass")], "▁".encode())


def test_long_pieces_chunked_merge_equals_tiktoken(o200k, o200k_ref):
    # Pieces over LONG_PIECE bytes are merged chunk by chunk with seam checks: compare with tiktoken on
    # runs, periodic and random letters, random bytes, CJK, emoji and digit strings of many lengths.
    rnd = random.Random(SEED)
    makers = [
        lambda n: b"a" * n, lambda n: b" " * n, lambda n: b"ab" * (n // 2), lambda n: b"\n" * n,
        lambda n: bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(n)),
        lambda n: bytes(rnd.choice(b"ab") for _ in range(n)),
        lambda n: bytes(rnd.randrange(256) for _ in range(n)),
        lambda n: "".join(rnd.choice("日本語のテキスト漢字") for _ in range(n // 3)).encode(),
        lambda n: ("🙂" * (n // 4)).encode(), lambda n: b"7" * n, lambda n: b"  \t" * (n // 3),
    ]
    for make in makers:
        for n in (257, 300, 511, 1000, 2049, 4100):
            piece = make(n)
            assert o200k._core.encode_piece(piece) == o200k_ref._encode_single_piece(piece), (piece[:40], n)


def test_repeated_long_pieces_equal_tiktoken(o200k, o200k_ref):
    # Pieces too long for the piece cache are remembered one at a time (the last long piece): runs of
    # equal and of different lengths, spaces, dashes and letters, interleaved, must all encode as tiktoken.
    rnd = random.Random(SEED)
    parts = []
    for _ in range(400):
        kind = rnd.choice([" ", "-", "=", "ab", "\u3000"])
        parts.append("x" + kind * rnd.choice([49, 60, 60, 60, 99, 130, 2000]))
    text = "".join(parts)
    assert o200k.encode_ordinary(text) == o200k_ref.encode_ordinary(text)
    for p in parts[:60]:
        assert o200k.encode_ordinary(p) == o200k_ref.encode_ordinary(p)


def test_compiled_cache_keeps_the_stamp_from_before_parsing(tmp_path, monkeypatch):
    # A source rewritten while it was parsed must not be cached under its new stamp: the entry saved with
    # the stamp taken before the rewrite is stale for the rewritten file.
    import base64
    import time
    from ctok import cache
    monkeypatch.setenv("CTOK_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "ranks.tiktoken"
    lines = [base64.b64encode(bytes([i])) + b" %d" % i for i in range(256)]
    src.write_bytes(b"\n".join(lines) + b"\n")
    args = ["tiktoken", r"\S+|\s+", None]
    before = cache.source_stamp(str(src))
    enc = ctok.load(str(src), pattern=r"\S+|\s+")
    time.sleep(0.01)
    src.write_bytes(b"\n".join(lines + [base64.b64encode(b"ab") + b" 256"]) + b"\n")    # the rewrite
    meta = {k: None for k in cache.META_KEYS}
    cache.save_compiled(str(src), args, meta, enc._core.vocab)                  # stamped now: a valid entry
    assert cache.load_compiled(str(src), args) is not None
    cache.save_compiled(str(src), args, meta, enc._core.vocab, stamp=before)     # stamped before the rewrite
    assert cache.load_compiled(str(src), args) is None


def test_tokens_of_9_to_16_bytes_match_on_every_byte():
    # Such a token is found by its slot's head (bytes 0-7) and tail (the last 8).  Most tokens here share
    # one head and one length, so a lookup probing past its slot meets many slots whose head and length
    # match: only the tail tells them apart.  Pieces differing in any later byte, or a byte shorter or
    # longer, are other tokens or none.  Checked on the built tables and after the compiled round trip.
    head = b" interna"
    upper = range(65, 91)
    tokens = [bytes([b]) for b in range(256)]
    tokens += [head + bytes([x, y]) for x in upper for y in upper]
    tokens += [head + bytes(range(65, 65 + ln - 8)) for ln in range(11, 17)] + [b"\x00" * 16]
    index = {tok: i for i, tok in enumerate(tokens)}
    built = Vocab(tokens, None)
    for vocab in (built, Vocab.from_bytes(built.to_bytes())):
        for tid, tok in enumerate(tokens):
            assert vocab.token_id(tok) == tid
        for x in range(256):
            for y in (0x61, 0x7A, 0x41, 0x5A, 0xFF):
                piece = head + bytes([x, y])
                assert vocab.token_id(piece) == index.get(piece, -1), piece
        for tok in tokens[256:]:
            for k in range(8, len(tok)):
                other = tok[:k] + bytes([tok[k] ^ 0x20]) + tok[k + 1:]
                assert vocab.token_id(other) == index.get(other, -1), (tok, k)
            assert vocab.token_id(tok[:-1]) == index.get(tok[:-1], -1)
            assert vocab.token_id(tok + b"Z") == -1


def test_pieces_of_9_to_16_bytes_encode_like_tiktoken_when_heads_collide(o200k, o200k_ref):
    # The same vocabulary as a rank file, encoded with o200k's pattern by the encoder's inline lookup
    # (piece cache off, so every piece is looked up) and by tiktoken over the same ranks.
    head = b" interna"
    upper, lower = range(65, 91), range(97, 123)
    tokens = [bytes([b]) for b in range(256)] + [head + bytes([x, y]) for x in upper for y in upper]
    ref = tiktoken.Encoding("heads", pat_str=o200k_ref._pat_str,
                            mergeable_ranks={tok: i for i, tok in enumerate(tokens)}, special_tokens={})
    core = CoreEncoder(tokens, None, pretok_kind=o200k._core.pretok_kind, piece_cache_bytes=0)
    text = b"".join(head + bytes([x, y]) for x in (*upper, *lower) for y in (*lower, *upper))
    assert core.encode_ordinary(text) == ref.encode_ordinary(text.decode("ascii"))


def test_long_tokens_and_near_misses_encode_like_tiktoken(o200k, o200k_ref):
    # The encoder answers pieces of up to 16 bytes inline from the token table: every o200k token of 9-16
    # bytes that is valid UTF-8, alone, with its last or ninth byte changed, and cut by one byte.
    rnd = random.Random(SEED)
    texts = []
    for tid in range(o200k_ref.n_vocab):
        try:
            raw = o200k_ref.decode_single_token_bytes(tid)
        except KeyError:
            continue
        if 9 <= len(raw) <= 16:
            for variant in (raw, raw[:-1] + bytes([raw[-1] ^ 1]), raw[:8] + bytes([raw[8] ^ 1]) + raw[9:],
                            raw[:-1]):
                try:
                    texts.append(variant.decode("utf-8"))
                except UnicodeDecodeError:
                    pass
    rnd.shuffle(texts)
    for text in texts[:20000]:
        assert o200k.encode_ordinary(text) == o200k_ref.encode_ordinary(text), text


def test_repeated_long_pieces_encode_like_tiktoken(o200k, o200k_ref):
    # Pieces too long for the piece cache are kept per scratch from their second miss (LongStore): separator
    # and rule lines that alternate, pieces of equal length and different bytes (which may share an entry), the
    # limits 48/49 and 256/257, and runs of other scripts.
    rnd = random.Random(SEED)
    lines = []
    for ch in "#=-+*~_.":
        for n in (47, 48, 49, 50, 63, 64, 80, 128, 255, 256, 257, 300):
            lines.append(ch * n + "\n")
            lines.append(" " + ch * (n - 2) + "+\n")
    lines += ["+" + "-" * 40 + "+" + "-" * 60 + "+\n", "+" + "-" * 60 + "+" + "-" * 40 + "+\n",
              "日本語" * 20 + "\n", "ёж" * 40 + "\n"]
    text = "".join(rnd.choice(lines) for _ in range(3000))
    for _ in range(2):                                  # the second call meets the kept entries
        assert o200k.encode_ordinary(text) == o200k_ref.encode_ordinary(text)
    parts = [text[i:i + 5000] for i in range(0, len(text), 5000)]
    assert o200k.encode_ordinary_batch(parts, num_threads=2) == o200k_ref.encode_ordinary_batch(parts)


def _long_runs(rnd, count, length):
    # Distinct pieces of `length` bytes that no split pattern cuts: lower-case letters, and runs of Thai (no
    # spaces, about a token per letter or two) and of Han characters.
    out = []
    thai = [chr(c) for c in range(0x0E01, 0x0E2F)]
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    for i in range(count):
        kind = i % 3
        if kind == 0:
            out.append("".join(rnd.choice("etaoinshrdlu") for _ in range(length)))
        elif kind == 1:
            out.append("".join(rnd.choice(thai) for _ in range(length // 3)))
        else:
            out.append("".join(rnd.choice(han) for _ in range(length // 3)))
    return out


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_long_piece_store_across_calls_and_ring_wraps(name):
    # The store keeps long pieces (and pieces of more ids than the piece cache holds) from their second miss,
    # in a ring of 4 MB: met three times in a cycle longer than the ring, the third meeting finds some records
    # whole and others overwritten (those must be merged again, never read stale).  Each call is one line of
    # pieces, as a server meets them; every result must be tiktoken's.
    enc = ctok.get_encoding(name)
    ref = reference_encoding(name).enc
    rnd = random.Random(SEED + 7)
    runs = _long_runs(rnd, 2400, 600) + _long_runs(rnd, 600, 45) + _long_runs(rnd, 300, 3000)
    want = {r: ref.encode_ordinary(r) for r in runs}
    enc.set_prefix_cache(0)
    try:
        for _ in range(3):
            for r in runs:
                assert enc.encode_ordinary(r) == want[r], r[:40]
        lines = [" ".join(rnd.sample(runs[:60], 5)) for _ in range(200)]      # several long pieces a call
        for line in lines + lines:
            assert enc.encode_ordinary(line) == ref.encode_ordinary(line)
    finally:
        enc.set_prefix_cache(None)


def test_long_piece_store_answers_from_the_third_meeting(o200k_ref):
    # Kept at the second miss, a long piece is answered at its third meeting (all fit in the ring here), and
    # a piece of at most 48 bytes only when it has more ids than the piece cache holds (15 Thai letters).
    vocab = ctok.get_encoding("o200k_base")._core.vocab
    rnd = random.Random(SEED + 8)
    runs = [r.encode() for r in _long_runs(rnd, 300, 600)]
    ids, hits = _long_store_for_test(vocab, runs, 3)
    assert ids == [o200k_ref.encode_ordinary(r.decode()) for r in runs]
    assert hits >= 0.95 * len(runs)                     # all but those whose index entry another one took
    short = [r.encode() for r in _long_runs(rnd, 300, 45)]
    want = [o200k_ref.encode_ordinary(r.decode()) for r in short]
    ids, hits = _long_store_for_test(vocab, short, 3)
    assert ids == want
    many = sum(len(w) > 14 for w in want)
    assert many > 0 and many >= hits >= 0.95 * many


def test_long_piece_store_keeps_pieces_that_share_a_bucket(o200k_ref):
    # Two long pieces whose hashes pick the same index bucket, met in turn: both are answered at their third
    # meeting (direct-mapped, they took turns noting their miss in their one entry, and neither was ever kept).
    vocab = ctok.get_encoding("o200k_base")._core.vocab
    rnd = random.Random(SEED + 10)
    seen, pair = {}, None
    while pair is None:
        piece = "".join(rnd.choice("etaoinshrdlu") for _ in range(600)).encode()
        bucket = _long_bucket_for_test(piece)
        if bucket in seen and seen[bucket] != piece:
            pair = [seen[bucket], piece]
        seen[bucket] = piece
    ids, hits = _long_store_for_test(vocab, pair, 3)
    assert ids == [o200k_ref.encode_ordinary(p.decode()) for p in pair]
    assert hits == 2


def test_long_piece_store_ring_overwritten(o200k_ref):
    # More records than the 4 MB ring holds, met in a cycle three times: by a piece's third meeting its record
    # has been overwritten (its index entry still points there), so it must be merged again, never read; the
    # last pieces of the cycle, met once more right after, are answered from their fresh records.
    vocab = ctok.get_encoding("o200k_base")._core.vocab
    rnd = random.Random(SEED + 9)
    runs = [r.encode() for r in _long_runs(rnd, 4000, 600)]
    want = {r: o200k_ref.encode_ordinary(r.decode()) for r in runs}
    seq = runs * 3 + runs[-200:]
    ids, hits = _long_store_for_test(vocab, seq, 1)
    assert ids == [want[r] for r in seq]
    assert 150 <= hits <= 200                   # all but those whose index entry another piece took
