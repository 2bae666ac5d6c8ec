"""Parallel sparse products for the conjugate gradient solver (rbcd.solvers.cg).

Kernels take typed buffers only; rbcd.solvers.cg does the validation and the
format conversions (one CSR and one CSC copy per fit, see ``rbcd.solvers.cg``).

Z^T U is computed as a row loop over the CSC copy of Z (the CSC arrays of Z are
the CSR arrays of Z^T), which is parallel over columns with no reduction.
(The alternative without a transposed copy, per-thread D x k accumulation buffers
over the CSR arrays, needs n_threads * D * k scratch and a reduction.)

Every product kernel has a fast path for matrices whose stored values all equal
one constant (random binning: 1/sqrt(R)): the data array is not read and the
constant is applied once per output row.

The block CG's vector updates (cg_operator_tail, cg_step, cg_direction) are fused
here too, so one iteration makes a few passes over the (D, k) arrays instead of a
dozen numpy temporaries; their sums are taken per fixed block of rows and added in
block order, so results do not depend on the thread count.
"""
from cython.parallel cimport prange

import numpy as np
from libc.stdint cimport int32_t, int64_t, uint16_t, uintptr_t

# the grid-label layout (label_t: uint16 / int32 per grid) and its owner's notes
from rbcd.binning._grid cimport label_t



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


