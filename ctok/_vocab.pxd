# Contract of the native vocabulary tables (see _vocab.pyx for the why).
# The lookups are inline here so that the BPE loop in other modules calls no function through a pointer.
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int32_t
from libc.string cimport memcpy, memcmp

cdef enum:
    NO_ID = 0xFFFFFFFF          # "absent" in every uint32 id slot

cdef struct Slot:
    # One entry of the bytes -> id table.  The first 8 bytes of the token live in the slot, so a lookup
    # of a token of up to 8 bytes touches one cache line and never the blob.
    uint64_t head               # token bytes 0..7, zero padded
    uint32_t id                 # NO_ID marks a free slot
    uint32_t len

cdef struct PairEntry:
    # Build-time hash table entry (Vocab._hpairs); the encoder reads Tables.pair_region instead.
    uint64_t key                # (left << 32) | right; all ones when the slot is free
    uint32_t rank               # merge rank: lower merges first
    uint32_t new_id             # id of the merged token

cdef enum:
    BYTE_CTX_LEFT = 0               # 256 x 32 entries
    BYTE_CTX_RIGHT = 8192           # 64 x 256 entries
    BYTE_CTX_SIZE = 8192 + 16384

cdef enum:
    PAIR_NODE = 16              # rights per B-tree node of the merge search (ctok_count_below16's width)

cdef struct PairItem:
    # Build time only (Vocab._build_pair_regions sorts a left's merges as these).
    uint32_t right
    uint32_t rank
    uint32_t new_id

cdef struct Tables:
    # Every token's bytes, ordinary and special, concatenated: id -> blob[offsets[id]:offsets[id+1]].
    uint8_t* blob
    uint64_t* offsets
    uint8_t* kind               # per id: 0 hole, 1 ordinary (encodable), 2 special (decode only)
    Py_ssize_t n_ids
    Py_ssize_t max_token_len    # longest ordinary token: longer pieces need no whole-token lookup
    Slot* slots                 # open addressing, linear probing
    uint64_t slot_mask
    # Per slot, for a token of 9 to 16 bytes: its last 8 bytes (they overlap the head for fewer than 16),
    # else 0.  A lookup of such a piece then compares two words, instead of following offsets[id] into the
    # blob and calling memcmp: two dependent loads and a call (English and code: 4-8% of pieces).  Built at
    # load, not stored in the compiled file.
    uint64_t* slot_tails
    # The merges, grouped by their left token so that the lookups of one text stay in few cache lines (a
    # hash over all pairs scatters them over the whole table).  Left's merges are slots
    # pair_region[left]:pair_region[left + 1] of pair_right (right ids) and pair_key ((rank << 32) | merged
    # id, the encoder's key; all ones in a slot that holds no merge).  A region of at most PAIR_NODE slots is
    # the merges sorted by right.  A longer one is a static B-tree over them: its first slot's right is n, the
    # number of merges, then come the index levels from the top one (at most PAIR_NODE entries) down, each
    # entry the largest right of a PAIR_NODE-entry block of the level below, then the n merges sorted by
    # right (pair_merges gives where).  A lookup (tables_pair_key) compares one 64-byte node of rights per
    # level, where a binary search over (right, rank, id) items walked a chain of lines, each waiting on the
    # last: a new piece's merges in a first pass wait on those lines.
    uint32_t* pair_region       # n_ids + 1 entries
    uint32_t* pair_right        # pair_slots + PAIR_NODE entries: a node read at the last slots stays inside
    uint64_t* pair_key          # pair_slots + PAIR_NODE entries
    Py_ssize_t pair_slots
    Py_ssize_t n_pairs          # merges (slots that hold one)
    uint32_t byte_id[256]       # id of each single byte as a token, NO_ID if it is not one
    uint32_t fallback_id[256]   # id of each <0xXX> byte-fallback token, NO_ID if absent
    # The merge of every pair of single-byte tokens, indexed (first byte << 8) | second byte:
    # (rank << 32) | merged id, or all ones.  Every BPE starts with these; a direct table keeps them in cache.
    uint64_t* byte_pairs
    # The lowest rank of a merge that joins a lone byte of a 2-byte character to the byte beside it, by
    # those two bytes (BYTE_CTX_LEFT + (byte before << 5 | lead & 0x1F): merges (X, lead) where X ends with
    # that byte; BYTE_CTX_RIGHT + ((trail & 0x3F) << 8 | byte after): merges (trail, Y) where Y starts with
    # it), all ones when none: _bpe.symbolize_chars starts such a character as its token when both rank
    # above its own pair.
    uint32_t* byte_ctx
    # Whole characters as first symbols (_bpe.symbolize_chars).  cp_token[code point] (BMP): the one token
    # BPE makes of that character alone, CP_SEVERAL when it makes more, CP_NONE when a byte is no token
    # or when some merge with that token on either side ranks before the last merge of the character's
    # own BPE (with monotone ranks, as in every rank file, none does).  seam_bits: the byte contexts in
    # which some token joins part of a character to its neighbour (see SEAM_BITS).  Both NULL only for
    # vocabularies of CP_SEVERAL ids or more.
    uint32_t* cp_token
    uint8_t* seam_bits
    # self_merges[id] = 1 when BPE of the token's bytes alone, from single bytes, is that token: a piece
    # equal to such a token needs no merging even where the whole-piece shortcut is not the file's rule
    # (HF files without ignore_merges).  NULL unless built (Vocab.build_self_merges).
    uint8_t* self_merges


