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
    # The mean log loss L(a) is convex in a: L'(a) = sum_i w_i (E_p[F_i] - E_T[F_i]) with p
    # the softmax of a F_i, L''(a) = sum_i w_i Var_p(F_i) >= 0. Its root of L' in
    # [lo, hi] by Newton's method, kept inside a bracket that bisection narrows when a step
    # leaves it (a handful of O(n k) passes; a bounded scalar search took ~30).
    target = float(np.einsum("i,ik,ik->", w, T, F))       # sum_i w_i E_T[F_i]

    def slope(a):
        P = _softmax(a * F)
        mean = np.einsum("ik,ik->i", P, F)
        var = np.einsum("ik,ik->i", P, F * F) - mean * mean
        # einsum, not BLAS (rbcd._threads.serial_dot): no OpenBLAS team woken by a fit
        return (float(np.einsum("i,i->", w, mean)) - target,
                float(np.einsum("i,i->", w, np.maximum(var, 0.0))))

    hi = MAX_SCALE / spread
    lo = hi * np.exp(-2 * np.log(MAX_SCALE) - 10.0)         # the old search's lower end
    g_lo, _ = slope(lo)
    if g_lo >= 0:
        return float(lo)
    g_hi, _ = slope(hi)
    if g_hi <= 0:
        return float(hi)
    a = min(max(1.0 / spread, lo), hi)
    for _ in range(100):
        g, h = slope(a)
        if g == 0:
            return float(a)
        if g > 0:
            hi = a
        else:
            lo = a
        step = a - g / h if h > 0 else 0.5 * (lo + hi)
        a_next = step if lo <= step <= hi else 0.5 * (lo + hi)
        if abs(a_next - a) <= 1e-12 * a or hi - lo <= 1e-12 * hi:
            return float(a_next)
        a = a_next
    return float(a)


def _softmax(G):
    """Row softmax of G, in place (G is a temporary): exp(G - row max), normalised."""
    G -= G.max(axis=1, keepdims=True)
    np.exp(G, out=G)
    G /= G.sum(axis=1, keepdims=True)
    return G


def softmax_probabilities(scores, a):
    """Probabilities (n, k) of the fitted map for scores (n,) or (n, k)."""
    return np.exp(log_softmax(a * _as_columns(scores), axis=1))
