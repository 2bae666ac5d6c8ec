"""sigma="scale" written out plainly: the twin of rbcd/_scale.py (same pairs, same value).

    sigma_ = factor * median over sampled pairs (i, j), i != j, of sum_k |X[i, k] - X[j, k]|

The pairs come from numpy.random.default_rng(PAIR_SEED), independent of random_state:
i = integers(0, N, n_pairs), then j = (i + integers(1, N, n_pairs)) % N. A zero median falls
back to the mean of the non-zero distances, and to 1.0 when there are none or N < 2.

With sample_weight the same two draws pick weight units instead of rows: row i holds q_i
consecutive units (q = the weights where they are all integers, else round(w * 2^20 / max w)),
unit a = integers(0, M, n_pairs) of M = sum q, unit b = (a + integers(1, M, n_pairs)) % M,
each mapped to the row holding it: the pairs of the data with row i repeated q_i times.
Rows of huge or tiny magnitude (the pairs' rows' largest outside [2^-400, 2^400]): the
distances of the rows divided by p, the power of two that brings it into [1, 2), times p.
The Gaussian kernel's rule uses the L2 distance of the same pairs: the squared differences
added in column order, one square root, factor L2_FACTOR.
"""
import math

import numpy as np
import scipy.sparse as sp

PAIR_SEED = 0x5CA1E
N_PAIRS = 2000
DEFAULT_FACTOR = 0.5  # as rbcd/_scale.py (chosen on the real-data suite)


def _pairs(n, n_pairs):
    """The sampled pairs (i, j), i != j, of the module docstring."""
    rng = np.random.default_rng(PAIR_SEED)
    first = rng.integers(0, n, size=n_pairs)
    second = (first + rng.integers(1, n, size=n_pairs)) % n
    return zip(first, second)


def _units(sample_weight):
    """Each row's units of weight (module docstring)."""
    w = np.asarray(sample_weight, dtype=np.float64)
    if all(float(v).is_integer() for v in w) and w.sum() <= 2.0 ** 53:
        return [int(v) for v in w]
    return [int(np.rint(v * (2.0 ** 20 / w.max()))) for v in w]


def _weighted_pairs(sample_weight, n_pairs):
    """The sampled pairs of rows by weight units (module docstring); [] for fewer than two
    units."""
    units = _units(sample_weight)
    m = sum(units)
    if m < 2:
        return []
    rng = np.random.default_rng(PAIR_SEED)
    first = rng.integers(0, m, size=n_pairs)
    second = (first + rng.integers(1, m, size=n_pairs)) % m
    owner = [row for row, q in enumerate(units) for _ in range(q)] if m <= 10**6 else None

    def row_of(unit):
        if owner is not None:
            return owner[unit]
        total = 0
        for row, q in enumerate(units):
            total += q
            if unit < total:
                return row

    return [(row_of(int(a)), row_of(int(b))) for a, b in zip(first, second)]


def _median_or_fallback(distances, scale=1.0):
    """The median; else the mean of the non-zero distances; else 1.0. The first two times
    ``scale``, the power of two the distances were computed down by."""
    distances = np.array(distances)
    median = float(np.median(distances))
    if median > 0:
        return _finite(median * scale)
    nonzero = distances[distances > 0]
    if len(nonzero):
        return _finite(float(nonzero.mean()) * scale)
    return 1.0


def _finite(distance):
    """A ValueError for a distance past the float64 range (as rbcd._scale)."""
    if not np.isfinite(distance):
        raise ValueError("X's values are too large: the median distance between its rows "
                         "is beyond the float64 range, so no kernel bandwidth (sigma) can "
                         "be taken from it; scale the features first (e.g. "
                         "sklearn.preprocessing.StandardScaler or RobustScaler)")
    return distance


def _scale_of(dense, pairs):
    """1.0, or where the largest magnitude of the pairs' rows lies outside [2^-400, 2^400]
    the power of two that brings it into [1, 2): the distances are computed on the rows
    divided by it (exact), then multiplied back, so they neither overflow nor underflow."""
    rows = sorted({r for pair in pairs for r in pair})
    m = max(abs(float(v)) for r in rows for v in dense[r])
    if m == 0.0 or 2.0 ** -400 <= m <= 2.0 ** 400:
        return 1.0
    return math.ldexp(1.0, math.frexp(m)[1] - 1)


def _dense(X):
    if not sp.issparse(X) and np.asarray(X).dtype.kind == "c":
        raise ValueError("X must be real: complex data has no L1 distance scale here")
    return X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)


def _median_pair_distance(X, n_pairs, pair_distance, sample_weight=None):
    """The median of pair_distance(row i, row j) over the sampled pairs (1.0 for one row;
    the fallback of _median_or_fallback when the median is 0; ValueError for no rows or
    columns, or a value that is not finite)."""
    dense = _dense(X)
    if dense.ndim != 2 or dense.shape[0] < 1 or dense.shape[1] < 1:
        raise ValueError(f"X must be a 2-D array with at least one row and one column, got "
                         f"shape {dense.shape}")
    if not np.all(np.isfinite(dense)):
        raise ValueError("X contains NaN or infinity: the distance scale of such data is "
                         "undefined")
    if sample_weight is not None:
        w = np.asarray(sample_weight, dtype=np.float64)
        if w.shape != (dense.shape[0],) or not np.all(np.isfinite(w)) or np.any(w < 0) \
                or not w.sum() > 0:
            raise ValueError("sample_weight must be finite and non-negative, not all zero, "
                             "one per row")
        pairs = _weighted_pairs(w, n_pairs)
    else:
        pairs = list(_pairs(dense.shape[0], n_pairs)) if dense.shape[0] >= 2 else []
    if not pairs:
        return 1.0
    p = _scale_of(dense, pairs)
    return _median_or_fallback([pair_distance(dense[i] / p, dense[j] / p) for i, j in pairs], p)


def _l1(a, b):
    total = 0.0
    for k in range(a.shape[0]):
        total += abs(float(a[k]) - float(b[k]))
    return total


def _l2(a, b):
    total = 0.0
    for k in range(a.shape[0]):
        diff = float(a[k]) - float(b[k])
        total += diff * diff
    return np.sqrt(total)


def median_l1_distance(X, n_pairs=N_PAIRS, sample_weight=None):
    return _median_pair_distance(X, n_pairs, _l1, sample_weight)


L2_FACTOR = 0.35


def median_l2_distance(X, n_pairs=N_PAIRS, sample_weight=None):
    return _median_pair_distance(X, n_pairs, _l2, sample_weight)


def scale_sigma_l2(X, factor=L2_FACTOR, sample_weight=None):
    return float(factor) * median_l2_distance(X, sample_weight=sample_weight)


def scale_sigma(X, factor=DEFAULT_FACTOR, sample_weight=None):
    return float(factor) * median_l1_distance(X, sample_weight=sample_weight)
