"""A linear term beside the random binning kernel (issue 30; docs/benchmarks/search.md,
"A linear term beside the kernel").

The models' ``linear`` parameter adds c times a linear kernel on the standardized
features to the kernel that random binning estimates:

    k(x, y) = k_RB(x, y) + c <m(x), m(y)>,     m(x) = (x - mean) / (std sqrt(d))

(mean and std: the training columns' mean and standard deviation; a constant column
gives 0; d features, so that <m(x), m(x)> is about 1, as k_RB(x, x) = 1). Its feature
map is the design [Z, sqrt(c) M]: ridge on it with the penalty alpha is ridge on [Z, M]
with alpha on Z's columns and alpha / c on M's. The fitted coefficients are those of the
design [Z, M] (``coef_`` of shape (k, D + d)), so prediction is [Z, M] @ coef_.T + b.

A near-linear target (diabetes) is fitted better by the sum than by either kernel, and
on unscaled data (raw wine) the standardized term carries the features that the L1
distance of the kernel drowns (measurements in docs/benchmarks/search.md).

Solving, with every ridge path (CG, dual and primal direct solves) kept as it is:

* a fixed alpha, dual direct form (small n): the joint n x n system
  (Kc + Mps Mps^T + alpha I) A = ys (rbcd.solvers._direct.solve_direct's ``extra``);
* a fixed alpha otherwise: the Schur complement of the joint normal equations. With
  W_Y, W_M the ridge solutions on Z for the targets Y and for the columns of
  Mp = sqrt(c) M (one block solve of k + d right-hand sides), the joint solution is

      v = (Mpc^T S (Mpc - Zc W_M) + alpha I)^-1 Mpc^T S (Yc - Zc W_Y),   w = W_Y - W_M v

  (c: centred with the weighted means; S: the weights), exact up to the solver's
  tolerance;
* alpha="auto" by leave-one-out: the dual Gram matrix of the joint design is
  Kc + Mps Mps^T (Mps = S^1/2 Mpc), a rank-d update of Kc, so
  rbcd.solvers._direct.loo_select_weights scores every (c, alpha) from ONE
  eigendecomposition of Kc (the Woodbury identity for c > 0: O(n^2 d) per alpha); the
  best (c, alpha) wins (ties: the earlier c of the candidates, then the larger alpha).
"""
import numpy as np

#: the weights c that ``linear="auto"`` chooses among for classification, by leave-one-out
#: with alpha (the first wins ties: no term)
AUTO_CANDIDATES = (0.0, 1.0)
#: the weights of ``linear="auto"`` for regression: the term always, at weight 1 (alpha
#: still chosen by leave-one-out). Choosing between 0 and 1 by leave-one-out, as for
#: classification, picked the worse of the two on most splits of Boston housing: random
#: 75/25 splits of one pool of 506 rows, where a split whose training rows gain from the
#: term leaves test rows that gain less (the two changes correlated -0.87 over 30 splits).
#: 100 splits, RMSE against the tuned exact Laplacian machine: the choice +2.48%, no term
#: +0.40%, the term at 1 -0.94%; diabetes (20 splits, raw / scaled) took the term on
#: every split either way (docs/benchmarks/search.md).
AUTO_REGRESSION = (1.0,)
#: ``linear="auto"`` adds the term only up to this many features (the term's block is
#: dense: n x d; beyond, and above rbcd.solvers._direct.LOO_MAX_ROWS rows, it is 0)
AUTO_MAX_FEATURES = 256


