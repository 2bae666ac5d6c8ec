/* Compact fitted tables of exact-mode random binning (rbcd/binning/_binning.pyx).
 *
 * A fitted grid has n bins (local ids 0 .. n - 1, first appearance order) whose
 * packed keys have W 64-bit words; word k holds its fields in its low wbits[k]
 * bits (pack_layout; its other bits are zero). B = the sum of wbits, the key bits.
 *
 * Quotient. The quotient word qw is the word with the most bits (the first of
 * them), u = wbits[qw]. With g the hash of the other words (g = GOLDEN, then
 * g = mix64((g ^ key[k]) + GOLDEN) for each k != qw in increasing order) and
 * rbcd_ct_perm a bijection of [0, 2**u),
 *
 *     p = rbcd_ct_perm((key[qw] ^ g) mod 2**u, u).
 *
 * The bucket of the key is the top bbits bits of p, bbits = min(u, max(0,
 * bit_length(n) - RBCD_CT_SPREAD)): 1 to 2 keys per bucket on average. Given the
 * bucket, the low u - bbits bits of p and the other words determine the key
 * (key[qw] = (perm^-1(p) ^ g) mod 2**u), so a record stores only those: the
 * bucket's bits are not stored and make room for the id.
 *
 * Layout:
 *   start(b) = dir[b >> dshift] + off[b] for b = 0 .. 2**bbits: bucket b holds
 *       records start(b) .. start(b + 1) - 1; start(0) = 0, start(2**bbits) = n,
 *       non-decreasing. dir (2**(bbits - dshift) + 1 uint32) holds the start of
 *       every 2**dshift-th bucket, off (2**bbits + 2 uint8) each bucket's start
 *       from there, then dshift itself (off[2**bbits + 1]). dshift = the largest
 *       of min(RBCD_CT_DSHIFT, bbits) .. 0 whose offsets fit in a byte (0 always
 *       does): about 1.1 bytes per bucket, and dir small enough to stay in cache
 *       while a grid is looked up.
 *   ent (n * E + RBCD_CT_PAD bytes): record p at ent + p * E, a little-endian bit
 *       string: bits [0, u - bbits) the low bits of p, then every other word k
 *       (increasing k) in wbits[k] bits (kbits = B - bbits key bits in all), then
 *       local id + 1 in idbits = bit_length(n) bits, then zeros. E =
 *       ceil((kbits + idbits) / 8) (at least 1). Records are grouped by bucket, in
 *       local id order within a bucket; the RBCD_CT_PAD zero bytes at the end let
 *       every record be read with whole 8-byte loads.
 * Memory: kbits + idbits = B + 1 bits per bin (n >= 2), rounded up to bytes, plus
 * 0.6 to 0.8 bytes of directory: e.g. 8 + 0.7 bytes for a 63-bit key at 2e5 bins,
 * 12 + 0.7 for a 2-word key of 90 bits (20 + 2.6 before quotients and offsets).
 *
 * A lookup (rbcd_ct_query, then rbcd_ct_scan) reads start(b), start(b + 1) and
 * scans at most the bucket: it ends, whatever the records, as long as the starts
 * satisfy the contract above (checked by GridTables.set_tables), and the key
 * compared is the whole key (bucket and record bits): the table never merges bins.
 *
 * rbcd_mulhi64 (rbcd_mulhi.h) gives the slot of a hash in a table of any capacity (used by
 * the fit tables, whose capacity need not be a power of two). */
#ifndef RBCD_BINNING_TABLE_H
#define RBCD_BINNING_TABLE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "binning_alloc.h"
#include "binning_keys.h"
#include "rbcd_mulhi.h"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) \
    && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "binning_table.h reads records as little-endian 8-byte words"
#endif

#define RBCD_CT_SPREAD 1
#define RBCD_CT_PAD 8
#define RBCD_CT_DSHIFT 5

typedef struct {
    const uint32_t *dir;
    const unsigned char *off;
    const unsigned char *ent;
    const int32_t *wbits;  /* W: key bits of each word */
    uint64_t kmask;        /* the low kbits bits (all ones when kbits >= 64) */
    uint64_t idmask;       /* the low idbits bits */
    int64_t n;
    int W;
    int qw;                /* the quotient word */
    int u;                 /* wbits[qw] */
    int bbits;             /* bucket bits */
    int kbits;             /* key bits of a record */
    int idbits;            /* id bits of a record */
    int E;                 /* bytes per record */
    int dshift;            /* dir holds every 2**dshift-th bucket start */
} rbcd_ctable;

