"""Issue 31: what a newcomer and a hostile tester met, one test per defect (each failed
before its fix). The command line's items are in tests/test_cli.py, rbcd.dask's in
tests/test_dask.py, the fuzzed model files and aliased CLI paths in tests/test_fuzz.py."""
import os
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning, DataConversionWarning

import rbcd
from rbcd import CDClassifier, CDRegressor, RBClassifier, RBRegressor, RidgeCG, RidgeCGClassifier
from rbcd.solvers.cd import pow2_scale


def _data(n=120, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    return X, (X[:, 0] > 0.5).astype(int), X[:, 0] + X[:, 1]


# ------------------------------------------------------------------ item 2: class_weight
@pytest.mark.parametrize("bad", [np.nan, np.inf, -1.0, "1"])
@pytest.mark.parametrize("make", [
    lambda cw: CDClassifier(class_weight=cw, max_epochs=5),
    lambda cw: RidgeCGClassifier(class_weight=cw),
    lambda cw: RBClassifier(solver="cd", class_weight=cw, n_grids=8, max_epochs=5),
    lambda cw: RBClassifier(solver="cg", class_weight=cw, n_grids=8),
])
def test_non_finite_class_weight_is_refused_by_name(make, bad):
    X, y, _ = _data()
    with pytest.raises(ValueError, match="class_weight") as info:
        make({0: bad, 1: 1.0}).fit(X, y)
    assert "sample_weight" not in str(info.value)


# ------------------------------------------------------------------ item 5: object y
@pytest.mark.parametrize("bad", [np.inf, None, -np.inf, np.nan])
@pytest.mark.parametrize("make", [RidgeCG, CDRegressor,
                                  lambda: RBRegressor(n_grids=8),
                                  lambda: RBRegressor(n_grids=8, solver="cd")])
def test_object_y_with_inf_or_none_is_a_clear_error(make, bad):
    X, _, y = _data()
    yo = y.astype(object)
    yo[7] = bad
    # (RidgeCG's NaN is scikit-learn's own "Input contains NaN" from validate_data)
    with pytest.raises(ValueError, match=r"y (contains|must be numeric).*index 7|Input contains NaN"):
        make().fit(X, yo)


@pytest.mark.parametrize("bad", [np.inf, None])
@pytest.mark.parametrize("solver", ["cg", "cd"])
def test_object_class_labels_with_inf_or_none_name_the_entry(solver, bad):
    X, y, _ = _data()
    yo = y.astype(object)
    yo[3] = bad
    with pytest.raises(ValueError, match="index 3"):
        RBClassifier(n_grids=8, solver=solver).fit(X, yo)


def test_pow2_scale_refuses_non_finite_values_instead_of_recursing():
    for v in (np.array([1.0, np.inf]), np.array([np.nan])):
        with pytest.raises(ValueError, match="non-finite"):
            pow2_scale(v)


# ------------------------------------------------------------------ item 11: sample_weight
@pytest.mark.parametrize("solver", ["cg", "cd"])
@pytest.mark.parametrize("bad,words", [
    (np.r_[np.ones(119), np.nan], "sample_weight contains NaN or inf"),
    (np.r_[np.ones(119), np.inf], "sample_weight contains NaN or inf"),
    (np.r_[np.ones(119), -1.0], "sample_weight must be non-negative"),
    (np.ones(5), "sample_weight has 5 entries but X has 120 rows"),
    (np.ones((120, 2)), r"sample_weight must be 1-D .* shape \(120, 2\)"),
    (np.zeros(120), "sample_weight must have a positive sum"),
])
@pytest.mark.parametrize("cls", [RBRegressor, RBClassifier])
def test_bad_sample_weight_names_the_parameter(cls, solver, bad, words):
    X, yc, yr = _data()
    y = yc if cls is RBClassifier else yr
    with pytest.raises(ValueError, match=words):
        cls(n_grids=8, solver=solver).fit(X, y, sample_weight=bad)


def test_sample_weight_scalar_still_accepted():
    X, _, y = _data()
    a = RBRegressor(n_grids=8, random_state=0).fit(X, y, sample_weight=3.0)
    b = RBRegressor(n_grids=8, random_state=0).fit(X, y, sample_weight=np.full(120, 3.0))
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


# ------------------------------------------------------------------ item 12: messages
@pytest.mark.parametrize("solver", ["cg", "cd"])
def test_rbclassifier_errors_name_rbclassifier(solver):
    X, _, _ = _data()
    with pytest.raises(ValueError, match="RBClassifier needs samples of at least 2 classes") \
            as info:
        RBClassifier(n_grids=8, solver=solver).fit(X, np.zeros(120))
    for internal in ("RidgeCGClassifier", "CDClassifier"):
        assert internal not in str(info.value)


def test_column_vector_y_warns_at_the_users_line():
    X, y, _ = _data()
    with pytest.warns(DataConversionWarning) as rec:
        RBClassifier(n_grids=8).fit(X, y[:, None])
    assert rec[0].filename == __file__


def test_convergence_warnings_point_at_the_users_line():
    X, y, yr = _data()
    Z = rbcd.RandomBinning(n_grids=8, sigma=0.5, random_state=0).fit_transform(X)
    calls = [
        lambda: CDRegressor(max_epochs=1, tol=1e-12).fit(Z, yr),
        lambda: CDClassifier(max_epochs=1, tol=1e-12).fit(Z, y),
        lambda: RidgeCG(max_iter=1, tol=1e-12).fit(Z, yr),
        lambda: RBRegressor(n_grids=8, solver="cd", max_epochs=1, tol=1e-12).fit(X, yr),
        lambda: RBClassifier(n_grids=8, solver="cg", max_iter=1, tol=1e-12).fit(X, y),
    ]
    for call in calls:
        with pytest.warns(ConvergenceWarning) as rec:
            call()
        conv = [w for w in rec if issubclass(w.category, ConvergenceWarning)]
        assert conv and all(w.filename == __file__ for w in conv), \
            [(w.filename, w.lineno) for w in conv]


def test_degenerate_binning_warning_points_at_the_users_line():
    X, _, yr = _data()
    with pytest.warns(rbcd.DegenerateBinningWarning) as rec:
        RBRegressor(n_grids=8, sigma=1e-9).fit(X, yr)
    assert all(w.filename == __file__ for w in rec
               if issubclass(w.category, rbcd.DegenerateBinningWarning))


def test_cd_convergence_advice_on_binning_features_names_sigma_not_a_scaler():
    # a large sigma puts every row in one bin of some grids: constant columns, which the
    # old advice called "not centred" (|mean| = inf times the deviation) and sent the user
    # to StandardScaler, which no one can apply to the binning's Z
    X, _, yr = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rbcd.DegenerateBinningWarning)
        with pytest.warns(ConvergenceWarning) as rec:
            RBRegressor(n_grids=8, sigma=4.0, solver="cd", l1_ratio=0.0, alpha=1e-6,
                        max_epochs=2, tol=1e-14, random_state=0).fit(X, yr)
    msg = " ".join(str(w.message) for w in rec if issubclass(w.category, ConvergenceWarning))
    assert "StandardScaler" not in msg
    assert "smaller sigma" in msg and "max_epochs" in msg


