"""Thread scaling of every stage (issue 33), at a size asv can run often.

N = 10^5 rows (``N_SMALL``), d = 16, R = 64, sigma = 1, threads 1, 2, 4, 8, 16 (the counts
above the machine's usable CPUs are skipped). benchmarks/compare_threads.py measures the
same stages at N = 4 x 10^6 and sets them against the machine's memory bandwidth; here the
bandwidth is a ``track_`` (the triad in GB/s at each thread count).

- ``Binning``: fit_transform and transform;
- ``CGIterations``: a RidgeCG fit of ``CG_ITERS`` iterations (tol = 0) on Z with its grid
  structure, as RBRegressor runs it;
- ``CDEpochs``: a CDRegressor fit of ``CD_EPOCHS`` epochs (tol = 0), grid and Hogwild;
- ``DirectAlphas``: RidgeCG(solver="direct") with an alpha per target (four distinct) on
  3,000 rows: the dual form's Gram matrix, then four Cholesky factorizations, ``n_jobs`` of
  them at a time (rbcd.solvers._direct.cholesky_solves);
- ``Triad``: STREAM's triad bandwidth (rbcd._openmp_info.stream_triad) on N doubles.
"""
import os

import numpy as np

from .common import (
    Big,
    N_FEATURES,
    N_GRIDS,
    N_SMALL,
    SEED_GRIDS,
    SEED_NEW,
    SIGMA,
    make_X,
    make_regression_target,
    memo,
    quiet_convergence,
    require,
)

SCALING_THREADS = [1, 2, 4, 8, 16]
CG_ITERS = 5
CD_EPOCHS = 3


def _usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _skip_oversubscribed(n_jobs):
    if n_jobs > _usable_cpus():
        raise NotImplementedError(f"{n_jobs} threads on {_usable_cpus()} usable CPUs")


def _problem():
    """(fitted binning, Z, its RBColumns with grid labels, y, X_new) at N_SMALL, memoized."""
    def build():
        RandomBinning = require("rbcd", "RandomBinning")
        X = make_X(N_SMALL, N_FEATURES)
        rb = RandomBinning(n_grids=N_GRIDS, sigma=SIGMA, random_state=SEED_GRIDS)
        Z, cols = rb.fit_transform(X, return_columns=True)
        y = make_regression_target(X)
        return rb, X, Z, cols, y - y.mean(), make_X(N_SMALL, N_FEATURES, seed=SEED_NEW)
    return memo(("threads-problem", N_SMALL), build)


class Binning(Big):
    params = (SCALING_THREADS,)
    param_names = ["n_jobs"]

    def setup(self, n_jobs):
        _skip_oversubscribed(n_jobs)
        RandomBinning = require("rbcd", "RandomBinning")
        self.rb, self.X, _, _, _, self.X_new = _problem()
        self.rb.set_params(n_jobs=n_jobs)
        self.est = RandomBinning(n_grids=N_GRIDS, sigma=SIGMA, n_jobs=n_jobs,
                                 random_state=SEED_GRIDS)

    def time_fit_transform(self, n_jobs):
        self.est.fit_transform(self.X)

    def time_transform(self, n_jobs):
        self.rb.transform(self.X_new)


class CGIterations(Big):
    params = (SCALING_THREADS,)
    param_names = ["n_jobs"]

    def setup(self, n_jobs):
        _skip_oversubscribed(n_jobs)
        RidgeCG = require("rbcd", "RidgeCG")
        quiet_convergence()
        _, _, self.Z, self.cols, self.y, _ = _problem()
        self.est = RidgeCG(alpha=1.0, tol=0.0, max_iter=CG_ITERS, n_jobs=n_jobs)
        if "solver" in self.est.get_params():
            self.est.set_params(solver="cg")  # never a direct solve

    def time_fit(self, n_jobs):
        self.est.fit(self.Z, self.y, columns=self.cols)


class CDEpochs(Big):
    params = (["grid", "hogwild"], SCALING_THREADS)
    param_names = ["parallel", "n_jobs"]

    def setup(self, parallel, n_jobs):
        _skip_oversubscribed(n_jobs)
        CDRegressor = require("rbcd", "CDRegressor")
        quiet_convergence()
        _, _, self.Z, self.cols, self.y, _ = _problem()
        self.est = CDRegressor(alpha=1e-4, l1_ratio=1.0, fit_intercept=False,
                               max_epochs=CD_EPOCHS, tol=0.0, selection="random",
                               parallel=parallel, n_jobs=n_jobs, random_state=0)

    def time_fit(self, parallel, n_jobs):
        self.est.fit(self.Z, self.y, columns=self.cols)


class DirectAlphas(Big):
    params = (SCALING_THREADS,)
    param_names = ["n_jobs"]

    def setup(self, n_jobs):
        _skip_oversubscribed(n_jobs)
        RandomBinning, RidgeCG = require("rbcd", "RandomBinning", "RidgeCG")

        def build():
            X = make_X(3_000, N_FEATURES)
            Z, cols = RandomBinning(n_grids=N_GRIDS, sigma=SIGMA,
                                    random_state=SEED_GRIDS).fit_transform(
                X, return_columns=True)
            y = make_regression_target(X)
            return Z, cols, np.column_stack([y, -y, 2.0 * y, y * y])

        self.Z, self.cols, self.Y = memo(("threads-direct", 3_000), build)
        self.est = RidgeCG(alpha=np.array([0.1, 1.0, 10.0, 100.0]), solver="direct",
                           n_jobs=n_jobs)

    def time_fit(self, n_jobs):
        self.est.fit(self.Z, self.Y, columns=self.cols)


class Triad(Big):
    """STREAM triad bandwidth, GB/s (3 x 8 bytes per element), best of 5."""

    params = (SCALING_THREADS,)
    param_names = ["n_jobs"]

    def setup(self, n_jobs):
        _skip_oversubscribed(n_jobs)
        first_touch, self.triad = require("rbcd._openmp_info", "first_touch", "stream_triad")
        n = max(N_SMALL, 2**22)
        self.arrays = [np.empty(n) for _ in range(3)]
        for a, v in zip(self.arrays, (0.0, 1.0, 2.0)):
            first_touch(a, v, n_jobs)

    def track_triad_gbs(self, n_jobs):
        import time

        a, b, c = self.arrays
        best = np.inf
        for _ in range(5):
            t0 = time.perf_counter()
            self.triad(a, b, c, 3.0, n_jobs)
            best = min(best, time.perf_counter() - t0)
        return 3 * 8 * a.shape[0] / best / 1e9

    track_triad_gbs.unit = "GB/s"
