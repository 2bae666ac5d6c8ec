"""Synthetic data sets for the demo, the command line tests, the benchmarks and the
reproduction script.

Every generator is deterministic given ``random_state`` (anything
``numpy.random.default_rng`` accepts, or a Generator / RandomState) and returns
``(X, y)`` with ``X`` a C-contiguous float64 array of shape (n_samples, n_features).

- :func:`make_checkerboard`: a d-dimensional checkerboard (parity of the cells of a few
  informative coordinates, the rest pure noise). With the defaults (two informative
  coordinates, an even number of cells) no coordinate on its own says anything about the
  label, so a linear model stays at chance level (~50%), while a
  Laplacian kernel model (random binning's kernel) learns it to well above 90% with enough
  rows. The cell boundaries are axis aligned, like the random grids.
- :func:`make_xor_blobs`: the XOR problem of the doubly stochastic empirical kernel paper
  (four Gaussian blobs; one class around (1, 1) and (-1, -1), the other around (1, -1) and
  (-1, 1)).
- :func:`make_nonlinear_regression`: a smooth nonlinear regression target of a few
  informative coordinates, plus Gaussian noise.
"""
import numbers

import numpy as np

from ._random import make_generator

__all__ = ["make_checkerboard", "make_xor_blobs", "make_nonlinear_regression"]


#: make_checkerboard's largest n_cells: floor(n_cells * x) exact in float64 and int64
MAX_CELLS = 2**53


def _check_positive_int(value, name, minimum=1):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_fraction(value, name, high=1.0):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number in [0, {high}], got {value!r}")
    value = float(value)
    if not (0.0 <= value <= high):
        raise ValueError(f"{name} must be a number in [0, {high}], got {value!r}")
    return value


def _check_nonnegative(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")
    value = float(value)
    if not (np.isfinite(value) and value >= 0.0):
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")
    return value


def make_checkerboard(n_samples=1000, n_features=8, n_informative=2, n_cells=4,
                      flip_y=0.0, random_state=None):
    """A checkerboard binary classification problem in ``n_features`` dimensions.

    X is uniform on [0, 1)^n_features. The first ``n_informative`` coordinates are each cut
    into ``n_cells`` equal cells; the label is the parity of the sum of the cell indices,
    ``y = (sum_j floor(n_cells * x_j)) % 2`` over the informative coordinates (a 2-D
    checkerboard for ``n_informative=2``, an XOR of octants for ``n_informative=3,
    n_cells=2``). The other coordinates are noise. A fraction ``flip_y`` of the labels,
    chosen at random, is then flipped (label noise: the Bayes accuracy is
    ``1 - flip_y``).

    With an even ``n_cells`` and at least two informative coordinates the classes are
    balanced in expectation and no linear function of X does better than chance. (One
    informative coordinate and ``n_cells=2`` is the threshold x_0 >= 0.5, which a linear
    model learns; an odd ``n_cells`` leaves the classes unbalanced, 5/9 : 4/9 for 3 x 3.)

    Parameters
    ----------
    n_samples : int, default=1000
    n_features : int, default=8
        Total number of columns (>= n_informative).
    n_informative : int, default=2
        Coordinates that define the label (>= 1).
    n_cells : int, default=4
        Cells per informative coordinate (>= 2).
    flip_y : float in [0, 0.5], default=0.0
        Fraction of labels flipped after generation.
    random_state : None, int, SeedSequence, Generator or RandomState

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,), int64 in {0, 1}
    """
    n_samples = _check_positive_int(n_samples, "n_samples")
    n_informative = _check_positive_int(n_informative, "n_informative")
    n_features = _check_positive_int(n_features, "n_features")
    n_cells = _check_positive_int(n_cells, "n_cells", minimum=2)
    if n_cells > MAX_CELLS:
        raise ValueError(f"n_cells must be at most 2**53 (the cell index floor(n_cells * x) "
                         f"of a float64 x in [0, 1) is exact only up to it), got {n_cells!r}")
    flip_y = _check_fraction(flip_y, "flip_y", high=0.5)
    if n_features < n_informative:
        raise ValueError(
            f"n_features={n_features} must be >= n_informative={n_informative}"
        )
    rng = make_generator(random_state)
    X = rng.uniform(0.0, 1.0, size=(n_samples, n_features))
    # cells[i, j] = floor(n_cells * X[i, j]) for the informative columns (clipped for safety)
    cells = np.minimum(np.floor(X[:, :n_informative] * n_cells), n_cells - 1).astype(np.int64)
    y = cells.sum(axis=1) % 2
    if flip_y > 0.0:
        n_flip = int(round(flip_y * n_samples))
        flip = rng.choice(n_samples, size=n_flip, replace=False)
        y[flip] = 1 - y[flip]
    return np.ascontiguousarray(X), y.astype(np.int64)


def make_xor_blobs(n_samples=100, std=0.2, random_state=None):
    """The XOR problem of the doubly stochastic empirical kernel learning paper.

    Class 1 is drawn from spherical Gaussians N(c, std^2 I) around c = (1, 1) and
    (-1, -1), class 0 from the same Gaussians around (1, -1) and (-1, 1). The four blobs
    get ``n_samples // 4`` points each, the first ``n_samples % 4`` blobs one more, so
    the classes differ in size by at most one. The rows are shuffled.

    Returns
    -------
    X : ndarray of shape (n_samples, 2), float64
    y : ndarray of shape (n_samples,), int64 in {0, 1}
    """
    n_samples = _check_positive_int(n_samples, "n_samples")
    std = _check_nonnegative(std, "std")
    rng = make_generator(random_state)
    centers = np.array([[1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]])
    labels = np.array([1, 1, 0, 0], dtype=np.int64)
    # blob k gets n // 4 points, plus one for k < n % 4; alternate classes first so
    # the class sizes stay within one of each other
    order = np.array([0, 2, 1, 3])
    sizes = np.full(4, n_samples // 4, dtype=np.int64)
    sizes[order[: n_samples % 4]] += 1
    blob = np.repeat(np.arange(4), sizes)
    X = centers[blob] + std * rng.standard_normal(size=(n_samples, 2))
    y = labels[blob]
    perm = rng.permutation(n_samples)
    return np.ascontiguousarray(X[perm]), y[perm].copy()


def make_nonlinear_regression(n_samples=1000, n_features=8, noise=0.1, random_state=None):
    """A smooth nonlinear regression problem; the first four coordinates are informative.

    X is uniform on [-1, 1)^n_features (n_features >= 4) and

        f(x) = sin(pi x0) + cos(pi x1) * x2 + |x3| - 0.5,
        y = f(x) + noise * N(0, 1).

    The noise-free target has standard deviation about 0.87, so ``noise`` is the floor of
    the test RMSE.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,), float64
    """
    n_samples = _check_positive_int(n_samples, "n_samples")
    n_features = _check_positive_int(n_features, "n_features", minimum=4)
    noise = _check_nonnegative(noise, "noise")
    rng = make_generator(random_state)
    X = rng.uniform(-1.0, 1.0, size=(n_samples, n_features))
    f = (np.sin(np.pi * X[:, 0]) + np.cos(np.pi * X[:, 1]) * X[:, 2]
         + np.abs(X[:, 3]) - 0.5)
    y = f + noise * rng.standard_normal(n_samples)
    return np.ascontiguousarray(X), y
