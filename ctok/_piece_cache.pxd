# Contract of the bounded, thread-safe piece cache (see _piece_cache.pyx for the why).
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from ctok._bpe cimport IdVec

cdef enum:
    FIRST_TABLE_BYTES = 2 << 20 # a first pass over one text touches few entries: start small, grow on demand
    CACHE_MAX_PIECE = 48        # longer pieces are not cached
    CACHE_MAX_IDS = 14          # nor are pieces that encode to more ids

cdef struct CacheEntry:         # 128 bytes: two per 256-byte pair of cache lines, none straddling
    uint64_t seq                # seqlock: odd while a writer owns the entry
    uint64_t hash               # hash of the piece bytes; 0 = empty
    uint32_t length
    uint32_t n_ids
    uint8_t piece[CACHE_MAX_PIECE]
    uint32_t ids[CACHE_MAX_IDS]

cdef struct CacheTable:
    CacheEntry* entries
    uint64_t mask               # entries - 1 (a power of two, at least 16 entries)
    CacheTable* older           # the table this one grew from; every table lives until cache_free

cdef struct PieceCache:
    # Starts at up to FIRST_TABLE_BYTES and doubles while pieces keep arriving, as long as all its tables
    # together stay within max_bytes.  Readers and writers take `table` once per lookup (atomic acquire):
    # a table that has been replaced is still valid memory, so a lookup racing a growth is only a miss.
    CacheTable* table           # NULL when the cache is off
    uint64_t puts               # stores into the current table (atomic)
    uint64_t hits               # a sample of the hits since the last window of stores (atomic): one in HIT_SAMPLE
    uint64_t reused_puts        # stores made in windows that brought enough hits (atomic): when it grows
    uint64_t held               # bytes of all tables
    uint64_t max_bytes
    int growing                 # 1 while one thread builds the next table (atomic flag)

cdef bint cache_get(const PieceCache* c, const uint8_t* s, Py_ssize_t n, uint64_t h, IdVec* out) noexcept nogil
cdef void cache_put(PieceCache* c, const uint8_t* s, Py_ssize_t n, uint64_t h, const uint32_t* ids,
                    Py_ssize_t n_ids) noexcept nogil
# n hits on pieces this cache holds, answered before reaching it (a thread's table of recent pieces): counted as
# its own would be (one in HIT_SAMPLE), so that they weigh in its growth as before that table existed.  Returns
# the part of n not counted yet, for the caller to pass again with its next hits.
cdef uint64_t cache_note_hits(PieceCache* c, uint64_t n) noexcept nogil
cdef int cache_init(PieceCache* c, Py_ssize_t max_bytes) noexcept nogil
cdef void cache_free(PieceCache* c) noexcept nogil
cdef uint64_t cache_bytes(const PieceCache* c) noexcept nogil
