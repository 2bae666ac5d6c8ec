/* Keys and hashes of random binning (rbcd/binning/_binning.pyx).
 *
 * Every function here computes, bit for bit, the bins of docs/design.md contract 3,
 * b_j = floor((x_j - u_j) / w_j) (float64, true division), and the hash of
 * contract 5 (SplitMix64's finalizer chained over the key words). Each AVX-512
 * path (compiled with a target attribute, chosen at run time by the caller
 * after rbcd_avx512_available()) sits beside its portable scalar version; the
 * two give identical results, which tests/test_binning.py checks against the
 * rbcd_ref oracle on both paths. */
#ifndef RBCD_BINNING_KEYS_H
#define RBCD_BINNING_KEYS_H

#include <Python.h>   /* Py_ssize_t */
#include <stdint.h>
#include <stdlib.h>

#define RBCD_GOLDEN 0x9E3779B97F4A7C15ULL
#define RBCD_MUL1 0xBF58476D1CE4E5B9ULL
#define RBCD_MUL2 0x94D049BB133111EBULL
#if defined(__GNUC__) || defined(__clang__)
#define RBCD_PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 1)
/* for a line about to be written (its ownership asked for with the data) */
#define RBCD_PREFETCH_W(p) __builtin_prefetch((const void *)(p), 1, 1)
#else
#define RBCD_PREFETCH(p) ((void)0)
#define RBCD_PREFETCH_W(p) ((void)0)
#endif

/* The thresholds of one grid (random_binning._thresholds): entry e is column ej[e],
 * threshold et[e] (the smallest float64 reaching its bin) and field unit
 * ea[e] = 1 << shift of the column's key field; n entries sorted by column. */
typedef struct {
    const int32_t *ej;
    const double *et;
    const uint64_t *ea;
    Py_ssize_t n;
} rbcd_thresholds;

/* ------------------------------------------------------------------ scalar */

/* SplitMix64 finalizer (contract 5). */
static inline uint64_t rbcd_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * RBCD_MUL1;
    z = (z ^ (z >> 27)) * RBCD_MUL2;
    return z ^ (z >> 31);
}

/* Hash of a packed key of n_words words: h = GOLDEN, h = mix64((h ^ key[k]) + GOLDEN). */
static inline uint64_t rbcd_key_hash(const uint64_t *key, int n_words)
{
    uint64_t h = RBCD_GOLDEN;
    int k;
    for (k = 0; k < n_words; k++) h = rbcd_mix64((h ^ key[k]) + RBCD_GOLDEN);
    return h;
}

/* int64(floor(q)) for q within [-2**63, 2**63) (checked by the caller). */
static inline int64_t rbcd_floor_to_int64(double q)
{
    int64_t b = (int64_t)q;      /* truncation toward zero, exact here */
    if ((double)b > q) b -= 1;   /* negative non-integer: one lower */
    return b;
}

/* Packed key of one (row, grid) by division: field j of word word[j] at bit
 * shift[j] holds floor((x_j - u_j) / w_j) - lo[j]. Returns 0 (key undefined)
 * if some bin lies outside [lo, hi] (never seen in fit). word is non-decreasing
 * in j and every word holds a field, so the current word is accumulated in a
 * register and stored once. q: scratch of d doubles. */
static inline int rbcd_key_scalar(const double *x, const double *u, const double *w,
                                  const int64_t *lo, const int64_t *hi,
                                  const int32_t *word, const int64_t *shift,
                                  Py_ssize_t d, double *q, uint64_t *key)
{
    Py_ssize_t j;
    int cur = 0;
    uint64_t acc = 0;
    for (j = 0; j < d; j++) q[j] = (x[j] - u[j]) / w[j];
    for (j = 0; j < d; j++) {
        int64_t b = rbcd_floor_to_int64(q[j]);
        if (b < lo[j] || b > hi[j]) return 0;
        if (word[j] != cur) {
            key[cur] = acc;
            cur = word[j];
            acc = 0;
        }
        acc = acc | (((uint64_t)b - (uint64_t)lo[j]) << shift[j]);
    }
    key[cur] = acc;
    return 1;
}

/* Single-word packed key from thresholds: field j counts the thresholds et[e]
 * of column ej[e] that x_j reaches (ea[e] = 1 << shift of the field). Equal to
 * the division's key because the bins are monotone in x and each threshold is
 * the smallest float64 reaching its bin (random_binning._thresholds). */
