"""Random Fourier features, plain numpy (the twin of rbcd.related.fourier).

    z(x) = sqrt(2 / D) cos(x W + b)

* gaussian:  k(x, y) = exp(-||x - y||_2^2 / (2 sigma^2)),  W[j, k] ~ N(0, 1 / sigma_j^2)
* laplacian: k(x, y) = exp(-||x - y||_1 / sigma),          W[j, k] ~ Cauchy(0, 1 / sigma_j)

Draw order from ``rng = make_generator(random_state)``: W first
(``standard_normal`` or ``standard_cauchy`` of shape (d, D), divided by sigma per
row), then ``b = rng.uniform(0, 2 pi, D)``. The product X @ W is taken in X's
dtype (float32 stays float32), the cosine in float64, the result cast back.
"""
import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._checks import check_choice, check_int, check_sparse_indices
from .._random import make_generator
from .._scale import DEFAULT_FACTOR, median_l1_distance, median_l2_distance


def check_n_jobs(n_jobs):
    """n_jobs: None or a non-zero integer (the twin is serial; the value is only checked)."""
    if n_jobs is not None:
        if isinstance(n_jobs, (bool, np.bool_)) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0:
            raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")


def check_sigma(sigma, n_features):
    """``sigma`` as a float64 array of length ``n_features``, every entry finite and > 0."""
    if isinstance(sigma, (bool, np.bool_)):
        raise ValueError(f"sigma must be a positive number or array, got {sigma!r}")
    try:
        s = np.asarray(sigma, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"sigma must be a positive number or array, got {sigma!r}") from None
    if s.ndim == 0:
        s = np.full(n_features, float(s))
    elif s.ndim != 1 or s.shape[0] != n_features:
        raise ValueError(
            f"sigma must be a scalar or have one entry per feature ({n_features}), got shape {s.shape}"
        )
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"sigma must be finite and > 0, got {sigma!r}")
    return s


def resolve_sigma(sigma, X, kernel):
    """"scale": 0.5 times the median L2 distance (gaussian) or DEFAULT_FACTOR times the median
    L1 distance (laplacian) of rbcd_ref._scale's pairs, one value per feature; else
    check_sigma."""
    if isinstance(sigma, str) and sigma == "scale":
        if kernel == "gaussian":
            return np.full(X.shape[1], 0.5 * median_l2_distance(X))
        return np.full(X.shape[1], DEFAULT_FACTOR * median_l1_distance(X))
    return check_sigma(sigma, X.shape[1])


def draw_fourier(rng, n_features, n_components, kernel, sigma):
    """W (d, D) then b (D,), in this order."""
    if kernel == "gaussian":
        W = rng.standard_normal((n_features, n_components))
    else:
        W = rng.standard_cauchy((n_features, n_components))
    W = W / sigma[:, None]
    b = rng.uniform(0.0, 2.0 * np.pi, size=n_components)
    return W, b


def fourier_map(X, W, b, scale):
    """scale * cos(X @ W + b)."""
    dtype = np.float32 if X.dtype == np.float32 else np.float64
    P = X @ W.astype(dtype)
    if sp.issparse(P):
        P = P.toarray()
    P = np.asarray(P, dtype=dtype)
    Z = scale * np.cos(P.astype(np.float64) + b)
    return Z.astype(dtype)


class RandomFourier(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Random Fourier features (see the module docstring); same API as rbcd.RandomFourier."""

    def __init__(self, n_components=256, kernel="gaussian", sigma="scale", n_jobs=None, random_state=None):
        self.n_components = n_components
        self.kernel = kernel
        self.sigma = sigma
        self.n_jobs = n_jobs
        self.random_state = random_state

    def fit(self, X, y=None):
        D = check_int(self.n_components, "n_components", low=1)
        kernel = check_choice(self.kernel, "kernel", ("gaussian", "laplacian"))
        check_n_jobs(self.n_jobs)
        check_sparse_indices(X)
        X = validate_data(self, X, accept_sparse=("csr", "csc"), dtype=(np.float64, np.float32))
        sigma = resolve_sigma(self.sigma, X, kernel)
        rng = make_generator(self.random_state)
        self.random_weights_, self.random_offset_ = draw_fourier(rng, X.shape[1], D, kernel, sigma)
        self.sigma_ = sigma
        self._n_features_out = D
        return self

    def transform(self, X):
        check_is_fitted(self)
        check_sparse_indices(X)
        X = validate_data(self, X, accept_sparse=("csr", "csc"), dtype=(np.float64, np.float32), reset=False)
        D = self.random_weights_.shape[1]
        return fourier_map(X, self.random_weights_, self.random_offset_, np.sqrt(2.0 / D))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
