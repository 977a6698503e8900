"""stream_decoder(): each step's text equals HF's DecodeStream for tokenizer.json files, the steps plus
flush() concatenate to decode() for every family, and random id streams (ids that cut characters
apart) behave the same."""
import random

import pytest
import tokenizers
from tokenizers.decoders import DecodeStream

import ctok
from _shared import corpus_names, corpus_text, reference_encoding, vocab_path

HF_FILES = ["gpt2/tokenizer.json", "llama3-hf/tokenizer.json", "qwen3/tokenizer.json", "deepseek-v3/tokenizer.json",
            "mistral-7b-v0.1/tokenizer.json", "mistral-7b-v0.1/tokenizer.metaspace.json",
            "mistral-7b-v0.3/tokenizer.json", "llama2/tokenizer.json", "gpt-neox-20b/tokenizer.json"]


def _streams(enc, seed):
    text = "".join(corpus_text(n, 1500) for n in corpus_names()) + " 🙂👍🏽  end\n\n x"
    ids = enc.encode(text, allowed_special="all")
    rnd = random.Random(seed)
    top = min(enc.n_vocab, 60000)
    noise = [rnd.randrange(0, top) for _ in range(600)]
    return [ids, noise]


@pytest.mark.parametrize("rel", HF_FILES)
@pytest.mark.parametrize("skip", [False, True])
def test_stream_equals_hf_decode_stream(rel, skip):
    path = str(vocab_path(*rel.split("/")))
    enc = ctok.load(path)
    hf = tokenizers.Tokenizer.from_file(path)
    for seq in _streams(enc, 7):
        seq = [i for i in seq if hf.id_to_token(i) is not None]
        dec = enc.stream_decoder(skip_special_tokens=skip)
        ref = DecodeStream(skip_special_tokens=skip)
        pieces = []
        for i in seq:
            got = dec.step(i)
            assert got == (ref.step(hf, i) or ""), (rel, i)
            pieces.append(got)
        pieces.append(dec.flush())
        assert "".join(pieces) == enc.decode(seq, skip_special_tokens=skip)


@pytest.mark.parametrize("family,file", [("o200k_base", "o200k_base.tiktoken"),
                                         ("cl100k_base", "cl100k_base.tiktoken"), ("kimi-k2", "tiktoken.model")])
def test_stream_concatenates_to_decode_tiktoken(family, file):
    ref = reference_encoding(family)
    enc = ctok.load(str(vocab_path(family, file)))
    for seq in _streams(enc, 11):
        seq = [i for i in seq if i < enc.n_vocab and enc._core.token_bytes(i) is not None]
        dec = enc.stream_decoder()
        out = "".join(dec.step(i) for i in seq) + dec.flush()
        assert out == ref.decode_bytes(seq).decode("utf-8", "replace")


def _fused_variant(tmp_path, decoders):
    """The Mistral 7B v0.1 file with another decoder chain (Replace* + ByteFallback + Fuse + Strip*)."""
    import json
    data = json.loads(vocab_path("mistral-7b-v0.1", "tokenizer.json").read_text(encoding="utf-8"))
    data["decoder"] = {"type": "Sequence", "decoders": decoders}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