def all_equal(const value_t[::1] data, int n_threads):
    """True when every entry of data equals data[0] (False for NaN; True when empty): the
    solvers' test for one stored value (random binning's 1/sqrt(R)), without numpy's
    temporary boolean array of the data's length. T = n_threads blocks, each stopping at
    its first differing entry; the answer does not depend on T."""
    cdef Py_ssize_t n = data.shape[0], t, i, lo, hi
    cdef Py_ssize_t T = max(1, min(n_threads, n // 65536 + 1))
    if n == 0:
        return True
    cdef value_t first = data[0]
    flags_arr = np.ones(T, dtype=np.int8)
    cdef signed char[::1] flags = flags_arr
    with nogil:
        for t in prange(T, schedule="static", num_threads=T):
            lo = n * t // T
            hi = n * (t + 1) // T
            for i in range(lo, hi):
                if data[i] != first:
                    flags[t] = 0
                    break
    return bool(flags_arr.all())


def csr_to_csc(
    const index_t[::1] indptr,    # IN  (n_rows + 1,) CSR row pointers
    const index_t[::1] indices,   # IN  (nnz,) column indices, each in [0, n_cols)
    const value_t[::1] data,      # IN  (nnz,) values
    Py_ssize_t n_cols,
    int n_threads,
):
    """(indptr (n_cols + 1,) int64, indices (nnz,) of indices' dtype, data (nnz,) of data's
    dtype): the CSC arrays of the CSR matrix, the entries of each column in increasing row
    order: the arrays of scipy's ``tocsc``, for any thread count. The caller checks the
    structure (indices in range: a counting sort writes where they point) and picks the
    threads (rbcd.solvers._columns.to_csc).

    A counting sort over T = n_threads contiguous blocks of rows of about nnz / T entries:
    each block counts its entries per column (T x n_cols int64 of scratch), a serial pass
    over the columns turns the counts into each block's first position in each column
    (blocks in row order), and each block scatters its rows there. scipy's transpose is
    the same sort with one block.
    """
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1
    cdef Py_ssize_t nnz = indices.shape[0]
    if n_rows < 0:
        raise ValueError("indptr must hold at least one entry")
    if data.shape[0] != nnz or indptr[n_rows] != nnz:
        raise ValueError("indptr, indices and data do not describe one CSR matrix")
    idx_dtype = np.int32 if index_t is int32_t else np.int64
    if index_t is int32_t and n_rows > 2147483647:
        raise ValueError("row numbers do not fit int32 indices")
    out_ptr = np.zeros(n_cols + 1, dtype=np.int64)
    out_idx = np.empty(nnz, dtype=idx_dtype)
    out_val = np.empty(nnz, dtype=np.float32 if value_t is float else np.float64)
    if nnz == 0:
        return out_ptr, out_idx, out_val
    cdef Py_ssize_t T = max(1, min(n_threads, n_rows))
    # block t: rows bounds[t] .. bounds[t + 1] - 1, about nnz / T entries each
    bounds_arr = np.searchsorted(np.asarray(indptr), np.arange(T + 1, dtype=np.int64) * nnz // T,
                                 side="left").astype(np.int64)
    bounds_arr[0] = 0
    bounds_arr[T] = n_rows
    cdef int64_t[::1] bounds = bounds_arr
    counts_arr = np.zeros((T, n_cols), dtype=np.int64)
    cdef int64_t[:, ::1] counts = counts_arr
    cdef int64_t[::1] cptr = out_ptr
    cdef index_t[::1] cidx = out_idx
    cdef value_t[::1] cval = out_val
    cdef Py_ssize_t t, i, j, p, q
    cdef int64_t acc = 0, c
    with nogil:
        for t in prange(T, schedule="static", num_threads=T):
            for p in range(indptr[bounds[t]], indptr[bounds[t + 1]]):
                counts[t, indices[p]] += 1
        # each block's first position in each column: the columns in order, the blocks
        # (row ranges) in order within a column
        for j in range(n_cols):
            cptr[j] = acc
            for t in range(T):
                c = counts[t, j]
                counts[t, j] = acc
                acc = acc + c
        cptr[n_cols] = acc
        for t in prange(T, schedule="static", num_threads=T):
            for i in range(bounds[t], bounds[t + 1]):
                for p in range(indptr[i], indptr[i + 1]):
                    j = indices[p]
                    q = counts[t, j]
                    counts[t, j] = q + 1
                    cidx[q] = <index_t>i
                    cval[q] = data[p]
    return out_ptr, out_idx, out_val


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



# ---------------------------------------------------------------------------------------
# Products of a random binning matrix from its grid labels (rbcd.binning.random_binning.RBColumns /
# rbcd.solvers.cd's column structure): label[g][i] = the bin of row i in grid g (uint16 for
# grids under 65536 bins, else int32; the grid's bin count for a row without an entry),
# every stored value the same constant. The labels take 2 bytes per entry against the
# 4 of CSR / CSC indices, and each grid's slice of V (or of the output) is small enough
# to stay in cache. The sums run in the order of the CSR / CSC kernels above (grids in
# order within a row; rows in order within a column), so the results are bitwise the
# same, for any thread count.

cdef enum:
    _LABEL_ROWS = 16384   # rows per block of labels_matmat (twice as many at k = 1)
    _LABEL_GRIDS = 4     # grids per range (labels_matmat sums a range's grids in a register)
    _TMAT_ROWS = 2048    # rows of U per block of labels_tmatmat's sweep (in L1 for k = 1)
    _TMAT_CACHE = 262144  # bytes of the columns one range of grids holds (_grid_ranges)


cdef void _gather_rows(const label_t *lab, Py_ssize_t nb, const double *vg, Py_ssize_t i0,
                       Py_ssize_t i1, Py_ssize_t k, double *out) noexcept nogil:
    """out[i] += vg[lab[i]] for the rows i0..i1-1 (sentinel labels nb skipped)."""
    cdef Py_ssize_t i, l, kk
    for i in range(i0, i1):
        l = lab[i]
        if l < nb:
            for kk in range(k):
                out[i * k + kk] = out[i * k + kk] + vg[l * k + kk]


cdef inline bint _all_narrow(const unsigned char *wide, Py_ssize_t g0, Py_ssize_t g1) noexcept nogil:
    cdef Py_ssize_t g
    for g in range(g0, g1):
        if wide[g]:
            return False
    return True


cdef void _group_rows_k1(const uintptr_t *ptrs, const int64_t *grid_ptr, const double *V,
                         double *out, Py_ssize_t g0, Py_ssize_t g1, Py_ssize_t i0,
                         Py_ssize_t i1) noexcept nogil:
    """out[i] += sum over g in g0..g1-1 (in order) of V[grid_ptr[g] + label[g][i]]."""
    cdef const uint16_t *lab[_LABEL_GRIDS]
    cdef const double *vg[_LABEL_GRIDS]
    cdef Py_ssize_t nbs[_LABEL_GRIDS]
    cdef Py_ssize_t t, n = g1 - g0, i, l
    cdef double acc
    for t in range(n):
        lab[t] = <const uint16_t *> ptrs[g0 + t]
        vg[t] = V + grid_ptr[g0 + t]
        nbs[t] = grid_ptr[g0 + t + 1] - grid_ptr[g0 + t]
    for i in range(i0, i1):
        acc = out[i]
        for t in range(n):
            l = lab[t][i]
            if l < nbs[t]:
                acc = acc + vg[t][l]
        out[i] = acc


cdef Py_ssize_t _grid_ranges(const int64_t *grid_ptr, Py_ssize_t R, Py_ssize_t k,
                             int64_t *bounds) noexcept nogil:
    """Split the grids 0..R-1 into ranges of consecutive grids: at most _LABEL_GRIDS
    grids whose columns (k doubles each) take at most _TMAT_CACHE bytes together (a
    larger grid is a range alone). Range q is the grids bounds[q] .. bounds[q + 1] - 1;
    returns the number of ranges. A property of the grids and k, not of the thread
    count."""
    cdef Py_ssize_t g, n = 0
    cdef int64_t acc = 0, size
    bounds[0] = 0
    for g in range(R):
        size = (grid_ptr[g + 1] - grid_ptr[g]) * k * 8
        if acc > 0 and (acc + size > _TMAT_CACHE or g - bounds[n] == _LABEL_GRIDS):
            n += 1
            bounds[n] = g
            acc = 0
        acc += size
    n += 1
    bounds[n] = R
    return n


cdef void _matmat_rows(const uintptr_t *ptrs, const unsigned char *wide,
                       const int64_t *grid_ptr, const int64_t *bounds, Py_ssize_t n_ranges,
                       double const_value, const double *V, Py_ssize_t k, double *out,
                       Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    """The rows i0..i1-1 of out = Z @ V (the rows' labels of every grid): out zeroed, then
    for each range of grids (_grid_ranges: its columns of V fit the core's cache) the
    range's grids added in order, then scaled by const_value. Every row sums its grids in
    order, as the CSR kernel does."""
    cdef Py_ssize_t q, g, g0, g1, i
    for i in range(i0 * k, i1 * k):
        out[i] = 0.0
    for q in range(n_ranges):
        g0 = bounds[q]
        g1 = bounds[q + 1]
        if k == 1 and _all_narrow(wide, g0, g1):
            # one right-hand side, uint16 labels: the range's grids summed in a register,
            # in grid order (out[i] += V[grid_ptr[g] + label])
            _group_rows_k1(ptrs, grid_ptr, V, out, g0, g1, i0, i1)
        else:
            for g in range(g0, g1):
                # out[i] += V[grid_ptr[g] + label[g][i]] for the block's rows
                if wide[g]:
                    _gather_rows(<const int32_t *> ptrs[g], grid_ptr[g + 1] - grid_ptr[g],
                                 V + grid_ptr[g] * k, i0, i1, k, out)
                else:
                    _gather_rows(<const uint16_t *> ptrs[g], grid_ptr[g + 1] - grid_ptr[g],
                                 V + grid_ptr[g] * k, i0, i1, k, out)
    for i in range(i0 * k, i1 * k):
        out[i] = out[i] * const_value


def labels_matmat(const uintptr_t[::1] ptrs, const unsigned char[::1] wide,
                  const int64_t[::1] grid_ptr, double const_value,
                  const double[:, ::1] V, double[:, ::1] out, int n_threads):
    """out = Z @ V, V (D, k), out (n_rows, k); parallel over blocks of rows.

    A block of rows is gathered range of grids by range of grids (_grid_ranges, the
    ranges of labels_tmatmat): the range's columns of V (at most _TMAT_CACHE bytes) and
    the block's rows of out (2 _LABEL_ROWS rows at k = 1) are what the block's gathers
    touch, both in the core's cache, and every column of V is fetched once per block
    (larger blocks: fewer fetches of V). Each thread takes one contiguous run of blocks
    (static schedule): it writes, and so first touches, its own rows of out. The sums
    do not depend on the blocks, so the results do not depend on the thread count."""
    cdef Py_ssize_t R = grid_ptr.shape[0] - 1, n_rows = out.shape[0], k = V.shape[1]
    cdef Py_ssize_t rows_per, b, i0, i1, n_blocks, n_ranges
    if ptrs.shape[0] != R or wide.shape[0] != R or out.shape[1] != k:
        raise ValueError("labels, grid_ptr and the shapes of V and out do not match")
    if V.shape[0] != grid_ptr[R]:
        raise ValueError("V must have one row per column of Z")
    if n_rows == 0 or k == 0:
        return
    # rows per block: _LABEL_ROWS (k = 1: twice that, 256 KiB of out), or fewer so that
    # every thread gets a few blocks (the block only bounds cache use; not the sums)
    rows_per = (n_rows + 4 * max(1, n_threads) - 1) // (4 * max(1, n_threads))
    rows_per = min(2 * _LABEL_ROWS if k == 1 else _LABEL_ROWS,
                   max(1024, (rows_per + 1023) // 1024 * 1024))
    n_blocks = (n_rows + rows_per - 1) // rows_per
    cdef int64_t[::1] bounds = np.empty(R + 1, dtype=np.int64)
    n_ranges = _grid_ranges(&grid_ptr[0], R, k, &bounds[0]) if R > 0 else 0
    cdef double *optr = &out[0, 0]
    cdef const double *vptr = &V[0, 0] if V.shape[0] > 0 else NULL
    cdef const uintptr_t *pp = &ptrs[0] if R > 0 else NULL
    cdef const unsigned char *wp = &wide[0] if R > 0 else NULL
    cdef const int64_t *gp = &grid_ptr[0]
    cdef const int64_t *bp = &bounds[0]
    with nogil:
        if n_threads <= 1 or n_blocks == 1:
            for b in range(n_blocks):
                i0 = b * rows_per
                i1 = i0 + rows_per if i0 + rows_per < n_rows else n_rows
                _matmat_rows(pp, wp, gp, bp, n_ranges, const_value, vptr, k, optr, i0, i1)
        else:
            for b in prange(n_blocks, schedule="static", num_threads=n_threads):
                i0 = b * rows_per
                i1 = i0 + rows_per if i0 + rows_per < n_rows else n_rows
                _matmat_rows(pp, wp, gp, bp, n_ranges, const_value, vptr, k, optr, i0, i1)


cdef void _scatter_rows(const label_t *lab, Py_ssize_t nb, const double *U, Py_ssize_t i0,
                        Py_ssize_t i1, Py_ssize_t k, double *og) noexcept nogil:
    """og[lab[i]] += U[i] for i in i0..i1-1 in order (rows whose label is the sentinel nb
    skipped)."""
    cdef Py_ssize_t i, l, kk
    if k == 1:
        for i in range(i0, i1):
            l = lab[i]
            if l < nb:
                og[l] = og[l] + U[i]
        return
    for i in range(i0, i1):
        l = lab[i]
        if l < nb:
            for kk in range(k):
                og[l * k + kk] = og[l * k + kk] + U[i * k + kk]


cdef void _scatter_group_k1(const uintptr_t *ptrs, const int64_t *grid_ptr, const double *U,
                            double *out, Py_ssize_t g0, Py_ssize_t g1, Py_ssize_t i0,
                            Py_ssize_t i1) noexcept nogil:
    """out[grid_ptr[g] + label[g][i]] += U[i] for the rows i0..i1-1 in order, for the
    uint16 grids g0..g1-1 (at most _LABEL_GRIDS) interleaved: one row's adds go to
    different grids, so a run of rows in one bin of a grid (a chain of adds to one
    address) overlaps with the other grids' adds. Each column still sums its rows in
    increasing order."""
    cdef const uint16_t *lab[_LABEL_GRIDS]
    cdef double *og[_LABEL_GRIDS]
    cdef Py_ssize_t nbs[_LABEL_GRIDS]
    cdef Py_ssize_t t, n = g1 - g0, i, l
    cdef double u
    for t in range(n):
        lab[t] = <const uint16_t *> ptrs[g0 + t]
        og[t] = out + grid_ptr[g0 + t]
        nbs[t] = grid_ptr[g0 + t + 1] - grid_ptr[g0 + t]
    for i in range(i0, i1):
        u = U[i]
        for t in range(n):
            l = lab[t][i]
            if l < nbs[t]:
                og[t][l] = og[t][l] + u


cdef void _tmatmat_grids(const uintptr_t *ptrs, const unsigned char *wide,
                         const int64_t *grid_ptr, double const_value, const double *U,
                         Py_ssize_t n_rows, Py_ssize_t k, double *out, Py_ssize_t ga,
                         Py_ssize_t gb) noexcept nogil:
    """The columns of the grids ga..gb-1 of out = Z^T U: one sweep over the rows in blocks
    of _TMAT_ROWS, each block scattered into every grid of the range while it is in
    cache (U is read once per range, not once per grid); each column sums its rows in
    increasing order, as the CSC kernel does."""
    cdef Py_ssize_t g, g1, h, j, i0, i1
    cdef double *og
    for j in range(grid_ptr[ga] * k, grid_ptr[gb] * k):
        out[j] = 0.0
    i0 = 0
    while i0 < n_rows:
        i1 = i0 + _TMAT_ROWS if i0 + _TMAT_ROWS < n_rows else n_rows
        g = ga
        while g < gb:
            g1 = g + _LABEL_GRIDS if g + _LABEL_GRIDS < gb else gb
            if k == 1 and _all_narrow(wide, g, g1):
                _scatter_group_k1(ptrs, grid_ptr, U, out, g, g1, i0, i1)
            else:
                for h in range(g, g1):
                    og = out + grid_ptr[h] * k
                    if wide[h]:
                        _scatter_rows(<const int32_t *> ptrs[h], grid_ptr[h + 1] - grid_ptr[h],
                                      U, i0, i1, k, og)
                    else:
                        _scatter_rows(<const uint16_t *> ptrs[h], grid_ptr[h + 1] - grid_ptr[h],
                                      U, i0, i1, k, og)
            g = g1
        i0 = i1
    for j in range(grid_ptr[ga] * k, grid_ptr[gb] * k):
        out[j] = out[j] * const_value


def labels_tmatmat(const uintptr_t[::1] ptrs, const unsigned char[::1] wide,
                   const int64_t[::1] grid_ptr, double const_value,
                   const double[:, ::1] U, double[:, ::1] out, int n_threads):
    """out = Z^T @ U, U (n_rows, k), out (D, k); parallel over ranges of grids (a grid's
    columns are one thread's: no reduction, the same bits for any thread count).

    A range is a run of at most _LABEL_GRIDS consecutive grids whose columns of out
    take at most _TMAT_CACHE bytes together (a grid larger than that is a range alone),
    so that the scatters of a sweep hit the core's cache; each range is one sweep over
    U (_tmatmat_grids). Small grids share a sweep: U is read once per range instead of
    once per grid (at N = 10^6, R = 64, sigma = 1: 27 sweeps instead of 64), the
    traffic that limits the product when many threads share the memory bus. Ranges are
    claimed dynamically, the most costly first (range_order), and stay small (a thread
    that the OS preempts holds up at most one range). The ranges are a property of the
    grids and k, not of the thread count."""
    cdef Py_ssize_t R = grid_ptr.shape[0] - 1, n_rows = U.shape[0], k = U.shape[1]
    cdef Py_ssize_t q, n_ranges
    if ptrs.shape[0] != R or wide.shape[0] != R or out.shape[1] != k:
        raise ValueError("labels, grid_ptr and the shapes of U and out do not match")
    if out.shape[0] != grid_ptr[R]:
        raise ValueError("out must have one row per column of Z")
    if out.shape[0] == 0 or k == 0:
        return
    # range boundaries: grids bounds[q] .. bounds[q + 1] - 1
    cdef int64_t[::1] bounds = np.empty(R + 1, dtype=np.int64)
    n_ranges = _grid_ranges(&grid_ptr[0], R, k, &bounds[0])
    cdef double *optr = &out[0, 0]
    cdef const double *uptr = &U[0, 0] if n_rows > 0 else NULL
    cdef const uintptr_t *pp = &ptrs[0]
    cdef const unsigned char *wp = &wide[0]
    cdef const int64_t *gp = &grid_ptr[0]
    cdef const int64_t *bp = &bounds[0]
    cdef int64_t[::1] order
    cdef const int64_t *op
    if n_threads <= 1 or n_ranges == 1:
        with nogil:
            for q in range(n_ranges):
                _tmatmat_grids(pp, wp, gp, const_value, uptr, n_rows, k, optr, bp[q], bp[q + 1])
        return
    order = range_order(bounds[:n_ranges + 1])
    op = &order[0]
    with nogil:
        for q in prange(n_ranges, schedule="dynamic", num_threads=n_threads):
            _tmatmat_grids(pp, wp, gp, const_value, uptr, n_rows, k, optr,
                           bp[op[q]], bp[op[q] + 1])


def range_order(const int64_t[::1] bounds):
    """The order in which labels_tmatmat's threads claim its ranges of grids (bounds:
    range q is the grids bounds[q] .. bounds[q + 1] - 1): the most costly first, ties in
    range order (longest processing time first, Graham 1969). A range costs one sweep of
    U plus one scatter pass per grid, and the sweep costs about two of those passes
    (N = 4 x 10^6, R = 64, one thread, 2-vCPU AMD EPYC: 2.0-4.9 ms a range of one grid,
    5.8-7.0 ms one of four), so a range of g grids is modelled as 2 + g. Claimed in
    grid order, ranges of one to four grids leave the last threads idle behind a late
    range of four: on the ranges of N = 4 x 10^6, R = 64, sigma = 1 and their measured
    costs, 16 threads would finish after 1.58x the ideal time (the total over 16), the
    costliest first after 1.21x. Each range writes its own columns, so the order never
    changes a result bit."""
    cdef Py_ssize_t n = bounds.shape[0] - 1
    if n < 1:
        return np.zeros(0, dtype=np.int64)
    cost = 2 + np.diff(np.asarray(bounds))
    return np.ascontiguousarray(np.argsort(-cost, kind="stable"), dtype=np.int64)


# ---------------------------------------------------------------------------------------
# Block CG vector updates (rbcd.solvers.cg.solve_ridge_cg), fused so that an iteration makes
# few passes over the (D, k) arrays. Sums over j are accumulated per block of CG_BLOCK
# rows into ``partial`` (n_blocks, n_act) and added up by the caller in block order, so
# the result does not depend on the thread count.

cdef enum:
    _CG_BLOCK = 4096

CG_BLOCK = _CG_BLOCK  # rows per partial sum, visible from Python


def cg_operator_tail(
    double[:, ::1] Q,             # IN/OUT (D, n_act) Z^T S (Z P - 1 zbar.P) for the active columns
    const double[:, ::1] Pa,      # IN  (D, n_act) the active search directions
    const double[::1] zbar,       # IN  (D,) weighted column means (ignored unless centred)
    const double[::1] tsum,       # IN  (n_act,) column sums of S (Z P - 1 zbar.P)
    const double[::1] alpha_act,  # IN  (n_act,) penalty of each active column
    bint centred,
    double[:, ::1] partial,       # OUT (n_blocks, n_act) block sums of Pa * Q
    int n_threads,
):
    """Q += alpha * Pa - outer(zbar, tsum) (if centred); partial[b] = (Pa * Q)[block b].sum(0)."""
    cdef Py_ssize_t D = Q.shape[0]
    cdef Py_ssize_t na = Q.shape[1]
    cdef Py_ssize_t n_blocks = (D + _CG_BLOCK - 1) // _CG_BLOCK
    cdef Py_ssize_t blk, j, a, lo, hi
    cdef double q, acc
    if Pa.shape[0] != D or Pa.shape[1] != na or partial.shape[0] != n_blocks or partial.shape[1] != na:
        raise ValueError("cg_operator_tail: inconsistent shapes")
    if tsum.shape[0] != na or alpha_act.shape[0] != na or (centred and zbar.shape[0] != D):
        raise ValueError("cg_operator_tail: inconsistent shapes")
    if D == 0 or na == 0:
        return
    cdef double *qp = &Q[0, 0]
    cdef const double *pp = &Pa[0, 0]
    cdef double *part = &partial[0, 0]
    cdef const double *zb = &zbar[0] if zbar.shape[0] > 0 else NULL
    cdef const double *ts = &tsum[0]
    cdef const double *al = &alpha_act[0]
    with nogil:
        for blk in prange(n_blocks, schedule="static", num_threads=n_threads):
            lo = blk * _CG_BLOCK
            hi = min(lo + _CG_BLOCK, D)
            # column by column, each block sum in a register (through memory, a sum of the
            # block's rows waits on its own store every row: 3.3 ns an entry at k = 1); the
            # same rows in the same order, so the same bits
            for a in range(na):
                acc = 0.0
                for j in range(lo, hi):
                    # Q[j] += alpha * P[j] - zbar[j] * tsum; partial[blk] += P[j] * Q[j]
                    q = qp[j * na + a] + al[a] * pp[j * na + a]
                    if centred:
                        q = q - zb[j] * ts[a]
                    qp[j * na + a] = q
                    acc = acc + pp[j * na + a] * q
                part[blk * na + a] = acc


def cg_step(
    double[:, ::1] X,             # IN/OUT (D, k) solutions
    double[:, ::1] R,             # IN/OUT (D, k) residuals
    const double[:, ::1] Pa,      # IN  (D, n_act) active search directions
    const double[:, ::1] Q,       # IN  (D, n_act) A @ Pa
    const long long[::1] act,     # IN  (n_act,) the active columns of X and R
    const double[::1] step,       # IN  (n_act,) CG step sizes
    const double[:, ::1] minv,    # IN  (D, k) the preconditioner M^-1 (Jacobi), (D, 1) when
                                  #     every column's is the same, or (0, k): none
    double[:, ::1] partial_rr,    # OUT (n_blocks, n_act) block sums of r^2
    double[:, ::1] partial_rz,    # OUT (n_blocks, n_act) block sums of r * M^-1 r
    int n_threads,
    double[:, ::1] Zr=None,       # OUT (D, n_act) M^-1 r of the active columns, or None
):
    """X[:, act] += step * Pa; R[:, act] -= step * Q; block sums of r.r and r.M^-1 r; with
    Zr, also Zr = M^-1 R[:, act] (the preconditioned residual, for a caller that projects
    it before its dot product with r: rbcd.solvers.cg._cg_iterate)."""
    cdef Py_ssize_t D = X.shape[0]
    cdef Py_ssize_t k = X.shape[1]
    cdef Py_ssize_t na = act.shape[0]
    cdef Py_ssize_t n_blocks = (D + _CG_BLOCK - 1) // _CG_BLOCK
    cdef Py_ssize_t blk, j, a, c, lo, hi
    cdef double r, arr, arz
    if R.shape[0] != D or R.shape[1] != k or Pa.shape[0] != D or Pa.shape[1] != na:
        raise ValueError("cg_step: inconsistent shapes")
    if Q.shape[0] != D or Q.shape[1] != na or step.shape[0] != na:
        raise ValueError("cg_step: inconsistent shapes")
    if partial_rr.shape[0] != n_blocks or partial_rz.shape[0] != n_blocks:
        raise ValueError("cg_step: inconsistent shapes")
    if partial_rr.shape[1] != na or partial_rz.shape[1] != na:
        raise ValueError("cg_step: inconsistent shapes")
    if minv.shape[0] != 0 and (minv.shape[0] != D or minv.shape[1] not in (1, k)):
        raise ValueError("cg_step: inconsistent shapes")
    if Zr is not None and (Zr.shape[0] != D or Zr.shape[1] != na):
        raise ValueError("cg_step: inconsistent shapes")
    cdef Py_ssize_t mk = minv.shape[1]
    for a in range(na):
        if act[a] < 0 or act[a] >= k:
            raise ValueError("cg_step: active column out of range")
    if D == 0 or na == 0:
        return
    cdef double *xp = &X[0, 0]
    cdef double *rp = &R[0, 0]
    cdef const double *pp = &Pa[0, 0]
    cdef const double *qp = &Q[0, 0]
    cdef const long long *ac = &act[0]
    cdef const double *st = &step[0]
    cdef const double *mv = &minv[0, 0] if minv.shape[0] > 0 else NULL
    cdef double *prr = &partial_rr[0, 0]
    cdef double *prz = &partial_rz[0, 0]
    cdef double *zp = &Zr[0, 0] if Zr is not None else NULL
    with nogil:
        for blk in prange(n_blocks, schedule="static", num_threads=n_threads):
            lo = blk * _CG_BLOCK
            hi = min(lo + _CG_BLOCK, D)
            # column by column, the block sums in registers (see cg_operator_tail)
            for a in range(na):
                c = ac[a]
                arr = 0.0
                arz = 0.0
                for j in range(lo, hi):
                    # X[j, c] += step * P[j]; R[j, c] -= step * Q[j]; sums of r^2, r^2 / diag
                    xp[j * k + c] += st[a] * pp[j * na + a]
                    r = rp[j * k + c] - st[a] * qp[j * na + a]
                    rp[j * k + c] = r
                    arr = arr + r * r
                    arz = arz + (r * r * mv[j * mk + (c if mk > 1 else 0)] if mv != NULL
                                 else r * r)
                    if zp != NULL:
                        zp[j * na + a] = (r * mv[j * mk + (c if mk > 1 else 0)] if mv != NULL
                                          else r)
                prr[blk * na + a] = arr
                prz[blk * na + a] = arz


def cg_direction(
    double[:, ::1] P,             # IN/OUT (D, k) search directions
    const double[:, ::1] R,       # IN  (D, k) residuals
    const long long[::1] act,     # IN  (n_act,) columns to update
    const double[::1] beta,       # IN  (n_act,)
    const double[:, ::1] minv,    # IN  (D, k) the preconditioner M^-1 (Jacobi), (D, 1) when
                                  #     every column's is the same, or (0, k): none
    int n_threads,
    const double[:, ::1] Zr=None, # IN  (D, n_act) the projected M^-1 R[:, act], or None
):
    """P[:, act] = M^-1 R[:, act] + beta * P[:, act]; with Zr, P[:, act] = Zr + beta *
    P[:, act] (R and minv unread)."""
    cdef Py_ssize_t D = P.shape[0]
    cdef Py_ssize_t k = P.shape[1]
    cdef Py_ssize_t na = act.shape[0]
    cdef Py_ssize_t j, a, c
    if Zr is not None and (Zr.shape[0] != D or Zr.shape[1] != na):
        raise ValueError("cg_direction: inconsistent shapes")
    if R.shape[0] != D or R.shape[1] != k or beta.shape[0] != na:
        raise ValueError("cg_direction: inconsistent shapes")
    if minv.shape[0] != 0 and (minv.shape[0] != D or minv.shape[1] not in (1, k)):
        raise ValueError("cg_direction: inconsistent shapes")
    cdef Py_ssize_t mk = minv.shape[1]
    for a in range(na):
        if act[a] < 0 or act[a] >= k:
            raise ValueError("cg_direction: active column out of range")
    if D == 0 or na == 0:
        return
    cdef double *pp = &P[0, 0]
    cdef const double *rp = &R[0, 0]
    cdef const long long *ac = &act[0]
    cdef const double *bt = &beta[0]
    cdef const double *mv = &minv[0, 0] if minv.shape[0] > 0 else NULL
    cdef const double *zp = &Zr[0, 0] if Zr is not None else NULL
    with nogil:
        for j in prange(D, schedule="static", num_threads=n_threads):
            # P[j, act] = M^-1[j, act] R[j, act] (or Zr[j]) + beta * P[j, act]
            for a in range(na):
                c = ac[a]
                if zp != NULL:
                    pp[j * k + c] = zp[j * na + a] + bt[a] * pp[j * k + c]
                else:
                    pp[j * k + c] = ((rp[j * k + c] * mv[j * mk + (c if mk > 1 else 0)]
                                      if mv != NULL else rp[j * k + c]) + bt[a] * pp[j * k + c])


def cg_dot(
    const double[:, ::1] R,       # IN  (D, k) residuals
    const long long[::1] act,     # IN  (n_act,) the active columns of R
    const double[:, ::1] Zr,      # IN  (D, n_act) the (projected) preconditioned residuals
    double[:, ::1] partial,       # OUT (n_blocks, n_act) block sums of R[:, act] * Zr
    int n_threads,
):
    """Block sums of r . z for the active columns, in cg_step's blocks (the same bits for
    any thread count once summed in block order)."""
    cdef Py_ssize_t D = R.shape[0]
    cdef Py_ssize_t k = R.shape[1]
    cdef Py_ssize_t na = act.shape[0]
    cdef Py_ssize_t n_blocks = (D + _CG_BLOCK - 1) // _CG_BLOCK
    cdef Py_ssize_t blk, j, a, c, lo, hi
    cdef double acc
    if Zr.shape[0] != D or Zr.shape[1] != na or partial.shape[0] != n_blocks \
            or partial.shape[1] != na:
        raise ValueError("cg_dot: inconsistent shapes")
    for a in range(na):
        if act[a] < 0 or act[a] >= k:
            raise ValueError("cg_dot: active column out of range")
    if D == 0 or na == 0:
        return
    cdef const double *rp = &R[0, 0]
    cdef const double *zp = &Zr[0, 0]
    cdef const long long *ac = &act[0]
    cdef double *part = &partial[0, 0]
    with nogil:
        for blk in prange(n_blocks, schedule="static", num_threads=n_threads):
            lo = blk * _CG_BLOCK
            hi = min(lo + _CG_BLOCK, D)
            for a in range(na):
                c = ac[a]
                acc = 0.0
                for j in range(lo, hi):
                    acc = acc + rp[j * k + c] * zp[j * na + a]
                part[blk * na + a] = acc


# ---------------------------------------------------------------------------------------
# The grid projection of the preconditioned CG (rbcd.solvers.cg._GridProjection): per grid
# means of a (D, m) array subtracted from the grid's rows, in parallel (numpy's reduceat /
# take / subtract each make a serial pass over D x m doubles per iteration).

cdef void _grid_col_sums(const double *V, Py_ssize_t m, Py_ssize_t lo, Py_ssize_t hi,
                         double *out) noexcept nogil:
    """out[c] = V[lo:hi, c].sum() for c < m: four running sums in registers (row
    lo + 4t + q into a_q, the rows after the last full four into a_0), then
    (a_0 + a_1) + (a_2 + a_3)."""
    cdef Py_ssize_t j, c, h4 = lo + (hi - lo) // 4 * 4
    cdef double a0, a1, a2, a3
    for c in range(m):
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        for j in range(lo, h4, 4):
            a0 = a0 + V[j * m + c]
            a1 = a1 + V[(j + 1) * m + c]
            a2 = a2 + V[(j + 2) * m + c]
            a3 = a3 + V[(j + 3) * m + c]
        for j in range(h4, hi):
            a0 = a0 + V[j * m + c]
        out[c] = (a0 + a1) + (a2 + a3)


cdef void _shift_rows(double *V, Py_ssize_t m, Py_ssize_t lo, Py_ssize_t hi,
                      const double *shift) noexcept nogil:
    """V[j, c] -= shift[c] for the rows lo..hi-1."""
    cdef Py_ssize_t j, c
    cdef double s0
    if m == 1:
        s0 = shift[0]
        for j in range(lo, hi):
            V[j] = V[j] - s0
        return
    for j in range(lo, hi):
        for c in range(m):
            V[j * m + c] = V[j * m + c] - shift[c]


cdef inline Py_ssize_t _grid_of(const int64_t *ptr, Py_ssize_t G, Py_ssize_t j) noexcept nogil:
    """The g with ptr[g] <= j < ptr[g + 1] (ptr increasing, 0 <= j < ptr[G])."""
    cdef Py_ssize_t a = 0, b = G - 1, h
    while a < b:
        h = (a + b + 1) // 2
        if ptr[h] <= j:
            a = h
        else:
            b = h - 1
    return a


cdef void _shift_block(double *V, Py_ssize_t m, const int64_t *ptr, Py_ssize_t G,
                       const double *shift, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """V[j] -= shift[g] for the rows lo..hi-1, g the grid of row j."""
    cdef Py_ssize_t g = _grid_of(ptr, G, lo), e
    while lo < hi:
        e = ptr[g + 1] if ptr[g + 1] < hi else hi
        _shift_rows(V, m, lo, e, shift + g * m)
        lo = e
        g = g + 1


def grid_center(double[:, ::1] V, const int64_t[::1] ptr, const double[::1] inv_sizes,
                bint fit_intercept, double inv_total, int n_threads):
    """In place: V[j] -= shift[g] for the rows j of grid g (rows ptr[g] .. ptr[g + 1] - 1,
    ptr[-1] == V.shape[0], every grid non-empty), with mean[g] = inv_sizes[g] *
    V[grid g].sum(0) and shift[g] = mean[g] (fit_intercept) or mean[g] - inv_sizes[g] c,
    c = inv_total * sum_g mean[g] (summed in grid order). Returns the (G, m) shifts.

    Each grid's sums run on one thread (_grid_col_sums), the grids spread over the
    threads; the shift is subtracted in parallel over fixed blocks of rows. The same bits
    for any thread count."""
    cdef Py_ssize_t G = ptr.shape[0] - 1, D = V.shape[0], m = V.shape[1]
    cdef Py_ssize_t g, c, blk, n_blocks
    if G < 0 or inv_sizes.shape[0] != G or (G > 0 and ptr[0] != 0) or ptr[G] != D:
        raise ValueError("grid_center: ptr must run from 0 to V.shape[0], one size per grid")
    for g in range(G):
        if ptr[g + 1] <= ptr[g]:
            raise ValueError("grid_center: every grid must own at least one row")
    shift_arr = np.zeros((G, m), dtype=np.float64)
    if D == 0 or m == 0:
        return shift_arr
    cdef double[:, ::1] shift = shift_arr
    cdef double[::1] tot = np.zeros(m, dtype=np.float64)
    cdef double *sp = &shift[0, 0]
    cdef double *vp = &V[0, 0]
    cdef const int64_t *pp = &ptr[0]
    cdef const double *inv = &inv_sizes[0]
    cdef double *tp = &tot[0]
    n_blocks = (D + _CG_BLOCK - 1) // _CG_BLOCK
    with nogil:
        if n_threads <= 1:
            for g in range(G):
                _grid_col_sums(vp, m, pp[g], pp[g + 1], sp + g * m)
        else:
            for g in prange(G, schedule="dynamic", num_threads=n_threads):
                _grid_col_sums(vp, m, pp[g], pp[g + 1], sp + g * m)
        for g in range(G):
            for c in range(m):
                sp[g * m + c] = sp[g * m + c] * inv[g]
        if not fit_intercept:
            for g in range(G):
                for c in range(m):
                    tp[c] = tp[c] + sp[g * m + c]
            for c in range(m):
                tp[c] = tp[c] * inv_total
            for g in range(G):
                for c in range(m):
                    sp[g * m + c] = sp[g * m + c] - inv[g] * tp[c]
        if n_threads <= 1:
            _shift_block(vp, m, pp, G, sp, 0, D)
        else:
            for blk in prange(n_blocks, schedule="static", num_threads=n_threads):
                _shift_block(vp, m, pp, G, sp, blk * _CG_BLOCK,
                             min((blk + 1) * _CG_BLOCK, D))
    return shift_arr
