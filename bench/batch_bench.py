#!/usr/bin/env python3
"""Batch encoding on every core (issue 5): 10,000 chat-sized texts of 50-2,000 bytes, side by side in one
process with tiktoken's encode_ordinary_batch and fastokens' encode_batch / encode_batch_flat.

Usage: python bench/batch_bench.py [--encoding o200k_base] [--texts 10000] [--repeat 3] [--templated]

The texts are slices of ../shared/corpus (English prose and code above all, some Russian, Chinese and
Japanese), cut at random offsets with random lengths.  "unseen" runs each call on a new set of slices
(caches hold what earlier calls saw, as in a server; no text repeats); "repeat" is the best of --repeat
calls on one set.  Outputs: lists of ids (ctok encode_ordinary_batch, tiktoken, fastokens .ids) or flat
arrays (ctok and fastokens encode_batch_flat).  fastokens sets its own thread count (all cores); tiktoken
and ctok are run at 1 thread and at all cores.  Ratios, not absolute MB/s, are what carry over between runs.

--templated: each text wrapped in a chat template of the encoding's special tokens and encoded with every
special token allowed (encode_batch(..., allowed_special="all"), as a server encodes its rendered prompts),
beside ctok's per-text encode and tiktoken's encode_batch with the same policy; fastokens is left out (its
batch takes no special-token policy).
"""
import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SHARED = Path(os.environ.get("CTOK_SHARED", REPO.parent / "shared"))
sys.path.insert(0, str(REPO / "bench"))
from compare import fastokens_preset, template_names  # noqa: E402

# (file, weight): chat traffic is mostly English prose and code
SOURCES = [("en_dracula.txt", 4), ("en_botchan.txt", 2), ("en_python_docs.rst.txt", 2), ("code_python.txt", 3),
           ("ru_bible_synodal.txt", 1), ("zh_classical.txt", 1), ("ja_wagahaiwa_nekodearu.txt", 1)]


def make_texts(count, seed):
    rnd = random.Random(seed)
    files = [((SHARED / "corpus" / name).read_bytes(), w) for name, w in SOURCES]
    pool = [data for data, w in files for _ in range(w)]
    out = []
    for _ in range(count):
        data = rnd.choice(pool)
        n = rnd.randint(50, 2000)
        a = rnd.randrange(0, len(data) - n)
        out.append(data[a:a + n].decode("utf-8", "ignore"))
    return out


def tiktoken_ref(name):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    folder = SHARED / "vocab" / name
    r = json.loads((folder / "recipe.json").read_text(encoding="utf-8"))
    ranks = load_tiktoken_bpe(str(folder / r["file"]))
    return tiktoken.Encoding(r["name"], pat_str=r["pat_str"], mergeable_ranks=ranks,
                             special_tokens=r["special_tokens"]), r, folder / r["file"]


def template(enc):
    """text -> the text in a chat template of two of the encoding's special tokens."""
    start, end = template_names(enc)
    return lambda t: f"{start}user\n{t}{end}\n{start}assistant\n"


def templated_runners(name, cores):
    import ctok
    ref, recipe, path = tiktoken_ref(name)
    enc = ctok.load(str(path))
    out = {
        "ctok per-text encode": lambda ts: [enc.encode(t, allowed_special="all") for t in ts],
        "ctok lists 1 thread": lambda ts: enc.encode_batch(ts, num_threads=1, allowed_special="all"),
        f"ctok lists {cores} threads": lambda ts: enc.encode_batch(ts, num_threads=cores, allowed_special="all"),
        "ctok flat 1 thread": lambda ts: enc.encode_batch_flat(ts, num_threads=1, allowed_special="all"),
        f"ctok flat {cores} threads": lambda ts: enc.encode_batch_flat(ts, num_threads=cores, allowed_special="all"),
        "tiktoken lists 1 thread": lambda ts: ref.encode_batch(ts, num_threads=1, allowed_special="all"),
        f"tiktoken lists {cores} threads": lambda ts: ref.encode_batch(ts, num_threads=cores, allowed_special="all"),
    }
    return out, ref, enc


