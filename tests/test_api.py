"""The public API beyond single-text exactness (issue 2): batches, flat arrays, segments, streaming, pickling,
threads. Expected values come from tiktoken (the reference), never from ctok itself."""
import pickle
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from _shared import FAMILY_BY_ID, adversarial_dict, assert_same_ids, corpus_names, corpus_text, reference_encoding

ctok = pytest.importorskip("ctok")
np = pytest.importorskip("numpy")
pytest.importorskip("tiktoken")


def sample_texts():
    texts = [corpus_text(n, 3_000) for n in corpus_names()]
    texts += [t for n, t in adversarial_dict().items() if not n.startswith("run-")][:60]
    texts += ["", " ", "hello world", "a" * 5000]
    return texts


# --------------------------------------------------------------------------------------------------------------
# list / get


def test_list_encodings():
    names = ctok.list_encodings()
    assert isinstance(names, list)
    assert all(isinstance(n, str) for n in names)
    assert "o200k_base" in names and "cl100k_base" in names
    assert len(set(names)) == len(names)


def test_get_encoding_unknown_name():
    with pytest.raises((ValueError, KeyError)):
        ctok.get_encoding("no_such_encoding_xyz")


def test_get_encoding_basic(o200k, o200k_ref):
    assert o200k.name == "o200k_base"
    assert o200k.encode("hello world") == o200k_ref.encode("hello world")
    assert o200k.decode(o200k_ref.encode("hello world")) == "hello world"
    assert isinstance(o200k.pretokenizer, str) and o200k.pretokenizer


def test_load_accepts_pathlike():
    family = FAMILY_BY_ID["cl100k_base"]
    ref = reference_encoding(family.folder)
    enc = ctok.load(family.source_file())  # a pathlib.Path
    assert enc.encode_ordinary("Path objects work too.") == ref.encode_ordinary("Path objects work too.")


def test_encode_returns_list_of_int(o200k):
    ids = o200k.encode("hello world")
    assert type(ids) is list and all(type(i) is int for i in ids)
    ids = o200k.encode_ordinary("hello world")
    assert type(ids) is list and all(type(i) is int for i in ids)


# --------------------------------------------------------------------------------------------------------------
# batches


@pytest.mark.parametrize("num_threads", [None, 1, 2, 4, 16])
def test_encode_batch(o200k, o200k_ref, num_threads):
    texts = sample_texts()
    got = o200k.encode_batch(texts, num_threads=num_threads)
    assert len(got) == len(texts)
    safe = [t for t in texts if "<|endoftext|>" not in t and "<|endofprompt|>" not in t]
    got = o200k.encode_batch(safe, num_threads=num_threads)
    for t, g in zip(safe, got):
        assert_same_ids(g, o200k_ref.encode(t), t)
    got = o200k.encode_ordinary_batch(texts, num_threads=num_threads)
    assert len(got) == len(texts)
    for t, g in zip(texts, got):
        assert_same_ids(g, o200k_ref.encode_ordinary(t), t)
    got = o200k.encode_batch(texts, num_threads=num_threads, allowed_special="all")
    for t, g in zip(texts, got):
        assert_same_ids(g, o200k_ref.encode(t, allowed_special="all"), t)


class _Str(str):
    pass


