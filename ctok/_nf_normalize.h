/* Unicode normalization (NFC, NFKC, NFD, NFKD) of code point arrays, as HF tokenizers' normalizers compute it
 * (ctok/_encoder.pyx: nf_normalize, and the check unchanged_by runs on the stretches the quick check doubts).
 *
 * Contract: ctok_nf_normalize(in, n, form, out, cc) writes the `form` normal form of in[0:n] to out and returns its
 * length; out and cc (scratch) have room for ctok_nf_decomposed_len(in, n, form & 1) entries (forms are numbered
 * as CTOK_NF_* bits: 0 NFC, 1 NFKC, 2 NFD, 3 NFKD; bit 0 = compatibility).  The algorithm is the standard's
 * (Unicode 16 section 3.11): full decomposition (D68 / D65; Hangul syllables by rule), canonical ordering (D108,
 * a stable sort of each run of non-starters by combining class, linear in the run), and for NFC / NFKC canonical
 * composition (D117:
 * each character that is not blocked from the last starter, D115, composes with it when the pair is a primary
 * composite; Hangul L + V and LV + T by rule).  The data (ctok/_nf_tables.h, tools/gen_nf_tables.py) is
 * unicodedata2's with the code points HF does not know left out, which makes them inert starters as in HF.
 *
 * Why here: the stretches a text's quick check doubts were normalized by unicodedata2 one Python call each, and a
 * call costs as much as normalizing hundreds of characters (the multilingual UDHR under Qwen 3's NFC: 8,264
 * stretches of 16,660 characters in all; 6.4 ms in calls, joined into 146 stretches 10.8 ms).  tests/
 * test_nf_normalize.py checks every code point, alone and in contexts, against HF's normalizers.
 */
#ifndef CTOK_NF_NORMALIZE_H
#define CTOK_NF_NORMALIZE_H
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "_unicode_tables.h"
#include "_nf_tables.h"

#define CTOK_HANGUL_S 0xAC00u
#define CTOK_HANGUL_L 0x1100u
#define CTOK_HANGUL_V 0x1161u
#define CTOK_HANGUL_T 0x11A7u
#define CTOK_HANGUL_LCOUNT 19u
#define CTOK_HANGUL_VCOUNT 21u
#define CTOK_HANGUL_TCOUNT 28u
#define CTOK_HANGUL_NCOUNT (CTOK_HANGUL_VCOUNT * CTOK_HANGUL_TCOUNT)
#define CTOK_HANGUL_SCOUNT (CTOK_HANGUL_LCOUNT * CTOK_HANGUL_NCOUNT)

/* Where each entry and each composition is, by hash (open addressing, linear probing; index + 1, 0 for an empty
 * slot): built once by ctok_nf_tables_init (the module's import, under the GIL) before any lookup.  A binary
 * search of the 6,532 entries took a third of a stretch's time, its branches unpredictable. */
#define CTOK_NFT_ENTRY_BITS 14                          /* 16,384 slots for 6,532 entries */
#define CTOK_NFT_PAIR_BITS 11                           /* 2,048 slots for 940 compositions */
static uint16_t ctok_nft_entry_slot[1u << CTOK_NFT_ENTRY_BITS];
static uint16_t ctok_nft_pair_slot[1u << CTOK_NFT_PAIR_BITS];

static inline uint32_t ctok_nft_entry_hash(uint32_t cp) {
    return (cp * 2654435761u) >> (32 - CTOK_NFT_ENTRY_BITS);
}

static inline uint32_t ctok_nft_pair_hash(uint64_t key) {
    return (uint32_t)((key * 0x9E3779B97F4A7C15ULL) >> (64 - CTOK_NFT_PAIR_BITS));
}

static void ctok_nf_tables_init(void) {
    uint32_t i, h;
    for (i = 0; i < CTOK_NFT_N_ENTRIES; i++) {
        for (h = ctok_nft_entry_hash(ctok_nft_entries[i].cp); ctok_nft_entry_slot[h];
             h = (h + 1) & ((1u << CTOK_NFT_ENTRY_BITS) - 1)) {}
        ctok_nft_entry_slot[h] = (uint16_t)(i + 1);
    }
    for (i = 0; i < CTOK_NFT_N_PAIRS; i++) {
        for (h = ctok_nft_pair_hash(ctok_nft_pair_keys[i]); ctok_nft_pair_slot[h];
             h = (h + 1) & ((1u << CTOK_NFT_PAIR_BITS) - 1)) {}
        ctok_nft_pair_slot[h] = (uint16_t)(i + 1);
    }
}

