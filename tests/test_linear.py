"""The linear term beside the random binning kernel (``linear``, rbcd.solvers._linear):
known answers from scikit-learn's Ridge / RidgeClassifier on the design [Z, sqrt(c) M],
an explicit leave-one-out for the choice of (c, alpha), the twin, and the edges."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import Ridge, RidgeClassifier

import rbcd_ref
from rbcd import RandomBinning, RBClassifier, RBRegressor, RidgeCG, RidgeCGClassifier
from rbcd.solvers import _direct
from rbcd.solvers._linear import AUTO_CANDIDATES, AUTO_REGRESSION, ExtraBlock, LinearTerm


def _data(n=90, d=4, seed=0, scales=None):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    if scales is not None:
        X = X * np.asarray(scales)
    y = X @ rng.normal(size=d) + np.sin(3 * X[:, 0]) + 0.2 * rng.standard_normal(n)
    return X, y


def _unit_block(X):
    std = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(std > 0, std, 1.0) / np.sqrt(X.shape[1])


def _ridge_reference(Z, M, c, y, alpha, weight=None, classifier=False):
    """scikit-learn on [Z, sqrt(c) M]; coefficients mapped to the unit block M."""
    A = sp.hstack([Z, np.sqrt(c) * M]).toarray()
    est = (RidgeClassifier if classifier else Ridge)(alpha=alpha).fit(A, y, sample_weight=weight)
    coef = np.atleast_2d(est.coef_).copy()
    coef[:, Z.shape[1]:] *= np.sqrt(c)
    return est, coef, A


# ---------------------------------------------------------------- the solvers, fixed alpha

@pytest.mark.parametrize("solver", ["cg", "direct", "auto"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("c", [0.3, 2.0])
def test_fixed_alpha_equals_ridge_on_the_joint_design(solver, weighted, c):
    X, y = _data(seed=1)
    Z, cols = RandomBinning(n_grids=24, random_state=1).fit_transform(X, return_columns=True)
    M = LinearTerm(X).block(X)
    np.testing.assert_allclose(M, _unit_block(X), rtol=0, atol=1e-15)
    w = np.random.default_rng(2).uniform(0.5, 2.0, X.shape[0]) if weighted else None
    est = RidgeCG(alpha=1.5, solver=solver, tol=1e-12)
    est.n_features_in_ = Z.shape[1]
    est._fit_labels(Z, y, w, cols, extra=ExtraBlock(M, (c,)))
    ref, coef, A = _ridge_reference(Z, M, c, y, 1.5, w)
    assert est.extra_weight_ == c
    assert est.coef_.shape == (Z.shape[1] + X.shape[1],)
    np.testing.assert_allclose(est.coef_, coef[0], rtol=0, atol=1e-7)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=0, atol=1e-7)
    Zf = sp.hstack([Z, M]).tocsr()
    np.testing.assert_allclose(est.predict(Zf), ref.predict(A), rtol=0, atol=1e-7)


def test_weight_zero_is_no_term():
    X, y = _data(seed=3)
    Z, cols = RandomBinning(n_grids=16, random_state=3).fit_transform(X, return_columns=True)
    plain = RidgeCG(alpha=0.7, solver="direct").fit(Z, y, columns=cols)
    est = RidgeCG(alpha=0.7, solver="direct")
    est.n_features_in_ = Z.shape[1]
    est._fit_labels(Z, y, None, cols, extra=ExtraBlock(LinearTerm(X).block(X), (0.0,)))
    assert est.extra_weight_ == 0.0 and est.coef_.shape == plain.coef_.shape
    np.testing.assert_array_equal(est.coef_, plain.coef_)


def test_several_weights_need_alpha_auto():
    X, y = _data(seed=4)
    Z, cols = RandomBinning(n_grids=8, random_state=4).fit_transform(X, return_columns=True)
    est = RidgeCG(alpha=1.0)
    with pytest.raises(ValueError, match="only with alpha='auto'"):
        est._fit_labels(Z, y, None, cols, extra=ExtraBlock(LinearTerm(X).block(X), (0.0, 1.0)))


# --------------------------------------------------------------------- the models

@pytest.mark.parametrize("solver", ["cg", "direct"])
def test_regressor_fixed_alpha_known_answer(solver):
    X, y = _data(n=80, d=3, seed=5, scales=[1.0, 50.0, 0.01])
    m = RBRegressor(n_grids=32, alpha=2.0, linear=0.5, solver=solver, tol=1e-12,
                    random_state=5).fit(X, y)
    assert m.linear_ == 0.5
    Z = m.binning_.transform(X)
    ref, coef, _ = _ridge_reference(Z, _unit_block(X), 0.5, y, 2.0)
    np.testing.assert_allclose(m.coef_, coef[0], rtol=0, atol=1e-7)
    Xt, _ = _data(n=30, d=3, seed=6, scales=[1.0, 50.0, 0.01])
    Mt = (Xt - X.mean(axis=0)) / X.std(axis=0) / np.sqrt(3)
    At = sp.hstack([m.binning_.transform(Xt), np.sqrt(0.5) * Mt]).toarray()
    np.testing.assert_allclose(m.predict(Xt), ref.predict(At), rtol=0, atol=1e-7)


def test_classifier_fixed_alpha_known_answer():
    X, y = _data(n=120, d=3, seed=7)
    labels = np.digitize(y, np.quantile(y, [0.3, 0.7]))
    m = RBClassifier(n_grids=32, alpha=1.0, linear=2.0, solver="direct",
                     random_state=7).fit(X, labels)
    Z = m.binning_.transform(X)
    ref, coef, A = _ridge_reference(Z, _unit_block(X), 2.0, labels, 1.0, classifier=True)
    np.testing.assert_allclose(m.coef_, coef, rtol=0, atol=1e-8)
    np.testing.assert_allclose(m.decision_function(X), ref.decision_function(A), rtol=0,
                               atol=1e-8)
    np.testing.assert_array_equal(m.predict(X), ref.predict(A))


def _explicit_loo(A, y, alphas, weight):
    """Leave-one-out squared error of Ridge on A for every alpha, by n refits."""
    n = A.shape[0]
    err = np.zeros(alphas.shape[0])
    for j, a in enumerate(alphas):
        for i in range(n):
            keep = np.arange(n) != i
            r = Ridge(alpha=a).fit(A[keep], y[keep], sample_weight=weight[keep])
            err[j] += weight[i] * (r.predict(A[i:i + 1])[0] - y[i]) ** 2
    return err / weight.sum()


def test_auto_choice_is_the_leave_one_out_best():
    """linear="auto" with alpha="auto" for regression: the term at AUTO_REGRESSION's weight
    and the alpha of the smallest leave-one-out error, each candidate refitted n times by
    scikit-learn's Ridge on [Z, sqrt(c) M]."""
    X, y = _data(n=36, d=3, seed=8)
    w = np.random.default_rng(9).uniform(0.5, 2.0, X.shape[0])
    m = RBRegressor(n_grids=16, random_state=8).fit(X, y, sample_weight=w)
    Z = m.binning_.transform(X).toarray()
    M = _unit_block(X)
    alphas = _direct.AUTO_ALPHAS_PER_ROW * w.sum()
    best = None
    assert AUTO_REGRESSION == (1.0,)
    for c in AUTO_REGRESSION:
        A = np.hstack([Z, np.sqrt(c) * M]) if c else Z
        err = _explicit_loo(A, y, alphas, w)
        j = max(range(alphas.shape[0]), key=lambda k: (-err[k], k))   # ties: larger alpha
        if best is None or -err[j] > best[0]:
            best = (-err[j], c, alphas[j])
    assert m.linear_ == best[1]
    assert m.alpha_ == pytest.approx(best[2], rel=1e-12)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(8, 60), d=st.integers(1, 4),
       classify=st.booleans(), weighted=st.booleans(), linear=st.sampled_from(["auto", 0.0, 0.4]),
       solver=st.sampled_from(["auto", "direct"]))
