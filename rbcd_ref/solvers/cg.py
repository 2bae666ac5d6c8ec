"""Ridge regression by (preconditioned) conjugate gradient, plain numpy (oracle of rbcd.solvers.cg).

scikit-learn's Ridge convention (docs/design.md "Ridge by conjugate gradient", docs/internals.md):

    minimize_{w, b}  sum_i s_i (y_i - z_i.w - b)^2 + alpha ||w||^2

With an intercept, y and the columns of Z are centered with the weighted means
(ybar = sum_i s_i y_i / S, zbar_j = sum_i s_i z_ij / S) *implicitly*: Z is never densified,
the centering is applied inside the operator

    A v = Zc^T S Zc v + alpha v,   Zc v = Z v - (zbar.v) 1,   Zc^T u = Z^T u - zbar (1.u),

and ``(Zc^T S Zc + alpha I) w = Zc^T S yc`` is solved by CG for each right-hand side (each
target / class), then ``b = ybar - zbar.w``. Z^T Z is never formed. This is the normal
equation of the paper's ridge problem on RB features (section 4), where the Jacobi diagonal
``sum_i s_i z_ij^2 - S zbar_j^2 + alpha`` is, for RB training data, the (weighted) bin count
/ R minus the centering term plus alpha: inside one grid Z^T Z is diagonal.
"""
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, validate_data

from .._checks import (apply_class_weight, check_choice, check_class_labels, check_int,
                      check_real, check_sample_weight, check_sparse_indices, check_target,
                      check_y_given)

MAX_ITER_CAP = 10_000


class _CenteredOperator:
    """v -> (Zc^T S Zc + alpha I) v without forming Zc (implicit weighted centering)."""

    def __init__(self, Z, s, alpha, fit_intercept):
        self.Z = Z
        self.ZT = Z.T.tocsr()
        self.s = s
        self.S = float(s.sum())
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        n_cols = Z.shape[1]
        if fit_intercept:
            self.zbar = np.asarray(self.ZT @ s).ravel() / self.S  # zbar_j = sum_i s_i z_ij / S
        else:
            self.zbar = np.zeros(n_cols)

    def center_times(self, v):
        """Zc v = Z v - (zbar . v) 1."""
        out = np.asarray(self.Z @ v).ravel()
        if self.fit_intercept:
            out = out - self.zbar @ v
        return out

    def center_transpose_times(self, u):
        """Zc^T u = Z^T u - zbar (sum_i u_i)."""
        out = np.asarray(self.ZT @ u).ravel()
        if self.fit_intercept:
            out = out - self.zbar * u.sum()
        return out

    def matvec(self, v):
        """(Zc^T S Zc + alpha I) v."""
        return self.center_transpose_times(self.s * self.center_times(v)) + self.alpha * v

    def diagonal(self):
        """sum_i s_i z_ij^2 - S zbar_j^2 + alpha (the Jacobi preconditioner)."""
        Zsq = self.Z.multiply(self.Z).tocsr()
        d = np.asarray(Zsq.T @ self.s).ravel()
        if self.fit_intercept:
            d = d - self.S * self.zbar ** 2
        return d + self.alpha


def conjugate_gradient(matvec, rhs, inv_diag, tol, max_iter):
    """(Preconditioned) CG for one right-hand side; stop when ||r|| <= tol ||rhs||.

    Returns (x, n_iter, converged). ``inv_diag`` is None (plain CG) or the inverse of the
    Jacobi diagonal.
    """
    x = np.zeros_like(rhs)
    rhs_norm = np.linalg.norm(rhs)
    if rhs_norm == 0.0:
        return x, 0, True
    r = rhs.copy()
    z = r if inv_diag is None else inv_diag * r
    p = z.copy()
    rz = r @ z
    for it in range(1, max_iter + 1):
        Ap = matvec(p)
        pAp = p @ Ap
        if not pAp > 0:  # breakdown: the operator is singular along p
            return x, it, np.linalg.norm(r) <= tol * rhs_norm
        step = rz / pAp
        x = x + step * p
        r = r - step * Ap
        if np.linalg.norm(r) <= tol * rhs_norm:
            return x, it, True
        z = r if inv_diag is None else inv_diag * r
        rz_new = r @ z
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x, max_iter, False


