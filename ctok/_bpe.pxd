# Contract of the BPE merge of one piece (see _bpe.pyx).
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t
from ctok._vocab cimport Tables

cdef struct IdVec:
    # Growable array of token ids owned by whoever declared it; free with idvec_free.
    uint32_t* data
    Py_ssize_t size
    Py_ssize_t cap

cdef struct BpeOptions:
    bint char_level         # initial symbols are UTF-8 characters (SentencePiece); else single bytes
    bint byte_fallback      # unknown characters become <0xXX> tokens
    uint32_t unk_id         # NO_ID when there is no unk token: unknown symbols are dropped (as HF does)
    bint fuse_unk
    bint whole_piece_first  # a piece that is itself a token is emitted as is (tiktoken; HF ignore_merges)
    # Bit b - 0xC0 set: a piece whose first 2- or 3-byte lead byte is b (0xC2-0xDF) is looked at for cuts, where
    # the vocabulary holds few tokens of that lead (CUT_LEAD_TOKENS); a 3-byte lead's pieces always are.  (In
    # the padding before the pointers: the struct keeps its size.)
    uint32_t cut_leads
    # char_bigrams' size: char_bigram_bit's shift (Vocab.char_pair_tables).
    uint32_t char_bigram_shift
    # char_level: char_token[cp] = the token of the BMP character cp alone, or NO_ID (what a lookup of its
    # UTF-8 gives), so that first symbols take an array read instead of a hash lookup.  NULL: look up.
    const uint32_t* char_token
    # Vocab.char_pair_tables(): pieces are merged in parts cut between 2- or 3-byte characters no token holds side
    # by side (char_cuts).  NULL: whole.
    const uint8_t* char_bigrams
    # The owner (CoreEncoder's EncoderState) under which a scratch's table of recent pieces (BpeScratch.hot)
    # holds this encoder's pieces: the merge may keep parts there, keyed apart.  NULL: never.
    const void* hot_owner

cdef enum:
    LONG_STORE_BYTES = 4 << 20  # BpeScratch.long_store: its ring of records ...
    LONG_STORE_SLOTS = 1 << 15  # ... its index (32,768 entries of 16 bytes, in buckets of LONG_WAYS) ...
    LONG_WAYS = 4               # ... (one 64-byte line)
    LONG_MANY_BITS = 19         # ... and its set of pieces of at most CACHE_MAX_PIECE bytes with many ids (64 KB)

cdef struct LongRef:
    # One piece kept in a LongStore (16 bytes: the index stays small enough to probe in a first pass).  Its
    # record is at `start`, counted in bytes written to the ring since it was made, and is whole while
    # written - start <= LONG_STORE_BYTES: a LongRecord, the ids, then the piece's bytes.
    uint32_t tag                # the piece's hash >> 32 | 1; 0: empty
    uint32_t seen               # the tag of the last piece that missed here unkept: a piece is kept at its second miss
    uint64_t start

cdef struct LongRecord:
    uint32_t length             # the piece's bytes
    uint32_t n_ids

cdef struct LongStore:
    # Pieces the piece cache does not keep (more than CACHE_MAX_PIECE bytes, up to LONG_STORE_MAX, or more
    # than CACHE_MAX_IDS ids) and their ids, for one scratch: a ring of records (8-byte aligned), written in
    # order and overwritten oldest first, found through an index of LONG_WAYS-way buckets.
    uint8_t* ring               # LONG_STORE_BYTES
    LongRef* index              # LONG_STORE_SLOTS
    # Bit (hash >> 32) % 2^LONG_MANY_BITS: some piece of at most CACHE_MAX_PIECE bytes with that hash merged
    # to more than CACHE_MAX_IDS ids.  Such pieces are asked of the store only when their bit is set: the
    # others, nearly all of them, are the piece cache's, and the index probe cost a first pass over Japanese 8%.
    uint8_t* many_ids
    uint64_t written
    uint64_t hits               # pieces it answered (tests read it: _long_store_for_test)
    const Tables* vocab         # the vocabulary and options its pieces were merged with
    const BpeOptions* opt

