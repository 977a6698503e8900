# Contract of the native encoder (see _encoder.pyx), and the Cython-level API for embedding engines:
#     from ctok._encoder cimport CoreEncoder, capi_encode, capi_decode
# Another Cython extension can hold a CoreEncoder (Encoding._core) and call these without the GIL.
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t, int64_t
from cpython.object cimport PyObject
from ctok._vocab cimport Vocab, Tables
from ctok._bpe cimport IdVec, BpeScratch, BpeOptions
from ctok._piece_cache cimport PieceCache

cdef extern from "include/ctok.h" nogil:
    enum:
        CTOK_API_VERSION
        CTOK_OK
        CTOK_ERR_NOMEM
        CTOK_ERR_BUFFER
        CTOK_ERR_UNKNOWN_ID
        CTOK_ERR_UNSUPPORTED
    ctypedef struct ctok_api:
        int version
        int (*encode)(const void* encoder, const uint8_t* text, size_t len, uint32_t* out, size_t cap,
                      size_t* n_out) noexcept nogil
        int (*decode)(const void* encoder, const uint32_t* ids, size_t n, uint8_t* out, size_t cap,
                      size_t* n_out) noexcept nogil
        size_t (*vocab_size)(const void* encoder) noexcept nogil

cdef enum:
    # Split before each run of `marker` that follows another character.  Used for SentencePiece-style
    # files (no pre-tokenizer: the whole text is one word) when no token holds a character followed by
    # the marker, which proves no merge can cross such a point, so the split changes nothing but speed.
    PRETOK_MARKER_WORDS = 64

cdef struct AddedMatcher:
    # Leftmost-longest matching of a group of an AddedSplit's tokens: those starting with byte b are
    # [start[b], start[b + 1]) (longest first); second[b]: bit set of their second bytes (256 bits);
    # single[b]: one of them is the single byte b.
    int32_t start[257]
    uint8_t second[256][32]
    uint8_t single[256]

cdef struct AddedSplit:
    # Added tokens that HF's added vocabulary finds in ordinary text before anything else runs, each emitted
    # as its id; the text between two is encoded as a text of its own.  HF finds them in two passes (tokenizers'
    # AddedVocabulary.extract_and_normalize): the tokens it matches on the raw text (normalized: false),
    # leftmost-longest; then, in each text between two of those, the tokens it matches on the normalized text
    # (normalized: true), leftmost-longest.  Tokens [0, n_raw) are the first pass's, [n_raw, n) the second's,
    # each group sorted by first byte, longest first.  Only texts the normalizer leaves as they are take this
    # split (see hf.HFPipeline._split_plan), and a token that starts or ends with a character other than ASCII
    # only where there is no normalizer: cutting before or after an ASCII character changes no Unicode normal
    # form.  Token bytes are valid UTF-8 and so are the texts split (strs), so a match starts and ends on
    # character boundaries.
    Py_ssize_t n
    Py_ssize_t n_raw
    uint8_t* blob
    Py_ssize_t* off             # n + 1 offsets into blob
    uint32_t* ids
    # How far back of a common prefix of two texts their splits may differ: an added token starting before
    # q - lmax + 1 is found in both texts that share [0, q) (the longest raw token's length, plus the longest
    # normalized one's when there are both: a second-pass token must also fit before the next raw one).
    Py_ssize_t lmax
    AddedMatcher raw
    AddedMatcher normalized

cdef struct AddedScan:
    # added_next's memory within one scan of a text: the next first-pass match found (start and index), which
    # stays the next one while second-pass tokens are found before it.  raw_at = -1: none looked for yet.
    Py_ssize_t raw_at
    Py_ssize_t raw_k

cdef struct EncoderState:
    # Everything encoding needs, as plain C data: what a C API handle points at.
    const Tables* tables
    BpeOptions opt
    int pretok_kind
    bint c_api_ok           # False when the Python layer must run first (normalizers, HF-only splits)
    PieceCache cache        # pieces that needed merging -> their ids (shared, lock-free; may be off)
    uint8_t marker[8]       # PRETOK_MARKER_WORDS: the word marker (SentencePiece's U+2581), 1..8 bytes
    int marker_len
    uint64_t marker_word    # the marker's bytes as a word loaded from memory reads them, zero padded ...
    uint64_t marker_mask    # ... and the mask of its marker_len bytes: one masked compare per test
    # self_merges[id]: a piece equal to token id merges back to id alone under these options, so it is
    # emitted without merging (merge lists without ignore_merges).  NULL: none known.  Byte-level: the
    # vocabulary's table; char-level: CoreEncoder.own_self_merges.
    const uint8_t* self_merges
    # cut_bits: Vocab.token_bigrams() (8,192 bytes), where a piece that is no token is cut into parts encoded
    # one by one: between two units (bytes, or characters when char-level) whose two bytes no token holds
    # side by side, no merge can cross.  NULL: pieces are merged whole (see CoreEncoder._cuts_exact).
    const uint8_t* cut_bits
    # parts_cached: this encoder can cut pieces (cut_bits set now or by _set_cuts), so its piece cache may hold
    # parts, stored as their bytes' BPE: a part equal to a token need not be that token, as the piece would be.
    bint parts_cached

