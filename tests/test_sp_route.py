"""SentencePiece-style tokenizer.json files (Mistral 7B v0.1 and Llama 2: normalizer Prepend("▁") + Replace(" " ->
"▁"), no pre-tokenizer; Mistral 7B v0.3: Metaspace("▁", prepend_scheme "first", split false)) encode text holding no
added token through the compiled route, CoreEncoder.encode_marked: the str's UTF-8 with each space written as the
marker and the marker put in front by the file's rule.  Whatever route a text takes, the ids must be HF tokenizers'
(`encode_special_tokens=True` for encode_ordinary; BOS with add_special_tokens=True), lone surrogates still raise,
the prefix cache stays off, and files with any other step keep the Python route.  The route tests make the Python
pipeline raise, so they cannot pass through it."""
from __future__ import annotations

import json
import random

import pytest

from _reliability import has_surrogate
from _shared import adversarial_strings, assert_same_ids, corpus_texts, forbid_python_pipeline, vocab_path

ctok = pytest.importorskip("ctok")
tokenizers = pytest.importorskip("tokenizers")
from ctok.errors import InvalidTextError  # noqa: E402

FILES = ["mistral-7b-v0.1/tokenizer.json", "mistral-7b-v0.1/tokenizer.metaspace.json", "mistral-7b-v0.3/tokenizer.json",
         "llama2/tokenizer.json"]
SEED = 20261204

# one character of each str storage kind and UTF-8 length, and what SentencePiece files treat specially
PARTS = [" ", "  ", "\u2581", "\t", "\n", "\r\n", "hello", "world", "x", "42", "\u00e9", "\u00a0", "\u0416", "\u4e2d",
         "\u3000", "\U0001F600", "\U0001F468\u200d\U0001F469", "<", ">", "s", "/", "[", "]", "INST", "unk", "_",
         "\u2581\u2581", " \u2581"]


def _route_type(enc, attr):
    # The class of the route object whose `call` method Encoding bound as `attr` ("NoneType" when none is).
    return type(getattr(enc.__dict__.get(attr), "__self__", None)).__name__


def _edge_texts():
    out = ["", " ", "  ", "   ", " hi", "  hi", "hi ", "hi  ", "a  b   c", "\t", "\n", "\nhi", "\n hi", " \n",
           "\u2581", "\u2581hi", "\u2581 hi", " \u2581hi", "\u2581\u2581", "hi\u2581", "caf\u00e9 cr\u00e8me",
           "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440", "\u65e5\u672c\u8a9e \u30c6\u30ad\u30b9\u30c8",
           " \U0001F600 ok \U0001F600", "\u00a0x", "\u3000x", "<s", "s>", "< s>", "<s >", "</ s>", "<un k>",
           "[INST", "INST]", "[ INST]", "[/INST", "[control_", "[control_8", "a<b", "x < y and y > z", "[1, 2]"]
    # around SHORT_TEXT (2048): the stack buffer / heap buffer and GIL-held / released paths, in every str kind
    for n in (2047, 2048, 2049):
        out.append(("hello world " * 200)[:n])
        out.append((" " + "ab cd " * 400)[:n])
        out.append(" " * n)
        out.append(("\u2581" * n))
        out.append(("caf\u00e9 " * 600)[:n])
        out.append(("\u0416\u0416 " * 700)[:n])
        out.append(("x \U0001F600" * 700)[:n])
        out.append("\U0001F600" + ("a b" * 700)[:n - 1])
    return out


def _random_texts(rnd, count=300):
    return ["".join(rnd.choice(PARTS) for _ in range(rnd.randint(0, 30))) for _ in range(count)]


def _all_texts():
    texts = _edge_texts() + _random_texts(random.Random(SEED))
    texts += [t for _, t in adversarial_strings() if len(t) < 5000]
    texts += [t for _, t in corpus_texts()]
    return texts


@pytest.fixture(scope="module", params=FILES)
def pair(request):
    path = str(vocab_path(*request.param.split("/")))
    ref = tokenizers.Tokenizer.from_file(path)
    return request.param, ctok.load(path), ref


