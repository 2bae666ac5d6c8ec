"""RBRegressor / RBClassifier on Dask: distributed binning + a distributed solver.

The parameters, defaults and their resolution are those of :mod:`rbcd.models` (``alpha``,
``tol`` and ``loss`` by solver; ``preconditioner="auto"``). ``fit`` bins X with
:class:`rbcd.dask.RandomBinning` (Z stays on the workers, one CSR block per partition) and
hands Z and the grid structure to :class:`rbcd.dask.RidgeCG` (``solver="cg"``) or the
grid-block :class:`rbcd.dask.CDRegressor` / :class:`rbcd.dask.CDClassifier`
(``solver="cd"``, exact mode only). ``predict``, ``decision_function`` and
``predict_proba`` bin and predict each partition of the new X in one task on its worker and
return dask arrays.
"""
import copy
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import _check_feature_names, check_is_fitted

from .. import models as _local
from .._validation import fit_context
from .._calibration import fit_softmax_calibration, softmax_probabilities
from ._data import (as_rows, bad_object_message, check_finite_block, check_min_rows,
                    check_weights, client_or_error, dask, first_bad_object, first_non_finite,
                    float_rows, names_view, non_finite_message, tasks_per_worker,
                    wrong_length)
from .binning import RandomBinning, with_task_threads
from ._blocks import block_decision, class_setup, decision_dtype, predict_from_scores, \
    proba_from_scores
from .cd import CDClassifier, CDRegressor
from .cg import RidgeCG, RidgeCGClassifier

#: calibration values that fit the softmax scale on the training rows: rbcd.RBClassifier's
#: "train", and "sigmoid", this module's earlier name of it (pickles of older models)
_ON_TRAINING_ROWS = ("train", "sigmoid")

__all__ = ["RBRegressor", "RBClassifier"]



def _is_dask(y):
    """y is a dask collection (an array, DataFrame or Series), checked on the workers; y
    in memory is checked by fit before the binning."""
    return isinstance(y, dask.array.Array) or hasattr(y, "npartitions")


def _predict_block(block, rb, coef, intercept, n_jobs, per_worker, block_info=None):
    """Bin one partition of new rows and return its decision values (Z never leaves the task)."""
    offset = block_info[0]["array-location"][0][0] if block_info else 0
    X = float_rows(block)            # a sparse partition stays sparse (binning.py docstring)
    check_finite_block(X, offset)
    if X.shape[0] == 0:
        out = np.zeros((0, coef.shape[0]), dtype=decision_dtype(rb.dtype, coef))
        return out[:, 0] if coef.shape[0] == 1 else out
    return block_decision(with_task_threads(rb, n_jobs, per_worker).transform(X), coef, intercept)


def _fit_keeping_path_start(aux, *args, **kwargs):
    """Fit the local CD solver ``aux`` (alpha="auto") and return the start of its final
    fit: the held-out path's solution at the chosen alpha, (W (problems, D), B
    (problems,)) in float64, or None where the path chose nothing (its fallback alpha;
    the final fit then starts from zero). The local solver hands that start to a list
    it finds as ``_auto_starts`` on itself (rbcd.solvers.cd._CDBase._solve_all)."""
    aux._auto_starts = []
    try:
        aux.fit(*args, **kwargs)
        found = aux._auto_starts
    finally:
        del aux._auto_starts
    if not found or found[-1] is None:
        return None
    W, B = found[-1]
    return np.array(W, dtype=np.float64), np.array(B, dtype=np.float64)


