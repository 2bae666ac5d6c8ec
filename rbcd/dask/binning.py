"""Random binning over row partitions (issue 13, item 1).

Exact mode (``n_features=None``) numbers the columns of grid r by the first appearance of
each bin in row order (docs/design.md contract 4). The distributed fit gives that numbering, and
so Z, bit for bit for any chunking:

1. Each partition is fitted on its worker by a local :class:`rbcd.RandomBinning` with the
   same grids (widths and offsets depend only on the random state, n_grids, sigma and d).
   In that local fit a grid's columns are numbered by first appearance within the
   partition, so row i is the first appearance of its bin in grid r iff its local column
   id in grid r exceeds every earlier row's; the rows that are a first appearance in some
   grid are the partition's *first rows*.
2. Every global first appearance is a partition first row, and the concatenation, in
   partition order, of the partitions' first rows meets the bins of every grid in the same
   order as the whole data does. Fitting a RandomBinning on it therefore gives exactly the
   global column tables. The concatenations are reduced pairwise (first rows of first
   rows) in a fixed binary tree, so the driver receives at most D rows.
3. Each partition's local Z is renumbered to the global columns by a table mapping each
   local column to the global column of its first row, computed on the worker from the
   global tables; the local Z's arrays are reused, only the indices are rewritten.

Hashed mode (``n_features=m``) has no tables: the grids are drawn on the driver and every
partition is transformed independently.

``sigma="scale"`` (rbcd/_scale.py): the pair stream is drawn on the driver with the global
N, only the sampled rows are gathered, and the distances are summed exactly as the local
rule sums them, so ``sigma_`` is the local value on the concatenated rows.
"""
import copy

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .. import _scale
from .._random import make_generator
from ..binning import RandomBinning as LocalRandomBinning
from ._data import (
    array_of_parts,
    as_rows,
    check_finite_block,
    check_n_jobs,
    client_or_error,
    dask,
    resolve_task_jobs,
    row_offsets,
    tasks_per_worker,
    tree_reduce,
)

__all__ = ["PartitionedColumns", "RandomBinning"]


# ---------------------------------------------------------------------------- worker side
def _local(params, n_jobs):
    """A local RandomBinning with the fit's parameters. The random state is copied: tasks
    of an in-process worker share the objects they are given, and every partition must
    draw the grids from the same state."""
    p = dict(params)
    p["random_state"] = copy.deepcopy(p["random_state"])
    p["n_jobs"] = n_jobs
    return LocalRandomBinning(**p)


def _first_mask(Z, R):
    """Per grid, the rows of a locally fitted training Z that are the first appearance of
    their bin (local ids are numbered by first appearance: a new bin's id is one more than
    every id before it). Yields (r, rows)."""
    n = Z.shape[0]
    idx = Z.indices.reshape(n, R)
    for r in range(R):
        c = idx[:, r]
        new = np.empty(n, dtype=bool)
        if n:
            new[0] = True
            np.greater(c[1:], np.maximum.accumulate(c)[:-1], out=new[1:])
        yield r, np.flatnonzero(new)


def _first_rows_of(X, params, n_jobs):
    """(Z, rows, X[rows]) of a local exact fit of X: rows = first rows (sorted)."""
    rb = _local(params, n_jobs)
    Z = rb.fit_transform(X)
    R = int(params["n_grids"])
    mask = np.zeros(X.shape[0], dtype=bool)
    for _, rows in _first_mask(Z, R):
        mask[rows] = True
    rows = np.flatnonzero(mask)
    return Z, rows, rb.grid_ptr_


def _pass1(block, offset, params, jobs_per_worker):
    """Local exact fit of one partition: its local Z, local grid_ptr, first rows."""
    X = np.ascontiguousarray(block, dtype=np.float64)
    check_finite_block(X, offset)
    if X.shape[0] == 0:
        return {"Z": None, "gp": None, "rows": np.zeros(0, np.int64), "first": X}
    Z, rows, gp = _first_rows_of(X, params, resolve_task_jobs(params["n_jobs"], jobs_per_worker))
    return {"Z": Z, "gp": gp, "rows": rows, "first": X[rows]}


def _first_of(p):
    return p["first"]


