"""Reference and memory leak check: run each API a million times on short texts and measure what stays behind.

    python tools/leak_check.py                 # 1,000,000 calls per workload, o200k_base, a table of results
    python tools/leak_check.py --n 200000 --json

For each workload (encode, encode with special tokens, batches, decode, stream decoding, the error paths, a
tokenizer.json family when ../shared is there) the same calls run once to warm up (id objects, caches, pools)
and then again; between the two measurements, with a gc.collect() around each:

* ``blocks``: sys.getallocatedblocks(), Python's count of live memory blocks.  A leaked reference keeps an
  object (and its block) alive, so a leak of one object per call shows as ~N blocks; flat means no leak.
* ``refs``: sys.gettotalrefcount() on a debug build of Python (None otherwise).
* ``rss_kb``: resident memory growth (the native allocations that Python does not count).

Exit status 1 when a workload grows by more than --max-blocks blocks or --max-rss-kb of RSS.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
try:
    import ctok  # noqa: F401 - whatever build is on the path (PYTHONPATH for out-of-tree builds)
except ImportError:
    sys.path.insert(0, REPO)
import ctok  # noqa: E402,F811


def rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


def snapshot():
    gc.collect()
    gc.collect()
    refs = sys.gettotalrefcount() if hasattr(sys, "gettotalrefcount") else None
    return sys.getallocatedblocks(), refs, rss_kb()


def make_texts(n=1000, seed=1):
    rnd = random.Random(seed)
    words = ["hello", "world", "the", "quick", "brown", "fox", "naïve", "Straße", "中文", "日本語", "😀", "👍🏽", "123",
             "4567", "don't", "it's", "<html>", "def", "return", "\n", "  ", "\t", "Ωmega", "привет", "مرحبا"]
    return [" ".join(rnd.choice(words) for _ in range(rnd.randint(1, 12))) for _ in range(n)]


def workloads(enc, texts, n):
    """name -> (function running the workload once, number of API calls it makes)."""
    reps = max(1, n // len(texts))
    specials = [t + " <|endoftext|>" for t in texts]
    ids = [enc.encode_ordinary(t) for t in texts]
    batches = [texts[i:i + 100] for i in range(0, len(texts), 100)]
    bad_id = enc.n_vocab + 10

    def encode():
        f = enc.encode
        for _ in range(reps):
            for t in texts:
                f(t)

    def encode_special():
        f = enc.encode
        for _ in range(max(1, reps // 10)):
            for t in specials:
                f(t, allowed_special="all")

    def batch():
        for _ in range(reps):
            for b in batches:
                enc.encode_batch(b, num_threads=2)

    def flat():
        for _ in range(max(1, reps // 10)):
            for b in batches:
                enc.encode_batch_flat(b, num_threads=2)

    def decode():
        f = enc.decode
        for _ in range(reps):
            for x in ids:
                f(x)

    def stream():
        for _ in range(max(1, reps // 10)):
            for x in ids:
                d = enc.stream_decoder()
                for i in x:
                    d.step(i)
                d.flush()

    def errors():
        for _ in range(max(1, reps // 10)):
            for t in specials:
                try:
                    enc.encode(t)
                except ValueError:
                    pass
                try:
                    enc.decode([1, bad_id])
                except ValueError:
                    pass
                try:
                    enc.encode(b"not text")
                except TypeError:
                    pass

    n_texts = len(texts)
    return {
        "encode": (encode, reps * n_texts),
        "encode(allowed_special=all)": (encode_special, max(1, reps // 10) * n_texts),
        "encode_batch(100 texts, 2 threads)": (batch, reps * n_texts),
        "encode_batch_flat": (flat, max(1, reps // 10) * n_texts),
        "decode": (decode, reps * n_texts),
        "stream_decoder": (stream, max(1, reps // 10) * sum(len(x) for x in ids)),
        "error paths (3 kinds)": (errors, max(1, reps // 10) * n_texts * 3),
    }


def measure(label, enc, texts, n, out):
    for name, (fn, calls) in workloads(enc, texts, n).items():
        fn()  # warm up: id objects, pools, caches reach their steady state
        b0, r0, m0 = snapshot()
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        b1, r1, m1 = snapshot()
        out.append({"encoding": label, "workload": name, "calls": calls, "seconds": round(dt, 3),
                    "blocks": b1 - b0, "refs": None if r0 is None else r1 - r0, "rss_kb": m1 - m0})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="calls per workload (default 1,000,000)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--max-blocks", type=int, default=2000)
    ap.add_argument("--max-rss-kb", type=int, default=16 * 1024)
    args = ap.parse_args(argv)
    texts = make_texts()
    out = []
    measure("o200k_base", ctok.get_encoding("o200k_base"), texts, args.n, out)
    shared = os.environ.get("CTOK_SHARED") or os.path.join(os.path.dirname(REPO), "shared")
    hf_path = os.path.join(shared, "vocab", "llama2", "tokenizer.json")
    if os.path.exists(hf_path):
        measure("llama2 tokenizer.json", ctok.load(hf_path), texts, max(1, args.n // 10), out)
    bad = [r for r in out if r["blocks"] > args.max_blocks or r["rss_kb"] > args.max_rss_kb]
    if args.json:
        print(json.dumps({"results": out, "failed": bad}))
    else:
        print(f"{'encoding':<22} {'workload':<36} {'calls':>10} {'s':>7} {'blocks':>8} {'refs':>8} {'rss_kb':>8}")
        for r in out:
            print(f"{r['encoding']:<22} {r['workload']:<36} {r['calls']:>10} {r['seconds']:>7} {r['blocks']:>8} "
                  f"{str(r['refs']):>8} {r['rss_kb']:>8}")
        print("FAILED: " + ", ".join(r["workload"] for r in bad) if bad else "no growth beyond the limits")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
