"""The command line, run as a subprocess (`python -m ctok`). Expected ids come from tiktoken / HF tokenizers."""
import json
import os
import subprocess
import sys

import pytest

from _shared import FAMILY_BY_ID, corpus_text, reference_encoding, vocab_path

ctok = pytest.importorskip("ctok")
np = pytest.importorskip("numpy")
pytest.importorskip("tiktoken")

# run the same ctok the tests import
CTOK_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(ctok.__file__)))


def run(args, *, input=b"", env=None, cwd=None, check=True):
    e = dict(os.environ)
    e["PYTHONPATH"] = CTOK_PARENT + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.pop("CTOK_PROGRESS", None)
    if env:
        e.update(env)
    p = subprocess.run([sys.executable, "-m", "ctok", *args], input=input, capture_output=True, env=e, cwd=cwd,
                       timeout=600)
    if check and p.returncode != 0:
        raise AssertionError(f"ctok {args} exited {p.returncode}: {p.stderr.decode(errors='replace')}")
    return p


@pytest.fixture(scope="module")
def ref():
    return reference_encoding("o200k_base")


def ids_text(ids):
    return (" ".join(map(str, ids)) + "\n").encode()


# --------------------------------------------------------------------------------------------------------------


def test_help():
    p = run(["--help"])
    assert b"encode" in p.stdout and b"decode" in p.stdout and b"count" in p.stdout
    for cmd in ("encode", "decode", "count"):
        p = run([cmd, "--help"])
        assert b"--encoding" in p.stdout and b"--format" in p.stdout


def test_list():
    p = run(["list"])
    names = p.stdout.decode().split()
    assert "o200k_base" in names and "cl100k_base" in names


def test_encode_stdin_default_encoding(ref):
    p = run(["encode"], input="hello world\n".encode())
    assert p.stdout == ids_text(ref.encode("hello world\n"))
    assert p.stderr == b""


def test_encode_encoding_option():
    ref = reference_encoding("cl100k_base")
    text = "Tokenizers split text; cl100k is not o200k.\n"
    p = run(["encode", "--encoding", "cl100k_base"], input=text.encode())
    assert p.stdout == ids_text(ref.encode(text))


@pytest.mark.parametrize("fmt", ["text", "json", "u32"])
def test_encode_formats(ref, fmt, tmp_path):
    text = corpus_text("udhr_multilingual.txt", 30_000)
    path = tmp_path / "in.txt"
    path.write_bytes(text.encode("utf-8"))
    p = run(["encode", "--format", fmt, str(path)])
    exp = ref.encode(text)
    if fmt == "text":
        assert p.stdout == ids_text(exp)
    elif fmt == "json":
        assert json.loads(p.stdout) == exp
    else:
        assert np.frombuffer(p.stdout, dtype="<u4").tolist() == exp


def test_encode_several_files(ref, tmp_path):
    texts = ["first file\n", "second, 中文 😀", ""]
    paths = []
    for i, t in enumerate(texts):
        paths.append(tmp_path / f"f{i}.txt")
        paths[-1].write_bytes(t.encode())
    p = run(["encode", *map(str, paths)])
    assert p.stdout == b"".join(ids_text(ref.encode(t)) for t in texts)
    p = run(["encode", "--format", "json", *map(str, paths)])
    assert [json.loads(line) for line in p.stdout.decode().splitlines()] == [ref.encode(t) for t in texts]
    p = run(["encode", "--format", "u32", *map(str, paths)])
    assert np.frombuffer(p.stdout, dtype="<u4").tolist() == sum((ref.encode(t) for t in texts), [])


def test_encode_keeps_bytes_exactly(ref, tmp_path):
    """No newline translation, no BOM stripping."""
    text = "\ufeffa\r\nb\rc\n\n  \t"
    path = tmp_path / "crlf.txt"
    path.write_bytes(text.encode("utf-8"))
    assert run(["encode", str(path)]).stdout == ids_text(ref.encode(text))
    assert run(["encode"], input=text.encode("utf-8")).stdout == ids_text(ref.encode(text))
    assert run(["encode", "-"], input=text.encode("utf-8")).stdout == ids_text(ref.encode(text))


def test_encode_tokenizer_tiktoken_file():
    family = FAMILY_BY_ID["llama3-tiktoken"]
    ref = reference_encoding(family.folder)
    text = corpus_text("en_botchan.txt", 5_000)
    p = run(["encode", "--tokenizer", str(family.source_file()), "--format", "json"], input=text.encode())
    assert json.loads(p.stdout) == ref.encode(text)