static inline uint64_t rbcd_ct_mask(int bits)
{
    return bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1);
}

static inline int rbcd_bit_length(uint64_t v)
{
    int bits = 0;
    while (v) { bits++; v >>= 1; }
    return bits;
}

/* Bucket bits of a table of n bins whose quotient word has u bits. */
static inline int rbcd_ct_bits(int64_t n, int u)
{
    int bits = rbcd_bit_length((uint64_t)n) - RBCD_CT_SPREAD;
    if (bits < 0) bits = 0;
    return bits < u ? bits : u;
}

/* The geometry of a table of n bins (n < 2**32) over keys of W words of wbits[k]
 * bits (dir, off and ent left NULL, dshift 0). */
static inline void rbcd_ct_geometry(rbcd_ctable *t, int64_t n, int W, const int32_t *wbits)
{
    int k, B = 0;
    t->dir = NULL;
    t->off = NULL;
    t->dshift = 0;
    t->ent = NULL;
    t->wbits = wbits;
    t->n = n;
    t->W = W;
    t->qw = 0;
    for (k = 0; k < W; k++) {
        B += wbits[k];
        if (wbits[k] > wbits[t->qw]) t->qw = k;
    }
    t->u = wbits[t->qw];
    t->bbits = rbcd_ct_bits(n, t->u);
    t->kbits = B - t->bbits;
    t->idbits = rbcd_bit_length((uint64_t)n);
    t->E = (t->kbits + t->idbits + 7) / 8;
    if (t->E < 1) t->E = 1;
    t->kmask = rbcd_ct_mask(t->kbits);
    t->idmask = rbcd_ct_mask(t->idbits);
}

/* A bijection of [0, 2**u), u <= 64: multiplies by odd constants (mod 2**u) and
 * xor-shifts by s = ceil(u / 2) (each an involution on u bits, as 2 s >= u); the
 * last multiply carries every bit into the top bits (the bucket). */
static inline uint64_t rbcd_ct_perm(uint64_t x, int u)
{
    const uint64_t m = rbcd_ct_mask(u);
    const int s = (u + 1) / 2;
    x = (x * RBCD_MUL1) & m;
    x ^= x >> s;
    x = (x * RBCD_MUL2) & m;
    x ^= x >> s;
    return (x * RBCD_MUL1) & m;
}

/* The inverse of an odd number mod 2**64 (Newton: each step doubles the bits). */
static inline uint64_t rbcd_inv_odd(uint64_t c)
{
    uint64_t v = c;  /* right to 3 bits */
    int i;
    for (i = 0; i < 6; i++) v *= 2 - c * v;
    return v;
}

/* rbcd_ct_perm's inverse. */
static inline uint64_t rbcd_ct_unperm(uint64_t p, int u)
{
    const uint64_t m = rbcd_ct_mask(u);
    const int s = (u + 1) / 2;
    const uint64_t i1 = rbcd_inv_odd(RBCD_MUL1), i2 = rbcd_inv_odd(RBCD_MUL2);
    p = (p * i1) & m;
    p ^= p >> s;
    p = (p * i2) & m;
    p ^= p >> s;
    return (p * i1) & m;
}

static inline uint64_t rbcd_ld64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Bits pos .. pos + nb - 1 (nb <= 57) of a byte string (little-endian bit order;
 * reads the 8 bytes from byte pos / 8). */
static inline uint64_t rbcd_ct_get(const unsigned char *s, int64_t pos, int nb)
{
    return (rbcd_ld64(s + pos / 8) >> (pos % 8)) & rbcd_ct_mask(nb);
}

/* As rbcd_ct_get for any nb <= 64. */
static inline uint64_t rbcd_ct_get64(const unsigned char *s, int64_t pos, int nb)
{
    if (nb <= 32) return rbcd_ct_get(s, pos, nb);
    return rbcd_ct_get(s, pos, 32) | (rbcd_ct_get(s, pos + 32, nb - 32) << 32);
}

