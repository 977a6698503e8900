"""Prefix cache: reuse the token ids of the longest cached prefix that is provably split the same.

Why: LLM serving encodes many prompts that share a long prefix (system prompt, tool definitions, a chat
that grows by a turn per request).  `PrefixCache.encode(core, data)` finds the cached text sharing the
longest prefix with `data`, keeps the ids of that text up to a *safe cut*, and encodes only the rest.
Contract: the result always equals `core.encode_ordinary(data)`.

Structure.  Every cached text (an `_Entry`: the bytes, all its ids, and sparse checkpoints = piece
boundaries at least PREFIX_CK_EVERY bytes apart with the number of ids before them) owns trie nodes, one
per full PREFIX_BLOCK-byte block of its text: node k is keyed by a 64-bit hash of the text's first
k blocks (chained block hashes) and holds the slot of the most recent entry having that prefix.  Lookup
hashes the new text's blocks and probes from the deepest level up (one probe at level 1 first: a text
sharing no first block with anything costs one probe); the node's entry is then *verified byte for byte*
(a hash collision can only cost a miss, never a wrong result) and the common prefix extended bytewise.
Eviction is least-recently-used by entry, within a byte budget; a node dies with the entry that owns it.
What is kept: a text whose first block was never seen is only noted (admission: unrelated traffic costs a
hash and two probes, and no memory); a text that extends a cached text entirely (a chat growing by a turn)
replaces it, taking over its slot and so the nodes it owns (only the blocks past it get new nodes); otherwise
a text is kept when it adds at least min_bytes and 1/8 of the reused length of its own (so 1,000 prompts = one
system prompt + short messages keep one entry).  Texts under min_bytes are
encoded directly.  Entry points: `encode(core, bytes)`, `encode_str(core, str)` and `bind(core)`, a
drop-in for `core.encode_str` (Encoding's hot path); for SentencePiece-style encoders `encode_marked(core, str)`
and `bind_marked(core)`, keyed on core.marked_bytes(text) (spaces written as the marker, the marker in front by
a rule that reads the text's start only, so prompts sharing a start share it there too).

Safe cut (the proof).  The pretokenizer (`ctok._pretok.next_piece_end`) decides each piece from its start:
the piece starting at pos is a function of the bytes it examines, all at indices >= pos, and of tests
"index < n".  Let R(p) bound every index examined (or tested against n) by the decisions of all pieces
ending at or before the piece boundary p of the cached text A.  If R(p) < q, where q is the length of the
common prefix of A and the new text B, then every examined byte and every "index < n" test is the same
in A and B (both are longer than R(p)), so B's pieces up to p are A's pieces, p is a piece boundary of B,
and B's ids are A's ids before p followed by the pieces of B from p on (BPE is per piece).

Marker words (PRETOK_MARKER_WORDS, SentencePiece-style files) are the one kind whose decisions read before a
piece's start: a piece ends at each p where the marker starts and does not follow another marker, a test of
the bytes [p - m, p + m) (m the marker's length), so every boundary at or before c is decided by bytes below
c + m: R(c) = c + m - 1.  Their ids do not spell the text (byte-fallback tokens read "<0xXX>"), so their cut
is never counted out between checkpoints: it is the last checkpoint c with c + m <= q (find_cut).

`cut_read_bound(s, n, p)` computes such an R(p) from the text at p onward only.  Reading _pretok.pyx, the
decision of a piece [pos, e) examines, besides bytes inside the piece:
  * at most the first three characters starting at e (the peek that ends every run; a failed contraction
    test at pos or after a letter run reads up to e + 2 bytes; o200k's fast path reads pos + 2 <= e + 1;
    DeepSeek's gap ends at the first e where a match can start, which depends on the characters at e and
    after e only, even though its ds_match call reads further to compute a value that is then ignored);
  * for whitespace pieces (ws_tail), the whole run of White_Space characters from pos (for DeepSeek's gap,
    from e), which continues through e, plus the character after it;
  * for o200k/Kimi/Tekken letters, `[UP]*[LO]+` may scan a run of UP characters past the piece end
    (lastlo_end) plus the character after it; every alternative tried scans only letters (UP or LO) from
    pos or pos + 1 character, so beyond e only the letter run starting at e plus one character.
A character examined at i is read up to i + (length its lead byte announces) - 1: an unfinished UTF-8
character at the end of the common prefix counts as unknown.  Pieces ending before p: their first three
characters after their end lie before p or among the first three characters at p (both on the same
character grid), a run starting at their end that reaches p continues as the run starting at p, and a
character starting before p is read at most 3 bytes past its start.  Hence
  R(p) = max(p + 3, xend of the three characters at p, xend of the character ending the White_Space run at
             p, xend of the character ending the letter run at p)
where the letter run uses any of CT_L|CT_UP|CT_LO|CT_M (a superset for every kind, so also for Kimi's
Han-aware classes).  tests/test_prefix_cache.py checks the cut adversarially against the uncached encoder.

The str front.  A str prompt is converted to UTF-8 before the trie can be asked, and for a long prompt that
conversion cost as much as the rest of a hit.  An entry made from a str keeps the str, and a small table
(FRONT_SLOTS, keyed by samples of a str's first FRONT_UNITS code units and its kind) names the last such
entry per key: a str prompt is compared with that str's code units first, and only the part past the common
prefix is converted (the entry's UTF-8 stands for the rest; its byte length is counted from the nearer end of
the entry's str).  A text that extends the entry is kept at once (its match known, only its new blocks hashed,
an ASCII str's code units serving as its UTF-8); another text the general path would keep is handed to it
whole; any other is answered at once.  Prompts of another kind than the entry's str, and lone surrogates, take
the general path.

Split caches (PrefixCache(..., split=1): texts holding added tokens the encoder splits at, such as Qwen's
<think>; split=2: the same with every special token allowed, a chat template's output): ids are
core.encode_str_split's, the tokens found first (leftmost-longest) and each text between two encoded as a text
of its own.  An added token starting at i is decided by the bytes [i, i + its length), so those starting before
q - lmax + 1 (lmax: the longest added token) are the same in both texts, and so is every text between two of
them; find_cut cuts within that shorter common prefix.  A boundary it finds has ids spelling the text before it and its read bound below that prefix, so the
pieces before it are the same whatever the text between two tokens ends with.  Its walk from a checkpoint stops
at an added token (whose id spans text the walk reads as pieces); a checkpoint follows every added token.
A SentencePiece-style encoder's split cache (split=2, core.encode_marked_split's ids) keys on the text's UTF-8
too, but each text between two tokens is marked as a split of its own (the marker in front by the file's rule),
so its only checkpoints are the ends of added tokens: it resumes there, where a text between two starts.

Thread safety: a lock guards the node table, the LRU order and the counters; verification, the tail
encoding and list building run outside it (the tail with the GIL released).  An entry is immutable once
made, and the caller holds a reference to the entry it reuses, so a concurrent eviction cannot free it.
"""
from collections import OrderedDict
import threading

cimport cython

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.object cimport PyObject

cdef extern from "Python.h":
    ctypedef struct PyListObject:
        PyObject** ob_item
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL
    Py_ssize_t PyUnicode_GET_LENGTH(object s)
    bint PyUnicode_IS_ASCII(object s)
    int PyUnicode_KIND(object s)
    void* PyUnicode_DATA(object s)
    void* PyErr_Occurred()

cdef extern from "_utf8.h":
    const char* ctok_utf8_view(object text, Py_ssize_t* n, char** owned)
    int ctok_str_ready(object text) except -1
    ctypedef struct ctok_marker:
        uint8_t bytes[8]
        int len
    Py_ssize_t ctok_utf8_write_units_mk(object text, Py_ssize_t a, Py_ssize_t b, uint8_t* out,
                                        const ctok_marker* mk) noexcept nogil
    Py_ssize_t ctok_utf8_len_units(object text, Py_ssize_t a, Py_ssize_t b) noexcept nogil
    Py_ssize_t ctok_marked_len_units(object text, Py_ssize_t a, Py_ssize_t b, Py_ssize_t space_len) noexcept nogil

