"""Generate ctok/_unicode_tables.h: per-code-point class flags for the pretokenizer scanners.

Sources (both pinned, so the output is reproducible):
  * general categories from ``unicodedata2 == 16.0.0`` (Unicode 16.0.0; Python 3.11's own ``unicodedata`` is 14.0);
  * White_Space derived exactly as PropList.txt defines it: Zs | Zl | Zp | U+0009..U+000D | U+0085
    (checked below against the 25 code points of PropList-16.0.0);
  * Script=Han from ``tools/unicode16_han.txt`` (the Han lines of Scripts-16.0.0.txt, with its licence header).

Unicode 16 is what both reference engines use: tiktoken 0.14.0 (Rust regex) and tokenizers 0.23.3 (Oniguruma) give
exactly these sets for \\p{L}, \\p{Lu}, ..., \\p{N}, \\p{P}, \\p{S}, \\s and \\p{Han} (tests/test_pretok.py checks every
code point).

Layout: two-stage table.  ``ctok_stage1[cp >> 8]`` is a block number, ``ctok_stage2[block * 256 + (cp & 255)]`` a
class number, ``ctok_class_flags[class]`` the CT_* flag bits.  Run:  python tools/gen_unicode_tables.py

The same header holds the normalization quick-check table (UAX #15 section 9) that ctok/_nf_check.h runs:
``ctok_nf_props(cp)`` = canonical combining class | CTOK_NF_* bits, one bit per form for which the code point is
*not* Quick_Check=Yes.  Derived from unicodedata2 16.0.0 alone (see ``nf_props``), and checked before writing
(``check_nf_props``): against CPython's own ``unicodedata.is_normalized`` (Unicode 14) on the code points both
versions assign, and by brute force (every code point that passes, alone and between starters, and pairs of marks
in order) against unicodedata2.normalize.
"""
import os
import sys

import unicodedata2

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "ctok", "_unicode_tables.h")
HAN_FILE = os.path.join(HERE, "unicode16_han.txt")

UNICODE_VERSION = "16.0.0"

# Flag bits (keep in sync with ctok/_pretok.pxd, which declares them from the header).
FLAGS = [
    ("CT_L", "any letter, \\p{L}"),
    ("CT_UP", "\\p{Lu} | \\p{Lt} | \\p{Lm} | \\p{Lo} | \\p{M}  (o200k's first letter class)"),
    ("CT_LO", "\\p{Ll} | \\p{Lm} | \\p{Lo} | \\p{M}  (o200k's second letter class)"),
    ("CT_M", "\\p{M}"),
    ("CT_N", "\\p{N}"),
    ("CT_WS", "White_Space = regex \\s in both reference engines"),
    ("CT_P", "\\p{P}"),
    ("CT_S", "\\p{S}"),
    ("CT_HAN", "Script=Han"),
    ("CT_CRLF", "U+000D or U+000A"),
    ("CT_DSCJK", "DeepSeek's [\\u4e00-\\u9fa5\\u3040-\\u309f\\u30a0-\\u30ff]"),
    ("CT_APUNCT", "the 32 ASCII punctuation characters !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    ("CT_AALPHA", "ASCII letter [A-Za-z]"),
]
BIT = {name: 1 << i for i, (name, _) in enumerate(FLAGS)}

WHITE_SPACE_16 = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680] + list(range(0x2000, 0x200B)) + [
    0x2028, 0x2029, 0x202F, 0x205F, 0x3000]