def runners(name, cores):
    import ctok
    ref, recipe, path = tiktoken_ref(name)
    enc = ctok.load(str(path))
    out = {
        "ctok lists 1 thread": lambda ts: enc.encode_ordinary_batch(ts, num_threads=1),
        f"ctok lists {cores} threads": lambda ts: enc.encode_ordinary_batch(ts, num_threads=cores),
        "ctok flat 1 thread": lambda ts: enc.encode_batch_flat(ts, num_threads=1),
        f"ctok flat {cores} threads": lambda ts: enc.encode_batch_flat(ts, num_threads=cores),
        "tiktoken lists 1 thread": lambda ts: ref.encode_ordinary_batch(ts, num_threads=1),
        f"tiktoken lists {cores} threads": lambda ts: ref.encode_ordinary_batch(ts, num_threads=cores),
    }
    try:
        import fastokens
        ft = fastokens.Tokenizer.from_tiktoken(str(path), **fastokens_preset(recipe))
        out["fastokens lists (own pool)"] = lambda ts: [e.ids for e in ft.encode_batch(ts, add_special_tokens=False)]
        out["fastokens flat (own pool)"] = lambda ts: ft.encode_batch_flat(ts, add_special_tokens=False)
    except Exception as e:  # noqa: BLE001 - a missing or refusing peer is reported, not fatal
        print(f"fastokens: {e.__class__.__name__}: {e}", file=sys.stderr)
    return out, ref, enc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoding", default="o200k_base")
    ap.add_argument("--texts", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--templated", action="store_true")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    run, ref, enc = (templated_runners if args.templated else runners)(args.encoding, cores)
    wrap = template(enc) if args.templated else (lambda t: t)
    texts_of = (lambda count, seed: [wrap(t) for t in make_texts(count, seed)])

    check = texts_of(300, 1)
    if args.templated:
        want = [ref.encode(t, allowed_special="all") for t in check]
        assert enc.encode_batch(check, num_threads=cores, allowed_special="all") == want
        ids, offs = enc.encode_batch_flat(check, num_threads=cores, allowed_special="all")
    else:
        want = [ref.encode_ordinary(t) for t in check]
        assert enc.encode_ordinary_batch(check, num_threads=cores) == want
        ids, offs = enc.encode_batch_flat(check, num_threads=cores)
    assert ids.tolist() == [i for w in want for i in w]

    size = sum(len(t.encode("utf-8")) for t in texts_of(args.texts, 2))
    kind = "chat-templated texts" if args.templated else "texts"
    print(f"{args.texts} {kind} of 50-2,000 bytes, {size / 1e6:.1f} MB, {args.encoding}, {cores} cores")
    unseen, again = {}, {}
    # unseen: every call gets slices it has never seen, in an interleaved order across libraries
    seed = 100
    for r in range(args.repeat):
        for label, fn in run.items():
            seed += 1
            texts = texts_of(args.texts, seed)
            mbytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
            t0 = time.perf_counter()
            fn(texts)
            unseen.setdefault(label, []).append(mbytes / (time.perf_counter() - t0))
    texts = texts_of(args.texts, 2)
    for label, fn in run.items():
        fn(texts)
    for r in range(args.repeat):
        for label, fn in run.items():
            t0 = time.perf_counter()
            fn(texts)
            again.setdefault(label, []).append(size / 1e6 / (time.perf_counter() - t0))
    base = max(unseen["ctok lists 1 thread"])
    print(f"{'':32s} {'unseen MB/s':>12s} {'repeat MB/s':>12s}   unseen vs ctok lists 1 thread")
    for label in run:
        u, a = max(unseen[label]), max(again[label])
        print(f"{label:32s} {u:12.1f} {a:12.1f}   {u / base:5.2f}x")
    ctok_best = max(max(unseen[f"ctok lists {cores} threads"]), max(unseen[f"ctok flat {cores} threads"]))
    for label in run:
        if not label.startswith("ctok"):
            print(f"ctok best ({cores} threads) / {label}: {ctok_best / max(unseen[label]):.2f}x")


if __name__ == "__main__":
    main()
