"""Direct ridge solves (rbcd.solvers._direct): the Gram kernels, the dual and primal
forms against CG run to a tight tolerance, scikit-learn's Ridge and rbcd_ref, and the
solver="auto" rule."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge

import rbcd_ref
from rbcd import RandomBinning, RBClassifier, RBRegressor, RidgeCG, RidgeCGClassifier
from rbcd.solvers import _direct, _gram
from rbcd._threads import limit_blas
from rbcd_ref.solvers.cg import RidgeCG as RefRidgeCG


def _rb(n=120, d=4, R=16, sigma=None, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.standard_normal(n)
    rb = RandomBinning(n_grids=R, sigma="scale" if sigma is None else sigma, random_state=seed)
    Z, cols = rb.fit_transform(X, return_columns=True)
    return X, y, Z, cols


def _labels(Z, cols):
    n = Z.shape[0]
    R = cols.grid_ptr.shape[0] - 1
    return np.ascontiguousarray(Z.indices.reshape(n, R).T.astype(np.int32))


# ---------------------------------------------------------------------------- kernels


@pytest.mark.parametrize("narrow", [False, True])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 9, 37])
def test_dual_gram_counts_equal_z_zt(n, narrow):
    _, _, Z, cols = _rb(n=n, R=7, sigma=0.7, seed=n)
    L = _labels(Z, cols)
    if narrow:
        L = np.ascontiguousarray((L - cols.grid_ptr[:-1, None]).astype(np.uint16))
    ref = (Z @ Z.T).toarray()
    for threads in (1, 2, 3):
        K = np.full((n, n), np.nan)
        _gram.gram_dual(L, 1.0 / 7, None, 0.0, None, K, threads)
        lower = np.tril_indices(n)
        np.testing.assert_allclose(K[lower], ref[lower], rtol=1e-15, atol=0)
        assert np.all(np.isnan(K[np.triu_indices(n, 1)]))     # the upper triangle untouched


@pytest.mark.parametrize("dtype", [np.uint16, np.int32])
def test_dual_gram_counts_across_column_chunks(dtype):
    # rows past the kernel's chunk of columns (RBCD_GRAM_CHUNK, 1,024) and blocks of rows
    # (8), with a partial block and a partial chunk: the counts equal numpy's
    n, R = 2_101, 3
    rng = np.random.default_rng(5)
    L = np.ascontiguousarray(rng.integers(0, 6, size=(R, n)).astype(dtype))
    ref = sum((L[r][:, None] == L[r][None, :]).astype(np.float64) for r in range(R))
    lower = np.tril_indices(n)
    for threads in (1, 2):
        K = np.full((n, n), np.nan)
        _gram.gram_dual(L, 1.0, None, 0.0, None, K, threads)
        np.testing.assert_array_equal(K[lower], ref[lower])


def test_dual_gram_centring_and_weights_and_threads():
    _, _, Z, cols = _rb(n=50, R=9, sigma=0.5)
    L = _labels(Z, cols)
    rng = np.random.default_rng(1)
    m = rng.standard_normal(50)
    sw = rng.uniform(0.2, 2.0, 50)
    c = 0.37
    C = (Z @ Z.T).toarray() * 9          # label-match counts (Z values 1/sqrt(9))
    ref = sw[:, None] * (C - m[:, None] - m[None, :] + c) * sw[None, :]
    outs = []
    for threads in (1, 2, 4):
        K = np.zeros((50, 50))
        _gram.gram_dual(L, 1.0, m, c, sw, K, threads)
        outs.append(np.tril(K))
    lower = np.tril_indices(50)
    np.testing.assert_allclose(outs[0][lower], ref[lower], rtol=1e-13, atol=1e-13)
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


def test_grid_labels_from_the_column_structure_equal_those_of_z():
    # the dual Gram reads the labels the column structure carries (one uint16 array per
    # grid) where every grid is narrow; they must be Z's own columns within each grid
    from rbcd.solvers.cg import _RidgeSystem

    _, y, Z, cols = _rb(n=60, R=11, sigma=0.6, seed=3)
    carried = _RidgeSystem(Z, y[:, None], None, True, 1, cols)
    assert carried.op.labels is not None
    L = _direct.grid_labels(carried, cols)
    assert L.dtype == np.uint16 and L.shape == (11, 60) and L.flags.c_contiguous
    expect = (_labels(Z, cols) - cols.grid_ptr[:-1, None]).astype(np.uint16)
    np.testing.assert_array_equal(L, expect)
    # and the Gram matrix from them is the one from Z's CSR (int32 global columns)
    wide = _direct.grid_labels(carried, cols, narrow=False)
    np.testing.assert_array_equal(wide, _labels(Z, cols))
    K16, K32 = np.zeros((60, 60)), np.zeros((60, 60))
    _gram.gram_dual(L, 1.0, None, 0.0, None, K16, 1)
    _gram.gram_dual(wide, 1.0, None, 0.0, None, K32, 1)
    np.testing.assert_array_equal(np.tril(K16), np.tril(K32))


@pytest.mark.parametrize("weighted", [False, True])
def test_primal_gram_equals_zt_s_z(weighted):
    _, _, Z, cols = _rb(n=60, R=6, sigma=2.0)
    L = _labels(Z, cols)
    s = np.random.default_rng(2).uniform(0.5, 1.5, 60) if weighted else None
    D = Z.shape[1]
    ref = (Z.T @ sp.diags(np.ones(60) if s is None else s) @ Z).toarray() * 6   # Z values 1/sqrt(6)
    outs = []
    for threads in (1, 3):
        A = np.zeros((D, D))
        _gram.gram_primal(L, s, A, threads)
        outs.append(A)
    lower = np.tril_indices(D)
    np.testing.assert_allclose(outs[0][lower], ref[lower], rtol=1e-13, atol=1e-13)
    assert np.array_equal(outs[0], outs[1])
    assert np.all(outs[0][np.triu_indices(D, 1)] == 0)


def test_gram_kernels_refuse_bad_shapes():
    L = np.zeros((3, 5), dtype=np.int32)
    with pytest.raises(ValueError, match="K must be"):
        _gram.gram_dual(L, 1.0, None, 0.0, None, np.zeros((4, 4)), 1)
    with pytest.raises(ValueError, match="m must"):
        _gram.gram_dual(L, 1.0, np.zeros(4), 0.0, None, np.zeros((5, 5)), 1)
    with pytest.raises(ValueError, match="square"):
        _gram.gram_primal(L, None, np.zeros((4, 3)), 1)


# ---------------------------------------------------------------------------- solves


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("structure", [True, False])
def test_dual_and_primal_agree_with_tight_cg_and_sklearn(fit_intercept, weighted, structure):
    X, y, Z, cols = _rb(n=150, R=12, sigma=0.6)
    Y = np.c_[y, X[:, 2] - X[:, 3]]
    s = np.random.default_rng(3).uniform(0.3, 3.0, 150) if weighted else None
    c = cols if structure else None
    cg = RidgeCG(alpha=0.5, tol=1e-13, fit_intercept=fit_intercept).fit(
        Z, Y, sample_weight=s, columns=cols)
    sk = Ridge(alpha=0.5, fit_intercept=fit_intercept).fit(Z.toarray(), Y, sample_weight=s)
    for solver in ("direct", "auto"):
        m = RidgeCG(alpha=0.5, solver=solver, fit_intercept=fit_intercept, tol=1e-13).fit(
            Z, Y, sample_weight=s, columns=c)
        assert m.solver_ == ("dual" if solver == "direct" or structure else "cg")
        np.testing.assert_allclose(m.coef_, cg.coef_, atol=1e-9)
        np.testing.assert_allclose(m.coef_, sk.coef_, atol=1e-9)
        np.testing.assert_allclose(m.intercept_, sk.intercept_, atol=1e-9)
        if m.solver_ == "dual":
            assert np.all(m.n_iter_ == 1) and np.all(m.residual_ < 1e-10) and m.converged_


@pytest.mark.parametrize("weighted", [False, True])
def test_primal_form_when_there_are_fewer_columns_than_rows(weighted):
    X, y, Z, cols = _rb(n=300, R=5, sigma=4.0)
    assert Z.shape[1] < Z.shape[0]
    s = np.random.default_rng(4).uniform(0.5, 2.0, 300) if weighted else None
    sk = Ridge(alpha=0.2).fit(Z.toarray(), y, sample_weight=s)
    for c in (cols, None):
        m = RidgeCG(alpha=0.2, solver="direct").fit(Z, y, sample_weight=s, columns=c)
        assert m.solver_ == "primal"
        np.testing.assert_allclose(m.coef_, sk.coef_, atol=1e-10)
        np.testing.assert_allclose(m.intercept_, sk.intercept_, atol=1e-10)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("extra", [False, True])
def test_dual_residual_in_the_dual_space_equals_the_primal_one(fit_intercept, weighted, extra,
                                                               monkeypatch):
    # the identity behind dual_relative_residual: at W = Zs^T X the primal residual is
    # Zs^T r. Checked at a perturbed X (residuals far above rounding), against the primal
    # space check of _RidgeSystem / joint_residual
    from rbcd.solvers._linear import LinearTerm, centred_weighted, joint_residual
    from rbcd.solvers.cg import _RidgeSystem

    X, y, Z, cols = _rb(n=60, R=40, sigma=0.5, seed=7)
    Y = np.c_[y, X[:, 2] - X[:, 3]]
    rng = np.random.default_rng(8)
    s = rng.uniform(0.3, 3.0, 60) if weighted else None
    system = _RidgeSystem(Z, Y, s, fit_intercept, 1, cols)
    alpha = np.array([0.3, 2.0])
    sw = np.sqrt(system.s)
    rhs = system.Yc * sw[:, None]
    Zs = Z.toarray() - (system.zbar if fit_intercept else 0.0)
    Zs = Zs * sw[:, None]
    Ms = centred_weighted(LinearTerm(X).block(X), system)[0] if extra else None
    G = Zs @ Zs.T + (Ms @ Ms.T if extra else 0.0)
    Xd = np.linalg.solve(G + np.diag(np.full(60, 1.0)), rhs) * (1.0 + 0.1 * rng.standard_normal((60, 2)))
    W = system.ztimes_t(Xd * sw[:, None])
    primal = (system.relative_residual(W, alpha) if not extra
              else joint_residual(system, W, Ms.T @ Xd, Ms, alpha))
    assert np.all(primal > 1e-3)
    lower = np.ascontiguousarray(np.tril(G))          # only the lower triangle is read
    np.testing.assert_allclose(_direct.dual_relative_residual(lower, rhs, Xd, alpha), primal,
                               rtol=1e-10)
    # solve_direct takes this path where the Gram copy is the smaller (n^2 <= D k): the
    # primal space checks are not called
    assert 60 * 60 <= Z.shape[1] * 2

    def refuse(*args):
        raise AssertionError("the primal space residual was computed")
    monkeypatch.setattr(_RidgeSystem, "relative_residual", refuse)
    monkeypatch.setattr("rbcd.solvers._linear.joint_residual", refuse)
    _, _, info = _direct.solve_direct(system, alpha, "dual", cols, extra=Ms)
    assert np.all(info["residual"] < 1e-12)


def test_one_factorization_per_alpha_for_per_target_alphas():
    X, y, Z, cols = _rb(n=80, R=10, sigma=0.5)
    Y = np.c_[y, y, -y, 2 * y]
    alphas = np.array([0.1, 1.0, 0.1, 10.0])
    m = RidgeCG(alpha=alphas, solver="direct").fit(Z, Y, columns=cols)
    for j, a in enumerate(alphas):
        sk = Ridge(alpha=a).fit(Z.toarray(), Y[:, j])
        np.testing.assert_allclose(m.coef_[j], sk.coef_, atol=1e-10)


def test_alpha_zero_gives_the_minimum_norm_solution():
    # more columns than rows and alpha = 0: singular dual Gram, CG's minimum-norm answer
    X, y, Z, cols = _rb(n=40, R=8, sigma=0.3)
    m = RidgeCG(alpha=0.0, solver="direct", fit_intercept=False).fit(Z, y, columns=cols)
    ref = np.linalg.lstsq(Z.toarray(), y, rcond=None)[0]
    np.testing.assert_allclose(m.coef_, ref, atol=1e-8)
    # duplicated rows: a singular Gram matrix even with fewer columns than rows
    Zd = sp.vstack([Z, Z]).tocsr()
    md = RidgeCG(alpha=0.0, solver="direct", fit_intercept=False).fit(Zd, np.r_[y, y])
    np.testing.assert_allclose(md.coef_, ref, atol=1e-8)


def test_classifier_one_factorization_serves_every_class():
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, size=(240, 3))
    y = np.digitize(X[:, 0] + X[:, 1] ** 2, [-0.5, 0.2, 0.8])
    Z, cols = RandomBinning(n_grids=16, random_state=0).fit_transform(X, return_columns=True)
    cg = RidgeCGClassifier(alpha=1.0, tol=1e-13).fit(Z, y, columns=cols)
    d = RidgeCGClassifier(alpha=1.0, solver="direct").fit(Z, y, columns=cols)
    assert d.solver_ == "dual" and d.coef_.shape == (4, Z.shape[1])
    np.testing.assert_allclose(d.coef_, cg.coef_, atol=1e-9)
    np.testing.assert_array_equal(d.predict(Z), cg.predict(Z))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 40), R=st.integers(1, 9),
       sigma=st.sampled_from([0.2, 0.7, 3.0]), alpha=st.sampled_from([1e-3, 0.1, 2.0]),
       fit_intercept=st.booleans(), weighted=st.booleans())
def test_direct_matches_the_twin(seed, n, R, sigma, alpha, fit_intercept, weighted):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 3))
    y = rng.standard_normal(n)
    s = rng.uniform(0.1, 3.0, n) if weighted else None
    Z, cols = RandomBinning(n_grids=R, sigma=sigma, random_state=seed).fit_transform(
        X, return_columns=True)
    Zr = rbcd_ref.RandomBinning(n_grids=R, sigma=sigma, random_state=seed).fit_transform(X)
    assert (Z != Zr).nnz == 0
    fast = RidgeCG(alpha=alpha, solver="direct", fit_intercept=fit_intercept).fit(
        Z, y, sample_weight=s, columns=cols)
    ref = RefRidgeCG(alpha=alpha, solver="direct", fit_intercept=fit_intercept).fit(
        Zr, y, sample_weight=s)
    scale = 1.0 + np.max(np.abs(ref.coef_))
    np.testing.assert_allclose(fast.coef_, ref.coef_, atol=1e-9 * scale)
    np.testing.assert_allclose(fast.intercept_, ref.intercept_, atol=1e-9 * scale)


@pytest.mark.parametrize("fit_intercept, weighted", [(True, False), (True, True), (False, True)])
def test_direct_with_pair_counts_matches_the_twin(monkeypatch, fit_intercept, weighted):
    """The dual solve with every grid counted pair by pair (_direct.dual_counts forced)
    gives the coefficients of every grid compared, bit for bit, and those of rbcd_ref's
    direct solve (fine grids: sigma 0.1, few rows per bin)."""
    rng = np.random.default_rng(3)
    n = 260
    X = rng.uniform(-1, 1, size=(n, 3))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(n)
    s = rng.uniform(0.1, 3.0, n) if weighted else None
    Z, cols = RandomBinning(n_grids=12, sigma=0.1, random_state=2).fit_transform(
        X, return_columns=True)
    Zr = rbcd_ref.RandomBinning(n_grids=12, sigma=0.1, random_state=2).fit_transform(X)
    ref = RefRidgeCG(alpha=0.5, solver="direct", fit_intercept=fit_intercept).fit(
        Zr, y, sample_weight=s)
    fits = {}
    calls = []
    real = _gram.gram_pairs
    monkeypatch.setattr(_gram, "gram_pairs", lambda *a: calls.append(1) or real(*a))
    for mode, cost in (("compared", 1.0), ("pairs", 0.0)):
        for name in ("COST_PAIR", "COST_PAIR_SCAN", "COST_PAIR_ENTRY"):
            monkeypatch.setattr(_direct, name, cost)
        calls.clear()
        fits[mode] = RidgeCG(alpha=0.5, solver="direct", fit_intercept=fit_intercept).fit(
            Z, y, sample_weight=s, columns=cols)
        assert bool(calls) == (mode == "pairs")
    np.testing.assert_array_equal(fits["pairs"].coef_, fits["compared"].coef_)
    assert fits["pairs"].intercept_ == fits["compared"].intercept_
    scale = 1.0 + np.max(np.abs(ref.coef_))
    np.testing.assert_allclose(fits["pairs"].coef_, ref.coef_, atol=1e-9 * scale)
    np.testing.assert_allclose(fits["pairs"].intercept_, ref.intercept_, atol=1e-9 * scale)


def test_twin_direct_agrees_with_twin_cg():
    X, y, Z, cols = _rb(n=60, R=6, sigma=0.5)
    a = RefRidgeCG(alpha=0.3, solver="direct").fit(Z, y)
    b = RefRidgeCG(alpha=0.3, tol=1e-12).fit(Z, y)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-9)
    assert np.all(a.n_iter_ == 1)


# ---------------------------------------------------------------------------- the rule


def test_plan_chooses_by_size():
    assert _direct.plan(300, 20000, 256, 1, True) == "dual"
    assert _direct.plan(3000, 600000, 256, 10, True) == "dual"
    assert _direct.plan(300000, 3_000_000, 256, 1, True) == "cg"
    assert _direct.plan(100000, 2000, 256, 10, True) == "primal"
    assert _direct.plan(300, 20000, 256, 1, False) == "cg"
    # the Gram matrix's memory bounds the direct forms
    assert _direct.plan(20000, 10**6, 256, 100, True) == "cg"


def test_models_default_to_auto_and_agree_with_cg():
    rng = np.random.default_rng(6)
    X = rng.uniform(-1, 1, size=(200, 4))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    auto = RBClassifier(n_grids=32, random_state=0).fit(X, y)
    assert auto.get_params()["solver"] == "auto"
    assert auto.solver_.solver_ == "dual"
    cg = RBClassifier(n_grids=32, solver="cg", tol=1e-12, random_state=0).fit(X, y)
    np.testing.assert_allclose(auto.coef_, cg.coef_, atol=1e-8)
    r = RBRegressor(n_grids=32, solver="direct", random_state=0).fit(X, X[:, 0] - X[:, 1])
    r_cg = RBRegressor(n_grids=32, solver="cg", tol=1e-12, random_state=0).fit(X, X[:, 0] - X[:, 1])
    np.testing.assert_allclose(r.predict(X), r_cg.predict(X), atol=1e-8)
    ref = rbcd_ref.RBRegressor(n_grids=32, solver="auto", random_state=0).fit(X, X[:, 0] - X[:, 1])
    np.testing.assert_allclose(r.predict(X), ref.predict(X), atol=1e-8)
    with pytest.raises(ValueError, match="squared loss"):
        RBClassifier(solver="direct", loss="logistic").fit(X, y)


# ---------------------------------------------------------------------------- threads


def _python(code, **env):
    full = dict(os.environ)
    for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        full.pop(k, None)
    full.update(env)
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                         text=True, check=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    return out.stdout.strip()


def test_rbcd_loads_openmp_with_passive_waits_and_restores_the_environment():
    code = "import os, rbcd; print(rbcd._WAIT_POLICY); print('OMP_WAIT_POLICY' in os.environ)"
    lines = _python(code).splitlines()
    if "not loaded" in lines[0]:
        pytest.fail("rbcd's compiled modules are not importable")
    assert lines == ["OMP_WAIT_POLICY=PASSIVE (set by rbcd)", "False"]
    assert _python(code, OMP_WAIT_POLICY="active").splitlines() == ["user environment", "True"]
    assert _python(code, GOMP_SPINCOUNT="1000").splitlines()[0] == "user environment"


# ---------------------------------------------------------------------------- alpha="auto"


def _brute_loo(Z, y, s, alphas, fit_intercept):
    """Leave-one-out squared error by refitting scikit-learn's Ridge n times per alpha."""
    out = []
    for a in alphas:
        err = 0.0
        for i in range(Z.shape[0]):
            keep = np.arange(Z.shape[0]) != i
            m = Ridge(alpha=a, fit_intercept=fit_intercept).fit(Z[keep].toarray(), y[keep],
                                                                  sample_weight=s[keep])
            err += s[i] * (y[i] - m.predict(Z[i].toarray())[0]) ** 2
        out.append(-err / s.sum())
    return np.array(out)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_leave_one_out_scores_equal_refitting(fit_intercept, weighted):
    from rbcd.solvers.cg import _RidgeSystem

    X, y, Z, cols = _rb(n=30, R=8, sigma=0.5, seed=3)
    s = np.random.default_rng(0).uniform(0.5, 2.0, 30) if weighted else np.ones(30)
    system = _RidgeSystem(Z, y[:, None], s if weighted else None, fit_intercept, 1, cols)
    alphas = np.array([0.01, 0.3, 3.0])
    a, W, scores = _direct.loo_select(system, cols, alphas, False)
    np.testing.assert_allclose(scores[:, 0], _brute_loo(Z, y, s, alphas, fit_intercept),
                               rtol=1e-9)
    assert a == alphas[int(np.argmax(scores[:, 0]))]
    sk = Ridge(alpha=a, fit_intercept=fit_intercept).fit(Z.toarray(), y, sample_weight=s)
    np.testing.assert_allclose(W[:, 0], sk.coef_, atol=1e-9)
    # the choice alone (a sample's, a search's): the same alpha and scores, no solution,
    # and the right-hand sides Zc^T S Yc never formed
    bare = _RidgeSystem(Z, y[:, None], s if weighted else None, fit_intercept, 1, cols)
    a2, W2, scores2 = _direct.loo_select(bare, cols, alphas, False, solution=False)
    assert W2 is None and a2 == a and bare._B is None
    np.testing.assert_array_equal(scores2, scores)
    # formed on first use, equal to the explicitly centred product
    Zd = Z.toarray()
    Zc = Zd - (s @ Zd) / s.sum() if fit_intercept else Zd
    yc = y - (s @ y) / s.sum() if fit_intercept else y
    np.testing.assert_allclose(bare.B[:, 0], Zc.T @ (s * yc), rtol=1e-10, atol=1e-12)


