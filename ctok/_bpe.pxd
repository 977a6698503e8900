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
    # char_level: char_token[cp] = the token of the BMP character cp alone, or NO_ID (what a lookup of its
    # UTF-8 gives), so that first symbols take an array read instead of a hash lookup.  NULL: look up.
    const uint32_t* char_token

cdef enum:
    LONG_SLOTS = 16             # BpeScratch.longs: entries ...
    LONG_SLOT_BYTES = 256       # ... for pieces of LONG_MEMO_MIN (49) up to this many bytes

cdef struct LongEntry:
    uint64_t seen               # hash of the last piece that missed here: a piece is kept at its second miss
    int32_t length              # -1: empty
    int32_t n_ids               # <= length: BPE never makes more ids than bytes
    uint8_t piece[LONG_SLOT_BYTES]
    uint32_t ids[LONG_SLOT_BYTES]

cdef enum:
    HOT_BITS = 15               # BpeScratch.hot: 32,768 entries of 32 bytes (1 MB)
    HOT_MAX_PIECE = 15          # pieces of up to this many bytes ...
    HOT_MAX_IDS = 3             # ... that encode to at most this many ids
    HOT_CACHED = 0x100          # HotEntry.n: the piece came from (or went to) the piece cache
    HOT_MISSES_UNSEEN = 1 << 30 # BpeScratch.hot_misses of a table that has answered nothing yet

cdef struct HotEntry:
    # One piece and its ids (BpeScratch.hot).  The piece's bytes are its key, zero padded: k0 holds bytes 0-7,
    # k1 bytes 8-14 and the length in its top byte, so no two pieces share a key (a piece and the same bytes
    # with a NUL after them differ in length) and none is all zeros, the empty entry.
    uint64_t k0
    uint64_t k1
    uint32_t n                  # ids held (1..HOT_MAX_IDS) | HOT_CACHED when the piece cache holds the piece too
    uint32_t ids[HOT_MAX_IDS]   # past n: zeros, copied and dropped

cdef struct BpeScratch:
    # Per-thread working memory, reused across pieces so the hot loop does not allocate.
    Py_ssize_t cap
    uint32_t* ids
    uint64_t* keys          # keys[i]: (rank << 32) | merged id of the pair (ids[i], ids[i+1]), all ones if none
    int32_t* prev
    int32_t* next
    # Pair memo: the merge lookups of recent pieces, direct mapped, PAIR_MEMO entries of (pair, key).
    # A text reuses a small set of pairs over and over (CJK above all); the memo answers them from L1/L2
    # where the vocabulary's merge lists would cost a walk through memory.  Valid for memo_owner only.
    uint64_t* memo
    const Tables* memo_owner
    uint64_t* tree          # merge_tree's min-tree, 2 * (m rounded up to a power of two) keys
    Py_ssize_t tree_cap
    # The last long piece merged (LONG_MEMO_MIN..LONG_MEMO_MAX bytes) and its ids: runs of the same
    # indentation or separator repeat, and are too long for the piece cache.
    uint8_t* last_piece
    Py_ssize_t last_len     # -1: empty
    uint32_t* last_ids
    Py_ssize_t last_n
    const Tables* last_vocab  # the vocabulary and options it was merged with
    const BpeOptions* last_opt
    # Pieces of 49-256 bytes (too long for the piece cache) merged recently, LONG_SLOTS entries direct
    # mapped by hash: code and markup repeat a few separator and rule lines (`####...`, `+----+----+`)
    # that alternate, which the one last piece above misses.  Only pieces starting with an ASCII byte, kept
    # at their second miss: long CJK pieces almost never repeat.  NULL until the first such piece.
    LongEntry* longs
    const Tables* longs_vocab
    const BpeOptions* longs_opt
    # The pieces this scratch's encoder met lately, tokens or not, and their ids (_encoder.encode_state_span):
    # direct mapped by the piece's bytes, 1 << HOT_BITS entries, read and written only by the one thread that
    # holds the scratch; a newer piece takes its entry.  Made (scratch_hot) for an encoder's pooled scratches
    # only (CoreEncoder.take_scratch); NULL in others.  Valid for hot_owner (an EncoderState) only.
    HotEntry* hot
    const void* hot_owner
    uint64_t hot_cached     # hits on HOT_CACHED entries not yet told to the piece cache (cache_note_hits)
    Py_ssize_t hot_misses   # pieces of the last batch the table did not answer (encode_state_span's way)

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
