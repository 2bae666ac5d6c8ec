"""What fit draws before any table: the checked parameters, sigma, the grids
(docs/design.md contract 2) and the features that do not vary over the training rows.

The draw is kept so that it can be repeated (:class:`_GridDraw`): where some features
are constant over the training rows, exact mode keys its tables on the varying ones
only and keeps for the others their value and an interval around it inside its bin
(:class:`_ConstantColumns`), not the (R, d) arrays. After the tables, the fitted
kappa_ says whether the grids are degenerate (:class:`DegenerateBinningWarning`).
"""
import copy
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .._random import make_generator
from .._warnings import warn as warn_user
from .._scale import scale_sigma
from .._threads import effective_n_threads
from .._validation import (
    INT64_HIGH,
    INT64_LOW,
    check_int,
    check_kernel,
    check_output_dtype,
    check_sigma,
    check_X,
)
from ._input import (
    _bin_range,
    _describe_sigma,
    _extremes,
    _raise_bad_bins,
    _sparse_extremes,
    _take_columns,
)
from ._plan import _drop_constants, _threads_for, check_fit_memory


class DegenerateBinningWarning(UserWarning):
    """The fitted grids are useless for a kernel estimate (public).

    Raised once per fit when nearly every training row is alone in its bins
    (``kappa_ >= N / 2``: sigma far below the data's scale, the model memorises the
    training rows) or nearly all rows share one bin (``kappa_ <= 1.1``: sigma far
    above it, every row looks the same). Needs N >= 20 training rows (below that,
    kappa says little). The message names the sigma used and what to try.
    """


#: Degenerate binning (DegenerateBinningWarning): kappa_ >= N * KAPPA_HIGH_FRACTION
#: or kappa_ <= KAPPA_LOW, checked from DEGENERATE_MIN_ROWS training rows on.
KAPPA_HIGH_FRACTION = 0.5
KAPPA_LOW = 1.1
DEGENERATE_MIN_ROWS = 20


def _warn_if_degenerate(kappa, n_samples, sigma, param, identical=False):
    """Warn (DegenerateBinningWarning) when kappa_ says the grids are degenerate.
    ``identical``: no feature varies over the training rows, whatever sigma."""
    if n_samples < DEGENERATE_MIN_ROWS:
        return
    if identical:
        warn_user(
            f"degenerate random binning: all {n_samples} training rows are identical (no "
            "feature varies), so they share one bin in every grid and no sigma can tell "
            "them apart; check X",
            DegenerateBinningWarning,
        )
        return
    if kappa >= KAPPA_HIGH_FRACTION * n_samples:
        what = (f"kappa_ = {kappa:.4g} is close to N = {n_samples}: nearly every training "
                "row is alone in its bins, so a model can only memorise the training set")
        fix, mult = "a larger sigma", "c > 1"
    elif kappa <= KAPPA_LOW:
        what = (f"kappa_ = {kappa:.4g} is close to 1: nearly all {n_samples} training rows "
                "share one bin in every grid, so the features cannot tell rows apart")
        fix, mult = "a smaller sigma", "c < 1"
    else:
        return
    if isinstance(param, str):  # sigma="scale" gave it
        advice = (f"try {fix}: sigma = c * rbcd.median_l1_distance(X) with {mult} "
                  "(sigma='scale' is one such multiple), or per-feature sigmas if the "
                  "features' scales differ")
    else:
        advice = (f"try sigma='scale' (a bandwidth from the data's median L1 distance), or "
                  f"{fix}: sigma = c * rbcd.median_l1_distance(X) with {mult}")
    warn_user(
        f"degenerate random binning with {_describe_sigma(sigma)}: {what}; {advice}",
        DegenerateBinningWarning,
    )


#: Grids are drawn (and drawn again) in blocks of grids of about this many entries, so
#: the draw's scratch stays bounded for any d: numpy's Generator gives the same stream
#: drawn block by block as in one call (docs/design.md contract 2 fixes the order).
DRAW_BLOCK = 1 << 20


