"""What rbcd.dask's solvers share: the partitions of a fit on the workers and the round
trips to them, the decision values, and the targets of regression and classification.

:mod:`rbcd.dask.cg` (block CG) and :mod:`rbcd.dask.cd` (grid-block coordinate descent)
both hold one :class:`Block` per row partition of Z (built by :func:`build_blocks`, kept
on its worker) and reach them through a :class:`Cluster`; both predict with
:func:`decision_dask`, and the classifiers share :func:`class_setup` (classes, -1/+1
targets, class weights folded into the sample weights) and :func:`predict_from_scores`.
Neither solver module imports the other.
"""
import numpy as np
import scipy.sparse as sp
from distributed import wait
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets

from .._threads import effective_n_threads
from .._validation import check_class_weight
from ..solvers._blocks import grid_block
from ._data import (
    align_rows,
    as_rows,
    bad_object_message,
    check_weights,
    da,
    dask,
    _first_non_finite_block,
    first_bad_object,
    first_bad_object_block,
    first_non_finite,
    non_finite_message,
    resolve_task_jobs,
    row_offsets,
    tasks_per_worker,
)

__all__ = ["Block", "Cluster", "build_blocks", "class_setup", "decision_dask", "decision_dtype",
           "predict_from_scores", "proba_from_scores", "regression_targets"]


# ---------------------------------------------------------------------------- worker side
class Block:
    """One partition's share of a fit, built and kept on its worker: Z_b (CSR or dense), the
    targets Y_b (n_b, k), the weights s_b (None: all ones) and the threads of its products.

    With the grid structure (``columns=``) and random binning training rows, the block is
    held as its grid labels (``grid``, an rbcd.solvers._blocks.GridBlock, built once here;
    ``Z`` is then None: the labels and the CSR indices, shared with the binning's Z block,
    are all the products read) and its products run the local solver's kernels on
    ``n_threads`` threads. Otherwise scipy's products on one thread."""

    def __init__(self, Z, Y, s, grid_ptr=None, n_threads=1):
        self.grid = None
        self.n_threads = max(1, int(n_threads))
        if sp.issparse(Z):
            Z = sp.csr_matrix(Z)
            if not Z.has_canonical_format:
                Z = Z.copy()
                Z.sum_duplicates()
            if grid_ptr is not None:
                self.grid = grid_block(Z, grid_ptr, self.n_threads)
        else:
            Z = np.asarray(Z, dtype=np.float64)
        self.shape = Z.shape
        self.Z = None if self.grid is not None else Z
        self.Y = Y
        self.s = s

    @property
    def n(self):
        return self.shape[0]

    def __sizeof__(self):
        # what dask's memory manager counts (and spills) for this partition
        z = self.Z
        if self.grid is not None:
            size = self.grid.nbytes
        else:
            size = (z.data.nbytes + z.indices.nbytes + z.indptr.nbytes) if sp.issparse(z) else z.nbytes
        return int(size + self.Y.nbytes + (0 if self.s is None else self.s.nbytes) + 64)

    def tdot(self, U):
        """Z_b^T U, (D, k) float64."""
        if self.grid is not None:
            return self.grid.tdot(U, self.n_threads)
        if self.n == 0:
            return np.zeros((self.shape[1], U.shape[1]))
        return np.asarray(self.Z.T @ U, dtype=np.float64)

    def dot(self, V):
        if self.grid is not None:
            return self.grid.dot(V, self.n_threads)
        if self.n == 0:
            return np.zeros((0, V.shape[1]))
        return np.asarray(self.Z @ V, dtype=np.float64)


def make_block(Z, y, s, target_fn, grid_ptr=None, n_jobs=None, per_worker=1, offset=0):
    """The Block of one partition (runs on its worker: the threads are the worker's, see
    _data.resolve_task_jobs). A non-finite value of Z is an error here, as the local
    solvers' check of X is; one of y is named by its global index (``offset``: the
    partition's first row)."""
    values = Z.data if sp.issparse(Z) else np.asarray(Z)
    # min / max: NaN and +-inf show in them, and no (nnz,) mask is made
    if values.dtype.kind in "fc" and values.size and not (
            np.isfinite(values.min()) and np.isfinite(values.max())):
        raise ValueError("X contains NaN or infinity (in a partition of Z)")
    Y = target_fn(np.asarray(y), offset)
    if Y.ndim == 1:
        Y = Y[:, None]
    s = None if s is None else np.asarray(s, dtype=np.float64)
    n_threads = effective_n_threads(resolve_task_jobs(n_jobs, per_worker))
    return Block(Z, np.ascontiguousarray(Y, dtype=np.float64), s, grid_ptr, n_threads)


