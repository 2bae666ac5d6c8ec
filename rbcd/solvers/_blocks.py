"""Products of one row block of a random binning matrix, from its grid labels.

For callers that hold Z in row blocks (rbcd.dask: one block per partition, kept on its
worker) and need the operator of the ridge CG on each block with the kernels of the
local solver (rbcd.solvers._sparse: ``labels_matmat`` / ``labels_tmatmat``, 2 bytes per
entry, parallel, and ``csr_matmat`` for several right-hand sides, as
rbcd.solvers.cg._Products chooses). Additive: the local solvers do not use this module.

A :class:`GridBlock` is built once per block from its CSR rows when the block has the
shape of random binning *training* rows: every row holds exactly one entry in every grid
(``indptr = R * arange(n + 1)``, the entry of grid r at position r of the row, inside
grid r's columns ``grid_ptr[r]:grid_ptr[r + 1]``) and every stored value is the same
constant (1/sqrt(R)). :func:`grid_block` returns None for any other block; the caller
then uses a general sparse product.

Labels use the layout of ``rbcd/binning/_grid.pxd`` (``rbcd.solvers._cd.label_dtype``):
entry i of array r is the bin ``column - grid_ptr[r]`` of row i in grid r, uint16 for a
grid under 65536 bins, else int32. The products sum in the order of the local kernels
(grids in order within a row, rows in order within a column), so a block's products are
bitwise those of the local operator on the same rows, for any thread count.
"""
import numpy as np
import scipy.sparse as sp

from . import _sparse
from ._columns import _all_equal
from ..binning import _binning

__all__ = ["GridBlock", "grid_block"]

# multiply-adds per thread below which a product runs on fewer threads (as rbcd.solvers.cg)
WORK_PER_THREAD = 50_000


class GridBlock:
    """One row block of a random binning matrix: its grid labels, its CSR arrays (for
    several right-hand sides) and its constant stored value.

    Attributes
    ----------
    labels : list of R arrays (n_rows,), the bins of the rows in each grid
    grid_ptr : int64 (R + 1,), the grids' column boundaries (D = grid_ptr[-1])
    value : float, the stored value of every entry
    indptr, indices : the block's CSR arrays (int32 or int64, one dtype)
    """

    def __init__(self, labels, grid_ptr, value, indptr, indices):
        self.labels = labels
        self.grid_ptr = np.ascontiguousarray(grid_ptr, dtype=np.int64)
        self.value = float(value)
        self.indptr = indptr
        self.indices = indices
        self.n_rows = int(indptr.shape[0] - 1)
        self.n_cols = int(self.grid_ptr[-1])

    @property
    def nbytes(self):
        return int(sum(a.nbytes for a in self.labels) + self.indptr.nbytes
                   + self.indices.nbytes + self.grid_ptr.nbytes)

    def _pointers(self):
        # raw addresses of the label arrays, taken per call: a GridBlock may be pickled
        # (spilled to disk, moved between workers) and its arrays then live elsewhere
        ptrs = np.array([a.ctypes.data for a in self.labels], dtype=np.uintp)
        wide = np.array([a.dtype == np.int32 for a in self.labels], dtype=np.uint8)
        return ptrs, wide

    def _threads(self, n_threads, k):
        work = self.indices.shape[0] * max(1, k)
        return max(1, min(int(n_threads), int(work // WORK_PER_THREAD)))

    def dot(self, V, n_threads):
        """Z_b @ V, V (D, k) -> (n_rows, k) float64."""
        V = np.ascontiguousarray(V, dtype=np.float64)
        out = np.empty((self.n_rows, V.shape[1]), dtype=np.float64)
        if self.n_rows == 0:
            return out
        nt = self._threads(n_threads, V.shape[1])
        if V.shape[1] == 1:
            ptrs, wide = self._pointers()
            _sparse.labels_matmat(ptrs, wide, self.grid_ptr, self.value, V, out, nt)
        else:
            # several right-hand sides: the CSR kernel's register blocks (as the local solver)
            _sparse.csr_matmat(self.indptr, self.indices, np.ones(1), True, self.value, V, out, nt)
        return out

    def tdot(self, U, n_threads):
        """Z_b^T @ U, U (n_rows, k) -> (D, k) float64."""
        U = np.ascontiguousarray(U, dtype=np.float64)
        out = np.empty((self.n_cols, U.shape[1]), dtype=np.float64)
        if self.n_rows == 0:
            out[:] = 0.0
            return out
        ptrs, wide = self._pointers()
        _sparse.labels_tmatmat(ptrs, wide, self.grid_ptr, self.value, U, out,
                               self._threads(n_threads, U.shape[1]))
        return out

    def col_stats(self, s, n_threads):
        """(sum_i s_i z_ij, sum_i s_i z_ij^2) for every column j; the same bits as
        rbcd.solvers._sparse.csc_weighted_col_stats with a constant value: (a * c, a * c * c)
        with a the weighted count of the column."""
        colsum = self.tdot(np.asarray(s, dtype=np.float64).reshape(-1, 1), n_threads)[:, 0]
        return colsum, colsum * self.value

    def gram_apply(self, P, zP, s, n_threads):
        """(Z_b^T T, 1^T T) with T = S_b (Z_b P - 1 zP): the block's share of the centred
        ridge operator Zc^T S Zc P = sum_b Z_b^T T_b - zbar (sum_b 1^T T_b)^T.

        ``zP``: zbar . P (k,), or None without centring; ``s``: the block's weights
        (n_rows,), or None for unit weights."""
        T = self.dot(P, n_threads)
        if zP is not None:
            T -= zP
        if s is not None:
            T *= s[:, None]
        return self.tdot(T, n_threads), T.sum(axis=0)


def grid_block(Z, grid_ptr, n_threads=1):
    """The :class:`GridBlock` of the CSR block Z under the grid structure ``grid_ptr``, or
    None unless Z has the shape of random binning training rows (module docstring).

    Two passes over Z's indices: the smallest and largest column of each grid's entries
    (every entry must lie in its grid's columns), then the labels, written by the local
    binning's kernel (rbcd.binning._binning.training_labels) on ``n_threads`` threads."""
    if not sp.issparse(Z):
        return None
    Z = sp.csr_matrix(Z)
    gp = np.ascontiguousarray(grid_ptr, dtype=np.int64)
    R = gp.shape[0] - 1
    n = Z.shape[0]
    if R < 1 or gp[-1] != Z.shape[1] or Z.indptr.shape[0] != n + 1:
        return None
    data = Z.data
    if data.shape[0] == 0 or not _all_equal(data, n_threads):
        return None
    if not np.array_equal(Z.indptr, R * np.arange(n + 1, dtype=np.int64)):
        return None
    ids = np.ascontiguousarray(Z.indices[: n * R])
    idx = ids.reshape(n, R)
    if np.any(idx.min(axis=0) < gp[:-1]) or np.any(idx.max(axis=0) >= gp[1:]):
        return None                                       # an entry outside its grid
    labels = _binning.training_labels(ids, gp, n, max(1, int(n_threads)))
    if labels is None:                                    # a grid of 2**31 bins or more
        return None
    small = Z.indices.dtype != np.int64 and int(Z.indptr[-1]) < 2**31
    itype = np.int32 if small else np.int64
    return GridBlock(labels, gp, float(data[0]),
                     np.ascontiguousarray(Z.indptr, dtype=itype),
                     np.ascontiguousarray(Z.indices, dtype=itype))
