"""Prefix-cache workloads (issue 5), ctok with and without its PrefixCache, side by side with fastokens
(its input cache enabled with FASTOKENS_INPUT_CACHE) when installed.  Ids are Python lists on both sides
(fastokens: `.ids`).  Every timing is the best of --repeat runs; ratios are printed at the end.

    python bench/prefix_bench.py [--repeat 5] [--encoding o200k_base | mistral-7b-v0.1/tokenizer.json] [--quick]

Workloads:
  shared_system   1,000 prompts: the same 8 KB system prompt + a different 200-byte user message (fresh cache
                  per run: the first prompt is a miss)
  big_prefix      one request: a 1 MB prefix already seen + a new 3 KB tail
  chat_growth     a chat growing by one ~1 KB turn per request, 50 turns (fresh cache per run)
  no_shared       texts sharing no prefix (2,000 corpus slices of 50-2,000 bytes, and 200 of 8-32 KB):
                  the cache's overhead when it never helps
  chat_added_tokens  the chat with <think> blocks in its assistant turns, through Encoding.encode_ordinary, for
                  tokenizer.json files whose core splits at such added tokens (Qwen 3): their split cache
  chat_template   the chat in a template of the encoding's special tokens, encoded with every special token
                  allowed (how a rendered prompt is encoded): the specials cache, for files whose core splits
                  at their special tokens
  floor           (shared_system, chat_last_turn) what any cache returning a new list must still do: copy the
                  ids into a new list, free it, and read the whole prompt; cache off / floor bounds every cache
"""
import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import ctok  # noqa: E402
from ctok._prefix import PrefixCache  # noqa: E402
from compare import template_names  # noqa: E402  (bench/, the script's own folder)

SHARED = Path(os.environ.get("CTOK_SHARED", REPO.parent / "shared"))


def corpus():
    names = ["en_dracula.txt", "en_botchan.txt", "code_python.txt", "ru_bible_synodal.txt", "zh_classical.txt",
             "en_python_docs.rst.txt"]
    return {n: (SHARED / "corpus" / n).read_text(encoding="utf-8") for n in names}


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def fastokens_pair(encoding):
    """(fastokens without, with its input cache), or (None, None) if it is not installed."""
    try:
        from fastokens import _native
    except ImportError:
        return None, None
    if encoding.endswith(".json"):
        make = lambda: _native.Tokenizer.from_file(str(SHARED / "vocab" / encoding))     # noqa: E731
    else:
        path = SHARED / "vocab" / encoding / f"{encoding}.tiktoken"
        make = lambda: _native.Tokenizer.from_tiktoken(str(path), encoding=encoding)     # noqa: E731
    old = os.environ.pop("FASTOKENS_INPUT_CACHE", None)
    plain = make()
    os.environ["FASTOKENS_INPUT_CACHE"] = "1"
    cached = make()
    if old is None:
        del os.environ["FASTOKENS_INPUT_CACHE"]
    else:
        os.environ["FASTOKENS_INPUT_CACHE"] = old
    return plain, cached


class Sides:
    """Each side: name -> (make_state, encode(state, text) -> ids)."""

    def __init__(self, enc, ft_plain, ft_cached, cache_bytes):
        core = enc._core
        # str in, list out on every side: the encoder's str entry point, and the same through the cache
        # (SentencePiece-style files: encode_marked, the route their ordinary text takes).
        marked = core.marker_prepend >= 0
        plain = core.encode_marked if marked else core.encode_str
        bind = (lambda: PrefixCache(cache_bytes).bind_marked(core)) if marked else \
            (lambda: PrefixCache(cache_bytes).bind(core))
        self.sides = {
            "ctok off": (lambda: None, lambda st, t: plain(t)),
            "ctok prefix cache": (bind, lambda st, t: st(t)),
        }
        if ft_plain is not None:
            # fastokens' input cache lives in the tokenizer: no fresh state per run is possible, so its
            # runs after the first see a warm cache (which only favours it).
            self.sides["fastokens"] = (lambda: None, lambda st, t: ft_plain.encode_ordinary(t).ids)
            self.sides["fastokens input cache"] = (lambda: None, lambda st, t: ft_cached.encode_ordinary(t).ids)


