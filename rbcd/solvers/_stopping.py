"""The stopping rule of the coordinate descent solvers (docs/internals.md, "Convergence"),
shared by the local solver (rbcd.solvers.cd) and the distributed one (rbcd.dask.cd).

Both compute their sums their own way (the local one over its arrays, the distributed one
added per partition in partition order) and hand them to these functions, which hold the
rule itself: which check applies, the optimal intercept of the w = 0 model, the scale the
check is relative to (P0 or G0, with G0's rounding floor), and the value of a check from
its sums (the duality gap through the kernels' own ``gap_at``).
"""
import numpy as np

from . import _cd

__all__ = ["uses_gap", "optimal_intercept", "stopping_scale", "gap_from_sums",
           "max_subgradient", "loss_deriv", "loss_value"]


def uses_gap(loss, l1_ratio, alpha):
    """True when the relative duality gap decides (squared loss with an l1 penalty: alpha
    and l1_ratio > 0), False for the largest minimum-norm subgradient. Without an l1
    penalty the gap's dual point (the residual scaled by lam1) is 0 and the gap stays at
    half the loss, above tol however close w is to the optimum."""
    return loss == "squared" and l1_ratio > 0 and alpha > 0


def loss_deriv(loss, p, y):
    """loss'(p, y) elementwise in numpy (table in docs/internals.md)."""
    if loss == "squared":
        return p - y
    if loss == "logistic":
        with np.errstate(over="ignore"):
            return -y / (1.0 + np.exp(y * p))
    return -2.0 * y * np.maximum(0.0, 1.0 - y * p)


def loss_value(loss, p, y):
    """loss(p, y) elementwise in numpy (the logistic loss computed stably)."""
    if loss == "squared":
        return 0.5 * (p - y) ** 2
    if loss == "logistic":
        return np.logaddexp(0.0, -y * p)
    return np.maximum(0.0, 1.0 - y * p) ** 2


def optimal_intercept(loss, S, Sy, Spos, Sneg):
    """b0, the intercept of the w = 0 model, from S = sum s, Sy = sum s y and the weights
    of the positive / negative targets (docs/internals.md, alpha_max)."""
    if loss == "squared":
        return Sy / S
    if Spos == 0.0 or Sneg == 0.0:
        raise ValueError(
            "the sample weights of one class sum to zero: the intercept-only model is "
            "degenerate (give both classes positive weight)"
        )
    if loss == "logistic":
        return float(np.log(Spos / Sneg))
    return (Spos - Sneg) / (Spos + Sneg)


def stopping_scale(use_gap, tol, P0, G0, n_rows, zmax, deriv_abs_sum, S):
    """The scale the convergence check is relative to: P0 for the gap; for the subgradient
    G0 raised, when tol > 0, to the rounding floor of a gradient.

    A gradient is a sum of N terms loss' z (the intercept's: z = 1), so it carries a
    rounding error up to N eps (1/S) sum s |loss'| max(1, |z|). Asking for less than that
    (tol * G0 below it: Z tiny against 1, so the columns' gradients at w = 0 are tiny but
    the intercept's is not) cannot be met: the scale is raised so that tol * scale is at
    least that bound. ``zmax`` = max(1, max |z|), ``deriv_abs_sum`` = sum s |loss'(b0, y)|,
    S = sum s; unused for the gap."""
    if use_gap:
        return float(P0)
    scale = float(G0)
    if tol > 0 and scale > 0:
        noise = n_rows * np.finfo(np.float64).eps * zmax * deriv_abs_sum / S
        scale = max(scale, noise / tol)
    return scale


def gap_from_sums(dn, rn2, ry, l1, l2, lam1, lam2):
    """The duality gap of the squared loss from dn = max_j |XtA_j|, Rn2, ry, ||w||_1 and
    ||w||^2 (docs/internals.md): the kernels' ``gap_at`` at c = min(1, lam1 / dn)."""
    c = lam1 / dn if dn > lam1 else 1.0
    return _cd.duality_gap(c, rn2, ry, l1, l2, lam1, lam2)


def max_subgradient(w, g, lam1, g_b=None):
    """The largest minimum-norm subgradient: max_j |g_j + lam1 sign(w_j)| (w_j != 0) or
    max(|g_j| - lam1, 0) (w_j = 0), g the full gradient (lam2 w included), and |g_b| of the
    intercept when given."""
    v = np.where(w != 0, np.abs(g + lam1 * np.sign(w)), np.maximum(np.abs(g) - lam1, 0.0))
    raw = float(v.max()) if v.shape[0] else 0.0
    if g_b is not None:
        raw = max(raw, abs(float(g_b)))
    return raw
