"""RandomFourier: twin equality, kernel approximation, agreement with RBFSampler, errors."""
import numpy as np
from rbcd._scale import DEFAULT_FACTOR
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
from sklearn.kernel_approximation import RBFSampler
from sklearn.utils.estimator_checks import check_estimator

import rbcd
import rbcd_ref


def exact_kernel(X, Y, kernel, sigma):
    diff = X[:, None, :] - Y[None, :, :]
    if kernel == "gaussian":
        return np.exp(-np.sum(diff**2, axis=-1) / (2.0 * sigma**2))
    return np.exp(-np.sum(np.abs(diff), axis=-1) / sigma)


def pair_variance(k, k2):
    """Variance of one term 2 cos(w.x + b) cos(w.y + b) of z(x).z(y).

    2 cos(u) cos(v) = cos(w.(x - y)) + cos(w.(x + y) + 2b); the second term has mean 0,
    variance 1/2 and is uncorrelated with the first (average over b), whose variance is
    E[cos^2] - k^2 = (1 + k(2 delta)) / 2 - k^2. Total: 1 + k(2 delta) / 2 - k^2.
    """
    return 1.0 + 0.5 * k2 - k**2


def k_of_double(k, kernel):
    """k(2 delta) from k(delta): k^4 for the Gaussian, k^2 for the Laplacian."""
    return k**4 if kernel == "gaussian" else k**2


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
def test_kernel_approximation_within_standard_errors(kernel):
    rng = np.random.default_rng(0)
    X = rng.normal(scale=0.7, size=(30, 3))
    sigma = 1.3
    D = 20000
    Z = rbcd.RandomFourier(D, kernel=kernel, sigma=sigma, random_state=1).fit_transform(X)
    K = exact_kernel(X, X, kernel, sigma)
    assert K.min() < 0.3 and K[np.triu_indices(30, 1)].max() > 0.7  # a spread of kernel values
    se = np.sqrt(pair_variance(K, k_of_double(K, kernel)) / D)
    err = Z @ Z.T - K
    # 5 standard errors per pair: a false alarm has probability < 1e-6 per pair
    assert np.all(np.abs(err) <= 5 * se)
    # and the approximation is not trivially loose: the errors are of the predicted size
    ratio = np.sqrt(np.mean((err / se) ** 2))
    assert 0.7 < ratio < 1.3


def test_distribution_matches_rbfsampler():
    """Same feature law as RBFSampler(gamma = 1 / (2 sigma^2)): compare the error of one
    fixed pair over independent seeds (i.i.d. samples, so KS and moment tests apply)."""
    sigma = 0.8
    x = np.array([[0.3, -0.2, 0.5]])
    y = np.array([[-0.1, 0.4, 0.2]])
    XY = np.vstack([x, y])
    k = exact_kernel(x, y, "gaussian", sigma)[0, 0]
    D, n_seeds = 40, 400
    ours = np.empty(n_seeds)
    theirs = np.empty(n_seeds)
    for s in range(n_seeds):
        Z = rbcd.RandomFourier(D, sigma=sigma, random_state=s).fit_transform(XY)
        ours[s] = Z[0] @ Z[1] - k
        Z = RBFSampler(gamma=1.0 / (2 * sigma**2), n_components=D, random_state=10_000 + s).fit_transform(XY)
        theirs[s] = Z[0] @ Z[1] - k
    # two-sample Kolmogorov-Smirnov: the same law; p > 1e-3
    assert stats.ks_2samp(ours, theirs).pvalue > 1e-3
    var = pair_variance(k, k**4) / D
    for e in (ours, theirs):
        # mean 0 within 4 standard errors of the mean
        assert abs(e.mean()) < 4 * np.sqrt(var / n_seeds)
        # sample variance vs theory: (n-1) s^2 / var ~ chi2(n-1); two-sided 0.1 % bounds
        q = (n_seeds - 1) * e.var(ddof=1) / var
        assert stats.chi2.ppf(5e-4, n_seeds - 1) < q < stats.chi2.ppf(1 - 5e-4, n_seeds - 1)


