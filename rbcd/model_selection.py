"""Cross-validated random binning models that reuse the binning: RBClassifierCV, RBRegressorCV.

They are to :class:`rbcd.RBClassifier` / :class:`rbcd.RBRegressor` what scikit-learn's
``RidgeCV`` / ``LogisticRegressionCV`` are to their estimators: they search a grid of

* sigma multipliers: ``sigma = factor * base``, where ``base`` is the ``sigma="scale"`` value of
  the training rows (half of ``rbcd.median_l1_distance(X)``, computed once on all of X) or a number
  given as ``sigma``; and
* penalties ``alpha``,

score each candidate, and refit the best one on all rows as ``best_estimator_`` (an
RBClassifier / RBRegressor with ``sigma`` set to the chosen number).

``cv=None`` (the default, with a ridge solver): as scikit-learn's RidgeCV, every alpha is
scored by its exact leave-one-out error, from one eigendecomposition of the dual Gram
matrix per sigma (the machinery of the models' ``alpha="auto"``,
rbcd.solvers._direct.loo_select): one binning per sigma and no refits per alpha or fold.
Above 1,000 rows the leave-one-out runs on a fixed sample of 1,000 rows (the alphas scaled
to the sample's share of the rows), up to 2,000 rows, where the sample holds at least half of
them. Above 2,000 rows, up to 20,000, a sample that small scores the candidates as fits on
1,000 rows would do, which favours smoother ones than the data in hand supports (star, 4,950
rows, one split: sigma factor 4 chosen, test RMSE 24.9 against 23.3 at factor 1): there the
search runs 5-fold cross-validation on all rows instead, folds shuffled with the search's
seed (as ``cv=KFold(5, shuffle=True, random_state=seed)``, stratified for classifiers),
binning once per sigma and fold and solving all alphas in one block CG, or from one Gram
matrix per sigma (below; the folds' alphas). Above 20,000 rows, the sample again (bounded
cost). The score is the leave-one-out or held-out accuracy (classification) or R^2
(regression), with the weights of the models' alpha="auto" (and of scikit-learn's
RidgeCV / RidgeClassifierCV with their own leave-one-out): each row weighs its
sample_weight times its class_weight (with "balanced", a balanced accuracy), and for
several targets R^2 is 1 - (squared errors summed over the targets) / (their summed
variances), which weighs the targets by their variance. K folds (given, or cv=None's
2,001-20,000 rows) score as GridSearchCV does: accuracy weighted by sample_weight alone,
R^2 averaged over the targets with equal weights. Where the leave-one-out scores every row (at most 1,000 rows; at most 256
features), each (sigma, alpha) of a classifier also takes the better of the models' two
linear-term weights, 0 and 1, and a regressor's the term at weight 1 (``linear="auto"``,
rbcd.solvers._linear): ``cv_results_["param_linear"]`` and ``best_params_["linear"]`` say
which, and the refit uses it.

``cv`` given (an int, a splitter or an iterable of splits), or ``solver="cd"``: K-fold
cross-validation, scored by ``scoring``.

Why the K-fold search is faster than ``GridSearchCV(RBClassifier(), {"sigma": ..., "alpha":
...})``, which bins and solves every (sigma, alpha, fold) from scratch:

* The binning depends on sigma and the fold only, not on alpha: each fold's training rows
  are binned once per sigma (``RandomBinning.fit_transform``) and its validation rows
  transformed once (``RandomBinning.transform``).
* ridge solvers, where the cost model says so (rbcd.solvers._direct.shared_dual_pays: many
  grids on at most 8,192 rows, e.g. a regression search's 8,192 grids on star's 4,950 rows):
  all rows are binned once per sigma and their Gram matrix P = Z Z^T formed once; each
  fold's dual system is the block of P of its training rows (an entry of P counts the
  grids where two rows share a bin, whatever the other rows), centred and weighted, one
  Cholesky factorization per alpha. The solutions are those of each fold's own direct
  solve up to rounding.
* ridge solvers: ridge has one right-hand side per (alpha, target), and RidgeCG accepts one
  alpha per target, so every alpha of the grid (and, for classification, every class's -1/+1
  one-vs-rest target, exactly as RidgeCGClassifier builds them) is solved in ONE block CG: each
  iteration makes one pass over Z for all of them, and each column keeps its own step sizes and
  stopping test, so each alpha's solution is the one a separate fit gives.
* ``solver="cd"``: the alphas are visited from the largest down, each fit warm-started from the
  previous coefficients (the regularization path of :func:`rbcd.cd_path`).

With the same folds, ``random_state`` and grid, the candidates' scores are GridSearchCV's up to
the solver tolerance (the grids drawn for a given sigma are the same in every fold, as they
are in RBClassifier for an int ``random_state``).

Either way, a best sigma factor or alpha on an edge of its grid raises a UserWarning that
says which values to add.
"""
import copy
import time
import warnings
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.metrics import check_scoring
from sklearn.model_selection import check_cv
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ._integrity import ChecksummedState
from ._scale import scale_sigma
from ._warnings import warn as warn_user
from ._validation import (N_JOBS, POSITIVE_INT, RANDOM_STATE, TOL, VERBOSE, RealInterval,
                          check_int, check_regression_target, check_sample_weight,
                          dict_class_weight_rows,
                          fit_context, plain_checked, plain_float_array)

#: Default sigma multipliers of the scale rule's sigma (0.5 x the median L1 distance): on the
#: real-data suite single sets preferred 0.25 .. 3 median distances, i.e. 0.5 .. 6 times
#: the default (docs/benchmarks/realdata.md); on scaled bundled sets the old smallest, 0.5,
#: was often the best (issue 30), hence 0.25; hmda and diabetes chose the old largest, 4, on
#: 9 of 10 splits, hence 8.
DEFAULT_SIGMA_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
#: n_grids="auto" of a search: the models' rule, raised on small data to the power of two
#: that keeps the rows times the grids within rbcd.models.SMALL_DATA_ENTRIES, up to
#: SEARCH_MAX_GRIDS (2,048 grids up to 1,024 rows). A search compares candidates whose
#: scores differ by less than the kernel estimate's noise. 5 random splits, against 1,024
#: grids: vehicle +0.7 points (634 rows), raw wine +1.3, Boston RMSE -0.9%; 4,096 grids on
#: up to 512 rows scored the same as 2,048 within the test sets' noise (raw wine 91.6% /
#: 91.1%, Boston 2.981 / 2.968, ionosphere 94.3% / 94.5%) in twice the time
#: (docs/benchmarks/search.md).
SEARCH_MAX_GRIDS = 2048
#: n_grids="auto" of a regression search past the small-data rows (above 2,048): the
#: models' regression rule (rbcd.models.REGRESSION_GRIDS) with bounds 4x and 8x larger,
#: the power of two up to SEARCH_REGRESSION_GRIDS that keeps the rows times the grids within
#: SEARCH_REGRESSION_ENTRIES (8,192 grids up to 8,192 rows, 4,096 up to 16,384). A search
#: compares kernels of several widths, and the smoothest, which the best exact kernel
#: machines chose on star (4,950 rows), are the ones whose estimate needs the most grids.
#: There (5 splits, RMSE against the tuned exact Laplacian machine) the search scored
#: +1.85% with 2,048 grids (sigma factor 1 chosen) and +0.83% with 8,192 (factor 2); the
#: test rows' own best of sigma factors 2, 4 and three alphas +0.68% with 8,192 grids and
#: +0.34% with 16,384. The folds of such a search share one Gram matrix per sigma
#: (rbcd.solvers._direct.shared_dual_pays), so the grids cost its n^2 R / 2 label
#: comparisons once per sigma, not a solve per fold (docs/benchmarks/search.md).
SEARCH_REGRESSION_GRIDS = 8192
SEARCH_REGRESSION_ENTRIES = 1 << 26
#: Default alphas of the ridge/CG solver, per training row: alpha = c * n_samples (the ridge
#: objective sums the squared errors, so a penalty that keeps its weight against the data
#: term grows with N; on the real-data suite the best alpha went from 0.03-0.1 at a few
#: hundred rows to about 10 at 20,000-50,000 rows, about 1e-4 * N throughout).
DEFAULT_ALPHAS_CG_PER_ROW = (1e-5, 1e-4, 1e-3, 1e-2)
#: Default alphas of the coordinate descent solver (mean-loss units).
DEFAULT_ALPHAS_CD = (1e-5, 1e-4, 1e-3, 1e-2)
#: cv=None with a ridge solver: exact leave-one-out on every row up to
#: rbcd.solvers._direct.LOO_MAX_ROWS rows, on a fixed sample of that many rows while the
#: sample holds at least KFOLD_SAMPLE_SHARE of the rows, KFOLD_SPLITS-fold cross-validation
#: on all rows above that, up to KFOLD_MAX_ROWS rows, the sample above (module docstring).
#: A leave-one-out fit on a sample of 1,000 rows sees 1,000 rows, a fifth of star's 4,950:
#: there it chose sigma factors 2-4 on 3 of 5 splits (mean test RMSE 25.5, against 24.4
#: for 5 folds, which chose factor 1 on all 5). Up to 2,000 rows the sample is at least as
#: good (hmda, 1,785 rows: 89.8% against 89.5% for 5 folds; digits, 1,348 rows: the same
#: choice on split 0) at a fifth of the time or less, and 5 folds would take longer than
#: GridSearchCV over SVC (hmda 6.9 s against 6.8 s, digits 13.0 s against 5.9 s;
#: docs/benchmarks/search.md).
KFOLD_SAMPLE_SHARE = 0.5
KFOLD_SPLITS = 5
#: the cost of the folds grows with N (a block CG over all rows per sigma and fold); above
#: this many rows the issue's targets were not measured and the sample's bounded cost wins
KFOLD_MAX_ROWS = 20_000


