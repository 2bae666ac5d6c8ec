"""RBClassifierCV / RBRegressorCV: the search reuses the binning, and chooses what
GridSearchCV over RBClassifier / RBRegressor chooses with the same folds and grid."""
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold
from sklearn.utils.estimator_checks import parametrize_with_checks

from rbcd._scale import scale_sigma
from rbcd.models import RBClassifier, RBRegressor
from rbcd.model_selection import RBClassifierCV, RBRegressorCV

FACTORS = (0.5, 1.0, 2.0)
ALPHAS = (0.1, 1.0, 10.0)


@pytest.fixture(scope="module")
def three_class():
    X, y = make_classification(n_samples=240, n_features=5, n_informative=3, n_redundant=0,
                               n_classes=3, n_clusters_per_class=1, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def smooth():
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(240, 3))
    y = np.sin(5 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.standard_normal(240)
    return X, y


def _grid_search(model, X, y, cv, scoring=None):
    sigmas = [float(f * scale_sigma(X)) for f in FACTORS]
    return GridSearchCV(model, {"sigma": sigmas, "alpha": list(ALPHAS)}, cv=cv,
                        scoring=scoring).fit(X, y)


# ------------------------------------------------------------------ agrees with GridSearchCV


@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_matches_grid_search(n_classes):
    # tol far below the score's resolution: each candidate's fold predictions are those of
    # a separate RBClassifier fit, so every score, the ranks and the choice are GridSearchCV's
    X, y = make_classification(n_samples=240, n_features=5, n_informative=3, n_redundant=0,
                               n_classes=n_classes, n_clusters_per_class=1, random_state=3)
    folds = StratifiedKFold(3, shuffle=True, random_state=0)
    ours = RBClassifierCV(n_grids=16, sigma_factors=FACTORS, alphas=ALPHAS, cv=folds,
                          tol=1e-10, random_state=0, n_jobs=1).fit(X, y)
    gs = _grid_search(RBClassifier(n_grids=16, tol=1e-10, random_state=0, n_jobs=1), X, y, folds)
    res, ref = ours.cv_results_, gs.cv_results_
    assert [p["alpha"] for p in res["params"]] == [p["alpha"] for p in ref["params"]]
    np.testing.assert_allclose([p["sigma"] for p in res["params"]],
                               [p["sigma"] for p in ref["params"]], rtol=1e-15)
    for k in range(3):
        np.testing.assert_allclose(res[f"split{k}_test_score"], ref[f"split{k}_test_score"],
                                   atol=1e-12)
    np.testing.assert_array_equal(res["rank_test_score"], ref["rank_test_score"])
    assert ours.best_index_ == gs.best_index_
    assert ours.best_params_["alpha"] == gs.best_params_["alpha"]
    assert ours.best_params_["sigma"] == pytest.approx(gs.best_params_["sigma"], rel=1e-15)
    assert ours.best_score_ == pytest.approx(gs.best_score_, abs=1e-12)
    # the refit is the same model
    np.testing.assert_array_equal(ours.predict(X), gs.predict(X))
    np.testing.assert_allclose(ours.decision_function(X), gs.decision_function(X),
                               rtol=1e-6, atol=1e-8)


def test_regressor_matches_grid_search(smooth):
    X, y = smooth
    folds = KFold(4, shuffle=True, random_state=0)
    ours = RBRegressorCV(n_grids=16, sigma_factors=FACTORS, alphas=ALPHAS, cv=folds,
                         tol=1e-10, random_state=0, n_jobs=1).fit(X, y)
    gs = _grid_search(RBRegressor(n_grids=16, tol=1e-10, random_state=0, n_jobs=1), X, y, folds)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"],
                               gs.cv_results_["mean_test_score"], rtol=1e-7, atol=1e-9)
    assert ours.best_index_ == gs.best_index_
    np.testing.assert_allclose(ours.predict(X), gs.predict(X), rtol=1e-7, atol=1e-9)
    assert ours.score(X, y) == pytest.approx(gs.score(X, y), rel=1e-9)


def test_scoring_string_matches_grid_search(smooth):
    X, y = smooth
    folds = KFold(3, shuffle=True, random_state=1)
    ours = RBRegressorCV(n_grids=16, sigma_factors=FACTORS, alphas=ALPHAS, cv=folds,
                         scoring="neg_mean_absolute_error", tol=1e-10, random_state=0,
                         n_jobs=1).fit(X, y)
    gs = _grid_search(RBRegressor(n_grids=16, tol=1e-10, random_state=0, n_jobs=1), X, y, folds,
                      scoring="neg_mean_absolute_error")
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"],
                               gs.cv_results_["mean_test_score"], rtol=1e-7, atol=1e-9)
    assert np.all(ours.cv_results_["mean_test_score"] < 0)
    assert ours.best_index_ == gs.best_index_


