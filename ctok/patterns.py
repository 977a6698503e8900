"""Split patterns: recognise the known ones (fast native scanners in ctok._pretok), run any other one through the
Python ``regex`` module with the semantics of the reference engines.

Pure Python; importing it never needs the compiled module nor ``regex`` (the fallback imports ``regex`` lazily).

* ``recognise(pattern, engine="tiktoken") -> int | None``: the PRETOK_* kind of a known pattern (exact string; the
  possessive spellings tiktoken prints and HF's spellings are accepted where they are equivalent), else None.
  Pass ``engine="hf"`` for tokenizer.json patterns: Oniguruma reads ``X{1,3}+`` as ``(?:X{1,3})+`` and ``$`` as an
  end-of-line anchor, so tiktoken's cl100k spelling is not cl100k there (and is refused).  compile_fallback(...,
  engine="hf") reproduces both readings.
* ``recognise_sequence(patterns, engine="hf") -> int | None``: for a HF Sequence of Split pre-tokenizers (all Isolated, invert
  false): DeepSeek-V3's three patterns -> PRETOK_DEEPSEEK; a one-element list -> ``recognise``.
* ``compile_fallback(pattern, engine="tiktoken")``, ``split_fallback(compiled, text)``,
  ``finditer_spans(compiled, text)``: the slow general path.  ``engine`` is "tiktoken" (Rust regex / fancy-regex)
  or "hf" (Oniguruma, as used by tokenizers).  The pattern is rewritten so that Python ``regex`` (whose Unicode
  tables are newer) gives the references' results:
    - ``\\p{..}``/``\\P{..}`` of general categories and ``Han``, and ``\\d``, become explicit Unicode 16.0 ranges
      (the tables of ctok/_unicode_tables.h, from unicodedata2 16.0.0 + tools/unicode16_han.txt);
    - ``\\s``/``\\S`` are kept: in ``regex`` they are White_Space, as in both references (25 code points);
    - always ``regex.V1`` (nested classes and ``&&`` as in both references; scoped inline flags as in Rust);
      tiktoken: simple case folding (``(?-f)``, so ``(?i)ss`` does not match "ß"), ``$`` = end of text (``\\Z``);
      hf: full case folding (Oniguruma's ``(?i)ss`` matches "ß"), ``^``/``$`` are line anchors (MULTILINE),
      ``\\Z`` = end or before a final newline, ``\\z`` = end, ``X{n,m}+`` = ``(?:X{n,m})+``.
  Not rewritten (Unicode 17 in ``regex``): other properties (scripts other than Han, binary properties), ``\\w``,
  ``\\b``.  Empty matches are dropped by ``split_fallback`` (they give no token) and kept by ``finditer_spans``.
"""
from __future__ import annotations

import functools
import os

# Same values as the cdef enum in ctok/_pretok.pxd (kept here so this module works without the compiled one).
PRETOK_WHOLE = 0
PRETOK_GPT2 = 1
PRETOK_CL100K = 2
PRETOK_O200K = 3
PRETOK_LLAMA3 = 4
PRETOK_QWEN = 5
PRETOK_KIMI = 6
PRETOK_TEKKEN = 7
PRETOK_DEEPSEEK = 8

KIND_NAMES = {
    PRETOK_WHOLE: "whole", PRETOK_GPT2: "gpt2", PRETOK_CL100K: "cl100k", PRETOK_O200K: "o200k",
    PRETOK_LLAMA3: "llama3", PRETOK_QWEN: "qwen", PRETOK_KIMI: "kimi", PRETOK_TEKKEN: "tekken",
    PRETOK_DEEPSEEK: "deepseek",
}

_CONTRACTIONS_CI = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
_O200K_UP = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"
_O200K_LO = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
_KIMI_UP = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]"
_KIMI_LO = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]"

