"""sigma="scale" written out plainly: the twin of rbcd/_scale.py (same pairs, same value).

    sigma_ = factor * median over sampled pairs (i, j), i != j, of sum_k |X[i, k] - X[j, k]|

The pairs come from numpy.random.default_rng(PAIR_SEED), independent of random_state:
i = integers(0, N, n_pairs), then j = (i + integers(1, N, n_pairs)) % N. A zero median falls
back to the mean of the non-zero distances, and to 1.0 when there are none or N < 2.

The Gaussian kernel's rule uses the L2 distance of the same pairs: the squared differences
added in column order, one square root, factor L2_FACTOR.
"""
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


def _median_or_fallback(distances):
    """The median; else the mean of the non-zero distances; else 1.0."""
    distances = np.array(distances)
    median = float(np.median(distances))
    if median > 0:
        return median
    nonzero = distances[distances > 0]
    if len(nonzero):
        return float(nonzero.mean())
    return 1.0


def _dense(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)


def median_l1_distance(X, n_pairs=N_PAIRS):
    n = X.shape[0]
    if n < 2:
        return 1.0
    dense = _dense(X)
    distances = []
    for i, j in _pairs(n, n_pairs):
        total = 0.0
        for k in range(dense.shape[1]):
            total += abs(float(dense[i, k]) - float(dense[j, k]))
        distances.append(total)
    return _median_or_fallback(distances)


L2_FACTOR = 0.35


def median_l2_distance(X, n_pairs=N_PAIRS):
    n = X.shape[0]
    if n < 2:
        return 1.0
    dense = _dense(X)
    distances = []
    for i, j in _pairs(n, n_pairs):
        total = 0.0
        for k in range(dense.shape[1]):
            diff = float(dense[i, k]) - float(dense[j, k])
            total += diff * diff
        distances.append(np.sqrt(total))
    return _median_or_fallback(distances)


def scale_sigma_l2(X, factor=L2_FACTOR):
    return float(factor) * median_l2_distance(X)


def scale_sigma(X, factor=DEFAULT_FACTOR):
    return float(factor) * median_l1_distance(X)