def _cd_auto_alpha(model, binning, n_rows, take_rows, n_weight):
    """alpha="auto" of the CD models: the local CD solver's choice (its held-out path,
    rbcd.solvers.cd) on the rows of rbcd.solvers._heldout.heldout_rows (every row up to
    HELDOUT_MAX_ROWS = 20,000, above a fixed sample of as many), binned by the fitted
    ``binning``, times the sample's share of the training weight (S_sample / S, 1 where
    the sample is every row: then the local model's choice itself).

    Returns (alpha, start): ``start`` is where the final fit on every row starts, the
    path's solution at the chosen alpha (:func:`_fit_keeping_path_start`), as the local
    solver's final fit starts; where the sample is every row the Dask fit then follows
    the local model's iterates (selection="cyclic": the same model to rounding; from
    zero, the decisions rule stopped the two far apart). Above, the start is the
    sample's path solution at the sample's alpha: the same columns (the fit's tables),
    a penalty larger by 1 / share, so a start between zero and the full data's
    solution (docs/dask.md gives the measurements).

    The share: the choice is in mean-loss units, and the held-out path picks smaller
    penalties on more rows, close to a penalty constant in sum-loss units (1 / N in mean
    units). The local choice on a checkerboard (64 grids) fell 3.4x from 4,000 to 16,000
    rows and 9.7x from 16,000 to 64,000; a regression's 3.2x and 3.1x. At 64,000 rows the
    16,000 rows' choice divided by 4 scored as the local choice (test accuracy 0.680
    against 0.683, R^2 0.948 against 0.948), used as it is 0.653 and 0.944."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from ..binning import column_structure
    from ..solvers._heldout import heldout_rows

    rows, _ = heldout_rows(n_rows)
    Xs, ys, ws = take_rows(rows)
    if ws is not None and rows.shape[0] < n_rows and not float(np.sum(ws)) > 0:
        raise ValueError(
            f"alpha='auto' with solver='cd' chooses the penalty on a fixed sample of "
            f"{rows.shape[0]} of the {n_rows} rows (rbcd.solvers._heldout.heldout_rows), and "
            f"every row of that sample has weight 0: give alpha a number")
    Zs = binning.transform(float_rows(Xs))
    weight = float(len(rows)) if ws is None else float(np.sum(ws))
    aux = model._make_solver(Zs.shape, True, weight)
    with warnings.catch_warnings():   # the sample's own fit: only its alpha_ is used
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = _fit_keeping_path_start(aux, Zs, ys, sample_weight=ws,
                                        columns=column_structure(Zs, binning.grid_ptr_))
    if rows.shape[0] >= n_rows:
        return float(aux.alpha_), start
    return float(aux.alpha_) * (weight / float(n_weight)), start


class _RBBase(BaseEstimator):
    _classifier = False
    # the local models' parameter constraints: a bad value is named for this estimator
    # (not for the solver it builds); what only the local models take (device="cuda",
    # multi_class="ovo", a linear term, calibration="holdout") is refused in fit by name
    _parameter_constraints = _local.RBRegressor._parameter_constraints

    def _effective(self, n_weight=None):
        """(solver, alpha, tol, loss) with rbcd.models' defaults (ALPHA_PER_ROW, CG_TOL,
        CD_TOL); the cg default alpha needs the training weight ``n_weight``."""
        if not (isinstance(self.solver, str) and self.solver in ("auto", "cg", "cd")):
            raise ValueError(f"solver must be 'auto', 'cg' or 'cd' on rbcd.dask (ridge by CG, "
                             f"or coordinate descent), got {self.solver!r}")
        if self.device != "cpu":
            raise ValueError(f"rbcd.dask runs on the workers' CPUs: device must be 'cpu', got "
                             f"{self.device!r}")
        if not (isinstance(self.linear, str) and self.linear == "auto") and self.linear != 0:
            # rbcd.models' linear term: "auto" adds it only where leave-one-out scores every
            # row of a local fit, never the case here
            raise ValueError(f"rbcd.dask fits no linear term beside the kernel: linear must be "
                             f"'auto' or 0, got {self.linear!r} (rbcd.RBRegressor / "
                             f"RBClassifier fit one on a single machine)")
        solver = "cd" if self.solver == "cd" else "cg"   # "auto": CG (no direct form here)
        auto = isinstance(self.alpha, str) and self.alpha == "auto"
        if auto:
            alpha = "auto"
        elif self.alpha is not None and not auto:
            alpha = self.alpha
        elif solver == "cd":
            alpha = _local.ALPHA_PER_ROW
        else:
            alpha = None if n_weight is None else _local.ALPHA_PER_ROW * float(n_weight)
        tol = self.tol if self.tol is not None else (
            _local.CG_TOL if solver == "cg" else _local.CD_TOL)
        if solver == "cg":
            if self.loss is not None and self.loss != "squared":
                raise ValueError(f"solver='cg' solves ridge (squared loss); loss must be None or "
                                 f"'squared', got {self.loss!r}")
            loss = "squared"
            if self.l1_ratio not in (0, 1):  # rbcd.models' rule: 1 the unused default, 0 ridge
                raise ValueError(
                    f"solver='cg' solves ridge (an L2 penalty only); l1_ratio must be 0 or its "
                    f"default 1.0 (ignored) with cg, got {self.l1_ratio!r}: use solver='cd' "
                    f"for an elastic net")
        elif self.loss is None:
            loss = "logistic" if self._classifier else "squared"
        else:
            loss = self.loss
            if self._classifier and loss == "squared":     # as rbcd.models
                raise ValueError(f"solver={solver!r} classifies with loss 'logistic' or "
                                 f"'squared_hinge', got 'squared': use solver='auto' or 'cg' "
                                 f"for the squared loss")
            if not self._classifier and loss != "squared":
                raise ValueError(f"{type(self).__name__} fits regression targets: loss must "
                                 f"be None or 'squared', got {loss!r}")
        return solver, alpha, tol, loss

    @fit_context
    def fit(self, X, y, sample_weight=None):
        """Bin X on the workers and fit the solver there (see the module docstring). A fit
        that fails leaves the estimator's attributes as they were (as the local models')."""
        if self._classifier:
            from .cg import check_one_vs_rest
            check_one_vs_rest(self)
            self._check_calibration()          # before any work
        solver, alpha, tol, loss = self._effective()
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        exact = self.n_features is None
        if solver == "cd" and not exact:
            raise ValueError("solver='cd' on rbcd.dask is the grid-block mode and needs exact "
                             "binning (n_features=None)")
        client = client_or_error()
        _check_feature_names(self, names_view(X), reset=True)    # feature_names_in_ of a DataFrame
        X = as_rows(X, "X", client)
        check_min_rows(X, type(self).__name__)   # scikit-learn's words, as the local models
        if not _is_dask(y):
            # y in memory: checked here, in this estimator's name, before the binning (a
            # dask y is checked on the workers by the solver)
            from .._validation import check_class_labels, check_regression_target
            y = (check_class_labels(y, int(X.shape[0]), type(self).__name__)
                 if self._classifier else check_regression_target(y, int(X.shape[0])))
        n_weight = X.shape[0]
        if sample_weight is not None:  # checked (by name) before the binning
            sample_weight, n_weight = check_weights(X, sample_weight, client)
        if alpha is None:  # the cg default: ALPHA_PER_ROW per unit of training weight
            solver, alpha, tol, loss = self._effective(n_weight)
        n_grids = self.n_grids
        if isinstance(n_grids, str):  # "auto", on the rows of positive weight as locally
            rows = (X.shape[0] if sample_weight is None
                    else int((sample_weight > 0).sum().compute()))
            n_grids = _local.auto_n_grids(X.shape[1], rows, regression=not self._classifier)
        binning = RandomBinning(n_grids=n_grids, sigma=self.sigma, kernel=self.kernel,
                                n_features=self.n_features, dtype=self.dtype, n_jobs=self.n_jobs,
                                random_state=self.random_state)
        t0 = time.perf_counter()
        if exact:   # the weights: for sigma="scale" (checked again there: N floats)
            Z, columns = binning.fit_transform(X, return_columns=True, sample_weight=sample_weight)
        else:
            Z, columns = binning.fit_transform(X, sample_weight=sample_weight), None
        start = None     # the CD models' alpha="auto": where the local final fit starts
        if isinstance(alpha, str):                      # alpha="auto"
            alpha, start = self._auto_alpha(client, binning, X, y, sample_weight, n_weight,
                                            solver)
        t1 = time.perf_counter()
        extra = {"class_weight": self.class_weight} if self._classifier else {}
        if solver == "cg":
            # "auto" resolved by the local models' rule (rbcd.models._preconditioner)
            pre = _local._preconditioner(self.preconditioner, tol,
                                         (int(X.shape[0]), int(binning.n_features_out_)), exact)
            cls = RidgeCGClassifier if self._classifier else RidgeCG
            est = cls(alpha=alpha, fit_intercept=self.fit_intercept, tol=tol,
                      max_iter=self.max_iter, preconditioner=pre, n_jobs=self.n_jobs,
                      verbose=self.verbose, **extra)
        else:
            cls = CDClassifier if self._classifier else CDRegressor
            params = dict(loss=loss, alpha=alpha, l1_ratio=self.l1_ratio,
                          fit_intercept=self.fit_intercept, max_epochs=self.max_epochs, tol=tol,
                          selection=self.selection, parallel=self.parallel, n_jobs=self.n_jobs,
                          warm_start=self.warm_start, random_state=self.random_state,
                          verbose=self.verbose, **extra)
            prev = getattr(self, "solver_", None)
            # a copy of the previous solver: a failed refit keeps the fitted model whole
            est = (copy.deepcopy(prev).set_params(**params)
                   if self.warm_start and isinstance(prev, cls) else cls(**params))
        if solver == "cd":
            est._fit(Z, y, sample_weight, columns, start=start)
        else:
            est.fit(Z, y, sample_weight=sample_weight, columns=columns)
        if self._classifier:
            self._fit_calibration(est, Z, y, sample_weight)
        del Z
        self.fit_time_ = {"binning": t1 - t0, "solver": time.perf_counter() - t1}
        self.linear_ = 0.0
        self.binning_ = binning
        self.solver_ = est
        self.n_features_in_ = int(X.shape[1])
        if self._classifier:
            self.classes_ = est.classes_
        return self

    def _auto_alpha(self, client, binning, X, y, sample_weight, n_weight, solver="cg"):
        """alpha="auto": the single-machine rule on a sample of at most 1,000 rows
        gathered to the driver and binned by the fitted tables (rbcd.models
        .auto_alpha_from_sample; for regression above 5,000 rows also the held-out
        check's sample of at most 20,000 rows): the same choice as rbcd.RBRegressor /
        RBClassifier with linear=0 on the same rows (this model fits no linear term; the
        local linear="auto" may add one and choose another alpha with it); a classifier's class_weight is
        computed over all the labels and folded into the sample's weights and the total,
        as the local solver folds it before it samples (class_setup's weights). Sparse X:
        the sample's rows stay sparse (the same Z as dense).
        solver="cd": the local CD rule (rbcd.solvers.cd, a held-out path) on a sample of at
        most 20,000 rows, scaled by the sample's share of the weight (:func:`_cd_auto_alpha`;
        up to 20,000 rows the sample is every row: the local model's choice).

        Returns (alpha, start): ``start`` None for ridge; for CD the path's solution at the
        sample's choice, where the final fit starts (as the local solver's)."""
        n = int(X.shape[0])
        yd = as_rows(y, "y", client, ndim=(1, 2))
        if int(yd.shape[0]) != n:
            raise ValueError(wrong_length("y", yd.shape[0], n))   # as for y in memory
        if _is_dask(y):    # (y in memory was checked by fit) one pass, as .all() would be
            bad = first_bad_object(yd, not self._classifier)    # object y only: its pass
            if bad is not None:    # named by its index in y (not in the sample's rows)
                raise ValueError(bad_object_message(bad, not self._classifier))
            if yd.dtype.kind == "O" and not self._classifier:
                yd = yd.astype(np.float64)      # numbers: their NaN or inf named below
            bad = first_non_finite(yd)
            if bad is not None:
                raise ValueError(non_finite_message("y", bad))   # as the local check says
        wd = None
        if sample_weight is not None and not np.isscalar(sample_weight):
            wd = as_rows(sample_weight, "sample_weight", client, ndim=(1,))

        def take_rows(rows):
            """The sample's rows (sparse X: CSR rows, as the chunks hold them)."""
            Xs, ys = dask.compute(X[rows], yd[rows])
            if wd is not None:
                ws = np.asarray(wd[rows].compute(), dtype=np.float64)
            elif sample_weight is not None:
                ws = np.full(rows.shape[0], float(sample_weight))
            else:
                ws = None
            return float_rows(Xs), np.asarray(ys), ws

        local = _local.RBClassifier if self._classifier else _local.RBRegressor
        params = {k: v for k, v in self.get_params().items() if k in local().get_params()}
        if solver == "cd":
            return _cd_auto_alpha(local(**dict(params, alpha="auto", device="cpu")),
                                  binning.local_, n, take_rows, n_weight)
        params.update(solver="auto", alpha="auto", device="cpu")
        if self._classifier:
            params.pop("calibration", None)
            if self.class_weight is not None:
                # every row's weight times its class weight over all the labels: the
                # sample's weights (take_rows reads wd) and the total as the local solver
                # has them
                scalar = sample_weight is not None and np.isscalar(sample_weight)
                _, _, wd = class_setup(client, X, yd, None if scalar else sample_weight,
                                       self.class_weight)
                if scalar:
                    wd = wd * float(sample_weight)
                n_weight = float(wd.sum().compute())
        return _local.auto_alpha_from_sample(local(**params), binning.local_, n, take_rows,
                                             n_weight), None

    @property
    def alpha_(self):
        """The penalty used (the choice of alpha="auto"), in the solver's units."""
        return self.solver_.alpha

    @property
    def coef_(self):
        return self.solver_.coef_

    @property
    def intercept_(self):
        return self.solver_.intercept_

    @property
    def n_iter_(self):
        return self.solver_.n_iter_

    def _scores(self, X):
        check_is_fitted(self, "solver_")
        _check_feature_names(self, names_view(X), reset=False)   # a DataFrame's columns, as at fit
        client = client_or_error()
        X = as_rows(X, "X", client)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is "
                             f"expecting {self.n_features_in_} features as input.")
        # the solver's dtypes (Z's: float32 features, float32 values, as the local models')
        coef = np.atleast_2d(np.asarray(self.solver_.coef_))
        intercept = np.atleast_1d(np.asarray(self.solver_.intercept_, dtype=coef.dtype))
        dtype = decision_dtype(self.binning_.local_.dtype, coef)
        rb = dask.delayed(self.binning_.local_, pure=True)
        c = dask.delayed(coef, pure=True)
        b = dask.delayed(intercept, pure=True)
        jobs = (self.n_jobs, tasks_per_worker(X))
        if coef.shape[0] == 1:
            return X.map_blocks(_predict_block, rb, c, b, *jobs, dtype=dtype, drop_axis=1,
                                chunks=(X.chunks[0],), meta=np.zeros(0, dtype))
        return X.map_blocks(_predict_block, rb, c, b, *jobs, dtype=dtype,
                            chunks=(X.chunks[0], (coef.shape[0],)), meta=np.zeros((0, 0), dtype))