@pytest.mark.parametrize("num_threads", [1, 2])
def test_batch_texts_of_every_str_kind(o200k, o200k_ref, num_threads):
    """The batch loop makes each str's UTF-8 itself: ASCII, 1-, 2- and 4-byte kinds, lone surrogates (U+FFFD, as
    tiktoken), str subclasses, long texts; the strs are not given CPython's UTF-8 copy; special-token text
    is refused as by encode; other types are a TypeError."""
    import sys
    texts = ["plain ascii", "caf\u00e9 cr\u00e8me", "\u0416\u0436 \u4e2d\u6587 <b>", "emoji \U0001f642\U0001f44d\U0001f3fd",
             "lone \ud800 surrogate", "pair \ud83d\ude42 of surrogates", _Str("a subclass"), "",
             "x < y and y > z", ("long \u00e9 text " * 3000), "\u0301 mark first"]
    # the reference gets equal copies: tiktoken itself gives the strs it is handed CPython's UTF-8 copy
    want = [o200k_ref.encode_ordinary("".join(list(t))) for t in texts]
    sizes = [sys.getsizeof(t) for t in texts]
    assert o200k.encode_ordinary_batch(texts, num_threads=num_threads) == want
    assert o200k.encode_batch(texts, num_threads=num_threads) == want
    ids, offsets = o200k.encode_batch_flat(texts, num_threads=num_threads)
    assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == want
    assert [sys.getsizeof(t) for t in texts] == sizes
    with pytest.raises(ValueError, match="disallowed special"):
        o200k.encode_batch(texts + ["a <|endoftext|> b"], num_threads=num_threads)
    with pytest.raises(ValueError, match="disallowed special"):
        o200k.encode_batch_flat(["fine", "<|endofprompt|>"], num_threads=num_threads)
    assert o200k.encode_batch(["<|endoftext|>"], disallowed_special=()) == [o200k_ref.encode_ordinary("<|endoftext|>")]
    for bad in ([b"bytes"], ["ok", 3], [None]):
        with pytest.raises(TypeError):
            o200k.encode_ordinary_batch(bad, num_threads=num_threads)
        with pytest.raises(TypeError):
            o200k.encode_batch_flat(bad, num_threads=num_threads)


def test_encode_batch_empty(o200k):
    assert o200k.encode_batch([]) == []
    assert o200k.encode_ordinary_batch([]) == []
    assert o200k.encode_batch([], num_threads=4) == []
    assert o200k.encode_batch([""]) == [[]]
    assert o200k.decode_batch([]) == []


def test_encode_batch_generator_and_tuple(o200k, o200k_ref):
    texts = ("alpha beta", "gamma", "")
    exp = [o200k_ref.encode(t) for t in texts]
    assert o200k.encode_batch(texts) == exp
    assert o200k.encode_ordinary_batch(t for t in texts) == exp


def test_encode_batch_disallowed_special_raises(o200k):
    texts = ["fine"] * 20 + ["bad <|endoftext|>"]
    with pytest.raises(ValueError):
        o200k.encode_batch(texts, num_threads=2)
    with pytest.raises(ValueError):
        o200k.encode_batch_flat(texts, num_threads=2)


def _raises(fn):
    try:
        fn()
    except ValueError:
        return True
    return False


def _batches_raise_as_reference(enc, ref, parts, disallowed_sets, seed, rounds):
    # Random batches of `parts` run together: each batch call raises exactly when `ref` raises for one of the
    # texts, and gives its ids when it does not.
    rnd = random.Random(seed)
    for _ in range(rounds):
        texts = ["".join(rnd.choice(parts) for _ in range(rnd.randint(0, 5))) for _ in range(rnd.randint(1, 6))]
        for disallowed in disallowed_sets:
            want = any(_raises(lambda t=t: ref.encode(t, disallowed_special=disallowed)) for t in texts)
            for fn in (enc.encode_batch, enc.encode_batch_flat):
                assert _raises(lambda: fn(texts, disallowed_special=disallowed)) == want, (texts, disallowed)
            if not want:
                assert enc.encode_batch(texts, disallowed_special=disallowed) == [
                    ref.encode(t, disallowed_special=disallowed) for t in texts]


def _o200k_with_specials(o200k_ref, specials, name):
    # ctok and tiktoken encodings of o200k's ranks with other special tokens.
    import tiktoken
    base = o200k_ref.enc
    enc = ctok.load(str(FAMILY_BY_ID["o200k_base"].source_file()), pattern=base._pat_str, special_tokens=specials)
    ref = tiktoken.Encoding(name, pat_str=base._pat_str, mergeable_ranks=base._mergeable_ranks,
                            special_tokens=specials)
    return enc, ref


def test_encode_batch_disallowed_special_agrees_with_reference(o200k, o200k_ref):
    # The batch check runs on the encoding threads (TokenScan.needles: a name's first two characters in each
    # text's UTF-8), then a regex over the texts they report: a batch must raise exactly when tiktoken raises
    # for one of its texts, special-token look-alikes included.
    parts = ["<|endoftext|>", "<|endofprompt|>", "<|endoftext", "<|", "<", "|>", "endoftext", "<<|endoftext|>",
             "<|endoftext|", "x", " ", "\n", "é", "<|fim_prefix|>"]
    _batches_raise_as_reference(o200k, o200k_ref, parts, ("all", {"<|endofprompt|>"}, ()), 7, 300)


