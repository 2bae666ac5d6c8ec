/* The high 64 bits of a 64 x 64-bit product, shared by the kernels: floor(a b / 2**64).
 * It maps a 64-bit hash onto [0, cap) (the binning's fit tables) and a 64-bit random
 * draw onto [0, n) (the coordinate descent's randbelow, docs/internals.md contract 10). */
#ifndef RBCD_MULHI_H
#define RBCD_MULHI_H

#include <stdint.h>

/* High 64 bits of a * b: floor(h * cap / 2**64) maps a hash onto [0, cap). */
static inline uint64_t rbcd_mulhi64(uint64_t a, uint64_t b)
{
#if defined(__SIZEOF_INT128__)
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
#else
    /* portable: four 32 x 32 -> 64 products */
    uint64_t a0 = a & 0xFFFFFFFFu, a1 = a >> 32, b0 = b & 0xFFFFFFFFu, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xFFFFFFFFu) + (p10 & 0xFFFFFFFFu);
    return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
#endif
}

#endif
