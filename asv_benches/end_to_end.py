"""End to end: RBClassifier on a fixed checkerboard, and the 2-thread speedups.

The classification problem: 10^5 training rows, 2 * 10^4 test rows, d = 8 uniform
coordinates, label = parity of a 4 x 4 checkerboard on the first two, 5 % of the labels
flipped (best possible accuracy 0.95, any linear model 0.5).

Speedups are ratios measured inside the track function (best of a few runs at 1 thread
over best of as many at 2 threads: 2 for binning, 3 for CD epochs), so they compare runs
taken moments apart on the same machine.
"""
from .common import (
    Big,
    N_FEATURES,
    N_SMALL,
    N_GRIDS,
    N_LARGE,
    RBMatrixLarge,
    SEED_GRIDS,
    best_of,
    columns,
    make_checkerboard,
    make_X,
    memo,
    quiet_convergence,
    require,
)

N_TRAIN, N_TEST, D_CLF = N_SMALL, N_SMALL // 5, 8
SIGMA_CLF = 0.5


def _checkerboard():
    X, y = make_checkerboard(N_TRAIN + N_TEST, n_features=D_CLF)
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]


def _classifier(solver, n_jobs):
    RBClassifier = require("rbcd", "RBClassifier")
    kw = {"max_epochs": 20} if solver == "cd" else {}
    return RBClassifier(n_grids=N_GRIDS, sigma=SIGMA_CLF, solver=solver, n_jobs=n_jobs,
                        random_state=0, **kw)


class RBClassifierFit(Big):
    """RBClassifier(R=64).fit on 10^5 rows: binning + solver, with its defaults
    (CG: alpha = 1, tol = 1e-6, Jacobi; CD: alpha = 1e-4, logistic, at most 20 epochs)."""

    params = (["cg", "cd"], [1, 2])
    param_names = ["solver", "n_jobs"]

    def setup(self, solver, n_jobs):
        quiet_convergence()
        self.X, self.y, self.X_test, self.y_test = memo("checkerboard", _checkerboard)
        self.est = _classifier(solver, n_jobs)

    def time_fit(self, solver, n_jobs):
        self.est.fit(self.X, self.y)

    def peakmem_fit(self, solver, n_jobs):
        self.est.fit(self.X, self.y)


class RBRegressorPredict(Big):
    """RBRegressor(R=256, alpha=1e-4 per row, CG).predict of 2 x 10^5 new rows (d = 8):
    new rows binned and scored a block at a time (rbcd.models.PREDICT_ENTRIES), so the
    peak memory is the model's and the scores', not Z's of all rows (614 MB here)."""

    params = ([1, 2],)
    param_names = ["n_jobs"]

    def setup(self, n_jobs):
        RBRegressor = require("rbcd", "RBRegressor")
        quiet_convergence()
        X, y, _, _ = memo("checkerboard", _checkerboard)
        self.X_new = make_X(2 * N_TEST * 5, D_CLF, seed=7)
        self.est = RBRegressor(n_grids=256, sigma=SIGMA_CLF, alpha=None, solver="cg",
                               linear=0.0, n_jobs=n_jobs, random_state=0).fit(X, y)

    def time_predict(self, n_jobs):
        self.est.predict(self.X_new)

    def peakmem_predict(self, n_jobs):
        self.est.predict(self.X_new)


class RBClassifierAccuracy(Big):
    params = (["cg", "cd"],)
    param_names = ["solver"]

    def setup(self, solver):
        quiet_convergence()
        self.X, self.y, self.X_test, self.y_test = memo("checkerboard", _checkerboard)
        self.est = _classifier(solver, 2)

    def track_test_accuracy(self, solver):
        self.est.fit(self.X, self.y)
        return float(self.est.score(self.X_test, self.y_test))

    track_test_accuracy.unit = "accuracy"


class SpeedupBinning(Big):
    """fit_transform time at 1 thread / at 2 threads; N = 10^6, d = 16, R = 64."""

    params = ([1.0, 0.25],)
    param_names = ["sigma"]
    timeout = 300

    def setup(self, sigma):
        RandomBinning = require("rbcd", "RandomBinning")
        self.X = memo(("X", N_LARGE), lambda: make_X(N_LARGE, N_FEATURES))
        self.est = {t: RandomBinning(n_grids=N_GRIDS, sigma=sigma, n_jobs=t,
                                     random_state=SEED_GRIDS) for t in (1, 2)}

    def track_speedup_2_threads(self, sigma):
        # best of 2 (not 3): at sigma = 0.25 one fit_transform of 10^6 rows takes seconds
        t1 = best_of(lambda: self.est[1].fit_transform(self.X), 2)
        t2 = best_of(lambda: self.est[2].fit_transform(self.X), 2)
        return t1 / t2

    track_speedup_2_threads.unit = "ratio"


class SpeedupCD(RBMatrixLarge, Big):
    """One-epoch time at 1 thread / at 2 threads for the parallel CD modes (N = 10^6)."""

    params = (["hogwild", "grid"],)
    param_names = ["parallel"]
    timeout = 300

    def setup(self, cache, parallel):
        CDRegressor = require("rbcd", "CDRegressor")
        quiet_convergence()
        self.Z, self.y, self.cols = cache["Z"], cache["y"], columns(cache)
        self.est = {t: CDRegressor(loss="squared", alpha=1e-4, l1_ratio=1.0, max_epochs=1,
                                   tol=0.0, parallel=parallel, n_jobs=t, random_state=0)
                    for t in (1, 2)}

    def track_speedup_2_threads(self, cache, parallel):
        def run(t):
            return best_of(lambda: self.est[t].fit(self.Z, self.y, columns=self.cols), 3)

        return run(1) / run(2)

    track_speedup_2_threads.unit = "ratio"

    def track_predicted_speedup_2_threads(self, cache, parallel):
        """Paper eq. 29 for tau = 2 (Hogwild's expectation; grid blocks have no conflicts)."""
        return cache["predicted_speedup_2"] if parallel == "hogwild" else 2.0

    track_predicted_speedup_2_threads.unit = "ratio"
