"""Bounded piece cache: piece bytes -> token ids, shared by all threads of one encoder, no locks.

Why: BPE of a piece that is not itself a token costs dozens of table lookups; natural text repeats such
pieces (names, code identifiers, common CJK runs).  Contract: `cache_get` either appends exactly the ids
that `cache_put` stored for these bytes, or reports a miss; results never depend on whether it hit.

Memory is fixed at creation (a power-of-two array of 128-byte entries within the byte budget), two-way
set associative: a piece may sit in either entry of the pair its hash picks, and an insert takes a free
or matching entry of the pair, else overwrites one of them (chosen by another hash bit).  Direct mapping
lost a fifth of a book's distinct pieces to collisions, re-merged on every pass.  Each entry is guarded by a sequence lock: a writer
claims the entry by moving its sequence from even to odd with a compare-and-swap (losing writers skip
the insert), writes, and publishes an even number; a reader copies the entry and accepts it only if the
sequence was even and unchanged around the copy and the stored bytes equal the piece.
"""
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memcmp

from ctok._bpe cimport IdVec, idvec_reserve, BPE_OK

cdef extern from *:
    """
    static inline unsigned long long ctok_seq_load_acquire(const unsigned long long* p) {
        return __atomic_load_n(p, __ATOMIC_ACQUIRE);
    }
    static inline int ctok_seq_claim(unsigned long long* p, unsigned long long expected) {
        return __atomic_compare_exchange_n(p, &expected, expected + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
    }
    static inline void ctok_seq_publish(unsigned long long* p, unsigned long long v) {
        __atomic_store_n(p, v, __ATOMIC_RELEASE);
    }
    static inline void ctok_fence_acquire(void) { __atomic_thread_fence(__ATOMIC_ACQUIRE); }
    """
    unsigned long long ctok_seq_load_acquire(const unsigned long long* p) nogil
    bint ctok_seq_claim(unsigned long long* p, unsigned long long expected) nogil
    void ctok_seq_publish(unsigned long long* p, unsigned long long v) nogil
    void ctok_fence_acquire() nogil


cdef int cache_init(PieceCache* c, Py_ssize_t max_bytes) noexcept nogil:
    cdef uint64_t n = 1
    c.entries = NULL
    c.mask = 0
    if max_bytes < <Py_ssize_t>(16 * sizeof(CacheEntry)):
        return 0                                        # too small to help: off
    while (n * 2) * sizeof(CacheEntry) <= <uint64_t>max_bytes:
        n *= 2
    c.entries = <CacheEntry*>calloc(n, sizeof(CacheEntry))
    if c.entries == NULL:
        return -1
    c.mask = n - 1
    return 0


cdef void cache_free(PieceCache* c) noexcept nogil:
    free(c.entries)
    c.entries = NULL
    c.mask = 0


cdef inline uint64_t set_index(const PieceCache* c, uint64_t h) noexcept nogil:
    # First entry of the pair for hash h.  Bit 0 of h is always set (0 marks an empty entry), so the
    # index is taken from the bits above it.
    return (h >> 1) & c.mask & ~(<uint64_t>1)


cdef bint entry_get(CacheEntry* e, const uint8_t* s, Py_ssize_t n, uint64_t h, IdVec* out) noexcept nogil:
    cdef unsigned long long s1, s2
    cdef uint32_t ids[CACHE_MAX_IDS]
    cdef uint32_t n_ids
    cdef bint same
    s1 = ctok_seq_load_acquire(<unsigned long long*>&e.seq)
    if s1 & 1:
        return False
    if e.hash != h or e.length != <uint32_t>n:
        return False
    n_ids = e.n_ids
    if n_ids > CACHE_MAX_IDS:
        return False                                    # torn read; the sequence check would reject it too
    same = memcmp(e.piece, s, n) == 0                   # n <= CACHE_MAX_PIECE
    memcpy(ids, e.ids, n_ids * sizeof(uint32_t))
    ctok_fence_acquire()
    s2 = ctok_seq_load_acquire(<unsigned long long*>&e.seq)
    if s1 != s2 or not same:
        return False
    if idvec_reserve(out, n_ids) != BPE_OK:
        return False                                    # the caller encodes the piece instead
    memcpy(out.data + out.size, ids, n_ids * sizeof(uint32_t))
    out.size += n_ids
    return True


cdef bint cache_get(const PieceCache* c, const uint8_t* s, Py_ssize_t n, uint64_t h, IdVec* out) noexcept nogil:
    cdef uint64_t i
    if c.entries == NULL or n > CACHE_MAX_PIECE or h == 0:
        return False
    i = set_index(c, h)                                 # i and i + 1 are inside the array (mask >= 15)
    return entry_get(&c.entries[i], s, n, h, out) or entry_get(&c.entries[i + 1], s, n, h, out)


cdef void cache_put(PieceCache* c, const uint8_t* s, Py_ssize_t n, uint64_t h, const uint32_t* ids,
                    Py_ssize_t n_ids) noexcept nogil:
    cdef CacheEntry* e
    cdef unsigned long long seq
    cdef uint64_t i
    if c.entries == NULL or n > CACHE_MAX_PIECE or n_ids > CACHE_MAX_IDS or h == 0:
        return
    i = set_index(c, h)
    # A racy peek only picks the entry; the claim below is what makes the write safe.
    if c.entries[i].hash == 0 or c.entries[i].hash == h:
        e = &c.entries[i]
    elif c.entries[i + 1].hash == 0 or c.entries[i + 1].hash == h:
        e = &c.entries[i + 1]
    else:
        e = &c.entries[i + ((h >> 40) & 1)]
    seq = ctok_seq_load_acquire(<unsigned long long*>&e.seq)
    if seq & 1 or not ctok_seq_claim(<unsigned long long*>&e.seq, seq):
        return                                          # another writer has it: skip, it is only a cache
    e.hash = h
    e.length = <uint32_t>n
    e.n_ids = <uint32_t>n_ids
    memcpy(e.piece, s, n)
    memcpy(e.ids, ids, n_ids * sizeof(uint32_t))
    ctok_seq_publish(<unsigned long long*>&e.seq, seq + 2)
