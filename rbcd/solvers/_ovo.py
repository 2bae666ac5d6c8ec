"""One-vs-one ridge classification: one binary ridge problem per pair of classes, a vote.

``multi_class="ovo"`` of RidgeCGClassifier, RBClassifier and RBClassifierCV. Pair (a, b),
a < b in the order of ``classes_``, is fitted on the rows of classes a and b alone, with
-1/+1 targets (+1 for b, as a two-class RidgeCGClassifier does), the estimator's penalty
(one number for every pair, or ``alpha="auto"`` chosen for each pair from its own rows),
its sample weights and its ``class_weight`` (``"balanced"`` then weighs the pair's two
classes). This is scikit-learn's ``OneVsOneClassifier`` over ``RidgeClassifier``.

Why: with the squared loss, one-vs-rest targets make each class's score fit the -1 of all
the others as well; on many classes the exact Laplacian machine with the squared loss
then trails SVC (glass, vowel), while one-vs-one squared loss matches it
(docs/benchmarks/search.md).

The vote (:func:`ovo_decision`) is scikit-learn's: each pair votes for b where its
decision is > 0, else for a; ties of the votes are broken by the pairs' summed
confidences, squashed into (-1/3, 1/3) so that they never outweigh a vote.

The leave-one-out scores of the search (:func:`loo_ovo_scores`) are exact: a row is a
training row of its own class's pairs only, whose leave-one-out decisions come from one
eigendecomposition of each pair's centred Gram block (rbcd.solvers._direct.loo_select's
identity); for every other pair its plain decision is already one of a model that never
saw it.
"""
import numpy as np
import scipy.linalg
import scipy.sparse as sp

from .._threads import limit_blas

__all__ = ["ovo_pairs", "ovo_decision", "loo_ovo_scores"]


def ovo_pairs(n_classes):
    """The pairs (a, b), a < b, in scikit-learn's order (a major)."""
    return [(a, b) for a in range(n_classes) for b in range(a + 1, n_classes)]


def ovo_decision(pair_scores, n_classes):
    """(n, n_classes) decision values from the pairs' decisions ``pair_scores`` (n,
    n_pairs) in the order of :func:`ovo_pairs`: the votes plus the summed confidences
    c mapped to c / (3 (|c| + 1)), which lies in (-1/3, 1/3). argmax gives the class."""
    pair_scores = np.asarray(pair_scores, dtype=np.float64)
    n = pair_scores.shape[0]
    votes = np.zeros((n, n_classes))
    conf = np.zeros((n, n_classes))
    for p, (a, b) in enumerate(ovo_pairs(n_classes)):
        d = pair_scores[:, p]
        up = d > 0
        votes[:, b] += up
        votes[:, a] += ~up
        conf[:, b] += d
        conf[:, a] -= d
    return votes + conf / (3.0 * (np.abs(conf) + 1.0))


def pair_rows(index, a, b):
    """The rows of classes a and b (``index``: each row's class number), and their -1/+1
    targets (+1 for b)."""
    rows = np.flatnonzero((index == a) | (index == b))
    return rows, np.where(index[rows] == b, 1.0, -1.0)


def symmetric(K, tile=256):
    """K (n, n), a Gram matrix whose kernels fill the lower triangle only, made whole in
    place (its lower triangle copied onto the upper), tile by tile: each upper tile is
    the transpose of its mirror tile, both in cache (one fancy-indexed copy of the whole
    triangle built index arrays of n^2 entries and read K.T across pages)."""
    n = K.shape[0]
    for i0 in range(0, n, tile):
        i1 = min(n, i0 + tile)
        diag = K[i0:i1, i0:i1]
        upper = np.triu_indices(i1 - i0, 1)
        diag[upper] = diag.T[upper]
        for j0 in range(i1, n, tile):
            j1 = min(n, j0 + tile)
            K[i0:i1, j0:j1] = K[j0:j1, i0:i1].T
    return K