cdef extern from *:
    """
    /* The list of head[0:nh] (new references to the same objects) followed by the ints of ids[0:ni] and of
       tail[0:nt] (_int_list.h): one array filled once and taken by the list when complete, where a slice of
       the cached list plus `+=` would zero, copy and grow the array three times. */
    #include "_int_list.h"
    #define ctok_prefix_list ctok_int_list
    """
    list ctok_prefix_list(PyObject* const* head, Py_ssize_t nh, const uint32_t* ids, Py_ssize_t ni,
                          const uint32_t* tail, Py_ssize_t nt, PyObject** cache)
from cpython.pythread cimport (PyThread_type_lock, PyThread_allocate_lock, PyThread_free_lock,
                               PyThread_acquire_lock, PyThread_release_lock, WAIT_LOCK, NOWAIT_LOCK)
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int32_t
from libc.stdlib cimport malloc, calloc, realloc, free
from libc.string cimport memcpy, memcmp, memset, memmove

from ctok._vocab cimport Tables, NO_ID, mix64
from ctok._bpe cimport (IdVec, BpeScratch, BPE_OK, BPE_NOMEM, idvec_reserve, idvec_push, idvec_free,
                        scratch_init, scratch_free)
from ctok._pretok cimport (next_piece_end, ctok_char, PRETOK_N_KINDS, PRETOK_WHOLE, CT_WS, CT_L, CT_UP, CT_LO,
                           CT_M)
from ctok._encoder cimport (CoreEncoder, exact_str, EncoderState, encode_state_span, PRETOK_MARKER_WORDS,
                           PlainRoute, AddedSplit, AddedScan, added_next, encode_split, marked_room)

# Default byte budget of a PrefixCache (the Encoding setting / CTOK_PREFIX_CACHE_BYTES override it).
DEFAULT_PREFIX_CACHE_BYTES = 64 << 20
# Shorter texts go straight to the encoder (callers may skip the call below it): encoding them costs
# little, and the lookup's fixed cost would be a larger share of it.
DEFAULT_MIN_BYTES = 1024
BLOCK = PREFIX_BLOCK
CK_EVERY = PREFIX_CK_EVERY

cdef enum:
    LETTERS = CT_L | CT_UP | CT_LO | CT_M
    CUT_WINDOW = 96             # piece boundaries remembered while looking for the cut
    SEEN_SLOTS = 4096           # admission sketch size (a power of two)
    NODE_COST = 48              # bytes charged per trie node (table slot at load <= 1/2, plus slack)
    ENTRY_COST = 256            # bytes charged per entry for the object and its bookkeeping
    FRONT_SLOTS = 64            # the str front's table (a power of two)
    FRONT_UNITS = 512           # the str front serves strs of at least this many code points, keyed by these


# ---------------------------------------------------------------- the safe-cut bound

cdef inline Py_ssize_t xend(const uint8_t* s, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """Last index examined when the character at i is decoded (ctok_char), or n if i is at the end."""
    cdef uint8_t b
    if i >= n:
        return n
    b = s[i]                                      # i < n
    if b < 0xC2 or b >= 0xF5:
        return i
    if b < 0xE0:
        return i + 1
    if b < 0xF0:
        return i + 2
    return i + 3


cdef inline Py_ssize_t run_any(const uint8_t* s, Py_ssize_t n, Py_ssize_t i, uint16_t mask) noexcept nogil:
    """First index >= i whose character has none of the flags in mask (or n)."""
    cdef uint16_t f
    cdef Py_ssize_t k
    while i < n:
        k = ctok_char(s, n, i, &f)                # i < n
        if not (f & mask):
            break
        i += k
    return i


cdef Py_ssize_t cut_read_bound(const uint8_t* s, Py_ssize_t n, Py_ssize_t p) noexcept nogil:
    cdef Py_ssize_t r = p + 3, i = p, x
    cdef uint16_t f
    cdef int j
    for j in range(3):
        if i >= n:
            return n
        x = xend(s, n, i)
        if x > r:
            r = x
        i += ctok_char(s, n, i, &f)               # i < n
    x = xend(s, n, run_any(s, n, p, CT_WS))
    if x > r:
        r = x
    x = xend(s, n, run_any(s, n, p, LETTERS))
    if x > r:
        r = x
    return r


def read_bound(bytes data not None, Py_ssize_t p):
    """cut_read_bound on data at the piece boundary p (tests)."""
    if not 0 <= p <= len(data):
        raise ValueError("p out of range")
    return cut_read_bound(<const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), p)


# ---------------------------------------------------------------- hashing of block prefixes