def ridge_cg_solve(Z, Y, s, alpha, fit_intercept, tol, max_iter, preconditioner):
    """Solve the weighted ridge problem for every column of Y (N x T).

    Returns W (T x D), b (T,), n_iter (T,).
    """
    op = _CenteredOperator(Z, s, alpha, fit_intercept)
    D = Z.shape[1]
    if max_iter is None:
        max_iter = min(10 * D, MAX_ITER_CAP)
    inv_diag = None
    if preconditioner == "jacobi":
        diag = op.diagonal()
        inv_diag = np.where(diag > 0, 1.0 / np.where(diag > 0, diag, 1.0), 1.0)
    T = Y.shape[1]
    W = np.zeros((T, D))
    B = np.zeros(T)
    n_iter = np.zeros(T, dtype=np.int64)
    for k in range(T):
        y = Y[:, k]
        ybar = (s @ y) / op.S if fit_intercept else 0.0
        rhs = op.center_transpose_times(s * (y - ybar))  # Zc^T S yc
        w, it, ok = conjugate_gradient(op.matvec, rhs, inv_diag, tol, max_iter)
        if not ok:
            warnings.warn(
                f"conjugate gradient did not reach tol={tol:g} for target {k} in {max_iter} "
                f"iterations; increase max_iter or alpha",
                ConvergenceWarning,
            )
        W[k] = w
        B[k] = ybar - op.zbar @ w if fit_intercept else 0.0
        n_iter[k] = it
    return W, B, n_iter


def ridge_direct_solve(Z, Y, s, alpha, fit_intercept, form):
    """The same problem by one dense factorization for all targets (oracle of
    rbcd.solvers._direct). With Zs = S^1/2 Zc and ys = S^1/2 yc:

        dual    (form "dual"):   (Zs Zs^T + alpha I) a = ys,   w = Zs^T a
        primal  (form "primal"): (Zs^T Zs + alpha I) w = Zs^T ys

    (the same w: (Zs^T Zs + alpha I)^-1 Zs^T = Zs^T (Zs Zs^T + alpha I)^-1). With
    alpha = 0 the minimum-norm least-squares solution (numpy's lstsq), which is what CG
    from a zero start converges to. Returns W (T x D), b (T,)."""
    Zd = np.asarray(Z.toarray() if sp.issparse(Z) else Z, dtype=np.float64)
    S = float(s.sum())
    zbar = (s @ Zd) / S if fit_intercept else np.zeros(Zd.shape[1])
    ybar = (s @ Y) / S if fit_intercept else np.zeros(Y.shape[1])
    root = np.sqrt(s)[:, None]
    Zs = root * (Zd - zbar)
    ys = root * (Y - ybar)
    if alpha == 0:
        W = np.linalg.lstsq(Zs, ys, rcond=None)[0]
    elif form == "dual":
        K = Zs @ Zs.T
        W = Zs.T @ np.linalg.solve(K + alpha * np.eye(K.shape[0]), ys)
    else:
        G = Zs.T @ Zs
        W = np.linalg.solve(G + alpha * np.eye(G.shape[0]), Zs.T @ ys)
    W = W.T
    B = ybar - W @ zbar if fit_intercept else np.zeros(Y.shape[1])
    return W, B


# alpha="auto" (oracle of rbcd.solvers.cg._solve_auto_alpha): the same candidates, rules
# and held-out draw.
AUTO_ALPHAS_PER_ROW = np.logspace(-6, 1, 15)
LOO_MAX_ROWS = 1000


# the held-out check of a regression's sample choice (oracle of rbcd.solvers._heldout)
HELDOUT_MIN_ROWS = 5000
HELDOUT_MAX_ROWS = 20000
HELDOUT_SHARE = 0.2
HELDOUT_FACTORS = 10.0 ** np.arange(-0.5, 2.01, 0.5)


