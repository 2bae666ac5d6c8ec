"""Randomized coordinate descent, plain Python (the oracle of ``rbcd.solvers.cd``).

Objective (paper eq. 23 plus sample weights, docs/design.md contract 8, docs/internals.md):

    P(w, b) = (1/S) sum_i s_i loss(p_i, y_i)
              + alpha * (l1_ratio ||w||_1 + (1 - l1_ratio)/2 ||w||^2),      p = Z w + b

Coordinate step (paper eq. 24-27, contract 9): a prox-Newton step on one coordinate with the
loss's curvature bound beta, soft-thresholded for the l1 part.

The fast Cython solver reproduces these iterates exactly, so the order of every floating
point operation below is part of the contract. Written out:

* ``h_j``: ``acc = 0.0; for the rows i of column j in increasing order: acc += s_i * z_ij * z_ij``
  (evaluated left to right), ``h_j = acc / S``.
* coordinate j: ``acc = 0.0; for rows i of column j increasing: acc += s_i * loss'(p_i, y_i) * z_ij``;
  ``g = acc / S + lam2 * w_j``; ``M = beta * h_j + lam2``;
  ``M == 0``: ``w_new = 0``; else ``v = w_j - g / M``, ``t = lam1 / M``,
  ``w_new = v - t if v > t else (v + t if v < -t else 0)``;
  ``delta = w_new - w_j``; if ``delta != 0``: ``p_i += delta * z_ij`` on the rows of column j.
* intercept: ``acc = 0.0; for i in 0..N-1: acc += s_i * loss'(p_i, y_i)``; ``g_b = acc / S``;
  ``b_new = b - g_b / beta``; ``delta = b_new - b``; ``p_i += delta`` for every i.
* warm start: ``p_i = 0.0``, then for j = 0..D-1, rows i of column j: ``p_i += z_ij * w_j``,
  then ``p_i += b``.

Loss derivatives: squared ``p - y``; logistic ``-y / (1 + exp(y * p))`` (exp overflowing to
inf gives -0.0, as in C); squared hinge ``-2 * y * max(0, 1 - y * p)``.
"""
import math
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from .._checks import (apply_class_weight, check_choice, check_class_labels,
                      check_feature_matrix, check_int, check_real, check_sample_weight,
                      check_sparse_indices, check_target, check_y_given)
from .._random import problem_stream, solver_seed
from ..binning import check_grid_structure

REGRESSION_LOSSES = ("squared",)
CLASSIFICATION_LOSSES = ("logistic", "squared_hinge")
ALL_LOSSES = REGRESSION_LOSSES + CLASSIFICATION_LOSSES
SELECTIONS = ("random", "permutation", "cyclic")
PARALLEL_MODES = (None, "auto", "hogwild", "grid")

# curvature bounds: loss''(p, y) <= beta for every p (contract 9)
BETA = {"squared": 1.0, "logistic": 0.25, "squared_hinge": 2.0}


# ---------------------------------------------------------------------------- losses
def _exp(z):
    """exp(z) with overflow to inf, like C's exp (Python's math.exp raises instead)."""
    try:
        return math.exp(z)
    except OverflowError:
        return math.inf


def loss_value(loss, p, y):
    """loss(p, y) for one sample (logistic computed stably)."""
    if loss == "squared":
        r = p - y
        return 0.5 * r * r
    if loss == "logistic":
        z = y * p
        if z > 0:
            return math.log1p(_exp(-z))
        return -z + math.log1p(_exp(z))
    m = 1.0 - y * p  # squared hinge
    return m * m if m > 0 else 0.0


def loss_derivative(loss, p, y):
    """d loss(p, y) / dp for one sample (table in docs/internals.md)."""
    if loss == "squared":
        return p - y
    if loss == "logistic":
        return -y / (1.0 + _exp(y * p))
    m = 1.0 - y * p  # squared hinge
    return -2.0 * y * (m if m > 0 else 0.0)


def _soft_threshold(v, t):
    """sign(v) max(|v| - t, 0)."""
    if v > t:
        return v - t
    if v < -t:
        return v + t
    return 0.0


# ---------------------------------------------------------------------------- helpers
class _Columns:
    """The CSC structure of Z as plain Python lists (what the solver loops walk)."""

    def __init__(self, Zc):
        self.n_rows, self.n_cols = Zc.shape
        self.ptr = [int(v) for v in Zc.indptr]
        self.rows = [int(v) for v in Zc.indices]
        self.vals = [float(v) for v in Zc.data]


