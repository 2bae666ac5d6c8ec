"""RidgeCG / RidgeCGClassifier and the parallel sparse products of rbcd.solvers._sparse."""
import importlib
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge, RidgeClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from rbcd.binning.random_binning import RandomBinning
from rbcd.solvers import _sparse
from rbcd.solvers import cg as ridge_module
from rbcd.models import RBClassifier, RBRegressor
from rbcd.solvers.cg import RidgeCG, RidgeCGClassifier, default_max_iter, solve_ridge_cg


def _problem(seed=0, n=120, D=40, k=None, density=0.15, dtype=np.float64):
    rng = np.random.default_rng(seed)
    Z = sp.random(n, D, density=density, random_state=seed, format="csr", dtype=dtype)
    Z.data[:] = rng.standard_normal(Z.nnz).astype(dtype)
    y = rng.standard_normal(n if k is None else (n, k))
    sw = rng.uniform(0.0, 3.0, n)
    return Z, y, sw


def _rb_matrix(seed, n=400, d=3, n_grids=16, sigma=0.6):
    X = np.random.default_rng(seed).uniform(-1, 1, size=(n, d))
    try:
        from rbcd import RandomBinning
        rb = RandomBinning(n_grids=n_grids, sigma=sigma, random_state=seed)
    except (ImportError, AttributeError):
        from rbcd_ref import RandomBinning
        rb = RandomBinning(n_grids=n_grids, sigma=sigma, random_state=seed)
    Z = sp.csr_matrix(rb.fit_transform(X))
    y = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2]
    return Z, y


# ----------------------------------------------------------------------------- products


@settings(max_examples=20)
@given(
    n=st.integers(1, 60), D=st.integers(1, 50), k=st.integers(1, 7),
    density=st.floats(0.0, 1.0), const=st.booleans(), f32=st.booleans(),
    idx64=st.booleans(), seed=st.integers(0, 2**31 - 1),
)
def test_products_match_scipy(n, D, k, density, const, f32, idx64, seed):
    rng = np.random.default_rng(seed)
    Z = sp.random(n, D, density=density, random_state=seed, format="csr",
                  dtype=np.float32 if f32 else np.float64)
    if const:
        Z.data[:] = 0.25
    if idx64:
        Z.indptr = Z.indptr.astype(np.int64)
        Z.indices = Z.indices.astype(np.int64)
    V = rng.standard_normal((D, k))
    U = rng.standard_normal((n, k))
    C = Z.tocsc()
    ref_dot = Z.astype(np.float64) @ V
    ref_tdot = Z.astype(np.float64).T @ U
    results = []
    for n_threads in (1, 2):
        out = np.empty((n, k))
        _sparse.csr_matmat(Z.indptr, Z.indices, Z.data, const, 0.25, V, out, n_threads)
        np.testing.assert_allclose(out, ref_dot, rtol=1e-5 if f32 else 1e-12, atol=1e-5 if f32 else 1e-12)
        outT = np.empty((D, k))
        _sparse.csr_matmat(C.indptr, C.indices, C.data, const, 0.25, U, outT, n_threads)
        np.testing.assert_allclose(outT, ref_tdot, rtol=1e-5 if f32 else 1e-12, atol=1e-5 if f32 else 1e-12)
        s = rng.uniform(0, 2, n)
        cs, cq = np.empty(D), np.empty(D)
        _sparse.csc_weighted_col_stats(C.indptr, C.indices, C.data, const, 0.25, s, cs, cq, n_threads)
        Zd = Z.toarray().astype(np.float64)
        np.testing.assert_allclose(cs, s @ Zd, rtol=1e-5 if f32 else 1e-12, atol=1e-12)
        np.testing.assert_allclose(cq, s @ (Zd * Zd), rtol=1e-5 if f32 else 1e-12, atol=1e-12)
        results.append((out, outT))
    # row/column loops do not depend on the thread count: bit-identical
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


@settings(max_examples=15)
@given(D=st.integers(1, 9000), k=st.integers(1, 5), use_diag=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_cg_vector_kernels_match_numpy(D, k, use_diag, seed):
    rng = np.random.default_rng(seed)
    act = np.sort(rng.choice(k, size=rng.integers(1, k + 1), replace=False)).astype(np.int64)
    na = act.size
    n_blocks = -(-D // _sparse.CG_BLOCK)
    X, R, P = (rng.standard_normal((D, k)) for _ in range(3))
    Pa = np.ascontiguousarray(P[:, act])
    Q0 = rng.standard_normal((D, na))
    zbar, diag = rng.standard_normal(D), rng.uniform(-0.1, 2.0, D)
    tsum, alpha = rng.standard_normal(na), rng.uniform(0.0, 1.0, k)
    step, beta = rng.standard_normal(na), rng.standard_normal(na)
    d = diag[:, None] + alpha[None, :]
    minv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 1.0) if use_diag else np.ones((D, k))
    Q_ref = Q0 + alpha[act] * Pa - np.outer(zbar, tsum)
    X_ref, R_ref = X.copy(), R.copy()
    X_ref[:, act] += step * Pa
    R_ref[:, act] -= step * Q_ref
    P_ref = P.copy()
    P_ref[:, act] = minv[:, act] * R_ref[:, act] + beta * P[:, act]
    outs = []
    for n_threads in (1, 2):
        Q = Q0.copy()
        part = np.empty((n_blocks, na))
        _sparse.cg_operator_tail(Q, Pa, zbar, tsum, alpha[act].copy(), True, part, n_threads)
        np.testing.assert_allclose(Q, Q_ref, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(part.sum(0), (Pa * Q_ref).sum(0), rtol=1e-10, atol=1e-10)
        Xt, Rt, Pt = X.copy(), R.copy(), P.copy()
        prr, prz = np.empty((n_blocks, na)), np.empty((n_blocks, na))
        mi = np.ascontiguousarray(minv) if use_diag else np.empty((0, k))
        _sparse.cg_step(Xt, Rt, Pa, Q, act, step, mi, prr, prz, n_threads)
        np.testing.assert_allclose(Xt, X_ref, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(Rt, R_ref, rtol=1e-13, atol=1e-12)
        r = R_ref[:, act]
        np.testing.assert_allclose(prr.sum(0), (r * r).sum(0), rtol=1e-10)
        np.testing.assert_allclose(prz.sum(0), (r * r * minv[:, act]).sum(0), rtol=1e-10, atol=1e-10)
        _sparse.cg_direction(Pt, Rt, act, beta, mi, n_threads)
        np.testing.assert_allclose(Pt, P_ref, rtol=1e-12, atol=1e-12)
        outs.append((Q, prr, prz, Pt))
    for a, b in zip(*outs):  # no dependence on the thread count
        np.testing.assert_array_equal(a, b)
    # the block sums are sums of the block's rows in increasing order, bit for bit (the
    # contract that keeps every thread count's and every layout's CG iterates the same)
    Q, prr, prz, _ = outs[0]
    r = R_ref[:, act]
    for b in range(n_blocks):
        rows = range(b * _sparse.CG_BLOCK, min(D, (b + 1) * _sparse.CG_BLOCK))
        for a in range(na):
            s_pq = s_rr = s_rz = 0.0
            for j in rows:
                s_pq += Pa[j, a] * Q[j, a]
                s_rr += r[j, a] * r[j, a]
                s_rz += r[j, a] * r[j, a] * minv[j, act[a]]
            assert part[b, a] == s_pq and prr[b, a] == s_rr and prz[b, a] == s_rz


def test_cg_vector_kernels_take_one_preconditioner_column_for_a_shared_alpha():
    # every target with the same alpha: a (D, 1) M^-1 gives the (D, k) one's bits
    rng = np.random.default_rng(5)
    D, k = 5000, 3
    act = np.array([0, 2], dtype=np.int64)
    X, R, P = (rng.standard_normal((D, k)) for _ in range(3))
    Pa = np.ascontiguousarray(P[:, act])
    Q = rng.standard_normal((D, 2))
    d = rng.uniform(-0.1, 2.0, D)[:, None] + 0.3
    col = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 1.0)
    n_blocks = -(-D // _sparse.CG_BLOCK)
    outs = []
    for minv in (np.ascontiguousarray(np.repeat(col, k, axis=1)), np.ascontiguousarray(col)):
        Xt, Rt, Pt = X.copy(), R.copy(), P.copy()
        prr, prz = np.empty((n_blocks, 2)), np.empty((n_blocks, 2))
        _sparse.cg_step(Xt, Rt, Pa, Q, act, np.array([0.5, -1.5]), minv, prr, prz, 2)
        _sparse.cg_direction(Pt, Rt, act, np.array([0.25, 2.0]), minv, 2)
        outs.append((Xt, Rt, Pt, prr, prz))
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="inconsistent"):
        _sparse.cg_direction(P.copy(), R, act, np.ones(2), np.ones((D, 2)), 1)


def test_product_shape_errors():
    Z = sp.random(5, 4, density=0.5, random_state=0, format="csr")
    with pytest.raises(ValueError, match="out has shape"):
        _sparse.csr_matmat(Z.indptr, Z.indices, Z.data, False, 0.0, np.ones((4, 2)), np.empty((5, 3)), 1)


# ------------------------------------------------------------------------- vs sklearn


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("multi", [True, False])
@pytest.mark.parametrize("dense", [True, False])
def test_matches_sklearn_ridge(fit_intercept, weighted, multi, dense):
    Z, y, sw = _problem(seed=3, k=3 if multi else None)
    if not weighted:
        sw = None
    Zin = Z.toarray() if dense else Z
    ours = RidgeCG(alpha=0.7, fit_intercept=fit_intercept, tol=1e-12).fit(Zin, y, sample_weight=sw)
    for solver in ("auto", "sparse_cg"):
        ref = Ridge(alpha=0.7, fit_intercept=fit_intercept, solver=solver, tol=1e-14)
        # "auto" on dense data is an exact Cholesky solve
        ref.fit(Z.toarray() if solver == "auto" else Zin, y, sample_weight=sw)
        np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-8, atol=1e-9)
        np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-8, atol=1e-9)
    assert ours.coef_.shape == ((3, Z.shape[1]) if multi else (Z.shape[1],))
    assert ours.n_iter_.shape == ((3,) if multi else (1,))
    np.testing.assert_allclose(ours.predict(Zin), ref.predict(Zin), rtol=1e-8, atol=1e-9)


