"""The native encoder: pretokenizer + BPE over whole segments, with the GIL released.

Contract: `CoreEncoder.encode_ordinary(data)` splits the UTF-8 bytes `data` with its pretokenizer kind
(`ctok._pretok`, PRETOK_WHOLE = one piece) and appends every piece's BPE ids; it knows nothing of special
tokens, normalizers or added tokens, which the Python layer handles before calling it.  Tables are
read-only after construction, so one CoreEncoder serves any number of threads at once.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_FromUnsignedLong
from cpython.ref cimport Py_INCREF
from cpython.object cimport PyObject
from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES
from cpython.pycapsule cimport PyCapsule_New, PyCapsule_GetContext, PyCapsule_SetContext
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int32_t, int64_t
from libc.stdlib cimport malloc, calloc, realloc, free
from libc.string cimport memcpy, memcmp, memset, memmove

from ctok._vocab cimport (Vocab, Tables, Slot, NO_ID, tables_lookup, tables_lookup_hashed, hash_bytes, load_head,
                         load_head_padded, load_tail, bit_at)
from ctok._piece_cache cimport (PieceCache, CacheEntry, cache_get, cache_put, cache_seen, cache_admit, cache_init, cache_free, cache_bytes,
                               cache_prefetch, cache_tables, CACHE_MAX_PIECE)
from ctok._bpe cimport (IdVec, BpeScratch, BpeOptions, BPE_OK, BPE_NOMEM, idvec_free, idvec_reserve, idvec_push, scratch_init,
                        scratch_free, bpe_encode_piece, bpe_merge_piece, utf8_len, HotEntry, HOT_BITS, HOT_MAX_PIECE,
                        HOT_MAX_IDS, scratch_hot, hot_index, hot_put, char_cuts,
                        CHAR_CUTS_BATCH, CUT_LEAD_TOKENS, piece_cut_lead)
from ctok._pretok cimport next_piece_end, next_piece_ends, PRETOK_WHOLE, PRETOK_ENDS_SLACK
from cpython.pycapsule cimport PyCapsule_Destructor

from ctok.errors import UnknownTokenError

# Tests: a 2-byte lead's pieces are cut where fewer tokens than this hold its characters (_bpe.CUT_LEAD_TOKENS).
CUT_LEAD_TOKENS_LIMIT = CUT_LEAD_TOKENS

import os
import sys

# Texts shorter than this many bytes are encoded without releasing the GIL (a release/re-acquire pair
# costs more than encoding a few words).
SHORT_TEXT_BYTES = 2048

# Bytes of memory for each encoder's piece cache (CTOK_PIECE_CACHE_BYTES overrides; 0 turns it off).
DEFAULT_PIECE_CACHE_BYTES = 32 << 20


cdef extern from *:
    """
    #if defined(__linux__)
    #include <sys/mman.h>
    /* n zeroed bytes whose pages are mapped now, by one mmap call, rather than by a fault at each first touch
       during an encode (about 1.3 us per 4 KB page here); never freed.  Small arrays: calloc. */
    static void* ctok_zeroed_populated(size_t n) {
        if (n < (256u << 10)) return calloc(1, n);
    #ifdef MAP_POPULATE
        void* p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    #else
        void* p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    #endif
        return p == MAP_FAILED ? NULL : p;
    }
    #else
    static void* ctok_zeroed_populated(size_t n) { return calloc(1, n); }
    #endif
    """
    void* ctok_zeroed_populated(size_t n) nogil


# One Python int per token id for the whole process, made on first use and kept (every encoder's result lists
# take them with an INCREF instead of an allocation).  Shared because an int is the same object whatever
# vocabulary emitted it: a second encoder (another file, or the same one loaded again) starts with the ints
# and the mapped pages the first one made.  Grown to the largest vocabulary loaded; a replaced array is kept
# (its ints stay referenced, encoders made before the growth go on reading it), so at most twice the largest
# array is held: 8 bytes a token id, plus 32 bytes for each int made.  Read and written with the GIL held.
cdef PyObject** shared_ints = NULL
cdef Py_ssize_t shared_ints_size = 0


cdef PyObject** shared_int_cache(Py_ssize_t n) except NULL:
    global shared_ints, shared_ints_size
    cdef PyObject** bigger
    cdef Py_ssize_t i, size
    if n <= shared_ints_size:
        return shared_ints
    size = n if n > 2 * shared_ints_size else 2 * shared_ints_size
    bigger = <PyObject**>ctok_zeroed_populated(size * sizeof(PyObject*))
    if bigger == NULL:
        raise MemoryError()
    for i in range(shared_ints_size):
        if shared_ints[i] != NULL:
            Py_INCREF_ptr(shared_ints[i])       # the new array holds its own reference; the old one is kept
            bigger[i] = shared_ints[i]
    shared_ints = bigger
    shared_ints_size = size
    return bigger


cdef extern from "_utf8.h":
    const char* ctok_utf8_view(object text, Py_ssize_t* n, char** owned)
    int ctok_utf8_view_cheap(object text, const char** s, Py_ssize_t* n)
    char* ctok_utf8_copy_nogil(PyObject* text, Py_ssize_t* n, int* status) nogil
    ctypedef struct ctok_marker:
        uint8_t bytes[8]
        int len
    size_t ctok_utf8_bound(object text, const ctok_marker* mk)
    Py_ssize_t ctok_utf8_write(PyObject* text, uint8_t* out, const ctok_marker* mk) nogil
    uint8_t* ctok_mark_spaces(const uint8_t* s, Py_ssize_t n, uint8_t* d, const ctok_marker* mk) nogil
    int ctok_str_ready(object text) except -1

cdef extern from "Python.h":
    Py_ssize_t PyUnicode_GET_LENGTH(object s)
    bint PyUnicode_IS_ASCII(object s)
    PyObject* PyErr_Occurred()
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    PyObject* PyList_GET_ITEM(object lst, Py_ssize_t i)
    Py_ssize_t PyLong_AsSsize_t(object o) except? -1
    void Py_INCREF_ptr "Py_INCREF"(PyObject* o)
    Py_ssize_t PyUnicode_Tailmatch(object text, object substr, Py_ssize_t start, Py_ssize_t end,
                                   int direction) except -1
    void Py_DECREF_ptr "Py_DECREF"(PyObject* o)
    PyObject* PyBytes_New_ptr "PyBytes_FromStringAndSize"(const char* v, Py_ssize_t n)
    char* PyBytes_AS_STRING_ptr "PyBytes_AS_STRING"(PyObject* o)
    int _PyBytes_Resize(PyObject** o, Py_ssize_t n)


cdef inline bint marker_at(const EncoderState* st, const uint8_t* s, Py_ssize_t n, Py_ssize_t p) noexcept nogil:
    # Asked twice at each marker of the text (once per word): a fixed-size load and a masked compare where 8
    # bytes can be read, memcmp (a library call) only near the end.
    cdef uint64_t w
    if p < 0 or p + st.marker_len > n:
        return False
    if p + 8 <= n:
        memcpy(&w, s + p, 8)                          # p + 8 <= n
        return (w & st.marker_mask) == st.marker_word
    return memcmp(s + p, st.marker, st.marker_len) == 0


cdef extern from "_find_char.h":
    Py_ssize_t ctok_find_byte(const uint8_t* s, Py_ssize_t p, Py_ssize_t n, uint8_t b) nogil


cdef Py_ssize_t next_marker_word_end(const EncoderState* st, const uint8_t* s, Py_ssize_t n,
                                     Py_ssize_t pos) noexcept nogil:
    # The piece from pos runs to the next marker that follows a non-marker character, or to n.
    cdef Py_ssize_t p = pos + 1
    cdef int ml = st.marker_len
    cdef uint8_t first = st.marker[0]
    while True:
        p = ctok_find_byte(s, p, n, first)                 # p <= n
        if p >= n:
            return n
        if marker_at(st, s, n, p) and not marker_at(st, s, n, p - ml):
            return p
        p += 1


cdef enum:
    SHORT_TEXT = 2048       # keep in step with SHORT_TEXT_BYTES
    MARKED_LOCAL = 8192     # encode_marked converts into a buffer on the stack when this is room enough
    SCRATCH_POOL = 4        # the size of CoreEncoder.pool
    SCRATCH_KEEP_SYMBOLS = 1 << 16      # a pooled scratch with room for more symbols is freed when given back
    LONG_KEEP_IDS = 1 << 20             # CoreEncoder.long_out is freed when given back with room for more (4 MB)
    CHAR_SELF_MAX = 32      # char-level self_merges: tokens up to this many bytes (bounds the load-time work)


cdef extern from *:
    """
    #define ctok_prefetch(p) __builtin_prefetch((p), 0, 3)

    /* The list of the ints of ids[0:n] (see _int_list.h). */
    #include "_int_list.h"
    static PyObject* ctok_ids_list(const uint32_t* ids, Py_ssize_t n, PyObject** cache) {
        return ctok_int_list(NULL, 0, ids, n, NULL, 0, cache);
    }
    """
    void ctok_prefetch(const void* p) nogil
    list ctok_ids_list(const uint32_t* ids, Py_ssize_t n, PyObject** cache)
    int ctok_int_lists(list out, const uint32_t* ids, const int64_t* ends, Py_ssize_t n, PyObject** cache,
                       Py_ssize_t n_cache, uint32_t* counts) except -1


cdef enum:
    # CoreEncoder(marker_prepend=...), exported as MARKER_PREPEND_*: when encode_marked puts the marker in
    # front of the text.
    PREPEND_NEVER = 0           # Metaspace prepend_scheme "never"
    PREPEND_NONEMPTY = 1        # the Prepend normalizer: before any non-empty text, marked or not
    PREPEND_UNMARKED = 2        # Metaspace "always" (and "first", for text holding no added token): unless
                                # the text, spaces replaced, already starts with the marker


cdef enum:
    # Pieces are cut PIPELINE at a time and their token-table slots prefetched before any is looked up:
    # the lookups then wait for memory together instead of one after another.  64 rather than 16: each batch
    # loop's exit is mispredicted once a batch (callgrind, o200k, warm passes of four files: mispredicted
    # branches -8.5%; timed, eight files: first passes 1.02x, warm 1.04x).
    PIPELINE = 64
    # ... but 16 for a span that stops early (the prefix cache's checkpoints, PREFIX_CK_EVERY bytes apart): a
    # span ends at the first batch end past its stop, and a batch of 64 pieces spaced them 300 bytes further.
    SPAN_PIPELINE = 16


cdef int encode_state(const EncoderState* st, const uint8_t* s, Py_ssize_t n, IdVec* out,
                      BpeScratch* sc) noexcept nogil:
    cdef Py_ssize_t end
    if st.pretok_kind == PRETOK_WHOLE:
        return encode_piece_cached(st, s, n, out, sc)
    return encode_state_span(st, s, n, 0, n, out, sc, &end)


cdef inline int encode_with(const EncoderState* st, const AddedSplit* added, const uint8_t* s, Py_ssize_t n,
                            IdVec* out, BpeScratch* sc) noexcept nogil:
    if added != NULL:
        return encode_added(st, added, s, n, out, sc)
    return encode_state(st, s, n, out, sc)


cdef Py_ssize_t matcher_next(const AddedMatcher* m, const AddedSplit* a, const uint8_t* s, Py_ssize_t n,
                             Py_ssize_t i, Py_ssize_t* k_out) noexcept nogil:
    # Leftmost-longest in s[i:n] among m's tokens: scanning left to right and trying, at each byte, the
    # tokens starting with it longest first finds the leftmost match and, there, the longest.  Returns its
    # start, its index in k_out; n when there is none.
    cdef Py_ssize_t k, ln
    cdef uint8_t b, c
    while i < n:
        b = s[i]                                              # i < n
        if m.start[b] == m.start[b + 1]:                      # b + 1 <= 256: start has 257 entries
            i += 1
            continue
        c = s[i + 1] if i + 1 < n else 0
        if i + 1 < n and (m.second[b][c >> 3] >> (c & 7)) & 1:
            for k in range(m.start[b], m.start[b + 1]):      # longest first (the one-byte token last)
                ln = a.off[k + 1] - a.off[k]
                if ln <= n - i and memcmp(a.blob + a.off[k], s + i, ln) == 0:   # s[i:i + ln] inside s
                    k_out[0] = k
                    return i
        elif m.single[b]:
            k_out[0] = m.start[b + 1] - 1                     # the one-byte token sorts last among b's
            return i
        i += 1
    return n


cdef Py_ssize_t added_next(const AddedSplit* a, const uint8_t* s, Py_ssize_t n, Py_ssize_t i,
                           Py_ssize_t* k_out, AddedScan* scan) noexcept nogil:
    # HF's two passes in one scan: the next first-pass token from i, then the first second-pass token that
    # ends by its start.  The first-pass token stays the next one until the scan passes it: none starts between
    # the last one's end and it, so none starts between any later i and it (scan keeps it: looking for it again
    # after each second-pass token would cost the whole gap each time).
    cdef Py_ssize_t j, k2 = 0
    if a.n_raw == a.n:
        return matcher_next(&a.raw, a, s, n, i, k_out)
    if scan.raw_at < i:
        scan.raw_at = matcher_next(&a.raw, a, s, n, i, &scan.raw_k) if a.n_raw > 0 else n
    j = matcher_next(&a.normalized, a, s, scan.raw_at, i, &k2)     # matches inside s[i:raw_at]
    if j < scan.raw_at:
        k_out[0] = k2
        return j
    k_out[0] = scan.raw_k
    return scan.raw_at


cdef int encode_split(const EncoderState* st, const AddedSplit* a, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos,
                      uint8_t* buf, int prepend, bint first_only, IdVec* out, IdVec* ck, BpeScratch* sc) noexcept nogil:
    # HF's added-token split of s[0:n] (added_next) from pos (0, or the end of an added token: a text between
    # two starts there), each token found appended as its id and each text between two encoded as a text of its
    # own; empty ones encode to nothing, as HF drops empty splits.  buf NULL: the text as it is (encode_state).
    # buf: a SentencePiece-style text, which HF normalizes or pre-tokenizes as a split of its own: its spaces
    # written as the marker, the marker put in front by the rule (Prepend: any non-empty text; Metaspace: unless
    # it starts with the marker, with prepend_scheme "first" (first_only) only for the text at offset 0), then
    # the marker-words encoder; buf has room for marked_room(st, n - pos) bytes.  ck (unless NULL): a checkpoint
    # after each added token, the only places a prefix cache resumes a marked split.
    cdef Py_ssize_t i, seg = pos, k = 0, m
    cdef AddedScan scan
    cdef ctok_marker mk
    cdef int ml = st.marker_len, rc
    cdef bint front
    if buf != NULL:
        memset(&mk, 0, sizeof(ctok_marker))
        memcpy(mk.bytes, st.marker, ml)                      # ml <= 8 (checked at construction)
        mk.len = ml
    scan.raw_at = -1
    while True:
        i = added_next(a, s, n, seg, &k, &scan)
        if i > seg and buf == NULL:
            rc = encode_state(st, s + seg, i - seg, out, sc)
            if rc != BPE_OK:
                return rc
        elif i > seg:
            # buf[0:ml] kept for the marker in front; the gap's bytes after it (each at most ml bytes)
            m = ctok_mark_spaces(s + seg, i - seg, buf + ml, &mk) - (buf + ml)
            if prepend == PREPEND_NONEMPTY:
                front = True
            elif prepend == PREPEND_UNMARKED:
                front = (not first_only or seg == 0) and (m < ml or memcmp(buf + ml, st.marker, ml) != 0)
            else:
                front = False
            if front:
                memcpy(buf, st.marker, ml)
                rc = encode_state(st, buf, m + ml, out, sc)
            else:
                rc = encode_state(st, buf + ml, m, out, sc)
            if rc != BPE_OK:
                return rc
        if i >= n:
            return BPE_OK
        rc = idvec_push(out, a.ids[k])                        # k < a.n: set by added_next
        if rc != BPE_OK:
            return rc
        seg = i + (a.off[k + 1] - a.off[k])
        if ck != NULL and seg < n and (idvec_push(ck, <uint32_t>seg) != BPE_OK
                                       or idvec_push(ck, <uint32_t>out.size) != BPE_OK):
            return BPE_NOMEM


cdef int encode_added(const EncoderState* st, const AddedSplit* a, const uint8_t* s, Py_ssize_t n, IdVec* out,
                      BpeScratch* sc) noexcept nogil:
    # encode_split of a text as it is, from its start, no checkpoints.
    return encode_split(st, a, s, n, 0, NULL, 0, False, out, NULL, sc)


cdef extern from "_head_mask.h":
    const uint64_t ctok_head_mask[9]

cdef inline void hot_key(const uint8_t* p, Py_ssize_t ln, uint64_t* k0, uint64_t* k1) noexcept nogil:
    # The key of the piece p[0:ln] (1 <= ln <= HOT_MAX_PIECE, p[0:16] readable) in BpeScratch.hot: its bytes
    # zero padded, two fixed loads and masks (no branch on the length, which is data), the length in k1's top
    # byte (bytes 15 and on are never the piece's).
    cdef uint64_t w0, w1
    memcpy(&w0, p, 8)
    memcpy(&w1, p + 8, 8)
    k0[0] = w0 & ctok_head_mask[ln if ln < 8 else 8]                  # index 1..8
    k1[0] = (w1 & ctok_head_mask[ln - 8 if ln > 8 else 0]) | (<uint64_t>ln << 56)   # index 0..7


cdef inline uint32_t slot_token(const Slot* slots, const uint64_t* tails, uint64_t slot_mask, const uint8_t* p,
                               Py_ssize_t ln, uint64_t head, uint64_t h, bint whole, const uint8_t* self_merges,
                               bint* absent) noexcept nogil:
    # The token the piece p[0:ln] is (ln <= 16; head and h: its load_head and hash_bytes), found at its first
    # slot, when the piece encodes to it alone (whole: the file's rule; else self_merges); else NO_ID, and
    # absent[0] True when that slot is free, which proves the piece is no token (probing would stop there): most
    # pieces that are no token (the piece cache's hits) need no second lookup.  The tables are the caller's
    # locals: stores into the output could alias their fields as far as the compiler knows (no strict aliasing).
    cdef uint64_t idx = h & slot_mask
    cdef const Slot* e = &slots[idx]                                   # masked to the table size
    # A free slot has len 0xFFFFFFFF, never equal to ln.  Past 8 bytes the piece's last 8 (inside it: ln > 8)
    # must be the slot's tail.
    if e.len == ln and e.head == head and (ln <= 8 or tails[idx] == load_tail(p, ln)) and (
            whole or (self_merges != NULL and self_merges[e.id])):
        return e.id
    absent[0] = e.id == NO_ID
    return NO_ID


cdef inline int piece_merged(const EncoderState* st, const uint8_t* p, Py_ssize_t ln, uint64_t head, uint64_t h,
                             Py_ssize_t max_len, IdVec* out, BpeScratch* sc, HotEntry* he, uint64_t k0,
                             uint64_t k1, bint absent) noexcept nogil:
    # A piece that is no token of its own (slot_token), appended to out: the piece cache or the merge, then put
    # in its entry he of the table of recent pieces (keyed k0, k1), when not NULL.
    cdef Py_ssize_t before = out.size, got
    cdef int rc
    if ln <= max_len:
        rc = encode_piece_hashed(st, p, ln, head, h, out, sc, absent)
    else:
        rc = encode_long_piece(st, p, ln, out, sc)                     # longer than any token
    if rc != BPE_OK:
        return rc
    got = out.size - before
    if he != NULL and 1 <= got <= HOT_MAX_IDS:
        hot_put(he, k0, k1, out.data + before, got)
    return BPE_OK


cdef enum:
    # encode_state_span takes a batch in one pass when the table of recent pieces answered all but at most
    # 1/HOT_ONE_PASS of the pieces of the batch before (sc.hot_misses).  In one pass a miss's token-table slot
    # is not prefetched: with 1/8, first passes over English lost 7-12% (Botchan after Dracula: a pass's misses
    # are new pieces, their slots not cached); with 1/16 they moved within the noise when run alone, and warm
    # passes kept most of their gain.  Beside the peers' tables (bench/compare.py) code's first pass still read
    # 0.87x (three runs) for 2% fewer instructions: the misses' slots wait on memory there.
    HOT_ONE_PASS = 16


cdef int encode_state_span(const EncoderState* st, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos,
                           Py_ssize_t stop, IdVec* out, BpeScratch* sc, Py_ssize_t* end) noexcept nogil:
    # The pieces of s[0:n] from pos on, until the first piece boundary at or after stop (a few pieces past
    # it: they are cut a batch at a time, SPAN_PIPELINE when stop < n), which goes to end.  Not for PRETOK_WHOLE.
    # With the scratch's table of recent pieces (BpeScratch.hot), a piece of up to HOT_MAX_PIECE bytes met
    # lately, token or not, is answered by one probe of a table that stays in the second-level cache; the
    # others take the token table (slot_token) and, if no token, the piece cache or the merge (piece_merged),
    # and are then put in it.  Why: the long way branches on the piece's length (hashing, the tail check) and on
    # whether it is a token, and those branches mispredicted (callgrind, 1,000 chat-sized slices of code,
    # warm: 199K mispredicted branches against fastokens' 97K for as many instructions; 138K with the table).
    # Two ways through a batch:
    # - one pass, when the table answered nearly every piece of the batch before (warm text): each piece is
    #   probed and its ids written at once, a miss going the long way on the spot;
    # - two passes otherwise (text not seen before): every piece probed first, and the token-table slots and
    #   piece-cache entries of those it misses prefetched, so that their lookups wait for memory together.
    # The one pass costs about 30 instructions a piece less (no keys kept between the passes, no second probe)
    # and one mispredicted branch per miss instead of two.
    cdef Py_ssize_t k, j, ln
    cdef Py_ssize_t bounds[PIPELINE + 1 + PRETOK_ENDS_SLACK]        # next_piece_ends' slack past the batch
    cdef uint64_t heads[PIPELINE]
    cdef uint64_t hashes[PIPELINE]
    cdef int rc
    cdef int kind = st.pretok_kind
    cdef const Tables* t = st.tables
    cdef Py_ssize_t max_len = t.max_token_len if t.max_token_len > CACHE_MAX_PIECE else CACHE_MAX_PIECE
    cdef Py_ssize_t batch = PIPELINE if stop >= n else SPAN_PIPELINE
    # Locals, not fields: stores into out.data could alias the tables as far as the compiler knows, and
    # it would load every field again after each one.
    cdef const Slot* slots = t.slots
    cdef const uint64_t* tails = t.slot_tails
    cdef uint64_t slot_mask = t.slot_mask
    cdef bint whole = st.opt.whole_piece_first
    cdef const uint8_t* self_merges = st.self_merges
    cdef bint absent
    cdef uint32_t tid
    cdef uint32_t* data
    cdef Py_ssize_t size, misses
    # The scratch's table of recent pieces, when its encoder made it for this state (CoreEncoder.take_scratch).
    cdef HotEntry* hot = sc.hot if sc.hot_owner == <const void*>st else NULL
    cdef HotEntry* he
    cdef uint64_t k0s[PIPELINE]
    cdef uint64_t k1s[PIPELINE]
    cdef uint32_t hidx[PIPELINE]
    cdef uint64_t hits, keyed, k0, k1, head, h
    cdef const uint8_t* p
    end[0] = pos
    while pos < stop:
        bounds[0] = pos
        if kind == PRETOK_MARKER_WORDS:
            k = 0
            while k < batch and pos < n:
                pos = next_marker_word_end(st, s, n, pos)
                k += 1                                                 # k <= batch <= PIPELINE: bounds has PIPELINE + 1
                bounds[k] = pos
        else:
            k = next_piece_ends(kind, s, n, pos, &bounds[1], batch)      # 1 <= k <= batch <= PIPELINE
            pos = bounds[k]
        # Room for HOT_MAX_IDS ids per piece of the batch: the table's answers copy that many.
        if out.size + HOT_MAX_IDS * k > out.cap and idvec_reserve(out, HOT_MAX_IDS * k) != BPE_OK:
            return BPE_NOMEM
        data = out.data
        size = out.size
        if hot != NULL and sc.hot_misses * HOT_ONE_PASS <= k:
            misses = 0
            for j in range(k):
                ln = bounds[j + 1] - bounds[j]
                p = s + bounds[j]
                he = NULL
                if ln <= HOT_MAX_PIECE and bounds[j] + 16 <= n:
                    hot_key(p, ln, &k0, &k1)                              # bounds[j] + 16 <= n
                    he = &hot[hot_index(k0, k1)]                          # < 1 << HOT_BITS
                    if he.k0 == k0 and he.k1 == k1:
                        # All HOT_MAX_IDS ids, a fixed copy (room kept for as many per piece to come), n counted.
                        data[size] = he.ids[0]
                        data[size + 1] = he.ids[1]
                        data[size + 2] = he.ids[2]
                        size += he.n
                        continue
                misses += 1
                head = 0
                h = 0
                if ln <= max_len:
                    head = load_head_padded(p, ln) if bounds[j] + 8 <= n else load_head(p, ln)
                    h = hash_bytes(p, ln, head)
                absent = False
                if ln <= 16:
                    tid = slot_token(slots, tails, slot_mask, p, ln, head, h, whole, self_merges, &absent)
                    if tid != NO_ID:
                        data[size] = tid                               # room kept for each piece to come
                        size += 1
                        if he != NULL:
                            hot_put(he, k0, k1, &tid, 1)
                        continue
                out.size = size
                rc = piece_merged(st, p, ln, head, h, max_len, out, sc, he, k0, k1, absent)
                if rc != BPE_OK:
                    return rc
                # A piece of more than HOT_MAX_IDS ids took room kept for the pieces after it: keep it again.
                if out.size - size > HOT_MAX_IDS and out.size + HOT_MAX_IDS * (k - j) > out.cap and (
                        idvec_reserve(out, HOT_MAX_IDS * (k - j)) != BPE_OK):
                    return BPE_NOMEM
                data = out.data                                        # the calls above may have moved it
                size = out.size
            out.size = size
            sc.hot_misses = misses
            end[0] = pos
            continue
        # Bit j of keyed: piece j has a key (k0s, k1s, its entry hidx); of hits: its entry held it.
        hits = 0
        keyed = 0
        for j in range(k):
            ln = bounds[j + 1] - bounds[j]
            if hot != NULL and ln <= HOT_MAX_PIECE and bounds[j] + 16 <= n:
                hot_key(s + bounds[j], ln, &k0, &k1)                  # bounds[j] + 16 <= n
                h = hot_index(k0, k1)                                 # < 1 << HOT_BITS
                k0s[j] = k0
                k1s[j] = k1
                hidx[j] = <uint32_t>h
                keyed |= (<uint64_t>1) << j                           # j < PIPELINE = 64
                he = &hot[h]
                if he.k0 == k0 and he.k1 == k1:
                    hits |= (<uint64_t>1) << j
                    continue
            if ln <= max_len:
                heads[j] = (load_head_padded(s + bounds[j], ln) if bounds[j] + 8 <= n
                            else load_head(s + bounds[j], ln))
                hashes[j] = hash_bytes(s + bounds[j], ln, heads[j])
                ctok_prefetch(&slots[hashes[j] & slot_mask])          # masked to the table size
                if 2 <= ln <= CACHE_MAX_PIECE and cache_seen(&st.cache, hashes[j]):
                    cache_prefetch(&st.cache, hashes[j])               # where it is if it is no token and met before
        misses = 0
        for j in range(k):
            ln = bounds[j + 1] - bounds[j]
            he = NULL
            if (keyed >> j) & 1:
                he = &hot[hidx[j]]                                   # hidx[j] < 1 << HOT_BITS
                # Checked again when it was a hit: a piece of this batch put since may have taken the entry.  The
                # copy and the long way below are the one pass's, written out again: through a shared inline
                # function they cost 0.3-2.4% more instructions (GCC then kept encode_piece_hashed out of line).
                if (hits >> j) & 1:
                    if he.k0 == k0s[j] and he.k1 == k1s[j]:
                        data[size] = he.ids[0]
                        data[size + 1] = he.ids[1]
                        data[size + 2] = he.ids[2]
                        size += he.n
                        continue
                    heads[j] = load_head_padded(s + bounds[j], ln)   # keyed: bounds[j] + 16 <= n
                    hashes[j] = hash_bytes(s + bounds[j], ln, heads[j])
            misses += 1
            absent = False
            if ln <= 16:
                tid = slot_token(slots, tails, slot_mask, s + bounds[j], ln, heads[j], hashes[j], whole, self_merges,
                                 &absent)
                if tid != NO_ID:
                    data[size] = tid                                   # room kept for each piece to come
                    size += 1
                    if he != NULL:
                        hot_put(he, k0s[j], k1s[j], &tid, 1)
                    continue
            out.size = size
            rc = piece_merged(st, s + bounds[j], ln, heads[j], hashes[j], max_len, out, sc, he, k0s[j], k1s[j], absent)
            if rc != BPE_OK:
                return rc
            if out.size - size > HOT_MAX_IDS and out.size + HOT_MAX_IDS * (k - j) > out.cap and (
                    idvec_reserve(out, HOT_MAX_IDS * (k - j)) != BPE_OK):
                return BPE_NOMEM
            data = out.data
            size = out.size
        out.size = size
        sc.hot_misses = misses
        end[0] = pos
    return BPE_OK


cdef int encode_piece_hashed(const EncoderState* st, const uint8_t* p, Py_ssize_t n, uint64_t head, uint64_t h,
                             IdVec* out, BpeScratch* sc, bint absent=False) noexcept nogil:
    # encode_piece_cached for a piece whose hash_bytes the caller computed (the piece cache keys on it too).
    # absent: the caller knows the piece is no token.
    cdef uint32_t tid
    cdef bint probed = False
    if not absent and (st.opt.whole_piece_first or st.self_merges != NULL):
        # A piece of more than 16 bytes is seldom a token: the piece cache first, whose hit spares the token
        # table's probe (a cache miss in warm text: the table of recent pieces takes pieces of up to 15 bytes
        # only, and Russian has 12% of its pieces above that, Chinese 40%).  Exact where pieces are never cut
        # (not parts_cached): every entry is then some piece's own encoding (encode_merged stores pieces only,
        # after this check), which this check would give again.
        if n > 16 and n <= CACHE_MAX_PIECE and not st.parts_cached and st.cache.table != NULL and cache_seen(
                &st.cache, h):
            if cache_get(&st.cache, p, n, h | 1, out):
                return BPE_OK
            probed = True
        tid = tables_lookup_hashed(st.tables, p, n, head, h)
        if tid != NO_ID and (st.opt.whole_piece_first or st.self_merges[tid]):
            return idvec_push(out, tid)                  # (without the rule: merging its bytes would rebuild it)
    return encode_merged(st, p, n, h, out, sc, True, probed)


cdef int encode_merged(const EncoderState* st, const uint8_t* p, Py_ssize_t n, uint64_t h, IdVec* out,
                       BpeScratch* sc, bint cut, bint probed=False) noexcept nogil:
    # BPE of p[0:n] through the piece cache (h: its hash_bytes).  cut: a piece, whose parts (encode_parts)
    # are tried on a miss; the whole piece's ids are then stored, so that a piece seen again costs one
    # lookup however many parts it has.  probed: the caller asked the cache already, and it missed.  A piece
    # met for the first time (cache_admit) is merged without a lookup, and not stored.
    cdef Py_ssize_t before, c
    cdef int rc
    cdef bint admitted
    if st.cache.table == NULL or n < 2 or n > CACHE_MAX_PIECE:      # NULL only when off (growth swaps one table for another)
        return encode_long_piece(st, p, n, out, sc) if cut else bpe_merge_piece(st.tables, &st.opt, p, n, out, sc)
    h |= 1                                                # never 0, the empty-entry mark
    admitted = probed or cache_admit(<PieceCache*>&st.cache, h)
    if admitted and not probed and cache_get(&st.cache, p, n, h, out):
        return BPE_OK
    before = out.size
    c = next_cut(st, p, 0, n) if cut and st.cut_bits != NULL else n
    if c < n:
        rc = encode_parts(st, p, n, c, out, sc)
    else:
        rc = bpe_merge_piece(st.tables, &st.opt, p, n, out, sc)
    if rc == BPE_OK and admitted:
        cache_put(<PieceCache*>&st.cache, p, n, h, out.data + before, out.size - before)
    return rc


cdef inline bint has_ascii(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    # Some byte of p[0:n] (n >= 1) is below 0x80.  Overlapping fixed-size loads, all inside p[0:n].
    cdef uint64_t a, b, acc
    cdef uint32_t a4, b4
    cdef Py_ssize_t j = 0
    if n >= 8:
        memcpy(&a, p + n - 8, 8)
        acc = ~a
        while j < n - 8:
            memcpy(&b, p + j, 8)                                      # j + 8 < n
            acc |= ~b
            j += 8
        return (acc & 0x8080808080808080ULL) != 0
    if n >= 4:
        memcpy(&a4, p, 4)
        memcpy(&b4, p + n - 4, 4)
        return ((~a4 | ~b4) & 0x80808080u) != 0
    return ((~(<uint32_t>p[0]) | ~(<uint32_t>p[n >> 1]) | ~(<uint32_t>p[n - 1])) & 0x80u) != 0   # n <= 3: all three


cdef Py_ssize_t next_cut(const EncoderState* st, const uint8_t* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    # The first unit boundary after i (itself one, 0 <= i < n) at which p[0:n] can be cut, or n: no token
    # holds the byte before it followed by the byte after it, so no merge joins across it (cut_bits).
    # Units are what the first symbols are made of.  Char-level: characters as symbolize reads them (the
    # length its lead byte announces), so that each part starts its symbols where the whole piece does.
    # Byte-level: bytes.  Never before a continuation byte, so that character-wise first symbols
    # (symbolize_chars) meet the same characters in the parts as in the whole.
    # Only next to an ASCII byte: between two multi-byte characters (CJK) the cuts came every character or
    # two, and each part's end was a mispredicted branch (Mistral, Chinese: +52%) for little to merge less.
    cdef bint chars = st.opt.char_level
    # Most pieces have no cut; those of other scripts (Arabic, Cyrillic, CJK), no ASCII byte either: ruled
    # out first (at the piece's start only: encode_parts' later calls go on from the last cut).
    if i == 0 and not has_ascii(p, n):
        return n
    i += utf8_len(p[i]) if chars else 1                               # i < n
    while i < n:
        if ((p[i - 1] & p[i]) < 0x80 and (p[i] & 0xC0) != 0x80          # 1 <= i < n
                and not bit_at(st.cut_bits, (<uint32_t>p[i - 1] << 8) | p[i])):   # < 65,536 bits: 8 KB
            return i
        i += utf8_len(p[i]) if chars else 1
    return n


cdef int encode_parts(const EncoderState* st, const uint8_t* p, Py_ssize_t n, Py_ssize_t c, IdVec* out,
                      BpeScratch* sc) noexcept nogil:
    # BPE of a piece that is no token, c its first cut (0 < c < n): no merge crosses a cut, so BPE runs on
    # each part alone and gives the same merges in each (the merges of one part never depend on another's
    # state).  A part is no piece: a part equal to a token is that token only where BPE rebuilds it.
    cdef Py_ssize_t a = 0
    cdef int rc
    while True:
        rc = encode_part(st, p + a, c - a, out, sc)
        if rc != BPE_OK or c >= n:
            return rc
        a = c
        c = next_cut(st, p, a, n)


cdef int encode_part(const EncoderState* st, const uint8_t* p, Py_ssize_t n, IdVec* out,
                     BpeScratch* sc) noexcept nogil:
    cdef uint64_t head, h
    cdef uint32_t tid
    if n > CACHE_MAX_PIECE:
        return bpe_merge_piece(st.tables, &st.opt, p, n, out, sc)
    head = load_head(p, n)
    h = hash_bytes(p, n, head)
    if st.self_merges != NULL and n <= st.tables.max_token_len:
        tid = tables_lookup_hashed(st.tables, p, n, head, h)
        if tid != NO_ID and st.self_merges[tid]:
            return idvec_push(out, tid)
    return encode_merged(st, p, n, h, out, sc, False)


cdef int encode_long_piece(const EncoderState* st, const uint8_t* p, Py_ssize_t n, IdVec* out,
                           BpeScratch* sc) noexcept nogil:
    # A piece longer than any token (so no token): its parts if it has cuts, else the merge.
    cdef Py_ssize_t c
    if st.cut_bits != NULL:
        c = next_cut(st, p, 0, n)
        if c < n:
            return encode_parts(st, p, n, c, out, sc)
    return bpe_merge_piece(st.tables, &st.opt, p, n, out, sc)


cdef int encode_piece_cached(const EncoderState* st, const uint8_t* p, Py_ssize_t n, IdVec* out,
                             BpeScratch* sc) noexcept nogil:
    # Whole-token pieces are answered by the vocabulary; other short pieces go through the piece cache.
    cdef uint64_t head
    if n <= 0:
        return BPE_OK
    if n > st.tables.max_token_len and n > CACHE_MAX_PIECE:
        return encode_long_piece(st, p, n, out, sc)
    head = load_head(p, n)
    return encode_piece_hashed(st, p, n, head, hash_bytes(p, n, head), out, sc)


cdef void added_free(AddedSplit* a) noexcept:
    if a != NULL:
        free(a.blob)
        free(a.off)
        free(a.ids)
        free(a)


cdef enum:
    # Piece boundaries a Span remembers from its start: the previous span must meet its parse among them.
    SPAN_RECORD = 1024


cdef class Span:
    """One part of a long text encoded on its own thread (CoreEncoder.encode_span / join_spans).

    Why it is exact: the pretokenizer decides the piece starting at a position from the bytes at and after
    it (and the text's length) only (see _prefix's proof, which rests on the same property).  So two parses
    of one text that share a piece boundary b agree from b on.  A span starts its parse at an arbitrary
    character `start`; the span before it, whose parse is the true one, goes on past `start` until one of
    its boundaries is one this span crossed: from there this span's ids are the true ids."""
    cdef IdVec ids
    cdef readonly Py_ssize_t start
    cdef readonly Py_ssize_t end            # the piece boundary where this span stopped
    cdef Py_ssize_t text_len                # len(data) it was made from
    cdef object owner                       # the CoreEncoder that made it
    cdef Py_ssize_t n_rec
    cdef Py_ssize_t rec_pos[SPAN_RECORD]    # the first boundaries crossed, from start on, increasing
    cdef Py_ssize_t rec_ids[SPAN_RECORD]    # ids.size at each of them

    def __cinit__(self):
        self.ids.data = NULL; self.ids.size = 0; self.ids.cap = 0
        self.n_rec = 0

    def __dealloc__(self):
        idvec_free(&self.ids)

    def __len__(self):
        return self.ids.size


