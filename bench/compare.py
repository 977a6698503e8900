#!/usr/bin/env python3
"""Side-by-side encode speed of ctok, tiktoken, HF tokenizers and fastokens, in one process.

Usage: python bench/compare.py [--family o200k_base ...] [--files en_dracula.txt ...] [--repeat 3]

Each library encodes each corpus file (from ../shared/corpus) to a Python list of ids, single thread.
"first" is the first pass over text the library has not seen (caches cold); "warm" is the best of
--repeat further passes.  fastokens' encode returns a lazy object: we time `.ids`, a list, like the others.
Ratios are printed against ctok; absolute MB/s vary with the machine's load, ratios much less.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("CTOK_SHARED", os.path.join(HERE, "..", "..", "shared"))
VOCAB = os.path.join(SHARED, "vocab")
CORPUS = os.path.join(SHARED, "corpus")

FAMILIES = {
    # name: (kind, path relative to vocab/)
    "o200k_base": ("tiktoken", "o200k_base"),
    "cl100k_base": ("tiktoken", "cl100k_base"),
    "kimi-k2": ("tiktoken", "kimi-k2"),
    "llama3-tiktoken": ("tiktoken", "llama3-tiktoken"),
    "llama3-hf": ("hf", "llama3-hf/tokenizer.json"),
    "qwen3": ("hf", "qwen3/tokenizer.json"),
    "deepseek-v3": ("hf", "deepseek-v3/tokenizer.json"),
    "mistral-7b-v0.1": ("hf", "mistral-7b-v0.1/tokenizer.json"),
}


def tiktoken_ref(folder):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    r = json.load(open(os.path.join(folder, "recipe.json"), encoding="utf-8"))
    ranks = load_tiktoken_bpe(os.path.join(folder, r["file"]))
    return tiktoken.Encoding(r["name"], pat_str=r["pat_str"], mergeable_ranks=ranks,
                             special_tokens=r["special_tokens"], explicit_n_vocab=r.get("explicit_n_vocab")), r


# fastokens runs its hand-written scanner only for a pattern string equal to its own constant; tiktoken's
# cl100k pattern (the recipe's, possessive quantifiers) is another string for the same splits, and fastokens then
# takes its regex path at less than half its speed.  Its preset is what a user of those encodings passes.
FASTOKENS_PRESETS = ("cl100k_base", "o200k_base")


def fastokens_preset(r):
    """fastokens.Tokenizer.from_tiktoken's keyword arguments for a recipe: its own preset where it has one."""
    if r["name"] in FASTOKENS_PRESETS:
        return {"encoding": r["name"], "special_tokens": r["special_tokens"]}
    return {"pattern": r["pat_str"], "special_tokens": r["special_tokens"]}


def template_names(enc):
    """(start, end): two of an encoding's special tokens to write a chat template with (the benchmarks' templated
    workloads): one naming a start and one an end where it has them."""
    names = sorted(enc.special_tokens)
    start = next((n for n in names if "start" in n), names[0])
    end = next((n for n in names if "end" in n and n != start), names[-1])
    return start, end


def encoders(family):
    import ctok
    kind, rel = FAMILIES[family]
    out = {}
    if kind == "tiktoken":
        folder = os.path.join(VOCAB, rel)
        ref, r = tiktoken_ref(folder)
        enc = ctok.load(os.path.join(folder, r["file"]))
        out["ctok"] = enc.encode_ordinary
        out["tiktoken"] = ref.encode_ordinary
        try:
            import fastokens
            ft = fastokens.Tokenizer.from_tiktoken(os.path.join(folder, r["file"]), **fastokens_preset(r))
            out["fastokens"] = lambda t: ft.encode(t, add_special_tokens=False).ids
        except Exception as e:  # noqa: BLE001 - a peer that refuses a file is reported, not fatal
            print(f"  fastokens: {family}: {e.__class__.__name__}: {e}", file=sys.stderr)
    else:
        path = os.path.join(VOCAB, rel)
        enc = ctok.load(path)
        out["ctok"] = enc.encode_ordinary
        try:
            import tokenizers
            hf = tokenizers.Tokenizer.from_file(path)
            hf.encode_special_tokens = True
            out["hf"] = lambda t: hf.encode(t, add_special_tokens=False).ids
        except ImportError:
            pass
        try:
            import fastokens
            ft = fastokens.Tokenizer.from_file(path) if hasattr(fastokens, "Tokenizer") else None
            if ft is not None:
                out["fastokens"] = lambda t: ft.encode(t).ids
        except Exception as e:  # noqa: BLE001 - a peer that refuses a file is reported, not fatal
            print(f"  fastokens: {family}: {e.__class__.__name__}: {e}", file=sys.stderr)
    return out


WARM_UP = "Warm-up text, not from the corpus: 12345 words.\n"


def timed(fn, text):
    t0 = time.perf_counter()
    ids = fn(text)
    return time.perf_counter() - t0, ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", nargs="*", default=list(FAMILIES))
    ap.add_argument("--files", nargs="*", default=None)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    files = args.files or sorted(f for f in os.listdir(CORPUS) if f.endswith(".txt"))
    for family in args.family:
        encs = encoders(family)
        for fn in encs.values():
            # Each library's one-time costs (fastokens builds its tables lazily on the first call: about
            # 0.4 s) belong to loading, not to the first file's first pass; a short text nobody measures.
            fn(WARM_UP)
        print(f"\n## {family}   (MB/s first pass / warm; ratio = ctok first-pass speed / peer's)")
        for name in files:
            text = open(os.path.join(CORPUS, name), encoding="utf-8").read()
            mb = len(text.encode("utf-8")) / 1e6
            row = {}
            ref_ids = None
            for lib, fn in encs.items():
                first, ids = timed(fn, text)
                warm = min(timed(fn, text)[0] for _ in range(args.repeat)) if args.repeat else first
                row[lib] = (mb / first, mb / warm)
                if ref_ids is None:
                    ref_ids = ids
                elif ids != ref_ids:
                    row[lib] = row[lib] + ("MISMATCH",)
            base = row["ctok"][0]
            cells = "  ".join(f"{lib} {v[0]:7.1f}/{v[1]:7.1f}" + (f" (x{base / v[0]:.1f})" if lib != "ctok" else "")
                              + (" MISMATCH" if len(v) > 2 else "") for lib, v in row.items())
            print(f"{name:28s} {cells}")


if __name__ == "__main__":
    main()