def test_encode_batch_disallowed_non_ascii_names_agree_with_reference(o200k_ref):
    # Names that start with non-ASCII characters (DeepSeek-V3's "<\uff5c"), or with a character alone, are found
    # by the threads' scan as tiktoken finds them.
    specials = {"<\uff5cbegin\u2581of\u2581sentence\uff5c>": 200_100, "\u00abquote\u00bb": 200_101, "\u65e5": 200_102,
                "\U0001F642x": 200_103}
    enc, ref = _o200k_with_specials(o200k_ref, specials, "non-ascii")
    parts = list(specials) + ["<\uff5c", "\uff5c>", "<", "\u00ab", "quote", "\u00bb", "\u65e5\u672c", "\U0001F642",
                              "x", " ", "\u0434", "\u00e9", "plain text "]
    _batches_raise_as_reference(enc, ref, parts, ("all", {"\u00abquote\u00bb"}, ()), 11, 200)


def test_encode_batch_disallowed_many_first_characters(o200k_ref):
    # Special tokens with more distinct first characters than the native scan takes: every text is searched.
    specials = {f"{c}special{c}": 200_100 + i for i, c in enumerate("abcdefghijkl")}
    enc, ref = _o200k_with_specials(o200k_ref, specials, "many")
    for texts in (["plain"] * 5, ["plain", "has kspecialk inside"], ["lspecial", "specialm"]):
        want = any(_raises(lambda t=t: ref.encode(t)) for t in texts)
        assert _raises(lambda: enc.encode_batch(texts)) == want
        assert _raises(lambda: enc.encode_batch_flat(texts)) == want


@pytest.mark.parametrize("num_threads", [None, 1, 3])
def test_encode_batch_flat(o200k, o200k_ref, num_threads):
    texts = [t for t in sample_texts() if "<|endoftext|>" not in t and "<|endofprompt|>" not in t]
    ids, offsets = o200k.encode_batch_flat(texts, num_threads=num_threads)
    assert isinstance(ids, np.ndarray) and ids.dtype == np.uint32 and ids.ndim == 1
    assert isinstance(offsets, np.ndarray) and offsets.dtype == np.int64 and offsets.ndim == 1
    assert len(offsets) == len(texts) + 1
    assert offsets[0] == 0 and offsets[-1] == len(ids)
    assert (np.diff(offsets) >= 0).all()
    for i, t in enumerate(texts):
        assert_same_ids(ids[offsets[i]:offsets[i + 1]].tolist(), o200k_ref.encode(t), t)


def test_encode_batch_flat_special_and_empty(o200k, o200k_ref):
    texts = ["a<|endoftext|>b", "", "<|endofprompt|>"]
    ids, offsets = o200k.encode_batch_flat(texts, allowed_special="all")
    assert offsets.tolist()[0] == 0 and len(offsets) == 4
    for i, t in enumerate(texts):
        assert ids[offsets[i]:offsets[i + 1]].tolist() == o200k_ref.encode(t, allowed_special="all")
    ids, offsets = o200k.encode_batch_flat([])
    assert ids.dtype == np.uint32 and len(ids) == 0
    assert offsets.dtype == np.int64 and offsets.tolist() == [0]
    ids, offsets = o200k.encode_batch_flat(["", ""])
    assert len(ids) == 0 and offsets.tolist() == [0, 0, 0]


def test_decode_batch(o200k, o200k_ref):
    texts = sample_texts()
    batch = [o200k_ref.encode_ordinary(t) for t in texts]
    got = o200k.decode_batch(batch)
    assert got == [o200k_ref.decode(b) for b in batch]
    assert o200k.decode_batch([[], [0]]) == ["", o200k_ref.decode([0])]


def tiktoken_of(ref):
    assert ref.offset == 0              # ids are tiktoken's own: its methods answer directly
    return ref.enc


