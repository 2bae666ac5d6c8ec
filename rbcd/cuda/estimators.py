"""``device="cuda"`` of the public estimators: what their fit / transform / predict call.

RandomBinning, RidgeCG / RidgeCGClassifier and RBRegressor / RBClassifier keep one line per
method that hands over to the functions here when ``device="cuda"`` (or when they were fitted
so). The inputs are checked as the CPU estimators check them, with the CPU's own functions
and messages (y, sample_weight, class_weight, feature names; device arrays of y and the
weights are brought to the host for that: they are small). Fitted attributes stay those of
the CPU estimators, of the CPU's types and dtypes, as host numpy arrays (coefficients, bin
counts, grid boundaries: small), so a fitted model pickles as it is; the device state (the
binning's fitted keys) is kept on the host and copied to the GPU on use. ``to_cpu()``
returns the equal CPU estimator. Predictions come back as numpy arrays, of the CPU's dtype;
``RandomBinning.transform`` returns a cupyx.scipy.sparse CSR matrix (Z is large).
"""
import copy

import numpy as np
import scipy.sparse as sp
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_feature_names, _check_y, check_consistent_length

from .._validation import (check_class_labels, check_class_weight, check_regression_target,
                           check_sample_weight)
from . import _ops
from . import binning as _binning
from .binning import GridLayout
from .cg import MatrixOperator, solve_ridge

__all__ = ["ridge_fit", "ridge_decision", "ridge_to_cpu", "rb_fit", "rb_to_cpu"]


def _xp(est):
    return _ops.get_xp(getattr(est, "device", "cpu"))


def _as_matrix(xp, X):
    """X as a dense array or CSR matrix of xp's module."""
    if _ops.is_numpy(xp):
        if sp.issparse(X):
            return sp.csr_matrix(X, dtype=np.float64)
        return np.ascontiguousarray(_ops.to_host(X), dtype=np.float64)
    import cupyx.scipy.sparse as csp
    if csp.issparse(X):
        return X.tocsr().astype(np.float64)
    if sp.issparse(X):
        return csp.csr_matrix(sp.csr_matrix(X, dtype=np.float64))
    return xp.ascontiguousarray(xp.asarray(X if _ops.on_gpu(X) else np.asarray(X)),
                                dtype=xp.float64)


def _value_dtype(X):
    """The dtype the CPU solver computes X in (validate_data with dtype=[float64,
    float32]): float32 for float32 input, else float64. A GridLayout: its Z's."""
    if isinstance(X, GridLayout):
        return X.dtype
    dt = getattr(X, "dtype", None)
    if not isinstance(dt, np.dtype):   # a data frame (a dtype per column), a list
        dt = np.asarray(X).dtype
    return np.dtype(np.float32) if dt == np.float32 else np.dtype(np.float64)


def _host_matrix(X):
    """Z on the host, as the CPU's check of ``columns`` takes it: scipy sparse or numpy."""
    if sp.issparse(X):
        return X
    if _ops.on_gpu(X):
        return _ops.to_host(X)       # cupyx sparse: scipy's; cupy: numpy
    return np.asarray(X)


def _layout_of_columns(xp, est, X, columns):
    """RidgeCG(device='cuda').fit(Z, y, columns=...) with the CPU's ``columns`` (an
    RBColumns, or a fitted exact-mode RandomBinning): the CPU's check that they describe
    Z (rbcd.solvers._columns.columns_from: the same errors), on a host copy of Z. Where
    the CPU solver then projects off the grid directions (rbcd.solvers.cg
    .training_grid_ptr: sparse Z, one stored value, every row in every grid once), the
    device gets a GridLayout built from the structure (labels per grid from the CSC rows,
    O(nnz)) and projects too; otherwise Z's plain operator, no projection, as the CPU.
    Returns (operator, structured)."""
    from ..solvers._columns import columns_from

    Zh = _host_matrix(X)
    cols = columns_from(Zh, columns, est.n_jobs)
    n = int(Zh.shape[0])
    gp = cols.grid_ptr
    layout = None
    if sp.issparse(Zh) and gp is not None and cols.data is None and n > 0:
        Zc = Zh.tocsr()
        if not Zc.has_canonical_format:
            Zc = Zc.copy()
            Zc.sum_duplicates()
        data = Zc.data
        if data.shape[0] and np.all(data == data[0]) and float(cols.value) == float(data[0]):
            layout = _grid_layout(xp, cols, np.asarray(gp, dtype=np.int64), n,
                                  float(data[0]), _value_dtype(X))
    if layout is not None:
        return layout, True
    return MatrixOperator(xp, _as_matrix(xp, X)), False


