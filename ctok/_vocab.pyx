"""Native vocabulary tables: token bytes -> id, and id pairs -> merge (rank, merged id).

Built once from a `VocabSpec` (token_bytes list plus merges), then only read, so lookups need no lock and
run without the GIL.  For tiktoken files (merges=None) the pair table is derived from the vocabulary:
tiktoken merges the adjacent pair whose concatenation has the lowest rank, and for each token only one
split of it into two tokens can ever be that pair (see Vocab._derive_pairs), stored with the token's rank.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t, int64_t
from libc.stdlib cimport malloc, calloc, free, qsort
from libc.string cimport memcpy, memcmp, memset

import struct



# Ids stay below the values reserved for marks (NO_ID, CP_SEVERAL, CP_NONE with flag bits): 2**30 - 2.
MAX_IDS = 0x3FFFFFFE


cdef uint64_t table_size(Py_ssize_t n):
    cdef uint64_t size = 16
    while size < <uint64_t>(2 * n + 1):
        size <<= 1
    return size


cdef inline bint hpair_lookup(const PairEntry* tab, uint64_t mask, uint32_t left, uint32_t right,
                             uint32_t* rank, uint32_t* new_id) noexcept nogil:
    cdef uint64_t key = (<uint64_t>left << 32) | right
    cdef uint64_t h = hash_pair(key) & mask
    while True:
        if tab[h].key == key:                 # h is masked to the table size
            rank[0] = tab[h].rank
            new_id[0] = tab[h].new_id
            return True
        if tab[h].key == 0xFFFFFFFFFFFFFFFFULL:
            return False
        h = (h + 1) & mask


cdef int _cmp_right(const void* a, const void* b) noexcept nogil:
    cdef uint32_t x = (<const PairItem*>a).right, y = (<const PairItem*>b).right
    return -1 if x < y else (1 if x > y else 0)


cdef inline bint _pair(const Tables* t, const PairEntry* tab, uint64_t mask, uint32_t left, uint32_t right,
                       uint32_t* rank, uint32_t* new_id) noexcept nogil:
    # The merge of (left, right) from the build-time hash table when tab is given, else from the merge regions.
    if tab != NULL:
        return hpair_lookup(tab, mask, left, right, rank, new_id)
    return tables_pair(t, left, right, rank, new_id)


cdef Py_ssize_t _lone_bpe(const Tables* t, const PairEntry* tab, uint64_t mask, const uint8_t* s, Py_ssize_t n,
                          uint32_t* sym, int64_t* top_rank=NULL) noexcept nogil:
    # BPE of s[0:n] alone, from single bytes, lowest rank first and leftmost on ties (tiktoken's and HF's
    # order); the survivors in sym[0:m] (room for n), m returned.  -1 when a byte is no token, -2 when out
    # of memory.  top_rank (if given): the highest rank among the merges applied, -1 for none.  Short tokens use a quadratic scan (less bookkeeping); long ones a min-tree over the pair
    # positions, so a file with a megabyte-long token still loads in linear-logarithmic time.
    cdef Py_ssize_t m = n, i, best, size, p, j, r, q
    cdef uint32_t rank, new_id, best_rank, best_id
    cdef int32_t* nxt
    cdef int32_t* prv
    cdef uint32_t* made
    cdef uint64_t* tree
    cdef uint64_t key, x, y
    cdef int64_t top = -1
    for i in range(n):
        sym[i] = t.byte_id[s[i]]
        if sym[i] == NO_ID:
            return -1
    if n <= 64:
        while m > 1:
            best = -1
            best_rank = 0xFFFFFFFF
            best_id = NO_ID
            for i in range(m - 1):
                if _pair(t, tab, mask, sym[i], sym[i + 1], &rank, &new_id) and rank < best_rank:
                    best_rank = rank
                    best_id = new_id
                    best = i
            if best < 0:
                break
            top = best_rank if <int64_t>best_rank > top else top
            sym[best] = best_id
            for i in range(best + 1, m - 1):
                sym[i] = sym[i + 1]
            m -= 1
        if top_rank != NULL:
            top_rank[0] = top
        return m
    size = 1
    while size < n:
        size <<= 1
    nxt = <int32_t*>malloc(n * sizeof(int32_t))
    prv = <int32_t*>malloc(n * sizeof(int32_t))
    made = <uint32_t*>malloc(n * sizeof(uint32_t))
    tree = <uint64_t*>malloc(2 * size * sizeof(uint64_t))
    if nxt == NULL or prv == NULL or made == NULL or tree == NULL:
        free(nxt); free(prv); free(made); free(tree)
        return -2
    # Leaf i: the pair whose left symbol is i, keyed (rank << 32) | i; the root is the next merge.
    for i in range(n):
        nxt[i] = <int32_t>(i + 1) if i + 1 < n else -1
        prv[i] = <int32_t>(i - 1)
    for i in range(size):
        tree[size + i] = 0xFFFFFFFFFFFFFFFFULL
    for i in range(n - 1):
        if _pair(t, tab, mask, sym[i], sym[i + 1], &rank, &new_id):
            tree[size + i] = (<uint64_t>rank << 32) | <uint64_t>i
            made[i] = new_id
    for i in range(size - 1, 0, -1):
        x = tree[2 * i]; y = tree[2 * i + 1]
        tree[i] = x if x < y else y
    while tree[1] != 0xFFFFFFFFFFFFFFFFULL:
        top = <int64_t>(tree[1] >> 32) if <int64_t>(tree[1] >> 32) > top else top
        i = <Py_ssize_t>(tree[1] & 0xFFFFFFFFULL)
        j = nxt[i]
        sym[i] = made[i]
        r = nxt[j]
        nxt[i] = <int32_t>r
        if r >= 0:
            prv[r] = <int32_t>i
        # Leaves j (gone), i (new right neighbour) and prv[i] (new left neighbour) change.
        for q in range(3):
            p = j if q == 0 else (i if q == 1 else prv[i])
            if p < 0:
                continue
            key = 0xFFFFFFFFFFFFFFFFULL
            if q != 0 and nxt[p] >= 0 and _pair(t, tab, mask, sym[p], sym[nxt[p]], &rank, &new_id):
                key = (<uint64_t>rank << 32) | <uint64_t>p
                made[p] = new_id
            p += size
            tree[p] = key
            p >>= 1
            while p >= 1:
                x = tree[2 * p]; y = tree[2 * p + 1]
                tree[p] = x if x < y else y
                p >>= 1
    m = 0
    i = 0
    while i >= 0:
        sym[m] = sym[i]
        m += 1
        i = nxt[i]
    free(nxt); free(prv); free(made); free(tree)
    if top_rank != NULL:
        top_rank[0] = top
    return m


cdef int _lone_bpe_last_pair(const PairEntry* tab, uint64_t mask, const Tables* t, const uint8_t* s,
                             Py_ssize_t n, uint32_t* sym, uint32_t* left, uint32_t* right) noexcept nogil:
    # 1 with the two final symbols when BPE of s[0:n] alone, with the pairs in the build table so far,
    # stops at exactly two; 0 when not; -2 when out of memory.
    cdef Py_ssize_t m = _lone_bpe(t, tab, mask, s, n, sym)
    if m == -2:
        return -2
    if m != 2:
        return 0
    left[0] = sym[0]
    right[0] = sym[1]
    return 1


cdef bint _derive_pairs_into(Vocab v, const PairEntry* full, uint64_t fmask) except -1:
    # tiktoken merges any adjacent pair whose concatenation is a token, at that token's rank.  Only one
    # pair per token can ever fire, though: when symbols a, b merge into T, every earlier merge inside
    # T's span ran exactly as in BPE(bytes(T)) alone (merges never crossed the span's edges, and inside
    # it they ran in the same (rank, position) order), so (a, b) is the last merge of that lone run.
    # So tokens are visited shortest first, each one's lone BPE is run with the pairs of all shorter
    # tokens (no other token fits inside it), and when it stops at two symbols those two are its pair.
    # A token whose lone run stops at three or more symbols is never built by merging (only whole-piece
    # lookup emits it), so it gets no pair.  One pair per token halves the table against taking every
    # split, and a smaller table is what keeps the merge loop's lookups in cache.
    # full != NULL: a byte-level merge list (HF), already loaded into `full`; the argument holds for its
    # (rank, position) order too, except that the last pair must also be one of its merges, and takes
    # that merge's rank.  Returns False (v's table left half-built: the caller restores `full`) when a
    # merge of the list makes another id than its two tokens' bytes name.
    cdef Py_ssize_t i, n, max_len = 0, k
    cdef const uint8_t* s
    cdef Py_ssize_t* by_len = NULL
    cdef Py_ssize_t* starts = NULL
    cdef uint32_t* sym = NULL
    cdef uint32_t a, b, rank, new_id
    cdef int rc
    cdef Py_ssize_t n_ord = 0
    for i in range(v.t.n_ids):
        if v.t.kind[i] == 1:
            n_ord += 1
            n = v.t.offsets[i + 1] - v.t.offsets[i]
            if n > max_len:
                max_len = n
    v._alloc_pairs(n_ord)
    # Counting sort of the ordinary ids by byte length (stable: equal lengths keep id order).
    starts = <Py_ssize_t*>calloc(max_len + 2, sizeof(Py_ssize_t))
    by_len = <Py_ssize_t*>malloc((n_ord + 1) * sizeof(Py_ssize_t))
    sym = <uint32_t*>malloc((max_len + 1) * sizeof(uint32_t))
    if starts == NULL or by_len == NULL or sym == NULL:
        free(starts); free(by_len); free(sym)
        raise MemoryError()
    try:
        for i in range(v.t.n_ids):
            if v.t.kind[i] == 1:
                starts[v.t.offsets[i + 1] - v.t.offsets[i] + 1] += 1
        for k in range(1, max_len + 2):
            starts[k] += starts[k - 1]
        for i in range(v.t.n_ids):
            if v.t.kind[i] == 1:
                n = v.t.offsets[i + 1] - v.t.offsets[i]
                by_len[starts[n]] = i                     # starts[n] < n_ord: one slot per ordinary id
                starts[n] += 1
        for k in range(n_ord):
            i = by_len[k]
            s = v.t.blob + v.t.offsets[i]
            n = v.t.offsets[i + 1] - v.t.offsets[i]
            if n < 2 or tables_lookup(&v.t, s, n) != <uint32_t>i:
                continue                          # a single byte, or a duplicate of a lower id
            rc = _lone_bpe_last_pair(v._hpairs, v._hmask, &v.t, s, n, sym, &a, &b)
            if rc == -2:
                raise MemoryError()
            if rc != 1:
                continue
            if full == NULL:
                v._put_pair(a, b, <uint32_t>i, <uint32_t>i)
            elif hpair_lookup(full, fmask, a, b, &rank, &new_id):
                if new_id != <uint32_t>i:
                    return False
                v._put_pair(a, b, rank, new_id)
    finally:
        free(starts)
        free(by_len)
        free(sym)
    return True


cdef void _keep_live_pairs(Vocab v) except *:
    # A byte-level merge list (HF) may name merges that can never fire: Llama 3's tokenizer.json lists
    # 280,147 for its 128,000 tokens (each token's every split in two), of which BPE can use one per
    # token (see _derive_pairs_into).  Dropping the rest changes no result and gives the table a rank
    # file's size, so the merge loop's searches are shorter and stay in cache.  A vocabulary whose
    # bytes are not all tokens keeps its list as it is (BPE there does not start from bytes alone).
    cdef PairEntry* full = v._hpairs
    cdef uint64_t fmask = v._hmask
    cdef Py_ssize_t fcount = v._hcount
    cdef int i
    cdef bint ok = False
    for i in range(256):
        if v.t.byte_id[i] == NO_ID:               # i < 256, byte_id's length
            return
    v._hpairs = NULL                              # _alloc_pairs frees the table it replaces: not this one
    try:
        ok = _derive_pairs_into(v, full, fmask)
    finally:
        if ok:
            free(full)
        else:
            free(v._hpairs)
            v._hpairs = full
            v._hmask = fmask
            v._hcount = fcount


cdef inline Py_ssize_t popcount64(uint64_t x) noexcept nogil:
    # The set bits of a word (no popcount instruction in the x86-64 baseline: the builtin becomes a call).
    x = x - ((x >> 1) & 0x5555555555555555ULL)
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL)
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL
    return <Py_ssize_t>((x * 0x0101010101010101ULL) >> 56)


cdef inline uint32_t lowest_bit(uint32_t x) noexcept nogil:
    # The index of x's lowest set bit (x != 0).  Outside the class: a name starting "__" inside it is mangled.
    return <uint32_t>__builtin_ctz(x)


cdef inline uint32_t lowest_bit64(uint64_t x) noexcept nogil:
    # The same for a word (x != 0).
    return <uint32_t>__builtin_ctzll(x)


cdef class Vocab:
    """Read-only native tables for one vocabulary.

    Vocab(token_bytes, merges=None, special_bytes=None, *, live_merges=False)
      token_bytes: list indexed by id of bytes (ordinary tokens) or None (holes / special ids)
      merges: None for tiktoken rank semantics, else a list of (left, right) or (left, right, merged) ids in
              rank order (a later duplicate pair overrides an earlier one, as in HF tokenizers)
      special_bytes: dict id -> bytes of special tokens (decoded, never produced by BPE)
      live_merges: merges is a byte-level list (BPE starts from single bytes): keep only the merges that
              can fire (see _keep_live_pairs)
    """

    def __cinit__(self):
        self.t.blob = NULL
        self.t.offsets = NULL
        self.t.kind = NULL
        self.t.slots = NULL
        self.t.slot_tails = NULL
        self.t.pair_region = NULL
        self.t.pair_right = NULL
        self.t.pair_key = NULL
        self.t.pair_slots = 0
        self._hpairs = NULL
        self._hmask = 0
        self._hcount = 0
        self.t.byte_pairs = NULL
        self.t.byte_ctx = NULL
        self.t.cp_token = NULL
        self.t.seam_bits = NULL
        self.t.self_merges = NULL
        self._borrowed = False
        self.t.n_ids = 0
        self.t.n_pairs = 0
        self.t.max_token_len = 0

    def __dealloc__(self):
        free(self.t.byte_pairs)                   # always our own allocations, these
        free(self.t.byte_ctx)
        free(self.t.cp_token)
        free(self.t.seam_bits)
        free(self.t.self_merges)
        free(self.t.slot_tails)                   # derived at load, never in _backing
        free(self._hpairs)
        if self._borrowed:
            return                                # the other tables point into _backing, which owns them
        free(self.t.blob)
        free(self.t.offsets)
        free(self.t.kind)
        free(self.t.slots)
        free(self.t.pair_region)
        free(self.t.pair_right)
        free(self.t.pair_key)

    def __init__(self, list token_bytes=None, merges=None, dict special_bytes=None, *, bint live_merges=False):
        if token_bytes is None:
            return                                # an empty shell for Vocab.from_bytes to fill
        cdef Py_ssize_t n_ids = len(token_bytes)
        cdef Py_ssize_t i, total = 0, n_ord = 0
        cdef object b
        if n_ids >= MAX_IDS:
            raise ValueError(f"{n_ids} token ids: at most {MAX_IDS - 1} are supported")
        if special_bytes:
            for k in special_bytes:
                if not isinstance(k, int) or k < 0 or k >= MAX_IDS:
                    raise ValueError(f"special token id {k!r} is out of range (0 to {MAX_IDS - 2})")
                if k >= n_ids:
                    n_ids = k + 1
        self.t.n_ids = n_ids
        self.t.offsets = <uint64_t*>malloc((n_ids + 1) * sizeof(uint64_t))
        self.t.kind = <uint8_t*>calloc(n_ids + 1, 1)
        if self.t.offsets == NULL or self.t.kind == NULL:
            raise MemoryError()
        cdef list all_bytes = [None] * n_ids
        for i in range(len(token_bytes)):
            b = token_bytes[i]
            if b is not None:
                if not isinstance(b, bytes):
                    raise TypeError(f"token {i}: expected bytes, got {type(b).__name__}")
                all_bytes[i] = b
                self.t.kind[i] = 1
                n_ord += 1
        if special_bytes:
            for k, b in special_bytes.items():
                if not isinstance(b, bytes):
                    raise TypeError(f"special token {k}: expected bytes")
                all_bytes[k] = b
                self.t.kind[k] = 2
        for i in range(n_ids):
            self.t.offsets[i] = total
            if all_bytes[i] is not None:
                total += PyBytes_GET_SIZE(all_bytes[i])
        self.t.offsets[n_ids] = total
        # 16 spare bytes: decoding copies short tokens with fixed 16-byte moves that may read past the end.
        self.t.blob = <uint8_t*>calloc(total + 16, 1)
        if self.t.blob == NULL:
            raise MemoryError()
        for i in range(n_ids):
            if all_bytes[i] is not None:
                memcpy(self.t.blob + self.t.offsets[i], PyBytes_AS_STRING(all_bytes[i]),
                       self.t.offsets[i + 1] - self.t.offsets[i])
        self._build_slots(n_ord)
        cdef uint8_t one
        cdef bytes fb
        for i in range(256):
            one = <uint8_t>i
            self.t.byte_id[i] = tables_lookup(&self.t, &one, 1)
            fb = ("<0x%02X>" % i).encode("ascii")
            self.t.fallback_id[i] = tables_lookup(&self.t, <const uint8_t*>PyBytes_AS_STRING(fb), 6)
        self.rank_merges = merges is None
        if merges is None:
            self._derive_pairs()
        else:
            self._load_pairs(merges)
            if live_merges:
                _keep_live_pairs(self)
        self._build_pair_regions()
        self._build_byte_pairs()
        self._build_char_tables()

    cdef void _build_char_tables(self) except *:
        # See Tables.cp_token.  Cost: one pass over the tokens and a lone BPE of each BMP character.
        cdef const Tables* t = &self.t
        cdef Py_ssize_t n = t.n_ids, i, j, ln, k
        cdef int64_t* first_use = NULL
        cdef uint8_t* risky = NULL
        cdef uint8_t* is_char = NULL
        cdef const uint8_t* b
        cdef uint8_t* bits
        cdef uint32_t cp, rank, new_id, x, top2, first
        cdef int64_t top
        cdef uint8_t u[3]
        cdef uint32_t sym[3]
        cdef int m, best, q
        cdef uint32_t best_rank, best_id
        free(self.t.cp_token); free(self.t.seam_bits)
        self.t.cp_token = NULL
        self.t.seam_bits = NULL
        if n >= CP_SEVERAL:
            return
        first_use = <int64_t*>malloc(n * sizeof(int64_t) + 1)
        risky = <uint8_t*>calloc(4 * 65536, 1)
        is_char = <uint8_t*>calloc(n + 1, 1)
        try:
            if first_use == NULL or risky == NULL or is_char == NULL:
                raise MemoryError()
            # first_use[id]: the lowest rank of a merge with that token on either side.  A character whose
            # token has a merge ranked at or below the top rank of the character's own lone BPE starts as
            # its bytes (see symbolize_chars); with monotone ranks (every rank file) none is.
            for i in range(n):
                first_use[i] = 0x7FFFFFFFFFFFFFFF
            for i in range(n):
                for k in range(pair_merges(t, <uint32_t>i, &first)):
                    rank = <uint32_t>(t.pair_key[first + k] >> 32)
                    if <int64_t>rank < first_use[i]:
                        first_use[i] = rank
                    if <int64_t>rank < first_use[t.pair_right[first + k]]:    # right < n (checked merges)
                        first_use[t.pair_right[first + k]] = rank
            self.t.seam_bits = <uint8_t*>calloc(SEAM_ALL_BITS // 8, 1)
            self.t.cp_token = <uint32_t*>malloc(0x10000 * sizeof(uint32_t))
            if self.t.seam_bits == NULL or self.t.cp_token == NULL:
                raise MemoryError()
            bits = self.t.seam_bits
            # Tokens that could join part of a character to a neighbour in UTF-8 text.  A character's
            # last byte is followed by a lead byte, so such a token either starts with a run of 1-2
            # continuation bytes (a character's suffix) and goes on, or ends with an unfinished sequence
            # (lead byte and 0-1 continuation bytes: a character's prefix) after other bytes.  Each is
            # recorded with the one or two bytes that must stand beside that part in the text.  (Longer
            # runs belong to 4-byte characters, which symbolize_chars never takes.)
            for i in range(n):
                if t.kind[i] != 1:
                    continue
                b = t.blob + t.offsets[i]
                ln = t.offsets[i + 1] - t.offsets[i]
                k = 0
                while k < ln and (b[k] & 0xC0) == 0x80:
                    k += 1
                if 0 < k < ln and k <= 2:
                    x = b[0] if k == 1 else (<uint32_t>b[0] << 8) | b[1]
                    risky[(k - 1) * 65536 + x] = 1
                    _set_bit(bits, SEAM_PRE_START + (((<uint32_t>b[k - 1] & 63) << 8) | b[k]))
                    for top2 in range(4):                   # every byte with those low 6 bits
                        _set_bit(bits, SEAM_PRE_ANY + (((<uint32_t>b[k] << 8) | (b[k - 1] & 63) | (top2 << 6))))
                    if ln - k == 1:
                        _set_bit(bits, seam_index(SEAM_START_SHORT, k, x, b[k]))
                    else:
                        _set_bit(bits, seam_index(SEAM_START_LONG, k, x, (<uint32_t>b[k] << 8) | b[k + 1]))
                j = ln - 1
                while j > 0 and (b[j] & 0xC0) == 0x80:
                    j -= 1
                if j > 0 and b[j] >= 0xC0 and ln - j < _seq_len(b[j]) and ln - j <= 2:
                    x = b[j] if ln - j == 1 else (<uint32_t>b[j] << 8) | b[j + 1]
                    risky[(ln - j + 1) * 65536 + x] = 1
                    _set_bit(bits, SEAM_PRE_END + ((<uint32_t>b[j - 1] << 8) | b[j]))
                    _set_bit(bits, SEAM_PRE_ANY + ((<uint32_t>b[j] << 8) | b[j - 1]))
                    if j == 1:
                        _set_bit(bits, seam_index(SEAM_END_SHORT, ln - j, x, b[0]))
                    else:
                        _set_bit(bits, seam_index(SEAM_END_LONG, ln - j, x, (<uint32_t>b[j - 2] << 8) | b[j - 1]))
            for cp in range(0x10000):
                self.t.cp_token[cp] = CP_NONE
                if cp < 0x80:
                    self.t.cp_token[cp] = t.byte_id[cp] if t.byte_id[cp] != NO_ID else CP_NONE
                    continue
                if 0xD800 <= cp < 0xE000:
                    continue                                  # surrogates are not characters of UTF-8 text
                if cp < 0x800:
                    u[0] = 0xC0 | (cp >> 6); u[1] = 0x80 | (cp & 0x3F); m = 2
                else:
                    u[0] = 0xE0 | (cp >> 12); u[1] = 0x80 | ((cp >> 6) & 0x3F); u[2] = 0x80 | (cp & 0x3F); m = 3
                ln = m
                # The character's lone BPE: one token, or several (symbolize_chars redoes those few merges).
                m = _lone_bpe(t, NULL, 0, u, ln, sym, &top)
                if m < 1:
                    continue                                  # a byte that is no token: bytes path only
                if m == 1 and first_use[sym[0]] <= top:
                    continue                                  # its token may merge before it is whole
                x = sym[0] if m == 1 else CP_SEVERAL
                # risky[0 / 1]: suffixes of 1 / 2 bytes; risky[2 / 3]: prefixes of 1 / 2 bytes (by 65536)
                if risky[u[ln - 1]] or (ln == 3 and risky[65536 + ((<uint32_t>u[1] << 8) | u[2])]):
                    x |= CP_SUFFIX_RISK
                if risky[2 * 65536 + u[0]] or (ln == 3 and risky[3 * 65536 + ((<uint32_t>u[0] << 8) | u[1])]):
                    x |= CP_PREFIX_RISK
                self.t.cp_token[cp] = x
            # CHAR_PAIRS: every merge between two ids cp_token gives whole multi-byte characters.
            for cp in range(0x80, 0x10000):
                x = self.t.cp_token[cp] & CP_ID_MASK
                if x < CP_SEVERAL:
                    is_char[x] = 1                            # x < n: an id of this vocabulary
            for i in range(n):
                if not is_char[i]:
                    continue
                for k in range(pair_merges(t, <uint32_t>i, &first)):
                    if is_char[t.pair_right[first + k]]:      # right < n (checked merges)
                        _set_bit(bits, char_pair_index(<uint32_t>i, t.pair_right[first + k]))
        finally:
            free(first_use)
            free(risky)
            free(is_char)

    cdef void _build_byte_pairs(self) except *:
        cdef int a, b
        cdef uint32_t rank, new_id
        if self.t.byte_pairs == NULL:
            self.t.byte_pairs = <uint64_t*>malloc(65536 * sizeof(uint64_t))
            if self.t.byte_pairs == NULL:
                raise MemoryError()
        for a in range(256):
            for b in range(256):
                if (self.t.byte_id[a] != NO_ID and self.t.byte_id[b] != NO_ID and
                        tables_pair(&self.t, self.t.byte_id[a], self.t.byte_id[b], &rank, &new_id)):
                    self.t.byte_pairs[(a << 8) | b] = (<uint64_t>rank << 32) | new_id
                else:
                    self.t.byte_pairs[(a << 8) | b] = 0xFFFFFFFFFFFFFFFFULL
        self._build_byte_ctx()

    cdef void _build_byte_ctx(self) except *:
        # Tables.byte_ctx from every merge: a lone lead byte (0xC2-0xDF) on the right, a lone trail byte
        # (0x80-0xBF) on the left.
        cdef Py_ssize_t left, k
        cdef uint32_t right, rank, lo, hi
        cdef Py_ssize_t idx
        cdef uint8_t lb, rb
        if self.t.byte_ctx == NULL:
            self.t.byte_ctx = <uint32_t*>malloc(BYTE_CTX_SIZE * sizeof(uint32_t))
            if self.t.byte_ctx == NULL:
                raise MemoryError()
        memset(self.t.byte_ctx, 0xFF, BYTE_CTX_SIZE * sizeof(uint32_t))
        for left in range(self.t.n_ids):
            hi = pair_merges(&self.t, <uint32_t>left, &lo)
            for k in range(lo, lo + hi):
                right = self.t.pair_right[k]
                rank = <uint32_t>(self.t.pair_key[k] >> 32)
                if self.t.offsets[right + 1] - self.t.offsets[right] == 1:
                    rb = self.t.blob[self.t.offsets[right]]
                    if 0xC2 <= rb < 0xE0 and self.t.offsets[left + 1] > self.t.offsets[left]:
                        lb = self.t.blob[self.t.offsets[left + 1] - 1]          # the left token's last byte
                        idx = BYTE_CTX_LEFT + ((<Py_ssize_t>lb << 5) | (rb & 0x1F))
                        if rank < self.t.byte_ctx[idx]:
                            self.t.byte_ctx[idx] = rank
                if self.t.offsets[left + 1] - self.t.offsets[left] == 1:
                    lb = self.t.blob[self.t.offsets[left]]
                    if 0x80 <= lb < 0xC0 and self.t.offsets[right + 1] > self.t.offsets[right]:
                        rb = self.t.blob[self.t.offsets[right]]                 # the right token's first byte
                        idx = BYTE_CTX_RIGHT + ((<Py_ssize_t>(lb & 0x3F) << 8) | rb)
                        if rank < self.t.byte_ctx[idx]:
                            self.t.byte_ctx[idx] = rank

    cdef void _build_slots(self, Py_ssize_t n_ord) except *:
        cdef uint64_t size = table_size(n_ord)
        cdef Py_ssize_t i
        cdef uint64_t h, head
        cdef Py_ssize_t n
        cdef const uint8_t* s
        self.t.slots = <Slot*>malloc(size * sizeof(Slot))
        if self.t.slots == NULL:
            raise MemoryError()
        memset(self.t.slots, 0xFF, size * sizeof(Slot))
        self.t.slot_mask = size - 1
        free(self.t.slot_tails)
        self.t.slot_tails = <uint64_t*>calloc(size, sizeof(uint64_t))
        if self.t.slot_tails == NULL:
            raise MemoryError()
        for i in range(self.t.n_ids):
            if self.t.kind[i] != 1:
                continue
            s = self.t.blob + self.t.offsets[i]
            n = self.t.offsets[i + 1] - self.t.offsets[i]
            if n >= 0xFFFFFFFF:
                raise ValueError(f"token {i} is too long ({n} bytes)")
            if n > self.t.max_token_len:
                self.t.max_token_len = n
            if tables_lookup(&self.t, s, n) != NO_ID:
                # Two ids with the same bytes: the first (lowest) id wins, as in tiktoken's decoder->encoder map.
                continue
            head = load_head(s, n)
            h = hash_bytes(s, n, head) & self.t.slot_mask
            while self.t.slots[h].id != NO_ID:
                h = (h + 1) & self.t.slot_mask
            self.t.slots[h].head = head
            self.t.slots[h].id = <uint32_t>i
            self.t.slots[h].len = <uint32_t>n
            if 8 < n <= 16:
                self.t.slot_tails[h] = load_tail(s, n)

    cdef void _alloc_pairs(self, Py_ssize_t n) except *:
        cdef uint64_t size = table_size(n)
        cdef uint64_t i
        free(self._hpairs)
        self._hpairs = <PairEntry*>malloc(size * sizeof(PairEntry))
        if self._hpairs == NULL:
            raise MemoryError()
        for i in range(size):
            self._hpairs[i].key = 0xFFFFFFFFFFFFFFFFULL
        self._hmask = size - 1
        self._hcount = 0

    cdef void _put_pair(self, uint32_t left, uint32_t right, uint32_t rank, uint32_t new_id) noexcept:
        cdef uint64_t key = (<uint64_t>left << 32) | right
        cdef uint64_t h = hash_pair(key) & self._hmask
        while self._hpairs[h].key != 0xFFFFFFFFFFFFFFFFULL and self._hpairs[h].key != key:
            h = (h + 1) & self._hmask
        if self._hpairs[h].key == 0xFFFFFFFFFFFFFFFFULL:
            self._hcount += 1
        self._hpairs[h].key = key
        self._hpairs[h].rank = rank
        self._hpairs[h].new_id = new_id

    cdef bint _hpair(self, uint32_t left, uint32_t right, uint32_t* rank, uint32_t* new_id) noexcept nogil:
        return hpair_lookup(self._hpairs, self._hmask, left, right, rank, new_id)

    cdef void _build_pair_regions(self) except *:
        # The build-time hash table -> Tables.pair_region / pair_right / pair_key, then freed.  Each left's
        # merges are gathered and sorted by right as PairItems first.
        cdef Py_ssize_t n_ids = self.t.n_ids, left
        cdef uint64_t j, size = self._hmask + 1, slots = 0
        cdef uint32_t n, level, m, at, lo
        cdef uint32_t* start = NULL
        cdef uint32_t* fill = NULL
        cdef PairItem* items = NULL
        cdef PairItem* it
        if self._hcount >= 0xFFFFFFFF:
            raise ValueError("too many merges")
        try:
            start = <uint32_t*>calloc(n_ids + 2, sizeof(uint32_t))
            fill = <uint32_t*>malloc((n_ids + 1) * sizeof(uint32_t))
            items = <PairItem*>malloc((self._hcount + 1) * sizeof(PairItem))
            if start == NULL or fill == NULL or items == NULL:
                raise MemoryError()
            for j in range(size):
                if self._hpairs[j].key != 0xFFFFFFFFFFFFFFFFULL:
                    start[(self._hpairs[j].key >> 32) + 1] += 1      # left < n_ids (checked when put)
            for left in range(n_ids):
                start[left + 1] += start[left]
                fill[left] = start[left]
            for j in range(size):
                if self._hpairs[j].key != 0xFFFFFFFFFFFFFFFFULL:
                    it = &items[fill[self._hpairs[j].key >> 32]]        # below start[left + 1]
                    fill[self._hpairs[j].key >> 32] += 1
                    it.right = <uint32_t>(self._hpairs[j].key & 0xFFFFFFFFULL)
                    it.rank = self._hpairs[j].rank
                    it.new_id = self._hpairs[j].new_id
            for left in range(n_ids):
                n = start[left + 1] - start[left]
                if n > 1:
                    qsort(&items[start[left]], n, sizeof(PairItem), _cmp_right)
                slots += pair_region_size(n)
            if slots >= 0xFFFFFFFF - PAIR_NODE:
                raise ValueError("too many merges")
            self.t.pair_region = <uint32_t*>malloc((n_ids + 1) * sizeof(uint32_t))
            self.t.pair_right = <uint32_t*>calloc(slots + PAIR_NODE, sizeof(uint32_t))
            self.t.pair_key = <uint64_t*>malloc((slots + PAIR_NODE) * sizeof(uint64_t))
            if self.t.pair_region == NULL or self.t.pair_right == NULL or self.t.pair_key == NULL:
                raise MemoryError()
            memset(self.t.pair_key, 0xFF, (slots + PAIR_NODE) * sizeof(uint64_t))
            self.t.pair_slots = <Py_ssize_t>slots
            self.t.n_pairs = self._hcount
            at = 0
            for left in range(n_ids):
                self.t.pair_region[left] = at
                lo = start[left]
                n = start[left + 1] - lo
                if n > PAIR_NODE:
                    self.t.pair_right[at] = n
                    at += 1
                    # From the top level down, each entry the largest right under it.
                    for level in range(pair_index_levels(n), 0, -1):
                        m = pair_level_size(n, level)
                        for j in range(m):
                            self.t.pair_right[at + j] = items[lo + pair_index_source(n, level, j)].right
                        at += m
                for j in range(n):
                    self.t.pair_right[at + j] = items[lo + j].right
                    self.t.pair_key[at + j] = (<uint64_t>items[lo + j].rank << 32) | items[lo + j].new_id
                at += n
            self.t.pair_region[n_ids] = at
        finally:
            free(start)
            free(fill)
            free(items)
        free(self._hpairs)
        self._hpairs = NULL
        self._hcount = 0

    cdef void _derive_pairs(self) except *:
        _derive_pairs_into(self, NULL, 0)

    cdef void _load_pairs(self, merges) except *:
        cdef Py_ssize_t rank = 0
        cdef Py_ssize_t a, b, new
        cdef bytes joined
        self._alloc_pairs(len(merges))
        for m in merges:
            a = m[0]
            b = m[1]
            if a < 0 or b < 0 or a >= self.t.n_ids or b >= self.t.n_ids or self.t.kind[a] != 1 or self.t.kind[b] != 1:
                raise ValueError(f"merge {rank}: ids ({a}, {b}) are not ordinary tokens")
            if len(m) > 2:
                new = m[2]
            else:
                joined = self.token_bytes(a) + self.token_bytes(b)
                new = tables_lookup(&self.t, <const uint8_t*>PyBytes_AS_STRING(joined), PyBytes_GET_SIZE(joined))
                if new == NO_ID:
                    raise ValueError(f"merge {rank}: the merged token {joined!r} is not in the vocabulary")
            if new < 0 or new >= self.t.n_ids or self.t.kind[new] != 1:
                raise ValueError(f"merge {rank}: merged id {new} is not an ordinary token")
            self._put_pair(<uint32_t>a, <uint32_t>b, <uint32_t>rank, <uint32_t>new)
            rank += 1

    # ---- Python-level accessors (tests, decode helpers) ----
    @property
    def size(self):
        return self.t.n_ids

    @property
    def pair_count(self):
        return self.t.n_pairs

    def token_bytes(self, Py_ssize_t tid):
        if tid < 0 or tid >= self.t.n_ids or self.t.kind[tid] == 0:
            return None
        return PyBytes_FromStringAndSize(<char*>self.t.blob + self.t.offsets[tid],
                                         self.t.offsets[tid + 1] - self.t.offsets[tid])

    def token_id(self, bytes b):
        cdef uint32_t tid = tables_lookup(&self.t, <const uint8_t*>PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))
        return -1 if tid == NO_ID else <Py_ssize_t>tid

    def merge_of(self, Py_ssize_t left, Py_ssize_t right):
        cdef uint32_t rank, new_id
        if left < 0 or right < 0 or left >= self.t.n_ids or right >= self.t.n_ids or self.t.pair_region == NULL:
            return None
        if tables_pair(&self.t, <uint32_t>left, <uint32_t>right, &rank, &new_id):
            return (rank, new_id)
        return None

    def token_bigrams(self):
        """8,192 bytes: bit (a << 8) | b set when the bytes of some token, ordinary or special, hold byte a
        followed by byte b.  A merge makes a token of two neighbouring symbols, so the token holds the byte
        on each side of their boundary: where that pair's bit is clear no merge can join across it."""
        cdef bytes out = PyBytes_FromStringAndSize(NULL, 8192)
        cdef uint8_t* bits = <uint8_t*>PyBytes_AS_STRING(out)
        cdef Py_ssize_t i, j, ln
        cdef const uint8_t* b
        cdef uint32_t k
        memset(bits, 0, 8192)
        with nogil:
            for i in range(self.t.n_ids):
                if self.t.kind[i] == 0:
                    continue
                b = self.t.blob + self.t.offsets[i]
                ln = <Py_ssize_t>(self.t.offsets[i + 1] - self.t.offsets[i])
                for j in range(1, ln):
                    k = (<uint32_t>b[j - 1] << 8) | b[j]
                    bits[k >> 3] |= <uint8_t>(1 << (k & 7))          # k < 65,536: 8,192 bytes
        return out

    def char_pair_tables(self):
        """(bigrams, shift, lead_counts), from one pass over the tokens, ordinary and special.

        bigrams: 2^(32 - shift) bits (CHAR_BIGRAM_MIN_BITS to CHAR_BIGRAM_MAX_BITS of them, at least
        CHAR_BIGRAM_SPARSE per bit set where the largest size allows), bit char_bigram_bit(a, b, shift) set when
        the bytes of some token hold the whole 2- or 3-byte characters a and b side by side.  Each token is read
        as UTF-8 text is (char_at): a valid 2- or 3-byte sequence is a character; any other byte is stepped over
        and ends the run.  Every character a text decodes at a lead byte is decoded at that byte here too (a character
        consumes only its own continuation bytes).

        lead_counts: 32 counts, entry b - 0xC0 the number of tokens holding a 2-byte character whose lead byte
        is b: how much of the vocabulary a script takes (the encoder cuts between 2-byte characters of a lead
        few tokens hold: _bpe.CUT_LEAD_TOKENS)."""
        cdef Py_ssize_t size = (1 << CHAR_BIGRAM_MAX_BITS) // 8, small, set_bits = 0
        cdef bytes full = PyBytes_FromStringAndSize(NULL, size)
        cdef bytes out
        cdef uint8_t* bits = <uint8_t*>PyBytes_AS_STRING(full)
        cdef uint8_t* folded
        cdef uint32_t log2 = CHAR_BIGRAM_MIN_BITS, d
        cdef uint32_t counts[32]
        cdef Py_ssize_t i, j, ln, step = 0
        cdef const uint8_t* b
        cdef uint32_t cp, prev = 0, k, seen, v, v2
        cdef uint64_t w
        cdef bint have
        memset(bits, 0, size)
        memset(counts, 0, sizeof(counts))
        with nogil:
            for i in range(self.t.n_ids):
                b = self.t.blob + self.t.offsets[i]
                ln = <Py_ssize_t>(self.t.offsets[i + 1] - self.t.offsets[i])
                if ln < 2:
                    continue
                if ln < 8:
                    # Most tokens are short and ASCII: ruled out by at most two loads.
                    if ln >= 4:
                        memcpy(&v, b, 4)
                        memcpy(&v2, b + ln - 4, 4)          # both inside b[0:ln]
                        v |= v2
                    else:
                        v = b[0] | b[1] | b[ln - 1]
                    if (v & <uint32_t>0x80808080) == 0:
                        continue
                j = 0
                have = False
                seen = 0
                while j + 2 <= ln:
                    if j + 8 <= ln:
                        memcpy(&w, b + j, 8)                # j + 8 <= ln
                        if (w & 0x8080808080808080ULL) == 0:
                            have = False                    # eight ASCII bytes: no character, and a run ends
                            j += 8
                            continue
                    cp = char_at(b + j, ln - j, &step)      # j < ln
                    if cp == 0:
                        have = False
                        j += 1
                        continue
                    if step == 2:
                        seen |= <uint32_t>1 << (b[j] - 0xC0)                # a 2-byte lead: 0xC2-0xDF
                    if have:
                        k = char_bigram_bit(prev, cp, 32 - CHAR_BIGRAM_MAX_BITS)
                        bits[k >> 3] |= <uint8_t>(1 << (k & 7))        # k < 1 << CHAR_BIGRAM_MAX_BITS
                    prev = cp
                    have = True
                    j += step
                while seen != 0:
                    k = lowest_bit(seen)                    # < 32
                    counts[k] += 1
                    seen &= seen - 1
            # The size: the smallest that keeps CHAR_BIGRAM_SPARSE bits a pair, the set folded down to it (bit
            # j of the largest set is bit j >> d of one 2^d times smaller, as char_bigram_bit's top bits are).
            for i in range(0, size, 8):
                memcpy(&w, bits + i, 8)                     # size is a multiple of 8
                set_bits += popcount64(w)
            while log2 < CHAR_BIGRAM_MAX_BITS and set_bits * CHAR_BIGRAM_SPARSE > (<Py_ssize_t>1 << log2):
                log2 += 1
        if log2 == CHAR_BIGRAM_MAX_BITS:
            return full, 32 - log2, [counts[j] for j in range(32)]
        small = (<Py_ssize_t>1 << log2) // 8
        out = PyBytes_FromStringAndSize(NULL, small)
        folded = <uint8_t*>PyBytes_AS_STRING(out)
        memset(folded, 0, small)
        d = CHAR_BIGRAM_MAX_BITS - log2
        with nogil:
            for i in range(0, size, 8):
                memcpy(&w, bits + i, 8)                     # size is a multiple of 8
                while w != 0:
                    j = <Py_ssize_t>lowest_bit64(w)
                    k = <uint32_t>((8 * i + j) >> d)                    # < 1 << log2
                    folded[k >> 3] |= <uint8_t>(1 << (k & 7))
                    w &= w - 1
        return out, 32 - log2, [counts[j] for j in range(32)]

    def char_bigrams(self):
        """char_pair_tables()'s bit set."""
        return self.char_pair_tables()[0]

    @staticmethod
    def _char_bigram_bit(uint32_t a, uint32_t b, uint32_t shift):
        """Tests: the bit of the pair of code points (a, b) in char_pair_tables()'s set, given its shift."""
        return char_bigram_bit(a, b, shift)

    def ordinary_count(self):
        """The number of ordinary (encodable) token ids."""
        cdef Py_ssize_t i, count = 0
        for i in range(self.t.n_ids):
            count += self.t.kind[i] == 1
        return count

    def build_self_merges(self):
        """Fill Tables.self_merges (byte-level vocabularies only: every single byte must be a token).
        Returns the number of tokens whose lone BPE is themselves, or None when not applicable."""
        cdef Py_ssize_t n = self.t.n_ids, i, ln, count = 0, cap = 0, m = 0
        cdef uint32_t* sym = NULL
        cdef uint8_t* marks = NULL
        cdef uint32_t rank, new_id, best_rank, best_id
        cdef const uint8_t* b
        for i in range(256):
            if self.t.byte_id[i] == NO_ID:
                return None
        if self.t.self_merges != NULL:
            return sum(self.t.self_merges[i] for i in range(n))
        for i in range(n):
            if self.t.kind[i] == 1 and <Py_ssize_t>(self.t.offsets[i + 1] - self.t.offsets[i]) > cap:
                cap = self.t.offsets[i + 1] - self.t.offsets[i]
        sym = <uint32_t*>malloc((cap + 1) * sizeof(uint32_t))
        marks = <uint8_t*>calloc(n + 1, 1)
        if sym == NULL or marks == NULL:
            free(sym); free(marks)
            raise MemoryError()
        with nogil:
            for i in range(n):
                if self.t.kind[i] != 1:
                    continue
                b = self.t.blob + self.t.offsets[i]
                ln = self.t.offsets[i + 1] - self.t.offsets[i]
                m = _lone_bpe(&self.t, NULL, 0, b, ln, sym)
                if m == -2:
                    break
                if m == 1 and sym[0] == <uint32_t>i:
                    marks[i] = 1
                    count += 1
        if m == -2:
            free(sym); free(marks)
            raise MemoryError()
        free(sym)
        self.t.self_merges = marks
        return count

    def char_table_stats(self):
        """None when whole-character symbols are off (not byte-level), else (BMP characters that take them
        as one token, bits set in the seam sets): tests and diagnostics."""
        cdef Py_ssize_t cp, single = 0, marked = 0, i
        if self.t.cp_token == NULL:
            return None
        for cp in range(0x80, 0x10000):
            single += (self.t.cp_token[cp] & CP_ID_MASK) != CP_NONE
        for i in range(SEAM_BITS // 8):
            marked += bin(self.t.seam_bits[i]).count("1")
        return single, marked

    def is_special(self, Py_ssize_t tid):
        return 0 <= tid < self.t.n_ids and self.t.kind[tid] == 2

    # ---- the compiled form: the tables as one byte string, validated on the way back in ----
    def to_bytes(self):
        """The tables as bytes (native endianness), for the compiled vocabulary cache."""
        cdef uint64_t n = self.t.n_ids
        cdef uint64_t blob_len = self.t.offsets[n] if self.t.offsets != NULL else 0
        cdef uint64_t slot_size = self.t.slot_mask + 1
        cdef uint64_t pair_slots = self.t.pair_slots
        header = struct.pack("<8Q", COMPILED_VERSION, n, blob_len, slot_size, self.t.n_pairs,
                             1 if self.rank_merges else 0, pair_slots, 0)
        parts = [header,
                 PyBytes_FromStringAndSize(<char*>self.t.offsets, (n + 1) * sizeof(uint64_t)),
                 _pad8(PyBytes_FromStringAndSize(<char*>self.t.kind, n + 1)),
                 _pad8(PyBytes_FromStringAndSize(<char*>self.t.blob, blob_len)),
                 PyBytes_FromStringAndSize(<char*>self.t.slots, slot_size * sizeof(Slot)),
                 _pad8(PyBytes_FromStringAndSize(<char*>self.t.pair_region, (n + 1) * sizeof(uint32_t))),
                 _pad8(PyBytes_FromStringAndSize(<char*>self.t.pair_right, (pair_slots + PAIR_NODE) * sizeof(uint32_t))),
                 PyBytes_FromStringAndSize(<char*>self.t.pair_key, (pair_slots + PAIR_NODE) * sizeof(uint64_t)),
                 PyBytes_FromStringAndSize(<char*>self.t.byte_id, 256 * sizeof(uint32_t)),
                 PyBytes_FromStringAndSize(<char*>self.t.fallback_id, 256 * sizeof(uint32_t))]
        return b"".join(parts)

    @staticmethod
    def from_bytes(bytes data, Py_ssize_t start=0):
        """Tables from `to_bytes` output found at data[start:], without copying: the Vocab keeps `data`
        (immutable) alive and points into it.  Every index the encoder will follow is checked, so a
        truncated or tampered buffer raises ValueError instead of leading to an out-of-bounds read."""
        if start < 0 or start > len(data) or start % 8:
            raise ValueError("compiled vocabulary: bad start offset")
        cdef const uint8_t* base = <const uint8_t*>PyBytes_AS_STRING(data) + start
        cdef Py_ssize_t size = len(data) - start, pos = 64
        cdef uint64_t version, n, blob_len, slot_size, n_pairs, rank_merges, pair_slots, j, used, k, merges
        cdef uint32_t r, count, level, m, s, first, src
        cdef int64_t last
        cdef Vocab v = Vocab()
        if size < 64:
            raise ValueError("compiled vocabulary: truncated header")
        version, n, blob_len, slot_size, n_pairs, rank_merges, pair_slots, _ = struct.unpack_from("<8Q", data, start)
        if version != COMPILED_VERSION:
            raise ValueError(f"compiled vocabulary: version {version}, expected {COMPILED_VERSION}")
        if (n >= 0xFFFFFFFF or n_pairs > pair_slots or pair_slots >= 0xFFFFFFFF - PAIR_NODE or blob_len > (1 << 40)
                or not _pow2(slot_size)):
            raise ValueError("compiled vocabulary: bad sizes")
        need = (64 + (n + 1) * 8 + _up8(n + 1) + _up8(blob_len) + slot_size * sizeof(Slot)
                + _up8((n + 1) * 4) + _up8((pair_slots + PAIR_NODE) * 4) + (pair_slots + PAIR_NODE) * 8
                + 2 * 256 * 4)
        if <uint64_t>size != need:
            raise ValueError(f"compiled vocabulary: {size} bytes, expected {need}")
        v.t.n_ids = n
        v.t.n_pairs = n_pairs
        v.rank_merges = rank_merges != 0
        v._backing = data
        v._borrowed = True
        # Sections start at multiples of 8 from an 8-aligned start (bytes data is 8-aligned), so the casts
        # below are aligned; the size check above puts every section inside the buffer.
        v.t.offsets = <uint64_t*>(base + pos); pos += (n + 1) * 8
        v.t.kind = <uint8_t*>(base + pos); pos += _up8(n + 1)
        v.t.blob = <uint8_t*>(base + pos); pos += _up8(blob_len)   # slots (>= 256 bytes) follow: 16-byte over-reads stay inside
        v.t.slots = <Slot*>(base + pos); pos += slot_size * sizeof(Slot)
        v.t.slot_mask = slot_size - 1
        v.t.pair_region = <uint32_t*>(base + pos); pos += _up8((n + 1) * 4)
        v.t.pair_right = <uint32_t*>(base + pos); pos += _up8((pair_slots + PAIR_NODE) * 4)
        v.t.pair_key = <uint64_t*>(base + pos); pos += (pair_slots + PAIR_NODE) * 8
        v.t.pair_slots = pair_slots
        memcpy(v.t.byte_id, base + pos, 256 * 4); pos += 256 * 4
        memcpy(v.t.fallback_id, base + pos, 256 * 4); pos += 256 * 4
        # Validate: offsets monotone within the blob; every id in a table names an existing token.
        if v.t.offsets[0] != 0 or v.t.offsets[n] != blob_len:
            raise ValueError("compiled vocabulary: bad offsets")
        for j in range(n):
            if v.t.offsets[j + 1] < v.t.offsets[j] or v.t.kind[j] > 2:
                raise ValueError("compiled vocabulary: bad token table")
            if v.t.kind[j] == 1 and <Py_ssize_t>(v.t.offsets[j + 1] - v.t.offsets[j]) > v.t.max_token_len:
                v.t.max_token_len = v.t.offsets[j + 1] - v.t.offsets[j]
        used = 0
        v.t.slot_tails = <uint64_t*>calloc(slot_size, sizeof(uint64_t))
        if v.t.slot_tails == NULL:
            raise MemoryError()
        for j in range(slot_size):
            if v.t.slots[j].id != NO_ID:
                used += 1
                if (v.t.slots[j].id >= n or v.t.kind[v.t.slots[j].id] != 1 or
                        v.t.slots[j].len != v.t.offsets[v.t.slots[j].id + 1] - v.t.offsets[v.t.slots[j].id]):
                    raise ValueError("compiled vocabulary: bad token slot")
                if 8 < v.t.slots[j].len <= 16:
                    # The token's bytes are blob[offsets[id]:offsets[id + 1]], inside the blob (checked above).
                    v.t.slot_tails[j] = load_tail(v.t.blob + v.t.offsets[v.t.slots[j].id], v.t.slots[j].len)
        if used >= slot_size:
            raise ValueError("compiled vocabulary: token table has no free slot")
        # Merge regions (Tables.pair_region): starts monotone from 0 to pair_slots; in each, the count and
        # index levels its size implies, each index entry the largest right under it (the lookup's descent
        # relies on it) with a key of all ones; merges of ordinary tokens with rights strictly increasing.
        if v.t.pair_region[0] != 0 or v.t.pair_region[n] != pair_slots:
            raise ValueError("compiled vocabulary: bad merge table")
        merges = 0
        for j in range(n):
            if v.t.pair_region[j + 1] < v.t.pair_region[j] or v.t.pair_region[j + 1] > pair_slots:
                raise ValueError("compiled vocabulary: bad merge table")
            s = v.t.pair_region[j]
            r = v.t.pair_region[j + 1] - s
            if r == 0:
                continue
            count = pair_count(&v.t, s, r)
            if (r > PAIR_NODE and count <= PAIR_NODE) or pair_region_size(count) != r:
                raise ValueError("compiled vocabulary: bad merge table")
            first = s + r - count
            last = -1
            for k in range(first, first + count):
                if (v.t.pair_right[k] >= n or <int64_t>v.t.pair_right[k] <= last
                        or <uint32_t>v.t.pair_key[k] >= n or v.t.kind[<uint32_t>v.t.pair_key[k]] != 1):
                    raise ValueError("compiled vocabulary: bad merge entry")
                last = v.t.pair_right[k]
            merges += count
            if r > PAIR_NODE:
                if v.t.pair_key[s] != 0xFFFFFFFFFFFFFFFFULL:
                    raise ValueError("compiled vocabulary: bad merge index")
                k = s + 1
                for level in range(pair_index_levels(count), 0, -1):
                    m = pair_level_size(count, level)
                    for src in range(m):
                        if (v.t.pair_key[k + src] != 0xFFFFFFFFFFFFFFFFULL or v.t.pair_right[k + src]
                                != v.t.pair_right[first + pair_index_source(count, level, src)]):
                            raise ValueError("compiled vocabulary: bad merge index")
                    k += m
        if merges != n_pairs:
            raise ValueError("compiled vocabulary: bad merge table")
        for j in range(256):
            if (v.t.byte_id[j] != NO_ID and v.t.byte_id[j] >= n) or \
                    (v.t.fallback_id[j] != NO_ID and v.t.fallback_id[j] >= n):
                raise ValueError("compiled vocabulary: bad byte table")
        v._build_byte_pairs()                    # derived, so rebuilt from the checked tables, not stored
        v._build_char_tables()
        return v


cdef uint64_t COMPILED_VERSION = 6   # 3: merges as per-left-token lists; 4: hash_bytes of one multiply;
                                     # 5: hash_bytes ends on the last 8 bytes; 6: merges as B-tree regions


cdef inline void _set_bit(uint8_t* bits, uint32_t i) noexcept nogil:
    bits[i >> 3] |= <uint8_t>(1 << (i & 7))


cdef int _seq_len(uint8_t lead) noexcept nogil:
    # Bytes of the UTF-8 sequence a lead byte (>= 0xC0) announces.
    return 2 if lead < 0xE0 else (3 if lead < 0xF0 else 4)


cdef bint _pow2(uint64_t x):
    return x >= 16 and (x & (x - 1)) == 0


cdef uint64_t _up8(uint64_t x):
    return (x + 7) & ~(<uint64_t>7)


def _pad8(bytes b):
    return b + b"\0" * ((8 - len(b) % 8) % 8)


cdef inline uint64_t _rotl64(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef uint64_t _checksum64(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    # Four independent multiply-rotate lanes over 8-byte words (the lanes keep the multiplier busy: 2.3x
    # zlib's CRC-32 on 15 MB here), then the tail and the length mixed in.  Catches accidental damage of a
    # compiled file; forgery is from_bytes' index checks' business.
    cdef uint64_t a = 0x9E3779B185EBCA87ULL, b = 0xC2B2AE3D27D4EB4FULL
    cdef uint64_t c = 0x165667B19E3779F9ULL, d = 0x27D4EB2F165667C5ULL
    cdef uint64_t w0, w1, w2, w3, tail = 0
    cdef Py_ssize_t i = 0
    while i + 32 <= n:
        memcpy(&w0, s + i, 8)                       # i + 32 <= n
        memcpy(&w1, s + i + 8, 8)
        memcpy(&w2, s + i + 16, 8)
        memcpy(&w3, s + i + 24, 8)
        a = _rotl64(a + w0 * 0xC2B2AE3D27D4EB4FULL, 31) * 0x9E3779B185EBCA87ULL
        b = _rotl64(b + w1 * 0xC2B2AE3D27D4EB4FULL, 31) * 0x9E3779B185EBCA87ULL
        c = _rotl64(c + w2 * 0xC2B2AE3D27D4EB4FULL, 31) * 0x9E3779B185EBCA87ULL
        d = _rotl64(d + w3 * 0xC2B2AE3D27D4EB4FULL, 31) * 0x9E3779B185EBCA87ULL
        i += 32
    while i + 8 <= n:
        memcpy(&w0, s + i, 8)                       # i + 8 <= n
        a = _rotl64(a + w0 * 0xC2B2AE3D27D4EB4FULL, 31) * 0x9E3779B185EBCA87ULL
        i += 8
    if i < n:
        memcpy(&tail, s + i, n - i)                 # n - i < 8 bytes, inside s[0:n]
    a = mix64(a ^ _rotl64(b, 7) ^ mix64(tail))
    c = mix64(c ^ _rotl64(d, 13) ^ <uint64_t>n)
    return mix64(a ^ _rotl64(c, 29))


def checksum64(data):
    """A 64-bit checksum of a bytes-like object (the compiled cache's integrity check), without the GIL."""
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    cdef Py_ssize_t n = view.shape[0]
    cdef uint64_t h
    if n == 0:
        return _checksum64(NULL, 0)
    with nogil:
        h = _checksum64(&view[0], n)
    return h
