"""Ridge by (block, Jacobi-preconditioned) conjugate gradient over row partitions (issue 13, item 2).

The driver runs the CG of :func:`rbcd.solvers.cg.solve_ridge_cg` (the same
preconditioner, centring, sample weights, grid projection and stopping rule ||r|| <= tol
||b||; its module docstring is the reference), not its bits: the sums come in partition
order, not the local kernels', so the iterates differ by rounding and the iteration counts
can differ by a few (docs/dask.md, "Ridge by CG"). Its two further rules are the local
ones too: a classifier stops every class on one scale, tol times the largest class's ||b||
(``shared_scale``, as the local RidgeCGClassifier), and with an intercept the centred
columns that are constant to rounding are taken as exactly 0 (w_j = 0, as the local
_RidgeSystem's ``flat``). Only the operator is distributed. With Zc = Z - 1 zbar^T,

    Zc^T S Zc P = sum_b [ Z_b^T T_b ] - zbar (sum_b 1^T T_b)^T,   T_b = S_b (Z_b P - 1 (zbar . P)),

so each partition's task computes ``(Z_b^T T_b, 1^T T_b)`` from its own Z block, targets
and weights (held on its worker since the binning, never gathered), and the driver adds the
per-partition results in partition order: one round trip per iteration, D x k floats each
way per partition, and a result that does not depend on which worker answers first.

A lost worker's partitions are recomputed by dask from the graph (the binning is
deterministic), and every task is a pure function of its inputs, so the fit returns the
same coefficients.

Worker kernels: with the grid structure (``fit(..., columns=)``) each partition's block is
held on its worker as its grid labels, built once per fit (rbcd.solvers._blocks.GridBlock),
and its products run the local RidgeCG's kernels (rbcd.solvers._sparse.labels_matmat /
labels_tmatmat, 2 bytes per entry; csr_matmat for several right-hand sides) on the
worker's threads divided among the partitions it runs at once (or ``n_jobs``). Without it
(hashed mode, dense or general Z) scipy's sparse products on one thread per task.
"""
import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from .._validation import fit_context
from ..solvers import cg as _local
from ..solvers.cg import _check_alpha, _warn_unconverged, constant_columns, \
    default_max_iter, stopping_scale  # the local RidgeCG's own rules
from ._blocks import build_blocks, class_setup, decision_dask, predict_from_scores, \
    regression_targets
from ._data import as_rows, check_min_rows, check_n_jobs, client_or_error, float_dtype

__all__ = ["RidgeCG", "RidgeCGClassifier"]


# ---------------------------------------------------------------------------- checks


def check_cg_params(tol, max_iter, preconditioner):
    if isinstance(tol, (bool, np.bool_)) or not isinstance(tol, numbers.Real) or not np.isfinite(tol) or tol < 0:
        raise ValueError(f"tol must be a finite number >= 0, got {tol!r}")
    if max_iter is not None and (isinstance(max_iter, (bool, np.bool_))
                                 or not isinstance(max_iter, numbers.Integral) or max_iter < 1):
        raise ValueError(f"max_iter must be None or an integer >= 1, got {max_iter!r}")
    if not (preconditioner is None or (isinstance(preconditioner, str) and preconditioner == "jacobi")):
        raise ValueError(f"preconditioner must be 'jacobi' or None, got {preconditioner!r}")


