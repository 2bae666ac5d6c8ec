"""The column-major (CSC) structure of a random binning matrix Z: :class:`RBColumns`,
the hand-over from binning to the coordinate-descent and CG solvers (with each grid's
row labels), :func:`column_structure` to build one from any Z whose columns are grouped
by grid, and the exact check that a matrix is the one a structure describes.

Built in O(nnz) (bin counts, cumsum, one fill pass), never by a sort.
"""
import weakref

import numpy as np
import scipy.sparse as sp

from . import _binning
from ._plan import _DEFAULT_PATHS, _jobs_for

__all__ = ["RBColumns", "column_structure"]


#: entries of Z's index and data arrays sampled for the fingerprint of RBColumns.built_with
FINGERPRINT_ENTRIES = 4096


def _fingerprint(Z):
    picks = []
    for a in (Z.indptr, Z.indices, Z.data):
        step = max(1, a.shape[0] // FINGERPRINT_ENTRIES)
        picks.append(np.ascontiguousarray(a[::step]).tobytes())
    return hash((Z.shape, int(Z.nnz), *picks))


def _own_arrays(columns):
    labels = columns.grid_labels
    return (columns.indptr, columns.indices, columns.grid_ptr) + (
        tuple(labels) if isinstance(labels, (list, tuple)) else (labels,))


class _Provenance:
    """Weak references to the arrays of the Z an RBColumns was built with, and their
    fingerprint (the structure must not keep a Z of gigabytes alive); and the structure's
    own arrays as they were then (a structure whose arrays were replaced is checked in
    full)."""

    __slots__ = ("refs", "fingerprint", "own")

    def __init__(self, Z, columns):
        self.refs = tuple(weakref.ref(a) for a in (Z.indptr, Z.indices, Z.data))
        self.fingerprint = _fingerprint(Z)
        self.own = _own_arrays(columns)      # held: an id of a freed array can recur

    def matches(self, Z, columns):
        if not sp.issparse(Z) or Z.format != "csr":
            return False
        arrays = (Z.indptr, Z.indices, Z.data)
        return (all(r() is a for r, a in zip(self.refs, arrays))
                and all(a is b for a, b in zip(_own_arrays(columns), self.own))
                and len(_own_arrays(columns)) == len(self.own)
                and _fingerprint(Z) == self.fingerprint)


class RBColumns:
    """Column-major (CSC) structure of one random binning matrix Z (public).

    ``RandomBinning.fit_transform(X, return_columns=True)`` returns ``(Z, columns)``;
    :func:`column_structure` builds one from any Z whose columns are grouped by
    grid. An RBColumns describes exactly that Z (same shape, same entries); the
    solvers take it as ``columns=`` instead of building it again, and
    :meth:`check_matrix` verifies, in O(nnz), that a matrix is the one it describes.
    All stored values of Z are the same constant ``value`` (1/sqrt(R), docs/design.md
    contract 6), so only the structure is kept.

    Attributes
    ----------
    indptr : int64 ndarray (D + 1,)
        Column j's rows are ``indices[indptr[j]:indptr[j + 1]]``.
    indices : int32 (int64 if n_rows >= 2**31) ndarray (nnz,)
        Row ids, increasing within each column.
    grid_ptr : int64 ndarray (R + 1,)
        Columns of grid r are ``grid_ptr[r]:grid_ptr[r + 1]``; their entries
        are the contiguous block ``indptr[grid_ptr[r]]:indptr[grid_ptr[r + 1]]``
        (for training data, ``r * n_rows:(r + 1) * n_rows``). A row has at most
        one entry per grid, so a grid's columns touch disjoint rows (the paper's
        block structure, section 4: the bins of one grid update in parallel).
    value : float
        The stored value of every entry.
    n_rows : int
        N, the number of rows of Z.
    grid_labels : list of R arrays or None
        Entry i of array r: the bin (column - grid_ptr[r]) of row i in grid r,
        uint16 for grids under 65536 bins, else int32 (built with the training
        structure; the CD grid mode reads them instead of building its own).
        The label layout is the one ``rbcd.solvers._cd.label_targets`` defines.
    """

    def __init__(self, indptr, indices, grid_ptr, value, n_rows, grid_labels=None,
                 source=None):
        self.indptr = indptr
        self.indices = indices
        self.grid_ptr = grid_ptr
        self.value = float(value)
        self.n_rows = int(n_rows)
        self.grid_labels = grid_labels
        self._source = None if source is None else _Provenance(source, self)

    def built_with(self, Z):
        """True when Z holds the very index and value arrays this structure was built
        with (RandomBinning.fit_transform returns the two together) and they still match
        a fingerprint of FINGERPRINT_ENTRIES of their entries taken then: the solvers then
        skip the entry-by-entry check. Any other Z is checked in full."""
        return self._source is not None and self._source.matches(Z, self)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_source"] = None         # array identity does not survive a pickle
        return state

    def __setstate__(self, state):
        state.setdefault("_source", None)
        self.__dict__.update(state)

    @property
    def n_columns(self):
        return self.indptr.shape[0] - 1

    @property
    def n_grids(self):
        return self.grid_ptr.shape[0] - 1

    def check_matrix(self, Z, n_samples=None):
        """Raise ValueError unless Z is exactly the matrix this structure describes.

        Checks Z's shape, nnz and stored values, then every entry of Z against the
        structure and, where ``grid_labels`` are present, every label
        (:func:`structure_difference`): O(nnz + N R) in one pass each, serial, with N
        cursors of scratch; Z is not copied when it is CSR with sorted indices.
        ``n_samples`` is accepted for compatibility and ignored (the check once sampled
        rows; it now reads them all).
        """
        if not sp.issparse(Z):
            raise ValueError(f"Z must be a scipy sparse matrix, got {type(Z).__name__}")
        if Z.shape != (self.n_rows, self.n_columns):
            raise ValueError(
                f"Z has shape {Z.shape}, the column structure describes "
                f"{(self.n_rows, self.n_columns)}"
            )
        if Z.format != "csr":
            Z = Z.tocsr()
        if Z.nnz != self.indices.shape[0]:
            raise ValueError(
                f"Z has {Z.nnz} stored entries, the column structure {self.indices.shape[0]}"
            )
        if Z.nnz and np.any(Z.data != self.value):
            raise ValueError("Z's values differ from the column structure's value")
        detail = structure_difference(Z, self.indptr, self.indices, self.grid_ptr,
                                      self.grid_labels)
        if detail is not None:
            raise ValueError(f"Z does not match the column structure: {detail}")

    def __repr__(self):
        return (
            f"RBColumns(n_rows={self.n_rows}, n_columns={self.n_columns}, "
            f"n_grids={self.n_grids}, nnz={self.indices.shape[0]}, value={self.value!r})"
        )


def structure_difference(Z, indptr, indices, grid_ptr, grid_labels=None):
    """None when CSR Z holds exactly the entries of the column structure ``(indptr,
    indices)`` (and, with ``grid_labels``, those labels describe the structure), else
    what differs, in words. Shapes, nnz and values are the caller's to check; the
    labels' layout too (R arrays of N uint16 / int32, ``_grid.pxd``).

    Exact (issue 31 item 1: a sampled check passed Z with two rows swapped): each row's
    entries are walked in column order against the structure's columns
    (``_binning.structure_mismatch``, O(nnz + N + D)), then each grid's labels against
    its columns (``_binning.labels_mismatch``, O(N R + nnz)).
    """
    if not Z.has_sorted_indices:
        Z = Z.sorted_indices()
    z_indices = Z.indices
    if z_indices.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        z_indices = z_indices.astype(np.int64)
    rows = np.asarray(indices)
    if rows.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        rows = rows.astype(np.int64)
    col_ptr = np.ascontiguousarray(indptr, dtype=np.int64)
    i, j = _binning.structure_mismatch(np.ascontiguousarray(Z.indptr, dtype=np.int64),
                                       np.ascontiguousarray(z_indices), col_ptr,
                                       np.ascontiguousarray(rows))
    if i != -1 or j != -1:
        return (f"Z and the structure differ at row {i}, column {j} (one of them holds "
                "that entry, the other not)")
    if grid_labels is None or callable(grid_labels):
        return None
    g, i, label = _binning.labels_mismatch(list(grid_labels), col_ptr, np.ascontiguousarray(rows),
                                           np.ascontiguousarray(grid_ptr, dtype=np.int64),
                                           Z.shape[0])
    if g == -1:
        return None
    n_bins = int(grid_ptr[g + 1] - grid_ptr[g])
    if label > n_bins or label < 0:
        return (f"grid labels of grid {g} are corrupt: label {label} of row {i} exceeds the "
                f"grid's {n_bins} bins")
    return (f"grid labels of grid {g} are corrupt: row {i} is labelled {label}, not the bin "
            "that holds it in the structure")


def _check_grid_ptr(grid_ptr, n_cols):
    gp = np.asarray(grid_ptr)
    if gp.ndim != 1 or gp.shape[0] < 2 or gp.dtype.kind not in "iu":
        raise ValueError(
            f"grid_ptr must be a 1-D integer array of length R + 1 >= 2, got {grid_ptr!r}"
        )
    gp = np.ascontiguousarray(gp, dtype=np.int64)
    if gp[0] != 0 or gp[-1] != n_cols or np.any(np.diff(gp) < 0):
        raise ValueError(
            f"grid_ptr must be non-decreasing from 0 to the number of columns {n_cols}, "
            f"got first {int(gp[0])} and last {int(gp[-1])}"
        )
    return gp


def column_structure(Z, grid_ptr, n_jobs=None, *, _paths=None):
    """The :class:`RBColumns` of a CSR matrix whose columns are grouped by grid.

    Count (bincount of the column indices), cumsum, fill (parallel over blocks
    of grids, rows in increasing order): O(nnz), no sort. Raises ValueError if
    ``grid_ptr`` does not span Z's columns, if a row has more than one entry
    in some grid, or if the stored values are not all equal.
    """
    if not sp.issparse(Z):
        raise ValueError(f"Z must be a scipy sparse matrix, got {type(Z).__name__}")
    if Z.format != "csr":
        Z = Z.tocsr()
    n_rows, n_cols = Z.shape
    gp = _check_grid_ptr(grid_ptr, n_cols)
    if not Z.has_sorted_indices:
        Z = Z.sorted_indices()
    n_threads = _jobs_for(n_jobs, Z.nnz + n_rows, _DEFAULT_PATHS if _paths is None else _paths)
    idx = np.promote_types(Z.indptr.dtype, Z.indices.dtype)
    if idx not in (np.dtype(np.int32), np.dtype(np.int64)):
        idx = np.dtype(np.int64)
    indptr = np.ascontiguousarray(Z.indptr, dtype=idx)
    indices = np.ascontiguousarray(Z.indices, dtype=idx)
    row, grid = _binning.check_grid_rows(indptr, indices, gp, n_threads)
    if row >= 0:
        raise ValueError(
            f"row {row} has more than one entry in grid {grid}: not a random binning "
            "grid structure (at most one entry per row per grid)"
        )
    data = Z.data
    if data.shape[0] > 0:
        value = data[0]
        if not np.all(data == value):
            raise ValueError(
                "Z's stored values are not all equal: not a random binning matrix "
                "(exact mode gives the constant 1/sqrt(n_grids))"
            )
        value = float(value)
    else:
        value = 1.0 / np.sqrt(np.float64(gp.shape[0] - 1))
    counts = np.bincount(indices, minlength=n_cols) if indices.shape[0] else np.zeros(n_cols, np.int64)
    col_ptr = np.zeros(n_cols + 1, dtype=np.int64)
    np.cumsum(counts, out=col_ptr[1:])
    next_pos = col_ptr[:-1].copy()
    rows = np.empty(indices.shape[0], dtype=np.int32 if n_rows < 2**31 else np.int64)
    _binning.csc_fill_general(indptr, indices, next_pos, gp, rows, n_threads)
    return RBColumns(col_ptr, rows, gp, value, n_rows)