POLICIES = [{}, {"allowed_special": "all"}, {"allowed_special": {"<|endoftext|>"}},
            {"allowed_special": frozenset()},
            {"disallowed_special": ()}, {"disallowed_special": []}, {"disallowed_special": set()},
            {"disallowed_special": {"ell"}}, {"disallowed_special": ("hello",)},
            {"allowed_special": "all", "disallowed_special": ()}, {"allowed_special": {"not a special token"}},
            {"disallowed_special": "all"}, {"allowed_special": set(), "disallowed_special": {"<|endoftext|>"}}]


@pytest.mark.parametrize("name", ["o200k", "cl100k"])
def test_encode_policies_as_tiktoken(name, request):
    """Every special-token policy, on text with and without special-token text (and a disallowed string that is
    no special token): the same ids as tiktoken, or the same error.  (tiktoken takes sets for allowed_special;
    ctok also takes a list or tuple of names, which tiktoken refuses with a TypeError.)"""
    enc, ref = request.getfixturevalue(name), tiktoken_of(request.getfixturevalue(name + "_ref"))
    texts = ["hello world", "", "say hello", "<|endoftext|>", "a <|endoftext|> b", "<|fim_prefix|>x", "hell",
             corpus_text(corpus_names()[0], 2_000)]
    for t in texts:
        for policy in POLICIES:
            try:
                want = ref.encode(t, **policy)
            except ValueError:
                with pytest.raises(ValueError):
                    enc.encode(t, **policy)
                continue
            assert enc.encode(t, **policy) == want, (t[:40], policy)


@pytest.mark.parametrize("num_threads", [1, 2])
def test_encode_batch_policies_as_tiktoken(o200k, o200k_ref, num_threads):
    """encode_batch under allowed/disallowed policies (texts holding no special token's text take the native
    batch, the others go one by one): tiktoken's ids for every text, in order, or its error."""
    ref = tiktoken_of(o200k_ref)
    texts = [t for t in sample_texts() if not any(0xD800 <= ord(c) < 0xE000 for c in t)]
    texts = [t + ("<|endoftext|>" if i % 7 == 3 else "") + ("<|fim_middle|>" if i % 11 == 5 else "")
             for i, t in enumerate(texts)]
    for policy in POLICIES[:3] + [{"allowed_special": "all", "disallowed_special": ()},
                                  {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()}]:
        try:
            want = [ref.encode(t, **policy) for t in texts]
        except ValueError:
            with pytest.raises(ValueError):
                o200k.encode_batch(texts, num_threads=num_threads, **policy)
            continue
        assert o200k.encode_batch(texts, num_threads=num_threads, **policy) == want, policy


def test_every_tiktoken_method_is_there(o200k):
    import tiktoken
    names = [m for m in dir(tiktoken.Encoding) if not m.startswith("_")]
    assert names and [m for m in names if not hasattr(o200k, m)] == []


def test_decode_bytes_batch(o200k, o200k_ref):
    batch = [o200k_ref.encode_ordinary(t) for t in sample_texts()] + [[]]
    assert o200k.decode_bytes_batch(batch) == tiktoken_of(o200k_ref).decode_bytes_batch(batch)


def test_decode_with_offsets(o200k, o200k_ref):
    """tiktoken's offsets, on text whose tokens split characters (CJK, emoji, combining marks) and on random id
    sequences that decode strictly or raise."""
    ref = tiktoken_of(o200k_ref)
    for t in sample_texts():
        ids = o200k_ref.encode_ordinary(t)
        try:
            want = ref.decode_with_offsets(ids)
        except UnicodeDecodeError:      # lone surrogates came in as replacement bytes: both must refuse alike
            with pytest.raises(UnicodeDecodeError):
                o200k.decode_with_offsets(ids)
            continue
        assert o200k.decode_with_offsets(ids) == want, repr(t[:60])
    rng = random.Random(5)
    pool = o200k_ref.encode_ordinary("".join(corpus_text(n, 2_000) for n in corpus_names()))
    for _ in range(300):
        ids = [rng.choice(pool) for _ in range(rng.randint(0, 12))]
        try:
            want = ref.decode_with_offsets(ids)
        except UnicodeDecodeError:
            with pytest.raises(UnicodeDecodeError):
                o200k.decode_with_offsets(ids)
            continue
        assert o200k.decode_with_offsets(ids) == want, ids
    with pytest.raises(Exception):
        o200k.decode_with_offsets([o200k.n_vocab + 10])