def heldout_alpha(Z, Y, s, a0, fit_intercept):
    """The best of a0 * HELDOUT_FACTORS by the weighted squared error on held-out rows.
    The sample: every row up to HELDOUT_MAX_ROWS, above the first HELDOUT_MAX_ROWS of
    default_rng(0).permutation(n), in row order; held out: the first
    int(HELDOUT_SHARE * m) (at least 1) of default_rng(1).permutation(m) of its m rows,
    weight 0 in the fits. Candidate a is fitted with the penalty a sqrt(S_fit / S) (S_fit:
    the fitted rows' weight, S: all rows'); the best returned as a sqrt(S_m / S) (S_m: the
    sample's weight; 1 when the sample is every row: above HELDOUT_MAX_ROWS the sample's
    penalty, not scaled up). Exact solves here (rbcd solves by CG to HELDOUT_TOL: the two
    agree when that tolerance is tight); ties go to the smaller."""
    n = Z.shape[0]
    rows = np.arange(n) if n <= HELDOUT_MAX_ROWS else \
        np.sort(np.random.default_rng(0).permutation(n)[:HELDOUT_MAX_ROWS])
    m = rows.shape[0]
    held = np.random.default_rng(1).permutation(m)[:max(1, int(m * HELDOUT_SHARE))]
    Zh, Yh = sp.csr_matrix(Z)[rows], Y[rows]
    w = s[rows].astype(np.float64)
    w_fit = w.copy()
    w_fit[held] = 0.0
    if not (w_fit.sum() > 0 and w[held].sum() > 0):
        return float(a0)
    best, best_err = None, None
    for a in a0 * HELDOUT_FACTORS:
        fa = a * np.sqrt(w_fit.sum() / s.sum())
        form = "dual" if Zh.shape[0] <= Zh.shape[1] else "primal"
        W, B = ridge_direct_solve(Zh, Yh, w_fit, fa, fit_intercept, form)
        F = np.asarray(Zh[held] @ W.T) + B[None, :]
        err = float(np.sum(w[held][:, None] * (F - Yh[held]) ** 2))
        if best_err is None or err < best_err:
            best, best_err = float(a), err
    return best * float(np.sqrt(w.sum() / s.sum()))


def selection_scores(Y, F, s, classification):
    """(primary, secondary), higher is better: the weighted accuracy of the one-vs-rest
    decisions (classification) or minus the weighted mean squared error, then minus the
    weighted mean squared error."""
    err = float(np.sum(s[:, None] * (Y - F) ** 2)) / float(s.sum())
    if not classification:
        return -err, -err

    def cls(T):
        return (T[:, 0] > 0).astype(int) if T.shape[1] == 1 else np.argmax(T, axis=1)

    return float(np.sum(s * (cls(F) == cls(Y)))) / float(s.sum()), -err


def best_index(scores):
    """The best (primary, then secondary) score; ties go to the larger alpha."""
    best = 0
    for j in range(1, len(scores)):
        if tuple(scores[j]) >= tuple(scores[best]):
            best = j
    return best


def choose_alpha(Z, Y, s, fit_intercept, classification, return_score=False,
                 heldout=True):
    """The penalty of alpha="auto" by exact leave-one-out: with Zs = S^1/2 (Z - 1 zbar^T),
    K = Zs Zs^T and P the projection on S^1/2 1 (the unpenalised intercept), the hat matrix
    is H = P + K (K + a I)^-1 and row i's leave-one-out residual (r_i / (1 - H_ii)) /
    sqrt(s_i), r = ys - K (K + a I)^-1 ys. Candidates per unit of weight
    (AUTO_ALPHAS_PER_ROW * sum of the weights). Above LOO_MAX_ROWS rows the same on the
    rows of a fixed sample (numpy's default_rng(0).permutation, the first LOO_MAX_ROWS,
    in row order), its best penalty a_s scaled to a_s sqrt(S / S_s) (S, S_s: the total
    and the sample's weight); for regression above HELDOUT_MIN_ROWS rows that penalty then
    checked on held-out rows (:func:`heldout_alpha`; not with ``heldout=False``).
    ``return_score``: also the best leave-one-out (primary, secondary) score."""
    n = Z.shape[0]
    if n > LOO_MAX_ROWS:
        rows = np.sort(np.random.default_rng(0).permutation(n)[:LOO_MAX_ROWS])
        a, score = choose_alpha(sp.csr_matrix(Z)[rows], Y[rows], s[rows], fit_intercept,
                                classification, return_score=True)
        a0 = float(a * np.sqrt(s.sum() / s[rows].sum()))
        if heldout and not classification and n > HELDOUT_MIN_ROWS:
            a0 = heldout_alpha(Z, Y, s, a0, fit_intercept)
        return (a0, score) if return_score else a0
    Zd = np.asarray(Z.toarray() if sp.issparse(Z) else Z, dtype=np.float64)
    S = float(s.sum())
    zbar = (s @ Zd) / S if fit_intercept else np.zeros(Zd.shape[1])
    ybar = (s @ Y) / S if fit_intercept else np.zeros(Y.shape[1])
    root = np.sqrt(s)
    Zs = root[:, None] * (Zd - zbar)
    ys = root[:, None] * (Y - ybar)
    K = Zs @ Zs.T
    P = np.outer(root, root) / S if fit_intercept else np.zeros((n, n))
    alphas = AUTO_ALPHAS_PER_ROW * S
    scores = []
    for a in alphas:
        smooth = K @ np.linalg.inv(K + a * np.eye(n))
        h = np.diag(P + smooth)
        r = ys - smooth @ ys
        if np.any((1.0 - h <= 1e-12) & (root > 0)):   # a row its own fit reproduces
            scores.append((-np.inf, -np.inf))
            continue
        loo = r / ((1.0 - h) * np.where(root > 0, root, 1.0))[:, None]
        loo[root == 0] = 0.0
        scores.append(selection_scores(Y, Y - loo, s, classification))
    best = best_index(scores)
    return (float(alphas[best]), tuple(scores[best])) if return_score else float(alphas[best])


