"""tokenizer.json files whose ordinary text needs no Python stage (no normalizer or only a Unicode normal form,
a native pre-tokenizer, no prefix space to add) route `encode` / `encode_ordinary` of text holding no added
token (by its first two characters) and left as it is by the file's normal form straight to the compiled
encoder (FastOrdinary / FastEncode).  Whatever route a text takes, the ids must be HF tokenizers'
(`encode_special_tokens=True`, no post-processor), lone surrogates must still raise, and str subclasses and
non-str inputs behave as on the slow route."""
from __future__ import annotations

import json
import random

import pytest

from _shared import adversarial_strings, assert_same_ids, corpus_names, corpus_text, vocab_path

ctok = pytest.importorskip("ctok")
tokenizers = pytest.importorskip("tokenizers")
from ctok.core import MIN_PARALLEL_BATCH  # noqa: E402
from ctok.errors import InvalidTextError  # noqa: E402

SEED_ROUTE = 20261203

# file -> whether it must take the shortcut (the test then proves the shortcut, not only the slow route)
FILES = {
    "llama3-hf/tokenizer.json": True,
    "qwen3/tokenizer.json": True,              # NFC: text NFC leaves as it is
    "deepseek-v3/tokenizer.json": True,
    "gpt2/tokenizer.json": True,
    "gpt-neox-20b/tokenizer.json": True,       # NFC: text NFC leaves as it is
    "mistral-7b-v0.1/tokenizer.json": True,    # Prepend/Replace normalizer: encode_marked
    "mistral-7b-v0.3/tokenizer.json": True,    # Metaspace "first": encode_marked
    "llama2/tokenizer.json": True,
}


def _route_type(enc, attr):
    # The class of the route object whose `call` method Encoding bound as `attr` ("NoneType" when none is).
    return type(getattr(enc.__dict__.get(attr), "__self__", None)).__name__


def _texts(rnd):
    out = [t for _, t in adversarial_strings() if len(t) < 5000]
    out += [corpus_text(n, 3000) for n in corpus_names()]
    ascii_bits = ["hello", " world", "<", "<|", "<|im_end|>", "<|begin_of_text|>", "<think>", "</s>", "<s>",
                  "  ", "\n", "123", "'s", "x<y", "a < b", "\t", "e\u0301", "\u00e9", "中文", "😀", "<｜User｜>"]
    for _ in range(300):
        out.append("".join(rnd.choice(ascii_bits) for _ in range(rnd.randint(0, 12))))
    return out


