"""Pretokenizer throughput: ctok's native scanners vs the Python `regex` module, per corpus file and kind.

    python tools/bench_pretok.py [--kinds o200k,cl100k] [--files en_,code] [--repeat 3] [--no-regex]

Reports MB/s (UTF-8 bytes) for ctok (`count_pieces`: the scanner loop alone, GIL released, no Python object per
piece) and for `regex` (`finditer` over the fallback-compiled pattern, counting matches), and the speed-up.  The
corpus is ../shared/corpus (or $CTOK_SHARED/corpus).
"""
import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ctok import _pretok as P  # noqa: E402
from ctok import patterns as pt  # noqa: E402


def corpus_dir():
    env = os.environ.get("CTOK_SHARED")
    for c in ([Path(env)] if env else []) + [ROOT.parent / "shared"]:
        if (c / "corpus").is_dir():
            return c / "corpus"
    sys.exit("shared corpus not found (../shared/corpus or $CTOK_SHARED)")


def best_of(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        r = fn()
        best = min(best, time.perf_counter() - t)
    return best, r


def regex_counter(kind):
    if kind == pt.PRETOK_DEEPSEEK:
        compiled = [pt.compile_fallback(p, engine="hf") for p in pt.PATTERNS[kind]]

        def count(text):
            parts = [text]
            for c in compiled:
                nxt = []
                for part in parts:
                    pos = 0
                    for m in c.finditer(part):
                        a, b = m.span()
                        if a > pos:
                            nxt.append(part[pos:a])
                        if b > a:
                            nxt.append(part[a:b])
                        pos = b
                    if pos < len(part):
                        nxt.append(part[pos:])
                parts = nxt
            return len(parts)
        return count
    c = pt.compile_fallback(pt.PATTERNS[kind])
    return lambda text: sum(1 for _ in c.finditer(text))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default=",".join(v for k, v in pt.KIND_NAMES.items() if k))
    ap.add_argument("--files", default="")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-regex", action="store_true")
    args = ap.parse_args()
    by_name = {v: k for k, v in pt.KIND_NAMES.items()}
    kinds = [by_name[k] for k in args.kinds.split(",")]
    files = sorted(p for p in corpus_dir().glob("*.txt")
                   if not args.files or any(f in p.name for f in args.files.split(",")))
    print(f"{'file':28s} {'kind':9s} {'MB':>6s} {'ctok MB/s':>10s} {'regex MB/s':>11s} {'x':>6s} {'pieces':>9s}")
    for path in files:
        text = path.read_text(encoding="utf-8")
        data = text.encode("utf-8")
        mb = len(data) / 1e6
        for kind in kinds:
            t_ctok, n_ctok = best_of(lambda: P.count_pieces(kind, data), args.repeat)
            line = f"{path.name:28s} {pt.KIND_NAMES[kind]:9s} {mb:6.2f} {mb / t_ctok:10.0f}"
            if not args.no_regex:
                counter = regex_counter(kind)
                t_re, n_re = best_of(lambda: counter(text), 1)
                line += f" {mb / t_re:11.1f} {t_re / t_ctok:6.0f}"
                if n_re != n_ctok:
                    line += f"  PIECE COUNT DIFFERS: regex {n_re}"
            line += f" {n_ctok:9d}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