class _GridDraw:
    """The grid draw of one fit, kept so that it can be repeated exactly (private).

    docs/design.md contract 2: ``widths = gamma(2, sigma, (R, d))``, then ``offsets =
    uniform(0, 1, (R, d)) * widths``, from ``make_generator(random_state)``. This keeps
    the bit generator's class name and its state before the draw (whatever random_state
    was: None, a seed, a SeedSequence, a Generator), sigma and the shape, so the widths
    and offsets of any columns can be drawn again in O(R d) time and O(R x columns)
    memory without keeping the (R, d) arrays.
    """

    def __init__(self, rng, sigma, n_grids, n_features):
        self.bit_generator = type(rng.bit_generator).__name__
        self.state = copy.deepcopy(rng.bit_generator.state)
        self.sigma = sigma
        self.shape = (int(n_grids), int(n_features))

    @staticmethod
    def can_repeat(rng):
        """Whether the draw of ``rng`` can be repeated from its state (numpy's own bit
        generators; a foreign one keeps the (R, d) arrays instead)."""
        cls = getattr(np.random, type(rng.bit_generator).__name__, None)
        return cls is type(rng.bit_generator)

    def generator(self):
        cls = getattr(np.random, str(self.bit_generator), None)
        if not (isinstance(cls, type) and issubclass(cls, np.random.BitGenerator)):
            raise ValueError(f"damaged RandomBinning grid draw: bit generator "
                             f"{self.bit_generator!r}")
        bit_generator = cls()
        bit_generator.state = copy.deepcopy(self.state)
        return np.random.Generator(bit_generator)

    def blocks(self, rng=None):
        """Yield ``(r0, j0, widths[r0:r1, j0:j1], offsets[r0:r1, j0:j1])`` block by block, in
        the order of the stream: whole grids (j0 = 0, all d columns) while a grid has at most
        DRAW_BLOCK entries, else one grid in pieces of DRAW_BLOCK columns (so the scratch
        stays bounded for any d). ``rng``: the live generator, at the saved state, is left
        where one draw of the whole arrays leaves it (None: a fresh copy)."""
        R, d = self.shape
        if rng is None:
            rng = self.generator()
        if R * d <= DRAW_BLOCK:
            widths = rng.gamma(2.0, self.sigma, size=(R, d))
            yield 0, 0, widths, rng.uniform(0.0, 1.0, size=(R, d)) * widths
            return
        sigma = np.asarray(self.sigma, dtype=np.float64)
        per_col = sigma.ndim == 1
        if d <= DRAW_BLOCK:
            pieces = [(r0, min(DRAW_BLOCK // d, R - r0), 0, d)
                      for r0 in range(0, R, DRAW_BLOCK // d)]
        else:
            pieces = [(r0, 1, j0, min(DRAW_BLOCK, d - j0))
                      for r0 in range(R) for j0 in range(0, d, DRAW_BLOCK)]

        def gamma(gen, k, j0, m):
            scale = sigma[j0:j0 + m] if per_col else self.sigma
            return gen.gamma(2.0, scale, size=(k, m))

        for _, k, j0, m in pieces:  # the widths, to reach the offsets' part of the stream
            gamma(rng, k, j0, m)
        again = self.generator()  # the widths a second time, beside the offsets
        for r0, k, j0, m in pieces:
            widths = gamma(again, k, j0, m)
            yield r0, j0, widths, rng.uniform(0.0, 1.0, size=(k, m)) * widths

    def columns(self, cols=None):
        """``(widths[:, cols], offsets[:, cols])`` (all columns when cols is None; cols
        increasing)."""
        R, d = self.shape
        cols = np.arange(d) if cols is None else np.asarray(cols, dtype=np.int64)
        n = cols.shape[0]
        widths = np.empty((R, n))
        offsets = np.empty((R, n))
        for r0, j0, w, o in self.blocks():
            k, m = w.shape
            lo, hi = np.searchsorted(cols, [j0, j0 + m])
            if lo < hi:
                widths[r0:r0 + k, lo:hi] = w[:, cols[lo:hi] - j0]
                offsets[r0:r0 + k, lo:hi] = o[:, cols[lo:hi] - j0]
        return widths, offsets


def _constant_spans(c, widths, offsets):
    """For columns with training value ``c`` (one per column): per (grid, column) the bin
    q of c and an interval [a, b] around c whose ends (and so, bins being monotone in x,
    every value between) have bin q; and whether q is outside int64. Exact: each end is
    checked with the bins' own formula (contract 3); where a check fails the end is c
    (an empty side: exact, only slower for new rows on that side).
    """
    keep = 1.0 - 2.0**-30  # nearly up to the bin's edges
    with np.errstate(all="ignore"):
        q = c - offsets
        q /= widths
        np.floor(q, out=q)
        bad = ~((q >= INT64_LOW) & (q < INT64_HIGH))
        edge = q * widths
        edge += offsets  # about the bin's lower edge
        a = c - edge
        a *= keep
        np.subtract(c, a, out=a)
        np.minimum(a, c, out=a)
        t = a - offsets
        t /= widths
        np.floor(t, out=t)
        a = np.where(t == q, a, c)
        edge += widths  # about the upper edge
        b = edge
        b -= c
        b *= keep
        b += c
        np.maximum(b, c, out=b)
        np.subtract(b, offsets, out=t)
        t /= widths
        np.floor(t, out=t)
        b = np.where(t == q, b, c)
        if bad.any():
            a[bad] = np.broadcast_to(c, a.shape)[bad]
            b[bad] = np.broadcast_to(c, b.shape)[bad]
    return q, a, b, bad


class _ConstantColumns:
    """The features that are constant over the training rows (private, exact mode).

    Such a feature puts every training row in the same bin of each grid, so it does not
    change which training rows share a bin: the tables key on the varying features
    only and the columns are numbered exactly as with all of them (contract 4). For a
    new row, a value in [low_j, high_j] (an interval around the training value inside
    its bin in every grid) changes nothing; beyond it, the row's bin in such a feature
    is computed again from the repeated draw, and in each grid where it differs from
    the training value's bin the row gets no entry (a bin unseen in fit, contract 6).

    ``draw``: the :class:`_GridDraw`; ``varying``, ``constant``: column numbers, increasing;
    ``value``, ``low``, ``high``: per constant column. ``zero_rest`` (fits on sparse X):
    the columns in neither list were 0 in every training row, and are kept as nothing at
    all (the state grows with the stored columns, not with d); a new value other than 0
    in one of them is binned again. Otherwise the two lists cover every column.
    """

    def __init__(self, draw, varying, constant, value, low, high, zero_rest=False):
        self.draw = draw
        self.varying = varying
        self.constant = constant
        self.value = value
        self.low = low
        self.high = high
        self.zero_rest = bool(zero_rest)

    def check(self, n_features_in, tables_d):
        """ValueError unless the state is consistent (a damaged pickle)."""
        zero_rest = bool(self.__dict__.get("zero_rest", False))  # earlier pickles: False
        try:
            arrays = (self.varying, self.constant, self.value, self.low, self.high)
            known = (np.concatenate([self.varying, self.constant])
                     if all(isinstance(a, np.ndarray) for a in arrays) else None)
            ok = (all(isinstance(a, np.ndarray) and a.ndim == 1 for a in arrays)
                  and self.varying.dtype == np.int64 and self.constant.dtype == np.int64
                  and max(self.varying.shape[0], 1) == tables_d
                  and self.value.shape == self.low.shape == self.high.shape
                  == self.constant.shape
                  and tuple(self.draw.shape)[1] == n_features_in
                  and np.all(self.low <= self.value) and np.all(self.value <= self.high)
                  and np.all(np.diff(self.varying) > 0) and np.all(np.diff(self.constant) > 0))
            if ok and zero_rest:
                ok = (known.shape[0] <= n_features_in
                      and (known.shape[0] == 0 or (known.min() >= 0
                                                   and known.max() < n_features_in))
                      and np.unique(known).shape[0] == known.shape[0])
            elif ok:
                ok = (known.shape[0] == n_features_in
                      and np.array_equal(np.sort(known), np.arange(n_features_in)))
        except (AttributeError, TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError("damaged RandomBinning state: the constant-feature record does "
                             "not match the fitted tables")

    def _candidates(self, X):
        """(rows, columns, values, training values) of the entries of a new X that may
        leave their training bin: outside [low, high] of a constant column, implicit zeros
        of a constant column whose span excludes 0, and (``zero_rest``) values other than
        0 in a column in neither list. Columns in full numbering. O(nnz) for sparse X."""
        C = self.constant
        zero_rest = bool(self.__dict__.get("zero_rest", False))
        n, d = X.shape
        rows, cols, vals, train = [], [], [], []
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            r_all = np.repeat(np.arange(n, dtype=np.int64), np.diff(X.indptr))
            c_all = X.indices.astype(np.int64)
            v_all = np.asarray(X.data, dtype=np.float64)
            pos = np.minimum(np.searchsorted(C, c_all), max(C.shape[0] - 1, 0))
            in_c = (C[pos] == c_all) if C.shape[0] else np.zeros(c_all.shape[0], dtype=bool)
            p = pos[in_c]
            out = (v_all[in_c] < self.low[p]) | (v_all[in_c] > self.high[p])
            rows.append(r_all[in_c][out])
            cols.append(c_all[in_c][out])
            vals.append(v_all[in_c][out])
            train.append(self.value[p][out])
            for jj in np.flatnonzero((0.0 < self.low) | (0.0 > self.high)):
                present = np.zeros(n, dtype=bool)
                present[r_all[in_c][p == jj]] = True
                missing = np.flatnonzero(~present)
                rows.append(missing)
                cols.append(np.full(missing.shape[0], C[jj]))
                vals.append(np.zeros(missing.shape[0]))
                train.append(np.full(missing.shape[0], self.value[jj]))
            if zero_rest:
                V = self.varying
                vpos = np.minimum(np.searchsorted(V, c_all), max(V.shape[0] - 1, 0))
                in_v = (V[vpos] == c_all) if V.shape[0] else np.zeros(c_all.shape[0], bool)
                rest = ~in_c & ~in_v & (v_all != 0)
                rows.append(r_all[rest])
                cols.append(c_all[rest])
                vals.append(v_all[rest])
                train.append(np.zeros(int(rest.sum())))
        else:
            if C.shape[0]:
                Xc = X[:, C]
                r, c = np.nonzero((Xc < self.low) | (Xc > self.high))
                rows.append(r)
                cols.append(C[c])
                vals.append(Xc[r, c])
                train.append(self.value[c])
            if zero_rest:
                known = np.zeros(d, dtype=bool)  # dense X is O(N d) already
                known[self.varying] = True
                known[C] = True
                U = np.flatnonzero(~known)
                Xu = X[:, U]
                r, c = np.nonzero(Xu != 0)
                rows.append(r)
                cols.append(U[c])
                vals.append(Xu[r, c])
                train.append(np.zeros(r.shape[0]))
        if not rows:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros(0), np.zeros(0)
        return (np.concatenate(rows).astype(np.int64), np.concatenate(cols).astype(np.int64),
                np.concatenate(vals).astype(np.float64),
                np.concatenate(train).astype(np.float64))

    def misses(self, X):
        """(rows, grids, bad_columns) of a new X: the (row, grid) pairs that get no entry,
        and the columns (full numbering) whose bins do not fit in int64."""
        empty = np.zeros(0, dtype=np.int64)
        rows, cols, vals, train = self._candidates(X)
        if rows.shape[0] == 0:
            return empty, empty, empty
        J, pos = np.unique(cols, return_inverse=True)
        pos = pos.ravel()
        widths, offsets = self.draw.columns(J)
        R = widths.shape[0]
        miss_rows, miss_grids, bad_cols = [], [], []
        step = max(1, DRAW_BLOCK // R)
        with np.errstate(all="ignore"):
            for s in range(0, rows.shape[0], step):
                p = pos[s:s + step]
                w, o = widths[:, p], offsets[:, p]
                q = np.floor((vals[s:s + step] - o) / w)
                k = np.floor((train[s:s + step] - o) / w)
                bad = ~((q >= INT64_LOW) & (q < INT64_HIGH))
                if bad.any():
                    bad_cols.append(J[p[bad.any(axis=0)]])
                r, e = np.nonzero(q != k)
                miss_rows.append(rows[s:s + step][e])
                miss_grids.append(r)
        bad_cols = np.unique(np.concatenate(bad_cols)) if bad_cols else empty
        return (np.concatenate(miss_rows).astype(np.int64),
                np.concatenate(miss_grids).astype(np.int64), bad_cols)


#: The most grid entries (n_grids x n_features_in) a fit draws: every feature's width and
#: offset are drawn, in order (docs/design.md contract 2), at about 60 ns an entry, so
#: beyond this a fit would run for many minutes before any binning; it is refused.
MAX_DRAW_ENTRIES = 1 << 33



# ---------------------------------------------------------------------------------------
# Parameters, sigma, and the draw of one fit
# ---------------------------------------------------------------------------------------
def resolve_sigma(param, X, sample_weight=None):
    """The numeric sigma of the kernel for training data X (``param``: RandomBinning's
    ``sigma``): a positive float, or a positive float64 array of length d (docs/design.md
    contract 1). ``sigma="scale"`` is :func:`rbcd._scale.scale_sigma` of X, its pairs drawn
    by ``sample_weight`` when given (they do not touch the grids' stream)."""
    if isinstance(param, str):
        if param != "scale":
            raise ValueError(f"sigma must be a positive number, an array or 'scale', "
                             f"got {param!r}")
        with np.errstate(all="ignore"):  # non-finite X is reported by _bounds
            return float(scale_sigma(X, sample_weight=sample_weight))
    return check_sigma(param, X.shape[1])


def check_params(est, X):
    """The checked parameters of RandomBinning ``est``: ``(n_grids, sigma, dtype,
    n_threads)``; sigma is None for "scale" (resolved by the caller)."""
    n_grids = check_int(est.n_grids, "n_grids", low=1)
    check_kernel(est.kernel)
    if est.n_features is not None:
        check_int(est.n_features, "n_features", low=1)
        if int(est.n_features) >= 2**63:
            raise ValueError(f"n_features must be < 2**63, got {est.n_features}")
    dtype = check_output_dtype(est.dtype)
    sigma = None if isinstance(est.sigma, str) else resolve_sigma(est.sigma, X)
    if isinstance(est.sigma, str) and est.sigma != "scale":
        resolve_sigma(est.sigma, X)  # the error
    n_threads = effective_n_threads(est.n_jobs)
    return n_grids, sigma, dtype, n_threads


class Drawn(NamedTuple):
    """What :func:`draw_grids` gives fit: X the dense varying columns (a zero column if
    none varies) and, for them, the grids, their bins' bounds and the column extremes;
    ``constant`` the :class:`_ConstantColumns` record, or None where every column is
    kept."""

    X: np.ndarray
    widths: np.ndarray
    offsets: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    cmin: np.ndarray
    cmax: np.ndarray
    sigma: object
    dtype: np.dtype
    n_threads: int
    constant: object


class _Extremes:
    """The column extremes of training X and the features that vary over its rows
    (``varying``, increasing). Sparse X: only the stored columns (``present``, with
    extremes ``pmin`` / ``pmax``; ``cmin`` / ``cmax`` None): nothing of length d."""

    def __init__(self, X, n_threads):
        self.sparse = sp.issparse(X)
        if self.sparse:  # O(nnz): nothing of length d (issue 31 item 8)
            self.present, self.pmin, self.pmax = _sparse_extremes(X)
            self.vary = self.pmin < self.pmax
            self.varying = self.present[self.vary]
            self.cmin = self.cmax = None
        else:
            self.cmin, self.cmax = _extremes(X, n_threads)
            self.varying = np.flatnonzero(self.cmin < self.cmax).astype(np.int64)

    def split(self):
        """``(constant, value, cmin_v, cmax_v)``: the columns that do not vary (sparse X:
        the stored ones; the others are 0), their values, and the varying columns'
        extremes."""
        if self.sparse:
            const, value = self.present[~self.vary], np.ascontiguousarray(self.pmin[~self.vary])
            return const, value, self.pmin[self.vary], self.pmax[self.vary]
        const = np.flatnonzero(~(self.cmin < self.cmax)).astype(np.int64)
        value = np.ascontiguousarray(self.cmin[const])
        return const, value, self.cmin[self.varying], self.cmax[self.varying]


def draw_grids(est, X, paths, mode="fit", sample_weight=None):
    """Validate X and the parameters of RandomBinning ``est``, draw the grids (contract
    2) and bound the bins: a :class:`Drawn`. ``sample_weight`` (checked) enters
    ``sigma="scale"`` only.

    Exact mode keeps only the columns of the features that vary over the training
    rows (:class:`_ConstantColumns`), when the draw can be repeated
    (:func:`_draw_varying`); otherwise every column (:func:`_draw_all`). ``mode``: what
    the fit returns ("fit", "Z" or "columns"), for the memory estimate.
    """
    X = check_X(est, X, reset=True)
    n_samples, d = X.shape
    n_grids, sigma, dtype, n_threads = check_params(est, X)
    n_threads = _threads_for(n_threads, n_samples * n_grids * d, paths)
    if n_samples >= 2**32 - 1:
        raise ValueError(f"at most 2**32 - 2 samples are supported, got {n_samples}")
    ext = _Extremes(X, n_threads)
    varying = ext.varying
    check_fit_memory(X, n_grids, varying.shape[0], dtype, mode, est.n_features is None,
                     n_threads)
    if n_grids * d > MAX_DRAW_ENTRIES:
        raise ValueError(
            f"drawing the grids takes n_grids x n_features_in = {n_grids} x {d} random "
            f"widths and offsets (docs/design.md contract 2 draws every feature's, "
            f"in order), more than {MAX_DRAW_ENTRIES:.3g}: use fewer grids, or drop the "
            "features that are zero in every row first (for sparse X: "
            "X[:, np.unique(X.indices)])"
        )
    if isinstance(est.sigma, str):
        # the L1 distances over the varying columns only: the running sums of
        # rbcd._scale add exact zeros for the others, so the value is the same
        sigma = resolve_sigma(est.sigma, _take_columns(X, varying) if varying.shape[0]
                              else np.zeros((n_samples, 1)), sample_weight)
    rng = make_generator(est.random_state)
    if (est.n_features is None and _GridDraw.can_repeat(rng)
            and _drop_constants(X, n_grids, varying.shape[0], paths.constants)):
        grids = _draw_varying(X, ext, rng, sigma, n_grids, est.sigma)
    else:
        grids = _draw_all(X, ext, rng, sigma, n_grids, n_threads, est.sigma)
    XV, widths, offsets, qlo, qhi, cmin_v, cmax_v, constant = grids
    return Drawn(XV, widths, offsets, qlo.astype(np.int64), qhi.astype(np.int64), cmin_v,
                 cmax_v, sigma, dtype, n_threads, constant)


def _draw_varying(X, ext, rng, sigma, n_grids, param):
    """The draw, kept for the varying columns only, and the record of the constant ones
    (exact mode; ``param``: the sigma parameter, for the too-large-to-bin advice).
    Returns ``(XV, widths, offsets, qlo, qhi, cmin_v, cmax_v, constant)``."""
    n_samples, d = X.shape
    varying = ext.varying
    draw = _GridDraw(rng, sigma, n_grids, d)
    const, value, cmin_v, cmax_v = ext.split()
    widths = np.empty((n_grids, varying.shape[0]))
    offsets = np.empty((n_grids, varying.shape[0]))
    low = np.full(const.shape[0], -np.inf)
    high = np.full(const.shape[0], np.inf)
    bad_const = np.zeros(const.shape[0], dtype=bool)
    for r0, j0, w, o in draw.blocks(rng):
        k, m = w.shape
        v0, v1 = np.searchsorted(varying, [j0, j0 + m])
        widths[r0:r0 + k, v0:v1] = w[:, varying[v0:v1] - j0]
        offsets[r0:r0 + k, v0:v1] = o[:, varying[v0:v1] - j0]
        c0, c1 = np.searchsorted(const, [j0, j0 + m])
        if c0 < c1:
            cj = const[c0:c1] - j0
            _, a, b, bad = _constant_spans(value[c0:c1], w[:, cj], o[:, cj])
            np.maximum(low[c0:c1], a.max(axis=0), out=low[c0:c1])
            np.minimum(high[c0:c1], b.min(axis=0), out=high[c0:c1])
            bad_const[c0:c1] |= bad.any(axis=0)
    # sparse X: a column without stored entries is 0 in every training row; its bin
    # of 0, floor(-u / w) with 0 <= u < w, is -1 or 0 (no range check), and a new
    # value other than 0 there is binned again in transform (_ConstantColumns)
    constant = _ConstantColumns(draw, varying, const, value, low, high,
                                zero_rest=ext.sparse)
    if varying.shape[0]:
        XV = _take_columns(X, varying)
    else:  # nothing varies: one zero column, in one bin of every grid
        XV = np.zeros((n_samples, 1))
        widths = np.ones((n_grids, 1))
        offsets = np.full((n_grids, 1), 0.5)
        cmin_v = cmax_v = np.zeros(1)
    qlo, qhi, bad_v = _bin_range(widths, offsets, cmin_v, cmax_v)
    if bad_v.any() or bad_const.any():
        cols = np.union1d(varying[bad_v[:varying.shape[0]]], const[bad_const])
        _raise_bad_bins(X, cols, *draw.columns(cols), sigma, param)
    return XV, widths, offsets, qlo, qhi, cmin_v, cmax_v, constant


def _draw_all(X, ext, rng, sigma, n_grids, n_threads, param):
    """The draw of every column, kept as the (R, d) arrays (hashed mode, a foreign bit
    generator, or where the plan keeps the constant features). Returns as
    :func:`_draw_varying`, with no constant record."""
    n_samples, d = X.shape
    cmin, cmax = ext.cmin, ext.cmax
    if ext.sparse:
        cmin, cmax = _extremes(X, n_threads)  # (R, d) arrays follow anyway
    # docs/design.md contract 2: widths first, then offsets
    widths = rng.gamma(2.0, sigma, size=(n_grids, d))
    offsets = rng.uniform(0.0, 1.0, size=(n_grids, d)) * widths
    XV = _take_columns(X)
    qlo, qhi, bad = _bin_range(widths, offsets, cmin, cmax)
    if bad.any():
        cols = np.flatnonzero(bad)
        _raise_bad_bins(X, cols, widths[:, cols], offsets[:, cols], sigma, param)
    return XV, widths, offsets, qlo, qhi, cmin, cmax, None
