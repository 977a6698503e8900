/* Piece ends of DeepSeek-V3's pretokenizer (PRETOK_DEEPSEEK) in a 64-byte ASCII window, bit-parallel.
 *
 * Why: as for the o200k family (_ascii_block.h, whose classification and fills this reuses), the scalar
 * scanner (deepseek_ascii, scan_deepseek in _pretok.pyx) branches on each piece's shape; here every piece
 * start of 64 bytes comes from whole-word bit operations and the ends from count-trailing-zeros.
 *
 * Contract: ctok_deepseek_block(w, ends, base, room) reads w[0:64] (the caller guarantees 64 readable bytes
 * as for ctok_o200k_block, and that w[0] starts a piece), and writes to ends[0:k] base + the offsets (1..62,
 * increasing) of the next k <= room piece ends (scratch past them as ctok_o200k_block's), exactly those the
 * scalar scanner gives; it returns k, 0 when the window decides no piece (a byte >= 0x80 early, a long run).
 *
 * Reference: HF's Sequence of three Split(isolated) steps, PATTERNS[PRETOK_DEEPSEEK] in ctok/patterns.py:
 * `\p{N}{1,3}`, then CJK runs (no ASCII), then on each segment the previous steps left
 *   [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
 *   | ?[\p{P}\p{S}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * and the text between two matches (a gap) is a piece too.  On ASCII the classes are: letters, digits,
 * whitespace \s (\t \n \v \f \r and space; \r \n are "newlines"), punctuation (the 32 printable others, all
 * \p{P} or \p{S}) and control characters (the rest: no alternative starts with one unless a letter follows,
 * as the optional prefix, so runs of them are gaps).  A digit ends the segment before it: whitespace before
 * it is at the end of the text for `(?!\S)`.  Left to right that makes these piece starts (bit i = byte i of
 * the window; "run" = maximal run of one class):
 *   1. the start of each run of letters, digits, whitespace, punctuation, control characters (a digit run
 *      is a segment of step 1, the byte after it starts a segment);
 *   2. every third digit of a digit run;
 *   3. a control character before a letter (the gap ends there: it is the letters' prefix);
 *   4. in a whitespace run: the character after its last newline when the run goes on after it
 *      (`\s*[\r\n]+` ends there), and, when a letter, punctuation or control character follows the run
 *      (not a digit: the segment's end), its last character when at least two non-newlines end the run
 *      (`\s+(?!\S)` leaves it);
 *   5. the punctuation tail (newlines right after punctuation) belongs to the punctuation: no start
 *      inside it, a start right after it;
 *   6. a space before punctuation is ` ?`: the punctuation after it is no start;
 *   7. a letter run takes the character before it as its prefix when that character starts a piece and is
 *      punctuation (the first alternative; a punctuation run of two or more ends before the letters), a
 *      non-newline space or a control character: the first letter is then no start.
 * A start is decided by the bytes up to the one after it, except inside a whitespace run, decided by the byte
 * after the run.  So starts are trusted up to 2 bytes before the window's end or its first byte >= 0x80
 * (which may be a letter, a digit, punctuation, a space or CJK), and not past the start of a whitespace run
 * that reaches that end.  (One byte before would do as well: outside whitespace runs only rule 3 reads the
 * next byte, and it can only add a start, so a start missed at the last trusted byte only ends the window one
 * piece early; two keeps a margin for rules to come.)  tests/test_ascii_block_ds.py checks every rule against tokenizers and the scalar
 * scanner.
 */
#ifndef CTOK_ASCII_BLOCK_DS_H
#define CTOK_ASCII_BLOCK_DS_H
#include "_ascii_block.h"

/* Printable ASCII other than space (0x21..0x7e), one bit per byte: punctuation once letters and digits are
 * taken out.  Computed here, not in ctok_classify64, so that o200k's windows pay nothing for it. */
static inline uint64_t ctok_graphic64(const unsigned char* w) {
#if defined(__SSE2__)
    __m128i g[4];
    int j;
    for (j = 0; j < 4; j++) {
        __m128i x = _mm_loadu_si128((const __m128i*)(w + 16 * j));    /* w[0:64] readable by contract */
        g[j] = _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8(0x20)), _mm_cmplt_epi8(x, _mm_set1_epi8(0x7f)));
    }
    return ctok_mask64(g[0], g[1], g[2], g[3]);
#else
    uint64_t m = 0;
    int i;
    for (i = 0; i < 64; i++)
        if (w[i] > 0x20 && w[i] < 0x7f) m |= (uint64_t)1 << i;   /* w[0:64] readable by contract */
    return m;
#endif
}

static inline Py_ssize_t ctok_deepseek_block(const unsigned char* w, Py_ssize_t* ends, Py_ssize_t base,
                                             Py_ssize_t room) {
    ctok_block_classes c;
    uint64_t letter, digit, space, punct, control, starts, after_newline, firsts;
    int end, lim;
    ctok_classify64(w, &c);
    end = c.high ? CTOK_LOW_BIT64(c.high) : 64;
    lim = end - 2;
    if (lim < 1)
        return 0;
    letter = c.letter;
    digit = c.digit;
    space = c.space;
    punct = ctok_graphic64(w) & ~(letter | digit);
    control = ~(letter | digit | space | punct | c.high);
    /* 1. run starts (bit 0 is a start by contract) */
    starts = ctok_run_starts(letter) | ctok_run_starts(digit) | ctok_run_starts(space) | ctok_run_starts(punct)
           | ctok_run_starts(control) | 1;
    /* 2. digit groups of three */
    starts |= ctok_digit_groups(digit, 3);
    /* 3. a control character before a letter */
    starts |= control & (letter >> 1);
    /* 4. whitespace runs; before a digit (the segment's end) `\s+(?!\S)` takes the whole run */
    starts |= (ctok_space_run_starts(space, c.newline, &after_newline, CTOK_FILL_ALWAYS) & ~(digit >> 1))
              | after_newline;
    /* 5. the punctuation tail */
    starts = ctok_after_tail(starts, punct, c.newline, c.newline, CTOK_FILL_ALWAYS);
    /* 6. ` ?` before punctuation */
    starts &= ~((c.blank << 1) & punct);
    /* 7. letter prefixes */
    firsts = ctok_run_starts(letter);
    starts &= ~(firsts & ((starts & (punct | (space & ~c.newline) | control)) << 1));
    return ctok_trusted_ends(starts, space, end, lim, 1, ends, base, room);
}

#endif
