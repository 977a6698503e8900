"""HuggingFace ``tokenizer.json`` (BPE model) support, bit-exact with ``tokenizers.Tokenizer.from_file``.

`load_tokenizer_json(path)` parses the file into the one vocab format (`ctok.vocab.VocabSpec`) and an
`HFPipeline` that reproduces HF's encode and decode:

    added tokens (raw text)  ->  normalizer  ->  added tokens (normalized text)  ->  pre-tokenizer  ->  BPE
    ->  post-processor;            decode: ids -> token strings -> decoder chain

BPE itself runs in the native `CoreEncoder`.  Everything else is done here, in Python, following the
semantics of the Rust crate (``tokenizers`` 0.23): AddedVocabulary's leftmost-longest matching with
single_word / lstrip / rstrip, NormalizedString's split behaviours, Metaspace's prepend schemes, ByteLevel's
per-split prefix space, and the decoders' exact string handling.  When the pre-tokenizer reduces to a split
pattern the native scanner knows (`ctok.patterns.recognise`), a whole segment goes to the core in one call.

Components that are not implemented raise `UnsupportedFeatureError` naming the file and the component;
malformed files raise `VocabFormatError` naming the field.
"""
from __future__ import annotations

import json
import operator
import os
import re
from typing import Dict, List, Optional, Tuple

import regex
import unicodedata2

from ctok._encoder import nf_normalize
from ctok.errors import InvalidTextError, UnsupportedFeatureError, VocabFormatError

__all__ = ["load_tokenizer_json", "HFPipeline", "GPT2_BYTELEVEL_PATTERN", "BYTE_TO_CHAR", "CHAR_TO_BYTE"]

# ---------------------------------------------------------------------------------------------------------------
# GPT-2's byte <-> unicode map (as defined by GPT-2 and used by HF's ByteLevel): the printable Latin-1 bytes
# ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves; the remaining 68 bytes, in increasing order, become
# U+0100, U+0101, ...


def _byte_map():
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out = [""] * 256
    for b in keep:
        out[b] = chr(b)
    n = 0
    for b in range(256):
        if not out[b]:
            out[b] = chr(256 + n)
            n += 1
    return out


BYTE_TO_CHAR: List[str] = _byte_map()
CHAR_TO_BYTE: Dict[str, int] = {c: b for b, c in enumerate(BYTE_TO_CHAR)}
# str.translate tables: Latin-1 view of bytes <-> mapped characters
_BL_MAP = {b: BYTE_TO_CHAR[b] for b in range(256)}
_BL_UNMAP = {ord(c): b for c, b in CHAR_TO_BYTE.items()}
for _c in range(256):  # Latin-1 characters outside the map must not pass through as bytes
    if chr(_c) not in CHAR_TO_BYTE:
        _BL_UNMAP[_c] = 0xFFFF

GPT2_BYTELEVEL_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


def _bl_map(s: str) -> str:
    return s.encode("utf-8").decode("latin-1").translate(_BL_MAP)


def _bl_unmap(s: str) -> Optional[bytes]:
    """Raw bytes of a byte-level string, or None when it holds a character outside the map."""
    t = s.translate(_BL_UNMAP)
    try:
        return t.encode("latin-1")
    except UnicodeEncodeError:
        return None


# ---------------------------------------------------------------------------------------------------------------
# Character classes of the Rust crates HF uses: char::is_whitespace and regex's \s are White_Space; regex's \w
# is Alphabetic + M + Nd + Pc + Join_Control; char::is_numeric is N*.

_WS = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
                "\u200a\u2028\u2029\u202f\u205f\u3000")
_WORD_CHAR = regex.compile(r"[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]")
_ASCII_PUNCT = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"


def normalize_forms(forms, s: str) -> str:
    """HF's Unicode normalizers `forms` (applied in order) on s, with HF's Unicode data (see _unicode_normalize)."""
    for form in forms:
        s = _unicode_normalize(form, s)
    return s


def _unicode_normalize(form: str, s: str) -> str:
    """`form` normalization as HF computes it: natively, and only the stretches the quick check doubts
    (_encoder.nf_normalize; HF's Unicode data is older than Unicode 16, see tools/gen_nf_tables.py)."""
    return nf_normalize(s, form)


# Uppercase letters newer than this Python's Unicode data whose lowercase Rust (and so HF's Lowercase) knows:
# "first-last:offset" runs (lowercase = code point + offset), found by comparing with tokenizers 0.23.
_NEWER_LOWER_RUNS = ("1C89:+1 A7CB:-42343 A7CC:+1 A7CE:+1 A7D2:+1 A7D4:+1 A7DA:+1 A7DC:-42561 10D50-10D65:+32 "
                     "16EA0-16EB8:+27")


def _newer_lower():
    table = {}
    for run in _NEWER_LOWER_RUNS.split():
        rng, _, off = run.partition(":")
        a, _, b = rng.partition("-")
        a = int(a, 16)
        b = int(b, 16) if b else a
        for c in range(a, b + 1):
            if chr(c).lower() == chr(c):  # only where this Python does not know the mapping yet
                table[c] = c + int(off)
    return table


_LOWER_FIX = _newer_lower()
_LOWER_FIX_RE = re.compile("[" + "".join(re.escape(chr(c)) for c in _LOWER_FIX) + "]") if _LOWER_FIX else None


def _lowercase(s: str) -> str:
    # Rust's char::to_lowercase works char by char (no final-sigma context, unlike str.lower()).
    if "\u03a3" not in s:
        s = s.lower()
    else:
        s = "".join(c.lower() for c in s)
    if _LOWER_FIX_RE is not None and not s.isascii() and _LOWER_FIX_RE.search(s):
        s = s.translate(_LOWER_FIX)
    return s


# ---------------------------------------------------------------------------------------------------------------
# Regex compilation (the native recogniser and the fallback compiler live in ctok.patterns)


def _patterns_module():
    try:
        from ctok import patterns  # noqa: WPS433
        return patterns
    except ImportError:
        return None


def _recognise(patterns_list: List[str]) -> Optional[int]:
    """Native pretokenizer kind for a sequence of Isolated split patterns, or None."""
    mod = _patterns_module()
    if mod is None:
        return None
    try:
        # tokenizer.json Split patterns run in Oniguruma: recognise them with its semantics.
        k = mod.recognise_sequence(patterns_list, engine="hf")
    except Exception:  # noqa: BLE001 - an unrecognisable pattern simply takes the slow path
        return None
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        return None
    return k


def _compile(path, where: str, pattern: str):
    """An Oniguruma pattern (HF's SysRegex) for the Python `regex` module, via ctok.patterns' rewriter."""
    mod = _patterns_module()
    if mod is not None and hasattr(mod, "compile_fallback"):
        try:
            return mod.compile_fallback(pattern, engine="hf")
        except Exception:  # noqa: BLE001 - fall through to the plain regex module
            pass
    try:
        return regex.compile(pattern)
    except regex.error as e:
        raise VocabFormatError(path, f"field {where}: invalid regex {pattern!r}: {e}") from None


def _spans(compiled, text: str):
    """(start, end) str spans of the non-overlapping matches of `compiled` in `text`."""
    if hasattr(compiled, "finditer"):
        return [m.span() for m in compiled.finditer(text)]
    mod = _patterns_module()
    return list(mod.finditer_spans(compiled, text))


# ---------------------------------------------------------------------------------------------------------------
# JSON field access with precise error messages

_MISSING = object()


class _Ctx:
    def __init__(self, path):
        self.path = str(path)

    def bad(self, where, msg):
        return VocabFormatError(self.path, f"field {where}: {msg}")

    def unsupported(self, what):
        return UnsupportedFeatureError(self.path, what)

    def obj(self, v, where):
        if not isinstance(v, dict):
            raise self.bad(where, f"expected an object, got {type(v).__name__}")
        return v

    def get(self, d, key, where, kind, default=_MISSING):
        w = f"{where}.{key}" if where else key
        if key not in d:
            if default is _MISSING:
                raise self.bad(w, "missing")
            return default
        v = d[key]
        if v is None and default is not _MISSING:
            return default
        if kind is bool:
            ok = isinstance(v, bool)
        elif kind is int:
            ok = isinstance(v, int) and not isinstance(v, bool) and v >= 0
        elif kind is float:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        else:
            ok = isinstance(v, kind)
        if not ok:
            name = {str: "a string", bool: "a boolean", int: "a non-negative integer", float: "a number",
                    list: "a list", dict: "an object"}.get(kind, str(kind))
            raise self.bad(w, f"expected {name}, got {json.dumps(v)[:60]}")
        return v

    def char(self, d, key, where, default=_MISSING):
        v = self.get(d, key, where, str, default)
        if v is default and default is not _MISSING:
            return v
        if len(v) != 1:
            raise self.bad(f"{where}.{key}", f"expected a single character, got {v!r}")
        return v

    def pattern(self, d, where):
        """A {"String": s} or {"Regex": r} pattern -> (is_regex, text)."""
        p = self.obj(self.get(d, "pattern", where, dict), f"{where}.pattern")
        if len(p) != 1 or next(iter(p)) not in ("String", "Regex"):
            raise self.bad(f"{where}.pattern", f"expected {{\"String\": ...}} or {{\"Regex\": ...}}, got "
                                               f"{json.dumps(p)[:80]}")
        k = next(iter(p))
        v = p[k]
        if not isinstance(v, str):
            raise self.bad(f"{where}.pattern.{k}", f"expected a string, got {json.dumps(v)[:60]}")
        return k == "Regex", v


def _type_of(ctx, d, where):
    d = ctx.obj(d, where)
    t = d.get("type")
    if not isinstance(t, str):
        raise ctx.bad(f"{where}.type", "missing or not a string")
    return t


