"""Random binning over row partitions (issue 13, item 1).

Exact mode (``n_features=None``) numbers the columns of grid r by the first appearance of
each bin in row order (docs/design.md contract 4). The distributed fit gives that numbering,
and so Z, bit for bit for any chunking, binning every partition once:

1. Each partition is binned on its worker by the local kernels with the same grids (widths
   and offsets depend only on the random state, n_grids, sigma and d): its training ids
   number every grid's bins by first appearance *within the partition*. One pass over them
   (rbcd.dask._kernels.first_rows) gives each local column's first row and row count; the
   rows that are a first appearance in some grid are the partition's *first rows*. The ids
   stay on the worker; only the first rows (at most D_p rows of X), the position of each
   local column's first row among them, and the counts travel to the driver.
2. Every global first appearance is a partition first row, and the concatenation, in
   partition order, of the partitions' first rows meets the bins of every grid in the same
   order as the whole data does. A local RandomBinning fitted on that concatenation F on
   the driver therefore has exactly the global column tables, and its training Z of F
   gives the global column of every local column (the column of its first row). The
   global bin counts are the partitions' counts added through the same map.
3. Each worker rewrites its partition's ids in place to the global columns through its
   table "local column -> global column" (rbcd.dask._kernels.relabel) and fills the
   constant values: that is its block of Z.

Two round trips: the binning tasks, with their small summaries gathered, then the relabel
tasks (their Z blocks are persisted on the workers, not gathered).

Hashed mode (``n_features=m``) has no tables: the grids are drawn on the driver and every
partition is transformed independently.

``sigma="scale"`` (rbcd/_scale.py): the pair stream is drawn on the driver with the global
N, only the sampled rows are gathered, and the distances are summed exactly as the local
rule sums them, so ``sigma_`` is the local value on the concatenated rows.

Sparse X (scipy sparse chunks, or a scipy sparse matrix, cut into CSR chunks): every
partition goes to the local kernels as canonical float64 CSR (``_data.float_rows``), as
the local RandomBinning takes sparse X (an implicit zero is the value 0; the local Z is
that of the dense rows, bit for bit), the first rows travel as CSR and the driver's fit
on F takes them as sparse X. ``sigma="scale"`` sums each sampled pair's stored
differences in column order, which are the dense running sums bit for bit (an implicit
zero adds an exact 0), as the local rule does. So Z equals the local fit's on the same
rows, sparse or dense.
"""

import copy

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import _check_feature_names, check_is_fitted

from .. import _scale
from .._random import make_generator
from ..binning import RandomBinning as LocalRandomBinning
from ._data import (
    array_of_parts,
    as_rows,
    check_finite_block,
    check_min_rows,
    check_n_jobs,
    check_weights,
    client_or_error,
    dask,
    float_rows,
    names_view,
    resolve_task_jobs,
    row_offsets,
    tasks_per_worker,
)
from . import _kernels
from .._threads import effective_n_threads
from ..binning import _binning

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


class _Partition:
    """A partition's exact binning on its worker between the two round trips: its training
    ids (local first-appearance ids, ``n * R``; rewritten in place to the global columns by
    ``_relabel``, after which ``ids`` is None), the local column boundaries ``local_ptr``
    (R + 1; None for an empty partition), and what the driver gathers (``summary``)."""

    def __init__(self, ids, local_ptr, summary):
        self.ids = ids
        self.local_ptr = local_ptr
        self.summary = summary

    def __sizeof__(self):
        # what dask's memory manager counts (and spills) for this partition
        ids = 0 if self.ids is None else self.ids.nbytes
        return int(ids + sum(_nbytes(a) for a in self.summary.values()) + 256)


def _nbytes(a):
    """Bytes of an array, or of a sparse matrix's three arrays (the first rows of sparse X)."""
    if sp.issparse(a):
        return a.data.nbytes + a.indices.nbytes + a.indptr.nbytes
    return getattr(a, "nbytes", 0)


