/* Small inner loops of the coordinate descent kernels (rbcd/solvers/_cd.pyx), kept in C so
 * that they are always inlined into the per-coordinate step (a call per coordinate costs
 * as much as the work of a one-row column). Contracts: docs/internals.md. */
#ifndef RBCD_CD_KERNELS_H
#define RBCD_CD_KERNELS_H

#include <math.h>
#include <stdint.h>
#include "rbcd_mulhi.h"  /* randbelow: rbcd_mulhi64 */

#if defined(__GNUC__) || defined(__clang__)
#define RBCD_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define RBCD_ALWAYS_INLINE static inline
#endif

/* sum over k in [start, end) of s[ind[k]] dv[ind[k]] z[k], where s NULL means 1 and z NULL
   means 1 (a constant column value is applied by the caller). Each term is
   (s[i] dv[i]) z[k]. Summation order (the twin's coordinate_gradient follows it):
   - fewer than RBCD_CD_LANES_MIN entries: one running sum, in order;
   - otherwise four running sums a_q over the entries k = start + 4m + q of the first
     4 floor(n / 4), the remaining entries added to a_0 in order, then (a_0 + a_1) + (a_2 + a_3).
   Four independent chains hide the latency of the floating-point add, which a single chain
   is bound by; short columns (RB columns at a small kernel width hold one or two rows) keep
   the short loop inlined into the coordinate step, long ones pay one call. */
#define RBCD_CD_LANES_MIN 8

#define RBCD_DEFINE_GATHER_SUM(NAME, IDX)                                                    \
RBCD_ALWAYS_INLINE double NAME##_lanes(const double *dv, const double *s, const double *z,  \
                           const IDX *ind, int64_t start, int64_t end) {                    \
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;                                          \
    int64_t k, end4 = start + ((end - start) & ~(int64_t)3);                                \
    if (z == NULL && s == NULL) {                                                           \
        for (k = start; k < end4; k += 4) {                                                 \
            a0 += dv[ind[k]]; a1 += dv[ind[k + 1]];                                         \
            a2 += dv[ind[k + 2]]; a3 += dv[ind[k + 3]];                                     \
        }                                                                                   \
    } else if (z == NULL) {                                                                 \
        for (k = start; k < end4; k += 4) {                                                 \
            a0 += s[ind[k]] * dv[ind[k]]; a1 += s[ind[k + 1]] * dv[ind[k + 1]];             \
            a2 += s[ind[k + 2]] * dv[ind[k + 2]]; a3 += s[ind[k + 3]] * dv[ind[k + 3]];     \
        }                                                                                   \
    } else if (s == NULL) {                                                                 \
        for (k = start; k < end4; k += 4) {                                                 \
            a0 += dv[ind[k]] * z[k]; a1 += dv[ind[k + 1]] * z[k + 1];                       \
            a2 += dv[ind[k + 2]] * z[k + 2]; a3 += dv[ind[k + 3]] * z[k + 3];               \
        }                                                                                   \
    } else {                                                                                \
        for (k = start; k < end4; k += 4) {                                                 \
            a0 += s[ind[k]] * dv[ind[k]] * z[k];                                            \
            a1 += s[ind[k + 1]] * dv[ind[k + 1]] * z[k + 1];                                \
            a2 += s[ind[k + 2]] * dv[ind[k + 2]] * z[k + 2];                                \
            a3 += s[ind[k + 3]] * dv[ind[k + 3]] * z[k + 3];                                \
        }                                                                                   \
    }                                                                                       \
    for (k = end4; k < end; k++) {                                                          \
        double v = dv[ind[k]];                                                              \
        if (s != NULL) v = s[ind[k]] * v;                                                   \
        if (z != NULL) v = v * z[k];                                                        \
        a0 += v;                                                                            \
    }                                                                                       \
    return (a0 + a1) + (a2 + a3);                                                           \
}                                                                                           \
RBCD_ALWAYS_INLINE double NAME(const double *dv, const double *s, const double *z,          \
                               const IDX *ind, int64_t start, int64_t end) {                \
    double acc = 0.0;                                                                       \
    int64_t k;                                                                              \
    if (end - start >= RBCD_CD_LANES_MIN) return NAME##_lanes(dv, s, z, ind, start, end);   \
    for (k = start; k < end; k++) {                                                         \
        double v = dv[ind[k]];                                                              \
        if (s != NULL) v = s[ind[k]] * v;                                                   \
        if (z != NULL) v = v * z[k];                                                        \
        acc += v;                                                                           \
    }                                                                                       \
    return acc;                                                                             \
}

RBCD_DEFINE_GATHER_SUM(rbcd_cd_gather_sum_i32, int32_t)
RBCD_DEFINE_GATHER_SUM(rbcd_cd_gather_sum_i64, int64_t)

