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
 *
 * SentencePiece-style files (Mistral 7B, Llama 2) encode their text with every space replaced by a word
 * marker (U+2581): ctok_utf8_write takes an optional ctok_marker and makes that replacement part of the
 * conversion, so such text reaches the encoder with no intermediate str or bytes (CoreEncoder.encode_marked).
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

#if defined(__SSE2__)
/* Converters of whole SIMD blocks of non-ASCII text (no marker): every code point's UTF-8 is made in all lanes
 * at once (1 to 4 bytes in the low bytes of a lane's word), then each word is stored whole at the end and the
 * end advanced by that code point's length, both read out of the registers.  Why: which length a character has
 * is data, and the code point at a time way (ctok_put_utf8) branched on it: in Russian or Arabic text a space or
 * a comma among every few letters made those tests mispredict about once a word (callgrind, o200k, a first and
 * a warm pass over the Russian file: 237K of 1.19M mispredicted branches and 23M of 150M instructions in this
 * conversion).  A word stored whole reaches at most (its code point's room in ctok_utf8_bound) - (its length)
 * bytes past the code point's bytes: the stores stay inside the bound's room, whatever follows. */

/* The low 8 bytes of v. */
static inline uint64_t ctok_low64(__m128i v) {
#if defined(__x86_64__) || defined(_M_X64)
    return (uint64_t)_mm_cvtsi128_si64(v);
#else
    uint64_t q;
    _mm_storel_epi64((__m128i*)&q, v);
    return q;
#endif
}

/* Two code points' UTF-8 words (the low and high 32 bits of q) at d, the end advanced by their lengths. */
static inline uint8_t* ctok_put_words2(uint8_t* d, uint64_t q, unsigned len0, unsigned len1) {
    uint32_t w = (uint32_t)q;
    memcpy(d, &w, 4);                                       /* inside the bound's room (see above) */
    d += len0;
    w = (uint32_t)(q >> 32);
    memcpy(d, &w, 4);
    return d + len1;
}

/* (m & a) | (~m & b), lane by lane. */
static inline __m128i ctok_select(__m128i m, __m128i a, __m128i b) {
    return _mm_or_si128(_mm_and_si128(m, a), _mm_andnot_si128(m, b));
}

/* 16 code points below 0x100 (UCS-1: the bytes of v) at d: 1 or 2 bytes each, a 2-byte word stored per code
 * point (room: 2 bytes per code point). */
static inline uint8_t* ctok_ucs1_utf8_block16(__m128i v, uint8_t* d) {
    const __m128i zero = _mm_setzero_si128(), m3f = _mm_set1_epi16(0x3F), lead = _mm_set1_epi16((short)0x80C0);
    const __m128i ascii_max = _mm_set1_epi16(0x7F);
    unsigned wide = (unsigned)_mm_movemask_epi8(v);        /* bit k: code point k is >= 0x80 */
    __m128i half[2];
    uint64_t q;
    uint16_t w;
    int h, j, k = 0;
    half[0] = _mm_unpacklo_epi8(v, zero);
    half[1] = _mm_unpackhi_epi8(v, zero);
    for (h = 0; h < 2; h++) {
        __m128i c = half[h];
        __m128i two = _mm_or_si128(_mm_or_si128(_mm_srli_epi16(c, 6), _mm_slli_epi16(_mm_and_si128(c, m3f), 8)), lead);
        __m128i word = ctok_select(_mm_cmpgt_epi16(c, ascii_max), two, c);
        for (j = 0; j < 2; j++) {
            q = ctok_low64(j ? _mm_unpackhi_epi64(word, word) : word);
            w = (uint16_t)q;         memcpy(d, &w, 2); d += 1 + ((wide >> k) & 1); k++;
            w = (uint16_t)(q >> 16); memcpy(d, &w, 2); d += 1 + ((wide >> k) & 1); k++;
            w = (uint16_t)(q >> 32); memcpy(d, &w, 2); d += 1 + ((wide >> k) & 1); k++;
            w = (uint16_t)(q >> 48); memcpy(d, &w, 2); d += 1 + ((wide >> k) & 1); k++;
        }
    }
    return d;
}

