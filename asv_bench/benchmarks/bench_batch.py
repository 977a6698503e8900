"""Batches: encode_batch (lists of ids) and encode_batch_flat (numpy ids + offsets) over the paragraphs of a
corpus file, on 1 thread and on all cores; the peers' batch calls on the same texts."""
import os
from functools import partial

from .common import CORE_FAMILIES, FAMILIES, load_ctok, mb, peer, require, text

THREADS = [1, os.cpu_count() or 1]
BATCH_CORPUS = "en_dracula.txt"


def paragraphs():
    return [p for p in text(BATCH_CORPUS).split("\n\n") if p]


class EncodeBatch:
    params = (CORE_FAMILIES, THREADS)
    param_names = ["family", "threads"]
    number = 1
    repeat = (2, 10, 10.0)
    rounds = 1
    timeout = 300

    def setup(self, family, threads):
        self.texts = paragraphs()
        self.mb = sum(mb(t) for t in self.texts)
        self.enc = load_ctok(family)
        require(self.enc, "encode_batch")

    def time_encode_batch(self, family, threads):
        self.enc.encode_batch(self.texts, num_threads=threads)

    def time_encode_batch_flat(self, family, threads):
        require(self.enc, "encode_batch_flat")
        self.enc.encode_batch_flat(self.texts, num_threads=threads)

    def track_mbps_encode_batch(self, family, threads):
        best = min(_timed(self.enc.encode_batch, self.texts, threads) for _ in range(2))
        return self.mb / best
    track_mbps_encode_batch.unit = "MB/s"

    def track_mbps_encode_batch_flat(self, family, threads):
        if not hasattr(self.enc, "encode_batch_flat"):
            return float("nan")
        best = min(_timed(self.enc.encode_batch_flat, self.texts, threads) for _ in range(2))
        return self.mb / best
    track_mbps_encode_batch_flat.unit = "MB/s"


def _timed(fn, texts, threads):
    import time
    t0 = time.perf_counter()
    fn(texts, num_threads=threads)
    return time.perf_counter() - t0


class EncodeBatchPeers:
    """tiktoken's encode_ordinary_batch(num_threads=), HF's and fastokens' encode_batch (their own thread pools,
    which do not take a thread count: the threads parameter applies to tiktoken only, others run at 1 only)."""
    params = (CORE_FAMILIES, THREADS, ["tiktoken", "hf", "fastokens"])
    param_names = ["family", "threads", "peer"]
    number = 1
    repeat = (2, 5, 10.0)
    rounds = 1
    timeout = 300

    def setup(self, family, threads, lib):
        if lib != "tiktoken" and threads != THREADS[0]:
            raise NotImplementedError(f"{lib} sets its own thread count")
        self.texts = paragraphs()
        obj, _ = peer(lib, family)
        if lib == "tiktoken":
            self.fn = lambda ts: obj.encode_ordinary_batch(ts, num_threads=threads)
        elif lib == "hf":
            self.fn = lambda ts: [e.ids for e in obj.encode_batch(ts, add_special_tokens=False)]
        else:
            self.fn = lambda ts: [e.ids for e in obj.encode_batch(ts, add_special_tokens=False)]

    def time_encode_batch(self, family, threads, lib):
        self.fn(self.texts)


# Issue 5's batch workload: 10,000 chat-sized texts (50-2,000 bytes, corpus slices at random offsets; the same
# recipe as bench/batch_bench.py), on 1 thread and on all cores.
CHAT_SOURCES = [("en_dracula.txt", 4), ("en_botchan.txt", 2), ("en_python_docs.rst.txt", 2), ("code_python.txt", 3),
                ("ru_bible_synodal.txt", 1), ("zh_classical.txt", 1), ("ja_wagahaiwa_nekodearu.txt", 1)]


def chat_texts(count=10000, seed=2):
    import random
    rnd = random.Random(seed)
    pool = [text(name).encode("utf-8") for name, w in CHAT_SOURCES for _ in range(w)]
    out = []
    for _ in range(count):
        data = rnd.choice(pool)
        n = rnd.randint(50, 2000)
        a = rnd.randrange(0, len(data) - n)
        out.append(data[a:a + n].decode("utf-8", "ignore"))
    return out


class ChatBatch:
    params = (["o200k_base", "cl100k_base"], THREADS)
    param_names = ["family", "threads"]
    number = 1
    repeat = (2, 5, 10.0)
    rounds = 1
    timeout = 300

    def setup(self, family, threads):
        self.texts = chat_texts()
        self.mb = sum(mb(t) for t in self.texts)
        self.enc = load_ctok(family)

    def time_encode_ordinary_batch(self, family, threads):
        self.enc.encode_ordinary_batch(self.texts, num_threads=threads)

    def time_encode_batch_flat(self, family, threads):
        self.enc.encode_batch_flat(self.texts, num_threads=threads)

    def track_mbps_encode_batch_flat(self, family, threads):
        best = min(_timed(self.enc.encode_batch_flat, self.texts, threads) for _ in range(2))
        return self.mb / best
    track_mbps_encode_batch_flat.unit = "MB/s"

    def time_count_batch(self, family, threads):
        self.enc.count_batch(self.texts, num_threads=threads)


class ChatBatchPeers:
    """The same texts through tiktoken's encode_ordinary_batch (at the thread count) and fastokens'
    encode_batch_flat (its own pool: all cores)."""
    params = (["o200k_base", "cl100k_base"], ["tiktoken", "fastokens"])
    param_names = ["family", "peer"]
    number = 1
    repeat = (2, 5, 10.0)
    rounds = 1
    timeout = 300

    def setup(self, family, lib):
        self.texts = chat_texts()
        obj, _ = peer(lib, family)
        if lib == "tiktoken":
            self.fn = lambda ts: obj.encode_ordinary_batch(ts, num_threads=THREADS[-1])
        else:
            self.fn = lambda ts: obj.encode_batch_flat(ts, add_special_tokens=False)

    def time_encode_batch(self, family, lib):
        self.fn(self.texts)


class TemplatedChatBatch:
    """The chat texts in a chat template of the encoding's special tokens, encoded with every special token
    allowed (how a server encodes its rendered prompts): the core splits at the special tokens, on 1 thread and
    on all cores (encode_batch), against the per-text encode."""
    params = (["o200k_base", "kimi-k2", "qwen3"], THREADS)
    param_names = ["family", "threads"]
    number = 1
    repeat = (2, 5, 10.0)
    rounds = 1
    timeout = 300

    def setup(self, family, threads):
        self.enc = load_ctok(family)
        names = sorted(self.enc.special_tokens)       # two of them, as bench/compare.py's template_names picks
        start = next((n for n in names if "start" in n), names[0])
        end = next((n for n in names if "end" in n and n != start), names[-1])
        self.texts = [f"{start}user\n{t}{end}\n{start}assistant\n" for t in chat_texts(4000)]
        self.mb = sum(mb(t) for t in self.texts)
        self.batch = partial(self.enc.encode_batch, allowed_special="all")

    def time_encode_batch(self, family, threads):
        self.batch(self.texts, num_threads=threads)

    def time_per_text_encode(self, family, threads):
        if threads != THREADS[0]:
            raise NotImplementedError("one thread only")
        for t in self.texts:
            self.enc.encode(t, allowed_special="all")

    def track_mbps_encode_batch(self, family, threads):
        return self.mb / min(_timed(self.batch, self.texts, threads) for _ in range(2))
    track_mbps_encode_batch.unit = "MB/s"
