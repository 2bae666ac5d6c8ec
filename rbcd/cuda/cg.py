"""Block Jacobi-preconditioned CG for ridge on an array module ``xp`` (cupy on a GPU).

The objective and the algorithm are the CPU's (rbcd.solvers.cg.solve_ridge_cg)::

    min_{w, b}  sum_i s_i (y_i - z_i . w - b)^2 + alpha ||w||^2

the intercept by implicit centring with the s-weighted means, every target in one block
(each with its own step sizes, frozen once ``||r|| <= tol ||b||``), the Jacobi diagonal
``sum_i s_i z_ij^2 - S zbar_j^2 + alpha``, numerically constant columns held at 0, the
targets and weights rescaled by powers of two when huge or tiny, and on random binning
training data the preconditioned residual projected off the grid indicator directions.
The iterates agree with the CPU's to rounding (the sums run in another order), so the
solutions agree to the solver tolerance.

Products: ``GridLayout`` (Z from the device binning: Z P by a gather over the labels, Z^T U
by atomic-free segmented sums over the grid-sorted layout) or ``MatrixOperator`` (any
dense or (cupyx.)scipy sparse matrix). One host synchronisation per iteration (the k
residual norms, curvatures and r . M^-1 r, fetched together).
"""
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from . import _ops
from ..solvers.cd import SAFE_EXP, pow2_scale
from ..solvers.cg import _check_alpha, default_max_iter

__all__ = ["MatrixOperator", "solve_ridge", "GridProjection"]


class MatrixOperator:
    """Z @ P and Z^T @ U for a dense array or a sparse matrix of xp's module."""

    def __init__(self, xp, Z):
        self.xp = xp
        self.shape = tuple(int(s) for s in Z.shape)
        self.sparse = sp.issparse(Z) or type(Z).__module__.startswith("cupyx.scipy.sparse")
        if self.sparse:  # canonical CSR: Z * Z is then the square of the stored values
            Z = Z.tocsr().copy()
            Z.sum_duplicates()
        self.Z = Z
        self.ZT = Z.T.tocsr() if self.sparse else None

    def dot(self, P):
        out = self.Z @ self.xp.ascontiguousarray(P)
        return self.xp.asarray(out.toarray() if hasattr(out, "toarray") else out)

    def tdot(self, U):
        U = self.xp.ascontiguousarray(U)
        out = (self.ZT @ U) if self.sparse else (self.Z.T @ U)
        return self.xp.asarray(out.toarray() if hasattr(out, "toarray") else out)

    def max_abs(self):
        data = self.Z.data if self.sparse else self.Z
        if data.size == 0:
            return 0.0
        return float(self.xp.abs(data).max())

    def col_stats(self, s):
        xp = self.xp
        colsum = self.tdot(s[:, None])[:, 0]
        if self.sparse:
            Z2 = self.ZT.copy()
            Z2.data = Z2.data * Z2.data
            colsq = Z2 @ s
            colsq = xp.asarray(colsq.toarray() if hasattr(colsq, "toarray") else colsq).ravel()
        else:
            colsq = (self.Z * self.Z).T @ s
        return colsum, colsq


def _layout_col_stats(layout, s):
    """Column sums of s and of s z^2 for a GridLayout (every value is layout.value)."""
    colsum = layout.tdot(s[:, None])[:, 0]
    return colsum, colsum * layout.value