static inline uint64_t rbcd_thr_key(const double *x, const int32_t *ej, const double *et,
                                    const uint64_t *ea, Py_ssize_t n_ent)
{
    Py_ssize_t e;
    uint64_t key = 0;
    for (e = 0; e < n_ent; e++) key += ea[e] & ((uint64_t)0 - (uint64_t)(x[ej[e]] >= et[e]));
    return key;
}

/* Hashed mode, one row (contract 5): cols[r] = hash(r, bins[r]) % m, bins
 * (R, d) the row's bins. Four grids at a time: one grid's hash is a chain of
 * dependent mix64 steps, so four independent chains keep the multiplier busy. */
static inline void rbcd_hash_grids_scalar(const int64_t *bins, Py_ssize_t R, Py_ssize_t d,
                                          uint64_t m, uint64_t *cols)
{
    Py_ssize_t r = 0, j;
    while (r + 4 <= R) {
        const int64_t *b0 = bins + r * d, *b1 = b0 + d, *b2 = b1 + d, *b3 = b2 + d;
        uint64_t h0 = rbcd_mix64((uint64_t)r + RBCD_GOLDEN);
        uint64_t h1 = rbcd_mix64((uint64_t)(r + 1) + RBCD_GOLDEN);
        uint64_t h2 = rbcd_mix64((uint64_t)(r + 2) + RBCD_GOLDEN);
        uint64_t h3 = rbcd_mix64((uint64_t)(r + 3) + RBCD_GOLDEN);
        for (j = 0; j < d; j++) {
            h0 = rbcd_mix64((h0 ^ (uint64_t)b0[j]) + RBCD_GOLDEN);
            h1 = rbcd_mix64((h1 ^ (uint64_t)b1[j]) + RBCD_GOLDEN);
            h2 = rbcd_mix64((h2 ^ (uint64_t)b2[j]) + RBCD_GOLDEN);
            h3 = rbcd_mix64((h3 ^ (uint64_t)b3[j]) + RBCD_GOLDEN);
        }
        cols[r] = h0 % m;
        cols[r + 1] = h1 % m;
        cols[r + 2] = h2 % m;
        cols[r + 3] = h3 % m;
        r += 4;
    }
    while (r < R) {
        const int64_t *b0 = bins + r * d;
        uint64_t h0 = rbcd_mix64((uint64_t)r + RBCD_GOLDEN);
        for (j = 0; j < d; j++) h0 = rbcd_mix64((h0 ^ (uint64_t)b0[j]) + RBCD_GOLDEN);
        cols[r] = h0 % m;
        r += 1;
    }
}

