"""The GPU path's algorithms (rbcd.cuda) run on numpy: the same Z bit for bit as the CPU
binning and rbcd_ref, the first-appearance numbering, the CSC layout, the transform of new
rows, the CG solution to tolerance, and the device="cuda" estimators end to end (with the
array module switched to numpy by monkeypatching rbcd.cuda._ops.cupy_module).

tests/test_cuda_gpu.py runs the same checks with CuPy on a GPU (the CUDA kernels)."""
import pickle
import sys
import types
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st
from sklearn.exceptions import ConvergenceWarning

import rbcd_ref
from rbcd import RandomBinning, RBClassifier, RBRegressor, RidgeCG, RidgeCGClassifier
from rbcd.cuda import _ops, binning as cb, cg as ccg
from rbcd.solvers.cg import solve_ridge_cg


@pytest.fixture
def numpy_device(monkeypatch):
    """device="cuda" runs its algorithms on numpy (the numpy twins of the kernels)."""
    monkeypatch.setattr(_ops, "cupy_module", lambda: np)


def _cpu_Z(X, R, sigma, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = RandomBinning(n_grids=R, sigma=sigma, random_state=seed)
        Z, cols = cpu.fit_transform(X, return_columns=True)
    return cpu, Z, cols


def _xp_fit(X, R, sigma, seed, combine=True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = RandomBinning(n_grids=R, sigma=sigma, random_state=seed)
        layout = cb.fit_layout(est, X, np, combine=combine)
    data, indices, indptr = cb.csr_arrays(np, layout.labels, est.grid_ptr_,
                                          est.n_features_out_, est._value(), est._dtype_)
    return est, layout, (data, indices, indptr)


def _assert_same_Z(arrays, Z):
    data, indices, indptr = arrays
    assert indices.dtype == Z.indices.dtype and indptr.dtype == Z.indptr.dtype
    assert data.dtype == Z.data.dtype
    np.testing.assert_array_equal(indices, Z.indices)
    np.testing.assert_array_equal(indptr, Z.indptr)
    np.testing.assert_array_equal(data, Z.data)


# values from a small grid so that rows share bins and columns may be constant
_values = st.sampled_from([-1.5, -0.25, 0.0, 0.1, 0.1000000001, 0.5, 0.75, 2.0, 3.0])


@st.composite
def _problem(draw):
    n = draw(st.integers(1, 40))
    d = draw(st.integers(1, 5))
    X = np.array(draw(st.lists(_values, min_size=n * d, max_size=n * d))).reshape(n, d)
    R = draw(st.integers(1, 6))
    sigma = draw(st.sampled_from(["scale", 0.05, 0.7, 5.0]))
    seed = draw(st.integers(0, 2**16))
    return X, R, sigma, seed


def test_scale_sigma_takes_sample_weight_as_the_cpu():
    # sigma="scale" with weights: the pairs drawn over weight units, as rbcd._scale
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 4))
    w = rng.integers(0, 3, 300).astype(float)
    est = RandomBinning(n_grids=8, random_state=0)
    cb.fit_layout(est, X, np, sample_weight=w)
    cpu = RandomBinning(n_grids=8, random_state=0).fit(X, sample_weight=w)
    assert est.sigma_ == cpu.sigma_ != RandomBinning(n_grids=8, random_state=0).fit(X).sigma_
    np.testing.assert_array_equal(est.widths_, cpu.widths_)
    # huge data: the distances computed down by a power of two, as on the CPU
    from rbcd._scale import scale_sigma
    assert cb._scale_sigma(np, X * 2.0 ** 600) == scale_sigma(X * 2.0 ** 600) == \
        scale_sigma(X) * 2.0 ** 600


@settings(max_examples=60, deadline=None)
@given(_problem(), st.booleans())
def test_Z_equals_cpu_and_ref(problem, combine):
    X, R, sigma, seed = problem
    cpu, Z, cols = _cpu_Z(X, R, sigma, seed)
    est, layout, arrays = _xp_fit(X, R, sigma, seed, combine)
    _assert_same_Z(arrays, Z)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Zr = rbcd_ref.RandomBinning(n_grids=R, sigma=sigma, random_state=seed).fit_transform(X)
    _assert_same_Z(arrays, sp.csr_matrix(Zr))
    # the grid-sorted layout is the CPU's column structure, the fitted attributes its own
    np.testing.assert_array_equal(layout.col_ptr, cols.indptr)
    np.testing.assert_array_equal(layout.rows, cols.indices)
    np.testing.assert_array_equal(est.n_bins_, cpu.n_bins_)
    np.testing.assert_array_equal(est.grid_ptr_, cpu.grid_ptr_)
    np.testing.assert_array_equal(est.kappa_per_grid_, cpu.kappa_per_grid_)
    assert est.sigma_ == cpu.sigma_
    np.testing.assert_array_equal(est.widths_, cpu.widths_)
    np.testing.assert_array_equal(est.offsets_, cpu.offsets_)


@settings(max_examples=40, deadline=None)
@given(_problem(), st.lists(_values | st.floats(-4, 4), min_size=1, max_size=60))
def test_transform_equals_cpu(problem, new_values):
    X, R, sigma, seed = problem
    d = X.shape[1]
    m = max(1, len(new_values) // d)
    Xt = np.resize(np.array(new_values, dtype=np.float64), (m, d))
    cpu, _, _ = _cpu_Z(X, R, sigma, seed)
    est, _, _ = _xp_fit(X, R, sigma, seed)
    Zc = cpu.transform(Xt)
    Zg = cb.transform(est, Xt, np)
    _assert_same_Z((Zg.data, Zg.indices, Zg.indptr), Zc)
    # to_cpu: the CPU tables rebuilt from the device keys transform the same way
    _assert_same_Z((Zg.data, Zg.indices, Zg.indptr), est.to_cpu().transform(Xt))


def test_multi_word_keys_and_both_sorts():
    """Grids whose keys need several 64-bit words (many fine columns) take the stable
    word-by-word sorts; Z is still the CPU's, in fit and transform."""
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(300, 40))
    cpu, Z, cols = _cpu_Z(X, 4, 0.02, 5)
    for combine in (True, False):
        est, layout, arrays = _xp_fit(X, 4, 0.02, 5, combine)
        assert max(k.shape[1] for k in est._cuda_tables.keys) > 1
        _assert_same_Z(arrays, Z)
        np.testing.assert_array_equal(layout.rows, cols.indices)
    Xt = np.vstack([X[:50], rng.uniform(-0.1, 1.1, size=(50, 40))])
    Zg = cb.transform(est, Xt, np)
    _assert_same_Z((Zg.data, Zg.indices, Zg.indptr), cpu.transform(Xt))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=50), st.integers(1, 3))
def test_first_appearance_numbering(keys, n_words):
    """number_grid against a plain loop: bins numbered by first appearance, each bin's rows
    increasing in the CSC layout, keys kept in id order."""
    n = len(keys)
    words = np.array([[k * (w + 1) for k in keys] for w in range(n_words)], dtype=np.uint64)
    perm = np.arange(n)
    for w in reversed(range(n_words)):
        perm = perm[np.argsort(words[w][perm], kind="stable")]
    labels, col_ptr, rows, kb, max_count = cb.number_grid(np, perm, words[:, perm])
    first = {}
    for i, k in enumerate(keys):
        first.setdefault(k, len(first))
    np.testing.assert_array_equal(labels, [first[k] for k in keys])
    for k, c in first.items():
        members = [i for i, kk in enumerate(keys) if kk == k]
        np.testing.assert_array_equal(rows[col_ptr[c]:col_ptr[c + 1]], members)
        assert kb[c, 0] == k
    assert max_count == max(keys.count(k) for k in first)


def test_cg_alpha_zero_reaches_the_minimum_norm_solution():
    # alpha = 0 on more bins than rows: the device CG drops the preconditioner as the CPU's
    # does, and both reach the minimum-norm least-squares solution
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(300, 4))
    Y = (np.sin(3 * X[:, 0]) + X[:, 1] ** 2)[:, None]
    _, Z, cols = _cpu_Z(X, 16, 1.0, 0)
    _, layout, _ = _xp_fit(X, 16, 1.0, 0)
    assert Z.shape[1] > Z.shape[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c1, b1, _ = solve_ridge_cg(Z, Y, None, alpha=0.0, tol=1e-12, max_iter=100000,
                                   columns=cols)
        c2, b2, _, _ = ccg.solve_ridge(np, layout, Y, None, alpha=0.0, tol=1e-12,
                                       max_iter=100000, structured=True)
    Zc = Z.toarray() - Z.toarray().mean(axis=0)
    w = np.linalg.lstsq(Zc, Y[:, 0] - Y.mean(), rcond=None)[0]      # minimum norm
    np.testing.assert_allclose(c1[0], w, atol=1e-6)
    np.testing.assert_allclose(c2[0], w, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**16), st.booleans(), st.booleans(), st.sampled_from(["jacobi", None]),
       st.integers(1, 3))
