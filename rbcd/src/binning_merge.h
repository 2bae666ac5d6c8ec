/* Merging the fit tables of row ranges into one grid's table (rbcd/binning/_binning.pyx,
 * fit_tables with n_ranges > 1; docs/design.md contract 4).
 *
 * In the row-range fit every thread bins its own contiguous range of rows for every
 * grid, in a table of its own, numbering the bins it meets by first appearance within
 * its range. A (range t, local id l) is a "pair"; pairs are numbered range after range,
 * pair q = base[t] + l, so that the pair order is the order of first appearance: every
 * row of range t comes after every row of range t - 1, and within a range the local ids
 * follow the rows. A bin's global id is therefore the number of distinct bins whose first
 * pair comes before its own first pair, which is exactly the first-appearance numbering
 * over all rows that a single table would give (the contract; the output does not depend
 * on the number of ranges or partitions).
 *
 * The merge runs in four steps, each one parallel over independent parts:
 *   1. rbcd_merge_hash: per range, the hashes of its pairs' keys and, with P = 2**pbits
 *      partitions (the top pbits of the hash), its pairs sorted stably by partition;
 *   2. rbcd_merge_partition: per partition, one hash table over that partition's pairs
 *      visited range after range, each in local id order: the first pair of each key
 *      is "new" (first[q] = q), a later one points at it (first[q] = q') and adds its
 *      row count to the key's slot, written to counts[q'] at the end (only the owner of
 *      the partition writes);
 *   3. rbcd_merge_count_new / rbcd_merge_number / rbcd_merge_follow over ranges of pairs:
 *      the new pairs numbered in pair order (a prefix count), then every pair given the
 *      global id of its first pair;
 *   4. rbcd_merge_output: the keys and counts of the new pairs at their global ids.
 * Range 0's pairs are all new and keep their ids (gid = l), so its rows' ids need no
 * rewrite. P = 1 (pbits = 0) needs no sort: partition 0 visits the pairs in order.
 *
 * A grid of single-word keys below 2**bits, for a small enough `bits`, may be merged
 * instead by rbcd_merge_direct on one thread: no hashes, partitions or slots to clear,
 * one array indexed by the key itself (its global id + 1, 0 for a key not yet met), the
 * pairs visited range after range in local id order as in step 2. The same ids, keys
 * and counts as steps 1-4.
 *
 * Pairs and bins are below 2**32 (a range's bins are at most its rows; fit takes fewer
 * than 2**32 - 1 rows). Memory per pair: its key (8 W bytes), hash (8), count, partition
 * order, first pair and global id (4 each), plus a partition's slots (16 bytes per pair
 * of the partition at load <= 0.5) while it runs.
 */
#ifndef RBCD_BINNING_MERGE_H
#define RBCD_BINNING_MERGE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "binning_keys.h"
#include "rbcd_mulhi.h"

typedef struct {
    int W;                  /* 64-bit words per key */
    int pbits;              /* P = 2**pbits partitions (0: one) */
    int64_t T;              /* ranges */
    const int64_t *base;    /* (T + 1) pairs of range t: base[t] .. base[t + 1] - 1 */
    const uint64_t *keys;   /* (M * W) the pairs' packed keys (range t's in local id order) */
    uint32_t *counts;       /* (M) IN rows of each pair's bin in its range; OUT for a new
                               pair, the rows of its bin in all ranges */
    uint64_t *hash;         /* (M) step 1: key hashes */
    uint32_t *order;        /* (M) step 1 with P > 1: range t's pairs by partition at base[t] */
    int64_t *part_off;      /* (T * (P + 1)) step 1 with P > 1: range t's pairs of partition
                               p are order[base[t] + part_off[t*(P+1) + p] .. (p + 1)] */
    uint32_t *first;        /* (M) step 2: the first pair with the same key */
    uint32_t *gid;          /* (M) step 3: the global id of each pair's key */
} rbcd_merge;

/* A slot of a partition's table: the key's first word, its first pair + 1 (0: empty) and
 * its rows so far, so that a probe reads one slot (the other words of a multi-word key
 * are compared at the first pair's key only when the first words agree). */
