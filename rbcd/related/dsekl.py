"""Doubly stochastic empirical kernel learning (Steenbergen, Schelter & Biessmann).

The model is a kernel expansion over all N training points,

    f_c(x) = (1/N) sum_j A[c, j] k(x, x_j) + b_c,

(one output for two classes, one per class, one-vs-rest, for more), fitted to

    E(A, b) = (1/N) sum_i loss(y_i f(x_i)) + (lam / 2) (1/N) sum_j A_j^2,

loss = hinge max(0, 1 - m) or squared hinge max(0, 1 - m)^2, y in {-1, +1}.
As in the paper's eq. 4 the penalty is on the coefficients (||A||^2), not on the RKHS norm
A^T K A of a kernel SVM.
Kernels on x / sigma (sigma a positive scalar or one value per feature):
gaussian exp(-||x - z||_2^2 / (2 sigma^2)), laplacian exp(-||x - z||_1 / sigma).

Each step (the paper's Algorithm 1) samples I rows for the gradient and J rows for the
empirical kernel map, evaluates f on the I rows from the J-row expansion
f_J(x) = (1/J) sum_{j in J} A_j k(x, x_j) + b (unbiased for f), and moves the J sampled
coefficients along N times their partial derivative, estimated on the I rows:

    g_j = (1/I) sum_{i in I} loss'(y_i f_J(x_i)) y_i k(x_i, x_j) + lam A_j.

Algorithm 2 (shared memory): each step uses K = ``n_blocks`` disjoint expansion blocks
(sampled without replacement, as the paper does for its workers); block k evaluates f and
the gradient from its own block, all from the coefficients of the start of the step, and
the updates (disjoint coordinates) are applied together. The work of a step runs in
parallel (OpenMP, ``n_jobs`` threads) over the K * I kernel rows and the K * J coefficients;
the result does not depend on the number of threads.

Steps: ``step="adagrad"`` (Algorithm 2): G_j = 1 + sum of past g_j^2, A_j -= eta g_j / sqrt(G_j);
``step="inverse_t"`` (Algorithm 1): A_j -= (eta / t) g_j, t = steps so far (from 1);
``step="inverse_epoch"`` (the 1/i rate of the paper's Section 4.2): A_j -= (eta / e) g_j,
e = the epoch number (from 1). Both need a larger eta than AdaGrad (on the paper's XOR
problem: about 100 for 1/t, 10 to 30 for 1/epoch).
The intercept (``fit_intercept``) moves the same way with g_b = mean over blocks and rows of
loss'(y f_J) y, unregularized.

An epoch is one pass over a random permutation of the rows in batches of I (the last one
may be smaller). Stop (the paper's rule, made relative so that it does not depend on N or
on the scale of the coefficients): after an epoch when
||A_after - A_before||_F <= tol ||A_after||_F; ``ConvergenceWarning`` after ``max_epochs``
epochs otherwise.

Random draws, from ``rng = make_generator(random_state)``, per epoch:

    perm = rng.permutation(N)
    for each of the ceil(N / I) steps:  rng.choice(N, size=K * J, replace=False)

with J clipped to N // K and K to N. The rbcd_ref twin makes the same draws.
"""
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._dsekl import KERNEL_CODES, LOSS_CODES, STEP_CODES, dsekl_decision, dsekl_epoch
from .._random import make_generator
from .._threads import effective_n_threads
from .fourier import check_sigma


def _check_int(value, name, low):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def _check_real(value, name, low, low_open=False):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value) or value < low or (low_open and value == low):
        raise ValueError(f"{name} must be finite and {'>' if low_open else '>='} {low}, got {value}")
    return value