def _bin_partition(block, offset, params, jobs_per_worker):
    """Bin one partition once (local kernels, local first-appearance ids) and summarise it
    for the driver: ``first`` (the partition's first rows of X, in row order), ``pos`` (for
    each local column, the index in ``first`` of its first row), ``counts`` (rows per local
    column) and ``local_ptr``. A sparse partition stays sparse (canonical CSR, its first
    rows too)."""
    X = float_rows(block)
    check_finite_block(X, offset)
    if X.shape[0] == 0:
        return _Partition(None, None, {"first": X, "pos": np.zeros(0, np.int64),
                                       "counts": np.zeros(0, np.int64), "local_ptr": None})
    rb = _local(params, resolve_task_jobs(params["n_jobs"], jobs_per_worker))
    _, ids, _, _ = rb._fit(X, "Z")   # the training ids, before their grid offsets
    local_ptr = np.zeros(rb.n_bins_.shape[0] + 1, dtype=np.int64)
    np.cumsum(rb.n_bins_, out=local_ptr[1:])
    Dp = int(local_ptr[-1])
    first = np.empty(Dp, dtype=np.int64)
    counts = np.empty(Dp, dtype=np.int64)
    _kernels.first_rows(ids, local_ptr, first, counts)
    rows = np.unique(first)
    return _Partition(ids, local_ptr, {"first": X[rows], "pos": np.searchsorted(rows, first),
                                       "counts": counts, "local_ptr": local_ptr})


def _summary(part):
    return part.summary


def _relabel(part, table, D, dtype, n_jobs, jobs_per_worker):
    """{"Z": the partition's block of Z}: its ids rewritten in place to the global columns through
    ``table`` (local column -> global column), every value 1/sqrt(R) in ``dtype``."""
    if part.local_ptr is None:
        return {"Z": sp.csr_matrix((0, D), dtype=dtype)}
    ids = part.ids
    if ids is None:
        raise RuntimeError("this partition's binning was already renumbered (a task ran twice "
                           "on the same state); refit")
    part.ids = None
    R = part.local_ptr.shape[0] - 1
    n = ids.shape[0] // R
    idx = np.int32 if (D < 2**31 and n * R < 2**31) else np.int64
    if ids.dtype != idx:
        ids = ids.astype(idx)
    data = _binning.empty(ids.shape[0], dtype)
    _kernels.relabel(ids, part.local_ptr, table, data,
                     float(np.float64(1.0) / np.sqrt(np.float64(R))),
                     effective_n_threads(resolve_task_jobs(n_jobs, jobs_per_worker)))
    Z = sp.csr_matrix((data, ids, np.arange(0, n * R + 1, R, dtype=idx)), shape=(n, D),
                      copy=False)
    Z.has_sorted_indices = True   # one entry per grid, grids in column order
    return {"Z": Z}


def _merge_partitions(summaries, rb, R):
    """The driver's step: fit ``rb`` on the concatenated first rows F (the global tables),
    then each partition's table "local column -> global column" (None for an empty
    partition) and the global column counts. Returns (tables, counts, D)."""
    firsts = [s["first"] for s in summaries]
    if any(sp.issparse(f) for f in firsts):   # sparse X: F as sparse X (the same tables)
        F = sp.vstack([sp.csr_matrix(f) for f in firsts], format="csr")
    else:
        F = np.concatenate(firsts, axis=0)
    ZF = rb.fit_transform(F)
    D = int(rb.n_features_out_)
    G = ZF.indices.reshape(F.shape[0], R)   # every row of F has one entry per grid
    tables = []
    counts = np.zeros(D, dtype=np.int64)
    start = 0
    for s in summaries:
        if s["local_ptr"] is None:
            tables.append(None)
            continue
        grid = np.repeat(np.arange(R), np.diff(s["local_ptr"]))
        table = G[start + s["pos"], grid].astype(np.int64)
        np.add.at(counts, table, s["counts"])
        tables.append(table)
        start += s["first"].shape[0]
    return tables, counts, D


