"""BPE merge of one piece, with no Python objects in the loop.

Contract: given the bytes of one pre-token, append its token ids to `out`, exactly as the reference
merges it: repeatedly merge the adjacent pair with the lowest rank, leftmost first on ties (tiktoken's
`_byte_pair_merge`; HF tokenizers' `Word::merge_all`, whose heap orders by (rank, position)).

Short pieces use a linear scan over an array (fast for the usual 2-20 symbols); long pieces use a min-tree
over adjacent pairs (merge_tree), so a 1,000,000-letter run costs O(n log n), not O(n^2).
"""
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t
from libc.stdlib cimport malloc, calloc, realloc, free
from libc.string cimport memmove, memcpy, memcmp, memset
from ctok._piece_cache cimport CACHE_MAX_PIECE, CACHE_MAX_IDS
from ctok._vocab cimport (Vocab, Tables, NO_ID, tables_lookup, tables_pair_key, bit_at, seam_index, SEAM_START_SHORT,
                         char_pair_index, CHAR_PAIRS, SEAM_START_LONG, SEAM_END_SHORT, SEAM_END_LONG, CP_SEVERAL, CP_NONE, CP_ID_MASK,
                         CP_SUFFIX_RISK, CP_PREFIX_RISK, SEAM_PRE_START, SEAM_PRE_END, SEAM_PRE_ANY,
                         BYTE_CTX_LEFT, BYTE_CTX_RIGHT, load_head_padded, hash_bytes, load_head,
                         load_tail, char_bigram_bit, char_at, char3_at)

cdef enum:
    # Pieces with at most this many initial symbols use the linear scan.
    LINEAR_MAX = 48
    # Byte-level pieces longer than this are merged chunk by chunk (merge_chunked), CHUNK bytes at a time.
    LONG_PIECE = 256
    CHUNK = 48
    PAIR_MEMO_BITS = 12             # BpeScratch.memo: 4096 entries of 16 bytes
    LONG_STORE_MIN = CACHE_MAX_IDS + 1     # BpeScratch.long_store: pieces looked up from this length (shorter
                                    # ones have at most CACHE_MAX_IDS ids: the piece cache keeps them) ...
    LONG_STORE_MAX = 4096           # ... up to this one
cdef uint32_t RANK_NONE = 0xFFFFFFFF

cdef extern from "stdlib.h" nogil:
    int posix_memalign(void** memptr, size_t alignment, size_t size)

cdef extern from "_char_run.h" nogil:
    # symbolize_chars' run of 3-byte characters (the contract is in the header).
    const uint8_t* ctok_char3_run(const uint8_t* p, const uint8_t* last, const uint32_t* cp_token,
                                  const uint8_t* pre_any, const uint8_t* char_pairs, uint32_t id_mask,
                                  uint32_t several, uint32_t pending, uint32_t** out_io, uint64_t** kout_io,
                                  uint32_t* prev_io, int* several_io)

cdef extern from *:
    """
    /* Bit 7 of each byte of w that is 0xC0-0xEF (bits 7 and 6 set, not both of bits 5 and 4), the others
       clear.  Shifted left by 1, 2 and 3 places, a byte's bits 6, 5 and 4 land on its own bit 7 (what crosses
       from the byte below lands lower), so each byte is tested alone. */
    static inline uint64_t ctok_lead23_mask(uint64_t w) {
        return w & (w << 1) & ~((w << 2) & (w << 3)) & 0x8080808080808080ULL;
    }
    /* The same for the bytes 0xE0-0xEF (bits 7, 6 and 5 set, bit 4 clear): 3-byte leads. */
    static inline uint64_t ctok_lead3_mask(uint64_t w) {
        return w & (w << 1) & (w << 2) & ~(w << 3) & 0x8080808080808080ULL;
    }
    """
    uint64_t ctok_lead23_mask(uint64_t w) nogil
    uint64_t ctok_lead3_mask(uint64_t w) nogil
    int __builtin_ctzll(unsigned long long x) nogil


cdef extern from *:
    """
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    /* Drop element 0 of p[0..16], moving p[1..16] down one place: a fixed-size move, every load before any
       store (the ranges overlap), no call and no branch on the length.  The caller owns p[0..17). */
    static inline void ctok_drop16_u32(uint32_t* p) {
    #if defined(__SSE2__)
        __m128i a = _mm_loadu_si128((const __m128i*)(p + 1)), b = _mm_loadu_si128((const __m128i*)(p + 5));
        __m128i c = _mm_loadu_si128((const __m128i*)(p + 9)), d = _mm_loadu_si128((const __m128i*)(p + 13));
        _mm_storeu_si128((__m128i*)p, a); _mm_storeu_si128((__m128i*)(p + 4), b);
        _mm_storeu_si128((__m128i*)(p + 8), c); _mm_storeu_si128((__m128i*)(p + 12), d);
    #else
        for (int i = 0; i < 16; i++) p[i] = p[i + 1];
    #endif
    }
    static inline void ctok_drop16_u64(uint64_t* p) {
    #if defined(__SSE2__)
        __m128i r[8];
        for (int i = 0; i < 8; i++) r[i] = _mm_loadu_si128((const __m128i*)(p + 1 + 2 * i));
        for (int i = 0; i < 8; i++) _mm_storeu_si128((__m128i*)(p + 2 * i), r[i]);
    #else
        for (int i = 0; i < 16; i++) p[i] = p[i + 1];
    #endif
    }
    """
    void ctok_drop16_u32(uint32_t* p) nogil
    void ctok_drop16_u64(uint64_t* p) nogil


cdef extern from *:
    """
    #define CTOK_KEY_NONE 0xFFFFFFFFFFFFFFFFULL
    #define CTOK_KEY_PENDING 0xFFFFFFFFFFFFFFFEULL
    """
    # Pair keys (pair_key): KEY_NONE, the pair merges into nothing; KEY_PENDING (symbolize_chars), not
    # looked up yet.  No merge has that key: its id part would be 0xFFFFFFFE, above every vocabulary's.
    const uint64_t KEY_NONE "CTOK_KEY_NONE"
    const uint64_t KEY_PENDING "CTOK_KEY_PENDING"


cdef int idvec_reserve(IdVec* v, Py_ssize_t extra) noexcept nogil:
    cdef Py_ssize_t cap
    cdef uint32_t* data
    if v.size + extra <= v.cap:
        return BPE_OK
    cap = v.cap * 2 if v.cap else 64
    while cap < v.size + extra:
        cap *= 2
    data = <uint32_t*>realloc(v.data, cap * sizeof(uint32_t))
    if data == NULL:
        return BPE_NOMEM
    v.data = data
    v.cap = cap
    return BPE_OK


cdef void idvec_free(IdVec* v) noexcept nogil:
    free(v.data)
    v.data = NULL
    v.size = 0
    v.cap = 0


cdef void scratch_init(BpeScratch* s) noexcept nogil:
    s.cap = 0
    s.ids = NULL
    s.keys = NULL
    s.prev = NULL
    s.next = NULL
    s.memo = NULL
    s.memo_owner = NULL
    s.tree = NULL
    s.tree_cap = 0
    s.long_store = NULL
    s.hot = NULL
    s.hot_owner = NULL
    s.hot_misses = HOT_MISSES_UNSEEN            # two passes first
    s.id_counts = NULL
    s.id_counts_size = 0


cdef extern from *:
    """
    #if defined(__linux__)
    #include <sys/mman.h>
    /* BpeScratch.hot: mapped zeroed and page aligned, its pages populated by the call.  Faulted in one by one they
       cost two faults each (a probe maps the zero page, the first store copies it): 513 faults and +1.7 ms in the
       first 300 KB encoded, against one call. */
    static void* ctok_hot_map(size_t n) {
    #ifdef MAP_POPULATE
        int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE;
    #else
        int flags = MAP_PRIVATE | MAP_ANONYMOUS;
    #endif
        void* p = mmap(NULL, n, PROT_READ | PROT_WRITE, flags, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    static void ctok_hot_unmap(void* p, size_t n) { if (p != NULL) munmap(p, n); }
    #else
    #include <stdlib.h>
    static void* ctok_hot_map(size_t n) { return calloc(1, n); }
    static void ctok_hot_unmap(void* p, size_t n) { (void)n; free(p); }
    #endif
    """
    void* ctok_hot_map(size_t n) nogil
    void ctok_hot_unmap(void* p, size_t n) nogil


cdef int scratch_hot(BpeScratch* s, const void* owner) noexcept nogil:
    # Give s a table of recent pieces for `owner` (see BpeScratch.hot), emptied of another owner's pieces.
    cdef size_t size = (<size_t>1 << HOT_BITS) * sizeof(HotEntry)
    if s.hot == NULL:
        s.hot = <HotEntry*>ctok_hot_map(size)
        if s.hot == NULL:
            return BPE_NOMEM
    elif s.hot_owner != owner:
        memset(s.hot, 0, size)
        s.hot_misses = HOT_MISSES_UNSEEN
    s.hot_owner = owner
    return BPE_OK


cdef void scratch_free(BpeScratch* s) noexcept nogil:
    free(s.ids)
    free(s.keys)
    free(s.prev)
    free(s.next)
    free(s.memo)
    free(s.tree)
    if s.long_store != NULL:
        free(s.long_store.ring)
        free(s.long_store.index)
        free(s.long_store.many_ids)
        free(s.long_store)
    ctok_hot_unmap(s.hot, (<size_t>1 << HOT_BITS) * sizeof(HotEntry))
    free(s.id_counts)
    scratch_init(s)


