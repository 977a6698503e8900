"""Explicit hand-over to HuggingFace tokenizers for tokenizer.json files ctok does not support.

Only used when the caller asks for it with `ctok.load(path, fallback="hf")`; ctok never falls back silently.
"""
from __future__ import annotations

from typing import List

from .errors import CtokError


class HFFallbackEncoding:
    """The subset of `ctok.Encoding` that HF tokenizers can provide."""

    pretokenizer = "hf-tokenizers (fallback)"

    def __init__(self, path: str):
        try:
            import tokenizers
        except ImportError:
            raise CtokError(f"{path}: fallback='hf' needs the 'tokenizers' package installed") from None
        self._tok = tokenizers.Tokenizer.from_file(path)
        self.name = path
        self.special_tokens = {t.content: i for i, t in self._tok.get_added_tokens_decoder().items() if t.special}
        self.n_vocab = self._tok.get_vocab_size(with_added_tokens=True)

    def __repr__(self):
        return f"<ctok.HFFallbackEncoding {self.name!r} (HuggingFace tokenizers)>"

    def encode(self, text: str, *, allowed_special=frozenset(), disallowed_special="all",
               add_special_tokens: bool = False) -> List[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        self._tok.encode_special_tokens = not allowed_special
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_ordinary(self, text: str) -> List[int]:
        return self.encode(text)

    def decode(self, tokens, errors: str = "replace", *, skip_special_tokens: bool = False) -> str:
        return self._tok.decode(list(tokens), skip_special_tokens=skip_special_tokens)