def test_sample_weight_equals_repeating_rows():
    Z, y, _ = _problem(seed=5)
    w = np.random.default_rng(5).integers(0, 3, Z.shape[0])
    a = RidgeCG(alpha=0.3, tol=1e-12).fit(Z, y, sample_weight=w)
    rows = np.repeat(np.arange(Z.shape[0]), w)
    b = RidgeCG(alpha=0.3, tol=1e-12).fit(Z[rows], y[rows])
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-8, atol=1e-10)


def test_float32_keeps_float32():
    Z, y, _ = _problem(seed=7, dtype=np.float32)
    ours = RidgeCG(alpha=1.0, tol=1e-10).fit(Z, y)
    assert ours.coef_.dtype == np.float32
    assert ours.predict(Z).dtype == np.float32
    ref = Ridge(alpha=1.0, solver="cholesky").fit(Z.astype(np.float64).toarray(), y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-4, atol=1e-5)
    dense = RidgeCG(alpha=1.0, tol=1e-10).fit(Z.toarray(), y)
    assert dense.coef_.dtype == np.float32


@pytest.mark.parametrize("Zfmt", ["csc", "coo", "lil"])
def test_any_sparse_format(Zfmt):
    Z, y, _ = _problem(seed=8)
    a = RidgeCG(tol=1e-12).fit(Z, y)
    b = RidgeCG(tol=1e-12).fit(Z.asformat(Zfmt) if Zfmt != "lil" else sp.lil_matrix(Z), y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-10, atol=1e-12)


