"""rbcd.dask behaves as the local estimators where an audit found them apart (D3, D10-D17):
the CD models' alpha="auto" final fit starts where the local one does, the ridge solvers'
``solver_``, float32 fits, no rows, parameter constraints, the binning's weights, the CD
ConvergenceWarning, the binning's advice for sigma="scale", and the index of a bad weight
or label. Each test compares with the local estimator (the reference).
"""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import InvalidParameterError

pytest.importorskip("distributed")
import dask.array as da  # noqa: E402

import rbcd  # noqa: E402
import rbcd.dask as rd  # noqa: E402
from rbcd._validation import check_class_labels  # noqa: E402


# the client fixture: tests/conftest.py


def _three_classes(n=600, seed=12):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 3))
    y = (X[:, 0] + X[:, 1] > 1).astype(int) + (X[:, 2] > 0.7)
    return X, y, rng.uniform(size=(30, 3))


def _error(fit):
    """(type, message) of the error ``fit()`` raises."""
    with pytest.raises(Exception) as info:
        fit()
    return type(info.value), str(info.value)


# ---------------------------------------------------------------------------- D3
@pytest.mark.parametrize("task", ["classifier", "regressor"])
def test_cd_auto_alpha_final_fit_starts_from_the_local_path_solution(client, task):
    # D3: alpha="auto" with solver="cd" gave the local alpha_, but the Dask final fit started
    # from zero where the local one starts from the held-out path's solution at alpha_: with
    # the decisions rule the two ended up to 2.5 apart in decision values. Up to 20,000 rows
    # the sample is every row; with selection="cyclic" the iterates are the local grid
    # mode's, so the model is the local one to rounding.
    X, y, Xt = _three_classes()
    if task == "regressor":
        y = np.sin(4 * X[:, 0]) + X[:, 1] ** 2
    kw = dict(n_grids=16, random_state=0, solver="cd", selection="cyclic", parallel="grid",
              sigma=0.5)
    local, dist = ((rbcd.RBClassifier, rd.RBClassifier) if task == "classifier"
                   else (rbcd.RBRegressor, rd.RBRegressor))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = local(**kw).fit(X, y)
        m = dist(**kw).fit(da.from_array(X, chunks=200), y)
    assert m.alpha_ == ref.alpha_
    np.testing.assert_array_equal(m.n_iter_, ref.n_iter_)
    if task == "classifier":
        a, b = m.decision_function(Xt).compute(), ref.decision_function(Xt)
        np.testing.assert_allclose(m.predict_proba(Xt).compute(), ref.predict_proba(Xt),
                                   rtol=0, atol=1e-10)
    else:
        a, b = m.predict(Xt).compute(), ref.predict(Xt)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)
    np.testing.assert_allclose(m.coef_, ref.coef_, rtol=0, atol=1e-10)