def test_multi_output_regression(smooth):
    X, y = smooth
    Y = np.column_stack([y, X[:, 2] - X[:, 0]])
    folds = KFold(3, shuffle=True, random_state=0)
    ours = RBRegressorCV(n_grids=16, sigma_factors=FACTORS, alphas=ALPHAS, cv=folds,
                         tol=1e-10, random_state=0, n_jobs=1).fit(X, Y)
    gs = _grid_search(RBRegressor(n_grids=16, tol=1e-10, random_state=0, n_jobs=1), X, Y, folds)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"],
                               gs.cv_results_["mean_test_score"], rtol=1e-7, atol=1e-9)
    assert ours.predict(X).shape == Y.shape


def test_class_weight_and_sample_weight_reach_every_fold(three_class):
    X, y = three_class
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=y.shape[0])
    folds = StratifiedKFold(3)
    ours = RBClassifierCV(n_grids=16, sigma_factors=FACTORS, alphas=ALPHAS, cv=folds, tol=1e-10,
                          class_weight="balanced", random_state=0, n_jobs=1)
    ours.fit(X, y, sample_weight=w)
    gs = GridSearchCV(RBClassifier(n_grids=16, tol=1e-10, class_weight="balanced",
                                   random_state=0, n_jobs=1),
                      {"sigma": [float(f * scale_sigma(X, sample_weight=w)) for f in FACTORS],
                       "alpha": list(ALPHAS)}, cv=folds)
    gs.fit(X, y, sample_weight=w)
    assert ours.sigma_base_ == scale_sigma(X, sample_weight=w) != scale_sigma(X)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"],
                               gs.cv_results_["mean_test_score"], atol=1e-12)


def test_cd_solver_warm_path_scores_like_separate_fits(three_class):
    # the warm-started path converges to each alpha's optimum: the validation scores are
    # those of separate cold fits up to the solver tolerance
    X, y = three_class
    folds = StratifiedKFold(3)
    alphas = (1e-3, 1e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = RBClassifierCV(n_grids=16, sigma_factors=(1.0,), alphas=alphas, cv=folds,
                              solver="cd", tol=1e-8, random_state=0, n_jobs=1).fit(X, y)
        gs = GridSearchCV(RBClassifier(n_grids=16, solver="cd", tol=1e-8, max_epochs=1000,
                                       random_state=0, n_jobs=1),
                          {"sigma": [scale_sigma(X)], "alpha": list(alphas)}, cv=folds).fit(X, y)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"],
                               gs.cv_results_["mean_test_score"], atol=1.0 / 80 + 1e-12)
    assert hasattr(ours, "predict_proba")
    proba = ours.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)


# ------------------------------------------------------------------ results


def test_results_layout_and_refit(three_class):
    X, y = three_class
    est = RBClassifierCV(n_grids=16, cv=3, random_state=0, n_jobs=1).fit(X, y)
    n_cand = len(est.sigma_factors) * 4      # the default cg alphas: four
    res = est.cv_results_
    assert len(res["params"]) == n_cand
    for key in ("mean_test_score", "std_test_score", "rank_test_score", "mean_fit_time",
                "split0_test_score", "split2_test_score", "param_sigma_factor", "mean_n_iter"):
        assert res[key].shape == (n_cand,), key
    assert res["rank_test_score"].min() == 1
    # default cg alphas are per training row: n_samples * (1e-5, 1e-4, 1e-3, 1e-2)
    np.testing.assert_allclose(np.unique(res["param_alpha"]),
                               X.shape[0] * np.array([1e-5, 1e-4, 1e-3, 1e-2]))
    assert est.best_score_ == res["mean_test_score"].max()
    assert est.sigma_base_ == scale_sigma(X)
    np.testing.assert_allclose(res["param_sigma"], res["param_sigma_factor"] * est.sigma_base_)
    best = est.best_estimator_
    assert isinstance(best, RBClassifier)
    assert best.sigma == est.best_params_["sigma"] == est.sigma_
    assert best.alpha == est.best_params_["alpha"] == est.alpha_
    np.testing.assert_array_equal(est.predict(X), best.predict(X))
    assert est.score(X, y) == best.score(X, y)
    np.testing.assert_array_equal(est.classes_, np.unique(y))
    assert est.n_splits_ == 3


def test_numeric_base_sigma(smooth):
    X, y = smooth
    est = RBRegressorCV(n_grids=8, sigma=2.0, sigma_factors=(0.5, 1.0), alphas=(1.0,), cv=2,
                        random_state=0, n_jobs=1).fit(X, y)
    assert est.sigma_base_ == 2.0
    assert sorted(p["sigma"] for p in est.cv_results_["params"]) == [1.0, 2.0]


