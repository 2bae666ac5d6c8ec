"""sigma="scale": the data-derived bandwidth, bit for bit against the twin."""
import numpy as np
import scipy.sparse as sp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rbcd
from rbcd._scale import (
    DEFAULT_FACTOR,
    median_l1_distance,
    median_l2_distance,
    scale_sigma,
    scale_sigma_l2,
)
from rbcd_ref._scale import median_l1_distance as ref_median
from rbcd_ref._scale import median_l2_distance as ref_median_l2


@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60), d=st.integers(1, 40),
       density=st.sampled_from([1.0, 0.3, 0.0]), scale=st.sampled_from([1e-3, 1.0, 1e4]))
def test_matches_twin_dense_and_sparse(seed, n, d, density, scale):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=scale, size=(n, d)) * (rng.random((n, d)) < density)
    expect = ref_median(X, n_pairs=200)
    assert median_l1_distance(X, n_pairs=200) == expect
    assert median_l1_distance(sp.csr_matrix(X), n_pairs=200) == expect
    assert expect > 0 and np.isfinite(expect)


def test_value_is_the_median_distance_and_scales_with_the_data():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(500, 6))
    m = median_l1_distance(X)
    # the L1 distance of two uniform points in [0,1)^6 has mean 6/3 = 2
    assert 1.7 < m < 2.3
    assert DEFAULT_FACTOR * median_l1_distance(X * 1000.0) == scale_sigma(X * 1000.0)
    np.testing.assert_allclose(median_l1_distance(X * 1000.0), 1000.0 * m, rtol=1e-12)
    assert scale_sigma(X, factor=0.5) == 0.5 * m


def test_degenerate_data_falls_back():
    assert median_l1_distance(np.ones((10, 3))) == 1.0
    assert median_l1_distance(np.zeros((1, 3))) == 1.0
    X = np.zeros((100, 2))
    X[:10, 0] = 4.0  # most pairs are duplicates: the mean of the non-zero distances
    assert median_l1_distance(X) == 4.0


@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60), d=st.integers(1, 40),
       density=st.sampled_from([1.0, 0.3, 0.0]), scale=st.sampled_from([1e-3, 1.0, 1e4]))
def test_l2_matches_twin_dense_and_sparse(seed, n, d, density, scale):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=scale, size=(n, d)) * (rng.random((n, d)) < density)
    expect = ref_median_l2(X, n_pairs=200)
    assert median_l2_distance(X, n_pairs=200) == expect
    assert median_l2_distance(sp.csr_matrix(X), n_pairs=200) == expect
    assert expect > 0 and np.isfinite(expect)


def test_l2_value_is_the_median_distance():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 8))
    # ||x - y||^2 / 2 is chi-square with 8 degrees of freedom: median 7.344, so the median
    # distance is sqrt(2 * 7.344) = 3.83
    assert abs(median_l2_distance(X) - 3.83) < 0.15
    assert scale_sigma_l2(X, factor=0.5) == 0.5 * median_l2_distance(X)
    assert scale_sigma_l2(X) == 0.35 * median_l2_distance(X)
    assert median_l2_distance(np.ones((10, 3))) == 1.0
    X = np.zeros((100, 2))
    X[:10, 1] = 3.0  # most pairs are duplicates: the mean of the non-zero distances
    assert median_l2_distance(X) == 3.0


@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), d=st.integers(1, 8),
       integral=st.booleans(), zeros=st.floats(0.0, 0.9))
def test_weighted_pairs_match_twin_and_repeated_rows(seed, n, d, integral, zeros):
    # sample_weight: the pairs are drawn over weight units (rbcd/_scale.py's module
    # docstring): integer weights give the median of the rows repeated, a zero weight that
    # of the row removed, bit for bit; fractional weights the twin's value
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w = (rng.integers(0, 4, n).astype(float) if integral else rng.uniform(0.0, 3.0, n))
    w[rng.random(n) < zeros] = 0.0
    if not w.sum() > 0:
        w[0] = 1.0
    got = median_l1_distance(X, n_pairs=300, sample_weight=w)
    assert got == ref_median(X, n_pairs=300, sample_weight=w)
    assert got == median_l1_distance(sp.csr_matrix(X), n_pairs=300, sample_weight=w)
    assert median_l2_distance(X, n_pairs=300, sample_weight=w) == \
        ref_median_l2(X, n_pairs=300, sample_weight=w)
    if integral:
        assert got == median_l1_distance(np.repeat(X, w.astype(int), axis=0), n_pairs=300)
    else:
        keep = w > 0
        assert got == median_l1_distance(X[keep], n_pairs=300, sample_weight=w[keep])


def test_unit_weights_draw_the_unweighted_pairs():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 4))
    assert median_l1_distance(X, sample_weight=np.ones(50)) == median_l1_distance(X)
    # a weight of 0 on a far-away row: that row is never drawn
    far = np.vstack([X, np.full((5, 4), 1e6)])
    w = np.r_[np.ones(50), np.zeros(5)]
    assert median_l1_distance(far, sample_weight=w) == median_l1_distance(X)
    # one unit in all: no pair, the fallback 1.0; bad weights are named
    assert median_l1_distance(X, sample_weight=np.r_[1.0, np.zeros(49)]) == 1.0
    for bad in (np.ones(49), np.r_[-1.0, np.ones(49)], np.zeros(50), np.r_[np.nan, np.ones(49)]):
        with pytest.raises(ValueError, match="sample_weight"):
            median_l1_distance(X, sample_weight=bad)


def test_a_median_distance_past_the_float64_range_is_refused_by_name():
    # rows near the largest float64: the distances, computed down by a power of two, do
    # not fit once multiplied back; inf was returned (and became sigma = inf, whose
    # binning error said "sigma is too small"); rbcd and its twin refuse it alike
    big = np.finfo(np.float64).max
    X = np.array([[big, -big], [-big, big]] * 10)
    for median in (median_l1_distance, ref_median, median_l2_distance, ref_median_l2):
        with pytest.raises(ValueError, match="X's values are too large: the median distance"):
            median(X)
    with pytest.raises(ValueError, match="X's values are too large") as e:
        rbcd.RBRegressor(random_state=0).fit(X, np.arange(20.0))
    assert "too small" not in str(e.value)
    with pytest.raises(ValueError, match="X's values are too large"):
        rbcd.RBClassifierCV(random_state=0).fit(X, np.arange(20) % 2)
    assert median_l1_distance(X / 4) == ref_median(X / 4) > 1e308    # 1.35e308: still fits


@pytest.mark.parametrize("magnitude", [1e-300, 1e-170, 1e160, 1e300, 1e307])
def test_huge_and_tiny_data_keep_their_scale(magnitude):
    # distances of rows near 1e160 overflowed (L2: squares) and of rows near 1e-170
    # underflowed, and the fallback gave 1.0 (the twin inf): now computed down by a power
    # of two and multiplied back, exactly the distances of the data in range, scaled
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 4))
    p = 2.0 ** round(np.log2(magnitude))
    for median, ref in ((median_l1_distance, ref_median), (median_l2_distance, ref_median_l2)):
        got = median(X * p)
        assert got == median(X) * p == ref(X * p)
        assert got == median(sp.csr_matrix(X * p))