cdef enum:
    # cp_token entries: the token id in the low 30 bits, or CP_NONE (a byte is no token) or CP_SEVERAL
    # (the character's lone BPE is two or three tokens); CP_SUFFIX_RISK when some token starts with a
    # suffix of the character's bytes and goes on, CP_PREFIX_RISK when some token ends with a prefix of
    # them after other bytes (then seam_bits must be asked).
    CP_ID_MASK = 0x3FFFFFFF
    CP_NONE = 0x3FFFFFFF
    CP_SEVERAL = 0x3FFFFFFE
    CP_SUFFIX_RISK = 0x40000000
    CP_PREFIX_RISK = 0x80000000

cdef enum:
    # seam_bits' CHAR_PAIRS set (below): 2^18 bits, 32 KB (CTOK_CHAR_PAIR_BITS in _char_run.h: the same).
    # o200k has 15,297 merges between two characters' tokens, so about 6% of the bits are set (cl100k 4,264;
    # the clear ones answer "no merge" for the rest).
    CHAR_PAIR_BITS = 18

cdef enum:
    # Vocab.char_pair_tables(): a bit set of 2^19 to 2^21 bits.  Bit char_bigram_bit(a, b, shift) is set when
    # some token's bytes hold the whole 2- or 3-byte characters a and b side by side.  A clear bit: no merge can
    # join a symbol ending in a to one starting with b (_bpe.char_cuts).  The set takes at least
    # CHAR_BIGRAM_SPARSE bits per pair set, up to 2^21 bits: o200k's 16,157 pairs take 2^19 bits (64 KB; 2^18
    # cut its Japanese less often through collisions and was no faster), Kimi K2's 50,402 take 2^21 (256 KB: at
    # 2^19, collisions kept 8% of the points between its Chinese and Japanese characters from cutting).
    CHAR_BIGRAM_MIN_BITS = 19
    CHAR_BIGRAM_MAX_BITS = 21
    CHAR_BIGRAM_SPARSE = 32

cdef inline uint32_t char3_at(const uint8_t* p) noexcept nogil:
    # The code point of the 3-byte UTF-8 character at p[0:3] (readable): a lead byte 0xE0-0xEF and two
    # continuation bytes, not overlong, no surrogate; else 0.
    cdef uint32_t cp
    if ((p[0] & 0xF0) != 0xE0) | ((p[1] & 0xC0) != 0x80) | ((p[2] & 0xC0) != 0x80):
        return 0
    cp = ((<uint32_t>p[0] & 0x0F) << 12) | ((<uint32_t>p[1] & 0x3F) << 6) | (p[2] & 0x3F)
    return 0 if (cp < 0x800) | (cp - 0xD800 < 0x800) else cp