def centred_pair(Kpp, t, w, fit_intercept):
    """A pair's dual system from its block Kpp of the uncentred Gram matrix Z Z^T, its -1/+1
    targets t and its weights w: (Ks, ys, sw, kbar, kk, tbar), Ks = diag(sw) Zc Zc^T
    diag(sw) with Zc the pair's rows centred by their weighted mean and sw = sqrt(w),
    ys = sw (t - tbar), kbar_j = zbar^T z_j for the pair's rows, kk = zbar^T zbar (kbar
    None, kk and tbar 0 without an intercept or weight)."""
    W = float(w.sum())
    sw = np.sqrt(w)
    if fit_intercept and W > 0:
        kbar = (w @ Kpp) / W
        kk = float(w @ kbar) / W
        Kc = Kpp - kbar[None, :] - kbar[:, None] + kk
        tbar = float(w @ t) / W
    else:
        kbar, kk, Kc, tbar = None, 0.0, Kpp, 0.0
    return sw[:, None] * Kc * sw[None, :], sw * (t - tbar), sw, kbar, kk, tbar


def pair_columns(Z, grid_ptr):
    """The grid structure (RBColumns) of a pair's rows of random binning training data Z
    (CSR, sorted indices, one stored value): every row keeps its one entry per grid, so
    the grids are those of the whole Z (``grid_ptr`` among Z's columns). The column form
    is scipy's CSR -> CSC conversion (rows in increasing order within each column); the
    solvers check it against Z as they check any structure handed to them."""
    from ..binning.columns import RBColumns

    csc = Z.tocsc()
    value = float(Z.data[0]) if Z.data.shape[0] else 1.0
    return RBColumns(np.ascontiguousarray(csc.indptr, dtype=np.int64),
                     np.ascontiguousarray(csc.indices, dtype=np.int32),
                     np.ascontiguousarray(grid_ptr, dtype=np.int64), value, Z.shape[0])


def stack_pair_coefs(coefs, n_features, dtype):
    """The pairs' coefficients, each (columns, values) on the columns its rows touch, as
    one CSR matrix (n_pairs, n_features) of their non-zeros: with many classes a pair's
    solution lives on a fraction of the features."""
    indptr = [0]
    indices, data = [], []
    for cols, vals in coefs:
        keep = vals != 0
        indices.append(np.asarray(cols)[keep])
        data.append(vals[keep])
        indptr.append(indptr[-1] + int(keep.sum()))
    idx = np.concatenate(indices) if indices else np.zeros(0, dtype=np.int64)
    val = np.concatenate(data) if data else np.zeros(0)
    return sp.csr_matrix((val.astype(dtype), idx, np.array(indptr)),
                         shape=(len(coefs), n_features))


def pair_shares(index, n_classes, weight):
    """Each pair's share of the training weight, (n_pairs,): the sample weights of its rows
    over all rows' (``weight`` None: row counts). A number alpha is in the units of the
    whole training set (Ridge's, as one-vs-rest uses it); a pair solves with alpha times
    its share, the same penalty per unit of weight."""
    w = np.ones(index.shape[0]) if weight is None else np.asarray(weight, dtype=np.float64)
    total = float(w.sum())
    return np.array([float(w[pair_rows(index, a, b)[0]].sum()) / total
                     for a, b in ovo_pairs(n_classes)])


