"""CDRegressor / CDClassifier API: scikit-learn compatibility, shapes, attributes, errors."""
import functools
import types
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

import rbcd
from rbcd.solvers.cd import CDClassifier, CDRegressor, alpha_max, cd_path


def _expected_failures(estimator):
    # classification: the default decisions rule ends a fit once the training decisions
    # settle, before the optimum that sample-weight equivalence compares at rtol 1e-7
    if isinstance(estimator, CDClassifier) and estimator.decision_epochs is not None:
        return {f"check_sample_weight_equivalence_on_{kind}_data": "the decisions rule (decision_epochs) stops before the optimum, at an epoch that rounding can move between weighted and repeated rows"
                for kind in ("dense", "sparse")}
    return {}


@parametrize_with_checks([CDRegressor(), CDClassifier(), CDClassifier(loss="squared_hinge"),
                          CDClassifier(decision_epochs=None)],
                         expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


def test_public_names_are_lazy_aliases():
    assert rbcd.CDRegressor is CDRegressor and rbcd.CDClassifier is CDClassifier
    assert rbcd.cd_path is cd_path and rbcd.alpha_max is alpha_max


# ---------------------------------------------------------------------------- fixtures
def data(n=40, d=7, seed=0):
    rng = np.random.default_rng(seed)
    Z = sp.random(n, d, density=0.5, format="csr", random_state=rng)
    y = rng.normal(size=n)
    return Z, y


def quiet_fit(est, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(*args, **kw)


# ---------------------------------------------------------------------------- shapes
def test_regressor_shapes_and_attributes():
    Z, y = data()
    est = quiet_fit(CDRegressor(max_epochs=5, n_jobs=1), Z, y)
    assert est.coef_.shape == (7,) and isinstance(est.intercept_, float)
    assert isinstance(est.n_iter_, int) and 1 <= est.n_iter_ <= 5
    assert len(est.objective_history_) == est.n_iter_
    assert isinstance(est.dual_gap_, float)
    assert est.parallel_ is None and est.n_threads_ == 1
    assert est.predict(Z).shape == (40,)
    Y = np.column_stack([y, 2 * y, -y])
    est2 = quiet_fit(CDRegressor(max_epochs=5), Z, Y)
    assert est2.coef_.shape == (3, 7) and est2.intercept_.shape == (3,)
    assert est2.n_iter_.shape == (3,) and est2.dual_gap_.shape == (3,)
    assert len(est2.objective_history_) == 3
    assert est2.predict(Z).shape == (40, 3)


def test_classifier_shapes_and_proba():
    Z, y = data(60)
    yb = np.where(y > 0, "pos", "neg")
    est = quiet_fit(CDClassifier(max_epochs=20), Z, yb)
    assert list(est.classes_) == ["neg", "pos"]
    assert est.coef_.shape == (1, 7) and est.intercept_.shape == (1,)
    assert est.decision_function(Z).shape == (60,)
    P = est.predict_proba(Z)
    assert P.shape == (60, 2) and np.allclose(P.sum(axis=1), 1)
    assert np.array_equal(est.predict(Z), est.classes_[(P[:, 1] > 0.5).astype(int)])
    assert np.allclose(np.exp(est.predict_log_proba(Z)), P)
    y3 = np.digitize(y, [-0.5, 0.5])
    est3 = quiet_fit(CDClassifier(max_epochs=20), Z, y3)
    assert est3.coef_.shape == (3, 7) and est3.decision_function(Z).shape == (60, 3)
    P3 = est3.predict_proba(Z)
    assert P3.shape == (60, 3) and np.allclose(P3.sum(axis=1), 1)
    assert np.array_equal(est3.predict(Z), est3.classes_[np.argmax(P3, axis=1)])
    hinge = quiet_fit(CDClassifier(loss="squared_hinge", max_epochs=5), Z, y3)
    assert not hasattr(hinge, "predict_proba") and not hasattr(hinge, "predict_log_proba")
    assert hinge.predict(Z).shape == (60,)


def test_params_untouched_and_clone_roundtrip():
    from sklearn.base import clone

    est = CDClassifier(alpha=0.5, parallel=None, class_weight="balanced", n_jobs=2)
    params = est.get_params()
    Z, y = data()
    quiet_fit(est, Z, np.sign(y))
    assert est.get_params() == params
    assert clone(est).get_params() == params


# ---------------------------------------------------------------------------- errors
@pytest.mark.parametrize("params, match", [
    (dict(alpha=-1.0), "The 'alpha' parameter"),
    (dict(alpha=np.nan), "The 'alpha' parameter"),
    (dict(alpha=np.inf), "The 'alpha' parameter"),
    (dict(alpha="big"), "The 'alpha' parameter"),
    (dict(l1_ratio=1.5), "The 'l1_ratio' parameter"),
    (dict(l1_ratio=-0.1), "The 'l1_ratio' parameter"),
    (dict(loss="hinge"), "The 'loss' parameter"),
    (dict(loss="logistic"), "The 'loss' parameter"),
    (dict(selection="shuffle"), "The 'selection' parameter"),
    (dict(parallel="threads"), "The 'parallel' parameter"),
    (dict(max_epochs=0), "The 'max_epochs' parameter"),
    (dict(max_epochs=2.5), "The 'max_epochs' parameter"),
    (dict(tol=-1e-3), "The 'tol' parameter"),
    (dict(n_jobs=0), "n_jobs"),
    (dict(fit_intercept="yes"), "The 'fit_intercept' parameter"),
])
def test_regressor_parameter_errors(params, match):
    Z, y = data()
    with pytest.raises(ValueError, match=match):
        CDRegressor(**params).fit(Z, y)


def test_classifier_parameter_errors():
    Z, y = data()
    with pytest.raises(ValueError, match="The 'loss' parameter"):
        CDClassifier(loss="squared").fit(Z, np.sign(y))
    with pytest.raises(ValueError, match="The 'class_weight' parameter"):
        CDClassifier(class_weight="auto").fit(Z, np.sign(y))


@pytest.mark.parametrize("make", ["cd", "ridge", "ref_cd", "ref_ridge"])
def test_class_weight_absent_labels_follow_scikit_learn(make):
    # scikit-learn's rule (compute_sample_weight): a dict may name labels absent from y when
    # it names every label present; one that leaves a present label out and names an
    # absent one is refused. The CD and ridge classifiers, and the twin's, apply it alike.
    import rbcd_ref
    Z, y = data()
    y = np.sign(y)
    cls = {"cd": CDClassifier, "ridge": rbcd.RidgeCGClassifier,
           "ref_cd": rbcd_ref.CDClassifier, "ref_ridge": rbcd_ref.RidgeCGClassifier}[make]
    if "cd" in make:                                 # one coordinate order for both
        cls = functools.partial(cls, random_state=0)
    extra = cls(class_weight={-1.0: 2.0, 1.0: 0.5, 7: 3.0}).fit(Z, y)
    plain = cls(class_weight={-1.0: 2.0, 1.0: 0.5}).fit(Z, y)
    np.testing.assert_array_equal(extra.coef_, plain.coef_)
    np.testing.assert_array_equal(extra.intercept_, plain.intercept_)
    unweighted = cls(class_weight={-1.0: 2.0}).fit(Z, y)     # 1.0 keeps weight 1
    assert not (np.array_equal(unweighted.coef_, plain.coef_)
                and np.array_equal(unweighted.intercept_, plain.intercept_))
    with pytest.raises(ValueError, match=r"The classes, \[1(\.0)?\], are not in class_weight"):
        cls(class_weight={-1.0: 2.0, 7: 3.0}).fit(Z, y)


def test_target_errors():
    Z, y = data()
    with pytest.raises(ValueError, match="y has 39 rows but the feature matrix has 40"):
        CDRegressor().fit(Z, y[:-1])
    with pytest.raises(ValueError, match="y must be 1-D or 2-D"):
        CDRegressor().fit(Z, y.reshape(40, 1, 1))
    for bad in (np.nan, np.inf):
        yb = y.copy()
        yb[3] = bad
        with pytest.raises(ValueError, match="y contains NaN or inf"):
            CDRegressor().fit(Z, yb)
        with pytest.raises(ValueError, match="y contains NaN or inf"):
            CDClassifier().fit(Z, yb)
    with pytest.raises(ValueError, match="at least 2 classes"):
        CDClassifier().fit(Z, np.ones(40))
    with pytest.raises(ValueError, match="y has 39 rows"):
        CDClassifier().fit(Z, np.sign(y)[:-1])
    with pytest.raises(ValueError, match="1-D"):
        CDClassifier().fit(Z, np.ones((40, 2)))
    with pytest.raises(ValueError, match="requires y to be passed"):
        CDRegressor().fit(Z, None)
    with pytest.raises(ValueError, match="Unknown label type"):
        CDClassifier().fit(Z, y)  # continuous labels


def test_sample_weight_errors():
    Z, y = data()
    bad = np.ones(40)
    bad[5] = -1.0
    with pytest.raises(ValueError, match="non-negative"):
        CDRegressor().fit(Z, y, sample_weight=bad)
    with pytest.raises(ValueError, match="sample_weight has 39 entries"):
        CDRegressor().fit(Z, y, sample_weight=np.ones(39))
    with pytest.raises(ValueError, match="sample_weight contains NaN"):
        CDClassifier().fit(Z, np.sign(y), sample_weight=np.full(40, np.nan))
    with pytest.raises(ValueError, match="weights are all zero"):
        CDRegressor().fit(Z, y, sample_weight=np.zeros(40))
    yc = np.sign(y)
    w = np.where(yc > 0, 0.0, 1.0)  # one class carries no weight
    with pytest.raises(ValueError, match="sample weights of one class sum to zero"):
        CDClassifier().fit(Z, yc, sample_weight=w)


def test_feature_matrix_errors():
    Z, y = data()
    Zd = Z.toarray()
    Zd[2, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        CDRegressor().fit(Zd, y)
    est = quiet_fit(CDRegressor(max_epochs=2), Z, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(Z[:, :5])


def test_grid_structure_errors():
    Z, y = data()
    with pytest.raises(ValueError, match="parallel='grid' needs the grid structure"):
        CDRegressor(parallel="grid").fit(Z, y)
    with pytest.raises(ValueError, match="without grid_ptr_"):
        CDRegressor(parallel="grid").fit(Z, y, columns=types.SimpleNamespace(grid_ptr_=None))
    # a row with two entries in one grid is not a random binning structure
    bad = types.SimpleNamespace(grid_ptr_=np.array([0, 7], dtype=np.int64))
    with pytest.raises(ValueError, match="more than one entry in grid 0"):
        CDRegressor(parallel="grid").fit(Z, y, columns=bad)
    wrong = types.SimpleNamespace(grid_ptr_=np.array([0, 3, 9], dtype=np.int64))
    with pytest.raises(ValueError, match="9 columns but Z has 7"):
        CDRegressor(parallel="grid").fit(Z, y, columns=wrong)


def test_hashed_random_binning_has_no_grid_structure():
    from rbcd.binning.random_binning import RandomBinning

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    rb = RandomBinning(n_grids=4, n_features=64, random_state=0)
    Z = rb.fit_transform(X)
    with pytest.raises(ValueError, match="exact mode"):
        CDRegressor(parallel="grid").fit(Z, X[:, 0], columns=rb)


def test_function_errors():
    Z, y = data()
    with pytest.raises(ValueError, match="l1_ratio=0"):
        alpha_max(Z, y, l1_ratio=0.0)
    with pytest.raises(ValueError, match="loss must be one of"):
        alpha_max(Z, y, loss="hinge")
    with pytest.raises(ValueError, match="at least 2 classes"):
        alpha_max(Z, np.zeros(40), loss="logistic")
    with pytest.raises(ValueError, match="y has 39 rows"):
        alpha_max(Z, y[:-1])
    with pytest.raises(ValueError, match="alphas must be finite and >= 0"):
        cd_path(Z, y, alphas=[0.1, -1.0])
    with pytest.raises(ValueError, match="eps must be > 0"):
        cd_path(Z, y, eps=0.0)
    with pytest.raises(ValueError, match="n_alphas must be >= 1"):
        cd_path(Z, y, n_alphas=0)


def test_cd_path_given_alphas_sorted_and_classifier_path():
    Z, y = data(80)
    alphas, coefs, gaps = cd_path(Z, y, alphas=[0.001, 0.1, 0.01], tol=1e-8, max_epochs=5000,
                                  random_state=0)
    assert np.array_equal(alphas, [0.1, 0.01, 0.001])
    assert coefs.shape == (7, 3) and gaps.shape == (3,)
    # sparser for larger alpha
    assert np.count_nonzero(coefs[:, 0]) <= np.count_nonzero(coefs[:, 2])
    Y = np.column_stack([y, -y])
    _, coefs2, gaps2 = cd_path(Z, Y, n_alphas=4, tol=1e-6, max_epochs=5000, random_state=0)
    assert coefs2.shape == (2, 7, 4) and gaps2.shape == (4, 2)
    assert np.allclose(coefs2[0], -coefs2[1], atol=1e-5)  # y -> -y flips w


def test_invalid_column_structures_are_errors_not_crashes():
    # scipy accepts a CSC whose row index is out of range (no full check); the kernels index
    # without bounds checks, so fit must refuse it
    Z = sp.csc_matrix((np.ones(3), np.array([0, 5, 1]), np.array([0, 1, 3])), shape=(3, 2))
    with pytest.raises(ValueError, match=r"malformed sparse matrix: a stored index 5 lies "
                                         r"outside 0\.\.2"):
        CDRegressor().fit(Z, np.arange(3.0))
    bad = types.SimpleNamespace(indptr=np.array([0, 2, 4], dtype=np.int64),
                                indices=np.array([0, 1, 9, 2], dtype=np.int32),
                                grid_ptr=np.array([0, 1, 2]), value=0.7, n_rows=3)
    with pytest.raises(ValueError, match="columns are not the grid structure of this Z"):
        CDRegressor().fit(sp.csr_matrix(np.ones((3, 2))), np.arange(3.0), columns=bad)
    shape = types.SimpleNamespace(indptr=np.array([0, 2], dtype=np.int64),
                                  indices=np.array([0, 1], dtype=np.int32),
                                  grid_ptr=np.array([0, 1]), value=0.7, n_rows=3)
    with pytest.raises(ValueError, match="describe a 3 x 1 matrix but Z is 3 x 2"):
        CDRegressor().fit(sp.csr_matrix(np.ones((3, 2))), np.arange(3.0), columns=shape)


def _rb_pair(X, **kw):
    from rbcd.binning.random_binning import RandomBinning

    return RandomBinning(n_grids=6, sigma=0.5, **kw)._fit_transform_columns(X)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_columns_hand_over_is_checked():
    # issue 15 item 4: columns of another Z (same shape and nnz) are refused, cheaply
    from rbcd.solvers.cg import RidgeCG

    rng = np.random.default_rng(0)
    X = rng.uniform(size=(300, 2))
    y = np.sin(4 * X[:, 0])
    Z, cols = _rb_pair(X, random_state=0)
    a = CDRegressor(max_epochs=3, random_state=0).fit(Z, y, columns=cols)
    b = CDRegressor(max_epochs=3, random_state=0).fit(Z, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)  # serial either way: the same iterates
    # the same binning of the rows in another order: same shape, nnz, grid sizes
    perm = rng.permutation(300)
    Zp, colsp = _rb_pair(X[perm], random_state=0)
    assert Zp.shape == Z.shape and Zp.nnz == Z.nnz
    for est in (CDRegressor(max_epochs=2), CDClassifier(max_epochs=2), RidgeCG()):
        t = y if not isinstance(est, CDClassifier) else (y > 0)
        with pytest.raises(ValueError, match="columns are not the grid structure of this Z"):
            est.fit(Z, t, columns=colsp)
        with pytest.raises(ValueError, match="columns are not the grid structure of this Z"):
            est.fit(Z[:-1], t[:-1], columns=cols)
    # stored values other than the structure's value
    with pytest.raises(ValueError, match="stores values other than"):
        RidgeCG().fit(Z * 2.0, y, columns=cols)


def test_corrupt_grid_labels_are_refused():
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(200, 2))
    y = X[:, 0]
    Z, cols = _rb_pair(X, random_state=3)
    assert cols.grid_labels is not None
    good = [a.copy() for a in cols.grid_labels]
    n_bins = int(cols.grid_ptr[1] - cols.grid_ptr[0])
    cols.grid_labels[0][5] = n_bins + 1                      # past the sentinel
    with pytest.raises(ValueError, match="grid labels of grid 0 are corrupt"):
        CDRegressor(parallel="grid", max_epochs=1).fit(Z, y, columns=cols)
    cols.grid_labels = [good[0].astype(np.int64)] + good[1:]  # wrong layout
    with pytest.raises(ValueError, match="labels of grid 0 must be uint16"):
        CDRegressor(parallel="grid", max_epochs=1).fit(Z, y, columns=cols)
    bad = good[0].copy()
    bad[0] = (bad[0] + 1) % n_bins                           # in range, but not Z's bin
    cols.grid_labels = [bad] + good[1:]
    with pytest.raises(ValueError, match="row 0 is labelled"):
        CDRegressor(parallel="grid", max_epochs=1).fit(Z, y, columns=cols)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # a fixed epoch budget
def test_n_jobs_none_gives_the_same_coefficients_as_any_count():
    # issue 15 item 7: parallel="auto" does not depend on the core count
    rng = np.random.default_rng(2)
    X = rng.uniform(size=(400, 2))
    Z, cols = _rb_pair(X, random_state=0)
    y = X[:, 0] - X[:, 1]
    fits = [CDRegressor(tol=1e-6, max_epochs=200, n_jobs=j, random_state=0).fit(
        Z, y, columns=cols) for j in (None, 1, 2, 3)]
    for f in fits[1:]:
        assert f.parallel_ == fits[0].parallel_
        np.testing.assert_array_equal(f.coef_, fits[0].coef_)


def test_multiclass_warns_once_with_a_summary():
    rng = np.random.default_rng(3)
    Z = sp.csr_matrix(rng.random((60, 10)))
    y = np.arange(60) % 4
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        CDClassifier(max_epochs=1, tol=0.0).fit(Z, y)
    msgs = [str(w.message) for w in rec if issubclass(w.category, ConvergenceWarning)]
    assert len(msgs) == 1 and "for 4 of 4 problems" in msgs[0] and "after 1 epochs" in msgs[0]


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_extreme_target_scales_give_the_scaled_model(scale):
    # issue 15 item 2: the squared-loss problem is solved in power-of-two units (exact)
    rng = np.random.default_rng(4)
    Z = sp.csr_matrix(rng.random((50, 6)))
    y = rng.normal(size=50)
    kw = dict(alpha=1e-3, l1_ratio=1.0, tol=1e-8, max_epochs=2000, random_state=0)
    base = CDRegressor(**kw, n_jobs=1).fit(Z, y)
    c = float(np.ldexp(1.0, int(np.frexp(scale)[1]) - 1))   # the power of two used
    big = CDRegressor(**{**kw, "alpha": kw["alpha"] * scale}, n_jobs=1).fit(Z, y * scale)
    assert np.all(np.isfinite(big.coef_)) and np.any(big.coef_ != 0)
    np.testing.assert_allclose(big.coef_ / scale, base.coef_, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(big.intercept_ / scale, base.intercept_, rtol=1e-6)
    assert np.isfinite(big.dual_gap_) and big.dual_gap_ <= 1e-8
    assert c > 0


@pytest.mark.parametrize("l1_ratio", [0.0, 1.0])
@pytest.mark.parametrize("k", [-150, 150])
def test_power_of_two_target_scaling_is_exactly_equivariant(l1_ratio, k):
    # y * 2^k with lam1 * 2^k (lam2 unchanged) has the minimizer w * 2^k, and every CD step
    # scales exactly. Beyond 2^+-100 the target is solved in power-of-two units: the same
    # iterates, the same convergence check (gap or subgradient, by l1_ratio), the same stop.
    rng = np.random.default_rng(6)
    Z = sp.csr_matrix(rng.random((40, 5)))
    y = rng.normal(size=40)
    s = 2.0**k
    kw = dict(max_epochs=3000, tol=1e-6, random_state=3, n_jobs=1, parallel=None)

    a = CDRegressor(alpha=1e-3, l1_ratio=l1_ratio, **kw).fit(Z, y)
    # (lasso: alpha * 2^k; ridge: the same alpha)
    b = CDRegressor(alpha=1e-3 * (s if l1_ratio else 1.0), l1_ratio=l1_ratio, **kw).fit(Z, y * s)
    np.testing.assert_array_equal(b.coef_, a.coef_ * s)
    assert b.intercept_ == a.intercept_ * s
    assert b.n_iter_ == a.n_iter_ < kw["max_epochs"]
    assert b.dual_gap_ == pytest.approx(a.dual_gap_, rel=1e-9)


def test_extreme_sample_weights():
    rng = np.random.default_rng(5)
    Z = sp.csr_matrix(rng.random((40, 5)))
    y = rng.normal(size=40)
    s = rng.uniform(0.5, 2, size=40)
    a = CDRegressor(tol=1e-8, max_epochs=500, random_state=0, n_jobs=1).fit(Z, y, sample_weight=s)
    b = CDRegressor(tol=1e-8, max_epochs=500, random_state=0, n_jobs=1).fit(
        Z, y, sample_weight=s * 1e160)
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-9, atol=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_random_state_accepts_64_bit_seeds_and_generators():
    Z, y = data()
    for rs in (2**63 + 5, np.random.default_rng(0), np.random.RandomState(0),
               np.random.SeedSequence(3), None, 0):
        CDRegressor(max_epochs=1, random_state=rs).fit(Z, y)
    with pytest.raises(ValueError, match="The 'random_state' parameter"):
        CDRegressor(random_state=-1).fit(Z, y)


def test_convergence_warning_names_uncentred_features():
    # issue 15 item 2: the advice names the real cause. Columns far from centred (X + 1e6)
    # are nearly parallel: more epochs do not help, centring does.
    rng = np.random.default_rng(8)
    X = rng.normal(size=(200, 4))
    y = X @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.1 * rng.normal(size=200)
    with pytest.warns(ConvergenceWarning, match=r"not centred: column \d has \|mean\| 1e\+06"):
        CDRegressor(max_epochs=30, random_state=0).fit(X + 1e6, y)
    with pytest.warns(ConvergenceWarning) as rec:
        CDRegressor(max_epochs=2, tol=1e-12, random_state=0).fit(X, y)
    msg = str(rec[0].message)
    assert "not centred" not in msg and "Increase max_epochs, tol or alpha." in msg
    # centred, the same problem converges
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        CDRegressor(max_epochs=200, random_state=0).fit(X - X.mean(0), y)


def test_uncentred_advice_is_the_same_from_counts_and_from_unit_weights():
    # A binary matrix without weights takes its column means from the column counts (no
    # pass over the rows); unit weights take the O(nnz) pass. Both name the same column.
    rng = np.random.default_rng(3)
    n = 20000
    dense = (rng.random((n, 5)) < 0.3).astype(float)
    dense[:, 2] = 1.0
    dense[0, 2] = 0.0  # every row but one: |mean| = 141 standard deviations
    Z = sp.csr_matrix(dense)
    y = rng.normal(size=n)
    msgs = []
    for w in (None, np.ones(n)):
        with pytest.warns(ConvergenceWarning) as rec:
            CDRegressor(max_epochs=1, tol=1e-14, random_state=0).fit(Z, y, sample_weight=w)
        msgs.append(str(rec[0].message))
    assert "Column 2 holds nearly every row" in msgs[0]  # binary: no StandardScaler advice
    assert msgs[0] == msgs[1]


def test_uncentred_advice_names_a_constant_column_as_constant():
    # a column with the same value in every row (standard deviation 0) is not "nearly"
    # anything: a bin that holds every row, or a constant (non-binary) feature
    rng = np.random.default_rng(3)
    n = 2000
    dense = (rng.random((n, 5)) < 0.3).astype(float)
    dense[:, 2] = 1.0
    y = rng.normal(size=n)
    with pytest.warns(ConvergenceWarning) as rec:
        CDRegressor(max_epochs=1, tol=1e-14, random_state=0).fit(sp.csr_matrix(dense), y)
    msg = str(rec[0].message)
    assert "Column 2 holds every row: it is constant" in msg and "nearly" not in msg
    assert "inf" not in msg
    X = rng.normal(size=(n, 3))
    X[:, 1] = 1e6
    with pytest.warns(ConvergenceWarning) as rec:
        CDRegressor(max_epochs=1, tol=1e-14, random_state=0).fit(X, y)
    msg = str(rec[0].message)
    assert "column 1 has |mean| 1e+06 and is constant (standard deviation 0)" in msg, msg
    assert "inf" not in msg


def test_serial_mode_runs_on_one_thread_whatever_n_jobs():
    # serial CD (parallel=None, or "auto" below the grid size) runs its epochs and its
    # per-epoch passes on one thread (rbcd.solvers.cd._resolve_mode): n_jobs=2 gives the
    # same fit, reported as one thread
    Z, y = data()
    fits = [quiet_fit(CDRegressor(max_epochs=5, n_jobs=n, parallel=p, random_state=0), Z, y)
            for p in (None, "auto") for n in (1, 2)]
    for est in fits:
        assert est.parallel_ is None and est.n_threads_ == 1
        assert np.array_equal(est.coef_, fits[0].coef_)


@pytest.mark.parametrize("module", ["rbcd", "rbcd_ref"])
@pytest.mark.parametrize("l1_ratio", [1.0, 0.5])
def test_alpha_zero_stops_by_the_subgradient(module, l1_ratio):
    # without an l1 penalty the duality gap's dual point is 0 and the gap stays at half the
    # loss: alpha=0 ran every epoch and warned at the least-squares solution. It stops by
    # the subgradient test now, as l1_ratio=0 does
    import importlib

    mod = importlib.import_module(module)
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(80, 6))
    y = Z @ rng.normal(size=6) + 0.1 * rng.normal(size=80)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = mod.CDRegressor(alpha=0.0, l1_ratio=l1_ratio, tol=1e-8, max_epochs=2000,
                              random_state=0).fit(Z, y)
    assert est.n_iter_ < 2000 and est.dual_gap_ <= 1e-8
    ols = np.linalg.lstsq(np.column_stack([Z, np.ones(80)]), y, rcond=None)[0]
    np.testing.assert_allclose(est.coef_, ols[:6], atol=1e-6)


def _noisy_binary(mod):
    """(Z, y, X): random binning features of 60 noisy two-class rows X, by ``mod`` (rbcd
    or the twin)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=60) > 0).astype(int)
    return mod.RandomBinning(n_grids=8, sigma=1.0, random_state=0).fit_transform(X), y, X


@pytest.mark.parametrize("module", ["rbcd", "rbcd_ref"])
def test_classification_path_runs_each_fit_to_the_subgradient_test(module):
    # cd_path's fits are optima: the decisions rule (on by default for CDClassifier) is off
    # there unless given, so every reported gap meets tol
    import importlib

    mod = importlib.import_module(module)
    Z, y, X = _noisy_binary(mod)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        _, _, gaps = mod.cd_path(Z, y, n_alphas=3, loss="logistic", tol=1e-3,
                                 max_epochs=20000, random_state=0)
    assert np.all(gaps <= 1e-3)
    _, _, early = mod.cd_path(Z, y, n_alphas=3, loss="logistic", tol=1e-3, max_epochs=20000,
                              random_state=0, decision_epochs=2)
    assert np.any(early > 1e-3)          # given, the rule stops fits before the optimum


@pytest.mark.parametrize("module", ["rbcd", "rbcd_ref"])
def test_stop_says_what_ended_the_fit(module):
    # dual_gap_ above tol without a warning: the decisions rule ended the fit, stop_ says so
    import importlib

    mod = importlib.import_module(module)
    Z, y, X = _noisy_binary(mod)
    kw = dict(loss="logistic", alpha=1e-2, tol=1e-4, random_state=0)
    ruled = mod.CDClassifier(decision_epochs=2, **kw).fit(Z, y)
    assert ruled.stop_ == "decisions" and ruled.dual_gap_ > 1e-4
    full = mod.CDClassifier(decision_epochs=None, max_epochs=50000, **kw).fit(Z, y)
    assert full.stop_ == "tol" and full.dual_gap_ <= 1e-4
    with pytest.warns(ConvergenceWarning):
        short = mod.CDRegressor(alpha=1e-4, max_epochs=2, tol=1e-12, random_state=0).fit(
            Z, X[:, 0])
    assert short.stop_ == "max_epochs"
    three = mod.CDClassifier(decision_epochs=None, max_epochs=50000, **kw).fit(
        Z, np.digitize(X[:, 0], [-0.5, 0.5]))
    assert three.stop_.shape == (3,) and set(three.stop_) == {"tol"}


@pytest.mark.parametrize("module", ["rbcd", "rbcd_ref"])
def test_alpha_max_of_several_classes_is_the_largest_one_vs_rest(module):
    # cd_path's default alphas with three classes failed ("exactly 2 classes"); alpha_max
    # is now the largest over CDClassifier's one-vs-rest problems: at it every problem's
    # w is 0, just below some problem's is not
    import importlib

    mod = importlib.import_module(module)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(90, 3))
    y = np.digitize(X[:, 0], [-0.4, 0.4])
    Z = mod.RandomBinning(n_grids=8, sigma=1.0, random_state=0).fit_transform(X)
    top = mod.alpha_max(Z, y, loss="logistic")
    each = [mod.alpha_max(Z, (y == k).astype(int), loss="logistic") for k in range(3)]
    assert top == max(each)
    kw = dict(loss="logistic", decision_epochs=None, tol=1e-8, max_epochs=5000, random_state=0)
    assert not np.any(mod.CDClassifier(alpha=top, **kw).fit(Z, y).coef_)
    assert np.any(mod.CDClassifier(alpha=0.9 * top, **kw).fit(Z, y).coef_)
    alphas, coefs, gaps = mod.cd_path(Z, y, n_alphas=3, loss="logistic", random_state=0)
    assert alphas[0] == top and coefs.shape == (3, Z.shape[1], 3) and gaps.shape == (3, 3)
