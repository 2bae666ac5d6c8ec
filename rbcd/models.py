"""End-user kernel machines: random binning features + a linear solver.

``RBRegressor`` and ``RBClassifier`` chain :class:`rbcd.RandomBinning` (Laplacian
kernel, ``n_grids`` grids) with either

* ``solver="auto"``, ``"cg"`` or ``"direct"``: ridge, by block conjugate gradient or
  one Cholesky factorization (:class:`rbcd.RidgeCG`, :class:`rbcd.RidgeCGClassifier`;
  scikit-learn's Ridge objective, one-vs-rest -1/+1 targets for classification), or
* ``solver="cd"``: randomized coordinate descent (:class:`rbcd.CDRegressor`,
  :class:`rbcd.CDClassifier`; mean loss + elastic net, docs/design.md contract 8).

Every parameter of both stages is a parameter of the model, so a GridSearchCV can
tune ``sigma``, ``n_grids`` and ``alpha`` together (``RBClassifierCV`` / ``RBRegressorCV``
do it faster, binning once per sigma and fold). Defaults, one set for Python and the
command line, chosen on a suite of real data sets (docs/benchmarks/realdata.md):
``sigma="scale"`` (a multiple of the median L1 distance between training rows);
``n_grids="auto"`` -> 256 grids, 512 above 64 features, 1,024 up to 2,048 training rows
and 512 up to 4,096 (SMALL_DATA_GRIDS); regression above 2,048 rows 2,048 up to 8,192,
1,024 up to 16,384, 512 up to 32,768 (REGRESSION_GRIDS); ``alpha="auto"`` -> chosen from
the data (ridge: leave-one-out; cd: a held-out path, rbcd.solvers.cd); ``max_epochs`` 1000
(cd); ``alpha=None`` -> a penalty of 1e-4
per training row (cg: 1e-4 * n_samples in Ridge's sum-of-squares units; cd: 1e-4 in
mean-loss units); ``tol=None`` -> 1e-3 (cg) / 1e-4 (cd); ``loss=None`` -> "squared"
(regression, and cg classification, which is ridge classification) / "logistic" (cd
classification).

The binning hands its column structure (the CSC view of Z with the grid boundaries,
``RandomBinning.fit_transform(X, return_columns=True)``) to the solver through the
solvers' public ``columns=`` keyword, so neither the CD grid mode nor CG's Z^T products
rebuild it.

Probabilities: with ``solver="cd"`` and the logistic loss, ``predict_proba`` is the
model's own. Otherwise (ridge classification gives scores, not probabilities)
``predict_proba`` maps the decision values through a softmax with one fitted scale
(temperature scaling; Platt's sigmoid through the origin for two classes;
``rbcd._calibration``), so that it always agrees with ``predict``. The scale is fitted on
the training rows (``calibration="train"``, the default, free) or on a held-out fifth of
them scored by a second model fitted on the other four fifths (``calibration="holdout"``;
its cost is that second solver fit, on four fifths of the rows' features, with the
penalty already chosen: no second binning and no second alpha search). Training rows'
scores are more confident than new rows' when the model fits its training set closely
(small sigma, small alpha), so "train" probabilities then lean towards 0 and 1;
"holdout" is honest. ``calibration=None``: no
``predict_proba``.

Parameters that only one solver uses are ignored by the other: ``max_iter`` and
``preconditioner`` (cg); ``l1_ratio``, ``max_epochs``, ``selection``, ``parallel``,
``warm_start``, ``random_state`` of the solver stream and ``verbose`` epochs (cd).
``warm_start=True`` with ``solver="cd"`` starts from the previous coefficients when
the new binning has the same number of columns (same data and an int random_state).
"""
import copy
import time

import numpy as np
import scipy.sparse as sp

from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import _check_feature_names, check_is_fitted, validate_data

from ._calibration import fit_softmax_calibration, softmax_probabilities
from ._integrity import ChecksummedState
from ._memory import check_solver_memory
from ._validation import (
    N_JOBS,
    POSITIVE_INT,
    RANDOM_STATE,
    SIGMA,
    TOL,
    VERBOSE,
    IntInterval,
    RealInterval,
    StrOptions,
    built_here,
    check_class_labels,
    check_regression_target,
    check_sample_weight,
    check_sparse_structure,
    fit_context,
    plain_checked,
    plain_float_array,
    validate_rows,
)
from .solvers.cd import CDClassifier, CDRegressor
from .solvers.cg import RidgeCG, RidgeCGClassifier

_SOLVERS = ("auto", "cg", "direct", "cd")
#: the ridge solvers (rbcd.RidgeCG's ``solver``): squared loss, Ridge's alpha units
_RIDGE_SOLVERS = ("auto", "cg", "direct")


def _random_binning_class():
    from .binning.random_binning import RandomBinning

    return RandomBinning



# Measured on random-binning matrices (README, "Benchmarks"). With the grid structure (exact
# mode), Jacobi is projected off the grids' null directions: on the demo's checkerboard
# (N = 10^5, D = 3 10^4) it needs 22/50/108/230/354 iterations against plain CG's
# 55/132/218/379/535 to tol 1e-2/1e-3/1e-4/1e-6/1e-8, and it was never behind plain CG with
# D < N (digits, uniform and Gaussian data). With more bins than rows it still wins up to
# AUTO_JACOBI_BINS_PER_ROW bins per row (benchmarks/compare_preconditioner.py, the models'
# defaults with solver="cg", docs/benchmarks/preconditioner.md: regression 1.2-4.3x fewer
# iterations at D / N = 1.6-15.2, e.g. 60,000 rows, D / N = 1.6: 93 against 402;
# classification, with its 100-1,000x larger penalties, within 10% either way up to
# D / N = 7.4) and loses far beyond it (scaled digits, D / N = 58: 65 against 33; 2 classes
# at D / N = 15: 66 against 49). Without the structure (hashed mode) plain Jacobi speeds up the
# early residual reduction (1.4-2.5x fewer iterations to 1e-2 .. 1e-4) and slows the tail
# (1.1-1.6x more to 1e-6).
AUTO_JACOBI_BINS_PER_ROW = 8
AUTO_JACOBI_TOL = 1e-4


def _preconditioner(preconditioner, tol, shape=None, structured=False):
    """Resolve ``preconditioner="auto"`` for a Z of ``shape`` (None: not known yet):
    with the grid structure, "jacobi" when D <= AUTO_JACOBI_BINS_PER_ROW x N else plain CG
    (None); without it, "jacobi" for tol >= 1e-4, else None."""
    if isinstance(preconditioner, str) and preconditioner == "auto":
        if structured and shape is not None:
            return "jacobi" if shape[1] <= AUTO_JACOBI_BINS_PER_ROW * shape[0] else None
        return "jacobi" if tol >= AUTO_JACOBI_TOL else None
    return preconditioner

