"""Compiled kernels of the rbcd.dask workers (docs/dask.md).

Binning (rbcd.dask.binning): a partition is binned once by the local kernels, with its own
first-appearance column ids per grid; ``first_rows`` finds, in one pass over those ids, the
row where each local column first appears and each local column's row count; after the
driver has merged the partitions, ``relabel`` rewrites the ids in place to the global
columns through a table "local column -> global column" (and fills the constant values).

Coordinate descent (rbcd.dask.cd): ``grid_step`` is one pipelined step of the grid-block
mode on a worker's rows, as the local streamed grid step (rbcd.solvers._cd._stream_pass):
apply the pending move of one grid to the state and sum s loss' over the bins of the next
grid, in one pass. The rows are cut into blocks fixed by their number alone; block q sums
its rows in order, and the blocks' sums are added in block order, so the result is the same
for any thread count.

Every kernel takes typed buffers and checks their shapes; the callers own the arrays.
"""
import numpy as np

from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t, uint16_t
from libc.stdlib cimport free, malloc

from libc.math cimport exp

from rbcd.binning._grid cimport label_t, label2_t
from rbcd.solvers._losses cimport logistic_deriv, sqhinge_deriv

cdef extern from "cd_kernels.h" nogil:
    double logistic_move "rbcd_logistic_move"(double *ex, double p, double y,
                                              const double *f) noexcept

ctypedef fused idx_t:
    int32_t
    int64_t

ctypedef fused val_t:
    float
    double

# loss codes: rbcd.solvers._cd.Loss
cdef enum:
    SQUARED = 0
    LOGISTIC = 1
    SQUARED_HINGE = 2
    # a grid's move goes by per-bin factors (cd_kernels.h) when the partition's rows
    # average at least this many per bin of the moving grid (two exps per bin must cost
    # less than one exp per row), as the local kernels' FACTOR_MIN_ROWS per column
    FACTOR_MIN_ROWS = 3


cdef struct Rows:
    # a partition's rows and state (rbcd.dask.cd._Part): u = p - y (squared) or p, dv =
    # loss'(p, y) (u itself for the squared loss), ex = exp(y p) for the logistic loss with
    # y = +-1 (else NULL), y, s (NULL: unit weights)
    double* u
    double* dv
    double* ex
    const double* y
    const double* s
    int loss


# ---------------------------------------------------------------------------- binning
def first_rows(const idx_t[::1] ids, const int64_t[::1] local_ptr, int64_t[::1] first,
               int64_t[::1] counts):
    """First row and row count of every local column of a partition's training ids.

    ids : (n * R,) the local id of row i in grid r at ``i * R + r``, numbered in each grid
        by first appearance in row order (rbcd.binning._binning.fit_tables).
    local_ptr : (R + 1,) int64, local column c = ``local_ptr[r] + id`` (cumsum of n_bins).
    first : (D_p,) OUT, the first row holding local column c.
    counts : (D_p,) OUT, the rows holding local column c.

    ValueError if an id is not the next new one or an earlier one (not first-appearance ids).
    """
    cdef Py_ssize_t R = local_ptr.shape[0] - 1, n, i, r
    cdef Py_ssize_t D = first.shape[0]
    cdef int64_t k, c
    cdef int64_t *nxt
    cdef bint bad = False
    if R < 1 or local_ptr[0] != 0 or local_ptr[R] != D or counts.shape[0] != D:
        raise ValueError("local_ptr must run from 0 to the length of first and counts")
    if ids.shape[0] % R:
        raise ValueError("ids must have n * R entries")
    n = ids.shape[0] // R
    nxt = <int64_t *> malloc(R * sizeof(int64_t))
    if nxt == NULL:
        raise MemoryError()
    with nogil:
        for r in range(R):
            nxt[r] = 0
        for c in range(D):
            counts[c] = 0
        for i in range(n):
            for r in range(R):
                k = ids[i * R + r]
                if k == nxt[r]:
                    if local_ptr[r] + k >= local_ptr[r + 1]:
                        bad = True
                        break
                    first[local_ptr[r] + k] = i
                    nxt[r] += 1
                elif k > nxt[r] or k < 0:
                    bad = True
                    break
                counts[local_ptr[r] + k] += 1
            if bad:
                break
        for r in range(R):
            if nxt[r] != local_ptr[r + 1] - local_ptr[r]:
                bad = True
    free(nxt)
    if bad:
        raise ValueError("the ids are not a training binning's first-appearance ids")


