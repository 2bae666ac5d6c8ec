import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

from rbcd.datasets import make_checkerboard, make_nonlinear_regression, make_xor_blobs


@pytest.mark.parametrize("n_informative, n_cells", [(2, 4), (3, 2), (1, 2)])
def test_checkerboard_shapes_labels_and_balance(n_informative, n_cells):
    X, y = make_checkerboard(4000, n_features=9, n_informative=n_informative,
                             n_cells=n_cells, random_state=0)
    assert X.shape == (4000, 9) and y.shape == (4000,)
    assert X.dtype == np.float64 and X.flags.c_contiguous
    assert y.dtype == np.int64
    assert set(np.unique(y)) == {0, 1}
    assert np.all((X >= 0) & (X < 1))
    assert abs(y.mean() - 0.5) < 0.05
    # the label is exactly the parity of the informative cells (no flips by default)
    cells = np.floor(X[:, :n_informative] * n_cells).astype(int)
    np.testing.assert_array_equal(y, cells.sum(axis=1) % 2)


def test_checkerboard_is_deterministic_and_seed_dependent():
    a = make_checkerboard(500, random_state=3)
    b = make_checkerboard(500, random_state=3)
    c = make_checkerboard(500, random_state=4)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])
    # a Generator is accepted and used as is
    d = make_checkerboard(500, random_state=np.random.default_rng(3))
    np.testing.assert_array_equal(a[0], d[0])


def test_checkerboard_linear_at_chance_nonlinear_learns():
    X, y = make_checkerboard(6000, n_features=8, n_informative=2, n_cells=2, random_state=1)
    Xtr, Xte, ytr, yte = X[:4000], X[4000:], y[:4000], y[4000:]
    linear = LogisticRegression().fit(Xtr, ytr).score(Xte, yte)
    assert abs(linear - 0.5) < 0.05
    # a local method on the informative coordinates solves it: the label is a function of X
    knn = KNeighborsClassifier(5).fit(Xtr[:, :2], ytr).score(Xte[:, :2], yte)
    assert knn > 0.95


def test_checkerboard_flip_y_flips_that_fraction():
    X, y = make_checkerboard(2000, n_informative=2, n_cells=4, flip_y=0.1, random_state=5)
    clean = np.floor(X[:, :2] * 4).astype(int).sum(axis=1) % 2
    assert np.sum(y != clean) == 200


@pytest.mark.parametrize("kwargs", [
    dict(n_samples=0), dict(n_features=1, n_informative=2), dict(n_cells=1),
    dict(flip_y=0.7), dict(n_samples=2.5), dict(n_informative=True),
])
def test_checkerboard_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        make_checkerboard(**kwargs)


@pytest.mark.parametrize("n", [100, 101, 103, 4])
def test_xor_blobs_shapes_balance_and_centres(n):
    X, y = make_xor_blobs(n, std=0.2, random_state=0)
    assert X.shape == (n, 2) and y.shape == (n,)
    assert abs(int(np.sum(y == 1)) - int(np.sum(y == 0))) <= 1
    # class 1 lives in quadrants 1 and 3 (x0 * x1 > 0) for small std
    X, y = make_xor_blobs(2000, std=0.2, random_state=1)
    same_sign = (X[:, 0] * X[:, 1]) > 0
    assert np.mean(same_sign == (y == 1)) > 0.99
    assert abs(LogisticRegression().fit(X, y).score(X, y) - 0.5) < 0.1


def test_xor_blobs_std_zero_gives_the_four_centres():
    X, y = make_xor_blobs(8, std=0.0, random_state=2)
    np.testing.assert_array_equal(np.sort(np.abs(X), axis=0), np.ones((8, 2)))
    np.testing.assert_array_equal(y, (X[:, 0] * X[:, 1] > 0).astype(int))
    a = make_xor_blobs(50, random_state=7)
    b = make_xor_blobs(50, random_state=7)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    with pytest.raises(ValueError):
        make_xor_blobs(10, std=-1.0)


def test_nonlinear_regression_target_and_noise():
    X, y = make_nonlinear_regression(3000, n_features=8, noise=0.0, random_state=0)
    assert X.shape == (3000, 8) and y.shape == (3000,)
    f = np.sin(np.pi * X[:, 0]) + np.cos(np.pi * X[:, 1]) * X[:, 2] + np.abs(X[:, 3]) - 0.5
    np.testing.assert_allclose(y, f)
    Xn, yn = make_nonlinear_regression(3000, n_features=8, noise=0.3, random_state=0)
    np.testing.assert_array_equal(X, Xn)
    assert abs(np.std(yn - f) - 0.3) < 0.03
    # linear fit leaves most of the variance; a local fit on the informative columns does not
    lin = LinearRegression().fit(X[:2000], y[:2000]).score(X[2000:], y[2000:])
    knn = KNeighborsRegressor(10).fit(X[:2000, :4], y[:2000]).score(X[2000:, :4], y[2000:])
    assert lin < 0.5 < knn
    with pytest.raises(ValueError):
        make_nonlinear_regression(10, n_features=3)


def test_checkerboard_refuses_cells_past_exact_indices():
    # floor(n_cells * x) of a float64 x is exact only up to 2**53 cells; beyond, the int64
    # cast overflowed and every label came out 0
    X, y = make_checkerboard(50, n_cells=2**53, random_state=0)
    assert set(np.unique(y)) == {0, 1}
    with pytest.raises(ValueError, match=r"n_cells must be at most 2\*\*53"):
        make_checkerboard(5, n_cells=10**30)


def test_nonlinear_regression_target_spread_is_as_documented():
    # the docstring: the noise-free target's standard deviation is about 0.87
    from rbcd import datasets

    X, y = make_nonlinear_regression(20000, noise=0.0, random_state=0)
    assert abs(np.std(y) - 0.87) < 0.02
    assert "standard deviation about 0.87" in datasets.make_nonlinear_regression.__doc__