/* The table entry of cp, or NULL (then cp is a starter without decomposition for every form).  A code point
 * that is Quick_Check=Yes for all four forms with combining class 0 (ctok_nf_props 0: most of every text) has
 * no entry, and is answered without the hash. */
static inline const ctok_nft_entry* ctok_nft_find(uint32_t cp) {
    uint32_t h, k;
    if (ctok_nf_props(cp) == 0) return NULL;
    for (h = ctok_nft_entry_hash(cp); (k = ctok_nft_entry_slot[h]) != 0; h = (h + 1) & ((1u << CTOK_NFT_ENTRY_BITS) - 1))
        if (ctok_nft_entries[k - 1].cp == cp) return &ctok_nft_entries[k - 1];     /* k - 1 < CTOK_NFT_N_ENTRIES */
    return NULL;                                        /* the table is under half full: an empty slot ends the walk */
}

static inline int ctok_is_hangul_syllable(uint32_t cp) {
    return cp - CTOK_HANGUL_S < CTOK_HANGUL_SCOUNT;
}

/* The length of the full decomposition of in[0:n] (compat: compatibility, else canonical). */
static inline size_t ctok_nf_decomposed_len(const uint32_t* in, size_t n, int compat) {
    size_t i, len = 0;
    for (i = 0; i < n; i++) {
        uint32_t cp = in[i];
        if (ctok_is_hangul_syllable(cp)) {
            len += (cp - CTOK_HANGUL_S) % CTOK_HANGUL_TCOUNT ? 3 : 2;
        } else {
            const ctok_nft_entry* e = ctok_nft_find(cp);
            unsigned k = e == NULL ? 0 : compat ? e->compat_len : e->canon_len;
            len += k ? k : 1;
        }
    }
    return len;
}

static inline unsigned ctok_nf_ccc(uint32_t cp) {
    const ctok_nft_entry* e = ctok_nft_find(cp);
    return e == NULL ? 0 : e->ccc;
}

/* The primary composite of (a, b), or 0 (U+0000 composes from nothing). */
static inline uint32_t ctok_nf_compose(uint32_t a, uint32_t b) {
    uint64_t key;
    uint32_t h, k;
    if (a - CTOK_HANGUL_L < CTOK_HANGUL_LCOUNT && b - CTOK_HANGUL_V < CTOK_HANGUL_VCOUNT)
        return CTOK_HANGUL_S + ((a - CTOK_HANGUL_L) * CTOK_HANGUL_VCOUNT + (b - CTOK_HANGUL_V)) * CTOK_HANGUL_TCOUNT;
    if (ctok_is_hangul_syllable(a) && (a - CTOK_HANGUL_S) % CTOK_HANGUL_TCOUNT == 0
            && b - CTOK_HANGUL_T - 1 < CTOK_HANGUL_TCOUNT - 1)
        return a + (b - CTOK_HANGUL_T);
    key = ((uint64_t)a << 21) | b;                      /* code points < 2^21 */
    for (h = ctok_nft_pair_hash(key); (k = ctok_nft_pair_slot[h]) != 0; h = (h + 1) & ((1u << CTOK_NFT_PAIR_BITS) - 1))
        if (ctok_nft_pair_keys[k - 1] == key) return ctok_nft_pair_values[k - 1];    /* k - 1 < CTOK_NFT_N_PAIRS */
    return 0;
}

#define CTOK_NF_SHORT_RUN 32

/* Sort the n code points of cps (a run of non-starters, classes in cc) by class, stably: insertion for a short
 * run (every real one), a counting sort for a longer one, whose insertion could be quadratic (the marks of
 * classes 230 and 220 alternating 40,000 times: 460 ms; HF's normalizer 8 ms).  Without memory for the
 * counting sort's copy, insertion: slow, but the same order. */
