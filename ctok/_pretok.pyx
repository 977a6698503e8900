"""Regex-free pretokenizer: split UTF-8 text into the pieces a known split pattern would produce.

Contract (see _pretok.pxd): ``next_piece_end(kind, s, n, pos)`` returns the end of the piece that starts at byte
``pos`` of the segment ``s[0:n]`` (0 <= pos < n, pos < end <= n); pieces are produced by calling it again at the
returned end, starting at 0.  The segment end is the regex ``$`` / end of text.

Reference: each scanner gives exactly the match spans of a leftmost-first backtracking regex search of its pattern,
as run by tiktoken 0.14.0 (Rust regex / fancy-regex, Unicode 16) for tiktoken files and by tokenizers 0.23.3
(Oniguruma, Unicode 16) ``Split(pattern, "isolated")`` / ``ByteLevel(use_regex=True)`` for HF files.  The patterns
themselves are in ctok/patterns.py.  Character classes come from ctok/_unicode_tables.h (Unicode 16.0.0).
tests/test_pretok.py checks every code point and the shared corpus against both references.

Invalid UTF-8 never reads out of bounds: a bad byte is a one-byte character with no class (like punctuation).

``next_piece_ends`` (the encoder's batches) gives the same ends; for the o200k and cl100k families, DeepSeek-V3
and GPT-2 it reads them off 64-byte windows of ASCII classified at once (_ascii_block.h, _ascii_block_cl100k.h,
_ascii_block_ds.h, _ascii_block_gpt2.h; tests/test_ascii_block.py, tests/test_ascii_block_ds.py) where the text
allows, and for the o200k and cl100k families (Kimi, Tekken, Llama 3, Qwen too) reads pieces of 3-byte characters
(Han, kana, CJK punctuation) with their classes four at a time (_cjk3.h, tests/test_cjk3.py).
"""
from libc.stdint cimport uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE

UNICODE_VERSION = CTOK_UNICODE_VERSION.decode("ascii")

KINDS = {
    "PRETOK_WHOLE": PRETOK_WHOLE,
    "PRETOK_GPT2": PRETOK_GPT2,
    "PRETOK_CL100K": PRETOK_CL100K,
    "PRETOK_O200K": PRETOK_O200K,
    "PRETOK_LLAMA3": PRETOK_LLAMA3,
    "PRETOK_QWEN": PRETOK_QWEN,
    "PRETOK_KIMI": PRETOK_KIMI,
    "PRETOK_TEKKEN": PRETOK_TEKKEN,
    "PRETOK_DEEPSEEK": PRETOK_DEEPSEEK,
}
globals().update(KINDS)

# [^\s\p{L}\p{N}] is "no flag among these"
cdef enum:
    LWSN = CT_L | CT_WS | CT_N


cdef inline Py_ssize_t run_of(const unsigned char* s, Py_ssize_t n, Py_ssize_t i,
                              uint16_t mask, uint16_t val) noexcept nogil:
    """First index >= i whose character c does not satisfy (flags(c) & mask) == val (or n)."""
    cdef uint16_t f
    cdef Py_ssize_t k
    while i < n:
        if s[i] < 0x80:  # i < n
            if (ctok_ascii_flags[s[i]] & mask) != val:  # s[i] < 128
                break
            i += 1
        else:
            k = ctok_char(s, n, i, &f)  # i < n
            if (f & mask) != val:
                break
            i += k
    return i


cdef extern from "_bmp_run.h" nogil:
    Py_ssize_t ctok_bmp3_run(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, const uint64_t* bits)
    void ctok_bmp3_fill(uint64_t* bits, uint16_t mask, uint16_t val)
    bint ctok_bmp2_at(const unsigned char* s, Py_ssize_t i, const uint64_t* bits)
    Py_ssize_t ctok_bmp2_run(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, const uint64_t* bits)
    Py_ssize_t ctok_bmp2_run_ranges(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, const uint64_t* bits,
                                    int lo_a, int len_a, int lo_b, int len_b, int lo_c, int len_c)
    void ctok_bmp2_fill(uint64_t* bits, uint16_t mask, uint16_t val)
    void ctok_bmp3_fill_any(uint64_t* bits, uint16_t any, uint16_t none, uint16_t must)
    void ctok_bmp2_fill_any(uint64_t* bits, uint16_t any, uint16_t none, uint16_t must)

# The 3-byte letters (\p{L}) as a set for ctok_bmp3_run (see _bmp_run.h): cl100k's letter runs, where CJK text
# spends its characters.  Made from ctok_cp_flags at import, so it cannot disagree with it.
cdef uint64_t BMP3_L[1024]
ctok_bmp3_fill(BMP3_L, CT_L, CT_L)
# Kimi's [\p{Han}]+ runs (no Han character is below U+0800: no 2-byte set).
cdef uint64_t BMP3_HAN[1024]
ctok_bmp3_fill(BMP3_HAN, CT_HAN, CT_HAN)
# o200k's (and Tekken's) classes among 3-byte characters: both UP and LO (kana, Han, Hangul: Lo), and LO;
# Kimi's leave Han out of both (its Han runs are pieces of their own).
cdef uint64_t BMP3_UPLO[1024]
cdef uint64_t BMP3_LO[1024]
cdef uint64_t BMP3_UPLO_KIMI[1024]
cdef uint64_t BMP3_LO_KIMI[1024]
ctok_bmp3_fill(BMP3_UPLO, CT_UP | CT_LO, CT_UP | CT_LO)
ctok_bmp3_fill(BMP3_LO, CT_LO, CT_LO)
ctok_bmp3_fill(BMP3_UPLO_KIMI, CT_UP | CT_LO | CT_HAN, CT_UP | CT_LO)
ctok_bmp3_fill(BMP3_LO_KIMI, CT_LO | CT_HAN, CT_LO)
# The 2-byte characters of cl100k's letter runs, of o200k's LO runs, and of both o200k classes (UP and LO:
# Lm, Lo and marks, e.g. all of Arabic), for ctok_bmp2_run.  For 2-byte characters Kimi's masks (which add
# CT_HAN) select the same ones: no Han character is below U+0800.
cdef uint64_t BMP2_L[32]
cdef uint64_t BMP2_LO[32]
cdef uint64_t BMP2_UPLO[32]
ctok_bmp2_fill(BMP2_L, CT_L, CT_L)
ctok_bmp2_fill(BMP2_LO, CT_LO | CT_HAN, CT_LO)
ctok_bmp2_fill(BMP2_UPLO, CT_UP | CT_LO | CT_HAN, CT_UP | CT_LO)
# o200k's 2-byte letters of one class only: LO and not UP (lowercase: Cyrillic, Greek, Armenian...), UP and not
# LO (their capitals), for scan_o200k_like's shortcut.
cdef uint64_t BMP2_LO_ONLY[32]
cdef uint64_t BMP2_UP_ONLY[32]
ctok_bmp2_fill(BMP2_LO_ONLY, CT_UP | CT_LO | CT_HAN, CT_LO)
ctok_bmp2_fill(BMP2_UP_ONLY, CT_UP | CT_LO | CT_HAN, CT_UP)

# Ranges of code points that ctok_bmp2_run_ranges checks 8 characters at a time before the sets' own loop: the
# lowercase letters of the Cyrillic and Greek blocks (o200k's LO), the Cyrillic and Greek letters of both cases
# and the Arabic letters (\p{L}, cl100k's letter runs), and Arabic and Hebrew (o200k's letters of both classes).
# Each range must lie inside its set: checked here, once.
cdef enum:
    LO_RANGE_A = 0x430      # а..я ѐ..џ
    LO_LEN_A = 0x30
    LO_RANGE_B = 0x3AC      # ά..ώ
    LO_LEN_B = 0x23
    L_RANGE_A = 0x400       # Ѐ..џ
    L_LEN_A = 0x60
    L_RANGE_B = 0x3A3       # Σ..ώ
    L_LEN_B = 0x2C
    UPLO_RANGE_A = 0x620    # Arabic letters, tatweel and harakat (Lo, Lm, Mn: o200k's UP and LO both)
    UPLO_LEN_A = 0x40
    UPLO_RANGE_B = 0x5D0    # Hebrew letters
    UPLO_LEN_B = 0x1B
    L_RANGE_C = 0x620       # Arabic letters and tatweel (no harakat: they are marks, no \p{L})
    L_LEN_C = 0x2B
    NO_RANGE = 0
    NO_LEN = 0