def test_duplicate_entries_are_summed():
    Z, y, _ = _problem(seed=10)
    # every entry stored twice, as halves: the same matrix
    dup = sp.csr_matrix((np.repeat(Z.data / 2, 2), np.repeat(Z.indices, 2), 2 * Z.indptr),
                        shape=Z.shape)
    assert not dup.has_canonical_format
    before = dup.data.copy()
    a = RidgeCG(tol=1e-12).fit(Z, y)
    b = RidgeCG(tol=1e-12).fit(dup, y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(dup.data, before)  # the input is not modified


def test_alpha_zero_and_array_alpha():
    Z, y, _ = _problem(seed=9, n=200, D=20, k=2, density=0.5)
    a = RidgeCG(alpha=0.0, tol=1e-12).fit(Z, y)
    ref = Ridge(alpha=0.0, solver="cholesky").fit(Z.toarray(), y)
    np.testing.assert_allclose(a.coef_, ref.coef_, rtol=1e-7, atol=1e-8)
    b = RidgeCG(alpha=[0.5, 2.0], tol=1e-12).fit(Z, y)
    ref = Ridge(alpha=[0.5, 2.0], solver="cholesky").fit(Z.toarray(), y)
    np.testing.assert_allclose(b.coef_, ref.coef_, rtol=1e-8, atol=1e-9)


def test_jacobi_and_plain_give_same_solution():
    Z, y = _rb_matrix(0)
    a = RidgeCG(alpha=1e-2, tol=1e-10, preconditioner="jacobi").fit(Z, y)
    b = RidgeCG(alpha=1e-2, tol=1e-10, preconditioner=None).fit(Z, y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-6, atol=1e-7)


def test_jacobi_halves_iterations_on_badly_scaled_columns():
    # Jacobi is exact diagonal scaling: it undoes column scales spanning 1e-2..1e2.
    # (On random binning matrices without the grid structure it costs iterations at
    # tight tolerances; with it, see test_projected_jacobi_needs_fewer_iterations_at_tight_tol
    # and rbcd.solvers.cg's module docstring.)
    for seed in range(4):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((300, 30)) * np.logspace(-2, 2, 30)
        y = X @ rng.standard_normal(30) + rng.standard_normal(300)
        a = RidgeCG(alpha=1e-2, tol=1e-8, preconditioner="jacobi").fit(sp.csr_matrix(X), y)
        b = RidgeCG(alpha=1e-2, tol=1e-8, preconditioner=None).fit(sp.csr_matrix(X), y)
        assert 2 * a.n_iter_[0] <= b.n_iter_[0], (seed, a.n_iter_, b.n_iter_)
        exact = Ridge(alpha=1e-2, solver="cholesky").fit(X, y)
        np.testing.assert_allclose(a.coef_, exact.coef_, rtol=1e-4, atol=1e-4)


def test_n_jobs_gives_identical_results():
    Z, y = _rb_matrix(4, n=4000, n_grids=32)  # large enough that 2 threads are used
    Y = np.column_stack([y, -y, y ** 2])
    a = RidgeCG(alpha=0.1, tol=1e-8, n_jobs=1).fit(Z, Y)
    b = RidgeCG(alpha=0.1, tol=1e-8, n_jobs=2).fit(Z, Y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.n_iter_, b.n_iter_)


def test_columns_freeze_independently():
    Z, y, _ = _problem(seed=11, k=2)
    y[:, 1] = 0.0  # a zero right-hand side: solved at once
    m = RidgeCG(tol=1e-10).fit(Z, y)
    assert m.n_iter_[1] == 0
    assert m.n_iter_[0] > 0
    np.testing.assert_array_equal(m.coef_[1], 0.0)
    single = RidgeCG(tol=1e-10).fit(Z, y[:, 0])
    np.testing.assert_allclose(m.coef_[0], single.coef_, rtol=1e-12, atol=1e-14)


def test_solver_function_with_column_structure():
    Z, y = _rb_matrix(5)
    C = Z.tocsc()

    class Columns:
        indptr = C.indptr
        indices = C.indices
        value = float(Z.data[0])

    a = solve_ridge_cg(Z, y[:, None], alpha=0.1, tol=1e-10)
    b = solve_ridge_cg(Z, y[:, None], alpha=0.1, tol=1e-10, columns=Columns())
    np.testing.assert_allclose(a[0], b[0], rtol=1e-12, atol=1e-14)


def test_convergence_warning_and_default_cap():
    Z, y, _ = _problem(seed=12)
    with pytest.warns(ConvergenceWarning, match="tol"):
        m = RidgeCG(alpha=1e-6, tol=1e-14, max_iter=2).fit(Z, y)
    assert m.n_iter_[0] == 2
    assert default_max_iter(3) == 30
    assert default_max_iter(500) == 5000
    assert default_max_iter(10**7) == 10_000


# ----------------------------------------------------------------------- classifier


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("class_weight", [None, "balanced"])
def test_classifier_matches_sklearn(n_classes, class_weight):
    Z, _, sw = _problem(seed=13, n=150)
    y = np.random.default_rng(13).integers(0, n_classes, Z.shape[0])
    labels = np.array(["a", "b", "c"])[y]
    ours = RidgeCGClassifier(alpha=0.5, tol=1e-12, class_weight=class_weight).fit(Z, labels, sample_weight=sw)
    ref = RidgeClassifier(alpha=0.5, solver="sparse_cg", tol=1e-14, class_weight=class_weight)
    ref.fit(Z, labels, sample_weight=sw)
    np.testing.assert_array_equal(ours.classes_, ref.classes_)
    assert ours.coef_.shape == (1 if n_classes == 2 else 3, Z.shape[1])
    np.testing.assert_allclose(ours.coef_, ref.coef_.reshape(ours.coef_.shape), rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(ours.decision_function(Z), ref.decision_function(Z), rtol=1e-8, atol=1e-9)
    np.testing.assert_array_equal(ours.predict(Z), ref.predict(Z))


def test_classifier_one_class_error():
    Z, _, _ = _problem(seed=14)
    with pytest.raises(ValueError, match="2 classes"):
        RidgeCGClassifier().fit(Z, np.zeros(Z.shape[0]))


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "params, match",
    [
        ({"alpha": -1.0}, "alpha"),
        ({"alpha": np.nan}, "alpha"),
        ({"alpha": [1.0, 2.0, 3.0]}, "alpha"),
        ({"tol": -1.0}, "tol"),
        ({"max_iter": 0}, "max_iter"),
        ({"max_iter": 2.5}, "max_iter"),
        ({"preconditioner": "ilu"}, "preconditioner"),
        ({"n_jobs": 0}, "n_jobs"),
    ],
)
def test_parameter_errors(params, match):
    Z, y, _ = _problem(seed=15)
    with pytest.raises(ValueError, match=match):
        RidgeCG(**params).fit(Z, y)


def test_data_errors():
    Z, y, _ = _problem(seed=16)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        RidgeCG().fit(Z, y[:-1])
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        RidgeCG().fit(Z, bad)
    bad[3] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        RidgeCG().fit(Z, bad)
    with pytest.raises(ValueError, match="sample_weight"):
        RidgeCG().fit(Z, y, sample_weight=-np.ones(Z.shape[0]))
    with pytest.raises(ValueError, match="sample_weight"):
        RidgeCG().fit(Z, y, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="zero"):
        RidgeCG().fit(Z, y, sample_weight=np.zeros(Z.shape[0]))
    m = RidgeCG().fit(Z, y)
    with pytest.raises(ValueError, match="features"):
        m.predict(Z[:, :-1])


# ------------------------------------------------- Jacobi projected off the grid null space


def _rb_fitted(seed, n=300, d=3, n_grids=8, sigma=0.6):
    """(fitted exact-mode rbcd.RandomBinning, its training Z, X, y)."""
    from rbcd import RandomBinning

    X = np.random.default_rng(seed).uniform(-1, 1, size=(n, d))
    rb = RandomBinning(n_grids=n_grids, sigma=sigma, random_state=seed).fit(X)
    Z = sp.csr_matrix(rb.transform(X))
    y = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2]
    return rb, Z, X, y


@pytest.fixture
def projections(monkeypatch):
    """Counts the calls of the grid projection (0: the plain Jacobi path was taken)."""
    calls = []
    original = ridge_module._GridProjection.__call__

    def spy(self, V):
        calls.append(V.shape)
        return original(self, V)

    monkeypatch.setattr(ridge_module._GridProjection, "__call__", spy)
    return calls


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("n_empty", [0, 2])
def test_grid_projection_is_the_orthogonal_projection_off_the_null_space(fit_intercept, n_empty):
    # grids of sizes 3, 1, 4, (empty grids), 2: the D x D matrix, applied to I
    sizes = [3, 1, 4] + [0] * n_empty + [2]
    gp = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    D, G = int(gp[-1]), len(sizes)
    proj = ridge_module._GridProjection(gp, fit_intercept)
    Pm = proj(np.eye(D))
    E = np.zeros((D, G))
    for g in range(G):
        E[gp[g]:gp[g + 1], g] = 1.0
    E = E[:, np.diff(gp) > 0]
    null = E if fit_intercept else E[:, 1:] - E[:, :1]          # e_g, or e_g - e_0
    np.testing.assert_allclose(Pm, Pm.T, atol=1e-15)            # symmetric
    np.testing.assert_allclose(Pm @ Pm, Pm, atol=1e-14)         # idempotent
    np.testing.assert_allclose(Pm @ null, 0.0, atol=1e-14)      # kills the null directions
    # identity on their orthogonal complement: rank D - dim(null)
    assert np.linalg.matrix_rank(Pm) == D - np.linalg.matrix_rank(null)
    v = np.random.default_rng(0).standard_normal((D, 2))
    v_perp = v - null @ np.linalg.lstsq(null, v, rcond=None)[0]
    np.testing.assert_allclose(proj(v_perp.copy()), v_perp, atol=1e-13)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_grid_projection_every_width(fit_intercept):
    # every column count m: the exact projection, applied repeatedly by one instance
    gp = np.array([0, 5, 5, 12, 13, 20], dtype=np.int64)
    proj = ridge_module._GridProjection(gp, fit_intercept)
    E = np.zeros((20, 5))
    for g in range(5):
        E[gp[g]:gp[g + 1], g] = 1.0
    E = E[:, np.diff(gp) > 0]
    null = E if fit_intercept else E[:, 1:] - E[:, :1]
    Q = np.linalg.qr(null)[0]
    exact = np.eye(20) - Q @ Q.T
    rng = np.random.default_rng(0)
    for m in (3, 1, 2, 6, 4):
        V = rng.standard_normal((20, m))
        np.testing.assert_allclose(proj(V.copy()), exact @ V, atol=1e-14)



