"""RBRegressor / RBClassifier: random binning + CG ridge or coordinate descent."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import is_classifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV
from sklearn.utils.estimator_checks import parametrize_with_checks

import rbcd_ref
from rbcd.datasets import make_checkerboard, make_nonlinear_regression
from rbcd.binning.random_binning import RandomBinning
from rbcd.solvers.cd import CDClassifier, CDRegressor
from rbcd.models import RBClassifier, RBRegressor
from rbcd.model_selection import RBClassifierCV, RBRegressorCV
from rbcd.related.sparse_rf import SparseRandomFeatures
from rbcd.solvers.cg import RidgeCG, RidgeCGClassifier


@pytest.fixture(scope="module")
def board():
    X, y = make_checkerboard(n_samples=1000, n_features=2, n_informative=2, random_state=0)
    return X[:700], y[:700], X[700:], y[700:]


@pytest.fixture(scope="module")
def wave():
    X, y = make_nonlinear_regression(n_samples=800, n_features=4, noise=0.1, random_state=1)
    return X[:600], y[:600], X[600:], y[600:]


# ------------------------------------------------------------------ it learns


@pytest.mark.parametrize("solver", ["cg", "cd"])
def test_checkerboard_beats_linear(board, solver):
    Xt, yt, Xv, yv = board
    kw = dict(alpha=1e-4, max_epochs=300, n_jobs=1) if solver == "cd" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RBClassifier(n_grids=32, sigma=0.05, solver=solver, random_state=0, **kw)
        model.fit(Xt, yt)
    acc = model.score(Xv, yv)
    linear = LogisticRegression().fit(Xt, yt).score(Xv, yv)
    assert acc >= 0.9, acc
    assert linear <= 0.65, linear
    assert set(model.predict(Xv)) <= set(model.classes_)


@pytest.mark.parametrize("solver", ["cg", "cd"])
def test_regression_beats_linear(wave, solver):
    Xt, yt, Xv, yv = wave
    kw = dict(alpha=1e-5, l1_ratio=0.0, max_epochs=200, n_jobs=1) if solver == "cd" else dict(alpha=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = RBRegressor(n_grids=64, sigma=2.0, solver=solver, random_state=0, **kw)
        model.fit(Xt, yt)
    r2 = model.score(Xv, yv)
    linear = Ridge().fit(Xt, yt).score(Xv, yv)
    assert r2 >= 0.8, r2
    assert r2 >= linear + 0.2, (r2, linear)


def test_multiclass_and_string_labels(board):
    Xt, yt, Xv, yv = board
    labels = np.array(["red", "green", "blue"])[(Xt[:, 0] * 3).astype(int)]
    model = RBClassifier(n_grids=16, sigma=0.2, random_state=0).fit(Xt, labels)
    np.testing.assert_array_equal(model.classes_, ["blue", "green", "red"])
    assert model.decision_function(Xv).shape == (Xv.shape[0], 3)
    assert model.score(Xt, labels) > 0.95


def test_multioutput_regression(wave):
    Xt, yt, _, _ = wave
    Y = np.column_stack([yt, -2 * yt])
    model = RBRegressor(n_grids=16, sigma=2.0, alpha=0.1, random_state=0).fit(Xt, Y)
    pred = model.predict(Xt)
    assert pred.shape == Y.shape
    np.testing.assert_allclose(pred[:, 1], -2 * pred[:, 0], rtol=1e-6, atol=1e-8)


# ----------------------------------------------------------- parameters flow


def test_defaults_depend_on_solver(board):
    Xt, yt, _, _ = board
    cg = RBClassifier(n_grids=8, random_state=0).fit(Xt, yt)
    assert isinstance(cg.solver_, RidgeCGClassifier)
    # ridge: the penalty chosen from the data (alpha="auto"), tol 1e-3
    assert cg.solver_.alpha == "auto" and cg.solver_.tol == 1e-3 and cg.alpha_ > 0
    # alpha=None: 1e-4 per training row in Ridge's sum-of-squares units
    fixed = RBClassifier(n_grids=8, alpha=None, random_state=0).fit(Xt, yt)
    assert fixed.solver_.alpha == 1e-4 * Xt.shape[0]
    w = np.full(Xt.shape[0], 3.0)
    assert RBClassifier(n_grids=8, alpha=None, random_state=0).fit(
        Xt, yt, sample_weight=w).solver_.alpha == 1e-4 * 3.0 * Xt.shape[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cd = RBClassifier(n_grids=8, solver="cd", n_jobs=1, random_state=0).fit(Xt, yt)
        cdr = RBRegressor(n_grids=8, solver="cd", n_jobs=1, random_state=0).fit(Xt, yt.astype(float))
    assert isinstance(cd.solver_, CDClassifier) and isinstance(cdr.solver_, CDRegressor)
    # cd: alpha="auto" is the held-out path's choice (one of the alphas it ran), tol 1e-4,
    # max_epochs 1000; alpha=None the fixed 1e-4 in mean-loss units
    assert cd.solver_.alpha == "auto" and cd.solver_.tol == 1e-4
    assert cd.solver_.max_epochs == 1000 and cd.alpha_ in cd.solver_.alphas_
    assert cdr.alpha_ in cdr.solver_.alphas_ and cdr.alpha_ != 1e-4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cd_none = RBClassifier(n_grids=8, solver="cd", alpha=None, n_jobs=1,
                               random_state=0).fit(Xt, yt)
    assert cd_none.solver_.alpha == 1e-4 and cd_none.alpha_ == 1e-4
    assert cd.solver_.loss == "logistic" and cdr.solver_.loss == "squared"
    assert isinstance(RBRegressor(n_grids=8).fit(Xt, yt.astype(float)).solver_, RidgeCG)
    assert isinstance(cg.binning_, RandomBinning)
    assert cg.binning_.widths_.shape == (8, 2)
    assert cg.n_features_in_ == 2
    # n_grids="auto": 256 grids up to 64 features, 512 above; 1,024 on small data
    from rbcd.models import SMALL_DATA_ENTRIES, SMALL_DATA_GRIDS, auto_n_grids

    edge = SMALL_DATA_ENTRIES // SMALL_DATA_GRIDS
    assert edge == 2048
    assert [auto_n_grids(d, n) for d, n in ((2, edge + 1), (66, edge + 1), (2, edge),
                                            (66, edge), (2, None), (2, 4096), (2, 4097),
                                            (66, 4097), (2, 10**6))] \
        == [512, 512, 1024, 1024, 256, 512, 256, 512, 256]
    assert RBRegressor(random_state=0).fit(Xt[:50], yt[:50]).binning_.n_grids == 1024
    wide = np.tile(Xt[:50], 33)
    assert RBRegressor(random_state=0).fit(wide, yt[:50]).binning_.n_grids == 1024
    assert RBRegressor(n_grids=8, random_state=0).fit(Xt[:50], yt[:50]).binning_.n_grids == 8
    # very wide small data: each grid holds numbers per feature, so the raise stops where
    # grids x features would pass SMALL_DATA_ENTRIES (never below the wide default, 512)
    assert [auto_n_grids(d, 50) for d in (2048, 2049, 4096, 4097, 20000)] \
        == [1024, 512, 512, 512, 512]
    # regression past the small-data rows: up to REGRESSION_GRIDS within REGRESSION_ENTRIES
    # (grids x features still within SMALL_DATA_ENTRIES); up to 2,048 rows as classification
    from rbcd.models import REGRESSION_ENTRIES, REGRESSION_GRIDS

    assert (REGRESSION_GRIDS, REGRESSION_ENTRIES) == (2048, 1 << 24)
    rows = (1, 2048, 2049, 4096, 4097, 8192, 8193, 16384, 16385, 32768, 32769, 65537, 10**6)
    assert [auto_n_grids(8, n, regression=True) for n in rows] \
        == [1024, 1024, 2048, 2048, 2048, 2048, 1024, 1024, 512, 512, 256, 256, 256]
    assert [auto_n_grids(8, n) for n in rows] \
        == [1024, 1024, 512, 512, 256, 256, 256, 256, 256, 256, 256, 256, 256]
    assert [auto_n_grids(d, 5000, regression=True) for d in (66, 1024, 1025, 4096, 20000)] \
        == [2048, 2048, 1024, 512, 512]
    assert auto_n_grids(66, 10**6, regression=True) == 512
    big = np.random.default_rng(0).uniform(size=(2049, 2))
    assert RBRegressor(random_state=0).fit(big, big[:, 0]).binning_.n_grids == 2048
    assert RBClassifier(random_state=0).fit(big, big[:, 0] > 0.5).binning_.n_grids == 512
    np.testing.assert_array_equal(cg.coef_, cg.solver_.coef_)
    np.testing.assert_array_equal(cg.intercept_, cg.solver_.intercept_)
    assert set(cg.fit_time_) == {"binning", "solver"}


def test_every_parameter_reaches_its_stage(board):
    Xt, yt, _, _ = board
    model = RBClassifier(n_grids=5, sigma=0.3, solver="cd", alpha=1e-3, l1_ratio=0.5,
                         loss="squared_hinge", fit_intercept=False, tol=1e-3, max_epochs=7,
                         selection="cyclic", parallel=None, class_weight="balanced",
                         dtype=np.float32, n_jobs=1, random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(Xt, yt)
    b, s = model.binning_, model.solver_
    assert (b.n_grids, b.sigma, b.dtype, b.n_jobs, b.random_state) == (5, 0.3, np.float32, 1, 3)
    assert (s.alpha, s.l1_ratio, s.loss, s.fit_intercept, s.tol, s.max_epochs) == (
        1e-3, 0.5, "squared_hinge", False, 1e-3, 7)
    assert (s.selection, s.parallel, s.class_weight, s.random_state) == (
        "cyclic", None, "balanced", 3)
    assert s.coef_.dtype == np.float32
    cg = RBRegressor(n_grids=5, solver="cg", max_iter=3, preconditioner=None, tol=1e-30,
                     random_state=0)
    with pytest.warns(ConvergenceWarning):
        cg.fit(Xt, yt.astype(float))
    assert cg.solver_.max_iter == 3 and cg.solver_.preconditioner is None
    assert cg.n_iter_[0] == 3


def test_float32_features_with_cg(board):
    Xt, yt, Xv, _ = board
    a = RBClassifier(n_grids=8, sigma=0.1, dtype=np.float32, tol=1e-8, random_state=0).fit(Xt, yt)
    b = RBClassifier(n_grids=8, sigma=0.1, tol=1e-8, random_state=0).fit(Xt, yt)
    assert a.coef_.dtype == np.float32 and b.coef_.dtype == np.float64
    np.testing.assert_allclose(a.decision_function(Xv), b.decision_function(Xv), rtol=1e-4, atol=1e-4)


def test_predict_proba_native_for_logistic_cd(board):
    Xt, yt, Xv, _ = board
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cd = RBClassifier(n_grids=8, sigma=0.1, solver="cd", n_jobs=1, random_state=0).fit(Xt, yt)
    P = cd.predict_proba(Xv)
    assert P.shape == (Xv.shape[0], 2)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    np.testing.assert_array_equal(cd.classes_[P.argmax(axis=1)], cd.predict(Xv))
    assert cd.calibration_ is None  # the logistic model's own probabilities
    assert not hasattr(RBClassifier(solver="cg", calibration=None), "predict_proba")
    assert not hasattr(RBClassifier(solver="cd", loss="squared_hinge", calibration=None),
                       "predict_proba")


@pytest.mark.parametrize("three_classes", [False, True])
def test_predict_proba_calibrated_for_cg(board, three_classes):
    """Ridge classification: probabilities from the temperature-scaled softmax of the scores,
    consistent with predict; "train" minimises the training rows' log loss over the scale,
    "holdout" beats the raw softmax of the scores on new rows."""
    from sklearn.metrics import log_loss

    Xt, yt, Xv, yv = board
    if three_classes:
        yt = yt + (Xt[:, 0] > np.median(Xt[:, 0]))
        yv = yv + (Xv[:, 0] > np.median(Xt[:, 0]))
    kw = dict(n_grids=16, sigma=0.3, n_jobs=1, random_state=0)
    train = RBClassifier(**kw).fit(Xt, yt)
    hold = RBClassifier(calibration="holdout", **kw).fit(Xt, yt)
    np.testing.assert_array_equal(train.coef_, hold.coef_)  # the model itself is the same
    for clf in (train, hold):
        P = clf.predict_proba(Xv)
        assert P.shape == (Xv.shape[0], len(clf.classes_))
        np.testing.assert_allclose(P.sum(axis=1), 1.0)
        np.testing.assert_array_equal(clf.classes_[P.argmax(axis=1)], clf.predict(Xv))
        np.testing.assert_allclose(np.log(P), clf.predict_log_proba(Xv))
        assert clf.calibration_ > 0
    assert hold.calibration_ < train.calibration_  # training scores are over-confident
    # "train": the scale is the best one on the training rows
    from rbcd._calibration import softmax_probabilities
    F = train.decision_function(Xt)
    best = log_loss(yt, train.predict_proba(Xt), labels=train.classes_)
    for a in (train.calibration_ * 0.5, train.calibration_ * 2.0):
        assert best < log_loss(yt, softmax_probabilities(F, a), labels=train.classes_)
    F = hold.decision_function(Xv)
    F = np.column_stack([-F, F]) / 2 if F.ndim == 1 else F
    raw = np.exp(F) / np.exp(F).sum(axis=1, keepdims=True)
    assert log_loss(yv, hold.predict_proba(Xv), labels=hold.classes_) < log_loss(
        yv, raw, labels=hold.classes_)


def test_grid_search_tunes_binning_and_solver(board):
    Xt, yt, Xv, yv = board
    grid = {"sigma": [0.05, 1.0], "n_grids": [4, 24], "alpha": [0.1, 10.0]}
    search = GridSearchCV(RBClassifier(n_jobs=1, random_state=0), grid, cv=3).fit(Xt, yt)
    assert search.best_params_["sigma"] == 0.05
    assert search.best_params_["n_grids"] == 24
    assert search.best_score_ >= 0.9
    assert search.score(Xv, yv) >= 0.9
    assert len(search.cv_results_["params"]) == 8


def test_reproducible_with_random_state(board):
    Xt, yt, Xv, _ = board
    for solver, extra in (("cg", {}), ("cd", {"parallel": None, "max_epochs": 5})):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            a = RBClassifier(n_grids=8, sigma=0.1, solver=solver, random_state=7, **extra).fit(Xt, yt)
            b = RBClassifier(n_grids=8, sigma=0.1, solver=solver, random_state=7, **extra).fit(Xt, yt)
            c = RBClassifier(n_grids=8, sigma=0.1, solver=solver, random_state=8, **extra).fit(Xt, yt)
        np.testing.assert_array_equal(a.decision_function(Xv), b.decision_function(Xv))
        assert not np.array_equal(a.binning_.widths_, c.binning_.widths_)


def test_cg_identical_for_one_and_two_threads():
    X, y = make_nonlinear_regression(n_samples=3000, n_features=4, random_state=2)
    a = RBRegressor(n_grids=32, sigma=1.0, alpha=0.1, n_jobs=1, random_state=0).fit(X, y)
    b = RBRegressor(n_grids=32, sigma=1.0, alpha=0.1, n_jobs=2, random_state=0).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.predict(X[:50]), b.predict(X[:50]))


def test_cd_grid_mode_gets_column_structure(board):
    Xt, yt, _, _ = board
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m1 = RBClassifier(n_grids=8, sigma=0.1, solver="cd", parallel="grid", n_jobs=1,
                          max_epochs=5, random_state=0).fit(Xt, yt)
        m2 = RBClassifier(n_grids=8, sigma=0.1, solver="cd", parallel="grid", n_jobs=2,
                          max_epochs=5, random_state=0).fit(Xt, yt)
    assert m1.solver_.parallel_ == "grid"
    np.testing.assert_allclose(m1.coef_, m2.coef_, rtol=1e-12, atol=1e-14)


def test_cg_reuses_binning_columns(board):
    from rbcd.solvers.cg import _Products

    Xt, yt, _, _ = board
    rb = RandomBinning(n_grids=8, sigma=0.2, random_state=0)
    Z, cols = rb._fit_transform_columns(Xt)
    used = _Products(Z, 1, columns=cols)
    assert np.shares_memory(used.csc[1], cols.indices)  # no transposed copy made
    ref = Z.tocsc()
    V = np.random.default_rng(0).standard_normal((Z.shape[0], 2))
    np.testing.assert_allclose(used.tdot(V), ref.T @ V, rtol=1e-12, atol=1e-12)
    # a structure that does not describe Z is not used
    other = RandomBinning(n_grids=4, sigma=0.2, random_state=1)._fit_transform_columns(Xt)[1]
    assert not np.shares_memory(_Products(Z, 1, columns=other).csc[1], other.indices)


def test_sample_weight_equals_repeated_rows(board):
    Xt, yt, Xv, _ = board
    w = np.random.default_rng(0).integers(0, 3, Xt.shape[0])
    keep = np.repeat(np.arange(Xt.shape[0]), w)
    # the first row keeps weight >= 1, so both fits see the same bins in the same order
    w[0] = max(w[0], 1)
    keep = np.repeat(np.arange(Xt.shape[0]), w)
    a = RBRegressor(n_grids=8, sigma=0.2, alpha=0.5, tol=1e-10, random_state=0)
    b = RBRegressor(n_grids=8, sigma=0.2, alpha=0.5, tol=1e-10, random_state=0)
    a.fit(Xt[w > 0], yt[w > 0].astype(float), sample_weight=w[w > 0])
    b.fit(Xt[keep], yt[keep].astype(float))
    np.testing.assert_allclose(a.predict(Xv), b.predict(Xv), rtol=1e-7, atol=1e-8)


def test_cd_warm_start_reuses_coefficients(board):
    Xt, yt, _, _ = board
    model = RBClassifier(n_grids=8, sigma=0.1, solver="cd", parallel=None, n_jobs=1,
                         alpha=3e-3, max_epochs=200, tol=1e-4, warm_start=True, random_state=0)
    model.fit(Xt, yt)
    first_solver, first_epochs = model.solver_, model.n_iter_
    first_coef = first_solver.coef_.copy()
    model.fit(Xt, yt)  # same data and seed: same columns, starts at the optimum
    # a copy of the previous solver, warm-started (the previous one is left as it was,
    # for a fit that fails after it: test_failed_warm_started_refit_keeps_the_previous_model)
    assert model.solver_ is not first_solver
    np.testing.assert_array_equal(first_solver.coef_, first_coef)
    assert model.n_iter_ < first_epochs
    cold = RBClassifier(n_grids=8, sigma=0.1, solver="cd", parallel=None, n_jobs=1,
                        alpha=3e-3, max_epochs=200, tol=1e-4, random_state=0).fit(Xt, yt)
    assert cold.n_iter_ == first_epochs


def test_verbose_reports_stages(board, capsys):
    Xt, yt, _, _ = board
    RBClassifier(n_grids=4, solver="cg", verbose=1, random_state=0).fit(Xt, yt)
    out = capsys.readouterr().out
    assert "features" in out and "cg (cg) solver" in out
    RBClassifier(n_grids=4, verbose=1, random_state=0).fit(Xt[:100], yt[:100])
    assert "auto (dual) solver" in capsys.readouterr().out


def test_hashed_mode(board):
    Xt, yt, Xv, yv = board
    model = RBClassifier(n_grids=32, sigma=0.05, n_features=4096, random_state=0).fit(Xt, yt)
    assert model.binning_.n_features_out_ == 4096
    assert model.score(Xv, yv) >= 0.85
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cd = RBClassifier(n_grids=8, sigma=0.1, n_features=512, solver="cd", max_epochs=3,
                          n_jobs=2, random_state=0).fit(Xt, yt)
    assert cd.solver_.parallel_ != "grid"  # hashed columns have no grid structure


# ---------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "params, match",
    [
        ({"solver": "lbfgs"}, "solver"),
        ({"solver": "cg", "loss": "logistic"}, "loss"),
        ({"n_grids": 0}, "n_grids"),
        ({"sigma": -1.0}, "sigma"),
        ({"kernel": "rbf"}, "kernel"),
        ({"alpha": -1.0}, "alpha"),
        ({"preconditioner": "ilu"}, "preconditioner"),
        ({"solver": "cd", "selection": "shuffle"}, "selection"),
        ({"solver": "cd", "loss": "hinge"}, "loss"),
        ({"dtype": np.int32}, "dtype"),
        ({"random_state": -1}, "'random_state' parameter of RBClassifier"),
        ({"random_state": "seed"}, "'random_state' parameter of RBClassifier"),
        ({"random_state": 1.5}, "'random_state' parameter of RBClassifier"),
    ],
)
def test_parameter_errors(board, params, match):
    Xt, yt, _, _ = board
    with pytest.raises(ValueError, match=match):
        RBClassifier(**params).fit(Xt, yt)
    if "random_state" in params:  # the regressor checks it too (its nested checks are off)
        with pytest.raises(ValueError, match=match.replace("Classifier", "Regressor")):
            RBRegressor(**params).fit(Xt, yt.astype(float))


def test_data_errors(board):
    Xt, yt, _, _ = board
    bad = Xt.copy()
    bad[5, 1] = np.nan
    with pytest.raises(ValueError, match="row 5"):
        RBRegressor(n_grids=4).fit(bad, yt.astype(float))
    bad_sparse = sp.csr_matrix(bad)
    with pytest.raises(ValueError, match="row 5, column 1"):
        RBRegressor(n_grids=4).fit(bad_sparse, yt.astype(float))
    with pytest.raises(ValueError):
        RBRegressor(n_grids=4).fit(Xt, yt[:-1].astype(float))
    with pytest.raises(ValueError, match="class"):
        RBClassifier(n_grids=4).fit(Xt, np.zeros(Xt.shape[0]))
    model = RBRegressor(n_grids=4).fit(Xt, yt.astype(float))
    with pytest.raises(ValueError, match="features"):
        model.predict(Xt[:, :1])


def test_sparse_input_is_the_dense_model(board):
    """Sparse X: an implicit zero is the value 0, so the model is the dense input's."""
    Xt, yt, Xv, _ = board
    Xt = np.where(Xt > 0.7, Xt, 0.0)
    Xv = np.where(Xv > 0.7, Xv, 0.0)
    for cls, target in ((RBClassifier, yt), (RBRegressor, yt.astype(float))):
        dense = cls(n_grids=8, random_state=0).fit(Xt, target)
        sparse = cls(n_grids=8, random_state=0).fit(sp.csr_matrix(Xt), target)
        np.testing.assert_array_equal(dense.coef_, sparse.coef_)
        np.testing.assert_array_equal(dense.predict(Xv), sparse.predict(sp.csc_matrix(Xv)))


