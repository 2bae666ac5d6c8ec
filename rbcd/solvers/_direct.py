"""Direct ridge solves: one Cholesky factorization serves every target.

The system of rbcd.solvers.cg (scikit-learn's Ridge objective, centred and weighted)::

    (Zc^T S Zc + alpha I) W = Zc^T S Yc

is solved in one of two forms (DESIGN.md, "Direct solves and regularization chosen by
the data"):

* dual, an n x n system: with Zs = S^1/2 Zc and K = Zs Zs^T,
  (K + alpha I) A = S^1/2 Yc and W = Zs^T A (the push-through identity
  (Zs^T Zs + alpha I)^-1 Zs^T = Zs^T (Zs Zs^T + alpha I)^-1);
* primal, the D x D system itself, Zc^T S Zc = Z^T S Z - S zbar zbar^T.

On random binning training data (every row one entry of value v in every grid: the
grid structure of ``columns``) both Gram matrices come from the grid labels
(rbcd/src/direct_gram.h): K[i, j] = v^2 #{grids where rows i and j share a bin} minus
the centring terms, in n^2 R / 2 label comparisons; Z^T S Z in n R^2 / 2 additions.
Other matrices use scipy's sparse products (or BLAS for dense Z).

Which of CG, dual and primal ``solver="auto"`` uses is decided by the cost model of
:func:`plan`, whose constants were measured once (docs/internals.md, "Direct solves") and
are the same on every machine. The factorization is LAPACK's (dpotrf); with alpha = 0
and a singular Gram matrix the minimum-norm solution comes from an eigendecomposition
instead (what CG converges to from a zero start).

LAPACK_THREADS: the factorizations and eigendecompositions run on one BLAS thread, whatever
``n_jobs``. OpenBLAS's threads busy-wait for work; with other processes on the cores, two
threads made a 569 x 569 Cholesky factorization 3-20x and a 1,000 x 1,000
eigendecomposition 3-9x slower than one (2-vCPU AMD EPYC, load 5), and a threaded LAPACK
call need not give the same bits as a serial one, while rbcd's results must not depend on
the thread count. The direct forms are chosen for small systems, where one thread costs
little. Where there are several systems (one per distinct alpha: RidgeCG with an alpha per
target, the folds of a search), ``n_jobs`` threads factor different systems at once
(:func:`cholesky_solves`), each on one BLAS thread: the bits of the serial calls.
"""
import numpy as np
import scipy.linalg
import scipy.sparse as sp

from . import _gram
from .._threads import limit_blas

# ------------------------------------------------------------------------------------
# the cost model of solver="auto" (units: seconds on the machine of the measurement,
# a 2-vCPU AMD EPYC; only their ratios matter, so the choice is the same everywhere).
# Measured with benchmarks/compare_sizes.py --calibrate (docs/internals.md).

#: seconds per label comparison of the dual Gram kernel (n^2 R / 2 of them)
COST_COMPARE = 0.12e-9
#: seconds per weight addition of the primal Gram kernel (n R^2 / 2 of them)
COST_SCATTER = 1.5e-9
#: seconds per flop of the factorization and the triangular solves (n^3 / 3, 2 n^2 k)
COST_FLOP = 0.04e-9
#: seconds per pair of rows sharing a bin counted pair by pair (_gram.gram_pairs), per row
#: of a grid's scans there, and per entry of the n x n counts that this adds (their first
#: touch and second read); in the units of COST_COMPARE (measured on star's search:
#: 2.3-4 ns a pair on one thread where a comparison took 0.06 ns)
COST_PAIR = 6e-9
COST_PAIR_SCAN = 10e-9
COST_PAIR_ENTRY = 4e-9
#: seconds per stored entry and target of one CG iteration (a Z P and a Z^T Q pass)
COST_CG_ENTRY = 1.0e-9
#: CG iterations assumed for a fit at tol 1e-3 (the median of the real-data suite)
CG_ITERATIONS = 40
#: the largest Gram matrix a direct solve forms (bytes of float64): beyond it, CG
MAX_GRAM_BYTES = 512 * 2**20


