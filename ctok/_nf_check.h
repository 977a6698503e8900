/* Unicode normalization quick check (UAX #15 section 9) over a str's own code points, for the compiled route
 * of tokenizer.json files with an NFC / NFKC / NFD / NFKD normalizer (_encoder.unchanged_by).
 *
 * Why: unicodedata2.normalize(form, text) answered "is text its own normal form?" for the whole text, at about
 * 1 to 1.5 ns a character even on ASCII runs, and when the answer was no it normalized the whole text just to
 * say so (the Python docs, one KELVIN SIGN in 1.2M characters: 20-27 ms), after which the slow route normalized
 * again.  Here ASCII goes 16 code points per step, so do 16 characters that are all boundaries (CJK, Cyrillic,
 * Hangul syllables under NFC) through one byte table, and the first doubtful character is found without
 * normalizing anything.
 *
 * Contract: ctok_nf_scan(text, i, mask) runs the quick check from index i (a position where nothing before
 * interacts with what follows: 0 or a ctok_nf_boundary character) and returns the index of the first character
 * at which it cannot answer Yes, or the length when it answers Yes for text[i:].  mask is an OR of CTOK_NF_*
 * (from _unicode_tables.h), one per form; Yes means text[i:] is its own normal form under each of them.
 *
 * Why Yes is exact (the standard's argument): a character is Quick_Check=Yes for a form when it can occur in
 * that form's output whatever surrounds it: the form leaves it as it is alone (not No), and for NFC / NFKC
 * neither it nor the first character of its decomposition is the second of a canonical composition (not
 * Maybe; the second half is new with Unicode 16, see tools/gen_unicode_tables.py), so nothing before it can
 * absorb it.  A text of such characters whose combining classes never decrease between two starters needs no
 * reordering (canonical order holds), no decomposition (each is its own decomposition, or for NFC / NFKC
 * recomposes to itself) and no new composition (no character can be a composition's second), so the form
 * leaves it as it is.  In particular a text of starters that are all Yes (the common case: ASCII, CJK,
 * Cyrillic, Hangul syllables under NFC, emoji) is always normalized, and Arabic or Hebrew points in canonical
 * order pass too.  tools/gen_unicode_tables.py checks every code point of the table against
 * unicodedata2.normalize in several contexts before writing it, tests/test_nf_quick_check.py against
 * unicodedata2 and HF's normalizers.  A "No" from here only means "not certainly": the caller decides exactly.
 *
 * Lone surrogates are starters that every form leaves alone (as unicodedata2 does), so they pass: the encoder
 * that follows rejects them, as before.
 */
#ifndef CTOK_NF_CHECK_H
#define CTOK_NF_CHECK_H
#include <Python.h>
#include <stdint.h>
#include "_unicode_tables.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* One character of the quick check: 0 when it stops it (not Yes for a form of mask, or a mark that sorts
 * before the mark ahead of it); *last is the previous character's combining class. */
static inline int ctok_nf_ok(uint32_t c, unsigned mask, unsigned* last) {
    unsigned v = ctok_nf_props(c), cc = v & 0xFFu;
    if ((v & mask) != 0 || (cc != 0 && *last > cc)) return 0;
    *last = cc;
    return 1;
}

/* A character that ends every interaction under the forms of mask: a Yes starter (nothing before it composes
 * with it or reorders past it), so normalizing text[:j] and text[j:] apart equals normalizing text. */
static inline int ctok_nf_boundary(uint32_t c, unsigned mask) {
    return (ctok_nf_props(c) & (mask | 0xFFu)) == 0;
}

/* The quick check over the 16 code points s[0:16] without a branch per character: 1 when all pass, with
 * *last updated; 0 leaves *last as it was, for the character-by-character pass that finds the culprit.  Marks
 * in Arabic or Hebrew text come where a branch cannot predict them (Arabic, 1001 Nights: 1.07 -> 0.48 ns a
 * character).  Not inlined: inlined, GCC kept the 16 code points loaded for the byte-table test in registers
 * for this one too, spilling them, and the test that serves CJK took twice the instructions. */
