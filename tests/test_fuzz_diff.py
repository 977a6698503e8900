"""Differential fuzzing (issue 8): hypothesis text from every block-like run of Unicode 16 and the tricky classes
(whitespace kinds, combining marks, digits of many scripts, contractions with ' and ’ in any case, Han, kana,
Hangul, emoji ZWJ sequences, flags, tags and skin tones, lone surrogates, NUL and control characters,
special-token look-alikes), compared with the references on every shared family:

* tiktoken families (``_shared.TIKTOKEN_FAMILIES``) against tiktoken built from MANIFEST's recipe;
* tokenizer.json families against HuggingFace ``tokenizers``;

with the piece and prefix caches on (``ctok.load``) and off (a second encoding built with
``CTOK_PIECE_CACHE_BYTES=0`` and ``set_prefix_cache(0)``), one text at a time and in batches on two threads,
plus decode round trips and the stream decoder.

Budget: ``CTOK_FUZZ_EXAMPLES`` examples per test and family (default 40), a fixed seed unless ``CTOK_FUZZ_SEED``
is set; see tests/_reliability.py and docs/pages/reliability.md for long runs.
"""
from __future__ import annotations

import pytest

from _reliability import (HF_FILES, fuzz_settings, has_surrogate, hf_case, text_strategy, tiktoken_case)
from _shared import FAMILY_BY_ID, TIKTOKEN_FAMILIES, assert_same_ids

pytest.importorskip("hypothesis")
pytest.importorskip("tiktoken")
ctok = pytest.importorskip("ctok")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ctok.errors import DisallowedSpecialError, InvalidTextError  # noqa: E402

TEXT = text_strategy()
TEXT_VALID = text_strategy(surrogates=False)


@pytest.fixture(scope="module", params=[f.id for f in TIKTOKEN_FAMILIES])
def tk(request, tmp_path_factory):
    return tiktoken_case(FAMILY_BY_ID[request.param], tmp_path_factory.mktemp("fuzz"))


@pytest.fixture(scope="module", params=HF_FILES)
def hf(request):
    pytest.importorskip("tokenizers")
    return hf_case(request.param)


# ---------------------------------------------------------------------------------------------------------------
# tiktoken families


def check_tiktoken_text(case, text):
    ref = case.ref
    exp = ref.encode_ordinary(text)
    exp_all = ref.encode(text, allowed_special="all")
    try:
        exp_default = ref.encode(text)
    except ValueError:
        exp_default = None
    for label, enc in (("on", case.on), ("off", case.off)):
        tag = f"{case.id}[{label}]"
        assert_same_ids(enc.encode_ordinary(text), exp, text, f"{tag} encode_ordinary:")
        assert_same_ids(enc.encode(text, allowed_special="all"), exp_all, text, f"{tag} encode(all):")
        if exp_default is None:
            with pytest.raises(DisallowedSpecialError):
                enc.encode(text)
            with pytest.raises(ValueError):
                enc.count(text)
        else:
            assert_same_ids(enc.encode(text), exp_default, text, f"{tag} encode():")
            assert enc.count(text) == len(exp_default)
        assert enc.count(text, disallowed_special=()) == len(exp)
    enc = case.on
    # decode: the reference's bytes and text, and the round trip of valid text
    assert enc.decode_bytes(exp_all) == ref.decode_bytes(exp_all)
    decoded = enc.decode(exp_all)
    assert decoded == ref.decode(exp_all)
    if not has_surrogate(text):
        assert enc.decode(exp) == text
    # the stream decoder's steps concatenate to decode()
    dec = enc.stream_decoder()
    assert "".join(dec.step(i) for i in exp_all) + dec.flush() == decoded


def test_fuzz_tiktoken_text(tk):
    @fuzz_settings(salt="text/" + tk.id)
    @given(text=TEXT)
    def run(text):
        check_tiktoken_text(tk, text)

    run()


def test_fuzz_tiktoken_batch(tk):
    """Batches on two threads (the native multi-text path and the shared pool) equal the reference per text."""

    @fuzz_settings(scale=0.5, salt="batch/" + tk.id)
    @given(texts=st.lists(TEXT, min_size=2, max_size=12))
    def run(texts):
        ref = tk.ref
        exp = [ref.encode_ordinary(t) for t in texts]
        exp_all = [ref.encode(t, allowed_special="all") for t in texts]
        any_special = False
        for t in texts:
            try:
                ref.encode(t)
            except ValueError:
                any_special = True
        for label, enc in (("on", tk.on), ("off", tk.off)):
            got = enc.encode_ordinary_batch(texts, num_threads=2)
            for g, e, t in zip(got, exp, texts):
                assert_same_ids(g, e, t, f"{tk.id}[{label}] encode_ordinary_batch:")
            got = enc.encode_batch(texts, num_threads=2, allowed_special="all")
            for g, e, t in zip(got, exp_all, texts):
                assert_same_ids(g, e, t, f"{tk.id}[{label}] encode_batch(all):")
            if any_special:
                with pytest.raises(DisallowedSpecialError):
                    enc.encode_batch(texts, num_threads=2)
            else:
                assert enc.encode_batch(texts, num_threads=2) == exp
            ids, offsets = enc.encode_batch_flat(texts, num_threads=2, disallowed_special=())
            assert len(offsets) == len(texts) + 1
            for i, e in enumerate(exp):
                assert ids[offsets[i]:offsets[i + 1]].tolist() == e
        assert tk.on.decode_batch(exp_all) == [ref.decode(e) for e in exp_all]

    run()


