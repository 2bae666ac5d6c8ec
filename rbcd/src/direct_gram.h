/* Gram matrices of a random binning TRAINING matrix for the direct ridge solves
 * (rbcd.solvers._direct; docs/internals.md, "Direct solves").
 *
 * Input: the grid labels, grid-major: L[r * n + i] is the (global) column of row i in
 * grid r. In training data every row has exactly one entry, of the same value v, in
 * every grid (design contract 4/6), so
 *
 *     (Z Z^T)[i, j] = v^2 * #{r : L[r, i] == L[r, j]}                 (dual, n x n)
 *     (Z^T S Z)[a, b] = v^2 * sum_i s_i [a and b are both columns of row i]  (primal)
 *
 * Both kernels count exactly (integers, or weights summed in row order by one thread),
 * so their results do not depend on the thread count.
 *
 * The dual kernel compares labels: n^2 R / 2 comparisons, RBCD_GRAM_ROWS rows i against a
 * stream of rows j, so each label L[r, j] is loaded once per RBCD_GRAM_ROWS rows. The
 * count of a pair does not depend on how the rows are grouped. The primal kernel scatters
 * n R^2 / 2 weights. The cost models that choose between them and CG are in
 * rbcd/solvers/_direct.py.
 */
#ifndef RBCD_DIRECT_GRAM_H
#define RBCD_DIRECT_GRAM_H

#include <stdint.h>
#include <string.h>
#include <Python.h>

/* The count loops are compiled for x86-64-v4 (AVX-512), AVX2 and the baseline on x86-64
 * with gcc, and the loader picks one for the CPU (an ifunc). Integer counts: the same
 * result on every path. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define RBCD_GRAM_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define RBCD_GRAM_CLONES
#endif
#if defined(__GNUC__) || defined(__clang__)
#define RBCD_GRAM_INLINE static inline __attribute__((always_inline))
#else
#define RBCD_GRAM_INLINE static inline
#endif

/* Rows i per block of the dual kernel, and columns j per chunk of its count loop. The
 * labels of the columns are what the kernel streams from memory (the rows' are a few per
 * grid): 2 / RBCD_GRAM_ROWS bytes per uint16 comparison. A chunk's counts for the block's
 * rows (RBCD_GRAM_ROWS x RBCD_GRAM_CHUNK of them, 16 KiB of uint16) stay in the L1 cache
 * over all R grids, while each grid's labels of the chunk stream in sequence. */
#define RBCD_GRAM_ROWS 8
#define RBCD_GRAM_CHUNK 1024

/* The counts of one grid for a full block (rows li[0 .. 7]), columns [c0, c1), added to
 * a0 .. a7: restrict parameters (disjoint arrays), so that the compiler vectorizes the
 * loop without run-time checks of its ten arrays' overlaps (too many for gcc's checks:
 * without them the loop stayed scalar). */
#define RBCD_GRAM_COUNT_ROWS(NAME, LT, ACC_T)                                             \
RBCD_GRAM_INLINE void NAME(                                                               \
    const LT *__restrict Lr, const LT *__restrict li, Py_ssize_t c0, Py_ssize_t c1,       \
    ACC_T *__restrict a0, ACC_T *__restrict a1, ACC_T *__restrict a2,                     \
    ACC_T *__restrict a3, ACC_T *__restrict a4, ACC_T *__restrict a5,                     \
    ACC_T *__restrict a6, ACC_T *__restrict a7)                                           \
{                                                                                         \
    const LT l0 = li[0], l1 = li[1], l2 = li[2], l3 = li[3];                              \
    const LT l4 = li[4], l5 = li[5], l6 = li[6], l7 = li[7];                              \
    Py_ssize_t j;                                                                         \
    for (j = c0; j < c1; j++) {                                                           \
        const LT lj = Lr[j];                                                              \
        a0[j] += (ACC_T)(lj == l0);                                                       \
        a1[j] += (ACC_T)(lj == l1);                                                       \
        a2[j] += (ACC_T)(lj == l2);                                                       \
        a3[j] += (ACC_T)(lj == l3);                                                       \
        a4[j] += (ACC_T)(lj == l4);                                                       \
        a5[j] += (ACC_T)(lj == l5);                                                       \
        a6[j] += (ACC_T)(lj == l6);                                                       \
        a7[j] += (ACC_T)(lj == l7);                                                       \
    }                                                                                     \
}

/* acc[t * m + j] = #{r : L[g_r, j] == L[g_r, i0 + t]} for t < nb (nb <= RBCD_GRAM_ROWS),
 * j < m, over the R grids g_r = grids[r] (grids NULL: g_r = r), for labels of type LT
 * counted in ACC_T (which must hold R). acc: nb * m,
 * overwritten. Two instances: int32 labels and counts (any grid), and uint16 labels (each
 * grid's own column numbers, when every grid has at most 65,536 columns) with uint16
 * counts (R < 65,536), twice the lanes per vector. Chunk by chunk of columns, grid by
 * grid within a chunk; a full block by ROWS8. */
