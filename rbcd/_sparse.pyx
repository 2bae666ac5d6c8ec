"""Parallel sparse products for the conjugate gradient solver (rbcd.ridge).

Kernels take typed buffers only; rbcd.ridge does the validation and the
format conversions (one CSR and one CSC copy per fit, see ``rbcd.ridge``).

Z^T U is computed as a row loop over the CSC copy of Z (the CSC arrays of Z are
the CSR arrays of Z^T), which is parallel over columns with no reduction.
``csr_t_matmat_buffers`` is the alternative without a transposed copy
(per-thread accumulation buffers of D x k, reduced afterwards); it is kept for
the benchmark in tests and asv, the CSC route was faster here (docs in
rbcd.ridge).

Every kernel has a fast path for matrices whose stored values all equal one
constant (random binning: 1/sqrt(R)): the data array is not read and the
constant is applied once per output row.
"""
from cython.parallel cimport prange, parallel
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport calloc, free

from rbcd._openmp cimport omp_thread_num


ctypedef fused index_t:
    int32_t
    int64_t

ctypedef fused value_t:
    float
    double


cdef inline void _row_times_dense(
    const index_t *indices,   # IN  column indices of the row's entries
    const value_t *data,      # IN  values of the row's entries (unused if use_const)
    Py_ssize_t start,
    Py_ssize_t stop,
    bint use_const,
    double const_value,
    const double *V,          # IN  dense (n_cols, k), C order
    Py_ssize_t k,
    double *out,              # OUT one output row, length k
) noexcept nogil:
    """out = Z[row] @ V, in blocks of 4 right-hand sides held in registers."""
    cdef Py_ssize_t p, kk = 0
    cdef const double *vrow
    cdef double v, a0, a1, a2, a3
    while kk + 4 <= k:
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        if use_const:
            # out[kk:kk+4] = const * V[indices[start:stop], kk:kk+4].sum(axis=0)
            for p in range(start, stop):
                vrow = V + <Py_ssize_t> indices[p] * k + kk
                a0 += vrow[0]
                a1 += vrow[1]
                a2 += vrow[2]
                a3 += vrow[3]
            a0 *= const_value
            a1 *= const_value
            a2 *= const_value
            a3 *= const_value
        else:
            # out[kk:kk+4] = data[start:stop] @ V[indices[start:stop], kk:kk+4]
            for p in range(start, stop):
                vrow = V + <Py_ssize_t> indices[p] * k + kk
                v = data[p]
                a0 += v * vrow[0]
                a1 += v * vrow[1]
                a2 += v * vrow[2]
                a3 += v * vrow[3]
        out[kk] = a0
        out[kk + 1] = a1
        out[kk + 2] = a2
        out[kk + 3] = a3
        kk += 4
    while kk < k:
        a0 = 0.0
        if use_const:
            # out[kk] = const * V[indices[start:stop], kk].sum()
            for p in range(start, stop):
                a0 += V[<Py_ssize_t> indices[p] * k + kk]
            a0 *= const_value
        else:
            # out[kk] = data[start:stop] @ V[indices[start:stop], kk]
            for p in range(start, stop):
                a0 += data[p] * V[<Py_ssize_t> indices[p] * k + kk]
        out[kk] = a0
        kk += 1


def csr_matmat(
    const index_t[::1] indptr,    # IN  (n_rows + 1,)
    const index_t[::1] indices,   # IN  (nnz,)
    const value_t[::1] data,      # IN  (nnz,) or any length when use_const
    bint use_const,
    double const_value,
    const double[:, ::1] V,       # IN  (n_cols, k)
    double[:, ::1] out,           # OUT (n_rows, k)
    int n_threads,
):
    """out = Z @ V for Z in CSR form, parallel over the rows of Z.

    Passing the CSC arrays of Z (its indptr, row indices, data) computes
    Z^T @ V instead. Rows are scheduled "guided" because CSC columns of a
    random binning matrix (bin counts) have very uneven lengths.
    """
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1
    cdef Py_ssize_t k = V.shape[1]
    cdef Py_ssize_t i
    cdef const value_t *dptr = NULL
    if out.shape[0] != n_rows or out.shape[1] != k:
        raise ValueError(f"out has shape {out.shape[0], out.shape[1]}, expected {n_rows, k}")
    if not use_const and data.shape[0] < indices.shape[0]:
        raise ValueError("data is shorter than indices")
    if n_rows == 0 or k == 0:
        return
    if indices.shape[0] > 0 and V.shape[0] == 0:
        raise ValueError("V has no rows but the matrix has stored entries")
    if data.shape[0] > 0:
        dptr = &data[0]
    cdef const index_t *iptr = &indices[0] if indices.shape[0] > 0 else NULL
    cdef const double *vptr = &V[0, 0] if V.shape[0] > 0 else NULL
    cdef double *optr = &out[0, 0]
    with nogil:
        for i in prange(n_rows, schedule="guided", num_threads=n_threads):
            # out[i] = Z[i] @ V
            _row_times_dense(iptr, dptr, indptr[i], indptr[i + 1], use_const,
                             const_value, vptr, k, optr + i * k)


