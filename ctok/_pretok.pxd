# Contract of the regex-free pretokenizer (implementation and reference notes in _pretok.pyx).
from libc.stdint cimport uint16_t, uint32_t

cdef extern from "_unicode_tables.h" nogil:
    const char* CTOK_UNICODE_VERSION
    cdef enum:
        CT_L
        CT_UP
        CT_LO
        CT_M
        CT_N
        CT_WS
        CT_P
        CT_S
        CT_HAN
        CT_CRLF
        CT_DSCJK
        CT_APUNCT
        CT_AALPHA
    const uint16_t ctok_ascii_flags[128]
    const uint16_t ctok_flags_2byte[0x800]
    uint16_t ctok_cp_flags(uint32_t cp)

cdef enum:
    PRETOK_WHOLE = 0      # no split: the whole segment is one piece
    PRETOK_GPT2 = 1       # r50k/p50k/GPT-2 ByteLevel regex
    PRETOK_CL100K = 2
    PRETOK_O200K = 3      # also Llama 4
    PRETOK_LLAMA3 = 4
    PRETOK_QWEN = 5       # Llama3 but \p{N} single digits
    PRETOK_KIMI = 6
    PRETOK_TEKKEN = 7
    PRETOK_DEEPSEEK = 8   # DeepSeek-V3's HF Sequence of three Split(Isolated) steps, composed
    PRETOK_N_KINDS = 9

cdef enum:
    PRETOK_ENDS_SLACK = 16    # CTOK_WINDOW_SLACK of _ascii_block.h (_pretok checks at import that they agree)

# s[0:n] is one segment (regex `$` means n). Returns the end of the piece starting at pos; requires 0 <= pos < n;
# guarantees pos < end <= n.  Pieces are produced by calling again at the returned end, starting at 0.
cdef Py_ssize_t next_piece_end(int kind, const unsigned char* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil
# The next pieces from pos at once: fills ends[0:k] with successive piece ends and returns k, 1 <= k <=
# max_count (fewer when the text ends, or when a window of ASCII decided a batch with less than 8 ends of room
# left: the caller asks again from ends[k - 1]).  Requires 0 <= pos < n, and ends to hold max_count +
# PRETOK_ENDS_SLACK entries: windows of ASCII write their ends eight at a time, scratch values past the last.
cdef Py_ssize_t next_piece_ends(int kind, const unsigned char* s, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t* ends,
                                Py_ssize_t max_count) noexcept nogil


cdef inline Py_ssize_t ctok_char(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, uint16_t* fl) noexcept nogil:
    """Byte length (1..4) of the UTF-8 character at s[i], its CT_* flags in fl[0]; requires 0 <= i < n.
    An invalid, overlong, surrogate or truncated sequence counts as a one-byte character with no flags."""
    cdef uint32_t b0 = s[i]  # i < n by the caller's contract
    cdef uint32_t b1, b2, b3
    if b0 < 0x80:
        fl[0] = ctok_ascii_flags[b0]  # b0 < 128 = table size
        return 1
    fl[0] = 0
    if b0 < 0xC2:
        return 1
    if b0 < 0xE0:
        if i + 1 >= n:
            return 1
        b1 = s[i + 1]  # i + 1 < n checked above
        if (b1 & 0xC0) != 0x80:
            return 1
        fl[0] = ctok_flags_2byte[((b0 & 0x1F) << 6) | (b1 & 0x3F)]  # cp < 0x800 = table size
        return 2
    if b0 < 0xF0:
        if i + 2 >= n:
            return 1
        b1 = s[i + 1]  # i + 2 < n checked above
        b2 = s[i + 2]
        if (b1 & 0xC0) != 0x80 or (b2 & 0xC0) != 0x80:
            return 1
        if (b0 == 0xE0 and b1 < 0xA0) or (b0 == 0xED and b1 >= 0xA0):  # overlong / surrogate
            return 1
        fl[0] = ctok_cp_flags(((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F))  # cp < 0x10000
        return 3
    if b0 < 0xF5:
        if i + 3 >= n:
            return 1
        b1 = s[i + 1]  # i + 3 < n checked above
        b2 = s[i + 2]
        b3 = s[i + 3]
        if (b1 & 0xC0) != 0x80 or (b2 & 0xC0) != 0x80 or (b3 & 0xC0) != 0x80:
            return 1
        if (b0 == 0xF0 and b1 < 0x90) or (b0 == 0xF4 and b1 >= 0x90):  # overlong / above U+10FFFF
            return 1
        fl[0] = ctok_cp_flags(((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F))
        return 4  # cp <= 0x10FFFF by the checks above
    return 1
