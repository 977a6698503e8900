/* Piece ends of GPT-2's pretokenizer (PRETOK_GPT2) in a 64-byte ASCII window, bit-parallel.
 *
 * Why: as for the o200k family (_ascii_block.h, whose classification and fills this reuses), the scalar
 * scanner (gpt2_ascii, scan_gpt2 in _pretok.pyx) branches on each piece's shape; here every piece start of 64
 * bytes comes from whole-word bit operations and the ends from count-trailing-zeros.
 *
 * Contract: ctok_gpt2_block(w, ends, base, room) reads w[0:64] (the caller guarantees 64 readable bytes as for
 * ctok_o200k_block, and that w[0] starts a piece), and writes to ends[0:k] base + the offsets (1..62,
 * increasing) of the next k <= room piece ends (scratch past them as ctok_o200k_block's), exactly those the
 * scalar scanner gives; it returns k, 0 when the window decides no piece (a byte >= 0x80 early, a long run).
 *
 * Reference: PATTERNS[PRETOK_GPT2] in ctok/patterns.py (tiktoken's r50k/p50k/gpt2 spelling; HF ByteLevel's
 * `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+` splits the same).  On ASCII
 * the classes are letters, digits, whitespace \s (\t \n \v \f \r and space) and "other" (punctuation and
 * control characters, [^\s\p{L}\p{N}]); there is no case rule, no digit group and no newline rule.  Left to
 * right that makes these piece starts (bit i = byte i of the window; "run" = maximal run of one class):
 *   1. the start of each run of letters, digits, whitespace, others;
 *   2. the last character of a whitespace run of two or more followed by a non-space (`\s+(?!\S)` leaves it);
 *   3. a space before a non-space is ` ?`: the non-space after it is no start;
 *   4. an apostrophe that starts a piece (after 1-3: the first of its run, not after a space) and is followed
 *      by s, t, m, d, re, ve or ll (lower case only) is a contraction: no start inside it, a start right after
 *      it; contractions are matched left to right (the apostrophe after one starts a run of others).
 * A start is decided by the bytes up to the one after it (the only start rule 2 makes is the one before the
 * byte after the run; a contraction's end is decided by its own bytes).  So starts are trusted up to 2 bytes
 * before the window's end or its first byte >= 0x80 (which may be a letter, a digit, a space or other): unlike
 * o200k's and DeepSeek's newline rules, no whitespace run needs more.  tests/test_ascii_block_ds.py checks
 * every rule against tiktoken, tokenizers and the scalar scanner.
 */
#ifndef CTOK_ASCII_BLOCK_GPT2_H
#define CTOK_ASCII_BLOCK_GPT2_H
#include "_ascii_block.h"

static inline int ctok_gpt2_contraction_len(const unsigned char* w, int e) {
    /* Length of 's|'t|'re|'ve|'m|'ll|'d at w[e] == '\'', or 0; e + 2 < 64 by the caller. */
    unsigned char c1 = w[e + 1], c2 = w[e + 2];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if ((c1 == 'r' || c1 == 'v') && c2 == 'e') return 3;
    if (c1 == 'l' && c2 == 'l') return 3;
    return 0;
}

static inline Py_ssize_t ctok_gpt2_block(const unsigned char* w, Py_ssize_t* ends, Py_ssize_t base,
                                         Py_ssize_t room) {
    ctok_block_classes c;
    uint64_t letter, digit, space, other, starts, e_bits;
    int end, lim;
    ctok_classify64(w, &c);
    end = c.high ? CTOK_LOW_BIT64(c.high) : 64;
    lim = end - 2;
    if (lim < 1)
        return 0;
    letter = c.letter;
    digit = c.digit;
    space = c.space;
    other = ~(letter | digit | space | c.high);
    /* 1. run starts (bit 0 is a start by contract) */
    starts = ctok_run_starts(letter) | ctok_run_starts(digit) | ctok_run_starts(space) | ctok_run_starts(other) | 1;
    /* 2. the last character of a whitespace run of two or more */
    starts |= space & ~(space >> 1) & (space << 1);
    /* 3. ` ?` */
    starts &= ~((c.blank << 1) & (letter | digit | other));
    /* 4. contractions, left to right; an apostrophe at 62 or 63 is past lim anyway */
    e_bits = c.apostrophe & starts & (((uint64_t)1 << 62) - 1);
    while (e_bits) {
        /* its letters are no apostrophe, so every apostrophe of e_bits still starts a piece after it */
        int e = CTOK_LOW_BIT64(e_bits), m;
        e_bits &= e_bits - 1;
        m = ctok_gpt2_contraction_len(w, e);
        if (m) {
            starts &= ~((((uint64_t)1 << m) - 2) << e);
            if (e + m < 64)
                starts |= (uint64_t)1 << (e + m);
        }
    }
    /* no cut at a whitespace run reaching the end: GPT-2 needs none (see above) */
    return ctok_trusted_ends(starts, space, end, lim, 0, ends, base, room);
}

#endif