@pytest.mark.parametrize("rel", sorted(FILES))
def test_routes_agree_with_hf(rel):
    path = vocab_path(*rel.split("/"))
    enc = ctok.load(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.encode_special_tokens = True
    assert (_route_type(enc, "encode_ordinary") == "FastOrdinary") == FILES[rel]
    for text in _texts(random.Random(11)):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            with pytest.raises(InvalidTextError):
                enc.encode_ordinary(text)
            with pytest.raises(InvalidTextError):
                enc.encode(text)
            continue
        want = ref.encode(text, add_special_tokens=False).ids
        assert_same_ids(enc.encode_ordinary(text), want, text, label=f"{rel} encode_ordinary")
        try:
            got = enc.encode(text)
        except ctok.DisallowedSpecialError:
            assert any(s in text for s in enc.special_tokens)
            continue
        assert_same_ids(got, want, text, label=f"{rel} encode")


class _S(str):
    pass


@pytest.mark.parametrize("rel", ["llama3-hf/tokenizer.json", "qwen3/tokenizer.json"])
def test_shortcut_inputs_like_slow_route(rel):
    enc = ctok.load(str(vocab_path(*rel.split("/"))))
    assert enc.encode_ordinary(_S("hello world")) == enc.encode_ordinary("hello world")
    for bad in (b"bytes", 3, None):
        with pytest.raises(TypeError):
            enc.encode_ordinary(bad)
        with pytest.raises(TypeError):
            enc.encode(bad)
    long_text = "word " * 1000 + "\ud800"            # long enough for the encoder's own UTF-8 conversion
    with pytest.raises(InvalidTextError):
        enc.encode_ordinary(long_text)
    assert enc.encode("hi", add_special_tokens=True)[-1] == enc.encode("hi")[-1]


def _recording_route():
    """(the o200k encoding, the texts given to `slow`, slow): a slow route that only records its calls."""
    calls = []

    def slow(text):
        calls.append(text)
        return ["slow"]

    return ctok.get_encoding("o200k_base"), calls, slow


def test_a_first_character_alone_does_not_leave_the_shortcut():
    # Every added token of the shared files starts with "<": text with a "<" that starts none of them (code,
    # markup) must still go native; an occurrence of a token, a one-character token, or more prefix matches
    # than holds_none checks go to the slow route (which then decides exactly).
    from ctok._encoder import FastOrdinary

    enc, calls, slow = _recording_route()
    fast = FastOrdinary(enc._core, slow, {"<|im_end|>", "<｜User｜>", "</s>"})
    for text in ["a < b", "x<y", "if a<b and c <= d:", "<", "ends with <", "<<", "< |im_end|>", "<a>", "a</b>",
                 "<</s", "x <| y", "<｜", "<|im_end", "</s" * 10]:
        assert fast(text) == enc._core.encode_str(text), text
    assert calls == []
    for text in ["<|im_end|>", "a</s>b", "<</s>", "xx<｜User｜>", "<|" * 100 + "<|im_end|>"]:
        assert fast(text) == ["slow"], text
    assert fast("</b>" * 60) == enc._core.encode_str("</b>" * 60)
    # past PREFIX_CHECKS checked prefixes (64, and one per 256 characters) the slow route decides
    assert fast("</b>" * 70) == ["slow"]
    assert fast("</b>" * 1000) == ["slow"]
    assert fast("x" * 256 * 40 + "</b>" * 100) == enc._core.encode_str("x" * 256 * 40 + "</b>" * 100)
    # A long text with as many such prefixes per character as code has stays native.
    calls.clear()
    code = ("if a</b:\n    x = y <d\n" + "z = 1\n" * 40) * 300          # 300 "</", 84K characters
    assert fast(code) == enc._core.encode_str(code)
    assert calls == []
    one = FastOrdinary(enc._core, slow, {"<", "<|x|>"})
    assert one("a < b") == ["slow"]


def test_normalized_text_takes_the_shortcut_under_a_normal_form():
    from ctok._encoder import FastOrdinary

    enc, calls, slow = _recording_route()
    fast = FastOrdinary(enc._core, slow, {"<|x|>"}, forms=("NFC",))
    for text in ["plain", "caf\u00e9 \u201cquoted\u201d", "\u65e5\u672c\u8a9e \U0001f600", "\uac01"]:
        assert fast(text) == enc._core.encode_str(text), text
    assert calls == []
    for text in ["cafe\u0301", "\u212b", "\u1100\u1161", "\uac00\u11a8", "a\u0301\u0323x"]:   # NFC changes these
        assert fast(text) == ["slow"], text
    assert FastOrdinary(enc._core, slow, {"<|x|>"}, forms=("NFC", "NFKC"))("\ufb01") == ["slow"]   # NFKC: fi


def test_the_shortcut_never_misses_a_token_on_random_text():
    # The route's proof (FirstChars) against the plain question "does any token occur?", on random token
    # sets (one- and two-character tokens, shared prefixes, more than 8 second characters) and random texts
    # made of their pieces: going native while a token occurs would encode a token's text as plain text.
    from ctok._encoder import FastOrdinary

    enc, calls, slow = _recording_route()
    rnd = random.Random(SEED_ROUTE)
    alphabet = "<|>/abc \u00e9\u4e2d\U0001f600"
    for _ in range(300):
        tokens = {"".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 4))) for _ in range(rnd.randint(1, 12))}
        if len({t[0] for t in tokens}) > 8:
            continue
        fast = FastOrdinary(enc._core, slow, tokens)
        for _ in range(20):
            text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40)))
            calls.clear()
            fast(text)
            if any(t in text for t in tokens):
                assert calls == [text], (sorted(tokens), text)


