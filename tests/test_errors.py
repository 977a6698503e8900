"""Bad input gets a clear Python exception (issue 2, "Bad input"): never a crash, never a silent wrong answer."""
import base64
import json
import re

import pytest

from _shared import reference_encoding, vocab_path

ctok = pytest.importorskip("ctok")

PAT = r"'s|\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+|\s+"


def mini_rank_lines():
    """A small, valid, unknown tiktoken vocabulary: the 256 bytes then a few merges."""
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    for rank, tok in enumerate([b"he", b"ll", b"hell", b"hello", b"wo", b"wor", b"world", b" w", b" wor"], 256):
        lines.append(f"{base64.b64encode(tok).decode()} {rank}")
    return lines


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    return path


def assert_names_file_and_line(err, path, line):
    msg = str(err)
    assert path.name in msg, f"message does not name the file: {msg!r}"
    assert re.search(rf"(?<!\d){line}(?!\d)", msg), f"message does not name line {line}: {msg!r}"


# --------------------------------------------------------------------------------------------------------------


def test_error_hierarchy():
    assert issubclass(ctok.CtokError, Exception)
    from ctok import errors

    assert issubclass(errors.VocabFormatError, ValueError) and issubclass(errors.VocabFormatError, ctok.CtokError)
    assert issubclass(errors.UnsupportedFeatureError, NotImplementedError)
    assert issubclass(errors.UnsupportedFeatureError, ctok.CtokError)
    assert issubclass(errors.DisallowedSpecialError, ValueError)
    assert issubclass(errors.DisallowedSpecialError, ctok.CtokError)
    assert issubclass(errors.UnknownTokenError, ctok.CtokError)


@pytest.mark.parametrize("name", ["does_not_exist.tiktoken", "nope/tokenizer.json", "missing_dir"])
def test_missing_file(tmp_path, name):
    with pytest.raises(FileNotFoundError):
        ctok.load(str(tmp_path / name))
    with pytest.raises(FileNotFoundError):
        ctok.load(tmp_path / name)


def test_empty_folder(tmp_path):
    with pytest.raises((FileNotFoundError, ctok.CtokError)):
        ctok.load(str(tmp_path))


# --------------------------------------------------------------------------------------------------------------
# malformed tiktoken rank files


@pytest.mark.parametrize("bad_line", ["YWJ 258", "@@@@ 258", "aGVsbG8 258"])
def test_rank_file_bad_base64(tmp_path, bad_line):
    lines = mini_rank_lines()
    lines.insert(257, bad_line)  # becomes line 258
    path = write_lines(tmp_path / "bad_base.tiktoken", lines)
    with pytest.raises(ValueError) as ei:
        ctok.load(str(path), pattern=PAT)
    assert isinstance(ei.value, ctok.CtokError)
    assert_names_file_and_line(ei.value, path, 258)


@pytest.mark.parametrize("bad_rank", ["abc", "1.5", "", "-"])
def test_rank_file_non_int_rank(tmp_path, bad_rank):
    lines = mini_rank_lines()
    lines.insert(257, f"{base64.b64encode(b'xyz').decode()} {bad_rank}".rstrip())
    path = write_lines(tmp_path / "bad_rank.tiktoken", lines)
    with pytest.raises(ValueError) as ei:
        ctok.load(str(path), pattern=PAT)
    assert isinstance(ei.value, ctok.CtokError)
    assert_names_file_and_line(ei.value, path, 258)


def test_rank_file_duplicate_rank(tmp_path):
    lines = mini_rank_lines()
    lines.insert(257, f"{base64.b64encode(b'xyz').decode()} 3")  # rank 3 is already byte 0x03
    path = write_lines(tmp_path / "dup_rank.tiktoken", lines)
    with pytest.raises(ValueError) as ei:
        ctok.load(str(path), pattern=PAT)
    assert isinstance(ei.value, ctok.CtokError)
    assert_names_file_and_line(ei.value, path, 258)


def test_rank_file_duplicate_token(tmp_path):
    lines = mini_rank_lines()
    lines.append(f"{base64.b64encode(b'hello').decode()} 400")  # token bytes already have a rank
    path = write_lines(tmp_path / "dup_token.tiktoken", lines)
    with pytest.raises(ValueError) as ei:
        ctok.load(str(path), pattern=PAT)
    assert isinstance(ei.value, ctok.CtokError)
    assert path.name in str(ei.value)