def loo_ovo_scores(K, index, n_classes, s, alphas, fit_intercept, pair_weight=None,
                   shares=None):
    """Exact leave-one-out (primary, secondary) scores of one-vs-one ridge classification
    at every alpha, (m, 2): the weighted accuracy of the leave-one-out votes, then minus the
    weighted mean squared leave-one-out error of the rows' own pairs (the order of
    rbcd.solvers._direct.selection_scores).

    K (n, n): the uncentred, unweighted Gram matrix Z Z^T of the rows (lower triangle
    filled; the upper is ignored). ``index`` (n,): each row's class number; ``s`` (n,) the
    rows' weights, which the accuracy counts; ``pair_weight(rows)``, if given, the weights
    of a pair's rows in its fit (class_weight="balanced" within the pair), else s[rows].
    alphas (m,): the candidate penalties; pair p solves with alphas * shares[p]
    (:func:`pair_shares`; None: 1), as a fit with that alpha does.

    Per pair, with Zc the pair's rows centred by their weighted mean, sw = sqrt(weights),
    Ks = diag(sw) Zc Zc^T diag(sw) = Q diag(e) Q^T: the fit's weighted residual is
    r = ys - Q diag(e / (e + a)) Q^T ys and the hat matrix's diagonal
    h = p + diag(Q diag(e / (e + a)) Q^T) (p = weights / their sum with an intercept);
    an own row's leave-one-out decision is t_i - r_i / ((1 - h_i) sw_i). A row of another
    class gets the plain decision tbar + (z - zbar)^T Zc^T diag(sw) A, A = (Ks + a I)^-1 ys,
    from K's entries. A candidate where a row of positive weight is reproduced exactly by
    its own fit (1 - h_i <= 1e-12) scores -inf, as in loo_select.
    """
    K = symmetric(np.array(K, dtype=np.float64))
    n = K.shape[0]
    m = alphas.shape[0]
    pairs = ovo_pairs(n_classes)
    # the vote of every alpha, accumulated pair by pair (ovo_decision's terms): memory
    # (m, n, n_classes), not (m, n, n_pairs)
    votes = np.zeros((m, n, n_classes))
    conf = np.zeros((m, n, n_classes))
    err = np.zeros(m)
    err_weight = 0.0
    bad = np.zeros(m, dtype=bool)
    with limit_blas(1):                        # rbcd.solvers._direct's LAPACK_THREADS
        for p, (a, b) in enumerate(pairs):
            rows, t = pair_rows(index, a, b)
            w = s[rows] if pair_weight is None else pair_weight(rows)
            W = float(w.sum())
            Kr = K[rows]                        # (n_p, n): the pair's rows against every row
            Ks, ys, sw, kbar, kk, tbar = centred_pair(Kr[:, rows], t, w, fit_intercept)
            hp = np.zeros(rows.shape[0]) if kbar is None else w / W
            e, Q = scipy.linalg.eigh(Ks, check_finite=False, overwrite_a=True, driver="evd")
            e = np.maximum(e, 0.0)
            QtY = Q.T @ ys
            a_p = alphas if shares is None else alphas * shares[p]
            G = 1.0 / (e[:, None] + a_p[None, :])              # (n_p, m)
            V = sw[:, None] * (Q @ (G * QtY[:, None]))         # diag(sw) (Ks + a I)^-1 ys
            # every row's plain decision tbar + (z - zbar)^T Zc^T V, expanded so that the
            # (n, n_p) centred block is never formed
            plain = tbar + (V.T @ Kr).T                        # (n, m)
            if kbar is not None:
                c = V.sum(axis=0)
                kx = (w @ Kr) / W                              # zbar^T z(x), every row x
                plain -= kx[:, None] * c[None, :] + (kbar @ V - kk * c)[None, :]
            S = e[:, None] * G                                 # e / (e + a)
            Fw = Q @ (S * QtY[:, None])                        # fitted, weighted units
            h = hp[:, None] + (Q * Q) @ S
            den = 1.0 - h
            live = sw > 0
            bad |= np.any((den <= 1e-12) & live[:, None], axis=0)
            safe = (den > 1e-12) & live[:, None]
            loo = np.where(safe, (ys[:, None] - Fw) / np.where(safe, den * sw[:, None], 1.0),
                           0.0)
            own = plain[rows]
            own[live] = t[live, None] - loo[live]
            plain[rows] = own
            d = plain.T                                        # (m, n)
            up = d > 0
            votes[:, :, b] += up
            votes[:, :, a] += ~up
            conf[:, :, b] += d
            conf[:, :, a] -= d
            err += w @ (loo * loo)
            err_weight += W
    S_all = float(s.sum())
    scores = np.empty((m, 2))
    pred = np.argmax(votes + conf / (3.0 * (np.abs(conf) + 1.0)), axis=2)   # (m, n)
    scores[:, 0] = ((pred == index[None, :]) @ s) / S_all
    scores[:, 1] = -err / (err_weight if err_weight > 0 else 1.0)
    scores[bad] = -np.inf
    return scores