/* 8 code points of the BMP (UCS-2 units in c) at d: 1 to 3 bytes each, a 4-byte word stored per code point
 * (room: 3 bytes per code point and the bound's 1 past the end).  NULL when one of them is a surrogate. */
static inline uint8_t* ctok_ucs2_utf8_block8(__m128i c, uint8_t* d) {
    const __m128i zero = _mm_setzero_si128(), m3f = _mm_set1_epi16(0x3F);
    __m128i ge80 = _mm_cmpeq_epi16(_mm_and_si128(c, _mm_set1_epi16((short)0xFF80)), zero);   /* inverted below */
    __m128i ge800 = _mm_cmpeq_epi16(_mm_and_si128(c, _mm_set1_epi16((short)0xF800)), zero);
    __m128i sur = _mm_cmpeq_epi16(_mm_and_si128(c, _mm_set1_epi16((short)0xF800)), _mm_set1_epi16((short)0xD800));
    __m128i two, three, third, low, w0, w1;
    unsigned lens;
    if (_mm_movemask_epi8(sur) != 0)
        return NULL;
    ge80 = _mm_xor_si128(ge80, _mm_set1_epi16(-1));
    ge800 = _mm_xor_si128(ge800, _mm_set1_epi16(-1));
    two = _mm_or_si128(_mm_or_si128(_mm_srli_epi16(c, 6), _mm_slli_epi16(_mm_and_si128(c, m3f), 8)),
                       _mm_set1_epi16((short)0x80C0));
    three = _mm_or_si128(_mm_or_si128(_mm_srli_epi16(c, 12), _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(c, 6), m3f), 8)),
                         _mm_set1_epi16((short)0x80E0));
    third = _mm_and_si128(_mm_or_si128(_mm_and_si128(c, m3f), _mm_set1_epi16(0x80)), ge800);
    low = ctok_select(ge800, three, ctok_select(ge80, two, c));
    w0 = _mm_unpacklo_epi16(low, third);                    /* code points 0-3: bytes 0-1 low, byte 2 above */
    w1 = _mm_unpackhi_epi16(low, third);                    /* code points 4-7 */
    /* two bits per code point (bits 2k, 2k+1 of each movemask are equal): its length - 1 in bits 2k-2k+1 */
    lens = ((unsigned)_mm_movemask_epi8(ge80) & 0x5555u) + ((unsigned)_mm_movemask_epi8(ge800) & 0x5555u);
    d = ctok_put_words2(d, ctok_low64(w0), 1 + (lens & 3), 1 + ((lens >> 2) & 3));
    d = ctok_put_words2(d, ctok_low64(_mm_unpackhi_epi64(w0, w0)), 1 + ((lens >> 4) & 3), 1 + ((lens >> 6) & 3));
    d = ctok_put_words2(d, ctok_low64(w1), 1 + ((lens >> 8) & 3), 1 + ((lens >> 10) & 3));
    return ctok_put_words2(d, ctok_low64(_mm_unpackhi_epi64(w1, w1)), 1 + ((lens >> 12) & 3), 1 + ((lens >> 14) & 3));
}

/* 4 code points (UCS-4 units in c, each <= 0x10FFFF) at d: 1 to 4 bytes each, a 4-byte word stored per code
 * point (room: 4 bytes per code point).  NULL when one of them is a surrogate. */
