"""Bounded piece cache: piece bytes -> token ids, shared by all threads of one encoder, no locks.

Why: BPE of a piece that is not itself a token costs dozens of table lookups; natural text repeats such
pieces (names, code identifiers, common CJK runs).  Contract: `cache_get` either appends exactly the ids
that `cache_put` stored for these bytes, or reports a miss; results never depend on whether it hit.

Each table is a power-of-two array of 128-byte entries (all tables together within the byte budget), two-way
set associative with a second choice: a piece may sit in either entry of the pair its hash picks (its first
pair), or, when that pair was full, of a second pair picked by other hash bits; an insert takes a free or
matching entry of the first pair, else a matching or free one of the second (and marks the first pair as
spilled, in its first entry, so that lookups look at the second pair only behind a spilled first one), else
overwrites an entry of the first pair (chosen by another hash bit).  Direct mapping lost a fifth of a book's
distinct pieces to collisions, re-merged on every pass; with pairs alone, a server's stream of 5,000-text
batches from seven corpus files (85K distinct pieces, a 16 MB table of 131,072 entries) still lost about
6,000 pieces a batch once warm (a simulation of the inserts; the second choice: 650), and callgrind counted
6,800 stores a batch in its ninth and tenth batches (5,000 with the second choice, of which about 2,000 are
pieces never seen before).  Each entry is guarded by a sequence lock: a writer
claims the entry by moving its sequence from even to odd with a compare-and-swap (losing writers skip
the insert), writes, and publishes an even number; a reader copies the entry and accepts it only if the
sequence was even and unchanged around the copy and the stored bytes equal the piece.

Admission: a piece is looked up and stored only from its second meeting on (cache_admit: a bit per hash in
PieceCache.seen, cleared when an eighth of its bits are set).  Most distinct pieces of a text come once (o200k, of
the non-token pieces: Dracula 2,620 of 3,764 distinct ones, code 3,055 of 5,780, Japanese 27,969 of 30,146); storing
them cost a write to a cold line each, pushed out pieces that come back, and grew the table during first passes.
A piece that comes back is merged a second time, then stored.  Measured (o200k, first
passes in bench/compare.py's order): 2-20% faster on every corpus file; a second pass over the same text (the
prefix cache off) pays the second merges (Russian 4.3 -> 6.5 ms), the third is as fast as before or faster.

Growth: the cache starts at FIRST_TABLE_BYTES (2 MB: one huge page), since every page of a table costs its
population (0.33 ms per MB here with MAP_POPULATE; a fault per 4 KB page costs more).  A workload whose returning
pieces outgrow the table (a server's stream of chat texts in many languages) is better served by a larger one,
so when the stores of a window (an eighth of the table) replaced another piece for one in
GROW_EVICTIONS_PER_STORE, one thread builds a table twice the size, copies the live entries into it and
publishes it.  Replacing is the evidence: with admission every stored piece came back at least once, and a
store replaces one only once both its pairs are full.  Text whose pieces seldom come back (Chinese and Japanese
runs) stores few and does not grow the table.  Replaced tables keep their addresses until the cache is freed (a
reader may still hold one), but from 2 MB on give their pages back (ctok_table_release: 14 MB of a 16 MB table's
three predecessors), and growth stops before all tables together would exceed the budget: memory stays bounded
by max_bytes (plus the admission bits: at most 1/128 of it).  Tables of 2 MB and more are 2 MB aligned, their
pages populated by the mmap call (a first pass over Dracula took 3,289 page faults with a 4 MB table faulted in
page by page), then marked for transparent huge pages; marking them before the first touch made a growth wait
for memory compaction in fragmented processes (see ctok_table_alloc).
"""
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memcmp, memset
from ctok._vocab cimport load_head