class RBRegressor(RegressorMixin, _RBBase):
    """Random binning kernel regression on row-partitioned data (dask): the parameters of
    :class:`rbcd.RBRegressor`, except ``linear`` ("auto": none, or 0), ``solver`` ("auto",
    "cg" or "cd"), ``parallel`` ("auto" or "grid") and ``device`` ("cpu"); ``binning_`` is an
    rbcd.dask.RandomBinning, ``solver_`` an rbcd.dask RidgeCG or CDRegressor."""

    def __init__(self, n_grids="auto", sigma="scale", kernel="laplacian", n_features=None,
                 solver="auto", alpha="auto", l1_ratio=1.0, loss=None, fit_intercept=True,
                 tol=None, max_iter=None, max_epochs=_local.CD_MAX_EPOCHS, selection="random",
                 parallel="auto", preconditioner="auto", warm_start=False,
                 dtype=np.float64, n_jobs=None, random_state=None, verbose=0, device="cpu",
                 linear="auto"):
        self.device = device
        self.linear = linear
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

    def predict(self, X):
        """Predictions for each partition of X, computed on the workers: a dask array, (n,)
        or, for a 2-D y at fit (one column included), (n, k), as rbcd.RBRegressor's."""
        out = self._scores(X)
        if out.ndim == 1 and np.ndim(self.solver_.coef_) == 2:
            out = out[:, None]
        return out