# --------------------------------------------------------------------- the twin


@pytest.mark.parametrize("classifier", [False, True])
@pytest.mark.parametrize("solver", ["cg", "cd"])
def test_matches_twin(classifier, solver):
    X, y = make_checkerboard(n_samples=150, n_features=2, n_informative=2, random_state=4)
    target = y if classifier else X[:, 0] * np.sin(4 * X[:, 1])
    kw = dict(n_grids=6, sigma=0.3, solver=solver, random_state=11)
    if solver == "cd":
        kw.update(parallel=None, max_epochs=4, selection="permutation")
    else:
        kw.update(tol=1e-10)
    ours_cls, ref_cls = (RBClassifier, rbcd_ref.RBClassifier) if classifier else (RBRegressor, rbcd_ref.RBRegressor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = ours_cls(**kw).fit(X, target)
        ref = ref_cls(**kw).fit(X, target)
    np.testing.assert_array_equal(ours.binning_.widths_, ref.binning_.widths_)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-7, atol=1e-9)
    out = (lambda m: m.decision_function(X)) if classifier else (lambda m: m.predict(X))
    np.testing.assert_allclose(out(ours), out(ref), rtol=1e-7, atol=1e-9)


# --------------------------------------------------------------- check_estimator


def _expected_failures(estimator):
    # alpha="auto" scores each candidate penalty by leave-one-out (or held-out) error: a row
    # repeated twice is two rows there, a row of weight 2 is one (as for scikit-learn's own
    # RidgeCV / LogisticRegressionCV, whose folds depend on the rows)
    if estimator.get_params().get("alpha") == "auto" and estimator.solver != "cd":
        return {f"check_sample_weight_equivalence_on_{kind}_data":
                "alpha='auto' leaves out rows, not units of weight" for kind in ("dense", "sparse")}
    out = {}
    if estimator.solver == "cd" and estimator.get_params().get("alpha") == "auto":
        # the CD rule holds out a fifth of the rows (rbcd.solvers.cd.holdout_mask): a row
        # repeated twice is two rows there, a row of weight 2 is one
        out.update({f"check_sample_weight_equivalence_on_{kind}_data":
                    "alpha='auto' holds out rows, not units of weight"
                    for kind in ("dense", "sparse")})
        if isinstance(estimator, RBRegressor):
            out["check_regressors_train"] = (
                "the check sets alpha=0.01: a lasso penalty of 0.01 in mean-loss units (y "
                "scaled to variance 1) keeps few bins, train R^2 0.22 (alpha='auto': 0.51)")
        if isinstance(estimator, RBClassifier):
            # 50 training rows: the held-out fifth has 5 rows of class 0, whose weight 1000
            # decides the held-out loss; it falls down to the smallest penalty of the path,
            # where the rows of class 1 keep their own bins (the same check passes at
            # alpha=None, below)
            out["check_class_weight_classifiers"] = (
                "alpha='auto' on 10 held-out rows under class weights 1000 : 0.0001")
    if estimator.sigma == "scale" and estimator.get_params().get("alpha") != "auto":
        # the check shuffles the weighted rows: sigma="scale" draws its sampled pairs by
        # position (rbcd._scale), so the shuffled rows draw other pairs than the repeated
        # ones. In one order, zero and integer weights are exact (test_sample_weight_enters_
        # the_statistics_of_the_rows); the sigma=1.0 instances below pass the check.
        out.update({f"check_sample_weight_equivalence_on_{kind}_data":
                    "sigma='scale' samples pairs by row position; the check shuffles the rows"
                    for kind in ("dense", "sparse")})
    if estimator.solver == "cd" and isinstance(estimator, RBClassifier):
        # CDClassifier's decisions rule (tests/test_cd_api.py)
        out.update({f"check_sample_weight_equivalence_on_{kind}_data": "the decisions rule (decision_epochs) stops before the optimum, at an epoch that rounding can move between weighted and repeated rows"
                    for kind in ("dense", "sparse")})
    return out


