"""alpha="auto" for regression above the leave-one-out rows: the sample's choice checked on
held-out rows.

Up to ``LOO_MAX_ROWS`` rows ridge's alpha="auto" is exact leave-one-out on every row
(rbcd.solvers._direct). Above, leave-one-out on a fixed sample of LOO_MAX_ROWS rows chooses
a penalty a_s, scaled to a0 = a_s sqrt(S / S_s) for all rows (rbcd.solvers.cg
._solve_auto_alpha). That scaling is a guess, and for regression it guesses low: on smooth
targets the 1,000-row sample chose the smallest candidate, and the best penalty for all
rows was 10-30x above a0 at 8,000-30,000 rows (benchmarks/compare_sizes.py's synthetic
regression: test RMSE 0.174 at a0 against 0.132 at 31.6 a0 with 20,000 rows;
docs/benchmarks/search.md, "alpha='auto' above 1,000 rows").

Above HELDOUT_MIN_ROWS rows a regression's a0 is checked on the data: the candidates a0 * HELDOUT_FACTORS are
fitted on a fixed sample of at most HELDOUT_MAX_ROWS rows less a held-out share of them
(HELDOUT_SHARE; the held-out rows get weight 0, so Z and its grid structure are used as
they are), all in one block CG to HELDOUT_TOL, and scored by the weighted squared error on
the held-out rows. The best candidate is the choice. A candidate fitted on weight S_fit is
the penalty a sqrt(S_fit / S) (the same sqrt scaling); above HELDOUT_MAX_ROWS the choice is
the sample's best penalty as it is, not scaled up (heldout_choice, SAMPLE_UNITS).

The rows are fixed draws (seeds 0 and 1), so the CPU fit, the GPU and Dask fits (which
gather the sample and bin it with the fitted tables: rbcd.models.auto_alpha_from_sample)
and the twin (rbcd_ref.solvers.cg.choose_alpha, with exact solves: the two agree when
HELDOUT_TOL is tight) make the same choice. Classification keeps the leave-one-out choice.
"""
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

#: the check runs above this many rows. Below, the 1,000-row leave-one-out sample holds a
#: fifth of the rows or more, and the check moved the test RMSE by at most 1% (synthetic
#: regression, 3,000 rows: 0.1568 -> 0.1552; star, 4,950 rows: the same choice) for 50-100%
#: more fit time
HELDOUT_MIN_ROWS = 5000
#: the sample the candidates are fitted and scored on: every row up to this many, above a
#: fixed draw of as many (the cost of the check is bounded on any N)
HELDOUT_MAX_ROWS = 20000
#: the share of the sample held out (weight 0 in the fits, scored)
HELDOUT_SHARE = 0.2
#: candidates: a0 times these. The sample's choice was low by 3-30x wherever it missed
#: (never high by more than the grid's step), hence one step below a0 and four above
HELDOUT_FACTORS = 10.0 ** np.arange(-0.5, 2.01, 0.5)
#: the block CG's tolerance: the held-out errors, not the coefficients, are wanted. At 1e-2
#: the choice matched that of 1e-3 solves on three of five sets and was one step off on two
#: (synthetic regression at 3,000 rows: +0.0% test RMSE; 8,000: +2.3%), in a third to a
#: fifth of the time (star: 0.6x); at 3e-2 it was off on three
HELDOUT_TOL = 1e-2


def heldout_rows(n):
    """(rows, held): the sample of a fit of ``n`` rows (all of them up to HELDOUT_MAX_ROWS,
    above a fixed draw of as many, seed 0), in row order, and the positions within it of
    the held-out rows (a fixed draw of HELDOUT_SHARE of them, seed 1, sorted)."""
    n = int(n)
    if n <= HELDOUT_MAX_ROWS:
        rows = np.arange(n)
    else:
        rows = np.sort(np.random.default_rng(0).permutation(n)[:HELDOUT_MAX_ROWS])
    m = rows.shape[0]
    held = np.sort(np.random.default_rng(1).permutation(m)[:max(1, int(m * HELDOUT_SHARE))])
    return rows, held


def heldout_choice(Z, Y, s, held, alpha0, total_weight, fit_intercept, n_threads, columns):
    """The best of alpha0 * HELDOUT_FACTORS on held-out rows, and the candidates' scores.

    Z (m, D) CSR, Y (m, k), s (m,) weights or None: the rows of the sample
    (:func:`heldout_rows`); ``held`` the positions held out; ``alpha0`` the sample
    leave-one-out's penalty for ``total_weight`` (all rows' weight); ``columns`` Z's grid
    structure or None. Returns (alpha, scores (n_factors,) the held-out weighted squared
    error summed over the targets); (alpha0, None) when the fitted or the held-out rows
    have no weight.

    SAMPLE_UNITS: the choice is the best candidate for the sample's own weight S_m (the
    candidate a, times sqrt(S_m / S)): the same as a when the sample is every row, and
    above HELDOUT_MAX_ROWS the sample's penalty not scaled up to the N rows. With a fixed
    set of grids a fit of many rows is an overdetermined linear model whose best penalty
    stops growing with N: synthetic regression (256 grids), best penalty 0.03-0.1 at 10^5
    rows and 0.01-0.03 at 10^6; the check scaled by sqrt(S / S_m) chose 0.1 and 0.32
    (+0.0% and +1.3% RMSE against the best), unscaled 0.045 and 0.045 (+0.0%, +0.1%).
    """
    from .cg import solve_ridge

    m, k = Y.shape
    w = np.ones(m) if s is None else np.asarray(s, dtype=np.float64)
    w_fit = w.copy()
    w_fit[held] = 0.0
    S_fit, w_held = float(w_fit.sum()), w[held]
    if not (S_fit > 0 and float(w_held.sum()) > 0):
        return float(alpha0), None
    candidates = float(alpha0) * HELDOUT_FACTORS
    n_c = candidates.shape[0]
    fit_alphas = candidates * np.sqrt(S_fit / float(total_weight))
    with warnings.catch_warnings():
        # an internal step that wants held-out errors, not converged coefficients: a user
        # who set no max_iter is not told to raise it here (the fit that follows warns for
        # itself)
        warnings.simplefilter("ignore", ConvergenceWarning)
        coef, intercept, _ = solve_ridge(Z, np.tile(Y, (1, n_c)), w_fit,
                                         np.repeat(fit_alphas, k), fit_intercept, HELDOUT_TOL,
                                         None, "jacobi", n_threads, columns)
    F = np.asarray(Z[held] @ coef.T) + intercept[None, :]
    err = (F - np.tile(Y[held], (1, n_c))) ** 2
    scores = np.einsum("i,ij->j", w_held, err).reshape(n_c, k).sum(axis=1)
    # above HELDOUT_MAX_ROWS: the sample's best, not scaled up to all rows (SAMPLE_UNITS)
    best = candidates[int(np.argmin(scores))] * np.sqrt(float(w.sum()) / float(total_weight))
    return float(best), scores
