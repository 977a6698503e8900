"""tokenizer.json files: `encode(text, allowed_special=S)` for a set S of special tokens' names.

HF tokenizers defines the two ends: every special token recognised (`encode`), or none (`encode_special_tokens =
True`, which still finds each special token in its leftmost-longest scan and then drops the match, so its text
stays text).  A set S recognises the tokens of S and treats the others as that flag treats them all.  The
reference is HF itself: the same file with the tokens of S marked non-special, encoded with
`encode_special_tokens = True`.  Under the default `disallowed_special="all"` a text holding another special
token's text raises, as tiktoken does; a text holding none goes to the core's split at every special token
(the Python pipeline forbidden here proves it) when the file has one."""
from __future__ import annotations

import json
import random

import pytest

from _reliability import has_surrogate
from _shared import (PythonPipelineUsed, assert_same_ids, corpus_names, corpus_text, forbid_python_pipeline,
                     vocab_path)

ctok = pytest.importorskip("ctok")
tokenizers = pytest.importorskip("tokenizers")

SEED = 20261205

# file -> whether the core splits its templates (the compiled route for subsets whose others are absent)
FILES = {
    "qwen3/tokenizer.json": True,
    "deepseek-v3/tokenizer.json": True,
    "llama3-hf/tokenizer.json": True,
    "mistral-7b-v0.1/tokenizer.json": True,
    "mistral-7b-v0.3/tokenizer.json": True,   # Metaspace "first": only the text at offset 0 gets the marker
    "llama2/tokenizer.json": True,
    "gpt-neox-20b/tokenizer.json": True,
}


def _reference(path, allowed):
    """HF with the special tokens `allowed` recognised and the others encoded as text."""
    spec = json.loads(path.read_text(encoding="utf-8"))
    for tok in spec.get("added_tokens", []):
        if tok["content"] in allowed:
            tok["special"] = False
    ref = tokenizers.Tokenizer.from_str(json.dumps(spec))
    ref.encode_special_tokens = True
    return ref


def _subsets(enc, rnd):
    specials = sorted(enc.special_tokens)
    used = [n for n in specials if any(k in n for k in ("start", "end", "User", "Assistant", "<s>", "</s>",
                                                           "INST", "think", "eot", "header"))]
    out = [frozenset(used[:2] or specials[:2]), frozenset(specials[:1])]
    for _ in range(3):
        out.append(frozenset(rnd.sample(specials, min(len(specials), rnd.randint(1, 4)))))
    return out


def _texts(enc, allowed, rnd, n):
    specials = sorted(enc.special_tokens)
    plain_added = sorted(set(enc._hf.added_tokens) - set(specials))
    names = sorted(allowed) + rnd.sample(specials, min(4, len(specials))) + plain_added[:4]
    # look-alikes: each name's first and last characters cut off, glued to neighbours
    atoms = names + [a[:k] for a in names for k in (1, len(a) - 1) if k > 0] + [
        "hello", " world", "  ", "\n", "\n\n", " ", "123", "'s", "user", "\u00e9", "e\u0301", "中文", "😀", "▁",
        "x"]
    prose = [corpus_text(name, 400) for name in corpus_names()]
    out = []
    for _ in range(n):
        parts = [rnd.choice(atoms) for _ in range(rnd.randint(1, 10))]
        if rnd.random() < 0.3:
            parts.insert(rnd.randrange(len(parts) + 1), rnd.choice(prose)[rnd.randrange(200):])
        out.append("".join(parts))
    return out


@pytest.fixture(scope="module", params=sorted(FILES))
def loaded(request):
    path = vocab_path(*request.param.split("/"))
    return request.param, path, ctok.load(str(path))


def test_subsets_match_hf_with_the_others_as_text(loaded):
    """disallowed_special=(): whatever special tokens' text the text holds, S's are ids, the others text."""
    name, path, enc = loaded
    rnd = random.Random(SEED)
    for allowed in _subsets(enc, rnd):
        ref = _reference(path, allowed)
        for text in _texts(enc, allowed, rnd, 60):
            if has_surrogate(text):
                continue
            for bos in (False, True):
                want = ref.encode(text, add_special_tokens=bos).ids
                got = enc.encode(text, allowed_special=set(allowed), disallowed_special=(), add_special_tokens=bos)
                assert_same_ids(got, want, text, label=f"{name} allowed={sorted(allowed)} bos={bos}")


