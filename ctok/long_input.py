"""The long-input splitting that some models' official tokenizer wrappers apply before tiktoken.

Meta's Llama 3 and Llama 4 reference tokenizers (`tokenizer.py` in meta-llama/llama3 and llama-models) and
Moonshot's Kimi tokenizer (`tokenization_kimi.py`, Kimi K2 and its relatives) do not hand long text to tiktoken
in one call.  They cut it into pieces of at most 400,000 characters, then cut each piece again wherever a run of
consecutive whitespace (or of consecutive non-whitespace) characters, in Python's `str.isspace` sense, grows
past 25,000 characters, and encode every piece on its own.  Tokens therefore never span a cut, so on such
inputs their ids differ from a plain tiktoken call.  `split_long_input` reproduces the cuts; `Encoding` applies
it when built with `long_input_split=True`.
"""
from __future__ import annotations

import re
from typing import List

MAX_PIECE_CHARS = 400_000
MAX_RUN_CHARS = 25_000

# The start of a whitespace or non-whitespace run long enough to be cut.  The lookbehind anchors each match at
# the start of its run, so finding them costs O(len) rather than O(len * run length).  Python's `re` defines
# `\s` for str patterns by the same predicate as `str.isspace` (Py_UNICODE_ISSPACE).
_LONG_RUN = re.compile(r"(?<!\S)\S{%d}|(?<!\s)\s{%d}" % (MAX_RUN_CHARS + 1, MAX_RUN_CHARS + 1))
_RUN_REST = {True: re.compile(r"\s*"), False: re.compile(r"\S*")}


def _cuts(chunk: str, max_run: int) -> List[int]:
    cuts: List[int] = []
    for m in _LONG_RUN.finditer(chunk):
        start = m.start()
        end = _RUN_REST[chunk[start].isspace()].match(chunk, m.end()).end()
        # The wrappers count the run from its start and restart the count at each cut, so a run of n
        # characters is cut every max_run characters, strictly before its end.
        cuts.extend(range(start + max_run, end, max_run))
    return cuts


def split_long_input(text: str) -> List[str]:
    """The pieces the Llama 3 / Llama 4 / Kimi wrappers encode separately, in order; their concatenation is
    `text`.  Text of at most 25,000 characters is never cut (a single piece)."""
    if len(text) <= MAX_RUN_CHARS:
        return [text]
    pieces: List[str] = []
    for i in range(0, len(text), MAX_PIECE_CHARS):
        chunk = text[i:i + MAX_PIECE_CHARS]
        start = 0
        for cut in _cuts(chunk, MAX_RUN_CHARS) if len(chunk) > MAX_RUN_CHARS else ():
            pieces.append(chunk[start:cut])
            start = cut
        pieces.append(chunk[start:])
    return pieces