# ---------------------------------------------------------------------------------------------------------------
# Patterns used by Replace / Split: find_matches -> [((start, end), is_match)] covering the string


class _Pattern:
    """A {"String"}/{"Regex"} pattern; the regex is compiled on first use (a natively recognised split pattern
    never needs it)."""

    __slots__ = ("literal", "_source", "_compiled", "_path", "_where")

    def __init__(self, ctx, is_regex, text, where):
        self._path, self._where = ctx.path, where
        self._compiled = None
        if is_regex:
            self.literal = None
            self._source = text
        else:
            self.literal = text
            self._source = None if text else ""

    @property
    def compiled(self):
        if self._compiled is None:
            if self._source == "":
                self._compiled = regex.compile("")
            else:
                self._compiled = _compile(self._path, self._where, self._source)
        return self._compiled

    def check(self):
        """Report an invalid regex at load time (cheaply: the plain `regex` module parses the same syntax)."""
        if self._source:
            try:
                regex.compile(self._source, regex.V1)
            except regex.error:
                _ = self.compiled  # the real compile raises VocabFormatError when the pattern is bad
        return self

    def spans(self, s: str):
        if self.literal:
            lit, n, out, i = self.literal, len(self.literal), [], s.find(self.literal)
            while i >= 0:
                out.append((i, i + n))
                i = s.find(lit, i + n)
            return out
        return _spans(self.compiled, s)

    def find_matches(self, s: str):
        if not s:
            return [((0, 0), False)]
        out, prev = [], 0
        for a, b in self.spans(s):
            if prev != a:
                out.append(((prev, a), False))
            out.append(((a, b), True))
            prev = b
        if prev != len(s):
            out.append(((prev, len(s)), False))
        return out

    def replace(self, s: str, content: str) -> str:
        if self.literal:
            return s.replace(self.literal, content)
        out, prev = [], 0
        for a, b in self.spans(s):
            out.append(s[prev:a])
            out.append(content)
            prev = b
        out.append(s[prev:])
        return "".join(out)


def _char_matches(s: str, pred):
    """find_matches for a char predicate (HF's `impl Pattern for Fn(char) -> bool`)."""
    if not s:
        return [((0, 0), False)]
    out, last = [], 0
    for i, c in enumerate(s):
        if pred(c):
            if last < i:
                out.append(((last, i), False))
            out.append(((i, i + 1), True))
            last = i + 1
    if len(s) > last:
        out.append(((last, len(s)), False))
    return out


def _split_by_behavior(s: str, matches, behavior: str) -> List[Tuple[int, int]]:
    """NormalizedString::split: the kept (start, end) ranges, empty ones included (the caller drops them)."""
    if behavior == "Isolated":
        return [o for o, _ in matches]
    if behavior == "Removed":
        return [o for o, m in matches if not m]
    acc: List[List[int]] = []
    prev = False
    if behavior == "Contiguous":
        for (a, b), m in matches:
            if m == prev and acc:
                acc[-1][1] = b
            else:
                acc.append([a, b])
            prev = m
    elif behavior == "MergedWithPrevious":
        for (a, b), m in matches:
            if m and not prev and acc:
                acc[-1][1] = b
            else:
                acc.append([a, b])
            prev = m
    elif behavior == "MergedWithNext":
        for (a, b), m in reversed(matches):
            if m and not prev and acc:
                acc[-1][0] = a
            else:
                acc.append([a, b])
            prev = m
        acc.reverse()
    else:  # pragma: no cover - validated at load
        raise ValueError(behavior)
    return [(a, b) for a, b in acc]


_BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")


# ---------------------------------------------------------------------------------------------------------------
# Normalizers: each op maps str -> str; `shifts` says whether it can drop leading characters (which moves the
# original offset of the first character, something Metaspace's prepend_scheme "first" looks at)


def _parse_normalizer(ctx, d, where, ops):
    if d is None:
        return
    t = _type_of(ctx, d, where)
    if t == "Sequence":
        lst = ctx.get(d, "normalizers", where, list)
        for i, sub in enumerate(lst):
            _parse_normalizer(ctx, sub, f"{where}.normalizers[{i}]", ops)
    elif t in ("NFC", "NFD", "NFKC", "NFKD"):
        ops.append(("unicode", t))
    elif t == "Lowercase":
        ops.append(("lower", None))
    elif t == "Strip":
        left = ctx.get(d, "strip_left", where, bool)
        right = ctx.get(d, "strip_right", where, bool)
        ops.append(("strip", (left, right)))
    elif t == "Prepend":
        ops.append(("prepend", ctx.get(d, "prepend", where, str)))
    elif t == "Replace":
        is_re, text = ctx.pattern(d, where)
        content = ctx.get(d, "content", where, str)
        ops.append(("replace", (_Pattern(ctx, is_re, text, f"{where}.pattern").check(), content)))
    else:
        raise ctx.unsupported(f"{where}.type={t}")


def _apply_normalizer(ops, s: str):
    """-> (normalized, shifted): shifted is True when leading characters of `s` were removed."""
    shifted = False
    for kind, arg in ops:
        if kind == "unicode":
            s = _unicode_normalize(arg, s)
        elif kind == "prepend":
            if s:
                s = arg + s
        elif kind == "replace":
            pat, content = arg
            if not content and not shifted and s:
                sp = pat.spans(s)
                if sp and sp[0][0] == 0 and sp[0][1] > 0:
                    shifted = True
            s = pat.replace(s, content)
        elif kind == "lower":
            s = _lowercase(s)
        elif kind == "strip":
            left, right = arg
            if left:
                i = 0
                while i < len(s) and s[i] in _WS:
                    i += 1
                if i:
                    shifted = True
                    s = s[i:]
            if right:
                j = len(s)
                while j > 0 and s[j - 1] in _WS:
                    j -= 1
                s = s[:j]
    return s, shifted


# ---------------------------------------------------------------------------------------------------------------
# Pre-tokenizers: a flat list of steps over pieces [(text, first)]; `first` = the piece's original offset is 0


_SPLIT_ONLY = ("split", "digits", "whitespace", "wsplit", "punct", "bert", "delim")



def _metaspace_fields(ctx, d, where):
    """(replacement, prepend_scheme) of a Metaspace pre-tokenizer or decoder, checked as HF checks them."""
    rep = ctx.char(d, "replacement", where)
    aps = ctx.get(d, "add_prefix_space", where, bool, default=None)
    scheme = ctx.get(d, "prepend_scheme", where, str, default="always")
    if scheme not in ("always", "first", "never"):
        raise ctx.bad(f"{where}.prepend_scheme", f"unknown scheme {scheme!r}")
    # HF: prepend_scheme defaults to "always", which then contradicts add_prefix_space=false.
    if aps is False and scheme != "never":
        raise ctx.bad(f"{where}.add_prefix_space", "add_prefix_space does not match declared prepend_scheme")
    return rep, scheme

def _parse_pretok(ctx, d, where, steps):
    if d is None:
        return
    t = _type_of(ctx, d, where)
    if t == "Sequence":
        lst = ctx.get(d, "pretokenizers", where, list)
        for i, sub in enumerate(lst):
            _parse_pretok(ctx, sub, f"{where}.pretokenizers[{i}]", steps)
        return
    if any(s[0] in ("bytelevel", "metaspace") for s in steps) and t in ("ByteLevel", "Metaspace"):
        raise ctx.unsupported(f"{where}.type={t} after a ByteLevel/Metaspace pre-tokenizer")
    if t == "ByteLevel":
        aps = ctx.get(d, "add_prefix_space", where, bool, default=True)
        use_regex = ctx.get(d, "use_regex", where, bool, default=True)
        ctx.get(d, "trim_offsets", where, bool, default=True)
        steps.append(("bytelevel", (aps, use_regex, True)))  # 3rd: map to byte-level chars (fixed at load)
    elif t == "Split":
        is_re, text = ctx.pattern(d, where)
        behavior = ctx.get(d, "behavior", where, str)
        if behavior not in _BEHAVIORS:
            raise ctx.bad(f"{where}.behavior", f"unknown behavior {behavior!r}")
        invert = ctx.get(d, "invert", where, bool)
        source = text if is_re else regex.escape(text)  # the regex HF builds (what the native recogniser sees)
        steps.append(("split", (_Pattern(ctx, is_re, text, f"{where}.pattern").check(), behavior, invert, source)))
    elif t == "Metaspace":
        rep, scheme = _metaspace_fields(ctx, d, where)
        split = ctx.get(d, "split", where, bool, default=True)
        steps.append(("metaspace", (rep, scheme, split)))
    elif t == "Digits":
        steps.append(("digits", ctx.get(d, "individual_digits", where, bool, default=False)))
    elif t == "Whitespace":
        steps.append(("whitespace", None))
    elif t == "WhitespaceSplit":
        steps.append(("wsplit", None))
    elif t == "Punctuation":
        behavior = ctx.get(d, "behavior", where, str, default="Isolated")
        if behavior not in _BEHAVIORS:
            raise ctx.bad(f"{where}.behavior", f"unknown behavior {behavior!r}")
        steps.append(("punct", behavior))
    elif t == "BertPreTokenizer":
        steps.append(("bert", None))
    elif t == "CharDelimiterSplit":
        steps.append(("delim", ctx.char(d, "delimiter", where)))
    else:
        raise ctx.unsupported(f"{where}.type={t}")


_NUMERIC = regex.compile(r"\p{N}")
_PUNCT = regex.compile(r"\p{P}")
# Word characters of the `regex` module (Unicode 17) that are unassigned in Unicode 16, Rust regex's tables.
_NOT_WORD_16 = ("88F C5C CDC 1ACF-1ADD 1AE0-1AEB A7CE-A7CF A7D2 A7D4 A7F1 10940-10959 10EC5-10EC7 10EFA-10EFB "
                "11B60-11B67 11DB0-11DDB 11DE0-11DE9 16EA0-16EB8 16EBB-16ED3 16FF2-16FF6 187F8-187FF 18D09-18D1E "
                "18D80-18DF2 1E6C0-1E6DE 1E6E0-1E6F5 1E6FE-1E6FF 2B73A-2B73F 2CEA2-2CEAD 323B0-33479")