#: The canonical pattern of each kind, in the spelling its reference uses (tiktoken 0.14.0 / HF files).
#: For PRETOK_DEEPSEEK this is the list of the three HF Split patterns.
PATTERNS = {
    PRETOK_GPT2: r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s",
    PRETOK_CL100K: r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
                   r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s",
    PRETOK_O200K: "|".join([
        r"[^\r\n\p{L}\p{N}]?" + _O200K_UP + "*" + _O200K_LO + "+" + _CONTRACTIONS_CI + "?",
        r"[^\r\n\p{L}\p{N}]?" + _O200K_UP + "+" + _O200K_LO + "*" + _CONTRACTIONS_CI + "?",
        r"\p{N}{1,3}", r" ?[^\s\p{L}\p{N}]+[\r\n/]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+"]),
    PRETOK_LLAMA3: _CONTRACTIONS_CI + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                                      r"|\s+(?!\S)|\s+",
    PRETOK_QWEN: _CONTRACTIONS_CI + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                                    r"|\s+(?!\S)|\s+",
    PRETOK_KIMI: "|".join([
        r"[\p{Han}]+",
        r"[^\r\n\p{L}\p{N}]?" + _KIMI_UP + "*" + _KIMI_LO + "+" + _CONTRACTIONS_CI + "?",
        r"[^\r\n\p{L}\p{N}]?" + _KIMI_UP + "+" + _KIMI_LO + "*" + _CONTRACTIONS_CI + "?",
        r"\p{N}{1,3}", r" ?[^\s\p{L}\p{N}]+[\r\n]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+"]),
    PRETOK_TEKKEN: "|".join([
        r"[^\r\n\p{L}\p{N}]?" + _O200K_UP + "*" + _O200K_LO + "+",
        r"[^\r\n\p{L}\p{N}]?" + _O200K_UP + "+" + _O200K_LO + "*",
        r"\p{N}", r" ?[^\s\p{L}\p{N}]+[\r\n/]*", r"\s*[\r\n]+", r"\s+(?!\S)", r"\s+"]),
    PRETOK_DEEPSEEK: [
        r"\p{N}{1,3}",
        "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~]" r"[A-Za-z]+|[^" "\r\n" r"\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
        r"| ?[\p{P}\p{S}]+[" "\r\n" r"]*|\s*[" "\r\n" r"]+|\s+(?!\S)|\s+",
    ],
}

#: HF ByteLevel(use_regex=True)'s built-in regex (GPT-2's original spelling; also tiktoken's r50k before 0.8).
GPT2_BYTELEVEL_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

# Other spellings with the same splits (proved in tests/test_pretok.py by running both through the references).
_EQUIVALENT = {
    PRETOK_GPT2: [
        GPT2_BYTELEVEL_PATTERN,
        r"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
        r"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+$|\s+(?!\S)|\s",
    ],
    PRETOK_CL100K: [
        # the same without possessive quantifiers (each possessive is followed by nothing that could backtrack)
        r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s+$|\s*[\r\n]|\s+(?!\S)|\s",
    ],
}


# Spellings whose meaning differs in Oniguruma (tokenizers): there `X{1,3}+` is `(?:X{1,3})+` (not possessive)
# and `$` is an end-of-line anchor, so `\s+$` may stop before a newline.  recognise(..., engine="hf") refuses them.
def _hf_differs(pattern: str) -> bool:
    import re  # the standard library's: this module must not need the regex package
    return re.search(r"\{\d+(?:,\d*)?\}\+", pattern) is not None or r"\s+$" in pattern


def _normal_form(pattern: str) -> str:
    """Literal CR/LF characters -> their escapes (HF JSON files often hold the characters themselves)."""
    return pattern.replace("\r", r"\r").replace("\n", r"\n")


@functools.lru_cache(maxsize=None)
def _known_table(engine: str):
    table = {}
    for kind, pat in PATTERNS.items():
        if kind != PRETOK_DEEPSEEK:
            table[_normal_form(pat)] = kind
    for kind, pats in _EQUIVALENT.items():
        for pat in pats:
            table[_normal_form(pat)] = kind
    if engine == "hf":
        table = {p: k for p, k in table.items() if not _hf_differs(p)}
    return table