def test_auto_alpha_matches_the_twin_and_is_stored():
    rng = np.random.default_rng(8)
    X = rng.uniform(-1, 1, size=(150, 3))
    y = np.sin(4 * X[:, 0]) + 0.5 * rng.standard_normal(150)
    Z, cols = RandomBinning(n_grids=16, random_state=0).fit_transform(X, return_columns=True)
    fast = RidgeCG(alpha="auto", solver="auto").fit(Z, y, columns=cols)
    ref = RefRidgeCG(alpha="auto", solver="direct").fit(Z, y)
    assert fast.alpha_ == pytest.approx(ref.alpha_, rel=1e-12)
    np.testing.assert_allclose(fast.coef_, ref.coef_, atol=1e-8)
    # noisier targets choose a larger penalty
    noisy = RidgeCG(alpha="auto").fit(Z, y + 3 * rng.standard_normal(150), columns=cols)
    assert noisy.alpha_ > fast.alpha_
    # a number is that exact penalty
    assert RidgeCG(alpha=0.25).fit(Z, y).alpha_ == 0.25


def test_auto_alpha_classification_scores_accuracy_and_matches_the_twin():
    from rbcd_ref.solvers.cg import RidgeCGClassifier as RefClassifier

    rng = np.random.default_rng(9)
    X = rng.uniform(-1, 1, size=(120, 3))
    y = np.digitize(X[:, 0] * X[:, 1] + 0.2 * rng.standard_normal(120), [-0.2, 0.2])
    Z = RandomBinning(n_grids=16, random_state=1).fit_transform(X)
    fast = RidgeCGClassifier(alpha="auto", solver="direct").fit(Z, y)
    ref = RefClassifier(alpha="auto", solver="direct").fit(Z, y)
    assert fast.alpha_ == pytest.approx(ref.alpha_, rel=1e-12)
    np.testing.assert_array_equal(fast.predict(Z), ref.predict(Z))


