"""Doubly stochastic empirical kernel learning (Steenbergen, Schelter & Biessmann, DSEKL).

The model is the kernel expansion of the paper's eq. 1 over all N training points, without an
intercept (the paper has none; an unregularised intercept with its own AdaGrad step cost 2-3
points of test accuracy on breast cancer and digits 3-vs-8, docs/benchmarks/related.md):

    f_c(x) = sum_j A[c, j] k(x, x_j)

(one output for two classes, one per class, one-vs-rest, for more), trained on eq. 4, the
kernel SVM objective with a penalty on the coefficients,

    E(A) = sum_i loss(y_i f(x_i)) + (lam / 2) ||A||^2,

loss = hinge max(0, 1 - m) or squared hinge max(0, 1 - m)^2, y in {-1, +1}.
Kernels on x / sigma (sigma a positive scalar or one value per feature):
gaussian exp(-||x - z||_2^2 / (2 sigma^2)), laplacian exp(-||x - z||_1 / sigma).

Each step (Algorithm 1) samples I rows for the gradient and J rows for the empirical kernel
map, evaluates f on the I rows from the J sampled terms, f_J(x_i) = sum_{j in J} A_j k(x_i, x_j)
(the sampled submatrix K_{I,J} times A_J), and moves the J sampled coefficients along the
gradient summed over the I rows (Algorithm 1's g_j = sum_{i in I} dE(x_i)/dA_j):

    g_j = sum_{i in I} loss'(y_i f_J(x_i)) y_i k(x_i, x_j) + lam A_j.

Algorithm 2 (shared memory): each step uses K = ``n_blocks`` disjoint expansion blocks
(sampled without replacement, as the paper does for its workers); block k evaluates f and
the gradient from its own block, all from the coefficients of the start of the step, and
the updates (disjoint coordinates) are applied together. The work of a step runs in
parallel (OpenMP, ``n_jobs`` threads) over the K * I kernel rows and the K * J coefficients;
the result does not depend on the number of threads.

Steps: ``step="adagrad"`` (Algorithm 2, lines 4, 11 and 14): G_j = 1 + sum of past g_j^2,
A_j -= eta g_j / sqrt(G_j); ``step="inverse_t"`` (Algorithm 1): A_j -= (eta / t) g_j,
t = steps so far (from 1); ``step="inverse_epoch"`` (the 1/i rate of the paper's Section 4.2):
A_j -= (eta / e) g_j, e = the epoch number (from 1). The paper's rates have eta = 1.

Prediction. Training sees f through J sampled terms of the N; the expansion used at
prediction is the expectation of f_J over the draw of J, the full expansion scaled by J / N:

    f(x) = (J / N) sum_{j=1}^N A_j k(x, x_j),

so ``decision_function`` is on the scale of the margins seen in training (the sign, and so
``predict``, does not depend on the factor). ``dual_coef_`` holds (J / N) A on the support.

An epoch is one pass over a random permutation of the rows in batches of I (the last one
may be smaller). Stop (the paper's rule, made relative so that it does not depend on N or
on the scale of the coefficients): after an epoch when
||A_after - A_before||_F <= tol ||A_after||_F; ``ConvergenceWarning`` after ``max_epochs``
epochs otherwise.

Defaults: ``sigma="scale"`` is the shared data-derived bandwidth of rbcd._scale (the L2 rule,
0.35 times the median L2 distance of sampled pairs, for the Gaussian kernel; the L1 rule with
factor LAPLACIAN_FACTOR for the Laplacian), stored as ``sigma_``; ``lam=None`` is 1 / N, the
paper's choice (Section 4.2), stored as ``lam_``.

Random draws, from ``rng = make_generator(random_state)``, per epoch:

    perm = rng.permutation(N)
    for each of the ceil(N / I) steps:  rng.choice(N, size=K * J, replace=False)

with J clipped to N // K and K to N. The rbcd_ref twin makes the same draws.
"""

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ._dsekl import KERNEL_CODES, LOSS_CODES, STEP_CODES, dsekl_decision, dsekl_epoch
from .._random import make_generator
from .._scale import median_l1_distance, scale_sigma_l2
from .fourier import refuse_tiny_sigma
from .._threads import effective_n_threads
from .._validation import (N_JOBS, NONNEG_REAL, POSITIVE_INT, POSITIVE_REAL, RANDOM_STATE,
                           SIGMA, TOL, VERBOSE, check_class_labels, check_sigma, fit_context)