def test_fuzz_tiktoken_shared_prefix(tk):
    """Prompts that share a long prefix (what the prefix cache reuses), cut anywhere: equal to the reference with
    the default cache, with both caches off, and with tiny caches that evict all the time."""
    tiny = getattr(tk, "_tiny", None)
    if tiny is None:
        from _reliability import fresh_encoding

        tiny = tk._tiny = fresh_encoding(tk.path, piece_cache_bytes=4096, prefix_cache_bytes=8192, **tk.load_kwargs)

    @fuzz_settings(scale=0.25, salt="prefix/" + tk.id)
    @given(base=TEXT, tails=st.lists(TEXT, min_size=1, max_size=4), cut=st.integers(0, 4000))
    def run(base, tails, cut):
        body = base or "You are a helpful assistant. "
        prefix = (body * (1 + 1200 // max(1, len(body.encode("utf-8", "replace")))))
        prefix = prefix[:max(1, min(cut + 1100, len(prefix)))]
        texts = [prefix]
        for t in tails:
            texts += [prefix + t, texts[-1] + t]
        for text in texts:
            exp = tk.ref.encode_ordinary(text)
            for enc in (tk.on, tk.off, tiny):
                assert_same_ids(enc.encode_ordinary(text), exp, text, f"{tk.id} shared prefix:")

    run()


# ---------------------------------------------------------------------------------------------------------------
# tokenizer.json families


def check_hf_text(case, text):
    if has_surrogate(text):
        # HF refuses text that is not valid Unicode (TypeError); ctok with its documented error (a ValueError)
        with pytest.raises(Exception):
            case.ref.encode(text)
        for enc in (case.on, case.off):
            with pytest.raises(InvalidTextError):
                enc.encode(text, allowed_special="all")
            with pytest.raises(InvalidTextError):
                enc.encode_ordinary(text)
        return
    want = case.ref_ids(text)
    want_add = case.ref_ids(text, add_special_tokens=True)
    want_plain = case.ref_ids(text, encode_special_tokens=True)
    has_special = any(s in text for s in case.on.special_tokens)
    for label, enc in (("on", case.on), ("off", case.off)):
        tag = f"{case.id}[{label}]"
        assert_same_ids(enc.encode(text, allowed_special="all"), want, text, f"{tag} encode(all):")
        assert_same_ids(enc.encode(text, allowed_special="all", add_special_tokens=True), want_add, text,
                        f"{tag} encode(all, add_special_tokens):")
        assert_same_ids(enc.encode_ordinary(text), want_plain, text, f"{tag} encode_ordinary:")
        if has_special:
            with pytest.raises(DisallowedSpecialError):
                enc.encode(text)
        else:
            assert_same_ids(enc.encode(text), want_plain, text, f"{tag} encode():")
    enc = case.on
    for ids in (want_add, want_plain):
        for skip in (False, True):
            got = enc.decode(ids, skip_special_tokens=skip)
            exp = case.ref.decode(ids, skip_special_tokens=skip)
            assert got == exp, f"{case.id}: decode(skip_special_tokens={skip}) {got[:120]!r} != {exp[:120]!r}"
    from tokenizers.decoders import DecodeStream

    dec = enc.stream_decoder()
    ref_stream = DecodeStream(skip_special_tokens=False)
    pieces = []
    for i in want_add:
        got = dec.step(i)
        assert got == (ref_stream.step(case.ref, i) or ""), f"{case.id}: stream step {i} differs for {text[:80]!r}"
        pieces.append(got)
    pieces.append(dec.flush())
    assert "".join(pieces) == enc.decode(want_add)


def test_fuzz_hf_text(hf):
    @fuzz_settings(salt="hf-text/" + hf.id)
    @given(text=TEXT)
    def run(text):
        check_hf_text(hf, text)

    run()


def test_fuzz_hf_batch(hf):
    @fuzz_settings(scale=0.25, salt="hf-batch/" + hf.id)
    @given(texts=st.lists(TEXT_VALID, min_size=2, max_size=10))
    def run(texts):
        want = [hf.ref_ids(t) for t in texts]
        for label, enc in (("on", hf.on), ("off", hf.off)):
            got = enc.encode_batch(texts, num_threads=2, allowed_special="all")
            for g, w, t in zip(got, want, texts):
                assert_same_ids(g, w, t, f"{hf.id}[{label}] encode_batch(all):")
        plain = [hf.ref_ids(t, encode_special_tokens=True) for t in texts]
        got = hf.on.encode_ordinary_batch(texts, num_threads=2)
        for g, w, t in zip(got, plain, texts):
            assert_same_ids(g, w, t, f"{hf.id} encode_ordinary_batch:")
        assert hf.on.decode_batch(want) == [hf.ref.decode(w, skip_special_tokens=False) for w in want]

    run()