def _ref_ids(ref, text, *, special_as_text=True, add_special_tokens=False):
    ref.encode_special_tokens = special_as_text
    try:
        return ref.encode(text, add_special_tokens=add_special_tokens).ids
    finally:
        ref.encode_special_tokens = False


def _holds_added(enc, text):
    return any(tok in text for tok in enc._hf.added_tokens)


def test_the_compiled_route_is_installed(pair):
    name, enc, _ = pair
    assert _route_type(enc, "encode_ordinary") == "FastOrdinary"
    assert _route_type(enc, "encode") == "FastEncode"
    metaspace = "mistral-7b-v0.3" in name or "metaspace" in name
    rule = ctok._encoder.MARKER_PREPEND_UNMARKED if metaspace else ctok._encoder.MARKER_PREPEND_NONEMPTY
    assert enc._core.marker_prepend == rule
    assert enc.prefix_cache_stats() is not None         # on by default, as for every file with a compiled route


def test_ordinary_text_takes_the_compiled_route_and_matches_hf(pair, monkeypatch):
    name, enc, ref = pair
    texts = [t for t in _edge_texts() + _random_texts(random.Random(SEED + 1), 200) + [t for _, t in corpus_texts()]
             if not has_surrogate(t) and not _holds_added(enc, t)]
    want = [_ref_ids(ref, t) for t in texts]
    forbid_python_pipeline(enc, monkeypatch)
    for text, ids in zip(texts, want):
        assert_same_ids(enc.encode_ordinary(text), ids, text, label=f"{name} encode_ordinary")
        assert_same_ids(enc.encode(text), ids, text, label=f"{name} encode")
        assert_same_ids(enc._core.encode_marked(text), ids, text, label=f"{name} encode_marked")


def test_every_text_matches_hf_whatever_its_route(pair):
    name, enc, ref = pair
    for text in _all_texts():
        if has_surrogate(text):
            continue
        want = _ref_ids(ref, text)
        assert_same_ids(enc.encode_ordinary(text), want, text, label=f"{name} encode_ordinary")
        try:
            got = enc.encode(text)
        except ctok.DisallowedSpecialError:
            assert any(s in text for s in enc.special_tokens)
        else:
            assert_same_ids(got, want, text, label=f"{name} encode")
        assert_same_ids(enc.encode(text, allowed_special="all"), _ref_ids(ref, text, special_as_text=False), text,
                        label=f"{name} encode(allowed_special='all')")


def test_added_tokens_and_bos_keep_their_meaning(pair):
    name, enc, ref = pair
    texts = ["<s>", "</s>", "<unk>", "a<s>b", " <s> hi", "<s> hi", "x</s>", "hi", " hi", "", "  "]
    if name.startswith("mistral-7b-v0.3"):
        texts += ["[INST]", "x [INST] y", "[INST] hi [/INST]", " [INST]", "[control_8]", "a[control_768]b"]
    for text in texts:
        for bos in (False, True):
            assert_same_ids(enc.encode(text, allowed_special="all", add_special_tokens=bos),
                            _ref_ids(ref, text, special_as_text=False, add_special_tokens=bos), text,
                            label=f"{name} add_special_tokens={bos}")
        if not _holds_added(enc, text):
            assert_same_ids(enc.encode(text, add_special_tokens=True),
                            _ref_ids(ref, text, add_special_tokens=True), text, label=f"{name} BOS")
        else:
            with pytest.raises(ctok.DisallowedSpecialError):
                enc.encode(text)


