/* Piece ends of the o200k family (o200k, Kimi K2, Tekken) in a 64-byte ASCII window, bit-parallel; and the
 * classification and steps the other patterns' windows share (_ascii_block_cl100k.h, _ds.h, _gpt2.h).
 *
 * Why: the scalar scanner (scan_o200k_like, o200k_ascii_pair in _pretok.pyx) decides each piece's shape
 * with branches the predictor cannot know (word, " word", digits, punctuation, indentation...), about 30
 * cycles a piece on English and code.  Here the 64 bytes after a piece start are classified at once into
 * one bit per byte and class, every piece start of the window is derived with whole-word bit operations,
 * and the ends are read off with count-trailing-zeros: no branch depends on a piece's shape.
 *
 * Contract: ctok_o200k_block(w, ends, base, room, slash, contractions, most) reads w[0:64] (the caller
 * guarantees 64 readable bytes: the segment's, or its last bytes followed by 0xFF bytes; and that w[0] starts a
 * piece), and writes to ends[0:k] base plus the offsets (1..61, increasing) of the next k <= room piece ends
 * (room >= 8; scratch values may follow, up to CTOK_WINDOW_SLACK past room), exactly those the scalar scanner
 * gives; it returns k, which is 0 when the window decides no piece (a byte >= 0x80 early, a long run).
 * `slash`: the punctuation tail is [\r\n/]* (o200k, Tekken), else [\r\n]* (Kimi).  `contractions`:
 * words take (?i:'s|'t|'re|'ve|'m|'ll|'d) (o200k, Kimi).  `most`: digits per piece, 3 or 1 (Tekken).
 *
 * Reference: the patterns in ctok/patterns.py (tiktoken's o200k_base, Kimi K2's, Tekken's).  On ASCII
 * they read: a word is an optional prefix [^\r\n\p{L}\p{N}] then [A-Z]*[a-z]+ or [A-Z]+[a-z]*, then a
 * contraction; digits go 1..most at a time; punctuation is ` ?` then a run of [^\s\p{L}\p{N}] then the
 * tail; whitespace is `\s*[\r\n]+` (up to the run's last newline), `\s+(?!\S)` (a run before a non-space
 * leaves its last character to the next piece) or `\s+`.  Left to right, that makes these piece starts
 * (bit i = byte i of the window; "run" = maximal run of one class):
 *   1. the start of each run of letters, digits, whitespace, other ASCII ("punctuation");
 *   2. an upper-case letter after a lower-case one ([A-Z]*[a-z]+ stops there);
 *   3. every most-th digit of a digit run;
 *   4. in a whitespace run followed by a non-space: the character after its last newline, and its last
 *      character when at least two non-newlines end the run;
 *   5. the punctuation tail (a newline right after punctuation, then newlines and, with slash, '/')
 *      belongs to the punctuation: no start inside it, a start right after it;
 *   6. a space before punctuation is ` ?`: the punctuation after it is no start;
 *   7. a contraction after a letter belongs to the word: no start in it, a start after it when a letter
 *      follows (contractions are matched left to right: the apostrophe after one starts a new piece);
 *   8. a word takes the character before it as its prefix when that character starts a piece and is
 *      punctuation or a non-newline space: the word's first letter is then no start.
 * A start is decided by the bytes up to two after it, except inside a whitespace run, decided by the
 * byte after the run.  So starts are trusted up to 3 bytes before the window's end or its first byte
 * >= 0x80 (which may be a letter, a digit or a space), and not past the start of a whitespace run that
 * reaches that end.  tests/test_ascii_block.py checks every rule against the reference patterns and the
 * scalar scanner on random text.
 */
#ifndef CTOK_ASCII_BLOCK_H
#define CTOK_ASCII_BLOCK_H
#include <stdint.h>
#include <Python.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Lowest (highest) set bit of x != 0.  Other compilers than GCC and Clang (MSVC has no __SSE2__ either, so the
 * plain classification below serves it) take a loop: correct, not fast. */
#if defined(__GNUC__) || defined(__clang__)
#define CTOK_LOW_BIT64(x) __builtin_ctzll(x)
#define CTOK_HIGH_BIT64(x) (63 - __builtin_clzll(x))
#define CTOK_LOW_BIT32(x) __builtin_ctz(x)
#else
static inline int ctok_low_bit64(uint64_t x) { int i = 0; while (!(x & 1)) { x >>= 1; i++; } return i; }
static inline int ctok_high_bit64(uint64_t x) { int i = 0; while (x >>= 1) i++; return i; }
#define CTOK_LOW_BIT64(x) ctok_low_bit64(x)
#define CTOK_HIGH_BIT64(x) ctok_high_bit64(x)
#define CTOK_LOW_BIT32(x) ctok_low_bit64((uint64_t)(x))
#endif