def _weighted_sum(values, s):
    """sum_i s_i * values_i in increasing i (sequential, no pairwise summation)."""
    acc = 0.0
    for i in range(len(s)):
        acc += s[i] * values[i]
    return acc


def _total(s):
    """S = sum_i s_i in increasing i (sequential, as every S in this module)."""
    acc = 0.0
    for v in s:
        acc += float(v)
    return acc


def optimal_intercept(loss, y, s):
    """b0: the minimizer over b of (1/S) sum_i s_i loss(b, y_i), i.e. the intercept of w = 0.

    squared: the weighted mean of y; logistic: the weighted log-odds log(S+ / S-);
    squared hinge: (S+ - S-) / (S+ + S-) (the stationary point lies in [-1, 1]).
    """
    S = _total(s)
    if loss == "squared":
        return _weighted_sum([float(v) for v in y], [float(v) for v in s]) / S
    s_pos = _total(s[y > 0])
    s_neg = _total(s[y < 0])
    if s_pos == 0.0 or s_neg == 0.0:
        raise ValueError(
            "the sample weights of one class sum to zero: the intercept-only model is "
            "degenerate (give both classes positive weight)"
        )
    if loss == "logistic":
        return math.log(s_pos / s_neg)
    return (s_pos - s_neg) / (s_pos + s_neg)


def _loss_gradient_at_constant(cols, loss, y, s, b0):
    """max_j |(1/S) sum_i s_i loss'(b0, y_i) z_ij| over the columns (rows increasing)."""
    S = _total(s)
    d = [loss_derivative(loss, b0, float(y[i])) for i in range(len(y))]
    best = 0.0
    for j in range(cols.n_cols):
        acc = 0.0
        for k in range(cols.ptr[j], cols.ptr[j + 1]):
            i = cols.rows[k]
            acc += s[i] * d[i] * cols.vals[k]
        best = max(best, abs(acc / S))
    return best


def _check_common_params(est_or_params, loss_choices):
    """Validate the solver parameters; returns a dict of clean values."""
    g = est_or_params
    loss = check_choice(g["loss"], "loss", loss_choices)
    if isinstance(g["alpha"], str) and g["alpha"] == "auto":
        alpha = "auto"
    else:
        alpha = check_real(g["alpha"], "alpha", low=0.0)
    l1_ratio = check_real(g["l1_ratio"], "l1_ratio", low=0.0, high=1.0)
    max_epochs = check_int(g["max_epochs"], "max_epochs", low=1)
    tol = check_real(g["tol"], "tol", low=0.0)
    selection = check_choice(g["selection"], "selection", SELECTIONS)
    parallel = check_choice(g["parallel"], "parallel", PARALLEL_MODES)
    if g["n_jobs"] is not None:
        n_jobs = check_int(g["n_jobs"], "n_jobs")
        if n_jobs == 0:
            raise ValueError("n_jobs must be a non-zero integer or None, got 0")
    if isinstance(g["verbose"], (bool, np.bool_)):
        verbose = int(g["verbose"])
    else:
        verbose = check_int(g["verbose"], "verbose", low=0)
    if not isinstance(g["fit_intercept"], (bool, np.bool_)):
        raise ValueError(f"fit_intercept must be a bool, got {g['fit_intercept']!r}")
    return dict(loss=loss, alpha=alpha, l1_ratio=l1_ratio, max_epochs=max_epochs, tol=tol,
                selection=selection, parallel=parallel, verbose=verbose,
                fit_intercept=bool(g["fit_intercept"]))


def _grid_ptr_from(columns, parallel, n_columns, Zc):
    """grid_ptr for parallel='grid' from the grid structure of Z (its RBColumns, or a fitted
    exact-mode RandomBinning), checked against Z."""
    if parallel != "grid":
        return None
    if columns is None:
        raise ValueError(
            "parallel='grid' needs the grid structure of an exact mode random binning "
            "(n_features=None): pass columns= (the RBColumns of Z, or the fitted RandomBinning) "
            "to fit"
        )
    grid_ptr = getattr(columns, "grid_ptr_", getattr(columns, "grid_ptr", None))
    if grid_ptr is None:
        raise ValueError(
            "parallel='grid' needs columns= the RBColumns of Z or a fitted RandomBinning in "
            "exact mode (n_features=None); the given object has no grid structure (hashed "
            "mode or not fitted)"
        )
    grid_ptr = np.asarray(grid_ptr)
    if grid_ptr[-1] != n_columns:
        raise ValueError(
            f"parallel='grid': the binning has {int(grid_ptr[-1])} columns but Z has {n_columns}"
        )
    return check_grid_structure(Zc.tocsr(), grid_ptr)