static inline uint8_t* ctok_ucs4_utf8_block4(__m128i c, uint8_t* d) {
    const __m128i m3f = _mm_set1_epi32(0x3F);
    __m128i sur = _mm_cmpeq_epi32(_mm_and_si128(c, _mm_set1_epi32((int)0xFFFFF800)), _mm_set1_epi32(0xD800));
    __m128i ge80 = _mm_cmpgt_epi32(c, _mm_set1_epi32(0x7F));     /* signed compares: c < 2^31 */
    __m128i ge800 = _mm_cmpgt_epi32(c, _mm_set1_epi32(0x7FF));
    __m128i ge10000 = _mm_cmpgt_epi32(c, _mm_set1_epi32(0xFFFF));
    __m128i b1 = _mm_and_si128(c, m3f);                            /* the last 6 bits */
    __m128i b2 = _mm_and_si128(_mm_srli_epi32(c, 6), m3f);
    __m128i b3 = _mm_and_si128(_mm_srli_epi32(c, 12), m3f);
    __m128i two, three, four, word;
    unsigned a, b, e;
    if (_mm_movemask_epi8(sur) != 0)
        return NULL;
    two = _mm_or_si128(_mm_or_si128(_mm_srli_epi32(c, 6), _mm_slli_epi32(b1, 8)), _mm_set1_epi32(0x80C0));
    three = _mm_or_si128(_mm_or_si128(_mm_srli_epi32(c, 12), _mm_slli_epi32(b2, 8)),
                         _mm_or_si128(_mm_slli_epi32(b1, 16), _mm_set1_epi32(0x8080E0)));
    four = _mm_or_si128(_mm_or_si128(_mm_srli_epi32(c, 18), _mm_slli_epi32(b3, 8)),
                        _mm_or_si128(_mm_or_si128(_mm_slli_epi32(b2, 16), _mm_slli_epi32(b1, 24)),
                                     _mm_set1_epi32((int)0x808080F0)));
    word = ctok_select(ge10000, four, ctok_select(ge800, three, ctok_select(ge80, two, c)));
    /* bit k of each: code point k is at least that wide */
    a = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(ge80));
    b = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(ge800));
    e = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(ge10000));
    d = ctok_put_words2(d, ctok_low64(word), 1 + (a & 1) + (b & 1) + (e & 1),
                        1 + ((a >> 1) & 1) + ((b >> 1) & 1) + ((e >> 1) & 1));
    return ctok_put_words2(d, ctok_low64(_mm_unpackhi_epi64(word, word)), 1 + ((a >> 2) & 1) + ((b >> 2) & 1) + ((e >> 2) & 1),
                           1 + ((a >> 3) & 1) + ((b >> 3) & 1) + ((e >> 3) & 1));
}
#endif

/* The marker that replaces each space (U+0020), as UTF-8: bytes[len:8] are zero.  It is always stored as
 * 8 bytes (one move) and the end advanced by len, so a conversion with a marker may write up to
 * CTOK_MARKER_SLACK bytes past its end. */
typedef struct { uint8_t bytes[8]; int len; } ctok_marker;
#define CTOK_MARKER_SLACK 8

/* Code point c (not a surrogate) as UTF-8 at d, or mk's bytes when c is a space and mk is not NULL. */
static inline uint8_t* ctok_put_char(uint8_t* d, uint32_t c, const ctok_marker* mk) {
    if (mk != NULL && c == 0x20) {
        memcpy(d, mk->bytes, 8);                            /* within CTOK_MARKER_SLACK */
        return d + mk->len;
    }
    return ctok_put_utf8(d, c);
}

#if defined(__SSE2__)
/* The n (<= 8) ASCII bytes of w (little-endian, as x86 is) at d, each byte whose bit is set in `spaces`
 * as mk's bytes.  The run before each space goes as one 8-byte store of w shifted down, the marker as
 * another: a few instructions per space, none per byte.  Stores reach 8 bytes past the end. */