# one thread: the checks fit hundreds of tiny problems where a thread team only costs
@parametrize_with_checks([
    RBRegressor(n_grids=8, n_jobs=1, random_state=0),
    RBClassifier(n_grids=8, n_jobs=1, random_state=0),
    RBRegressor(n_grids=8, alpha=None, n_jobs=1, random_state=0),
    RBClassifier(n_grids=8, alpha=None, n_jobs=1, random_state=0),
    RBRegressor(n_grids=8, alpha=None, sigma=1.0, n_jobs=1, random_state=0),
    RBClassifier(n_grids=8, alpha=None, sigma=1.0, n_jobs=1, random_state=0),
    RBClassifier(n_grids=8, multi_class="ovo", n_jobs=1, random_state=0),
    RBClassifier(n_grids=8, solver="cd", parallel="grid", n_jobs=1, random_state=0),
    RBClassifier(n_grids=8, solver="cd", alpha=None, parallel="grid", n_jobs=1, random_state=0),
    RBRegressor(n_grids=8, solver="cd", n_jobs=1, random_state=0),
], expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


@pytest.mark.parametrize("module", ["rbcd", "rbcd_ref"])
@pytest.mark.parametrize("tol", [1e-3, 1e-4, None, 1e-6])
def test_auto_preconditioner_follows_bins_per_row_and_tolerance(module, tol):
    # "auto" in exact mode: (projected) Jacobi up to AUTO_JACOBI_BINS_PER_ROW bins per row,
    # plain CG above, at any tol; in hashed mode (no grid structure): Jacobi for loose
    # tolerances only
    import importlib

    Reg = importlib.import_module(module).RBRegressor
    X = np.random.default_rng(0).uniform(size=(400, 3))
    y = X[:, 0] - X[:, 1]
    coarse = Reg(n_grids=4, sigma=3.0, solver="cg", tol=tol, random_state=0).fit(X, y)
    assert coarse.binning_.n_features_out_ < 400
    assert coarse.solver_.preconditioner == "jacobi"
    fine = Reg(n_grids=16, sigma=0.01, solver="cg", tol=tol, random_state=0).fit(X, y)
    per_row = importlib.import_module(module + ".models").AUTO_JACOBI_BINS_PER_ROW
    assert fine.binning_.n_features_out_ > per_row * 400
    assert fine.solver_.preconditioner is None
    # more bins than rows, within the bound: Jacobi (sigma 0.1: 4 grids of a few hundred
    # bins each for 400 rows)
    mid = Reg(n_grids=4, sigma=0.1, solver="cg", tol=tol, random_state=0).fit(X, y)
    assert 400 < mid.binning_.n_features_out_ <= per_row * 400
    assert mid.solver_.preconditioner == "jacobi"
    hashed = Reg(n_grids=4, sigma=3.0, n_features=64, solver="cg", tol=tol,
                 random_state=0).fit(X, y)
    effective_tol = 1e-3 if tol is None else tol  # the cg default
    assert hashed.solver_.preconditioner == ("jacobi" if effective_tol >= 1e-4 else None)
    explicit = Reg(n_grids=4, sigma=0.01, solver="cg", tol=tol, preconditioner="jacobi",
                   random_state=0).fit(X, y)
    assert explicit.solver_.preconditioner == "jacobi"


def test_auto_alpha_from_a_sample_is_the_cpu_fits_choice(monkeypatch):
    """The GPU and Dask paths choose alpha="auto" on rows gathered to the host
    (rbcd.models.auto_alpha_from_sample): the leave-one-out sample, then for regression the
    held-out check's sample. Both are the CPU fit's rows, so the choice is the CPU fit's."""
    from rbcd.models import auto_alpha_from_sample
    from rbcd.solvers import _direct, _heldout

    # a leave-one-out sample of 100 rows: its scaled choice is far from the held-out best
    monkeypatch.setattr(_direct, "LOO_MAX_ROWS", 100)
    monkeypatch.setattr(_heldout, "HELDOUT_MIN_ROWS", 500)
    rng = np.random.default_rng(3)
    n = 1300
    X = rng.uniform(-1, 1, size=(n, 3))
    y = np.sin(3 * X[:, 0]) * X[:, 1] + 0.05 * rng.standard_normal(n)
    w = rng.uniform(0.5, 2.0, n)

    def take(rows, weights):
        return X[rows], y[rows], None if weights is None else weights[rows]

    for weights in (None, w):
        cpu = RBRegressor(n_grids=64, random_state=0, solver="cg").fit(X, y, sample_weight=weights)
        total = float(n if weights is None else weights.sum())
        got = auto_alpha_from_sample(RBRegressor(n_grids=64, random_state=0), cpu.binning_, n,
                                     lambda rows: take(rows, weights), total)
        assert got == pytest.approx(cpu.alpha_, rel=1e-12)
        with monkeypatch.context() as m:     # the choice without the held-out check
            m.setattr(_heldout, "HELDOUT_FACTORS", np.array([1.0]))
            unchecked = RBRegressor(n_grids=64, random_state=0, solver="cg").fit(
                X, y, sample_weight=weights).alpha_
        assert cpu.alpha_ > 3 * unchecked
    labels = (y > 0).astype(int)
    cpu = RBClassifier(n_grids=64, random_state=0, solver="cg").fit(X, labels)
    got = auto_alpha_from_sample(RBClassifier(n_grids=64, random_state=0), cpu.binning_, n,
                                 lambda rows: (X[rows], labels[rows], None), float(n))
    assert got == pytest.approx(cpu.alpha_, rel=1e-12)


@pytest.mark.parametrize("case", ["regressor", "multi-output", "linear", "sparse", "hashed",
                                  "ridge classifier", "one-vs-one", "logistic"])
def test_predict_by_blocks_equals_scores_of_the_whole_Z(monkeypatch, case):
    """predict / decision_function / predict_proba bin and score new rows a block at a
    time (rbcd.models.PREDICT_ENTRIES, made small here: blocks of 256 rows, the last one
    partial): the same bits as the solver's scores of the whole Z, for regressors and
    classifiers, the linear term, sparse X and the hashed mode; with one block the path
    is the whole Z's."""
    from rbcd import models

    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(300, 4))
    Xt = rng.uniform(-1.2, 1.2, size=(1000, 4))
    f = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2]
    kw = {"n_grids": 16, "random_state": 0, "n_jobs": 2}
    if case in ("regressor", "multi-output", "linear", "sparse", "hashed"):
        y = f if case != "multi-output" else np.column_stack([f, X[:, 3]])
        extra = {"linear": 0.5} if case == "linear" else (
            {"n_features": 512} if case == "hashed" else {})
        model = RBRegressor(**kw, **extra).fit(X, y)
        methods = ["predict"]
    else:
        y = np.digitize(f, [-0.5, 0.5])
        extra = {"multi_class": "ovo"} if case == "one-vs-one" else (
            {"solver": "cd", "loss": "logistic", "alpha": 1e-3} if case == "logistic" else {})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = RBClassifier(**kw, **extra).fit(X, y)
        methods = ["predict", "decision_function", "predict_proba", "predict_log_proba"]
    if case == "sparse":
        Xt[rng.uniform(size=Xt.shape) < 0.5] = 0.0
        Xt = sp.csc_matrix(Xt)
    whole = {name: getattr(model, name)(Xt) for name in methods}   # one block
    monkeypatch.setattr(models, "PREDICT_ENTRIES", 64)
    calls = []
    real = model.binning_._transform          # what predict calls, a block at a time
    monkeypatch.setattr(model.binning_, "_transform",
                        lambda A, *a, **kw: calls.append(A.shape[0]) or real(A, *a, **kw))
    for name in methods:
        calls.clear()
        np.testing.assert_array_equal(getattr(model, name)(Xt), whole[name])
        assert calls == [256, 256, 256, 232]
    Zt = real(Xt)
    term = model.__dict__.get("_linear_term")        # linear="auto" may add one too
    assert (term is not None) or case != "linear"
    if term is not None:
        Zt = sp.hstack([Zt, term.block(sp.csr_matrix(Xt) if case == "sparse" else Xt)]).tocsr()
    solver = model.solver_
    if case in ("ridge classifier", "one-vs-one"):
        np.testing.assert_array_equal(whole["decision_function"], solver.decision_function(Zt))
    elif case == "logistic":
        np.testing.assert_array_equal(whole["predict_proba"], solver.predict_proba(Zt))
    else:
        np.testing.assert_array_equal(whole["predict"], solver.predict(Zt))


