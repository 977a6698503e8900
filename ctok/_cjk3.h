/* Pieces of 3-byte characters (Han, kana, CJK punctuation, Hangul...) for the pretokenizer (ctok/_pretok.pyx).
 *
 * Why: Japanese and Chinese pieces are short (Kimi on Japanese: 2.4 characters a piece, its Han runs being
 * pieces of their own), and the general scanner pays per piece: the ASCII shape tests, ctok_char on the first
 * character and again on the one that stops each run, the prefix and the two letter alternatives tried one
 * after the other (callgrind, Kimi over ja_wagahaiwa: 300 instructions and 1.75 mispredicted branches a
 * piece).  Here a 3-byte character's class is 2 bits of a 16 KB table, looked up for four characters at once
 * with no branch per character, and the class of the character that stops a run decides the piece's end and
 * is the class of the next piece's first character, so a run of such pieces is read without decoding any
 * character twice.
 *
 * Classes (per mode, filled at import from ctok_cp_flags, see _pretok.pyx): LET (the run class of the letter
 * alternative: \p{L} for cl100k, Llama 3 and Qwen; both UP and LO (Lo, Lm, marks) for o200k and Tekken; the
 * same without Han for Kimi), HAN (Kimi's [\p{Han}]+ letters), PUNCT ([^\s\p{L}\p{N}], which the prefix and the
 * punctuation alternative take; marks left out for o200k/Kimi, where they are LET) and OTHER (anything else:
 * the piece is left to the general scanner).  No code point below U+0800 (overlong forms) or in U+D800..U+DFFF
 * (surrogates) has a class but OTHER, so a character given a class is one ctok_char decodes as 3 bytes.
 *
 * Contract: ctok_cjk3_pieces(s, n, pos, ends, room, tab, mode), 0 <= pos < n, room >= 1, writes the ends of
 * the pieces starting at pos into ends[0:k], 0 <= k <= room, and returns k; it stops before the first piece
 * it cannot decide alone (k = 0 when that is the one at pos), which the caller's general scanner takes.
 * Every end it writes is the one the mode's pattern gives (the reasons are at each decision below).
 */
#ifndef CTOK_CJK3_H
#define CTOK_CJK3_H
#include <stdint.h>
#include <string.h>
#include <Python.h>
#include "_unicode_tables.h"

#define CTOK_CJK3_BYTES 16384               /* 2 bits for each code point below U+10000 */

/* CTOK_CJK3_PORTABLE (tests) builds the plain-C paths that other compilers and big-endian machines take. */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(CTOK_CJK3_PORTABLE)
#define ctok_cjk3_ctz(x) __builtin_ctz(x)
#else
static inline int ctok_cjk3_ctz(uint32_t x) {      /* x != 0 */
    int k = 0;
    while (!(x & 1u)) {
        x >>= 1;
        k++;
    }
    return k;
}
#endif

/* Whether byte c leads a 3-byte character, for the scanners' loops: hinted as rare, so that the compiler lays
 * the CJK branch out of the way of the other pieces (CJK text takes it once for many pieces). */
#if defined(__GNUC__) || defined(__clang__)
#define CTOK_CJK3_LEAD(c) __builtin_expect((unsigned char)((c) - 0xE0u) < 16u, 0)
#else
#define CTOK_CJK3_LEAD(c) ((unsigned char)((c) - 0xE0u) < 16u)
#endif

enum { CJK3_OTHER = 0, CJK3_LET = 1, CJK3_HAN = 2, CJK3_PUNCT = 3, CJK3_NONE = 4 };
enum { CJK3_KIMI = 0, CJK3_O200K = 1, CJK3_TEKKEN = 2, CJK3_CL100K = 3 };

/* The class of the 3 bytes in the low 24 bits of w (lead first), whatever they are (the table is read anyway,
 * no branch; the callers test the UTF-8 shape). */
