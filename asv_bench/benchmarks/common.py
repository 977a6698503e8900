"""Shared helpers of the asv suite: where the ground truth is, which families and corpus files exist, and
module-level caches so that each benchmark's setup stays cheap.

Nothing is loaded at import time: asv imports every benchmark module to discover the suite, and runs each
benchmark in its own process, so encodings and texts are loaded lazily on first use and then kept.

The shared ground truth is ``../shared`` beside the repository root (``CTOK_SHARED`` overrides it). A
benchmark whose input is absent raises ``NotImplementedError`` in ``setup``, which asv records as skipped.
"""
import importlib.util
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))


def _find_shared():
    env = os.environ.get("CTOK_SHARED")
    for c in ([env] if env else []) + [os.path.join(REPO_ROOT, "..", "shared")]:
        if os.path.isdir(os.path.join(c, "vocab")) and os.path.isdir(os.path.join(c, "corpus")):
            return os.path.abspath(c)
    return None


SHARED = _find_shared()
SKIP_SHARED = "shared ground truth not found: expected ../shared beside the repository or a path in CTOK_SHARED"

# With `asv run --python=same` in a dev checkout ctok may only be built in place (not installed): then use the
# checkout. In environments asv builds, ctok is installed and the installed copy is the one benchmarked.
if importlib.util.find_spec("ctok") is None:
    sys.path.insert(0, REPO_ROOT)

import ctok  # noqa: E402

# name: (kind, path under vocab/). "embedded" families come from ctok.get_encoding; their tiktoken reference
# is built from the shared folder's recipe.
FAMILIES = {
    "o200k_base": ("embedded", "o200k_base"),
    "cl100k_base": ("tiktoken", "cl100k_base"),
    "kimi-k2": ("tiktoken", "kimi-k2"),
    "llama3-tiktoken": ("tiktoken", "llama3-tiktoken"),
    "llama3-hf": ("hf", "llama3-hf/tokenizer.json"),
    "qwen3": ("hf", "qwen3/tokenizer.json"),
    "deepseek-v3": ("hf", "deepseek-v3/tokenizer.json"),
    "mistral-7b-v0.1": ("hf", "mistral-7b-v0.1/tokenizer.json"),
    # Two more tokenizer.json layouts with compiled routes of their own: added tokens split natively (runs of
    # spaces) and Metaspace with prepend_scheme "first".
    "gpt-neox-20b": ("hf", "gpt-neox-20b/tokenizer.json"),
    "mistral-7b-v0.3": ("hf", "mistral-7b-v0.3/tokenizer.json"),
}
FAMILY_NAMES = list(FAMILIES)
TIKTOKEN_FAMILIES = [f for f, (k, _) in FAMILIES.items() if k != "hf"]
HF_FAMILIES = [f for f, (k, _) in FAMILIES.items() if k == "hf"]
# A smaller set for benchmarks that do not need every family (batch, decode, memory): one of each layout.
CORE_FAMILIES = ["o200k_base", "cl100k_base", "llama3-hf", "mistral-7b-v0.1"]

# The corpus file names (fixed, so the parameter grid is the same whether or not ../shared is present).
CORPUS_FILES = [
    "en_botchan.txt", "en_dracula.txt", "en_python_docs.rst.txt", "code_python.txt",
    "ja_wagahaiwa_nekodearu.txt", "zh_classical.txt", "ar_1001_nights.txt", "ru_bible_synodal.txt",
    "udhr_multilingual.txt", "emoji-test.txt",
]
PEERS = ["tiktoken", "hf", "fastokens"]

_encodings = {}
_peers = {}
_texts = {}


def need_shared():
    if SHARED is None:
        raise NotImplementedError(SKIP_SHARED)
    return SHARED


def vocab_path(*parts):
    p = os.path.join(need_shared(), "vocab", *parts)
    if not os.path.exists(p):
        raise NotImplementedError(f"missing shared file {p}")
    return p


def family_file(family):
    """The file ctok loads for `family` (for tiktoken folders: the recipe's file)."""
    kind, rel = FAMILIES[family]
    if kind == "hf":
        return vocab_path(rel)
    return os.path.join(vocab_path(rel), recipe(family)["file"])


def recipe(family):
    with open(os.path.join(vocab_path(FAMILIES[family][1]), "recipe.json"), encoding="utf-8") as f:
        return json.load(f)


def text(name, max_bytes=None):
    """A corpus file's text (cached), optionally cut to about max_bytes of UTF-8 at a character boundary."""
    key = (name, max_bytes)
    if key not in _texts:
        path = os.path.join(need_shared(), "corpus", name)
        if not os.path.exists(path):
            raise NotImplementedError(f"missing corpus file {path}")
        with open(path, encoding="utf-8") as f:
            t = f.read()
        if max_bytes is not None:
            t = t.encode("utf-8")[:max_bytes].decode("utf-8", "ignore")
        _texts[key] = t
    return _texts[key]