typedef struct {
    uint64_t key0;
    uint32_t pairp1;
    uint32_t count;
} rbcd_merge_slot;

static inline int64_t rbcd_merge_part(const rbcd_merge *m, uint64_t h)
{
    return m->pbits == 0 ? 0 : (int64_t)(h >> (64 - m->pbits));
}

/* Step 1 for range t: hashes and (P > 1) the partition order of its pairs. */
static void rbcd_merge_hash(rbcd_merge *m, int64_t t)
{
    const int64_t b0 = m->base[t], b1 = m->base[t + 1], P = (int64_t)1 << m->pbits;
    int64_t q, p;
    int64_t *off;
    for (q = b0; q < b1; q++) m->hash[q] = rbcd_key_hash(m->keys + q * m->W, m->W);
    if (m->pbits == 0) return;
    off = m->part_off + t * (P + 1);
    memset(off, 0, (size_t)(P + 1) * sizeof(int64_t));
    for (q = b0; q < b1; q++) off[rbcd_merge_part(m, m->hash[q]) + 1] += 1;
    for (p = 0; p < P; p++) off[p + 1] += off[p];
    /* a stable counting sort: off[p] runs through partition p's slots, then is
       restored from off[p + 1]'s final value of the previous partition */
    for (q = b0; q < b1; q++) {
        p = rbcd_merge_part(m, m->hash[q]);
        m->order[b0 + off[p]] = (uint32_t)q;
        off[p] += 1;
    }
    for (p = P; p > 0; p--) off[p] = off[p - 1];
    off[0] = 0;
}

/* Pairs of range t in partition p: first and one past last index into `order`
 * (P > 1), or the range itself (P = 1; then the indices are pairs). */
static inline void rbcd_merge_span(const rbcd_merge *m, int64_t t, int64_t p,
                                   int64_t *j0, int64_t *j1)
{
    const int64_t P = (int64_t)1 << m->pbits;
    if (m->pbits == 0) {
        *j0 = m->base[t];
        *j1 = m->base[t + 1];
        return;
    }
    *j0 = m->base[t] + m->part_off[t * (P + 1) + p];
    *j1 = m->base[t] + m->part_off[t * (P + 1) + p + 1];
}

/* Step 2 for partition p, in the caller's slot buffer (*slots of *slots_cap slots,
 * grown here as needed: a thread reuses one buffer for all its partitions). Returns 0,
 * or -1 when the slots cannot be allocated. */
static int rbcd_merge_partition(rbcd_merge *m, int64_t p, rbcd_merge_slot **slots_buf,
                                uint64_t *slots_cap)
{
    const int W = m->W;
    int64_t t, j, j0, j1, q, r, n = 0;
    uint64_t cap, pos, h, key0;
    rbcd_merge_slot *slots, *e;
    int k, same;
    for (t = 0; t < m->T; t++) {
        rbcd_merge_span(m, t, p, &j0, &j1);
        n += j1 - j0;
    }
    if (n == 0) return 0;
    cap = (uint64_t)(2 * n + 1);
    if (cap > *slots_cap) {
        free(*slots_buf);
        *slots_cap = 0;
        *slots_buf = (rbcd_merge_slot *)malloc((size_t)cap * sizeof(rbcd_merge_slot));
        if (*slots_buf == NULL) return -1;
        *slots_cap = cap;
    }
    slots = *slots_buf;
    memset(slots, 0, (size_t)cap * sizeof(rbcd_merge_slot));
    for (t = 0; t < m->T; t++) {
        rbcd_merge_span(m, t, p, &j0, &j1);
        for (j = j0; j < j1; j++) {
            q = m->pbits == 0 ? j : (int64_t)m->order[j];
            h = m->hash[q];
            key0 = m->keys[q * W];
            pos = rbcd_mulhi64(h << m->pbits, cap);
            for (;;) {
                e = slots + pos;
                if (e->pairp1 == 0) {           /* the key's first pair */
                    e->key0 = key0;
                    e->pairp1 = (uint32_t)(q + 1);
                    e->count = m->counts[q];
                    m->first[q] = (uint32_t)q;
                    break;
                }
                if (e->key0 == key0) {
                    r = (int64_t)e->pairp1 - 1;
                    same = 1;
                    for (k = 1; k < W; k++) same &= m->keys[r * W + k] == m->keys[q * W + k];
                    if (same) {
                        m->first[q] = (uint32_t)r;
                        e->count += m->counts[q];
                        break;
                    }
                }
                pos += 1;
                if (pos == cap) pos = 0;
            }
        }
    }
    /* each key's total rows at its first pair */
    for (pos = 0; pos < cap; pos++)
        if (slots[pos].pairp1 != 0) m->counts[slots[pos].pairp1 - 1] = slots[pos].count;
    return 0;
}

