"""alpha="auto" of the coordinate descent solvers (issue 30): the penalty chosen on a held-out
fifth of the rows along a warm-started path from alpha_max (rbcd.solvers.cd._auto_alpha,
docs/internals.md "alpha='auto'"), in rbcd and in its twin."""
import re
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import ElasticNet, Lasso

import rbcd
import rbcd_ref
import rbcd_ref.solvers.cd as ref_cd
from rbcd import CDClassifier, CDRegressor, RBClassifier, RBRegressor
from rbcd.solvers import cd as fast_cd


def _data(n=240, seed=0, noise=0.3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + noise * rng.normal(size=n)
    yc = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.7)
    return X, y, yc


def _features(X, n_grids=16, sigma=1.0):
    rb = rbcd.RandomBinning(n_grids=n_grids, sigma=sigma, random_state=0)
    Z, cols = rb.fit_transform(X, return_columns=True)
    return Z, cols


def _objective(Z, y, w, b, alpha, l1_ratio):
    r = Z @ w + b - y
    return (0.5 * np.mean(r * r) + alpha * (l1_ratio * np.abs(w).sum()
                                            + 0.5 * (1 - l1_ratio) * w @ w))


def test_path_starts_at_alpha_max_and_alpha_is_its_best():
    X, y, _ = _data(noise=1.0)
    Z, cols = _features(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = CDRegressor(alpha="auto", max_epochs=1000, random_state=0).fit(Z, y, columns=cols)
    held = fast_cd.holdout_mask(Z.shape[0])
    assert held.sum() == Z.shape[0] // fast_cd.AUTO_HOLDOUT
    # the path's first penalty is alpha_max of the fit rows (held-out rows weigh 0)
    a_max = fast_cd.alpha_max(Z, y, sample_weight=(~held).astype(float))
    assert m.alphas_[0] == pytest.approx(a_max, rel=1e-12)
    assert np.all(np.diff(m.alphas_) < 0)
    ratio = m.alphas_[1] / m.alphas_[0]
    assert ratio == pytest.approx(fast_cd.AUTO_RATIO ** (1 / (fast_cd.AUTO_N_ALPHAS - 1)))
    # alpha_ is the path's penalty of the smallest held-out loss, strictly inside it here
    assert m.alpha_ == m.alphas_[int(np.argmin(m.holdout_loss_))]
    assert m.alphas_[0] > m.alpha_ > m.alphas_[-1] or len(m.alphas_) < fast_cd.AUTO_N_ALPHAS
    assert m.holdout_loss_.shape == m.alphas_.shape
    # the held-out loss at alpha_max is that of the constant model (w = 0)
    mean_fit = y[~held].mean()
    assert m.holdout_loss_[0] == pytest.approx(np.mean(0.5 * (y[held] - mean_fit) ** 2),
                                               rel=1e-9)


def test_auto_penalty_is_the_lasso_and_elastic_net_optimum_of_sklearn():
    # known answer: at the chosen alpha the fit on every row solves scikit-learn's objective
    # (noisy targets: a penalty where lasso CD converges to 1e-10 in a few hundred epochs)
    X, y, _ = _data(160, noise=1.0)
    Z, cols = _features(X, n_grids=8)
    for l1_ratio, peer in [(1.0, Lasso), (0.5, ElasticNet)]:
        m = CDRegressor(alpha="auto", l1_ratio=l1_ratio, tol=1e-10, max_epochs=20000,
                        random_state=0).fit(Z, y, columns=cols)
        kw = dict(alpha=m.alpha_, tol=1e-12, max_iter=200000)
        if peer is ElasticNet:
            kw["l1_ratio"] = l1_ratio
        assert m.dual_gap_ <= 1e-10 and m.alpha_ in m.alphas_
        s = peer(**kw).fit(Z.toarray(), y)
        ours = _objective(Z, y, m.coef_, m.intercept_, m.alpha_, l1_ratio)
        theirs = _objective(Z, y, s.coef_, s.intercept_, m.alpha_, l1_ratio)
        assert ours == pytest.approx(theirs, rel=1e-7)
        np.testing.assert_allclose(Z @ m.coef_ + m.intercept_, s.predict(Z.toarray()),
                                   atol=1e-4 * np.std(y))


def test_numeric_alpha_is_unchanged():
    X, y, yc = _data()
    Z, cols = _features(X)
    m = CDRegressor(alpha=0.05, random_state=0).fit(Z, y, columns=cols)
    assert m.alpha_ == 0.05 and m.alphas_ is None and m.holdout_loss_ is None
    rb = RBRegressor(n_grids=16, sigma=1.0, solver="cd", alpha=0.05, random_state=0).fit(X, y)
    assert rb.solver_.alpha == 0.05 and rb.alpha_ == 0.05
    np.testing.assert_array_equal(rb.coef_, m.coef_)
    c = RBClassifier(n_grids=16, sigma=1.0, solver="cd", alpha=1e-3, random_state=0).fit(X, yc)
    assert c.alpha_ == 1e-3 and c.solver_.alphas_ is None


def test_auto_does_not_depend_on_threads_or_random_state_of_the_rows():
    X, y, yc = _data(300)
    Z, cols = _features(X)
    fits = [CDClassifier(alpha="auto", parallel="grid", n_jobs=n, random_state=0).fit(
        Z, yc, columns=cols) for n in (1, 2)]
    assert fits[0].alpha_ == fits[1].alpha_
    np.testing.assert_array_equal(fits[0].coef_, fits[1].coef_)
    # the held-out rows are fixed (default_rng(AUTO_SEED)), whatever random_state
    other = CDClassifier(alpha="auto", parallel="grid", random_state=5).fit(Z, yc, columns=cols)
    assert other.alphas_[0] == fits[0].alphas_[0]


def test_classifier_holds_out_every_class():
    y = np.repeat([0, 1, 2], [10, 25, 7])
    held = fast_cd.holdout_mask(y.shape[0], y)
    assert [int(held[y == c].sum()) for c in range(3)] == [2, 5, 1]
    np.testing.assert_array_equal(held, ref_cd.holdout_mask(y.shape[0], y))
    # renaming or reordering the labels holds out the same rows
    rng = np.random.default_rng(4)
    for _ in range(20):
        z = rng.integers(0, 4, 97)
        base = fast_cd.holdout_mask(z.shape[0], z)
        np.testing.assert_array_equal(base, ref_cd.holdout_mask(z.shape[0], z))
        for relabel in (3 - z, np.array(["d", "c", "b", "a"])[z], 10 * z + 7):
            np.testing.assert_array_equal(fast_cd.holdout_mask(z.shape[0], relabel), base)
    # without strata: the first fifth of the permutation, as the stratified rule's one class
    n = 53
    np.testing.assert_array_equal(fast_cd.holdout_mask(n), fast_cd.holdout_mask(n, np.zeros(n)))


def test_auto_alpha_does_not_depend_on_the_names_of_the_classes():
    """RBClassifier(solver="cd") picks the same penalty and model whatever the classes
    are called (the held-out rows of each class follow its rows, not its label)."""
    from rbcd import RBClassifier

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (300, 3))
    y4 = np.digitize(X[:, 0] + X[:, 1], [-0.8, 0, 0.8])
    fits = [RBClassifier(n_grids=16, solver="cd", random_state=0).fit(X, yy)
            for yy in (y4, 3 - y4)]
    assert fits[0].alpha_ == fits[1].alpha_
    # the one-vs-rest problems' seeds follow classes_' order (seed + k), so the iterates
    # differ in rounding; the decisions agree
    assert np.mean(3 - fits[0].predict(X) == fits[1].predict(X)) > 0.97