_W16 = ("[[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]--["
        + "".join(regex.escape(chr(int(a, 16))) + ("-" + regex.escape(chr(int(b, 16))) if b else "")
                  for a, _, b in (r.partition("-") for r in _NOT_WORD_16.split())) + "]]")
# The Whitespace pre-tokenizer's `\w+|[^\w\s]+` with Rust regex's Unicode 16 \w.
_WS_WORDS = regex.compile(_W16 + "+|[^\\s" + _W16 + "]+", regex.V1)


# Code points where HF's punctuation test (crate unicode_categories, older Unicode data) disagrees with \p{P} of
# Unicode 16/17: newer punctuation it does not know, and U+166D (Po in its data, So today).  Found by probing
# tokenizers 0.23's Punctuation pre-tokenizer on every code point.
_PUNC_FLIP_RANGES = (
    "61D 9FD A76 C77 C84 166D 1B4E-1B4F 1B7D-1B7F 2E43-2E4F 2E52-2E5D 10D6E 10EAD 10ED0 10F55-10F59 10F86-10F89 "
    "111C9 113D4-113D5 113D7-113D8 1144B-1144F 1145A-1145B 1145D 11660-1166C 116B9 1183B 11944-11946 119E2 "
    "11A3F-11A46 11A9A-11A9C 11A9E-11AA2 11B00-11B09 11BE1 11C41-11C45 11C70-11C71 11EF7-11EF8 11F43-11F4F "
    "11FFF 12FF1-12FF2 16D6D-16D6F 16E97-16E9A 16FE2 1E5FF 1E95E-1E95F"
)


def _ranges_set(spec):
    out = set()
    for r in spec.split():
        a, _, b = r.partition("-")
        a = int(a, 16)
        out.update(chr(c) for c in range(a, (int(b, 16) if b else a) + 1))
    return frozenset(out)


_PUNC_FLIP = _ranges_set(_PUNC_FLIP_RANGES)


def _is_punc(c):
    p = c in _ASCII_PUNCT or _PUNCT.match(c) is not None
    return p != (c in _PUNC_FLIP)


def _is_word_char(c):
    """Rust regex's Unicode \\w (its tables are Unicode 16: unassigned code points are never word chars)."""
    return _WORD_CHAR.match(c) is not None and unicodedata2.category(c) != "Cn"


def _is_ws(c):
    return c in _WS


def _is_num(c):
    return _NUMERIC.match(c) is not None


def _regex_matches(compiled, s, invert=False):
    """find_matches of a compiled regex or a _Pattern, optionally inverted (HF's Invert)."""
    if not s:
        return [((0, 0), False)]
    out, prev = [], 0
    for a, b in (compiled.spans(s) if isinstance(compiled, _Pattern) else _spans(compiled, s)):
        if prev != a:
            out.append(((prev, a), False))
        out.append(((a, b), True))
        prev = b
    if prev != len(s):
        out.append(((prev, len(s)), False))
    if invert:
        out = [(o, not m) for o, m in out]
    return out


def _split_pieces(pieces, fn):
    """Apply a NormalizedString split to every piece; drop empty results."""
    out = []
    for text, first in pieces:
        for a, b in fn(text):
            if b > a:
                out.append((text[a:b], first and a == 0))
    return out


def _run_step(step, pieces):
    kind, arg = step
    if kind == "split":
        pat, behavior, invert, _ = arg
        return _split_pieces(pieces, lambda s: _split_by_behavior(s, _regex_matches(pat, s, invert),
                                                                  behavior))
    if kind == "bytelevel":
        aps, use_regex, do_map = arg
        bl = _bl_map if do_map else (lambda x: x)
        out = []
        for text, first in pieces:
            if aps and not text.startswith(" "):
                text = " " + text
            if use_regex:
                for a, b in _split_by_behavior(text, _regex_matches(_GPT2.compiled, text), "Isolated"):
                    if b > a:
                        out.append((bl(text[a:b]), first and a == 0))
            else:
                out.append((bl(text), first))
        return out
    if kind == "metaspace":
        rep, scheme, split = arg
        out = []
        for text, first in pieces:
            text = text.replace(" ", rep)
            if scheme == "always" or (scheme == "first" and first):
                if not text.startswith(rep):
                    text = rep + text
            if split:
                for a, b in _split_by_behavior(text, _char_matches(text, lambda c: c == rep), "MergedWithNext"):
                    if b > a:
                        out.append((text[a:b], first and a == 0))
            else:
                out.append((text, first))
        return out
    if kind == "digits":
        behavior = "Isolated" if arg else "Contiguous"
        return _split_pieces(pieces, lambda s: _split_by_behavior(s, _char_matches(s, _is_num), behavior))
    if kind == "whitespace":
        return _split_pieces(pieces, lambda s: _split_by_behavior(s, _regex_matches(_WS_WORDS, s, True),
                                                                  "Removed"))
    if kind == "wsplit":
        return _split_pieces(pieces, lambda s: _split_by_behavior(s, _char_matches(s, _is_ws), "Removed"))
    if kind == "punct":
        return _split_pieces(pieces, lambda s: _split_by_behavior(s, _char_matches(s, _is_punc), arg))
    if kind == "bert":
        pieces = _split_pieces(pieces, lambda s: _split_by_behavior(s, _char_matches(s, _is_ws), "Removed"))
        return _split_pieces(pieces, lambda s: _split_by_behavior(s, _char_matches(s, _is_punc), "Isolated"))
    if kind == "delim":
        return _split_pieces(pieces, lambda s: _split_by_behavior(s, _char_matches(s, lambda c: c == arg),
                                                                  "Removed"))
    raise AssertionError(kind)  # pragma: no cover


_GPT2 = _Pattern(_Ctx("(builtin)"), True, GPT2_BYTELEVEL_PATTERN, "ByteLevel regex")  # compiled on first use


# ---------------------------------------------------------------------------------------------------------------
# Post-processors -> (ids before, ids after) the sequence when add_special_tokens


def _parse_post(ctx, d, where):
    """-> list of (prefix_ids, suffix_ids) applied in order (Sequence processors apply each in turn)."""
    if d is None:
        return []
    t = _type_of(ctx, d, where)
    if t == "Sequence":
        out = []
        for i, sub in enumerate(ctx.get(d, "processors", where, list)):
            out += _parse_post(ctx, sub, f"{where}.processors[{i}]")
        return out
    if t == "ByteLevel":
        return []
    if t in ("BertProcessing", "RobertaProcessing"):
        def pair(key):
            v = ctx.get(d, key, where, list)
            if len(v) != 2 or not isinstance(v[0], str) or not isinstance(v[1], int) or isinstance(v[1], bool):
                raise ctx.bad(f"{where}.{key}", f"expected [token, id], got {json.dumps(v)[:60]}")
            return v[1]
        return [([pair("cls")], [pair("sep")])]
    if t == "TemplateProcessing":
        single = ctx.get(d, "single", where, list)
        specials = ctx.obj(ctx.get(d, "special_tokens", where, dict), f"{where}.special_tokens")
        spec_ids = {}
        for name, v in specials.items():
            w = f"{where}.special_tokens[{name!r}]"
            v = ctx.obj(v, w)
            ids = ctx.get(v, "ids", w, list)
            if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in ids):
                raise ctx.bad(f"{w}.ids", "expected a list of non-negative integers")
            spec_ids[name] = list(ids)
        before, after, seen = [], [], False
        for i, piece in enumerate(single):
            w = f"{where}.single[{i}]"
            piece = ctx.obj(piece, w)
            if len(piece) != 1:
                raise ctx.bad(w, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}")
            (k, v), = piece.items()
            v = ctx.obj(v, f"{w}.{k}")
            if k == "Sequence":
                sid = ctx.get(v, "id", f"{w}.{k}", str)
                if sid != "A":
                    raise ctx.unsupported(f"{w}: template sequence {sid!r} in a single-sequence template")
                if seen:
                    raise ctx.unsupported(f"{w}: sequence A repeated in the template")
                seen = True
            elif k == "SpecialToken":
                name = ctx.get(v, "id", f"{w}.{k}", str)
                if name not in spec_ids:
                    raise ctx.bad(f"{w}.{k}.id", f"special token {name!r} missing from special_tokens")
                (after if seen else before).extend(spec_ids[name])
            else:
                raise ctx.bad(w, f"unknown template piece {k!r}")
        if not seen:
            raise ctx.unsupported(f"{where}.single without sequence A")
        return [(before, after)]
    raise ctx.unsupported(f"{where}.type={t}")


# ---------------------------------------------------------------------------------------------------------------
# Decoders: list[str] -> list[str]


def _parse_decoder(ctx, d, where, steps):
    if d is None:
        return
    t = _type_of(ctx, d, where)
    if t == "Sequence":
        for i, sub in enumerate(ctx.get(d, "decoders", where, list)):
            _parse_decoder(ctx, sub, f"{where}.decoders[{i}]", steps)
    elif t == "ByteLevel":
        steps.append(("bytelevel", None))
    elif t == "ByteFallback":
        steps.append(("bytefallback", None))
    elif t == "Fuse":
        steps.append(("fuse", None))
    elif t == "Replace":
        is_re, text = ctx.pattern(d, where)
        pat = _Pattern(ctx, is_re, text, f"{where}.pattern").check()
        steps.append(("replace", (pat, ctx.get(d, "content", where, str))))
    elif t == "Strip":
        steps.append(("strip", (ctx.char(d, "content", where), ctx.get(d, "start", where, int),
                                ctx.get(d, "stop", where, int))))
    elif t == "Metaspace":
        steps.append(("metaspace", _metaspace_fields(ctx, d, where)))
    elif t == "WordPiece":
        steps.append(("wordpiece", (ctx.get(d, "prefix", where, str, default="##"),
                                    ctx.get(d, "cleanup", where, bool, default=True))))
    elif t == "BPEDecoder":
        steps.append(("bpe", ctx.get(d, "suffix", where, str, default="</w>")))
    else:
        raise ctx.unsupported(f"{where}.type={t}")