def with_task_threads(rb, n_jobs, per_worker):
    """A shallow copy of a fitted local RandomBinning whose kernels use this task's threads
    (the worker's, see _data.resolve_task_jobs); the fitted arrays are shared."""
    rb = copy.copy(rb)
    rb.n_jobs = resolve_task_jobs(n_jobs, per_worker)
    return rb


def _transform_block(block, rb, dtype, n_jobs, per_worker, block_info=None):
    offset = block_info[0]["array-location"][0][0] if block_info else 0
    X = float_rows(block)            # a sparse partition stays sparse, as local transform takes it
    check_finite_block(X, offset)
    if X.shape[0] == 0:
        return sp.csr_matrix((0, int(rb.n_features_out_)), dtype=dtype)
    return with_task_threads(rb, n_jobs, per_worker).transform(X)


# ---------------------------------------------------------------------------- sigma="scale"
def scale_sigma(X, factor=_scale.DEFAULT_FACTOR, n_pairs=_scale.N_PAIRS, sample_weight=None):
    """``sigma="scale"`` on a row-partitioned dask array: the value of
    ``rbcd._scale.scale_sigma`` on the concatenated rows (its pairs drawn by
    ``sample_weight``, a checked dask array with X's row chunks, when given), gathering
    only the sampled rows."""
    n = int(X.shape[0])
    if sample_weight is None:
        if n < 2:
            return float(factor) * 1.0
        rng = np.random.default_rng(_scale.PAIR_SEED)
        i = rng.integers(0, n, size=n_pairs)
        j = (i + rng.integers(1, n, size=n_pairs)) % n
    else:
        pairs = _weighted_pairs(X, sample_weight, n_pairs)
        if pairs is None:
            return float(factor) * 1.0
        i, j = pairs
    uniq = np.unique(np.concatenate([i, j]))
    rows = float_rows(X[uniq].compute())   # sparse chunks: CSR rows
    # huge or tiny rows: computed down by a power of two, as the local rule (_in_range)
    rows, a, b, scale = _scale._in_range(rows, np.searchsorted(uniq, i), np.searchsorted(uniq, j))
    return float(factor) * _scale._robust_median(_pair_l1(rows, a, b, n_pairs), scale)


def _pair_l1(rows, a, b, n_pairs):
    """The L1 distances of the pairs (rows[a[p]], rows[b[p]]), each a running sum over the
    columns in increasing order (rbcd._scale's contract). Sparse rows: the running sum of
    each pair's stored differences in column order, as rbcd._scale sums sparse X; the
    implicit zeros add exact zeros to the dense sum, so both give the same bits, and the
    dense (n_pairs, d) difference is never formed."""
    if sp.issparse(rows):
        return _scale.sparse_pair_l1(rows, a, b)
    if not rows.shape[1]:
        return np.zeros(n_pairs)
    return np.cumsum(np.abs(rows[a] - rows[b]), axis=1)[:, -1]