/* ORs v (< 2**nb, nb <= 64) into bits pos .. pos + nb - 1 of the words w. */
static inline void rbcd_ct_put(uint64_t *w, int pos, uint64_t v, int nb)
{
    int o = pos % 64;
    w[pos / 64] |= v << o;
    if (o + nb > 64) w[pos / 64 + 1] |= v >> (64 - o);
}

/* The hash g of the words other than the quotient word (see the top). */
static inline uint64_t rbcd_ct_others(const rbcd_ctable *t, const uint64_t *key)
{
    uint64_t g = RBCD_GOLDEN;
    int k;
    for (k = 0; k < t->W; k++)
        if (k != t->qw) g = rbcd_mix64((g ^ key[k]) + RBCD_GOLDEN);
    return g;
}

/* The bucket of `key` (W words) and its record's key bits in rec (bit i of the
 * record is bit i % 64 of rec[i / 64]; ceil(kbits / 64) words written, at least 1). */
static inline uint64_t rbcd_ct_query(const rbcd_ctable *t, const uint64_t *key, uint64_t *rec)
{
    const int low = t->u - t->bbits;
    uint64_t p;
    int k, pos, nrec;
    if (t->W == 1) {
        p = rbcd_ct_perm((key[0] ^ RBCD_GOLDEN) & rbcd_ct_mask(t->u), t->u);
        rec[0] = p & t->kmask;
        return t->bbits == 0 ? 0 : p >> low;
    }
    p = rbcd_ct_perm((key[t->qw] ^ rbcd_ct_others(t, key)) & rbcd_ct_mask(t->u), t->u);
    nrec = (t->kbits + 63) / 64;
    for (k = 0; k < nrec; k++) rec[k] = 0;
    rec[0] = p & rbcd_ct_mask(low);
    pos = low;
    for (k = 0; k < t->W; k++) {
        if (k == t->qw) continue;
        rbcd_ct_put(rec, pos, key[k], t->wbits[k]);
        pos += t->wbits[k];
    }
    return t->bbits == 0 ? 0 : p >> low;
}

/* First record of bucket b (b <= 2**bbits; start(2**bbits) = n). */
static inline uint32_t rbcd_ct_start(const rbcd_ctable *t, uint64_t b)
{
    return t->dir[b >> t->dshift] + t->off[b];
}

/* rbcd_ct_query for single-word tables (t->W == 1), eight keys per vector:
 * bucket[k] and rec[k * stride] of keys[k], k < n (AVX-512; dispatched at run
 * time by the caller after rbcd_avx512_available()). The same values as
 * rbcd_ct_query, bit for bit (the same integer operations). */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
__attribute__((target("avx512f,avx512dq")))
static void rbcd_ct_query1_avx512(const rbcd_ctable *t, const uint64_t *keys, int64_t n,
                                  uint64_t *rec, int64_t stride, uint64_t *bucket)
{
    const __m512i m = _mm512_set1_epi64((long long)rbcd_ct_mask(t->u));
    const __m512i c1 = _mm512_set1_epi64((long long)RBCD_MUL1);
    const __m512i c2 = _mm512_set1_epi64((long long)RBCD_MUL2);
    const __m512i golden = _mm512_set1_epi64((long long)RBCD_GOLDEN);
    const __m512i km = _mm512_set1_epi64((long long)t->kmask);
    const __m128i s = _mm_cvtsi32_si128((t->u + 1) / 2);
    const __m128i low = _mm_cvtsi32_si128(t->u - t->bbits);
    uint64_t lanes[8];
    int64_t k, i;
    for (k = 0; k < n; k += 8) {
        __mmask8 in = (n - k >= 8) ? (__mmask8)0xFF : (__mmask8)((1u << (n - k)) - 1u);
        __m512i x = _mm512_maskz_loadu_epi64(in, keys + k);
        x = _mm512_and_si512(_mm512_xor_si512(x, golden), m);
        x = _mm512_and_si512(_mm512_mullo_epi64(x, c1), m);
        x = _mm512_xor_si512(x, _mm512_srl_epi64(x, s));
        x = _mm512_and_si512(_mm512_mullo_epi64(x, c2), m);
        x = _mm512_xor_si512(x, _mm512_srl_epi64(x, s));
        x = _mm512_and_si512(_mm512_mullo_epi64(x, c1), m);
        _mm512_mask_storeu_epi64(bucket + k, in, t->bbits == 0 ? _mm512_setzero_si512()
                                                                 : _mm512_srl_epi64(x, low));
        if (stride == 1) {
            _mm512_mask_storeu_epi64(rec + k, in, _mm512_and_si512(x, km));
        } else {
            _mm512_storeu_si512((void *)lanes, _mm512_and_si512(x, km));
            for (i = 0; i < 8 && k + i < n; i++) rec[(k + i) * stride] = lanes[i];
        }
    }
}
#else
static void rbcd_ct_query1_avx512(const rbcd_ctable *t, const uint64_t *keys, int64_t n,
                                  uint64_t *rec, int64_t stride, uint64_t *bucket) { }
