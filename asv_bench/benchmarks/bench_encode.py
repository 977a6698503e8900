"""encode_ordinary per family and corpus file, as time and as MB/s, and the same for the peers with the ratio.

Each point is one whole corpus file encoded to a Python list of ids on one thread.  asv's first sample is the
first pass over the text in that process (per-process caches cold), the later ones are warm.
"""
import time

from .common import CORPUS_FILES, FAMILY_NAMES, PEERS, best_mbps, encoder, load_ctok, peer, text

# The peers run on the first PEER_BYTES of each file (the slowest peer is slower than ctok by an order of
# magnitude on some files): the ratio is measured on the same slice for both.
PEER_BYTES = 200_000
# ... and on four files that span the scripts (Latin prose, code, Japanese, 149 languages), to keep the suite short.
PEER_CORPUS = ["en_dracula.txt", "code_python.txt", "ja_wagahaiwa_nekodearu.txt", "udhr_multilingual.txt"]


class EncodeOrdinary:
    """ctok: Encoding.encode_ordinary(whole corpus file)."""
    params = (FAMILY_NAMES, CORPUS_FILES)
    param_names = ["family", "corpus"]
    number = 1
    repeat = (2, 10, 10.0)
    rounds = 1
    timeout = 300

    def setup(self, family, name):
        self.text = text(name)
        self.fn = encoder("ctok", family)

    def time_encode_ordinary(self, family, name):
        self.fn(self.text)

    def track_mbps(self, family, name):
        return best_mbps(self.fn, self.text)
    track_mbps.unit = "MB/s"


class EncodePeers:
    """The peers on the first 200 kB of four files: their time, and ctok's speed as a multiple of theirs
    (track_ctok_speedup > 1: ctok is faster), measured back to back in one process."""
    params = (FAMILY_NAMES, PEER_CORPUS, PEERS)
    param_names = ["family", "corpus", "peer"]
    number = 1
    repeat = (2, 5, 10.0)
    rounds = 1
    timeout = 300

    def setup(self, family, name, lib):
        self.text = text(name, PEER_BYTES)
        self.fn = encoder(lib, family)           # NotImplementedError (skip) where the peer does not apply
        self.ctok = encoder("ctok", family)

    def time_encode(self, family, name, lib):
        self.fn(self.text)

    def track_ctok_speedup(self, family, name, lib):
        return best_mbps(self.ctok, self.text) / best_mbps(self.fn, self.text)
    track_ctok_speedup.unit = "ratio"


class EncodeFreshEncoder:
    """The first encode of a whole corpus file by an encoder made just before (its piece cache untouched), in
    milliseconds: what a process's first request pays, page faults of the caches included (a 4 MB piece cache
    in small pages took 3,289 faults on Dracula; see docs/pages/performance.md)."""
    params = (["o200k_base", "cl100k_base"], ["en_dracula.txt", "code_python.txt", "zh_classical.txt",
                                           "ja_wagahaiwa_nekodearu.txt"])
    param_names = ["family", "corpus"]
    timeout = 300

    def setup(self, family, name):
        from ctok._encoder import CoreEncoder
        self.make = lambda core=load_ctok(family)._core: CoreEncoder(pretok_kind=core.pretok_kind, vocab=core.vocab)
        self.data = text(name).encode("utf-8")

    def track_first_pass_ms(self, family, name):
        best = None
        for _ in range(3):
            core = self.make()
            core.encode_ordinary(b"warm-up text, not from the corpus: 12345\n")
            t0 = time.perf_counter()
            core.encode_ordinary(self.data)
            dt = (time.perf_counter() - t0) * 1e3
            best = dt if best is None else min(best, dt)
        return best
    track_first_pass_ms.unit = "ms"


class EncodeAgain:
    """A whole corpus file encoded again by the encoder's core (no prefix cache: the table of recent pieces, the
    piece cache and the long-piece store answer), in MB/s, after two passes: text met again in other words, as a
    server meets the same documents cut differently.  Japanese, Chinese and the multilingual file have long runs
    (Han, Thai, Devanagari) that only the long-piece store keeps (session 18: 1.2-1.7x)."""
    params = (["o200k_base", "cl100k_base"],
              ["ja_wagahaiwa_nekodearu.txt", "zh_classical.txt", "udhr_multilingual.txt", "code_python.txt"])
    param_names = ["family", "corpus"]
    timeout = 300

    def setup(self, family, name):
        self.core = load_ctok(family)._core
        self.data = text(name).encode("utf-8")
        for _ in range(2):
            self.core.encode_ordinary(self.data)

    def track_mbps(self, family, name):
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            self.core.encode_ordinary(self.data)
            best = min(best, time.perf_counter() - t0)
        return len(self.data) / 1e6 / best
    track_mbps.unit = "MB/s"


class PerCall:
    """One short call, in microseconds (best of many): the fixed cost a server pays per request, for the common
    ways of calling encode (issue 4's per-call goals: encode_ordinary("") <= 0.2 us, ("hi") <= 0.3 us).  The peers
    answer the same calls where they have them."""
    params = (["o200k_base", "llama3-hf"],
              ["encode_ordinary('')", "encode_ordinary('hi')", "encode(prompt)", "encode(prompt, allowed all)",
               "encode(prompt, disallowed ())", "encode(prompt, add special)", "count('hi')"],
              ["ctok", "tiktoken"])
    param_names = ["family", "call", "lib"]
    timeout = 120
    PROMPT = "hello world, this is a short prompt of some length"

    def setup(self, family, call, lib):
        if lib == "ctok":
            enc = load_ctok(family)
        elif family == "o200k_base":
            enc, _ = peer("tiktoken", family)
        else:
            raise NotImplementedError("tiktoken has no tokenizer.json encodings")
        p = self.PROMPT
        calls = {
            "encode_ordinary('')": lambda: enc.encode_ordinary(""),
            "encode_ordinary('hi')": lambda: enc.encode_ordinary("hi"),
            "encode(prompt)": lambda: enc.encode(p),
            "encode(prompt, allowed all)": lambda: enc.encode(p, allowed_special="all"),
            "encode(prompt, disallowed ())": lambda: enc.encode(p, disallowed_special=()),
            "encode(prompt, add special)": lambda: enc.encode(p, add_special_tokens=True),
            "count('hi')": lambda: enc.count("hi"),
        }
        if lib != "ctok" and call in ("encode(prompt, add special)", "count('hi')"):
            raise NotImplementedError(f"tiktoken has no {call}")
        self.fn = calls[call]

    def track_us(self, family, call, lib):
        import timeit
        n = 20_000
        return min(timeit.repeat(self.fn, number=n, repeat=5)) / n * 1e6
    track_us.unit = "us"