def test_models_match_the_twin(seed, n, d, classify, weighted, linear, solver):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 20.0, size=d)
    y = X @ rng.normal(size=d) + rng.normal(size=n)
    w = rng.uniform(0.5, 2.0, n) if weighted else None
    if classify:
        y = (y > np.median(y)).astype(int)
        if np.unique(y).shape[0] < 2:
            return
    kw = dict(n_grids=8, random_state=seed % 1000, linear=linear, solver=solver)
    fast = (RBClassifier if classify else RBRegressor)(**kw).fit(X, y, sample_weight=w)
    twin = (rbcd_ref.RBClassifier if classify else rbcd_ref.RBRegressor)(**kw).fit(
        X, y, sample_weight=w)
    assert fast.linear_ == twin.linear_
    if fast.alpha_ != pytest.approx(twin.alpha_, rel=1e-12):
        # a tie that rounding breaks either way (a few rows, accuracies equal, squared
        # errors equal to ~1e-10): then the two alphas must score alike in the oracle
        Z = twin.binning_.transform(X)
        if twin.linear_ > 0:
            Z = sp.hstack([Z, np.sqrt(twin.linear_) * twin._block(X)])
        one = lambda a: _twin_loo_score(Z.toarray(), y, w, a, classify)
        sa, sb = one(fast.alpha_), one(twin.alpha_)
        # near interpolation (a tiny alpha, 1 - h_ii tiny) the scores themselves carry
        # rounding of about eps ||K|| / (alpha min(1 - h_ii)), relative
        rel = max(1e-6, 10 * max(sa[2], sb[2]))
        assert sa[0] == sb[0] and sa[1] == pytest.approx(sb[1], rel=rel, abs=1e-12)
        return
    np.testing.assert_allclose(np.atleast_2d(fast.coef_), np.atleast_2d(twin.coef_), rtol=1e-6,
                               atol=1e-8 * max(1.0, float(np.abs(twin.coef_).max())))
    out = (lambda m: m.decision_function(X)) if classify else (lambda m: m.predict(X))
    scale = max(1.0, float(np.abs(out(twin)).max()))
    np.testing.assert_allclose(out(fast), out(twin), rtol=0, atol=1e-7 * scale)