def test_decode_with_offsets_refused_for_marker_decoders():
    path = __import__("_shared").shared_dir() / "vocab" / "mistral-7b-v0.1" / "tokenizer.json"
    if not path.exists():
        pytest.skip("no Mistral tokenizer.json in ../shared")
    enc = ctok.load(path)
    with pytest.raises(NotImplementedError, match="decode_with_offsets"):
        enc.decode_with_offsets(enc.encode("hello world"))


def test_is_special_token(o200k, o200k_ref):
    ref = tiktoken_of(o200k_ref)
    for tid in list(o200k_ref.special_tokens.values()) + [0, 100, 199_997, o200k_ref.n_vocab - 1]:
        assert o200k.is_special_token(tid) == ref.is_special_token(tid), tid


@pytest.mark.parametrize("policy", [{}, {"allowed_special": "all"}, {"disallowed_special": ()}])
def test_encode_to_numpy(o200k, o200k_ref, policy):
    """tiktoken's encode_to_numpy where it answers; on lone surrogates (where it raises UnicodeEncodeError) the
    ids of encode(), which repairs them as tiktoken's encode() does."""
    ref = tiktoken_of(o200k_ref)
    for t in sample_texts() + ["<|endoftext|> hi", ""]:
        try:
            want = ref.encode(t, **policy)
        except ValueError:
            with pytest.raises(ValueError):
                o200k.encode_to_numpy(t, **policy)
            continue
        got = o200k.encode_to_numpy(t, **policy)
        assert got.dtype == np.uint32 and got.tolist() == want, repr(t[:60])
        try:
            assert ref.encode_to_numpy(t, **policy).tolist() == want
        except UnicodeEncodeError:
            assert any(0xD800 <= ord(c) < 0xE000 for c in t)


UNSTABLE_TEXTS = ["hello wor", "hello world ", "hello\n\n  ", "x = 1", "naïve caf", "日本", " ", "", "it's",
                  "It'S", "1234", "abc\u3000", "ab\u00e9", "def f(x):\n    return", "a\t", "\n", "....", "é",
                  "👨‍👩", "価格は", "x<|endoftext|>", "x<|endoftext|>y", "<|endoftext|>"]


@pytest.mark.parametrize("name", ["o200k", "cl100k"])
def test_encode_with_unstable(name, request):
    enc, ref = request.getfixturevalue(name), tiktoken_of(request.getfixturevalue(name + "_ref"))
    for t in UNSTABLE_TEXTS:
        kw = {"allowed_special": "all"} if "<|" in t else {}
        got, want = enc.encode_with_unstable(t, **kw), ref.encode_with_unstable(t, **kw)
        assert got[0] == want[0], repr(t)
        assert sorted(map(tuple, got[1])) == sorted(map(tuple, want[1])), repr(t)
    with pytest.raises(ValueError):
        enc.encode_with_unstable("a <|endoftext|>")


def test_encode_with_unstable_refused_for_tokenizer_json():
    path = __import__("_shared").shared_dir() / "vocab" / "llama3-hf" / "tokenizer.json"
    if not path.exists():
        pytest.skip("no Llama 3 tokenizer.json in ../shared")
    with pytest.raises(NotImplementedError, match="encode_with_unstable"):
        ctok.load(path).encode_with_unstable("hello")


# --------------------------------------------------------------------------------------------------------------
# count


def test_count(o200k, o200k_ref):
    for t in sample_texts():
        if "<|endoftext|>" in t or "<|endofprompt|>" in t:
            with pytest.raises(ValueError):
                o200k.count(t)
        else:
            assert o200k.count(t) == len(o200k_ref.encode(t))
        assert o200k.count(t, allowed_special="all") == len(o200k_ref.encode(t, allowed_special="all"))
        assert o200k.count(t, disallowed_special=()) == len(o200k_ref.encode(t, disallowed_special=()))
    assert o200k.count("") == 0


