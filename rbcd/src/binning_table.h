/* Compact fitted tables of exact-mode random binning (rbcd/binning/_binning.pyx).
 *
 * A fitted grid with n bins (local ids 0 .. n - 1, first appearance order) and
 * packed keys of W 64-bit words is kept as a bucketed table:
 *
 *   dir  (2**bbits + 1 uint32): bucket b holds entries dir[b] .. dir[b + 1] - 1;
 *        dir[0] = 0, dir[2**bbits] = n, non-decreasing.
 *   ent  (n * W uint64): the keys grouped by bucket, in local id order within a
 *        bucket. The bucket of a key is the top bbits bits of rbcd_key_hash.
 *   ids  (n uint32) the local id of each entry, or NULL when the table is
 *        "packed": then the last word of entry p holds (local id + 1) << used
 *        above the key's `used` bits (used + bit_length(n) <= 64).
 *
 * bbits = max(0, bit_length(n) - RBCD_CT_SPREAD): 1 to 2 entries per bucket on
 * average (n >= 1; 2 to 4 scanned more per miss and cost transform about 7% at
 * one bin per row). Memory: 8 W + 2 to 4 bytes per bin packed, 4 more when not.
 * A lookup reads dir[b], dir[b + 1] and scans at most the bucket (its keys are
 * contiguous): every lookup ends, whatever the bucket sizes, as long as dir
 * satisfies the contract above (checked by GridTables.set_tables).
 * The key compared is exact (all W words), so the table never merges bins.
 *
 * rbcd_mulhi64 (rbcd_mulhi.h) gives the slot of a hash in a table of any capacity (used by
 * the packed fit tables, whose capacity need not be a power of two). */
#ifndef RBCD_BINNING_TABLE_H
#define RBCD_BINNING_TABLE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "binning_alloc.h"
#include "binning_keys.h"
#include "rbcd_mulhi.h"

#define RBCD_CT_SPREAD 1

typedef struct {
    const uint32_t *dir;
    const uint64_t *ent;
    const uint32_t *ids;   /* NULL: packed */
    uint64_t kmask;        /* the key's bits of the last word (all ones when not packed) */
    int64_t n;
    int used;              /* key bits of the last word */
    int W;
    int bbits;
} rbcd_ctable;

/* Bucket bits of a table of n bins. */
static inline int rbcd_ct_bits(int64_t n)
{
    int bits = 0;
    while (n > 0) { bits++; n >>= 1; }
    return bits > RBCD_CT_SPREAD ? bits - RBCD_CT_SPREAD : 0;
}

/* True if a table of n bins whose last key word uses `used` bits is packed. */
static inline int rbcd_ct_packed(int64_t n, int used)
{
    int bits = 0;
    while (n > 0) { bits++; n >>= 1; }
    return used + bits <= 64;
}

/* Bucket of hash h: its top bbits bits (0 when bbits == 0; no shift by 64). */
static inline uint64_t rbcd_ct_bucket(uint64_t h, int bbits)
{
    return (h >> 1) >> (63 - bbits);
}

/* Local id of `key` among entries p .. stop - 1 of t (a bucket, or the rest of
 * one), -1 if absent. */
static inline int64_t rbcd_ct_scan(const rbcd_ctable *t, const uint64_t *key,
                                   uint32_t p, uint32_t stop)
{
    const int W = t->W;
    const uint64_t last = key[W - 1];
    const uint64_t *e;
    int k;
    if (W == 1) {
        for (; p < stop; p++) {
            if ((t->ent[p] & t->kmask) == last)
                return t->ids != NULL ? (int64_t)t->ids[p] : (int64_t)(t->ent[p] >> t->used) - 1;
        }
        return -1;
    }
    for (; p < stop; p++) {
        e = t->ent + (uint64_t)p * (uint64_t)W;
        if ((e[W - 1] & t->kmask) != last) continue;
        for (k = 0; k < W - 1; k++)
            if (e[k] != key[k]) break;
        if (k == W - 1)
            return t->ids != NULL ? (int64_t)t->ids[p] : (int64_t)(e[W - 1] >> t->used) - 1;
    }
    return -1;
}

