"""DoublyStochasticKernelClassifier: twin equality, thread invariance, the XOR problem of
the DSEKL paper and two real data sets against an exact-kernel SVM, errors, check_estimator."""
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from sklearn.utils.estimator_checks import check_estimator

import rbcd
import rbcd_ref
from rbcd.datasets import make_xor_blobs
from rbcd._scale import median_l1_distance, median_l2_distance
from rbcd.related.dsekl import draw_epoch


def xor(n, std, rng):
    """The paper's XOR: class +1 around (1, 1), (-1, -1); class -1 around (1, -1), (-1, 1)."""
    centers = np.array([[1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]])
    lab = rng.integers(0, 4, n)
    X = centers[lab] + std * rng.normal(size=(n, 2))
    return X, np.where(lab < 2, 1, -1)


def quiet_fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, y)


@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(6, 60),
    n_classes=st.sampled_from([2, 3]),
    kernel=st.sampled_from(["gaussian", "laplacian"]),
    loss=st.sampled_from(["hinge", "squared_hinge"]),
    step=st.sampled_from(["adagrad", "inverse_t", "inverse_epoch"]),
    I=st.integers(1, 30),
    J=st.integers(1, 30),
    K=st.integers(1, 4),
    scale=st.booleans(),
)
def test_twin_equality(seed, n, n_classes, kernel, loss, step, I, J, K, scale):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.arange(n) % n_classes
    rng.shuffle(y)
    params = dict(kernel=kernel, loss=loss, step=step, n_gradient=I, n_expansion=J, n_blocks=K,
                  sigma="scale" if scale else rng.uniform(0.5, 2.0, size=3),
                  lam=None if scale else 1e-3, max_epochs=4, random_state=seed)
    a = quiet_fit(rbcd.DoublyStochasticKernelClassifier(n_jobs=1, **params), X, y)
    b = quiet_fit(rbcd_ref.DoublyStochasticKernelClassifier(**params), X, y)
    assert a.n_iter_ == b.n_iter_ and a.t_ == b.t_
    # same draws, same steps: equal up to summation order (BLAS vs loops)
    np.testing.assert_allclose(a.coef_full_, b.coef_full_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_array_equal(a.sigma_, np.broadcast_to(a.sigma_, b.sigma_.shape)[0] if scale else a.sigma_)
    np.testing.assert_array_equal(np.broadcast_to(a.sigma_, b.sigma_.shape), b.sigma_)
    assert a.lam_ == b.lam_ and a.n_expansion_ == b.n_expansion_
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


@pytest.mark.parametrize("n_blocks", [1, 3])
def test_same_result_for_any_thread_count(n_blocks, monkeypatch):
    X, y = xor(300, 0.5, np.random.default_rng(1))
    # small steps normally run on one thread; force the second one to really run
    monkeypatch.setattr(rbcd.related.dsekl, "MIN_WORK_PER_THREAD", 1)
    assert rbcd.related.dsekl.threads_for(10, 2) == 2
    kw = dict(n_blocks=n_blocks, n_gradient=100, n_expansion=90, max_epochs=5, random_state=4)
    one = quiet_fit(rbcd.DoublyStochasticKernelClassifier(n_jobs=1, **kw), X, y)
    two = quiet_fit(rbcd.DoublyStochasticKernelClassifier(n_jobs=2, **kw), X, y)
    np.testing.assert_array_equal(one.coef_full_, two.coef_full_)
    np.testing.assert_array_equal(one.decision_function(X), two.decision_function(X))


def test_block_and_row_schedules_agree(monkeypatch):
    """K >= threads runs whole blocks per thread, K < threads splits rows and columns:
    the same arithmetic, so the same coefficients."""
    monkeypatch.setattr(rbcd.related.dsekl, "MIN_WORK_PER_THREAD", 1)
    X, y = xor(200, 0.5, np.random.default_rng(6))
    y3 = np.arange(200) % 3
    for target in (y, y3):
        kw = dict(n_blocks=2, n_gradient=40, n_expansion=30, max_epochs=3, random_state=1)
        by_block = quiet_fit(rbcd.DoublyStochasticKernelClassifier(n_jobs=2, **kw), X, target)
        by_row = quiet_fit(rbcd.DoublyStochasticKernelClassifier(n_jobs=3, **kw), X, target)
        np.testing.assert_array_equal(by_block.coef_full_, by_row.coef_full_)


def test_draws_are_disjoint_blocks_and_a_permutation():
    perm, Jidx = draw_epoch(np.random.default_rng(0), 50, 7, 6, 4)
    assert sorted(perm) == list(range(50))
    assert Jidx.shape == (8, 24)  # ceil(50 / 7) steps, K * J indices each
    for row in Jidx:
        assert len(set(row.tolist())) == 24  # the K blocks never share a row


def test_only_sampled_coefficients_move():
    X, y = xor(200, 0.3, np.random.default_rng(2))
    est = quiet_fit(rbcd.DoublyStochasticKernelClassifier(n_expansion=5, max_epochs=1, random_state=0), X, y)
    perm, Jidx = draw_epoch(np.random.default_rng(0), 200, 100, 5, 1)
    touched = np.unique(Jidx)
    assert np.all(est.coef_full_[:, np.setdiff1d(np.arange(200), touched)] == 0)
    np.testing.assert_array_equal(est.support_, np.flatnonzero(np.any(est.coef_full_ != 0, axis=0)))
    # dual_coef_ / support_vectors_ hold the prediction expansion (J / N) sum_j A_j k(x, x_j)
    np.testing.assert_allclose(est.dual_coef_, est.coef_full_[:, est.support_] * 5 / 200)
    Xs = X / est.sigma_
    Kx = np.exp(-0.5 * ((Xs[:, None, :] - Xs[None, :, :]) ** 2).sum(-1))
    np.testing.assert_allclose(est.decision_function(X), Kx @ est.coef_full_[0] * 5 / 200, rtol=1e-10)


@pytest.mark.parametrize("std", [0.2, 0.5])
def test_xor_defaults_match_exact_kernel_svm(std):
    """The paper's XOR (Figure 1): defaults, then the paper's other losses and step rules,
    within 2 points of an exact-kernel SVM tuned by cross-validation."""
    X, y = make_xor_blobs(400, std=std, random_state=0)
    Xt, yt = make_xor_blobs(2000, std=std, random_state=1)
    svc = GridSearchCV(SVC(kernel="rbf"), {"C": [0.1, 1, 10, 100], "gamma": [0.1, 0.5, 1, 2, 5]}, cv=3).fit(X, y)
    svm_acc = svc.score(Xt, yt)
    assert svm_acc > (0.99 if std == 0.2 else 0.93)
    for kw in (dict(), dict(loss="squared_hinge"), dict(step="inverse_t"), dict(kernel="laplacian")):
        acc = quiet_fit(rbcd.DoublyStochasticKernelClassifier(random_state=0, **kw), X, y).score(Xt, yt)
        assert acc >= svm_acc - 0.02, (kw, acc, svm_acc)


def _breast_cancer():
    return load_breast_cancer(return_X_y=True)


def _digits_3_vs_8():
    X, y = load_digits(return_X_y=True)
    keep = (y == 3) | (y == 8)
    return X[keep], y[keep]


@pytest.mark.parametrize("load", [_breast_cancer, _digits_3_vs_8])
def test_real_data_defaults_within_3_points_of_svc(load):
    """The paper's Table 1 protocol (half for training, half for testing): defaults against
    scikit-learn's SVC defaults, both on standardized features, over three splits."""
    X, y = load()
    gaps = []
    for split in range(3):
        Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.5, random_state=split, stratify=y)
        svc = make_pipeline(StandardScaler(), SVC()).fit(Xa, ya).score(Xb, yb)
        dsekl = make_pipeline(StandardScaler(), rbcd.DoublyStochasticKernelClassifier(random_state=split))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            acc = dsekl.fit(Xa, ya).score(Xb, yb)
        assert acc >= svc - 0.03, (split, acc, svc)
        gaps.append(svc - acc)
    assert np.mean(gaps) <= 0.015


