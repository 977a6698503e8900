# Contract of the bounded, thread-safe piece cache (see _piece_cache.pyx for the why).
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from ctok._bpe cimport IdVec

cdef enum:
    FIRST_TABLE_BYTES = 2 << 20 # a first pass over one text touches few entries: start small, grow on demand
    CACHE_MAX_PIECE = 48        # longer pieces are not cached
    CACHE_MAX_IDS = 14          # nor are pieces that encode to more ids

cdef struct CacheEntry:         # 128 bytes: two per 256-byte pair of cache lines, none straddling
    uint64_t seq                # seqlock: odd while a writer owns the entry
    uint64_t hash               # hash of the piece bytes; 0 = empty
    uint16_t length
    uint8_t spilled             # of a pair's first entry: 1 once some piece whose first pair this is went to its
                                # second pair (set atomically by any writer, outside the sequence lock)
    uint8_t unused
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
    uint64_t evictions          # stores of the current window that replaced another piece (atomic)
    uint64_t held               # bytes of all tables
    uint64_t max_bytes
    int growing                 # 1 while one thread builds the next table (atomic flag)
    # Admission (cache_admit): bit (h >> 1) & seen_mask of a piece of hash h is set once the piece was met.
    # A piece is looked up and stored only from its second meeting on.  NULL when the cache is off.
    uint8_t* seen
    uint64_t seen_mask          # bits - 1: a power of two, at most SEEN_MAX_BITS, at most 8 per entry of the budget
    uint64_t seen_marks         # bits set since seen was last cleared (atomic): cleared at an eighth of them

cdef enum:
    SEEN_MAX_BITS = 1 << 20     # PieceCache.seen: at most 128 KB

cdef extern from "_piece_cache.h" nogil:
    uint8_t ctok_byte_load(const uint8_t* p)
    void ctok_byte_or(uint8_t* p, uint8_t v)
    void ctok_entry_prefetch(const void* p)
    void* ctok_table_peek(void* const* p)
    void ctok_bits_clear(uint8_t* p, unsigned long n)

cdef inline uint64_t set_index(const CacheTable* t, uint64_t h) noexcept nogil:
    # First entry of the first pair for hash h.  Bit 0 of h is always set (0 marks an empty entry), so the
    # index is taken from the bits above it.
    return (h >> 1) & t.mask & ~(<uint64_t>1)

cdef inline uint64_t second_index(const CacheTable* t, uint64_t h) noexcept nogil:
    # First entry of the second pair: the hash's high half (hash_bytes' best mixed bits, which set_index never
    # reaches below 2**32 entries).
    return (h >> 32) & t.mask & ~(<uint64_t>1)

cdef inline void cache_prefetch(const PieceCache* c, uint64_t h) noexcept nogil:
    # Ask memory for the entry a cache_get of hash h reads first: a caller that knows its next pieces' hashes
    # overlaps their lookups' waits.
    cdef const CacheTable* t = <const CacheTable*>ctok_table_peek(<void* const*>&c.table)   # stale: a wasted prefetch
    if t != NULL:
        ctok_entry_prefetch(&t.entries[set_index(t, h)])   # set_index(t, h) <= t.mask

cdef inline uint64_t seen_bit(const PieceCache* c, uint64_t h) noexcept nogil:
    # The admission filter's bit for a piece of hash h.
    return (h >> 1) & c.seen_mask

cdef inline bint cache_seen(const PieceCache* c, uint64_t h) noexcept nogil:
    # The piece of hash h was met before (or another piece of its bit): worth a lookup.  True without a filter.
    cdef uint64_t i
    if c.seen == NULL:
        return True
    i = seen_bit(c, h)
    return (ctok_byte_load(&c.seen[i >> 3]) >> (i & 7)) & 1

cdef inline bint cache_admit(PieceCache* c, uint64_t h) noexcept nogil:
    # cache_seen, and the piece marked as met when it was not: a piece met for the first time is merged
    # without a lookup and not stored (most distinct pieces of a text come once: their stores only pushed out
    # pieces that come back, and grew the table).
    if cache_seen(c, h):
        return True
    seen_mark(c, seen_bit(c, h))
    return False

# Set bit i of the admission filter (seen_bit), clearing the filter when an eighth of its bits were set.
cdef void seen_mark(PieceCache* c, uint64_t i) noexcept nogil
cdef bint cache_get(const PieceCache* c, const uint8_t* s, Py_ssize_t n, uint64_t h, IdVec* out) noexcept nogil
# Store the ids of a piece met before (cache_admit).
cdef void cache_put(PieceCache* c, const uint8_t* s, Py_ssize_t n, uint64_t h, const uint32_t* ids,
                    Py_ssize_t n_ids) noexcept nogil
cdef int cache_init(PieceCache* c, Py_ssize_t max_bytes) noexcept nogil
cdef void cache_free(PieceCache* c) noexcept nogil
cdef uint64_t cache_bytes(const PieceCache* c) noexcept nogil
# [(bytes, bytes in memory)] of each table, the current one first (tables under 2 MB counted as in memory).
cdef list cache_tables(const PieceCache* c)