cdef class IdBuffer:
    """The token ids (native uint32) that encode_many_flat wrote, handed on in the buffer they were encoded into:
    a writable buffer (format "I") that numpy.frombuffer views.  Why not a bytearray copy: its allocation, zero fill
    and copy ran with the GIL held on each batch thread, and its fresh pages cost faults.  Not shrunk to fit either:
    the realloc down made the next batch's buffer fault its pages in again (page faults of a 1-thread loop over
    5,000 texts 48K -> 87K); the unused tail of the doubling (at most as much again) stays with the array."""
    cdef IdVec ids
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __cinit__(self):
        self.ids.data = NULL; self.ids.size = 0; self.ids.cap = 0

    def __dealloc__(self):
        idvec_free(&self.ids)

    def __len__(self):
        return self.ids.size * sizeof(uint32_t)      # in bytes, as the bytearray it replaces

    def __getbuffer__(self, Py_buffer* view, int flags):
        # The ids never change once encode_many_flat has returned the buffer, so every view sees the same shape.
        self.shape[0] = self.ids.size
        self.strides[0] = sizeof(uint32_t)
        view.buf = <void*>self.ids.data if self.ids.data != NULL else <void*>self.strides    # not read: length 0
        view.obj = self
        view.len = self.ids.size * sizeof(uint32_t)
        view.readonly = 0
        view.itemsize = sizeof(uint32_t)
        view.format = NULL
        if flags & PyBUF_FORMAT:
            view.format = b"I"
        view.ndim = 1
        view.shape = self.shape if (flags & PyBUF_ND) else NULL
        view.strides = self.strides if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer* view):
        pass