cdef inline uint32_t char_at(const uint8_t* p, Py_ssize_t room, Py_ssize_t* length) noexcept nogil:
    # The code point of the 2- or 3-byte UTF-8 character at p (room >= 1 bytes readable there), its length in
    # *length: a lead byte 0xC2-0xDF and a continuation byte, or char3_at's three bytes.  Else 0 and *length
    # untouched: ASCII, 4-byte characters (their code points do not fit the tables), stray or cut bytes.
    # Vocab.char_bigrams reads tokens and _bpe.char_cuts reads text by this one rule, so a pair of characters
    # found in text is one found in tokens.  A character consumes only its own continuation bytes (0x80-0xBF,
    # never a lead byte), so reading a token from its start reaches every lead byte it holds.
    cdef uint32_t b0 = p[0], cp
    if (b0 & 0xF0) == 0xE0:                                 # 3-byte first: CJK text is where most cuts fall
        if room >= 3:
            cp = char3_at(p)                                # p[0:3] readable
            if cp != 0:
                length[0] = 3
            return cp
        return 0
    if b0 - 0xC2 < 0x1E:                                    # 0xC2-0xDF (unsigned: below 0xC2 wraps around)
        if room >= 2 and (p[1] & 0xC0) == 0x80:
            length[0] = 2
            return ((b0 & 0x1F) << 6) | (p[1] & 0x3F)      # 0x80-0x7FF: no overlong form starts 0xC2-0xDF
    return 0


cdef inline uint32_t char_bigram_bit(uint32_t a, uint32_t b, uint32_t shift) noexcept nogil:
    # Code points a, b < 0x10000: the key's 32 bits, their product's top 32 - shift bits (the set's size: a bit
    # of the set of 2^(32 - shift) bits).
    return <uint32_t>(((a << 16) | b) * <uint32_t>0x9E3779B1) >> shift

cdef enum:
    # Tables.seam_bits: a bit set of SEAM_BITS bits indexed by seam_index(...) of the byte contexts in
    # which some token joins part of a character to a neighbour (Vocab._build_char_tables).  A hash set
    # with no second check: a collision only sends a piece to the byte path.
    SEAM_BITS = 1 << 18
    # Before asking the hash set, two direct bit sets rule most boundaries out at the cost of one L1 load:
    # SEAM_PRE_START at (last byte before the boundary & 63) << 8 | first byte after it, set for every
    # token that starts with a suffix and goes on; SEAM_PRE_END at (byte before) << 8 | (first byte of the
    # prefix), set for every token that ends with a prefix.  They follow the hash set in seam_bits.
    SEAM_PRE_START = SEAM_BITS
    SEAM_PRE_END = SEAM_BITS + 64 * 256
    # SEAM_PRE_ANY at (byte after) << 8 | (byte before): either of the two above is set.  One bit test
    # clears nearly every boundary (o200k, Japanese: 97% of those between two 3-byte characters).  Byte
    # after in the high half: the index is then the little-endian 16-bit word of the two bytes, which
    # symbolize_chars' run of 3-byte characters already holds in its 4-byte word.
    SEAM_PRE_ANY = SEAM_BITS + 64 * 256 + 256 * 256
    # CHAR_PAIRS at char_pair_index(left, right): set for every merge whose two sides are each the token of
    # one multi-byte BMP character (cp_token's single ids of code points >= 0x80).  Most such pairs in text
    # merge into nothing (o200k, Japanese: 82% of adjacent characters), and a clear bit says so exactly,
    # without the pair lookup (symbolize_chars).  A set bit may be another pair's: then the lookup decides.
    # In the same allocation as the seam sets so that symbolize_chars' loop keeps one base in a register.
    CHAR_PAIRS = SEAM_BITS + 64 * 256 + 2 * 256 * 256
    SEAM_ALL_BITS = CHAR_PAIRS + (1 << CHAR_PAIR_BITS)
    SEAM_START_SHORT = 1        # token = suffix (k bytes) + one lead byte
    SEAM_START_LONG = 2         # token = suffix (k bytes) + two or more bytes: keyed by the first two
    SEAM_END_SHORT = 3          # token = one byte + prefix (k bytes)
    SEAM_END_LONG = 4           # token = two or more bytes + prefix: keyed by the last two before it


