"""Native vocabulary tables: token bytes -> id, and id pairs -> merge (rank, merged id).

Built once from a `VocabSpec` (token_bytes list plus merges), then only read, so lookups need no lock and
run without the GIL.  For tiktoken files (merges=None) the pair table is derived from the vocabulary:
every split of a token into two tokens is a merge whose rank is the token's rank (= its id), which is
exactly tiktoken's rule "merge the adjacent pair whose concatenation has the lowest rank".
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memcpy, memcmp, memset

cdef uint64_t EMPTY_PAIR = 0xFFFFFFFFFFFFFFFFULL


cdef inline uint64_t hash_bytes(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    # 8 bytes at a time, multiply-rotate mixing; quality is ample for ~1e6 keys in a table at load <= 0.5.
    cdef uint64_t h = 0x9E3779B97F4A7C15ULL ^ <uint64_t>n
    cdef uint64_t w
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        memcpy(&w, s + i, 8)
        h = (h ^ w) * 0xBF58476D1CE4E5B9ULL
        h = (h << 29) | (h >> 35)
        i += 8
    w = 0
    if i < n:
        memcpy(&w, s + i, n - i)      # n - i < 8, so this stays inside s[0:n]
        h = (h ^ w) * 0x94D049BB133111EBULL
    h ^= h >> 31
    h *= 0xBF58476D1CE4E5B9ULL
    h ^= h >> 29
    return h


cdef inline uint64_t hash_pair(uint64_t key) noexcept nogil:
    key ^= key >> 33
    key *= 0xFF51AFD7ED558CCDULL
    key ^= key >> 33
    key *= 0xC4CEB9FE1A85EC53ULL
    key ^= key >> 33
    return key


cdef uint64_t table_size(Py_ssize_t n):
    cdef uint64_t size = 16
    while size < <uint64_t>(2 * n + 1):
        size <<= 1
    return size


cdef class Vocab:
    """Read-only native tables for one vocabulary.

    Vocab(token_bytes, merges=None, special_bytes=None)
      token_bytes: list indexed by id of bytes (ordinary tokens) or None (holes / special ids)
      merges: None for tiktoken rank semantics, else a list of (left, right) or (left, right, merged) ids in
              rank order (a later duplicate pair overrides an earlier one, as in HF tokenizers)
      special_bytes: dict id -> bytes of special tokens (decoded, never produced by BPE)
    """

    def __cinit__(self):
        self.blob = NULL
        self.offsets = NULL
        self.kind = NULL
        self.slots = NULL
        self.pairs = NULL
        self.n_ids = 0
        self.n_pairs = 0

    def __dealloc__(self):
        free(self.blob)
        free(self.offsets)
        free(self.kind)
        free(self.slots)
        free(self.pairs)

    def __init__(self, list token_bytes, merges=None, dict special_bytes=None):
        cdef Py_ssize_t n_ids = len(token_bytes)
        cdef Py_ssize_t i, total = 0, n_ord = 0
        cdef object b
        if special_bytes:
            for k in special_bytes:
                if k < 0:
                    raise ValueError(f"negative special token id {k}")
                if k >= n_ids:
                    n_ids = k + 1
        self.n_ids = n_ids
        self.offsets = <uint64_t*>malloc((n_ids + 1) * sizeof(uint64_t))
        self.kind = <uint8_t*>calloc(n_ids + 1, 1)
        if self.offsets == NULL or self.kind == NULL:
            raise MemoryError()
        cdef list all_bytes = [None] * n_ids
        for i in range(len(token_bytes)):
            b = token_bytes[i]
            if b is not None:
                if not isinstance(b, bytes):
                    raise TypeError(f"token {i}: expected bytes, got {type(b).__name__}")
                all_bytes[i] = b
                self.kind[i] = 1
                n_ord += 1
        if special_bytes:
            for k, b in special_bytes.items():
                if not isinstance(b, bytes):
                    raise TypeError(f"special token {k}: expected bytes")
                all_bytes[k] = b
                self.kind[k] = 2
        for i in range(n_ids):
            self.offsets[i] = total
            if all_bytes[i] is not None:
                total += PyBytes_GET_SIZE(all_bytes[i])
        self.offsets[n_ids] = total
        self.blob = <uint8_t*>malloc(total + 1)
        if self.blob == NULL:
            raise MemoryError()
        for i in range(n_ids):
            if all_bytes[i] is not None:
                memcpy(self.blob + self.offsets[i], PyBytes_AS_STRING(all_bytes[i]),
                       self.offsets[i + 1] - self.offsets[i])
        self._build_slots(n_ord)
        cdef uint8_t one
        cdef bytes fb
        for i in range(256):
            one = <uint8_t>i
            self.byte_id[i] = self.lookup(&one, 1)
            fb = ("<0x%02X>" % i).encode("ascii")
            self.fallback_id[i] = self.lookup(<const uint8_t*>PyBytes_AS_STRING(fb), 6)
        self.rank_merges = merges is None
        if merges is None:
            self._derive_pairs()
        else:
            self._load_pairs(merges)

    cdef void _build_slots(self, Py_ssize_t n_ord) except *:
        cdef uint64_t size = table_size(n_ord)
        cdef Py_ssize_t i
        cdef uint64_t h
        cdef Py_ssize_t n
        self.slots = <uint32_t*>malloc(size * sizeof(uint32_t))
        if self.slots == NULL:
            raise MemoryError()
        memset(self.slots, 0xFF, size * sizeof(uint32_t))
        self.slot_mask = size - 1
        for i in range(self.n_ids):
            if self.kind[i] != 1:
                continue
            n = self.offsets[i + 1] - self.offsets[i]
            if self.lookup(self.blob + self.offsets[i], n) != NO_ID:
                # Two ids with the same bytes: the first (lowest) id wins, as in tiktoken's decoder->encoder map.
                continue
            h = hash_bytes(self.blob + self.offsets[i], n) & self.slot_mask
            while self.slots[h] != NO_ID:
                h = (h + 1) & self.slot_mask
            self.slots[h] = <uint32_t>i

    cdef uint32_t lookup(self, const uint8_t* s, Py_ssize_t n) noexcept nogil:
        cdef uint64_t h = hash_bytes(s, n) & self.slot_mask
        cdef uint32_t tid
        while True:
            tid = self.slots[h]                 # h is masked to the table size
            if tid == NO_ID:
                return NO_ID
            if <Py_ssize_t>(self.offsets[tid + 1] - self.offsets[tid]) == n and \
                    memcmp(self.blob + self.offsets[tid], s, n) == 0:
                return tid
            h = (h + 1) & self.slot_mask

    cdef inline const uint8_t* token_ptr(self, uint32_t tid, Py_ssize_t* n) noexcept nogil:
        n[0] = self.offsets[tid + 1] - self.offsets[tid]
        return self.blob + self.offsets[tid]

    cdef bint pair(self, uint32_t left, uint32_t right, uint32_t* rank, uint32_t* new_id) noexcept nogil:
        cdef uint64_t key = (<uint64_t>left << 32) | right
        cdef uint64_t h = hash_pair(key) & self.pair_mask
        while True:
            if self.pairs[h].key == key:         # h is masked to the table size
                rank[0] = self.pairs[h].rank
                new_id[0] = self.pairs[h].new_id
                return True
            if self.pairs[h].key == EMPTY_PAIR:
                return False
            h = (h + 1) & self.pair_mask

    cdef void _alloc_pairs(self, Py_ssize_t n) except *:
        cdef uint64_t size = table_size(n)
        cdef uint64_t i
        self.pairs = <PairEntry*>malloc(size * sizeof(PairEntry))
        if self.pairs == NULL:
            raise MemoryError()
        for i in range(size):
            self.pairs[i].key = EMPTY_PAIR
        self.pair_mask = size - 1

    cdef void _put_pair(self, uint32_t left, uint32_t right, uint32_t rank, uint32_t new_id) noexcept nogil:
        cdef uint64_t key = (<uint64_t>left << 32) | right
        cdef uint64_t h = hash_pair(key) & self.pair_mask
        while self.pairs[h].key != EMPTY_PAIR and self.pairs[h].key != key:
            h = (h + 1) & self.pair_mask
        if self.pairs[h].key == EMPTY_PAIR:
            self.n_pairs += 1
        self.pairs[h].key = key
        self.pairs[h].rank = rank
        self.pairs[h].new_id = new_id

    cdef void _derive_pairs(self) except *:
        cdef Py_ssize_t i, k, n, count = 0
        cdef const uint8_t* s
        cdef uint32_t a, b
        # First pass counts the splits so the table is sized once.
        for i in range(self.n_ids):
            if self.kind[i] != 1:
                continue
            s = self.blob + self.offsets[i]
            n = self.offsets[i + 1] - self.offsets[i]
            for k in range(1, n):
                if self.lookup(s, k) != NO_ID and self.lookup(s + k, n - k) != NO_ID:
                    count += 1
        self._alloc_pairs(count)
        for i in range(self.n_ids):
            if self.kind[i] != 1:
                continue
            s = self.blob + self.offsets[i]
            n = self.offsets[i + 1] - self.offsets[i]
            if self.lookup(s, n) != <uint32_t>i:
                continue                          # a duplicate of a lower id: never produced
            for k in range(1, n):
                a = self.lookup(s, k)
                if a == NO_ID:
                    continue
                b = self.lookup(s + k, n - k)
                if b == NO_ID:
                    continue
                self._put_pair(a, b, <uint32_t>i, <uint32_t>i)

    cdef void _load_pairs(self, merges) except *:
        cdef Py_ssize_t rank = 0
        cdef Py_ssize_t a, b, new
        cdef bytes joined
        self._alloc_pairs(len(merges))
        for m in merges:
            a = m[0]
            b = m[1]
            if a < 0 or b < 0 or a >= self.n_ids or b >= self.n_ids or self.kind[a] != 1 or self.kind[b] != 1:
                raise ValueError(f"merge {rank}: ids ({a}, {b}) are not ordinary tokens")
            if len(m) > 2:
                new = m[2]
            else:
                joined = self.token_bytes(a) + self.token_bytes(b)
                new = self.lookup(<const uint8_t*>PyBytes_AS_STRING(joined), PyBytes_GET_SIZE(joined))
                if new == NO_ID:
                    raise ValueError(f"merge {rank}: the merged token {joined!r} is not in the vocabulary")
            if new < 0 or new >= self.n_ids or self.kind[new] != 1:
                raise ValueError(f"merge {rank}: merged id {new} is not an ordinary token")
            self._put_pair(<uint32_t>a, <uint32_t>b, <uint32_t>rank, <uint32_t>new)
            rank += 1

    # ---- Python-level accessors (tests, decode helpers) ----
    @property
    def size(self):
        return self.n_ids

    @property
    def pair_count(self):
        return self.n_pairs

    def token_bytes(self, Py_ssize_t tid):
        if tid < 0 or tid >= self.n_ids or self.kind[tid] == 0:
            return None
        return PyBytes_FromStringAndSize(<char*>self.blob + self.offsets[tid],
                                         self.offsets[tid + 1] - self.offsets[tid])

    def token_id(self, bytes b):
        cdef uint32_t tid = self.lookup(<const uint8_t*>PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))
        return -1 if tid == NO_ID else <Py_ssize_t>tid

    def merge_of(self, Py_ssize_t left, Py_ssize_t right):
        cdef uint32_t rank, new_id
        if left < 0 or right < 0 or left > 0xFFFFFFFE or right > 0xFFFFFFFE:
            return None
        if self.pair(<uint32_t>left, <uint32_t>right, &rank, &new_id):
            return (rank, new_id)
        return None

    def is_special(self, Py_ssize_t tid):
        return 0 <= tid < self.n_ids and self.kind[tid] == 2