def test_auto_alpha_above_the_leave_one_out_size_uses_a_sample(monkeypatch):
    from rbcd_ref.solvers import cg as ref_cg

    from rbcd.solvers import _heldout

    monkeypatch.setattr(_direct, "LOO_MAX_ROWS", 60)
    monkeypatch.setattr(ref_cg, "LOO_MAX_ROWS", 60)
    # the held-out check's fits solved exactly, as the twin solves them
    monkeypatch.setattr(_heldout, "HELDOUT_TOL", 1e-13)
    X, y, Z, cols = _rb(n=200, R=8, sigma=0.4, seed=5)
    # up to HELDOUT_MIN_ROWS rows no check: the sample's choice, scaled
    monkeypatch.setattr(_heldout, "HELDOUT_MIN_ROWS", 200)
    monkeypatch.setattr(ref_cg, "HELDOUT_MIN_ROWS", 200)
    plain = RidgeCG(alpha="auto", solver="direct").fit(Z, y, columns=cols)
    assert plain.alpha_ == pytest.approx(
        RefRidgeCG(alpha="auto", solver="direct").fit(Z, y).alpha_, rel=1e-12)
    assert np.isclose(_direct.AUTO_ALPHAS_PER_ROW * 60 * np.sqrt(200 / 60), plain.alpha_).any()
    monkeypatch.setattr(_heldout, "HELDOUT_MIN_ROWS", 199)
    monkeypatch.setattr(ref_cg, "HELDOUT_MIN_ROWS", 199)
    fast = RidgeCG(alpha="auto", solver="direct").fit(Z, y, columns=cols)
    ref = RefRidgeCG(alpha="auto", solver="direct").fit(Z, y)
    assert fast.alpha_ == pytest.approx(ref.alpha_, rel=1e-12)
    # a candidate for the sample's 60 rows, scaled by sqrt(200 / 60) to all 200, then a
    # multiple of it chosen on held-out rows (regression)
    sample = _direct.AUTO_ALPHAS_PER_ROW * 60 * np.sqrt(200 / 60)
    assert np.isclose(sample[:, None] * _heldout.HELDOUT_FACTORS, fast.alpha_).any()
    np.testing.assert_allclose(fast.coef_, ref.coef_, atol=1e-8)
    # the held-out check on a sample of 150 of the 200 rows (its rows sliced from Z, their
    # own grid structure), as the twin draws it
    monkeypatch.setattr(_heldout, "HELDOUT_MAX_ROWS", 150)
    monkeypatch.setattr(ref_cg, "HELDOUT_MAX_ROWS", 150)
    sub = RidgeCG(alpha="auto", solver="direct").fit(Z, y, columns=cols)
    sub_ref = RefRidgeCG(alpha="auto", solver="direct").fit(Z, y)
    assert sub.alpha_ == pytest.approx(sub_ref.alpha_, rel=1e-12)
    assert np.isclose(sample[:, None] * _heldout.HELDOUT_FACTORS * np.sqrt(150 / 200),
                      sub.alpha_).any()
    monkeypatch.setattr(_heldout, "HELDOUT_MAX_ROWS", 20000)
    cg = RidgeCG(alpha="auto", solver="cg", tol=1e-10).fit(Z, y, columns=cols)
    assert cg.alpha_ == pytest.approx(fast.alpha_)
    # (the checked penalty is small here: CG's 1e-10 residual is a 1e-5 error in w)
    np.testing.assert_allclose(cg.coef_, ref.coef_, atol=5e-5)


