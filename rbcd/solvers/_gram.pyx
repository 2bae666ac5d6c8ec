"""Gram matrix and factorization kernels of the direct ridge solves (rbcd.solvers._direct).

The C of the Gram kernels is in rbcd/src/direct_gram.h (its header comment states the
contracts); these wrappers take validated, contiguous arrays from rbcd.solvers._direct and
split the work over threads. Every entry is computed by one thread in a fixed order, so
the results do not depend on the thread count. The factorizations (:func:`factor_solves`)
are LAPACK's, the very routines of scipy.linalg.lapack (scipy.linalg.cython_lapack), one
system per thread, each on one BLAS thread: the same bits whatever the thread count.
"""
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t, uint16_t
from libc.string cimport memcpy
from scipy.linalg.cython_lapack cimport dpotrf, dpotrs

import numpy as np

from rbcd._openmp cimport omp_thread_num


cdef extern from "direct_gram.h" nogil:
    enum: RBCD_GRAM_ROWS
    void rbcd_gram_dual_rows_i32(const int32_t *L, Py_ssize_t n, const int64_t *grids,
                                 Py_ssize_t R, Py_ssize_t i0, Py_ssize_t nb, double v2,
                                 const double *m, double c, const double *sw,
                                 const int32_t *S, double *K, int32_t *acc) noexcept
    void rbcd_gram_dual_rows_u16(const uint16_t *L, Py_ssize_t n, const int64_t *grids,
                                 Py_ssize_t R, Py_ssize_t i0, Py_ssize_t nb, double v2,
                                 const double *m, double c, const double *sw,
                                 const uint16_t *S, double *K, uint16_t *acc) noexcept
    void rbcd_gram_pairs_i32(const int32_t *L, Py_ssize_t n, const int64_t *grids,
                             Py_ssize_t ng, const int64_t *base, Py_ssize_t a, Py_ssize_t b,
                             int32_t *S, int64_t *pos, int64_t *rows) noexcept
    void rbcd_gram_pairs_u16(const uint16_t *L, Py_ssize_t n, const int64_t *grids,
                             Py_ssize_t ng, const int64_t *base, Py_ssize_t a, Py_ssize_t b,
                             uint16_t *S, int64_t *pos, int64_t *rows) noexcept
    int64_t rbcd_gram_grid_pairs_i32(const int32_t *L, Py_ssize_t n, int64_t g, int64_t off,
                                     int64_t *counts) noexcept
    int64_t rbcd_gram_grid_pairs_u16(const uint16_t *L, Py_ssize_t n, int64_t g, int64_t off,
                                     int64_t *counts) noexcept
    void rbcd_gram_primal_grid(const int32_t *L, Py_ssize_t n, Py_ssize_t r,
                               const double *s, double *A, Py_ssize_t D) noexcept


ctypedef fused label_t:
    int32_t
    uint16_t


cdef const double *_vector_or_null(v, Py_ssize_t n, str name) except? NULL:
    """The data of ``v``, an optional (n,) C-contiguous float64 array (NULL for None or
    n == 0); the caller keeps ``v`` alive while it uses the pointer."""
    cdef const double[::1] view
    if v is None:
        return NULL
    view = v
    if view.shape[0] != n:
        raise ValueError(f"{name} must have {n} entries")
    return &view[0] if n > 0 else NULL


def _check_grid_indices(grids, Py_ssize_t R):
    """ValueError unless every entry of ``grids`` is a grid index 0 .. R - 1."""
    g = np.asarray(grids)
    if g.shape[0] and (g.min() < 0 or g.max() >= R):
        raise ValueError("grids out of range")