def _positive_grid(values, name):
    """A non-empty 1-D float64 array of positive (or, for alphas, non-negative) numbers."""
    arr = None
    if not isinstance(values, (str, bool, np.bool_)):
        try:
            arr = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            arr = None
        if arr is not None and arr.ndim == 0:
            arr = arr.reshape(1)
        if arr is not None and (arr.ndim != 1 or np.asarray(values).dtype == bool):
            arr = None
    if arr is None or arr.shape[0] == 0 or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be a non-empty sequence of finite numbers, got {values!r}")
    low_ok = np.all(arr >= 0) if name == "alphas" else np.all(arr > 0)
    if not low_ok:
        raise ValueError(f"{name} must be {'>= 0' if name == 'alphas' else '> 0'}, got {values!r}")
    return arr


def _std_of_scores(flat):
    """Per candidate, the standard deviation of its fold scores; inf where one is -inf
    (an undefined leave-one-out score), without numpy's warning."""
    with np.errstate(invalid="ignore"):
        std = flat.std(axis=1)
    return np.where(np.isfinite(std), std, np.inf)


def _strictly_better(new, old):
    """Per candidate (rows of (m, 2) leave-one-out scores, rbcd.solvers._direct's
    (primary, secondary) order): True where ``new`` scores strictly better than ``old``
    (ties keep the old choice)."""
    return np.array([tuple(a) > tuple(b) for a, b in zip(new, old)])


class _Rows:
    """The training rows' features of a fold, taken when first asked for: ``Z`` itself
    (rows None), or its rows ``rows`` (the shared-Gram path's binning of every row)."""

    def __init__(self, Z, rows):
        self._Z, self._rows, self._taken = Z, rows, None

    def get(self):
        if self._taken is None:
            self._taken = self._Z if self._rows is None else self._Z[self._rows]
        return self._taken


class _CandidateScores(ClassifierMixin, BaseEstimator):
    """A fold's fitted ridge classifier (``shell``) as a scorer sees the candidate's
    RBClassifier: its ``classes_``, ``predict`` and ``decision_function``, and the
    ``predict_proba`` of RBClassifier's default calibration="train" (rbcd._calibration:
    the softmax of the scores, its scale fitted on the fold's training rows' scores,
    weighted by their sample_weight), so that probability scorers (neg_log_loss,
    neg_brier_score, roc_auc_ovr, ...) score what GridSearchCV over RBClassifier scores.
    The scale is fitted when a scorer first asks for probabilities."""

    def __init__(self, shell, train_features, y_train, sample_weight):
        self.shell = shell
        self.train_features = train_features
        self.y_train = y_train
        self.sample_weight = sample_weight

    @property
    def classes_(self):
        return self.shell.classes_

    def __getattr__(self, name):
        # the rest of the fitted solver (coef_, intercept_, n_iter_, ...) for a callable
        # scorer that reads it
        if name.startswith("__") or name == "shell" or "shell" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["shell"], name)

    def decision_function(self, X):
        return self.shell.decision_function(X)

    def predict(self, X):
        return self.shell.predict(X)

    def _scale(self):
        a = self.__dict__.get("_calibration")
        if a is None:
            from ._calibration import fit_softmax_calibration

            scores = self.shell.decision_function(self.train_features.get())
            w = self.sample_weight
            if w is not None and not np.sum(w) > 0:     # RBClassifier._fit_calibration's rule
                w = None
            a = fit_softmax_calibration(scores, np.searchsorted(self.classes_, self.y_train),
                                        self.classes_.shape[0], w)
            self._calibration = a
        return a

    def predict_proba(self, X):
        from ._calibration import softmax_probabilities

        return softmax_probabilities(self.shell.decision_function(X), self._scale())