typedef struct {
    uint64_t letter, upper, digit, space, newline, blank, apostrophe, slash, high;
} ctok_block_classes;

#if defined(__SSE2__)
static inline uint64_t ctok_mask64(__m128i a, __m128i b, __m128i c, __m128i d) {
    return (uint64_t)(uint32_t)_mm_movemask_epi8(a) | ((uint64_t)(uint32_t)_mm_movemask_epi8(b) << 16)
         | ((uint64_t)(uint32_t)_mm_movemask_epi8(c) << 32) | ((uint64_t)(uint32_t)_mm_movemask_epi8(d) << 48);
}

/* Signed byte compares: bytes >= 0x80 are negative, so they fall in no range of ASCII classes. */
static inline void ctok_classify_vec(__m128i x, __m128i* letter, __m128i* lower_bit, __m128i* digit,
                                     __m128i* space, __m128i* newline, __m128i* blank, __m128i* apostrophe,
                                     __m128i* slash) {
    __m128i folded = _mm_or_si128(x, _mm_set1_epi8(0x20));
    *letter = _mm_and_si128(_mm_cmpgt_epi8(folded, _mm_set1_epi8('a' - 1)),
                            _mm_cmplt_epi8(folded, _mm_set1_epi8('z' + 1)));
    *lower_bit = _mm_slli_epi16(x, 2);                      /* bit 5 (0x20) of each byte to its bit 7 */
    *digit = _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('0' - 1)), _mm_cmplt_epi8(x, _mm_set1_epi8('9' + 1)));
    *blank = _mm_cmpeq_epi8(x, _mm_set1_epi8(' '));
    *space = _mm_or_si128(_mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8(8)), _mm_cmplt_epi8(x, _mm_set1_epi8(14))),
                          *blank);                           /* \t \n \v \f \r and space: \s on ASCII */
    *newline = _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\n')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\r')));
    *apostrophe = _mm_cmpeq_epi8(x, _mm_set1_epi8('\''));
    *slash = _mm_cmpeq_epi8(x, _mm_set1_epi8('/'));
}

static inline void ctok_classify64(const unsigned char* w, ctok_block_classes* c) {
    __m128i x[4], l[4], lb[4], d[4], sp[4], nl[4], bl[4], ap[4], sl[4];
    int j;
    for (j = 0; j < 4; j++) {
        x[j] = _mm_loadu_si128((const __m128i*)(w + 16 * j));       /* w[0:64] readable by contract */
        ctok_classify_vec(x[j], &l[j], &lb[j], &d[j], &sp[j], &nl[j], &bl[j], &ap[j], &sl[j]);
    }
    c->letter = ctok_mask64(l[0], l[1], l[2], l[3]);
    c->upper = c->letter & ~ctok_mask64(lb[0], lb[1], lb[2], lb[3]);
    c->digit = ctok_mask64(d[0], d[1], d[2], d[3]);
    c->space = ctok_mask64(sp[0], sp[1], sp[2], sp[3]);
    c->newline = ctok_mask64(nl[0], nl[1], nl[2], nl[3]);
    c->blank = ctok_mask64(bl[0], bl[1], bl[2], bl[3]);
    c->apostrophe = ctok_mask64(ap[0], ap[1], ap[2], ap[3]);
    c->slash = ctok_mask64(sl[0], sl[1], sl[2], sl[3]);
    c->high = ctok_mask64(x[0], x[1], x[2], x[3]);
}
#else
static inline void ctok_classify64(const unsigned char* w, ctok_block_classes* c) {
    int i;
    memset(c, 0, sizeof(*c));
    for (i = 0; i < 64; i++) {
        unsigned char b = w[i];                                /* w[0:64] readable by contract */
        uint64_t bit = (uint64_t)1 << i;
        if (b >= 0x80) { c->high |= bit; continue; }
        if ((b | 0x20) >= 'a' && (b | 0x20) <= 'z') { c->letter |= bit; if (!(b & 0x20)) c->upper |= bit; }
        if (b >= '0' && b <= '9') c->digit |= bit;
        if ((b >= 9 && b <= 13) || b == ' ') c->space |= bit;
        if (b == '\n' || b == '\r') c->newline |= bit;
        if (b == ' ') c->blank |= bit;
        if (b == '\'') c->apostrophe |= bit;
        if (b == '/') c->slash |= bit;
    }
}
#endif

/* Bits of m reachable from a bit of seed by going up (down) through set bits of m: a fill within runs,
 * in six doubling steps. */