static inline uint8_t* ctok_put_word_marked(uint8_t* d, uint64_t w, int n, unsigned spaces, const ctok_marker* mk) {
    uint64_t part, marker;
    int start = 0, k, len = mk->len;
    memcpy(&marker, mk->bytes, 8);
    while (spaces != 0) {
        k = __builtin_ctz(spaces);
        part = w >> (8 * start);                            /* start <= k < 8: a defined shift */
        memcpy(d, &part, 8);                                /* within CTOK_MARKER_SLACK past the end */
        d += k - start;
        memcpy(d, &marker, 8);                              /* likewise */
        d += len;
        start = k + 1;
        spaces &= spaces - 1;
    }
    if (start < n) {
        part = w >> (8 * start);
        memcpy(d, &part, 8);
        d += n - start;
    }
    return d;
}

/* The first k (4, 8 or 16; a constant where inlined) bytes of v, ASCII code points, at d; with a marker,
 * each space as its bytes.  Returns the new end. */
static inline uint8_t* ctok_put_ascii_block(uint8_t* d, __m128i v, int k, const ctok_marker* mk) {
    uint64_t lo, hi;
    unsigned spaces;
    int four;
    if (mk == NULL || (spaces = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(0x20))) & ((1u << k) - 1)) == 0) {
        if (k == 16) _mm_storeu_si128((__m128i*)d, v);
        else if (k == 8) _mm_storel_epi64((__m128i*)d, v);
        else { four = _mm_cvtsi128_si32(v); memcpy(d, &four, 4); }
        return d + k;
    }
    _mm_storel_epi64((__m128i*)&lo, v);
    d = ctok_put_word_marked(d, lo, k < 8 ? k : 8, spaces & 0xFF, mk);
    if (k == 16) {
        _mm_storel_epi64((__m128i*)&hi, _mm_unpackhi_epi64(v, v));
        d = ctok_put_word_marked(d, hi, 8, spaces >> 8, mk);
    }
    return d;
}
#endif

/* The bytes s[0:n] (UTF-8) at d, each space (0x20) written as mk's bytes: the new end.  Eight bytes a step, one
 * more step per space; stores reach CTOK_MARKER_SLACK bytes past the end.  For text already in UTF-8 (the texts
 * between added tokens of a SentencePiece-style file: CoreEncoder.encode_marked_split). */
static inline uint8_t* ctok_mark_spaces(const uint8_t* s, Py_ssize_t n, uint8_t* d, const ctok_marker* mk) {
    const uint64_t lo7 = 0x7F7F7F7F7F7F7F7FULL;
    uint64_t w, x, z;
    Py_ssize_t i = 0;
    int k;
    while (i + 8 <= n) {
        memcpy(&w, s + i, 8);                               /* i + 8 <= n */
        x = w ^ 0x2020202020202020ULL;                      /* a zero byte where s has a space */
        z = ~(((x & lo7) + lo7) | x | lo7);                 /* the high bit of each zero byte, exactly */
        memcpy(d, &w, 8);                                   /* within CTOK_MARKER_SLACK past the end */
        if (z == 0) { d += 8; i += 8; continue; }
        k = __builtin_ctzll(z) >> 3;                        /* the first space's place in the word */
        d += k;
        memcpy(d, mk->bytes, 8);                            /* likewise */
        d += mk->len;
        i += k + 1;
    }
    for (; i < n; i++) {
        if (s[i] == 0x20) { memcpy(d, mk->bytes, 8); d += mk->len; }
        else *d++ = s[i];
    }
    return d;
}

/* Each converter writes the UTF-8 of s[0:n], each space as mk's bytes unless mk is NULL, within
 * ctok_utf8_bound's room, and returns the number of bytes, or -1 at a surrogate. */
static Py_ssize_t ctok_utf8_from_ucs1(const uint8_t* s, Py_ssize_t n, uint8_t* out, const ctok_marker* mk) {
    uint8_t* d = out;
    Py_ssize_t i = 0, end;
#if defined(__SSE2__)
    while (i + 16 <= n) {                                   /* reads s[i:i+16], inside s[0:n] */
        __m128i v = _mm_loadu_si128((const __m128i*)(s + i));
        if (_mm_movemask_epi8(v) == 0) {                    /* no byte >= 0x80: 16 ASCII characters */
            d = ctok_put_ascii_block(d, v, 16, mk);
            i += 16;
            continue;
        }
        if (mk == NULL) {
            d = ctok_ucs1_utf8_block16(v, d);
            i += 16;
            continue;
        }
        for (end = i + 16; i < end; i++) d = ctok_put_char(d, s[i], mk);
    }
#endif
    for (; i < n; i++) d = ctok_put_char(d, s[i], mk);
    return d - out;
}