def test_scale_default_uses_the_shared_rule():
    X, y = make_xor_blobs(300, std=0.5, random_state=3)
    X = X * np.array([1.0, 10.0])
    est = quiet_fit(rbcd.DoublyStochasticKernelClassifier(max_epochs=2, random_state=0), X, y)
    # one width per feature (rbcd_ref's and RandomFourier's sigma_)
    np.testing.assert_array_equal(est.sigma_, np.full(2, 0.35 * median_l2_distance(X)))
    assert est.lam_ == 1.0 / 300 and est.n_expansion_ == 100
    est = quiet_fit(rbcd.DoublyStochasticKernelClassifier(kernel="laplacian", max_epochs=2), X, y)
    np.testing.assert_array_equal(est.sigma_, np.full(2, 0.35 * median_l1_distance(X)))
    est = quiet_fit(rbcd.DoublyStochasticKernelClassifier(sigma=2.0, lam=0.5, max_epochs=2), X, y)
    np.testing.assert_array_equal(est.sigma_, [2.0, 2.0])
    assert est.lam_ == 0.5
    # a rescaled problem gets a rescaled bandwidth and the same predictions
    a = quiet_fit(rbcd.DoublyStochasticKernelClassifier(max_epochs=5, random_state=0), X, y)
    b = quiet_fit(rbcd.DoublyStochasticKernelClassifier(max_epochs=5, random_state=0), X * 8.0, y)
    np.testing.assert_allclose(b.sigma_, 8.0 * a.sigma_, rtol=1e-12)
    np.testing.assert_array_equal(a.predict(X), b.predict(X * 8.0))