@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("m", [1, 3])
def test_grid_center_kernel_matches_numpy_for_any_thread_count(fit_intercept, m):
    """_sparse.grid_center (the parallel projection): numpy's formula (grid means by
    reduceat, the shift gathered and subtracted) to rounding, and the same bits for every
    thread count (grid sums in row order on one thread; rows spread over many blocks and
    grids from 1 to 30,000 rows). Bad grid pointers raise."""
    rng = np.random.default_rng(7 + m)
    sizes = np.array([30000, 1, 7, 12000, 3, 9000, 2, 25000, 5, 4096, 4097])
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    D = int(ptr[-1])
    inv = 1.0 / sizes
    inv_total = 1.0 / inv.sum()
    V0 = rng.normal(size=(D, m)) + rng.normal(size=(len(sizes), 1)).repeat(sizes, axis=0)
    means = np.add.reduceat(V0, ptr[:-1], axis=0) * inv[:, None]
    if not fit_intercept:
        means -= inv[:, None] * (means.sum(axis=0) * inv_total)[None, :]
    want = V0 - np.repeat(means, sizes, axis=0)
    got = {}
    for n_jobs in (1, 2, 3, 8, 40):
        V = V0.copy()
        shift = _sparse.grid_center(V, ptr, inv, fit_intercept, inv_total, n_jobs)
        np.testing.assert_allclose(shift, means, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(V, want, rtol=1e-12, atol=1e-12)
        got[n_jobs] = V
    for n_jobs in (2, 3, 8, 40):
        np.testing.assert_array_equal(got[n_jobs], got[1])
    # the projection's defining property: grid sums 0 (fit_intercept), else equal means
    grid_sums = np.add.reduceat(got[1], ptr[:-1], axis=0)
    if fit_intercept:
        np.testing.assert_allclose(grid_sums, 0.0, atol=1e-8)
    with pytest.raises(ValueError, match="every grid"):
        _sparse.grid_center(V0.copy(), np.array([0, 5, 5, D], dtype=np.int64),
                            np.ones(3), fit_intercept, 1.0, 1)
    with pytest.raises(ValueError, match="ptr must run"):
        _sparse.grid_center(V0.copy(), np.array([0, 5, D - 1], dtype=np.int64),
                            np.ones(2), fit_intercept, 1.0, 1)


def test_grid_null_directions_of_rb_training_data():
    # the premise: Zc e_g = 0 (weighted centring), Z (e_g - e_h) = 0 on training data
    rb, Z, _, _ = _rb_fitted(1)
    s = np.random.default_rng(1).uniform(0.1, 2.0, Z.shape[0])
    gp = rb.grid_ptr_
    Zd = Z.toarray()
    Zc = Zd - (s @ Zd) / s.sum()
    for g in range(len(gp) - 1):
        e = np.zeros(Z.shape[1])
        e[gp[g]:gp[g + 1]] = 1.0
        np.testing.assert_allclose(Zc @ e, 0.0, atol=1e-13)
        np.testing.assert_allclose(Zd @ e, Zd[:, gp[0]:gp[1]].sum(1), atol=1e-13)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_projected_jacobi_gives_the_ridge_solution(fit_intercept, weighted, projections):
    rb, Z, _, y = _rb_fitted(2)
    sw = np.random.default_rng(2).uniform(0.2, 3.0, Z.shape[0]) if weighted else None
    Y = np.column_stack([y, np.cos(3 * y), -y])
    alphas = [0.01, 0.3, 2.0]
    kw = dict(alpha=alphas, fit_intercept=fit_intercept, tol=1e-12)
    proj = RidgeCG(**kw).fit(Z, Y, sample_weight=sw, columns=rb)
    assert len(projections) > 0                                  # the projected path ran
    n_calls = len(projections)
    plain = RidgeCG(preconditioner=None, **kw).fit(Z, Y, sample_weight=sw, columns=rb)
    assert len(projections) == n_calls                           # only with Jacobi
    ref = Ridge(alpha=alphas, fit_intercept=fit_intercept, solver="cholesky").fit(
        Z.toarray(), Y, sample_weight=sw)
    for m in (proj, plain):
        np.testing.assert_allclose(m.coef_, ref.coef_, rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(m.intercept_, ref.intercept_, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(proj.coef_, plain.coef_, rtol=1e-8, atol=1e-9)
    assert proj.n_iter_.shape == (3,) and np.all(proj.n_iter_ >= 1)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_projected_jacobi_needs_fewer_iterations_at_tight_tol(fit_intercept, projections):
    # N = 2000, R = 16, alpha = 0.01: projected / plain Jacobi iterations to 1e-8 were
    # 0.46-0.76 over 10 seeds x both intercepts (0.57 / 0.47 for this seed)
    rb, Z, _, y = _rb_fitted(0, n=2000, n_grids=16)
    kw = dict(alpha=0.01, fit_intercept=fit_intercept, tol=1e-8, n_jobs=1)
    jac = RidgeCG(**kw).fit(Z, y)
    assert projections == []                                     # no structure: plain Jacobi
    proj = RidgeCG(**kw).fit(Z, y, columns=rb)
    assert len(projections) == proj.n_iter_[0] + 1               # initial z, then every step
    assert proj.n_iter_[0] <= 0.85 * jac.n_iter_[0], (proj.n_iter_, jac.n_iter_)
    # both stop at a 1e-8 relative residual of a system with condition number ~1e4
    rel = np.linalg.norm(proj.coef_ - jac.coef_) / np.linalg.norm(jac.coef_)
    assert rel < 1e-4, rel
    assert abs(proj.intercept_ - jac.intercept_) < 1e-4


def test_projection_only_when_every_row_has_every_grid(projections):
    rb, Z, X, y = _rb_fitted(3)
    # new data reaching outside the training range: some rows miss some grids
    Xn = np.random.default_rng(3).uniform(-1.5, 1.5, size=X.shape)
    Zn = sp.csr_matrix(rb.transform(Xn))
    assert Zn.nnz < Zn.shape[0] * rb.n_grids
    kw = dict(alpha=0.05, tol=1e-12)
    with_b = RidgeCG(**kw).fit(Zn, y, columns=rb)
    without = RidgeCG(**kw).fit(Zn, y)
    assert projections == []
    np.testing.assert_array_equal(with_b.n_iter_, without.n_iter_)
    np.testing.assert_array_equal(with_b.coef_, without.coef_)
    ref = Ridge(alpha=0.05, solver="cholesky").fit(Zn.toarray(), y)
    np.testing.assert_allclose(with_b.coef_, ref.coef_, rtol=1e-7, atol=1e-8)
    # not all stored values equal (each row scaled): the grid sums are no longer constant
    Zs = sp.diags(np.random.default_rng(4).uniform(0.5, 2.0, Z.shape[0])) @ Z
    m = RidgeCG(**kw).fit(Zs, y, columns=rb)
    assert projections == []
    ref = Ridge(alpha=0.05, solver="cholesky").fit(Zs.toarray(), y)
    np.testing.assert_allclose(m.coef_, ref.coef_, rtol=1e-7, atol=1e-8)
    # dense input: the products do not use the column structure, plain Jacobi
    RidgeCG(**kw).fit(Z.toarray(), y, columns=rb)
    assert projections == []


def test_binning_accepts_rb_columns_and_rejects_mismatches(projections):
    from rbcd import RandomBinning

    rb, Z, X, y = _rb_fitted(5)
    Zc, cols = RandomBinning(n_grids=8, sigma=0.6, random_state=5)._fit_transform_columns(X)
    a = RidgeCG(alpha=0.1, tol=1e-10).fit(Zc, y, columns=cols)
    assert len(projections) > 0
    b = RidgeCG(alpha=0.1, tol=1e-10).fit(Z, y, columns=rb)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-8, atol=1e-10)
    other = RandomBinning(n_grids=8, sigma=0.6, random_state=6).fit(X)
    assert other.grid_ptr_[-1] != Z.shape[1]
    for est in (RidgeCG(), RidgeCGClassifier()):
        with pytest.raises(ValueError, match="columns"):
            est.fit(Z, y > 0, columns=other)
        with pytest.raises(ValueError, match="grid_ptr_"):
            est.fit(Z, y > 0, columns=RandomBinning(n_grids=8, n_features=64).fit(X))
        with pytest.raises(ValueError, match="grid_ptr_"):
            est.fit(Z, y > 0, columns=RandomBinning(n_grids=8))           # not fitted
        with pytest.raises(ValueError, match="matrix"):
            est.fit(Z[:-1], (y > 0)[:-1], columns=cols)                    # RBColumns of another Z


@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_with_binning(n_classes, projections):
    rb, Z, _, y = _rb_fitted(7)
    labels = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    sw = np.random.default_rng(7).uniform(0.5, 2.0, Z.shape[0])
    ours = RidgeCGClassifier(alpha=0.2, tol=1e-12, class_weight="balanced").fit(
        Z, labels, sample_weight=sw, columns=rb)
    assert len(projections) > 0
    ref = RidgeClassifier(alpha=0.2, solver="cholesky", class_weight="balanced").fit(
        Z.toarray(), labels, sample_weight=sw)
    np.testing.assert_allclose(ours.coef_, ref.coef_.reshape(ours.coef_.shape),
                               rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(ours.decision_function(Z), ref.decision_function(Z.toarray()),
                               rtol=1e-7, atol=1e-8)


def test_rb_estimators_use_the_projection(projections):
    # RBRegressor / RBClassifier pass the binning's RBColumns (with grid_ptr) to the solver
    from rbcd import RBClassifier, RBRegressor

    rng = np.random.default_rng(8)
    X = rng.uniform(-1, 1, size=(300, 3))
    y = np.sin(3 * X[:, 0])
    kw = dict(n_grids=8, sigma=0.6, solver="cg", alpha=0.1, tol=1e-8, random_state=0, n_jobs=1)
    reg = RBRegressor(preconditioner="jacobi", **kw).fit(X, y)
    assert len(projections) > 0
    n_calls = len(projections)
    plain = RBRegressor(preconditioner=None, **kw).fit(X, y)
    assert len(projections) == n_calls
    np.testing.assert_allclose(reg.predict(X), plain.predict(X), rtol=1e-6, atol=1e-7)
    RBClassifier(preconditioner="jacobi", **kw).fit(X, y > 0)
    assert len(projections) > n_calls


# ------------------------------------------------------------------------- the twin


def _ref_ridge():
    return importlib.import_module("rbcd_ref.solvers.cg")


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("preconditioner", ["jacobi", None])
def test_matches_twin(fit_intercept, preconditioner):
    ref_mod = _ref_ridge()
    Z, y = _rb_matrix(6, n=200)
    sw = np.random.default_rng(6).uniform(0.5, 2.0, Z.shape[0])
    Y = np.column_stack([y, np.cos(y)])
    kw = dict(alpha=0.05, fit_intercept=fit_intercept, tol=1e-10, preconditioner=preconditioner)
    a = RidgeCG(**kw).fit(Z, Y, sample_weight=sw)
    b = ref_mod.RidgeCG(**kw).fit(Z, Y, sample_weight=sw)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-7, atol=1e-8)
    labels = (y > np.median(y)).astype(int) + (y > np.quantile(y, 0.8))
    c = RidgeCGClassifier(**kw).fit(Z, labels)
    d = ref_mod.RidgeCGClassifier(**kw).fit(Z, labels)
    np.testing.assert_allclose(c.decision_function(Z), d.decision_function(Z), rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_matches_twin_with_binning(fit_intercept):
    # the twin accepts columns= and ignores it: the projection changes the path, not the answer
    ref_mod = _ref_ridge()
    rb, Z, _, y = _rb_fitted(9, n=200)
    sw = np.random.default_rng(9).uniform(0.5, 2.0, Z.shape[0])
    kw = dict(alpha=0.05, fit_intercept=fit_intercept, tol=1e-11)
    a = RidgeCG(**kw).fit(Z, y, sample_weight=sw, columns=rb)
    b = ref_mod.RidgeCG(**kw).fit(Z, y, sample_weight=sw, columns=rb)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-7, atol=1e-8)
    assert a.intercept_ == pytest.approx(b.intercept_, abs=1e-8)
    labels = (y > np.median(y)).astype(int)
    c = RidgeCGClassifier(**kw).fit(Z, labels, columns=rb)
    d = ref_mod.RidgeCGClassifier(**kw).fit(Z, labels, columns=rb)
    np.testing.assert_allclose(c.decision_function(Z), d.decision_function(Z), rtol=1e-7, atol=1e-8)


# -------------------------------------------------------------------- check_estimator


@parametrize_with_checks([RidgeCG(), RidgeCGClassifier(), RidgeCGClassifier(multi_class="ovo")])
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("kind", ["training", "new rows", "wide grid"])
def test_products_from_grid_labels_equal_csr_csc_bitwise(k, kind):
    """Z @ V and Z^T @ U from the grid labels sum in the order of the CSR / CSC kernels:
    the same bits, for training rows (one entry per grid), rows that miss grids (the
    label sentinel) and a grid of 65536 bins or more (int32 labels), any n_jobs."""
    from rbcd import RandomBinning
    from rbcd.solvers._columns import columns_from as _columns_from
    rng = np.random.default_rng(k)
    n = 70_000 if kind == "wide grid" else 3000
    X = rng.uniform(size=(n, 2 if kind == "wide grid" else 4))
    sigma = 1e-3 if kind == "wide grid" else 0.7
    rb = RandomBinning(n_grids=6, sigma=sigma, random_state=0).fit(X)
    if kind == "new rows":
        Z = rb.transform(rng.uniform(-0.2, 1.2, size=(n, 4)))
        assert Z.nnz < n * 6  # some rows miss some grids
        cols = _columns_from(Z, rb, 1)   # rbcd.solvers.cd's structure: labels built on demand
    else:
        Z, cols = rb._fit_transform_columns(X)
    if kind == "wide grid":
        assert rb.n_bins_.max() >= 65536
    V = rng.normal(size=(Z.shape[1], k))
    U = rng.normal(size=(n, k))
    plain = ridge_module._Products(Z, 1)
    assert plain.labels is None
    want = plain.dot(V), plain.tdot(U)
    for n_jobs in (1, 2):
        op = ridge_module._Products(Z, n_jobs, columns=cols)
        assert op.labels is not None
        np.testing.assert_array_equal(op.dot(V), want[0])
        np.testing.assert_array_equal(op.tdot(U), want[1])
        # the label kernel itself for every k (dot uses it for k = 1 only)
        ptrs, wide, gp, _ = op.labels
        out = np.empty((n, k))
        _sparse.labels_matmat(ptrs, wide, gp, plain.const_value, V, out, n_jobs)
        np.testing.assert_array_equal(out, want[0])


@pytest.mark.parametrize("k", [1, 2])
def test_label_tmatmat_ranges_sum_rows_in_order_for_any_thread_count(k):
    """labels_tmatmat sweeps U once per range of grids (up to 4 grids, up to 256 KiB of
    output columns), in row blocks of 2048: every column must still sum its rows in
    increasing order (np.add.at adds in index order: the reference), bit for bit, for
    thread counts below, at and above the number of ranges. Grids from 3 to 70,000 bins
    (one int32-labelled) make ranges of one and of several grids; the sentinel label
    (a row without an entry) adds nothing."""
    rng = np.random.default_rng(40 + k)
    n = 9000
    sizes = [3, 40000, 5, 6, 70000, 7, 8, 9, 10, 33000, 2, 11, 12, 13]
    gp = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    labels = []
    for nb in sizes:
        dt = np.uint16 if nb < 65536 else np.int32
        # few distinct bins in the small grids: long runs of adds to one address
        lab = rng.integers(0, nb + 1, size=n).astype(dt)   # nb: the sentinel
        labels.append(np.ascontiguousarray(lab))
    ptrs = np.array([a.ctypes.data for a in labels], dtype=np.uintp)
    wide = np.array([a.dtype == np.int32 for a in labels], dtype=np.uint8)
    U = rng.normal(size=(n, k))
    c = 0.125
    want = np.zeros((gp[-1], k))
    for g, lab in enumerate(labels):
        rows = np.flatnonzero(lab < sizes[g])
        for kk in range(k):
            np.add.at(want[:, kk], gp[g] + lab[rows].astype(np.int64), U[rows, kk])
    want *= c
    for n_jobs in (1, 2, 3, 7, 40):
        out = np.full((gp[-1], k), np.nan)
        _sparse.labels_tmatmat(ptrs, wide, gp, c, U, out, n_jobs)
        np.testing.assert_array_equal(out, want)



def test_label_tmatmat_claims_the_costliest_ranges_first():
    """range_order: ranges of more grids first (a range costs a sweep, modelled as two
    grids, plus its grids), ties in range order; every range exactly once."""
    bounds = np.array([0, 1, 5, 7, 8, 12, 15], dtype=np.int64)   # sizes 1, 4, 2, 1, 4, 3
    order = _sparse.range_order(bounds)
    assert order.dtype == np.int64
    np.testing.assert_array_equal(order, [1, 4, 5, 2, 0, 3])
    np.testing.assert_array_equal(_sparse.range_order(np.array([0, 9], dtype=np.int64)), [0])
    assert _sparse.range_order(np.array([0], dtype=np.int64)).shape == (0,)


@pytest.mark.parametrize("k", [1, 2])
def test_label_matmat_ranges_sum_grids_in_order_for_any_thread_count(k):
    """labels_matmat gathers a block of rows range of grids by range of grids (up to 4
    grids, up to 256 KiB of V's columns; k = 1 sums a range in a register): every row
    must still sum its grids in order (the reference: one vector add per grid, in grid
    order), bit for bit, for any thread count and with rows spread over many blocks.
    Grids from 2 to 70,000 bins (one int32-labelled) make ranges of one and of several
    grids; the sentinel label (a row without an entry) adds nothing."""
    rng = np.random.default_rng(50 + k)
    n = 70_001
    sizes = [3, 40000, 5, 6, 70000, 7, 8, 9, 10, 33000, 2, 11, 12, 13]
    gp = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    labels = []
    for nb in sizes:
        dt = np.uint16 if nb < 65536 else np.int32
        labels.append(np.ascontiguousarray(rng.integers(0, nb + 1, size=n).astype(dt)))
    ptrs = np.array([a.ctypes.data for a in labels], dtype=np.uintp)
    wide = np.array([a.dtype == np.int32 for a in labels], dtype=np.uint8)
    V = rng.normal(size=(gp[-1], k))
    c = 0.125
    want = np.zeros((n, k))
    for g, lab in enumerate(labels):
        rows = np.flatnonzero(lab < sizes[g])
        want[rows] += V[gp[g] + lab[rows].astype(np.int64)]
    want *= c
    for n_jobs in (1, 2, 3, 7, 40):
        out = np.full((n, k), np.nan)
        _sparse.labels_matmat(ptrs, wide, gp, c, V, out, n_jobs)
        np.testing.assert_array_equal(out, want)


def _rb_data(n=400, seed=0):
    from rbcd import RandomBinning

    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 3))
    y = np.sin(5 * X[:, 0]) + X[:, 1]
    return RandomBinning(n_grids=16, sigma=0.5, random_state=0).fit_transform(X), y