@pytest.mark.parametrize("content", [b"", b"\x00\x01\x02garbage\xff\xfe", b"not a rank file at all\n"])
def test_rank_file_garbage(tmp_path, content):
    path = tmp_path / "garbage.tiktoken"
    path.write_bytes(content)
    with pytest.raises(ValueError) as ei:
        ctok.load(str(path), pattern=PAT)
    assert isinstance(ei.value, ctok.CtokError)
    assert path.name in str(ei.value)


def test_unknown_vocab_needs_pattern(tmp_path):
    path = write_lines(tmp_path / "mystery.tiktoken", mini_rank_lines())
    with pytest.raises(ctok.CtokError) as ei:
        ctok.load(str(path))
    assert "pattern=" in str(ei.value)


def test_unknown_vocab_with_pattern_matches_tiktoken(tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    path = write_lines(tmp_path / "mystery.tiktoken", mini_rank_lines())
    specials = {"<|end|>": 1000}
    enc = ctok.load(str(path), pattern=PAT, special_tokens=specials)
    ref = tiktoken.Encoding("mini", pat_str=PAT, mergeable_ranks=load_tiktoken_bpe(str(path)),
                            special_tokens=specials)
    for t in ["hello world", "hello, world's hello<|end|>", "héllo wörld 123 中", "", "   "]:
        assert enc.encode_ordinary(t) == ref.encode_ordinary(t)
        assert enc.encode(t, allowed_special="all") == ref.encode(t, allowed_special="all")
    assert enc.n_vocab == ref.n_vocab


# --------------------------------------------------------------------------------------------------------------
# tokenizer.json / tekken


def _wordlevel_json(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers

    tok = tokenizers.Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2, "!": 3}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    assert json.loads(path.read_text())["model"]["type"] == "WordLevel"
    return path, tok


def _unigram_json(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models

    tok = tokenizers.Tokenizer(models.Unigram([("<unk>", 0.0), ("a", -1.0), ("b", -2.0), ("ab", -1.5)], 0))
    path = tmp_path / "unigram.json"
    tok.save(str(path))
    return path, tok


@pytest.mark.parametrize("kind", ["WordLevel", "Unigram"])
def test_non_bpe_tokenizer_json(tmp_path, kind):
    path, _ = _wordlevel_json(tmp_path) if kind == "WordLevel" else _unigram_json(tmp_path)
    with pytest.raises(NotImplementedError) as ei:
        ctok.load(str(path))
    assert isinstance(ei.value, ctok.CtokError)
    assert kind in str(ei.value)


def test_hand_written_wordlevel_json(tmp_path):
    """The brief's minimal shape: {"model": {"type": "WordLevel", ...}}."""
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"version": "1.0", "model": {"type": "WordLevel", "vocab": {"a": 0},
                                                            "unk_token": "a"}}))
    with pytest.raises(NotImplementedError) as ei:
        ctok.load(str(path))
    assert "WordLevel" in str(ei.value)


def test_unknown_component_type(tmp_path):
    """An unknown pre-tokenizer type in an otherwise BPE file names the type."""
    data = json.loads(vocab_path("gpt2", "tokenizer.json").read_text(encoding="utf-8"))
    data["pre_tokenizer"] = {"type": "FancyPreTokenizerXYZ"}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(NotImplementedError) as ei:
        ctok.load(str(path))
    assert isinstance(ei.value, ctok.CtokError)
    assert "FancyPreTokenizerXYZ" in str(ei.value)


def test_fallback_hf_is_explicit(tmp_path):
    path, tok = _wordlevel_json(tmp_path)
    with pytest.raises(NotImplementedError):
        ctok.load(str(path))  # never silently
    enc = ctok.load(str(path), fallback="hf")
    for text in ["hello world !", "hello unknown world", ""]:
        assert enc.encode(text) == tok.encode(text, add_special_tokens=False).ids
    ids = tok.encode("hello world").ids
    assert enc.decode(ids) == tok.decode(ids, skip_special_tokens=False)


def test_fallback_bad_value(tmp_path):
    path, _ = _wordlevel_json(tmp_path)
    with pytest.raises((ValueError, TypeError)):
        ctok.load(str(path), fallback="magic")