class RBClassifier(ClassifierMixin, _RBBase):
    """Random binning kernel classification on row-partitioned data (dask): the parameters
    of :class:`rbcd.RBClassifier`, except as for RBRegressor and ``calibration`` ("train"
    or None); ``solver="cg"`` is ridge classification (one-vs-rest -1/+1; ``multi_class``
    "ovr" only), ``solver="cd"`` logistic or squared hinge by grid-block CD."""

    _classifier = True
    _parameter_constraints = {**_local.RBClassifier._parameter_constraints,
                              "calibration": [StrOptions({"train", "holdout", "sigmoid"}), None]}

    def __init__(self, n_grids="auto", sigma="scale", kernel="laplacian", n_features=None,
                 solver="auto", alpha="auto", l1_ratio=1.0, loss=None, fit_intercept=True,
                 tol=None, max_iter=None, max_epochs=_local.CD_MAX_EPOCHS, selection="random",
                 parallel="auto", preconditioner="auto", warm_start=False,
                 class_weight=None, calibration="train", dtype=np.float64, n_jobs=None,
                 random_state=None, verbose=0, device="cpu", linear="auto", multi_class="ovr"):
        self.multi_class = multi_class
        self.device = device
        self.linear = linear
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
        self.calibration = calibration
        self.dtype = dtype
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def decision_function(self, X):
        """Scores per partition of X on the workers ((n,) for two classes): a dask array."""
        return self._scores(X)

    def predict(self, X):
        return predict_from_scores(self._scores(X), self.classes_)

    def _check_calibration(self):
        """calibration "train" (or its earlier name "sigmoid") or None; "holdout" is
        refused, except where the logistic CD model's own probabilities need none."""
        if self.calibration is None or (isinstance(self.calibration, str)
                                        and self.calibration in _ON_TRAINING_ROWS):
            return
        try:
            if self._native_proba():
                return
        except ValueError:
            pass
        hint = (" (a held-out fifth scored by a second model: rbcd.RBClassifier only)"
                if self.calibration == "holdout" else "")
        raise ValueError(f"calibration must be 'train' or None, got "
                         f"{self.calibration!r}{hint}")

    def _native_proba(self):
        return self.solver == "cd" and self._effective()[3] == "logistic"

    def _proba_source(self):
        """As rbcd.RBClassifier's: a fitted model answers from its fit ("native": the
        logistic CD solver's; "calibrated"; None), an unfitted one from its parameters."""
        solver = self.__dict__.get("solver_")
        if solver is not None:
            if isinstance(solver, CDClassifier) and solver.loss == "logistic":
                return "native"
            return "calibrated" if self.__dict__.get("calibration_") is not None else None
        try:
            if self._native_proba():
                return "native"
        except ValueError:
            return None
        return "calibrated" if self.calibration in _ON_TRAINING_ROWS else None

    def _has_proba(self):
        return self._proba_source() is not None

    def _fit_calibration(self, est, Z, y, sample_weight):
        """The softmax scale of rbcd._calibration, as rbcd.RBClassifier fits it with
        calibration="train", on the training rows' scores ("sigmoid": this module's
        earlier name of it). The scores (N x k floats) and y are gathered to the driver
        for this one-dimensional fit; Z stays on the workers."""
        self.calibration_ = None
        self._check_calibration()
        if self.calibration is None or self._native_proba():
            return
        client = client_or_error()
        scores = np.asarray(est.decision_function(Z).compute())
        yv = np.asarray(as_rows(y, "y", client, ndim=(1, 2)).compute()).reshape(-1)
        y_index = np.searchsorted(est.classes_, yv)
        weight = None
        if sample_weight is not None:
            sw = sample_weight
            if not np.isscalar(sw):
                sw = as_rows(sw, "sample_weight", client, ndim=(1,)).compute()
            weight = np.broadcast_to(np.asarray(sw, dtype=np.float64), y_index.shape)
            if not weight.sum() > 0:
                weight = None
        self.calibration_ = fit_softmax_calibration(scores, y_index, len(est.classes_), weight)

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities (n, n_classes), a dask array, as rbcd.RBClassifier:
        solver="cd" with the logistic loss, the logistic model's own; otherwise the
        calibrated softmax of the decision values (``calibration="train"``)."""
        check_is_fitted(self, "solver_")
        if self._proba_source() == "native":
            return proba_from_scores(self._scores(X))
        scores = self._scores(X)
        k = len(self.classes_)
        # the dtype of the local predict_proba's (the same function of the same scores)
        dtype = softmax_probabilities(np.zeros((1,) + scores.shape[1:], scores.dtype),
                                      self.calibration_).dtype
        return scores.map_blocks(softmax_probabilities, self.calibration_, dtype=dtype,
                                 **({"new_axis": 1} if scores.ndim == 1 else {}),
                                 chunks=(scores.chunks[0], (k,)), meta=np.zeros((0, 0), dtype))

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        """log of predict_proba (a dask array)."""
        import dask.array as da

        return da.log(self.predict_proba(X))