def test_templates_split_at_added_tokens_natively(pair, monkeypatch):
    """encode(text, allowed_special="all") of text holding added tokens (a chat template's output): the core
    splits at them (CoreEncoder.encode_marked_split, through the specials cache) and marks each text between two as a split of its own
    (Prepend: a marker in front of each non-empty one; Metaspace: unless it starts with one, and with
    prepend_scheme "first" only for the text at offset 0).  HF's ids, with and without BOS, the Python pipeline
    forbidden; a lone surrogate still raises."""
    name, enc, ref = pair
    assert enc._split_all is not None and enc._core.has_specials_split
    rnd = random.Random(SEED + 7)
    added = sorted(enc._hf.added_tokens)
    added = added[:3] + rnd.sample(added, min(6, len(added)))
    atoms = added + [a[:k] for a in added for k in (1, len(a) - 1) if k > 0] + PARTS
    texts = ["".join(rnd.choice(atoms) for _ in range(rnd.randint(0, 14))) for _ in range(400)]
    texts += ["<s>", "<s>[INST] hi [/INST]", "<s> [INST] hi [/INST] ok</s>", " <s>", "\u2581<s>\u2581x", "<s>  x"]
    texts = [t for t in texts if not has_surrogate(t)]
    want = {bos: [_ref_ids(ref, t, special_as_text=False, add_special_tokens=bos) for t in texts]
            for bos in (False, True)}
    forbid_python_pipeline(enc, monkeypatch)
    for bos in (False, True):
        for text, ids in zip(texts, want[bos]):
            assert_same_ids(enc.encode(text, allowed_special="all", add_special_tokens=bos), ids, text,
                            label=f"{name} template, add_special_tokens={bos}")
    with pytest.raises(UnicodeEncodeError):
        enc._core.encode_marked_split("<s>a\ud800")
    # Text holding no added token is one split: encode_marked's ids, its spaces marked 8 bytes a step
    # (ctok_mark_spaces) where encode_marked marks them while converting the str: spaces at every offset of a
    # step, in runs across steps, and in the bytes after the last step.
    spaced = [" " * k + "x" + " " * j for k in range(18) for j in range(18)]
    spaced += [("ab c" * 9)[i:i + n] for i in range(4) for n in range(30)] + ["\u00e9 \u4e2d \U0001F600  " * 3]
    for text in spaced:
        assert enc._core.encode_marked_split(text) == enc._core.encode_marked(text), repr(text)


def test_templates_go_through_their_cache(pair):
    """The same templates through the specials cache (PrefixCache(split=2) over the text's UTF-8, resuming after
    added tokens only): random texts of added tokens, fragments and SentencePiece edge characters, prompts parting
    from cached ones anywhere (inside a token, right before or after one, inside space and marker runs), and a
    growing templated chat give HF's ids, with the cache on and off."""
    name, enc, ref = pair
    enc.set_prefix_cache(None)                   # a fresh cache: ctok.load's encodings are shared by other tests
    try:
        assert enc._specials_cache is not None
        rnd = random.Random(SEED + 11)
        added = sorted(enc._hf.added_tokens)
        added = added[:3] + rnd.sample(added, min(5, len(added)))
        atoms = added + [a[:k] for a in added for k in (1, len(a) - 1) if k > 0] + PARTS
        words = [p for p in PARTS if p.strip()] + [" word", " Word,", "\n"]
        for _ in range(4):
            base = "".join(rnd.choice(atoms) if rnd.random() < 0.3 else rnd.choice(words)
                           for _ in range(rnd.randint(300, 600)))
            for _ in range(2):
                _same_as_hf(enc, ref, base, name)
            for _ in range(16):
                k = rnd.randint(0, len(base))
                v = base[:k] + "".join(rnd.choice(atoms) for _ in range(rnd.randint(0, 8)))
                _same_as_hf(enc, ref, v, name)
                if rnd.random() < 0.2 and len(v) > 300:
                    base = v
        chat = ""
        for i in range(12):
            chat += added[0] + " [INST] " + "".join(rnd.choice(words) for _ in range(150)) + " [/INST]" + added[1]
            _same_as_hf(enc, ref, chat, name)
        assert enc.prefix_cache_stats()["specials"]["hits"] >= 6
        enc.set_prefix_cache(0)
        _same_as_hf(enc, ref, chat, name)
    finally:
        enc.set_prefix_cache(None)


def _same_as_hf(enc, ref, text, name):
    if not has_surrogate(text):
        assert_same_ids(enc.encode(text, allowed_special="all"), _ref_ids(ref, text, special_as_text=False), text,
                        label=f"{name} template through the cache")


