"""Sparse Random Features, the plain-Python twin of rbcd.related.sparse_rf (same text, same draws).

Yen, Lin, Lin, Ravikumar & Dhillon, NIPS 2014, Algorithm 1.

L1-regularized learning over an infinite dictionary of random features, as randomized
coordinate descent in function space:

    repeat n_iter times:
        1. draw a block of R = n_components_per_iter new random features,
        2. add them to the working set A,
        3. solve  min_{w, b} (1/N) sum_i loss(z_A(x_i) . w + b, y_i) + alpha ||w||_1
           on the working set by rbcd's coordinate descent (CDRegressor / CDClassifier),
           warm-started from the previous weights (the new features start at 0): at most
           ``max_epochs_per_iter`` epochs in iterations 1 .. T-1 (no ConvergenceWarning:
           budgeted by design), at most ``max_epochs`` (to ``tol``) in the last one, whose
           weights are the model (rbcd.related.sparse_rf explains the schedule),
        4. drop from A the features whose weight is zero (in every one-vs-rest problem;
           weights below 1e-12 times the largest one are rounding residue and count as zero).

Features (``feature=``):

* ``"fourier"``: sqrt(2 / R) cos(w . x + b), w drawn from the kernel's Fourier transform
  (``kernel="gaussian"``: exp(-||x - y||^2 / (2 sigma^2)); ``"laplacian"``:
  exp(-||x - y||_1 / sigma)), as in rbcd.RandomFourier.
* ``"binning"``: the columns of a fresh rbcd.RandomBinning with R grids (Laplacian kernel
  only); every non-empty bin of every grid is one candidate feature (value 1 / sqrt(R)).

``kernel=None`` means "gaussian" for Fourier features and "laplacian" for binning.

One estimator for both tasks, chosen by ``loss``: ``"squared"`` is regression (predict
returns z . w + b, score is R^2), ``"logistic"`` and ``"squared_hinge"`` are classification
(classes_, one-vs-rest beyond two classes, predict returns labels, score is accuracy).
The default ``loss=None`` chooses at fit from y (``loss_``): the paper's classification loss,
the squared hinge (Section 4), for class labels, the squared loss otherwise. The scikit-learn
tags follow the loss given, or after fit the loss chosen (before fit, ``loss=None`` reads as a
regressor: give the loss for scikit-learn's stratified splits).

Random draws, from ``rng = make_generator(random_state)``, per outer iteration:
Fourier: W (d, R) then b (R,) as in rbcd.related.fourier (``draw_fourier``); binning: the seed
``int(rng.integers(0, 2**32))`` of the iteration's RandomBinning; then, for both, the
seed ``int(rng.integers(0, 2**32))`` given as ``random_state`` to the CD solver (seeds below
2**32, the range scikit-learn's ``random_state`` constraint accepts).

Attributes: ``n_features_history_`` (working-set size after each iteration's drop step),
``objective_history_`` (objective after each solve), ``solver_epochs_history_`` and
``solver_work_history_`` (CD epochs, and epochs x N x working-set size, of each solve),
``n_features_`` (kept features),
``coef_``, ``intercept_`` (the CD solver's shapes), ``classes_`` (classification).
"""
import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import ClassifierTags, RegressorTags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._checks import check_sparse_indices
from .._random import make_generator
from ..binning import RandomBinning
from .fourier import check_n_jobs, draw_fourier, fourier_map, resolve_sigma
from ..solvers.cd import CDClassifier, CDRegressor

KERNELS = ("gaussian", "laplacian")

LOSSES = ("squared", "logistic", "squared_hinge")
ZERO_RTOL = 1e-12
FEATURES = ("fourier", "binning")


def _check_int(value, name, low):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def _check_real(value, name, low):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value) or value < low:
        raise ValueError(f"{name} must be finite and >= {low}, got {value}")
    return value


