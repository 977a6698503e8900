"""The one vocabulary format every loader produces."""
from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple


@dataclass
class VocabSpec:
    """A BPE vocabulary, whatever file it came from.

    token_bytes[id] holds the raw bytes of every ordinary token (None for ids that are unused or belong to
    special tokens).  `merges` lists (left_id, right_id) pairs in rank order; None means tiktoken semantics,
    where merging two parts is allowed iff their concatenation is a token, and its rank is that token's id.
    """

    name: str
    source: str
    token_bytes: List[Optional[bytes]]
    merges: Optional[List[Tuple[int, int]]] = None
    special_tokens: Dict[str, int] = field(default_factory=dict)
    pattern: Optional[str] = None
    explicit_n_vocab: Optional[int] = None
    extra: dict = field(default_factory=dict)

    @property
    def n_vocab(self) -> int:
        if self.explicit_n_vocab is not None:
            return self.explicit_n_vocab
        top = len(self.token_bytes) - 1
        if self.special_tokens:
            top = max(top, max(self.special_tokens.values()))
        return top + 1


def ranks_hash(token_bytes) -> str:
    """sha256 over ranks 0..n-1 in order of (2-byte little-endian length, bytes).

    This is the content hash known vocabularies are recognised by (shared/vocab/known/*.json defines it
    the same way), so a renamed or re-saved file is still recognised and a different file never is.
    Tokens of 65,535 bytes or more (no known vocabulary has one) are written as 0xFFFF and an 8-byte length.
    """
    h = hashlib.sha256()
    pack = struct.Struct("<H").pack
    for b in token_bytes:
        if b is None:
            b = b""
        if len(b) < 0xFFFF:
            h.update(pack(len(b)))
        else:
            h.update(pack(0xFFFF) + struct.pack("<Q", len(b)))
        h.update(b)
    return h.hexdigest()