@pytest.mark.parametrize("hashed", [False, True])
def test_predict_by_blocks_names_the_row_of_x(monkeypatch, hashed):
    """An error of new rows (a NaN, a value too large to bin) names the row of X, not of
    the block it falls in."""
    from rbcd import models

    rng = np.random.default_rng(5)
    X = rng.uniform(size=(200, 3))
    model = RBRegressor(n_grids=8, random_state=0,
                        **({"n_features": 256} if hashed else {})).fit(X, X[:, 0])
    monkeypatch.setattr(models, "PREDICT_ENTRIES", 64)   # blocks of 256 rows
    Xt = rng.uniform(size=(1000, 3))
    Xt[700, 1] = np.nan
    with pytest.raises(ValueError, match="at row 700, column 1"):
        model.predict(Xt)
    if hashed:   # exact mode: a far value is a bin never seen in fit, no error
        Xt[700, 1] = 0.5
        Xt[900, 2] = 1e300
        with pytest.raises(ValueError, match="too large to bin at row 900, column 2"):
            model.predict(Xt)


def test_prediction_checks_keep_every_error_and_warning_on_the_short_path():
    """Predictions of a plain float64 array (the models) and of a float64 CSR (the
    solvers) skip scikit-learn's data-frame probes, not its checks: a wrong feature count
    raises, a non-finite value raises, X without the names a model was fitted with warns,
    and the predictions equal those of the same rows through the full validation (a
    list, a Fortran-ordered copy)."""
    import pandas as pd

    rng = np.random.default_rng(5)
    X = rng.standard_normal((120, 4))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    model = RBClassifier(n_grids=16, random_state=0).fit(X, y)
    want = model.predict(X[:7].tolist())
    assert np.array_equal(model.predict(X[:7]), want)
    assert np.array_equal(model.predict(np.asfortranarray(X[:7])), want)
    with pytest.raises(ValueError, match="features"):
        model.predict(rng.standard_normal((3, 5)))
    bad = X[:3].copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.predict(bad)
    named = RBClassifier(n_grids=16, random_state=0).fit(
        pd.DataFrame(X, columns=list("abcd")), y)
    with pytest.warns(UserWarning, match="feature names"):
        named.predict(X[:2])

    Z = sp.csr_matrix(rng.random((50, 30)) * (rng.random((50, 30)) < 0.3))
    t = Z @ rng.standard_normal(30)
    for est in (RidgeCG(alpha=1.0), CDRegressor(alpha=0.1)):
        est.fit(Z, t)
        assert np.array_equal(est.predict(Z[:4]), est.predict(Z[:4].tocsc()))
        with pytest.raises(ValueError, match="features"):
            est.predict(sp.csr_matrix((2, 31)))
        Zbad = Z[:3].copy()
        Zbad.data[0] = np.inf
        with pytest.raises(ValueError, match="infinity|NaN"):
            est.predict(Zbad)