def recognise(pattern: str, engine: str = "tiktoken") -> int | None:
    """PRETOK_* kind for a known split pattern given as its exact string, else None.

    engine: "tiktoken" for a tiktoken pat_str (Rust regex), "hf" for a tokenizer.json Split pattern (Oniguruma);
    a few spellings mean something else in Oniguruma and are known only for tiktoken."""
    if not isinstance(pattern, str):
        return None
    if engine not in ("tiktoken", "hf"):
        raise ValueError(f"engine must be 'tiktoken' or 'hf', not {engine!r}")
    return _known_table(engine).get(_normal_form(pattern))


def recognise_sequence(patterns, engine: str = "hf") -> int | None:
    """PRETOK_* kind for a HF Sequence of Split(Isolated, invert=false) patterns, applied in order, else None."""
    patterns = list(patterns)
    if len(patterns) == 1:
        return recognise(patterns[0], engine)
    if [_normal_form(p) for p in patterns] == [_normal_form(p) for p in PATTERNS[PRETOK_DEEPSEEK]]:
        return PRETOK_DEEPSEEK
    return None


# ------------------------------------------------------------------------------------------------ fallback
_GC_ALIASES = {
    "letter": "L", "cased_letter": "LC", "uppercase_letter": "Lu", "lowercase_letter": "Ll",
    "titlecase_letter": "Lt", "modifier_letter": "Lm", "other_letter": "Lo", "mark": "M", "combining_mark": "M",
    "nonspacing_mark": "Mn", "spacing_mark": "Mc", "enclosing_mark": "Me", "number": "N",
    "decimal_number": "Nd", "digit": "Nd", "letter_number": "Nl", "other_number": "No", "punctuation": "P",
    "punct": "P", "connector_punctuation": "Pc", "dash_punctuation": "Pd", "open_punctuation": "Ps",
    "close_punctuation": "Pe", "initial_punctuation": "Pi", "final_punctuation": "Pf",
    "other_punctuation": "Po", "symbol": "S", "math_symbol": "Sm", "currency_symbol": "Sc",
    "modifier_symbol": "Sk", "other_symbol": "So", "separator": "Z", "space_separator": "Zs",
    "line_separator": "Zl", "paragraph_separator": "Zp", "other": "C", "control": "Cc", "cntrl": "Cc",
    "format": "Cf", "surrogate": "Cs", "private_use": "Co", "unassigned": "Cn",
}
_GC_ALL = {"L", "LC", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No", "P", "Pc", "Pd",
           "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So", "Z", "Zs", "Zl", "Zp", "C", "Cc", "Cf", "Cs",
           "Co", "Cn"}


def _canon_property(name: str):
    """'L', 'Lu', ..., 'Han' for the properties rewritten to Unicode 16 ranges, else None."""
    key = name.strip().replace(" ", "_").replace("-", "_")
    low = key.lower()
    for prefix in ("gc=", "general_category=", "generalcategory="):
        if low.startswith(prefix):
            key = key[len(prefix):]
            low = key.lower()
    for prefix in ("sc=", "script=", "scx=", "script_extensions="):
        if low.startswith(prefix):
            return "Han" if low[len(prefix):] in ("han", "hani") and not prefix.startswith("scx") else None
    if low in ("han", "hani"):
        return "Han"
    if low in ("l&", "lc"):
        return "LC"
    for gc in _GC_ALL:
        if low == gc.lower():
            return gc
    return _GC_ALIASES.get(low)


# Script=Han of Unicode 16.0 (Scripts-16.0.0.txt; the same ranges as tools/unicode16_han.txt, which the table
# generator reads -- tests/test_pretok.py checks that they agree and that both equal the references' \p{Han}).
_HAN16 = ((0x2E80, 0x2E99), (0x2E9B, 0x2EF3), (0x2F00, 0x2FD5), (0x3005, 0x3005), (0x3007, 0x3007),
          (0x3021, 0x3029), (0x3038, 0x303A), (0x303B, 0x303B), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
          (0xF900, 0xFA6D), (0xFA70, 0xFAD9), (0x16FE2, 0x16FE2), (0x16FE3, 0x16FE3), (0x16FF0, 0x16FF1),
          (0x20000, 0x2A6DF), (0x2A700, 0x2B739), (0x2B740, 0x2B81D), (0x2B820, 0x2CEA1), (0x2CEB0, 0x2EBE0),
          (0x2EBF0, 0x2EE5D), (0x2F800, 0x2FA1D), (0x30000, 0x3134A), (0x31350, 0x323AF))