cdef extern from *:
    """
    #if defined(__linux__)
    #include <sys/mman.h>
    #include <stdint.h>
    #define CTOK_HUGE (2u << 20)
    /* Zeroed memory for a table of n bytes.  From 2 MB on (n is then a multiple of 2 MB): mapped 2 MB aligned
       with its pages populated by the mmap call itself (one call instead of a fault per 4 KB page during
       encoding), then marked MADV_HUGEPAGE so that the kernel may merge them into huge pages in the background.
       Not marked before populating: where huge pages are given only on madvise, a fault in a marked region may
       wait for the kernel to compact memory, and in a process whose memory is fragmented a table's growth then
       stalled the encode that triggered it for tens of milliseconds. */
    static void* ctok_table_alloc(size_t n) {
        if (n < CTOK_HUGE) return calloc(1, n);
    #ifdef MAP_POPULATE
        int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE;
    #else
        int flags = MAP_PRIVATE | MAP_ANONYMOUS;
    #endif
        char* p = (char*)mmap(NULL, n + CTOK_HUGE, PROT_READ | PROT_WRITE, flags, -1, 0);
        if (p == (char*)MAP_FAILED) return NULL;
        char* a = (char*)(((uintptr_t)p + CTOK_HUGE - 1) & ~(uintptr_t)(CTOK_HUGE - 1));
        if (a > p) munmap(p, (size_t)(a - p));
        if (p + n + CTOK_HUGE > a + n) munmap(a + n, (size_t)(p + n + CTOK_HUGE - (a + n)));
    #ifdef MADV_HUGEPAGE
        madvise(a, n, MADV_HUGEPAGE);
    #endif
        return a;
    }
    static void ctok_table_free(void* p, size_t n) {
        if (p == NULL) return;
        if (n < CTOK_HUGE) free(p); else munmap(p, n);
    }
    /* Give a replaced table's pages back, keeping its addresses mapped: a lookup that still holds the table
       reads zeros from then on (and rejects what it read: see cache_get), a store maps a page again -- a 4 KB one: the huge-page advice is taken back first, or a store racing the switch mapped a
       whole 2 MB page (seen in the tests).  Tables under 2 MB live in malloc's memory and are kept. */
    static void ctok_table_release(void* p, size_t n) {
    #ifdef MADV_DONTNEED
        if (p == NULL || n < CTOK_HUGE) return;
    #ifdef MADV_NOHUGEPAGE
        madvise(p, n, MADV_NOHUGEPAGE);
    #endif
        madvise(p, n, MADV_DONTNEED);
    #else
        (void)p; (void)n;
    #endif
    }
    #else
    static void* ctok_table_alloc(size_t n) { return calloc(1, n); }
    static void ctok_table_free(void* p, size_t n) { (void)n; free(p); }
    static void ctok_table_release(void* p, size_t n) { (void)p; (void)n; }
    #endif
    /* Bytes of p[0:n] in memory (mincore; n itself where it cannot tell): what the tests check a release by. */
    #if defined(__linux__)
    static size_t ctok_resident(void* p, size_t n) {
        size_t page = 4096, pages = (n + page - 1) / page, k, count = 0;
        unsigned char* vec = (unsigned char*)malloc(pages);
        if (vec == NULL || ((uintptr_t)p % page) != 0 || mincore(p, n, vec) != 0) { free(vec); return n; }
        for (k = 0; k < pages; k++) count += vec[k] & 1;
        free(vec);
        return count * page;
    }
    #else
    static size_t ctok_resident(void* p, size_t n) { (void)p; return n; }
    #endif
    """
    void* ctok_table_alloc(size_t n) nogil
    void ctok_table_free(void* p, size_t n) nogil
    void ctok_table_release(void* p, size_t n) nogil
    size_t ctok_resident(void* p, size_t n) nogil

from ctok._bpe cimport IdVec, idvec_reserve, idvec_free, BPE_OK