def test_count_policies_and_batch(o200k, o200k_ref):
    # count (one text) and count_batch agree with tiktoken's len(encode(...)) under each policy, and raise
    # where it raises, including for a subset of disallowed names.
    texts = [t for t in sample_texts()] + ["x <|endofprompt|> y", "<|endoftext|", "a<|endoftext|>b"]
    policies = [dict(), dict(disallowed_special=()), dict(allowed_special="all"),
                dict(disallowed_special={"<|endofprompt|>"}), dict(allowed_special={"<|endoftext|>"})]
    for kw in policies:
        want = []
        for t in texts:
            try:
                want.append(len(o200k_ref.encode(t, **kw)))
            except ValueError:
                want.append(None)
        for t, w in zip(texts, want):
            if w is None:
                with pytest.raises(ValueError):
                    o200k.count(t, **kw)
            else:
                assert o200k.count(t, **kw) == w, (t[:60], kw)
        ok = [t for t, w in zip(texts, want) if w is not None]
        assert o200k.count_batch(ok, num_threads=2, **kw) == [w for w in want if w is not None]
        if len(ok) < len(texts):
            with pytest.raises(ValueError):
                o200k.count_batch(texts, **kw)
    assert o200k.count_batch([]) == []


def test_count_family_without_specials_shortcut(tmp_path):
    """count must agree with encode also where ctok may take a counting shortcut."""
    family = FAMILY_BY_ID["cl100k_base"]
    ref = reference_encoding(family.folder)
    enc = ctok.load(str(family.source_file()), pattern=family.recipe_data()["pat_str"], special_tokens={})
    for t in sample_texts():
        assert enc.count(t) == len(ref.encode_ordinary(t))


# --------------------------------------------------------------------------------------------------------------
# segments


def test_encode_segments(o200k, o200k_ref):
    segs = [("<|endoftext|>system prompt", True), ("user says <|endoftext|> hi", False), ("", True), ("", False),
            ("<|endofprompt|>", True), ("<|endofprompt|>", False)]
    got = o200k.encode_segments(segs)
    exp = []
    for text, trusted in segs:
        exp += o200k_ref.encode(text, allowed_special="all") if trusted else o200k_ref.encode_ordinary(text)
    assert got == exp
    eot = o200k_ref.eot_token
    assert got.count(eot) == 1  # only the trusted one
    assert o200k.encode_segments([]) == []


def test_encode_segments_untrusted_never_special(o200k, o200k_ref):
    specials = set(o200k_ref.special_tokens.values())
    evil = "".join(o200k_ref.special_tokens) * 3
    ids = o200k.encode_segments([(evil, False)])
    assert not specials & set(ids)
    assert ids == o200k_ref.encode_ordinary(evil)
    ids = o200k.encode_segments(iter([("x", True), (evil, False), ("y", True)]))
    assert not specials & set(ids)


# --------------------------------------------------------------------------------------------------------------
# stream decoding


def _stream(enc, ids):
    dec = enc.stream_decoder()
    out = []
    for t in ids:
        piece = dec.step(t)
        assert isinstance(piece, str)
        out.append(piece)
    out.append(dec.flush())
    return out


def test_stream_decoder_random_ids(o200k, o200k_ref):
    rng = random.Random(99)
    valid = [i for i in range(o200k_ref.n_vocab) if o200k_ref.is_valid_id(i)]
    for _ in range(200):
        ids = [rng.choice(valid) for _ in range(rng.randrange(0, 40))]
        assert "".join(_stream(o200k, ids)) == o200k_ref.decode(ids), ids


def test_stream_decoder_splits_multibyte(o200k, o200k_ref):
    text = "héllo 中文 😀👨‍👩‍👧 ok"
    raw = text.encode("utf-8")
    byte_ids = [o200k_ref.enc.encode_single_token(bytes([b])) for b in raw]  # one token per byte
    parts = _stream(o200k, byte_ids)
    assert "".join(parts) == text
    # a character is emitted whole, once its last byte arrives, never as U+FFFD halves
    assert all("\ufffd" not in p for p in parts)
    # the normal encoding of the same text streams to the same text
    assert "".join(_stream(o200k, o200k_ref.encode_ordinary(text))) == text


def test_stream_decoder_incomplete_tail(o200k, o200k_ref):
    raw = "中".encode("utf-8")
    ids = [o200k_ref.enc.encode_single_token(raw[:1]), o200k_ref.enc.encode_single_token(raw[1:2])]
    parts = _stream(o200k, ids)
    assert "".join(parts) == o200k_ref.decode(ids)  # the unfinished character is flushed as a replacement
    assert parts[-1] != "" or "".join(parts) == ""