# ---------------------------------------------------------------------------- solver
#: CDClassifier's default decision_epochs: epochs in a row without a changed training
#: decision that end a classification fit (tol > 0)
DECISION_EPOCHS = 10


def cd_solve(cols, y, s, *, loss, alpha, l1_ratio, fit_intercept, max_epochs, tol,
             selection, seed, problem=0, grid_ptr=None, w_init=None, b_init=None,
             verbose=0, label="", decision_epochs=None):
    """Randomized coordinate descent on one problem (one target / one-vs-rest class).

    Parameters
    ----------
    cols : _Columns
        CSC structure of Z (rows of each column sorted).
    y : ndarray (N,)
        Targets (in {-1, +1} for the classification losses).
    s : ndarray (N,)
        Sample weights s_i >= 0 with a positive sum S.
    seed : int
        solver_seed(random_state); problem k draws from SplitMix64(seed + k).
    problem : int
        k, the index of the problem (target or one-vs-rest class).
    grid_ptr : int64 ndarray (R + 1,) or None
        Grid-block mode when given: selection runs over the R grids and each visited grid
        updates all its bins from the same predictions p.
    w_init, b_init : warm start (no initial intercept step), or None for w = 0, b = 0.

    Returns
    -------
    dict with w (D,), b, n_iter, history (objective after each epoch), gap (final relative
    duality gap or subgradient), converged.
    """
    N, D = cols.n_rows, cols.n_cols
    beta = BETA[loss]
    lam1 = alpha * l1_ratio
    lam2 = alpha * (1.0 - l1_ratio)
    yl = [float(v) for v in y]
    sl = [float(v) for v in s]
    S = _total(sl)
    ptr, rows, vals = cols.ptr, cols.rows, cols.vals

    # column constants h_j = (1/S) sum_i s_i z_ij^2
    h = [0.0] * D
    for j in range(D):
        acc = 0.0
        for k in range(ptr[j], ptr[j + 1]):
            acc += sl[rows[k]] * vals[k] * vals[k]
        h[j] = acc / S

    # start point and predictions p = Z w + b
    warm = w_init is not None
    w = [0.0] * D if not warm else [float(v) for v in w_init]
    b = 0.0 if not (warm and fit_intercept) else float(b_init)
    p = [0.0] * N
    if warm:
        for j in range(D):
            if w[j] != 0.0:
                for k in range(ptr[j], ptr[j + 1]):
                    p[rows[k]] += vals[k] * w[j]
        for i in range(N):
            p[i] += b

    def intercept_gradient():
        acc = 0.0
        for i in range(N):
            acc += sl[i] * loss_derivative(loss, p[i], yl[i])
        return acc / S

    def intercept_step():
        nonlocal b
        g_b = intercept_gradient()
        b_new = b - g_b / beta
        delta = b_new - b
        b = b_new
        if delta != 0.0:
            for i in range(N):
                p[i] += delta

    def coordinate_gradient(j):
        # the summation order of rbcd's kernel (rbcd/src/cd_kernels.h): one running sum for
        # a column of fewer than 8 entries; otherwise four running sums over the entries
        # ptr[j] + 4m + q of the first 4 floor(n / 4), the rest added to the first, then
        # (a0 + a1) + (a2 + a3)
        n = ptr[j + 1] - ptr[j]
        full = n - n % 4 if n >= 8 else 0
        acc = [0.0, 0.0, 0.0, 0.0]
        for k in range(ptr[j], ptr[j + 1]):
            i = rows[k]
            t = k - ptr[j]
            acc[t % 4 if t < full else 0] += sl[i] * loss_derivative(loss, p[i], yl[i]) * vals[k]
        return ((acc[0] + acc[1]) + (acc[2] + acc[3])) / S + lam2 * w[j]

    def new_coordinate(j):
        """w_j after the step of paper eq. 24-27, from the current p (p not updated)."""
        M = beta * h[j] + lam2
        if M == 0.0:
            return 0.0
        g = coordinate_gradient(j)
        return _soft_threshold(w[j] - g / M, lam1 / M)

    def apply(j, w_new):
        delta = w_new - w[j]
        w[j] = w_new
        if delta != 0.0:
            for k in range(ptr[j], ptr[j + 1]):
                p[rows[k]] += delta * vals[k]

    def objective():
        acc = 0.0
        for i in range(N):
            acc += sl[i] * loss_value(loss, p[i], yl[i])
        l1 = sum(abs(v) for v in w)
        l2 = sum(v * v for v in w)
        return acc / S + alpha * (l1_ratio * l1 + 0.5 * (1.0 - l1_ratio) * l2)

    use_gap = loss == "squared" and l1_ratio > 0 and alpha > 0   # an l1 penalty: the gap

    # normalizer: P0 (the gap above) or G0 (otherwise), at w = 0 with the optimal b
    b0 = optimal_intercept(loss, np.asarray(y), np.asarray(s)) if fit_intercept else 0.0
    if use_gap:
        acc = 0.0
        for i in range(N):
            r0 = yl[i] - b0
            acc += sl[i] * 0.5 * r0 * r0
        scale = acc / S
    else:
        scale = _loss_gradient_at_constant(cols, loss, y, sl, b0)

    def duality_gap():
        r = [yl[i] - p[i] for i in range(N)]
        dn = 0.0
        for j in range(D):
            acc = 0.0
            for k in range(ptr[j], ptr[j + 1]):
                i = rows[k]
                acc += sl[i] * r[i] * vals[k]
            dn = max(dn, abs(acc / S - lam2 * w[j]))
        const = lam1 / dn if dn > lam1 else 1.0
        rn2 = 0.0
        ry = 0.0
        for i in range(N):
            rn2 += sl[i] * r[i] * r[i]
            ry += sl[i] * r[i] * yl[i]
        rn2 /= S
        ry /= S
        l1 = sum(abs(v) for v in w)
        l2 = sum(v * v for v in w)
        return (0.5 * rn2 * (1.0 + const * const) + lam1 * l1 - const * ry
                + 0.5 * lam2 * (1.0 + const * const) * l2)

    def max_subgradient():
        worst = 0.0
        for j in range(D):
            g = coordinate_gradient(j)
            if w[j] != 0.0:
                v = abs(g + lam1 * math.copysign(1.0, w[j]))
            else:
                v = max(abs(g) - lam1, 0.0)
            worst = max(worst, v)
        if fit_intercept:
            worst = max(worst, abs(intercept_gradient()))
        return worst

    if fit_intercept and not warm:
        # a cold start begins at the optimal intercept of the w = 0 model, so that at
        # alpha >= alpha_max (computed from the same b0) w = 0 is already the solution
        b = optimal_intercept(loss, np.asarray(yl), np.asarray(sl))
        for i in range(N):
            p[i] += b

    history = []
    if scale == 0.0:  # the problem is solved at w = 0
        return dict(w=np.array(w), b=b, n_iter=0, history=history, gap=0.0, converged=True,
                    stop="tol")

    rng = problem_stream(seed, problem)
    n_units = D if grid_ptr is None else len(grid_ptr) - 1
    perm = list(range(n_units))
    value = math.inf
    converged = False
    n_iter = 0
    # classification (tol > 0): stop when DECISION_EPOCHS epochs in a row changed no training
    # decision (the sign of p_i), docs/internals.md "Convergence"
    decide = decision_epochs is not None and loss != "squared" and tol > 0
    decisions = [pi > 0 for pi in p]
    steady = 0
    for epoch in range(max_epochs):
        # the visiting order of this epoch (columns, or grids in grid-block mode)
        if selection == "random":
            order = [rng.randbelow(n_units) for _ in range(n_units)]
        elif selection == "permutation":
            for i in range(n_units - 1, 0, -1):  # Fisher-Yates, in place, once per epoch
                jj = rng.randbelow(i + 1)
                perm[i], perm[jj] = perm[jj], perm[i]
            order = perm
        else:
            order = range(n_units)

        if grid_ptr is None:
            for j in order:
                apply(j, new_coordinate(j))
        else:
            for r in order:
                lo, hi = int(grid_ptr[r]), int(grid_ptr[r + 1])
                # every bin's step from the same p (bins of a grid touch disjoint rows) ...
                steps = [new_coordinate(j) for j in range(lo, hi)]
                # ... then applied
                for j, w_new in zip(range(lo, hi), steps):
                    apply(j, w_new)

        if fit_intercept:
            intercept_step()
        n_iter = epoch + 1
        history.append(objective())
        if decide:
            now = [pi > 0 for pi in p]
            steady = steady + 1 if now == decisions else 0
            decisions = now

        if use_gap:
            raw = duality_gap()
        else:
            raw = max_subgradient()
        value = raw / scale
        if verbose:
            kind = "gap" if use_gap else "subgradient"
            print(f"[rbcd_ref CD{label}] epoch {n_iter}: objective {history[-1]:.10g}, "
                  f"relative {kind} {value:.3e} (tol {tol:.1e})")
        if raw <= tol * scale or (decide and steady >= decision_epochs):
            converged = True
            break

    if not converged:
        kind = "duality gap" if use_gap else "largest minimum-norm subgradient"
        warnings.warn(
            f"Coordinate descent did not converge{label} after {max_epochs} epochs: relative "
            f"{kind} {value:.3e} > tol {tol:.3e}. Increase max_epochs, or alpha.",
            ConvergenceWarning,
        )
    stop = "max_epochs" if not converged else "tol" if raw <= tol * scale else "decisions"
    return dict(w=np.array(w), b=b, n_iter=n_iter, history=history, gap=value, converged=converged,
                stop=stop)


