"""Concurrency (issue 8): 8 threads encoding, batch-encoding (num_threads=2 inside the threads, so the shared pool
is used from many threads at once), counting and decoding on shared Encodings whose piece cache (4 KB: 32
entries) and prefix cache (16 KB) are tiny, so entries are evicted and overwritten all the time.  Every result
must equal the serial one, which itself equals the reference (tiktoken / HF tokenizers).  A deadline turns a
deadlock into a failure with every thread's stack."""
from __future__ import annotations

import faulthandler
import io
import os
import random
import sys
import threading
import time

import pytest

from _reliability import fresh_encoding, has_surrogate
from _shared import adversarial_dict, corpus_names, corpus_text, reference_encoding, vocab_path

ctok = pytest.importorskip("ctok")
pytest.importorskip("tiktoken")

N_THREADS = 8
ROUNDS = int(os.environ.get("CTOK_THREAD_ROUNDS", "3"))  # more for a long stress run
DEADLINE_S = 300


def _texts():
    texts = [corpus_text(n, 3_000) for n in corpus_names()]
    texts += [t for n, t in adversarial_dict().items() if not n.startswith("run-")][:80]
    system = "You are a careful assistant. Follow the rules below.\n" + corpus_text(corpus_names()[0], 2_500)
    rnd = random.Random(4)
    for i in range(24):  # prompts sharing a long prefix, cut and continued differently (the prefix cache's case)
        cut = rnd.randrange(len(system) // 2, len(system))
        texts.append(system[:cut] + f" user {i}: " + rnd.choice(texts[:20])[:400])
    texts += ["a" * 50_000, " " * 20_000 + "x", "中" * 10_000, ""]
    return [t for t in texts if not has_surrogate(t)]  # HF refuses lone surrogates


@pytest.fixture(scope="module")
def cases():
    """(label, shared encoding with tiny caches, reference encode, reference decode)"""
    texts = _texts()
    out = []
    for name in ("o200k_base", "cl100k_base"):
        ref = reference_encoding(name)
        enc = fresh_encoding(vocab_path(name, f"{name}.tiktoken"), piece_cache_bytes=4096,
                             prefix_cache_bytes=16384)
        assert 0 < enc._core.piece_cache_bytes <= 4096
        out.append((name, enc, ref.encode_ordinary, ref.decode))
    tokenizers = pytest.importorskip("tokenizers")
    for rel in ("llama2/tokenizer.json", "gpt2/tokenizer.json"):
        path = vocab_path(*rel.split("/"))
        hf = tokenizers.Tokenizer.from_file(str(path))
        hf.encode_special_tokens = True
        enc = fresh_encoding(path, piece_cache_bytes=4096)
        out.append((rel, enc, lambda t, hf=hf: hf.encode(t, add_special_tokens=False).ids,
                    lambda ids, hf=hf: hf.decode(ids, skip_special_tokens=False)))
    return texts, out


def _serial(enc, texts):
    """What each operation gives on one thread (computed before the threads start)."""
    enc_ord = [enc.encode_ordinary(t) for t in texts]
    return {
        "encode_ordinary": enc_ord,
        "decode": [enc.decode(ids) for ids in enc_ord],
    }


def _stream(enc, ids):
    dec = enc.stream_decoder()
    return "".join(dec.step(i) for i in ids) + dec.flush()


def test_threads_equal_serial(cases):
    texts, encs = cases
    expected = {}
    for label, enc, ref_encode, ref_decode in encs:
        exp = _serial(enc, texts)
        for t, ids in zip(texts, exp["encode_ordinary"]):
            assert ids == ref_encode(t), (label, t[:60])  # the serial result is the reference's
        for ids, s in zip(exp["encode_ordinary"], exp["decode"]):
            assert s == ref_decode(ids), label
        expected[label] = exp

    errors = []
    done = []
    barrier = threading.Barrier(N_THREADS)
    counts = [0] * N_THREADS

    def work(k):
        rnd = random.Random(100 + k)
        try:
            barrier.wait(timeout=60)
            for _ in range(ROUNDS):
                order = list(range(len(texts)))
                rnd.shuffle(order)
                for label, enc, _, _ in encs:
                    exp = expected[label]
                    for j in order[: len(order) // 2]:
                        t = texts[j]
                        op = rnd.randrange(6)
                        if op == 0:
                            got, want = enc.encode_ordinary(t), exp["encode_ordinary"][j]
                        elif op == 1:
                            got, want = enc.encode(t, disallowed_special=()), exp["encode_ordinary"][j]
                        elif op == 2:
                            got, want = enc.count(t, disallowed_special=()), len(exp["encode_ordinary"][j])
                        elif op == 3:
                            got, want = enc.decode(exp["encode_ordinary"][j]), exp["decode"][j]
                        elif op == 4:
                            got, want = _stream(enc, exp["encode_ordinary"][j]), exp["decode"][j]
                        else:
                            js = [order[(order.index(j) + d) % len(order)] for d in range(rnd.randrange(2, 12))]
                            batch = [texts[i] for i in js]
                            if rnd.random() < 0.5:
                                got = enc.encode_ordinary_batch(batch, num_threads=2)
                            else:
                                ids, offsets = enc.encode_batch_flat(batch, num_threads=2, disallowed_special=())
                                got = [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(batch))]
                            want = [exp["encode_ordinary"][i] for i in js]
                        counts[k] += 1
                        if got != want:
                            errors.append((k, label, op, t[:80]))
            done.append(k)
        except BaseException as e:  # noqa: BLE001
            errors.append((k, "exception", repr(e)))

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads far more often than usual
    try:
        threads = [threading.Thread(target=work, args=(k,), daemon=True, name=f"fuzz-{k}")
                   for k in range(N_THREADS)]
        for th in threads:
            th.start()
        deadline = time.monotonic() + DEADLINE_S
        for th in threads:
            th.join(max(0.0, deadline - time.monotonic()))
    finally:
        sys.setswitchinterval(old_interval)
    alive = [th.name for th in threads if th.is_alive()]
    if alive:
        buf = io.StringIO()
        try:
            faulthandler.dump_traceback(file=buf, all_threads=True)
        except (io.UnsupportedOperation, ValueError):
            import tempfile

            with tempfile.TemporaryFile("w+") as f:
                faulthandler.dump_traceback(file=f, all_threads=True)
                f.seek(0)
                buf.write(f.read())
        pytest.fail(f"threads still running after {DEADLINE_S} s (deadlock?): {alive}\n{buf.getvalue()[-6000:]}")
    assert not errors, errors[:10]
    assert sorted(done) == list(range(N_THREADS))
    assert sum(counts) > N_THREADS * ROUNDS * len(encs) * 10
    # the caches were really under pressure
    stats = encs[0][1].prefix_cache_stats()
    assert stats is not None and stats.get("evictions", 0) > 0, stats


def test_nested_batches_do_not_deadlock(cases):
    """Many threads each running batches with num_threads=4 on a pool of two workers: the calls must finish
    (a pool whose tasks waited on other tasks would hang)."""
    texts, encs = cases
    label, enc, ref_encode, _ = encs[0]
    chunks = [texts[i:i + 16] for i in range(0, 64, 16)]
    want = [[ref_encode(t) for t in c] for c in chunks]
    results = {}

    def outer(k):
        results[k] = [enc.encode_ordinary_batch(c, num_threads=4) for c in chunks]

    threads = [threading.Thread(target=outer, args=(k,), daemon=True) for k in range(N_THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not any(th.is_alive() for th in threads), "nested batch calls deadlocked"
    assert all(results[k] == want for k in range(N_THREADS))


HF_BATCH_FILES = ["llama3-hf", "qwen3", "deepseek-v3", "mistral-7b-v0.1", "gpt-neox-20b"]


@pytest.mark.parametrize("folder", HF_BATCH_FILES)
def test_tokenizer_json_batches_equal_per_text(folder):
    """tokenizer.json batches (texts the compiled route sends plain are encoded together, GIL released; the
    others one by one): the per-text ids, in order, for every thread count, policy and add_special_tokens; a
    text with a lone surrogate raises as the per-text call does; and HF tokenizers agrees on the plain ones."""
    import ctok
    import tokenizers
    path = vocab_path(folder, "tokenizer.json")
    if not path.exists():
        pytest.skip(f"no {folder} tokenizer.json in ../shared")
    enc = ctok.load(path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    texts = [corpus_text(n, 3_000)[i * 101:i * 101 + 40 + i * 17] for n in corpus_names() for i in range(12)]
    texts += ["", " ", "Ω Å ﬁ \u212b", "e\u0301", "<|endoftext|>", "  indented\n    code", "<think>x</think>"]
    texts += [t.upper() for t in texts[:20]]
    want = [enc.encode_ordinary(t) for t in texts]
    for threads in (1, 2):
        assert enc.encode_ordinary_batch(texts, num_threads=threads) == want
        for kw in ({}, {"allowed_special": "all"}, {"disallowed_special": ()}, {"add_special_tokens": True},
                   {"allowed_special": "all", "add_special_tokens": True}):
            try:
                per_text = [enc.encode(t, **kw) for t in texts]
            except ValueError:
                with pytest.raises(ValueError):
                    enc.encode_batch(texts, num_threads=threads, **kw)
                continue
            assert enc.encode_batch(texts, num_threads=threads, **kw) == per_text, kw
    plain = [t for t in texts if "<" not in t]
    assert enc.encode_ordinary_batch(plain, num_threads=2) == [hf.encode(t, add_special_tokens=False).ids
                                                                for t in plain]
    bad = texts[:10] + ["a\ud800b"] + texts[10:20]
    with pytest.raises(Exception) as per_text_error:
        enc.encode_ordinary("a\ud800b")
    with pytest.raises(type(per_text_error.value)):
        enc.encode_ordinary_batch(bad, num_threads=2)


SPECIALS_BATCH_FILES = ["o200k_base", "kimi-k2", "llama3-tiktoken", "qwen3/tokenizer.json",
                        "deepseek-v3/tokenizer.json", "llama3-hf/tokenizer.json", "mistral-7b-v0.1/tokenizer.json",
                        "mistral-7b-v0.3/tokenizer.json", "llama2/tokenizer.json"]


@pytest.mark.parametrize("source", SPECIALS_BATCH_FILES)
def test_template_batches_split_at_specials_natively(source):
    """encode_batch / encode_batch_flat with every special token allowed (a batch of chat templates' outputs):
    the texts whose encode() is the core's split at every special token are encoded together by it (GIL
    released, threads), the others one by one.  Templated texts, special-token fragments, lone surrogates
    (U+FFFD for tiktoken files, an error for tokenizer.json files), text the normal form changes, str
    subclasses and empty texts: the per-text ids in order, the reference's ids, for one and two threads."""
    import numpy as np

    from _shared import TIKTOKEN_FAMILIES, shared_dir

    shared_dir()
    if source.endswith(".json"):
        import tokenizers
        path = vocab_path(*source.split("/"))
        enc = ctok.load(str(path))
        hf = tokenizers.Tokenizer.from_file(str(path))

        def ref(t, post=False):
            return hf.encode(t, add_special_tokens=post).ids
    else:
        family = next(f for f in TIKTOKEN_FAMILIES if f.folder == source)
        enc = ctok.load(str(family.source_file()))
        tk = reference_encoding(family.folder, family.recipe)

        def ref(t, post=False):
            return tk.encode(t, allowed_special="all")
    assert enc._split_all is not None
    rnd = random.Random(SEED_BATCH)
    names = sorted(enc.special_tokens)
    names = [names[0], names[-1]] + rnd.sample(names, min(6, len(names)))
    words = [corpus_text(n, 4_000) for n in corpus_names()]
    texts = []
    for i in range(60):
        body = rnd.choice(words)
        k = rnd.randrange(len(body))
        parts = [names[0], "system\nYou are helpful.", names[1], "\n", rnd.choice(names), "user\n",
                 body[k:k + rnd.randint(0, 600)], rnd.choice(names), rnd.choice(names)[:rnd.randint(1, 8)]]
        texts.append("".join(parts[:rnd.randint(1, len(parts))]))
    texts += ["", names[0], names[0] * 3, names[0][:-1], "e\u0301" + names[1], "\u212b" + names[0],
              _S(names[0] + "x"), "a\ud800" + names[1], names[1] + "\udfff"]
    rnd.shuffle(texts)
    picked = enc._specials_batch(texts, "all", "all")
    hf_file = enc._hf is not None
    if hf_file:        # lone surrogates and text the normal form changes go one by one
        from ctok.hf import normalize_forms
        forms = enc._hf_route()[1]      # () for SentencePiece-style files (the marked route normalizes itself)
        assert sorted(picked) == [i for i, t in enumerate(texts) if type(t) is str and not has_surrogate(t)
                                  and normalize_forms(forms, t) == t]
    else:
        assert picked == list(range(len(texts)))
    for post in ((False, True) if hf_file else (False,)):
        kw = {"allowed_special": "all", "add_special_tokens": post} if hf_file else {"allowed_special": "all"}
        good = [t for t in texts if not (hf_file and has_surrogate(t))]
        per_text = [enc.encode(t, **kw) for t in good]
        assert per_text == [ref(t, post) for t in good]
        for threads in (1, 2):
            assert enc.encode_batch(good, num_threads=threads, **kw) == per_text
            if not post:
                ids, offsets = enc.encode_batch_flat(good, num_threads=threads, allowed_special="all")
                assert ids.dtype == np.uint32 and len(offsets) == len(good) + 1
                assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(good))] == per_text
    if hf_file:
        with pytest.raises(Exception):
            enc.encode_batch(texts, allowed_special="all")        # a lone surrogate raises, as encode does


SEED_BATCH = 20261204


@pytest.mark.parametrize("source", SPECIALS_BATCH_FILES)
def test_template_batches_with_a_set_allowed(source):
    """encode_batch / encode_batch_flat with a set of special tokens allowed (disallowed_special="all"): a text
    holding none of the others is the core's split at every special token and goes with the batch; one holding
    another raises, in the batch as one by one.  The per-text ids, in order, for one and two threads."""
    import numpy as np

    from _shared import TIKTOKEN_FAMILIES, shared_dir

    shared_dir()
    if source.endswith(".json"):
        enc = ctok.load(str(vocab_path(*source.split("/"))))
    else:
        family = next(f for f in TIKTOKEN_FAMILIES if f.folder == source)
        enc = ctok.load(str(family.source_file()))
    rnd = random.Random(SEED_BATCH + 1)
    names = sorted(enc.special_tokens)
    allowed = {names[0], names[-1]}
    others = [n for n in names if n not in allowed]
    words = [corpus_text(n, 4_000) for n in corpus_names()]
    texts = []
    for i in range(80):
        body = rnd.choice(words)
        k = rnd.randrange(len(body))
        parts = [names[0], "user\n", body[k:k + rnd.randint(0, 600)], names[-1], "\n", names[0][:-1]]
        if others and i % 9 == 0:
            parts.insert(rnd.randrange(len(parts) + 1), rnd.choice(others))
        texts.append("".join(parts[:rnd.randint(1, len(parts))]))
    texts += ["", names[0] * 3, "e\u0301" + names[-1], "\u212b" + names[0]]
    holding = [t for t in texts if any(o in t for o in others)]
    good = [t for t in texts if t not in holding]
    picked = enc._specials_batch(texts, allowed, "all")
    assert picked is not None and not any(texts[i] in holding for i in picked)
    assert len(picked) > len(good) // 2
    per_text = [enc.encode(t, allowed_special=allowed) for t in good]
    assert per_text == [enc.encode(t, allowed_special="all") for t in good]   # the others absent: the same ids
    for threads in (1, 2):
        assert enc.encode_batch(good, num_threads=threads, allowed_special=allowed) == per_text
        ids, offsets = enc.encode_batch_flat(good, num_threads=threads, allowed_special=frozenset(allowed))
        assert ids.dtype == np.uint32
        assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(good))] == per_text
        if holding:
            with pytest.raises(ctok.DisallowedSpecialError):
                enc.encode_batch(texts, num_threads=threads, allowed_special=allowed)


class _S(str):
    pass