#if defined(__SSE2__)
/* Every UCS-2 code unit in v is below 0x80. */
static inline int ctok_ucs2_ascii(__m128i v) {
    return _mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16((short)0xFF80)), _mm_setzero_si128()))
           == 0xFFFF;
}

/* The 8 code points s[0:8] (loaded in v) as UTF-8 at d: packed when all are ASCII.  Returns the new end, or
 * NULL at a surrogate. */
static inline uint8_t* ctok_ucs2_block8(const uint16_t* s, __m128i v, uint8_t* d, const ctok_marker* mk) {
    int k;
    if (ctok_ucs2_ascii(v))
        return ctok_put_ascii_block(d, _mm_packus_epi16(v, v), 8, mk);   /* 8 ASCII code points, a byte each */
    if (mk == NULL)
        return ctok_ucs2_utf8_block8(v, d);
    for (k = 0; k < 8; k++) {
        if (s[k] - 0xD800u < 0x800u) return NULL;
        d = ctok_put_char(d, s[k], mk);
    }
    return d;
}
#endif

static Py_ssize_t ctok_utf8_from_ucs2(const uint16_t* s, Py_ssize_t n, uint8_t* out, const ctok_marker* mk) {
    uint8_t* d = out;
    Py_ssize_t i = 0;
    uint32_t c;
#if defined(__SSE2__)
    /* 16 code points per step when they are ASCII (English with a few typographic quotes is a 2-byte str
       that is mostly ASCII); a block that is not goes 8 at a time. */
    while (i + 16 <= n) {                                   /* reads s[i:i+16], inside s[0:n] */
        __m128i a = _mm_loadu_si128((const __m128i*)(s + i)), b = _mm_loadu_si128((const __m128i*)(s + i + 8));
        if (ctok_ucs2_ascii(_mm_or_si128(a, b))) {
            d = ctok_put_ascii_block(d, _mm_packus_epi16(a, b), 16, mk);   /* 16 ASCII code points, a byte each */
            i += 16;
            continue;
        }
        if ((d = ctok_ucs2_block8(s + i, a, d, mk)) == NULL) return -1;
        /* A second half that is not ASCII either (Russian, Greek, CJK text) goes now, not through another
           16-wide test at i + 8; one that is waits for it, in case ASCII goes on. */
        if (!ctok_ucs2_ascii(b)) {
            if ((d = ctok_ucs2_block8(s + i + 8, b, d, mk)) == NULL) return -1;
            i += 16;
            continue;
        }
        i += 8;
    }
    while (i + 8 <= n) {                                    /* reads s[i:i+8], inside s[0:n] */
        if ((d = ctok_ucs2_block8(s + i, _mm_loadu_si128((const __m128i*)(s + i)), d, mk)) == NULL) return -1;
        i += 8;
    }
#endif
    for (; i < n; i++) {
        c = s[i];
        if (c - 0xD800u < 0x800u) return -1;
        d = ctok_put_char(d, c, mk);
    }
    return d - out;
}