def test_cd_auto_alpha_above_the_sample_starts_from_the_sample_path(client, monkeypatch):
    # above the sample (HELDOUT_MAX_ROWS lowered to 1,000 of 3,000 rows) the final fit on
    # every row starts from the sample's path solution at the sample's alpha (the same
    # columns: the fit's tables), not from zero (docs/dask.md)
    from rbcd.dask import cd as dcd
    from rbcd.solvers import _heldout

    monkeypatch.setattr(_heldout, "HELDOUT_MAX_ROWS", 1000)
    X, y, _ = _three_classes(3000)
    starts = []
    solve_all = dcd._CDBase._solve_all

    def spy(self, *args, **kwargs):
        starts.append(args[5] if len(args) > 5 else kwargs.get("start"))
        return solve_all(self, *args, **kwargs)

    monkeypatch.setattr(dcd._CDBase, "_solve_all", spy)
    kw = dict(n_grids=8, sigma=0.5, solver="cd", random_state=0, max_epochs=50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = rd.RBClassifier(**kw).fit(X, y)
    assert len(starts) == 1 and starts[0] is not None
    W, B = starts[0]
    assert W.shape == m.coef_.shape and B.shape == m.intercept_.shape
    assert np.abs(W).sum() > 0 and np.all(np.isfinite(W))


# ---------------------------------------------------------------------------- D10
def test_ridge_solvers_report_their_method_as_locally(client):
    # D10: rd.RidgeCG / RidgeCGClassifier had no solver_ (the local ones: "cg", "dual"...)
    X, y, _ = _three_classes(400)
    Z, cols = rbcd.RandomBinning(n_grids=8, sigma=1.0, random_state=0).fit_transform(
        X, return_columns=True)
    Zd, dcols = rd.RandomBinning(n_grids=8, sigma=1.0, random_state=0).fit_transform(
        X, return_columns=True)
    yr = X[:, 0]
    assert rd.RidgeCG().fit(Zd, yr, columns=dcols).solver_ == "cg"
    assert rbcd.RidgeCG().fit(Z, yr, columns=cols).solver_ == "cg"
    assert rd.RidgeCGClassifier().fit(Zd, y, columns=dcols).solver_ == "cg"
    assert rbcd.RidgeCGClassifier().fit(Z, y, columns=cols).solver_ == "cg"
    assert rd.RBRegressor(n_grids=8, solver="cg", alpha=1.0).fit(X, yr).solver_.solver_ == "cg"


# ---------------------------------------------------------------------------- D11
def _dtypes_and_values(est, Z, y, method, **fit):
    est.fit(Z, y, **fit)
    out = getattr(est, method)(Z)
    lazy = out.dtype
    if hasattr(out, "compute"):
        out = out.compute()
    return est.coef_.dtype, np.asarray(est.intercept_).dtype, lazy, out.dtype, out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_solvers_keep_the_local_dtype_rule(client, dtype):
    # D11: float32 Z gave float64 coef_ (RidgeCGClassifier, CD) or float64 predictions
    # (RidgeCG); the local rule is Z's float dtype for coef_, intercept_ and the values
    X, y, _ = _three_classes(400)
    yr = np.sin(4 * X[:, 0])
    Z, cols = rbcd.RandomBinning(n_grids=8, sigma=1.0, random_state=0, dtype=dtype
                                 ).fit_transform(X, return_columns=True)
    Zd, dcols = rd.RandomBinning(n_grids=8, sigma=1.0, random_state=0, dtype=dtype
                                 ).fit_transform(X, return_columns=True)
    cd = dict(alpha=1e-3, selection="cyclic", max_epochs=200, random_state=0)
    pairs = [(rbcd.RidgeCG(tol=1e-10), rd.RidgeCG(tol=1e-10), yr, "predict", 1e-4),
             (rbcd.RidgeCGClassifier(tol=1e-10), rd.RidgeCGClassifier(tol=1e-10), y,
              "decision_function", 1e-4),
             (rbcd.CDRegressor(parallel="grid", **cd), rd.CDRegressor(**cd), yr, "predict", 1e-4),
             (rbcd.CDClassifier(parallel="grid", **cd), rd.CDClassifier(**cd), y,
              "decision_function", 1e-4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for local, dist, t, method, tol in pairs:
            lc, li, _, lo, lv = _dtypes_and_values(local, Z, t, method, columns=cols)
            dc, di, dl, do, dv = _dtypes_and_values(dist, Zd, t, method, columns=dcols)
            assert (dc, di, dl, do) == (lc, li, lo, lo), local
            assert lc == lo == dtype    # (intercept_: a Python float for CDRegressor, 1-D y)
            np.testing.assert_allclose(dv, lv, rtol=0, atol=tol)


@pytest.mark.parametrize("solver", ["cg", "cd"])
def test_models_keep_the_local_dtype_rule(client, solver):
    # D11 (models): RBRegressor cg predicted float64 from a float32 fit; RBClassifier cg and
    # the CD models fitted float64 coef_
    X, y, Xt = _three_classes(400)
    yr = np.sin(4 * X[:, 0])
    kw = dict(n_grids=8, alpha=1e-3 if solver == "cd" else 1.0, solver=solver,
              dtype=np.float32, random_state=0, sigma=1.0)
    if solver == "cd":
        kw.update(selection="cyclic", parallel="grid")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for local, dist, t, methods in [
                (rbcd.RBRegressor, rd.RBRegressor, yr, ("predict",)),
                (rbcd.RBClassifier, rd.RBClassifier, y, ("decision_function", "predict_proba"))]:
            ref = local(**kw).fit(X, t)
            m = dist(**kw).fit(X, t)
            assert m.coef_.dtype == ref.coef_.dtype == np.float32
            for method in methods:
                lazy = getattr(m, method)(Xt)
                got = lazy.compute()
                want = getattr(ref, method)(Xt)
                assert lazy.dtype == got.dtype == want.dtype, (local, method)
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-3)


# ---------------------------------------------------------------------------- D12
def test_no_rows_is_the_local_error(client):
    # D12: 0 rows gave IndexError (classifiers: classes[0] of no class) or "sample_weight
    # must contain at least one non-zero weight" (RidgeCG); locally scikit-learn's words
    X, y, _ = _three_classes(400)
    yr = X[:, 0]
    Z, cols = rbcd.RandomBinning(n_grids=8, sigma=1.0, random_state=0).fit_transform(
        X, return_columns=True)
    Zd, dcols = rd.RandomBinning(n_grids=8, sigma=1.0, random_state=0).fit_transform(
        X, return_columns=True)
    cases = [
        (rbcd.RBClassifier(alpha=1.0), rd.RBClassifier(alpha=1.0), X, y, {}),
        (rbcd.RBClassifier(), rd.RBClassifier(), X, y, {}),
        (rbcd.RBRegressor(), rd.RBRegressor(), X, yr, {}),
        (rbcd.RBRegressor(solver="cd"), rd.RBRegressor(solver="cd"), X, yr, {}),
        (rbcd.RidgeCG(), rd.RidgeCG(), Z, yr, {}),
        (rbcd.RidgeCGClassifier(), rd.RidgeCGClassifier(), Z, y, {}),
        (rbcd.CDRegressor(), rd.CDRegressor(), Z, yr, {"columns": dcols}),
        (rbcd.CDClassifier(), rd.CDClassifier(), Z, y, {"columns": dcols}),
    ]
    for local, dist, A, t, fit in cases:
        want = _error(lambda: local.fit(A[:0], t[:0]))
        assert want[0] is ValueError and "Found array with 0 sample(s)" in want[1]
        assert _error(lambda: dist.fit(A[:0], t[:0], **fit)) == want
        if A is Z:   # a dask Z without rows
            assert _error(lambda: dist.fit(Zd[:0], t[:0], **fit)) == want
    for shape in ((0, 3), (5, 0)):    # the binning, with weights too (checked first)
        for w in (None, np.ones(shape[0]), -np.ones(shape[0])):
            want = _error(lambda: rbcd.RandomBinning().fit(np.zeros(shape), sample_weight=w))
            assert want[0] is ValueError
            assert _error(lambda: rd.RandomBinning().fit(np.zeros(shape), sample_weight=w)) == want
    with pytest.raises(ValueError, match="2 classes in y, got no sample"):
        check_class_labels(np.zeros(0), 0, "RBClassifier")


# ---------------------------------------------------------------------------- D13
@pytest.mark.parametrize("name, value", [
    ("fit_intercept", "False"), ("verbose", "yes"), ("tol", -1.0), ("max_iter", 0),
    ("preconditioner", "ilu"), ("n_jobs", 0), ("alpha", -1.0)])
def test_ridge_solver_parameters_are_the_local_constraints(client, name, value):
    # D13: rd.RidgeCG(fit_intercept="False") fitted an intercept (bool("False") is True);
    # locally InvalidParameterError. The Dask ridge solvers take the local constraints
    X, y, _ = _three_classes(200)
    Z = rbcd.RandomBinning(n_grids=4, sigma=1.0, random_state=0).fit_transform(X)
    Zd = rd.RandomBinning(n_grids=4, sigma=1.0, random_state=0).fit_transform(X)
    for local, dist, t in [(rbcd.RidgeCG, rd.RidgeCG, X[:, 0] + 5),
                           (rbcd.RidgeCGClassifier, rd.RidgeCGClassifier, y)]:
        want = _error(lambda: local(**{name: value}).fit(Z, t))
        assert want[0] is InvalidParameterError, want
        assert _error(lambda: dist(**{name: value}).fit(Zd, t)) == want
    want = _error(lambda: rbcd.RidgeCGClassifier(class_weight="auto").fit(Z, y))
    assert _error(lambda: rd.RidgeCGClassifier(class_weight="auto").fit(Zd, y)) == want


@pytest.mark.parametrize("name, value", [
    ("fit_intercept", "False"), ("warm_start", "False"), ("verbose", "yes"),
    ("random_state", "seed"), ("selection", "greedy"), ("l1_ratio", 2.0)])
def test_cd_solver_parameters_are_the_local_constraints(client, name, value):
    # the same for the Dask CD solvers: warm_start="False" would have warm-started
    X, y, _ = _three_classes(200)
    Z, cols = rbcd.RandomBinning(n_grids=4, sigma=1.0, random_state=0).fit_transform(
        X, return_columns=True)
    Zd, dcols = rd.RandomBinning(n_grids=4, sigma=1.0, random_state=0).fit_transform(
        X, return_columns=True)
    for local, dist, t in [(rbcd.CDRegressor, rd.CDRegressor, X[:, 0]),
                           (rbcd.CDClassifier, rd.CDClassifier, y)]:
        want = _error(lambda: local(**{name: value}).fit(Z, t, columns=cols))
        assert want[0] is InvalidParameterError, want
        assert _error(lambda: dist(**{name: value}).fit(Zd, t, columns=dcols)) == want


def test_values_only_the_local_solvers_take_are_refused_by_name(client):
    # docs/dask.md: "Other values are refused by name" (after the local constraints)
    X, y, _ = _three_classes(200)
    Zd, dcols = rd.RandomBinning(n_grids=4, sigma=1.0, random_state=0).fit_transform(
        X, return_columns=True)
    for est, words in [(rd.RidgeCG(solver="direct"), "solver must be 'cg' or 'auto'"),
                       (rd.RidgeCG(alpha="auto"), "needs a number for alpha"),
                       (rd.RidgeCG(device="cuda"), "device must be 'cpu'"),
                       (rd.RidgeCGClassifier(multi_class="ovo"), "multi_class must be 'ovr'"),
                       (rd.CDRegressor(parallel="hogwild"), "parallel must be 'auto'"),
                       (rd.CDRegressor(alpha="auto"), "needs a number for alpha")]:
        t = y if isinstance(est, rd.RidgeCGClassifier) else X[:, 0]
        with pytest.raises(ValueError, match=words):
            est.fit(Zd, t, columns=dcols)


# ---------------------------------------------------------------------------- D14
@pytest.mark.parametrize("sigma", [1.0, "scale"])
def test_binning_checks_the_weights_whatever_sigma(client, sigma):
    # D14: rd.RandomBinning(sigma=<number>).fit(X, sample_weight=<bad>) was accepted (the
    # weights were checked for sigma="scale" only); the local binning refuses them
    X = np.random.default_rng(0).uniform(size=(100, 3))
    for sw in (-np.ones(100), np.ones(5), np.full(100, np.nan), np.zeros(100)):
        want = _error(lambda: rbcd.RandomBinning(sigma=sigma, n_grids=4).fit(
            X, sample_weight=sw))
        assert want[0] is ValueError and "sample_weight" in want[1]
        assert _error(lambda: rd.RandomBinning(sigma=sigma, n_grids=4).fit(
            X, sample_weight=sw)) == want
        if sw.shape[0] == 100:
            assert _error(lambda: rd.RandomBinning(sigma=sigma, n_grids=4).fit(
                da.from_array(X, chunks=30), sample_weight=da.from_array(sw, chunks=40))) == want


# ---------------------------------------------------------------------------- D15
@pytest.mark.parametrize("sigma", [0.5, 5.0])
def test_cd_convergence_warning_is_the_local_one(client, sigma):
    # D15: one ConvergenceWarning per class ("did not converge (problem 0)...") where the
    # local CD gives one for the fit ("for 3 of 3 problems ... (problem 2, the worst)");
    # with a bin holding every row (sigma=5 on [0, 1]^3) the local advice names it
    X, y, _ = _three_classes(300, seed=3)
    kw = dict(n_grids=16, random_state=0, alpha=1e-3, solver="cd", max_epochs=3,
              selection="cyclic", parallel="grid", sigma=sigma)
    caught = {}
    for name, est in [("local", rbcd.RBClassifier(**kw)), ("dask", rd.RBClassifier(**kw)),
                      ("local1", rbcd.RBRegressor(**kw)), ("dask1", rd.RBRegressor(**kw))]:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            est.fit(X, y if "1" not in name else X[:, 0] - X[:, 1])
        caught[name] = [str(x.message) for x in w if issubclass(x.category, ConvergenceWarning)]
    assert len(caught["local"]) == 1 and "for 3 of 3 problems" in caught["local"][0]
    assert caught["dask"] == caught["local"]
    assert len(caught["local1"]) == 1 and caught["dask1"] == caught["local1"]
    if sigma == 5.0:
        assert "try a smaller sigma" in caught["local"][0]


# ---------------------------------------------------------------------------- D16
def test_too_large_to_bin_under_scale_gives_the_local_advice(client):
    # D16: Dask passes the number sigma="scale" computed to the local binning, whose advice
    # then said "use a larger sigma, e.g. sigma='scale'" though scale was used
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(300, 3))
    X[1, 1] = 1e300
    y = X[:, 0]
    want = _error(lambda: rbcd.RBRegressor(n_grids=8, alpha=1.0, random_state=0).fit(X, y))
    assert "sigma='scale' took it from the median distance" in want[1]
    assert _error(lambda: rd.RBRegressor(n_grids=8, alpha=1.0, random_state=0).fit(X, y)) == want
    want = _error(lambda: rbcd.RandomBinning(n_grids=8, random_state=0).fit(X))
    assert _error(lambda: rd.RandomBinning(n_grids=8, random_state=0).fit(
        da.from_array(X, chunks=100))) == want
    # a number: the local advice for a number
    want = _error(lambda: rbcd.RandomBinning(n_grids=8, sigma=0.5, random_state=0).fit(X))
    assert "use a larger sigma" in want[1]
    assert _error(lambda: rd.RandomBinning(n_grids=8, sigma=0.5, random_state=0).fit(X)) == want


# ---------------------------------------------------------------------------- D17
@pytest.mark.parametrize("bad", [-1.0, np.nan, np.inf])
def test_bad_weight_is_named_by_its_index_as_locally(client, bad):
    # D17: "sample_weight must be non-negative (got a negative weight)" / "contains NaN or
    # inf" without the index; locally "got -1.0 at index 1" / "(nan at index 1)". The
    # first bad weight in row order, though a later partition holds another one
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(300, 3))
    y = np.sin(4 * X[:, 0])
    yc = (X[:, 0] > 0.5).astype(int)
    s = np.ones(300)
    s[[170, 260]] = bad
    s[5] = -2.0 if bad != -1.0 else 1.0        # a negative weight before a NaN: NaN first
    Zd, dcols = rd.RandomBinning(n_grids=4, sigma=1.0, random_state=0).fit_transform(
        X, return_columns=True)
    want = _error(lambda: rbcd.RBRegressor(n_grids=8, alpha=1.0).fit(X, y, sample_weight=s))
    assert want[0] is ValueError and "at index" in want[1]
    fits = [lambda w: rd.RBRegressor(n_grids=8, alpha=1.0).fit(X, y, sample_weight=w),
            lambda w: rd.RBClassifier(n_grids=8).fit(X, yc, sample_weight=w),
            lambda w: rd.RidgeCG().fit(Zd, y, sample_weight=w),
            lambda w: rd.CDClassifier().fit(Zd, yc, sample_weight=w, columns=dcols),
            lambda w: rd.RandomBinning(n_grids=4, sigma=1.0).fit(X, sample_weight=w)]
    for fit in fits:
        for w in (s, da.from_array(s, chunks=100)):
            assert _error(lambda: fit(w)) == want