def test_encode_tokenizer_json():
    tokenizers = pytest.importorskip("tokenizers")
    path = vocab_path("gpt2", "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(path))
    text = corpus_text("en_dracula.txt", 5_000)
    p = run(["encode", "--tokenizer", str(path), "--format", "json"], input=text.encode())
    assert json.loads(p.stdout) == hf.encode(text, add_special_tokens=False).ids


def test_special_tokens_options(ref):
    text = "a<|endoftext|>b<|endofprompt|>c"
    p = run(["encode"], input=text.encode(), check=False)
    assert p.returncode == 1
    assert b"<|endoftext|>" in p.stderr and b"Traceback" not in p.stderr
    p = run(["encode", "--allowed-special", "all"], input=text.encode())
    assert p.stdout == ids_text(ref.encode(text, allowed_special="all"))
    p = run(["encode", "--allowed-special", "<|endoftext|>", "--disallowed-special", "none"], input=text.encode())
    assert p.stdout == ids_text(ref.encode(text, allowed_special={"<|endoftext|>"}, disallowed_special=()))
    p = run(["encode", "--disallowed-special", "none"], input=text.encode())
    assert p.stdout == ids_text(ref.encode_ordinary(text))
    p = run(["encode", "--allowed-special", "<|endoftext|>"], input=text.encode(), check=False)
    assert p.returncode == 1 and b"<|endofprompt|>" in p.stderr


def test_count(ref, tmp_path):
    text = corpus_text("en_botchan.txt", 20_000)
    p = run(["count"], input=text.encode())
    assert p.stdout == f"{len(ref.encode(text))}\n".encode()
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("one two three", encoding="utf-8")
    b.write_text("四 五 六 seven", encoding="utf-8")
    p = run(["count", str(a), str(b)])
    na, nb = len(ref.encode("one two three")), len(ref.encode("四 五 六 seven"))
    assert p.stdout.decode().splitlines() == [f"{na}\t{a}", f"{nb}\t{b}", f"{na + nb}\ttotal"]
    p = run(["count", "--allowed-special", "all"], input=b"<|endoftext|>")
    assert p.stdout == b"1\n"


@pytest.mark.parametrize("fmt", ["text", "json", "u32"])
def test_decode_roundtrip(ref, fmt, tmp_path):
    text = corpus_text("ja_wagahaiwa_nekodearu.txt", 10_000) + "\r\n😀 end"
    src = tmp_path / "in.txt"
    src.write_bytes(text.encode())
    ids_file = tmp_path / f"ids.{fmt}"
    ids_file.write_bytes(run(["encode", "--format", fmt, str(src)]).stdout)
    assert run(["decode", "--format", fmt, str(ids_file)]).stdout == text.encode()
    assert run(["decode", "--format", fmt], input=ids_file.read_bytes()).stdout == text.encode()


def test_decode_inputs_from_reference(ref):
    ids = ref.encode("decoded by ctok")
    assert run(["decode"], input=" ".join(map(str, ids)).encode()).stdout == b"decoded by ctok"
    assert run(["decode", "--format", "json"], input=json.dumps(ids).encode()).stdout == b"decoded by ctok"
    assert run(["decode", "--format", "u32"], input=np.asarray(ids, "<u4").tobytes()).stdout == b"decoded by ctok"


@pytest.mark.parametrize("args,data,needle", [
    (["decode"], b"1 2 x3", b"x3"),
    (["decode", "--format", "json"], b"[1, 2", b"JSON"),
    (["decode", "--format", "json"], b'{"a": 1}', b"array"),
    (["decode", "--format", "u32"], b"\x01\x02\x03", b"uint32"),
    (["decode"], b"1000000000", b"1000000000"),
    (["encode", "--encoding", "no_such_encoding"], b"x", b"no_such_encoding"),
    (["encode"], b"\xff\xfe bad utf-8", b"UTF-8"),
])
def test_errors_are_messages(args, data, needle):
    p = run(args, input=data, check=False)
    assert p.returncode != 0
    assert needle in p.stderr, p.stderr
    assert b"Traceback" not in p.stderr


def test_missing_file(tmp_path):
    p = run(["encode", str(tmp_path / "nope.txt")], check=False)
    assert p.returncode == 1 and b"nope.txt" in p.stderr and b"Traceback" not in p.stderr
    p = run(["encode", "--tokenizer", str(tmp_path / "nope.tiktoken")], input=b"x", check=False)
    assert p.returncode == 1 and b"nope.tiktoken" in p.stderr and b"Traceback" not in p.stderr


def test_no_progress_without_tty(ref):
    """stderr is a pipe here: no progress bar, even for a big input."""
    text = corpus_text("en_python_docs.rst.txt", 1_200_000)
    p = run(["count", "--disallowed-special", "none"], input=text.encode())
    assert p.stderr == b""
    assert p.stdout == f"{len(ref.encode_ordinary(text))}\n".encode()


def test_progress_bar_is_exact(ref):
    """With the progress bar forced on, the input is encoded in chunks; the ids must still be exact."""
    text = "".join(corpus_text(n, 700_000) for n in ("en_python_docs.rst.txt", "code_python.txt",
                                                        "ru_bible_synodal.txt"))
    env = {"CTOK_PROGRESS": "1"}
    p = run(["encode", "--format", "u32", "--disallowed-special", "none"], input=text.encode(), env=env)
    assert b"%" in p.stderr and b"MB" in p.stderr
    assert np.frombuffer(p.stdout, dtype="<u4").tolist() == ref.encode_ordinary(text)
    p = run(["count", "--disallowed-special", "none"], input=text.encode(), env=env)
    assert p.stdout == f"{len(ref.encode_ordinary(text))}\n".encode()


def test_progress_bar_is_exact_for_whole_text_tokenizers():
    """A SentencePiece-style file prepends '▁' to the whole text only: chunk boundaries must be refused."""
    tokenizers = pytest.importorskip("tokenizers")
    path = vocab_path("mistral-7b-v0.1", "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.encode_special_tokens = True
    text = corpus_text("en_dracula.txt", 600_000)
    env = {"CTOK_PROGRESS": "1", "CTOK_PROGRESS_MIN_BYTES": "1000"}
    p = run(["encode", "--tokenizer", str(path), "--format", "u32", "--disallowed-special", "none"],
            input=text.encode(), env=env)
    assert np.frombuffer(p.stdout, dtype="<u4").tolist() == hf.encode(text, add_special_tokens=False).ids
