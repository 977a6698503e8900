/* UTF-8 of a Python str for the encoder, without CPython's per-str UTF-8 cache.
 *
 * Why: PyUnicode_AsUTF8AndSize converts a non-ASCII str one code point at a time (about 11 instructions
 * per byte on English text with a few curly quotes: as much as a tenth of a first-pass encode) and then
 * keeps the copy inside the str for the str's lifetime.  Here runs of ASCII go 8 or 16 code points per
 * step and the copy belongs to the caller, who frees it after encoding.
 *
 * Contract: ctok_utf8_view(text, &n, &owned) returns a pointer to the UTF-8 form of `text` (an exact,
 * ready str) and sets n to its length in bytes.  When it made a copy, *owned is that buffer (the caller
 * frees it); otherwise *owned is NULL and the pointer is into the str (ASCII data or CPython's cached
 * UTF-8).  Returns NULL with no exception set when the text holds a surrogate code point (the caller
 * takes its own path: tiktoken's rule pairs surrogates up before replacing lone ones), and NULL with
 * MemoryError set when the copy cannot be allocated.
 */
#ifndef CTOK_UTF8_H
#define CTOK_UTF8_H

#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Code point c (not a surrogate) as UTF-8 at d; returns the new end. */
static inline uint8_t* ctok_put_utf8(uint8_t* d, uint32_t c) {
    if (c < 0x80) { *d++ = (uint8_t)c; }
    else if (c < 0x800) { *d++ = (uint8_t)(0xC0 | (c >> 6)); *d++ = (uint8_t)(0x80 | (c & 0x3F)); }
    else if (c < 0x10000) {
        *d++ = (uint8_t)(0xE0 | (c >> 12)); *d++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        *d++ = (uint8_t)(0x80 | (c & 0x3F));
    } else {
        *d++ = (uint8_t)(0xF0 | (c >> 18)); *d++ = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
        *d++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F)); *d++ = (uint8_t)(0x80 | (c & 0x3F));
    }
    return d;
}

/* Each converter writes at most (bytes per code point of its kind's widest character) * n bytes and
 * returns the number written, or -1 at a surrogate. */
static Py_ssize_t ctok_utf8_from_ucs1(const uint8_t* s, Py_ssize_t n, uint8_t* out) {
    uint8_t* d = out;
    Py_ssize_t i = 0, end;
#if defined(__SSE2__)
    while (i + 16 <= n) {                                   /* reads s[i:i+16], inside s[0:n] */
        __m128i v = _mm_loadu_si128((const __m128i*)(s + i));
        if (_mm_movemask_epi8(v) == 0) {                    /* no byte >= 0x80: 16 ASCII characters */
            _mm_storeu_si128((__m128i*)d, v);
            d += 16; i += 16;
            continue;
        }
        for (end = i + 16; i < end; i++) d = ctok_put_utf8(d, s[i]);
    }
#endif
    for (; i < n; i++) d = ctok_put_utf8(d, s[i]);
    return d - out;
}

#if defined(__SSE2__)
/* The 8 code points s[0:8] (loaded in v) as UTF-8 at d: packed when all are ASCII.  Returns the new end, or
 * NULL at a surrogate. */
static inline uint8_t* ctok_ucs2_block8(const uint16_t* s, __m128i v, uint8_t* d) {
    const __m128i high = _mm_set1_epi16((short)0xFF80), zero = _mm_setzero_si128();
    int k;
    if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(v, high), zero)) == 0xFFFF) {
        _mm_storel_epi64((__m128i*)d, _mm_packus_epi16(v, v));       /* 8 ASCII code points, one byte each */
        return d + 8;
    }
    for (k = 0; k < 8; k++) {
        if (s[k] - 0xD800u < 0x800u) return NULL;
        d = ctok_put_utf8(d, s[k]);
    }
    return d;
}
#endif

static Py_ssize_t ctok_utf8_from_ucs2(const uint16_t* s, Py_ssize_t n, uint8_t* out) {
    uint8_t* d = out;
    Py_ssize_t i = 0;
    uint32_t c;
#if defined(__SSE2__)
    const __m128i high = _mm_set1_epi16((short)0xFF80), zero = _mm_setzero_si128();
    /* 16 code points per step when they are ASCII (English with a few typographic quotes is a 2-byte str
       that is mostly ASCII); a block that is not goes 8 at a time. */
    while (i + 16 <= n) {                                   /* reads s[i:i+16], inside s[0:n] */
        __m128i a = _mm_loadu_si128((const __m128i*)(s + i)), b = _mm_loadu_si128((const __m128i*)(s + i + 8));
        if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(_mm_or_si128(a, b), high), zero)) == 0xFFFF) {
            _mm_storeu_si128((__m128i*)d, _mm_packus_epi16(a, b));   /* 16 ASCII code points, a byte each */
            d += 16; i += 16;
            continue;
        }
        if ((d = ctok_ucs2_block8(s + i, a, d)) == NULL) return -1;
        i += 8;
    }
    while (i + 8 <= n) {                                    /* reads s[i:i+8], inside s[0:n] */
        if ((d = ctok_ucs2_block8(s + i, _mm_loadu_si128((const __m128i*)(s + i)), d)) == NULL) return -1;
        i += 8;
    }
