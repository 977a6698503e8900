# Contract of the bounded, thread-safe piece cache (see _piece_cache.pyx for the why).
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from ctok._bpe cimport IdVec

cdef enum:
    CACHE_MAX_PIECE = 48        # longer pieces are not cached
    CACHE_MAX_IDS = 14          # nor are pieces that encode to more ids

cdef struct CacheEntry:         # 128 bytes: two per 256-byte pair of cache lines, none straddling
    uint64_t seq                # seqlock: odd while a writer owns the entry
    uint64_t hash               # hash of the piece bytes; 0 = empty
    uint32_t length
    uint32_t n_ids
    uint8_t piece[CACHE_MAX_PIECE]
    uint32_t ids[CACHE_MAX_IDS]

cdef struct PieceCache:
    CacheEntry* entries         # NULL when the cache is off
    uint64_t mask

cdef bint cache_get(const PieceCache* c, const uint8_t* s, Py_ssize_t n, uint64_t h, IdVec* out) noexcept nogil
cdef void cache_put(PieceCache* c, const uint8_t* s, Py_ssize_t n, uint64_t h, const uint32_t* ids,
                    Py_ssize_t n_ids) noexcept nogil
cdef int cache_init(PieceCache* c, Py_ssize_t max_bytes) noexcept nogil
cdef void cache_free(PieceCache* c) noexcept nogil