# ---------------------------------------------------------------------------- alpha="auto"
# rbcd.solvers.cd's rule (docs/internals.md, "alpha='auto'"), the same constants
AUTO_N_ALPHAS = 9
AUTO_RATIO = 1e-4
AUTO_HOLDOUT = 5
AUTO_SEED = 0
AUTO_PATIENCE = 3
AUTO_PATH_EPOCHS = 100
AUTO_PATH_DECISION_EPOCHS = 3
AUTO_L1_FLOOR = 1e-3
AUTO_FALLBACK = 1e-4


def holdout_mask(n_rows, strata=None):
    """The held-out rows (boolean mask): one in AUTO_HOLDOUT. The rows are ranked by one
    permutation, default_rng(AUTO_SEED).permutation(n_rows) (rank t: the t-th row of it);
    without strata the n_rows // AUTO_HOLDOUT lowest ranks are held out, with strata
    (classes) the len(class) // AUTO_HOLDOUT lowest ranks of each class."""
    perm = np.random.default_rng(AUTO_SEED).permutation(n_rows)
    rank = np.empty(n_rows, dtype=np.int64)
    rank[perm] = np.arange(n_rows)
    held = np.zeros(n_rows, dtype=bool)
    groups = [np.arange(n_rows)] if strata is None else \
        [np.flatnonzero(np.asarray(strata) == c) for c in np.unique(strata)]
    for rows in groups:
        lowest = rows[np.argsort(rank[rows])]
        held[lowest[: len(rows) // AUTO_HOLDOUT]] = True
    return held


def auto_alpha(cols, Zc, targets, s, strata, params, seed, grid_ptr, decision_epochs):
    """alpha="auto": ((alpha, W, B), (alphas run, held-out losses)). The path from alpha_max
    (of the fit rows) down to AUTO_RATIO alpha_max, each fit warm-started from the last with
    the held-out rows at weight 0, at most AUTO_PATH_EPOCHS epochs and the decisions rule
    at AUTO_PATH_DECISION_EPOCHS, scored by the mean
    loss on the held-out rows; stopped after AUTO_PATIENCE alphas without a better score.
    (AUTO_FALLBACK, None, None) when there is nothing to choose from."""
    loss = params["loss"]
    l1_ratio = params["l1_ratio"]
    N = cols.n_rows
    s = np.asarray(s, dtype=np.float64)
    held = holdout_mask(N, strata)
    s_fit = np.where(held, 0.0, s)
    s_held = s[held]
    K = targets.shape[1]
    none = (AUTO_FALLBACK, None, None), (np.zeros(0), np.zeros(0))
    if not (_total(s_fit) > 0 and _total(s_held) > 0):
        return none
    if loss != "squared":
        for k in range(K):
            if not (_total(s_fit[targets[:, k] > 0]) > 0 and _total(s_fit[targets[:, k] < 0]) > 0):
                return none
    a_max = 0.0
    for k in range(K):
        yk = targets[:, k]
        b0 = optimal_intercept(loss, yk, s_fit) if params["fit_intercept"] else 0.0
        a_max = max(a_max, _loss_gradient_at_constant(cols, loss, yk, list(s_fit), b0))
    a_max /= max(l1_ratio, AUTO_L1_FLOOR)
    if not a_max > 0:
        return none
    alphas = np.geomspace(a_max, a_max * AUTO_RATIO, AUTO_N_ALPHAS)
    rows = np.flatnonzero(held)
    Zh = Zc.tocsr()[rows]
    Th = targets[rows]
    # squared loss: the held-out losses in units of targets / cy, cy the power of two that
    # brings the largest |target| into [1, 2) when it lies outside [2**-100, 2**100] (else
    # 1), so that huge targets do not square to inf; the record in the targets' units
    cy = 1.0
    big = max((abs(float(v)) for v in targets.ravel()), default=0.0)
    if loss == "squared" and big > 0.0 and not (2.0 ** -100 <= big <= 2.0 ** 100):
        cy = math.ldexp(1.0, math.frexp(big)[1] - 1)
    W = np.zeros((K, cols.n_cols))
    B = np.zeros(K)
    best, best_score, worse, scores = None, math.inf, 0, []
    path_decisions = (None if decision_epochs is None
                      else min(decision_epochs, AUTO_PATH_DECISION_EPOCHS))
    for i, a in enumerate(alphas):
        for k in range(K):
            with warnings.catch_warnings():   # the path's fits rank alphas; no advice
                warnings.simplefilter("ignore", ConvergenceWarning)
                r = cd_solve(cols, targets[:, k], s_fit, loss=loss, alpha=float(a),
                             l1_ratio=l1_ratio, fit_intercept=params["fit_intercept"],
                             max_epochs=min(params["max_epochs"], AUTO_PATH_EPOCHS),
                             tol=params["tol"], selection=params["selection"], seed=seed,
                             problem=k, grid_ptr=grid_ptr, w_init=W[k] if i else None,
                             b_init=B[k] if i else None, decision_epochs=path_decisions)
            W[k], B[k] = r["w"], r["b"]
        P = np.asarray(Zh @ W.T) + B[None, :]
        per_row = [sum(loss_value(loss, float(P[i2, k]) / cy, float(Th[i2, k]) / cy)
                       for k in range(K))
                   for i2 in range(len(rows))]
        score = _weighted_sum(per_row, [float(v) for v in s_held]) / _total(s_held)
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


# ---------------------------------------------------------------------------- estimators
class _CDBase(BaseEstimator):
    """Shared fit machinery of CDRegressor and CDClassifier."""

    _loss_choices = ALL_LOSSES

    def _solver_params(self):
        return _check_common_params(
            dict(loss=self.loss, alpha=self.alpha, l1_ratio=self.l1_ratio,
                 max_epochs=self.max_epochs, tol=self.tol, selection=self.selection,
                 parallel=self.parallel, n_jobs=self.n_jobs, verbose=self.verbose,
                 fit_intercept=self.fit_intercept),
            self._loss_choices,
        )

    def _validate_Z(self, Z, reset):
        Z = validate_data(self, check_sparse_indices(Z, "Z"), reset=reset, accept_sparse=True, dtype=np.float64,
                          ensure_all_finite=True)
        return check_feature_matrix(Z)

    def _solve_all(self, Zc, targets, s_list, params, columns, strata=None):
        """Run cd_solve for every problem k (column k of ``targets``, weights s_list[k]);
        alpha="auto" chooses the penalty first (``auto_alpha``; ``strata``: the classes)."""
        cols = _Columns(Zc)
        grid_ptr = _grid_ptr_from(columns, params["parallel"], Zc.shape[1], Zc)
        n_problems = targets.shape[1]
        D = Zc.shape[1]
        seed = solver_seed(self.random_state)
        decision_epochs = getattr(self, "decision_epochs", None)
        auto_start = None
        self.alphas_, self.holdout_loss_ = None, None
        if params["alpha"] == "auto":
            (alpha, W_auto, B_auto), (self.alphas_, self.holdout_loss_) = auto_alpha(
                cols, Zc, targets, s_list[0], strata, params, seed, grid_ptr, decision_epochs)
            params = dict(params, alpha=alpha)
            if W_auto is not None:
                auto_start = (W_auto, B_auto)
        self.alpha_ = float(params["alpha"])
        warm = False
        if auto_start is not None:   # from the path's solution at alpha_
            W0, B0 = auto_start
            warm = True
        elif self.warm_start and hasattr(self, "coef_"):
            W0 = np.asarray(self.coef_, dtype=np.float64)
            B0 = np.asarray(self.intercept_, dtype=np.float64)
            if W0.size == n_problems * D and B0.size == n_problems:
                W0 = W0.reshape(n_problems, D)
                B0 = B0.reshape(n_problems)
                warm = True
        results = []
        for k in range(n_problems):
            res = cd_solve(
                cols, targets[:, k], s_list[k],
                loss=params["loss"], alpha=params["alpha"], l1_ratio=params["l1_ratio"],
                fit_intercept=params["fit_intercept"], max_epochs=params["max_epochs"],
                tol=params["tol"], selection=params["selection"], seed=seed, problem=k,
                grid_ptr=grid_ptr,
                w_init=W0[k] if warm else None, b_init=B0[k] if warm else None,
                verbose=params["verbose"], label=f" (problem {k})" if n_problems > 1 else "",
                decision_epochs=decision_epochs,
            )
            results.append(res)
        W = np.vstack([r["w"] for r in results])
        B = np.array([r["b"] for r in results], dtype=np.float64)
        return W, B, results

    def _store_diagnostics(self, results, single):
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

    def _decision(self, Z):
        check_is_fitted(self, "coef_")
        Zc = self._validate_Z(Z, reset=False)
        W = np.atleast_2d(self.coef_)
        return np.asarray(Zc @ W.T) + np.atleast_1d(self.intercept_)[None, :]


class CDRegressor(RegressorMixin, _CDBase):
    """Least-squares regression with l1 / l2 / elastic-net penalty by randomized CD.

    Minimizes P(w, b) = (1/S) sum_i s_i 0.5 (z_i.w + b - y_i)^2
    + alpha (l1_ratio ||w||_1 + (1 - l1_ratio)/2 ||w||^2) (paper eq. 23); with l1_ratio = 1,
    fit_intercept=False and unit weights this is scikit-learn's Lasso(alpha).

    ``parallel``: None, "auto" and "hogwild" all run the serial schedule here (the twin is
    single-threaded; Hogwild's expected result is the serial optimum); "grid" runs the
    grid-block schedule and needs ``fit(..., columns=<the RBColumns of Z>)``.
    ``n_jobs`` is accepted and ignored.

    Attributes: ``coef_`` (D,) or (n_targets, D), ``intercept_`` float or (n_targets,),
    ``n_iter_``, ``objective_history_``, ``dual_gap_`` (per target when y is 2-D).
    """

    _loss_choices = REGRESSION_LOSSES

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

    def fit(self, Z, y, sample_weight=None, columns=None):
        """Fit by coordinate descent; ``columns`` gives the grid structure for parallel='grid'."""
        params = self._solver_params()
        check_y_given(y, type(self).__name__)
        Zc = self._validate_Z(Z, reset=True)
        y = check_target(y, Zc.shape[0], "y", allow_2d=True)
        s = check_sample_weight(sample_weight, Zc.shape[0])
        single = y.ndim == 1
        targets = y[:, None] if single else y
        W, B, results = self._solve_all(Zc, targets, [s] * targets.shape[1], params, columns)
        if single:
            self.coef_ = W[0]
            self.intercept_ = float(B[0])
        else:
            self.coef_ = W
            self.intercept_ = B
        self._store_diagnostics(results, single)
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
    """Linear classification (logistic or squared hinge) by randomized CD, one-vs-rest.

    Problem k (classes_[k] against the rest, or the single binary problem k = 0 with
    classes_[1] as +1) uses SplitMix64(solver_seed(random_state) + k). ``class_weight``
    (dict or "balanced") multiplies the sample weights. ``predict_proba`` exists for the
    logistic loss only (one-vs-rest probabilities normalized for several classes).

    Attributes: ``classes_``, ``coef_`` (1, D) binary or (n_classes, D), ``intercept_``
    (1,) or (n_classes,), ``n_iter_``, ``objective_history_``, ``dual_gap_``.
    """

    _loss_choices = CLASSIFICATION_LOSSES

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

    def fit(self, Z, y, sample_weight=None, columns=None):
        """Fit one problem (binary) or one per class (one-vs-rest)."""
        params = self._solver_params()
        Zc = self._validate_Z(Z, reset=True)
        y, classes, y_idx = check_class_labels(y, Zc.shape[0], type(self).__name__)
        s = check_sample_weight(sample_weight, Zc.shape[0])
        s = apply_class_weight(s, self.class_weight, y, classes)
        self.classes_ = classes
        if classes.shape[0] == 2:
            targets = np.where(y_idx == 1, 1.0, -1.0)[:, None]
        else:
            targets = np.column_stack(
                [np.where(y_idx == k, 1.0, -1.0) for k in range(classes.shape[0])]
            )
        n_problems = targets.shape[1]
        W, B, results = self._solve_all(Zc, targets, [s] * n_problems, params, columns,
                                        strata=y_idx)
        self.coef_ = W
        self.intercept_ = B
        self._store_diagnostics(results, n_problems == 1)
        return self

    def decision_function(self, Z):
        """Z @ coef_.T + intercept_: (N,) for two classes, (N, n_classes) otherwise."""
        out = self._decision(Z)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict(self, Z):
        scores = self.decision_function(Z)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]

    def _has_proba(self):
        return self.loss == "logistic"

    @available_if(_has_proba)
    def predict_proba(self, Z):
        """Logistic probabilities; one-vs-rest sigmoids normalized to sum 1 for > 2 classes."""
        scores = self.decision_function(Z)
        if scores.ndim == 1:
            p1 = 1.0 / (1.0 + np.exp(-scores))
            return np.column_stack([1.0 - p1, p1])
        P = 1.0 / (1.0 + np.exp(-scores))
        return P / P.sum(axis=1, keepdims=True)

    @available_if(_has_proba)
    def predict_log_proba(self, Z):
        return np.log(self.predict_proba(Z))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


# ---------------------------------------------------------------------------- functions
def _class_targets(y):
    """Class labels as the classifier's -1/+1 targets: (n, 1) for two classes (the larger
    value is +1), one column per class against the rest for more."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D for a classification loss, got shape {y.shape}")
    classes, idx = np.unique(y, return_inverse=True)
    if classes.shape[0] < 2:
        raise ValueError(
            f"a classification loss needs at least 2 classes in y, got {classes.shape[0]}"
        )
    if classes.shape[0] == 2:
        return np.where(idx == 1, 1.0, -1.0)[:, None]
    return np.column_stack([np.where(idx == k, 1.0, -1.0) for k in range(classes.shape[0])])


def alpha_max(Z, y, l1_ratio=1.0, fit_intercept=True, sample_weight=None, loss="squared"):
    """The smallest alpha for which w = 0 is optimal.

    ``max_j |(1/S) sum_i s_i loss'(b0, y_i) z_ij| / l1_ratio``, b0 the optimal intercept of
    the w = 0 model (0 without intercept). For 2-D y (squared loss) the maximum over targets,
    for classes the maximum over the one-vs-rest problems (one for two classes).
    """
    check_choice(loss, "loss", ALL_LOSSES)
    l1_ratio = check_real(l1_ratio, "l1_ratio", low=0.0, high=1.0)
    if l1_ratio == 0.0:
        raise ValueError("alpha_max is infinite for l1_ratio=0 (pure l2): give l1_ratio > 0")
    Zc = check_feature_matrix(Z)
    s = check_sample_weight(sample_weight, Zc.shape[0])
    if loss == "squared":
        yv = check_target(y, Zc.shape[0], "y", allow_2d=True)
        targets = yv[:, None] if yv.ndim == 1 else yv
    else:
        if np.asarray(y).shape[0] != Zc.shape[0]:
            raise ValueError(f"y has {np.asarray(y).shape[0]} rows but Z has {Zc.shape[0]} rows")
        targets = _class_targets(y)
    cols = _Columns(Zc)
    best = 0.0
    for k in range(targets.shape[1]):
        b0 = optimal_intercept(loss, targets[:, k], s) if fit_intercept else 0.0
        best = max(best, _loss_gradient_at_constant(cols, loss, targets[:, k], list(s), b0))
    return best / l1_ratio


def cd_path(Z, y, alphas=None, n_alphas=100, eps=1e-3, sample_weight=None, columns=None,
            **params):
    """Coordinate descent along a decreasing sequence of alphas, warm-starting each fit.

    ``params`` are the CDRegressor parameters (or CDClassifier's when ``loss`` is a
    classification loss: one-vs-rest beyond two classes). Default alphas:
    ``geomspace(alpha_max, alpha_max * eps, n_alphas)``. Each alpha refits one estimator
    with ``warm_start=True`` (so ``solver_seed(random_state)`` is drawn again per alpha).

    Returns
    -------
    alphas : ndarray (n_alphas,), decreasing
    coefs : ndarray (D, n_alphas), or (n_targets, D, n_alphas) for 2-D y
    gaps : ndarray (n_alphas,) (or (n_alphas, n_targets)): the final relative gap per fit
    """
    params = dict(params)
    params.pop("warm_start", None)
    params.pop("alpha", None)
    loss = params.get("loss", "squared")
    if loss != "squared":
        # a path is a sequence of optima: the subgradient test alone, unless given (the
        # decisions rule would stop each fit at stable training decisions instead)
        params.setdefault("decision_epochs", None)
    check_choice(loss, "loss", ALL_LOSSES)
    if alphas is None:
        n_alphas = check_int(n_alphas, "n_alphas", low=1)
        eps = check_real(eps, "eps", low=0.0, low_open=True)
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
    if loss == "squared":
        est = CDRegressor(warm_start=True, **params)
    else:
        est = CDClassifier(warm_start=True, **params)
    coefs, gaps = [], []
    for a in alphas:
        est.set_params(alpha=float(a))
        est.fit(Z, y, sample_weight=sample_weight, columns=columns)
        coef = np.asarray(est.coef_)
        if loss != "squared":
            coef = coef[0] if coef.shape[0] == 1 else coef
        coefs.append(coef.copy())
        gaps.append(np.copy(est.dual_gap_))
    coefs = np.stack(coefs, axis=-1)
    return alphas, coefs, np.array(gaps)