# ------------------------------------------------------------------ item 13: l1_ratio with cg
@pytest.mark.parametrize("cls", [RBRegressor, RBClassifier])
def test_l1_ratio_with_cg_is_refused_like_a_wrong_loss(cls):
    X, yc, yr = _data()
    y = yc if cls is RBClassifier else yr
    with pytest.raises(ValueError, match="l1_ratio"):
        cls(n_grids=8, solver="cg", l1_ratio=0.5).fit(X, y)
    with pytest.raises(ValueError, match="loss"):
        cls(n_grids=8, solver="cg", loss="logistic" if cls is RBClassifier else "squared_hinge") \
            .fit(X, y)
    # the default (unused by cg) and 0 (ridge, what cg solves) pass, as loss=None/"squared"
    a = cls(n_grids=8, solver="cg", random_state=0).fit(X, y)
    b = cls(n_grids=8, solver="cg", l1_ratio=0.0, random_state=0).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    cls(n_grids=8, solver="cd", l1_ratio=0.5, max_epochs=3).fit(X, y)


# ------------------------------------------------------------------ item 19: show_config
def test_show_config_prints_once_and_names_the_simd_path(capsys):
    from rbcd.binning._binning import avx512_cpu

    assert rbcd.show_config() is None   # a REPL echoes a returned value a second time
    text = capsys.readouterr().out
    assert "binning SIMD:" in text and ("AVX-512" if avx512_cpu() else "scalar") in text
    info = rbcd.show_config(as_dict=True)
    assert capsys.readouterr().out == ""
    assert info["simd"] in ("avx512", "scalar") and info["threads"] >= 1
    assert info["simd"] == ("avx512" if avx512_cpu() else "scalar")