cdef inline uint64_t rotl(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t block_hash(const uint8_t* s) noexcept nogil:
    # A sample of the block: four 8-byte words spread over its PREFIX_BLOCK bytes.  The hash only picks a
    # candidate entry; the common prefix is then measured byte for byte, so a block differing outside the
    # sample costs reuse at worst (the cut uses the measured prefix), never correctness.
    cdef uint64_t w0, w1, w2, w3
    memcpy(&w0, s, 8)                             # offsets + 8 <= PREFIX_BLOCK
    memcpy(&w1, s + 40, 8)
    memcpy(&w2, s + 80, 8)
    memcpy(&w3, s + PREFIX_BLOCK - 8, 8)
    return ((w0 * 0x9E3779B185EBCA87ULL) ^ rotl(w1 * 0xC2B2AE3D27D4EB4FULL, 17) ^
            rotl(w2 * 0x165667B19E3779F9ULL, 31) ^ rotl(w3 * 0x27D4EB2F165667C5ULL, 47))


cdef inline uint64_t chain_hash(uint64_t prev, const uint8_t* block, Py_ssize_t k) noexcept nogil:
    """Key of the node for the first k blocks, given the key for the first k - 1 (0 for k = 1)."""
    cdef uint64_t h = mix64((prev ^ block_hash(block)) * 0xBF58476D1CE4E5B9ULL + <uint64_t>k)
    return h if h != 0 else 1                     # 0 marks a free table slot


cdef inline uint64_t front_key(const uint8_t* raw, int kind) noexcept nogil:
    """Key of a str of at least FRONT_UNITS code points in the str front: samples of its first FRONT_UNITS code
    units (not UTF-8: the first and the last PREFIX_BLOCK bytes of them) and its kind.  Many prompts open
    alike ("You are a helpful assistant..."); a key over the first 512 code points tells most different
    system prompts apart, and a shared part shorter than that saves little conversion anyway."""
    cdef uint64_t h = mix64(block_hash(raw) ^ rotl(block_hash(raw + FRONT_UNITS * kind - PREFIX_BLOCK), 29)
                            ^ <uint64_t>kind)     # FRONT_UNITS * kind >= PREFIX_BLOCK
    return h if h != 0 else 1


cdef void prefix_hashes(const uint8_t* s, Py_ssize_t n_blocks, uint64_t* out) noexcept nogil:
    cdef uint64_t h = 0
    cdef Py_ssize_t k
    for k in range(n_blocks):
        h = chain_hash(h, s + k * PREFIX_BLOCK, k + 1)
        out[k] = h


# ---------------------------------------------------------------- encoding with checkpoints

cdef int encode_from(const EncoderState* st, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos, IdVec* out,
                     IdVec* ck, BpeScratch* sc) noexcept nogil:
    """Append the ids of the pieces of s[0:n] from the piece boundary pos on; record a checkpoint
    (offset, ids so far) at a piece boundary at least PREFIX_CK_EVERY bytes after the last.  The encoder's
    batched loop (encode_state_span) does the work, so a text that is kept costs what a plain encode does:
    its span ends, a few pieces past each requested stop, are the checkpoints."""
    cdef Py_ssize_t e, stop
    cdef int rc = BPE_OK
    while pos < n:
        stop = pos + PREFIX_CK_EVERY if pos + PREFIX_CK_EVERY < n else n    # pos < stop <= n
        rc = encode_state_span(st, s, n, pos, stop, out, sc, &e)
        if rc != BPE_OK:
            break
        pos = e                                   # a piece boundary, >= stop
        if pos < n:
            if idvec_push(ck, <uint32_t>pos) != BPE_OK or idvec_push(ck, <uint32_t>out.size) != BPE_OK:
                rc = BPE_NOMEM
                break
    return rc


cdef int encode_split_from(const EncoderState* st, const AddedSplit* added, const uint8_t* s, Py_ssize_t n,
                           Py_ssize_t pos, IdVec* out, IdVec* ck, BpeScratch* sc) noexcept nogil:
    """encode_from for a split cache: s[0:n] split at the added tokens from pos on (a piece boundary or an
    added token's end), each found appended as its id with a checkpoint after it, and each text between two
    encoded as a text of its own with its checkpoints (encode_str_split's ids).  The piece at pos starts a
    text here: the pieces from a piece boundary depend on the bytes from there on only (see the proof)."""
    cdef Py_ssize_t seg = pos, i, k = 0, j, before
    cdef AddedScan scan
    cdef int rc = BPE_OK
    scan.raw_at = -1
    while True:
        i = added_next(added, s, n, seg, &k, &scan)
        if i > seg:
            before = ck.size
            rc = encode_from(st, s + seg, i - seg, 0, out, ck, sc)
            j = before
            while j < ck.size:                    # its checkpoints' offsets are the gap's: make them the text's
                ck.data[j] += <uint32_t>seg
                j += 2
            if rc != BPE_OK:
                return rc
        if i >= n:
            return BPE_OK
        if idvec_push(out, added.ids[k]) != BPE_OK:          # k < added.n: set by added_next
            return BPE_NOMEM
        seg = i + (added.off[k + 1] - added.off[k])
        if seg < n and (idvec_push(ck, <uint32_t>seg) != BPE_OK or idvec_push(ck, <uint32_t>out.size) != BPE_OK):
            return BPE_NOMEM


cdef Py_ssize_t common_prefix(const uint8_t* a, const uint8_t* b, Py_ssize_t m) noexcept nogil:
    """Length of the longest common prefix of a[0:m] and b[0:m]."""
    cdef Py_ssize_t i = 0
    cdef uint64_t x, y
    while i + 256 <= m and memcmp(a + i, b + i, 256) == 0:
        i += 256
    while i + 8 <= m:
        memcpy(&x, a + i, 8)
        memcpy(&y, b + i, 8)
        if x != y:
            break
        i += 8
    while i < m and a[i] == b[i]:
        i += 1
    return i


cdef inline Py_ssize_t read_bound_at(const EncoderState* st, const uint8_t* a, Py_ssize_t an,
                                     Py_ssize_t c) noexcept nogil:
    # R(c) for the encoder's pretokenizer: marker words decide every boundary up to c from the bytes below
    # c + marker_len (each boundary test reads the marker-long spans on both sides of it, and the scan for
    # the next end stops at the first that passes); the native kinds read what cut_read_bound bounds.
    if st.pretok_kind == PRETOK_MARKER_WORDS:
        return c + st.marker_len - 1
    return cut_read_bound(a, an, c)


cdef Py_ssize_t find_cut(const EncoderState* st, const uint8_t* a, Py_ssize_t an, const uint32_t* ids,
                         Py_ssize_t n_ids, const uint32_t* ck, Py_ssize_t n_ck, Py_ssize_t q,
                         Py_ssize_t* n_before, Py_ssize_t split_lmax=0) noexcept nogil:
    """The largest piece boundary p of the cached text a[0:an] found safe for any text sharing a[0:q]
    (cut_read_bound(p) < q, or p = 0), and in n_before the number of ids before it.  split_lmax > 0: the ids
    are encode_str_split's, whose longest added token is split_lmax bytes.  An added token starting at i is
    decided by the bytes [i, i + its length), so those starting before q - split_lmax + 1 are the same in both
    texts, and so is the text between two of them: q is that.  The walk from a checkpoint stops at an added
    token (its id spans the token's text, which the walk reads as pieces); the boundaries found before it stand."""
    cdef Py_ssize_t lo = 0, hi = n_ck - 1, mid, j, c, pos, e, boff, nid, cnt = 0, i
    cdef Py_ssize_t bp[CUT_WINDOW]
    cdef Py_ssize_t bn[CUT_WINDOW]
    cdef const Tables* t = st.tables
    cdef int kind = st.pretok_kind
    if split_lmax > 0:
        q = q - split_lmax + 1 if q > split_lmax else 0
    while lo < hi:                                # largest j with ck offset <= q (ck[0] is offset 0)
        mid = (lo + hi + 1) >> 1
        if <Py_ssize_t>ck[2 * mid] <= q:
            lo = mid
        else:
            hi = mid - 1
    j = lo
    # Marker words (SentencePiece-style files): their ids do not spell the text (byte-fallback tokens read
    # "<0xXX>"), so no boundary is counted between checkpoints; the cut is a checkpoint (read_bound_at).
    if kind != PRETOK_MARKER_WORDS:
        c = ck[2 * j]
        nid = ck[2 * j + 1]
        # the piece boundaries after c that could be safe (cut_read_bound(e) >= e + 3 must stay below q)
        pos = c
        boff = c
        while pos + 4 <= q:
            e = next_piece_end(kind, a, an, pos)      # pos < q <= an
            if e + 4 > q:
                break
            while boff < e and nid < n_ids:           # tokens never straddle piece boundaries
                boff += <Py_ssize_t>(t.offsets[ids[nid] + 1] - t.offsets[ids[nid]])
                nid += 1
            if boff != e:
                if split_lmax > 0:
                    break                             # an added token: the boundaries before it stand
                n_before[0] = 0                       # ids do not spell the text: never guess
                return 0
            if cnt == CUT_WINDOW:                     # keep the last CUT_WINDOW (checkpoints make this rare)
                memmove(bp, bp + 1, (CUT_WINDOW - 1) * sizeof(Py_ssize_t))
                memmove(bn, bn + 1, (CUT_WINDOW - 1) * sizeof(Py_ssize_t))
                cnt -= 1
            bp[cnt] = e
            bn[cnt] = nid
            cnt += 1
            pos = e
        i = cnt - 1                                   # the latest safe one: usually within the last few
        while i >= 0:
            if cut_read_bound(a, an, bp[i]) < q:
                n_before[0] = bn[i]
                return bp[i]
            i -= 1
    while True:                                   # a run crossing q: back off to a checkpoint
        c = ck[2 * j]
        if c == 0 or read_bound_at(st, a, an, c) < q:
            n_before[0] = ck[2 * j + 1]
            return c
        j -= 1


cdef bint byte_exact(CoreEncoder core, bint text_only):
    """True when the ids of any text spell its bytes exactly (every byte is a token, byte-level symbols),
    which lets a cut's id count be found from token lengths.  text_only: for valid UTF-8 only, which never
    holds the bytes C0, C1 and F5-FF (GPT-NeoX's vocabulary, for one, has no token for them)."""
    cdef const Tables* t = core.state.tables
    cdef int b
    if core.state.opt.char_level:
        return False
    for b in range(256):
        if t.byte_id[b] == NO_ID and not (text_only and (b == 0xC0 or b == 0xC1 or b >= 0xF5)):
            return False
    return True


# ---------------------------------------------------------------- the cache

@cython.no_gc
cdef class _Entry:
    def __cinit__(self):
        self.ids = NULL
        self.ck = NULL
        self.n_ids = 0
        self.n_ck = 0
        self.slot = -1
        self.cut_q = -1

    def __dealloc__(self):
        free(self.ids)
        free(self.ck)


cdef class PrefixCache:
    """PrefixCache(max_bytes, min_bytes=1024): `encode(core, data)` == `core.encode_ordinary(data)`, reusing
    cached prefixes.  Texts shorter than min_bytes (or than one block) are neither looked up nor kept.

    max_bytes bounds the memory charged to cached texts, their ids, checkpoints and trie nodes (0: off,
    every call goes straight to the encoder).  Safe to share between threads and between encoders
    (entries are keyed by text only, so use one cache per encoder)."""

    def __cinit__(self):
        self._keys = NULL
        self._vals = NULL
        self._plock = PyThread_allocate_lock()
        if self._plock == NULL:
            raise MemoryError()
        self._seen = <uint64_t*>calloc(SEEN_SLOTS, sizeof(uint64_t))
        if self._seen == NULL:
            raise MemoryError()

    def __init__(self, Py_ssize_t max_bytes=DEFAULT_PREFIX_CACHE_BYTES, Py_ssize_t min_bytes=DEFAULT_MIN_BYTES,
                 *, int split=0):
        if max_bytes < 0 or min_bytes < 0:
            raise ValueError("max_bytes and min_bytes must be >= 0")
        if not 0 <= split <= 2:
            raise ValueError("split must be 0 (none), 1 (added tokens) or 2 (added and special tokens)")
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes
        self.split = split
        self._lru = OrderedDict()
        self._front = [None] * FRONT_SLOTS
        self._free_slots = []
        self._next_slot = 0
        self._n_nodes = 0
        self._bytes_used = 0
        self.hits = self.misses = self.reused_bytes = self.encoded_bytes = 0
        self.evictions = self.inserts = self.passthrough = self.front_hits = 0
        self._alloc_table(1024)

    def __dealloc__(self):
        free(self._keys)
        free(self._vals)
        free(self._seen)
        if self._plock != NULL:
            PyThread_free_lock(self._plock)

    cdef inline void _acquire(self) noexcept:
        # Called with the GIL held.  Never wait for the lock while holding the GIL: its holder may need
        # the GIL to finish (the sections under the lock run Python code).
        if not PyThread_acquire_lock(self._plock, NOWAIT_LOCK):
            with nogil:
                PyThread_acquire_lock(self._plock, WAIT_LOCK)

    cdef _alloc_table(self, Py_ssize_t cap):
        cdef uint64_t* keys = <uint64_t*>calloc(cap, sizeof(uint64_t))
        cdef int32_t* vals = <int32_t*>calloc(cap, sizeof(int32_t))
        if keys == NULL or vals == NULL:
            free(keys)
            free(vals)
            raise MemoryError()
        free(self._keys)
        free(self._vals)
        self._keys = keys
        self._vals = vals
        self._mask = cap - 1
        self._n_nodes = 0

    cdef int32_t _table_find(self, uint64_t h) noexcept:
        cdef uint64_t i = h & self._mask
        while self._keys[i] != 0:                 # the table is never full (load <= 1/2)
            if self._keys[i] == h:
                return self._vals[i]
            i = (i + 1) & self._mask
        return -1

    cdef int _table_put(self, uint64_t h, int32_t slot) except -1:
        cdef uint64_t i
        cdef uint64_t* old_keys
        cdef int32_t* old_vals
        cdef Py_ssize_t old_cap, k
        if (self._n_nodes + 1) * 2 > <Py_ssize_t>(self._mask + 1):
            old_keys = self._keys
            old_vals = self._vals
            old_cap = self._mask + 1
            self._keys = NULL
            self._vals = NULL
            try:
                self._alloc_table(old_cap * 2)
            except MemoryError:
                self._keys = old_keys
                self._vals = old_vals
                raise
            for k in range(old_cap):
                if old_keys[k] != 0:
                    i = old_keys[k] & self._mask
                    while self._keys[i] != 0:
                        i = (i + 1) & self._mask
                    self._keys[i] = old_keys[k]
                    self._vals[i] = old_vals[k]
                    self._n_nodes += 1
            free(old_keys)
            free(old_vals)
        i = h & self._mask
        while self._keys[i] != 0:
            if self._keys[i] == h:
                self._vals[i] = slot              # the newest entry with this prefix owns the node
                return 0
            i = (i + 1) & self._mask
        self._keys[i] = h
        self._vals[i] = slot
        self._n_nodes += 1
        return 0

    cdef void _table_del(self, uint64_t h, int32_t slot) noexcept:
        # Delete h if `slot` owns it; backward-shift deletion keeps linear probing exact.
        cdef uint64_t i = h & self._mask, j, ideal, mask = self._mask
        while True:
            if self._keys[i] == 0:
                return
            if self._keys[i] == h:
                break
            i = (i + 1) & mask
        if self._vals[i] != slot:
            return
        j = i
        while True:
            j = (j + 1) & mask
            if self._keys[j] == 0:
                break
            ideal = self._keys[j] & mask
            # keys[j] may move to i unless its ideal slot lies cyclically in (i, j]
            if (i <= j and (ideal <= i or ideal > j)) or (i > j and ideal <= i and ideal > j):
                self._keys[i] = self._keys[j]
                self._vals[i] = self._vals[j]
                i = j
        self._keys[i] = 0
        self._n_nodes -= 1

    cdef void _remove(self, _Entry e) except *:
        cdef const uint8_t* s = e.s
        cdef Py_ssize_t k, n_blocks = e.n // PREFIX_BLOCK
        cdef uint64_t h = 0
        cdef int32_t slot = <int32_t>e.slot
        if slot < 0:
            return
        for k in range(n_blocks):
            h = chain_hash(h, s + k * PREFIX_BLOCK, k + 1)
            self._table_del(h, slot)
        self._lru.pop(slot, None)
        if e.text is not None and self._front[e.front_key & (FRONT_SLOTS - 1)] is e:   # masked to its length
            self._front[e.front_key & (FRONT_SLOTS - 1)] = None
        self._free_slots.append(slot)
        self._bytes_used -= e.size
        e.slot = -1

    cdef void _count_lookup(self, Py_ssize_t p, Py_ssize_t n):
        # The counters of one lookup that reused p bytes of an n-byte text (the lock held).
        if p:
            self.hits += 1
            self.reused_bytes += p
        else:
            self.misses += 1
        self.encoded_bytes += n - p

    def encode(self, CoreEncoder core not None, bytes data not None):
        """core.encode_ordinary(data), reusing the ids of the longest safely cut cached prefix."""
        return self._encode(core, data, <const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), False,
                            None, False)

    def encode_str(self, CoreEncoder core not None, text):
        """core.encode_str(text) through the cache (a long text's UTF-8 made by ctok, as the encoder makes it)."""
        return self._encode_text(core, text)

    cdef list _encode_text(self, CoreEncoder core, object text):
        cdef Py_ssize_t n
        cdef const char* s
        cdef object holder, got
        if type(text) is not str:
            text = exact_str(text)
        ctok_str_ready(text)
        n = PyUnicode_GET_LENGTH(text)
        if (n >= self.min_bytes and n >= FRONT_UNITS and n < 0x3FFFFFF0
                and self.max_bytes != 0 and not self.split):
            got = self._encode_front(core, text, False)
            if got is not None:
                return got
        holder = _utf8_of(text, &s, &n)
        if holder is None:                        # lone surrogates: the encoder's own repair path
            if self.split and core.pretok_kind == PRETOK_MARKER_WORDS:
                return core.encode_marked_split(text)
            return core.encode_str_split(text, specials=self.split == 2) if self.split else core.encode_str(text)
        if n < self.min_bytes:
            return self._pass(core, holder, <const uint8_t*>s, n)
        return self._encode(core, holder, <const uint8_t*>s, n, True, text, False)

    cdef list _pass(self, CoreEncoder core, object data, const uint8_t* s, Py_ssize_t n):
        """s[0:n] encoded without the cache (data keeps it alive): the core's ids, split at its added tokens
        for a split cache."""
        cdef const AddedSplit* a
        if self.split:
            a = self._split_at(core)
            if a == NULL:
                raise ValueError("a split PrefixCache serves encoders with added tokens (set_added_split)")
            if core.pretok_kind == PRETOK_MARKER_WORDS:
                return core._encode_marked_split_utf8(s, n, core.marked_first_only)
            return core._encode_utf8(s, n, a)
        return _plain(core, data)

    cdef const AddedSplit* _split_at(self, CoreEncoder core) noexcept:
        # The added tokens a split cache splits at (NULL: the encoder has none of that kind).
        return core.added_all if self.split == 2 else core.added

    cdef bint _serves(self, CoreEncoder core, bint is_text):
        """Whether the cache may serve core (a native pretokenizer, ids that spell their bytes: see
        byte_exact) for str input (is_text) or for any bytes."""
        cdef int kind = core.pretok_kind
        cdef bint kind_ok
        cdef Py_ssize_t k
        cdef const AddedSplit* a
        if core is not self._served:
            kind_ok = PRETOK_WHOLE < kind < PRETOK_N_KINDS
            self._served_ok = kind_ok and byte_exact(core, False)
            self._served_text_ok = kind_ok and byte_exact(core, True)
            if kind == PRETOK_MARKER_WORDS:       # cut at checkpoints only (find_cut): ids need not spell bytes
                # A split cache keys on the text's UTF-8 (strs only) and its checkpoints are the ends of added
                # tokens (encode_split): the texts between two are marked each as a split of its own.
                self._served_ok = not self.split
                self._served_text_ok = not self.split or self.split == 2
            if self.split:
                # encode_str_split's ids: the encoder's added tokens first (none: nothing to serve)
                a = self._split_at(core)
                if a == NULL:
                    self._served_ok = self._served_text_ok = False
                else:
                    self._split_lmax = a.lmax
            self._served = core
        return self._served_text_ok if is_text else self._served_ok

    cdef object _encode_front(self, CoreEncoder core, str text, bint marked):
        """The str front: text's ids, or None when the general path must answer.  A str prompt sharing a long
        start with the str a cached entry was made from is compared with that str's code units (a memcmp),
        so the shared part is never converted to UTF-8: the entry's own UTF-8 stands for it.  Only the rest
        is converted, and when the text is not to be kept (a short new part, as the general path decides),
        only that rest is encoded, from the safe cut p (the pieces from a piece boundary depend on the bytes
        from there on only: see the proof above; marker words' boundary test reads a marker-long span before a
        boundary, so the encoder is also given that span before p, as it sees it in the whole text).  The candidate is the last entry made from a str whose first FRONT_UNITS code units look the
        same (front_key); a deeper entry the trie would find can only be missed when the new part is short
        (else the text is kept, through the general path).
        marked: text is for encode_marked (SentencePiece-style encoders), whose bytes are core.marked_bytes(text):
        every space written as the marker, and the marker in front by a rule that reads the text's first
        marker-long bytes, so two strs sharing at least 8 code units (a marker is at most 8 bytes) share it."""
        cdef int kind = PyUnicode_KIND(text)
        cdef Py_ssize_t units = PyUnicode_GET_LENGTH(text), e_units, m, qc, qb, p, n_p = 0, got, n, end
        cdef const uint8_t* raw = <const uint8_t*>PyUnicode_DATA(text)
        cdef const uint8_t* eraw
        cdef uint64_t key = front_key(raw, kind)  # units >= FRONT_UNITS (_encode_text)
        cdef _Entry e
        cdef object et
        cdef _Utf8Copy full
        cdef uint8_t* buf = NULL
        cdef IdVec out
        cdef BpeScratch sc
        cdef BpeScratch* scp
        cdef const EncoderState* st = &core.state
        cdef int rc
        cdef bint keep
        cdef object owner
        cdef const uint8_t* s
        cdef uint64_t* hashes = NULL
        cdef uint64_t h
        cdef Py_ssize_t n_blocks, first, k, c0, pre
        cdef ctok_marker mk
        cdef const ctok_marker* mkp = NULL
        cdef Py_ssize_t ctx = 0                   # bytes before the cut given to the encoder (marker words)
        cdef Py_ssize_t per = kind + 1 if kind < 4 else 4    # UTF-8 bytes per code unit at most
        cdef uint8_t head[96]                     # 8 code units marked, and the slack: at most 8 * 8 + 8 bytes
        if not self._serves(core, True):
            return None
        # A look without the lock first (the GIL keeps the list read whole): unrelated texts take no lock here.
        e = <_Entry>self._front[key & (FRONT_SLOTS - 1)]       # masked to its length
        if e is None or e.front_key != key or e.marked != marked:
            return None
        self._acquire()
        try:
            if e.slot < 0:                        # evicted meanwhile
                return None
            self._lru.move_to_end(e.slot)
        finally:
            PyThread_release_lock(self._plock)
        et = e.text
        if PyUnicode_KIND(et) != kind:
            return None
        e_units = PyUnicode_GET_LENGTH(et)
        eraw = <const uint8_t*>PyUnicode_DATA(et)
        m = units if units < e_units else e_units
        if m * kind <= 65536:                     # short work: releasing the GIL would cost more
            qc = common_prefix(raw, eraw, m * kind) // kind
        else:
            with nogil:
                qc = common_prefix(raw, eraw, m * kind) // kind
        if qc == units and units == e_units:      # the same text again
            self._acquire()
            try:
                self.hits += 1
                self.front_hits += 1
                self.reused_bytes += e.n
            finally:
                PyThread_release_lock(self._plock)
            return self._ids_list(core, e, e.n_ids, NULL, 0)
        # where character qc starts in the entry's UTF-8 (marked: its marked bytes), counted from the nearer end
        if not marked:
            qb = ctok_utf8_len_units(et, 0, qc) if qc <= e_units - qc else e.n - ctok_utf8_len_units(et, qc, e_units)
        else:
            if qc < 8:
                return None                       # the marker-in-front rule may read past the shared start
            memset(&mk, 0, sizeof(ctok_marker))
            memcpy(mk.bytes, st.marker, st.marker_len)     # <= 8 bytes (checked at construction)
            mk.len = st.marker_len
            mkp = &mk
            ctx = st.marker_len
            if per < ctx:
                per = ctx
            if qc <= e_units - qc:
                # whether the entry's bytes open with the marker put in front: decided by its first 8 code
                # units' marked bytes, as marked_bytes decides it
                k = ctok_utf8_write_units_mk(et, 0, 8, head, mkp)
                pre = st.marker_len if core._prepends(head, k) else 0
                qb = pre + ctok_marked_len_units(et, 0, qc, st.marker_len)
            else:
                qb = e.n - ctok_marked_len_units(et, qc, e_units, st.marker_len)
        # Prompts = one shared prefix + a message mostly end their common prefix at the same place: the cut
        # found for it last time is the cut again (find_cut is a function of the entry and q).
        if e.cut_q == qb:
            p = e.cut_p
            n_p = e.cut_n
        else:
            p = find_cut(st, e.s, e.n, e.ids, e.n_ids, e.ck, e.n_ck, qb, &n_p)   # from a checkpoint: short
            e.cut_q = qb
            e.cut_p = p
            e.cut_n = n_p
        out.data = NULL; out.size = 0; out.cap = 0
        try:
            # the text's bytes from c0 (the cut, less the bytes before it that decide pieces after it): the
            # entry's bytes up to qb, then the rest converted (a marker's slack past the end)
            c0 = p - ctx if p > ctx else 0
            buf = <uint8_t*>malloc(qb - c0 + (units - qc) * per + 16)
            if buf == NULL:
                raise MemoryError()
            memcpy(buf, e.s + c0, qb - c0)        # c0 <= p <= qb <= e.n
            got = ctok_utf8_write_units_mk(text, qc, units, buf + (qb - c0), mkp)
            if got < 0:
                return None                       # a surrogate: the general path repairs it, or raises
            n = qb + got
            if n >= 0xFFFFFFF0:
                return None
            # the general path's rule (q = qb, an = e.n): kept when it extends the entry or adds enough
            keep = qb == e.n or (n - qb >= self.min_bytes and n - qb >= qb // 8)
            if qb == n:
                keep = False                      # a prefix of the entry's text
            if keep:
                if PyUnicode_IS_ASCII(text) and not marked:
                    owner = text                  # its code units are its UTF-8
                    s = raw
                else:
                    full = _Utf8Copy()
                    full.buf = <char*>malloc(n + 1)
                    if full.buf == NULL:
                        raise MemoryError()
                    memcpy(full.buf, e.s, c0)
                    memcpy(full.buf + c0, buf, n - c0)
                    full.n = n
                    owner = full
                    s = <const uint8_t*>full.buf
                if qb < e.n:
                    return self._encode(core, owner, s, n, True, text, marked)
                # It extends the entry (a chat grown by a turn): the match is known, and only the node keys
                # of the blocks past the entry's are needed (chained from its tail_hash).
                n_blocks = n // PREFIX_BLOCK
                first = e.n // PREFIX_BLOCK
                hashes = <uint64_t*>malloc((n_blocks if n_blocks else 1) * sizeof(uint64_t))
                if hashes == NULL:
                    raise MemoryError()
                h = e.tail_hash
                for k in range(first, n_blocks):
                    h = chain_hash(h, s + k * PREFIX_BLOCK, k + 1)   # k < n_blocks: the block is inside s
                    hashes[k] = h
                result = self._finish(core, owner, s, n, text, marked, e, qb, p, n_p, True, hashes, first)
                self._acquire()
                self.front_hits += 1
                PyThread_release_lock(self._plock)
                return result
            if idvec_reserve(&out, (n - p) // 3 + 16) != BPE_OK:
                raise MemoryError()
            scp = core.take_scratch(&sc)
            if n - p < 2048:
                rc = encode_state_span(st, buf, n - c0, p - c0, n - c0, &out, scp, &end)
            else:
                with nogil:
                    rc = encode_state_span(st, buf, n - c0, p - c0, n - c0, &out, scp, &end)
            core.give_scratch(scp, &sc)
            if rc != BPE_OK:
                raise MemoryError()
            result = self._ids_list(core, e, n_p, out.data, out.size)
            self._acquire()
            try:
                self._count_lookup(p, n)
                self.front_hits += 1
            finally:
                PyThread_release_lock(self._plock)
            return result
        finally:
            free(buf)
            free(hashes)
            idvec_free(&out)

    def bind(self, CoreEncoder core not None):
        """A callable text -> ids: `core.encode_str` through this cache (a drop-in for it; a bound method,
        which Python calls about as cheaply as core.encode_str itself)."""
        return _BoundEncode(self, core).encode_str

    def encode_marked(self, CoreEncoder core not None, text):
        """core.encode_marked(text) through the cache, for SentencePiece-style encoders (PRETOK_MARKER_WORDS):
        the cache keys on core.marked_bytes(text), the text as that encoder sees it.  Two prompts sharing a
        start share it there too (the marker goes in front by a rule that reads the text's start only)."""
        return self._encode_marked_text(core, text)

    cdef list _encode_marked_text(self, CoreEncoder core, object text):
        cdef bytes data
        if self.split:
            raise ValueError("a split PrefixCache serves encode_str_split, not encode_marked")
        if type(text) is not str:
            text = exact_str(text)
        cdef object got
        if self.max_bytes == 0 or PyUnicode_GET_LENGTH(text) < self.min_bytes:
            return core._encode_marked(text)
        ctok_str_ready(text)
        if PyUnicode_GET_LENGTH(text) >= FRONT_UNITS and PyUnicode_GET_LENGTH(text) < 0x3FFFFFF0:
            got = self._encode_front(core, text, True)
            if got is not None:
                return got
        data = core.marked_bytes(text)
        return self._encode(core, data, <const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), True,
                            text, True)

    def bind_marked(self, CoreEncoder core not None):
        """A callable text -> ids: `core.encode_marked` through this cache."""
        return _BoundMarked(self, core).encode_marked

    cdef list _encode(self, CoreEncoder core, object data, const uint8_t* s, Py_ssize_t n, bint is_text,
                      object text, bint marked):
        # data: the bytes, str or _Utf8Copy whose UTF-8 form is s[0:n]; a kept entry holds it (and so the buffer).
        # is_text: s[0:n] is valid UTF-8 (a str's); bytes input may hold any byte.  text: the exact str whose
        # UTF-8 s is (marked: whose marked bytes s is), kept by a kept entry for the str front, or None.
        cdef Py_ssize_t n_blocks = n // PREFIX_BLOCK, k, level = 0, q = 0, p = 0, n_p = 0
        cdef const EncoderState* st = &core.state
        cdef int32_t slot
        cdef uint64_t* hashes
        cdef _Entry old = None
        cdef const uint8_t* a
        cdef Py_ssize_t an = 0
        cdef bint keep
        cdef uint64_t small_hashes[64]
        if (self.max_bytes == 0 or n_blocks == 0 or n < self.min_bytes or n >= 0xFFFFFFF0
                or not self._serves(core, is_text)):
            self.passthrough += 1
            return self._pass(core, data, s, n)
        if n_blocks <= 64:
            hashes = small_hashes
        else:
            hashes = <uint64_t*>malloc(n_blocks * sizeof(uint64_t))
            if hashes == NULL:
                raise MemoryError()
        try:
            if n_blocks <= 512:
                prefix_hashes(s, n_blocks, hashes)
            else:
                with nogil:
                    prefix_hashes(s, n_blocks, hashes)
            # ---- lookup: the deepest node of this text's prefix, under the lock
            self._acquire()
            try:
                if self._table_find(hashes[0]) < 0:
                    # Nothing cached starts like this text.  Admission: keep a text only once its first block
                    # has been seen before, so a stream of unrelated texts costs a hash and two probes.
                    if self._seen[hashes[0] & (SEEN_SLOTS - 1)] != hashes[0]:
                        self._seen[hashes[0] & (SEEN_SLOTS - 1)] = hashes[0]
                        self.misses += 1
                        self.encoded_bytes += n
                        level = -1
                else:
                    k = n_blocks
                    while k >= 1:
                        slot = self._table_find(hashes[k - 1])
                        if slot >= 0:
                            old = self._lru[slot]
                            self._lru.move_to_end(slot)
                            level = k
                            break
                        k -= 1
            finally:
                PyThread_release_lock(self._plock)
            if level < 0:
                return self._pass(core, data, s, n)
            # ---- verify the match byte for byte, extend it, find the cut (outside the lock)
            if old is not None:
                a = old.s
                an = old.n
                with nogil:
                    q = common_prefix(s, a, n if n < an else an)
                    if not (q == n and n == an):
                        p = find_cut(st, a, an, old.ids, old.n_ids, old.ck, old.n_ck, q, &n_p,
                                     self._split_lmax if self.split else 0)
                if q == n and n == an:                   # the same text again
                    self._acquire()
                    try:
                        self.hits += 1
                        self.reused_bytes += n
                    finally:
                        PyThread_release_lock(self._plock)
                    return self._ids_list(core, old, old.n_ids, NULL, 0)
            # Keep the new text when nothing starts like it, when it extends the text it matched (a growing
            # chat: it replaces it), or when it adds enough of its own: at least min_bytes and 1/8 of the
            # reused part (many requests = one shared prefix + a short message then keep one entry).
            keep = old is None or q == an or (n - q >= self.min_bytes and n - q >= q // 8)
            if old is not None and q == n:
                keep = False                      # a prefix of a cached text
            return self._finish(core, data, s, n, text, marked, old, q, p, n_p, keep, hashes, 0)
        finally:
            if hashes != small_hashes:
                free(hashes)

    cdef list _finish(self, CoreEncoder core, object data, const uint8_t* s, Py_ssize_t n, object text, bint marked,
                      _Entry old, Py_ssize_t q, Py_ssize_t p, Py_ssize_t n_p, bint keep, uint64_t* hashes,
                      Py_ssize_t hashes_from):
        """The ids of s[0:n]: old's ids before the safe cut p (n_p of them; old None: p = 0), then the pieces
        from p on, encoded with the GIL released; a kept text becomes a new entry owning them (_insert).
        q: the common prefix with old.  hashes[k] for k >= hashes_from: the node keys of s's blocks (those
        below are computed when needed)."""
        cdef Py_ssize_t n_blocks = n // PREFIX_BLOCK, j, size, base
        cdef const EncoderState* st = &core.state
        cdef const AddedSplit* split_at
        cdef bint marked_split
        cdef uint8_t* mbuf = NULL
        cdef int rc
        cdef _Entry new
        cdef IdVec out, ck
        cdef BpeScratch sc
        cdef BpeScratch* scp
        out.data = NULL; out.size = 0; out.cap = 0
        ck.data = NULL; ck.size = 0; ck.cap = 0
        try:
            # ---- the ids before the cut, then encode the rest with the GIL released
            base = n_p if keep else 0
            if idvec_reserve(&out, base + (n - p) // 3 + 16) != BPE_OK or idvec_reserve(&ck, 16) != BPE_OK:
                raise MemoryError()
            if base:
                memcpy(out.data, old.ids, n_p * sizeof(uint32_t))
                out.size = n_p
            if keep and old is not None:
                j = 0
                while j < old.n_ck and <Py_ssize_t>old.ck[2 * j] <= p:
                    if idvec_push(&ck, old.ck[2 * j]) != BPE_OK or idvec_push(&ck, old.ck[2 * j + 1]) != BPE_OK:
                        raise MemoryError()
                    j += 1
            if ck.size == 0 or <Py_ssize_t>ck.data[ck.size - 2] < p:
                if idvec_push(&ck, <uint32_t>p) != BPE_OK or idvec_push(&ck, <uint32_t>n_p) != BPE_OK:
                    raise MemoryError()
            split_at = self._split_at(core)
            marked_split = self.split and st.pretok_kind == PRETOK_MARKER_WORDS
            if marked_split:
                mbuf = <uint8_t*>malloc(marked_room(st, n - p))
                if mbuf == NULL:
                    raise MemoryError()
            scp = core.take_scratch(&sc)
            with nogil:
                if marked_split:
                    # p is 0 or an added token's end (the only checkpoints of this split): the text between two
                    # starts there, as encode_split needs.  mbuf: room for the rest, s[p:n], marked.
                    rc = encode_split(st, split_at, s, n, p, mbuf, core.marker_prepend,
                                             core.marked_first_only, &out, &ck, scp)
                elif self.split:
                    rc = encode_split_from(st, split_at, s, n, p, &out, &ck, scp)   # not NULL: _serves checked it
                else:
                    rc = encode_from(st, s, n, p, &out, &ck, scp)
            core.give_scratch(scp, &sc)
            free(mbuf)
            mbuf = NULL
            if rc != BPE_OK:
                raise MemoryError()
            result = self._ids_list(core, old, n_p, out.data + base, out.size - base)
            # ---- keep it: a new entry owning out and ck
            size = (n + out.size * sizeof(uint32_t) + ck.size * sizeof(uint32_t) + n_blocks * NODE_COST + ENTRY_COST
                    + (n_p if old is not None and old.pylist is not None else 0) * sizeof(void*))
            if text is not None and (data is text or PyUnicode_GET_LENGTH(text) >= FRONT_UNITS):
                size += PyUnicode_GET_LENGTH(text) * PyUnicode_KIND(text)   # the str's own code units, kept
            self._acquire()
            try:
                self._count_lookup(p, n)
                if keep and size <= self.max_bytes:
                    new = _Entry()
                    new.owner = data
                    new.s = s
                    new.n = n
                    new.ids = <uint32_t*>realloc(out.data, (out.size if out.size else 1) * sizeof(uint32_t))
                    if new.ids == NULL:
                        new.ids = out.data
                    new.n_ids = out.size
                    out.data = NULL; out.size = 0; out.cap = 0
                    new.ck = ck.data
                    new.n_ck = ck.size // 2
                    ck.data = NULL; ck.size = 0; ck.cap = 0
                    new.size = size
                    if text is not None and PyUnicode_GET_LENGTH(text) >= FRONT_UNITS:
                        new.text = text           # front_key reads FRONT_UNITS code units
                        new.marked = marked
                        new.front_key = front_key(<const uint8_t*>PyUnicode_DATA(text), PyUnicode_KIND(text))
                    if n_p and old.pylist is not None:
                        new.pylist = old.pylist               # shared: its first n_p items are also our ids
                        new.pylist_n = n_p if n_p < old.pylist_n else old.pylist_n
                    self._insert(new, old, old is not None and q == old.n, s, hashes, hashes_from)
                while self._bytes_used > self.max_bytes and self._lru:   # the new entry alone fits
                    self._remove(self._lru[next(iter(self._lru))])
                    self.evictions += 1
            finally:
                PyThread_release_lock(self._plock)
            return result
        finally:
            idvec_free(&out)
            idvec_free(&ck)
            free(mbuf)

    cdef void _insert(self, _Entry new, _Entry old, bint extends, const uint8_t* s, uint64_t* hashes,
                      Py_ssize_t hashes_from) except *:
        """Cache new (the lock held), with a node per block of its text: hashes[k] for the first k + 1 blocks.
        A text that extends old entirely (a chat grown by a turn) takes old's place, slot included: the nodes
        old owns are keyed by old's blocks, which are new's first blocks, so they now lead to new, and only
        the blocks past old's get nodes.  Nothing is rehashed, deleted or put again for the shared part, and
        the keys below hashes_from are never needed.  Otherwise every block's node is put (computing the keys
        below hashes_from from s), the newest entry with that prefix owning it."""
        cdef Py_ssize_t n_blocks = new.n // PREFIX_BLOCK, k, first = 0
        cdef int32_t slot
        if extends and old.slot >= 0:
            slot = <int32_t>old.slot
            first = old.n // PREFIX_BLOCK
            del self._lru[slot]                   # re-added below, as the most recent
            if old.text is not None and self._front[old.front_key & (FRONT_SLOTS - 1)] is old:   # masked
                self._front[old.front_key & (FRONT_SLOTS - 1)] = None
            self._bytes_used -= old.size
            old.slot = -1
        else:
            if hashes_from > 0:
                prefix_hashes(s, hashes_from, hashes)
            if self._free_slots:
                slot = self._free_slots.pop()
            else:
                slot = <int32_t>self._next_slot
                self._next_slot += 1
        new.slot = slot
        if n_blocks > first:
            new.tail_hash = hashes[n_blocks - 1]
        elif n_blocks > 0:
            new.tail_hash = old.tail_hash         # first = n_blocks: old's blocks are all of new's
        self._lru[slot] = new
        self._bytes_used += new.size
        self.inserts += 1
        for k in range(first, n_blocks):
            self._table_put(hashes[k], slot)
        if new.text is not None:
            self._front[new.front_key & (FRONT_SLOTS - 1)] = new   # masked to its length

    cdef list _ids_list(self, CoreEncoder core, _Entry old, Py_ssize_t n_p, const uint32_t* tail,
                        Py_ssize_t tail_n):
        """The result list: old's ids[:n_p] (their ints taken from old's Python list of its ids, made and kept
        on first use: copying list items costs a reference count each, half of making them from ids), then
        tail, built in one pass."""
        cdef IdVec view
        cdef Py_ssize_t have = 0
        cdef PyObject** items = NULL
        if core.int_cache == NULL:
            view.data = NULL; view.size = 0; view.cap = 0
            core.ids_to_list(&view)               # makes the encoder's int cache
        if old is None:
            n_p = 0
        elif n_p >= 64:
            if old.pylist is None or old.pylist_n < n_p // 2:   # none, or it covers too little: (re)make it
                view.data = old.ids; view.size = old.n_ids; view.cap = old.n_ids
                old.pylist = core.ids_to_list(&view)
                old.pylist_n = old.n_ids
                self._acquire()
                try:
                    if old.slot >= 0:             # charge it to the entry that made it
                        old.size += old.n_ids * sizeof(void*)
                        self._bytes_used += old.n_ids * sizeof(void*)
                        while self._bytes_used > self.max_bytes and self._lru:
                            self._remove(self._lru[next(iter(self._lru))])
                            self.evictions += 1
                finally:
                    PyThread_release_lock(self._plock)
            have = n_p if n_p < old.pylist_n else old.pylist_n
            items = (<PyListObject*>old.pylist).ob_item   # pylist is private, never resized: have <= its size
        return ctok_prefix_list(<PyObject* const*>items, have, old.ids + have if old is not None else NULL,
                                n_p - have, tail, tail_n, core.int_cache)

    def clear(self):
        """Drop every cached text (the counters stay)."""
        self._acquire()
        try:
            for e in list(self._lru.values()):
                (<_Entry>e).slot = -1
            self._lru.clear()
            self._front = [None] * FRONT_SLOTS
            self._free_slots = []
            self._next_slot = 0
            self._bytes_used = 0
            memset(self._keys, 0, (self._mask + 1) * sizeof(uint64_t))
            memset(self._seen, 0, SEEN_SLOTS * sizeof(uint64_t))
            self._n_nodes = 0
        finally:
            PyThread_release_lock(self._plock)

    def stats(self):
        """Counters: hits (reused a prefix), misses, reused_bytes, encoded_bytes, evictions, entries, nodes,
        bytes_used, max_bytes, inserts, passthrough (texts too short or an encoder the cache cannot serve),
        front_hits (str texts answered by the str front, without the trie: a subset of hits and misses)."""
        self._acquire()
        try:
            return {
                "hits": self.hits, "misses": self.misses, "reused_bytes": self.reused_bytes,
                "encoded_bytes": self.encoded_bytes, "evictions": self.evictions, "entries": len(self._lru),
                "nodes": self._n_nodes, "bytes_used": self._bytes_used, "max_bytes": self.max_bytes,
                "inserts": self.inserts, "passthrough": self.passthrough, "front_hits": self.front_hits,
            }
        finally:
            PyThread_release_lock(self._plock)

    def __len__(self):
        return len(self._lru)

    def __repr__(self):
        return f"<ctok PrefixCache entries={len(self._lru)} bytes_used={self._bytes_used} max_bytes={self.max_bytes}>"


cdef inline list _plain(CoreEncoder core, object data):
    if type(data) is bytes:                       # core.encode_ordinary(data), without its Python call
        return _direct(core, <const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    if type(data) is _Utf8Copy:
        return _direct(core, <const uint8_t*>(<_Utf8Copy>data).buf, (<_Utf8Copy>data).n)
    return core.encode_str(data)


@cython.final
cdef class _Utf8Copy:
    """The UTF-8 form of a long str made by ctok_utf8_view (_utf8.h), owned here: an entry that keeps the text
    keeps this, and the str itself is neither held nor given CPython's own UTF-8 copy."""
    cdef char* buf
    cdef Py_ssize_t n

    def __cinit__(self):
        self.buf = NULL
        self.n = 0

    def __dealloc__(self):
        free(self.buf)


cdef object _utf8_of(object text, const char** s, Py_ssize_t* n):
    """The UTF-8 of an exact str: sets s and n, returns the object that keeps s alive (the str, or a
    _Utf8Copy), or None at a lone surrogate (the encoder's repair path must run)."""
    cdef char* owned = NULL
    cdef _Utf8Copy copy
    if PyUnicode_GET_LENGTH(text) >= 2048:        # the encoder's own threshold (_encoder.SHORT_TEXT)
        s[0] = ctok_utf8_view(text, n, &owned)
        if s[0] == NULL:
            if PyErr_Occurred() != NULL:
                raise MemoryError()
            return None
        if owned == NULL:
            return text
        copy = _Utf8Copy()
        copy.buf = owned
        copy.n = n[0]
        return copy
    try:
        s[0] = PyUnicode_AsUTF8AndSize(text, n)
    except UnicodeEncodeError:
        return None
    return text


cdef class _Bound(PlainRoute):
    """A cache bound to an encoder: what PrefixCache.bind and bind_marked return the method of.  Compiled routes
    call it in C (call_plain); `plain` is the method they take for it."""
    cdef PrefixCache cache
    cdef CoreEncoder core

    def __init__(self, PrefixCache cache, CoreEncoder core):
        self.cache = cache
        self.core = core

    @property
    def cache(self):
        return self.cache


@cython.final
cdef class _BoundEncode(_Bound):
    """PrefixCache.bind(core).__self__: encode_str(text) == core.encode_str(text), through the cache."""

    def encode_str(self, text):
        return self.cache._encode_text(self.core, text)

    @property
    def plain(self):
        return self.encode_str

    cdef list call_plain(self, object text):
        return self.cache._encode_text(self.core, text)


@cython.final
cdef class _BoundMarked(_Bound):
    """PrefixCache.bind_marked(core).__self__: encode_marked(text) == core.encode_marked(text), through the cache."""

    def encode_marked(self, text):
        return self.cache._encode_marked_text(self.core, text)

    @property
    def plain(self):
        return self.encode_marked

    cdef list call_plain(self, object text):
        return self.cache._encode_marked_text(self.core, text)


cdef list _direct(CoreEncoder core, const uint8_t* s, Py_ssize_t n):
    """core.encode_str's work on s[0:n] without a second Python-level call (short texts reuse the encoder's
    buffers under the GIL, as encode_str does; longer ones release it)."""
    cdef IdVec out
    cdef IdVec* outp
    cdef BpeScratch sc
    cdef BpeScratch* scp
    cdef int rc
    if n < 2048 and not core.short_busy:
        core.short_busy = True
        try:
            core.short_out.size = 0
            if core.encode_into(s, n, &core.short_out, &core.short_scratch) != BPE_OK:
                raise MemoryError()
            return core.ids_to_list(&core.short_out)
        finally:
            core.short_busy = False
            if core.short_out.cap > 4096:
                idvec_free(&core.short_out)
    outp = core.take_out(&out)
    scp = core.take_scratch(&sc)
    try:
        if n < 2048:
            rc = core.encode_into(s, n, outp, scp)
        else:
            with nogil:
                rc = core.encode_into(s, n, outp, scp)
        if rc != BPE_OK:
            raise MemoryError()
        return core.ids_to_list(outp)
    finally:
        core.give_scratch(scp, &sc)
        core.give_out(outp)
