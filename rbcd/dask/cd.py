"""Grid-block coordinate descent over row partitions (issue 13, item 3).

The objective, steps, intercept step and stopping rules are those of
:class:`rbcd.CDRegressor` / :class:`rbcd.CDClassifier` (docs/internals.md, "Solver
objective and steps" and "Convergence"). The mode is the local ``parallel="grid"``: exact
block coordinate descent over grids. Inside one grid every training row lies in exactly one
bin, so the objective restricted to a grid's columns separates by bin and all its bins take
their prox-Newton step (paper eq. 24-27) at once from the same predictions. Block CD with
exact per-block minimisation of this separable surrogate (the curvature bound beta makes it
a majorizer) decreases the objective at every step, so it converges as the local grid mode
does; no step-size damping is needed, unlike updating all grids at once (a 1/R step, which
stalls).

Communication: each worker holds, in one Dask actor, its partitions' grid labels (the bin
of each row in each grid, 2 bytes per entry), targets, weights and state (p, loss'). The
grid loop (``solve_problem``: w, b, the grid order, the steps, the stopping rule) runs on
the first actor's worker (``CDWorker.solve``, one call from the driver per problem), which
calls its own partitions directly and the other actors by message. Visiting grid r costs
one round trip to each other worker, pipelined: one call applies the previous grid's update
to the state and returns, per partition, the sums ``sum_{i in bin j} s_i loss'(p_i, y_i)``
for grid r (``n_bins_r`` floats), in one pass over the rows (``rbcd.dask._kernels
.grid_step``). The coordinator adds them in partition order and computes the new weights of
grid r. An epoch is R round trips, one for the intercept step and one for the convergence
check (which also returns the first grid's sums of the next epoch; the rule is
``rbcd.solvers._stopping``, shared with the local solver). Actors were chosen over plain
tasks because a task round trip costs several times an actor call, and the loop runs on a
worker because the driver's share of each call was the largest cost of a step
(docs/dask.md gives the measurements).

Faults: actors are not recomputed by dask. If a worker holding one is lost, the fit raises
a RuntimeError saying so (no model is set); it never continues with partial state.
"""
import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from distributed import wait

from .._random import solver_seed
from .._threads import effective_n_threads, serial_dot
from .._validation import fit_context
from ..solvers import _sparse, _stopping
from ..solvers import cd as _local
from ..solvers.cd import DECISION_EPOCHS, LOSSES
from . import _kernels
from ._data import (as_rows, check_min_rows, check_n_jobs, client_or_error, float_dtype,
                    ordered_sum, worker_threads)
from ._blocks import (build_blocks, class_setup, decision_dask, predict_from_scores,
                      proba_from_scores, regression_targets)
from .._warnings import warn as warn_user

__all__ = ["CDRegressor", "CDClassifier"]

BETA = {"squared": 1.0, "logistic": 0.25, "squared_hinge": 2.0}
LOSS_CODES = {name: int(code) for name, code in LOSSES.items()}   # rbcd.solvers._cd.Loss
REGRESSION_LOSSES = ("squared",)
CLASSIFICATION_LOSSES = ("logistic", "squared_hinge")
SELECTIONS = ("random", "permutation", "cyclic")


# ---------------------------------------------------------------------------- losses
loss_deriv = _stopping.loss_deriv
loss_value = _stopping.loss_value


_NO_LABELS = np.zeros(0, dtype=np.uint16)
_NONE = np.zeros(0)