def test_subsets_raise_on_the_others_and_split_natively(loaded, monkeypatch):
    """disallowed_special="all" (the default): another special token's text raises naming it; texts holding
    none take the core's split (the Python pipeline forbidden) and get HF's ids."""
    name, path, enc = loaded
    rnd = random.Random(SEED + 1)
    cases = []
    for allowed in _subsets(enc, rnd):
        ref = _reference(path, allowed)
        others = set(enc.special_tokens) - allowed
        for text in _texts(enc, allowed, rnd, 60):
            if has_surrogate(text):
                continue
            present = [o for o in others if o in text]
            if present:
                with pytest.raises(ctok.DisallowedSpecialError):
                    enc.encode(text, allowed_special=allowed)
                continue
            cases.append((allowed, text, ref.encode(text, add_special_tokens=False).ids,
                          ref.encode(text, add_special_tokens=True).ids))
    assert len(cases) > 50
    if not FILES[name]:
        return
    assert enc._split_all_route is not None
    forbid_python_pipeline(enc, monkeypatch)
    for allowed, text, want, want_bos in cases:
        if not enc._split_all_route(text) is None:     # text the normal forms change goes the Python way
            assert_same_ids(enc.encode(text, allowed_special=allowed), want, text, label=f"{name} {sorted(allowed)}")
            assert_same_ids(enc.encode(text, allowed_special=set(allowed), add_special_tokens=True), want_bos, text,
                            label=f"{name} {sorted(allowed)} bos")


def test_the_two_ends_are_hf_itself(loaded):
    """S = every name is HF's encode; S = () with disallowed_special=() is encode_special_tokens."""
    name, path, enc = loaded
    rnd = random.Random(SEED + 2)
    every = frozenset(enc.special_tokens)
    ref = tokenizers.Tokenizer.from_file(str(path))
    for text in _texts(enc, every, rnd, 40):
        if has_surrogate(text):
            continue
        ref.encode_special_tokens = False
        want = ref.encode(text, add_special_tokens=False).ids
        assert_same_ids(enc.encode(text, allowed_special=set(every)), want, text, label=f"{name} every name")
        assert_same_ids(enc.encode(text, allowed_special="all"), want, text, label=f"{name} all")
        ref.encode_special_tokens = True
        want = ref.encode(text, add_special_tokens=False).ids
        assert_same_ids(enc.encode(text, disallowed_special=()), want, text, label=f"{name} none")


def test_special_tokens_as_text_take_the_compiled_route(loaded, monkeypatch):
    """encode_ordinary, and encode with disallowed_special=() and nothing allowed, encode every special token's text
    as text (HF's encode_special_tokens).  HF drops such matches without splitting, so the core encodes the text
    as it encodes text holding no added token (HFPipeline.ordinary_tokens): no Python stage runs, unless a
    non-special added token the core cannot split is in the text, or the normal forms change it."""
    name, path, enc = loaded
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.encode_special_tokens = True
    rnd = random.Random(SEED + 3)
    texts = [t for t in _texts(enc, frozenset(enc.special_tokens), rnd, 150)
             if not has_surrogate(t) and any(s in t for s in enc.special_tokens)]
    want = {t: ref.encode(t, add_special_tokens=False).ids for t in texts}
    forbid_python_pipeline(enc, monkeypatch)
    plain_added = [a for a in enc._hf.added_tokens if a not in enc.special_tokens]
    compiled = 0
    for text in texts:
        try:
            got = enc.encode_ordinary(text)
        except PythonPipelineUsed:
            # only a non-special added token, or text the normal forms change, may need the pipeline
            assert any(a in text for a in plain_added) or enc._split_all_route(text) is None, (name, text)
            continue
        compiled += 1
        assert_same_ids(got, want[text], text, label=f"{name} encode_ordinary")
        assert_same_ids(enc.encode(text, disallowed_special=()), want[text], text, label=f"{name} disallowed=()")
    assert compiled > len(texts) // 3, (name, compiled, len(texts))


def test_a_special_token_that_hides_an_added_token_keeps_the_pipeline(tmp_path):
    """HF finds a special token and drops the match: an added token starting inside it is not found there
    (`<xy>` hides `y>`).  The compiled split would find it, so such files keep sending text that holds a special
    token's text the Python way (ctok.hf._hides), and the ids stay HF's."""
    spec = json.loads(vocab_path("gpt2", "tokenizer.json").read_text(encoding="utf-8"))
    n = max(spec["model"]["vocab"].values()) + 1
    spec["added_tokens"] += [
        {"id": n + 1, "content": "<xy>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True},
        {"id": n + 2, "content": "y>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False}]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    enc = ctok.load(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.encode_special_tokens = True
    for text in ["a<xy>b", "y> <xy> y>", "<x<xy>", "<xy>y>", "<xyy>", "no tokens here"]:
        want = ref.encode(text, add_special_tokens=False).ids
        assert_same_ids(enc.encode_ordinary(text), want, text)
        assert_same_ids(enc.encode(text, disallowed_special=()), want, text)
    from ctok.hf import _hides
    assert _hides([("<xy>", False)], [("y>", False)])
    assert _hides([("<xy>", False)], [("<x", False)])           # same place, shorter: the special wins
    assert not _hides([("<x", False)], [("<xy>", False)])       # same place, longer: the other wins
    assert not _hides([("<xy>", False)], [("y>", True)])        # another pass
    assert not _hides([("<xy>", False)], [("zz", False)])
