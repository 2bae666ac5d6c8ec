"""Linear models by randomized coordinate descent: serial, Hogwild and grid-block parallel.

Objective (paper eq. 23 plus options; docs/design.md contract 8, docs/internals.md):

    P(w, b) = (1/S) sum_i s_i loss(z_i . w + b, y_i)
              + alpha * (l1_ratio ||w||_1 + (1 - l1_ratio)/2 ||w||_2^2)

solved one coordinate at a time with the prox-Newton step of paper eq. 24-27 (contract 9).
The kernels live in ``_cd.pyx``; this module validates input, converts Z once to CSC (the
form the kernels walk), picks the parallel mode, and runs the epoch loop with its
convergence check (relative duality gap or largest minimum-norm subgradient).

Scalings done at the boundary: the sample weights enter unnormalized with their sum S,
exactly as docs/internals.md writes P; weights (any loss) and squared-loss targets whose
magnitude would overflow or underflow the squares in P are divided by a power of two
first (exact; ``pow2_scale`` and ``_solve`` give the rescaling) and the solution scaled
back.

Parallel modes (``parallel=``):

* None: serial and reproducible; the same iterates as ``rbcd_ref`` (up to float rounding).
* "hogwild": threads split each epoch's coordinate draws, update w lock-free and add to the
  shared predictions atomically (paper Algorithm 2). Not reproducible run to run; converges
  to the same optimum. The adds use hardware transactions (Intel RTM) where the CPU has
  them, else one atomic add per stored entry; without RTM, and on coarse grids (many rows
  per column, so threads collide on the same rows), two threads can be slower than one.
  Hogwild is therefore never chosen automatically; ask for it only on a machine and a
  problem where benchmarks/compare_cd.py shows a gain.
* "grid": random binning's own structure: the bins of one grid touch disjoint rows, so all
  bins of a visited grid are updated at once in parallel. Deterministic, identical for any
  number of threads. Needs the grid structure: ``fit(Z, y, columns=...)``.
* "auto" (default): chosen from the problem, never from the thread count or the CPU, so
  the rule is the same on every machine and ``n_jobs=None`` gives the same coefficients
  everywhere (issue 10). The rule, in full:

    - the grid structure is given (``columns=``, as RBRegressor / RBClassifier pass it) and
      its grids hold on average at least ``AUTO_GRID_MIN_ENTRIES`` = 32768 stored entries
      (RB training data: N >= 32768 rows)  ->  "grid", on ``n_jobs`` threads;
    - otherwise  ->  None (serial, one thread, whatever ``n_jobs``).

  Inside grid mode a grid with fewer than ``GRID_PAR_MIN_ENTRIES`` = 2^15 entries (RB
  training data: N below 32,768) is updated on one thread: there the split lost on 2
  vCPUs (docs/benchmarks/cd.md); the iterates are the same either way. Serial CD
  (``parallel=None``, or "auto" below the grid size) runs on one thread, its per-epoch
  passes too. Hogwild is never chosen (see above).

Convergence is decided once per epoch, after the intercept step (docs/internals.md,
"Convergence"): the relative duality gap (squared loss, alpha and l1_ratio > 0) or the relative
largest minimum-norm subgradient at most tol; and, for the classification losses with
tol > 0, the decisions rule: the fit also ends when ``DECISION_EPOCHS`` = 10 epochs in a row
changed no training decision (the sign of z_i . w + b of the problem). A classifier is asked
for its decisions: on random binning features at the default alpha the problems are nearly
separable and the l1 penalty weak, the margins large, so the curvature of the logistic loss
on most rows is far below the bound beta = 1/4 that sizes the steps (paper eq. 24-27), and the
subgradient test needs thousands of epochs (breast cancer: 3,968 epochs to 1e-4, 1,299 to
1e-2) long after the decisions, and the test accuracy, have stopped moving (digits, 10
one-vs-rest problems: 11-60 epochs by the rule, test accuracy 0.973 against 0.951 at 100
epochs and at 5,000). ``dual_gap_`` still reports the relative subgradient reached. tol=0
switches the rule off (the fit runs to max_epochs), and so does ``decision_epochs=None``
(the subgradient test alone). The full check is an O(nnz) pass; when a certified lower bound computed from the few columns
that violated most at the last full check (at most 1/64 of the entries) already exceeds
tol, the decision "not converged" is known and the pass is skipped. Fits therefore stop at
the same epoch as with a full check every epoch; ``dual_gap_`` is always a full check.
The full check reads each column once for its gradient and for the objective's norms.
"""
import numbers
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from . import _cd, _stopping
from ._columns import columns_from, plain_columns
from ._paths import current_paths
from .._random import solver_seed
from .._threads import effective_n_threads, serial_dot
from .._validation import (N_JOBS, NONNEG_REAL, POSITIVE_INT, TOL, VERBOSE,
                           IntInterval, Interval, RealInterval, StrOptions, check_class_weight,
                           check_predict_csr, check_regression_target, check_sample_weight,
                           check_sparse_structure, fit_context)
from .._warnings import warn as warn_user
from .._integrity import ChecksummedState

__all__ = ["CDRegressor", "CDClassifier", "cd_path", "alpha_max"]

LOSSES = {
    "squared": _cd.Loss.SQUARED,
    "logistic": _cd.Loss.LOGISTIC,
    "squared_hinge": _cd.Loss.SQUARED_HINGE,
}
REGRESSION_LOSSES = ("squared",)
CLASSIFICATION_LOSSES = ("logistic", "squared_hinge")
SELECTIONS = {
    "random": _cd.Selection.RANDOM,
    "permutation": _cd.Selection.PERMUTATION,
    "cyclic": _cd.Selection.CYCLIC,
}
PARALLEL_MODES = (None, "auto", "hogwild", "grid")
_MODE_CODES = {None: _cd.Mode.SERIAL, "hogwild": _cd.Mode.HOGWILD, "grid": _cd.Mode.GRID}

_TRANSACTIONS = {"auto": _cd.TX_AUTO, "off": _cd.TX_OFF, "abort": _cd.TX_ABORT}
_MASK64 = (1 << 64) - 1
# Hogwild thread t of problem k: SplitMix64(seed + k + _HOGWILD_STRIDE * (t + 1))
_HOGWILD_STRIDE = 0x632BE59BD9B4E019


# ---------------------------------------------------------------------------- checks
def _check_choice(value, name, choices):
    for c in choices:
        if value is c or (isinstance(value, str) and isinstance(c, str) and value == c):
            return value
    raise ValueError(f"{name} must be one of {list(choices)!r}, got {value!r}")


def _check_real(value, name, low=None, high=None):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value}")
    return value


def _check_int(value, name, low=None):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return value


#: random_state as make_generator (rbcd._random) takes it: any non-negative int (64-bit seeds
#: included), a Generator, RandomState or SeedSequence, or None. scikit-learn's
#: "random_state" (the shared RANDOM_STATE) refuses seeds >= 2**32 and Generators.
_RANDOM_STATE = [Interval(numbers.Integral, 0, None, closed="left"), np.random.RandomState,
                 np.random.Generator, np.random.SeedSequence, None]

_CD_CONSTRAINTS = {
    "alpha": NONNEG_REAL + [StrOptions({"auto"})],
    "l1_ratio": [RealInterval(0, 1, closed="both")],
    "fit_intercept": ["boolean"],
    "max_epochs": POSITIVE_INT,
    "tol": TOL,
    "selection": [StrOptions(set(SELECTIONS))],
    "parallel": [StrOptions({"auto", "hogwild", "grid"}), None],
    "n_jobs": N_JOBS,
    "warm_start": ["boolean"],
    "random_state": _RANDOM_STATE,
    "verbose": VERBOSE,
}


