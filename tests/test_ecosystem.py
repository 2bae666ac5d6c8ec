"""rbcd's estimators inside the scikit-learn ecosystem, as a practitioner uses them.

Pipelines and column transformers over data frames, searches (threads and loky processes),
cross_val_predict, the meta-estimators (calibration, stacking, voting, bagging,
one-vs-rest, multi-output, transformed targets), inspection (permutation importance,
partial dependence), feature selection on the random binning features, clone, pickle and
joblib round trips, set_output, metadata routing of sample_weight, and the label and input
containers scikit-learn accepts (string / bool / negative / Categorical labels, pandas
Series with their own index, nullable pandas dtypes, lists of lists, float32).

Each test checks what could go wrong: an error, a result no better than chance, a
spurious warning (``warnings.simplefilter("error")``), or shapes, dtypes and the order of
``classes_``. Small data throughout (a few hundred rows, tens of grids).
"""
import io
import pickle
import warnings

import joblib
import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
from sklearn.base import clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor
from sklearn.ensemble import BaggingClassifier, StackingClassifier, VotingClassifier
from sklearn.feature_selection import SelectFromModel
from sklearn.inspection import partial_dependence, permutation_importance
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.metrics import get_scorer
from sklearn.model_selection import (GridSearchCV, StratifiedKFold, cross_val_predict,
                                     cross_validate)
from sklearn.multiclass import OneVsRestClassifier
from sklearn.multioutput import MultiOutputRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.svm import LinearSVC

import rbcd
from rbcd.datasets import make_checkerboard
from rbcd.model_selection import RBClassifierCV, RBRegressorCV

pd = pytest.importorskip("pandas")


def _checkerboard(n=400, n_features=2, seed=0):
    """A learnable two-class problem (2 informative features, 2 cells a side)."""
    return make_checkerboard(n, n_features=n_features, n_cells=2, random_state=seed)


def _three_classes(X):
    return (X[:, 0] > 0.3).astype(int) + (X[:, 1] > 0.6)


def _regression(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 3))
    return X, np.sin(4 * X[:, 0]) + X[:, 1] ** 2


def _clf(**kw):
    return rbcd.RBClassifier(n_grids=64, random_state=0, **kw)


def _reg(**kw):
    return rbcd.RBRegressor(n_grids=64, random_state=0, **kw)


