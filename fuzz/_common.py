"""Shared pieces of the atheris targets in this folder (see docs/pages/reliability.md).

Run a target from the repository root, e.g.::

    python fuzz/fuzz_encode.py -runs=100000 -max_len=4096 fuzz/corpus/encode   # a corpus folder is optional

Any uncaught exception or crash is a finding: libFuzzer writes the input to ``crash-<sha1>`` (or under
``-artifact_prefix=DIR/``) and the target can replay it: ``python fuzz/fuzz_encode.py crash-<sha1>``.
Coverage guidance covers ctok's Python code (instrumented on import); the Cython extensions are compiled by gcc
without libFuzzer's coverage hooks, so inside them atheris fuzzes blind (mutations still reach them).
"""
from __future__ import annotations

import base64
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TESTS = os.path.join(REPO, "tests")
# An installed or PYTHONPATH build (e.g. build/asan from `make fuzz-asan`) comes first; else this checkout.
# (find_spec does not import ctok: the targets import it under atheris.instrument_imports.)
if importlib.util.find_spec("ctok") is None:
    sys.path.insert(0, REPO)

PAT = r"'s|\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+|\s+"

# Text fragments the structure-aware modes draw from: what makes pretokenizers and BPE take unusual paths.
FRAGMENTS = [
    "a", "A", "z", "é", "É", "ǅ", "ß", "中", "日本", "한", "ア", "ｶ", "ا", "б", "Ж", "α", "1", "22", "333", "4444",
    "١", "٣", "१", "１", "½", "Ⅻ", "²", " ", "  ", "\t", "\n", "\r\n", "\r", "\u3000", "\xa0", "\u2028", "\u2029",
    "\x85", "\u200b", "\ufeff", "'", "’", "'s", "'S", "'ll", "'LL", "'re", "'Ve", "’t", "’M", "'d", ".", ",", "!",
    "?", "/", "//", "\\", "<", ">", "|", "<|endoftext|>", "<|endoftext|", "<|endofprompt|>", "<|im_end|>", "<s>",
    "\u0301", "\u0308", "\u20dd", "\u0903", "\u200d", "\ufe0f", "😀", "👍🏽", "👨‍👩‍👧", "🇯🇵", "🏴󠁧󠁢󠁥󠁮󠁧󠁿", "1️⃣",
    "\x00", "\x01", "\x7f", "\x9f", "_", "-", "$", "€", "\U00010d50", "\u1c89", "\U0010ffff", "\ufffd", "\ue000",
    "hello", " world", " the", "don't", "https://x.y/z?q=1", "    ", "\n\n\n", "abc" * 30, " " * 40, "7" * 20,
]


# CJK letters and their neighbours (Han at a stride, kana, Hangul, Thai, Devanagari, CJK punctuation and
# full-width forms) and letters of 2-byte scripts (Latin Extended, Greek, Cyrillic, Armenian, Hebrew and Arabic
# with their marks): runs of them are whole pieces, cut between characters no token holds side by side.
CJK_POOL = ([chr(c) for c in range(0x4E00, 0xA000, 7)] + [chr(c) for c in range(0x3041, 0x3100)]
            + [chr(c) for c in range(0xAC00, 0xD7A4, 29)] + [chr(c) for c in range(0x0E01, 0x0E5C)]
            + [chr(c) for c in range(0x0900, 0x0980)] + [chr(c) for c in range(0x3000, 0x3040)]
            + [chr(c) for c in range(0xFF01, 0xFF5F)] + ["a", " ", "1", "\n", "\u200d", "\U0001F600", "é"]
            + [chr(c) for c in range(0x0100, 0x0180)] + [chr(c) for c in range(0x0370, 0x0530)]
            + [chr(c) for c in range(0x0531, 0x0588)] + [chr(c) for c in range(0x05B0, 0x05F0)]
            + [chr(c) for c in range(0x0620, 0x0660)] + ["b", "Z"])


def cjk_text(fdp, max_chars=300):
    """A run of CJK_POOL characters picked by the fuzzer's bytes, nearby characters more often than not
    (so runs stay within a script)."""
    out = []
    at = fdp.ConsumeIntInRange(0, len(CJK_POOL) - 1)
    for _ in range(fdp.ConsumeIntInRange(1, max_chars)):
        if fdp.ConsumeBool():
            at = (at + fdp.ConsumeIntInRange(-3, 3)) % len(CJK_POOL)
        else:
            at = fdp.ConsumeIntInRange(0, len(CJK_POOL) - 1)
        out.append(CJK_POOL[at])
    return "".join(out)