#endif

/* Local id of the key whose record key bits are rec (rbcd_ct_query) among records
 * p .. stop - 1 of t (its bucket), -1 if absent. */
static inline int64_t rbcd_ct_scan(const rbcd_ctable *t, const uint64_t *rec,
                                   uint32_t p, uint32_t stop)
{
    const int E = t->E;
    const unsigned char *e = t->ent + (uint64_t)p * (uint64_t)E;
    int c, last;
    if (t->kbits + t->idbits <= 64) {
        /* key and id in one 8-byte load */
        for (; p < stop; p++, e += E) {
            uint64_t v = rbcd_ld64(e);
            if ((v & t->kmask) == rec[0])
                return (int64_t)((v >> t->kbits) & t->idmask) - 1;
        }
        return -1;
    }
    last = (t->kbits - 1) / 64;
    for (; p < stop; p++, e += E) {
        for (c = 0; c < last; c++)
            if (rbcd_ld64(e + 8 * c) != rec[c]) break;
        if (c < last) continue;
        if ((rbcd_ld64(e + 8 * last) & rbcd_ct_mask(t->kbits - 64 * last)) != rec[last]) continue;
        return (int64_t)rbcd_ct_get(e, t->kbits, t->idbits) - 1;
    }
    return -1;
}

/* Local id of `key`, -1 if absent (rec: scratch of W words). */
static inline int64_t rbcd_ct_find(const rbcd_ctable *t, const uint64_t *key, uint64_t *rec)
{
    uint64_t b = rbcd_ct_query(t, key, rec);
    return rbcd_ct_scan(t, rec, rbcd_ct_start(t, b), rbcd_ct_start(t, b + 1));
}

/* The arrays of a table being built (malloc'd; freed with free()). */
typedef struct {
    uint32_t *dir;
    unsigned char *off;
    unsigned char *ent;
    int64_t n_dir;         /* 2**(bbits - dshift) + 1 */
    int64_t n_off;         /* 2**bbits + 2 (the last: dshift) */
    int64_t n_ent;         /* bytes of ent: n * E + RBCD_CT_PAD */
} rbcd_ct_arrays;

/* Build the table of n keys of W words of wbits[k] bits, given in local id order
 * (keys[id * W ..]). 0 on success, -1 if out of memory (out is then all NULL). Keys
 * must be distinct (the fit guarantees it; a loaded state is checked before).
 * Temporary memory: 4 bytes per bin. */