cdef int scratch_reserve(BpeScratch* s, Py_ssize_t n) noexcept nogil:
    # Room for n symbols (plus the byte-fallback expansion, which the caller includes in n).
    cdef Py_ssize_t cap
    cdef void* p
    if n <= s.cap:
        return BPE_OK
    cap = s.cap * 2 if s.cap else 256
    while cap < n:
        cap *= 2
    p = realloc(s.ids, cap * sizeof(uint32_t))
    if p == NULL:
        return BPE_NOMEM
    s.ids = <uint32_t*>p
    p = realloc(s.keys, cap * sizeof(uint64_t))
    if p == NULL:
        return BPE_NOMEM
    s.keys = <uint64_t*>p
    p = realloc(s.prev, cap * sizeof(int32_t))
    if p == NULL:
        return BPE_NOMEM
    s.prev = <int32_t*>p
    p = realloc(s.next, cap * sizeof(int32_t))
    if p == NULL:
        return BPE_NOMEM
    s.next = <int32_t*>p
    s.cap = cap
    return BPE_OK


cdef inline uint32_t bmp_code_point(const uint8_t* s, Py_ssize_t ulen) noexcept nogil:
    # The code point that s[0:ulen] encodes when it is a valid 1-3 byte UTF-8 sequence (not overlong, not a
    # surrogate), else 0x110000.  Only then are the bytes the UTF-8 of one BMP character.
    cdef uint32_t b0 = s[0], cp
    if ulen == 1:
        return b0 if b0 < 0x80 else 0x110000
    # ulen may have been cut short at the piece's end: the lead byte must announce exactly ulen bytes.
    if ulen == 2:
        if not (0xC2 <= b0 < 0xE0) or (s[1] & 0xC0) != 0x80:
            return 0x110000
        return ((b0 & 0x1F) << 6) | (s[1] & 0x3F)
    if ulen == 3:
        if not (0xE0 <= b0 < 0xF0) or (s[1] & 0xC0) != 0x80 or (s[2] & 0xC0) != 0x80:
            return 0x110000
        cp = ((b0 & 0x0F) << 12) | ((<uint32_t>s[1] & 0x3F) << 6) | (s[2] & 0x3F)
        if cp < 0x800 or 0xD800 <= cp < 0xE000:
            return 0x110000
        return cp
    return 0x110000


def build_char_token(Vocab py_vocab):
    """char_token for BpeOptions (as bytes, 65,536 native uint32): the token of each BMP character alone."""
    cdef const Tables* vocab = &py_vocab.t
    cdef bytearray out = bytearray(0x10000 * 4)
    cdef uint32_t* table = <uint32_t*><char*>out
    cdef uint32_t cp
    cdef uint8_t u[3]
    cdef Py_ssize_t m
    with nogil:
        for cp in range(0x10000):
            if 0xD800 <= cp < 0xE000:
                table[cp] = NO_ID                         # never looked up: bmp_code_point refuses them
                continue
            if cp < 0x80:
                u[0] = cp; m = 1
            elif cp < 0x800:
                u[0] = 0xC0 | (cp >> 6); u[1] = 0x80 | (cp & 0x3F); m = 2
            else:
                u[0] = 0xE0 | (cp >> 12); u[1] = 0x80 | ((cp >> 6) & 0x3F); u[2] = 0x80 | (cp & 0x3F); m = 3
            table[cp] = tables_lookup(vocab, u, m)
    return bytes(out)


cdef Py_ssize_t symbolize(const Tables* vocab, const BpeOptions* opt, const uint8_t* s, Py_ssize_t n,
                          uint32_t* ids, bint* bytewise) noexcept nogil:
    # Initial symbols of a piece, HF's rules: a unit (byte, or UTF-8 char when char_level) that is a
    # token becomes that token; else its <0xXX> byte tokens if byte_fallback and all exist; else unk
    # (consecutive unks fused when fuse_unk; a pending unk is flushed by the next known unit, not by
    # fallback bytes, exactly as HF does); else it is dropped.  `ids` has room for n entries.
    cdef Py_ssize_t i = 0, m = 0, ulen, k
    cdef uint32_t tid, cp
    cdef bint pending = False, ok
    if not opt.char_level:
        for i in range(n):
            tid = vocab.byte_id[s[i]]
            if tid == NO_ID:
                break
            ids[i] = tid
        else:
            bytewise[0] = True                  # every byte is a token: symbol i is s[i]'s token
            return n
        i = 0
    bytewise[0] = False
    while i < n:
        if opt.char_level:
            ulen = utf8_len(s[i])
            if i + ulen > n:
                ulen = n - i
            tid = NO_ID
            cp = bmp_code_point(s + i, ulen) if opt.char_token != NULL else 0x110000
            if cp < 0x10000:
                tid = opt.char_token[cp]                  # cp < 0x10000 = the table's size
            else:
                tid = tables_lookup(vocab, s + i, ulen)
        else:
            ulen = 1
            tid = vocab.byte_id[s[i]]
        if tid != NO_ID:
            if pending:
                ids[m] = opt.unk_id; m += 1
                pending = False
            ids[m] = tid; m += 1
        else:
            ok = False
            if opt.byte_fallback:
                ok = True
                for k in range(ulen):
                    if vocab.fallback_id[s[i + k]] == NO_ID:
                        ok = False
                        break
                if ok:
                    for k in range(ulen):
                        ids[m] = vocab.fallback_id[s[i + k]]; m += 1
            if not ok and opt.unk_id != NO_ID:
                if pending and not opt.fuse_unk:
                    ids[m] = opt.unk_id; m += 1
                pending = True
        i += ulen
    if pending:
        ids[m] = opt.unk_id; m += 1
    # m <= n: every unit of length ulen >= 1 adds at most ulen ids (fallback) or 1 id (token or unk,
    # where a pending unk flushed here stands for an earlier unit that added none).
    return m


cdef inline bint seam_ok(const uint8_t* bits, const uint8_t* s, Py_ssize_t n, Py_ssize_t i, Py_ssize_t la,
                         Py_ssize_t lb) noexcept nogil:
    # No token joins part of the character s[i - la:i] to what follows, or part of the character
    # s[i:i + lb] to what precedes (the contexts Vocab._build_char_tables recorded).  0 < la <= i < n.
    cdef uint32_t x
    cdef Py_ssize_t k
    if not bit_at(bits, SEAM_PRE_ANY + ((<uint32_t>s[i] << 8) | s[i - 1])):
        return True                                     # neither kind of token can meet here
    if la > 1 and not bit_at(bits, SEAM_PRE_START + (((<uint32_t>s[i - 1] & 63) << 8) | s[i])):
        la = 1                                          # no token starts with a suffix here
    if lb > 1 and not bit_at(bits, SEAM_PRE_END + ((<uint32_t>s[i - 1] << 8) | s[i])):
        lb = 1                                          # no token ends with a prefix here
    for k in range(1, la):                              # suffixes of the character before i
        x = s[i - 1] if k == 1 else (<uint32_t>s[i - 2] << 8) | s[i - 1]
        if bit_at(bits, seam_index(SEAM_START_SHORT, k, x, s[i])):
            return False
        if i + 1 < n and bit_at(bits, seam_index(SEAM_START_LONG, k, x, (<uint32_t>s[i] << 8) | s[i + 1])):
            return False
    for k in range(1, lb):                              # prefixes of the character at i
        x = s[i] if k == 1 else (<uint32_t>s[i] << 8) | s[i + 1]
        if bit_at(bits, seam_index(SEAM_END_SHORT, k, x, s[i - 1])):
            return False
        if i >= 2 and bit_at(bits, seam_index(SEAM_END_LONG, k, x, (<uint32_t>s[i - 2] << 8) | s[i - 1])):
            return False
    return True


cdef Py_ssize_t char_cuts(const Tables* vocab, const BpeOptions* opt, const uint8_t* p, Py_ssize_t i,
                          Py_ssize_t n, Py_ssize_t* cuts, uint32_t* sides, Py_ssize_t cap, bint twos) noexcept nogil:
    # cuts_walk with twos a constant in each call, so that each is a loop of its own.
    if twos:
        return cuts_walk(vocab, opt.char_bigrams, opt.char_bigram_shift, p, i, n, cuts, sides, cap, True)
    return cuts_walk(vocab, opt.char_bigrams, opt.char_bigram_shift, p, i, n, cuts, sides, cap, False)