def test_same_seed_same_result(three_class):
    X, y = three_class
    a = RBClassifierCV(n_grids=8, cv=3, random_state=5, n_jobs=1).fit(X, y)
    b = RBClassifierCV(n_grids=8, cv=3, random_state=5, n_jobs=1).fit(X, y)
    np.testing.assert_array_equal(a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"])
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("params, match", [
    (dict(sigma_factors=()), "sigma_factors"),
    (dict(sigma_factors=(1.0, -1.0)), "sigma_factors"),
    (dict(sigma_factors=(np.nan,)), "sigma_factors"),
    (dict(alphas=(-1.0,)), "alphas"),
    (dict(alphas=()), "alphas"),
    (dict(n_grids=0), "n_grids"),
    (dict(sigma=-1.0), "sigma"),
    (dict(sigma="median"), "sigma"),
    (dict(solver="lbfgs"), "solver"),
    (dict(tol=-1.0), "tol"),
    (dict(cv="five"), "cv"),
    (dict(class_weight="weighted"), "class_weight"),
])
def test_bad_parameters_rejected(three_class, params, match):
    X, y = three_class
    with pytest.raises(ValueError, match=match):
        RBClassifierCV(**params).fit(X, y)


def test_bad_data_rejected(three_class):
    X, y = three_class
    with pytest.raises(ValueError, match="2 classes"):
        RBClassifierCV(cv=2).fit(X, np.zeros_like(y))
    with pytest.raises(ValueError, match="sample_weight"):
        RBClassifierCV(cv=2).fit(X, y, sample_weight=np.ones(3))
    with pytest.raises(ValueError):
        RBRegressorCV(cv=2).fit(X[:, :0], y)


def test_unfitted_raises():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        RBClassifierCV().predict(np.zeros((2, 2)))


# ------------------------------------------------------------------ scikit-learn conventions


def _expected_failures(estimator):
    # as for scikit-learn's own LogisticRegressionCV / RidgeCV: repeating a row is not the
    # same as weighting it by 2 when the folds (and here the scale rule's sampled pairs)
    # depend on the rows themselves
    return {"check_sample_weight_equivalence_on_dense_data":
            "the CV folds and sigma='scale' depend on the rows, not only on their weights"}


@parametrize_with_checks([
    RBClassifierCV(n_grids=4, sigma_factors=(1.0,), alphas=(1.0,), cv=2, n_jobs=1,
                   random_state=0),
    RBRegressorCV(n_grids=4, sigma_factors=(1.0,), alphas=(1.0,), cv=2, n_jobs=1,
                  random_state=0),
    # the default search (cv=None: exact leave-one-out over the default alphas)
    RBClassifierCV(n_grids=8, sigma_factors=(0.5, 2.0), n_jobs=1, random_state=0),
    RBRegressorCV(n_grids=8, sigma_factors=(0.5, 2.0), n_jobs=1, random_state=0),
], expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


def test_auto_grids_follow_the_width_and_size_of_the_data(smooth):
    """"auto": the models' rule (256, 512 above 64 features, SMALL_DATA_GRIDS on small
    data), raised to the power of two that keeps rows x grids within SMALL_DATA_ENTRIES, up
    to SEARCH_MAX_GRIDS."""
    from rbcd.models import SMALL_DATA_ENTRIES, SMALL_DATA_GRIDS

    X, y = smooth
    small = X.shape[0] * SMALL_DATA_GRIDS <= SMALL_DATA_ENTRIES
    assert small
    narrow = RBRegressorCV(sigma_factors=(1.0,), alphas=(1.0,), cv=2, random_state=0,
                           n_jobs=1).fit(X, y)
    R = search_grids = RBRegressorCV()._n_grids(X.shape[1], X.shape[0])
    assert search_grids >= SMALL_DATA_GRIDS
    assert narrow.best_estimator_.n_grids == R and narrow.best_estimator_.binning_.n_grids == R
    search = RBRegressorCV(n_grids="auto")
    edge = SMALL_DATA_ENTRIES // SMALL_DATA_GRIDS
    assert search._n_grids(3, edge) == SMALL_DATA_GRIDS
    # above the models' rule: the power of two within SMALL_DATA_ENTRIES, up to 2,048
    # regression above 2,048 rows: the models' larger rule with the search's bounds (8,192
    # grids, rows x grids within SEARCH_REGRESSION_ENTRIES)
    assert [search._n_grids(3, n) for n in (1, 133, 512, 513, 1024, 1025, 2048, 2049, 8192,
                                            8193, 16385, 70_000)] \
        == [2048, 2048, 2048, 2048, 2048, 1024, 1024, 8192, 8192, 4096, 2048, 512]
    classes = RBClassifierCV(n_grids="auto")
    assert [classes._n_grids(3, n) for n in (1, 1024, 1025, 4096, 4097, 8193)] \
        == [2048, 2048, 1024, 512, 256, 256]
    assert search._n_grids(66, 4097) == 8192 and search._n_grids(66, 100_000) == 512
    assert search._n_grids(300, 4097) == 4096      # grids x features within SMALL_DATA_ENTRIES
    assert classes._n_grids(66, 4097) == 512 and classes._n_grids(66, 100_000) == 512
    # wide small data: grids x features within SMALL_DATA_ENTRIES too (the wide default at
    # least): every grid holds numbers per feature
    assert [search._n_grids(d, 100) for d in (1024, 1025, 2048, 4097, 20000)] \
        == [2048, 1024, 1024, 512, 512]
    assert RBRegressorCV(n_grids=32)._n_grids(3, 10) == 32
    wide = np.tile(X, (1, 22))     # 66 features
    est = RBRegressorCV(n_grids=512, sigma_factors=(1.0,), alphas=(1.0,), cv=2,
                        random_state=0, n_jobs=1).fit(wide, y)
    assert est.best_estimator_.n_grids == 512
    assert est.best_estimator_.binning_.n_grids == 512


@pytest.mark.parametrize("case", ["regression", "weighted", "multi-output", "no-intercept",
                                  "classification", "two-class", "mae"])
def test_folds_from_one_gram_matrix_equal_each_folds_own_solve(monkeypatch, capsys, case):
    """Where the folds share one Gram matrix per sigma (the rows' Z Z^T, each fold its
    blocks: rbcd.solvers._direct.shared_dual_pays, forced here), every fold score equals
    GridSearchCV's over the models solved directly on each fold's own binning, with sample
    weights, class weights, several targets, no intercept and another scorer."""
    from rbcd import model_selection
    from rbcd.solvers import _direct

    calls = []

    def always(*args, **kw):
        calls.append(args)
        return True

    monkeypatch.setattr(_direct, "shared_dual_pays", always)
    rng = np.random.default_rng(11)
    n = 120
    X = rng.uniform(-1, 1, size=(n, 3))
    f = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2]
    w = rng.uniform(0.2, 3.0, size=n) if case in ("weighted", "classification") else None
    kw, fit_kw = {}, {}
    if case in ("classification", "two-class"):
        cuts = [-0.4, 0.4] if case == "classification" else [0.0]
        y = np.digitize(f + 0.2 * rng.standard_normal(n), cuts)
        ours_cls, model = RBClassifierCV, RBClassifier
        kw = {"class_weight": "balanced"} if case == "classification" else {}
        folds = StratifiedKFold(4, shuffle=True, random_state=2)
    else:
        y = f + 0.2 * rng.standard_normal(n)
        if case == "multi-output":
            y = np.column_stack([y, X[:, 2] - X[:, 0]])
        ours_cls, model = RBRegressorCV, RBRegressor
        folds = KFold(4, shuffle=True, random_state=2)
    if case == "no-intercept":
        kw["fit_intercept"] = False
    scoring = "neg_mean_absolute_error" if case == "mae" else None
    if w is not None:
        fit_kw["sample_weight"] = w
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ours = ours_cls(n_grids=16, sigma_factors=FACTORS, alphas=ALPHAS, cv=folds,
                        solver="direct", scoring=scoring, random_state=4, n_jobs=1,
                        verbose=int(case == "regression"), **kw).fit(X, y, **fit_kw)
    assert len(calls) == len(FACTORS)            # one decision per sigma, the shared path
    if case == "regression":                     # a line per (sigma, fold)
        lines = [ln for ln in capsys.readouterr().out.splitlines() if " fold " in ln]
        assert len(lines) == len(FACTORS) * 4 and "features, best score" in lines[0]
    # the base sigma of the search: its pairs drawn by the weights (rbcd._scale)
    sigmas = [float(fc * scale_sigma(X, sample_weight=w)) for fc in FACTORS]
    gs = GridSearchCV(model(n_grids=16, solver="direct", random_state=4, n_jobs=1, **kw),
                      {"sigma": sigmas, "alpha": list(ALPHAS)}, cv=folds,
                      scoring=scoring).fit(X, y, **fit_kw)
    res, ref = ours.cv_results_, gs.cv_results_
    for k in range(4):
        np.testing.assert_allclose(res[f"split{k}_test_score"], ref[f"split{k}_test_score"],
                                   rtol=1e-9, atol=1e-11)
    assert ours.best_index_ == gs.best_index_
    np.testing.assert_allclose(ours.predict(X), gs.predict(X), rtol=1e-9, atol=1e-11)
    if case in ("regression", "classification"):
        # the alphas' factorizations, two at a time on two threads: the same bits
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            two = ours_cls(n_grids=16, sigma_factors=FACTORS, alphas=ALPHAS, cv=folds,
                           solver="direct", scoring=scoring, random_state=4, n_jobs=2,
                           **kw).fit(X, y, **fit_kw)
        for k in range(4):
            np.testing.assert_array_equal(two.cv_results_[f"split{k}_test_score"],
                                          res[f"split{k}_test_score"])
    # the per-fold path (the decision False) gives the same scores
    monkeypatch.setattr(_direct, "shared_dual_pays", lambda *a, **k: False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        own = ours_cls(n_grids=16, sigma_factors=FACTORS, alphas=ALPHAS, cv=folds,
                       solver="direct", scoring=scoring, random_state=4, n_jobs=1,
                       **kw).fit(X, y, **fit_kw)
    np.testing.assert_allclose(own.cv_results_["mean_test_score"], res["mean_test_score"],
                               rtol=1e-9, atol=1e-11)
    assert model_selection.SEARCH_REGRESSION_GRIDS >= 2048


def test_shared_gram_where_the_cost_model_says_so():
    """The folds share one Gram matrix where its label comparisons, spread over the folds,
    and a factorization per alpha cost less than each fold's own cheapest form: star's
    search (4,950 rows, 8,192 grids, 5 folds, 4 alphas), not few grids (CG) nor more rows
    than MAX_GRAM_BYTES allows; solver="direct" against the direct forms only."""
    from rbcd.solvers import _direct

    assert _direct.shared_dual_pays(4950, 3960, 10 ** 6, 8192, 1, 4, 5)
    assert not _direct.shared_dual_pays(4950, 3960, 10 ** 6, 128, 1, 4, 5)
    assert _direct.shared_dual_pays(4950, 3960, 10 ** 6, 128, 1, 4, 5, direct=True)
    assert not _direct.shared_dual_pays(4950, 3960, 2000, 128, 1, 4, 5, direct=True)  # primal
    big = int(np.sqrt(_direct.MAX_GRAM_BYTES / 8)) + 1
    assert not _direct.shared_dual_pays(big, big - big // 5, 10 ** 7, 8192, 1, 4, 5,
                                        direct=True)
    # plan() is costs()'s cheapest form, one factorization
    for args in ((3960, 10 ** 6, 8192, 4), (3960, 2000, 128, 1), (50_000, 10 ** 6, 64, 1)):
        c = _direct.costs(*args, True)
        assert _direct.plan(*args, True) == min(c, key=c.get)


# ------------------------------------------------------------------ cv=None: leave-one-out


def test_leave_one_out_scores_equal_refits_on_all_but_one_row():
    from sklearn.linear_model import Ridge

    from rbcd import RandomBinning

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(40, 3))
    y = np.sin(3 * X[:, 0]) + 0.3 * rng.standard_normal(40)
    alphas = np.array([0.05, 0.5, 5.0])
    cv = RBRegressorCV(n_grids=8, sigma=1.0, sigma_factors=(1.0,), alphas=alphas,
                       random_state=0).fit(X, y)
    Z = RandomBinning(n_grids=8, sigma=1.0, random_state=0).fit_transform(X).toarray()
    # each candidate takes the better weight of the linear term, 0 or 1 (the models'
    # linear="auto"): the design Z or [Z, M], M the standardized X / sqrt(d)
    M = (X - X.mean(axis=0)) / X.std(axis=0) / np.sqrt(3)
    for j, a in enumerate(alphas):
        r2 = {}
        for c, A in ((0.0, Z), (1.0, np.hstack([Z, M]))):
            pred = np.array([Ridge(alpha=a).fit(np.delete(A, i, 0), np.delete(y, i)).predict(
                A[i:i + 1])[0] for i in range(40)])
            r2[c] = 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)
        best = 1.0 if r2[1.0] > r2[0.0] else 0.0
        assert cv.cv_results_["param_linear"][j] == best
        assert cv.cv_results_["mean_test_score"][j] == pytest.approx(r2[best], rel=1e-9)
    assert cv.best_index_ == int(np.argmax(cv.cv_results_["mean_test_score"]))
    assert cv.best_estimator_.linear_ == cv.best_params_["linear"]