def costs(n, D, n_grids, k, structured, n_factor=1):
    """The modelled seconds of each form ("cg", "dual", "primal") for an n x D random
    binning matrix with ``n_grids`` entries per row, k targets and ``n_factor`` distinct
    alphas (one factorization each); a direct form only where its Gram matrix is within
    MAX_GRAM_BYTES, and only "cg" without the grid labels (``structured`` False)."""
    n, D, R, k, f = float(n), float(D), float(n_grids), float(k), float(n_factor)
    out = {"cg": CG_ITERATIONS * 2.0 * n * R * k * COST_CG_ENTRY}
    if not structured:
        return out
    if 8.0 * n * n <= MAX_GRAM_BYTES:
        out["dual"] = (n * n * R / 2.0 * COST_COMPARE
                       + (f * n ** 3 / 3.0 + 2.0 * n * n * k) * COST_FLOP
                       + 2.0 * n * R * k * COST_CG_ENTRY)
    if 8.0 * D * D <= MAX_GRAM_BYTES:
        out["primal"] = (n * R * R / 2.0 * COST_SCATTER
                         + (f * D ** 3 / 3.0 + 2.0 * D * D * k) * COST_FLOP
                         + 2.0 * n * R * k * COST_CG_ENTRY)
    return out


def plan(n, D, n_grids, k, structured, n_factor=1):
    """"dual", "primal" or "cg": the form whose modelled cost (:func:`costs`) is lowest
    for an n x D random binning matrix with ``n_grids`` entries per row, k targets and
    ``n_factor`` distinct alphas (a direct form factors once per distinct alpha; CG's
    cost does not depend on them). ``structured``: the grid labels are at hand (RB
    training data); without them the direct forms are not modelled here and CG is chosen
    (RidgeCG(solver="direct") still solves directly)."""
    c = costs(n, D, n_grids, k, structured, n_factor=n_factor)
    return min(c, key=c.get)


def shared_dual_pays(n, n_train, D, n_grids, k, n_alphas, n_folds, direct=False):
    """True where the folds of a search (rbcd.model_selection) are solved cheaper from
    ONE dual Gram matrix of all n rows, each fold taking its training rows' block (one
    factorization per alpha), than each fold on its own in its cheapest form: the
    Gram matrix's cost shared by the ``n_folds`` folds of ``n_train`` training rows, k
    targets and ``n_alphas`` alphas each. False where the n x n matrix passes
    MAX_GRAM_BYTES. ``direct``: against the folds' own direct forms only (solver="direct")."""
    if 8.0 * float(n) * float(n) > MAX_GRAM_BYTES:
        return False
    own = costs(n_train, D, n_grids, k * n_alphas, True, n_factor=n_alphas)
    if direct:
        own.pop("cg")
        if not own:
            return True
    n, m, R = float(n), float(n_train), float(n_grids)
    shared = (n * n * R / 2.0 * COST_COMPARE / n_folds
              + (n_alphas * m ** 3 / 3.0 + 2.0 * m * m * k * n_alphas) * COST_FLOP
              + 2.0 * m * R * k * n_alphas * COST_CG_ENTRY)
    return shared <= min(own.values())


def choose(system, columns, solver, n_factor=1):
    """The form for ``solver`` "auto" (:func:`plan`, ``n_factor`` distinct alphas) or
    "direct" (dual when n <= D, else primal) on ``system``."""
    n, D = system.shape
    if solver == "direct":
        return "dual" if n <= D else "primal"
    gp = _grid_ptr(system, columns)
    structured = gp is not None
    R = gp.shape[0] - 1 if structured else 0
    return plan(n, D, R, system.Yc.shape[1], structured, n_factor)


# ------------------------------------------------------------------------------------
# grid labels


def grid_labels(system, columns, narrow=True):
    """(R, n) labels of a random binning training matrix, grid-major, or None when Z is
    not one: with ``narrow``, uint16 column numbers within each grid when every grid has
    at most 65,536 columns (and R < 65,536); else int32 global columns. Z's CSR rows hold their entries
    in column order and grid r's columns follow those of grids 0 .. r-1, so with one
    entry per grid in every row, entry r of row i is row i's column in grid r."""
    gp = _grid_ptr(system, columns)
    if gp is None:
        return None
    n = system.shape[0]
    R = gp.shape[0] - 1
    carried = system.op.labels   # the column structure's own labels, checked against Z
    if narrow and R < 65536 and carried is not None and not np.any(carried[1]):
        # every grid uint16 (fewer than 65,536 columns): the same numbers, stacked
        return np.stack(carried[3])
    L = system.op.csr[1].reshape(n, R).T
    sizes = np.diff(gp)
    if narrow and R < 65536 and sizes.max() <= 65536:
        return np.ascontiguousarray((L - gp[:-1, None]).astype(np.uint16))
    return np.ascontiguousarray(L, dtype=np.int32)


