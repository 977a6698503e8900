"""Test helpers shared by every test module: where the shared ground truth lives, the corpus, the references.

The read-only ground truth (real tokenizer files and a text corpus) lives in ``../shared`` beside the repository
root; ``CTOK_SHARED`` overrides the location. Tests that need it skip with a clear message when it is absent.
Nothing here touches the network.

Public helpers (other test modules import these names):

* ``SHARED`` (``pathlib.Path`` or ``None``), ``shared_dir()``, ``vocab_path(*parts)``, ``corpus_dir()``
* ``corpus_texts(max_bytes=None)`` -> list of ``(name, text)``
* ``adversarial_strings()`` -> list of ``(name, text)``
* ``tiktoken_reference(folder, recipe="recipe.json")`` -> ``(tiktoken.Encoding, id_offset)``, MANIFEST's recipe
* ``reference_encoding(folder, recipe="recipe.json")`` -> ``Ref``: the reference with absolute ids (Tekken offset
  applied) and tiktoken's special-token policy
* ``TIKTOKEN_FAMILIES`` (list of ``Family``), ``write_first_lines(src, dst, n)``
* ``assert_same_ids(got, expected, text)``: equality with a readable first-difference message
"""
from __future__ import annotations

import base64
import functools
import json
import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPUS_DEFAULT_BYTES = 40_000
# Whole files that CI always runs (small, and together they cover prose, CJK and emoji edge cases).
CORPUS_WHOLE_IN_CI = ("en_botchan.txt", "zh_classical.txt", "emoji-test.txt")
FULL = os.environ.get("CTOK_FULL", "") not in ("", "0")


def _find_shared():
    env = os.environ.get("CTOK_SHARED")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared")
    for c in candidates:
        if (c / "vocab").is_dir() and (c / "corpus").is_dir():
            return c.resolve()
    return None


SHARED = _find_shared()
SKIP_MESSAGE = (
    "shared ground truth not found: expected ../shared (beside the repository root, with vocab/ and corpus/) "
    "or a path in CTOK_SHARED"
)


def shared_dir() -> Path:
    """The shared folder; skips the calling test when it is absent."""
    if SHARED is None:
        pytest.skip(SKIP_MESSAGE)
    return SHARED


def vocab_path(*parts) -> Path:
    p = shared_dir().joinpath("vocab", *parts)
    if not p.exists():
        pytest.skip(f"shared file missing: {p}")
    return p


def corpus_dir() -> Path:
    return shared_dir() / "corpus"


def corpus_names():
    """Corpus file names known at collection time (empty when shared is absent; parametrize then skips)."""
    if SHARED is None:
        return []
    return sorted(p.name for p in (SHARED / "corpus").iterdir() if p.suffix == ".txt")


def _cut_utf8(raw: bytes, n: int) -> str:
    """The first ``n`` bytes of ``raw`` backed off to a character boundary, decoded."""
    if n >= len(raw):
        return raw.decode("utf-8")
    while n > 0 and (raw[n] & 0xC0) == 0x80:  # continuation byte: step back to the start of the char
        n -= 1
    return raw[:n].decode("utf-8")


@functools.lru_cache(maxsize=None)
def _read_corpus(name: str) -> bytes:
    return (corpus_dir() / name).read_bytes()


def corpus_text(name: str, max_bytes=None) -> str:
    """One corpus file, cut by the same policy as ``corpus_texts``."""
    raw = _read_corpus(name)
    if max_bytes is None:
        if FULL or name in CORPUS_WHOLE_IN_CI:
            return raw.decode("utf-8")
        max_bytes = CORPUS_DEFAULT_BYTES
    return _cut_utf8(raw, max_bytes)


def corpus_texts(max_bytes=None):
    """``(name, text)`` for every corpus file.

    ``max_bytes=None``: whole files when ``CTOK_FULL=1``; otherwise the first ~40 KB of each file (cut at a
    character boundary) except the files in ``CORPUS_WHOLE_IN_CI``, which are always whole. An explicit
    ``max_bytes`` cuts every file to that many bytes.
    """
    shared_dir()
    return [(name, corpus_text(name, max_bytes)) for name in corpus_names()]


# ---------------------------------------------------------------------------------------------------------------
# References (tiktoken), exactly as MANIFEST.md's recipe builds them