def test_every_public_name_has_its_own_docstring():
    """help() and IDEs show each public class's and function's own text, never an
    inherited scikit-learn docstring (a docstring built by concatenation is not one)."""
    import inspect

    import rbcd

    missing = []
    for name in rbcd.__all__:
        obj = getattr(rbcd, name)
        if inspect.isclass(obj):
            doc = obj.__dict__.get("__doc__")
        elif callable(obj):
            doc = obj.__doc__
        else:
            continue
        if not (isinstance(doc, str) and len(doc.strip()) > 20):
            missing.append(name)
    assert not missing, f"no docstring of their own: {missing}"


def test_the_models_docstring_examples_print_what_they_show():
    """RBClassifier's and RBRegressor's Examples sections run and print their outputs."""
    import doctest

    import rbcd.models as models

    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    ran = 0
    for cls in (models.RBClassifier, models.RBRegressor):
        for test in finder.find(cls, cls.__name__, globs={}):
            if test.examples and test.name == cls.__name__:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    result = runner.run(test)
                assert result.failed == 0, cls.__name__
                ran += result.attempted
    assert ran >= 12


@pytest.mark.parametrize("classifier", [False, True])
def test_sample_weight_enters_the_statistics_of_the_rows(classifier):
    # sigma="scale", n_grids="auto" and the linear term's standardization take the rows'
    # weights: integer weights fit the model of the rows repeated, zero weights that of
    # the rows removed, in the same order (scikit-learn's meaning; its own check also
    # shuffles the rows, which moves sigma="scale"'s sampled pairs as it always did), and
    # the twin agrees; far-away rows of weight 0 used to move sigma_
    rng = np.random.default_rng(4)
    X = rng.normal(size=(80, 5))
    y = X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2])
    if classifier:
        y = (y > 0).astype(int)
    w = rng.integers(0, 4, 80).astype(float)
    far = np.vstack([X, rng.normal(loc=50.0, size=(20, 5))])
    y_far = np.r_[y, y[:20]]
    w_far = np.r_[w, np.zeros(20)]
    rep = np.repeat(np.arange(80), w.astype(int))
    pos = w > 0
    models = ((RBClassifier, rbcd_ref.RBClassifier) if classifier
              else (RBRegressor, rbcd_ref.RBRegressor))
    for linear in (0.0, 1.0):
        kw = dict(alpha=1.0, solver="direct", linear=linear, random_state=0)
        for cls in models:
            out = (lambda m: m.decision_function(X)) if classifier else (lambda m: m.predict(X))
            a = cls(**kw).fit(X, y, sample_weight=w)
            b = cls(**kw).fit(X[rep], y[rep])
            c = cls(**kw).fit(far, y_far, sample_weight=w_far)
            d = cls(**kw).fit(X[pos], y[pos], sample_weight=w[pos])
            assert a.binning_.sigma_ == b.binning_.sigma_ == c.binning_.sigma_ == d.binning_.sigma_
            assert a.binning_.n_grids == b.binning_.n_grids == 1024
            for m in (b, c, d):
                np.testing.assert_allclose(out(m), out(a), rtol=1e-9, atol=1e-9)
        ours = models[0](**kw).fit(far, y_far, sample_weight=w_far)
        np.testing.assert_allclose(out(ours), out(c), rtol=1e-9, atol=1e-9)
    unweighted = RandomBinning(random_state=0).fit(far).sigma_      # the far rows counted
    assert unweighted > 1.1 * a.binning_.sigma_