def test_leave_one_out_classification_accuracy_and_refit():
    from rbcd import RandomBinning, RidgeCGClassifier

    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(60, 2))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    cv = RBClassifierCV(n_grids=8, sigma=0.8, sigma_factors=(1.0,), alphas=(0.1, 1.0),
                        random_state=0).fit(X, y)
    Z = RandomBinning(n_grids=8, sigma=0.8, random_state=0).fit_transform(X)
    for j, a in enumerate((0.1, 1.0)):
        hits = [RidgeCGClassifier(alpha=a, solver="direct").fit(
            Z[np.arange(60) != i], y[np.arange(60) != i]).predict(Z[i])[0] == y[i]
            for i in range(60)]
        assert cv.cv_results_["mean_test_score"][j] == pytest.approx(np.mean(hits))
    assert cv.best_estimator_.alpha == cv.best_params_["alpha"]
    assert cv.n_splits_ == 1


def test_edge_of_the_grid_warns_with_the_way_out():
    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, size=(80, 2))
    y = np.sin(4 * X[:, 0])                      # noise-free: the smallest alpha wins
    with pytest.warns(UserWarning, match="smallest of the grid: add smaller values to alphas"):
        RBRegressorCV(n_grids=32, sigma_factors=(0.5, 1.0), alphas=(1e-6, 1.0, 10.0),
                      random_state=0).fit(X, y)


