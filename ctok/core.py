"""`Encoding`: the public object, a thin Python layer over the native encoder.

Special tokens follow tiktoken's policy (allowed_special / disallowed_special); tokenizer.json files run
their HF pipeline (`ctok.hf`); everything between special tokens goes to `CoreEncoder` in one call.
"""
from __future__ import annotations

import codecs
import os
import re
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import AbstractSet, Collection, Iterable, List, Literal, Optional, Sequence, Tuple, Union

from ._encoder import CoreEncoder
from .errors import DisallowedSpecialError, UnknownTokenError
from .vocab import VocabSpec

AllowedSpecial = Union[Literal["all"], AbstractSet[str]]
DisallowedSpecial = Union[Literal["all"], Collection[str]]

# Batches below this many texts are encoded on the calling thread: a pool costs more than it saves.
MIN_PARALLEL_BATCH = 8


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates become U+FFFD, as tiktoken does before encoding.
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


def _check_text(text) -> None:
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")


class Encoding:
    """A loaded tokenizer.  Build one with `ctok.load(...)` or `ctok.get_encoding(name)`."""

    def __init__(self, spec: VocabSpec, *, hf_pipeline=None, reload_args=None, vocab=None):
        self.name = spec.name
        self._spec_extra = spec.extra
        self._reload_args = reload_args
        self._hf = hf_pipeline
        self.special_tokens = dict(hf_pipeline.special_tokens if hf_pipeline else spec.special_tokens)
        self._special_ids = {v: k for k, v in self.special_tokens.items()}
        self.n_vocab = hf_pipeline.n_vocab if hf_pipeline else spec.n_vocab
        self.pattern = spec.pattern
        if hf_pipeline is not None:
            self._core = hf_pipeline.core
            self.pretokenizer = getattr(hf_pipeline, "pretokenizer", "hf")
            self._split_fallback = None
        else:
            kind, fallback, label = _pretokenizer_for(spec.pattern)
            self.pretokenizer = label
            self._split_fallback = fallback
            if vocab is not None:                     # native tables from the compiled cache
                self._core = CoreEncoder(pretok_kind=kind, vocab=vocab)
            else:
                self._core = CoreEncoder(
                    spec.token_bytes, spec.merges, pretok_kind=kind,
                    special_bytes={v: k.encode("utf-8") for k, v in spec.special_tokens.items()})
        self._special_re_cache = {}

    # ---- introspection ----
    def __repr__(self):
        return f"<ctok.Encoding {self.name!r} n_vocab={self.n_vocab} pretokenizer={self.pretokenizer!r}>"

    @property
    def eot_token(self) -> Optional[int]:
        for name in ("<|endoftext|>", "<|end_of_text|>", "</s>", "<｜end▁of▁sentence｜>", "[EOS]", "<|im_end|>"):
            if name in self.special_tokens:
                return self.special_tokens[name]
        return None

    @property
    def special_tokens_set(self) -> set:
        return set(self.special_tokens)

    def token_byte_values(self) -> List[bytes]:
        return [b for b in (self._core.token_bytes(i) for i in range(self.n_vocab)) if b is not None]

    # ---- special tokens ----
    def _special_re(self, names: frozenset):
        r = self._special_re_cache.get(names)
        if r is None:
            # Longest first so that, of two specials starting at one place, the longer one wins.
            alts = sorted(names, key=lambda s: (-len(s), s))
            r = re.compile("|".join(re.escape(s) for s in alts)) if alts else None
            if len(self._special_re_cache) > 64:
                self._special_re_cache.clear()
            self._special_re_cache[names] = r
        return r

    def _policy(self, text, allowed_special, disallowed_special) -> frozenset:
        if allowed_special == "all":
            allowed = frozenset(self.special_tokens)
        else:
            allowed = frozenset(allowed_special)
        if disallowed_special == "all":
            disallowed = frozenset(self.special_tokens) - allowed
        else:
            disallowed = frozenset(disallowed_special)
        if disallowed:
            r = self._special_re(disallowed)
            m = r.search(text) if r is not None else None
            if m is not None:
                raise DisallowedSpecialError(
                    f"Encountered text corresponding to disallowed special token {m.group()!r}.\n"
                    "If you want this text to be encoded as a special token, pass it to `allowed_special`, "
                    f"e.g. `allowed_special={{{m.group()!r}, ...}}`.\n"
                    "If you want this text to be encoded as normal text, disable the check for this token "
                    f"by passing `disallowed_special=(enc.special_tokens_set - {{{m.group()!r}}})`.\n"
                    "To disable this check for all special tokens, pass `disallowed_special=()`.\n")
        return allowed

    # ---- encoding ----
    def _encode_plain(self, text: str) -> List[int]:
        """Ordinary text (no special tokens recognised) -> ids."""
        if self._hf is not None:
            return self._hf.encode(text, recognise_special=False)
        if self._split_fallback is None:
            return self._core.encode_ordinary(_utf8(text))
        return self._core.encode_pieces([_utf8(p) for p in self._split_fallback(text)])

    def _encode_with_specials(self, text: str, allowed: frozenset) -> List[int]:
        if not allowed:
            return self._encode_plain(text)
        r = self._special_re(allowed)
        out: List[int] = []
        start = 0
        for m in r.finditer(text):
            if m.start() > start:
                out += self._encode_plain(text[start:m.start()])
            out.append(self.special_tokens[m.group()])
            start = m.end()
        if start < len(text):
            out += self._encode_plain(text[start:])
        return out

    def encode_ordinary(self, text: str) -> List[int]:
        """Token ids of `text`, special tokens' text encoded as ordinary text."""
        _check_text(text)
        return self._encode_plain(text)

    def encode(self, text: str, *, allowed_special: AllowedSpecial = frozenset(),
               disallowed_special: DisallowedSpecial = "all", add_special_tokens: bool = False) -> List[int]:
        """Token ids of `text` under tiktoken's special-token policy.

        add_special_tokens=True applies the tokenizer.json post-processor (e.g. a BOS token).
        """
        _check_text(text)
        allowed = self._policy(text, allowed_special, disallowed_special)
        if self._hf is not None:
            if allowed and allowed == frozenset(self.special_tokens):
                return self._hf.encode(text, recognise_special=True, add_special_tokens=add_special_tokens)
            ids = self._encode_with_specials(text, allowed)
            return self._hf.post_process(ids) if add_special_tokens else ids
        return self._encode_with_specials(text, allowed)

    def count(self, text: str, *, allowed_special: AllowedSpecial = frozenset(),
              disallowed_special: DisallowedSpecial = "all") -> int:
        _check_text(text)
        if self._hf is None and self._split_fallback is None and not self.special_tokens:
            return self._core.count(_utf8(text))
        return len(self.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special))

    def encode_segments(self, segments: Iterable[Tuple[str, bool]]) -> List[int]:
        """Encode (text, trusted) segments: only trusted text may produce special-token ids.

        Untrusted text is encoded as ordinary text, so `<|im_end|>` typed by a user never becomes a
        control token.
        """
        out: List[int] = []
        for text, trusted in segments:
            _check_text(text)
            if trusted:
                out += self.encode(text, allowed_special="all", disallowed_special=())
            else:
                out += self._encode_plain(text)
        return out

    def encode_single_token(self, text_or_bytes) -> int:
        if isinstance(text_or_bytes, str):
            if text_or_bytes in self.special_tokens:
                return self.special_tokens[text_or_bytes]
            text_or_bytes = text_or_bytes.encode("utf-8")
        tid = self._core.token_id(text_or_bytes)
        if tid < 0:
            raise KeyError(text_or_bytes)
        return tid

    # ---- batches ----
    def _map(self, fn, items: Sequence, num_threads: Optional[int]):
        n = num_threads if num_threads is not None else (os.cpu_count() or 1)
        if n <= 1 or len(items) < MIN_PARALLEL_BATCH:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=n) as pool:
            return list(pool.map(fn, items, chunksize=max(1, len(items) // (4 * n))))

    def encode_ordinary_batch(self, texts: Sequence[str], *, num_threads: Optional[int] = None) -> List[List[int]]:
        return self._map(self.encode_ordinary, list(texts), num_threads)

    def encode_batch(self, texts: Sequence[str], *, num_threads: Optional[int] = None,
                     allowed_special: AllowedSpecial = frozenset(), disallowed_special: DisallowedSpecial = "all",
                     add_special_tokens: bool = False) -> List[List[int]]:
        def one(t):
            return self.encode(t, allowed_special=allowed_special, disallowed_special=disallowed_special,
                               add_special_tokens=add_special_tokens)
        return self._map(one, list(texts), num_threads)

    def encode_batch_flat(self, texts: Sequence[str], *, num_threads: Optional[int] = None,
                          allowed_special: AllowedSpecial = frozenset(),
                          disallowed_special: DisallowedSpecial = "all"):
        """All ids of `texts` in one numpy uint32 array, and int64 offsets (len(texts)+1) where each text starts."""
        import numpy as np
        texts = list(texts)
        for t in texts:
            _check_text(t)
        plain = (self._hf is None and self._split_fallback is None and allowed_special != "all"
                 and not allowed_special)
        if plain:
            for t in texts:
                self._policy(t, allowed_special, disallowed_special)
            parts = self._map(lambda t: np.frombuffer(self._core.encode_to_buffer(_utf8(t)), dtype=np.uint32),
                              texts, num_threads)
        else:
            parts = [np.asarray(ids, dtype=np.uint32) for ids in self.encode_batch(
                texts, num_threads=num_threads, allowed_special=allowed_special,
                disallowed_special=disallowed_special)]
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        if parts:
            np.cumsum([len(p) for p in parts], out=offsets[1:])
        ids = np.concatenate(parts).astype(np.uint32, copy=False) if parts else np.zeros(0, dtype=np.uint32)
        return ids, offsets

    # ---- decoding ----
    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return self._core.decode_bytes(tokens)

    def decode(self, tokens: Sequence[int], errors: str = "replace", *, skip_special_tokens: bool = False) -> str:
        if self._hf is not None:
            return self._hf.decode(list(tokens), skip_special_tokens=skip_special_tokens)
        if skip_special_tokens:
            tokens = [t for t in tokens if t not in self._special_ids]
        return self._core.decode_bytes(tokens).decode("utf-8", errors=errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        b = self._core.token_bytes(token) if isinstance(token, int) and token >= 0 else None
        if b is None:
            raise UnknownTokenError(token)
        return b

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> List[bytes]:
        return [self.decode_single_token_bytes(t) for t in tokens]

    def decode_batch(self, batch: Sequence[Sequence[int]], errors: str = "replace", *,
                     num_threads: Optional[int] = None) -> List[str]:
        return [self.decode(t, errors=errors) for t in batch]

    def stream_decoder(self, errors: str = "replace", *, skip_special_tokens: bool = False):
        """An incremental detokenizer: `.step(token) -> str` returns newly completed text, `.flush()` the rest."""
        if self._hf is not None:
            return _WindowStreamDecoder(self, skip_special_tokens)
        return _ByteStreamDecoder(self, errors, skip_special_tokens)

    # ---- pickling: by source and content hash, never by tables ----
    def __reduce__(self):
        if self._reload_args is None:
            raise TypeError(f"{self!r} was not loaded from a file and cannot be pickled")
        return (_reload, (self._reload_args, self._spec_extra.get("content_hash")))


def _reload(args, content_hash):
    from . import _loaded_encoding
    enc = _loaded_encoding(args)
    if content_hash is not None and enc._spec_extra.get("content_hash") != content_hash:
        raise ValueError(f"{args[0]!r} changed since this Encoding was pickled (content hash differs)")
    return enc


class _ByteStreamDecoder:
    """Byte-level families: a token never changes text already completed, so an incremental UTF-8
    decoder (which holds back an unfinished character) gives exactly decode()'s text, in order."""

    def __init__(self, enc: Encoding, errors: str, skip_special_tokens: bool):
        self._enc = enc
        self._skip = skip_special_tokens
        self._dec = codecs.getincrementaldecoder("utf-8")(errors=errors)

    def step(self, token: int) -> str:
        if self._skip and token in self._enc._special_ids:
            return ""
        return self._dec.decode(self._enc._core.decode_bytes((token,)))

    def flush(self) -> str:
        return self._dec.decode(b"", final=True)


class _WindowStreamDecoder:
    """tokenizer.json families: decode a short window of recent ids and emit what grew, holding back
    text that still ends in U+FFFD (an unfinished byte sequence), as HF's DecodeStream does."""

    def __init__(self, enc: Encoding, skip_special_tokens: bool):
        self._enc = enc
        self._skip = skip_special_tokens
        self._ids: List[int] = []
        self._prefix = ""
        self._emitted_all = ""

    def _decode(self, ids):
        return self._enc.decode(ids, skip_special_tokens=self._skip)

    def step(self, token: int) -> str:
        self._ids.append(token)
        text = self._decode(self._ids)
        if len(text) > len(self._prefix) and not text.endswith("\ufffd"):
            new = text[len(self._prefix):]
            if text.startswith(self._prefix):
                self._prefix = text
                return new
        return ""

    def flush(self) -> str:
        text = self._decode(self._ids)
        new = text[len(self._prefix):] if text.startswith(self._prefix) else ""
        self._prefix = text
        return new


def _pretokenizer_for(pattern: Optional[str]):
    """(native kind, Python fallback splitter or None, label) for a tiktoken split pattern."""
    from . import patterns
    if pattern is None:
        return 0, None, "whole"
    kind = patterns.recognise(pattern)
    if kind is not None:
        return kind, None, f"native:{patterns.KIND_NAMES[kind]}"
    compiled = patterns.compile_fallback(pattern)
    return 0, (lambda text: patterns.split_fallback(compiled, text)), "regex"
