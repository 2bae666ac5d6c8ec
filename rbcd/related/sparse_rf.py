"""Sparse Random Features (Yen, Lin, Lin, Ravikumar & Dhillon, NIPS 2014, Algorithm 1).

L1-regularized learning over an infinite dictionary of random features, as randomized
coordinate descent in function space:

    repeat n_iter times:
        1. draw a block of R = n_components_per_iter new random features,
        2. add them to the working set A,
        3. solve  min_{w, b} (1/N) sum_i loss(z_A(x_i) . w + b, y_i) + alpha ||w||_1
           on the working set by rbcd's coordinate descent (CDRegressor / CDClassifier),
           warm-started from the previous weights (the new features start at 0): at most
           ``max_epochs_per_iter`` epochs in iterations 1 .. T-1, at most ``max_epochs``
           (to ``tol``) in the last one, whose weights are the model,
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

Defaults (chosen so that the estimator matches an exact-kernel SVM on the DSEKL paper's XOR
problems and plain random features on digits without tuning, docs/benchmarks/related.md):

* ``alpha=None`` is 1 / N, the paper's lambda N = 1 (Section 4), stored as ``alpha_``;
* ``sigma="scale"`` is the shared data-derived bandwidth of rbcd._scale, as in
  rbcd.RandomFourier, stored as ``sigma_``: 0.5 times the median L2 distance for the Gaussian
  kernel (scikit-learn's ``gamma="scale"`` on standardized data), 0.5 times the median L1
  distance (RandomBinning's rule) for the Laplacian;
* the working-set solves (step 3) are warm-started. The solves of iterations 1 .. T-1 get
  ``max_epochs_per_iter=3`` CD epochs, the last one ``max_epochs=10`` at ``tol=1e-3``.
  The paper's step 3 solves (9) exactly, and its descent bound (Theorem 1) uses two
  consequences of that: F(w_{t+1}) <= F(w_t + eta_h delta_h) for a new coordinate h (at
  least one exact coordinate step's progress), and w_t optimal on A_{t-1}. An inexact
  warm-started solve guarantees neither; it keeps the objective non-increasing (every
  coordinate step is a monotone prox-Newton step) and the next iterations continue the
  descent from where it stopped, so the cost of a near-exact solve is paid once, on the
  final working set, whose weights are the model. Each epoch costs N x |A| (every stored
  entry once) and the working set grows with t, so this moves the work to where it buys
  accuracy; docs/benchmarks/related.md has the measured accuracy and work against plain
  random features with the same l1 solver. The intermediate solves stop at their budget by
  design and do not raise ConvergenceWarning; the last one does when it misses ``tol``.

Attributes: ``n_features_history_`` (working-set size after each iteration's drop step),
``objective_history_`` (objective after each solve), ``solver_epochs_history_`` (CD epochs of
each solve, summed over the one-vs-rest problems), ``solver_work_history_`` (the CD work of
each solve: its epochs times N times the working-set size it ran on, i.e. the stored entries
it visited; their sum is the training's CD work), ``n_features_`` (kept features), ``coef_``,
``intercept_`` (the CD solver's shapes), ``classes_`` (classification).

Implementation (rbcd only; the twin keeps the plain form and the same iterates): the Fourier
working set is held column by column in one growing buffer (``_ColumnBuffer``) whose CSC
form is a view, so an iteration copies the new block once and moves only the columns behind
the first dropped one; each column's curvature h_j = (1/N) sum_i z_ij^2 is computed once,
when it enters. Step 3 calls the CD solver's core (``solve_working_set``) with that column
form: the computation of CDRegressor / CDClassifier.fit, iterate for iterate, without the
estimator's input pass over the whole working set on every iteration.
"""


import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import ClassifierTags, RegressorTags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from sklearn.utils._param_validation import StrOptions

from .._random import make_generator
from .._threads import effective_n_threads
from .._validation import (N_JOBS, NONNEG_REAL, POSITIVE_INT, RANDOM_STATE, SIGMA, TOL, VERBOSE,
                           check_class_labels, check_regression_target, check_sparse_structure,
                           fit_context)