static inline uint32_t ctok_cjk3_lookup(const uint8_t* tab, uint32_t w) {
    uint32_t cp = ((w & 0x0Fu) << 12) | ((w >> 2) & 0xFC0u) | ((w >> 16) & 0x3Fu);
    return (tab[cp >> 2] >> ((cp & 3u) << 1)) & 3u;             /* cp < 0x10000: cp >> 2 < CTOK_CJK3_BYTES */
}

/* The same, or CJK3_NONE | class when the bytes are not a lead 0xE0..0xEF and two continuation bytes. */
static inline uint32_t ctok_cjk3_class(const uint8_t* tab, uint32_t w) {
    return ctok_cjk3_lookup(tab, w) | ((uint32_t)((w & 0xC0C0F0u) != 0x8080E0u) << 2);
}

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ \
    && !defined(CTOK_CJK3_PORTABLE)
#define CTOK_CJK3_LE 1
#endif

/* Bytes s[0:3] as the low 24 bits (lead first) of a word whose top byte is anything: one unaligned load on a
 * little-endian machine, where s[0:4] must be readable; composed byte by byte elsewhere. */
static inline uint32_t ctok_cjk3_word4(const unsigned char* s) {
#ifdef CTOK_CJK3_LE
    uint32_t w;
    memcpy(&w, s, 4);
    return w;
#else
    return (uint32_t)s[0] | ((uint32_t)s[1] << 8) | ((uint32_t)s[2] << 16);
#endif
}

/* Bytes s[0:3] alone (the last character of a segment may end there). */
static inline uint32_t ctok_cjk3_word(const unsigned char* s) {
    return (uint32_t)s[0] | ((uint32_t)s[1] << 8) | ((uint32_t)s[2] << 16);
}

/* Whether s[0:12] are four characters of 3 bytes each (shape only), s[0:14] readable: two 8-byte words,
 * masked and compared at once, for one test a step instead of one a character. */
static inline int ctok_cjk3_four_shaped(const unsigned char* s) {
#ifdef CTOK_CJK3_LE
    uint64_t u, v;
    memcpy(&u, s, 8);                               /* characters 0, 1 (and 2 bytes of 2) */
    memcpy(&v, s + 6, 8);                           /* characters 2, 3 */
    return (((u & 0xC0C0F0C0C0F0ull) ^ 0x8080E08080E0ull) | ((v & 0xC0C0F0C0C0F0ull) ^ 0x8080E08080E0ull)) == 0;
#else
    int k;
    for (k = 0; k < 12; k += 3)
        if ((ctok_cjk3_word(s + k) & 0xC0C0F0u) != 0x8080E0u)
            return 0;
    return 1;
#endif
}

/* The class of the character at i: CJK3_NONE when i + 3 > n or the bytes are not a 3-byte character. */
static inline uint32_t ctok_cjk3_at(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, const uint8_t* tab) {
    uint32_t c;
    if (i + 3 > n)
        return CJK3_NONE;
    c = ctok_cjk3_class(tab, ctok_cjk3_word(s + i));            /* s[i:i+3]: i + 3 <= n */
    return c >= CJK3_NONE ? CJK3_NONE : c;
}

/* From i, the first j = i + 3m (m >= 0) whose character is not of class want (want != CJK3_OTHER); its class
 * (CJK3_NONE: not a 3-byte character, or j + 3 > n) in *stop. */
