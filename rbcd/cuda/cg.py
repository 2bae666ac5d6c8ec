"""Block Jacobi-preconditioned CG for ridge on an array module ``xp`` (cupy on a GPU).

The objective and the algorithm are the CPU's (rbcd.solvers.cg.solve_ridge_cg)::

    min_{w, b}  sum_i s_i (y_i - z_i . w - b)^2 + alpha ||w||^2

the intercept by implicit centring with the s-weighted means, every target in one block
(each with its own step sizes, frozen once ``||r|| <= tol ||b||``), the Jacobi diagonal
``sum_i s_i z_ij^2 - S zbar_j^2 + alpha``, numerically constant columns held at 0, the
targets and weights rescaled by powers of two when huge or tiny, and on random binning
training data the preconditioned residual projected off the grid indicator directions.
The iterates agree with the CPU's to rounding (the sums run in another order), so the
solutions agree to the solver tolerance.

Products: ``GridLayout`` (Z from the device binning: Z P by a gather over the labels, Z^T U
by atomic-free segmented sums over the grid-sorted layout) or ``MatrixOperator`` (any
dense or (cupyx.)scipy sparse matrix). After the products, an iteration's vector work is four
fused kernels (rbcd.cuda._ops.cg_q, cg_step, cg_dir, cg_p, each with its numpy twin; the
products' dot products zbar . P and 1 . T by _ops.col_parts and center_rows). The
last, cg_p, also takes the stopping decision on the device (which targets go on, the
iterations and residual norm of each, breakdowns), so the host never waits for the
iteration it has just queued: it reads the previous iteration's active mask (a small
asynchronous copy) while the device runs the next one, and stops queueing once no target
is active (see solve_ridge). The set-up before the first iteration waits for the device
once: for the scalars that decide the rescaling (and a MatrixOperator's range check), read
in one copy; everything else it computes (the column statistics and Z^T b in one Z^T pass
on a GridLayout, the norms of b, the thresholds, the first active mask) stays on the device.
"""

import numpy as np
import scipy.sparse as sp

from . import _ops
from ..solvers.cd import SAFE_EXP, pow2_scale
from ..solvers.cg import _check_alpha, _warn_unconverged, default_max_iter

__all__ = ["MatrixOperator", "solve_ridge", "GridProjection"]


class MatrixOperator:
    """Z @ P and Z^T @ U for a dense array or a sparse matrix of xp's module."""

    def __init__(self, xp, Z):
        self.xp = xp
        self.shape = tuple(int(s) for s in Z.shape)
        self.sparse = sp.issparse(Z) or type(Z).__module__.startswith("cupyx.scipy.sparse")
        if self.sparse:  # canonical CSR: Z * Z is then the square of the stored values
            Z = Z.tocsr().copy()
            Z.sum_duplicates()
        self.Z = Z
        self.ZT = Z.T.tocsr() if self.sparse else None

    def dot(self, P):
        out = self.Z @ self.xp.ascontiguousarray(P)
        return self.xp.asarray(out.toarray() if hasattr(out, "toarray") else out)

    def tdot(self, U):
        U = self.xp.ascontiguousarray(U)
        out = (self.ZT @ U) if self.sparse else (self.Z.T @ U)
        return self.xp.asarray(out.toarray() if hasattr(out, "toarray") else out)

    def max_abs(self):
        """max |Z| as a 0-d array of xp (0 for an empty Z), not read: solve_ridge reads it
        with its other set-up scalars in one copy."""
        data = self.Z.data if self.sparse else self.Z
        if data.size == 0:
            return self.xp.zeros(())
        return self.xp.abs(data).max()

    def col_stats(self, s):
        xp = self.xp
        colsum = self.tdot(s[:, None])[:, 0]
        if self.sparse:
            Z2 = self.ZT.copy()
            Z2.data = Z2.data * Z2.data
            colsq = Z2 @ s
            colsq = xp.asarray(colsq.toarray() if hasattr(colsq, "toarray") else colsq).ravel()
        else:
            colsq = (self.Z * self.Z).T @ s
        return colsum, colsq