static inline uint64_t ctok_fill_up(uint64_t seed, uint64_t m) {
    uint64_t x = seed & m, r = m;
    x |= (x << 1) & r;  r &= r << 1;
    x |= (x << 2) & r;  r &= r << 2;
    x |= (x << 4) & r;  r &= r << 4;
    x |= (x << 8) & r;  r &= r << 8;
    x |= (x << 16) & r; r &= r << 16;
    x |= (x << 32) & r;
    return x;
}

static inline uint64_t ctok_fill_down(uint64_t seed, uint64_t m) {
    uint64_t x = seed & m, r = m;
    x |= (x >> 1) & r;  r &= r >> 1;
    x |= (x >> 2) & r;  r &= r >> 2;
    x |= (x >> 4) & r;  r &= r >> 4;
    x |= (x >> 8) & r;  r &= r >> 8;
    x |= (x >> 16) & r; r &= r >> 16;
    x |= (x >> 32) & r;
    return x;
}

/* Steps every split pattern's window shares (the o200k functions below, _ascii_block_cl100k.h, _ascii_block_ds.h,
 * _ascii_block_gpt2.h). */

/* The bits of m that start one of its runs; bit 0 always does when set (a window starts at a piece start). */
static inline uint64_t ctok_run_starts(uint64_t m) {
    return m & ~(m << 1);
}

/* \p{N}{1,3} (most = 3) or \p{N} (most = 1): the digits that start a piece inside a digit run, the run's first
 * digit being a run start already. */
static inline uint64_t ctok_digit_groups(uint64_t digit, int most) {
    uint64_t group, four, out = 0;
    if (most == 1)
        return digit;
    group = ctok_run_starts(digit);
    four = digit & (digit << 1) & (digit << 2) & (digit << 3);     /* a digit and the three before it */
    while ((group = (group << 3) & four) != 0)
        out |= group;
    return out;
}

/* Whether a rule's fill (about 17 instructions) is skipped in windows that do not need it, a constant at each
 * call: a branch on data, which pays where most windows of the text need no fill (prose) and costs where about
 * half do (code).  Measured per pattern (perf notes, session 9): the o200k family skips both fills, the cl100k
 * family and DeepSeek-V3 neither. */
enum { CTOK_FILL_ALWAYS = 0, CTOK_FILL_WHEN_NEEDED = 1 };

/* The whitespace rules `\s*[\r\n]+` (or `\s*[\r\n]`) then `\s+(?!\S)`, in a run of \s followed by a non-space:
 * the character after the run's last newline starts a piece (in *after_newline), and so does the run's last
 * character when at least two non-newlines end the run (returned). */
static inline uint64_t ctok_space_run_starts(uint64_t space, uint64_t newline, uint64_t* after_newline, int fill) {
    uint64_t nonnl = space & ~newline;
    uint64_t last = nonnl & ~(space >> 1);          /* last of a run of non-newlines that ends its \s run */
    if (fill == CTOK_FILL_WHEN_NEEDED && (nonnl & (newline << 1)) == 0)
        *after_newline = 0;                          /* no newline is followed by a space */
    else
        *after_newline = ctok_fill_down(last, nonnl) & (newline << 1);
    return last & (nonnl << 1);
}

/* A punctuation tail (`[\r\n]*`, with `/` when `tail_chars` has it): the newlines right after punctuation and
 * the tail characters after them belong to the punctuation's piece; a piece starts right after the tail. */
static inline uint64_t ctok_after_tail(uint64_t starts, uint64_t punct, uint64_t newline, uint64_t tail_chars,
                                       int fill) {
    uint64_t seeds = newline & (punct << 1), tail;
    if (fill == CTOK_FILL_WHEN_NEEDED && seeds == 0)
        return starts;
    tail = ctok_fill_up(seeds, tail_chars);
    return (starts & ~tail) | ((tail << 1) & ~tail);
}

/* Number of set bits of x (no popcnt instruction is assumed: the build targets plain x86-64). */
static inline int ctok_bit_count64(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    return (int)((x * 0x0101010101010101ULL) >> 56);
}

/* CTOK_WINDOW_SLACK: every window function below may write scratch values to ends[k:max(16, room + 8)] besides
 * its k ends, so callers hand it an array with room + CTOK_WINDOW_SLACK entries.  Why: the ends are written
 * eight at a time without a test per end; a loop that stops at the window's last start has a trip count that
 * changes with every window, and its exit mispredicted about once a window (o200k, rst slices: 16.7K of the
 * scanner's 66K mispredicted branches). */
#define CTOK_WINDOW_SLACK 16