# One set of defaults, shared by the estimators and the command line (which reads them from
# here), chosen on the real-data suite (docs/benchmarks/realdata.md):
#: alpha=None: a penalty of ALPHA_PER_ROW per unit of training weight in both solvers' units
#: (cd: mean loss, so alpha itself; cg: sum of squares, so ALPHA_PER_ROW * sum of weights).
ALPHA_PER_ROW = 1e-4
#: tol=None: the relative residual of CG (test scores equal those at 1e-6 on the suite) and the
#: relative duality gap / subgradient of CD.
CG_TOL = 1e-3
CD_TOL = 1e-4
#: max_epochs of solver="cd": lasso on random binning features converges slowly (its columns,
#: nested bins of 256 grids, are strongly correlated): diabetes at its alpha="auto" penalty
#: needs 58-261 epochs to the relative gap 1e-4 (6 seeds); a fit that converges stops there
CD_MAX_EPOCHS = 1000
#: n_grids="auto": more grids estimate the kernel better at a linear cost; wide data, where a
#: grid cuts only a few of the dimensions near any point, gets more.
AUTO_GRIDS = 256
AUTO_GRIDS_WIDE = 512
WIDE_D = 64
#: n_grids="auto" on small data: the power of two that keeps the training rows times the
#: grids within SMALL_DATA_ENTRIES, up to SMALL_DATA_GRIDS (1,024 grids up to 2,048 rows,
#: 512 up to 4,096; the fit still runs on one thread there: SERIAL_ENTRIES). There the
#: kernel estimate's noise, not the data, limits accuracy (each entry of Z Z^T is a mean
#: over the grids), and the direct solve's O(n^3) factorization, not the grids, dominates
#: the fit. Against 256
#: grids, 5 random splits of the real-data suite's small sets and the bundled ones:
#: glass +2.2 points, vehicle +1.0, vowel +0.9, digits +0.6, scaled breast cancer +0.7,
#: Boston housing RMSE -4%, none worse by more than the test sets' one-row step
#: (docs/benchmarks/sizes.md, "Grids on small data"). At 3,000 rows (synthetic sets, 3
#: seeds) 512 grids against 256: +0.7 and +1.3 points (2 and 10 classes), RMSE -13%, for
#: 15-35% more time. The searches of rbcd.model_selection build on this rule.
SMALL_DATA_GRIDS = 1024
SMALL_DATA_ENTRIES = 1 << 21
#: n_grids="auto" for regression past the small-data rows (above 2,048): the power of two
#: that keeps the training rows times the grids within REGRESSION_ENTRIES, up to
#: REGRESSION_GRIDS (2,048 grids up to 8,192 rows, 1,024 up to 16,384, 512 up to 32,768;
#: grids x features still within SMALL_DATA_ENTRIES). A ridge fit on a fixed set of grids
#: levels off at an error that the grids, not the rows, set: the kernel estimate's noise
#: enters the squared error directly, where a classifier needs only the sign, and it grows
#: with the rows that share it. Measured (docs/benchmarks/search.md, "Grids for
#: regression"): star (4,950 rows) RMSE +4.6% -> +1.9% against the tuned exact Laplacian
#: machine in 3x the fit time; synthetic regression at 5,000-12,000 rows -19% to -34% RMSE.
#: Up to 2,048 rows 2,048 grids gained nothing over 1,024 (diabetes, Boston housing).
REGRESSION_GRIDS = 2048
REGRESSION_ENTRIES = 1 << 24

#: stored entries (rows x grids) below which a fit runs on one thread whatever n_jobs: a
#: thread team's wake-up costs microseconds on an idle machine and up to a scheduler time
#: slice beside other processes. compare_sizes on the 2-vCPU AMD EPYC, n_jobs=None over
#: n_jobs=1: idle 0.98-1.13x up to 3,000 rows x 256 grids (nothing to gain), 0.62-0.85x
#: at 30,000; with a busy-loop process per core 1.2-2.8x below 1,000 rows (breast cancer,
#: wine, diabetes: every kernel's own grain still woke threads for ~1 ms each).
SERIAL_ENTRIES = 1 << 21
#: predict, decision_function and predict_proba bin new rows a block of about
#: PREDICT_ENTRIES entries (rows x grids) at a time and score each block at once: Z of a
#: block (12 bytes an entry: 24 MiB) is reused memory, where Z of all rows was fresh
#: pages (12 bytes x rows x grids: 3 GiB for 10^6 rows at 256 grids), the first touch of
#: which the fresh pages cost more than the binning itself. A row's scores depend on
#: that row only, so they are the same bits for any block.
PREDICT_ENTRIES = 1 << 21


def _sample_rows(X):
    """A sample's rows as the binning takes them: scipy sparse stays sparse (the same Z as
    its dense rows, RandomBinning's contract), anything else a float64 array."""
    return X if sp.issparse(X) else np.asarray(X, dtype=np.float64)


def class_weight_rows(class_weight, y):
    """Each training row's class weight (n,) under ``class_weight`` (None: None), computed
    over all the labels y as the CPU classifier computes it; the weights the sample of
    :func:`auto_alpha_from_sample` takes, times the sample weights."""
    if class_weight is None:
        return None
    from sklearn.utils.class_weight import compute_sample_weight

    from ._validation import check_class_weight
    return compute_sample_weight(check_class_weight(class_weight), np.asarray(y))