def test_stream_decoder_independent(o200k, o200k_ref):
    a, b = o200k.stream_decoder(), o200k.stream_decoder()
    ids = o200k_ref.encode_ordinary("first stream")
    assert "".join(a.step(t) for t in ids) + a.flush() == "first stream"
    assert b.flush() == ""


# --------------------------------------------------------------------------------------------------------------
# pickling


@pytest.mark.parametrize("how", ["get_encoding", "load_file", "load_tekken"])
def test_pickle_small_and_roundtrip(how):
    if how == "get_encoding":
        enc = ctok.get_encoding("o200k_base")
        ref = reference_encoding("o200k_base")
    elif how == "load_file":
        family = FAMILY_BY_ID["llama3-tiktoken"]
        enc = ctok.load(str(family.source_file()))
        ref = reference_encoding(family.folder)
    else:
        family = FAMILY_BY_ID["mistral-tekken"]
        enc = ctok.load(str(family.source_file()))
        ref = reference_encoding(family.folder)
    data = pickle.dumps(enc)
    assert len(data) < 10_000, f"pickle is {len(data)} bytes"
    back = pickle.loads(data)
    assert back.n_vocab == enc.n_vocab
    assert back.special_tokens == enc.special_tokens
    text = corpus_text("udhr_multilingual.txt", 5_000)
    assert back.encode_ordinary(text) == ref.encode_ordinary(text)
    assert back.encode(text, allowed_special="all") == ref.encode(text, allowed_special="all")
    assert pickle.loads(pickle.dumps(enc, protocol=pickle.HIGHEST_PROTOCOL)).encode("x y") == ref.encode("x y")


def test_pickle_explicit_pattern(tmp_path):
    family = FAMILY_BY_ID["p50k_edit"]
    r = family.recipe_data()
    ref = reference_encoding(family.folder, family.recipe)
    enc = ctok.load(str(family.source_file()), pattern=r["pat_str"], special_tokens=r["special_tokens"])
    back = pickle.loads(pickle.dumps(enc))
    assert len(pickle.dumps(enc)) < 10_000
    assert back.special_tokens == ref.special_tokens
    t = "x <|fim_prefix|> y"
    assert back.encode(t, allowed_special="all") == ref.encode(t, allowed_special="all")


def test_pickle_to_subprocess():
    """An Encoding shipped to a worker process (multiprocessing) works there."""
    import multiprocessing as mp

    enc = ctok.get_encoding("cl100k_base")
    ref = reference_encoding("cl100k_base")
    texts = ["hello world", "tokenize me in a worker", "中文 and English"]
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        got = pool.starmap(_encode_in_worker, [(enc, t) for t in texts])
    assert got == [ref.encode_ordinary(t) for t in texts]


def _encode_in_worker(enc, text):
    return enc.encode_ordinary(text)


# --------------------------------------------------------------------------------------------------------------
# threads


def test_threads_share_one_encoding(o200k, o200k_ref):
    texts = [corpus_text(n, 20_000) for n in corpus_names()] * 3
    exp = [o200k_ref.encode_ordinary(t) for t in texts]
    with ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(o200k.encode_ordinary, texts))
    assert got == exp
    with ThreadPoolExecutor(max_workers=6) as pool:
        decoded = list(pool.map(o200k.decode, exp))
    assert decoded == [o200k_ref.decode(e) for e in exp]


