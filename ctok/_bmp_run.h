/* Runs of 3-byte UTF-8 characters of one class for the pretokenizer (ctok/_pretok.pyx).
 *
 * Why: Japanese and Chinese text is mostly runs of 3-byte letters, and ctok_char takes each through its
 * lead-byte tests, the continuation, overlong and surrogate tests and three dependent table loads.  Here a
 * character costs one 4-byte load, one test of its UTF-8 shape and one bit of an 8 KB set: a bit per BMP
 * code point, 64 to a word, so that the word's index is the lead byte's low 4 bits and the first
 * continuation's 6, and the bit's the second continuation's 6 (no code point to assemble).
 *
 * Contract: ctok_bmp3_run(s, n, i, bits), 0 <= i <= n, returns the first j = i + 3m (m >= 0) such that
 * fewer than 4 bytes remain at j or the bytes at j are not a 3-byte character whose bit is set; the
 * callers' general loop goes on from j (so the last character of a segment always takes it).  A set made
 * by ctok_bmp3_fill holds no code point below U+0800 (overlong forms) or in U+D800..U+DFFF (surrogates),
 * so every character taken is one that ctok_char decodes as 3 bytes with flags of the set's class.
 */
#ifndef CTOK_BMP_RUN_H
#define CTOK_BMP_RUN_H
#include <stdint.h>
#include <string.h>
#include <Python.h>
#include "_unicode_tables.h"
#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
#include <emmintrin.h>
#endif

#define CTOK_BMP_WORDS 1024                 /* 0x10000 / 64 */

static inline Py_ssize_t ctok_bmp3_run(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, const uint64_t* bits) {
    while (i + 4 <= n) {
        uint32_t w, hi;
        memcpy(&w, s + i, 4);               /* s[i:i+4]: i + 4 <= n */
        /* Little-endian: w's low byte is the lead.  A lead 0xE0..0xEF and two continuation bytes. */
        if ((w & 0xC0C0F0u) != 0x8080E0u)
            break;
        hi = ((w & 0x0Fu) << 6) | ((w >> 8) & 0x3Fu);          /* cp >> 6 < 1024 = CTOK_BMP_WORDS */
        if (!((bits[hi] >> ((w >> 16) & 0x3Fu)) & 1u))
            break;
        i += 3;
    }
    return i;
}

/* The set of code points cp_lo..cp_hi-1 (surrogates left out) whose flags f have some bit of `any` (or any = 0),
 * no bit of `none` and every bit of `must`, into `words` words of bits (a bit per code point). */
static void ctok_bmp_fill(uint64_t* bits, uint32_t words, uint32_t cp_lo, uint32_t cp_hi, uint16_t any,
                          uint16_t none, uint16_t must) {
    uint32_t cp;
    memset(bits, 0, words * sizeof(uint64_t));
    for (cp = cp_lo; cp < cp_hi; cp++) {
        uint16_t f;
        if (cp - 0xD800u < 0x800u)
            continue;
        f = ctok_cp_flags(cp);
        if ((any == 0 || (f & any)) && !(f & none) && (f & must) == must)
            bits[cp >> 6] |= (uint64_t)1 << (cp & 63);       /* cp < cp_hi <= 64 * words */
    }
}

/* The 3-byte characters (U+0800..U+FFFF) whose flags f satisfy (f & mask) == val. */
static void ctok_bmp3_fill(uint64_t* bits, uint16_t mask, uint16_t val) {
    ctok_bmp_fill(bits, CTOK_BMP_WORDS, 0x800, 0x10000, 0, mask & ~val, val);
}

/* The same for 2-byte characters (Cyrillic, Greek, Arabic, Hebrew, Latin with diacritics...): a bit per code
 * point below U+0800, indexed by the code point itself (the lead's low 5 bits and the continuation's 6).
 * ctok_bmp2_run(s, n, i, bits), 0 <= i <= n, returns the first j = i + 2m (m >= 0) such that fewer than 2
 * bytes remain at j or the bytes at j are not a 2-byte character whose bit is set.  A set made by
 * ctok_bmp2_fill holds no code point below U+0080, so overlong forms (leads C0, C1) always stop the run. */
#define CTOK_BMP2_WORDS 32                  /* 0x800 / 64 */

/* The bytes at i (i + 2 <= n) are a 2-byte character whose bit is set in bits. */
static inline int ctok_bmp2_at(const unsigned char* s, Py_ssize_t i, const uint64_t* bits) {
    uint32_t b0 = s[i], b1 = s[i + 1], cp;
    if ((b0 & 0xE0u) != 0xC0u || (b1 & 0xC0u) != 0x80u)
        return 0;
    cp = ((b0 & 0x1Fu) << 6) | (b1 & 0x3Fu);            /* < 0x800: cp >> 6 < 32 = CTOK_BMP2_WORDS */
    return (int)((bits[cp >> 6] >> (cp & 63)) & 1u);
}

