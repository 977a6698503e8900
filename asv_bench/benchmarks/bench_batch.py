"""Batches: encode_batch (lists of ids) and encode_batch_flat (numpy ids + offsets) over the paragraphs of a
corpus file, on 1 thread and on all cores; the peers' batch calls on the same texts."""
import os

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