# Split s[0:n] with the state's pretokenizer and append every piece's BPE ids to `out`.
cdef int encode_state(const EncoderState* st, const uint8_t* s, Py_ssize_t n, IdVec* out,
                      BpeScratch* sc) noexcept nogil

# The next added token HF finds in s[i:n] (two passes, see AddedSplit), i being 0 or the end of the last one
# found or a point between two found: its start (n when none), its index in added in k_out.  scan: raw_at = -1
# before the first call on a text, then passed unchanged to the next calls on it (with growing i).
cdef Py_ssize_t added_next(const AddedSplit* a, const uint8_t* s, Py_ssize_t n, Py_ssize_t i,
                           Py_ssize_t* k_out, AddedScan* scan) noexcept nogil

# HF's added-token split of s[0:n] from pos (0 or the end of an added token), each text between two encoded as a
# text of its own: as it is (buf NULL) or, SentencePiece-style, marked as a split of its own in buf (room for
# marked_room(st, n - pos) bytes); ck, unless NULL, gets a checkpoint (offset, ids so far) after each added token.
cdef int encode_split(const EncoderState* st, const AddedSplit* a, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos,
                      uint8_t* buf, int prepend, bint first_only, IdVec* out, IdVec* ck, BpeScratch* sc) noexcept nogil

# Room encode_split needs in buf for n bytes of text: each byte may become the marker, one marker goes in front,
# and ctok_mark_spaces' stores reach 8 bytes past the end.
cdef inline size_t marked_room(const EncoderState* st, Py_ssize_t n) noexcept nogil:
    return <size_t>n * st.marker_len + st.marker_len + 8 + 1

cdef int encode_added(const EncoderState* st, const AddedSplit* added, const uint8_t* s, Py_ssize_t n,
                      IdVec* out, BpeScratch* sc) noexcept nogil

# The pieces of s[0:n] from the piece boundary pos on, until the first piece boundary at or after stop
# (pos < stop <= n; a few pieces past stop, which are cut in batches), which goes to end.  Not for
# PRETOK_WHOLE.  The prefix cache records its checkpoints at these ends.
cdef int encode_state_span(const EncoderState* st, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos,
                           Py_ssize_t stop, IdVec* out, BpeScratch* sc, Py_ssize_t* end) noexcept nogil

# BPE ids of one piece: whole-token lookup, then the shared piece cache, then the merge.
cdef int encode_piece_cached(const EncoderState* st, const uint8_t* p, Py_ssize_t n, IdVec* out,
                             BpeScratch* sc) noexcept nogil

cdef struct Needles:
    # What a batch's threads look for in each text's UTF-8 (TokenScan.needles): the UTF-8 of each (first
    # character, second character) pair of some tokens' texts, or of the first character alone where any may
    # follow.  A text holding none of them holds none of the tokens.  n = -1: too many to scan for.
    int n
    int length[64]
    uint8_t text[64][8]