from ..binning.random_binning import RandomBinning
from .fourier import KERNELS, draw_fourier, fourier_map, resolve_sigma
from .._random import solver_seed
from ..solvers import _cd
from ..solvers._columns import _Columns, plain_columns
from ..solvers._paths import current_paths
from ..solvers._stopping import loss_value
from ..solvers.cd import LOSSES as CD_LOSSES, _resolve_mode, _solve
from .._warnings import warn as warn_user

LOSSES = ("squared", "logistic", "squared_hinge")
ZERO_RTOL = 1e-12
# Below this much work (rows x grids x d for a binning block) extra threads cost more in
# start-up and barriers than they save: the block is drawn on one thread (its result is the
# same for any thread count).
MIN_BINNING_WORK = 200_000
# The inner solves run in the solver's serial mode (parallel="auto" never picks Hogwild
# there: the columns carry no grid structure), so threads could only split its O(nnz)
# objective and convergence passes. On 2 vCPUs that measured slower than one thread for
# every working set up to 2.1e6 stored entries (idle OpenMP workers and BLAS threads
# compete with the serial epoch): solves below this many stored entries get one thread
# unless parallel="hogwild" is asked for.
MIN_SOLVER_WORK = 1 << 22
FEATURES = ("fourier", "binning")


class _ColumnBuffer:
    """A dense working set Z_A (N rows, D columns) stored column-major in a growing
    (capacity, N) float64 buffer, with the row indices of a dense CSC matrix kept alongside,
    and h_j = (1/N) sum_i z_ij^2 of every column (the solver's curvature, computed once per
    column by the solver's own kernel, so that it is bit-identical to a full recomputation).

    Contract: ``csc()`` is an (N, D) CSC matrix and ``columns()`` the solver's column form,
    both with values that are a view of the buffer (valid until the next ``append`` or
    ``keep``), canonical (rows 0 .. N-1 in order in every column), equal to the columns
    appended so far minus those dropped, in order; ``h()`` their h. ``dense()`` is the
    (D, N) view (row j = column j). ``append(Z_new)`` copies the (N, R) block once;
    ``keep(mask)`` moves the kept columns down in place."""

    def __init__(self, n_rows):
        self.n_rows = n_rows
        self.n_cols = 0
        self.buf = np.empty((0, n_rows))
        self.sq = np.empty(0)
        self.rows = np.empty(0, dtype=np.int32)

    def _indptr(self, D):
        return np.arange(0, (D + 1) * self.n_rows, self.n_rows, dtype=self.rows.dtype)

    def append(self, Z_new):
        D, R, N = self.n_cols, Z_new.shape[1], self.n_rows
        if D + R > self.buf.shape[0]:
            cap = max(D + R, 2 * self.buf.shape[0])
            grown = np.empty((cap, N))
            grown[:D] = self.buf[:D]
            self.buf = grown
            self.sq = np.concatenate([self.sq[:D], np.empty(cap - D)])
            # int32 row indices and pointers while they fit: scipy would otherwise downcast
            # (copy) them on every construction
            dtype = np.int32 if cap * N < np.iinfo(np.int32).max else np.int64
            self.rows = np.tile(np.arange(N, dtype=dtype), cap)
        self.buf[D:D + R] = Z_new.T
        self.sq[D:D + R] = _cd.column_sq_sums(
            self._indptr(R).astype(np.int64), self.rows[:R * N], self.buf[D:D + R].reshape(-1),
            1.0, np.ones(N), 1) / N
        self.n_cols = D + R

    def keep(self, mask):
        idx = np.flatnonzero(mask)
        # columns before the first dropped one stay where they are; the others move down one
        # at a time, in increasing order: idx is increasing with idx[i] >= i, so a move never
        # overwrites a column still to be read (and needs no temporary copy of the tail)
        moved = np.flatnonzero(idx != np.arange(idx.size))
        for i in moved:
            self.buf[i] = self.buf[idx[i]]
        self.sq[moved] = self.sq[idx[moved]]
        self.n_cols = idx.size

    def dense(self):
        return self.buf[:self.n_cols]

    def h(self):
        return self.sq[:self.n_cols]

    def csc(self):
        D, N = self.n_cols, self.n_rows
        Z = sp.csc_matrix((self.buf[:D].reshape(-1), self.rows[:D * N], self._indptr(D)),
                          shape=(N, D))
        Z.has_canonical_format = True  # rows 0 .. N-1 in order in every column
        return Z

    def columns(self):
        D, N = self.n_cols, self.n_rows
        return _Columns(self._indptr(D), self.rows[:D * N], self.buf[:D].reshape(-1), 1.0, N)