def _twin_loo_score(A, y, w, alpha, classify):
    """The oracle's leave-one-out (primary, secondary) score of ridge on the design A, and
    the relative rounding error that the scores carry, eps ||K|| / (alpha min(1 - h_ii))
    (the leave-one-out residuals divide by 1 - h_ii, whose absolute rounding is about
    eps ||K|| / alpha)."""
    from rbcd_ref.solvers.cg import selection_scores

    n = A.shape[0]
    s = np.ones(n) if w is None else np.asarray(w, dtype=np.float64)
    if classify:
        Y = np.where(y == np.unique(y)[1], 1.0, -1.0)[:, None]
    else:
        Y = np.asarray(y, dtype=np.float64)[:, None]
    S = s.sum()
    root = np.sqrt(s)
    As = root[:, None] * (A - s @ A / S)
    K = As @ As.T
    smooth = K @ np.linalg.inv(K + alpha * np.eye(n))
    h = np.diag(np.outer(root, root) / S + smooth)
    r = root[:, None] * (Y - s @ Y / S) - smooth @ (root[:, None] * (Y - s @ Y / S))
    loo = r / ((1.0 - h) * root)[:, None]
    rounding = (np.finfo(np.float64).eps * np.linalg.norm(K, 2)
                / (alpha * max(float(np.min(1.0 - h)), np.finfo(np.float64).tiny)))
    return (*selection_scores(Y, Y - loo, s, classify), rounding)


def test_auto_adds_the_term_only_where_leave_one_out_scores_every_row():
    X, y = _data(n=60, d=3, seed=10)
    assert RBRegressor(n_grids=8, alpha=1.0, random_state=0).fit(X, y).linear_ == 0.0
    assert RBRegressor(n_grids=8, solver="cd", tol=1e-2, random_state=0).fit(X, y).linear_ == 0.0
    big_X, big_y = _data(n=_direct.LOO_MAX_ROWS + 1, d=3, seed=11)
    m = RBRegressor(n_grids=4, random_state=0).fit(big_X, big_y)
    assert m.linear_ == 0.0 and m.coef_.shape == (m.binning_.n_features_out_,)


def test_fixed_weight_above_the_leave_one_out_rows_matches_the_twin():
    X, y = _data(n=_direct.LOO_MAX_ROWS + 150, d=2, seed=12)
    kw = dict(n_grids=4, linear=0.5, random_state=12)
    fast = RBRegressor(**kw).fit(X, y)
    twin = rbcd_ref.RBRegressor(**kw).fit(X, y)
    assert fast.linear_ == 0.5
    assert fast.alpha_ == pytest.approx(twin.alpha_, rel=1e-12)
    np.testing.assert_allclose(fast.predict(X), twin.predict(X), rtol=0, atol=1e-4)