def test_held_out_check_of_the_sample_choice(monkeypatch):
    """Regression above LOO_MAX_ROWS: the candidates a0 * HELDOUT_FACTORS fitted on the
    sample less its held-out rows (weight 0) and scored there; known answer: scikit-learn's
    Ridge fitted on the other rows alone. Classification keeps the sample's choice."""
    from sklearn.linear_model import Ridge

    from rbcd.solvers import _heldout
    from rbcd_ref.solvers import cg as ref_cg

    rows, held = _heldout.heldout_rows(500)
    np.testing.assert_array_equal(rows, np.arange(500))
    assert held.shape == (100,) and np.all(np.diff(held) > 0) and held[-1] < 500
    big, big_held = _heldout.heldout_rows(_heldout.HELDOUT_MAX_ROWS + 7)
    assert big.shape == (_heldout.HELDOUT_MAX_ROWS,) and np.all(np.diff(big) > 0)
    assert big[-1] < _heldout.HELDOUT_MAX_ROWS + 7
    assert big_held.shape == (int(_heldout.HELDOUT_MAX_ROWS * _heldout.HELDOUT_SHARE),)

    monkeypatch.setattr(_heldout, "HELDOUT_TOL", 1e-13)
    X, y, Z, cols = _rb(n=300, R=8, sigma=0.4, seed=6)
    Y = np.column_stack([y, 2.0 * y + 1.0])        # two targets: one penalty, summed errors
    w = np.random.default_rng(1).uniform(0.5, 2.0, 300)
    a0, total = 3.0, float(w.sum()) * 1.5
    held5 = np.arange(60) * 5
    alpha, scores = _heldout.heldout_choice(Z.tocsr(), Y, w, held5, a0, total, True, 1, cols)
    keep = np.setdiff1d(np.arange(300), held5)
    expect = []
    for a in a0 * _heldout.HELDOUT_FACTORS:
        fa = a * np.sqrt(w[keep].sum() / total)
        r = Ridge(alpha=fa, solver="cholesky").fit(Z[keep].toarray(), Y[keep],
                                                    sample_weight=w[keep])
        expect.append(np.sum(w[held5][:, None] * (r.predict(Z[held5].toarray()) - Y[held5]) ** 2))
    np.testing.assert_allclose(scores, expect, rtol=1e-7)
    # the sample (weight w.sum()) stands for rows of weight `total`: its best penalty is
    # returned as it is for the sample, not scaled up (SAMPLE_UNITS)
    best = a0 * _heldout.HELDOUT_FACTORS[int(np.argmin(expect))]
    assert alpha == pytest.approx(best * np.sqrt(w.sum() / total), rel=1e-12)
    every_row, _ = _heldout.heldout_choice(Z.tocsr(), Y, w, held5, a0, float(w.sum()), True,
                                           1, cols)
    assert every_row == best
    # the candidates' CG stopped by max_iter (2 iterations): no ConvergenceWarning escapes
    # the internal step, and a choice is still made
    from rbcd.solvers import cg as fast_cg

    with monkeypatch.context() as m:
        m.setattr(fast_cg, "default_max_iter", lambda D: 2)
        with pytest.warns(ConvergenceWarning):    # (what the same solve says on its own)
            fast_cg.solve_ridge(Z.tocsr(), Y, w, a0, True, 1e-13, None, "jacobi", 1, cols)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            capped, _ = _heldout.heldout_choice(Z.tocsr(), Y, w, held5, a0, total, True, 1,
                                                cols)
    assert np.isclose(a0 * _heldout.HELDOUT_FACTORS * np.sqrt(w.sum() / total), capped).any()
    # no weight held out (or fitted): the sample's choice stands
    w0 = w.copy()
    w0[held5] = 0.0
    assert _heldout.heldout_choice(Z.tocsr(), Y, w0, held5, a0, total, True, 1, cols) == (a0, None)

    # classification: the sample's leave-one-out choice, scaled, unchecked
    monkeypatch.setattr(_direct, "LOO_MAX_ROWS", 60)
    monkeypatch.setattr(ref_cg, "LOO_MAX_ROWS", 60)
    labels = (y > np.median(y)).astype(int)
    fast = RidgeCGClassifier(alpha="auto", solver="direct").fit(Z, labels, columns=cols)
    from rbcd_ref.solvers.cg import RidgeCGClassifier as RefClassifier
    ref = RefClassifier(alpha="auto", solver="direct").fit(Z, labels)
    assert fast.alpha_ == pytest.approx(ref.alpha_, rel=1e-12)
    assert np.isclose(_direct.AUTO_ALPHAS_PER_ROW * 60 * np.sqrt(300 / 60), fast.alpha_).any()


