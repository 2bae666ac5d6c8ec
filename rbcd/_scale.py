"""The data-derived kernel bandwidth, ``sigma="scale"`` (the spirit of scikit-learn's
``gamma="scale"``), shared by every rbcd estimator with a Laplacian or Gaussian bandwidth.

The Laplacian kernel k(x, y) = exp(-||x - y||_1 / sigma) measures distance in L1, which grows
with the number of features d. A fixed default such as sigma = 1 leaves almost every training
row alone in its bins on data whose L1 scale is far from 1, and then the model memorises the
training set. The rule here ties sigma to the data:

    sigma_ = factor * median_{sampled pairs i != j} ||x_i - x_j||_1

Contract (rbcd_ref/_scale.py computes the same value with the same pairs):

* The pairs are ``n_pairs`` draws (i, j) from ``numpy.random.default_rng(PAIR_SEED)``:
  ``i = integers(0, N, n)``, ``j = (i + integers(1, N, n)) % N``, so i != j. The stream is
  fixed and separate from ``random_state``: the grids' stream (docs/design.md contract 2) is not
  touched, and sigma_ is the same for every seed, so changing ``random_state`` only redraws
  the grids.
* Each distance is summed in float64 over the features in increasing column order, one term
  at a time (a running sum, as the twin writes it; not numpy's pairwise sum), so that sigma_
  and hence the grids are bit-for-bit those of rbcd_ref. An implicit zero of sparse X is the
  value 0 and adds nothing.
* A median of 0 (more than half the sampled pairs are duplicates) falls back to the mean of
  the non-zero sampled distances; if every sampled distance is 0 (constant data), or N < 2,
  the distance scale is 1.0.
* Huge or tiny data: where the sampled rows' largest magnitude lies outside
  [2^-400, 2^400], the distances are those of the rows divided by p, the power of two that
  brings it into [1, 2), times p (exact: each difference and running sum scales by p bit
  for bit), so they neither overflow to inf nor underflow to 0.
* With ``sample_weight`` the pairs are drawn over weight units instead of rows: row i
  holds q_i consecutive units (q = the weights where they are all integers, else
  round(w * 2^20 / max w)), the same two draws pick units a and b != a of M = sum q, and
  each is mapped to the row that holds it. So the scale is that of the data with row i
  repeated q_i times, bit for bit (scikit-learn's meaning of integer weights), a row of
  weight 0 is never drawn (its removal, bit for bit), and weights of all ones draw the
  unweighted pairs. Two units of one row are a pair at distance 0, as two copies are.

The Gaussian kernel exp(-||x - y||_2^2 / (2 sigma^2)) measures distance in L2; its rule is the
same with the L2 distance (:func:`median_l2_distance`, :func:`scale_sigma_l2`): the same pairs,
each squared difference added in increasing column order by a running sum, then one square
root. Its default factor, 0.35, is below scikit-learn's ``gamma="scale"`` (which corresponds to
about 0.5 times the median L2 distance of standardized data); it is the value used by
DoublyStochasticKernelClassifier (docs/benchmarks/related.md shows the measurements).
"""
import functools
import numbers

import numpy as np
import scipy.sparse as sp

PAIR_SEED = 0x5CA1E  # the pair stream's fixed seed
N_PAIRS = 2000  # sampled pairs: the median's relative standard error is about 3%
WEIGHT_UNITS = 1 << 20  # units of the heaviest row where the weights are not all integers
#: sigma = DEFAULT_FACTOR * median L1 distance (the default of sigma="scale"). Chosen on the
#: real-data suite (docs/benchmarks/realdata.md): with the ridge/CG models at n_grids=256
#: and alpha 0.1 or 1e-4 per row, 0.5 had the smallest mean shortfall against the best peer
#: over the sets, with 0.35 to 1 close; single sets preferred anything from 0.25 to 3, which is what
#: RBClassifierCV / RBRegressorCV search around it. Keep rbcd_ref/_scale.py equal.
DEFAULT_FACTOR = 0.5