_BYTE_TOKEN = re.compile(r"<0x(\+?[0-9A-Fa-f]{1,2})>")


def _flush_bytes(buf, out):
    try:
        out.append(bytes(buf).decode("utf-8"))
    except UnicodeDecodeError:
        out.extend("\ufffd" for _ in buf)
    buf.clear()


def _wordpiece_cleanup(s):
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                 (" 'm", "'m"), (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        s = s.replace(a, b)
    return s


def _decode_step(step, tokens: List[str]) -> List[str]:
    kind, arg = step
    if kind == "identity":
        return tokens
    if kind == "bytelevel":
        parts = []
        for t in tokens:
            b = _bl_unmap(t)
            parts.append(b if b is not None else t.encode("utf-8"))
        return [b"".join(parts).decode("utf-8", "replace")]
    if kind == "bytefallback":
        out, buf = [], bytearray()
        for t in tokens:
            m = _BYTE_TOKEN.fullmatch(t) if len(t) <= 6 else None
            if m is not None and len(t.encode("utf-8")) == 6:
                buf.append(int(m.group(1), 16))
                continue
            if buf:
                _flush_bytes(buf, out)
            out.append(t)
        if buf:
            _flush_bytes(buf, out)
        return out
    if kind == "fuse":
        return ["".join(tokens)]
    if kind == "replace":
        pat, content = arg
        return [pat.replace(t, content) for t in tokens]
    if kind == "strip":
        ch, start, stop = arg
        out = []
        for t in tokens:
            n = len(t)
            a = 0
            for i in range(min(start, n)):
                if t[i] == ch:
                    a = i + 1
                else:
                    break
            b = n
            for i in range(stop):
                k = n - i - 1
                if k < 0:
                    break
                if t[k] == ch:
                    b = k
                else:
                    break
            out.append(t[a:b] if b >= a else "")
        return out
    if kind == "metaspace":
        rep, scheme = arg
        out = []
        for i, t in enumerate(tokens):
            if i == 0 and scheme != "never":
                out.append(t.replace(rep, ""))
            else:
                out.append(t.replace(rep, " "))
        return out
    if kind == "wordpiece":
        prefix, cleanup = arg
        out = []
        for i, t in enumerate(tokens):
            if i != 0:
                t = t[len(prefix):] if t.startswith(prefix) else " " + t
            if cleanup:
                t = _wordpiece_cleanup(t)
            out.append(t)
        return out
    if kind == "bpe":
        n = len(tokens) - 1
        return [t.replace(arg, "" if i == n else " ") for i, t in enumerate(tokens)]
    raise AssertionError(kind)  # pragma: no cover


# ---------------------------------------------------------------------------------------------------------------
# Added tokens: HF's AddedVocabulary


class _AddedToken:
    __slots__ = ("content", "single_word", "lstrip", "rstrip", "normalized", "special")

    def __init__(self, content, single_word, lstrip, rstrip, normalized, special):
        self.content = content
        self.single_word = single_word
        self.lstrip = lstrip
        self.rstrip = rstrip
        self.normalized = normalized
        self.special = special

    def key(self):
        return (self.content, self.single_word, self.lstrip, self.rstrip, self.normalized, self.special)


def _trie_regex(strings):
    """A regex that finds the leftmost-longest occurrence of any of `strings` (a trie, longer paths first)."""
    END = ""
    trie: dict = {}
    for s in strings:
        node = trie
        for ch in s:
            node = node.setdefault(ch, {})
        node[END] = True

    def emit(node):
        alts = [re.escape(ch) + emit(sub) for ch, sub in sorted((k, v) for k, v in node.items() if k != END)]
        terminal = END in node
        if not alts:
            return ""
        if len(alts) == 1 and not terminal:
            return alts[0]
        return "(?:" + "|".join(alts) + ("|" if terminal else "") + ")"

    try:
        return re.compile(emit(trie), re.DOTALL)
    except (RecursionError, re.error, OverflowError):
        # A trie deeper than the recursion limit (a token of thousands of characters): the plain alternation,
        # longest first, finds the same leftmost-longest matches.
        return re.compile("|".join(re.escape(s) for s in sorted(strings, key=lambda s: (-len(s), s))), re.DOTALL)


class _Matcher:
    """Leftmost-longest, non-overlapping occurrences of the added tokens' strings (HF's AhoCorasick with
    LeftmostLongest).  Short strings go through one trie regex; strings longer than LONG_LITERAL characters
    are found with str.find, whose cost is linear: the regex engine would compare a long string at every
    position where its prefix occurs, which is quadratic on text made of that prefix."""

    LONG_LITERAL = 256

    def __init__(self, pairs):
        self.ids = {}
        for s, tid in pairs:
            self.ids[s] = tid
        short = [s for s in self.ids if len(s) <= self.LONG_LITERAL]
        self.long = sorted((s for s in self.ids if len(s) > self.LONG_LITERAL), key=lambda s: (-len(s), s))
        self.re = _trie_regex(short) if short else None

    def finditer(self, text):
        """(start, end, matched string) in order."""
        if not self.long:
            if self.re is not None:
                for m in self.re.finditer(text):
                    yield m.start(), m.end(), m.group()
            return
        nxt = {}                                  # long string -> its next occurrence at or after pos, or -1
        pos, n = 0, len(text)
        while pos <= n:
            m = self.re.search(text, pos) if self.re is not None else None
            best = (m.start(), -(m.end() - m.start()), m.group()) if m else None
            for lit in self.long:
                at = nxt.get(lit, -2)
                if at != -1 and at < pos:
                    at = text.find(lit, pos)
                    nxt[lit] = at
                if at >= 0 and (best is None or (at, -len(lit)) < best[:2]):
                    best = (at, -len(lit), lit)
            if best is None:
                return
            start, neg_len, lit = best
            end = start - neg_len
            yield start, end, lit
            pos = end if end > start else end + 1


# ---------------------------------------------------------------------------------------------------------------


class _SpecialBytes(bytes):
    """Bytes of a special token (skipped by decode(skip_special_tokens=True))."""


def _hides(specials, others) -> bool:
    """Whether, in some text, a match of one of `specials` ((text, normalized) pairs) takes a place that one of
    `others` would otherwise be found at in the same pass: the other starting inside the special's text (the
    special is found first, leftmost), or at its start and no longer (leftmost-longest takes the special)."""
    by_first: Dict[Tuple[str, bool], List[str]] = {}
    for text, normalized in others:
        if text:
            by_first.setdefault((text[0], normalized), []).append(text)
    for s, normalized in specials:
        for k in range(len(s)):
            for o in by_first.get((s[k], normalized), ()):
                rest = s[k:]
                if k == 0 and len(o) > len(s):
                    continue                # the other is longer at the same place: HF finds it, not the special
                if rest.startswith(o) or o.startswith(rest):
                    return True
    return False


class HFPipeline:
    """HF's encode and decode for one tokenizer.json (see module docstring)."""

    def __init__(self, *, path, core, vocab, vocab_r, added_r, added_map, special_set, normalized_cache,
                 norm_ops, pretok_steps, post, dec_steps, fast_kind, fast_prefix_space, whole_metaspace,
                 char_level, mapped_pieces_final, py_bpe=None):
        self.path = path
        self.core = core
        self._encoder = py_bpe if py_bpe is not None else core
        self._vocab = vocab
        self._vocab_r = vocab_r
        self._added_r = added_r
        self._added_map = added_map
        self._special_set = special_set
        self._normalized_cache = normalized_cache
        self._norm_ops = norm_ops
        self._pretok_steps = pretok_steps
        self._post = post
        self._dec_steps = dec_steps
        self._fast_kind = fast_kind
        self._fast_prefix_space = fast_prefix_space
        self._whole_metaspace = whole_metaspace
        self._marker_words = False
        # The Encoding's prefix cache (ctok._prefix.PrefixCache), or None: segments of text holding special or
        # added tokens (chat templates) go through it when they are encoded by the core alone.
        self.segment_cache = None
        self._marker_prepend = None         # the core's encode_marked rule when it serves ordinary text
        self._char_level = char_level
        self._mapped_final = mapped_pieces_final
        raw = [(t.content, i) for i, t in added_r.items() if not t.normalized]
        norm = [(normalized_cache.get(i, t.content), i) for i, t in added_r.items() if t.normalized]
        self._raw_matcher = _Matcher(raw) if raw else None
        self._norm_matcher = _Matcher(norm) if norm else None
        self.added_tokens: Dict[str, int] = dict(added_map)
        self.special_tokens: Dict[str, int] = {c: added_map[c] for c in added_map if c in special_set}
        ids = list(vocab_r) + list(added_r)
        self.n_vocab = (max(ids) + 1) if ids else 0
        if py_bpe is not None:
            self.pretokenizer = "hf+python-bpe"
        elif fast_kind is not None:
            mod = _patterns_module()
            names = getattr(mod, "KIND_NAMES", {}) if mod is not None else {}
            self.pretokenizer = f"hf+{names.get(fast_kind, fast_kind)}"
        elif whole_metaspace is not None or not pretok_steps:
            self.pretokenizer = "hf+whole"
        else:
            self.pretokenizer = "hf+python"
        self._bytelevel_only = dec_steps == [("bytelevel", None)]
        self._id_bytes: Dict[int, bytes] = {}
        # SentencePiece-style chains: per-token Replace steps, ByteFallback, Fuse, then steps on the one string.
        k = 0
        while k < len(dec_steps) and dec_steps[k][0] == "replace":
            k += 1
        if k + 1 < len(dec_steps) and dec_steps[k][0] == "bytefallback" and dec_steps[k + 1][0] == "fuse":
            self._fused_chain = (dec_steps[:k], dec_steps[k + 2:])
        else:
            self._fused_chain = None
        self._id_piece: Dict[int, tuple] = {}

    # ---- lookups ----
    def id_to_token(self, i: int) -> Optional[str]:
        """HF's Tokenizer.id_to_token: an added token's (normalized, if it is matched normalized) form, else the
        model's token string (byte-level strings for ByteLevel vocabularies)."""
        return self._token_str(i)

    def token_to_id(self, s: str) -> Optional[int]:
        if s in self._added_map:
            return self._added_map[s]
        return self._vocab.get(s)

    # ---- encode ----
    def _find_added(self, s: str, matcher: _Matcher, recognised):
        """AddedVocabulary::find_matches -> [(start, end, id or None)] (ranges may overlap after rstrip).
        `recognised`: None (every special token recognised) or the names of those that are; the others' text
        stays text.  As HF's encode_special_tokens does, a skipped token's match still takes its place in the
        leftmost-longest scan; it is dropped afterwards."""
        out = []
        start_offset = 0
        added_r = self._added_r
        special = self._special_set
        n = len(s)
        for start, stop, matched in matcher.finditer(s):
            tid = matcher.ids[matched]
            tok = added_r[tid]
            if recognised is not None and tok.content in special and tok.content not in recognised:
                continue
            if tok.single_word:
                if start > 0 and _is_word_char(s[start - 1]):
                    continue
                if stop < n and _is_word_char(s[stop]):
                    continue
            if tok.lstrip:
                ns = start
                while ns > 0 and s[ns - 1] in _WS:
                    ns -= 1
                start = max(ns, start_offset)
            if tok.rstrip:
                while stop < n and s[stop] in _WS:
                    stop += 1
            if start_offset < start:
                out.append((start_offset, start, None))
            out.append((start, stop, tid))
            start_offset = stop
        if start_offset != n:
            out.append((start_offset, n, None))
        return out

    def _segments(self, text: str, recognised):
        """-> list of (normalized text, first) or int (an added token id), in order.  recognised: as _find_added."""
        if self._raw_matcher is not None and text:
            step1 = []
            for a, b, tid in self._find_added(text, self._raw_matcher, recognised):
                if tid is not None:
                    step1.append(tid)
                elif b > a:
                    step1.append((text[a:b], a == 0))
        else:
            step1 = [(text, True)] if text else []
        out = []
        ops = self._norm_ops
        nm = self._norm_matcher
        for seg in step1:
            if isinstance(seg, int):
                out.append(seg)
                continue
            s, first = seg
            if ops:
                s, shifted = _apply_normalizer(ops, s)
                if shifted:
                    first = False
            if not s:
                continue
            if nm is None:
                out.append((s, first))
                continue
            for a, b, tid in self._find_added(s, nm, recognised):
                if b <= a:
                    # HF drops empty splits, token or not (a token whose normalized form is empty matches the
                    # empty string everywhere: it splits the text but yields no id)
                    continue
                if tid is not None:
                    out.append(tid)
                else:
                    out.append((s[a:b], first and a == 0))
        return out

    def _pretokenize(self, s: str, first: bool) -> List[bytes]:
        pieces = [(s, first)]
        for step in self._pretok_steps:
            pieces = _run_step(step, pieces)
            if not pieces:
                return []
        if self._mapped_final:
            out = []
            for p, _ in pieces:
                b = _bl_unmap(p)
                if b is None:  # pragma: no cover - excluded at load
                    raise ValueError(f"piece {p!r} is not byte-level")
                out.append(b)
            return out
        return [p.encode("utf-8") for p, _ in pieces]

    def _encode_segment(self, s: str, first: bool, out: List[int]):
        core = self._encoder
        if self._fast_kind is not None:
            if self._fast_prefix_space and not s.startswith(" "):
                s = " " + s
            out += self._encode_bytes(core, s.encode("utf-8"))
            return
        wm = self._whole_metaspace
        if wm is not None:
            rep, scheme = wm
            s = s.replace(" ", rep)
            if (scheme == "always" or (scheme == "first" and first)) and not s.startswith(rep):
                s = rep + s
        if wm is not None or not self._pretok_steps:
            if self._marker_words:
                out += self._encode_bytes(core, s.encode("utf-8"))     # split at marker runs, natively
            else:
                out += core.encode_pieces([s.encode("utf-8")])
            return
        pieces = self._pretokenize(s, first)
        if pieces:
            out += core.encode_pieces(pieces)

    def _encode_bytes(self, core, data: bytes) -> List[int]:
        # core.encode_ordinary(data), through the prefix cache when it is on (PrefixCache.encode keeps that
        # contract): a chat's segments repeat from request to request.
        cache = self.segment_cache
        if cache is not None and len(data) >= cache.min_bytes:
            return cache.encode(core, data)
        return core.encode_ordinary(data)

    def encode(self, text: str, *, recognise_special, add_special_tokens: bool = False) -> List[int]:
        """recognise_special=True: `hf.encode(text, add_special_tokens=...).ids`;
        False: the same with `hf.encode_special_tokens = True` (special added tokens are encoded as text;
        non-special added tokens are still recognised, as in HF); a set of special tokens' names: those are
        recognised and the others encoded as text, each skipped as encode_special_tokens skips them all."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as e:
                raise InvalidTextError(
                    f"text holds a lone surrogate {text[e.start]!r} at index {e.start}; it is not valid Unicode "
                    "text (HF tokenizers refuses it too, with TypeError)") from None
        out: List[int] = []
        recognised = (None if recognise_special is True else () if recognise_special is False
                      else recognise_special)
        for seg in self._segments(text, recognised):
            if isinstance(seg, int):
                out.append(seg)
            else:
                self._encode_segment(seg[0], seg[1], out)
        if add_special_tokens:
            out = self.post_process(out)
        return out

    def native_route(self):
        """(tokens, forms, split, marked) when text holding none of the strings `tokens` (added tokens' texts,
        raw and normalized) and left as it is by the Unicode normal forms `forms` (the normalizer, applied in
        order) is encoded by the compiled encoder alone, exactly: by `core.encode_str`, once it splits at the
        added tokens `split` ((bytes, id) pairs, `core.set_added_split`), or when `marked` by
        `core.encode_marked` (SentencePiece-style files whose normalizer / Metaspace only replaces spaces
        with the marker and puts one in front, by the rule the core was made with: see _marker_prepend_rule).
        None when some stage runs in Python (another normalizer, a Python pre-tokenizer or BPE, a prefix
        space to add) or an added token is empty.

        `split` holds the non-special added tokens (GPT-NeoX's runs of spaces, Qwen's <think>) when the compiled
        split finds them as HF does (see _split_plan): (bytes, id, normalized) entries for core.set_added_split.
        Special tokens stay in `tokens` (ordinary text holding one goes the Python way, which encodes it as
        text); when the non-special ones cannot all be split, or the route is `marked` (whose prepend rule looks
        at sections), they stay in `tokens` too and `split` is empty."""
        if self._encoder is not self.core:
            return None
        marked = self._marker_prepend is not None
        if not marked:
            if self._fast_kind is None or self._fast_prefix_space:
                return None
            if any(kind != "unicode" for kind, _ in self._norm_ops):
                return None
        added = self._added_r.items()
        norm = self._normalized_cache

        def texts(pairs):                       # each token's text, raw and normalized
            return {t.content for _, t in pairs} | {norm.get(i, t.content) for i, t in pairs}

        contents = texts(added)
        if any(not c for c in contents):
            return None
        if marked:
            return contents, (), [], True
        forms = tuple(arg for _, arg in self._norm_ops)
        plain = [(i, t) for i, t in added if t.content not in self._special_set]
        plan = self._split_plan(plain)
        if plan:
            return (texts([(i, t) for i, t in added if t.content in self._special_set]), forms, plan, False)
        return contents, forms, [], False

    def ordinary_tokens(self, route):
        """The strings that send a text to the Python pipeline when it is encoded with every special token as text
        (encode_ordinary, encode_special_tokens in HF), for native_route()'s result `route`: its tokens without
        the special tokens' texts, when that changes no text's ids, else its tokens.

        HF still finds a special token in its leftmost-longest scan and then drops the match, so the special's text
        stays inside the text around it.  Where the core splits at the non-special tokens (route[2]), that is the
        same split unless a special's match can hide one of them: the non-special token starting inside the
        special's text, found in the same pass (raw or normalized), or at the same place and no longer
        (_hides).  Where it does not split (no plan, or marked files), every non-special token's text sends the
        text the Python way anyway, so the specials' texts can go."""
        tokens, split = route[0], route[2]
        norm = self._normalized_cache

        def as_found(pairs):                    # (text matched, normalized pass) of each token
            return [(norm.get(i, t.content) if t.normalized else t.content, bool(t.normalized)) for i, t in pairs]
        specials = [(i, t) for i, t in self._added_r.items() if t.content in self._special_set]
        others = [(i, t) for i, t in self._added_r.items() if t.content not in self._special_set]
        if split and _hides(as_found(specials), as_found(others)):
            return tokens
        keep = {t.content for _, t in others} | {norm.get(i, t.content) for i, t in others}
        return [x for x in tokens if x in keep]

    def native_route_specials(self):
        """(entries, first_only) for core.set_added_split(entries, specials=True) when every special token is allowed
        (a chat template's output, `encode(text, allowed_special="all")`): all the added tokens, special or not,
        when native_route exists and the compiled split finds them all as HF does (see _split_plan); else None.
        A SentencePiece-style file (native_route `marked`, whose added tokens are all matched raw:
        _marker_prepend_rule) has each text between two normalized (Prepend: a marker in front of any non-empty
        one) or pre-tokenized (Metaspace: in front unless it starts with one; with prepend_scheme "first", only for
        the text at offset 0: first_only) as a split of its own: core.encode_marked_split."""
        route = self.native_route()
        plan = self._split_plan(list(self._added_r.items())) if route is not None else None
        if not plan:
            return None
        if not route[3]:
            return plan, False
        if any(normalized for _, _, normalized in plan):
            return None
        wm = self._whole_metaspace
        return plan, wm is not None and wm[1] == "first"

    def _split_plan(self, pairs):
        """The added tokens `pairs` ((id, token)) as core.set_added_split entries ((bytes, id, normalized)) when
        the compiled split finds them as HF does, else None.  HF's added vocabulary finds the tokens with
        normalized false on the raw text first, leftmost-longest, then those with normalized true in each text
        between two of those, after normalizing it (AddedVocabulary.extract_and_normalize): the split makes the
        same two passes, on text the normal forms leave as it is.  Each token must be non-empty, with no
        single_word/lstrip/rstrip (not done natively), its own normalized form (the second pass looks for the
        token as given), and valid UTF-8; where a Unicode normal form runs, its first and last characters must be
        ASCII: cutting beside an ASCII character changes no normal form of the texts on either side, which
        then stay as they are (DeepSeek-V3's <｜User｜> needs the identity normalizer it has)."""
        if not pairs:
            return None
        norm = self._normalized_cache
        forms = bool(self._norm_ops)
        plan = []
        for i, t in pairs:
            c = t.content
            if not c or t.single_word or t.lstrip or t.rstrip or norm.get(i, c) != c:
                return None
            if forms and not (c[0].isascii() and c[-1].isascii()):
                return None
            try:
                plan.append((c.encode("utf-8"), i, bool(t.normalized)))
            except UnicodeEncodeError:
                return None
        return plan

    def encode_without_added_tokens(self, text: str) -> List[int]:
        """Normalizer, pre-tokenizer and model only: no added token is matched, special or not (what
        transformers' `_encode_without_added_tokens` runs on user text in `sanitize_control_tokens` mode)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as e:
                raise InvalidTextError(f"text holds a lone surrogate {text[e.start]!r} at index {e.start}") from None
        if self._norm_ops:
            text, _ = _apply_normalizer(self._norm_ops, text)
        out: List[int] = []
        if text:
            # The whole normalized string is one pre-tokenizer input, so it counts as the first split.
            self._encode_segment(text, True, out)
        return out

    def post_process(self, ids: List[int]) -> List[int]:
        """The post-processor's special tokens around an encoded sequence (add_special_tokens=True)."""
        ids = list(ids)
        for before, after in self._post:
            ids = before + ids + after
        return ids

    # ---- decode ----
    def _token_str(self, i):
        t = self._added_r.get(i)
        if t is not None:
            return self._normalized_cache.get(i, t.content)
        return self._vocab_r.get(i)

    def bytelevel_token_bytes(self, i) -> bytes:
        """What the ByteLevel decoder makes of id i: its bytes (its UTF-8 when it is not byte-level), a
        _SpecialBytes for a special token, b"" for an unknown id (HF skips those)."""
        t = self._token_str(int(i))
        if t is None:
            return b""
        u = _bl_unmap(t)
        b = u if u is not None else t.encode("utf-8")
        return _SpecialBytes(b) if t in self._special_set else b

    def _decode_bytelevel(self, ids, skip_special_tokens):
        """The ByteLevel decoder alone: each token's bytes, joined, then decoded with replacement, exactly as
        HF; token bytes are cached per id."""
        cache = self._id_bytes
        parts = []
        for i in ids:
            b = cache.get(i)
            if b is None:
                b = self.bytelevel_token_bytes(i)
                if len(cache) < 1_000_000:
                    cache[i] = b
            if skip_special_tokens and type(b) is _SpecialBytes:
                continue
            parts.append(b)
        return b"".join(parts).decode("utf-8", "replace")

    def fused_piece(self, i):
        """(piece, is_special) of id i for a fused chain: the byte value of a <0xXX> token after the Replace
        steps, else the token's text after them; piece None for an unknown id (HF skips it).  Cached."""
        t = self._token_str(int(i))
        if t is None:
            v = (None, False)
        else:
            is_special = t in self._special_set
            for step in self._fused_chain[0]:
                t = _decode_step(step, [t])[0]
            m = _BYTE_TOKEN.fullmatch(t) if len(t) <= 6 else None
            if m is not None and len(t.encode("utf-8")) == 6:
                v = (int(m.group(1), 16), is_special)
            else:
                v = (t, is_special)
        if len(self._id_piece) < 1_000_000:
            self._id_piece[i] = v
        return v

    def fused_stream_piece(self, i):
        """fused_piece(i) as _stream.FusedWindowDecoder keeps it: None (unknown id), an int (a byte value, plus
        256 when the token is special), or the text's UTF-8 (a _SpecialBytes when special)."""
        piece, is_special = self.fused_piece(i)
        if piece is None:
            return None
        if type(piece) is int:
            return piece + 256 if is_special else piece
        b = piece.encode("utf-8", "surrogatepass")
        return _SpecialBytes(b) if is_special else b

    def fused_stream_strips(self):
        """The steps after Fuse as [(character's UTF-8, start, stop)] when they are all Strip steps (what
        FusedWindowDecoder runs natively), else None."""
        if self._fused_chain is None or any(kind != "strip" for kind, _ in self._fused_chain[1]):
            return None
        return [(ch.encode("utf-8", "surrogatepass"), start, stop) for _, (ch, start, stop) in self._fused_chain[1]]

    def _decode_fused(self, ids, skip_special_tokens):
        """Replace* + ByteFallback + Fuse + rest: per-token work cached per id, byte runs joined, then the rest
        of the chain on the fused string (the same result as running the chain token by token)."""
        post = self._fused_chain[1]
        cache = self._id_piece
        parts: List[str] = []
        buf = bytearray()
        for i in ids:
            v = cache.get(i)
            if v is None:
                v = self.fused_piece(i)
            piece, is_special = v
            if piece is None or (skip_special_tokens and is_special):
                continue
            if type(piece) is int:
                buf.append(piece)
                continue
            if buf:
                _flush_bytes(buf, parts)
            parts.append(piece)
        if buf:
            _flush_bytes(buf, parts)
        tokens = ["".join(parts)]
        for step in post:
            tokens = _decode_step(step, tokens)
        return "".join(tokens)

    def decode(self, ids, *, skip_special_tokens: bool = False) -> str:
        """HF's Tokenizer.decode(ids, skip_special_tokens=...): unknown ids are skipped, as HF does."""
        if self._bytelevel_only:
            return self._decode_bytelevel(ids, skip_special_tokens)
        if self._fused_chain is not None:
            return self._decode_fused(ids, skip_special_tokens)
        special = self._special_set
        tokens = []
        for i in ids:
            t = self._token_str(int(i))
            if t is None or (skip_special_tokens and t in special):
                continue
            tokens.append(t)
        if not self._dec_steps:
            return " ".join(tokens)
        for step in self._dec_steps:
            tokens = _decode_step(step, tokens)
        return "".join(tokens)


# ---------------------------------------------------------------------------------------------------------------
# Loading


def _parse_model(ctx, m):
    m = ctx.obj(m, "model")
    t = m.get("type")
    if t is not None and t != "BPE":
        raise ctx.unsupported(f"model.type={t}")
    if t is None and not ("vocab" in m and "merges" in m):
        raise ctx.unsupported("model without type (not a BPE model: no vocab/merges)")
    dropout = m.get("dropout")
    if dropout is not None:
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool):
            raise ctx.bad("model.dropout", f"expected a number or null, got {json.dumps(dropout)[:40]}")
        if not 0.0 <= dropout <= 1.0:
            raise ctx.bad("model.dropout", f"dropout {dropout} outside [0, 1]")
        if dropout != 0:
            raise ctx.unsupported(f"model.dropout={dropout} (BPE dropout is random)")
    unk = ctx.get(m, "unk_token", "model", str, default=None)
    prefix = ctx.get(m, "continuing_subword_prefix", "model", str, default=None) or ""
    suffix = ctx.get(m, "end_of_word_suffix", "model", str, default=None) or ""
    fuse_unk = ctx.get(m, "fuse_unk", "model", bool, default=False)
    byte_fallback = ctx.get(m, "byte_fallback", "model", bool, default=False)
    ignore_merges = ctx.get(m, "ignore_merges", "model", bool, default=False)
    vocab = ctx.get(m, "vocab", "model", dict)
    vals = vocab.values()
    if not (all(type(v) is int for v in vals) and (not vocab or (min(vals) >= 0 and max(vals) <= 0xFFFFFFFF))):
        for k, v in vocab.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v > 0xFFFFFFFF:
                raise ctx.bad(f"model.vocab[{k!r}]", f"expected a non-negative integer id, got {json.dumps(v)[:40]}")
    merges_raw = ctx.get(m, "merges", "model", list)
    merges = []
    if merges_raw:
        legacy = isinstance(merges_raw[0], str)
        try:
            if legacy:
                lines = [e for e in merges_raw if not e.startswith("#version")]
                big = "\n".join(lines)
                if big.count(" ") != len(lines) or big.count("\n") != len(lines) - 1:
                    raise ValueError  # a token holds a space or a newline: let the slow path judge
                parts = big.replace(" ", "\n").split("\n")
                left, right = parts[0::2], parts[1::2]
            else:
                if not all(type(e) is list and len(e) == 2 for e in merges_raw):
                    raise ValueError
                left = [e[0] for e in merges_raw]
                right = [e[1] for e in merges_raw]
                if not (all(type(x) is str for x in left) and all(type(x) is str for x in right)):
                    raise ValueError
            get = vocab.get
            li = list(map(get, left))
            ri = list(map(get, right))
            if prefix:
                mi = [get(a + _strip_prefix(b, prefix)) for a, b in zip(left, right)]
            else:
                mi = list(map(get, map(operator.add, left, right)))
            if None in li or None in ri or None in mi:
                raise ValueError
            merges = list(zip(li, ri))
            merged = mi
        except (ValueError, KeyError, TypeError, AttributeError):
            merges = None
        if merges is None:
            _merge_error(ctx, vocab, merges_raw, legacy, prefix)
    else:
        merged = []
    if unk is not None and unk not in vocab:
        unk_id = -1  # HF fails only when an unknown character actually needs it
    else:
        unk_id = vocab[unk] if unk is not None else -1
    return dict(vocab=vocab, merges=merges, merged=merged, unk_id=unk_id, fuse_unk=fuse_unk,
                byte_fallback=byte_fallback, ignore_merges=ignore_merges, prefix=prefix, suffix=suffix)