def _grid_layout(xp, cols, gp, n, value, dtype):
    """The GridLayout of a checked column structure whose every grid holds every row
    once (training data), else None."""
    indptr = np.asarray(cols.indptr, dtype=np.int64)
    if np.any(np.diff(indptr[gp]) != n):
        return None
    rows = np.asarray(cols.indices)
    R = gp.shape[0] - 1
    labels = np.full((R, n), -1, dtype=np.int32)
    for r in range(R):
        c0, c1 = int(gp[r]), int(gp[r + 1])
        counts = np.diff(indptr[c0:c1 + 1])
        labels[r, rows[indptr[c0]:indptr[c1]]] = np.repeat(
            np.arange(c1 - c0, dtype=np.int32), counts)
    if np.any(labels < 0):            # a row twice in a grid: not training data
        return None
    return GridLayout(xp, _ops.on_device(xp, labels, np.int32), gp,
                      _ops.on_device(xp, indptr, np.int64),
                      _ops.on_device(xp, rows, np.int32), value, dtype)


def _check_targets(est, y, n, classifier):
    """y on the host, checked as the CPU's RidgeCG / RidgeCGClassifier.fit checks it
    (validate_data's y checks and length, then rbcd's): for a classifier (classes_, Y),
    Y the -1/+1 one-vs-rest targets, and the labels; else (None, y, y)."""
    from ..solvers.cg import one_vs_rest_targets

    yh = _ops.host_value(y)
    yh = _check_y(yh, multi_output=not classifier, y_numeric=not classifier, estimator=est)
    check_consistent_length(np.empty((n, 0)), yh)
    if not classifier:
        yh = check_regression_target(yh)
        return None, yh, yh
    check_classification_targets(yh)
    classes, Y = one_vs_rest_targets(yh)
    if classes.shape[0] < 2:
        raise ValueError(f"RidgeCGClassifier needs at least 2 classes in y, got 1 class: "
                         f"{classes[0].tolist()!r}")
    return classes, Y, yh


# ---------------------------------------------------------------------------------- ridge
def ridge_fit(est, X, y, sample_weight=None, columns=None, classifier=False):
    """RidgeCG(device='cuda').fit: X a GridLayout (RBRegressor's path), or Z with its
    GridLayout as ``columns`` (RandomBinning(device='cuda').fit_transform(X,
    return_columns=True)), or Z with the CPU's ``columns`` (an RBColumns or a fitted
    RandomBinning: checked against Z as the CPU checks them), or any dense / sparse
    matrix."""
    from ..solvers.cg import _check_sample_weight

    xp = _xp(est)
    if getattr(est, "solver", "cg") not in ("auto", "cg"):
        raise ValueError(f"device='cuda' solves ridge by CG: solver must be 'auto' or 'cg', "
                         f"got {est.solver!r}")
    if not np.isfinite(float(est.tol)):
        raise ValueError(f"tol must be finite, got {est.tol!r}")
    _check_feature_names(est, X, reset=True)     # a data frame's names, as validate_data
    out_dtype = _value_dtype(X)
    if isinstance(X, GridLayout):
        op, structured = X, True
    elif isinstance(columns, GridLayout):
        if tuple(X.shape) != columns.shape:
            raise ValueError(f"columns describe a {columns.shape} matrix, X is {tuple(X.shape)}")
        op, structured = columns, True
    elif columns is not None:
        op, structured = _layout_of_columns(xp, est, X, columns)
    else:
        op, structured = MatrixOperator(xp, _as_matrix(xp, X)), False
    n, D = op.shape
    classes, Yh, labels = _check_targets(est, y, n, classifier)
    if classifier:
        est.classes_ = classes
        y_ndim = 2
    else:
        y_ndim = Yh.ndim
        Yh = Yh.reshape(Yh.shape[0], -1)
    s = _check_sample_weight(_ops.host_value(sample_weight), n)
    if classifier and est.class_weight is not None:
        cw = compute_sample_weight(check_class_weight(est.class_weight), labels)
        s = cw if s is None else s * cw
    Y = _ops.on_device(xp, Yh, np.float64)
    s_d = None if s is None else _ops.on_device(xp, s, np.float64)
    if isinstance(est.alpha, str) and est.alpha == "auto":
        raise ValueError("device='cuda' does not choose alpha='auto' (the data-driven penalty "
                         "runs on the CPU, device='cpu'); pass a number, or alpha=None to "
                         "RBRegressor / RBClassifier for 1e-4 per unit of training weight")
    coef, intercept, n_iter, info = solve_ridge(
        xp, op, Y, s_d, est.alpha, est.fit_intercept, est.tol, est.max_iter,
        est.preconditioner, structured, int(est.verbose),
        shared_scale=classifier)   # classes on one scale, as the CPU classifier's
    est.n_iter_ = n_iter
    est.solver_ = "cg"
    a = np.asarray(est.alpha, dtype=np.float64)   # alpha_ as the CPU solver sets it
    est.alpha_ = float(a) if a.ndim == 0 else a
    est.converged_ = bool(np.all(info["converged"]))
    est.residual_ = info["residual"]
    est.n_features_in_ = D
    k = coef.shape[0]
    # the CPU's types: coefficients in X's dtype (float32 in, float32 out)
    if classifier or y_ndim == 2:
        est.coef_ = coef.astype(out_dtype)
        est.intercept_ = (intercept.astype(out_dtype) if est.fit_intercept
                          else np.zeros(k, dtype=out_dtype))
    else:
        est.coef_ = coef[0].astype(out_dtype)
        est.intercept_ = out_dtype.type(intercept[0]) if est.fit_intercept else 0.0
    est._cuda_fitted = True
    return est


