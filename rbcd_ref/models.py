"""Random binning kernel machines, plain Python (the oracle of ``rbcd.models``).

``RBRegressor`` / ``RBClassifier`` = :class:`rbcd_ref.binning.RandomBinning` followed by a
linear solver on the features Z:

* ``solver="auto"`` (default), ``"cg"`` or ``"direct"``: ridge (:class:`rbcd_ref.solvers.cg.RidgeCG`,
  :class:`rbcd_ref.solvers.cg.RidgeCGClassifier`; scikit-learn's Ridge objective) by
  conjugate gradient ("cg") or an exact dense solve ("direct", and "auto" here), or
* ``solver="cd"``: randomized coordinate descent (:class:`rbcd_ref.solvers.cd.CDRegressor`,
  :class:`rbcd_ref.solvers.cd.CDClassifier`; paper eq. 23 with the step of eq. 24-27), which
  receives the fitted binning so that ``parallel="grid"`` (block coordinate descent over
  the grids, the paper's RBCD view) works.

Defaults (the same as rbcd's): ``n_grids="auto"`` -> 256, or 512 above 64 features, 1,024 up
to 2,048 training rows, 512 up to 4,096; regression above 2,048 rows: 2,048 up to 8,192,
1,024 up to 16,384, 512 up to 32,768;
``alpha="auto"`` -> chosen from the data: ridge by rbcd_ref.solvers.cg.choose_alpha, cd by a
(held-out) path, rbcd_ref.solvers.cd.auto_alpha;
``alpha=None`` -> 1e-4 per unit of training weight (cg: 1e-4 * sum of weights, cd: 1e-4);
``tol=None`` -> 1e-3 (cg) / 1e-4 (cd); ``loss=None`` -> "squared" (regression, cg) / "logistic" (cd
classification). Parameters one solver does not use are ignored by it.

Random streams: the binning and the CD solver both receive ``random_state``; the binning
draws its grids first, then the solver draws ``solver_seed(random_state)`` (with a shared
Generator or RandomState the two draws come one after the other, in that order).
The features of new data are ``model.binning_.transform(X)`` (the models have no
``transform`` of their own, so scikit-learn does not treat them as transformers).
``warm_start=True`` (cd) refits the binning and warm-starts the previous solver, which keeps
its coefficients when the number of columns is unchanged (same data and an int seed).
"""
import copy

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from ._checks import check_class_labels
from .binning import RandomBinning
from .solvers.cd import CDClassifier, CDRegressor
from .solvers.cg import LOO_MAX_ROWS, RidgeCG, RidgeCGClassifier

SOLVERS = ("auto", "cg", "direct", "cd")
RIDGE_SOLVERS = ("auto", "cg", "direct")    # RidgeCG's ``solver``



# The rule of rbcd.models (measured there): with the grid structure, Jacobi up to 8 bins
# per training row (D <= 8 N); without it, Jacobi for loose tolerances only.
AUTO_JACOBI_BINS_PER_ROW = 8
AUTO_JACOBI_TOL = 1e-4


def _preconditioner(preconditioner, tol, shape=None, structured=False):
    """Resolve ``preconditioner="auto"``: with the grid structure (exact mode) and Z's shape
    known, "jacobi" when D <= 8 N else None; otherwise "jacobi" for tol >= 1e-4, else
    None."""
    if isinstance(preconditioner, str) and preconditioner == "auto":
        if structured and shape is not None:
            return "jacobi" if shape[1] <= AUTO_JACOBI_BINS_PER_ROW * shape[0] else None
        return "jacobi" if tol >= AUTO_JACOBI_TOL else None
    return preconditioner