#endif
    for (; i < n; i++) {
        c = s[i];
        if (c - 0xD800u < 0x800u) return -1;
        d = ctok_put_utf8(d, c);
    }
    return d - out;
}

static Py_ssize_t ctok_utf8_from_ucs4(const uint32_t* s, Py_ssize_t n, uint8_t* out) {
    uint8_t* d = out;
    Py_ssize_t i = 0, end;
    uint32_t c;
#if defined(__SSE2__)
    const __m128i high = _mm_set1_epi32((int)0xFFFFFF80), zero = _mm_setzero_si128();
    while (i + 4 <= n) {                                    /* reads s[i:i+4], inside s[0:n] */
        __m128i v = _mm_loadu_si128((const __m128i*)(s + i));
        if (_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_and_si128(v, high), zero)) == 0xFFFF) {
            __m128i w = _mm_packs_epi32(v, v);              /* values < 0x80: the packs cannot saturate */
            int four = _mm_cvtsi128_si32(_mm_packus_epi16(w, w));
            memcpy(d, &four, 4);
            d += 4; i += 4;
            continue;
        }
        for (end = i + 4; i < end; i++) {
            c = s[i];
            if (c - 0xD800u < 0x800u) return -1;
            d = ctok_put_utf8(d, c);
        }
    }
#endif
    for (; i < n; i++) {
        c = s[i];
        if (c - 0xD800u < 0x800u) return -1;
        d = ctok_put_utf8(d, c);
    }
    return d - out;
}

/* The copying half of ctok_utf8_view, for a str that ctok_utf8_view_cheap left to it: callable without the
 * GIL (it reads the immutable str and calls malloc only, so the caller must keep the str alive).  Returns
 * the buffer (the caller frees it) and sets *n, or NULL with *status 1 at a surrogate, 2 when out of memory. */
static char* ctok_utf8_copy_nogil(PyObject* text, Py_ssize_t* n, int* status) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(text), got;
    int kind = PyUnicode_KIND(text);
    /* 2, 3 or 4 bytes at most per code point of a 1-, 2- or 4-byte kind; + 1 so that malloc(0) is never asked. */
    uint8_t* buf = (uint8_t*)malloc((size_t)len * (kind == PyUnicode_1BYTE_KIND ? 2 : kind == PyUnicode_2BYTE_KIND ? 3 : 4) + 1);
    *status = 0;
    if (buf == NULL) { *status = 2; return NULL; }
    if (kind == PyUnicode_1BYTE_KIND) got = ctok_utf8_from_ucs1((const uint8_t*)PyUnicode_DATA(text), len, buf);
    else if (kind == PyUnicode_2BYTE_KIND) got = ctok_utf8_from_ucs2((const uint16_t*)PyUnicode_DATA(text), len, buf);
    else got = ctok_utf8_from_ucs4((const uint32_t*)PyUnicode_DATA(text), len, buf);
    if (got < 0) { free(buf); *status = 1; return NULL; }
    *n = got;
    return (char*)buf;
}

/* The part of ctok_utf8_view that needs no copy (with the GIL): 1 with *s, *n the str's own UTF-8 when it has
 * one (ASCII data or CPython's cached UTF-8, free to use); 0 when ctok_utf8_copy_nogil must make it; -1 with
 * an exception. */
static int ctok_utf8_view_cheap(PyObject* text, const char** s, Py_ssize_t* n) {
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) return -1;
#endif
    if (PyUnicode_IS_ASCII(text)) {
        *n = PyUnicode_GET_LENGTH(text);
        *s = (const char*)PyUnicode_DATA(text);
        return 1;
    }
#if PY_VERSION_HEX < 0x030E0000
    if (((PyCompactUnicodeObject*)text)->utf8 != NULL) {
        *n = ((PyCompactUnicodeObject*)text)->utf8_length;
        *s = ((PyCompactUnicodeObject*)text)->utf8;
        return 1;
    }
#endif
    return 0;
}

/* See the contract at the top: the cheap view, else ctok's own copy. */
static const char* ctok_utf8_view(PyObject* text, Py_ssize_t* n, char** owned) {
    const char* s;
    int status, cheap = ctok_utf8_view_cheap(text, &s, n);
    *owned = NULL;
    if (cheap < 0) return NULL;
    if (cheap) return s;
    *owned = ctok_utf8_copy_nogil(text, n, &status);
    if (status == 2) PyErr_NoMemory();
    return *owned;
}

#endif
