"""Z from the binning kernels' output: the CSR matrix of the training rows (and its
column-major :class:`RBColumns`, built in the same pass) and of new rows, exact or
hashed (docs/design.md contracts 4-6).

Each function takes the fitted RandomBinning ``est`` and reads its fitted state only.
"""
import numpy as np
import scipy.sparse as sp

from . import _binning
from .._validation import index_dtype
from ._input import _bin_range, _extremes, _raise_bad_bins, _take_columns
from .columns import RBColumns

#: Work per thread of one call of a transform kernel, in (row, grid, column + 8) units of
#: about 1.5 to 2 ns (a row's bin in one grid costs about a division or a threshold
#: count per column plus a lookup): about 30 ms. The kernels are called on ranges of
#: rows: a row's columns depend on that row only, so Z is the same for any ranges, and
#: between two calls Python runs its signal handlers (Ctrl-C during transform, issue 31
#: item 10).
TRANSFORM_CHUNK = 1 << 24


def _row_ranges(n_rows, n_grids, n_cols, n_threads):
    """The row ranges ``(i0, i1)`` of the transform kernels' calls on rows of ``n_cols``
    columns: whole blocks of 256 rows (the kernels' row block), about TRANSFORM_CHUNK
    units of work per thread each."""
    per_row = max(int(n_grids), 1) * (8 + max(int(n_cols), 1))
    step = TRANSFORM_CHUNK * max(int(n_threads), 1) // per_row
    step = max(256, (step + 255) // 256 * 256)
    return [(i0, min(i0 + step, n_rows)) for i0 in range(0, n_rows, step)] or [(0, 0)]


def _constant_data(nnz, value, dtype, n_threads):
    """The data array of Z, filled in parallel (first touch of fresh pages)."""
    data = _binning.empty(nnz, dtype)
    _binning.fill_constant(data, float(value), n_threads)
    return data


def _drop_entries(Z, rows, grids, grid_ptr):
    """Z without its entries of the given (row, grid) pairs (rows' entries stay sorted)."""
    n, D = Z.shape
    R = grid_ptr.shape[0] - 1
    entry_row = np.repeat(np.arange(n, dtype=np.int64), np.diff(Z.indptr))
    entry_grid = np.searchsorted(grid_ptr, Z.indices, side="right") - 1
    keep = ~np.isin(entry_row * R + entry_grid, np.unique(rows * R + grids))
    nnz = int(keep.sum())
    idx = index_dtype(D, nnz)
    indptr = np.zeros(n + 1, dtype=idx)
    np.cumsum(np.bincount(entry_row[keep], minlength=n), out=indptr[1:])
    out = sp.csr_matrix((Z.data[keep], Z.indices[keep].astype(idx), indptr), shape=(n, D),
                        copy=False)
    out.has_sorted_indices = True
    return out



def training_Z(est, n_samples, ids, n_threads):
    """Z of the training rows from fit's ids (exact mode): ``indptr = R * arange(N + 1)``,
    row i's columns at ``indices[i * R:(i + 1) * R]``."""
    R = est.n_bins_.shape[0]
    data = _binning.empty(ids.shape[0], est._dtype_)
    _binning.finish_training(ids, est.grid_ptr_, data, float(est._value()), n_threads)
    indptr = _binning.row_starts(n_samples, R, ids.dtype, n_threads)
    Z = sp.csr_matrix((data, ids, indptr), shape=(n_samples, est.n_features_out_), copy=False)
    Z.has_sorted_indices = True
    return Z


def columns_of_training(est, X, paths, sample_weight=None):
    """Fit and return ``(Z, RBColumns)`` built in one go (exact mode only).

    The CSC structure comes from the bin counts of fit (cumsum) and one
    fill pass over Z's indices, parallel over blocks of grids; grid r's
    entries are the block ``r * N:(r + 1) * N``.
    """
    if est.n_features is not None:
        raise ValueError(
            "the grid column structure needs exact mode (n_features=None); "
            "hashed columns are shared between grids"
        )
    X, ids, counts, n_threads = est._fit(X, "columns", paths, sample_weight)
    n_samples = X.shape[0]
    R = est.n_bins_.shape[0]
    Z = training_Z(est, n_samples, ids, n_threads)
    col_ptr = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=col_ptr[1:])
    del counts
    rows = _binning.empty(ids.shape[0], np.int32 if n_samples < 2**31 else np.int64)
    labels = _binning.training_labels(Z.indices, est.grid_ptr_, n_samples, n_threads)
    if labels is None:  # a grid of 2**31 bins or more: fill from Z's indices
        next_pos = col_ptr[:-1].copy()
        _binning.csc_fill_training(Z.indices, next_pos, R, est.grid_ptr_, rows, n_threads)
        del next_pos
    else:
        _binning.csc_from_labels(labels, col_ptr, est.grid_ptr_, n_samples, rows, n_threads)
    value = float(np.asarray(est._value(), dtype=est._dtype_))
    return Z, RBColumns(col_ptr, rows, est.grid_ptr_.copy(), value, n_samples,
                        grid_labels=labels, source=Z)


