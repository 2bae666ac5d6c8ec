"""Random Fourier features (Rahimi & Recht 2007, Algorithm 1).

    z(x) = sqrt(2 / D) cos(x W + b),    W: (d, D),  b: (D,)

so that E[z(x) . z(y)] = k(x, y) for a shift-invariant kernel k whose Fourier
transform is the density of the columns of W:

* ``kernel="gaussian"``:  k(x, y) = exp(-||x - y||_2^2 / (2 sigma^2)),
  W[j, k] ~ N(0, 1 / sigma_j^2)   (scikit-learn's RBFSampler with gamma = 1 / (2 sigma^2)).
* ``kernel="laplacian"``: k(x, y) = exp(-||x - y||_1 / sigma),
  W[j, k] ~ Cauchy(0, 1 / sigma_j), i.i.d. per coordinate (the 1-D Laplacian
  exp(-|t| / s) has Fourier transform (s / pi) / (1 + s^2 w^2)).

``sigma`` is a positive scalar, one positive value per input feature (sigma_j), or "scale"
(the default): the shared data-derived bandwidth of rbcd._scale, computed on the rows given to
fit, 0.5 times the median L2 distance for the Gaussian kernel (scikit-learn's
``gamma="scale"`` on standardized data: 1 / (2 sigma^2) = 1 / (d Var X) when the median squared
distance is 2 d Var X) and 0.5 times the median L1 distance for the Laplacian (RandomBinning's
rule).

Draw order (the rbcd_ref twin repeats it), from ``rng = make_generator(random_state)``:

    W = rng.standard_normal((d, D)) / sigma[:, None]      # gaussian
    W = rng.standard_cauchy((d, D)) / sigma[:, None]      # laplacian
    b = rng.uniform(0.0, 2 * pi, size=D)

Transform: ``P = X @ W`` by BLAS (numpy / scipy.sparse) in X's dtype, then a
parallel Cython pass ``P = sqrt(2/D) cos(float64(P) + b)`` over rows. float32 input
gives float32 output (the product in float32, the cosine in float64); anything
else is computed in float64.
"""
import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from sklearn.utils._param_validation import StrOptions

from ._fourier import cos_features
from .._random import make_generator
from .._scale import scale_sigma, scale_sigma_l2
from .._threads import effective_n_threads
from .._validation import (N_JOBS, POSITIVE_INT, RANDOM_STATE, SIGMA, check_sigma,
                           check_sparse_structure, fit_context)

KERNELS = ("gaussian", "laplacian")
#: sigma="scale" with the Gaussian kernel: this factor times the median L2 distance.
GAUSSIAN_FACTOR = 0.5


def resolve_sigma(sigma, X, kernel):
    """sigma_ as a float64 array (n_features,): "scale" is the shared rule (module docstring).
    A ValueError where 1 / sigma overflows (the frequencies W / sigma would be inf and
    every feature NaN): a sigma that small, given or taken from tiny data, names itself."""
    if isinstance(sigma, str):
        value = scale_sigma_l2(X, GAUSSIAN_FACTOR) if kernel == "gaussian" else scale_sigma(X)
        s = np.full(X.shape[1], value)
    else:
        s = check_sigma(sigma, X.shape[1])
        s = np.full(X.shape[1], s) if np.ndim(s) == 0 else s
    return refuse_tiny_sigma(s, sigma)


def refuse_tiny_sigma(s, param):
    """``s`` (sigma_, a float or an array), or a ValueError where 1 / sigma overflows:
    random features divide by sigma, and inf frequencies make every feature NaN.
    ``param``: the sigma parameter (the message says whether it was "scale")."""
    with np.errstate(over="ignore", divide="ignore"):
        tiny = ~np.isfinite(1.0 / np.atleast_1d(s))
    if tiny.any():
        given = "sigma='scale' took it from the data's distances" if isinstance(param, str) \
            else "sigma was given so"
        raise ValueError(f"sigma is too small: 1 / sigma overflows float64 (sigma = "
                         f"{float(np.atleast_1d(s)[tiny][0])!r}; {given}); scale the features "
                         f"up (e.g. sklearn.preprocessing.StandardScaler) or give a larger sigma")
    return s