static int rbcd_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sort v[:n] ascending: Shell sort (Ciura's gaps, inline compares) up to 512
 * values, else qsort. */
static inline void rbcd_sort_u64(uint64_t *v, Py_ssize_t n)
{
    static const Py_ssize_t gaps[6] = {132, 57, 23, 10, 4, 1};
    Py_ssize_t a, b, g;
    int k;
    if (n > 512) {
        qsort(v, (size_t)n, sizeof(uint64_t), rbcd_cmp_u64);
        return;
    }
    for (k = 0; k < 6; k++) {
        g = gaps[k];
        if (g >= n) continue;
        for (a = g; a < n; a++) {
            uint64_t x = v[a];
            b = a - g;
            while (b >= 0 && v[b] > x) {
                v[b + g] = v[b];
                b -= g;
            }
            v[b + g] = x;
        }
    }
}

/* ------------------------------------------------------------------ AVX-512 */
/* AVX-512 bins, dispatched at run time (the build itself targets the
 * baseline ISA). Exact: the quotient is first taken as (x - u) * (1 / w);
 * where that is farther than 2**-50 |q| from an integer the floor equals
 * floor((x - u) / w) (the two differ by at most 3 * 2**-53 |q| when every
 * value is a normal number, i.e. 2**-900 <= |q| < 2**50 and the caller
 * guarantees 2**-1000 <= w <= 2**1000); the other lanes are redone with a
 * true division. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>
#define RBCD_FLOOR_MODE (_MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)

__attribute__((target("avx512f,avx512dq")))
static inline __m512i rbcd_floor8_of(__m512d a, __m512d inv, const double *w, __mmask8 m)
{
    /* floor(a / w) of the lanes in m, a = x - u: the product a * (1 / w)
     * where it is far enough from an integer, else the true division */
    const __m512d one = _mm512_set1_pd(1.0);
    __m512d qp = _mm512_mul_pd(a, inv);
    __m512d fl = _mm512_roundscale_pd(qp, RBCD_FLOOR_MODE);
    __m512d aq = _mm512_abs_pd(qp);
    __m512d mg = _mm512_mul_pd(aq, _mm512_set1_pd(0x1p-50));
    __mmask8 ok = _mm512_cmp_pd_mask(_mm512_sub_pd(qp, fl), mg, _CMP_GT_OQ)
                & _mm512_cmp_pd_mask(_mm512_sub_pd(_mm512_add_pd(fl, one), qp), mg, _CMP_GT_OQ)
                & _mm512_cmp_pd_mask(aq, _mm512_set1_pd(0x1p-900), _CMP_GE_OQ)
                & _mm512_cmp_pd_mask(aq, _mm512_set1_pd(0x1p50), _CMP_LT_OQ);
    __mmask8 redo = (__mmask8)(m & (__mmask8)~ok);
    if (redo) {
        __m512d qt = _mm512_div_pd(a, _mm512_mask_loadu_pd(one, m, w));
        fl = _mm512_mask_roundscale_pd(fl, redo, qt, RBCD_FLOOR_MODE);
    }
    return _mm512_cvttpd_epi64(fl);  /* integral values within int64: exact */
}

__attribute__((target("avx512f,avx512dq")))
static inline __m512i rbcd_floor8(const double *x, const double *u, const double *w,
                                  const double *inv, __mmask8 m)
{
    __m512d a = _mm512_sub_pd(_mm512_maskz_loadu_pd(m, x), _mm512_maskz_loadu_pd(m, u));
    return rbcd_floor8_of(a, _mm512_maskz_loadu_pd(m, inv), w, m);
}

/* Packed key of one (row, grid); 0 if a bin lies outside [lo, hi]. */
__attribute__((target("avx512f,avx512dq")))
static int rbcd_key_avx512(const double *x, const double *u, const double *w,
                           const double *inv, const int64_t *lo, const int64_t *hi,
                           const int32_t *word, const int64_t *shift, Py_ssize_t d,
                           int n_words, uint64_t *key)
{
    __m512i acc = _mm512_setzero_si512();
    uint64_t lanes[8];
    Py_ssize_t j, k;
    if (n_words > 1) {
        for (k = 0; k < n_words; k++) key[k] = 0;
    }
    for (j = 0; j < d; j += 8) {
        __mmask8 m = (d - j >= 8) ? (__mmask8)0xFF : (__mmask8)((1u << (d - j)) - 1u);
        __m512i b = rbcd_floor8(x + j, u + j, w + j, inv + j, m);
        __m512i lov = _mm512_maskz_loadu_epi64(m, lo + j);
        __m512i hiv = _mm512_maskz_loadu_epi64(m, hi + j);
        if (_mm512_mask_cmplt_epi64_mask(m, b, lov) | _mm512_mask_cmpgt_epi64_mask(m, b, hiv))
            return 0;
        __m512i f = _mm512_maskz_sllv_epi64(m, _mm512_sub_epi64(b, lov),
                                            _mm512_maskz_loadu_epi64(m, shift + j));
        if (n_words == 1) {
            acc = _mm512_or_si512(acc, f);
        } else {
            _mm512_storeu_si512((void *)lanes, f);
            for (k = 0; k < 8 && j + k < d; k++) key[word[j + k]] |= lanes[k];
        }
    }
    if (n_words == 1) key[0] = (uint64_t)_mm512_reduce_or_epi64(acc);
    return 1;
}

/* SplitMix64's finalizer (mix64) on eight lanes. */
__attribute__((target("avx512f,avx512dq")))
static inline __m512i rbcd_mix64v(__m512i z)
{
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)),
                           _mm512_set1_epi64((long long)RBCD_MUL1));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)),
                           _mm512_set1_epi64((long long)RBCD_MUL2));
    return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

