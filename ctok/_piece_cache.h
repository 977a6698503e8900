/* Helpers of the piece cache's contract (_piece_cache.pxd) that the encoder inlines too: the racy reads and
   writes of a pair's spill mark, of the current table's pointer and of the admission filter's bits, and the
   prefetch of an entry. */
#ifndef CTOK_PIECE_CACHE_H
#define CTOK_PIECE_CACHE_H

static inline unsigned char ctok_byte_load(const unsigned char* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void ctok_byte_or(unsigned char* p, unsigned char v) { __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
static inline void* ctok_table_peek(void* const* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void ctok_entry_prefetch(const void* p) {
    __builtin_prefetch(p, 0, 3);
    __builtin_prefetch((const char*)p + 64, 0, 3);
}

/* Zero n bytes of the admission filter (n a multiple of 8, p 8-byte aligned) while other threads read and set
   its bits: word by word, each store atomic. */
static inline void ctok_bits_clear(unsigned char* p, unsigned long n) {
    for (unsigned long i = 0; i < n; i += 8) __atomic_store_n((unsigned long long*)(p + i), 0ULL, __ATOMIC_RELAXED);
}

#endif