/* Step 3a: new pairs among q0 .. q1 - 1. */
static int64_t rbcd_merge_count_new(const rbcd_merge *m, int64_t q0, int64_t q1)
{
    int64_t q, c = 0;
    for (q = q0; q < q1; q++) c += m->first[q] == (uint32_t)q;
    return c;
}

/* Step 3b: global ids start, start + 1, ... for the new pairs among q0 .. q1 - 1. */
static void rbcd_merge_number(rbcd_merge *m, int64_t q0, int64_t q1, int64_t start)
{
    int64_t q;
    for (q = q0; q < q1; q++)
        if (m->first[q] == (uint32_t)q) m->gid[q] = (uint32_t)start++;
}

/* Step 3c (after 3b everywhere): the other pairs of q0 .. q1 - 1 take their first
 * pair's global id. */
static void rbcd_merge_follow(rbcd_merge *m, int64_t q0, int64_t q1)
{
    int64_t q;
    for (q = q0; q < q1; q++)
        if (m->first[q] != (uint32_t)q) m->gid[q] = m->gid[m->first[q]];
}

/* Step 4: the new pairs of q0 .. q1 - 1 write their key and total count at their
 * global id (out_keys: n_bins * W words, out_counts: n_bins). */
static void rbcd_merge_output(const rbcd_merge *m, int64_t q0, int64_t q1,
                              uint64_t *out_keys, uint32_t *out_counts)
{
    const int W = m->W;
    int64_t q, g;
    int k;
    for (q = q0; q < q1; q++) {
        if (m->first[q] != (uint32_t)q) continue;
        g = m->gid[q];
        for (k = 0; k < W; k++) out_keys[g * W + k] = m->keys[q * W + k];
        out_counts[g] = m->counts[q];
    }
}

/* The direct merge of range t's pairs, in local id order (keys[l], counts[l], l <
 * n_pairs): id_of[key] is the key's global id + 1, 0 for a key no earlier pair had
 * (id_of: 2**bits entries for keys below 2**bits, all 0 before range 0). A key not met
 * yet takes the next global id n (its key and count written at out_keys[n],
 * out_counts[n], then n += 1); a key met in an earlier range adds its count (a range's
 * local ids are distinct keys). gid[l] = the global id of pair l. Returns the new n.
 * The caller clears id_of afterwards at the out_keys it holds. */
static int64_t rbcd_merge_direct(const uint64_t *keys, const uint32_t *counts,
                                 int64_t n_pairs, uint32_t *id_of, uint32_t *gid,
                                 uint64_t *out_keys, uint32_t *out_counts, int64_t n)
{
    enum { AHEAD = 16 };    /* pairs between a slot's prefetch and its use */
    int64_t l;
    uint64_t key;
    uint32_t v;
    for (l = 0; l < n_pairs; l++) {
        if (l + AHEAD < n_pairs) RBCD_PREFETCH_W(id_of + keys[l + AHEAD]);
        key = keys[l];
        v = id_of[key];
        if (v == 0) {
            id_of[key] = (uint32_t)(n + 1);
            out_keys[n] = key;
            out_counts[n] = counts[l];
            gid[l] = (uint32_t)n;
            n += 1;
        } else {
            out_counts[v - 1] += counts[l];
            gid[l] = v - 1;
        }
    }
    return n;
}

#endif