def _check_choice(value, name, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


# Below this many kernel-entry operations per parallel region, extra threads cost more in
# start-up and barriers than they save (badly so on a loaded machine); results do not
# depend on the thread count, so this only affects speed.
MIN_WORK_PER_THREAD = 250_000
# Each step keeps its K x I x J kernel block in memory (8 bytes an entry).
MAX_STEP_ENTRIES = 2**27


def threads_for(work, n_threads):
    """Threads worth starting for ``work`` operations: at most n_threads, at least 1."""
    return max(1, min(n_threads, work // MIN_WORK_PER_THREAD))


def relative_change(A, A_before):
    """||A - A_before||_F / ||A||_F (0 when both are 0)."""
    num = float(np.linalg.norm(A - A_before))
    den = float(np.linalg.norm(A))
    return num / den if den > 0 else num


def draw_epoch(rng, N, I, J, K):
    """The draws of one epoch: (perm int64 (N,), Jidx int64 (n_steps, K * J))."""
    perm = rng.permutation(N).astype(np.int64)
    n_steps = -(-N // I)
    Jidx = np.empty((n_steps, K * J), dtype=np.int64)
    for s in range(n_steps):
        Jidx[s] = rng.choice(N, size=K * J, replace=False)
    return perm, Jidx


class DoublyStochasticKernelClassifier(ClassifierMixin, BaseEstimator):
    """Kernel SVM trained by doubly stochastic gradients on the empirical kernel map.

    Parameters
    ----------
    kernel : {"gaussian", "laplacian"}, default="gaussian"
    sigma : float or array (n_features,), default=1.0
    lam : float >= 0, default=1e-3
        Regularization lambda (see the module docstring for the objective).
    loss : {"hinge", "squared_hinge"}, default="hinge"
    n_gradient : int, default=100
        I, rows sampled for each gradient.
    n_expansion : int, default=100
        J, rows of each expansion block (clipped to N // n_blocks).
    n_blocks : int, default=1
        K, disjoint expansion blocks per step (Algorithm 2's workers). A step holds the
        K x I x J kernel block in memory (at most 2**27 entries, 1 GiB).
    step : {"adagrad", "inverse_t", "inverse_epoch"}, default="adagrad"
    eta : float > 0, default=1.0
        Learning rate.
    fit_intercept : bool, default=True
    max_epochs : int, default=100
    tol : float >= 0, default=1e-2
        Stop when the change of the coefficients over an epoch, relative to their norm, is <= tol.
    n_jobs : int or None
        OpenMP threads (None: OpenMP default, honours threadpoolctl).
    random_state : None, int, SeedSequence, Generator or RandomState
    verbose : int, default=0

    Attributes
    ----------
    classes_, coef_full_ (n_out, N) the coefficients A, support_ (rows with a non-zero
    coefficient), support_vectors_, dual_coef_ (n_out, n_sv) = A[:, support_] / N,
    intercept_ (n_out,), n_iter_ (epochs), t_ (steps), weight_change_history_ (per epoch),
    n_features_in_.
    """

    def __init__(self, kernel="gaussian", sigma=1.0, lam=1e-3, loss="hinge", n_gradient=100,
                 n_expansion=100, n_blocks=1, step="adagrad", eta=1.0, fit_intercept=True,
                 max_epochs=100, tol=1e-2, n_jobs=None, random_state=None, verbose=0):
        self.kernel = kernel
        self.sigma = sigma
        self.lam = lam
        self.loss = loss
        self.n_gradient = n_gradient
        self.n_expansion = n_expansion
        self.n_blocks = n_blocks
        self.step = step
        self.eta = eta
        self.fit_intercept = fit_intercept
        self.max_epochs = max_epochs
        self.tol = tol
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _validate_params_(self):
        return dict(
            kernel=_check_choice(self.kernel, "kernel", KERNEL_CODES),
            loss=_check_choice(self.loss, "loss", LOSS_CODES),
            step=_check_choice(self.step, "step", STEP_CODES),
            lam=_check_real(self.lam, "lam", 0.0),
            eta=_check_real(self.eta, "eta", 0.0, low_open=True),
            tol=_check_real(self.tol, "tol", 0.0),
            I=_check_int(self.n_gradient, "n_gradient", 1),
            J=_check_int(self.n_expansion, "n_expansion", 1),
            K=_check_int(self.n_blocks, "n_blocks", 1),
            max_epochs=_check_int(self.max_epochs, "max_epochs", 1),
        )

    def fit(self, X, y):
        """Fit on dense X (n_samples, n_features) and class labels y."""
        p = self._validate_params_()
        n_threads = effective_n_threads(self.n_jobs)
        X, y = validate_data(self, X, y, dtype=np.float64, order="C")
        check_classification_targets(y)
        sigma = check_sigma(self.sigma, X.shape[1])
        self.classes_, y_idx = np.unique(y, return_inverse=True)
        n_classes = len(self.classes_)
        if n_classes < 2:
            raise ValueError(f"the training data needs at least 2 classes; got 1 class ({self.classes_[0]!r})")
        N = X.shape[0]
        if n_classes == 2:
            Y = np.where(y_idx == 1, 1.0, -1.0)[None, :]
        else:
            Y = np.where(y_idx[None, :] == np.arange(n_classes)[:, None], 1.0, -1.0)
        Y = np.ascontiguousarray(Y)
        n_out = Y.shape[0]
        Xs = np.ascontiguousarray(X / sigma)
        I = min(p["I"], N)
        K = min(p["K"], N)
        J = min(p["J"], N // K)
        if K * I * J > MAX_STEP_ENTRIES:
            raise ValueError(
                f"n_blocks * n_gradient * n_expansion = {K * I * J} kernel entries per step "
                f"(a {K * I * J * 8 / 2**30:.1f} GiB buffer) exceeds {MAX_STEP_ENTRIES}; "
                "lower n_gradient, n_expansion or n_blocks"
            )
        A = np.zeros((n_out, N))
        G = np.ones((n_out, N))
        b = np.zeros(n_out)
        Gb = np.ones(n_out)
        Kb = np.empty((K, I, J))
        Rb = np.empty((n_out, K, I))
        rng = make_generator(self.random_state)
        n_threads = threads_for(K * I * J * (X.shape[1] + n_out), n_threads)
        t = 0
        history = []
        kernel, loss, step = KERNEL_CODES[p["kernel"]], LOSS_CODES[p["loss"]], STEP_CODES[p["step"]]
        for epoch in range(p["max_epochs"]):
            perm, Jidx = draw_epoch(rng, N, I, J, K)
            A_before = A.copy()
            t = dsekl_epoch(Xs, Y, A, G, b, Gb, perm, Jidx, I, J, K, kernel, loss, step,
                            p["eta"], p["lam"], bool(self.fit_intercept), t, epoch + 1, n_threads, Kb, Rb)
            if not (np.all(np.isfinite(A)) and np.all(np.isfinite(b))):
                raise ValueError("the coefficients diverged (non-finite); lower eta")
            change = relative_change(A, A_before)

            history.append(change)
            if self.verbose:
                print(f"DSEKL epoch {epoch + 1}: weight change {change:.3e} (tol {p['tol']:.1e})")
            if change <= p["tol"]:
                break
        else:
            warnings.warn(
                f"DoublyStochasticKernelClassifier did not converge in {p['max_epochs']} epochs: "
                f"weight change {history[-1]:.3e} > tol {p['tol']:.3e}",
                ConvergenceWarning,
            )
        self.n_iter_ = len(history)
        self.t_ = int(t)
        self.weight_change_history_ = np.array(history)
        self.coef_full_ = A
        self.support_ = np.flatnonzero(np.any(A != 0.0, axis=0))
        self.support_vectors_ = X[self.support_]
        self.dual_coef_ = np.ascontiguousarray(A[:, self.support_] / N)
        self.intercept_ = b
        self.sigma_ = sigma
        self._kernel_code = kernel
        self._support_scaled = np.ascontiguousarray(Xs[self.support_])
        return self

    def decision_function(self, X):
        """f(X): (n_samples,) for two classes (positive: classes_[1]), else (n_samples, n_classes)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, order="C", reset=False)
        Xs = np.ascontiguousarray(X / self.sigma_)
        out = np.empty((X.shape[0], self.dual_coef_.shape[0]))
        work = X.shape[0] * self.dual_coef_.shape[1] * (X.shape[1] + self.dual_coef_.shape[0])
        dsekl_decision(Xs, self._support_scaled, self.dual_coef_, self.intercept_,
                       self._kernel_code, threads_for(work, effective_n_threads(self.n_jobs)), out)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict(self, X):
        f = self.decision_function(X)
        if f.ndim == 1:
            return self.classes_[(f > 0).astype(np.intp)]
        return self.classes_[np.argmax(f, axis=1)]