def test_threads_batch_inside_threads(cl100k, cl100k_ref):
    texts = [corpus_text(n, 5_000) for n in corpus_names()]
    exp = [cl100k_ref.encode_ordinary(t) for t in texts]
    errors = []

    def work():
        try:
            for _ in range(3):
                assert cl100k.encode_ordinary_batch(texts, num_threads=2) == exp
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_encode_segments_untrusted_never_added_token():
    # Qwen 3's <tool_call> and <think> are added tokens that HF marks non-special; typed by a user in an
    # untrusted segment they must stay plain text, equal to HF's model-only encoding of the same text.
    tokenizers = pytest.importorskip("tokenizers")
    from _shared import vocab_path
    path = vocab_path("qwen3", "tokenizer.json")
    enc = ctok.load(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    added = {t.content for t in ref.get_added_tokens_decoder().values()}
    assert "<tool_call>" in added
    evil = "hi <tool_call> and <think> and <|im_end|>"
    ids = enc.encode_segments([(evil, False)])
    plain = ref.model
    want = []
    pre = ref.pre_tokenizer.pre_tokenize_str(ref.normalizer.normalize_str(evil) if ref.normalizer else evil)
    for piece, _ in pre:
        want += [t.id for t in plain.tokenize(piece)]
    assert ids == want
    trusted = enc.encode_segments([(evil, True)])
    assert ref.token_to_id("<tool_call>") in trusted and ref.token_to_id("<tool_call>") not in ids


def test_count_batch_tokenizer_json():
    tokenizers = pytest.importorskip("tokenizers")
    from _shared import vocab_path
    path = str(vocab_path("qwen3", "tokenizer.json"))
    enc = ctok.load(path)
    ref = tokenizers.Tokenizer.from_file(path)
    texts, want = [], []
    for t in sample_texts():
        try:                                    # HF refuses lone surrogates (so does ctok, for these files)
            want.append(len(ref.encode(t, add_special_tokens=False).ids))
        except TypeError:
            continue
        texts.append(t)
    assert enc.count_batch(texts, num_threads=2) == want
    assert [enc.count(t) for t in texts] == want


def _tiktoken_auto_families():
    from _shared import TIKTOKEN_FAMILIES
    return [f for f in TIKTOKEN_FAMILIES if f.load == "auto" and not f.view_lines]


@pytest.mark.parametrize("family", _tiktoken_auto_families(), ids=lambda f: f.id)
def test_allowed_subsets_as_tiktoken(family):
    """encode with a subset of the special tokens allowed (disallowed "all"): tiktoken's ids when the text holds
    only allowed ones (the core's split at every special token then splits at those), and tiktoken's error,
    naming the leftmost disallowed token (the longest there), when it holds another; with disallowed_special=()
    the others are text."""
    from _shared import shared_dir
    shared_dir()
    enc = ctok.load(str(family.source_file()))
    ref = reference_encoding(family.folder, family.recipe)
    rnd = random.Random(20261205 + len(family.id))
    names = sorted(enc.special_tokens)
    words = ["hello", " world", "\n", "  ", "<", "|", ">", "<|", "|>", "[", "]", "x"]
    for _ in range(150):
        allowed = set(rnd.sample(names, rnd.randint(1, min(4, len(names)))))
        pool = sorted(allowed) + [n[:k] for n in allowed for k in (1, len(n) - 1) if k > 0] + words
        if rnd.random() < 0.3:
            pool.append(rnd.choice(names))                    # maybe a disallowed one
        text = "".join(rnd.choice(pool) for _ in range(rnd.randint(0, 20)))
        for disallowed in ("all", ()):
            try:
                want = ref.encode(text, allowed_special=allowed, disallowed_special=disallowed)
            except ValueError as e:
                with pytest.raises(ctok.DisallowedSpecialError) as got:
                    enc.encode(text, allowed_special=allowed, disallowed_special=disallowed)
                assert str(e).split("\n")[0] == str(got.value).split("\n")[0], text
                continue
            assert enc.encode(text, allowed_special=allowed, disallowed_special=disallowed) == want, (allowed, text)


def test_special_token_pattern_is_tiktokens_alternation():
    """The special-token regex is a trie (one name tried per place and character) that finds what tiktoken's
    alternation sorted longest first finds: the leftmost place, the longest name there."""
    import re

    from ctok.core import _trie_pattern
    rnd = random.Random(7)
    for _ in range(2000):
        names = {"".join(rnd.choice("ab<|>") for _ in range(rnd.randint(1, 5))) for _ in range(rnd.randint(1, 8))}
        alternation = re.compile("|".join(re.escape(s) for s in sorted(names, key=lambda s: (-len(s), s))))
        trie = re.compile(_trie_pattern(names))
        for _ in range(10):
            t = "".join(rnd.choice("ab<|>x") for _ in range(rnd.randint(0, 20)))
            assert [(m.start(), m.group()) for m in trie.finditer(t)] == \
                [(m.start(), m.group()) for m in alternation.finditer(t)], (names, t)