def solve_working_set(cols, h, targets, *, loss, alpha, fit_intercept, max_epochs, tol,
                      parallel, n_threads, random_state, W0, B0, verbose):
    """Step 3 of Algorithm 1: the l1 problem on the working set, by rbcd's coordinate descent.

    Contract: the computation of ``CDRegressor`` / ``CDClassifier(loss=loss, alpha=alpha,
    l1_ratio=1.0, fit_intercept=fit_intercept, max_epochs=max_epochs, tol=tol,
    parallel=parallel, n_jobs=n_threads, warm_start=True, random_state=random_state)``
    fitted on the working set, warm-started from (W0, B0) (None: cold, as a fresh
    estimator), iterate for iterate: the solver's core (rbcd.solvers.cd._solve, the same
    mode rule, seeds seed + k per problem and curvature M = beta h) without the estimator's
    input pass. ``cols`` is the solver's column form of the working set (built here, finite
    and canonical by construction), ``h`` (D,) its h_j = (1/N) sum_i z_ij^2, ``targets``
    (n_out, N) the solver's targets (+-1 per one-vs-rest problem for classification).

    Returns (W (n_out, D), B (n_out,), epochs per problem, the problems' results)."""
    paths = current_paths()
    mode, n_threads = _resolve_mode(parallel, n_threads, cols, paths.auto_grid_min)
    M = np.ascontiguousarray(_cd.beta_of(CD_LOSSES[loss]) * np.asarray(h, dtype=np.float64))
    seed = solver_seed(random_state)
    n_out = targets.shape[0]
    results = [_solve(cols, targets[k], None, loss=loss, alpha=alpha, l1_ratio=1.0,
                      fit_intercept=fit_intercept, max_epochs=max_epochs, tol=tol,
                      selection="random", mode=mode, n_threads=n_threads, seed=seed + k, M=M,
                      paths=paths, w_init=None if W0 is None else W0[k],
                      b_init=0.0 if B0 is None else float(B0[k]), verbose=verbose,
                      label=f" (problem {k})" if n_out > 1 else "")
               for k in range(n_out)]
    W = np.vstack([r["w"] for r in results]).astype(np.float64, copy=False)
    B = np.array([r["b"] for r in results], dtype=np.float64)
    return W, B, np.array([r["n_iter"] for r in results]), results