def _weighted_pairs(X, sw, n_pairs):
    """rbcd._scale._pairs_for's pairs over the weight units of the dask weights ``sw``:
    the units of each partition summed on the workers, each drawn unit's partition found
    on the driver and its row within the partition on the worker that holds it (no array
    of N entries on the driver). None for fewer than two units."""
    import dask
    import dask.array as da

    integral, total, top = dask.compute(da.all(sw == da.floor(sw)), sw.sum(), sw.max())
    factor = _scale.units_factor(bool(integral), float(total), float(top))
    q = (sw if factor is None else da.rint(sw * factor)).astype(np.int64)
    part = np.array(dask.compute(*[q.blocks[p].sum() for p in range(q.numblocks[0])]),
                    dtype=np.int64).reshape(-1)
    part_end = np.cumsum(part)
    m = int(part_end[-1]) if part_end.shape[0] else 0
    if m < 2:
        return None
    rng = np.random.default_rng(_scale.PAIR_SEED)
    a = rng.integers(0, m, size=n_pairs)
    b = (a + rng.integers(1, m, size=n_pairs)) % m
    units = np.concatenate([a, b])
    which = np.searchsorted(part_end, units, side="right")     # each unit's partition
    first_row = np.concatenate([[0], np.cumsum(X.chunks[0])])
    rows = np.empty(units.shape[0], dtype=np.int64)
    tasks, picks = [], []
    for p in np.unique(which):
        sel = np.flatnonzero(which == p)
        local = units[sel] - (part_end[p - 1] if p > 0 else 0)
        tasks.append(dask.delayed(lambda qb, u: np.searchsorted(np.cumsum(qb), u, side="right"))(
            q.blocks[int(p)], local))
        picks.append((sel, first_row[p]))
    for (sel, start), found in zip(picks, dask.compute(*tasks)):
        rows[sel] = start + found
    return rows[:n_pairs], rows[n_pairs:]