static inline Py_ssize_t ctok_cjk3_run(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, const uint8_t* tab,
                                       uint32_t want, uint32_t* stop) {
    /* Four characters a step: their classes side by side in 4-bit fields, the first that differs from want
     * found by counting zeros.  The step's one branch goes the same way for every run shorter than four
     * characters (most of Kimi's), instead of a branch per character taken the other way at each run's end. */
    const uint32_t wants = want * 0x1111u;
    while (i + 14 <= n && ctok_cjk3_four_shaped(s + i)) {      /* s[i:i+14] readable: i + 14 <= n */
        uint32_t cs, x, k;
        cs = ctok_cjk3_lookup(tab, ctok_cjk3_word4(s + i))          /* s[i:i+13]: i + 14 <= n */
           | ctok_cjk3_lookup(tab, ctok_cjk3_word4(s + i + 3)) << 4
           | ctok_cjk3_lookup(tab, ctok_cjk3_word4(s + i + 6)) << 8
           | ctok_cjk3_lookup(tab, ctok_cjk3_word4(s + i + 9)) << 12;
        x = cs ^ wants;
        x = (x | (x >> 1)) & 0x1111u;                           /* bit 4k: field k (2 bits) differs from want */
        if (x == 0) {
            i += 12;
            continue;
        }
        k = (uint32_t)ctok_cjk3_ctz(x) >> 2;                    /* x != 0; k < 4 */
        *stop = (cs >> (k << 2)) & 3u;                          /* a 3-byte character: its class */
        return i + 3 * (Py_ssize_t)k;
    }
    /* The last 13 bytes, or a step with something else than 3-byte characters: one character at a time. */
    while (i + 3 <= n) {
        uint32_t c = ctok_cjk3_class(tab, ctok_cjk3_word(s + i));   /* s[i:i+3]: i + 3 <= n */
        if (c != want) {
            *stop = c >= CJK3_NONE ? CJK3_NONE : c;
            return i;
        }
        i += 3;
    }
    *stop = CJK3_NONE;
    return i;
}

/* The end of a letter piece whose LET run ends at j, the character there of class stop; -1 when undecided. */
static inline Py_ssize_t ctok_cjk3_let_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t j, uint32_t stop,
                                           int mode) {
    unsigned char c;
    /* PUNCT (and Kimi's HAN) are neither UP nor LO (nor \p{L}): UP* took the whole run (its characters are
     * both), LO+ gives back its last one, and nothing more matches; cl100k's \p{L}++ ends there too. */
    if (stop == CJK3_PUNCT || stop == CJK3_HAN)
        return j;
    if (stop != CJK3_NONE)
        return -1;                                  /* OTHER: e.g. Lu or Ll alone, which UP* / LO+ may take */
    if (j >= n)
        return n;
    c = s[j];                                       /* j < n */
    if (c >= 0x80)
        return -1;                                  /* 2- or 4-byte, or not UTF-8: the general scanner */
    if (((c | 0x20u) - 97u) < 26u)
        return -1;                                  /* an ASCII letter: UP or LO, \p{L} */
    if (c == 39 && mode != CJK3_CL100K && mode != CJK3_TEKKEN)
        return -1;                                  /* o200k, Kimi: a contraction may follow */
    return j;                                       /* ASCII, not a letter: neither UP nor LO */
}

/* The end of ` ?[^\s\p{L}\p{N}]+` + [\r\n]* (Kimi, cl100k family) or [\r\n/]* (o200k, Tekken) whose run of
 * 3-byte PUNCT characters ends at j, the character there of class stop; -1 when undecided. */
static inline Py_ssize_t ctok_cjk3_punct_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t j, uint32_t stop,
                                             int mode) {
    uint16_t f;
    if (stop == CJK3_HAN)
        return j;                                   /* \p{L}: ends the run, and is no \r, \n or / */
    if (stop == CJK3_LET) {
        /* The same, but a mark (LET for o200k and Kimi, where it is UP and LO) is [^\s\p{L}\p{N}] and goes on
         * the run: the general scanner's.  Only after a run of two or more PUNCT: worth a flags lookup. */
        uint32_t cp = (((uint32_t)s[j] & 0x0Fu) << 12) | (((uint32_t)s[j + 1] & 0x3Fu) << 6)
                    | ((uint32_t)s[j + 2] & 0x3Fu);     /* s[j:j+3]: stop is a class, so a 3-byte character */
        return (mode != CJK3_CL100K && (ctok_cp_flags(cp) & CT_M)) ? -1 : j;
    }
    if (stop != CJK3_NONE)
        return -1;                                  /* OTHER: a mark, a digit, a space... may go on */
    if (j >= n)
        return n;
    if (s[j] >= 0x80)                               /* j < n */
        return -1;
    f = ctok_ascii_flags[s[j]];                     /* s[j] < 128 */
    if (!(f & (CT_L | CT_WS | CT_N)))
        return -1;                                  /* ASCII punctuation: the run goes on */
    if (!(f & CT_CRLF))
        return j;                                   /* a letter, digit or other space: the run ends */
    while (j < n && (s[j] == 13 || s[j] == 10 || (s[j] == 47 && (mode == CJK3_O200K || mode == CJK3_TEKKEN))))
        j++;                                        /* j < n checked first */
    return j;
}