def copy_ids(uint32_t[::1] out, list parts, list starts):
    """out[starts[i]:starts[i] + len(parts[i])] = parts[i] for each IdBuffer of parts, with the GIL released:
    encode_batch_flat's threads each copy their share of the chunks into the one output array."""
    cdef Py_ssize_t i, n = len(parts), k, start
    cdef IdBuffer b
    cdef uint32_t** src = <uint32_t**>malloc((n + 1) * sizeof(uint32_t*))
    cdef Py_ssize_t* size = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t* at = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
    try:
        if src == NULL or size == NULL or at == NULL:
            raise MemoryError()
        if len(starts) != n:
            raise ValueError("copy_ids: a start per part")
        for i in range(n):
            b = <IdBuffer?>parts[i]
            start = starts[i]
            if start < 0 or start > out.shape[0] or b.ids.size > out.shape[0] - start:
                raise ValueError("copy_ids: a part past the end of out")
            src[i], size[i], at[i] = b.ids.data, b.ids.size, start
        with nogil:
            for i in range(n):
                if size[i]:
                    memcpy(&out[at[i]], src[i], size[i] * sizeof(uint32_t))   # at[i] + size[i] <= len(out)
    finally:
        free(src); free(size); free(at)


def chunk_ends(list datas, Py_ssize_t threads):
    """(ends, longest) for a batch on `threads` threads: the end index of each chunk Encoding._chunks cuts
    `datas` into, by length (characters of a str, bytes of bytes): each chunk closed by the first item whose end
    reaches a 1/(2 threads) share of what is left, at least 1/(32 threads) of the whole, and at least one item;
    and the length of the longest item.  One pass in C: len() of each item from Python took 0.5 ms of a
    5,000-text batch, all of it on the calling thread before the pool starts."""
    cdef Py_ssize_t count = len(datas), i, j, lo, hi, longest = 0
    cdef int64_t total = 0, done = 0, floor, target, ln
    cdef int64_t* ends
    cdef list out = []
    if threads < 1:
        raise ValueError("chunk_ends: threads >= 1")
    ends = <int64_t*>malloc((count + 1) * sizeof(int64_t))
    if ends == NULL:
        raise MemoryError()
    try:
        for i in range(count):
            d = datas[i]
            ln = PyUnicode_GET_LENGTH(d) if type(d) is str else len(d)
            longest = ln if ln > longest else longest
            total += ln
            ends[i] = total                             # i < count
        floor = total // (32 * threads)
        floor = floor if floor > 1 else 1
        i = 0
        while i < count:
            target = (total - done) // (2 * threads)
            target = done + (target if target > floor else floor)
            lo, hi = i, count                           # the first j in [i, count) with ends[j] >= target
            while lo < hi:
                j = (lo + hi) // 2
                if ends[j] < target:                    # i <= j < count
                    lo = j + 1
                else:
                    hi = j
            j = lo + 1 if lo + 1 < count else count
            out.append(j)
            done = ends[j - 1]                          # i < j <= count
            i = j
        return out, longest
    finally:
        free(ends)


cdef enum:
    # encode_many gives ctok_int_lists id counts (its GIL-free way) from this many ids on: below, its two GIL
    # releases and the count cost more than they let other threads do.
    MANY_LISTS_MIN_IDS = 4096


cdef uint32_t* scratch_id_counts(BpeScratch* sc, Py_ssize_t n) except NULL:
    # The scratch's id counts (BpeScratch.id_counts), n zeros at least.
    if sc.id_counts_size < n:
        free(sc.id_counts)
        sc.id_counts_size = 0
        sc.id_counts = <uint32_t*>calloc(n, sizeof(uint32_t))
        if sc.id_counts == NULL:
            raise MemoryError()
        sc.id_counts_size = n
    return sc.id_counts


cdef list _found_in(const uint8_t* found, Py_ssize_t n):
    # The indices i < n with found[i] set: the texts of a batch in which its threads found one of a TokenScan's
    # needles, for the caller to search (with the GIL, as TokenScan.holding_indices' texts are).
    return [i for i in range(n) if found[i]]


cdef bint span_kind_ok(int kind) noexcept nogil:
    # PRETOK_WHOLE has one piece; PRETOK_MARKER_WORDS looks back before a piece's start.
    return kind != PRETOK_WHOLE and kind != PRETOK_MARKER_WORDS


cdef object marked_start(CoreEncoder enc, object text, ctok_marker* mk, str caller):
    # What encode_marked and marked_bytes do first: the rule checked, `text` as an exact str (returned; None
    # when empty, which no rule marks), mk filled with the encoder's marker.
    if enc.marker_prepend < 0:
        raise ValueError(f"{caller}: this encoder has no marker_prepend rule")
    if type(text) is not str:
        text = exact_str(text)
    if PyUnicode_GET_LENGTH(text) == 0:
        return None
    memset(mk, 0, sizeof(ctok_marker))
    memcpy(mk.bytes, enc.state.marker, enc.state.marker_len)     # <= 8 bytes (checked at construction)
    mk.len = enc.state.marker_len
    return text