def test_failed_warm_started_refit_keeps_the_previous_model(monkeypatch):
    # warm_start refits a copy of the previous solver: a failure after the solver's fit
    # (the calibration here; Ctrl-C alike) leaves the model as it was, solver_ included
    rng = np.random.default_rng(0)
    XA = rng.normal(size=(200, 4))
    yA = (XA[:, 0] > 0).astype(int)
    XB = rng.normal(size=(200, 4)) * 3
    yB = (XB[:, 1] > 0).astype(int)
    clf = RBClassifier(n_grids=16, solver="cd", loss="squared_hinge", warm_start=True,
                       random_state=0).fit(XA, yA)
    pred, coef, solver = clf.predict(XA), clf.coef_.copy(), clf.solver_

    def broken(*args, **kwargs):
        raise RuntimeError("calibration failed")

    monkeypatch.setattr(clf, "_fit_calibration", broken)
    with pytest.raises(RuntimeError, match="calibration failed"):
        clf.fit(XB, yB)
    assert clf.solver_ is solver
    np.testing.assert_array_equal(clf.coef_, coef)
    np.testing.assert_array_equal(clf.predict(XA), pred)
    monkeypatch.undo()
    clf.fit(XB, yB)                          # and a refit that succeeds still warm-starts
    assert clf.solver_ is not solver and clf.coef_.shape[1] == clf.binning_.n_features_out_