@pytest.mark.parametrize("sur", ["\ud800", "\udfff", "\ud83d\ude00"])
@pytest.mark.parametrize("where", [0, 5, -1])
@pytest.mark.parametrize("length", [10, 2047, 2049, 5000])
@pytest.mark.parametrize("wide", ["", "\u00e9", "\u4e2d", "\U0001F600"])
def test_lone_surrogates_raise_as_before(pair, sur, where, length, wide):
    name, enc, ref = pair
    base = list((wide + "ab c " * length)[:length])
    base[where] = sur
    text = "".join(base)
    with pytest.raises(InvalidTextError):
        enc.encode_ordinary(text)
    with pytest.raises(InvalidTextError):
        enc.encode(text)
    with pytest.raises(UnicodeEncodeError):
        enc._core.encode_marked(text)
    with pytest.raises(TypeError):
        ref.encode(text)


def test_the_prefix_cache_serves_the_compiled_route(pair, monkeypatch):
    """The compiled route goes through the prefix cache, keyed on the text with its spaces replaced (see
    tests/test_prefix_cache.py for the cuts): shared prompt starts are reused, ids stay HF's, and 0 turns it off."""
    name, enc, ref = pair
    other = ctok.load(str(vocab_path(*name.split("/"))))
    other.set_prefix_cache(1 << 20)
    assert other.prefix_cache_stats() is not None
    system = "You are a helpful assistant. " * 40
    texts = [system + q for q in ("What is 2+2?", " leading", "  two", "\u2581marked", "", " ")]
    want = [_ref_ids(ref, t) for t in texts]
    forbid_python_pipeline(other, monkeypatch)
    for _ in range(2):
        for text, ids in zip(texts, want):
            assert_same_ids(other.encode_ordinary(text), ids, text, label=f"{name} with set_prefix_cache")
    assert other.prefix_cache_stats()["hits"] > 0
    other.set_prefix_cache(0)
    assert other.prefix_cache_stats() is None
    for text, ids in zip(texts, want):
        assert_same_ids(other.encode_ordinary(text), ids, text, label=f"{name} without the cache")
    other.set_prefix_cache(None)                         # ctok.load's encodings are shared: back to the default


def test_str_subclasses_and_non_str_like_the_slow_route(pair):
    name, enc, _ = pair

    class S(str):
        def __str__(self):
            return "something else"

    assert enc.encode_ordinary(S(" hello world")) == enc.encode_ordinary(" hello world")
    assert enc._core.encode_marked(S(" hello world")) == enc.encode_ordinary(" hello world")
    for bad in (b"bytes", 3, None):
        with pytest.raises(TypeError):
            enc.encode_ordinary(bad)
        with pytest.raises(TypeError):
            enc.encode(bad)


# ---- variants of the shared files: other Metaspace schemes take the route, other steps keep the Python route ----

def _variant(tmp_path, base, edit):
    d = json.loads(vocab_path(base, "tokenizer.json").read_text(encoding="utf-8"))
    edit(d)
    p = tmp_path / f"{base}-variant" / "tokenizer.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(d, ensure_ascii=False), encoding="utf-8")
    return str(p)


def _scheme(scheme):
    def edit(d):
        d["pre_tokenizer"]["prepend_scheme"] = scheme
    return edit


def _check_against_hf(path, *, routed, monkeypatch=None):
    enc = ctok.load(path)
    ref = tokenizers.Tokenizer.from_file(path)
    assert (_route_type(enc, "encode_ordinary") == "FastOrdinary") == routed, path
    texts = [t for t in _edge_texts() + _random_texts(random.Random(SEED + 2), 150) if not has_surrogate(t)]
    for text in texts:
        want = _ref_ids(ref, text)
        assert_same_ids(enc.encode_ordinary(text), want, text, label=path)
        assert_same_ids(enc.encode(text, allowed_special="all"), _ref_ids(ref, text, special_as_text=False), text,
                        label=path)
    return enc


@pytest.mark.parametrize("scheme", ["always", "never", "first"])
def test_metaspace_schemes_take_the_route(tmp_path, scheme):
    path = _variant(tmp_path, "mistral-7b-v0.3", _scheme(scheme))
    enc = _check_against_hf(path, routed=True)
    expected = {"never": ctok._encoder.MARKER_PREPEND_NEVER}.get(scheme, ctok._encoder.MARKER_PREPEND_UNMARKED)
    assert enc._core.marker_prepend == expected