cdef enum:
    HOT_BITS = 15               # BpeScratch.hot: 32,768 entries of 32 bytes (1 MB)
    HOT_MAX_PIECE = 15          # pieces of up to this many bytes ...
    HOT_MAX_IDS = 3             # ... that encode to at most this many ids
    HOT_MISSES_UNSEEN = 1 << 30 # BpeScratch.hot_misses of a table that has answered nothing yet
    HOT_PART = 0x80             # in a key's length byte: a part of a piece (merge_parts), not a piece
    CHAR_CUTS_BATCH = 32        # char_cuts found at a time (a piece with more is cut in several rounds)
    # Pieces of a 2-byte lead byte are cut where fewer tokens than this hold a character of that lead
    # (Vocab.char_pair_tables).  Measured (the merges of a file's distinct pieces that are no token, cuts on
    # against off; tokens for the two leads in brackets): cl100k's Arabic (68 and 48 for D8 and D9) 0.67x the
    # time, its Russian (675 and 465 for D0 and D1) 0.85x, Kimi K2's Arabic (835, 676) 0.87x, its Russian
    # (1,940, 1,427) 1.00x, o200k's Arabic (7,006, 6,337) 0.96x, Llama 3's Arabic (3,302, 2,830) 1.05x, o200k's
    # Russian (13,440, 10,679) 1.06x: a vocabulary rich in a script holds most pairs of its letters, so few
    # points cut and the walk costs about what it saves.
    CUT_LEAD_TOKENS = 1200

cdef struct HotEntry:
    # One piece and its ids (BpeScratch.hot).  The piece's bytes are its key, zero padded: k0 holds bytes 0-7,
    # k1 bytes 8-14 and the length in its top byte, so no two pieces share a key (a piece and the same bytes
    # with a NUL after them differ in length) and none is all zeros, the empty entry.
    uint64_t k0
    uint64_t k1
    uint32_t n                  # ids held (1..HOT_MAX_IDS)
    uint32_t ids[HOT_MAX_IDS]   # past n: zeros, copied and dropped

cdef inline uint64_t hot_index(uint64_t k0, uint64_t k1) noexcept nogil:
    # The entry of BpeScratch.hot for a piece's key: both words multiplied in, the top HOT_BITS bits kept.
    return ((k0 ^ (k1 * 0x9E3779B97F4A7C15ULL)) * 0xBF58476D1CE4E5B9ULL) >> (64 - HOT_BITS)


cdef inline void hot_put(HotEntry* he, uint64_t k0, uint64_t k1, const uint32_t* ids, Py_ssize_t n) noexcept nogil:
    # The piece keyed (k0, k1) encodes to ids[0:n], 1 <= n <= HOT_MAX_IDS; the entry's unused ids are zeros.
    he.k0 = k0
    he.k1 = k1
    he.n = <uint32_t>n
    he.ids[0] = ids[0]
    he.ids[1] = ids[1] if n > 1 else 0
    he.ids[2] = ids[2] if n > 2 else 0