#define CTOK_NF_BLOCK16_FN(name, type)                                                           \
    static __attribute__((noinline)) int name(const type* s, unsigned mask, unsigned* last) {   \
        unsigned bad = 0, l = *last, v, cc;                                                      \
        int k;                                                                                   \
        for (k = 0; k < 16; k++) {                                                               \
            v = ctok_nf_props(s[k]);                                                             \
            cc = v & 0xFFu;                                                                      \
            bad |= (v & mask) | ((cc != 0) & (l > cc));                                          \
            l = cc;                                                                              \
        }                                                                                        \
        if (bad) return 0;                                                                       \
        *last = l;                                                                               \
        return 1;                                                                                \
    }
CTOK_NF_BLOCK16_FN(ctok_nf_block16_ucs1, uint8_t)
CTOK_NF_BLOCK16_FN(ctok_nf_block16_ucs2, uint16_t)
CTOK_NF_BLOCK16_FN(ctok_nf_block16_ucs4, uint32_t)

/* s[0:16] all ASCII (code points < 0x80), per string kind; 0 where SSE2 is missing (the scan then goes on to
 * the other tests). */
static inline int ctok_nf_ascii16_ucs1(const uint8_t* s) {
#if defined(__SSE2__)
    return _mm_movemask_epi8(_mm_loadu_si128((const __m128i*)s)) == 0;
#else
    (void)s;
    return 0;
#endif
}

static inline int ctok_nf_ascii16_ucs2(const uint16_t* s) {
#if defined(__SSE2__)
    const __m128i high = _mm_set1_epi16((short)0xFF80), zero = _mm_setzero_si128();
    __m128i a = _mm_loadu_si128((const __m128i*)s), b = _mm_loadu_si128((const __m128i*)(s + 8));
    return _mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(_mm_or_si128(a, b), high), zero)) == 0xFFFF;
#else
    (void)s;
    return 0;
#endif
}

static inline int ctok_nf_ascii16_ucs4(const uint32_t* s) {
#if defined(__SSE2__)
    const __m128i high = _mm_set1_epi32((int)0xFFFFFF80), zero = _mm_setzero_si128();
    __m128i v = _mm_or_si128(_mm_or_si128(_mm_loadu_si128((const __m128i*)s), _mm_loadu_si128((const __m128i*)(s + 4))),
                             _mm_or_si128(_mm_loadu_si128((const __m128i*)(s + 8)),
                                          _mm_loadu_si128((const __m128i*)(s + 12))));
    return _mm_movemask_epi8(_mm_cmpeq_epi32(_mm_and_si128(v, high), zero)) == 0xFFFF;
#else
    (void)s;
    return 0;
#endif
}

/* ctok_nf_bmp_nonboundary of a code point of each kind: every bit set beyond the BMP (the byte table covers
 * the BMP only; such a block then takes the slower tests). */
static inline unsigned ctok_nf_nonboundary_ucs1(uint8_t c) { return ctok_nf_bmp_nonboundary[c]; }
static inline unsigned ctok_nf_nonboundary_ucs2(uint16_t c) { return ctok_nf_bmp_nonboundary[c]; }
static inline unsigned ctok_nf_nonboundary_ucs4(uint32_t c) {
    return c <= 0xFFFF ? ctok_nf_bmp_nonboundary[c] : 0xFu;              /* read only for c <= 0xFFFF */
}

/* Each scanner: 16 code points per step when they are all ASCII; else 16 per step when all are BMP boundary
 * characters for every form of mask (CJK, Cyrillic, Hangul syllables under NFC: 3 instructions a character
 * against 20 through ctok_nf_ok), the OR of their ctok_nf_bmp_nonboundary bytes taken without a branch per
 * character; else the block check, else one at a time.  A block of boundary characters leaves the last
 * combining class at 0.  forms = mask >> 8, the forms' bits in ctok_nf_bmp_nonboundary.  Returns the index of
 * the first code point from i that the check doubts, or n. */