def draw_fourier(rng, n_features, n_components, kernel, sigma):
    """(W, b): W (n_features, n_components), b (n_components,), in the documented order."""
    if kernel == "gaussian":
        W = rng.standard_normal((n_features, n_components))
    else:
        W = rng.standard_cauchy((n_features, n_components))
    W /= sigma[:, None]
    b = rng.uniform(0.0, 2.0 * np.pi, size=n_components)
    return W, b


# Below this many cosines per thread, a second thread costs more than it saves.
MIN_WORK_PER_THREAD = 50_000


def fourier_map(X, W, b, scale, n_threads):
    """``scale * cos(X @ W + b)``: BLAS product in X's dtype, parallel cosine pass."""
    dtype = np.float32 if X.dtype == np.float32 else np.float64
    Wd = W.astype(dtype, copy=False)
    P = X @ Wd
    if sp.issparse(P):  # a sparse X times a dense W is dense, but be safe
        P = P.toarray()
    P = np.ascontiguousarray(P, dtype=dtype)
    if P.shape[0] > 0 and P.shape[1] > 0:
        n_threads = max(1, min(int(n_threads), P.size // MIN_WORK_PER_THREAD))
        cos_features(P, np.ascontiguousarray(b, dtype=np.float64), float(scale), n_threads)
    return P


class RandomFourier(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Random Fourier features for the Gaussian or the Laplacian kernel.

    Parameters
    ----------
    n_components : int, default=256
        Number of features D.
    kernel : {"gaussian", "laplacian"}, default="gaussian"
        ``gaussian``: exp(-||x - y||^2 / (2 sigma^2)); ``laplacian``: exp(-||x - y||_1 / sigma).
    sigma : "scale", float or array of shape (n_features,), default="scale"
        Kernel width, positive (per input feature when an array); "scale" derives it from
        the rows given to fit (module docstring).
    n_jobs : int or None
        Threads of the cosine pass (None: OpenMP default, honours threadpoolctl).
    random_state : None, int, SeedSequence, Generator or RandomState
        Seed of the draw of W and b (see the module docstring for the order).

    Attributes
    ----------
    random_weights_ : ndarray (n_features_in_, n_components)
    random_offset_ : ndarray (n_components,)
    sigma_ : ndarray (n_features_in_,)
    n_features_in_ : int
    """

    _parameter_constraints = {
        "n_components": POSITIVE_INT,
        "kernel": [StrOptions(set(KERNELS))],
        "sigma": SIGMA,
        "n_jobs": N_JOBS,
        "random_state": RANDOM_STATE,
    }

    def __init__(self, n_components=256, kernel="gaussian", sigma="scale", n_jobs=None, random_state=None):
        self.n_components = n_components
        self.kernel = kernel
        self.sigma = sigma
        self.n_jobs = n_jobs
        self.random_state = random_state

    @fit_context
    def fit(self, X, y=None):
        """Draw W and b for the number of columns of X (X sets sigma_ when sigma="scale")."""
        D, kernel = self.n_components, self.kernel
        effective_n_threads(self.n_jobs)
        check_sparse_structure(X)   # before scipy reads its index arrays
        X = validate_data(self, X, accept_sparse=("csr", "csc"), dtype=(np.float64, np.float32))
        sigma = resolve_sigma(self.sigma, X, kernel)
        rng = make_generator(self.random_state)
        self.random_weights_, self.random_offset_ = draw_fourier(rng, X.shape[1], D, kernel, sigma)
        self.sigma_ = sigma
        self._n_features_out = D
        return self

    def transform(self, X):
        """z(X) = sqrt(2 / D) cos(X W + b), dense (n_samples, n_components)."""
        check_is_fitted(self)
        check_sparse_structure(X)   # before scipy reads its index arrays
        X = validate_data(self, X, accept_sparse=("csr", "csc"), dtype=(np.float64, np.float32), reset=False)
        n_threads = effective_n_threads(self.n_jobs)
        D = self.random_weights_.shape[1]
        return fourier_map(X, self.random_weights_, self.random_offset_, np.sqrt(2.0 / D), n_threads)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
