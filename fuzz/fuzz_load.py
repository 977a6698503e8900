"""atheris target: ctok.load on mutated tokenizer files.

Each input picks a small valid template (a tiktoken rank file, a ByteLevel tokenizer.json, a SentencePiece-style
tokenizer.json, a Tekken JSON) and mutates it: raw byte edits, a JSON field replaced by a value of a type the
fuzzer picks (or removed), or the input bytes as the whole file.  Then:

* ctok.load either succeeds or raises a ctok.CtokError (ValueError / NotImplementedError) naming the file; any
  other exception is a finding, and so is a failed load that leaves an Encoding in ctok._cache;
* a loaded file encodes and decodes a few texts raising nothing but ctok's documented errors, and agrees with
  the reference (HF tokenizers for tokenizer.json, tiktoken for rank files) whenever the reference loads it too.

    python fuzz/fuzz_load.py -runs=100000 [corpus_dir]
"""
import copy
import json
import os
import sys
import tempfile

import atheris

import _common

with atheris.instrument_imports(include=["ctok"]):
    import ctok

TEXTS = ["hello world", " hello  wor<|end|>ld", "héllo\n\twörld 123 中文 😀", "", "  \r\n x's 'LL\x00 ▁▁a",
         "<s> </s> <unk> <0x41>"]
TEMPLATES = []
TMP = tempfile.mkdtemp(prefix="ctok-fuzz-load-")


def setup():
    os.environ["CTOK_CACHE_DIR"] = "off"
    TEMPLATES.append(("tiktoken", "ranks.tiktoken", None, _common.rank_file_text()))
    for name, make in (("hf", _common.bytelevel_tokenizer_json), ("hf", _common.sentencepiece_tokenizer_json),
                       ("tekken", _common.tekken_json)):
        data = make()
        TEMPLATES.append((name, "tokenizer.json" if name == "hf" else "tekken.json", data,
                          json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8")))


def mutate(fdp, data, raw):
    how = fdp.ConsumeIntInRange(0, 3)
    if how == 0 or data is None:
        b = bytearray(raw)
        for _ in range(fdp.ConsumeIntInRange(1, 8)):
            if not b:
                break
            i = fdp.ConsumeIntInRange(0, len(b) - 1)
            op = fdp.ConsumeIntInRange(0, 3)
            if op == 0:
                b[i] = fdp.ConsumeIntInRange(0, 255)
            elif op == 1:
                del b[i:i + fdp.ConsumeIntInRange(1, 64)]
            elif op == 2:
                b[i:i] = fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 16))
            else:
                b = b[:i]
        return bytes(b)
    if how == 3:
        return fdp.ConsumeBytes(fdp.remaining_bytes())
    d = copy.deepcopy(data)
    paths = [p for p in _common.json_paths(d) if p]
    for _ in range(fdp.ConsumeIntInRange(1, 3)):
        paths = [p for p in _common.json_paths(d) if p]
        if not paths:
            break
        p = paths[fdp.ConsumeIntInRange(0, len(paths) - 1)]
        try:
            _common.set_path(d, p, _common.json_value(fdp), delete=fdp.ConsumeIntInRange(0, 5) == 0)
        except (KeyError, IndexError, TypeError):
            pass
    return json.dumps(d, ensure_ascii=False).encode("utf-8")


def reference(fmt, path, raw):
    """The reference for this file, or None when it refuses the file."""
    try:
        if fmt == "hf":
            import tokenizers

            return tokenizers.Tokenizer.from_file(path)
        if fmt == "tiktoken":
            import tiktoken

            return tiktoken.Encoding("ref", pat_str=_common.PAT, mergeable_ranks=_common.parse_ranks(raw),
                                     special_tokens={})
    except BaseException:  # noqa: BLE001 - the reference refuses it (Rust panics are BaseException)
        return None
    return None


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    fmt, fname, template, raw = TEMPLATES[fdp.ConsumeIntInRange(0, len(TEMPLATES) - 1)]
    content = mutate(fdp, template, raw)
    path = os.path.join(TMP, fname)
    with open(path, "wb") as f:
        f.write(content)
    ctok._cache.clear()
    kwargs = {"pattern": _common.PAT} if fmt == "tiktoken" else {}
    try:
        enc = ctok.load(path, **kwargs)
    except ctok.CtokError as e:
        assert path in str(e), ("error does not name the file", str(e))
        assert isinstance(e, (ValueError, NotImplementedError)), type(e)
        assert not ctok._cache, "a failed load left an Encoding in ctok._cache"
        return
    ref = reference(fmt, path, content)
    for t in TEXTS:
        try:
            ids = enc.encode(t, allowed_special="all")
            plain = enc.encode_ordinary(t)
        except ctok.CtokError:
            continue
        enc.decode(ids)
        enc.decode_bytes(plain)
        if ref is None:
            continue
        if fmt == "hf":
            try:
                want = ref.encode(t, add_special_tokens=False).ids
            except BaseException:  # noqa: BLE001 - HF fails on this text (e.g. a missing unk token)
                continue
            assert ids == want, ("differs from HF", t, ids, want)
            got = enc.decode(want)
            try:
                exp = ref.decode(want, skip_special_tokens=False)
            except BaseException:  # noqa: BLE001 - HF panics (e.g. a Strip decoder with stop past a token's end)
                continue
            assert got == exp, ("decode differs from HF", t, got, exp)
        else:
            try:
                want = ref.encode_ordinary(t)
            except BaseException:  # noqa: BLE001 - tiktoken panics (e.g. a byte that is no token)
                continue
            assert plain == want, ("differs from tiktoken", t, plain, want)


if __name__ == "__main__":
    setup()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