def test_models_default_alpha_is_auto():
    rng = np.random.default_rng(10)
    X = rng.uniform(-1, 1, size=(200, 4))
    y = np.sin(3 * X[:, 0]) + 0.3 * rng.standard_normal(200)
    m = RBRegressor(n_grids=32, random_state=0).fit(X, y)
    assert m.get_params()["alpha"] == "auto" and m.alpha_ == m.solver_.alpha_ > 0
    ref = rbcd_ref.RBRegressor(n_grids=32, random_state=0).fit(X, y)
    np.testing.assert_allclose(m.predict(X), ref.predict(X), atol=1e-8)
    fixed = RBRegressor(n_grids=32, alpha=None, random_state=0).fit(X, y)
    assert fixed.alpha_ == pytest.approx(1e-4 * 200)
    cd = RBRegressor(n_grids=8, solver="cd", max_epochs=5, random_state=0)
    with pytest.warns(Warning):
        cd.fit(X, y)
    # cd's "auto": the held-out path's choice (rbcd.solvers.cd, tests/test_cd_auto.py)
    assert cd.alpha_ > 0 and np.any(np.isclose(cd.solver_.alphas_, cd.alpha_, rtol=1e-12))


def test_classes_share_one_tolerance_scale():
    # two rare classes: their small right-hand sides are not solved to a tighter absolute
    # accuracy than the others' (issue 29: the slowest class at most 2x the median's work)
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(6000, 5))
    y = np.digitize(X[:, 0] + 0.5 * np.sin(3 * X[:, 1]), [-0.8, -0.3, 0.2, 0.7])
    y[(X[:, 2] > 0.9) & (X[:, 3] > 0.8)] = 5
    y[(X[:, 2] < -0.9) & (X[:, 3] > 0.8)] = 6
    Z, cols = RandomBinning(n_grids=32, random_state=0).fit_transform(X, return_columns=True)
    m = RidgeCGClassifier(alpha=0.6, tol=1e-3).fit(Z, y, columns=cols)
    assert np.max(m.n_iter_) <= 2 * np.median(m.n_iter_)
    exact = RidgeCGClassifier(alpha=0.6, solver="direct").fit(Z, y, columns=cols)
    Zt = RandomBinning(n_grids=32, random_state=0).fit(X).transform(rng.uniform(-1, 1, (3000, 5)))
    assert np.mean(m.predict(Zt) == exact.predict(Zt)) >= 0.995
    # residual_ is relative to the largest right-hand side, and within tol
    assert m.converged_ and np.all(m.residual_ <= 1e-3)