#define CTOK_NF_SCAN_FN(name, type, ascii16, nonboundary, block16)                                \
    static Py_ssize_t name(const type* s, Py_ssize_t i, Py_ssize_t n, unsigned mask) {           \
        unsigned last = 0, any, forms = mask >> 8;                                               \
        Py_ssize_t k, end;                                                                       \
        while (i + 16 <= n) {                           /* reads s[i:i+16], inside s[0:n] */     \
            if (ascii16(s + i)) {                                                                \
                last = 0;                                                                        \
                i += 16;                                                                         \
                continue;                                                                        \
            }                                                                                    \
            for (any = 0, k = 0; k < 16; k++)                                                    \
                any |= nonboundary(s[i + k]);                                                    \
            if ((any & forms) == 0) {                                                            \
                last = 0;                                                                        \
                i += 16;                                                                         \
                continue;                                                                        \
            }                                                                                    \
            if (block16(s + i, mask, &last)) {          /* reads s[i:i+16] */                    \
                i += 16;                                                                         \
                continue;                                                                        \
            }                                                                                    \
            for (end = i + 16; i < end; i++)            /* end <= n */                           \
                if (!ctok_nf_ok(s[i], mask, &last)) return i;                                    \
        }                                                                                        \
        for (; i < n; i++)                                                                       \
            if (!ctok_nf_ok(s[i], mask, &last)) return i;                                        \
        return n;                                                                                \
    }
CTOK_NF_SCAN_FN(ctok_nf_scan_ucs1, uint8_t, ctok_nf_ascii16_ucs1, ctok_nf_nonboundary_ucs1, ctok_nf_block16_ucs1)
CTOK_NF_SCAN_FN(ctok_nf_scan_ucs2, uint16_t, ctok_nf_ascii16_ucs2, ctok_nf_nonboundary_ucs2, ctok_nf_block16_ucs2)
CTOK_NF_SCAN_FN(ctok_nf_scan_ucs4, uint32_t, ctok_nf_ascii16_ucs4, ctok_nf_nonboundary_ucs4, ctok_nf_block16_ucs4)

/* text: an exact, ready str; 0 <= i <= len(text). */
static Py_ssize_t ctok_nf_scan(PyObject* text, Py_ssize_t i, unsigned mask) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const void* data = PyUnicode_DATA(text);
    switch (PyUnicode_KIND(text)) {
    case PyUnicode_1BYTE_KIND: return ctok_nf_scan_ucs1((const uint8_t*)data, i, n, mask);
    case PyUnicode_2BYTE_KIND: return ctok_nf_scan_ucs2((const uint16_t*)data, i, n, mask);
    default: return ctok_nf_scan_ucs4((const uint32_t*)data, i, n, mask);
    }
}

/* The quick check from index i (0 or a boundary character) character by character, over at most `limit`
 * characters: the index of the first character at which it cannot answer Yes, else min(i + limit, len(text)).
 * For the short gaps between doubtful stretches, where ctok_nf_scan's 16-character steps fail at once. */
static Py_ssize_t ctok_nf_scan_short(PyObject* text, Py_ssize_t i, Py_ssize_t limit, unsigned mask) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), end = limit < n - i ? i + limit : n;
    int kind = PyUnicode_KIND(text);
    const void* data = PyUnicode_DATA(text);
    unsigned last = 0;
    for (; i < end; i++)                                    /* i < end <= n */
        if (!ctok_nf_ok(PyUnicode_READ(kind, data, i), mask, &last)) return i;
    return end;
}

/* The last boundary character at or before p - 1 and not before lo, else lo (lo: 0 or a boundary), so that
 * text[result:] can be normalized apart from what precedes it; 0 <= lo <= p <= len(text). */
static Py_ssize_t ctok_nf_boundary_before(PyObject* text, Py_ssize_t p, Py_ssize_t lo, unsigned mask) {
    int kind = PyUnicode_KIND(text);
    const void* data = PyUnicode_DATA(text);
    while (p > lo && !ctok_nf_boundary(PyUnicode_READ(kind, data, p - 1), mask))   /* lo <= p - 1 < len */
        p--;
    return p > lo ? p - 1 : lo;
}

/* The first boundary character after index p, else len(text); 0 <= p < len(text). */
static Py_ssize_t ctok_nf_boundary_after(PyObject* text, Py_ssize_t p, unsigned mask) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void* data = PyUnicode_DATA(text);
    for (p++; p < n; p++)                                   /* p < n */
        if (ctok_nf_boundary(PyUnicode_READ(kind, data, p), mask)) break;
    return p;
}

#endif