def test_cg_matches_cpu(seed, fit_intercept, weighted, preconditioner, k):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 200))
    X = rng.uniform(size=(n, 3))
    Y = np.c_[[np.sin(4 * X[:, 0] * (t + 1)) + X[:, 1] for t in range(k)]].T * 10.0
    s = rng.uniform(0.2, 3.0, size=n) if weighted else None
    _, Z, cols = _cpu_Z(X, 8, "scale", seed)
    _, layout, _ = _xp_fit(X, 8, "scale", seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c1, b1, _ = solve_ridge_cg(Z, Y, s, alpha=0.3, fit_intercept=fit_intercept, tol=1e-11,
                                   preconditioner=preconditioner, columns=cols)
        c2, b2, _, info = ccg.solve_ridge(np, layout, Y, s, alpha=0.3,
                                          fit_intercept=fit_intercept, tol=1e-11,
                                          preconditioner=preconditioner, structured=True)
        c3, b3, _, _ = ccg.solve_ridge(np, ccg.MatrixOperator(np, Z), Y, s, alpha=0.3,
                                       fit_intercept=fit_intercept, tol=1e-11,
                                       preconditioner=preconditioner)
    scale = max(1.0, float(np.abs(c1).max()))
    np.testing.assert_allclose(c2, c1, atol=1e-7 * scale)
    np.testing.assert_allclose(b2, b1, atol=1e-7 * scale)
    np.testing.assert_allclose(c3, c1, atol=1e-7 * scale)
    np.testing.assert_allclose(b3, b1, atol=1e-7 * scale)
    # and the ridge objective's optimality: the gradient of the centred problem vanishes
    P = ccg.MatrixOperator(np, Z)
    resid = Y - Z @ c2.T - b2
    sw = np.ones(n) if s is None else s
    grad = -2 * (Z.T @ (sw[:, None] * resid)) + 2 * 0.3 * c2.T
    assert np.abs(grad).max() <= 1e-6 * max(1.0, np.abs(Z.T @ (sw[:, None] * Y)).max())
    assert P.shape == Z.shape and info["converged"].all()


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("preconditioner, structured", [("jacobi", True), ("jacobi", False),
                                                         (None, False)])
def test_cg_step_kernels_emulated(monkeypatch, fit_intercept, weighted, preconditioner,
                                  structured):
    """The CG's CuPy branch (the step kernels rb_cg_q, rb_cg_step, rb_cg_dir, rb_cg_p,
    emulated with their launch checks) against the CPU's solver: k = 11 targets (two
    launches of 8 and 3 each), one target stopping early (a zero column of Y)."""
    fake = _FakeCupy()
    monkeypatch.setattr(_ops, "_kernel", _emulated)
    rng = np.random.default_rng(7)
    n = 700
    X = rng.uniform(size=(n, 3))
    Y = np.c_[[np.sin(3 * X[:, 0] * (t + 1)) + X[:, 1] * t for t in range(11)]].T
    Y[:, 4] = 0.0
    s = rng.uniform(0.2, 3.0, size=n) if weighted else None
    _, Z, cols = _cpu_Z(X, 10, "scale", 5)
    _, layout, _ = _xp_fit(X, 10, "scale", 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c1, b1, it1 = solve_ridge_cg(Z, Y, s, alpha=0.3, fit_intercept=fit_intercept,
                                     tol=1e-10, preconditioner=preconditioner,
                                     columns=cols if structured else None)
        c2, b2, it2, info = ccg.solve_ridge(fake, layout, Y, s, alpha=0.3,
                                            fit_intercept=fit_intercept, tol=1e-10,
                                            preconditioner=preconditioner,
                                            structured=structured)
    np.testing.assert_allclose(c2, c1, atol=1e-7)
    np.testing.assert_allclose(b2, b1, atol=1e-7)
    assert info["converged"].all() and it2[4] == 0 and it2.max() > 3
    # (at tol 1e-10 rounding moves the counts by a few iterations, as it does between
    # the numpy twin and the CPU)
    assert np.abs(np.asarray(it2) - np.asarray(it1)).max() <= 0.1 * it1.max()


# ------------------------------------------------------------------------------------------
# The device-side stopping decision (solve_ridge's default host_lag=1: rb_cg_p keeps the
# active mask, the host reads it one iteration late) against the host's own decision after
# every iteration (host_lag=0, the synchronous loop): the same iterates, bit for bit.
def _bits(a):
    a = np.asarray(a)
    return a.dtype.str, a.shape, a.tobytes()


def _assert_same_solve(out0, out1):
    c0, b0, it0, info0 = out0
    c1, b1, it1, info1 = out1
    assert _bits(c1) == _bits(c0) and _bits(b1) == _bits(b0) and _bits(it1) == _bits(it0)
    assert set(info1) == set(info0)
    for key in info0:
        assert _bits(info1[key]) == _bits(info0[key]), key


def _xp_for(monkeypatch, emulated):
    """numpy, or with ``emulated`` the CuPy branch on numpy (_FakeCupy, the kernels by
    their emulations)."""
    if not emulated:
        return np
    monkeypatch.setattr(_ops, "_kernel", _emulated)
    return _FakeCupy()


def _both_lags(xp, op, Y, s, **kw):
    """solve_ridge with host_lag 0 and 1: the results and the ConvergenceWarnings of each."""
    outs = []
    for lag in (0, 1):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = ccg.solve_ridge(xp, op, Y, s, host_lag=lag, **kw)
        conv = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
        outs.append((out, conv))
    (out0, conv0), (out1, conv1) = outs
    _assert_same_solve(out0, out1)
    assert conv1 == conv0
    return out1, conv1


def _staggered_targets(X, rng):
    """Targets that stop at very different iterations: smooth and rough, scales from 1e-3
    to 1e6, a zero target (no iteration) and, with an intercept, a constant one."""
    n = X.shape[0]
    return np.c_[np.sin(5 * X[:, 0]), X[:, 1] * 100.0, rng.normal(size=n) * 1e-3,
                 np.zeros(n), 1e6 * X[:, 0], np.full(n, 7.0),
                 np.sign(X[:, 2] - 0.5) * np.sin(40 * X[:, 0] * X[:, 1])]


@pytest.mark.parametrize("emulated", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("preconditioner, structured", [("jacobi", True), ("jacobi", False),
                                                         (None, False)])
def test_device_stopping_equals_host_loop(monkeypatch, emulated, fit_intercept, weighted,
                                          preconditioner, structured):
    """k = 7 targets stopping at different iterations (numpy twins, and the CuPy branch with
    the emulated kernels: one launch of 8 targets' kernel), on a GridLayout and on a
    sparse Z: host_lag=1 (the device's mask) equals host_lag=0 (the host's) bit for bit
    in coef, intercept, n_iter and info."""
    xp = _xp_for(monkeypatch, emulated)
    rng = np.random.default_rng(11)
    n = 500
    X = rng.uniform(size=(n, 3))
    Y = _staggered_targets(X, rng)
    s = rng.uniform(0.2, 3.0, size=n) if weighted else None
    _, Z, _ = _cpu_Z(X, 8, "scale", 3)
    _, layout, _ = _xp_fit(X, 8, "scale", 3)
    op = layout if structured else ccg.MatrixOperator(np, Z)
    kw = dict(alpha=0.3, fit_intercept=fit_intercept, tol=1e-9,
              preconditioner=preconditioner, structured=structured)
    (coef, intercept, n_iter, info), conv = _both_lags(xp, op, Y, s, **kw)
    assert n_iter[3] == 0
    if weighted and fit_intercept:
        # the constant target less its weighted mean: rounding noise, which the CG cannot
        # reduce 1e9-fold (it stops by breakdown or max_iter, in both loops alike)
        assert np.delete(info["converged"], 5).all() and len(conv) <= 1
    else:
        assert info["converged"].all() and not conv
        assert (n_iter[5] == 0) == fit_intercept
    assert len(set(n_iter[n_iter > 0].tolist())) >= 3   # stops at 3 or more iterations


@pytest.mark.parametrize("emulated", [False, True])
def test_device_stopping_breakdown(monkeypatch, emulated):
    """Indefinite normal equations (some negative weights, passed to solve_ridge
    unvalidated): targets break down (pq <= 0) at different iterations; the device's mask
    stops each at the same iteration as the host's, with the same breakdown flags."""
    xp = _xp_for(monkeypatch, emulated)
    rng = np.random.default_rng(1)
    n = 400
    X = rng.uniform(size=(n, 3))
    Y = np.c_[np.sin(5 * X[:, 0]), X[:, 1] * 100.0, rng.normal(size=n) * 1e-3, np.zeros(n),
              X[:, 0] * 1e6]
    s = rng.uniform(0.5, 1.0, size=n)
    s[rng.choice(n, 40, replace=False)] *= -0.9
    _, layout, _ = _xp_fit(X, 8, "scale", 1)
    (coef, intercept, n_iter, info), conv = _both_lags(
        xp, layout, Y, s, alpha=0.1, tol=1e-10, structured=True)
    stopped = info["stop"] == "breakdown"
    assert stopped.sum() >= 2 and info["stop"][3] == "tol" and n_iter[3] == 0
    assert len(set(n_iter[stopped].tolist())) >= 2      # at different iterations
    assert len(conv) == 1 and "search direction vanished" in conv[0]   # the CPU's text


@pytest.mark.parametrize("emulated", [False, True])
@pytest.mark.parametrize("max_iter", [0, 1, 2, 5])
def test_device_stopping_max_iter(monkeypatch, emulated, max_iter):
    """max_iter reached: no target runs more than max_iter iterations, the same
    ConvergenceWarning, the same results as the host's loop; 11 targets (two launches of
    the step kernels), one zero target."""
    xp = _xp_for(monkeypatch, emulated)
    rng = np.random.default_rng(4)
    n = 300
    X = rng.uniform(size=(n, 3))
    Y = np.c_[_staggered_targets(X, rng), rng.normal(size=(n, 4))]
    _, layout, _ = _xp_fit(X, 6, "scale", 2)
    (coef, intercept, n_iter, info), conv = _both_lags(
        xp, layout, Y, None, alpha=0.5, tol=1e-12, max_iter=max_iter, structured=True)
    assert n_iter.max() == max_iter and n_iter[3] == 0 and info["stop"][3] == "tol"
    assert (info["stop"] == "max_iter").sum() == Y.shape[1] - 2   # the zero, constant ones
    assert len(conv) == 1 and f"did not converge in max_iter={max_iter} iterations" in conv[0]
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        ccg.solve_ridge(xp, layout, Y, None, alpha=0.5, tol=1e-12, max_iter=max_iter,
                        structured=True)


def test_device_stopping_one_extra_iteration(monkeypatch):
    """The host reads the device's mask one iteration late: after the iteration that stops
    the last target it has queued at most one more (with every target inactive, changing
    nothing), and none past max_iter. Counted as rb_cg_p launches (two per iteration for
    11 targets) on the emulated kernels."""
    fake = _FakeCupy()
    launches = []

    def counting(name):
        f = _emulated(name)
        if name != "rb_cg_p":
            return f

        def g(grid, block, args):
            launches.append(int(args[9]))    # k0
            f(grid, block, args)
        return g

    monkeypatch.setattr(_ops, "_kernel", counting)
    rng = np.random.default_rng(4)
    n = 300
    X = rng.uniform(size=(n, 3))
    Y = np.c_[_staggered_targets(X, rng), rng.normal(size=(n, 4))]
    _, layout, _ = _xp_fit(X, 6, "scale", 2)
    for max_iter, lag in [(None, 0), (None, 1), (7, 0), (7, 1)]:
        launches.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, _, n_iter, _ = ccg.solve_ridge(fake, layout, Y, None, alpha=0.5, tol=1e-8,
                                              max_iter=max_iter, structured=True,
                                              host_lag=lag)
        assert len(launches) % 2 == 0 and set(launches) == {0, 8}
        queued = len(launches) // 2
        if max_iter is None:
            assert queued == n_iter.max() + lag
        else:
            assert n_iter.max() == max_iter and queued == max_iter
    # no target active at all: the first iteration runs the device's first mask, which the
    # host reads after queueing it (the set-up's one read comes before b is known): that
    # iteration changes nothing, and it is the only one
    for lag in (0, 1):
        launches.clear()
        _, _, n_iter, info = ccg.solve_ridge(fake, layout, np.zeros((n, 3)), None, alpha=0.5,
                                             structured=True, host_lag=lag)
        assert launches == [0] and not n_iter.any() and info["converged"].all()


def test_device_stopping_verbose(capsys):
    """verbose >= 2 prints every iteration's largest relative residual, read one iteration
    late: the same lines as the host's loop."""
    rng = np.random.default_rng(2)
    n = 300
    X = rng.uniform(size=(n, 3))
    Y = _staggered_targets(X, rng)
    _, layout, _ = _xp_fit(X, 6, "scale", 2)
    printed = []
    for lag in (0, 1):
        for max_iter in (None, 4):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _, _, n_iter, _ = ccg.solve_ridge(np, layout, Y, None, alpha=0.5, tol=1e-8,
                                                  max_iter=max_iter, structured=True,
                                                  verbose=2, host_lag=lag)
            lines = capsys.readouterr().out.splitlines()
            assert len(lines) == n_iter.max()
            assert lines[-1].startswith(f"[RidgeCG cuda] iteration {n_iter.max()}: ")
            printed.append(lines)
    assert printed[2] == printed[0] and printed[3] == printed[1]


# ------------------------------------------------------------------------------------------
# solve_ridge's set-up (issue 32): one host read before the first iteration is queued (the
# rescaling's scalars, gathered into one copy), one Z^T pass on a GridLayout (Z^T [s, s Yc]),
# the first mask and the thresholds on the device.
@pytest.mark.parametrize("emulated", [False, True])
def test_layout_tdot_sums_columns_independently(monkeypatch, emulated):
    """GridLayout.tdot of stacked columns gives each column the bits of that column's own
    product (solve_ridge's one Z^T pass of [s, s Yc] relies on it): the numpy twins and the
    emulated kernels, 2 to 12 columns (one or two launches of 8), columns of many sizes and
    columns cut into several pieces."""
    xp = _xp_for(monkeypatch, emulated)
    if emulated:
        monkeypatch.setattr(_ops, "last_async", lambda xp_, a: _ops._Ready(a[-1]))
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(6000, 2))
    for R, sigma in ((5, 0.01), (2, 50.0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            layout = cb.fit_layout(RandomBinning(n_grids=R, sigma=sigma, random_state=2), X,
                                   xp)
        for m in (2, 8, 9, 12):
            U = rng.normal(size=(6000, m)) * 10.0 ** rng.integers(-8, 9, size=m)
            whole = layout.tdot(U)
            for j in range(m):
                one = layout.tdot(np.ascontiguousarray(U[:, j:j + 1]))
                assert _bits(np.ascontiguousarray(whole[:, j:j + 1])) == _bits(one), (R, m, j)
            rest = layout.tdot(np.ascontiguousarray(U[:, 1:]))
            assert _bits(np.ascontiguousarray(whole[:, 1:])) == _bits(rest)


def test_grid_projection_arrays_from_device_pointers():
    """GridProjection computes its device arrays from the layout's device grid pointers:
    the grid of every column and 1 / the grid sizes as the host computes them (np.repeat,
    the same division), empty grids included; inv_total on the host."""
    gp = np.array([0, 3, 3, 7, 8, 8, 12], dtype=np.int64)
    sizes = np.diff(gp)
    inv = np.where(sizes > 0, 1.0 / np.maximum(sizes, 1), 0.0)
    for xp in (np, _FakeCupy()):
        for fit_intercept in (True, False):
            proj = ccg.GridProjection(xp, gp, gp.copy(), fit_intercept)
            assert proj.grid_of_col.dtype == np.int64 and proj.grid_of_col.flags.c_contiguous
            np.testing.assert_array_equal(proj.grid_of_col, np.repeat(np.arange(6), sizes))
            assert _bits(proj.inv_sizes) == _bits(inv) and _bits(proj.ptr) == _bits(gp)
            assert proj.inv_total == 1.0 / inv.sum() and proj.fit_intercept == fit_intercept


def _device_xp(events):
    """The CuPy branch on numpy (_FakeCupy) with arrays that stand for device arrays: the
    arrays it creates, and every array computed from one, are of a numpy subclass whose
    conversions to host values (float, int, bool, item, tolist: a wait for the device on a
    GPU) append "read" to ``events``, except inside a kernel (the emulations' own numpy
    code runs on the device). Returns (xp, to_device: an array as such an array, kernel:
    the emulated kernels for _ops._kernel)."""
    in_kernel = [0]

    class Device(np.ndarray):
        def _host(self):
            if not in_kernel[0]:
                events.append("read")
            return self.view(np.ndarray)

        def __float__(self):
            return float(self._host())

        def __int__(self):
            return int(self._host())

        def __bool__(self):
            return bool(self._host())

        def item(self, *a):
            return self._host().item(*a)

        def tolist(self):
            return self._host().tolist()

    made = {"ones", "zeros", "empty", "full", "arange", "asarray", "array",
            "ascontiguousarray"}

    class DeviceCupy(_FakeCupy):
        def __getattr__(self, name):
            f = getattr(np, name)
            if name not in made:
                return f
            return lambda *a, **kw: f(*a, **kw).view(Device)

    def kernel(name):
        f = _emulated(name)

        def launch(grid, block, args):
            in_kernel[0] += 1
            try:
                f(grid, block, args)
            finally:
                in_kernel[0] -= 1
        return launch

    return (DeviceCupy(), lambda a: None if a is None else np.array(a).view(Device), kernel)


def _count_setup(monkeypatch, events, op, run):
    """The events of ``run()`` up to the first iteration's first product (op.dot: the set-up
    makes none): "read" for every wait for the device (an _ops.to_host, except the numpy
    pass-through inside _ops.on_device, or a HostCopies.get), "copy" for every
    _ops.on_device, "tdot" for every op.tdot. to_host returns host (plain numpy) copies."""
    inside = [0]
    real_to_host, real_on_device, real_get = _ops.to_host, _ops.on_device, _ops.HostCopies.get

    def to_host(a):
        if not inside[0]:
            events.append("read")
            return np.array(real_to_host(a))
        return real_to_host(a)

    def on_device(*a, **kw):
        events.append("copy")
        inside[0] += 1
        try:
            return real_on_device(*a, **kw)
        finally:
            inside[0] -= 1

    def get(self, slot):
        events.append("read")
        return real_get(self, slot)

    def spy(name, f):
        def g(*a, **kw):
            events.append(name)
            return f(*a, **kw)
        return g

    monkeypatch.setattr(_ops, "to_host", to_host)
    monkeypatch.setattr(_ops, "on_device", on_device)
    monkeypatch.setattr(_ops.HostCopies, "get", get)
    monkeypatch.setattr(op, "tdot", spy("tdot", op.tdot))
    monkeypatch.setattr(op, "dot", spy("iteration", op.dot))
    if hasattr(op, "dot_into"):   # a GridLayout's iterations write into their buffers
        monkeypatch.setattr(op, "dot_into", spy("iteration", op.dot_into))
    out = run()
    return events[:events.index("iteration")], out


@pytest.mark.parametrize("emulated", [False, True])
@pytest.mark.parametrize("lag", [0, 1])
@pytest.mark.parametrize("kind, weighted, fit_intercept, y_scale, w_scale", [
    ("layout", False, True, 1.0, 1.0), ("layout", True, False, 1.0, 1.0),
    ("projected", True, True, 1.0, 1.0), ("projected", False, True, 1e40, 1.0),
    ("projected", True, False, 1e-40, 1e35), ("sparse", True, True, 1.0, 1e-35)])
def test_setup_reads_the_device_once(monkeypatch, emulated, lag, kind, weighted,
                                     fit_intercept, y_scale, w_scale):
    """Before solve_ridge queues its first iteration it waits for the device once (one
    read: max|Y|, max|s| and a MatrixOperator's max|Z| in one copy; on the emulated CuPy
    branch no float / bool / int of a device array either), copies nothing from the host
    but alpha, and on a GridLayout makes one Z^T pass (Z^T [s, s Yc]: the column sums and
    b together); with rescaled targets or weights too. The solution is the CPU solver's,
    and host_lag 0 and 1 agree bit for bit."""
    rng = np.random.default_rng(6)
    n = 300
    X = rng.uniform(size=(n, 3))
    Y = np.c_[np.sin(5 * X[:, 0]), X[:, 1] * 100.0, np.zeros(n)] * y_scale
    s = rng.uniform(0.2, 3.0, size=n) * w_scale if weighted else None
    _, Z, cols = _cpu_Z(X, 6, "scale", 2)
    _, layout, _ = _xp_fit(X, 6, "scale", 2)
    op = ccg.MatrixOperator(np, Z) if kind == "sparse" else layout
    structured = kind == "projected"
    kw = dict(alpha=0.3, fit_intercept=fit_intercept, tol=1e-10, structured=structured)
    events = []
    if emulated:
        xp, to_device, kernel = _device_xp(events)
        monkeypatch.setattr(_ops, "_kernel", kernel)
    else:
        xp, to_device = np, lambda a: a
    before, (coef, intercept, n_iter, info) = _count_setup(
        monkeypatch, events, op,
        lambda: ccg.solve_ridge(xp, op, to_device(Y), to_device(s), host_lag=lag, **kw))
    assert before.count("read") == 1 and before.count("copy") <= 1
    if kind != "sparse":
        assert before.count("tdot") == 1
    monkeypatch.undo()
    _both_lags(_xp_for(monkeypatch, emulated), op, Y, s, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c1, b1, _ = solve_ridge_cg(Z, Y, s, alpha=0.3, fit_intercept=fit_intercept, tol=1e-10,
                                   columns=cols if structured else None)
    scale = max(1.0, float(np.abs(c1).max()), float(np.abs(b1).max()))
    np.testing.assert_allclose(coef, c1, atol=1e-7 * scale, rtol=0)
    np.testing.assert_allclose(intercept, b1, atol=1e-7 * scale, rtol=0)
    assert info["converged"].all() and n_iter[2] == 0


def _setup_columns(rng, D=40, k=3):
    """ZtU = Z^T [s, s Yc] of made-up columns (colsum = value times the weights of the
    column's rows, at most value S): constant columns (every row in them), empty ones,
    ordinary ones."""
    S = np.float64(37.25)
    value = 0.125
    colsum = value * S * rng.uniform(0.01, 0.9, size=D)
    colsum[:5] = value * S                  # every row: the column is constant
    colsum[5:8] = 0.0                       # no row
    ZtU = np.c_[colsum, rng.normal(size=(D, k))]
    ZtU[5:8, 1:] = 0.0
    return ZtU, value, S


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("use_diag", [True, False])
def test_cg_setup_columns(fit_intercept, use_diag):
    """The set-up's column statistics (_ops.cg_setup on a GridLayout's Z^T [s, s Yc], twin
    cg_columns): a column every row falls in is constant with an intercept (keep 0, its
    b 0, its Jacobi entry 1 / alpha), an empty one is not; b centred by zbar csY; the
    Jacobi inverse 1 / (colsq - S zbar^2 + alpha), 1 where that is not positive."""
    rng = np.random.default_rng(3)
    ZtU, value, S = _setup_columns(rng)
    k = ZtU.shape[1] - 1
    csY = rng.normal(size=k) if fit_intercept else None
    alpha = np.array([0.5, 2.0, -1e9])      # the last: diag + alpha <= 0 everywhere
    tiny = 1000 * np.finfo(np.float64).eps
    zbar, keep, B, minv = _ops.cg_setup(np, ZtU, value, S, tiny, csY, alpha, use_diag)
    colsum = ZtU[:, 0]
    colsq = colsum * value
    want_keep = np.ones(40)
    if fit_intercept:
        want_keep[:5] = 0.0
        np.testing.assert_array_equal(zbar, colsum / S)
        want_B = (ZtU[:, 1:] - (colsum / S)[:, None] * csY[None, :]) * want_keep[:, None]
        diag = np.maximum(colsq - S * (colsum / S) ** 2, 0.0) * want_keep
    else:
        assert zbar is None
        want_B = ZtU[:, 1:]
        diag = colsq
    np.testing.assert_array_equal(keep, want_keep)
    np.testing.assert_allclose(B, want_B, rtol=1e-15, atol=0)
    assert B.flags.c_contiguous and B.dtype == np.float64
    if use_diag:
        dd = diag[:, None] + alpha[None, :]
        np.testing.assert_allclose(minv[:, :2], 1.0 / dd[:, :2], rtol=1e-15)
        np.testing.assert_array_equal(minv[:, 2], 1.0)
        if fit_intercept:
            np.testing.assert_array_equal(minv[:5, :2], np.tile(1.0 / alpha[:2], (5, 1)))
    else:
        assert minv is None
    # the same from the generic array code (a MatrixOperator's path)
    zc, kc, Bc, mc = _ops.cg_columns(np, colsum, colsq, ZtU[:, 1:], S, tiny, csY, alpha,
                                     use_diag)
    np.testing.assert_array_equal(kc, keep)
    np.testing.assert_array_equal(Bc, B)
    if use_diag:
        np.testing.assert_array_equal(mc, minv)


def test_setup_range_check_of_a_matrix():
    """A MatrixOperator's max|Z| rides in the set-up's one read: above 2**100 the same
    error, before any solve."""
    Z = np.eye(4)
    Z[1, 1] = 2.0 ** 101
    with pytest.raises(ValueError, match="above 2\\*\\*100"):
        ccg.solve_ridge(np, ccg.MatrixOperator(np, Z), np.ones((4, 1)))
    with pytest.raises(ValueError, match="non-finite"):
        ccg.solve_ridge(np, ccg.MatrixOperator(np, np.eye(4)), np.full((4, 1), np.inf))
    assert ccg.MatrixOperator(np, sp.csr_matrix((3, 2))).max_abs() == 0.0


def test_cg_step_and_p_freeze_inactive_targets():
    """The twins of rb_cg_step and rb_cg_p: an inactive target's X, Rr, P and rz are not
    written, whatever P and Q hold (NaN here); cg_p's decision: an active target goes on
    unless rn <= thresh or pq <= 0 (breakdown, counted), and counts its iterations."""
    D, k = 5, 4
    rng = np.random.default_rng(0)
    P = rng.normal(size=(D, k))
    Q = P * 2.0
    P[:, 1] = np.nan
    Q[:, 1] = np.nan
    Q[:, 3] = -P[:, 3]                 # pq < 0: breakdown of target 3
    X = rng.normal(size=(D, k))
    Rr = rng.normal(size=(D, k))
    X0, Rr0, P0 = X.copy(), Rr.copy(), P.copy()
    act = np.array([1, 0, 1, 1], dtype=np.int32)
    rz = np.array([2.0, 3.0, 4.0, 5.0])
    part_pq = np.zeros((1, k))
    part_pq[0] = (P * Q).sum(axis=0)
    Zr = np.empty((D, k))
    part_rr = np.empty((1, k))
    summary = np.array([[9.0, 8.0, 7.0, 6.0], [0.0, 0.0, 0.0, 0.0]])
    _ops.cg_step(np, part_pq, rz, act, P, Q, X, Rr, None, Zr, part_rr, summary)
    assert _bits(X[:, 1]) == _bits(X0[:, 1]) and _bits(Rr[:, 1]) == _bits(Rr0[:, 1])
    np.testing.assert_array_equal(X[:, 3], X0[:, 3])     # breakdown: a step of 0
    assert not np.array_equal(X[:, 0], X0[:, 0])
    np.testing.assert_array_equal(summary[1], [1.0, 0.0, 1.0, 0.0])
    rr = (Rr * Rr).sum(axis=0)
    thresh = np.array([np.sqrt(rr[0]) * 2.0, 0.0, np.sqrt(rr[2]) / 2.0, 1e9])
    part_rz = np.ones((1, k))
    rz_out = np.empty(k)
    act_out = np.full(k, 7, dtype=np.int32)
    counts = np.array([[3, 3, 3, 3], [0, 0, 0, 0]], dtype=np.int32)
    _ops.cg_p(np, part_rz, part_rr, rz, act, Zr, P, rz_out, summary, thresh, act_out, counts)
    assert _bits(P[:, 1]) == _bits(P0[:, 1]) and rz_out[1] == rz[1]
    np.testing.assert_array_equal(rz_out[[0, 2, 3]], 1.0)
    np.testing.assert_array_equal(act_out, [0, 0, 1, 0])   # converged, inactive, on, broke
    np.testing.assert_array_equal(counts, [[4, 3, 4, 4], [0, 0, 0, 1]])
    np.testing.assert_array_equal(summary[0], [np.sqrt(rr[0]), 8.0, np.sqrt(rr[2]),
                                               np.sqrt(rr[3])])


def test_host_copies_numpy_copies_at_once():
    """_ops.HostCopies on numpy arrays: put copies at once (the next iteration overwrites
    the device array before the host reads the copy)."""
    reads = _ops.HostCopies(np, 2)
    a = np.array([1, 0, 1], dtype=np.int32)
    b = np.array([0.5, 2.0])
    reads.put(1, a, b)
    a[:] = 0
    got = reads.get(1)
    np.testing.assert_array_equal(got[0], [1, 0, 1])
    np.testing.assert_array_equal(got[1], [0.5, 2.0])
    reads.wait()
    with pytest.raises(ValueError, match="host_lag"):
        ccg.solve_ridge(np, ccg.MatrixOperator(np, np.eye(3)), np.ones((3, 1)), host_lag=2)


def test_layout_products_equal_sparse_products():
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(5000, 2))
    _, Z, _ = _cpu_Z(X, 5, 0.01, 2)   # fine grids: columns of many sizes, some cut in pieces
    _, layout, _ = _xp_fit(X, 5, 0.01, 2)
    W = rng.normal(size=(Z.shape[1], 3))
    U = rng.normal(size=(Z.shape[0], 3))
    np.testing.assert_allclose(layout.dot(W), Z @ W, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(layout.tdot(U), Z.T @ U, rtol=1e-12, atol=1e-11)
    X2 = rng.uniform(size=(20000, 1))
    _, Z2, _ = _cpu_Z(X2, 2, 50.0, 0)     # one huge bin per grid: many pieces in a column
    _, layout2, _ = _xp_fit(X2, 2, 50.0, 0)
    assert layout2.piece_start.shape[0] > layout2.n_columns
    U2 = rng.normal(size=(20000, 1))
    np.testing.assert_allclose(layout2.tdot(U2), Z2.T @ U2, rtol=1e-10)
    # the warps' order of the pieces: a permutation, by first row
    for lay in (layout, layout2):
        order = lay.piece_order
        np.testing.assert_array_equal(np.sort(order), np.arange(lay.piece_start.shape[0]))
        first = lay.rows[lay.piece_start[order]]
        assert np.all(np.diff(first) >= 0) and lay.piece_order.dtype == np.int64


def test_errors_match_cpu():
    X = np.array([[0.0, 1.0], [np.nan, 2.0]])
    with pytest.raises(ValueError) as cpu_err:
        RandomBinning(n_grids=2, random_state=0).fit(X)
    with pytest.raises(ValueError) as xp_err:
        cb.fit_layout(RandomBinning(n_grids=2, random_state=0), X, np)
    assert str(xp_err.value) == str(cpu_err.value)
    X = np.array([[0.0, 1.0], [1e300, 2.0]])
    with pytest.raises(ValueError) as cpu_err:
        RandomBinning(n_grids=2, sigma=1e-10, random_state=0).fit(X)
    with pytest.raises(ValueError) as xp_err:
        cb.fit_layout(RandomBinning(n_grids=2, sigma=1e-10, random_state=0), X, np)
    assert str(xp_err.value) == str(cpu_err.value)
    with pytest.raises(ValueError, match="exact mode only"):
        cb.fit_layout(RandomBinning(n_features=64), np.zeros((3, 2)), np)
    with pytest.raises(ValueError, match="sparse"):
        cb.fit_layout(RandomBinning(), sp.csr_matrix(np.eye(3)), np)


def test_cuda_without_cupy_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy fails here
    with pytest.raises(ImportError, match=r"rbcd\[cuda\]"):
        RandomBinning(device="cuda").fit(np.zeros((4, 2)))
    with pytest.raises(ImportError, match=r"rbcd\[cuda\]"):
        RBRegressor(device="cuda").fit(np.zeros((4, 2)), np.zeros(4))
    with pytest.raises(ImportError, match=r"rbcd\[cuda\]"):
        RidgeCG(device="cuda").fit(np.eye(4), np.zeros(4))


def test_estimators_on_numpy_device(numpy_device):
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(1200, 4))
    y = np.sin(5 * X[:, 0]) + X[:, 1] * X[:, 2]
    Xt = rng.uniform(-0.1, 1.1, size=(300, 4))
    kw = dict(n_grids=32, random_state=0, tol=1e-10, alpha=None)
    g = RBRegressor(device="cuda", **kw).fit(X, y)
    c = RBRegressor(**kw).fit(X, y)
    assert g.binning_.n_features_out_ == c.binning_.n_features_out_
    pg = g.predict(Xt)
    assert isinstance(pg, np.ndarray) and pg.shape == (300,)
    np.testing.assert_allclose(pg, c.predict(Xt), atol=1e-6)
    back = pickle.loads(pickle.dumps(g))
    np.testing.assert_array_equal(back.predict(Xt), pg)
    cpu = g.to_cpu()
    assert cpu.device == "cpu" and cpu.binning_.device == "cpu" and cpu.solver_.device == "cpu"
    np.testing.assert_allclose(pickle.loads(pickle.dumps(cpu)).predict(Xt), pg, atol=1e-12)
    labels = (X[:, 0] + X[:, 1] > 1).astype(int) + (X[:, 2] > 0.7)
    gc = RBClassifier(device="cuda", **kw).fit(X, labels)
    cc = RBClassifier(**kw).fit(X, labels)
    np.testing.assert_allclose(gc.decision_function(Xt), cc.decision_function(Xt), atol=1e-6)
    np.testing.assert_array_equal(gc.predict(Xt), cc.predict(Xt))
    np.testing.assert_allclose(gc.predict_proba(Xt), cc.predict_proba(Xt), atol=1e-6)
    with pytest.raises(ValueError, match="holdout"):
        RBClassifier(device="cuda", calibration="holdout").fit(X, labels)
    # alpha="auto" (the default): the CPU's choice, from a sample of 1,000 of the 1,200 rows
    ga = RBRegressor(device="cuda", n_grids=32, random_state=0, tol=1e-10).fit(X, y)
    ca = RBRegressor(n_grids=32, random_state=0, tol=1e-10, solver="cg").fit(X, y)
    assert ga.alpha_ == pytest.approx(ca.alpha_, rel=1e-12)
    np.testing.assert_allclose(ga.predict(Xt), ca.predict(Xt), atol=1e-6)
    gca = RBClassifier(device="cuda", n_grids=32, random_state=0, tol=1e-10).fit(X[:500], labels[:500])
    # (the device fits no linear term: linear="auto" adds none there, so the CPU's is off)
    cca = RBClassifier(n_grids=32, random_state=0, tol=1e-10, linear=0).fit(X[:500], labels[:500])
    assert gca.alpha_ == pytest.approx(cca.alpha_, rel=1e-12)
    with pytest.raises(ValueError, match="does not choose alpha='auto'"):
        RidgeCG(device="cuda", alpha="auto").fit(X, y)
    with pytest.raises(ValueError, match="solver must be 'auto' or 'cg'"):
        RBRegressor(device="cuda", solver="cd").fit(X, y)
    # RandomBinning + RidgeCG(Classifier) with the device column structure, or plain Z
    rb = RandomBinning(n_grids=8, random_state=1, device="cuda")
    Z, layout = rb.fit_transform(X, return_columns=True)
    ref = RandomBinning(n_grids=8, random_state=1)
    Zc = ref.fit_transform(X)
    assert (Z != Zc).nnz == 0
    r_dev = RidgeCG(alpha=1.0, tol=1e-11, device="cuda").fit(Z, y, columns=layout)
    r_plain = RidgeCG(alpha=1.0, tol=1e-11, device="cuda").fit(Z, y)
    r_cpu = RidgeCG(alpha=1.0, tol=1e-11).fit(Zc, y)
    np.testing.assert_allclose(r_dev.coef_, r_cpu.coef_, atol=1e-8)
    np.testing.assert_allclose(r_plain.coef_, r_cpu.coef_, atol=1e-8)
    np.testing.assert_allclose(r_dev.predict(rb.transform(Xt)), r_cpu.predict(ref.transform(Xt)),
                               atol=1e-8)
    k_dev = RidgeCGClassifier(alpha=1.0, tol=1e-11, device="cuda").fit(Z, labels, columns=layout)
    k_cpu = RidgeCGClassifier(alpha=1.0, tol=1e-11).fit(Zc, labels)
    np.testing.assert_allclose(k_dev.coef_, k_cpu.coef_, atol=1e-8)
    assert k_dev.to_cpu().device == "cpu"


# ------------------------------------------------------------------------------------------
# The CuPy branches without a GPU: an array module that is not numpy (so every "cupy" branch
# runs) and the four CUDA kernels emulated from their source's contract, each launch's
# argument types, shapes and grid size checked as CUDA would need them.
class _FakeCupy:
    __name__ = "fakecupy"

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def argsort(a):  # cupy's argsort is stable
        return np.argsort(a, kind="stable")


def _check_args(args, spec):
    assert len(args) == len(spec)
    for a, s in zip(args, spec):
        if isinstance(s, str):  # a pointer: a C-contiguous array of that dtype
            assert isinstance(a, np.ndarray) and a.dtype == np.dtype(s), (a, s)
            assert a.flags.c_contiguous
        else:                   # a scalar of exactly that numpy type
            assert type(a) is s, (type(a), s)


def _emulated(name):
    def rb_grid_keys(grid, block, args):
        _check_args(args, ["float64", np.int64, np.int32, "float64", "float64",
                           "int64", "int64", "int64", np.int32, np.int32, "uint64", "uint8"])
        X, n, d, u, w, lo, hi, shift, row_bits, mode, keys, inside = args
        assert grid[0] * block[0] >= n and X.shape == (n, d) and u.shape == (d,)
        if mode == 1:
            keys[:] = _ops.grid_keys(np, X, u, w, lo, hi, shift, int(row_bits), True)
        else:
            k, ins = _ops.grid_keys(np, X, u, w, lo, hi, shift, 0, False)
            keys[:], inside[:] = k, ins

    def rb_zdot(grid, block, args):
        _check_args(args, ["int32", np.int64, np.int32, "int64", "float64", np.int32,
                           np.int32, np.int32, np.float64, "float64"])
        labels, n, R, gp, W, k, k0, kc, value, out = args
        assert grid[0] * block[0] >= n and labels.shape == (R, n) and 1 <= kc <= 8
        assert W.shape[1] == k and out.shape == (n, k)
        out[:, k0:k0 + kc] = _ops.zdot(np, labels, gp, W[:, k0:k0 + kc], float(value))

    def rb_piece_sums(grid, block, args):
        _check_args(args, ["int32", "int64", "int64", "int64", np.int64, "float64", np.int32,
                           np.int32, np.int32, "float64"])
        rows, ps, pe, order, n_pieces, U, k, k0, kc, partial = args
        assert grid[0] * block[0] >= 32 * n_pieces and block[0] % 32 == 0
        np.testing.assert_array_equal(np.sort(order), np.arange(n_pieces))
        assert ps.shape == pe.shape == (n_pieces,) and partial.shape == (n_pieces, k)
        partial[:, k0:k0 + kc] = _ops.piece_sums(np, rows, ps, pe, U[:, k0:k0 + kc])

    def rb_segment_sums(grid, block, args):
        _check_args(args, ["float64", "int64", np.int64, np.int32, np.float64, "float64"])
        V, ptr, n_seg, k, scale, out = args
        assert grid[0] * block[0] >= n_seg and ptr.shape == (n_seg + 1,) and V.shape[1] == k
        out[:] = _ops.segment_sums(np, V, ptr, float(scale))

    def rb_seg_flags(grid, block, args):
        _check_args(args, ["uint64", np.int64, np.int32, "int32"])
        s, n, row_bits, flags = args
        assert grid[0] * block[0] >= n and s.shape == flags.shape == (n,)
        flags[:] = _ops.seg_flags(np, s, int(row_bits))

    def rb_seg_starts(grid, block, args):
        _check_args(args, ["int32", "int32", np.int64, "int64"])
        flags, seg, n, start = args
        assert grid[0] * block[0] >= n and flags.shape == seg.shape == (n,)
        assert start.shape == (int(seg[-1]) + 1,)
        start[:] = _ops.seg_starts(np, flags, seg, start.shape[0])

    def rb_column_extremes(grid, block, args):
        _check_args(args, ["float64", np.int64, np.int32, np.int64, "float64", "float64",
                           "int32"])
        X, n, d, per, bmin, bmax, bad = args
        n_blocks = grid[0]
        assert block[0] <= 1024 and X.shape == (n, d) and bmin.shape == bmax.shape == (n_blocks, d)
        assert n_blocks * per >= n
        for b in range(n_blocks):
            blk = X[b * per:(b + 1) * per]
            bmin[b], bmax[b] = np.inf, -np.inf
            if blk.shape[0]:
                with np.errstate(invalid="ignore"):
                    bmin[b] = np.fmin(bmin[b], np.fmin.reduce(blk, axis=0))
                    bmax[b] = np.fmax(bmax[b], np.fmax.reduce(blk, axis=0))
                if not np.isfinite(blk).all():
                    bad[0] = 1

    def rb_batch_keys(grid, block, args):
        _check_args(args, ["float64", np.int64, np.int32, np.int32, "float64", "float64",
                           "int64", "int64", np.int32, np.int32, "uint64"])
        X, n, d, G, u, w, lo, shift, row_bits, tag_shift, words = args
        assert grid[0] * block[0] >= n and X.shape == (n, d) and words.shape == (G, n)
        assert u.shape == w.shape == lo.shape == shift.shape == (G, d)
        assert tag_shift == -1 or int(G - 1).bit_length() + int(tag_shift) <= 64
        key_bits = None if tag_shift < 0 else int(tag_shift) - int(row_bits)
        words[:] = _ops.batch_keys(np, X, u, w, lo, shift, int(row_bits), key_bits)

    def rb_batch_keys32(grid, block, args):
        _check_args(args, ["float64", np.int64, np.int32, np.int32, "float64", "float64",
                           "int64", "int64", np.int32, "int64", "uint32"])
        X, n, d, G, u, w, lo, shift, row_bits, base, words = args
        assert grid[0] * block[0] >= n and X.shape == (n, d) and words.shape == (G, n)
        assert u.shape == w.shape == lo.shape == shift.shape == (G, d)
        # a batch's running key ranges, or zeros (grids sorted one by one, _key_group)
        assert base.shape == (G,) and base[0] == 0
        assert np.all(np.diff(base) > 0) or not base.any()
        wide = _ops.batch_keys(np, X, u, w, lo, shift, int(row_bits), None)
        top = wide >> np.uint64(row_bits)           # every word must fit 32 bits
        assert int((top + base[:, None].astype(np.uint64)).max()) < 1 << (32 - int(row_bits))
        words[:] = _ops.batch_keys(np, X, u, w, lo, shift, int(row_bits), None, base=base)

    def rb_widen_batch(grid, block, args):
        _check_args(args, ["uint32", np.int64, np.int32, "int64", np.int32, np.int32,
                           "uint64"])
        s, m, G, base, row_bits, key_bits, out = args
        assert grid[0] * block[0] >= m and s.shape == out.shape == (m,) and base.shape == (G,)
        assert np.all(s[1:] > s[:-1])                   # sorted, distinct (rows differ)
        assert int(G - 1).bit_length() + int(key_bits) + int(row_bits) <= 64
        out[:] = _ops.widen_batch(np, s, base, int(row_bits), int(key_bits))

    def rb_seg_heads(grid, block, args):
        _check_args(args, ["uint64", "int64", np.int64, np.int64, np.int64, np.int32,
                           np.int32, "int64", "int64", "uint64", "int64"])
        s, start, n_seg, m, n, row_bits, key_bits, order_key, g, key, length = args
        assert grid[0] * block[0] >= n_seg and start.shape == (n_seg,) and s.shape == (m,)
        assert order_key.shape == g.shape == key.shape == length.shape == (n_seg,)
        assert np.all(np.diff(start) > 0) and start[0] == 0 and m % n == 0
        assert 1 <= int(row_bits) and int(key_bits) + int(row_bits) <= 64
        out = _ops.seg_heads(np, s, start, int(n), int(row_bits), int(key_bits))
        order_key[:], g[:], key[:], length[:] = out

    def rb_seg_order(grid, block, args):
        _check_args(args, ["int64", np.int64, np.int32, "int64", "uint64", "int64", "int64",
                           "int64", "uint64", "int64"])
        order, n_seg, G, g, key, length, rank, counts, keys, seg_off = args
        assert grid[0] * block[0] >= n_seg and seg_off.shape == (G + 1,)
        np.testing.assert_array_equal(np.sort(order), np.arange(n_seg))
        assert np.all(np.diff(g[order]) >= 0)             # grid after grid
        np.testing.assert_array_equal(np.unique(g), np.arange(G))   # every grid present
        rank[:], counts[:], keys[:], seg_off[:] = _ops.seg_order(np, order, g, key, length,
                                                                 int(G))

    def rb_number_batch(grid, block, args):
        _check_args(args, ["uint64", "int32", "int64", "int64", "int64", "int64", "int64",
                           np.int64, np.int64, np.int32, "int32", "int32"])
        s, seg, start, rank, col_ptr, g_of_seg, seg_off, m, n, row_bits, labels, rows = args
        assert grid[0] * block[0] >= m and s.shape == seg.shape == rows.shape == (m,)
        assert labels.shape == (m,) and m % n == 0
        assert start.shape == rank.shape == g_of_seg.shape
        assert col_ptr.shape == (start.shape[0] + 1,) and seg_off.shape == (m // n + 1,)
        _ops.number_batch(np, s, seg, start, rank, col_ptr, g_of_seg, seg_off, int(n),
                          int(row_bits), labels, rows)

    def rb_match_keys(grid, block, args):
        _check_args(args, ["float64", np.int64, np.int32, np.int32, "float64", "float64",
                           "int64", "int64", "int64", "uint8", "uint64", "int32",
                           "int64", "int32"])
        X, m, d, R, u, w, lo, hi, shift, single, skeys, sids, off, labels = args
        assert grid[0] * block[0] >= m and X.shape == (m, d) and labels.shape == (R, m)
        assert u.shape == hi.shape == shift.shape == (R, d) and single.shape == (R,)
        assert off.shape == (R + 1,) and off[-1] == skeys.shape[0] == sids.shape[0]
        for r in range(R):   # each one-word grid's fitted keys sorted, increasing
            seg = skeys[off[r]:off[r + 1]]
            assert np.all(seg[1:] > seg[:-1])
        _ops.match_keys(np, X, u, w, lo, hi, shift, single, skeys, sids, off, labels)

    def rb_cg_setup(grid, block, args):
        (ZtU, D, k, value, S, has_c, tiny, csY, alpha, use_diag, zbar, keep, B,
         minv) = args
        _check_args((ZtU, D, k, value, has_c, tiny, csY, alpha, use_diag, zbar, keep, B,
                     minv), ["float64", np.int64, np.int32, np.float64, np.int32, np.float64,
                             "float64", "float64", np.int32, "float64", "float64",
                             "float64", "float64"])
        assert grid[0] * block[0] >= D and ZtU.shape == (D, k + 1) and B.shape == (D, k)
        assert alpha.shape == (k,) and keep.shape == (D,) and np.ndim(S) == 0
        assert not has_c or (csY.shape == (k,) and zbar.shape == (D,))
        assert not use_diag or minv.shape == (D, k)
        zb, kp, b, mv = _ops.cg_setup(np, ZtU, float(value), S, float(tiny),
                                      csY if has_c else None, alpha, bool(use_diag))
        keep[:], B[:] = kp, b
        if has_c:
            zbar[:] = zb
        if use_diag:
            minv[:] = mv

    def _cg_common(grid, block, D, k, k0, kc, partial):
        assert grid == (_ops.cg_blocks(D),) and block[0] % 32 == 0 and 1 <= kc <= 8
        assert k0 + kc <= k and partial.shape == (grid[0], k)
        return slice(int(k0), int(k0) + int(kc))

    def rb_col_parts(grid, block, args):
        _check_args(args, ["float64", "float64", np.int32, np.int64, np.int32, np.int32,
                           np.int32, "float64"])
        A, w, has_w, m, k, k0, kc, partial = args
        t = _cg_common(grid, block, m, k, k0, kc, partial)
        assert A.shape == (m, k) and (not has_w or w.shape == (m,))
        _ops.col_parts(np, A[:, t], w if has_w else None, partial[:, t])

    def rb_center_rows(grid, block, args):
        _check_args(args, ["float64", "float64", np.int32, np.int32, "float64", np.int32,
                           np.int64, np.int32, np.int32, np.int32])
        T, pc, nb, has_c, s, has_s, n, k, k0, kc = args
        assert grid == (_ops.cg_blocks(n),) and block[0] % 32 == 0 and 1 <= kc <= 8
        assert T.shape == (n, k) and k0 + kc <= k
        assert not has_c or pc.shape == (nb, k)
        assert not has_s or s.shape == (n,)
        t = slice(int(k0), int(k0) + int(kc))
        _ops.center_rows(np, T[:, t], pc[:, t] if has_c else None, s if has_s else None)

    def rb_cg_q(grid, block, args):
        _check_args(args, ["float64", "float64", np.int32, "float64", np.int32, "float64",
                           "float64", "float64", np.int64, np.int32, np.int32, np.int32,
                           "float64"])
        Q, zbar, has, pT, nbT, alpha, P, keep, D, k, k0, kc, partial = args
        t = _cg_common(grid, block, D, k, k0, kc, partial)
        assert Q.shape == P.shape == (D, k) and keep.shape == (D,)
        assert not has or pT.shape == (nbT, k)
        _ops.cg_q(np, Q[:, t], zbar if has else None, pT[:, t] if has else None, alpha[t],
                  P[:, t], keep, partial[:, t])

    def rb_cg_step(grid, block, args):
        _check_args(args, ["float64", np.int32, "float64", "int32", "float64", "float64",
                           "float64", "float64", "float64", np.int32, np.int64, np.int32,
                           np.int32, np.int32, "float64", "float64", "float64"])
        (ppq, nb, rz, act, P, Q, X, Rr, minv, use_minv, D, k, k0, kc, Zr, partial,
         summary) = args
        t = _cg_common(grid, block, D, k, k0, kc, partial)
        assert ppq.shape == (nb, k) and summary.shape == (2, k)
        _ops.cg_step(np, ppq[:, t], rz[t], act[t], P[:, t], Q[:, t], X[:, t], Rr[:, t],
                     minv[:, t] if use_minv else None, Zr[:, t], partial[:, t], summary[:, t])

    def rb_cg_dir(grid, block, args):
        _check_args(args, ["float64", "float64", "float64", "int64", "float64", "float64",
                           np.int32, np.int32, np.float64, np.int64, np.int32, np.int32,
                           np.int32, "float64"])
        Zr, Rr, keep, goc, gsum, inv, R, mode, inv_total, D, k, k0, kc, partial = args
        t = _cg_common(grid, block, D, k, k0, kc, partial)
        proj = None
        if mode:
            assert goc.shape == (D,) and gsum.shape == (R, k) and inv.shape == (R,)
            proj = types.SimpleNamespace(inv_sizes=inv, grid_of_col=goc,
                                         fit_intercept=mode == 1, inv_total=float(inv_total))
        _ops.cg_dir(np, Zr[:, t], Rr[:, t], keep, proj, gsum[:, t] if mode else None,
                    partial[:, t])

    def rb_cg_p(grid, block, args):
        _check_args(args, ["float64", "float64", np.int32, "float64", "int32", "float64",
                           "float64", np.int64, np.int32, np.int32, np.int32, "float64",
                           "float64", "float64", "int32", "int32"])
        (prz, prr, nb, rz, act, Zr, P, D, k, k0, kc, rz_out, summary, thresh, act_out,
         counts) = args
        t = _cg_common(grid, block, D, k, k0, kc, prz)
        assert prr.shape == (nb, k) and rz_out is not rz and summary.shape == (2, k)
        assert act.shape == act_out.shape == thresh.shape == (k,) and counts.shape == (2, k)
        # every block reads act and rz while block 0 writes act_out and rz_out: no overlap
        assert not np.shares_memory(act, act_out) and not np.shares_memory(rz, rz_out)
        _ops.cg_p(np, prz[:, t], prr[:, t], rz[t], act[t], Zr[:, t], P[:, t], rz_out[t],
                  summary[:, t], thresh[t], act_out[t], counts[:, t])

    return locals()[name]


@pytest.mark.parametrize("n, d", [(1, 1), (7, 3), (5000, 4), (3, 700), (2000, 300)])
@pytest.mark.parametrize("emulated", [False, True])
def test_column_extremes(monkeypatch, n, d, emulated):
    """Block extremes of X, then their extremes: the column minima and maxima exactly, for
    any block split (a few entries per block forced), and every non-finite entry seen."""
    xp = _xp_for(monkeypatch, emulated)
    monkeypatch.setattr(_ops, "EXTREMES_PER_BLOCK", 64)
    n_blocks, per = _ops.extremes_plan(n, d)
    assert 1 <= n_blocks <= min(n, _ops.EXTREMES_MAX_BLOCKS) and n_blocks * per >= n
    assert (n_blocks - 1) * per < n          # no block past the rows
    rng = np.random.default_rng(n + d)
    X = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-300, 300, size=(1, d))
    cmin, cmax, finite = _ops.column_extremes(xp, X)
    assert finite
    np.testing.assert_array_equal(cmin, X.min(axis=0))
    np.testing.assert_array_equal(cmax, X.max(axis=0))
    for bad in (np.nan, np.inf, -np.inf):
        Y = X.copy()
        Y[rng.integers(n), rng.integers(d)] = bad
        assert _ops.column_extremes(xp, Y)[2] is False


@settings(max_examples=60, deadline=None)
@given(data=st.data(), G=st.integers(1, 3), n=st.integers(1, 40),
       full=st.booleans(), emulated=st.booleans())
def test_number_batch_equals_number_grid(data, G, n, full, emulated):
    """The batch numbering (_number_batch: rb_seg_starts, rb_seg_heads, an argsort,
    rb_seg_order, rb_number_batch) of G grids' words sorted together gives, for every
    grid, number_grid's labels, CSC rows, column pointers, keys and largest bin, exactly;
    one grid alone also with its key bits and row bits filling the word (the grid shift
    of 64), on numpy and on the CuPy branches with emulated kernels."""
    import contextlib
    import unittest.mock as um
    keys = [data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)) for _ in range(G)]
    row_bits = cb._row_bits(n)
    key_bits = 64 - row_bits if (full and G == 1) else 3
    rows_u = np.arange(n, dtype=np.uint64)
    words = np.concatenate([
        (np.uint64(q) << np.uint64(key_bits + row_bits) if G > 1 else np.uint64(0))
        | (np.asarray(k, dtype=np.uint64) << np.uint64(row_bits)) | rows_u
        for q, k in enumerate(keys)])
    s = np.sort(words)
    with contextlib.ExitStack() as stack:
        xp = np
        if emulated:
            xp = _FakeCupy()
            stack.enter_context(um.patch.object(_ops, "_kernel", _emulated))
            stack.enter_context(um.patch.object(_ops, "last_async",
                                                lambda xp_, a: _ops._Ready(a[-1])))
        flags, seg, count = cb._segment_ids(xp, s, row_bits)
        labels = np.full((G, n), -7, dtype=np.int32)
        rows = np.full(G * n, -7, dtype=np.int32)
        cp, seg_off, kb, counts = cb._number_batch(xp, s, flags, seg, count.get() + 1,
                                                   row_bits, key_bits, G, n, labels, rows)
    assert seg_off[0] == 0 and seg_off[-1] == cp.shape[0] - 1
    for q, k in enumerate(keys):
        pairs = (np.asarray(k, dtype=np.uint64) << np.uint64(row_bits)) | rows_u
        sq = np.sort(pairs)
        row_s = (sq & np.uint64((1 << row_bits) - 1)).astype(np.int64)
        lab, cpq, rc, kbq, mc = cb.number_grid(np, row_s, (sq >> np.uint64(row_bits))[None, :])
        c0, c1 = int(seg_off[q]), int(seg_off[q + 1])
        np.testing.assert_array_equal(labels[q], lab)
        np.testing.assert_array_equal(rows[q * n:(q + 1) * n], rc)
        np.testing.assert_array_equal(cp[c0:c1 + 1] - q * n, cpq)
        np.testing.assert_array_equal(kb[c0:c1], kbq[:, 0])
        assert int(counts[c0:c1].max()) == mc
        # first appearance: bin c's first row comes before bin c + 1's
        firsts = [k.index(v) for v in dict.fromkeys(k)]
        np.testing.assert_array_equal(labels[q][firsts], np.arange(len(firsts)))


def test_batches_of_grids(monkeypatch):
    """Consecutive single-word grids in runs of at most BATCH_WORDS // n grids whose
    (grid, key, row) words fit 64 bits; a gap or a wide key starts a new run (without
    narrow words: test_narrow_batches)."""
    monkeypatch.setattr(cb, "NARROW_BITS", 0)
    top = np.array([10, 10, 10, 10, 40, 40, 10, 10, 10])
    assert cb._batches([0, 1, 2, 3, 5, 6, 7, 8], 1000, top, 10) == [[0, 1, 2, 3], [5, 6, 7, 8]]
    # at most 2 grids a batch
    assert cb._batches([0, 1, 2, 3], cb.BATCH_WORDS // 2, top, 10) == [[0, 1], [2, 3]]
    assert cb._batches([0, 1, 2], cb.BATCH_WORDS, top, 10) == [[0], [1], [2]]
    # 40 key bits + 22 row bits leave 2 bits: 4 grids with keys of 40 bits, not 5
    top = np.array([40] * 6)
    assert cb._batches(list(range(6)), 1000, top, 22) == [[0, 1, 2, 3], [4, 5]]
    assert cb._batches(list(range(3)), 1000, top, 24) == [[0], [1], [2]]


def test_narrow_batches():
    """Runs that fit NARROW_BITS (their key ranges summed, and the row) stay narrow: such a
    run is closed, not widened, where the next grid would not fit; wide grids batch as
    before."""
    top = np.array([10] * 6)
    assert cb._batches(list(range(6)), 1000, top, 10) == [list(range(6))]
    np.testing.assert_array_equal(cb._narrow(list(range(6)), top, 10), np.arange(6) * 1024)
    # 20 row bits leave 12: four ranges of 2^10 keys, not five (wide, all six would fit)
    assert cb._batches(list(range(6)), 1000, top, 20) == [[0, 1, 2, 3], [4, 5]]
    assert cb._narrow([0, 1, 2, 3, 4], top, 20) is None
    top = np.array([3, 5, 40, 40, 2, 1])
    np.testing.assert_array_equal(cb._narrow([0, 1], top, 20), [0, 8])
    assert cb._narrow([2], top, 20) is None
    assert cb._batches(list(range(6)), 1000, top, 20) == [[0, 1], [2, 3], [4, 5]]
    np.testing.assert_array_equal(cb._narrow([4, 5], top, 20), [0, 4])
    # a grid whose keys and row need all 32 bits alone is narrow; one more bit is not
    assert cb._narrow([0], np.array([12]), 20) is not None
    assert cb._narrow([0], np.array([13]), 20) is None


def test_widen_batch_keeps_the_order():
    """Narrow words sorted, widened, equal the batch's wide words sorted (rb_widen_batch)."""
    rng = np.random.default_rng(0)
    top = np.array([3, 1, 6, 4, 0])
    row_bits = 9
    base = cb._narrow(list(range(5)), top, row_bits)
    n = 400
    key = np.stack([rng.integers(0, 1 << int(t), size=n) for t in top]).astype(np.uint64)
    rows = np.arange(n, dtype=np.uint64)
    narrow = ((key + base[:, None].astype(np.uint64)) << np.uint64(row_bits)) | rows
    assert int(narrow.max()) < 1 << 32
    key_bits = int(top.max())
    wide = (np.arange(5, dtype=np.uint64)[:, None] << np.uint64(key_bits + row_bits)) | (
        key << np.uint64(row_bits)) | rows
    got = _ops.widen_batch(np, np.sort(narrow.astype(np.uint32).reshape(-1)), base, row_bits,
                           key_bits)
    np.testing.assert_array_equal(got, np.sort(wide.reshape(-1)))


@pytest.mark.parametrize("narrow_bits", [0, 32])
@pytest.mark.parametrize("words", [1, 2 * 3000, 5 * 3000, 1 << 24])
@pytest.mark.parametrize("emulated", [False, True])
def test_fit_in_batches_of_any_size(monkeypatch, words, emulated, narrow_bits):
    """Z is the CPU's whether the grids are numbered one by one (the GPU path above
    BATCH_WORDS rows), in batches of 2 or 5, or all together, sorted as wide (uint64)
    or narrow (uint32) words; on numpy and on the CuPy branches with emulated kernels."""
    xp = _xp_for(monkeypatch, emulated)
    if emulated:
        monkeypatch.setattr(_ops, "last_async", lambda xp_, a: _ops._Ready(a[-1]))
    monkeypatch.setattr(cb, "BATCH_WORDS", words)
    monkeypatch.setattr(cb, "NARROW_BITS", narrow_bits)
    calls = []
    batch_keys = _ops.batch_keys

    def spy(*a, **kw):
        if a[0] is xp:      # fit_layout's calls, not the emulator's own
            narrow = kw.get("base") is not None
            calls.append((a[2].shape[0], None if narrow and a[2].shape[0] > 1 else a[-1]))
            narrows.append(narrow)
        return batch_keys(*a, **kw)

    narrows = []

    monkeypatch.setattr(_ops, "batch_keys", spy)
    rng = np.random.default_rng(8)
    X = rng.uniform(size=(3000, 5))
    X[:, 4] = np.round(X[:, 4] * 3)
    cpu, Z, cols = _cpu_Z(X, 11, 0.3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = RandomBinning(n_grids=11, sigma=0.3, random_state=2)
        layout = cb.fit_layout(est, X, xp)
    # (here every grid's keys and rows fit 32 bits, and the 11 grids' key ranges 20 bits)
    assert all(narrows) if narrow_bits else not any(narrows)
    if words <= 3000:   # every grid alone: keys in groups of KEY_GROUP grids, no grid tag
        assert calls == [(4, None), (4, None), (3, None)]
    else:               # batches of several grids: one call each, tagged where wide (a last
        g = words // 3000   # grid alone: untagged)
        assert [c[0] for c in calls] == [min(g, 11 - a) for a in range(0, 11, g)]
        assert all((c[1] is None) == (c[0] == 1 or narrow_bits > 0) for c in calls)
    _assert_same_Z(cb.csr_arrays(xp, layout.labels, est.grid_ptr_, est.n_features_out_,
                                 est._value(), est._dtype_), Z)
    np.testing.assert_array_equal(layout.rows, cols.indices)
    np.testing.assert_array_equal(layout.col_ptr, cols.indptr)
    np.testing.assert_array_equal(est.kappa_per_grid_, cpu.kappa_per_grid_)
    np.testing.assert_array_equal(est.n_bins_, cpu.n_bins_)
    Xt = rng.uniform(-0.1, 1.1, size=(200, 5))
    _assert_same_Z(cb.csr_arrays(xp, cb.transform_labels(est, Xt, xp), est.grid_ptr_,
                                 est.n_features_out_, est._value(), est._dtype_),
                   cpu.transform(Xt))


@pytest.mark.parametrize("emulated", [False, True])
def test_fit_with_wide_keys_mixes_batches_and_grids(monkeypatch, emulated):
    """Keys of 51-64 bits: some grids cannot share a word with a grid number (batches of
    one), some not even with the row (the multi-word path), the others batch; Z is the
    CPU's."""
    xp = _xp_for(monkeypatch, emulated)
    if emulated:
        monkeypatch.setattr(_ops, "last_async", lambda xp_, a: _ops._Ready(a[-1]))
    X = np.random.default_rng(16).uniform(size=(16, 11))
    cpu, Z, cols = _cpu_Z(X, 8, 0.02, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = RandomBinning(n_grids=8, sigma=0.02, random_state=16)
        layout = cb.fit_layout(est, X, xp)
    _, _, n_words, top = est._cuda_tables.layout()
    fast = [r for r in range(8) if cb._combines(16, r, n_words, top)]
    assert cb._batches(fast, 16, top, cb._row_bits(16)) == [[1, 2, 3], [5], [7]]
    _assert_same_Z(cb.csr_arrays(xp, layout.labels, est.grid_ptr_, est.n_features_out_,
                                 est._value(), est._dtype_), Z)
    np.testing.assert_array_equal(layout.rows, cols.indices)
    np.testing.assert_array_equal(est.kappa_per_grid_, cpu.kappa_per_grid_)


def test_cupy_branches_with_emulated_kernels(monkeypatch):
    fake = _FakeCupy()
    monkeypatch.setattr(_ops, "_kernel", _emulated)
    # (pinned memory and events need a GPU: the count is read at once)
    monkeypatch.setattr(_ops, "last_async", lambda xp, a: _ops._Ready(a[-1]))
    rng = np.random.default_rng(4)
    X = rng.uniform(size=(3000, 6))
    X[:, 5] = 1.0
    y = np.sin(5 * X[:, 0]) + X[:, 1]
    Xt = rng.uniform(-0.1, 1.1, size=(400, 6))
    cpu, Z, cols = _cpu_Z(X, 12, "scale", 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = RandomBinning(n_grids=12, random_state=3)
        layout = cb.fit_layout(est, X, fake)
    arrays = cb.csr_arrays(fake, layout.labels, est.grid_ptr_, est.n_features_out_,
                           est._value(), est._dtype_)
    _assert_same_Z(arrays, Z)
    np.testing.assert_array_equal(layout.rows, cols.indices)
    labels = cb.transform_labels(est, Xt, fake)
    Zt = cpu.transform(Xt)
    _assert_same_Z(cb.csr_arrays(fake, labels, est.grid_ptr_, est.n_features_out_,
                                 est._value(), est._dtype_), Zt)
    W = rng.normal(size=(layout.n_columns, 11))   # k = 11: two passes of 8 targets
    U = rng.normal(size=(layout.n_rows, 11))
    np.testing.assert_allclose(layout.dot(W), Z @ W, atol=1e-12)
    np.testing.assert_allclose(layout.tdot(U), Z.T @ U, atol=1e-10)
    Y = np.c_[y, 2 * y]
    c1, b1, _ = solve_ridge_cg(Z, Y, None, alpha=0.3, tol=1e-11, columns=cols)
    c2, b2, _, _ = ccg.solve_ridge(fake, layout, Y, None, alpha=0.3, tol=1e-11,
                                   structured=True)
    np.testing.assert_allclose(c2, c1, atol=1e-7)
    np.testing.assert_allclose(b2, b1, atol=1e-7)
    # a non-finite entry: the CPU's message (the first one in row-major order)
    X[2000, 4] = np.inf
    X[1500, 1] = np.nan
    with pytest.raises(ValueError) as cpu_err:
        RandomBinning(n_grids=12, random_state=3).fit(X)
    with pytest.raises(ValueError) as xp_err:
        cb.fit_layout(RandomBinning(n_grids=12, random_state=3), X, fake)
    assert str(xp_err.value) == str(cpu_err.value)


def test_compare_gpu_dry_run(tmp_path):
    """benchmarks/compare_gpu.py runs end to end on the numpy twins and reports Z equal."""
    import json
    import os
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, os.path.join(root, "benchmarks", "compare_gpu.py"), "--xp", "numpy",
         "--sizes", "1500", "--grids", "4", "--n-test", "500", "--rff-features", "32",
         "--cpu-max", "1e4", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.load(open(tmp_path / "gpu_results.json"))["results"]
    assert res[0]["z_equal"] is True and res[0]["pred_diff_same_w"] <= 1e-6
    # the RFF side: the mean R^2 of its frequency draws, between their extremes
    f = res[0]["rff"]
    assert f["r2_min"] <= f["r2"] <= f["r2_max"] and f["tried"][0] == [32, f["r2"]]
    assert res[0]["gpu"]["iters"] == res[0]["cpu"]["iters"]
    g = res[0]["gpu"]
    assert g["t_zdot"] > 0 and g["t_tdot"] > 0 and g["bound"] > 0
    md = open(tmp_path / "gpu.md").read()
    assert "| 1,500 | 4 |" in md and "| yes |" in md
    # above --cpu-max, Z checked against the CPU's binning alone (--check-max)
    out = subprocess.run(
        [sys.executable, os.path.join(root, "benchmarks", "compare_gpu.py"), "--xp", "numpy",
         "--sizes", "2500", "--grids", "3", "--n-test", "300", "--rff-max", "0",
         "--cpu-max", "1000", "--check-max", "1e4", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.load(open(tmp_path / "gpu_results.json"))["results"]
    assert res[0]["z_equal"] is True and "cpu" not in res[0]
    assert "Z checked against the CPU's binning alone: equal True" in out.stdout
    # the same check a block of rows at a time (the CPU's tables, then its transform)
    out = subprocess.run(
        [sys.executable, os.path.join(root, "benchmarks", "compare_gpu.py"), "--xp", "numpy",
         "--sizes", "2500", "--grids", "3", "--n-test", "300", "--rff-max", "0",
         "--cpu-max", "1000", "--check-max", "1e4", "--check-whole-max", "100",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Z checked against the CPU's binning alone: equal True" in out.stdout


def test_z_check_blocks_find_a_difference(monkeypatch):
    """compare_gpu's z_check, whole or by blocks of rows, says False when one label of the
    GPU's layout differs from the CPU's Z (and True before)."""
    import importlib.util
    import os
    from types import SimpleNamespace
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    monkeypatch.syspath_prepend(os.path.join(root, "benchmarks"))
    spec = importlib.util.spec_from_file_location(
        "compare_gpu", os.path.join(root, "benchmarks", "compare_gpu.py"))
    cg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cg)
    X = np.random.default_rng(4).uniform(size=(700, 5))
    R = 6
    est = RandomBinning(n_grids=R, random_state=0).fit(X)
    Z = est.transform(X)
    labels = (Z.indices.reshape(700, R) - est.grid_ptr_[:-1][None, :]).T.astype(np.int32)
    layout = SimpleNamespace(labels=np.ascontiguousarray(labels))
    for whole_max, block in [(1e12, 256), (10, 256), (10, 100)]:
        assert cg.z_check(np, X, est, layout, R, block=block, whole_max=whole_max)
        layout.labels[2, 650] ^= 1
        assert not cg.z_check(np, X, est, layout, R, block=block, whole_max=whole_max)
        layout.labels[2, 650] ^= 1


def test_gpu_binning_stages_dry_run():
    """benchmarks/gpu_binning_stages.py runs on the numpy twins: every stage and the CG
    pieces are reported, and the stages add up to a positive time."""
    import os
    import re
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, os.path.join(root, "benchmarks", "gpu_binning_stages.py"), "--xp",
         "numpy", "--n", "3000", "--grids", "6"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert out.returncode == 0, out.stderr[-2000:]
    for stage in ("prepare", "keys", "sort", "number", "store"):
        assert re.search(rf"^  {stage} +[0-9.]+ s", out.stdout, re.M), stage
    assert "one CG iteration (difference)" in out.stdout
    assert re.search(r"^    host_lag=1: +[0-9.]+ ms per iteration", out.stdout, re.M)
    assert re.search(r"^    host_lag=0: +[0-9.]+ ms per iteration", out.stdout, re.M)
    assert "n_iter bit for bit equal: True" in out.stdout
    assert re.search(r"^    graph=True : +[0-9.]+ ms per iteration", out.stdout, re.M)
    assert re.search(r"graph=True vs host_lag=1: .* a captured graph ran: False; coef, "
                     r"intercept, n_iter bit for bit equal: True", out.stdout)
    total = float(re.search(r"stage by stage: ([0-9.]+) s", out.stdout).group(1))
    assert total > 0


def test_gpu_kernel_time_dry_run_and_summary(tmp_path):
    """benchmarks/gpu_kernel_time.py: the fit + solve runs on the numpy twins, and the
    summary of an ncu --csv output sums each kernel's durations in their units."""
    import os
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = os.path.join(root, "benchmarks", "gpu_kernel_time.py")
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, script, "--xp", "numpy", "--n", "3000", "--grids",
                          "6"], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "fit" in out.stdout and "iterations" in out.stdout
    header = ('"ID","Kernel Name","Section Name","Metric Name","Metric Unit",'
              '"Metric Value"\n')
    rows = ['"0","rb_zdot","x","gpu__time_duration.sum","usecond","1,500.5"\n',
            '"1","rb_zdot","x","gpu__time_duration.sum","nsecond","500"\n',
            '"2","rb_cg_q(double*)","x","gpu__time_duration.sum","msecond","2"\n',
            '"3","rb_cg_q","x","other__metric","msecond","99"\n']
    csv_path = tmp_path / "ncu.csv"
    csv_path.write_text("==PROF== Connected\n" + header + "".join(rows) + "a line of ours\n")
    out = subprocess.run([sys.executable, script, "--summarize", str(csv_path)],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "3 launches, 3.50 ms of GPU time" in out.stdout
    assert "2.000 ms       1x  rb_cg_q" in out.stdout and "1.501 ms       2x  rb_zdot" in out.stdout


def test_piece_sums_twin_honours_piece_end():
    """The numpy twin of rb_piece_sums sums each piece from its start to its end, as the
    kernel does, also where pieces leave gaps, are empty or end at the last entry."""
    rng = np.random.default_rng(8)
    rows = rng.integers(0, 50, 40).astype(np.int32)
    U = rng.normal(size=(50, 3))
    ps = np.array([0, 5, 5, 20, 38], dtype=np.int64)
    pe = np.array([3, 5, 12, 30, 40], dtype=np.int64)
    want = np.array([U[rows[a:b]].sum(axis=0) for a, b in zip(ps, pe)])
    np.testing.assert_allclose(_ops.piece_sums(np, rows, ps, pe, U), want, rtol=1e-14,
                               atol=1e-14)


# ------------------------------------------------------------------------------------------
# solve_ridge(graph=True): the iterations in pairs through buffers made once (what a CUDA
# graph replays), against the default loop: the same results bit for bit.
@pytest.mark.parametrize("emulated", [False, True])
@pytest.mark.parametrize("fit_intercept, weighted", [(True, False), (True, True),
                                                     (False, False), (False, True)])
@pytest.mark.parametrize("preconditioner, structured", [("jacobi", True), ("jacobi", False),
                                                         (None, False)])
@pytest.mark.parametrize("max_iter", [None, 0, 1, 2, 5])
def test_graph_pairs_equal_the_queued_loop(monkeypatch, emulated, fit_intercept, weighted,
                                           preconditioner, structured, max_iter):
    """graph=True (the static step, run in pairs; on numpy no graph is captured) equals
    host_lag=1's loop bit for bit in coef, intercept, n_iter, the stop reasons and the
    ConvergenceWarnings: 11 targets stopping at different iterations (two launches of 8
    and 3), a zero one, odd and even max_iter (an odd last iteration runs unpaired)."""
    xp = _xp_for(monkeypatch, emulated)
    rng = np.random.default_rng(12)
    n = 400
    X = rng.uniform(size=(n, 3))
    Y = np.c_[_staggered_targets(X, rng), rng.normal(size=(n, 4))]
    s = rng.uniform(0.2, 3.0, size=n) if weighted else None
    _, layout, _ = _xp_fit(X, 8, "scale", 3)
    kw = dict(alpha=0.3, fit_intercept=fit_intercept, tol=1e-9, max_iter=max_iter,
              preconditioner=preconditioner, structured=structured)
    outs, convs = [], []
    for graph in (False, True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outs.append(ccg.solve_ridge(xp, layout, Y, s, graph=graph, **kw))
        convs.append([str(w.message) for w in caught
                      if issubclass(w.category, ConvergenceWarning)])
    assert outs[1][3]["graph"] is False and outs[0][3]["graph"] is False  # none captured
    _assert_same_solve(outs[0], outs[1])
    assert convs[1] == convs[0]
    n_iter = outs[1][2]
    if max_iter is not None:
        assert n_iter.max() == max_iter
    else:
        assert len(set(n_iter[n_iter > 0].tolist())) >= 3


def test_graph_capture_refuses_allocations_and_falls_back():
    """_capture (rbcd.cuda.cg) against a stand-in for CuPy's graph API: the pool's
    allocator is replaced by one that refuses while the function is recorded and restored
    afterwards (a failed capture too); a capture whose function allocates, or whose end
    fails, gives None (the queued kernels run); a good one replays by launching the graph
    on the capturing stream; the default stream (pointer 0) is never captured."""
    import types

    log = []

    class Graph:
        def launch(self, stream):
            log.append(("launch", stream))

    class Stream:
        def __init__(self, ptr, fail_end=False):
            self.ptr, self.fail_end = ptr, fail_end

        def begin_capture(self, mode=None):
            log.append(("begin", mode))

        def end_capture(self):
            log.append("end")
            if self.fail_end:
                raise RuntimeError("capture invalidated")
            return Graph()

    def pool_alloc(size):
        return ("memory", size)

    state = {"alloc": pool_alloc, "stream": Stream(7)}
    cuda = types.SimpleNamespace(
        get_current_stream=lambda: state["stream"],
        get_allocator=lambda: state["alloc"],
        set_allocator=lambda f: state.__setitem__("alloc", f),
        runtime=types.SimpleNamespace(streamCaptureModeRelaxed=2))
    fake = types.SimpleNamespace(cuda=cuda)

    def quiet():
        log.append("work")

    def allocating():
        state["alloc"](64)

    replay = ccg._capture(fake, quiet)
    assert replay is not None and state["alloc"] is pool_alloc
    assert log == [("begin", 2), "work", "end"]
    replay()
    assert log[-1] == ("launch", state["stream"])
    log.clear()
    assert ccg._capture(fake, allocating) is None and state["alloc"] is pool_alloc
    assert log == [("begin", 2), "end"]
    state["stream"] = Stream(7, fail_end=True)
    assert ccg._capture(fake, quiet) is None and state["alloc"] is pool_alloc
    state["stream"] = Stream(0)
    log.clear()
    assert ccg._capture(fake, quiet) is None and log == []
    assert ccg._capture(np, quiet) is None


def test_side_stream_orders_work_both_ways():
    """_side_stream (rbcd.cuda.cg) against a stand-in for CuPy's streams: a non-blocking
    stream that waits for the previous stream's work on entry, is current inside, and
    that the previous stream waits for on exit; numpy and an emulation: nothing."""
    import types

    log = []

    class Stream:
        current = None

        def __init__(self, name="new", non_blocking=False):
            self.name, self.non_blocking = name, non_blocking

        def record(self):
            log.append(("record", self.name))
            return ("event", self.name)

        def wait_event(self, ev):
            log.append(("wait", self.name, ev))

        def __enter__(self):
            self.outer, Stream.current = Stream.current, self
            return self

        def __exit__(self, *exc):
            Stream.current = self.outer
            return False

    Stream.current = Stream("default")
    cuda = types.SimpleNamespace(Stream=Stream, get_current_stream=lambda: Stream.current)
    fake = types.SimpleNamespace(cuda=cuda)
    with ccg._side_stream(fake) as side:
        assert Stream.current is side.stream and side.stream.non_blocking
        log.append("work")
    assert Stream.current.name == "default"
    assert log == [("record", "default"), ("wait", "new", ("event", "default")), "work",
                   ("record", "new"), ("wait", "default", ("event", "new"))]
    with ccg._side_stream(np):
        pass
    with ccg._side_stream(_FakeCupy()):
        pass


@pytest.mark.parametrize("host_lag", [1, 0])
def test_device_classifier_stops_classes_on_the_cpu_shared_scale(numpy_device, monkeypatch,
                                                                  host_lag):
    """device="cuda"'s multi-class RidgeCGClassifier holds every class to tol times the
    largest class's ||b||, as the CPU classifier does (rbcd.solvers.cg.stopping_scale): a
    rare class stops with the others instead of iterating to its own small ||b||; its
    residual_ is reported on that scale. The same iterations as the CPU's and the same
    residuals to rounding, in either host loop."""
    from rbcd.solvers.cg import RidgeCGClassifier

    real = ccg.solve_ridge
    monkeypatch.setattr(ccg, "solve_ridge",
                        lambda *a, **kw: real(*a, **{**kw, "host_lag": host_lag}))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3))
    y = (X[:, 0] > 0).astype(int) + 2 * (X[:, 1] > 0)
    y[rng.choice(3000, 30, replace=False)] = 4          # a rare fifth class
    _, Z, cols = _cpu_Z(X, 16, "scale", 0)
    kw = dict(alpha=1.0, tol=1e-3)
    cpu = RidgeCGClassifier(**kw).fit(Z, y)          # (no grid structure: neither side)
    dev = RidgeCGClassifier(device="cuda", **kw).fit(Z, y)
    np.testing.assert_array_equal(dev.n_iter_, cpu.n_iter_)
    np.testing.assert_allclose(dev.residual_, cpu.residual_, rtol=1e-4)   # (sums differ)
    assert dev.residual_[4] <= 1e-3 and cpu.converged_ and dev.converged_
    # held to its own ||b||, the rare class would take more iterations
    own = ccg.solve_ridge(np, ccg.MatrixOperator(np, Z), np.where(y[:, None] == np.arange(5),
                          1.0, -1.0), alpha=1.0, tol=1e-3)[2]
    assert own[4] > dev.n_iter_[4]


# ------------------------------------------------------------------------------------------
# device="cuda" checks its inputs and sets its fitted attributes as the CPU estimators do
# (rbcd.models._RBBase.fit and rbcd.solvers.cg.RidgeCG are the reference): the same
# messages, the same warnings, the same types.
def _outcome(fit, categories=(UserWarning,)):
    """What a call did: (error type and message or None, the warnings of ``categories``
    as (category, message)); the warnings of other categories are ignored."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fit()
            error = None
        except Exception as exc:          # noqa: BLE001 (compared, not swallowed)
            error = (type(exc).__name__, str(exc))
    return error, [(w.category.__name__, str(w.message)) for w in caught
                   if issubclass(w.category, categories)
                   and not issubclass(w.category, ConvergenceWarning)]


def _small_problem(n=160, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 3))
    y = np.sin(4 * X[:, 0]) + X[:, 1]
    labels = (X[:, 0] * 3).astype(int)
    return X, y, labels


def test_scalar_sample_weight_as_the_cpu(numpy_device):
    """D4: a scalar sample_weight is that weight for every row, on the device as on the
    CPU (it was refused: to_host made it a 0-d array): the models (fixed alpha and
    alpha="auto", the classifier's calibration), RidgeCG and RidgeCGClassifier."""
    X, y, labels = _small_problem()
    for cls, target in [(RBRegressor, y), (RBClassifier, labels)]:
        for alpha in (1.0, "auto"):
            kw = dict(n_grids=8, random_state=0, alpha=alpha, tol=1e-10)
            g = cls(device="cuda", **kw).fit(X, target, sample_weight=2.5)
            c = cls(linear=0, solver="cg", **kw).fit(X, target, sample_weight=2.5)
            assert g.alpha_ == pytest.approx(c.alpha_, rel=1e-12)
            if cls is RBRegressor:
                np.testing.assert_allclose(g.predict(X), c.predict(X), atol=1e-6)
            else:
                np.testing.assert_allclose(g.decision_function(X), c.decision_function(X),
                                           atol=1e-6)
                np.testing.assert_allclose(g.predict_proba(X), c.predict_proba(X), atol=1e-6)
    _, Z, _ = _cpu_Z(X, 8, 1.0, 0)
    for cls, target in [(RidgeCG, y), (RidgeCGClassifier, labels)]:
        g = cls(alpha=1.0, tol=1e-10, device="cuda").fit(Z, target, sample_weight=2.5)
        c = cls(alpha=1.0, tol=1e-10).fit(Z, target, sample_weight=2.5)
        np.testing.assert_allclose(g.coef_, c.coef_, atol=1e-8)


def test_pandas_inputs_as_the_cpu(numpy_device):
    """D5: a DataFrame X, a Series y and a Series sample_weight (to_host called .get() on
    them, pandas' own get: a TypeError): the CPU's fit."""
    pd = pytest.importorskip("pandas")
    X, y, labels = _small_problem()
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=X.shape[0])
    F = pd.DataFrame(X, columns=["a", "b", "c"])
    kw = dict(n_grids=8, random_state=0, alpha=1.0, tol=1e-10)
    for cls, target in [(RBRegressor, y), (RBClassifier, labels)]:
        g = cls(device="cuda", **kw).fit(F, pd.Series(target), sample_weight=pd.Series(w))
        c = cls(**kw).fit(F, pd.Series(target), sample_weight=pd.Series(w))
        np.testing.assert_allclose(g.predict(F), c.predict(F), atol=1e-6)
    _, Z, _ = _cpu_Z(X, 4, 1.0, 0)
    Zf = pd.DataFrame(Z.toarray(), columns=[f"z{j}" for j in range(Z.shape[1])])
    g = RidgeCG(alpha=1.0, tol=1e-10, device="cuda").fit(Zf, pd.Series(y),
                                                          sample_weight=pd.Series(w))
    c = RidgeCG(alpha=1.0, tol=1e-10).fit(Zf, pd.Series(y), sample_weight=pd.Series(w))
    np.testing.assert_allclose(g.predict(Zf), c.predict(Zf), atol=1e-8)


def test_feature_names_as_the_cpu(numpy_device):
    """D5: a device fit on a DataFrame records feature_names_in_ (model, its binning_,
    RandomBinning, RidgeCG) and predict / decision_function / predict_proba /
    transform check them as the CPU does: reordered columns a ValueError, an array
    after a frame (or a frame after an array) one UserWarning naming the estimator the
    user called; the same messages."""
    pd = pytest.importorskip("pandas")
    X, y, labels = _small_problem()
    F = pd.DataFrame(X, columns=["a", "b", "c"])
    Fr = F[["b", "a", "c"]]
    kw = dict(n_grids=8, random_state=0, alpha=1.0)
    for cls, target in [(RBRegressor, y), (RBClassifier, labels)]:
        fitted = {dev: (cls(device=dev, **kw).fit(F, target), cls(device=dev, **kw).fit(X, target))
                  for dev in ("cpu", "cuda")}
        g, c = fitted["cuda"][0], fitted["cpu"][0]
        np.testing.assert_array_equal(g.feature_names_in_, c.feature_names_in_)
        np.testing.assert_array_equal(g.binning_.feature_names_in_, c.feature_names_in_)
        assert "feature_names_in_" not in fitted["cuda"][1].__dict__
        methods = ["predict"] + (["decision_function", "predict_proba"]
                                 if cls is RBClassifier else [])
        for method in methods:
            for data in (F, Fr, X):
                got = {dev: _outcome(lambda: getattr(fitted[dev][0], method)(data))
                       for dev in fitted}
                assert got["cuda"] == got["cpu"], (cls.__name__, method)
            got = {dev: _outcome(lambda: getattr(fitted[dev][1], method)(F)) for dev in fitted}
            assert got["cuda"] == got["cpu"] and len(got["cuda"][1]) == 1
        assert _outcome(lambda: g.predict(Fr))[0][0] == "ValueError"
        assert len(_outcome(lambda: g.predict(X))[1]) == 1
        back = pickle.loads(pickle.dumps(g))             # kept by a pickle and by to_cpu
        assert _outcome(lambda: back.predict(Fr)) == _outcome(lambda: c.predict(Fr))
        assert _outcome(lambda: g.to_cpu().predict(X)) == _outcome(lambda: c.predict(X))
    for make in (lambda dev: RandomBinning(n_grids=4, random_state=0, device=dev).fit(F),
                 lambda dev: RidgeCG(device=dev).fit(F, y)):
        fitted = {dev: make(dev) for dev in ("cpu", "cuda")}
        np.testing.assert_array_equal(fitted["cuda"].feature_names_in_,
                                      fitted["cpu"].feature_names_in_)
        method = "transform" if isinstance(fitted["cpu"], RandomBinning) else "predict"
        for data in (F, Fr, X):
            got = {dev: _outcome(lambda: getattr(fitted[dev], method)(data)) for dev in fitted}
            assert got["cuda"] == got["cpu"]


_BAD_TARGETS = {
    "string": lambda n, y, lab: np.array(["1.5"] * n),
    "complex": lambda n, y, lab: y + 5j * y,
    "nan": lambda n, y, lab: np.where(np.arange(n) == 5, np.nan, y),
    "short": lambda n, y, lab: y[:-1],
    "long": lambda n, y, lab: np.r_[y, 0.0],
    "column": lambda n, y, lab: lab[:, None],
    "none label": lambda n, y, lab: np.array([None] + list(lab[1:]), dtype=object),
    "nan label": lambda n, y, lab: np.where(np.arange(n) == 7, np.nan, lab.astype(float)),
    "one class": lambda n, y, lab: np.zeros(n, dtype=int),
    "short labels": lambda n, y, lab: lab[:-1],
}


@pytest.mark.parametrize("alpha", [1.0, "auto"])
@pytest.mark.parametrize("case", sorted(_BAD_TARGETS))
def test_targets_checked_as_the_cpu(numpy_device, case, alpha):
    """D6: y checked on the host before the binning by the CPU's functions
    (check_regression_target / check_class_labels), in the model's name: string or
    complex regression targets refused, a column-vector y ravelled with a
    DataConversionWarning, NaN named with its index, None labels named, one class
    naming RBClassifier, a y of another length worded as the CPU words it (with
    alpha="auto" it was an IndexError). The same for RidgeCG / RidgeCGClassifier
    (the CPU's validate_data checks)."""
    from sklearn.exceptions import DataConversionWarning

    X, y, labels = _small_problem()
    target = _BAD_TARGETS[case](X.shape[0], y, labels)
    label_case = case in ("column", "none label", "nan label", "one class", "short labels")
    model = RBClassifier if label_case else RBRegressor
    kw = dict(n_grids=8, random_state=0, alpha=alpha, solver="cg", linear=0)
    got = {dev: _outcome(lambda: model(device=dev, **kw).fit(X, target),
                         (UserWarning, DataConversionWarning)) for dev in ("cpu", "cuda")}
    assert got["cuda"] == got["cpu"]
    assert (got["cuda"][0] is None) == (case == "column")
    if alpha == "auto":
        return
    _, Z, _ = _cpu_Z(X, 4, 1.0, 0)
    solver = RidgeCGClassifier if label_case else RidgeCG
    got = {dev: _outcome(lambda: solver(alpha=1.0, device=dev).fit(Z, target),
                         (UserWarning, DataConversionWarning)) for dev in ("cpu", "cuda")}
    assert got["cuda"] == got["cpu"]


@pytest.mark.parametrize("class_weight", [{0: -1.0, 1: 1.0, 2: 1.0}, {0: np.nan, 1: 1.0, 2: 1.0},
                                          {0: "x", 1: 1.0, 2: 1.0}, {0: np.inf}])
def test_class_weight_checked_as_the_cpu(numpy_device, class_weight):
    """D7: class_weight validated by the CPU's check_class_weight (a negative weight
    fitted, NaN failed in the rescaling, a string in numpy), model and solver."""
    X, _, labels = _small_problem()
    got = {dev: _outcome(lambda: RBClassifier(n_grids=8, alpha=1.0, class_weight=class_weight,
                                              device=dev).fit(X, labels))
           for dev in ("cpu", "cuda")}
    assert got["cuda"] == got["cpu"] and got["cpu"][0][0] == "ValueError"
    assert "class_weight" in got["cpu"][0][1]
    _, Z, _ = _cpu_Z(X, 4, 1.0, 0)
    got = {dev: _outcome(lambda: RidgeCGClassifier(class_weight=class_weight,
                                                   device=dev).fit(Z, labels))
           for dev in ("cpu", "cuda")}
    assert got["cuda"] == got["cpu"] and got["cpu"][0][0] == "ValueError"


def test_ridge_takes_the_cpu_columns(numpy_device):
    """D8: RidgeCG(device="cuda").fit(Z, y, columns=...) with the CPU's columns (an
    RBColumns, or the fitted RandomBinning) checks them against Z as the CPU does (the
    columns of another Z: the CPU's error) and projects off the grid directions where
    the CPU does (training data: the same iterations as the CPU's); Z of new rows, or
    dense Z: no projection, as the CPU. (columns were ignored.)"""
    rng = np.random.default_rng(6)
    X = rng.uniform(size=(400, 3))
    y = np.sin(4 * X[:, 0])
    rb, Z, cols = _cpu_Z(X, 16, 1.0, 0)
    _, Z2, cols2 = _cpu_Z(X, 16, 0.3, 1)
    kw = dict(alpha=1.0, tol=1e-8)
    plain = RidgeCG(**kw).fit(Z, y).n_iter_
    for columns in (cols, rb):
        c = RidgeCG(**kw).fit(Z, y, columns=columns)
        g = RidgeCG(device="cuda", **kw).fit(Z, y, columns=columns)
        np.testing.assert_array_equal(g.n_iter_, c.n_iter_)
        assert g.n_iter_[0] < plain[0]                      # projected
        np.testing.assert_allclose(g.coef_, c.coef_, atol=1e-7)
        assert g.predict(Z).shape == (400,)
    for columns in (cols2, rb):                             # not this Z's: the CPU's error
        Zo = Z2 if columns is rb else Z
        got = {dev: _outcome(lambda: RidgeCG(device=dev, **kw).fit(Zo, y, columns=columns))
               for dev in ("cpu", "cuda")}
        assert got["cuda"] == got["cpu"] and "columns are not the grid structure" in \
            got["cpu"][0][1]
    Xt = rng.uniform(-0.5, 1.5, size=(300, 3))              # new rows: some miss a grid
    Zt = rb.transform(Xt)
    assert Zt.nnz < Zt.shape[0] * 16
    yt = np.sin(4 * Xt[:, 0])
    for Zx, yx, columns in ((Zt, yt, rb), (Z.toarray(), y, cols)):
        c = RidgeCG(**kw).fit(Zx, yx, columns=columns)
        g = RidgeCG(device="cuda", **kw).fit(Zx, yx, columns=columns)
        np.testing.assert_array_equal(g.n_iter_, c.n_iter_)
        np.testing.assert_array_equal(g.n_iter_, RidgeCG(**kw).fit(Zx, yx).n_iter_)


def test_ridge_sets_alpha_(numpy_device):
    """D9: RidgeCG / RidgeCGClassifier(device="cuda") set alpha_ as the CPU does (a float,
    or the per-target array)."""
    X, y, labels = _small_problem()
    _, Z, _ = _cpu_Z(X, 4, 1.0, 0)
    Y = np.c_[y, 2 * y]
    for cls, target, alpha in [(RidgeCG, y, 0.5), (RidgeCG, Y, [0.5, 2.0]),
                               (RidgeCGClassifier, labels, 3)]:
        g = cls(alpha=alpha, device="cuda").fit(Z, target)
        c = cls(alpha=alpha).fit(Z, target)
        assert type(g.alpha_) is type(c.alpha_)
        np.testing.assert_array_equal(g.alpha_, c.alpha_)


def test_float32_as_the_cpu(numpy_device):
    """D11: float32 input gives float32 coefficients and float32 predictions / decision
    values, as on the CPU (the device gave float64): RidgeCG and RidgeCGClassifier on
    float32 Z (sparse and dense, with and without intercept, 1-D and 2-D y), either
    model with dtype=np.float32; the output dtype for every kind of input the CPU's."""
    X, y, labels = _small_problem()
    _, Z, _ = _cpu_Z(X, 4, 1.0, 0)
    Z32 = Z.astype(np.float32)
    inputs = [Z, Z32, Z.toarray(), Z32.toarray()]

    def kinds(est):
        return (type(est.intercept_), np.asarray(est.intercept_).dtype,
                np.asarray(est.coef_).dtype)

    for cls, target in [(RidgeCG, y), (RidgeCG, np.c_[y, -y]), (RidgeCGClassifier, labels)]:
        for fit_intercept in (True, False):
            for Zfit in (Z32, Z32.toarray(), Z):
                g = cls(fit_intercept=fit_intercept, device="cuda").fit(Zfit, target)
                c = cls(fit_intercept=fit_intercept).fit(Zfit, target)
                assert kinds(g) == kinds(c)
                method = "decision_function" if cls is RidgeCGClassifier else "predict"
                for Zp in inputs:
                    assert getattr(g, method)(Zp).dtype == getattr(c, method)(Zp).dtype
    for cls, target in [(RBRegressor, y), (RBClassifier, labels)]:
        kw = dict(n_grids=8, random_state=0, alpha=1.0, tol=1e-10, dtype=np.float32)
        g = cls(device="cuda", **kw).fit(X, target)
        c = cls(**kw).fit(X, target)
        assert g.coef_.dtype == c.coef_.dtype == np.float32
        assert kinds(g) == kinds(c)
        methods = ["predict"] + (["decision_function", "predict_proba"]
                                 if cls is RBClassifier else [])
        for method in methods:
            out_g, out_c = getattr(g, method)(X), getattr(c, method)(X)
            assert out_g.dtype == out_c.dtype
            np.testing.assert_allclose(out_g.astype(float), out_c.astype(float), atol=1e-4)


@pytest.mark.parametrize("sigma", [1.0, "scale"])
@pytest.mark.parametrize("weights", [-np.ones(100), np.ones(5), np.full(100, np.nan),
                                     np.zeros(100), np.ones((100, 1)), "abc"])
def test_random_binning_checks_weights(numpy_device, sigma, weights):
    """D14: RandomBinning(device="cuda").fit / fit_transform check sample_weight whenever
    it is given, with the CPU's messages (with a numeric sigma they were ignored)."""
    X = np.random.default_rng(0).uniform(size=(100, 3))
    for method in ("fit", "fit_transform"):
        got = {dev: _outcome(lambda: getattr(RandomBinning(sigma=sigma, n_grids=4, device=dev),
                                             method)(X, sample_weight=weights))
               for dev in ("cpu", "cuda")}
        assert got["cuda"] == got["cpu"] and got["cpu"][0][0] == "ValueError"
        assert "sample_weight" in got["cpu"][0][1]


def test_convergence_warning_is_the_cpus(numpy_device):
    """D15: the device CG warns with the CPU's text (rbcd.solvers.cg._warn_unconverged):
    at max_iter, and for a tol below float64's rounding the CPU's hint to use at least
    1e-12; the residuals aside, word for word."""
    import re

    X, y, _ = _small_problem(300, seed=3)
    kw = dict(n_grids=16, random_state=0, alpha=1.0, solver="cg")

    def text(dev, **extra):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            RBRegressor(device=dev, **kw, **extra).fit(X, y)
        found = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
        assert len(found) == 1
        return re.sub(r"residual \S+ >", "residual R >", found[0])

    for extra in (dict(max_iter=3), dict(tol=1e-14, max_iter=48)):
        assert text("cuda", **extra) == text("cpu", **extra)
    assert "Use a tol of at least 1e-12" in text("cuda", tol=1e-14, max_iter=48)


def test_nan_residual_is_not_converged(monkeypatch):
    """A NaN residual norm counts as not converged (the CPU's rule: ~(rnorm <= tol
    scale)), with the CPU's warning; it was reported as converged."""
    X, y, _ = _small_problem()
    _, layout, _ = _xp_fit(X, 4, 1.0, 0)
    real = _ops.cg_p

    def poisoned(xp, partial_rz, partial_rr, *args):
        partial_rr[...] = np.nan                 # every residual norm NaN
        return real(xp, partial_rz, partial_rr, *args)

    monkeypatch.setattr(_ops, "cg_p", poisoned)
    with pytest.warns(ConvergenceWarning, match="RidgeCG did not converge in max_iter=5"):
        info = ccg.solve_ridge(np, layout, y[:, None], alpha=1.0, tol=1e-6, max_iter=5)[3]
    assert not info["converged"].any() and info["stop"][0] == "max_iter"


def test_huge_values_under_scale_give_the_cpus_advice(numpy_device):
    """D16: X too large to bin under sigma="scale": the CPU's message, which says that
    sigma='scale' took sigma from the median distance (the device advised sigma='scale',
    the value in use)."""
    X, y, _ = _small_problem(300, seed=3)
    X[1, 1] = 1e300
    got = {dev: _outcome(lambda: RBRegressor(n_grids=8, alpha=1.0, random_state=0,
                                             device=dev).fit(X, y)) for dev in ("cpu", "cuda")}
    assert got["cuda"] == got["cpu"] and "sigma='scale' took it" in got["cpu"][0][1]
    got = {dev: _outcome(lambda: RandomBinning(n_grids=8, random_state=0, device=dev).fit(X))
           for dev in ("cpu", "cuda")}
    assert got["cuda"] == got["cpu"]


def test_feature_count_error_names_the_model(numpy_device):
    """D17: new rows with another number of features: the CPU's error, naming the model
    at its predict / decision_function / predict_proba (the device named RandomBinning),
    RandomBinning at its own transform, RidgeCG at its predict."""
    X, y, labels = _small_problem()
    for cls, target, methods in [(RBRegressor, y, ["predict"]),
                                 (RBClassifier, labels,
                                  ["predict", "decision_function", "predict_proba"])]:
        fitted = {dev: cls(n_grids=8, alpha=1.0, device=dev).fit(X, target)
                  for dev in ("cpu", "cuda")}
        for method in methods:
            got = {dev: _outcome(lambda: getattr(m, method)(X[:, :2]))
                   for dev, m in fitted.items()}
            assert got["cuda"] == got["cpu"]
            assert f"but {cls.__name__} is expecting 3 features" in got["cpu"][0][1]
        got = {dev: _outcome(lambda: m.binning_.transform(X[:, :2])) for dev, m in fitted.items()}
        assert "but RBRegressor" not in got["cpu"][0][1]
    got = {dev: _outcome(lambda: RandomBinning(n_grids=4, device=dev).fit(X).transform(X[:, :2]))
           for dev in ("cpu", "cuda")}
    assert got["cuda"] == got["cpu"]
    _, Z, _ = _cpu_Z(X, 4, 1.0, 0)
    got = {dev: _outcome(lambda: RidgeCG(device=dev).fit(Z, y).predict(Z[:, :-1]))
           for dev in ("cpu", "cuda")}
    assert got["cuda"] == got["cpu"]


@pytest.mark.parametrize("emulated", [False, True])
def test_layout_from_the_cpu_columns_equals_the_device_binning(emulated):
    """D8: the GridLayout that RidgeCG(device="cuda") builds from the CPU's RBColumns is
    the device binning's own layout of the same Z (labels, CSC pointers and rows, value),
    on numpy and on the CuPy branch."""
    from rbcd.cuda import estimators as ce

    xp = _FakeCupy() if emulated else np
    X = np.random.default_rng(2).uniform(size=(500, 4))
    _, Z, cols = _cpu_Z(X, 8, "scale", 5)
    _, own, _ = _xp_fit(X, 8, "scale", 5)
    lay, structured = ce._layout_of_columns(xp, RidgeCG(), Z, cols)
    assert structured and isinstance(lay, cb.GridLayout) and lay.value == own.value
    for a in ("labels", "col_ptr", "rows", "grid_ptr_host", "piece_order"):
        np.testing.assert_array_equal(np.asarray(getattr(lay, a)), np.asarray(getattr(own, a)))
    assert lay.dtype == np.float64
    lay32, _ = ce._layout_of_columns(xp, RidgeCG(), Z.astype(np.float32),
                                     RandomBinning(n_grids=8, random_state=5).fit(X))
    assert lay32.dtype == np.float32


def test_to_host_copies_device_arrays_only():
    """D5: _ops.to_host calls .get() only on device arrays (CuPy's, or anything with
    __cuda_array_interface__); a pandas object (whose get is a lookup) or any other host
    value goes through np.asarray; host_value keeps scalars (a scalar sample_weight)."""
    pd = pytest.importorskip("pandas")

    class Device:
        __cuda_array_interface__ = {}

        def get(self):
            return np.arange(3.0)

    assert isinstance(_ops.to_host(pd.Series([1.0, 2.0])), np.ndarray)
    np.testing.assert_array_equal(_ops.to_host(pd.DataFrame({"a": [1, 2]})), [[1], [2]])
    np.testing.assert_array_equal(_ops.to_host(Device()), np.arange(3.0))
    assert _ops.on_gpu(Device()) and not _ops.on_gpu(pd.Series([1.0]))
    assert not _ops.on_gpu(np.zeros(2)) and not _ops.on_gpu([1.0])
    assert _ops.host_value(2.5) == 2.5 and _ops.host_value(np.float32(2)) == 2
    assert _ops.host_value(None) is None
    assert isinstance(_ops.host_value(pd.Series([1.0])), np.ndarray)


@pytest.mark.parametrize("class_weight", ["balanced", {0: 1.0, 1: 3.0, 2: 10.0}])
@pytest.mark.parametrize("weighted", [False, True])
def test_auto_alpha_with_class_weight_is_the_cpus(numpy_device, class_weight, weighted):
    """alpha="auto" above the 1,000-row sample with a class_weight: the device fit folds the
    class weights of ALL the training labels into the weights before sampling, as the CPU
    solver does ("balanced" counted on the sample's labels gave 5.48 against the CPU's
    17.16), so the choice is the CPU model's (linear=0)."""
    rng = np.random.default_rng(10)
    n = 3000
    X = rng.uniform(size=(n, 3))
    y = ((X[:, 0] + 0.3 * rng.normal(size=n)) > 0.8).astype(int) + (X[:, 1] > 0.9)
    w = rng.uniform(0.3, 2.0, n) if weighted else None
    kw = dict(n_grids=16, random_state=0, solver="cg", linear=0, tol=1e-6,
              class_weight=class_weight)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = RBClassifier(**kw).fit(X, y, sample_weight=w)
        dev = RBClassifier(device="cuda", **kw).fit(X, y, sample_weight=w)
    assert dev.alpha_ == cpu.alpha_