/* The classes of mode's table (see the top of this file), from ctok_cp_flags: the table cannot disagree with it. */
static void ctok_cjk3_fill(uint8_t* tab, int mode) {
    uint32_t cp;
    memset(tab, 0, CTOK_CJK3_BYTES);
    for (cp = 0x800; cp < 0x10000; cp++) {
        uint16_t f = ctok_cp_flags(cp);
        uint32_t c = CJK3_OTHER;
        if (cp - 0xD800u < 0x800u)
            continue;                               /* surrogates: ctok_char takes each byte alone */
        if (mode == CJK3_CL100K) {
            if (f & CT_L)
                c = CJK3_LET;
            else if (!(f & (CT_L | CT_WS | CT_N)))
                c = CJK3_PUNCT;
        } else if (mode == CJK3_KIMI && (f & CT_HAN)) {
            /* Han letters only: a Han radical (So) or numeral (Nl) both goes on a Han run and would be taken
             * by the punctuation alternative, so its pieces are the general scanner's (OTHER). */
            c = (f & CT_L) ? CJK3_HAN : CJK3_OTHER;
        } else if ((f & (CT_UP | CT_LO)) == (CT_UP | CT_LO)) {
            c = CJK3_LET;                           /* Lo, Lm and marks (Tibetan, Devanagari vowel signs...) */
        } else if (!(f & (CT_L | CT_WS | CT_N | CT_UP | CT_LO | CT_M))) {
            c = CJK3_PUNCT;
        }
        tab[cp >> 2] |= (uint8_t)(c << ((cp & 3u) << 1));      /* cp < 0x10000: cp >> 2 < CTOK_CJK3_BYTES */
    }
}