/* One end per start, in order: ends[i] = base + the offset of the i-th start, for the first `count` starts;
 * 16 written whatever count is, then eight more while count asks for them.  Past the last start the offset
 * is 63 (the guard bit, which a start at 63 leaves in place as well): a value in the slack that no caller reads. */
static inline void ctok_write_ends(uint64_t starts, int count, Py_ssize_t* ends, Py_ssize_t base) {
    const uint64_t guard = (uint64_t)1 << 63;
    Py_ssize_t* e = ends;
    int j;
    do {
        for (j = 0; j < 8; j++) {     /* a pointer and constant offsets: no index arithmetic per end */
            e[j] = base + (Py_ssize_t)(unsigned)CTOK_LOW_BIT64(starts | guard);   /* < max(16, room + 8) */
            starts &= starts - 1;
        }
        e += 8;
    } while (e < ends + 16 || e < ends + count);
}

/* The window's trusted ends, written to ends[0:k] as base + offset, k <= room (and scratch past them, up to
 * CTOK_WINDOW_SLACK past room): the starts in 1..lim, lim cut back (when cut_space_run, a constant at each
 * call) to the start of a whitespace run that reaches `end` (the window's end or first byte >= 0x80: such a
 * run's split depends on the bytes after it).  Requires room >= 8. */
static inline Py_ssize_t ctok_trusted_ends(uint64_t starts, uint64_t space, int end, int lim, int cut_space_run,
                                           Py_ssize_t* ends, Py_ssize_t base, Py_ssize_t room) {
    uint64_t runs;
    int a, count, cut;
    if (cut_space_run) {
        /* Without a branch (whether a window ends in whitespace is data: 4.5K mispredicted branches on rst slices):
         * a = the start of the run holding end - 1 when that byte is whitespace (then runs != 0). */
        runs = space & ~(space << 1) & ((((uint64_t)2) << (end - 1)) - 1);   /* 1 <= end <= 64 */
        a = CTOK_HIGH_BIT64(runs | 1);
        cut = -(int)(((space >> (end - 1)) & 1) & (uint64_t)(a < lim));
        lim = (a & cut) | (lim & ~cut);
    }
    starts &= ~(uint64_t)1 & ((((uint64_t)2) << lim) - 1);   /* 0 <= lim <= 63 (2 << 63 is 0: all bits) */
    count = ctok_bit_count64(starts);
    if (count > room)
        count = (int)room;                     /* the first `room` starts: written first */
    /* count < 8 * (rounds) <= count + 7 <= room + 7, or 16 <= room + CTOK_WINDOW_SLACK: inside the caller's
     * room + CTOK_WINDOW_SLACK entries */
    ctok_write_ends(starts, count, ends, base);
    return count;
}

static inline int ctok_contraction_len(const unsigned char* w, int e) {
    /* Length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at w[e] == '\'', or 0; e + 2 < 64 by the caller.  `| 0x20`
     * folds only letters onto these lower-case letters (other bytes land elsewhere). */
    unsigned char c1 = w[e + 1] | 0x20, c2 = w[e + 2] | 0x20;
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if ((c1 == 'r' || c1 == 'v') && c2 == 'e') return 3;
    if (c1 == 'l' && c2 == 'l') return 3;
    return 0;
}

/* Which of U+2000..U+207F are [^\s\p{L}\p{N}] and no mark (bit cp - 0x2000), filled at import from the Unicode
 * table (_pretok.pyx): the General Punctuation block's quotes, dashes, ellipsis and invisible format characters,
 * which English prose puts among ASCII every hundred bytes or so.  A window takes such a character (three
 * bytes, E2 80..81 xx) as three bytes of punctuation; its spaces (U+2000..U+200A, U+2028, U+2029, U+202F,
 * U+205F) and letters and digits (U+2070..U+207F) end the window as any other byte >= 0x80 does. */
static uint64_t ctok_punct_2000[2];

static inline int ctok_punct3(const unsigned char* p) {
    /* p[0:3] readable by the caller.  Code point (p[1] & 1) << 6 | (p[2] & 0x3F) past U+2000 for E2 80..81 xx. */
    unsigned cp;
    if (p[0] != 0xE2 || (p[1] & 0xFE) != 0x80 || (p[2] & 0xC0) != 0x80)
        return 0;
    cp = ((unsigned)(p[1] & 1) << 6) | (p[2] & 0x3F);                 /* < 128: a bit of the table */
    return (int)((ctok_punct_2000[cp >> 6] >> (cp & 63)) & 1);
}

