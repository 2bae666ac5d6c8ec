"""rbcd.RandomBinning as a scikit-learn transformer: input handling, errors, pickling,
fitted state, check_estimator."""
import warnings
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import parametrize_with_checks

import rbcd_ref
from rbcd.binning import _binning
from rbcd.binning.random_binning import RandomBinning, _restore_grid_tables


def _data(n=120, d=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def _same(A, B):
    assert A.shape == B.shape and A.dtype == B.dtype
    np.testing.assert_array_equal(A.indptr, B.indptr)
    np.testing.assert_array_equal(A.indices, B.indices)
    np.testing.assert_array_equal(A.data, B.data)


def _expected_failures(estimator):
    # fit's sample_weight enters sigma="scale" only (its pairs drawn by weight units:
    # exact for zero and integer weights in one row order, tests/test_scale.py). Z itself
    # is not weight-equivalent, whatever sigma: its columns are the training bins numbered
    # by first appearance (the check shuffles the rows) and a row of weight 0 still has
    # its bins; the models' predictions are (tests/test_models.py)
    return {f"check_sample_weight_equivalence_on_{kind}_data":
            "Z's columns: every training row's bins, numbered by first appearance"
            for kind in ("dense", "sparse")}


@parametrize_with_checks([RandomBinning(n_grids=8, random_state=0),
                          RandomBinning(n_grids=5, n_features=64, random_state=0)],
                         expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_public_import_and_defaults():
    import rbcd

    assert rbcd.RandomBinning is RandomBinning
    p = RandomBinning().get_params()
    assert p == dict(n_grids=64, sigma="scale", kernel="laplacian", n_features=None,
                     dtype=np.float64, n_jobs=None, random_state=None, device="cpu")


# ---------------------------------------------------------------- inputs
def test_float32_and_fortran_inputs_give_the_same_Z():
    X = _data().astype(np.float32)  # float32 values convert exactly to float64
    X64 = X.astype(np.float64)
    ref = RandomBinning(n_grids=10, random_state=3).fit_transform(X64)
    for variant in (X, np.asfortranarray(X64), np.asfortranarray(X), X64.tolist()):
        _same(RandomBinning(n_grids=10, random_state=3).fit_transform(variant), ref)
    rb = RandomBinning(n_grids=10, random_state=3).fit(X64)
    _same(rb.transform(np.asfortranarray(X)), ref)
    Xi = np.arange(40).reshape(10, 4)  # integers convert to float64
    _same(RandomBinning(n_grids=4, random_state=0).fit_transform(Xi),
          RandomBinning(n_grids=4, random_state=0).fit_transform(Xi.astype(float)))


def test_output_dtype_and_values():
    X = _data()
    for dtype in (np.float32, np.float64):
        Z = RandomBinning(n_grids=9, dtype=dtype, random_state=0).fit_transform(X)
        assert Z.dtype == dtype
        assert sp.isspmatrix_csr(Z)
        np.testing.assert_array_equal(Z.data, dtype(1.0 / 3.0))
        assert Z.indices.dtype == np.int32 and Z.indptr.dtype == np.int32
        np.testing.assert_array_equal(Z.indptr, 9 * np.arange(X.shape[0] + 1))


def test_fit_then_transform_equals_fit_transform_and_is_reproducible():
    X = _data(300, 3)
    a = RandomBinning(n_grids=16, sigma=[0.5, 1, 2], random_state=7)
    Z1 = a.fit_transform(X)
    _same(a.transform(X), Z1)
    _same(RandomBinning(n_grids=16, sigma=[0.5, 1, 2], random_state=7).fit(X).transform(X), Z1)
    b = RandomBinning(n_grids=16, sigma=[0.5, 1, 2], random_state=8).fit(X)
    assert not np.array_equal(a.widths_, b.widths_)
    # random_state as a Generator / RandomState also works (docs/internals.md)
    RandomBinning(n_grids=3, random_state=np.random.default_rng(0)).fit(X)
    RandomBinning(n_grids=3, random_state=np.random.RandomState(0)).fit(X)


def test_hashed_mode_rows_and_values():
    X = _data(200, 3)
    R, m = 12, 7
    rb = RandomBinning(n_grids=R, n_features=m, random_state=0)
    Z = rb.fit_transform(X)
    assert Z.shape == (200, m) and rb.n_features_out_ == m and rb.grid_ptr_ is None
    # every row accounts for all R grids: values k / sqrt(R) sum to sqrt(R)
    np.testing.assert_allclose(np.asarray(Z.sum(axis=1)).ravel(), np.sqrt(R), rtol=1e-12)
    assert Z.has_sorted_indices
    assert np.all(np.diff(Z.indices[Z.indptr[0]:Z.indptr[1]]) > 0)
    # stateless: far away data still gets R grids' entries
    far = rb.transform(X + 1e5)
    np.testing.assert_allclose(np.asarray(far.sum(axis=1)).ravel(), np.sqrt(R), rtol=1e-12)
    with pytest.raises(ValueError, match="exact mode"):
        rb._fit_transform_columns(X)


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize("bad, where", [
    (np.nan, "row 3, column 1"),
    (np.inf, "row 3, column 1"),
    (-np.inf, "row 3, column 1"),
])
def test_non_finite_names_row_and_column(bad, where):
    X = _data(10, 3)
    X[3, 1] = bad
    X[7, 0] = bad
    with pytest.raises(ValueError, match=where):
        RandomBinning(n_grids=3).fit(X)
    rb = RandomBinning(n_grids=3).fit(_data(10, 3))
    with pytest.raises(ValueError, match=where):
        rb.transform(X)
    with pytest.raises(ValueError, match="NaN or infinity"):
        RandomBinning(n_grids=3, n_features=5).fit_transform(X)


def test_values_too_large_to_bin_name_row_and_column():
    X = _data(10, 3)
    X[4, 2] = 1e300
    X[6, 0] = -1e300
    with pytest.raises(ValueError, match=r"too large to bin at row 4, column 2"):
        RandomBinning(n_grids=3, random_state=0).fit(X)
    rb = RandomBinning(n_grids=3, random_state=0).fit(_data(10, 3))
    with pytest.raises(ValueError, match=r"too large to bin at row 4, column 2"):
        rb.transform(X)
    # large but binnable values are fine
    RandomBinning(n_grids=3, sigma=1e3, random_state=0).fit_transform(_data(10, 3) * 1e15)


@pytest.mark.parametrize("params, match", [
    (dict(n_grids=0), r"'n_grids' parameter of RandomBinning must be an int in the range \[1"),
    (dict(n_grids=2.5), "'n_grids' parameter of RandomBinning must be an int"),
    (dict(n_grids=True), "'n_grids' parameter of RandomBinning must be an int"),
    (dict(sigma=0.0), r"'sigma' parameter of RandomBinning must be a float in the range \(0.0"),
    (dict(sigma=-1.0), "'sigma' parameter of RandomBinning"),
    (dict(sigma=np.nan), "'sigma' parameter of RandomBinning"),
    (dict(sigma=[1.0, 2.0]), "length n_features_in_=3"),
    (dict(sigma=[1.0, -2.0, 1.0]), "positive and finite in every entry"),
    (dict(sigma="wide"), "'sigma' parameter of RandomBinning"),
    (dict(sigma=np.inf), "'sigma' parameter of RandomBinning"),
    (dict(sigma=[1.0, np.inf, 1.0]), "positive and finite in every entry"),
    (dict(kernel="rbf"), "'kernel' parameter of RandomBinning must be a str among"),
    (dict(n_features=0), "'n_features' parameter of RandomBinning must be an int"),
    (dict(n_features=3.0), "'n_features' parameter of RandomBinning must be an int"),
    (dict(n_features=2**63), "'n_features' parameter of RandomBinning"),
    (dict(random_state="seed"), "'random_state' parameter of RandomBinning"),
    (dict(dtype=np.int32), "dtype must be numpy.float32 or numpy.float64"),
    (dict(dtype="not a dtype"), "dtype must be"),
    (dict(n_jobs=0), "n_jobs"),
])
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        RandomBinning(**params).fit(_data(10, 3))


def test_bad_shapes_and_sparse_input():
    rb = RandomBinning(n_grids=3)
    with pytest.raises(ValueError, match="2D|2-dimensional|Reshape"):
        rb.fit(np.ones(5))
    with pytest.raises(ValueError, match="0 sample"):
        rb.fit(np.ones((0, 3)))
    with pytest.raises(ValueError, match="0 feature"):
        rb.fit(np.ones((4, 0)))
    rb.fit(_data(10, 3))
    with pytest.raises(ValueError, match="X has 4 features, but RandomBinning is expecting 3"):
        rb.transform(_data(10, 4))
    with pytest.raises(ValueError, match="X has 4 features, but RandomBinning is expecting 3"):
        rb.transform(sp.csr_matrix(_data(10, 4)))
    assert rb.__sklearn_tags__().input_tags.sparse
    with pytest.raises(ValueError, match="n_threads must be >= 1"):
        rb.predicted_speedup(0)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("n_features", [None, 61])
def test_sparse_input_is_the_dense_input(fmt, n_features):
    """An implicit zero is the value 0: Z (fit_transform, transform, columns) is the
    dense input's bit for bit, and the caller's matrix is left alone."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(80, 9)) * (rng.random((80, 9)) < 0.3)
    X[:, 3] = 0.0  # a constant (all implicit) column
    X[:, 5] = 2.5  # a constant stored column
    X2 = rng.normal(size=(30, 9)) * (rng.random((30, 9)) < 0.3)
    X2[:4, 3] = [0.0, 1e-3, 50.0, -7.0]  # new rows leaving the constant columns' bins
    X2[4:8, 5] = [2.5, 2.5 + 1e-9, 0.0, 30.0]
    S, S2 = sp.csr_matrix(X).asformat(fmt), sp.csr_matrix(X2).asformat(fmt)
    S2.eliminate_zeros() if fmt != "coo" else None
    before = S.copy()
    params = dict(n_grids=16, sigma=1.5, random_state=2, n_features=n_features)
    dense = RandomBinning(**params)
    sparse = RandomBinning(**params)
    _same(sparse.fit_transform(S), dense.fit_transform(X))
    _same(sparse.transform(S2), dense.transform(X2))
    _same(sparse.transform(S), dense.transform(X))
    assert (abs(S - before)).nnz == 0
    if n_features is None:
        Z, cols = RandomBinning(**params).fit_transform(S, return_columns=True)
        _same(Z, dense.transform(X))
        cols.check_matrix(Z)
    ref = rbcd_ref.RandomBinning(**params)
    _same(ref.fit_transform(S.tocsr()), dense.transform(X))
    _same(ref.transform(S2.tocsr()), sparse.transform(S2))


def test_sparse_non_finite_named_like_dense():
    X = np.zeros((6, 5))
    X[4, 1] = np.nan
    X[3, 4] = np.inf
    X[4, 0] = 1.0
    for fmt in ("csr", "csc"):
        S = sp.csr_matrix(X).asformat(fmt)
        for call in (lambda: RandomBinning(n_grids=2).fit(S),
                     lambda: RandomBinning(n_grids=2).fit(np.ones((6, 5))).transform(S)):
            with pytest.raises(ValueError, match=r"NaN or infinity \(inf\) at "
                                                 r"row 3, column 4"):
                call()
    with pytest.raises(ValueError, match=r"at row 3, column 4"):
        RandomBinning(n_grids=2).fit(X)


# ---------------------------------------------------------------- fitted state
@pytest.mark.parametrize("n_features", [None, 50])
def test_pickle_round_trip(n_features):
    X = _data(400, 3)
    rb = RandomBinning(n_grids=12, sigma=0.7, n_features=n_features, random_state=2).fit(X)
    X2 = _data(100, 3, seed=5) * 1.5
    clone = pickle.loads(pickle.dumps(rb))
    _same(clone.transform(X2), rb.transform(X2))
    _same(clone.transform(X), rb.transform(X))
    assert clone.kappa_ == rb.kappa_
    np.testing.assert_array_equal(clone.n_bins_, rb.n_bins_)


def test_pickles_naming_the_pre_split_module_load():
    """Pickles written before random_binning.py was split into stages name
    rbcd.binning.random_binning for _GridDraw, _ConstantColumns and _restore_grid_tables:
    they still load (the names are re-exported there) and give the same Z."""
    X = _data(400, 5)
    X[:, 2] = 1.5  # a constant feature: the fit keeps a _ConstantColumns and a _GridDraw
    from rbcd.binning.random_binning import _Paths
    rb = RandomBinning(n_grids=12, sigma=0.7, random_state=2).fit(
        X, _paths=_Paths(constants="always"))
    assert rb._constant_columns is not None
    X2 = _data(100, 5, seed=5) * 1.5
    X2[:3, 2] = 9.0  # leaves the constant feature's training bin in some grids
    blob = pickle.dumps(rb, protocol=0)  # text GLOBAL opcodes: "c<module>\n<name>\n"
    old = blob
    for module, name in ((b"_draw", b"_GridDraw"), (b"_draw", b"_ConstantColumns"),
                         (b"_plan", b"_restore_grid_tables")):
        new = b"crbcd.binning." + module + b"\n" + name + b"\n"
        assert new in old
        old = old.replace(new, b"crbcd.binning.random_binning\n" + name + b"\n")
    clone = pickle.loads(old)
    _same(clone.transform(X2), rb.transform(X2))
    _same(clone.transform(X), rb.transform(X))


class _Damaged:
    """Pickles as a GridTables whose state is ``state`` (a damaged one)."""

    def __init__(self, state):
        self.state = state

    def __reduce__(self):
        return (_restore_grid_tables, (self.state,))


def _fitted_for_damage(kind="single"):
    """single-word keys with thresholds and dense indexes, or multi-word keys (one
    column of huge values)."""
    if kind == "single":
        X = _data(300, 3)
        return RandomBinning(n_grids=6, sigma=0.7, random_state=2).fit(X), X
    X = np.hstack([_data(300, 3), _data(300, 1, seed=3) * 1e17])
    return RandomBinning(n_grids=6, sigma=[0.7, 0.7, 0.7, 5.0], random_state=2).fit(X), X


_M64 = (1 << 64) - 1


def _mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _key_hash(words):
    h = 0x9E3779B97F4A7C15
    for w in words:
        h = _mix64(((h ^ int(w)) + 0x9E3779B97F4A7C15) & _M64)
    return h


def _v1_state(state):
    """The version-1 pickle of earlier releases for this version-2 state: each grid
    also held a hashed slot table (capacity the smallest power of two >= 16 with load
    <= 0.7, linear probing from hash & mask, slot = hash tag << 32 | (local id + 1))."""
    slots = []
    for keys, n in zip(state["keys"], np.diff(state["grid_ptr"])):
        n = int(n)
        W = keys.shape[0] // n if n else 1
        cap = 16
        while 7 * cap < 10 * n:
            cap *= 2
        table = [0] * cap
        for local in range(n):
            h = _key_hash(keys[local * W:(local + 1) * W])
            pos = h & (cap - 1)
            while table[pos]:
                pos = (pos + 1) & (cap - 1)
            table[pos] = ((h >> 32) << 32) | (local + 1)
        slots.append(np.array(table, dtype=np.uint64))
    return {**state, "version": 1, "slots": slots}


def _put(key, value):
    return lambda s: {**s, key: value(s)}


def _per_grid(key, fn, r=0):
    def damage(s):
        arrays = list(s[key])
        arrays[r] = fn(arrays[r])
        return {**s, key: arrays}
    return damage


def _damages():
    """(name, function state -> damaged state): one or more per field of a
    version-2 state."""
    put, per_grid = _put, _per_grid

    def flip_key(a):
        a = a.copy()
        a[0] ^= np.uint64(1) << np.uint64(63)
        return a

    def repeat_key(r):  # two ids for one bin: the last key of grid r made its first
        def damage(s):
            keys = list(s["keys"])
            a = keys[r].copy()
            W = a.shape[0] // int(np.diff(s["grid_ptr"])[r])
            a[-W:] = a[:W]
            keys[r] = a
            return {**s, "keys": keys}
        return damage

    return [
        ("version", put("version", lambda s: 3)),
        ("not a dict", lambda s: [s]),
        ("missing keys", lambda s: {k: v for k, v in s.items() if k != "keys"}),
        ("widths dtype", put("widths", lambda s: s["widths"].astype(np.float32))),
        ("widths shape", put("widths", lambda s: s["widths"][:-1])),
        ("widths negative", put("widths", lambda s: -s["widths"])),
        ("widths nan", put("widths", lambda s: s["widths"] * np.nan)),
        ("offsets shape", put("offsets", lambda s: s["offsets"].T.copy())),
        ("offsets inf", put("offsets", lambda s: s["offsets"] + np.inf)),
        ("cmin length", put("cmin", lambda s: s["cmin"][:-1])),
        ("cmin above cmax", put("cmin", lambda s: s["cmax"] + 1.0)),
        ("cmax type", put("cmax", lambda s: list(s["cmax"]))),
        ("cmax huge bins", put("cmax", lambda s: s["cmax"] * 1e300)),
        ("grid_ptr length", put("grid_ptr", lambda s: s["grid_ptr"][:-1])),
        ("grid_ptr dtype", put("grid_ptr", lambda s: s["grid_ptr"].astype(np.int32))),
        ("grid_ptr decreasing", put("grid_ptr", lambda s: s["grid_ptr"][::-1].copy())),
        ("grid_ptr more bins", put("grid_ptr", lambda s: s["grid_ptr"] + np.arange(7))),
        ("keys list length", put("keys", lambda s: s["keys"][:-1])),
        ("keys not a list", put("keys", lambda s: tuple(s["keys"]))),
        ("keys truncated", per_grid("keys", lambda a: a[:-1])),
        ("keys dtype", per_grid("keys", lambda a: a.view(np.float64))),
        ("keys 2-D", per_grid("keys", lambda a: a.reshape(1, -1))),
        ("keys stray bit", per_grid("keys", flip_key)),
        ("keys repeated", repeat_key(0)),
        ("last grid keys truncated", per_grid("keys", lambda a: a[:-1], r=-1)),
        ("last grid keys stray bit", per_grid("keys", flip_key, r=-1)),
        ("last grid keys repeated", repeat_key(-1)),
    ]


def _v1_damages():
    """(name, function v1 state -> damaged state) for the slot tables of version 1."""
    put, per_grid = _put, _per_grid

    def full_slots(a):  # no empty slot: a probe would never end
        a = a.copy()
        a[a == 0] = (np.uint64(0xABCDEF) << np.uint64(32)) | np.uint64(1)
        return a

    def swap_ids(a):
        a = a.copy()
        nz = np.flatnonzero(a)
        low = np.uint64(0xFFFFFFFF)
        a[nz[0]], a[nz[1]] = (a[nz[0]] & ~low) | (a[nz[1]] & low), (a[nz[1]] & ~low) | (a[nz[0]] & low)
        return a

    def repeat_id(a):
        a = a.copy()
        nz = np.flatnonzero(a)
        low = np.uint64(0xFFFFFFFF)
        a[nz[1]] = (a[nz[1]] & ~low) | (a[nz[0]] & low)
        return a

    def move_key(a):  # a key not reached by its probe sequence (another valid key's value)
        a = a.copy()
        a[0], a[-1] = a[-1], a[0]
        return a

    return [
        ("missing slots", lambda s: {k: v for k, v in s.items() if k != "slots"}),
        ("slots list length", put("slots", lambda s: s["slots"][:-1])),
        ("slots truncated", per_grid("slots", lambda a: a[: a.shape[0] // 2])),
        ("slots truncated odd", per_grid("slots", lambda a: a[:-1])),
        ("slots dtype", per_grid("slots", lambda a: a.astype(np.int64))),
        ("slots full", per_grid("slots", full_slots)),
        ("slots empty", per_grid("slots", lambda a: a[:0])),
        ("slots ids swapped", per_grid("slots", swap_ids)),
        ("slots id repeated", per_grid("slots", repeat_id)),
        ("slots cleared", per_grid("slots", lambda a: np.zeros_like(a))),
        ("slots 2-D", per_grid("slots", lambda a: a.reshape(2, -1))),
        ("keys moved", per_grid("keys", move_key)),
        ("keys stray bit", per_grid("keys", lambda a: a ^ np.uint64(1 << 63))),
    ]


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the damage itself
@pytest.mark.parametrize("name, damage", _damages(), ids=[n for n, _ in _damages()])
def test_damaged_pickle_raises_value_error(name, damage):
    """Every field of the pickled grid tables is checked on load: a damaged state
    raises ValueError (never a hang, crash or wrong transform)."""
    for kind in ("single", "multi"):
        rb, X = _fitted_for_damage(kind)
        state = rb._tables.state()
        words = {k.shape[0] // n for k, n in zip(state["keys"], rb.n_bins_)}
        assert words == {1} if kind == "single" else max(words) > 1
        if kind == "single":
            assert any(a is not None for a in rb._tables.index)
            assert rb._tables.use_thr.any()
        with pytest.raises(ValueError, match="damaged or foreign RandomBinning grid tables"):
            _restore_grid_tables(damage(state))
        # the same through pickle.loads of the whole estimator
        rb.__dict__["_tables"] = _Damaged(damage(state))
        blob = pickle.dumps(rb)
        with pytest.raises(ValueError, match="damaged or foreign"):
            pickle.loads(blob)


@pytest.mark.parametrize("name, damage", _v1_damages(), ids=[n for n, _ in _v1_damages()])
def test_damaged_version_1_pickle_raises_value_error(name, damage):
    """Pickles of earlier releases (version 1: keys and hashed slot tables) load,
    their slot tables checked against the keys as before."""
    for kind in ("single", "multi"):
        rb, X = _fitted_for_damage(kind)
        v1 = _v1_state(rb._tables.state())
        _same(_restore_grid_tables(v1) is not None and rb.transform(X), rb.transform(X))
        with pytest.raises(ValueError, match="damaged or foreign RandomBinning grid tables"):
            _restore_grid_tables(damage(v1))


def test_pickled_state_round_trips_exactly():
    for kind in ("single", "multi"):
        rb, X = _fitted_for_damage(kind)
        X2 = X[::-1] * 1.1
        state = rb._tables.state()
        assert set(state) == {"version", "widths", "offsets", "cmin", "cmax", "grid_ptr", "keys"}
        for version_state in (state, _v1_state(state)):
            grids = _restore_grid_tables(version_state)
            for name in ("lo", "hi", "word", "shift", "n_words", "top_bits", "thr_ptr",
                         "use_thr", "ent_j", "ent_t", "ent_add", "range_lo", "range_hi",
                         "grid_ptr"):
                np.testing.assert_array_equal(getattr(grids, name), getattr(rb._tables, name))
            # the rebuilt bucketed tables are the fitted ones, array for array
            for group in ("dirs", "offs", "ents", "index"):
                for a, b in zip(getattr(grids, group), getattr(rb._tables, group)):
                    assert (a is None) == (b is None)
                    if a is not None:
                        np.testing.assert_array_equal(a, b)
            rb2 = pickle.loads(pickle.dumps(rb))
            rb2.__dict__["_tables"] = grids
            _same(rb2.transform(X2), rb.transform(X2))
        clone = pickle.loads(pickle.dumps(rb))
        _same(clone.transform(X2), rb.transform(X2))
        _same(clone.transform(X), rb.fit_transform(X))


def test_unchecked_bucket_tables_keep_lookups_bounded():
    """A bucket directory that does not rise from 0 to the bins is rejected by
    set_tables' check; shapes are always checked, so a lookup never leaves the
    entries."""
    rb, X = _fitted_for_damage()
    g = rb._tables
    bad = [np.full_like(a, 7) for a in g.dirs]
    with pytest.raises(ValueError, match="dirs"):
        g.set_tables(g.grid_ptr, bad, list(g.offs), list(g.ents), True)
    with pytest.raises(ValueError, match="dirs"):
        g.set_tables(g.grid_ptr, [a[:-1] for a in g.dirs], list(g.offs), list(g.ents), False)
    Z = rb.transform(X[:50] + 1e3)  # far away: every lookup misses
    assert Z.shape == (50, rb.n_features_out_) and Z.nnz == 0


def test_transform_rejects_missing_or_mismatched_tables():
    rb, X = _fitted_for_damage()
    tables = rb._tables
    rb._tables = None
    with pytest.raises(ValueError, match="no fitted grid tables"):
        rb.transform(X)
    rb._tables = tables
    rb.n_features_out_ += 1
    with pytest.raises(ValueError, match="n_features_out_ does not match"):
        rb.transform(X)


def test_fit_transform_return_columns_is_the_public_hand_over():
    X = _data(300, 3)
    rb = RandomBinning(n_grids=5, sigma=0.8, random_state=3)
    Z0 = RandomBinning(n_grids=5, sigma=0.8, random_state=3).fit_transform(X)
    Z, cols = rb.fit_transform(X, return_columns=True)
    _same(Z, Z0)
    C = Z.tocsc()
    C.sort_indices()
    np.testing.assert_array_equal(cols.indptr, C.indptr)
    np.testing.assert_array_equal(cols.indices, C.indices)
    np.testing.assert_array_equal(cols.grid_ptr, rb.grid_ptr_)
    Z2, cols2 = RandomBinning(n_grids=5, sigma=0.8, random_state=3)._fit_transform_columns(X)
    _same(Z2, Z)
    np.testing.assert_array_equal(cols2.indices, cols.indices)
    with pytest.raises(ValueError, match="exact mode"):
        RandomBinning(n_grids=5, n_features=40).fit_transform(X, return_columns=True)


def test_check_matrix_accepts_its_matrix_and_rejects_others():
    X = _data(400, 3)
    rb = RandomBinning(n_grids=6, sigma=0.8, random_state=3)
    Z, cols = rb.fit_transform(X, return_columns=True)
    cols.check_matrix(Z)
    cols.check_matrix(Z.tocsc())
    cols.check_matrix(Z, n_samples=400)
    # the same structure without labels (e.g. from column_structure)
    from rbcd.binning.random_binning import column_structure
    plain = column_structure(Z, rb.grid_ptr_)
    assert plain.grid_labels is None
    plain.check_matrix(Z)
    with pytest.raises(ValueError, match="shape"):
        cols.check_matrix(Z[:-1])
    with pytest.raises(ValueError, match="scipy sparse"):
        cols.check_matrix(Z.toarray())
    # same shape and nnz, rows permuted: the sampled rows disagree
    for check in (cols, plain):
        with pytest.raises(ValueError, match="does not match"):
            check.check_matrix(Z[np.roll(np.arange(400), 1)])
    # one entry moved to another column of its grid, in a sampled row
    bad = Z.copy()
    start = bad.indptr[0]
    other = rb.grid_ptr_[0] + (bad.indices[start] - rb.grid_ptr_[0] + 1) % rb.n_bins_[0]
    bad.indices[start] = other
    for check in (cols, plain):
        with pytest.raises(ValueError, match="does not match"):
            check.check_matrix(bad)
    # an entry dropped
    with pytest.raises(ValueError, match="stored entries"):
        cols.check_matrix(sp.csr_matrix(Z[:, 1:].toarray()).__class__(
            (Z.data[1:], Z.indices[1:], np.r_[0, Z.indptr[1:] - 1]), shape=Z.shape))
    with pytest.raises(ValueError, match="values"):
        cols.check_matrix(Z * 2.0)


def test_sigma_scale_is_the_default_and_sigma_is_stored():
    from rbcd._scale import scale_sigma
    from rbcd.binning import median_l1_distance
    X = _data(50, 3)
    rb = RandomBinning(n_grids=8, random_state=0).fit(X)
    assert rb.sigma == "scale"
    assert rb.sigma_ == scale_sigma(X) > 0
    assert median_l1_distance(X) > 0
    # the sampled pairs do not depend on (or draw from) random_state
    assert RandomBinning(n_grids=8, random_state=1).fit(X).sigma_ == rb.sigma_
    same = RandomBinning(n_grids=8, sigma=rb.sigma_, random_state=0).fit(X)
    np.testing.assert_array_equal(same.widths_, rb.widths_)
    np.testing.assert_array_equal(same.offsets_, rb.offsets_)
    # numbers are stored as the float (or float64 array) used
    two = RandomBinning(n_grids=8, sigma=2, random_state=0).fit(X)
    assert isinstance(two.sigma_, float) and two.sigma_ == 2.0
    arr = RandomBinning(n_grids=8, sigma=[1, 2, 3], random_state=0).fit(X)
    assert arr.sigma_.dtype == np.float64
    np.testing.assert_array_equal(arr.sigma_, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="sigma"):
        RandomBinning(sigma="median").fit(X)


def test_random_state_accepts_what_make_generator_takes():
    X = _data(30, 2)
    want = RandomBinning(n_grids=4, random_state=7).fit(X).widths_
    for rs in (np.random.default_rng(7), np.random.SeedSequence(7)):
        np.testing.assert_array_equal(RandomBinning(n_grids=4, random_state=rs).fit(X).widths_,
                                      want)
    RandomBinning(n_grids=4, random_state=2**70).fit(X)
    for bad in (-1, "x", 1.5):
        with pytest.raises(ValueError, match="random_state"):
            RandomBinning(n_grids=4, random_state=bad).fit(X)


def test_tiny_sigma_error_names_sigma():
    with pytest.raises(ValueError, match=r"too large to bin at row 0, column 0.*sigma"):
        RandomBinning(n_grids=4, sigma=1e-300, random_state=0).fit(_data(5, 2) + 1.0)


def test_degenerate_binning_warns_once_with_advice():
    from rbcd.binning import DegenerateBinningWarning
    assert issubclass(DegenerateBinningWarning, UserWarning)
    X = _data(200, 3)
    with pytest.warns(DegenerateBinningWarning) as rec:
        rb = RandomBinning(n_grids=8, sigma=1e-4, random_state=0).fit(X)
    assert len(rec) == 1
    msg = str(rec[0].message)
    assert rb.kappa_ >= 100
    assert "sigma = 0.0001" in msg and "close to N = 200" in msg and "sigma='scale'" in msg and "larger sigma" in msg
    with pytest.warns(DegenerateBinningWarning, match="smaller sigma") as rec:
        rb = RandomBinning(n_grids=8, sigma=1e6, random_state=0).fit(X)
    assert len(rec) == 1 and rb.kappa_ <= 1.1
    with pytest.warns(DegenerateBinningWarning, match=r"sigma in \[.*per feature"):
        RandomBinning(n_grids=8, sigma=[1e-4, 1e-4, 1e-3], random_state=0).fit(X)
    with pytest.warns(DegenerateBinningWarning, match="larger sigma"):  # hashed mode too
        RandomBinning(n_grids=8, sigma=1e-4, random_state=0, n_features=64).fit(X)
    from rbcd.binning.random_binning import _warn_if_degenerate
    with pytest.warns(DegenerateBinningWarning, match=r"sigma = 2\.5: .*larger sigma.*c > 1"):
        _warn_if_degenerate(150.0, 200, 2.5, "scale")  # advice when sigma="scale" was used
    # the default bandwidth on ordinary data, and small training sets: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateBinningWarning)
        RandomBinning(n_grids=8, random_state=0).fit(X)
        RandomBinning(n_grids=8, random_state=0).fit_transform(X, return_columns=True)
        RandomBinning(n_grids=8, sigma=1e-4, random_state=0).fit(X[:19])


def test_identical_rows_warn_without_sigma_advice():
    # no feature varies: no sigma helps, so the warning says so instead of "a smaller sigma"
    from rbcd.binning import DegenerateBinningWarning
    for X in (np.full((40, 3), 2.5), sp.csr_matrix((40, 3))):
        with pytest.warns(DegenerateBinningWarning, match="all 40 training rows are "
                          "identical") as rec:
            RandomBinning(n_grids=8, random_state=0).fit(X)
        assert len(rec) == 1 and "smaller sigma" not in str(rec[0].message)


@pytest.mark.parametrize("params, match", [
    (dict(n_grids=0), "'n_grids' parameter of RandomBinning"),
    (dict(sigma=[1.0, 2.0]), "length n_features_in_=3"),
    (dict(kernel="rbf"), "'kernel' parameter of RandomBinning"),
])
def test_bad_parameters_in_fit_transform(params, match):
    with pytest.raises(ValueError, match=match):
        RandomBinning(**params).fit_transform(_data(10, 3))
    with pytest.raises(ValueError, match=match):
        RandomBinning(**params).fit_transform(_data(10, 3), return_columns=True)


def _fitted_arrays(rb):
    for value in vars(rb).values():
        if isinstance(value, np.ndarray):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from (a for a in value if isinstance(a, np.ndarray))
        elif isinstance(value, _binning.GridTables):
            for name in ("widths", "offsets", "cmin", "cmax", "lo", "hi", "inv", "word",
                         "shift", "n_words", "top_bits", "thr_ptr", "use_thr", "ent_j", "ent_t",
                         "ent_add", "range_lo", "range_hi", "grid_ptr"):
                yield getattr(value, name)
            for group in (value.dirs, value.offs, value.ents, value.index):
                yield from (a for a in group if a is not None)


def _fitted_bytes(rb):
    return sum(a.nbytes for a in _fitted_arrays(rb))


def test_fitted_state_is_O_of_D_and_holds_no_training_rows():
    rng = np.random.default_rng(0)
    R, d = 8, 4
    for n in (2_000, 20_000):
        X = rng.normal(size=(n, d))
        rb = RandomBinning(n_grids=R, sigma=4.0, random_state=0).fit(X)
        D = rb.n_features_out_
        # bucketed tables (packed keys, one word here, + <= 2 bytes of directory per bin,
        # + 4 per grid) + dense index (<= 8 per bin, 4 bytes) + per-grid layout,
        # thresholds (<= 6 per column and grid, 20 bytes) and range bounds
        assert _fitted_bytes(rb) <= 42 * D + 224 * R * d + 4096
        assert _fitted_bytes(rb) < X.nbytes
        assert any(a is not None for a in rb._tables.index)  # the dense index is counted
        assert rb._tables.nbytes() <= _fitted_bytes(rb)
        for value in _fitted_arrays(rb):
            assert value.dtype != X.dtype or value.size <= 6 * R * d + R + 1


def test_diagnostics():
    X = _data(500, 2)
    rb = RandomBinning(n_grids=20, sigma=2.0, random_state=0).fit(X)
    assert rb.n_features_in_ == 2
    assert rb.widths_.shape == rb.offsets_.shape == (20, 2)
    assert np.all(rb.offsets_ >= 0) and np.all(rb.offsets_ < rb.widths_)
    assert rb.n_bins_.dtype == np.int64 and np.all(rb.n_bins_ >= 1)
    np.testing.assert_array_equal(rb.grid_ptr_, np.concatenate([[0], np.cumsum(rb.n_bins_)]))
    assert rb.n_features_out_ == rb.grid_ptr_[-1]
    assert np.all(rb.kappa_per_grid_ >= 1.0)
    assert rb.kappa_ == pytest.approx(np.mean(rb.kappa_per_grid_))
    D, R = rb.n_features_out_, 20
    for tau in (1, 2, 8):
        assert rb.predicted_speedup(tau) == pytest.approx(tau / (1 + (R - 1) * (tau - 1) / (D - 1)))
    assert rb.predicted_speedup(8) < 8


def test_rbcolumns_of_training_data():
    X = _data(250, 3)
    rb = RandomBinning(n_grids=6, random_state=1, dtype=np.float32)
    Z, cols = rb._fit_transform_columns(X)
    assert Z.dtype == np.float32
    assert cols.value == float(np.float32(1 / np.sqrt(6)))
    assert cols.n_rows == 250 and cols.n_columns == Z.shape[1] and cols.n_grids == 6
    assert cols.indices.shape[0] == Z.nnz
    assert "RBColumns" in repr(cols)
    # every column's rows are sorted and its entries are the rows that have that column
    C = Z.tocsc()
    C.sort_indices()
    np.testing.assert_array_equal(cols.indices, C.indices)


def test_fit_keeps_no_reference_to_X():
    X = _data(300, 3)
    rb = RandomBinning(n_grids=7, random_state=4, n_jobs=-1).fit(X)
    Z = rb.transform(X.copy())
    X[:] = 0.0  # the fitted tables must not depend on the caller's array
    _same(rb.transform(_data(300, 3)), Z)


def test_simd_path_applies_only_to_normal_widths():
    assert not _binning.normal_widths(np.array([[1.0, 1e-310]]))
    assert not _binning.normal_widths(np.array([[1.0, 1e305]]))
    assert _binning.normal_widths(np.array([[1.0, 3.0]]))
    assert isinstance(_binning.avx512_cpu(), bool)
    # tiny widths: the scalar division path, same Z as rbcd_ref
    X = _data(200, 2) * 1e-300
    rb = RandomBinning(n_grids=4, sigma=1e-303, random_state=0)
    Z = rb.fit_transform(X)
    assert not _binning.normal_widths(rb.widths_)
    ref = rbcd_ref.RandomBinning(n_grids=4, sigma=1e-303, random_state=0)
    _same(Z, ref.fit_transform(X))


def test_fits_beyond_the_available_memory_are_refused_up_front(monkeypatch):
    """Issue 15 item 6: a clear error with the estimate, before any work."""
    from rbcd.binning import _plan as features  # the memory estimates and checks
    X = _data(50, 3)
    for n_grids in (10**19, 2**62):
        with pytest.raises(ValueError, match=r"n_grids.*estimated .* GiB.*available"):
            RandomBinning(n_grids=n_grids).fit(X)
    monkeypatch.setattr(features, "MEMORY_CHECK_FLOOR", 0)  # small estimates are checked too
    monkeypatch.setattr(features, "_available_memory", lambda: 10**3)
    for call in (lambda: RandomBinning(n_grids=64).fit(X),
                 lambda: RandomBinning(n_grids=64).fit_transform(X),
                 lambda: RandomBinning(n_grids=64, n_features=99).fit_transform(X)):
        with pytest.raises(ValueError, match=r"needs an estimated .* GiB"):
            call()
    monkeypatch.setattr(features, "_available_memory", lambda: None)  # unknown: no check
    rb = RandomBinning(n_grids=8).fit(X)
    monkeypatch.setattr(features, "_available_memory", lambda: 10**3)
    with pytest.raises(ValueError, match=r"transform of 50 rows with n_grids=8 needs"):
        rb.transform(X)