def test_holdout_calibration_falls_back_where_a_class_has_no_weight_to_hold():
    # both classes have positive weight, but class 1's is all on the rows the calibration
    # holds out: the second model cannot be fitted, so the training rows calibrate (as for
    # a class with too few rows), instead of an error about the user's weights
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4)) * 3
    y = (X[:, 1] > 0).astype(int)
    held = np.zeros(200, bool)
    held[np.random.default_rng(0).permutation(200)[:40]] = True
    w = np.where((y == 1) & ~held, 0.0, 1.0)
    assert w[y == 1].sum() > 0
    for kw in ({"solver": "cd", "loss": "squared_hinge"}, {"solver": "cg"}):
        clf = RBClassifier(n_grids=16, calibration="holdout", random_state=0,
                           **kw).fit(X, y, sample_weight=w)
        proba = clf.predict_proba(X)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        assert np.all((proba > 0) & (proba < 1))


@pytest.mark.parametrize("module", ["rbcd", "rbcd_ref"])
def test_loss_must_suit_the_task(module):
    # RBRegressor(solver="cd", loss="logistic") fitted a classification loss to regression
    # targets without a word (the CD solver's own constraint was skipped as nested)
    import importlib

    mod = importlib.import_module(module)
    X = np.random.default_rng(0).normal(size=(50, 3))
    for loss in ("logistic", "squared_hinge"):
        with pytest.raises(ValueError, match="fits regression targets: loss must be None"):
            mod.RBRegressor(n_grids=8, solver="cd", loss=loss).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="classifies with loss 'logistic' or 'squared_hinge'"):
        mod.RBClassifier(n_grids=8, solver="cd", loss="squared").fit(X, X[:, 0] > 0)
    mod.RBRegressor(n_grids=8, solver="cd", loss="squared").fit(X, X[:, 0])


