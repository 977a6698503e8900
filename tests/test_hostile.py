"""Hostile tokenizer files (issue 8): truncated and garbled real files, wrong types in every field of small
tokenizer.json files, duplicate ranks/ids, missing byte tokens, merges naming unknown tokens, gigantic tokens,
unknown component types, non-BPE models, and a compiled-vocabulary cache file that is stale, truncated or
tampered.

Every case must end in one of two ways: ctok loads the file and then agrees with the reference (tiktoken or HF
tokenizers, whenever the reference loads it too), or ctok raises its documented exception (a ``ctok.CtokError``:
``VocabFormatError``/``UnknownPatternError`` are ``ValueError``, ``UnsupportedFeatureError`` is
``NotImplementedError``) whose message names the file.  Never another exception, never a crash, and never a
half-built Encoding left in ``ctok._cache``.
"""
from __future__ import annotations

import base64
import copy
import json
import os
import random
import subprocess
import sys
import textwrap

import pytest

from _reliability import env
from _shared import reference_encoding, vocab_path

ctok = pytest.importorskip("ctok")
# the folder holding the ctok package under test (an out-of-tree sanitizer build comes first on PYTHONPATH)
CTOK_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(ctok.__file__)))
tiktoken = pytest.importorskip("tiktoken")
tokenizers = pytest.importorskip("tokenizers")
from ctok.errors import UnsupportedFeatureError, VocabFormatError  # noqa: E402

PAT = r"'s|\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+|\s+"
P50K_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
TEXTS = ["hello world", " hello  wor<|end|>ld", "héllo\n\twörld 123 中文 😀", "", "hello worldhello world",
         "  \r\n x's 'LL\x00 ▁▁a", "<s> </s> <unk> <0x41>"]


@pytest.fixture(autouse=True)
def _no_vocab_cache():
    """Loads here never read or write the user's compiled-vocabulary cache (tests of the cache set their own)."""
    with env(CTOK_CACHE_DIR="off"):
        yield


def cached_paths():
    return {k[0][0] for k in list(ctok._cache)}


def forget(path):
    """Drop this test's own entries from ctok's cache of loaded encodings (they would pile up)."""
    path = os.path.abspath(str(path))
    with ctok._cache_lock:
        for k in [k for k in ctok._cache if k[0][0] == path]:
            del ctok._cache[k]


def load_outcome(path, **kwargs):
    """``(encoding, None)`` or ``(None, error)``; any exception that is not a CtokError naming the file fails the
    test, and so does a failed load that leaves an entry in ctok._cache."""
    path = os.path.abspath(str(path))
    try:
        enc = ctok.load(path, **kwargs)
    except ctok.CtokError as e:
        assert path in str(e), f"the error does not name the file: {e}"
        assert isinstance(e, (ValueError, NotImplementedError)), type(e)
        assert path not in cached_paths(), "a failed load left an Encoding in ctok._cache"
        return None, e
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"ctok.load({os.path.basename(path)}) raised {type(e).__name__}: {e}") from e
    forget(path)
    return enc, None


def exercise(enc, texts=TEXTS):
    """Encode and decode with every API: nothing but ctok's documented errors may come out."""
    for t in texts:
        for call in (lambda: enc.encode(t, allowed_special="all"), lambda: enc.encode_ordinary(t),
                     lambda: enc.encode(t, disallowed_special=())):
            try:
                ids = call()
            except ctok.CtokError:
                continue
            enc.decode(ids)
            enc.decode_bytes(ids)
    enc.encode_batch(texts, num_threads=2, disallowed_special=())


# ---------------------------------------------------------------------------------------------------------------
# Small synthetic files


def rank_lines(extra=(b"he", b"ll", b"hell", b"hello", b"wo", b"wor", b"world", b" w", b" wor"), skip=()):
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256) if b not in skip]
    for rank, tok in enumerate(extra, 256):
        lines.append(f"{base64.b64encode(tok).decode()} {rank}")
    return lines


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    return path


def tiktoken_ranks(path):
    """The ranks of a rank file as tiktoken's loader reads them.  (Not ``tiktoken.load.load_tiktoken_bpe``: it
    caches files by path in a temp folder, so a file rewritten at the same path would be read stale.)"""
    with open(path, "rb") as f:
        return {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in f.read().splitlines()
                                                                   if line)}


def tiktoken_of(path, pattern=PAT, specials=None):
    return tiktoken.Encoding("ref", pat_str=pattern, mergeable_ranks=tiktoken_ranks(path),
                             special_tokens=specials or {})