def test_scoring_needs_folds():
    X = np.random.default_rng(3).uniform(size=(30, 2))
    y = (X[:, 0] > 0.5).astype(int)
    with pytest.raises(ValueError, match="scoring needs cross-validation folds"):
        RBClassifierCV(n_grids=4, scoring="f1", random_state=0).fit(X, y)
    RBClassifierCV(n_grids=4, scoring="f1", cv=3, sigma_factors=(1.0,), alphas=(1.0,),
                   random_state=0).fit(X, y)


def test_a_fold_without_two_classes_is_named_for_the_cd_search():
    # one row of class 1 in 60, three folds: two folds' training rows hold only class 0.
    # CDClassifier's own message ("got only one class") named neither the search nor the
    # fold; the ridge search fits such a fold (one class against its absence)
    X = np.random.default_rng(0).uniform(-1, 1, size=(60, 3))
    y = np.zeros(60, dtype=int)
    y[0] = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)    # sklearn: the rare class's count
        with pytest.raises(ValueError, match=r"RBClassifierCV: the training rows of fold "
                                             r"\d hold only class 0 \(the classes have "
                                             r"\{0: 59, 1: 1\} rows\)"):
            RBClassifierCV(cv=3, solver="cd", n_grids=4, random_state=0).fit(X, y)
        RBClassifierCV(cv=3, n_grids=4, sigma_factors=(1.0,), alphas=(1.0,),
                       random_state=0).fit(X, y)


