"""Shared data, sizes and helpers of the rbcd asv benchmarks.

Data are generated with numpy only (not with ``rbcd.datasets``), so that the same
benchmark measures the same problem on every commit in the history. Anything that changes
the data must bump ``DATA_VERSION``: every benchmark class carries ``version =
DATA_VERSION`` (asv then keys the history on that pin instead of the source text, so
cosmetic edits of a benchmark keep its history; bump the pin, or the class's own suffix,
whenever what a benchmark measures changes).

Caching:

- asv re-runs ``setup`` before every timing sample, so anything expensive that a setup
  needs (a fitted binning of 10^6 rows, say) is kept in a per-process memo
  (:func:`memo`): the first sample pays, later ones only look it up. Timed code never
  mutates memoized objects.
- The big RB matrices (N = 10^6, R = 64, about 0.8 GB) are built once per ``asv run`` by
  the ``setup_cache`` of :class:`RBMatrixLarge` / :class:`RBMatrixMedium` (asv shares one
  ``setup_cache`` between all classes that inherit it: its key is this module and the
  method's line) and handed to each benchmark process as a pickle.

Thread counts are benchmark parameters (1 and 2: the machines this is run on have 2
cores) and are passed as ``n_jobs`` explicitly, never taken from the environment.
"""
import os
import time
import warnings

import numpy as np

#: Bump when any generator or size below changes (see the module docstring).
DATA_VERSION = "1"

#: RBCD_ASV_SMOKE=1 divides every row count by 100 (RBCD_ASV_SMOKE=k > 1: by k): a check
#: that all benchmarks run, in minutes, even while other work loads the machine. Its
#: numbers are not comparable (they carry their own version pin); do not keep them.
_SMOKE_ENV = os.environ.get("RBCD_ASV_SMOKE", "0").strip() or "0"
SMOKE = _SMOKE_ENV != "0"
_SCALE = (int(_SMOKE_ENV) if int(_SMOKE_ENV) > 1 else 100) if SMOKE else 1

# Sizes named in the benchmark issue.
N_LARGE = 10**6 // _SCALE          # rows of the main configuration
N_MEDIUM = 2 * 10**5 // _SCALE     # rows for the CG solves
N_SMALL = 10**5 // _SCALE
N_FEATURES = 16          # d
N_GRIDS = 64             # R
SIGMA = 1.0
THREADS = [1, 2]
CD_MODES = [None, "hogwild", "grid"]

#: Seeds: training data, new data for transform, grids.
SEED_TRAIN, SEED_NEW, SEED_GRIDS = 0, 1, 0

_MEMO = {}


def memo(key, build):
    """``build()`` once per benchmark process, looked up afterwards (setup re-runs)."""
    if key not in _MEMO:
        _MEMO[key] = build()
    return _MEMO[key]


def make_X(n_samples, n_features=N_FEATURES, seed=SEED_TRAIN):
    """Uniform data on [0, 1)^d, C-contiguous float64 (the scale the sigmas refer to).

    With widths ~ Gamma(2, sigma): sigma = 1 gives a few thousand non-empty bins per
    grid at d = 16; sigma = 0.25 gives nearly one bin per row (the hash-table stress case).
    """
    rng = np.random.default_rng([seed, n_samples, n_features])
    return rng.random((n_samples, n_features))


def make_regression_target(X, seed=SEED_TRAIN):
    """A smooth nonlinear target of the first four coordinates plus a little noise."""
    rng = np.random.default_rng([seed, 7, X.shape[0]])
    k = min(4, X.shape[1])
    y = np.sin(2.0 * np.pi * X[:, :k]).sum(axis=1) + 0.1 * rng.standard_normal(X.shape[0])
    return y


def make_checkerboard(n_samples, n_features=8, n_cells=4, flip=0.05, seed=SEED_TRAIN):
    """Binary checkerboard on the first two of ``n_features`` uniform coordinates.

    No linear model beats chance; the Laplacian kernel learns it. A fraction ``flip`` of
    the labels is flipped, so the best possible accuracy is ``1 - flip``.
    """
    rng = np.random.default_rng([seed, 11, n_samples, n_features])
    X = rng.random((n_samples, n_features))
    y = (np.floor(n_cells * X[:, 0]) + np.floor(n_cells * X[:, 1])).astype(np.int64) % 2
    flip_idx = rng.random(n_samples) < flip
    y[flip_idx] = 1 - y[flip_idx]
    return X, y


def require(module, *names):
    """The attributes ``names`` of ``module`` (a dotted name, e.g. "rbcd.binning.random_binning").

    Raises NotImplementedError (asv shows the benchmark as skipped, "n/a") when rbcd
    lacks a piece, so older commits in the history or a half-built tree do not fail.
    """
    import importlib

    try:
        mod = importlib.import_module(module)
        out = [getattr(mod, name) for name in names]
    except (AttributeError, ImportError) as exc:
        raise NotImplementedError(f"{module}: {', '.join(names)} unavailable: {exc}") from None
    return out[0] if len(out) == 1 else out


def quiet_convergence():
    """Silence ConvergenceWarnings (one-epoch and fixed-iteration runs stop on purpose)."""
    from sklearn.exceptions import ConvergenceWarning

    warnings.simplefilter("ignore", ConvergenceWarning)
    warnings.filterwarnings("ignore", message=".*converge.*")


def build_rb(n_samples, sigma=SIGMA, n_grids=N_GRIDS, n_features=N_FEATURES, n_jobs=None):
    """Fit RandomBinning on make_X(n_samples): returns (fitted binning, Z, X)."""
    RandomBinning = require("rbcd", "RandomBinning")
    X = make_X(n_samples, n_features)
    rb = RandomBinning(n_grids=n_grids, sigma=sigma, n_jobs=n_jobs, random_state=SEED_GRIDS)
    Z = rb.fit_transform(X)
    return rb, Z, X


def _rb_problem(n_samples):
    rb, Z, X = build_rb(n_samples)
    y = make_regression_target(X)
    return {
        "Z": Z,
        "y": y,
        "grid_ptr": np.asarray(rb.grid_ptr_),
        "n_grids": N_GRIDS,
        "n_features_out": Z.shape[1],
        "predicted_speedup_2": float(rb.predicted_speedup(2)),
    }


def columns(cache, n_jobs=None):
    """The RBColumns (CSC view + grid structure) of a cached problem, memoized."""
    column_structure = require("rbcd.binning.random_binning", "column_structure")
    return memo(("columns", id(cache["Z"])),
                lambda: column_structure(cache["Z"], cache["grid_ptr"], n_jobs=n_jobs))


class RBMatrixLarge:
    """Mixin: a regression problem on an RB matrix with N = 10^6, d = 16, R = 64, sigma = 1.

    ``setup(self, cache, *params)`` receives a dict with Z (CSR), y, grid_ptr,
    n_grids, n_features_out, predicted_speedup_2.
    """

    def setup_cache(self):
        return _rb_problem(N_LARGE)

    setup_cache.timeout = 600


class RBMatrixMedium:
    """Mixin: the same problem with N = 2 * 10^5 rows (for the CG solves)."""

    def setup_cache(self):
        return _rb_problem(N_MEDIUM)

    setup_cache.timeout = 300


def best_of(fn, repeat=3):
    """Smallest wall time of ``repeat`` calls of ``fn()`` (time.perf_counter)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


class Big:
    """Timing profile for calls of a second or more: few samples, no warm-up loop."""

    version = DATA_VERSION + ("-smoke" if SMOKE else "")
    number = 1
    repeat = (1, 3, 10.0)
    warmup_time = 0.0
    timeout = 180