def transform_exact(est, X, cmin, cmax, n_threads, paths):
    """Exact Z of new rows X (cmin / cmax: the extremes of dense X, None for sparse X);
    a bin never seen in fit gives no entry."""
    grids, X, miss_rows, miss_grids = exact_input(est, X, cmin, cmax, n_threads)
    return _exact_build(est, grids, X, miss_rows, miss_grids, n_threads, paths)


def exact_input(est, X, cmin, cmax, n_threads):
    """The checks of transform_exact (the fitted tables, X's columns, its values' bins),
    nothing built: (grids, the varying columns of X, the rows and grids that leave a
    constant feature's training bin). Raises the errors that name X's rows."""
    grids = getattr(est, "_tables", None)
    if not isinstance(grids, _binning.GridTables):
        raise ValueError("this RandomBinning has no fitted grid tables (damaged state?)")
    if est.n_features_out_ != int(grids.grid_ptr[-1]):
        raise ValueError("n_features_out_ does not match the fitted grid tables")
    constant = est.__dict__.get("_constant_columns")
    # cmin / cmax: None for sparse X, whose varying columns' extremes are taken from
    # their dense copy (nothing of length d)
    if constant is None:
        if grids.n_features_in != X.shape[1]:
            raise ValueError("the fitted grid tables do not match n_features_in_")
        miss_rows = miss_grids = np.zeros(0, dtype=np.int64)
        XV = _take_columns(X)
        if cmin is None:
            cmin, cmax = _extremes(XV, n_threads)
        bad = _bad_bin_columns(grids, cmin, cmax)
        if bad.any():
            cols = np.flatnonzero(bad)
            _raise_bad_bins(X, cols, grids.widths[:, cols], grids.offsets[:, cols])
    else:
        constant.check(X.shape[1], grids.n_features_in)
        varying = constant.varying
        miss_rows, miss_grids, bad_const = constant.misses(X)
        if varying.shape[0]:
            XV = _take_columns(X, varying)
            if cmin is None:
                vmin, vmax = _extremes(XV, n_threads)
            else:
                vmin, vmax = cmin[varying], cmax[varying]
            bad_var = varying[_bad_bin_columns(grids, vmin, vmax)]
        else:
            XV = np.zeros((X.shape[0], 1))
            bad_var = varying
        if bad_var.shape[0] or bad_const.shape[0]:
            cols = np.union1d(bad_var, bad_const)
            _raise_bad_bins(X, cols, *constant.draw.columns(cols))
    return grids, XV, miss_rows, miss_grids


def _bad_bin_columns(grids, cmin, cmax):
    """The columns (a boolean mask over the grids' columns) where some grid's bin of the
    extremes does not fit in int64: none when every extreme lies within the grids'
    safe range (GridTables.safe_lo / safe_hi), else _bin_range's exact check."""
    if np.all(cmin >= grids.safe_lo) and np.all(cmax <= grids.safe_hi):
        return np.zeros(cmin.shape[0], dtype=bool)
    return _bin_range(grids.widths, grids.offsets, cmin, cmax)[2]