# ---------------------------------------------------------------------------- worker side
def block_stats(b, grid_ptr):
    """(S_b, s.Y, Z^T s, (Z.^2)^T s, value, entries per grid, n_b) of one partition; ``value``
    is the common stored value (NaN: not all equal, None: no entries)."""
    n, D = b.shape
    s = np.ones(n) if b.s is None else b.s
    if b.s is not None:
        if not np.all(np.isfinite(s)) or np.any(s < 0):
            raise ValueError("sample_weight must be finite and non-negative")
    if b.grid is not None:
        # training rows of a random binning: one entry of the same value per row and grid
        colsum, colsq = b.grid.col_stats(s, b.n_threads)
        value = b.grid.value
        entries = np.full(b.grid.grid_ptr.shape[0] - 1, n, dtype=np.int64)
    elif sp.issparse(b.Z):
        colsum = b.tdot(s[:, None])[:, 0]
        colsq = np.asarray(b.Z.multiply(b.Z).T @ s, dtype=np.float64) if n else np.zeros(D)
        data = b.Z.data
        value = None if data.size == 0 else (float(data[0]) if np.all(data == data[0]) else np.nan)
        entries = None
        if grid_ptr is not None:
            cols = b.Z.indices
            entries = np.bincount(np.searchsorted(grid_ptr, cols, side="right") - 1,
                                  minlength=grid_ptr.shape[0] - 1) if cols.size else \
                np.zeros(grid_ptr.shape[0] - 1, np.int64)
    else:
        colsum = b.tdot(s[:, None])[:, 0]
        colsq = (b.Z * b.Z).T @ s if n else np.zeros(D)
        value, entries = np.nan, None
    return float(s.sum()), np.einsum("i,ik->k", s, b.Y), colsum, colsq, value, entries, n


def block_rhs(b, ybar):
    """(Z_b^T S_b (Y_b - ybar), column sums of S_b (Y_b - ybar))."""
    sY = b.Y - ybar
    if b.s is not None:
        sY = sY * b.s[:, None]
    return b.tdot(sY), sY.sum(axis=0)


def block_operator(b, P, zP):
    """(Z_b^T T_b, 1^T T_b) with T_b = S_b (Z_b P - 1 zP), zP = zbar . P (None: uncentred)."""
    if b.grid is not None:
        return b.grid.gram_apply(P, zP, b.s, b.n_threads)
    T = b.dot(P)
    if zP is not None:
        T -= zP
    if b.s is not None:
        T *= b.s[:, None]
    return b.tdot(T), T.sum(axis=0)


# ---------------------------------------------------------------------------- driver side
def grid_projection(grid_ptr, fit_intercept):
    """The orthogonal projection off the grid-indicator null directions (the local
    solver's _GridProjection, rbcd/solvers/cg.py: with an intercept subtract each grid's
    mean over its columns; without, only the part of the grid means along e_g - e_h)."""
    sizes = np.diff(grid_ptr)
    keep = sizes > 0
    sizes = sizes[keep]
    grid_of_col = np.repeat(np.arange(sizes.shape[0]), sizes)
    starts = grid_ptr[:-1][keep]
    inv = 1.0 / sizes
    inv_total = 1.0 / float(inv.sum()) if sizes.shape[0] else 0.0

    def proj(V):
        if V.shape[0] == 0 or V.shape[1] == 0:
            return V
        means = np.add.reduceat(V, starts, axis=0) * inv[:, None]
        if not fit_intercept:
            c = means.sum(axis=0) * inv_total
            means -= inv[:, None] * c[None, :]
        V -= means[grid_of_col]
        return V

    return proj


def _fold_sums(acc, part):
    """Cluster.map's fold for results that are tuples of arrays: their sums in partition
    order, the additions of ``ordered_sum`` (same bits)."""
    if acc is None:
        return [np.array(x, dtype=np.float64, copy=True) for x in part]
    for total, x in zip(acc, part):
        total += x
    return acc


def _fold_stats(acc, st):
    """Cluster.map's fold for block_stats: S, s.Y, Z^T s, (Z.^2)^T s and the entries per
    grid summed in partition order, the stored values listed, the rows counted."""
    S, sY, colsum, colsq, value, entries, n = st
    if acc is None:
        return {"S": float(S), "sY": np.array(sY, dtype=np.float64, copy=True),
                "colsum": np.array(colsum, dtype=np.float64, copy=True),
                "colsq": np.array(colsq, dtype=np.float64, copy=True),
                "values": [] if value is None else [value],
                "entries": None if entries is None else np.array(entries, np.float64, copy=True),
                "n": int(n), "all_entries": entries is not None}
    acc["S"] += float(S)
    acc["sY"] += sY
    acc["colsum"] += colsum
    acc["colsq"] += colsq
    if value is not None:
        acc["values"].append(value)
    if entries is None or acc["entries"] is None:
        acc["entries"], acc["all_entries"] = None, False
    else:
        acc["entries"] += entries
    acc["n"] += int(n)
    return acc