def _strip_prefix(b: str, prefix: str) -> str:
    """HF strips len(prefix) bytes from the right part of a merge, whatever they are."""
    if b.startswith(prefix):
        return b[len(prefix):]
    n = len(prefix.encode("utf-8"))
    raw = b.encode("utf-8")
    if len(raw) < n:
        raise ValueError("merge part shorter than continuing_subword_prefix")
    return raw[n:].decode("utf-8")  # a split character raises UnicodeDecodeError (a ValueError)


def _merge_error(ctx, vocab, merges_raw, legacy, prefix=""):
    """Find and report the first bad entry of model.merges (the fast path above only knows one exists)."""
    for i, e in enumerate(merges_raw):
        if legacy:
            if not isinstance(e, str):
                raise ctx.bad(f"model.merges[{i}]", f"expected a string \"a b\" like the others, got "
                                                    f"{json.dumps(e)[:60]}")
            if e.startswith("#version"):
                continue
            parts = e.split(" ")
            if len(parts) != 2:
                raise ctx.bad(f"model.merges[{i}]", f"expected two tokens separated by one space, got {e!r}")
            a, b = parts
        else:
            if not (isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and isinstance(e[1], str)):
                raise ctx.bad(f"model.merges[{i}]", f"expected [\"a\", \"b\"], got {json.dumps(e)[:60]}")
            a, b = e
        if a not in vocab:
            raise ctx.bad(f"model.merges[{i}]", f"token {a!r} is not in model.vocab")
        if b not in vocab:
            raise ctx.bad(f"model.merges[{i}]", f"token {b!r} is not in model.vocab")
        try:
            ab = a + (_strip_prefix(b, prefix) if prefix else b)
        except ValueError:
            raise ctx.bad(f"model.merges[{i}]", f"token {b!r} does not hold the continuing_subword_prefix "
                                                f"{prefix!r}") from None
        if ab not in vocab:
            raise ctx.bad(f"model.merges[{i}]", f"merged token {ab!r} is not in model.vocab")
    raise ctx.bad("model.merges", "invalid entry")  # pragma: no cover