@pytest.mark.parametrize("bad", [dict(alpha="1"), dict(fit_intercept="yes"), dict(tol=-1.0),
                                 dict(max_iter=0), dict(preconditioner="ilu"),
                                 dict(n_jobs=1.5)])
def test_ridge_parameters_checked_like_the_other_estimators(bad):
    # issue 15 item 8: one validation layer (scikit-learn's constraints, a ValueError)
    Z, y = _rb_data(60)
    for Est, t in ((RidgeCG, y), (RidgeCGClassifier, y > 1)):
        with pytest.raises(ValueError, match=f"The '{next(iter(bad))}' parameter"):
            Est(**bad).fit(Z, t)


@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_ridge_extreme_targets_give_the_scaled_model(scale):
    # issue 15 item 2: never a silent zero model; the quadratic problem scales with y
    Z, y = _rb_data()
    base = RidgeCG(alpha=0.1, tol=1e-12).fit(Z, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no overflow / underflow RuntimeWarning
        big = RidgeCG(alpha=0.1, tol=1e-12).fit(Z, y * scale)
    assert big.converged_ and np.all(np.isfinite(big.coef_)) and np.any(big.coef_ != 0)
    np.testing.assert_allclose(big.coef_ / scale, base.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(big.intercept_ / scale, base.intercept_, rtol=1e-8)


def test_ridge_extreme_sample_weights():
    # s -> c s with alpha -> c alpha is the same problem (objective times c)
    Z, y = _rb_data()
    s = np.random.default_rng(1).uniform(0.5, 2.0, size=y.shape[0])
    base = RidgeCG(alpha=0.1, tol=1e-12).fit(Z, y, sample_weight=s)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = RidgeCG(alpha=0.1 * 1e160, tol=1e-12).fit(Z, y, sample_weight=s * 1e160)
    assert big.converged_
    np.testing.assert_allclose(big.coef_, base.coef_, rtol=1e-7, atol=1e-9)


def test_ridge_reports_convergence_and_the_true_stop_cause():
    # issue 17: converged_ and residual_; issue 15: tol=0 names why CG stopped
    Z, y = _rb_data()
    est = RidgeCG(alpha=0.1, tol=1e-6).fit(Z, y)
    assert est.converged_ is True and est.residual_.shape == (1,) and est.residual_[0] <= 1e-6
    capped = RidgeCG(alpha=0.1, tol=1e-12, max_iter=3)
    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=3"):
        capped.fit(Z, y)
    assert capped.converged_ is False and capped.residual_[0] > 1e-12
    assert capped.n_iter_[0] == 3
    exact = RidgeCG(alpha=0.1, tol=0.0)
    with pytest.warns(ConvergenceWarning) as rec:
        exact.fit(Z, y)
    msg = str(rec[0].message)
    assert "max_iter" not in msg and "search direction vanished" in msg
    assert f"after {int(exact.n_iter_[0])} iterations" in msg
    assert exact.converged_ is False and exact.n_iter_[0] < 10 * Z.shape[1]


# ----------------------------------------------------------------------------- verbose, scaling


def test_a_tol_below_rounding_is_named_not_max_iter():
    # tol=0 (allowed, as for scikit-learn's Ridge) runs CG to max_iter; the warning said
    # "Increase max_iter or alpha", which cannot help: it now names the tol
    Z, y, _ = _problem(seed=11)
    with pytest.warns(ConvergenceWarning, match=r"below float64's rounding\. Use a tol of "
                                                r"at least 1e-12") as rec:
        RidgeCG(alpha=0.5, tol=0.0, max_iter=200).fit(Z, y)
    assert "Increase max_iter" not in str(rec[0].message)
    with pytest.warns(ConvergenceWarning, match="Increase max_iter or alpha"):
        RidgeCG(alpha=0.5, tol=1e-10, max_iter=2).fit(Z, y)


def test_verbose_levels(capsys):
    # scikit-learn's levels (issue 17): 0 silent, 1 one summary line per fit, 2 a line per
    # iteration; the fit itself does not change
    Z, y, _ = _problem(seed=11)
    quiet = RidgeCG(alpha=0.5, tol=1e-8).fit(Z, y)
    assert capsys.readouterr().out == ""
    one = RidgeCG(alpha=0.5, tol=1e-8, verbose=1).fit(Z, y)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert f"{int(one.n_iter_[0])} iteration(s)" in lines[0] and "converged" in lines[0]
    assert f"{one.residual_[0]:.3e}" in lines[0] and "NOT" not in lines[0]
    np.testing.assert_array_equal(one.coef_, quiet.coef_)
    two = RidgeCG(alpha=0.5, tol=1e-8, verbose=2).fit(Z, y)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == int(two.n_iter_[0]) + 1 and "iteration 1:" in lines[0]
    with pytest.warns(ConvergenceWarning):
        RidgeCGClassifier(alpha=0.5, tol=1e-14, max_iter=2, verbose=1).fit(Z, y > 0)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and "NOT converged" in lines[0] and "max_iter" in lines[0]


@pytest.mark.parametrize("n", [300, 1500])
def test_verbose_two_prints_the_iterations_with_alpha_auto(capsys, n):
    # alpha="auto" chooses the penalty (leave-one-out, up to 1,000 rows on all of them,
    # above on a sample), then solves at it by CG: that solve prints its iterations at 2
    X = np.random.default_rng(5).uniform(size=(n, 3))
    y = np.sin(4 * X[:, 0]) + X[:, 1]
    Z, columns = RandomBinning(n_grids=16, random_state=0).fit_transform(X, return_columns=True)
    quiet = RidgeCG(alpha="auto").fit(Z, y, columns=columns)
    assert capsys.readouterr().out == ""
    two = RidgeCG(alpha="auto", verbose=2).fit(Z, y, columns=columns)
    lines = capsys.readouterr().out.splitlines()
    per_iteration = [line for line in lines if line.startswith("[RidgeCG] iteration ")]
    assert len(per_iteration) == int(two.n_iter_[0]) > 1
    assert len(lines) == len(per_iteration) + 1             # and the summary
    np.testing.assert_array_equal(two.coef_, quiet.coef_)


def test_huge_features_are_solved_in_power_of_two_units():
    # issue 15 item 2: Z * 2^k with alpha * 2^(2k) has the solution w / 2^k, exactly the
    # same iterates in power-of-two units; beyond 2^100 Z is rescaled before the products
    Z, y, _ = _problem(seed=12)
    a = RidgeCG(alpha=0.5, tol=1e-10).fit(Z, y)
    s = 2.0**300
    b = RidgeCG(alpha=0.5 * s * s, tol=1e-10).fit(Z * s, y)
    np.testing.assert_array_equal(b.coef_ * s, a.coef_)
    assert b.intercept_ == a.intercept_ and b.converged_
    np.testing.assert_allclose(b.predict(Z * s), a.predict(Z), rtol=1e-12)


def test_constant_columns_get_zero_weight_like_explicit_centring():
    # a column constant up to rounding has nothing to centre: w_j = 0 (scikit-learn's Ridge),
    # not the noise of the implicit centring's cancellation
    rng = np.random.default_rng(13)
    X = rng.normal(size=(50, 3))
    X[:, 1] = 2.0**62
    y = X[:, 0] - X[:, 2] + 0.1 * rng.normal(size=50)
    ours = RidgeCG(alpha=1.0, tol=1e-12).fit(X, y)
    ref = Ridge(alpha=1.0).fit(X, y)
    assert ours.coef_[1] == 0.0 and ref.coef_[1] == 0.0
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-9)
    ours_sp = RidgeCG(alpha=1.0, tol=1e-12).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(ours_sp.coef_, ref.coef_, rtol=1e-9, atol=1e-12)


def test_sparse_predictions_of_few_rows_gather_the_used_coefficients(monkeypatch):
    """A few rows against many columns (a prediction of one row): sparse_times_coef
    multiplies by the coefficients of the columns the rows use only (remapped indices),
    and gives scipy's X @ coef.T bit for bit, with unsorted and duplicate indices, float32
    data, int64 indices, empty rows, and on either side of the switch to the full copy."""
    from rbcd.solvers import cg as cgmod

    rng = np.random.default_rng(81)
    D = 5000
    per = cgmod._GATHER_PER_COLUMN
    for trial in range(40):
        k = int(rng.integers(2, 12))
        coef = rng.standard_normal((k, D))
        n = int(rng.integers(1, 4))
        # around the switch: nnz * per just below and above D
        nnz = int(rng.integers(1, 2 * D // per))
        rows = np.sort(rng.integers(0, n, nnz))
        cols = rng.integers(0, D, nnz)           # unsorted within a row, duplicates kept
        data = rng.standard_normal(nnz).astype([np.float64, np.float32][trial % 2])
        indptr = np.searchsorted(rows, np.arange(n + 1))
        idx = np.int64 if trial % 3 == 0 else np.int32
        X = sp.csr_matrix((data, cols.astype(idx), indptr.astype(idx)), shape=(n, D))
        got = cgmod.sparse_times_coef(X, coef, 1)
        want = np.asarray(X @ coef.T)
        assert got.shape == want.shape == (n, k)
        assert np.array_equal(got, want), (trial, nnz * per < D)
    # the switch itself: the gather runs only below one entry per _GATHER_PER_COLUMN columns
    calls = []
    real = np.unique
    monkeypatch.setattr(np, "unique", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    X1 = sp.csr_matrix((np.ones(3), [5, 9, 1], [0, 3]), shape=(1, D))
    cgmod.sparse_times_coef(X1, rng.standard_normal((3, D)), 1)
    assert calls, "one row of 3 entries in 5,000 columns should gather"
    calls.clear()
    Xw = sp.random(40, D, density=0.05, format="csr", random_state=0)
    cgmod.sparse_times_coef(Xw, rng.standard_normal((3, D)), 1)
    assert not calls, "10,000 entries in 5,000 columns should take the full copy"


def test_sparse_predictions_are_scipys_on_any_thread_count():
    """RidgeCG's and CDRegressor's predictions of sparse X (rbcd.solvers.cg
    .sparse_times_coef: CSR rows on n_jobs threads) equal scipy's X @ coef.T bit for bit,
    for CSR / CSC / COO, float32 / float64 data, int64 indices, 1-D and 2-D coefficients."""
    from rbcd.solvers.cd import CDRegressor
    from rbcd.solvers.cg import sparse_times_coef

    rng = np.random.default_rng(8)
    for trial in range(60):
        n, D, k = int(rng.integers(1, 200)), int(rng.integers(1, 300)), int(rng.integers(1, 6))
        X = sp.random(n, D, density=float(rng.uniform(0, 0.3)), format="csr",
                      random_state=trial, dtype=[np.float32, np.float64][trial % 2])
        X = [X, X.tocsc(), X.tocoo()][trial % 3]
        if trial % 5 == 0:
            X = sp.csr_matrix((X.tocsr().data, X.tocsr().indices.astype(np.int64),
                               X.tocsr().indptr.astype(np.int64)), shape=X.shape)
        coef = rng.standard_normal(D) if trial % 2 else rng.standard_normal((k, D))
        for T in (1, 2, 3):
            got = sparse_times_coef(X, coef, T)
            want = np.asarray(X @ coef.T)
            assert got.shape == want.shape and np.array_equal(got, want)
    Xf = sp.random(300, 40, density=0.2, format="csr", random_state=1)
    y = np.asarray(Xf.sum(axis=1)).ravel()
    for est in (RidgeCG(alpha=1.0, n_jobs=2), CDRegressor(alpha=1e-3, n_jobs=2)):
        est.fit(Xf, y)
        coef = np.atleast_2d(est.coef_)
        want = np.asarray(Xf @ coef.T)[:, 0] + est.intercept_
        np.testing.assert_array_equal(est.predict(Xf), want)


def test_alpha_zero_cg_reaches_the_minimum_norm_solution():
    # more bins than rows, alpha = 0: every least-squares fit reproduces the training
    # rows, but only the minimum-norm one is scikit-learn's Ridge(alpha=0) and the direct
    # solves'; a Jacobi-preconditioned CG reached the minimum M-norm one (new rows'
    # predictions 0.3 apart). CG drops the preconditioner there.
    from sklearn.linear_model import Ridge

    import rbcd

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(300, 4))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2
    rb = rbcd.RandomBinning(n_grids=16, sigma=1.0, random_state=0)
    Z, cols = rb.fit_transform(X, return_columns=True)
    assert Z.shape[1] > Z.shape[0]
    Znew = rb.transform(rng.uniform(-1, 1, size=(100, 4)))
    sk = Ridge(alpha=0.0, solver="lsqr", tol=1e-14).fit(Z.toarray(), y)
    for kw in ({"solver": "cg"}, {"solver": "direct"}, {"solver": "cg", "preconditioner": None}):
        for structure in (None, cols):
            ours = rbcd.RidgeCG(alpha=0.0, tol=1e-12, max_iter=100000, **kw).fit(
                Z, y, columns=structure)
            np.testing.assert_allclose(np.linalg.norm(ours.coef_), np.linalg.norm(sk.coef_),
                                       rtol=1e-6)
            np.testing.assert_allclose(ours.predict(Znew), sk.predict(Znew.toarray()),
                                       atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80), d=st.integers(1, 60),
       density=st.sampled_from([0.0, 0.05, 0.3, 1.0]), threads=st.integers(1, 6),
       wide=st.booleans(), f32=st.booleans(), dup=st.booleans())
def test_parallel_transpose_gives_scipys_csc(seed, n, d, density, threads, wide, f32, dup):
    """to_csc (rbcd.solvers._sparse.csr_to_csc on several threads) gives scipy's CSC arrays
    exactly: every thread count, int32 or int64 indices, float32 or float64 values, and
    non-canonical input (unsorted rows, duplicates summed first)."""
    from rbcd.solvers import _columns
    rng = np.random.default_rng(seed)
    Z = sp.random(n, d, density=density, random_state=rng, format="csr",
                  dtype=np.float32 if f32 else np.float64)
    if wide:
        Z.indices = Z.indices.astype(np.int64)
        Z.indptr = Z.indptr.astype(np.int64)
    if dup and Z.nnz:
        # the first stored entry's row gets that entry again, after its other entries
        # (unsorted, a duplicate)
        r = int(np.searchsorted(Z.indptr, 0, side="right")) - 1
        end = int(Z.indptr[r + 1])
        data = np.insert(Z.data, end, Z.data[0])
        indices = np.insert(Z.indices, end, Z.indices[0])
        indptr = Z.indptr.copy()
        indptr[r + 1:] += 1
        Z = sp.csr_matrix((data, indices, indptr), shape=Z.shape)
        assert not Z.has_canonical_format
    want = Z.copy()
    want.sum_duplicates()
    want = want.tocsc()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_columns, "TRANSPOSE_MIN_PER_THREAD", 1)
        mp.setattr(_columns, "TRANSPOSE_SCRATCH_PER_ENTRY", 1 << 20)
        got = _columns.to_csc(Z, threads)
    assert got.has_canonical_format and got.shape == want.shape
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.data, want.data)
    assert got.data.dtype == want.data.dtype
    # the kernel alone, on exactly that many blocks of rows
    C = sp.csr_matrix(Z)
    C.sum_duplicates()
    ptr, idx, val = _sparse.csr_to_csc(C.indptr, C.indices, C.data, d, threads)
    np.testing.assert_array_equal(ptr, want.indptr)
    np.testing.assert_array_equal(idx, want.indices)
    np.testing.assert_array_equal(val, want.data)