# ---------------------------------------------------------------------------- worker side
class _Part:
    """One partition inside a worker's actor: labels (R arrays of n_b), Y, s (None: unit
    weights) and the state of the current problem: ``u`` (p - y for the squared loss, else
    p) and ``dv`` = loss'(p, y) (``u`` itself for the squared loss), as the local grid step
    keeps them (rbcd.solvers._cd)."""

    def __init__(self, block, grid_ptr):
        R = grid_ptr.shape[0] - 1
        n = block.n
        if block.grid is not None and np.array_equal(block.grid.grid_ptr, grid_ptr):
            self.labels = block.grid.labels      # built once with the block (_blocks.Block)
        else:
            self.labels = self._labels_of(block.Z, grid_ptr, R, n)
        self.width = np.diff(grid_ptr)
        self.Y = block.Y
        self.s = block.s
        self.n = n
        self.y = None
        self.u = None
        self.dv = None
        self.ex = None
        self.dec = None   # the training decisions p > 0 at the last check (classification)

    @staticmethod
    def _labels_of(Z, grid_ptr, R, n):
        if Z is None or not sp.issparse(Z) or not np.array_equal(Z.indptr, R * np.arange(n + 1)):
            raise ValueError(
                "coordinate descent on rbcd.dask needs the training Z of an exact-mode "
                "RandomBinning (exactly one entry per row in every grid)")
        data = Z.data
        if data.size and not np.all(data == data[0]):
            raise ValueError("Z's stored values are not all equal: not a random binning matrix")
        idx = Z.indices.reshape(n, R)
        labels = []
        for r in range(R):
            width = int(grid_ptr[r + 1] - grid_ptr[r])
            lab = idx[:, r].astype(np.int64) - grid_ptr[r]
            if n and (lab.min() < 0 or lab.max() >= width):
                raise ValueError(f"row entries of grid {r} fall outside its columns: Z does not "
                                 "match the binning's grid structure")
            labels.append(lab.astype(np.uint16 if width < 65536 else np.int32))
        return labels

    def weighted(self, v):
        return v if self.s is None else self.s * v

    def wsum(self, v):
        return float(v.sum()) if self.s is None else serial_dot(self.s, v)

    def p(self, loss):
        """The predictions p."""
        return self.u + self.y if loss == "squared" else self.u

    def reset(self, loss, p):
        """Start the problem's state from the predictions p. The logistic loss with every
        y = +-1 also keeps exp(y p) (rbcd.dask._kernels.grid_step moves it by factors)."""
        if loss == "squared":
            self.u = p - self.y
            self.dv = self.u
            self.ex = None
            return
        self.u = np.ascontiguousarray(p, dtype=np.float64)
        self.ex = (np.empty_like(self.u) if loss == "logistic" and np.all(np.abs(self.y) == 1.0)
                   else None)
        self.refresh(loss)

    def refresh(self, loss):
        """loss' (and exp(y p)) from p afresh; nothing for the squared loss."""
        if loss == "squared":
            return
        if self.ex is None:
            self.dv = np.ascontiguousarray(loss_deriv(loss, self.u, self.y))
            return
        with np.errstate(over="ignore"):
            np.exp(self.y * self.u, out=self.ex)
        self.dv = np.ascontiguousarray(-self.y / (1.0 + self.ex))

    def shift(self, loss, b):
        """p += b (the intercept's move): u, and loss' everywhere for the other losses."""
        self.u += b
        self.refresh(loss)

    def step(self, loss, grid, step, want, n_threads):
        """The compiled grid step (rbcd.dask._kernels.grid_step): u += step[label of grid
        ``grid``] (grid < 0: no move), then, if ``want`` >= 0, the sums of s loss' over the
        bins of grid ``want`` (returned), in one pass over the rows."""
        nb = int(self.width[want]) if want >= 0 else 0
        out = np.empty(nb)
        part = np.empty((_kernels.block_rows(self.n, nb), nb))
        _kernels.grid_step(self.labels[grid] if grid >= 0 else _NO_LABELS,
                           step if grid >= 0 else _NONE,
                           self.labels[want] if want >= 0 else _NO_LABELS,
                           self.u, self.dv, _NONE if self.ex is None else self.ex, self.y,
                           _NONE if self.s is None else self.s,
                           LOSS_CODES[loss], part, out, n_threads)
        return out

    def all_sums(self, v, n_threads):
        """The sums of v over the bins of every grid (Z^T v with unit values):
        rbcd.solvers._sparse.labels_tmatmat on the labels (rows in order)."""
        gp = np.concatenate([[0], np.cumsum(self.width)]).astype(np.int64)
        out = np.empty((int(gp[-1]), 1))
        if self.n == 0 or not self.labels:
            out[:] = 0.0
            return out[:, 0]
        ptrs = np.array([a.ctypes.data for a in self.labels], dtype=np.uintp)
        wide = np.array([a.dtype == np.int32 for a in self.labels], dtype=np.uint8)
        v = np.ascontiguousarray(v, dtype=np.float64).reshape(-1, 1)
        _sparse.labels_tmatmat(ptrs, wide, gp, 1.0, v, out, n_threads)
        return out[:, 0]

    def predictions(self, w, b, zval, grid_ptr, n_threads):
        """Z w + b of the partition's rows (rbcd.solvers._sparse.labels_matmat)."""
        out = np.empty((self.n, 1))
        if self.n:
            ptrs = np.array([a.ctypes.data for a in self.labels], dtype=np.uintp)
            wide = np.array([a.dtype == np.int32 for a in self.labels], dtype=np.uint8)
            _sparse.labels_matmat(ptrs, wide, grid_ptr, zval,
                                  np.ascontiguousarray(w, dtype=np.float64).reshape(-1, 1),
                                  out, n_threads)
        return out[:, 0] + b


