"""rbcd_ref.binning against independent facts (kernel limit, structure, errors)."""
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, strategies as st

from rbcd_ref._random import SplitMix64, hash_bin_vector, make_generator, mix64, solver_seed
from rbcd_ref.binning import RandomBinning, column_structure


def _bins_of(rb, X):
    """Recompute bins directly from the fitted grids (independent of the transformer code)."""
    X = np.asarray(X, dtype=np.float64)
    return np.floor((X[:, None, :] - rb.offsets_[None]) / rb.widths_[None]).astype(np.int64)


# ---------------------------------------------------------------- random streams
def test_splitmix64_known_vector():
    # published SplitMix64 outputs for seed 0
    g = SplitMix64(0)
    assert g.next() == 0xE220A8397B1DCDAF
    assert g.next() == 0x6E789E6AA1B965F4
    assert g.next() == 0x06C45D188009454F


def test_randbelow_range_and_mix64_bits():
    g = SplitMix64(12345)
    draws = [g.randbelow(7) for _ in range(2000)]
    assert set(draws) == set(range(7))
    assert 0 <= mix64(2**64 - 1) < 2**64
    with pytest.raises(ValueError):
        g.randbelow(0)


def test_make_generator_and_solver_seed():
    rs = np.random.RandomState(3)
    g = make_generator(rs)
    expected = np.random.default_rng(np.random.RandomState(3).randint(0, 2**31 - 1))
    assert g.integers(0, 1000, 5).tolist() == expected.integers(0, 1000, 5).tolist()
    gen = np.random.default_rng(1)
    assert make_generator(gen) is gen
    s = solver_seed(7)
    assert s == solver_seed(7) and 0 <= s < 2**63 - 1
    assert s == int(np.random.default_rng(7).integers(0, 2**63 - 1))


def test_hash_negative_bins_use_twos_complement():
    # -1 as int64 has the bit pattern 2**64 - 1
    assert hash_bin_vector(3, [-1, 5], 2**40) == hash_bin_vector(3, [2**64 - 1, 5], 2**40)
    assert hash_bin_vector(0, [1], 2**60) != hash_bin_vector(1, [1], 2**60)


# ---------------------------------------------------------------- grids
def test_grid_draw_follows_contract():
    X = np.random.default_rng(0).normal(size=(20, 3))
    rb = RandomBinning(n_grids=5, sigma=[0.5, 1.0, 2.0], random_state=11).fit(X)
    rng = np.random.default_rng(11)
    widths = rng.gamma(2.0, np.array([0.5, 1.0, 2.0]), size=(5, 3))
    offsets = rng.uniform(0.0, 1.0, size=(5, 3)) * widths
    np.testing.assert_array_equal(rb.widths_, widths)
    np.testing.assert_array_equal(rb.offsets_, offsets)
    assert np.all(rb.offsets_ >= 0) and np.all(rb.offsets_ < rb.widths_)


# ---------------------------------------------------------------- kernel limit
def _kernel_estimate_check(x, y, sigma, R, seed):
    X = np.vstack([x, y])
    rb = RandomBinning(n_grids=R, sigma=sigma, random_state=seed)
    Z = rb.fit_transform(X)
    est = float(Z[0].multiply(Z[1]).sum())
    k = float(np.exp(-np.sum(np.abs(x - y) / np.asarray(sigma, dtype=float))))
    se = np.sqrt(k * (1 - k) / R)
    assert abs(est - k) <= 4.5 * se + 1e-12, (est, k, se)


@pytest.mark.parametrize("seed", [0, 1])
def test_kernel_limit_scalar_sigma(seed):
    rng = np.random.default_rng(100 + seed)
    x = rng.normal(size=3)
    y = x + rng.normal(scale=0.4, size=3)
    _kernel_estimate_check(x, y, 1.3, 3000, seed)
    # a factor-of-2 error in the bandwidth would be caught: k(sigma) vs k(2 sigma)
    k1 = np.exp(-np.abs(x - y).sum() / 1.3)
    k2 = np.exp(-np.abs(x - y).sum() / 2.6)
    assert abs(k1 - k2) > 9 * np.sqrt(0.25 / 3000)


def test_kernel_limit_per_feature_sigma():
    x = np.array([0.0, 1.0, -0.5])
    y = np.array([0.3, 0.2, -0.4])
    _kernel_estimate_check(x, y, np.array([0.5, 2.0, 0.25]), 3000, 5)