def mb(t):
    return len(t.encode("utf-8")) / 1e6


def load_ctok(family):
    """ctok's Encoding for `family`, loaded once per process."""
    enc = _encodings.get(family)
    if enc is None:
        if FAMILIES[family][0] == "embedded":
            enc = ctok.get_encoding(family)
        else:
            enc = ctok.load(family_file(family))
        _encodings[family] = enc
    return enc


def clear_ctok_cache():
    """Forget ctok's in-process encodings, so that the next load really loads."""
    _encodings.clear()
    cache = getattr(ctok, "_cache", None)
    if cache is not None:
        cache.clear()


def build_tiktoken(family):
    """The tiktoken reference for a tiktoken-format family, built from recipe.json as MANIFEST.md says."""
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
    except ImportError:
        raise NotImplementedError("tiktoken is not installed")
    r = recipe(family)
    ranks = load_tiktoken_bpe(os.path.join(vocab_path(FAMILIES[family][1]), r["file"]))
    if r.get("use_first_n_lines"):
        ranks = {k: v for k, v in ranks.items() if v < r["use_first_n_lines"]}
    return tiktoken.Encoding(r["name"], pat_str=r["pat_str"], mergeable_ranks=ranks,
                             special_tokens=r["special_tokens"], explicit_n_vocab=r.get("explicit_n_vocab"))


def build_hf(family):
    if FAMILIES[family][0] != "hf":
        raise NotImplementedError(f"HF tokenizers has no tokenizer.json for {family} here")
    try:
        import tokenizers
    except ImportError:
        raise NotImplementedError("tokenizers is not installed")
    tok = tokenizers.Tokenizer.from_file(family_file(family))
    tok.encode_special_tokens = True            # special tokens' text is ordinary text, as in encode_ordinary
    return tok


def build_fastokens(family):
    try:
        import fastokens
    except ImportError:
        raise NotImplementedError("fastokens is not installed")
    try:
        if FAMILIES[family][0] == "hf":
            return fastokens.Tokenizer.from_file(family_file(family))
        r = recipe(family)
        # Its own preset where it has one: fastokens' fast scanner needs its own pattern string, and tiktoken's
        # cl100k pattern (the recipe's) is another spelling of the same splits (bench/compare.py).
        if r["name"] in ("cl100k_base", "o200k_base"):
            return fastokens.Tokenizer.from_tiktoken(family_file(family), encoding=r["name"],
                                                     special_tokens=r["special_tokens"])
        return fastokens.Tokenizer.from_tiktoken(family_file(family), pattern=r["pat_str"],
                                                 special_tokens=r["special_tokens"])
    except Exception as e:  # a peer that refuses a file is a skip, not a failure
        raise NotImplementedError(f"fastokens refuses {family}: {e.__class__.__name__}: {e}")


def build_peer(lib, family):
    if lib == "tiktoken":
        if FAMILIES[family][0] == "hf":
            raise NotImplementedError(f"tiktoken cannot read {family}'s tokenizer.json")
        return build_tiktoken(family)
    if lib == "hf":
        return build_hf(family)
    if lib == "fastokens":
        return build_fastokens(family)
    raise ValueError(lib)


def peer(lib, family):
    """(peer object, encode function returning a list of ids), cached per process."""
    key = (lib, family)
    if key not in _peers:
        obj = build_peer(lib, family)
        if lib == "tiktoken":
            fn = obj.encode_ordinary
        elif lib == "hf":
            def fn(t, _o=obj):
                return _o.encode(t, add_special_tokens=False).ids
        else:                                   # fastokens' encode is lazy: .ids makes the list
            def fn(t, _o=obj):
                return _o.encode(t, add_special_tokens=False).ids
        _peers[key] = (obj, fn)
    return _peers[key]


def encoder(lib, family):
    """encode_ordinary-like function of `lib` ("ctok" or a peer) for `family`."""
    if lib == "ctok":
        return load_ctok(family).encode_ordinary
    return peer(lib, family)[1]


def best_mbps(fn, t, passes=2):
    """MB/s of the best of `passes` calls of fn(t)."""
    best = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter()
        fn(t)
        best = min(best, time.perf_counter() - t0)
    return mb(t) / best


def require(obj, attr):
    """Skip benchmarks of an API that the commit under test does not have yet."""
    if not hasattr(obj, attr):
        raise NotImplementedError(f"{type(obj).__name__}.{attr} does not exist in this version")