def test_dask_y_with_none_is_named_as_locally(client):
    # D17: a dask y holding None gave numpy's "TypeError: '<' not supported" (classifiers)
    # or was read as NaN (regression); locally "y contains None at index 0" and "y must be
    # numeric for regression, got None at index ..."
    X, y, _ = _three_classes(300)
    Zd, dcols = rd.RandomBinning(n_grids=4, sigma=1.0, random_state=0).fit_transform(
        X, return_columns=True)
    for where in (0, 250):
        labels = y.astype(object)
        labels[where] = None
        want = _error(lambda: rbcd.RBClassifier(n_grids=8, alpha=1.0).fit(X, labels))
        assert want == (ValueError, f"y contains None at index {where}: class labels must be "
                                    f"finite numbers or strings")
        yd = da.from_array(labels, chunks=100)
        for fit in (lambda t: rd.RBClassifier(n_grids=8, alpha=1.0).fit(X, t),
                    lambda t: rd.RBClassifier(n_grids=8).fit(X, t),
                    lambda t: rd.RidgeCGClassifier().fit(Zd, t),
                    lambda t: rd.CDClassifier().fit(Zd, t, columns=dcols)):
            assert _error(lambda: fit(yd)) == want
        targets = X[:, 0].astype(object)
        targets[where] = None
        want = _error(lambda: rbcd.RBRegressor(n_grids=8, alpha=1.0).fit(X, targets))
        assert want == (ValueError, f"y must be numeric for regression, got None at index "
                                    f"{where}")
        yd = da.from_array(targets, chunks=100)
        for fit in (lambda t: rd.RBRegressor(n_grids=8, alpha=1.0).fit(X, t),
                    lambda t: rd.RBRegressor(n_grids=8).fit(X, t),
                    lambda t: rd.RidgeCG().fit(Zd, t),
                    lambda t: rd.CDRegressor().fit(Zd, t, columns=dcols)):
            assert _error(lambda: fit(yd)) == want