def test_kernel_estimate_many_pairs_matches_laplacian():
    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, size=(6, 2))
    R = 2000
    rb = RandomBinning(n_grids=R, sigma=0.8, random_state=3)
    Z = rb.fit_transform(X)
    K_hat = (Z @ Z.T).toarray()
    K = np.exp(-np.abs(X[:, None] - X[None]).sum(-1) / 0.8)
    se = np.sqrt(K * (1 - K) / R)
    assert np.all(np.abs(K_hat - K) <= 5 * se + 1e-12)
    np.testing.assert_allclose(np.diag(K_hat), 1.0)


# ---------------------------------------------------------------- structure
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 40), d=st.integers(1, 4),
       R=st.integers(1, 12), sigma=st.floats(0.05, 5.0))
def test_structure_exact_mode(seed, n, d, R, sigma):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, d)), 1)  # repeated values make shared bins likely
    rb = RandomBinning(n_grids=R, sigma=sigma, random_state=seed)
    Z = rb.fit_transform(X)
    assert sp.isspmatrix_csr(Z) and Z.has_sorted_indices
    assert Z.indices.dtype == np.int32 and Z.indptr.dtype == np.int32
    assert Z.shape == (n, rb.n_features_out_)
    assert rb.n_features_out_ == rb.n_bins_.sum()
    np.testing.assert_array_equal(rb.grid_ptr_, np.concatenate([[0], np.cumsum(rb.n_bins_)]))
    assert np.all(np.diff(Z.indptr) == R)
    np.testing.assert_array_equal(Z.data, np.full(n * R, 1 / np.sqrt(R)))
    for i in range(n):
        cols = Z.indices[Z.indptr[i]:Z.indptr[i + 1]]
        assert np.all(np.diff(cols) > 0)
    B = _bins_of(rb, X)
    for r in range(R):
        # two rows share a column of grid r iff their bin vectors are equal
        cols = np.array([Z.indices[Z.indptr[i] + r] for i in range(n)])
        assert np.all((cols >= rb.grid_ptr_[r]) & (cols < rb.grid_ptr_[r + 1]))
        same_col = cols[:, None] == cols[None, :]
        same_bin = np.all(B[:, None, r] == B[None, :, r], axis=-1)
        np.testing.assert_array_equal(same_col, same_bin)
        # numbering by first appearance
        local = cols - rb.grid_ptr_[r]
        first = [int(v) for v in dict.fromkeys(local.tolist())]
        assert first == list(range(len(first)))
        counts = np.bincount(local)
        assert rb.kappa_per_grid_[r] == pytest.approx(n / counts.max())
    assert rb.kappa_ == pytest.approx(np.mean(rb.kappa_per_grid_))
    assert (rb.transform(X) != Z).nnz == 0


def test_transform_drops_unseen_bins_and_keeps_seen():
    X = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.2]])
    rb = RandomBinning(n_grids=10, sigma=1.0, random_state=0).fit(X)
    far = np.array([[1e6, -1e6]])
    Zf = rb.transform(far)
    assert Zf.nnz == 0 and Zf.shape == (1, rb.n_features_out_)
    Zmix = rb.transform(np.vstack([X[1:2], far, X[0:1]]))
    Ztrain = rb.transform(X)
    assert (Zmix[0] != Ztrain[1]).nnz == 0 and (Zmix[2] != Ztrain[0]).nnz == 0
    assert Zmix[1].nnz == 0


def test_transform_new_point_partial_match():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, 2))
    rb = RandomBinning(n_grids=16, sigma=0.3, random_state=1).fit(X)
    Xn = rng.normal(size=(10, 2))
    Zn = rb.transform(Xn)
    Bn = _bins_of(rb, Xn)
    Bt = _bins_of(rb, X)
    for i in range(10):
        expected = sum(
            any(np.array_equal(Bn[i, r], Bt[k, r]) for k in range(30)) for r in range(16)
        )
        assert Zn[i].nnz == expected


def test_float32_dtype_and_float32_input():
    X = np.random.default_rng(0).normal(size=(15, 2))
    Z64 = RandomBinning(n_grids=4, random_state=0).fit_transform(X)
    Z32 = RandomBinning(n_grids=4, dtype=np.float32, random_state=0).fit_transform(X.astype(np.float32))
    assert Z32.dtype == np.float32
    assert np.all(Z32.data == np.float32(1 / np.sqrt(4)))
    rb = RandomBinning(n_grids=4, random_state=0).fit(X.astype(np.float32))
    B = np.floor((X.astype(np.float32).astype(np.float64)[:, None] - rb.offsets_) / rb.widths_)
    assert B.shape == (15, 4, 2)
    assert Z64.shape[0] == Z32.shape[0]


