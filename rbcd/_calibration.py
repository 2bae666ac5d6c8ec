"""Probabilities from decision values: the calibration of RBClassifier(solver="cg").

A ridge classifier (one-vs-rest -1/+1 targets) gives scores, not probabilities. Its
``predict_proba`` maps the scores F (n, k) of k classes (k = 1 column for two classes)
through a fitted softmax:

    two classes:  P(classes_[1] | x) = 1 / (1 + exp(-(a f(x) + b)))           (Platt, 1999)
    k classes:    P(class c | x)     = exp(a F_c(x) + b_c) / sum_m exp(a F_m(x) + b_m)

with a > 0 (one scale shared by all classes, so the arg max, and hence ``predict``, is
unchanged) and the offsets b fitted by minimising the mean log loss of the calibration rows
(L-BFGS on a smooth, convex problem). Platt's smoothed targets (N+ + 1)/(N+ + 2) and
1/(N- + 2) keep a finite when the calibration rows are separated perfectly, and a is capped
at ``MAX_SCALE`` times the inverse spread of the scores.
"""
import numpy as np
from scipy.optimize import minimize
from scipy.special import log_softmax

MAX_SCALE = 1e3


def _smoothed_targets(y_index, k):
    """Platt's smoothed one-hot targets: a class with n_c rows gets (n_c + 1)/(n_c + 2) on its
    rows and 1/(n_other + 2) spread over the other classes."""
    n = y_index.shape[0]
    counts = np.bincount(y_index, minlength=k).astype(np.float64)
    hi = (counts + 1.0) / (counts + 2.0)
    T = np.empty((n, k))
    lo = (1.0 - hi[y_index]) / max(k - 1, 1)
    T[:] = lo[:, None]
    T[np.arange(n), y_index] = hi[y_index]
    return T


def fit_softmax_calibration(scores, y_index, n_classes):
    """(a, b) for the map above, from calibration scores and the class indices y_index.

    scores: (n,) for two classes (positive means class 1) or (n, k); y_index: ints in [0, k).
    Returns a float and an array of k offsets (two entries for two classes, the first 0).
    """
    F = np.asarray(scores, dtype=np.float64)
    if F.ndim == 1:
        F = np.column_stack([np.zeros_like(F), F])
    k = n_classes
    T = _smoothed_targets(np.asarray(y_index), k)
    spread = float(np.std(F)) or 1.0
    a_max = MAX_SCALE / spread
    n = F.shape[0]

    def objective(theta):
        a = a_max / (1.0 + np.exp(-theta[0]))  # a in (0, a_max)
        b = np.concatenate([[0.0], theta[1:]])
        L = log_softmax(a * F + b, axis=1)
        P = np.exp(L)
        loss = -np.sum(T * L) / n
        G = (P - T) / n  # d loss / d logits
        da = np.sum(G * F) * a * (1.0 - a / a_max)
        return loss, np.concatenate([[da], G.sum(axis=0)[1:]])

    theta0 = np.zeros(k)
    theta0[0] = np.log((1.0 / spread) / (a_max - 1.0 / spread))  # start at a = 1 / spread
    res = minimize(objective, theta0, jac=True, method="L-BFGS-B")
    a = a_max / (1.0 + np.exp(-res.x[0]))
    return float(a), np.concatenate([[0.0], res.x[1:]])


def softmax_probabilities(scores, a, b):
    """Probabilities (n, k) of the fitted map for scores (n,) or (n, k)."""
    F = np.asarray(scores, dtype=np.float64)
    if F.ndim == 1:
        F = np.column_stack([np.zeros_like(F), F])
    return np.exp(log_softmax(a * F + b, axis=1))
