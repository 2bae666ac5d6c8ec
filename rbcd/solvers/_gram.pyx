"""Gram matrix kernels of the direct ridge solves (rbcd.solvers._direct).

The C is in rbcd/src/direct_gram.h (its header comment states the contracts); these
wrappers take validated, contiguous arrays from rbcd.solvers._direct and split the work
over threads. Every entry is computed by one thread in a fixed order, so the results do
not depend on the thread count.
"""
from cython.parallel cimport prange
from libc.stdint cimport int32_t, uint16_t

import numpy as np

from rbcd._openmp cimport omp_thread_num


cdef extern from "direct_gram.h" nogil:
    void rbcd_gram_dual_rows_i32(const int32_t *L, Py_ssize_t n, Py_ssize_t R,
                                 Py_ssize_t i0, Py_ssize_t nb, double v2,
                                 const double *m, double c, const double *sw,
                                 double *K, int32_t *acc) noexcept
    void rbcd_gram_dual_rows_u16(const uint16_t *L, Py_ssize_t n, Py_ssize_t R,
                                 Py_ssize_t i0, Py_ssize_t nb, double v2,
                                 const double *m, double c, const double *sw,
                                 double *K, uint16_t *acc) noexcept
    void rbcd_gram_primal_grid(const int32_t *L, Py_ssize_t n, Py_ssize_t r,
                               const double *s, double *A, Py_ssize_t D) noexcept


ctypedef fused label_t:
    int32_t
    uint16_t


def gram_dual(const label_t[:, ::1] labels, double v2, m, double c, sw,
              double[:, ::1] K, int n_threads):
    """Lower triangle (j <= i) of K = diag(sw) (v2 C - m 1^T - 1 m^T + c) diag(sw), C the
    label-match counts of direct_gram.h. ``labels``: (R, n), int32 global columns per
    grid, or uint16 columns numbered within each grid (every grid at most 65,536 columns,
    R < 65,536: counts in uint16);
    ``m``, ``sw``: (n,) float64 or None. The upper triangle is not written."""
    cdef Py_ssize_t R = labels.shape[0], n = labels.shape[1]
    cdef Py_ssize_t n_blocks = (n + 3) // 4, b, i0, nb
    cdef const double[::1] mv
    cdef const double[::1] swv
    cdef const double *mp = NULL
    cdef const double *swp = NULL
    if K.shape[0] != n or K.shape[1] != n:
        raise ValueError("K must be (n, n)")
    if m is not None:
        mv = m
        if mv.shape[0] != n:
            raise ValueError("m must have n entries")
        mp = &mv[0] if n > 0 else NULL
    if sw is not None:
        swv = sw
        if swv.shape[0] != n:
            raise ValueError("sw must have n entries")
        swp = &swv[0] if n > 0 else NULL
    if n == 0:
        return
    n_threads = max(1, n_threads)
    if R == 0:
        raise ValueError("labels must hold at least one grid")
    if label_t is uint16_t and R >= 65536:
        raise ValueError("uint16 labels count in uint16: at most 65,535 grids")
    cdef label_t[:, ::1] acc = np.empty(
        (n_threads, 4 * n), dtype=np.int32 if label_t is int32_t else np.uint16)
    cdef const label_t *lp = &labels[0, 0]
    # blocks from the last (the longest rows of the triangle) first, one at a time
    for b in prange(n_blocks, nogil=True, num_threads=n_threads, schedule="dynamic", chunksize=1):
        i0 = 4 * (n_blocks - 1 - b)
        nb = n - i0
        if nb > 4:
            nb = 4
        if label_t is int32_t:
            rbcd_gram_dual_rows_i32(lp, n, R, i0, nb, v2, mp, c, swp, &K[0, 0],
                                    &acc[omp_thread_num(), 0])
        else:
            rbcd_gram_dual_rows_u16(lp, n, R, i0, nb, v2, mp, c, swp, &K[0, 0],
                                    &acc[omp_thread_num(), 0])


def gram_primal(const int32_t[:, ::1] labels, s, double[:, ::1] A, int n_threads):
    """A[a, b] += sum_i s_i over the rows i holding columns a and b (b <= a: the lower
    triangle), ``labels`` (R, n) the global columns per grid (grids in column order),
    ``s`` (n,) float64 or None (unit weights). A (D, D) must be zero on entry."""
    cdef Py_ssize_t R = labels.shape[0], n = labels.shape[1], D = A.shape[0], r
    cdef const double[::1] sv
    cdef const double *sp = NULL
    if A.shape[1] != D:
        raise ValueError("A must be square")
    if s is not None:
        sv = s
        if sv.shape[0] != n:
            raise ValueError("s must have n entries")
        sp = &sv[0] if n > 0 else NULL
    if n == 0 or R == 0 or D == 0:
        return
    n_threads = max(1, n_threads)
    for r in prange(R, nogil=True, num_threads=n_threads, schedule="dynamic", chunksize=1):
        rbcd_gram_primal_grid(&labels[0, 0], n, R - 1 - r, sp, &A[0, 0], D)
