# Contract of the native vocabulary tables (see _vocab.pyx for the why).
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t

cdef enum:
    NO_ID = 0xFFFFFFFF          # "absent" in every uint32 id slot

cdef struct PairEntry:
    uint64_t key                # (left << 32) | right; EMPTY_PAIR when the slot is free
    uint32_t rank               # merge rank: lower merges first
    uint32_t new_id             # id of the merged token

cdef class Vocab:
    cdef:
        # Every token's bytes, ordinary and special, concatenated: id -> blob[offsets[id]:offsets[id+1]].
        uint8_t* blob
        uint64_t* offsets
        uint8_t* kind           # per id: 0 hole, 1 ordinary (encodable), 2 special (decode only)
        Py_ssize_t n_ids
        # bytes -> id for ordinary tokens, open addressing with linear probing; NO_ID marks a free slot.
        uint32_t* slots
        uint64_t slot_mask
        # (left id, right id) -> (rank, merged id), open addressing.
        PairEntry* pairs
        uint64_t pair_mask
        Py_ssize_t n_pairs
        # id of each single byte as a token (NO_ID if the byte is not a token) and of its <0xXX> fallback token.
        uint32_t byte_id[256]
        uint32_t fallback_id[256]
        public bint rank_merges     # True: tiktoken semantics (pairs derived from the vocabulary)

    cdef uint32_t lookup(self, const uint8_t* s, Py_ssize_t n) noexcept nogil
    cdef bint pair(self, uint32_t left, uint32_t right, uint32_t* rank, uint32_t* new_id) noexcept nogil
    cdef inline const uint8_t* token_ptr(self, uint32_t tid, Py_ssize_t* n) noexcept nogil
    cdef void _build_slots(self, Py_ssize_t n_ord) except *
    cdef void _alloc_pairs(self, Py_ssize_t n) except *
    cdef void _put_pair(self, uint32_t left, uint32_t right, uint32_t rank, uint32_t new_id) noexcept nogil
    cdef void _derive_pairs(self) except *
    cdef void _load_pairs(self, merges) except *