def _params_of(est):
    """The solver parameters of an estimator whose ``_parameter_constraints`` have been
    validated (``fit_context``), as a dict (the estimator is untouched)."""
    auto = isinstance(est.alpha, str) and est.alpha == "auto"
    for name in ("tol",) if auto else ("alpha", "tol"):
        if not np.isfinite(float(getattr(est, name))):
            raise ValueError(f"{name} must be finite, got {getattr(est, name)!r}")
    return dict(
        loss=est.loss,
        alpha="auto" if auto else float(est.alpha),
        l1_ratio=float(est.l1_ratio),
        max_epochs=int(est.max_epochs),
        tol=float(est.tol),
        selection=est.selection,
        parallel=est.parallel,
        n_threads=effective_n_threads(est.n_jobs),
        fit_intercept=bool(est.fit_intercept),
        verbose=int(est.verbose),
        decision_epochs=getattr(est, "decision_epochs", None),
    )


def _check_sample_weight(sample_weight, n_samples):
    """Float64 weights (n_samples,), finite, >= 0, positive sum; None -> None (all ones).
    The shared check of every estimator (rbcd._validation.check_sample_weight)."""
    return check_sample_weight(sample_weight, n_samples)


def _check_y_given(est, y):
    if y is None:
        raise ValueError(
            f"{type(est).__name__} requires y to be passed, but the target y is None"
        )


def _check_regression_target(y, n_samples):
    """y as float64 (1-D or 2-D), finite, of n_samples rows (rbcd._validation's check)."""
    return check_regression_target(y, n_samples, matrix="the feature matrix")