#define RBCD_GRAM_COUNT_BLOCK(NAME, ROWS8, LT, ACC_T)                                     \
RBCD_GRAM_CLONES                                                                          \
static void NAME(const LT *L, Py_ssize_t n, const int64_t *grids, Py_ssize_t R,          \
                 Py_ssize_t i0, Py_ssize_t nb, Py_ssize_t m, ACC_T *acc)                  \
{                                                                                         \
    Py_ssize_t r, j, t, c0, c1;                                                           \
    memset(acc, 0, (size_t)(nb * m) * sizeof(ACC_T));                                     \
    for (c0 = 0; c0 < m; c0 += RBCD_GRAM_CHUNK) {                                         \
        c1 = (c0 + RBCD_GRAM_CHUNK < m) ? c0 + RBCD_GRAM_CHUNK : m;                       \
        for (r = 0; r < R; r++) {                                                         \
            const LT *Lr = L + ((grids != NULL) ? grids[r] : r) * n;                      \
            if (nb == RBCD_GRAM_ROWS) {                                                   \
                ROWS8(Lr, Lr + i0, c0, c1, acc, acc + m, acc + 2 * m, acc + 3 * m,        \
                      acc + 4 * m, acc + 5 * m, acc + 6 * m, acc + 7 * m);                \
            } else {                                                                      \
                for (t = 0; t < nb; t++) {                                                \
                    const LT lt = Lr[i0 + t];                                             \
                    ACC_T *at = acc + t * m;                                              \
                    for (j = c0; j < c1; j++)                                             \
                        at[j] += (ACC_T)(Lr[j] == lt);                                    \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    }                                                                                     \
}

RBCD_GRAM_COUNT_ROWS(rbcd_gram_count_rows_i32, int32_t, int32_t)
RBCD_GRAM_COUNT_ROWS(rbcd_gram_count_rows_u16, uint16_t, uint16_t)
RBCD_GRAM_COUNT_BLOCK(rbcd_gram_count_block_i32, rbcd_gram_count_rows_i32, int32_t, int32_t)
RBCD_GRAM_COUNT_BLOCK(rbcd_gram_count_block_u16, rbcd_gram_count_rows_u16, uint16_t, uint16_t)

/* Rows i0 .. i0 + nb - 1 of the centred, weighted dual Gram, lower triangle (j <= i):
 *
 *     K[i, j] = sw_i sw_j (v2 * count(i, j) - m_i - m_j + c)
 *
 * with sw = sqrt(sample weights) (NULL: 1) and m (NULL: no centring; then c is unused).
 * count(i, j) is the comparison count over R grids of L (grids[0 .. R - 1], or the first
 * R where grids is NULL) plus S[i, j] where S is not
 * NULL (n x n, row-major, lower triangle: the counts of the other grids, found pair by
 * pair by rbcd_gram_pairs_*). K is n x n, row-major. acc: the calling thread's scratch of
 * RBCD_GRAM_ROWS * n counts. */
#define RBCD_GRAM_DUAL_ROWS(NAME, COUNT, LT, ACC_T)                                       \
static void NAME(const LT *L, Py_ssize_t n, const int64_t *grids, Py_ssize_t R,          \
                 Py_ssize_t i0, Py_ssize_t nb, double v2, const double *m, double c,      \
                 const double *sw, const ACC_T *S, double *K, ACC_T *acc)                 \
{                                                                                         \
    Py_ssize_t t, j, mm = i0 + nb;                                                        \
    COUNT(L, n, grids, R, i0, nb, mm, acc);                                               \
    for (t = 0; t < nb; t++) {                                                            \
        const Py_ssize_t i = i0 + t;                                                      \
        ACC_T *at = acc + t * mm;                                                         \
        double *Ki = K + i * n;                                                           \
        if (S != NULL) {                                                                  \
            const ACC_T *Si = S + i * n;                                                  \
            for (j = 0; j <= i; j++)                                                      \
                at[j] = (ACC_T)(at[j] + Si[j]);                                           \
        }                                                                                 \
        for (j = 0; j <= i; j++) {                                                        \
            double k = v2 * (double)at[j];                                                \
            if (m != NULL)                                                                \
                k = k - m[i] - m[j] + c;                                                  \
            if (sw != NULL)                                                               \
                k *= sw[i] * sw[j];                                                       \
            Ki[j] = k;                                                                    \
        }                                                                                 \
    }                                                                                     \
}

RBCD_GRAM_DUAL_ROWS(rbcd_gram_dual_rows_i32, rbcd_gram_count_block_i32, int32_t, int32_t)
RBCD_GRAM_DUAL_ROWS(rbcd_gram_dual_rows_u16, rbcd_gram_count_block_u16, uint16_t, uint16_t)

/* The dual counts of grids whose bins hold few rows, pair by pair instead of by
 * comparisons: for the grids g = grids[0 .. ng - 1] and the rows i of [a, b),
 *
 *     S[i, j] += #{g : L[g, i] == L[g, j]}   (j < i),     S[i, i] += ng,
 *
 * S n x n, row-major (only its rows [a, b) written: threads with disjoint row ranges
 * share it). Per grid, the rows 0 .. b - 1 are sorted by bin (a counting sort, rows
 * increasing within a bin), then each row i of [a, b) adds 1 at the earlier rows of its
 * bin: a grid costs three scans of b rows plus its pairs (sum over its bins of
 * c (c - 1) / 2, for c rows in a bin), against n^2 / 2 comparisons. The bins are
 * numbered L[g, i] - base[g] (base NULL: 0) below n_head; pos: n_head scratch entries,
 * rows: b. Integer counts: the same as the comparison kernel's for those grids. */
#define RBCD_GRAM_PAIRS(NAME, LT, ACC_T)                                                  \
static void NAME(const LT *L, Py_ssize_t n, const int64_t *grids, Py_ssize_t ng,          \
                 const int64_t *base, Py_ssize_t a, Py_ssize_t b, ACC_T *S,               \
                 int64_t *pos, int64_t *rows)                                             \
{                                                                                         \
    Py_ssize_t q, i, s, e, p, t;                                                          \
    for (q = 0; q < ng; q++) {                                                            \
        const LT *Lg = L + grids[q] * n;                                                  \
        const int64_t off = (base != NULL) ? base[grids[q]] : 0;                          \
        int64_t next = 0;                                                                 \
        /* pos[bin]: its row count, then (bins in order of their first row) its start */  \
        for (i = 0; i < b; i++)                                                           \
            pos[(int64_t)Lg[i] - off] = 0;                                                \
        for (i = 0; i < b; i++)                                                           \
            pos[(int64_t)Lg[i] - off] -= 1;                                               \
        for (i = 0; i < b; i++) {                                                         \
            int64_t *pl = pos + ((int64_t)Lg[i] - off);                                   \
            if (*pl < 0) {              /* the bin's first row: its block of -*pl rows */ \
                const int64_t c = -*pl;                                                   \
                *pl = next;                                                               \
                next += c;                                                                \
            }                                                                             \
            rows[(*pl)++] = i;                                                            \
        }                                                                                 \
        /* the bins' blocks in order; pos[bin] is now the end of its block */             \
        for (s = 0; s < b; s = e) {                                                       \
            e = pos[(int64_t)Lg[rows[s]] - off];                                          \
            for (t = s + 1; t < e; t++) {                                                 \
                const int64_t r = rows[t];                                                \
                if (r >= a) {                                                             \
                    ACC_T *Sr = S + r * n;                                                \
                    for (p = s; p < t; p++)                                               \
                        Sr[rows[p]] = (ACC_T)(Sr[rows[p]] + 1);                           \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    }                                                                                     \
    for (i = a; i < b; i++)                                                               \
        S[i * n + i] = (ACC_T)(S[i * n + i] + ng);                                        \
}

RBCD_GRAM_PAIRS(rbcd_gram_pairs_i32, int32_t, int32_t)
RBCD_GRAM_PAIRS(rbcd_gram_pairs_u16, uint16_t, uint16_t)

/* pairs[q] = sum over the bins of grid g = grids[q] of c (c - 1) / 2 (c: the bin's rows):
 * the work of rbcd_gram_pairs_* for that grid. counts: n_head zeroed scratch entries,
 * left zeroed. */
#define RBCD_GRAM_GRID_PAIRS(NAME, LT)                                                    \
static int64_t NAME(const LT *L, Py_ssize_t n, int64_t g, int64_t off, int64_t *counts)   \
{                                                                                         \
    const LT *Lg = L + g * n;                                                             \
    int64_t pairs = 0;                                                                    \
    Py_ssize_t i;                                                                         \
    for (i = 0; i < n; i++)                                                               \
        pairs += counts[(int64_t)Lg[i] - off]++;                                          \
    for (i = 0; i < n; i++)                                                               \
        counts[(int64_t)Lg[i] - off] = 0;                                                 \
    return pairs;                                                                         \
}

RBCD_GRAM_GRID_PAIRS(rbcd_gram_grid_pairs_i32, int32_t)
RBCD_GRAM_GRID_PAIRS(rbcd_gram_grid_pairs_u16, uint16_t)

/* Rows of grid r of the primal Gram Z^T S Z / v2, lower triangle: for every row i,
 * A[L[r, i], L[q, i]] += s_i (1 without weights) for q <= r. Grid r's columns are
 * contiguous and follow those of grids 0 .. r-1, so L[q, i] <= L[r, i] and the rows
 * written belong to grid r alone: one thread per grid, no conflicts. A is D x D,
 * row-major, zeroed by the caller. */
static void rbcd_gram_primal_grid(const int32_t *L, Py_ssize_t n, Py_ssize_t r,
                                  const double *s, double *A, Py_ssize_t D)
{
    Py_ssize_t i, q;
    for (i = 0; i < n; i++) {
        const double w = (s != NULL) ? s[i] : 1.0;
        double *Arow = A + (Py_ssize_t)L[r * n + i] * D;
        for (q = 0; q <= r; q++)
            Arow[L[q * n + i]] += w;
    }
}

#endif
