/* Runs of 3-byte characters as whole-character BPE symbols (ctok/_bpe.pyx, symbolize_chars).
 *
 * Why C and not inline in symbolize_chars: the run is the hot loop of CJK text (one step a character), and
 * compiled inside symbolize_chars it shared the registers of the general step around it: the loop spilled
 * its tables' pointers (70 instructions a character), and when written with few live values the general
 * step, which most other scripts take, grew by about 14 instructions a character instead (o200k udhr:
 * 61M -> 72M instructions in symbolize_chars).  A separate, not inlined function gives each its own
 * registers for the cost of one call per run.
 *
 * Contract: from p (a character start with p[-1] readable, the previous character's cp_token entry in
 * *prev_io), take characters while each is a valid 3-byte UTF-8 character (not overlong; surrogates are
 * cp_none in cp_token), admitted as one token (cp_token's id part below `several`), and its seam with the
 * previous one needs no seam_ok (neither flags a risk, or the SEAM_PRE_ANY bit at pre_any is clear); stop
 * before the first that is not, or when p > last.  For each one taken: (*out_io)++ = its id; (*kout_io)++
 * = KEY_NONE when the CHAR_PAIRS bit of (previous id, id) is clear (the pair merges into nothing), else
 * KEY_PENDING; `pending` (the symbol before p is not the previous character's one token) makes the first
 * key KEY_PENDING, so that the bit set is trusted only for the pairs it was built for (a cleared seam
 * already rules out a merge of a character's last part with the next character).  A character that passes every test but is several tokens stops the run with
 * *several_io = 1 and *prev_io = its entry (the caller makes its tokens and may run on after it).
 * Returns the stop; *prev_io = the last character's cp_token entry.  Every test is the one
 * symbolize_chars' general step makes, so a character taken here is taken as that step would take it.
 */
#ifndef CTOK_CHAR_RUN_H
#define CTOK_CHAR_RUN_H
#include <stdint.h>
#include <string.h>
#include <Python.h>

#define CTOK_CHAR_PAIR_BITS 18

/* The bit of pair (left, right) in the CHAR_PAIRS set: the top bits of two 32-bit products (each depends on
 * every bit of its id; two multiplies by immediates, no 64-bit constant to keep in a register). */
static inline uint32_t ctok_char_pair_bit(uint32_t left, uint32_t right) {
    return (left * 0x9E3779B1u ^ right * 0x85EBCA77u) >> (32 - CTOK_CHAR_PAIR_BITS);
}

#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline, unused))          /* unused: every module that cimports _vocab includes this header */
#endif
static const unsigned char* ctok_char3_run(const unsigned char* p, const unsigned char* last,
                                           const uint32_t* cp_token, const uint8_t* pre_any,
                                           const uint8_t* char_pairs, uint32_t id_mask, uint32_t several,
                                           uint32_t pending, uint32_t** out_io, uint64_t** kout_io,
                                           uint32_t* prev_io, int* several_io) {
    uint32_t* out = *out_io;
    uint64_t* kout = *kout_io;
    uint32_t prev = *prev_io;
    *several_io = 0;
    while (p <= last) {
        uint32_t w, cp, tid, risk, x, bit;
        memcpy(&w, p - 1, 4);                       /* p[-1:3]: inside the piece (p[-1] readable, p <= last) */
        /* Little-endian: w's bytes are the byte before the character, then its lead and two continuations. */
        cp = ((w << 4) & 0xF000) | ((w >> 10) & 0xFC0) | ((w >> 24) & 0x3F);
        tid = cp_token[cp];                         /* cp < 0x10000 by its masks */
        /* Not a lead byte 0xE_ and two continuation bytes, overlong, or not admitted (cp_none = id_mask):
         * one branch, rarely taken in CJK text. */
        if (((w & 0xC0C0F000u) != 0x8080E000u) | (cp < 0x800) | ((tid & id_mask) == id_mask))
            break;
        /* Either character flags its side of the seam (suffix risk is bit 30, prefix risk bit 31) and the
         * SEAM_PRE_ANY bit of (byte before, lead byte) is set: seam_ok must decide. */
        risk = ((prev << 1) | tid) >> 31;
        x = w & 0xFFFF;                             /* (lead << 8) | byte before: SEAM_PRE_ANY's index */
        if (risk & (pre_any[x >> 3] >> (x & 7)))
            break;
        if ((tid & id_mask) == several) {           /* cl100k, Chinese: 47% of the characters */
            *several_io = 1;
            prev = tid;
            break;
        }
        /* Without a branch: whether two characters merge is data (o200k, Japanese: 18% of pairs do). */
        x = ctok_char_pair_bit(prev & id_mask, tid & id_mask);
        bit = ((char_pairs[x >> 3] >> (x & 7)) & 1) | pending;
        pending = 0;
        *kout++ = 0xFFFFFFFFFFFFFFFFull - bit;      /* KEY_NONE, or KEY_PENDING when the bit is set */
        *out++ = tid & id_mask;
        prev = tid;
        p += 3;
    }
    *out_io = out;
    *kout_io = kout;
    *prev_io = prev;
    return p;
}

#endif