def _in_partition_order(results, n_parts):
    """The per-partition values of the actors' ``(index, values)`` answers, in partition
    order (not in the order the actors answered)."""
    out = [None] * n_parts
    for index, values in results:
        for i, v in zip(index, values):
            out[i] = v
    return out


class _Group:
    """All partitions' actors as seen by the coordinating actor (the one that runs
    ``CDWorker.solve``): its own partitions are called directly (no message), the other
    workers' actors through their handles, all at once; answers in partition order."""

    def __init__(self, local, peers, n_parts):
        self.local = local
        self.peers = list(peers)
        self.n_parts = n_parts
        # messages to the peers and the numpy bytes they carried (docs/dask.md cost model)
        self.stats = {"round_trips": 0, "sent": 0, "received": 0}

    def _count(self, args, results):
        if self.peers:
            self.stats["round_trips"] += 1
            self.stats["sent"] += len(self.peers) * sum(a.nbytes for a in args
                                                         if isinstance(a, np.ndarray))
            self.stats["received"] += sum(_payload(r) for r in results)

    def call(self, method, *args):
        futs = [getattr(a, method)(*args) for a in self.peers]   # remote calls first
        results = [getattr(self.local, method)(*args)]           # then ours, meanwhile
        remote = [f.result() for f in futs]
        self._count(args, remote)
        return _in_partition_order(results + remote, self.n_parts)

    def call_all(self, method, *args):
        futs = [getattr(a, method)(*args) for a in self.peers]
        getattr(self.local, method)(*args)
        for f in futs:
            f.result()
        self._count(args, [])