_REPLACE = {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}
_FUSED_CHAINS = {
    "mistral": [_REPLACE, {"type": "ByteFallback"}, {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0}],
    "no-strip": [_REPLACE, {"type": "ByteFallback"}, {"type": "Fuse"}],
    "strip-two": [_REPLACE, {"type": "ByteFallback"}, {"type": "Fuse"},
                  {"type": "Strip", "content": " ", "start": 2, "stop": 0}],
    "two-strips-other-char": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": "\u00e9"},
                              {"type": "Replace", "pattern": {"String": "a"}, "content": " "},
                              {"type": "ByteFallback"}, {"type": "Fuse"},
                              {"type": "Strip", "content": "\u00e9", "start": 3, "stop": 0},
                              {"type": "Strip", "content": " ", "start": 1, "stop": 0}],
}
# Strip with stop > 0: tokenizers 0.23.3 panics on an empty text there ("index out of bounds"), so these are
# compared with ctok's Python window decoder over the Python decoder chain (tests/test_hf.py checks that chain
# against HF's decode where HF does not panic).
_FUSED_CHAINS_STOP = {
    "strips-both-ends": [_REPLACE, {"type": "ByteFallback"}, {"type": "Fuse"},
                         {"type": "Strip", "content": " ", "start": 2, "stop": 3}],
    "two-strips-stop": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": "\u00e9"},
                        {"type": "ByteFallback"}, {"type": "Fuse"},
                        {"type": "Strip", "content": "\u00e9", "start": 3, "stop": 1},
                        {"type": "Strip", "content": " ", "start": 1, "stop": 2}],
}


@pytest.mark.parametrize("chain", sorted(_FUSED_CHAINS))
@pytest.mark.parametrize("skip", [False, True])
def test_fused_chain_stream_is_native_and_equals_decode_stream(tmp_path, chain, skip):
    path = _fused_variant(tmp_path, _FUSED_CHAINS[chain])
    enc = ctok.load(path)
    hf = tokenizers.Tokenizer.from_file(path)
    assert type(enc.stream_decoder()).__name__ == "FusedWindowDecoder"
    rnd = random.Random(5)
    byte_ids = [hf.token_to_id(f"<0x{b:02X}>") for b in range(256)]
    spaces = [hf.token_to_id(t) for t in ("\u2581", "\u2581\u2581", "\u2581a", "a", "\u2581\u2581\u2581\u2581")]
    text_ids = enc.encode("  Tokyo 東京 🙂 é  x  ")
    pools = [byte_ids, spaces, text_ids, [0, 1, 2], [enc.n_vocab + 5]]    # unknown ids are skipped, as by HF
    streams = []
    for _ in range(40):
        weights = [rnd.random() for _ in pools]
        streams.append([rnd.choice(rnd.choices(pools, weights)[0]) for _ in range(rnd.randint(0, 60))])
    # valid multi-byte characters spelled with byte tokens, cut anywhere by other tokens
    for _ in range(20):
        seq = []
        for ch in rnd.choices("é東🙂a ", k=12):
            seq += [byte_ids[b] for b in ch.encode("utf-8")]
            if rnd.random() < 0.3:
                seq.append(rnd.choice(spaces + [1]))
        streams.append(seq)
    raised = undefined = 0
    for seq in streams:
        dec = enc.stream_decoder(skip_special_tokens=skip)
        ref = DecodeStream(skip_special_tokens=skip)
        pieces = []
        for i in seq:
            try:
                want = ref.step(hf, i) or ""
            except Exception:   # DecodeStream's InvalidPrefix: a Strip took from the context what it gave back
                with pytest.raises(ValueError, match="prefix"):
                    dec.step(i)
                raised += 1
                break
            except BaseException as e:
                # tokenizers' Strip decoder panics when its start and stop overlap (ctok gives "", as the
                # Python version of the chain): no reference for the rest of this stream.
                if type(e).__name__ != "PanicException":
                    raise
                undefined += 1
                break
            got = dec.step(i)
            assert got == want, (chain, seq, i)
            pieces.append(got)
        else:
            pieces.append(dec.flush())
            try:
                whole = hf.decode([i for i in seq if i < enc.n_vocab], skip_special_tokens=skip)
            except BaseException as e:
                if type(e).__name__ != "PanicException":     # Strip's overlap panic, as above
                    raise
                continue
            # ByteFallback replaces a whole invalid byte run: a stream may have given a character of a run
            # that later bytes make invalid, and cannot take it back; a Strip of more than one leading
            # character acts on each window's context again.  Otherwise streams concatenate to decode().
            if "\ufffd" not in whole and chain in ("mistral", "no-strip"):
                assert "".join(pieces) == whole, (chain, seq)
    assert raised + undefined < len(streams) // 2