static Py_ssize_t ctok_utf8_from_ucs4(const uint32_t* s, Py_ssize_t n, uint8_t* out, const ctok_marker* mk) {
    uint8_t* d = out;
    Py_ssize_t i = 0, end;
    uint32_t c;
#if defined(__SSE2__)
    const __m128i high = _mm_set1_epi32((int)0xFFFFFF80), zero = _mm_setzero_si128();
    /* As for 2-byte strs: 16 code points per step when they are ASCII (English with an emoji somewhere is a
       4-byte str that is mostly ASCII); a block that is not goes 4 at a time. */
    while (i + 4 <= n) {
        if (i + 16 <= n) {                                  /* reads s[i:i+16], inside s[0:n] */
            __m128i a = _mm_loadu_si128((const __m128i*)(s + i)), b = _mm_loadu_si128((const __m128i*)(s + i + 4));
            __m128i e = _mm_loadu_si128((const __m128i*)(s + i + 8)), f = _mm_loadu_si128((const __m128i*)(s + i + 12));
            __m128i any = _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(e, f));
            if (_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_and_si128(any, high), zero)) == 0xFFFF) {
                /* values < 0x80: the packs cannot saturate */
                d = ctok_put_ascii_block(d, _mm_packus_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(e, f)), 16, mk);
                i += 16;
                continue;
            }
        }
        __m128i v = _mm_loadu_si128((const __m128i*)(s + i));   /* reads s[i:i+4], inside s[0:n] */
        if (_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_and_si128(v, high), zero)) == 0xFFFF) {
            __m128i w = _mm_packs_epi32(v, v);              /* values < 0x80: the packs cannot saturate */
            d = ctok_put_ascii_block(d, _mm_packus_epi16(w, w), 4, mk);
            i += 4;
            continue;
        }
        if (mk == NULL) {
            if ((d = ctok_ucs4_utf8_block4(v, d)) == NULL) return -1;
            i += 4;
            continue;
        }
        for (end = i + 4; i < end; i++) {
            c = s[i];
            if (c - 0xD800u < 0x800u) return -1;
            d = ctok_put_char(d, c, mk);
        }
    }
#endif
    for (; i < n; i++) {
        c = s[i];
        if (c - 0xD800u < 0x800u) return -1;
        d = ctok_put_char(d, c, mk);
    }
    return d - out;
}

/* Room ctok_utf8_write needs for text: 2, 3 or 4 bytes per code point of a 1-, 2- or 4-byte kind (or the
 * marker's length, if longer), the marker's slack, and 1 so that malloc(0) is never asked. */
static size_t ctok_utf8_bound(PyObject* text, const ctok_marker* mk) {
    int kind = PyUnicode_KIND(text);
    size_t per = kind == PyUnicode_1BYTE_KIND ? 2 : kind == PyUnicode_2BYTE_KIND ? 3 : 4;
    if (mk != NULL && (size_t)mk->len > per) per = (size_t)mk->len;
    return (size_t)PyUnicode_GET_LENGTH(text) * per + (mk != NULL ? CTOK_MARKER_SLACK : 0) + 1;
}

/* The UTF-8 of text (an exact, ready str) at out, which has room for ctok_utf8_bound(text, mk) bytes, each
 * space as mk's bytes unless mk is NULL: returns the number of bytes, or -1 at a surrogate.  Reads the
 * immutable str only: callable without the GIL while the caller keeps the str alive. */
static Py_ssize_t ctok_utf8_write(PyObject* text, uint8_t* out, const ctok_marker* mk) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    if (kind == PyUnicode_1BYTE_KIND) return ctok_utf8_from_ucs1((const uint8_t*)PyUnicode_DATA(text), len, out, mk);
    if (kind == PyUnicode_2BYTE_KIND) return ctok_utf8_from_ucs2((const uint16_t*)PyUnicode_DATA(text), len, out, mk);
    return ctok_utf8_from_ucs4((const uint32_t*)PyUnicode_DATA(text), len, out, mk);
}

/* 0 once text (an exact str) is ready for PyUnicode_KIND / PyUnicode_DATA, -1 with an exception. */
static inline int ctok_str_ready(PyObject* text) {
#if PY_VERSION_HEX < 0x030C0000
    return PyUnicode_READY(text);
#else
    (void)text;
    return 0;
#endif
}

