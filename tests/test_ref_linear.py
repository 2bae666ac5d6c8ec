"""rbcd_ref.solvers.cd against independent facts: scikit-learn optima, KKT conditions, errors."""
import warnings
from functools import partial

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import ElasticNet, Lasso, LogisticRegression

from rbcd_ref.binning import RandomBinning
from rbcd_ref.solvers.cd import CDClassifier, CDRegressor, alpha_max, cd_path


def _data(n=150, R=8, sigma=1.5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    rb = RandomBinning(n_grids=R, sigma=sigma, random_state=seed)
    Z = rb.fit_transform(X)
    y = np.sin(2 * X[:, 0]) + X[:, 0] * X[:, 1] + 0.1 * rng.normal(size=n)
    ycls = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    return X, Z, y, ycls, rb


def _objective(Z, y, w, b, alpha, l1_ratio, loss="squared", s=None):
    n = Z.shape[0]
    s = np.ones(n) if s is None else s
    p = Z @ w + b
    if loss == "squared":
        L = 0.5 * (p - y) ** 2
    elif loss == "logistic":
        L = np.logaddexp(0, -y * p)
    else:
        L = np.maximum(0, 1 - y * p) ** 2
    return (s @ L) / s.sum() + alpha * (l1_ratio * np.abs(w).sum() + 0.5 * (1 - l1_ratio) * w @ w)


def _loss_grad(loss, p, y):
    if loss == "squared":
        return p - y
    if loss == "logistic":
        return -y / (1 + np.exp(y * p))
    return -2 * y * np.maximum(0, 1 - y * p)


# ---------------------------------------------------------------- (c) Lasso / ElasticNet
def test_lasso_objective_matches_sklearn():
    _, Z, y, _, _ = _data()
    alpha = 2e-3
    m = CDRegressor(alpha=alpha, fit_intercept=False, tol=1e-8, max_epochs=3000,
                    random_state=0).fit(Z, y)
    ref = Lasso(alpha=alpha, fit_intercept=False, tol=1e-12, max_iter=100000).fit(Z, y)
    P = _objective(Z, y, m.coef_, 0.0, alpha, 1.0)
    P_ref = _objective(Z, y, ref.coef_, 0.0, alpha, 1.0)
    assert P <= P_ref * (1 + 1e-6)
    assert m.dual_gap_ <= 1e-8
    assert m.objective_history_[-1] == pytest.approx(P, rel=1e-10)
    assert m.intercept_ == 0.0
    # objective history of CD is non-increasing (every step is a descent step)
    h = np.array(m.objective_history_)
    assert np.all(np.diff(h) <= 1e-12 * np.abs(h[:-1]))


def test_lasso_with_sample_weight_matches_sklearn():
    _, Z, y, _, _ = _data(n=100, seed=1)
    s = np.random.default_rng(5).uniform(0.2, 3.0, size=y.shape[0])
    alpha, tol = 2e-3, 1e-7
    m = CDRegressor(alpha=alpha, fit_intercept=False, tol=tol, max_epochs=3000,
                    random_state=1).fit(Z, y, sample_weight=s)
    ref = Lasso(alpha=alpha, fit_intercept=False, tol=1e-12, max_iter=100000).fit(
        Z, y, sample_weight=s)
    P = _objective(Z, y, m.coef_, 0.0, alpha, 1.0, s=s)
    P_ref = _objective(Z, y, ref.coef_, 0.0, alpha, 1.0, s=s)
    P0 = 0.5 * (s @ y ** 2) / s.sum()
    # the duality gap certifies P - P* <= tol * P0
    assert P - P_ref <= tol * P0 + 1e-15
    assert m.dual_gap_ <= tol
    # and weights really change the problem
    unweighted = CDRegressor(alpha=alpha, fit_intercept=False, tol=tol, max_epochs=3000,
                             random_state=1).fit(Z, y)
    assert _objective(Z, y, unweighted.coef_, 0.0, alpha, 1.0, s=s) > P + 1e-4 * P0


def test_enet_with_intercept_matches_sklearn():
    _, Z, y, _, _ = _data(seed=2)
    alpha, l1_ratio = 3e-3, 0.5
    m = CDRegressor(alpha=alpha, l1_ratio=l1_ratio, tol=1e-8, max_epochs=3000,
                    selection="permutation", random_state=2).fit(Z, y)
    ref = ElasticNet(alpha=alpha, l1_ratio=l1_ratio, tol=1e-12, max_iter=100000).fit(Z.toarray(), y)
    P = _objective(Z, y, m.coef_, m.intercept_, alpha, l1_ratio)
    P_ref = _objective(Z, y, ref.coef_, ref.intercept_, alpha, l1_ratio)
    assert P <= P_ref * (1 + 1e-6)
    assert m.intercept_ == pytest.approx(ref.intercept_, abs=1e-3)


def test_integer_sample_weight_equals_row_duplication():
    _, Z, y, _, _ = _data(n=60, seed=3)
    s = np.random.default_rng(0).integers(1, 4, size=60)
    rows = np.repeat(np.arange(60), s)
    kw = dict(alpha=1e-3, tol=1e-9, max_epochs=3000, selection="cyclic")
    a = CDRegressor(**kw).fit(Z, y, sample_weight=s)
    b = CDRegressor(**kw).fit(Z[rows], y[rows])
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-5)
    assert a.intercept_ == pytest.approx(b.intercept_, abs=1e-6)