def auto_alpha_from_sample(model, binning, n_rows, take_rows, n_weight):
    """alpha="auto" for a fit whose own solver cannot choose it (the GPU and Dask paths):
    the CPU's rule (rbcd.solvers.cg._solve_auto_alpha) on the host. Up to LOO_MAX_ROWS
    rows all of them, above a fixed sample of as many (the CPU's draw), binned by the
    fitted CPU ``binning`` (the training bins, hence the same dual Gram matrix and the
    same choice as a CPU fit); exact leave-one-out there, its best penalty a_s scaled to
    a_s sqrt(n_weight / sample weight) as the CPU scales it; for regression above 5,000
    rows that choice checked on the held-out rows of the CPU's sample
    (rbcd.solvers._heldout: up to 20,000 rows gathered and binned here). ``take_rows(rows)`` returns (X, y, sample_weight or
    None) of the given sorted rows as numpy arrays (gathered from the device or the
    cluster).

    A classifier's ``class_weight`` is the caller's to fold in, as the CPU solver folds it
    into the weights before it samples: the weights ``take_rows`` returns and ``n_weight``
    include each row's class weight computed over ALL the training labels
    (:func:`class_weight_rows`; "balanced" counts the classes of every row, not the
    sample's), and the sample's solver takes no class_weight of its own."""
    from ._threads import effective_n_threads
    from .binning import column_structure
    from .solvers import _heldout
    from .solvers._direct import LOO_MAX_ROWS, check_loo_sample_weight, loo_rows

    rows = loo_rows(n_rows)
    Xs, ys, ws = take_rows(rows)
    check_loo_sample_weight(ws, n_rows)
    Zs = binning.transform(_sample_rows(Xs))
    exact = binning.grid_ptr_ is not None      # hashed columns have no grid structure
    cols = column_structure(Zs, binning.grid_ptr_) if exact else None
    weight = float(len(rows)) if ws is None else float(np.sum(ws))
    aux = model._make_solver(Zs.shape, True, weight)
    aux.set_params(solver="direct", alpha="auto")
    if "class_weight" in aux.get_params():
        aux.set_params(class_weight=None)       # folded into ws by the caller (above)
    if "device" in aux.get_params():
        aux.set_params(device="cpu")
    aux.fit(Zs, ys, sample_weight=ws, columns=cols)
    # the CPU's scaling of a sample's choice (rbcd.solvers.cg._solve_auto_alpha)
    alpha = float(aux.alpha_ * np.sqrt(n_weight / weight))
    if model._classifier or n_rows <= max(LOO_MAX_ROWS, _heldout.HELDOUT_MIN_ROWS):
        return alpha
    # regression: checked on held-out rows as the CPU checks it (rbcd.solvers._heldout)
    rows, held = _heldout.heldout_rows(n_rows)
    Xh, yh, wh = take_rows(rows)
    Zh = binning.transform(_sample_rows(Xh))
    yh = np.asarray(yh, dtype=np.float64)
    return _heldout.heldout_choice(Zh, yh.reshape(yh.shape[0], -1), wh, held, alpha,
                                   n_weight, model.fit_intercept,
                                   effective_n_threads(model.n_jobs),
                                   column_structure(Zh, binning.grid_ptr_) if exact else None)[0]


def auto_n_grids(n_features_in, n_samples=None, regression=False,
                 regression_grids=REGRESSION_GRIDS, regression_entries=REGRESSION_ENTRIES):
    """The grids of ``n_grids="auto"``: AUTO_GRIDS, or AUTO_GRIDS_WIDE above WIDE_D features;
    raised where ``n_samples`` (None: unknown) is small to the largest power of two, at most
    SMALL_DATA_GRIDS, whose products with n_samples and with n_features_in are at most
    SMALL_DATA_ENTRIES; for ``regression`` past those rows, to the largest power of two, at
    most ``regression_grids``, whose product with n_samples is at most
    ``regression_entries`` (and with n_features_in at most SMALL_DATA_ENTRIES; the searches
    of rbcd.model_selection give their own, larger, bounds)."""
    R = AUTO_GRIDS if n_features_in <= WIDE_D else AUTO_GRIDS_WIDE
    if n_samples is None:
        return R
    R = max(R, small_data_grids(n_samples, SMALL_DATA_GRIDS, n_features_in))
    if regression and int(n_samples) * SMALL_DATA_GRIDS > SMALL_DATA_ENTRIES:
        R = max(R, min(small_data_grids(n_samples, regression_grids, entries=regression_entries),
                       small_data_grids(n_features_in, regression_grids)))
    return R


def _with_block(Z, M):
    """[Z, M] as CSR: the random binning features and the linear term's dense block."""
    import scipy.sparse as sp

    return sp.hstack([Z, sp.csr_matrix(M)], format="csr")


def small_data_grids(n_samples, cap, n_features=1, entries=SMALL_DATA_ENTRIES):
    """The largest power of two, at most ``cap``, whose products with ``n_samples`` and with
    ``n_features`` are at most ``entries`` (0 when none is). WIDE_SMALL_DATA: a grid
    holds a width, an offset and bin bounds per feature (docs/design.md contract 2), so on
    wide data the grids, not the rows, set a small fit's time and memory (100 rows x 20,000
    features: half the grids took a third of the search's memory). Below 2,049 features
    (every set the rule was measured on) nothing changes."""
    fit = int(entries) // max(int(n_samples), int(n_features), 1)
    return min(int(cap), 1 << (fit.bit_length() - 1)) if fit >= 1 else 0


_RB_CONSTRAINTS = {
    "n_grids": POSITIVE_INT + [StrOptions({"auto"})],
    "sigma": SIGMA,
    "kernel": [StrOptions({"laplacian"})],
    "n_features": [IntInterval(1, None, closed="left"), None],
    "solver": [StrOptions(set(_SOLVERS))],
    "alpha": [RealInterval(0, None, closed="left"), StrOptions({"auto"}), None],
    "l1_ratio": [RealInterval(0, 1, closed="both")],
    "loss": [StrOptions({"squared", "logistic", "squared_hinge"}), None],
    "fit_intercept": ["boolean"],
    "tol": TOL + [None],
    "max_iter": [IntInterval(1, None, closed="left"), None],
    "max_epochs": POSITIVE_INT,
    "selection": [StrOptions({"random", "permutation", "cyclic"})],
    "parallel": [StrOptions({"auto", "hogwild", "grid"}), None],
    "preconditioner": [StrOptions({"auto", "jacobi"}), None],
    "warm_start": ["boolean"],
    "dtype": "no_validation",  # checked by RandomBinning (float32 or float64)
    "n_jobs": N_JOBS,
    # RandomBinning's (the grids' draw); nested estimators' checks are skipped
    # (fit_context's prefer_skip_nested_validation), so the models check it themselves
    "random_state": RANDOM_STATE,
    "verbose": VERBOSE,
    "device": [StrOptions({"cpu", "cuda"})],  # "cuda": rbcd.cuda (docs/gpu.md; cg only)
    "linear": [StrOptions({"auto"}), RealInterval(0, None, closed="left")],
}


