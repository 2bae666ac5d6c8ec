"""Doubly stochastic empirical kernel learning, plain numpy (the twin of rbcd.related.dsekl).

Model f_c(x) = sum_j A[c, j] k(x, x_j) (the paper's eq. 1, no intercept); objective eq. 4,
sum_i loss(y_i f(x_i)) + (lam / 2) ||A||^2 (see rbcd.related.dsekl for the full text).

One step, for the gradient rows B (a batch of this epoch's permutation) and the K disjoint
expansion blocks J_k, all from the coefficients at the start of the step:

    Kb_k = k(X[B], X[J_k])                              (nI, J)
    r_k  = loss'(y_B * (Kb_k @ A[J_k])) * y_B           (nI,)
    g_k  = Kb_k.T @ r_k + lam * A[J_k]                  (J,)   summed over the rows of B
    A[J_k] -= step(g_k)

steps: adagrad (G starts at 1, G += g^2, A -= eta g / sqrt(G)), inverse_t (A -= eta / t g, t the
step count from 1) or inverse_epoch (A -= eta / epoch g).
Random draws from ``rng = make_generator(random_state)`` per epoch: ``rng.permutation(N)``,
then per step ``rng.choice(N, size=K * J, replace=False)`` (J clipped to N // K, K to N).
Stop after an epoch with ||A - A_before||_F <= tol ||A||_F.
Prediction: f(x) = (J / N) sum_j A[c, j] k(x, x_j). sigma="scale": 0.35 times the median L2
distance (gaussian) or 0.35 times the median L1 distance (laplacian) of rbcd_ref._scale's
pairs; lam=None is 1 / N.
"""
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._checks import check_choice, check_int, check_real
from .._random import make_generator
from .._scale import median_l1_distance, median_l2_distance
from .fourier import check_n_jobs, check_sigma


def kernel_matrix(A, B, kernel):
    """k(a, b) on sigma-scaled rows: exp(-0.5 ||a - b||^2) or exp(-||a - b||_1)."""
    diff = A[:, None, :] - B[None, :, :]
    if kernel == "gaussian":
        return np.exp(-0.5 * np.sum(diff * diff, axis=-1))
    return np.exp(-np.sum(np.abs(diff), axis=-1))


def loss_derivative(margin, loss):
    """hinge: -1 where margin < 1 else 0; squared hinge: -2 max(0, 1 - margin)."""
    if loss == "hinge":
        return np.where(margin < 1.0, -1.0, 0.0)
    return -2.0 * np.maximum(0.0, 1.0 - margin)


class DoublyStochasticKernelClassifier(ClassifierMixin, BaseEstimator):
    """Same parameters, attributes and results (serial) as rbcd.DoublyStochasticKernelClassifier."""

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

    def fit(self, X, y):
        kernel = check_choice(self.kernel, "kernel", ("gaussian", "laplacian"))
        loss = check_choice(self.loss, "loss", ("hinge", "squared_hinge"))
        step = check_choice(self.step, "step", ("adagrad", "inverse_t", "inverse_epoch"))
        lam = None if self.lam is None else check_real(self.lam, "lam", low=0.0)
        eta = check_real(self.eta, "eta", low=0.0, low_open=True)
        tol = check_real(self.tol, "tol", low=0.0)
        I = check_int(self.n_gradient, "n_gradient", low=1)
        J = check_int(self.n_expansion, "n_expansion", low=1)
        K = check_int(self.n_blocks, "n_blocks", low=1)
        max_epochs = check_int(self.max_epochs, "max_epochs", low=1)
        check_n_jobs(self.n_jobs)
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        if isinstance(self.sigma, str) and self.sigma == "scale":
            dist = median_l2_distance(X) if kernel == "gaussian" else median_l1_distance(X)
            sigma = np.full(X.shape[1], 0.35 * dist)
        else:
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
        n_out = Y.shape[0]
        Xs = X / sigma
        if lam is None:
            lam = 1.0 / N
        I = min(I, N)
        K = min(K, N)
        J = min(J, N // K)
        A = np.zeros((n_out, N))
        G = np.ones((n_out, N))
        rng = make_generator(self.random_state)
        t = 0
        history = []
        for epoch in range(1, max_epochs + 1):
            perm = rng.permutation(N)
            n_steps = -(-N // I)
            Jidx = [rng.choice(N, size=K * J, replace=False) for _ in range(n_steps)]
            A_before = A.copy()
            for s in range(n_steps):
                t += 1
                rate = eta / t if step == "inverse_t" else eta / epoch
                B = perm[s * I:(s + 1) * I]
                blocks = [Jidx[s][k * J:(k + 1) * J] for k in range(K)]
                Kbs = [kernel_matrix(Xs[B], Xs[Jk], kernel) for Jk in blocks]
                # every block reads the coefficients of the start of the step
                Rs = []
                for Kb, Jk in zip(Kbs, blocks):
                    f = Kb @ A[:, Jk].T                                # (nI, n_out)
                    yB = Y[:, B].T
                    Rs.append(loss_derivative(yB * f, loss) * yB)       # (nI, n_out)
                for Kb, Jk, R in zip(Kbs, blocks, Rs):
                    g = (Kb.T @ R).T + lam * A[:, Jk]                  # (n_out, J)
                    if step == "adagrad":
                        G[:, Jk] += g * g
                        A[:, Jk] -= eta * g / np.sqrt(G[:, Jk])
                    else:
                        A[:, Jk] -= rate * g
            if not np.all(np.isfinite(A)):
                raise ValueError("the coefficients diverged (non-finite); lower eta")
            norm = np.linalg.norm(A)
            change = float(np.linalg.norm(A - A_before) / norm) if norm > 0 else float(np.linalg.norm(A - A_before))
            history.append(change)
            if self.verbose:
                print(f"DSEKL epoch {epoch}: weight change {change:.3e} (tol {tol:.1e})")
            if change <= tol:
                break
        else:
            warnings.warn(
                f"DoublyStochasticKernelClassifier did not converge in {max_epochs} epochs: "
                f"weight change {history[-1]:.3e} > tol {tol:.3e}",
                ConvergenceWarning,
            )
        self.n_iter_ = len(history)
        self.t_ = t
        self.weight_change_history_ = np.array(history)
        self.coef_full_ = A
        self.support_ = np.flatnonzero(np.any(A != 0.0, axis=0))
        self.support_vectors_ = X[self.support_]
        self.dual_coef_ = A[:, self.support_] * (J / N)
        self.sigma_ = sigma
        self.lam_ = lam
        self.n_expansion_ = J
        self._kernel = kernel
        return self

    def decision_function(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        Kx = kernel_matrix(X / self.sigma_, self.support_vectors_ / self.sigma_, self._kernel)
        out = Kx @ self.dual_coef_.T
        return out[:, 0] if out.shape[1] == 1 else out

    def predict(self, X):
        f = self.decision_function(X)
        if f.ndim == 1:
            return self.classes_[(f > 0).astype(np.intp)]
        return self.classes_[np.argmax(f, axis=1)]