def _han_ranges():
    return _HAN16


_GC2 = ("Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po",
        "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cn")


def _cp(i):
    """Code point at index i of _all_text() (which skips the surrogates)."""
    return i if i < 0xD800 else i + 0x800


@functools.lru_cache(maxsize=None)
def _all_text():
    return "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))


@functools.lru_cache(maxsize=None)
def _codes16():
    """One character per scalar value: chr(65 + index in _GC2) of its Unicode 16 general category."""
    import unicodedata2
    table = {c: chr(65 + k) for k, c in enumerate(_GC2)}
    return "".join(table[c] for c in map(unicodedata2.category, _all_text()))


def _members(prop):
    if prop == "LC":
        return {"Lu", "Ll", "Lt"}
    return {c for c in _GC2 if c == prop or (len(prop) == 1 and c[0] == prop)}


@functools.lru_cache(maxsize=None)
def _gc_diffs():
    """{code point: (Unicode 16 category, regex module's category)} where the two differ."""
    import regex
    text, codes = _all_text(), _codes16()
    diffs = {}
    for k, cat in enumerate(_GC2):
        code = chr(65 + k)
        for m in regex.finditer(r"\p{%s}+" % cat, text):
            a, b = m.span()
            if codes.count(code, a, b) != b - a:
                for i in range(a, b):
                    if codes[i] != code:
                        diffs[_cp(i)] = (_GC2[ord(codes[i]) - 65], cat)
    return diffs


def _to_ranges(cps):
    out = []
    for cp in sorted(cps):
        if out and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return [(a, b) for a, b in out]


def _class_body(ranges) -> str:
    def esc(cp):
        return f"\\U{cp:08x}"
    return "".join(esc(lo) if lo == hi else f"{esc(lo)}-{esc(hi)}" for lo, hi in ranges)


@functools.lru_cache(maxsize=None)
def _prop_class(prop: str, neg: bool) -> str:
    """A V1 set for the Unicode 16 property, valid alone or nested in a class: the regex module's own (fast)
    property, corrected by the few code points whose membership differs (its Unicode tables are newer)."""
    import regex
    if prop == "Han":
        theirs = set()
        for m in regex.finditer(r"\p{Han}+", _all_text()):
            theirs.update(_cp(i) for i in range(*m.span()))
        ours = set()
        for lo, hi in _han_ranges():
            ours.update(range(lo, hi + 1))
        only_theirs, only_ours = theirs - ours, ours - theirs
    else:
        want = _members(prop)
        only_theirs = {cp for cp, (c16, c17) in _gc_diffs().items() if c17 in want and c16 not in want}
        only_ours = {cp for cp, (c16, c17) in _gc_diffs().items() if c16 in want and c17 not in want}
    native = r"\%s{%s}" % ("P" if neg else "p", prop)
    minus, plus = (only_theirs, only_ours) if not neg else (only_ours, only_theirs)
    s = f"[{native}--[{_class_body(_to_ranges(minus))}]]" if minus else f"[{native}]"
    if plus:
        s = f"[{s}{_class_body(_to_ranges(plus))}]"
    return s