cdef struct BpeScratch:
    # Per-thread working memory, reused across pieces so the hot loop does not allocate.
    Py_ssize_t cap
    uint32_t* ids
    uint64_t* keys          # keys[i]: (rank << 32) | merged id of the pair (ids[i], ids[i+1]), all ones if none
    int32_t* prev
    int32_t* next
    # Pair memo: the merge lookups of recent pieces, direct mapped, PAIR_MEMO entries of (pair, key).
    # A text reuses a small set of pairs over and over (CJK above all); the memo answers them from L1/L2
    # where the vocabulary's merge regions would cost a walk through memory.  Valid for memo_owner only.
    uint64_t* memo
    const Tables* memo_owner
    uint64_t* tree          # merge_tree's min-tree, 2 * (m rounded up to a power of two) keys
    Py_ssize_t tree_cap
    # Long pieces merged lately, kept whatever their first byte (code's separator and rule lines, and runs
    # of scripts written without spaces, met again in the next text); NULL until the first one.
    LongStore* long_store
    # The pieces this scratch's encoder met lately, tokens or not, and their ids (_encoder.encode_state_span):
    # direct mapped by the piece's bytes, 1 << HOT_BITS entries, read and written only by the one thread that
    # holds the scratch; a newer piece takes its entry.  Made (scratch_hot) for an encoder's pooled scratches
    # only (CoreEncoder.take_scratch); NULL in others.  Valid for hot_owner (an EncoderState) only.
    HotEntry* hot
    const void* hot_owner
    Py_ssize_t hot_misses   # pieces of the last batch the table did not answer (encode_state_span's way)
    # A count per token id, all zeros between uses: the encoder's batch lists take each distinct id's
    # references at once (_int_list.h, ctok_int_lists); NULL until the first, id_counts_size entries.
    uint32_t* id_counts
    Py_ssize_t id_counts_size

cdef enum:
    BPE_OK = 0
    BPE_NOMEM = -1
    BPE_NOT_CHARS = 1       # internal to _bpe: the piece cannot start from whole characters

cdef int idvec_reserve(IdVec* v, Py_ssize_t extra) noexcept nogil


cdef inline int idvec_push(IdVec* v, uint32_t x) noexcept nogil:
    # Inline: every token of a text passes here, and the call would cost more than the store.
    if v.size == v.cap and idvec_reserve(v, 1) != BPE_OK:
        return BPE_NOMEM
    v.data[v.size] = x          # size < cap after the reserve above
    v.size += 1
    return BPE_OK


cdef void idvec_free(IdVec* v) noexcept nogil
cdef void scratch_init(BpeScratch* s) noexcept nogil
cdef void scratch_free(BpeScratch* s) noexcept nogil
# Give a scratch a table of recent pieces (BpeScratch.hot) for owner; BPE_NOMEM leaves it without one.
cdef int scratch_hot(BpeScratch* s, const void* owner) noexcept nogil
cdef int bpe_encode_piece(const Tables* vocab, const BpeOptions* opt, const uint8_t* s, Py_ssize_t n,
                          IdVec* out, BpeScratch* scratch) noexcept nogil
# The same without the whole-piece lookup, for callers that already made it.
cdef int bpe_merge_piece(const Tables* vocab, const BpeOptions* opt, const uint8_t* s, Py_ssize_t n,
                         IdVec* out, BpeScratch* scratch) noexcept nogil

# The points after i in p[0:n] between two 2- or 3-byte characters across which no merge can join (opt's
# char_bigrams), at most cap of them, into cuts (the characters beside each in sides); their number.
# twos False: between 3-byte characters only.  vocab.cp_token must not be NULL.
cdef Py_ssize_t char_cuts(const Tables* vocab, const BpeOptions* opt, const uint8_t* p, Py_ssize_t i,
                          Py_ssize_t n, Py_ssize_t* cuts, uint32_t* sides, Py_ssize_t cap, bint twos) noexcept nogil
# How merge_cut looks at a piece s[0:n] (n >= 4) for cuts, under BpeOptions.cut_leads: 0 not at all, a 2-byte lead
# byte (0xC2-0xDF) between 2- and 3-byte characters, a 3-byte one (0xE0-0xEF) between 3-byte characters only.
cdef uint32_t piece_cut_lead(const uint8_t* s, Py_ssize_t n, uint32_t leads) noexcept nogil

cdef inline Py_ssize_t utf8_len(uint8_t lead) noexcept nogil:
    # Length of the UTF-8 sequence a lead byte announces; 1 for continuation/invalid bytes so that
    # malformed input advances byte by byte (the caller clips to the piece end).
    if lead < 0x80:
        return 1
    if lead >= 0xF0 and lead < 0xF8:
        return 4
    if lead >= 0xE0:
        return 3 if lead < 0xF0 else 1
    if lead >= 0xC0:
        return 2
    return 1