def _check_data(X):
    """X as a 2-D float64 array or scipy sparse matrix with at least one row and one
    column and only finite values, else ValueError (the public helpers are called on
    raw data; a NaN would make every distance NaN and the fallback return 1.0)."""
    if not sp.issparse(X):
        X = np.asarray(X)
        if X.dtype.kind == "c":      # float64 would drop the imaginary part (a warning only)
            raise ValueError("X must be real: complex data has no L1 distance scale here")
        X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a 2-D array with at least one row and one column, got "
                         f"shape {X.shape}")
    values = X.data if sp.issparse(X) else X
    if not np.all(np.isfinite(values)):
        raise ValueError("X contains NaN or infinity: the distance scale of such data is "
                         "undefined")
    return X


def median_l1_distance(X, n_pairs=N_PAIRS, sample_weight=None):
    """Median L1 distance ||x_i - x_j||_1 of ``n_pairs`` sampled pairs of distinct rows
    of X: the distance scale of the Laplacian estimators' ``sigma="scale"`` (sigma_ is
    0.5 times this).

    The pairs come from a fixed random stream of their own, not from any ``random_state``:
    ``rng = numpy.random.default_rng(0x5CA1E)``, ``i = rng.integers(0, N, n_pairs)``,
    ``j = (i + rng.integers(1, N, n_pairs)) % N`` (so i != j): the same pairs for every
    call with the same N and n_pairs. Each distance is summed in float64 over the
    features in column order (an implicit zero of sparse X counts as 0). If the median is
    0 (more than half the pairs are duplicate rows) the mean of the non-zero distances is
    returned instead, and 1.0 if every sampled distance is 0 or there is no pair. Where
    the sampled rows' largest magnitude lies outside [2^-400, 2^400], the rows are scaled
    by a power of two first (exactly, and the distances scaled back), so that the
    distances neither overflow nor underflow (module docstring).

    Parameters
    ----------
    X : (N, d) array-like or scipy sparse matrix
        The rows; at least one row and one column, finite real values (else ValueError).
    n_pairs : int >= 1, default 2000
        Sampled pairs; with 2,000 the median's relative standard error is about 3%.
    sample_weight : (N,) non-negative weights with a positive sum, or None
        The pairs are drawn over units of weight instead of rows: row i holds q_i units
        (the weights where they are all integers, else round(w_i * 2^20 / max w)) and
        the same draws pick two different units, each mapped to its row. Integer weights
        thus give the value of the data with each row repeated w_i times, and a row of
        weight 0 is never drawn (as if removed); weights of all ones give the unweighted
        value. Two units of one row form a pair at distance 0, as two copies would.

    Returns
    -------
    distance : float > 0
        The median sampled distance (or the fallbacks above: 1.0 for a single row or a
        single unit of weight, and for constant data).
    """
    if isinstance(n_pairs, (bool, np.bool_)) or not isinstance(n_pairs, numbers.Integral) \
            or n_pairs < 1:
        raise ValueError(f"n_pairs must be a positive integer, got {n_pairs!r}")
    n_pairs = int(n_pairs)
    X = _check_data(X)
    pairs = _pairs_for(X.shape[0], n_pairs, sample_weight)
    if pairs is None:
        return 1.0
    if not sp.issparse(X):
        from .binning._binning import pair_l1  # (compiled; imported here: no import cycle)

        # the running sums of cumsum(abs(X[i] - X[j]), axis=1)[:, -1], bit for bit, and
        # the sampled rows' largest magnitude in the same pass: X as it is unless that is
        # out of range (_in_range, below)
        X = np.ascontiguousarray(X, dtype=np.float64)
        dist, m = pair_l1(X, *pairs)
        if _pow2_for(m) == 1.0:
            return _robust_median(dist, 1.0)
    X, i, j, scale = _in_range(X, *pairs)
    if sp.issparse(X):
        dist = sparse_pair_l1(X, i, j)
    else:
        from .binning._binning import pair_l1

        dist = pair_l1(np.ascontiguousarray(X, dtype=np.float64), i, j)[0]
    return _robust_median(dist, scale)