def augmented(Z, M, c):
    """The design [Z, sqrt(c) M] of the linear term of weight c (rbcd.solvers._linear):
    ridge on it is the joint fit; the coefficients of the unit block M are sqrt(c) times
    its last columns'. c = 0: Z alone."""
    if c == 0.0:
        return sp.csr_matrix(Z)
    return sp.hstack([sp.csr_matrix(Z), sp.csr_matrix(np.sqrt(c) * M)], format="csr")


class _RidgeCGBase(BaseEstimator):
    _classification = False
    def _check_params(self):
        alpha = ("auto" if isinstance(self.alpha, str) and self.alpha == "auto"
                 else check_real(self.alpha, "alpha", low=0.0))
        tol = check_real(self.tol, "tol", low=0.0)
        max_iter = None if self.max_iter is None else check_int(self.max_iter, "max_iter", low=1)
        preconditioner = check_choice(self.preconditioner, "preconditioner", ("jacobi", None))
        check_choice(self.solver, "solver", ("cg", "direct", "auto"))
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValueError(f"fit_intercept must be a bool, got {self.fit_intercept!r}")
        if self.n_jobs is not None:
            if check_int(self.n_jobs, "n_jobs") == 0:
                raise ValueError("n_jobs must be a non-zero integer or None, got 0")
        return alpha, tol, max_iter, preconditioner

    def _validate_Z(self, Z, reset):
        Z = validate_data(self, check_sparse_indices(Z, "Z"), reset=reset, accept_sparse=True, dtype=np.float64)
        return sp.csr_matrix(Z)

    def _solve(self, Z, Y, s, extra=None, alpha=None):
        """W, b, n_iter. ``solver`` "direct" and "auto" factor the smaller Gram matrix
        (rbcd's "auto" chooses CG on large problems by a cost model; this oracle, meant
        for small inputs, always solves exactly: the two agree to CG's tolerance)."""
        checked, tol, max_iter, preconditioner = self._check_params()
        alpha = checked if alpha is None else alpha       # a pair's own (one-vs-one)
        fit_intercept = bool(self.fit_intercept)

        def fit(Zf, Yf, sf, a):
            if self.solver == "cg":
                return ridge_cg_solve(Zf, Yf, sf, a, fit_intercept, tol, max_iter,
                                      preconditioner)
            form = "dual" if Zf.shape[0] <= Zf.shape[1] else "primal"
            W, B = ridge_direct_solve(Zf, Yf, sf, a, fit_intercept, form)
            return W, B, np.ones(Yf.shape[1], dtype=np.int64)     # one factorization

        if extra is None:
            if alpha == "auto":
                alpha = choose_alpha(Z, Y, s, fit_intercept, self._classification)
            self.alpha_ = alpha
            return fit(Z, Y, s, alpha)
        # the linear term (oracle of rbcd.solvers._linear): ridge on [Z, sqrt(c) M]; with
        # alpha="auto" the best (c, alpha) by leave-one-out, the first c winning ties, the
        # held-out check only for c = 0
        M, weights = extra
        if alpha == "auto":
            best = None
            for c in weights:
                a, score = choose_alpha(augmented(Z, M, c), Y, s, fit_intercept,
                                        self._classification, return_score=True,
                                        heldout=(c == 0.0))
                if best is None or score > best[0]:
                    best = (score, c, a)
            _, c, alpha = best
        else:
            if len(weights) != 1:
                raise ValueError("the linear term's weight is chosen only with alpha='auto'")
            c = weights[0]
        self.alpha_ = alpha
        self.extra_weight_ = c
        W, B, n_iter = fit(augmented(Z, M, c), Y, s, alpha)
        if c > 0.0:
            W = W.copy()
            W[:, Z.shape[1]:] *= np.sqrt(c)
        return W, B, n_iter

    def _decision(self, Z):
        check_is_fitted(self, "coef_")
        Z = self._validate_Z(Z, reset=False)
        W = np.atleast_2d(self.coef_)
        return np.asarray(Z @ W.T) + np.atleast_1d(self.intercept_)[None, :]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class RidgeCG(RegressorMixin, _RidgeCGBase):
    """Ridge regression solved by (Jacobi-preconditioned) conjugate gradient.

    Same solution as ``sklearn.linear_model.Ridge(alpha)`` (with sample weights and several
    targets). ``solver``: "cg", or "direct" / "auto" (an exact dense solve here, see
    ``_solve``). ``n_jobs`` is accepted and ignored. Attributes: ``coef_`` (D,) or (T, D),
    ``intercept_`` float or (T,), ``n_iter_`` (T,) CG iterations per target (1: direct).
    """

    def __init__(self, alpha=1.0, fit_intercept=True, tol=1e-6, max_iter=None,
                 preconditioner="jacobi", n_jobs=None, solver="cg"):
        self.alpha = alpha
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.preconditioner = preconditioner
        self.n_jobs = n_jobs

    def fit(self, Z, y, sample_weight=None, columns=None, extra=None):
        """``columns`` (the RBColumns of Z or a fitted exact-mode RandomBinning) is accepted
        for parity with rbcd.RidgeCG, where it only speeds up the Jacobi preconditioner;
        the solution does not depend on it, and it is ignored here. ``extra``: (M, weights),
        the linear term beside Z (the oracle of rbcd's private hook; ``extra_weight_`` the
        weight used, the coefficients then of [Z, M] where it is > 0)."""
        self._check_params()
        check_y_given(y, type(self).__name__)
        Z = self._validate_Z(Z, reset=True)
        y = check_target(y, Z.shape[0], "y", allow_2d=True)
        s = check_sample_weight(sample_weight, Z.shape[0])
        single = y.ndim == 1
        W, B, n_iter = self._solve(Z, y[:, None] if single else y, s, extra)
        if W.shape[1] != Z.shape[1]:
            self.n_features_in_ = W.shape[1]
        self.coef_ = W[0] if single else W
        self.intercept_ = float(B[0]) if single else B
        self.n_iter_ = n_iter
        return self

    def predict(self, Z):
        out = self._decision(Z)
        return out[:, 0] if np.ndim(self.coef_) == 1 else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class RidgeCGClassifier(ClassifierMixin, _RidgeCGBase):
    """Ridge classification by CG: targets -1/+1 per class (one-vs-rest), all classes as one
    block of right-hand sides; for two classes a single column with classes_[1] as +1, like
    ``sklearn.linear_model.RidgeClassifier``. ``class_weight`` multiplies sample weights.
    ``alpha="auto"`` scores the accuracy of the decisions.

    ``multi_class="ovo"`` (more than two classes): for every pair of classes a < b (in the
    order of ``classes_``) a two-class fit on the rows of those two classes alone, +1 for
    b, with the pair's own class weights and a number alpha times the pair's share of the
    sample weight (alpha="auto": the pair's own choice); the
    prediction is the class with the most votes (a pair votes b where its decision is > 0),
    ties broken by the summed decisions squashed into (-1/3, 1/3) (scikit-learn's
    OneVsOneClassifier). ``coef_`` (n_pairs, D), ``intercept_``, ``alpha_`` one per pair,
    ``pairs_`` the pairs.
    """
    _classification = True

    def __init__(self, alpha=1.0, fit_intercept=True, tol=1e-6, max_iter=None,
                 preconditioner="jacobi", n_jobs=None, class_weight=None, solver="cg",
                 multi_class="ovr"):
        self.multi_class = multi_class
        self.alpha = alpha
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.preconditioner = preconditioner
        self.n_jobs = n_jobs
        self.class_weight = class_weight

    def fit(self, Z, y, sample_weight=None, columns=None, extra=None):
        """``columns`` is accepted and ignored, ``extra`` as in RidgeCG.fit."""
        self._check_params()
        Z = self._validate_Z(Z, reset=True)
        y, classes, idx = check_class_labels(y, Z.shape[0], type(self).__name__)
        s = check_sample_weight(sample_weight, Z.shape[0])
        check_choice(self.multi_class, "multi_class", ("ovr", "ovo"))
        self.pairs_ = None
        if self.multi_class == "ovo" and classes.shape[0] > 2:
            if extra is not None:
                raise ValueError("multi_class='ovo' fits no linear term")
            return self._fit_pairs(Z, y, s, classes, idx)
        s = apply_class_weight(s, self.class_weight, y, classes)
        if classes.shape[0] == 2:
            Y = np.where(idx == 1, 1.0, -1.0)[:, None]
        else:
            Y = np.where(idx[:, None] == np.arange(classes.shape[0])[None, :], 1.0, -1.0)
        W, B, n_iter = self._solve(Z, Y, s, extra)
        if W.shape[1] != Z.shape[1]:
            self.n_features_in_ = W.shape[1]
        self.classes_ = classes
        self.coef_ = W
        self.intercept_ = B
        self.n_iter_ = n_iter
        return self

    def _fit_pairs(self, Z, y, s, classes, idx):
        pairs, coefs, intercepts, alphas, iters = [], [], [], [], []
        alpha, _, _, _ = self._check_params()
        for a in range(classes.shape[0]):
            for b in range(a + 1, classes.shape[0]):
                rows = np.flatnonzero((idx == a) | (idx == b))
                weight = self.class_weight
                if isinstance(weight, dict):       # the pair's classes only
                    weight = {c: v for c, v in weight.items() if c in (classes[a], classes[b])}
                sp_ = apply_class_weight(s[rows], weight, y[rows], classes[[a, b]])
                if not sp_.sum() > 0:
                    raise ValueError(f"multi_class='ovo': the rows of classes "
                                     f"{classes[a]!r} and {classes[b]!r} all have weight 0")
                Y = np.where(idx[rows] == b, 1.0, -1.0)[:, None]
                # a number alpha: the whole training set's units, the pair its share of
                # the sample weight
                a_p = alpha if alpha == "auto" else alpha * s[rows].sum() / s.sum()
                W, B, n_iter = self._solve(Z[rows], Y, sp_, alpha=a_p)
                pairs.append((a, b))
                coefs.append(W[0])
                intercepts.append(float(B[0]))
                alphas.append(float(self.alpha_))
                iters.append(int(n_iter[0]))
        self.classes_ = classes
        self.pairs_ = np.array(pairs)
        self.coef_ = np.array(coefs)
        self.intercept_ = np.array(intercepts)
        self.alpha_ = np.array(alphas)
        self.n_iter_ = np.array(iters)
        return self

    def decision_function(self, Z):
        out = self._decision(Z)
        if getattr(self, "pairs_", None) is not None:
            return self._vote(out)
        return out[:, 0] if out.shape[1] == 1 else out

    def _vote(self, pair_decisions):
        """Votes plus the summed confidences c squashed as c / (3 (|c| + 1))."""
        K = self.classes_.shape[0]
        out = np.zeros((pair_decisions.shape[0], K))
        for i in range(pair_decisions.shape[0]):
            votes = [0.0] * K
            conf = [0.0] * K
            for p, (a, b) in enumerate(self.pairs_):
                d = float(pair_decisions[i, p])
                if d > 0:
                    votes[b] += 1
                else:
                    votes[a] += 1
                conf[b] += d
                conf[a] -= d
            for c in range(K):
                out[i, c] = votes[c] + conf[c] / (3.0 * (abs(conf[c]) + 1.0))
        return out

    def predict(self, Z):
        scores = self.decision_function(Z)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]