cdef extern from "_char_run.h" nogil:
    # The bit of a pair within the CHAR_PAIRS set (one definition, shared with symbolize_chars' run loop).
    uint32_t ctok_char_pair_bit(uint32_t left, uint32_t right)
    int CTOK_CHAR_PAIR_BITS


cdef inline uint32_t char_pair_index(uint32_t left, uint32_t right) noexcept nogil:
    # The pair's bit in seam_bits.
    return CHAR_PAIRS + ctok_char_pair_bit(left, right)


cdef inline uint32_t seam_index(uint32_t tag, uint32_t k, uint32_t part, uint32_t ctx) noexcept nogil:
    # part: the suffix or prefix bytes (k of them, packed big-endian); ctx: the one or two context bytes.
    cdef uint64_t key = (<uint64_t>tag << 56) | (<uint64_t>k << 48) | (<uint64_t>part << 24) | ctx
    key *= 0x9E3779B97F4A7C15ULL
    return <uint32_t>(key >> (64 - 18))


cdef inline bint bit_at(const uint8_t* bits, uint32_t i) noexcept nogil:
    return (bits[i >> 3] >> (i & 7)) & 1


cdef inline uint64_t load_head(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    # Bytes 0..min(n,8)-1 of s, zero padded, read with fixed-size loads only (a variable-length memcpy
    # into a stack word stalls the load that follows it).  Overlapping loads stay inside s[0:n].
    cdef uint64_t a = 0, b = 0
    cdef uint32_t a4 = 0, b4 = 0
    cdef uint16_t a2 = 0, b2 = 0
    if n >= 8:
        memcpy(&a, s, 8)
        return a
    if n >= 4:
        memcpy(&a4, s, 4)
        memcpy(&b4, s + n - 4, 4)
        return <uint64_t>a4 | (<uint64_t>b4 << (8 * (n - 4)))
    if n >= 2:
        memcpy(&a2, s, 2)
        memcpy(&b2, s + n - 2, 2)
        return <uint64_t>a2 | (<uint64_t>b2 << (8 * (n - 2)))
    if n == 1:
        return s[0]
    return 0


cdef extern from "_pair_search.h" nogil:
    uint32_t ctok_count_below16(const uint32_t* p, uint32_t valid, uint32_t x)
    void ctok_pair_prefetch(const void* p)
    int __builtin_clz(unsigned int x)
    int __builtin_ctz(unsigned int x)
    int __builtin_ctzll(unsigned long long x)


cdef extern from "_head_mask.h":
    const uint64_t ctok_head_mask[9]


cdef inline uint64_t load_head_padded(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    # load_head(s, n) for 1 <= n when s[0:8] may be read: one load and a mask, no branch on the length
    # (piece lengths are data; a branch on them mispredicts).
    cdef uint64_t a
    memcpy(&a, s, 8)
    return a & ctok_head_mask[n if n < 8 else 8]              # index 1..8 (n >= 1)


cdef inline uint64_t mix64(uint64_t h) noexcept nogil:
    h ^= h >> 32
    h *= 0xD6E8FEB86659FD93ULL
    h ^= h >> 32
    h *= 0xD6E8FEB86659FD93ULL
    h ^= h >> 32
    return h


cdef inline uint64_t load_tail(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    # The last 8 bytes of s[0:n], for n >= 8.
    cdef uint64_t w
    memcpy(&w, s + n - 8, 8)
    return w


cdef inline uint64_t hash_bytes(const uint8_t* s, Py_ssize_t n, uint64_t head) noexcept nogil:
    # Most pieces are at most 8 bytes (head holds them whole): one multiply for those.  The xor-shift before
    # it brings the high bytes down to where they reach the product's high half, and the fold after it brings
    # that well-mixed half into the low bits, which index the tables (slot_mask, the piece cache's sets).
    # Longer pieces take 8 bytes a step and end on their last 8 bytes (overlapping the step before): fixed-size
    # loads only, and for 9-16 bytes the one word a slot keeps (Tables.slot_tails).
    # Withdrawn for this: mix64 twice per piece (about 17 instructions against 9 on an 8-byte piece).
    cdef uint64_t h = (head ^ (head >> 28) ^ <uint64_t>n) * 0x9E3779B97F4A7C15ULL
    cdef uint64_t w
    cdef Py_ssize_t i = 8
    if n > 8:
        while i + 8 < n:
            memcpy(&w, s + i, 8)              # i + 8 < n
            h = (h ^ (h >> 32) ^ w ^ (w >> 28)) * 0xBF58476D1CE4E5B9ULL
            i += 8
        w = load_tail(s, n)                   # n > 8
        h = (h ^ (h >> 32) ^ w ^ (w >> 28)) * 0x94D049BB133111EBULL
    return h ^ (h >> 32)


cdef inline uint32_t tables_lookup_hashed(const Tables* t, const uint8_t* s, Py_ssize_t n, uint64_t head,
                                          uint64_t h) noexcept nogil:
    """tables_lookup with head = load_head(s, n) and h = hash_bytes(s, n, head) already computed."""
    cdef const Slot* e
    h &= t.slot_mask
    while True:
        e = &t.slots[h]                   # h is masked to the table size
        if e.id == NO_ID:
            return NO_ID
        if e.len == n and e.head == head and (
                n <= 8 or (t.slot_tails[h] == load_tail(s, n) if n <= 16 else      # h < slot_mask + 1
                           memcmp(t.blob + t.offsets[e.id] + 8, s + 8, n - 8) == 0)):
            return e.id
        h = (h + 1) & t.slot_mask


cdef inline uint32_t tables_lookup(const Tables* t, const uint8_t* s, Py_ssize_t n) noexcept nogil:
    """Id of the ordinary token whose bytes are s[0:n], or NO_ID."""
    cdef uint64_t head = load_head(s, n)
    return tables_lookup_hashed(t, s, n, head, hash_bytes(s, n, head))


cdef inline uint64_t hash_pair(uint64_t key) noexcept nogil:
    return mix64(key * 0x9E3779B97F4A7C15ULL)


cdef inline uint32_t pair_index_levels(uint32_t n) noexcept nogil:
    # Index levels above n merges: 0 up to PAIR_NODE (16), 1 up to 256, 2 up to 4,096, ...
    return <uint32_t>(31 - __builtin_clz((n - 1) | 1)) >> 2


cdef inline uint32_t pair_level_size(uint32_t n, uint32_t level) noexcept nogil:
    # Entries of index level `level` (1: just above the merges; level <= 7 for n < 2^32) over n merges:
    # ceil(n / 16^level).  In 64 bits: n + 16^level - 1 may pass 2^32.
    return <uint32_t>((<uint64_t>n + (<uint64_t>1 << (4 * level)) - 1) >> (4 * level))


cdef inline uint64_t pair_region_size(uint32_t n) noexcept nogil:
    # Slots of a region of n merges: the merges, and above PAIR_NODE the count and every index level.
    cdef uint64_t size = n
    cdef uint32_t level
    if n > PAIR_NODE:
        size += 1
        for level in range(1, pair_index_levels(n) + 1):
            size += pair_level_size(n, level)
    return size


cdef inline uint32_t pair_index_source(uint32_t n, uint32_t level, uint32_t j) noexcept nogil:
    # The merge whose right is entry j of index level `level` over n merges: the last one under the entry.
    return <uint32_t>min((<uint64_t>j + 1) << (4 * level), <uint64_t>n) - 1


cdef inline uint32_t pair_count(const Tables* t, uint32_t s, uint32_t r) noexcept nogil:
    # The merges of the region of r slots at s: r itself up to PAIR_NODE, else the count in its first slot.
    return r if r <= PAIR_NODE else t.pair_right[s]                 # r > PAIR_NODE: s < pair_slots


cdef inline uint32_t pair_merges(const Tables* t, uint32_t left, uint32_t* first) noexcept nogil:
    """The number of merges with `left` on the left (0 for none); first: the slot of the first (they end
    the region)."""
    cdef uint32_t s = t.pair_region[left], r = t.pair_region[left + 1] - t.pair_region[left]
    cdef uint32_t n = pair_count(t, s, r)
    first[0] = s + r - n
    return n


cdef inline uint64_t tables_pair_key(const Tables* t, uint32_t left, uint32_t right) noexcept nogil:
    """(rank << 32) | merged id of the merge of (left, right), or all ones when there is none.  left < n_ids
    (callers pass ids of this vocabulary)."""
    cdef uint32_t s = t.pair_region[left], r = t.pair_region[left + 1] - t.pair_region[left]
    cdef uint32_t n, level, m, b = 0, c, pos
    cdef bint hit
    if r == 0:
        return 0xFFFFFFFFFFFFFFFFULL
    n = pair_count(t, s, r)
    level = pair_index_levels(n)
    s += level != 0                                         # past the count
    # b: the block of the level below that holds the first right >= `right` (its last block when none does:
    # then every count below is its block's size, and pos ends at n).
    while level > 0:
        m = pair_level_size(n, level)
        c = ctok_count_below16(&t.pair_right[s + PAIR_NODE * b], min(PAIR_NODE, m - PAIR_NODE * b), right)
        b = min(PAIR_NODE * b + c, m - 1)                   # the level below has m blocks
        s += m
        level -= 1
    # s: the first merge.  The keys' line is fetched beside the node's: it is read right after.
    ctok_pair_prefetch(&t.pair_key[s + PAIR_NODE * b])
    c = ctok_count_below16(&t.pair_right[s + PAIR_NODE * b], min(PAIR_NODE, n - PAIR_NODE * b), right)
    pos = PAIR_NODE * b + c                                 # <= n
    hit = (pos < n) & (t.pair_right[s + pos] == right)     # s + pos <= pair_slots: inside the padding
    return t.pair_key[s + min(pos, n - 1)] | (<uint64_t>0 - <uint64_t>(not hit))


cdef inline bint tables_pair(const Tables* t, uint32_t left, uint32_t right,
                             uint32_t* rank, uint32_t* new_id) noexcept nogil:
    """The merge of (left, right), if there is one: its rank and merged id (rank and new_id are written
    either way; they mean nothing when this returns False).  left < n_ids."""
    cdef uint64_t key = tables_pair_key(t, left, right)
    rank[0] = <uint32_t>(key >> 32)
    new_id[0] = <uint32_t>key
    return key != 0xFFFFFFFFFFFFFFFFULL


cdef class Vocab:
    cdef Tables t
    cdef object _backing             # bytes the tables point into (Vocab.from_bytes), else None
    cdef bint _borrowed              # True: the tables live in _backing (never test _backing itself in
                                     # __dealloc__: the garbage collector may have cleared it already)
    cdef public bint rank_merges     # True: tiktoken semantics (pairs derived from the vocabulary)
    cdef PairEntry* _hpairs          # build-time (left, right) hash table; freed once the regions are built
    cdef uint64_t _hmask
    cdef Py_ssize_t _hcount
    cdef void _build_slots(self, Py_ssize_t n_ord) except *
    cdef void _alloc_pairs(self, Py_ssize_t n) except *
    cdef void _put_pair(self, uint32_t left, uint32_t right, uint32_t rank, uint32_t new_id) noexcept
    cdef void _derive_pairs(self) except *
    cdef void _load_pairs(self, merges) except *
    cdef void _build_byte_pairs(self) except *
    cdef void _build_byte_ctx(self) except *
    cdef void _build_char_tables(self) except *
    cdef void _build_pair_regions(self) except *
    cdef bint _hpair(self, uint32_t left, uint32_t right, uint32_t* rank, uint32_t* new_id) noexcept nogil
