"""Issue 31, the binning's items: a stale ``columns=`` (item 1), wide sparse input (8), fits
refused up front (9), Ctrl-C during binning (10), messages (11), feature names (19)."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from rbcd import RandomBinning
from rbcd.solvers.cd import CDClassifier, CDRegressor
from rbcd.solvers.cg import RidgeCG
from rbcd.binning.random_binning import column_structure


def _pair(n=300, d=3, seed=0, R=16):
    X = np.random.default_rng(seed).normal(size=(n, d))
    rb = RandomBinning(n_grids=R, sigma=1.0, random_state=seed)
    Z, cols = rb.fit_transform(X, return_columns=True)
    return X, rb, Z, cols


def _swap_rows(Z, a, b):
    perm = np.arange(Z.shape[0])
    perm[[a, b]] = perm[[b, a]]
    return Z[perm]


# ---------------------------------------------------------------- item 1: stale columns=
def test_stale_columns_with_two_rows_swapped_are_refused():
    """Rows 1 and 2 of Z swapped: same shape, nnz and values, same grid sizes; the sampled
    check of 16 rows accepted it and the solvers fitted the structure's matrix."""
    X, rb, Z, cols = _pair()
    Z2 = _swap_rows(Z, 1, 2)
    assert (Z2 != Z).nnz > 0 and Z2.nnz == Z.nnz
    y = np.sin(X[:, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for est in (RidgeCG(alpha=1.0), CDRegressor(max_epochs=2),
                    CDRegressor(max_epochs=2, parallel="grid")):
            with pytest.raises(ValueError, match="columns are not the grid structure of this Z"):
                est.fit(Z2, y, columns=cols)
        with pytest.raises(ValueError, match="columns are not the grid structure of this Z"):
            CDClassifier(max_epochs=2).fit(Z2, y > 0, columns=cols)
        # the right pairing still fits, and gives the fit without columns
        a = RidgeCG(alpha=1.0, tol=1e-10).fit(Z, y, columns=cols)
        b = RidgeCG(alpha=1.0, tol=1e-10).fit(Z, y)
        np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-8)
    with pytest.raises(ValueError, match="does not match"):
        cols.check_matrix(Z2)
    plain = column_structure(Z, rb.grid_ptr_)  # no labels: the entries alone
    with pytest.raises(ValueError, match="does not match"):
        plain.check_matrix(Z2)
    cols.check_matrix(Z)
    plain.check_matrix(Z)


def test_every_row_is_checked_not_a_sample():
    """One entry moved to another bin of its grid in each of several rows that a sample of
    16 evenly spread rows misses, and the last row's entries dropped into the first row's
    bins: all refused."""
    X, rb, Z, cols = _pair(n=500, R=8)
    for i in (1, 250, 498):
        bad = Z.copy()
        k = bad.indptr[i]
        g0, n0 = rb.grid_ptr_[0], rb.n_bins_[0]
        bad.indices[k] = g0 + (bad.indices[k] - g0 + 1) % n0
        bad.sort_indices()
        with pytest.raises(ValueError, match="does not match"):
            cols.check_matrix(bad)
        with pytest.raises(ValueError, match="columns are not the grid structure"):
            RidgeCG().fit(bad, np.zeros(500), columns=cols)


def test_labels_of_another_matrix_are_refused():
    """The structure's entries match Z, but its grid labels are those of Z with two rows
    swapped: the grid mode of CD reads the labels, so they are checked too."""
    X, rb, Z, cols = _pair()
    labels = [a.copy() for a in cols.grid_labels]
    r = next(r for r in range(len(labels)) if labels[r][1] != labels[r][2])
    labels[r][[1, 2]] = labels[r][[2, 1]]
    cols.grid_labels = labels
    with pytest.raises(ValueError, match=f"grid labels of grid {r} are corrupt"):
        CDRegressor(parallel="grid", max_epochs=1).fit(Z, X[:, 0], columns=cols)
