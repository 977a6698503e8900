"""The pretokenizer alone (issue 3): each known split pattern's native scanner over each corpus file, as time
and as MB/s of UTF-8, counted the way the encoder asks for pieces (16 ends at a time, without the GIL).

tools/bench_pretok.py prints the same figures beside the `regex` module's for a one-off comparison; here they
are tracked per commit, so a change that slows a scanner shows as a step.
"""
import time

from .common import CORPUS_FILES, need_shared, text

KINDS = ["gpt2", "cl100k", "o200k", "llama3", "qwen", "kimi", "tekken", "deepseek"]


def _kind_number(name):
    from ctok import patterns
    return {v: k for k, v in patterns.KIND_NAMES.items()}[name]


class Pretokenize:
    """ctok._pretok.count_pieces(kind, utf-8 of a whole corpus file)."""
    params = (KINDS, CORPUS_FILES)
    param_names = ["kind", "corpus"]
    number = 1
    repeat = (2, 10, 10.0)
    rounds = 1
    timeout = 120

    def setup(self, kind, name):
        need_shared()
        from ctok import _pretok
        self.count = _pretok.count_pieces
        self.kind = _kind_number(kind)
        self.data = text(name).encode("utf-8")

    def time_count_pieces(self, kind, name):
        self.count(self.kind, self.data)

    def track_mbps(self, kind, name):
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            self.count(self.kind, self.data)
            best = min(best, time.perf_counter() - t0)
        return len(self.data) / 1e6 / best
    track_mbps.unit = "MB/s"