@dataclass(frozen=True)
class Family:
    """A tiktoken-format family in shared/vocab."""

    id: str  # test id
    folder: str  # folder in shared/vocab
    recipe: str = "recipe.json"
    # "auto": ctok.load(file) must recognise it by content; "explicit": pass pattern=/special_tokens= from the recipe
    load: str = "auto"
    view_lines: int | None = None  # the family is a view: the first N lines of the file

    def recipe_data(self):
        return json.loads(vocab_path(self.folder, self.recipe).read_text(encoding="utf-8"))

    def source_file(self) -> Path:
        return vocab_path(self.folder, self.recipe_data()["file"])


TIKTOKEN_FAMILIES = [
    Family("o200k_base", "o200k_base"),
    Family("cl100k_base", "cl100k_base"),
    Family("p50k_base", "p50k_base"),
    Family("r50k_base", "p50k_base", "recipe.r50k_base.json", load="explicit", view_lines=50256),
    Family("p50k_edit", "p50k_base", "recipe.p50k_edit.json", load="explicit"),
    Family("kimi-k2", "kimi-k2"),
    Family("qwen-tiktoken", "qwen-tiktoken"),
    Family("llama3-tiktoken", "llama3-tiktoken"),
    Family("mistral-tekken", "mistral-tekken"),
]
FAMILY_BY_ID = {f.id: f for f in TIKTOKEN_FAMILIES}


def tiktoken_reference(folder, recipe="recipe.json"):
    """``(tiktoken.Encoding, id_offset)`` built exactly as MANIFEST.md's recipe says.

    ``folder`` is a path or a folder name inside shared/vocab. For Tekken, real ids are enc ids + id_offset and
    ids 0..id_offset-1 are the specials listed in the recipe (use ``reference_encoding`` for absolute ids).
    """
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    folder = Path(folder)
    if not folder.is_absolute():
        folder = vocab_path(str(folder))
    r = json.loads((folder / recipe).read_text(encoding="utf-8"))
    path = folder / r["file"]
    if r.get("format") == "tekken-json":
        with open(path, encoding="utf-8") as f:
            vocab = json.load(f)["vocab"][: r["use_first_n_ranks"]]
        ranks = {base64.b64decode(t["token_bytes"]): t["rank"] for t in vocab}
        enc = tiktoken.Encoding(r["name"], pat_str=r["pat_str"], mergeable_ranks=ranks, special_tokens={})
        return enc, r["id_offset"]
    ranks = load_tiktoken_bpe(str(path))
    if r.get("use_first_n_lines"):
        ranks = {k: v for k, v in ranks.items() if v < r["use_first_n_lines"]}
    enc = tiktoken.Encoding(r["name"], pat_str=r["pat_str"], mergeable_ranks=ranks,
                            special_tokens=r["special_tokens"], explicit_n_vocab=r.get("explicit_n_vocab"))
    return enc, 0