def _onig_interval_plus(pattern: str) -> str:
    """Oniguruma (Ruby syntax) reads ``X{n,m}+`` as ``(?:X{n,m})+``, not as a possessive interval as Python
    ``regex`` would: make the grouping explicit."""
    import re
    interval = re.compile(r"\{\d+(?:,\d*)?\}|\{,\d+\}")
    out = []        # output pieces
    groups = []     # out index of each open group
    atom = None     # out index where the last complete atom starts
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            j = i + 2
            if i + 1 < n and pattern[i + 1] in "pPxuk" and j < n and pattern[j] == "{":
                j = pattern.find("}", j) + 1 or n
            atom = len(out)
            out.append(pattern[i:j])
            i = j
        elif c == "[":
            j, depth = i + 1, 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and depth:
                if pattern[j] == "\\":
                    j += 2
                    continue
                if pattern[j] == "[":
                    depth += 1
                elif pattern[j] == "]":
                    depth -= 1
                j += 1
            atom = len(out)
            out.append(pattern[i:j])
            i = j
        elif c == "(":
            groups.append(len(out))
            out.append(c)
            atom = None
            i += 1
        elif c == ")":
            atom = groups.pop() if groups else None
            out.append(c)
            i += 1
        elif c == "{" and interval.match(pattern, i):
            m = interval.match(pattern, i)
            if atom is not None and m.end() < n and pattern[m.end()] == "+":
                inner = "".join(out[atom:]) + m.group()
                del out[atom:]
                out.append("(?:" + inner + ")")
            else:
                out.append(m.group())
            i = m.end()
        elif c in "*+?":
            out.append(c)
            i += 1
        else:
            atom = None if c == "|" else len(out)
            out.append(c)
            i += 1
    return "".join(out)


def _rewrite(pattern: str, engine: str) -> str:
    out = []
    i = 0
    depth = 0  # character-class nesting
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e in "pP":
                if i + 2 < n and pattern[i + 2] == "{":
                    j = pattern.find("}", i + 3)
                    if j < 0:
                        out.append(pattern[i:])
                        break
                    name = pattern[i + 3:j]
                    end = j + 1
                else:
                    name = pattern[i + 2:i + 3]
                    end = i + 3
                neg = e == "P"
                if name.startswith("^"):
                    neg = not neg
                    name = name[1:]
                prop = _canon_property(name)
                if prop is None:
                    out.append(pattern[i:end])
                else:
                    out.append(_prop_class(prop, neg))
                i = end
                continue
            if e in "dD":
                out.append(_prop_class("Nd", e == "D"))
                i += 2
                continue
            if not depth and e == "z":
                out.append(r"\Z")
                i += 2
                continue
            if not depth and e == "Z" and engine == "hf":
                out.append(r"(?=\n?\Z)")
                i += 2
                continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[":
            if depth == 0:
                # a leading ']' (or '^]') is a literal in both references
                out.append(c)
                i += 1
                depth = 1
                if i < n and pattern[i] == "^":
                    out.append("^")
                    i += 1
                if i < n and pattern[i] == "]":
                    out.append(r"\]")
                    i += 1
                continue
            if i + 1 < n and pattern[i + 1] == ":":  # POSIX [:alpha:] inside a class
                j = pattern.find(":]", i + 2)
                if j > 0:
                    out.append(pattern[i:j + 2])
                    i = j + 2
                    continue
            depth += 1
            out.append(c)
            i += 1
            continue
        if c == "]" and depth:
            depth -= 1
            out.append(c)
            i += 1
            continue
        if c == "$" and not depth and engine == "tiktoken":
            out.append(r"\Z")
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def compile_fallback(pattern: str, engine: str = "tiktoken"):
    """Compile any split pattern for the slow path; engine "tiktoken" (Rust regex semantics) or "hf" (Oniguruma)."""
    if engine not in ("tiktoken", "hf"):
        raise ValueError(f"engine must be 'tiktoken' or 'hf', not {engine!r}")
    try:
        import regex
    except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
        raise ImportError(f"ctok needs the 'regex' package for the split pattern {pattern!r}, "
                          "which has no native scanner") from exc
    flags = regex.V1
    body = _rewrite(_onig_interval_plus(pattern) if engine == "hf" else pattern, engine)
    if engine == "hf":
        flags |= regex.MULTILINE
        src = body
    else:
        src = "(?-f)" + body  # simple case folding, as Rust regex
    return regex.compile(src, flags)


def finditer_spans(compiled, text: str):
    """All match spans (start, end) in str indices, as the reference engine would find them."""
    return [m.span() for m in compiled.finditer(text)]


def split_fallback(compiled, text: str):
    """tiktoken semantics: the matched pieces in order (text between matches yields nothing; empty matches too)."""
    return [m.group() for m in compiled.finditer(text) if m.end() > m.start()]