def sparse_pair_l1(X, i, j):
    """L1 distances of the pairs of rows (X[i[p]], X[j[p]]) of sparse X: each the running
    sum of the pair's stored differences in column order, which is the dense running sum
    bit for bit (an implicit zero adds an exact 0)."""
    diff = sp.csr_matrix(X, dtype=np.float64)[i] - sp.csr_matrix(X, dtype=np.float64)[j]
    diff.sort_indices()
    dist = np.zeros(len(i))
    for p in range(len(i)):
        terms = np.abs(diff.data[diff.indptr[p]:diff.indptr[p + 1]])
        if terms.shape[0]:
            dist[p] = np.cumsum(terms)[-1]  # a running sum in column order
    return dist


#: sampled rows whose largest magnitude lies outside [2**-SAFE_EXP, 2**SAFE_EXP] are scaled
SAFE_EXP = 400


def _in_range(X, i, j):
    """(X', i', j', p): X and the pairs as given with p = 1 where the sampled rows' largest
    magnitude lies within [2^-SAFE_EXP, 2^SAFE_EXP] (or is 0); else the sampled rows
    divided by p, the power of two that brings it into [1, 2), and the pairs re-indexed
    into them (module doc)."""
    rows = np.unique(np.concatenate([i, j]))
    sub = (sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else X)[rows]
    p = range_scale(sub.data if sp.issparse(sub) else sub)
    if p == 1.0:
        return X, i, j, 1.0
    return sub / p, np.searchsorted(rows, i), np.searchsorted(rows, j), p


def range_scale(values):
    """_in_range's power of two for the sampled rows' values: 1.0 where their largest
    magnitude lies within [2^-SAFE_EXP, 2^SAFE_EXP] (or is 0), else the power of two that
    brings it into [1, 2)."""
    return _pow2_for(float(np.max(np.abs(values))) if values.size else 0.0)


def _pow2_for(m):
    """range_scale of values whose largest magnitude is m."""
    if m == 0.0 or 2.0 ** -SAFE_EXP <= m <= 2.0 ** SAFE_EXP:
        return 1.0
    return float(np.ldexp(1.0, int(np.frexp(m)[1]) - 1))


@functools.lru_cache(maxsize=16)
def _sampled_pairs(n, n_pairs):
    """The pairs (i, j) for N = n rows (read-only arrays, cached: the stream is fixed, and
    drawing it costs as much as the distances of a small X)."""
    rng = np.random.default_rng(PAIR_SEED)
    i = rng.integers(0, n, size=n_pairs)
    j = (i + rng.integers(1, n, size=n_pairs)) % n
    i.flags.writeable = False
    j.flags.writeable = False
    return i, j


def _pairs_for(n, n_pairs, sample_weight=None):
    """The pairs (i, j) of n rows, drawn over the units of ``sample_weight`` when given
    (module doc); None where there is no pair (fewer than two rows or units)."""
    if sample_weight is None:
        return _sampled_pairs(n, n_pairs) if n >= 2 else None
    q = weight_units(sample_weight, n)
    ends = np.cumsum(q)                       # row r holds units ends[r] - q[r] .. ends[r] - 1
    m = int(ends[-1])
    if m < 2:
        return None
    rng = np.random.default_rng(PAIR_SEED)
    a = rng.integers(0, m, size=n_pairs)
    b = (a + rng.integers(1, m, size=n_pairs)) % m
    return np.searchsorted(ends, a, side="right"), np.searchsorted(ends, b, side="right")