def run(args):
    # --encoding: an embedded encoding's name, or a tokenizer.json under shared/vocab ("llama2/tokenizer.json")
    enc = ctok.load(str(SHARED / "vocab" / args.encoding)) if args.encoding.endswith(".json") else \
        ctok.get_encoding(args.encoding)
    ft_plain, ft_cached = fastokens_pair(args.encoding)
    sides = Sides(enc, ft_plain, ft_cached, args.cache_bytes).sides
    texts = corpus()
    drac = texts["en_dracula.txt"]
    rnd = random.Random(1)
    results = {}

    # ---- shared_system
    system = drac[:8192]
    users = [drac[100_000 + 200 * i:100_000 + 200 * (i + 1)] for i in range(1000 if not args.quick else 200)]
    prompts = [system + u for u in users]
    for name, (make, f) in sides.items():
        for p in prompts[:50]:
            f(make(), p)                                        # warm the piece caches, not the prefix cache

        def go():
            st = make()
            for p in prompts:
                f(st, p)
        results[("shared_system", name)] = best(go, args.repeat)

    # The floor: what any cache returning a new list must still do per prompt, however it finds the ids: copy
    # them into a new list (and free it, as the caller does) and read the whole prompt to know that it starts
    # like the cached one.  Cache off / floor is the most any such cache can reach.
    plain_f = sides["ctok off"][1]
    floor_work = [(plain_f(None, p), p) for p in prompts]

    def floor():
        for ids, p in floor_work:
            ids.copy()
            p.startswith(system)
    results[("shared_system", "floor")] = best(floor, args.repeat)

    # ---- big_prefix: one request = 1 MB seen + new 3 KB tail
    big = (drac * 2)[:1_000_000]
    tails = [texts["en_botchan.txt"][3000 * i:3000 * (i + 1)] for i in range(args.repeat * 2 + 2)]
    for name, (make, f) in sides.items():
        st = make()
        f(st, big)                                              # the prefix, seen once
        times = []
        for t in tails:
            t0 = time.perf_counter()
            f(st, big + t)
            times.append(time.perf_counter() - t0)
        results[("big_prefix", name)] = min(times)

    # ---- chat_growth: 50 turns of ~1 KB
    turns = [("\nuser: " if i % 2 == 0 else "\nassistant: ") + drac[300_000 + 1000 * i:300_000 + 1000 * (i + 1)]
             for i in range(50)]
    chats = ["".join(turns[:i + 1]) for i in range(50)]
    for name, (make, f) in sides.items():
        def go():
            st = make()
            for c in chats:
                f(st, c)
        results[("chat_growth", name)] = best(go, args.repeat)
        last = []
        for _ in range(args.repeat * 3):                        # one request: the best of several fresh chats
            st = make()
            for c in chats[:-1]:
                f(st, c)
            t0 = time.perf_counter()
            f(st, chats[-1])
            last.append(time.perf_counter() - t0)
        results[("chat_last_turn", name)] = min(last)
    results[("chat_one_turn_alone", "ctok off")] = best(lambda: sides["ctok off"][1](None, turns[-1]), args.repeat)
    last_ids = plain_f(None, chats[-1])
    results[("chat_last_turn", "floor")] = best(lambda: (last_ids.copy(), chats[-1].startswith(chats[-2])),
                                                args.repeat * 20)
    pc = PrefixCache(args.cache_bytes)
    for c in chats:
        if enc._core.marker_prepend >= 0:
            pc.encode_marked(enc._core, c)
        else:
            pc.encode_str(enc._core, c)
    st = pc.stats()
    print(f"chat_growth: ctok encoded {st['encoded_bytes'] / len(chats):.0f} bytes per request on average "
          f"(turns are ~{sum(len(t) for t in turns) / len(turns):.0f}); reused {st['reused_bytes']} bytes; "
          f"{st['hits']} hits, {st['misses']} misses")

    # ---- chat_added_tokens: the chat again, its assistant turns holding <think> blocks, through the Encoding
    # (tokenizer.json files whose core splits at such added tokens: Qwen 3; their split cache)
    enc.set_prefix_cache(None)
    if getattr(enc, "_split_cache", None) is not None:
        think = [("\nuser: " if i % 2 == 0 else
                  "\nassistant: <think>\n" + drac[200_000 + 300 * i:200_000 + 300 * (i + 1)] + "\n</think>\n")
                 + drac[300_000 + 1000 * i:300_000 + 1000 * (i + 1)] for i in range(50)]
        think_chats = ["".join(think[:i + 1]) for i in range(50)]
        think_sides = {"ctok off": 0, "ctok prefix cache": None}
        for name, setting in think_sides.items():
            last = []
            for _ in range(args.repeat * 2):
                enc.set_prefix_cache(setting)
                for c in think_chats[:-1]:
                    enc.encode_ordinary(c)
                t0 = time.perf_counter()
                enc.encode_ordinary(think_chats[-1])
                last.append(time.perf_counter() - t0)
            results[("chat_added_tokens_last", name)] = min(last)
        enc.set_prefix_cache(None)

    # ---- chat_template: the chat in a template of the special tokens, every special token allowed (the specials
    # cache: files whose core splits at their special tokens)
    enc.set_prefix_cache(None)
    if getattr(enc, "_specials_cache", None) is not None:
        start, end = template_names(enc)
        turns = [f"{start}{'user' if i % 2 == 0 else 'assistant'}\n" + drac[300_000 + 1000 * i:300_000 + 1000 * (i + 1)]
                 + f"{end}\n" for i in range(50)]
        templated = ["".join(turns[:i + 1]) for i in range(50)]
        for name, setting in {"ctok off": 0, "ctok prefix cache": None}.items():
            last = []
            for _ in range(args.repeat * 2):
                enc.set_prefix_cache(setting)
                for c in templated[:-1]:
                    enc.encode(c, allowed_special="all")
                t0 = time.perf_counter()
                enc.encode(templated[-1], allowed_special="all")
                last.append(time.perf_counter() - t0)
            results[("chat_template_last", name)] = min(last)
        enc.set_prefix_cache(None)

    # ---- no_shared: distinct texts, no common prefixes
    pool = "".join(texts.values())
    small = []
    for _ in range(2000 if not args.quick else 400):
        n = rnd.randint(50, 2000)
        i = rnd.randrange(len(pool) - n)
        small.append(pool[i:i + n])
    large = []
    for _ in range(200 if not args.quick else 40):
        n = rnd.randint(8000, 32000)
        i = rnd.randrange(len(pool) - n)
        large.append(pool[i:i + n])
    for label, batch in (("no_shared_small", small), ("no_shared_large", large)):
        runs = {}
        for name, (make, f) in sides.items():
            if name.startswith("fastokens"):
                continue

            def go(make=make, f=f):
                st = make()
                for t in batch:
                    f(st, t)
            runs[name] = go
        # Interleaved runs, timed in CPU time of this thread (all of ctok's work runs on it), median: a 3%
        # difference is below the noise of wall time on a shared machine.
        times = {name: [] for name in runs}
        for _ in range(args.repeat * 3):
            for name, go in runs.items():
                t0 = time.thread_time()
                go()
                times[name].append(time.thread_time() - t0)
        for name in runs:
            results[(label, name)] = statistics.median(times[name])
    return results