def test_a_direct_solve_that_does_not_fit_in_memory_is_refused(monkeypatch):
    import rbcd._memory

    X, y, Z, cols = _rb(n=200, R=8, sigma=0.5)
    monkeypatch.setattr(rbcd._memory, "available_memory", lambda: 100_000)   # < 8 * 200^2
    with pytest.raises(ValueError, match="dual direct solve forms 1 dense 200 x 200"):
        RidgeCG(solver="direct").fit(Z, y, columns=cols)
    with pytest.raises(ValueError, match="alpha='auto'"):
        RidgeCG(alpha="auto").fit(Z, y, columns=cols)
    RidgeCG(solver="cg").fit(Z, y, columns=cols)            # CG needs no Gram matrix


def test_the_structure_trusts_only_the_very_z_it_came_with():
    import pickle

    X, y, Z, cols = _rb(n=300, R=8, sigma=0.5)
    assert cols.built_with(Z)
    swapped = Z[np.r_[1, 0, np.arange(2, 300)]]            # new arrays: checked in full
    assert not cols.built_with(swapped)
    with pytest.raises(ValueError, match="not the grid structure"):
        RidgeCG(solver="cg").fit(swapped, y, columns=cols)
    back = pickle.loads(pickle.dumps(cols))                # identity does not survive pickling
    assert not back.built_with(Z)
    RidgeCG(solver="cg").fit(Z, y, columns=back)          # ... and the full check passes
    Zc = Z.copy()
    assert not cols.built_with(Zc)
    Z.indices[:8] = Z.indices[8:16].copy()                 # an edit the fingerprint samples
    assert not cols.built_with(Z)


def test_ridge_on_hashed_columns_too_wide_for_memory_is_refused():
    # issue 31: hashed n_features of 2**40 gave numpy's MemoryError from the transposed copy
    X = np.random.default_rng(0).uniform(size=(50, 3))
    Z = RandomBinning(n_grids=4, n_features=2**40, random_state=0).fit_transform(X)
    with pytest.raises(ValueError, match="GiB for the solver"):
        RidgeCG().fit(Z, X[:, 0])
    with pytest.raises(ValueError, match="GiB for the solver"):
        RBRegressor(n_grids=4, n_features=2**40, random_state=0).fit(X, X[:, 0])


def test_verbose_fit_says_which_alpha_was_chosen_and_how(capsys):
    X, y, Z, cols = _rb(n=80, R=8, seed=5)
    RidgeCG(alpha="auto", verbose=1).fit(Z, y, columns=cols)
    out = capsys.readouterr().out
    chosen = RidgeCG(alpha="auto").fit(Z, y, columns=cols).alpha_
    assert f"alpha {chosen:.4g} chosen by leave-one-out" in out
    RidgeCG(alpha=0.5, verbose=1).fit(Z, y, columns=cols)
    assert "chosen by" not in capsys.readouterr().out


def test_plan_counts_one_factorization_per_distinct_alpha():
    # n = 1,000 rows, 64 grids, 8 targets: one factorization for all of them is cheaper
    # than CG, eight (one alpha each) are not
    D = 20000
    assert _direct.plan(1000, D, 64, 8, True) == "dual"
    assert _direct.plan(1000, D, 64, 8, True, n_factor=8) == "cg"
    c1 = _direct.costs(1000, D, 64, 8, True)
    c8 = _direct.costs(1000, D, 64, 8, True, n_factor=8)
    assert c8["cg"] == c1["cg"] and c8["dual"] > c1["dual"]


def test_ridge_auto_with_an_alpha_per_target_plans_by_its_factorizations():
    from rbcd import RandomBinning, RidgeCG

    rng = np.random.default_rng(3)
    X = rng.uniform(size=(1000, 4))
    Y = np.column_stack([np.sin(3 * X[:, 0] + j) + 0.1 * rng.standard_normal(1000)
                         for j in range(8)])
    Z, cols = RandomBinning(n_grids=64, sigma=0.5, random_state=0).fit_transform(
        X, return_columns=True)
    same = RidgeCG(alpha=1.0, solver="auto", tol=1e-10).fit(Z, Y, columns=cols)
    alphas = np.geomspace(0.5, 5.0, 8)
    each = RidgeCG(alpha=alphas, solver="auto", tol=1e-10).fit(Z, Y, columns=cols)
    assert same.solver_ == "dual"
    assert each.solver_ == "cg"
    for j, a in enumerate(alphas):
        one = RidgeCG(alpha=a, solver="direct").fit(Z, Y[:, j], columns=cols)
        np.testing.assert_allclose(each.coef_[j], one.coef_, atol=1e-7)


