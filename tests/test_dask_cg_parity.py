"""rbcd.dask's ridge CG follows the two rules of the local solver (rbcd.solvers.cg) that it
once left out (docs/dask.md, "Ridge by CG"):

1. a multi-class classifier stops every class on one scale, tol times the largest class's
   ||b|| (the local RidgeCGClassifier's ``shared_scale``), and reports its residuals on it;
2. with an intercept, the centred columns that are constant to rounding are taken as
   exactly 0: their coefficient is 0, as the local _RidgeSystem's ``flat`` columns.
"""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

pytest.importorskip("distributed")
import dask.array as da  # noqa: E402

import rbcd  # noqa: E402
import rbcd.dask as rd  # noqa: E402


# the client fixture: tests/conftest.py


def _rare_class_problem(n=3000, n_rare=30, seed=0):
    """Four quadrant classes and a rare fifth class of ``n_rare`` scattered rows: its
    one-vs-rest right-hand side is much smaller than the others'."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] > 0).astype(int) + 2 * (X[:, 1] > 0)
    y[rng.choice(n, n_rare, replace=False)] = 4
    return X, y


@pytest.mark.parametrize("structure", [False, True])
def test_dask_classifier_stops_classes_on_the_local_shared_scale(client, structure):
    X, y = _rare_class_problem()
    Z, cols = rbcd.RandomBinning(n_grids=16, sigma=1.0, random_state=0).fit_transform(
        X, return_columns=True)
    Zd, dcols = rd.RandomBinning(n_grids=16, sigma=1.0, random_state=0).fit_transform(
        da.from_array(X, chunks=((700, 0, 1500, 800), 3)), return_columns=True)
    tol = 1e-3
    local = rbcd.RidgeCGClassifier(alpha=1.0, tol=tol).fit(
        Z, y, columns=cols if structure else None)
    dist = rd.RidgeCGClassifier(alpha=1.0, tol=tol).fit(
        Zd, y, columns=dcols if structure else None)
    rare = 4
    # the premise: the rare class's ||b|| is far below the largest, so held to its own
    # norm it needs many more iterations than on the shared scale (12-14 locally, 28-39
    # on Dask before it shared the scale)
    assert local.n_iter_[rare] < local.n_iter_[:rare].min()
    # the same stopping rule: every class, the rare one too, within the few iterations
    # that the partitions' order of additions can move the crossing
    assert np.all(np.abs(dist.n_iter_ - local.n_iter_) <= 3), (dist.n_iter_, local.n_iter_)
    # the residuals are reported on the shared scale, as locally: each at most tol and
    # close to the local one (own-scale residuals of the rare class exceed tol)
    assert dist.converged_ and local.converged_
    assert np.all(dist.residual_ <= tol) and np.all(local.residual_ <= tol)
    np.testing.assert_allclose(dist.residual_, local.residual_, rtol=0.5)
    # and the decisions agree
    np.testing.assert_allclose(dist.decision_function(Zd).compute(), local.decision_function(Z),
                               atol=1e-6)


def test_dask_classifier_residual_is_relative_to_the_largest_class(client):
    # the reported residual_ and the convergence verdict use the shared scale: with a
    # max_iter too small, the ConvergenceWarning and residual_ are those of the local
    # solver's rule (its _warn_unconverged), ||r_k|| / max_j ||b_j||
    X, y = _rare_class_problem(n=1500, n_rare=15, seed=1)
    Z = rbcd.RandomBinning(n_grids=8, sigma=1.0, random_state=0).fit_transform(X)
    Zd = rd.RandomBinning(n_grids=8, sigma=1.0, random_state=0).fit_transform(
        da.from_array(X, chunks=500))
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match=r"RidgeCG did not converge in max_iter=2 "
                                                r"iterations.*\(5 of 5 targets not converged\)"):
        dist = rd.RidgeCGClassifier(alpha=1.0, tol=1e-12, max_iter=2).fit(Zd, y)
    with pytest.warns(ConvergenceWarning):
        local = rbcd.RidgeCGClassifier(alpha=1.0, tol=1e-12, max_iter=2).fit(Z, y)
    assert not dist.converged_ and not local.converged_
    # after the same two steps from zero the iterates agree to rounding, and so do the
    # residuals on the shared scale (the rare class's is small on it, large on its own)
    np.testing.assert_allclose(dist.residual_, local.residual_, rtol=1e-8)
    assert dist.residual_[4] < dist.residual_[:4].min()


def test_stopping_scale_rule():
    from rbcd.solvers.cg import stopping_scale

    bnorm = np.array([3.0, 0.5, 0.0])
    np.testing.assert_array_equal(stopping_scale(bnorm, False), bnorm)
    np.testing.assert_array_equal(stopping_scale(bnorm, True), [3.0, 3.0, 3.0])
    assert stopping_scale(np.zeros(0), True).shape == (0,)


def _with_constant_column(n=3000, seed=0):
    """A sparse Z whose column 40 holds 0.1 on every row (not representable in binary),
    weights that are not representable either: that column's centred square sum is
    rounding noise, not 0, and its right-hand side too."""
    rng = np.random.default_rng(seed)
    A = sp.random(n, 40, density=0.1, random_state=1, format="csr")
    const = sp.csr_matrix(np.full((n, 1), 0.1))
    Z = sp.hstack([A, const, A[:, :3]], format="csr")
    s = rng.uniform(0.1, 1.0, n)
    y = rng.normal(size=n)
    return Z, y, s


@pytest.mark.parametrize("weighted", [True, False])
def test_dask_ridge_zeroes_the_columns_constant_to_rounding(client, weighted):
    Z, y, s = _with_constant_column()
    s = s if weighted else None
    Zd = da.from_array(Z, chunks=((700, 0, 1500, 800), Z.shape[1]), asarray=False)
    kw = dict(alpha=1e-3, tol=1e-10, max_iter=3000)
    local = rbcd.RidgeCG(**kw).fit(Z, y, sample_weight=s)
    dist = rd.RidgeCG(**kw).fit(Zd, y, sample_weight=s)
    # the local rule: the constant column gets exactly 0 (scikit-learn's Ridge with
    # explicit centring); before, the Dask fit returned its rounding noise (2e-12)
    assert local.coef_[40] == 0.0
    assert dist.coef_[40] == 0.0
    np.testing.assert_allclose(dist.coef_, local.coef_, rtol=1e-8, atol=1e-10)
    assert abs(dist.intercept_ - local.intercept_) <= 1e-8 * max(1.0, abs(local.intercept_))
    # without an intercept the column is not constant after centring (no centring): kept
    kw["fit_intercept"] = False
    local0 = rbcd.RidgeCG(**kw).fit(Z, y, sample_weight=s)
    dist0 = rd.RidgeCG(**kw).fit(Zd, y, sample_weight=s)
    assert local0.coef_[40] != 0.0 and dist0.coef_[40] != 0.0
    np.testing.assert_allclose(dist0.coef_, local0.coef_, rtol=1e-8, atol=1e-10)


def test_dask_classifier_zeroes_the_columns_constant_to_rounding(client):
    # the classifier (all classes in one block) applies the same rule, with the grid
    # structure unknown (a general sparse Z, the hashed-mode case)
    Z, y, s = _with_constant_column(seed=2)
    yc = np.digitize(y, [-0.5, 0.5])       # three classes
    Zd = da.from_array(Z, chunks=(1000, Z.shape[1]), asarray=False)
    kw = dict(alpha=1e-2, tol=1e-10, max_iter=3000)
    local = rbcd.RidgeCGClassifier(**kw).fit(Z, yc, sample_weight=s)
    dist = rd.RidgeCGClassifier(**kw).fit(Zd, yc, sample_weight=s)
    assert np.all(local.coef_[:, 40] == 0.0)
    assert np.all(dist.coef_[:, 40] == 0.0)
    np.testing.assert_allclose(dist.coef_, local.coef_, rtol=1e-7, atol=1e-9)


def test_constant_columns_rule():
    # rbcd.solvers.cg.constant_columns (shared by the local and the Dask CG): a column of
    # one repeated value is flat; without an intercept, or an empty column, is not
    from rbcd.solvers.cg import constant_columns

    Z, y, s = _with_constant_column(n=500)
    colsum = np.asarray(Z.T @ s).ravel()
    colsq = np.asarray(Z.multiply(Z).T @ s).ravel()
    S = float(s.sum())
    zbar = colsum / S
    diag = np.maximum(colsq - S * zbar * zbar, 0.0)
    flat = constant_columns(diag, colsq, Z.shape[0], True)
    assert 40 in flat
    assert constant_columns(diag, colsq, Z.shape[0], False).shape == (0,)
    # an empty column (colsq = 0) is not "constant": nothing to zero
    assert constant_columns(np.zeros(2), np.zeros(2), 10, True).shape == (0,)


def test_dask_ridge_at_alpha_zero_reaches_the_minimum_norm_solution(client):
    """alpha = 0 on more bins than rows (a singular system): the Dask CG runs plain CG, as
    the local one does, and reaches the minimum-norm least-squares solution; with its
    Jacobi preconditioner it reached another least-squares fit."""
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(200, 3))
    y = np.sin(6 * X[:, 0]) + X[:, 1]
    Z = rbcd.RandomBinning(n_grids=32, sigma=0.2, random_state=0).fit_transform(X)
    assert Z.shape[1] > Z.shape[0]
    Zd = da.from_array(Z, chunks=((80, 120), Z.shape[1]), asarray=False)
    kw = dict(alpha=0.0, tol=1e-12, max_iter=5000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = rbcd.RidgeCG(**kw).fit(Z, y)
        dist = rd.RidgeCG(**kw).fit(Zd, y)
    Zc = Z.toarray() - Z.toarray().mean(axis=0)
    w = np.linalg.lstsq(Zc, y - y.mean(), rcond=None)[0]          # the minimum norm
    np.testing.assert_allclose(local.coef_, w, atol=1e-6)
    np.testing.assert_allclose(dist.coef_, w, atol=1e-6)


def test_dask_cg_at_the_attainable_residual_stays_finite_and_unconverged(client):
    """tol=0: the Dask CG runs on at the attainable residual as the local one does (rz from
    the projected preconditioned residual) instead of diverging to NaN coefficients that
    were reported as converged."""
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(300, 3))
    y = np.sin(4 * X[:, 0]) - X[:, 1] ** 2
    kw = dict(n_grids=16, random_state=0, alpha=1.0, solver="cg", max_iter=1000)
    Xd = da.from_array(X, chunks=150)
    with pytest.warns(ConvergenceWarning, match="below float64's rounding"):
        m = rd.RBRegressor(tol=0.0, **kw).fit(Xd, y)
    assert np.all(np.isfinite(m.coef_)) and not m.solver_.converged_
    tight = rbcd.RBRegressor(tol=1e-12, **kw).fit(X, y)
    np.testing.assert_allclose(m.predict(Xd).compute(), tight.predict(X), atol=1e-9)