class GridProjection:
    """The arrays of the projection off the grid indicator directions
    (rbcd.solvers.cg._GridProjection), applied to (D, k) arrays by _ops.cg_dir: subtract
    each grid's mean over its columns (with an intercept); without, only the part along
    span{e_g - e_h}. ``ptr`` (R + 1,) the grids' columns, ``inv_sizes`` (R,) 1 / their
    sizes (0 for an empty grid), ``grid_of_col`` (D,), ``inv_total`` 1 / sum(inv_sizes).

    ``grid_ptr`` (R + 1,) int64 is the layout's own device copy (GridLayout.grid_ptr) and
    the device arrays are computed from it on the device: no copy from the host, which
    behind queued work would wait for it (a copy from pageable memory). ``inv_total``, a
    kernel argument, is computed on the host from ``grid_ptr_host``, the same pointers."""

    def __init__(self, xp, grid_ptr_host, grid_ptr, fit_intercept):
        gp = np.asarray(grid_ptr_host, dtype=np.int64)
        sizes_host = np.diff(gp)
        inv = np.where(sizes_host > 0, 1.0 / np.maximum(sizes_host, 1), 0.0)
        self.ptr = grid_ptr
        sizes = grid_ptr[1:] - grid_ptr[:-1]
        self.inv_sizes = xp.where(sizes > 0, 1.0 / xp.maximum(sizes, 1), 0.0)
        # column j lies in grid g where ptr[g] <= j < ptr[g + 1]: g = #{h >= 1: ptr[h] <= j}
        self.grid_of_col = xp.ascontiguousarray(
            xp.searchsorted(grid_ptr[1:], xp.arange(int(gp[-1]), dtype=xp.int64), side="right"),
            dtype=xp.int64)
        self.fit_intercept = bool(fit_intercept)
        self.inv_total = 1.0 / float(inv.sum()) if inv.sum() > 0 else 0.0