def test_laplacian_error_moments():
    sigma = 1.5
    x = np.array([[0.5, -0.5]])
    y = np.array([[-0.3, 0.1]])
    k = exact_kernel(x, y, "laplacian", sigma)[0, 0]
    D, n_seeds = 40, 400
    errs = np.array([
        (lambda Z: Z[0] @ Z[1])(rbcd.RandomFourier(D, kernel="laplacian", sigma=sigma, random_state=s).fit_transform(np.vstack([x, y]))) - k
        for s in range(n_seeds)
    ])
    var = pair_variance(k, k**2) / D
    assert abs(errs.mean()) < 4 * np.sqrt(var / n_seeds)
    q = (n_seeds - 1) * errs.var(ddof=1) / var
    assert stats.chi2.ppf(5e-4, n_seeds - 1) < q < stats.chi2.ppf(1 - 5e-4, n_seeds - 1)


def test_cauchy_and_normal_draws():
    """W is N(0, 1/sigma^2) resp. Cauchy(0, 1/sigma): KS tests on the drawn weights."""
    X = np.zeros((2, 4))
    sigma = np.array([0.5, 1.0, 2.0, 4.0])
    g = rbcd.RandomFourier(2000, kernel="gaussian", sigma=sigma, random_state=3).fit(X)
    c = rbcd.RandomFourier(2000, kernel="laplacian", sigma=sigma, random_state=3).fit(X)
    for j in range(4):
        assert stats.kstest(g.random_weights_[j] * sigma[j], "norm").pvalue > 1e-3
        assert stats.kstest(c.random_weights_[j] * sigma[j], "cauchy").pvalue > 1e-3
    assert stats.kstest(g.random_offset_ / (2 * np.pi), "uniform").pvalue > 1e-3
    assert np.all((g.random_offset_ >= 0) & (g.random_offset_ < 2 * np.pi))


@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 40),
    d=st.integers(1, 6),
    D=st.integers(1, 80),
    kernel=st.sampled_from(["gaussian", "laplacian"]),
    per_feature=st.booleans(),
    f32=st.booleans(),
)
def test_twin_equality(seed, n, d, D, kernel, per_feature, f32):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=3.0, size=(n, d))
    if f32:
        X = X.astype(np.float32)
    sigma = rng.uniform(0.2, 5.0, size=d) if per_feature else float(rng.uniform(0.2, 5.0))
    a = rbcd.RandomFourier(D, kernel=kernel, sigma=sigma, random_state=seed).fit(X)
    b = rbcd_ref.RandomFourier(D, kernel=kernel, sigma=sigma, random_state=seed).fit(X)
    np.testing.assert_array_equal(a.random_weights_, b.random_weights_)
    np.testing.assert_array_equal(a.random_offset_, b.random_offset_)
    Za, Zb = a.transform(X), b.transform(X)
    assert Za.dtype == Zb.dtype == (np.float32 if f32 else np.float64)
    # identical up to the last bit of the cosine (libm vs numpy)
    np.testing.assert_allclose(Za, Zb, rtol=0, atol=4 * np.finfo(Za.dtype).eps)


def test_threads_sparse_and_generator_inputs():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(2000, 5))
    X[X < 0.5] = 0.0
    one = rbcd.RandomFourier(128, random_state=2, n_jobs=1).fit_transform(X)
    two = rbcd.RandomFourier(128, random_state=2, n_jobs=2).fit_transform(X)  # 2 threads really run
    np.testing.assert_array_equal(one, two)
    for fmt in (sp.csr_matrix, sp.csc_matrix):
        np.testing.assert_allclose(rbcd.RandomFourier(128, random_state=2).fit_transform(fmt(X)), one, atol=1e-12)
    # a Generator and a RandomState are accepted; the same int gives the same draw
    assert rbcd.RandomFourier(8, random_state=np.random.default_rng(1)).fit(X).random_weights_.shape == (5, 8)
    assert rbcd.RandomFourier(8, random_state=np.random.RandomState(1)).fit(X).random_weights_.shape == (5, 8)
    assert np.array_equal(
        rbcd.RandomFourier(8, random_state=7).fit(X).random_weights_,
        rbcd.RandomFourier(8, random_state=7).fit(X).random_weights_,
    )


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_components": 0}, "n_components"),
        ({"n_components": 2.5}, "n_components"),
        ({"kernel": "poly"}, "kernel"),
        ({"sigma": -1.0}, "sigma"),
        ({"sigma": [1.0, 2.0]}, "sigma"),
        ({"sigma": np.nan}, "sigma"),
        ({"sigma": "wide"}, "sigma"),
        ({"n_jobs": 0}, "n_jobs"),
    ],
)
def test_bad_parameters(params, match):
    X = np.ones((4, 3))
    for mod in (rbcd, rbcd_ref):
        with pytest.raises(ValueError, match=match):
            mod.RandomFourier(**params).fit(X)