cdef enum:
    GROW_EVICTIONS_PER_STORE = 2  # a table grows after a window in which one store in this many replaced a piece

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
    static inline void* ctok_ptr_load_acquire(void* const* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void ctok_ptr_publish(void** p, void* v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    static inline unsigned long long ctok_count_add(unsigned long long* p) {
        return __atomic_add_fetch(p, 1, __ATOMIC_RELAXED);
    }
    static inline unsigned long long ctok_count_load(const unsigned long long* p) {
        return __atomic_load_n(p, __ATOMIC_RELAXED);
    }
    static inline void ctok_count_reset(unsigned long long* p) { __atomic_store_n(p, 0, __ATOMIC_RELAXED); }
    static inline int ctok_flag_take(int* p) {
        int expected = 0;
        return __atomic_compare_exchange_n(p, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
    }
    static inline void ctok_flag_drop(int* p) { __atomic_store_n(p, 0, __ATOMIC_RELEASE); }
    """
    void* ctok_ptr_load_acquire(void* const* p) nogil
    void ctok_ptr_publish(void** p, void* v) nogil
    unsigned long long ctok_count_add(unsigned long long* p) nogil
    unsigned long long ctok_count_load(const unsigned long long* p) nogil
    void ctok_count_reset(unsigned long long* p) nogil
    bint ctok_flag_take(int* p) nogil
    void ctok_flag_drop(int* p) nogil
    unsigned long long ctok_seq_load_acquire(const unsigned long long* p) nogil
    bint ctok_seq_claim(unsigned long long* p, unsigned long long expected) nogil
    void ctok_seq_publish(unsigned long long* p, unsigned long long v) nogil
    void ctok_fence_acquire() nogil


cdef CacheTable* table_new(uint64_t n) noexcept nogil:
    # A zeroed table of n entries (a power of two >= 16), or NULL.  Tables of 2 MB and more are populated at
    # once and may become huge pages later (ctok_table_alloc); the table of a small budget is plain calloc.
    cdef CacheTable* t = <CacheTable*>calloc(1, sizeof(CacheTable))
    if t == NULL:
        return NULL
    t.entries = <CacheEntry*>ctok_table_alloc(n * sizeof(CacheEntry))
    if t.entries == NULL:
        free(t)
        return NULL
    t.mask = n - 1
    t.older = NULL
    return t


cdef int cache_init(PieceCache* c, Py_ssize_t max_bytes) noexcept nogil:
    cdef uint64_t n = 16, bits
    cdef uint64_t first = max_bytes if max_bytes < FIRST_TABLE_BYTES else FIRST_TABLE_BYTES
    c.table = NULL
    c.puts = 0
    c.evictions = 0
    c.held = 0
    c.max_bytes = 0
    c.growing = 0
    c.seen = NULL
    c.seen_mask = 0
    c.seen_marks = 0
    if max_bytes < <Py_ssize_t>(16 * sizeof(CacheEntry)):
        return 0                                        # too small to help: off
    while (n * 2) * sizeof(CacheEntry) <= first:
        n *= 2
    # Eight bits per entry of the largest table the budget allows (fewer pieces than that are met between two
    # clears), at most SEEN_MAX_BITS: 1/128 of the budget or less.
    bits = 1024
    while bits < SEEN_MAX_BITS and bits < 8 * (<uint64_t>max_bytes // sizeof(CacheEntry)):
        bits *= 2
    c.seen = <uint8_t*>calloc(bits // 8, 1)
    if c.seen == NULL:
        return -1
    c.seen_mask = bits - 1
    c.table = table_new(n)
    if c.table == NULL:
        free(c.seen)
        c.seen = NULL
        return -1
    c.held = n * sizeof(CacheEntry)
    c.max_bytes = max_bytes
    return 0


cdef void cache_free(PieceCache* c) noexcept nogil:
    # Only when no other thread can use the cache (the encoder is being freed).
    cdef CacheTable* t = c.table
    cdef CacheTable* older
    while t != NULL:
        older = t.older
        ctok_table_free(t.entries, (t.mask + 1) * sizeof(CacheEntry))
        free(t)
        t = older
    c.table = NULL
    c.held = 0
    free(c.seen)
    c.seen = NULL


cdef uint64_t cache_bytes(const PieceCache* c) noexcept nogil:
    return c.held


cdef list cache_tables(const PieceCache* c):
    cdef CacheTable* t = c.table
    cdef list out = []
    while t != NULL:
        size = (t.mask + 1) * sizeof(CacheEntry)
        out.append((size, ctok_resident(t.entries, size) if size >= (2 << 20) else size))
        t = t.older
    return out


cdef inline bint spilled(const CacheTable* t, uint64_t i) noexcept nogil:
    # Whether a piece whose first pair starts at entry i went to its second pair (i even, i <= t.mask).  A
    # racy read: a mark set meanwhile by another thread is at worst seen late, which is a miss.
    return ctok_byte_load(&t.entries[i].spilled) != 0


cdef inline bint piece_equal(const uint8_t* stored, const uint8_t* s, Py_ssize_t n) noexcept nogil:
    # stored[0:n] == s[0:n] for an entry's piece, whose bytes past its length are zero (cache_put): compared
    # 8 bytes a step with fixed-size loads, the last step zero padded (load_head reads only inside s[0:n]).
    # Why not memcmp: a library call per hit, for pieces mostly of 2 to 8 bytes.
    cdef uint64_t a, b
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        memcpy(&a, stored + i, 8)                       # i + 8 <= n <= CACHE_MAX_PIECE
        memcpy(&b, s + i, 8)                            # i + 8 <= n
        if a != b:
            return False
        i += 8
    if i < n:
        memcpy(&a, stored + i, 8)                       # i < n <= CACHE_MAX_PIECE, a multiple of 8
        return a == load_head(s + i, n - i)
    return True


cdef bint entry_get(CacheEntry* e, const uint8_t* s, Py_ssize_t n, uint64_t h, IdVec* out) noexcept nogil:
    cdef unsigned long long s1, s2
    cdef uint32_t n_ids
    cdef bint same
    s1 = ctok_seq_load_acquire(<unsigned long long*>&e.seq)
    if s1 & 1:
        return False
    if e.hash != h or e.length != <uint32_t>n:
        return False
    n_ids = e.n_ids
    if n_ids > CACHE_MAX_IDS or (out.cap - out.size < CACHE_MAX_IDS and idvec_reserve(out, CACHE_MAX_IDS) != BPE_OK):
        return False                                    # torn read (the sequence check would reject it too),
                                                        # or no memory: the caller encodes the piece instead
    same = piece_equal(e.piece, s, n)                   # n <= CACHE_MAX_PIECE
    # Copied past out.size, and only counted once the sequence shows no writer touched the entry meanwhile.
    # All CACHE_MAX_IDS slots, a fixed-size copy (a few moves, no call): reserved above.
    memcpy(out.data + out.size, e.ids, CACHE_MAX_IDS * sizeof(uint32_t))
    ctok_fence_acquire()
    s2 = ctok_seq_load_acquire(<unsigned long long*>&e.seq)
    if s1 != s2 or not same:
        return False
    out.size += n_ids
    return True


cdef inline bint pair_get(CacheTable* t, uint64_t i, const uint8_t* s, Py_ssize_t n, uint64_t h,
                          IdVec* out) noexcept nogil:
    # entry_get on the pair of entries starting at i (even: i and i + 1 are inside the table, mask >= 15).
    return entry_get(&t.entries[i], s, n, h, out) or entry_get(&t.entries[i + 1], s, n, h, out)


cdef bint cache_get(const PieceCache* c, const uint8_t* s, Py_ssize_t n, uint64_t h, IdVec* out) noexcept nogil:
    cdef uint64_t i
    cdef Py_ssize_t before = out.size
    cdef CacheTable* t = <CacheTable*>ctok_ptr_load_acquire(<void* const*>&c.table)
    if t == NULL or n > CACHE_MAX_PIECE or h == 0:
        return False
    i = set_index(t, h)
    if not pair_get(t, i, s, n, h, out):
        if not spilled(t, i) or not pair_get(t, second_index(t, h), s, n, h, out):
            return False
    # Still the current table after the entry was read (entry_get's loads come before this one): a replaced
    # table's pages are given back (grow), and an entry read while they turned to zeros, or stored into by a
    # writer that raced the switch, could look whole.  Whoever replaced it published the new table before.
    if <CacheTable*>ctok_ptr_load_acquire(<void* const*>&c.table) != t:
        out.size = before
        return False
    return True


cdef inline CacheEntry* entry_for(CacheTable* t, uint64_t h) noexcept nogil:
    # The entry a store of hash h takes: a free or matching one of its first pair; else a matching or free one
    # of its second pair (the first then marked spilled); else one of its first pair, picked by another bit.
    # Entries are never emptied, so a piece in its second pair never finds a free entry in its first.
    cdef uint64_t i = set_index(t, h)
    cdef uint64_t j = second_index(t, h)
    if t.entries[i].hash == 0 or t.entries[i].hash == h:
        return &t.entries[i]
    if t.entries[i + 1].hash == 0 or t.entries[i + 1].hash == h:
        return &t.entries[i + 1]
    if t.entries[j].hash == h:
        return &t.entries[j]
    if t.entries[j + 1].hash == h:
        return &t.entries[j + 1]
    if t.entries[j].hash == 0 or t.entries[j + 1].hash == 0:
        ctok_byte_or(&t.entries[i].spilled, 1)          # before the store: a reader that finds it looks there
        return &t.entries[j] if t.entries[j].hash == 0 else &t.entries[j + 1]
    return &t.entries[i + ((h >> 31) & 1)]


cdef void grow(PieceCache* c, CacheTable* t) noexcept nogil:
    # Build the next table, copy t's live entries into it, publish it.  One thread at a time (the flag);
    # the others go on with t meanwhile.  t stays allocated: lookups that loaded it before the switch finish.
    cdef uint64_t n = 2 * (t.mask + 1), j
    cdef CacheTable* bigger
    cdef CacheEntry tmp
    cdef CacheEntry* e
    cdef unsigned long long s1
    cdef uint8_t keep
    if not ctok_flag_take(&c.growing):
        return
    if <CacheTable*>ctok_ptr_load_acquire(<void* const*>&c.table) != t or c.held + n * sizeof(CacheEntry) > c.max_bytes:
        ctok_flag_drop(&c.growing)
        return
    bigger = table_new(n)
    if bigger == NULL:
        c.max_bytes = c.held                            # no memory: stay at this size for good
        ctok_flag_drop(&c.growing)
        return
    for j in range(t.mask + 1):
        # A consistent copy of each entry (the seqlock read), rehashed into the private new table.
        s1 = ctok_seq_load_acquire(<unsigned long long*>&t.entries[j].seq)
        if s1 & 1 or t.entries[j].hash == 0:
            continue
        memcpy(&tmp, &t.entries[j], sizeof(CacheEntry))
        ctok_fence_acquire()
        if ctok_seq_load_acquire(<unsigned long long*>&t.entries[j].seq) != s1 or tmp.length > CACHE_MAX_PIECE \
                or tmp.n_ids > CACHE_MAX_IDS:
            continue
        e = entry_for(bigger, tmp.hash)
        keep = e.spilled                                # its pair's mark in the new table, not the old one's
        memcpy(e, &tmp, sizeof(CacheEntry))
        e.spilled = keep
        e.seq = 0
    bigger.older = t
    c.held += n * sizeof(CacheEntry)
    ctok_count_reset(<unsigned long long*>&c.puts)
    ctok_count_reset(<unsigned long long*>&c.evictions)
    ctok_ptr_publish(<void**>&c.table, bigger)
    # Lookups and stores that took t before the switch may still read and write it while its pages turn to
    # zeros: cache_get accepts nothing read from a table that is no longer the current one.
    ctok_table_release(t.entries, (t.mask + 1) * sizeof(CacheEntry))
    ctok_flag_drop(&c.growing)


cdef void cache_put(PieceCache* c, const uint8_t* s, Py_ssize_t n, uint64_t h, const uint32_t* ids,
                    Py_ssize_t n_ids) noexcept nogil:
    cdef CacheEntry* e
    cdef unsigned long long seq
    cdef uint64_t window
    cdef bint replaced
    cdef CacheTable* t = <CacheTable*>ctok_ptr_load_acquire(<void* const*>&c.table)
    if t == NULL or n > CACHE_MAX_PIECE or n_ids > CACHE_MAX_IDS or h == 0:
        return
    # A racy peek only picks the entry; the claim below is what makes the write safe.
    e = entry_for(t, h)
    seq = ctok_seq_load_acquire(<unsigned long long*>&e.seq)
    if seq & 1 or not ctok_seq_claim(<unsigned long long*>&e.seq, seq):
        return                                          # another writer has it: skip, it is only a cache
    replaced = e.hash != 0 and e.hash != h
    e.hash = h
    e.length = <uint32_t>n
    e.n_ids = <uint32_t>n_ids
    memset(e.piece, 0, CACHE_MAX_PIECE)                 # zero past the piece: piece_equal compares whole words
    memcpy(e.piece, s, n)
    memcpy(e.ids, ids, n_ids * sizeof(uint32_t))
    ctok_seq_publish(<unsigned long long*>&e.seq, seq + 2)
    if replaced:
        ctok_count_add(<unsigned long long*>&c.evictions)
    # The store that closes a window (one thread: the count is atomic) judges it.  window is a power of two
    # (the table has at least 16 entries).
    window = (t.mask + 1) // 8
    if (ctok_count_add(<unsigned long long*>&c.puts) & (window - 1)) == 0:
        if (ctok_count_load(<unsigned long long*>&c.evictions) * GROW_EVICTIONS_PER_STORE >= window
                and c.held + 2 * (t.mask + 1) * sizeof(CacheEntry) <= c.max_bytes):
            grow(c, t)
        ctok_count_reset(<unsigned long long*>&c.evictions)


cdef void seen_mark(PieceCache* c, uint64_t i) noexcept nogil:
    # Racy by design: a mark lost to a clear or a racing thread only delays the piece's first store.  Cleared
    # when an eighth of the bits were set since the last clear (set bits then answer "met" for an eighth of the
    # new pieces: stores that come early, no harm).
    ctok_byte_or(&c.seen[i >> 3], <uint8_t>(1 << (i & 7)))
    if ctok_count_add(<unsigned long long*>&c.seen_marks) > (c.seen_mask + 1) // 8:
        ctok_count_reset(<unsigned long long*>&c.seen_marks)
        ctok_bits_clear(c.seen, (c.seen_mask + 1) // 8)


def _cache_for_test(Py_ssize_t max_bytes, list puts, list gets, bint grow_first=False):
    """Test hook: a cache of max_bytes; puts, (piece, hash, ids) with hashes the test picks (to aim pieces at
    pairs), stored in order; then, after one growth when grow_first, each of gets, (piece, hash), looked up:
    [its ids, or None on a miss], and the table's size in entries."""
    cdef PieceCache c
    cdef IdVec out
    cdef uint32_t ids[CACHE_MAX_IDS]
    cdef bytes piece
    cdef Py_ssize_t k
    if cache_init(&c, max_bytes) != 0 or c.table == NULL:
        raise MemoryError("piece cache")
    out.data = NULL
    out.size = out.cap = 0
    try:
        for piece, h, id_list in puts:
            if not 2 <= len(piece) <= CACHE_MAX_PIECE or not 1 <= len(id_list) <= CACHE_MAX_IDS or h % 2 == 0:
                raise ValueError("a piece of 2..48 bytes, 1..14 ids, an odd hash")
            for k in range(len(id_list)):
                ids[k] = id_list[k]
            cache_put(&c, piece, len(piece), h, ids, len(id_list))
        if grow_first:
            c.max_bytes = c.held * 3                    # room for the next table
            grow(&c, c.table)
        found = []
        for piece, h in gets:
            out.size = 0
            found.append([out.data[k] for k in range(out.size)] if cache_get(&c, piece, len(piece), h, &out)
                         else None)
        return found, c.table.mask + 1
    finally:
        idvec_free(&out)
        cache_free(&c)


def _admit_for_test(Py_ssize_t max_bytes, list hashes):
    """Test hook: a cache of max_bytes; cache_admit of each hash in order: [True when it was met before], and
    the admission filter's size in bits."""
    cdef PieceCache c
    cdef uint64_t h
    if cache_init(&c, max_bytes) != 0 or c.table == NULL:
        raise MemoryError("piece cache")
    try:
        return [bool(cache_admit(&c, h)) for h in hashes], c.seen_mask + 1
    finally:
        cache_free(&c)