def resolve_loss(loss, y):
    """The loss of ``loss=None``: "squared_hinge" when y holds class labels (scikit-learn's
    type_of_target "binary" or "multiclass": strings, booleans, integers, or floats that are
    all integers), else "squared". The squared hinge is the paper's classification loss
    (Section 4: LIBLINEAR's coordinate descent on the square-hinge loss, following LIBSVM's
    FAQ); the squared loss on labels underfits (XOR, noise 0.5: 0.80 R^2, where the squared
    hinge classifies 0.95 of the points right). A regression on integer targets says
    loss="squared". A numeric y of one value is a (constant) regression target, not one
    class (type_of_target calls it "binary")."""
    if loss is not None:
        return loss
    from sklearn.utils.multiclass import type_of_target
    if type_of_target(y) not in ("binary", "multiclass"):
        return "squared"
    values = np.asarray(y)
    if values.dtype.kind in "iuf" and np.unique(values).shape[0] < 2:
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
    loss : {"squared", "logistic", "squared_hinge"} or None, default=None
        None chooses from y at fit (``resolve_loss``, stored as ``loss_``): the paper's
        classification loss "squared_hinge" for class labels, "squared" otherwise.
    alpha : float >= 0 or None, default=None
        L1 penalty of the working-set problems (units of the mean loss); None is 1 / N.
    fit_intercept : bool, default=True
    max_epochs : int, default=10
        Epoch budget of the last working-set solve (iteration T, warm-started), whose
        weights are the model.
    max_epochs_per_iter : int, default=3
        Epoch budget of the working-set solves of iterations 1 .. T-1 (warm-started; see
        the module docstring).
    tol : float, default=1e-3
        Tolerance of the inner CD solves.
    parallel : {None, "auto", "hogwild"}, default="auto"
        Parallel mode of the inner CD solver ("auto" and None: serial; "hogwild": threads
        split the epochs, see rbcd.solvers.cd).
    n_jobs, random_state, verbose : as usual.
    """

    _parameter_constraints = {
        "n_components_per_iter": POSITIVE_INT,
        "n_iter": POSITIVE_INT,
        "feature": [StrOptions(set(FEATURES))],
        "kernel": [StrOptions(set(KERNELS)), None],
        "sigma": SIGMA,
        "loss": [StrOptions(set(LOSSES)), None],
        "alpha": NONNEG_REAL + [None],
        "fit_intercept": ["boolean"],
        "max_epochs": POSITIVE_INT,
        "max_epochs_per_iter": POSITIVE_INT,
        "tol": TOL,
        "parallel": [StrOptions({"auto", "hogwild"}), None],
        "n_jobs": N_JOBS,
        "random_state": RANDOM_STATE,
        "verbose": VERBOSE,
    }

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
        kernel = self.kernel
        if feature == "binning" and kernel != "laplacian":
            raise ValueError(f"kernel={kernel!r} is not available with feature='binning' "
                             "(random binning approximates the Laplacian kernel only)")
        return kernel

    def _features(self, X, n_threads):
        if self.feature_ == "fourier":
            return fourier_map(X, self.random_weights_, self.random_offset_, self._scale, n_threads)
        blocks = [rb.transform(X)[:, keep] for rb, keep in self.binnings_]
        if not blocks:
            return sp.csr_matrix((X.shape[0], 0))
        return sp.hstack(blocks, format="csr")

    # ------------------------------------------------------------------ fit
    @fit_context
    def fit(self, X, y):
        """Run the T outer iterations of Algorithm 1 on X (n_samples, n_features) and y."""
        R, T, feature = self.n_components_per_iter, self.n_iter, self.feature
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target "
                             f"y is None")
        values = np.asarray(y)
        if values.dtype.kind in "fc" and not np.isfinite(values).all():
            raise ValueError("y contains NaN or inf")   # before type_of_target casts it
        loss = resolve_loss(self.loss, y)
        kernel = self._resolved_kernel(feature)
        n_threads = effective_n_threads(self.n_jobs)
        classify = loss in ("logistic", "squared_hinge")
        if not classify and values.dtype.kind in "USO":
            check_regression_target(y)   # strings or None in y: the models' message
        self.loss_ = loss
        check_sparse_structure(X)   # before scipy reads its index arrays
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc") if feature == "fourier" else False,
                             dtype=np.float64, y_numeric=not classify)
        sigma = resolve_sigma(self.sigma, X, kernel)
        N = X.shape[0]
        alpha = 1.0 / N if self.alpha is None else float(self.alpha)
        if classify:
            y = check_class_labels(y, N, type(self).__name__)   # rbcd's label messages
            self.classes_, y_idx = np.unique(y, return_inverse=True)
            if len(self.classes_) < 2:
                raise ValueError(f"the training data needs at least 2 classes; got 1 class ({self.classes_[0].tolist()!r})")
            if len(self.classes_) == 2:
                targets = np.where(y_idx == 1, 1.0, -1.0)[None, :]
            else:
                targets = np.where(y_idx[None, :] == np.arange(len(self.classes_))[:, None], 1.0, -1.0)
        else:
            targets = np.asarray(y, dtype=np.float64)[None, :]
        rng = make_generator(self.random_state)
        self._scale = np.sqrt(2.0 / R)
        n_out = targets.shape[0]
        # the working set: Fourier columns in a growing column buffer (the solver's CSC
        # form over it is a view), binning columns in CSC (the solver's layout, so that it is
        # not converted again for every solve)
        buf = _ColumnBuffer(N) if feature == "fourier" else None
        Z_ws = sp.csc_matrix((N, 0))
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
                buf.append(fourier_map(X, W_new, b_new, self._scale, n_threads))
                cols, h = buf.columns(), buf.h()
            else:
                # small blocks run on one thread: OpenMP start-up and barriers cost more
                # than the work (the result is the same for any thread count)
                rb_jobs = self.n_jobs if N * R * X.shape[1] >= MIN_BINNING_WORK else 1
                rb = RandomBinning(n_grids=R, sigma=sigma, n_jobs=rb_jobs,  # Z internal:
                                   random_state=int(rng.integers(0, 2**32))
                                   ).set_output(transform="default")  # never a data frame
                Z_new = rb.fit_transform(X).tocsc()
                Z = sp.hstack([Z_ws, Z_new], format="csc")
                cols = plain_columns(Z)
                h = _cd.column_sq_sums(cols.indptr, cols.indices, cols.data, cols.zval,
                                       np.ones(N), 1) / N
            cd_seed = int(rng.integers(0, 2**32))
            # 3: solve the L1 problem on the working set, warm-started (the kept weights, the
            # new features at 0); iterations before the last get the smaller budget
            one_thread = self.parallel != "hogwild" and cols.nnz < MIN_SOLVER_WORK
            D_t = cols.n_cols
            W, B, n_epochs, results = solve_working_set(
                cols, h, targets, loss=loss, alpha=alpha, fit_intercept=self.fit_intercept,
                max_epochs=self.max_epochs if last else self.max_epochs_per_iter, tol=self.tol,
                parallel=self.parallel, n_threads=1 if one_thread else n_threads,
                random_state=cd_seed,
                W0=None if t == 0 else np.hstack([W_ws, np.zeros((n_out, D_t - W_ws.shape[1]))]),
                B0=None if t == 0 else B_ws, verbose=max(0, int(self.verbose) - 1))
            del cols  # a view of the buffer, which the drop rewrites
            failed = [k for k, r in enumerate(results) if not r["converged"]]
            if last and failed:  # the intermediate solves are budgeted by design
                worst = max(failed, key=lambda k: results[k]["gap"])
                warn_user(
                    f"SparseRandomFeatures: the last working-set solve did not converge"
                    f"{f' for {len(failed)} of {n_out} problems' if n_out > 1 else ''} in "
                    f"max_epochs={self.max_epochs} epochs (relative "
                    f"{'duality gap' if loss == 'squared' else 'minimum-norm subgradient'} "
                    f"{results[worst]['gap']:.3e} > tol {self.tol:.1e}); increase max_epochs "
                    "or alpha", ConvergenceWarning)
            epochs = int(np.sum(n_epochs))
            work_hist.append(float(epochs) * N * D_t)
            # 4: drop the features whose weight is zero in every problem
            # (weights at rounding level, |w| <= 1e-12 max |w|, count as zero: coordinate
            # descent leaves such residues where a weight sits exactly at its threshold)
            keep = np.any(np.abs(W) > ZERO_RTOL * np.abs(W).max(initial=0.0), axis=0)
            old = W_ws.shape[1]
            W_ws, B_ws = W[:, keep], B
            if feature == "fourier":
                fourier_W = np.hstack([fourier_W, W_new])[:, keep]
                fourier_b = np.concatenate([fourier_b, b_new])[keep]
                buf.keep(keep)
                P = (W_ws @ buf.dense()).T + B_ws[None, :]
            else:
                binnings = self._drop_binning(binnings, rb, keep, old)
                Z_ws = Z[:, np.flatnonzero(keep)]
                P = np.asarray(Z_ws @ W_ws.T) + B_ws[None, :]
            obj = float(np.sum(np.mean(loss_value(loss, P, targets.T), axis=0))
                        + alpha * np.abs(W_ws).sum())
            n_hist.append(int(keep.sum()))
            epoch_hist.append(epochs)
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
        self.objective_history_ = np.array(obj_hist)
        self.solver_epochs_history_ = np.array(epoch_hist)
        self.solver_work_history_ = np.array(work_hist)
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
        check_sparse_structure(X)   # before scipy reads its index arrays
        X = validate_data(self, X, accept_sparse=("csr", "csc") if self.feature_ == "fourier" else False,
                          dtype=np.float64, reset=False)
        Z = self._features(X, effective_n_threads(self.n_jobs))
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
        check_sparse_structure(X)   # before scipy reads its index arrays
        X = validate_data(self, X, accept_sparse=("csr", "csc") if self.feature_ == "fourier" else False,
                          dtype=np.float64, reset=False)
        return self._features(X, effective_n_threads(self.n_jobs))

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