class LinearTerm:
    """The standardization of the linear term, fitted on the training rows:
    ``block(X)`` = (X - mean) / (std sqrt(d)), dense float64, a constant column 0.

    Computed on X / p (p per column: the power of two of the column's largest magnitude,
    math.frexp's exponent), which is exact: X * 2^k gives the same block bit for bit (the
    binning's contract 3 scales exactly too), and squares of huge or tiny columns neither
    overflow nor underflow. With ``sample_weight`` (checked) the rows of weight 0 are left
    out and the mean and standard deviation are weighted (integer weights: those of the
    rows repeated)."""

    def __init__(self, X, sample_weight=None):
        X = _dense(X)
        w = None
        if sample_weight is not None:
            keep = np.asarray(sample_weight) > 0
            X, w = X[keep], np.asarray(sample_weight, dtype=np.float64)[keep]
        big = np.max(np.abs(X), axis=0) if X.shape[0] else np.zeros(X.shape[1])
        self.pow2_ = np.ldexp(1.0, np.frexp(big)[1]).astype(np.float64)   # 1 for 0
        # C order whatever X's layout: numpy sums the columns of a C array row by row and
        # those of an F array pairwise, so the statistics (and the model) would otherwise
        # differ in their last bits between X, np.asfortranarray(X) and a DataFrame's values
        Xs = np.ascontiguousarray(X / self.pow2_)
        if w is None:
            self.mean_ = Xs.mean(axis=0)
            std = (Xs - self.mean_).std(axis=0)
        else:
            self.mean_ = np.average(Xs, axis=0, weights=w)
            std = np.sqrt(np.average((Xs - self.mean_) ** 2, axis=0, weights=w))
        self.constant_ = np.max(X, axis=0) == np.min(X, axis=0)
        self.scale_ = np.where(self.constant_ | ~(std > 0), 1.0, std)
        self.n_features_ = X.shape[1]

    def block(self, X):
        X = _dense(X)
        if X.shape[1] != self.n_features_:
            raise ValueError(f"X has {X.shape[1]} features, the linear term was fitted on "
                             f"{self.n_features_}")
        M = (X / self.pow2_ - self.mean_) / self.scale_ / np.sqrt(float(self.n_features_))
        M[:, self.constant_] = 0.0
        return M


def _dense(X):
    import scipy.sparse as sp

    return np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)


class ExtraBlock:
    """What a ridge solve is given for the term: M (n, d) the unit block (LinearTerm.block)
    and ``weights`` the candidate c (one: fixed; several: chosen by leave-one-out)."""

    def __init__(self, M, weights):
        self.M = np.ascontiguousarray(M, dtype=np.float64)
        self.weights = tuple(float(c) for c in weights)
        if not self.weights or any(not (c >= 0 and np.isfinite(c)) for c in self.weights):
            raise ValueError(f"the linear term's weights must be finite and >= 0, got "
                             f"{weights!r}")


def centred_weighted(M, system):
    """(Ms, mbar): Ms = S^1/2 (M - 1 mbar^T) with mbar the weighted column means of M on
    ``system`` (a rbcd.solvers.cg._RidgeSystem; without intercept mbar = 0)."""
    if system.zbar is not None:
        mbar = np.einsum("i,ij->j", system.s, M) / system.S
        Mc = M - mbar
    else:
        mbar = np.zeros(M.shape[1])
        Mc = M
    return np.sqrt(system.s)[:, None] * Mc, mbar


def joint_residual(system, W, V, Ms, alpha):
    """||g|| / ||b|| per target for the joint normal equations of the design [Zc, Mc]:
    g = b - (A + alpha I) [W; V], b = [Zc^T S Yc; Mc^T S^1/2 ys] (Ms = S^1/2 Mc)."""
    sw = np.sqrt(system.s)
    r = system.Yc * sw[:, None] - system.ztimes(W) * sw[:, None] - Ms @ V   # S^1/2 residual
    g = np.vstack([system.ztimes_t(r * sw[:, None]) - alpha * W, Ms.T @ r - alpha * V])
    b = np.vstack([system.B, Ms.T @ (system.Yc * sw[:, None])])
    bn = np.linalg.norm(b, axis=0)
    return np.where(bn > 0, np.linalg.norm(g, axis=0) / np.where(bn > 0, bn, 1.0), 0.0)


def schur_solution(Y, Mp, s, alpha, coef_all, intercept_all, Z, fit_intercept):
    """The joint solution from the ridge solutions on Z of the k + d targets [Y, Mp]
    (coef_all (k + d, D), intercept_all (k + d)): returns (w (k, D), v (k, d), b (k))
    for the design [Z, Mp] (module docstring)."""
    k = Y.shape[1]
    F = np.asarray(Z @ coef_all.T) + intercept_all[None, :]       # the fits of all k + d
    R = np.hstack([Y, Mp]) - F                                    # Yc - Zc W_Y, Mpc - Zc W_M
    if fit_intercept:
        Mpc = Mp - np.einsum("i,ij->j", s, Mp) / float(s.sum())
    else:
        Mpc = Mp
    sM = s[:, None] * Mpc
    A = sM.T @ R[:, k:]
    A = 0.5 * (A + A.T)                                           # symmetric up to rounding
    A.flat[:: A.shape[0] + 1] += alpha
    v = np.linalg.solve(A, sM.T @ R[:, :k])                       # (d, k)
    w = coef_all[:k] - v.T @ coef_all[k:]
    b = intercept_all[:k] - v.T @ intercept_all[k:]
    return w, v.T, b