def _check_ranges():
    cdef uint32_t cp
    cdef const uint64_t* bits
    for lo, ln, name in ((LO_RANGE_A, LO_LEN_A, "LO"), (LO_RANGE_B, LO_LEN_B, "LO"),
                         (L_RANGE_A, L_LEN_A, "L"), (L_RANGE_B, L_LEN_B, "L"), (L_RANGE_C, L_LEN_C, "L"),
                         (UPLO_RANGE_A, UPLO_LEN_A, "UPLO"), (UPLO_RANGE_B, UPLO_LEN_B, "UPLO")):
        bits = &BMP2_L[0] if name == "L" else &BMP2_LO[0] if name == "LO" else &BMP2_UPLO[0]
        for cp in range(lo, lo + ln):
            if not (bits[cp >> 6] >> (cp & 63)) & 1:
                raise ImportError(f"U+{cp:04X} is in a 2-byte run range but not in the {name} set")


_check_ranges()


cdef inline bint bmp2_at(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, const uint64_t* bits) noexcept nogil:
    """The character at i is a 2-byte one whose bit is set in bits (a ctok_bmp2_fill set)."""
    return i + 2 <= n and ctok_bmp2_at(s, i, bits)  # i + 2 <= n checked first


cdef inline Py_ssize_t lo_run2(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, uint16_t lomask) noexcept nogil:
    """o200k's LO run from i, after a 2-byte LO character: its 2-byte ones 8 at a time where they are Cyrillic or
    Greek, then run_of."""
    return run_of(s, n, ctok_bmp2_run_ranges(s, n, i, BMP2_LO, LO_RANGE_A, LO_LEN_A, LO_RANGE_B, LO_LEN_B,
                                             NO_RANGE, NO_LEN), lomask, CT_LO)


cdef inline Py_ssize_t letter_run2(const unsigned char* s, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """\p{L}* from i, after a 2-byte letter: its 2-byte ones 8 at a time where they are Cyrillic, Greek or Arabic,
    then run_of."""
    return run_of(s, n, ctok_bmp2_run_ranges(s, n, i, BMP2_L, L_RANGE_A, L_LEN_A, L_RANGE_B, L_LEN_B,
                                             L_RANGE_C, L_LEN_C), CT_L, CT_L)


cdef inline Py_ssize_t run_of_after(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, Py_ssize_t k,
                                    uint16_t mask, uint16_t val, const uint64_t* bits3,
                                    const uint64_t* bits2) noexcept nogil:
    """run_of from i, the end of a character of the class of length k.  bits3 and bits2: the 3-byte and
    2-byte characters c with (flags(c) & mask) == val (NULL: none taken this way).  After a 3-byte (2-byte)
    character, the ones of its length that follow go through ctok_bmp3_run (ctok_bmp2_run) first: CJK text,
    and Cyrillic, Greek, Arabic...; only here, not at every step of run_of, so that other text pays nothing
    per character."""
    if k == 3 and bits3 != NULL:
        i = ctok_bmp3_run(s, n, i, bits3)
    elif k == 2 and bits2 != NULL:
        i = ctok_bmp2_run(s, n, i, bits2)
    return run_of(s, n, i, mask, val)


cdef extern from "_cjk3.h" nogil:
    bint CTOK_CJK3_LEAD(unsigned char c)
    void ctok_cjk3_init(int kind_kimi, int kind_o200k, int kind_tekken, int kind_cl100k, int kind_llama3,
                        int kind_qwen)
    Py_ssize_t ctok_cjk3_kind_pieces(int kind, const unsigned char* s, Py_ssize_t n, Py_ssize_t pos,
                                     Py_ssize_t* ends, Py_ssize_t room)

# The classes of 3-byte characters for whole pieces of CJK text at once (_cjk3.h): Kimi's (Han apart), o200k's
# (also Tekken's: the same UP and LO), cl100k's (also Llama 3's and Qwen's: \p{L}), from ctok_cp_flags.
ctok_cjk3_init(PRETOK_KIMI, PRETOK_O200K, PRETOK_TEKKEN, PRETOK_CL100K, PRETOK_LLAMA3, PRETOK_QWEN)


cdef inline bint is_alpha(unsigned char c) noexcept nogil:
    return <unsigned char>((c | 0x20) - 97) < 26  # 'A'..'Z' and 'a'..'z'


cdef inline bint is_lower(unsigned char c) noexcept nogil:
    return <unsigned char>(c - 97) < 26


cdef extern from "_ascii_block.h" nogil:
    int CTOK_WINDOW_SLACK
    uint64_t ctok_punct_2000[2]
    uint32_t ctok_high32(const unsigned char* w)
    bint ctok_window_worth(const unsigned char* w, uint32_t high)
    Py_ssize_t ctok_o200k_block(const unsigned char* w, Py_ssize_t* ends, Py_ssize_t base, Py_ssize_t room,
                                int slash, int contractions, int most)


# The callers of next_piece_ends size their arrays by the .pxd's constant; the windows write by the header's.
if PRETOK_ENDS_SLACK != CTOK_WINDOW_SLACK:
    raise ImportError(f"PRETOK_ENDS_SLACK {PRETOK_ENDS_SLACK} != CTOK_WINDOW_SLACK {CTOK_WINDOW_SLACK}")


def _fill_punct_2000():
    # The punctuation of U+2000..U+207F that windows take (see _ascii_block.h): no letter, mark, digit or space.
    cdef uint32_t cp
    for cp in range(0x2000, 0x2080):
        if not (ctok_cp_flags(cp) & (CT_L | CT_M | CT_N | CT_WS)):
            ctok_punct_2000[(cp - 0x2000) >> 6] |= (<uint64_t>1) << ((cp - 0x2000) & 63)   # index 0 or 1


_fill_punct_2000()


cdef extern from "_ascii_block_ds.h" nogil:
    Py_ssize_t ctok_deepseek_block(const unsigned char* w, Py_ssize_t* ends, Py_ssize_t base, Py_ssize_t room)


cdef extern from "_ascii_block_gpt2.h" nogil:
    Py_ssize_t ctok_gpt2_block(const unsigned char* w, Py_ssize_t* ends, Py_ssize_t base, Py_ssize_t room)


cdef extern from "_ascii_block_cl100k.h" nogil:
    Py_ssize_t ctok_cl100k_block(const unsigned char* w, Py_ssize_t* ends, Py_ssize_t base, Py_ssize_t room,
                                 int most)


cdef extern from "_ascii_runs.h" nogil:
    Py_ssize_t ctok_lower_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t i)
    Py_ssize_t ctok_alpha_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t i)
    Py_ssize_t ctok_byte_run_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, unsigned char byte)