def test_too_few_rows_fall_back():
    Z = np.eye(4)
    m = CDRegressor(alpha="auto").fit(Z, np.arange(4.0))
    assert m.alpha_ == fast_cd.AUTO_FALLBACK and m.alphas_.shape == (0,)
    # constant targets: alpha_max is 0, nothing to choose
    X, _, _ = _data(50)
    Z, cols = _features(X, n_grids=4)
    m = CDRegressor(alpha="auto").fit(Z, np.full(50, 3.0), columns=cols)
    assert m.alpha_ == fast_cd.AUTO_FALLBACK
    np.testing.assert_allclose(m.predict(Z), 3.0)


@pytest.mark.parametrize("parallel", [None, "grid"])
def test_twin_makes_the_same_choice(parallel):
    X, y, yc = _data(60, seed=3)
    rb = rbcd_ref.RandomBinning(n_grids=8, sigma=1.0, random_state=0)
    Z = rb.fit_transform(X)
    cols = rb if parallel else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pairs = [(CDRegressor(alpha="auto", parallel=parallel, random_state=0).fit(Z, y, columns=cols),
                  ref_cd.CDRegressor(alpha="auto", parallel=parallel, random_state=0).fit(Z, y, columns=cols)),
                 (CDClassifier(alpha="auto", parallel=parallel, random_state=0).fit(Z, yc, columns=cols),
                  ref_cd.CDClassifier(alpha="auto", parallel=parallel, random_state=0).fit(Z, yc, columns=cols))]
    for a, b in pairs:
        assert a.alpha_ == pytest.approx(b.alpha_, rel=1e-12)
        np.testing.assert_allclose(a.alphas_, b.alphas_, rtol=1e-12)
        np.testing.assert_allclose(a.holdout_loss_, b.holdout_loss_, rtol=1e-9)
        np.testing.assert_array_equal(a.n_iter_, b.n_iter_)
        np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-10)
        np.testing.assert_allclose(a.intercept_, b.intercept_, atol=1e-10)