/* Threshold keys (single-word grids): field j of the packed key is the
 * number of the grid's thresholds (thr) of column j that x_j reaches.
 * Eight rows per vector: xt is the row block transposed (column j at
 * xt + j * stride, lanes past n are computed and ignored). Also the key
 * hashes (key_hash with one word: mix64((GOLDEN ^ key) + GOLDEN)) unless
 * hashes is NULL.
 * For new rows (transform) rlo / rhi are given and inside[k] = 1 iff every
 * column of row k lies within the grid's training bins, i.e.
 * rlo[j] <= x_j < rhi[j] (rlo: smallest value in bin lo, rhi: smallest
 * value past bin hi); in fit they are NULL (training rows always are). */
__attribute__((target("avx512f,avx512dq")))
static void rbcd_thr_keys_avx512(const double *xt, Py_ssize_t stride, Py_ssize_t n,
                                 Py_ssize_t d, const double *rlo, const double *rhi,
                                 rbcd_thresholds thr, uint64_t *keys, uint64_t *hashes,
                                 unsigned char *inside)
{
    const int32_t *ej = thr.ej;
    const double *et = thr.et;
    const uint64_t *ea = thr.ea;
    const Py_ssize_t n_ent = thr.n;
    const __m512i golden = _mm512_set1_epi64((long long)RBCD_GOLDEN);
    Py_ssize_t k, e, j, m;
    for (k = 0; k < n; k += 8) {
        __m512i acc = _mm512_setzero_si512();
        __mmask8 in = 0xFF;
        if (rlo == NULL) {
            /* fit: only the columns with thresholds are read */
            __m512d x = _mm512_setzero_pd();
            int32_t cur = -1;
            for (e = 0; e < n_ent; e++) {
                if (ej[e] != cur) {
                    cur = ej[e];
                    x = _mm512_loadu_pd(xt + (Py_ssize_t)cur * stride + k);
                }
                __mmask8 c = _mm512_cmp_pd_mask(x, _mm512_set1_pd(et[e]), _CMP_GE_OQ);
                acc = _mm512_mask_add_epi64(acc, c, acc, _mm512_set1_epi64((long long)ea[e]));
            }
        } else {
            /* transform: every column is checked against the training range */
            e = 0;
            for (j = 0; j < d; j++) {
                __m512d x = _mm512_loadu_pd(xt + j * stride + k);
                in &= _mm512_cmp_pd_mask(x, _mm512_set1_pd(rlo[j]), _CMP_GE_OQ)
                    & _mm512_cmp_pd_mask(x, _mm512_set1_pd(rhi[j]), _CMP_LT_OQ);
                for (; e < n_ent && ej[e] == j; e++) {
                    __mmask8 c = _mm512_cmp_pd_mask(x, _mm512_set1_pd(et[e]), _CMP_GE_OQ);
                    acc = _mm512_mask_add_epi64(acc, c, acc, _mm512_set1_epi64((long long)ea[e]));
                }
            }
        }
        _mm512_storeu_si512((void *)(keys + k), acc);
        if (hashes != NULL)
            _mm512_storeu_si512((void *)(hashes + k),
                                rbcd_mix64v(_mm512_add_epi64(_mm512_xor_si512(golden, acc), golden)));
        if (inside != NULL)
            for (m = 0; m < 8; m++) inside[k + m] = (unsigned char)((in >> m) & 1);
    }
}

/* floor((x - u) / w) of eight lanes as in rbcd_floor8, x broadcast. */
__attribute__((target("avx512f,avx512dq")))
static inline __m512i rbcd_floor8_x(__m512d xv, const double *u, const double *w,
                                    const double *inv)
{
    return rbcd_floor8_of(_mm512_sub_pd(xv, _mm512_loadu_pd(u)), _mm512_loadu_pd(inv), w,
                          (__mmask8)0xFF);
}

/* Hashed mode, one row: h[r] = hash(r, bins of grid r) (contract 5) for
 * eight grids per vector and four vectors at a time (independent
 * multiply chains). uT, wT, invT: (d, R8) offsets, widths and reciprocals
 * transposed, R8 = R rounded up to 32 (padding lanes: 0, 1, 1; their
 * hashes are computed and ignored). */
