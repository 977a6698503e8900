#!/usr/bin/env python3
"""Generate ctok/data/known.json: the vocabularies ctok recognises by content.

Reads the recipes in ../shared/vocab (MANIFEST.md documents each one) and records, for every known
vocabulary, the sha256 over its ranks (ctok.vocab.ranks_hash), its split pattern and its special tokens.
Run from the repo root:  python tools/gen_known.py [--shared ../shared]
"""
import argparse
import base64
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ctok.vocab import ranks_hash  # noqa: E402


def read_ranks(path, first_n=None):
    # Ranks may have holes (p50k has none at 50256, its <|endoftext|>): None marks them.
    out = []
    with open(path, "rb") as f:
        for n, line in enumerate(f):
            if not line.strip():
                continue
            if first_n and n == first_n:
                break
            tok, rank = line.split()
            rank = int(rank)
            out.extend([None] * (rank + 1 - len(out)))
            out[rank] = base64.b64decode(tok)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
    args = ap.parse_args()
    vocab = os.path.join(args.shared, "vocab")
    known = []
    recipes = [("cl100k_base", "recipe.json"), ("o200k_base", "recipe.json"), ("p50k_base", "recipe.json"),
               ("p50k_base", "recipe.r50k_base.json"), ("kimi-k2", "recipe.json"),
               ("qwen-tiktoken", "recipe.json"), ("llama3-tiktoken", "recipe.json")]
    for folder, rfile in recipes:
        r = json.load(open(os.path.join(vocab, folder, rfile), encoding="utf-8"))
        ranks = read_ranks(os.path.join(vocab, folder, r["file"]), r.get("use_first_n_lines"))
        known.append({
            "name": r["name"], "ranks": len(ranks), "ranks_sha256": ranks_hash(ranks),
            "pat_str": r["pat_str"], "special_tokens": r["special_tokens"],
            "explicit_n_vocab": r.get("explicit_n_vocab"),
        })
        print(r["name"], len(ranks), known[-1]["ranks_sha256"][:16], file=sys.stderr)
    l4 = json.load(open(os.path.join(vocab, "known", "llama4.json"), encoding="utf-8"))
    known.append({"name": l4["name"], "ranks": l4["ranks"], "ranks_sha256": l4["ranks_sha256"],
                  "pat_str": l4["pat_str"], "special_tokens": l4["special_tokens"],
                  "explicit_n_vocab": l4.get("explicit_n_vocab")})
    # Tekken JSON files carry their own pattern and sizes; only the special-token names of v3 files,
    # which do not list them, come from here.
    tk = json.load(open(os.path.join(vocab, "mistral-tekken", "recipe.json"), encoding="utf-8"))
    tekken_specials = sorted(tk["special_tokens"].items(), key=lambda kv: kv[1])
    out = {"_generated_by": "tools/gen_known.py from shared/vocab recipes", "vocabularies": known,
           "tekken_v3_special_tokens": [k for k, _ in tekken_specials]}
    dest = os.path.join(os.path.dirname(__file__), "..", "ctok", "data", "known.json")
    with open(dest, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