def weight_units(sample_weight, n):
    """Each row's units of weight (int64), by :func:`units_factor`. ValueError for weights
    that are not n finite non-negative numbers with a positive, finite sum
    (rbcd._validation.check_sample_weight)."""
    from ._validation import check_sample_weight

    w = check_sample_weight(sample_weight, n)
    factor = units_factor(bool(np.all(w == np.floor(w))), float(w.sum()), float(w.max()))
    return (w if factor is None else np.rint(w * factor)).astype(np.int64)


def units_factor(integral, total, largest):
    """The weights' units (module doc): None where they are all integers summing to at
    most 2^53 (the units are the weights), else the factor WEIGHT_UNITS / max w."""
    return None if integral and total <= 2.0 ** 53 else WEIGHT_UNITS / largest


def _robust_median(dist, scale=1.0):
    """The median of the distances, times ``scale`` (the power of two they were computed
    down by, _in_range); the module doc's fallbacks (1.0 is not scaled). A ValueError
    where the scaled result passes the float64 range (values of X near its limit)."""
    med = float(np.median(dist))
    if med > 0 and np.isfinite(med):
        return _finite_distance(med * scale)
    nz = dist[dist > 0]
    if nz.shape[0] and np.isfinite(nz.mean()):
        return _finite_distance(float(nz.mean()) * scale)
    return 1.0


def _finite_distance(d):
    if not np.isfinite(d):
        # (a bandwidth of inf would bin every row alike; said here, where it arises)
        raise ValueError("X's values are too large: the median distance between its rows "
                         "is beyond the float64 range, so no kernel bandwidth (sigma) can "
                         "be taken from it; scale the features first (e.g. "
                         "sklearn.preprocessing.StandardScaler or RobustScaler)")
    return d


def median_l2_distance(X, n_pairs=N_PAIRS, sample_weight=None):
    """Median L2 distance of the same ``n_pairs`` sampled pairs as :func:`median_l1_distance`
    (``sample_weight`` as there).

    Each squared distance is a running sum over the features in increasing column order
    (an implicit zero of sparse X adds nothing), then one square root; the same fallbacks
    and the same ValueError for empty or non-finite X.
    """
    X = _check_data(X)
    pairs = _pairs_for(X.shape[0], n_pairs, sample_weight)
    if pairs is None:
        return 1.0
    X, i, j, scale = _in_range(X, *pairs)
    dist = np.zeros(n_pairs)
    if sp.issparse(X):
        diff = sp.csr_matrix(X, dtype=np.float64)[i] - sp.csr_matrix(X, dtype=np.float64)[j]
        diff.sort_indices()
        for p in range(n_pairs):
            terms = diff.data[diff.indptr[p]:diff.indptr[p + 1]]
            if terms.shape[0]:
                dist[p] = np.cumsum(terms * terms)[-1]  # a running sum in column order
    else:
        Xd = np.asarray(X, dtype=np.float64)
        step = max(1, (1 << 20) // max(1, Xd.shape[1]))  # bounded scratch: step x d doubles
        for s in range(0, n_pairs, step):
            terms = Xd[i[s:s + step]] - Xd[j[s:s + step]]
            dist[s:s + step] = np.cumsum(terms * terms, axis=1)[:, -1]  # running sum
    return _robust_median(np.sqrt(dist), scale)


#: sigma = L2_FACTOR * median L2 distance (the Gaussian kernel's sigma="scale").
L2_FACTOR = 0.35


def scale_sigma_l2(X, factor=L2_FACTOR, sample_weight=None):
    """sigma for ``sigma="scale"`` with a Gaussian kernel: ``factor`` times :func:`median_l2_distance`."""
    return float(factor) * median_l2_distance(X, sample_weight=sample_weight)


def scale_sigma(X, factor=DEFAULT_FACTOR, sample_weight=None):
    """sigma for ``sigma="scale"``: ``factor`` times :func:`median_l1_distance` of X (the
    pairs drawn by ``sample_weight`` when given)."""
    return float(factor) * median_l1_distance(X, sample_weight=sample_weight)