/* The UTF-8 of the code points text[a:b] (an exact, ready str, 0 <= a <= b <= its length) at out, which has
 * room for (b - a) * (2, 3 or 4 for a 1-, 2- or 4-byte kind) + 1 bytes: returns the number of bytes, or -1
 * at a surrogate.  The prefix cache converts only the part of a prompt that its cached prefix does not
 * cover. */
static inline Py_ssize_t ctok_utf8_write_units_mk(PyObject* text, Py_ssize_t a, Py_ssize_t b, uint8_t* out,
                                                  const ctok_marker* mk) {
    int kind = PyUnicode_KIND(text);
    const char* d = (const char*)PyUnicode_DATA(text);
    if (kind == PyUnicode_1BYTE_KIND) return ctok_utf8_from_ucs1((const uint8_t*)d + a, b - a, out, mk);
    if (kind == PyUnicode_2BYTE_KIND) return ctok_utf8_from_ucs2((const uint16_t*)d + a, b - a, out, mk);
    return ctok_utf8_from_ucs4((const uint32_t*)d + a, b - a, out, mk);
}

static inline Py_ssize_t ctok_utf8_write_units(PyObject* text, Py_ssize_t a, Py_ssize_t b, uint8_t* out) {
    return ctok_utf8_write_units_mk(text, a, b, out, NULL);
}

/* The length of the UTF-8 of text[a:b] (an exact, ready str holding no surrogate): counted, not written, so
 * that the prefix cache finds where a character of a cached str starts in its UTF-8. */
static inline Py_ssize_t ctok_utf8_len_units(PyObject* text, Py_ssize_t a, Py_ssize_t b) {
    int kind = PyUnicode_KIND(text);
    const void* d = PyUnicode_DATA(text);
    Py_ssize_t i, n = b - a;
    if (kind == PyUnicode_1BYTE_KIND) {
        const uint8_t* s = (const uint8_t*)d;
        for (i = a; i < b; i++) n += s[i] >= 0x80;
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const uint16_t* s = (const uint16_t*)d;
        for (i = a; i < b; i++) n += (s[i] >= 0x80) + (s[i] >= 0x800);
    } else {
        const uint32_t* s = (const uint32_t*)d;
        for (i = a; i < b; i++) n += (s[i] >= 0x80) + (s[i] >= 0x800) + (s[i] >= 0x10000);
    }
    return n;
}

/* The same with each space written as a marker of space_len bytes (ctok_utf8_write_units_mk's output). */
static inline Py_ssize_t ctok_marked_len_units(PyObject* text, Py_ssize_t a, Py_ssize_t b, Py_ssize_t space_len) {
    int kind = PyUnicode_KIND(text);
    const void* d = PyUnicode_DATA(text);
    Py_ssize_t i, spaces = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        const uint8_t* s = (const uint8_t*)d;
        for (i = a; i < b; i++) spaces += s[i] == 0x20;
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const uint16_t* s = (const uint16_t*)d;
        for (i = a; i < b; i++) spaces += s[i] == 0x20;
    } else {
        const uint32_t* s = (const uint32_t*)d;
        for (i = a; i < b; i++) spaces += s[i] == 0x20;
    }
    return ctok_utf8_len_units(text, a, b) + spaces * (space_len - 1);
}

/* The copying half of ctok_utf8_view, for a str that ctok_utf8_view_cheap left to it: callable without the
 * GIL (it reads the immutable str and calls malloc only, so the caller must keep the str alive).  Returns
 * the buffer (the caller frees it) and sets *n, or NULL with *status 1 at a surrogate, 2 when out of memory. */
static char* ctok_utf8_copy_nogil(PyObject* text, Py_ssize_t* n, int* status) {
    Py_ssize_t got;
    uint8_t* buf = (uint8_t*)malloc(ctok_utf8_bound(text, NULL));
    *status = 0;
    if (buf == NULL) { *status = 2; return NULL; }
    got = ctok_utf8_write(text, buf, NULL);
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
