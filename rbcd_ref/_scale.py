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


def _median_pair_distance(X, n_pairs, pair_distance):
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
    n = dense.shape[0]
    if n < 2:
        return 1.0
    return _median_or_fallback([pair_distance(dense[i], dense[j]) for i, j in _pairs(n, n_pairs)])


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


def median_l1_distance(X, n_pairs=N_PAIRS):
    return _median_pair_distance(X, n_pairs, _l1)


L2_FACTOR = 0.35


def median_l2_distance(X, n_pairs=N_PAIRS):
    return _median_pair_distance(X, n_pairs, _l2)


def scale_sigma_l2(X, factor=L2_FACTOR):
    return float(factor) * median_l2_distance(X)


def scale_sigma(X, factor=DEFAULT_FACTOR):
    return float(factor) * median_l1_distance(X)
