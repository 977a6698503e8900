# Contract of the prefix cache (see _prefix.pyx for the why and the proof of the safe cut).
#   PrefixCache(max_bytes).encode(core, data) == core.encode_ordinary(data), always.
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t
from cpython.pythread cimport PyThread_type_lock
from ctok._bpe cimport IdVec
from ctok._encoder cimport CoreEncoder, AddedSplit

cdef enum:
    PREFIX_BLOCK = 128          # trie nodes: one per full block of a cached text's bytes
    PREFIX_CK_EVERY = 64        # stored checkpoints: a piece boundary at least this many bytes apart


# Upper bound on every byte index the pretokenizer may examine (or test against the end) while deciding the
# pieces that end at or before the piece boundary p of s[0:n].  >= n means "depends on where the text ends".
cdef Py_ssize_t cut_read_bound(const uint8_t* s, Py_ssize_t n, Py_ssize_t p) noexcept nogil


cdef class _Entry:
    cdef object owner           # the bytes, str or _Utf8Copy holding the cached text's UTF-8 form (kept alive)
    cdef const uint8_t* s       # that UTF-8 form, n bytes (read-only)
    cdef Py_ssize_t n
    cdef uint32_t* ids          # its token ids
    cdef Py_ssize_t n_ids
    cdef uint32_t* ck           # 2 * n_ck words: (byte offset, number of ids before it), offsets increasing
    cdef Py_ssize_t n_ck
    cdef Py_ssize_t size        # bytes charged to the cache
    cdef Py_ssize_t slot        # index in the node table's values; -1 once removed
    cdef list pylist            # private Python list whose first pylist_n items are ids[:pylist_n] (shared
    cdef Py_ssize_t pylist_n    # with the entries this one was extended from or into), or None
    cdef object text            # the exact str whose UTF-8 is s (its code units answer the str front), or None
    cdef uint64_t front_key     # front_key(text) when text is not None
    cdef Py_ssize_t cut_q       # the str front's last find_cut: for q = cut_q (or -1), the cut cut_p with
    cdef Py_ssize_t cut_p       # cut_n ids before it (read and written with the GIL held, never released
    cdef Py_ssize_t cut_n       # in between)
    cdef uint64_t tail_hash     # the node key of its n // PREFIX_BLOCK blocks (chain_hash), 0 for none
    cdef bint marked            # s is core.marked_bytes(text) (encode_marked), not text's UTF-8


cdef class PrefixCache:
    cdef readonly Py_ssize_t max_bytes
    cdef readonly Py_ssize_t min_bytes
    cdef readonly int split     # texts are split first at the encoder's added tokens (1: encode_str_split's ids)
                                # or at those and its special tokens (2: encode_str_split(specials=True)); 0: not
    cdef Py_ssize_t _split_lmax # the served encoder's longest added token, in bytes (split caches)
    cdef PyThread_type_lock _plock
    cdef object _served         # the last encoder checked by byte_exact, and the answers: for any bytes, for
    cdef bint _served_ok        # valid UTF-8 (str input)
    cdef bint _served_text_ok
    cdef object _lru            # OrderedDict slot -> _Entry, least recently used first
    cdef list _front            # FRONT_SLOTS: the last entry made from a str, by front_key of its start, or None
    cdef list _free_slots
    cdef Py_ssize_t _next_slot
    cdef uint64_t* _seen        # admission: first-block hashes of recent misses (direct mapped)
    cdef uint64_t* _keys        # node table: prefix hash (never 0) -> slot of the entry owning the node
    cdef int32_t* _vals
    cdef uint64_t _mask
    cdef Py_ssize_t _n_nodes
    cdef Py_ssize_t _bytes_used
    cdef readonly unsigned long long hits, misses, reused_bytes, encoded_bytes, evictions, inserts
    cdef readonly unsigned long long passthrough, front_hits
    cdef void _count_lookup(self, Py_ssize_t p, Py_ssize_t n)
    cdef _alloc_table(self, Py_ssize_t cap)
    cdef int _table_put(self, uint64_t h, int32_t slot) except -1
    cdef void _table_del(self, uint64_t h, int32_t slot) noexcept
    cdef int32_t _table_find(self, uint64_t h) noexcept
    cdef void _remove(self, _Entry e) except *
    cdef inline void _acquire(self) noexcept
    cdef bint _serves(self, CoreEncoder core, bint is_text)
    cdef list _encode_text(self, CoreEncoder core, object text)
    cdef list _encode_marked_text(self, CoreEncoder core, object text)
    cdef object _encode_front(self, CoreEncoder core, str text, bint marked)
    cdef list _encode(self, CoreEncoder core, object data, const uint8_t* s, Py_ssize_t n, bint is_text,
                      object text, bint marked)
    cdef list _finish(self, CoreEncoder core, object data, const uint8_t* s, Py_ssize_t n, object text, bint marked,
                      _Entry old, Py_ssize_t q, Py_ssize_t p, Py_ssize_t n_p, bint keep, uint64_t* hashes,
                      Py_ssize_t hashes_from)
    cdef void _insert(self, _Entry new, _Entry old, bint extends, const uint8_t* s, uint64_t* hashes,
                      Py_ssize_t hashes_from) except *
    cdef list _ids_list(self, CoreEncoder core, _Entry old, Py_ssize_t n_p, const uint32_t* tail, Py_ssize_t tail_n)
    cdef list _pass(self, CoreEncoder core, object data, const uint8_t* s, Py_ssize_t n)
    cdef const AddedSplit* _split_at(self, CoreEncoder core) noexcept