static Py_ssize_t ctok_cjk3_pieces(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t* ends,
                                   Py_ssize_t room, const uint8_t* tab, int mode) {
    Py_ssize_t k = 0, j, e;
    uint32_t c = ctok_cjk3_at(s, n, pos, tab), stop, c1;
    while (k < room) {
        if (c == CJK3_LET) {
            /* The LET run, ended as ctok_cjk3_let_end says.  A letter takes no prefix; a mark (o200k, Kimi)
             * may be [^\r\n\p{L}\p{N}]? before the run after it, which ends where the run from the mark does,
             * or, when no UP or LO follows, is LO+ alone: the same end either way. */
            j = ctok_cjk3_run(s, n, pos + 3, tab, CJK3_LET, &stop);
            e = ctok_cjk3_let_end(s, n, j, stop, mode);
        } else if (c == CJK3_HAN) {
            /* Kimi's first alternative, greedy: every 3-byte Han letter is HAN, the other Han characters OTHER,
             * and none is below U+0800, so only OTHER or a 4-byte lead (a Han of the supplementary planes) may
             * go on; LET, PUNCT, ASCII, 2-byte and bytes that are no character end it. */
            j = ctok_cjk3_run(s, n, pos + 3, tab, CJK3_HAN, &stop);
            e = (stop == CJK3_OTHER || (j < n && s[j] >= 0xF0)) ? -1 : j;   /* j < n checked first */
        } else if (c == CJK3_PUNCT) {
            /* [^\r\n\p{L}\p{N}]? takes it as the letter alternatives' prefix when LET follows (UP or LO, the
             * prefix tried first); else neither letter alternative matches (PUNCT is not UP, LO or \p{L}) and
             * the punctuation alternative takes it and the run after it. */
            c1 = ctok_cjk3_at(s, n, pos + 3, tab);
            if (c1 == CJK3_LET) {
                j = ctok_cjk3_run(s, n, pos + 6, tab, CJK3_LET, &stop);
                e = ctok_cjk3_let_end(s, n, j, stop, mode);
            } else if (c1 == CJK3_PUNCT) {
                j = ctok_cjk3_run(s, n, pos + 6, tab, CJK3_PUNCT, &stop);
                e = ctok_cjk3_punct_end(s, n, j, stop, mode);
            } else if (c1 == CJK3_NONE && pos + 3 < n && ((s[pos + 3] | 0x20u) - 97u) < 26u) {
                e = -1;                             /* pos + 3 < n: an ASCII letter after the prefix */
            } else {
                j = pos + 3;
                stop = c1;
                e = ctok_cjk3_punct_end(s, n, j, stop, mode);
            }
        } else {
            break;
        }
        if (e < 0)
            break;
        ends[k++] = e;                              /* k < room: ends holds room */
        if (e >= n)
            break;
        /* The character at the end is the one that stopped the run, unless [\r\n]* went on past it. */
        c = (e == j) ? stop : ctok_cjk3_at(s, n, e, tab);
        pos = e;
    }
    return k;
}

/* The tables (Tekken uses o200k's) and each PRETOK_* kind's mode (-1: none), set at import by _pretok.pyx. */
static uint8_t ctok_cjk3_tabs[3][CTOK_CJK3_BYTES];
static int ctok_cjk3_kind_mode[16];

static void ctok_cjk3_init(int kind_kimi, int kind_o200k, int kind_tekken, int kind_cl100k, int kind_llama3,
                           int kind_qwen) {
    int i;
    ctok_cjk3_fill(ctok_cjk3_tabs[0], CJK3_KIMI);
    ctok_cjk3_fill(ctok_cjk3_tabs[1], CJK3_O200K);
    ctok_cjk3_fill(ctok_cjk3_tabs[2], CJK3_CL100K);
    for (i = 0; i < 16; i++)
        ctok_cjk3_kind_mode[i] = -1;
    ctok_cjk3_kind_mode[kind_kimi & 15] = CJK3_KIMI;
    ctok_cjk3_kind_mode[kind_o200k & 15] = CJK3_O200K;
    ctok_cjk3_kind_mode[kind_tekken & 15] = CJK3_TEKKEN;
    ctok_cjk3_kind_mode[kind_cl100k & 15] = CJK3_CL100K;
    ctok_cjk3_kind_mode[kind_llama3 & 15] = CJK3_CL100K;
    ctok_cjk3_kind_mode[kind_qwen & 15] = CJK3_CL100K;
}

/* ctok_cjk3_pieces for a PRETOK_* kind (0 for a kind without a mode).  The kind and not the table and mode, and
 * not inlined: the scanners' loops keep no more values live for it. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#endif
static Py_ssize_t ctok_cjk3_kind_pieces(int kind, const unsigned char* s, Py_ssize_t n, Py_ssize_t pos,
                                        Py_ssize_t* ends, Py_ssize_t room) {
    int mode = ctok_cjk3_kind_mode[kind & 15];
    if (mode < 0)
        return 0;
    /* mode 0..3: tables 0 (Kimi), 1 (o200k, Tekken), 2 (cl100k family) */
    return ctok_cjk3_pieces(s, n, pos, ends, room, ctok_cjk3_tabs[mode == CJK3_KIMI ? 0 : mode == CJK3_CL100K ? 2 : 1],
                            mode);
}

#endif