def ridge_cg(cluster, k, alpha, fit_intercept, tol, max_iter, preconditioner, grid_ptr,
             verbose=0, shared_scale=False):
    """The CG of rbcd.solvers.cg.solve_ridge_cg with the operator on the partitions.

    ``shared_scale``: the local classifier's stopping rule (rbcd.solvers.cg._cg_iterate):
    every target stops when ||r_k|| <= tol max_j ||b_j||, and its residual is reported on
    that scale. With an intercept the numerically constant columns (:func:`constant_columns`)
    get w_j = 0, as locally.

    Returns (coef (k, D), intercept (k,), n_iter (k,), info): info["converged"] (k,),
    info["residual"] (k,), the final relative residuals ||r_k|| / scale_k, and
    info["stop"] (k,), why each target stopped ("tol", "breakdown" or "max_iter"), as the
    local solver's."""
    alpha = _check_alpha(alpha, k)
    # every partition's results are D-vectors (D x k for the operator): folded one at a
    # time (Cluster.map's fold), the driver holds its own CG vectors and one partition's
    stats = cluster.map(block_stats, grid_ptr, fold=_fold_stats)
    S = stats["S"]
    if not S > 0:
        raise ValueError("sample_weight must contain at least one non-zero weight (all are zero)")
    sYsum, colsum, colsq = stats["sY"], stats["colsum"], stats["colsq"]
    D = colsum.shape[0]
    if fit_intercept:
        zbar = colsum / S
        ybar = sYsum / S
        diag = colsq - S * zbar * zbar
    else:
        zbar = None
        ybar = np.zeros(k)
        diag = colsq
    diag = np.maximum(diag, 0.0)
    # the local solver's numerically constant columns: their centred column is exactly 0
    # (no right-hand side, no operator entries, no search direction: w_j = 0)
    flat = constant_columns(diag, colsq, stats["n"], fit_intercept)
    if flat.size:
        diag[flat] = 0.0
    B, rsum = cluster.map(block_rhs, ybar, fold=_fold_sums)
    if zbar is not None:
        B -= np.outer(zbar, rsum)
    if flat.size:
        B[flat] = 0.0

    # the grid projection applies when the structure is known, every stored value is the
    # same and every grid holds one entry per row (training data)
    proj = None
    # alpha = 0 (a singular system): plain CG from zero, which reaches the minimum-norm
    # least-squares solution, as the local solve_ridge_cg does (a preconditioned CG reaches
    # another one, whose predictions on new rows differ)
    use_diag = preconditioner == "jacobi" and not np.any(alpha == 0.0)
    if use_diag and grid_ptr is not None:
        values, n, entries = stats["values"], stats["n"], stats["entries"]
        same = len(values) > 0 and all(v == values[0] for v in values) and np.isfinite(values[0])
        if same and stats["all_entries"] and np.all(entries == entries.max()) \
                and entries.max() == n and n > 0:
            proj = grid_projection(np.asarray(grid_ptr, dtype=np.int64), fit_intercept)

    if max_iter is None:
        max_iter = default_max_iter(D)
    X = np.zeros((D, k))
    R = np.ascontiguousarray(B)
    bnorm = np.linalg.norm(B, axis=0)
    scale = stopping_scale(bnorm, shared_scale)
    thresh = tol * scale

    def inv_m(V, act):
        if not use_diag:
            return V.copy()
        d = diag[:, None] + alpha[None, act]
        return V * np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 1.0)

    P = inv_m(R, np.arange(k))
    if proj is not None:
        proj(P)
    if flat.size:
        P[flat] = 0.0
    rz = np.einsum("ij,ij->j", R, P)
    n_iter = np.zeros(k, dtype=np.int64)
    done = bnorm <= thresh                              # b = 0: the solution is w = 0
    rnorm = bnorm.copy()
    breakdown = np.zeros(k, dtype=bool)
    for it in range(1, max_iter + 1):
        act = np.flatnonzero(~done)
        if act.size == 0:
            break
        every = act.size == k   # all targets active: views, not D x k copies
        Pa = P if every else np.ascontiguousarray(P[:, act])
        zP = None if zbar is None else np.einsum("j,jk->k", zbar, Pa)
        Q, Tsum = cluster.map(block_operator, Pa, zP, fold=_fold_sums)
        Q += alpha[act] * Pa
        if zbar is not None:
            Q -= np.outer(zbar, Tsum)
        if flat.size:
            Q[flat] = 0.0      # constant columns: Zc e_j = 0 (Pa is 0 there: pq unchanged)
        pq = np.einsum("ij,ij->j", Pa, Q)
        # breakdown: p^T A p <= 0, or not finite (a non-finite direction must not reach X)
        ok = np.isfinite(pq) & (pq > 0)
        step = np.where(ok, rz[act] / np.where(ok, pq, 1.0), 0.0)
        if not ok.all():
            Pa = Pa.copy()
            Pa[:, ~ok] = 0.0                          # that column's X and R stay as they are
            Q[:, ~ok] = 0.0
        if every:
            X += step * Pa
            R -= step * Q
            Ra = R
        else:
            X[:, act] += step * Pa
            R[:, act] -= step * Q
            Ra = R[:, act]
        rn = np.sqrt(np.einsum("ij,ij->j", Ra, Ra))
        # z = Proj M^-1 r, 0 on the constant columns, and rz = r . z: the local solver's
        # rule (rbcd.solvers.cg._cg_iterate: r . M^-1 r would count the rounding that moves
        # r along the null directions, which P lacks, and diverged near tol 0)
        Z_ = inv_m(Ra, act)
        if proj is not None:
            proj(Z_)
        if flat.size:
            Z_[flat] = 0.0
        rz_new = np.einsum("ij,ij->j", Ra, Z_)
        n_iter[act] = it
        rnorm[act] = rn
        stop = (rn <= thresh[act]) | ~ok | ~np.isfinite(rn)
        beta = np.where(rz[act] > 0, rz_new / np.where(rz[act] > 0, rz[act], 1.0), 0.0)
        Pn = Z_ + beta * Pa    # in the projection's range and 0 on the constant columns
        if every:
            P = Pn
        else:
            P[:, act] = Pn
        rz[act] = rz_new
        done[act[stop]] = True
        breakdown[act[~ok | ~np.isfinite(rn)]] = True
        if verbose:
            print(f"[rbcd.dask RidgeCG] iteration {it}: max relative residual "
                  f"{np.max(rn / np.where(bnorm[act] > 0, bnorm[act], 1.0)):.3e}")
    # the local solver's report (rbcd.solvers.cg._cg_iterate): residuals on the stopping
    # scale, the reason each target stopped, and its ConvergenceWarning
    unconverged = ~(rnorm <= thresh)                    # a NaN residual is not converged
    relres = np.where(scale > 0, rnorm / np.where(scale > 0, scale, 1.0), 0.0)
    stop_reason = np.where(~unconverged, "tol", np.where(breakdown, "breakdown", "max_iter"))
    if np.any(unconverged):
        _warn_unconverged(unconverged, relres, stop_reason, n_iter, tol, max_iter)
    coef = X.T.copy()
    intercept = ybar - np.einsum("kj,j->k", coef, zbar) if zbar is not None else np.zeros(k)
    info = {"converged": ~unconverged, "residual": relres, "stop": stop_reason}
    return coef, intercept, n_iter, info