def bytelevel_json():
    """A small valid ByteLevel BPE tokenizer.json, written by HF tokenizers, using every component kind."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    alpha = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alpha)}
    merges = []
    for a, b in [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("Ġ", "w"), ("o", "r"), ("Ġw", "or"),
                 ("l", "d"), ("Ġwor", "ld"), ("Ġ", "t"), ("Ġt", "he")]:
        vocab.setdefault(a + b, len(vocab))
        merges.append((a, b))
    tok = Tokenizer(models.BPE(vocab, merges))
    tok.normalizer = normalizers.Sequence([normalizers.NFC()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(pattern=" ", behavior="merged_with_next"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken("<|end|>", special=True, normalized=False)])
    tok.add_tokens([AddedToken("hello world", normalized=True)])
    end = tok.token_to_id("<|end|>")
    tok.post_processor = processors.TemplateProcessing(single="$A <|end|>", pair="$A <|end|> $B:1 <|end|>:1",
                                                       special_tokens=[("<|end|>", end)])
    return json.loads(tok.to_str())


def sentencepiece_json():
    """A small valid SentencePiece-style (Llama 2 layout) BPE tokenizer.json: byte fallback, unk, Prepend/Replace
    normalizer, Replace/ByteFallback/Fuse/Strip decoder, a BOS template."""
    from tokenizers import Tokenizer, decoders, models, normalizers, processors

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for c in "▁abcdehlorwt":
        vocab[c] = len(vocab)
    merges = []
    for a, b in [("▁", "h"), ("e", "l"), ("▁h", "el"), ("l", "o"), ("▁hel", "lo"), ("▁", "w"), ("o", "r"),
                 ("▁w", "or"), ("l", "d"), ("▁wor", "ld")]:
        vocab.setdefault(a + b, len(vocab))
        merges.append((a, b))
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    d = json.loads(tok.to_str())
    d["added_tokens"] = [
        {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": True} for c, i in (("<unk>", 0), ("<s>", 1), ("</s>", 2))]
    return d


SYNTHETIC = {"bytelevel": bytelevel_json, "sentencepiece": sentencepiece_json}


def write_json(path, data):
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def compare_with_hf(enc, path, texts=TEXTS):
    """When HF loads the file too, ctok must agree with it on every text (ids with and without the
    post-processor, decode)."""
    try:
        ref = tokenizers.Tokenizer.from_file(str(path))
    except Exception:  # noqa: BLE001 - the reference refuses the file; ctok is more lenient
        exercise(enc, texts)
        return False
    for t in texts:
        want = ref.encode(t, add_special_tokens=False).ids
        assert enc.encode(t, allowed_special="all") == want, (path.name, t)
        assert enc.encode(t, allowed_special="all", add_special_tokens=True) == ref.encode(t).ids, (path.name, t)
        assert enc.decode(want) == ref.decode(want, skip_special_tokens=False), (path.name, t)
    return True


# ---------------------------------------------------------------------------------------------------------------
# Wrong types in every field


MISSING = object()
BAD_VALUES = [None, 0, -1, 1.5, "x", "", [], {}, True, 2 ** 70, [1, "a"], {"type": "Bogus"}, MISSING]


def json_paths(node, prefix=()):
    """Every path into the JSON tree; of a long list or object (vocab, merges) only the first three and the last
    entries."""
    yield prefix
    if isinstance(node, dict):
        items = list(node.items())
        if len(items) > 32:
            items = items[:3] + items[-1:]
        for k, v in items:
            yield from json_paths(v, prefix + (k,))
    elif isinstance(node, list):
        idx = list(range(len(node)))
        if len(idx) > 16:
            idx = idx[:3] + idx[-1:]
        for i in idx:
            yield from json_paths(node[i], prefix + (i,))


def with_value(data, path, value):
    data = copy.deepcopy(data)
    cur = data
    for k in path[:-1]:
        cur = cur[k]
    if value is MISSING:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return data


@pytest.mark.parametrize("base", sorted(SYNTHETIC))
def test_wrong_types_in_every_field(tmp_path, base):
    """Each field of a small tokenizer.json, in turn, replaced by a value of every wrong type (or removed)."""
    data = SYNTHETIC[base]()
    stats = {"rejected": 0, "loaded-agrees-with-hf": 0, "loaded-hf-refuses": 0}
    n = 0
    for path in json_paths(data):
        if not path:
            continue
        for value in BAD_VALUES:
            p = write_json(tmp_path / f"t{n}.json", with_value(data, path, value))
            n += 1
            enc, err = load_outcome(p)
            if enc is None:
                stats["rejected"] += 1
                if isinstance(err, UnsupportedFeatureError) and value == {"type": "Bogus"} and path[-1] != "model":
                    assert "Bogus" in str(err) or "type" in str(err)
            elif compare_with_hf(enc, p):
                stats["loaded-agrees-with-hf"] += 1
            else:
                stats["loaded-hf-refuses"] += 1
            p.unlink()
    assert n > 500 and stats["rejected"] > 200, stats


@pytest.mark.parametrize("component", ["normalizer", "pre_tokenizer", "decoder", "post_processor"])
def test_unknown_component_type(tmp_path, component):
    data = bytelevel_json()
    data[component] = {"type": "FancyUnknownThing"}
    p = write_json(tmp_path / "tokenizer.json", data)
    enc, err = load_outcome(p)
    assert isinstance(err, UnsupportedFeatureError), err
    assert "FancyUnknownThing" in str(err) and component in str(err)


@pytest.mark.parametrize("kind", ["Unigram", "WordPiece", "WordLevel"])
def test_non_bpe_model(tmp_path, kind):
    from tokenizers import Tokenizer, models, pre_tokenizers

    if kind == "Unigram":
        tok = Tokenizer(models.Unigram([("<unk>", 0.0), ("a", -1.0), ("b", -2.0), ("ab", -1.5), ("▁", -3.0)], 0))
    elif kind == "WordPiece":
        tok = Tokenizer(models.WordPiece({"[UNK]": 0, "hello": 1, "wor": 2, "##ld": 3, "a": 4}, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
    else:
        tok = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
    p = tmp_path / "tokenizer.json"
    tok.save(str(p))
    enc, err = load_outcome(p)
    assert isinstance(err, NotImplementedError) and isinstance(err, UnsupportedFeatureError)
    assert kind in str(err)
    enc = ctok.load(str(p), fallback="hf")
    forget(p)
    for t in ["hello world", "ab ba", "", "a hello"]:
        assert enc.encode(t) == tok.encode(t, add_special_tokens=False).ids


# ---------------------------------------------------------------------------------------------------------------
# Truncated and garbled real files


def truncation_offsets(size, rnd):
    return sorted({0, 1, 7, 100, 4095, 4096, size // 3, size // 2, size - 2, size - 1} |
                  {rnd.randrange(1, size) for _ in range(3)})


def test_truncated_rank_file(tmp_path):
    src = vocab_path("p50k_base", "p50k_base.tiktoken")
    raw = src.read_bytes()
    rnd = random.Random(8)
    offsets = truncation_offsets(len(raw), rnd)
    # line boundaries too: inside the single bytes (bytes missing) and after them (a valid smaller vocabulary)
    offsets += [raw.index(b"\n", 50 * 9) + 1, raw.index(b"\n", len(raw) // 4) + 1]
    outcomes = {"rejected": 0, "loaded": 0}
    for off in offsets:
        p = tmp_path / f"cut{off}.tiktoken"
        p.write_bytes(raw[:off])
        enc, err = load_outcome(p, pattern=P50K_PAT)
        if enc is None:
            outcomes["rejected"] += 1
            continue
        outcomes["loaded"] += 1
        ref = tiktoken_of(p, P50K_PAT)
        for t in TEXTS + ["The quick brown fox jumps over the lazy dog. " * 20]:
            assert enc.encode_ordinary(t) == ref.encode_ordinary(t), (off, t)
        p.unlink()
    assert outcomes["rejected"] >= 5 and outcomes["loaded"] >= 2, outcomes


@pytest.mark.parametrize("rel", ["gpt2/tokenizer.json", "llama2/tokenizer.json", "mistral-tekken/tekken_240718.json"])
def test_truncated_json_files(tmp_path, rel):
    raw = vocab_path(*rel.split("/")).read_bytes()
    rnd = random.Random(len(raw))
    offsets = truncation_offsets(len(raw), rnd)
    if "tekken" in rel:
        offsets = offsets[::3]  # a 14 MB file: fewer cuts
    for off in offsets:
        p = tmp_path / os.path.basename(rel)
        p.write_bytes(raw[:off])
        enc, err = load_outcome(p)
        if raw[off:].strip():
            assert enc is None and isinstance(err, VocabFormatError), (off, err)
        else:  # only trailing whitespace was cut
            assert err is None, err


def garble(raw: bytes, rnd, n_flips, start=0):
    b = bytearray(raw)
    for _ in range(n_flips):
        i = rnd.randrange(start, len(b))
        b[i] = rnd.choice([b[i] ^ (1 << rnd.randrange(8)), rnd.randrange(256), ord(rnd.choice(' \n"{}[],:0-9'))])
    return bytes(b)


def test_garbled_rank_files(tmp_path):
    """A small rank file with bytes flipped: rejected, or loaded and equal to tiktoken on the same file."""
    raw = ("\n".join(rank_lines()) + "\n").encode()
    merges_start = raw.index(base64.b64encode(b"he"))
    rnd = random.Random(81)
    seen = {"rejected": 0, "loaded": 0}
    for k in range(120):
        p = tmp_path / f"g{k}.tiktoken"
        p.write_bytes(garble(raw, rnd, rnd.choice([1, 1, 2, 5]), start=rnd.choice([0, merges_start])))
        enc, err = load_outcome(p, pattern=PAT)
        if enc is None:
            seen["rejected"] += 1
            continue
        seen["loaded"] += 1
        try:
            ref = tiktoken_of(p)
        except Exception:  # noqa: BLE001 - tiktoken refuses it (e.g. a rank it cannot parse)
            exercise(enc)
            continue
        for t in TEXTS:
            assert enc.encode_ordinary(t) == ref.encode_ordinary(t), (k, t)
    assert seen["rejected"] > 10 and seen["loaded"] >= 3, seen


@pytest.mark.parametrize("base", sorted(SYNTHETIC))
def test_garbled_tokenizer_json(tmp_path, base):
    raw = json.dumps(SYNTHETIC[base](), ensure_ascii=False, indent=1).encode("utf-8")
    rnd = random.Random(base)
    seen = {"rejected": 0, "loaded": 0}
    for k in range(150):
        p = tmp_path / f"g{k}.json"
        p.write_bytes(garble(raw, rnd, rnd.choice([1, 1, 2, 4])))
        enc, err = load_outcome(p)
        if enc is None:
            seen["rejected"] += 1
        else:
            seen["loaded"] += 1
            compare_with_hf(enc, p)
    assert seen["rejected"] > 10 and seen["loaded"] >= 3, seen


def tekken_data():
    """A small valid Tekken JSON (10 special tokens, then the 256 bytes and a few merges)."""
    vocab = [{"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None} for i in range(256)]
    for t in (b"he", b"ll", b"hell", b"hello"):
        vocab.append({"rank": len(vocab), "token_bytes": base64.b64encode(t).decode(), "token_str": None})
    return {"config": {"pattern": PAT, "num_vocab_tokens": len(vocab), "default_vocab_size": len(vocab) + 10,
                       "default_num_special_tokens": 10, "version": "v3"}, "vocab": vocab,
            "special_tokens": [{"rank": i, "token_str": f"<S{i}>", "is_control": True} for i in range(10)]}


def test_garbled_tekken_json(tmp_path):
    data = tekken_data()
    vocab = data["vocab"]
    raw = json.dumps(data, indent=1).encode()
    rnd = random.Random(3)
    p0 = write_json(tmp_path / "tekken_ok.json", data)
    enc, err = load_outcome(p0)
    assert err is None
    ref = tiktoken.Encoding("t", pat_str=PAT, mergeable_ranks={base64.b64decode(v["token_bytes"]): v["rank"]
                                                                for v in vocab}, special_tokens={})
    assert enc.encode_ordinary("hello hell") == [i + 10 for i in ref.encode_ordinary("hello hell")]
    seen = {"rejected": 0, "loaded": 0}
    for k in range(120):
        p = tmp_path / f"tekken_{k}.json"
        p.write_bytes(garble(raw, rnd, rnd.choice([1, 2, 3])))
        enc, err = load_outcome(p)
        if enc is None:
            seen["rejected"] += 1
        else:
            seen["loaded"] += 1
            exercise(enc)
    assert seen["rejected"] > 10, seen
    for field_path in [("config",), ("vocab",), ("config", "pattern"), ("config", "default_vocab_size"),
                       ("config", "default_num_special_tokens"), ("vocab", 3), ("vocab", 3, "rank"),
                       ("vocab", 3, "token_bytes"), ("special_tokens",), ("special_tokens", 0, "rank"),
                       ("special_tokens", 0, "token_str")]:
        for value in BAD_VALUES:
            p = write_json(tmp_path / "tekken_t.json", with_value(data, field_path, value))
            enc, err = load_outcome(p)
            if enc is not None:
                exercise(enc)


# ---------------------------------------------------------------------------------------------------------------
# Duplicates, missing bytes, unknown merges, gigantic tokens


def test_duplicate_ids_in_tokenizer_json(tmp_path):
    data = bytelevel_json()
    vocab = data["model"]["vocab"]
    cases = {}
    d = copy.deepcopy(data)
    d["model"]["vocab"]["zz-dup"] = vocab["he"]  # two strings, one id
    cases["two-strings-one-id"] = d
    d = copy.deepcopy(data)
    d["added_tokens"][0]["id"] = vocab["he"]  # an added token on an ordinary token's id
    cases["added-on-vocab-id"] = d
    d = copy.deepcopy(data)
    d["added_tokens"].append(dict(d["added_tokens"][0]))  # the same added token twice
    cases["added-twice"] = d
    d = copy.deepcopy(data)
    d["model"]["merges"] = d["model"]["merges"] + d["model"]["merges"][:3]  # repeated merges
    cases["merges-repeated"] = d
    for name, d in cases.items():
        p = write_json(tmp_path / f"{name}.json", d)
        enc, err = load_outcome(p)
        if enc is not None:
            compare_with_hf(enc, p)
    # a JSON object with a repeated key (json keeps the last, as serde does)
    text = json.dumps(data)
    text = text.replace('"vocab": {', '"vocab": {"he": 3, ', 1)
    p = tmp_path / "repeated-key.json"
    p.write_text(text, encoding="utf-8")
    enc, err = load_outcome(p)
    if enc is not None:
        compare_with_hf(enc, p)


def test_duplicate_rank_and_token_in_rank_file(tmp_path):
    lines = rank_lines()
    for name, bad in {"dup-rank": lines + [f"{base64.b64encode(b'xyz').decode()} 258"],
                      "dup-token": lines + [f"{base64.b64encode(b'hello').decode()} 400"],
                      "dup-byte": lines + [f"{base64.b64encode(b'a').decode()} 401"]}.items():
        p = write_lines(tmp_path / f"{name}.tiktoken", bad)
        enc, err = load_outcome(p, pattern=PAT)
        assert isinstance(err, VocabFormatError), (name, err)


def test_missing_byte_tokens_rank_file(tmp_path):
    """A byte that UTF-8 text can hold must be a token: otherwise the text holding it cannot be encoded (tiktoken
    panics); ctok refuses the file at load, naming it, instead of dropping the byte silently."""
    p = write_lines(tmp_path / "no-A.tiktoken", rank_lines(extra=[], skip={0x41}))
    enc, err = load_outcome(p, pattern=PAT)
    assert isinstance(err, VocabFormatError) and "0x41" in str(err), err
    # bytes that never occur in UTF-8 may be missing: every str still encodes, exactly as tiktoken
    p = tmp_path / "no-F5-FF.tiktoken"
    lines = [f"{base64.b64encode(bytes([b])).decode()} {r}" for r, b in enumerate(
        [b for b in range(256) if b < 0xF5 and b not in (0xC0, 0xC1)])]
    write_lines(p, lines)
    enc, err = load_outcome(p, pattern=PAT)
    assert err is None
    ref = tiktoken_of(p)
    for t in TEXTS + ["\U0010FFFF \U0001F600 ÿ"]:
        assert enc.encode_ordinary(t) == ref.encode_ordinary(t)


def test_missing_byte_tokens_bytelevel_json(tmp_path):
    """A ByteLevel tokenizer.json whose vocabulary lacks a byte character: HF's semantics (the byte is dropped,
    with no unk token) are the reference."""
    data = bytelevel_json()
    del data["model"]["vocab"]["A"]
    p = write_json(tmp_path / "no-A.json", data)
    enc, err = load_outcome(p)
    if enc is not None:
        compare_with_hf(enc, p, TEXTS + ["AAA bAb A"])


@pytest.mark.parametrize("bad", ["[", "(?<x", "a{2,1}", r"\p{NoSuchProperty}+", "(" * 300 + ")" * 300, "*"])
def test_invalid_split_pattern(tmp_path, bad):
    """A split pattern that no regex engine accepts: from a Tekken file's config (found by fuzz/fuzz_load.py: a
    bare regex.error escaped ctok.load) or passed as pattern= for a rank file."""
    data = tekken_data()
    data["config"]["pattern"] = bad
    p = write_json(tmp_path / "tekken_bad_pattern.json", data)
    enc, err = load_outcome(p)
    if err is None:  # the regex module accepts it: then it must behave as tiktoken with the same pattern
        import regex

        regex.compile(bad)
        exercise(enc)
        return
    assert isinstance(err, VocabFormatError) and "config.pattern" in str(err), err
    p = write_lines(tmp_path / "ranks.tiktoken", rank_lines())
    enc, err = load_outcome(p, pattern=bad)
    assert isinstance(err, VocabFormatError) and "pattern=" in str(err), err


def test_special_token_ids_far_out(tmp_path):
    """A special token id of a billion, from a Tekken file, a sibling tokenizer_config.json or special_tokens=:
    refused with the file named (found by fuzz/fuzz_load.py: every id-indexed table was sized by it, 2.4 GB and
    rising), never a MemoryError or an out-of-memory kill."""
    data = tekken_data()
    data["special_tokens"][9]["rank"] = 1_023_410_293
    enc, err = load_outcome(write_json(tmp_path / "tekken_far.json", data))
    assert isinstance(err, VocabFormatError) and "special_tokens[9].rank" in str(err), err
    data["special_tokens"][9]["rank"] = 3  # a rank used twice
    enc, err = load_outcome(write_json(tmp_path / "tekken_dup.json", data))
    assert isinstance(err, VocabFormatError), err
    folder = tmp_path / "folder"
    folder.mkdir()
    p = write_lines(folder / "ranks.tiktoken", rank_lines())
    enc, err = load_outcome(p, pattern=PAT, special_tokens={"<|x|>": 1_000_000_000})
    assert isinstance(err, VocabFormatError) and "<|x|>" in str(err), err
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"added_tokens_decoder": {"999999999": {"content": "<|far|>", "special": True}}}), encoding="utf-8")
    enc, err = load_outcome(p, pattern=PAT)
    assert isinstance(err, VocabFormatError) and "<|far|>" in str(err), err


def test_merges_naming_unknown_tokens(tmp_path):
    for merge in (["zz", "q"], ["h", "zz"], ["A", "B"], "h", ["h", "e", "l"], "h e l", ""):
        data = bytelevel_json()
        data["model"]["merges"].insert(1, merge)
        p = write_json(tmp_path / "unknown-merge.json", data)
        enc, err = load_outcome(p)
        assert isinstance(err, VocabFormatError) and "merges" in str(err), (merge, err)


def test_gigantic_token_rank_file(tmp_path):
    """A token of 80 KB (longer than any 16-bit length field) loads, encodes as tiktoken does and decodes.  It
    starts with byte 0xFF, which UTF-8 never holds and this vocabulary lacks, so no merge can build it (the load
    stays fast: see test_gigantic_token_load_time_is_linear for a buildable one)."""
    big = b"\xff" + b"ab" * 40_000
    singles = [b for b in range(256) if b < 0xF5 and b not in (0xC0, 0xC1)]
    lines = [f"{base64.b64encode(bytes([b])).decode()} {r}" for r, b in enumerate(singles)]
    for tok in (b"ab", b"abab", big, b"abababab"):
        lines.append(f"{base64.b64encode(tok).decode()} {len(lines)}")
    p = write_lines(tmp_path / "big.tiktoken", lines)
    enc, err = load_outcome(p, pattern=PAT)
    assert err is None, err
    ref = tiktoken_of(p)
    for t in ["ab" * 40_000, "ab" * 40_000 + "a", "abab ab", "\xff" + "ab" * 100]:
        assert enc.encode_ordinary(t) == ref.encode_ordinary(t)
    big_id = ref.encode_single_token(big)
    assert enc.decode_single_token_bytes(big_id) == big
    assert enc.decode_bytes([big_id, big_id]) == big * 2


def test_gigantic_token_load_time_is_linear(tmp_path):
    """A token that merges can build (ab, abab, then a megabyte of "ab"): every token's lone BPE runs at load, so
    it must not be quadratic in the token's length (it was: hours for 1 MB), and it encodes as tiktoken does."""
    import time

    times = {}
    for n in (1 << 18, 1 << 20):
        big = b"ab" * (n // 2)
        p = write_lines(tmp_path / f"big{n}.tiktoken", rank_lines(extra=[b"ab", b"abab", big]))
        best = None
        for _ in range(2):
            t0 = time.perf_counter()
            enc = ctok._build(os.path.abspath(str(p)), PAT, None, None)
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        times[n] = best
    assert times[1 << 20] < 8 * times[1 << 18] + 0.05, times
    ref = tiktoken_of(p)
    for t in [big.decode(), "abab ab", "ab" * 1000 + " ab"]:
        assert enc.encode_ordinary(t) == ref.encode_ordinary(t)
    assert enc.decode_single_token_bytes(258) == big


def test_gigantic_token_tokenizer_json(tmp_path):
    """A 256 KB added token (a trie deeper than the recursion limit; quadratic for a regex on text made of its
    prefix) and a 70,000-character vocab token load, and agree with HF."""
    data = bytelevel_json()
    big = "h" * (1 << 18)
    data["added_tokens"].append({"id": 1000, "content": big, "single_word": False, "lstrip": False,
                                 "rstrip": False, "normalized": False, "special": True})
    data["model"]["vocab"]["Ġ" + "w" * 70000] = 999
    p = write_json(tmp_path / "big.json", data)
    enc, err = load_outcome(p)
    if enc is not None:
        compare_with_hf(enc, p, ["hello " + big + " world", big[:-1], " " + "w" * 70000])


# ---------------------------------------------------------------------------------------------------------------
# The compiled vocabulary cache (ctok/cache.py)


@pytest.fixture()
def cache_dir(tmp_path):
    d = tmp_path / "vocab-cache"
    with env(CTOK_CACHE_DIR=str(d)):
        yield d


def _build_fresh(path, **kw):
    """Build without ctok.load's in-memory cache, so the compiled cache file is what is read."""
    return ctok._build(os.path.abspath(str(path)), kw.get("pattern"), kw.get("special_tokens"), None)


SPECIALS = {"<|end|>": 300, "<|begin|>": 301}


def _check_against_reference(enc, path):
    ref = tiktoken_of(path, PAT, SPECIALS)
    for t in TEXTS + ["<|begin|>hello<|end|>"]:
        assert enc.encode(t, allowed_special="all") == ref.encode(t, allowed_special="all")
    assert enc.special_tokens == SPECIALS
    assert enc.n_vocab == ref.n_vocab


def test_cache_damaged_files_are_never_trusted(tmp_path, cache_dir):
    from ctok import cache

    src = write_lines(tmp_path / "mini.tiktoken", rank_lines())
    kw = dict(pattern=PAT, special_tokens=SPECIALS)
    args = ["tiktoken", PAT, SPECIALS]
    _check_against_reference(_build_fresh(src, **kw), src)
    (cfile,) = list(cache_dir.iterdir())
    good = cfile.read_bytes()
    assert cache.load_compiled(str(src), args) is not None
    hlen = int.from_bytes(good[8:16], "little")
    rnd = random.Random(5)
    damaged = {}
    for off in truncation_offsets(len(good), rnd):
        damaged[f"truncated@{off}"] = good[:off]
    for region, lo, hi in (("magic", 0, 8), ("lengths", 8, 24), ("header", 24, 24 + hlen), ("tables", 24 + hlen,
                                                                                               len(good))):
        for _ in range(6):
            i = rnd.randrange(lo, hi)
            b = bytearray(good)
            b[i] ^= 1 << rnd.randrange(8)
            damaged[f"{region}-bit@{i}"] = bytes(b)
    # the header's digits and names changed to other valid JSON of the same length
    for a, b in ((b'"<|end|>": 300', b'"<|end|>": 301'), (b'"<|begin|>": 301', b'"<|begin|>": 300'),
                 (b'"name": "mini"', b'"name": "mun"'), (b'"known": false', b'"known": true ')):
        i = good.rfind(a)
        assert i > 0, a
        damaged[f"header-edit:{a.decode()}"] = good[:i] + b + good[i + len(a):]
    for label, data in damaged.items():
        cfile.write_bytes(data)
        assert cache.load_compiled(str(src), args) is None, f"a damaged cache file was trusted: {label}"
        enc = _build_fresh(src, **kw)  # rebuilt from the source ...
        _check_against_reference(enc, src)
        assert cfile.read_bytes() == good, label  # ... and the cache file rewritten whole


def test_cache_stale_source_is_never_trusted(tmp_path, cache_dir):
    from ctok import cache

    src = write_lines(tmp_path / "mini.tiktoken", rank_lines())
    kw = dict(pattern=PAT, special_tokens=SPECIALS)
    args = ["tiktoken", PAT, SPECIALS]
    _build_fresh(src, **kw)
    assert cache.load_compiled(str(src), args) is not None
    st = os.stat(src)
    # Same size, same mtime, different content: a merge changes (b"he" <-> b"ll" swap their ranks).
    lines = rank_lines(extra=(b"ll", b"he", b"hell", b"hello", b"wo", b"wor", b"world", b" w", b" wor"))
    write_lines(src, lines)
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(src).st_size == st.st_size and os.stat(src).st_mtime_ns == st.st_mtime_ns
    assert cache.load_compiled(str(src), args) is None, "a stale cache file was trusted"
    _check_against_reference(_build_fresh(src, **kw), src)
    # Replaced by another file (a new inode), mtime put back as well
    other = write_lines(tmp_path / "other.tiktoken", rank_lines())
    os.replace(other, src)
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert cache.load_compiled(str(src), args) is None
    _check_against_reference(_build_fresh(src, **kw), src)


_FORGED_CACHE_SCRIPT = textwrap.dedent(r"""
    import base64, os, random, struct, sys, zlib
    sys.path.insert(0, sys.argv[1])
    import ctok
    from ctok import cache
    from ctok._encoder import CoreEncoder
    from ctok._vocab import Vocab
    from ctok.errors import CtokError
    os.environ["CTOK_CACHE_DIR"] = sys.argv[2]
    src = os.path.join(sys.argv[2], "mini.tiktoken")
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    for r, t in enumerate([b"he", b"ll", b"hell", b"hello", b" w", b"or", b" wor", b"ld", b" world"], 256):
        lines.append(f"{base64.b64encode(t).decode()} {r}")
    open(src, "w").write("\n".join(lines) + "\n")
    ctok._build(src, r"\S+|\s+", {"<|end|>": 300}, None)
    (cfile,) = [os.path.join(sys.argv[2], f) for f in os.listdir(sys.argv[2]) if f.endswith(".ctokv")]
    good = open(cfile, "rb").read()
    hlen = struct.unpack_from("<Q", good, 8)[0]
    start = 24 + hlen
    rnd = random.Random(int(sys.argv[3]))
    accepted = 0
    n = int(sys.argv[4])
    for k in range(n):
        b = bytearray(good)
        for _ in range(rnd.choice([1, 1, 2, 8])):
            i = rnd.randrange(start, len(b))
            b[i] = rnd.choice([b[i] ^ (1 << rnd.randrange(8)), rnd.randrange(256), 0xFF, 0])
        b[16:24] = struct.pack("<Q", cache.checksum(bytes(b[24:])))   # forged: the checksum matches
        open(cfile, "wb").write(bytes(b))
        sys.stderr.write(f"case {k}\n"); sys.stderr.flush()
        hit = cache.load_compiled(src, ["tiktoken", r"\S+|\s+", {"<|end|>": 300}])
        if hit is None:
            continue
        accepted += 1
        meta, vocab = hit
        for kind in (0, 1):
            core = CoreEncoder(vocab=vocab, pretok_kind=kind, piece_cache_bytes=4096)
            for text in (b"hello world", b"hello  world hello", bytes(range(256)), "h\xe9llo \u4e2d".encode()):
                ids = core.encode_ordinary(text)
                assert all(0 <= i < vocab.size for i in ids)
                try:
                    core.decode_bytes(ids)
                except CtokError:
                    pass
        for i in range(-2, vocab.size + 3):
            vocab.token_bytes(i)
            try:
                core.decode_bytes([i])
            except (CtokError, OverflowError):
                pass
    print("accepted", accepted, "of", n)
""")


def test_cache_forged_tables_cannot_crash(tmp_path):
    """Tables tampered with *and* given a matching checksum (a forgery, not an accident) pass the cache's checks only
    when Vocab.from_bytes finds every index in range: then encoding and decoding must still not crash.  Run in a
    subprocess, so that a crash is a failed test rather than a dead test run."""
    n = 150
    r = subprocess.run([sys.executable, "-c", _FORGED_CACHE_SCRIPT, CTOK_PARENT, str(tmp_path), "11", str(n)],
                       capture_output=True, text=True, timeout=600)
    last = r.stderr.strip().splitlines()[-3:]
    assert r.returncode == 0, f"forged cache file crashed the process (rc {r.returncode}); last: {last}"
    assert "accepted" in r.stdout


def test_cache_dir_unusable(tmp_path):
    """An unwritable or bogus cache location only costs speed."""
    src = write_lines(tmp_path / "mini.tiktoken", rank_lines())
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    for d in (str(blocker), str(blocker / "sub"), "/proc/ctok-cache-cannot-exist"):
        with env(CTOK_CACHE_DIR=d):
            enc = _build_fresh(src, pattern=PAT, special_tokens=SPECIALS)
            _check_against_reference(enc, src)


def test_failed_load_then_fixed_file(tmp_path):
    """A failed load leaves nothing behind: once the file is fixed, the same path loads correctly."""
    p = tmp_path / "tokenizer.json"
    p.write_text('{"model": {"type": "BPE", "vocab": 5}}', encoding="utf-8")
    enc, err = load_outcome(p)
    assert err is not None
    write_json(p, bytelevel_json())
    enc, err = load_outcome(p)
    assert err is None
    compare_with_hf(enc, p)
    ref = reference_encoding("o200k_base")  # and an unrelated shared encoding is unaffected
    assert ctok.get_encoding("o200k_base").encode("ok") == ref.encode("ok")