@pytest.mark.parametrize("content", ["{not json", "[]", "{}", '{"model": 5}'])
def test_malformed_tokenizer_json(tmp_path, content):
    path = tmp_path / "tokenizer.json"
    path.write_text(content)
    with pytest.raises(ValueError) as ei:
        ctok.load(str(path))
    assert isinstance(ei.value, ctok.CtokError)
    assert path.name in str(ei.value)


def test_malformed_tekken_json(tmp_path):
    path = tmp_path / "tekken_broken.json"
    path.write_text(json.dumps({"config": {"pattern": PAT, "default_vocab_size": 1300,
                                           "default_num_special_tokens": 1000},
                                "vocab": [{"rank": 0, "token_bytes": "!!!notbase64"}]}))
    with pytest.raises(ValueError) as ei:
        ctok.load(str(path))
    assert isinstance(ei.value, ctok.CtokError)
    assert path.name in str(ei.value)


# --------------------------------------------------------------------------------------------------------------
# text and ids


@pytest.fixture(scope="module")
def enc():
    return ctok.get_encoding("o200k_base")


@pytest.mark.parametrize("bad", [b"bytes", None, 123, ["a"], bytearray(b"x")])
def test_non_str_text(enc, bad):
    with pytest.raises(TypeError):
        enc.encode(bad)
    with pytest.raises(TypeError):
        enc.encode_ordinary(bad)
    with pytest.raises(TypeError):
        enc.count(bad)
    with pytest.raises(TypeError):
        enc.encode_batch(["ok", bad])
    with pytest.raises(TypeError):
        enc.encode_ordinary_batch(["ok", bad])
    with pytest.raises(TypeError):
        enc.encode_batch_flat(["ok", bad])
    with pytest.raises(TypeError):
        enc.encode_segments([("ok", True), (bad, False)])


@pytest.mark.parametrize("tid", [10**9, 200_019, 2**32 + 5])
def test_unknown_id_in_decode(enc, tid):
    for call in (lambda: enc.decode([1, tid]), lambda: enc.decode_bytes([tid]),
                 lambda: enc.decode_single_token_bytes(tid), lambda: enc.decode_batch([[1], [tid]])):
        with pytest.raises(ctok.CtokError) as ei:
            call()
        assert str(tid) in str(ei.value)


def test_unused_id_in_decode(enc):
    """o200k_base has holes (199998, 200000..200017): decoding one names it."""
    ref = reference_encoding("o200k_base")
    holes = [i for i in range(199990, ref.n_vocab) if not ref.is_valid_id(i)]
    assert 199998 in holes
    for tid in holes:
        with pytest.raises(ctok.CtokError) as ei:
            enc.decode([tid])
        assert str(tid) in str(ei.value)


@pytest.mark.parametrize("tid", [-1, -(2**40)])
def test_negative_id_in_decode(enc, tid):
    with pytest.raises((ctok.CtokError, ValueError, OverflowError, TypeError)):
        enc.decode([tid])
    with pytest.raises((ctok.CtokError, ValueError, OverflowError, TypeError)):
        enc.decode_single_token_bytes(tid)


@pytest.mark.parametrize("bad", ["1", 1.5, None, b"x"])
def test_non_int_id_in_decode(enc, bad):
    with pytest.raises((TypeError, ValueError, ctok.CtokError)):
        enc.decode([1, bad])


def test_unknown_id_in_stream_decoder(enc):
    dec = enc.stream_decoder()
    with pytest.raises(ctok.CtokError) as ei:
        dec.step(10**9)
    assert str(10**9) in str(ei.value)


def test_disallowed_special(enc):
    from ctok.errors import DisallowedSpecialError

    with pytest.raises(DisallowedSpecialError) as ei:
        enc.encode("hi <|endoftext|>")
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, ctok.CtokError)
    assert "<|endoftext|>" in str(ei.value)
    with pytest.raises(ValueError):
        enc.count("<|endofprompt|>")
    with pytest.raises(ValueError):
        enc.encode_batch(["ok", "<|endoftext|>"])


def test_unknown_allowed_special_name(enc):
    """Allowing a special token the vocabulary does not have is harmless (tiktoken ignores it) or an error,
    never a crash."""
    try:
        ids = enc.encode("<|nope|>", allowed_special={"<|nope|>"})
    except (ValueError, KeyError):
        return
    assert ids == reference_encoding("o200k_base").encode_ordinary("<|nope|>")