def _parse_added(ctx, lst):
    out = []
    for i, d in enumerate(lst):
        w = f"added_tokens[{i}]"
        d = ctx.obj(d, w)
        ctx.get(d, "id", w, int)
        content = ctx.get(d, "content", w, str)
        flags = [ctx.get(d, k, w, bool, default=False) for k in ("single_word", "lstrip", "rstrip")]
        special = ctx.get(d, "special", w, bool, default=False)
        normalized = ctx.get(d, "normalized", w, bool, default=not special)
        out.append(_AddedToken(content, flags[0], flags[1], flags[2], normalized, special))
    return out


class _PyBPE:
    """HF's BPE in Python, for models with a continuing_subword_prefix or an end_of_word_suffix (the native
    core's initial symbols are plain bytes or characters).  Pieces are given as raw bytes, like the core's."""

    def __init__(self, vocab, merges, merged, *, prefix, suffix, byte_level, byte_fallback, unk_id, fuse_unk,
                 ignore_merges):
        self.vocab = vocab
        self.merges = {}
        for r, (pair, new) in enumerate(zip(merges, merged)):
            self.merges[pair] = (r, new)  # a repeated pair keeps its last rank, as HF's map does
        self.prefix, self.suffix = prefix, suffix
        self.byte_level = byte_level
        self.byte_fallback = byte_fallback
        self.unk_id = unk_id
        self.fuse_unk = fuse_unk
        self.ignore_merges = ignore_merges
        self.fallback = [vocab.get(f"<0x{b:02X}>") for b in range(256)]
        self.cache: Dict[str, List[int]] = {}

    def encode_pieces(self, pieces):
        out: List[int] = []
        for p in pieces:
            w = p.decode("latin-1").translate(_BL_MAP) if self.byte_level else p.decode("utf-8")
            ids = self.cache.get(w)
            if ids is None:
                ids = self._word(w)
                if len(self.cache) < 100_000:
                    self.cache[w] = ids
            out += ids
        return out

    def encode_ordinary(self, data):
        return self.encode_pieces([data]) if data else []

    def _word(self, w: str) -> List[int]:
        vocab = self.vocab
        if not w:
            return []
        if self.ignore_merges and w in vocab:
            return [vocab[w]]
        syms: List[int] = []
        unk = None
        last = len(w) - 1
        for k, ch in enumerate(w):
            s = ch
            if k and self.prefix:
                s = self.prefix + s
            if k == last and self.suffix:
                s = s + self.suffix
            tid = vocab.get(s)
            if tid is not None:
                if unk is not None:
                    syms.append(unk)
                    unk = None
                syms.append(tid)
                continue
            if self.byte_fallback:
                fb = [self.fallback[b] for b in s.encode("utf-8")]
                if None not in fb:
                    syms += fb
                    continue
            if self.unk_id >= 0:
                if unk is not None and not self.fuse_unk:
                    syms.append(unk)
                elif unk is not None:
                    continue
                unk = self.unk_id
        if unk is not None:
            syms.append(unk)
        return self._merge(syms)

    def _merge(self, syms: List[int]) -> List[int]:
        import heapq

        n = len(syms)
        if n < 2:
            return syms
        merges = self.merges
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        alive = [True] * n
        heap = []
        for i in range(n - 1):
            m = merges.get((syms[i], syms[i + 1]))
            if m is not None:
                heap.append((m[0], i, syms[i], syms[i + 1]))
        heapq.heapify(heap)
        while heap:
            _, i, a, b = heapq.heappop(heap)
            if not alive[i] or syms[i] != a:
                continue
            j = nxt[i]
            if j >= n or syms[j] != b:
                continue
            new = merges[(a, b)][1]
            syms[i] = new
            alive[j] = False
            nxt[i] = nxt[j]
            if nxt[j] < n:
                prv[nxt[j]] = i
            p = prv[i]
            if p >= 0:
                m = merges.get((syms[p], new))
                if m is not None:
                    heapq.heappush(heap, (m[0], p, syms[p], new))
            q = nxt[i]
            if q < n:
                m = merges.get((new, syms[q]))
                if m is not None:
                    heapq.heappush(heap, (m[0], i, new, syms[q]))
        return [t for t, ok in zip(syms, alive) if ok]