cdef inline Py_ssize_t cuts_walk(const Tables* vocab, const uint8_t* bigrams, uint32_t shift, const uint8_t* p,
                                 Py_ssize_t i, Py_ssize_t n, Py_ssize_t* cuts, uint32_t* sides, Py_ssize_t cap,
                                 bint twos) noexcept nogil:
    # The points after i (0 <= i < n) between two 2- or 3-byte characters of p[0:n] where no token spans the
    # boundary, in order, into cuts[0:k]; returns k, and stops at cap (cap >= 1: the caller goes on from
    # cuts[cap - 1]).  At such a point c, BPE(p) = BPE(p[:c]) + BPE(p[c:]): a merge makes a token of two
    # neighbouring symbols, and every symbol is a token, so a merge across c would make a token holding
    # bytes on both sides of it; here none does: none holds the whole character before c next to the whole
    # one after it (bigrams: Vocab.char_bigrams), and none holds a part of either next to the other's bytes
    # (seam_ok; skipped where neither character's cp_token entry flags a risk: the flags are set for every
    # suffix and prefix some token starts or ends with; entries refused as CP_NONE carry none, so they ask).
    # Characters are read as Vocab.char_bigrams reads tokens (char_at; any other byte ends a run), so a pair
    # of characters found here is a pair found there wherever some token holds their bytes.  twos False: 3-byte
    # characters only (char3_at, which decodes each where char_at does; a 2-byte character ends a run), for
    # CJK pieces: reading both kinds cost them 6% more instructions in this walk for cuts they seldom have.
    # sides[2 * j], sides[2 * j + 1]: the cp_token entries of the characters before and after cuts[j] (the
    # parts' ids when a part is one character).  No branch on whether a point cuts (data: o200k Japanese cuts
    # 78% of its points).
    cdef const uint32_t* cp_token = vocab.cp_token
    cdef uint32_t cp, x, prev_cp = 0, prev_x = 0, held = 0, cut, risky
    cdef Py_ssize_t k = 0, ln = 3, prev_ln = 3
    while i + (2 if twos else 3) <= n:
        if twos:
            cp = char_at(p + i, n - i, &ln)                             # i < n
        else:
            cp = char3_at(p + i)                                        # i + 3 <= n; ln stays 3
        if cp == 0:
            held = 0
            i += 1
            continue
        x = cp_token[cp]                                                # cp < 0x10000
        cut = held & (bit_at(bigrams, char_bigram_bit(prev_cp, cp, shift)) ^ 1)     # the set's size
        risky = (((prev_x & CP_SUFFIX_RISK) != 0) | ((x & CP_PREFIX_RISK) != 0)
                 | ((prev_x & CP_ID_MASK) == CP_NONE) | ((x & CP_ID_MASK) == CP_NONE))
        # seam_ok's first test (no token of the kinds it looks for meets these two bytes) folded in: most
        # characters flag a risk (o200k: 83% of Japanese ones a suffix risk), and a branch into seam_ok then
        # followed the cut verdict, mispredicted at every other point (8.8 -> 5.8 ns a character).  p[i - held]:
        # the byte before i where a character ends there (held: 2 <= i), else a byte of no consequence (cut is 0).
        if cut & risky & bit_at(vocab.seam_bits, SEAM_PRE_ANY + ((<uint32_t>p[i] << 8) | p[i - held])):
            cut = seam_ok(vocab.seam_bits, p, n, i, prev_ln, ln)       # 0 < prev_ln <= i: a character ends at i
        cuts[k] = i                                                     # k < cap
        sides[2 * k] = prev_x
        sides[2 * k + 1] = x
        k += cut
        if k == cap:
            return k
        prev_cp = cp
        prev_x = x
        if twos:
            prev_ln = ln
        held = 1
        i += ln
    return k


cdef inline bint pair_first(const Tables* vocab, const uint8_t* s, Py_ssize_t n, Py_ssize_t k,
                            uint32_t entry) noexcept nogil:
    # The 2-byte character s[k:k+2] (cp_token entry `entry`), which a risky seam leaves as bytes, may
    # start as its one token T instead: the reference merges its two bytes b0 b1 into T before either
    # takes part in any other merge, and nothing that uses T ranks below that merge.  Proof: let r be the
    # rank of (b0, b1).  While the pair is unmerged it is available, so the reference applies no merge
    # ranked above r meanwhile (rank r itself is this same pair, elsewhere).  Until then b0's left
    # neighbour is a symbol ending with the byte s[k - 1], so a merge (X, b0) is one byte_ctx counts under
    # (s[k - 1], b0), all ranked above r when this returns True; likewise (b1, Y) under (b1, s[k + 2]);
    # at the piece's ends there is no neighbour.  And cp_token admits T only when no merge with T on
    # either side ranks at or below r (`entry` is one token, not CP_SEVERAL or CP_NONE).  So merging the
    # pair first changes the order of no two merges that interact: the argument of symbolize_chars' proof, with
    # byte_ctx in place of seam_ok for this one character.  k + 2 <= n: the caller decoded it whole.
    cdef uint64_t key = vocab.byte_pairs[(<uint32_t>s[k] << 8) | s[k + 1]]     # index < 65536
    cdef uint32_t r = <uint32_t>(key >> 32)
    if (entry & CP_ID_MASK) >= CP_SEVERAL or key == KEY_NONE:        # CP_SEVERAL or CP_NONE
        return False
    if k > 0 and vocab.byte_ctx[BYTE_CTX_LEFT + ((<uint32_t>s[k - 1] << 5) | (s[k] & 0x1F))] <= r:
        return False                                # index < 256 * 32: a byte and 5 bits
    if k + 2 < n and vocab.byte_ctx[BYTE_CTX_RIGHT + (((<uint32_t>s[k + 1] & 0x3F) << 8) | s[k + 2])] <= r:
        return False                                # index < 8192 + 64 * 256: 6 bits and a byte
    return True


