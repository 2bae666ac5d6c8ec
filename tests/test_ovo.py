"""multi_class="ovo": one ridge problem per pair of classes and a vote (rbcd.solvers._ovo).

Known answers: scikit-learn's OneVsOneClassifier over RidgeClassifier on the same Z (the
same objective per pair); exact leave-one-out against refits without each row; the
twin (rbcd_ref) on small random inputs.
"""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st
from sklearn.linear_model import Ridge, RidgeClassifier
from sklearn.multiclass import OneVsOneClassifier
from sklearn.utils.class_weight import compute_sample_weight

import rbcd
import rbcd_ref
from rbcd import RandomBinning
from rbcd.model_selection import RBClassifierCV
from rbcd.solvers._ovo import loo_ovo_scores, ovo_decision, ovo_pairs, pair_shares
from rbcd.solvers.cg import RidgeCGClassifier


def _data(n=90, d=3, k=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (np.arange(n) % k)
    X[:, 0] += y                                  # learnable, not separable
    return X, y


def _z(X, n_grids=16, sigma=2.0):
    return RandomBinning(n_grids=n_grids, sigma=sigma, random_state=0).fit_transform(
        X, return_columns=True)


@pytest.mark.parametrize("solver", ["direct", "cg", "auto"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("class_weight", [None, "balanced"])
def test_matches_sklearn_one_vs_one_ridge(solver, fit_intercept, class_weight):
    X, y = _data()
    y = np.array(["a", "b", "c", "d"])[y]        # string labels: the order of classes_
    Z, cols = _z(X)
    # one penalty per pair given as is (a single number is the whole set's, each pair its
    # share: test_a_number_alpha_is_shared_by_weight)
    ours = RidgeCGClassifier(alpha=np.full(6, 0.7), multi_class="ovo", solver=solver, tol=1e-12,
                             max_iter=5000, fit_intercept=fit_intercept,
                             class_weight=class_weight).fit(Z, y, columns=cols)
    ref = OneVsOneClassifier(RidgeClassifier(alpha=0.7, fit_intercept=fit_intercept,
                                             class_weight=class_weight)).fit(Z.toarray(), y)
    np.testing.assert_allclose(ours.decision_function(Z), ref.decision_function(Z.toarray()),
                               rtol=0, atol=1e-8)
    assert np.array_equal(ours.predict(Z), ref.predict(Z.toarray()))
    assert sp.issparse(ours.coef_) and ours.coef_.shape == (6, Z.shape[1])
    assert ours.pairs_.tolist() == [list(p) for p in ovo_pairs(4)]
    assert ours.alpha_.shape == (6,) and np.all(ours.alpha_ == 0.7)
    for p, est in enumerate(ref.estimators_):        # each pair's own coefficients
        np.testing.assert_allclose(ours.coef_[p].toarray().ravel(), est.coef_.ravel(),
                                   rtol=0, atol=1e-8)


@pytest.mark.parametrize("alpha", [0.3, "auto"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("class_weight", [None, "balanced", {0: 2.0, 1: 1.0, 2: 0.5, 3: 1.5}])
def test_dual_path_equals_the_pairs_own_fits(alpha, weighted, class_weight):
    """The direct dual form from one Gram matrix of all rows (solver "direct") against
    each pair fitted apart by CG to a tight tolerance: same penalty chosen, same model."""
    X, y = _data(n=120, seed=1)
    Z, cols = _z(X, n_grids=32)
    sw = np.random.default_rng(2).uniform(0.3, 2.0, y.shape[0]) if weighted else None
    kw = dict(alpha=alpha, multi_class="ovo", class_weight=class_weight)
    fast = RidgeCGClassifier(solver="direct", tol=1e-10, **kw).fit(Z, y, sw, columns=cols)
    apart = RidgeCGClassifier(solver="cg", tol=1e-12, max_iter=5000, **kw).fit(
        Z, y, sw, columns=cols)
    assert fast.solver_ == "dual" and apart.solver_ == "cg"
    assert np.array_equal(fast.alpha_, apart.alpha_)
    np.testing.assert_allclose(fast.decision_function(Z), apart.decision_function(Z),
                               rtol=0, atol=1e-7)
    np.testing.assert_allclose(fast.intercept_, apart.intercept_, rtol=0, atol=1e-7)
    assert fast.converged_ and np.all(fast.residual_ <= 1e-10)


def test_two_classes_are_one_vs_rest():
    X, y = _data(k=2)
    Z, cols = _z(X)
    a = RidgeCGClassifier(alpha=1.0, multi_class="ovo", solver="direct").fit(Z, y, columns=cols)
    b = RidgeCGClassifier(alpha=1.0, solver="direct").fit(Z, y, columns=cols)
    assert a.pairs_ is None
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)


def test_vote_breaks_ties_by_confidence():
    # 3 classes, each wins one pair: the confidences decide, never more than a vote
    d = np.array([[-2.0, 1.0, -0.5]])          # pairs (0,1): 0 wins, (0,2): 2, (1,2): 1
    out = ovo_decision(d, 3)
    assert np.allclose(np.floor(out + 0.5), 1.0)   # one vote each
    conf = np.array([2.0 - 1.0, -2.0 + 0.5, 1.0 - 0.5])
    np.testing.assert_allclose(out[0], 1.0 + conf / (3 * (np.abs(conf) + 1)))
    assert np.all(np.abs(out - 1.0) < 1.0 / 3.0)


def _brute_loo(Z, y, s, n_classes, alpha, fit_intercept, class_weight, shares=None):
    """Leave-one-out one-vs-one by refitting every pair without each row (the pair's
    weights fixed, as the hat-matrix identity keeps them)."""
    n = y.shape[0]
    hit, err, total = 0.0, 0.0, 0.0
    for a, b in ovo_pairs(n_classes):
        rows = np.flatnonzero((y == a) | (y == b))
        w = s[rows] * (compute_sample_weight(class_weight, y[rows]) if class_weight else 1.0)
        total += w.sum()
    for i in range(n):
        dec = []
        for p, (a, b) in enumerate(ovo_pairs(n_classes)):
            rows = np.flatnonzero((y == a) | (y == b))
            w = s[rows] * (compute_sample_weight(class_weight, y[rows]) if class_weight else 1.0)
            keep = rows != i
            t = np.where(y[rows] == b, 1.0, -1.0)
            a_p = alpha if shares is None else alpha * shares[p]
            m = Ridge(alpha=a_p, fit_intercept=fit_intercept, solver="cholesky").fit(
                Z[rows[keep]], t[keep], sample_weight=w[keep])
            f = float(m.predict(Z[i:i + 1])[0])
            dec.append(f)
            if not keep.all():
                err += w[~keep][0] * (t[~keep][0] - f) ** 2
        pred = int(np.argmax(ovo_decision(np.array(dec)[None, :], n_classes)))
        hit += s[i] * (pred == y[i])
    return hit / s.sum(), -err / total


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("class_weight", [None, "balanced"])
@pytest.mark.parametrize("shared", [False, True])
def test_leave_one_out_scores_are_exact(fit_intercept, class_weight, shared):
    rng = np.random.default_rng(3)
    n, k = 36, 3
    X = rng.normal(size=(n, 2))
    y = rng.integers(0, k, n)
    Z = RandomBinning(n_grids=8, sigma=4.0, random_state=0).fit_transform(X).toarray()
    s = rng.uniform(0.2, 2.0, n)
    alphas = np.array([1e-3, 0.1, 1.0, 10.0])

    def pair_weight(r):
        return s[r] * compute_sample_weight(class_weight, y[r]) if class_weight else s[r]

    shares = pair_shares(y, k, s) if shared else None
    got = loo_ovo_scores(np.tril(Z @ Z.T), y, k, s, alphas, fit_intercept, pair_weight,
                         shares)
    for j, a in enumerate(alphas):
        acc, err = _brute_loo(Z, y, s, k, a, fit_intercept, class_weight, shares)
        assert got[j, 0] == pytest.approx(acc, abs=1e-12)
        assert got[j, 1] == pytest.approx(err, rel=1e-8)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(30, 60), k=st.integers(3, 4),
       alpha=st.sampled_from([0.05, 1.0, "auto"]), weighted=st.booleans())
def test_twin_agrees(seed, n, k, alpha, weighted):
    # (pairs of at least 15 rows and few, wide bins: where a pair's rows are fewer than its
    # features, the ridgeless end of the alpha grid interpolates them and ties the
    # leave-one-out scores to rounding, which the two sides round differently)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.arange(n) % k
    rng.shuffle(y)
    sw = rng.uniform(0.5, 2.0, n) if weighted else None
    kw = dict(multi_class="ovo", n_grids=8, sigma=3.0, alpha=alpha, random_state=seed,
              solver="direct")
    a = rbcd.RBClassifier(**kw).fit(X, y, sample_weight=sw)
    b = rbcd_ref.RBClassifier(**kw).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(a.alpha_, b.alpha_, rtol=1e-12)
    np.testing.assert_allclose(a.coef_.toarray(), b.coef_, rtol=0, atol=1e-9)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), rtol=0,
                               atol=1e-9)


def test_model_predicts_probabilities_and_pickles():
    X, y = _data(n=150, k=5)
    m = rbcd.RBClassifier(multi_class="ovo", random_state=0).fit(X, y)
    assert m.linear_ == 0.0 and sp.issparse(m.coef_) and m.coef_.shape[0] == 10
    assert "_ovo_train_scores" not in m.solver_.__dict__
    proba = m.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.array_equal(m.classes_[np.argmax(proba, axis=1)], m.predict(X))
    # the calibration from the fit's own training scores equals the one from predictions
    from rbcd._calibration import fit_softmax_calibration
    scores = m.solver_.decision_function(m.binning_.transform(X))
    assert m.calibration_ == pytest.approx(
        fit_softmax_calibration(scores, np.searchsorted(m.classes_, y), 5, None), rel=1e-9)
    back = pickle.loads(pickle.dumps(m))
    assert np.array_equal(back.decision_function(X), m.decision_function(X))
    held = rbcd.RBClassifier(multi_class="ovo", calibration="holdout", random_state=0).fit(X, y)
    assert held.calibration_ > 0


def test_refusals_name_the_problem():
    X, y = _data()
    with pytest.raises(ValueError, match="ridge solver"):
        rbcd.RBClassifier(multi_class="ovo", solver="cd").fit(X, y)
    with pytest.raises(ValueError, match="multi_class='ovr' only"):
        rbcd.RBClassifier(multi_class="ovo", linear=1.0).fit(X, y)
    with pytest.raises(ValueError, match="CPU only"):
        rbcd.RBClassifier(multi_class="ovo", device="cuda").fit(X, y)
    Z, cols = _z(X)
    with pytest.raises(ValueError, match="CPU only"):
        RidgeCGClassifier(multi_class="ovo", device="cuda").fit(Z, y)
    with pytest.raises(ValueError, match="one per pair"):
        RidgeCGClassifier(alpha=np.ones(4), multi_class="ovo").fit(Z, y)
    sw = np.ones(y.shape[0])
    sw[(y == 0) | (y == 1)] = 0.0
    with pytest.raises(ValueError, match="sample weight 0"):
        RidgeCGClassifier(multi_class="ovo").fit(Z, y, sample_weight=sw)
    with pytest.raises(ValueError, match="multi_class"):
        rbcd.RBClassifier(multi_class="ovx").fit(X, y)
    with pytest.raises(ValueError, match="ridge solver"):
        RBClassifierCV(multi_class="ovo", solver="cd", cv=3).fit(X, y)


def test_per_pair_alphas():
    X, y = _data()
    Z, cols = _z(X)
    alphas = np.linspace(0.1, 2.0, 6)
    m = RidgeCGClassifier(alpha=alphas, multi_class="ovo", solver="direct").fit(Z, y, columns=cols)
    assert np.array_equal(m.alpha_, alphas)
    one = RidgeCGClassifier(alpha=np.full(6, alphas[2]), multi_class="ovo",
                            solver="direct").fit(Z, y, columns=cols)
    np.testing.assert_allclose(m.coef_[2].toarray(), one.coef_[2].toarray(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_a_number_alpha_is_shared_by_weight(weighted):
    """alpha=c keeps the whole set's units: pair (a, b) solves with c times its rows'
    share of the sample weight (class weights apart), the same penalty per unit of
    weight as one-vs-rest's."""
    X, y = _data(n=97, k=4, seed=7)              # unequal classes
    y[:9] = 0
    Z, cols = _z(X)
    sw = np.random.default_rng(7).uniform(0.5, 2.0, y.shape[0]) if weighted else None
    w = np.ones(y.shape[0]) if sw is None else sw
    shares = np.array([w[(y == a) | (y == b)].sum() / w.sum() for a, b in ovo_pairs(4)])
    assert np.ptp(shares) > 0.05
    for solver in ("direct", "cg"):
        kw = dict(multi_class="ovo", solver=solver, tol=1e-12, max_iter=5000,
                  class_weight="balanced")
        one = RidgeCGClassifier(alpha=3.0, **kw).fit(Z, y, sw, columns=cols)
        per = RidgeCGClassifier(alpha=3.0 * shares, **kw).fit(Z, y, sw, columns=cols)
        np.testing.assert_allclose(one.alpha_, 3.0 * shares, rtol=1e-15)
        assert (one.coef_ != per.coef_).nnz == 0
        assert np.array_equal(one.intercept_, per.intercept_)


def test_search_scores_both_schemes():
    X, y = _data(n=150, k=5, seed=4)
    kw = dict(n_grids=64, sigma_factors=(0.5, 1.0, 2.0), random_state=0)
    auto = RBClassifierCV(multi_class="auto", **kw).fit(X, y)
    ovr = RBClassifierCV(multi_class="ovr", **kw).fit(X, y)
    ovo = RBClassifierCV(multi_class="ovo", **kw).fit(X, y)
    schemes = np.asarray(auto.cv_results_["param_multi_class"], dtype=object)
    assert set(schemes) <= {"ovr", "ovo"}
    a_s, r_s, o_s = (m.cv_results_["mean_test_score"] for m in (auto, ovr, ovo))
    # every candidate takes the better scheme; ties keep one-vs-rest
    assert np.all(a_s == np.maximum(r_s, o_s))
    assert np.all(o_s[schemes == "ovo"] >= r_s[schemes == "ovo"])
    assert np.all(schemes[o_s > r_s] == "ovo")
    assert "param_multi_class" not in ovr.cv_results_
    assert set(np.asarray(ovo.cv_results_["param_multi_class"], dtype=object)) == {"ovo"}
    best = ovo.best_estimator_
    assert best.multi_class == "ovo" and best.linear == 0.0
    again = rbcd.RBClassifier(n_grids=64, sigma=ovo.sigma_, alpha=ovo.alpha_,
                              multi_class="ovo", linear=0.0, random_state=0).fit(X, y)
    np.testing.assert_array_equal(ovo.decision_function(X), again.decision_function(X))
    assert auto.best_estimator_.multi_class == auto.best_params_["multi_class"]


def test_search_with_folds():
    X, y = _data(n=120, k=4, seed=5)
    kw = dict(n_grids=32, sigma_factors=(0.5, 1.0), cv=3, random_state=0)
    ovo = RBClassifierCV(multi_class="ovo", **kw).fit(X, y)
    assert ovo.best_params_["multi_class"] == "ovo"
    assert ovo.best_estimator_.multi_class == "ovo"
    auto = RBClassifierCV(multi_class="auto", **kw).fit(X, y)   # folds: one-vs-rest
    assert "multi_class" not in auto.best_params_
    assert auto.best_estimator_.multi_class == "ovr"


def test_search_on_the_leave_one_out_sample():
    """Above LOO_MAX_ROWS rows the search scores both schemes on the fixed sample and
    refits the chosen one on every row."""
    from rbcd.solvers._direct import LOO_MAX_ROWS

    X, y = _data(n=LOO_MAX_ROWS + 300, k=3, seed=6)
    sw = np.random.default_rng(6).uniform(0.5, 2.0, y.shape[0])
    cv = RBClassifierCV(n_grids=16, sigma_factors=(0.5, 1.0), random_state=0).fit(
        X, y, sample_weight=sw)
    best = cv.best_params_
    again = rbcd.RBClassifier(n_grids=16, sigma=best["sigma"], alpha=best["alpha"],
                              multi_class=best["multi_class"],
                              linear=best.get("linear", 0.0), random_state=0).fit(
        X, y, sample_weight=sw)
    np.testing.assert_array_equal(cv.decision_function(X), again.decision_function(X))
    assert set(np.asarray(cv.cv_results_["param_multi_class"], dtype=object)) <= {"ovr", "ovo"}


@pytest.mark.parametrize("n", [0, 1, 2, 5, 255, 256, 257, 700])
@pytest.mark.parametrize("tile", [1, 3, 256])
def test_symmetric_mirrors_the_lower_triangle(n, tile):
    """symmetric copies the lower triangle onto the upper, in place, for every size
    against the tile (partial tiles, one tile, tiles of one entry); the lower triangle and
    the diagonal are kept."""
    from rbcd.solvers._ovo import symmetric

    L = np.tril(np.random.default_rng(n).standard_normal((n, n)))
    K = L + np.triu(np.full((n, n), np.nan), 1)       # the kernels leave the upper unset
    out = symmetric(K, tile=tile)
    assert out is K
    np.testing.assert_array_equal(K, L + np.tril(L, -1).T)