def test_multiclass_one_vs_rest():
    rng = np.random.default_rng(3)
    centers = np.array([[0.0, 3.0], [3.0, 0.0], [-3.0, -3.0]])
    lab = rng.integers(0, 3, 300)
    X = centers[lab] + 0.7 * rng.normal(size=(300, 2))
    names = np.array(["a", "b", "c"])
    est = quiet_fit(rbcd.DoublyStochasticKernelClassifier(sigma=1.5, max_epochs=50, random_state=0), X, names[lab])
    assert est.decision_function(X).shape == (300, 3)
    assert list(est.classes_) == ["a", "b", "c"]
    assert est.score(X, names[lab]) > 0.97


@pytest.mark.parametrize(
    "params, match",
    [
        ({"kernel": "poly"}, "kernel"),
        ({"loss": "log"}, "loss"),
        ({"step": "constant"}, "step"),
        ({"lam": -1.0}, "lam"),
        ({"eta": 0.0}, "eta"),
        ({"tol": -1.0}, "tol"),
        ({"n_gradient": 0}, "n_gradient"),
        ({"n_expansion": 1.5}, "n_expansion"),
        ({"n_blocks": 0}, "n_blocks"),
        ({"max_epochs": 0}, "max_epochs"),
        ({"sigma": 0.0}, "sigma"),
        ({"sigma": "median"}, "sigma"),
        ({"sigma": [1.0, 2.0, 3.0]}, "sigma"),
        ({"lam": "auto"}, "lam"),
        ({"n_jobs": 0}, "n_jobs"),
    ],
)
def test_bad_parameters(params, match):
    X, y = xor(20, 0.2, np.random.default_rng(0))
    for mod in (rbcd, rbcd_ref):
        with pytest.raises(ValueError, match=match):
            mod.DoublyStochasticKernelClassifier(**params).fit(X, y)


def test_bad_input():
    X, y = xor(20, 0.2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="class"):
        rbcd.DoublyStochasticKernelClassifier().fit(X, np.ones(20))
    Xn = X.copy()
    Xn[3, 1] = np.inf
    with pytest.raises(ValueError, match="infinity|NaN"):
        rbcd.DoublyStochasticKernelClassifier().fit(Xn, y)
    with pytest.raises(ValueError, match="diverged"), np.errstate(over="ignore", invalid="ignore"):
        rbcd.DoublyStochasticKernelClassifier(step="inverse_t", eta=1e308, lam=1e3, max_epochs=3).fit(X, y)
    big = rbcd.DoublyStochasticKernelClassifier(n_gradient=2**20, n_expansion=2**20)
    with pytest.raises(ValueError, match="n_gradient"):
        big.fit(np.repeat(X, 1000, axis=0), np.repeat(y, 1000))  # 20000 x 20000 per step
    est = quiet_fit(rbcd.DoublyStochasticKernelClassifier(max_epochs=2), X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(np.ones((3, 4)))


def test_convergence_warning():
    X, y = xor(50, 0.5, np.random.default_rng(0))
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        rbcd.DoublyStochasticKernelClassifier(max_epochs=1, tol=0.0, random_state=0).fit(X, y)


@pytest.mark.parametrize("mod", [rbcd, rbcd_ref])
def test_check_estimator(mod):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check_estimator(mod.DoublyStochasticKernelClassifier(max_epochs=30, random_state=0))
