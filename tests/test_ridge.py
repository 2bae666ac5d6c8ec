"""RidgeCG / RidgeCGClassifier and the parallel sparse products of rbcd._sparse."""
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

from rbcd import _sparse
from rbcd.ridge import RidgeCG, RidgeCGClassifier, default_max_iter, solve_ridge_cg


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
        _sparse.cg_step(Xt, Rt, Pa, Q, act, step, diag, alpha, use_diag, prr, prz, n_threads)
        np.testing.assert_allclose(Xt, X_ref, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(Rt, R_ref, rtol=1e-13, atol=1e-12)
        r = R_ref[:, act]
        np.testing.assert_allclose(prr.sum(0), (r * r).sum(0), rtol=1e-10)
        np.testing.assert_allclose(prz.sum(0), (r * r * minv[:, act]).sum(0), rtol=1e-10, atol=1e-10)
        _sparse.cg_direction(Pt, Rt, act, beta, diag, alpha, use_diag, n_threads)
        np.testing.assert_allclose(Pt, P_ref, rtol=1e-12, atol=1e-12)
        outs.append((Q, prr, prz, Pt))
    for a, b in zip(*outs):  # no dependence on the thread count
        np.testing.assert_array_equal(a, b)


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
    # (On random binning matrices it does NOT help: measured 1.2-5x MORE iterations
    # than plain CG at tol 1e-6, alpha 1e-3..10; scipy's cg with the same diagonal
    # preconditioner agrees. See rbcd.ridge's module docstring.)
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


# ------------------------------------------------------------------------- the twin


def _ref_ridge():
    return importlib.import_module("rbcd_ref.ridge")


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


# -------------------------------------------------------------------- check_estimator


@parametrize_with_checks([RidgeCG(), RidgeCGClassifier()])
def test_sklearn_compatible(estimator, check):
    check(estimator)