def load_han():
    ranges = []
    with open(HAN_FILE, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            cps, script = (x.strip() for x in line.split(";"))
            assert script == "Han", line
            lo, _, hi = cps.partition("..")
            ranges.append((int(lo, 16), int(hi or lo, 16)))
    return ranges


def is_white_space(cp, cat):
    return cat in ("Zs", "Zl", "Zp") or 0x09 <= cp <= 0x0D or cp == 0x85


def flags_of(cp, han):
    cat = unicodedata2.category(chr(cp))
    f = 0
    if cat[0] == "L":
        f |= BIT["CT_L"]
    if cat in ("Lu", "Lt", "Lm", "Lo") or cat[0] == "M":
        f |= BIT["CT_UP"]
    if cat in ("Ll", "Lm", "Lo") or cat[0] == "M":
        f |= BIT["CT_LO"]
    if cat[0] == "M":
        f |= BIT["CT_M"]
    if cat[0] == "N":
        f |= BIT["CT_N"]
    if is_white_space(cp, cat):
        f |= BIT["CT_WS"]
    if cat[0] == "P":
        f |= BIT["CT_P"]
    if cat[0] == "S":
        f |= BIT["CT_S"]
    if han[cp]:
        f |= BIT["CT_HAN"]
    if cp in (0x0A, 0x0D):
        f |= BIT["CT_CRLF"]
    if 0x4E00 <= cp <= 0x9FA5 or 0x3040 <= cp <= 0x309F or 0x30A0 <= cp <= 0x30FF:
        f |= BIT["CT_DSCJK"]
    if cp < 0x80 and chr(cp) in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~":
        f |= BIT["CT_APUNCT"]
    if cp < 0x80 and chr(cp).isalpha():
        f |= BIT["CT_AALPHA"]
    return f


NF_FORMS = ("NFC", "NFKC", "NFD", "NFKD")   # bit 8 + i of ctok_nf_props: not Quick_Check=Yes for NF_FORMS[i]
NF_BLOCK = 128                             # code points per stage-2 block (29 KB in all; 256 takes 31 KB)
HANGUL_VT = list(range(0x1161, 0x1176)) + list(range(0x11A8, 0x11C3))   # jamo that compose after L / LV


def composition_seconds():
    """Code points that are the second of a canonical composition NFC performs (NFC_QC=Maybe): the second
    character of each two-character canonical decomposition whose composite NFC rebuilds (primary composites;
    the exclusions are not rebuilt), and the Hangul V and T jamo (composed by rule, not by decomposition data)."""
    out = set(HANGUL_VT)
    for cp in range(0x110000):
        d = unicodedata2.decomposition(chr(cp))
        if d and not d.startswith("<"):
            parts = [int(x, 16) for x in d.split()]
            if len(parts) == 2 and unicodedata2.normalize("NFC", chr(parts[0]) + chr(parts[1])) == chr(cp):
                out.add(parts[1])
    return out


def nf_props(seconds):
    """ccc | (not-Yes bits << 8) for every code point.  NF*_QC=No is exactly "the form changes the character
    alone" (it cannot occur in that form); for NFC / NFKC also not Yes: the composition seconds (Maybe), and the
    characters whose decomposition starts with one.  Those are new in Unicode 16 (U+113C5, U+16121..16128,
    U+16D68: NFC turns U+16D63 U+16D68 into U+16D6A, since U+16D68 = U+16D67 U+16D67 and U+16D63 U+16D67
    composes); before 16 no decomposition started with a second, so the quick check needed no such rule."""
    props = []
    for cp in range(0x110000):
        c = chr(cp)
        bits = 0
        for i, form in enumerate(NF_FORMS):
            if unicodedata2.normalize(form, c) != c:
                bits |= 1 << i
            elif form in ("NFC", "NFKC"):
                first = ord(unicodedata2.normalize("NFD" if form == "NFC" else "NFKD", c)[0])
                if cp in seconds or first in seconds:
                    bits |= 1 << i
        props.append(unicodedata2.combining(c) | bits << 8)
    return props


def _passes(props, form_bit, s):
    """The UAX #15 quick check on s (one form): True only for Yes (no character not-Yes, marks in order)."""
    last = 0
    for c in s:
        v = props[ord(c)]
        cc = v & 0xFF
        if v & form_bit or (cc and last > cc):
            return False
        last = cc
    return True


def check_nf_props(props, seconds):
    """Assertions only (the header is written after them): what "Yes" promises holds for every code point."""
    import unicodedata  # CPython's own, an older Unicode version: compared where both assign the code point
    # Unicode 9.0's NFC_QC=Maybe list (DerivedNormalizationProps-9.0.0) is contained in ours; what ours adds is
    # new since (Dives Akuru 13.0; Tulu-Tigalari, Gurung Khema, Kirat Rai 16.0).
    assert len(seconds) == 120, len(seconds)
    assert {0x0301, 0x0338, 0x0345, 0x0653, 0x093C, 0x0BBE, 0x0BD7, 0x102E, 0x3099, 0x309A, 0x110BA,
            0x115AF, 0x11930, 0x113B8, 0x1611E, 0x16D67} <= seconds
    # NFC: 1120 No (the same 1120 as in 9.0), 120 seconds, 12 starting with a second.  (The No and Maybe sets
    # were compared once with DerivedNormalizationProps-9.0.0: equal on the code points 9.0 assigns.)
    assert sum(1 for v in props if v & 0x100) == 1252, sum(1 for v in props if v & 0x100)
    for i, form in enumerate(NF_FORMS[:2]):                  # no Yes starter is absorbed by what precedes it
        for cp in range(0x110000):
            if not props[cp] & (0xFF | 0x100 << i):
                assert ord(unicodedata2.normalize(("NFD", "NFKD")[i], chr(cp))[0]) not in seconds
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
    old = {cp for cp in cps if unicodedata.category(chr(cp)) != "Cn"
           and unicodedata2.category(chr(cp)) != "Cn"}
    # a Latin letter, an L jamo, a consonant, an LV syllable, firsts of starter-starter compositions (Bengali,
    # Tamil, Tulu-Tigalari, Gurung Khema, Kirat Rai)
    starters = "a\u1100\u0915\uac00\u0b92\u09c7\U000113c2\U0001611e\U00016d63"
    for i, form in enumerate(NF_FORMS):
        bit = 0x100 << i
        yes = [chr(cp) for cp in cps if not props[cp] & bit]
        for c in yes:
            assert props[ord(c)] & 0xFF == unicodedata2.combining(c)
        # Every Yes code point between and after starters: one call per context over all of them.
        for ctx in ("{}", "a{}b", "{}{}", "{}a", "\u1100{}\u1100", "\u0915{}\u0915", "\uac00{}", "\u0b92{}",
                    "\u09c7{}a", "{}\u0b92", "\U000113c2{}", "\U0001611e{}", "\U00016d63{}", "\U00016d67{}"):
            # (a context that starts with a starter passes after anything, so the joined text passes too)
            texts = (ctx.replace("{}", c) for c in yes)
            s = "".join(t for t in texts if _passes(props, bit, t) and props[ord(t[0])] & 0xFF == 0)
            assert _passes(props, bit, s) and unicodedata2.normalize(form, s) == s, (form, ctx)
        # Pairs of marks in canonical order after each starter.
        marks = [c for c in yes if props[ord(c)] & 0xFF]
        for st in (st for st in starters if not props[ord(st)] & bit):
            s = "".join(st + m1 + m2 for m1 in marks for m2 in marks
                        if props[ord(m1)] & 0xFF <= props[ord(m2)] & 0xFF)
            assert unicodedata2.normalize(form, s) == s, (form, hex(ord(st)))
        # CPython's Unicode 14 tables: a code point both versions assign is normalized alone (and between
        # letters) exactly when ours says the form leaves it as it is.
        both = [chr(cp) for cp in sorted(old)]
        for c in both:
            assert unicodedata.is_normalized(form, c) == (unicodedata2.normalize(form, c) == c), (form, c)
        s = "".join("a" + c + "b" for c in both if not props[ord(c)] & bit)
        assert unicodedata.is_normalized(form, s), form


def nf_header_lines(props):
    classes = {0: 0}
    for v in props:
        classes.setdefault(v, len(classes))
    assert len(classes) < 256
    blocks, stage1, stage2 = {}, [], []
    for b in range(0, 0x110000, NF_BLOCK):
        blk = bytes(classes[v] for v in props[b:b + NF_BLOCK])
        if blk not in blocks:
            blocks[blk] = len(blocks)
            stage2.append(blk)
        stage1.append(blocks[blk])
    assert len(stage2) < 256 and stage1[0] == 0 and all(v == 0 for v in props[:0x80])
    out = []
    w = out.append
    w("/* Normalization quick check (UAX #15 section 9), Unicode " + UNICODE_VERSION + ": ctok_nf_props(cp) is the")
    w("   canonical combining class (bits 0-7) | CTOK_NF_* (bits 8-11), set when cp is not Quick_Check=Yes for that")
    w("   form: No (the form changes cp alone) or, for NFC / NFKC, Maybe (cp can be the second of a composition).")
    w("   ASCII is 0 throughout.  Used by ctok/_nf_check.h. */")
    for i, form in enumerate(NF_FORMS):
        w(f"#define CTOK_NF_{form} 0x{0x100 << i:03x}u")
    w(f"#define CTOK_NF_BLOCK {NF_BLOCK}")
    w(f"#define CTOK_NF_N_CLASSES {len(classes)}")
    w(f"#define CTOK_NF_N_BLOCKS {len(stage2)}")
    w("static const uint16_t ctok_nf_class[CTOK_NF_N_CLASSES] = {")
    vals = sorted(classes, key=classes.get)
    for i in range(0, len(vals), 16):
        w("    " + ", ".join(f"0x{v:03x}" for v in vals[i:i + 16]) + ",")
    w("};")
    w(f"/* cp / {NF_BLOCK} -> block number */")
    w(f"static const uint8_t ctok_nf_stage1[0x110000 / {NF_BLOCK}] = {{")
    for i in range(0, len(stage1), 64):
        w("    " + ",".join(str(x) for x in stage1[i:i + 64]) + ",")
    w("};")
    w(f"/* block * {NF_BLOCK} + cp % {NF_BLOCK} -> class number */")
    w(f"static const uint8_t ctok_nf_stage2[CTOK_NF_N_BLOCKS * {NF_BLOCK}] = {{")
    for blk in stage2:
        for i in range(0, NF_BLOCK, 64):
            w("    " + ",".join(str(x) for x in blk[i:i + 64]) + ",")
    w("};")
    w("")
    w("/* A byte per BMP code point: bit i set when it is not a boundary for form i (CTOK_NF_<form> >> 8), i.e.")
    w("   ctok_nf_props(cp) & (CTOK_NF_<form> | 0xFF) != 0: a mark, or not Yes.  One load a character where the")
    w("   two-stage table takes three, for the quick check's 16-character steps. */")
    w("static const uint8_t ctok_nf_bmp_nonboundary[0x10000] = {")
    flags = [sum(1 << i for i in range(len(NF_FORMS)) if props[cp] & ((0x100 << i) | 0xFF)) for cp in range(0x10000)]
    for j in range(0, 0x10000, 64):
        w("    " + ",".join(str(x) for x in flags[j:j + 64]) + ",")
    w("};")
    w("")
    w("/* cp <= 0x10FFFF (a str's code point) keeps cp / CTOK_NF_BLOCK inside stage1; a stage1 value is a block")
    w("   number < CTOK_NF_N_BLOCKS and a stage2 value a class number < CTOK_NF_N_CLASSES. */")
    w("static inline unsigned ctok_nf_props(uint32_t cp) {")
    w("    return ctok_nf_class[ctok_nf_stage2[(uint32_t)ctok_nf_stage1[cp / CTOK_NF_BLOCK] * CTOK_NF_BLOCK"
      " + cp % CTOK_NF_BLOCK]];")
    w("}")
    return out, len(classes), len(stage2)


def main():
    assert unicodedata2.unidata_version == UNICODE_VERSION, unicodedata2.unidata_version
    ws = [cp for cp in range(0x110000) if is_white_space(cp, unicodedata2.category(chr(cp)))]
    assert ws == WHITE_SPACE_16, [hex(c) for c in ws]
    han = bytearray(0x110000)
    for lo, hi in load_han():
        for cp in range(lo, hi + 1):
            han[cp] = 1
    assert sum(han) == 99030

    seconds = composition_seconds()
    props = nf_props(seconds)
    check_nf_props(props, seconds)
    nf_lines, nf_classes, nf_blocks = nf_header_lines(props)

    flags = [flags_of(cp, han) for cp in range(0x110000)]
    classes = {}  # flags -> class number (class 0 = no flag, also used for invalid UTF-8)
    classes[0] = 0
    for f in flags:
        if f not in classes:
            classes[f] = len(classes)
    assert len(classes) < 256
    blocks = {}
    stage1 = []
    stage2 = []
    for b in range(0x1100):
        blk = bytes(classes[f] for f in flags[b * 256:(b + 1) * 256])
        if blk not in blocks:
            blocks[blk] = len(blocks)
            stage2.append(blk)
        stage1.append(blocks[blk])
    class_flags = sorted(classes, key=classes.get)

    out = []
    w = out.append
    w("/* ctok/_unicode_tables.h -- GENERATED by tools/gen_unicode_tables.py, do not edit.")
    w(f" * Unicode version {UNICODE_VERSION}: general categories from unicodedata2 {UNICODE_VERSION}"
      f" (Unicode {unicodedata2.unidata_version}),")
    w(" * White_Space as in PropList.txt, Script=Han from tools/unicode16_han.txt (Scripts-16.0.0.txt);")
    w(" * normalization quick-check properties (combining classes, decompositions, compositions) from unicodedata2. */")
    w("#ifndef CTOK_UNICODE_TABLES_H")
    w("#define CTOK_UNICODE_TABLES_H")
    w("#include <stdint.h>")
    w("")
    w(f'#define CTOK_UNICODE_VERSION "{UNICODE_VERSION}"')
    for name, doc in FLAGS:
        w(f"#define {name} 0x{BIT[name]:04x}u  /* {doc} */")
    w("")
    w(f"#define CTOK_N_CLASSES {len(class_flags)}")
    w(f"#define CTOK_N_BLOCKS {len(stage2)}")
    w("static const uint16_t ctok_class_flags[CTOK_N_CLASSES] = {")
    w("    " + ", ".join(f"0x{f:04x}" for f in class_flags))
    w("};")
    w("")
    w("/* cp >> 8 -> block number; 0x1100 entries cover U+0000..U+10FFFF */")
    w("static const uint16_t ctok_stage1[0x1100] = {")
    for i in range(0, len(stage1), 32):
        w("    " + ",".join(str(x) for x in stage1[i:i + 32]) + ",")
    w("};")
    w("")
    w("/* block * 256 + (cp & 255) -> class number */")
    w("static const uint8_t ctok_stage2[CTOK_N_BLOCKS * 256] = {")
    for blk in stage2:
        for i in range(0, 256, 64):
            w("    " + ",".join(str(x) for x in blk[i:i + 64]) + ",")
    w("};")
    w("")
    w("/* Flags of the ASCII/Latin-1 byte values < 0x80 (a direct table for the fast path). */")
    w("static const uint16_t ctok_ascii_flags[128] = {")
    for i in range(0, 128, 16):
        w("    " + ", ".join(f"0x{f:04x}" for f in flags[i:i + 16]) + ",")
    w("};")
    w("")
    w("/* Flags of U+0000..U+07FF, the code points of one- and two-byte UTF-8, directly: Cyrillic, Greek, Arabic,")
    w("   Hebrew and Latin letters cost one load instead of ctok_cp_flags' three dependent ones. */")
    w("static const uint16_t ctok_flags_2byte[0x800] = {")
    for i in range(0, 0x800, 16):
        w("    " + ", ".join(f"0x{f:04x}" for f in flags[i:i + 16]) + ",")
    w("};")
    w("")
    w("/* Flags of a code point; cp must be <= 0x10FFFF (cp >> 8 < 0x1100 keeps stage1 in bounds, the stage1 value")
    w("   is a valid block number so stage2's index is < CTOK_N_BLOCKS * 256). */")
    w("static inline uint16_t ctok_cp_flags(uint32_t cp) {")
    w("    return ctok_class_flags[ctok_stage2[((uint32_t)ctok_stage1[cp >> 8] << 8) | (cp & 0xFFu)]];")
    w("}")
    w("")
    out.extend(nf_lines)
    w("")
    w("#endif")
    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {OUT}: {len(class_flags)} classes, {len(stage2)} blocks, "
          f"{len(stage2) * 256 + 0x1100 * 2} bytes of tables; quick check: {nf_classes} classes, {nf_blocks} blocks, "
          f"{nf_blocks * NF_BLOCK + 0x110000 // NF_BLOCK} bytes + 65536 bytes of BMP flags", file=sys.stderr)


if __name__ == "__main__":
    main()
