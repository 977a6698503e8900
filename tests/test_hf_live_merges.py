"""Byte-level merge lists keep only the merges that can fire (_vocab._keep_live_pairs).

A tokenizer.json merge list may name several merges that make one token (Llama 3's lists every split of each
token in two: 280,147 merges for 128,000 tokens).  ctok keeps, per token, the one merge BPE can use: the last
pair of the token's own lone BPE, when the list names it, at its rank in the list.  The ids must stay HF
tokenizers' where the dropped merges rank before the kept ones, where a token's last pair is not in the list
(the token is then made by whole-piece lookup only, or never), with duplicate merges (the later one counts),
with ranks that do not follow the ids, and with `ignore_merges` either way.
"""
from __future__ import annotations

import json
import random

import pytest

from _shared import assert_same_ids, corpus_names, corpus_text, vocab_path

ctok = pytest.importorskip("ctok")
tokenizers = pytest.importorskip("tokenizers")

SEED = 4040

LLAMA3_SPLIT = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
PRE = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": LLAMA3_SPLIT}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}


def _byte_chars():
    # GPT-2's printable stand-in of each byte (what ByteLevel vocabularies are written in).
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def _synthetic(rnd, *, ignore_merges, drop_some):
    """A byte-level vocabulary over 'abc' and space: every byte, then random words; the merge list names
    every split of each word into two tokens, shuffled, some named twice, some (drop_some) left out."""
    bc = _byte_chars()
    vocab = {bc[b]: b for b in range(256)}
    alphabet = [bc[ord(c)] for c in "abc "]
    words = set()
    while len(words) < 120:
        n = rnd.randint(2, 7)
        words.add("".join(rnd.choice(alphabet[:3]) if i else rnd.choice(alphabet) for i in range(n)))
    for w in sorted(words, key=lambda w: (len(w), w)):
        vocab[w] = len(vocab)
    merges = []
    for w in vocab:
        for i in range(1, len(w)):
            left, right = w[:i], w[i:]
            if left in vocab and right in vocab:
                merges.append([left, right])
    rnd.shuffle(merges)
    merges += [list(m) for m in rnd.sample(merges, 15)]         # named again, later: the later rank counts
    if drop_some:
        merges = [m for m in merges if rnd.random() > 0.15]
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
             "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": PRE, "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": model}


def _random_texts(rnd, n):
    out = []
    for _ in range(n):
        k = rnd.randint(1, 60)
        out.append("".join(rnd.choice("aaabbc ") for _ in range(k)))
    out.append(" ".join(out))
    return out


@pytest.mark.parametrize("ignore_merges", [False, True])
@pytest.mark.parametrize("drop_some", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_synthetic_lists_with_dead_merges_equal_tokenizers(tmp_path, seed, drop_some, ignore_merges):
    rnd = random.Random(SEED + seed)
    data = _synthetic(rnd, ignore_merges=ignore_merges, drop_some=drop_some)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    enc = ctok.load(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    assert enc._core.vocab.pair_count < len(data["model"]["merges"])     # some merges were dropped
    for text in _random_texts(rnd, 300):
        assert_same_ids(enc.encode_ordinary(text), ref.encode(text, add_special_tokens=False).ids, text,
                        label=f"seed {seed}")


def test_llama3_keeps_one_merge_per_token_and_equals_tokenizers():
    # The tiktoken file of the same vocabulary derives one pair per token the same way: the kept lists match.
    path = vocab_path("llama3-hf", "tokenizer.json")
    enc = ctok.load(str(path))
    tt = ctok.load(str(vocab_path("llama3-tiktoken", "tokenizer.model")))
    n_merges = len(json.loads(path.read_text(encoding="utf-8"))["model"]["merges"])
    assert enc._core.vocab.pair_count == tt._core.vocab.pair_count < n_merges
    ref = tokenizers.Tokenizer.from_file(str(path))
    for name in corpus_names():
        text = corpus_text(name, 40_000)
        assert_same_ids(enc.encode_ordinary(text), ref.encode(text, add_special_tokens=False).ids, text,
                        label=name)


def test_llama3_with_reordered_merges_equals_tokenizers(tmp_path):
    # Ranks that no longer follow the ids: blocks of the list reversed, so a dropped merge of a token may now
    # rank before the kept one and the kept merges of different tokens change order.
    data = json.loads(vocab_path("llama3-hf", "tokenizer.json").read_text(encoding="utf-8"))
    merges = data["model"]["merges"]
    block = 997
    data["model"]["merges"] = [m for i in range(0, len(merges), block) for m in reversed(merges[i:i + block])]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    enc = ctok.load(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.encode_special_tokens = True
    for name in corpus_names():
        text = corpus_text(name, 20_000)
        assert_same_ids(enc.encode_ordinary(text), ref.encode(text, add_special_tokens=False).ids, text,
                        label=name)


@pytest.mark.parametrize("name", ["qwen3", "deepseek-v3"])
def test_whole_piece_rule_when_every_token_merges_back_to_itself(name):
    # Without ignore_merges, a piece equal to a token is that token only if BPE of its bytes rebuilds it.  When
    # every ordinary token does (Qwen 3, DeepSeek-V3), the encoder takes the whole-piece rule (no per-piece check).
    path = vocab_path(name, "tokenizer.json")
    assert json.loads(path.read_text(encoding="utf-8"))["model"].get("ignore_merges", False) is False
    assert ctok.load(str(path))._core.whole_piece_first is True


def test_no_whole_piece_rule_when_some_token_merges_into_others(tmp_path):
    # Llama 3's file with ignore_merges turned off: some of its tokens' bytes merge into other tokens, so a piece
    # equal to such a token must still be merged.  Each such token's text, alone and after a space, against
    # tokenizers.
    data = json.loads(vocab_path("llama3-hf", "tokenizer.json").read_text(encoding="utf-8"))
    data["model"]["ignore_merges"] = False
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    enc = ctok.load(str(path))
    ref = tokenizers.Tokenizer.from_file(str(path))
    assert enc._core.whole_piece_first is False
    texts = []
    for tid in range(enc._core.vocab.size):
        raw = enc._core.vocab.token_bytes(tid)
        if raw is None or enc._core.vocab.is_special(tid):
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if ref.encode(text, add_special_tokens=False).ids != [tid]:
            texts += [text, " " + text]
    assert texts                                      # the file has such tokens
    for text in texts:
        assert_same_ids(enc.encode_ordinary(text), ref.encode(text, add_special_tokens=False).ids, text,
                        label="llama3 without ignore_merges")