def _marker_prepend_rule(norm_ops, whole_metaspace, added):
    """CoreEncoder.encode_marked's rule (MARKER_PREPEND_*) for a file whose text the marker-words encoder
    takes (no pre-tokenizer, or Metaspace without split), when all the normalizer and Metaspace do to text
    holding no added token is to write each space as the marker and put one marker in front by that rule;
    else None (the file keeps the Python route)."""
    from ctok._encoder import MARKER_PREPEND_NEVER, MARKER_PREPEND_NONEMPTY, MARKER_PREPEND_UNMARKED
    if whole_metaspace is not None:
        if norm_ops:
            return None
        # "first" prepends to the text's first section only; text holding no added token is one section,
        # starting at offset 0.
        return MARKER_PREPEND_NEVER if whole_metaspace[1] == "never" else MARKER_PREPEND_UNMARKED
    # Llama 2 / Mistral 7B v0.1: Prepend("▁") and Replace(" " -> "▁"), in either order, make "▁" + the
    # text with its spaces replaced, for any non-empty text (Prepend skips the empty one).
    marker = "\u2581"
    if sorted(kind for kind, _ in norm_ops) != ["prepend", "replace"]:
        return None
    for kind, arg in norm_ops:
        if kind == "prepend" and arg != marker:
            return None
        if kind == "replace" and (arg[0].literal != " " or arg[1] != marker):
            return None
    # A token matched in the normalized text (normalized=true) may hold a marker that was a space: the scan
    # of the raw text for added tokens would not see it.
    if any(t.normalized for t in added):
        return None
    return MARKER_PREPEND_NONEMPTY


def _default_core_factory():
    from ctok._encoder import CoreEncoder
    return CoreEncoder