def test_code_holding_token_prefixes_stays_native():
    # DeepSeek-V3's 1,283 added tokens start "<｜", "<|", "</", "<t" or "<d": Python code has a hundred of the
    # last three.  The whole code file must take the compiled route (it took the slow one while holds_none
    # tried a fixed 64 prefixes), with the same ids as the compiled encoder (and so as HF: test_hf).
    from ctok._encoder import FastOrdinary

    enc = ctok.load(str(vocab_path("deepseek-v3", "tokenizer.json")))
    tokens, forms, _, _ = enc._hf_route()
    text = corpus_text("code_python.txt", 2_000_000)
    assert sum(text.count(p) for p in ("</", "<t", "<d")) > 64
    calls = []
    fast = FastOrdinary(enc._core, lambda t: calls.append(t) or ["slow"], tokens, forms=forms)
    assert fast(text) == enc._core.encode_str(text)
    assert calls == []


def test_neox_space_tokens_take_the_split_route():
    # GPT-NeoX's 23 non-special added tokens are runs of 2-24 spaces, which code is full of: such text goes
    # to the compiled encoder with HF's added-token split, not to the Python route.
    from ctok._encoder import FastOrdinary

    path = vocab_path("gpt-neox-20b", "tokenizer.json")
    enc = ctok.load(str(path))
    tokens, forms, split, _ = enc._hf_route()
    assert len(split) == 23 and all(set(e[0]) == {32} for e in split)
    names = [e[0].decode() for e in split]
    text = corpus_text("code_python.txt", 200_000)
    calls = []
    fast = FastOrdinary(enc._core, lambda t: calls.append(t) or ["slow"], tokens, forms=forms, split=names)
    got = fast(text)
    assert calls == []
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.encode_special_tokens = True
    assert_same_ids(got, ref.encode(text, add_special_tokens=False).ids, text, label="neox code")
    for t in ["a" + " " * k + "b" for k in range(0, 60)] + [" " * k for k in range(0, 60)] + ["\n    x\n        y"]:
        assert_same_ids(enc.encode_ordinary(t), ref.encode(t, add_special_tokens=False).ids, t, label="neox runs")
        assert_same_ids(enc.encode(t), ref.encode(t, add_special_tokens=False).ids, t, label="neox runs encode")


SPLIT_CASES = {
    # name: (non-special added tokens as (content, flags), whether the core may split at them, normalizer)
    "overlapping": ([("ab", {}), ("abc", {}), ("bcd", {}), ("b", {}), ("  ", {}), ("x y", {})], True, "NFC"),
    "raw": ([("ab", {"normalized": False}), ("abc", {"normalized": False}), ("<b>", {"normalized": False})], True,
            "NFC"),
    # HF finds the raw tokens first, then the normalized ones between them: "xabc" is "x" + "abc", where one
    # leftmost-longest pass over all of them would take "xa" first.
    "two-passes": ([("abc", {"normalized": False}), ("xa", {"normalized": True}), ("c>", {"normalized": True}),
                    ("b", {"normalized": True}), ("<b>", {"normalized": False}), ("ab", {"normalized": True})],
                   True, "NFC"),
    "lstrip": ([("ab", {}), ("cd", {"lstrip": True})], False, "NFC"),
    # Under a normal form a token must start and end with ASCII (a cut beside another character could change
    # the normal form of the texts around it) ...
    "non-ascii": ([("ab", {}), ("é", {})], False, "NFC"),
    # ... and without one it may be any text (DeepSeek-V3's <｜User｜>).
    "non-ascii-no-normalizer": ([("ab", {}), ("é", {}), ("<｜U｜>", {"normalized": False}), ("｜", {}),
                                 ("｜U", {"normalized": False}), ("e\u0301", {})], True, None),
}