def test_twin_models_agree():
    X, y, yc = _data(60, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for fast, ref, t in [(RBRegressor, rbcd_ref.RBRegressor, y),
                             (RBClassifier, rbcd_ref.RBClassifier, yc)]:
            a = fast(n_grids=8, solver="cd", n_jobs=1, random_state=0).fit(X, t)
            b = ref(n_grids=8, solver="cd", random_state=0).fit(X, t)
            assert a.alpha_ == pytest.approx(b.alpha_, rel=1e-12)
            assert a.solver_.max_epochs == b.solver_.max_epochs == 1000
            np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-10)


def test_convergence_advice_names_parameters_not_scaling():
    # a fit that cannot converge in its epochs: the advice is about max_epochs, tol, alpha
    X, y, _ = _data()
    with pytest.warns(ConvergenceWarning) as rec:
        RBRegressor(n_grids=16, solver="cd", alpha=1e-6, max_epochs=2, random_state=0).fit(X, y)
    msg = str(rec[0].message)
    assert "max_epochs" in msg and "alpha" in msg
    assert "StandardScaler" not in msg and "Centre" not in msg
    # hashed random binning (n_features=m): collisions add up, so the stored values differ,
    # but a bin holding nearly every row (large sigma) is still a bin, not a feature to
    # centre: the advice names sigma, max_epochs, tol, alpha
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=500)
    for n_features in (None, 64):
        with pytest.warns(ConvergenceWarning) as rec:
            RBRegressor(n_grids=16, sigma=50.0, n_features=n_features, solver="cd", alpha=1e-6,
                        max_epochs=3, random_state=0).fit(X, y)
        msg = [str(r.message) for r in rec if issubclass(r.category, ConvergenceWarning)][0]
        # (sigma 50: some bin holds every row, or all but a few)
        assert re.search("holds (nearly )?every row", msg) and "smaller sigma" in msg, msg
        assert "StandardScaler" not in msg and "max_epochs" in msg


@pytest.mark.parametrize("exp", [600, -600])
def test_huge_and_tiny_targets_choose_the_same_penalty_per_unit(exp):
    # held-out losses of targets near 1e180 squared to inf (near 1e-180, to 0), so no alpha scored and the fit
    # failed; scored in power-of-two units, the choice scales with the targets exactly,
    # in rbcd and in its twin
    X, y, _ = _data()
    Z, cols = _features(X)
    c = 2.0 ** exp
    base = CDRegressor(alpha="auto", random_state=0).fit(Z, y, columns=cols)
    big = CDRegressor(alpha="auto", random_state=0).fit(Z, y * c, columns=cols)
    assert big.alpha_ == pytest.approx(base.alpha_ * c, rel=1e-12)
    np.testing.assert_allclose(big.predict(Z) / c, base.predict(Z), rtol=1e-9, atol=1e-12)
    ref = rbcd_ref.CDRegressor(alpha="auto", random_state=0).fit(Z, y * c)
    assert ref.alpha_ == pytest.approx(base.alpha_ * c, rel=1e-12)
    # the model built on it too (the models' default solver here: coordinate descent)
    m = RBRegressor(solver="cd", n_grids=16, random_state=0).fit(X, y * c)
    assert np.all(np.isfinite(m.predict(X) / c))