def gram_dual(const label_t[:, ::1] labels, double v2, m, double c, sw,
              double[:, ::1] K, int n_threads, S=None, grids=None):
    """Lower triangle (j <= i) of K = diag(sw) (v2 C - m 1^T - 1 m^T + c) diag(sw), C the
    label-match counts of direct_gram.h. ``labels``: (R, n), int32 global columns per
    grid, or uint16 columns numbered within each grid (every grid at most 65,536 columns,
    R < 65,536: counts in uint16);
    ``m``, ``sw``: (n,) float64 or None. ``grids``: None (every grid of ``labels``) or the
    int64 indices of the grids whose labels are compared. ``S``: None, or (n, n) counts of
    the other grids (:func:`gram_pairs`; int32 with int32 labels, uint16 with uint16 ones)
    added to C; then no grid need be compared. The upper triangle is not written."""
    cdef Py_ssize_t R = labels.shape[0], n = labels.shape[1]
    cdef const int64_t[::1] gv
    cdef const int64_t *gptr = NULL
    if grids is not None:
        gv = grids
        _check_grid_indices(grids, R)
        gptr = &gv[0] if gv.shape[0] else NULL
        R = gv.shape[0]
    cdef Py_ssize_t rows = RBCD_GRAM_ROWS
    cdef Py_ssize_t n_blocks = (n + rows - 1) // rows, b, i0, nb
    cdef const label_t[:, ::1] Sv
    cdef const label_t *sp = NULL
    if K.shape[0] != n or K.shape[1] != n:
        raise ValueError("K must be (n, n)")
    if S is not None:
        Sv = S
        if Sv.shape[0] != n or Sv.shape[1] != n:
            raise ValueError("S must be (n, n)")
        sp = &Sv[0, 0] if n > 0 else NULL
    cdef const double *mp = _vector_or_null(m, n, "m")
    cdef const double *swp = _vector_or_null(sw, n, "sw")
    if n == 0:
        return
    n_threads = max(1, n_threads)
    if R == 0 and S is None:
        raise ValueError("labels must hold at least one grid")
    if label_t is uint16_t and labels.shape[0] >= 65536:
        raise ValueError("uint16 labels count in uint16: at most 65,535 grids")
    cdef label_t[:, ::1] acc = np.empty(
        (n_threads, rows * n), dtype=np.int32 if label_t is int32_t else np.uint16)
    cdef const label_t *lp = &labels[0, 0] if labels.shape[0] > 0 else NULL
    # blocks of `rows` rows, the first block holding the remainder (1 .. rows rows: its
    # rows are the shortest of the triangle, where the kernel's partial path costs least),
    # from the last (the longest rows) first, one at a time
    cdef Py_ssize_t first = n - rows * (n_blocks - 1)
    for b in prange(n_blocks, nogil=True, num_threads=n_threads, schedule="dynamic", chunksize=1):
        if b == n_blocks - 1:
            i0 = 0
            nb = first
        else:
            i0 = first + rows * (n_blocks - 2 - b)
            nb = rows
        if label_t is int32_t:
            rbcd_gram_dual_rows_i32(lp, n, gptr, R, i0, nb, v2, mp, c, swp, sp, &K[0, 0],
                                    &acc[omp_thread_num(), 0])
        else:
            rbcd_gram_dual_rows_u16(lp, n, gptr, R, i0, nb, v2, mp, c, swp, sp, &K[0, 0],
                                    &acc[omp_thread_num(), 0])


def grid_pairs(const label_t[:, ::1] labels, const int64_t[::1] base, int64_t n_head,
               int n_threads):
    """(R,) int64: for each grid g, the pairs of rows that share a bin, sum over its bins
    of c (c - 1) / 2 (the work of :func:`gram_pairs` for it). ``base``: (R,) the first
    column of each grid (0 for labels numbered within each grid); every label minus its
    grid's base is below ``n_head``."""
    cdef Py_ssize_t R = labels.shape[0], n = labels.shape[1], g
    if base.shape[0] != R:
        raise ValueError("base must have one entry per grid")
    out = np.zeros(R, dtype=np.int64)
    if R == 0 or n == 0:
        return out
    n_threads = max(1, min(n_threads, R))
    cdef int64_t[::1] o = out
    cdef int64_t[:, ::1] counts = np.zeros((n_threads, max(n_head, 1)), dtype=np.int64)
    cdef const label_t *lp = &labels[0, 0]
    for g in prange(R, nogil=True, num_threads=n_threads, schedule="static"):
        if label_t is int32_t:
            o[g] = rbcd_gram_grid_pairs_i32(lp, n, g, base[g], &counts[omp_thread_num(), 0])
        else:
            o[g] = rbcd_gram_grid_pairs_u16(lp, n, g, base[g], &counts[omp_thread_num(), 0])
    return out


