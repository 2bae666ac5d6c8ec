"""Coordinate descent: one epoch of each mode on an RB matrix, N = 10^6, R = 64.

One epoch = ``CDRegressor(max_epochs=1, tol=0)``: D coordinate steps (serial, Hogwild)
or R grid blocks (grid), the intercept steps and one convergence check. The column
structure (CSC view, grid check) is built once outside the measurement and passed as
``columns=``; its cost is measured in ``binning.ColumnStructure``. The serial mode
ignores ``n_jobs``, so its 2-thread case is skipped.
"""
from .common import Big, CD_MODES, RBMatrixLarge, THREADS, columns, quiet_convergence, require

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