def _check_choice(value, name, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def pointwise_loss(loss, p, y):
    """loss(p, y) elementwise (docs/internals.md): y in {-1, +1} for the classification losses."""
    if loss == "squared":
        return 0.5 * (p - y) ** 2
    if loss == "logistic":
        return np.logaddexp(0.0, -y * p)
    return np.maximum(0.0, 1.0 - y * p) ** 2



def resolve_loss(loss, y):
    """The loss of ``loss=None``: "squared_hinge" when y holds class labels (scikit-learn's
    type_of_target "binary" or "multiclass": strings, booleans, integers, or floats that are
    all integers), else "squared". The squared hinge is the paper's classification loss
    (Section 4: LIBLINEAR's coordinate descent on the square-hinge loss, following LIBSVM's
    FAQ); the squared loss on labels underfits (XOR, noise 0.5: 0.80 R^2, where the squared
    hinge classifies 0.95 of the points right). A regression on integer targets says
    loss="squared"."""
    if loss is not None:
        return loss
    from sklearn.utils.multiclass import type_of_target
    if type_of_target(y) not in ("binary", "multiclass"):
        return "squared"
    values = np.asarray(y)
    if values.dtype.kind in "iuf" and len(np.unique(values)) < 2:   # a constant target
        return "squared"
    return "squared_hinge"


class SparseRandomFeatures(BaseEstimator):
    """L1-sparse random features grown by randomized coordinate descent (see module docstring).

    Parameters
    ----------
    n_components_per_iter : int, default=64
        R, random features drawn per outer iteration (grids, for binning).
    n_iter : int, default=10
        T, outer iterations.
    feature : {"fourier", "binning"}, default="fourier"
    kernel : {"gaussian", "laplacian"} or None, default=None
    sigma : "scale", float or array (n_features,), default="scale"
        "scale": 0.5 times the median L2 distance (gaussian) or DEFAULT_FACTOR (0.5) times the median L1 distance
        (laplacian) of rbcd_ref._scale's pairs.
    loss : {"squared", "logistic", "squared_hinge"} or None, default=None
        None: "squared_hinge" for class labels, "squared" otherwise (``resolve_loss``).
    alpha : float >= 0 or None, default=None (1 / N)
        L1 penalty of the working-set problems (units of the mean loss).
    fit_intercept : bool, default=True
    max_epochs : int, default=10
        Epoch budget of the last working-set solve (iteration T).
    max_epochs_per_iter : int, default=3
        Epoch budget of the working-set solves of iterations 1 .. T-1.
    tol : float, default=1e-3
        Tolerance of each inner CD solve.
    parallel : {None, "auto", "hogwild"}, default="auto"
        Parallel mode of the inner CD solver (rbcd's "auto" never picks Hogwild; the
        twin's solver runs every mode serially).
    n_jobs, random_state, verbose : as usual.
    """

    def __init__(self, n_components_per_iter=64, n_iter=10, feature="fourier", kernel=None,
                 sigma="scale", loss=None, alpha=None, fit_intercept=True, max_epochs=10,
                 max_epochs_per_iter=3, tol=1e-3, parallel="auto", n_jobs=None,
                 random_state=None, verbose=0):
        self.n_components_per_iter = n_components_per_iter
        self.n_iter = n_iter
        self.feature = feature
        self.kernel = kernel
        self.sigma = sigma
        self.loss = loss
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.max_epochs = max_epochs
        self.max_epochs_per_iter = max_epochs_per_iter
        self.tol = tol
        self.parallel = parallel
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ helpers
    def _is_classifier(self):
        # fitted: the loss of the fit (loss_; a later set_params changes the next fit, not
        # the fitted model's predictions); unfitted: the loss given (None: squared)
        loss = self.__dict__.get("loss_", self.loss if self.loss is not None else "squared")
        return loss in ("logistic", "squared_hinge")

    def _resolved_kernel(self, feature):
        if self.kernel is None:
            return "gaussian" if feature == "fourier" else "laplacian"
        kernel = _check_choice(self.kernel, "kernel", KERNELS)
        if feature == "binning" and kernel != "laplacian":
            raise ValueError(f"kernel={kernel!r} is not available with feature='binning' "
                             "(random binning approximates the Laplacian kernel only)")
        return kernel

    def _features(self, X):
        if self.feature_ == "fourier":
            return fourier_map(X, self.random_weights_, self.random_offset_, self._scale)
        blocks = [rb.transform(X)[:, keep] for rb, keep in self.binnings_]
        if not blocks:
            return sp.csr_matrix((X.shape[0], 0))
        return sp.hstack(blocks, format="csr")

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Run the T outer iterations of Algorithm 1 on X (n_samples, n_features) and y."""
        R = _check_int(self.n_components_per_iter, "n_components_per_iter", 1)
        T = _check_int(self.n_iter, "n_iter", 1)
        max_epochs = _check_int(self.max_epochs, "max_epochs", 1)
        max_epochs_per_iter = _check_int(self.max_epochs_per_iter, "max_epochs_per_iter", 1)
        feature = _check_choice(self.feature, "feature", FEATURES)
        kernel = self._resolved_kernel(feature)
        loss = resolve_loss(None if self.loss is None else _check_choice(self.loss, "loss", LOSSES), y)
        alpha = None if self.alpha is None else _check_real(self.alpha, "alpha", 0.0)
        check_n_jobs(self.n_jobs)
        classify = loss in ("logistic", "squared_hinge")
        self.loss_ = loss
        check_sparse_indices(X)
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc") if feature == "fourier" else False,
                             dtype=np.float64, y_numeric=not classify)
        sigma = resolve_sigma(self.sigma, X, kernel)
        N = X.shape[0]
        if alpha is None:
            alpha = 1.0 / N
        if classify:
            check_classification_targets(y)
            self.classes_, y_idx = np.unique(y, return_inverse=True)
            if len(self.classes_) < 2:
                raise ValueError(f"the training data needs at least 2 classes; got 1 class ({self.classes_[0]!r})")
            if len(self.classes_) == 2:
                targets = np.where(y_idx == 1, 1.0, -1.0)[None, :]
            else:
                targets = np.where(y_idx[None, :] == np.arange(len(self.classes_))[:, None], 1.0, -1.0)
        else:
            targets = np.asarray(y, dtype=np.float64)[None, :]
        Solver = CDClassifier if classify else CDRegressor
        rng = make_generator(self.random_state)
        self._scale = np.sqrt(2.0 / R)
        n_out = targets.shape[0]
        Z_ws = np.empty((N, 0)) if feature == "fourier" else sp.csr_matrix((N, 0))
        W_ws = np.empty((n_out, 0))
        B_ws = np.zeros(n_out)
        fourier_W = np.empty((X.shape[1], 0))
        fourier_b = np.empty(0)
        binnings = []  # (RandomBinning, kept local columns) per iteration
        n_hist, obj_hist, epoch_hist, work_hist = [], [], [], []
        for t in range(T):
            last = t == T - 1
            # 1-2: draw a block of features and add it to the working set
            if feature == "fourier":
                W_new, b_new = draw_fourier(rng, X.shape[1], R, kernel, sigma)
                Z_new = fourier_map(X, W_new, b_new, self._scale)
                Z = np.hstack([Z_ws, Z_new])
            else:
                rb = RandomBinning(n_grids=R, sigma=sigma, n_jobs=self.n_jobs,
                                   random_state=int(rng.integers(0, 2**32)))
                Z_new = rb.fit_transform(X).tocsr()
                Z = sp.hstack([Z_ws, Z_new], format="csr")
            cd_seed = int(rng.integers(0, 2**32))
            # 3: solve the L1 problem on the working set, warm-started
            est = Solver(loss=loss, alpha=alpha, l1_ratio=1.0, fit_intercept=self.fit_intercept,
                         max_epochs=max_epochs if last else max_epochs_per_iter,
                         tol=self.tol, parallel=self.parallel,
                         n_jobs=self.n_jobs, warm_start=True, random_state=cd_seed,
                         verbose=max(0, int(self.verbose) - 1))
            if t > 0:  # warm start: the kept weights, the new features at 0
                W0 = np.hstack([W_ws, np.zeros((n_out, Z.shape[1] - W_ws.shape[1]))])
                est.coef_ = W0[0] if not classify else W0
                est.intercept_ = float(B_ws[0]) if not classify else B_ws.copy()
            with warnings.catch_warnings():
                if not last:
                    warnings.simplefilter("ignore", ConvergenceWarning)
                est.fit(Z, y)
            W = np.atleast_2d(np.asarray(est.coef_, dtype=np.float64))
            B = np.atleast_1d(np.asarray(est.intercept_, dtype=np.float64))
            # 4: drop the features whose weight is zero in every problem
            # (weights at rounding level, |w| <= 1e-12 max |w|, count as zero: coordinate
            # descent leaves such residues where a weight sits exactly at its threshold)
            keep = np.any(np.abs(W) > ZERO_RTOL * np.abs(W).max(initial=0.0), axis=0)
            old = Z_ws.shape[1]
            if feature == "fourier":
                fourier_W = np.hstack([fourier_W, W_new])[:, keep]
                fourier_b = np.concatenate([fourier_b, b_new])[keep]
                Z_ws = Z[:, keep]
            else:
                binnings = self._drop_binning(binnings, rb, keep, old)
                Z_ws = Z[:, np.flatnonzero(keep)]
            W_ws, B_ws = W[:, keep], B
            P = Z_ws @ W_ws.T + B_ws[None, :]
            obj = float(np.sum(np.mean(pointwise_loss(loss, P, targets.T), axis=0))
                        + alpha * np.abs(W_ws).sum())
            n_hist.append(int(keep.sum()))
            epoch_hist.append(int(np.sum(est.n_iter_)))
            work_hist.append(float(epoch_hist[-1]) * N * Z.shape[1])
            obj_hist.append(obj)
            if self.verbose:
                print(f"SparseRandomFeatures iteration {t + 1}: {n_hist[-1]} features, objective {obj:.6g}")
        self.feature_ = feature
        self.kernel_ = kernel
        self.sigma_ = sigma
        self.alpha_ = alpha
        # a refit leaves no attribute of an earlier fit that does not apply to this one
        stale = ["binnings_"] if feature == "fourier" else ["random_weights_", "random_offset_"]
        if not classify:
            stale.append("classes_")
        for name in stale:
            self.__dict__.pop(name, None)
        if feature == "fourier":
            self.random_weights_ = fourier_W
            self.random_offset_ = fourier_b
        else:
            self.binnings_ = binnings
        self.coef_ = W_ws[0] if not classify else W_ws
        self.intercept_ = float(B_ws[0]) if not classify else B_ws
        self.n_features_ = int(W_ws.shape[1])
        self.n_features_history_ = np.array(n_hist)
        self.solver_epochs_history_ = np.array(epoch_hist)
        self.solver_work_history_ = np.array(work_hist)
        self.objective_history_ = np.array(obj_hist)
        self.n_iter_ = T
        return self

    @staticmethod
    def _drop_binning(binnings, rb, keep, old):
        """Apply the keep mask to the (RandomBinning, kept columns) list plus the new block."""
        out = []
        pos = 0
        for prev_rb, cols in binnings:
            m = keep[pos:pos + len(cols)]
            pos += len(cols)
            if m.any():
                out.append((prev_rb, cols[m]))
        cols = np.flatnonzero(keep[old:])
        if cols.size:
            out.append((rb, cols))
        return out

    # ------------------------------------------------------------------ predict
    def _decision(self, X):
        check_is_fitted(self, "coef_")
        check_sparse_indices(X)
        X = validate_data(self, X, accept_sparse=("csr", "csc") if self.feature_ == "fourier" else False,
                          dtype=np.float64, reset=False)
        Z = self._features(X)
        W = np.atleast_2d(self.coef_)
        return np.asarray(Z @ W.T) + np.atleast_1d(self.intercept_)[None, :]

    def _decision_1d(self, X):
        out = self._decision(X)
        return out[:, 0] if out.shape[1] == 1 else out

    @available_if(_is_classifier)
    def decision_function(self, X):
        """z_A(X) . w + b with the kept features: (n,) for two classes, else (n, n_classes).

        Only with a classification loss (regressors have no decision function)."""
        return self._decision_1d(X)

    def predict(self, X):
        """Labels (classification losses) or z_A(X) . w + b (squared loss)."""
        f = self._decision_1d(X)
        if not self._is_classifier():
            return f
        if f.ndim == 1:
            return self.classes_[(f > 0).astype(np.intp)]
        return self.classes_[np.argmax(f, axis=1)]

    def random_features(self, X):
        """The kept random features of X (dense for Fourier, CSR for binning)."""
        check_is_fitted(self, "coef_")
        check_sparse_indices(X)
        X = validate_data(self, X, accept_sparse=("csr", "csc") if self.feature_ == "fourier" else False,
                          dtype=np.float64, reset=False)
        return self._features(X)

    def score(self, X, y, sample_weight=None):
        """Accuracy for the classification losses, R^2 for the squared loss."""
        if self._is_classifier():
            return accuracy_score(y, self.predict(X), sample_weight=sample_weight)
        return r2_score(y, self.predict(X), sample_weight=sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if self._is_classifier():
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags()
            tags.target_tags.required = True
        else:
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
            tags.target_tags.required = True
        tags.input_tags.sparse = self.feature == "fourier"
        return tags