def gram_pairs(const label_t[:, ::1] labels, const int64_t[::1] grids,
               const int64_t[::1] base, label_t[:, ::1] S, int64_t n_head, int n_threads):
    """S[i, j] += #{g in grids : labels[g, i] == labels[g, j]} for j < i, and len(grids) on
    the diagonal (direct_gram.h, rbcd_gram_pairs_*): the dual counts of those grids pair
    by pair. ``base``: (R,) the first column of each grid (0 for labels numbered within
    each grid), every label minus its base below ``n_head``. The threads take row ranges
    of about equal triangle area; each entry is counted by one thread."""
    cdef Py_ssize_t R = labels.shape[0], n = labels.shape[1], ng = grids.shape[0], t
    if S.shape[0] != n or S.shape[1] != n:
        raise ValueError("S must be (n, n)")
    if base.shape[0] != R:
        raise ValueError("base must have one entry per grid")
    if ng == 0 or n == 0:
        return
    _check_grid_indices(grids, R)
    n_threads = max(1, min(n_threads, n))
    # row range t: [n sqrt(t / T), n sqrt((t + 1) / T)), about the same pairs j < i each
    bounds_np = np.rint(n * np.sqrt(np.arange(n_threads + 1) / n_threads)).astype(np.int64)
    cdef int64_t[::1] bounds = bounds_np
    cdef int64_t[:, ::1] pos = np.empty((n_threads, max(n_head, 1)), dtype=np.int64)
    cdef int64_t[:, ::1] rows = np.empty((n_threads, n), dtype=np.int64)
    cdef const label_t *lp = &labels[0, 0]
    for t in prange(n_threads, nogil=True, num_threads=n_threads, schedule="static", chunksize=1):
        if label_t is int32_t:
            rbcd_gram_pairs_i32(lp, n, &grids[0], ng, &base[0], bounds[t], bounds[t + 1],
                                &S[0, 0], &pos[t, 0], &rows[t, 0])
        else:
            rbcd_gram_pairs_u16(lp, n, &grids[0], ng, &base[0], bounds[t], bounds[t + 1],
                                &S[0, 0], &pos[t, 0], &rows[t, 0])


def block_row_sums(const double[:, ::1] P, const int64_t[::1] rows, const double[::1] w,
                   int n_threads):
    """out[a] = sum_b w[b] P[rows[a], rows[b]], b in order (a fold's block of a symmetric
    Gram matrix P times its weights, without gathering the block); rows in range."""
    cdef Py_ssize_t m = rows.shape[0], a, b
    cdef double acc
    cdef const double *Pr
    if w.shape[0] != m:
        raise ValueError("w must have one entry per row")
    out = np.empty(m)
    cdef double[::1] o = out
    if m == 0:
        return out
    if np.min(rows) < 0 or np.max(rows) >= P.shape[0] or P.shape[0] != P.shape[1]:
        raise ValueError("rows out of range of a square P")
    for a in prange(m, nogil=True, num_threads=max(1, n_threads), schedule="static"):
        Pr = &P[rows[a], 0]
        acc = 0.0
        for b in range(m):
            acc = acc + w[b] * Pr[rows[b]]
        o[a] = acc
    return out


def centred_block(const double[:, ::1] P, const int64_t[::1] rows, kbar, double kk,
                  const double[::1] sw, double[:, ::1] K, int n_threads):
    """The lower triangle (b <= a, C order) of a fold's dual system from the rows' Gram
    matrix P: K[a, b] = ((((P[t_a, t_b] - kbar_b) - kbar_a) + kk) * sw_a) * sw_b with
    t = rows (centred by the fold's weighted mean: kbar = P_tt w / S, kk = w.kbar / S),
    or (P[t_a, t_b] * sw_a) * sw_b where kbar is None: one pass, no gathered copy of the
    block. The upper triangle is not written."""
    cdef Py_ssize_t m = rows.shape[0], a, b
    cdef const double *kp
    cdef const double *Pr
    cdef double *Ka
    cdef double v, ka, sa
    if K.shape[0] != m or K.shape[1] != m or sw.shape[0] != m:
        raise ValueError("K must be (m, m) and sw (m,) for m rows")
    kp = _vector_or_null(kbar, m, "kbar")
    if m == 0:
        return
    if np.min(rows) < 0 or np.max(rows) >= P.shape[0] or P.shape[0] != P.shape[1]:
        raise ValueError("rows out of range of a square P")
    for a in prange(m, nogil=True, num_threads=max(1, n_threads), schedule="dynamic",
                    chunksize=16):
        Pr = &P[rows[a], 0]
        Ka = &K[a, 0]
        sa = sw[a]
        if kp != NULL:
            ka = kp[a]
            for b in range(a + 1):
                v = Pr[rows[b]] - kp[b]
                v = v - ka
                v = v + kk
                Ka[b] = (v * sa) * sw[b]
        else:
            for b in range(a + 1):
                Ka[b] = (Pr[rows[b]] * sa) * sw[b]