static inline Py_ssize_t ctok_bmp2_run(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, const uint64_t* bits) {
    while (i + 2 <= n && ctok_bmp2_at(s, i, bits))      /* i + 2 <= n checked first */
        i += 2;
    return i;
}

/* ctok_bmp2_run for a set that holds the code points [lo_a, lo_a + len_a), [lo_b, lo_b + len_b) and [lo_c,
 * lo_c + len_c) (the Cyrillic, Greek and Arabic letters, say; the third range may be empty):
 * 8 characters a step are checked at once against the three ranges (SSE2), and ctok_bmp2_run goes on from the
 * first that is not in them.  Why: a word's letters end at a different count in every word, and the
 * one-character loop mispredicted its exit about once a word (Russian, o200k: 115K of a warm pass's 306K); a
 * word of up to 8 letters in the ranges now ends at a count read from a mask.  The ranges must lie inside the
 * set: a character they take is one the loop would take. */
static inline Py_ssize_t ctok_bmp2_run_ranges(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, const uint64_t* bits,
                                              int lo_a, int len_a, int lo_b, int len_b, int lo_c, int len_c) {
#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
    const __m128i low8 = _mm_set1_epi16(0x00FF), ones = _mm_set1_epi16(-1);
    while (i + 16 <= n) {
        __m128i v = _mm_loadu_si128((const __m128i*)(s + i));          /* s[i:i+16]: i + 16 <= n */
        /* Little-endian 16-bit lanes: a character's lead byte low, its continuation high. */
        __m128i lead = _mm_and_si128(v, low8), cont = _mm_srli_epi16(v, 8);
        __m128i shape = _mm_and_si128(
            _mm_cmpeq_epi16(_mm_and_si128(lead, _mm_set1_epi16(0xE0)), _mm_set1_epi16(0xC0)),
            _mm_cmpeq_epi16(_mm_and_si128(cont, _mm_set1_epi16(0xC0)), _mm_set1_epi16(0x80)));
        __m128i cp = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(lead, _mm_set1_epi16(0x1F)), 6),
                                  _mm_and_si128(cont, _mm_set1_epi16(0x3F)));      /* < 0x800 */
        __m128i xa = _mm_sub_epi16(cp, _mm_set1_epi16((short)lo_a)), xb = _mm_sub_epi16(cp, _mm_set1_epi16((short)lo_b));
        /* 0 <= x < len, in signed lanes: cp < 0x800 and the ranges lie below it, so x cannot wrap */
        __m128i in_a = _mm_and_si128(_mm_cmpgt_epi16(xa, ones), _mm_cmplt_epi16(xa, _mm_set1_epi16((short)len_a)));
        __m128i in_b = _mm_and_si128(_mm_cmpgt_epi16(xb, ones), _mm_cmplt_epi16(xb, _mm_set1_epi16((short)len_b)));
        __m128i in = _mm_or_si128(in_a, in_b);
        unsigned ok;
        if (len_c > 0) {                            /* a constant where inlined: no test for the two-range callers */
            __m128i xc = _mm_sub_epi16(cp, _mm_set1_epi16((short)lo_c));
            in = _mm_or_si128(in, _mm_and_si128(_mm_cmpgt_epi16(xc, ones), _mm_cmplt_epi16(xc, _mm_set1_epi16((short)len_c))));
        }
        ok = (unsigned)_mm_movemask_epi8(_mm_and_si128(shape, in));
        if (ok != 0xFFFFu) {
            i += __builtin_ctz(~ok) & ~1;          /* 2 bytes per character in the ranges before the first not */
            break;
        }
        i += 16;
    }
#else
    (void)lo_a; (void)len_a; (void)lo_b; (void)len_b; (void)lo_c; (void)len_c;
#endif
    return ctok_bmp2_run(s, n, i, bits);
}

static void ctok_bmp2_fill(uint64_t* bits, uint16_t mask, uint16_t val) {
    ctok_bmp_fill(bits, CTOK_BMP2_WORDS, 0x80, 0x800, 0, mask & ~val, val);
}

/* DeepSeek's letter runs ([\p{L}\p{M}] within one group of its CJK split): some bit of `any`, none of
 * `none`, every bit of `must`. */
static void ctok_bmp3_fill_any(uint64_t* bits, uint16_t any, uint16_t none, uint16_t must) {
    ctok_bmp_fill(bits, CTOK_BMP_WORDS, 0x800, 0x10000, any, none, must);
}

static void ctok_bmp2_fill_any(uint64_t* bits, uint16_t any, uint16_t none, uint16_t must) {
    ctok_bmp_fill(bits, CTOK_BMP2_WORDS, 0x80, 0x800, any, none, must);
}

#endif
