"""Coordinate descent: one epoch of each mode on an RB matrix, N = 10^6, R = 64.

One epoch = ``CDRegressor(max_epochs=1, tol=0)``: D coordinate steps (serial, Hogwild)
or R grid blocks (grid), the intercept steps and one convergence check. The column
structure (CSC view, grid check) is built once outside the measurement and passed as
``columns=``; its cost is measured in ``binning.ColumnStructure``. The serial mode
ignores ``n_jobs``, so its 2-thread case is skipped.
"""
import numpy as np

from .common import (_SCALE, Big, CD_MODES, RBMatrixLarge, THREADS, build_rb, columns, memo,
                     make_regression_target, quiet_convergence, require)

#: Squared loss, Lasso penalty (the paper's eq. 23 with l1_ratio = 1).
ALPHA = 1e-4


class Epoch(RBMatrixLarge, Big):
    params = (CD_MODES, THREADS)
    param_names = ["parallel", "n_jobs"]

    def setup(self, cache, parallel, n_jobs):
        if parallel is None and n_jobs > 1:
            raise NotImplementedError("the serial mode uses one thread")
        CDRegressor = require("rbcd", "CDRegressor")
        quiet_convergence()
        self.Z, self.y = cache["Z"], cache["y"]
        self.cols = columns(cache)
        self.est = CDRegressor(loss="squared", alpha=ALPHA, l1_ratio=1.0, fit_intercept=True,
                               max_epochs=1, tol=0.0, selection="random", parallel=parallel,
                               n_jobs=n_jobs, random_state=0)

    def time_epoch(self, cache, parallel, n_jobs):
        self.est.fit(self.Z, self.y, columns=self.cols)

    def peakmem_epoch(self, cache, parallel, n_jobs):
        self.est.fit(self.Z, self.y, columns=self.cols)



# ---------------------------------------------------------------------------- issue 18 matrix
#: The issue-18 matrix on d = 8 uniform features, R = 32: N, the shape of Z ("small":
#: sigma 1, coarse grids with hundreds of rows per column or more; "large": sigma 0.02,
#: about one row per column), the loss, the mode and the threads. "hogwild-atomic" forces
#: per-entry atomic adds (no hardware transactions); "hogwild" uses them where the CPU
#: has Intel RTM. benchmarks/compare_cd.py prints the same matrix as ratios, with the
#: scikit-learn peers.
MATRIX_N = sorted({max(n // _SCALE, 200) for n in (10**4, 10**5, 10**6)})
MATRIX_SIGMA = {"small": 1.0, "large": 0.02}
MATRIX_MODES = [None, "hogwild", "hogwild-atomic", "grid", "auto"]


def _matrix_problem(n, shape, loss):
    def build():
        rb, Z, X = build_rb(n, sigma=MATRIX_SIGMA[shape], n_grids=32, n_features=8)
        y = make_regression_target(X)
        y = y - y.mean()
        if loss == "logistic":
            y = np.where(y > 0, 1.0, -1.0)
        column_structure = require("rbcd.binning.random_binning", "column_structure")
        return Z, y, column_structure(Z, np.asarray(rb.grid_ptr_))
    return memo(("matrix", n, shape, loss), build)


class EpochMatrix(Big):
    """One epoch (``max_epochs=1, tol=0``, no intercept, lasso penalty) per matrix cell."""

    params = (MATRIX_N, ["small", "large"], ["squared", "logistic"], MATRIX_MODES, THREADS)
    param_names = ["n", "shape", "loss", "parallel", "n_jobs"]
    timeout = 600

    def setup(self, n, shape, loss, parallel, n_jobs):
        if parallel is None and n_jobs > 1:
            raise NotImplementedError("the serial mode uses one thread")
        est_cls = require("rbcd", "CDRegressor" if loss == "squared" else "CDClassifier")
        self.forced_paths = require("rbcd.solvers._paths", "forced_paths")
        quiet_convergence()
        self.Z, self.y, self.cols = _matrix_problem(n, shape, loss)
        self.tx = "off" if parallel == "hogwild-atomic" else "auto"
        mode = "hogwild" if parallel == "hogwild-atomic" else parallel
        self.est = est_cls(loss=loss, alpha=1e-4, l1_ratio=1.0, fit_intercept=False,
                           max_epochs=1, tol=0.0, selection="random", parallel=mode,
                           n_jobs=n_jobs, random_state=0)

    def time_epoch(self, n, shape, loss, parallel, n_jobs):
        with self.forced_paths(transactions=self.tx):
            self.est.fit(self.Z, self.y, columns=self.cols)