# ------------------------------------------------------------------ item 9: many classes
@pytest.mark.parametrize("solver", ["cg", "cd"])
def test_many_classes_are_refused_up_front_with_an_estimate(solver, monkeypatch):
    # 10^4 classes on 2 x 10^4 rows passed 10 GB; here the same rule with the memory
    # available made small
    from rbcd import _memory

    rng = np.random.default_rng(0)
    X = rng.random((3000, 3))
    y = rng.integers(0, 300, 3000)
    monkeypatch.setattr(_memory, "available_memory", lambda: 5 * 2**20)
    solved = []
    monkeypatch.setattr(RidgeCGClassifier, "fit", lambda *a, **k: solved.append(1))
    monkeypatch.setattr(CDClassifier, "fit", lambda *a, **k: solved.append(1))
    with pytest.raises(ValueError, match=r"RBClassifier .* 300 classes needs about [\d.]+ GiB"):
        RBClassifier(n_grids=8, solver=solver).fit(X, y)
    assert solved == []


@pytest.mark.parametrize("solver", ["cg", "cd"])
def test_solver_memory_estimate_bounds_the_measured_peak(solver):
    import tracemalloc

    from rbcd._memory import solver_memory

    rng = np.random.default_rng(1)
    X = rng.random((1500, 3))
    y = rng.integers(0, 60, 1500)
    binning = rbcd.RandomBinning(n_grids=32, sigma=0.1, random_state=0)
    Z, cols = binning.fit_transform(X, return_columns=True)
    est = (RidgeCGClassifier(max_iter=5) if solver == "cg" else
           CDClassifier(max_epochs=2, n_jobs=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tracemalloc.start()
        try:
            est.fit(Z, y, columns=cols)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    estimate = solver_memory(solver, Z.shape[0], Z.shape[1], 60)
    assert peak <= estimate <= 4 * peak, (peak, estimate)


@pytest.mark.parametrize("y", [np.zeros(6), np.array(["a"] * 6), np.ones(6, dtype=int)])
def test_one_class_is_named_as_the_user_wrote_it(y):
    # a numpy scalar's repr (numpy 2: np.float64(0.0), np.str_('a')) is not what the user
    # passed; every classifier names the class as a plain Python value
    import scipy.sparse as sp
    from rbcd import CDClassifier, RBClassifier, RBClassifierCV, RidgeCGClassifier

    expect = repr(y[0].tolist())
    X = np.random.default_rng(0).uniform(size=(6, 2))
    for est, data in ((CDClassifier(), sp.csr_matrix(np.eye(6))),
                      (RidgeCGClassifier(), sp.csr_matrix(np.eye(6))),
                      (RBClassifier(n_grids=4), X), (RBClassifierCV(n_grids=4), X)):
        with pytest.raises(ValueError, match="class") as exc:
            est.fit(data, y)
        assert expect in str(exc.value) and "np." not in str(exc.value), str(exc.value)


def test_n_jobs_zero_is_refused_even_where_no_threads_are_asked_for():
    # a fit small enough to run serially never resolves its thread count; n_jobs=0 must
    # still be refused, by name, as it is on a fit large enough to use threads
    from rbcd import RBClassifier, RBClassifierCV, RBRegressor, RidgeCG

    X = np.random.default_rng(0).uniform(size=(40, 3))
    y = (X[:, 0] > 0.5).astype(int)
    for est in (RBClassifier(n_grids=4, n_jobs=0), RBRegressor(n_grids=4, n_jobs=0),
                RBClassifierCV(n_grids=4, n_jobs=0)):
        with pytest.raises(ValueError, match="'n_jobs' parameter"):
            est.fit(X, y)
    with pytest.raises(ValueError, match="'n_jobs' parameter"):
        RidgeCG(n_jobs=0).fit(X, y.astype(float))
    RBClassifier(n_grids=4, n_jobs=-1).fit(X, y)      # negative counts stay valid


def test_a_weightless_leave_one_out_sample_is_named():
    # above 1,000 rows alpha="auto" scores a fixed sample; weights that are zero on every
    # row of it (positive elsewhere) gave "alpha must be finite, got nan" (the models) and
    # nan scores (the search): now a ValueError that says what to do
    from rbcd import RBClassifier, RBRegressor, RBRegressorCV
    from rbcd.solvers._direct import loo_rows

    rng = np.random.default_rng(0)
    X = rng.uniform(size=(1500, 3))
    y = np.sin(4 * X[:, 0])
    s = np.ones(1500)
    s[loo_rows(1500)] = 0.0
    for est, target in ((RBRegressor(n_grids=8, random_state=0), y),
                        (RBClassifier(n_grids=8, random_state=0), (y > 0).astype(int)),
                        (RBRegressorCV(n_grids=8, random_state=0), y)):
        with pytest.raises(ValueError, match="every row of that sample has weight 0"):
            est.fit(X, target, sample_weight=s)
    # a number still fits, and a sample with some weight still chooses
    RBRegressor(n_grids=8, alpha=1.0, random_state=0).fit(X, y, sample_weight=s)
    s[loo_rows(1500)[0]] = 1.0
    assert np.isfinite(RBRegressor(n_grids=8, random_state=0).fit(X, y, sample_weight=s).alpha_)


def test_searches_check_sample_weight_before_any_work():
    from rbcd import RBClassifierCV

    X = np.random.default_rng(0).uniform(size=(60, 3))
    y = (X[:, 0] > 0.5).astype(int)
    with pytest.raises(ValueError, match="positive sum"):
        RBClassifierCV(n_grids=8).fit(X, y, sample_weight=np.zeros(60))
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # no edge warning from a search that ran first
        with pytest.raises(ValueError, match="NaN or inf"):
            RBClassifierCV(n_grids=8).fit(X, y, sample_weight=np.r_[np.nan, np.ones(59)])


def test_a_failed_refit_keeps_the_previous_model():
    """A fit that fails (a NaN target or a negative weight, found after X's feature count
    was read) leaves every estimator as it was: it still predicts the old model's values
    on the old width (scikit-learn's Ridge does; rbcd's models had recorded the new
    width and refused the old data)."""
    import rbcd
    from rbcd.model_selection import RBClassifierCV, RBRegressorCV

    rng = np.random.default_rng(3)
    X3, X5 = rng.random((80, 3)), rng.random((80, 5))
    y = X3[:, 0] + X3[:, 1]
    labels = (y > np.median(y)).astype(int)
    cases = [
        (rbcd.RBRegressor(n_grids=16, random_state=0), False, False),
        (rbcd.RBClassifier(n_grids=16, random_state=0), True, False),
        (rbcd.RBClassifier(n_grids=16, solver="cd", random_state=0), True, False),
        (rbcd.RidgeCG(), False, True),
        (rbcd.RidgeCGClassifier(), True, True),
        (rbcd.CDRegressor(alpha=1e-3), False, True),
        (rbcd.CDClassifier(alpha=1e-3), True, True),
        (RBRegressorCV(sigma_factors=(1.0,), alphas=(1.0,), n_grids=8), False, False),
        (RBClassifierCV(sigma_factors=(1.0,), alphas=(1.0,), n_grids=8), True, False),
    ]
    for est, classifier, sparse_in in cases:
        Xa, Xb = (sp.csr_matrix(X3), sp.csr_matrix(X5)) if sparse_in else (X3, X5)
        target = labels if classifier else y
        est.fit(Xa, target)
        before = est.predict(Xa)
        bad_y = target.astype(float)
        bad_y[0] = np.nan
        for kwargs in (dict(y=bad_y), dict(y=target, sample_weight=-np.ones(80))):
            with pytest.raises(ValueError):
                est.fit(Xb, **kwargs)
            assert est.n_features_in_ == 3, type(est).__name__
            assert np.array_equal(est.predict(Xa), before), type(est).__name__


def test_median_distance_pairs_and_subnormal_data():
    """median_l1_distance names a bad n_pairs; subnormal data bin as the twin bins them,
    without numpy's overflow warning (a width's reciprocal overflows to inf)."""
    import rbcd_ref

    X = np.random.default_rng(0).random((60, 3))
    for bad in (0, -5, 1.5, True, "10"):
        with pytest.raises(ValueError, match="n_pairs must be a positive integer"):
            rbcd.median_l1_distance(X, n_pairs=bad)
    assert rbcd.median_l1_distance(X, n_pairs=np.int64(50)) > 0
    tiny = X * 1e-310
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        Z = rbcd.RandomBinning(n_grids=8, random_state=0).fit_transform(tiny)
    ref = rbcd_ref.RandomBinning(n_grids=8, random_state=0).fit_transform(tiny)
    assert Z.shape == ref.shape and (Z != ref).nnz == 0


@pytest.mark.parametrize("make, param", [
    (lambda **p: rbcd.RBRegressor(n_grids=8, **p), "max_iter"),
    (lambda **p: rbcd.RBRegressor(n_grids=8, **p), "tol"),
    (lambda **p: rbcd.RBRegressor(n_grids=8, **p), "n_jobs"),
    (lambda **p: rbcd.RBRegressor(n_grids=8, **p), "alpha"),
    (lambda **p: rbcd.CDRegressor(**p), "max_epochs"),
    (lambda **p: rbcd.CDRegressor(**p), "alpha"),
    (lambda **p: rbcd.RidgeCG(**p), "max_iter"),
    (lambda **p: rbcd.RandomBinning(**p), "n_features"),
    (lambda **p: rbcd.RandomFourier(**p), "n_components"),
    (lambda **p: rbcd.SparseRandomFeatures(**p), "n_iter"),
    (lambda **p: rbcd.SparseRandomFeatures(**p), "n_components_per_iter"),
    (lambda **p: rbcd.DoublyStochasticKernelClassifier(**p), "n_gradient"),
])
def test_bools_are_not_numbers_of_parameters(make, param):
    """True for an integer or real parameter (a bool is an int to Python, and scikit-learn's
    intervals take it) is refused naming the parameter, not run as 1 (one iteration, one
    component, alpha 1)."""
    rng = np.random.default_rng(0)
    X = rng.random((40, 3))
    y = (X[:, 0] > 0.5).astype(int)
    est = make(**{param: True})
    if isinstance(est, (rbcd.CDRegressor, rbcd.RidgeCG)):
        X = sp.csr_matrix(X)
    with pytest.raises(ValueError, match=rf"'{param}' parameter of {type(est).__name__}"):
        est.fit(X) if isinstance(est, (rbcd.RandomBinning, rbcd.RandomFourier)) else est.fit(X, y)


def test_weights_whose_sum_overflows_or_that_vanish_against_alpha_are_named():
    # every weight finite, their sum inf: the fits collapsed (alpha_ inf, a constant
    # prediction) with only numpy's overflow warnings; now a ValueError names the weights,
    # in rbcd, the twin and the models alike
    import rbcd
    import rbcd_ref

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = X[:, 0] - X[:, 1]
    Z = rbcd.RandomBinning(n_grids=8, random_state=0).fit_transform(X)
    huge = np.full(40, 1e308)
    for fit in (lambda: rbcd.RBRegressor(n_grids=8).fit(X, y, sample_weight=huge),
                lambda: rbcd.RBClassifier(n_grids=8).fit(X, y > 0, sample_weight=huge),
                lambda: rbcd.RidgeCG().fit(Z, y, sample_weight=huge),
                lambda: rbcd.CDRegressor().fit(Z, y, sample_weight=huge),
                lambda: rbcd_ref.RidgeCG().fit(Z, y, sample_weight=huge),
                lambda: rbcd_ref.CDRegressor().fit(Z, y, sample_weight=huge)):
        with pytest.raises(ValueError, match="sample_weight sums past the float64 range"):
            fit()
    # 1e300 each is fine (the solvers work in the weights' power-of-two units)
    a = rbcd.RidgeCG(alpha=1.0).fit(Z, y, sample_weight=np.full(40, 1e300))
    b = rbcd.RidgeCG(alpha=1e-300).fit(Z, y)
    np.testing.assert_allclose(a.predict(Z), b.predict(Z), rtol=1e-6, atol=1e-9)
    # weights so small that alpha leaves float64 in their units: named, not "alpha inf"
    with pytest.raises(ValueError, match="sample_weight is too small against alpha"):
        rbcd.RidgeCG(alpha=1e9).fit(Z, y, sample_weight=np.full(40, 1e-300))


@pytest.mark.parametrize("module", ["rbcd", "rbcd_ref"])
@pytest.mark.parametrize("damage", ["big", "negative", "indptr"])
def test_malformed_sparse_matrices_are_refused_before_any_read(module, damage):
    # a CSR matrix whose index arrays were edited in place: scipy's conversions and the
    # kernels read them unchecked (an index of 10**8 crashed the process); every entry
    # point that takes sparse input now names the damage first
    import importlib

    mod = importlib.import_module(module)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = X[:, 0]
    rb = mod.RandomBinning(n_grids=8, sigma=1.0, random_state=0)
    Z = sp.csr_matrix(rb.fit_transform(X))

    def damaged(M):
        M = sp.csr_matrix(M, copy=True)
        if damage == "indptr":
            M.indptr[3] = M.indptr[5] + 1          # offsets that go back
        else:
            M.indices[5] = 10**8 if damage == "big" else -5
        return M

    fits = [lambda: mod.CDRegressor(random_state=0).fit(damaged(Z), y),
            lambda: mod.CDRegressor(random_state=0).fit(Z, y).predict(damaged(Z)),
            lambda: mod.RidgeCG().fit(damaged(Z), y),
            lambda: mod.RidgeCG().fit(Z, y).predict(damaged(Z)),
            lambda: mod.RidgeCGClassifier().fit(damaged(Z), y > 0),
            lambda: mod.RandomBinning(n_grids=8, sigma=1.0).fit(damaged(sp.csr_matrix(X))),
            lambda: rb.transform(damaged(sp.csr_matrix(X))),
            lambda: mod.RandomFourier(n_components=8, random_state=0).fit(
                damaged(sp.csr_matrix(X)))]
    if module == "rbcd":
        fits += [lambda: mod.alpha_max(damaged(Z), y),
                 lambda: mod.RBRegressor(n_grids=8).fit(damaged(sp.csr_matrix(X)), y),
                 lambda: mod.RBRegressor(n_grids=8).fit(X, y).predict(damaged(sp.csr_matrix(X)))]
    for fit in fits:
        with pytest.raises(ValueError, match="malformed sparse matrix"):
            fit()


@pytest.mark.parametrize("module", ["rbcd", "rbcd_ref"])
def test_set_params_after_fit_changes_the_next_fit_not_the_fitted_model(module):
    # predictions, probabilities and transforms come from the fitted state: a later
    # set_params changed SparseRandomFeatures' labels into numbers, made predict_proba
    # crash or vanish, and switched rbcd_ref's RandomBinning to hashed columns
    import importlib

    mod = importlib.import_module(module)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    labels = np.where(X[:, 0] + X[:, 1] > 0, "yes", "no")
    srf = mod.SparseRandomFeatures(n_iter=3, random_state=0).fit(X, labels)
    before = srf.predict(X)
    srf.set_params(loss="squared")
    np.testing.assert_array_equal(srf.predict(X), before)
    assert srf.score(X, labels) > 0.8

    rb = mod.RandomBinning(n_grids=8, sigma=1.0, random_state=0).fit(X)
    Z = rb.transform(X)
    rb.set_params(n_features=64)
    assert (rb.transform(X) != Z).nnz == 0

    y = (X[:, 0] > 0).astype(int)
    for fit_kw, later in [({"solver": "cd", "loss": "logistic"}, {"loss": "squared_hinge"}),
                          ({"solver": "cd", "loss": "logistic"}, {"solver": "cg"}),
                          ({"solver": "cg"}, {"solver": "cd", "loss": "logistic"})]:
        if module == "rbcd_ref" and fit_kw["solver"] != "cd":
            continue                    # the twin has the logistic model's probabilities only
        clf = mod.RBClassifier(n_grids=8, random_state=0, **fit_kw).fit(X, y)
        proba = clf.predict_proba(X)
        clf.set_params(**later)
        assert hasattr(clf, "predict_proba")
        np.testing.assert_array_equal(clf.predict_proba(X), proba)
    if module == "rbcd":
        clf = mod.RBClassifier(n_grids=8, calibration=None, random_state=0).fit(X, y)
        clf.set_params(calibration="train")    # nothing calibrated in that fit
        assert not hasattr(clf, "predict_proba")


def test_generators_and_the_distance_scale_name_bad_inputs():
    import rbcd
    import rbcd_ref
    from rbcd import datasets

    for bad in (-1, "x", 1.5):
        with pytest.raises(ValueError, match="random_state must be None"):
            datasets.make_xor_blobs(n_samples=10, random_state=bad)
    X = np.random.default_rng(0).normal(size=(10, 2))
    for median in (rbcd.median_l1_distance, rbcd_ref._scale.median_l1_distance):
        with pytest.raises(ValueError, match="X must be real"):
            median(X + 5j)
    with pytest.raises(ValueError, match="^RBClassifier needs samples of at least 2 classes"):
        rbcd_ref.RBClassifier(n_grids=4, random_state=0).fit(X, np.ones(10))