def _raise_non_finite_y(y, offset):
    """ValueError for the first non-finite entry of a partition's y, with its global index
    (the local check's message)."""
    found = _first_non_finite_block(y, offset)
    if found is not None:
        raise ValueError(non_finite_message("y", found))


def regression_targets(y, offset=0):
    """A partition's regression targets as float64, finite (``offset``: its first row, for
    the index in the message)."""
    y = np.asarray(y)
    found = first_bad_object_block(y, offset, True)   # None: not taken as NaN
    if found is not None:
        raise ValueError(bad_object_message(found, True))
    y = np.asarray(y, dtype=np.float64)
    if not np.all(np.isfinite(y)):
        _raise_non_finite_y(y, offset)
    return y


def decision_dtype(Z_dtype, coef):
    """The dtype of Z @ coef.T + intercept (intercept in coef's dtype): float32 for float32
    Z and coefficients (the local solvers' float32 predictions), else float64."""
    return np.result_type(np.dtype(Z_dtype), np.asarray(coef).dtype, np.float32)


def block_decision(Z, coef, intercept):
    """Z @ coef.T + intercept for one partition ((n,) for one target), in
    :func:`decision_dtype` (scipy's product in the result's dtype, as the local solvers')."""
    dtype = decision_dtype(Z.dtype, coef)
    if Z.shape[0] == 0:
        out = np.zeros((0, coef.shape[0]), dtype=dtype)
    else:
        out = np.asarray(Z @ coef.T, dtype=dtype) + intercept
    return out[:, 0] if out.shape[1] == 1 else out


# ---------------------------------------------------------------------------- driver side
# bytes (array size x partitions) above which Cluster.map scatters an argument
SCATTER_BYTES = 64 << 20


# bytes of partition results Cluster.map(fold=...) fetches at once (the driver's share
# of the round trip beyond its accumulator)
FOLD_BYTES = 64 << 20


def _nbytes(result):
    """Bytes of the arrays in one partition's result (a tuple of arrays and numbers)."""
    parts = result if isinstance(result, (tuple, list)) else (result,)
    return sum(p.nbytes for p in parts if isinstance(p, np.ndarray))


# seconds between checks, while a round trip's tasks run, that the workers they are pinned
# to are still there
PIN_POLL_SECONDS = 1.0