def _decision_dtype(est, X):
    """The dtype of the CPU solver's X @ coef_.T + intercept_ (_RidgeCGBase._decision):
    dense X in its own dtype (float32 or float64), sparse X in that of X and coef_
    together; then numpy's promotion with intercept_."""
    xd = _value_dtype(X)
    coef = np.asarray(est.coef_)
    product = np.result_type(xd, coef.dtype) if (sp.issparse(X) or _is_sparse(X)) else xd
    return (np.zeros((1, 1), dtype=product) + est.intercept_).dtype


def _is_sparse(X):
    return type(X).__module__.startswith("cupyx.scipy.sparse")


def ridge_decision(est, X):
    """X @ coef_.T + intercept_ on the device, returned as a numpy array (n, k) of the
    CPU's dtype."""
    xp = _xp(est)
    _check_feature_names(est, X, reset=False)
    out_dtype = _decision_dtype(est, X)
    Z = _as_matrix(xp, X)
    if Z.shape[1] != est.n_features_in_:
        raise ValueError(f"X has {Z.shape[1]} features, but {type(est).__name__} is "
                         f"expecting {est.n_features_in_} features as input.")
    coef_t = _ops.on_device(xp, np.atleast_2d(est.coef_).T, np.float64)  # (D, k), C order
    out = Z @ coef_t
    out = _ops.to_host(out.toarray() if hasattr(out, "toarray") else out)
    out = np.asarray(out).reshape(Z.shape[0], -1) + np.atleast_1d(est.intercept_)
    out = out.astype(out_dtype, copy=False)
    return out[:, 0] if np.ndim(est.coef_) == 1 else out  # the CPU's shapes


def _cpu_copy(est):
    out = copy.copy(est)
    out.__dict__ = {k: v for k, v in est.__dict__.items() if k != "_cuda_fitted"}
    out.device = "cpu"
    return out


def ridge_to_cpu(est):
    """The equal CPU estimator (the coefficients already live on the host)."""
    return _cpu_copy(est)


