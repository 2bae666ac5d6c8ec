"""rbcd_ref.solvers.cg against scikit-learn's Ridge / RidgeClassifier (independent solvers)."""
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from hypothesis import given, strategies as st
from sklearn.linear_model import Ridge, RidgeClassifier

from rbcd_ref.binning import RandomBinning
from rbcd_ref.solvers.cg import RidgeCG, RidgeCGClassifier


def _data(n=120, R=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    Z = RandomBinning(n_grids=R, sigma=1.5, random_state=seed).fit_transform(X)
    y = np.sin(2 * X[:, 0]) + X[:, 0] * X[:, 1] + 0.1 * rng.normal(size=n)
    return X, Z, y


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("preconditioner", ["jacobi", None])
def test_matches_sklearn_ridge(fit_intercept, preconditioner):
    _, Z, y = _data()
    m = RidgeCG(alpha=0.3, fit_intercept=fit_intercept, tol=1e-12,
                preconditioner=preconditioner).fit(Z, y)
    ref = Ridge(alpha=0.3, fit_intercept=fit_intercept, solver="cholesky").fit(Z.toarray(), y)
    np.testing.assert_allclose(m.coef_, ref.coef_, rtol=1e-7, atol=1e-9)
    assert m.intercept_ == pytest.approx(ref.intercept_, abs=1e-9)
    np.testing.assert_allclose(m.predict(Z), ref.predict(Z.toarray()), atol=1e-8)
    assert m.n_iter_.shape == (1,) and m.n_iter_[0] >= 1


def test_sample_weight_and_multi_target():
    _, Z, y = _data(seed=1)
    s = np.random.default_rng(2).uniform(0.1, 3.0, size=y.shape[0])
    Y = np.column_stack([y, y ** 2, -y])
    m = RidgeCG(alpha=0.5, tol=1e-12).fit(Z, Y, sample_weight=s)
    ref = Ridge(alpha=0.5, solver="cholesky").fit(Z.toarray(), Y, sample_weight=s)
    assert m.coef_.shape == (3, Z.shape[1]) and m.intercept_.shape == (3,)
    np.testing.assert_allclose(m.coef_, ref.coef_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(m.intercept_, ref.intercept_, atol=1e-9)
    assert m.n_iter_.shape == (3,)
    assert m.predict(Z).shape == (y.shape[0], 3)


def test_jacobi_and_plain_agree():
    _, Z, y = _data(seed=2, R=16)
    a = RidgeCG(alpha=0.1, tol=1e-10, preconditioner="jacobi").fit(Z, y)
    b = RidgeCG(alpha=0.1, tol=1e-10, preconditioner=None).fit(Z, y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-8)
    assert a.intercept_ == pytest.approx(b.intercept_, abs=1e-8)


@pytest.mark.parametrize("preconditioner", ["jacobi", None])
def test_iteration_count_matches_scipy_cg(preconditioner):
    # an independent CG implementation on the explicit normal equations (no intercept)
    _, Z, y = _data(seed=2, R=16)
    alpha = 0.1
    A = (Z.T @ Z + alpha * sp.eye(Z.shape[1])).tocsr()
    M = None if preconditioner is None else sp.diags(1.0 / A.diagonal())
    count = [0]

    def callback(xk):
        count[0] += 1

    x, info = spla.cg(A, Z.T @ y, rtol=1e-10, atol=0.0, M=M, callback=callback)
    assert info == 0
    m = RidgeCG(alpha=alpha, fit_intercept=False, tol=1e-10, preconditioner=preconditioner).fit(Z, y)
    assert abs(int(m.n_iter_[0]) - count[0]) <= 2
    np.testing.assert_allclose(m.coef_, x, rtol=1e-6, atol=1e-8)


def test_never_densifies_and_accepts_dense():
    _, Z, y = _data(seed=3)
    a = RidgeCG(alpha=1.0, tol=1e-12).fit(Z, y)
    b = RidgeCG(alpha=1.0, tol=1e-12).fit(Z.toarray(), y)
    c = RidgeCG(alpha=1.0, tol=1e-12).fit(sp.csc_matrix(Z), y)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-10)
    np.testing.assert_allclose(a.coef_, c.coef_, atol=1e-10)


@given(seed=st.integers(0, 10**6), alpha=st.floats(1e-2, 10.0), fit_intercept=st.booleans())
def test_property_random_sparse_matches_ridge(seed, alpha, fit_intercept):
    rng = np.random.default_rng(seed)
    Z = sp.random(30, 12, density=0.3, random_state=seed, format="csr")
    y = rng.normal(size=30)
    s = rng.uniform(0.5, 2.0, size=30)
    m = RidgeCG(alpha=alpha, fit_intercept=fit_intercept, tol=1e-12).fit(Z, y, sample_weight=s)
    ref = Ridge(alpha=alpha, fit_intercept=fit_intercept, solver="cholesky").fit(
        Z.toarray(), y, sample_weight=s)
    np.testing.assert_allclose(m.coef_, ref.coef_, rtol=1e-6, atol=1e-8)
    assert m.intercept_ == pytest.approx(ref.intercept_, abs=1e-8)


def test_zero_target_gives_zero_iterations():
    _, Z, _ = _data(n=40, seed=4)
    m = RidgeCG().fit(Z, np.full(40, 3.0))
    assert m.n_iter_[0] == 0 and np.all(m.coef_ == 0) and m.intercept_ == pytest.approx(3.0)


def test_classifier_matches_ridge_classifier():
    X, Z, _ = _data(seed=5)
    y2 = np.where(X[:, 0] * X[:, 1] > 0, "yes", "no")
    y3 = np.digitize(X[:, 0], [-0.5, 0.5])
    for y in (y2, y3):
        m = RidgeCGClassifier(alpha=0.7, tol=1e-12).fit(Z, y)
        ref = RidgeClassifier(alpha=0.7, solver="cholesky").fit(Z.toarray(), y)
        assert list(m.classes_) == list(ref.classes_)
        # scikit-learn >= 1.8 stores a binary coef_ as 1-D; ours is (1, D) like CDClassifier
        np.testing.assert_allclose(m.coef_, np.atleast_2d(ref.coef_), rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(m.intercept_, ref.intercept_, atol=1e-9)
        np.testing.assert_array_equal(m.predict(Z), ref.predict(Z.toarray()))
        np.testing.assert_allclose(m.decision_function(Z), ref.decision_function(Z.toarray()), atol=1e-8)
    assert RidgeCGClassifier().fit(Z, y2).coef_.shape == (1, Z.shape[1])
    assert m.coef_.shape == (3, Z.shape[1])


def test_classifier_class_weight():
    X, Z, _ = _data(seed=6)
    y = np.where(X[:, 0] > 0.3, 1, 0)
    for cw in ({0: 1.0, 1: 4.0}, "balanced"):
        m = RidgeCGClassifier(alpha=0.7, tol=1e-12, class_weight=cw).fit(Z, y)
        ref = RidgeClassifier(alpha=0.7, solver="cholesky", class_weight=cw).fit(Z.toarray(), y)
        np.testing.assert_allclose(m.coef_, np.atleast_2d(ref.coef_), rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(m.intercept_, ref.intercept_, atol=1e-9)


@pytest.mark.parametrize("params, match", [
    (dict(alpha=-1.0), "alpha"),
    (dict(tol=-1e-3), "tol"),
    (dict(max_iter=0), "max_iter"),
    (dict(preconditioner="ilu"), "preconditioner"),
    (dict(fit_intercept="yes"), "fit_intercept"),
])
def test_bad_params(params, match):
    _, Z, y = _data(n=30)
    with pytest.raises(ValueError, match=match):
        RidgeCG(**params).fit(Z, y)
    with pytest.raises(ValueError, match=match):
        RidgeCGClassifier(**params).fit(Z, y > 0)


def test_bad_inputs():
    _, Z, y = _data(n=30)
    with pytest.raises(ValueError, match="rows"):
        RidgeCG().fit(Z, y[:-1])
    bad = y.copy()
    bad[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        RidgeCG().fit(Z, bad)
    with pytest.raises(ValueError, match="sample_weight"):
        RidgeCG().fit(Z, y, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="one class"):
        RidgeCGClassifier().fit(Z, np.zeros(30))
    with pytest.raises(ValueError, match="class_weight"):
        RidgeCGClassifier(class_weight="heavy").fit(Z, y > 0)
    m = RidgeCG().fit(Z, y)
    with pytest.raises(ValueError, match="features"):
        m.predict(Z[:, 1:])
