"""RandomBinning: fit_transform, transform, and the column structure the solvers walk.

Sizes from the benchmark issue: N = 10^5 and 10^6 rows, d = 16, R = 64 grids,
sigma = 1.0 (a few thousand bins per grid on uniform data) and 0.25 (about one bin per row:
the hash tables' worst case), 1 and 2 threads.
"""
from .common import (
    Big,
    N_FEATURES,
    N_GRIDS,
    N_LARGE,
    N_SMALL,
    SEED_GRIDS,
    SEED_NEW,
    THREADS,
    build_rb,
    make_X,
    memo,
    require,
)


class FitTransform(Big):
    """RandomBinning(R=64).fit_transform(X), X of shape (N, 16)."""

    params = ([N_SMALL, N_LARGE], [1.0, 0.25], THREADS)
    param_names = ["n_samples", "sigma", "n_jobs"]

    def setup(self, n_samples, sigma, n_jobs):
        RandomBinning = require("rbcd", "RandomBinning")
        self.X = memo(("X", n_samples), lambda: make_X(n_samples, N_FEATURES))
        self.est = RandomBinning(n_grids=N_GRIDS, sigma=sigma, n_jobs=n_jobs,
                                 random_state=SEED_GRIDS)

    def time_fit_transform(self, n_samples, sigma, n_jobs):
        self.est.fit_transform(self.X)

    def peakmem_fit_transform(self, n_samples, sigma, n_jobs):
        self.est.fit_transform(self.X)


class FitTransformRanges(Big):
    """fit_transform in the fit's row-range mode (each thread a range of rows for every
    grid, then the merge; the plan takes it from rbcd.binning._plan.RANGES_MIN_THREADS
    threads), forced here at 1 and 2 threads with as many ranges: against FitTransform
    at the same parameters, what the mode costs where the grid mode runs."""

    params = ([N_SMALL, N_LARGE], [1.0, 0.25], THREADS)
    param_names = ["n_samples", "sigma", "n_jobs"]

    def setup(self, n_samples, sigma, n_jobs):
        RandomBinning = require("rbcd", "RandomBinning")
        Paths = require("rbcd.binning._plan", "_Paths")
        try:
            self.paths = Paths(ranges=n_jobs)
        except TypeError:  # before the row-range mode
            raise NotImplementedError("no row-range mode") from None
        self.X = memo(("X", n_samples), lambda: make_X(n_samples, N_FEATURES))
        self.est = RandomBinning(n_grids=N_GRIDS, sigma=sigma, n_jobs=n_jobs,
                                 random_state=SEED_GRIDS)

    def time_fit_transform_ranges(self, n_samples, sigma, n_jobs):
        self.est.fit_transform(self.X, _paths=self.paths)

    def peakmem_fit_transform_ranges(self, n_samples, sigma, n_jobs):
        self.est.fit_transform(self.X, _paths=self.paths)


class FitTransformRangesWork(Big):
    """fit_transform with 16 row ranges on one thread: the row-range mode's whole work at
    16 threads (sweeps, merges, the ids rewrite), measurable on a 2-core machine; against
    FitTransform at one thread, the work the mode adds (docs/benchmarks/threads.md)."""

    params = ([N_LARGE], [1.0, 0.25])
    param_names = ["n_samples", "sigma"]

    def setup(self, n_samples, sigma):
        RandomBinning = require("rbcd", "RandomBinning")
        Paths = require("rbcd.binning._plan", "_Paths")
        try:
            self.paths = Paths(ranges=16)
        except TypeError:  # before the row-range mode
            raise NotImplementedError("no row-range mode") from None
        self.X = memo(("X", n_samples), lambda: make_X(n_samples, N_FEATURES))
        self.est = RandomBinning(n_grids=N_GRIDS, sigma=sigma, n_jobs=1,
                                 random_state=SEED_GRIDS)

    def time_fit_transform_16_ranges(self, n_samples, sigma):
        self.est.fit_transform(self.X, _paths=self.paths)


class Transform(Big):
    """transform of N new rows by a RandomBinning fitted on N training rows."""

    params = ([N_SMALL, N_LARGE], [1.0, 0.25], THREADS)
    param_names = ["n_samples", "sigma", "n_jobs"]

    def setup(self, n_samples, sigma, n_jobs):
        # Fitting (with 2 threads, once per process) is not part of the measurement.
        self.est = memo(("rb", n_samples, sigma), lambda: build_rb(n_samples, sigma, n_jobs=2)[0])
        self.est.set_params(n_jobs=n_jobs)
        self.X_new = memo(("X_new", n_samples),
                          lambda: make_X(n_samples, N_FEATURES, seed=SEED_NEW))

    def time_transform(self, n_samples, sigma, n_jobs):
        self.est.transform(self.X_new)

    def peakmem_transform(self, n_samples, sigma, n_jobs):
        self.est.transform(self.X_new)


class ColumnStructure(Big):
    """rbcd.binning.random_binning.column_structure(Z, grid_ptr): the CSC view + grid check of Z."""

    params = ([N_SMALL, N_LARGE], THREADS)
    param_names = ["n_samples", "n_jobs"]

    def setup(self, n_samples, n_jobs):
        self.column_structure = require("rbcd.binning.random_binning", "column_structure")
        rb, Z = memo(("rbZ", n_samples), lambda: build_rb(n_samples, n_jobs=2)[:2])
        self.Z, self.grid_ptr = Z, rb.grid_ptr_

    def time_column_structure(self, n_samples, n_jobs):
        self.column_structure(self.Z, self.grid_ptr, n_jobs=n_jobs)

    def peakmem_column_structure(self, n_samples, n_jobs):
        self.column_structure(self.Z, self.grid_ptr, n_jobs=n_jobs)


class FitTransformColumns(Big):
    """RandomBinning.fit_transform(X, return_columns=True): Z and its column structure
    together, the path RBRegressor/RBClassifier take (compare with fit_transform +
    column_structure). Older commits: the private ``_fit_transform_columns``."""

    params = ([N_LARGE], THREADS)
    param_names = ["n_samples", "n_jobs"]

    def setup(self, n_samples, n_jobs):
        RandomBinning = require("rbcd", "RandomBinning")
        import inspect

        self.X = memo(("X", n_samples), lambda: make_X(n_samples, N_FEATURES))
        self.est = RandomBinning(n_grids=N_GRIDS, sigma=1.0, n_jobs=n_jobs,
                                 random_state=SEED_GRIDS)
        if "return_columns" in inspect.signature(RandomBinning.fit_transform).parameters:
            self.run = lambda X: self.est.fit_transform(X, return_columns=True)
        elif hasattr(RandomBinning, "_fit_transform_columns"):
            self.run = self.est._fit_transform_columns
        else:
            raise NotImplementedError("no fit_transform with its column structure")

    def time_fit_transform_columns(self, n_samples, n_jobs):
        self.run(self.X)

    def peakmem_fit_transform_columns(self, n_samples, n_jobs):
        self.run(self.X)
