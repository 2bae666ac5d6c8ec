"""The column form of Z that both solver families read, and the checked hand-over of the
grid structure (``fit(Z, y, columns=...)``).

``columns`` is optional. It is the grid structure of a random binning matrix Z: the
:class:`rbcd.binning.RBColumns` returned with Z by
``RandomBinning.fit_transform(X, return_columns=True)``, or a fitted exact-mode
``RandomBinning`` (the structure is then rebuilt from Z). The coordinate descent solvers
use it for the grid-block mode (docs/design.md, "Parallel coordinate descent"), the CG solver
for its grid-projected Jacobi preconditioner (docs/design.md, "Ridge by conjugate gradient").
Neither changes the solution it converges to.

The hand-over is checked exactly (:func:`check_columns_of`): shape, stored-entry count and
values, then every entry of Z against the structure and every grid label it carries, in
O(nnz + N R), a small part of a fit. A structure that is not Z's is a ValueError.
"""
import numpy as np
import scipy.sparse as sp

from . import _cd, _sparse
from .._threads import effective_n_threads
from ..binning.columns import _check_grid_ptr

__all__ = ["check_columns_of", "columns_from", "plain_columns", "to_csc"]


class _Columns:
    """Z in the form the kernels walk: CSC (int64 indptr, int32/int64 sorted row indices),
    values as float64, or ``data=None`` with the constant ``zval`` when every stored value is
    equal (random binning: 1/sqrt(R), the RB fast path), and ``grid_ptr`` when known."""

    def __init__(self, indptr, indices, data, zval, n_rows, grid_ptr=None):
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        if indices.dtype not in (np.int32, np.int64):
            indices = indices.astype(np.int64)
        self.indices = np.ascontiguousarray(indices)
        self.data = data
        self.zval = float(zval)
        self.n_rows = int(n_rows)
        self.n_cols = self.indptr.shape[0] - 1
        self.grid_ptr = grid_ptr

    @property
    def nnz(self):
        return int(self.indptr[-1])

    @property
    def value(self):
        """The constant stored value (None when values are stored): what
        rbcd.solvers.cg's products read from a column structure."""
        return self.zval if self.data is None else None

    def grid_labels(self, n_threads):
        """The bin of each row in each grid (R arrays of n_rows, layout of
        ``rbcd/binning/_grid.pxd``), built once and shared by the problems of a fit; None
        where they do not apply (stored values not constant, or no grid structure)."""
        if self.data is not None or self.grid_ptr is None:
            return None
        if not hasattr(self, "_grid_labels"):
            self._grid_labels = _cd.grid_labels(self.indptr, self.indices, self.grid_ptr,
                                                self.n_rows, n_threads)
        return self._grid_labels

    def check(self):
        """ValueError unless the structure is valid (the kernels index without checks)."""
        ip = self.indptr
        if ip.shape[0] < 1 or ip[0] != 0 or np.any(ip[1:] < ip[:-1]) or ip[-1] > self.indices.shape[0]:
            raise ValueError("the column structure of Z is invalid: indptr must rise from 0 to at "
                             "most the number of stored entries")
        if self.data is not None and self.data.shape[0] < ip[-1]:
            raise ValueError("the column structure of Z is invalid: fewer values than entries")
        if ip[-1] > 0:
            rows = self.indices[: ip[-1]]
            if rows.min() < 0 or rows.max() >= self.n_rows:
                raise ValueError(f"the column structure of Z is invalid: row indices must lie in "
                                 f"[0, {self.n_rows})")
        return self

    def column_sums(self, v, n_threads):
        """Z^T v (v float64 of length n_rows)."""
        return _cd.column_sums(self.indptr, self.indices, self.data, self.zval,
                               np.ascontiguousarray(v, dtype=np.float64), n_threads)


def _all_equal(data, n_threads):
    """Every entry of the array equals its first (rbcd.solvers._sparse.all_equal for
    float32 / float64, numpy otherwise)."""
    if data.dtype in (np.float32, np.float64) and data.flags.c_contiguous:
        return _sparse.all_equal(data, int(n_threads))
    return bool(data.shape[0] == 0 or np.all(data == data[0]))


def _constant_values(data, n_threads=1):
    """(None, value) when all stored values are equal, else (float64 data, 1.0)."""
    if data.shape[0] > 0 and _all_equal(data, n_threads):
        return None, float(data[0])
    if data.shape[0] == 0:
        return None, 1.0
    return np.ascontiguousarray(data, dtype=np.float64), 1.0


#: the parallel transpose (to_csc) gives each thread at least this many stored entries,
#: and its per-thread column counts (8 bytes x threads x columns) at most this many bytes
#: per stored entry: fewer threads for small or wide matrices, scipy's transpose for one
TRANSPOSE_MIN_PER_THREAD = 1 << 19
TRANSPOSE_SCRATCH_PER_ENTRY = 2