def test_transpose_threads_follow_size_and_width(monkeypatch):
    """to_csc uses scipy's transpose for one thread and for small or wide matrices (their
    per-thread counts would outweigh the entries), the kernel otherwise."""
    from rbcd.solvers import _columns
    calls = []
    kernel = _sparse.csr_to_csc
    monkeypatch.setattr(_sparse, "csr_to_csc", lambda *a: calls.append(a[-1]) or kernel(*a))
    monkeypatch.setattr(_columns, "TRANSPOSE_MIN_PER_THREAD", 100)
    Z = sp.random(400, 20, density=0.5, random_state=0, format="csr")     # 4,000 entries
    _columns.to_csc(Z, 1)
    _columns.to_csc(Z, 8)
    assert calls == [8]
    _columns.to_csc(Z[:300], 64)                                            # 3,000: 30 threads
    assert calls[-1] == 30
    wide = sp.random(10, 200_000, density=1e-3, random_state=0, format="csr")
    got = _columns.to_csc(wide, 8)
    assert len(calls) == 2 and (got != wide.tocsc()).nnz == 0
    # a CSC matrix is already column-major (no transpose), other formats go through CSR
    C = Z.tocsc()
    assert _columns.to_csc(C, 8) is C and len(calls) == 2
    for other in (sp.csr_array(Z), Z.tocoo(), Z.tolil()):
        got = _columns.to_csc(other, 8)
        assert (got != C).nnz == 0 and got.has_canonical_format
    assert calls[2:] == [8, 8, 8]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 300), threads=st.integers(1, 5), where=st.integers(0, 299),
       bad=st.sampled_from([None, 2.0, np.nan, -0.0]), f32=st.booleans())