def _class_targets(y, n_samples):
    """Class labels y as CDClassifier's -1/+1 targets: (n, 1) for two classes (the larger
    label is +1), one column per class for more (one-vs-rest)."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D for a classification loss, got shape {y.shape}")
    if y.shape[0] != n_samples:
        raise ValueError(f"y has {y.shape[0]} rows but the feature matrix has {n_samples} rows")
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or inf")
    classes, idx = np.unique(y, return_inverse=True)
    if classes.shape[0] < 2:
        raise ValueError(f"a classification loss needs at least 2 classes in y, got "
                         f"{classes.shape[0]}")
    if classes.shape[0] == 2:
        return np.where(idx == 1, 1.0, -1.0)[:, None]
    return np.column_stack([np.where(idx == k, 1.0, -1.0) for k in range(classes.shape[0])])


def _resolve_mode(parallel, n_threads, cols, grid_min_entries):
    """The mode actually used (None, "hogwild" or "grid") and its thread count.

    "auto" follows from the problem alone, never from the thread count, so that the
    coefficients under ``n_jobs=None`` are the same on every machine: "grid" when the grid
    structure was given and its grids hold at least ``grid_min_entries`` stored entries on
    average (the size from which one grid's update is split across threads), else None
    (serial). Both are deterministic for any number of threads; Hogwild is never chosen
    automatically (its result varies from run to run).
    """
    if parallel == "grid":
        if cols.grid_ptr is None:
            raise ValueError(
                "parallel='grid' needs the grid structure of an exact mode random binning "
                "(n_features=None): pass columns= (the RBColumns of Z from "
                "RandomBinning.fit_transform(X, return_columns=True), or the fitted "
                "RandomBinning) to fit"
            )
        return "grid", n_threads
    if parallel == "hogwild":
        return "hogwild", n_threads
    # serial CD runs on one thread, its per-epoch passes (objective, convergence) too: next
    # to a serial epoch, waking a second thread for each pass cost more than it saved
    # (2 threads 0.73x at N = 10^4, D = 3.2 x 10^5; docs/benchmarks/cd.md)
    if parallel is None:
        return None, 1
    if cols.grid_ptr is not None:
        n_grids = max(cols.grid_ptr.shape[0] - 1, 1)
        if cols.nnz >= grid_min_entries * n_grids:
            return "grid", n_threads
    return None, 1


# ---------------------------------------------------------------------------- losses (numpy)
def _loss_deriv_np(loss, p, y):
    """loss'(p, y) elementwise (table in docs/internals.md)."""
    return _stopping.loss_deriv(loss, p, y)


def _optimal_intercept(loss, y, s, S):
    """b0, the intercept of the w = 0 model (docs/internals.md, alpha_max)."""
    if loss == "squared":
        return _stopping.optimal_intercept(loss, S, serial_dot(s, y), 0.0, 0.0)
    return _stopping.optimal_intercept(loss, S, 0.0, float(np.sum(s[y > 0])),
                                       float(np.sum(s[y < 0])))


def _gradient_at_constant(cols, loss, y, s, S, b0, n_threads):
    """max_j |(1/S) sum_i s_i loss'(b0, y_i) z_ij|."""
    d = _loss_deriv_np(loss, np.full_like(y, b0), y) * s
    if cols.n_cols == 0:
        return 0.0
    return float(np.max(np.abs(cols.column_sums(d, n_threads) / S)))


# ---------------------------------------------------------------------------- solver
def pow2_scale(v):
    """A power of two c with max|v| / c in [1, 2) when max|v| lies outside
    [2**-SAFE_EXP, 2**SAFE_EXP] (and is not 0), else 1.0.

    Dividing by a power of two is exact (no rounding, short of subnormals), so a problem
    solved on v / c takes the same steps as on v, scaled: this keeps squares and sums of
    squares of huge or tiny targets and weights finite and non-zero.
    """
    m = float(np.max(np.abs(v))) if np.size(v) else 0.0
    if not np.isfinite(m):  # no power of two brings inf into range: callers check first
        raise ValueError(f"cannot rescale non-finite values (largest |value| {m!r})")
    if m == 0.0 or 2.0 ** -SAFE_EXP <= m <= 2.0 ** SAFE_EXP:
        return 1.0
    return float(np.ldexp(1.0, int(np.frexp(m)[1]) - 1))


SAFE_EXP = 100


#: CDClassifier's default ``decision_epochs``: a fit (tol > 0) has converged when this many
#: epochs in a row changed no training decision (the sign of z_i . w + b), or at the
#: subgradient test.
DECISION_EPOCHS = 10


# ---------------------------------------------------------------------------- alpha="auto"
# The penalty chosen from the data (docs/internals.md, "alpha='auto'"), as glmnet and
# scikit-learn's LassoCV choose it, on one fixed held-out fraction instead of folds:
#: the path: AUTO_N_ALPHAS penalties from alpha_max down to AUTO_RATIO * alpha_max, log-spaced,
#: two per decade (glmnet's lambda.min.ratio; RB classification wants the small end: digits'
#: held-out loss still falls at 1e-4 alpha_max). On the bundled sets (raw and scaled,
#: random_state 0-2) 13 penalties with the full decisions rule scored as these within a
#: test row or two either way, at 2.2x the time of the path (digits 1.8-2.2 s against
#: 0.75-0.9 s on the 2-vCPU AMD EPYC, loaded)
AUTO_N_ALPHAS = 9
AUTO_RATIO = 1e-4
#: one row in AUTO_HOLDOUT is held out (of each class, for the classifiers), drawn by
#: ``numpy.random.default_rng(AUTO_SEED)``: the same rows whatever random_state or n_jobs
AUTO_HOLDOUT = 5
AUTO_SEED = 0
#: the path stops once the held-out loss has not improved for this many penalties in a row
#: (the small penalties are the expensive fits)
AUTO_PATIENCE = 3
#: the epochs of each fit along the path, at most (the fit at the chosen alpha has max_epochs):
#: the path ranks the penalties, and its small-penalty end is the slow one (diabetes: the
#: same choice as with every point converged)
AUTO_PATH_EPOCHS = 100
#: and the decisions rule of the path's classification fits: settled after this many epochs
#: (at most the model's decision_epochs; its floor of epochs per fit made most of the path's
#: time)
AUTO_PATH_DECISION_EPOCHS = 3
#: alpha_max of an l1_ratio below this is computed as at this one (glmnet, for the ridge end)
AUTO_L1_FLOOR = 1e-3
#: the penalty when there is nothing to choose from: fewer than AUTO_HOLDOUT rows (of some
#: class), or targets that are constant on the fitting rows (alpha_max = 0)
AUTO_FALLBACK = 1e-4


def holdout_mask(n_rows, strata=None):
    """The rows alpha="auto" holds out: a boolean mask (n_rows,). Every row gets a rank,
    its place in one permutation of the rows (default_rng(AUTO_SEED)). ``strata`` None: the
    n_rows // AUTO_HOLDOUT rows of lowest rank (the first of the permutation); else (a
    label per row: the classes) the same within every label, its rows of lowest rank. A
    class's held-out rows depend on its rows only: renaming or reordering the class labels
    holds out the same rows."""
    order = np.random.default_rng(AUTO_SEED).permutation(n_rows)
    held = np.zeros(n_rows, dtype=bool)
    if strata is None:
        held[order[: n_rows // AUTO_HOLDOUT]] = True
        return held
    strata = np.asarray(strata)[order]          # the labels in rank order
    for c in np.unique(strata):
        ranked = order[strata == c]             # the class's rows, lowest rank first
        held[ranked[: ranked.shape[0] // AUTO_HOLDOUT]] = True
    return held


def _auto_alpha(cols, Z, targets, s_full, strata, params, *, mode, n_threads, seed, paths):
    """alpha="auto": (alpha, W, B) with W, B the path's solution at that alpha (the start of
    the fit on every row), or (AUTO_FALLBACK, None, None); and the record (alphas run, their
    held-out losses). The fit rows are the rows outside ``holdout_mask`` with their weights,
    the held-out rows weigh 0 in the path's fits (the same columns and grid structure), so
    each fit along the path is the model's own objective on the fit rows."""
    loss = params["loss"]
    l1_ratio = params["l1_ratio"]
    N = cols.n_rows
    held = holdout_mask(N, strata)
    s_fit = np.where(held, 0.0, s_full)
    s_held = s_full[held]
    S_fit = float(np.sum(s_fit))
    S_held = float(np.sum(s_held))
    K = targets.shape[1]
    none = (AUTO_FALLBACK, None, None), (np.zeros(0), np.zeros(0))
    if not (S_fit > 0 and S_held > 0):
        return none
    if loss != "squared":
        for k in range(K):
            yk = targets[:, k]
            if not (np.sum(s_fit[yk > 0]) > 0 and np.sum(s_fit[yk < 0]) > 0):
                return none
    # alpha_max of the fit rows, the largest over the problems (scaled targets: exact)
    a_max = 0.0
    for k in range(K):
        yk = np.ascontiguousarray(targets[:, k])
        c = pow2_scale(yk) if loss == "squared" else 1.0
        b0 = _optimal_intercept(loss, yk / c, s_fit, S_fit) if params["fit_intercept"] else 0.0
        a_max = max(a_max, c * _gradient_at_constant(cols, loss, yk / c, s_fit, S_fit, b0,
                                                     n_threads))
    a_max /= max(l1_ratio, AUTO_L1_FLOOR)
    if not a_max > 0:
        return none
    alphas = np.geomspace(a_max, a_max * AUTO_RATIO, AUTO_N_ALPHAS)
    beta = _cd.beta_of(LOSSES[loss])
    h = _cd.column_sq_sums(cols.indptr, cols.indices, cols.data, cols.zval,
                           np.ascontiguousarray(s_fit), n_threads) / S_fit
    rows = np.flatnonzero(held)
    Zh = (sp.csr_matrix(Z) if sp.issparse(Z) else np.asarray(Z))[rows]
    Th = targets[rows]
    # squared loss: held-out losses scored in units of targets / cy (a power of two, 1 for
    # targets within 2**+-SAFE_EXP), so that huge targets do not square to inf; the same
    # order of the alphas, and the record in the targets' units
    cy = pow2_scale(targets) if loss == "squared" else 1.0
    W = np.zeros((K, cols.n_cols))
    B = np.zeros(K)
    best, best_score, worse, scores = None, np.inf, 0, []
    path_decisions = params["decision_epochs"]
    if path_decisions is not None:
        path_decisions = min(path_decisions, AUTO_PATH_DECISION_EPOCHS)
    for i, a in enumerate(alphas):
        M = np.ascontiguousarray(beta * h + a * (1.0 - l1_ratio))
        for k in range(K):
            r = _solve(cols, targets[:, k], s_fit, loss=loss, alpha=float(a), l1_ratio=l1_ratio,
                       fit_intercept=params["fit_intercept"],
                       max_epochs=min(params["max_epochs"], AUTO_PATH_EPOCHS),
                       tol=params["tol"], selection=params["selection"], mode=mode,
                       n_threads=n_threads, seed=seed + k, M=M, paths=paths,
                       w_init=W[k] if i else None, b_init=float(B[k]),
                       decision_epochs=path_decisions)
            W[k], B[k] = r["w"], r["b"]
        P = (np.asarray(Zh @ W.T) + B[None, :]) / cy
        score = serial_dot(s_held, np.sum(_stopping.loss_value(loss, P, Th / cy), axis=1)) / S_held
        scores.append(score)
        if score < best_score:
            best, best_score, worse = (float(a), W.copy(), B.copy()), score, 0
        else:
            worse += 1
            if worse >= AUTO_PATIENCE:
                break
    if best is None:         # no finite held-out loss at any alpha
        return none
    with np.errstate(over="ignore"):
        record = np.array(scores) * (cy * cy)
    return best, (alphas[: len(scores)], record)


#: The watch list (lower bound before the full check) is kept only while the last full
#: check exceeded the stopping threshold by this factor.
_WATCH_MARGIN = 4.0


def _solve(cols, y, s, *, loss, alpha, l1_ratio, fit_intercept, max_epochs, tol, selection,
           mode, n_threads, seed, M, paths, w_init=None, b_init=0.0, verbose=0, label="",
           _lams=None, decision_epochs=None):
    """Coordinate descent on one problem (one target / one one-vs-rest class).

    ``s`` None means unit weights. ``M`` = beta h + lam2 (shared by the problems of a fit).
    Returns dict(w, b, n_iter, history, gap, converged).

    Scaling (squared loss): with y' = y / c, w' = w / c, b' = b / c and lam1' = lam1 / c
    (lam2 unchanged), P'(w', b') = P(w, b) / c^2, so the minimizer of P' is the minimizer of
    P divided by c. For a target whose magnitude would overflow or underflow the squares
    in P (|y| beyond 2**+-SAFE_EXP) the problem is solved in those units with c a power of
    two (``pow2_scale``: exact), and w, b, the objective history are scaled back.
    """
    N = cols.n_rows
    lam1 = alpha * l1_ratio
    lam2 = alpha * (1.0 - l1_ratio)
    s_full = np.ones(N) if s is None else s
    S = float(np.sum(s_full))
    y = np.ascontiguousarray(y, dtype=np.float64)
    if _lams is not None:
        lam1, lam2 = _lams
    c = pow2_scale(y) if loss == "squared" and _lams is None else 1.0
    if c != 1.0:
        y = y / c
        lam1 = lam1 / c
        if w_init is not None:
            w_init = np.asarray(w_init, dtype=np.float64) / c
            b_init = b_init / c
        # alpha and l1_ratio pass unchanged: they choose the convergence check (gap or
        # subgradient); the penalties themselves come from _lams
        out = _solve(cols, y, s, loss=loss, alpha=alpha, l1_ratio=l1_ratio,
                     fit_intercept=fit_intercept,
                     max_epochs=max_epochs, tol=tol, selection=selection, mode=mode,
                     n_threads=n_threads, seed=seed, M=M, paths=paths, w_init=w_init,
                     b_init=b_init, verbose=verbose, label=label, _lams=(lam1, lam2))
        out["w"] = out["w"] * c
        out["b"] = out["b"] * c
        with np.errstate(over="ignore"):
            out["history"] = [h * c * c for h in out["history"]]
        return out
    # grid mode, and serial cyclic CD on RB columns (grid after grid) from
    # paths.serial_stream_min_rows rows (..._classification for the other losses), take the
    # streamed step
    min_rows = (paths.serial_stream_min_rows if loss == "squared"
                else paths.serial_stream_min_rows_classification)
    stream = mode == "grid" or (mode is None and selection == "cyclic"
                                and cols.grid_ptr is not None and N >= min_rows)
    prob = _cd.CDProblem(
        cols.indptr, cols.indices, cols.data, cols.zval, y, s, S, M, LOSSES[loss], lam1, lam2,
        fit_intercept, SELECTIONS[selection], seed & _MASK64,
        cols.grid_ptr if stream else None,
        cols.grid_labels(n_threads) if stream and paths.grid_stream else None,
        paths.grid_par_min, paths.stream_max_partials,
        _TRANSACTIONS[paths.transactions],
    )
    if mode == "hogwild":
        prob.set_thread_seeds([(seed + _HOGWILD_STRIDE * (t + 1)) & _MASK64 for t in range(n_threads)])
    warm = w_init is not None
    b0 = _optimal_intercept(loss, y, s_full, S) if fit_intercept else 0.0
    if warm:
        prob.start_from(w_init, b_init if fit_intercept else 0.0)
    elif fit_intercept:
        # a cold start begins at the optimal intercept of the w = 0 model, so that at
        # alpha >= alpha_max (computed from the same b0) w = 0 is already the solution
        prob.start_from(np.zeros(cols.n_cols), b0)

    use_gap = _stopping.uses_gap(loss, l1_ratio, alpha)
    if use_gap:
        scale = _stopping.stopping_scale(True, tol, serial_dot(s_full, 0.5 * (y - b0) ** 2) / S,
                                         None, N, 1.0, 0.0, S)
        check = _cd.Check.DUALITY_GAP
    else:
        zmax = max(1.0, cols.zval if cols.data is None
                   else float(np.max(np.abs(cols.data), initial=0.0)))
        deriv_abs = serial_dot(s_full, np.abs(_loss_deriv_np(loss, np.full_like(y, b0), y)))
        scale = _stopping.stopping_scale(
            False, tol, None, _gradient_at_constant(cols, loss, y, s_full, S, b0, n_threads),
            N, zmax, deriv_abs, S)
        check = _cd.Check.SUBGRADIENT

    history = []
    if scale == 0.0:  # solved at w = 0
        return dict(w=prob.w_arr, b=prob.b, n_iter=0, history=history, gap=0.0, converged=True,
                    stop="tol")

    code = _MODE_CODES[mode]
    value = np.inf
    converged = False
    n_iter = 0
    D = cols.n_cols
    col_nnz = np.diff(cols.indptr)
    watch_budget = max(cols.nnz // 64, 1)  # entries the lower bound may read per epoch
    watch = None
    # rounding slack of the gap's lower bound (its terms are O(P0) = O(scale))
    slack = 1e-8 * scale if use_gap else 0.0

    def watch_list():
        """The most violating columns of the last full check, within the entry budget."""
        scores = prob.scores()
        if D == 0:
            return np.zeros(0, dtype=np.int64)
        top = _cd.top_columns(scores, 256)
        within = np.cumsum(col_nnz[top]) <= watch_budget
        within[0] = True
        return np.sort(top[within]).astype(np.int64)

    if max_epochs > 1 and verbose < 2:
        prob.convergence(check, n_threads)  # scores at the start point seed the watch list
        watch = watch_list()
    # classification (tol > 0): the decisions rule, docs/internals.md "Convergence"
    decide = decision_epochs is not None and loss != "squared" and tol > 0
    decisions = prob.predictions() > 0 if decide else None
    steady = 0  # epochs in a row that changed no training decision
    for epoch in range(max_epochs):
        prob.epoch(code, n_threads)
        if fit_intercept:
            prob.intercept_step(n_threads)
        n_iter = epoch + 1
        settled = False
        if decide:
            now = prob.predictions() > 0
            steady = steady + 1 if np.array_equal(now, decisions) else 0
            decisions = now
            settled = steady >= decision_epochs
        # The full check is an O(nnz) pass. When a certified lower bound from the columns
        # that violated most at the last full check already exceeds tol, the stopping
        # decision is known ("not yet") and the pass is skipped: the same epochs run as
        # with a full check every epoch. Never skipped on the last epoch or at verbose >= 2
        # (which prints every epoch's value). Either computes the objective's sums on the
        # way (the full check in its pass over the columns), so ``objective`` is free.
        if watch is not None and verbose < 2 and epoch < max_epochs - 1 and not settled:
            if prob.lower_bound(check, watch, n_threads) > tol * scale + slack:
                history.append(prob.objective(n_threads))
                continue
        raw = prob.convergence(check, n_threads)
        history.append(prob.objective(n_threads))
        value = raw / scale
        # A lower bound from a few columns can only skip a check while the full value is
        # well above the stopping threshold; near it (or at a gap in rounding, tol = 0) the
        # next epoch goes straight to the full check and the watch list is not built.
        watch = watch_list() if raw > _WATCH_MARGIN * (tol * scale + slack) else None
        if verbose >= 2:
            kind = "gap" if use_gap else "subgradient"
            print(f"[rbcd CD{label}] epoch {n_iter}: objective {history[-1]:.10g}, "
                  f"relative {kind} {value:.3e} (tol {tol:.1e})")
        if raw <= tol * scale or settled:
            converged = True
            break
    stop = ("max_epochs" if not converged else "tol" if raw <= tol * scale else "decisions")
    return dict(w=prob.w_arr, b=prob.b, n_iter=n_iter, history=history, gap=float(value),
                converged=converged, stop=stop)


# ---------------------------------------------------------------------------- estimators
#: A column whose mean exceeds this many times its standard deviation is "not centred".
_UNCENTRED = 100.0


def not_converged_message(gaps, failed, loss, params, advice):
    """The ConvergenceWarning of a CD fit whose problems ``failed`` (indices into ``gaps``,
    their final relative gaps or subgradients) did not converge: one message for all of
    them, naming the worst; ``advice(worst)`` its last sentence (:func:`_slow_cause`).
    ``params``: l1_ratio, max_epochs, tol. (rbcd.dask's CD says the same.)"""
    n_problems = len(gaps)
    kind = ("duality gap" if loss == "squared" and params["l1_ratio"] > 0
            else "largest minimum-norm subgradient")
    worst = max(failed, key=lambda k: gaps[k])
    which = f" for {len(failed)} of {n_problems} problems" if n_problems > 1 else ""
    return (f"Coordinate descent did not converge{which} after {params['max_epochs']} "
            f"epochs: relative {kind} {gaps[worst]:.3e}"
            f"{f' (problem {worst}, the worst)' if n_problems > 1 else ''} > tol "
            f"{params['tol']:.3e}. {advice(worst)}")


def _slow_cause(cols, s, S, h, n_threads, sparse_nonneg=False):
    """The advice of the "did not converge" warning (only then; ``s`` None = unit weights).
    ``sparse_nonneg``: a callable, true when Z came sparse with no negative value (asked
    only where it decides the advice: an O(nnz) pass; bins or counts, e.g. hashed
    random binning features, whose collisions add up): centring would make it dense, so a
    nearly constant column gets the bin advice, as for constant stored values.

    Costs O(D) for a binary-valued matrix without weights (the column sums are the column
    counts times the stored value) and one O(nnz) pass otherwise.

    Columns far from centred (|mean| >> standard deviation, e.g. X + 1e6) are nearly
    parallel to each other and to the intercept: coordinate descent moves along them in
    tiny zig-zag steps, and neither more epochs nor a larger alpha is the cure. With
    h_j = (1/S) sum s z_j^2 and m_j = (1/S) sum s z_j, var_j = h_j - m_j^2.
    """
    advice = "Increase max_epochs, tol or alpha."
    if cols.n_cols == 0:
        return advice
    if s is None and cols.data is None:
        m = np.diff(cols.indptr) * cols.zval / S
    else:
        m = cols.column_sums(np.ones(cols.n_rows) if s is None else s, n_threads) / S
    var = np.maximum(h - m * m, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(m != 0.0, np.abs(m) / np.sqrt(var), 0.0)
    j = int(np.argmax(r))
    if not r[j] > _UNCENTRED:
        return advice
    constant = not np.isfinite(r[j])       # variance 0: the same value in every row
    if cols.data is None or (sparse_nonneg and sparse_nonneg()):
        # every stored value equal: indicator features such as random binning's Z, which
        # no one centres (it would make Z dense); the cause is a bin that holds nearly all
        # the rows, i.e. a bandwidth large against the spread of the data
        held = ("holds every row: it is constant, parallel to the intercept" if constant
                else f"holds nearly every row (|mean| = {r[j]:.3g} times its standard "
                     f"deviation): it is almost constant, nearly parallel to the intercept")
        return (f"Column {j} {held}, and such columns make coordinate descent slow. On "
                f"random binning features (RBRegressor, RBClassifier, RandomBinning) it is "
                f"a bin that {'every' if constant else 'almost every'} row falls in: try a "
                f"smaller sigma; or {advice[0].lower()}{advice[1:]}")
    spread = (" and is constant (standard deviation 0)" if constant
              else f" = {r[j]:.3g} times its standard deviation")
    return (f"The features are not centred: column {j} has |mean| {abs(m[j]):.3g}"
            f"{spread}, and such columns make coordinate descent slow whatever "
            f"max_epochs. Centre (and scale) the features first, e.g. "
            f"sklearn.preprocessing.StandardScaler; {advice[0].lower()}{advice[1:]}")


def _sparse_nonneg(Z):
    """True for a sparse Z without negative stored values (only called for the warning)."""
    return bool(sp.issparse(Z) and (Z.nnz == 0 or Z.data.min() >= 0))


class _CDBase(ChecksummedState, BaseEstimator):
    """Shared fit machinery of CDRegressor and CDClassifier."""

    _loss_choices = REGRESSION_LOSSES + CLASSIFICATION_LOSSES

    def _validate_Z(self, Z, reset):
        kwargs = dict(accept_sparse=True, dtype=[np.float64, np.float32])
        if not reset:
            return check_predict_csr(self, Z, **kwargs)
        return validate_data(self, check_sparse_structure(Z, "Z"), reset=reset, **kwargs)

    def _solve_all(self, Z, targets, s, params, columns, strata=None):
        """Solve every problem k (column k of ``targets``); sets the shared attributes.
        alpha="auto" first chooses the penalty (``_auto_alpha``; ``strata``: the class of
        each row, for a held-out fraction of every class)."""
        cols = columns_from(Z, columns, self.n_jobs).check()
        paths = current_paths()
        mode, n_threads = _resolve_mode(params["parallel"], params["n_threads"], cols,
                                        paths.auto_grid_min)
        if mode == "grid" and cols.grid_ptr is not None and cols.nnz < paths.grid_par_min * max(
                cols.grid_ptr.shape[0] - 1, 1):
            n_threads = 1  # grids too small to gain from threads; the iterates are the same
        loss = params["loss"]
        n_problems = targets.shape[1]
        D = cols.n_cols
        N = cols.n_rows
        if s is not None:
            # P divides the weighted loss by S = sum s: invariant under s -> s / c; a power
            # of two (exact) keeps S and the weighted sums finite for huge or tiny weights
            s = s / pow2_scale(s)
        s_full = np.ones(N) if s is None else s
        S = float(np.sum(s_full))
        beta = _cd.beta_of(LOSSES[loss])
        seed = solver_seed(self.random_state)
        auto_start = None
        self.alphas_, self.holdout_loss_ = None, None
        if isinstance(params["alpha"], str):   # "auto": the path on the fit rows
            (alpha, W_auto, B_auto), (self.alphas_, self.holdout_loss_) = _auto_alpha(
                cols, Z, targets, s_full, strata, params, mode=mode, n_threads=n_threads,
                seed=seed, paths=paths)
            params = dict(params, alpha=alpha)
            if W_auto is not None:
                auto_start = (W_auto, B_auto)
            starts = self.__dict__.get("_auto_starts")
            if starts is not None:   # a caller's list (rbcd.dask: its final fit starts there too)
                starts.append(auto_start)
        self.alpha_ = float(params["alpha"])
        lam2 = params["alpha"] * (1.0 - params["l1_ratio"])
        if cols.data is None and s is None:
            h = np.diff(cols.indptr) * (cols.zval * cols.zval) / S  # counts * z^2: no pass
        else:
            h = _cd.column_sq_sums(cols.indptr, cols.indices, cols.data, cols.zval,
                                   np.ascontiguousarray(s_full), n_threads) / S
        M = np.ascontiguousarray(beta * h + lam2)
        warm = False
        if auto_start is not None:   # alpha="auto": from the path's solution at alpha_
            W0, B0 = auto_start
            warm = True
        elif self.warm_start and hasattr(self, "coef_"):
            W0 = np.asarray(self.coef_, dtype=np.float64)
            B0 = np.asarray(self.intercept_, dtype=np.float64)
            if W0.size == n_problems * D and B0.size == n_problems:
                W0 = W0.reshape(n_problems, D)
                B0 = B0.reshape(n_problems)
                warm = True
        t_start = time.perf_counter()
        if params["verbose"] >= 2:
            print(f"[rbcd CD] {n_problems} problem(s), N = {N}, D = {D}, nnz = {cols.nnz}"
                  f"{' (all values equal)' if cols.data is None else ''}; loss {loss}, "
                  f"parallel = {mode or 'serial'}, {n_threads} thread(s)")
        results = []
        for k in range(n_problems):
            results.append(_solve(
                cols, targets[:, k], s, loss=loss, alpha=params["alpha"],
                l1_ratio=params["l1_ratio"], fit_intercept=params["fit_intercept"],
                max_epochs=params["max_epochs"], tol=params["tol"],
                selection=params["selection"], mode=mode, n_threads=n_threads,
                seed=seed + k, M=M, paths=paths,
                w_init=W0[k] if warm else None, b_init=float(B0[k]) if warm else 0.0,
                verbose=params["verbose"], label=f" (problem {k})" if n_problems > 1 else "",
                decision_epochs=params["decision_epochs"],
            ))
        failed = [k for k, r in enumerate(results) if not r["converged"]]
        if params["verbose"]:
            kind = ("gap" if _stopping.uses_gap(loss, params["l1_ratio"], params["alpha"])
                    else "subgradient")
            worst = max(range(n_problems), key=lambda k: results[k]["gap"])
            epochs = max(r["n_iter"] for r in results)
            which = f" (problem {worst}, the worst of {n_problems})" if n_problems > 1 else ""
            verdict = ("converged" if not failed else
                       f"NOT converged{f' ({len(failed)} of {n_problems})' if n_problems > 1 else ''}")
            print(f"[rbcd CD] {type(self).__name__}: {epochs} epoch(s), relative {kind} "
                  f"{results[worst]['gap']:.3e}{which} (tol {params['tol']:.1e}), {verdict}, "
                  f"parallel = {mode or 'serial'}, {n_threads} thread(s), "
                  f"{time.perf_counter() - t_start:.3f}s")
        if failed:
            warn_user(not_converged_message(
                [r["gap"] for r in results], failed, loss, params,
                lambda worst: _slow_cause(cols, s, S, h, n_threads, lambda: _sparse_nonneg(Z))),
                ConvergenceWarning)
        self.parallel_ = mode
        self.n_threads_ = int(n_threads)
        W = np.vstack([r["w"] for r in results]).astype(Z.dtype, copy=False)
        B = np.array([r["b"] for r in results], dtype=np.float64).astype(Z.dtype, copy=False)
        single = n_problems == 1
        if single:
            r = results[0]
            self.n_iter_ = int(r["n_iter"])
            self.objective_history_ = list(r["history"])
            self.dual_gap_ = float(r["gap"])
            self.stop_ = r["stop"]
        else:
            self.n_iter_ = np.array([r["n_iter"] for r in results], dtype=np.int64)
            self.objective_history_ = [list(r["history"]) for r in results]
            self.dual_gap_ = np.array([r["gap"] for r in results], dtype=np.float64)
            self.stop_ = np.array([r["stop"] for r in results])
        return W, B

    def _decision(self, Z):
        check_is_fitted(self, "coef_")
        Z = self._validate_Z(Z, reset=False)
        W = np.atleast_2d(self.coef_)
        if sp.issparse(Z) and np.result_type(Z.dtype, W.dtype) == np.float64:
            from .cg import sparse_times_coef      # scipy's sums on n_jobs threads
            out = sparse_times_coef(Z, W, self.n_jobs)
        else:
            out = np.asarray(Z @ W.T)
        return out + np.atleast_1d(np.asarray(self.intercept_, dtype=W.dtype))[None, :]


_PARAMS_DOC = """
    loss : str
        See above.
    alpha : float >= 0 or "auto", default 1e-4
        Penalty strength (in the units of the mean loss). "auto": chosen on a fixed held-out
        fifth of the rows (of each class for the classifier) along a warm-started path of
        AUTO_N_ALPHAS penalties from alpha_max down to AUTO_RATIO alpha_max, by the held-out
        mean loss; then the fit on every row from the path's solution there (module
        constants ``AUTO_*``, docs/internals.md "alpha='auto' for coordinate descent").
    l1_ratio : float in [0, 1], default 1.0
        1 is the lasso (l1), 0 ridge (l2), in between the elastic net.
    fit_intercept : bool, default True
        Fit an unpenalized intercept (one exact or Newton step after every epoch).
    max_epochs : int >= 1, default 1000
        Epochs of D coordinate steps (R grid blocks in grid mode); a fit stops as soon as
        it converges (scikit-learn's Lasso: max_iter=1000).
    tol : float >= 0, default 1e-4
        Stop when the relative duality gap (squared loss, alpha and l1_ratio > 0) or the relative
        largest minimum-norm subgradient is <= tol (relative to the value at w = 0); the
        classification losses also stop (tol > 0) when ``decision_epochs`` epochs in a
        row changed no training decision (CDClassifier; module docstring).
    selection : {"random", "permutation", "cyclic"}, default "random"
        Coordinate order: draws with replacement, a reshuffled permutation per epoch, or
        0..D-1 (grids instead of coordinates in grid mode).
    parallel : {None, "auto", "hogwild", "grid"}, default "auto"
        See the module docstring.
    n_jobs : int or None
        Threads. None: the OpenMP default (honouring threadpoolctl / OMP_NUM_THREADS) less
        the cores busy with other work when each fit starts (docs/internals.md, "Threads
        on a busy machine"); -1: all cores.
    warm_start : bool, default False
        Start from the previous coef_ / intercept_.
    random_state : int, Generator, RandomState or None
        Seeds the coordinate stream (SplitMix64, docs/internals.md).
    verbose : int, default 0
        Printed to stdout (scikit-learn's levels): 1, one summary line per fit (epochs,
        the final relative gap or subgradient, converged or not, mode, threads, time);
        2 and above, also the problem sizes and a line per epoch (objective and the
        convergence value; the full convergence check then runs every epoch).
"""


class CDRegressor(RegressorMixin, _CDBase):
    __doc__ = """Least squares with an l1 / l2 / elastic-net penalty by randomized coordinate descent.

    Minimizes (1/S) sum_i s_i 0.5 (z_i.w + b - y_i)^2 + alpha (l1_ratio ||w||_1
    + (1 - l1_ratio)/2 ||w||^2) (paper eq. 23). With l1_ratio = 1, fit_intercept=False and unit
    weights this is scikit-learn's Lasso(alpha). A 2-D y is one problem per target (seed + k).

    Parameters
    ----------""" + _PARAMS_DOC + """
    Attributes
    ----------
    coef_ : ndarray (D,) or (n_targets, D), in the input's float dtype
    intercept_ : float or ndarray (n_targets,)
    n_iter_ : int (or array per target): epochs run
    objective_history_ : list of the objective after each epoch (per target for 2-D y)
    dual_gap_ : float (or array): final relative gap / subgradient
    stop_ : str (or array): what ended the fit: "tol" (the gap or subgradient test),
        "decisions" (the classification decisions rule, ``decision_epochs``; ``dual_gap_``
        may then exceed tol) or "max_epochs" (not converged: a ConvergenceWarning)
    n_threads_ : int, threads used;  parallel_ : the mode used (None, "hogwild", "grid")
    alpha_ : float, the penalty used (alpha, or the choice of alpha="auto")
    alphas_, holdout_loss_ : the penalties alpha="auto" ran and their held-out mean losses
        (None for a numeric alpha)
    """

    _loss_choices = REGRESSION_LOSSES
    _parameter_constraints = {**_CD_CONSTRAINTS, "loss": [StrOptions(set(REGRESSION_LOSSES))]}

    def __init__(self, loss="squared", alpha=1e-4, l1_ratio=1.0, fit_intercept=True,
                 max_epochs=1000, tol=1e-4, selection="random", parallel="auto", n_jobs=None,
                 warm_start=False, random_state=None, verbose=0):
        self.loss = loss
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.max_epochs = max_epochs
        self.tol = tol
        self.selection = selection
        self.parallel = parallel
        self.n_jobs = n_jobs
        self.warm_start = warm_start
        self.random_state = random_state
        self.verbose = verbose

    @fit_context
    def fit(self, Z, y, sample_weight=None, columns=None):
        """Fit by coordinate descent.

        Parameters
        ----------
        Z : (N, D) sparse matrix or array, the features (e.g. random binning features).
        y : (N,) or (N, n_targets) targets.
        sample_weight : (N,) non-negative weights, optional.
        columns : RBColumns or fitted RandomBinning, optional
            The grid structure of Z: the RBColumns returned with Z by
            ``RandomBinning.fit_transform(X, return_columns=True)``, or the fitted
            exact-mode RandomBinning that produced Z (the structure is then rebuilt from
            Z). It enables the grid-block mode (``parallel="grid"``, and "auto" on large
            problems) and saves the transposed copy of Z. Checked against Z: a structure
            that is not Z's is a ValueError. Optional; the optimum does not depend on it.
        """
        params = _params_of(self)
        _check_y_given(self, y)
        Z = self._validate_Z(Z, reset=True)
        y = _check_regression_target(y, Z.shape[0])
        s = _check_sample_weight(sample_weight, Z.shape[0])
        if s is not None and np.all(s == 1.0):
            s = None
        single = y.ndim == 1
        targets = y[:, None] if single else y
        W, B = self._solve_all(Z, targets, s, params, columns)
        if single:
            self.coef_ = W[0]
            self.intercept_ = float(B[0])
        else:
            self.coef_ = W
            self.intercept_ = B
        return self

    def predict(self, Z):
        """Z @ coef_.T + intercept_."""
        out = self._decision(Z)
        return out[:, 0] if np.ndim(self.coef_) == 1 else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.multi_output = True
        return tags


class CDClassifier(ClassifierMixin, _CDBase):
    __doc__ = """Linear classification (logistic or squared hinge loss) by randomized coordinate descent.

    Binary: one problem, classes_[1] is +1. More classes: one-vs-rest, problem k (classes_[k]
    against the rest) seeded with seed + k. ``class_weight`` ("balanced" or a dict)
    multiplies the sample weights. ``predict_proba`` exists for the logistic loss only.

    Parameters
    ----------""" + _PARAMS_DOC + """
    class_weight : None, "balanced" or dict
        Multiplies each row's sample weight by its class's weight ("balanced": n_samples /
        (n_classes x the class's count)). A dict may name labels that y lacks when it
        names every label y has; labels it leaves out weigh 1 (scikit-learn's rule).
    decision_epochs : int >= 1 or None, default 10
        With tol > 0 a problem also stops (converged) once this many epochs in a row
        changed no training decision (the sign of its z . w + b; module docstring). None:
        the subgradient test alone (for a fit close to the optimum, e.g. a path).

    Attributes
    ----------
    classes_, coef_ (1, D) binary or (n_classes, D), intercept_ (1,) or (n_classes,),
    n_iter_, objective_history_, dual_gap_, n_threads_, parallel_ (as CDRegressor).
    """

    _loss_choices = CLASSIFICATION_LOSSES
    _parameter_constraints = {
        **_CD_CONSTRAINTS,
        "loss": [StrOptions(set(CLASSIFICATION_LOSSES))],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "decision_epochs": [IntInterval(1, None, closed="left"), None],
    }

    def __init__(self, loss="logistic", alpha=1e-4, l1_ratio=1.0, fit_intercept=True,
                 max_epochs=1000, tol=1e-4, selection="random", parallel="auto", n_jobs=None,
                 warm_start=False, random_state=None, verbose=0, class_weight=None,
                 decision_epochs=DECISION_EPOCHS):
        self.loss = loss
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.max_epochs = max_epochs
        self.tol = tol
        self.selection = selection
        self.parallel = parallel
        self.n_jobs = n_jobs
        self.warm_start = warm_start
        self.random_state = random_state
        self.verbose = verbose
        self.class_weight = class_weight
        self.decision_epochs = decision_epochs

    @fit_context
    def fit(self, Z, y, sample_weight=None, columns=None):
        """Fit one problem (two classes) or one per class (one-vs-rest).

        ``columns``: the grid structure of Z, optional, as in ``CDRegressor.fit``.
        """
        params = _params_of(self)
        _check_y_given(self, y)
        Z = self._validate_Z(Z, reset=True)
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            warn_user("A column-vector y was passed when a 1d array was expected; "
                          "it is ravelled.", _data_conversion_warning())
            y = y.ravel()
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D for CDClassifier, got shape {y.shape}")
        if y.shape[0] != Z.shape[0]:
            raise ValueError(f"y has {y.shape[0]} rows but the feature matrix has {Z.shape[0]} rows")
        if y.dtype.kind in "fc" and not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or inf")
        check_classification_targets(y)
        classes, y_idx = np.unique(y, return_inverse=True)
        if classes.shape[0] < 2:
            raise ValueError(
                f"CDClassifier needs samples of at least 2 classes in y, got only one class: {classes[0].tolist()!r}"
            )
        s = _check_sample_weight(sample_weight, Z.shape[0])
        if self.class_weight is not None:
            # scikit-learn's rule (compute_sample_weight): a dict may name labels absent
            # from y when it names every label present, as RidgeCGClassifier's does
            cw = check_class_weight(self.class_weight)
            s = (np.ones(Z.shape[0]) if s is None else s) * compute_sample_weight(cw, y)
        if s is not None and np.all(s == 1.0):
            s = None
        self.classes_ = classes
        if classes.shape[0] == 2:
            targets = np.where(y_idx == 1, 1.0, -1.0)[:, None]
        else:
            targets = np.column_stack(
                [np.where(y_idx == k, 1.0, -1.0) for k in range(classes.shape[0])]
            )
        W, B = self._solve_all(Z, targets, s, params, columns, strata=y_idx)
        self.coef_ = W
        self.intercept_ = B
        return self

    def decision_function(self, Z):
        """Z @ coef_.T + intercept_: (N,) for two classes, (N, n_classes) otherwise."""
        out = self._decision(Z)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict(self, Z):
        """The class with the largest decision value (sign for two classes)."""
        scores = self.decision_function(Z)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]

    def _has_proba(self):
        return self.loss == "logistic"

    @available_if(_has_proba)
    def predict_proba(self, Z):
        """Logistic probabilities; one-vs-rest sigmoids normalized to sum 1 for > 2 classes."""
        scores = np.asarray(self.decision_function(Z), dtype=np.float64)
        with np.errstate(over="ignore"):
            P = 1.0 / (1.0 + np.exp(-scores))
        if scores.ndim == 1:
            return np.column_stack([1.0 - P, P])
        return P / P.sum(axis=1, keepdims=True)

    @available_if(_has_proba)
    def predict_log_proba(self, Z):
        """log of predict_proba."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(Z))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def _data_conversion_warning():
    from sklearn.exceptions import DataConversionWarning

    return DataConversionWarning


# ---------------------------------------------------------------------------- functions
def _check_matrix(Z):
    """Z for the module functions: 2-D, finite, at least one row and column."""
    if sp.issparse(Z):
        if Z.ndim != 2:
            raise ValueError(f"Z must be 2-D, got {Z.ndim}-D")
        check_sparse_structure(Z, "Z")
        # the values after duplicates are summed (no transpose: a canonical CSR or CSC
        # matrix holds them as they are)
        C = Z if Z.format in ("csr", "csc") else Z.tocsr()
        if not C.has_canonical_format:
            C = C.copy()
            C.sum_duplicates()
        if not np.all(np.isfinite(C.data)):
            raise ValueError("Z contains NaN or inf")
    else:
        Z = np.asarray(Z)
        if Z.dtype.kind not in "biuf":
            raise ValueError(f"Z must be numeric, got dtype {Z.dtype}")
        if Z.ndim != 2:
            raise ValueError(f"Z must be 2-D, got shape {Z.shape}")
        if not np.all(np.isfinite(Z)):
            raise ValueError("Z contains NaN or inf")
    if Z.shape[0] == 0 or Z.shape[1] == 0:
        raise ValueError(f"Z must have at least one row and one column, got shape {Z.shape}")
    return Z


def alpha_max(Z, y, l1_ratio=1.0, fit_intercept=True, sample_weight=None, loss="squared"):
    """The smallest alpha for which w = 0 is optimal.

    ``max_j |(1/S) sum_i s_i loss'(b0, y_i) z_ij| / l1_ratio``, b0 the optimal intercept of
    the w = 0 model (0 without intercept). For 2-D y (squared loss) the maximum over targets;
    for the classification losses over CDClassifier's problems (two classes: one, the
    larger label +1; more: one per class against the rest).

    Parameters
    ----------
    Z : (N, D) sparse matrix or array
        The features (e.g. random binning features); finite values.
    y : (N,) or (N, n_targets) targets for the squared loss; (N,) class labels (at least
        two classes) for a classification loss
    l1_ratio : float in (0, 1], default 1.0
        The elastic-net mixing of CDRegressor / CDClassifier; 0 (pure l2, for which every
        alpha leaves w non-zero) is a ValueError.
    fit_intercept : bool, default True
        True: b0 is the intercept that minimizes the weighted loss of the constant model
        (the weighted mean of y for the squared loss); False: b0 = 0.
    sample_weight : (N,) non-negative weights with a positive sum, or None (all ones)
        The s_i of the formula; S is their sum.
    loss : "squared", "logistic" or "squared_hinge", default "squared"
        The loss of the model whose penalty is bounded: "squared" for CDRegressor, the
        other two for CDClassifier.

    Returns
    -------
    alpha_max : float >= 0, in the mean-loss units of CDRegressor's and CDClassifier's
        ``alpha`` (0.0 where the gradient at w = 0 vanishes: then w = 0 is optimal for
        every alpha)
    """
    _check_choice(loss, "loss", tuple(LOSSES))
    l1_ratio = _check_real(l1_ratio, "l1_ratio", low=0.0, high=1.0)
    if l1_ratio == 0.0:
        raise ValueError("alpha_max is infinite for l1_ratio=0 (pure l2): give l1_ratio > 0")
    Z = _check_matrix(Z)
    N = Z.shape[0]
    s = _check_sample_weight(sample_weight, N)
    s = np.ones(N) if s is None else s
    S = float(np.sum(s))
    if loss == "squared":
        yv = _check_regression_target(y, N)
        targets = yv[:, None] if yv.ndim == 1 else yv
    else:
        targets = _class_targets(y, N)
    n_threads = effective_n_threads(None)
    cols = plain_columns(Z, n_threads)
    best = 0.0
    for k in range(targets.shape[1]):
        yk = np.ascontiguousarray(targets[:, k])
        b0 = _optimal_intercept(loss, yk, s, S) if fit_intercept else 0.0
        best = max(best, _gradient_at_constant(cols, loss, yk, s, S, b0, n_threads))
    return best / l1_ratio


def cd_path(Z, y, alphas=None, n_alphas=100, eps=1e-3, sample_weight=None, columns=None,
            **params):
    """Coordinate descent along a decreasing sequence of alphas, warm-starting each fit.

    ``params`` are CDRegressor's parameters (CDClassifier's when ``loss`` is a classification
    loss, with ``decision_epochs=None`` unless given: each fit of a path runs to the
    subgradient test, not to stable decisions). Default alphas: ``geomspace(alpha_max,
    alpha_max * eps, n_alphas)``.

    Parameters
    ----------
    Z : (N, D) sparse matrix or array, the features
    y : (N,) or (N, n_targets) targets for the squared loss; (N,) class labels for a
        classification loss
    alphas : array-like of float >= 0, or None
        The penalties of the path, fitted in decreasing order (sorted here). None:
        ``n_alphas`` values from :func:`alpha_max` (of Z, y, ``sample_weight`` and the
        ``l1_ratio``, ``fit_intercept`` and ``loss`` of ``params``) down to ``eps`` times
        it, evenly spaced on a log scale (all zeros when alpha_max is 0).
    n_alphas : int >= 1, default 100
        The number of default alphas (ignored when ``alphas`` is given).
    eps : float > 0, default 1e-3
        The smallest default alpha over the largest (ignored when ``alphas`` is given).
    sample_weight : (N,) non-negative weights, or None (all ones)
        Used by every fit of the path, and by alpha_max for the default alphas.
    columns : RBColumns or fitted RandomBinning, or None
        The grid structure of Z, as in ``CDRegressor.fit``, given to every fit of the
        path (the grid-block mode; the optima do not depend on it).
    **params
        The estimator's other parameters; ``alpha`` and ``warm_start`` are ignored (the
        path sets them).

    Returns
    -------
    alphas : ndarray (n_alphas,), decreasing
    coefs : ndarray (D, n_alphas), or (n_problems, D, n_alphas) for several problems
        (the targets of a 2-D y, or the classes of more than two)
    gaps : ndarray (n_alphas,) (or (n_alphas, n_problems)): final relative gap per fit
    """
    params = dict(params)
    params.pop("warm_start", None)
    params.pop("alpha", None)
    loss = params.get("loss", "squared")
    if loss != "squared":
        # a path is a sequence of optima: the subgradient test alone, unless given (the
        # decisions rule would stop each fit at stable training decisions instead)
        params.setdefault("decision_epochs", None)
    _check_choice(loss, "loss", tuple(LOSSES))
    if alphas is None:
        n_alphas = _check_int(n_alphas, "n_alphas", low=1)
        eps = _check_real(eps, "eps", low=0.0)
        if eps <= 0:
            raise ValueError(f"eps must be > 0, got {eps}")
        a_max = alpha_max(Z, y, l1_ratio=params.get("l1_ratio", 1.0),
                          fit_intercept=params.get("fit_intercept", True),
                          sample_weight=sample_weight, loss=loss)
        if a_max == 0.0:
            alphas = np.zeros(n_alphas)
        else:
            alphas = np.geomspace(a_max, a_max * eps, num=n_alphas)
    else:
        alphas = np.asarray(alphas, dtype=np.float64)
        if alphas.ndim != 1 or alphas.shape[0] == 0:
            raise ValueError(f"alphas must be a non-empty 1-D array, got shape {alphas.shape}")
        if not np.all(np.isfinite(alphas)) or np.any(alphas < 0):
            raise ValueError("alphas must be finite and >= 0")
        alphas = np.sort(alphas)[::-1]
    est = (CDRegressor if loss == "squared" else CDClassifier)(warm_start=True, **params)
    coefs, gaps = [], []
    for a in alphas:
        est.set_params(alpha=float(a))
        est.fit(Z, y, sample_weight=sample_weight, columns=columns)
        coef = np.asarray(est.coef_)
        if loss != "squared" and coef.shape[0] == 1:
            coef = coef[0]
        coefs.append(coef.copy())
        gaps.append(np.copy(est.dual_gap_))
    return alphas, np.stack(coefs, axis=-1), np.array(gaps)