@pytest.mark.parametrize("chain", sorted(_FUSED_CHAINS_STOP))
def test_fused_chain_with_trailing_strip_equals_window_decoder(tmp_path, chain):
    from ctok.core import _WindowStreamDecoder
    enc = ctok.load(_fused_variant(tmp_path, _FUSED_CHAINS_STOP[chain]))
    rnd = random.Random(9)
    ids = enc.encode("  Tokyo 東京 🙂 é  x  a ")
    pool = list(range(3, 259)) + [28705, 259, 28708, 0, 1, 2] + ids
    for _ in range(60):
        seq = [rnd.choice(pool) for _ in range(rnd.randint(0, 50))]
        native, ref = enc.stream_decoder(), _WindowStreamDecoder(enc, False)
        assert type(native).__name__ == "FusedWindowDecoder"
        for i in seq:
            try:
                want = ref.step(i)
            except ValueError:
                with pytest.raises(ValueError):
                    native.step(i)
                break
            assert native.step(i) == want, (chain, seq, i)
        else:
            assert native.flush() == ref.flush()


@pytest.mark.parametrize("native", [True, False])
def test_fused_flush_keeps_text_a_later_byte_made_invalid(native):
    from ctok.core import _WindowStreamDecoder
    path = str(vocab_path("mistral-7b-v0.1", "tokenizer.json"))
    enc = ctok.load(path)
    hf = tokenizers.Tokenizer.from_file(path)
    seq = [hf.token_to_id(f"<0x{b:02X}>") for b in (0x0E, 0xC7, 0xDD, 0x01)]
    dec = enc.stream_decoder() if native else _WindowStreamDecoder(enc, False)
    ref = DecodeStream(skip_special_tokens=False)
    assert [dec.step(i) for i in seq] == [ref.step(hf, i) or "" for i in seq] == ["\x0e", "", "", ""]
    assert hf.decode(seq) == "\ufffd" * 4                  # the whole run is invalid once 0xC7 0xDD 0x01 follow
    assert dec.flush() == hf.decode(seq[1:]) == "\ufffd" * 3


def test_stream_decoders_of_one_encoding_are_independent():
    enc = ctok.load(str(vocab_path("mistral-7b-v0.1", "tokenizer.json")))
    ids = enc.encode("東京 and 🙂 again")
    a, b = enc.stream_decoder(), enc.stream_decoder()
    out_a = [a.step(i) for i in ids]
    out_b = [b.step(i) for i in ids]
    assert out_a == out_b
    assert "".join(out_a) + a.flush() == enc.decode(ids)


@pytest.mark.parametrize("rel", ["mistral-7b-v0.1/tokenizer.json", "llama3-hf/tokenizer.json"])
def test_native_stream_decoders_on_hostile_ids(rel):
    """Negative, unknown, huge and non-int ids: the compiled decoders skip unknown ids as the Python window
    decoder does (HF skips them too), and refuse non-ints with TypeError, never reading out of bounds."""
    from ctok.core import _WindowStreamDecoder
    enc = ctok.load(str(vocab_path(*rel.split("/"))))
    rnd = random.Random(3)
    edge = [-1, -2**31, enc.n_vocab, enc.n_vocab + 1, 2**32 - 1, 2**32, 2**40, 2**62]
    for _ in range(30):
        seq = [rnd.choice(edge) if rnd.random() < 0.3 else rnd.randrange(0, enc.n_vocab) for _ in range(80)]
        native, ref = enc.stream_decoder(), _WindowStreamDecoder(enc, False)
        for i in seq:
            try:
                want = ref.step(i)
            except ValueError:
                break
            assert native.step(i) == want
            if i < 0 or i >= enc.n_vocab:
                assert want == ""
    dec = enc.stream_decoder()
    for bad in (None, "1", 1.5):
        with pytest.raises(TypeError):
            dec.step(bad)
    with pytest.raises(OverflowError):
        dec.step(2**70)
