/* ctok_head_mask[m]: the low m bytes of a 64-bit word set (0 <= m <= 8), for load_head_padded (_vocab.pxd).
 * Why a table: the shift that makes the mask takes its count in %cl and several instructions around it, on
 * the path of every piece's hash. */
#ifndef CTOK_HEAD_MASK_H
#define CTOK_HEAD_MASK_H
#include <stdint.h>
static const uint64_t ctok_head_mask[9] = {
    0x0000000000000000ULL, 0x00000000000000FFULL, 0x000000000000FFFFULL, 0x0000000000FFFFFFULL,
    0x00000000FFFFFFFFULL, 0x000000FFFFFFFFFFULL, 0x0000FFFFFFFFFFFFULL, 0x00FFFFFFFFFFFFFFULL,
    0xFFFFFFFFFFFFFFFFULL,
};
#endif