cdef inline Py_ssize_t letter_run(const unsigned char* s, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """\p{L}* from i: ASCII letters fast, then the general loop if a non-ASCII byte follows."""
    i = ctok_alpha_end(s, n, i)
    if i < n and s[i] >= 0x80:  # i < n checked first
        i = run_of(s, n, i, CT_L, CT_L)
    return i


cdef inline Py_ssize_t lower_run(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, uint16_t lomask) noexcept nogil:
    """[\p{Ll}\p{Lm}\p{Lo}\p{M}]* from i (o200k's LO; lomask adds CT_HAN for Kimi): ASCII fast, then general."""
    i = ctok_lower_end(s, n, i)
    if i < n and s[i] >= 0x80:  # i < n checked first
        i = run_of(s, n, i, lomask, CT_LO)
    return i


cdef inline Py_ssize_t run_crlf(const unsigned char* s, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """[\\r\\n]*"""
    while i < n and (s[i] == 13 or s[i] == 10):  # i < n checked first
        i += 1
    return i


cdef inline Py_ssize_t run_crlf_slash(const unsigned char* s, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """[\\r\\n/]*"""
    while i < n and (s[i] == 13 or s[i] == 10 or s[i] == 47):  # i < n checked first
        i += 1
    return i


cdef inline Py_ssize_t run_digits(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, int most) noexcept nogil:
    """\\p{N}{1,most}, the character at i being \\p{N}."""
    cdef uint16_t f
    cdef Py_ssize_t k
    cdef int count = 0
    while i < n and count < most:
        k = ctok_char(s, n, i, &f)  # i < n
        if not (f & CT_N):
            break
        i += k
        count += 1
    return i


cdef enum:
    WS_GPT2 = 0     # \s++$ | \s+(?!\S) | \s
    WS_CL100K = 1   # \s++$ | \s*[\r\n] | \s+(?!\S) | \s
    WS_LLAMA = 2    # \s*[\r\n]+ | \s+(?!\S) | \s+


cdef inline Py_ssize_t ws_tail(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos, int mode,
                               uint16_t grpmask, uint16_t grp) noexcept nogil:
    """The whitespace alternatives at pos (a White_Space character).  If grpmask != 0, a character c with
    (flags(c) & grpmask) != grp counts as the end of the text (DeepSeek's nested splits)."""
    cdef uint16_t f
    cdef Py_ssize_t k
    cdef Py_ssize_t i = pos
    cdef Py_ssize_t last = pos      # start of the last character of the run
    cdef Py_ssize_t lastnl = -1     # index of the last \r or \n in the run
    cdef bint at_end = True
    while i < n:
        if s[i] == 32:  # i < n; a run of spaces (indentation) at once, the last one starting at k - 1
            k = ctok_byte_run_end(s, n, i + 1, 32)
            last = k - 1
            i = k
            continue
        if s[i] < 0x80:  # i < n
            f = ctok_ascii_flags[s[i]]  # s[i] < 128
            k = 1
        else:
            k = ctok_char(s, n, i, &f)  # i < n
        if not (f & CT_WS):
            at_end = grpmask != 0 and (f & grpmask) != grp
            break
        if f & CT_CRLF:
            lastnl = i
        last = i
        i += k
    # i = end of the run; at_end: nothing (of this sub-segment) follows
    if mode == WS_LLAMA:
        if lastnl >= 0:
            return lastnl + 1
        if at_end:
            return i
    else:
        if at_end:
            return i
        if mode == WS_CL100K and lastnl >= 0:
            return lastnl + 1
    if last > pos:   # \s+(?!\S): all but the last character
        return last
    return i         # one whitespace character: \s or \s+


cdef inline Py_ssize_t contraction(const unsigned char* s, Py_ssize_t n, Py_ssize_t e, bint icase) noexcept nogil:
    """'s|'t|'re|'ve|'m|'ll|'d at e (case-insensitively if icase, where U+017F LONG S matches s as in both
    reference engines' simple case folding); returns the end or e."""
    cdef unsigned char c, d
    if e + 1 >= n or s[e] != 39:  # e + 1 < n before reading s[e], s[e + 1]
        return e
    c = s[e + 1]  # e + 1 < n checked above
    if icase:
        if c == 0xC5 and e + 2 < n and s[e + 2] == 0xBF:  # U+017F; e + 2 < n checked
            return e + 3
        if c < 0x80:
            c = c | 0x20  # only 'A'..'Z' map onto 'a'..'z' among the letters compared below
    if c == 115 or c == 116 or c == 109 or c == 100:  # s t m d
        return e + 2
    if e + 2 >= n:
        return e
    d = s[e + 2]  # e + 2 < n checked
    if icase and d < 0x80:
        d = d | 0x20
    if (c == 114 and d == 101) or (c == 118 and d == 101) or (c == 108 and d == 108):  # re ve ll
        return e + 3
    return e


# ---------------------------------------------------------------- r50k / p50k / GPT-2 ByteLevel
cdef Py_ssize_t scan_gpt2(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    # '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
    cdef uint16_t f, f2
    cdef Py_ssize_t k, k2, e, p = pos
    if s[pos] == 39:  # pos < n
        e = contraction(s, n, pos, False)
        if e > pos:
            return e
    # fast path: ' ?' + ASCII letter
    if is_alpha(s[pos]):  # pos < n
        return letter_run(s, n, pos + 1)
    if s[pos] == 32 and pos + 1 < n and is_alpha(s[pos + 1]):  # pos + 1 < n checked first
        return letter_run(s, n, pos + 2)
    k = ctok_char(s, n, pos, &f)  # pos < n by contract
    if s[pos] == 32 and pos + 1 < n:  # pos < n by contract
        k2 = ctok_char(s, n, pos + 1, &f2)  # pos + 1 < n
        if not (f2 & CT_WS):
            p = pos + 1
            k = k2
            f = f2
    if f & CT_L:
        return run_of_after(s, n, p + k, k, CT_L, CT_L, BMP3_L, BMP2_L)
    if f & CT_N:
        return run_of(s, n, p + k, CT_N, CT_N)
    if not (f & CT_WS):
        return run_of(s, n, p + k, LWSN, 0)
    return ws_tail(s, n, pos, WS_GPT2, 0, 0)


# ---------------------------------------------------------------- cl100k, Llama 3, Qwen
cdef Py_ssize_t scan_cl100k_like(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos, int kind) noexcept nogil:
    # cl100k: '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s
    # llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    # qwen: llama3 with \p{N}.  The optional prefix class excludes \p{L}, so ?+ and ? behave alike.
    cdef uint16_t f, f2
    cdef Py_ssize_t k, k2, e, p = pos
    if s[pos] == 39:  # pos < n
        e = contraction(s, n, pos, True)
        if e > pos:
            return e
    # fast path: an ASCII letter, or an ASCII prefix of [^\r\n\p{L}\p{N}] and an ASCII letter
    if is_alpha(s[pos]):  # pos < n
        return letter_run(s, n, pos + 1)
    if s[pos] < 0x80 and not (ctok_ascii_flags[s[pos]] & (CT_L | CT_N | CT_CRLF)) and pos + 1 < n:  # s[pos] < 128
        if is_alpha(s[pos + 1]):  # pos + 1 < n
            return letter_run(s, n, pos + 2)
        # The same for a 2-byte letter (Cyrillic, Greek, Arabic...), without decoding the prefix and the letter.
        if bmp2_at(s, n, pos + 1, BMP2_L):
            return letter_run2(s, n, pos + 3)
    elif bmp2_at(s, n, pos, BMP2_L):
        return letter_run2(s, n, pos + 2)
    k = ctok_char(s, n, pos, &f)  # pos < n by contract
    if f & CT_L:
        return run_of_after(s, n, pos + k, k, CT_L, CT_L, BMP3_L, BMP2_L)
    if f & CT_N:
        return run_digits(s, n, pos, 1 if kind == PRETOK_QWEN else 3)
    if pos + k < n:
        k2 = ctok_char(s, n, pos + k, &f2)  # pos + k < n
        if (f2 & CT_L) and not (f & CT_CRLF):
            return run_of_after(s, n, pos + k + k2, k2, CT_L, CT_L, BMP3_L, BMP2_L)
        if s[pos] == 32 and not (f2 & LWSN):  # pos < n by contract
            return run_crlf(s, n, run_of(s, n, pos + 1 + k2, LWSN, 0))
    if not (f & LWSN):
        return run_crlf(s, n, run_of(s, n, pos + k, LWSN, 0))
    return ws_tail(s, n, pos, WS_CL100K if kind == PRETOK_CL100K else WS_LLAMA, 0, 0)


# ---------------------------------------------------------------- o200k, Llama 4, Tekken, Kimi
cdef inline Py_ssize_t o200k_alt1(const unsigned char* s, Py_ssize_t n, Py_ssize_t q, uint16_t f, Py_ssize_t k,
                                  uint16_t upmask, uint16_t lomask) noexcept nogil:
    """UP* LO+ anchored at q (leftmost-first backtracking result), or -1.  UP = (flags & upmask) == CT_UP.
    f and k: the flags and length of the character at q (q < n), which the callers have decoded already."""
    cdef Py_ssize_t i = q, lastlo = -1, lastlo_end = -1, j
    cdef const uint64_t* up3 = &BMP3_UPLO_KIMI[0] if upmask & CT_HAN else &BMP3_UPLO[0]
    cdef const uint64_t* lo3 = &BMP3_LO_KIMI[0] if lomask & CT_HAN else &BMP3_LO[0]
    while True:
        if (f & upmask) != CT_UP:
            break
        if (f & lomask) == CT_LO:
            lastlo = i
            lastlo_end = i + k
            if k == 2:
                # 2-byte characters of both classes that follow (Arabic letters and marks, ...): UP* goes on
                # over them and each is the last LO so far.  (One branch per length, not one with k: the
                # shared version read 2-4% slower on Arabic and Japanese, the lengths no longer constants.)
                j = ctok_bmp2_run(s, n, i + 2, BMP2_UPLO)
                if j > i + 2:
                    lastlo = j - 2
                    lastlo_end = j
                    i = j - 2
            elif k == 3:
                # The same for 3-byte ones (kana, Han but for Kimi, Hangul).
                j = ctok_bmp3_run(s, n, i + 3, up3)
                if j > i + 3:
                    lastlo = j - 3
                    lastlo_end = j
                    i = j - 3
        i += k
        if i >= n:
            break
        k = ctok_char(s, n, i, &f)  # i < n
    if i < n and (f & lomask) == CT_LO:  # f, k: the character at i, which LO+ takes
        return run_of_after(s, n, i + k, k, lomask, CT_LO, lo3, BMP2_LO)
    if lastlo >= 0:
        return lastlo_end
    return -1


cdef inline Py_ssize_t o200k_alt2(const unsigned char* s, Py_ssize_t n, Py_ssize_t q,
                                  uint16_t upmask, uint16_t lomask) noexcept nogil:
    """UP+ LO* anchored at q, or -1."""
    cdef Py_ssize_t i = run_of(s, n, q, upmask, CT_UP)
    if i == q:
        return -1
    return run_of(s, n, i, lomask, CT_LO)


cdef Py_ssize_t scan_o200k_like(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos, int kind) noexcept nogil:
    # o200k: [^\r\n\p{L}\p{N}]?[UP]*[LO]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[UP]+[LO]*(?i:...)?
    #        |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
    #   UP = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], LO = [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    # tekken: no contractions, \p{N}.  kimi: [\p{Han}]+ first, UP and LO && [^\p{Han}], [\r\n]* after punctuation.
    cdef uint16_t f, f2 = 0, upmask = CT_UP, lomask = CT_LO
    cdef Py_ssize_t k, k2 = 0, e, q, r, p = pos
    cdef bint prefix
    if kind == PRETOK_KIMI:
        lomask = CT_LO | CT_HAN
        upmask = CT_UP | CT_HAN
    # fast path: [optional ASCII prefix of [^\r\n\p{L}\p{N}]] then "a..." or "Aa..." in ASCII: the first
    # alternative matches with UP* covering at most the capital, then LO+ (exactly as the general code finds)
    q = pos
    if s[pos] < 0x80 and not (ctok_ascii_flags[s[pos]] & (CT_L | CT_N | CT_CRLF)) and pos + 1 < n:  # s[pos] < 128
        q = pos + 1
    e = -1
    if is_lower(s[q]):  # q < n: q == pos, or q == pos + 1 < n
        e = lower_run(s, n, q + 1, lomask)
    elif is_alpha(s[q]) and q + 1 < n and is_lower(s[q + 1]):  # q + 1 < n checked before reading
        e = lower_run(s, n, q + 2, lomask)
    elif bmp2_at(s, n, q, BMP2_LO_ONLY):
        # The same for 2-byte letters (Cyrillic, Greek...): a lowercase one at q, or a capital followed by a
        # lowercase one (UP* takes the capital and stops: a lowercase letter is no UP), then LO+ from there.
        # The general way below decodes the prefix and the letter, and runs o200k_alt1's loop: in Russian text
        # it cost about 200 instructions a word.
        e = lo_run2(s, n, q + 2, lomask)
    elif bmp2_at(s, n, q, BMP2_UP_ONLY) and bmp2_at(s, n, q + 2, BMP2_LO_ONLY):
        e = lo_run2(s, n, q + 4, lomask)
    elif bmp2_at(s, n, q, BMP2_UPLO):
        # 2-byte letters of both classes (Lo, Lm and marks: Arabic, Hebrew, Syriac, Thaana...): UP* takes their
        # whole run and gives its last character back to LO+, when the run ends at the text's end or at ASCII
        # that is no letter (neither UP nor LO); else the general way below.
        r = ctok_bmp2_run_ranges(s, n, q + 2, BMP2_UPLO, UPLO_RANGE_A, UPLO_LEN_A, UPLO_RANGE_B, UPLO_LEN_B,
                                 NO_RANGE, NO_LEN)
        if r >= n or (s[r] < 0x80 and not is_alpha(s[r])):  # r < n checked first
            e = r
    if e >= 0:
        if kind != PRETOK_TEKKEN:
            e = contraction(s, n, e, True)
        return e
    k = ctok_char(s, n, pos, &f)  # pos < n
    if kind == PRETOK_KIMI and f & CT_HAN:
        return run_of_after(s, n, pos + k, k, CT_HAN, CT_HAN, BMP3_HAN, NULL)
    # letters; X = [^\r\n\p{L}\p{N}] may be taken as a one-character prefix
    prefix = not (f & (CT_L | CT_N | CT_CRLF)) and pos + k < n
    e = -1
    if prefix:
        # both letter alternatives need their first UP/LO character at pos or, after the prefix, at pos + k
        k2 = ctok_char(s, n, pos + k, &f2)  # pos + k < n (prefix)
        prefix = (f2 & (CT_UP | CT_LO)) != 0
    if prefix or (f & (CT_UP | CT_LO)):
        if prefix:
            e = o200k_alt1(s, n, pos + k, f2, k2, upmask, lomask)
        if e < 0:
            e = o200k_alt1(s, n, pos, f, k, upmask, lomask)
        if e < 0 and prefix:
            e = o200k_alt2(s, n, pos + k, upmask, lomask)
        if e < 0:
            e = o200k_alt2(s, n, pos, upmask, lomask)
    if e >= 0:
        if kind != PRETOK_TEKKEN:
            e = contraction(s, n, e, True)
        return e
    if f & CT_N:
        return run_digits(s, n, pos, 1 if kind == PRETOK_TEKKEN else 3)
    # ' ?[^\s\p{L}\p{N}]+' then [\r\n/]* (o200k, tekken) or [\r\n]* (kimi)
    if s[pos] == 32 and pos + 1 < n:  # pos < n by contract
        q = ctok_char(s, n, pos + 1, &f)  # pos + 1 < n (f now describes the character after the space)
        if not (f & LWSN):
            p = pos + 1
            k = q
        else:
            f = CT_WS
    if not (f & LWSN):
        e = run_of(s, n, p + k, LWSN, 0)
        return run_crlf(s, n, e) if kind == PRETOK_KIMI else run_crlf_slash(s, n, e)
    return ws_tail(s, n, pos, WS_LLAMA, 0, 0)


# ---------------------------------------------------------------- DeepSeek-V3
# HF Sequence of Split(Isolated): (1) \p{N}{1,3}; (2) [\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+; (3)
#   [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*
#   |\s*[\r\n]+|\s+(?!\S)|\s+
# Step 1 cuts digits into chunks of three (no later step splits a chunk); step 2 cuts runs of that CJK class;
# step 3 runs on each resulting sub-segment, whose end acts as end of text.  A sub-segment is a maximal run of
# characters of one group: not \p{N} and CJK, or not \p{N} and not CJK.  "Out of group" = (flags & (N|CJK)) != grp.

cdef inline Py_ssize_t ds_char(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, uint16_t grp,
                               uint16_t* f) noexcept nogil:
    """Length of the character at i if it is in the sub-segment (group grp), else 0."""
    cdef Py_ssize_t k
    if i >= n:
        return 0
    k = ctok_char(s, n, i, f)  # i < n checked
    if (f[0] & (CT_N | CT_DSCJK)) != grp:
        return 0
    return k


# DeepSeek's [\p{L}\p{M}] runs as sets of 2- and 3-byte characters, per group: not \p{N}, and outside or
# inside its CJK class (no 2-byte character is in it).
cdef uint64_t DS2_LM[32]
cdef uint64_t DS3_LM[1024]
cdef uint64_t DS3_LM_CJK[1024]
ctok_bmp2_fill_any(DS2_LM, CT_L | CT_M, CT_N | CT_DSCJK, 0)
ctok_bmp3_fill_any(DS3_LM, CT_L | CT_M, CT_N | CT_DSCJK, 0)
ctok_bmp3_fill_any(DS3_LM_CJK, CT_L | CT_M, CT_N, CT_DSCJK)


cdef inline Py_ssize_t ds_run(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, uint16_t grp,
                              uint16_t want) noexcept nogil:
    """Run of in-group characters having any flag of want."""
    cdef uint16_t f
    cdef Py_ssize_t k
    while True:
        k = ds_char(s, n, i, grp, &f)
        if k == 0 or not (f & want):
            return i
        i += k


cdef Py_ssize_t ds_letters_after(const unsigned char* s, Py_ssize_t n, Py_ssize_t i, Py_ssize_t k,
                                 uint16_t grp) noexcept nogil:
    """ds_run(..., CT_L | CT_M) from i, the end of such a character of length k: the 2- or 3-byte ones that
    follow it go through the bit sets first (Cyrillic, Arabic, kana, Hangul...), as run_of_after does."""
    if k == 2 and grp == 0:
        i = ctok_bmp2_run(s, n, i, DS2_LM)
    elif k == 3:
        i = ctok_bmp3_run(s, n, i, &DS3_LM_CJK[0] if grp else &DS3_LM[0])
    return ds_run(s, n, i, grp, CT_L | CT_M)


cdef Py_ssize_t ds_match(const unsigned char* s, Py_ssize_t n, Py_ssize_t p, uint16_t grp) noexcept nogil:
    """End of the step-3 match anchored at p (an in-group character), or -1."""
    cdef uint16_t f = 0, f2 = 0
    cdef Py_ssize_t k, k2, q = p, e
    cdef unsigned char c
    # ASCII fast path for the word alternatives: two ASCII characters at p decide which one matches, and
    # ASCII letters run 16 at a time; a run reaching a non-ASCII byte goes on with the general loop.
    c = s[p]  # p < n: the character at p is in the group
    if c < 0x80 and p + 1 < n and s[p + 1] < 0x80 and is_alpha(s[p + 1]):
        f = ctok_ascii_flags[c]  # c < 128
        if f & CT_APUNCT:
            return ctok_alpha_end(s, n, p + 2)  # [!"#...~][A-Za-z]+: ASCII letters only
        if is_alpha(c) or not (f & (CT_CRLF | CT_L | CT_P | CT_S)):
            e = ctok_alpha_end(s, n, p + 2)
            return ds_run(s, n, e, grp, CT_L | CT_M) if e < n and s[e] >= 0x80 else e  # e < n checked first
    k = ds_char(s, n, p, grp, &f)
    k2 = ds_char(s, n, p + k, grp, &f2)
    if (f & CT_APUNCT) and k2 and (f2 & CT_AALPHA):
        return ds_run(s, n, p + k + k2, grp, CT_AALPHA)
    if not (f & (CT_CRLF | CT_L | CT_P | CT_S)) and k2 and (f2 & (CT_L | CT_M)):
        return ds_letters_after(s, n, p + k + k2, k2, grp)
    if f & (CT_L | CT_M):
        return ds_letters_after(s, n, p + k, k, grp)
    if s[p] == 32 and k2 and (f2 & (CT_P | CT_S)):  # p < n: the character at p is in the group
        q = p + 1
        k = k2
        f = f2
    if f & (CT_P | CT_S):
        k = ds_run(s, n, q + k, grp, CT_P | CT_S)
        return run_crlf(s, n, k) if grp == 0 else k  # CR, LF belong to the non-CJK group only
    if f & CT_WS:
        return ws_tail(s, n, p, WS_LLAMA, CT_N | CT_DSCJK, grp)
    return -1


cdef Py_ssize_t scan_deepseek(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    cdef uint16_t f, grp
    cdef Py_ssize_t k, e, p
    k = ctok_char(s, n, pos, &f)  # pos < n
    if f & CT_N:
        return run_digits(s, n, pos, 3)
    grp = f & CT_DSCJK
    e = ds_match(s, n, pos, grp)
    if e >= 0:
        return e
    # a gap: up to the next position where a match starts, or the end of the sub-segment
    p = pos + k
    while True:
        k = ds_char(s, n, p, grp, &f)
        if k == 0 or ds_match(s, n, p, grp) >= 0:
            return p
        p += k


# ---------------------------------------------------------------- ASCII shapes, inline
# Why: most pieces of English and code are a handful of ASCII shapes (" word", "Word", ",", " (", "123").  These
# return their end without a call into the general scanners, whose prologue alone costs more than the scan;
# every other case, and any shape whose run reaches a non-ASCII byte (where a class may go on), returns -1 and
# the general scanner decides, from the same position.  Each shape below is the alternative the general
# scanner takes for that input (the comments name it); tests/test_pretok.py checks both against the references.

cdef inline Py_ssize_t ascii_punct_piece(const unsigned char* s, Py_ssize_t n, Py_ssize_t i,
                                         bint slash) noexcept nogil:
    """The rest of `[^\s\p{L}\p{N}]+[\r\n]*` (or `[\r\n/]*` when slash) from i, inside the punctuation run: its
    end, or -1 when the run reaches a non-ASCII character (which may be punctuation too)."""
    while i < n and s[i] < 0x80 and not (ctok_ascii_flags[s[i]] & LWSN):  # i < n; s[i] < 128
        i += 1
    if i < n and s[i] >= 0x80:  # i < n checked first
        return -1
    while i < n and (s[i] == 13 or s[i] == 10 or (slash and s[i] == 47)):  # i < n checked first
        i += 1
    return i


cdef inline Py_ssize_t ascii_digits_piece(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos,
                                          int most) noexcept nogil:
    """`\p{N}{1,most}` at pos (an ASCII digit): its end, or -1 when a non-ASCII character could extend it."""
    cdef Py_ssize_t e = pos + 1
    while e < n and e < pos + most and <unsigned char>(s[e] - 48) < 10:  # e < n checked first
        e += 1
    if e < n and e < pos + most and s[e] >= 0x80:  # e < n checked first
        return -1
    return e


cdef inline Py_ssize_t ascii_ws_piece(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos, unsigned char c,
                                      unsigned char d) noexcept nogil:
    """Two whitespace shapes of code, the same under every whitespace rule of o200k, cl100k, Llama 3, Qwen and
    Kimi: a newline followed by spaces and then an ASCII non-space (`\s*[\r\n]+` / `\s*[\r\n]`: the newline
    alone), and a run of spaces followed by an ASCII non-space (`\s+(?!\S)`: all but the last space) or by the
    end of the text (the whole run).  -1 for anything else.  pos + 1 < n; c = s[pos], d = s[pos + 1]."""
    cdef Py_ssize_t e
    if c == 10 and (d == 32 or (d < 0x80 and not (ctok_ascii_flags[d] & CT_WS))):  # d < 128
        e = ctok_byte_run_end(s, n, pos + 1, 32)
        if e < n and s[e] < 0x80 and not (ctok_ascii_flags[s[e]] & CT_WS):    # e < n; s[e] < 128
            return pos + 1
        return -1
    if c == 32 and d == 32:
        e = ctok_byte_run_end(s, n, pos + 2, 32)
        if e == n:
            return n
        if s[e] < 0x80 and not (ctok_ascii_flags[s[e]] & CT_WS):              # e < n; s[e] < 128
            return e - 1                                                       # e - 1 >= pos + 1
    return -1


cdef inline Py_ssize_t o200k_word_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t q,
                                     bint contractions) noexcept nogil:
    """o200k's letter alternatives from q, an ASCII letter after the optional prefix: the piece's end, or -1 when
    a non-ASCII letter may go on."""
    cdef Py_ssize_t u = q, e
    while u < n and <unsigned char>(s[u] - 65) < 26:  # u < n checked first; 'A'..'Z'
        u += 1
    e = ctok_lower_end(s, n, u)
    if e < n and s[e] >= 0x80:  # e < n checked first: a non-ASCII letter may go on
        return -1
    # e > u: [UP]*[LO]+ (capitals, then lowercase); e == u > q: [UP]+[LO]* with LO* empty.  In ASCII the
    # classes are disjoint, so neither leaves room for backtracking.
    return contraction(s, n, e, True) if contractions else e


# Pairs of pieces (next_piece_ends only).  Why: in code a newline or a line-ending punctuation piece is mostly
# followed by indentation, indentation by " word" or " =", and a punctuation piece by "word" or " word" (", x",
# " (self", "). x").  The first piece's scan has already found where the indentation ends, or what follows it,
# so the second piece's end comes without a step of the loop: one decision, and one link of the chain from a
# piece's start to the next, fewer.  Each second piece is the shape o200k_ascii gives from the first's end (the
# regex has no look-behind, so a piece depends only on its start).  Measured: a word then " word" as a pair too
# was slower (the loop's own dispatch already handles that, and the extra test mispredicts).

cdef inline Py_ssize_t o200k_after_indent(const unsigned char* s, Py_ssize_t n, Py_ssize_t e, bint slash,
                                          bint contractions) noexcept nogil:
    """The piece at e - 1, a space, where s[e] is an ASCII non-space (e < n): ` word` (the space as the
    optional prefix), ` =` (` ?[^\s\p{L}\p{N}]+`), or -1 (a digit: left to the loop)."""
    cdef unsigned char c = s[e]  # e < n by contract
    if is_alpha(c):
        return o200k_word_end(s, n, e, contractions)
    if not (ctok_ascii_flags[c] & LWSN):  # c < 128 by contract
        return ascii_punct_piece(s, n, e + 1, slash)
    return -1


cdef inline Py_ssize_t o200k_ascii_pair(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos, bint slash,
                                        bint contractions, int most, bint want_second,
                                        Py_ssize_t* second) noexcept nogil:
    """scan_o200k_like on the ASCII shapes above, or -1: o200k (slash, contractions, most = 3 digits), Kimi (no
    slash) and Tekken (slash, no contractions, most = 1).  With want_second (a constant at each call site, so
    the compiler keeps only one version), also in *second the end of the piece after it when the pair is one
    of the above (else -1, and always -1 when the answer is -1)."""
    cdef unsigned char c = s[pos], d  # pos < n by contract
    cdef uint16_t f
    cdef Py_ssize_t q, e, r
    second[0] = -1
    if c >= 0x80 or pos + 1 >= n:
        return -1
    d = s[pos + 1]  # pos + 1 < n checked above
    f = ctok_ascii_flags[c]  # c < 128
    # [^\r\n\p{L}\p{N}]? then letters, where the prefix is taken when c may be one and a letter follows
    q = pos + 1 if (not (f & (CT_L | CT_N | CT_CRLF)) and is_alpha(d)) else pos
    if is_alpha(s[q]):  # q <= pos + 1 < n
        return o200k_word_end(s, n, q, contractions)
    if d >= 0x80:
        return -1
    if f & CT_N:
        return ascii_digits_piece(s, n, pos, most)               # \p{N}{1,most}
    if not (f & LWSN):
        e = ascii_punct_piece(s, n, pos + 1, slash)              # ?[^\s\p{L}\p{N}]+ without the space
    elif c == 32 and not (ctok_ascii_flags[d] & LWSN):              # d < 128
        e = ascii_punct_piece(s, n, pos + 2, slash)              # the same after one space
    elif not want_second:
        return ascii_ws_piece(s, n, pos, c, d)
    else:
        if c == 10 and (d == 32 or not (ctok_ascii_flags[d] & CT_WS)):  # d < 128
            e = ctok_byte_run_end(s, n, pos + 1, 32)
            if e < n and s[e] < 0x80 and not (ctok_ascii_flags[s[e]] & CT_WS):    # e < n; s[e] < 128
                if e > pos + 2:
                    second[0] = e - 1                                          # `\s+(?!\S)`
                elif e == pos + 2:
                    second[0] = o200k_after_indent(s, n, e, slash, contractions)
                return pos + 1
            return -1
        if c == 32 and d == 32:
            e = ctok_byte_run_end(s, n, pos + 2, 32)
            if e == n:
                return n
            if s[e] < 0x80 and not (ctok_ascii_flags[s[e]] & CT_WS):              # e < n; s[e] < 128
                second[0] = o200k_after_indent(s, n, e, slash, contractions)
                return e - 1                                                       # e - 1 >= pos + 1
        return -1
    # e < 0: the run reached a non-ASCII character (general scanner); e + 1 < n for s[e], s[e + 1] below
    if want_second and e > 0 and e + 1 < n:
        if is_alpha(s[e]):
            second[0] = o200k_word_end(s, n, e, contractions)                      # word
        elif s[e] == 32:
            if is_alpha(s[e + 1]):
                second[0] = o200k_word_end(s, n, e + 1, contractions)              # " word"
            elif s[e - 1] == 10 and s[e + 1] == 32:                                # e - 1 > pos
                r = ctok_byte_run_end(s, n, e + 2, 32)
                if r < n and s[r] < 0x80 and not (ctok_ascii_flags[s[r]] & CT_WS):    # r < n; s[r] < 128
                    second[0] = r - 1                                                  # r - 1 > e
    return e


cdef inline Py_ssize_t o200k_ascii(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos, bint slash,
                                    bint contractions, int most) noexcept nogil:
    cdef Py_ssize_t unused
    return o200k_ascii_pair(s, n, pos, slash, contractions, most, False, &unused)


cdef inline Py_ssize_t cl100k_ascii(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos, int most) noexcept nogil:
    """scan_cl100k_like for cl100k / Llama 3 (most = 3 digits) and Qwen (most = 1) on the ASCII shapes above,
    or -1.  A piece starting with an apostrophe may be a contraction: left to the general scanner."""
    cdef unsigned char c = s[pos], d  # pos < n by contract
    cdef uint16_t f
    cdef Py_ssize_t e
    if c >= 0x80 or c == 39 or pos + 1 >= n:
        return -1
    d = s[pos + 1]  # pos + 1 < n checked above
    f = ctok_ascii_flags[c]  # c < 128
    if is_alpha(c):
        e = ctok_alpha_end(s, n, pos + 1)                         # \p{L}+
    elif not (f & (CT_L | CT_N | CT_CRLF)) and is_alpha(d):
        e = ctok_alpha_end(s, n, pos + 2)                         # [^\r\n\p{L}\p{N}]\p{L}+
    else:
        if d >= 0x80:
            return -1
        if f & CT_N:
            return ascii_digits_piece(s, n, pos, most)           # \p{N}{1,most}
        if not (f & LWSN):
            return ascii_punct_piece(s, n, pos + 1, False)       # ?[^\s\p{L}\p{N}]+[\r\n]* without the space
        if c == 32 and not (ctok_ascii_flags[d] & LWSN):          # d < 128
            return ascii_punct_piece(s, n, pos + 2, False)
        return ascii_ws_piece(s, n, pos, c, d)
    if e < n and s[e] >= 0x80:  # e < n checked first: a non-ASCII letter may go on
        return -1
    return e


cdef inline Py_ssize_t gpt2_ascii(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """scan_gpt2 on the ASCII shapes, or -1.  A piece starting with an apostrophe may be a contraction: left to
    the general scanner.  Every run below is possessive (++), so it ends where its class ends."""
    cdef unsigned char c = s[pos], d  # pos < n by contract
    cdef uint16_t f
    cdef Py_ssize_t q = pos, e
    if c >= 0x80 or c == 39 or pos + 1 >= n:
        return -1
    d = s[pos + 1]  # pos + 1 < n checked above
    if d >= 0x80:
        return -1
    f = ctok_ascii_flags[c]  # c < 128
    if c == 32 and not (ctok_ascii_flags[d] & CT_WS):  # d < 128: ' ?' takes the space
        q = pos + 1
        f = ctok_ascii_flags[d]
    if f & CT_L:
        e = ctok_alpha_end(s, n, q + 1)                           # ?\p{L}++
    elif f & CT_N:
        e = q + 1                                                 # ?\p{N}++
        while e < n and <unsigned char>(s[e] - 48) < 10:          # e < n checked first
            e += 1
    elif not (f & CT_WS):
        e = q + 1                                                 # ?[^\s\p{L}\p{N}]++
        while e < n and s[e] < 0x80 and not (ctok_ascii_flags[s[e]] & LWSN):  # e < n; s[e] < 128
            e += 1
    else:
        # \s++$ | \s+(?!\S) | \s over ASCII whitespace: the whole run at the end, else all but its last
        # character, or the one character
        e = pos + 1
        while e < n:
            if s[e] == 32:  # e < n; spaces (indentation) 16 at a time
                e = ctok_byte_run_end(s, n, e + 1, 32)
            elif s[e] < 0x80 and (ctok_ascii_flags[s[e]] & CT_WS):  # s[e] < 128
                e += 1
            else:
                break
        if e < n and s[e] >= 0x80:  # e < n checked first: a non-ASCII space may go on
            return -1
        if e == n or e == pos + 1:
            return e
        return e - 1
    if e < n and s[e] >= 0x80:  # e < n checked first: a non-ASCII character of the class may go on
        return -1
    return e


cdef inline Py_ssize_t ascii_ws_llama(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos,
                                      bint digit_ends) noexcept nogil:
    """`\s*[\r\n]+|\s+(?!\S)|\s+` at pos (ASCII whitespace) over an ASCII run: its end, or -1 when the run
    meets a non-ASCII character.  digit_ends: an ASCII digit counts as the end of the text (DeepSeek, whose
    digits are split off before this step)."""
    cdef Py_ssize_t i = pos, lastnl = -1
    cdef unsigned char c
    while i < n:
        c = s[i]  # i < n
        if c == 32:
            i = ctok_byte_run_end(s, n, i + 1, 32)
            continue
        if c >= 0x80:
            return -1
        if not (ctok_ascii_flags[c] & CT_WS):  # c < 128
            break
        if c == 10 or c == 13:
            lastnl = i
        i += 1
    if lastnl >= 0:                                     # \s*[\r\n]+
        return lastnl + 1
    if i == n or (digit_ends and <unsigned char>(s[i] - 48) < 10):   # i < n checked first
        return i                                        # \s+(?!\S) to the end
    if i - pos > 1:
        return i - 1                                    # \s+(?!\S): all but the last (ASCII) character
    return i                                            # \s+ of one


cdef inline Py_ssize_t deepseek_ascii(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """scan_deepseek on the ASCII shapes, or -1.  ASCII characters are all in the non-CJK group, where an ASCII
    digit is the only sub-segment end (step 1 cuts it off)."""
    cdef unsigned char c = s[pos], d  # pos < n by contract
    cdef uint16_t f
    cdef Py_ssize_t e
    if c >= 0x80 or pos + 1 >= n:
        return -1
    f = ctok_ascii_flags[c]  # c < 128
    if f & CT_N:
        return ascii_digits_piece(s, n, pos, 3)                  # step 1: \p{N}{1,3}
    d = s[pos + 1]  # pos + 1 < n checked above
    if d >= 0x80:
        return -1
    if is_alpha(d):
        if f & CT_APUNCT:
            return ctok_alpha_end(s, n, pos + 2)                 # [!"#...~][A-Za-z]+: ASCII letters only
        if f & CT_CRLF:
            return pos + 1                                       # \s*[\r\n]+ (one newline, a letter follows)
        e = ctok_alpha_end(s, n, pos + 2)                        # [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
    elif is_alpha(c):
        e = pos + 1                                              # [\p{L}\p{M}]+ of one letter
    elif f & CT_APUNCT:
        e = pos + 1                                              # ?[\p{P}\p{S}]+[\r\n]* without the space
    elif c == 32 and (ctok_ascii_flags[d] & CT_APUNCT):          # d < 128
        e = pos + 2                                              # the same after one space
    elif f & CT_WS:
        return ascii_ws_llama(s, n, pos, True)
    else:
        return -1                                                # a control character: a gap
    if f & CT_APUNCT or (c == 32 and not is_alpha(d)):
        while e < n and s[e] < 0x80 and (ctok_ascii_flags[s[e]] & CT_APUNCT):  # e < n; s[e] < 128
            e += 1
        if e < n and s[e] >= 0x80:  # e < n checked first: non-ASCII punctuation may go on
            return -1
        return run_crlf(s, n, e)
    if e < n and s[e] >= 0x80:  # e < n checked first: a non-ASCII letter or mark may go on
        return -1
    return e


cdef inline Py_ssize_t o200k_piece(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos, int kind) noexcept nogil:
    cdef Py_ssize_t e = o200k_ascii(s, n, pos, kind != PRETOK_KIMI, kind != PRETOK_TEKKEN,
                                    1 if kind == PRETOK_TEKKEN else 3)
    return e if e >= 0 else scan_o200k_like(s, n, pos, kind)


cdef inline Py_ssize_t cl100k_piece(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos, int kind) noexcept nogil:
    cdef Py_ssize_t e = cl100k_ascii(s, n, pos, 1 if kind == PRETOK_QWEN else 3)
    return e if e >= 0 else scan_cl100k_like(s, n, pos, kind)


cdef inline Py_ssize_t gpt2_piece(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    cdef Py_ssize_t e = gpt2_ascii(s, n, pos)
    return e if e >= 0 else scan_gpt2(s, n, pos)


cdef inline Py_ssize_t deepseek_piece(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    cdef Py_ssize_t e = deepseek_ascii(s, n, pos)
    return e if e >= 0 else scan_deepseek(s, n, pos)


cdef Py_ssize_t next_piece_end(int kind, const unsigned char* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    cdef Py_ssize_t e
    if CTOK_CJK3_LEAD(s[pos]) and ctok_cjk3_kind_pieces(kind, s, n, pos, &e, 1) == 1:  # pos < n by contract
        return e                                # a 3-byte lead: _cjk3.h, as next_piece_ends
    if kind == PRETOK_GPT2:
        return gpt2_piece(s, n, pos)
    if kind == PRETOK_CL100K or kind == PRETOK_LLAMA3 or kind == PRETOK_QWEN:
        return cl100k_piece(s, n, pos, kind)
    if kind == PRETOK_O200K or kind == PRETOK_KIMI or kind == PRETOK_TEKKEN:
        return o200k_piece(s, n, pos, kind)
    if kind == PRETOK_DEEPSEEK:
        return deepseek_piece(s, n, pos)
    return n


cdef inline Py_ssize_t window_ends(int kind, const unsigned char* w, Py_ssize_t* ends, Py_ssize_t base,
                                   Py_ssize_t room, uint32_t text32) noexcept nogil:
    # One 64-byte window's trusted piece ends for kind (w[0:64] readable, w[0] a piece start), written to
    # ends[0:k] as base + offset, k <= room (room >= 8; the window functions may write scratch past them, up to
    # ends[room + CTOK_WINDOW_SLACK - 1]); 0 when the window is not worth classifying (bytes >= 0x80 in its
    # first 32, but for the o200k family's punctuation of three bytes) or decides no piece.  text32: the bits of
    # w[0:32] that are text (all of them but in a text's last window, padded with 0xFF past its end).
    cdef uint32_t high = ctok_high32(w) & text32
    if kind == PRETOK_O200K or kind == PRETOK_KIMI or kind == PRETOK_TEKKEN:
        if not ctok_window_worth(w, high):
            return 0
        return ctok_o200k_block(w, ends, base, room, kind != PRETOK_KIMI, kind != PRETOK_TEKKEN,
                                1 if kind == PRETOK_TEKKEN else 3)
    if high != 0:
        return 0
    if kind == PRETOK_CL100K or kind == PRETOK_LLAMA3 or kind == PRETOK_QWEN:
        return ctok_cl100k_block(w, ends, base, room, 1 if kind == PRETOK_QWEN else 3)
    if kind == PRETOK_GPT2:
        return ctok_gpt2_block(w, ends, base, room)
    if kind == PRETOK_DEEPSEEK:
        return ctok_deepseek_block(w, ends, base, room)
    return 0


cdef inline const unsigned char* last_window(const unsigned char* s, Py_ssize_t n, Py_ssize_t pos,
                                             unsigned char* buf) noexcept nogil:
    # A window for the text's last n - pos < 64 bytes: buf[128] gets them followed by 0xFF bytes, which every
    # window function takes as a character it does not know, past which it trusts no start (the same rule as
    # for a character >= 0x80 in the text: the end of the text is decided by the scalar scanner).  Fixed-size
    # copies when the text has 64 bytes: s[n - 64:n] then 64 bytes of 0xFF, the window starting at pos's copy.
    memset(buf + 64, 0xFF, 64)
    if n >= 64:
        memcpy(buf, s + n - 64, 64)                                    # s[n - 64:n] is the segment's
        return buf + 64 - (n - pos)                                    # buf[64 - (n - pos):128 - (n - pos)]
    memset(buf, 0xFF, 64)
    memcpy(buf, s, n)                                                  # n < 64
    return buf + pos                                                   # pos < n < 64: w[0:64] inside buf


cdef Py_ssize_t next_piece_ends(int kind, const unsigned char* s, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t* ends,
                                Py_ssize_t max_count) noexcept nogil:
    # Up to max_count successive piece ends from pos, with the kind dispatch outside the loop: callers in
    # other modules reach cdef functions through a pointer, so one call per batch, not per piece.
    cdef Py_ssize_t k = 0
    cdef Py_ssize_t e, e2, got
    cdef bint slash = kind != PRETOK_KIMI, contractions = kind != PRETOK_TEKKEN
    cdef int most = 1 if kind == PRETOK_TEKKEN else 3
    cdef unsigned char last[128]
    cdef const unsigned char* w
    cdef uint32_t text32
    cdef bint last_done = False
    # Windows of ASCII while they decide pieces (_ascii_block*.h).  A window decides about 13 pieces of English
    # or code, so with less room than 8 the caller asking again costs less than the scalar scanner's pieces.
    # The text's last bytes are one padded window (last_window), once per call: its pieces but the last one or
    # two.  Without it every text's last 64 bytes went to the scalar scanner, a mispredicted branch or two a
    # piece: chat-sized texts have a tenth of their pieces there.  It needs at least 4 bytes (no window trusts a
    # start less than 3 bytes before the end).  One call site for both: window_ends is then inlined.
    while max_count - k >= 8:
        if pos + 64 <= n:
            w = s + pos                                                  # s[pos:pos + 64] is in the segment
            text32 = 0xFFFFFFFF
        elif not last_done and n - pos >= 4:
            w = last_window(s, n, pos, last)
            text32 = 0xFFFFFFFF if n - pos >= 32 else ((<uint32_t>1 << (n - pos)) - 1)   # a shift below 32
            last_done = True
        else:
            break
        got = window_ends(kind, w, ends + k, pos, max_count - k, text32)
        if got == 0:
            break
        k += got                                                         # 1 <= got <= max_count - k
        pos = ends[k - 1]
    if k > 0 and max_count - k < 8:
        return k
    # The rest of the call scalar: bytes >= 0x80 within a window's first 32 bytes, or a run no window decides.
    # One test per call, not per piece: text with such bytes all along gets few windows.
    # CJK pieces at once (_cjk3.h) when the scalar part starts with a 3-byte character: tested once per call,
    # not in the loops below, which keep their shape (with the test in them, at each piece or after the ASCII
    # shapes, o200k over Russian and Arabic, which never take it, ran 4-9% slower).  A batch of CJK text that
    # the CJK path stops in (a newline, ASCII) finishes with the general scanner.
    if k < max_count and pos < n and CTOK_CJK3_LEAD(s[pos]):      # pos < n checked first
        got = ctok_cjk3_kind_pieces(kind, s, n, pos, ends + k, max_count - k)   # k < max_count
        if got > 0:
            k += got                                  # got <= max_count - k
            pos = ends[k - 1]
            if k >= max_count or pos >= n:
                return k
    if kind == PRETOK_O200K or kind == PRETOK_KIMI or kind == PRETOK_TEKKEN:
        while k < max_count and pos < n:
            e = o200k_ascii_pair(s, n, pos, slash, contractions, most, True, &e2)
            if e < 0:
                e = scan_o200k_like(s, n, pos, kind)
            ends[k] = e                           # k < max_count: the caller's array holds max_count
            k += 1
            if e2 >= 0 and k < max_count:         # e2 >= 0 only with e >= 0 (then e2 > e)
                ends[k] = e2                      # k < max_count checked
                k += 1
                e = e2
            pos = e
    elif kind == PRETOK_CL100K or kind == PRETOK_LLAMA3 or kind == PRETOK_QWEN:
        while k < max_count and pos < n:
            pos = cl100k_piece(s, n, pos, kind)
            ends[k] = pos
            k += 1
    elif kind == PRETOK_GPT2:
        while k < max_count and pos < n:
            pos = gpt2_piece(s, n, pos)
            ends[k] = pos
            k += 1
    elif kind == PRETOK_DEEPSEEK:
        while k < max_count and pos < n:
            pos = deepseek_piece(s, n, pos)
            ends[k] = pos
            k += 1
    else:
        while k < max_count and pos < n:
            pos = next_piece_end(kind, s, n, pos)
            ends[k] = pos
            k += 1
    return k


def _check_kind(int kind):
    if kind < 0 or kind >= PRETOK_N_KINDS:
        raise ValueError(f"unknown pretokenizer kind {kind}")


def split(int kind, bytes data):
    """The pieces of data (one segment) under the given PRETOK_* kind, as a list of bytes (tests, debugging)."""
    _check_kind(kind)
    cdef const unsigned char* s = <const unsigned char*> PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t pos = 0, end
    out = []
    while pos < n:
        end = next_piece_end(kind, s, n, pos)
        out.append(data[pos:end])
        pos = end
    return out


def piece_ends(int kind, bytes data):
    """The end offsets (bytes) of the pieces of data, as a list of ints."""
    _check_kind(kind)
    cdef const unsigned char* s = <const unsigned char*> PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t pos = 0
    out = []
    while pos < n:
        pos = next_piece_end(kind, s, n, pos)
        out.append(pos)
    return out


def piece_end_batches(int kind, bytes data, Py_ssize_t max_count=16):
    """The ends next_piece_ends gives, max_count at a time as the encoder asks for them, one list per call (tests:
    the windows and pair paths must give piece_ends' ends, never more than max_count a call)."""
    _check_kind(kind)
    if max_count < 1 or max_count > 64:
        raise ValueError("max_count must be 1..64")
    cdef const unsigned char* s = <const unsigned char*> PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t pos = 0, k, i
    cdef Py_ssize_t ends[64 + PRETOK_ENDS_SLACK + 1]           # max_count + the slack, and a canary
    out = []
    while pos < n:
        ends[max_count + PRETOK_ENDS_SLACK] = -7               # max_count <= 64: a canary after the slack
        k = next_piece_ends(kind, s, n, pos, ends, max_count)
        if k < 1 or k > max_count or ends[max_count + PRETOK_ENDS_SLACK] != -7:
            raise AssertionError(f"next_piece_ends gave {k} ends for max_count {max_count}")
        out.append([ends[i] for i in range(k)])                # i < k <= max_count
        pos = ends[k - 1]                                      # 1 <= k
    return out


def piece_ends_batched(int kind, bytes data, Py_ssize_t max_count=16):
    """piece_end_batches' ends in one list (the same as piece_ends when next_piece_ends is right)."""
    return [e for batch in piece_end_batches(kind, data, max_count) for e in batch]


def batch_sizes(int kind, bytes data, Py_ssize_t max_count=16):
    """How many ends each next_piece_ends call gave (tests: windows of ASCII end a batch early, the scalar
    scanner never does before the text's end)."""
    return [len(batch) for batch in piece_end_batches(kind, data, max_count)]


def count_pieces(int kind, bytes data):
    """Number of pieces of data, computed without the GIL (benchmarks), 16 piece ends at a time as the encoder
    asks for them (next_piece_ends)."""
    _check_kind(kind)
    cdef const unsigned char* s = <const unsigned char*> PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t pos = 0, count = 0, k
    cdef Py_ssize_t ends[16 + PRETOK_ENDS_SLACK]
    with nogil:
        while pos < n:
            k = next_piece_ends(kind, s, n, pos, ends, 16)     # 1 <= k <= 16
            pos = ends[k - 1]
            count += k
    return count


def table_flags():
    """The CT_* flags of every code point U+0000..U+10FFFF, as an array('H') (tests)."""
    from array import array
    out = array("H", bytes(2 * 0x110000))
    cdef Py_ssize_t cp
    for cp in range(0x110000):
        out[cp] = ctok_cp_flags(<uint32_t> cp)
    return out


FLAGS = {
    "CT_L": CT_L, "CT_UP": CT_UP, "CT_LO": CT_LO, "CT_M": CT_M, "CT_N": CT_N, "CT_WS": CT_WS, "CT_P": CT_P,
    "CT_S": CT_S, "CT_HAN": CT_HAN, "CT_CRLF": CT_CRLF, "CT_DSCJK": CT_DSCJK, "CT_APUNCT": CT_APUNCT,
    "CT_AALPHA": CT_AALPHA,
}


def first_difference(int kind, bytes a, bytes b):
    """Compare the piece boundaries (byte offsets) of a and b under kind; -1 if identical, else the byte offset in
    a where they first differ (tests: every code point against a class representative of the same UTF-8 length)."""
    _check_kind(kind)
    cdef const unsigned char* s = <const unsigned char*> PyBytes_AS_STRING(a)
    cdef const unsigned char* t = <const unsigned char*> PyBytes_AS_STRING(b)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(a), m = PyBytes_GET_SIZE(b)
    cdef Py_ssize_t i = 0, j = 0
    with nogil:
        while i < n and j < m:
            i = next_piece_end(kind, s, n, i)
            j = next_piece_end(kind, t, m, j)
            if i != j:
                break
    if i == j and n == m:
        return -1
    return i