def _payload(obj):
    """Bytes of the numpy arrays and floats in a (nested) answer."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, (list, tuple)):
        return sum(_payload(v) for v in obj)
    return 8 if isinstance(obj, float) else 0


class CDWorker:
    """The Dask actor of one worker: its partitions (in partition order) and their state.
    Its kernels run on ``n_threads`` threads (the worker's, or n_jobs: docs/dask.md). One
    of the fit's actors also coordinates (``solve``)."""

    def __init__(self, blocks, index, grid_ptr, zval, n_jobs=None):
        self.grid_ptr = np.asarray(grid_ptr, dtype=np.int64)
        self.parts = [_Part(b, self.grid_ptr) for b in blocks]
        self.index = list(index)
        self.zval = float(zval)
        self.loss = None
        self.n_threads = effective_n_threads(n_jobs) if n_jobs is not None else worker_threads()

    def threads(self):
        """The threads of this actor's kernels."""
        return self.n_threads

    def solve(self, peers, n_parts, k, grid_ptr, zval, kwargs):
        """Run ``solve_problem`` for problem k here, with the other workers' actors
        ``peers``: every grid step is then one message to each peer (none for this worker's
        own partitions) instead of one from the driver to every worker. Returns its result
        dict, with the verbose lines in ``"log"`` (printed by the driver) and the messages
        to the peers in ``"messages"`` (round trips, numpy bytes sent and received)."""
        log = []
        group = _Group(self, peers, n_parts)
        out = solve_problem(group, k, grid_ptr, zval, log=log.append, **kwargs)
        out["log"] = log
        out["messages"] = group.stats
        return out

    def sums(self, k, loss):
        """Select problem k (p = 0); per partition (sum s, sum s y, sum s [y > 0],
        sum s [y < 0], weighted bin counts sum_{i in j} s_i, rows)."""
        self.loss = loss
        out = []
        for q in self.parts:
            q.y = np.ascontiguousarray(q.Y[:, k])
            q.reset(loss, np.zeros(q.n))
            q.dec = None
            s = np.ones(q.n) if q.s is None else q.s
            out.append((float(s.sum()), serial_dot(s, q.y), float(s[q.y > 0].sum()),
                        float(s[q.y < 0].sum()), q.all_sums(s, self.n_threads), q.n))
        return self.index, out

    def scale(self, b0, use_gap):
        """Per partition: sum s 0.5 (y - b0)^2 (gap), or (the sums over the bins of s
        loss'(b0, y), sum s |loss'(b0, y)|) (subgradient)."""
        out = []
        for q in self.parts:
            if use_gap:
                out.append(q.wsum(0.5 * (q.y - b0) ** 2))
            else:
                d = q.weighted(loss_deriv(self.loss, np.full(q.n, b0), q.y))
                out.append((q.all_sums(d, self.n_threads), float(np.abs(d).sum())))
        return self.index, out

    def start(self, w, b):
        """p = Z w + b (warm start)."""
        for q in self.parts:
            q.reset(self.loss, q.predictions(w, float(b), self.zval, self.grid_ptr,
                                             self.n_threads))

    def advance(self, grid, delta, shift, want_grid, want):
        """Apply grid ``grid``'s weight change ``delta`` (and the intercept change ``shift``)
        to p, then return per partition what ``want`` asks: "grid" -> the sums of s loss'
        over the bins of ``want_grid``; "intercept" -> sum s loss'; "check" -> (the sums of
        every column, sum s loss, sum s (y - p)^2, sum s (y - p) y, sum s loss', and the
        sums of ``want_grid`` if >= 0, and the number of rows whose decision p > 0 changed
        since the last check: the decisions rule of the classification losses). The
        decisions of the start point are taken at the problem's first call, after the
        pending intercept and before any grid moves."""
        out = []
        step = None if grid < 0 else np.ascontiguousarray(self.zval * delta)
        T = self.n_threads
        classify = self.loss != "squared"
        for q in self.parts:
            if shift != 0.0:
                q.shift(self.loss, shift)
            if classify and q.dec is None:
                q.dec = q.p(self.loss) > 0
            if want == "grid":
                # the move of the pending grid and the sums of the next: one pass
                out.append(q.step(self.loss, grid, step, want_grid, T))
                continue
            if step is not None:
                q.step(self.loss, grid, step, -1, T)
            if want == "check" and shift == 0.0:
                # once per epoch the logistic state from p afresh (the grid steps moved it by
                # factors; their rounding never accumulates over more than an epoch)
                q.refresh(self.loss)
            d = q.weighted(q.dv)
            if want == "intercept":
                out.append(float(d.sum()))
            else:
                p = q.p(self.loss)
                r = q.y - p
                changed = 0
                if classify:
                    now = p > 0
                    changed = int(np.count_nonzero(now != q.dec))
                    q.dec = now
                out.append((q.all_sums(d, T), q.wsum(loss_value(self.loss, p, q.y)),
                            q.wsum(r * r), q.wsum(r * q.y), float(d.sum()),
                            q.step(self.loss, -1, None, want_grid, T) if want_grid >= 0
                            else None, changed))
        return self.index, out


# ---------------------------------------------------------------------------- driver side
def _require_columns(columns):
    if columns is None:
        raise ValueError("rbcd.dask coordinate descent needs the grid structure: pass "
                         "columns= (from rbcd.dask.RandomBinning().fit_transform(X, "
                         "return_columns=True), or the fitted exact-mode RandomBinning that "
                         "produced Z)")


class _Actors:
    """The fit's actors, one per worker holding partitions, and ordered round trips."""

    def __init__(self, client, cluster, grid_ptr, zval, n_jobs=None):
        futures = cluster.blocks
        wait(futures)
        for f in futures:
            if f.status == "error":
                f.result()   # raises the partition's error (bad y, bad weights)
        who = client.who_has(futures)
        by_worker = {}
        for i, f in enumerate(futures):
            addrs = sorted(who.get(f.key, ()))
            if not addrs:
                raise RuntimeError("a partition of Z is not held by any worker")
            by_worker.setdefault(addrs[0], []).append(i)
        self.n_parts = len(futures)
        self.actors = []
        for addr, idx in by_worker.items():
            fut = client.submit(CDWorker, [futures[i] for i in idx], idx, grid_ptr, zval, n_jobs,
                                workers=[addr], allow_other_workers=False, actor=True,
                                pure=False)
            self.actors.append(fut)
        self.actors = [f.result() for f in self.actors]

    def _lost(self, exc):
        return RuntimeError(
            "rbcd.dask coordinate descent: a worker holding the fit's state was lost or "
            f"failed during the fit ({type(exc).__name__}: {exc}); the fit was abandoned "
            "and no model was set. Refit (the partitions are recomputed by dask).")

    def solve(self, k, grid_ptr, zval, **kwargs):
        """solve_problem for problem k, coordinated by the first actor (its worker holds the
        weights and talks to the other actors; the driver waits for the result)."""
        try:
            return self.actors[0].solve(self.actors[1:], self.n_parts, k, grid_ptr, zval,
                                        kwargs).result()
        except ValueError:
            raise
        except Exception as exc:   # a lost worker, a closed connection
            raise self._lost(exc) from exc


def _soft(v, t):
    return np.sign(v) * np.maximum(np.abs(v) - t, 0.0)


def solve_problem(act, k, grid_ptr, zval, *, loss, alpha, l1_ratio, fit_intercept, max_epochs,
                  tol, selection, seed, w_init=None, b_init=0.0, verbose=0, label="",
                  log=print, decision_epochs=None):
    """Grid-block CD on problem k (column k of the partitions' targets), talking to the
    partitions through ``act`` (``call(method, *args)`` -> per-partition answers in
    partition order; ``call_all``). Progress lines (verbose) go to ``log``. Returns dict(w,
    b, n_iter, history, gap, converged, use_gap, stop, counts, S): ``counts``, the weighted
    row count of every column, only for a problem that did not converge (the advice of
    the ConvergenceWarning, :func:`convergence_message`). ``decision_epochs`` (classification
    losses, tol > 0): also converged once that many epochs in a row changed no training
    decision, the local solver's rule (rbcd.solvers.cd, docs/internals.md "Convergence")."""
    R = grid_ptr.shape[0] - 1
    D = int(grid_ptr[-1])
    beta = BETA[loss]
    lam1 = alpha * l1_ratio
    lam2 = alpha * (1.0 - l1_ratio)
    sums = act.call("sums", k, loss)
    S = float(sum(x[0] for x in sums))
    Sy = float(sum(x[1] for x in sums))
    Spos = float(sum(x[2] for x in sums))
    Sneg = float(sum(x[3] for x in sums))
    N = sum(x[5] for x in sums)
    if not S > 0:
        raise ValueError("sample_weight must have a positive sum (the weights are all zero)")
    counts = ordered_sum([x[4] for x in sums])   # sum of s over each column's rows
    h = zval * zval * counts / S
    M = beta * h + lam2
    invM = np.where(M > 0, 1.0 / np.where(M > 0, M, 1.0), 0.0)

    # the stopping rule of the local solver (rbcd.solvers._stopping), from summed sums
    use_gap = _stopping.uses_gap(loss, l1_ratio, alpha)
    b0 = _stopping.optimal_intercept(loss, S, Sy, Spos, Sneg) if fit_intercept else 0.0
    sc = act.call("scale", b0, use_gap)
    if use_gap:
        scale = _stopping.stopping_scale(True, tol, float(sum(sc)) / S, None, N, 1.0, 0.0, S)
    else:
        G0 = float(np.max(np.abs(zval * ordered_sum([x[0] for x in sc]) / S))) if D else 0.0
        scale = _stopping.stopping_scale(False, tol, None, G0, N, max(1.0, zval),
                                         float(sum(x[1] for x in sc)), S)

    w = np.zeros(D)
    b = 0.0
    history = []
    if w_init is not None:
        w = np.array(w_init, dtype=np.float64)
        b = float(b_init) if fit_intercept else 0.0
        act.call_all("start", w, b)
    elif fit_intercept:
        b = b0  # as the local solver: a cold start begins at the w = 0 model's intercept
    if scale == 0.0:
        return dict(w=w, b=b, n_iter=0, history=history, gap=0.0, converged=True,
                    use_gap=use_gap, stop="tol", counts=None, S=S)

    rng = np.random.default_rng(seed & ((1 << 64) - 1))

    def order():
        if selection == "random":
            return rng.integers(0, R, size=R)
        if selection == "permutation":
            return rng.permutation(R)
        return np.arange(R)

    # pending update to apply on the workers with the next call
    grid, delta, shift = -1, None, (b if (w_init is None and fit_intercept) else 0.0)
    value = np.inf
    converged = False
    n_iter = 0
    nxt = order()
    first = None   # sums of the epoch's first grid, returned by the previous check
    decide = decision_epochs is not None and loss != "squared" and tol > 0
    steady = 0     # epochs in a row that changed no training decision
    for epoch in range(max_epochs):
        seq = nxt
        for t, r in enumerate(seq):
            if t == 0 and first is not None:
                G = first
            else:
                G = ordered_sum(act.call("advance", grid, delta, shift, int(r), "grid"))
                shift = 0.0
            lo, hi = grid_ptr[r], grid_ptr[r + 1]
            g = zval * G / S + lam2 * w[lo:hi]
            wn = np.where(M[lo:hi] > 0, _soft(w[lo:hi] - g * invM[lo:hi], lam1 * invM[lo:hi]), 0.0)
            grid, delta = int(r), wn - w[lo:hi]
            w[lo:hi] = wn
        if fit_intercept:
            gb = float(sum(act.call("advance", grid, delta, shift, -1, "intercept"))) / S
            grid, delta = -1, None
            shift = -gb / beta
            b += shift
        n_iter = epoch + 1
        nxt = order()
        last = epoch == max_epochs - 1
        parts = act.call("advance", grid, delta, shift, -1 if last else int(nxt[0]), "check")
        grid, delta, shift = -1, None, 0.0
        gl = zval * ordered_sum([x[0] for x in parts]) / S
        loss_sum = float(sum(x[1] for x in parts)) / S
        pen = alpha * (l1_ratio * np.abs(w).sum()
                       + 0.5 * (1.0 - l1_ratio) * serial_dot(w, w))
        history.append(loss_sum + pen)
        first = None if last else ordered_sum([x[5] for x in parts])
        steady = steady + 1 if sum(x[6] for x in parts) == 0 else 0
        settled = decide and steady >= decision_epochs
        if use_gap:
            dn = float(np.max(np.abs(-gl - lam2 * w))) if D else 0.0
            raw = _stopping.gap_from_sums(dn, float(sum(x[2] for x in parts)) / S,
                                          float(sum(x[3] for x in parts)) / S,
                                          float(np.abs(w).sum()), serial_dot(w, w), lam1, lam2)
        else:
            raw = _stopping.max_subgradient(
                w, gl + lam2 * w, lam1,
                float(sum(x[4] for x in parts)) / S if fit_intercept else None)
        value = raw / scale
        if verbose:
            log(f"[rbcd.dask CD{label}] epoch {n_iter}: objective {history[-1]:.10g}, "
                f"relative {'gap' if use_gap else 'subgradient'} {value:.3e} (tol {tol:.1e})")
        if raw <= tol * scale or settled:
            converged = True
            break
    stop = "max_epochs" if not converged else "tol" if raw <= tol * scale else "decisions"
    # the weighted column counts go back only for the ConvergenceWarning's advice
    return dict(w=w, b=b, n_iter=n_iter, history=history, gap=float(value), converged=converged,
                use_gap=use_gap, stop=stop, counts=None if converged else counts, S=S)


# ---------------------------------------------------------------------------- estimators
def _check_real(value, name, low=None, high=None):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")
    return float(value)


class _BinColumns:
    """What the local solver's advice (rbcd.solvers.cd._slow_cause) reads of its columns,
    for random binning columns known by their weighted row counts: every stored value
    equal (``data`` None), column sums ``zval`` x counts."""

    data = None

    def __init__(self, counts, zval):
        self.counts = np.asarray(counts, dtype=np.float64)
        self.n_cols = self.counts.shape[0]
        self.zval = float(zval)

    def column_sums(self, s, n_threads):
        return self.zval * self.counts


#: the weights as _slow_cause is told of them: given (its column sums are _BinColumns')
_WEIGHTED = np.ones(0)


def convergence_message(results, params, zval):
    """The local CD solver's ConvergenceWarning for the problems of ``results`` that did
    not converge (one message for all of them: "for 3 of 3 problems ... (problem 2, the
    worst)", rbcd.solvers.cd._CDBase._solve_all), with its advice (``_slow_cause``, from
    the columns' weighted counts: a bin that holds nearly every row); None if all did."""
    failed = [k for k, r in enumerate(results) if not r["converged"]]
    if not failed:
        return None

    def advice(worst):
        r = results[worst]
        S = float(r["S"])
        h = zval * zval * r["counts"] / S
        return _local._slow_cause(_BinColumns(r["counts"], zval), _WEIGHTED, S, h, 1)

    return _local.not_converged_message([r["gap"] for r in results], failed, params["loss"],
                                        params, advice)


class _CDBase(BaseEstimator):
    _losses = REGRESSION_LOSSES + CLASSIFICATION_LOSSES

    def _params(self):
        if not (isinstance(self.loss, str) and self.loss in self._losses):
            raise ValueError(f"loss must be one of {list(self._losses)!r}, got {self.loss!r}")
        if not (isinstance(self.selection, str) and self.selection in SELECTIONS):
            raise ValueError(f"selection must be one of {list(SELECTIONS)!r}, got {self.selection!r}")
        if not (self.parallel is None or self.parallel in ("auto", "grid")):
            raise ValueError(
                f"rbcd.dask coordinate descent is the grid-block mode: parallel must be 'auto' "
                f"or 'grid' (None accepted, the same), got {self.parallel!r}")
        if isinstance(self.max_epochs, (bool, np.bool_)) or not isinstance(self.max_epochs, numbers.Integral) \
                or self.max_epochs < 1:
            raise ValueError(f"max_epochs must be an integer >= 1, got {self.max_epochs!r}")
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValueError(f"fit_intercept must be a bool, got {self.fit_intercept!r}")
        check_n_jobs(self.n_jobs)
        if isinstance(self.alpha, str):
            # alpha="auto" (the local solver's held-out path over every row) is chosen at
            # the model level on rbcd.dask, as for RidgeCG (cg.check_distributed_ridge)
            raise ValueError(
                f"rbcd.dask.{type(self).__name__} needs a number for alpha, got "
                f"{self.alpha!r}: alpha='auto' is chosen by rbcd.dask.RBRegressor / "
                f"RBClassifier (solver='cd'), or by rbcd.{type(self).__name__} on one machine")
        return dict(loss=self.loss, alpha=_check_real(self.alpha, "alpha", 0.0),
                    l1_ratio=_check_real(self.l1_ratio, "l1_ratio", 0.0, 1.0),
                    fit_intercept=bool(self.fit_intercept), max_epochs=int(self.max_epochs),
                    tol=_check_real(self.tol, "tol", 0.0), selection=self.selection)

    def _solve_all(self, client, cluster, D, n_problems, params, start=None):
        """Solve every problem; ``start`` (W (n_problems, D), B (n_problems,)): the start of
        each problem, before a warm start (the models' alpha="auto": the local held-out
        path's solution at the chosen alpha, where the local final fit starts)."""
        grid_ptr = cluster.grid_ptr
        zval = float(1.0 / np.sqrt(np.float64(grid_ptr.shape[0] - 1)))
        act = _Actors(client, cluster, grid_ptr, zval, self.n_jobs)
        warm = False
        if start is not None:
            W0 = np.asarray(start[0], dtype=np.float64)
            B0 = np.asarray(start[1], dtype=np.float64)
            if W0.size == n_problems * D and B0.size == n_problems:
                W0, B0, warm = W0.reshape(n_problems, D), B0.reshape(n_problems), True
        if not warm and self.warm_start and hasattr(self, "coef_"):
            W0 = np.asarray(self.coef_, dtype=np.float64)
            B0 = np.asarray(self.intercept_, dtype=np.float64)
            if W0.size == n_problems * D and B0.size == n_problems:
                W0, B0, warm = W0.reshape(n_problems, D), B0.reshape(n_problems), True
        seed = solver_seed(self.random_state)
        results = []
        for k in range(n_problems):
            label = f" (problem {k})" if n_problems > 1 else ""
            r = act.solve(k, grid_ptr, zval, seed=seed + k, verbose=self.verbose,
                          w_init=W0[k] if warm else None, b_init=float(B0[k]) if warm else 0.0,
                          label=label, **params)
            for line in r.pop("log"):
                print(line)
            r.pop("messages")
            results.append(r)
        del act
        message = convergence_message(results, params, zval)
        if message is not None:   # one warning for the fit, as the local solver's
            warn_user(message, ConvergenceWarning)
        self.parallel_ = "grid"
        W = np.vstack([r["w"] for r in results])
        B = np.array([r["b"] for r in results])
        if n_problems == 1:
            r = results[0]
            self.n_iter_, self.objective_history_, self.dual_gap_ = int(r["n_iter"]), list(r["history"]), r["gap"]
            self.stop_ = r["stop"]
        else:
            self.n_iter_ = np.array([r["n_iter"] for r in results])
            self.objective_history_ = [list(r["history"]) for r in results]
            self.dual_gap_ = np.array([r["gap"] for r in results])
            self.stop_ = np.array([r["stop"] for r in results])
        self.alpha_ = float(self.alpha)     # the penalty used (a number on rbcd.dask)
        self.n_features_in_ = D
        return W, B

    def _decision(self, X):
        check_is_fitted(self, "coef_")
        client = client_or_error()
        X = as_rows(X, "X", client)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is "
                             f"expecting {self.n_features_in_} features as input.")
        return decision_dask(X, self.coef_, self.intercept_)