def _grid_ptr(system, columns):
    """The grid boundaries of RB training data (rbcd.solvers.cg.training_grid_ptr), else
    None; also None when Z's CSR rows do not hold exactly one entry per grid."""
    from .cg import training_grid_ptr

    gp = training_grid_ptr(system.op, columns)
    if gp is None or system.op.csr[1].shape[0] != system.shape[0] * (gp.shape[0] - 1):
        return None
    return gp


# ------------------------------------------------------------------------------------
# Gram matrices (lower triangle in C order, i.e. the upper triangle of the Fortran view
# that LAPACK is given)


def dual_counts(labels, n_threads):
    """The dual Gram's label counts split by grid (rbcd/src/direct_gram.h): ``(grids, S)``,
    ``grids`` the int64 indices of the grids counted by comparisons (n^2 / 2 each) and S
    the (n, n) counts of the others, the grids whose bins hold so few rows that counting
    their pairs one by one costs less (COST_PAIR, COST_PAIR_SCAN against COST_COMPARE,
    where the saving passes the counts' own cost, COST_PAIR_ENTRY); ``(None, None)``:
    every grid by comparisons. The counts are integers, so
    ``_gram.gram_dual(labels, ..., S=S, grids=grids)`` gives the K of every grid compared,
    bit for bit. ``labels``: (R, n) training labels (every bin of a grid holds a row, so a
    grid's smallest label is its first column)."""
    R, n = labels.shape
    # the most any grid could save (no pairs at all): nothing to look at unless it pays
    best = n * (n - 1) / 2.0 * COST_COMPARE - n * COST_PAIR_SCAN
    if R == 0 or n < 2 or not R * best > n * n * COST_PAIR_ENTRY:
        return None, None
    base = labels.min(axis=1).astype(np.int64)
    n_head = int((labels.max(axis=1).astype(np.int64) - base).max()) + 1
    pairs = _gram.grid_pairs(labels, base, n_head, n_threads)
    saving = n * (n - 1) / 2.0 * COST_COMPARE - pairs * COST_PAIR - n * COST_PAIR_SCAN
    sparse = saving > 0
    if not saving[sparse].sum() > n * n * COST_PAIR_ENTRY:
        return None, None
    from .._memory import available_memory
    avail = available_memory()
    if avail is not None and 4.0 * n * n * labels.dtype.itemsize > avail:
        return None, None                 # the counts' memory: compare every grid instead
    S = np.zeros((n, n), dtype=labels.dtype)
    _gram.gram_pairs(labels, np.flatnonzero(sparse).astype(np.int64), base, S, n_head,
                     n_threads)
    return np.flatnonzero(~sparse).astype(np.int64), S


def _dual_gram(system, labels):
    """K = Zs Zs^T (n x n, lower triangle filled)."""
    op, s, zbar = system.op, system.s, system.zbar
    n = system.shape[0]
    sw = np.sqrt(s) if system.weighted else None
    if zbar is not None:
        m = system.op.dot(zbar[:, None])[:, 0]            # Z zbar
        c = float(np.einsum("j,j->", zbar, zbar))     # not BLAS (rbcd._threads.serial_dot)
    else:
        m, c = None, 0.0
    if labels is not None:
        K = np.empty((n, n))
        threads = _gram_threads(op.n_threads, n * n * labels.shape[0] / 2.0)
        grids, S = dual_counts(labels, threads)
        _gram.gram_dual(labels, op.const_value * op.const_value, m, c, sw, K, threads, S,
                        grids)
        return K
    Z = _matrix(op)
    with limit_blas(1):                      # LAPACK_THREADS (module docstring)
        K = np.asarray((Z @ Z.T).todense() if sp.issparse(Z) else Z @ Z.T, dtype=np.float64)
    if m is not None:
        K -= m[:, None]
        K -= m[None, :]
        K += c
    if sw is not None:
        K *= sw[:, None]
        K *= sw[None, :]
    return K


