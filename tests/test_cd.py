"""Coordinate descent solvers (rbcd.solvers.cd / rbcd.solvers._cd): oracle, optimum and parallel tests.

* serial rbcd reproduces the pure-Python twin rbcd_ref iterate for iterate (every loss,
  selection, dense / sparse, RB fast path, intercept, weights);
* the grid-block mode reproduces rbcd_ref's grid mode and is bitwise identical for 1 and 2
  threads;
* Hogwild and grid reach the serial optimum (within what tol certifies);
* optima agree with scikit-learn (Lasso, l1 liblinear logistic regression) and satisfy KKT.
"""
import types
import warnings

from functools import partial

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

import rbcd_ref.solvers.cd as ref
import rbcd.solvers.cd as fast_cd
from rbcd.solvers import _cd
from rbcd.solvers._paths import forced_paths
from rbcd._openmp_info import openmp_is_enabled
from rbcd._random import solver_seed
from rbcd.solvers.cd import DECISION_EPOCHS, CDClassifier, CDRegressor, alpha_max, cd_path

LOSSES = ("squared", "logistic", "squared_hinge")
SELECTIONS = ("random", "permutation", "cyclic")
TIGHT = dict(rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------- data helpers
def random_problem(seed, loss, n=None, d=None, constant=False, density=0.35):
    """A small sparse Z (general values, or all equal = the RB fast path) and a target."""
    rng = np.random.default_rng(seed)
    n = n or int(rng.integers(6, 30))
    d = d or int(rng.integers(1, 12))
    Z = sp.random(n, d, density=density, format="csr", random_state=rng,
                  data_rvs=lambda k: rng.normal(size=k))
    if constant:
        Z.data[:] = 0.25
    if loss == "squared":
        y = rng.normal(size=n) + 0.5
    else:
        y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        y[0], y[1] = -1.0, 1.0
    return Z, y, rng


def rb_problem(seed, n=60, n_grids=5, bins=6):
    """A matrix with the random binning structure (one entry per row per grid) and its grid_ptr."""
    rng = np.random.default_rng(seed)
    cols, ptr = [], [0]
    for _ in range(n_grids):
        b = rng.integers(0, bins, size=n)
        _, local = np.unique(b, return_inverse=True)
        cols.append(ptr[-1] + local)
        ptr.append(ptr[-1] + int(local.max()) + 1)
    indices = np.stack(cols, axis=1).ravel()
    Z = sp.csr_matrix((np.full(n * n_grids, 1 / np.sqrt(n_grids)), indices,
                       np.arange(0, n * n_grids + 1, n_grids)), shape=(n, ptr[-1]))
    binning = types.SimpleNamespace(grid_ptr_=np.array(ptr, dtype=np.int64))
    y = np.sin(3 * rng.normal(size=n)) + 0.1 * rng.normal(size=n)
    return Z, y, binning


def estimator(mod, loss, **kw):
    return (mod.CDRegressor if loss == "squared" else mod.CDClassifier)(loss=loss, **kw)


def objective(Z, y, w, b, loss, alpha, l1_ratio, s=None):
    p = np.asarray(Z @ w).ravel() + b
    s = np.ones_like(y) if s is None else s
    if loss == "squared":
        ell = 0.5 * (p - y) ** 2
    elif loss == "logistic":
        ell = np.logaddexp(0.0, -y * p)
    else:
        ell = np.maximum(0.0, 1.0 - y * p) ** 2
    return float(np.sum(s * ell) / np.sum(s) + alpha * (l1_ratio * np.abs(w).sum()
                                                       + 0.5 * (1 - l1_ratio) * np.dot(w, w)))


def loss_deriv(loss, p, y):
    if loss == "squared":
        return p - y
    if loss == "logistic":
        return -y / (1.0 + np.exp(y * p))
    return -2.0 * y * np.maximum(0.0, 1.0 - y * p)


# ---------------------------------------------------------------------------- SplitMix64
def test_splitmix_stream_matches_ref():
    from rbcd_ref._random import SplitMix64

    for seed, bound in [(0, 7), (2**63 + 12345, 1000), (42, 1)]:
        g = SplitMix64(seed)
        expected = [g.randbelow(bound) for _ in range(50)]
        assert _cd.splitmix_draws(seed, 50, bound).tolist() == expected


# ---------------------------------------------------------------------------- oracle
@settings(max_examples=30)
@given(seed=st.integers(0, 2**32 - 1), loss=st.sampled_from(LOSSES),
       selection=st.sampled_from(SELECTIONS), fit_intercept=st.booleans(),
       weighted=st.booleans(), dense=st.booleans(), constant=st.booleans(),
       l1_ratio=st.sampled_from([0.0, 0.5, 1.0]), epochs=st.integers(1, 4),
       log_alpha=st.floats(-3.0, -0.5))
def test_serial_matches_ref(seed, loss, selection, fit_intercept, weighted, dense, constant,
                            l1_ratio, epochs, log_alpha):
    Z, y, rng = random_problem(seed, loss, constant=constant)
    s = rng.uniform(0.2, 3.0, size=y.shape[0]) if weighted else None
    X = Z.toarray() if dense else Z
    kw = dict(alpha=10.0 ** log_alpha, l1_ratio=l1_ratio, fit_intercept=fit_intercept,
              max_epochs=epochs, tol=0.0, selection=selection, parallel=None, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = estimator(fast_cd, loss, **kw).fit(X, y, sample_weight=s)
        b = estimator(ref, loss, **kw).fit(Z, y, sample_weight=s)
    assert np.allclose(a.coef_, b.coef_, **TIGHT)
    assert np.allclose(a.intercept_, b.intercept_, **TIGHT)
    if a.n_iter_ != b.n_iter_:
        # with tol = 0 a fit stops early only when converged to the last bit; which of two
        # summation orders reaches 0 (or a rounding-level negative gap) first is rounding
        assert min(a.dual_gap_, b.dual_gap_) <= 0.0
        assert max(abs(a.dual_gap_), abs(b.dual_gap_)) <= 1e-12
    k = min(a.n_iter_, b.n_iter_)
    assert np.allclose(a.objective_history_[:k], b.objective_history_[:k], **TIGHT)
    assert np.isclose(a.dual_gap_, b.dual_gap_, rtol=1e-7, atol=1e-12)
    assert a.parallel_ is None


@pytest.mark.parametrize("loss", LOSSES)
def test_stopping_epoch_matches_ref_with_positive_tol(loss):
    # the certified skip of the full convergence pass must not change when fits stop
    for seed in range(6):
        Z, y, _ = random_problem(100 + seed, loss, n=40, d=15)
        kw = dict(alpha=0.01, l1_ratio=0.7, max_epochs=300, tol=1e-4, selection="cyclic",
                  parallel=None, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            a = estimator(fast_cd, loss, **kw).fit(Z, y)
            b = estimator(ref, loss, **kw).fit(Z, y)
        assert a.n_iter_ == b.n_iter_
        assert np.isclose(a.dual_gap_, b.dual_gap_, rtol=1e-6)
        # the subgradient test, the epoch budget, or (classification) the decisions rule
        assert (a.dual_gap_ <= 1e-4 or a.n_iter_ == 300
                or (loss != "squared" and a.n_iter_ >= DECISION_EPOCHS))


def test_multi_output_and_ovr_match_ref():
    rng = np.random.default_rng(3)
    Z = sp.random(40, 9, density=0.4, format="csr", random_state=rng)
    Y = rng.normal(size=(40, 3))
    kw = dict(alpha=0.003, max_epochs=3, tol=0.0, parallel=None, random_state=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = CDRegressor(**kw).fit(Z, Y)
        b = ref.CDRegressor(**kw).fit(Z, Y)
        assert a.coef_.shape == (3, 9) and a.intercept_.shape == (3,)
        assert np.allclose(a.coef_, b.coef_, **TIGHT)
        assert np.allclose(a.intercept_, b.intercept_, **TIGHT)
        labels = np.array(["a", "b", "c", "d"])[rng.integers(0, 4, size=40)]
        c = CDClassifier(**kw).fit(Z, labels)
        d = ref.CDClassifier(**kw).fit(Z, labels)
    assert c.coef_.shape == (4, 9)
    assert np.allclose(c.coef_, d.coef_, **TIGHT)
    assert np.allclose(c.intercept_, d.intercept_, **TIGHT)
    assert list(c.n_iter_) == list(d.n_iter_)


def test_int64_indices_and_csc_input_give_same_iterates():
    Z, y, _ = random_problem(7, "squared", n=30, d=10)
    kw = dict(alpha=0.01, max_epochs=4, tol=0.0, parallel=None, random_state=0)
    Zc = Z.tocsc()
    Z64 = sp.csc_matrix((Zc.data, Zc.indices.astype(np.int64), Zc.indptr.astype(np.int64)),
                        shape=Zc.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = CDRegressor(**kw).fit(Z, y)
        b = CDRegressor(**kw).fit(Z64, y)
        c = CDRegressor(**kw).fit(Z.tocoo(), y)
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.coef_, c.coef_)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_column_adds_in_groups_are_bitwise_the_plain_adds(dtype):
    # the squared loss's adds go in groups of loads then stores (rbcd/src/cd_kernels.h,
    # RBCD_CD_ADD_GROUP = 16): every length around the group boundaries, with constant and
    # stored values, must give each row exactly the plain loop's one add
    rng = np.random.default_rng(5)
    for n in [0, 1, 15, 16, 17, 31, 32, 33, 47, 100]:
        rows = np.sort(rng.choice(500, size=n, replace=False)).astype(dtype)
        z = rng.normal(size=n)
        delta = float(rng.normal())
        for values in (None, z):
            u = rng.normal(size=500)
            expected = u.copy()
            expected[rows] += delta * (0.25 if values is None else values)
            _cd.column_add(u, rows, values, delta, 0.25)
            assert np.array_equal(u, expected), (n, values is None)


@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("selection", ["random", "cyclic"])
def test_long_columns_match_ref(constant, selection):
    # columns of 100+ rows (the hypothesis problems' columns are shorter than one group of
    # adds), lengths not multiples of 16, with int32 and int64 row indices
    rng = np.random.default_rng(3)
    Z = sp.random(301, 9, density=0.4, format="csc", random_state=rng,
                  data_rvs=lambda k: rng.normal(size=k))
    if constant:
        Z.data[:] = 0.25
    assert np.diff(Z.indptr).min() >= 100
    Z64 = sp.csc_matrix((Z.data, Z.indices.astype(np.int64), Z.indptr.astype(np.int64)),
                        shape=Z.shape)
    y = rng.normal(size=301) + 0.5
    kw = dict(alpha=1e-3, l1_ratio=1.0, fit_intercept=False, max_epochs=5, tol=0.0,
              selection=selection, parallel=None, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = CDRegressor(**kw).fit(Z, y)
        a64 = CDRegressor(**kw).fit(Z64, y)
        b = ref.CDRegressor(**kw).fit(Z, y)
    assert np.count_nonzero(a.coef_) >= 5
    assert np.array_equal(a.coef_, a64.coef_)
    assert np.allclose(a.coef_, b.coef_, **TIGHT)
    assert np.allclose(a.objective_history_, b.objective_history_, **TIGHT)


def test_unsorted_duplicate_entries_are_summed():
    Z, y, _ = random_problem(8, "squared", n=25, d=6)
    coo = Z.tocoo()
    half = coo.data / 2
    dup = sp.coo_matrix((np.concatenate([half, half])[::-1],
                         (np.concatenate([coo.row, coo.row])[::-1],
                          np.concatenate([coo.col, coo.col])[::-1])), shape=Z.shape)
    kw = dict(alpha=0.01, max_epochs=3, tol=0.0, parallel=None, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = CDRegressor(**kw).fit(Z, y)
        b = CDRegressor(**kw).fit(dup.tocsc(), y)
    assert np.allclose(a.coef_, b.coef_, **TIGHT)


# ---------------------------------------------------------------------------- grid mode
@settings(max_examples=15)
@given(seed=st.integers(0, 2**32 - 1), loss=st.sampled_from(LOSSES),
       selection=st.sampled_from(SELECTIONS), fit_intercept=st.booleans(),
       epochs=st.integers(1, 3))
def test_grid_mode_matches_ref_and_is_thread_invariant(seed, loss, selection, fit_intercept, epochs):
    Z, y, binning = rb_problem(seed)
    if loss != "squared":
        y = np.where(y > np.median(y), 1.0, -1.0)
    kw = dict(alpha=1e-3, l1_ratio=0.8, fit_intercept=fit_intercept, max_epochs=epochs, tol=0.0,
              selection=selection, parallel="grid", random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a1 = estimator(fast_cd, loss, n_jobs=1, **kw).fit(Z, y, columns=binning)
        a2 = estimator(fast_cd, loss, n_jobs=2, **kw).fit(Z, y, columns=binning)
        b = estimator(ref, loss, **kw).fit(Z, y, columns=binning)
    assert a1.parallel_ == "grid" and a2.parallel_ == "grid"
    assert np.array_equal(a1.coef_, a2.coef_)
    assert np.array_equal(np.asarray(a1.intercept_), np.asarray(a2.intercept_))
    assert a1.objective_history_ == a2.objective_history_
    assert np.allclose(a1.coef_, b.coef_, **TIGHT)
    assert np.allclose(a1.intercept_, b.intercept_, **TIGHT)


@pytest.mark.parametrize("selection", SELECTIONS)
def test_grid_mode_large_grids_bitwise_thread_invariant(selection):
    # grids of 40,000 rows, past a split size of 32768 entries: the bins run in a parallel region
    Z, y, binning = rb_problem(9, n=40000, n_grids=3, bins=50)
    kw = dict(alpha=1e-4, max_epochs=3, tol=0.0, selection=selection, parallel="grid",
              random_state=1)
    with warnings.catch_warnings(), forced_paths(grid_par_min=32768):
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = CDRegressor(n_jobs=1, **kw).fit(Z, y, columns=binning)
        b = CDRegressor(n_jobs=2, **kw).fit(Z, y, columns=binning)
        c = CDRegressor(n_jobs=1, **dict(kw, parallel=None)).fit(Z, y)
    assert b.n_threads_ == (2 if openmp_is_enabled() else 1)
    assert np.array_equal(a.coef_, b.coef_) and a.intercept_ == b.intercept_
    assert a.objective_history_ == b.objective_history_ and a.dual_gap_ == b.dual_gap_
    # grid blocks are exact block coordinate descent: the objective decreases like serial CD
    assert np.all(np.diff(a.objective_history_) <= 0)
    assert a.objective_history_[-1] <= c.objective_history_[0]


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_grids_of_one_row_per_bin_split_across_threads_bitwise(loss):
    # every row alone in its bins (D = N R): the grids take their bins' own steps, split
    # into chunks of contiguous bins across threads from grid_par_min entries; 20,000
    # entries per grid make several chunks. Streamed and per-bin grid epochs, 1-3 threads
    # and the serial cyclic epoch (the same steps in order) agree bit for bit; the twin to
    # rounding.
    from rbcd.binning.random_binning import RandomBinning

    rng = np.random.default_rng(11)
    X = rng.uniform(size=(20000, 6))
    t = np.sin(6 * X[:, 0]) + X[:, 1] + 0.1 * rng.standard_normal(20000)
    rb = RandomBinning(n_grids=3, sigma=0.01, random_state=0).fit(X)
    Z = rb.transform(X)
    assert Z.shape[1] > 0.99 * Z.nnz  # about one row per bin
    if loss != "squared":
        t = np.where(t > np.median(t), 1.0, -1.0)
    Est = CDRegressor if loss == "squared" else CDClassifier
    kw = dict(alpha=1e-5, l1_ratio=0.7, max_epochs=3, tol=0.0, selection="cyclic",
              random_state=2)
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for stream in (True, False):
            with forced_paths(grid_stream=stream, grid_par_min=0):
                for n_jobs in (1, 2, 3):
                    fits[stream, n_jobs] = Est(parallel="grid", n_jobs=n_jobs, **kw).fit(
                        Z, t, columns=rb)
        fits["serial"] = Est(parallel=None, n_jobs=1, **kw).fit(Z, t, columns=rb)
        b = estimator(ref, loss, parallel="grid", **kw).fit(Z, t, columns=rb)
    a = fits[True, 1]
    assert np.count_nonzero(a.coef_) > 1000
    for key, f in fits.items():
        assert np.array_equal(f.coef_, a.coef_), key
        assert np.array_equal(np.asarray(f.intercept_), np.asarray(a.intercept_)), key
        assert f.objective_history_ == a.objective_history_, key
    assert fits[True, 2].n_threads_ == (2 if openmp_is_enabled() else 1)
    assert np.allclose(a.coef_, b.coef_, **TIGHT)


def test_grid_mode_with_random_binning_and_rbcolumns():
    from rbcd.binning.random_binning import RandomBinning

    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2
    rb = RandomBinning(n_grids=8, sigma=1.5, random_state=0)
    Z = rb.fit_transform(X)
    kw = dict(alpha=1e-3, max_epochs=3, tol=0.0, parallel="grid", random_state=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = CDRegressor(n_jobs=2, **kw).fit(Z, y, columns=rb)
        b = ref.CDRegressor(**kw).fit(Z, y, columns=rb)
        fit_cols = getattr(rb, "_fit_transform_columns", None)
        if fit_cols is not None:
            Z2, cols = fit_cols(X)
        else:
            from rbcd.binning.random_binning import column_structure

            Z2, cols = Z, column_structure(Z, rb.grid_ptr_)
        c = CDRegressor(n_jobs=1, **kw).fit(Z2, y, columns=cols)
    assert np.allclose(a.coef_, b.coef_, **TIGHT)
    assert np.array_equal(a.coef_, c.coef_)
    assert c.parallel_ == "grid"


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_streamed_grid_step_with_column_sums_is_bitwise_the_per_bin_step(monkeypatch, loss):
    # the streamed grid epoch without block partial sums (its grids' bins take their own
    # steps, interleaved with the streamed adds of other grids) gives bitwise the per-bin
    # grid epoch's iterates, for any n_jobs; forced on small problems; also on transformed
    # new data, whose rows miss some grids
    from rbcd.binning.random_binning import RandomBinning

    rng = np.random.default_rng(3)
    X = rng.uniform(size=(400, 3))
    y = np.sin(6 * X[:, 0]) * np.cos(6 * X[:, 1])
    rb = RandomBinning(n_grids=6, sigma=0.4, random_state=0).fit(X)
    Xn = rng.uniform(-0.5, 1.5, size=(500, 3))
    yn = np.cos(5 * Xn[:, 0]) + Xn[:, 2]
    Zn = rb.transform(Xn)
    assert np.any(np.asarray((Zn != 0).sum(axis=1)).ravel() < 6)  # rows missing a grid
    Est = CDRegressor if loss == "squared" else CDClassifier
    for Z, t in ((rb.transform(X), y), (Zn, yn)):
        if loss != "squared":
            t = np.where(t > np.median(t), 1.0, -1.0)
        for selection in SELECTIONS:
            kw = dict(alpha=1e-4, l1_ratio=0.5, max_epochs=3, tol=0.0, selection=selection,
                      parallel="grid", random_state=5)
            fits = {}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                with forced_paths(grid_stream=False, grid_par_min=0):
                    for n_jobs in (1, 2):
                        fits["per bin", n_jobs] = Est(n_jobs=n_jobs, **kw).fit(Z, t, columns=rb)
                with forced_paths(grid_stream=True, grid_par_min=0, stream_max_partials=0.0):
                    for n_jobs in (1, 2, 3):
                        fits["stream", n_jobs] = Est(n_jobs=n_jobs, **kw).fit(Z, t, columns=rb)
                b = estimator(ref, loss, **kw).fit(Z, t, columns=rb)
            a = fits["per bin", 1]
            assert np.any(a.coef_ != 0)
            for f in fits.values():
                assert f.parallel_ == "grid"
                assert np.array_equal(f.coef_, a.coef_)
                assert np.array_equal(np.asarray(f.intercept_), np.asarray(a.intercept_))
                assert f.objective_history_ == a.objective_history_
            assert np.allclose(a.coef_, b.coef_, **TIGHT)


def _streamed_fits(monkeypatch, Est, Z, t, binning, kw, caps=(0.0, 0.6, 1e9), jobs=(1, 2, 3),
                   sample_weight=None):
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for cap in caps:
            with forced_paths(grid_stream=True, grid_par_min=0, stream_max_partials=cap):
                for n_jobs in jobs:
                    fits[cap, n_jobs] = Est(n_jobs=n_jobs, **kw).fit(
                        Z, t, sample_weight=sample_weight, columns=binning)
    return fits


@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge"])
@pytest.mark.parametrize("weighted", [False, True])
def test_streamed_grid_step_is_identical_for_every_thread_count(monkeypatch, loss, weighted):
    # grid mode as streams over the rows: block partial sums (some grids, all, or none, by
    # the cap on their size) in blocks fixed by N, so iterates do not depend on n_jobs; on
    # training data and on new data whose rows miss some grids; near the twin's iterates
    from rbcd.binning.random_binning import RandomBinning

    rng = np.random.default_rng(8)
    X = rng.uniform(size=(70000, 3))
    y = np.sin(6 * X[:, 0]) * np.cos(6 * X[:, 1])
    rb = RandomBinning(n_grids=4, sigma=0.3, random_state=1).fit(X[:500])
    Z = rb.transform(X)
    assert np.any(np.asarray((Z != 0).sum(axis=1)).ravel() < 4)  # rows missing a grid
    s = rng.uniform(0.5, 2.0, size=y.shape[0]) if weighted else None
    t = y if loss == "squared" else np.where(y > np.median(y), 1.0, -1.0)
    Est = CDRegressor if loss == "squared" else CDClassifier
    est = {}
    for sel in SELECTIONS:
        kw = dict(alpha=1e-5, l1_ratio=0.5, max_epochs=2, tol=0.0, parallel="grid",
                  random_state=5, selection=sel)
        Fit = Est if loss == "squared" else partial(Est, loss=loss)
        fits = _streamed_fits(monkeypatch, Fit, Z, t, rb, kw, sample_weight=s)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            b = estimator(ref, loss, **kw).fit(Z, t, sample_weight=s, columns=rb)
        for cap in (0.0, 0.6, 1e9):
            a = fits[cap, 1]
            assert np.any(a.coef_ != 0)
            for n_jobs in (2, 3):
                f = fits[cap, n_jobs]
                assert f.parallel_ == "grid"
                assert np.array_equal(f.coef_, a.coef_)
                assert np.array_equal(np.asarray(f.intercept_), np.asarray(a.intercept_))
                # objective and convergence values are summed in fixed blocks too
                assert f.objective_history_ == a.objective_history_
                assert np.array_equal(np.asarray(f.dual_gap_), np.asarray(a.dual_gap_))
            assert np.allclose(a.coef_, b.coef_, **TIGHT)
            assert np.allclose(a.objective_history_, b.objective_history_, rtol=1e-12, atol=0)
        est[sel] = fits
    assert not np.array_equal(est["cyclic"][1e9, 1].coef_, est["random"][1e9, 1].coef_)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_streamed_grid_epoch_team_splits_every_phase_bitwise(loss):
    # the threads' region of a streamed grid epoch (_cd.grid_team): 70,000 rows make 4 row
    # blocks, shared 1-1, 1-1-2 or 1-1-1-1 by 2-4 threads (and none for a 5th); a grid of
    # 5,000 bins has its new weights split among the threads; a grid of one bin is one
    # thread's step; a grid of 68,000 bins has int32 labels and, under the default cap on
    # the partial sums, takes its bins' own steps in chunks claimed by the threads. Every
    # thread count gives the one-thread iterates bit for bit.
    n = 70000
    rng = np.random.default_rng(4)
    cols, ptr = [], [0]
    for k in (1, 40, 5000, 68000, 300):
        local = rng.permutation(n) % k              # exactly k bins
        cols.append(ptr[-1] + local)
        ptr.append(ptr[-1] + k)
    R = len(cols)
    Z = sp.csr_matrix((np.full(n * R, 1 / np.sqrt(R)), np.stack(cols, axis=1).ravel(),
                       np.arange(0, n * R + 1, R)), shape=(n, ptr[-1]))
    binning = types.SimpleNamespace(grid_ptr_=np.array(ptr, dtype=np.int64))
    t = np.sin(3 * rng.normal(size=n)) + 0.1 * rng.normal(size=n)
    if loss != "squared":
        t = np.where(t > np.median(t), 1.0, -1.0)
    Est = CDRegressor if loss == "squared" else CDClassifier
    for sel in ("random", "cyclic"):
        kw = dict(alpha=1e-5, l1_ratio=0.5, max_epochs=2, tol=0.0, parallel="grid",
                  random_state=7, selection=sel)
        for cap in (2.0, 1e9):   # the bins' own steps for the finest grid, or streamed
            fits = {}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                with forced_paths(grid_stream=True, stream_max_partials=cap):
                    for n_jobs in (1, 2, 3, 4, 5):
                        fits[n_jobs] = Est(n_jobs=n_jobs, **kw).fit(Z, t, columns=binning)
            a = fits[1]
            assert np.count_nonzero(a.coef_) > 1000
            for n_jobs, f in fits.items():
                assert f.n_threads_ == (n_jobs if openmp_is_enabled() else 1)
                assert np.array_equal(f.coef_, a.coef_), (sel, cap, n_jobs)
                assert np.array_equal(np.asarray(f.intercept_), np.asarray(a.intercept_))
                assert f.objective_history_ == a.objective_history_


def test_streamed_grid_step_with_wide_bin_labels(monkeypatch):
    # a grid with 65536 or more bins takes int32 row labels, the others uint16: grids of both
    # kinds in one matrix (two RB matrices side by side, one very fine, one coarse)
    import scipy.sparse as sp
    from rbcd.binning.random_binning import RandomBinning, column_structure

    rng = np.random.default_rng(2)
    X = rng.uniform(size=(70000, 1))
    y = np.sin(20 * X[:, 0]) + 0.1 * rng.normal(size=70000)
    fine = RandomBinning(n_grids=2, sigma=1e-7, random_state=0)
    coarse = RandomBinning(n_grids=2, sigma=0.05, random_state=1)
    Z = sp.hstack([fine.fit_transform(X), coarse.fit_transform(X)]).tocsr()
    gp = np.concatenate([fine.grid_ptr_, fine.grid_ptr_[-1] + coarse.grid_ptr_[1:]])
    cols = column_structure(Z, gp)
    labels = _cd.grid_labels(np.asarray(cols.indptr, dtype=np.int64), cols.indices,
                             np.asarray(gp, dtype=np.int64), 70000, 2)
    assert [a.dtype for a in labels] == [np.int32, np.int32, np.uint16, np.uint16]
    for g, lab in enumerate(labels):
        assert np.array_equal(lab, Z.indices[g::4] - gp[g])
    for sel in ("random", "cyclic"):
        kw = dict(alpha=1e-6, max_epochs=2, tol=0.0, parallel="grid", random_state=3,
                  selection=sel)
        fits = _streamed_fits(monkeypatch, CDRegressor, Z, y, cols, kw, caps=(0.0, 1e9),
                              jobs=(1, 2))
        with warnings.catch_warnings(), forced_paths(grid_stream=False, grid_par_min=0):
            warnings.simplefilter("ignore", ConvergenceWarning)
            per_bin = CDRegressor(n_jobs=1, **kw).fit(Z, y, columns=cols)
        for cap in (0.0, 1e9):
            assert np.array_equal(fits[cap, 1].coef_, fits[cap, 2].coef_)
        assert np.array_equal(fits[0.0, 1].coef_, per_bin.coef_)
        assert np.allclose(fits[1e9, 1].coef_, per_bin.coef_, **TIGHT)


def test_grid_labels_give_each_rows_bin_per_grid():
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    n, gp = 50, np.array([0, 3, 3, 8, 9], dtype=np.int64)  # an empty grid and a 1-bin grid
    rows, cols = [], []
    for g in range(4):
        for i in range(n):
            if gp[g + 1] > gp[g] and rng.uniform() < 0.8:
                rows.append(i)
                cols.append(rng.integers(gp[g], gp[g + 1]))
    C = sp.csc_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, 9))
    C.sort_indices()
    for idx in (C.indices.astype(np.int32), C.indices.astype(np.int64)):
        lab = _cd.grid_labels(C.indptr.astype(np.int64), idx, gp, n, 2)
        assert len(lab) == 4 and all(a.shape == (n,) and a.dtype == np.uint16 for a in lab)
        lab = np.array(lab)
        want = np.empty((4, n), dtype=np.int64)
        for g in range(4):
            want[g] = gp[g + 1] - gp[g]
        want[np.searchsorted(gp, cols, side="right") - 1, rows] = np.array(cols) - gp[
            np.searchsorted(gp, cols, side="right") - 1]
        assert np.array_equal(lab, want)


# ---------------------------------------------------------------------------- parallel optima
def _strong_convexity_bound(est, Z, y, loss, alpha, l1_ratio):
    """P(w) - P* <= ||minimum-norm subgradient||^2 / (2 lam2) (lam2-strongly convex)."""
    lam1, lam2 = alpha * l1_ratio, alpha * (1 - l1_ratio)
    w = np.ravel(est.coef_)
    b = float(np.ravel(est.intercept_)[0])
    p = np.asarray(Z @ w).ravel() + b
    d = loss_deriv(loss, p, y)
    g = np.asarray(Z.T @ d).ravel() / len(y) + lam2 * w
    v = np.where(w != 0, np.abs(g + lam1 * np.sign(w)), np.maximum(np.abs(g) - lam1, 0.0))
    return float(np.sum(v ** 2) / (2 * lam2)), abs(float(np.mean(d)))


@pytest.mark.parametrize("selection", SELECTIONS)
def test_hogwild_and_grid_reach_the_serial_optimum_squared(selection):
    Z, y, binning = rb_problem(5, n=300, n_grids=8, bins=12)
    tol = 1e-6
    kw = dict(alpha=3e-3, tol=tol, max_epochs=3000, selection=selection, random_state=2)
    serial = CDRegressor(parallel=None, **kw).fit(Z, y)
    hog = CDRegressor(parallel="hogwild", n_jobs=2, **kw).fit(Z, y)
    grid = CDRegressor(parallel="grid", n_jobs=2, **kw).fit(Z, y, columns=binning)
    assert hog.parallel_ == "hogwild" and grid.parallel_ == "grid"
    P0 = 0.5 * np.var(y)
    for est in (serial, hog, grid):
        assert est.dual_gap_ <= tol
        # gap certificate: P* <= P(w) <= P* + tol * P0 for each of the three
    objs = [objective(Z, y, e.coef_, e.intercept_, "squared", 3e-3, 1.0) for e in (serial, hog, grid)]
    assert max(objs) - min(objs) <= tol * P0 * (1 + 1e-6) + 1e-14


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_hogwild_and_grid_reach_the_serial_optimum_classification(loss):
    Z, y, binning = rb_problem(6, n=300, n_grids=8, bins=12)
    y = np.where(y > 0, 1.0, -1.0)
    alpha, l1_ratio = 3e-3, 0.5
    kw = dict(loss=loss, alpha=alpha, l1_ratio=l1_ratio, tol=1e-5, max_epochs=3000, random_state=3,
              decision_epochs=None)  # the subgradient test alone: close to the optimum
    ests = [CDClassifier(parallel=None, **kw).fit(Z, y),
            CDClassifier(parallel="hogwild", n_jobs=2, **kw).fit(Z, y),
            CDClassifier(parallel="grid", n_jobs=2, **kw).fit(Z, y, columns=binning)]
    objs, bounds = [], []
    for est in ests:
        assert est.dual_gap_ <= 1e-5
        bound, g_b = _strong_convexity_bound(est, Z, y, loss, alpha, l1_ratio)
        bounds.append(bound + 1e-12)
        objs.append(objective(Z, y, est.coef_.ravel(), est.intercept_[0], loss, alpha, l1_ratio))
    # every objective is within its own certified distance of the common optimum P*
    lo = max(o - bd for o, bd in zip(objs, bounds))
    assert all(o >= lo - 1e-12 for o in objs)
    assert max(objs) - min(objs) <= max(bounds) + 1e-12


@pytest.mark.parametrize("selection", SELECTIONS)
@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("values", ["normal", "constant", "constant-int64"])
@pytest.mark.parametrize("transactions", ["auto", "off", "abort"])
def test_hogwild_keeps_predictions_consistent_under_conflicts(monkeypatch, selection, loss,
                                                              values, transactions):
    # every column touches most rows: two threads add to the same p_i all the time; with
    # atomic adds or hardware transactions (and atomic coordinate swaps) p stays exactly
    # Z w + b. Values: stored ones, or one constant (the RB fast path), int32/int64 rows.
    rng = np.random.default_rng(0)
    N, D = 300, 8000  # D >> HOGWILD_CHUNK: both threads get steps
    if values == "normal":
        Zc = sp.csc_matrix(rng.normal(size=(N, D)) / np.sqrt(D))
        data, zval = np.ascontiguousarray(Zc.data), 1.0
    else:
        Zc = sp.csc_matrix((rng.random(size=(N, D)) < 0.5) * 0.4)
        data, zval = None, 0.4
    rows = Zc.indices.astype(np.int64) if values == "constant-int64" else Zc.indices
    y = rng.normal(size=N) if loss == "squared" else np.where(rng.random(N) < 0.5, -1.0, 1.0)
    s = rng.uniform(0.5, 2.0, size=N)
    beta = _cd.beta_of(_cd.Loss[loss.upper()])
    M = beta * np.asarray(Zc.multiply(Zc).T @ s).ravel() / s.sum()
    prob = _cd.CDProblem(Zc.indptr.astype(np.int64), rows, data, zval, y, s, float(s.sum()), M,
                         _cd.Loss[loss.upper()], 1e-4, 0.0, True,
                         _cd.Selection[selection.upper()], 123,
                         tx={"auto": _cd.TX_AUTO, "off": _cd.TX_OFF,
                             "abort": _cd.TX_ABORT}[transactions])
    prob.set_thread_seeds([5, 6])
    prob.intercept_step()
    started = committed = 0
    for _ in range(10):
        prob.epoch(_cd.Mode.HOGWILD, 2)
        prob.intercept_step()
        started += int(prob.tx_stats[:, 0].sum())
        committed += int(prob.tx_stats[:, 0].sum() - prob.tx_stats[:, 1].sum())
    if transactions == "auto" and _cd.rtm_available() and loss == "squared" \
            and openmp_is_enabled():
        assert committed > 0  # the transactional path ran (aborts fall back to atomic adds)
    elif transactions == "abort" and loss == "squared" and openmp_is_enabled():
        # every transaction failed: each batch was redone by atomic adds, and after 256
        # aborts the threads stayed on atomic adds (the fallback, on any CPU)
        assert started > 0 and committed == 0
    else:
        assert started == 0
    p = Zc @ prob.w_arr + prob.b
    assert np.allclose(prob.predictions(), p, rtol=0, atol=1e-9)
    # the cached loss derivatives agree with p too: the gradients match numpy's
    g = np.asarray(Zc.T @ (s * loss_deriv(loss, p, y))).ravel() / s.sum()
    assert np.allclose(prob.gradients(2), g, rtol=1e-9, atol=1e-12)
    assert np.isclose(prob.intercept_grad(), np.dot(s, loss_deriv(loss, p, y)) / s.sum(),
                      rtol=1e-9, atol=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_auto_mode_choice():
    # "auto" follows from the problem, never from the thread count: the same mode, and so
    # the same coefficients, for every n_jobs
    Z, y, binning = rb_problem(1)
    small = [CDRegressor(n_jobs=j, max_epochs=2, random_state=0).fit(Z, y, columns=binning)
             for j in (1, 2, None)]
    assert all(e.parallel_ is None for e in small)  # grids below auto_grid_min entries
    assert all(np.array_equal(e.coef_, small[0].coef_) for e in small)
    with forced_paths(auto_grid_min=Z.shape[0]):    # grids of exactly N entries: big enough
        big = [CDRegressor(n_jobs=j, max_epochs=2, random_state=0).fit(Z, y, columns=binning)
               for j in (1, 2, None)]
    assert all(e.parallel_ == "grid" for e in big)
    assert all(np.array_equal(e.coef_, big[0].coef_) for e in big)
    # no grid structure: serial whatever the size or the thread count; Hogwild only on request
    assert CDRegressor(n_jobs=2, max_epochs=2).fit(Z, y).parallel_ is None
    assert CDRegressor(n_jobs=2, max_epochs=2, parallel="hogwild").fit(Z, y).parallel_ == "hogwild"


# ---------------------------------------------------------------------------- optima vs sklearn
def test_lasso_without_intercept_equals_sklearn():
    from sklearn.linear_model import Lasso

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 12))
    y = X @ np.r_[2.0, -1.5, 1.0, np.zeros(9)] + 0.3 * rng.normal(size=60)
    alpha = 0.05
    sk = Lasso(alpha=alpha, fit_intercept=False, tol=1e-14, max_iter=100000).fit(X, y)
    for Zin in (X, sp.csr_matrix(X)):
        est = CDRegressor(alpha=alpha, fit_intercept=False, tol=1e-12, max_epochs=20000,
                          selection="cyclic", random_state=0).fit(Zin, y)
        o_ours = objective(X, y, est.coef_, 0.0, "squared", alpha, 1.0)
        o_sk = objective(X, y, sk.coef_, 0.0, "squared", alpha, 1.0)
        assert abs(o_ours - o_sk) <= 1e-10 * o_sk
        assert np.allclose(est.coef_, sk.coef_, atol=1e-6)
        assert est.intercept_ == 0.0


@pytest.mark.filterwarnings("ignore:Liblinear failed to converge:sklearn.exceptions.ConvergenceWarning")  # the peer, run long
def test_l1_logistic_matches_liblinear_objective():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(1)
    N = 120
    X = rng.normal(size=(N, 8))
    y = np.where(X @ rng.normal(size=8) + 0.5 * rng.normal(size=N) > 0, 1.0, -1.0)
    alpha = 0.02
    # liblinear minimizes ||w||_1 + C sum_i log(1 + exp(-y_i w.x_i)); divided by C N this
    # is alpha ||w||_1 + mean loss when C = 1 / (alpha N)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        lr = LogisticRegression(l1_ratio=1.0, solver="liblinear", C=1.0 / (alpha * N),
                                fit_intercept=False, tol=1e-12, max_iter=100000).fit(X, y)
    est = CDClassifier(alpha=alpha, fit_intercept=False, tol=1e-9, max_epochs=20000,
                       random_state=0, decision_epochs=None).fit(X, y)
    o_ours = objective(X, y, est.coef_.ravel(), 0.0, "logistic", alpha, 1.0)
    o_lib = objective(X, y, lr.coef_.ravel(), 0.0, "logistic", alpha, 1.0)
    assert o_ours <= o_lib + 1e-8
    assert abs(o_ours - o_lib) <= 1e-6 * o_lib
    assert np.array_equal(est.coef_ == 0, np.abs(lr.coef_) < 1e-8)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("l1_ratio", [1.0, 0.5, 0.0])
def test_kkt_at_the_solution(loss, l1_ratio):
    Z, y, rng = random_problem(20, loss, n=80, d=15, density=0.5)
    s = rng.uniform(0.5, 2.0, size=80)
    alpha = 0.02
    # the classifier by its subgradient test alone (decision_epochs=None): at the optimum
    Est = (CDRegressor if loss == "squared" else partial(CDClassifier, decision_epochs=None))
    est = Est(loss=loss, alpha=alpha, l1_ratio=l1_ratio, tol=1e-10, max_epochs=20000,
              random_state=0).fit(Z, y, sample_weight=s)
    w = np.ravel(est.coef_)
    b = float(np.ravel(est.intercept_)[0])
    p = np.asarray(Z @ w).ravel() + b
    d = s * loss_deriv(loss, p, y) / s.sum()
    g = np.asarray(Z.T @ d).ravel() + alpha * (1 - l1_ratio) * w
    lam1 = alpha * l1_ratio
    eps = 1e-7
    nz = w != 0
    assert np.all(np.abs(g[nz] + lam1 * np.sign(w[nz])) <= eps)
    assert np.all(np.abs(g[~nz]) <= lam1 + eps)
    assert abs(d.sum()) <= eps  # the intercept is optimal too


# ---------------------------------------------------------------------------- options
def test_integer_sample_weights_equal_repeated_rows():
    Z, y, rng = random_problem(30, "squared", n=40, d=8)
    reps = rng.integers(0, 3, size=40)
    reps[:2] = 1
    kw = dict(alpha=0.01, tol=1e-10, max_epochs=5000, selection="cyclic", random_state=0)
    a = CDRegressor(**kw).fit(Z, y, sample_weight=reps.astype(float))
    idx = np.repeat(np.arange(40), reps)
    b = CDRegressor(**kw).fit(Z[idx], y[idx])
    assert np.allclose(a.coef_, b.coef_, atol=1e-7)
    assert np.isclose(a.intercept_, b.intercept_, atol=1e-7)


def test_class_weight_equals_sample_weight():
    from sklearn.utils.class_weight import compute_sample_weight

    Z, y, _ = random_problem(31, "logistic", n=50, d=8)
    y[:35] = 1.0
    kw = dict(alpha=0.01, max_epochs=5, tol=0.0, random_state=0, parallel=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for cw in ("balanced", {-1.0: 3.0, 1.0: 0.5}):
            a = CDClassifier(class_weight=cw, **kw).fit(Z, y)
            b = CDClassifier(**kw).fit(Z, y, sample_weight=compute_sample_weight(cw, y))
            c = ref.CDClassifier(class_weight=cw, **kw).fit(Z, y)
            assert np.array_equal(a.coef_, b.coef_)
            assert np.allclose(a.coef_, c.coef_, **TIGHT)


def test_float32_input_keeps_float32():
    Z, y, _ = random_problem(32, "squared", n=40, d=8)
    Z32 = Z.astype(np.float32)
    kw = dict(alpha=0.01, max_epochs=5, tol=0.0, random_state=0, parallel=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = CDRegressor(**kw).fit(Z32, y)
        b = CDRegressor(**kw).fit(Z32.astype(np.float64), y)  # the same values in float64
        c = CDClassifier(**kw).fit(Z32.toarray(), np.sign(y - 0.5))
    assert a.coef_.dtype == np.float32 and c.coef_.dtype == np.float32
    assert np.allclose(a.coef_, b.coef_.astype(np.float32), rtol=1e-6, atol=1e-7)
    assert a.predict(Z32).dtype == np.float32


def test_warm_start_stops_early_and_continues():
    Z, y, _ = random_problem(33, "squared", n=60, d=12)
    est = CDRegressor(alpha=0.01, tol=1e-6, max_epochs=5000, warm_start=True, random_state=0)
    est.fit(Z, y)
    first = est.n_iter_
    assert first > 1 and est.dual_gap_ <= 1e-6
    coef = est.coef_.copy()
    est.fit(Z, y)
    assert est.n_iter_ == 1  # already converged: one epoch to confirm (gap normalized at w = 0)
    assert np.allclose(est.coef_, coef, atol=1e-5)
    # the same through rbcd_ref: warm starts agree iterate for iterate
    kw = dict(alpha=0.02, tol=0.0, max_epochs=2, warm_start=True, random_state=1, parallel=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a, b = CDRegressor(**kw), ref.CDRegressor(**kw)
        for _ in range(2):
            a.fit(Z, y)
            b.fit(Z, y)
    assert np.allclose(a.coef_, b.coef_, **TIGHT)
    assert np.isclose(a.intercept_, b.intercept_, **TIGHT)


def test_squared_intercept_is_exact_and_empty_columns_stay_zero():
    Z, y, rng = random_problem(34, "squared", n=30, d=6)
    Z = sp.hstack([Z, sp.csr_matrix((30, 2))]).tocsr()  # two empty columns (M_j = 0)
    s = rng.uniform(0.5, 2, size=30)
    est = CDRegressor(alpha=0.01, tol=1e-8, max_epochs=5000, random_state=0).fit(Z, y, sample_weight=s)
    r = y - est.predict(Z)
    assert abs(np.dot(s, r)) / s.sum() <= 1e-10
    assert np.all(est.coef_[-2:] == 0)


@pytest.mark.parametrize("loss", LOSSES)
def test_alpha_max_gives_zero_and_matches_ref(loss):
    Z, y, rng = random_problem(35, loss, n=50, d=10, density=0.5)
    s = rng.uniform(0.5, 2, size=50)
    for fit_intercept in (True, False):
        am = alpha_max(Z, y, l1_ratio=0.5, fit_intercept=fit_intercept, sample_weight=s, loss=loss)
        assert np.isclose(am, ref.alpha_max(Z, y, l1_ratio=0.5, fit_intercept=fit_intercept,
                                            sample_weight=s, loss=loss), rtol=1e-12)
        Est = CDRegressor if loss == "squared" else CDClassifier
        kw = dict(loss=loss, l1_ratio=0.5, fit_intercept=fit_intercept, tol=1e-8,
                  max_epochs=5000, random_state=0)
        above = Est(alpha=am * 1.0001, **kw).fit(Z, y, sample_weight=s)
        below = Est(alpha=am * 0.9, **kw).fit(Z, y, sample_weight=s)
        assert np.all(above.coef_ == 0)
        assert np.any(below.coef_ != 0)


def test_cd_path_warm_starts_and_matches_single_fits():
    Z, y, _ = random_problem(36, "squared", n=60, d=10, density=0.5)
    alphas, coefs, gaps = cd_path(Z, y, n_alphas=6, eps=1e-2, tol=1e-9, max_epochs=20000,
                                  random_state=0)
    assert alphas.shape == (6,) and coefs.shape == (10, 6) and gaps.shape == (6,)
    assert np.all(np.diff(alphas) < 0)
    assert np.isclose(alphas[0], alpha_max(Z, y))
    assert np.allclose(coefs[:, 0], 0, atol=1e-5)  # w = 0 is optimal at alpha_max (up to tol)
    assert np.any(coefs[:, -1] != 0)
    assert np.all(gaps <= 1e-9)
    for k in (2, 5):
        single = CDRegressor(alpha=alphas[k], tol=1e-9, max_epochs=20000, random_state=0).fit(Z, y)
        assert np.allclose(single.coef_, coefs[:, k], atol=1e-6)
    a2, c2, g2 = cd_path(Z, np.where(y > 0.5, 1, -1), n_alphas=3, loss="logistic",
                         tol=1e-6, max_epochs=5000, random_state=0)
    assert c2.shape == (10, 3) and np.allclose(c2[:, 0], 0, atol=1e-4) and np.any(c2[:, -1] != 0)
    assert np.abs(c2[:, -1]).sum() > 100 * np.abs(c2[:, 0]).sum()


def test_verbose_prints_each_epoch_and_convergence_warning(capsys):
    Z, y, _ = random_problem(37, "squared", n=30, d=6)
    with pytest.warns(ConvergenceWarning, match=r"relative duality gap .* > tol 1\.000e-12"):
        est = CDRegressor(alpha=1e-3, tol=1e-12, max_epochs=3, verbose=2, random_state=0).fit(Z, y)
    out = capsys.readouterr().out
    assert out.count("] epoch") == 3 and "objective" in out and "gap" in out
    assert "NOT converged" in out.splitlines()[-1]
    assert est.n_iter_ == 3 and len(est.objective_history_) == 3
    assert est.dual_gap_ > 1e-12
    # the objective never increases along the epochs (squared loss, exact curvature)
    assert np.all(np.diff(est.objective_history_) <= 1e-15)
    with pytest.warns(ConvergenceWarning, match="subgradient"):
        CDClassifier(alpha=1e-4, tol=1e-14, max_epochs=2, random_state=0).fit(Z, np.sign(y - 0.5))


def test_verbose_one_prints_one_summary_line_per_fit(capsys):
    # scikit-learn's levels: 1 = one line per fit, 2 = a line per epoch (issue 17)
    Z, y, _ = random_problem(37, "squared", n=30, d=6)
    a = CDRegressor(alpha=1e-3, l1_ratio=0.0, tol=1e-4, max_epochs=500, random_state=0,
                    verbose=1).fit(Z, y)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert f"{a.n_iter_} epoch(s)" in lines[0] and "subgradient" in lines[0]
    assert "converged" in lines[0] and "NOT" not in lines[0] and lines[0].endswith("s")
    # the mode named in words: parallel=None is serial coordinate descent
    CDRegressor(alpha=1e-3, random_state=0, parallel=None, verbose=2).fit(Z, y)
    text = capsys.readouterr().out
    assert "parallel = serial" in text and "None" not in text
    b = CDRegressor(alpha=1e-3, l1_ratio=0.0, tol=1e-4, max_epochs=500, random_state=0).fit(Z, y)
    assert capsys.readouterr().out == ""
    assert np.array_equal(a.coef_, b.coef_) and a.n_iter_ == b.n_iter_
    t = np.where(y > np.median(y), 2, np.where(y > np.quantile(y, 0.25), 1, 0))
    with pytest.warns(ConvergenceWarning):
        CDClassifier(alpha=1e-4, tol=1e-12, max_epochs=2, random_state=0, verbose=1).fit(Z, t)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and "NOT converged (3 of 3)" in lines[0] and "the worst of 3" in lines[0]


def test_solver_seed_and_reproducibility():
    Z, y, _ = random_problem(38, "squared", n=30, d=8)
    kw = dict(alpha=1e-3, max_epochs=3, tol=0.0, parallel=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = CDRegressor(random_state=5, **kw).fit(Z, y)
        b = CDRegressor(random_state=5, **kw).fit(Z, y)
        c = CDRegressor(random_state=6, **kw).fit(Z, y)
        d = CDRegressor(random_state=np.random.RandomState(5), **kw).fit(Z, y)
        e = ref.CDRegressor(random_state=np.random.RandomState(5), **kw).fit(Z, y)
    assert np.array_equal(a.coef_, b.coef_)
    assert not np.array_equal(a.coef_, c.coef_)
    assert np.allclose(d.coef_, e.coef_, **TIGHT)
    assert solver_seed(5) == solver_seed(5)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_serial_cyclic_on_rb_columns_takes_the_streamed_grid_step(monkeypatch, loss):
    # cyclic CD over RB columns visits grid after grid, each grid's bins in order: with the
    # grid structure it runs as the streamed grid step. Summing each bin over its column
    # (cap 0) is bitwise the per-coordinate step; block partial sums change only rounding.
    from rbcd.binning.random_binning import RandomBinning

    rng = np.random.default_rng(4)
    X = rng.uniform(size=(70000, 3))
    y = np.sin(6 * X[:, 0]) * np.cos(6 * X[:, 1])
    rb = RandomBinning(n_grids=4, sigma=0.3, random_state=2)
    Z = rb.fit_transform(X)
    t = y if loss == "squared" else np.where(y > np.median(y), 1.0, -1.0)
    Est = CDRegressor if loss == "squared" else partial(CDClassifier, loss=loss)
    kw = dict(alpha=1e-5, l1_ratio=0.5, max_epochs=3, tol=0.0, parallel=None,
              selection="cyclic", random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        plain = Est(**kw).fit(Z, t)                       # no grid structure: per coordinate
        with forced_paths(grid_par_min=0, stream_max_partials=0.0):
            col_sums = Est(**kw).fit(Z, t, columns=rb)
        with forced_paths(grid_par_min=0, stream_max_partials=1e9):
            blocks = Est(**kw).fit(Z, t, columns=rb)
        b = estimator(ref, loss, **kw).fit(Z, t)
    assert plain.parallel_ is None and blocks.parallel_ is None
    assert np.array_equal(col_sums.coef_, plain.coef_)
    assert not np.array_equal(blocks.coef_, plain.coef_)  # the block sums did run
    assert np.allclose(blocks.coef_, plain.coef_, **TIGHT)
    assert np.allclose(blocks.coef_, b.coef_, **TIGHT)


def test_serial_cyclic_streams_only_from_its_row_threshold():
    # below serial_stream_min_rows rows serial cyclic CD with the grid structure takes the
    # coordinates' own steps (bitwise the fit without the structure); from it, the streamed
    # step (block partial sums: the same iterates to rounding, not to the bit)
    from rbcd.binning.random_binning import RandomBinning
    from rbcd.solvers._paths import SERIAL_STREAM_MIN_ROWS

    rng = np.random.default_rng(8)
    X = rng.uniform(size=(6000, 3))
    y = np.sin(6 * X[:, 0]) + X[:, 1]
    rb = RandomBinning(n_grids=4, sigma=0.5, random_state=3)
    Z = rb.fit_transform(X)
    kw = dict(alpha=1e-5, max_epochs=3, tol=0.0, parallel=None, selection="cyclic")
    assert Z.shape[0] < SERIAL_STREAM_MIN_ROWS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        plain = CDRegressor(**kw).fit(Z, y)
        below = CDRegressor(**kw).fit(Z, y, columns=rb)
        with forced_paths(serial_stream_min_rows=Z.shape[0], stream_max_partials=1e9):
            at = CDRegressor(**kw).fit(Z, y, columns=rb)
    assert np.array_equal(below.coef_, plain.coef_)
    assert not np.array_equal(at.coef_, plain.coef_)      # the streamed step ran
    assert np.allclose(at.coef_, plain.coef_, **TIGHT)
    with pytest.raises(ValueError, match="serial_stream_min_rows"):
        with forced_paths(serial_stream_min_rows=-1):
            pass


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.0, 2.5, -1.0, 3.0, np.inf]), max_size=60)
       | st.lists(st.floats(-1e3, 1e3), max_size=300),
       st.integers(0, 70))
def test_top_columns_ranks_like_a_sort(values, k):
    # the watch list's selection: the k highest scores, best first, ties by smaller index
    scores = np.asarray(values, dtype=np.float64)
    expected = np.lexsort((np.arange(scores.size), -scores))[:k]
    assert _cd.top_columns(scores, k).tolist() == expected.tolist()


@pytest.mark.parametrize("parallel", [None, "grid", "hogwild"])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_logistic_state_at_extreme_margins_matches_the_twin(parallel, fit_intercept):
    # The logistic kernels keep exp(y p) and move it by per-column factors (cd_kernels.h,
    # rbcd_logistic_move); the twin computes loss' from p afresh. Columns of 3+ rows take
    # the factors, shorter ones a fresh exp. A warm start from huge coefficients puts the
    # margins y p past +-745, where exp(y p) overflows or underflows and the kernels must
    # recompute it from p instead of multiplying a stuck 0 or inf; the iterates still
    # follow the twin's, on 1 and 2 threads.
    from rbcd.binning.random_binning import RandomBinning

    rng = np.random.default_rng(11)
    X = rng.uniform(size=(300, 2))
    t = np.where(np.sin(7 * X[:, 0]) + X[:, 1] > 0.5, 1.0, -1.0)
    rb = RandomBinning(n_grids=5, sigma=0.1, random_state=2).fit(X)
    Z = rb.transform(X)
    counts = np.diff(Z.tocsc().indptr)
    assert counts.max() >= 3 and counts.min() < 3  # both paths of the rule
    # (alpha = 1: one l1 step zeroes most of the huge w_j, so a margin comes back from beyond
    # +-745 into range within one epoch, where a stuck 0 or inf gives a wrong loss'; this
    # test fails without the recomputation)
    kw = dict(alpha=1.0, l1_ratio=1.0, max_epochs=4, tol=0.0, selection="cyclic",
              fit_intercept=fit_intercept, random_state=0, warm_start=True)
    w0 = 1500.0 * rng.normal(size=(1, Z.shape[1]))
    margins = t * np.asarray(Z @ w0.ravel()).ravel()
    assert margins.max() > 745 and margins.min() < -745

    def fit(est):
        est.fit(Z, t, columns=rb)               # sets classes_ and the attributes' shapes
        est.coef_ = w0.copy()
        est.intercept_ = np.zeros(1)
        return est.fit(Z, t, columns=rb)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        b = fit(ref.CDClassifier(**kw))
        fits = [fit(CDClassifier(parallel=parallel, n_jobs=n, **kw))
                for n in ((1,) if parallel == "hogwild" else (1, 2))]
    for a in fits:
        assert np.all(np.isfinite(a.coef_))
        np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(a.objective_history_, b.objective_history_, rtol=1e-9)


def _streamed_epochs_numpy(labels, grid_ptr, y, zval, lam1, epochs):
    """Serial cyclic CD on RB columns as the streamed grid step computes it
    (docs/internals.md, "Grid mode": row blocks fixed by N, 4 lanes per block where they
    take at most a double per 8 rows): squared loss, unit weights, no intercept,
    l1_ratio = 1. numpy's ufunc.at adds in index order, so each lane sums its rows in
    increasing order, as the kernel does."""
    N = y.shape[0]
    B = 1
    while B < 16 and N >= 2 * B * 16384:
        B *= 2
    block = ((N + B - 1) // B + 7) // 8 * 8
    starts = list(range(0, N, block))
    w = np.zeros(grid_ptr[-1])
    u = -y.astype(np.float64)  # p - y at w = 0
    S = float(N)
    for _ in range(epochs):
        for r, lab in enumerate(labels):
            lo, hi = grid_ptr[r], grid_ptr[r + 1]
            nb = hi - lo
            c = (nb + 1 + 7) // 8 * 8
            lanes = 4 if 4 * len(starts) * c * 8 <= N else 1
            acc = np.zeros(nb)
            for a in starts:
                b = min(N, a + block)
                part = np.zeros((lanes, nb + 1))
                for l in range(lanes):
                    rows = np.arange(a + l, b, lanes)
                    np.add.at(part[l], lab[rows], u[rows])
                blk = part[0] if lanes == 1 else (part[0] + part[1]) + (part[2] + part[3])
                acc = acc + blk[:nb]
            counts = np.bincount(lab, minlength=nb)[:nb]
            M = counts * (zval * zval) / S
            g = (acc * zval) / S + 0.0 * w[lo:hi]
            v = w[lo:hi] - g / M
            t = lam1 / M
            new = np.where(v > t, v - t, np.where(v < -t, v + t, 0.0))
            dz = np.append((new - w[lo:hi]) * zval, 0.0)
            w[lo:hi] = new
            u = u + dz[lab]
    return w


@pytest.mark.skipif(not openmp_is_enabled(), reason="needs OpenMP for n_jobs=2 grid mode")
def test_streamed_step_sums_in_lanes_as_documented():
    # bit for bit the documented order of the streamed step's partial sums: row blocks
    # (2 of them at 40,000 rows), 4 lanes for grids of a few bins, 1 lane for a grid of
    # 700 bins (4 x 2 x 704 x 8 > N); popular bins (half the rows in one bin) are what the
    # lanes are for. Serial cyclic CD streams; grid mode with cyclic grids is the same step
    from rbcd.binning.random_binning import column_structure

    rng = np.random.default_rng(5)
    N, bins = 40000, [3, 40, 700, 9]
    labels = []
    for nb in bins:
        p = rng.dirichlet(np.full(nb, 0.3))
        lab = rng.choice(nb, size=N, p=p)
        lab[:nb] = np.arange(nb)  # every bin holds a row
        labels.append(lab.astype(np.int64))
    grid_ptr = np.concatenate([[0], np.cumsum(bins)]).astype(np.int64)
    zval = 1.0 / np.sqrt(len(bins))
    cols_idx = np.stack([grid_ptr[r] + labels[r] for r in range(len(bins))], axis=1)
    Z = sp.csr_matrix((np.full(N * len(bins), zval), cols_idx.ravel(),
                       np.arange(0, N * len(bins) + 1, len(bins))), shape=(N, grid_ptr[-1]))
    y = np.sin(1.7 * cols_idx).sum(axis=1) + 0.1 * rng.standard_normal(N)
    alpha = 1e-5
    want = _streamed_epochs_numpy(labels, grid_ptr, y, zval, alpha, epochs=2)
    cols = column_structure(Z, grid_ptr)
    kw = dict(alpha=alpha, l1_ratio=1.0, fit_intercept=False, max_epochs=2, tol=0.0,
              selection="cyclic")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with forced_paths(serial_stream_min_rows=N):  # (N is below the default)
            serial = CDRegressor(parallel=None, n_jobs=1, **kw).fit(Z, y, columns=cols)
        grid = CDRegressor(parallel="grid", n_jobs=2, **kw).fit(Z, y, columns=cols)
    assert np.count_nonzero(want) > 100
    assert np.array_equal(serial.coef_, want)
    assert np.array_equal(grid.coef_, want)


def test_classification_losses_stream_from_their_own_row_threshold():
    # between the two thresholds (2^14 <= N < 2^16) serial cyclic CD streams for the
    # classification losses but not for the squared loss (bitwise the fit without the grid
    # structure); each threshold, forced to N, switches its own losses to the stream
    from rbcd.binning.random_binning import RandomBinning
    from rbcd.solvers._paths import (SERIAL_STREAM_MIN_ROWS,
                                     SERIAL_STREAM_MIN_ROWS_CLASSIFICATION)

    rng = np.random.default_rng(9)
    X = rng.uniform(size=(20000, 3))
    y = np.sin(6 * X[:, 0]) + X[:, 1]
    yc = np.where(y > np.median(y), 1, -1)
    rb = RandomBinning(n_grids=4, sigma=0.5, random_state=3)
    Z = rb.fit_transform(X)
    assert SERIAL_STREAM_MIN_ROWS_CLASSIFICATION <= Z.shape[0] < SERIAL_STREAM_MIN_ROWS
    kw = dict(alpha=1e-5, max_epochs=3, tol=0.0, parallel=None, selection="cyclic")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reg_plain = CDRegressor(**kw).fit(Z, y)
        reg = CDRegressor(**kw).fit(Z, y, columns=rb)
        clf_plain = CDClassifier(**kw).fit(Z, yc)
        clf = CDClassifier(**kw).fit(Z, yc, columns=rb)
        with forced_paths(serial_stream_min_rows=Z.shape[0]):
            reg_at = CDRegressor(**kw).fit(Z, y, columns=rb)
    assert np.array_equal(reg.coef_, reg_plain.coef_)       # the coordinates' own steps
    assert not np.array_equal(reg_at.coef_, reg_plain.coef_)   # streamed
    assert np.allclose(reg_at.coef_, reg_plain.coef_, **TIGHT)
    assert not np.array_equal(clf.coef_, clf_plain.coef_)   # streamed
    assert np.allclose(clf.coef_, clf_plain.coef_, rtol=1e-7, atol=1e-10)
    with pytest.raises(ValueError, match="serial_stream_min_rows"):
        with forced_paths(serial_stream_min_rows_classification=-1):
            pass


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_classification_stops_when_decisions_settle(loss):
    # tol > 0: a classification fit ends after DECISION_EPOCHS epochs in a row that changed
    # no training decision (sign of z . w + b), before the subgradient test is met. The
    # iterates do not depend on tol, so the same fit cut at fewer epochs (tol=0) shows the
    # decisions epoch by epoch: the same over the last DECISION_EPOCHS epochs, changed at
    # the one before; and the twin stops at the same epoch.
    Z, y, _ = random_problem(5, loss, n=200, d=60)
    kw = dict(alpha=1e-4, l1_ratio=1.0, max_epochs=500, parallel=None, random_state=0)
    a = CDClassifier(loss=loss, tol=1e-4, **kw).fit(Z, y)
    n = a.n_iter_
    assert n < 500 and a.dual_gap_ > 1e-4  # the decisions rule stopped it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        b = ref.CDClassifier(loss=loss, tol=1e-4, **kw).fit(Z, y)
        assert b.n_iter_ == n
        cut = {e: CDClassifier(loss=loss, tol=0.0, **{**kw, "max_epochs": e}).fit(Z, y)
               for e in range(n - DECISION_EPOCHS - 1, n + 1)}
    assert np.allclose(cut[n].coef_, a.coef_, **TIGHT)
    signs = {e: cut[e].decision_function(Z) > 0 for e in cut}
    for e in range(n - DECISION_EPOCHS, n + 1):
        assert np.array_equal(signs[e], signs[n])
    assert not np.array_equal(signs[n - DECISION_EPOCHS - 1], signs[n])
    # tol=0, and decision_epochs=None, switch the rule off
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        c = CDClassifier(loss=loss, tol=0.0, **{**kw, "max_epochs": n + 5}).fit(Z, y)
        d = CDClassifier(loss=loss, tol=1e-4, decision_epochs=None,
                         **{**kw, "max_epochs": n + 5}).fit(Z, y)
        e = ref.CDClassifier(loss=loss, tol=1e-4, decision_epochs=None,
                             **{**kw, "max_epochs": n + 5}).fit(Z, y)
    assert c.n_iter_ == n + 5 and d.n_iter_ == n + 5 and e.n_iter_ == n + 5
    # a longer window stops later, at the same epoch as the twin's
    f = CDClassifier(loss=loss, tol=1e-4, decision_epochs=2 * DECISION_EPOCHS, **kw).fit(Z, y)
    g = ref.CDClassifier(loss=loss, tol=1e-4, decision_epochs=2 * DECISION_EPOCHS, **kw).fit(Z, y)
    assert f.n_iter_ == g.n_iter_ > n


def test_regression_is_not_stopped_by_the_decisions_rule():
    # the squared loss keeps the duality-gap test alone
    Z, y, _ = random_problem(6, "squared", n=60, d=20)
    a = CDRegressor(alpha=1e-3, tol=1e-6, max_epochs=2000, parallel=None, random_state=0).fit(Z, y)
    assert a.dual_gap_ <= 1e-6
