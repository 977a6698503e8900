"""ctok: exact, fast BPE tokenization of tiktoken and HuggingFace tokenizer.json vocabularies.

    >>> import ctok
    >>> enc = ctok.get_encoding("o200k_base")          # embedded, works offline
    >>> enc.decode(enc.encode("hello world"))
    'hello world'
    >>> enc = ctok.load("path/to/tokenizer.json")      # or a *.tiktoken / tiktoken.model / tekken*.json
"""
from __future__ import annotations

import os
import threading
from typing import Dict, Optional

from .errors import (ChatInputError, ChatTemplateError, CtokError, DisallowedSpecialError, MissingDependencyError,
                     UnknownPatternError, UnknownTokenError, UnsupportedFeatureError, UnsupportedOptionError,
                     VocabFormatError)
from .core import Encoding
from .vocab import VocabSpec

__all__ = ["load", "get_encoding", "list_encodings", "get_include", "Encoding", "VocabSpec", "CtokError", "VocabFormatError",
           "UnsupportedFeatureError", "UnknownPatternError", "DisallowedSpecialError", "UnknownTokenError",
           "ChatTemplateError", "ChatInputError", "MissingDependencyError", "UnsupportedOptionError"]
__version__ = "0.1.0"

_EMBEDDED = {
    "o200k_base": "o200k_base.tiktoken",
    "cl100k_base": "cl100k_base.tiktoken",
}

# Loaded encodings, keyed by what built them: pickling and get_encoding reuse them instead of re-parsing.
_cache: Dict[tuple, Encoding] = {}
_cache_lock = threading.Lock()


def _freeze(special_tokens):
    return None if special_tokens is None else tuple(sorted(special_tokens.items()))


def _loaded_encoding(args: tuple) -> Encoding:
    if len(args) > 4:
        return _with_options(args)
    path, pattern, specials, fallback = args
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        stamp = None
    key = (args, stamp)
    with _cache_lock:
        enc = _cache.get(key)
    if enc is None:
        enc = _build(path, pattern, None if specials is None else dict(specials), fallback)
        with _cache_lock:
            _cache[key] = enc
    return enc


def _with_options(args: tuple) -> Encoding:
    """args = the base encoding's (path, pattern, specials, fallback) + (long_input_split,): a copy of the
    base encoding that shares its tables, so an option costs no second load."""
    base = _loaded_encoding(args[:4])
    (long_input_split,) = args[4:]
    if not long_input_split:
        return base
    if not isinstance(base, Encoding):
        raise UnsupportedOptionError(f"{args[0]}: long_input_split is not available with fallback='hf'")
    key = (args, id(base))
    with _cache_lock:
        enc = _cache.get(key)
    if enc is None:
        enc = base._with_options(long_input_split=True, reload_args=args)
        with _cache_lock:
            _cache[key] = enc
    return enc


def _build(path, pattern, special_tokens, fallback):
    from . import loaders as loader
    fmt = loader.sniff_format(path)
    if fmt == "hf":
        from . import hf
        try:
            spec, pipeline = hf.load_tokenizer_json(path, config=loader.read_sibling_config(path))
        except UnsupportedFeatureError:
            if fallback == "hf":
                return _hf_fallback(path)
            raise
        spec.extra["content_hash"] = spec.extra.get("content_hash") or _file_hash(path)
        return Encoding(spec, hf_pipeline=pipeline,
                        reload_args=(path, pattern, _freeze(special_tokens), fallback))
    from . import cache
    reload_args = (path, pattern, _freeze(special_tokens), fallback)
    cache_args = [fmt, pattern, special_tokens]
    hit = cache.load_compiled(path, cache_args)
    if hit is not None:
        meta, vocab = hit
        spec = VocabSpec(token_bytes=[], **meta)
        return Encoding(spec, reload_args=reload_args, vocab=vocab)
    stamp = cache.source_stamp(path)           # before parsing: a rewrite during it must not be cached as new
    if fmt == "tekken":
        spec = loader.load_tekken_file(path, pattern=pattern, special_tokens=special_tokens)
    else:
        spec = loader.load_tiktoken_file(path, pattern=pattern, special_tokens=special_tokens)
    spec.extra["content_hash"] = spec.extra["ranks_sha256"]
    try:
        enc = Encoding(spec, reload_args=reload_args)
    except CtokError:
        raise
    except (ValueError, OverflowError) as e:
        # The native tables refuse what the parser let through (an id out of range, say): name the file.
        raise VocabFormatError(path, f"the vocabulary cannot be built: {e}") from None
    meta = {"name": spec.name, "source": spec.source, "special_tokens": spec.special_tokens,
            "pattern": spec.pattern, "explicit_n_vocab": spec.n_vocab, "extra": spec.extra}
    cache.save_compiled(path, cache_args, meta, enc._core.vocab, stamp=stamp)
    return enc


def _file_hash(path):
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _hf_fallback(path):
    from .hf_fallback import HFFallbackEncoding
    return HFFallbackEncoding(path)


def load(source, *, pattern: Optional[str] = None, special_tokens: Optional[Dict[str, int]] = None,
         fallback: Optional[str] = None, long_input_split: bool = False) -> Encoding:
    """Load a tokenizer: a tokenizer.json, a tiktoken rank file, a Tekken JSON, or a folder holding one.

    pattern: the split regex, needed for tiktoken files ctok does not recognise by content.
    special_tokens: name -> id, replacing the known or configured ones.
    fallback="hf": hand a tokenizer.json that uses an unsupported component to HuggingFace tokenizers
    (explicitly; without it ctok raises UnsupportedFeatureError naming the component).
    long_input_split=True: encode long inputs as the official Llama 3 / Llama 4 / Kimi tokenizer wrappers do
    (cut into 400,000-character pieces, and wherever a whitespace or non-whitespace run exceeds 25,000
    characters; each piece encoded on its own).  Off by default: plain tiktoken / HF semantics.
    The folder's chat template, if any, is found from the loaded file (see `Encoding.apply_chat_template`).
    """
    if fallback not in (None, "hf"):
        raise ValueError(f"fallback must be None or 'hf', not {fallback!r}")
    if not isinstance(long_input_split, bool):
        raise UnsupportedOptionError(f"long_input_split must be True or False, not {long_input_split!r}")
    from .loaders import resolve_source
    path = os.path.abspath(resolve_source(source))
    args = (path, pattern, _freeze(special_tokens), fallback)
    return _loaded_encoding(args + (True,) if long_input_split else args)


def get_encoding(name: str) -> Encoding:
    """An encoding shipped inside the package (works offline): see list_encodings()."""
    if name not in _EMBEDDED:
        raise ValueError(f"unknown encoding {name!r}; embedded encodings: {', '.join(list_encodings())}")
    from .loaders import DATA_DIR
    return load(os.path.join(DATA_DIR, _EMBEDDED[name]))


def list_encodings():
    return sorted(_EMBEDDED)


def get_include() -> str:
    """The folder holding ctok.h, for C/C++ code that uses the C API (see Encoding.c_api)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