/* Local id of `key` (hash h = rbcd_key_hash(key, W)), -1 if absent. */
static inline int64_t rbcd_ct_find(const rbcd_ctable *t, const uint64_t *key, uint64_t h)
{
    uint64_t b = rbcd_ct_bucket(h, t->bbits);
    return rbcd_ct_scan(t, key, t->dir[b], t->dir[b + 1]);
}

/* The arrays of a table being built (malloc'd; freed with free()). */
typedef struct {
    uint32_t *dir;
    uint64_t *ent;
    uint32_t *ids;         /* NULL when packed */
    int64_t n_dir;         /* 2**bbits + 1 */
    int bbits;
} rbcd_ct_arrays;

/* Build the table of n keys of W words given in local id order (keys[id * W ..]),
 * whose last word uses `used` bits. 0 on success, -1 if out of memory (out is
 * then all NULL). Keys must be distinct (the fit guarantees it; a loaded state
 * is checked before). Temporary memory: 4 bytes per bin. */
static int rbcd_ct_build(const uint64_t *keys, int64_t n, int W, int used, rbcd_ct_arrays *out)
{
    int bbits = rbcd_ct_bits(n);
    int64_t nb = (int64_t)1 << bbits, id, b, p;
    int packed = rbcd_ct_packed(n, used);
    uint32_t *bkt = (uint32_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof(uint32_t));
    out->bbits = bbits;
    out->n_dir = nb + 1;
    out->dir = (uint32_t *)calloc((size_t)(nb + 1), sizeof(uint32_t));
    out->ent = (uint64_t *)rbcd_big_malloc((size_t)n * (size_t)W * sizeof(uint64_t));
    out->ids = packed ? NULL : (uint32_t *)rbcd_big_malloc((size_t)n * sizeof(uint32_t));
    if (bkt == NULL || out->dir == NULL || out->ent == NULL || (!packed && out->ids == NULL)) {
        free(bkt); free(out->dir); free(out->ent); free(out->ids);
        out->dir = NULL; out->ent = NULL; out->ids = NULL;
        return -1;
    }
    /* dir[b + 1] = entries of bucket b, then dir[b] = start of bucket b - 1 ... */
    for (id = 0; id < n; id++) {
        b = (int64_t)rbcd_ct_bucket(rbcd_key_hash(keys + id * W, W), bbits);
        bkt[id] = (uint32_t)b;
        out->dir[b + 1]++;
    }
    for (b = 0; b < nb; b++) out->dir[b + 1] += out->dir[b];
    /* place in id order, dir[b] used as bucket b's cursor (it ends at the start
     * of bucket b + 1), then moved back by one bucket */
    if (W == 1 && packed) {
        for (id = 0; id < n; id++)
            out->ent[out->dir[bkt[id]]++] = keys[id] | ((uint64_t)(id + 1) << used);
    } else {
        for (id = 0; id < n; id++) {
            p = out->dir[bkt[id]]++;
            memcpy(out->ent + p * W, keys + id * W, (size_t)W * sizeof(uint64_t));
            if (packed)
                out->ent[p * W + W - 1] |= (uint64_t)(id + 1) << used;
            else
                out->ids[p] = (uint32_t)id;
        }
    }
    memmove(out->dir + 1, out->dir, (size_t)nb * sizeof(uint32_t));
    out->dir[0] = 0;
    free(bkt);
    return 0;
}

/* Keys in local id order (out: n * W words) from a table's entries. */
static void rbcd_ct_keys(const rbcd_ctable *t, uint64_t *out)
{
    const int W = t->W;
    int64_t p, id;
    if (W == 1 && t->ids == NULL) {
        for (p = 0; p < t->n; p++)
            out[(int64_t)(t->ent[p] >> t->used) - 1] = t->ent[p] & t->kmask;
        return;
    }
    for (p = 0; p < t->n; p++) {
        const uint64_t *e = t->ent + p * W;
        id = t->ids != NULL ? (int64_t)t->ids[p] : (int64_t)(e[W - 1] >> t->used) - 1;
        memcpy(out + id * W, e, (size_t)W * sizeof(uint64_t));
        out[id * W + W - 1] &= t->kmask;
    }
}

#endif
