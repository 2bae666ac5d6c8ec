"""device="cuda" on a real GPU (marked ``gpu``; skipped without CuPy or a CUDA device):
the CUDA kernels against the CPU results. Z bit for bit, predictions within 1e-6, the
estimators, to_cpu and pickling. tests/test_cuda_xp.py checks the same algorithms on numpy.
"""
import pickle
import warnings

import numpy as np
import pytest

import rbcd.cuda
from rbcd import RandomBinning, RBClassifier, RBRegressor, RidgeCG

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not rbcd.cuda.available(), reason="needs CuPy and a CUDA GPU"),
]


@pytest.fixture(scope="module")
def cp():
    return rbcd.cuda.cupy_module()


def _data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d))
    a, b, c = X[:, 0], X[:, min(1, d - 1)], X[:, min(2, d - 1)]
    y = np.sin(6 * a) + b * c + np.abs(c - 0.5)
    return X, y


def _assert_same_Z(Zg, Zc):
    data, indices, indptr = (a.get() for a in (Zg.data, Zg.indices, Zg.indptr))
    assert indices.dtype == Zc.indices.dtype and indptr.dtype == Zc.indptr.dtype
    assert data.dtype == Zc.data.dtype and Zg.shape == Zc.shape
    np.testing.assert_array_equal(indices, Zc.indices)
    np.testing.assert_array_equal(indptr, Zc.indptr)
    np.testing.assert_array_equal(data, Zc.data)


@pytest.mark.parametrize("n, d, R, sigma", [
    (1, 3, 4, "scale"), (1000, 16, 64, "scale"), (20000, 5, 16, 0.05), (3000, 40, 8, 0.02),
    (50000, 2, 4, 1e-4)])
def test_Z_bit_for_bit(cp, n, d, R, sigma):
    X, _ = _data(n, d)
    X[:, -1] = 0.25  # a constant column
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = RandomBinning(n_grids=R, sigma=sigma, random_state=7)
        Zc, cols = cpu.fit_transform(X, return_columns=True)
        gpu = RandomBinning(n_grids=R, sigma=sigma, random_state=7, device="cuda")
        Zg, layout = gpu.fit_transform(cp.asarray(X), return_columns=True)
    _assert_same_Z(Zg, Zc)
    np.testing.assert_array_equal(layout.col_ptr.get(), cols.indptr)
    np.testing.assert_array_equal(layout.rows.get(), cols.indices)
    np.testing.assert_array_equal(gpu.kappa_per_grid_, cpu.kappa_per_grid_)
    Xt = np.random.default_rng(1).uniform(-0.1, 1.1, size=(777, d))
    Xt[:300] = X[:300] if n >= 300 else Xt[:300]
    _assert_same_Z(gpu.transform(Xt), cpu.transform(Xt))
    # numpy input, and anything with __cuda_array_interface__
    _assert_same_Z(gpu.transform(cp.asarray(Xt)), cpu.transform(Xt))
    assert (gpu.to_cpu().transform(Xt) != cpu.transform(Xt)).nnz == 0