def solve_ridge(xp, op, Y, sample_weight=None, alpha=1.0, fit_intercept=True, tol=1e-6,
                max_iter=None, preconditioner="jacobi", structured=False, verbose=0,
                host_lag=1, graph=False, shared_scale=False):
    """Block PCG for ridge on xp. ``op``: a GridLayout or MatrixOperator; Y (n, k) and
    sample_weight (n,) arrays of xp (validated). ``structured``: op is random binning
    training data (every row has one entry of the same value in every grid: a GridLayout
    of a fit), so the Jacobi step is projected off the grid directions.

    ``host_lag`` (internal, for benchmarks and tests): 1, the device decides which targets
    stop and the host reads that decision one iteration late (it never waits for the
    iteration it has just queued); 0, the host waits for every iteration and decides
    itself, as before. Both run the same kernels on the same masks: the same results bit
    for bit. In both the first iteration runs the first active mask as the device computed
    it (the host learns it, and ||b||, from its first read after queueing that iteration):
    the set-up waits for the device once, for the rescaling's scalars.

    ``shared_scale`` (classification): every target stops when ||r_k|| <= tol max_j ||b_j||
    and reports its residual on that scale, the CPU classifier's rule
    (rbcd.solvers.cg.stopping_scale); else ||r_k|| <= tol ||b_k||.

    ``graph`` (internal, for benchmarks and tests; host_lag=1, a GridLayout, verbose < 2):
    the iterations run in pairs, each pair one replay of a CUDA graph of its kernels (on
    cupy: the first pair runs as queued kernels, the second is captured, the rest replay
    it; numpy runs the pairs as they are). The host then queues one graph launch per two
    iterations instead of about a dozen kernels and library calls per iteration, and
    reads the active mask after each pair. The same kernels on the same buffers: the
    same results bit for bit.
    ``info["graph"]`` says whether a captured graph ran (a capture that fails, e.g. one
    that would allocate, falls back to the queued kernels).

    Returns ``(coef (k, D), intercept (k,), n_iter (k,), info)`` as host numpy arrays; info
    as rbcd.solvers.cg.solve_ridge_cg's (converged, residual, stop), and ``graph``.
    """
    if host_lag not in (0, 1):
        raise ValueError(f"host_lag must be 0 or 1, got {host_lag!r}")
    n, D = op.shape
    k = Y.shape[1]
    alpha = _check_alpha(alpha, k)
    # The set-up's one host read: max|Z| (a MatrixOperator's range check), max|Y| and
    # max|sample_weight| (the power-of-two rescaling of targets and weights), gathered into
    # one (3,) device array (0 where not needed) and copied in one go. Every later set-up
    # value stays on the device until the first iteration is queued.
    zeros = xp.zeros(())
    maxima = _ops.to_host(xp.stack([
        op.max_abs() if isinstance(op, MatrixOperator) else zeros,
        xp.abs(Y).max() if Y.size else zeros,
        zeros if sample_weight is None else xp.abs(sample_weight).max()]))
    z_max, y_max, s_max = (float(v) for v in maxima)
    if z_max > 2.0 ** SAFE_EXP:
        raise ValueError("device='cuda': features above 2**100 in magnitude are not "
                         "supported; rescale Z")
    cy = pow2_scale(np.array([y_max]))
    cs = pow2_scale(np.array([s_max]))
    # the problem on Y / cy and sample_weight / cs (alpha / cs), powers of two: exact; the
    # solution scaled back by cy at the end
    if cy != 1.0:
        Y = Y / cy
    if cs != 1.0:
        sample_weight = sample_weight / cs
        alpha = alpha / cs
    # the only copies from the host (the queue is empty after the read: they wait for
    # nothing); the projection's arrays are computed on the device
    alpha_v = _ops.on_device(xp, alpha, np.float64)
    weighted = sample_weight is not None
    s = xp.ones(n) if sample_weight is None else xp.asarray(sample_weight, dtype=xp.float64)
    S = s.sum()   # a device scalar: only device arithmetic uses it
    if fit_intercept:
        ybar = _ops.col_sums(xp, s[:, None] * Y) / S
        Yc = Y - ybar[None, :]
    else:
        ybar = xp.zeros(k)
        Yc = Y
    sY = s[:, None] * Yc
    if hasattr(op, "labels"):
        # One Z^T pass for the column statistics and b: Z^T [s, s Yc] (n, 1 + k). A
        # GridLayout's tdot sums every column of its argument on its own (rb_piece_sums:
        # one accumulator per column, the same lanes, additions and shuffles whatever the
        # other columns; rb_segment_sums: one sequential sum per column; their twins: numpy
        # reduceat along axis 0, column by column), so each column gets the bits of its own
        # product: colsum those of Z^T s, B those of Z^T (s Yc). Every stored value is
        # layout.value, so Z^2's column sums are colsum * value.
        ZtU = op.tdot(xp.concatenate([s[:, None], sY], axis=1))
    else:
        colsum, colsq = op.col_stats(s)
        B = op.tdot(sY)
    # The column statistics (zbar, the constant columns, Z^T b centred, the Jacobi
    # inverse): on a GridLayout one kernel over the columns (_ops.cg_setup), else the same
    # array code (_ops.cg_columns, its twin). alpha = 0: no preconditioner, so that CG
    # from zero reaches the minimum-norm solution (rbcd.solvers.cg.solve_ridge's rule).
    use_diag = preconditioner == "jacobi" and not np.any(np.asarray(alpha) == 0.0)
    tiny = n * np.finfo(np.float64).eps
    csY = _ops.col_sums(xp, sY) if fit_intercept else None
    if hasattr(op, "labels"):
        zbar, keep_v, B, minv = _ops.cg_setup(xp, ZtU, op.value, S, tiny, csY, alpha_v,
                                              use_diag)
    else:
        zbar, keep_v, B, minv = _ops.cg_columns(xp, colsum, colsq, B, S, tiny, csY, alpha_v,
                                                use_diag)
    proj = (GridProjection(xp, op.grid_ptr_host, op.grid_ptr, fit_intercept)
            if (use_diag and structured) else None)

    if max_iter is None:
        max_iter = default_max_iter(D)
    max_iter = int(max_iter)
    # the iteration's state, updated in place by the step kernels (_ops.cg_q, cg_step,
    # cg_dir, cg_p: four launches per 8 targets after the products)
    X = xp.zeros((D, k))
    Rr = xp.array(B, dtype=xp.float64, order="C")
    bnorm = xp.sqrt(_ops.col_sums(xp, B * B))      # ||b|| of each target, on the device
    # the scale each residual is held to (rbcd.solvers.cg.stopping_scale), on the device
    scale = xp.zeros(k) + bnorm.max() if shared_scale else bnorm
    thresh = tol * scale
    rz_out = xp.empty(k)
    nb = _ops.cg_blocks(D)
    part_pq, part_rr, part_rz = (xp.empty((nb, k)) for _ in range(3))
    keep_v = xp.ascontiguousarray(keep_v, dtype=xp.float64)
    zbar_v = None if zbar is None else xp.ascontiguousarray(zbar, dtype=xp.float64)
    minv_v = None if minv is None else xp.ascontiguousarray(minv, dtype=xp.float64)
    # The stopping state on the device (written by _ops.cg_p, block 0, after the
    # iteration's updates): masks[r] (k,) int32, the active mask: 1 for a target that the
    # next iteration updates; cg_step and cg_p read one row and cg_p writes the next
    # iteration's mask into the other (a kernel cannot clear the mask its other blocks
    # still read), so the rows swap each iteration. masks[0] starts as the first
    # iteration's mask, act0 = not ||b|| <= thresh (computed here, on the device). A
    # target stops (its mask entry goes to 0, for good) after the iteration whose residual
    # norm rn <= thresh or whose curvature check pq > 0 fails (breakdown): the iteration
    # that stops it still updates it, the next ones do not (cg_step and cg_p write nothing
    # of an inactive target's X, Rr, P, rz). state (4, k): rows 0 and 1 are the kernels'
    # summary (row 0 the residual norm of each target's last iteration, bnorm before any;
    # row 1 this iteration's pq > 0), row 2 the stopping scale, row 3 bnorm, so that one
    # copy of state gives the host the residual norms and the norms they are relative to.
    # counts (2, k) int32: the iterations each target ran, and 1 where it broke down.
    state = xp.empty((4, k))
    state[0] = bnorm
    state[2] = scale
    state[3] = bnorm
    summary = state[:2]
    counts = xp.zeros((2, k), dtype=xp.int32)
    masks = xp.zeros((2, k), dtype=xp.int32)
    masks[0] = ~(bnorm <= thresh)
    # the first direction: the preconditioned residual (Jacobi, projection, constant
    # columns) by the iteration's own step, _ops.cg_dir, and rz = r . M^-1 r
    Zr = Rr * minv_v if minv_v is not None else Rr.copy()
    _ops.cg_dir(xp, Zr, Rr, keep_v, proj,
                None if proj is None else _ops.segment_sums(xp, Zr, proj.ptr), part_rz)
    P = Zr.copy()
    rz = [xp.ascontiguousarray(_ops.col_sums(xp, part_rz), dtype=xp.float64), rz_out]

    # One iteration, into buffers made here once (on a GridLayout it allocates nothing,
    # so a CUDA graph can replay it with fixed addresses): step(act_in, act_out, rz_in,
    # rz_out), act_in and rz_in this iteration's mask and r . z, act_out and rz_out the
    # next's. The products first: T = S (Z P - 1 zbar^T P), Q = Z^T T and sumT = 1^T T
    # (the centred product before its zbar, alpha and constant-column terms, added by
    # _ops.cg_q); then the four step kernels. The dot products zbar . P and 1 . T are
    # per-block partial sums (_ops.col_parts) whose totals the next kernel sums: no
    # reduction of the array library (CuPy's allocate, and its reduction without them runs
    # one thread block per target), the same bits in either loop.
    T_buf = xp.empty((n, k))
    Q_buf = xp.empty((D, k))
    part_buf = xp.empty((op.piece_start.shape[0], k)) if hasattr(op, "tdot_into") else None
    part_c = None if zbar is None else xp.empty((_ops.cg_blocks(D), k))
    part_T = None if zbar is None else xp.empty((_ops.cg_blocks(n), k))
    gsum_buf = None if proj is None else xp.empty((proj.ptr.shape[0] - 1, k))
    placeholder = xp.empty(0, dtype=xp.int64)

    def step(act_in, act_out, rz_in, rz_out):
        if part_buf is not None:
            op.dot_into(P, T_buf)
        else:
            T_buf[...] = op.dot(P)
        if zbar is not None:
            _ops.col_parts(xp, P, zbar_v, part_c)
        if zbar is not None or weighted:
            _ops.center_rows(xp, T_buf, part_c, s if weighted else None)
        if part_buf is not None:
            op.tdot_into(T_buf, part_buf, Q_buf)
        else:
            Q_buf[...] = op.tdot(T_buf)
        if zbar is not None:
            _ops.col_parts(xp, T_buf, None, part_T)
        _ops.cg_q(xp, Q_buf, zbar_v, part_T, alpha_v, P, keep_v, part_pq)
        _ops.cg_step(xp, part_pq, rz_in, act_in, P, Q_buf, X, Rr, minv_v, Zr, part_rr,
                     summary)
        gsum = None if proj is None else _ops.segment_sums(xp, Zr, proj.ptr, out=gsum_buf)
        _ops.cg_dir(xp, Zr, Rr, keep_v, proj, gsum, part_rz, placeholder)
        _ops.cg_p(xp, part_rz, part_rr, rz_in, act_in, Zr, P, rz_out, summary, thresh,
                  act_out, counts)

    def iterate(act_in, act_out):
        """Queue one iteration: the targets of act_in step, act_out gets the next mask."""
        step(act_in, act_out, rz[0], rz[1])
        rz.reverse()

    def report(it, rn, act, scale_h):
        if verbose >= 2 and act.any():
            rel = rn[act] / np.where(scale_h[act] > 0, scale_h[act], 1.0)
            print(f"[RidgeCG cuda] iteration {it}: max relative residual {np.max(rel):.3e}")

    rnorm = None   # the host's residual norms (host_lag=0, from its first read of state)
    use_graph = bool(graph) and host_lag == 1 and verbose < 2 and part_buf is not None
    replayed = False
    if use_graph:
        # the device's decision as below, read once per pair of iterations: a pair runs
        # step(rows[0] -> rows[1], rz[0] -> rz[1]) then step(rows[1] -> rows[0], rz[1] ->
        # rz[0]), so after it the next mask is rows[0] and r . z is rz[0] again. The copy
        # of the mask after pair u is read while pair u + 1 runs; when it is all 0, pair
        # u + 1 changed nothing, and the loop stops. An odd last iteration (max_iter) runs
        # as ``iterate``.
        rows = [masks[0], masks[1]]
        reads = _ops.HostCopies(xp, 2)

        def pair():
            step(rows[0], rows[1], rz[0], rz[1])
            step(rows[1], rows[0], rz[1], rz[0])

        with _side_stream(xp):
            replay = None
            done = 0
            prev = 0                  # the slot of the copy read next (0: act0's)
            live = max_iter > 0
            if live:
                reads.put(0, rows[0])
            while live and done + 2 <= max_iter:
                if done == 2:         # kernels compiled and libraries set up by pair 1
                    replay = _capture(xp, pair)
                if replay is not None:
                    replay()
                    replayed = True
                else:
                    pair()
                done += 2
                reads.put(1 - prev, rows[0])
                live = bool((reads.get(prev)[0] != 0).any())
                prev = 1 - prev
            if live and done < max_iter and (reads.get(prev)[0] != 0).any():
                iterate(rows[0], rows[1])
            reads.wait()
        cnt = _ops.to_host(counts)
        n_iter = cnt[0].astype(np.int64)
        breakdown = cnt[1] != 0
    elif host_lag == 0:
        # the host's decision (the loop before the device kept the mask): wait for each
        # iteration's state, update the mask on the host, copy it to the device when a
        # target stops; the device's own mask (masks[1]) and counts are not read. The
        # first iteration runs the device's act0 (masks[0]); its read brings the scale and
        # bnorm (state rows 2, 3), from which the host computes the same act0 (the same IEEE
        # operations)
        # and starts its bookkeeping. With every target inactive from the start that
        # iteration changes nothing, and the loop stops after it.
        n_iter = np.zeros(k, dtype=np.int64)
        breakdown = np.zeros(k, dtype=bool)
        done = act_host = None
        act_d = masks[0]
        for it in range(1, max_iter + 1):
            if done is not None:
                act = ~done
                if not act.any():
                    break
                if not np.array_equal(act, act_host):
                    # copied to the device only when a target stops (a copy from pageable
                    # host memory waits for the queued work: once, not every iteration)
                    act_host = act.copy()
                    act_d = _ops.on_device(xp, act.astype(np.int32), np.int32)
            iterate(act_d, masks[1])
            host = _ops.to_host(state)
            if done is None:
                scale_h = np.array(host[2], dtype=np.float64)
                thresh_h = tol * scale_h
                act = act_host = ~(host[3] <= thresh_h)
                done = ~act
                rnorm = np.array(host[3], dtype=np.float64)
            rn, ok = host[0], host[1] > 0
            n_iter[act] = it
            rnorm[act] = rn[act]
            stop = (rn <= thresh_h) | ~ok
            done |= act & stop
            breakdown |= act & ~ok
            report(it, rn, act, scale_h)
    else:
        # the device's decision, read one iteration late: queue iteration it, then wait
        # for the (small, asynchronous) copy of the mask after iteration it - 1 (for it =
        # 1, act0, copied before iteration 1 was queued), so the device runs iteration it
        # while the host waits and queues iteration it + 1. When that mask is all 0,
        # iteration it ran with every target inactive: it changed nothing (its products
        # and sums are wasted; no X, Rr, P, rz or counts entry is written), and the loop
        # stops. Every target runs the iterations its mask says, at most max_iter (the
        # loop queues no more), and the counts, residual norms and breakdowns are the
        # device's: what the host's loop (host_lag=0) computes. With verbose >= 2 every
        # copy also brings state (the residual norms, row 0; the scale, row 2).
        rows = [masks[0], masks[1]]
        reads = _ops.HostCopies(xp, 2)
        extra = (state,) if verbose >= 2 else ()
        seen = [None]      # the mask of the iteration whose copy is read next

        def read(it):
            """Wait for the copy after iteration it (0: act0); True while some target is
            still active."""
            got = reads.get(it % 2)
            if it and verbose >= 2:
                report(it, got[1][0], seen[0], got[1][2])
            seen[0] = got[0] != 0
            return bool(seen[0].any())

        pending = 0        # the iteration whose copy is read next (0: act0's)
        if max_iter > 0:
            reads.put(0, rows[0], *extra)
        for it in range(1, max_iter + 1):
            iterate(rows[0], rows[1])
            reads.put(it % 2, rows[1], *extra)
            rows.reverse()
            if not read(pending):
                pending = 0
                break
            pending = it
        if pending and verbose >= 2:
            read(pending)
        reads.wait()   # no copy into the pinned buffers outlives them
        cnt = _ops.to_host(counts)
        n_iter = cnt[0].astype(np.int64)
        breakdown = cnt[1] != 0
    if rnorm is None:
        # one read of state for the scale (row 2) and the device's residual norms (row 0):
        # host_lag=1, or host_lag=0 where no iteration ran (row 0 is then bnorm); the
        # thresholds are the device's, tol * scale, by the same IEEE operation
        fin = _ops.to_host(state)
        scale_h = np.array(fin[2], dtype=np.float64)
        thresh_h = tol * scale_h
        rnorm = np.array(fin[0], dtype=np.float64)
    unconverged = ~(rnorm <= thresh_h)          # a NaN residual is not converged (the CPU's)
    relres = np.where(scale_h > 0, rnorm / np.where(scale_h > 0, scale_h, 1.0), 0.0)
    stop_reason = np.where(~unconverged, "tol", np.where(breakdown, "breakdown", "max_iter"))
    if np.any(unconverged):   # the CPU solver's warning, word for word
        _warn_unconverged(unconverged, relres, stop_reason, n_iter, tol, max_iter)
    coef = _ops.to_host(X.T)
    if zbar is not None:
        intercept = _ops.to_host(ybar) - coef @ _ops.to_host(zbar)
    else:
        intercept = np.zeros(k)
    coef = np.ascontiguousarray(coef)
    if cy != 1.0:
        coef, intercept = coef * cy, intercept * cy
    info = dict(converged=~unconverged, residual=relres, stop=stop_reason, graph=replayed)
    return coef, intercept, n_iter, info