static void ctok_nf_order_run(uint32_t* cps, uint8_t* cc, size_t n) {
    size_t i, j;
    if (n > CTOK_NF_SHORT_RUN) {
        size_t start[256], total = 0;
        uint32_t* tmp = (uint32_t*)malloc(n * (sizeof(uint32_t) + 1));
        if (tmp != NULL) {
            uint8_t* tmp_cc = (uint8_t*)(tmp + n);
            memset(start, 0, sizeof(start));
            for (i = 0; i < n; i++) start[cc[i]]++;
            for (i = 0; i < 256; i++) {                 /* counts -> where each class starts */
                size_t c = start[i];
                start[i] = total;
                total += c;
            }
            for (i = 0; i < n; i++) {
                j = start[cc[i]]++;                     /* < n: the classes' counts add up to n */
                tmp[j] = cps[i];
                tmp_cc[j] = cc[i];
            }
            memcpy(cps, tmp, n * sizeof(uint32_t));
            memcpy(cc, tmp_cc, n);
            free(tmp);
            return;
        }
    }
    for (i = 1; i < n; i++) {
        uint8_t c = cc[i];
        uint32_t cp;
        if (cc[i - 1] <= c) continue;
        cp = cps[i];
        for (j = i; j > 0 && cc[j - 1] > c; j--) {
            cps[j] = cps[j - 1];
            cc[j] = cc[j - 1];
        }
        cps[j] = cp;
        cc[j] = c;
    }
}

static size_t ctok_nf_normalize(const uint32_t* in, size_t n, int form, uint32_t* out, uint8_t* cc) {
    size_t i, j, len = 0, o;
    ptrdiff_t starter = -1;
    unsigned last = 0;
    int compat = form & 1;
    /* Decomposition, each code point's combining class beside it. */
    for (i = 0; i < n; i++) {
        uint32_t cp = in[i];
        if (ctok_is_hangul_syllable(cp)) {
            uint32_t s = cp - CTOK_HANGUL_S;
            out[len] = CTOK_HANGUL_L + s / CTOK_HANGUL_NCOUNT;                           /* len < the room */
            out[len + 1] = CTOK_HANGUL_V + s % CTOK_HANGUL_NCOUNT / CTOK_HANGUL_TCOUNT;
            cc[len] = cc[len + 1] = 0;
            len += 2;
            if (s % CTOK_HANGUL_TCOUNT) {
                out[len] = CTOK_HANGUL_T + s % CTOK_HANGUL_TCOUNT;
                cc[len++] = 0;
            }
            continue;
        }
        {
            const ctok_nft_entry* e = ctok_nft_find(cp);
            unsigned k = e == NULL ? 0 : compat ? e->compat_len : e->canon_len;
            if (k == 0) {
                out[len] = cp;
                cc[len++] = e == NULL ? 0 : e->ccc;
            } else {
                const uint32_t* d = ctok_nft_pool + (compat ? e->compat_at : e->canon_at);   /* k entries */
                for (j = 0; j < k; j++) {
                    out[len] = d[j];
                    cc[len++] = (uint8_t)ctok_nf_ccc(d[j]);
                }
            }
        }
    }
    /* Canonical ordering: each run of non-starters sorted by class, stably. */
    for (i = 0; i < len; i = j) {
        for (; i < len && cc[i] == 0; i++) {}
        for (j = i; j < len && cc[j] != 0; j++) {}      /* the run: [i, j) */
        if (j - i > 1) ctok_nf_order_run(out + i, cc + i, j - i);
    }
    if (form >= 2) return len;                          /* NFD, NFKD */
    /* Composition in place: o <= i, so out[o] is written after out[i] was read. */
    for (i = 0, o = 0; i < len; i++) {
        uint32_t cp = out[i];
        unsigned c = cc[i];
        /* Not blocked from the last starter: next to it, or every character between has a class that is
           neither 0 nor >= c (they are in order, so the last one appended has the largest).  Only a code point
           NFC doubts can be a composition's second (NFC_QC=Maybe; after the decomposition no code point is No). */
        if (starter >= 0 && ((ptrdiff_t)o == starter + 1 || (last != 0 && last < c))
                && (ctok_nf_props(cp) & CTOK_NF_NFC)) {
            uint32_t composite = ctok_nf_compose(out[starter], cp);
            if (composite != 0) {
                out[starter] = composite;
                continue;
            }
        }
        if (c == 0) starter = (ptrdiff_t)o;
        last = c;
        out[o] = cp;
        cc[o++] = (uint8_t)c;
    }
    return o;
}

#endif
