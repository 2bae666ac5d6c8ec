"""Every size (issue 29): RBClassifier() / RBRegressor() with their defaults, fit + predict,
from a few hundred rows up, and the threads' ratio (benchmarks/compare_sizes.py prints the
peers; this tracks rbcd across commits).

The problem: d = 8 uniform coordinates, a smooth nonlinear function of five of them, 2
classes (its sign against the median) or regression, N training rows and N / 4 new rows.
"""
import numpy as np

from .common import DATA_VERSION, SMOKE, best_of, memo, quiet_convergence, require

SIZES = [300, 3_000, 30_000] if not SMOKE else [300, 1_000]


def _problem(n, task):
    rng = np.random.default_rng([11, n])
    m = n + max(100, n // 4)
    X = rng.uniform(-1, 1, size=(m, 8))
    f = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + X[:, 2] * X[:, 3] + 0.5 * X[:, 4] ** 2
    y = (f + 0.3 * rng.standard_normal(m) > np.median(f)).astype(int) if task == "clf" \
        else f + 0.1 * rng.standard_normal(m)
    return X[:n], y[:n], X[n:]


def _bundled_split(data, regression):
    """(X_train, X_test, y_train, y_test) of scikit-learn's bundled set ``data``, raw: one
    75/25 split, seed 0, stratified for classification."""
    from sklearn import datasets
    from sklearn.model_selection import train_test_split

    X, y = getattr(datasets, f"load_{data}")(return_X_y=True)
    return train_test_split(X, y, test_size=0.25, random_state=0,
                            stratify=None if regression else y)


class DefaultsFitPredict:
    """Fit + predict with every default (n_jobs=None: OpenMP's default threads) and with
    n_jobs=1."""

    version = DATA_VERSION + "-sizes1"
    params = (SIZES, ["clf", "reg"], [None, 1])
    param_names = ["n_samples", "task", "n_jobs"]
    timeout = 300

    def setup(self, n, task, n_jobs):
        quiet_convergence()
        self.X, self.y, self.X_new = memo(("sizes", n, task), lambda: _problem(n, task))
        name = "RBClassifier" if task == "clf" else "RBRegressor"
        self.cls = require("rbcd", name)

    def time_fit_predict(self, n, task, n_jobs):
        self.cls(n_jobs=n_jobs, random_state=0).fit(self.X, self.y).predict(self.X_new)


class ThreadsRatio:
    """n_jobs=None over n_jobs=1, best of 3 each, taken in turns (target <= 1.1)."""

    version = DATA_VERSION + "-sizes1"
    params = (SIZES,)
    param_names = ["n_samples"]
    timeout = 300

    def setup(self, n):
        quiet_convergence()
        self.X, self.y, self.X_new = memo(("sizes", n, "clf"), lambda: _problem(n, "clf"))
        self.cls = require("rbcd", "RBClassifier")

    def track_threads_ratio(self, n):
        times = {None: [], 1: []}
        for _ in range(3):
            for n_jobs in (None, 1):
                t = best_of(lambda: self.cls(n_jobs=n_jobs, random_state=0).fit(
                    self.X, self.y).predict(self.X_new), repeat=1)
                times[n_jobs].append(t)
        return min(times[None]) / min(times[1])

    track_threads_ratio.unit = "ratio"


class DefaultsCGIterations:
    """CG iterations of a default fit (``solver="cg"``) at 10,000 rows, where Z has 1-8
    bins per row: the projected Jacobi of ``preconditioner="auto"`` there
    (this problem, D / N = 2.0: regression 54 iterations against 69 with plain CG,
    classification 22 either way; docs/benchmarks/preconditioner.md). Deterministic: a
    count, not a time."""

    version = DATA_VERSION + "-cgit1"
    params = (["clf", "reg"],)
    param_names = ["task"]
    timeout = 300

    def setup(self, task):
        quiet_convergence()
        n = 10_000 if not SMOKE else 1_000
        self.X, self.y, _ = memo(("sizes", n, task), lambda: _problem(n, task))
        name = "RBClassifier" if task == "clf" else "RBRegressor"
        self.cls = require("rbcd", name)

    def track_cg_iterations(self, task):
        m = self.cls(random_state=0, solver="cg", n_jobs=1).fit(self.X, self.y)
        return int(np.max(m.solver_.n_iter_))

    track_cg_iterations.unit = "iterations"


class DefaultsRegressionError:
    """Test RMSE of RBRegressor() with every default (deterministic: random_state=0) where
    the regression rules act: 8,000 rows (2,048 grids, alpha="auto" checked on held-out
    rows) and 30,000 (512 grids; the check on a 20,000-row sample). The targets' noise,
    0.1, is the floor (docs/benchmarks/search.md, "Grids for regression")."""

    version = DATA_VERSION + "-regerr1"
    params = ([8_000, 30_000] if not SMOKE else [6_000],)
    param_names = ["n_samples"]
    timeout = 300

    def setup(self, n):
        quiet_convergence()
        self.X, self.y, _ = memo(("sizes", n, "reg"), lambda: _problem(n, "reg"))
        rng = np.random.default_rng([12, n])
        X_new = rng.uniform(-1, 1, size=(2_000, 8))
        f = (np.sin(3 * X_new[:, 0]) * np.cos(2 * X_new[:, 1]) + X_new[:, 2] * X_new[:, 3]
             + 0.5 * X_new[:, 4] ** 2)
        self.X_new, self.y_new = X_new, f + 0.1 * rng.standard_normal(2_000)
        self.cls = require("rbcd", "RBRegressor")

    def track_test_rmse(self, n):
        p = self.cls(random_state=0).fit(self.X, self.y).predict(self.X_new)
        return float(np.sqrt(np.mean((p - self.y_new) ** 2)))

    track_test_rmse.unit = "RMSE"


class DefaultsBundledScore:
    """Test score of RBClassifier() / RBRegressor() with every default (random_state=0) on
    scikit-learn's bundled sets, raw (one 75/25 split, seed 0): where the linear term of
    ``linear="auto"`` acts (unscaled features: wine, breast cancer; a near-linear target:
    diabetes; docs/benchmarks/search.md, "A linear term beside the kernel")."""

    version = DATA_VERSION + "-bundled1"
    params = (["wine", "breast_cancer", "diabetes"],)
    param_names = ["data"]
    timeout = 120

    def setup(self, data):
        quiet_convergence()
        self.regression = data == "diabetes"
        self.split = _bundled_split(data, self.regression)
        self.cls = require("rbcd", "RBRegressor" if self.regression else "RBClassifier")

    def track_test_score(self, data):
        Xtr, Xte, ytr, yte = self.split
        p = self.cls(random_state=0).fit(Xtr, ytr).predict(Xte)
        if self.regression:
            return float(np.sqrt(np.mean((p - yte) ** 2)))
        return float(np.mean(p == yte))

    track_test_score.unit = "accuracy or RMSE"


class SearchBundled:
    """RBClassifierCV() with every default (the leave-one-out search over sigma, alpha, the
    linear term and, with more than two classes, one-vs-rest against one-vs-one, then the
    refit) on scikit-learn's bundled classification sets, raw (one 75/25 split, seed 0):
    its fit + predict time, and that time over a GridSearchCV of SVC() on the same split
    (6 gamma multipliers x 5 C, 5 folds: compare_search's gs-svc), best of 3 each, taken
    in turns (issue 30's target: <= 1). digits: 10 classes, 45 pairs."""

    version = DATA_VERSION + "-search2"
    params = (["wine", "breast_cancer", "digits"],)
    param_names = ["data"]
    timeout = 300

    def setup(self, data):
        quiet_convergence()
        self.split = _bundled_split(data, False)
        self.cls = require("rbcd", "RBClassifierCV")

    def _search(self):
        import warnings

        Xtr, Xte, ytr, _ = self.split
        with warnings.catch_warnings():      # a best value on an edge of the grid
            warnings.simplefilter("ignore", UserWarning)
            self.cls(random_state=0).fit(Xtr, ytr).predict(Xte)

    def _svc(self):
        from sklearn.model_selection import GridSearchCV
        from sklearn.svm import SVC

        Xtr, Xte, ytr, _ = self.split
        scale = 1.0 / (Xtr.shape[1] * Xtr.var())
        grid = {"gamma": [g * scale for g in (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)],
                "C": [0.1, 1.0, 10.0, 100.0, 1000.0]}
        GridSearchCV(SVC(), grid, cv=5).fit(Xtr, ytr).predict(Xte)

    def time_search_fit_predict(self, data):
        self._search()

    def track_search_over_gs_svc(self, data):
        times = {"search": [], "svc": []}
        for _ in range(3):
            for name, run in (("search", self._search), ("svc", self._svc)):
                times[name].append(best_of(run, repeat=1))
        return min(times["search"]) / min(times["svc"])

    track_search_over_gs_svc.unit = "ratio"


class SearchFoldsRegression:
    """RBRegressorCV() on the regression problem above at 2,500 training rows, past the
    leave-one-out sample's rows: 5 shuffled folds, the search's regression grids (8,192
    here) and, with many grids on few rows, the folds' systems taken from one Gram matrix
    of the rows per sigma (rbcd.model_selection, "Folds from one Gram matrix" in
    docs/internals.md). Two sigma factors keep it short; fit + predict."""

    version = DATA_VERSION + "-folds1"
    timeout = 300

    def setup(self):
        quiet_convergence()
        n = 2_500 if not SMOKE else 2_100
        self.X, self.y, self.Xn = memo(("sizes", n, "reg"), lambda: _problem(n, "reg"))
        self.cls = require("rbcd", "RBRegressorCV")
        self.grids = {} if not SMOKE else {"n_grids": 64}

    def time_search_fit_predict(self):
        import warnings

        with warnings.catch_warnings():      # a best value on an edge of the grid
            warnings.simplefilter("ignore", UserWarning)
            self.cls(sigma_factors=(1.0, 2.0), random_state=0,
                     **self.grids).fit(self.X, self.y).predict(self.Xn)


class PredictFewRows:
    """A fitted default model's predict of 1 and 10 rows (serving one request at a time):
    fixed costs of validation, binning and the product, not the work per row. The model is
    fitted once (scaled digits, 1,347 rows, 10 classes, 1,024 grids; diabetes for
    regression)."""

    version = DATA_VERSION + "-predictfew1"
    params = (["digits", "diabetes"], [1, 10])
    param_names = ["data", "rows"]
    timeout = 300

    def setup(self, data, rows):
        from sklearn.preprocessing import StandardScaler

        quiet_convergence()
        regression = data == "diabetes"
        Xtr, Xte, ytr, _ = memo(("bundled", data), lambda: _bundled_split(data, regression))
        scaler = StandardScaler().fit(Xtr)
        name = "RBRegressor" if regression else "RBClassifier"
        self.model = memo(("fitted", data), lambda: require("rbcd", name)(random_state=0).fit(
            scaler.transform(Xtr), ytr))
        self.X = np.ascontiguousarray(scaler.transform(Xte)[:rows])
        self.model.predict(self.X)

    def time_predict(self, data, rows):
        self.model.predict(self.X)