class _RBSearchBase(ChecksummedState, BaseEstimator):
    _classifier = False

    _parameter_constraints = {
        "n_grids": POSITIVE_INT + [StrOptions({"auto"})],
        "sigma": [RealInterval(0, None, closed="neither"), StrOptions({"scale"})],
        "sigma_factors": ["array-like"],
        "alphas": ["array-like", None],
        "cv": ["cv_object"],     # (None included)
        "scoring": [str, callable, None],
        "solver": [StrOptions({"auto", "cg", "direct", "cd"})],
        "fit_intercept": ["boolean"],
        "tol": TOL + [None],
        "max_iter": POSITIVE_INT + [None],
        "n_jobs": N_JOBS,
        "random_state": RANDOM_STATE,
        "verbose": VERBOSE,
    }

    # ------------------------------------------------------------------ the model class
    def _model_class(self):
        from .models import RBClassifier, RBRegressor

        return RBClassifier if self._classifier else RBRegressor

    def _n_grids(self, n_features_in, n_samples):
        """n_grids, with "auto" resolved as the models resolve it (rbcd.models.auto_n_grids:
        256, or 512 above 64 features, 1,024 up to 2,048 rows, 512 up to 4,096; more for
        regression above 2,048 rows, here within SEARCH_REGRESSION_ENTRIES up to
        SEARCH_REGRESSION_GRIDS), raised on small data up to SEARCH_MAX_GRIDS (module
        constants)."""
        if not isinstance(self.n_grids, str):
            return check_int(self.n_grids, "n_grids", low=1)   # bools refused, as the models do
        from .models import auto_n_grids, small_data_grids

        return max(int(auto_n_grids(n_features_in, n_samples, regression=not self._classifier,
                                    regression_grids=SEARCH_REGRESSION_GRIDS,
                                    regression_entries=SEARCH_REGRESSION_ENTRIES)),
                   small_data_grids(n_samples, SEARCH_MAX_GRIDS, n_features_in))

    def _model(self, sigma, alpha, seed=None, n_grids=None, linear=0.0, multi_class="ovr"):
        """The RBClassifier / RBRegressor of one candidate (``linear``: the weight of its
        linear term, rbcd.solvers._linear; 0 none; ``multi_class``: the classifier's)."""
        extra = ({"class_weight": self.class_weight, "multi_class": multi_class}
                 if self._classifier else {})
        return self._model_class()(
            n_grids=self.n_grids if n_grids is None else n_grids, sigma=float(sigma), solver=self.solver, alpha=float(alpha),
            fit_intercept=self.fit_intercept, tol=self.tol, max_iter=self.max_iter,
            n_jobs=self.n_jobs, random_state=self.random_state if seed is None else seed,
            linear=float(linear), **extra)

    def _effective_tol(self):
        """tol, or the model's own default for the solver when None (so that the search
        solves to the tolerance the refit uses)."""
        if self.tol is not None:
            return float(self.tol)
        model = self._model(1.0, 1.0)
        effective = getattr(model, "_effective", None)
        if effective is not None:
            return float(effective()[2])
        return 1e-6 if self._ridge() else 1e-4

    def _ridge(self):
        return self.solver in ("auto", "cg", "direct")

    def _loo(self, n_samples):
        """Leave-one-out search: cv=None with a ridge solver, except between the sample's
        limit and KFOLD_MAX_ROWS rows (:meth:`_auto_folds`; module docstring)."""
        return self.cv is None and self._ridge() and not self._auto_folds(n_samples)

    def _auto_folds(self, n_samples):
        """True where cv=None with a ridge solver runs KFOLD_SPLITS shuffled folds on all
        rows: above LOO_MAX_ROWS / KFOLD_SAMPLE_SHARE rows (the leave-one-out sample would
        hold less than that share of them), up to KFOLD_MAX_ROWS."""
        from .solvers import _direct

        return (self.cv is None and self._ridge()
                and _direct.LOO_MAX_ROWS < KFOLD_SAMPLE_SHARE * n_samples
                and n_samples <= KFOLD_MAX_ROWS)

    def _folds(self, y, seed):
        """The cross-validation splitter: ``cv``; cv=None: KFOLD_SPLITS folds shuffled with
        ``seed`` (stratified for classifiers) where :meth:`_auto_folds` holds, 5 plain folds
        with solver="cd" (as GridSearchCV's cv=None)."""
        from sklearn.model_selection import KFold, StratifiedKFold

        if self.cv is None and self._auto_folds(y.shape[0]):
            kind = StratifiedKFold if self._classifier else KFold
            return kind(KFOLD_SPLITS, shuffle=True, random_state=seed)
        return check_cv(5 if self.cv is None else self.cv, y, classifier=self._classifier)

    def _alpha_grid(self, n_samples, total_weight=None):
        """The candidate alphas in the model's units. None: the ridge solvers' alpha="auto"
        candidates (rbcd.solvers._direct.AUTO_ALPHAS_PER_ROW times the total weight) for
        the leave-one-out search, DEFAULT_ALPHAS_CG_PER_ROW times the rows with folds
        (given or automatic), DEFAULT_ALPHAS_CD for cd."""
        if self.alphas is None:
            if self._loo(n_samples):
                from .solvers._direct import AUTO_ALPHAS_PER_ROW
                return AUTO_ALPHAS_PER_ROW * (n_samples if total_weight is None else total_weight)
            if self._ridge():
                return np.array(DEFAULT_ALPHAS_CG_PER_ROW) * n_samples
            return np.array(DEFAULT_ALPHAS_CD)
        return _positive_grid(self.alphas, "alphas")

    # ------------------------------------------------------------------ fit
    @fit_context
    def fit(self, X, y, sample_weight=None, groups=None):
        """Search the (sigma, alpha) grid by cross-validation, then refit the best on X.

        X : dense (n_samples, n_features); y : labels (RBClassifierCV) or targets;
        sample_weight : optional, used in every fold's fit and validation score (as
        GridSearchCV does); groups : optional group labels of the rows, for a ``cv``
        splitter that takes them (GroupKFold, LeaveOneGroupOut, ...; GridSearchCV's
        ``groups``).
        """
        if groups is not None and self.cv is None:
            raise ValueError("groups are for a cv splitter that takes them (cv=GroupKFold(5), "
                             "say); with cv=None the search scores by leave-one-out or its "
                             "own shuffled folds")
        from .binning import RandomBinning
        from .solvers.cd import pow2_scale

        factors = _positive_grid(self.sigma_factors, "sigma_factors")
        if isinstance(self.sigma, (bool, np.bool_)):
            raise ValueError(f"sigma must be a positive number or 'scale', got {self.sigma!r}")
        if self.alphas is not None:
            _positive_grid(self.alphas, "alphas")     # parameter errors before the data's
        if not self._classifier and y is not None and np.asarray(y).dtype.kind in "USO":
            check_regression_target(y)   # strings or None in y: the models' message
        frame = X
        X, y = validate_data(self, X, y, accept_sparse=False, dtype=np.float64,
                             multi_output=not self._classifier, y_numeric=not self._classifier)
        # the refit takes a data frame as given (GridSearchCV's way): best_estimator_ then
        # checks the column names of the frames it is given, as a model fitted on it would
        refit_rows = frame if "feature_names_in_" in self.__dict__ else X
        alphas = self._alpha_grid(X.shape[0])
        if self._classifier:
            check_classification_targets(y)
            self.classes_ = np.unique(y)
            if self.classes_.shape[0] < 2:
                raise ValueError(f"{type(self).__name__} needs at least 2 classes in y, got 1 "
                                 f"class: {self.classes_[0].tolist()!r}")
            if self.multi_class == "ovo" and not self._ridge():
                raise ValueError("multi_class='ovo' needs a ridge solver (solver='auto', "
                                 "'cg' or 'direct'); solver='cd' is one-vs-rest")
            self._schemes = {"ovr": ("ovr",), "ovo": ("ovo",),
                             "auto": ("ovr", "ovo") if self._loo(X.shape[0]) else ("ovr",)
                             }[self.multi_class]
        # the models' checks (finite, >= 0, a positive sum, one per row), before any work
        sample_weight = check_sample_weight(sample_weight, X.shape[0])
        # the models' rule: n_grids="auto" counts the rows of positive weight
        n_grids = self._n_grids(X.shape[1], X.shape[0] if sample_weight is None
                                else int(np.count_nonzero(sample_weight)))
        # one int seed for every fold, sigma and the refit: the same grids for a given sigma
        # in every fold (what GridSearchCV's clones of an RBClassifier with an int seed do)
        seed = self.random_state
        if not isinstance(seed, Integral):
            seed = int(check_random_state(seed).randint(np.iinfo(np.int32).max))
        base = (scale_sigma(X, sample_weight=sample_weight) if isinstance(self.sigma, str)
                else float(self.sigma))
        self.sigma_base_ = base
        sigmas = factors * base
        if self.cv is None and self._ridge() and self.scoring is not None:
            # whatever the rows: the cv=None search scores by accuracy or R^2
            raise ValueError("scoring needs cross-validation folds: with cv=None the "
                             "candidates are scored by their exact leave-one-out accuracy "
                             "(classification) or R^2 (regression), or on larger data by "
                             "those of 5 folds; give cv=5, say, to use another scorer")
        if self._loo(X.shape[0]):
            if X.shape[0] < 2:
                raise ValueError(f"{type(self).__name__} with cv=None scores its candidates "
                                 f"by leave-one-out, which needs at least 2 rows (got "
                                 f"n_samples = {X.shape[0]}); fit the model itself "
                                 f"({self._model_class().__name__}) on one row")
            total = X.shape[0] if sample_weight is None else float(sample_weight.sum())
            alphas = self._alpha_grid(X.shape[0], total)
            # regression targets in power-of-two units (1 within 2**+-100): ridge's best
            # alpha and R^2 do not depend on the targets' scale, and huge or tiny targets
            # would square to inf or 0 in the leave-one-out errors
            ys = y if self._classifier else y / pow2_scale(y)
            self._search_loo(X, ys, sample_weight, sigmas, factors, alphas, n_grids, seed)
            return self._refit(refit_rows, y, sample_weight, seed, n_grids, factors, alphas)
        if groups is not None:
            groups = np.asarray(groups)
            if groups.shape[0] != X.shape[0]:
                raise ValueError(f"groups has {groups.shape[0]} entries but X has "
                                 f"{X.shape[0]} rows")
        folds = list(self._folds(y, seed).split(X, y, groups))
        if self._classifier and not self._ridge():
            # a fold without two classes: CDClassifier refuses it (ridge fits one class
            # against its absence), said here in the search's terms, not the fold's
            for fi, (train, _) in enumerate(folds):
                present = np.unique(y[train])
                if present.shape[0] < 2:
                    counts = [int(np.sum(y == c)) for c in self.classes_]
                    raise ValueError(
                        f"{type(self).__name__}: the training rows of fold {fi} hold only "
                        f"class {present[0].tolist()!r} (the classes have "
                        f"{dict(zip(self.classes_.tolist(), counts))} rows): solver='cd' "
                        f"needs two classes in every fold's training rows; use fewer folds "
                        f"(cv), more rows of the rare class, or a ridge solver")
        scorer = check_scoring(self._solver_template(alphas[0]), scoring=self.scoring)
        tol = self._effective_tol()
        n_s, n_a, n_f = sigmas.shape[0], alphas.shape[0], len(folds)
        scores = np.empty((n_a, n_s, n_f))
        fit_time = np.zeros((n_a, n_s, n_f))
        score_time = np.zeros((n_a, n_s, n_f))
        n_iter = np.zeros((n_a, n_s, n_f), dtype=np.int64)
        for si, sigma in enumerate(sigmas):
            t0 = time.perf_counter()
            shared = self._shared_gram(X, y, folds, n_grids, float(sigma), alphas, seed)
            t_shared = (time.perf_counter() - t0) / n_f
            for fi, (train, test) in enumerate(folds):
                t0 = time.perf_counter()
                s = None if sample_weight is None else sample_weight[train]
                if shared is not None:        # the rows' Gram matrix: the fold's blocks
                    Z, P, op = shared             # Z: every row's binning
                    Zv = Z[test]
                    solved = self._solve_shared(op, P, train, y[train], s, alphas, tol)
                    t_bin = t_shared
                    train_features = _Rows(Z, train)
                else:
                    rb = RandomBinning(n_grids=n_grids, sigma=float(sigma), n_jobs=self.n_jobs,
                                       random_state=seed).set_output(transform="default")
                    Z, cols = rb.fit_transform(X[train], return_columns=True)
                    Zv = rb.transform(X[test])
                    solved = self._solve_alphas(Z, y[train], s, cols, alphas, tol, seed)
                    t_bin = time.perf_counter() - t0
                    train_features = _Rows(Z, None)
                for ai, shell, t_fit, it in solved:
                    if self._classifier and self._ridge():
                        # what the candidate RBClassifier answers a scorer: its predict_proba
                        # too (calibration="train"), which the ridge solver lacks
                        shell = _CandidateScores(shell, train_features, y[train], s)
                    t1 = time.perf_counter()
                    if sample_weight is None:
                        scores[ai, si, fi] = scorer(shell, Zv, y[test])
                    else:
                        scores[ai, si, fi] = scorer(shell, Zv, y[test],
                                                    sample_weight=sample_weight[test])
                    score_time[ai, si, fi] = time.perf_counter() - t1
                    fit_time[ai, si, fi] = t_fit + t_bin / n_a  # the binning, shared by the alphas
                    n_iter[ai, si, fi] = it
                if self.verbose:
                    best = scores[:, si, fi].max()
                    print(f"[{type(self).__name__}] sigma={sigma:.4g} fold {fi + 1}/{n_f}: "
                          f"{Z.shape[1]} features, best score {best:.4f} over {n_a} alphas "
                          f"in {time.perf_counter() - t0:.3f}s", flush=True)
        self._store_results(sigmas, factors, alphas, scores, fit_time, score_time, n_iter)
        return self._refit(refit_rows, y, sample_weight, seed, n_grids, factors, alphas)

    def _refit(self, X, y, sample_weight, seed, n_grids, factors, alphas):
        """Warn when the best candidate lies on an edge of the grid, refit it on all rows
        (X: the validated array, or the data frame the search was given)."""
        best = self.cv_results_["params"][self.best_index_]
        self._warn_on_edges(best, factors, alphas)
        self.best_estimator_ = self._model(best["sigma"], best["alpha"], seed, n_grids,
                                           best.get("linear", 0.0),
                                           best.get("multi_class", "ovr"))
        t0 = time.perf_counter()
        self.best_estimator_.fit(X, y, sample_weight=sample_weight)
        self.refit_time_ = time.perf_counter() - t0
        self.sigma_ = best["sigma"]
        self.alpha_ = best["alpha"]
        return self

    def _warn_on_edges(self, best, factors, alphas):
        """A UserWarning, with the way to extend the grid, when the best sigma factor or
        alpha is the smallest or largest of its grid (and the grid has more than one)."""
        factor = best["sigma"] / self.sigma_base_
        notes = []
        for name, value, grid, extend in (
                ("sigma factor", factor, factors, "sigma_factors"),
                ("alpha", best["alpha"], alphas, "alphas")):
            grid = np.asarray(grid, dtype=np.float64)
            if grid.shape[0] < 2:
                continue
            if np.isclose(value, grid.min()):
                notes.append(f"the best {name} {value:.3g} is the smallest of the grid: add "
                             f"smaller values to {extend} (e.g. {grid.min() / 4:.3g})")
            elif np.isclose(value, grid.max()):
                notes.append(f"the best {name} {value:.3g} is the largest of the grid: add "
                             f"larger values to {extend} (e.g. {grid.max() * 4:.3g})")
        if notes:
            warn_user(f"{type(self).__name__}: " + "; ".join(notes) + ".", UserWarning)

    def _search_loo(self, X, y, sample_weight, sigmas, factors, alphas, n_grids, seed):
        """Exact leave-one-out over every alpha per sigma: one binning and one
        eigendecomposition of the dual Gram matrix per sigma (rbcd.solvers._direct
        .loo_select, as alpha="auto"), on at most LOO_MAX_ROWS rows (a fixed sample above
        that many, the alphas scaled to the sample's weight). Scores: leave-one-out
        accuracy (classification, weighted) or R^2 (regression)."""
        from .binning import RandomBinning
        from .solvers._direct import (check_loo_sample_weight, loo_rows, loo_select,
                                      loo_select_weights, plain_gram)
        from .solvers._ovo import loo_ovo_scores, pair_shares
        from .solvers._linear import (AUTO_CANDIDATES, AUTO_MAX_FEATURES, AUTO_REGRESSION,
                                      LinearTerm, centred_weighted)
        from .solvers.cg import _RidgeSystem, one_vs_rest_targets
        from ._threads import effective_n_threads

        n = X.shape[0]
        rows = loo_rows(n)
        # the models' linear="auto" (rbcd.solvers._linear): where the leave-one-out scores
        # every row, each (sigma, alpha) takes the better weight of AUTO_CANDIDATES
        # (classification) or the weight of AUTO_REGRESSION
        weights = AUTO_CANDIDATES if self._classifier else AUTO_REGRESSION
        schemes = self._multi_classes()
        M = (LinearTerm(X, sample_weight).block(X) if rows.shape[0] == n and X.shape[1] <= AUTO_MAX_FEATURES
             and "ovr" in schemes else None)
        Xs, ys = X[rows], y[rows]
        s = np.ones(n) if sample_weight is None else sample_weight
        s_rows = s[rows]
        s_pairs = s_rows                # one-vs-one: class_weight within each pair
        if self._classifier:
            _, T = one_vs_rest_targets(ys)
            if self.class_weight is not None:
                s_rows = s_rows * compute_sample_weight(self.class_weight, ys)
            index = np.searchsorted(self.classes_, ys)
            # each pair's share of a candidate alpha (RidgeCGClassifier's "ovo" rule)
            shares = pair_shares(index, self.classes_.shape[0], s_pairs)

            # a class_weight dict: over all the classes, each pair its rows' weights
            cw_rows = dict_class_weight_rows(self.class_weight, ys)

            def pair_weight(r):
                if self.class_weight is None:
                    return s_pairs[r]
                if cw_rows is not None:
                    return s_pairs[r] * cw_rows[r]
                return s_pairs[r] * compute_sample_weight(self.class_weight, ys[r])
        else:
            T = np.asarray(ys, dtype=np.float64).reshape(ys.shape[0], -1)
        check_loo_sample_weight(s_rows, n, f"{type(self).__name__} with cv=None")
        shrink = float(s[rows].sum()) / float(s.sum())   # the sample's share of the data term
        n_threads = effective_n_threads(self.n_jobs)
        n_s, n_a = sigmas.shape[0], alphas.shape[0]
        scores = np.empty((n_a, n_s, 1))
        linear = np.zeros((n_a, n_s))
        multi = np.full((n_a, n_s), schemes[0], dtype=object)
        fit_time = np.zeros((n_a, n_s, 1))
        sw = s_rows / s_rows.sum()
        spread = float(np.einsum("i,ik->", sw, (T - sw @ T) ** 2))    # for R^2
        for si, sigma in enumerate(sigmas):
            t0 = time.perf_counter()
            rb = RandomBinning(n_grids=n_grids, sigma=float(sigma), n_jobs=self.n_jobs,
                               random_state=seed).set_output(transform="default")
            Z, cols = rb.fit_transform(Xs, return_columns=True)
            weighted = sample_weight is not None or getattr(self, "class_weight", None) is not None
            system = _RidgeSystem(Z, T, s_rows if weighted else None, self.fit_intercept,
                                  n_threads, cols)
            if "ovr" not in schemes:
                sc = None
            elif M is None:
                _, _, sc = loo_select(system, cols, alphas * shrink, self._classifier,
                                      solution=False)
            else:   # one eigendecomposition for every weight (loo_select_weights)
                Ms, _ = centred_weighted(M, system)
                per = loo_select_weights(system, cols, alphas * shrink, self._classifier, Ms,
                                         weights, solution=False)
                sc = per[0][2]
                linear[:, si] = weights[0]
                for c, (_, _, sc_c) in zip(weights[1:], per[1:]):
                    # per alpha the better (primary, secondary) score; ties keep the earlier
                    better = _strictly_better(sc_c, sc)
                    sc = np.where(better[:, None], sc_c, sc)
                    linear[better, si] = c
            if "ovo" in schemes:    # one eigendecomposition per pair (rbcd.solvers._ovo)
                sc_o = loo_ovo_scores(plain_gram(system, cols), index, self.classes_.shape[0],
                                      s_rows, alphas * shrink, self.fit_intercept,
                                      pair_weight, shares)
                if sc is None:
                    sc = sc_o
                else:   # per alpha the better scheme; ties keep one-vs-rest
                    better = _strictly_better(sc_o, sc)
                    sc = np.where(better[:, None], sc_o, sc)
                    multi[better, si] = "ovo"
                    linear[better, si] = 0.0
            if self._classifier:
                scores[:, si, 0] = sc[:, 0]
            else:
                scores[:, si, 0] = 1.0 + sc[:, 0] / spread if spread > 0 else sc[:, 0]
            fit_time[:, si, 0] = (time.perf_counter() - t0) / n_a
            if self.verbose:
                print(f"[{type(self).__name__}] sigma={sigma:.4g}: {Z.shape[1]} features, "
                      f"best leave-one-out score {scores[:, si, 0].max():.4f} over {n_a} "
                      f"alphas on {rows.shape[0]} rows in {time.perf_counter() - t0:.3f}s",
                      flush=True)
        self._store_results(sigmas, factors, alphas, scores, fit_time, np.zeros_like(fit_time),
                            np.ones(scores.shape, dtype=np.int64),
                            linear if M is not None else None,
                            multi if len(schemes) > 1 or schemes == ("ovo",) else None)

    def _store_results(self, sigmas, factors, alphas, scores, fit_time, score_time, n_iter,
                       linear=None, multi=None):
        """cv_results_ in GridSearchCV's layout and candidate order: ParameterGrid over the
        sorted keys ("alpha", "sigma"), the last key varying fastest. ``linear`` (n_alphas,
        n_sigmas): the linear term's weight each candidate took (params' "linear",
        ``param_linear``); None: no term searched."""
        n_a, n_s, n_f = scores.shape
        flat = scores.reshape(n_a * n_s, n_f)
        params = [{"alpha": float(a), "sigma": float(s)} for a in alphas for s in sigmas]
        if linear is not None:
            for p, c in zip(params, linear.reshape(-1)):
                p["linear"] = float(c)
        if multi is None and self._multi_classes() == ("ovo",):
            multi = np.full((n_a, n_s), "ovo")
        if multi is not None:
            for p, mc in zip(params, multi.reshape(-1)):
                p["multi_class"] = str(mc)
        mean = flat.mean(axis=1)
        # ranks as GridSearchCV's: equal means share the smallest rank
        order = np.argsort(-mean, kind="stable")
        rank = np.empty(mean.shape[0], dtype=np.int32)
        for pos, idx in enumerate(order):
            rank[idx] = pos + 1 if pos == 0 or mean[idx] != mean[order[pos - 1]] else rank[order[pos - 1]]
        results = {
            "params": params,
            "param_alpha": np.ma.MaskedArray([p["alpha"] for p in params]),
            "param_sigma": np.ma.MaskedArray([p["sigma"] for p in params]),
            "param_sigma_factor": np.ma.MaskedArray(np.tile(factors, n_a)),
            "mean_test_score": mean,
            "std_test_score": _std_of_scores(flat),
            "rank_test_score": rank,
            "mean_fit_time": fit_time.reshape(n_a * n_s, n_f).mean(axis=1),
            "std_fit_time": fit_time.reshape(n_a * n_s, n_f).std(axis=1),
            "mean_score_time": score_time.reshape(n_a * n_s, n_f).mean(axis=1),
            "std_score_time": score_time.reshape(n_a * n_s, n_f).std(axis=1),
            "mean_n_iter": n_iter.reshape(n_a * n_s, n_f).mean(axis=1),
        }
        if linear is not None:
            results["param_linear"] = np.ma.MaskedArray(linear.reshape(-1))
        if multi is not None:
            results["param_multi_class"] = np.ma.MaskedArray(multi.reshape(-1).astype(object))
        for k in range(n_f):
            results[f"split{k}_test_score"] = flat[:, k]
        self.cv_results_ = results
        self.n_splits_ = n_f
        self.best_index_ = int(np.flatnonzero(rank == 1)[0])
        self.best_score_ = float(mean[self.best_index_])
        self.best_params_ = dict(params[self.best_index_])
        undefined = np.isneginf(mean)
        if undefined.any():
            # leave-one-out's score where a candidate's fit reproduces a row exactly (alpha
            # 0 with more bins than rows): undefined, scored -inf (rbcd.solvers._direct)
            which = sorted({float(params[i]["alpha"]) for i in np.flatnonzero(undefined)})
            message = (f"{type(self).__name__}: {int(undefined.sum())} of {mean.shape[0]} "
                       f"candidates (alpha {', '.join(f'{a:g}' for a in which)}) have no "
                       f"leave-one-out score: their fits reproduce the rows exactly; use "
                       f"alphas > 0 or cv=K folds")
            if undefined.all():
                raise ValueError(message + " (no candidate could be chosen)")
            warnings.warn(message, UserWarning, stacklevel=4)

    # ------------------------------------------------------------------ one fold, all alphas
    def _solver_template(self, alpha):
        """An unfitted solver estimator (for check_scoring: its type decides the response)."""
        from .solvers.cd import CDClassifier, CDRegressor
        from .solvers.cg import RidgeCG, RidgeCGClassifier

        if self._ridge():
            return (RidgeCGClassifier if self._classifier else RidgeCG)(alpha=float(alpha))
        return (CDClassifier if self._classifier else CDRegressor)(alpha=float(alpha))

    def _preconditioner(self, Z):
        # RBClassifier's preconditioner="auto" with the grid structure (rbcd.models): projected
        # Jacobi up to AUTO_JACOBI_BINS_PER_ROW bins per row, plain CG above
        from .models import _preconditioner

        return _preconditioner("auto", None, Z.shape, True)

    def _solve_alphas(self, Z, y, sample_weight, columns, alphas, tol, seed):
        """Yield (alpha index, fitted solver, seconds, iterations) for every alpha;
        ``columns`` is the RBColumns of the training rows' Z (the grid structure)."""
        if self._multi_classes() == ("ovo",):
            yield from self._solve_ovo(Z, y, sample_weight, columns, alphas, tol)
        elif self._ridge():
            yield from self._solve_cg(Z, y, sample_weight, columns, alphas, tol)
        else:
            yield from self._solve_cd(Z, y, sample_weight, columns, alphas, tol, seed)

    def _shell(self, alpha, coef, intercept, classes, y_ndim, n_features, n_iter, tol,
               copy=True):
        """The fitted RidgeCG / RidgeCGClassifier that scores one alpha of a fold: ``coef``
        (k, D) and ``intercept`` (k,) of its k targets; a single target of a regression
        becomes 1-D coefficients and a float intercept, as RidgeCG stores them. ``copy``
        False: ``coef`` is a C-ordered float64 array of the caller's that the shell may own
        (no copy of D k doubles)."""
        from .solvers.cg import RidgeCG, RidgeCGClassifier

        if copy or not (coef.dtype == np.float64 and coef.flags.c_contiguous):
            coef = np.array(coef, dtype=np.float64, order="C")         # a copy
        intercept = np.array(intercept, dtype=np.float64)
        if self._classifier:
            shell = RidgeCGClassifier(alpha=float(alpha), fit_intercept=self.fit_intercept,
                                      tol=tol, max_iter=self.max_iter,
                                      class_weight=self.class_weight, n_jobs=self.n_jobs)
            shell.classes_ = classes
        else:
            shell = RidgeCG(alpha=float(alpha), fit_intercept=self.fit_intercept, tol=tol,
                            max_iter=self.max_iter, n_jobs=self.n_jobs)
            if y_ndim == 1:
                coef, intercept = coef[0], float(intercept[0])
        shell.coef_, shell.intercept_ = coef, intercept
        shell.n_features_in_ = n_features
        shell.n_iter_ = n_iter
        return shell

    def _solve_cg(self, Z, y, sample_weight, columns, alphas, tol):
        from .solvers.cg import RidgeCG

        t0 = time.perf_counter()
        s = sample_weight
        if self._classifier:
            # RidgeCGClassifier's targets: -1/+1 one-vs-rest columns (one for two classes),
            # class_weight folded into the sample weights
            from .solvers.cg import one_vs_rest_targets
            classes, T = one_vs_rest_targets(y)
            if self.class_weight is not None:
                cw = compute_sample_weight(self.class_weight, y)
                s = cw if s is None else s * cw
        else:
            classes, T = None, np.asarray(y, dtype=np.float64).reshape(y.shape[0], -1)
        k = T.shape[1]
        n_a = alphas.shape[0]
        solver = RidgeCG(alpha=np.repeat(alphas, k), solver=self.solver,
                         fit_intercept=self.fit_intercept, tol=tol,
                         max_iter=self.max_iter, preconditioner=self._preconditioner(Z),
                         n_jobs=self.n_jobs)
        solver.fit(Z, np.tile(T, (1, n_a)), sample_weight=s, columns=columns)
        seconds = (time.perf_counter() - t0) / n_a
        coef = np.asarray(solver.coef_).reshape(n_a * k, -1)
        intercept = np.asarray(solver.intercept_, dtype=np.float64).reshape(n_a * k)
        for ai, a in enumerate(alphas):
            block = slice(ai * k, (ai + 1) * k)
            shell = self._shell(a, coef[block], intercept[block], classes, y.ndim, Z.shape[1],
                                np.asarray(solver.n_iter_)[block], tol)
            yield ai, shell, seconds, int(np.max(shell.n_iter_))

    def _shared_gram(self, X, y, folds, n_grids, sigma, alphas, seed):
        """(Z, P, op) for the folds of one sigma, or None: Z the binning of ALL rows, P = Z Z^T
        (n x n, symmetric, rbcd.solvers._direct.plain_gram), op Z's products on n_jobs
        threads (rbcd.solvers.cg._Products, over the grid labels), where a ridge solver's folds
        are solved cheaper from P's blocks than each on its own
        (rbcd.solvers._direct.shared_dual_pays; with solver="direct" against the folds'
        own direct forms; never for one-vs-one or solver="cg", nor where the matrices do
        not fit in the memory available). A fold's Gram matrix is P's block of its
        training rows: an entry counts the grids where two rows share a bin, which the
        other rows do not change (the grids depend on the seed and sigma only). So one
        binning and one Gram matrix serve all folds, each fold's solution being the one
        its own binning gives up to rounding; Z's columns include bins that only a fold's
        validation rows reach, where that fold's coefficients are 0, as a model of the
        fold's own binning has no column there."""
        from .binning import RandomBinning
        from .solvers import _direct
        from .solvers._ovo import symmetric
        from ._threads import effective_n_threads
        from .solvers.cg import _RidgeSystem

        if self.solver not in ("auto", "direct") or self._multi_classes() != ("ovr",):
            return None
        from ._memory import available_memory

        n = X.shape[0]
        if 8.0 * n * n > _direct.MAX_GRAM_BYTES:
            return None
        avail = available_memory()
        if avail is not None and 8.0 * 4 * n * n > avail:   # P, a fold's block and its factor
            return None
        rb = RandomBinning(n_grids=n_grids, sigma=sigma, n_jobs=self.n_jobs,
                           random_state=seed).set_output(transform="default")
        Z, cols = rb.fit_transform(X, return_columns=True)
        k = (1 if y.ndim == 1 else y.shape[1]) if not self._classifier else (
            1 if self.classes_.shape[0] == 2 else self.classes_.shape[0])
        n_train = max(len(train) for train, _ in folds)
        if not _direct.shared_dual_pays(n, n_train, Z.shape[1], n_grids, k, alphas.shape[0],
                                        len(folds), direct=self.solver == "direct"):
            return None
        system = _RidgeSystem(Z, np.zeros((n, 1)), None, False,
                              effective_n_threads(self.n_jobs), cols)
        return Z, symmetric(_direct.plain_gram(system, cols)), system.op

    def _solve_shared(self, op, P, train, y, sample_weight, alphas, tol):
        """As :meth:`_solve_cg` (the same shells, yielded per alpha), the fold's ridge
        problems solved in the dual form from the block of P = Z Z^T of its training rows
        ``train`` (op: the products of Z, all rows' binning): centred by the rows' weighted
        mean, weighted, one Cholesky factorization per alpha, several at once on n_jobs
        threads (rbcd.solvers._direct.cholesky_solves); the coefficients
        W = Zc^T S^1/2 A over Z's columns, every alpha's from one product Z^T [U_1 .. U_m]
        on op's threads (the other rows' entries of the multipliers 0)."""
        from .solvers import _direct, _gram
        from ._threads import effective_n_threads, limit_blas

        t0 = time.perf_counter()
        w = np.ones(train.shape[0]) if sample_weight is None else np.asarray(
            sample_weight, dtype=np.float64)
        if self._classifier:
            from .solvers.cg import one_vs_rest_targets
            classes, T = one_vs_rest_targets(y)
            if self.class_weight is not None:
                w = w * compute_sample_weight(self.class_weight, y)
        else:
            classes, T = None, np.asarray(y, dtype=np.float64).reshape(y.shape[0], -1)
        k = T.shape[1]
        m = alphas.shape[0]
        S = float(w.sum())
        sw = np.sqrt(w)
        rows = np.ascontiguousarray(train, dtype=np.int64)
        threads = effective_n_threads(self.n_jobs)
        # the fold's system straight from P's rows (no gathered copy of its block), lower
        # triangle: K = diag(sw) (P_tt - kbar 1^T - 1 kbar^T + kk) diag(sw)
        if self.fit_intercept:
            kbar = _gram.block_row_sums(P, rows, w, threads) / S   # zbar^T z_j, j in train
            kk = float(w @ kbar) / S
            tbar = (w @ T) / S
        else:
            kbar, kk = None, 0.0
            tbar = np.zeros(k)
        K = np.empty((rows.shape[0], rows.shape[0]))
        _gram.centred_block(P, rows, kbar, kk, sw, K, threads)
        rhs = np.asfortranarray(sw[:, None] * (T - tbar[None, :]))
        # every alpha's factorization at once, n_jobs of them at a time (one BLAS thread
        # each: the bits of one thread)
        solved = _direct.cholesky_solves(K, [rhs] * m, alphas, n_threads=threads)
        U_all = np.zeros((op.shape[0], m * k))        # the multipliers of all alphas
        for ai, (a, A) in enumerate(zip(alphas, solved)):
            if A is None:                    # not positive definite: alpha = 0, K singular
                with limit_blas(1):          # rbcd.solvers._direct's LAPACK_THREADS
                    A = _direct._eig_solve(K.copy(), rhs, float(a))
            U = sw[:, None] * A
            if self.fit_intercept:       # Zc^T U = Z^T (U - w sum(U) / S)
                U -= w[:, None] * (U.sum(axis=0) / S)[None, :]
            U_all[train, ai * k:(ai + 1) * k] = U
        coef_all = op.tdot(U_all)                     # (D, m k)
        seconds = (time.perf_counter() - t0) / m
        for ai, a in enumerate(alphas):
            block = slice(ai * k, (ai + 1) * k)
            coef = np.ascontiguousarray(coef_all[:, block].T)            # (k, D)
            # zbar^T W = w^T P_tt U / S = kbar^T U
            intercept = (tbar - kbar @ U_all[train, block] if self.fit_intercept
                         else np.zeros(k))
            shell = self._shell(a, coef, intercept, classes, y.ndim, op.shape[1],
                                np.ones(k, dtype=np.int64), tol, copy=False)
            yield ai, shell, seconds, 1

    def _solve_ovo(self, Z, y, sample_weight, columns, alphas, tol):
        """multi_class="ovo" with folds: a one-vs-one RidgeCGClassifier per alpha."""
        from .solvers.cg import RidgeCGClassifier

        for ai, a in enumerate(alphas):
            t0 = time.perf_counter()
            est = RidgeCGClassifier(alpha=float(a), solver=self.solver,
                                    fit_intercept=self.fit_intercept, tol=tol,
                                    max_iter=self.max_iter,
                                    preconditioner=self._preconditioner(Z),
                                    class_weight=self.class_weight, n_jobs=self.n_jobs,
                                    multi_class="ovo")
            est.fit(Z, y, sample_weight=sample_weight, columns=columns)
            yield ai, est, time.perf_counter() - t0, int(np.max(est.n_iter_))

    def _multi_classes(self):
        """The multi-class schemes the search compares: ("ovr",) for regression, two
        classes or multi_class="ovr"; ("ovo",) for "ovo"; both for "auto" where the
        leave-one-out search scores them (set by fit: with folds "auto" is one-vs-rest)."""
        if not self._classifier or len(getattr(self, "classes_", ())) <= 2:
            return ("ovr",)
        return self.__dict__.get("_schemes", ("ovr",))

    def _solve_cd(self, Z, y, sample_weight, columns, alphas, tol, seed):
        from .solvers.cd import CDClassifier, CDRegressor

        extra = {"class_weight": self.class_weight} if self._classifier else {}
        cls = CDClassifier if self._classifier else CDRegressor
        est = cls(alpha=float(alphas.max()), fit_intercept=self.fit_intercept, tol=tol,
                  warm_start=True, n_jobs=self.n_jobs, random_state=seed, **extra)
        # the regularization path: largest alpha first, each fit warm-started from the last
        for ai in np.argsort(-alphas, kind="stable"):
            t0 = time.perf_counter()
            est.set_params(alpha=float(alphas[ai]))
            est.fit(Z, y, sample_weight=sample_weight, columns=columns)
            seconds = time.perf_counter() - t0
            yield int(ai), copy.deepcopy(est), seconds, int(np.max(est.n_iter_))

    # ------------------------------------------------------------------ delegation
    def _check_fitted(self):
        check_is_fitted(self, "best_estimator_")

    def _features(self, X):
        """X checked against the search's fit (its feature count, and its column names where
        it was fitted on a data frame: reordered or renamed columns are an error), as an
        array for best_estimator_'s methods without their name check (``names=False``:
        checked here, in the search's name); finiteness is the model's check."""
        self._check_fitted()
        if plain_float_array(X):
            return plain_checked(self, X, reset=False)
        return validate_data(self, X, reset=False, accept_sparse=False, dtype=np.float64,
                             ensure_all_finite=False)

    def predict(self, X):
        """The refitted best model's predictions."""
        X = self._features(X)                  # (fitted: checked first)
        return self.best_estimator_._predict(X, names=False)

    @property
    def n_iter_(self):
        """The refitted best model's iterations (CG) or epochs (CD)."""
        self._check_fitted()
        return self.best_estimator_.n_iter_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags


_CV_PARAMS_DOC_HEAD = """
    Parameters
    ----------
    n_grids : int or "auto", default "auto"
        Random grids R. "auto": as in the model (256, or 512 above 64 features, and on
        small data the power of two that keeps rows x grids, and features x grids, within
        2**21, up to 1,024; regression above 2,048 rows up to 2,048 grids within 2**24
        entries: rbcd.models.auto_n_grids), here up to 2,048 (2,048 grids up to 1,024 rows
        and features), and for regression above 2,048 rows up to 8,192 grids within 2**26
        entries (8,192 grids up to 8,192 rows; SEARCH_REGRESSION_GRIDS): the refit
        ``best_estimator_`` keeps the search's grids.
    sigma : "scale" or float, default "scale"
        The base bandwidth the multipliers scale: "scale" is the model's ``sigma="scale"``
        value on all training rows, half of ``rbcd.median_l1_distance(X)`` (its pairs
        drawn by ``sample_weight`` when given), stored as ``sigma_base_``.
    sigma_factors : sequence of float > 0, default (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
        Candidate sigmas are ``factor * sigma_base_``.
    alphas : sequence of float >= 0 or None
        Candidate penalties; None -> for leave-one-out (cv=None) the models' alpha="auto"
        candidates, total weight * logspace(-6, 1, 15); with folds (given, or cv=None's
        on 2,001-20,000 rows), n_samples * (1e-5, 1e-4, 1e-3, 1e-2) for the ridge
        solvers (their alpha is in sum-of-squares units, like Ridge, so the same relative
        penalty grows with the rows), (1e-5, 1e-4, 1e-3, 1e-2) for cd (mean-loss units).
    cv : None, int, cross-validation generator or iterable, default None
        None: with a ridge solver, exact leave-one-out up to 2,000 rows (on a fixed
        sample of 1,000 rows above 1,000), 5 folds shuffled with the seed on 2,001-20,000
        rows, the leave-one-out sample above (KFOLD_MAX_ROWS; module docstring); 5-fold
        with ``solver="cd"``. Otherwise as in GridSearchCV (stratified K-fold for
        classifiers given an int).
    scoring : str, callable or None
        None: the model's ``score`` (accuracy, or R^2 for regression). Scorers are applied to
        the fold's solver on the fold's validation features (they need folds: cv given);
        with a ridge solver, a scorer of probabilities (``"neg_log_loss"``,
        ``"neg_brier_score"``, ``"roc_auc_ovr"``, ...) gets those of RBClassifier's
        calibration="train", fitted on the fold's training rows.
    solver : "auto", "cg", "direct" or "cd", default "auto"
        The model's solver (ridge: "auto", "cg", "direct"; coordinate descent: "cd").
    fit_intercept : bool, default True
    tol : float >= 0 or None
        Solver tolerance in the search and the refit; None: the model's default.
    max_iter : int or None (cg)
"""