def _exact_build(est, grids, X, miss_rows, miss_grids, n_threads, paths):
    """transform_exact's Z of the checked varying columns X (exact_input)."""
    R = grids.n_grids
    D = est.n_features_out_
    n_samples = X.shape[0]
    tmp_idx = index_dtype(D, n_samples * R)
    out = _binning.empty(n_samples * R, tmp_idx)
    row_nnz = np.empty(n_samples, dtype=np.int64)
    for i0, i1 in _row_ranges(n_samples, R, X.shape[1], n_threads):
        _binning.transform_exact(grids, X[i0:i1], out[i0 * R:i1 * R], row_nnz[i0:i1],
                                 n_threads, paths)
    nnz = int(row_nnz.sum())
    idx = index_dtype(D, nnz)
    if nnz == n_samples * R and out.dtype == idx:
        indices = out
        indptr = _binning.row_starts(n_samples, R, idx, n_threads)
    else:
        indptr = np.zeros(n_samples + 1, dtype=idx)
        np.cumsum(row_nnz, out=indptr[1:])
        if out.dtype == idx:
            # rows packed in place (no second array; the tail past nnz stays unused)
            _binning.compact_rows_inplace(out, row_nnz, R, indptr, n_threads)
            indices = out[:nnz]
        else:
            indices = _binning.empty(nnz, idx)
            _binning.compact_rows(out, row_nnz, R, indptr, indices, n_threads)
        del out
    data = _constant_data(nnz, est._value(), est._dtype_, n_threads)
    Z = sp.csr_matrix((data, indices, indptr), shape=(n_samples, D), copy=False)
    Z.has_sorted_indices = True
    if miss_rows.shape[0]:  # new rows that left a constant feature's training bin
        Z = _drop_entries(Z, miss_rows, miss_grids, grids.grid_ptr)
    return Z


def transform_hashed(est, X, n_threads, paths):
    """Hashed Z of dense X (bins already checked to fit in int64)."""
    n_samples = X.shape[0]
    widths, offsets = est._drawn_grids()
    R = widths.shape[0]
    m = int(est.n_features_out_)
    out = _binning.empty(n_samples * R, np.int32 if m <= 2**31 else np.int64)
    mult = _binning.empty(n_samples * R, np.int32)
    row_nnz = np.empty(n_samples, dtype=np.int64)
    for i0, i1 in _row_ranges(n_samples, R, X.shape[1], n_threads):
        _binning.transform_hashed(X[i0:i1], widths, offsets, np.uint64(m), out[i0 * R:i1 * R],
                                  mult[i0 * R:i1 * R], row_nnz[i0:i1], n_threads, paths)
    nnz = int(row_nnz.sum())
    idx = index_dtype(m, nnz)
    if nnz == n_samples * R and out.dtype == idx:
        del mult  # no collision in any row: every multiplicity is 1
        indices = out
        indptr = _binning.row_starts(n_samples, R, idx, n_threads)
        data = _constant_data(nnz, est._value(), est._dtype_, n_threads)
    else:
        indptr = np.zeros(n_samples + 1, dtype=idx)
        np.cumsum(row_nnz, out=indptr[1:])
        indptr64 = indptr.astype(np.int64, copy=False)
        indices = _binning.empty(nnz, idx)
        _binning.compact_rows(out, row_nnz, R, indptr, indices, n_threads)
        del out
        data = _binning.empty(nnz, est._dtype_)
        _binning.compact_mult(mult, row_nnz, R, indptr64, float(np.sqrt(np.float64(R))),
                              data, n_threads)
    Z = sp.csr_matrix((data, indices, indptr), shape=(n_samples, m), copy=False)
    Z.has_sorted_indices = True
    return Z