class Cluster:
    """The partitions of one fit on the workers and the round trips to them.

    Each round trip's task for partition b runs on the worker holding b's block: the tasks
    are pinned there (``workers=[holder]``, strict), since dask's work stealing would
    otherwise move a task, and with it a copy of the whole block (its labels and indices),
    to an idle worker. Pinning is safe against a lost worker: while the tasks run, the
    holders are checked every PIN_POLL_SECONDS; if one has left, the round trip is
    submitted again unpinned (dask recomputes the lost blocks anywhere) and the holders
    are looked up afresh for the next one."""

    def __init__(self, client, block_futures):
        self.client = client
        self.blocks = block_futures
        self._holders = None

    def _where(self):
        """The worker holding each block (None: not known, or no longer there)."""
        alive = set(self.client.scheduler_info(n_workers=-1)["workers"])
        if self._holders is None or not set(self._holders) <= alive:
            wait(self.blocks)
            for f in self.blocks:   # a partition's error (bad y), the first in row order
                if f.status == "error":
                    f.result()
            who = self.client.who_has(self.blocks)
            self._holders = [min(who.get(f.key, ()) or [None]) for f in self.blocks]
            if not set(self._holders) <= alive:
                self._holders = None
        return self._holders

    def _submit(self, func, send, pin):
        where = self._where() if pin else None
        if where is None:
            return [self.client.submit(func, b, *send, pure=False) for b in self.blocks], None
        return [self.client.submit(func, b, *send, pure=False, workers=[w],
                                   allow_other_workers=False)
                for b, w in zip(self.blocks, where)], where

    def map(self, func, *args, fold=None):
        """``func(block, *args)`` on every partition; results in partition order.

        Arrays are sent inside the tasks (one message through the scheduler) unless the
        copies would exceed SCATTER_BYTES; then they are scattered to every worker once
        (one more round trip, but each worker receives them once).

        ``fold(acc, result) -> acc`` (acc None at the first partition): the results are
        fetched one at a time, in partition order, and folded as they come, so the driver
        holds the accumulator and one partition's result instead of every partition's
        (the CG operator's results are D x k each). Returns the accumulator."""
        shared = []
        send = []
        for a in args:
            if isinstance(a, np.ndarray) and a.nbytes * len(self.blocks) > SCATTER_BYTES:
                f = self.client.scatter(a, broadcast=True, hash=False)
                shared.append(f)
                send.append(f)
            else:
                send.append(a)
        futs, where = self._submit(func, send, pin=True)
        try:
            while where is not None:
                try:
                    wait(futs, timeout=PIN_POLL_SECONDS)
                    break
                except TimeoutError:
                    alive = set(self.client.scheduler_info(n_workers=-1)["workers"])
                    if not set(where) <= alive:   # a holder left: run anywhere
                        self.client.cancel(futs)
                        self._holders = None
                        futs, where = self._submit(func, send, pin=False)
            if fold is None:
                return self.client.gather(futs)
            # the first result alone gives the size; then batches of FOLD_BYTES (a small
            # problem's results come in one more gather)
            first = futs[0].result()
            size = max(1, _nbytes(first))
            acc = fold(None, first)
            futs[0].release()   # its result leaves the worker's memory too
            step = max(1, FOLD_BYTES // size)
            for start in range(1, len(futs), step):
                batch = futs[start:start + step]
                for result in self.client.gather(batch):
                    acc = fold(acc, result)
                for f in batch:
                    f.release()
            return acc
        finally:
            del futs
            for f in shared:
                f.release()


def grid_ptr_of(columns, D):
    """The grid structure given as ``columns=`` (module rbcd.dask.binning: the
    ``PartitionedColumns`` of ``RandomBinning.fit_transform(X, return_columns=True)``, a
    fitted exact-mode rbcd.dask.RandomBinning or rbcd.RandomBinning, or a local RBColumns),
    checked against Z's D columns; None for None."""
    if columns is None:
        return None
    gp = getattr(columns, "grid_ptr_", None)
    if gp is None:
        gp = getattr(columns, "grid_ptr", None)
    if gp is None:
        raise ValueError(
            "columns must be the PartitionedColumns returned with Z by rbcd.dask.RandomBinning"
            ".fit_transform(X, return_columns=True), or a fitted RandomBinning in exact mode "
            f"(n_features=None); got {type(columns).__name__} without a grid structure "
            "(hashed mode or not fitted)")
    gp = np.asarray(gp)
    if gp.ndim != 1 or gp.shape[0] < 2 or gp.dtype.kind not in "iu" or int(gp[0]) != 0 \
            or np.any(np.diff(gp) < 0):
        raise ValueError("columns.grid_ptr must be a non-decreasing 1-D integer array from 0")
    gp = np.ascontiguousarray(gp, dtype=np.int64)
    if int(gp[-1]) != D:
        raise ValueError(f"columns are not the grid structure of this Z: they have "
                         f"{int(gp[-1])} columns but Z has {D}")
    return gp


def build_blocks(client, X, y, sample_weight, target_fn, columns=None, n_jobs=None):
    """Persist one Block per partition of X (with its rows of y and weights, and its grid
    labels when ``columns`` give the grid structure) on the workers; returns
    (Cluster, n_rows, D, X as a dask array). ``cluster.grid_ptr`` is the structure or None."""
    X = as_rows(X, "X", client)
    gp = grid_ptr_of(columns, int(X.shape[1]))
    y = align_rows(X, as_rows(y, "y", client, ndim=(1, 2), chunks=X.chunks[0]), "y")
    if sample_weight is not None:
        sample_weight, _ = check_weights(X, sample_weight, client)
        sw = sample_weight.to_delayed().ravel()
    else:
        sw = [None] * X.numblocks[0]
    zs = X.to_delayed().ravel()
    ys = y.to_delayed().ravel()
    per_worker = tasks_per_worker(X)
    offsets = row_offsets(X)
    parts = [dask.delayed(make_block)(z, yy, s, target_fn, gp, n_jobs, per_worker, int(o))
             for z, yy, s, o in zip(zs, ys, sw, offsets[:-1])]
    futures = client.compute(parts)
    cluster = Cluster(client, futures)
    cluster.grid_ptr = gp
    return cluster, int(X.shape[0]), int(X.shape[1]), X


def decision_dask(X, coef, intercept):
    """Z @ coef.T + intercept per partition of X (a dask array; (n,) for one target). The
    coefficients keep their dtype and the intercept takes theirs: float32 Z and a float32
    fit give float32 values, as the local solvers' (else float64)."""
    coef = np.atleast_2d(np.asarray(coef))
    if coef.dtype not in (np.float32, np.float64):
        coef = coef.astype(np.float64)
    intercept = np.atleast_1d(np.asarray(intercept, dtype=coef.dtype))
    k = coef.shape[0]
    dtype = decision_dtype(X.dtype, coef)
    c = dask.delayed(coef, pure=True)
    b = dask.delayed(intercept, pure=True)
    if k == 1:
        return X.map_blocks(block_decision, c, b, dtype=dtype, drop_axis=1,
                            chunks=(X.chunks[0],), meta=np.zeros(0, dtype))
    return X.map_blocks(block_decision, c, b, dtype=dtype, chunks=(X.chunks[0], (k,)),
                        meta=np.zeros((0, 0), dtype))


class _ClassTargets:
    """Worker-side -1/+1 targets of the classes (one column for two classes)."""

    def __init__(self, classes):
        self.classes = classes

    def __call__(self, y, offset=0):
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D for a classifier, got shape {y.shape}")
        if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
            _raise_non_finite_y(y, offset)
        idx = np.searchsorted(self.classes, y)
        if self.classes.shape[0] == 2:
            return np.where(idx == 1, 1.0, -1.0)
        return np.column_stack([np.where(idx == c, 1.0, -1.0) for c in range(self.classes.shape[0])])


def class_setup(client, X, y, sample_weight, class_weight):
    """(classes, target function, sample weights with class_weight applied) of a
    classification fit, from the global class counts."""
    yd = as_rows(y, "y", client, ndim=(1,), chunks=as_rows(X, "X", client).chunks[0])
    bad = first_non_finite(yd)   # float y: one pass (it was isfinite(y).all()); else None
    if bad is not None:
        raise ValueError(non_finite_message("y", bad))
    bad = first_bad_object(yd, False)   # object y: None or NaN named before np.unique sorts it
    if bad is not None:
        raise ValueError(bad_object_message(bad, False))
    classes, counts = (np.asarray(a) for a in dask.compute(*da.unique(yd, return_counts=True)))
    # scikit-learn's check on the distinct values (its verdict depends on no more: floats
    # that are not all integers are "continuous", not classes)
    check_classification_targets(classes)
    if classes.shape[0] < 2:
        got = (f"only one class: {classes[0].tolist()!r}" if classes.shape[0]
               else "no sample (y is empty)")
        raise ValueError(f"a classifier needs samples of at least 2 classes in y, got {got}")
    sw = sample_weight
    if class_weight is not None:
        if isinstance(class_weight, str) and class_weight == "balanced":
            cw = yd.shape[0] / (classes.shape[0] * counts.astype(np.float64))
        elif isinstance(class_weight, dict):
            # scikit-learn's rule and weights (a dict may name absent labels when it
            # names every present one), as the local models apply it
            cw = compute_class_weight(check_class_weight(class_weight), classes=classes,
                                      y=classes)
        else:
            raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {class_weight!r}")
        cwy = yd.map_blocks(lambda b, c=classes, w=cw: w[np.searchsorted(c, b)], dtype=np.float64)
        if sw is None:
            sw = cwy
        else:
            Xd = as_rows(X, "X", client)
            sw = align_rows(Xd, as_rows(sw, "sample_weight", client, ndim=(1,), chunks=Xd.chunks[0],
                                        real=False),   # checked by build_blocks
                            "sample_weight") * cwy
    return classes, _ClassTargets(classes), sw


def predict_from_scores(scores, classes):
    if scores.ndim == 1:
        return scores.map_blocks(lambda s, c=classes: c[(s > 0).astype(int)], dtype=classes.dtype,
                                 meta=np.zeros(0, dtype=classes.dtype))
    return scores.map_blocks(lambda s, c=classes: c[np.argmax(s, axis=1)], dtype=classes.dtype,
                             drop_axis=1, meta=np.zeros(0, dtype=classes.dtype))


def _proba_block(s):
    s = np.asarray(s, dtype=np.float64)   # as the local predict_proba (float32 scores too)
    with np.errstate(over="ignore"):
        P = 1.0 / (1.0 + np.exp(-s))
    if s.ndim == 1:
        return np.column_stack([1.0 - P, P])
    return P / P.sum(axis=1, keepdims=True)


def proba_from_scores(scores):
    """Logistic probabilities, as the local CDClassifier.predict_proba computes them."""
    if scores.ndim == 1:
        return scores.map_blocks(_proba_block, dtype=np.float64, new_axis=1,
                                 chunks=(scores.chunks[0], (2,)), meta=np.zeros((0, 0)))
    return scores.map_blocks(_proba_block, dtype=np.float64, meta=np.zeros((0, 0)))
