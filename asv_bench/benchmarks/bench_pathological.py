"""Time against input length on pathological input: one long run of a letter (a single huge pre-token, where
BPE merging dominates) and long runs of spaces.  Linear scaling shows as time/length constant."""
from .common import encoder

KINDS = {
    "letters": lambda n: "a" * n,
    "spaces": lambda n: " " * n,
    "spaces-between-words": lambda n: ("word" + " " * 1000) * max(1, n // 1004),
}
LENGTHS = [1_000, 10_000, 100_000]


class Pathological:
    params = (["o200k_base", "llama3-hf"], list(KINDS), LENGTHS, ["ctok", "tiktoken", "hf", "fastokens"])
    param_names = ["family", "input", "length", "lib"]
    number = 1
    repeat = (1, 5, 10.0)
    rounds = 1
    timeout = 120

    def setup(self, family, kind, n, lib):
        self.fn = encoder(lib, family)
        self.text = KINDS[kind](n)

    def time_encode(self, family, kind, n, lib):
        self.fn(self.text)