/* u[ind[k]] += dz (z NULL) or u[ind[k]] += delta z[k], k = end - 1 down to start: the adds
   of a column step. A column's rows are distinct (the solvers' columns are canonical CSC:
   sorted, no duplicates; RB columns hold one entry per row and grid), so the adds commute
   and each row gets exactly one add, whatever the grouping: every result bit is that of the
   plain loop u[ind[k]] += dz.
   The adds go in groups of RBCD_CD_ADD_GROUP: the group's loads first, then its stores.
   In the plain loop each load follows the previous row's store, and the loads of a random
   column's rows (a cache miss each when the rows span more lines than L1 holds) wait
   behind those stores; grouped, the group's misses overlap. Random selection, squared loss,
   N = 1e5, d = 8, R = 32, sigma = 1, 2-vCPU AMD EPYC (Zen 1): the adds of an epoch take
   about half the time (benchmarks/compare_cd.py for the epoch). 16 loads fit in the
   16 vector registers; 32 spill to the stack and lose the gain.
   Backwards: from the rows the gradient's gather (forwards) touched last, which are still
   in cache when the column's rows span more lines than the cache holds. */
#define RBCD_CD_ADD_GROUP 16

/* the group's loops must be unrolled, RBCD_CD_ADD_GROUP times, for t to live in registers */
#define RBCD_PRAGMA(text) _Pragma(#text)
#define RBCD_GCC_UNROLL(n) RBCD_PRAGMA(GCC unroll n)
#if defined(__clang__)
#define RBCD_UNROLL_GROUP _Pragma("unroll")
#elif defined(__GNUC__)
#define RBCD_UNROLL_GROUP RBCD_GCC_UNROLL(RBCD_CD_ADD_GROUP)
#else
#define RBCD_UNROLL_GROUP
#endif

#define RBCD_DEFINE_COLUMN_ADD(NAME, IDX)                                                    \
RBCD_ALWAYS_INLINE void NAME(double *u, const IDX *ind, const double *z, int64_t start,     \
                             int64_t end, double dz, double delta) {                        \
    double t[RBCD_CD_ADD_GROUP];                                                            \
    int64_t k = end, c;                                                                     \
    if (z == NULL) {                                                                        \
        while (k - start >= RBCD_CD_ADD_GROUP) {                                            \
            k -= RBCD_CD_ADD_GROUP;                                                         \
            RBCD_UNROLL_GROUP                                                               \
            for (c = RBCD_CD_ADD_GROUP - 1; c >= 0; c--) t[c] = u[ind[k + c]] + dz;         \
            RBCD_UNROLL_GROUP                                                               \
            for (c = RBCD_CD_ADD_GROUP - 1; c >= 0; c--) u[ind[k + c]] = t[c];              \
        }                                                                                   \
        for (k = k - 1; k >= start; k--) u[ind[k]] += dz;                                   \
    } else {                                                                                \
        while (k - start >= RBCD_CD_ADD_GROUP) {                                            \
            k -= RBCD_CD_ADD_GROUP;                                                         \
            RBCD_UNROLL_GROUP                                                               \
            for (c = RBCD_CD_ADD_GROUP - 1; c >= 0; c--)                                    \
                t[c] = u[ind[k + c]] + delta * z[k + c];                                    \
            RBCD_UNROLL_GROUP                                                               \
            for (c = RBCD_CD_ADD_GROUP - 1; c >= 0; c--) u[ind[k + c]] = t[c];              \
        }                                                                                   \
        for (k = k - 1; k >= start; k--) u[ind[k]] += delta * z[k];                         \
    }                                                                                       \
}

RBCD_DEFINE_COLUMN_ADD(rbcd_cd_column_add_i32, int32_t)
RBCD_DEFINE_COLUMN_ADD(rbcd_cd_column_add_i64, int64_t)

/* The logistic loss's state of one row, y = +-1 (docs/internals.md, "Logistic state"):
   besides p the kernels keep E = exp(y p), and loss'(p, y) = -y / (1 + E). A move p += dz
   multiplies E by exp(y dz): with the two factors f[0] = exp(dz), f[1] = exp(-dz) of a
   column (or a grid bin) computed once, a row costs a multiply and a division instead of an
   exp (the factor is picked by index, not by a branch on the sign of y, which is as good
   as random). E is computed afresh from p when the product leaves [RBCD_EX_MIN, RBCD_EX_MAX]
   (it would overflow or underflow and then stick), and the caller recomputes every E from
   p once per epoch, so the products' rounding never accumulates over more than one epoch's
   moves of a row (R of them for random binning: a few ulps). Stores E and returns loss'. */
#define RBCD_EX_MIN 1e-250
#define RBCD_EX_MAX 1e250

RBCD_ALWAYS_INLINE double rbcd_logistic_move(double *ex, double p, double y, const double *f) {
    double e = *ex * f[y < 0];
    if (!(e > RBCD_EX_MIN && e < RBCD_EX_MAX)) e = exp(y * p);
    *ex = e;
    return -y / (1.0 + e);
}

#endif