/* Bytes >= 0x80 among w[0:32], one bit each (bit i for w[i]).  A window is worth classifying only when
 * there are none (or, for the o200k family, only the punctuation above: ctok_window_worth): text with a
 * character >= 0x80 every few bytes would pay a classification for a piece or two, so the caller goes on with
 * the scalar scanner for the rest of its call. */
static inline uint32_t ctok_high32(const unsigned char* w) {
#if defined(__SSE2__)
    return (uint32_t)_mm_movemask_epi8(_mm_loadu_si128((const __m128i*)w))          /* w[0:32] readable */
         | ((uint32_t)_mm_movemask_epi8(_mm_loadu_si128((const __m128i*)(w + 16))) << 16);
#else
    uint32_t m = 0;
    int i;
    for (i = 0; i < 32; i++)
        if (w[i] >= 0x80) m |= (uint32_t)1 << i;
    return m;
#endif
}

/* Whether a window at w is worth classifying: w[0:32] is ASCII but for at most two of the punctuation
 * characters above (`high` = ctok_high32(w)). */
static inline int ctok_window_worth(const unsigned char* w, uint32_t high) {
    int i, round;
    for (round = 0; round < 2 && high != 0; round++) {
        i = CTOK_LOW_BIT32(high);
        if (i > 29 || !ctok_punct3(w + i))                            /* i + 2 < 32: inside w[0:32] */
            return 0;
        high &= ~((uint32_t)7 << i);
    }
    return high == 0;
}

static inline Py_ssize_t ctok_o200k_block(const unsigned char* w, Py_ssize_t* ends, Py_ssize_t base,
                                          Py_ssize_t room, int slash, int contractions, int most) {
    ctok_block_classes c;
    uint64_t letter, digit, space, other, starts, after_newline, firsts, e_bits, unknown, cont, prefix;
    int end, lim;
    ctok_classify64(w, &c);
    /* Punctuation of three bytes (above) is punctuation here; `cont` marks its second and third bytes. */
    unknown = c.high;
    cont = 0;
    while (unknown != 0) {
        int i = CTOK_LOW_BIT64(unknown);
        if (i > 61 || !ctok_punct3(w + i))                            /* i + 2 < 64: inside w[0:64] */
            break;
        cont |= (uint64_t)6 << i;
        unknown &= ~((uint64_t)7 << i);
    }
    end = unknown ? CTOK_LOW_BIT64(unknown) : 64;
    lim = end - 3;
    if (lim < 1)
        return 0;
    letter = c.letter;
    digit = c.digit;
    space = c.space;
    other = ~(letter | digit | space | unknown);
    /* 1. run starts (bit 0 is a start by contract) */
    starts = ctok_run_starts(letter) | ctok_run_starts(digit) | ctok_run_starts(space) | ctok_run_starts(other) | 1;
    /* 2. [A-Z] after [a-z] */
    starts |= c.upper & ((letter & ~c.upper) << 1);
    /* 3. digit groups */
    starts |= ctok_digit_groups(digit, most);
    /* 4. whitespace runs */
    starts |= ctok_space_run_starts(space, c.newline, &after_newline, CTOK_FILL_WHEN_NEEDED) | after_newline;
    /* 5. the punctuation tail */
    starts = ctok_after_tail(starts, other, c.newline, slash ? (c.newline | c.slash) : c.newline,
                             CTOK_FILL_WHEN_NEEDED);
    /* 6. ` ?` before punctuation */
    starts &= ~((c.blank << 1) & other);
    /* 7. contractions, left to right; an apostrophe at 62 or 63 is past lim anyway */
    if (contractions) {
        int covered = 0;
        e_bits = c.apostrophe & (letter << 1) & (((uint64_t)1 << 62) - 1);
        while (e_bits) {
            int e = CTOK_LOW_BIT64(e_bits), m;
            e_bits &= e_bits - 1;
            if (e <= covered)                  /* the letter before it is the end of a contraction */
                continue;
            m = ctok_contraction_len(w, e);
            if (m) {
                starts &= ~((((uint64_t)1 << m) - 1) << e);
                if (e + m < 64)
                    starts |= letter & ((uint64_t)1 << (e + m));
                covered = e + m;
            }
        }
    }
    /* 8. word prefixes: the character before the word is one byte, or three (its last two in `cont`: a
     * start is never there, being inside a punctuation run, so `prefix << 1` alone stops at them) */
    firsts = ctok_run_starts(letter);
    prefix = starts & (other | (space & ~c.newline));
    starts &= ~(firsts & ((prefix << 1) | ((prefix << 3) & (cont << 1) & (cont << 2))));
    return ctok_trusted_ends(starts, space, end, lim, 1, ends, base, room);
}

#endif