def _primal_gram(system, labels):
    """Zc^T S Zc (D x D, lower triangle filled)."""
    op, s, zbar = system.op, system.s, system.zbar
    n, D = system.shape
    if labels is not None:
        A = np.zeros((D, D))
        _gram.gram_primal(labels, s if system.weighted else None, A,
                          _gram_threads(op.n_threads, n * labels.shape[0] ** 2 / 2.0))
        A *= op.const_value * op.const_value
    else:
        Z = _matrix(op)
        if sp.issparse(Z):
            Zs = Z.multiply(s[:, None]).tocsr() if system.weighted else Z
            A = np.asarray((Z.T @ Zs).todense(), dtype=np.float64)
        else:
            with limit_blas(1):              # LAPACK_THREADS (module docstring)
                A = Z.T @ (Z * s[:, None])
    if zbar is not None:
        from .cg import subtract_outer

        subtract_outer(A, zbar, zbar, system.S)         # A -= S zbar zbar^T, no D x D temporary
    return A


def _matrix(op):
    if not op.sparse:
        return op.Z
    indptr, indices, data = op.csr
    if op.use_const:
        data = np.full(indices.shape[0], op.const_value)
    return sp.csr_matrix((data, indices, indptr), shape=op.shape)


def _gram_threads(n_threads, work):
    """Threads for a Gram kernel of ``work`` inner steps: one per GRAM_GRAIN of them (a
    thread team costs a wake-up, and on a busy machine a wait for a core)."""
    return max(1, min(int(n_threads), int(work // GRAM_GRAIN)))


#: inner steps (label comparisons or weight additions) per thread below which a Gram
#: kernel uses fewer threads
GRAM_GRAIN = 2e7


# ------------------------------------------------------------------------------------
# the factorization


def _factor_solve(G, rhs, alpha):
    """Solve (G + alpha I) X = rhs for a symmetric G given by its lower triangle (C
    order) by Cholesky; G is overwritten. A LinAlgError when G + alpha I is not
    numerically positive definite (alpha = 0 and G singular), G then partly
    overwritten."""
    m = G.shape[0]
    G.flat[:: m + 1] += alpha
    # the Fortran view of a C-order lower triangle is an upper triangle: no copy
    c, info = scipy.linalg.lapack.dpotrf(G.T, lower=0, clean=0, overwrite_a=1)
    if info == 0:
        x, info = scipy.linalg.lapack.dpotrs(c, rhs, lower=0)
        if info == 0:
            return x
    raise np.linalg.LinAlgError("not positive definite")


def cholesky_solves(G, rhs, alphas, n_threads=1, overwrite=False):
    """[X_a]: the solutions of (G + alphas[a] I) X_a = rhs[a] by Cholesky (as
    :func:`_factor_solve`, bit for bit), up to ``n_threads`` systems factored at once
    (rbcd.solvers._gram.factor_solves), each on one BLAS thread; None in place of a system
    that is not numerically positive definite (alpha = 0 and G singular: the caller
    solves it another way).

    G : (m, m) C-contiguous float64 symmetric matrix given by its lower triangle; kept,
        unless ``overwrite`` and there is one system (then factored in place, no copy).
    rhs : one (m, k_a) array per alpha (the same array may serve several).
    Every thread factors in an m x m matrix of its own, so the threads are also bounded
    by half the memory available."""
    from .._memory import available_memory

    m = G.shape[0]
    alphas = np.ascontiguousarray(alphas, dtype=np.float64).reshape(-1)
    n_a = alphas.shape[0]
    widths = np.array([b.shape[1] for b in rhs], dtype=np.intc)
    B = np.zeros((n_a, int(widths.max(initial=0)), m))
    for a, b in enumerate(rhs):
        B[a, :b.shape[1]] = np.asarray(b, dtype=np.float64).T
    if overwrite and n_a == 1 and G.flags.c_contiguous and G.dtype == np.float64:
        work, threads = G[None], 1
    else:
        threads = max(1, min(int(n_threads), n_a))
        avail = available_memory()
        if avail is not None:
            threads = max(1, min(threads, int(avail / 2 // max(8.0 * m * m, 1.0))))
        work = np.empty((threads, m, m))
    with limit_blas(1):                       # LAPACK_THREADS (module docstring)
        info = _gram.factor_solves(np.ascontiguousarray(G, dtype=np.float64), B, alphas,
                                   widths, work, threads)
    return [B[a, :widths[a]].T if info[a] == 0 else None for a in range(n_a)]


def _eig_solve(G, rhs, alpha):
    """Minimum-norm solution of (G + alpha I) X = rhs by an eigendecomposition of G
    (lower triangle, C order)."""
    e, Q = scipy.linalg.eigh(G.T, lower=False, check_finite=False)
    e = e + alpha
    cut = max(1, G.shape[0]) * np.finfo(np.float64).eps * max(float(np.max(np.abs(e), initial=0.0)), 1e-300)
    inv = np.where(e > cut, 1.0 / np.where(e > cut, e, 1.0), 0.0)
    return Q @ (inv[:, None] * (Q.T @ rhs))


def dual_relative_residual(G, rhs, X, alpha):
    """The relative residual of the primal normal equations at the dual solution, computed
    in the dual space: ||Zs^T r|| / ||Zs^T rhs|| per column, r = rhs - (G + alpha I) X.

    G = Zs Zs^T (lower triangle read; Zs = S^1/2 Zc, with the extra columns when there are
    any), X the dual solution of (G + alpha I) X = rhs. The primal solution W = Zs^T X
    (solve_direct) leaves the primal residual B - (Zs^T Zs + alpha I) W = Zs^T r, with
    B = Zs^T rhs, so its squared norm is r^T G r, and ||B||^2 = rhs^T G rhs: the same
    quantity as _RidgeSystem.relative_residual, without the (D, k) passes over Z."""
    with limit_blas(1):                      # LAPACK_THREADS (module docstring)
        symm = scipy.linalg.blas.dsymm
        # the C-order lower triangle is the Fortran upper triangle: no copy
        R = rhs - symm(1.0, G.T, np.asfortranarray(X), lower=0) - X * alpha[None, :]
        rn = np.einsum("ik,ik->k", R, symm(1.0, G.T, np.asfortranarray(R), lower=0))
        bn = np.einsum("ik,ik->k", rhs, symm(1.0, G.T, np.asfortranarray(rhs), lower=0))
    rn, bn = np.sqrt(np.maximum(rn, 0.0)), np.sqrt(np.maximum(bn, 0.0))
    return np.where(bn > 0, rn / np.where(bn > 0, bn, 1.0), 0.0)


def check_gram_memory(m, copies, what):
    """ValueError before a direct solve forms ``copies`` float64 m x m matrices that do not
    fit in the memory available (rbcd._memory.available_memory)."""
    from .._memory import available_memory

    need = 8.0 * copies * float(m) * float(m)
    avail = available_memory()
    if avail is not None and need > avail:
        raise ValueError(
            f"{what} forms {copies} dense {m} x {m} matrices, about {need / 2**30:.3g} GiB, "
            f"more than the {avail / 2**30:.3g} GiB of memory available: use solver='cg' "
            f"(or 'auto', which chooses CG at this size)")


def solve_direct(system, alpha, form, columns, tol=None, extra=None):
    """W (D, k) of ``system`` (a rbcd.solvers.cg._RidgeSystem) in ``form`` "dual" or
    "primal"; returns (W, n_iter (ones: one factorization, scikit-learn's convention that
    a fitted solver made at least one iteration), info as solve_ridge_cg's, ``stop``
    "direct").

    One Cholesky factorization per distinct alpha (one for all targets in the usual
    case). Where it fails (alpha = 0 and a singular Gram matrix), the Gram matrix is
    formed again and the minimum-norm solution taken from its eigendecomposition.
    ``converged`` is the relative residual <= tol (a direct solve is exact up to the
    rounding that the conditioning of the system allows).

    ``extra`` (dual form only): Ms = S^1/2 Mc, extra columns of the design
    (rbcd.solvers._linear): the Gram matrix is Kc + Ms Ms^T, and W holds their
    coefficients Ms^T A in its last d rows, (D + d, k)."""
    if extra is not None and form != "dual":
        raise ValueError("extra columns are solved in the dual form only")
    k = system.Yc.shape[1]
    n, D = system.shape
    check_gram_memory(n if form == "dual" else D, 1 if len(np.unique(alpha)) == 1 else 2,
                      f"the {form} direct solve")
    labels = grid_labels(system, columns, narrow=(form == "dual"))

    def gram():
        if form != "dual":
            return _primal_gram(system, labels)
        K = _dual_gram(system, labels)
        if extra is not None:                # the lower triangle, the only one filled and read
            low = np.tril_indices(n)
            K[low] += (extra @ extra.T)[low]
        return K

    G = gram()
    if form == "dual":
        sw = np.sqrt(system.s) if system.weighted else None
        rhs = system.Yc if sw is None else system.Yc * sw[:, None]
    else:
        rhs = system.B
    # the dual residual check in the dual space (dual_relative_residual) from a copy of the
    # Gram matrix, where that copy is no larger than one of the (D + d, k) arrays of the
    # check in the primal space
    G0 = G.copy() if form == "dual" and n * n <= (D + (0 if extra is None else
                                                       extra.shape[1])) * k else None
    X = np.empty((G.shape[0], k))
    groups = np.unique(alpha)
    cols = [np.flatnonzero(alpha == a) for a in groups]
    # one alpha: G factored in place; several: each thread copies G into a matrix of its own
    solved = cholesky_solves(G, [rhs[:, c] for c in cols], groups,
                             n_threads=system.op.n_threads, overwrite=True)
    for a, c, x in zip(groups, cols, solved):
        if x is None:                        # not positive definite: alpha = 0, G singular
            with limit_blas(1):              # LAPACK_THREADS (module docstring)
                x = _eig_solve(gram(), rhs[:, c], a)
        X[:, c] = x
    if form == "dual":
        U = X if not system.weighted else X * np.sqrt(system.s)[:, None]
        W = system.ztimes_t(U)
    else:
        W = X
        if system.flat.size:
            W[system.flat] = 0.0
    V = None if extra is None else extra.T @ X
    if G0 is not None:
        residual = dual_relative_residual(G0, rhs, X, alpha)
    elif V is None:
        residual = system.relative_residual(W, alpha)
    else:
        from ._linear import joint_residual

        residual = joint_residual(system, W, V, extra, alpha)
    if V is not None:
        W = np.vstack([W, V])
    converged = residual <= (tol if tol is not None else np.inf)
    info = dict(converged=converged, residual=residual,
                stop=np.array(["direct"] * k))
    return W, np.ones(k, dtype=np.int64), info


# ------------------------------------------------------------------------------------
# alpha="auto": the penalty chosen from the data (DESIGN.md, "Direct solves and
# regularization chosen by the data")

#: candidate penalties per unit of training weight (Ridge units: alpha = c * sum of the
#: weights; 1e-4 per row was the fixed default before), searched by exact leave-one-out
AUTO_ALPHAS_PER_ROW = np.logspace(-6, 1, 15)
#: exact leave-one-out (one eigendecomposition of the dual Gram matrix, about 15 times the
#: cost of its Cholesky factorization) up to this many rows; above, on a sample of as many
LOO_MAX_ROWS = 1000


def loo_rows(n):
    """The rows alpha="auto" scores by leave-one-out: all up to LOO_MAX_ROWS, above that
    a fixed sample of as many (seed 0), in row order. The one draw every path uses (the
    CPU fit, the GPU and Dask fits, the CV search), so that their choices agree."""
    if n <= LOO_MAX_ROWS:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).permutation(n)[:LOO_MAX_ROWS])


def check_loo_sample_weight(s_rows, n, what="alpha='auto'"):
    """ValueError when the leave-one-out sample of :func:`loo_rows` (above LOO_MAX_ROWS rows)
    has no weight: its scores would all be 0 / 0. Only weights that are zero on every one of
    its rows while positive elsewhere get here; without weights (``s_rows`` None), or when
    the sample is every row (whose weights were checked with the data), nothing to check."""
    if s_rows is None or len(s_rows) >= n:
        return
    if not float(np.sum(s_rows)) > 0:
        raise ValueError(
            f"{what} scores the candidates by leave-one-out on a fixed sample of "
            f"{s_rows.shape[0]} of the {n} rows (rbcd.solvers._direct.loo_rows), and every "
            f"row of that sample has weight 0: give alpha a number, or search with "
            f"cross-validation folds (RBClassifierCV / RBRegressorCV with cv=5)")


def _class_index(Y):
    """The class of each row of one-vs-rest -1/+1 targets (one column: +1 is class 1)."""
    return (Y[:, 0] > 0).astype(np.int64) if Y.shape[1] == 1 else np.argmax(Y, axis=1)


def selection_scores(Y, F, s, classification):
    """(primary, secondary) scores of predictions F for targets Y, higher is better:
    classification, the weighted accuracy of the one-vs-rest decisions then minus the
    weighted squared error; regression, minus the weighted squared error (twice)."""
    err = float(np.einsum("i,ik->", s, (Y - F) ** 2)) / float(s.sum())
    if not classification:
        return -err, -err
    hit = _class_index(F) == _class_index(Y)
    return float(np.einsum("i,i->", s, hit.astype(np.float64))) / float(s.sum()), -err


def loo_gram(system, columns):
    """The dual Gram matrix Kc that :func:`loo_select` and :func:`loo_select_weights`
    decompose (lower triangle, C order)."""
    check_gram_memory(system.shape[0], 4,
                      "alpha='auto' (the eigendecomposition of the dual Gram matrix)")
    return _dual_gram(system, grid_labels(system, columns))


def plain_gram(system, columns):
    """Z Z^T of the system's Z (n x n, lower triangle filled), neither centred nor
    weighted: one-vs-one centres each pair's block by the pair's own mean, in its
    leave-one-out search and its dual solves (rbcd.solvers._ovo)."""
    n = system.shape[0]
    check_gram_memory(n, 3, "one-vs-one (the rows' Gram matrix)")
    op = system.op
    labels = grid_labels(system, columns)
    if labels is not None:
        K = np.empty((n, n))
        threads = _gram_threads(op.n_threads, n * n * labels.shape[0] / 2.0)
        grids, S = dual_counts(labels, threads)
        _gram.gram_dual(labels, op.const_value * op.const_value, None, 0.0, None, K,
                        threads, S, grids)
        return K
    Z = _matrix(op)
    with limit_blas(1):                      # LAPACK_THREADS (module docstring)
        return np.asarray((Z @ Z.T).todense() if sp.issparse(Z) else Z @ Z.T,
                          dtype=np.float64)


def loo_select(system, columns, alphas, classification, solution=True):
    """Exact leave-one-out over ``alphas`` from one eigendecomposition of the dual Gram
    matrix, and the solution at the best. Returns (alpha, W (D, k), scores (m, 2)); W is
    None without ``solution`` (a pass over Z saved where only the choice is wanted).

    With Kc = Zs Zs^T = Q diag(e) Q^T (Zs = S^1/2 Zc, so Kc S^1/2 1 = 0) the hat matrix of
    the weighted problem with its unpenalised intercept is H = P + Q diag(e / (e + a)) Q^T,
    P = S^1/2 1 1^T S^1/2 / S, and the weighted residual of the fit is
    r = ys - Q diag(e / (e + a)) Q^T ys (ys = S^1/2 Yc). Row i's leave-one-out residual is
    r_i / (1 - H_ii) (weighted units; / sqrt(s_i) for the target's). Each alpha costs
    O(n^2 k), the eigendecomposition O(n^3) once (scikit-learn's RidgeCV, "eigen" mode).
    """
    return loo_select_weights(system, columns, alphas, classification, None, (0.0,),
                              solution)[0]


def _loo_scores(Q, e, QtY, ys, sw, p, alphas, Yraw, s, classification):
    """selection_scores of the leave-one-out predictions at every alpha (loo_select's
    notation), all alphas at once: two matrix products instead of a pass per alpha."""
    n, k = ys.shape
    m = alphas.shape[0]
    G = e[None, :] / (e[None, :] + alphas[:, None])              # (m, n): e / (e + a)
    F = (Q @ (G.T[:, :, None] * QtY[:, None, :]).reshape(n, m * k)).reshape(n, m, k)
    h = p[:, None] + (Q * Q) @ G.T                                # (n, m): diag(H)
    return _scores_of(F, h, ys, sw, Yraw, s, classification)


def _loo_scores_lowrank(Q, e, QtY, ys, sw, p, alphas, Yraw, s, classification, B):
    """_loo_scores for the Gram matrix Kc + Ms Ms^T from the eigendecomposition of Kc
    (Q, e) and B = Q^T Ms (n, d), by the Woodbury identity: with g = 1 / (e + a) and
    C = I + B^T diag(g) B (d x d),
    (Kc + Ms Ms^T + a I)^-1 = Q (diag(g) - diag(g) B C^-1 B^T diag(g)) Q^T. The fit is
    ys - a (K + a I)^-1 ys and diag(H) = p + 1 - a diag((K + a I)^-1): O(n^2 (d + k)) per
    alpha instead of a second eigendecomposition (rbcd.solvers._linear). Also returns the
    solutions (K + a I)^-1 ys, (m, n, k)."""
    n, k = ys.shape
    m = alphas.shape[0]
    QQ = Q * Q
    F = np.empty((n, m, k))
    h = np.empty((n, m))
    X = np.empty((m, n, k))
    eye = np.eye(B.shape[1])
    for j, a in enumerate(alphas):
        # alpha 0 with a zero eigenvalue: inf / nan here, and _scores_of scores that alpha
        # -inf (undefined), as where the fit reproduces a row exactly
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            g = 1.0 / (e + a)
            gB = g[:, None] * B
            C = eye + B.T @ gB
            t = g[:, None] * QtY
            t -= gB @ np.linalg.solve(C, B.T @ t)
            X[j] = Q @ t                                     # (K + a I)^-1 ys
            F[:, j, :] = ys - a * X[j]
            F2 = Q @ gB
            diag_inv = QQ @ g - np.einsum("ij,ij->i", F2, np.linalg.solve(C, F2.T).T)
            h[:, j] = p + 1.0 - a * diag_inv
    return _scores_of(F, h, ys, sw, Yraw, s, classification), X


def _scores_of(F, h, ys, sw, Yraw, s, classification):
    """selection_scores of the leave-one-out predictions from the fits F (n, m, k) and the
    hat matrix's diagonal h (n, m) at every alpha."""
    k = ys.shape[1]
    den = 1.0 - h
    live = sw > 0
    safe = (den > 1e-12) & live[:, None] & np.all(np.isfinite(F), axis=2)
    scale = np.where(safe, den * np.where(live, sw, 1.0)[:, None], 1.0)
    loo = np.where(safe[:, :, None], (ys[:, None, :] - F) / scale[:, :, None], 0.0)
    # selection_scores of the predictions Yraw - loo, for every alpha
    S = float(s.sum())
    err = np.einsum("i,ijk->j", s, loo * loo) / S
    if classification:
        pred = Yraw[:, None, :] - loo
        cls = (pred[:, :, 0] > 0).astype(np.int64) if k == 1 else np.argmax(pred, axis=2)
        hit = (cls == _class_index(Yraw)[:, None]).astype(np.float64)
        scores = np.column_stack([np.einsum("i,ij->j", s, hit) / S, -err])
    else:
        scores = np.column_stack([-err, -err])
    scores[~np.all(safe[live], axis=0)] = -np.inf    # a row its own fit reproduces exactly
    return scores


def loo_select_weights(system, columns, alphas, classification, Ms, weights, solution=True):
    """loo_select for the design [Zc, sqrt(c) Mc] at every weight c of ``weights``
    (rbcd.solvers._linear; Ms = S^1/2 Mc, None where every weight is 0), from ONE
    eigendecomposition of Kc: c = 0 as loo_select, c > 0 by the Woodbury identity
    (_loo_scores_lowrank). Returns a list of (alpha, W, scores) per weight, W (D, k), or
    (D + d, k) with the term's coefficients in its last d rows where c > 0 (None without
    ``solution``)."""
    n = system.shape[0]
    G = loo_gram(system, columns)
    sw = np.sqrt(system.s)
    ys = system.Yc * sw[:, None]
    out = []
    with limit_blas(1):                      # LAPACK_THREADS (module docstring)
        e, Q = scipy.linalg.eigh(G.T, lower=False, check_finite=False, overwrite_a=True,
                                 driver="evd")          # divide and conquer: the fastest here
        e = np.maximum(e, 0.0)                           # rounding below 0
        QtY = Q.T @ ys
        QtM = None if Ms is None else Q.T @ Ms
        p = system.s / system.S if system.zbar is not None else np.zeros(n)
        Yraw = system.Yc + system.ybar                   # the targets as given
        for c in weights:
            if c == 0.0:
                scores = _loo_scores(Q, e, QtY, ys, sw, p, alphas, Yraw, system.s,
                                     classification)
                best = _best(scores)
                # (Kc + a I)^-1 ys
                A = Q @ ((1.0 / (e + alphas[best]))[:, None] * QtY) if solution else None
                V = None
            else:
                scores, X = _loo_scores_lowrank(Q, e, QtY, ys, sw, p, alphas, Yraw, system.s,
                                                classification, np.sqrt(c) * QtM)
                best = _best(scores)
                A = X[best] if solution else None
                V = None if A is None else np.sqrt(c) * (Ms.T @ A)
            out.append((float(alphas[best]), A, V, scores))
    result = []
    for a, A, V, scores in out:
        W = None if A is None else system.ztimes_t(A * sw[:, None])
        if W is not None and V is not None:
            W = np.vstack([W, V])
        result.append((a, W, scores))
    return result


def _best(scores):
    """Index of the best row of (primary, secondary) scores; ties go to the larger alpha
    (later in the grid: the smoother model)."""
    order = np.lexsort((np.arange(scores.shape[0]), scores[:, 1], scores[:, 0]))
    return int(order[-1])
