"""X's columns as the binning kernels read them: extremes, dense copies of chosen
columns, and the check that every bin fits in int64 (with the error naming the first
value that does not). Sparse X costs O(nnz + the columns asked for), nothing of length
d where X is wide (issue 31 item 8).
"""
import numpy as np
import scipy.sparse as sp

from . import _binning
from .._validation import INT64_HIGH, INT64_LOW, raise_non_finite, raise_too_large


def _describe_sigma(sigma):
    if np.ndim(sigma) == 0:
        return f"sigma = {float(sigma):.6g}"
    s = np.asarray(sigma)
    return f"sigma in [{s.min():.6g}, {s.max():.6g}] (per feature)"


def _sparse_extremes(X):
    """``(cols, cmin, cmax)`` of CSR X (canonical): the columns holding a stored entry,
    increasing, and their minima and maxima, the implicit zeros of a column with fewer
    than N entries counted as 0. Every other column is 0 in every row. Wide X (d > nnz +
    N): O(nnz log nnz) time, O(nnz) memory, nothing of length d (issue 31 item 8:
    X.min(axis=0) went through a CSC copy with an indptr of d + 1 entries); else one
    CSC copy, O(nnz + d)."""
    n, d = X.shape
    idx = X.indices
    if idx.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
    if d <= idx.shape[0] + n:  # not wide: a CSC copy, O(nnz + d), no sort
        C = X.tocsc()
        C.sort_indices()
        counts = np.diff(C.indptr)
        cols = np.flatnonzero(counts).astype(np.int64)
        starts = C.indptr[:-1][cols]
        v = np.asarray(C.data, dtype=np.float64)
    else:  # wide: sort the stored entries by column, O(nnz log nnz), nothing of length d
        order = np.argsort(idx, kind="stable")
        c = idx[order]
        v = np.asarray(X.data, dtype=np.float64)[order]
        starts = np.flatnonzero(np.concatenate(([True], c[1:] != c[:-1])))
        cols = c[starts].astype(np.int64)
    cmin = np.minimum.reduceat(v, starts)
    cmax = np.maximum.reduceat(v, starts)
    part = np.diff(np.append(starts, v.shape[0])) < n  # some rows hold an implicit 0
    cmin[part] = np.minimum(cmin[part], 0.0)
    cmax[part] = np.maximum(cmax[part], 0.0)
    return cols, cmin, cmax


def _extremes(X, n_threads):
    """Column minima and maxima of X (dense, or sparse with implicit zeros as 0); raises
    the ValueError naming the first non-finite entry of dense X (check_X did sparse).
    Arrays of length d: for wide sparse X, see :func:`_sparse_extremes`."""
    if sp.issparse(X):
        cols, pmin, pmax = _sparse_extremes(X)
        cmin = np.zeros(X.shape[1])
        cmax = np.zeros(X.shape[1])
        cmin[cols] = pmin
        cmax[cols] = pmax
        return cmin, cmax
    cmin, cmax, bad = _binning.scan_columns(X, n_threads)
    if bad >= 0:
        raise_non_finite(X, bad)
    return cmin, cmax


def _sparse_take(X, cols):
    """Dense ``X[:, cols]`` of CSR X in O(nnz + N len(cols)) (scipy's column indexing
    allocates an array of length d)."""
    n = X.shape[0]
    cols = np.asarray(cols, dtype=np.int64)
    uniq, inverse = np.unique(cols, return_inverse=True)
    out = np.zeros((n, uniq.shape[0]))
    if uniq.shape[0] and X.nnz:
        idx = X.indices
        pos = np.minimum(np.searchsorted(uniq, idx), uniq.shape[0] - 1)
        hit = uniq[pos] == idx
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(X.indptr))
        out[rows[hit], pos[hit]] = X.data[hit]
    if uniq.shape[0] != cols.shape[0] or np.any(uniq != cols):
        out = np.ascontiguousarray(out[:, inverse.ravel()])
    return out


def _take_columns(X, cols=None):
    """X[:, cols] as a C-ordered float64 array (X itself when it is dense and cols is all
    of it)."""
    if sp.issparse(X):
        if cols is None:
            return np.ascontiguousarray(X.toarray())
        if X.shape[1] <= X.nnz + X.shape[0]:  # not wide: scipy's O(nnz + d) indexing
            return np.ascontiguousarray(X[:, cols].toarray())
        return _sparse_take(X, cols)
    if cols is None or (cols.shape[0] == X.shape[1]):
        return X
    return np.ascontiguousarray(X[:, cols])


def _bin_range(widths, offsets, cmin, cmax):
    """Bins of the column extremes (the bounds of every bin, x -> bin being monotone) and
    the columns where some bin does not fit in int64."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        qlo = np.floor((cmin - offsets) / widths)
        qhi = np.floor((cmax - offsets) / widths)
    ok = (qlo >= INT64_LOW) & (qlo < INT64_HIGH) & (qhi >= INT64_LOW) & (qhi < INT64_HIGH)
    return qlo, qhi, ~np.all(ok, axis=0)


#: the advice of "X values too large to bin" at fit, for a sigma given as a number and for
#: one that sigma="scale" gave (rbcd.dask, which bins with the number, rewrites the one to
#: the other)
NUMBER_SIGMA_ADVICE = "use a larger sigma, e.g. sigma='scale'"
SCALE_SIGMA_ADVICE = ("sigma='scale' took it from the median distance between rows, far "
                      "below these values: scale or clip the features (e.g. "
                      "sklearn.preprocessing.RobustScaler), or give a larger sigma")


def _raise_bad_bins(X, cols, widths, offsets, sigma=None, param=None):
    """Raise the ValueError naming the first (row, column), then grid, whose bin does not
    fit in int64, among columns ``cols`` of X (``widths``/``offsets``: those columns).
    At fit, ``sigma`` is the value used and ``param`` the parameter that gave it (the
    advice differs when it was already sigma='scale')."""
    cols = np.asarray(cols, dtype=np.int64)
    found = _binning.first_bad_bin(_take_columns(X, cols), np.ascontiguousarray(widths),
                                   np.ascontiguousarray(offsets),
                                   np.ones(cols.shape[0], dtype=np.uint8))
    if found is None:  # cannot happen (monotone bins); keep a clear message
        raise ValueError("X values too large to bin")
    i, j, r, value = found
    found = (i, int(cols[j]), r, value)
    if sigma is None:
        try:
            raise_too_large(*found)
        except ValueError as exc:  # at transform: an outlier against the fitted grids
            raise ValueError(
                f"{exc}; the fitted grids' widths (from the fit's sigma) cannot bin a "
                f"value this far out: clip or scale these rows' features to about the "
                f"range of the training data") from None
    try:
        raise_too_large(*found)
    except ValueError as exc:  # at fit: the cause is a sigma too small for X
        # sigma="scale" gave it: the values are outliers
        advice = SCALE_SIGMA_ADVICE if isinstance(param, str) else NUMBER_SIGMA_ADVICE
        raise ValueError(
            f"{exc}; sigma is too small for the size of these values "
            f"({_describe_sigma(sigma)}): {advice}"
        ) from None