@pytest.fixture
def no_warnings():
    """Any warning is an error inside the test (spurious feature-name, data-conversion or
    future warnings)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# ---------------------------------------------------------------------------------------
# Defects found by this QA pass (each test failed before its fix)
# ---------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:.*of the grid:UserWarning")   # the search's edge note
@pytest.mark.parametrize("solver", ["auto", "cg"])
@pytest.mark.parametrize("scoring,n_classes", [("neg_log_loss", 2), ("neg_brier_score", 2),
                                               ("roc_auc_ovr", 3)])
def test_search_probability_scorers_with_ridge_solver(solver, scoring, n_classes):
    # RBClassifierCV with folds scored each fold's bare ridge solver, which has no
    # predict_proba: probability scorers raised AttributeError, although GridSearchCV over
    # RBClassifier (whose calibration="train" gives probabilities) scores them. The scores
    # are now GridSearchCV's.
    X, y = _checkerboard(240)
    if n_classes == 3:
        y = _three_classes(X)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    search = RBClassifierCV(n_grids=32, cv=cv, scoring=scoring, solver=solver,
                            sigma_factors=[1.0], alphas=[0.3, 3.0], tol=1e-10,
                            random_state=0).fit(X, y)
    grid = GridSearchCV(
        rbcd.RBClassifier(n_grids=32, sigma=search.sigma_, solver=solver, linear=0,
                          tol=1e-10, random_state=0),
        {"alpha": [0.3, 3.0]}, cv=cv, scoring=scoring).fit(X, y)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    np.testing.assert_allclose(search.cv_results_["mean_test_score"],
                               grid.cv_results_["mean_test_score"], rtol=1e-7, atol=1e-9)
    assert search.best_params_["alpha"] == grid.best_params_["alpha"]


def test_search_callable_scorer_sees_the_fitted_solver():
    # a callable scorer gets the fold's candidate: its classes_, its probabilities and the
    # solver's fitted attributes
    X, y = _checkerboard(200)
    seen = []

    def scorer(estimator, X_val, y_val):
        seen.append((estimator.coef_.shape[-1] == X_val.shape[1],
                     estimator.predict_proba(X_val).shape == (X_val.shape[0], 2)))
        return float(np.mean(estimator.predict(X_val) == y_val))

    search = RBClassifierCV(n_grids=16, cv=2, scoring=scorer, sigma_factors=[1.0],
                            alphas=[1.0], random_state=0).fit(X, y)
    assert seen and all(a and b for a, b in seen)
    assert search.best_score_ > 0.8


@pytest.mark.filterwarnings("ignore:.*of the grid:UserWarning")   # the search's edge note
def test_search_probability_scorer_with_sample_weight():
    # the fold's calibration is weighted by the fold's sample_weight, as RBClassifier's is
    X, y = _checkerboard(240)
    w = np.random.default_rng(0).uniform(0.2, 2.0, y.shape[0])
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    search = RBClassifierCV(n_grids=32, cv=cv, scoring="neg_log_loss", sigma_factors=[1.0],
                            alphas=[0.3, 3.0], random_state=0).fit(X, y, sample_weight=w)
    with sklearn.config_context(enable_metadata_routing=True):
        model = rbcd.RBClassifier(n_grids=32, sigma=search.sigma_, linear=0,
                                  random_state=0).set_fit_request(sample_weight=True)
        scorer = get_scorer("neg_log_loss").set_score_request(sample_weight=True)
        grid = GridSearchCV(model, {"alpha": [0.3, 3.0]}, cv=cv, scoring=scorer).fit(
            X, y, sample_weight=w)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"],
                               grid.cv_results_["mean_test_score"], rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("solver", ["auto", "cg", "direct"])
@pytest.mark.parametrize("labels", [np.array(["b", "a", "c"]), np.array([-3, -1, -2])])
def test_ovo_class_weight_dict_leaving_out_a_class(solver, labels):
    # scikit-learn's rule (and RBClassifier's docstring): a class_weight dict that names
    # only labels of y gives the labels it leaves out weight 1. One-vs-one computed the
    # weights on each pair's two labels, where the dict names a label the pair lacks and
    # leaves one of the pair out: "The classes, [...], are not in class_weight".
    X, _ = _checkerboard(240)
    y = labels[_three_classes(X)]
    partial = {labels[0]: 3.0, labels[1]: 1.0}
    full = {**partial, labels[2]: 1.0}
    a = _clf(multi_class="ovo", solver=solver, class_weight=partial).fit(X, y)
    b = _clf(multi_class="ovo", solver=solver, class_weight=full).fit(X, y)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert a.score(X, y) > 0.9
    with pytest.raises(ValueError, match="not in class_weight"):   # still scikit-learn's rule
        _clf(multi_class="ovo", class_weight={labels[0]: 3.0, "zz": 1.0}).fit(X, y)


@pytest.mark.filterwarnings("ignore:.*of the grid:UserWarning")   # the search's edge note
def test_search_class_weight_dict_leaving_out_a_class():
    # RBClassifierCV's default leave-one-out search scores one-vs-one too (multi_class=
    # "auto"), with the same per-pair weights: it raised for such a dict
    X, _ = _checkerboard(240)
    y = np.array(["b", "a", "c"])[_three_classes(X)]
    a = RBClassifierCV(n_grids=32, sigma_factors=[0.5, 1.0], random_state=0,
                       class_weight={"a": 3.0, "b": 1.0}).fit(X, y)
    b = RBClassifierCV(n_grids=32, sigma_factors=[0.5, 1.0], random_state=0,
                       class_weight={"a": 3.0, "b": 1.0, "c": 1.0}).fit(X, y)
    np.testing.assert_array_equal(a.cv_results_["mean_test_score"],
                                  b.cv_results_["mean_test_score"])
    assert "param_multi_class" in a.cv_results_
    assert a.score(X, y) > 0.9


# ---------------------------------------------------------------------------------------
# Integrations that work: kept working
# ---------------------------------------------------------------------------------------
def test_column_transformer_on_mixed_data_frame(no_warnings):
    X, y = _checkerboard(400, n_features=3)
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    df["colour"] = np.random.default_rng(0).choice(["red", "green", "blue"], len(df))
    pre = ColumnTransformer([("num", StandardScaler(), ["a", "b", "c"]),
                             ("cat", OneHotEncoder(), ["colour"])])
    model = make_pipeline(pre, _clf()).fit(df.iloc[:300], y[:300])
    assert model.score(df.iloc[300:], y[300:]) > 0.85
    proba = model.predict_proba(df.iloc[300:])
    assert proba.shape == (100, 2) and np.allclose(proba.sum(axis=1), 1.0)


@pytest.mark.parametrize("linear", [rbcd.RidgeCGClassifier(), LogisticRegression(),
                                    SGDClassifier(random_state=0), LinearSVC(),
                                    rbcd.CDClassifier()],
                         ids=lambda e: type(e).__name__)
def test_random_binning_features_for_linear_classifiers(linear, no_warnings):
    X, y = _checkerboard(400)
    model = make_pipeline(rbcd.RandomBinning(n_grids=64, random_state=0), linear)
    assert model.fit(X[:300], y[:300]).score(X[300:], y[300:]) > 0.85


def test_grid_search_threads_and_processes_agree():
    X, y = _checkerboard(300)
    grid = {"sigma": ["scale", 0.5], "alpha": ["auto", 1.0]}
    serial = GridSearchCV(_clf(), grid, cv=3).fit(X, y)
    with joblib.parallel_backend("threading", n_jobs=2):
        threads = GridSearchCV(_clf(), grid, cv=3, n_jobs=2).fit(X, y)
    loky = GridSearchCV(_clf(), grid, cv=3, n_jobs=2).fit(X, y)
    for other in (threads, loky):
        np.testing.assert_allclose(other.cv_results_["mean_test_score"],
                                   serial.cv_results_["mean_test_score"])
    assert serial.best_score_ > 0.9


def test_cross_val_predict_methods_and_class_order(no_warnings):
    X, y = _checkerboard(300)
    labels = np.array(["zebra", "ant", "moth"])
    y3 = labels[_three_classes(X)]
    proba = cross_val_predict(_clf(), X, y3, cv=3, method="predict_proba")
    decision = cross_val_predict(_clf(), X, y3, cv=3, method="decision_function")
    classes = np.sort(labels)                     # classes_ order: sorted labels
    assert proba.shape == decision.shape == (300, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.mean(classes[proba.argmax(axis=1)] == y3) > 0.9
    assert np.array_equal(proba.argmax(axis=1), decision.argmax(axis=1))
    d2 = cross_val_predict(_clf(), X, y, cv=3, method="decision_function")
    assert d2.shape == (300,) and np.mean((d2 > 0) == y) > 0.9


@pytest.mark.parametrize("make", [
    lambda: CalibratedClassifierCV(_clf(), cv=3),
    lambda: VotingClassifier([("rb", _clf()), ("cd", _clf(solver="cd"))], voting="soft"),
    lambda: StackingClassifier([("rb", _clf()), ("lr", LogisticRegression())], cv=3),
    lambda: BaggingClassifier(_clf(), n_estimators=3, random_state=0),
    lambda: OneVsRestClassifier(_clf()),
], ids=["calibrated", "voting_soft", "stacking", "bagging", "one_vs_rest"])
def test_meta_estimators(make, no_warnings):
    X, y = _checkerboard(400)
    y3 = _three_classes(X)
    model = make().fit(X[:300], y3[:300])
    assert model.score(X[300:], y3[300:]) > 0.9
    proba = model.predict_proba(X[300:])
    assert proba.shape == (100, 3) and np.allclose(proba.sum(axis=1), 1.0)


def test_multi_output_regression(no_warnings):
    X, y = _regression()
    Y = np.c_[y, np.cos(3 * X[:, 2])]
    own = _reg().fit(X[:300], Y[:300])
    wrapped = MultiOutputRegressor(_reg()).fit(X[:300], Y[:300])
    ttr = TransformedTargetRegressor(_reg(), transformer=StandardScaler()).fit(X[:300], Y[:300])
    for model in (own, wrapped, ttr):
        assert model.predict(X[300:]).shape == (100, 2)
        assert model.score(X[300:], Y[300:]) > 0.8
    assert own.coef_.shape[0] == 2
    assert _reg().fit(X, Y[:, :1]).predict(X[:5]).shape == (5, 1)   # (n, 1) stays 2-D


def test_permutation_importance_finds_the_informative_features(no_warnings):
    X, y = _checkerboard(400, n_features=4)        # features 0 and 1 informative
    model = _clf().fit(X[:300], y[:300])
    imp = permutation_importance(model, X[300:], y[300:], n_repeats=3,
                                 random_state=0).importances_mean
    assert min(imp[:2]) > 0.2 and max(imp[2:]) < 0.05


def test_partial_dependence_and_display(no_warnings):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.inspection import PartialDependenceDisplay

    X, y = _checkerboard(300)
    df = pd.DataFrame(X, columns=["u", "v"])
    model = _clf().fit(df, y)
    pdp = partial_dependence(model, df, ["u"], grid_resolution=8)
    assert pdp["average"].shape == (1, 8)
    assert np.all((pdp["average"] >= 0) & (pdp["average"] <= 1))     # probabilities
    display = PartialDependenceDisplay.from_estimator(model, df, ["u", ("u", "v")],
                                                      grid_resolution=6)
    assert len(display.pd_results) == 2
    plt.close("all")


def test_select_from_model_on_random_binning_features(no_warnings):
    X, y = _regression()
    Z = rbcd.RandomBinning(n_grids=32, random_state=0).fit_transform(X)
    selector = SelectFromModel(rbcd.CDRegressor(alpha=1e-3)).fit(Z, y)
    kept = selector.transform(Z)
    assert sp.issparse(kept) and 0 < kept.shape[1] < Z.shape[1]
    model = make_pipeline(rbcd.RandomBinning(n_grids=32, random_state=0),
                          SelectFromModel(rbcd.CDRegressor(alpha=1e-3)), rbcd.RidgeCG())
    assert model.fit(X[:300], y[:300]).score(X[300:], y[300:]) > 0.5


def test_clone_of_fitted_estimators_is_unfitted():
    X, y = _checkerboard(200)
    for fitted in (_clf().fit(X, y), make_pipeline(StandardScaler(), _clf()).fit(X, y),
                   RBClassifierCV(n_grids=32, sigma_factors=[1.0], random_state=0).fit(X, y)):
        copy = clone(fitted)
        assert copy.get_params(deep=False).keys() == fitted.get_params(deep=False).keys()
        with pytest.raises(sklearn.exceptions.NotFittedError):
            copy.predict(X)


@pytest.mark.parametrize("make", [
    lambda: _clf(), lambda: _clf(solver="cd"), lambda: _reg(),
    lambda: make_pipeline(StandardScaler(), _clf()),
    lambda: make_pipeline(rbcd.RandomBinning(n_grids=32, random_state=0),
                          rbcd.RidgeCGClassifier()),
    lambda: RBClassifierCV(n_grids=32, sigma_factors=[1.0], random_state=0),
    lambda: rbcd.DoublyStochasticKernelClassifier(random_state=0, max_epochs=5),
    lambda: rbcd.SparseRandomFeatures(random_state=0, n_iter=2),
], ids=["rb", "rb_cd", "rb_regressor", "pipeline", "binning_pipeline", "search", "dsekl",
        "sparse_rf"])
def test_pickle_and_joblib_round_trips(make, tmp_path):
    X, y = _checkerboard(200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # DSEKL / SRF with few epochs: convergence
        model = make().fit(X, y)
    expected = model.predict(X)
    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    buffer.seek(0)
    path = tmp_path / "model.joblib"
    joblib.dump(model, path)
    for loaded in (pickle.loads(pickle.dumps(model)), joblib.load(buffer),
                   joblib.load(path, mmap_mode="r")):        # read-only fitted arrays
        np.testing.assert_array_equal(loaded.predict(X), expected)
        if hasattr(model, "predict_proba"):
            np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_set_output_pandas_on_a_pipeline_ending_in_a_predictor(no_warnings):
    X, y = _checkerboard(300)
    df = pd.DataFrame(X, columns=["u", "v"])
    plain = make_pipeline(StandardScaler(), _clf()).fit(df, y)
    framed = make_pipeline(StandardScaler(), _clf()).set_output(transform="pandas").fit(df, y)
    np.testing.assert_array_equal(framed.predict_proba(df), plain.predict_proba(df))
    expected = plain.predict(df)
    with sklearn.config_context(transform_output="pandas"):   # the global setting too
        model = make_pipeline(StandardScaler(), _clf()).fit(df, y)
        np.testing.assert_array_equal(model.predict(df), expected)


def test_sample_weight_through_pipeline_by_metadata_routing(no_warnings):
    X, y = _checkerboard(300)
    w = np.random.default_rng(1).uniform(0.2, 2.0, y.shape[0])
    direct = make_pipeline(StandardScaler(), _clf()).fit(X, y, rbclassifier__sample_weight=w)
    unweighted = make_pipeline(StandardScaler(), _clf()).fit(X, y)
    with sklearn.config_context(enable_metadata_routing=True):
        model = make_pipeline(
            StandardScaler().set_fit_request(sample_weight=False),
            _clf().set_fit_request(sample_weight=True).set_score_request(sample_weight=True))
        model.fit(X, y, sample_weight=w)
        results = cross_validate(model, X, y, cv=3, params={"sample_weight": w})
    np.testing.assert_array_equal(model.decision_function(X), direct.decision_function(X))
    assert not np.array_equal(model.decision_function(X), unweighted.decision_function(X))
    assert np.all(results["test_score"] > 0.9)


@pytest.mark.parametrize("labels", [np.array(["neg", "pos"]), np.array([False, True]),
                                    np.array([-1, -5]), np.array(["b", "c", "a"]),
                                    np.array([7, -2, -9])],
                         ids=["str", "bool", "negative", "str3", "negative3"])
@pytest.mark.parametrize("solver", ["auto", "cd"])
def test_class_labels(labels, solver, no_warnings):
    X, y01 = _checkerboard(300)
    y = labels[_three_classes(X) if labels.shape[0] == 3 else y01]
    model = _clf(solver=solver).fit(X, y)
    assert np.array_equal(model.classes_, np.sort(labels))
    pred = model.predict(X)
    assert pred.dtype == y.dtype and np.mean(pred == y) > 0.9
    proba = model.predict_proba(X)
    np.testing.assert_array_equal(model.classes_[proba.argmax(axis=1)], pred)


def test_categorical_labels_and_series_with_their_own_index(no_warnings):
    X, y01 = _checkerboard(300)
    y = pd.Series(pd.Categorical(np.array(["no", "yes"])[y01]), index=np.arange(300) * 7 + 5)
    Xf = pd.DataFrame(X, columns=["u", "v"], index=np.arange(300)[::-1])   # other index
    model = _clf().fit(Xf, y)
    assert model.classes_.tolist() == ["no", "yes"]
    assert model.score(Xf, y) > 0.9
    reg = _reg().fit(Xf, pd.Series(X[:, 0] + X[:, 1], index=np.arange(300) + 1000))
    assert reg.score(Xf, X[:, 0] + X[:, 1]) > 0.9


@pytest.mark.parametrize("make", [_clf, lambda: RBClassifierCV(n_grids=32, sigma_factors=[1.0],
                                                               random_state=0)],
                         ids=["model", "search"])
def test_input_containers_give_the_same_predictions(make, no_warnings):
    warnings.filterwarnings("ignore", message=".*of the grid")   # the search's edge note
    X, y = _checkerboard(300)
    X[:, 1] = np.round(X[:, 1] * 8)                  # an integer-valued column
    expected = make().fit(X, y).predict(X)
    nullable = pd.DataFrame({"u": pd.array(X[:, 0], dtype="Float64"),
                             "v": pd.array(X[:, 1].astype(int), dtype="Int64")})
    assert np.array_equal(make().fit(nullable, y).predict(nullable), expected)
    assert np.array_equal(make().fit(X.tolist(), y.tolist()).predict(X.tolist()), expected)
    # float32 rows hold other values than float64 ones: the same fit up to a few rows
    f32 = make().fit(X.astype(np.float32), y).predict(X.astype(np.float32))
    assert np.mean(f32 == expected) > 0.95


def test_feature_name_warnings_are_scikit_learns():
    X, y = _checkerboard(200)
    df = pd.DataFrame(X, columns=["u", "v"])
    for model in (_clf().fit(df, y), RBClassifierCV(n_grids=32, sigma_factors=[1.0],
                                                    random_state=0).fit(df, y)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model.predict_proba(df)                  # names match: no warning
        with pytest.warns(UserWarning, match="does not have valid feature names") as record:
            model.predict(X)
        assert len(record) == 1                      # once, not once per inner step
        with pytest.raises(ValueError, match="feature names"):
            model.predict(df[["v", "u"]])