class _RBBase(BaseEstimator):
    _classifier = False

    def _resolved(self, total_weight=1.0):
        """(solver, alpha, tol, loss) with the defaults filled in; the cg default alpha is
        1e-4 times the total training weight."""
        if not (isinstance(self.solver, str) and self.solver in SOLVERS):
            raise ValueError(
                f"solver must be 'auto', 'cg', 'direct' or 'cd', got {self.solver!r}")
        solver = self.solver
        ridge = solver in RIDGE_SOLVERS
        auto = isinstance(self.alpha, str) and self.alpha == "auto"
        if auto:   # chosen from the data by the solver (the ridge and the cd rules)
            alpha = "auto"
        elif self.alpha is not None and not auto:
            alpha = self.alpha
        elif ridge:
            alpha = 1e-4 * total_weight
        else:
            alpha = 1e-4
        tol = self.tol if self.tol is not None else (1e-3 if ridge else 1e-4)
        if ridge:
            if self.loss is not None and not (isinstance(self.loss, str) and self.loss == "squared"):
                raise ValueError(
                    f"solver={solver!r} solves ridge (squared loss): loss must be None or "
                    f"'squared', got {self.loss!r}"
                )
            loss = "squared"
        elif getattr(self, "multi_class", "ovr") == "ovo":
            raise ValueError("multi_class='ovo' needs a ridge solver")
        elif self.loss is None:
            loss = "logistic" if self._classifier else "squared"
        else:
            loss = self.loss
            # the loss must suit the task (the solvers' own constraints; nested checks of
            # the solver built here are skipped)
            if self._classifier and loss == "squared":
                raise ValueError(f"solver={solver!r} classifies with loss 'logistic' or "
                                 f"'squared_hinge', got 'squared': use a ridge solver "
                                 f"(solver='auto', 'cg' or 'direct') for the squared loss")
            if not self._classifier and loss != "squared":
                raise ValueError(f"{type(self).__name__} fits regression targets: loss must "
                                 f"be None or 'squared', got {loss!r} (a classification loss "
                                 f"is for {type(self).__name__.replace('Regressor', 'Classifier')})")
        return solver, alpha, tol, loss

    def _binning(self, n_features_in, n_samples):
        n_grids = self.n_grids
        if n_grids == "auto":
            n_grids = 256 if n_features_in <= 64 else 512
            # small data, where the kernel estimate's noise dominates: the largest power of
            # two up to 1,024 with n_samples * n_grids <= 2**21 and, since each grid holds
            # numbers per feature, n_features_in * n_grids <= 2**21
            small = 1024
            size = max(n_samples, n_features_in)
            while small > 1 and size * small > 2**21:
                small //= 2
            if size * small <= 2**21:
                n_grids = max(n_grids, small)
            # regression past 2,048 rows: up to 2,048 grids with n_samples * n_grids <= 2**24
            # (and n_features_in * n_grids <= 2**21): a ridge fit's error levels off where
            # the grids, not the rows, set it
            if not self._classifier and n_samples > 2048:
                more = 2048
                while more > 1 and (n_samples * more > 2**24 or n_features_in * more > 2**21):
                    more //= 2
                if n_samples * more <= 2**24 and n_features_in * more <= 2**21:
                    n_grids = max(n_grids, more)
        return RandomBinning(n_grids=n_grids, sigma=self.sigma, kernel=self.kernel,
                             n_features=self.n_features, dtype=self.dtype, n_jobs=self.n_jobs,
                             random_state=self.random_state)

    def _solver(self, shape=None, structured=False, total_weight=1.0):
        solver, alpha, tol, loss = self._resolved(total_weight)
        extra = {"class_weight": self.class_weight} if self._classifier else {}
        if solver in RIDGE_SOLVERS:
            cls = RidgeCGClassifier if self._classifier else RidgeCG
            if self._classifier:
                extra["multi_class"] = self.multi_class
            return cls(alpha=alpha, solver=solver, fit_intercept=self.fit_intercept, tol=tol,
                       max_iter=self.max_iter,
                       preconditioner=_preconditioner(self.preconditioner, tol, shape, structured),
                       n_jobs=self.n_jobs, **extra)
        cls = CDClassifier if self._classifier else CDRegressor
        params = dict(loss=loss, alpha=alpha, l1_ratio=self.l1_ratio,
                      fit_intercept=self.fit_intercept, max_epochs=self.max_epochs, tol=tol,
                      selection=self.selection, parallel=self.parallel, n_jobs=self.n_jobs,
                      warm_start=self.warm_start, random_state=self.random_state,
                      verbose=self.verbose, **extra)
        previous = getattr(self, "solver_", None)
        if self.warm_start and isinstance(previous, cls):
            return copy.deepcopy(previous).set_params(**params)   # the previous fit kept whole
        return cls(**params)

    def _linear_weights(self, n_samples, n_features):
        """The weights c of the linear term (rbcd.models' rule): a number as given (> 0 only
        with a ridge solver); "auto", where alpha="auto" scores every row by leave-one-out
        (at most LOO_MAX_ROWS rows, at most 256 features): classification 0 or 1, chosen
        with alpha by leave-one-out; regression 1."""
        solver, alpha, _, _ = self._resolved()
        ridge = solver in RIDGE_SOLVERS
        ovo = getattr(self, "multi_class", "ovr") == "ovo"     # one-vs-one: no linear term
        if isinstance(self.linear, str):
            if self.linear != "auto":
                raise ValueError(f"linear must be 'auto' or a number >= 0, got {self.linear!r}")
            if ridge and not ovo and alpha == "auto" and n_samples <= LOO_MAX_ROWS and n_features <= 256:
                return (0.0, 1.0) if self._classifier else (1.0,)
            return (0.0,)
        c = float(self.linear)
        if not (np.isfinite(c) and c >= 0.0):
            raise ValueError(f"linear must be 'auto' or a finite number >= 0, got {self.linear!r}")
        if c > 0.0 and not ridge:
            raise ValueError(f"linear={self.linear!r} needs a ridge solver, got solver={solver!r}")
        if c > 0.0 and ovo:
            raise ValueError(f"linear={self.linear!r} is fitted with multi_class='ovr' only")
        return (c,)

    def _standardize(self, X, sample_weight=None):
        """The linear term's standardization, on X / p (p: per column, the power of two of
        the largest magnitude, frexp's exponent: exact, so X * 2^k standardizes alike); with
        sample_weight, over the rows of positive weight, mean and deviation weighted."""
        w = None
        if sample_weight is not None:
            w = np.broadcast_to(np.asarray(sample_weight, dtype=np.float64), (X.shape[0],))
            X, w = X[w > 0], w[w > 0]
        big = np.max(np.abs(X), axis=0)
        self._linear_pow2 = np.ldexp(1.0, np.frexp(big)[1]).astype(np.float64)
        Xs = X / self._linear_pow2
        if w is None:
            self._linear_mean = Xs.mean(axis=0)
            std = (Xs - self._linear_mean).std(axis=0)
        else:
            self._linear_mean = np.average(Xs, axis=0, weights=w)
            std = np.sqrt(np.average((Xs - self._linear_mean) ** 2, axis=0, weights=w))
        self._linear_constant = np.max(X, axis=0) == np.min(X, axis=0)
        self._linear_scale = np.where(self._linear_constant | ~(std > 0), 1.0, std)

    def _block(self, X):
        """The linear term's unit block: (X - mean) / (std sqrt(d)) (on X / p, above), a
        constant training column 0."""
        M = ((X / self._linear_pow2 - self._linear_mean) / self._linear_scale
             / np.sqrt(float(X.shape[1])))
        M[:, self._linear_constant] = 0.0
        return M

    def fit(self, X, y, sample_weight=None):
        """Draw the grids, bin X into Z, fit the solver on Z (and the linear term)."""
        solver, _, _, _ = self._resolved()  # parameter errors before any work
        X = validate_data(self, X, reset=True, accept_sparse=False, dtype=np.float64,
                          ensure_all_finite=False)
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        if self._classifier:   # the labels' errors in this estimator's name
            check_class_labels(y, X.shape[0], type(self).__name__)
        # the weights enter sigma="scale" (pairs by weight), n_grids="auto" (rows of
        # positive weight) and the linear term's standardization
        w = (None if sample_weight is None else
             np.broadcast_to(np.asarray(sample_weight, dtype=np.float64), (X.shape[0],)))
        binning = self._binning(X.shape[1], X.shape[0] if w is None else int(np.count_nonzero(w)))
        Z = binning.fit_transform(X, sample_weight=w)
        if sample_weight is None:
            total_weight = float(Z.shape[0])
        else:
            weights = np.asarray(sample_weight, dtype=np.float64)
            total_weight = float(weights.sum() if weights.ndim else weights * Z.shape[0])
        est = self._solver(Z.shape, self.n_features is None, total_weight)
        weights = self._linear_weights(X.shape[0], X.shape[1])
        self.linear_ = 0.0
        if solver in RIDGE_SOLVERS and any(c > 0.0 for c in weights):
            self._standardize(X, w)
            est.fit(Z, y, sample_weight=sample_weight, extra=(self._block(X), weights))
            self.linear_ = float(est.extra_weight_)
        elif solver in RIDGE_SOLVERS:
            est.fit(Z, y, sample_weight=sample_weight)
        else:
            grid = binning if self.n_features is None else None
            est.fit(Z, y, sample_weight=sample_weight, columns=grid)
        self.binning_ = binning
        self.solver_ = est
        if self._classifier:
            self.classes_ = est.classes_
        if self.verbose:
            print(f"[rbcd_ref {type(self).__name__}] {binning.n_features_out_} features, "
                  f"{solver} solver")
        return self

    def _features(self, X):
        check_is_fitted(self, "solver_")
        X = validate_data(self, X, reset=False, accept_sparse=False, dtype=np.float64,
                          ensure_all_finite=False)
        Z = self.binning_.transform(X)
        if self.linear_ > 0.0:   # [Z, M]: the linear term's columns after Z's
            Z = sp.hstack([sp.csr_matrix(Z), sp.csr_matrix(self._block(X))], format="csr")
        return Z

    @property
    def coef_(self):
        return self.solver_.coef_

    @property
    def intercept_(self):
        return self.solver_.intercept_

    @property
    def n_iter_(self):
        return self.solver_.n_iter_

    @property
    def alpha_(self):
        """The penalty used (the choice of alpha="auto"), in the solver's units."""
        return getattr(self.solver_, "alpha_", self.solver_.alpha)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags


class RBRegressor(RegressorMixin, _RBBase):
    """Laplacian-kernel regression with random binning features + CG ridge or CD.

    Parameters: n_grids, sigma, kernel, n_features (RandomBinning); solver ("auto" | "cg" |
    "direct" | "cd"), alpha, l1_ratio, loss, fit_intercept, tol, max_iter (cg), max_epochs, selection,
    parallel (cd), preconditioner (cg), warm_start (cd), dtype, n_jobs (ignored),
    random_state, verbose. Attributes: binning_, solver_, coef_, intercept_, n_iter_,
    n_features_in_.
    """

    def __init__(self, n_grids="auto", sigma="scale", kernel="laplacian", n_features=None,
                 solver="auto", alpha="auto", l1_ratio=1.0, loss=None, fit_intercept=True,
                 tol=None, max_iter=None, max_epochs=1000, selection="random",
                 parallel="auto", preconditioner="auto", warm_start=False,
                 dtype=np.float64, n_jobs=None, random_state=None, verbose=0,
                 linear="auto"):
        self.n_grids = n_grids
        self.sigma = sigma
        self.kernel = kernel
        self.n_features = n_features
        self.solver = solver
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.loss = loss
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.max_epochs = max_epochs
        self.selection = selection
        self.parallel = parallel
        self.preconditioner = preconditioner
        self.warm_start = warm_start
        self.dtype = dtype
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose
        self.linear = linear

    def predict(self, X):
        Z = self._features(X)
        return self.solver_.predict(Z)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class RBClassifier(ClassifierMixin, _RBBase):
    """Laplacian-kernel classification with random binning features.

    ``solver="cg"``: ridge classification (one-vs-rest -1/+1 targets); ``solver="cd"``:
    logistic (with ``predict_proba``) or squared hinge by coordinate descent, one-vs-rest.
    Same parameters as RBRegressor plus ``class_weight``; attributes also ``classes_``.
    """

    _classifier = True

    def __init__(self, n_grids="auto", sigma="scale", kernel="laplacian", n_features=None,
                 solver="auto", alpha="auto", l1_ratio=1.0, loss=None, fit_intercept=True,
                 tol=None, max_iter=None, max_epochs=1000, selection="random",
                 parallel="auto", preconditioner="auto", warm_start=False,
                 class_weight=None, dtype=np.float64, n_jobs=None, random_state=None,
                 verbose=0, linear="auto", multi_class="ovr"):
        self.multi_class = multi_class
        self.n_grids = n_grids
        self.sigma = sigma
        self.kernel = kernel
        self.n_features = n_features
        self.solver = solver
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.loss = loss
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.max_epochs = max_epochs
        self.selection = selection
        self.parallel = parallel
        self.preconditioner = preconditioner
        self.warm_start = warm_start
        self.class_weight = class_weight
        self.dtype = dtype
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose
        self.linear = linear

    def decision_function(self, X):
        Z = self._features(X)
        return self.solver_.decision_function(Z)

    def predict(self, X):
        Z = self._features(X)
        return self.solver_.predict(Z)

    def _has_proba(self):
        # fitted: from the fit (a later set_params changes the next fit only)
        if "solver_" in self.__dict__:
            return isinstance(self.solver_, CDClassifier) and self.solver_.loss == "logistic"
        try:
            solver, _, _, loss = self._resolved()
        except ValueError:
            return False
        return solver == "cd" and loss == "logistic"

    @available_if(_has_proba)
    def predict_proba(self, X):
        Z = self._features(X)
        return self.solver_.predict_proba(Z)

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        Z = self._features(X)
        return self.solver_.predict_log_proba(Z)