static int rbcd_ct_build(const uint64_t *keys, int64_t n, int W, const int32_t *wbits,
                         rbcd_ct_arrays *out)
{
    rbcd_ctable t;
    int64_t nb, id, b, p;
    int s;
    uint32_t *bkt, *start;
    uint64_t *rec;
    rbcd_ct_geometry(&t, n, W, wbits);
    nb = (int64_t)1 << t.bbits;
    bkt = (uint32_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof(uint32_t));
    start = (uint32_t *)calloc((size_t)(nb + 1), sizeof(uint32_t));
    rec = (uint64_t *)malloc((size_t)(W + 2) * sizeof(uint64_t));
    out->dir = NULL;
    out->off = NULL;
    out->n_ent = n * t.E + RBCD_CT_PAD;
    out->ent = (unsigned char *)rbcd_big_malloc((size_t)out->n_ent);
    if (bkt == NULL || start == NULL || rec == NULL || out->ent == NULL) goto fail;
    memset(out->ent + n * t.E, 0, RBCD_CT_PAD);
    /* start[b + 1] = records of bucket b, then start[b] = start of bucket b - 1 ... */
    for (id = 0; id < n; id++) {
        b = (int64_t)rbcd_ct_query(&t, keys + id * W, rec);
        bkt[id] = (uint32_t)b;
        start[b + 1]++;
    }
    for (b = 0; b < nb; b++) start[b + 1] += start[b];
    /* place in id order, start[b] used as bucket b's cursor (it ends at the start
     * of bucket b + 1), then moved back by one bucket */
    for (id = 0; id < n; id++) {
        memset(rec, 0, (size_t)(W + 2) * sizeof(uint64_t));
        rbcd_ct_query(&t, keys + id * W, rec);
        rbcd_ct_put(rec, t.kbits, (uint64_t)(id + 1), t.idbits);
        p = start[bkt[id]]++;
        memcpy(out->ent + p * t.E, rec, (size_t)t.E);
    }
    memmove(start + 1, start, (size_t)nb * sizeof(uint32_t));
    start[0] = 0;
    /* the largest dshift whose offsets fit in a byte */
    for (s = t.bbits < RBCD_CT_DSHIFT ? t.bbits : RBCD_CT_DSHIFT; s > 0; s--) {
        for (b = 0; b <= nb; b++)
            if (start[b] - start[(b >> s) << s] > 255) break;
        if (b > nb) break;
    }
    out->n_dir = (nb >> s) + 1;
    out->n_off = nb + 2;
    out->dir = (uint32_t *)malloc((size_t)out->n_dir * sizeof(uint32_t));
    out->off = (unsigned char *)malloc((size_t)out->n_off);
    if (out->dir == NULL || out->off == NULL) goto fail;
    for (b = 0; b < out->n_dir; b++) out->dir[b] = start[b << s];
    for (b = 0; b <= nb; b++) out->off[b] = (unsigned char)(start[b] - out->dir[b >> s]);
    out->off[nb + 1] = (unsigned char)s;
    free(bkt);
    free(start);
    free(rec);
    return 0;
fail:
    free(bkt); free(start); free(rec); free(out->dir); free(out->off); free(out->ent);
    out->dir = NULL; out->off = NULL; out->ent = NULL;
    return -1;
}

/* 1 if every record's id + 1 lies in 1 .. n (0 otherwise). */
static int rbcd_ct_ids_ok(const rbcd_ctable *t)
{
    int64_t p;
    uint64_t v;
    for (p = 0; p < t->n; p++) {
        v = rbcd_ct_get(t->ent + p * t->E, t->kbits, t->idbits);
        if (v < 1 || v > (uint64_t)t->n) return 0;
    }
    return 1;
}

/* Keys in local id order (out: n * W words) from a table's records (ids checked:
 * rbcd_ct_ids_ok). */
static void rbcd_ct_keys(const rbcd_ctable *t, uint64_t *out)
{
    const int low = t->u - t->bbits;
    const int64_t nb = (int64_t)1 << t->bbits;
    int64_t b, p, id;
    uint64_t q, *key;
    int k, pos;
    for (b = 0; b < nb; b++) {
        for (p = rbcd_ct_start(t, (uint64_t)b); p < rbcd_ct_start(t, (uint64_t)b + 1); p++) {
            const unsigned char *e = t->ent + p * t->E;
            id = (int64_t)rbcd_ct_get(e, t->kbits, t->idbits) - 1;
            key = out + id * t->W;
            q = rbcd_ct_get64(e, 0, low);
            if (t->bbits > 0) q |= (uint64_t)b << low;
            pos = low;
            for (k = 0; k < t->W; k++) {
                if (k == t->qw) continue;
                key[k] = rbcd_ct_get64(e, pos, t->wbits[k]);
                pos += t->wbits[k];
            }
            key[t->qw] = (rbcd_ct_unperm(q, t->u) ^ rbcd_ct_others(t, key)) & rbcd_ct_mask(t->u);
        }
    }
}

#endif