def test_hashed_mode():
    rng = np.random.default_rng(0)
    X = np.round(rng.normal(size=(25, 3)), 1)
    R = 6
    rb = RandomBinning(n_grids=R, n_features=2**40, random_state=2)
    Z = rb.fit_transform(X)
    assert Z.shape == (25, 2**40) and Z.indices.dtype == np.int64
    assert np.all(np.diff(Z.indptr) == R)  # collisions essentially impossible with m = 2**40
    B = _bins_of(rb, X)
    for i in range(25):
        assert list(Z.indices[Z.indptr[i]:Z.indptr[i + 1]]) == sorted(
            hash_bin_vector(r, B[i, r], 2**40) for r in range(R))
    # stateless: transform of new data always has all R grids
    Zn = rb.transform(rng.normal(size=(4, 3)) * 100)
    assert np.allclose(np.asarray(Zn.sum(axis=1)).ravel() * np.sqrt(R), R)
    # a tiny table forces collisions, which are summed within a row
    rb2 = RandomBinning(n_grids=R, n_features=3, random_state=2)
    Z2 = rb2.fit_transform(X)
    assert Z2.shape == (25, 3) and np.all(np.diff(Z2.indptr) <= 3)
    np.testing.assert_allclose(np.asarray(Z2.sum(axis=1)).ravel(), R / np.sqrt(R))
    assert set(np.round(Z2.data * np.sqrt(R)).astype(int)) <= set(range(1, R + 1))
    assert (rb2.transform(X) != Z2).nnz == 0


def test_predicted_speedup():
    X = np.random.default_rng(0).normal(size=(40, 2))
    rb = RandomBinning(n_grids=8, random_state=0).fit(X)
    R, D = 8, rb.n_features_out_
    assert rb.predicted_speedup(1) == 1.0
    assert rb.predicted_speedup(4) == pytest.approx(4 / (1 + 7 * 3 / (D - 1)))
    with pytest.raises(ValueError, match="n_threads"):
        rb.predicted_speedup(0)


def test_column_structure():
    X = np.random.default_rng(1).normal(size=(30, 2))
    rb = RandomBinning(n_grids=5, random_state=0)
    Z = rb.fit_transform(X)
    ptr, rows = column_structure(Z, rb.grid_ptr_)
    C = Z.tocsc()
    C.sort_indices()
    np.testing.assert_array_equal(ptr, C.indptr)
    np.testing.assert_array_equal(rows, C.indices)
    conflict = sp.csr_matrix(np.array([[1.0, 1.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="row 0 has more than one entry in grid 0"):
        column_structure(conflict, np.array([0, 2]))
    with pytest.raises(ValueError, match="grid_ptr"):
        column_structure(Z, np.array([0, 3]))


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize("params, match", [
    (dict(n_grids=0), "n_grids"),
    (dict(n_grids=2.5), "n_grids"),
    (dict(sigma=0.0), "sigma"),
    (dict(sigma=-1.0), "sigma"),
    (dict(sigma=[1.0, 2.0, 3.0]), "sigma"),
    (dict(sigma=[1.0, -2.0]), "sigma"),
    (dict(sigma=np.nan), "sigma"),
    (dict(kernel="gaussian"), "kernel"),
    (dict(n_features=0), "n_features"),
    (dict(dtype=np.int32), "dtype"),
])
def test_bad_params(params, match):
    X = np.zeros((3, 2))
    with pytest.raises(ValueError, match=match):
        RandomBinning(**params).fit(X)


def test_bad_X():
    rb = RandomBinning(n_grids=2)
    with pytest.raises(ValueError):
        rb.fit(np.zeros(5))
    with pytest.raises(ValueError):
        rb.fit(np.zeros((0, 2)))
    X = np.zeros((4, 3))
    X[2, 1] = np.nan
    with pytest.raises(ValueError, match="row 2, column 1"):
        rb.fit(X)
    X[2, 1] = np.inf
    with pytest.raises(ValueError, match="row 2, column 1"):
        rb.fit(X)
    rb.fit(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="feature"):
        rb.transform(np.zeros((2, 2)))
    Xn = np.zeros((3, 3))
    Xn[1, 0] = -np.inf
    with pytest.raises(ValueError, match="row 1, column 0"):
        rb.transform(Xn)


def test_too_large_to_bin():
    X = np.zeros((3, 2))
    X[1, 1] = 1e300
    with pytest.raises(ValueError, match="too large to bin at row 1, column 1"):
        RandomBinning(n_grids=3, sigma=1e-10, random_state=0).fit(X)
    rb = RandomBinning(n_grids=3, random_state=0).fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="row 2, column 0"):
        rb.transform(np.array([[0.0, 0.0], [0.0, 0.0], [-1e308, 0.0]]))
