"""``device="cuda"`` of the public estimators: what their fit / transform / predict call.

RandomBinning, RidgeCG / RidgeCGClassifier and RBRegressor / RBClassifier keep one line per
method that hands over to the functions here when ``device="cuda"`` (or when they were fitted
so). Fitted attributes stay those of the CPU estimators, as host numpy arrays (coefficients,
bin counts, grid boundaries: small), so a fitted model pickles as it is; the device state
(the binning's fitted keys) is kept on the host and copied to the GPU on use. ``to_cpu()``
returns the equal CPU estimator. Predictions come back as numpy arrays;
``RandomBinning.transform`` returns a cupyx.scipy.sparse CSR matrix (Z is large).
"""
import copy

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets

from .._validation import check_sample_weight
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
    return xp.ascontiguousarray(xp.asarray(X), dtype=xp.float64)


# ---------------------------------------------------------------------------------- ridge
def ridge_fit(est, X, y, sample_weight=None, columns=None, classifier=False):
    """RidgeCG(device='cuda').fit: X a GridLayout (RBRegressor's path), or Z with its
    GridLayout as ``columns`` (RandomBinning(device='cuda').fit_transform(X,
    return_columns=True)), or any dense / sparse matrix."""
    xp = _xp(est)
    if getattr(est, "solver", "cg") not in ("auto", "cg"):
        raise ValueError(f"device='cuda' solves ridge by CG: solver must be 'auto' or 'cg', "
                         f"got {est.solver!r}")
    if not np.isfinite(float(est.tol)):
        raise ValueError(f"tol must be finite, got {est.tol!r}")
    if isinstance(X, GridLayout):
        op, structured = X, True
    elif isinstance(columns, GridLayout):
        if tuple(X.shape) != columns.shape:
            raise ValueError(f"columns describe a {columns.shape} matrix, X is {tuple(X.shape)}")
        op, structured = columns, True
    else:
        op, structured = MatrixOperator(xp, _as_matrix(xp, X)), False
    n, D = op.shape
    if classifier:
        y_host = np.asarray(_ops.to_host(y))   # one copy of device labels, not two
        yh = y_host.reshape(-1) if y_host.ndim <= 1 else None
        if yh is None:
            raise ValueError("y must be 1-D for a classifier")
        check_classification_targets(yh)
        binarizer = LabelBinarizer(pos_label=1, neg_label=-1)
        Yh = binarizer.fit_transform(yh).astype(np.float64)
        est.classes_ = binarizer.classes_
        if est.classes_.shape[0] < 2:
            raise ValueError(f"RidgeCGClassifier needs at least 2 classes in y, got 1 class: "
                             f"{est.classes_[0].tolist()!r}")
        Y = _ops.on_device(xp, Yh, np.float64)
        y_ndim = 2
    else:
        Y = xp.asarray(y if _ops.is_numpy(xp) or hasattr(y, "__cuda_array_interface__")
                       else np.asarray(y), dtype=xp.float64)
        y_ndim = Y.ndim
        if Y.ndim not in (1, 2):
            raise ValueError(f"y must be 1-D or 2-D, got shape {Y.shape}")
        Y = Y.reshape(Y.shape[0], -1)
        if not bool(xp.isfinite(Y).all()):
            raise ValueError("y contains NaN or infinity")
    if Y.shape[0] != n:
        raise ValueError(f"X has {n} rows but y has {Y.shape[0]}")
    from ..solvers.cg import _check_sample_weight
    s = _check_sample_weight(None if sample_weight is None else _ops.to_host(sample_weight), n)
    if classifier and est.class_weight is not None:
        cw = compute_sample_weight(est.class_weight, yh)
        s = cw if s is None else s * cw
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
    est.converged_ = bool(np.all(info["converged"]))
    est.residual_ = info["residual"]
    est.n_features_in_ = D
    k = coef.shape[0]
    if classifier or y_ndim == 2:
        est.coef_ = coef
        est.intercept_ = intercept if est.fit_intercept else np.zeros(k)
    else:
        est.coef_ = coef[0]
        est.intercept_ = np.float64(intercept[0]) if est.fit_intercept else 0.0
    est._cuda_fitted = True
    return est


def ridge_decision(est, X):
    """X @ coef_.T + intercept_ on the device, returned as a numpy array (n, k)."""
    xp = _xp(est)
    Z = _as_matrix(xp, X)
    if Z.shape[1] != est.n_features_in_:
        raise ValueError(f"X has {Z.shape[1]} features, but {type(est).__name__} is "
                         f"expecting {est.n_features_in_} features as input")
    coef_t = _ops.on_device(xp, np.atleast_2d(est.coef_).T, np.float64)  # (D, k), C order
    out = Z @ coef_t
    out = _ops.to_host(out.toarray() if hasattr(out, "toarray") else out)
    out = np.asarray(out).reshape(Z.shape[0], -1) + np.atleast_1d(est.intercept_)
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
    """RBRegressor / RBClassifier(device='cuda').fit: binning and CG on the device."""
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
    X = _binning.check_X_xp(xp, X)
    model.n_features_in_ = int(X.shape[1])
    n = int(X.shape[0])
    w_host = None if sample_weight is None else check_sample_weight(
        _ops.to_host(sample_weight), n)           # sigma="scale" draws its pairs by them
    binning = model._make_binning(n if w_host is None else int(np.count_nonzero(w_host)))
    layout = _binning.fit_layout(binning, X, xp, sample_weight=w_host)
    t1 = time.perf_counter()
    n_weight = n if w_host is None else float(np.sum(w_host))
    est = model._make_solver(layout.shape, True, n_weight)
    if isinstance(est.alpha, str) and est.alpha == "auto":
        est.set_params(alpha=_auto_alpha_on_host(model, binning, X, y, sample_weight, n_weight))
    est.fit(layout, y, sample_weight=sample_weight)
    t2 = time.perf_counter()
    model.binning_ = binning
    model.solver_ = est
    if model._classifier:
        model.classes_ = est.classes_
        model.calibration_ = None
        if model.calibration is not None:
            coef = _ops.on_device(xp, np.atleast_2d(est.coef_), np.float64)
            scores = _ops.to_host(layout.dot(coef.T)) + np.atleast_1d(est.intercept_)
            if scores.shape[1] == 1:
                scores = scores.ravel()
            yh = np.asarray(_ops.to_host(y)).reshape(-1)
            w = None if sample_weight is None else np.array(np.broadcast_to(
                np.asarray(_ops.to_host(sample_weight), dtype=np.float64), yh.shape))
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
    .auto_alpha_from_sample), the sampled rows binned by this fit's tables on the host."""
    from ..models import auto_alpha_from_sample

    n = int(X.shape[0])
    yh = np.asarray(_ops.to_host(y))
    wh = None if sample_weight is None else np.broadcast_to(
        np.asarray(_ops.to_host(sample_weight), dtype=np.float64), (n,))

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
