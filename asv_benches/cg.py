"""RidgeCG: time to tolerance with and without the Jacobi preconditioner.

The RB matrix has N = 2 * 10^5 rows (R = 64, d = 16, sigma = 1); alpha = 1, tol = 1e-6,
with intercept. Inside one grid Z^T Z is diagonal, so the Jacobi preconditioner
(bin counts / R + alpha) should at least halve the iteration count: ``track_n_iter``
records it.
"""
import numpy as np

from .common import Big, RBMatrixMedium, THREADS, quiet_convergence, require

ALPHA = 1.0
TOL = 1e-6


class RidgeCGSolve(RBMatrixMedium, Big):
    params = (["jacobi", None], THREADS)
    param_names = ["preconditioner", "n_jobs"]

    def setup(self, cache, preconditioner, n_jobs):
        RidgeCG = require("rbcd", "RidgeCG")
        quiet_convergence()
        self.Z, self.y = cache["Z"], cache["y"]
        self.est = RidgeCG(alpha=ALPHA, fit_intercept=True, tol=TOL,
                           preconditioner=preconditioner, n_jobs=n_jobs)

    def time_fit(self, cache, preconditioner, n_jobs):
        self.est.fit(self.Z, self.y)

    def peakmem_fit(self, cache, preconditioner, n_jobs):
        self.est.fit(self.Z, self.y)


class RidgeCGIterations(RBMatrixMedium, Big):
    """Iterations to tol (the largest over targets), one thread: they do not depend on it."""

    params = (["jacobi", None],)
    param_names = ["preconditioner"]

    def setup(self, cache, preconditioner):
        RidgeCG = require("rbcd", "RidgeCG")
        quiet_convergence()
        self.Z, self.y = cache["Z"], cache["y"]
        self.est = RidgeCG(alpha=ALPHA, fit_intercept=True, tol=TOL,
                           preconditioner=preconditioner, n_jobs=1)

    def track_n_iter(self, cache, preconditioner):
        self.est.fit(self.Z, self.y)
        return int(np.max(self.est.n_iter_))

    track_n_iter.unit = "iterations"