def check_distributed_ridge(est):
    """The parameters of rbcd.RidgeCG that the distributed solver takes: ``solver`` "cg" or
    "auto" (CG: the direct forms factor an n x n or D x D matrix on one machine), ``alpha``
    a number (alpha="auto" is chosen by the models, rbcd.dask.RBRegressor / RBClassifier),
    ``device`` "cpu"."""
    if not (isinstance(est.solver, str) and est.solver in ("cg", "auto")):
        raise ValueError(f"rbcd.dask solves ridge by CG: solver must be 'cg' or 'auto', got "
                         f"{est.solver!r} (the direct solves run on one machine: rbcd.RidgeCG)")
    if isinstance(est.alpha, str):
        raise ValueError(f"rbcd.dask.{type(est).__name__} needs a number for alpha, got "
                         f"{est.alpha!r} (rbcd.dask.RBRegressor / RBClassifier choose "
                         f"alpha='auto')")
    if est.device != "cpu":
        raise ValueError(f"rbcd.dask runs on the workers' CPUs: device must be 'cpu', got "
                         f"{est.device!r}")


def check_one_vs_rest(est):
    """rbcd.dask classifies one-vs-rest: ``multi_class`` must be "ovr" (the one-vs-one
    fits of rbcd.RidgeCGClassifier / RBClassifier run on one machine)."""
    if est.multi_class != "ovr":
        raise ValueError(f"rbcd.dask fits one-vs-rest: multi_class must be 'ovr', got "
                         f"{est.multi_class!r} (multi_class='ovo' runs on one machine: "
                         f"rbcd.{type(est).__name__})")



