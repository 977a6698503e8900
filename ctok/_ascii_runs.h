/* ASCII letter runs for the pretokenizer (ctok/_pretok.pyx), 16 bytes at a time where SSE2 exists.
 *
 * Why: the end of a word is data the branch predictor cannot know, so a byte loop pays a mispredicted
 * branch per word.  Here a 16-byte block is classified at once and the first non-letter is found with a
 * count-trailing-zeros: one well-predicted branch per block, and English words fit in one block.
 * Contract: ctok_lower_end(s, n, i) is the first index >= i whose byte is not 'a'..'z' (or n);
 * ctok_alpha_end likewise for 'A'..'Z' and 'a'..'z'.  Blocks are read only when i + 16 <= n, so nothing
 * past s[n - 1] is read.  Other CPUs use the plain loop, with the same results.
 */
#ifndef CTOK_ASCII_RUNS_H
#define CTOK_ASCII_RUNS_H
#include <Python.h>

#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
#include <emmintrin.h>

/* Lowest set bit of m != 0 as a Py_ssize_t.  Why not __builtin_ctz: GCC sign-extends its int result
 * (cltq), an instruction on the path from a piece's start to its end, which the next piece waits for. */
static inline Py_ssize_t ctok_low_bit(unsigned m) {
#if defined(__x86_64__)
    unsigned long z;
    __asm__("bsf %1, %0" : "=r"(z) : "r"((unsigned long)m) : "cc");   /* m != 0: bsf is defined */
    return (Py_ssize_t)z;
#else
    return __builtin_ctz(m);
#endif
}

/* x - 'a' >= 26 (not in the class) as a signed compare: adding 0x80 - 'a' - 26 maps 'a'..'z' onto 102..127,
 * every other byte onto -128..101, so 102 > y marks the bytes after the run and the end is the lowest mark,
 * with no complement of the mask first.  The compare is written in asm because GCC turns `102 > y` into
 * `!(y > 101)`, a compare and a complement. */
static inline Py_ssize_t ctok_class_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, int fold) {
    const __m128i bias = _mm_set1_epi8((char)(0x80 - 'a' - 26));
    const __m128i lim = _mm_set1_epi8((char)102);
    const __m128i case_bit = _mm_set1_epi8(fold ? 0x20 : 0);
    while (i + 16 <= n) {
        __m128i x = _mm_loadu_si128((const __m128i*)(s + i));     /* i + 16 <= n */
        __m128i y = _mm_add_epi8(_mm_or_si128(x, case_bit), bias);
        __m128i stop = lim;
        __asm__("pcmpgtb %1, %0" : "+x"(stop) : "x"(y));           /* stop = 102 > y, bytewise signed */
        unsigned m = (unsigned)_mm_movemask_epi8(stop);
        if (m != 0)
            return i + ctok_low_bit(m);
        i += 16;
    }
    while (i < n && (unsigned char)((s[i] | (fold ? 0x20 : 0)) - 'a') < 26)
        i++;
    return i;
}
#else
static inline Py_ssize_t ctok_class_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, int fold) {
    while (i < n && (unsigned char)((s[i] | (fold ? 0x20 : 0)) - 'a') < 26)
        i++;
    return i;
}
#endif

/* First index >= i whose byte is not `byte` (or n): runs of spaces (indentation) 16 at a time. */
static inline Py_ssize_t ctok_byte_run_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, unsigned char byte) {
#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
    const __m128i v = _mm_set1_epi8((char)byte);
    while (i + 16 <= n) {
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i*)(s + i)), v));
        if (m != 0xFFFFu)
            return i + ctok_low_bit(~m);
        i += 16;
    }
#endif
    while (i < n && s[i] == byte)
        i++;
    return i;
}

static inline Py_ssize_t ctok_lower_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t i) {
    return ctok_class_end(s, n, i, 0);
}

static inline Py_ssize_t ctok_alpha_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t i) {
    return ctok_class_end(s, n, i, 1);
}
#endif