def relabel(idx_t[::1] ids, const int64_t[::1] local_ptr, const int64_t[::1] table,
            val_t[::1] data, double value, int n_threads):
    """Z's global training arrays from a partition's local ids, in one parallel pass:
    ``ids[i * R + r] = table[local_ptr[r] + ids[i * R + r]]`` in place and ``data[:] =
    value`` (cast to data's dtype). The caller checked that every table entry fits ids'
    dtype and that the ids are those ``first_rows`` accepted (so every lookup is in range)."""
    cdef Py_ssize_t R = local_ptr.shape[0] - 1
    cdef Py_ssize_t n, i, r
    cdef idx_t *row
    cdef val_t *drow
    cdef val_t v = <val_t> value
    if R < 1 or ids.shape[0] % R or data.shape[0] != ids.shape[0]:
        raise ValueError("ids and data must both have n * R entries")
    if local_ptr[R] != table.shape[0]:
        raise ValueError("table must have one entry per local column")
    n = ids.shape[0] // R
    for i in prange(n, nogil=True, schedule="static", num_threads=max(1, n_threads)):
        row = &ids[i * R]
        drow = &data[i * R]
        for r in range(R):
            row[r] = <idx_t> table[local_ptr[r] + row[r]]
            drow[r] = v


# ---------------------------------------------------------------------------- CD grid step
cdef inline double deriv(int loss, double u, double y) noexcept nogil:
    if loss == SQUARED:
        return u
    if loss == LOGISTIC:
        return logistic_deriv(u, y)
    return sqhinge_deriv(u, y)


cdef inline void _move_row(const Rows* X, Py_ssize_t i, double d,
                           const double* fac) noexcept nogil:
    # p_i += d and loss'(p_i, y_i), for the losses other than squared: by the bin's factors
    # fac (two entries; unmoved bins 1 and 1) when given, else, if the row moved, afresh
    cdef double e
    if fac != NULL:
        X.u[i] += d
        X.dv[i] = logistic_move(&X.ex[i], X.u[i], X.y[i], fac)
    elif d != 0.0:
        X.u[i] += d
        if X.ex != NULL:
            e = exp(X.y[i] * X.u[i])
            X.ex[i] = e
            X.dv[i] = -X.y[i] / (1.0 + e)
        else:
            X.dv[i] = deriv(X.loss, X.u[i], X.y[i])


cdef void _step_block(const Rows* X, const label_t *lab_prev, const double *dz,
                      const double* fac, const label2_t *lab, double *part, Py_ssize_t a,
                      Py_ssize_t b) noexcept nogil:
    # rows a..b-1 in order: u_i += dz[lab_prev[i]] (non-squared: dv_i refreshed where the
    # move is not 0, or by the bin's factors fac[2 l], fac[2 l + 1] when fac is given) if
    # lab_prev; then part[lab[i]] += s_i dv_i if lab (part zeroed by the caller). For the
    # squared loss dv is u.
    cdef Py_ssize_t i
    cdef double d
    cdef double* u = X.u
    cdef const double* dv = X.dv
    cdef const double* s = X.s
    if lab_prev != NULL and lab != NULL:
        # both in one pass over the rows (row i's sum reads only row i's fresh dv_i)
        for i in range(a, b):
            d = dz[lab_prev[i]]
            if X.loss == SQUARED:
                u[i] += d
            else:
                _move_row(X, i, d, &fac[2 * lab_prev[i]] if fac != NULL else NULL)
            part[lab[i]] += dv[i] if s == NULL else s[i] * dv[i]
        return
    if lab_prev != NULL:
        if X.loss == SQUARED:
            for i in range(a, b):
                u[i] += dz[lab_prev[i]]
        else:
            for i in range(a, b):
                _move_row(X, i, dz[lab_prev[i]],
                          &fac[2 * lab_prev[i]] if fac != NULL else NULL)
    if lab != NULL:
        if s == NULL:
            for i in range(a, b):
                part[lab[i]] += dv[i]
        else:
            for i in range(a, b):
                part[lab[i]] += s[i] * dv[i]


def block_rows(Py_ssize_t n, Py_ssize_t n_bins):
    """The row blocks of the grid step on n rows summing over n_bins bins, fixed by n and
    n_bins alone (as the local streamed grid step, docs/internals.md): 1 block, doubled
    while fewer than 16 and n >= 2 x blocks x 16384; one block when the blocks' partial
    sums (blocks x n_bins) would exceed 2 n."""
    cdef Py_ssize_t nb = 1
    while nb < 16 and n >= 2 * nb * 16384:
        nb *= 2
    return 1 if nb * n_bins > 2 * n else int(nb)