def report(results):
    print(f"{'workload':<22} {'side':<24} {'time':>12}")
    for (w, side), t in results.items():
        unit, k = ("ms", 1e3) if t >= 1e-3 else ("us", 1e6)
        print(f"{w:<22} {side:<24} {t * k:>9.3f} {unit}")
    print()

    def r(w, a, b):
        if (w, a) in results and (w, b) in results:
            return results[(w, b)] / results[(w, a)]
        return None

    lines = [
        ("shared_system: cache off / on (goal >= 20x)", r("shared_system", "ctok prefix cache", "ctok off")),
        ("shared_system: fastokens input cache / ctok cache (goal >= 3x)",
         r("shared_system", "ctok prefix cache", "fastokens input cache")),
        ("shared_system: cache off / floor (the most any list-returning cache can reach)",
         r("shared_system", "floor", "ctok off")),
        ("big_prefix: cache off / on", r("big_prefix", "ctok prefix cache", "ctok off")),
        ("big_prefix: fastokens input cache / ctok cache (goal >= 3x)",
         r("big_prefix", "ctok prefix cache", "fastokens input cache")),
        ("chat_growth: cache off / on", r("chat_growth", "ctok prefix cache", "ctok off")),
        ("chat_growth: fastokens input cache / ctok cache",
         r("chat_growth", "ctok prefix cache", "fastokens input cache")),
        ("chat last request (cache) / its new turn alone (goal ~1)",
         results.get(("chat_last_turn", "ctok prefix cache"), 0) / results[("chat_one_turn_alone", "ctok off")]),
        ("chat last request: floor / its new turn alone",
         results[("chat_last_turn", "floor")] / results[("chat_one_turn_alone", "ctok off")]),
        ("chat with <think> turns, last request: cache off / on",
         r("chat_added_tokens_last", "ctok prefix cache", "ctok off")),
        ("templated chat, every special allowed, last request: cache off / on",
         r("chat_template_last", "ctok prefix cache", "ctok off")),
        ("no_shared_small: cache on / off (goal <= 1.03)", r("no_shared_small", "ctok off", "ctok prefix cache")),
        ("no_shared_large: cache on / off (goal <= 1.03)", r("no_shared_large", "ctok off", "ctok prefix cache")),
    ]
    for label, v in lines:
        if v is not None:
            print(f"{label:<66} {v:8.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--encoding", default="o200k_base")
    ap.add_argument("--cache-bytes", type=int, default=64 << 20)
    ap.add_argument("--quick", action="store_true")
    report(run(ap.parse_args()))


if __name__ == "__main__":
    main()