cdef class CoreEncoder:
    cdef readonly Vocab vocab
    cdef EncoderState state
    cdef readonly int pretok_kind
    # The process's Python int per token id (_encoder.shared_int_cache), at least vocab.t.n_ids entries:
    # building a result list then costs an INCREF per token instead of an allocation.  Filled and read only
    # with the GIL held; not owned by the encoder.
    cdef PyObject** int_cache
    # Buffers reused by short encodes, which run entirely with the GIL held; `short_busy` guards against
    # re-entry (a finalizer run by the garbage collector while the result list is built).
    cdef uint8_t* own_self_merges   # char-level encoders' self_merges table (freed with the encoder)
    cdef bytes _char_token          # char-level encoders' BpeOptions.char_token (65,536 uint32)
    cdef bytes _cut_bits            # EncoderState.cut_bits' owner, or None
    cdef bytes _char_cut_bits       # BpeOptions.char_bigrams' owner, or None
    cdef IdVec short_out
    # The ids buffer of the last long encode (take_out/give_out, with the GIL held), kept up to LONG_KEEP_IDS
    # ids: a fresh buffer of a long text's size is mapped by the allocator and paid for again in page faults
    # at every call (one per 1,024 ids).  `long_busy`: lent out.
    cdef IdVec long_out
    cdef bint long_busy
    cdef BpeScratch short_scratch
    cdef bint short_busy
    # Scratches lent to longer encodes (take_scratch/give_scratch, with the GIL held): a fresh scratch
    # allocates and clears its 64 KB pair memo on the first merge, which is several percent of encoding a
    # few KB.  Bit i of pool_busy: pool[i] is lent out.
    cdef BpeScratch pool[4]
    cdef unsigned int pool_busy
    # True: encode_str raises UnicodeEncodeError at a lone surrogate (tokenizer.json files refuse such
    # text) instead of replacing it with U+FFFD (tiktoken's rule).
    cdef public bint surrogates_raise
    # Added tokens to split ordinary text at first (encode_str_split); NULL: none.  Not part of `state`: the
    # prefix cache, spans and the C API encode with the pretokenizer alone, whose cuts their proofs assume.
    cdef AddedSplit* added
    # The same with the special tokens too (tokenizer.json files: every special allowed, as a chat template's
    # output is encoded; encode_str_split(text, specials=True)); NULL: none.
    cdef AddedSplit* added_all
    # encode_marked's rule for putting the marker in front (MARKER_PREPEND_*), -1 when it has none.
    cdef readonly int marker_prepend
    # encode_marked_split's prepend_scheme "first" (Metaspace): the marker only in front of the text at offset 0
    cdef public bint marked_first_only

    cdef list ids_to_list(self, IdVec* v)
    cdef BpeScratch* take_scratch(self, BpeScratch* own) noexcept
    cdef void give_scratch(self, BpeScratch* sc, BpeScratch* own) noexcept
    cdef IdVec* take_out(self, IdVec* own) noexcept
    cdef bint _prepends(self, const uint8_t* s, Py_ssize_t n) noexcept
    cdef list _encode_marked(self, object text)
    cdef void give_out(self, IdVec* v) noexcept
    cdef _check_kind(self)
    cdef _build_char_self_merges(self)
    cdef bint _cuts_exact(self) except -1
    cdef int encode_into(self, const uint8_t* s, Py_ssize_t n, IdVec* out, BpeScratch* sc) noexcept nogil
    cdef list _encode_str(self, text, const AddedSplit* added)
    cdef list _encode_utf8(self, const uint8_t* s, Py_ssize_t n, const AddedSplit* added)
    cdef const AddedSplit* _specials_split(self, bint specials) except? NULL
    cdef list _encode_marked_split_utf8(self, const uint8_t* s, Py_ssize_t n, bint first_only)
    cdef int _encode_bytes(self, bytes data, IdVec* out, bint split) except -1
    cdef int _encode_many(self, list datas, IdVec* out, int64_t* ends, const AddedSplit* added=*,
                          const Needles* needles=*, uint8_t* found=*) except -1
    cdef int _gather(self, tokens, IdVec* tmp, char** buf, Py_ssize_t* length) except -1
    cdef int _join(self, const uint8_t* s, Py_ssize_t n, list spans, IdVec* out) except -1

# Status-code API (ctok.h): encode ordinary UTF-8 text into a caller buffer; decode ids into bytes.
cdef int capi_encode(const void* encoder, const uint8_t* text, size_t length, uint32_t* out, size_t cap,
                     size_t* n_out) noexcept nogil
cdef int capi_decode(const void* encoder, const uint32_t* ids, size_t n, uint8_t* out, size_t cap,
                     size_t* n_out) noexcept nogil

# text as an exact str (a str subclass's value); TypeError for anything else.
cpdef str exact_str(object text)
# Surrogate pairs joined, lone surrogates replaced by U+FFFD.
cpdef str replace_lone_surrogates(str text)


cdef class PlainRoute:
    # A text -> ids callable that compiled routes (CompiledRoute) call in C rather than through Python: the
    # prefix cache's bound encoders (ctok._prefix.PrefixCache.bind / bind_marked) are ones.
    cdef list call_plain(self, object text)