# ------------------------------------------------------------------- several alphas at once


@pytest.mark.parametrize("m", [1, 7, 260])
def test_cholesky_solves_are_the_serial_factorizations_bit_for_bit(m):
    rng = np.random.default_rng(m)
    A = rng.standard_normal((m, m + 2))
    G = A @ A.T
    G[np.triu_indices(m, 1)] = np.nan             # only the lower triangle is read
    alphas = np.array([0.5, 2.0, 0.5, 30.0])
    rhs = [rng.standard_normal((m, w)) for w in (1, 3, 0, 2)]
    with limit_blas(1):
        ref = [_direct._factor_solve(G.copy(), np.asfortranarray(b), a)
               for a, b in zip(alphas, rhs)]
    for T in (1, 2, 3, 8):
        Gc = G.copy()
        out = _direct.cholesky_solves(Gc, rhs, alphas, n_threads=T)
        np.testing.assert_array_equal(Gc, G)       # kept: each thread factors a copy
        for x, r in zip(out, ref):
            assert x.shape == r.shape
            np.testing.assert_array_equal(x, r)
    # one system, overwrite: factored in place
    Gc = G.copy()
    (x,) = _direct.cholesky_solves(Gc, rhs[1:2], alphas[1:2], overwrite=True)
    np.testing.assert_array_equal(x, ref[1])
    assert not np.array_equal(Gc, G, equal_nan=True)


def test_cholesky_solves_mark_a_singular_system():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((30, 5))
    G = A @ A.T                                    # rank 5
    b = rng.standard_normal((30, 2))
    out = _direct.cholesky_solves(G, [b, b], np.array([0.0, 1.0]), n_threads=2)
    assert out[0] is None
    np.testing.assert_allclose((G + np.eye(30)) @ out[1], b, atol=1e-9)


def test_cholesky_solves_kernel_checks_its_arrays():
    from rbcd.solvers import _gram

    G = np.eye(4)
    B = np.zeros((2, 1, 4))
    w = np.ones(2, dtype=np.intc)
    a = np.ones(2)
    with pytest.raises(ValueError, match="work"):
        _gram.factor_solves(G, B, a, w, np.empty((1, 4, 4)), 2)
    with pytest.raises(ValueError, match="widths"):
        _gram.factor_solves(G, B, a, np.array([1, 2], dtype=np.intc), np.empty((2, 4, 4)), 2)
    with pytest.raises(ValueError, match="rhs"):
        _gram.factor_solves(G, np.zeros((3, 1, 4)), a, w, np.empty((2, 4, 4)), 2)
    with pytest.raises(ValueError, match="in place"):
        _gram.factor_solves(G, B, a, w, G[None], 1)


def test_ridge_with_an_alpha_per_target_is_the_same_on_any_thread_count():
    from rbcd import RandomBinning, RidgeCG

    rng = np.random.default_rng(1)
    X = rng.uniform(size=(400, 3))
    Y = np.column_stack([np.cos(4 * X[:, 0] + j) for j in range(5)])
    Z, cols = RandomBinning(n_grids=32, sigma=0.3, random_state=0).fit_transform(
        X, return_columns=True)
    alphas = np.array([0.1, 1.0, 0.1, 10.0, 3.0])
    fits = [RidgeCG(alpha=alphas, solver="direct", n_jobs=T).fit(Z, Y, columns=cols)
            for T in (1, 2, 3)]
    for f in fits[1:]:
        np.testing.assert_array_equal(f.coef_, fits[0].coef_)
        np.testing.assert_array_equal(f.intercept_, fits[0].intercept_)
    for j, a in enumerate(alphas):
        one = RidgeCG(alpha=a, solver="direct").fit(Z, Y[:, j], columns=cols)
        np.testing.assert_allclose(fits[0].coef_[j], one.coef_, rtol=0, atol=1e-12)


def _skewed_labels(rng, n, sizes, dtype):
    """(R, n) training labels: grid g's rows spread over sizes[g] bins, every bin used
    (the first sizes[g] rows take one bin each), the rest drawn with skew; int32 labels
    are global columns (grid g's after those of grids 0 .. g-1)."""
    rows = []
    for nb in sizes:
        lab = np.minimum(rng.zipf(1.3, size=n) - 1, nb - 1)
        lab[:min(n, nb)] = np.arange(min(n, nb))
        rows.append(rng.permutation(lab))
    L = np.array(rows, dtype=np.int64)
    if dtype == np.int32:
        L += np.concatenate([[0], np.cumsum(sizes)[:-1]])[:, None]
    return np.ascontiguousarray(L, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.uint16, np.int32])