def _set_diagnostics(est, info):
    """The local solver's ``alpha_`` (the penalty used, per target where given so),
    ``converged_`` (every target reached tol), ``residual_`` (the final relative
    residual per target) and ``solver_`` (the method: always "cg" here)."""
    est.solver_ = "cg"
    a = np.asarray(est.alpha, dtype=np.float64)
    est.alpha_ = float(a) if a.ndim == 0 else a
    est.converged_ = bool(np.all(info["converged"]))
    est.residual_ = np.asarray(info["residual"], dtype=np.float64)

class RidgeCG(RegressorMixin, BaseEstimator):
    """Ridge regression by block preconditioned CG on row-partitioned Z (dask).

    Same parameters, objective and solution as :class:`rbcd.RidgeCG` (equal to 1e-10
    relative at a tight ``tol``; the sums are added in a different order). X is a dask
    array of sparse (or dense) chunks, e.g. ``rbcd.dask.RandomBinning().fit_transform(X)``;
    y and sample_weight are dask or numpy arrays with the same rows. ``n_jobs`` is accepted
    as the threads of each partition's products (see ``columns``).

    ``fit(X, y, sample_weight=None, columns=None)``: ``columns``, the grid structure of X
    (the ``PartitionedColumns`` returned with X by
    ``rbcd.dask.RandomBinning().fit_transform(X_raw, return_columns=True)``, or the fitted
    exact-mode RandomBinning that produced X), as the local ``fit(Z, y, columns=)``. With
    it the workers hold their blocks as grid labels and run the local solver's kernels on
    their threads (``n_jobs``; None: the worker's threads over its partitions), and the
    preconditioner is the projected Jacobi of the local solver; the same solution.

    Memory: the driver holds the CG iterates, about ten float64 arrays of D x k (k
    targets) at the peak of an iteration, plus at most 64 MB of the partitions' results
    at a time (they are added as they arrive, in partition order); each worker holds
    its partitions' blocks and one D x k result per partition while a round trip runs.

    The parameters are checked by the local RidgeCG's constraints (a bad value is an
    InvalidParameterError naming it); ``coef_`` and ``intercept_`` are in X's float dtype
    (float32 or float64) and so are the predictions, as the local solver's.
    """

    _parameter_constraints = _local.RidgeCG._parameter_constraints

    def __init__(self, alpha=1.0, fit_intercept=True, tol=1e-6, max_iter=None,
                 preconditioner="jacobi", n_jobs=None, verbose=0, solver="cg", device="cpu"):
        self.alpha = alpha
        self.solver = solver
        self.device = device
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.preconditioner = preconditioner
        self.n_jobs = n_jobs
        self.verbose = verbose

    @fit_context
    def fit(self, X, y, sample_weight=None, columns=None, verbose=None):
        check_distributed_ridge(self)
        client = client_or_error()
        check_cg_params(self.tol, self.max_iter, self.preconditioner)
        check_n_jobs(self.n_jobs)
        X = as_rows(X, "X", client)
        check_min_rows(X, type(self).__name__)
        if y is None:
            raise ValueError("RidgeCG requires y to be passed, but the target y is None")
        cluster, N, D, Xd = build_blocks(client, X, y, sample_weight, regression_targets,
                                         columns, self.n_jobs)
        y_shape = as_rows(y, "y", client, ndim=(1, 2)).shape
        y_ndim = len(y_shape)
        k = 1 if y_ndim == 1 else int(y_shape[1])
        _check_alpha(self.alpha, k)
        coef, intercept, n_iter, info = ridge_cg(cluster, k, self.alpha, bool(self.fit_intercept),
                                           self.tol, self.max_iter, self.preconditioner,
                                           cluster.grid_ptr,
                                           self.verbose if verbose is None else verbose)
        out = float_dtype(Xd.dtype)    # the local rule: X's float dtype
        if y_ndim == 1:
            self.coef_ = coef[0].astype(out)
            self.intercept_ = out.type(intercept[0]) if self.fit_intercept else 0.0
        else:
            self.coef_ = coef.astype(out)
            self.intercept_ = intercept.astype(out) if self.fit_intercept else np.zeros(k, out)
        self.n_iter_ = n_iter
        _set_diagnostics(self, info)
        self.n_features_in_ = D
        return self

    def predict(self, X):
        """Z @ coef_.T + intercept_, blockwise on the workers: a dask array."""
        check_is_fitted(self, "coef_")
        client = client_or_error()
        X = as_rows(X, "X", client)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but RidgeCG is expecting "
                             f"{self.n_features_in_} features as input.")
        out = decision_dask(X, self.coef_, self.intercept_)
        if out.ndim == 1 and np.ndim(self.coef_) == 2:   # a 2-D y of one column at fit
            out = out[:, None]
        return out