def test_kernels_equal_numpy_twins(cp):
    from rbcd.cuda import _ops
    rng = np.random.default_rng(3)
    X, _ = _data(5000, 6)
    rb = RandomBinning(n_grids=16, random_state=0, device="cuda")
    _, layout = rb.fit_transform(X, return_columns=True)
    for k in (1, 3, 11):
        W = rng.normal(size=(layout.n_columns, k))
        U = rng.normal(size=(layout.n_rows, k))
        got = layout.dot(cp.asarray(W)).get()
        want = _ops.zdot(np, layout.labels.get(), layout.grid_ptr_host, W, layout.value)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        got = layout.tdot(cp.asarray(U)).get()
        part = _ops.piece_sums(np, layout.rows.get(), layout.piece_start.get(),
                               layout.piece_end.get(), U)
        want = _ops.segment_sums(np, part, layout.piece_ptr.get(), layout.value)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_Z_bit_for_bit_at_bin_edges(cp):
    """Entries at and within a few ulps of the grids' bin edges (x = u + k w, nudged):
    where a product by 1 / w and the true division would round to different sides of an
    integer, the key kernels' true division gives the CPU's Z, in fit and in
    transform."""
    n, d, R = 6000, 4, 8
    draw = RandomBinning(n_grids=R, sigma=0.3, random_state=11).fit(np.zeros((2, d)))
    W, U = draw.widths_, draw.offsets_
    rng = np.random.default_rng(12)
    r = rng.integers(0, R, size=(n, d))
    k = rng.integers(-3, 4, size=(n, d)).astype(np.float64)
    cols = np.arange(d)
    X = U[r, cols] + k * W[r, cols]
    X = X + rng.integers(-3, 4, size=(n, d)) * np.spacing(X)
    X[::7] = rng.uniform(-1, 1, size=X[::7].shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = RandomBinning(n_grids=R, sigma=0.3, random_state=11)
        Zc, cols_c = cpu.fit_transform(X, return_columns=True)
        gpu = RandomBinning(n_grids=R, sigma=0.3, random_state=11, device="cuda")
        Zg, layout = gpu.fit_transform(cp.asarray(X), return_columns=True)
    np.testing.assert_array_equal(gpu.widths_, W)
    _assert_same_Z(Zg, Zc)
    np.testing.assert_array_equal(layout.rows.get(), cols_c.indices)
    Xt = X[::-1] + rng.integers(-2, 3, size=X.shape) * np.spacing(X)
    _assert_same_Z(gpu.transform(Xt), cpu.transform(Xt))


@pytest.mark.parametrize("narrow_bits", [0, 32])
@pytest.mark.parametrize("batch_grids", [1, 3, 64])
def test_Z_bit_for_bit_in_batches(cp, monkeypatch, batch_grids, narrow_bits):
    """The grids numbered one by one (the path above 2^23 rows), in batches of 3 and all
    together give the CPU's Z and column layout, sorted as wide or narrow words."""
    from rbcd.cuda import binning as cb
    n = 20000
    monkeypatch.setattr(cb, "BATCH_WORDS", batch_grids * n)
    monkeypatch.setattr(cb, "NARROW_BITS", narrow_bits)
    X, _ = _data(n, 6, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = RandomBinning(n_grids=16, random_state=3)
        Zc, cols = cpu.fit_transform(X, return_columns=True)
        gpu = RandomBinning(n_grids=16, random_state=3, device="cuda")
        Zg, layout = gpu.fit_transform(cp.asarray(X), return_columns=True)
    _assert_same_Z(Zg, Zc)
    np.testing.assert_array_equal(layout.col_ptr.get(), cols.indptr)
    np.testing.assert_array_equal(layout.rows.get(), cols.indices)
    np.testing.assert_array_equal(gpu.kappa_per_grid_, cpu.kappa_per_grid_)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("use_diag", [True, False])
def test_cg_setup_kernel_equals_its_twin(cp, fit_intercept, use_diag):
    """rb_cg_setup (one thread per column, every operation rounded on its own) gives the
    numpy twin's keep, zbar, centred b and Jacobi inverse bit for bit, constant and empty
    columns included."""
    from rbcd.cuda import _ops
    rng = np.random.default_rng(3)
    D, k = 5000, 3
    S = np.float64(37.25)
    value = 0.125
    colsum = value * S * rng.uniform(0.01, 0.9, size=D)
    colsum[:50] = value * S                 # constant columns (every row)
    colsum[50:80] = 0.0
    ZtU = np.c_[colsum, rng.normal(size=(D, k))]
    csY = rng.normal(size=k) if fit_intercept else None
    alpha = np.array([0.5, 2.0, -1e9])
    tiny = 1000 * np.finfo(np.float64).eps
    want = _ops.cg_setup(np, ZtU, value, S, tiny, csY, alpha, use_diag)
    got = _ops.cg_setup(cp, cp.asarray(ZtU), value, cp.asarray(S), tiny,
                        None if csY is None else cp.asarray(csY), cp.asarray(alpha), use_diag)
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_array_equal(g.get(), w)


@pytest.mark.parametrize("fit_intercept, weighted, max_blocks", [
    (True, False, 1024), (False, True, 1024), (True, True, 3)])
def test_cg_step_kernels_against_twin(cp, monkeypatch, fit_intercept, weighted, max_blocks):
    """The CG with its fused step kernels (rb_cg_q, rb_cg_step, rb_cg_dir, rb_cg_p) on the
    GPU against the same solve on the numpy twins and on the CPU: k = 11 targets (two
    launches of 8 and 3), one stopping at once (a zero target), blocks of 256 columns
    whose partial sums every block totals alike; with 3 blocks, each thread takes several
    columns (the grid-stride loop that caps the blocks for large D)."""
    from rbcd.cuda import _ops, binning as cb, cg as ccg
    monkeypatch.setattr(_ops, "CG_MAX_BLOCKS", max_blocks)
    from rbcd.solvers.cg import solve_ridge_cg
    X, y = _data(8000, 5, seed=2)
    Y = np.c_[[np.sin((t + 1) * X[:, 0]) + t * X[:, 1] for t in range(11)]].T
    Y[:, 4] = 0.0
    s = np.random.default_rng(3).uniform(0.2, 3.0, size=X.shape[0]) if weighted else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = RandomBinning(n_grids=32, random_state=1)
        Z, cols = cpu.fit_transform(X, return_columns=True)
        lay_g = cb.fit_layout(RandomBinning(n_grids=32, random_state=1), cp.asarray(X), cp)
        lay_n = cb.fit_layout(RandomBinning(n_grids=32, random_state=1), X, np)
        assert lay_g.n_columns > 4 * 256
        kw = dict(alpha=0.5, fit_intercept=fit_intercept, tol=1e-10)
        c1, b1, _ = solve_ridge_cg(Z, Y, s, columns=cols, **kw)
        cg_, bg, itg, info = ccg.solve_ridge(cp, lay_g, cp.asarray(Y),
                                             None if s is None else cp.asarray(s),
                                             structured=True, **kw)
        cn, bn, itn, _ = ccg.solve_ridge(np, lay_n, Y, s, structured=True, **kw)
    assert info["converged"].all() and itg[4] == 0
    assert np.abs(itg - itn).max() <= 0.1 * itn.max()
    # (the iterates agree to rounding; at tol 1e-10 the solutions agree to about 1e-8)
    np.testing.assert_allclose(cg_, cn, atol=1e-6)
    np.testing.assert_allclose(cg_, c1, atol=1e-6)
    np.testing.assert_allclose(bg, b1, atol=1e-6)


@pytest.mark.parametrize("shared_scale", [False, True])
@pytest.mark.parametrize("max_iter, weighted", [(None, False), (None, True), (6, False)])
def test_device_stopping_equals_host_loop(cp, capsys, max_iter, weighted, shared_scale):
    """solve_ridge's default loop (host_lag=1: rb_cg_p keeps the active mask on the device,
    the host reads it one iteration late through pinned copies) against the host's own
    decision after every iteration (host_lag=0): the same coef, intercept, n_iter and info
    bit for bit, and the same verbose lines; k = 11 targets (two launches of 8 and 3)
    stopping at different iterations, a zero one at once; max_iter reached with the same
    ConvergenceWarning. shared_scale (the classifiers' rule: every target held to tol times
    the largest ||b||, state row 2): the same agreement, and no target runs longer than
    on its own scale."""
    from sklearn.exceptions import ConvergenceWarning
    from rbcd.cuda import binning as cb, cg as ccg
    X, _ = _data(8000, 5, seed=4)
    rng = np.random.default_rng(4)
    Y = np.c_[[np.sin((t + 1) * X[:, 0]) * 10.0 ** (t - 5) + t * X[:, 1] for t in range(11)]].T
    Y[:, 4] = 0.0
    Y[:, 7] += 0.1 * rng.normal(size=X.shape[0])   # a rough target: many iterations
    s = cp.asarray(rng.uniform(0.2, 3.0, size=X.shape[0])) if weighted else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lay = cb.fit_layout(RandomBinning(n_grids=32, random_state=1), cp.asarray(X), cp)
    outs, warned, printed = [], [], []
    for lag in (0, 1):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outs.append(ccg.solve_ridge(cp, lay, cp.asarray(Y), s, alpha=0.5, tol=1e-10,
                                        max_iter=max_iter, structured=True, verbose=2,
                                        host_lag=lag, shared_scale=shared_scale))
        warned.append([str(w.message) for w in caught
                       if issubclass(w.category, ConvergenceWarning)])
        printed.append(capsys.readouterr().out)
    (c0, b0, it0, info0), (c1, b1, it1, info1) = outs
    for a, b in [(c0, c1), (b0, b1), (it0, it1)] + [(info0[key], info1[key])
                                                     for key in info0 if key != "graph"]:
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    assert warned[1] == warned[0] and printed[1] == printed[0]
    assert it1[4] == 0 and len(printed[1].splitlines()) == it1.max()
    if max_iter is None:
        assert info1["converged"].all() and not warned[1]
        assert len(set(it1[it1 > 0].tolist())) >= (2 if shared_scale else 3)
        if shared_scale:
            own = ccg.solve_ridge(cp, lay, cp.asarray(Y), s, alpha=0.5, tol=1e-10,
                                  structured=True)[2]
            assert np.all(it1 <= own) and np.any(it1 < own)
    else:
        assert it1.max() == max_iter and len(warned[1]) == 1


@pytest.mark.parametrize("n, d", [(1, 3), (1000, 16), (200000, 7), (300, 600), (50, 2000)])
def test_column_extremes_kernel(cp, n, d):
    from rbcd.cuda import _ops
    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-300, 300, size=(1, d))
    cmin, cmax, finite = _ops.column_extremes(cp, cp.asarray(X))
    assert finite
    np.testing.assert_array_equal(cmin, X.min(axis=0))
    np.testing.assert_array_equal(cmax, X.max(axis=0))
    for bad in (np.nan, np.inf, -np.inf):
        Y = X.copy()
        Y[rng.integers(n), rng.integers(d)] = bad
        assert _ops.column_extremes(cp, cp.asarray(Y))[2] is False
    if n > 1:
        Y = X.copy()
        Y[n // 2, d - 1] = np.nan
        with pytest.raises(ValueError) as cpu_err:
            RandomBinning(n_grids=2, random_state=0).fit(Y)
        with pytest.raises(ValueError) as gpu_err:
            RandomBinning(n_grids=2, random_state=0, device="cuda").fit(cp.asarray(Y))
        assert str(gpu_err.value) == str(cpu_err.value)


def test_regressor_and_classifier(cp):
    X, y = _data(20000, 16)
    Xt, _ = _data(4000, 16, seed=1)
    kw = dict(n_grids=64, random_state=0, tol=1e-10, alpha=None)
    g = RBRegressor(device="cuda", **kw).fit(cp.asarray(X), cp.asarray(y))
    c = RBRegressor(**kw).fit(X, y)
    pg = g.predict(Xt)
    assert isinstance(pg, np.ndarray)
    np.testing.assert_allclose(pg, c.predict(Xt), atol=1e-6)
    np.testing.assert_allclose(pickle.loads(pickle.dumps(g)).predict(Xt), pg, atol=1e-12)
    cpu = g.to_cpu()
    np.testing.assert_allclose(pickle.loads(pickle.dumps(cpu)).predict(Xt), pg, atol=1e-12)
    labels = (X[:, 0] + X[:, 1] > 1).astype(int) + (X[:, 2] > 0.7)
    gc = RBClassifier(device="cuda", **kw).fit(X, labels)
    cc = RBClassifier(**kw).fit(X, labels)
    np.testing.assert_allclose(gc.decision_function(Xt), cc.decision_function(Xt), atol=1e-6)
    np.testing.assert_allclose(gc.predict_proba(Xt), cc.predict_proba(Xt), atol=1e-6)


def test_ridge_on_device_matrices(cp):
    import cupyx.scipy.sparse as csp
    X, y = _data(3000, 4)
    Zc = RandomBinning(n_grids=16, random_state=2).fit_transform(X)
    cpu = RidgeCG(alpha=0.5, tol=1e-11).fit(Zc, y)
    for Z in (csp.csr_matrix(Zc), cp.asarray(Zc.toarray())):
        gpu = RidgeCG(alpha=0.5, tol=1e-11, device="cuda").fit(Z, cp.asarray(y))
        np.testing.assert_allclose(gpu.coef_, cpu.coef_, atol=1e-8)
        np.testing.assert_allclose(gpu.predict(Z), cpu.predict(Zc), atol=1e-8)


@pytest.mark.parametrize("n, R, sigma", [
    (300_000, 16, "scale"),   # coarse grids: columns of many pieces
    (50_000, 8, 0.02),        # fine grids: many short columns
    (20_000, 6, 0.2),
])
def test_products_on_device(cp, n, R, sigma):
    """GridLayout.tdot and .dot equal scipy's products, and tdot is deterministic (the
    same bits twice: no atomics)."""
    X, _ = _data(n, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rb = RandomBinning(n_grids=R, sigma=sigma, random_state=0, device="cuda")
        Zg, layout = rb.fit_transform(X, return_columns=True)
    Zc = Zg.get()
    rng = np.random.default_rng(5)
    for k in (1, 3, 11):
        U = rng.normal(size=(n, k))
        Ud = cp.asarray(U)
        got = layout.tdot(Ud)
        np.testing.assert_array_equal(layout.tdot(Ud).get(), got.get())   # deterministic
        np.testing.assert_allclose(got.get(), Zc.T @ U, rtol=1e-10, atol=1e-9)
        W = rng.normal(size=(layout.n_columns, k))
        np.testing.assert_allclose(layout.dot(cp.asarray(W)).get(), Zc @ W, rtol=1e-12,
                                   atol=1e-11)


@pytest.mark.parametrize("max_iter, weighted", [(None, False), (None, True), (7, False)])
def test_graph_replay_equals_queued_loop(cp, max_iter, weighted):
    """solve_ridge(graph=True): pairs of iterations replayed from a captured CUDA graph
    (info["graph"] True: the capture worked, nothing allocated during it) give the
    default loop's coef, intercept, n_iter and info bit for bit; 11 targets (two launches
    of the step kernels), an odd max_iter (the last iteration unpaired)."""
    from rbcd.cuda import binning as cb, cg as ccg
    X, _ = _data(20000, 5, seed=6)
    rng = np.random.default_rng(6)
    Y = np.c_[[np.sin((t + 1) * X[:, 0]) * 10.0 ** (t - 5) + t * X[:, 1] for t in range(11)]].T
    Y[:, 4] = 0.0
    s = cp.asarray(rng.uniform(0.2, 3.0, size=X.shape[0])) if weighted else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lay = cb.fit_layout(RandomBinning(n_grids=32, random_state=1), cp.asarray(X), cp)
        outs = [ccg.solve_ridge(cp, lay, cp.asarray(Y), s, alpha=0.5, tol=1e-10,
                                max_iter=max_iter, structured=True, graph=graph)
                for graph in (False, True)]
    (c0, b0, it0, info0), (c1, b1, it1, info1) = outs
    assert info1["graph"] is True and info0["graph"] is False
    for a, b in [(c0, c1), (b0, b1), (it0, it1)] + [(info0[key], info1[key])
                                                     for key in info0 if key != "graph"]:
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if max_iter is not None:
        assert it1.max() == max_iter


def test_graph_replay_one_target(cp):
    """One target (the benchmark's case): the graph loop captures (info["graph"]: its dot
    products are the step kernels' partial sums, which allocate nothing) and gives the
    default loop's results bit for bit."""
    from rbcd.cuda import binning as cb, cg as ccg
    X, y = _data(50000, 8, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lay = cb.fit_layout(RandomBinning(n_grids=32, random_state=2), cp.asarray(X), cp)
        for s in (None, cp.asarray(np.random.default_rng(7).uniform(0.5, 2.0, 50000))):
            outs = [ccg.solve_ridge(cp, lay, cp.asarray(y.reshape(-1, 1)), s, alpha=5.0,
                                    tol=1e-8, structured=True, graph=graph)
                    for graph in (False, True)]
            (c0, b0, it0, _), (c1, b1, it1, info1) = outs
            assert info1["graph"] is True
            for a, b in [(c0, c1), (b0, b1), (it0, it1)]:
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_weighted_and_huge_scale_sigma_as_the_cpu(cp):
    """sigma="scale" on the device: pairs drawn over weight units (integer weights give
    the rows repeated; weight 0 the row removed) and huge data's distances taken down
    by a power of two, the CPU's sigma_ and Z bit for bit."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(3000, 6))
    w = rng.integers(0, 3, 3000).astype(float)
    kw = dict(n_grids=16, random_state=3)
    cpu = RandomBinning(**kw).fit(X, sample_weight=w)
    gpu = RandomBinning(device="cuda", **kw).fit(cp.asarray(X), sample_weight=cp.asarray(w))
    assert gpu.sigma_ == cpu.sigma_ != RandomBinning(**kw).fit(X).sigma_
    np.testing.assert_array_equal(gpu.widths_, cpu.widths_)
    _assert_same_Z(gpu.transform(X), cpu.transform(X))
    rep = np.repeat(X, w.astype(int), axis=0)
    assert RandomBinning(device="cuda", **kw).fit(rep).sigma_ == gpu.sigma_
    huge = X * 2.0 ** 600
    hc = RandomBinning(**kw).fit(huge)
    hg = RandomBinning(device="cuda", **kw).fit(cp.asarray(huge))
    assert np.isfinite(hg.sigma_) and hg.sigma_ == hc.sigma_ == \
        RandomBinning(**kw).fit(X).sigma_ * 2.0 ** 600
    _assert_same_Z(hg.transform(huge), hc.transform(huge))


def test_cg_alpha_zero_minimum_norm_on_device(cp):
    """alpha=0 with more bins than rows: the device CG drops the preconditioner as the
    CPU's does, and both reach the minimum-norm least-squares solution (RidgeCG on a device
    matrix, and RBRegressor on its own layout)."""
    import cupyx.scipy.sparse as csp
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(300, 4))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2
    Z = RandomBinning(n_grids=16, sigma=1.0, random_state=0).fit_transform(X)
    assert Z.shape[1] > Z.shape[0]
    Zd = Z.toarray()
    w = np.linalg.lstsq(Zd - Zd.mean(axis=0), y - y.mean(), rcond=None)[0]   # minimum norm
    kw = dict(alpha=0.0, tol=1e-12, max_iter=100000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = RidgeCG(**kw).fit(Z, y)
        gpu = RidgeCG(device="cuda", **kw).fit(csp.csr_matrix(Z), cp.asarray(y))
        mkw = dict(n_grids=16, sigma=1.0, random_state=0, solver="cg", **kw)
        mc = RBRegressor(**mkw).fit(X, y)
        mg = RBRegressor(device="cuda", **mkw).fit(cp.asarray(X), cp.asarray(y))
    np.testing.assert_allclose(cpu.coef_, w, atol=1e-6)
    np.testing.assert_allclose(gpu.coef_, w, atol=1e-6)
    Xt = rng.uniform(-1, 1, size=(200, 4))
    np.testing.assert_allclose(mg.predict(Xt), mc.predict(Xt), atol=1e-6)