class GridProjection:
    """Projection off the grid indicator directions (rbcd.solvers.cg._GridProjection), on
    (D, k) arrays of xp: subtract each grid's mean over its columns (with an intercept);
    without, only the part along span{e_g - e_h}."""

    def __init__(self, xp, grid_ptr, fit_intercept):
        self.xp = xp
        gp = np.asarray(grid_ptr, dtype=np.int64)
        sizes = np.diff(gp)
        self.ptr = _ops.on_device(xp, gp, np.int64)
        inv = np.where(sizes > 0, 1.0 / np.maximum(sizes, 1), 0.0)
        self.inv_sizes = _ops.on_device(xp, inv, np.float64)
        self.grid_of_col = _ops.on_device(xp, np.repeat(np.arange(sizes.shape[0]), sizes),
                                          np.int64)
        self.fit_intercept = bool(fit_intercept)
        self.inv_total = 1.0 / float(inv.sum()) if inv.sum() > 0 else 0.0

    def __call__(self, V):
        means = _ops.segment_sums(self.xp, V, self.ptr) * self.inv_sizes[:, None]
        if not self.fit_intercept:
            c = _ops.col_sums(self.xp, means) * self.inv_total
            means = means - self.inv_sizes[:, None] * c[None, :]
        return V - means[self.grid_of_col]


