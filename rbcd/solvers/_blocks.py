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
from ._cd import label_dtype

__all__ = ["GridBlock", "grid_block"]

# multiply-adds per thread below which a product runs on fewer threads (as rbcd.solvers.cg)
WORK_PER_THREAD = 50_000
# rows converted per step by grid_block (bounds its temporaries to ROWS_PER_STEP * R)
ROWS_PER_STEP = 4096


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


def grid_block(Z, grid_ptr):
    """The :class:`GridBlock` of the CSR block Z under the grid structure ``grid_ptr``, or
    None unless Z has the shape of random binning training rows (module docstring).

    One pass over Z's indices in steps of ROWS_PER_STEP rows: each entry is checked to lie
    in its grid's columns, then written to its grid's labels."""
    if not sp.issparse(Z):
        return None
    Z = sp.csr_matrix(Z)
    gp = np.ascontiguousarray(grid_ptr, dtype=np.int64)
    R = gp.shape[0] - 1
    n = Z.shape[0]
    if R < 1 or gp[-1] != Z.shape[1] or Z.indptr.shape[0] != n + 1:
        return None
    data = Z.data
    if data.shape[0] == 0 or not np.all(data == data[0]):
        return None
    if not np.array_equal(Z.indptr, R * np.arange(n + 1, dtype=np.int64)):
        return None
    idx = Z.indices[: n * R].reshape(n, R)
    widths = np.diff(gp)
    if idx.dtype == np.int32 and all(label_dtype(int(w)) == np.uint16 for w in widths):
        # every grid under 65536 bins: the labels are the rows of one (R, n) uint16 array
        lo = gp[:-1].astype(np.int32)
        wu = widths.astype(np.uint32)
        L = np.empty((R, n), dtype=np.uint16)
        for i0 in range(0, n, ROWS_PER_STEP):
            i1 = min(n, i0 + ROWS_PER_STEP)
            part = idx[i0:i1] - lo                        # (rows, R): bin of each entry
            if np.any(part.view(np.uint32) >= wu):        # negative bins wrap to >= 2**31
                return None                               # an entry outside its grid
            L[:, i0:i1] = part.T
        labels = list(L)
    else:
        labels = [np.empty(n, dtype=label_dtype(int(w))) for w in widths]
        lo = gp[:-1]
        for i0 in range(0, n, ROWS_PER_STEP):
            i1 = min(n, i0 + ROWS_PER_STEP)
            part = idx[i0:i1].astype(np.int64) - lo
            if np.any(part < 0) or np.any(part >= widths):
                return None
            part = part.T.copy()
            for r in range(R):
                labels[r][i0:i1] = part[r]
    small = Z.indices.dtype != np.int64 and int(Z.indptr[-1]) < 2**31
    itype = np.int32 if small else np.int64
    return GridBlock(labels, gp, float(data[0]),
                     np.ascontiguousarray(Z.indptr, dtype=itype),
                     np.ascontiguousarray(Z.indices, dtype=itype))