class CDRegressor(RegressorMixin, _CDBase):
    """Least squares with an l1 / l2 / elastic-net penalty by grid-block CD on row-partitioned
    random binning features (dask). Same parameters and objective as :class:`rbcd.CDRegressor`;
    ``parallel`` is the grid mode. ``fit(Z, y, sample_weight=None, columns=...)``: ``columns``
    (the fitted exact-mode RandomBinning of Z) is required. The parameters are checked by the
    local solver's constraints; ``coef_``, ``intercept_`` and the predictions are in Z's
    float dtype, and a fit that does not converge gives one ConvergenceWarning, as locally.
    """

    _losses = REGRESSION_LOSSES
    # the local solver's constraints: a bad value is an InvalidParameterError naming it
    # (what only the local solver takes, parallel="hogwild" and alpha="auto", is refused
    # by name in fit)
    _parameter_constraints = _local.CDRegressor._parameter_constraints

    def __init__(self, loss="squared", alpha=1e-4, l1_ratio=1.0, fit_intercept=True,
                 max_epochs=1000, tol=1e-4, selection="random", parallel="auto", n_jobs=None,
                 warm_start=False, random_state=None, verbose=0):
        self.loss = loss
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.max_epochs = max_epochs
        self.tol = tol
        self.selection = selection
        self.parallel = parallel
        self.n_jobs = n_jobs
        self.warm_start = warm_start
        self.random_state = random_state
        self.verbose = verbose

    @fit_context
    def fit(self, X, y, sample_weight=None, columns=None):
        return self._fit(X, y, sample_weight, columns)

    def _fit(self, X, y, sample_weight=None, columns=None, start=None):
        """fit, with the start of rbcd.dask.RBRegressor's alpha="auto" (_CDBase._solve_all)."""
        params = self._params()
        client = client_or_error()
        X = as_rows(X, "X", client)
        check_min_rows(X, type(self).__name__)
        if y is None:
            raise ValueError("CDRegressor requires y to be passed, but the target y is None")
        _require_columns(columns)
        cluster, N, D, Xd = build_blocks(client, X, y, sample_weight, regression_targets,
                                         columns, self.n_jobs)
        yd = as_rows(y, "y", client, ndim=(1, 2))
        k = 1 if yd.ndim == 1 else int(yd.shape[1])
        W, B = self._solve_all(client, cluster, D, k, params, start)
        out = float_dtype(Xd.dtype)    # the local rule: Z's float dtype
        W, B = W.astype(out, copy=False), B.astype(out, copy=False)
        if yd.ndim == 1:
            self.coef_, self.intercept_ = W[0], float(B[0])
        else:
            self.coef_, self.intercept_ = W, B
        return self

    def predict(self, X):
        return self._decision(X)