def solve_ridge(xp, op, Y, sample_weight=None, alpha=1.0, fit_intercept=True, tol=1e-6,
                max_iter=None, preconditioner="jacobi", structured=False, verbose=0):
    """Block PCG for ridge on xp. ``op``: a GridLayout or MatrixOperator; Y (n, k) and
    sample_weight (n,) arrays of xp (validated). ``structured``: op is random binning
    training data (every row has one entry of the same value in every grid: a GridLayout
    of a fit), so the Jacobi step is projected off the grid directions.

    Returns ``(coef (k, D), intercept (k,), n_iter (k,), info)`` as host numpy arrays; info
    as rbcd.solvers.cg.solve_ridge_cg's (converged, residual, stop).
    """
    n, D = op.shape
    k = Y.shape[1]
    alpha = _check_alpha(alpha, k)
    if isinstance(op, MatrixOperator) and op.max_abs() > 2.0 ** SAFE_EXP:
        raise ValueError("device='cuda': features above 2**100 in magnitude are not "
                         "supported; rescale Z")
    cy = pow2_scale(np.array([float(xp.abs(Y).max())])) if Y.size else 1.0
    cs = 1.0 if sample_weight is None else pow2_scale(
        np.array([float(xp.abs(sample_weight).max())]))
    if cy != 1.0 or cs != 1.0:
        coef, intercept, n_iter, info = solve_ridge(
            xp, op, Y / cy, None if sample_weight is None else sample_weight / cs, alpha / cs,
            fit_intercept, tol, max_iter, preconditioner, structured, verbose)
        return coef * cy, intercept * cy, n_iter, info
    weighted = sample_weight is not None
    s = xp.ones(n) if sample_weight is None else xp.asarray(sample_weight, dtype=xp.float64)
    S = float(s.sum())
    if hasattr(op, "labels"):
        colsum, colsq = _layout_col_stats(op, s)
    else:
        colsum, colsq = op.col_stats(s)
    if fit_intercept:
        zbar = colsum / S
        ybar = _ops.col_sums(xp, s[:, None] * Y) / S
        Yc = Y - ybar[None, :]
        diag = colsq - S * zbar * zbar
    else:
        zbar = None
        ybar = xp.zeros(k)
        Yc = Y
        diag = colsq
    diag = xp.maximum(diag, 0.0)
    if fit_intercept:
        flat = (diag <= n * np.finfo(np.float64).eps * colsq) & (colsq > 0)
    else:
        flat = xp.zeros(D, dtype=xp.bool_)
    keep = (~flat).astype(xp.float64)[:, None]       # 0 on the constant columns
    diag = xp.where(flat, 0.0, diag)
    sY = s[:, None] * Yc
    alpha_d = xp.asarray(alpha)

    def apply_A(P):
        T = op.dot(P)
        if zbar is not None:
            T = T - _ops.col_sums(xp, zbar[:, None] * P)[None, :]
        if weighted:
            T = T * s[:, None]
        Q = op.tdot(T)
        if zbar is not None:
            Q = Q - zbar[:, None] * _ops.col_sums(xp, T)[None, :]
        Q = Q + alpha_d[None, :] * P
        return Q * keep

    B = op.tdot(sY)
    if zbar is not None:
        B = B - zbar[:, None] * _ops.col_sums(xp, sY)[None, :]
    B = B * keep
    use_diag = preconditioner == "jacobi"
    proj = GridProjection(xp, op.grid_ptr_host, fit_intercept) if (use_diag and structured) else None
    if use_diag:
        dd = diag[:, None] + alpha_d[None, :]
        minv = xp.where(dd > 0, 1.0 / xp.where(dd > 0, dd, 1.0), 1.0)
    else:
        minv = None

    def precond(Rr):
        Zr = Rr * minv if minv is not None else Rr
        if proj is not None:
            Zr = proj(Zr)
        return Zr * keep

    if max_iter is None:
        max_iter = default_max_iter(D)
    X = xp.zeros((D, k))
    Rr = B
    bnorm = _ops.to_host(xp.sqrt(_ops.col_sums(xp, B * B)))
    thresh = tol * bnorm
    P = precond(Rr)
    rz = _ops.col_sums(xp, Rr * P)
    n_iter = np.zeros(k, dtype=np.int64)
    done = bnorm <= thresh
    rnorm = bnorm.copy()
    breakdown = np.zeros(k, dtype=bool)
    act_d = None
    for it in range(1, int(max_iter) + 1):
        act = ~done
        if not act.any():
            break
        if act_d is None or not np.array_equal(act, act_host):
            # copied to the device only when a target stops (a copy from pageable host
            # memory waits for the queued work: once, not every iteration)
            act_host = act.copy()
            act_d = xp.asarray(act)
        Q = apply_A(P)
        pq = _ops.col_sums(xp, P * Q)
        ok_d = pq > 0
        step = xp.where(act_d & ok_d, rz / xp.where(ok_d, pq, 1.0), 0.0)
        X = X + step[None, :] * P
        Rr = Rr - step[None, :] * Q
        Zr = precond(Rr)
        rr = _ops.col_sums(xp, Rr * Rr)
        rz_new = _ops.col_sums(xp, Rr * Zr)
        beta = xp.where(rz > 0, rz_new / xp.where(rz > 0, rz, 1.0), 0.0)
        P = xp.where(act_d[None, :], Zr + beta[None, :] * P, P)
        rz = xp.where(act_d, rz_new, rz)
        host = _ops.to_host(xp.stack([xp.sqrt(rr), ok_d.astype(xp.float64)]))
        rn, ok = host[0], host[1] > 0
        n_iter[act] = it
        rnorm[act] = rn[act]
        stop = (rn <= thresh) | ~ok
        done |= act & stop
        breakdown |= act & ~ok
        if verbose >= 2:
            rel = rn[act] / np.where(bnorm[act] > 0, bnorm[act], 1.0)
            print(f"[RidgeCG cuda] iteration {it}: max relative residual {np.max(rel):.3e}")
    unconverged = rnorm > thresh
    relres = np.where(bnorm > 0, rnorm / np.where(bnorm > 0, bnorm, 1.0), 0.0)
    stop_reason = np.where(~unconverged, "tol", np.where(breakdown, "breakdown", "max_iter"))
    if np.any(unconverged):
        worst = int(np.argmax(np.where(unconverged, relres, -1.0)))
        warnings.warn(
            f"RidgeCG (device='cuda') stopped ({stop_reason[worst]}) after "
            f"{int(n_iter[worst])} iterations with relative residual {relres[worst]:.3e} > "
            f"tol={tol:g} ({int(unconverged.sum())} of {k} targets not converged). "
            "Increase max_iter or alpha, or use a larger tol",
            ConvergenceWarning, stacklevel=3)
    coef = _ops.to_host(X.T)
    if zbar is not None:
        intercept = _ops.to_host(ybar) - coef @ _ops.to_host(zbar)
    else:
        intercept = np.zeros(k)
    info = dict(converged=~unconverged, residual=relres, stop=stop_reason)
    return np.ascontiguousarray(coef), intercept, n_iter, info
