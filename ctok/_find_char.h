/* ctok_find_char(text, ch, start, end): the first index i in [start, end) with text[i] == ch, else -1, for an
 * exact, ready str and 0 <= start, end <= len(text): what PyUnicode_FindChar(text, ch, start, end, 1) answers.
 *
 * Why not PyUnicode_FindChar: it is the test a text takes before the compiled route (_encoder.holds_none looks
 * for the first characters of added tokens, "<" for every shared tokenizer.json file), on every call.  There it
 * cost about 110 instructions on a 32-character text (argument checks, a call through the kind switch), a
 * third of the route's overhead over a rank file's.  And on 2-byte strings CPython searches for the low byte
 * of ch with memchr and checks each hit: "<" (0x3C) is the low byte of Cyrillic U+043C, so Russian text
 * stopped every few characters (callgrind, Russian Bible: 1.33M instructions for the test, 1.4% of encoding).
 * Here 1-byte strings use memchr, the others compare whole code units 16 at a time where SSE2 exists.
 */
#ifndef CTOK_FIND_CHAR_H
#define CTOK_FIND_CHAR_H
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
#include <emmintrin.h>
#define CTOK_FIND_SSE2 1
#endif

/* ctok_find_byte(s, p, n, b): the first i in [p, n) with s[i] == b, or n, over UTF-8 bytes (the SentencePiece
 * word split's search for its marker).  Words are a few bytes long: one 16-byte block answers most calls, with
 * no library call (memchr costs more than the search for such distances). */
static inline Py_ssize_t ctok_find_byte(const uint8_t* s, Py_ssize_t p, Py_ssize_t n, uint8_t b) {
#ifdef CTOK_FIND_SSE2
    const __m128i want = _mm_set1_epi8((char)b);
    while (p + 16 <= n) {                                   /* reads s[p:p + 16], inside s[0:n] */
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i*)(s + p)), want));
        if (m)
            return p + __builtin_ctz(m);
        p += 16;
    }
#endif
    while (p < n && s[p] != b)
        p++;
    return p;
}

static Py_ssize_t ctok_find_char_ucs2(const uint16_t* s, uint16_t ch, Py_ssize_t i, Py_ssize_t end) {
#ifdef CTOK_FIND_SSE2
    const __m128i want = _mm_set1_epi16((short)ch);
    for (; i + 16 <= end; i += 16) {                        /* reads s[i:i + 16], inside [start, end) */
        __m128i a = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i*)(s + i)), want);
        __m128i b = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i*)(s + i + 8)), want);
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_packs_epi16(a, b));     /* bit k: s[i + k] == ch */
        if (m != 0)
            return i + __builtin_ctz(m);
    }
#endif
    for (; i < end; i++)
        if (s[i] == ch)
            return i;
    return -1;
}

static Py_ssize_t ctok_find_char_ucs4(const uint32_t* s, uint32_t ch, Py_ssize_t i, Py_ssize_t end) {
#ifdef CTOK_FIND_SSE2
    const __m128i want = _mm_set1_epi32((int)ch);
    for (; i + 8 <= end; i += 8) {                          /* reads s[i:i + 8], inside [start, end) */
        __m128i a = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i*)(s + i)), want);
        __m128i b = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i*)(s + i + 4)), want);
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_packs_epi16(_mm_packs_epi32(a, b), _mm_setzero_si128()));
        if (m != 0)                                         /* bit k: s[i + k] == ch (k < 8) */
            return i + __builtin_ctz(m);
    }
#endif
    for (; i < end; i++)
        if (s[i] == ch)
            return i;
    return -1;
}

static Py_ssize_t ctok_find_char(PyObject* text, Py_UCS4 ch, Py_ssize_t start, Py_ssize_t end) {
    const void* data = PyUnicode_DATA(text);
    const uint8_t* hit;
    if (start >= end)
        return -1;
    switch (PyUnicode_KIND(text)) {
    case PyUnicode_1BYTE_KIND:
        if (ch > 0xFF)
            return -1;
        hit = (const uint8_t*)memchr((const uint8_t*)data + start, (int)ch, (size_t)(end - start));
        return hit == NULL ? -1 : hit - (const uint8_t*)data;
    case PyUnicode_2BYTE_KIND:
        return ch > 0xFFFF ? -1 : ctok_find_char_ucs2((const uint16_t*)data, (uint16_t)ch, start, end);
    default:
        return ctok_find_char_ucs4((const uint32_t*)data, (uint32_t)ch, start, end);
    }
}

#endif