def fragment_text(fdp, max_parts=40):
    """Text from fragments picked by the fuzzer's bytes (an atheris.FuzzedDataProvider), sometimes repeated."""
    parts = []
    for _ in range(fdp.ConsumeIntInRange(0, max_parts)):
        frag = FRAGMENTS[fdp.ConsumeIntInRange(0, len(FRAGMENTS) - 1)]
        reps = 1 if fdp.ConsumeIntInRange(0, 7) else fdp.ConsumeIntInRange(2, 300)
        parts.append(frag * reps)
    return "".join(parts)


def tiktoken_reference(name):
    """tiktoken built as ../shared/vocab/MANIFEST.md says (tests/_shared.py), or None without the shared files."""
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    try:
        import _shared
    except Exception:  # noqa: BLE001
        return None
    if _shared.SHARED is None:
        return None
    return _shared.reference_encoding(name)


def rank_file_text(extra=(b"he", b"ll", b"hell", b"hello", b"wo", b"wor", b"world", b" w", b" wor")):
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    for rank, tok in enumerate(extra, 256):
        lines.append(f"{base64.b64encode(tok).decode()} {rank}")
    return ("\n".join(lines) + "\n").encode()


def parse_ranks(raw: bytes):
    """A rank file as tiktoken's loader reads it (without its by-path cache)."""
    return {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in raw.splitlines() if line)}


def bytelevel_tokenizer_json():
    """A small valid ByteLevel BPE tokenizer.json written by HF tokenizers (every component kind present)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    alpha = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alpha)}
    merges = []
    for a, b in [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("Ġ", "w"), ("o", "r"), ("Ġw", "or"),
                 ("l", "d"), ("Ġwor", "ld")]:
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
    tok.post_processor = processors.TemplateProcessing(single="$A <|end|>",
                                                       special_tokens=[("<|end|>", tok.token_to_id("<|end|>"))])
    return json.loads(tok.to_str())


def sentencepiece_tokenizer_json():
    """A small valid SentencePiece-style (Llama 2 layout) tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, normalizers, processors

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for c in "▁abcdehlorwt":
        vocab[c] = len(vocab)
    merges = []
    for a, b in [("▁", "h"), ("e", "l"), ("▁h", "el"), ("l", "o"), ("▁hel", "lo"), ("▁", "w"), ("o", "r")]:
        vocab.setdefault(a + b, len(vocab))
        merges.append((a, b))
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return json.loads(tok.to_str())


def tekken_json():
    vocab = [{"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None} for i in range(256)]
    for t in (b"he", b"ll", b"hell", b"hello"):
        vocab.append({"rank": len(vocab), "token_bytes": base64.b64encode(t).decode(), "token_str": None})
    return {"config": {"pattern": PAT, "num_vocab_tokens": len(vocab), "default_vocab_size": len(vocab) + 10,
                       "default_num_special_tokens": 10, "version": "v3"}, "vocab": vocab,
            "special_tokens": [{"rank": i, "token_str": f"<S{i}>", "is_control": True} for i in range(10)]}


def json_value(fdp, depth=0):
    """A JSON value of a type chosen by the fuzzer."""
    k = fdp.ConsumeIntInRange(0, 9 if depth < 2 else 6)
    if k == 0:
        return None
    if k == 1:
        return fdp.ConsumeBool()
    if k == 2:
        return fdp.ConsumeIntInRange(-3, 300)
    if k == 3:
        return fdp.ConsumeInt(9)
    if k == 4:
        return fdp.ConsumeFloat()
    if k == 5:
        return fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 12))
    if k == 6:
        return ["Bogus", "BPE", "ByteLevel", "Sequence", "Split", "Metaspace", "NFC", "Replace", "Strip",
                "TemplateProcessing", "Isolated", "Removed", "always", "first", "never", "▁", "Ġ", "<|end|>"][
            fdp.ConsumeIntInRange(0, 17)]
    if k == 7:
        return [json_value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    if k == 8:
        keys = ["type", "vocab", "merges", "pattern", "content", "id", "special", "normalized", "behavior", "invert",
                "String", "Regex", "prepend_scheme", "replacement", "split", "decoders", "normalizers",
                "pretokenizers", "single", "special_tokens", "ids", "tokens"]
        return {keys[fdp.ConsumeIntInRange(0, len(keys) - 1)]: json_value(fdp, depth + 1)
                for _ in range(fdp.ConsumeIntInRange(0, 3))}
    return {"type": json_value(fdp, depth + 1)}


def json_paths(node, prefix=()):
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


def set_path(data, path, value, delete=False):
    cur = data
    for k in path[:-1]:
        cur = cur[k]
    if delete:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