class _RBBase(ChecksummedState, BaseEstimator):
    _classifier = False
    _parameter_constraints = dict(_RB_CONSTRAINTS)

    # ------------------------------------------------------------------ parameters
    def _solver_name(self):
        if not (isinstance(self.solver, str) and self.solver in _SOLVERS):
            raise ValueError(
                f"solver must be 'auto', 'cg', 'direct' or 'cd', got {self.solver!r}")
        return self.solver

    def _effective(self, n_weight=None):
        """(solver, alpha, tol, loss) with the solver-dependent defaults filled in.

        ``n_weight``: the training rows' total weight (N without weights), which the cg
        default alpha scales with; None gives that default as a description.
        """
        solver = self._solver_name()
        ridge = solver in _RIDGE_SOLVERS
        auto = isinstance(self.alpha, str) and self.alpha == "auto"
        if auto:   # chosen from the data by the solver (ridge and cd rules)
            alpha = "auto"
        elif self.alpha is not None and not auto:
            alpha = self.alpha
        elif not ridge:
            alpha = ALPHA_PER_ROW
        elif n_weight is None:
            alpha = f"{ALPHA_PER_ROW:g} * n_samples"
        else:
            alpha = ALPHA_PER_ROW * float(n_weight)
        tol = self.tol if self.tol is not None else (CG_TOL if ridge else CD_TOL)
        if ridge:
            if self.loss is not None and not (isinstance(self.loss, str) and self.loss == "squared"):
                raise ValueError(
                    f"solver={solver!r} solves ridge (squared loss); loss must be None or "
                    f"'squared', got {self.loss!r}"
                )
            loss = "squared"
            if self.l1_ratio not in (0, 1):  # 1: the default, unused; 0: ridge, what it solves
                raise ValueError(
                    f"solver={solver!r} solves ridge (an L2 penalty only); l1_ratio must be 0 "
                    f"or its default 1.0 (ignored) with it, got {self.l1_ratio!r}: use "
                    f"solver='cd' for an elastic net")
        elif getattr(self, "multi_class", "ovr") == "ovo":
            raise ValueError(f"multi_class='ovo' needs a ridge solver (one ridge problem "
                             f"per pair of classes): use solver='auto', 'cg' or 'direct', "
                             f"not {solver!r} (which is one-vs-rest)")
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
        if not ridge and self.parallel == "grid" and self.n_features is not None:
            # (the solver's own message asks for columns=, which the model hands over itself)
            raise ValueError(f"parallel='grid' needs the grid structure of the exact mode "
                             f"(n_features=None); hashed features (n_features="
                             f"{self.n_features!r}) have none: use parallel='auto', None or "
                             f"'hogwild'")
        return solver, alpha, tol, loss

    def _linear_weights(self, n_samples, n_features):
        """The weights c of the linear term that the fit considers (``linear``): one
        fixed c, or for "auto" rbcd.solvers._linear.AUTO_CANDIDATES (classification) or
        AUTO_REGRESSION (regression) where the ridge penalty is chosen by exact
        leave-one-out on every row (alpha="auto", a ridge solver, at most LOO_MAX_ROWS
        rows, at most AUTO_MAX_FEATURES features, the CPU), else (0.0,): no term. A
        ValueError for a term the fit cannot add."""
        from .solvers._direct import LOO_MAX_ROWS
        from .solvers._linear import AUTO_CANDIDATES, AUTO_MAX_FEATURES, AUTO_REGRESSION

        solver, alpha, _, _ = self._effective()
        ridge = solver in _RIDGE_SOLVERS
        ovo = getattr(self, "multi_class", "ovr") == "ovo"
        if isinstance(self.linear, str):          # "auto"
            if (ridge and not ovo and alpha == "auto" and self.device == "cpu"
                    and n_samples <= LOO_MAX_ROWS and n_features <= AUTO_MAX_FEATURES):
                return AUTO_CANDIDATES if self._classifier else AUTO_REGRESSION
            return (0.0,)
        c = float(self.linear)
        if not np.isfinite(c):
            raise ValueError(f"linear must be 'auto' or a finite number >= 0, got {self.linear!r}")
        if c > 0.0 and not ridge:
            raise ValueError(f"linear={self.linear!r} adds a linear term to the ridge "
                             f"solvers' kernel; solver={solver!r} has none: use solver="
                             f"'auto', 'cg' or 'direct', or linear=0")
        if c > 0.0 and ovo:
            raise ValueError(f"linear={self.linear!r}: the linear term is fitted with "
                             f"multi_class='ovr' only; use linear=0 (or 'auto', which adds "
                             f"none with 'ovo')")
        if c > 0.0 and self.device != "cpu":
            raise ValueError(f"linear={self.linear!r}: the linear term is fitted on the CPU "
                             f"only; use device='cpu', or linear=0 with device='cuda'")
        return (c,)

    def _n_grids(self, n_features_in, n_samples):
        if isinstance(self.n_grids, str):  # "auto"
            return auto_n_grids(n_features_in, n_samples, regression=not self._classifier)
        return self.n_grids

    def _make_binning(self, n_samples):
        # set_output "default": the binning is internal and its Z sparse, so scikit-learn's
        # global transform_output ("pandas", "polars") must not wrap it
        return _random_binning_class()(
            n_grids=self._n_grids(self.n_features_in_, n_samples), sigma=self.sigma,
            kernel=self.kernel, n_features=self.n_features, dtype=self.dtype, n_jobs=self.n_jobs,
            random_state=self.random_state, device=self.device,
        ).set_output(transform="default")

    def _make_solver(self, shape=None, structured=False, n_weight=None):
        solver, alpha, tol, loss = self._effective(n_weight)
        extra = {"class_weight": self.class_weight} if self._classifier else {}
        if solver in _RIDGE_SOLVERS:
            cls = RidgeCGClassifier if self._classifier else RidgeCG
            if self._classifier:
                extra["multi_class"] = self.multi_class
            return cls(alpha=alpha, solver=solver, fit_intercept=self.fit_intercept, tol=tol,
                       max_iter=self.max_iter,
                       preconditioner=_preconditioner(self.preconditioner, tol, shape, structured),
                       n_jobs=self.n_jobs, verbose=self.verbose, device=self.device, **extra)
        cls = CDClassifier if self._classifier else CDRegressor
        params = dict(loss=loss, alpha=alpha, l1_ratio=self.l1_ratio,
                      fit_intercept=self.fit_intercept, max_epochs=self.max_epochs, tol=tol,
                      selection=self.selection, parallel=self.parallel, n_jobs=self.n_jobs,
                      warm_start=self.warm_start, random_state=self.random_state,
                      verbose=self.verbose, **extra)
        previous = getattr(self, "solver_", None)
        if self.warm_start and isinstance(previous, cls):
            # a copy: a fit that fails after the solver's (calibration, Ctrl-C) keeps the
            # previous model whole (fit_context puts back the old solver_ object)
            return copy.deepcopy(previous).set_params(**params)
        return cls(**params)

    # ------------------------------------------------------------------ fit
    @fit_context
    def fit(self, X, y, sample_weight=None):
        """Draw the grids, bin X, and fit the linear solver on the features.

        X : (n_samples, n_features) array or scipy sparse matrix (an implicit zero is 0);
        y : targets (regression, 1-D or 2-D) or
        class labels; sample_weight : optional non-negative weights.
        """
        if self.device == "cuda":  # binning and CG on the GPU (rbcd.cuda.estimators)
            if getattr(self, "multi_class", "ovr") != "ovr":
                raise ValueError(f"multi_class={self.multi_class!r} is fitted on the CPU "
                                 f"only; use device='cpu', or multi_class='ovr' with "
                                 f"device='cuda'")
            from .cuda.estimators import rb_fit
            self._linear_weights(0, 0)      # a linear term refused before any work
            self.__dict__.pop("_linear_term", None)
            rb_fit(self, X, y, sample_weight)
            self.linear_ = 0.0
            return self
        solver = self._solver_name()
        self._effective()  # parameter errors before any work
        X = validate_data(self, check_sparse_structure(X), reset=True,
                          accept_sparse=["csr", "csc"], dtype=np.float64,
                          ensure_all_finite=False)
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        # y and the weights checked here, before the binning, in this estimator's name
        y = (check_class_labels(y, X.shape[0], type(self).__name__) if self._classifier
             else check_regression_target(y, X.shape[0]))
        sample_weight = check_sample_weight(sample_weight, X.shape[0])
        weights = self._linear_weights(X.shape[0], X.shape[1])
        t0 = time.perf_counter()
        # the weights enter the statistics of the training rows: sigma="scale" (its pairs
        # drawn by weight), n_grids="auto" (the rows of positive weight), the linear term
        binning = self._make_binning(X.shape[0] if sample_weight is None
                                     else int(np.count_nonzero(sample_weight)))
        # SERIAL_ENTRIES: a small fit runs every stage on one thread, whatever n_jobs
        serial = X.shape[0] * binning.n_grids < SERIAL_ENTRIES
        if serial:
            binning.n_jobs = 1     # (plain attributes: set_params costs more than a tiny fit)
        cols = None
        if self.n_features is None:  # exact mode: Z and its grid structure, built together
            Z, cols = binning.fit_transform(X, return_columns=True, sample_weight=sample_weight)
        else:  # hashed mode: no grid structure
            Z = binning.fit_transform(X, sample_weight=sample_weight)
        binning.n_jobs = self.n_jobs              # the user's threads for later transforms
        t1 = time.perf_counter()
        n_weight = Z.shape[0] if sample_weight is None else float(np.sum(sample_weight))
        est = self._make_solver(Z.shape, cols is not None, n_weight)
        if serial:
            est.n_jobs = 1
        n_out = (np.unique(y).shape[0] if self._classifier else
                 1 if np.ndim(y) == 1 else np.shape(y)[1])   # classes (one-vs-rest), targets
        check_solver_memory(type(self).__name__, "cd" if solver == "cd" else "cg", Z.shape[0],
                            Z.shape[1], n_out, "classes" if self._classifier else "targets")
        term = extra = None
        if any(c > 0.0 for c in weights):   # the linear term (rbcd.solvers._linear)
            from .solvers._linear import ExtraBlock, LinearTerm
            term = LinearTerm(X, sample_weight)
            extra = ExtraBlock(term.block(X), weights)
        fit_labels = getattr(est, "_fit_labels", None)
        if fit_labels is not None:   # Z made and y checked here: not checked again
            est.n_features_in_ = Z.shape[1]
            if extra is None:
                fit_labels(Z, y, sample_weight, cols)
            else:
                fit_labels(Z, y, sample_weight, cols, extra=extra)
        else:
            est.fit(Z, y, sample_weight=sample_weight, columns=cols)
        if serial:
            est.n_jobs = self.n_jobs
        train_scores = est.__dict__.pop("_ovo_train_scores", None)   # one-vs-one, see below
        t2 = time.perf_counter()
        self.binning_ = binning
        if "feature_names_in_" in self.__dict__:   # X's names, checked by binning_.transform
            binning.feature_names_in_ = self.feature_names_in_   # too (its own rows: not)
        self.solver_ = est
        self.linear_ = float(getattr(est, "extra_weight_", 0.0)) if extra is not None else 0.0
        self._linear_term = term if self.linear_ > 0.0 else None
        if self.linear_ > 0.0:
            Z = _with_block(Z, extra.M)
        if self._classifier:
            self.classes_ = est.classes_
            self._fit_calibration(est, Z, y, sample_weight, n_weight,
                                  extra.M if self.linear_ > 0.0 else None, train_scores)
        self.fit_time_ = {"binning": t1 - t0, "solver": t2 - t1}
        if self.verbose:
            form = f" ({est.solver_})" if solver in _RIDGE_SOLVERS else ""
            print(f"[{type(self).__name__}] {binning.n_features_out_} features from "
                  f"{Z.shape[0]} rows in {t1 - t0:.3f}s; {solver}{form} solver in "
                  f"{t2 - t1:.3f}s")
        return self

    # ------------------------------------------------------------------ predict
    # (no public ``transform``: it would make the model a scikit-learn transformer;
    # the features of new data are ``binning_.transform(X)``)
    def to_cpu(self):
        """This model with device="cpu" (a device fit's binning tables rebuilt on the host)."""
        from .cuda.estimators import rb_to_cpu
        return rb_to_cpu(self)

    def _valid_features(self, X):
        """The solver's features of validated X: Z, and beside it the linear term's block
        M where the fit added one ([Z, M], rbcd.solvers._linear)."""
        Z = self.binning_._transform(X, names=False)     # (the names: checked by the caller)
        term = self.__dict__.get("_linear_term")
        return built_here(Z if term is None else _with_block(Z, term.block(X)))

    def _by_blocks(self, X, score, names=True):
        """score(features of X), computed a block of PREDICT_ENTRIES entries' rows at a
        time and stacked (score: a function of the rows' features, row by row). X's
        errors (non-finite values, bins too large) are raised before any block, naming
        X's own rows. names=False: X's feature names were checked by the caller (a
        search's rows for its best_estimator_; rbcd._validation.validate_rows)."""
        check_is_fitted(self, "solver_")
        if "_cuda_tables" in self.binning_.__dict__:  # fitted with device="cuda"
            # X's names and feature count checked here, in the model's name, as below; the
            # device binning converts and checks the rest
            if names:
                _check_feature_names(self, X, reset=False)
            shape = getattr(X, "shape", None)       # (a list: the binning's conversion)
            if shape is not None and len(shape) == 2 and shape[1] != self.n_features_in_:
                raise ValueError(f"X has {shape[1]} features, but {type(self).__name__} is "
                                 f"expecting {self.n_features_in_} features as input.")
            return score(self.binning_._transform(X, names=False))
        if plain_float_array(X):  # the binning checks finiteness
            X = plain_checked(self, X, reset=False, names=names)
        else:
            X = validate_rows(self, check_sparse_structure(X), names,
                              accept_sparse=["csr", "csc"], dtype=np.float64,
                              ensure_all_finite=False)
        rows = max(256, PREDICT_ENTRIES // max(1, self.binning_.n_bins_.shape[0]))
        if X.shape[0] <= rows:
            return score(self._valid_features(X))
        X = self.binning_._check_rows(X, names=False)   # dense C-ordered or CSR: rows slice
        return np.concatenate([score(self._valid_features(X[a:a + rows]))
                               for a in range(0, X.shape[0], rows)])

    @property
    def coef_(self):
        """The solver's coefficients on the random binning features, and after them on
        the linear term's d standardized features where the fit added one (``linear_``
        > 0)."""
        return self.solver_.coef_

    @property
    def intercept_(self):
        """The solver's intercept."""
        return self.solver_.intercept_

    @property
    def alpha_(self):
        """The penalty used (the choice of alpha="auto"), in the solver's units."""
        return getattr(self.solver_, "alpha_", self.solver_.alpha)

    @property
    def n_iter_(self):
        """CG iterations per target (1 for a direct solve), or CD epochs."""
        return self.solver_.n_iter_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # an implicit zero is the value 0 (RandomBinning)
        return tags


_PARAMS_DOC_HEAD = """
    Parameters
    ----------
    n_grids : int or "auto", default "auto"
        Random grids R (non-zeros per feature row). "auto": 256, or 512 with more than 64
        features; 1,024 up to 2,048 training rows and 512 up to 4,096, where the kernel
        estimate's noise limits accuracy more than the data do (fewer of these extra grids
        above 2,048 features, as each grid holds numbers per feature); regression above
        2,048 rows: 2,048 up to 8,192 rows, 1,024 up to 16,384, 512 up to 32,768 (and at
        most 2^21 / n_features of them: 1,024 from 1,025 features). More grids estimate
        the kernel better; time and memory grow linearly.
    sigma : "scale", float or array (n_features,), default "scale"
        Laplacian kernel bandwidth, k(x, y) = exp(-||x - y||_1 / sigma). "scale": half the
        median L1 distance between sampled pairs of training rows (``binning_.sigma_``);
        tune around it with ``c * rbcd.median_l1_distance(X)``.
    kernel : "laplacian"
    n_features : None or int
        None: exact bins (one column per non-empty training bin). An int m: hashed
        columns (stateless, m columns).
    solver : "auto", "cg", "direct" or "cd", default "auto"
        "auto", "cg" and "direct" solve ridge (:class:`rbcd.RidgeCG`'s ``solver``): "cg" by
        conjugate gradient, "direct" by one Cholesky factorization of the smaller Gram
        matrix (n x n or D x D) for every class or target at once, "auto" by whichever of
        them a fixed cost model of (n_samples, columns, n_grids, targets) says is cheapest
        (direct on small data, CG on large). "cd": coordinate descent.
    alpha : "auto", float or None, default "auto"
        Penalty. Ridge solvers: Ridge's units (sum of squares + alpha ||w||^2); cd:
        mean-loss units (DESIGN contract 8). "auto" (ridge solvers): chosen from the data
        among 1e-6 .. 10 per unit of training weight, by exact leave-one-out up to 1,000
        rows and on a fixed sample of 1,000 rows above (the sample's choice then scaled
        by sqrt(N / 1,000): alpha_ / N shrinks as 1 / sqrt(N)), by squared error (regression) or
        by accuracy (classification); a regression above 5,000 rows then takes the best
        of six multiples of that choice on a held-out fifth of up to 20,000 rows
        (rbcd.solvers._heldout); the choice is ``alpha_``. With cd, "auto" is chosen
        on a fixed held-out fifth of the rows (of each class) along a warm-started path of
        9 penalties from alpha_max down to 1e-4 alpha_max, by the model's own held-out loss,
        then fitted on every row (rbcd.solvers.cd, docs/internals.md); ``solver_.alphas_``
        and ``solver_.holdout_loss_`` record the path. None: 1e-4 per training row, i.e.
        1e-4 * n_samples (the sum of sample_weight) for ridge and 1e-4 for cd.
    l1_ratio : float in [0, 1], default 1.0 (cd only)
    loss : None or str
        None -> squared (regression / cg) or logistic (cd classification); cd also
        accepts "squared_hinge" for classification.
    fit_intercept : bool, default True
    tol : float or None; None -> 1e-3 (cg: relative residual) or 1e-4 (cd: relative gap)
    max_iter : int or None (cg only), see RidgeCG
    max_epochs : int, default 1000 (cd only; lasso on random binning columns converges
        slowly, and a fit stops as soon as it converges)
    selection : "random", "permutation" or "cyclic" (cd only)
    parallel : None, "auto", "hogwild" or "grid" (cd only)
    preconditioner : "auto", "jacobi" or None (cg only), default "auto"
        "auto": in exact mode (n_features=None), Jacobi (projected off the grids' null
        directions, see RidgeCG) up to 8 bins per training row, D <= 8 N, and plain CG
        above; in hashed mode Jacobi for tol >= 1e-4 and plain CG below. Measured on
        random binning features: with D < N projected Jacobi needs 1.5-2.6x fewer
        iterations than plain CG at every tolerance from 1e-2 to 1e-8, and up to
        D = 8 N as many or fewer (regression: 1.2-4.3x fewer); far beyond, plain CG
        needs fewer (benchmarks/compare_preconditioner.py).
    warm_start : bool (cd only)
"""

# RBClassifier documents class_weight and calibration between the two halves (its
# signature's order); RBRegressor uses the two halves joined (_PARAMS_DOC)
_PARAMS_DOC_TAIL = """    dtype : numpy.float64 or numpy.float32, the dtype of the features
    n_jobs : int or None, threads for binning and solver. None: the cores not busy with other
        work when each stage starts (docs/internals.md, "Threads on a busy machine"); -1:
        all cores.
    random_state : int, Generator, RandomState or None
        Seeds the grids and the CD coordinate stream.
    verbose : int
    device : "cpu" or "cuda", default "cpu"
        "cuda": binning, CG and prediction on one GPU through CuPy (the ``rbcd[cuda]``
        extra; solver "auto" or "cg", solved by CG; exact mode; calibration "train" or None). The same Z bit for
        bit, the same objective; ``to_cpu()`` gives the equal CPU model (docs/gpu.md).
    linear : "auto" or float >= 0, default "auto" (ridge solvers)
        Weight c of a linear kernel on the standardized features added to the random
        binning kernel: k(x, y) = k_RB(x, y) + c <m(x), m(y)>, m(x) = (x - mean) /
        (std sqrt(n_features)) with the training columns' mean and standard deviation
        (rbcd.solvers._linear). It fits near-linear targets and features that the L1
        distance of the kernel drowns (unscaled data). 0: none. "auto", where
        alpha="auto" scores every row by exact leave-one-out (at most 1,000 rows; at most
        256 features; the CPU): classification, c chosen among 0 and 1 jointly with the
        penalty by that leave-one-out; regression, c = 1 with the penalty chosen for it
        (rbcd.solvers._linear.AUTO_REGRESSION); elsewhere none. The choice is
        ``linear_``; with c > 0, ``coef_`` holds the d linear coefficients after the
        random binning ones. A fixed c > 0 is solved on any
        size: in the dual direct form as one n x n system, else by the ridge solver on Z
        with d more right-hand sides.
"""

_PARAMS_DOC = _PARAMS_DOC_HEAD + _PARAMS_DOC_TAIL


class RBRegressor(RegressorMixin, _RBBase):
    __doc__ = """Kernel ridge / lasso regression with random binning features.

    Approximates a Laplacian-kernel machine: Z = RandomBinning(X), then a linear
    model on Z by conjugate gradient (ridge) or coordinate descent.
    """ + _PARAMS_DOC + """
    Attributes
    ----------
    binning_ : RandomBinning, the fitted binning (its ``sigma_`` and ``n_features_out_``)
    solver_ : the fitted RidgeCG (solvers "auto", "cg" and "direct") or CDRegressor
    coef_ : ndarray, the solver's coefficients on the random binning features, followed by
        the linear term's where ``linear_`` > 0 (one row per target for 2-D y)
    intercept_ : float or ndarray (n_targets,), the solver's intercept
    alpha_ : float or ndarray, the penalty used (for alpha="auto" the chosen one), in the
        solver's units (Ridge's sum of squares for the ridge solvers, mean loss for cd)
    n_iter_ : CG iterations per target (1 for a direct solve), or CD epochs
    linear_ : float, the weight of the linear term used (0: none)
    fit_time_ : dict with the seconds spent in "binning" and "solver"
    n_features_in_ : int, the number of features of X seen in fit
    feature_names_in_ : ndarray of str, X's column names (only where X had string column
        names, e.g. a pandas DataFrame)

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.model_selection import train_test_split
    >>> import rbcd
    >>> X, y = load_diabetes(return_X_y=True)
    >>> Xtr, Xte, ytr, yte = train_test_split(X, y, random_state=0)
    >>> reg = rbcd.RBRegressor(random_state=0).fit(Xtr, ytr)
    >>> round(reg.score(Xte, yte), 3), reg.alpha_   # test R^2, the chosen penalty
    (0.358, 3.31)
    """

    def __init__(self, n_grids="auto", sigma="scale", kernel="laplacian", n_features=None,
                 solver="auto", alpha="auto", l1_ratio=1.0, loss=None, fit_intercept=True,
                 tol=None, max_iter=None, max_epochs=CD_MAX_EPOCHS, selection="random",
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
        """Predicted targets, (n,) or (n, n_targets)."""
        return self._predict(X)

    def _predict(self, X, names=True):   # names: see _by_blocks
        return self._by_blocks(X, lambda Z: self.solver_.predict(Z), names)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class RBClassifier(ClassifierMixin, _RBBase):
    __doc__ = """Kernel classification with random binning features.

    ``solver="auto"``, ``"cg"`` or ``"direct"``: ridge classification (one-vs-rest -1/+1
    targets, all classes solved together; or one-vs-one, see ``multi_class``).
    ``solver="cd"``: logistic (``predict_proba``) or squared hinge loss
    by coordinate descent, one-vs-rest for more than two classes.
    """ + _PARAMS_DOC_HEAD + """    class_weight : None, "balanced" or dict
        Multiplies each row's sample weight by its class's weight ("balanced": n_samples /
        (n_classes x the class's count)). A dict may name labels that y lacks when it
        names every label y has; labels it leaves out weigh 1 (scikit-learn's rule).
    calibration : "train", "holdout" or None, default "train"
        How ``predict_proba`` turns the decision values of a model without probabilities
        of its own (the ridge solvers "auto", "cg" and "direct", or cd with the squared
        hinge loss) into probabilities: the scale of a softmax of the scores (Platt's
        sigmoid through the origin for two classes; the probabilities agree with
        ``predict``), fitted on the training rows ("train", free, over-confident when the
        model fits its training rows closely) or on a held-out fifth of them scored by a
        second model fitted on the other four fifths ("holdout": one more solver fit on
        four fifths of the rows, with the same features and the penalty already chosen).
        None: no ``predict_proba``.
""" + _PARAMS_DOC_TAIL + """    multi_class : "ovr" or "ovo", default "ovr" (ridge solvers)
        More than two classes with the squared loss: "ovr", one -1/+1 target per class,
        all solved together; "ovo", one binary ridge problem per pair of classes on that
        pair's rows and a vote (scikit-learn's OneVsOneClassifier over RidgeClassifier,
        rbcd.solvers._ovo), a number alpha shared by the pairs in proportion to their rows'
        weight, alpha="auto" chosen for each pair, no linear term. With many
        classes "ovo" is the closer to SVC (docs/benchmarks/search.md), for n_classes (
        n_classes - 1) / 2 smaller fits; RBClassifierCV chooses between the two. With
        "ovo" ``coef_`` is a CSR matrix (n_pairs, D) of the pairs' coefficients and
        ``solver_.pairs_`` their classes' numbers.

    Attributes
    ----------
    classes_ : ndarray (n_classes,), the class labels
    binning_ : RandomBinning, the fitted binning (its ``sigma_`` and ``n_features_out_``)
    solver_ : the fitted RidgeCGClassifier (solvers "auto", "cg" and "direct") or
        CDClassifier
    coef_ : the solver's coefficients on the random binning features, followed by the
        linear term's where ``linear_`` > 0; one row per class for more than two classes
        (a CSR matrix of one row per pair with multi_class="ovo")
    intercept_ : float or ndarray, the solver's intercept(s)
    alpha_ : float or ndarray, the penalty used (for alpha="auto" the chosen one), in the
        solver's units (Ridge's sum of squares for the ridge solvers, mean loss for cd);
        with multi_class="ovo" one per pair of classes
    n_iter_ : CG iterations per target (1 for a direct solve), or CD epochs
    calibration_ : float or None, the fitted scale of the softmax (None where
        ``predict_proba`` needs none: the logistic loss, or calibration=None)
    linear_ : float, the weight of the linear term used (0: none)
    fit_time_ : dict with the seconds spent in "binning" and "solver"
    n_features_in_ : int, the number of features of X seen in fit
    feature_names_in_ : ndarray of str, X's column names (only where X had string column
        names, e.g. a pandas DataFrame)

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.model_selection import train_test_split
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> import rbcd
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> Xtr, Xte, ytr, yte = train_test_split(X, y, random_state=0)
    >>> clf = make_pipeline(StandardScaler(), rbcd.RBClassifier(random_state=0))
    >>> round(clf.fit(Xtr, ytr).score(Xte, yte), 3)
    0.972
    >>> clf.predict_proba(Xte[:2]).round(3)
    array([[0.998, 0.002],
           [0.043, 0.957]])
    """

    _classifier = True
    _parameter_constraints = {
        **_RB_CONSTRAINTS,
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "calibration": [StrOptions({"train", "holdout"}), None],
        "multi_class": [StrOptions({"ovr", "ovo"})],
    }

    def __init__(self, n_grids="auto", sigma="scale", kernel="laplacian", n_features=None,
                 solver="auto", alpha="auto", l1_ratio=1.0, loss=None, fit_intercept=True,
                 tol=None, max_iter=None, max_epochs=CD_MAX_EPOCHS, selection="random",
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
        """Scores: (n,) for two classes (positive means classes_[1]), else (n, n_classes)."""
        return self._decision_function(X)

    def predict(self, X):
        """Predicted class labels."""
        return self._predict(X)

    def _decision_function(self, X, names=True):   # names: see _by_blocks
        return self._by_blocks(X, lambda Z: self.solver_.decision_function(Z), names)

    def _predict(self, X, names=True):
        return self._by_blocks(X, lambda Z: self.solver_.predict(Z), names)

    def _native_proba(self):
        solver, _, _, loss = self._effective()
        return solver == "cd" and loss == "logistic"

    def _proba_source(self):
        """Where predict_proba's probabilities come from: "native" (the logistic CD
        solver's), "calibrated" (the softmax of the decisions) or None. A fitted model
        answers from its fit (a later set_params changes the next fit only); an unfitted
        one from its parameters."""
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
        return "calibrated" if self.calibration is not None else None

    def _has_proba(self):
        return self._proba_source() is not None

    def _fit_calibration(self, est, Z, y, sample_weight, n_weight, M=None, pair_scores=None):
        """Fit the softmax scale of ``rbcd._calibration`` (only where the solver has no
        probabilities of its own and calibration is on): on the training rows' scores, or on
        a held-out fifth scored by a model fitted on the rest (same parameters; with the
        linear term's block M, Z is [Z, M] and the rest's fit adds the term of weight
        ``linear_``). ``pair_scores``: a one-vs-one fit's decisions of its pairs on the
        training rows, where it computed them (rbcd.solvers._ovo.fit_pairs_dual)."""
        self.calibration_ = None
        if self.calibration is None or self._native_proba():
            return
        y = np.asarray(y).reshape(-1)
        weight = None if sample_weight is None else np.array(np.broadcast_to(
            np.asarray(sample_weight, dtype=np.float64), y.shape))
        rows = np.arange(y.shape[0])
        if self.calibration == "holdout":
            held = np.zeros(y.shape[0], dtype=bool)
            held[np.random.default_rng(0).permutation(y.shape[0])[: max(1, y.shape[0] // 5)]] = True
            fit_rows, rows = np.flatnonzero(~held), np.flatnonzero(held)

            def every_class(r):   # each class has rows of positive weight among r
                live = r if weight is None else r[weight[r] > 0]
                return np.unique(y[live]).shape[0] == est.classes_.shape[0]

            if every_class(fit_rows) and every_class(rows):
                aux = self._make_solver(Z.shape, False, n_weight)
                if getattr(aux, "alpha", None) == "auto":   # the penalty the model chose
                    aux.set_params(alpha=est.alpha_)
                w_fit = None if weight is None else weight[fit_rows]
                if M is None:
                    aux.fit(Z[fit_rows], y[fit_rows], sample_weight=w_fit)
                else:   # Z is [Z, M]: the term refitted with the model's weight
                    from .solvers._linear import ExtraBlock
                    D = Z.shape[1] - M.shape[1]
                    aux.n_features_in_ = D
                    aux._fit_labels(Z[fit_rows][:, :D], y[fit_rows], w_fit, None,
                                    extra=ExtraBlock(M[fit_rows], (self.linear_,)))
                est = aux
            else:  # too few rows (or weight) to hold out every class: the training rows
                rows = np.arange(y.shape[0])
        Zr = Z if rows.shape[0] == y.shape[0] else Z[rows]
        fitted = (getattr(est, "coef_", None) if hasattr(est, "_fit_labels")
                  and est.__dict__.get("pairs_") is None else None)
        if pair_scores is not None and est is self.solver_ and rows.shape[0] == y.shape[0]:
            from .solvers._ovo import ovo_decision
            scores = ovo_decision(pair_scores, est.classes_.shape[0])
        elif fitted is not None and est.__dict__.get("_cuda_fitted") is None:
            # the solver's decision_function without checking the features it was fitted on
            scores = np.asarray(Zr @ np.asarray(fitted).T) + est.intercept_
            scores = scores.ravel() if scores.shape[1] == 1 else scores
        else:
            scores = est.decision_function(Zr)
        y_index = np.searchsorted(self.classes_, y[rows])
        w = None if weight is None else weight[rows]
        if w is not None and not w.sum() > 0:
            w = None
        self.calibration_ = fit_softmax_calibration(scores, y_index, len(self.classes_), w)

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities, (n, n_classes) in the order of ``classes_``.

        ``solver="cd"`` with the logistic loss: the logistic model's own. Otherwise the
        calibrated softmax of the decision values (see ``calibration``).
        """
        return self._predict_proba(X)

    def _predict_proba(self, X, names=True):   # names: see _by_blocks
        check_is_fitted(self, "solver_")
        if self._proba_source() == "native":
            return self._by_blocks(X, lambda Z: self.solver_.predict_proba(Z), names)
        return self._by_blocks(X, lambda Z: softmax_probabilities(
            self.solver_.decision_function(Z), self.calibration_), names)

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        """log of predict_proba."""
        return np.log(self.predict_proba(X))