def _nfkc_first(d):
    d["normalizer"]["normalizers"].insert(0, {"type": "NFKC"})


def _metaspace_split(d):
    d["pre_tokenizer"]["split"] = True


def _other_prepend(d):
    d["normalizer"]["normalizers"][0]["prepend"] = "\u2581\u2581"


def _replace_tab(d):
    d["normalizer"]["normalizers"][1]["pattern"] = {"String": "\t"}


def _unsafe_marker(d):
    # a token holding a character directly followed by the marker: a merge may join across a marker run's start
    vocab = d["model"]["vocab"]
    vocab["a\u2581"] = max(vocab.values()) + 1
    for t in d["added_tokens"]:
        t["id"] += 1 if t["id"] >= vocab["a\u2581"] else 0


def _normalized_added(d):
    d["added_tokens"].append({"id": max(d["model"]["vocab"].values()) + 1, "content": "hi there", "single_word": False,
                              "lstrip": False, "rstrip": False, "normalized": True, "special": False})


@pytest.mark.parametrize("base,edit", [("mistral-7b-v0.1", _nfkc_first), ("mistral-7b-v0.3", _metaspace_split),
                                       ("llama2", _other_prepend), ("llama2", _replace_tab),
                                       ("mistral-7b-v0.1", _normalized_added), ("mistral-7b-v0.1", _unsafe_marker)])
def test_other_steps_keep_the_python_route(tmp_path, base, edit):
    path = _variant(tmp_path, base, edit)
    enc = _check_against_hf(path, routed=False)
    assert enc._hf._marker_prepend is None


def test_encode_marked_needs_a_rule():
    from ctok._encoder import CoreEncoder, MARKER_PREPEND_NONEMPTY, MARKER_WORDS

    toks = [bytes([b]) for b in range(256)] + ["\u2581".encode()]
    core = CoreEncoder(toks, [], pretok_kind=MARKER_WORDS, marker="\u2581".encode(), char_level=True)
    with pytest.raises(ValueError):
        core.encode_marked("a b")
    with pytest.raises(ValueError):
        CoreEncoder(toks, [], marker_prepend=MARKER_PREPEND_NONEMPTY)
    with pytest.raises(ValueError):
        CoreEncoder(toks, [], pretok_kind=MARKER_WORDS, marker=b"\xe2\x96\x81", marker_prepend=7)
    marked = CoreEncoder(toks, [], pretok_kind=MARKER_WORDS, marker="\u2581".encode(), char_level=True,
                         marker_prepend=MARKER_PREPEND_NONEMPTY)
    assert marked.encode_marked("") == []
    assert marked.encode_marked("a b") == marked.encode_ordinary("\u2581a\u2581b".encode())


def _longer_added(d):
    # "<s>abcd", an added token that "<s>" starts: a prompt holding "<s>abc" and then not "d" parts from one holding
    # the longer token three bytes after "<s>" ends.
    d["added_tokens"].append({"id": max(d["model"]["vocab"].values()) + 1, "content": "<s>abcd", "single_word": False,
                              "lstrip": False, "rstrip": False, "normalized": False, "special": True})


def test_template_cache_backs_off_by_the_longest_added_token(tmp_path):
    """The specials cache resumes after an added token only where every token before it is decided by the
    prompts' common part: "<s>" ends four bytes into a common "...<s>abc", where a cached "<s>abcX" and a new
    "<s>abcd" (a token of its own) part; resuming after "<s>" would keep the cached reading."""
    path = _variant(tmp_path, "mistral-7b-v0.1", _longer_added)
    enc = ctok.load(path)
    ref = tokenizers.Tokenizer.from_file(path)
    assert enc._specials_cache is not None
    filler = "<s>" + "word Word, 12 " * 200 + "</s>"      # resumable after "<s>" and "</s>"
    for tail in ["abcX more", "abcX more", "abcd more"]:
        text = filler + "<s>" + tail
        assert_same_ids(enc.encode(text, allowed_special="all"), _ref_ids(ref, text, special_as_text=False),
                        text[-20:], label="template cache back-off")
    assert enc.prefix_cache_stats()["specials"]["hits"] >= 1