# the advice of the local binning's "X values too large to bin" at fit, for a sigma given
# as a number and for sigma="scale" (rbcd.dask passes the local kernels the number "scale"
# gave)
from ..binning._input import NUMBER_SIGMA_ADVICE as _NUMBER_ADVICE  # noqa: E402
from ..binning._input import SCALE_SIGMA_ADVICE as _SCALE_ADVICE  # noqa: E402


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

    Same parameters as :class:`rbcd.RandomBinning` (``device`` "cpu" only). ``fit``,
    ``fit_transform`` and ``transform`` take a dask array (or DataFrame) partitioned by rows,
    or a numpy array (cut into one partition per worker). Sparse X is taken as the local
    RandomBinning takes it (an implicit zero is the value 0; Z is the dense rows' Z): a
    dask array of scipy sparse chunks, or a scipy sparse matrix (cut into CSR chunks).
    Complex X is refused from its dtype.

    Z is a dask array of ``scipy.sparse.csr_matrix`` chunks, one per partition of X, with
    known row chunks and one column chunk. It is a container for ``map_blocks``,
    ``persist`` and ``compute``; to gather it as one CSR matrix:
    ``scipy.sparse.vstack(dask.compute(*Z.to_delayed(optimize_graph=False).ravel()))``
    (``optimize_graph=False``: Z's blocks are persisted, and the optimized graph of
    ``to_delayed`` keeps their keys but not the futures that hold them, so a Z not kept in a
    variable may be released before that compute runs: "lost dependencies"). dask's own
    linear algebra mostly fails on sparse chunks. In exact mode the fitted tables, and
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
                 dtype=np.float64, n_jobs=None, random_state=None, device="cpu"):
        self.device = device
        self.n_grids = n_grids
        self.sigma = sigma
        self.kernel = kernel
        self.n_features = n_features
        self.dtype = dtype
        self.n_jobs = n_jobs
        self.random_state = random_state

    def fit(self, X, y=None, sample_weight=None):
        """Draw the grids and build the bin tables (``sample_weight``: as the local
        RandomBinning's, used by sigma="scale" only, and checked whatever sigma)."""
        self._fit(X, sample_weight)
        return self

    def fit_transform(self, X, y=None, return_columns=False, sample_weight=None):
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
        Z = self._fit(X, sample_weight)
        if not return_columns:
            return Z
        return Z, PartitionedColumns(self.grid_ptr_, np.float64(1.0) / np.sqrt(np.float64(self.n_grids)),
                                     int(Z.shape[0]),
                                     Z.chunks[0], self.dtype)

    def _params(self, sigma, state):
        return dict(n_grids=self.n_grids, sigma=sigma, kernel=self.kernel,
                    n_features=self.n_features, dtype=self.dtype, n_jobs=self.n_jobs,
                    random_state=state)

    def _fit(self, X, sample_weight=None):
        if self.device != "cpu":
            raise ValueError(f"rbcd.dask bins on the workers' CPUs: device must be 'cpu', got "
                             f"{self.device!r}")
        client = client_or_error()
        check_n_jobs(self.n_jobs)
        _check_feature_names(self, names_view(X), reset=True)    # feature_names_in_ of a DataFrame
        X = as_rows(X, "X", client)
        N, d = int(X.shape[0]), int(X.shape[1])
        # the local order: the parameters (its constraints), the weights, then X
        _local(self._params(self.sigma, self.random_state), 1)._validate_params()
        if sample_weight is not None:
            # checked whatever sigma, as the local RandomBinning checks them (one pass)
            sample_weight, _ = check_weights(X, sample_weight, client)
        check_min_rows(X, type(self).__name__)   # after the weights, as locally
        scale = isinstance(self.sigma, str) and self.sigma == "scale"
        sigma = scale_sigma(X, sample_weight=sample_weight) if scale else self.sigma
        try:
            return self._fit_grids(X, N, d, sigma)
        except ValueError as exc:
            if scale and _NUMBER_ADVICE in str(exc):
                # the local binning is given the computed number: its advice would say
                # "use sigma='scale'"; the local fit's own words for sigma="scale"
                raise ValueError(str(exc).replace(_NUMBER_ADVICE, _SCALE_ADVICE)) from None
            raise

    def _fit_grids(self, X, N, d, sigma):
        """_fit with sigma resolved (a number or array)."""
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
        probe._validate_params()
        from ..binning._draw import check_params
        check_params(probe, np.zeros((1, d)))
        if N == 0:
            probe.fit(np.zeros((0, d)))   # raises the local error
        blocks = X.to_delayed().ravel()
        offsets = row_offsets(X)
        per_worker = tasks_per_worker(X)
        if self.n_features is not None:
            # hashed: the grids are all there is to fit (drawn from the first row)
            probe = LocalRandomBinning(**{**params, "random_state": state, "n_jobs": None})
            probe.fit(float_rows(X[:1].compute()))
            self._set_fitted(probe, sigma, d)
            Z = self._transform_dask(X, probe)
            return Z.persist()
        # round trip 1: bin every partition once (pure=False: each fit owns its partitions'
        # state, which _relabel consumes) and gather only the small summaries
        parts = dask.persist(*[dask.delayed(_bin_partition, pure=False)(b, int(o), params,
                                                                        per_worker)
                               for b, o in zip(blocks, offsets[:-1])])
        summaries = dask.compute(*[dask.delayed(_summary, pure=False)(p) for p in parts])
        # the driver's fit draws from the resolved state itself (a user's Generator advances
        # as in a local fit); the tasks above drew from copies of it
        rb = LocalRandomBinning(**{**params, "random_state": state, "n_jobs": None})
        tables, counts, D = _merge_partitions(summaries, rb, int(self.n_grids))
        del summaries
        dtype = np.dtype(self.dtype)
        # round trip 2: each worker renumbers its partition in place (Z stays there)
        zs = dask.persist(*[dask.delayed(_relabel, pure=False)(p, t, D, dtype, self.n_jobs,
                                                               per_worker)
                            for p, t in zip(parts, tables)])
        del parts
        Z = array_of_parts(zs, "Z", np.diff(offsets), D, dtype,
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

    def get_feature_names_out(self, input_features=None):
        """Names of Z's columns, as :meth:`rbcd.RandomBinning.get_feature_names_out`
        (``randombinning0``, ...): the fitted local transformer's."""
        check_is_fitted(self, "local_")
        return self.local_.get_feature_names_out(input_features)

    def transform(self, X):
        """Z of new rows: a lazy dask array of CSR chunks, one per partition of X."""
        check_is_fitted(self, "local_")
        _check_feature_names(self, names_view(X), reset=False)
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
        tags.input_tags.sparse = True   # scipy sparse X or chunks, as rbcd.RandomBinning
        return tags