def _merge_first(*parts, params):
    """First rows of the concatenation of first-row sets (the tree reduction's step)."""
    X = np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
    if X.shape[0] == 0:
        return X
    _, rows, _ = _first_rows_of(X, params, resolve_task_jobs(params["n_jobs"], 1))
    return X[rows]


def _pass2(p, rb, D, dtype):
    """The partition's Z in the global column numbering, and its column counts.

    Local column ``gp[r] + k`` is the bin of grid r first met at the k-th first row of grid
    r; its global column is that row's column in grid r under the global tables."""
    Zl = p["Z"]
    if Zl is None:
        return {"Z": sp.csr_matrix((0, D), dtype=dtype), "counts": np.zeros(D, np.int64)}
    R = rb.widths_.shape[0]
    n = Zl.shape[0]
    gidx = rb.transform(p["first"]).indices.reshape(-1, R)   # every first row has R entries
    gp = p["gp"]
    table = np.empty(int(gp[-1]), dtype=np.int64)
    for r, rows in _first_mask(Zl, R):
        table[gp[r]:gp[r + 1]] = gidx[np.searchsorted(p["rows"], rows), r]
    idx = np.int32 if (D < 2**31 and n * R < 2**31) else np.int64
    indices = table.astype(idx)[Zl.indices]
    indptr = Zl.indptr.astype(idx, copy=False)
    Z = sp.csr_matrix((Zl.data, indices, indptr), shape=(n, D), copy=False)
    Z.has_sorted_indices = True   # one entry per grid, grids in column order
    counts = np.bincount(indices, minlength=D)
    return {"Z": Z, "counts": counts}


def _get(p, key):
    return p[key]


def _sum_counts(*counts):
    total = counts[0].copy()
    for c in counts[1:]:
        total += c
    return total


def with_task_threads(rb, n_jobs, per_worker):
    """A shallow copy of a fitted local RandomBinning whose kernels use this task's threads
    (the worker's, see _data.resolve_task_jobs); the fitted arrays are shared."""
    rb = copy.copy(rb)
    rb.n_jobs = resolve_task_jobs(n_jobs, per_worker)
    return rb


def _transform_block(block, rb, dtype, n_jobs, per_worker, block_info=None):
    offset = block_info[0]["array-location"][0][0] if block_info else 0
    X = np.ascontiguousarray(block, dtype=np.float64)
    check_finite_block(X, offset)
    if X.shape[0] == 0:
        return sp.csr_matrix((0, int(rb.n_features_out_)), dtype=dtype)
    return with_task_threads(rb, n_jobs, per_worker).transform(X)


# ---------------------------------------------------------------------------- sigma="scale"
def scale_sigma(X, factor=_scale.DEFAULT_FACTOR, n_pairs=_scale.N_PAIRS):
    """``sigma="scale"`` on a row-partitioned dask array: the value of
    ``rbcd._scale.scale_sigma`` on the concatenated rows, gathering only the sampled rows."""
    n = int(X.shape[0])
    if n < 2:
        return float(factor) * 1.0
    rng = np.random.default_rng(_scale.PAIR_SEED)
    i = rng.integers(0, n, size=n_pairs)
    j = (i + rng.integers(1, n, size=n_pairs)) % n
    uniq = np.unique(np.concatenate([i, j]))
    rows = np.asarray(X[uniq].compute(), dtype=np.float64)
    Xi = rows[np.searchsorted(uniq, i)]
    Xj = rows[np.searchsorted(uniq, j)]
    # a running sum in column order, as the local rule (its module docstring)
    dist = np.cumsum(np.abs(Xi - Xj), axis=1)[:, -1] if rows.shape[1] else np.zeros(n_pairs)
    med = float(np.median(dist))
    if med > 0 and np.isfinite(med):
        return float(factor) * med
    nz = dist[dist > 0]
    if nz.shape[0] and np.isfinite(nz.mean()):
        return float(factor) * float(nz.mean())
    return float(factor) * 1.0