def gram_primal(const int32_t[:, ::1] labels, s, double[:, ::1] A, int n_threads):
    """A[a, b] += sum_i s_i over the rows i holding columns a and b (b <= a: the lower
    triangle), ``labels`` (R, n) the global columns per grid (grids in column order),
    ``s`` (n,) float64 or None (unit weights). A (D, D) must be zero on entry."""
    cdef Py_ssize_t R = labels.shape[0], n = labels.shape[1], D = A.shape[0], r
    if A.shape[1] != D:
        raise ValueError("A must be square")
    cdef const double *sp = _vector_or_null(s, n, "s")
    if n == 0 or R == 0 or D == 0:
        return
    n_threads = max(1, n_threads)
    for r in prange(R, nogil=True, num_threads=n_threads, schedule="dynamic", chunksize=1):
        rbcd_gram_primal_grid(&labels[0, 0], n, R - 1 - r, sp, &A[0, 0], D)


def factor_solves(const double[:, ::1] G, double[:, :, ::1] rhs, const double[::1] alphas,
                  const int[::1] widths, double[:, :, ::1] work, int n_threads):
    """Solve (G + alphas[a] I) X_a = B_a for every a by Cholesky (LAPACK dpotrf, dpotrs), the
    systems split over ``n_threads`` threads, one system per thread at a time. The caller
    limits BLAS to one thread (each system must take the bits of a serial call).

    G : (m, m) symmetric, given by its lower triangle in C order (the upper triangle of
        its Fortran view, which LAPACK reads); not modified unless ``work`` is G itself.
    rhs : (n_a, k, m); the first widths[a] <= k rows of rhs[a] (C order) are B_a as an
        m x widths[a] Fortran matrix, overwritten by X_a where the factorization
        succeeds, left as they were where it fails.
    work : (T, m, m), T >= n_threads: thread t factors in work[t] (G copied in first, its
        diagonal shifted by alpha). work may be G itself (shape (1, m, m), one system,
        one thread): G is then factored in place, without a copy.
    Returns info (n_a,) int32: 0 solved, > 0 where G + alphas[a] I is not numerically
    positive definite (dpotrf's info; the caller solves those some other way)."""
    cdef Py_ssize_t m = G.shape[0], n_a = alphas.shape[0], k = rhs.shape[1], a, i
    cdef int[::1] info = np.zeros(n_a, dtype=np.intc)
    cdef int mi = <int> m, t, nrhs
    cdef char uplo = b'U'
    cdef double *w
    if G.shape[1] != m:
        raise ValueError("G must be square")
    if rhs.shape[0] != n_a or rhs.shape[2] != m or widths.shape[0] != n_a:
        raise ValueError("rhs must be (len(alphas), k, m) and widths (len(alphas),)")
    for a in range(n_a):
        if widths[a] < 0 or widths[a] > k:
            raise ValueError("widths must lie in [0, k]")
    n_threads = max(1, min(n_threads, n_a))
    if work.shape[0] < n_threads or work.shape[1] != m or work.shape[2] != m:
        raise ValueError("work must be (T, m, m) with T >= n_threads")
    if m >= 2 ** 31 or k >= 2 ** 31:
        raise ValueError("LAPACK's 32-bit sizes: m and k must be below 2**31")
    if m == 0 or n_a == 0:
        return np.asarray(info)
    cdef bint in_place = <const double *> &work[0, 0, 0] == &G[0, 0]
    if in_place and n_a != 1:
        raise ValueError("G is factored in place for one system only")
    for a in prange(n_a, nogil=True, num_threads=n_threads, schedule="dynamic", chunksize=1):
        t = omp_thread_num()
        w = &work[t, 0, 0]
        if not in_place:
            memcpy(w, &G[0, 0], m * m * sizeof(double))
        for i in range(m):
            w[i * m + i] = w[i * m + i] + alphas[a]
        dpotrf(&uplo, &mi, w, &mi, &info[a])
        nrhs = widths[a]
        if info[a] == 0 and nrhs > 0:
            dpotrs(&uplo, &mi, &nrhs, w, &mi, &rhs[a, 0, 0], &mi, &info[a])
    return np.asarray(info)