from .._warnings import warn as warn_user

#: sigma="scale" with the Laplacian kernel: this factor times the median L1 distance.
LAPLACIAN_FACTOR = 0.35

# Below this many kernel-entry operations per parallel region, extra threads cost more in
# start-up and barriers than they save; results do not depend on the thread count, so this
# only affects speed.
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


def resolve_sigma(sigma, X, kernel):
    """sigma_ from the parameter: "scale" is the shared data-derived rule, else checked;
    too small for 1 / sigma refused (fourier.refuse_tiny_sigma)."""
    if isinstance(sigma, str):
        s = scale_sigma_l2(X) if kernel == "gaussian" else LAPLACIAN_FACTOR * median_l1_distance(X)
    else:
        s = check_sigma(sigma, X.shape[1])
    return refuse_tiny_sigma(s, sigma)


class DoublyStochasticKernelClassifier(ClassifierMixin, BaseEstimator):
    """Kernel SVM trained by doubly stochastic gradients on the empirical kernel map.

    Parameters
    ----------
    kernel : {"gaussian", "laplacian"}, default="gaussian"
    sigma : "scale", float or array (n_features,), default="scale"
        Kernel width; "scale" derives it from the training rows (module docstring).
    lam : float >= 0 or None, default=None
        Regularization lambda of eq. 4; None is 1 / N.
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
        Multiplier of the step rule (the paper's rates are eta = 1).
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
    coefficient), support_vectors_, dual_coef_ (n_out, n_sv) = (J / N) A[:, support_],
    sigma_ (n_features,), lam_, n_expansion_ (J after clipping), n_iter_ (epochs), t_ (steps),
    weight_change_history_ (per epoch), n_features_in_.
    """

    _parameter_constraints = {
        "kernel": [StrOptions(set(KERNEL_CODES))],
        "sigma": SIGMA,
        "lam": NONNEG_REAL + [None],
        "loss": [StrOptions(set(LOSS_CODES))],
        "n_gradient": POSITIVE_INT,
        "n_expansion": POSITIVE_INT,
        "n_blocks": POSITIVE_INT,
        "step": [StrOptions(set(STEP_CODES))],
        "eta": POSITIVE_REAL,
        "max_epochs": POSITIVE_INT,
        "tol": TOL,
        "n_jobs": N_JOBS,
        "random_state": RANDOM_STATE,
        "verbose": VERBOSE,
    }

    def __init__(self, kernel="gaussian", sigma="scale", lam=None, loss="hinge", n_gradient=100,
                 n_expansion=100, n_blocks=1, step="adagrad", eta=1.0, max_epochs=100, tol=1e-2,
                 n_jobs=None, random_state=None, verbose=0):
        self.kernel = kernel
        self.sigma = sigma
        self.lam = lam
        self.loss = loss
        self.n_gradient = n_gradient
        self.n_expansion = n_expansion
        self.n_blocks = n_blocks
        self.step = step
        self.eta = eta
        self.max_epochs = max_epochs
        self.tol = tol
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    @fit_context
    def fit(self, X, y):
        """Fit on dense X (n_samples, n_features) and class labels y."""
        n_threads = effective_n_threads(self.n_jobs)
        X, y = validate_data(self, X, y, dtype=np.float64, order="C")
        y = check_class_labels(y, X.shape[0], type(self).__name__)   # rbcd's label messages
        sigma = resolve_sigma(self.sigma, X, self.kernel)
        self.classes_, y_idx = np.unique(y, return_inverse=True)
        n_classes = len(self.classes_)
        if n_classes < 2:
            raise ValueError(f"the training data needs at least 2 classes; got 1 class ({self.classes_[0].tolist()!r})")
        N = X.shape[0]
        if n_classes == 2:
            Y = np.where(y_idx == 1, 1.0, -1.0)[None, :]
        else:
            Y = np.where(y_idx[None, :] == np.arange(n_classes)[:, None], 1.0, -1.0)
        Y = np.ascontiguousarray(Y)
        n_out = Y.shape[0]
        Xs = np.ascontiguousarray(X / sigma)
        lam = 1.0 / N if self.lam is None else float(self.lam)
        I = min(self.n_gradient, N)
        K = min(self.n_blocks, N)
        J = min(self.n_expansion, N // K)
        if K * I * J > MAX_STEP_ENTRIES:
            raise ValueError(
                f"n_blocks * n_gradient * n_expansion = {K * I * J} kernel entries per step "
                f"(a {K * I * J * 8 / 2**30:.1f} GiB buffer) exceeds {MAX_STEP_ENTRIES}; "
                "lower n_gradient, n_expansion or n_blocks"
            )
        A = np.zeros((n_out, N))
        G = np.ones((n_out, N))
        Kb = np.empty((K, I, J))
        Rb = np.empty((n_out, K, I))
        rng = make_generator(self.random_state)
        n_threads = threads_for(K * I * J * (X.shape[1] + n_out), n_threads)
        t = 0
        history = []
        kernel, loss, step = KERNEL_CODES[self.kernel], LOSS_CODES[self.loss], STEP_CODES[self.step]
        eta, tol, max_epochs = float(self.eta), float(self.tol), int(self.max_epochs)
        for epoch in range(max_epochs):
            perm, Jidx = draw_epoch(rng, N, I, J, K)
            A_before = A.copy()
            t = dsekl_epoch(Xs, Y, A, G, perm, Jidx, I, J, K, kernel, loss, step,
                            eta, lam, t, epoch + 1, n_threads, Kb, Rb)
            if not np.all(np.isfinite(A)):
                raise ValueError("the coefficients diverged (non-finite); lower eta")
            change = relative_change(A, A_before)

            history.append(change)
            if self.verbose:
                print(f"DSEKL epoch {epoch + 1}: weight change {change:.3e} (tol {tol:.1e})")
            if change <= tol:
                break
        else:
            warn_user(
                f"DoublyStochasticKernelClassifier did not converge in {max_epochs} epochs: "
                f"weight change {history[-1]:.3e} > tol {tol:.3e}",
                ConvergenceWarning,
            )
        self.n_iter_ = len(history)
        self.t_ = int(t)
        self.weight_change_history_ = np.array(history)
        self.coef_full_ = A
        self.support_ = np.flatnonzero(np.any(A != 0.0, axis=0))
        self.support_vectors_ = X[self.support_]
        # the expansion used at prediction: E_J[f_J] = (J / N) sum_j A_j k(x, x_j)
        self.dual_coef_ = np.ascontiguousarray(A[:, self.support_] * (J / N))
        # one width per feature, as rbcd_ref's and RandomFourier's sigma_
        self.sigma_ = np.array(np.broadcast_to(np.asarray(sigma, dtype=np.float64),
                                               (X.shape[1],)))
        self.lam_ = lam
        self.n_expansion_ = J
        self._kernel_code = kernel
        self._support_scaled = np.ascontiguousarray(Xs[self.support_])
        return self

    def decision_function(self, X):
        """f(X) = (J / N) sum_j A_j k(X, x_j): (n_samples,) for two classes (positive:
        classes_[1]), else (n_samples, n_classes)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, order="C", reset=False)
        Xs = np.ascontiguousarray(X / self.sigma_)
        out = np.empty((X.shape[0], self.dual_coef_.shape[0]))
        work = X.shape[0] * self.dual_coef_.shape[1] * (X.shape[1] + self.dual_coef_.shape[0])
        dsekl_decision(Xs, self._support_scaled, self.dual_coef_, self._kernel_code, threads_for(work, effective_n_threads(self.n_jobs)), out)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict(self, X):
        """The class of the largest f (the sign of f for two classes)."""
        f = self.decision_function(X)
        if f.ndim == 1:
            return self.classes_[(f > 0).astype(np.intp)]
        return self.classes_[np.argmax(f, axis=1)]