@pytest.mark.parametrize("n", [2, 9, 37, 300])
def test_pair_counts_equal_the_comparison_counts(dtype, n):
    """_gram.grid_pairs counts each grid's pairs sharing a bin, _gram.gram_pairs adds a set
    of grids' counts pair by pair (row ranges split over 1-3 threads), and gram_dual with
    those counts beside the other grids' labels gives the K of all grids by comparisons,
    bit for bit (centred, weighted; uint16 labels within each grid and int32 global
    ones); _direct.dual_counts sends the grids of small bins that way."""
    rng = np.random.default_rng(n)
    sizes = [max(1, n // 2), 3, n, 1, max(1, n // 3), 2 * n][:6]
    L = _skewed_labels(rng, n, sizes, dtype)
    R = L.shape[0]
    base = L.min(axis=1).astype(np.int64)
    n_head = int((L.max(axis=1).astype(np.int64) - base).max()) + 1
    counts = (L[:, :, None] == L[:, None, :])                       # (R, n, n)
    for T in (1, 2, 3):
        pairs = _gram.grid_pairs(L, base, n_head, T)
        np.testing.assert_array_equal(pairs, (counts.sum(axis=(1, 2)) - n) // 2)
    m = rng.standard_normal(n)
    sw = rng.uniform(0.5, 2.0, n)
    whole = np.full((n, n), np.nan)
    _gram.gram_dual(L, 0.25, m, 0.7, sw, whole, 2)
    for sparse in ([0, 3], [1, 2, 4], list(range(R)), [5]):
        sparse = np.array(sparse, dtype=np.int64)
        for T in (1, 2, 3):
            S = np.zeros((n, n), dtype=L.dtype)
            _gram.gram_pairs(L, sparse, base, S, n_head, T)
            np.testing.assert_array_equal(S, np.tril(counts[sparse].sum(axis=0)))
            dense = np.setdiff1d(np.arange(R), sparse).astype(np.int64)
            K = np.full((n, n), np.nan)
            _gram.gram_dual(L, 0.25, m, 0.7, sw, K, T, S, dense)
            np.testing.assert_array_equal(np.tril(K), np.tril(whole))
            K = np.full((n, n), np.nan)        # the same grids compared from a copy
            _gram.gram_dual(np.ascontiguousarray(L[dense]), 0.25, m, 0.7, sw, K, T, S)
            np.testing.assert_array_equal(np.tril(K), np.tril(whole))
    grids, S2 = _direct.dual_counts(L, 2)
    K = np.full((n, n), np.nan)
    _gram.gram_dual(L, 0.25, m, 0.7, sw, K, 2, S2, grids)
    np.testing.assert_array_equal(np.tril(K), np.tril(whole))


def test_dual_counts_chooses_by_the_pairs(monkeypatch):
    """A grid goes pair by pair where its pairs cost less than its comparisons, and only
    when the saving passes the cost of the n x n counts: none when pairs cost too much
    or the counts too much, all when pairs cost nothing, and the fine grids alone
    between."""
    rng = np.random.default_rng(1)
    n = 400
    L = _skewed_labels(rng, n, [n, 2, n, 3], np.uint16)   # fine, coarse, fine, coarse
    L[0] = rng.permutation(n)                            # one row per bin: no pairs
    L[2] = rng.permutation(np.arange(n) // 2)            # two rows per bin
    fine = np.tril(sum(L[g][:, None] == L[g][None, :] for g in (0, 2)))
    for name, value in (("COST_PAIR", 1.0), ("COST_PAIR_SCAN", 1.0),
                        ("COST_PAIR_ENTRY", 0.0)):
        monkeypatch.setattr(_direct, name, value)
    assert _direct.dual_counts(L, 1) == (None, None)
    for name, value in (("COST_PAIR", 0.0), ("COST_PAIR_SCAN", 0.0)):
        monkeypatch.setattr(_direct, name, value)
    grids, S = _direct.dual_counts(L, 1)
    assert grids.shape == (0,) and S is not None
    for name, value in (("COST_PAIR", 6e-9), ("COST_PAIR_SCAN", 10e-9),
                        ("COST_PAIR_ENTRY", 0.0)):
        monkeypatch.setattr(_direct, name, value)
    grids, S = _direct.dual_counts(L, 2)
    np.testing.assert_array_equal(grids, [1, 3])
    np.testing.assert_array_equal(S, fine)
    monkeypatch.setattr(_direct, "COST_PAIR_ENTRY", 1.0)   # the counts cost more
    assert _direct.dual_counts(L, 2) == (None, None)
    from rbcd import _memory
    monkeypatch.setattr(_direct, "COST_PAIR_ENTRY", 0.0)
    monkeypatch.setattr(_memory, "available_memory", lambda: 4 * n * n)   # no room for S
    assert _direct.dual_counts(L, 2) == (None, None)


def test_pair_kernels_check_their_arrays():
    L = np.zeros((2, 5), dtype=np.uint16)
    base = np.zeros(2, dtype=np.int64)
    with pytest.raises(ValueError, match="S must be"):
        _gram.gram_pairs(L, np.array([0], dtype=np.int64), base, np.zeros((4, 4), np.uint16), 1, 1)
    with pytest.raises(ValueError, match="out of range"):
        _gram.gram_pairs(L, np.array([2], dtype=np.int64), base, np.zeros((5, 5), np.uint16), 1, 1)
    with pytest.raises(ValueError, match="base"):
        _gram.grid_pairs(L, np.zeros(3, dtype=np.int64), 1, 1)
    with pytest.raises(ValueError, match="S must be"):
        _gram.gram_dual(L, 1.0, None, 0.0, None, np.zeros((5, 5)), 1, np.zeros((5, 4), np.uint16))
    with pytest.raises(ValueError, match="grids out of range"):
        _gram.gram_dual(L, 1.0, None, 0.0, None, np.zeros((5, 5)), 1, None,
                        np.array([2], dtype=np.int64))


@pytest.mark.parametrize("m", [0, 1, 7, 130])
def test_centred_block_is_the_folds_system_from_p(m):
    """_gram.block_row_sums and centred_block build a fold's dual system from the rows'
    symmetric Gram matrix P without gathering its block: the weighted row sums in order,
    and the lower triangle of diag(sw) (P_tt - kbar 1^T - 1 kbar^T + kk) diag(sw) with
    numpy's operations in numpy's order (bit for bit), centred or not, on 1-3 threads;
    the upper triangle untouched; rows out of range refused."""
    rng = np.random.default_rng(m)
    n = m + 20
    P = rng.standard_normal((n, n))
    P = P + P.T
    rows = np.sort(rng.choice(n, m, replace=False)).astype(np.int64)
    rows = rng.permutation(rows) if m > 3 else rows        # any order
    w = rng.uniform(0.2, 3.0, m)
    S = float(w.sum()) if m else 1.0
    sw = np.sqrt(w)
    Ptt = P[np.ix_(rows, rows)]
    want_sums = np.array([sum(w[b] * Ptt[a, b] for b in range(m)) for a in range(m)])
    for T in (1, 2, 3):
        sums = _gram.block_row_sums(P, rows, w, T)
        np.testing.assert_array_equal(sums, want_sums)
        kbar = sums / S
        kk = float(w @ kbar) / S if m else 0.0
        for centre in (True, False):
            want = Ptt.copy()
            if centre:
                want -= kbar[None, :]
                want -= kbar[:, None]
                want += kk
            want *= sw[:, None]
            want *= sw[None, :]
            K = np.full((m, m), np.nan)
            _gram.centred_block(P, rows, kbar if centre else None, kk, sw, K, T)
            lower = np.tril(np.ones((m, m), dtype=bool))
            np.testing.assert_array_equal(K[lower], want[lower])
            assert np.isnan(K[~lower]).all()
    if m:
        bad = rows.copy()
        bad[0] = n
        with pytest.raises(ValueError, match="out of range"):
            _gram.block_row_sums(P, bad, w, 1)
        with pytest.raises(ValueError, match="out of range"):
            _gram.centred_block(P, bad, None, 0.0, sw, np.empty((m, m)), 1)
