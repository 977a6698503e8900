#!/usr/bin/env python3
"""Streaming detokenization speed: ctok's stream_decoder() against HF tokenizers' DecodeStream, per token.

Usage: python bench/stream_bench.py [--families llama3-hf qwen3 ...] [--tokens 20000]

Each family decodes the same id stream (its own encoding of English, Japanese and emoji text) one id at a
time on both sides, and every step's text is checked to be equal.  "cold" is a new Encoding's first stream
(per-id bytes not cached yet); "warm" a later stream of the same Encoding, which is what a server sees.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
SHARED = os.environ.get("CTOK_SHARED", os.path.join(HERE, "..", "..", "shared"))


def main():
    import ctok
    import tokenizers
    from tokenizers.decoders import DecodeStream

    ap = argparse.ArgumentParser()
    ap.add_argument("--families", nargs="*", default=["llama3-hf", "qwen3", "deepseek-v3", "mistral-7b-v0.1"])
    ap.add_argument("--tokens", type=int, default=20000)
    args = ap.parse_args()
    corpus = os.path.join(SHARED, "corpus")
    text = "".join(open(os.path.join(corpus, f), encoding="utf-8").read()[:20000]
                   for f in ("en_dracula.txt", "ja_wagahaiwa_nekodearu.txt", "emoji-test.txt"))
    print(f"{'family':18s} {'ctok cold':>10s} {'ctok warm':>10s} {'HF':>10s}  ns/token; ratio HF / ctok warm")
    for fam in args.families:
        path = os.path.join(SHARED, "vocab", fam, "tokenizer.json")
        ref = tokenizers.Tokenizer.from_file(path)
        enc = ctok.load(path)
        ids = ref.encode(text, add_special_tokens=False).ids[:args.tokens]

        def run_ctok():
            d = enc.stream_decoder()
            step = d.step
            t0 = time.perf_counter()
            out = [step(i) for i in ids]
            return time.perf_counter() - t0, out

        cold, got = run_ctok()
        warm = min(run_ctok()[0] for _ in range(3))
        ds = DecodeStream(skip_special_tokens=False)
        t0 = time.perf_counter()
        want = [ds.step(ref, i) or "" for i in ids]
        hf = time.perf_counter() - t0
        assert got == want, f"{fam}: stream steps differ from HF's DecodeStream"
        n = len(ids)
        print(f"{fam:18s} {cold / n * 1e9:10.0f} {warm / n * 1e9:10.0f} {hf / n * 1e9:10.0f}  x{hf / warm:.1f}")


if __name__ == "__main__":
    main()