# RBClassifierCV documents class_weight between the two halves (its signature's order);
# RBRegressorCV uses the two halves joined (_CV_PARAMS_DOC)
_CV_PARAMS_DOC_TAIL = """    n_jobs : int or None
        Threads of the binning and the solvers (the folds run one after another).
    random_state : int, Generator, RandomState or None
        Seeds the grids (the same grids for a given sigma in every fold when an int) and the
        CD coordinate stream.
    verbose : int
        1: one line per (sigma, fold), or per sigma with cv=None.
"""

_CV_PARAMS_DOC = _CV_PARAMS_DOC_HEAD + _CV_PARAMS_DOC_TAIL

_CV_ATTRS_DOC = """
    Attributes
    ----------
    cv_results_ : dict of arrays
        GridSearchCV's layout (leave-one-out: one "split", its score): ``params``,
        ``param_alpha``, ``param_sigma``, ``param_sigma_factor``, ``split{k}_test_score``,
        ``mean_test_score``,
        ``std_test_score``, ``rank_test_score``, ``mean_fit_time`` (the fold's binning is
        shared equally by its alphas), ``mean_score_time``, ``mean_n_iter``; where the
        leave-one-out also chose them, ``param_linear`` and (classifiers, more than two
        classes) ``param_multi_class``.
    best_index_, best_score_, best_params_ : as in GridSearchCV (``{"alpha", "sigma"}``,
        plus ``"linear"`` and ``"multi_class"`` where the search chose them)
    best_estimator_ : the model refitted on all rows with best_params_
    sigma_base_ : float, the base sigma the factors multiply
    sigma_, alpha_ : the chosen sigma and alpha
    n_splits_, refit_time_, n_features_in_ ; classes_ (classifier)
"""


