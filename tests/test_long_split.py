"""One long text encoded in parts on several threads (CoreEncoder.encode_span / join_spans, used by the
batch APIs for texts of LONG_TEXT_SPLIT_BYTES and more) equals the sequential encode, whatever the cut points:
inside multi-byte characters, whitespace runs, letter and digit runs, and where the parts' parses only meet
after more pieces than a span records (a long digit run cut off its groups of three), which takes the
sequential fallback.  The batch APIs are checked against tiktoken on texts long enough to be cut."""
from __future__ import annotations

import random

import numpy as np
import pytest

from _shared import TIKTOKEN_FAMILIES, adversarial_strings, assert_same_ids, corpus_text, vocab_path

ctok = pytest.importorskip("ctok")
from ctok import core as core_mod  # noqa: E402

HF_FILES = ["gpt2/tokenizer.json", "llama3-hf/tokenizer.json", "qwen3/tokenizer.json", "deepseek-v3/tokenizer.json",
            "mistral-7b-v0.1/tokenizer.json"]
TEXTS = ["en_botchan.txt", "zh_classical.txt", "emoji-test.txt", "code_python.txt", "ar_1001_nights.txt"]


def _encodings():
    from _shared import reference_encoding  # noqa: F401 - imported for its skip behaviour
    out = []
    for fam in TIKTOKEN_FAMILIES:
        out.append(pytest.param(("tiktoken", fam.folder, fam.recipe), id=fam.id))
    for f in HF_FILES:
        out.append(pytest.param(("hf", f, None), id=f.split("/")[0]))
    return out


def _load(spec):
    kind, where, recipe = spec
    if kind == "hf":
        return ctok.load(str(vocab_path(*where.split("/"))))
    import json
    folder = vocab_path(where)
    r = json.loads((folder / recipe).read_text(encoding="utf-8"))
    return ctok.load(str(folder / r["file"]), pattern=r["pat_str"], special_tokens=r["special_tokens"])


def _split_encode(core, data, cuts):
    spans = [core.encode_span(data, cuts[i], cuts[i + 1]) for i in range(len(cuts) - 1)]
    return core.join_spans(data, spans)


def _texts():
    yield from ((n, corpus_text(n, 60_000)) for n in TEXTS)
    yield from adversarial_strings()
    yield "digits", "7" * 5000 + " x " + "12" * 3000
    yield "letters", "a" * 20000 + " " * 3000 + "b"


@pytest.mark.parametrize("spec", _encodings())
def test_parts_equal_sequential(spec):
    enc = _load(spec)
    core = enc._core
    if not core.can_split:
        pytest.skip("this pretokenizer is not split (whole text or marker words)")
    rnd = random.Random(5)
    for name, text in _texts():
        data = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace").encode("utf-8")
        if not data:
            continue
        want = core.encode_ordinary(data)
        for k in (2, 3, 5):
            cuts = [0] + sorted(rnd.randrange(len(data) + 1) for _ in range(k - 1)) + [len(data)]
            assert _split_encode(core, data, cuts) == want, (name, cuts)


def test_parses_that_meet_late_take_the_sequential_path():
    enc = ctok.get_encoding("o200k_base")
    core = enc._core
    data = b"x " + b"7" * 30000 + b" y"          # groups of three digits: a cut at 3k + 1 never re-aligns
    want = core.encode_ordinary(data)
    for cut in (3, 4, 5, 1000, 29999):
        assert _split_encode(core, data, [0, cut, len(data)]) == want, cut
    assert _split_encode(core, data, [0, 4, 5, 6, len(data)]) == want


def test_join_rejects_foreign_or_partial_spans():
    enc = ctok.get_encoding("o200k_base")
    other = ctok.get_encoding("cl100k_base")
    core, data = enc._core, b"hello world " * 100
    whole = core.encode_span(data, 0, len(data))
    assert core.join_spans(data, [whole]) == core.encode_ordinary(data)
    with pytest.raises(ValueError):
        core.join_spans(data, [other._core.encode_span(data, 0, len(data))])
    with pytest.raises(ValueError):
        core.join_spans(data + b"x", [whole])
    with pytest.raises(ValueError):
        core.join_spans(data, [core.encode_span(data, 0, 10)])
    with pytest.raises(ValueError):
        core.join_spans(data, [])
    with pytest.raises(TypeError):
        core.join_spans(data, [whole, 3])
    with pytest.raises(ValueError):
        core.encode_span(data, 5, 2)


@pytest.mark.parametrize("threads", [2, 3, 4])
def test_batch_apis_cut_long_texts_exactly(threads, monkeypatch):
    from _shared import reference_encoding
    ref = reference_encoding("o200k_base")
    enc = ctok.get_encoding("o200k_base")
    monkeypatch.setattr(core_mod, "LONG_TEXT_SPLIT_BYTES", 20_000)      # cut texts of the size CI can afford
    long_en = corpus_text("en_botchan.txt", 90_000)
    long_zh = corpus_text("zh_classical.txt", 90_000)
    texts = ["", "short", long_en, "7" * 50_000, long_zh, "mid " * 100, " " * 40_000 + "a"] * 2
    want = [ref.encode_ordinary(t) for t in texts]
    assert enc.encode_ordinary_batch(texts, num_threads=threads) == want
    assert enc.encode_batch(texts, num_threads=threads) == want
    ids, offsets = enc.encode_batch_flat(texts, num_threads=threads)
    assert ids.dtype == np.uint32 and offsets.dtype == np.int64
    assert offsets.tolist() == [0] + list(np.cumsum([len(w) for w in want]))
    for i, w in enumerate(want):
        assert_same_ids(ids[offsets[i]:offsets[i + 1]].tolist(), w, texts[i])