@pytest.mark.parametrize("case", sorted(SPLIT_CASES))
def test_added_token_split_matches_hf(tmp_path, case):
    # Synthetic ByteLevel files with non-special added tokens (and two special ones): the compiled split
    # (HF's two leftmost-longest passes, gaps encoded as texts of their own) against HF on random texts made
    # of the tokens' pieces, through encode_ordinary and encode, and encode with every special token allowed;
    # the split routes must be taken when allowed.
    from test_hf import BL, BL_DEC, _trained_model, _write

    toks, allowed, normalizer = SPLIT_CASES[case]
    added = [{"content": "<|end|>", "special": True}, {"content": "<|pad|>", "special": True}]
    added += [{"content": c, "special": False, "normalized": True, **flags} for c, flags in toks]
    path = _write(tmp_path, f"split-{case}", _trained_model("byte"),
                  normalizer={"type": normalizer} if normalizer else None,
                  pre_tokenizer=BL, decoder=BL_DEC, added_tokens=added)
    enc = ctok.load(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref_ordinary = tokenizers.Tokenizer.from_file(str(path))
    ref_ordinary.encode_special_tokens = True
    route = enc._hf_route()
    assert route is not None and bool(route[2]) == allowed
    assert (enc._split_all is not None) == allowed
    rnd = random.Random(SEED_ROUTE)
    bits = ["a", "b", "c", "d", "ab", "abc", "bcd", " ", "  ", "   ", "x y", "x", "y", "<", ">", "<b>", "\n", "é",
            "e\u0301", "hello", " world", "12", "｜", "<｜U｜>", "U", "<｜", "<|end|>", "<|pa", "xa", "c>"]
    texts = ["", "ab", "abc", "abcd", "bcd", "xx y", "a  b", "<|end|>", "ab<|end|>ab", "xabc", "abc>", "x<b>"]
    texts += ["".join(rnd.choice(bits) for _ in range(rnd.randint(1, 30))) for _ in range(400)]
    for text in texts:
        want = ref_ordinary.encode(text, add_special_tokens=False).ids
        assert_same_ids(enc.encode_ordinary(text), want, text, label=f"{case} encode_ordinary")
        if "<|end|>" not in text and "<|pad|>" not in text:
            assert_same_ids(enc.encode(text), ref.encode(text, add_special_tokens=False).ids, text,
                            label=f"{case} encode")
        assert_same_ids(enc.encode(text, allowed_special="all"), ref.encode(text, add_special_tokens=False).ids,
                        text, label=f"{case} encode, every special allowed")
    if allowed:
        from ctok._encoder import FastOrdinary
        calls = []
        names = [e[0].decode() for e in route[2]]
        fast = FastOrdinary(enc._core, lambda t: calls.append(t) or ["slow"], route[0], forms=route[1],
                            split=names)
        fast("ab abc x y")
        assert calls == []


# ------------------------------------------------------------------------------------------ Unicode normal forms
# Files with a normalizer take the compiled route only for text the C quick check (ctok/_nf_check.h) or, where it
# doubts, unicodedata2 proves normalized.  The ids must be HF's wherever the text goes: normalized or not, near
# the 16-character steps of the check, with doubtful characters alone, in runs and far apart.
NF_PIECES = [
    "e\u0301", "cafe\u0301 na\u0308ive", "a\u0323\u0301", "a\u0301\u0323", "x\u0301", "\u212a", "\u212b", "\u2126",
    "K\u212aK", "5 \u212a", "\u1100\u1161\u11a8", "\u1100\u1161", "\uac00\u11a8", "\u1100\u1100\u1161\u1161",
    "\u1161", "\u11a8", "\uac00\u11a8\u11a8", "\u0344", "\u0f73", "\u0958", "\u2adc", "\u2adc\u0338", "\u2add\u0338",
    "\ufb01", "\ufb01le", "\u00bd", "\uff21\uff42", "\u2460", "\u3099", "\u304b\u3099", "\u30d5\u309a",
    "\u0928\u093c", "\u0915\u093c", "\u09c7\u09be", "\u0b92\u0bd7", "\u0bd7", "\U00016d63\U00016d68",
    "\U00016d63\U00016d67", "\U0001611e\U0001611e", "\U000113c2\U000113c2", "\u0627\u064e\u0651",
    "\u0627\u0651\u064e", "\u05d1\u05bc\u05b0", "\u05d1\u05b0\u05bc", "\u1e9b\u0323", "\u00c5\u0301", "\u0340\u0341",
    "\u0345\u0301", "\U0001d15e", "\uf900", "\U0002f800", "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\u00e9\u00e8", "\ud55c\uad6d\uc5b4", "\u65e5\u672c\u8a9e",
]


def _nf_texts(rnd):
    out = list(NF_PIECES)
    out += ["word " * 40 + p + " more" * 40 for p in NF_PIECES]              # inside 16-character steps
    out += ["\u65e5\u672c" * 30 + p + "\u8a9e" * 30 for p in NF_PIECES]     # ... of non-ASCII text
    filler = ["hello ", "\u65e5\u672c\u8a9e", "\u043f\u0440\u0438 ", "\n", " ", "\U0001f600", "x"]
    for _ in range(150):
        parts = []
        for _ in range(rnd.randint(1, 8)):
            parts.append("".join(rnd.choice(filler) for _ in range(rnd.choice([0, 2, 20, 70, 200]))))
            parts.append(rnd.choice(NF_PIECES))
        out.append("".join(parts))
    out.append("x\u0301 " * 3000)                                            # doubted throughout, normalized
    out.append("x\u0301 " * 3000 + "e\u0301")
    return out


def _check_like_hf(enc, ref, texts, label):
    wants = []
    for text in texts:
        want = ref.encode(text, add_special_tokens=False).ids
        wants.append(want)
        assert_same_ids(enc.encode_ordinary(text), want, text, label=f"{label} encode_ordinary")
        assert_same_ids(enc.encode(text), want, text, label=f"{label} encode")
    # Batches: the texts the normal forms change go to the core normalized, beside the plain ones, on two threads
    # (CompiledRoute.plain_texts), and the ids stay in their texts' order.
    batch = (texts * (1 + MIN_PARALLEL_BATCH // max(1, len(texts))))[:max(len(texts), MIN_PARALLEL_BATCH)]
    want_batch = [wants[i % len(texts)] for i in range(len(batch))]
    for name, got in (("encode_ordinary_batch", enc.encode_ordinary_batch(batch, num_threads=2)),
                      ("encode_batch", enc.encode_batch(batch, num_threads=2))):
        for text, ids, want in zip(batch, got, want_batch):
            assert_same_ids(ids, want, text, label=f"{label} {name}")
    flat, offsets = enc.encode_batch_flat(batch, num_threads=2)
    assert flat.tolist() == [i for w in want_batch for i in w], f"{label} encode_batch_flat"


@pytest.mark.parametrize("rel", ["qwen3/tokenizer.json", "gpt-neox-20b/tokenizer.json"])
def test_nfc_files_agree_with_hf_on_every_corpus_file(rel):
    # Whole files: the Python docs hold one KELVIN SIGN (not normalized: the slow route), the others are NFC.
    path = vocab_path(*rel.split("/"))
    enc = ctok.load(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.encode_special_tokens = True
    assert _route_type(enc, "encode_ordinary") == "FastOrdinary"
    for name in corpus_names():
        text = corpus_text(name, 10**9)
        want = ref.encode(text, add_special_tokens=False).ids
        assert_same_ids(enc.encode_ordinary(text), want, text, label=f"{rel} {name}")


@pytest.mark.parametrize("rel", ["qwen3/tokenizer.json", "gpt-neox-20b/tokenizer.json"])
def test_nfc_files_agree_with_hf_on_normalization_cases(rel):
    path = vocab_path(*rel.split("/"))
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.encode_special_tokens = True
    _check_like_hf(ctok.load(str(path)), ref, _nf_texts(random.Random(SEED_ROUTE)), rel)


@pytest.mark.parametrize("normalizer", [{"type": "NFKC"}, {"type": "NFD"}, {"type": "NFKD"},
                                        {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "NFKC"}]}],
                         ids=["NFKC", "NFD", "NFKD", "NFD+NFKC"])
def test_other_normal_forms_agree_with_hf(tmp_path, normalizer):
    # Qwen 3's file with another normalizer: NFKC changes U+FB01 (fi) that NFC leaves, NFD splits what NFC keeps.
    data = json.loads(vocab_path("qwen3", "tokenizer.json").read_text(encoding="utf-8"))
    data["normalizer"] = normalizer
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    enc = ctok.load(str(path))
    assert _route_type(enc, "encode_ordinary") == "FastOrdinary"
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.encode_special_tokens = True
    texts = _nf_texts(random.Random(SEED_ROUTE + 1)) + [corpus_text(n, 20_000) for n in corpus_names()]
    _check_like_hf(enc, ref, texts, normalizer["type"])


def test_text_the_normalizer_changes_goes_native_once_normalized():
    # Text holding no added token that NFC changes (the Python docs' KELVIN SIGN, combining accents, Hangul
    # jamo) is normalized as HF normalizes it and then encoded by the compiled encoder, when the normalized
    # text holds no added token either.
    from functools import partial

    from ctok._encoder import FastOrdinary
    from ctok.hf import normalize_forms

    path = vocab_path("qwen3", "tokenizer.json")
    enc = ctok.load(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.encode_special_tokens = True
    tokens, forms, split, _ = enc._hf_route()
    assert forms == ("NFC",)
    calls = []
    fast = FastOrdinary(enc._core, lambda t: calls.append(t) or ["slow"], tokens, forms=forms,
                        split=[e[0].decode() for e in split], normalize=partial(normalize_forms, forms))
    docs = corpus_text("en_python_docs.rst.txt", 2_000_000)
    texts = [docs, "\u212a", "cafe\u0301 na\u0308ive", "\u1100\u1161\u11a8 x", "a\u0323\u0301" * 50,
             "\u212b" + "x" * 3000, "\u0344 \u0958 \uf900"]
    for text in texts:
        assert fast(text) == enc._core.encode_str(normalize_forms(forms, text)), text[:40]
        assert_same_ids(enc.encode_ordinary(text), ref.encode(text, add_special_tokens=False).ids, text[:40],
                        label="qwen3 normalized")
    assert calls == []


def test_normalization_that_makes_a_token_leaves_the_compiled_route(tmp_path):
    # NFKC turns U+FB01 into "fi"; with "fi" a normalized added token, the normalized text holds it, so the
    # text must go the Python way, which matches it as HF does.
    from test_hf import BL, BL_DEC, _trained_model, _write

    added = [{"content": "<|end|>", "special": True}, {"content": "fi", "special": False, "normalized": True,
                                                        "lstrip": True}]
    path = _write(tmp_path, "nfkc-token", _trained_model("byte"), normalizer={"type": "NFKC"},
                  pre_tokenizer=BL, decoder=BL_DEC, added_tokens=added)
    enc = ctok.load(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.encode_special_tokens = True
    assert enc._hf_route() is not None
    texts = ["\ufb01ne", "a \ufb01", "\ufb01", "x\u00bd\ufb02", "\uff21\uff22 \ufb01 \u2460", "plain"]
    for text in texts:
        assert_same_ids(enc.encode_ordinary(text), ref.encode(text, add_special_tokens=False).ids, text,
                        label="nfkc token")
        assert_same_ids(enc.encode(text), ref.encode(text, add_special_tokens=False).ids, text,
                        label="nfkc token encode")
    # in a batch too: a text whose normal form holds the token is not handed to the core normalized
    batch = texts * (1 + MIN_PARALLEL_BATCH // len(texts))
    for got, text in zip(enc.encode_ordinary_batch(batch, num_threads=2), batch):
        assert_same_ids(got, ref.encode(text, add_special_tokens=False).ids, text, label="nfkc token batch")
