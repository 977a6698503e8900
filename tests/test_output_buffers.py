"""Memory the encoders keep between calls to make result lists: the process-wide int table
(_encoder.shared_int_cache) and each encoder's kept ids buffer for long texts (CoreEncoder.take_out/give_out).

Contract: results never depend on either.  Encoders of any vocabulary size, made in any order, share one int per
value; an encoder made before the table grew keeps encoding right; the kept buffer serves one long encode at a time
(a concurrent one, from a thread while the first runs without the GIL, gets its own) and is dropped when a text
needed more than LONG_KEEP_IDS ids.  (Re-entry from a finalizer would need the garbage collector to run inside the
encode: tried with collector thresholds 1-11 and CPython's list free list drained, it never ran there.)"""
import json
import os
import subprocess
import sys
import threading

import pytest

from _shared import assert_same_ids, corpus_text, reference_encoding, vocab_path

ctok = pytest.importorskip("ctok")
pytest.importorskip("tiktoken")


def _root():
    return os.path.dirname(os.path.dirname(os.path.abspath(ctok.__file__)))


# Run in a fresh process: the table grows only when a larger vocabulary than any before is loaded, and this
# test process has loaded the large ones long before.
GROWTH_SCRIPT = r"""
import json, sys
import ctok
text = sys.argv[1]
small = ctok.load(sys.argv[2])                 # p50k: 50,281 ids
a = small.encode_ordinary(text)
big = ctok.load(sys.argv[3])                   # o200k: 200,019 ids, so the table grows
b = big.encode_ordinary(text)
a2 = small.encode_ordinary(text)               # the encoder made before the growth
c = ctok.load(sys.argv[4]).encode_ordinary(text)   # cl100k, made after: the grown table
shared = sorted(set(a) & set(b))
same_object = all(
    a[a.index(v)] is b[b.index(v)] for v in shared
)
print(json.dumps({"a": a, "b": b, "a2": a2, "c": c, "shared": len(shared), "same_object": same_object}))
"""


def test_encoders_share_ints_across_growth():
    text = corpus_text("en_dracula.txt", 20_000) + " " + corpus_text("code_python.txt", 20_000)
    paths = [str(vocab_path("p50k_base", "p50k_base.tiktoken")), str(vocab_path("o200k_base", "o200k_base.tiktoken")),
             str(vocab_path("cl100k_base", "cl100k_base.tiktoken"))]
    env = dict(os.environ, PYTHONPATH=_root())
    r = subprocess.run([sys.executable, "-c", GROWTH_SCRIPT, text] + paths, capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    p50k = reference_encoding("p50k_base").enc
    o200k = reference_encoding("o200k_base").enc
    cl100k = reference_encoding("cl100k_base").enc
    assert_same_ids(out["a"], p50k.encode_ordinary(text), label="p50k before growth")
    assert_same_ids(out["a2"], p50k.encode_ordinary(text), label="p50k after growth")
    assert_same_ids(out["b"], o200k.encode_ordinary(text), label="o200k")
    assert_same_ids(out["c"], cl100k.encode_ordinary(text), label="cl100k")
    assert out["shared"] > 100
    assert out["same_object"], "equal ids from two encoders should be one int object"


def _long_texts():
    base = corpus_text("en_dracula.txt", 200_000)
    # "a b c ..." gives one id per two bytes: 2.2 MB of it is more ids than LONG_KEEP_IDS (1,048,576).
    many_ids = "a " * 1_100_000
    return [base[:5_000], base, base[:3_000] + "\n" + base[:60_000], many_ids, base[:40_000], many_ids[:9_000], base]


def test_long_texts_in_turn(o200k, o200k_ref):
    for text in _long_texts():
        assert_same_ids(o200k.encode_ordinary(text), o200k_ref.enc.encode_ordinary(text), label=f"{len(text)} chars")
    bytes_text = corpus_text("ja_wagahaiwa_nekodearu.txt", 100_000).encode()
    assert_same_ids(o200k.encode_ordinary(bytes_text.decode()), o200k_ref.enc.encode_ordinary(bytes_text.decode()))


def test_long_texts_from_threads(o200k, o200k_ref):
    texts = [corpus_text(name, 60_000) for name in ("en_dracula.txt", "code_python.txt", "ru_bible_synodal.txt",
                                                    "zh_classical.txt")]
    expected = [o200k_ref.enc.encode_ordinary(t) for t in texts]
    errors = []

    def work(k):
        for i in range(12):
            j = (k + i) % len(texts)
            if o200k.encode_ordinary(texts[j]) != expected[j]:
                errors.append((k, i, j))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