# ---------------------------------------------------------------------------------- models
def rb_fit(model, X, y, sample_weight=None):
    """RBRegressor / RBClassifier(device='cuda').fit: binning and CG on the device.

    X's feature names, y and the weights are checked first, as the CPU model checks them
    (rbcd.models._RBBase.fit: the same functions, the same messages, in the model's
    name); y and the weights on the host (a device y is copied there: it is small)."""
    import time
    from .._calibration import fit_softmax_calibration
    xp = _xp(model)
    solver = model._solver_name()
    model._effective()  # parameter errors before any work
    if solver not in ("auto", "cg"):
        raise ValueError(f"device='cuda' solves ridge by CG: solver must be 'auto' or 'cg', "
                         f"got {solver!r}")
    if model.n_features is not None:
        raise ValueError("device='cuda' supports exact mode only (n_features=None)")
    if model._classifier and model.calibration == "holdout":
        raise ValueError("device='cuda' supports calibration='train' or None, not 'holdout'")
    if y is None:
        raise ValueError(f"{type(model).__name__} requires y to be passed, but the target y is None")
    t0 = time.perf_counter()
    _check_feature_names(model, X, reset=True)   # a data frame's names, as validate_data
    X = _binning.check_X_xp(xp, X)
    model.n_features_in_ = int(X.shape[1])
    n = int(X.shape[0])
    # y and the weights checked here, before the binning, in this estimator's name
    yh = _ops.host_value(y)
    yh = (check_class_labels(yh, n, type(model).__name__) if model._classifier
          else check_regression_target(yh, n))
    w_host = check_sample_weight(_ops.host_value(sample_weight), n)
    if model._classifier:
        check_class_weight(model.class_weight)
    # sigma="scale" draws its pairs by the weights, n_grids="auto" counts the rows of
    # positive weight
    binning = model._make_binning(n if w_host is None else int(np.count_nonzero(w_host)))
    layout = _binning.fit_layout(binning, X, xp, sample_weight=w_host)
    t1 = time.perf_counter()
    n_weight = n if w_host is None else float(np.sum(w_host))
    est = model._make_solver(layout.shape, True, n_weight)
    if isinstance(est.alpha, str) and est.alpha == "auto":
        est.set_params(alpha=_auto_alpha_on_host(model, binning, X, yh, w_host, n_weight))
    est.fit(layout, yh, sample_weight=w_host)
    t2 = time.perf_counter()
    model.binning_ = binning
    # X's names, checked by binning_.transform too (the model's own calls: by the model,
    # rbcd.models._RBBase._by_blocks), as on the CPU
    if "feature_names_in_" in model.__dict__:
        binning.feature_names_in_ = model.feature_names_in_
    model.solver_ = est
    if model._classifier:
        model.classes_ = est.classes_
        model.calibration_ = None
        if model.calibration is not None:
            coef = _ops.on_device(xp, np.atleast_2d(est.coef_), np.float64)
            scores = _ops.to_host(layout.dot(coef.T)) + np.atleast_1d(est.intercept_)
            # (the CPU's training scores are in the coefficients' dtype)
            scores = scores.astype(np.result_type(est.coef_, est.intercept_), copy=False)
            if scores.shape[1] == 1:
                scores = scores.ravel()
            w = w_host
            if w is not None and not w.sum() > 0:
                w = None
            model.calibration_ = fit_softmax_calibration(
                scores, np.searchsorted(model.classes_, yh), len(model.classes_), w)
    model.fit_time_ = {"binning": t1 - t0, "solver": t2 - t1}
    if model.verbose:
        print(f"[{type(model).__name__}] {binning.n_features_out_} features from {n} rows in "
              f"{t1 - t0:.3f}s; cg solver (cuda) in {t2 - t1:.3f}s")
    return model


def _auto_alpha_on_host(model, binning, X, y, sample_weight, n_weight):
    """alpha="auto" of a device fit: the CPU's rule on the host (rbcd.models
    .auto_alpha_from_sample), the sampled rows binned by this fit's tables on the host.
    y and sample_weight: checked host arrays (rb_fit), the weights (n,) or None."""
    from ..models import auto_alpha_from_sample, class_weight_rows

    n = int(X.shape[0])
    yh = np.asarray(y)
    wh = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    # a classifier's class weights over all the labels, folded into the weights as the
    # CPU solver folds them before it samples (auto_alpha_from_sample)
    cw = class_weight_rows(model.class_weight, yh) if model._classifier else None
    if cw is not None:
        wh = cw if wh is None else wh * cw
        n_weight = float(np.sum(wh))

    def take_rows(rows):
        Xs = np.asarray(_ops.to_host(X[rows] if rows.shape[0] < n else X))
        return Xs, yh[rows], None if wh is None else wh[rows]

    return auto_alpha_from_sample(model, binning.to_cpu(), n, take_rows, n_weight)


def rb_to_cpu(model):
    """The equal CPU model: the binning's tables rebuilt on the host, the solver copied."""
    out = copy.copy(model)
    out.__dict__ = dict(model.__dict__)
    out.device = "cpu"
    if "binning_" in model.__dict__:
        out.binning_ = model.binning_.to_cpu()
        out.solver_ = model.solver_.to_cpu()
    return out