# ---------------------------------------------------------------- (e) KKT
@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge"])
@pytest.mark.parametrize("l1_ratio", [1.0, 0.5, 0.0])
def test_kkt_conditions(loss, l1_ratio):
    _, Z, y, ycls, _ = _data(n=120, R=6, seed=4)
    alpha = 5e-3
    target = y if loss == "squared" else ycls.astype(float)
    # the classifier by its subgradient test alone (decision_epochs=None): at the optimum
    Est = CDRegressor if loss == "squared" else partial(CDClassifier, decision_epochs=None)
    m = Est(loss=loss, alpha=alpha, l1_ratio=l1_ratio, tol=1e-9, max_epochs=5000,
            random_state=0).fit(Z, target)
    w = np.ravel(m.coef_)
    b = float(np.ravel(m.intercept_)[0])
    lam1, lam2 = alpha * l1_ratio, alpha * (1 - l1_ratio)
    d = _loss_grad(loss, Z @ w + b, target)
    g = Z.T @ d / len(target) + lam2 * w
    nz = w != 0
    atol = 1e-6
    assert np.all(np.abs(g[nz] + lam1 * np.sign(w[nz])) <= atol)
    assert np.all(np.abs(g[~nz]) <= lam1 + atol)
    assert abs(d.mean()) <= atol
    if l1_ratio == 1.0:
        assert 0 < nz.sum() < len(w)  # l1 gives a sparse, non-trivial solution here


def test_kkt_no_intercept_weighted_logistic():
    _, Z, _, ycls, _ = _data(n=100, R=6, seed=6)
    s = np.random.default_rng(1).uniform(0.5, 2, size=100)
    alpha = 3e-3
    m = CDClassifier(alpha=alpha, fit_intercept=False, tol=1e-9, max_epochs=5000, decision_epochs=None,
                     random_state=3).fit(Z, ycls, sample_weight=s)
    w = m.coef_[0]
    d = _loss_grad("logistic", Z @ w, ycls.astype(float))
    g = Z.T @ (s * d) / s.sum()
    nz = w != 0
    assert np.all(np.abs(g[nz] + alpha * np.sign(w[nz])) <= 1e-6)
    assert np.all(np.abs(g[~nz]) <= alpha + 1e-6)
    assert m.intercept_[0] == 0.0


# ---------------------------------------------------------------- (f) liblinear
def test_l1_logistic_matches_liblinear():
    _, Z, _, ycls, _ = _data(n=150, R=8, seed=7)
    n = Z.shape[0]
    alpha = 4e-3
    m = CDClassifier(alpha=alpha, fit_intercept=False, tol=1e-9, max_epochs=5000, decision_epochs=None,
                     random_state=0).fit(Z, ycls)
    # liblinear: ||w||_1 + C sum_i log(1 + exp(-y_i z_i.w)); ours = (that) * alpha with C = 1/(alpha N)
    ref = LogisticRegression(l1_ratio=1.0, solver="liblinear", C=1.0 / (alpha * n),
                             fit_intercept=False, tol=1e-10, max_iter=100000).fit(Z, ycls)
    P = _objective(Z, ycls.astype(float), m.coef_[0], 0.0, alpha, 1.0, loss="logistic")
    P_ref = _objective(Z, ycls.astype(float), ref.coef_[0], 0.0, alpha, 1.0, loss="logistic")
    assert P == pytest.approx(P_ref, rel=1e-5)
    assert P <= P_ref * (1 + 1e-6)
    np.testing.assert_allclose(m.coef_[0], ref.coef_[0], atol=2e-2)


