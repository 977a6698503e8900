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