class RBClassifierCV(ClassifierMixin, _RBSearchBase):
    __doc__ = """RBClassifier with sigma and alpha chosen by leave-one-out (cv=None) or K-fold
    cross-validation, binning once per sigma (and fold) and solving all alphas together
    (module docstring).
    """ + _CV_PARAMS_DOC_HEAD + """    class_weight : None, "balanced" or dict
        RBClassifier's ``class_weight``, for the search and the refit: each row's sample
        weight times its class's weight ("balanced": n_samples / (n_classes x the class's
        count)); the leave-one-out scores weigh the rows the same way (module docstring).
""" + _CV_PARAMS_DOC_TAIL + """    multi_class : "auto", "ovr" or "ovo", default "auto"
        RBClassifier's ``multi_class`` for more than two classes. "auto": with the
        leave-one-out search (cv=None, a ridge solver) every (sigma, alpha) is scored
        both ways, one-vs-one exactly from one eigendecomposition per pair of classes
        (rbcd.solvers._ovo), and takes the better (ties: one-vs-rest), recorded as
        ``params``' "multi_class" and ``param_multi_class``; with folds, one-vs-rest.
        "ovo" / "ovr": that scheme only (with folds, "ovo" fits every pair per alpha).
    """ + _CV_ATTRS_DOC + """
    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from rbcd.model_selection import RBClassifierCV
    >>> X, y = make_moons(300, noise=0.2, random_state=0)
    >>> clf = RBClassifierCV(n_grids=32, cv=3, alphas=(0.03, 0.3, 3, 30),
    ...                      random_state=0).fit(X, y)
    >>> sorted(clf.best_params_)
    ['alpha', 'sigma']
    >>> clf.best_score_ > 0.9
    True
    """

    _classifier = True
    _parameter_constraints = {
        **_RBSearchBase._parameter_constraints,
        "class_weight": [StrOptions({"balanced"}), dict, None],
        "multi_class": [StrOptions({"auto", "ovr", "ovo"})],
    }

    def __init__(self, n_grids="auto", sigma="scale", sigma_factors=DEFAULT_SIGMA_FACTORS,
                 alphas=None, cv=None, scoring=None, solver="auto", fit_intercept=True,
                 tol=None, max_iter=None, class_weight=None, n_jobs=None, random_state=None,
                 verbose=0, multi_class="auto"):
        self.multi_class = multi_class
        self.n_grids = n_grids
        self.sigma = sigma
        self.sigma_factors = sigma_factors
        self.alphas = alphas
        self.cv = cv
        self.scoring = scoring
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.class_weight = class_weight
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def decision_function(self, X):
        """The refitted best model's decision function."""
        X = self._features(X)                  # (fitted: checked first)
        return self.best_estimator_._decision_function(X, names=False)

    def _has_proba(self):
        # fitted: the refitted model's; unfitted: what a model of these parameters has
        if "best_estimator_" in self.__dict__:
            return hasattr(self.best_estimator_, "predict_proba")
        try:
            return hasattr(self._model(1.0, 1.0), "predict_proba")
        except ValueError:
            return False

    @available_if(_has_proba)
    def predict_proba(self, X):
        """The refitted best model's class probabilities (when it has them)."""
        X = self._features(X)                  # (fitted: checked first)
        return self.best_estimator_._predict_proba(X, names=False)

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        """log of predict_proba."""
        return np.log(self.predict_proba(X))


class RBRegressorCV(RegressorMixin, _RBSearchBase):
    __doc__ = """RBRegressor with sigma and alpha chosen by leave-one-out (cv=None) or K-fold
    cross-validation, binning once per sigma (and fold) and solving all alphas together
    (module docstring).
    """ + _CV_PARAMS_DOC + _CV_ATTRS_DOC + """
    Examples
    --------
    >>> import numpy as np
    >>> from rbcd.model_selection import RBRegressorCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(size=(300, 3)); y = np.sin(6 * X[:, 0]) + X[:, 1]
    >>> reg = RBRegressorCV(n_grids=32, cv=3, random_state=0).fit(X, y)
    >>> reg.best_score_ > 0.5
    True
    """

    def __init__(self, n_grids="auto", sigma="scale", sigma_factors=DEFAULT_SIGMA_FACTORS,
                 alphas=None, cv=None, scoring=None, solver="auto", fit_intercept=True,
                 tol=None, max_iter=None, n_jobs=None, random_state=None, verbose=0):
        self.n_grids = n_grids
        self.sigma = sigma
        self.sigma_factors = sigma_factors
        self.alphas = alphas
        self.cv = cv
        self.scoring = scoring
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