def fit_pairs_dual(Z, K, index, n_classes, pair_weight, alpha, fit_intercept, chosen):
    """One-vs-one ridge in the dual form for every pair p where ``chosen[p]``,
    from ONE Gram matrix of all rows: the pair's block of K = Z Z^T (the whole symmetric
    matrix, rbcd.solvers._direct.plain_gram), centred and weighted by the pair's own
    weights (:func:`centred_pair`), then a Cholesky
    solve (a number alpha: the pair's entry of ``alpha``, an (n_pairs,) array) or, for
    alpha "auto", the leave-one-out choice of rbcd.solvers._direct.loo_select on the
    pair's rows (the candidates AUTO_ALPHAS_PER_ROW times the pair's weight).

    The same solution as a two-class RidgeCGClassifier's dual direct solve on the pair's
    rows, without building each pair's matrix, column structure and Gram matrix apart.
    ``pair_weight(rows)``: the weights of a pair's rows (sample and class weights).
    Returns (a list with, per pair, None (not chosen: the caller fits it) or (columns,
    coefficients, intercept, alpha, relative residual), and the chosen pairs' decisions
    on the rows of Z (n, n_pairs), from K: a model's scores of its own training rows
    without a product with the sparse coefficients; NaN in the other pairs' columns; None
    with more pairs than rows)."""
    from . import _direct

    n = Z.shape[0]
    out = []
    pairs = ovo_pairs(n_classes)
    # the training decisions where they take no more memory than K itself
    train = np.full((n, len(pairs)), np.nan) if len(pairs) <= n else None
    for p, (a, b) in enumerate(pairs):
        rows, t = pair_rows(index, a, b)
        if not chosen[p]:
            out.append(None)
            continue
        w = pair_weight(rows)
        S = float(w.sum())
        Kpp = K[np.ix_(rows, rows)]
        Ks, ys, sw, _, _, tbar = centred_pair(Kpp, t, w, fit_intercept)
        ys = ys[:, None]
        with limit_blas(1):                    # rbcd.solvers._direct's LAPACK_THREADS
            if isinstance(alpha, str):          # "auto": leave-one-out on the pair's rows
                cand = _direct.AUTO_ALPHAS_PER_ROW * S
                e, Q = scipy.linalg.eigh(Ks, check_finite=False, driver="evd")
                e = np.maximum(e, 0.0)
                QtY = Q.T @ ys
                hp = w / S if fit_intercept else np.zeros(rows.shape[0])
                scores = _direct._loo_scores(Q, e, QtY, ys, sw, hp, cand, t[:, None], w, True)
                a_p = float(cand[_direct._best(scores)])
                A = Q @ (QtY / (e + a_p)[:, None])
            else:
                a_p = float(alpha[p])
                G = Ks.copy()
                A = _direct._factor_solve(G, np.asfortranarray(ys), a_p)
            residual = float(_direct.dual_relative_residual(Ks, ys, A, np.array([a_p]))[0])
        u = sw * A[:, 0]
        if fit_intercept:
            u = u - w * (u.sum() / S)             # W = Zc^T u' = Z_p^T (u' - w sum(u') / S)
        Zp = Z[rows]
        coef = np.asarray(Zp.T @ u).ravel()
        cols = np.flatnonzero(coef)
        # intercept: tbar - zbar^T W, zbar^T W = w^T Z_p W / S = w^T K_pp u / S
        intercept = tbar - float(w @ (Kpp @ u)) / S if fit_intercept else 0.0
        out.append((cols, coef[cols], intercept, a_p, residual))
        if train is not None:
            train[:, p] = K[:, rows] @ u + intercept
    return out, train