cdef inline Py_ssize_t _rows_per_block(Py_ssize_t n, Py_ssize_t n_blocks) noexcept nogil:
    # ceil(n / n_blocks) rounded up to a multiple of 8
    return ((n + n_blocks - 1) // n_blocks + 7) // 8 * 8


def grid_step(const label_t[::1] lab_prev, const double[::1] dz, const label2_t[::1] lab,
              double[::1] u, double[::1] dv, double[::1] ex, const double[::1] y,
              const double[::1] s, int loss, double[:, ::1] part, double[::1] out,
              int n_threads):
    """One pipelined grid step on a partition's rows (module docstring).

    lab_prev : (n,) labels of the grid whose move is pending, or empty for none.
    dz : its moves per bin ((w_new - w_old) z, one more entry than its largest label).
    lab : (n,) labels of the grid whose sums are wanted, or empty for none.
    u : (n,) the state, updated in place (p - y for the squared loss, else p).
    dv : (n,) loss'(p, y), kept up to date for the non-squared losses; the squared loss
        passes u itself.
    ex : (n,) exp(y p) for the logistic loss with y = +-1, kept up to date (moved by each
        bin's factors exp(+-dz), cd_kernels.h; the caller recomputes it from p once per
        epoch), or empty.
    y : (n,) targets; s : (n,) weights, or empty for unit weights.
    loss : the code of rbcd.solvers._cd.Loss.
    part : (blocks, len(out)) scratch: block q (``ceil(n / blocks)`` rows rounded up to a
        multiple of 8) sums its rows into part[q]; ``block_rows`` gives the blocks.
    out : OUT, sum over the rows of bin j of s_i loss'(p_i, y_i), for j < len(out)
        (every label of ``lab`` must be below len(out)).
    n_threads : threads over the blocks (the same result for any value, for a given number
        of blocks).
    """
    cdef Py_ssize_t n = u.shape[0], nb = out.shape[0], q, j, n_blocks, rows
    cdef const label_t *lp = &lab_prev[0] if lab_prev.shape[0] else NULL
    cdef const label2_t *lb = &lab[0] if lab.shape[0] else NULL
    cdef const double *sp = &s[0] if s.shape[0] else NULL
    cdef const double *dzp = &dz[0] if dz.shape[0] else NULL
    cdef double acc, d
    cdef double* fac = NULL
    cdef Py_ssize_t c
    cdef Rows X
    if (lab_prev.shape[0] not in (0, n) or lab.shape[0] not in (0, n) or dv.shape[0] != n
            or y.shape[0] != n or s.shape[0] not in (0, n) or ex.shape[0] not in (0, n)):
        raise ValueError("the labels, dv, ex, y and s must have the rows of u (or be empty)")
    if ex.shape[0] and loss != LOGISTIC:
        raise ValueError("ex is the logistic loss's state")
    n_blocks = part.shape[0]
    if n_blocks < 1 or part.shape[1] != nb:
        raise ValueError("part must have shape (blocks >= 1, len(out))")
    rows = _rows_per_block(n, n_blocks)
    if lp != NULL and dz.shape[0] == 0:
        raise ValueError("dz is empty")
    if n == 0:
        out[:] = 0.0
        return
    X.u = &u[0]
    X.dv = &dv[0]
    X.ex = &ex[0] if ex.shape[0] else NULL
    X.y = &y[0]
    X.s = sp
    X.loss = loss
    if X.ex != NULL and lp != NULL and n >= FACTOR_MIN_ROWS * dz.shape[0]:
        # the moving grid's factors, exp(dz) and exp(-dz) per bin (1 and 1 unmoved)
        fac = <double*>malloc(2 * dz.shape[0] * sizeof(double))
        if fac == NULL:
            raise MemoryError()
        for c in range(dz.shape[0]):
            d = dz[c]
            fac[2 * c] = exp(d) if d != 0.0 else 1.0
            fac[2 * c + 1] = exp(-d) if d != 0.0 else 1.0
    with nogil:
        if lb != NULL:
            for q in range(n_blocks):
                for j in range(nb):
                    part[q, j] = 0.0
        for q in prange(n_blocks, schedule="static", num_threads=max(1, min(n_threads, n_blocks))):
            if q * rows < n:
                _step_block(&X, lp, dzp, fac, lb, &part[q, 0], q * rows,
                            min(n, (q + 1) * rows))
        free(fac)
        if lb != NULL:
            for j in range(nb):
                acc = 0.0
                for q in range(n_blocks):
                    acc += part[q, j]
                out[j] = acc