def test_auto_regression_keeps_the_term_where_classification_chooses():
    """linear="auto": regression takes the term at weight 1 on every leave-one-out fit, even
    where the leave-one-out error without it is lower (a choice between the two picked the
    worse on most splits of Boston housing); classification chooses between
    AUTO_CANDIDATES; the twin follows both rules."""
    import rbcd_ref

    rng = np.random.default_rng(21)
    X = rng.uniform(-1, 1, size=(60, 3))
    y = np.sin(4 * X[:, 0]) * np.cos(3 * X[:, 1])        # nothing linear in it
    m = RBRegressor(n_grids=16, random_state=1).fit(X, y)
    twin = rbcd_ref.RBRegressor(n_grids=16, random_state=1).fit(X, y)
    assert m.linear_ == 1.0 and twin.linear_ == 1.0
    assert m.coef_.shape[-1] == m.binning_.n_features_out_ + X.shape[1]
    without = RBRegressor(n_grids=16, random_state=1, linear=0.0).fit(X, y)
    assert without.linear_ == 0.0
    Z = m.binning_.transform(X).toarray()
    alphas = _direct.AUTO_ALPHAS_PER_ROW * X.shape[0]
    e0 = _explicit_loo(Z, y, alphas, np.ones(X.shape[0])).min()
    e1 = _explicit_loo(np.hstack([Z, _unit_block(X)]), y, alphas, np.ones(X.shape[0])).min()
    assert e0 < e1          # leave-one-out would have dropped the term: "auto" keeps it
    labels = (y > np.median(y)).astype(int)
    c = RBClassifier(n_grids=16, random_state=1).fit(X, labels)
    assert c.linear_ in AUTO_CANDIDATES
    assert rbcd_ref.RBClassifier(n_grids=16, random_state=1).fit(X, labels).linear_ == c.linear_


def test_unscaled_features_gain(tmp_path):
    """Raw features of very different scales: the term carries what the L1 distance drowns
    (the default on raw wine, docs/benchmarks/search.md); here the target depends on the
    small-scale feature only."""
    rng = np.random.default_rng(13)
    X = np.column_stack([rng.uniform(0, 1000, 300), rng.uniform(0, 1, 300)])
    y = 3.0 * X[:, 1] + 0.05 * rng.standard_normal(300)
    train, test = slice(0, 200), slice(200, 300)
    on = RBRegressor(random_state=0).fit(X[train], y[train])
    off = RBRegressor(random_state=0, linear=0).fit(X[train], y[train])
    assert on.linear_ == 1.0
    err_on = np.mean((on.predict(X[test]) - y[test]) ** 2)
    err_off = np.mean((off.predict(X[test]) - y[test]) ** 2)
    assert err_on < 0.1 * err_off


def test_persistence_sparse_input_and_calibration():
    X, y = _data(n=150, d=4, seed=14)
    labels = np.digitize(y, np.quantile(y, [0.3, 0.7]))
    m = RBClassifier(n_grids=16, random_state=1, linear=1.0, calibration="holdout").fit(X, labels)
    P = m.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(m.classes_[np.argmax(P, axis=1)], m.predict(X))
    back = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(back.decision_function(X), m.decision_function(X))
    Xs = sp.csr_matrix(np.where(np.abs(X) < 0.3, 0.0, X))
    dense = RBRegressor(n_grids=16, random_state=2, linear=0.5).fit(Xs.toarray(), y)
    sparse = RBRegressor(n_grids=16, random_state=2, linear=0.5).fit(Xs, y)
    np.testing.assert_allclose(sparse.predict(Xs), dense.predict(Xs.toarray()), rtol=0,
                               atol=1e-10)


def test_bad_values_are_refused():
    X, y = _data(n=40, d=2, seed=15)
    for bad in (-1.0, "linear", np.inf, np.nan):
        with pytest.raises(ValueError, match="linear"):
            RBRegressor(linear=bad).fit(X, y)
    with pytest.raises(ValueError, match="solver='cd'"):
        RBRegressor(linear=1.0, solver="cd").fit(X, y)
    with pytest.raises(ValueError, match="device='cpu'"):
        RBClassifier(linear=1.0, device="cuda").fit(X, (y > 0).astype(int))
    m = RBRegressor(n_grids=8, linear=1.0, random_state=0).fit(X, y)
    with pytest.raises(ValueError):
        m.predict(X[:, :1])
