/* Piece ends of the cl100k family (cl100k, Llama 3, Qwen) in a 64-byte ASCII window, bit-parallel.
 *
 * Why: as for the o200k family (_ascii_block.h, whose classification and fills this reuses), the scalar
 * scanner (cl100k_ascii in _pretok.pyx) branches on each piece's shape, which the predictor cannot know;
 * here every piece start of the window comes from whole-word bit operations on one bit per byte and class.
 *
 * Contract: ctok_cl100k_block(w, ends, base, room, most) reads w[0:64] (the caller guarantees 64 readable
 * bytes, as for ctok_o200k_block, and that w[0] starts a piece), and writes to ends[0:k] base plus the offsets
 * (1..63, increasing) of the next k <= room piece ends (scratch past them as ctok_o200k_block's), exactly those
 * the scalar scanner gives; it returns k, which is 0 when the window decides no piece.  `most`: digits per
 * piece, 3 (cl100k, Llama 3) or 1 (Qwen).
 *
 * Reference: the patterns in ctok/patterns.py.  The contraction (?i:'s|'t|'re|'ve|'m|'ll|'d) is the first
 * alternative and a piece of its own, wherever a piece starts with an apostrophe (not only after a letter);
 * a word is an optional prefix [^\r\n\p{L}\p{N}] then \p{L}+ (no case split); digits go 1..most at a time;
 * punctuation is ` ?` then a run of [^\s\p{L}\p{N}] (apostrophes included) then [\r\n]*; whitespace is
 * `\s++$` (cl100k; a run reaching the segment's end, which no trusted start is in), `\s*[\r\n]` (cl100k) or
 * `\s*[\r\n]+` (Llama 3, Qwen): both end at the run's last newline, since \s* gives back from the run's end;
 * then `\s+(?!\S)` (all but the last character of a run before a non-space) and `\s` / `\s+` (one character).
 * Left to right, that makes these piece starts (bit i = byte i of the window; "run" = maximal run of one
 * class):
 *   1. the start of each run of letters, digits, whitespace, other ASCII ("punctuation", apostrophes in it);
 *   2. every most-th digit of a digit run;
 *   3. in a whitespace run followed by a non-space: the character after its last newline, and its last
 *      character when at least two non-newlines end the run;
 *   4. the punctuation tail (a newline right after punctuation, then newlines) belongs to the punctuation:
 *      no start inside it, a start right after it;
 *   5. a space before punctuation is ` ?`: the punctuation after it (an apostrophe too) is no start;
 *   6. an apostrophe that starts a piece by 1-5 and is followed by s, t, m, d, ll, ve or re (any case) is a
 *      contraction: no start in it, a start right after it when a letter follows.  Rules 1-5 decide every
 *      apostrophe (an apostrophe after a contraction is a run start: contractions end in a letter), so
 *      contractions do not depend on each other;
 *   7. a word takes the character before it as its prefix when that character starts a piece, is
 *      punctuation (an apostrophe with no contraction too) or a non-newline space: the word's first letter
 *      is then no start (after a contraction its first letter is no start already).
 * A start is decided by the bytes up to it (the piece before it ends there whatever follows: every run is
 * possessive or ends at its first byte of another class, a contraction's letters are no start either way),
 * except inside a whitespace run, decided by the byte after the run.  So, unlike the o200k windows (whose
 * [A-Z] rule and contraction suffixes look ahead), starts are trusted up to the byte before the window's
 * end or its first byte >= 0x80 (which may be a letter, a digit, a space, or fold onto a contraction's s),
 * and not past the start of a whitespace run that reaches that end (\s++$ too is decided there).
 * tests/test_ascii_block.py checks every rule against tiktoken, tokenizers and the scalar scanner.
 */
#ifndef CTOK_ASCII_BLOCK_CL100K_H
#define CTOK_ASCII_BLOCK_CL100K_H
#include "_ascii_block.h"

static inline Py_ssize_t ctok_cl100k_block(const unsigned char* w, Py_ssize_t* ends, Py_ssize_t base,
                                           Py_ssize_t room, int most) {
    ctok_block_classes c;
    uint64_t letter, digit, space, other, starts, after_newline, firsts, e_bits;
    int end, lim;
    ctok_classify64(w, &c);
    end = c.high ? CTOK_LOW_BIT64(c.high) : 64;
    lim = end - 1;
    if (lim < 1)
        return 0;
    letter = c.letter;
    digit = c.digit;
    space = c.space;
    other = ~(letter | digit | space | c.high);
    /* 1. run starts (bit 0 is a start by contract) */
    starts = ctok_run_starts(letter) | ctok_run_starts(digit) | ctok_run_starts(space) | ctok_run_starts(other) | 1;
    /* 2. digit groups */
    starts |= ctok_digit_groups(digit, most);
    /* 3. whitespace runs */
    starts |= ctok_space_run_starts(space, c.newline, &after_newline, CTOK_FILL_ALWAYS) | after_newline;
    /* 4. the punctuation tail */
    starts = ctok_after_tail(starts, other, c.newline, c.newline, CTOK_FILL_ALWAYS);
    /* 5. ` ?` before punctuation */
    starts &= ~((c.blank << 1) & other);
    /* 6. contractions at the apostrophes that start pieces; one at 62 or 63 decides no start of the window
     * (the letter after it is no start by rule 7, the contraction's end is past the window) */
    e_bits = c.apostrophe & starts & (((uint64_t)1 << 62) - 1);
    while (e_bits) {
        int e = CTOK_LOW_BIT64(e_bits), m;
        e_bits &= e_bits - 1;
        m = ctok_contraction_len(w, e);                 /* e <= 61: w[e + 2] is in the window */
        if (m) {
            starts &= ~((((uint64_t)1 << (m - 1)) - 1) << (e + 1));   /* its letters; e + m <= 64 */
            if (e + m < 64)
                starts |= letter & ((uint64_t)1 << (e + m));
        }
    }
    /* 7. word prefixes */
    firsts = ctok_run_starts(letter);
    starts &= ~(firsts & ((starts & (other | (space & ~c.newline))) << 1));
    return ctok_trusted_ends(starts, space, end, lim, 1, ends, base, room);
}

#endif
