"""Ridge regression and classification by (block, preconditioned) conjugate gradient.

scikit-learn's Ridge convention (docs/internals.md, "Ridge by CG")::

    min_{w, b}  sum_i s_i (y_i - z_i . w - b)^2 + alpha ||w||^2

With ``fit_intercept`` the columns of Z and the targets are centred with the
s-weighted means zbar, ybar. The centring is applied inside the operator (Z is
never densified), and all targets are solved together::

    (Zc^T S Zc + alpha I) W = Zc^T S Yc,     Zc = Z - 1 zbar^T,   b = ybar - zbar . w

Each iteration does ONE sparse product Z @ P (n x k) and ONE Z^T @ U for all the
still-active right-hand sides; each column keeps its own CG step sizes and is
frozen as soon as ``||r_k|| <= tol * ||b_k||``.

Products (rbcd.solvers._sparse): Z @ V is parallel over the rows of a CSR copy; Z^T @ U is
parallel over the rows of a CSC copy built once per fit (the CSC arrays of Z are the
CSR arrays of Z^T), or taken from the RBColumns given as ``fit(..., columns=)``. The CSC
route needs no n_threads * D * k scratch, and its summation order does not depend on the
thread count, so results are identical for every ``n_jobs``. When every stored value is
the same constant (random binning: 1/sqrt(R)) the data array is not read.
Products smaller than _WORK_PER_THREAD multiply-adds per thread use fewer threads.
With the grid structure of a random binning matrix (the columns carry grid labels:
RBRegressor / RBClassifier, or ``fit(..., columns=)``), Z^T U and Z v are computed from
the labels (rbcd.solvers._sparse.labels_tmatmat / labels_matmat), 2 bytes per entry with each
grid's slice in cache, summed in the CSR / CSC order: the same bits.

Jacobi preconditioner: the diagonal of the operator,
``sum_i s_i z_ij^2 - S zbar_j^2 + alpha`` (no centring term without intercept), in
O(nnz). For RB training data and unit weights the first term is bin count / R; one
grid's columns touch disjoint rows, so this is the exact block-diagonal of Z^T Z.
Jacobi removes bad column scaling (10x fewer iterations on columns scaled 1e-2..1e2).

Grid projection: in random binning TRAINING data every row has exactly one entry, of the
same value, in every grid, so for each grid g the indicator e_g of its columns gives
Z e_g = const * 1, hence Zc e_g = 0 with an intercept (any sample weights) and
Z (e_g - e_h) = 0 without. On these null directions of the data term the operator is
alpha I. The right-hand side and the solution are orthogonal to them and plain CG never
leaves that complement, but M^-1 (not a multiple of I) mixes them in, where they act
as eigenvalues alpha / M_jj of the preconditioned operator: Jacobi then speeds up the
coarse residual reduction and slows the tail. When the grid structure is known (the
``columns`` carry a ``grid_ptr``: RBRegressor / RBClassifier pass the binning's
RBColumns, or ``fit(..., columns=)``), every stored value is the same and every grid
holds n_rows entries, the preconditioner is z = Proj M^-1 r with Proj the orthogonal
projection off those directions (subtract each grid's mean over its columns; without
intercept only the part of the grid means along span{e_g - e_h}; _GridProjection).
Proj M^-1 Proj is positive definite on the complement, where the iterates live, so the
solution is the same. Otherwise (new data whose rows miss grids, non-constant values,
dense Z, no structure) plain Jacobi is used. Cost per iteration: the grid sums of the
active columns of P, a gather and a subtraction.

Which preconditioner needs fewer iterations depends on the data: the projected Jacobi
helps most on random binning training data with D < N, and still helps or ties up to a
few bins per row (small penalties gain most: the regressions of
benchmarks/compare_preconditioner.py); without the structure Jacobi helps at loose
tolerances and can cost iterations at tight ones; when D >> N (rank Z <= N, many more
null directions) plain CG can need fewer. benchmarks/compare_ridge.py prints the
iteration counts per tolerance. ``preconditioner="auto"`` of RBRegressor /
RBClassifier is resolved in rbcd.models.
"""
import numbers
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from . import _sparse
from ._columns import _all_equal, columns_from, to_csc
from .cd import SAFE_EXP, pow2_scale
from .._memory import check_solver_memory
from .._threads import effective_n_threads, limit_blas
from .._validation import (N_JOBS, TOL, VERBOSE, WEIGHT_SUM_OVERFLOW, IntInterval,
                           RealInterval, StrOptions, check_class_weight, check_predict_csr,
                           dict_class_weight_rows,
                           check_regression_target, check_sparse_structure, fit_context,
                           wrong_length)
from .._warnings import warn as warn_user
from .._integrity import ChecksummedState

_PRECONDITIONERS = ("jacobi", None)
# multiply-adds per thread below which a product runs on fewer threads: about half a
# millisecond of one thread's work. A thread team's wake-up costs microseconds on an idle
# machine but up to a scheduler time slice when other processes hold the cores (rbcd's
# threads then sleep: rbcd._openmp_env); at 50,000 a 133-row fit (wine) ran its products on
# 2 threads and n_jobs=None took 1.3-2x n_jobs=1 beside other processes
_WORK_PER_THREAD = 500_000
#: sparse_times_coef multiplies by the coefficients of the columns its rows use (a
#: gather, after a sort of the stored indices) where the rows store fewer than one
#: entry per _GATHER_PER_COLUMN columns, else by a (D, k) copy of all of them
_GATHER_PER_COLUMN = 8
# entries of the (D, k) arrays per thread below which CG's vector updates (cg_step,
# cg_direction, the operator's tail: several passes each, memory-bound) use fewer threads;
# with the products' grain they ran on one thread at D = 6e5, 1.25x the time of two. At
# about 1 ns an entry (since their sums stay in registers) two threads gain from about
# 1.5e5 entries, a region's wake-up included: a 40-iteration RidgeCG at N = 5e4 (D =
# 3.6e5) took 157-176 ms on 2 threads with this grain against 194-198 ms with 200,000
_VECTOR_PER_THREAD = 100_000


def _max_abs(Z):
    """max |Z_ij| over the stored values (0 for an empty matrix)."""
    data = Z.data if sp.issparse(Z) else np.asarray(Z)
    if data.size == 0:
        return 0.0
    return float(max(np.max(data), -np.min(data)))     # no |Z| copy


def default_max_iter(n_features):
    """The iteration cap used when ``max_iter=None``: ``min(10 * D, 10_000)`` (as rbcd_ref).

    CG on a D x D system converges in at most D steps in exact arithmetic; 10 D leaves
    room for rounding, and the cap of 10 000 keeps a fit bounded on huge D (a
    ConvergenceWarning says when it was reached)."""
    return int(max(1, min(10 * int(n_features), 10_000)))


# ----------------------------------------------------------------------------------------
# checks