def _fix_surrogates(text: str) -> str:
    # What tiktoken does with text that cannot be UTF-8 encoded (lone surrogates become U+FFFD).
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class Ref:
    """A reference encoding with absolute ids.

    With ``offset == 0`` every call goes straight to tiktoken. With an offset (Tekken) ordinary ids are tiktoken's
    + offset, the recipe's specials own ids below the offset, and special-token handling follows tiktoken's
    algorithm (raise on disallowed special text, split on allowed special text).
    """

    def __init__(self, enc, offset, special_tokens, n_vocab, name):
        self.enc = enc
        self.offset = offset
        self.special_tokens = dict(special_tokens)
        self.n_vocab = n_vocab
        self.name = name
        self._special_by_id = {v: k for k, v in self.special_tokens.items()}

    @property
    def eot_token(self):
        return self.special_tokens.get("<|endoftext|>")

    # -- encode
    def encode_ordinary(self, text):
        ids = self.enc.encode_ordinary(text)
        return [i + self.offset for i in ids] if self.offset else ids

    def encode(self, text, *, allowed_special=frozenset(), disallowed_special="all"):
        if not self.offset:
            return self.enc.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
        if allowed_special == "all":
            allowed_special = set(self.special_tokens)
        if disallowed_special == "all":
            disallowed_special = set(self.special_tokens) - set(allowed_special)
        text = _fix_surrogates(text)
        if disallowed_special:
            disallowed_special = frozenset(disallowed_special)
            if len(text) < 50_000:
                hit = next((t for t in disallowed_special if t in text), None)
            else:
                m = _compiled_alternation(disallowed_special).search(text)
                hit = m.group() if m else None
            if hit is not None:
                raise ValueError(f"Encountered text corresponding to disallowed special token {hit!r}.")
        if not allowed_special:
            return self.encode_ordinary(text)
        out, pos = [], 0
        for m in _compiled_alternation(frozenset(allowed_special)).finditer(text):
            out += self.encode_ordinary(text[pos:m.start()])
            out.append(self.special_tokens[m.group()])
            pos = m.end()
        out += self.encode_ordinary(text[pos:])
        return out

    # -- decode
    def decode_single_token_bytes(self, token):
        if self.offset:
            if token in self._special_by_id:
                return self._special_by_id[token].encode("utf-8")
            if token < self.offset:
                raise KeyError(token)
            return self.enc.decode_single_token_bytes(token - self.offset)
        return self.enc.decode_single_token_bytes(token)

    def decode_bytes(self, tokens):
        if not self.offset:
            return self.enc.decode_bytes(tokens)
        return b"".join(self.decode_single_token_bytes(t) for t in tokens)

    def decode(self, tokens, errors="replace"):
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)

    def is_valid_id(self, token):
        try:
            self.decode_single_token_bytes(token)
            return True
        except (KeyError, ValueError):
            return False


@functools.lru_cache(maxsize=256)
def _compiled_alternation(tokens: frozenset):
    import regex

    return regex.compile("|".join(regex.escape(t) for t in sorted(tokens, key=lambda t: (-len(t), t))))


@functools.lru_cache(maxsize=None)
def reference_encoding(folder, recipe="recipe.json") -> Ref:
    enc, offset = tiktoken_reference(folder, recipe)
    r = json.loads((Path(folder) if Path(folder).is_absolute() else vocab_path(str(folder))).joinpath(recipe)
                   .read_text(encoding="utf-8"))
    if offset:
        n_vocab = r.get("explicit_n_vocab") or (enc.n_vocab + offset)
    else:
        n_vocab = enc.n_vocab
    return Ref(enc, offset, r["special_tokens"], n_vocab, r["name"])


def write_first_lines(src, dst, n):
    """Write the first ``n`` lines of ``src`` to ``dst`` (byte for byte); returns ``dst``."""
    out = []
    with open(src, "rb") as f:
        for i, line in enumerate(f):
            if i >= n:
                break
            out.append(line)
    Path(dst).write_bytes(b"".join(out))
    return Path(dst)


# ---------------------------------------------------------------------------------------------------------------
# Comparison with a readable message


class PythonPipelineUsed(AssertionError):
    """Raised by forbid_python_pipeline's stand-ins."""


def forbid_python_pipeline(enc, monkeypatch):
    """Make a tokenizer.json encoding's Python pipeline stages raise PythonPipelineUsed: only the compiled route can
    still answer."""
    def boom(*a, **k):
        raise PythonPipelineUsed("the Python pipeline ran")
    for name in ("_segments", "_encode_segment", "encode"):
        monkeypatch.setattr(enc._hf, name, boom)


