"""rbcd.RandomBinning as a scikit-learn transformer: input handling, errors, pickling,
fitted state, check_estimator."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import parametrize_with_checks

from rbcd.binning.random_binning import RandomBinning


def _data(n=120, d=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def _same(A, B):
    assert A.shape == B.shape and A.dtype == B.dtype
    np.testing.assert_array_equal(A.indptr, B.indptr)
    np.testing.assert_array_equal(A.indices, B.indices)
    np.testing.assert_array_equal(A.data, B.data)


@parametrize_with_checks([RandomBinning(n_grids=8, random_state=0),
                          RandomBinning(n_grids=5, n_features=64, random_state=0)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_public_import_and_defaults():
    import rbcd

    assert rbcd.RandomBinning is RandomBinning
    p = RandomBinning().get_params()
    assert p == dict(n_grids=64, sigma=1.0, kernel="laplacian", n_features=None,
                     dtype=np.float64, n_jobs=None, random_state=None)


# ---------------------------------------------------------------- inputs
def test_float32_and_fortran_inputs_give_the_same_Z():
    X = _data().astype(np.float32)  # float32 values convert exactly to float64
    X64 = X.astype(np.float64)
    ref = RandomBinning(n_grids=10, random_state=3).fit_transform(X64)
    for variant in (X, np.asfortranarray(X64), np.asfortranarray(X), X64.tolist()):
        _same(RandomBinning(n_grids=10, random_state=3).fit_transform(variant), ref)
    rb = RandomBinning(n_grids=10, random_state=3).fit(X64)
    _same(rb.transform(np.asfortranarray(X)), ref)
    Xi = np.arange(40).reshape(10, 4)  # integers convert to float64
    _same(RandomBinning(n_grids=4, random_state=0).fit_transform(Xi),
          RandomBinning(n_grids=4, random_state=0).fit_transform(Xi.astype(float)))


def test_output_dtype_and_values():
    X = _data()
    for dtype in (np.float32, np.float64):
        Z = RandomBinning(n_grids=9, dtype=dtype, random_state=0).fit_transform(X)
        assert Z.dtype == dtype
        assert sp.isspmatrix_csr(Z)
        np.testing.assert_array_equal(Z.data, dtype(1.0 / 3.0))
        assert Z.indices.dtype == np.int32 and Z.indptr.dtype == np.int32
        np.testing.assert_array_equal(Z.indptr, 9 * np.arange(X.shape[0] + 1))


def test_fit_then_transform_equals_fit_transform_and_is_reproducible():
    X = _data(300, 3)
    a = RandomBinning(n_grids=16, sigma=[0.5, 1, 2], random_state=7)
    Z1 = a.fit_transform(X)
    _same(a.transform(X), Z1)
    _same(RandomBinning(n_grids=16, sigma=[0.5, 1, 2], random_state=7).fit(X).transform(X), Z1)
    b = RandomBinning(n_grids=16, sigma=[0.5, 1, 2], random_state=8).fit(X)
    assert not np.array_equal(a.widths_, b.widths_)
    # random_state as a Generator / RandomState also works (docs/internals.md)
    RandomBinning(n_grids=3, random_state=np.random.default_rng(0)).fit(X)
    RandomBinning(n_grids=3, random_state=np.random.RandomState(0)).fit(X)


def test_hashed_mode_rows_and_values():
    X = _data(200, 3)
    R, m = 12, 7
    rb = RandomBinning(n_grids=R, n_features=m, random_state=0)
    Z = rb.fit_transform(X)
    assert Z.shape == (200, m) and rb.n_features_out_ == m and rb.grid_ptr_ is None
    # every row accounts for all R grids: values k / sqrt(R) sum to sqrt(R)
    np.testing.assert_allclose(np.asarray(Z.sum(axis=1)).ravel(), np.sqrt(R), rtol=1e-12)
    assert Z.has_sorted_indices
    assert np.all(np.diff(Z.indices[Z.indptr[0]:Z.indptr[1]]) > 0)
    # stateless: far away data still gets R grids' entries
    far = rb.transform(X + 1e5)
    np.testing.assert_allclose(np.asarray(far.sum(axis=1)).ravel(), np.sqrt(R), rtol=1e-12)
    with pytest.raises(ValueError, match="exact mode"):
        rb._fit_transform_columns(X)


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize("bad, where", [
    (np.nan, "row 3, column 1"),
    (np.inf, "row 3, column 1"),
    (-np.inf, "row 3, column 1"),
])
def test_non_finite_names_row_and_column(bad, where):
    X = _data(10, 3)
    X[3, 1] = bad
    X[7, 0] = bad
    with pytest.raises(ValueError, match=where):
        RandomBinning(n_grids=3).fit(X)
    rb = RandomBinning(n_grids=3).fit(_data(10, 3))
    with pytest.raises(ValueError, match=where):
        rb.transform(X)
    with pytest.raises(ValueError, match="NaN or infinity"):
        RandomBinning(n_grids=3, n_features=5).fit_transform(X)


def test_values_too_large_to_bin_name_row_and_column():
    X = _data(10, 3)
    X[4, 2] = 1e300
    X[6, 0] = -1e300
    with pytest.raises(ValueError, match=r"too large to bin at row 4, column 2"):
        RandomBinning(n_grids=3, random_state=0).fit(X)
    rb = RandomBinning(n_grids=3, random_state=0).fit(_data(10, 3))
    with pytest.raises(ValueError, match=r"too large to bin at row 4, column 2"):
        rb.transform(X)
    # large but binnable values are fine
    RandomBinning(n_grids=3, sigma=1e3, random_state=0).fit_transform(_data(10, 3) * 1e15)


@pytest.mark.parametrize("params, match", [
    (dict(n_grids=0), "n_grids must be >= 1"),
    (dict(n_grids=2.5), "n_grids must be an integer"),
    (dict(n_grids=True), "n_grids must be an integer"),
    (dict(sigma=0.0), "sigma must be positive"),
    (dict(sigma=-1.0), "sigma must be positive"),
    (dict(sigma=np.nan), "sigma must be positive"),
    (dict(sigma=[1.0, 2.0]), "length n_features_in_=3"),
    (dict(sigma=[1.0, -2.0, 1.0]), "positive and finite in every entry"),
    (dict(sigma="wide"), "sigma must be a positive number"),
    (dict(kernel="rbf"), "kernel must be 'laplacian'"),
    (dict(n_features=0), "n_features must be >= 1"),
    (dict(n_features=3.0), "n_features must be an integer"),
    (dict(dtype=np.int32), "dtype must be numpy.float32 or numpy.float64"),
    (dict(dtype="not a dtype"), "dtype must be"),
    (dict(n_jobs=0), "n_jobs"),
])
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        RandomBinning(**params).fit(_data(10, 3))


def test_bad_shapes_and_sparse_input():
    rb = RandomBinning(n_grids=3)
    with pytest.raises(ValueError, match="2D|2-dimensional|Reshape"):
        rb.fit(np.ones(5))
    with pytest.raises(ValueError, match="0 sample"):
        rb.fit(np.ones((0, 3)))
    with pytest.raises(ValueError, match="0 feature"):
        rb.fit(np.ones((4, 0)))
    with pytest.raises(ValueError, match="sparse input is not supported"):
        rb.fit(sp.csr_matrix(np.ones((4, 3))))
    rb.fit(_data(10, 3))
    with pytest.raises(ValueError, match="X has 4 features, but RandomBinning is expecting 3"):
        rb.transform(_data(10, 4))
    with pytest.raises(ValueError, match="sparse input is not supported"):
        rb.transform(sp.csr_matrix(_data(10, 3)))
    with pytest.raises(ValueError, match="n_threads must be >= 1"):
        rb.predicted_speedup(0)


# ---------------------------------------------------------------- fitted state
@pytest.mark.parametrize("n_features", [None, 50])
def test_pickle_round_trip(n_features):
    X = _data(400, 3)
    rb = RandomBinning(n_grids=12, sigma=0.7, n_features=n_features, random_state=2).fit(X)
    X2 = _data(100, 3, seed=5) * 1.5
    clone = pickle.loads(pickle.dumps(rb))
    _same(clone.transform(X2), rb.transform(X2))
    _same(clone.transform(X), rb.transform(X))
    assert clone.kappa_ == rb.kappa_
    np.testing.assert_array_equal(clone.n_bins_, rb.n_bins_)


def _fitted_arrays(rb):
    for value in vars(rb).values():
        if isinstance(value, np.ndarray):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from (a for a in value if isinstance(a, np.ndarray))


def _fitted_bytes(rb):
    return sum(a.nbytes for a in _fitted_arrays(rb))


def test_fitted_state_is_O_of_D_and_holds_no_training_rows():
    rng = np.random.default_rng(0)
    R, d = 8, 4
    for n in (2_000, 20_000):
        X = rng.normal(size=(n, d))
        rb = RandomBinning(n_grids=R, sigma=4.0, random_state=0).fit(X)
        D = rb.n_features_out_
        # slots (<= 4 per bin, 8 bytes) + packed keys (one word here) + dense index
        # (<= 8 per bin, 4 bytes) + per-grid layout, thresholds (<= 6 per column and grid,
        # 20 bytes) and range bounds
        assert _fitted_bytes(rb) <= 80 * D + 224 * R * d + 4096
        assert _fitted_bytes(rb) < X.nbytes
        assert any(a is not None for a in rb._index)  # the dense index is counted
        for value in _fitted_arrays(rb):
            assert value.dtype != X.dtype or value.size <= 6 * R * d + R + 1


def test_diagnostics():
    X = _data(500, 2)
    rb = RandomBinning(n_grids=20, sigma=2.0, random_state=0).fit(X)
    assert rb.n_features_in_ == 2
    assert rb.widths_.shape == rb.offsets_.shape == (20, 2)
    assert np.all(rb.offsets_ >= 0) and np.all(rb.offsets_ < rb.widths_)
    assert rb.n_bins_.dtype == np.int64 and np.all(rb.n_bins_ >= 1)
    np.testing.assert_array_equal(rb.grid_ptr_, np.concatenate([[0], np.cumsum(rb.n_bins_)]))
    assert rb.n_features_out_ == rb.grid_ptr_[-1]
    assert np.all(rb.kappa_per_grid_ >= 1.0)
    assert rb.kappa_ == pytest.approx(np.mean(rb.kappa_per_grid_))
    D, R = rb.n_features_out_, 20
    for tau in (1, 2, 8):
        assert rb.predicted_speedup(tau) == pytest.approx(tau / (1 + (R - 1) * (tau - 1) / (D - 1)))
    assert rb.predicted_speedup(8) < 8


def test_rbcolumns_of_training_data():
    X = _data(250, 3)
    rb = RandomBinning(n_grids=6, random_state=1, dtype=np.float32)
    Z, cols = rb._fit_transform_columns(X)
    assert Z.dtype == np.float32
    assert cols.value == float(np.float32(1 / np.sqrt(6)))
    assert cols.n_rows == 250 and cols.n_columns == Z.shape[1] and cols.n_grids == 6
    assert cols.indices.shape[0] == Z.nnz
    assert "RBColumns" in repr(cols)
    # every column's rows are sorted and its entries are the rows that have that column
    C = Z.tocsc()
    C.sort_indices()
    np.testing.assert_array_equal(cols.indices, C.indices)


def test_fit_keeps_no_reference_to_X():
    X = _data(300, 3)
    rb = RandomBinning(n_grids=7, random_state=4, n_jobs=-1).fit(X)
    Z = rb.transform(X.copy())
    X[:] = 0.0  # the fitted tables must not depend on the caller's array
    _same(rb.transform(_data(300, 3)), Z)


def test_simd_path_applies_only_to_normal_widths():
    from rbcd.binning import _binning

    assert not _binning.simd_for(np.array([[1.0, 1e-310]]))
    assert not _binning.simd_for(np.array([[1.0, 1e305]]))
    assert _binning.simd_for(np.array([[1.0, 3.0]])) == _binning.simd_available()
    old = _binning.set_simd_allowed(False)
    try:
        assert not _binning.simd_available()
        assert not _binning.simd_for(np.array([[1.0]]))
    finally:
        _binning.set_simd_allowed(old)
