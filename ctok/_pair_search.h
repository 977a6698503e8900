/* How many of 16 sorted token ids are below a given id (ctok/_vocab.pxd, tables_pair_key).
 *
 * Contract: ctok_count_below16(p, valid, x) = the number of i < valid with p[i] < x, for 1 <= valid <= 16,
 * reading p[0:16] whole (the caller keeps 16 readable entries at p; those past `valid` are ignored).  Ids
 * are below 2^30 (_vocab.MAX_IDS), so the signed 32-bit compare orders them as unsigned ones.
 * Why 16 at once: a merge lookup walks a static B-tree of 16-entry nodes (one cache line of rights each),
 * and one compare of the whole node replaces four dependent steps of a binary search. */
#ifndef CTOK_PAIR_SEARCH_H
#define CTOK_PAIR_SEARCH_H
#include <stdint.h>

#if defined(__SSE2__)
#include <emmintrin.h>
static inline uint32_t ctok_count_below16(const uint32_t* p, uint32_t valid, uint32_t x) {
    __m128i v = _mm_set1_epi32((int)x);
    __m128i a = _mm_cmpgt_epi32(v, _mm_loadu_si128((const __m128i*)p));
    __m128i b = _mm_cmpgt_epi32(v, _mm_loadu_si128((const __m128i*)(p + 4)));
    __m128i c = _mm_cmpgt_epi32(v, _mm_loadu_si128((const __m128i*)(p + 8)));
    __m128i d = _mm_cmpgt_epi32(v, _mm_loadu_si128((const __m128i*)(p + 12)));
    uint32_t below = (uint32_t)_mm_movemask_epi8(_mm_packs_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d)));
    /* Sorted entries: those below x are a prefix, so their bits are the low run of ones (a trailing-zero
       count, one instruction on every x86-64; popcount is not in the baseline and becomes a call). */
    return (uint32_t)__builtin_ctz(~(below & ((1u << valid) - 1u)));        /* bit 16 of ~... is set */
}
#else
static inline uint32_t ctok_count_below16(const uint32_t* p, uint32_t valid, uint32_t x) {
    uint32_t i, n = 0;
    for (i = 0; i < 16; i++) n += (i < valid) & (p[i] < x);
    return n;
}
#endif

#define ctok_pair_prefetch(p) __builtin_prefetch((p), 0, 3)

#endif