@pytest.mark.parametrize("class_weight", ["balanced", {0: 1.0, 1: 3.0, 2: 10.0}])
@pytest.mark.parametrize("weights", ["none", "array", "scalar"])
def test_ridge_auto_alpha_with_class_weight_is_the_local_choice(client, class_weight, weights):
    """alpha="auto" above the 1,000-row sample with a class_weight: the class weights of
    ALL the labels folded into the sample's weights and the total, as the local solver
    folds them before it samples ("balanced" counted on the sample's labels gave 5.48
    against the local 17.16): the local model's choice with linear=0."""
    import dask.array as da

    rng = np.random.default_rng(10)
    n = 3000
    X = rng.uniform(size=(n, 3))
    y = ((X[:, 0] + 0.3 * rng.normal(size=n)) > 0.8).astype(int) + (X[:, 1] > 0.9)
    w = {"none": None, "array": rng.uniform(0.3, 2.0, n), "scalar": 2.5}[weights]
    kw = dict(n_grids=16, random_state=0, solver="cg", tol=1e-6, class_weight=class_weight)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = rbcd.RBClassifier(linear=0, **kw).fit(X, y, sample_weight=w)
        dist = rd.RBClassifier(**kw).fit(da.from_array(X, chunks=1000), y, sample_weight=w)
    assert dist.alpha_ == pytest.approx(local.alpha_, rel=1e-12)
