"""Random binning features, plain Python (the oracle of ``rbcd.binning.random_binning``).

Rahimi & Recht (2007) random binning, as analysed by Wu et al. (KDD 2016,
/work/shared/seeds/random-binning-kdd2016.txt): each of R random grids cuts every input
dimension j into intervals of width delta[r, j] shifted by u[r, j]; a point's bin vector in
grid r is ``floor((x - u[r]) / delta[r])``. One feature (column) per non-empty bin, value
1/sqrt(R) in the bin the point falls into, so z(x).z(y) = (#grids where x and y share a
bin) / R, an unbiased estimate of the Laplacian kernel exp(-||x - y||_1 / sigma) when
delta ~ Gamma(2, sigma) (pitch density p(delta) = delta k''(delta)).

Everything follows docs/design.md contracts 1-7 and docs/internals.md literally, with plain
loops and Python dicts; it is slow on purpose and easy to read.
"""
import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ._checks import check_finite_matrix, check_int, check_sparse_indices
from ._random import hash_bin_vector, make_generator
from ._scale import scale_sigma

INT64_LOW = -(2.0**63)
INT64_HIGH = 2.0**63  # exclusive


def _check_sigma(sigma, n_features_in):
    """sigma as a float (scalar) or a float64 array of length d, all positive and finite."""
    if isinstance(sigma, (bool, np.bool_)):
        raise ValueError(f"sigma must be a positive number or array, got {sigma!r}")
    arr = np.asarray(sigma)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"sigma must be a positive number or array, got {sigma!r}")
    arr = arr.astype(np.float64)
    if arr.ndim == 0:
        value = float(arr)
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"sigma must be positive and finite, got {value}")
        return value
    if arr.ndim != 1 or arr.shape[0] != n_features_in:
        raise ValueError(
            f"sigma must be a scalar or an array of length n_features_in_={n_features_in}, "
            f"got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr) & (arr > 0)):
        raise ValueError(f"sigma must be positive and finite in every entry, got {arr}")
    return arr


def check_bins_in_range(X, widths, offsets):
    """Bin vectors of every row of X in every grid (docs/design.md contract 3).

    ``floor((x_j - offsets[r, j]) / widths[r, j])`` in float64 with a true division, then a
    range check against [-2**63, 2**63) before the conversion to int64. An out-of-range (or
    infinite) bin is a ValueError naming the first offending row, then column, over all grids.
    Returns the list of int64 bin matrices (N x d), one per grid.
    """
    n_grids = widths.shape[0]
    first_bad = None
    all_bins = []
    for r in range(n_grids):
        with np.errstate(over="ignore"):  # overflow to inf is caught by the range check
            B = np.floor((X - offsets[r]) / widths[r])
        ok = (B >= INT64_LOW) & (B < INT64_HIGH)
        if not np.all(ok):
            bad = np.argwhere(~ok)[0]
            cand = (int(bad[0]), int(bad[1]), r, B[bad[0], bad[1]])
            if first_bad is None or cand[:2] < first_bad[:2]:
                first_bad = cand
            all_bins.append(None)
        else:
            all_bins.append(B.astype(np.int64))
    if first_bad is not None:
        i, j, r, value = first_bad
        raise ValueError(
            f"X values too large to bin at row {i}, column {j} "
            f"(grid {r}: bin {float(value)!r} does not fit in int64)"
        )
    return all_bins


def index_dtype(n_columns, nnz):
    """int32 for both CSR index arrays unless the column count or nnz needs int64."""
    if n_columns >= 2**31 or nnz >= 2**31:
        return np.int64
    return np.int32


def build_csr(rows, n_columns, n_grids, dtype):
    """CSR matrix from per-row lists of (column, multiplicity), by count -> cumsum -> fill.

    ``rows[i]`` is a list of (column, k) pairs with distinct, sorted columns; the stored value
    is k / sqrt(n_grids) computed in float64, then cast to ``dtype`` (k = 1 except after
    hashed-mode collisions). O(nnz) beyond the per-row sorting done by the caller.
    """
    n_rows = len(rows)
    counts = np.zeros(n_rows, dtype=np.int64)  # count
    for i, entries in enumerate(rows):
        counts[i] = len(entries)
    nnz = int(counts.sum())
    idx_dtype = index_dtype(n_columns, nnz)
    indptr = np.zeros(n_rows + 1, dtype=idx_dtype)  # cumsum
    indptr[1:] = np.cumsum(counts)
    indices = np.empty(nnz, dtype=idx_dtype)  # fill
    data = np.empty(nnz, dtype=dtype)
    sqrt_r = np.sqrt(np.float64(n_grids))
    pos = 0
    for entries in rows:
        for col, k in entries:
            indices[pos] = col
            data[pos] = np.float64(k) / sqrt_r
            pos += 1
    Z = sp.csr_matrix((data, indices, indptr), shape=(n_rows, n_columns))
    Z.has_sorted_indices = True
    return Z


def column_structure(Z, grid_ptr=None):
    """The CSC view of Z that the solvers walk: (column indptr, row indices), plain Python.

    Count -> cumsum -> fill over the CSR rows in increasing row order, so the rows of every
    column come out sorted (the order in which the solvers sum gradients, docs/internals.md).
    With ``grid_ptr`` (R + 1 column boundaries) it also checks the grid structure that the
    grid-block solver relies on: ``grid_ptr`` runs from 0 to D, non-decreasing, and every row
    has at most one entry in each grid (so the bins of one grid touch disjoint rows).
    """
    Z = sp.csr_matrix(Z)
    Z.sum_duplicates()
    n_rows, n_cols = Z.shape
    counts = np.zeros(n_cols, dtype=np.int64)
    for i in range(n_rows):
        for k in range(Z.indptr[i], Z.indptr[i + 1]):
            counts[Z.indices[k]] += 1
    col_ptr = np.zeros(n_cols + 1, dtype=np.int64)
    col_ptr[1:] = np.cumsum(counts)
    row_ind = np.empty(int(col_ptr[-1]), dtype=np.int64)
    fill = col_ptr[:-1].copy()
    for i in range(n_rows):
        for k in range(Z.indptr[i], Z.indptr[i + 1]):
            j = Z.indices[k]
            row_ind[fill[j]] = i
            fill[j] += 1
    if grid_ptr is not None:
        check_grid_structure(Z, grid_ptr)
    return col_ptr, row_ind


def check_grid_structure(Z, grid_ptr):
    """Validate ``grid_ptr`` against Z and check at most one entry per row per grid.

    Returns ``grid_ptr`` as an int64 array. Raises ValueError naming the row and grid that
    break the structure.
    """
    gp = np.asarray(grid_ptr)
    if gp.ndim != 1 or gp.shape[0] < 2 or gp.dtype.kind not in "iu":
        raise ValueError(f"grid_ptr must be a 1-D integer array of length R + 1 >= 2, got {grid_ptr!r}")
    gp = gp.astype(np.int64)
    n_cols = Z.shape[1]
    if gp[0] != 0 or gp[-1] != n_cols or np.any(np.diff(gp) < 0):
        raise ValueError(
            f"grid_ptr must be non-decreasing from 0 to the number of columns {n_cols}, "
            f"got first {int(gp[0])} and last {int(gp[-1])}"
        )
    Z = sp.csr_matrix(Z)
    for i in range(Z.shape[0]):
        cols = Z.indices[Z.indptr[i]:Z.indptr[i + 1]]
        grids = np.searchsorted(gp, cols, side="right") - 1
        seen = set()
        for r in grids:
            r = int(r)
            if r in seen:
                raise ValueError(
                    f"row {i} has more than one entry in grid {r}: not a random binning "
                    f"grid structure (parallel='grid' needs at most one entry per row per grid)"
                )
            seen.add(r)
    return gp


class RandomBinning(TransformerMixin, BaseEstimator):
    """Random binning features for the Laplacian kernel exp(-||x - y||_1 / sigma).

    Parameters
    ----------
    n_grids : int, default=64
        R, the number of random grids; every training row gets exactly R non-zeros.
    sigma : "scale", float or array of shape (n_features_in_,), default="scale"
        Kernel bandwidth, one per input feature if an array. "scale": ``scale_sigma(X)`` of
        ``rbcd_ref._scale`` (a multiple of the median L1 distance of sampled row pairs).
    kernel : {"laplacian"}, default="laplacian"
        The only kernel: delta ~ Gamma(shape 2, scale sigma).
    n_features : int or None, default=None
        None: exact mode, one column per distinct non-empty bin of each grid (contract 4).
        m: hashed mode, column = documented 64-bit hash of (r, bin vector) mod m (contract 5).
    dtype : float dtype, default=numpy.float64
        dtype of the output values 1/sqrt(R). Binning always runs in float64.
    n_jobs : int or None
        Accepted for API parity with rbcd and ignored: the twin is serial.
    random_state : None, int, SeedSequence, Generator or RandomState
        Seeds the grid draw (``make_generator``).

    Attributes
    ----------
    widths_, offsets_ : ndarray (n_grids, n_features_in_)
        delta[r, j] ~ Gamma(2, sigma_j) and u[r, j] ~ Uniform(0, delta[r, j]).
    n_bins_ : int64 ndarray (n_grids,)
        Non-empty bins of each grid on the training data.
    grid_ptr_ : int64 ndarray (n_grids + 1,)
        Column boundaries of the grids, ``concatenate([[0], cumsum(n_bins_)])`` (exact mode;
        None in hashed mode, where grids share columns).
    n_features_out_ : int
        D, the number of columns of Z (= m in hashed mode).
    kappa_per_grid_ : ndarray (n_grids,)
        kappa_r = 1 / nu_r, nu_r = (largest bin count) / N (paper, Definition 1).
    kappa_ : float
        Mean of ``kappa_per_grid_``.
    sigma_ : float or ndarray (n_features_in_,)
        The numeric sigma used (what "scale" gave, or the given value as float64).
    bin_tables_ : list of dict or None
        Exact mode: per grid, bin vector (tuple of ints) -> local column id. No training data
        is kept beyond these tables.
    """

    def __init__(self, n_grids=64, sigma="scale", kernel="laplacian", n_features=None,
                 dtype=np.float64, n_jobs=None, random_state=None):
        self.n_grids = n_grids
        self.sigma = sigma
        self.kernel = kernel
        self.n_features = n_features
        self.dtype = dtype
        self.n_jobs = n_jobs
        self.random_state = random_state

    # ------------------------------------------------------------------ checks
    def _check_params(self, X, sample_weight=None):
        n_features_in = X.shape[1]
        n_grids = check_int(self.n_grids, "n_grids", low=1)
        if not (isinstance(self.kernel, str) and self.kernel == "laplacian"):
            raise ValueError(f"kernel must be 'laplacian' (the only supported kernel), got {self.kernel!r}")
        if self.n_features is not None:
            check_int(self.n_features, "n_features", low=1)
        try:
            dtype = np.dtype(self.dtype)
        except TypeError as exc:
            raise ValueError(f"dtype must be a floating dtype, got {self.dtype!r}") from exc
        if dtype.kind != "f":
            raise ValueError(f"dtype must be a floating dtype (float32 or float64), got {dtype}")
        if self.n_jobs is not None:
            check_int(self.n_jobs, "n_jobs")
            if self.n_jobs == 0:
                raise ValueError("n_jobs must be a non-zero integer or None, got 0")
        if isinstance(self.sigma, str) and self.sigma == "scale":
            sigma = scale_sigma(X, sample_weight=sample_weight)
        else:
            sigma = _check_sigma(self.sigma, n_features_in)
        return n_grids, sigma, dtype

    def _validate_X(self, X, reset):
        X = validate_data(self, check_sparse_indices(X), reset=reset, accept_sparse=["csr", "csc", "coo"],
                          dtype=np.float64, ensure_all_finite=False)
        if sp.issparse(X):
            X = X.toarray()
        X = np.ascontiguousarray(X, dtype=np.float64)
        check_finite_matrix(X, "X")
        return X

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, sample_weight=None):
        """Draw the grids (contract 2) and build the per-grid bin tables (contract 4).
        sample_weight: for sigma="scale" only (its pairs drawn by weight, rbcd_ref._scale)."""
        self._fit(X, sample_weight)
        return self

    def _fit(self, X, sample_weight=None):
        X = self._validate_X(X, reset=True)
        n_samples, d = X.shape
        n_grids, sigma, dtype = self._check_params(X, sample_weight)

        rng = make_generator(self.random_state)
        widths = rng.gamma(2.0, sigma, size=(n_grids, d))
        offsets = rng.uniform(0.0, 1.0, size=(n_grids, d)) * widths

        all_bins = check_bins_in_range(X, widths, offsets)

        tables = []
        n_bins = np.zeros(n_grids, dtype=np.int64)
        max_count = np.zeros(n_grids, dtype=np.int64)
        local_ids = []  # per grid, the local id of every training row (exact mode)
        for r in range(n_grids):
            B = all_bins[r]
            table = {}
            counts = []
            ids = np.empty(n_samples, dtype=np.int64)
            for i in range(n_samples):
                key = tuple(int(b) for b in B[i])
                local = table.get(key)
                if local is None:  # first appearance: next local number
                    local = len(table)
                    table[key] = local
                    counts.append(0)
                counts[local] += 1
                ids[i] = local
            tables.append(table)
            local_ids.append(ids)
            n_bins[r] = len(table)
            max_count[r] = max(counts)

        self.widths_ = widths
        self.offsets_ = offsets
        self.n_bins_ = n_bins
        nu = max_count / n_samples  # paper Definition 1: nu_r = largest bin count / N
        self.kappa_per_grid_ = 1.0 / nu
        self.kappa_ = float(np.mean(self.kappa_per_grid_))
        self.sigma_ = sigma
        if self.n_features is None:
            self.grid_ptr_ = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
            self.n_features_out_ = int(self.grid_ptr_[-1])
            self.bin_tables_ = tables
        else:
            self.grid_ptr_ = None
            self.n_features_out_ = int(self.n_features)
            self.bin_tables_ = None
        self._dtype_ = dtype
        return X, all_bins, local_ids

    # ------------------------------------------------------------------ transform
    def _rows_exact(self, all_bins, n_samples, local_ids=None):
        """Per row, the sorted list of (column, 1): grid r's column is grid_ptr[r] + local id."""
        rows = [[] for _ in range(n_samples)]
        for r in range(len(all_bins)):
            base = int(self.grid_ptr_[r])
            table = self.bin_tables_[r]
            for i in range(n_samples):
                if local_ids is not None:
                    local = int(local_ids[r][i])
                else:
                    local = table.get(tuple(int(b) for b in all_bins[r][i]))
                    if local is None:  # a bin never seen in fit: no entry
                        continue
                rows[i].append((base + local, 1))
        # grids are appended in increasing r and grid_ptr is increasing: already sorted
        return rows

    def _rows_hashed(self, all_bins, n_samples):
        """Per row, the (column, multiplicity) pairs from the documented hash, sorted."""
        m = int(self.n_features_out_)      # the fit's n_features
        rows = []
        for i in range(n_samples):
            counts = {}
            for r in range(len(all_bins)):
                col = hash_bin_vector(r, all_bins[r][i], m)
                counts[col] = counts.get(col, 0) + 1  # collisions within a row are summed
            rows.append(sorted(counts.items()))
        return rows

    def transform(self, X):
        """Z = the CSR feature matrix of X (contract 6)."""
        check_is_fitted(self, "widths_")
        X = self._validate_X(X, reset=False)
        n_grids = self.widths_.shape[0]
        all_bins = check_bins_in_range(X, self.widths_, self.offsets_)
        if self.grid_ptr_ is not None:     # the mode of the fit, not of a later set_params
            rows = self._rows_exact(all_bins, X.shape[0])
        else:
            rows = self._rows_hashed(all_bins, X.shape[0])
        return build_csr(rows, self.n_features_out_, n_grids, self._dtype_)

    def fit_transform(self, X, y=None, sample_weight=None):
        """fit, then the features of the training rows (the same matrix as transform(X))."""
        X, all_bins, local_ids = self._fit(X, sample_weight)
        n_grids = self.widths_.shape[0]
        if self.n_features is None:
            rows = self._rows_exact(all_bins, X.shape[0], local_ids)
        else:
            rows = self._rows_hashed(all_bins, X.shape[0])
        return build_csr(rows, self.n_features_out_, n_grids, self._dtype_)

    # ------------------------------------------------------------------ diagnostics
    def predicted_speedup(self, n_threads):
        """Expected speedup of parallel randomized CD with tau threads (paper eq. 29):

            tau / (1 + (R - 1)(tau - 1) / (D - 1))

        R = n_grids non-zeros per row, D = n_features_out_ columns. With D = 1 there is
        nothing to parallelize and the speedup is 1.
        """
        check_is_fitted(self, "widths_")
        tau = check_int(n_threads, "n_threads", low=1)
        R = self.widths_.shape[0]
        D = self.n_features_out_
        if D <= 1:
            return 1.0
        return tau / (1.0 + (R - 1) * (tau - 1) / (D - 1))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = []
        return tags