def _check_alpha(alpha, n_targets):
    """alpha as a float64 array of length n_targets, every entry finite and >= 0."""
    if isinstance(alpha, (bool, np.bool_)):
        raise ValueError(f"alpha must be a non-negative number, got {alpha!r}")
    if isinstance(alpha, numbers.Real):
        a = np.full(n_targets, float(alpha))
    else:
        try:
            a = np.asarray(alpha, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise ValueError(f"alpha must be a non-negative number, got {alpha!r}") from None
        if a.size == 1:
            a = np.full(n_targets, a[0])
        elif a.size != n_targets:
            raise ValueError(
                f"alpha has {a.size} values but there are {n_targets} targets; "
                "give one value or one per target"
            )
    if not np.all(np.isfinite(a)):
        raise ValueError(f"alpha must be finite, got {alpha!r}")
    if np.any(a < 0):
        raise ValueError(f"alpha must be >= 0, got {alpha!r}")
    return a


def _check_sample_weight(sample_weight, n_samples):
    """Float64 weights, finite, >= 0, of length n_samples, not all zero, a finite sum."""
    if sample_weight is None:
        return None
    if isinstance(sample_weight, numbers.Real) and not isinstance(sample_weight, (bool, np.bool_)):
        s = np.full(n_samples, float(sample_weight))
    else:
        s = np.asarray(sample_weight)
        if s.dtype.kind not in "biuf":
            raise ValueError(f"sample_weight must be numeric, got dtype {s.dtype}")
        s = s.astype(np.float64)
        if s.ndim != 1:
            raise ValueError(f"sample_weight must be 1-D, got shape {s.shape}")
        if s.shape[0] != n_samples:
            raise ValueError(wrong_length("sample_weight", s.shape[0], n_samples))
    if not np.all(np.isfinite(s)):
        raise ValueError("sample_weight contains NaN or inf")
    if np.any(s < 0):
        raise ValueError("sample_weight must be non-negative")
    if not s.sum() > 0:
        raise ValueError("sample_weight must contain at least one non-zero weight (all are zero)")
    if not np.isfinite(s.sum()):
        raise ValueError(WEIGHT_SUM_OVERFLOW)
    return s


def one_vs_rest_targets(y):
    """(classes, Y): the sorted classes of the labels y (n,) and the -1/+1 one-vs-rest
    targets, (n, 1) for two classes (+1 for classes[1], as LabelBinarizer(neg_label=-1)
    and RidgeClassifier) and (n, n_classes) above."""
    classes, index = np.unique(y, return_inverse=True)
    index = index.reshape(-1)
    if classes.shape[0] <= 2:
        return classes, np.where(index == 1, 1.0, -1.0)[:, None]
    Y = np.full((index.shape[0], classes.shape[0]), -1.0)
    Y[np.arange(index.shape[0]), index] = 1.0
    return classes, Y


# ----------------------------------------------------------------------------------------
# the operator


class _Products:
    """Z @ V and Z^T @ U for dense or sparse Z (float32 or float64 values).

    Sparse: one CSR and one CSC copy, made once; ``columns`` may supply the CSC part
    (any object with ``indptr``, ``indices`` and either ``value`` (constant) or
    ``data``), e.g. a random binning column structure, to skip the transpose.
    """

    def __init__(self, Z, n_threads, columns=None):
        self.n_threads = int(n_threads)
        self.shape = Z.shape
        self.sparse = sp.issparse(Z)
        self.columns_used = False       # True when ``columns`` supplied the CSC part
        self.use_const = False
        self.labels = None              # grid labels of a random binning Z (see _labels_of)
        if not self.sparse:
            self.Z = np.ascontiguousarray(Z, dtype=np.float64)
            return
        csr = sp.csr_matrix(Z)
        if csr.data.dtype not in (np.float32, np.float64):
            csr = csr.astype(np.float64)
        if not csr.has_canonical_format:
            # duplicates would be squared separately in the Jacobi diagonal
            csr = csr.copy()
            csr.sum_duplicates()
        data = csr.data
        self.use_const = bool(data.size > 0 and _all_equal(data, self.n_threads))
        self.const_value = float(data[0]) if data.size > 0 else 0.0
        self.csr = self._arrays(csr.indptr, csr.indices, data)
        if columns is not None and self._columns_match(columns):
            value = getattr(columns, "value", None)
            cdata = getattr(columns, "data", None)
            if cdata is None:
                cdata = np.full(1, value, dtype=np.float64)
            self.csc = self._arrays(columns.indptr, columns.indices, cdata)
            self.columns_used = True
            if self.use_const:
                self.labels = self._labels_of(columns)
        else:
            csc = to_csc(csr, self.n_threads)
            self.csc = self._arrays(csc.indptr, csc.indices, csc.data)

    def _columns_match(self, columns):
        """Use a supplied column structure only if it describes this Z exactly."""
        try:
            indptr = np.asarray(columns.indptr)
            value = getattr(columns, "value", None)
        except AttributeError:
            return False
        if indptr.shape[0] != self.shape[1] + 1 or int(indptr[-1]) != self.csr[1].shape[0]:
            return False
        if getattr(columns, "data", None) is None:
            return self.use_const and value is not None and float(value) == self.const_value
        return True

    def _labels_of(self, columns):
        """(pointers, wide flags, grid_ptr, arrays) of the grid labels the column
        structure carries (``RBColumns.grid_labels``, or rbcd.solvers.cd's cached or
        buildable ``grid_labels(n_threads)``), or None. With them both products read
        2 bytes per entry instead of 4 (and the same sums come out, bit for bit)."""
        gp = getattr(columns, "grid_ptr", None)
        labels = getattr(columns, "grid_labels", None)
        if callable(labels):
            labels = labels(self.n_threads)
        if gp is None or labels is None:
            return None
        gp = np.ascontiguousarray(gp, dtype=np.int64)
        n = self.shape[0]
        if len(labels) != gp.shape[0] - 1 or gp[-1] != self.shape[1]:
            return None
        table = getattr(columns, "_label_table", None)   # columns_from's, checked there
        if table is None:
            from ..binning import _binning
            ptrs, wide, _, problem = _binning.label_table(labels, gp, n, False)
            if problem:
                return None
        else:
            ptrs, wide = table
        return ptrs, wide, gp, labels

    @staticmethod
    def _arrays(indptr, indices, data):
        # one index dtype for both (the kernels' fused type): int32 unless either needs int64
        indptr = np.asarray(indptr)
        indices = np.asarray(indices)
        small = indices.dtype != np.int64 and (indptr.shape[0] == 0 or int(indptr[-1]) < 2**31)
        idx = np.int32 if small else np.int64
        return (
            np.ascontiguousarray(indptr, dtype=idx),
            np.ascontiguousarray(indices, dtype=idx),
            np.ascontiguousarray(data) if np.asarray(data).dtype in (np.float32, np.float64)
            else np.ascontiguousarray(data, dtype=np.float64),
        )

    def _threads_for(self, work):
        """Threads for a product of ``work`` multiply-adds: one per _WORK_PER_THREAD, so
        that tiny products do not pay for waking (or, on a busy machine, waiting for)
        a thread team. Results do not depend on the thread count."""
        return max(1, min(self.n_threads, int(work // _WORK_PER_THREAD)))

    def _run(self, arrays, V, n_out):
        indptr, indices, data = arrays
        V = np.ascontiguousarray(V, dtype=np.float64)
        out = np.empty((n_out, V.shape[1]), dtype=np.float64)
        _sparse.csr_matmat(indptr, indices, data, self.use_const, self.const_value,
                           V, out, self._threads_for(indices.shape[0] * V.shape[1]))
        return out

    def _run_labels(self, kernel, V, n_out):
        ptrs, wide, gp, _ = self.labels
        V = np.ascontiguousarray(V, dtype=np.float64)
        out = np.empty((n_out, V.shape[1]), dtype=np.float64)
        kernel(ptrs, wide, gp, self.const_value, V, out,
               self._threads_for(self.csr[1].shape[0] * V.shape[1]))
        return out

    def dot(self, V):
        """Z @ V, V of shape (D, k) -> (n, k)."""
        if not self.sparse:
            return self.Z @ V
        if self.labels is not None and V.shape[1] == 1:
            # (for several right-hand sides the CSR kernel's register blocks are used)
            return self._run_labels(_sparse.labels_matmat, V, self.shape[0])
        return self._run(self.csr, V, self.shape[0])

    def tdot(self, U):
        """Z^T @ U, U of shape (n, k) -> (D, k)."""
        if not self.sparse:
            return self.Z.T @ U
        if self.labels is not None:
            return self._run_labels(_sparse.labels_tmatmat, U, self.shape[1])
        return self._run(self.csc, U, self.shape[1])

    def col_stats(self, s):
        """(sum_i s_i z_ij, sum_i s_i z_ij^2) for every column j."""
        if not self.sparse:
            return s @ self.Z, s @ (self.Z * self.Z)
        D = self.shape[1]
        colsum = np.empty(D, dtype=np.float64)
        colsq = np.empty(D, dtype=np.float64)
        indptr, indices, data = self.csc
        _sparse.csc_weighted_col_stats(indptr, indices, data, self.use_const, self.const_value,
                                       np.ascontiguousarray(s, dtype=np.float64),
                                       colsum, colsq, self._threads_for(indices.shape[0]))
        return colsum, colsq


class _GridProjection:
    """Orthogonal projection onto the complement of the known null directions of the
    data term of a random binning matrix in which every row has exactly one entry (of
    the same value) in every grid; grid g owns the contiguous columns
    ``grid_ptr[g]:grid_ptr[g + 1]`` and e_g is their indicator vector.

    With ``fit_intercept``: Zc e_g = 0 for every g (Z e_g is a constant vector, which
    centring removes, with or without sample weights), so the projection subtracts from
    each grid's entries their mean over the grid's columns. Without: Z (e_g - e_h) = 0,
    the null space is span{e_g - e_h} and, with m_g the mean over grid g and
    c = sum_g m_g / sum_g (1 / n_g), ``v_j <- v_j - m_g + c / n_g`` for j in grid g.
    Applied in place to the columns of a C-contiguous (D, m) float64 array.

    Applied by rbcd.solvers._sparse.grid_center: each grid's sums in row order on one
    thread, the shift subtracted in parallel (n_threads); the same bits for any thread
    count.
    """

    def __init__(self, grid_ptr, fit_intercept, n_threads=1):
        sizes = np.diff(grid_ptr)
        keep = sizes > 0                       # empty grids own no columns
        self.sizes = np.ascontiguousarray(sizes[keep], dtype=np.intp)
        G = self.sizes.shape[0]
        self.ptr = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.inv_sizes = 1.0 / self.sizes
        self.fit_intercept = bool(fit_intercept)
        self.inv_total = 1.0 / float(self.inv_sizes.sum()) if G else 0.0
        self.n_threads = int(n_threads)

    def __call__(self, V):
        if V.shape[0] == 0 or V.shape[1] == 0:
            return V
        _sparse.grid_center(V, self.ptr, self.inv_sizes, self.fit_intercept, self.inv_total,
                            self.n_threads)
        return V


def training_grid_ptr(op, columns):
    """The grid boundaries (int64) of Z when it is random binning training data given
    with its grid structure, else None: ``columns`` (used by ``op`` as Z's column
    structure, hence describing Z) carries a ``grid_ptr`` (whose grids hold at most one
    entry per row: true of an RBColumns by construction and checked by ``fit(...,
    columns=...)``), every stored value of Z is the same, and every grid holds n_rows
    entries, so that every row has exactly one entry in every grid (training data; rows
    of new data may miss grids). The grid projection and the direct solves' label Gram
    matrices rely on exactly this."""
    grid_ptr = getattr(columns, "grid_ptr", None)
    if grid_ptr is None or not op.sparse or not op.columns_used or not op.use_const:
        return None
    n, D = op.shape
    gp = np.asarray(grid_ptr)
    if n == 0 or gp.ndim != 1 or gp.shape[0] < 2 or gp.dtype.kind not in "iu":
        return None
    gp = gp.astype(np.int64)
    if gp[0] != 0 or gp[-1] != D or np.any(np.diff(gp) < 0):
        return None
    entries = np.diff(op.csc[0][gp].astype(np.int64))     # stored entries per grid
    if not np.all(entries == n):
        return None
    return gp


def _grid_projection(op, columns, fit_intercept):
    """The _GridProjection for Z when it is exact (:func:`training_grid_ptr`), else None."""
    gp = training_grid_ptr(op, columns)
    if gp is None:
        return None
    D = op.shape[1]
    threads = max(1, min(op.n_threads, int(D // _VECTOR_PER_THREAD)))
    return _GridProjection(gp, fit_intercept, threads)


def solve_ridge_cg(Z, Y, sample_weight=None, alpha=1.0, fit_intercept=True, tol=1e-6,
                   max_iter=None, preconditioner="jacobi", n_threads=1, columns=None,
                   verbose=0, return_info=False):
    """Block preconditioned CG for ridge; validated inputs, Y of shape (n, k).

    ``columns``: optional column structure of Z (see _Products), e.g. an
    ``rbcd.binning.RBColumns``. If it also has a ``grid_ptr`` -- a promise that each
    grid's columns hold at most one entry per row -- and the Jacobi preconditioner is
    used, the preconditioned residual is projected off the grid indicator null
    directions whenever that is exact (_grid_projection; module docstring).

    Returns
    -------
    coef : (k, D) float64
    intercept : (k,) float64
    n_iter : (k,) int, CG iterations per target (0 when its right-hand side is 0)
    info : dict, with ``return_info``: ``converged`` (k,) bool, ``residual`` (k,) the final
        relative residual ||r|| / ||b||, ``stop`` (k,) str, why each target stopped
        ("tol"; "breakdown": the search direction vanished, p^T A p <= 0, so the residual
        cannot decrease further in float64; or "max_iter")
    """
    return solve_ridge(Z, Y, sample_weight, alpha, fit_intercept, tol, max_iter,
                       preconditioner, n_threads, columns, verbose, return_info, method="cg")


def solve_ridge(Z, Y, sample_weight=None, alpha=1.0, fit_intercept=True, tol=1e-6,
                max_iter=None, preconditioner="jacobi", n_threads=1, columns=None,
                verbose=0, return_info=False, method="cg", classification=False,
                extra=None):
    """Ridge on validated inputs by ``method``: "cg" (solve_ridge_cg), "dual" or "primal"
    (one Cholesky factorization for every target, rbcd.solvers._direct), "direct" (the
    smaller of the two) or "auto" (the cheapest of the three by rbcd.solvers._direct's
    cost model). The same returns as solve_ridge_cg, and ``info["method"]`` the form
    used; a direct solve reports 1 iteration (the factorization) and the relative
    residual of its solution (``stop`` "direct").

    Scaling: the objective sum_i s_i (y_i - z_i w - b)^2 + alpha ||w||^2 is quadratic, so
    with Y' = Y / cy the solution is (w, b) / cy; and with s' = s / cs, alpha' = alpha / cs
    the objective is divided by cs, the same minimizer. Targets or weights whose magnitude
    would overflow or underflow the squared norms (beyond 2**+-100) are solved in those
    units, cy and cs powers of two (exact), and the solution scaled back.

    ``alpha="auto"``: the penalty chosen from the data (:func:`_solve_auto_alpha`), by the
    targets' squared error, or with ``classification`` by the accuracy of the one-vs-rest
    decisions; ``info["alpha"]`` is the choice.

    ``extra``: a rbcd.solvers._linear.ExtraBlock, the linear term beside Z (that module):
    the coefficients are then those of the design [Z, M], (k, D + d), where the chosen
    weight c is > 0 (``info["extra_weight"]``; with c = 0 they are Z's alone).
    """
    k = Y.shape[1]
    if isinstance(alpha, str):
        if alpha != "auto":
            raise ValueError(f"alpha must be a non-negative number or 'auto', got {alpha!r}")
        out = _solve_auto_alpha(Z, Y, sample_weight, fit_intercept, tol, max_iter,
                                preconditioner, n_threads, columns, method, classification,
                                extra, verbose)
        return out if return_info else out[:3]
    if extra is not None:
        out = _solve_with_extra(Z, Y, sample_weight, alpha, fit_intercept, tol, max_iter,
                                preconditioner, n_threads, columns, verbose, method,
                                classification, extra)
        return out if return_info else out[:3]
    alpha = _check_alpha(alpha, k)
    zmax = _max_abs(Z)
    if zmax > 2.0 ** SAFE_EXP:
        # Huge features: with Z' = Z / cz (cz a power of two: exact), w' = cz w and
        # alpha' = alpha / cz^2 the objective is the same, and Z'^T Z' stays finite. alpha'
        # may underflow to 0: alpha is then nothing against Z^T Z (least squares). The
        # grid structure's values are not Z''s: it is not passed on (RB values are small).
        cz = pow2_scale(np.array([zmax]))
        out = solve_ridge(
            Z / cz, Y, sample_weight, alpha / (cz * cz), fit_intercept, tol, max_iter,
            preconditioner, n_threads, None, verbose, return_info=True, method=method)
        out[0][...] /= cz
        return out if return_info else out[:3]
    cy = pow2_scale(Y)
    cs = 1.0 if sample_weight is None else pow2_scale(sample_weight)
    if not np.all(np.isfinite(alpha / cs)):
        raise ValueError(f"sample_weight is too small against alpha: its largest weight "
                         f"{float(np.max(sample_weight))!r} puts alpha="
                         f"{float(np.max(alpha)):g} past the float64 range in the weights' "
                         f"units; scale sample_weight up (and alpha with it, for the same "
                         f"model)")
    if cy != 1.0 or cs != 1.0:
        coef, intercept, n_iter, info = solve_ridge(
            Z, Y / cy, None if sample_weight is None else sample_weight / cs, alpha / cs,
            fit_intercept, tol, max_iter, preconditioner, n_threads, columns, verbose,
            return_info=True, method=method)
        coef *= cy
        intercept *= cy
        return (coef, intercept, n_iter, info) if return_info else (coef, intercept, n_iter)
    system = _RidgeSystem(Z, Y, sample_weight, fit_intercept, n_threads, columns)
    if method in ("auto", "direct"):
        from ._direct import choose
        method = choose(system, columns, method,
                        n_factor=np.unique(np.asarray(alpha, dtype=np.float64)).shape[0])
    if method == "cg":
        if preconditioner is not None and np.any(np.asarray(alpha) == 0.0):
            # alpha = 0 and a singular Z^T S Z: plain CG from zero stays in the range of
            # Z^T and reaches the minimum-norm solution (the direct solves'); preconditioned,
            # it reaches the minimum M-norm one, another least-squares fit whose
            # predictions on new rows differ
            preconditioner = None
        coef, n_iter, info = _cg_iterate(system, alpha, tol, max_iter, preconditioner,
                                         columns, verbose, shared_scale=classification)
    else:
        from ._direct import solve_direct
        coef, n_iter, info = solve_direct(system, alpha, method, columns, tol)
    info["method"] = method
    coef = transposed(coef)
    if system.zbar is not None:
        intercept = system.ybar - np.einsum("kj,j->k", coef, system.zbar)
    else:
        intercept = np.zeros(k)
    if return_info:
        return coef, intercept, n_iter, info
    return coef, intercept, n_iter


def _solve_with_extra(Z, Y, sample_weight, alpha, fit_intercept, tol, max_iter,
                      preconditioner, n_threads, columns, verbose, method, classification,
                      extra):
    """solve_ridge's four values for the design [Z, sqrt(c) M] at a fixed alpha (one for
    every target) and the one weight c of ``extra``: one solve on Z of the k targets and
    the d columns of sqrt(c) M, then their Schur complement (rbcd.solvers._linear)."""
    from ._linear import schur_solution

    if len(extra.weights) != 1:
        raise ValueError("the linear term's weight is chosen only with alpha='auto'; "
                         f"got {len(extra.weights)} candidates and a fixed alpha")
    a = np.asarray(alpha, dtype=np.float64).reshape(-1)
    if np.unique(a).shape[0] != 1:
        raise ValueError("the linear term needs one alpha for every target")
    a = float(a[0])
    c = extra.weights[0]
    if c == 0.0:
        out = solve_ridge(Z, Y, sample_weight, a, fit_intercept, tol, max_iter,
                          preconditioner, n_threads, columns, verbose, return_info=True,
                          method=method, classification=classification)
        out[3]["extra_weight"] = 0.0
        return out
    k = Y.shape[1]
    s = np.ones(Y.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    Mp = np.sqrt(c) * extra.M
    if method in ("auto", "direct", "dual"):
        # the dual form solves the joint design itself (n x n: the term adds Ms Ms^T), where
        # the Schur complement's d right-hand sides would each span the D columns
        from . import _direct
        from ._linear import centred_weighted

        cy = pow2_scale(Y)
        cs = 1.0 if sample_weight is None else pow2_scale(sample_weight)
        system = _RidgeSystem(Z, Y / cy, None if sample_weight is None else s / cs,
                              fit_intercept, n_threads, columns)
        form = method if method == "dual" else _direct.choose(system, columns, method)
        if form == "dual":
            Ms, mbar = centred_weighted(Mp, system)
            WV, n_iter, info = _direct.solve_direct(system, np.full(k, a / cs), "dual",
                                                    columns, tol, extra=Ms)
            D = system.shape[1]
            W, V = WV[:D], WV[D:]
            coef = transposed(W, cy, np.sqrt(c) * V)
            intercept = np.zeros(k)
            if system.zbar is not None:
                intercept = (system.ybar - np.einsum("kj,j->k", W.T, system.zbar)
                             - np.einsum("kj,j->k", V.T, mbar)) * cy
            info.update(method="dual", extra_weight=c)
            return coef, intercept, n_iter, info
    coef_all, intercept_all, n_iter, info = solve_ridge(
        Z, np.hstack([Y, Mp]), sample_weight, a, fit_intercept, tol, max_iter,
        preconditioner, n_threads, columns, verbose, return_info=True, method=method,
        classification=classification)
    w, v, b = schur_solution(Y, Mp, s, a, coef_all, intercept_all, Z, fit_intercept)
    conv = np.asarray(info["converged"])
    info = dict(info, converged=conv[:k] & bool(np.all(conv[k:])),
                residual=np.asarray(info["residual"])[:k], stop=np.asarray(info["stop"])[:k],
                extra_weight=c)
    return np.hstack([w, np.sqrt(c) * v]), b, np.asarray(n_iter)[:k], info


def _choose_extra(system, columns, alphas, classification, extra, solution):
    """The best (c, alpha) over the weights of ``extra`` (None: no term) by leave-one-out
    on ``system``: returns (c, alpha, W, scores, (Ms, mbar)) with Ms the unit block centred
    and weighted on the system and mbar its weighted column means (None without a term); W
    as loo_select_weights' (D + d rows where c > 0). The first weight wins ties."""
    from . import _direct
    from ._linear import centred_weighted

    if extra is None:
        a, W, scores = _direct.loo_select(system, columns, alphas, classification, solution)
        return 0.0, a, W, scores, None
    M = extra.M
    if M.shape[0] != system.shape[0]:
        raise ValueError("the linear term's block does not match the rows")
    Ms, mbar = centred_weighted(M, system)
    best = None
    for c, (a, W, scores) in zip(extra.weights, _direct.loo_select_weights(
            system, columns, alphas, classification, Ms, extra.weights, solution)):
        top = tuple(scores[_direct._best(scores)])
        if best is None or top > best[0]:
            best = (top, c, a, W, scores)
    return best[1], best[2], best[3], best[4], (Ms, mbar)


def _sample_rows(Zc, columns, rows, n_threads):
    """(Zc[rows], its grid structure or None): the rows of a sample that alpha="auto"
    scores, with the column structure rebuilt from the training one's grid boundaries
    (None when ``columns`` has none, Z is dense, or the rows do not form one)."""
    Z_rows = Zc[rows]
    grid_ptr = getattr(columns, "grid_ptr", None)
    if grid_ptr is None or not sp.issparse(Z_rows):
        return Z_rows, None
    from ..binning import column_structure
    try:
        return Z_rows, column_structure(Z_rows, grid_ptr, n_jobs=n_threads)
    except ValueError:
        return Z_rows, None


def _solve_auto_alpha(Z, Y, sample_weight, fit_intercept, tol, max_iter, preconditioner,
                      n_threads, columns, method, classification, extra=None, verbose=0):
    """Ridge with the penalty chosen from the data; returns solve_ridge's four values, with
    ``info["alpha"]`` (the choice), ``info["alphas"]`` and ``info["scores"]`` (the
    candidates and their (primary, secondary) scores, rbcd.solvers._direct.selection_scores)
    and ``info["selection"]``.

    Up to ``LOO_MAX_ROWS`` rows: exact leave-one-out over AUTO_ALPHAS_PER_ROW times the
    total weight, from one eigendecomposition of the dual Gram matrix (_direct.loo_select),
    which also gives the solution (``method`` "cg": solved again by CG, as asked).
    Above: the same leave-one-out on a fixed sample (seed 0) of LOO_MAX_ROWS rows chooses
    the penalty a_s, and a_s * sqrt(S / S_s) (S, S_s: the total and the sample's weight)
    is solved on every row by ``method``: a bounded cost (one eigendecomposition of
    LOO_MAX_ROWS rows) on any N. SAMPLE_SCALING: more rows want less smoothing per row, so
    the sample's best penalty per row (a_s / S_s) overstates the full data's; of the
    scalings S / S_s (the same penalty per row), sqrt(S / S_s) and 1 (the same penalty),
    the square root did best on synthetic sets of 10^4 and 3 x 10^4 rows (2 and 10 classes,
    regression; benchmarks/compare_sizes.py's data): 10 classes 0.339 / 0.349 / 0.341, 2
    classes 0.806 / 0.823 / 0.827, regression R^2 0.944 / 0.938 / 0.921. For regression
    above HELDOUT_MIN_ROWS rows that scaled choice is then checked on held-out rows
    (rbcd.solvers._heldout: the best of a few multiples of it; ``info["heldout_scores"]``).

    ``extra`` (rbcd.solvers._linear): the leave-one-out chooses the weight c among its
    candidates with the penalty (``info["extra_weight"]``); the held-out check runs only
    where the choice is c = 0.

    ``verbose``: passed to the final solve at the chosen penalty (its CG lines at 2).
    """
    from ._linear import ExtraBlock, joint_residual
    from . import _direct, _heldout

    n, k = Y.shape
    s = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    cy = pow2_scale(Y)
    if n <= _direct.LOO_MAX_ROWS:
        alphas = _direct.AUTO_ALPHAS_PER_ROW * float(s.sum())
        cs = 1.0 if sample_weight is None else pow2_scale(sample_weight)
        system = _RidgeSystem(Z, Y / cy, None if sample_weight is None else s / cs,
                              fit_intercept, n_threads, columns)
        c, a, W, scores, term = _choose_extra(system, columns, alphas / cs, classification,
                                              extra, True)
        chosen = {} if extra is None else {"extra_weight": c}
        if method == "cg":                   # the choice, solved as asked
            coef, intercept, n_iter, info = solve_ridge(
                Z, Y, sample_weight, a * cs, fit_intercept, tol, max_iter, preconditioner,
                n_threads, columns, verbose, return_info=True, method="cg",
                extra=None if extra is None else ExtraBlock(extra.M, (c,)))
            info.update(alpha=a * cs, alphas=alphas, scores=scores, selection="leave-one-out",
                        **chosen)
            return coef, intercept, n_iter, info
        D = system.shape[1]
        V = W[D:] if c > 0.0 else None
        W = W[:D]
        if V is None:
            residual = system.relative_residual(W, np.full(k, a))
        else:
            residual = joint_residual(system, W, V, np.sqrt(c) * term[0], a)
        # with a term, the coefficients of the unit block M: sqrt(c) times those of sqrt(c) M
        coef = transposed(W, cy, None if V is None else np.sqrt(c) * V)
        intercept = (system.ybar - np.einsum("kj,j->k", W.T, system.zbar)) * cy \
            if system.zbar is not None else np.zeros(k)
        if V is not None:
            if system.zbar is not None:
                intercept -= np.sqrt(c) * np.einsum("kj,j->k", V.T, term[1]) * cy
        info = dict(converged=residual <= tol, residual=residual,
                    stop=np.array(["direct"] * k), method="dual", alpha=a * cs,
                    alphas=alphas, scores=scores, selection="leave-one-out", **chosen)
        return coef, intercept, np.ones(k, dtype=np.int64), info
    # above LOO_MAX_ROWS: leave-one-out on a fixed sample of LOO_MAX_ROWS rows chooses the
    # penalty per unit of weight, applied to all rows
    rows = _direct.loo_rows(n)
    _direct.check_loo_sample_weight(s[rows], n)
    Zc = Z.tocsr() if sp.issparse(Z) else np.asarray(Z)
    Z_sub, sub_columns = _sample_rows(Zc, columns, rows, n_threads)
    s_sub = s[rows]
    cs = pow2_scale(s_sub) if sample_weight is not None else 1.0
    system = _RidgeSystem(Z_sub, Y[rows] / cy, None if sample_weight is None else s_sub / cs,
                          fit_intercept, n_threads, sub_columns)
    per_row = _direct.AUTO_ALPHAS_PER_ROW
    c, a_sub, _, scores, _ = _choose_extra(
        system, sub_columns, per_row * float(s_sub.sum()) / cs, classification,
        None if extra is None else ExtraBlock(extra.M[rows], extra.weights), False)
    # scaled to all rows by sqrt(total weight / sample weight): SAMPLE_SCALING
    a = float(a_sub * cs * np.sqrt(s.sum() / s_sub.sum()))
    selection = (f"leave-one-out on {rows.shape[0]} of {n} rows, scaled by "
                 f"sqrt(total / sample weight)")
    heldout = None
    if not classification and n > _heldout.HELDOUT_MIN_ROWS and c == 0.0:
        # regression: that guess checked on held-out rows (rbcd.solvers._heldout)
        h_rows, held = _heldout.heldout_rows(n)
        if h_rows.shape[0] == n:
            Zh, Yh, sh, h_columns = Zc, Y, s, columns
        else:
            Zh, h_columns = _sample_rows(Zc, columns, h_rows, n_threads)
            Yh, sh = Y[h_rows], s[h_rows]
        a, heldout = _heldout.heldout_choice(Zh, Yh, sh, held, a, float(s.sum()),
                                             fit_intercept, n_threads, h_columns)
        if heldout is not None:
            selection += (f", then the best of {heldout.shape[0]} multiples on "
                          f"{held.shape[0]} held-out of {h_rows.shape[0]} rows")
    coef, intercept, n_iter, info = solve_ridge(
        Z, Y, sample_weight, a, fit_intercept, tol, max_iter, preconditioner, n_threads,
        columns, verbose, return_info=True, method=method,
        extra=None if extra is None else ExtraBlock(extra.M, (c,)))
    info.update(alpha=a, alphas=per_row * float(s.sum()), scores=scores,
                selection=selection, heldout_scores=heldout)
    return coef, intercept, n_iter, info


#: rows per block of subtract_outer
OUTER_BLOCK = 8192


def subtract_outer(Q, z, v, scale=1.0):
    """Q -= scale * outer(z, v) in place, Q (D, k) C-contiguous, by blocks of OUTER_BLOCK
    rows: the whole outer product would be a (D, k) temporary, as large as Q, whose fresh
    pages cost more than the subtraction (D in the millions on a few hundred rows with
    many grids; the primal Gram matrix's D x D)."""
    for start in range(0, Q.shape[0], OUTER_BLOCK):
        stop = start + OUTER_BLOCK
        Q[start:stop] -= scale * np.outer(z[start:stop], v)


def transposed(W, scale=1.0, extra=None):
    """C-contiguous (k, D [+ d]) = scale * [W.T, extra.T] for W (D, k) (and extra (d, k)),
    copied by blocks of OUTER_BLOCK rows of W: a (D, k) -> (k, D) copy in one go reads W
    with a stride of k doubles across all of it, twice as slow where D is in the millions."""
    D, k = W.shape
    d = 0 if extra is None else extra.shape[0]
    out = np.empty((k, D + d))
    for start in range(0, D, OUTER_BLOCK):
        stop = min(start + OUTER_BLOCK, D)
        np.multiply(W[start:stop].T, scale, out=out[:, start:stop])
    if d:
        np.multiply(extra.T, scale, out=out[:, D:])
    return out


def constant_columns(diag, colsq, n_rows, fit_intercept):
    """The numerically constant columns, as an index array: with an intercept, a column
    whose centred square sum ``diag`` is within the rounding of its raw square sum
    ``colsq`` (diag <= n_rows eps colsq, colsq > 0) has no resolvable variation, and the
    implicit centring (Z p - zbar . p, Z^T r - zbar sum r) would return only rounding noise
    for it. Its centred column is taken as exactly 0, as explicit centring gives for a
    constant column: w_j = 0 (scikit-learn's Ridge). Without an intercept: none. (rbcd.dask's
    CG applies the same rule to its partition-summed statistics.)"""
    if not fit_intercept:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero((diag <= n_rows * np.finfo(np.float64).eps * colsq) & (colsq > 0))


def stopping_scale(bnorm, shared_scale):
    """The scale each target's residual is held to: ||b_k||, or with ``shared_scale``
    (classification, :func:`_cg_iterate`) the largest ||b_j|| for every target. A target
    stops when ||r_k|| <= tol scale_k, and its reported residual is ||r_k|| / scale_k."""
    return np.full(bnorm.shape[0], bnorm.max(initial=0.0)) if shared_scale else bnorm


class _RidgeSystem:
    """The centred, weighted ridge system of one fit (module docstring), without Z^T Z:

    ``op`` the products with Z; ``s`` the weights (ones without), ``S`` their sum;
    ``zbar`` the weighted column means (None without intercept), ``ybar`` the targets'
    (zeros without); ``sY`` = S Yc; ``B`` = Zc^T S Yc, the right-hand sides; ``diag`` the
    diagonal of Zc^T S Zc; ``flat`` the numerically constant columns, whose centred column
    is taken as exactly 0 (w_j = 0, as scikit-learn's Ridge with explicit centring).
    """

    def __init__(self, Z, Y, sample_weight, fit_intercept, n_threads, columns):
        n, D = Z.shape
        k = Y.shape[1]
        self.shape = (n, D)
        self.op = op = _Products(Z, n_threads, columns=columns)
        self.weighted = sample_weight is not None
        self.s = s = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        self.S = S = float(s.sum())
        colsum, colsq = op.col_stats(s)
        if fit_intercept:
            self.zbar = zbar = colsum / S                       # weighted column means
            self.ybar = np.einsum("i,ik->k", s, Y) / S        # not BLAS (see serial_dot)
            Yc = Y - self.ybar
            diag = colsq - S * zbar * zbar                      # diag(Zc^T S Zc)
        else:
            self.zbar = None
            self.ybar = np.zeros(k)
            Yc = Y
            diag = colsq
        diag = np.maximum(diag, 0.0)                            # rounding can make it < 0
        self.flat = constant_columns(diag, colsq, n, fit_intercept)
        if self.flat.size:
            diag[self.flat] = 0.0
        self.diag = np.ascontiguousarray(diag)
        self.Yc = Yc
        self.sY = s[:, None] * Yc
        self._B = None

    @property
    def B(self):
        """Zc^T S Yc (D, k), the right-hand sides: a pass over Z, made on first use (the
        dual forms read the targets themselves; a leave-one-out sample never needs it)."""
        if self._B is None:
            B = self.op.tdot(self.sY)                           # Zc^T S Yc
            if self.zbar is not None:
                subtract_outer(B, self.zbar, self.sY.sum(axis=0))
            if self.flat.size:
                B[self.flat] = 0.0
            self._B = B
        return self._B

    def ztimes(self, P):
        """Zc @ P, (D, m) -> (n, m)."""
        T = self.op.dot(P)
        if self.zbar is not None:
            # zbar . P by einsum, not BLAS: a BLAS gemv here would wake the BLAS thread
            # team every iteration next to our OpenMP regions
            T -= np.einsum("j,jk->k", self.zbar, P)
        return T

    def ztimes_t(self, U):
        """Zc^T @ U, (n, m) -> (D, m), with the constant columns' entries 0."""
        Q = self.op.tdot(U)
        if self.zbar is not None:
            subtract_outer(Q, self.zbar, U.sum(axis=0))
        if self.flat.size:
            Q[self.flat] = 0.0
        return Q

    def relative_residual(self, W, alpha):
        """||B - (Zc^T S Zc + alpha) W|| / ||B|| per target (0 where B = 0)."""
        T = self.ztimes(W)
        if self.weighted:
            T *= self.s[:, None]
        R = self.B - self.ztimes_t(T) - W * alpha[None, :]
        bnorm = np.linalg.norm(self.B, axis=0)
        rnorm = np.linalg.norm(R, axis=0)
        return np.where(bnorm > 0, rnorm / np.where(bnorm > 0, bnorm, 1.0), 0.0)


def _cg_iterate(system, alpha, tol, max_iter, preconditioner, columns, verbose,
                shared_scale=False):
    """The block PCG loop on ``system`` (a _RidgeSystem): returns (W (D, k), n_iter, info).

    A target stops when ||r_k|| <= tol ||b_k||; with ``shared_scale`` (classification: the
    one-vs-rest scores of all classes are compared with each other, on one scale) when
    ||r_k|| <= tol max_j ||b_j||. A rare class's right-hand side is small (its centred
    -1/+1 target is large on its few rows only): held to its own norm it took 135 CG
    iterations against 26-40 for the other classes on a 7-class set of 43,500 rows, for
    decisions that the shared scale already fixes."""
    op, s, zbar, flat, diag = system.op, system.s, system.zbar, system.flat, system.diag
    n, D = system.shape
    B = system.B
    k = B.shape[1]
    weighted = system.weighted
    zb = zbar if zbar is not None else np.zeros(0)
    fit_intercept = zbar is not None

    def apply_A(Pa, a):
        # Q = Zc^T S Zc Pa + alpha Pa, Zc = Z - 1 zbar^T applied implicitly (never formed);
        # also returns the block sums of Pa * Q (for p^T A p)
        T = system.ztimes(Pa)
        if weighted:
            T *= s[:, None]
        Q = op.tdot(T)
        # 1^T S Zc Pa, zero in exact arithmetic; kept so that A stays exactly symmetric
        tsum = T.sum(axis=0) if zbar is not None else np.zeros(Pa.shape[1])
        partial = np.empty((n_blocks, Pa.shape[1]))
        _sparse.cg_operator_tail(Q, Pa, zb, tsum, np.ascontiguousarray(a), zbar is not None,
                                 partial, vec_threads)
        if flat.size:
            Q[flat] = 0.0          # constant columns: Zc e_j = 0 (Pa is 0 there: no change
                                   # to the block sums of Pa * Q)
        return Q, partial.sum(axis=0)

    use_diag = preconditioner == "jacobi"
    if max_iter is None:
        max_iter = default_max_iter(D)
    n_blocks = max(1, -(-D // _sparse.CG_BLOCK))
    # the vector updates stream their arrays: a thread per _VECTOR_PER_THREAD entries
    vec_threads = max(1, min(op.n_threads, int(D * k // _VECTOR_PER_THREAD)))
    X = np.zeros((D, k))
    R = np.ascontiguousarray(B)
    bnorm = np.linalg.norm(B, axis=0)
    scale = stopping_scale(bnorm, shared_scale)
    thresh = tol * scale
    proj = _grid_projection(op, columns, fit_intercept) if use_diag else None
    if use_diag:
        # M^-1 (Jacobi) once for the solve: the kernels multiply by it (a division per
        # entry and iteration before, the same quotients); one column when every target
        # has the same alpha
        same = alpha.size > 0 and bool(np.all(alpha == alpha[0]))
        d = diag[:, None] + (alpha[:1] if same else alpha)[None, :]
        minv = np.ascontiguousarray(np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 1.0))
        del d
        P = R * minv                                    # M^-1 r
        if proj is not None:
            proj(P)                                     # z = Proj M^-1 r
    else:
        minv = np.empty((0, k))                         # none
        P = R.copy()
    if flat.size:
        P[flat] = 0.0
    rz = np.einsum("ij,ij->j", R, P)
    n_iter = np.zeros(k, dtype=np.int64)
    done = bnorm <= thresh                              # b = 0: the solution is w = 0
    rnorm = bnorm.copy()
    breakdown = np.zeros(k, dtype=bool)
    # the projected preconditioned residuals of the active columns, in one buffer for the
    # solve (a fresh D x k array every iteration cost its page faults each time)
    z_buf = np.empty(D * k) if proj is not None else None
    for it in range(1, max_iter + 1):
        act = np.flatnonzero(~done).astype(np.int64)
        if act.size == 0:
            break
        Pa = P if act.size == k else np.ascontiguousarray(P[:, act])
        Q, pq = apply_A(Pa, alpha[act])
        # breakdown: p^T A p <= 0 (a zero direction, or a null direction of a singular
        # system with alpha = 0), or not finite (a non-finite direction must not reach X)
        ok = np.isfinite(pq) & (pq > 0)
        step = np.where(ok, rz[act] / np.where(ok, pq, 1.0), 0.0)
        if not ok.all():
            Pa = Pa if Pa is not P else P.copy()
            Pa[:, ~ok] = 0.0                          # that column's X and R stay as they are
            Q[:, ~ok] = 0.0
        part_rr = np.empty((n_blocks, act.size))
        part_rz = np.empty((n_blocks, act.size))
        # X += step P; R -= step Q (active columns); block sums of r.r and r.M^-1 r; with
        # the projection, Zr = M^-1 R of the active columns too
        Zr = z_buf[:D * act.size].reshape(D, act.size) if proj is not None else None
        _sparse.cg_step(X, R, Pa, Q, act, step, minv, part_rr, part_rz, vec_threads, Zr)
        del Q
        n_iter[act] = it
        rn = np.sqrt(part_rr.sum(axis=0))
        rnorm[act] = rn
        if proj is not None:
            # z = Proj M^-1 r (and 0 on the constant columns), and rz = r . z from it: in
            # exact arithmetic r . Proj M^-1 r = r . M^-1 r (Proj is symmetric and r lies
            # in its range), but rounding moves r off that range along the null directions,
            # which CG never reduces; r . M^-1 r then counts them while P lacks them, and
            # near the attainable residual (tol 0 or 1e-15) the iteration diverged to NaN.
            # r . z counts only what P can reduce (as the device CG does: rbcd.cuda.cg)
            proj(Zr)
            if flat.size:
                Zr[flat] = 0.0
            _sparse.cg_dot(R, act, Zr, part_rz, vec_threads)
        rz_new = part_rz.sum(axis=0)
        # a column stops when its residual is small (a NaN one counts as not small), or on
        # breakdown
        stop = (rn <= thresh[act]) | ~ok | ~np.isfinite(rn)
        beta = np.where(rz[act] > 0, rz_new / np.where(rz[act] > 0, rz[act], 1.0), 0.0)
        if proj is not None:
            # P = z + beta P (active columns): both in the projection's range
            _sparse.cg_direction(P, R, act, beta, minv, vec_threads, Zr)
        else:
            # P = M^-1 R + beta P (active columns)
            _sparse.cg_direction(P, R, act, beta, minv, vec_threads)
        if flat.size:
            P[flat] = 0.0                               # stays in the constant columns' complement
        rz[act] = rz_new
        done[act[stop]] = True
        breakdown[act[~ok | ~np.isfinite(rn)]] = True
        if verbose >= 2:
            print(f"[RidgeCG] iteration {it}: max relative residual "
                  f"{np.max(rn / np.where(bnorm[act] > 0, bnorm[act], 1.0)):.3e}")
    unconverged = ~(rnorm <= thresh)                    # a NaN residual is not converged
    relres = np.where(scale > 0, rnorm / np.where(scale > 0, scale, 1.0), 0.0)
    stop_reason = np.where(~unconverged, "tol", np.where(breakdown, "breakdown", "max_iter"))
    if np.any(unconverged):
        _warn_unconverged(unconverged, relres, stop_reason, n_iter, tol, max_iter)
    return X, n_iter, dict(converged=~unconverged, residual=relres, stop=stop_reason)


#: a relative residual below this is rounding noise (about 1e4 float64 epsilons): a tol
#: under it cannot be met in a meaningful sense, and the warning says so
ROUNDING_RESIDUAL = 1e-12


def _warn_unconverged(unconverged, relres, stop_reason, n_iter, tol, max_iter):
    """The ConvergenceWarning of a CG fit that left targets above ``tol``."""
    k = unconverged.shape[0]
    worst = int(np.argmax(np.where(unconverged, relres, -1.0)))
    n_bad = int(unconverged.sum())
    if stop_reason[worst] == "breakdown":
        why = (f"stopped after {int(n_iter[worst])} iterations because the search "
               f"direction vanished (p^T A p <= 0): the relative residual "
               f"{relres[worst]:.3e} cannot decrease further in float64, and tol={tol:g} "
               f"asks for less. Use a tol above the attainable residual")
    elif relres[worst] < ROUNDING_RESIDUAL:
        # CG's recurrence keeps shrinking its residual far past what the solution's true
        # residual can reach in float64: more iterations are not the cure, a reachable tol is
        why = (f"did not converge in max_iter={max_iter} iterations: relative residual "
               f"{relres[worst]:.3e} > tol={tol:g}, which is below float64's rounding. "
               f"Use a tol of at least {ROUNDING_RESIDUAL:g}")
    else:
        why = (f"did not converge in max_iter={max_iter} iterations: relative residual "
               f"{relres[worst]:.3e} > tol={tol:g}. Increase max_iter or alpha")
    warn_user(
        f"RidgeCG {why} ({n_bad} of {k} targets not converged).",
        ConvergenceWarning,
    )


# ----------------------------------------------------------------------------------------
# estimators


_CG_CONSTRAINTS = {
    "alpha": [RealInterval(0, None, closed="left"), "array-like", StrOptions({"auto"})],
    "solver": [StrOptions({"cg", "direct", "auto"})],
    "fit_intercept": ["boolean"],
    "tol": TOL,
    "max_iter": [IntInterval(1, None, closed="left"), None],
    "preconditioner": [StrOptions({"jacobi"}), None],
    "n_jobs": N_JOBS,
    "verbose": VERBOSE,
    "device": [StrOptions({"cpu", "cuda"})],  # "cuda": rbcd.cuda (docs/gpu.md)
}


class _RidgeCGBase(ChecksummedState, BaseEstimator):
    _classification = False   # alpha="auto" scores the targets' squared error
    def _validate_X(self, X, reset):
        kwargs = dict(accept_sparse=["csr", "csc", "coo"], dtype=[np.float64, np.float32])
        if not reset:
            return check_predict_csr(self, X, **kwargs)
        return validate_data(self, check_sparse_structure(X), reset=reset, **kwargs)

    def _solve(self, Z, Y, sample_weight, columns=None, extra=None):
        """Solve and set n_iter_, converged_ and residual_; returns (coef, intercept).

        ``extra`` (private: rbcd.RBClassifier / RBRegressor's ``linear``): a
        rbcd.solvers._linear.ExtraBlock, the linear term beside Z. Its chosen weight is
        ``extra_weight_``; where it is > 0 the coefficients are those of the design
        [Z, M] and ``n_features_in_`` is D + d (the model predicts from [Z, M])."""
        if not np.isfinite(float(self.tol)):
            raise ValueError(f"tol must be finite, got {self.tol!r}")
        if not (isinstance(self.alpha, str) and self.alpha == "auto"):
            _check_alpha(self.alpha, Y.shape[1])
        if columns is not None:
            columns = columns_from(Z, columns, self.n_jobs)
        n_threads = effective_n_threads(self.n_jobs)
        # the solver's own arrays (CG's iterates, the transposed copy's D + 1 pointers):
        # refused up front when they cannot fit (issue 31: hashed n_features of 2**40)
        n_extra = 0 if extra is None else extra.M.shape[1]
        check_solver_memory(type(self).__name__, "cg", Z.shape[0], Z.shape[1],
                            Y.shape[1] + n_extra)
        s = _check_sample_weight(sample_weight, Z.shape[0])
        verbose = int(self.verbose)
        t0 = time.perf_counter()
        if sp.issparse(Z) and n_threads > 1 and Z.nnz >= 2 * _WORK_PER_THREAD:
            # our products run a thread team: keep BLAS (zbar @ P) from adding its own
            # (below this size the products run on one thread, and threadpoolctl's
            # library inspection would dominate small fits)
            with limit_blas(1):
                out = solve_ridge(Z, Y, s, self.alpha, self.fit_intercept, self.tol,
                                  self.max_iter, self.preconditioner, n_threads, columns,
                                  verbose=verbose, return_info=True, method=self.solver,
                                  classification=self._classification, extra=extra)
        else:
            out = solve_ridge(Z, Y, s, self.alpha, self.fit_intercept, self.tol,
                              self.max_iter, self.preconditioner, n_threads, columns,
                              verbose=verbose, return_info=True, method=self.solver,
                              classification=self._classification, extra=extra)
        coef, intercept, n_iter, info = out
        if verbose:
            k = Y.shape[1]
            worst = int(np.argmax(info["residual"]))
            ok = info["converged"]
            verdict = ("converged" if np.all(ok) else
                       f"NOT converged ({int((~ok).sum())} of {k} targets; "
                       f"{info['stop'][worst]})")
            how = (f"{int(np.max(n_iter, initial=0))} iteration(s)" if info["method"] == "cg"
                   else f"{info['method']} direct solve")
            chosen = (f", alpha {float(info['alpha']):.4g} chosen by {info.get('selection', 'the data')}"
                      if "alpha" in info else "")
            print(f"[RidgeCG] {type(self).__name__}: {how}, relative residual {info['residual'][worst]:.3e}"
                  f"{f' (worst of {k} targets)' if k > 1 else ''} (tol {float(self.tol):.1e}), "
                  f"{verdict}{chosen}, {n_threads} thread(s), {time.perf_counter() - t0:.3f}s")
        self.n_iter_ = n_iter
        self.solver_ = info["method"]
        if "alpha" in info:
            self.alpha_ = float(info["alpha"])
        else:
            a = np.asarray(self.alpha, dtype=np.float64)
            self.alpha_ = float(a) if a.ndim == 0 else a
        self.converged_ = bool(np.all(info["converged"]))
        self.residual_ = info["residual"]
        if extra is not None:
            self.extra_weight_ = float(info.get("extra_weight", 0.0))
            if self.extra_weight_ > 0.0:
                self.n_features_in_ = Z.shape[1] + n_extra
        return coef, intercept

    def to_cpu(self):
        """This estimator with device="cpu" (the coefficients always live on the host)."""
        from ..cuda.estimators import ridge_to_cpu
        return ridge_to_cpu(self)

    def _decision(self, X):
        check_is_fitted(self)
        if self.__dict__.get("_cuda_fitted"):  # fitted with device="cuda"
            from ..cuda.estimators import ridge_decision
            return ridge_decision(self, X)
        X = self._validate_X(X, reset=False)
        if sp.issparse(self.coef_):   # multi_class="ovo": the pairs' sparse coefficients
            out = X @ self.coef_.T
            out = out.toarray() if sp.issparse(out) else np.asarray(out)
            return out + self.intercept_
        coef = np.asarray(self.coef_)
        if sp.issparse(X) and np.result_type(X.dtype, coef.dtype) == np.float64:
            out = sparse_times_coef(X, coef, self.n_jobs)
        elif sp.issparse(X):      # float32 in, float32 out: scipy's float32 product
            out = X @ coef.T
        else:
            out = X @ coef.T.astype(X.dtype, copy=False)
        return np.asarray(out) + self.intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def sparse_times_coef(X, coef, n_jobs):
    """X @ coef.T for sparse X (n, D) and coef (D,) or (k, D), in float64: X's CSR rows
    on n_jobs threads (rbcd.solvers._sparse.csr_matmat, one row per thread, its entries
    summed in their stored order from 0, as scipy's product sums them: the same bits;
    scipy's product runs on one thread). For a float64 result only (float32 X and float32
    coefficients: scipy's float32 product). Shape (n,) for 1-D coef, else (n, k)."""
    X = X.tocsr()
    W = np.atleast_2d(coef)                                                  # (k, D)
    if X.shape[1] != W.shape[1]:
        raise ValueError(f"X has {X.shape[1]} columns, the coefficients {W.shape[1]}")
    idx = np.int64 if max(X.indptr.dtype.itemsize, X.indices.dtype.itemsize) > 4 else np.int32
    data = X.data if X.data.dtype in (np.float32, np.float64) else X.data.astype(np.float64)
    k = W.shape[0]
    indices = X.indices
    if k > 1 and X.nnz * _GATHER_PER_COLUMN < W.shape[1]:
        # a few rows (a prediction of one row, say): only the columns they use, remapped,
        # instead of the (D, k) copy of every coefficient. Each row still multiplies its
        # entries, in their stored order, by the same coefficients: the same bits.
        used, indices = np.unique(indices, return_inverse=True)
        V = np.ascontiguousarray(W[:, used].T, dtype=np.float64)            # (used, k)
    else:
        V = np.ascontiguousarray(W.T, dtype=np.float64)                     # (D, k)
    out = np.empty((X.shape[0], k))
    work = X.nnz * k
    # below two threads' work the thread count is 1 whatever the machine's load: not probed
    threads = (1 if work < 2 * _WORK_PER_THREAD
               else max(1, min(effective_n_threads(n_jobs), int(work // _WORK_PER_THREAD))))
    _sparse.csr_matmat(X.indptr.astype(idx, copy=False), indices.astype(idx, copy=False),
                       data, False, 0.0, V, out, threads)
    return out[:, 0] if np.ndim(coef) == 1 else out


class RidgeCG(RegressorMixin, _RidgeCGBase):
    """Ridge regression solved by block preconditioned conjugate gradient.

    Minimizes ``sum_i s_i (y_i - z_i . w - b)^2 + alpha ||w||^2`` (scikit-learn's
    Ridge), for all targets at once, without forming Z^T Z and without densifying a
    sparse Z (the intercept's centring happens inside the operator).

    Parameters
    ----------
    alpha : float >= 0, array of one value per target, or "auto"
        "auto": chosen from the data among 1e-6 .. 10 per unit of training weight, by
        exact leave-one-out error from one eigendecomposition up to 1,000 rows (RidgeCV's
        method), above on a fixed sample of 1,000 rows, scaled; for regression above
        5,000 rows that choice is then checked on a held-out fifth of up to 20,000 rows
        (rbcd.solvers.cg._solve_auto_alpha, rbcd.solvers._heldout); RidgeCGClassifier
        scores the accuracy of its decisions. The choice is ``alpha_``.
    fit_intercept : bool
    tol : float, stop a target when ||residual|| <= tol * ||right-hand side||
    max_iter : int or None; None means ``min(10 * D, 10_000)``
    preconditioner : "jacobi" or None. Jacobi is the diagonal of the centred,
        weighted operator (for random binning features: bin counts / R + alpha). It
        removes bad column scaling. On random binning training data given with its grid
        structure (``fit(..., columns=)``; RBRegressor / RBClassifier do this) it is
        projected off the grid indicator null directions, and then needed fewer
        iterations than plain CG at every tolerance when D < N (demo: 22 vs 55 at
        tol 1e-2, 354 vs 535 at 1e-8); without the structure it helps to loose
        tolerances (tol >= 1e-4) and costs iterations to tight ones. With more bins
        than rows it helps or ties up to a few bins per row and can lose far beyond
        (module docstring). Not used where a target's alpha is 0: plain CG from zero
        reaches the minimum-norm solution (that of the direct solves and scikit-learn's
        Ridge), a preconditioned one another least-squares solution.
    n_jobs : int or None, threads for the sparse products. None: the OpenMP default less
        the cores busy with other work when each fit or prediction starts (docs/internals.md,
        "Threads on a busy machine"); -1: all cores.
    verbose : int, default 0. Printed to stdout (scikit-learn's levels): 1, one summary
        line per fit (iterations, the final relative residual, converged or not, threads,
        time); 2 and above, also a line per CG iteration.
    solver : "cg", "direct" or "auto", default "cg"
        "cg": block preconditioned conjugate gradient. "direct": one Cholesky
        factorization of the dual (n x n, Z Z^T) or the primal (D x D, Z^T Z) Gram
        matrix, the smaller, for every target at once. "auto": the cheapest of the three
        by a fixed cost model (rbcd.solvers._direct.plan), direct forms only for random
        binning training data given with its grid structure (``fit(..., columns=)``).
        The solution is the same up to the solver's accuracy: CG's ``tol``, or the
        rounding of the factorization.
    device : "cpu" or "cuda", default "cpu". "cuda": the block PCG on one GPU through
        CuPy (rbcd.cuda; the same objective, agreeing to the tolerance); X may then also be
        the ``rbcd.cuda.GridLayout`` of a device binning (or be passed as ``columns``).
        Coefficients are numpy arrays either way; ``to_cpu()`` gives the CPU estimator.

    Attributes
    ----------
    coef_ : (D,) for 1-D y, (n_targets, D) for 2-D y; float32 for float32 input
    intercept_ : float or (n_targets,)
    n_iter_ : (n_targets,) CG iterations per target (1 for a direct solve: the factorization)
    solver_ : str, the form used: "cg", "dual" or "primal"
    alpha_ : float (or the per-target array given), the penalty used
    converged_ : bool, every target reached ``tol``
    residual_ : (n_targets,) final relative residual ||r|| / ||b|| per target
    n_features_in_ : int
    """

    _parameter_constraints = dict(_CG_CONSTRAINTS)

    def __init__(self, alpha=1.0, fit_intercept=True, tol=1e-6, max_iter=None,
                 preconditioner="jacobi", n_jobs=None, verbose=0, solver="cg", device="cpu"):
        self.alpha = alpha
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.preconditioner = preconditioner
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.device = device

    @fit_context
    def fit(self, X, y, sample_weight=None, columns=None):
        """Fit on X (n, D) dense or sparse, y (n,) or (n, n_targets).

        ``columns``: optional, the grid structure of X: the RBColumns returned with X by
        ``RandomBinning.fit_transform(X0, return_columns=True)``, or the fitted exact-mode
        ``rbcd.RandomBinning`` that produced X (the structure is rebuilt from X). It lets
        the Jacobi preconditioner project out the known null directions of random
        binning training data (module docstring) and saves the transposed copy of X; the
        solution does not change. A structure that is not X's is a ValueError.
        """
        if self.device == "cuda":  # X: any matrix, or a rbcd.cuda.GridLayout (docs/gpu.md)
            from ..cuda.estimators import ridge_fit
            return ridge_fit(self, X, y, sample_weight, columns)
        X, y = validate_data(
            self, check_sparse_structure(X), y, accept_sparse=["csr", "csc", "coo"],
            dtype=[np.float64, np.float32], multi_output=True, y_numeric=True,
        )
        y = check_regression_target(y)  # object y with None / inf: named, not recursed on
        return self._fit_labels(X, y, sample_weight, columns)

    def _fit_labels(self, X, y, sample_weight, columns, extra=None):
        """fit after the checks of X and y (rbcd.RBRegressor calls it with the features it
        made and the targets it checked). ``extra``: the linear term (_RidgeCGBase._solve)."""
        Y = y.reshape(y.shape[0], -1)
        coef, intercept = self._solve(X, Y, sample_weight, columns, extra)
        out_dtype = X.dtype
        if y.ndim == 1:
            self.coef_ = coef[0].astype(out_dtype)
            self.intercept_ = out_dtype.type(intercept[0]) if self.fit_intercept else 0.0
        else:
            self.coef_ = coef.astype(out_dtype)
            self.intercept_ = intercept.astype(out_dtype) if self.fit_intercept else np.zeros(Y.shape[1], dtype=out_dtype)
        return self

    def predict(self, X):
        """Z @ coef_.T + intercept_."""
        return self._decision(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


def _pair_problem(Zp, grid_ptr, n_jobs):
    """A one-vs-one pair's rows of Z as the sub-problem fits them: (Zp on the columns its
    rows touch, those columns' indices, the grid structure of the result or None).

    A column no row of the pair touches has coefficient 0 in the pair's solution (which
    lies in the row space of its centred rows), so the fit drops such columns: the pair's
    Gram matrices, CG vectors and column structure then scale with the pair's entries,
    not with the D of all the classes. Dense rows are kept whole (``used`` all columns).
    """
    D = Zp.shape[1]
    if not sp.issparse(Zp):
        return Zp, np.arange(D), None
    touched = np.bincount(Zp.indices, minlength=D) > 0
    used = np.flatnonzero(touched)
    new_index = np.cumsum(touched, dtype=Zp.indices.dtype) - 1   # old column -> kept one
    indices = new_index[Zp.indices]
    Zc = sp.csr_matrix((Zp.data, indices, Zp.indptr), shape=(Zp.shape[0], used.shape[0]))
    if grid_ptr is None:
        return Zc, used, None
    from ._ovo import pair_columns

    # the grids' boundaries among the kept columns (grids are runs of columns)
    gp = np.searchsorted(used, grid_ptr).astype(np.int64)
    return Zc, used, pair_columns(Zc, gp)


class RidgeCGClassifier(ClassifierMixin, _RidgeCGBase):
    """Ridge classification by block preconditioned CG (like RidgeClassifier).

    Targets are -1/+1 one-vs-rest indicators, all classes solved as one block of
    right-hand sides; two classes give a single column. CG's ``tol`` is relative to the
    largest right-hand side of the classes (their scores share one scale: a rare class is
    not solved to a tighter absolute accuracy than the others), and so is ``residual_``.

    Parameters
    ----------
    alpha : float >= 0, array, or "auto", default 1.0
        The penalty, in Ridge's units (sum of squares + alpha ||w||^2). With "ovr": one
        value, or one per right-hand side (one per class; a single one for two classes).
        With "ovo": a number keeps the units of the whole training set, each pair solving
        with alpha times its rows' share of the sample weight (the same penalty per unit
        of weight); an array gives each pair of classes its own penalty as is. "auto": as
        in RidgeCG, scored by the accuracy of the decisions (with "ovo", chosen for each
        pair from its rows). The penalty used is ``alpha_``.
    fit_intercept : bool, default True
    tol : float, default 1e-6, stop when ||residual|| <= tol * ||right-hand side||, the
        largest right-hand side of the classes (above)
    max_iter : int or None; None means ``min(10 * D, 10_000)``
    preconditioner : "jacobi" or None, default "jacobi"; as in RidgeCG
    class_weight : None, "balanced" or dict, default None
        Multiplies each row's sample_weight by its class's weight ("balanced": n_samples /
        (n_classes x the class's count)).
    n_jobs : int or None, threads for the sparse products. None: the OpenMP default less
        the cores busy with other work when each fit or prediction starts
        (docs/internals.md, "Threads on a busy machine"); -1: all cores.
    verbose : int, default 0; as in RidgeCG
    solver : "cg", "direct" or "auto", default "cg"; as in RidgeCG
    device : "cpu" or "cuda", default "cpu"; as in RidgeCG ("cuda" with "ovr" only)
    multi_class : "ovr" or "ovo", default "ovr"
        "ovr": the one-vs-rest block above. "ovo": one binary problem per pair of classes
        on that pair's rows and a vote (scikit-learn's OneVsOneClassifier over
        RidgeClassifier; rbcd.solvers._ovo); the same as "ovr" for two classes.

    Attributes
    ----------
    classes_ : ndarray (n_classes,), the class labels
    coef_ : (1, D) for two classes, else (n_classes, D); with "ovo" and more than two
        classes a scipy CSR matrix (n_pairs, D) of the pairs' coefficients
    pairs_ : (n_pairs, 2) the pairs' class numbers with "ovo" (None with "ovr")
    intercept_, n_iter_, solver_, alpha_, converged_, residual_ : as in RidgeCG (with
        "ovo" one entry per pair)
    n_features_in_ : int
    """

    _classification = True    # alpha="auto" scores the accuracy of the decisions

    _parameter_constraints = {
        **_CG_CONSTRAINTS,
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "multi_class": [StrOptions({"ovr", "ovo"})],
    }

    def __init__(self, alpha=1.0, fit_intercept=True, tol=1e-6, max_iter=None,
                 preconditioner="jacobi", class_weight=None, n_jobs=None, verbose=0,
                 solver="cg", device="cpu", multi_class="ovr"):
        self.multi_class = multi_class
        self.alpha = alpha
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.preconditioner = preconditioner
        self.class_weight = class_weight
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.device = device

    @fit_context
    def fit(self, X, y, sample_weight=None, columns=None):
        """Fit on X (n, D) dense or sparse and class labels y (n,).

        ``columns``: optional grid structure of X, as in ``RidgeCG.fit``; it speeds up the
        Jacobi preconditioner, same solution.
        """
        if self.device == "cuda":
            if self.multi_class != "ovr":
                raise ValueError(f"multi_class={self.multi_class!r} is fitted on the CPU "
                                 f"only; use device='cpu', or multi_class='ovr' with "
                                 f"device='cuda'")
            from ..cuda.estimators import ridge_fit
            return ridge_fit(self, X, y, sample_weight, columns, classifier=True)
        X, y = validate_data(
            self, check_sparse_structure(X), y, accept_sparse=["csr", "csc", "coo"],
            dtype=[np.float64, np.float32], multi_output=False,
        )
        check_classification_targets(y)
        self._fit_labels(X, y, sample_weight, columns)
        self.__dict__.pop("_ovo_train_scores", None)
        return self

    def _fit_labels(self, X, y, sample_weight, columns, extra=None):
        """fit after the checks of X and y (rbcd.RBClassifier calls it with the features
        it made and the labels it checked: the same fit without checking them twice).
        ``extra``: the linear term (_RidgeCGBase._solve)."""
        self.classes_, Y = one_vs_rest_targets(y)
        if self.classes_.shape[0] < 2:
            raise ValueError(
                f"RidgeCGClassifier needs at least 2 classes in y, got 1 class: {self.classes_[0].tolist()!r}"
            )
        self.pairs_ = None
        if self.multi_class == "ovo" and self.classes_.shape[0] > 2:
            return self._fit_ovo(X, y, sample_weight, columns, extra)
        s = _check_sample_weight(sample_weight, X.shape[0])
        if self.class_weight is not None:
            cw = compute_sample_weight(check_class_weight(self.class_weight), y)
            s = cw if s is None else s * cw
        coef, intercept = self._solve(X, Y, s, columns, extra)
        self.coef_ = coef.astype(X.dtype)
        self.intercept_ = intercept.astype(X.dtype) if self.fit_intercept else np.zeros(Y.shape[1], dtype=X.dtype)
        return self

    def _fit_ovo(self, X, y, sample_weight, columns, extra):
        """multi_class="ovo" with more than two classes (rbcd.solvers._ovo): one binary
        fit per pair of classes on the pair's rows, with this estimator's parameters (the
        grid structure of the pair's rows where ``columns`` gives one). coef_ is the CSR
        matrix (n_pairs, D) of the pairs' coefficients, intercept_, alpha_, n_iter_ and
        residual_ have one entry per pair, pairs_ lists them."""
        from ._ovo import ovo_pairs, pair_rows, pair_shares, stack_pair_coefs

        if extra is not None:
            raise ValueError("multi_class='ovo' fits no linear term: use linear=0, or "
                             "multi_class='ovr'")
        s = _check_sample_weight(sample_weight, X.shape[0])
        structure = grid_ptr = None
        if columns is not None:
            structure = columns_from(X, columns, self.n_jobs)
            grid_ptr = structure.grid_ptr
        Zr = sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X)
        index = np.searchsorted(self.classes_, y)
        params = self.get_params()
        params["multi_class"] = "ovr"
        # a class_weight dict: weighed over all the classes, each pair its rows' weights
        # (the pair's own fit would refuse a dict that names other classes)
        cw_rows = dict_class_weight_rows(self.class_weight, y)
        if cw_rows is not None:
            params["class_weight"] = None
        pairs = ovo_pairs(self.classes_.shape[0])
        per_pair = None            # alpha: one number, "auto", or one value per pair
        if not isinstance(self.alpha, str) and np.ndim(self.alpha) == 1:
            per_pair = np.asarray(self.alpha, dtype=np.float64)
            if per_pair.shape[0] != len(pairs):
                raise ValueError(f"alpha has {per_pair.shape[0]} values; with "
                                 f"multi_class='ovo' give one value, or one per pair of "
                                 f"classes ({len(pairs)})")
        elif not isinstance(self.alpha, str):
            # one number: in the whole training set's units, each pair its share of it
            # (rbcd.solvers._ovo.pair_shares)
            per_pair = float(np.asarray(self.alpha, dtype=np.float64)) * pair_shares(
                index, self.classes_.shape[0], s)
        for a, b in pairs:
            rows, _ = pair_rows(index, a, b)
            if s is not None and not s[rows].sum() > 0:
                raise ValueError(
                    f"multi_class='ovo': every row of classes {self.classes_[a]!r} and "
                    f"{self.classes_[b]!r} has sample weight 0, so their pair has no "
                    f"data: give those rows weight, or use multi_class='ovr'")
        fast, train = self._fit_pairs_dual(Zr, structure, index, s, per_pair)
        coefs, intercepts, alphas, n_iter, residual, methods = [], [], [], [], [], set()
        converged = True
        for p, (a, b) in enumerate(pairs):
            if fast[p] is not None:
                used, vals, b0, a_p, res = fast[p]
                coefs.append((used, vals))
                intercepts.append(b0)
                alphas.append(a_p)
                n_iter.append(1)
                residual.append(res)
                converged &= bool(res <= float(self.tol))
                methods.add("dual")
                continue
            rows, _ = pair_rows(index, a, b)
            if per_pair is not None:
                params["alpha"] = float(per_pair[p])
            sub = RidgeCGClassifier(**params)
            w = None if s is None else s[rows]
            if cw_rows is not None:
                w = cw_rows[rows] if w is None else w * cw_rows[rows]
            Zp, used, cols = _pair_problem(Zr[rows], grid_ptr, self.n_jobs)
            sub._fit_labels(Zp, y[rows], w, cols)
            coefs.append((used, np.asarray(sub.coef_[0], dtype=np.float64)))
            intercepts.append(float(np.asarray(sub.intercept_)[0]))
            alphas.append(float(sub.alpha_))
            n_iter.append(int(np.max(sub.n_iter_)))
            residual.append(float(np.max(sub.residual_)))
            converged &= bool(sub.converged_)
            methods.add(sub.solver_)
        self.pairs_ = np.array(pairs, dtype=np.int64)
        self.coef_ = stack_pair_coefs(coefs, X.shape[1], X.dtype)
        self.intercept_ = np.array(intercepts, dtype=X.dtype)
        self.alpha_ = np.array(alphas)
        self.n_iter_ = np.array(n_iter, dtype=np.int64)
        self.residual_ = np.array(residual)
        self.converged_ = converged
        self.solver_ = methods.pop() if len(methods) == 1 else "mixed"
        if train is not None and not np.isnan(train).any():
            # the training rows' pair decisions, for RBClassifier's calibration (taken off
            # by RBClassifier.fit and by fit: never part of the fitted state)
            self._ovo_train_scores = train
        return self

    def _fit_pairs_dual(self, Z, structure, index, s, per_pair):
        """The pairs that the direct dual form solves (rbcd.solvers._ovo.fit_pairs_dual,
        from one Gram matrix of all rows), as a list with None for the others: with
        solver "direct" (n_p <= D_p, as RidgeCG's "direct" decides) or "auto" (where the
        cost model of rbcd.solvers._direct.plan picks the dual form for the pair's n_p
        rows and D_p touched columns), a positive alpha or "auto" on at most LOO_MAX_ROWS
        rows, on random binning training data given with its grid structure, where the
        rows' Gram matrix fits MAX_GRAM_BYTES. n_p, D_p and the alpha per pair are what
        the pair's own RidgeCGClassifier would see."""
        from . import _direct
        from ._ovo import fit_pairs_dual, ovo_pairs, pair_rows, symmetric

        pairs = ovo_pairs(self.classes_.shape[0])
        none = ([None] * len(pairs), None)
        n = Z.shape[0]
        if (self.solver not in ("auto", "direct") or structure is None or not sp.issparse(Z)
                or 8.0 * n * n > _direct.MAX_GRAM_BYTES):
            return none
        auto = isinstance(self.alpha, str)
        alpha = per_pair                # one value per pair, or None with "auto"
        # the products and grid labels of Z with its structure (no targets: only Z Z^T)
        system = _RidgeSystem(Z, np.zeros((n, 1)), None, False,
                              effective_n_threads(self.n_jobs), structure)
        gp = _direct._grid_ptr(system, structure)
        if gp is None:              # not random binning training data: each pair apart
            return none
        R = gp.shape[0] - 1
        cw = None if self.class_weight is None else check_class_weight(self.class_weight)
        y_all = self.classes_[index]
        cw_rows = dict_class_weight_rows(cw, y_all)     # a dict: over all the classes

        def pair_weight(rows):
            w = np.ones(rows.shape[0]) if s is None else s[rows]
            if cw_rows is not None:
                return w * cw_rows[rows]
            return w if cw is None else w * compute_sample_weight(cw, y_all[rows])

        def eligible(p, rows):
            if auto and rows.shape[0] > _direct.LOO_MAX_ROWS:
                return False
            if not auto and not alpha[p] > 0:
                return False
            D_p = int(np.count_nonzero(np.bincount(Z[rows].indices, minlength=Z.shape[1])))
            if self.solver == "direct":
                return rows.shape[0] <= D_p
            return _direct.plan(rows.shape[0], D_p, R, 1, True) == "dual"

        chosen = [eligible(p, pair_rows(index, a, b)[0]) for p, (a, b) in enumerate(pairs)]
        if not any(chosen):
            return none
        K = symmetric(_direct.plain_gram(system, structure))
        return fit_pairs_dual(Z, K, index, self.classes_.shape[0], pair_weight,
                              "auto" if auto else alpha, self.fit_intercept, chosen)

    def decision_function(self, X):
        """Scores (n,) for two classes (positive means classes_[1]), else (n, n_classes);
        with multi_class="ovo", the pairs' votes plus their squashed summed confidences
        (rbcd.solvers._ovo.ovo_decision)."""
        scores = self._decision(X)
        if self.__dict__.get("pairs_") is not None:
            from ._ovo import ovo_decision
            return ovo_decision(scores, self.classes_.shape[0])
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]