def to_csc(Z, n_threads):
    """Z (any scipy sparse matrix) as a canonical CSC matrix (sorted row indices, duplicates
    summed): scipy's arrays, transposed on up to ``n_threads`` threads
    (rbcd.solvers._sparse.csr_to_csc) where that pays, by scipy's ``tocsc`` otherwise.
    Z's structure must have been checked (rbcd._validation.check_sparse_structure)."""
    if Z.format == "csc":           # already column-major: no transpose
        C = Z
        if not C.has_canonical_format:
            C = C.copy()
            C.sum_duplicates()
        return C
    csr = Z if Z.format == "csr" else Z.tocsr()
    if not csr.has_canonical_format:
        csr = csr.copy()
        csr.sum_duplicates()
    nnz, n_cols = csr.indices.shape[0], csr.shape[1]
    T = min(int(n_threads), nnz // TRANSPOSE_MIN_PER_THREAD,
            nnz * TRANSPOSE_SCRATCH_PER_ENTRY // (8 * (n_cols + 1)))
    if T < 2 or csr.data.dtype not in (np.float32, np.float64) \
            or csr.indices.dtype != csr.indptr.dtype:
        C = csr.tocsc()
        C.has_canonical_format = True   # scipy's counting sort of a canonical CSR matrix
        return C
    indptr, indices, data = _sparse.csr_to_csc(csr.indptr, csr.indices, csr.data, n_cols, T)
    C = sp.csc_matrix((data, indices, indptr), shape=csr.shape, copy=False)
    C.has_canonical_format = True   # rows increase within each column; no duplicates
    return C


def plain_columns(Z, n_threads=1):
    """CSC view of any scipy sparse matrix or dense array (converted once; a sparse one
    on up to ``n_threads`` threads, :func:`to_csc`)."""
    if sp.issparse(Z):
        C = to_csc(Z, n_threads)
    else:
        C = sp.csc_matrix(np.asarray(Z))
    data, zval = _constant_values(C.data, n_threads)
    return _Columns(C.indptr, C.indices, data, zval, C.shape[0])


def check_grid_structure(cols, grid_ptr):
    """grid_ptr as int64, checked: 0 .. D non-decreasing, at most one entry per row per grid."""
    gp = _check_grid_ptr(grid_ptr, cols.n_cols)
    # grid of every stored entry; (grid, row) pairs must be distinct
    grid_of_col = np.repeat(np.arange(gp.shape[0] - 1, dtype=np.int64), np.diff(gp))
    grid_of_entry = np.repeat(grid_of_col, np.diff(cols.indptr))
    key = grid_of_entry * cols.n_rows + cols.indices.astype(np.int64)
    key.sort()
    dup = np.flatnonzero(key[1:] == key[:-1])
    if dup.shape[0]:
        r, i = divmod(int(key[dup[0]]), cols.n_rows)
        raise ValueError(
            f"row {i} has more than one entry in grid {r}: not a random binning grid structure "
            f"(parallel='grid' needs at most one entry per row per grid)"
        )
    return gp


def _is_rb_columns(obj):
    return all(hasattr(obj, a) for a in ("indptr", "indices", "grid_ptr", "value", "n_rows"))


def _not_z(detail):
    return ValueError(f"columns are not the grid structure of this Z: {detail} (pass the "
                      "RBColumns returned with this Z by RandomBinning.fit_transform(X, "
                      "return_columns=True))")


def check_columns_of(Z, columns):
    """ValueError unless the RBColumns ``columns`` describe Z exactly; returns grid_ptr (int64).

    Checks the shape and the number of stored entries; ``grid_ptr``; that Z's stored values
    all equal ``columns.value``; that Z's entries are exactly the structure's (every row,
    in O(nnz + N + D)); and the grid labels, when present: one array per grid of n_rows
    entries, uint16 for a grid under 65536 bins else int32 (``rbcd/binning/_grid.pxd``),
    each the bin of its row in the structure, the bin count where the row has none
    (O(N R + nnz)). The Z an RBColumns was built with (the pair that
    RandomBinning.fit_transform(X, return_columns=True) returns, the very arrays) skips
    the entry-by-entry pass (RBColumns.built_with): at 4e5 rows and 64 grids that pass
    took 0.5 s, more than two CD epochs. Any other Z is checked entry by entry (issue 31
    item 1: the sampled check this replaced accepted Z with two rows swapped).
    """
    from ..binning.columns import structure_difference

    n_rows = int(columns.n_rows)
    indptr = np.asarray(columns.indptr)
    indices = np.asarray(columns.indices)
    if indptr.ndim != 1 or indices.ndim != 1:
        raise _not_z("indptr and indices must be 1-D")
    n_cols = indptr.shape[0] - 1
    if n_rows != Z.shape[0] or n_cols != Z.shape[1]:
        raise _not_z(f"they describe a {n_rows} x {n_cols} matrix but Z is "
                     f"{Z.shape[0]} x {Z.shape[1]}")
    nnz_z = int(Z.nnz) if sp.issparse(Z) else int(np.count_nonzero(Z))
    if n_cols < 0 or int(indptr[0]) != 0 or int(indptr[-1]) != indices.shape[0] \
            or int(indptr[-1]) != nnz_z:
        raise _not_z(f"they hold {int(indptr[-1]) if indptr.shape[0] else 0} entries but Z "
                     f"stores {nnz_z}")
    if np.any(indptr[1:] < indptr[:-1]):
        raise _not_z("their indptr decreases")
    try:
        gp = _check_grid_ptr(columns.grid_ptr, n_cols)
    except ValueError as exc:
        raise _not_z(str(exc)) from None
    built_with = getattr(columns, "built_with", None)
    if built_with is not None and built_with(Z):
        # the Z this structure came with (RandomBinning.fit_transform(X,
        # return_columns=True)): its entries are the structure's by construction; the
        # labels' layout and range are still checked (one C pass, O(N R))
        labels = getattr(columns, "grid_labels", None)
        if labels is not None and not callable(labels):
            _check_label_layout(labels, gp, n_rows, check_range=True)
        return gp
    Zr = Z.tocsr() if sp.issparse(Z) else sp.csr_matrix(np.asarray(Z))
    if Zr.nnz and not np.all(Zr.data == float(columns.value)):
        raise _not_z(f"Z stores values other than columns.value={float(columns.value)!r}")
    labels = getattr(columns, "grid_labels", None)
    if labels is not None and not callable(labels):
        _check_label_layout(labels, gp, n_rows)
    else:
        labels = None
    detail = structure_difference(Zr, indptr, indices, gp, labels)
    if detail is not None:
        if detail.startswith("grid labels"):
            raise ValueError(detail)
        raise _not_z(detail)
    return gp


def _check_label_layout(labels, gp, n_rows, check_range=False):
    """The layout of the grid labels (``rbcd/binning/_grid.pxd``): one array per grid,
    n_rows entries, C-contiguous, uint16 for a grid under 65536 bins else int32; with
    ``check_range`` also no label above its grid's bin count. Returns the label table
    ``(ptrs, wide)`` the label kernels read (``_binning.label_table``)."""
    from ..binning import _binning

    ptrs, wide, bad, problem = _binning.label_table(labels, gp, n_rows, check_range)
    if problem == 1:
        if bad < 0:
            raise _not_z(f"{len(labels)} label arrays for {gp.shape[0] - 1} grids")
        dt = np.dtype(np.int32) if gp[bad + 1] - gp[bad] >= 65536 else np.dtype(np.uint16)
        raise _not_z(f"the labels of grid {bad} must be {dt.name} of shape ({n_rows},)")
    if problem == 2:
        raise ValueError(f"grid labels of grid {bad} are corrupt: a label exceeds the "
                         f"grid's {int(gp[bad + 1] - gp[bad])} bins")
    return ptrs, wide


def columns_from(Z, columns, n_jobs):
    """The solvers' column form of Z; with ``columns`` also the grid structure.

    ``columns`` may be the RBColumns of Z (checked by :func:`check_columns_of` and used as
    is, no rebuild) or a fitted exact-mode RandomBinning (its ``grid_ptr_`` is checked
    against Z and the structure is rebuilt from Z, which checks that every row has at most
    one entry per grid).
    """
    if columns is None:
        return plain_columns(Z, effective_n_threads(n_jobs))
    if _is_rb_columns(columns):
        gp = check_columns_of(Z, columns)
        cols = _Columns(np.asarray(columns.indptr), np.asarray(columns.indices), None,
                        float(columns.value), int(columns.n_rows), gp)
        labels = getattr(columns, "grid_labels", None)
        if labels is not None and not callable(labels):
            cols._grid_labels = labels  # built with the structure (RandomBinning)
            cols._label_table = _check_label_layout(labels, gp, cols.n_rows)
        return cols
    grid_ptr = getattr(columns, "grid_ptr_", None)
    if grid_ptr is None:
        raise ValueError(
            "columns must be the RBColumns of Z (RandomBinning.fit_transform(X, "
            "return_columns=True)) or a fitted RandomBinning in exact mode (n_features=None); "
            f"got {type(columns).__name__} without grid_ptr_ (hashed mode or not fitted)"
        )
    grid_ptr = np.asarray(grid_ptr)
    if int(grid_ptr[-1]) != Z.shape[1]:
        raise _not_z(f"the binning has {int(grid_ptr[-1])} columns but Z has {Z.shape[1]}")
    try:
        from ..binning.columns import column_structure
    except ImportError:
        column_structure = None
    if column_structure is not None and sp.issparse(Z):
        Zr = Z.tocsr()
        if Zr.data.shape[0] and _all_equal(Zr.data, effective_n_threads(n_jobs)):
            # a plain RB matrix: the shared builder (parallel, checks the grid structure)
            rbc = column_structure(Zr, grid_ptr, n_jobs=n_jobs)
            return _Columns(rbc.indptr, np.asarray(rbc.indices), None, float(rbc.value),
                            rbc.n_rows, np.ascontiguousarray(rbc.grid_ptr, dtype=np.int64))
    cols = plain_columns(Z, effective_n_threads(n_jobs))
    cols.grid_ptr = check_grid_structure(cols, grid_ptr)
    return cols