cdef class CoreEncoder:
    """Encoder tables and options for one vocabulary (see module docstring).

    CoreEncoder(token_bytes, merges=None, *, special_bytes=None, pretok_kind=0, char_level=False,
                byte_fallback=False, unk_id=-1, fuse_unk=False, ignore_merges=None)
    ignore_merges: a piece that is itself a token is emitted whole; default True for tiktoken
    semantics (merges=None), False for merge lists (HF), where the file's `ignore_merges` decides.
    """

    def __cinit__(self):
        cdef int i
        self.int_cache = NULL
        self.own_self_merges = NULL
        self.state.self_merges = NULL
        self.state.cache.table = NULL
        self.short_out.data = NULL; self.short_out.size = 0; self.short_out.cap = 0
        scratch_init(&self.short_scratch)
        self.short_busy = False
        self.long_out.data = NULL; self.long_out.size = 0; self.long_out.cap = 0
        self.long_busy = False
        self.marker_prepend = -1
        for i in range(SCRATCH_POOL):
            scratch_init(&self.pool[i])
        self.pool_busy = 0
        self.added = NULL
        self.added_all = NULL

    def __dealloc__(self):
        cdef Py_ssize_t i
        added_free(self.added)
        added_free(self.added_all)
        cache_free(&self.state.cache)
        free(self.own_self_merges)
        idvec_free(&self.short_out)
        idvec_free(&self.long_out)
        scratch_free(&self.short_scratch)
        for i in range(SCRATCH_POOL):
            scratch_free(&self.pool[i])

    cdef BpeScratch* take_scratch(self, BpeScratch* own) noexcept:
        # A free scratch of the pool, or `own` (a caller's uninitialised struct, made empty here) when all
        # are lent: concurrent callers beyond the pool's size pay for a fresh one.  GIL held.
        cdef int i
        for i in range(SCRATCH_POOL):
            if not (self.pool_busy >> i) & 1:
                self.pool_busy |= 1u << i
                # Only pooled scratches get a table of recent pieces: it pays off over many pieces and calls.
                # Without one (no memory), encode_state_span reads every piece the long way.
                scratch_hot(&self.pool[i], &self.state)
                return &self.pool[i]
        scratch_init(own)
        return own

    cdef void give_scratch(self, BpeScratch* sc, BpeScratch* own) noexcept:
        # Back to the pool (or, for `own`, freed).  A scratch grown by a huge piece is freed rather than
        # kept: its buffers grow with the longest piece merged.  GIL held.
        cdef int i
        for i in range(SCRATCH_POOL):
            if sc == &self.pool[i]:
                if sc.cap > SCRATCH_KEEP_SYMBOLS or sc.tree_cap > SCRATCH_KEEP_SYMBOLS:
                    scratch_free(sc)
                self.pool_busy &= ~(1u << i)
                return
        scratch_free(sc)                            # own

    cdef IdVec* take_out(self, IdVec* own) noexcept:
        # An empty ids buffer for a long encode: the kept one, or `own` (a caller's uninitialised struct, made
        # empty here) while that is lent.  GIL held.
        if not self.long_busy:
            self.long_busy = True
            self.long_out.size = 0
            return &self.long_out
        own.data = NULL; own.size = 0; own.cap = 0
        return own

    cdef void give_out(self, IdVec* v) noexcept:
        # Back from take_out.  GIL held.
        if v == &self.long_out:
            if v.cap > LONG_KEEP_IDS:
                idvec_free(v)
            self.long_busy = False
        else:
            idvec_free(v)

    cdef list ids_to_list(self, IdVec* v):
        if self.int_cache == NULL:
            self.int_cache = shared_int_cache(self.vocab.t.n_ids)
        return ctok_ids_list(v.data, v.size, self.int_cache)

    def __init__(self, list token_bytes=None, merges=None, *, dict special_bytes=None, int pretok_kind=0,
                 bint char_level=False, bint byte_fallback=False, Py_ssize_t unk_id=-1,
                 bint fuse_unk=False, ignore_merges=None, Vocab vocab=None, bytes marker=None,
                 marker_prepend=None, piece_cache_bytes=None):
        # vocab: prebuilt tables (e.g. from the compiled cache) instead of token_bytes/merges/special_bytes.
        if vocab is None:
            self.vocab = Vocab(token_bytes, merges, special_bytes,
                               live_merges=merges is not None and not char_level)
        else:
            self.vocab = vocab
            merges = None if vocab.rank_merges else ()
        self.pretok_kind = pretok_kind
        self.state.opt.char_level = char_level
        self.state.opt.char_token = NULL
        self.state.opt.byte_fallback = byte_fallback
        self.state.opt.unk_id = NO_ID if unk_id < 0 else <uint32_t>unk_id
        self.state.opt.fuse_unk = fuse_unk
        if ignore_merges is None:
            ignore_merges = merges is None
        self.state.opt.whole_piece_first = bool(ignore_merges)
        self.state.tables = &self.vocab.t
        if not ignore_merges and not char_level:
            # pieces equal to such tokens skip the merge; when every ordinary token is one (Qwen 3, DeepSeek-V3),
            # the whole-piece rule gives the same ids without the per-piece self_merges load
            if self.vocab.build_self_merges() == self.vocab.ordinary_count():
                self.state.opt.whole_piece_first = True
            self.state.self_merges = self.vocab.t.self_merges
        self.state.pretok_kind = pretok_kind
        self.state.c_api_ok = True
        # Now rather than at the first encode: its pages are mapped here (see shared_int_cache).
        self.int_cache = shared_int_cache(self.vocab.t.n_ids)
        self.state.marker_len = 0
        if piece_cache_bytes is None:
            piece_cache_bytes = int(os.environ.get("CTOK_PIECE_CACHE_BYTES", DEFAULT_PIECE_CACHE_BYTES))
        if cache_init(&self.state.cache, piece_cache_bytes) != 0:
            raise MemoryError()
        if pretok_kind == PRETOK_MARKER_WORDS:
            if marker is None or not 1 <= len(marker) <= 8:
                raise ValueError("PRETOK_MARKER_WORDS needs a marker of 1 to 8 bytes")
            memcpy(self.state.marker, <const char*>marker, len(marker))
            self.state.marker_len = len(marker)
            # As a word loaded from memory reads them (sys.byteorder), so that marker_at's compare is exact.
            self.state.marker_word = int.from_bytes(marker.ljust(8, b"\0"), sys.byteorder)
            self.state.marker_mask = int.from_bytes((b"\xff" * len(marker)).ljust(8, b"\0"), sys.byteorder)
        if marker_prepend is not None:
            if pretok_kind != PRETOK_MARKER_WORDS or marker_prepend not in (
                    PREPEND_NEVER, PREPEND_NONEMPTY, PREPEND_UNMARKED):
                raise ValueError("marker_prepend: one of the MARKER_PREPEND_* rules, with PRETOK_MARKER_WORDS")
            self.marker_prepend = marker_prepend
        if pretok_kind != PRETOK_WHOLE and pretok_kind != PRETOK_MARKER_WORDS:
            # Fail at construction, not at the first encode, if the kind is unknown to the scanner.
            self._check_kind()
        if char_level:
            from ctok._bpe import build_char_token
            self._char_token = build_char_token(self.vocab)   # kept alive here; the options point into it
            self.state.opt.char_token = <const uint32_t*>PyBytes_AS_STRING(self._char_token)
        if not ignore_merges and char_level:
            self._build_char_self_merges()
        self._cut_bits = None
        self.state.cut_bits = NULL
        self.state.parts_cached = False
        self._char_cut_bits = None
        self.state.opt.char_bigrams = NULL
        self.state.opt.hot_owner = <const void*>&self.state
        # Only where the pretokenizer leaves words whole (SentencePiece-style words run from one marker run
        # to the next, punctuation and newlines included).  A regex pretokenizer has cut nearly everywhere
        # a byte-pair cut could go; what is left there are the boundaries between CJK characters, and cutting
        # those by byte pairs, each part through the piece cache, made more, shorter pieces to merge and
        # store: o200k and cl100k Japanese first passes 17-24% more instructions.  Those pieces are cut by
        # character pairs instead, inside the merge (char_bigrams below).
        if (pretok_kind == PRETOK_MARKER_WORDS or pretok_kind == PRETOK_WHOLE) and self._cuts_exact():
            self._cut_bits = self.vocab.token_bigrams()
            self.state.cut_bits = <const uint8_t*>PyBytes_AS_STRING(self._cut_bits)
            self.state.parts_cached = True
        elif not char_level and self.vocab.t.cp_token != NULL and self._cuts_exact():
            # Regex pretokenizers leave CJK runs whole: cut them between characters no token holds side by
            # side (bpe_merge_piece, char_cuts).
            self._char_cut_bits, shift, lead_counts = self.vocab.char_pair_tables()
            self.state.opt.char_bigrams = <const uint8_t*>PyBytes_AS_STRING(self._char_cut_bits)
            self.state.opt.char_bigram_shift = shift
            self.state.opt.cut_leads = 0
            for i, count in enumerate(lead_counts):
                if count < CUT_LEAD_TOKENS:
                    self.state.opt.cut_leads |= <uint32_t>1 << i                # 2-byte lead 0xC0 + i

    cdef bint _cuts_exact(self) except -1:
        # Cutting pieces where no token holds the two bytes around the cut (encode_parts) gives the whole
        # piece's ids when every symbol next to a cut stands for its own bytes and only merges join symbols.
        # Not so for unk: fuse_unk joins unknowns on both sides of a cut, and with byte_fallback a pending
        # unk is emitted after the fallback bytes that follow it (HF's order), which a cut would move.  Nor
        # for a merge that takes a byte-fallback or unk token: those stand for other bytes than their own.
        cdef const Tables* t = &self.vocab.t
        cdef const BpeOptions* opt = &self.state.opt
        cdef Py_ssize_t i, j
        cdef bint all_fallback = True, all_bytes = True
        cdef uint8_t* inert
        cdef bint ok = True
        for i in range(256):
            all_fallback = all_fallback and t.fallback_id[i] != NO_ID
            all_bytes = all_bytes and t.byte_id[i] != NO_ID
        if opt.unk_id != NO_ID and not (opt.byte_fallback and all_fallback) and not (
                not opt.char_level and all_bytes) and (opt.fuse_unk or opt.byte_fallback):
            return False
        if t.pair_region == NULL:
            return True
        inert = <uint8_t*>calloc(t.n_ids + 1, 1)
        if inert == NULL:
            raise MemoryError()
        for i in range(256):
            if t.fallback_id[i] != NO_ID and t.fallback_id[i] < <uint32_t>t.n_ids:
                inert[t.fallback_id[i]] = 1
        if opt.unk_id != NO_ID and opt.unk_id < <uint32_t>t.n_ids:
            inert[opt.unk_id] = 1
        for i in range(t.n_ids):
            if t.pair_region[i + 1] > t.pair_region[i] and inert[i]:     # a merge with i on the left
                ok = False
                break
        for j in range(t.pair_slots):
            # Slots of all-ones keys hold a region's count and index, not a merge.
            if t.pair_key[j] != 0xFFFFFFFFFFFFFFFFULL and inert[t.pair_right[j]]:     # right < n_ids
                ok = False
                break
        free(inert)
        return ok

    cdef _build_char_self_merges(self):
        # self_merges for char-level merge lists (SentencePiece-style files): each token of up to
        # CHAR_SELF_MAX bytes merged once here, with this encoder's options, exactly as a piece equal to it
        # would be; those that come back as themselves skip the merge when they are a whole piece.
        cdef const Tables* t = &self.vocab.t
        cdef Py_ssize_t i, ln, n = t.n_ids
        cdef uint8_t* marks = <uint8_t*>calloc(n + 1, 1)
        cdef IdVec out
        cdef BpeScratch sc
        cdef int rc = BPE_OK
        if marks == NULL:
            raise MemoryError()
        out.data = NULL; out.size = 0; out.cap = 0
        scratch_init(&sc)
        with nogil:
            for i in range(n):
                ln = <Py_ssize_t>(t.offsets[i + 1] - t.offsets[i])
                if t.kind[i] != 1 or ln > CHAR_SELF_MAX:
                    continue
                out.size = 0
                rc = bpe_merge_piece(t, &self.state.opt, t.blob + t.offsets[i], ln, &out, &sc)
                if rc != BPE_OK:
                    break
                if out.size == 1 and out.data[0] == <uint32_t>i:
                    marks[i] = 1
            scratch_free(&sc)
            idvec_free(&out)
        if rc != BPE_OK:
            free(marks)
            raise MemoryError()
        self.own_self_merges = marks
        self.state.self_merges = marks

    cdef _check_kind(self):
        from ctok import _pretok
        if not hasattr(_pretok, "split"):
            return
        _pretok.split(self.pretok_kind, b"a")

    cdef int encode_into(self, const uint8_t* s, Py_ssize_t n, IdVec* out, BpeScratch* sc) noexcept nogil:
        return encode_state(&self.state, s, n, out, sc)

    def set_added_split(self, tokens, *, bint specials=False):
        """Split ordinary text at these added tokens first, as HF's added vocabulary does: `tokens` is a list of
        (bytes, id) or (bytes, id, normalized) entries, each emitted whole where HF's scan finds it (the tokens
        with normalized true in a second pass between those without: see AddedSplit), the text between them
        encoded as separate texts (encode_str_split).  Bytes: valid UTF-8; a text split at a token that starts or
        ends with a character other than ASCII must be one no normalizer changes (the caller's rule, see
        hf.HFPipeline._split_plan).  Set once; an empty list sets nothing.  specials: the set used when every
        special token is allowed (encode_str_split(text, specials=True)), the special tokens among them."""
        cdef AddedSplit* a
        cdef AddedMatcher* m
        cdef Py_ssize_t i, hi, total = 0, pos = 0, lraw = 0, lnorm = 0
        cdef bytes b
        cdef int first, second
        entries = []
        for e in (tokens or ()):
            t, tid = bytes(e[0]), int(e[1])
            late = bool(e[2]) if len(e) > 2 else False
            try:
                t.decode("utf-8")
                ok = bool(t)
            except UnicodeDecodeError:
                ok = False
            if not ok or not 0 <= tid < self.vocab.t.n_ids:
                raise ValueError(f"added split token {t!r} (id {tid}): need non-empty UTF-8 bytes and a known id")
            entries.append((late, t, tid))
        # The first pass's tokens first, then the second's; in each, by first byte, longest first.
        toks = sorted(entries, key=lambda x: (x[0], x[1][:1], -len(x[1])))
        for late, t, tid in toks:
            total += len(t)
            if late:
                lnorm = max(lnorm, len(t))
            else:
                lraw = max(lraw, len(t))
        if len({t for _, t, _ in toks}) != len(toks):
            raise ValueError("added split tokens: the same bytes twice")     # as in HF, one token per text
        a = NULL
        if toks:
            a = <AddedSplit*>calloc(1, sizeof(AddedSplit))
            if a == NULL:
                raise MemoryError()
            a.n = len(toks)
            a.n_raw = sum(1 for late, _, _ in toks if not late)
            a.lmax = lraw + lnorm
            a.blob = <uint8_t*>malloc(total + 1)
            a.off = <Py_ssize_t*>malloc((a.n + 1) * sizeof(Py_ssize_t))
            a.ids = <uint32_t*>malloc(a.n * sizeof(uint32_t) + 1)
            if a.blob == NULL or a.off == NULL or a.ids == NULL:
                added_free(a)
                raise MemoryError()
            for i in range(a.n):
                b = toks[i][1]
                a.off[i] = pos
                memcpy(a.blob + pos, PyBytes_AS_STRING(b), len(b))
                pos += len(b)
                a.ids[i] = <uint32_t>toks[i][2]
                m = &a.normalized if toks[i][0] else &a.raw
                first = b[0]
                if len(b) == 1:
                    m.single[first] = 1
                else:
                    second = b[1]
                    m.second[first][second >> 3] |= <uint8_t>(1 << (second & 7))
            a.off[a.n] = pos
            for late in (False, True):
                m = &a.normalized if late else &a.raw
                i = a.n_raw if late else 0
                hi = a.n if late else a.n_raw
                for first in range(257):                      # start[b]: first token whose first byte >= b
                    while i < hi and toks[i][1][0] < first:
                        i += 1
                    m.start[first] = <int32_t>i
        if (self.added_all if specials else self.added) != NULL:
            added_free(a)
            raise ValueError("set_added_split: already set")      # an encode on another thread may be reading it
        if specials:
            self.added_all = a
        else:
            self.added = a

    @property
    def has_specials_split(self):
        """Whether set_added_split(..., specials=True) was called with tokens."""
        return self.added_all != NULL

    @property
    def added_split(self):
        """The (bytes, id) pairs set by set_added_split, longest first per first byte (tests, diagnostics)."""
        cdef const AddedSplit* a = self.added
        if a == NULL:
            return []
        return [(PyBytes_FromStringAndSize(<char*>a.blob + a.off[i], a.off[i + 1] - a.off[i]), a.ids[i])
                for i in range(a.n)]

    def added_split_passes(self, *, bint specials=False):
        """set_added_split's tokens as (first pass, second pass), each a list of (bytes, id); specials: the set
        for every special token allowed (tests, diagnostics)."""
        cdef const AddedSplit* a = self.added_all if specials else self.added
        if a == NULL:
            return [], []
        got = [(PyBytes_FromStringAndSize(<char*>a.blob + a.off[i], a.off[i + 1] - a.off[i]), a.ids[i])
               for i in range(a.n)]
        return got[:a.n_raw], got[a.n_raw:]

    @property
    def piece_cache_bytes(self):
        """Memory held by the piece cache, all its tables (0 when it is off)."""
        return cache_bytes(&self.state.cache)

    def _piece_cache_tables(self):
        """[(bytes, bytes in memory)] of each of the piece cache's tables, the current one first (for tests)."""
        return cache_tables(&self.state.cache)

    @property
    def cuts_pieces(self):
        """True when pieces that are no token are cut where no merge can cross, and the parts encoded one by
        one (EncoderState.cut_bits)."""
        return self.state.cut_bits != NULL

    def _set_cuts(self, bint on, leads=None):
        """Tests: turn the cutting off (or back on where _cuts_exact allows it) to compare the two; leads: the
        lead bytes whose pieces are looked at for cuts between characters, as a mask (BpeOptions.cut_leads;
        all ones: every 2- and 3-byte lead, whatever the vocabulary's counts)."""
        if leads is not None:
            self.state.opt.cut_leads = <uint32_t>(leads & 0xFFFFFFFF)       # the 3-byte leads' are always set
        self.state.cut_bits = <const uint8_t*>PyBytes_AS_STRING(self._cut_bits) if on and self._cut_bits is not None else NULL
        self.state.opt.char_bigrams = (<const uint8_t*>PyBytes_AS_STRING(self._char_cut_bits)
                                       if on and self._char_cut_bits is not None else NULL)

    def _char_cuts(self, bytes piece, bint twos=True):
        """Tests: the points char_cuts finds in `piece`, all of them (CHAR_CUTS_BATCH at a time), between 2- or
        3-byte characters (twos False: 3-byte ones only); [] when this encoder does not cut between characters."""
        cdef Py_ssize_t cuts[CHAR_CUTS_BATCH]
        cdef uint32_t sides[2 * CHAR_CUTS_BATCH]
        cdef Py_ssize_t k, j, a = 0, n = len(piece)
        cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(piece)
        found = []
        if self.state.opt.char_bigrams == NULL or n == 0:
            return found
        while True:
            k = char_cuts(self.state.tables, &self.state.opt, p, a, n, cuts, sides, CHAR_CUTS_BATCH, twos)
            found.extend(cuts[j] for j in range(k))
            if k < CHAR_CUTS_BATCH:
                return found
            a = cuts[k - 1]

    def _cut_lead(self, bytes piece):
        """Tests: how a piece that is no token is looked at for cuts between characters (_bpe.piece_cut_lead): 0
        not at all, a 2-byte lead byte between 2- and 3-byte characters, a 3-byte one between 3-byte ones."""
        if len(piece) < 4:
            return 0
        return piece_cut_lead(<const uint8_t*>PyBytes_AS_STRING(piece), len(piece), self.state.opt.cut_leads)

    @property
    def cut_leads(self):
        """The lead bytes whose pieces are looked at for cuts between characters, as a mask: bit b - 0xC0 for
        the lead byte b, 0xC0-0xEF (BpeOptions.cut_leads, and every 3-byte lead)."""
        return self.state.opt.cut_leads | (0xFFFF << 32)

    @property
    def cuts_chars(self):
        """True when pieces that are no token are cut between 2- or 3-byte characters that no token holds side
        by side, and the parts merged one by one (BpeOptions.char_bigrams)."""
        return self.state.opt.char_bigrams != NULL

    @property
    def whole_piece_first(self):
        """True when a piece that is itself a token is emitted as is (tiktoken files, HF ignore_merges, and HF
        byte-level lists whose every token merges back to itself)."""
        return bool(self.state.opt.whole_piece_first)

    @property
    def c_api_ok(self):
        return self.state.c_api_ok

    @c_api_ok.setter
    def c_api_ok(self, bint ok):
        self.state.c_api_ok = ok

    cdef int _encode_bytes(self, bytes data, IdVec* out, bint split) except -1:
        cdef const uint8_t* s = <const uint8_t*>PyBytes_AS_STRING(data)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        cdef BpeScratch own
        cdef BpeScratch* sc
        cdef int rc
        sc = self.take_scratch(&own)
        with nogil:
            if split:
                rc = self.encode_into(s, n, out, sc)
            else:
                rc = bpe_encode_piece(&self.vocab.t, &self.state.opt, s, n, out, sc)
        self.give_scratch(sc, &own)
        if rc != BPE_OK:
            raise MemoryError()
        return 0

    def encode_ordinary(self, bytes data):
        """Token ids of `data` (UTF-8 bytes) split with this encoder's pretokenizer."""
        cdef IdVec out
        out.data = NULL; out.size = 0; out.cap = 0
        try:
            self._encode_bytes(data, &out, True)
            return self.ids_to_list(&out)
        finally:
            idvec_free(&out)

    def count(self, bytes data):
        cdef IdVec out
        out.data = NULL; out.size = 0; out.cap = 0
        try:
            self._encode_bytes(data, &out, True)
            return out.size
        finally:
            idvec_free(&out)

    cdef int _encode_many(self, list datas, IdVec* out, int64_t* ends, const AddedSplit* added=NULL,
                          const Needles* needles=NULL, uint8_t* found=NULL) except -1:
        # Encode every item of `datas` into `out`, ends[i] = out.size after text i, with the GIL released
        # for the whole loop (the list and its items stay alive: the caller holds `datas`); split at `added`
        # first when it is not NULL (encode_str_split's ids); found[i] = whether text i holds one of `needles`,
        # when not NULL (a disallowed special token's check, run on the batch's threads).  Items are bytes
        # (UTF-8) or str: an ASCII str is read in place, any other gets ctok's own UTF-8 copy (_utf8.h, freed
        # here; the str is not given CPython's), lone surrogates become U+FFFD as in encode_str.  The copies
        # are made with the GIL released too: in a batch on several threads, work done holding the GIL is
        # work the other threads wait for.
        cdef Py_ssize_t i, n = len(datas)
        cdef const uint8_t** ptrs = <const uint8_t**>malloc((n + 1) * sizeof(uint8_t*))
        cdef Py_ssize_t* lens = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
        cdef char** owned = <char**>calloc(n + 1, sizeof(char*))
        cdef PyObject** pending = <PyObject**>calloc(n + 1, sizeof(PyObject*))   # strs still to copy
        cdef BpeScratch sc
        cdef BpeScratch* scp
        cdef int rc = BPE_OK, status = 0, cheap
        cdef bint nomem = False, surrogates = False
        cdef bint marked = added != NULL and self.state.pretok_kind == PRETOK_MARKER_WORDS
        cdef uint8_t* mbuf = NULL                  # marked: room for the longest text, marked (encode_split)
        cdef Py_ssize_t longest = 0
        cdef object d
        cdef list keep = None                      # exact copies of str subclasses, repaired texts' bytes
        cdef const char* p
        cdef Py_ssize_t m
        if ptrs == NULL or lens == NULL or owned == NULL or pending == NULL:
            free(ptrs); free(lens); free(owned); free(pending)
            raise MemoryError()
        try:
            for i in range(n):
                d = datas[i]
                if type(d) is bytes:
                    ptrs[i] = <const uint8_t*>PyBytes_AS_STRING(d)
                    lens[i] = PyBytes_GET_SIZE(d)
                    continue
                if type(d) is not str:
                    if not isinstance(d, str):
                        raise TypeError(f"text must be str, not {type(d).__name__}")
                    d = exact_str(d)
                    if keep is None:
                        keep = []
                    keep.append(d)
                cheap = ctok_utf8_view_cheap(d, &p, &m)  # ASCII: the str's own data, no copy
                if cheap < 0:
                    raise MemoryError()
                if cheap:
                    ptrs[i] = <const uint8_t*>p
                    lens[i] = m
                else:
                    pending[i] = <PyObject*>d            # alive in datas (or keep) until the end
            with nogil:
                for i in range(n):
                    if pending[i] != NULL:
                        owned[i] = ctok_utf8_copy_nogil(pending[i], &lens[i], &status)
                        ptrs[i] = <const uint8_t*>owned[i]
                        nomem = nomem or status == 2
                        surrogates = surrogates or status == 1
            if nomem:
                raise MemoryError()
            if surrogates:
                for i in range(n):
                    if pending[i] != NULL and owned[i] == NULL:
                        d = replace_lone_surrogates(<str><object>pending[i]).encode("utf-8")
                        if keep is None:
                            keep = []
                        keep.append(d)
                        ptrs[i] = <const uint8_t*>PyBytes_AS_STRING(d)
                        lens[i] = PyBytes_GET_SIZE(d)
            if marked:
                for i in range(n):
                    longest = lens[i] if lens[i] > longest else longest
                mbuf = <uint8_t*>malloc(marked_room(&self.state, longest))
                if mbuf == NULL:
                    raise MemoryError()
            scp = self.take_scratch(&sc)
            with nogil:
                for i in range(n):
                    rc = (encode_split(&self.state, added, ptrs[i], lens[i], 0, mbuf, self.marker_prepend,
                                       self.marked_first_only, out, NULL, scp) if added != NULL
                          else self.encode_into(ptrs[i], lens[i], out, scp))
                    if rc != BPE_OK:
                        break
                    ends[i] = out.size
                    if needles != NULL:
                        found[i] = needles_in(needles, ptrs[i], lens[i])
            self.give_scratch(scp, &sc)
            if rc != BPE_OK:
                raise MemoryError()
        finally:
            for i in range(n):
                free(owned[i])
            free(owned)
            free(ptrs)
            free(lens)
            free(pending)
            free(mbuf)
        return 0

    cdef const AddedSplit* _specials_split(self, bint specials) except? NULL:
        # The split at every special token for specials, else NULL (no split).
        if not specials:
            return NULL
        if self.added_all == NULL:
            raise ValueError("no split at the special tokens set (set_added_split(..., specials=True))")
        return self.added_all

    def encode_many(self, list datas, *, bint specials=False, TokenScan scan=None):
        """[encode_ordinary(d) for d in datas] (bytes or str items), with one GIL release for the whole list;
        specials: [encode_str_split(d, specials=True) for d in datas] (a batch of chat templates' outputs).
        scan: also (lists, [indices of the items that may hold one of scan's names]) (see _found_in)."""
        cdef const AddedSplit* added = self._specials_split(specials)
        cdef IdVec out
        cdef Py_ssize_t n = len(datas)
        cdef int64_t* ends = <int64_t*>malloc((n + 1) * sizeof(int64_t))
        cdef bytearray found = bytearray(n + 1) if scan is not None else None
        cdef list result = []
        cdef BpeScratch sc
        cdef BpeScratch* scp = NULL
        if ends == NULL:
            raise MemoryError()
        out.data = NULL; out.size = 0; out.cap = 0
        try:
            self._encode_many(datas, &out, ends, added, &scan.needles if scan is not None else NULL,
                              <uint8_t*><char*>found if scan is not None else NULL)
            if self.int_cache == NULL:
                self.int_cache = shared_int_cache(self.vocab.t.n_ids)
            # Most of the lists' work with the GIL released, over a scratch's id counts, from MANY_LISTS_MIN_IDS on.
            if out.size >= MANY_LISTS_MIN_IDS:
                scp = self.take_scratch(&sc)
            ctok_int_lists(result, out.data, ends, n, self.int_cache, self.vocab.t.n_ids,
                           scratch_id_counts(scp, self.vocab.t.n_ids) if scp != NULL else NULL)
            return result if scan is None else (result, _found_in(<uint8_t*><char*>found, n))
        finally:
            if scp != NULL:
                self.give_scratch(scp, &sc)
            free(ends)
            idvec_free(&out)

    def encode_many_flat(self, list datas, *, bint specials=False, TokenScan scan=None):
        """(IdBuffer of native uint32 ids, bytearray of native int64 ends) for all of `datas`: ends[i]
        is where text i's ids stop.  numpy.frombuffer views both without copying.  specials: as encode_many.
        scan: a third item, the indices of the items that may hold one of scan's names (see _found_in)."""
        cdef const AddedSplit* added = self._specials_split(specials)
        cdef IdBuffer ids = IdBuffer()
        cdef Py_ssize_t n = len(datas)
        cdef bytearray ends = bytearray(n * sizeof(int64_t))
        cdef bytearray found
        if scan is None:
            self._encode_many(datas, &ids.ids, <int64_t*><char*>ends, added)
            return ids, ends
        found = bytearray(n + 1)
        self._encode_many(datas, &ids.ids, <int64_t*><char*>ends, added, &scan.needles, <uint8_t*><char*>found)
        return ids, ends, _found_in(<uint8_t*><char*>found, n)

    @property
    def can_split(self):
        """True when one text may be encoded in parts on several threads (encode_span / join_spans)."""
        return span_kind_ok(self.pretok_kind)

    def encode_span(self, bytes data not None, Py_ssize_t start, Py_ssize_t stop):
        """A Span: the pieces of `data` parsed from the first character at or after `start` until the first
        boundary at or after `stop`, without the GIL.  Spans of consecutive ranges go to join_spans."""
        cdef const uint8_t* s = <const uint8_t*>PyBytes_AS_STRING(data)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data), pos, e
        cdef Span sp = Span()
        cdef BpeScratch sc
        cdef BpeScratch* scp
        cdef int rc = BPE_OK
        if not span_kind_ok(self.pretok_kind):
            raise ValueError("this encoder's pretokenizer cannot encode a text in parts")
        if not 0 <= start <= stop <= n:
            raise ValueError("encode_span: need 0 <= start <= stop <= len(data)")
        while start < n and (s[start] & 0xC0) == 0x80:      # start < n
            start += 1
        sp.start = start
        pos = start
        scp = self.take_scratch(&sc)                # a pooled one: its table of recent pieces serves the span
        with nogil:
            sp.rec_pos[0] = pos; sp.rec_ids[0] = 0; sp.n_rec = 1
            while pos < stop and sp.n_rec < SPAN_RECORD:
                e = next_piece_end(self.pretok_kind, s, n, pos)
                rc = encode_piece_cached(&self.state, s + pos, e - pos, &sp.ids, scp)
                if rc != BPE_OK:
                    break
                pos = e
                sp.rec_pos[sp.n_rec] = pos              # n_rec < SPAN_RECORD (loop test)
                sp.rec_ids[sp.n_rec] = sp.ids.size
                sp.n_rec += 1
            if rc == BPE_OK and pos < stop:
                rc = encode_state_span(&self.state, s, n, pos, stop, &sp.ids, scp, &pos)
        self.give_scratch(scp, &sc)
        if rc != BPE_OK:
            raise MemoryError()
        sp.end = pos
        sp.text_len = n
        sp.owner = self
        return sp

    cdef int _join(self, const uint8_t* s, Py_ssize_t n, list spans, IdVec* out) except -1:
        # out = the ids of the whole text: each span extended piece by piece until it meets the next one.
        cdef Py_ssize_t i, j, b, e, skip = 0, k = len(spans)
        cdef Span cur, nxt
        cdef BpeScratch sc
        cdef int rc = BPE_OK
        scratch_init(&sc)
        try:
            for i in range(k):
                cur = <Span>spans[i]
                if cur.ids.size - skip > 0:
                    if idvec_reserve(out, cur.ids.size - skip) != BPE_OK:
                        raise MemoryError()
                    memcpy(out.data + out.size, cur.ids.data + skip, (cur.ids.size - skip) * sizeof(uint32_t))
                    out.size += cur.ids.size - skip
                if i == k - 1:
                    break
                nxt = <Span>spans[i + 1]
                b = cur.end
                j = 0
                with nogil:
                    while True:
                        while j < nxt.n_rec and nxt.rec_pos[j] < b:
                            j += 1
                        if j == nxt.n_rec or b >= n:
                            break                                  # no meeting point among the records
                        if nxt.rec_pos[j] == b:
                            break
                        e = next_piece_end(self.pretok_kind, s, n, b)
                        rc = encode_piece_cached(&self.state, s + b, e - b, out, &sc)
                        if rc != BPE_OK:
                            break
                        b = e
                if rc != BPE_OK:
                    raise MemoryError()
                if j < nxt.n_rec and nxt.rec_pos[j] == b:
                    skip = nxt.rec_ids[j]                          # j < n_rec: tested
                    continue
                # The parses never met (a piece longer than the records span): finish sequentially.
                if b < n:
                    with nogil:
                        rc = encode_state_span(&self.state, s, n, b, n, out, &sc, &e)
                    if rc != BPE_OK:
                        raise MemoryError()
                break
        finally:
            scratch_free(&sc)
        return 0

    def join_spans(self, bytes data not None, list spans, bint flat=False):
        """The ids of all of `data` from Spans of it made by encode_span over consecutive ranges that
        start at 0 and end at len(data): a list of ints, or with flat=True a bytearray of native uint32."""
        cdef IdVec out
        cdef bytearray buf
        cdef Py_ssize_t i, n = len(data)
        cdef Span sp
        for i in range(len(spans)):
            sp = spans[i]                         # a checked cast: TypeError for anything but a Span
            if sp is None or sp.owner is not self or sp.text_len != n:
                raise ValueError(f"join_spans: span {i} was not made by this encoder from this text")
            if i and sp.start > (<Span>spans[i - 1]).end:
                raise ValueError(f"join_spans: span {i} starts after span {i - 1} ends")
        if not spans or (<Span>spans[0]).start != 0 or (<Span>spans[len(spans) - 1]).end != n:
            raise ValueError("join_spans: the spans must cover the text from its start to its end")
        out.data = NULL; out.size = 0; out.cap = 0
        try:
            self._join(<const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), spans, &out)
            if not flat:
                return self.ids_to_list(&out)
            buf = bytearray(out.size * sizeof(uint32_t))
            if out.size:
                memcpy(<char*>buf, out.data, out.size * sizeof(uint32_t))
            return buf
        finally:
            idvec_free(&out)

    def encode_pieces(self, pieces):
        """Token ids of each piece in `pieces` (bytes), BPE-merged as given, concatenated."""
        cdef IdVec out
        cdef bytes p
        out.data = NULL; out.size = 0; out.cap = 0
        try:
            for p in pieces:
                self._encode_bytes(p, &out, False)
            return self.ids_to_list(&out)
        finally:
            idvec_free(&out)

    def encode_piece(self, bytes piece):
        return self.encode_pieces((piece,))

    def encode_to_buffer(self, bytes data):
        """Like encode_ordinary, as a bytearray of native uint32 ids (numpy.frombuffer views it without
        a copy), so no per-token Python objects are made."""
        cdef IdVec out
        cdef bytearray buf
        out.data = NULL; out.size = 0; out.cap = 0
        try:
            self._encode_bytes(data, &out, True)
            buf = bytearray(out.size * sizeof(uint32_t))
            if out.size:
                memcpy(<char*>buf, out.data, out.size * sizeof(uint32_t))
            return buf
        finally:
            idvec_free(&out)

    def token_id(self, bytes b):
        return self.vocab.token_id(b)

    cdef int _gather(self, tokens, IdVec* tmp, char** buf, Py_ssize_t* length) except -1:
        # The bytes of `tokens` in a malloc'd buffer (caller frees): one pass over a list, checking ids.
        cdef const Tables* t = &self.vocab.t
        cdef list ids
        cdef Py_ssize_t i, n, tid, ln, total = 0, cap
        cdef char* out
        cdef char* grown
        if isinstance(tokens, list):
            ids = <list>tokens
        elif hasattr(tokens, "tolist"):               # numpy arrays: plain ints, not numpy scalars
            ids = tokens.tolist()
        else:
            ids = list(tokens)
        n = len(ids)
        cap = n * 8 + 16
        out = <char*>malloc(cap)
        if out == NULL:
            raise MemoryError()
        try:
            for i in range(n):
                tid = PyLong_AsSsize_t(<object>PyList_GET_ITEM(ids, i))
                if tid < 0 or tid >= t.n_ids or t.kind[tid] == 0:
                    raise UnknownTokenError(ids[i])
                ln = t.offsets[tid + 1] - t.offsets[tid]
                if total + ln + 16 > cap:
                    cap = (total + ln + 16) * 2
                    grown = <char*>realloc(out, cap)
                    if grown == NULL:
                        raise MemoryError()
                    out = grown
                if ln <= 16:
                    # A fixed-size copy is two moves, not a call; it may copy up to 16 - ln bytes past
                    # the token, which the blob's tail padding and out's 16 spare bytes allow.
                    memcpy(out + total, t.blob + t.offsets[tid], 16)
                else:
                    memcpy(out + total, t.blob + t.offsets[tid], ln)  # tid checked above, room ensured
                total += ln
        except BaseException:
            free(out)
            raise
        buf[0] = out
        length[0] = total
        return 0

    def decode_bytes(self, tokens):
        """Concatenated bytes of `tokens` (ordinary and special ids); unknown ids raise UnknownTokenError."""
        cdef char* buf = NULL
        cdef Py_ssize_t n = 0
        self._gather(tokens, NULL, &buf, &n)
        try:
            return PyBytes_FromStringAndSize(buf, n)
        finally:
            free(buf)

    def decode_str(self, tokens, str errors="replace"):
        """decode_bytes(tokens).decode("utf-8", errors), without the intermediate bytes object."""
        cdef char* buf = NULL
        cdef Py_ssize_t n = 0
        self._gather(tokens, NULL, &buf, &n)
        try:
            return PyUnicode_DecodeUTF8(buf, n, errors.encode("ascii"))
        finally:
            free(buf)

    def encode_str(self, text):
        """encode_ordinary for a str: its UTF-8 form (cached inside the str by CPython, no copy for ASCII)
        is encoded directly; short texts keep the GIL, where releasing it would cost more than the work.
        Lone surrogates become U+FFFD first, as tiktoken does.  A str subclass is encoded as its str value."""
        return self._encode_str(text, NULL)

    def encode_str_split(self, text, *, bint specials=False):
        """encode_str after splitting the text at the added tokens of set_added_split (HF's added vocabulary:
        each found is its id, the text between two is encoded as a text of its own); specials: at those set
        with specials=True."""
        cdef const AddedSplit* a = self.added_all if specials else self.added
        if a == NULL:
            raise ValueError("encode_str_split: no added tokens set (set_added_split)")
        return self._encode_str(text, a)

    cdef list _encode_str(self, text, const AddedSplit* added):
        cdef Py_ssize_t n
        cdef const char* s
        if type(text) is not str:
            text = exact_str(text)
        cdef char* owned = NULL
        s = NULL
        if PyUnicode_GET_LENGTH(text) >= SHORT_TEXT:
            # Long texts: our own UTF-8 copy, freed below (see _utf8.h); NULL at a surrogate.
            s = ctok_utf8_view(text, &n, &owned)
            if s == NULL and PyErr_Occurred() != NULL:
                raise MemoryError()
        if s == NULL:
            try:
                s = PyUnicode_AsUTF8AndSize(text, &n)
            except UnicodeEncodeError:
                if self.surrogates_raise:
                    raise
                fixed = replace_lone_surrogates(text)
                s = PyUnicode_AsUTF8AndSize(fixed, &n)
                text = fixed                               # keeps the buffer alive below
        try:
            return self._encode_utf8(<const uint8_t*>s, n, added)
        finally:
            free(owned)

    cdef list _encode_utf8(self, const uint8_t* s, Py_ssize_t n, const AddedSplit* added):
        # encode_str's work once it has the UTF-8 s[0:n] (split at `added` first unless NULL): short texts
        # reuse the encoder's buffers and keep the GIL; longer ones release it.
        cdef IdVec out
        cdef IdVec* outp
        cdef BpeScratch sc
        cdef BpeScratch* scp
        cdef int rc
        if n < SHORT_TEXT and not self.short_busy:
            self.short_busy = True
            try:
                self.short_out.size = 0
                if encode_with(&self.state, added, s, n, &self.short_out, &self.short_scratch) != BPE_OK:
                    raise MemoryError()
                return self.ids_to_list(&self.short_out)
            finally:
                self.short_busy = False
                if self.short_out.cap > 4096:             # do not keep a large buffer around
                    idvec_free(&self.short_out)
        outp = self.take_out(&out)
        scp = self.take_scratch(&sc)
        try:
            # About one id per 4 bytes for English and code: growing from a small buffer would copy the
            # ids log(n) times.
            if idvec_reserve(outp, n // 4 + 16) != BPE_OK:
                raise MemoryError()
            if n < SHORT_TEXT:
                rc = encode_with(&self.state, added, s, n, outp, scp)
            else:
                with nogil:
                    rc = encode_with(&self.state, added, s, n, outp, scp)
            if rc != BPE_OK:
                raise MemoryError()
            return self.ids_to_list(outp)
        finally:
            self.give_scratch(scp, &sc)
            self.give_out(outp)

    def encode_marked(self, text):
        """The ids of `text` for a SentencePiece-style file (an encoder made with PRETOK_MARKER_WORDS and a
        marker_prepend rule), straight from the str: its UTF-8 with every space (U+0020) written as the
        marker, the marker put in front as marker_prepend says, split at marker runs.  This is HF's
        normalizer / Metaspace and model for text that holds no added token.  A lone surrogate raises
        UnicodeEncodeError (tokenizer.json files refuse such text).  A str subclass is encoded as its str
        value."""
        return self._encode_marked(text)

    cdef list _encode_marked(self, object text):
        # encode_marked's work, a C call for the prefix cache's bound route (PrefixCache.bind_marked).
        cdef ctok_marker mk
        cdef uint8_t local[MARKED_LOCAL]
        cdef uint8_t* buf = local
        cdef const uint8_t* s
        cdef Py_ssize_t n
        cdef size_t room
        cdef int ml = self.state.marker_len
        text = marked_start(self, text, &mk, "encode_marked")
        if text is None:
            return []                       # no rule prepends to empty text
        room = ctok_utf8_bound(text, &mk) + ml      # + a marker in front
        if room > MARKED_LOCAL:
            buf = <uint8_t*>malloc(room)
            if buf == NULL:
                raise MemoryError()
        try:
            # The text goes at buf + ml, leaving room for the marker in front.
            if PyUnicode_GET_LENGTH(text) < SHORT_TEXT:
                n = ctok_utf8_write(<PyObject*>text, buf + ml, &mk)
            else:
                with nogil:
                    n = ctok_utf8_write(<PyObject*>text, buf + ml, &mk)
            if n < 0:
                text.encode("utf-8")        # a lone surrogate: raises its UnicodeEncodeError
                raise AssertionError("ctok_utf8_write saw a surrogate that str.encode accepts")
            s = buf + ml
            if self._prepends(s, n):
                s = buf
                memcpy(buf, mk.bytes, ml)   # buf[0:ml] was kept free for it
                n += ml
            return self._encode_utf8(s, n, NULL)
        finally:
            if buf != local:
                free(buf)

    def encode_marked_split(self, text, first_only=None):
        """encode_marked for text split at the special-token split (set_added_split(..., specials=True)) first,
        as HF's added vocabulary splits a SentencePiece-style file's text: each token found is its id, and each
        text between two is normalized / pre-tokenized as a split of its own (see encode_split):
        first_only for Metaspace's prepend_scheme "first" (None: marked_first_only).  A lone surrogate raises
        UnicodeEncodeError."""
        cdef const char* s
        cdef char* owned = NULL
        cdef Py_ssize_t n
        if type(text) is not str:
            text = exact_str(text)
        s = ctok_utf8_view(text, &n, &owned)
        if s == NULL:
            if PyErr_Occurred() != NULL:
                raise MemoryError()
            text.encode("utf-8")            # a lone surrogate: raises its UnicodeEncodeError
            raise AssertionError("ctok_utf8_view saw a surrogate that str.encode accepts")
        try:
            return self._encode_marked_split_utf8(<const uint8_t*>s, n,
                                                  self.marked_first_only if first_only is None else first_only)
        finally:
            free(owned)

    cdef list _encode_marked_split_utf8(self, const uint8_t* s, Py_ssize_t n, bint first_only):
        # encode_marked_split's work once it has the text's UTF-8 s[0:n] (also the prefix cache's, uncached).
        cdef const AddedSplit* a = self._specials_split(True)
        cdef uint8_t* buf
        cdef IdVec out
        cdef BpeScratch sc
        cdef int rc, rule = self.marker_prepend
        if rule < 0:
            raise ValueError("encode_marked_split: this encoder has no marker_prepend rule")
        buf = <uint8_t*>malloc(marked_room(&self.state, n))
        out.data = NULL; out.size = 0; out.cap = 0
        scratch_init(&sc)
        try:
            if buf == NULL or idvec_reserve(&out, n // 4 + 16) != BPE_OK:
                raise MemoryError()
            with nogil:
                rc = encode_split(&self.state, a, s, n, 0, buf, rule, first_only, &out, NULL, &sc)
            if rc != BPE_OK:
                raise MemoryError()
            return self.ids_to_list(&out)
        finally:
            scratch_free(&sc)
            idvec_free(&out)
            free(buf)

    cdef bint _prepends(self, const uint8_t* s, Py_ssize_t n) noexcept:
        # Whether encode_marked puts the marker in front of s[0:n], a non-empty text with its spaces replaced.
        cdef int ml = self.state.marker_len
        if self.marker_prepend == PREPEND_NONEMPTY:
            return True
        if self.marker_prepend == PREPEND_UNMARKED:
            # Metaspace prepends unless the replaced text already starts with the marker (a space or the
            # marker itself first).
            return n < ml or memcmp(s, self.state.marker, ml) != 0
        return False

    def marked_bytes(self, text):
        """The bytes encode_marked encodes for `text`: its UTF-8 with every space written as the marker, the
        marker put in front as marker_prepend says (b"" for empty text).  encode_ordinary of them gives
        encode_marked(text); the prefix cache keys SentencePiece-style prompts on them."""
        cdef ctok_marker mk
        cdef uint8_t* buf
        cdef Py_ssize_t n
        cdef size_t room
        cdef PyObject* op
        cdef int ml = self.state.marker_len
        text = marked_start(self, text, &mk, "marked_bytes")
        if text is None:
            return b""
        room = ctok_utf8_bound(text, &mk) + ml
        # Written in place into the bytes object, then shrunk to fit: no second buffer and copy.
        op = PyBytes_New_ptr(NULL, <Py_ssize_t>room)
        if op == NULL:
            raise MemoryError()
        buf = <uint8_t*>PyBytes_AS_STRING_ptr(op)
        with nogil:
            n = ctok_utf8_write(<PyObject*>text, buf + ml, &mk)
        if n < 0:
            Py_DECREF_ptr(op)
            text.encode("utf-8")            # a lone surrogate: raises its UnicodeEncodeError
            raise AssertionError("ctok_utf8_write saw a surrogate that str.encode accepts")
        if self._prepends(buf + ml, n):
            memcpy(buf, mk.bytes, ml)
            n += ml
        else:
            memmove(buf, buf + ml, n)
        if _PyBytes_Resize(&op, n) < 0:     # op is freed and NULL then
            raise MemoryError()
        result = <object>op                 # a new reference ...
        Py_DECREF_ptr(op)                   # ... and ours dropped
        return result

    def token_bytes(self, Py_ssize_t tid):
        return self.vocab.token_bytes(tid)


# ---- C API (ctok/include/ctok.h) ----

cdef int capi_encode(const void* encoder, const uint8_t* text, size_t length, uint32_t* out, size_t cap,
                     size_t* n_out) noexcept nogil:
    cdef const EncoderState* st = <const EncoderState*>encoder   # alive while the caller's capsule is
    cdef IdVec ids
    cdef BpeScratch sc
    cdef int rc
    if not st.c_api_ok:
        n_out[0] = 0
        return CTOK_ERR_UNSUPPORTED
    ids.data = NULL; ids.size = 0; ids.cap = 0
    scratch_init(&sc)
    rc = encode_state(st, text, <Py_ssize_t>length, &ids, &sc)
    scratch_free(&sc)
    if rc != BPE_OK:
        idvec_free(&ids)
        n_out[0] = 0
        return CTOK_ERR_NOMEM
    n_out[0] = <size_t>ids.size
    if <size_t>ids.size > cap:
        idvec_free(&ids)
        return CTOK_ERR_BUFFER
    if ids.size:
        memcpy(out, ids.data, ids.size * sizeof(uint32_t))
    idvec_free(&ids)
    return CTOK_OK


cdef int capi_decode(const void* encoder, const uint32_t* ids, size_t n, uint8_t* out, size_t cap,
                     size_t* n_out) noexcept nogil:
    cdef const Tables* t = (<const EncoderState*>encoder).tables
    cdef size_t i, total = 0, ln
    for i in range(n):
        if ids[i] >= <uint32_t>t.n_ids or t.kind[ids[i]] == 0:
            n_out[0] = i
            return CTOK_ERR_UNKNOWN_ID
        total += t.offsets[ids[i] + 1] - t.offsets[ids[i]]
    n_out[0] = total
    if total > cap:
        return CTOK_ERR_BUFFER
    total = 0
    for i in range(n):
        ln = t.offsets[ids[i] + 1] - t.offsets[ids[i]]
        memcpy(out + total, t.blob + t.offsets[ids[i]], ln)      # ids checked above, total <= cap
        total += ln
    return CTOK_OK


cdef size_t capi_vocab_size(const void* encoder) noexcept nogil:
    return <size_t>(<const EncoderState*>encoder).tables.n_ids


cdef ctok_api CAPI
CAPI.version = CTOK_API_VERSION
CAPI.encode = capi_encode
CAPI.decode = capi_decode
CAPI.vocab_size = capi_vocab_size


def c_api():
    """PyCapsule "ctok.api" holding a pointer to the static `ctok_api` table (see ctok.h)."""
    return PyCapsule_New(<void*>&CAPI, b"ctok.api", NULL)


cdef void _release_handle(object capsule) noexcept:
    cdef PyObject* ctx = <PyObject*>PyCapsule_GetContext(capsule)
    if ctx != NULL:
        Py_DECREF_ptr(ctx)


def c_handle(CoreEncoder encoder):
    """PyCapsule "ctok.encoder" pointing at `encoder`, holding a reference to it for its own lifetime."""
    cap = PyCapsule_New(<void*>&encoder.state, b"ctok.encoder", <PyCapsule_Destructor>_release_handle)
    Py_INCREF(encoder)
    PyCapsule_SetContext(cap, <void*>encoder)
    return cap


MARKER_WORDS = PRETOK_MARKER_WORDS

MARKER_PREPEND_NEVER = PREPEND_NEVER
MARKER_PREPEND_NONEMPTY = PREPEND_NONEMPTY
MARKER_PREPEND_UNMARKED = PREPEND_UNMARKED


def marker_split_is_safe(token_bytes, bytes marker):
    """True when no token holds a character other than `marker` directly followed by `marker`: then no
    BPE merge can join the text on both sides of a marker run's start, and PRETOK_MARKER_WORDS is exact."""
    cdef bytes b
    cdef Py_ssize_t i, ml = len(marker)
    for b in token_bytes:
        if b is None:
            continue
        i = b.find(marker, 1)
        while i > 0:
            if i < ml or b[i - ml:i] != marker:
                return False
            i = b.find(marker, i + 1)
    return True


cpdef str replace_lone_surrogates(str text):
    """text with surrogate pairs joined and lone surrogates replaced by U+FFFD (tiktoken's rule for str input)."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


cpdef str exact_str(object text):
    """text as an exact str: a str subclass gives its str value (not what its __str__ may return); anything
    else is a TypeError, as tiktoken raises."""
    if isinstance(text, str):
        return str.__str__(text)
    raise TypeError(f"text must be str, not {type(text).__name__}")


cdef extern from "Python.h":
    Py_UCS4 PyUnicode_READ_CHAR(object s, Py_ssize_t i)
    Py_UCS4 PyUnicode_READ(int kind, const void* data, Py_ssize_t i)
    int PyUnicode_KIND(object s)
    void* PyUnicode_DATA(object s)
    int PyUnicode_4BYTE_KIND
    object PyUnicode_FromKindAndData(int kind, const void* buffer, Py_ssize_t size)

cdef extern from "_find_char.h":
    Py_ssize_t ctok_find_char(object text, Py_UCS4 ch, Py_ssize_t start, Py_ssize_t end)


_NO_SPECIALS = frozenset()


cdef struct FirstChars:
    # What a text must hold to contain one of some tokens' texts, cheap to scan for: the distinct first
    # characters (at most 8; n = -1: too many), and for each the distinct second characters of the tokens
    # that start with it (at most 8; nsec = -1 when one of them is that character alone, or too many).
    # Why the second characters: every added token of the shared tokenizer.json files starts with "<", so
    # any code or markup took the slow path for a "<" that never starts "<|" or "<｜" (Llama 3 on Python
    # code: 0.3x fastokens).
    Py_UCS4 c[8]
    int n
    Py_UCS4 sec[8][8]
    int nsec[8]


cdef list first_chars_set(FirstChars* fc, names):
    # Fill fc from the tokens' texts `names` (non-empty) and return what holds_none needs beside it: for first
    # character i and second character j of fc, at [8 * i + j], the tokens starting with those two, as (their
    # distinct lengths, the set of them, the tuple of them when FEW_NAMES or fewer, else None).  A few are each
    # compared in place (no slice of the text made); many are looked up by length in the set: Mistral 7B v0.3
    # has 760 tokens starting "[c".
    cdef dict groups = {}, by_prefix = {}
    cdef list by_ij = [None] * 64
    cdef int i, j
    for name in names:
        groups.setdefault(name[0], set()).add(name[1] if len(name) > 1 else None)
        if len(name) > 1:
            by_prefix.setdefault(name[:2], []).append(name)
    fc.n = 0
    if len(groups) > 8:
        fc.n = -1
        return by_ij
    for ch in sorted(groups):
        i = fc.n
        fc.c[i] = ord(ch)                           # i < 8: at most 8 distinct first characters
        seconds = groups[ch]
        if None in seconds or len(seconds) > 8:
            fc.nsec[i] = -1
        else:
            fc.nsec[i] = 0
            for j, second in enumerate(sorted(seconds)):
                fc.sec[i][j] = ord(second)          # j < 8: at most 8 distinct second characters
                fc.nsec[i] = j + 1
                v = by_prefix[ch + second]
                by_ij[8 * i + j] = (tuple(sorted({len(name) for name in v})), frozenset(v),
                                    tuple(sorted(set(v))) if len(set(v)) <= FEW_NAMES else None)
        fc.n += 1
    return by_ij


cdef enum:
    # Occurrences of a token's first two characters that holds_none checks in full (a set lookup per length
    # of the tokens sharing them) before it gives the text to the slow route, which finds added tokens its
    # own way: PREFIX_CHECKS, and one more per PREFIX_CHECK_CHARS characters of text.  Why they grow with
    # the text: a fixed 64 sent Python code and its docs (72 and 93 of "<s", "</", "<u" in the shared
    # corpus's 1.2-1.4 MB files) to Mistral's Python route, and code (107 of "</", "<t", "<d") to DeepSeek-V3's
    # and Qwen 3's; still, text made of such prefixes stays linear.
    PREFIX_CHECKS = 64
    PREFIX_CHECK_CHARS = 256
    FEW_NAMES = 8               # tokens sharing their first two characters compared one by one, in place


cdef bint holds_none(str text, const FirstChars* fc, list by_ij) except -1:
    # True when text holds none of the tokens (fc.n >= 0): no first character, or each occurrence of one
    # followed by none of its second characters, or few enough occurrences of a token's first two characters
    # (see PREFIX_CHECKS) where none of the tokens starting with them (by_ij, from first_chars_set) begins.  A
    # token of two or more characters cannot start elsewhere.
    cdef Py_ssize_t n, pos, ln
    cdef Py_ssize_t max_checks, checks = 0
    cdef int i, j
    cdef Py_UCS4 nxt
    cdef tuple group
    ctok_str_ready(text)                # ctok_find_char and the normal-form check after it read the code units
    n = PyUnicode_GET_LENGTH(text)
    max_checks = PREFIX_CHECKS + n // PREFIX_CHECK_CHARS
    for i in range(fc.n):
        pos = ctok_find_char(text, fc.c[i], 0, n)
        if pos >= 0 and fc.nsec[i] < 0:
            return False
        while pos >= 0:
            if pos + 1 < n:
                nxt = PyUnicode_READ_CHAR(text, pos + 1)         # pos + 1 < n
                for j in range(fc.nsec[i]):
                    if nxt == fc.sec[i][j]:
                        checks += 1
                        if checks > max_checks:
                            return False
                        group = <tuple>by_ij[8 * i + j]              # set for every (i, j) of fc
                        if group[2] is not None:
                            for name in <tuple>group[2]:
                                if PyUnicode_Tailmatch(text, name, pos, n, -1):   # text[pos:] starts with it
                                    return False
                        else:
                            for ln in <tuple>group[0]:
                                if text[pos:pos + ln] in <frozenset>group[1]:
                                    return False
                        break
            pos = ctok_find_char(text, fc.c[i], pos + 1, n)
    return True


cdef void needles_from(Needles* nd, const FirstChars* fc) except *:
    cdef int i, j
    cdef bytes b
    nd.n = 0
    if fc.n < 0:
        nd.n = -1
        return
    try:
        for i in range(fc.n):
            for j in range(fc.nsec[i] if fc.nsec[i] >= 0 else 1):
                b = (chr(fc.c[i]) + (chr(fc.sec[i][j]) if fc.nsec[i] >= 0 else "")).encode("utf-8")
                nd.length[nd.n] = len(b)                 # nd.n < 64: at most 8 first and 8 second characters
                memcpy(nd.text[nd.n], <const char*>b, len(b))   # at most 8 bytes: two characters
                nd.n += 1
    except UnicodeEncodeError:
        nd.n = -1                                       # a lone surrogate in a name: not scanned for


cdef bint needles_in(const Needles* nd, const uint8_t* s, Py_ssize_t n) noexcept nogil:
    # Whether s[0:n] (UTF-8) holds one of the needles (all when nd.n < 0).
    cdef int k
    cdef Py_ssize_t p
    if nd.n < 0:
        return True
    for k in range(nd.n):
        p = 0
        while True:
            p = ctok_find_byte(s, p, n, nd.text[k][0])
            if p + nd.length[k] > n:
                break
            if memcmp(s + p, nd.text[k], nd.length[k]) == 0:       # p + length <= n
                return True
            p += 1
    return False


cdef class TokenScan:
    """Which texts may hold one of the strings `names` (special tokens' texts): every text but those that
    holds_none proves hold none (all of them when there are too many first characters to scan for).  Made once
    per set of names (Encoding caches it), so a check for disallowed special tokens costs a scan in C per text,
    and the regex runs only on the texts returned.  A batch's encoder threads take the same test on each text's
    UTF-8 (`needles`: a coarser one, flagging every text holds_none would not clear) with the GIL released."""
    cdef FirstChars fc
    cdef list by_ij
    cdef Needles needles

    def __init__(self, names):
        names = [name for name in names if name]
        self.by_ij = first_chars_set(&self.fc, names)
        if not names:
            self.fc.n = 0                           # nothing to find: every text holds none
        needles_from(&self.needles, &self.fc)

    def maybe_holding(self, list texts):
        return [texts[i] for i in self.holding_indices(texts)]

    def holding_indices(self, list texts):
        """The indices of the texts maybe_holding would return, in order."""
        cdef Py_ssize_t i
        if self.fc.n < 0:
            return list(range(len(texts)))
        return [i for i in range(len(texts))
                if type(texts[i]) is not str or not holds_none(<str>texts[i], &self.fc, self.by_ij)]


cdef extern from "_nf_check.h":
    unsigned CTOK_NF_NFC, CTOK_NF_NFKC, CTOK_NF_NFD, CTOK_NF_NFKD
    unsigned ctok_nf_props(uint32_t cp) nogil
    Py_ssize_t ctok_nf_scan(object text, Py_ssize_t i, unsigned mask)
    Py_ssize_t ctok_nf_boundary_before(object text, Py_ssize_t p, Py_ssize_t lo, unsigned mask)
    Py_ssize_t ctok_nf_boundary_after(object text, Py_ssize_t p, unsigned mask)
    Py_ssize_t ctok_nf_scan_short(object text, Py_ssize_t i, Py_ssize_t limit, unsigned mask)


cdef enum:
    # Doubtful characters closer than NF_JOIN_GAP to the previous doubtful stretch join it while it is shorter
    # than NF_STRETCH: a stretch costs a boundary walk and a scan besides its characters, so a text dense with
    # doubt (a mark on every letter: Vietnamese in NFD) goes by longer stretches, and a text that is not
    # normalized is found so within some NF_STRETCH characters.  Measured (one run, NFC): the multilingual UDHR
    # normalized with gaps of 0, 8 and 256 characters in 1.9, 2.3 and 3.5 ms; "e" + U+0301 100,000 times in
    # 6.2 ms with a gap of 0, 1.7 ms with these (unicodedata2: 3.5 ms).
    NF_JOIN_GAP = 8
    NF_STRETCH = 4096


cdef unsigned nf_mask(tuple forms) except? 0:
    # The CTOK_NF_* bits of `forms` (names as in a tokenizer.json normalizer).
    cdef unsigned mask = 0
    for form in forms:
        if form == "NFC":
            mask |= CTOK_NF_NFC
        elif form == "NFKC":
            mask |= CTOK_NF_NFKC
        elif form == "NFD":
            mask |= CTOK_NF_NFD
        elif form == "NFKD":
            mask |= CTOK_NF_NFKD
        else:
            raise ValueError(f"unknown Unicode normal form {form!r}")
    return mask


cdef extern from "_nf_normalize.h" nogil:
    void ctok_nf_tables_init()
    size_t ctok_nf_decomposed_len(const uint32_t* cps, size_t n, int compat)
    size_t ctok_nf_normalize(const uint32_t* cps, size_t n, int form, uint32_t* out, uint8_t* cc)

ctok_nf_tables_init()                   # once, at import (under the GIL): the normalizer's lookups read them


cdef Py_ssize_t stretch_end(str text, Py_ssize_t n, Py_ssize_t a, Py_ssize_t p, unsigned mask,
                            Py_ssize_t* doubt) except -1:
    # The end of the doubtful stretch from a holding p (a position the quick check doubts, a <= p < n): the first
    # boundary character after p, stretches that start closer than NF_JOIN_GAP after it joined in while it is
    # shorter than NF_STRETCH; *doubt: the next doubtful position past the stretch (n for none).
    cdef Py_ssize_t b = ctok_nf_boundary_after(text, p, mask)      # p < n
    cdef Py_ssize_t q = ctok_nf_scan_short(text, b, NF_JOIN_GAP, mask)     # b <= n, a boundary when b < n
    while q < n and q - b < NF_JOIN_GAP and b - a < NF_STRETCH:
        b = ctok_nf_boundary_after(text, q, mask)
        q = ctok_nf_scan_short(text, b, NF_JOIN_GAP, mask)
    doubt[0] = q if q < n and q - b < NF_JOIN_GAP else n if q >= n else ctok_nf_scan(text, b, mask)
    return b


cdef int next_stretch(str text, Py_ssize_t n, unsigned mask, Py_ssize_t* p, Py_ssize_t* a,
                      Py_ssize_t* b) except -1:
    # The next doubtful stretch, [*a, *b), around the doubt *p, and *p the next doubt past it; 0 when none is left
    # (*p >= n).  Start from *p = ctok_nf_scan(text, 0, mask) and *b = 0: *b is where the last stretch ended.
    if p[0] >= n:
        return 0
    a[0] = ctok_nf_boundary_before(text, p[0], b[0], mask)        # b <= p: 0 or the last stretch's end
    b[0] = stretch_end(text, n, a[0], p[0], mask, p)              # a <= p < b
    return 1


cdef struct NfBuffers:
    # Scratch of the native normalizer: a stretch's code points, its normal form, the classes beside it.
    uint32_t* cps
    uint32_t* out
    uint8_t* cc
    size_t cps_cap
    size_t out_cap


cdef void nf_buffers_free(NfBuffers* nb) noexcept:
    free(nb.cps)
    free(nb.out)
    free(nb.cc)


cdef size_t nf_stretch(str text, Py_ssize_t a, Py_ssize_t b, int form, NfBuffers* nb) except? 0:
    # nb.out[0:result] = the `form` normal form of text[a:b] (a < b); nb.cps[0:b - a] = its code points.
    cdef size_t i, n = <size_t>(b - a), m
    cdef int kind = PyUnicode_KIND(text)
    cdef const void* data = PyUnicode_DATA(text)
    cdef void* p
    if n > nb.cps_cap:
        p = realloc(nb.cps, n * sizeof(uint32_t))
        if p == NULL:
            raise MemoryError()
        nb.cps = <uint32_t*>p
        nb.cps_cap = n
    for i in range(n):
        nb.cps[i] = PyUnicode_READ(kind, data, a + <Py_ssize_t>i)        # a + i < b <= len(text)
    m = ctok_nf_decomposed_len(nb.cps, n, form & 1)
    if m > nb.out_cap:
        p = realloc(nb.out, m * sizeof(uint32_t))
        if p == NULL:
            raise MemoryError()
        nb.out = <uint32_t*>p
        p = realloc(nb.cc, m)
        if p == NULL:
            raise MemoryError()
        nb.cc = <uint8_t*>p
        nb.out_cap = m
    return ctok_nf_normalize(nb.cps, n, form, nb.out, nb.cc)


cdef inline bint nf_same(const NfBuffers* nb, size_t m, size_t n) noexcept:
    # The stretch's normal form (nb.out[0:m]) is the stretch itself (nb.cps[0:n]).
    return m == n and memcmp(nb.out, nb.cps, n * sizeof(uint32_t)) == 0


cdef extern from *:
    int __builtin_ctz(unsigned x) nogil


cdef int nf_form(str form) except -1:
    # A form's number in _nf_normalize.h: its CTOK_NF_* bit's place above the combining class (nf_mask names it).
    return __builtin_ctz(nf_mask((form,))) - 8


cdef Py_ssize_t first_doubt(str text, unsigned mask, Py_ssize_t* n) except -1:
    # Where the walks over text's doubtful stretches start (next_stretch's *p): its first doubt, *n (its length)
    # when it has none; ASCII text has none.  text: a ready str.
    n[0] = PyUnicode_GET_LENGTH(text)
    return n[0] if PyUnicode_IS_ASCII(text) else ctok_nf_scan(text, 0, mask)


cdef bint unchanged_by(str text, tuple forms, unsigned mask) except -1:
    # True when text is its own normal form under each of `forms` in turn (mask = nf_mask(forms)): what HF's
    # normalizer does to it is then nothing.  The quick check in C (_nf_check.h) settles almost every text;
    # only the stretches it doubts, cut at boundary characters (nothing before one interacts with anything
    # after it), are normalized (_nf_normalize.h), and the first stretch that changes ends the check: the slow
    # route then normalizes the text itself (nf_normalize).  Before, unicodedata2 normalized the whole text:
    # about 1 ns a character on normalized text (Dracula: 18.3M instructions, now 1.1M), and a whole
    # normalization to answer no (Python docs, one KELVIN SIGN: 232M, now 1.8M).
    cdef Py_ssize_t n, p, a, b = 0
    cdef size_t m
    cdef NfBuffers nb
    if not forms:
        return True
    p = first_doubt(text, mask, &n)
    if p >= n:
        return True
    codes = [nf_form(form) for form in forms]
    memset(&nb, 0, sizeof(nb))
    try:
        while next_stretch(text, n, mask, &p, &a, &b):
            for code in codes:
                m = nf_stretch(text, a, b, code, &nb)
                if not nf_same(&nb, m, <size_t>(b - a)):
                    return False
        return True
    finally:
        nf_buffers_free(&nb)


def _nf_spans(str text, str form):
    """Test hook: [(a, b), ...], the stretches of `text` that the quick check for the Unicode normal form `form` doubts, in
    order, apart, each starting at a boundary character (or 0) and ending at one (or the text's end): normalizing
    text[:j] and text[j:] apart equals normalizing text when text[j] is a boundary.  Outside the stretches the
    text passes the quick check, so it is its own normal form there: normalizing each stretch alone and keeping
    the rest normalizes the whole text (nf_normalize).  Close stretches are joined (NF_JOIN_GAP, NF_STRETCH)."""
    cdef unsigned mask = nf_mask((form,))
    cdef Py_ssize_t n, p, a, b = 0
    cdef list out = []
    ctok_str_ready(text)                # the scans read the code units
    p = first_doubt(text, mask, &n)
    while next_stretch(text, n, mask, &p, &a, &b):
        out.append((a, b))
    return out


def nf_normalize(str text, str form):
    """The `form` normalization of `text` (NFC, NFKC, NFD or NFKD) as HF's normalizers compute it; `text` itself
    when it is its own normal form.  Only the stretches the quick check doubts (_nf_spans) are normalized,
    natively (_nf_normalize.h); the rest is kept as it is."""
    cdef int code = nf_form(form)
    cdef unsigned mask = nf_mask((form,))
    cdef Py_ssize_t n, p, a, b = 0, kept = 0
    cdef size_t m
    cdef NfBuffers nb
    cdef list parts = []
    ctok_str_ready(text)                # the scans read the code units
    p = first_doubt(text, mask, &n)
    if p >= n:
        return text
    memset(&nb, 0, sizeof(nb))
    try:
        while next_stretch(text, n, mask, &p, &a, &b):
            m = nf_stretch(text, a, b, code, &nb)
            if not nf_same(&nb, m, <size_t>(b - a)):
                if a > kept:
                    parts.append(text[kept:a])
                parts.append(PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, nb.out, <Py_ssize_t>m))
                kept = b
    finally:
        nf_buffers_free(&nb)
    if not parts:
        return text
    if kept < n:
        parts.append(text[kept:])
    return "".join(parts)


cdef struct Route:
    # Which way a text goes (route_of): `all` finds every added token's text, `rest` those the core does
    # not split at (set_added_split); n = -1 in a FirstChars: too many first characters to scan for.
    FirstChars all
    FirstChars rest
    bint has_split


cdef enum:
    ROUTE_SLOW = 0          # the Python implementation
    ROUTE_PLAIN = 1         # the compiled encoder (through the prefix cache when on)
    ROUTE_SPLIT = 2         # the compiled encoder after the split at added tokens
    ROUTE_NORMALIZE = 3     # no added token, but the normal forms change the text: see normalized_plain


cdef int route_of(str text, const Route* r, list all_prefix, list rest_prefix, tuple forms,
                  unsigned nf) except -1:
    # Text holding no added token goes plain; text holding only tokens the core splits at goes split;
    # both only when the normal forms leave the text as it is (nf = nf_mask(forms)).
    if r.all.n >= 0 and holds_none(text, &r.all, all_prefix):
        return ROUTE_PLAIN if unchanged_by(text, forms, nf) else ROUTE_NORMALIZE
    if r.has_split and r.rest.n >= 0 and holds_none(text, &r.rest, rest_prefix):
        return ROUTE_SPLIT if unchanged_by(text, forms, nf) else ROUTE_SLOW
    return ROUTE_SLOW


def _find_char(str text, Py_UCS4 ch, Py_ssize_t start, Py_ssize_t end):
    """Test hook: ctok_find_char(text, ch, start, end), 0 <= start, end <= len(text)."""
    if start < 0 or end > len(text):
        raise ValueError("start and end must lie within the text")
    ctok_str_ready(text)
    return ctok_find_char(text, ch, start, end)


def _nf_unchanged(str text, tuple forms):
    """Test hook: unchanged_by(text, forms)."""
    return unchanged_by(text, forms, nf_mask(forms))


def _nf_quick(list texts, tuple forms):
    """Test hook: the C quick check alone on each str of `texts`, as bytes: 1 where it answers Yes."""
    cdef unsigned mask = nf_mask(forms)
    cdef bytearray out = bytearray(len(texts))
    cdef Py_ssize_t i
    for i in range(len(texts)):
        t = <str?>texts[i]
        if ctok_nf_scan(t, 0, mask) == PyUnicode_GET_LENGTH(t):
            out[i] = 1
    return bytes(out)


def _nf_props_table():
    """Test hook: ctok_nf_props of every code point U+0000..U+10FFFF, as bytes of native uint16."""
    cdef bytearray out = bytearray(0x110000 * 2)
    cdef uint16_t* o = <uint16_t*><char*>out
    cdef uint32_t cp
    for cp in range(0x110000):
        o[cp] = <uint16_t>ctok_nf_props(cp)                 # cp < 0x110000, the buffer's length in items
    return bytes(out)


cdef object normalized_plain(str text, object normalize, object plain, const Route* r, list all_prefix):
    # Text holding no added token that the normal forms change: HF matches no added token in it (none is
    # there raw), normalizes it whole (one segment), matches the normalized tokens in that, then
    # pre-tokenizes: so when the normalized text holds none either, its ids are plain(normalized).  None:
    # the caller takes the slow route.
    if normalize is None:
        return None
    normalized = normalize(text)
    if type(normalized) is not str or not holds_none(<str>normalized, &r.all, all_prefix):
        return None
    return plain(normalized)


cdef bint has_surrogate(str text):
    # A code point in U+D800..U+DFFF (only 2- and 4-byte strs can hold one).
    cdef Py_ssize_t i, n = PyUnicode_GET_LENGTH(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef const uint16_t* u2
    cdef const uint32_t* u4
    if kind == 2:
        u2 = <const uint16_t*>PyUnicode_DATA(text)
        for i in range(n):
            if <uint16_t>(u2[i] - 0xD800) < 0x800:          # i < n code units of 2 bytes
                return True
    elif kind == 4:
        u4 = <const uint32_t*>PyUnicode_DATA(text)
        for i in range(n):
            if u4[i] - 0xD800u < 0x800u:                      # i < n code units of 4 bytes
                return True
    return False


def clean_str_indices(list texts):
    """The indices of the exact strs among `texts` that hold no lone surrogate (a batch of SentencePiece-style
    templates: those go to the core's split together; the others one by one, refused as HF refuses them)."""
    return [i for i in range(len(texts)) if type(texts[i]) is str and not has_surrogate(<str>texts[i])]


cdef class PlainRoute:
    """Base of callables text -> ids that a CompiledRoute calls in C (see _encoder.pxd)."""
    cdef list call_plain(self, object text):
        raise NotImplementedError


cdef class CompiledRoute:
    """What FastEncode and FastOrdinary share: which texts the compiled encoder may take (route_of) and how.
    `names`: the added tokens' texts that send a text elsewhere; `split`: those the core splits at itself."""
    cdef object plain               # bound once (a method looked up per call costs more)
    cdef object split_plain
    cdef object split_all_plain     # every special allowed: the text split at specials and added tokens, or None
    cdef object normalize           # text -> its normal forms, as HF computes them (None: slow route)
    cdef Route route
    cdef list all_prefix
    cdef list rest_prefix
    cdef tuple forms                # Unicode normal forms HF applies first: only text they leave as is goes
    cdef unsigned nf_mask           # nf_mask(forms)
    cdef CoreEncoder core           # not None when plain is core.encode_str: called here without a Python call
    cdef PlainRoute plain_route     # not None when plain is a PlainRoute's method: the same, through call_plain

    cdef int set_route(self, CoreEncoder core, names, plain, tuple forms, split, normalize,
                       split_plain=None, split_all_plain=None) except -1:
        names = [name for name in names if name]
        self.all_prefix = first_chars_set(&self.route.all, names + [t for t in split if t])
        self.rest_prefix = first_chars_set(&self.route.rest, names)
        self.route.has_split = bool(split)
        self.forms = forms
        self.nf_mask = nf_mask(forms)
        self.plain = core.encode_str if plain is None else plain    # e.g. a PrefixCache.bind(core)
        self.core = core if plain is None or plain == core.encode_str else None
        owner = getattr(plain, "__self__", None)
        self.plain_route = owner if isinstance(owner, PlainRoute) and plain == owner.plain else None
        # split_plain: core.encode_str_split, or the same through a split PrefixCache
        self.split_plain = (core.encode_str_split if split_plain is None else split_plain) if split else None
        self.split_all_plain = split_all_plain
        self.normalize = normalize
        return 0

    def plain_texts(self, list texts):
        """(indices, prepared): the texts (exact strs holding no lone surrogate) whose ids under this route are the
        core's encode_str ids of prepared[k], so that a batch may encode them together without the GIL
        (CoreEncoder.encode_many): those that go plain (holding no added token, unchanged by the normal forms),
        prepared as they are, and those the normal forms change whose normal form holds no added token either,
        prepared normalized (normalized_plain's test; before, they went one by one, holding the GIL).  A lone
        surrogate must reach the slow route, which refuses it as HF does; encode_many would replace it."""
        cdef Py_ssize_t i
        cdef int way
        cdef list picked = [], prepared = []
        for i in range(len(texts)):
            t = texts[i]
            if type(t) is not str or has_surrogate(<str>t):
                continue
            way = route_of(<str>t, &self.route, self.all_prefix, self.rest_prefix, self.forms, self.nf_mask)
            if way == ROUTE_PLAIN:
                picked.append(i)
                prepared.append(t)
            elif way == ROUTE_NORMALIZE and self.normalize is not None:
                u = self.normalize(t)
                if type(u) is str and holds_none(<str>u, &self.route.all, self.all_prefix):
                    picked.append(i)
                    prepared.append(u)
        return picked, prepared

    def split_all_indices(self, list texts):
        """The indices of the texts (exact strs) that encode with every special token allowed hands to the core's
        split at every special token, whatever else the route would try first: no lone surrogate (refused as HF
        does), nothing for the normal forms to change (see FastEncode.call; text holding no added token gets
        the same ids from either)."""
        cdef Py_ssize_t i
        cdef list out = []
        for i in range(len(texts)):
            t = texts[i]
            if type(t) is str and not has_surrogate(<str>t) and unchanged_by(<str>t, self.forms, self.nf_mask):
                out.append(i)
        return out

    cdef object compiled(self, str text):
        # The ids by the compiled encoder, or None when the text must take the slow route.
        cdef int way = route_of(text, &self.route, self.all_prefix, self.rest_prefix, self.forms, self.nf_mask)
        try:
            if way == ROUTE_PLAIN:
                if self.core is not None:
                    return self.core._encode_str(text, NULL)
                if self.plain_route is not None:
                    return self.plain_route.call_plain(text)
                return self.plain(text)
            if way == ROUTE_SPLIT:
                return self.split_plain(text)
            if way == ROUTE_NORMALIZE:
                return normalized_plain(text, self.normalize, self.plain, &self.route, self.all_prefix)
        except UnicodeEncodeError:
            pass                        # a lone surrogate where the file refuses them: the slow route says so
        return None


cdef inline bint empty_collection(object x):
    return (type(x) is tuple or type(x) is frozenset or type(x) is set or type(x) is list) and len(x) == 0


cdef inline bint names_only(object allowed):
    # allowed_special values that only ever select special tokens ("all", or a collection of names; names
    # that are no special token are ignored, as tiktoken ignores them).
    return ((type(allowed) is str and allowed == "all") or type(allowed) is frozenset or type(allowed) is set
            or type(allowed) is tuple or type(allowed) is list)


cdef class FastEncode(CompiledRoute):
    """`Encoding.encode` for files whose ordinary text goes straight to the compiled encoder.

    The common call, encode(text) with the default special-token policy, only has to prove that the
    text holds no special token's text; when it holds none of the characters special tokens start with,
    it is encoded at once.  Text whose only added tokens are those the core splits at (`split`) is
    encoded by the core with that split.  Every other call goes to the full Python implementation (`slow`).
    Text holding no special token's text encodes the same under every policy that names special tokens only
    (allowed_special "all" or a set of names; disallowed_special "all" or empty: tiktoken's `disallowed_special=()`),
    so those calls take the compiled route too.  A disallowed collection of other strings may forbid text that
    is no special token, so it goes to `slow`.  add_special_tokens=True applies `post` (a tokenizer.json
    post-processor's tokens around the ids; None: the file has none, and the flag changes nothing)."""
    cdef object slow
    cdef object post

    def __init__(self, CoreEncoder core, slow, special_names, plain=None, *, tuple forms=(), split=(),
                 normalize=None, post=None, split_plain=None, split_all_plain=None):
        self.set_route(core, special_names, plain, forms, split, normalize, split_plain, split_all_plain)
        self.slow = slow
        self.post = post

    def __call__(self, text, *, allowed_special=_NO_SPECIALS, disallowed_special="all",
                 add_special_tokens=False):
        return self.call(text, allowed_special=allowed_special, disallowed_special=disallowed_special,
                         add_special_tokens=add_special_tokens)

    def call(self, text, *, allowed_special=_NO_SPECIALS, disallowed_special="all", add_special_tokens=False):
        """The same as calling this object (see FastOrdinary.call for why Encoding binds this method)."""
        if (type(text) is str
                and (allowed_special is _NO_SPECIALS or names_only(allowed_special))
                and (disallowed_special is "all" or empty_collection(disallowed_special)
                     or (type(disallowed_special) is str and disallowed_special == "all"))):
            ids = self.compiled(<str>text)
            if ids is None and type(allowed_special) is str and allowed_special == "all":
                ids = self._split_all(<str>text)
            if ids is not None:
                if add_special_tokens and self.post is not None:
                    return self.post(ids)
                return ids
        return self.slow(text, allowed_special=allowed_special, disallowed_special=disallowed_special,
                         add_special_tokens=add_special_tokens)

    cdef object _split_all(self, str text):
        # Every special token allowed (a chat template's output): split at the specials and the added tokens
        # together, as HF's added vocabulary does, when the normal forms leave the text as it is; else None.
        if self.split_all_plain is None or not unchanged_by(text, self.forms, self.nf_mask):
            return None
        try:
            return self.split_all_plain(text)
        except UnicodeEncodeError:
            return None                         # a lone surrogate: the slow route refuses it as HF does

    def split_all(self, text):
        """The ids of `text` with every special token allowed, by the core's split (no post-processor), or None
        when the text cannot go that way: not an exact str, no such split, normal forms that change it, a lone
        surrogate."""
        return self._split_all(<str>text) if type(text) is str else None


cdef class FastOrdinary(CompiledRoute):
    """`Encoding.encode_ordinary` for tokenizer.json files whose pipeline, on text holding no added
    token, is exactly the compiled encoder (no normalizer, a native pretokenizer): text that holds none of
    the strings `tokens` by the test of FirstChars goes straight to `plain` (`core.encode_str`, or the
    same through a prefix cache), text whose only such strings are the tokens in `split` to
    `core.encode_str_split`; all else to `slow`.  `tokens`: the added tokens' texts, without the special
    tokens' where they change nothing when encoded as text (HFPipeline.ordinary_tokens)."""
    cdef object slow

    def __init__(self, CoreEncoder core, slow, tokens, *, tuple forms=(), plain=None, split=(), normalize=None,
                 split_plain=None):
        self.set_route(core, tokens, plain, forms, split, normalize, split_plain)
        if self.route.rest.n < 0:
            raise ValueError("FastOrdinary: at most 8 first characters")
        self.slow = slow

    def __call__(self, text):
        return self.call(text)

    def call(self, text):
        """The same as calling this object.  Encoding binds this method, not the object: a method call takes
        CPython's vectorcall path, a call of the object builds an argument tuple (about 20 ns a call)."""
        if type(text) is str:
            ids = self.compiled(<str>text)
            if ids is not None:
                return ids
        return self.slow(text)