def test_all_equal_is_numpys(n, threads, where, bad, f32):
    """rbcd.solvers._sparse.all_equal: every entry equal to the first, as numpy says
    (NaN never equal; -0.0 equal to 0.0), for any thread count."""
    data = np.full(n, 0.0 if bad == -0.0 else 0.125, dtype=np.float32 if f32 else np.float64)
    if bad is not None and n:
        data[where % n] = bad
    want = bool(n == 0 or np.all(data == data[0]))
    assert _sparse.all_equal(data, threads) is want


def test_all_equal_over_several_blocks():
    data = np.full(200_000, 0.125)
    for threads in (1, 2, 3, 4):
        assert _sparse.all_equal(data, threads) is True
        for where in (1, 65_536, 133_333, 199_999):
            data[where] = 0.25
            assert _sparse.all_equal(data, threads) is False
            data[where] = 0.125


@pytest.mark.parametrize("make", ["regressor", "classifier"])
def test_cg_at_the_attainable_residual_stays_finite_and_unconverged(make):
    """tol=0 (or below float64's rounding) with the projected Jacobi CG: the iteration runs
    on at the attainable residual without diverging (rz from the projected preconditioned
    residual; before, r . M^-1 r counted the rounding along the grids' null directions and
    the coefficients went to NaN after about 590 iterations, reported as converged), and the
    fit says it did not converge. Its predictions are those of a tight-tol fit."""
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(300, 3))
    y = np.sin(4 * X[:, 0]) - X[:, 1] ** 2
    kw = dict(n_grids=16, random_state=0, alpha=1.0, solver="cg")
    if make == "classifier":
        y = (y > np.median(y)).astype(int)
    cls = RBClassifier if make == "classifier" else RBRegressor
    with pytest.warns(ConvergenceWarning, match="below float64's rounding"):
        m = cls(tol=0.0, max_iter=1500, **kw).fit(X, y)
    assert np.all(np.isfinite(m.coef_)) and not m.solver_.converged_
    assert np.all(m.solver_.residual_ < 1e-13)
    tight = cls(tol=1e-12, **kw).fit(X, y)
    f = (lambda e: e.decision_function(X)) if make == "classifier" else (lambda e: e.predict(X))
    np.testing.assert_allclose(f(m), f(tight), atol=1e-9)