class _side_stream:
    """``with _side_stream(xp):`` runs the block on a new non-blocking CUDA stream, which
    graph capture needs (the legacy default stream cannot be captured, and a stream tied
    to it would let its work break a capture); the new stream first waits for the work
    queued before the block, and the stream current before it waits for the block's work
    after. numpy (or an emulation): nothing."""

    def __init__(self, xp):
        cuda = None if _ops.is_numpy(xp) else getattr(xp, "cuda", None)
        self.cuda = cuda
        self.stream = None if cuda is None else cuda.Stream(non_blocking=True)

    def __enter__(self):
        if self.stream is not None:
            self.previous = self.cuda.get_current_stream()
            self.stream.wait_event(self.previous.record())
            self.stream.__enter__()
        return self

    def __exit__(self, *exc):
        if self.stream is not None:
            self.stream.__exit__(*exc)
            self.previous.wait_event(self.stream.record())
        return False


def _capture(xp, fn):
    """fn's device work recorded as a CUDA graph on the current (non-default) stream, and
    returned as a function that replays it there; None where that is not possible: numpy,
    a CuPy without graph capture, the default stream, or a capture that fails. While
    capturing, CuPy's allocator refuses every request: memory taken from the pool during
    a capture could go to other arrays afterwards while the graph still writes it, so a
    step that would allocate is not captured (its kernels then run as queued)."""
    if _ops.is_numpy(xp) or getattr(xp, "cuda", None) is None:   # (or an emulation)
        return None
    cupy = xp
    stream = cupy.cuda.get_current_stream()
    memory = getattr(cupy.cuda, "memory", None)
    get_allocator = (getattr(cupy.cuda, "get_allocator", None)
                     or getattr(memory, "get_allocator", None))
    set_allocator = (getattr(cupy.cuda, "set_allocator", None)
                     or getattr(memory, "set_allocator", None))
    if (stream.ptr in (0, 1) or get_allocator is None or set_allocator is None
            or not hasattr(stream, "begin_capture")):
        return None
    previous = get_allocator()

    def refuse(size):
        raise MemoryError(f"rbcd: no allocation ({size} bytes) while capturing a CUDA graph")

    mode = getattr(cupy.cuda.runtime, "streamCaptureModeRelaxed", None)
    graph = None
    set_allocator(refuse)
    try:
        if mode is None:
            stream.begin_capture()
        else:
            stream.begin_capture(mode)
        try:
            fn()
        finally:
            graph = stream.end_capture()
    except Exception:  # any failure: no graph, the queued kernels run instead
        graph = None
    finally:
        set_allocator(previous)
    if graph is None:
        return None
    return lambda: graph.launch(stream)