@pytest.mark.parametrize("c", [2.0 ** 600, 2.0 ** -600])
def test_leave_one_out_search_does_not_depend_on_the_targets_scale(c):
    # ridge's best alpha and R^2 are invariant under y -> c y; huge or tiny targets squared
    # to inf or 0 in the leave-one-out errors and changed the choice (best_score_ nan or 0)
    from rbcd import RBRegressorCV

    rng = np.random.default_rng(0)
    X = rng.uniform(size=(150, 3))
    y = np.sin(4 * X[:, 0]) + 0.1 * rng.standard_normal(150)
    base = RBRegressorCV(n_grids=16, random_state=0).fit(X, y)
    scaled = RBRegressorCV(n_grids=16, random_state=0).fit(X, y * c)
    assert scaled.best_params_ == base.best_params_
    assert scaled.best_score_ == pytest.approx(base.best_score_, rel=1e-9)
    np.testing.assert_allclose(scaled.predict(X) / c, base.predict(X), rtol=1e-8, atol=1e-12)


# ------------------------------------------------------------------ cv=None on more rows: folds


def _search_mode(est):
    """"loo" (one split: leave-one-out) or the number of folds the search ran."""
    return "loo" if est.n_splits_ == 1 else est.n_splits_


def test_cv_none_runs_folds_where_the_sample_holds_under_half_of_the_rows(monkeypatch):
    # leave-one-out on every row up to LOO_MAX_ROWS, on its sample while that holds at
    # least KFOLD_SAMPLE_SHARE of the rows, KFOLD_SPLITS folds on all rows above that up to
    # KFOLD_MAX_ROWS, the sample again above (limits scaled down: 20 rows, 100 rows)
    from rbcd import model_selection
    from rbcd.solvers import _direct

    monkeypatch.setattr(_direct, "LOO_MAX_ROWS", 20)
    monkeypatch.setattr(model_selection, "KFOLD_MAX_ROWS", 100)
    rng = np.random.default_rng(5)
    modes = {}
    for n in (20, 40, 41, 100, 101):
        X = rng.uniform(size=(n, 2))
        y = np.sin(4 * X[:, 0]) + 0.1 * rng.standard_normal(n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)      # edge-of-grid notes
            est = RBRegressorCV(n_grids=8, sigma_factors=(1.0, 2.0), random_state=0,
                                n_jobs=1).fit(X, y)
        modes[n] = _search_mode(est)
        # the folds' alpha grid with folds, alpha="auto"'s with leave-one-out
        per_row = (model_selection.DEFAULT_ALPHAS_CG_PER_ROW if modes[n] != "loo"
                   else _direct.AUTO_ALPHAS_PER_ROW)
        np.testing.assert_allclose(np.unique(est.cv_results_["param_alpha"]),
                                   np.sort(np.asarray(per_row) * n), rtol=1e-12)
    assert modes == {20: "loo", 40: "loo", 41: 5, 100: 5, 101: "loo"}
    # a scorer still needs folds given, whatever the rows
    X = rng.uniform(size=(60, 2))
    with pytest.raises(ValueError, match="scoring needs cross-validation folds"):
        RBRegressorCV(n_grids=8, scoring="r2", random_state=0).fit(X, X[:, 0])
    # cd keeps its plain 5 folds; a given cv is used as given
    est = RBRegressorCV(n_grids=8, sigma_factors=(1.0,), alphas=(1e-3,), cv=3,
                        random_state=0, n_jobs=1).fit(X, X[:, 0])
    assert est.n_splits_ == 3


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_automatic_folds_score_as_grid_search_with_shuffled_folds(monkeypatch, task):
    # cv=None on 2 * LOO_MAX_ROWS < N <= KFOLD_MAX_ROWS: every candidate's fold scores, the
    # ranks, the choice and the refit are GridSearchCV's over RBRegressor / RBClassifier
    # with KFold / StratifiedKFold(5, shuffle=True, random_state=seed) and the folds'
    # alphas DEFAULT_ALPHAS_CG_PER_ROW * N
    from rbcd import model_selection
    from rbcd.solvers import _direct

    monkeypatch.setattr(_direct, "LOO_MAX_ROWS", 50)
    rng = np.random.default_rng(6)
    n, seed = 150, 7
    X = rng.uniform(-1, 1, size=(n, 3))
    f = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2]
    if task == "regression":
        y = f + 0.2 * rng.standard_normal(n)
        ours_cls, model, folds = RBRegressorCV, RBRegressor, KFold
    else:
        y = np.digitize(f + 0.2 * rng.standard_normal(n), [-0.4, 0.4])     # 3 classes
        ours_cls, model, folds = RBClassifierCV, RBClassifier, StratifiedKFold
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ours = ours_cls(n_grids=16, sigma_factors=FACTORS, tol=1e-10, random_state=seed,
                        n_jobs=1).fit(X, y)
    alphas = [float(a) * n for a in model_selection.DEFAULT_ALPHAS_CG_PER_ROW]
    sigmas = [float(fc * scale_sigma(X)) for fc in FACTORS]
    gs = GridSearchCV(model(n_grids=16, tol=1e-10, random_state=seed, n_jobs=1),
                      {"sigma": sigmas, "alpha": alphas},
                      cv=folds(5, shuffle=True, random_state=seed)).fit(X, y)
    res, ref = ours.cv_results_, gs.cv_results_
    assert ours.n_splits_ == 5
    assert [p["alpha"] for p in res["params"]] == pytest.approx([p["alpha"] for p in ref["params"]],
                                                                rel=1e-15)
    for k in range(5):
        np.testing.assert_allclose(res[f"split{k}_test_score"], ref[f"split{k}_test_score"],
                                   rtol=1e-7, atol=1e-9)
    assert ours.best_index_ == gs.best_index_
    np.testing.assert_allclose(ours.predict(X), gs.predict(X), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("est", [
    RBRegressorCV(sigma_factors=(1.0,), alphas=(1.0,), n_grids=8, random_state=0),
    RBClassifierCV(sigma_factors=(1.0,), alphas=(1.0,), n_grids=8, random_state=0),
    RBRegressor(n_grids=8, random_state=0),
    RBClassifier(n_grids=8, random_state=0),
], ids=lambda e: type(e).__name__)
def test_column_names_are_checked_at_prediction(est):
    """Fitted on a data frame, the searches (and the models) refuse reordered or renamed
    columns at prediction (scikit-learn's own check) and predict the same frame without
    a warning, as the same rows as an array; the searches passed X on to their best
    model unchecked."""
    import pandas as pd
    from sklearn.utils.estimator_checks import check_dataframe_column_names_consistency

    check_dataframe_column_names_consistency(type(est).__name__, est)
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (120, 3))
    y = X[:, 0] + 3 * X[:, 1] ** 2
    if hasattr(est, "predict_proba") or "Classifier" in type(est).__name__:
        y = (y > np.median(y)).astype(int)
    df = pd.DataFrame(X, columns=list("abc"))
    est.fit(df, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = est.predict(df)
    with pytest.warns(UserWarning, match="feature names"):
        assert np.array_equal(est.predict(X), got)
    with pytest.raises(ValueError, match="feature names"):
        est.predict(df[["b", "a", "c"]])


def test_search_parameter_and_target_errors_name_what_is_wrong():
    """The searches refuse what the models refuse (bools for n_grids and sigma, a 2-D or
    boolean grid, string regression targets) with messages that name it, and a penalty of
    0 under leave-one-out (undefined where the fit reproduces every row) warns, or is
    an error when no candidate has a score."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (150, 3))
    y = X[:, 0] + 3 * X[:, 1] ** 2
    one = dict(sigma_factors=(1.0,), alphas=(1.0,), random_state=0)
    for kwargs, match in ((dict(n_grids=True), "n_grids"), (dict(sigma=True), "sigma"),
                          (dict(sigma_factors=[[1.0, 2.0]]), "sigma_factors"),
                          (dict(sigma_factors=[True, False]), "sigma_factors")):
        with pytest.raises(ValueError, match=match):
            RBRegressorCV(**{**one, **kwargs}).fit(X, y)
    with pytest.raises(ValueError, match="y must be numeric"):
        RBRegressorCV(**one).fit(X, y.astype(str))
    with pytest.warns(UserWarning, match=r"candidates \(alpha 0\) have no leave-one-out"):
        search = RBRegressorCV(alphas=[0.0, 1e-3], sigma_factors=(1.0,), random_state=0,
                               n_grids=64).fit(X, y)
    assert search.best_params_["alpha"] == 1e-3
    assert np.isneginf(search.cv_results_["mean_test_score"]).any()
    with pytest.raises(ValueError, match="no candidate could be chosen"):
        RBRegressorCV(alphas=[0.0], sigma_factors=(1.0,), random_state=0, n_grids=64).fit(X, y)


def test_groups_reach_a_group_splitter():
    # cv=GroupKFold() had no way to receive the groups (fit took no groups): now fit's
    # groups go to the splitter, as GridSearchCV's do
    from sklearn.model_selection import GroupKFold

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = (X[:, 0] > 0).astype(int)
    g = np.arange(80) % 4
    kw = dict(n_grids=8, sigma_factors=(0.5, 2.0), alphas=(0.01, 1.0), random_state=0, n_jobs=1)
    ours = RBClassifierCV(cv=GroupKFold(4), **kw).fit(X, y, groups=g)
    given = RBClassifierCV(cv=list(GroupKFold(4).split(X, y, g)), **kw).fit(X, y)
    np.testing.assert_array_equal(ours.cv_results_["mean_test_score"],
                                  given.cv_results_["mean_test_score"])
    with pytest.raises(ValueError, match="groups"):
        RBRegressorCV(cv=GroupKFold(4), **kw).fit(X, X[:, 0])        # the splitter's own error
    with pytest.raises(ValueError, match="groups are for a cv splitter"):
        RBRegressorCV(**kw).fit(X, X[:, 0], groups=g)
    with pytest.raises(ValueError, match="groups has 79 entries"):
        RBRegressorCV(cv=GroupKFold(4), **kw).fit(X, X[:, 0], groups=g[:79])


def test_probabilities_are_announced_before_fit_as_after():
    # hasattr(predict_proba) of an unfitted search was False (it answered solver == "cd")
    # while the fitted one, whose refit is calibrated, had it; predict_log_proba was missing
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = (X[:, 0] > 0).astype(int)
    for solver in ("auto", "cd"):
        search = RBClassifierCV(n_grids=8, sigma_factors=(1.0,), alphas=(0.01,), cv=2,
                                solver=solver, random_state=0, n_jobs=1)
        assert hasattr(search, "predict_proba") and hasattr(search, "predict_log_proba")
        search.fit(X, y)
        assert hasattr(search, "predict_proba")
        np.testing.assert_allclose(np.exp(search.predict_log_proba(X)), search.predict_proba(X))


@pytest.mark.parametrize("cls", [RBRegressorCV, RBClassifierCV], ids=lambda c: c.__name__)
def test_best_estimator_and_its_binning_take_the_search_data_frames(cls):
    """Fitted on a data frame, the search's best_estimator_ (and its binning_) check the
    frame's column names as a model fitted on it does (GridSearchCV refits on the frame):
    the frame without a warning, reordered columns an error, an array one warning; the
    search's own methods with an array warn once, in the search's name, not again in the
    model's."""
    import pandas as pd

    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (90, 3))
    y = X[:, 0] + 3 * X[:, 1] ** 2
    if cls is RBClassifierCV:
        y = (y > np.median(y)).astype(int)
    df = pd.DataFrame(X, columns=list("abc"))
    search = cls(sigma_factors=(1.0,), alphas=(1.0,), n_grids=8, random_state=0).fit(df, y)
    best = search.best_estimator_
    np.testing.assert_array_equal(best.feature_names_in_, list("abc"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = best.predict(df)
        Z = best.binning_.transform(df)
    np.testing.assert_array_equal(got, search.predict(df))
    assert (Z != best.binning_.transform(X)).nnz == 0
    with pytest.raises(ValueError, match="feature names"):
        best.predict(df[["b", "a", "c"]])
    with pytest.raises(ValueError, match="feature names"):
        best.binning_.transform(df[["b", "a", "c"]])
    methods = ["predict"] + (["decision_function", "predict_proba"]
                             if cls is RBClassifierCV else [])
    for name in methods:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            np.testing.assert_array_equal(getattr(search, name)(X), getattr(search, name)(df))
        said = [str(w.message) for w in seen if "feature names" in str(w.message)]
        assert said == [f"X does not have valid feature names, but {cls.__name__} was "
                        f"fitted with feature names"], said