def assert_same_ids(got, expected, text=None, label=""):
    got = list(got)
    expected = list(expected)
    if got == expected:
        return
    i = next((k for k, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
    msg = [f"{label} token ids differ at index {i} (ctok {len(got)} ids, reference {len(expected)} ids)",
           f"  ctok:      {got[max(0, i - 3):i + 5]}",
           f"  reference: {expected[max(0, i - 3):i + 5]}"]
    if text is not None:
        msg.append(f"  text ({len(text)} chars) starts {text[:80]!r}")
    raise AssertionError("\n".join(msg))


# ---------------------------------------------------------------------------------------------------------------
# Adversarial strings

CATEGORIES = ("Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi",
              "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn")


@functools.lru_cache(maxsize=None)
def _category_table():
    """category -> list of code points, using Unicode 16 data (unicodedata2); plus the code points whose
    category differs from this Python's own unicodedata (letters newer than the interpreter)."""
    try:
        import unicodedata2 as ud
    except ImportError:  # pragma: no cover - unicodedata2 is a runtime dependency of ctok
        ud = unicodedata
    table = {c: [] for c in CATEGORIES}
    changed = []
    for cp in range(0x110000):
        ch = chr(cp)
        cat = ud.category(ch)
        table[cat].append(cp)
        if ud is not unicodedata and cat != unicodedata.category(ch):
            changed.append(cp)
    return table, changed


def _spread(seq, n):
    if len(seq) <= n:
        return list(seq)
    step = len(seq) / n
    return [seq[int(k * step)] for k in range(n)]


def _category_mix(cps):
    """Characters alone, in runs, and next to letters, digits, spaces, apostrophes, newlines."""
    chars = [chr(c) for c in cps]
    parts = ["".join(chars), " ".join(chars)]
    for ch in chars:
        parts.append(f"a{ch}b {ch}{ch}1{ch} {ch}'s {ch}A\n{ch}\t{ch}  {ch}.")
    parts.append("".join(chars[::-1]) + " " + "\n".join(chars))
    return " ".join(parts)


WHITESPACE = ["\t", "\n", "\x0b", "\x0c", "\r", " ", "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0", "\u1680",
              "\u180e", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004", "\u2005", "\u2006", "\u2007", "\u2008",
              "\u2009", "\u200a", "\u200b", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff"]


def _whitespace_cases():
    cases = []
    for i, ws in enumerate(WHITESPACE):
        parts = []
        for n in (1, 2, 3, 7):
            run = ws * n
            parts += [f"a{run}b", f"{run}x", f"x{run}", f"1{run}2", f".{run}!", f"{run}\n", f"\n{run}",
                      f"{run} a", f"a {run}", f"{run}中", f"'{run}s"]
        cases.append(" | ".join(parts))
    mixes = ["\r\n", "\n\r", "\r\r\n", "\r\n\r\n", " \r\n ", "\t\r\n\t", "\n\n\n", "\r", "\r\r", " \n \n ",
             "  \n", "\n  ", " \t \n\r\n\u3000\n", "x\r\ny", "x \r\n y", "x\n\r\ny", "x.\r\n", "x.\n\n/",
             "//\n\r\n", "a  \r\n  b", "\r\n a", " \r\n", "end \r\n\r\n   "]
    texts = []
    for m in mixes:
        texts += [m, "a" + m, m + "a", "1" + m + "2", "." + m + ".", m * 5, "word" + m + "word" + m]
    return cases, "".join(texts), texts


def _digit_cases():
    table, _ = _category_table()
    zeros = [cp for cp in table["Nd"] if unicodedata.digit(chr(cp), -1) == 0 or _digit2(cp) == 0]
    runs = []
    for z in zeros:
        if all(_ok_cp(z + k) for k in range(10)):
            digits = "".join(chr(z + k) for k in range(10))
            runs += [digits[:1], digits[:2], digits[:3], digits[:4], digits[:7], digits, f"x{digits}y",
                     f" {digits[:3]} ", f"{digits[:5]}a{digits[:5]}"]
    scripts = "".join(runs)
    other = ["1", "12", "123", "1234", "12345", "1234567", "12345678901234567890", "1,234.56", "3.14e-10",
             "0x1F", "v1.2.3", "1st 2nd 3rd", "-42", "+7", "1/2", "½ ⅓ ¼", "² ³ ¹", "Ⅻ ⅻ Ⅳ", "〇一二三", "①②③",
             "1١۱१১੧૧୧௧౧೧൧๑໑༡၁៑᠑", "١٢٣٤٥٦٧٨٩٠", "۱۲۳۴۵۶۷۸۹۰", "१२३४५६७८९०", "𝟎𝟏𝟐𝟑𝟒", "１２３４５",
             "a1b22c333d4444", "１a２b", "٣.١٤"]
    return scripts, " ".join(other)


def _digit2(cp):
    try:
        import unicodedata2

        return unicodedata2.digit(chr(cp), -1)
    except Exception:  # noqa: BLE001
        return -1


def _ok_cp(cp):
    try:
        import unicodedata2 as ud
    except ImportError:  # pragma: no cover
        ud = unicodedata
    return ud.category(chr(cp)) == "Nd"


CONTRACTIONS = [
    "I'm don't we'll they've she'd it's you're",
    "IT'S WE'LL THEY'VE I'D YOU'RE DON'T I'M",
    "It'S We'Ll They'vE I'd",
    "don’t it’s we’ll they’ve I’m she’d you’re",
    "DON’T IT’S WE’LL",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D",
    "’s ’t ’re ’ve ’m ’ll ’d",
    "''s '''s x's's 's's ' s 'ss 'sa 'lll 'dd",
    " 's  'll\n's\t'd",
    "rock'n'roll O'Neil's can't won't y'all ma'am",
    "1's 2'd .'s !'ll 中's 中'S é's É'S",
    "naïve's Ωmega's ǅungla's",
    "'", "''", "'''", "x'", "'x", "’", "'\n's",
]

HAN_LATIN = [
    "中文English混合text", "Python是一种编程语言", "abc中def", "中1中22中333", "日本語のtext", "한국어abc한국어",
    "A中B", "中's 中'S", "中A", "A中", "aB中Cd", "中 English 中", "漢字かなカナabcＡＢＣ", "中\n中 中\t中",
    "Ü中ü", "中。abc，def！", "这是GPT-4o模型", "第1章 第12章 第123章", "𠀀𪛖𫝀abc", "〇abc", "々abc",
    "ｶﾀｶﾅabc", "中é中e\u0301中", "Ⅻ中", "中_中-中",
]

EMOJI = [
    "👨‍👩‍👧‍👦", "🏳️‍🌈", "👍🏽", "👩🏾‍💻", "🇯🇵🇺🇸🇫🇷", "1️⃣ #️⃣ *️⃣", "☺️ ☺ ❤️ ❤", "🏴󠁧󠁢󠁥󠁮󠁧󠁿",
    "🧑‍🤝‍🧑", "👁️‍🗨️", "a👍b", "😀😃😄", " 😀 ", "😀's", "中😀中", "1😀2", "😀\n😀", "‍", "‍a‍",
    "️", "a️", "🏻", "a🏻",
]

COMBINING = [
    "\u0301", " \u0301", "\u0301a", "a\u0301", "\u0301\u0301\u0301", "1\u0301", "\n\u0301", "'\u0301s",
    "\u20dd", "a\u20dd", "\u0903", "क\u0903", "\u0e31", "Z\u0351\u0352\u0357\u035b\u0363\u0364a\u0300\u0301",
    "e\u0301 é", "'\u0301", "A\u0301B\u0301c\u0301", "中\u0301", "😀\u0301", " \u0301 \u0301", "\u0301'",
    "\u0301's", "\u0301'S",
]

SURROGATES = ["\ud800", "a\udfffb", "\udc00\ud800", "\ud83d", "x\ud83d y", "\udfff" * 3, "a \ud800\n"]

SPECIAL_LOOKALIKES = [
    "<|endoftext|", "<|endoftext|>x", "x<|endoftext|>", "foo<|im_end|>bar", "<|endoftext|><|endoftext|>",
    "<|endof<|endoftext|>text|>", "<|ENDOFTEXT|>", "< |endoftext| >", "<|endoftext |>", "|endoftext|>",
    "<|endoftext", "<|im_start|>user\nhi<|im_end|>", "<s>", "</s>", "[INST] hi [/INST]", "<unk>",
    "<|begin_of_text|>hi", "<|eot_id|>", "<|reserved_special_token_0|>", "<|fim_prefix|>x<|fim_suffix|>",
    "<|endofprompt|>", "[BOS]", "<think>", "<SPECIAL_20>", "<|extra_0|>", "<<|endoftext|>>", "<||>", "<|>",
]

NUL = ["\x00", "a\x00b", "\x00" * 100, "\x00 \x00\n", " \x00", "\x00's", "1\x002"]

MISC = [
    "", " ", "a", "\ufeffBOM", "\ufffd", "\ufffe\uffff", "\U0010ffff", "\U000e0001", "\U000f0000",
    "Hello, world! How's it going?", "   leading spaces", "trailing spaces   ", "x" + " " * 50 + "y",
    "def f(x):\n    return x**2  # comment\n", "<html><body>&amp;&#169;</body></html>",
    "https://example.com/a/b?c=d&e=f#g", "////\n//\n", "...!!!???", "a.b,c;d:e", "\"'`´‘’“”",
    "ÀÉÎÕÜàéîõü ßẞ ĲĳŒœ", "ǅǈǋǲ Dž", "ΑΒΓαβγ ΣσςΩω", "АБВабв ЁёЇї", "עברית العربية فارسی", "हिन्दी বাংলা தமிழ்",
    "ไทย ລາວ ខ្មែរ ᠮᠣᠩᠭᠣᠯ", "ﬁﬂ ＡＢＣａｂｃ", "𝐀𝐁𝐂𝑎𝑏𝑐", "ʰʲʷ ˈˌ", "\u00ad\u200c\u200d\u2060\u2066\u2069",
]


@functools.lru_cache(maxsize=None)
def _adversarial():
    table, changed = _category_table()
    out = []
    for cat in CATEGORIES:
        cps = table[cat]
        if cat == "Cs":
            cps = [c for c in cps]  # lone surrogates; adjacent high/low are never sampled in order below
            sample = _spread(cps, 24)
            # keep every sampled surrogate lone: separate them by a letter
            out.append((f"category-{cat}", "x".join(chr(c) for c in sample) + " " + "a\n".join(chr(c) for c in sample)))
            continue
        sample = sorted(set(cps[:4] + _spread(cps, 44) + cps[-4:]))
        out.append((f"category-{cat}", _category_mix(sample)))
    if changed:
        out.append(("unicode-newer-than-python", _category_mix(_spread(changed, 200))))
        out.append(("unicode-newer-than-python-runs", " ".join(
            "".join(chr(c) for c in changed[i:i + 12]) for i in range(0, min(len(changed), 12 * 60), 12))))
    ws_cases, ws_mix, _ = _whitespace_cases()
    for i, case in enumerate(ws_cases):
        out.append((f"whitespace-U+{ord(WHITESPACE[i]):04X}", case))
    out.append(("whitespace-crlf-mixes", ws_mix))
    scripts, other = _digit_cases()
    out.append(("digits-scripts", scripts))
    out.append(("digits-misc", other))
    out.append(("contractions", "\n".join(CONTRACTIONS) + " " + " ".join(CONTRACTIONS)))
    out += [(f"contraction-{i}", s) for i, s in enumerate(CONTRACTIONS)]
    out.append(("han-latin", " ".join(HAN_LATIN) + "".join(HAN_LATIN)))
    out.append(("emoji", " ".join(EMOJI) + "".join(EMOJI)))
    out.append(("combining", " ".join(COMBINING) + "".join(COMBINING)))
    out += [(f"combining-{i}", s) for i, s in enumerate(COMBINING[:8])]
    out += [(f"surrogate-{i}", s) for i, s in enumerate(SURROGATES)]
    out.append(("surrogate-pair-as-code-units", "a\ud83d\ude00b"))
    out += [(f"special-lookalike-{i}", s) for i, s in enumerate(SPECIAL_LOOKALIKES)]
    out.append(("special-lookalikes-joined", " ".join(SPECIAL_LOOKALIKES)))
    out += [(f"nul-{i}", s) for i, s in enumerate(NUL)]
    out += [(f"misc-{i}", s) for i, s in enumerate(MISC)]
    out.append(("empty", ""))
    out += [
        ("run-100k-letters", "a" * 100_000),
        ("run-100k-mixed-case", "aB" * 50_000),
        ("run-10k-spaces-then-letter", " " * 10_000 + "a"),
        ("run-10k-spaces-end", "a" + " " * 10_000),
        ("run-10k-newlines", "\n" * 10_000 + "x"),
        ("run-10k-crlf", "\r\n" * 5_000),
        ("run-10k-tabs-spaces", " \t" * 5_000 + "x"),
        ("run-10k-digits", "1234567890" * 1_000),
        ("run-20k-han", "中" * 20_000),
        ("run-5k-emoji", "😀" * 5_000),
        ("run-10k-punct", "!?" * 5_000),
        ("run-10k-combining", "\u0301" * 10_000),
        ("run-10k-nul", "\x00" * 10_000),
        ("run-long-word-cyrillic", "абв" * 10_000),
    ]
    return tuple(out)


def adversarial_strings():
    """``(name, text)`` pairs of hard inputs (names are unique). Needs no shared files."""
    return list(_adversarial())


def adversarial_names():
    return [n for n, _ in _adversarial()]


def adversarial_dict():
    return dict(_adversarial())