def test_bad_input():
    X = np.ones((4, 3))
    X[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        rbcd.RandomFourier().fit(X)
    t = rbcd.RandomFourier(4).fit(np.ones((4, 3)))
    with pytest.raises(ValueError, match="features"):
        t.transform(np.ones((2, 5)))


@pytest.mark.parametrize("Est", [rbcd.RandomFourier, rbcd_ref.RandomFourier])
def test_check_estimator(Est):
    check_estimator(Est(n_components=16, random_state=0))


@pytest.mark.parametrize("kernel, factor", [("gaussian", 0.5), ("laplacian", DEFAULT_FACTOR)])
def test_scale_default_is_the_shared_rule(kernel, factor):
    from rbcd._scale import median_l1_distance, median_l2_distance

    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 4)) * np.array([1.0, 2.0, 5.0, 0.1])
    dist = median_l2_distance(X) if kernel == "gaussian" else median_l1_distance(X)
    a = rbcd.RandomFourier(32, kernel=kernel, random_state=0).fit(X)
    b = rbcd_ref.RandomFourier(32, kernel=kernel, random_state=0).fit(X)
    np.testing.assert_array_equal(a.sigma_, np.full(4, factor * dist))
    np.testing.assert_array_equal(a.sigma_, b.sigma_)
    np.testing.assert_array_equal(a.random_weights_, b.random_weights_)
    # the same rule on sparse input
    c = rbcd.RandomFourier(32, kernel=kernel, random_state=0).fit(sp.csr_matrix(X))
    np.testing.assert_array_equal(c.sigma_, a.sigma_)


@pytest.mark.parametrize("make", [
    lambda s: rbcd.RandomFourier(sigma=s, random_state=0),
    lambda s: rbcd.SparseRandomFeatures(sigma=s, n_iter=1, random_state=0),
    lambda s: rbcd.DoublyStochasticKernelClassifier(sigma=s, random_state=0),
])
def test_related_estimators_check_sigma_alike(make):
    # a complex or string sigma array was converted (the imaginary part dropped) by
    # RandomFourier's own check; a sigma whose inverse overflows gave all-NaN features
    # (RandomFourier) or "the coefficients diverged; lower eta" (DSEKL)
    X, y = rbcd.datasets.make_checkerboard(200, 4, random_state=0)
    for bad in (np.array([1 + 5j] * 4), np.array(["1"] * 4)):
        with pytest.raises(ValueError, match="sigma must be a positive number or array"):
            make(bad).fit(X, y)
    with pytest.raises(ValueError, match=r"sigma is too small: 1 / sigma overflows float64 "
                                         r"\(sigma = 1e-320; sigma was given so\)"):
        make(1e-320).fit(X, y)
    with pytest.raises(ValueError, match="sigma='scale' took it from the data's distances"):
        make("scale").fit(X * 1e-310, y)


@pytest.mark.parametrize("Est", [rbcd.SparseRandomFeatures, rbcd.DoublyStochasticKernelClassifier])
def test_related_classifiers_name_a_bad_label(Est):
    X, _ = rbcd.datasets.make_checkerboard(200, 4, random_state=0)
    y = np.array(["a", None] * 100, dtype=object)
    kw = {"loss": "logistic"} if Est is rbcd.SparseRandomFeatures else {}
    with pytest.raises(ValueError, match="y contains None at index 1"):
        Est(**kw).fit(X, y)


def test_related_random_state_message_names_each_kind_once():
    X, y = rbcd.datasets.make_checkerboard(50, 2, random_state=0)
    with pytest.raises(ValueError) as e:
        rbcd.DoublyStochasticKernelClassifier(random_state="a").fit(X, y)
    assert str(e.value).count("SeedSequence") == 1