def csr_t_matmat_buffers(
    const index_t[::1] indptr,    # IN  (n_rows + 1,)
    const index_t[::1] indices,   # IN  (nnz,)
    const value_t[::1] data,      # IN  (nnz,) or any length when use_const
    bint use_const,
    double const_value,
    const double[:, ::1] U,       # IN  (n_rows, k)
    double[:, ::1] out,           # OUT (n_cols, k)
    int n_threads,
):
    """out = Z^T @ U from the CSR arrays of Z, without a transposed copy.

    Each thread scatters its share of rows into a private (n_cols, k) buffer;
    the buffers are then summed, in parallel over the entries of out.
    Memory: n_threads * n_cols * k doubles.
    """
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1
    cdef Py_ssize_t n_cols = out.shape[0]
    cdef Py_ssize_t k = U.shape[1]
    cdef Py_ssize_t size = n_cols * k
    cdef Py_ssize_t i, p, kk, e, t
    cdef int tid
    cdef double v, acc
    cdef double *buf
    cdef double *dst
    cdef const double *urow
    if U.shape[0] != n_rows or out.shape[1] != k:
        raise ValueError("U or out has the wrong shape")
    if not use_const and data.shape[0] < indices.shape[0]:
        raise ValueError("data is shorter than indices")
    if size == 0:
        return
    if n_threads < 1:
        n_threads = 1
    buf = <double *> calloc(<size_t> (n_threads * size), sizeof(double))
    if buf == NULL:
        raise MemoryError("cannot allocate the per-thread buffers of csr_t_matmat_buffers")
    tid = 0
    try:
        with nogil, parallel(num_threads=n_threads):
            tid = omp_thread_num()
            for i in prange(n_rows, schedule="static"):
                # buf[tid][indices[p]] += data[p] * U[i] for the entries p of row i
                urow = &U[i, 0]
                for p in range(indptr[i], indptr[i + 1]):
                    dst = buf + tid * size + <Py_ssize_t> indices[p] * k
                    v = const_value if use_const else data[p]
                    for kk in range(k):
                        dst[kk] += v * urow[kk]
        with nogil:
            for e in prange(size, schedule="static", num_threads=n_threads):
                # out.flat[e] = buf[:, e].sum()
                acc = 0.0
                for t in range(n_threads):
                    acc = acc + buf[t * size + e]
                (&out[0, 0])[e] = acc
    finally:
        free(buf)


def csc_weighted_col_stats(
    const index_t[::1] indptr,    # IN  (n_cols + 1,) CSC
    const index_t[::1] indices,   # IN  (nnz,) row indices
    const value_t[::1] data,      # IN  (nnz,) or any length when use_const
    bint use_const,
    double const_value,
    const double[::1] s,          # IN  (n_rows,) sample weights
    double[::1] colsum,           # OUT (n_cols,) sum_i s_i z_ij
    double[::1] colsq,            # OUT (n_cols,) sum_i s_i z_ij^2
    int n_threads,
):
    """Weighted column sums and sums of squares, O(nnz), parallel over columns."""
    cdef Py_ssize_t n_cols = indptr.shape[0] - 1
    cdef Py_ssize_t j, p
    cdef double a, b, v, w
    if colsum.shape[0] != n_cols or colsq.shape[0] != n_cols:
        raise ValueError("colsum or colsq has the wrong length")
    if not use_const and data.shape[0] < indices.shape[0]:
        raise ValueError("data is shorter than indices")
    with nogil:
        for j in prange(n_cols, schedule="guided", num_threads=n_threads):
            # colsum[j] = s[rows] @ z[:, j]; colsq[j] = s[rows] @ z[:, j]**2
            a = 0.0
            b = 0.0
            if use_const:
                for p in range(indptr[j], indptr[j + 1]):
                    a = a + s[indices[p]]
                colsum[j] = a * const_value
                colsq[j] = a * const_value * const_value
            else:
                for p in range(indptr[j], indptr[j + 1]):
                    v = data[p]
                    w = s[indices[p]] * v
                    a = a + w
                    b = b + w * v
                colsum[j] = a
                colsq[j] = b