# ---------------------------------------------------------------------------- columns
class PartitionedColumns:
    """The grid structure of a row-partitioned random binning Z (exact mode), returned with
    Z by ``RandomBinning.fit_transform(X, return_columns=True)``; the rbcd.dask analogue of
    ``rbcd.binning.RBColumns`` for ``fit(Z, y, columns=)``.

    Attributes
    ----------
    grid_ptr : int64 (R + 1,), columns of grid r are ``grid_ptr[r]:grid_ptr[r + 1]``
    value : float, the stored value of every entry (1/sqrt(R) in Z's dtype)
    n_rows : int, N
    chunks : tuple, the rows of each partition of Z
    """

    def __init__(self, grid_ptr, value, n_rows, chunks, dtype=np.float64):
        self.grid_ptr = np.ascontiguousarray(grid_ptr, dtype=np.int64).copy()
        self.value = float(np.asarray(value, dtype=dtype))
        self.n_rows = int(n_rows)
        self.chunks = tuple(int(c) for c in chunks)

    @property
    def n_columns(self):
        return int(self.grid_ptr[-1])

    @property
    def n_grids(self):
        return self.grid_ptr.shape[0] - 1


# ---------------------------------------------------------------------------- estimator
class RandomBinning(TransformerMixin, BaseEstimator):
    """Random binning features of row-partitioned data (dask), equal to :class:`rbcd.RandomBinning`.

    Same parameters as :class:`rbcd.RandomBinning`, plus ``sigma="scale"``. ``fit``,
    ``fit_transform`` and ``transform`` take a dask array (or DataFrame) partitioned by rows,
    or a numpy array (cut into one partition per worker).

    Z is a dask array of ``scipy.sparse.csr_matrix`` chunks, one per partition of X, with
    known row chunks and one column chunk. It is a container for ``map_blocks``,
    ``persist`` and ``compute`` (``scipy.sparse.vstack(Z.to_delayed().ravel())``); dask's
    own linear algebra mostly fails on sparse chunks. In exact mode the fitted tables, and
    so Z, are bit for bit those of the local fit on the concatenated rows, for any chunking
    (module docstring); in hashed mode Z is the local hashed transform.

    ``n_jobs``: threads of the binning kernel inside each partition's task. None: the
    worker's threads divided by the partitions per worker (at least 1); see docs/dask.md.

    Attributes
    ----------
    local_ : rbcd.RandomBinning
        The fitted single-machine transformer (the global tables in exact mode); the
        partitions' tasks run its ``transform``.
    widths_, offsets_, grid_ptr_, n_features_out_, n_features_in_ : as rbcd.RandomBinning
    n_bins_, kappa_per_grid_, kappa_ : exact mode only, computed over all rows
    sigma_ : float or ndarray, the bandwidth used (the computed one for "scale")
    """

    def __init__(self, n_grids=64, sigma="scale", kernel="laplacian", n_features=None,
                 dtype=np.float64, n_jobs=None, random_state=None):
        self.n_grids = n_grids
        self.sigma = sigma
        self.kernel = kernel
        self.n_features = n_features
        self.dtype = dtype
        self.n_jobs = n_jobs
        self.random_state = random_state

    def fit(self, X, y=None):
        self._fit(X)
        return self

    def fit_transform(self, X, y=None, return_columns=False):
        """Fit and return the training Z (a persisted dask array of CSR chunks).

        ``return_columns=True`` (exact mode only, as the local RandomBinning) also returns
        the :class:`PartitionedColumns` of Z, the grid structure the rbcd.dask solvers take
        as ``fit(Z, y, columns=)``. It holds the grid boundaries, not the per-partition
        column arrays: each solver builds its partitions' grid labels on their workers,
        next to the Z blocks, once per fit (rbcd.solvers._blocks.grid_block, one pass over
        the block), so that nothing the size of Z is kept twice between fits or passes
        through the driver."""
        if return_columns and self.n_features is not None:
            raise ValueError("the grid column structure needs exact mode (n_features=None); "
                             "hashed columns are shared between grids")
        Z = self._fit(X)
        if not return_columns:
            return Z
        return Z, PartitionedColumns(self.grid_ptr_, np.float64(1.0) / np.sqrt(np.float64(self.n_grids)),
                                     int(Z.shape[0]),
                                     Z.chunks[0], self.dtype)

    def _params(self, sigma, state):
        return dict(n_grids=self.n_grids, sigma=sigma, kernel=self.kernel,
                    n_features=self.n_features, dtype=self.dtype, n_jobs=self.n_jobs,
                    random_state=state)

    def _fit(self, X):
        client = client_or_error()
        check_n_jobs(self.n_jobs)
        X = as_rows(X, "X", client)
        N, d = int(X.shape[0]), int(X.shape[1])
        if isinstance(self.sigma, str) and self.sigma == "scale":
            sigma = scale_sigma(X)
        else:
            sigma = self.sigma
        # One resolved state for every local fit: an int stays an int; a Generator (or
        # None, or a RandomState) becomes one generator whose copies all draw the same grids.
        rs = self.random_state
        state = rs if (rs is None or isinstance(rs, (int, np.integer))) else make_generator(rs)
        if rs is None:
            state = np.random.default_rng()
        # the tasks get their own copy of the state: a partition recomputed after the
        # driver's fit below (which advances ``state``) still draws the same grids
        params = self._params(sigma, copy.deepcopy(state))
        # parameter errors (and N = 0) on the driver, before any task runs
        probe = _local(params, 1)
        if N == 0:
            probe.fit(np.zeros((0, d)))   # raises the local error
        blocks = X.to_delayed().ravel()
        offsets = row_offsets(X)
        per_worker = tasks_per_worker(X)
        if self.n_features is not None:
            # hashed: the grids are all there is to fit (drawn from the first row)
            probe = LocalRandomBinning(**{**params, "random_state": state, "n_jobs": None})
            probe.fit(np.asarray(X[:1].compute(), dtype=np.float64))
            self._set_fitted(probe, sigma, d)
            Z = self._transform_dask(X, probe)
            return Z.persist()
        p1 = [dask.delayed(_pass1)(b, int(o), params, per_worker, pure=True)
              for b, o in zip(blocks, offsets[:-1])]
        p1 = dask.persist(*p1)
        firsts = [dask.delayed(_first_of)(p) for p in p1]
        F = np.asarray(_compute(tree_reduce(firsts, _merge_first, params=params)))
        # the driver's fit draws from the resolved state itself (a user's Generator advances
        # as in a local fit); the tasks above drew from copies of it
        rb = LocalRandomBinning(**{**params, "random_state": state, "n_jobs": None})
        rb.fit(F)
        rb_d = dask.delayed(rb, pure=True)
        D = int(rb.n_features_out_)
        dtype = np.dtype(self.dtype)
        p2 = [dask.delayed(_pass2)(p, rb_d, D, dtype, pure=True) for p in p1]
        p2 = dask.persist(*p2)
        del p1
        counts = _compute(tree_reduce([dask.delayed(_get)(p, "counts") for p in p2], _sum_counts))
        Z = array_of_parts(p2, "Z", np.diff(offsets), D, dtype,
                           sp.csr_matrix((0, 0), dtype=dtype), "rbcd-Z").persist()
        self._set_fitted(rb, sigma, d)
        gp = rb.grid_ptr_
        max_count = np.array([counts[gp[r]:gp[r + 1]].max() if gp[r + 1] > gp[r] else 0
                              for r in range(gp.shape[0] - 1)], dtype=np.float64)
        self.n_bins_ = np.asarray(rb.n_bins_).copy()
        self.kappa_per_grid_ = 1.0 / (max_count / N)   # as the local fit rounds it
        self.kappa_ = float(np.mean(self.kappa_per_grid_))
        return Z

    def _set_fitted(self, rb, sigma, d):
        self.local_ = rb
        self.sigma_ = sigma
        self.widths_ = rb.widths_
        self.offsets_ = rb.offsets_
        self.grid_ptr_ = rb.grid_ptr_
        self.n_features_out_ = int(rb.n_features_out_)
        self.n_features_in_ = d
        for name in ("n_bins_", "kappa_per_grid_", "kappa_"):
            if hasattr(self, name):
                delattr(self, name)

    def _transform_dask(self, X, rb):
        D = int(rb.n_features_out_)
        dtype = np.dtype(self.dtype)
        return X.map_blocks(_transform_block, dask.delayed(rb, pure=True), dtype, self.n_jobs,
                            tasks_per_worker(X), dtype=dtype, chunks=(X.chunks[0], (D,)),
                            meta=sp.csr_matrix((0, 0), dtype=dtype))

    def transform(self, X):
        """Z of new rows: a lazy dask array of CSR chunks, one per partition of X."""
        check_is_fitted(self, "local_")
        client = client_or_error()
        X = as_rows(X, "X", client)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but RandomBinning is expecting "
                f"{self.n_features_in_} features as input."
            )
        return self._transform_dask(X, self.local_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags


def _compute(obj):
    return dask.compute(obj)[0]