# ---------------------------------------------------------------- schedules, determinism
def test_grid_mode_and_selections_reach_same_optimum():
    _, Z, y, _, rb = _data(n=100, seed=8)
    alpha, tol = 2e-3, 1e-7
    P0 = 0.5 * np.var(y)
    objs = []
    for sel in ["random", "permutation", "cyclic"]:
        for par in [None, "grid"]:
            m = CDRegressor(alpha=alpha, tol=tol, max_epochs=3000, selection=sel,
                            parallel=par, random_state=0).fit(Z, y, columns=rb)
            assert m.dual_gap_ <= tol
            objs.append(_objective(Z, y, m.coef_, m.intercept_, alpha, 1.0))
    # each gap certifies P - P* <= tol * P0
    assert max(objs) - min(objs) <= tol * P0 + 1e-15


def test_grid_mode_differs_from_serial_after_one_epoch():
    _, Z, y, _, rb = _data(n=80, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = CDRegressor(alpha=1e-3, max_epochs=1, tol=0.0, selection="cyclic").fit(Z, y)
        b = CDRegressor(alpha=1e-3, max_epochs=1, tol=0.0, selection="cyclic",
                        parallel="grid").fit(Z, y, columns=rb)
    # with cyclic order the grid blocks visit the same columns in the same order: the
    # disjoint-rows property makes the block update equal to the sequential one
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_reproducible_and_seed_dependent():
    _, Z, y, _, _ = _data(n=80, seed=10)
    kw = dict(alpha=1e-3, max_epochs=2, tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = CDRegressor(random_state=5, **kw).fit(Z, y)
        b = CDRegressor(random_state=5, **kw).fit(Z, y)
        c = CDRegressor(random_state=6, **kw).fit(Z, y)
        d1 = CDRegressor(random_state=5, selection="cyclic", **kw).fit(Z, y)
        d2 = CDRegressor(random_state=6, selection="cyclic", **kw).fit(Z, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert not np.array_equal(a.coef_, c.coef_)
    np.testing.assert_array_equal(d1.coef_, d2.coef_)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # equality, not the optimum
def test_dense_and_sparse_inputs_agree():
    _, Z, y, _, _ = _data(n=60, seed=11)
    kw = dict(alpha=1e-3, tol=1e-6, max_epochs=500, random_state=0)
    a = CDRegressor(**kw).fit(Z, y)
    b = CDRegressor(**kw).fit(Z.toarray(), y)
    c = CDRegressor(**kw).fit(sp.coo_matrix(Z), y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.coef_, c.coef_)
    np.testing.assert_allclose(a.predict(Z), b.predict(Z.toarray()))


def test_warm_start_continues_from_solution():
    _, Z, y, _, _ = _data(n=80, seed=12)
    m = CDRegressor(alpha=1e-3, tol=1e-6, max_epochs=2000, warm_start=True, random_state=0)
    m.fit(Z, y)
    first = m.n_iter_
    coef = m.coef_.copy()
    m.fit(Z, y)
    # random steps from a solution may lift the gap a little above tol before it settles:
    # a warm start needs a fraction of the epochs of a cold one, not necessarily one
    assert first > 100 and m.n_iter_ <= first // 10
    np.testing.assert_allclose(m.coef_, coef, atol=1e-3)


def test_multi_output_regression():
    _, Z, y, _, _ = _data(n=60, seed=13)
    Y = np.column_stack([y, -2 * y + 1])
    kw = dict(alpha=1e-3, tol=1e-6, max_epochs=3000, random_state=0)
    m = CDRegressor(**kw).fit(Z, Y)
    assert m.coef_.shape == (2, Z.shape[1]) and m.intercept_.shape == (2,)
    assert m.n_iter_.shape == (2,) and m.dual_gap_.shape == (2,)
    assert m.predict(Z).shape == (60, 2)
    for k in range(2):
        single = CDRegressor(**kw).fit(Z, Y[:, k])
        P = _objective(Z, Y[:, k], m.coef_[k], m.intercept_[k], 1e-3, 1.0)
        Ps = _objective(Z, Y[:, k], single.coef_, single.intercept_, 1e-3, 1.0)
        assert P == pytest.approx(Ps, rel=1e-5)


# ---------------------------------------------------------------- classifier API
def test_multiclass_one_vs_rest_rows_are_binary_problems():
    X, Z, _, _, _ = _data(n=90, seed=14)
    y = np.array(["a", "b", "c"])[np.digitize(X[:, 0], [-0.5, 0.5])]
    kw = dict(alpha=2e-3, tol=1e-3, max_epochs=2000, selection="cyclic")
    m = CDClassifier(**kw).fit(Z, y)
    assert list(m.classes_) == ["a", "b", "c"] and m.coef_.shape == (3, Z.shape[1])
    for k, c in enumerate(m.classes_):
        b = CDClassifier(**kw).fit(Z, np.where(y == c, "pos", "neg"))  # "pos" > "neg": +1
        np.testing.assert_array_equal(m.coef_[k], b.coef_[0])
        assert m.intercept_[k] == b.intercept_[0]
    P = m.predict_proba(Z)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert m.score(Z, y) > 0.8
    assert set(m.predict(Z)) <= set(m.classes_)


def test_predict_proba_only_for_logistic():
    _, Z, _, ycls, _ = _data(n=60, seed=15)
    m = CDClassifier(loss="squared_hinge", alpha=1e-2, tol=1e-3, max_epochs=2000, random_state=0).fit(Z, ycls)
    assert not hasattr(m, "predict_proba")
    m2 = CDClassifier(alpha=1e-2, tol=1e-3, max_epochs=2000, random_state=0).fit(Z, ycls)
    P = m2.predict_proba(Z)
    np.testing.assert_allclose(P[:, 1], 1 / (1 + np.exp(-m2.decision_function(Z))))
    assert np.array_equal(m2.predict(Z), np.where(m2.decision_function(Z) > 0, 1, -1))


def test_class_weight_equals_sample_weight():
    _, Z, _, ycls, _ = _data(n=70, seed=16)
    kw = dict(alpha=1e-3, tol=1e-3, max_epochs=500, selection="cyclic")
    a = CDClassifier(class_weight={-1: 3.0, 1: 1.0}, **kw).fit(Z, ycls)
    b = CDClassifier(**kw).fit(Z, ycls, sample_weight=np.where(ycls == -1, 3.0, 1.0))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    n_pos = (ycls == 1).sum()
    bal = np.where(ycls == 1, 70 / (2 * n_pos), 70 / (2 * (70 - n_pos)))
    c = CDClassifier(class_weight="balanced", **kw).fit(Z, ycls)
    d = CDClassifier(**kw).fit(Z, ycls, sample_weight=bal)
    np.testing.assert_allclose(c.coef_, d.coef_, rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------- alpha_max, cd_path
@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge"])
def test_alpha_max_is_the_zero_threshold(loss):
    _, Z, y, ycls, _ = _data(n=80, seed=17)
    target = y if loss == "squared" else ycls
    Est = CDRegressor if loss == "squared" else CDClassifier
    amax = alpha_max(Z, target, loss=loss)
    above = Est(loss=loss, alpha=amax * 1.001, tol=1e-6, random_state=0).fit(Z, target)
    below = Est(loss=loss, alpha=amax * 0.8, tol=1e-6, max_epochs=500, random_state=0).fit(Z, target)
    assert np.all(np.ravel(above.coef_) == 0)
    assert np.any(np.ravel(below.coef_) != 0)
    assert alpha_max(Z, target, l1_ratio=0.5, loss=loss) == pytest.approx(2 * amax)


def test_alpha_max_squared_closed_form():
    _, Z, y, _, _ = _data(n=50, seed=18)
    s = np.linspace(0.5, 2, 50)
    ybar = s @ y / s.sum()
    expected = np.max(np.abs(Z.T @ (s * (ybar - y)))) / s.sum()
    assert alpha_max(Z, y, sample_weight=s) == pytest.approx(expected, rel=1e-12)
    assert alpha_max(Z, y, fit_intercept=False) == pytest.approx(np.max(np.abs(Z.T @ y)) / 50)


def test_cd_path_shapes_and_endpoints():
    _, Z, y, _, _ = _data(n=60, seed=19)
    alphas, coefs, gaps = cd_path(Z, y, n_alphas=5, eps=5e-2, tol=1e-6, max_epochs=3000,
                                  random_state=0)
    assert alphas.shape == (5,) and np.all(np.diff(alphas) < 0)
    assert alphas[0] == pytest.approx(alpha_max(Z, y))
    assert coefs.shape == (Z.shape[1], 5) and gaps.shape == (5,)
    assert np.all(coefs[:, 0] == 0) and np.all(gaps <= 1e-6)
    # the l1 norm grows along the path; the last point solves its own problem
    l1 = np.abs(coefs).sum(axis=0)
    assert np.all(np.diff(l1) >= -1e-9)
    direct = CDRegressor(alpha=alphas[-1], tol=1e-6, max_epochs=3000, random_state=0).fit(Z, y)
    assert np.abs(coefs[:, -1]).sum() == pytest.approx(np.abs(direct.coef_).sum(), rel=1e-2)
    a2, c2, _ = cd_path(Z, y, alphas=[1e-3, 1e-2], tol=1e-4, max_epochs=1000, random_state=0)
    assert a2.tolist() == [1e-2, 1e-3] and c2.shape == (Z.shape[1], 2)


# ---------------------------------------------------------------- convergence report
def test_convergence_warning_and_verbose(capsys):
    _, Z, y, _, _ = _data(n=60, seed=20)
    with pytest.warns(ConvergenceWarning, match="tol"):
        m = CDRegressor(alpha=1e-4, max_epochs=2, tol=1e-12, verbose=1, random_state=0).fit(Z, y)
    out = capsys.readouterr().out
    assert "epoch 1" in out and "epoch 2" in out and "objective" in out
    assert m.n_iter_ == 2 and len(m.objective_history_) == 2 and m.dual_gap_ > 1e-12


def test_constant_target_stops_at_zero_epochs():
    Z = sp.random(30, 10, density=0.3, random_state=0, format="csr")
    m = CDRegressor(alpha=1e-3, random_state=0).fit(Z, np.full(30, 2.5))
    assert m.n_iter_ == 0 and np.all(m.coef_ == 0) and m.intercept_ == pytest.approx(2.5)


@given(seed=st.integers(0, 10**6), alpha=st.floats(1e-4, 1e-1))
def test_property_lasso_gap_certificate(seed, alpha):
    rng = np.random.default_rng(seed)
    Z = sp.random(40, 15, density=0.3, random_state=seed, format="csr")
    y = rng.normal(size=40)
    m = CDRegressor(alpha=alpha, fit_intercept=False, tol=1e-7, max_epochs=5000,
                    random_state=seed).fit(Z, y)
    ref = Lasso(alpha=alpha, fit_intercept=False, tol=1e-12, max_iter=100000).fit(Z, y)
    P = _objective(Z, y, m.coef_, 0.0, alpha, 1.0)
    P_ref = _objective(Z, y, ref.coef_, 0.0, alpha, 1.0)
    P0 = 0.5 * np.mean(y ** 2)
    assert P - P_ref <= 1e-7 * P0 + 1e-15


# ---------------------------------------------------------------- (g) errors
@pytest.mark.parametrize("params, match", [
    (dict(alpha=-1.0), "alpha"),
    (dict(l1_ratio=1.5), "l1_ratio"),
    (dict(l1_ratio=-0.1), "l1_ratio"),
    (dict(loss="hinge"), "loss"),
    (dict(selection="greedy"), "selection"),
    (dict(parallel="threads"), "parallel"),
    (dict(max_epochs=0), "max_epochs"),
    (dict(tol=-1.0), "tol"),
])
def test_bad_params(params, match):
    _, Z, y, ycls, _ = _data(n=30, seed=21)
    with pytest.raises(ValueError, match=match):
        CDRegressor(**params).fit(Z, y)
    cparams = dict(params)
    if cparams.get("loss") == "hinge":
        cparams["loss"] = "squared"  # a regression loss is not a classifier loss
    with pytest.raises(ValueError, match=match):
        CDClassifier(**cparams).fit(Z, ycls)


def test_bad_targets_and_weights():
    _, Z, y, ycls, rb = _data(n=30, seed=22)
    with pytest.raises(ValueError, match="rows"):
        CDRegressor().fit(Z, y[:-1])
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        CDRegressor().fit(Z, bad)
    bad[3] = np.inf
    with pytest.raises(ValueError, match="NaN or inf"):
        CDRegressor().fit(Z, bad)
    with pytest.raises(ValueError, match="shape"):
        CDRegressor().fit(Z, np.zeros((30, 2, 2)))
    with pytest.raises(ValueError, match="one class"):
        CDClassifier().fit(Z, np.ones(30))
    with pytest.raises(ValueError, match="rows"):
        CDClassifier().fit(Z, ycls[:-2])
    with pytest.raises(ValueError, match="sample_weight"):
        CDRegressor().fit(Z, y, sample_weight=np.ones(29))
    with pytest.raises(ValueError, match="sample_weight"):
        CDRegressor().fit(Z, y, sample_weight=-np.ones(30))
    with pytest.raises(ValueError, match="class_weight"):
        CDClassifier(class_weight={7: 1.0}).fit(Z, ycls)
    m = CDRegressor(alpha=1e-2).fit(Z, y)
    with pytest.raises(ValueError, match="features"):
        m.predict(Z[:, :-1])


def test_grid_mode_needs_grid_structure():
    X, Z, y, _, rb = _data(n=30, seed=23)
    with pytest.raises(ValueError, match="needs the grid structure of an exact mode random binning"):
        CDRegressor(parallel="grid").fit(Z, y)
    hashed = RandomBinning(n_grids=4, n_features=64, random_state=0).fit(X)
    Zh = hashed.transform(X)
    with pytest.raises(ValueError, match="exact mode"):
        CDRegressor(parallel="grid").fit(Zh, y, columns=hashed)
    other = RandomBinning(n_grids=3, random_state=1).fit(X)
    with pytest.raises(ValueError, match="columns"):
        CDRegressor(parallel="grid").fit(Z, y, columns=other)
    # same column count but a row with two entries in one grid (row 0 is in column 0,
    # the first bin of grid 0; put it into the second bin of grid 0 as well)
    assert rb.n_bins_[0] >= 2 and Z[0, 0] != 0
    Zbad = Z.tolil()
    Zbad[0, 1] = Z[0, 0]
    with pytest.raises(ValueError, match="row 0 has more than one entry in grid 0"):
        CDRegressor(parallel="grid").fit(Zbad.tocsr(), y, columns=rb)


def test_alpha_max_and_path_errors():
    _, Z, y, _, _ = _data(n=30, seed=24)
    with pytest.raises(ValueError, match="l1_ratio"):
        alpha_max(Z, y, l1_ratio=0.0)
    with pytest.raises(ValueError, match="at least 2 classes"):
        alpha_max(Z, np.zeros(30), loss="logistic")
    with pytest.raises(ValueError, match="alphas"):
        cd_path(Z, y, alphas=[-1.0])
    with pytest.raises(ValueError, match="loss"):
        cd_path(Z, y, loss="bogus")


def test_random_selection_draws_from_documented_stream():
    # Z = identity: one epoch of exact steps (alpha = 0) sets w_j = y_j for exactly the
    # coordinates drawn, so the visited set reveals the coordinate stream. Problem k uses
    # SplitMix64(solver_seed(random_state) + k), D draws randbelow(D) (docs/internals.md).
    from rbcd_ref._random import SplitMix64, solver_seed

    D = 12
    Z = sp.identity(D, format="csr")
    Y = np.column_stack([np.arange(1.0, D + 1), -np.arange(1.0, D + 1)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = CDRegressor(alpha=0.0, fit_intercept=False, max_epochs=1, tol=0.0,
                        random_state=42).fit(Z, Y)
    seed = solver_seed(42)
    for k in range(2):
        g = SplitMix64(seed + k)
        drawn = {(g.next() * D) >> 64 for _ in range(D)}
        visited = set(np.flatnonzero(m.coef_[k]).tolist())
        assert visited == drawn
        assert len(drawn) < D  # with replacement: some coordinate is missed
        np.testing.assert_allclose(m.coef_[k][sorted(drawn)], Y[sorted(drawn), k], rtol=1e-12)


def test_cd_path_multi_target_and_classification():
    _, Z, y, ycls, _ = _data(n=50, seed=25)
    Y = np.column_stack([y, 2 * y])
    alphas, coefs, gaps = cd_path(Z, Y, n_alphas=3, eps=0.1, tol=1e-4, max_epochs=2000,
                                  random_state=0)
    assert coefs.shape == (2, Z.shape[1], 3) and gaps.shape == (3, 2)
    # alpha_max of a 2-D target is the max over targets: the 2 y column decides it
    assert alphas[0] == pytest.approx(alpha_max(Z, 2 * y))
    assert np.all(coefs[:, :, 0] == 0) and np.any(coefs[:, :, -1] != 0)
    a, c, g = cd_path(Z, ycls, n_alphas=3, eps=0.1, loss="logistic", tol=1e-4, decision_epochs=None,
                      max_epochs=2000, random_state=0)
    assert a[0] == pytest.approx(alpha_max(Z, ycls, loss="logistic"))
    assert c.shape == (Z.shape[1], 3) and np.all(c[:, 0] == 0) and np.all(g <= 1e-4)
