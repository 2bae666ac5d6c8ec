"""CDRegressor / CDClassifier API: scikit-learn compatibility, shapes, attributes, errors."""
import types
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

import rbcd
from rbcd.solvers.cd import CDClassifier, CDRegressor, alpha_max, cd_path


@parametrize_with_checks([CDRegressor(), CDClassifier(), CDClassifier(loss="squared_hinge")])
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
    (dict(alpha=-1.0), "alpha must be >= 0"),
    (dict(alpha=np.nan), "alpha must be finite"),
    (dict(alpha="big"), "alpha must be a real number"),
    (dict(l1_ratio=1.5), "l1_ratio must be <= 1"),
    (dict(l1_ratio=-0.1), "l1_ratio must be >= 0"),
    (dict(loss="hinge"), "loss must be one of"),
    (dict(loss="logistic"), "loss must be one of"),
    (dict(selection="shuffle"), "selection must be one of"),
    (dict(parallel="threads"), "parallel must be one of"),
    (dict(max_epochs=0), "max_epochs must be >= 1"),
    (dict(max_epochs=2.5), "max_epochs must be an integer"),
    (dict(tol=-1e-3), "tol must be >= 0"),
    (dict(n_jobs=0), "n_jobs"),
    (dict(fit_intercept="yes"), "fit_intercept must be a bool"),
])
def test_regressor_parameter_errors(params, match):
    Z, y = data()
    with pytest.raises(ValueError, match=match):
        CDRegressor(**params).fit(Z, y)


def test_classifier_parameter_errors():
    Z, y = data()
    with pytest.raises(ValueError, match="loss must be one of"):
        CDClassifier(loss="squared").fit(Z, np.sign(y))
    with pytest.raises(ValueError, match="class_weight must be None, 'balanced' or a dict"):
        CDClassifier(class_weight="auto").fit(Z, np.sign(y))
    with pytest.raises(ValueError, match="class_weight has labels not in y"):
        CDClassifier(class_weight={7: 2.0}).fit(Z, np.sign(y))


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
    with pytest.raises(ValueError, match="no grid_ptr_"):
        CDRegressor(parallel="grid").fit(Z, y, binning=types.SimpleNamespace(grid_ptr_=None))
    # a row with two entries in one grid is not a random binning structure
    bad = types.SimpleNamespace(grid_ptr_=np.array([0, 7], dtype=np.int64))
    with pytest.raises(ValueError, match="more than one entry in grid 0"):
        CDRegressor(parallel="grid").fit(Z, y, binning=bad)
    wrong = types.SimpleNamespace(grid_ptr_=np.array([0, 3, 9], dtype=np.int64))
    with pytest.raises(ValueError, match="9 columns but Z has 7"):
        CDRegressor(parallel="grid").fit(Z, y, binning=wrong)


def test_hashed_random_binning_has_no_grid_structure():
    from rbcd.binning.random_binning import RandomBinning

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    rb = RandomBinning(n_grids=4, n_features=64, random_state=0)
    Z = rb.fit_transform(X)
    with pytest.raises(ValueError, match="exact mode"):
        CDRegressor(parallel="grid").fit(Z, X[:, 0], binning=rb)


def test_function_errors():
    Z, y = data()
    with pytest.raises(ValueError, match="l1_ratio=0"):
        alpha_max(Z, y, l1_ratio=0.0)
    with pytest.raises(ValueError, match="loss must be one of"):
        alpha_max(Z, y, loss="hinge")
    with pytest.raises(ValueError, match="exactly 2 classes"):
        alpha_max(Z, np.arange(40) % 3, loss="logistic")
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
    with pytest.raises(ValueError, match=r"row indices must lie in \[0, 3\)"):
        CDRegressor().fit(Z, np.arange(3.0))
    bad = types.SimpleNamespace(indptr=np.array([0, 2, 4], dtype=np.int64),
                                indices=np.array([0, 1, 9, 2], dtype=np.int32),
                                grid_ptr=np.array([0, 1, 2]), value=0.7, n_rows=3)
    with pytest.raises(ValueError, match="row indices must lie"):
        CDRegressor().fit(sp.csr_matrix(np.ones((3, 2))), np.arange(3.0), binning=bad)
    shape = types.SimpleNamespace(indptr=np.array([0, 2], dtype=np.int64),
                                  indices=np.array([0, 1], dtype=np.int32),
                                  grid_ptr=np.array([0, 1]), value=0.7, n_rows=3)
    with pytest.raises(ValueError, match="binning columns describe a 3 x 1 matrix but Z is 3 x 2"):
        CDRegressor().fit(sp.csr_matrix(np.ones((3, 2))), np.arange(3.0), binning=shape)
