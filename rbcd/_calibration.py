"""Probabilities from decision values: the calibration of RBClassifier(solver="cg").

A ridge classifier (one-vs-rest -1/+1 targets) gives scores, not probabilities. Its
``predict_proba`` maps the scores F (n, k) of k classes (one column f for two classes)
through a softmax with one fitted scale a > 0 (temperature scaling):

    two classes:  P(classes_[1] | x) = 1 / (1 + exp(-a f(x)))      (Platt, 1999, no offset)
    k classes:    P(class c | x)     = exp(a F_c(x)) / sum_m exp(a F_m(x))

No offsets: with a > 0 the arg max of the probabilities is the arg max of the scores, so
``predict_proba`` always agrees with ``predict``. a minimises the (weighted) mean log loss
of the calibration rows, a one-dimensional convex problem. Platt's smoothed targets
(n_c + 1)/(n_c + 2) keep a finite when the calibration rows are separated perfectly, and a is
capped at ``MAX_SCALE`` over the spread of the scores.
"""
import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

MAX_SCALE = 1e3


def _as_columns(scores):
    F = np.asarray(scores, dtype=np.float64)
    if F.ndim == 1:
        F = np.column_stack([np.zeros_like(F), F])
    return F


def _smoothed_targets(y_index, k, weight):
    """Platt's smoothed one-hot targets: a class of total weight n_c (its row count for unit
    weights, so that a weight acts as repeated rows) gets (n_c + 1)/(n_c + 2) on its rows,
    the rest spread evenly over the other classes."""
    n = y_index.shape[0]
    counts = np.bincount(y_index, weights=weight, minlength=k)
    hi = (counts + 1.0) / (counts + 2.0)
    T = np.empty((n, k))
    T[:] = ((1.0 - hi[y_index]) / max(k - 1, 1))[:, None]
    T[np.arange(n), y_index] = hi[y_index]
    return T


def fit_softmax_calibration(scores, y_index, n_classes, sample_weight=None):
    """The scale a of the map above, from calibration scores and class indices y_index.

    scores: (n,) for two classes (positive means class 1) or (n, k); y_index: ints in [0, k);
    sample_weight: optional non-negative weights of the rows.
    """
    F = _as_columns(scores)
    w = np.ones(F.shape[0]) if sample_weight is None else np.asarray(sample_weight, float)
    T = _smoothed_targets(np.asarray(y_index), n_classes, w)
    w = w / w.sum()
    spread = float(np.std(F)) or 1.0

    def loss(log_a):
        return -np.sum(w[:, None] * T * log_softmax(np.exp(log_a) * F, axis=1))

    hi = np.log(MAX_SCALE / spread)
    res = minimize_scalar(loss, bounds=(hi - 2 * np.log(MAX_SCALE) - 10.0, hi),
                          method="bounded", options={"xatol": 1e-8})
    return float(np.exp(res.x))


def softmax_probabilities(scores, a):
    """Probabilities (n, k) of the fitted map for scores (n,) or (n, k)."""
    return np.exp(log_softmax(a * _as_columns(scores), axis=1))