# ------------------------------------------------ scikit-learn's global output setting
_PANDAS_OUTPUT_MODELS = [
    lambda: RBClassifier(n_grids=8, random_state=0),
    lambda: RBRegressor(n_grids=8, random_state=0),
    lambda: RBClassifier(n_grids=8, solver="cd", random_state=0),
    lambda: RBRegressor(n_grids=8, n_features=64, random_state=0),
    lambda: RBClassifierCV(n_grids=8, random_state=0),
    lambda: RBRegressorCV(n_grids=8, cv=3, random_state=0),
    lambda: SparseRandomFeatures(feature="binning", n_iter=2, random_state=0),
]


@pytest.mark.filterwarnings("ignore::UserWarning")   # a search's best alpha on its grid's edge
@pytest.mark.parametrize("make", _PANDAS_OUTPUT_MODELS)
def test_models_ignore_the_global_dataframe_output(make):
    # transform_output="pandas" (sklearn.set_config) asks transformers for data frames; a
    # model's own binning is internal (its Z sparse), so the setting must change nothing:
    # not the fit, not predictions of a model fitted outside the setting
    from sklearn import config_context
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(120, 3))
    y = (X[:, 0] > 0).astype(int) if is_classifier(make()) else X[:, 0] * X[:, 1]
    plain = make().fit(X, y)
    expected = plain.predict(X)
    with config_context(transform_output="pandas"):
        np.testing.assert_array_equal(plain.predict(X), expected)
        inside = make().fit(X, y)
        np.testing.assert_array_equal(inside.predict(X), expected)
        piped = make_pipeline(StandardScaler(), make()).fit(X, y)
        assert piped.predict(X).shape == expected.shape
        binning = getattr(inside, "binning_", None)
        if binning is not None:             # the fitted binning: Z sparse, as without it
            Z = binning.transform(X)
            assert sp.issparse(Z) and Z.shape == (120, binning.n_features_out_)


def test_grid_mode_on_hashed_features_names_the_model_parameters():
    # the solver's own message asks for columns=, which the model's fit does not take
    X = np.random.default_rng(0).uniform(size=(50, 3))
    with pytest.raises(ValueError, match=r"needs the grid structure of the exact mode "
                                         r"\(n_features=None\).*parallel='auto'") as e:
        RBRegressor(n_features=64, solver="cd", parallel="grid").fit(X, X[:, 0])
    assert "columns=" not in str(e.value)


@pytest.mark.parametrize("solver", ["auto", "cg"])
@pytest.mark.parametrize("Model", [RBRegressor, RBClassifier])
def test_the_fit_does_not_depend_on_the_layout_of_x(Model, solver):
    # the linear term's mean and deviation (on by default up to 1,000 rows) are summed in
    # one order for C arrays, Fortran arrays and data frames: the same model, bit for bit
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(300, 4))
    y = X[:, 0] + np.sin(3 * X[:, 1])
    if Model is RBClassifier:
        y = (y > 0).astype(int)
    layouts = [X, np.asfortranarray(X), X[:, ::-1].copy()[:, ::-1]]
    fits = [Model(solver=solver, linear=1.0, random_state=0).fit(A, y) for A in layouts]
    out = [m.decision_function(X) if Model is RBClassifier else m.predict(X) for m in fits]
    assert fits[0].linear_ > 0
    for o in out[1:]:
        np.testing.assert_array_equal(o, out[0])


def test_parameter_messages_list_each_accepted_kind_once():
    # scikit-learn's "random_state" shorthand beside an int interval named the ints twice
    # ([0, 4294967295] and [0, inf)), and "cv_object" beside None said "or None or None"
    X = np.random.default_rng(0).uniform(size=(20, 2))
    y = np.arange(20) % 2
    with pytest.raises(ValueError) as e:
        RBClassifier(random_state=-1).fit(X, y)
    msg = str(e.value)
    assert "an int in the range [0, inf)" in msg and "4294967295" not in msg
    assert msg.count("None") == 1 and msg.count("Generator") == 1
    with pytest.raises(ValueError) as e:
        RBClassifierCV(cv="x").fit(X, y)
    assert str(e.value).count("None") == 1
    for seed in (2**40, np.random.default_rng(0), np.random.RandomState(0), None):
        RBClassifier(n_grids=4, random_state=seed).fit(X, y)


@pytest.mark.parametrize("cls", [RBRegressor, RBClassifier], ids=lambda c: c.__name__)
def test_binning_of_a_frame_fitted_model_checks_the_frame_column_names(cls):
    """A model fitted on a data frame gives its binning_ the frame's column names: the
    documented way to the features of new rows, ``binning_.transform(frame)``, takes the
    frame without a warning and refuses reordered columns; the model's own predictions
    (which pass validated arrays to binning_) warn only where the user's X lacks the
    names, once, in the model's name. A model fitted on an array: its binning_ has no
    names."""
    import pandas as pd

    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, (150, 3))
    y = X[:, 0] + 3 * X[:, 1] ** 2
    if cls is RBClassifier:
        y = (y > np.median(y)).astype(int)
    df = pd.DataFrame(X, columns=["u", "v", "w"])
    model = cls(n_grids=8, random_state=0).fit(df, y)
    np.testing.assert_array_equal(model.binning_.feature_names_in_, ["u", "v", "w"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Z = model.binning_.transform(df)
        got = model.predict(df)
    assert (Z != model.binning_.transform(X)).nnz == 0        # (an array: a warning)
    with pytest.raises(ValueError, match="feature names"):
        model.binning_.transform(df[["w", "v", "u"]])
    for rows in (X, sp.csr_matrix(X)):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            np.testing.assert_array_equal(model.predict(rows), got)
        said = [str(w.message) for w in seen if "feature names" in str(w.message)]
        assert said == [f"X does not have valid feature names, but {cls.__name__} was "
                        f"fitted with feature names"], said
    plain = cls(n_grids=8, random_state=0).fit(X, y)
    assert not hasattr(plain.binning_, "feature_names_in_")
    np.testing.assert_array_equal(plain.predict(X), got)
