"""rbcd.dask against the single-machine estimators on a LocalCluster started here.

distributed == local: Z bit for bit (exact and hashed, any chunking, uneven and empty
partitions), sigma="scale", RidgeCG to 1e-10 relative, CD to the same optimum, the models'
predictions; bad input errors; a lost worker; a worker memory limit below the size of Z.
"""
import os
import warnings

from sklearn.exceptions import ConvergenceWarning

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("distributed")
import dask  # noqa: E402
import dask.array as da  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

import rbcd  # noqa: E402
import rbcd.dask as rd  # noqa: E402
from rbcd import _scale  # noqa: E402
from rbcd.dask import _data  # noqa: E402
from rbcd.dask.binning import scale_sigma  # noqa: E402
from rbcd.solvers._blocks import GridBlock, grid_block  # noqa: E402


def _cluster(**kw):
    opts = dict(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
    opts.update(kw)
    return LocalCluster(**opts)


@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = _cluster()
        c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def gather_Z(Zd):
    """The CSR blocks of a dask Z, stacked (as the single machine would hold Z)."""
    blocks = dask.compute(*Zd.to_delayed().ravel())
    for b in blocks:
        assert sp.isspmatrix_csr(b)
    return sp.vstack(blocks, format="csr") if blocks else None


def assert_same_Z(Zd, Z):
    G = gather_Z(Zd)
    assert G.shape == Z.shape
    assert np.array_equal(G.indptr, Z.indptr)
    assert np.array_equal(G.indices, Z.indices)
    assert np.array_equal(G.data, Z.data)
    assert G.data.dtype == Z.data.dtype


def data(n=3000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    return X, y


CHUNKINGS = [
    (3000,),                              # one partition
    (1500, 1500),
    (700, 0, 1300, 1, 999, 0),            # uneven, empty and one-row partitions
    (375,) * 8,                           # a deeper reduction tree
]


# ---------------------------------------------------------------------------- binning
@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_exact_binning_equals_local_for_any_chunking(client, chunks):
    X, _ = data()
    Xd = da.from_array(X, chunks=(chunks, 3))
    drb = rd.RandomBinning(n_grids=16, sigma=1.5, random_state=3)
    Zd = drb.fit_transform(Xd)
    assert Zd.chunks[0] == tuple(chunks)
    assert sp.isspmatrix_csr(Zd._meta)
    lrb = rbcd.RandomBinning(n_grids=16, sigma=1.5, random_state=3)
    Z = lrb.fit_transform(X)
    assert_same_Z(Zd, Z)
    assert np.array_equal(drb.grid_ptr_, lrb.grid_ptr_)
    assert np.array_equal(drb.n_bins_, lrb.n_bins_)
    assert np.array_equal(drb.widths_, lrb.widths_) and np.array_equal(drb.offsets_, lrb.offsets_)
    assert drb.kappa_ == lrb.kappa_
    assert np.array_equal(drb.kappa_per_grid_, lrb.kappa_per_grid_)
    # new rows (some far from the training data: bins never seen give no entry)
    Xn = np.vstack([data(500, seed=1)[0], 10 * data(50, seed=2)[0]])
    assert_same_Z(drb.transform(da.from_array(Xn, chunks=((200, 0, 350), 3))), lrb.transform(Xn))


def test_exact_binning_constant_columns_and_duplicates(client):
    """Columns constant in some partitions (or in all), duplicated rows and a one-row
    partition: Z, the tables and the diagnostics are still the local fit's."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(900, 4))
    X[:, 1] = 2.5                                  # constant everywhere
    X[:400, 2] = -1.0                              # constant in the first partitions only
    X[500:700] = X[100:300]                        # duplicated rows across partitions
    chunks = (200, 200, 1, 99, 0, 400)
    drb = rd.RandomBinning(n_grids=12, sigma=1.0, random_state=5)
    Zd = drb.fit_transform(da.from_array(X, chunks=(chunks, 4)))
    lrb = rbcd.RandomBinning(n_grids=12, sigma=1.0, random_state=5)
    assert_same_Z(Zd, lrb.fit_transform(X))
    assert np.array_equal(drb.n_bins_, lrb.n_bins_)
    assert np.array_equal(drb.kappa_per_grid_, lrb.kappa_per_grid_)
    Xn = X[::7] + np.array([0.0, 0.0, 0.3, 0.0])   # new rows, some off the constant's bin
    assert_same_Z(drb.transform(da.from_array(Xn, chunks=50)), lrb.transform(Xn))


def test_first_rows_and_relabel_kernels():
    from rbcd.dask import _kernels

    # two grids; local ids by first appearance: grid 0 = 0 1 0 2, grid 1 = 0 0 1 1
    ids = np.array([0, 0, 1, 0, 0, 1, 2, 1], dtype=np.int32)
    local_ptr = np.array([0, 3, 5], dtype=np.int64)
    first = np.empty(5, dtype=np.int64)
    counts = np.empty(5, dtype=np.int64)
    _kernels.first_rows(ids, local_ptr, first, counts)
    assert first.tolist() == [0, 1, 3, 0, 2]
    assert counts.tolist() == [2, 1, 1, 2, 2]
    bad = ids.copy()
    bad[2] = 2                                      # grid 0's id 2 before id 1
    with pytest.raises(ValueError, match="first-appearance"):
        _kernels.first_rows(bad, local_ptr, first, counts)
    with pytest.raises(ValueError, match="first-appearance"):   # fewer bins than n_bins
        _kernels.first_rows(ids, np.array([0, 4, 6], dtype=np.int64), np.empty(6, np.int64),
                            np.empty(6, np.int64))
    table = np.array([10, 11, 12, 20, 21], dtype=np.int64)
    data = np.empty(8, dtype=np.float32)
    _kernels.relabel(ids, local_ptr, table, data, 0.5, 2)
    assert ids.tolist() == [10, 20, 11, 20, 10, 21, 12, 21]
    assert np.all(data == np.float32(0.5))


def _grid_step_reference(loss, lab_prev, dz, lab, u, y, s, nb):
    """The grid step in numpy: apply the move, then the bin sums of s loss'."""
    from rbcd.solvers._stopping import loss_deriv

    if lab_prev is not None:
        u = u + dz[lab_prev]
    p = u + y if loss == "squared" else u
    d = loss_deriv(loss, p, y) * (1.0 if s is None else s)
    return u, np.bincount(lab, weights=d, minlength=nb)


@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge"])
@pytest.mark.parametrize("weighted", [False, True])
def test_grid_step_kernel(loss, weighted):
    """The fused step equals a numpy reference and gives the same bits on 1 and 2 threads
    (fixed row blocks: 8 of them for 200,000 rows and the 300 bins of a grid; one for the
    70,000 bins of another)."""
    from rbcd.dask import _kernels
    from rbcd.dask.cd import LOSS_CODES
    from rbcd.solvers._stopping import loss_deriv

    n, nb0, nb1 = 200_000, 300, 70_000               # the second grid has int32 labels
    assert _kernels.block_rows(n, nb0) == 8 and _kernels.block_rows(n, nb1) == 1
    rng = np.random.default_rng(0)
    lab0 = rng.integers(0, nb0, n).astype(np.uint16)
    lab1 = rng.integers(0, nb1, n).astype(np.int32)
    dz = rng.normal(size=nb0) * (rng.random(nb0) < 0.5)
    y = rng.normal(size=n) if loss == "squared" else np.where(rng.random(n) < 0.5, -1.0, 1.0)
    s = rng.random(n) if weighted else None
    p0 = rng.normal(size=n)
    u0 = p0 - y if loss == "squared" else p0
    ref_u, ref = _grid_step_reference(loss, lab0, dz, lab1, u0, y, s, nb1)
    ref_u0, ref0 = _grid_step_reference(loss, lab0, dz, lab0, u0, y, s, nb0)
    outs = []
    # the logistic loss also with its state exp(y p), moved by the bins' factors
    kept = (False, True) if loss == "logistic" else (False,)
    for threads in (1, 2):
        for with_ex in kept:
            for lab, nb, r_u, r in ((lab1, nb1, ref_u, ref), (lab0, nb0, ref_u0, ref0)):
                u = u0.copy()
                dv = u if loss == "squared" else np.ascontiguousarray(loss_deriv(loss, p0, y))
                ex = np.exp(y * p0) if with_ex else np.zeros(0)
                out = np.empty(nb)
                part = np.empty((_kernels.block_rows(n, nb), nb))
                _kernels.grid_step(lab0, dz, lab, u, dv, ex, y,
                                   np.zeros(0) if s is None else s, LOSS_CODES[loss], part,
                                   out, threads)
                np.testing.assert_allclose(u, r_u, rtol=0, atol=1e-15)
                np.testing.assert_allclose(out, r, rtol=1e-12, atol=1e-12)
                if with_ex:
                    np.testing.assert_allclose(ex, np.exp(y * u), rtol=1e-14)
                    np.testing.assert_allclose(dv, loss_deriv(loss, u, y), rtol=1e-14,
                                               atol=1e-300)
                outs.append(out)
    k = len(outs) // 2
    for a_, b_ in zip(outs[:k], outs[k:]):   # 1 thread and 2 threads: the same bits
        assert np.array_equal(a_, b_)


def test_exact_binning_random_state_generator_and_float32(client):
    X, _ = data(1200)
    Xd = da.from_array(X.astype(np.float32), chunks=((400, 800), 3))
    g1, g2 = np.random.default_rng(7), np.random.default_rng(7)
    drb = rd.RandomBinning(n_grids=8, sigma=1.0, random_state=g1, dtype=np.float32)
    lrb = rbcd.RandomBinning(n_grids=8, sigma=1.0, random_state=g2, dtype=np.float32)
    assert_same_Z(drb.fit_transform(Xd), lrb.fit_transform(X.astype(np.float32)))
    # the user's generator advanced as by the local fit
    assert g1.integers(1 << 30) == g2.integers(1 << 30)


@pytest.mark.parametrize("chunks", [(3000,), (700, 0, 1300, 1, 999, 0)])
def test_hashed_binning_equals_local(client, chunks):
    X, _ = data()
    Xd = da.from_array(X, chunks=(chunks, 3))
    drb = rd.RandomBinning(n_grids=16, sigma=0.5, n_features=97, random_state=0)
    lrb = rbcd.RandomBinning(n_grids=16, sigma=0.5, n_features=97, random_state=0)
    assert_same_Z(drb.fit_transform(Xd), lrb.fit_transform(X))
    assert drb.grid_ptr_ is None and drb.n_features_out_ == 97
    Xn = data(300, seed=5)[0]
    assert_same_Z(drb.transform(Xn), lrb.transform(Xn))


def test_scale_sigma_equals_local_rule(client):
    X, _ = data(5000, d=4)
    for chunks in [(5000,), (1000, 0, 2500, 1500)]:
        assert scale_sigma(da.from_array(X, chunks=(chunks, 4))) == _scale.scale_sigma(X)
    # fallbacks: mostly duplicates (median 0 -> mean of non-zero), constant data (-> 1.0)
    Xdup = np.zeros((400, 2))
    Xdup[:5] = np.arange(10).reshape(5, 2)
    assert scale_sigma(da.from_array(Xdup, chunks=150)) == _scale.scale_sigma(Xdup)
    assert scale_sigma(da.from_array(np.ones((50, 3)), chunks=20)) == _scale.scale_sigma(np.ones((50, 3)))
    huge = X * 2.0 ** 600                 # computed down by a power of two, as locally
    assert scale_sigma(da.from_array(huge, chunks=(700, 4))) == _scale.scale_sigma(huge)
    drb = rd.RandomBinning(n_grids=8, sigma="scale", random_state=0).fit(da.from_array(X, chunks=(700, 4)))
    assert drb.sigma_ == _scale.scale_sigma(X)
    lrb = rbcd.RandomBinning(n_grids=8, sigma=_scale.scale_sigma(X), random_state=0).fit(X)
    assert np.array_equal(drb.widths_, lrb.widths_)
    # sample_weight: the pairs drawn over weight units, as locally (integer and fractional
    # weights, zeros, an empty partition)
    rng = np.random.default_rng(1)
    for w in (rng.integers(0, 4, 5000).astype(float), rng.uniform(0.0, 2.0, 5000)):
        w[:700] = 0.0
        wd = da.from_array(w, chunks=((1000, 0, 2500, 1500),))
        Xd = da.from_array(X, chunks=((1000, 0, 2500, 1500), 4))
        assert scale_sigma(Xd, sample_weight=wd) == _scale.scale_sigma(X, sample_weight=w)
        drb = rd.RandomBinning(n_grids=8, random_state=0).fit(Xd, sample_weight=w)
        assert drb.sigma_ == rbcd.RandomBinning(n_grids=8, random_state=0).fit(
            X, sample_weight=w).sigma_


def test_dataframe_and_numpy_input(client):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y = data(900)
    df = dd.from_pandas(pd.DataFrame(X, columns=list("abc")), npartitions=3)
    drb = rd.RandomBinning(n_grids=8, random_state=0)
    Z = rbcd.RandomBinning(n_grids=8, random_state=0).fit_transform(X)
    assert_same_Z(drb.fit_transform(df), Z)            # lengths computed from the frame
    assert_same_Z(rd.RandomBinning(n_grids=8, random_state=0).fit_transform(X), Z)  # numpy
    m = rd.RBRegressor(n_grids=8, random_state=0, tol=1e-10).fit(df, dd.from_pandas(pd.Series(y), npartitions=2))
    # rbcd.dask fits no linear term; the local model's linear="auto" adds one to a regression
    # of at most 1,000 rows
    local = rbcd.RBRegressor(n_grids=8, random_state=0, tol=1e-10, solver="cg",
                             linear=0).fit(X, y)
    np.testing.assert_allclose(m.predict(df).compute(), local.predict(X), rtol=1e-8, atol=1e-9)


# ---------------------------------------------------------------------------- ridge CG
def _rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(np.max(np.abs(b)), 1e-300)


def _count_calls(monkeypatch, cls, name):
    """Count calls of cls.name (in-process workers share this module's classes)."""
    calls = {"n": 0}
    orig = getattr(cls, name)

    def counted(self, *a, **k):
        calls["n"] += 1
        return orig(self, *a, **k)

    monkeypatch.setattr(cls, name, counted)
    return calls


@pytest.mark.parametrize("n_grids, k", [(8, 1), (8, 3), (3, 2)])
def test_grid_block_products_equal_the_local_operator(n_grids, k):
    """A block's label products are bitwise the local RidgeCG operator's on the same rows,
    for any thread count; and the centred, weighted share of the operator is right."""
    from rbcd.solvers.cg import _Products

    X, _ = data(700, d=2)
    rb = rbcd.RandomBinning(n_grids=n_grids, sigma=0.7, random_state=0)
    Z, cols = rb.fit_transform(X, return_columns=True)
    gb = grid_block(Z, rb.grid_ptr_)
    assert gb is not None and gb.n_rows == 700 and gb.n_cols == Z.shape[1]
    for a, b in zip(gb.labels, cols.grid_labels):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    op = _Products(Z, 2, columns=cols)
    rng = np.random.default_rng(3)
    V = rng.normal(size=(Z.shape[1], k))
    U = rng.normal(size=(700, k))
    s = rng.uniform(0.5, 2.0, size=700)
    for nt in (1, 2, 3):
        assert np.array_equal(gb.dot(V, nt), op.dot(V))
        assert np.array_equal(gb.tdot(U, nt), op.tdot(U))
        cs, cq = gb.col_stats(s, nt)
        ls, lq = op.col_stats(s)
        assert np.array_equal(cs, ls) and np.array_equal(cq, lq)
    zbar = rng.normal(size=Z.shape[1])
    zP = zbar @ V
    Q, t = gb.gram_apply(V, zP, s, 2)
    T = s[:, None] * (Z @ V - zP)
    np.testing.assert_allclose(Q, Z.T @ T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(t, T.sum(axis=0), rtol=1e-12, atol=1e-12)
    # int64 indices take the general builder: the same labels
    Z64 = sp.csr_matrix(Z, copy=True)
    Z64.indices = Z64.indices.astype(np.int64)
    Z64.indptr = Z64.indptr.astype(np.int64)
    gb64 = grid_block(Z64, rb.grid_ptr_)
    assert gb64.indices.dtype == np.int64
    assert all(np.array_equal(a, b) for a, b in zip(gb64.labels, gb.labels))
    assert np.array_equal(gb64.dot(V, 2), op.dot(V))
    # not training rows (a row misses a grid), non-constant values, dense: no GridBlock
    Zt = rb.transform(X + 50.0)
    assert grid_block(Zt, rb.grid_ptr_) is None
    assert grid_block(Z * sp.diags(np.arange(1.0, Z.shape[1] + 1)), rb.grid_ptr_) is None
    assert grid_block(Z.toarray(), rb.grid_ptr_) is None
    # a grid structure that is not Z's
    gp = rb.grid_ptr_.copy()
    gp[1] -= 1
    assert grid_block(Z, gp) is None
    # pickling (spilled, moved between workers) keeps the products
    import pickle

    gb2 = pickle.loads(pickle.dumps(gb))
    assert np.array_equal(gb2.tdot(U, 2), op.tdot(U))


def test_return_columns_and_columns_checks(client):
    X, y = data(900)
    drb = rd.RandomBinning(n_grids=8, sigma=2.0, random_state=0)
    Zd, cols = drb.fit_transform(da.from_array(X, chunks=((400, 0, 500), 3)), return_columns=True)
    lrb = rbcd.RandomBinning(n_grids=8, sigma=2.0, random_state=0)
    Z, lcols = lrb.fit_transform(X, return_columns=True)
    assert isinstance(cols, rd.PartitionedColumns)
    assert np.array_equal(cols.grid_ptr, lcols.grid_ptr) and cols.value == lcols.value
    assert cols.n_rows == 900 and cols.chunks == (400, 0, 500) and cols.n_grids == 8
    assert cols.n_columns == Z.shape[1]
    with pytest.raises(ValueError, match="exact mode"):
        rd.RandomBinning(n_grids=4, n_features=64).fit_transform(X, return_columns=True)
    # the local RBColumns and a fitted binning give the same structure, hence the same fit
    m1 = rd.RidgeCG(alpha=3.0, tol=1e-12).fit(Zd, y, columns=cols)
    m2 = rd.RidgeCG(alpha=3.0, tol=1e-12).fit(Zd, y, columns=lcols)
    m3 = rd.RidgeCG(alpha=3.0, tol=1e-12).fit(Zd, y, columns=drb)
    assert np.array_equal(m1.coef_, m2.coef_) and np.array_equal(m1.coef_, m3.coef_)
    with pytest.raises(ValueError, match="grid structure"):
        rd.RidgeCG().fit(Zd, y, columns=rd.RandomBinning(n_features=64))
    other = rbcd.RandomBinning(n_grids=8, sigma=0.5, random_state=1).fit(X)
    with pytest.raises(ValueError, match="columns are not the grid structure"):
        rd.RidgeCG().fit(Zd, y, columns=other)


@pytest.mark.parametrize("fit_intercept, weighted, structure",
                         [(True, False, True), (True, True, False), (False, True, True),
                          (False, False, False)])
def test_ridge_cg_equals_local(client, monkeypatch, fit_intercept, weighted, structure):
    X, y = data(2000)
    rng = np.random.default_rng(1)
    s = rng.uniform(0.2, 3.0, size=2000) if weighted else None
    Xd = da.from_array(X, chunks=((600, 0, 1100, 300), 3))
    drb = rd.RandomBinning(n_grids=16, sigma=2.0, random_state=0)
    Zd, cols = drb.fit_transform(Xd, return_columns=True)
    Z = rbcd.RandomBinning(n_grids=16, sigma=2.0, random_state=0).fit_transform(X)
    calls = _count_calls(monkeypatch, GridBlock, "gram_apply")
    m = rd.RidgeCG(alpha=3.0, fit_intercept=fit_intercept, tol=1e-12, max_iter=3000).fit(
        Zd, y, sample_weight=s, columns=cols if structure else None)
    # with the structure every non-empty partition runs the grid-label kernels
    assert (calls["n"] >= 3 * m.n_iter_[0]) if structure else calls["n"] == 0
    local = rbcd.RidgeCG(alpha=3.0, fit_intercept=fit_intercept, tol=1e-12, max_iter=3000).fit(
        Z, y, sample_weight=s)
    assert _rel(m.coef_, local.coef_) <= 1e-10
    assert abs(m.intercept_ - local.intercept_) <= 1e-10 * max(1.0, abs(local.intercept_))
    pred = m.predict(Zd)
    assert isinstance(pred, da.Array)
    assert _rel(pred.compute(), local.predict(Z)) <= 1e-10


def test_ridge_cg_multi_target_and_same_result_twice(client, monkeypatch):
    X, y = data(1500)
    Y = np.column_stack([y, X[:, 2], -y])
    Zd = rd.RandomBinning(n_grids=8, sigma=1.0, random_state=0).fit_transform(
        da.from_array(X, chunks=(500, 3)))
    Z = rbcd.RandomBinning(n_grids=8, sigma=1.0, random_state=0).fit_transform(X)
    alpha = [1.0, 3.0, 10.0]
    m = rd.RidgeCG(alpha=alpha, tol=1e-12, max_iter=3000).fit(Zd, da.from_array(Y, chunks=(300, 3)))
    local = rbcd.RidgeCG(alpha=alpha, tol=1e-12, max_iter=3000).fit(Z, Y)
    assert m.coef_.shape == local.coef_.shape == (3, Z.shape[1])
    assert _rel(m.coef_, local.coef_) <= 1e-10
    # the reduction order is the partition order: a second fit gives the same bits, also
    # when the search directions are scattered to the workers instead of sent in the tasks
    from rbcd.dask import _blocks

    monkeypatch.setattr(_blocks, "SCATTER_BYTES", 0)
    m2 = rd.RidgeCG(alpha=alpha, tol=1e-12, max_iter=3000).fit(Zd, Y)
    assert np.array_equal(m.coef_, m2.coef_) and np.array_equal(m.n_iter_, m2.n_iter_)
    # a scipy matrix on the driver is cut into one partition per worker
    m3 = rd.RidgeCG(alpha=alpha, tol=1e-12, max_iter=3000).fit(Z, Y)
    assert _rel(m3.coef_, local.coef_) <= 1e-10


# ---------------------------------------------------------------------------- CD
def test_cd_regressor_reaches_the_local_optimum(client):
    X, y = data(2000)
    Xd = da.from_array(X, chunks=((900, 0, 1100), 3))
    drb = rd.RandomBinning(n_grids=8, sigma=2.0, random_state=0)
    Zd = drb.fit_transform(Xd)
    lrb = rbcd.RandomBinning(n_grids=8, sigma=2.0, random_state=0)
    Z = lrb.fit_transform(X)
    kw = dict(alpha=1e-2, l1_ratio=0.7, tol=1e-6, max_epochs=1000, random_state=0)
    m = rd.CDRegressor(**kw).fit(Zd, y, columns=drb)
    local = rbcd.CDRegressor(parallel="grid", **kw).fit(Z, y, columns=lrb)
    assert m.dual_gap_ <= 1e-6 and local.dual_gap_ <= 1e-6
    # both within the gap of the same optimum: equal objectives, close coefficients
    assert abs(m.objective_history_[-1] - local.objective_history_[-1]) <= 2e-6 * local.objective_history_[-1]
    np.testing.assert_allclose(m.coef_, local.coef_, atol=1e-2 * np.max(np.abs(local.coef_)))
    assert np.all(np.diff(m.objective_history_) <= 1e-12)   # block CD: monotone
    np.testing.assert_allclose(m.predict(Zd).compute(), local.predict(Z), atol=1e-2)
    # warm start from the optimum: converged after one epoch, same coefficients
    m.set_params(warm_start=True).fit(Zd, y, columns=drb)
    assert m.n_iter_ == 1


@pytest.mark.parametrize("loss, weighted, fit_intercept",
                         [("squared", True, True), ("logistic", False, True),
                          ("logistic", True, False), ("squared_hinge", True, True)])
def test_cd_cyclic_iterates_equal_local_grid_mode(client, loss, weighted, fit_intercept):
    """selection="cyclic": the distributed grid steps are those of the local grid mode
    (same grids in the same order), so after a fixed number of epochs the coefficients
    agree to rounding, with sample weights and for each loss (the logistic state exp(y p),
    moved by factors, refreshed by the intercept step or, without one, by the check)."""
    X, y = data(2500)
    if loss != "squared":
        y = np.where(y > np.median(y), 1, -1)
    s = np.random.default_rng(1).random(X.shape[0]) + 0.5 if weighted else None
    drb = rd.RandomBinning(n_grids=8, sigma=1.0, random_state=0)
    Zd = drb.fit_transform(da.from_array(X, chunks=((1000, 0, 1500), 3)))
    lrb = rbcd.RandomBinning(n_grids=8, sigma=1.0, random_state=0)
    Z = lrb.fit_transform(X)
    kw = dict(loss=loss, alpha=1e-3, l1_ratio=0.5, tol=0.0, max_epochs=4, selection="cyclic",
              fit_intercept=fit_intercept)
    dcls, lcls = ((rd.CDRegressor, rbcd.CDRegressor) if loss == "squared"
                  else (rd.CDClassifier, rbcd.CDClassifier))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = dcls(**kw).fit(Zd, y, sample_weight=s, columns=drb)
        local = lcls(parallel="grid", **kw).fit(Z, y, sample_weight=s, columns=lrb)
    assert m.n_iter_ == local.n_iter_ == 4
    np.testing.assert_allclose(m.coef_, local.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(m.intercept_, local.intercept_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(m.objective_history_, local.objective_history_, rtol=1e-10)
    np.testing.assert_allclose(m.dual_gap_, local.dual_gap_, rtol=1e-7)


def test_stopping_rule_is_shared():
    """The subgradient scale's rounding floor (rbcd.solvers._stopping) applies to both
    solvers: far below it, tol is unreachable and the scale is raised to noise / tol."""
    from rbcd.solvers import _stopping

    eps = np.finfo(np.float64).eps
    assert _stopping.stopping_scale(False, 1e-3, None, 1e-30, 1000, 1.0, 50.0, 100.0) == \
        1000 * eps * 1.0 * 50.0 / 100.0 / 1e-3
    assert _stopping.stopping_scale(False, 1e-3, None, 2.0, 1000, 1.0, 50.0, 100.0) == 2.0
    assert _stopping.stopping_scale(True, 1e-3, 0.7, None, 1000, 1.0, 0.0, 1.0) == 0.7
    # the gap at c = min(1, lam1 / dn), the kernels' formula
    assert _stopping.gap_from_sums(2.0, 1.0, 0.5, 3.0, 4.0, 1.0, 0.5) == \
        0.5 * 1.0 * 1.25 + 1.0 * 3.0 - 0.5 * 0.5 + 0.5 * 0.5 * 1.25 * 4.0
    assert _stopping.max_subgradient(np.array([0.0, 1.0]), np.array([0.3, -2.0]), 0.5, 0.1) == 1.5


def test_cd_classifier_logistic(client):
    X, _ = data(1500)
    yc = np.digitize(X[:, 0], [-0.4, 0.4])            # three classes: one-vs-rest
    drb = rd.RandomBinning(n_grids=8, sigma=2.0, random_state=0)
    Zd = drb.fit_transform(da.from_array(X, chunks=(600, 3)))
    lrb = rbcd.RandomBinning(n_grids=8, sigma=2.0, random_state=0)
    Z = lrb.fit_transform(X)
    kw = dict(alpha=1e-2, tol=1e-5, max_epochs=1000, random_state=0, decision_epochs=None)
    m = rd.CDClassifier(**kw).fit(Zd, yc, columns=drb)
    local = rbcd.CDClassifier(parallel="grid", **kw).fit(Z, yc, columns=lrb)
    assert np.array_equal(m.classes_, local.classes_)
    np.testing.assert_allclose([h[-1] for h in m.objective_history_],
                               [h[-1] for h in local.objective_history_], rtol=1e-5)
    np.testing.assert_allclose(m.predict_proba(Zd).compute(), local.predict_proba(Z), atol=1e-3)
    assert np.mean(m.predict(Zd).compute() == local.predict(Z)) > 0.99


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_cd_classifier_decision_rule(client, loss):
    # decision_epochs (default 10, as rbcd.CDClassifier): the fit ends, converged, once 10
    # epochs in a row changed no training decision (the sign of z . w + b), long before the
    # subgradient test (tol 1e-6). Checked on the fit's own trajectory: the fits stopped by
    # max_epochs alone (decision_epochs=None) follow the same iterates epoch by epoch.
    X, _ = data(1500)
    yc = (X[:, 0] + 0.3 * X[:, 1] > 0.2).astype(int)
    drb = rd.RandomBinning(n_grids=8, sigma=2.0, random_state=0)
    Zd = drb.fit_transform(da.from_array(X, chunks=(600, 3)))
    kw = dict(loss=loss, alpha=1e-5, tol=1e-6, random_state=0)
    assert rd.CDClassifier().decision_epochs == rbcd.CDClassifier().decision_epochs == 10
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = rd.CDClassifier(max_epochs=500, **kw).fit(Zd, yc, columns=drb)
    e = int(m.n_iter_)
    assert 11 < e < 500
    signs = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for k in range(e - 11, e + 1):
            f = rd.CDClassifier(max_epochs=k, decision_epochs=None, **kw).fit(Zd, yc, columns=drb)
            signs[k] = f.decision_function(Zd).compute() > 0
    np.testing.assert_allclose(f.coef_, m.coef_, atol=1e-12)   # the same iterates at epoch e
    assert all(np.array_equal(signs[k], signs[e]) for k in range(e - 10, e))
    assert not np.array_equal(signs[e - 11], signs[e - 10])   # not settled one epoch earlier
    with pytest.raises(ValueError, match="decision_epochs"):
        rd.CDClassifier(decision_epochs=0).fit(Zd, yc, columns=drb)


def test_cd_needs_the_grid_structure(client):
    X, y = data(300)
    Zd = rd.RandomBinning(n_grids=4, n_features=64, random_state=0).fit_transform(X)
    with pytest.raises(ValueError, match="grid structure"):
        rd.CDRegressor().fit(Zd, y)
    with pytest.raises(ValueError, match="parallel"):
        rd.CDRegressor(parallel="hogwild").fit(Zd, y)


# ---------------------------------------------------------------------------- models
def test_cd_models_auto_alpha_is_the_local_choice(client):
    # alpha="auto" with solver="cd": the local held-out path on the <= 20,000-row sample; with
    # 2,400 rows the sample is every row, so the choice is the local model's (before, a
    # 1,000-row sample's, used as it was)
    X, y = data(2400)
    yc = (X[:, 0] > 0).astype(int)
    Xd = da.from_array(X, chunks=(1000, 3))
    params = dict(n_grids=8, sigma=2.0, solver="cd", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for dist, local, t in [(rd.RBRegressor, rbcd.RBRegressor, y),
                               (rd.RBClassifier, rbcd.RBClassifier, yc)]:
            m = dist(**params).fit(Xd, t)
            ref = local(**params).fit(X, t)
            assert ref.alpha_ in ref.solver_.alphas_
            assert m.alpha_ == pytest.approx(ref.alpha_, rel=1e-12)


def test_cd_models_auto_alpha_above_the_sample_is_scaled_by_its_share(client, monkeypatch):
    # above the sample's rows (here 1,000 of 3,000: HELDOUT_MAX_ROWS lowered for the test),
    # the local choice on the sample, binned by the fit's tables, times the sample's share
    # of the weight (mean-loss units; the held-out path picks smaller penalties on more rows)
    from rbcd.solvers import _heldout

    monkeypatch.setattr(_heldout, "HELDOUT_MAX_ROWS", 1000)
    X, y = data(3000)
    w = np.random.default_rng(4).uniform(0.5, 2.0, 3000)
    Xd = da.from_array(X, chunks=(1000, 3))
    params = dict(n_grids=8, sigma=2.0, solver="cd", random_state=0)
    rows, _ = _heldout.heldout_rows(3000)
    assert rows.shape[0] == 1000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for weights in (None, w):
            m = rd.RBRegressor(**params).fit(Xd, y, sample_weight=weights)
            ref = rbcd.RBRegressor(**dict(params, alpha=1.0)).fit(X, y)   # the same tables
            Zs = ref.binning_.transform(X[rows])
            ws = None if weights is None else weights[rows]
            share = (1000 / 3000 if weights is None else weights[rows].sum() / weights.sum())
            aux = rbcd.CDRegressor(**{k: v for k, v in ref.solver_.get_params().items()
                                       if k != "alpha"}, alpha="auto")
            aux.fit(Zs, y[rows], sample_weight=ws, columns=rbcd.binning.column_structure(
                Zs, ref.binning_.grid_ptr_))
            assert m.alpha_ == pytest.approx(aux.alpha_ * share, rel=1e-12)
    with pytest.raises(ValueError, match="every row of that sample has weight 0"):
        w0 = np.ones(3000)
        w0[rows] = 0.0
        rd.RBRegressor(**params).fit(Xd, y, sample_weight=w0)


@pytest.mark.parametrize("kw", [dict(solver="cg"), dict(solver="cg", n_features=300),
                                dict(solver="cd", alpha=1e-2, max_epochs=300, tol=1e-5)])
def test_rbregressor_equals_local(client, kw):
    X, y = data(1500)
    Xd = da.from_array(X, chunks=((500, 0, 1000), 3))
    params = dict(n_grids=8, sigma=2.0, random_state=0, **kw)
    if kw["solver"] == "cg":
        params.update(tol=1e-12, alpha=3.0)
    m = rd.RBRegressor(**params).fit(Xd, y)
    local = rbcd.RBRegressor(**params).fit(X, y)
    Xn = data(400, seed=9)[0]
    pred = m.predict(da.from_array(Xn, chunks=150))
    assert isinstance(pred, da.Array) and pred.chunks == ((150, 150, 100),)
    if kw["solver"] == "cg":
        np.testing.assert_allclose(pred.compute(), local.predict(Xn), atol=1e-8)
    else:   # both within a relative duality gap of 1e-5 of the same optimum
        ours, theirs = m.solver_.objective_history_[-1], local.solver_.objective_history_[-1]
        assert abs(ours - theirs) <= 2e-5 * theirs
        np.testing.assert_allclose(pred.compute(), local.predict(Xn), atol=5e-2)


def test_rbclassifier_cg_equals_local(client):
    X, _ = data(1500)
    yc = np.where(X[:, 0] * X[:, 1] > 0, "a", "b")
    m = rd.RBClassifier(n_grids=8, sigma="scale", random_state=0, alpha=3.0, tol=1e-12,
                        n_jobs=2).fit(da.from_array(X, chunks=700), yc)
    local = rbcd.RBClassifier(n_grids=8, sigma=_scale.scale_sigma(X), random_state=0, alpha=3.0,
                              tol=1e-12).fit(X, yc)
    assert m.binning_.sigma_ == _scale.scale_sigma(X)
    np.testing.assert_allclose(m.decision_function(X).compute(), local.decision_function(X),
                               atol=1e-8)
    assert np.array_equal(m.predict(X).compute(), local.predict(X))
    # calibrated probabilities (temperature-scaled softmax fitted on the training scores)
    assert abs(m.calibration_ - local.calibration_) <= 1e-6 * local.calibration_
    proba = m.predict_proba(X)
    assert isinstance(proba, da.Array)
    np.testing.assert_allclose(proba.compute(), local.predict_proba(X), atol=1e-7)
    # three classes, sample weights; calibration=None has no predict_proba
    y3 = np.digitize(X[:, 0], [-0.4, 0.4])
    s = np.linspace(0.5, 2.0, X.shape[0])
    kw = dict(n_grids=8, sigma=2.0, random_state=0, alpha=3.0, tol=1e-12)
    m3 = rd.RBClassifier(**kw).fit(X, y3, sample_weight=s)
    l3 = rbcd.RBClassifier(**kw).fit(X, y3, sample_weight=s)
    np.testing.assert_allclose(m3.predict_proba(X).compute(), l3.predict_proba(X), atol=1e-7)
    assert not hasattr(rd.RBClassifier(calibration=None, **kw).fit(X, y3), "predict_proba")
    with pytest.raises(ValueError, match="calibration"):
        rd.RBClassifier(calibration="isotonic", **kw).fit(X, y3)


# ---------------------------------------------------------------------------- bad input
def test_bad_input_errors(client):
    X, y = data(600)
    Xbad = X.copy()
    Xbad[437, 2] = np.nan
    with pytest.raises(ValueError, match="row 437, column 2"):
        rd.RandomBinning(n_grids=4).fit(da.from_array(Xbad, chunks=200))
    with pytest.raises(ValueError, match="row 437, column 2"):
        rd.RandomBinning(n_grids=4, n_features=32).fit_transform(da.from_array(Xbad, chunks=200)).compute()
    with pytest.raises(ValueError, match="row 437, column 2"):
        rd.RBRegressor(n_grids=4).fit(da.from_array(X, chunks=200), y).predict(
            da.from_array(Xbad, chunks=200)).compute()
    unknown = da.from_array(X, chunks=200)[da.from_array(y, chunks=200) > 0]
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        rd.RandomBinning(n_grids=4).fit(unknown)
    with pytest.raises(ValueError, match="y has 500 rows but X has 600 rows"):
        rd.RBRegressor(n_grids=4).fit(da.from_array(X, chunks=200), y[:500])  # in memory: at once
    with pytest.raises(ValueError, match="^y has 500 rows but X has 600 rows$"):  # as in memory
        rd.RBRegressor(n_grids=4).fit(da.from_array(X, chunks=200),
                                      da.from_array(y[:500], chunks=250))
    ybad = y.copy()
    ybad[5] = np.inf
    with pytest.raises(ValueError, match="NaN or inf"):
        rd.RBRegressor(n_grids=4).fit(X, ybad)
    with pytest.raises(ValueError, match="n_grids"):
        rd.RandomBinning(n_grids=0).fit(X)
    with pytest.raises(ValueError, match="sigma"):
        rd.RandomBinning(sigma=-1.0).fit(X)
    with pytest.raises(ValueError, match="2 classes"):
        rd.RBClassifier(n_grids=4).fit(X, np.zeros(600))
    # y partitioned differently from X but with the same rows is lined up, not an error
    Zd = rd.RandomBinning(n_grids=4, random_state=0).fit_transform(da.from_array(X, chunks=200))
    a = rd.RidgeCG(tol=1e-12).fit(Zd, da.from_array(y, chunks=250)).coef_
    b = rd.RidgeCG(tol=1e-12).fit(Zd, y).coef_
    assert np.array_equal(a, b)


@pytest.mark.parametrize("bad, words", [
    (-1.0, "sample_weight must be non-negative"),
    (np.inf, "sample_weight contains NaN or inf"),
    (np.nan, "sample_weight contains NaN or inf"),
])
def test_sample_weights_are_checked_as_locally(client, bad, words):
    # issue 31 item 3: coordinate descent accepted a negative weight, fitted NaN with an
    # inf one and called NaN weights "all zero"; cg's models said "alpha must be finite"
    X, y = data(600)
    yc = (y > np.median(y)).astype(int)
    s = np.ones(600)
    s[123] = bad
    drb = rd.RandomBinning(n_grids=4, sigma=2.0, random_state=0)
    Zd, cols = drb.fit_transform(da.from_array(X, chunks=200), return_columns=True)
    fits = [lambda w: rd.CDRegressor(max_epochs=3).fit(Zd, y, sample_weight=w, columns=cols),
            lambda w: rd.CDClassifier(max_epochs=3).fit(Zd, yc, sample_weight=w, columns=cols),
            lambda w: rd.RidgeCG().fit(Zd, y, sample_weight=w),
            lambda w: rd.RBRegressor(n_grids=4).fit(X, y, sample_weight=w),
            lambda w: rd.RBClassifier(n_grids=4, solver="cd", max_epochs=3).fit(X, yc, sample_weight=w)]
    for fit in fits:
        for w in (s, da.from_array(s, chunks=250)):
            with pytest.raises(ValueError, match=words):
                fit(w)
    with pytest.raises(ValueError, match=words):   # the local estimators say the same
        rbcd.RBRegressor(n_grids=4).fit(X, y, sample_weight=s)
    with pytest.raises(ValueError, match="class_weight"):
        rd.CDClassifier(class_weight={0: np.nan, 1: 1.0}).fit(Zd, yc, columns=cols)
    # scikit-learn's rule for labels absent from y, as the local classifiers apply it
    fit = lambda cw: rd.CDClassifier(max_epochs=3, class_weight=cw, random_state=0).fit(
        Zd, yc, columns=cols)
    np.testing.assert_array_equal(fit({0: 2.0, 1: 1.0, 9: 5.0}).coef_, fit({0: 2.0}).coef_)
    with pytest.raises(ValueError, match=r"The classes, \[1\], are not in class_weight"):
        fit({0: 2.0, 9: 5.0})
    with pytest.raises(ValueError, match="l1_ratio"):
        rd.RBRegressor(n_grids=4, solver="cg", l1_ratio=0.5).fit(X, y)


def test_worker_threads_reach_the_kernels(client):
    # a task on a 1-thread worker: None -> that worker's thread count divided by its tasks
    assert client.submit(_data.resolve_task_jobs, None, 1).result() == 1
    assert client.submit(_data.resolve_task_jobs, 3, 1).result() == 3
    assert client.submit(_data.worker_threads).result() == 1
    assert _data.resolve_task_jobs(None, 4) == 1


def _worker_address(block):
    from distributed import get_worker

    return get_worker().address


def test_round_trips_run_where_the_blocks_are(client, monkeypatch):
    """Cluster.map pins each partition's task to its block's worker (strictly: dask's work
    stealing would otherwise copy a whole block to an idle worker)."""
    from rbcd.dask import _blocks as dcg

    X, y = data(900)
    drb = rd.RandomBinning(n_grids=4, sigma=2.0, random_state=0)
    Zd = drb.fit_transform(da.from_array(X, chunks=300))
    cluster = dcg.build_blocks(client, Zd, y, None, dcg.regression_targets, drb)[0]
    submitted = []
    orig = client.submit

    def spy(*a, **k):
        submitted.append(k.get("workers"))
        return orig(*a, **k)

    monkeypatch.setattr(client, "submit", spy)
    ran_on = cluster.map(_worker_address)
    who = client.who_has(cluster.blocks)
    assert ran_on == [min(who[f.key]) for f in cluster.blocks]
    assert submitted == [[w] for w in ran_on]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # 2 epochs on purpose
def test_cd_actors_take_the_worker_threads_and_report_progress(client, capsys):
    from rbcd.dask.cd import _Actors
    from rbcd.dask._blocks import build_blocks, regression_targets

    X, y = data(600)
    drb = rd.RandomBinning(n_grids=4, sigma=2.0, random_state=0)
    Zd = drb.fit_transform(da.from_array(X, chunks=200))
    cluster = build_blocks(client, Zd, y, None, regression_targets, drb)[0]
    zval = 0.5
    for n_jobs, expected in ((None, 1), (3, 3)):       # 1-thread workers; n_jobs as given
        act = _Actors(client, cluster, cluster.grid_ptr, zval, n_jobs)
        assert [a.threads().result() for a in act.actors] == [expected] * len(act.actors)
        del act
    # the coordinating worker's progress lines are printed by the driver
    rd.CDRegressor(alpha=1e-2, max_epochs=2, tol=0.0, verbose=1).fit(Zd, y, columns=drb)
    out = capsys.readouterr().out
    assert out.count("[rbcd.dask CD] epoch") == 2


# ---------------------------------------------------------------------------- faults, memory
def _close_worker_after(monkeypatch, cls, method, calls, cluster, client):
    """After ``calls`` calls of cls.method, close one worker abruptly (its data is lost)."""
    orig = getattr(cls, method)
    state = {"n": 0}

    def wrapped(self, *a, **k):
        state["n"] += 1
        if state["n"] == calls:
            name = sorted(cluster.workers)[0]
            client.sync(cluster.workers[name].close)
        return orig(self, *a, **k)

    monkeypatch.setattr(cls, method, wrapped)
    return state


def _close_own_worker_after(monkeypatch, cls, method, calls, which):
    """After ``calls`` calls of cls.method on one actor (``which`` 0: the one holding
    partition 0, the coordinator; 1: another), its worker closes itself abruptly from inside
    the call (in-process workers: the patch reaches them)."""
    from distributed import get_worker

    orig = getattr(cls, method)
    state = {"n": 0, "closed": False}

    def wrapped(self, *a, **k):
        w = get_worker()
        if getattr(self, "_rank", None) == which and not state["closed"]:
            state["n"] += 1
            if state["n"] == calls:
                state["closed"] = True
                w.loop.add_callback(w.close)
        return orig(self, *a, **k)

    orig_init = cls.__init__

    def init(self, blocks, index, *a, **k):
        orig_init(self, blocks, index, *a, **k)
        self._rank = 0 if 0 in index else 1

    monkeypatch.setattr(cls, "__init__", init)
    monkeypatch.setattr(cls, method, wrapped)
    return state


def test_lost_worker_cg_same_result_cd_clear_error(monkeypatch):
    from rbcd.dask import _blocks as dcg
    from rbcd.dask import cd as dcd

    X, y = data(1200)
    Z = rbcd.RandomBinning(n_grids=8, sigma=2.0, random_state=0).fit_transform(X)
    local = rbcd.RidgeCG(alpha=3.0, tol=1e-12, max_iter=2000).fit(Z, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with _cluster() as cluster, Client(cluster) as c:
            Xd = da.from_array(X, chunks=300)
            drb = rd.RandomBinning(n_grids=8, sigma=2.0, random_state=0)
            Zd = drb.fit_transform(Xd)
            state = _close_worker_after(monkeypatch, dcg.Cluster, "map", 5, cluster, c)
            m = rd.RidgeCG(alpha=3.0, tol=1e-12, max_iter=2000).fit(Zd, y, columns=drb)
            assert state["n"] > 5 and len(c.scheduler_info()["workers"]) == 1
            assert _rel(m.coef_, local.coef_) <= 1e-10   # lost partitions were recomputed
        # CD: the coordinating actor talks to the other worker's actor; either worker
        # closing mid-fit is a clear error and no model
        for which in (0, 1):
            with _cluster() as cluster, Client(cluster) as c:
                drb = rd.RandomBinning(n_grids=8, sigma=2.0, random_state=0)
                Zd = drb.fit_transform(da.from_array(X, chunks=300))
                state = _close_own_worker_after(monkeypatch, dcd.CDWorker, "advance", 20, which)
                est = rd.CDRegressor(alpha=1e-3, tol=1e-10, max_epochs=200)
                with pytest.raises(RuntimeError, match="lost"):
                    est.fit(Zd, y, columns=drb)
                assert not hasattr(est, "coef_")
                assert state["closed"]


def test_memory_limit_below_Z_spills_and_gives_the_same_fit():
    X, y = data(6000, d=2)
    R = 16
    z_bytes = X.shape[0] * R * 12                       # float64 values, int32 indices
    limit = z_bytes // 3                                # per worker: below its half of Z
    cfg = {"distributed.worker.memory.target": 0.4, "distributed.worker.memory.spill": False,
           "distributed.worker.memory.pause": False, "distributed.worker.memory.terminate": False}
    with warnings.catch_warnings(), dask.config.set(cfg):
        warnings.simplefilter("ignore")
        with _cluster(memory_limit=limit) as cluster, Client(cluster) as c:
            drb = rd.RandomBinning(n_grids=R, sigma=1.0, random_state=0)
            Zd = drb.fit_transform(da.from_array(X, chunks=500))
            spilled = sum(c.run(lambda dask_worker: len(dask_worker.data.slow)).values())
            assert spilled > 0
            m = rd.RidgeCG(alpha=30.0, tol=1e-12).fit(Zd, y, columns=drb)
    Z = rbcd.RandomBinning(n_grids=R, sigma=1.0, random_state=0).fit_transform(X)
    local = rbcd.RidgeCG(alpha=30.0, tol=1e-12).fit(Z, y)
    assert _rel(m.coef_, local.coef_) <= 1e-10


def test_worker_processes_pickle_everything():
    X, y = data(800)
    yc = (y > np.median(y)).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with _cluster(processes=True) as cluster, Client(cluster):
            Xd = da.from_array(X, chunks=((300, 0, 500), 3))
            drb = rd.RandomBinning(n_grids=8, sigma=2.0, random_state=0)
            assert_same_Z(drb.fit_transform(Xd),
                          rbcd.RandomBinning(n_grids=8, sigma=2.0, random_state=0).fit_transform(X))
            m = rd.RBRegressor(n_grids=8, sigma=2.0, random_state=0, alpha=10.0, tol=1e-10).fit(Xd, y)
            local = rbcd.RBRegressor(n_grids=8, sigma=2.0, random_state=0, alpha=10.0, tol=1e-10).fit(X, y)
            np.testing.assert_allclose(m.predict(Xd).compute(), local.predict(X), atol=1e-8)
            c = rd.RBClassifier(n_grids=8, sigma=2.0, solver="cd", alpha=1e-2, tol=1e-2,
                                max_epochs=5, random_state=0).fit(Xd, yc)
            assert c.predict_proba(Xd).compute().shape == (800, 2)


def test_estimators_store_parameters_unchanged():
    from sklearn.base import clone

    for cls in (rd.RandomBinning, rd.RidgeCG, rd.RidgeCGClassifier, rd.CDRegressor,
                rd.CDClassifier, rd.RBRegressor, rd.RBClassifier):
        est = cls()
        params = est.get_params()
        assert clone(est).get_params() == params
        # the same parameter names as the single-machine estimator of the same name
        assert set(params) == set(getattr(rbcd, cls.__name__)().get_params())


def test_one_vs_one_is_refused_with_its_single_machine_estimator():
    # multi_class: the single-machine estimators' parameter; rbcd.dask is one-vs-rest
    X = np.zeros((4, 2))
    y = np.array([0, 1, 2, 0])
    for est in (rd.RBClassifier(multi_class="ovo"), rd.RidgeCGClassifier(multi_class="ovo")):
        with pytest.raises(ValueError, match=r"one-vs-rest.*multi_class='ovo' runs on one "
                                             r"machine: rbcd\." + type(est).__name__):
            est.fit(X, y)


def test_solver_modules_do_not_import_each_other():
    # issue 31 item 18: rbcd.dask.cd and rbcd.dask.cg imported each other; what they share
    # lives in rbcd.dask._blocks
    import ast

    import rbcd.dask.cd as dcd
    import rbcd.dask.cg as dcg

    for mod, other in ((dcd, "cg"), (dcg, "cd")):
        tree = ast.parse(open(mod.__file__).read())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert other not in imported and f"rbcd.dask.{other}" not in imported, mod.__name__


def test_cg_driver_folds_partition_results_as_they_come(client, monkeypatch):
    # issue 31 item 9: the driver gathered every partition's D x k result at once (96
    # D-vectors at D = 1.4e6, 16 partitions; 21 after). Folding them in partition order
    # in batches of any size gives the same bits.
    from rbcd.dask import _blocks

    X, y = data(1200)
    drb = rd.RandomBinning(n_grids=8, sigma=0.5, random_state=0)
    Zd, cols = drb.fit_transform(da.from_array(X, chunks=150), return_columns=True)
    ref = rd.RidgeCG(tol=1e-10, max_iter=300).fit(Zd, y, columns=cols)
    seen = []
    orig = _blocks.Cluster.map

    def spy(self, func, *args, fold=None):
        out = orig(self, func, *args, fold=fold)
        seen.append(fold is not None)
        return out

    monkeypatch.setattr(_blocks.Cluster, "map", spy)
    monkeypatch.setattr(_blocks, "FOLD_BYTES", 1)   # one partition's result at a time
    one = rd.RidgeCG(tol=1e-10, max_iter=300).fit(Zd, y, columns=cols)
    assert seen and all(seen)   # every round trip of the CG folds
    assert np.array_equal(one.coef_, ref.coef_) and one.intercept_ == ref.intercept_


def test_agreement_with_the_local_fit_follows_the_tolerance(client):
    # issue 31 item 16: the README said "to 1e-10" whatever the tol; the sums are added in
    # another order, so dask and local agree to about the tolerance (README, Scaling out)
    X, _ = data(3000)
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    Xd = da.from_array(X, chunks=750)
    diffs = {}
    for tol in (1e-3, 1e-10):
        kw = dict(n_grids=16, sigma=1.0, alpha=1.0, solver="cg", tol=tol, random_state=0)
        local = rbcd.RBClassifier(**kw).fit(X, y).decision_function(X)
        dist = rd.RBClassifier(**kw).fit(Xd, y).decision_function(X).compute()
        diffs[tol] = np.max(np.abs(dist - local)) / np.max(np.abs(local))
    assert diffs[1e-10] <= 1e-8 and diffs[1e-3] <= 1e-2
    text = open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md")).read()
    assert "(to 1e-10)" not in text and "tol=1e-10" in text


def test_audit_fixes_hashed_auto_alpha_labels_calibration_and_finite_Z(client):
    """From an audit of rbcd.dask: hashed mode with the default alpha="auto" fits (its
    sample's solve has no grid structure); a classifier refuses a continuous y as the
    local one does (it fitted one class per value); calibration takes the local names
    ("train", its default, and None; "sigmoid", the earlier name, still reads as
    "train"; "holdout" is refused by name), so the local model takes the Dask model's
    parameters; a non-finite value of a user's Z is an error, not NaN coefficients."""
    X, y = data(1200, 4)
    Xd = da.from_array(X, chunks=400)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = rd.RBRegressor(n_grids=8, n_features=256, random_state=0).fit(Xd, y)
    local = rbcd.RBRegressor(n_grids=8, n_features=256, random_state=0, linear=0).fit(X, y)
    assert m.alpha_ == pytest.approx(local.alpha_, rel=1e-9)
    with pytest.raises(ValueError, match="continuous"):
        rd.RBClassifier(n_grids=8, random_state=0, alpha=1.0).fit(Xd, y)
    yc = (y > np.median(y)).astype(int)
    kw = dict(n_grids=8, sigma=2.0, random_state=0, alpha=3.0, tol=1e-12)
    assert rd.RBClassifier().get_params()["calibration"] == "train"
    ref = rd.RBClassifier(**kw).fit(Xd, yc)
    old = rd.RBClassifier(calibration="sigmoid", **kw).fit(Xd, yc)
    assert old.calibration_ == ref.calibration_
    with pytest.raises(ValueError, match="'train' or None.*holdout"):
        rd.RBClassifier(calibration="holdout", **kw).fit(Xd, yc)
    shared = {k: v for k, v in rd.RBClassifier(**kw).get_params().items()
              if k in rbcd.RBClassifier().get_params()}
    assert rbcd.RBClassifier(**shared).fit(X, yc).calibration_ is not None
    Z = rbcd.RandomBinning(n_grids=8, random_state=0).fit_transform(X).tolil()
    Z[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        rd.RidgeCG().fit(Z.tocsr(), y)


def test_ridge_classifier_is_a_classifier_that_checks_the_width(client):
    """rd.RidgeCGClassifier is a scikit-learn classifier (is_classifier, score: the
    accuracy, as the local one's) and refuses X of another width by name, before the
    workers' products fail."""
    from sklearn.base import is_classifier

    X, y = data(1200, 4)
    yc = (y > np.median(y)).astype(int)
    Z = rbcd.RandomBinning(n_grids=8, random_state=0).fit_transform(X)
    m = rd.RidgeCGClassifier(alpha=1.0).fit(Z, yc)
    local = rbcd.RidgeCGClassifier(alpha=1.0).fit(Z, yc)
    assert is_classifier(m)
    assert m.score(Z, yc) == pytest.approx(local.score(Z, yc), abs=1e-3)
    with pytest.raises(ValueError, match="features, but RidgeCGClassifier is expecting"):
        m.decision_function(Z[:, :-1])


def test_regressors_keep_a_2d_target_and_pass_verbose(client, capsys):
    """rd.RidgeCG and rd.RBRegressor fitted on y of shape (n, 1) predict (n, 1), as the
    local ones do ((n,) for a 1-D y); rd.RBRegressor's verbose reaches its solver."""
    X, y = data(1200, 4)
    Xd = da.from_array(X, chunks=400)
    kw = dict(n_grids=8, random_state=0, alpha=1.0)
    for target, shape in ((y, (8,)), (y[:, None], (8, 1))):
        m = rd.RBRegressor(**kw).fit(Xd, target)
        local = rbcd.RBRegressor(linear=0, **kw).fit(X, target)
        assert m.predict(Xd[:8]).compute().shape == local.predict(X[:8]).shape == shape
        Z = rbcd.RandomBinning(n_grids=8, random_state=0).fit_transform(X)
        r = rd.RidgeCG(alpha=1.0).fit(Z, target)
        assert r.predict(Z[:8]).compute().shape == rbcd.RidgeCG(alpha=1.0).fit(
            Z, target).predict(Z[:8]).shape == shape
    capsys.readouterr()
    rd.RBRegressor(verbose=2, **kw).fit(Xd, y)
    assert "iteration" in capsys.readouterr().out


def test_random_binning_feature_names(client):
    """rd.RandomBinning names Z's columns as rbcd.RandomBinning does."""
    X, _ = data(600, 3)
    m = rd.RandomBinning(n_grids=4, sigma=1.0, random_state=0).fit(da.from_array(X, chunks=200))
    local = rbcd.RandomBinning(n_grids=4, sigma=1.0, random_state=0).fit(X)
    names = m.get_feature_names_out()
    assert names.shape == (m.n_features_out_,)
    assert np.array_equal(names, local.get_feature_names_out())


def test_model_parameter_errors_name_the_model(client):
    """A bad parameter of rd.RBRegressor / rd.RBClassifier is named for the model (it was
    named for the RidgeCG or CD solver the model builds), as the local models name it."""
    X, y = data(300, 3)
    for cls, target in ((rd.RBRegressor, y), (rd.RBClassifier, (y > 0).astype(int))):
        for bad in (dict(tol=-1.0), dict(max_iter=0), dict(alpha=-2.0), dict(n_grids=True)):
            with pytest.raises(ValueError, match=rf"parameter of {cls.__name__} must"):
                cls(**bad).fit(X, target)


def test_models_agree_with_local_ones_where_an_audit_found_them_apart(client):
    # preconditioner="auto" by the local rule (D <= 8 N), so the default fits agree; a
    # DataFrame's column names checked at predict; predict_proba from the fit, not from a
    # later set_params; a failed refit keeps the model; calibration="holdout" refused
    # before any work (and accepted where the logistic model needs no calibration)
    import dask.dataframe as dd
    import pandas as pd

    X, y = data(1200, d=4)
    kw = dict(n_grids=256, solver="cg", alpha=1.0, random_state=0)
    local = rbcd.RBRegressor(**kw).fit(X, y)
    dist = rd.RBRegressor(**kw).fit(da.from_array(X, chunks=400), y)
    assert local.binning_.n_features_out_ > X.shape[0]            # N < D <= 8 N
    np.testing.assert_array_equal(dist.n_iter_, local.n_iter_)
    np.testing.assert_allclose(np.asarray(dist.predict(X)), local.predict(X), atol=1e-9)

    frame = pd.DataFrame(X, columns=list("abcd"))
    m = rd.RBRegressor(n_grids=8, random_state=0).fit(dd.from_pandas(frame, npartitions=3), y)
    np.testing.assert_array_equal(m.feature_names_in_, list("abcd"))
    with pytest.raises(ValueError, match="feature names should match"):
        m.predict(dd.from_pandas(frame[list("dcba")], npartitions=3))

    yc = (y > np.median(y)).astype(int)
    clf = rd.RBClassifier(n_grids=8, solver="cg", alpha=1.0, random_state=0).fit(X, yc)
    proba = np.asarray(clf.predict_proba(X))
    clf.set_params(solver="cd")
    np.testing.assert_array_equal(np.asarray(clf.predict_proba(X)), proba)
    np.testing.assert_allclose(np.exp(np.asarray(clf.predict_log_proba(X))), proba)

    reg = rd.RBRegressor(n_grids=8, solver="cd", alpha=1e-3, warm_start=True,
                         random_state=0).fit(X, y)
    coef = np.array(reg.coef_)
    bad = y.copy()
    bad[5] = np.nan
    with pytest.raises(ValueError):
        reg.set_params(alpha=0.5).fit(X, bad)
    assert reg.alpha_ == 1e-3
    np.testing.assert_array_equal(reg.coef_, coef)

    with pytest.raises(ValueError, match="calibration must be 'train' or None"):
        rd.RBClassifier(n_grids=8, calibration="holdout").fit(X, yc)
    rd.RBClassifier(n_grids=8, solver="cd", loss="logistic", calibration="holdout",
                    max_epochs=3).fit(X, yc)


def test_errors_of_parameters_and_labels_in_memory_come_before_any_work(client):
    # rbcd.dask.RandomBinning(n_grids=0) failed inside every partition's task, and a one-
    # class or NaN y in memory only after the binning pass; now at once, as locally
    X, y = data(600)
    Xd = da.from_array(X, chunks=200)
    with pytest.raises(ValueError, match="n_grids"):
        rd.RandomBinning(n_grids=0, sigma=1.0).fit(Xd)
    with pytest.raises(ValueError, match="dtype must be numpy.float32 or numpy.float64"):
        rd.RandomBinning(dtype=np.int32, sigma=1.0).fit(Xd)
    with pytest.raises(ValueError, match="^RBClassifier needs samples of at least 2 classes"):
        rd.RBClassifier(n_grids=4).fit(Xd, np.zeros(600))
    bad = y.copy()
    bad[7] = np.nan
    with pytest.raises(ValueError, match="y contains NaN or inf"):
        rd.RBRegressor(n_grids=4).fit(Xd, bad)
    # a column vector y is ravelled with scikit-learn's warning, as locally
    from sklearn.exceptions import DataConversionWarning
    yc = (y > np.median(y)).astype(int)
    with pytest.warns(DataConversionWarning):
        m = rd.RBClassifier(n_grids=4, random_state=0).fit(Xd, yc[:, None])
    assert np.asarray(m.predict(Xd)).shape == (600,)


def test_solvers_report_what_the_local_ones_do(client):
    # alpha_, converged_ and residual_ (RidgeCG), alpha_ and stop_ (CD), as the local solvers
    X, y = data(600)
    rb = rbcd.RandomBinning(n_grids=8, sigma=1.0, random_state=0)
    Z, cols = rb.fit_transform(X, return_columns=True)
    drb = rd.RandomBinning(n_grids=8, sigma=1.0, random_state=0)
    Zd, dcols = drb.fit_transform(da.from_array(X, chunks=200), return_columns=True)
    local = rbcd.RidgeCG(alpha=0.5, tol=1e-8).fit(Z, y, columns=cols)
    dist = rd.RidgeCG(alpha=0.5, tol=1e-8).fit(Zd, y, columns=dcols)
    assert dist.alpha_ == local.alpha_ == 0.5 and dist.converged_ and local.converged_
    assert dist.residual_.shape == local.residual_.shape == (1,)
    assert dist.residual_[0] <= 1e-8 and local.residual_[0] <= 1e-8
    with pytest.warns(ConvergenceWarning):
        short = rd.RidgeCG(alpha=1e-6, tol=1e-14, max_iter=2).fit(Zd, y, columns=dcols)
    assert not short.converged_ and short.residual_[0] > 1e-14
    kw = dict(alpha=1e-3, tol=1e-6, max_epochs=5000, random_state=0, selection="cyclic")
    lcd = rbcd.CDRegressor(parallel="grid", **kw).fit(Z, y, columns=cols)
    dcd = rd.CDRegressor(**kw).fit(Zd, y, columns=dcols)
    assert dcd.stop_ == lcd.stop_ == "tol" and dcd.alpha_ == lcd.alpha_ == 1e-3
    yc = (y > np.median(y)).astype(int)
    dcl = rd.CDClassifier(decision_epochs=2, max_epochs=500, random_state=0).fit(
        Zd, yc, columns=dcols)
    assert dcl.stop_ in ("decisions", "tol")


# ---------------------------------------------------------------------------- QA pass
def _sparse_data(n=900, d=6, seed=0):
    """Mostly-zero rows: a column zero everywhere, one zero in the first partitions only."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random(X.shape) < 0.6] = 0.0
    X[:, 4] = 0.0
    X[:n // 3, 5] = 0.0
    return X


@pytest.mark.parametrize("kw", [dict(sigma="scale"), dict(sigma=1.0, n_features=64)])
def test_sparse_input_equals_the_local_binning(client, kw):
    # QA: scipy-sparse X (a matrix, or dask chunks) failed in the workers with "setting an
    # array element with a sequence"; it is binned as the local RandomBinning bins it (Z of
    # the dense rows, sigma="scale" the dense value), bit for bit, exact and hashed
    X = _sparse_data()
    Xs = sp.csr_matrix(X)
    Xn = _sparse_data(200, seed=1) + 3.0 * (np.arange(200) % 7 == 0)[:, None]  # some off the bins
    local = rbcd.RandomBinning(n_grids=8, random_state=0, **kw)
    Z = local.fit_transform(X)
    chunked = da.from_array(Xs, chunks=((300, 0, 1, 599), 6), asarray=False)
    assert sp.issparse(chunked._meta)
    for Xin in (Xs, chunked):
        drb = rd.RandomBinning(n_grids=8, random_state=0, **kw)
        assert_same_Z(drb.fit_transform(Xin), Z)
        assert drb.sigma_ == local.sigma_
        assert_same_Z(drb.transform(sp.csr_matrix(Xn)), local.transform(Xn))
        assert_same_Z(rd.RandomBinning(n_grids=8, random_state=0, **kw).fit(Xin).transform(Xin),
                      local.transform(X))
    assert rd.RandomBinning().__sklearn_tags__().input_tags.sparse
    # a non-finite stored value: named by its global row, as for dense partitions
    bad = Xs.copy()
    k = bad.indptr[437]                   # row 437's first stored entry
    assert bad.indptr[438] > k
    bad.data[k] = np.nan
    col = int(bad.indices[k])
    with pytest.raises(ValueError, match=f"at row 437, column {col}"):
        rd.RandomBinning(n_grids=4, sigma=1.0, **({"n_features": 64} if "n_features" in kw
                                                   else {})).fit_transform(
            da.from_array(bad, chunks=(200, 6), asarray=False)).compute()


def test_sparse_input_fits_the_models_as_dense(client):
    # QA: rd.RBRegressor / RBClassifier.fit on sparse X failed in the workers; the fit on
    # sparse X is the fit on the same rows dense (the same Z), alpha="auto" included
    X = _sparse_data(1200)
    Xs = sp.csr_matrix(X)
    y = X[:, 0] + X[:, 1] ** 2
    yc = (X[:, 0] + X[:, 2] > 0).astype(int)
    kw = dict(n_grids=8, random_state=0)
    chunked = da.from_array(Xs, chunks=(400, 6), asarray=False)
    dense = da.from_array(X, chunks=(400, 6))
    for cls, t, extra in ((rd.RBRegressor, y, {}), (rd.RBClassifier, yc, {}),
                          (rd.RBClassifier, yc, dict(solver="cd", max_epochs=50))):
        # each sparse input against the dense rows in the same partitions: the same bits
        for Xin, ref_in in ((Xs, X), (chunked, dense)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                m = cls(**kw, **extra).fit(Xin, t)
                ref = cls(**kw, **extra).fit(ref_in, t)
            assert m.alpha_ == ref.alpha_
            score = "predict" if cls is rd.RBRegressor else "decision_function"
            np.testing.assert_array_equal(getattr(m, score)(Xin).compute(),
                                          getattr(ref, score)(ref_in).compute())


def test_complex_X_is_refused_from_its_dtype(client):
    # QA: complex X was fitted on its real part (a ComplexWarning only); refused as the
    # local estimators refuse it, from the dtype: the data are never computed
    X, y = data(400)
    with pytest.raises(ValueError, match="Complex data not supported"):
        rbcd.RandomBinning().fit(X + 1j * X)              # the local message

    def never():
        raise AssertionError("the complex data were computed")

    lazy = da.from_delayed(dask.delayed(never)(), shape=(400, 3), dtype=np.complex128)
    for fit in (lambda Xc: rd.RandomBinning(n_grids=4).fit(Xc),
                lambda Xc: rd.RandomBinning(n_grids=4).fit_transform(Xc),
                lambda Xc: rd.RBRegressor(n_grids=8, sigma=1.0, alpha=0.5, random_state=0).fit(Xc, y),
                lambda Xc: rd.RBClassifier(n_grids=8, alpha=0.5).fit(Xc, (y > 0).astype(int))):
        for Xc in (X + 1j * X, da.from_array(X + 1j * X, chunks=100), sp.csr_matrix(X + 1j * X),
                   lazy):
            with pytest.raises(ValueError, match="^Complex data not supported: X has dtype complex128"):
                fit(Xc)
    fitted = rd.RandomBinning(n_grids=4, sigma=1.0).fit(X)
    with pytest.raises(ValueError, match="Complex data not supported"):
        fitted.transform(lazy)
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    frame = dd.from_pandas(pd.DataFrame({"a": X[:, 0], "b": X[:, 1] + 1j}), npartitions=2)
    with pytest.raises(ValueError, match="Complex data not supported: X has dtype complex128"):
        rd.RandomBinning(n_grids=4).fit(frame)
    with pytest.raises(ValueError, match="Complex data not supported: y"):
        rd.RBRegressor(n_grids=4, alpha=0.5).fit(X, da.from_array(y + 1j, chunks=100))


def test_cd_solvers_name_where_alpha_auto_is_chosen(client):
    # QA: rd.CDRegressor(alpha="auto") said only "alpha must be a finite real number"
    X, y = data(300)
    Zd, cols = rd.RandomBinning(n_grids=4, sigma=1.0, random_state=0).fit_transform(
        da.from_array(X, chunks=150), return_columns=True)
    for cls, t in ((rd.CDRegressor, y), (rd.CDClassifier, (y > 0).astype(int))):
        with pytest.raises(ValueError, match=rf"rbcd.dask.{cls.__name__} needs a number for "
                                             r"alpha, got 'auto'.*RBRegressor / RBClassifier"):
            cls(alpha="auto").fit(Zd, t, columns=cols)
    for path in ("README.md", os.path.join("docs", "dask.md")):
        text = " ".join(open(os.path.join(os.path.dirname(os.path.dirname(__file__)),
                                          path)).read().split())
        assert "take a numeric `alpha` only" in text


def test_dask_y_errors_name_the_index_and_length_as_locally(client):
    # QA: a NaN in a dask y said "y contains NaN or inf" without the index, a y of the wrong
    # length scikit-learn's "inconsistent numbers of samples"; now the local messages (the
    # first bad entry in row order, though two partitions hold one)
    X, y = data(1200)
    Xd = da.from_array(X, chunks=300)
    bad = y.copy()
    bad[801] = np.nan
    bad[1100] = np.inf
    yd = da.from_array(bad, chunks=300)
    yc = (y > np.median(y)).astype(float)
    yc[801] = np.nan
    with pytest.raises(ValueError, match=r"^y contains NaN or inf \(nan at index 801\)$"):
        rbcd.RBRegressor(n_grids=4).fit(X, bad)        # the local message
    Zd, cols = rd.RandomBinning(n_grids=4, sigma=1.0, random_state=0).fit_transform(
        Xd, return_columns=True)
    fits = [lambda t: rd.RBRegressor(n_grids=4).fit(Xd, t),              # alpha="auto"
            lambda t: rd.RBRegressor(n_grids=4, alpha=1.0).fit(Xd, t),   # in the solver's blocks
            lambda t: rd.RidgeCG().fit(Zd, t),
            lambda t: rd.CDRegressor(max_epochs=2).fit(Zd, t, columns=cols)]
    for fit in fits:
        with pytest.raises(ValueError, match=r"^y contains NaN or inf \(nan at index 801\)$"):
            fit(yd)
    for fit in (lambda t: rd.RBClassifier(n_grids=4).fit(Xd, t),
                lambda t: rd.RBClassifier(n_grids=4, alpha=1.0).fit(Xd, t)):
        with pytest.raises(ValueError, match=r"^y contains NaN or inf \(nan at index 801\)$"):
            fit(da.from_array(yc, chunks=300))
    Y2 = np.column_stack([y, y])
    Y2[950, 1] = -np.inf
    with pytest.raises(ValueError, match=r"\(-inf at index \(950, 1\)\)$"):
        rd.RidgeCG().fit(Zd, da.from_array(Y2, chunks=(300, 2)))
    short = da.from_array(y[:1199], chunks=300)
    for fit in fits[:3]:
        with pytest.raises(ValueError, match="^y has 1199 rows but X has 1200 rows$"):
            fit(short)
    with pytest.raises(ValueError, match="^y has 1199 rows but X has 1200 rows$"):
        rd.RBRegressor(n_grids=4).fit(Xd, y[:1199])    # y in memory: the same words


def _doc_texts():
    """docs/dask.md as it is, and docs/dask.md with the README, whitespace collapsed."""
    root = os.path.dirname(os.path.dirname(__file__))
    doc = open(os.path.join(root, "docs", "dask.md")).read()
    readme = open(os.path.join(root, "README.md")).read()
    return doc, " ".join(doc.split()) + " " + " ".join(readme.split())


def test_docs_first_example_runs_as_a_script():
    # QA: docs/dask.md's first example started a Client at import: run as a script, the
    # LocalCluster's worker processes import it again ("bootstrapping phase" RuntimeError)
    import re

    first = re.search(r"```python\n(.*?)```", _doc_texts()[0], re.S).group(1)
    assert 'if __name__ == "__main__":' in first
    assert first.index('if __name__ == "__main__":') < first.index("Client()")
    compile(first, "dask.md", "exec")


def test_docs_cg_iterations_can_differ_by_a_few(client):
    # QA: the README said the Dask CG "takes the same iterations" as the local solver; the
    # partitions' sums come in another order, so the counts can differ by a few
    flat = _doc_texts()[1]
    assert "takes the same iterations" not in flat and "step for step" not in flat
    assert "can differ by a few" in flat and "tolerance by a few" in flat
    X, _ = data(3000)
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    kw = dict(n_grids=16, sigma=1.0, alpha=1.0, solver="cg", tol=1e-6, random_state=0)
    local = rbcd.RBClassifier(**kw).fit(X, y)
    dist = rd.RBClassifier(**kw).fit(da.from_array(X, chunks=700), y)
    assert abs(int(dist.n_iter_[0]) - int(local.n_iter_[0])) <= 5


def test_docs_auto_alpha_is_the_local_choice_without_linear_term(client):
    # QA: docs/dask.md said alpha="auto" is "the local model's choice" up to 1,000 rows, but
    # the local default linear="auto" can choose another alpha with its linear term: the
    # Dask choice is the local model's with linear=0 (the documented 800-row example)
    flat = _doc_texts()[1]
    assert "rows that is the local model's choice" not in flat
    assert "the choice of the local model with `linear=0`" in flat
    X, y = data(800, seed=3)
    y3 = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    kw = dict(n_grids=8, random_state=0)
    dist = rd.RBClassifier(**kw).fit(da.from_array(X, chunks=300), y3)
    plain = rbcd.RBClassifier(linear=0, **kw).fit(X, y3)
    default = rbcd.RBClassifier(**kw).fit(X, y3)
    assert dist.alpha_ == pytest.approx(plain.alpha_, rel=1e-12)
    assert default.linear_ == 1.0 and default.alpha_ != pytest.approx(plain.alpha_, rel=1e-3)
    assert "0.8 locally with `linear_` 1.0, 0.253 on Dask" in flat
    assert f"{default.alpha_:.3g}" == "0.8" and f"{plain.alpha_:.3g}" == "0.253"


def test_documented_gather_of_z_works_on_a_temporary(client):
    # the RandomBinning docstring's way to gather Z: with to_delayed's default
    # optimize_graph=True the delayed blocks hold the persisted keys without their futures,
    # and a Z not kept in a variable was released before the compute ("lost dependencies",
    # about 2 times in 5); optimize_graph=False keeps them
    X = da.from_array(np.random.default_rng(0).uniform(size=(8000, 3)), chunks=2000)
    for seed in range(6):
        Z = sp.vstack(dask.compute(*rd.RandomBinning(n_grids=4, random_state=seed)
                                   .fit_transform(X).to_delayed(optimize_graph=False).ravel()))
        assert Z.shape[0] == 8000 and Z.nnz == 8000 * 4
    assert "to_delayed(optimize_graph=False)" in rd.RandomBinning.__doc__