__attribute__((target("avx512f,avx512dq")))
static void rbcd_hash_grids_avx512(const double *x, Py_ssize_t d, Py_ssize_t R8,
                                   const double *uT, const double *wT, const double *invT,
                                   uint64_t *h)
{
    const __m512i golden = _mm512_set1_epi64((long long)RBCD_GOLDEN);
    const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    Py_ssize_t g, j, k;
    for (g = 0; g < R8; g += 32) {
        __m512i z[4];
        for (k = 0; k < 4; k++)
            z[k] = rbcd_mix64v(_mm512_add_epi64(
                _mm512_add_epi64(_mm512_set1_epi64((long long)(g + 8 * k)), lane), golden));
        for (j = 0; j < d; j++) {
            __m512d xv = _mm512_set1_pd(x[j]);
            Py_ssize_t base = j * R8 + g;
            for (k = 0; k < 4; k++) {
                __m512i b = rbcd_floor8_x(xv, uT + base + 8 * k, wT + base + 8 * k,
                                          invT + base + 8 * k);
                z[k] = rbcd_mix64v(_mm512_add_epi64(_mm512_xor_si512(z[k], b), golden));
            }
        }
        for (k = 0; k < 4; k++) _mm512_storeu_si512((void *)(h + g + 8 * k), z[k]);
    }
}

/* Sort n <= 128 uint64 values (ascending) by rank: value i goes to
 * #{j : v_j < v_i} + #{j < i : v_j == v_i}, counted eight at a time with
 * vector compares (no data-dependent branch). tmp: n values of scratch. */
__attribute__((target("avx512f,avx512dq,popcnt")))
static void rbcd_rank_sort_avx512(uint64_t *v, Py_ssize_t n, uint64_t *tmp)
{
    Py_ssize_t i, b, nb = (n + 7) / 8;
    __m512i blocks[16];
    __mmask8 valid[16];
    for (b = 0; b < nb; b++) {
        Py_ssize_t left = n - 8 * b;
        valid[b] = left >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << left) - 1u);
        blocks[b] = _mm512_maskz_loadu_epi64(valid[b], v + 8 * b);
    }
    for (i = 0; i < n; i++) {
        /* rank = #{j < i : v_j <= v_i} + #{j >= i : v_j < v_i} */
        __m512i vi = _mm512_set1_epi64((long long)v[i]);
        Py_ssize_t bi = i / 8;
        __mmask8 before = (__mmask8)((1u << (i - 8 * bi)) - 1u);
        unsigned int rank = 0;
        for (b = 0; b < bi; b++)
            rank += (unsigned int)__builtin_popcount(
                (unsigned int)_mm512_cmple_epu64_mask(blocks[b], vi));
        rank += (unsigned int)__builtin_popcount((unsigned int)(
            _mm512_mask_cmple_epu64_mask(before, blocks[bi], vi)
            | _mm512_mask_cmplt_epu64_mask((__mmask8)(valid[bi] & ~before), blocks[bi], vi)));
        for (b = bi + 1; b < nb; b++)
            rank += (unsigned int)__builtin_popcount(
                (unsigned int)_mm512_mask_cmplt_epu64_mask(valid[b], blocks[b], vi));
        tmp[rank] = v[i];
    }
    for (i = 0; i < n; i++) v[i] = tmp[i];
}

static int rbcd_avx512_available(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
}
#else
/* No AVX-512 compiler support: rbcd_avx512_available() is 0, so these stubs are
 * never called; the scalar functions above do the work. */
static int rbcd_key_avx512(const double *x, const double *u, const double *w,
                           const double *inv, const int64_t *lo, const int64_t *hi,
                           const int32_t *word, const int64_t *shift, Py_ssize_t d,
                           int n_words, uint64_t *key) { return 0; }
static int rbcd_avx512_available(void) { return 0; }
static void rbcd_hash_grids_avx512(const double *x, Py_ssize_t d, Py_ssize_t R8,
                                   const double *uT, const double *wT, const double *invT,
                                   uint64_t *h) { }
static void rbcd_rank_sort_avx512(uint64_t *v, Py_ssize_t n, uint64_t *tmp) { }
static void rbcd_thr_keys_avx512(const double *xt, Py_ssize_t stride, Py_ssize_t n,
                                 Py_ssize_t d, const double *rlo, const double *rhi,
                                 rbcd_thresholds thr, uint64_t *keys, uint64_t *hashes,
                                 unsigned char *inside) { }
#endif

#endif