def load_tokenizer_json(path, config=None, *, core_factory=None):
    """Parse a HF tokenizer.json (BPE) -> (VocabSpec, HFPipeline).

    `config`: the parsed sibling tokenizer_config.json, or None (kept in spec.extra; HF's Tokenizer ignores it).
    `core_factory`: the CoreEncoder class (default `ctok._encoder.CoreEncoder`); tests may pass a stand-in.
    """
    ctx = _Ctx(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise VocabFormatError(path, f"cannot read: {e}") from None
    try:
        d = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise VocabFormatError(path, f"not valid JSON: {e}") from None
    d = ctx.obj(d, "(top level)")
    if "version" in d and d["version"] != "1.0":
        raise ctx.bad("version", f"unknown tokenizer version {d['version']!r}")
    for key in ("truncation", "padding"):
        if d.get(key) is not None:
            raise ctx.unsupported(f"{key} (non-null {key} changes encode output)")
    if "model" not in d:
        raise ctx.bad("model", "missing")
    model = _parse_model(ctx, d["model"])
    vocab = model["vocab"]

    norm_ops: list = []
    _parse_normalizer(ctx, d.get("normalizer"), "normalizer", norm_ops)
    pretok_steps: list = []
    _parse_pretok(ctx, d.get("pre_tokenizer"), "pre_tokenizer", pretok_steps)
    added_list = _parse_added(ctx, ctx.get(d, "added_tokens", "", list, default=[]))
    post = _parse_post(ctx, d.get("post_processor"), "post_processor")
    dec_steps: list = []
    _parse_decoder(ctx, d.get("decoder"), "decoder", dec_steps)
    if d.get("decoder") is not None and not dec_steps:
        # An empty Sequence decoder still joins the tokens with "" (no decoder at all joins them with " ").
        dec_steps.append(("identity", None))

    # Steps after ByteLevel see byte-level strings; only pure splitters may follow it.
    bl_index = next((i for i, s in enumerate(pretok_steps) if s[0] == "bytelevel"), None)
    byte_level = bl_index is not None
    if byte_level:
        for s in pretok_steps[bl_index + 1:]:
            if s[0] not in _SPLIT_ONLY:
                raise ctx.unsupported(f"pre_tokenizer: {s[0]} after ByteLevel")
    mapped_final = byte_level and bl_index < len(pretok_steps) - 1
    if byte_level and not mapped_final:
        # ByteLevel is the last step: its pieces' raw bytes are simply their UTF-8; no mapping needed.
        aps, use_regex, _ = pretok_steps[bl_index][1]
        pretok_steps[bl_index] = ("bytelevel", (aps, use_regex, False))

    # ---- vocabulary: token bytes ----
    vocab_r: Dict[int, str] = {}
    for s, i in vocab.items():
        vocab_r[i] = s  # a duplicated id keeps one string, as HF's reverse map does
    if len(vocab_r) != len(vocab):
        # HF still encodes every string of a shared id to it; one id -> one byte string here cannot.
        first: Dict[int, str] = {}
        for s, i in vocab.items():
            if i in first:
                raise ctx.unsupported(f"model.vocab: id {i} is used by two tokens, {first[i]!r} and {s!r}")
            first[i] = s
    size = (max(vocab_r) + 1) if vocab_r else 0
    token_bytes: List[Optional[bytes]] = [None] * size
    for i, s in vocab_r.items():
        token_bytes[i] = _bl_unmap(s) if byte_level else s.encode("utf-8")
    # HF keeps the last rank of a repeated merge; drop merges whose parts are not byte strings.
    merges = model["merges"]
    last = dict(zip(merges, range(len(merges))))
    if len(last) != len(merges):
        merges = [pr for r, pr in enumerate(merges) if last[pr] == r]
    holes = {i for i, b in enumerate(token_bytes) if b is None}
    if holes:
        merges = [pr for pr in merges if pr[0] not in holes and pr[1] not in holes]

    # ---- added tokens: HF's id assignment (ids in the file are only checked, not used) ----
    model_size = len(vocab)
    added_map: Dict[str, int] = {}
    added_r: Dict[int, _AddedToken] = {}
    special_set = set()
    normalized_cache: Dict[int, str] = {}
    next_id = model_size
    for tok in added_list:
        if not tok.content:
            continue
        if tok.content in added_map:
            prev = added_r.get(added_map[tok.content])
            if prev is not None and prev.key() == tok.key():
                continue
        if tok.content in added_map:
            new_id = added_map[tok.content]
        elif tok.content in vocab:
            new_id = vocab[tok.content]
        else:
            new_id = next_id
            next_id += 1
        if tok.normalized and norm_ops:
            normed, _ = _apply_normalizer(norm_ops, tok.content)
            if not normed:
                raise ctx.unsupported(
                    f"added token {tok.content!r} (normalized=true) whose normalized form is empty: HF matches it "
                    "as the empty string everywhere, erratically, and panics on non-ASCII text")
            if normed != tok.content:
                normalized_cache[new_id] = normed
        added_map[tok.content] = new_id
        if tok.special:
            special_set.add(tok.content)
        added_r[new_id] = tok

    # ---- native fast paths ----
    fast_kind = None
    fast_prefix_space = False
    whole_metaspace = None
    kinds = [s[0] for s in pretok_steps]
    if kinds == ["bytelevel"] and pretok_steps[0][1][1]:
        fast_kind = _recognise([GPT2_BYTELEVEL_PATTERN])
        fast_prefix_space = pretok_steps[0][1][0]
    elif kinds and all(k == "split" for k in kinds[:-1]) and kinds[-1] in ("split", "bytelevel"):
        splits = pretok_steps if kinds[-1] == "split" else pretok_steps[:-1]
        last_ok = kinds[-1] == "split" or pretok_steps[-1][1][:2] == (False, False)
        if splits and last_ok and all(s[1][1] == "Isolated" and not s[1][2] for s in splits):
            fast_kind = _recognise([s[1][3] for s in splits])
    elif kinds == ["metaspace"] and not pretok_steps[0][1][2]:
        rep, scheme, _ = pretok_steps[0][1]
        whole_metaspace = (rep, scheme)

    py_bpe = None
    if model["prefix"] or model["suffix"]:
        fast_kind = None  # the native scanner feeds the core; here pieces go to the Python BPE
        py_bpe = _PyBPE(vocab, model["merges"], model["merged"], prefix=model["prefix"], suffix=model["suffix"],
                        byte_level=byte_level, byte_fallback=model["byte_fallback"], unk_id=model["unk_id"],
                        fuse_unk=model["fuse_unk"], ignore_merges=model["ignore_merges"])
        merges = []  # the core only serves token lookups and decode_bytes here

    # SentencePiece-style files encode each segment as one word.  When no token holds a character
    # followed by the word marker, no merge can join across the start of a marker run, so the native
    # encoder may split there (PRETOK_MARKER_WORDS): same ids, linear instead of one huge merge.
    marker_words = None
    if (py_bpe is None and not byte_level and fast_kind is None and not model["ignore_merges"]
            and (whole_metaspace is not None or not pretok_steps)):
        marker = whole_metaspace[0] if whole_metaspace is not None else "\u2581"
        mb = marker.encode("utf-8")
        from ctok._encoder import MARKER_WORDS, marker_split_is_safe
        if 1 <= len(mb) <= 8 and marker in vocab and marker_split_is_safe(token_bytes, mb):
            marker_words = mb
            fast_kind_native = MARKER_WORDS
    marker_prepend = None
    if marker_words is not None:
        marker_prepend = _marker_prepend_rule(norm_ops, whole_metaspace, added_r.values())
    factory = core_factory or _default_core_factory()
    core_kwargs = dict(pretok_kind=fast_kind or 0, char_level=not byte_level,
                       byte_fallback=model["byte_fallback"], unk_id=model["unk_id"], fuse_unk=model["fuse_unk"],
                       ignore_merges=model["ignore_merges"])
    if marker_words is not None:
        core_kwargs.update(pretok_kind=fast_kind_native, marker=marker_words)
        if marker_prepend is not None:
            core_kwargs.update(marker_prepend=marker_prepend)
    extra_bytes = {i: t.content.encode("utf-8") for i, t in added_r.items()
                   if i >= size or token_bytes[i] is None}
    try:
        core = factory(token_bytes, merges, special_bytes=extra_bytes, **core_kwargs)
    except TypeError:
        core = factory(token_bytes, merges, **core_kwargs)

    pipeline = HFPipeline(
        path=str(path), core=core, vocab=vocab, vocab_r=vocab_r, added_r=added_r, added_map=added_map,
        special_set=special_set, normalized_cache=normalized_cache, norm_ops=norm_ops, pretok_steps=pretok_steps,
        post=post, dec_steps=dec_steps, fast_kind=fast_kind, fast_prefix_space=fast_prefix_space,
        whole_metaspace=whole_metaspace, char_level=not byte_level, mapped_pieces_final=mapped_final,
        py_bpe=py_bpe)
    pipeline._marker_words = marker_words is not None
    pipeline._marker_prepend = marker_prepend
    if marker_words is not None:
        pipeline.pretokenizer = "hf+marker-words"

    from ctok.vocab import VocabSpec

    base = os.path.basename(str(path))
    parent = os.path.basename(os.path.dirname(os.path.abspath(str(path))))
    name = parent if base == "tokenizer.json" and parent else os.path.splitext(base)[0]
    split_patterns = [s[1][3] for s in pretok_steps if s[0] == "split"]
    if kinds == ["bytelevel"] and pretok_steps[0][1][1]:
        split_patterns = [GPT2_BYTELEVEL_PATTERN]
    spec = VocabSpec(
        name=name, source=str(path), token_bytes=token_bytes, merges=merges,
        special_tokens=dict(pipeline.special_tokens),
        pattern=split_patterns[0] if len(split_patterns) == 1 else None,
        explicit_n_vocab=pipeline.n_vocab,
        extra={"format": "hf-tokenizer.json", "added_tokens": dict(pipeline.added_tokens),
               "split_patterns": split_patterns, "byte_level": byte_level,
               "byte_fallback": model["byte_fallback"], "ignore_merges": model["ignore_merges"],
               "continuing_subword_prefix": model["prefix"], "end_of_word_suffix": model["suffix"],
               "unk_id": model["unk_id"], "config": config},
    )
    return spec, pipeline