cdef inline bint all_ascii(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    # No byte >= 0x80 in s[0:n].  The first 8 bytes first: a piece of Japanese or Chinese fails there at once.
    # The loop over a piece's whole length, then its tail byte by byte, changed trip count with every piece
    # and mispredicted its exits 67K times in a Japanese first pass (callgrind, o200k: of 882K).
    cdef uint64_t acc, w
    cdef Py_ssize_t i = 8
    if n < 8:
        return (load_head(s, n) & 0x8080808080808080ULL) == 0
    memcpy(&acc, s, 8)                                      # n >= 8
    if acc & 0x8080808080808080ULL:
        return False
    while i + 8 <= n:
        memcpy(&w, s + i, 8)                                # i + 8 <= n
        acc |= w
        i += 8
    acc |= load_tail(s, n)                                  # the last 8 bytes (n >= 8), overlapping those above
    return (acc & 0x8080808080808080ULL) == 0


cdef Py_ssize_t symbolize_chars(const Tables* vocab, BpeScratch* sc, const uint8_t* s, Py_ssize_t n,
                                uint32_t* ids, uint64_t* keys, bint* filtered_out) noexcept nogil:
    # Whole characters as the first symbols of a byte-level piece, or -1 to take bytes (symbolize).
    # Exact when every character is ASCII or a BMP character that Tables.cp_token admits (its lone BPE is
    # one token T that no merge uses at a rank below the top rank R of that lone BPE, or several tokens),
    # and no token can join part of a character to a neighbour (seam_ok at every boundary).  Proof: a
    # merge involving part of a character and anything outside it would make a token that seam_ok rules
    # out, so each character's bytes merge among themselves exactly as in its lone BPE (the parts of a
    # CP_SEVERAL character then never merge again).  While a character is unfinished, one of its own
    # pairs (rank <= R) is available, so the reference applies nothing ranked above R meanwhile; every
    # merge using T ranks above R; so merging the characters first changes the order of no two merges
    # that interact (rank files, whose ranks are monotone, admit every such character).  Pieces with no
    # multi-byte character return -1 (the byte path has the byte-pair table).
    # A seam where some token may join part of a character to its neighbour (seam_ok false) leaves the
    # two characters beside it as bytes, the symbols the reference starts from; the proof above is about
    # one character and its two seams, so every other character still starts whole.  (A piece of CJK in
    # cl100k or Llama 3 has such a seam more often than not: one of them sent the whole piece to bytes.)
    # A character cp_token refuses (CP_NONE) is left as bytes the same way, with its neighbours, instead
    # of sending the whole piece to bytes (Llama 3 refuses some Cyrillic and Arabic letters).
    # filtered_out[0]: keys[j] (for the m - 1 pairs made) is KEY_NONE where seam_bits' CHAR_PAIRS set
    # proves that the pair (ids[j], ids[j + 1]) merges into nothing, else KEY_PENDING: merge_linear looks
    # up only those.  False (no run of 3-byte characters was taken): keys were not written.  Only the runs
    # write keys (the steps between them owe theirs, filled in before the next run and at the end), so
    # the general step, which most other scripts take, does no key work.
    cdef Py_ssize_t i = 0, m = 0, plen = 0, ln, k, low, misses = 0
    cdef Py_ssize_t kdone = 0                           # with filtered: keys[0:kdone] are written
    cdef Py_ssize_t prev_m = 0                          # m before the previous character's symbols
    cdef uint32_t cp, b0, tid, prev = 0
    cdef const uint8_t* p
    cdef const uint8_t* q
    cdef int several
    cdef uint32_t pend
    cdef uint32_t* out
    cdef uint64_t* kout
    cdef const uint32_t* cp_token = vocab.cp_token
    cdef const uint8_t* bits = vocab.seam_bits
    cdef bint multi = False, prev_bytes = False, filtered = False, run = False, refused
    while i < n:
        b0 = s[i]
        if b0 < 0x80:
            cp = b0
            ln = 1
        elif 0xC2 <= b0 < 0xE0 and i + 1 < n and (s[i + 1] & 0xC0) == 0x80:
            cp = ((b0 & 0x1F) << 6) | (s[i + 1] & 0x3F)
            ln = 2
            multi = True
        elif 0xE0 <= b0 < 0xF0 and i + 2 < n and (s[i + 1] & 0xC0) == 0x80 and (s[i + 2] & 0xC0) == 0x80:
            cp = ((b0 & 0x0F) << 12) | ((<uint32_t>s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F)
            if cp < 0x800 or 0xD800 <= cp < 0xE000:
                return -1                                   # overlong or surrogate: not a character
            ln = 3
            multi = True
        else:
            return -1
        tid = cp_token[cp]                                  # cp < 0x10000
        refused = (tid & CP_ID_MASK) == CP_NONE
        if refused:
            # A character cp_token refuses starts as its bytes, what the reference starts from, and so do
            # its neighbours unless seam_ok clears their seam with it (the flags make the next character
            # ask); a byte that is no token sends the piece to the byte path below.
            tid = CP_NONE | CP_SUFFIX_RISK | CP_PREFIX_RISK
        if refused or (m > 0 and ((prev & CP_SUFFIX_RISK) or (tid & CP_PREFIX_RISK)) and
                       not seam_ok(bits, s, n, i, plen, ln)):
            k = i
            if not prev_bytes:
                m = prev_m                                  # the previous character again, as bytes
                k = i - plen
            low = m
            if k < i:
                # The previous character: its token when pair_first proves it exact, else its bytes.
                if plen == 2 and pair_first(vocab, s, n, k, prev):
                    ids[m] = prev & CP_ID_MASK              # m <= k < n
                    m += 1
                    k = i
            if ln == 2 and pair_first(vocab, s, n, i, tid):
                while k < i:                                # a previous character pair_first refused
                    if vocab.byte_id[s[k]] == NO_ID:
                        return -1
                    ids[m] = vocab.byte_id[s[k]]            # m <= k < n
                    m += 1
                    k += 1
                ids[m] = tid & CP_ID_MASK                   # m <= i < n
                m += 1
                k = i + ln
            while k < i + ln:                               # i + ln <= n: the character was decoded whole
                if vocab.byte_id[s[k]] == NO_ID:
                    return -1
                ids[m] = vocab.byte_id[s[k]]                # m <= k < n
                m += 1
                k += 1
            prev = tid
            prev_bytes = True
            run = False
            if kdone > low - 1:
                # A key a run wrote is for a symbol now gone: looked up again (its KEY_NONE would still be
                # right, the seam being the reason for the demotion, but the bit set is not trusted there).
                kdone = low - 1 if low > 0 else 0
        else:
            prev = tid
            prev_bytes = False
            prev_m = m
            tid &= CP_ID_MASK
            # run: a 3-byte character taken whole, what a run starts after.
            run = ln == 3
            if tid == CP_SEVERAL:
                m = lone_char_bpe(vocab, sc, s + i, ln, ids, m)  # adds at most ln <= n - i ids
            else:
                ids[m] = tid                                # m <= i < n: ids has room for n
                m += 1
        plen = ln
        i += ln
        # A run of 3-byte characters (CJK text is little else), one step a character (ctok_char3_run in
        # _char_run.h: every test of the step above in two rarely taken branches).  A character it does not
        # take is left to the step above, which decides it from scratch.  Exact: a character it takes is
        # one that step would take the same way (decoded, admitted, one token, and a seam that either no
        # character flags or SEAM_PRE_ANY clears), and the run leaves prev, prev_m, plen and prev_bytes as
        # that step would.  Entered only after that step took a 3-byte character whole (CJK: the first
        # character of the piece), and no more after two runs in the piece stopped at their
        # first character: scripts of 2-byte characters, or of 3-byte characters that rarely pass (udhr's
        # Indic and Ethiopic), pay one well-predicted test a character (o200k udhr: the same tests before
        # every step, and keys written by every step, cost 8M of 470M instructions).
        if run and misses < 2 and i + 3 <= n:
            # The pairs the steps above made since the last run are looked up (keys[kdone:m - 1]); the run
            # writes the keys from the pair (ids[m - 1], its first character) on.
            for k in range(kdone, m - 1):
                keys[k] = KEY_PENDING                       # k < m - 1 < n: keys has room for n
            filtered = True
            p = s + i
            out = ids + m                                   # the next id's place (m <= i < n: ids has room)
            kout = keys + m - 1                             # the key of the pair (out[-1], out[0]); m >= 1
            pend = (prev & CP_ID_MASK) == CP_SEVERAL        # ids[m - 1] is not that character's one token
            while True:
                # n >= i + 3 >= 4; the run stops at p > s + n - 3, so each character it reads is inside
                # s[0:n], and p[-1] (i > 0) too.  Ids: out - ids <= p - s < n; keys one behind.
                q = ctok_char3_run(p, s + n - 3, cp_token, bits + SEAM_PRE_ANY // 8, bits + CHAR_PAIRS // 8,
                                   CP_ID_MASK, CP_SEVERAL, pend, &out, &kout, &prev, &several)
                if q != p:
                    prev_m = (out - ids) - 1                # the last character made one id
                p = q
                if not several:
                    break
                # The character at p passed every test of the general step and is several tokens: its
                # tokens, their pairs looked up, and the run goes on after it.
                prev_m = out - ids
                m = lone_char_bpe(vocab, sc, p, 3, ids, prev_m)  # adds at most 3 <= n - (p - s) ids
                for k in range(prev_m - 1, m - 1):
                    keys[k] = KEY_PENDING                   # prev_m >= 1; k < m - 1 < n
                out = ids + m
                kout = keys + m - 1
                p += 3                                      # p <= s + n - 3: inside s[0:n]
                pend = 1                                    # ids[m - 1] is not the character's one token
                if p > s + n - 3:
                    break
            if p == s + i:
                misses += 1
            else:
                i = p - s
                m = out - ids
                # plen = 3 and prev_bytes = False already (the step above); prev_m set above
            kdone = m - 1                                   # keys[0:m - 1] written
    if filtered:
        for k in range(kdone, m - 1):
            keys[k] = KEY_PENDING                           # k < m - 1 < n: keys has room for n
    filtered_out[0] = filtered
    return m if multi else -1


cdef Py_ssize_t lone_char_bpe(const Tables* vocab, BpeScratch* sc, const uint8_t* c, Py_ssize_t ln, uint32_t* ids,
                              Py_ssize_t m) noexcept nogil:
    # Append BPE(c) (one character of ln <= 3 bytes, every byte a token) to ids[m:]; the new m.
    cdef uint32_t sym[3]
    cdef uint64_t key, best_key
    cdef Py_ssize_t q, best, k = ln
    for q in range(ln):
        sym[q] = vocab.byte_id[c[q]]
    while k > 1:
        best = 0
        best_key = memo_key(vocab, sc, sym[0], sym[1])
        for q in range(1, k - 1):
            key = memo_key(vocab, sc, sym[q], sym[q + 1])
            if key < best_key:
                best_key = key
                best = q
        if best_key == 0xFFFFFFFFFFFFFFFFULL:
            break
        sym[best] = <uint32_t>best_key
        for q in range(best + 1, k - 1):
            sym[q] = sym[q + 1]
        k -= 1
    for q in range(k):
        ids[m + q] = sym[q]
    return m + k


cdef inline uint64_t pair_key(const Tables* vocab, uint32_t a, uint32_t b) noexcept nogil:
    # (rank << 32) | merged id, or all ones when (a, b) does not merge.  One rank always names one merged
    # token, so comparing these keys orders pairs by rank, and equal keys mean the same merge.
    return tables_pair_key(vocab, a, b)


cdef int memo_ready(BpeScratch* sc, const Tables* vocab) noexcept nogil:
    # The memo exists and belongs to this vocabulary (a scratch may serve another encoder later).
    if sc.memo == NULL:
        sc.memo = <uint64_t*>malloc((2 << PAIR_MEMO_BITS) * sizeof(uint64_t))
        if sc.memo == NULL:
            return BPE_NOMEM
        sc.memo_owner = NULL
    if sc.memo_owner != vocab:
        memset(sc.memo, 0xFF, (2 << PAIR_MEMO_BITS) * sizeof(uint64_t))   # all ones: no pair (NO_ID, NO_ID)
        sc.memo_owner = vocab
    return BPE_OK


cdef inline uint64_t memo_key(const Tables* vocab, BpeScratch* sc, uint32_t a, uint32_t b) noexcept nogil:
    # pair_key through the memo (memo_ready was called for this vocabulary).
    cdef uint64_t pair = (<uint64_t>a << 32) | b
    cdef uint64_t i = ((pair * 0x9E3779B97F4A7C15ULL) >> (64 - PAIR_MEMO_BITS)) << 1    # even, < 2 << BITS
    cdef uint64_t key
    if sc.memo[i] == pair:
        return sc.memo[i + 1]
    key = pair_key(vocab, a, b)
    sc.memo[i] = pair
    sc.memo[i + 1] = key
    return key


cdef Py_ssize_t merge_linear(const Tables* vocab, BpeScratch* sc, Py_ssize_t m,
                             const uint8_t* s, bint pending=False) noexcept nogil:
    # tiktoken's loop: find the lowest-ranked adjacent pair (leftmost on ties: strict <), merge it,
    # re-rank its two neighbours.  keys[i] describes the pair (ids[i], ids[i+1]).  When `s` is given,
    # symbol i is the byte token of s[i] and the first keys come from the direct byte-pair table.
    # pending: symbolize_chars left the first keys KEY_NONE or KEY_PENDING; only the latter are looked up.
    cdef uint32_t* ids = sc.ids
    cdef uint64_t* keys = sc.keys
    cdef int32_t* todo = sc.prev                    # room for sc.cap >= m entries
    cdef Py_ssize_t i, best, t
    cdef uint64_t best_key, k
    cdef bint lower
    if s != NULL:
        for i in range(m - 1):
            keys[i] = vocab.byte_pairs[(<uint32_t>s[i] << 8) | s[i + 1]]     # index < 65536
    elif pending:
        # The pending pairs' places first, without a branch (which pairs are pending is data), then
        # their lookups in a loop whose only data-dependent branch is the memo's.
        t = 0
        for i in range(m - 1):
            todo[t] = <int32_t>i                    # t <= i < m - 1 < cap
            t += keys[i] == KEY_PENDING
        for k in range(<uint64_t>t):
            i = todo[k]                             # k < t: a place written above, i < m - 1
            keys[i] = memo_key(vocab, sc, ids[i], ids[i + 1])
    else:
        for i in range(m - 1):
            keys[i] = memo_key(vocab, sc, ids[i], ids[i + 1])
    # The scan below reads keys four at a time, up to keys[m + 1]: the places past the last pair hold
    # KEY_NONE, which is never lower.  Callers keep sc.cap >= m + 3 (merge_only: m <= LINEAR_MAX, and sc.cap
    # >= 256).  Each merge keeps that so: the shifts move KEY_NONE down and the place the last pair leaves
    # is cleared.
    for i in range(m - 1, m + 3):
        keys[i] = KEY_NONE
    while m > 1:
        best_key = keys[0]
        best = 0
        i = 1
        # Four keys a step: the scan's trip count then changes every fourth merge rather than at each one
        # (its exit mispredicted once per merge, some 8 times per new English piece).  Selects, not a
        # branch: which pair is lowest is data, and a mispredicted branch per new minimum cost more than
        # the whole comparison.  Strict <: the leftmost of equal keys wins, as in tiktoken.
        while i < m - 1:
            k = keys[i]                             # i + 3 <= m + 1: inside the cleared places
            lower = k < best_key
            best = i if lower else best
            best_key = k if lower else best_key
            k = keys[i + 1]
            lower = k < best_key
            best = i + 1 if lower else best
            best_key = k if lower else best_key
            k = keys[i + 2]
            lower = k < best_key
            best = i + 2 if lower else best
            best_key = k if lower else best_key
            k = keys[i + 3]
            lower = k < best_key
            best = i + 3 if lower else best
            best_key = k if lower else best_key
            i += 4
        if best_key == 0xFFFFFFFFFFFFFFFFULL:
            break
        ids[best] = <uint32_t>best_key
        # Remove symbol best+1 and the key of pair (best+1, best+2): shift the tails left by one.  Short
        # pieces move a fixed 16 entries (past m is scratch room: best + 18 <= m + 16 <= 32 < sc.cap, which
        # is at least 256): the loops became memmove calls, a call and its length branches per merge.
        if m <= 16:
            ctok_drop16_u32(&ids[best + 1])
            ctok_drop16_u64(&keys[best + 1])
        else:
            for i in range(best + 1, m - 1):
                ids[i] = ids[i + 1]
            for i in range(best + 1, m - 2):
                keys[i] = keys[i + 1]
        m -= 1
        if m > 1:
            # The pairs on either side of the merged symbol, looked up without a branch on where it sits:
            # at the left end (best 0) the left pair's place becomes the right pair's, at the right end (best
            # m - 1) the right pair's becomes the left pair's, and that pair is looked up twice (the memo
            # answers the second).  `if best > 0` and `if best < m - 1` mispredicted 4 times a new English
            # piece (callgrind, Dracula's 3,764 merged pieces of o200k: 15.7K of 99.5K).
            i = best - (best > 0)                   # best - 1, or 0 when best is 0 (then 0 < m - 1)
            t = best - (best == m - 1)              # best, or best - 1 when best is the last (then best >= 1)
            keys[i] = memo_key(vocab, sc, ids[i], ids[i + 1])       # i + 1 < m
            keys[t] = memo_key(vocab, sc, ids[t], ids[t + 1])       # t + 1 < m
        keys[m - 1] = KEY_NONE                      # past the last pair now (the m > 16 shift leaves a stale key)
    return m


cdef int tree_reserve(BpeScratch* sc, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t cap
    cdef void* p
    if n <= sc.tree_cap:
        return BPE_OK
    cap = sc.tree_cap * 2 if sc.tree_cap else 512
    while cap < n:
        cap *= 2
    p = realloc(sc.tree, cap * sizeof(uint64_t))
    if p == NULL:
        return BPE_NOMEM
    sc.tree = <uint64_t*>p
    sc.tree_cap = cap
    return BPE_OK


cdef inline void tree_climb3(uint64_t* tree, Py_ssize_t size, Py_ssize_t x, Py_ssize_t y, Py_ssize_t z) noexcept nogil:
    # Recompute every node above leaves x, y and z (already written), one level at a time for all three.
    # Three climbs one after another form one long chain of dependent loads (each node waits for the store
    # below it); side by side they overlap.  A node on two paths is computed twice from the same final
    # children, which is harmless: every node of a level is done before the level above reads it.
    cdef Py_ssize_t p = (size + x) >> 1, q = (size + y) >> 1, r = (size + z) >> 1   # leaves < size
    cdef uint64_t a, b, c, d, e, f
    while p >= 1:                                   # p, q and r are on the same level: all reach 0 together
        a = tree[2 * p]
        b = tree[2 * p + 1]
        c = tree[2 * q]
        d = tree[2 * q + 1]
        e = tree[2 * r]
        f = tree[2 * r + 1]
        tree[p] = a if a < b else b
        tree[q] = c if c < d else d
        tree[r] = e if e < f else f
        p >>= 1
        q >>= 1
        r >>= 1


cdef Py_ssize_t merge_tree(const Tables* vocab, BpeScratch* sc, Py_ssize_t m, const uint8_t* s) noexcept nogil:
    # The same merge order as merge_linear, for long pieces: a min-tree over the pairs (leaf i = the pair
    # whose left symbol is i, keyed (rank << 32) | i, so the root is the lowest rank, leftmost on ties)
    # and symbols in a linked list that keep their first index.  A merge updates three leaves, each in
    # log2(m) branch-free steps: O(m log m) for the piece with no heap bookkeeping or stale entries.
    cdef uint32_t* ids = sc.ids
    cdef uint64_t* merged = sc.keys               # merged[i]: id made by the pair at leaf i
    cdef int32_t* prv = sc.prev
    cdef int32_t* nxt = sc.next
    cdef uint64_t* tree
    cdef Py_ssize_t size = 1, i, j, r, q, out
    cdef uint64_t key, top
    while size < m:
        size <<= 1
    if tree_reserve(sc, 2 * size) != BPE_OK:
        return -1
    tree = sc.tree
    for i in range(m):
        prv[i] = <int32_t>(i - 1)
        nxt[i] = <int32_t>(i + 1) if i + 1 < m else -1
    for i in range(size):
        tree[size + i] = 0xFFFFFFFFFFFFFFFFULL
    for i in range(m - 1):
        if s != NULL:
            key = vocab.byte_pairs[(<uint32_t>s[i] << 8) | s[i + 1]]     # index < 65536
        else:
            key = memo_key(vocab, sc, ids[i], ids[i + 1])
        merged[i] = key & 0xFFFFFFFFULL
        if key != 0xFFFFFFFFFFFFFFFFULL:
            tree[size + i] = (key & 0xFFFFFFFF00000000ULL) | <uint64_t>i
    i = size - 1
    while i >= 1:
        tree[i] = tree[2 * i] if tree[2 * i] < tree[2 * i + 1] else tree[2 * i + 1]
        i -= 1
    while True:
        top = tree[1]
        if top == 0xFFFFFFFFFFFFFFFFULL:
            break
        i = <Py_ssize_t>(top & 0xFFFFFFFFULL)        # a live symbol with a right neighbour (leaf is set)
        j = nxt[i]
        ids[i] = <uint32_t>merged[i]
        r = nxt[j]                                   # j disappears
        nxt[i] = <int32_t>r
        if r >= 0:
            prv[r] = <int32_t>i
        # Leaves j (gone), i and q (re-ranked) first, then their ancestors in one climb.
        tree[size + j] = 0xFFFFFFFFFFFFFFFFULL                                 # j < m <= size
        if r >= 0:
            key = memo_key(vocab, sc, ids[i], ids[r])
            merged[i] = key & 0xFFFFFFFFULL
            tree[size + i] = (0xFFFFFFFFFFFFFFFFULL if key == 0xFFFFFFFFFFFFFFFFULL       # i < m <= size
                              else (key & 0xFFFFFFFF00000000ULL) | <uint64_t>i)
        else:
            tree[size + i] = 0xFFFFFFFFFFFFFFFFULL                             # i < m <= size
        q = prv[i]
        if q >= 0:
            key = memo_key(vocab, sc, ids[q], ids[i])
            merged[q] = key & 0xFFFFFFFFULL
            tree[size + q] = (0xFFFFFFFFFFFFFFFFULL if key == 0xFFFFFFFFFFFFFFFFULL       # q < i < size
                              else (key & 0xFFFFFFFF00000000ULL) | <uint64_t>q)
        tree_climb3(tree, size, j, i, q if q >= 0 else i)
    # Survivors in order (symbol 0 is never removed: a merge keeps its left symbol).
    out = 0
    i = 0
    while i >= 0:
        ids[out] = ids[i]
        out += 1
        i = nxt[i]
    return out


cdef int merge_only(const Tables* vocab, const BpeOptions* opt, const uint8_t* s, Py_ssize_t n,
                    IdVec* out, BpeScratch* scratch, bint chars_only=False) noexcept nogil:
    # Plain BPE of s[0:n] (no whole-piece shortcut), appended to out.  chars_only: only if the piece can
    # start from whole characters (symbolize_chars), else return BPE_NOT_CHARS having done nothing.
    cdef Py_ssize_t m, i
    cdef bint bytewise, pending = False
    if n <= 0:
        return BPE_OK
    if scratch_reserve(scratch, n + 1) != BPE_OK or memo_ready(scratch, vocab) != BPE_OK:
        return BPE_NOMEM
    m = -1
    if vocab.cp_token != NULL and not opt.char_level and not all_ascii(s, n):
        # -1 for a piece without multi-byte characters; else the first keys are KEY_NONE or KEY_PENDING
        m = symbolize_chars(vocab, scratch, s, n, scratch.ids, scratch.keys, &pending)
        bytewise = False
    pending = pending and m >= 0
    if m < 0:
        if chars_only:
            return BPE_NOT_CHARS
        m = symbolize(vocab, opt, s, n, scratch.ids, &bytewise)
    if m > LINEAR_MAX:
        m = merge_tree(vocab, scratch, m, s if bytewise else NULL)     # looks every first pair up itself
        if m < 0:
            return BPE_NOMEM
    elif m > 1:
        m = merge_linear(vocab, scratch, m, s if bytewise else NULL, pending)
    if idvec_reserve(out, m) != BPE_OK:
        return BPE_NOMEM
    for i in range(m):
        out.data[out.size + i] = scratch.ids[i]     # reserved above
    out.size += m
    return BPE_OK


cdef int pair_is_stable(const Tables* vocab, const BpeOptions* opt, uint32_t a, uint32_t b,
                        IdVec* tmp, BpeScratch* scratch, uint8_t** buf, Py_ssize_t* buf_cap) noexcept nogil:
    # 1 when BPE(bytes(a) + bytes(b)) is exactly [a, b], 0 when not, BPE_NOMEM on allocation failure.
    cdef Py_ssize_t la = vocab.offsets[a + 1] - vocab.offsets[a]
    cdef Py_ssize_t lb = vocab.offsets[b + 1] - vocab.offsets[b]
    cdef void* p
    if la + lb > buf_cap[0]:
        p = realloc(buf[0], la + lb)
        if p == NULL:
            return BPE_NOMEM
        buf[0] = <uint8_t*>p
        buf_cap[0] = la + lb
    memcpy(buf[0], vocab.blob + vocab.offsets[a], la)          # a, b are ids this encoder produced
    memcpy(buf[0] + la, vocab.blob + vocab.offsets[b], lb)
    tmp.size = 0
    if merge_only(vocab, opt, buf[0], la + lb, tmp, scratch) != BPE_OK:
        return BPE_NOMEM
    return 1 if tmp.size == 2 and tmp.data[0] == a and tmp.data[1] == b else 0


cdef struct SegMemo:
    # One remembered chunk encoding: s[start:start+length] encoded to memo.data[first:first+count].
    Py_ssize_t start
    Py_ssize_t length
    Py_ssize_t first
    Py_ssize_t count


cdef int merge_chunked(const Tables* vocab, const BpeOptions* opt, const uint8_t* s, Py_ssize_t n,
                       IdVec* out, BpeScratch* scratch) noexcept nogil:
    # BPE of a long byte-level piece in CHUNK-byte steps.  Invariant: out[base:] == BPE(s[0:done]).
    # Appending BPE(next chunk) keeps it exactly when the two tokens meeting at the seam are stable
    # (BPE of their bytes is themselves): before any merge crosses the seam, each side evolves as it
    # would alone, and the seam's neighbours run through the same states as in that two-token check.
    # When the seam is not stable, the last token is taken back (out[base:-1] is BPE of what it leaves,
    # for no merge crossed into it) and re-encoded with the chunk.  Too many take-backs: plain BPE.
    # Runs repeat themselves, so chunk encodings and seam verdicts are remembered for this piece.
    cdef Py_ssize_t base = out.size, done = 0, seg, end, i, takebacks = 0, slot
    cdef IdVec tmp, chk, memo
    cdef uint8_t* buf = NULL
    cdef Py_ssize_t buf_cap = 0
    cdef int rc = BPE_OK, st
    cdef uint32_t last
    cdef uint64_t key
    cdef uint64_t seam_key[64]
    cdef int seam_val[64]
    cdef SegMemo seg_memo[16]
    cdef const uint32_t* ids
    cdef Py_ssize_t n_ids
    tmp.data = NULL; tmp.size = 0; tmp.cap = 0
    chk.data = NULL; chk.size = 0; chk.cap = 0
    memo.data = NULL; memo.size = 0; memo.cap = 0
    for i in range(64):
        seam_key[i] = 0xFFFFFFFFFFFFFFFFULL
    for i in range(16):
        seg_memo[i].length = -1
    while done < n:
        end = done + CHUNK if done + CHUNK < n else n
        seg = done
        while True:
            # BPE of s[seg:end], from the memo when an equal segment was seen.
            ids = NULL
            slot = <Py_ssize_t>(((<uint64_t>(end - seg) * 0x9E3779B97F4A7C15ULL + <uint64_t>s[seg] * 0xC2B2AE35ULL
                                  + <uint64_t>s[end - 1] * 0x85EBCA6BULL) >> 40) & 15)
            if seg_memo[slot].length == end - seg and \
                    memcmp(s + seg_memo[slot].start, s + seg, end - seg) == 0:
                ids = memo.data + seg_memo[slot].first
                n_ids = seg_memo[slot].count
            else:
                if memo.size > 65536:
                    memo.size = 0                     # bound the memo; forget every entry
                    for i in range(16):
                        seg_memo[i].length = -1
                i = memo.size
                rc = merge_only(vocab, opt, s + seg, end - seg, &memo, scratch)
                if rc != BPE_OK:
                    break
                seg_memo[slot].start = seg
                seg_memo[slot].length = end - seg
                seg_memo[slot].first = i
                seg_memo[slot].count = memo.size - i
                ids = memo.data + i
                n_ids = memo.size - i
            if out.size == base or n_ids == 0:
                break
            last = out.data[out.size - 1]
            key = (<uint64_t>last << 32) | ids[0]
            slot = <Py_ssize_t>((key * 0x9E3779B97F4A7C15ULL) >> 58)          # 0..63
            if seam_key[slot] == key:
                st = seam_val[slot]
            else:
                st = pair_is_stable(vocab, opt, last, ids[0], &chk, scratch, &buf, &buf_cap)
                if st < 0:
                    rc = st
                    break
                seam_key[slot] = key
                seam_val[slot] = st
            if st == 1:
                break
            out.size -= 1
            seg -= vocab.offsets[last + 1] - vocab.offsets[last]
            takebacks += 1
            if takebacks > n // 8 + 64:
                out.size = base                       # pathological seams: fall back to plain BPE
                tmp.size = 0
                rc = merge_only(vocab, opt, s, n, &tmp, scratch)
                ids = tmp.data
                n_ids = tmp.size
                end = n
                break
        if rc != BPE_OK:
            break
        if idvec_reserve(out, n_ids) != BPE_OK:
            rc = BPE_NOMEM
            break
        memcpy(out.data + out.size, ids, n_ids * sizeof(uint32_t))     # reserved above
        out.size += n_ids
        done = end
    idvec_free(&tmp)
    idvec_free(&chk)
    idvec_free(&memo)
    free(buf)
    return rc


cdef int bpe_encode_piece(const Tables* vocab, const BpeOptions* opt, const uint8_t* s, Py_ssize_t n,
                          IdVec* out, BpeScratch* scratch) noexcept nogil:
    cdef uint32_t tid
    if n <= 0:
        return BPE_OK
    if opt.whole_piece_first and n <= vocab.max_token_len:
        tid = tables_lookup(vocab, s, n)
        if tid != NO_ID:
            return idvec_push(out, tid)
    return bpe_merge_piece(vocab, opt, s, n, out, scratch)


cdef int bpe_merge_piece(const Tables* vocab, const BpeOptions* opt, const uint8_t* s, Py_ssize_t n,
                         IdVec* out, BpeScratch* scratch) noexcept nogil:
    # The merge, through the scratch's store of the pieces the piece cache cannot keep (LongStore): asked for
    # every piece of more than CACHE_MAX_PIECE bytes, and for a shorter one only when its hash's bit in
    # many_ids says it may have more ids than the piece cache holds; given what it cannot keep.
    cdef Py_ssize_t before = out.size, k
    cdef int rc
    cdef uint64_t h
    cdef uint32_t bit
    cdef bint asked = True
    if n < LONG_STORE_MIN or n > LONG_STORE_MAX:
        return merge_cut(vocab, opt, s, n, out, scratch)
    h = hash_bytes(s, n, load_head_padded(s, n))                   # n >= 15: 8 bytes readable
    bit = <uint32_t>(h >> 32) & ((1u << LONG_MANY_BITS) - 1)
    if n <= CACHE_MAX_PIECE:
        asked = long_store_owns(scratch, vocab, opt) and (scratch.long_store.many_ids[bit >> 3] >> (bit & 7)) & 1
    if asked:
        rc = long_store_get(scratch, vocab, opt, s, n, h, out)
        if rc != 0:
            return BPE_OK if rc > 0 else BPE_NOMEM
    rc = merge_cut(vocab, opt, s, n, out, scratch)
    k = out.size - before
    if rc == BPE_OK and (n > CACHE_MAX_PIECE or k > CACHE_MAX_IDS):  # what the piece cache cannot keep
        if long_store_ready(scratch, vocab, opt):
            scratch.long_store.many_ids[bit >> 3] |= <uint8_t>(1 << (bit & 7))
            long_store_put(scratch, s, n, h, out.data + before, k)
    return rc


cdef inline uint32_t lead_in(uint64_t w, const uint8_t* at, uint32_t leads, bint* passed) noexcept nogil:
    # cut_lead's test of one word w of bytes (at[k] is byte k of w): its first lead byte when that leads a 3-byte
    # character or its bit is in leads; once a 2-byte lead without its bit was met (passed), a 3-byte lead
    # anywhere (0xE0: the walk over 3-byte characters); else 0.
    cdef uint64_t m = ctok_lead23_mask(w)
    cdef uint32_t b
    if m != 0 and not passed[0]:
        b = at[__builtin_ctzll(m) >> 3]                 # a byte of the word
        if b >= 0xE0 or (leads >> (b - 0xC0)) & 1:      # 0xC0 <= b <= 0xEF
            return b
        passed[0] = True
    return 0xE0 if ctok_lead3_mask(w) != 0 else 0


cdef inline uint32_t cut_lead(const uint8_t* s, Py_ssize_t n, uint32_t leads) noexcept nogil:
    # Whether and how char_cuts looks at s[0:n] (n >= 4): the first byte that leads a 2- or 3-byte character
    # (0xC0-0xEF) when it leads a 3-byte one or its bit is in leads (BpeOptions.cut_leads: the walk over both
    # kinds for a 2-byte lead); else 0xE0 when a 3-byte lead follows (the walk over 3-byte characters); else 0.
    # Eight bytes a step.  Pieces of ASCII and emoji skip the walk, and so do those of a script the vocabulary
    # holds most pairs of, unless CJK follows.
    cdef uint64_t w
    cdef Py_ssize_t j = 0
    cdef uint32_t got
    cdef uint8_t both[8]
    cdef bint passed = False
    if n < 8:
        memcpy(both, s, 4)
        memcpy(both + 4, s + n - 4, 4)                  # n >= 4: both loads inside s[0:n]
        memcpy(&w, both, 8)
        return lead_in(w, both, leads, &passed)
    while True:
        if j + 8 > n:
            j = n - 8                                   # n >= 8: the last word, overlapping
        memcpy(&w, s + j, 8)                            # j + 8 <= n
        got = lead_in(w, s + j, leads, &passed)
        if got != 0 or j + 8 >= n:
            return got
        j += 8


cdef uint32_t piece_cut_lead(const uint8_t* s, Py_ssize_t n, uint32_t leads) noexcept nogil:
    return cut_lead(s, n, leads)


cdef int merge_cut(const Tables* vocab, const BpeOptions* opt, const uint8_t* s, Py_ssize_t n, IdVec* out,
                   BpeScratch* sc) noexcept nogil:
    # BPE of s[0:n]: in parts when opt.char_bigrams finds cuts (char_cuts), else whole.
    cdef Py_ssize_t cuts[CHAR_CUTS_BATCH]
    cdef uint32_t sides[2 * CHAR_CUTS_BATCH]
    cdef Py_ssize_t k
    cdef uint32_t lead
    if opt.char_bigrams != NULL and n >= 4:
        lead = cut_lead(s, n, opt.cut_leads)
        if lead != 0:
            k = char_cuts(vocab, opt, s, 0, n, cuts, sides, CHAR_CUTS_BATCH, lead < 0xE0)
            if k > 0:
                return merge_parts(vocab, opt, s, n, cuts, sides, k, out, sc, lead < 0xE0)
    return merge_piece_uncached(vocab, opt, s, n, out, sc)


cdef inline void part_key(const uint8_t* p, Py_ssize_t ln, uint64_t* k0, uint64_t* k1) noexcept nogil:
    # The key of a part p[0:ln] (1 <= ln <= HOT_MAX_PIECE) in BpeScratch.hot: its bytes, zero padded, read
    # inside p[0:ln], and its length with HOT_PART set, which no piece's key has.
    k0[0] = load_head(p, ln)
    k1[0] = (load_head(p + 8, ln - 8) if ln > 8 else 0) | (<uint64_t>(ln | HOT_PART) << 56)


cdef int merge_parts(const Tables* vocab, const BpeOptions* opt, const uint8_t* p, Py_ssize_t n, Py_ssize_t* cuts,
                     uint32_t* sides, Py_ssize_t k, IdVec* out, BpeScratch* sc, bint twos) noexcept nogil:
    # BPE of p[0:n] cut at cuts[0:k] (char_cuts, k >= 1; when k is CHAR_CUTS_BATCH the later cuts are found
    # from the last one, reading characters as twos says): the parts' BPE in turn.  A part holds a whole
    # character beside each cut it touches, so a part of 2 or 3 bytes between two cuts is one character (it
    # starts with one of at least 2 bytes, and a 2-byte one and a byte cannot end at a cut, where a character
    # of at least 2 bytes ends); but the first part of 3 bytes may be a byte and a 2-byte character, and the
    # last one a 2-byte character and a byte (both tested here, the first once).  A part of one
    # character is its cp_token id (sides) when that is the character's lone BPE.  A part of up to
    # HOT_MAX_PIECE bytes goes through the scratch's table of recent pieces when this encoder owns it, keyed
    # apart from pieces (part_key: a part equal to a token need not encode as that token, as a piece would); a
    # CJK text's parts are a few thousand words met again and again (o200k, Japanese: 30,139 distinct pieces
    # that are no token, 5,012 distinct parts).  Longer parts are merged.
    cdef Py_ssize_t a = 0, c, j, ln, got, last
    cdef uint32_t x
    cdef int rc
    cdef uint64_t k0, k1
    cdef HotEntry* hot = sc.hot if opt.hot_owner != NULL and sc.hot_owner == opt.hot_owner else NULL
    cdef HotEntry* he
    # at_x: the cp_token entry of the character a part starts with after a cut, or (the first part) of the
    # one before the first cut: a part of one character is that one.
    cdef uint32_t at_x = sides[0]
    if cuts[0] == 3 and (p[1] & 0xC0) != 0x80:
        at_x = CP_NONE                          # p[0:3] is a byte and a 2-byte character, not one character
    while True:
        # Parts 0..last of this batch: part j ends at cuts[j], the last one at n unless more cuts follow.
        last = k - 1 if k == CHAR_CUTS_BATCH else k
        for j in range(last + 1):
            c = cuts[j] if j < k else n
            ln = c - a                          # >= 2: a character of 2 bytes or more beside each cut
            x = (at_x & CP_ID_MASK) if ln <= 3 else CP_NONE
            if j == k and ln == 3 and (p[a] & 0xF0) != 0xE0:
                x = CP_NONE                     # the last part: a 2-byte character and a byte (no cut ends it)
            if x < CP_SEVERAL:
                rc = idvec_push(out, x)
            elif hot != NULL and ln <= HOT_MAX_PIECE:
                part_key(p + a, ln, &k0, &k1)
                he = &hot[hot_index(k0, k1)]                              # < 1 << HOT_BITS
                if he.k0 == k0 and he.k1 == k1:
                    rc = idvec_reserve(out, HOT_MAX_IDS)
                    if rc == BPE_OK:
                        out.data[out.size] = he.ids[0]                    # reserved above
                        out.data[out.size + 1] = he.ids[1]
                        out.data[out.size + 2] = he.ids[2]
                        out.size += he.n
                else:
                    got = out.size
                    rc = merge_piece_uncached(vocab, opt, p + a, ln, out, sc)
                    got = out.size - got
                    if rc == BPE_OK and 1 <= got <= HOT_MAX_IDS:
                        hot_put(he, k0, k1, out.data + out.size - got, got)
            else:
                rc = merge_piece_uncached(vocab, opt, p + a, ln, out, sc)
            if rc != BPE_OK or c >= n:
                return rc
            at_x = sides[2 * j + 1]             # c < n: cut j < k, the character after it
            a = c
        # k == CHAR_CUTS_BATCH (else the last part ended at n): the cuts after a, the last one.
        k = char_cuts(vocab, opt, p, a, n, cuts, sides, CHAR_CUTS_BATCH, twos)


cdef inline bint long_store_owns(BpeScratch* sc, const Tables* vocab, const BpeOptions* opt) noexcept nogil:
    # sc has a store, of pieces merged with this vocabulary and these options.
    return sc.long_store != NULL and sc.long_store.vocab == vocab and sc.long_store.opt == opt


cdef bint long_store_ready(BpeScratch* sc, const Tables* vocab, const BpeOptions* opt) noexcept nogil:
    # Make sc's store at the first call, and empty it when the vocabulary or options change; False without
    # memory for it (pieces are then merged each time).
    cdef LongStore* st = sc.long_store
    if st == NULL:
        st = <LongStore*>calloc(1, sizeof(LongStore))
        if st == NULL:
            return False
        st.ring = <uint8_t*>malloc(LONG_STORE_BYTES)
        if posix_memalign(<void**>&st.index, 64, LONG_STORE_SLOTS * sizeof(LongRef)) != 0:
            st.index = NULL                         # a bucket in one line: 64-byte aligned
        else:
            memset(st.index, 0, LONG_STORE_SLOTS * sizeof(LongRef))
        st.many_ids = <uint8_t*>calloc((1u << LONG_MANY_BITS) // 8, 1)
        if st.ring == NULL or st.index == NULL or st.many_ids == NULL:
            free(st.ring)
            free(st.index)
            free(st.many_ids)
            free(st)
            return False
        sc.long_store = st
    if st.vocab != vocab or st.opt != opt:
        memset(st.index, 0, LONG_STORE_SLOTS * sizeof(LongRef))
        memset(st.many_ids, 0, (1u << LONG_MANY_BITS) // 8)
        st.vocab = vocab
        st.opt = opt
    return True


cdef inline Py_ssize_t long_record_bytes(Py_ssize_t n, Py_ssize_t k) noexcept nogil:
    # A record of a piece of n bytes and k ids: its LongRecord, the ids, the bytes, rounded up to 8.
    return (<Py_ssize_t>sizeof(LongRecord) + k * 4 + n + 7) & ~(<Py_ssize_t>7)


cdef inline LongRef* long_bucket(LongStore* st, uint64_t h) noexcept nogil:
    # The LONG_WAYS index entries a piece of hash h may take, from index[j], j = h & (SLOTS - LONG_WAYS): one
    # 64-byte line (the index is line-aligned).  Ways, not one entry: direct-mapped, two long pieces of one entry
    # that both came back took turns noting their miss there and neither was ever kept (the multilingual UDHR: a
    # quarter of its 10,083 long pieces merged again on every pass; 5.6% with two ways, 0.8% with four).
    return &st.index[h & (LONG_STORE_SLOTS - LONG_WAYS)]           # masked: j + LONG_WAYS <= LONG_STORE_SLOTS


cdef inline bint long_ref_whole(const LongStore* st, const LongRef* ref) noexcept nogil:
    # ref's record is still in the ring (not overwritten since).
    return ref.tag != 0 and st.written - ref.start <= LONG_STORE_BYTES


cdef int long_store_get(BpeScratch* sc, const Tables* vocab, const BpeOptions* opt, const uint8_t* s, Py_ssize_t n,
                        uint64_t h, IdVec* out) noexcept nogil:
    # The ids of s[0:n] (h: its hash_bytes, whose low bits pick the index bucket and high half is the tag)
    # appended to out when sc's store holds the piece: 1; 0 when it does not; -1 when out cannot grow.
    cdef LongStore* st = sc.long_store
    cdef LongRef* bucket
    cdef LongRef* ref
    cdef const LongRecord* rec
    cdef const uint32_t* ids
    cdef uint32_t tag = <uint32_t>((h >> 32) | 1)
    cdef int w
    if not long_store_owns(sc, vocab, opt):
        return 0
    bucket = long_bucket(st, h)
    for w in range(LONG_WAYS):
        ref = bucket + w                                            # w < LONG_WAYS: inside the bucket
        if ref.tag != tag or not long_ref_whole(st, ref):
            continue
        # Whole (checked above): the record lies at start % LONG_STORE_BYTES, inside the ring (long_store_put).
        rec = <const LongRecord*>(st.ring + ref.start % LONG_STORE_BYTES)
        ids = <const uint32_t*>(rec + 1)
        # rec.n_ids <= n (put's check): the record's bytes end inside the ring.
        if rec.length != n or rec.n_ids > <uint32_t>n or memcmp(ids + rec.n_ids, s, n) != 0:
            continue
        if idvec_reserve(out, rec.n_ids) != BPE_OK:
            return -1
        memcpy(out.data + out.size, ids, rec.n_ids * sizeof(uint32_t))   # reserved above
        out.size += rec.n_ids
        st.hits += 1
        return 1
    return 0


cdef void long_store_put(BpeScratch* sc, const uint8_t* s, Py_ssize_t n, uint64_t h, const uint32_t* ids,
                         Py_ssize_t k) noexcept nogil:
    # Keep (s[0:n] -> ids[0:k]) in sc's store (long_store_ready was true) at the second miss of this piece in its
    # bucket (or at once when it was kept before and its record was overwritten since): most long pieces are met
    # once, and their records would push out those met again.  A first miss is noted in a way whose note is free
    # (a kept piece frees its note), else in the way some bits of the hash pick; a kept piece takes a way that is
    # empty or whose record was overwritten, else the one written earliest.
    # n <= LONG_STORE_MAX and k <= n (BPE makes at most one id per byte), so a record is at most
    # 5 * LONG_STORE_MAX + 8 bytes, far less than the ring.
    cdef LongStore* st = sc.long_store
    cdef Py_ssize_t size = long_record_bytes(n, k), at
    cdef LongRecord* rec
    cdef LongRef* bucket = long_bucket(st, h)                      # bucket[0:LONG_WAYS]
    cdef LongRef* ref = NULL
    cdef uint32_t tag = <uint32_t>((h >> 32) | 1)
    cdef int w, noted = -1
    cdef bint again = False
    if k > n or n > LONG_STORE_MAX:                 # never (see above), but the ring's bound must not rest on it
        return
    for w in range(LONG_WAYS):
        again = again or bucket[w].tag == tag       # kept before, its record overwritten since
        if bucket[w].seen == tag:
            noted = w
    if not again:
        if noted < 0:                               # a first miss: only noted
            ref = bucket + ((h >> 40) & (LONG_WAYS - 1))
            for w in range(LONG_WAYS):
                if bucket[w].seen == 0:
                    ref = bucket + w
                    break
            ref.seen = tag
            return
        bucket[noted].seen = 0
    for w in range(LONG_WAYS):
        if not long_ref_whole(st, bucket + w):
            ref = bucket + w
            break
    if ref == NULL:
        ref = bucket
        for w in range(1, LONG_WAYS):
            if bucket[w].start < ref.start:
                ref = bucket + w
    at = st.written % LONG_STORE_BYTES
    if at + size > LONG_STORE_BYTES:                # no room before the ring's end: start over at its beginning
        st.written += LONG_STORE_BYTES - at
        at = 0
    rec = <LongRecord*>(st.ring + at)               # at + size <= LONG_STORE_BYTES; at is a multiple of 8
    rec.length = <uint32_t>n
    rec.n_ids = <uint32_t>k
    memcpy(<uint32_t*>(rec + 1), ids, k * sizeof(uint32_t))
    memcpy(<uint8_t*>(<uint32_t*>(rec + 1) + k), s, n)
    ref.tag = tag
    ref.start = st.written
    st.written += size


cdef int merge_piece_uncached(const Tables* vocab, const BpeOptions* opt, const uint8_t* s, Py_ssize_t n,
                              IdVec* out, BpeScratch* scratch) noexcept nogil:
    cdef Py_ssize_t i
    cdef int rc
    if n <= 0:
        return BPE_OK
    if n > LONG_PIECE and not opt.char_level:
        for i in range(n):
            if vocab.byte_id[s[i]] == NO_ID:
                break
        else:
            # Whole characters make long CJK runs short enough for the tree; other runs (ASCII letters,
            # scripts whose tokens join partial characters) go chunk by chunk.
            rc = merge_only(vocab, opt, s, n, out, scratch, True)
            if rc != BPE_NOT_CHARS:
                return rc
            return merge_chunked(vocab, opt, s, n, out, scratch)
    return merge_only(vocab, opt, s, n, out, scratch)


cdef void _options_for_test(BpeOptions* opt, bint char_level, bint byte_fallback, Py_ssize_t unk_id, bint fuse_unk,
                            bint whole_piece_first) noexcept:
    opt.char_level = char_level
    opt.char_token = NULL
    opt.char_bigrams = NULL
    opt.hot_owner = NULL
    opt.byte_fallback = byte_fallback
    opt.unk_id = NO_ID if unk_id < 0 else <uint32_t>unk_id
    opt.fuse_unk = fuse_unk
    opt.whole_piece_first = whole_piece_first


def _long_bucket_for_test(bytes piece):
    """Test hook: the index bucket a piece takes in a LongStore (the first entry of its LONG_WAYS)."""
    cdef const uint8_t* s = <const uint8_t*><char*>piece
    cdef Py_ssize_t n = len(piece)
    if n < 8:
        raise ValueError("pieces of the store are longer")
    return hash_bytes(s, n, load_head_padded(s, n)) & (LONG_STORE_SLOTS - LONG_WAYS)


def _long_store_for_test(Vocab py_vocab, list pieces, int passes):
    """Merge `pieces` (bytes) `passes` times in order through one scratch, as a tiktoken file's encoder does
    (byte-level, whole pieces first): the ids of the last pass, and how many pieces the long-piece store
    answered over all passes."""
    cdef const Tables* vocab = &py_vocab.t
    cdef BpeOptions opt
    cdef BpeScratch sc
    cdef IdVec out
    cdef bytes p
    cdef Py_ssize_t before
    cdef uint64_t hits
    _options_for_test(&opt, False, False, -1, False, True)
    scratch_init(&sc)
    out.data = NULL; out.size = 0; out.cap = 0
    result = []
    try:
        for k in range(passes):
            result = []
            for p in pieces:
                before = out.size
                if bpe_merge_piece(vocab, &opt, <const uint8_t*><char*>p, len(p), &out, &sc) != BPE_OK:
                    raise MemoryError()
                result.append([out.data[i] for i in range(before, out.size)])
        hits = sc.long_store.hits if sc.long_store != NULL else 0
        return result, hits
    finally:
        idvec_free(&out)
        scratch_free(&sc)


def _merge_for_test(Vocab py_vocab, bytes piece, bint tree, bint char_level=False, bint byte_fallback=False,
                    Py_ssize_t unk_id=-1, bint fuse_unk=False, bint whole_piece_first=True):
    """Encode one piece forcing the linear or the tree merge (tests compare the two)."""
    cdef const Tables* vocab = &py_vocab.t
    cdef BpeOptions opt
    cdef BpeScratch sc
    cdef IdVec out
    cdef Py_ssize_t m, i
    cdef bint bytewise
    cdef const uint8_t* sp
    _options_for_test(&opt, char_level, byte_fallback, unk_id, fuse_unk, whole_piece_first)
    scratch_init(&sc)
    out.data = NULL; out.size = 0; out.cap = 0
    try:
        if whole_piece_first and tables_lookup(vocab, <const uint8_t*><char*>piece, len(piece)) != NO_ID:
            return [tables_lookup(vocab, <const uint8_t*><char*>piece, len(piece))]
        # + 4: merge_linear reads and clears three keys past the last pair (here m may pass LINEAR_MAX)
        if scratch_reserve(&sc, len(piece) + 4) != BPE_OK or memo_ready(&sc, vocab) != BPE_OK:
            raise MemoryError()
        m = symbolize(vocab, &opt, <const uint8_t*><char*>piece, len(piece), sc.ids, &bytewise)
        sp = <const uint8_t*><char*>piece if bytewise else NULL
        if tree:
            m = merge_tree(vocab, &sc, m, sp) if m > 0 else 0
            if m < 0:
                raise MemoryError()
        elif m > 1:
            m = merge_linear(vocab, &sc, m, sp)
        return [sc.ids[i] for i in range(m)]
    finally:
        scratch_free(&sc)
        idvec_free(&out)


def _chars_for_test(Vocab py_vocab, bytes piece):
    """symbolize_chars of one piece: its first symbols, or None when the piece takes the byte path."""
    cdef const Tables* vocab = &py_vocab.t
    cdef Py_ssize_t n = len(piece), m, i
    cdef uint32_t* ids
    cdef uint64_t* keys
    cdef bint filtered
    cdef BpeScratch sc
    if vocab.cp_token == NULL:
        return None
    scratch_init(&sc)
    ids = <uint32_t*>malloc((n + 1) * sizeof(uint32_t))
    keys = <uint64_t*>malloc((n + 1) * sizeof(uint64_t))
    try:
        if ids == NULL or keys == NULL or memo_ready(&sc, vocab) != BPE_OK:
            raise MemoryError()
        m = symbolize_chars(vocab, &sc, <const uint8_t*><char*>piece, n, ids, keys, &filtered)
        return None if m < 0 else [ids[i] for i in range(m)]
    finally:
        free(ids)
        free(keys)
        scratch_free(&sc)


def _char_pair_bit(Vocab py_vocab, Py_ssize_t left, Py_ssize_t right):
    """The CHAR_PAIRS bit symbolize_chars reads for (left, right): False proves the pair merges into nothing."""
    cdef const Tables* vocab = &py_vocab.t
    if vocab.seam_bits == NULL or left < 0 or right < 0:
        return None
    return bool(bit_at(vocab.seam_bits, char_pair_index(<uint32_t>left, <uint32_t>right)))