class RidgeCGClassifier(ClassifierMixin, BaseEstimator):
    """Ridge classification (one-vs-rest -1/+1 targets, all classes in one block CG) on
    row-partitioned Z, as :class:`rbcd.RidgeCGClassifier`. Used by rbcd.dask.RBClassifier.
    The parameters are checked by the local RidgeCGClassifier's constraints; ``coef_``,
    ``intercept_`` and the decision values are in X's float dtype, as locally."""

    _parameter_constraints = _local.RidgeCGClassifier._parameter_constraints

    def __init__(self, alpha=1.0, fit_intercept=True, tol=1e-6, max_iter=None,
                 preconditioner="jacobi", class_weight=None, n_jobs=None, verbose=0,
                 solver="cg", device="cpu", multi_class="ovr"):
        self.multi_class = multi_class
        self.alpha = alpha
        self.solver = solver
        self.device = device
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.preconditioner = preconditioner
        self.class_weight = class_weight
        self.n_jobs = n_jobs
        self.verbose = verbose

    @fit_context
    def fit(self, X, y, sample_weight=None, columns=None, verbose=None):
        check_distributed_ridge(self)
        check_one_vs_rest(self)
        client = client_or_error()
        check_cg_params(self.tol, self.max_iter, self.preconditioner)
        check_n_jobs(self.n_jobs)
        X = as_rows(X, "X", client)
        check_min_rows(X, type(self).__name__)
        if y is None:
            raise ValueError("RidgeCGClassifier requires y to be passed, but the target y "
                             "is None")
        classes, targets, sw = class_setup(client, X, y, sample_weight, self.class_weight)
        cluster, N, D, Xd = build_blocks(client, X, y, sw, targets, columns, self.n_jobs)
        k = 1 if classes.shape[0] == 2 else classes.shape[0]
        # the classes' scores are compared with each other: every class stops on one
        # scale, tol times the largest class's ||b|| (the local RidgeCGClassifier's rule)
        coef, intercept, n_iter, info = ridge_cg(cluster, k, self.alpha, bool(self.fit_intercept),
                                                 self.tol, self.max_iter, self.preconditioner,
                                                 cluster.grid_ptr,
                                                 self.verbose if verbose is None else verbose,
                                                 shared_scale=True)
        out = float_dtype(Xd.dtype)    # the local rule: X's float dtype
        self.classes_ = classes
        self.coef_ = coef.astype(out)
        self.intercept_ = intercept.astype(out) if self.fit_intercept else np.zeros(k, out)
        self.n_iter_ = n_iter
        _set_diagnostics(self, info)
        self.n_features_in_ = D
        return self

    def decision_function(self, X):
        check_is_fitted(self, "coef_")
        client = client_or_error()
        X = as_rows(X, "X", client)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but RidgeCGClassifier is "
                             f"expecting {self.n_features_in_} features as input.")
        return decision_dask(X, self.coef_, self.intercept_)

    def predict(self, X):
        return predict_from_scores(self.decision_function(X), self.classes_)