class CDClassifier(ClassifierMixin, _CDBase):
    """Logistic / squared-hinge classification by grid-block CD on row-partitioned random
    binning features (dask); one-vs-rest for more than two classes. Same parameters as
    :class:`rbcd.CDClassifier`; ``columns=`` is required in ``fit``. ``decision_epochs``
    (default 10, as on one machine): with tol > 0 a problem also stops once that many
    epochs in a row changed no training decision (the sign of z . w + b); None: the
    subgradient test alone. Parameters, dtypes and the ConvergenceWarning as CDRegressor's."""

    _losses = CLASSIFICATION_LOSSES
    _parameter_constraints = _local.CDClassifier._parameter_constraints   # as CDRegressor's

    def __init__(self, loss="logistic", alpha=1e-4, l1_ratio=1.0, fit_intercept=True,
                 max_epochs=1000, tol=1e-4, selection="random", parallel="auto", n_jobs=None,
                 warm_start=False, random_state=None, verbose=0, class_weight=None,
                 decision_epochs=DECISION_EPOCHS):
        self.decision_epochs = decision_epochs
        self.loss = loss
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.max_epochs = max_epochs
        self.tol = tol
        self.selection = selection
        self.parallel = parallel
        self.n_jobs = n_jobs
        self.warm_start = warm_start
        self.random_state = random_state
        self.verbose = verbose
        self.class_weight = class_weight

    @fit_context
    def fit(self, X, y, sample_weight=None, columns=None):
        return self._fit(X, y, sample_weight, columns)

    def _fit(self, X, y, sample_weight=None, columns=None, start=None):
        """fit, with the start of rbcd.dask.RBClassifier's alpha="auto" (_CDBase._solve_all)."""
        de = self.decision_epochs
        if de is not None and (isinstance(de, (bool, np.bool_))
                               or not isinstance(de, numbers.Integral) or de < 1):
            raise ValueError(f"decision_epochs must be an integer >= 1 or None, got {de!r}")
        params = self._params()
        params["decision_epochs"] = None if de is None else int(de)
        client = client_or_error()
        X = as_rows(X, "X", client)
        check_min_rows(X, type(self).__name__)
        if y is None:
            raise ValueError("CDClassifier requires y to be passed, but the target y is None")
        classes, targets, sw = class_setup(client, X, y, sample_weight, self.class_weight)
        _require_columns(columns)
        cluster, N, D, Xd = build_blocks(client, X, y, sw, targets, columns, self.n_jobs)
        k = 1 if classes.shape[0] == 2 else classes.shape[0]
        W, B = self._solve_all(client, cluster, D, k, params, start)
        out = float_dtype(Xd.dtype)    # the local rule: Z's float dtype
        self.classes_ = classes
        self.coef_, self.intercept_ = W.astype(out, copy=False), B.astype(out, copy=False)
        return self

    def decision_function(self, X):
        return self._decision(X)

    def predict(self, X):
        scores = self.decision_function(X)
        return predict_from_scores(scores, self.classes_)

    def _has_proba(self):
        return self.loss == "logistic"

    @available_if(_has_proba)
    def predict_proba(self, X):
        return proba_from_scores(self.decision_function(X))
