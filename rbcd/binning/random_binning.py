"""Random binning features (Rahimi & Recht 2007; Wu et al., KDD 2016).

Each of R random grids cuts input dimension j into intervals of width
delta[r, j] ~ Gamma(2, sigma_j) shifted by u[r, j] ~ Uniform(0, delta[r, j]);
a point's bin in grid r is ``floor((x - u[r]) / delta[r])``. Z has one column
per non-empty bin, value 1/sqrt(R) where the point falls, so
z(x) . z(y) = (number of grids where x and y share a bin) / R, an unbiased
estimate of the Laplacian kernel exp(-||x - y||_1 / sigma).

The work is done by the nogil kernels of ``rbcd.binning._binning``; this module
validates, draws the grids (docs/design.md contract 2), and assembles
the sparse matrices. The column-major view the coordinate-descent solvers
walk (:class:`RBColumns`) is built here too, in O(nnz), never by a sort.
"""
import copy
import os
from dataclasses import dataclass
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_feature_names_in, check_is_fitted

from . import _binning
from .._random import make_generator
from .._scale import median_l1_distance, scale_sigma
from .._threads import effective_n_threads
from .._validation import (
    N_JOBS,
    POSITIVE_INT,
    RANDOM_STATE,
    SIGMA,
    fit_context,
    INT64_HIGH,
    INT64_LOW,
    check_X,
    check_int,
    check_kernel,
    check_output_dtype,
    check_sigma,
    index_dtype,
    raise_non_finite,
    raise_too_large,
)
from .._warnings import warn as warn_user
from .._integrity import ChecksummedState

__all__ = ["RandomBinning", "RBColumns", "column_structure", "DegenerateBinningWarning",
           "median_l1_distance"]


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


def _describe_sigma(sigma):
    if np.ndim(sigma) == 0:
        return f"sigma = {float(sigma):.6g}"
    s = np.asarray(sigma)
    return f"sigma in [{s.min():.6g}, {s.max():.6g}] (per feature)"


def _warn_if_degenerate(kappa, n_samples, sigma, param):
    """Warn (DegenerateBinningWarning) when kappa_ says the grids are degenerate."""
    if n_samples < DEGENERATE_MIN_ROWS:
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


class RBColumns:
    """Column-major (CSC) structure of one random binning matrix Z (public).

    ``RandomBinning.fit_transform(X, return_columns=True)`` returns ``(Z, columns)``;
    :func:`column_structure` builds one from any Z whose columns are grouped by
    grid. An RBColumns describes exactly that Z (same shape, same entries); the
    solvers take it as ``columns=`` instead of building it again, and
    :meth:`check_matrix` verifies, in O(nnz), that a matrix is the one it describes.
    All stored values of Z are the same constant ``value`` (1/sqrt(R), docs/design.md
    contract 6), so only the structure is kept.

    Attributes
    ----------
    indptr : int64 ndarray (D + 1,)
        Column j's rows are ``indices[indptr[j]:indptr[j + 1]]``.
    indices : int32 (int64 if n_rows >= 2**31) ndarray (nnz,)
        Row ids, increasing within each column.
    grid_ptr : int64 ndarray (R + 1,)
        Columns of grid r are ``grid_ptr[r]:grid_ptr[r + 1]``; their entries
        are the contiguous block ``indptr[grid_ptr[r]]:indptr[grid_ptr[r + 1]]``
        (for training data, ``r * n_rows:(r + 1) * n_rows``). A row has at most
        one entry per grid, so a grid's columns touch disjoint rows (the paper's
        block structure, section 4: the bins of one grid update in parallel).
    value : float
        The stored value of every entry.
    n_rows : int
        N, the number of rows of Z.
    grid_labels : list of R arrays or None
        Entry i of array r: the bin (column - grid_ptr[r]) of row i in grid r,
        uint16 for grids under 65536 bins, else int32 (built with the training
        structure; the CD grid mode reads them instead of building its own).
        The label layout is the one ``rbcd.solvers._cd.label_targets`` defines.
    """

    def __init__(self, indptr, indices, grid_ptr, value, n_rows, grid_labels=None):
        self.indptr = indptr
        self.indices = indices
        self.grid_ptr = grid_ptr
        self.value = float(value)
        self.n_rows = int(n_rows)
        self.grid_labels = grid_labels

    @property
    def n_columns(self):
        return self.indptr.shape[0] - 1

    @property
    def n_grids(self):
        return self.grid_ptr.shape[0] - 1

    def check_matrix(self, Z, n_samples=None):
        """Raise ValueError unless Z is exactly the matrix this structure describes.

        Checks Z's shape, nnz and stored values, then every entry of Z against the
        structure and, where ``grid_labels`` are present, every label
        (:func:`structure_difference`): O(nnz + N R) in one pass each, serial, with N
        cursors of scratch; Z is not copied when it is CSR with sorted indices.
        ``n_samples`` is accepted for compatibility and ignored (the check once sampled
        rows; it now reads them all).
        """
        if not sp.issparse(Z):
            raise ValueError(f"Z must be a scipy sparse matrix, got {type(Z).__name__}")
        if Z.shape != (self.n_rows, self.n_columns):
            raise ValueError(
                f"Z has shape {Z.shape}, the column structure describes "
                f"{(self.n_rows, self.n_columns)}"
            )
        if Z.format != "csr":
            Z = Z.tocsr()
        if Z.nnz != self.indices.shape[0]:
            raise ValueError(
                f"Z has {Z.nnz} stored entries, the column structure {self.indices.shape[0]}"
            )
        if Z.nnz and np.any(Z.data != self.value):
            raise ValueError("Z's values differ from the column structure's value")
        detail = structure_difference(Z, self.indptr, self.indices, self.grid_ptr,
                                      self.grid_labels)
        if detail is not None:
            raise ValueError(f"Z does not match the column structure: {detail}")

    def __repr__(self):
        return (
            f"RBColumns(n_rows={self.n_rows}, n_columns={self.n_columns}, "
            f"n_grids={self.n_grids}, nnz={self.indices.shape[0]}, value={self.value!r})"
        )


def structure_difference(Z, indptr, indices, grid_ptr, grid_labels=None):
    """None when CSR Z holds exactly the entries of the column structure ``(indptr,
    indices)`` (and, with ``grid_labels``, those labels describe the structure), else
    what differs, in words. Shapes, nnz and values are the caller's to check; the
    labels' layout too (R arrays of N uint16 / int32, ``_grid.pxd``).

    Exact (issue 31 item 1: a sampled check passed Z with two rows swapped): each row's
    entries are walked in column order against the structure's columns
    (``_binning.structure_mismatch``, O(nnz + N + D)), then each grid's labels against
    its columns (``_binning.labels_mismatch``, O(N R + nnz)).
    """
    if not Z.has_sorted_indices:
        Z = Z.sorted_indices()
    z_indices = Z.indices
    if z_indices.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        z_indices = z_indices.astype(np.int64)
    rows = np.asarray(indices)
    if rows.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        rows = rows.astype(np.int64)
    col_ptr = np.ascontiguousarray(indptr, dtype=np.int64)
    i, j = _binning.structure_mismatch(np.ascontiguousarray(Z.indptr, dtype=np.int64),
                                       np.ascontiguousarray(z_indices), col_ptr,
                                       np.ascontiguousarray(rows))
    if i != -1 or j != -1:
        return (f"Z and the structure differ at row {i}, column {j} (one of them holds "
                "that entry, the other not)")
    if grid_labels is None or callable(grid_labels):
        return None
    g, i, label = _binning.labels_mismatch(list(grid_labels), col_ptr, np.ascontiguousarray(rows),
                                           np.ascontiguousarray(grid_ptr, dtype=np.int64),
                                           Z.shape[0])
    if g == -1:
        return None
    n_bins = int(grid_ptr[g + 1] - grid_ptr[g])
    if label > n_bins or label < 0:
        return (f"grid labels of grid {g} are corrupt: label {label} of row {i} exceeds the "
                f"grid's {n_bins} bins")
    return (f"grid labels of grid {g} are corrupt: row {i} is labelled {label}, not the bin "
            "that holds it in the structure")


SMALL_WORK = 1 << 17


@dataclass(frozen=True)
class _Paths:
    """The code paths the binning kernels may take (private; tests force each one).

    Every path gives the same Z bit for bit (docs/design.md contracts 3-6); the defaults
    let the data and the CPU choose. ``simd``: AVX-512 bins, threshold keys and rank
    sort where the CPU has them; ``thresholds``: threshold keys for the grids the plan
    gives them (``_thresholds``); ``direct``: direct fit tables and the dense transform
    index where the plan gives them (``_direct_bits``, ``_dense_index``);
    ``small_work``: below this much work (rows x grids x columns) one thread runs,
    as starting a parallel region costs more than the work. ``constants``: leave the
    features constant over the training rows out of the tables ("always", where the
    draw can be repeated), never, or "auto": for sparse X, or where the dense copy of
    the varying features costs less than the grid arrays of the constant ones
    (:func:`_drop_constants`).
    """

    simd: bool = True
    thresholds: bool = True
    direct: bool = True
    small_work: int = SMALL_WORK
    constants: str = "auto"


_DEFAULT_PATHS = _Paths()


def _threads_for(n_threads, work, paths=_DEFAULT_PATHS):
    """One thread for small inputs (the output is the same for any thread count)."""
    return 1 if work < paths.small_work else n_threads


def _constant_data(nnz, value, dtype, n_threads):
    """The data array of Z, filled in parallel (first touch of fresh pages)."""
    data = _binning.empty(nnz, dtype)
    _binning.fill_constant(data, float(value), n_threads)
    return data


# A grid's keys come from thresholds when it has at most this many per column
# on average: each costs a compare and an add, against about 13 vector
# operations per column for the reciprocal-and-check path.
THRESHOLDS_PER_COLUMN = 6
def _use_thresholds(lo, hi, n_words, enabled=True):
    """The grids whose keys come from thresholds (uint8 (R,)): single-word grids with at
    most THRESHOLDS_PER_COLUMN thresholds per column on average whose bins stay below
    2**52 in magnitude (the search compares bins as float64), none if not ``enabled``."""
    R, d = lo.shape
    if not enabled:
        return np.zeros(R, dtype=np.uint8)
    span = hi.astype(np.float64) - lo.astype(np.float64)  # no int64 overflow
    use = ((n_words == 1) & (span.sum(axis=1) <= THRESHOLDS_PER_COLUMN * d)
           & np.all((np.abs(lo) < 2**52) & (np.abs(hi) < 2**52 - 1), axis=1))
    return use.astype(np.uint8)


def _thresholds(widths, offsets, lo, hi, cmin, cmax, shift, n_words, enabled=True):
    """Per grid the exact thresholds of its bins over the training range.

    ``bin(x) = floor((x - u) / w)`` is monotone in x (IEEE subtraction,
    division by w > 0 and floor all are), so for each bin k in (lo, hi] there
    is a smallest float64 ``t_k`` with ``bin(t_k) >= k``, and for any x in
    [cmin, cmax]: ``bin(x) - lo = #{k : x >= t_k}``. A search over the
    float64 values between the column extremes finds each ``t_k`` with the very
    formula of the bins (``rbcd/src/binning_plan.h``), so keys built by counting
    thresholds are the keys of the division, bit for bit. Used for the grids of
    :func:`_use_thresholds` (the common case: a few bins per column); the kernels
    compute the other grids' bins by division.

    Returns ``(thr_ptr, use_thr, ent_j, ent_t, ent_add)``: entries sorted by
    grid, column and bin; ``ent_add = 1 << shift`` of the entry's column.
    """
    use = _use_thresholds(lo, hi, n_words, enabled)
    thr_ptr, ent_j, ent_t, ent_add = _binning.thresholds(
        widths, offsets, lo, hi, np.ascontiguousarray(cmin, dtype=np.float64),
        np.ascontiguousarray(cmax, dtype=np.float64), shift, use)
    return thr_ptr, use, ent_j, ent_t, ent_add


def _range_bounds(widths, offsets, lo, hi, cmin, cmax, use):
    """For transform: per (grid, column) the smallest float64 in bin lo and the
    smallest past bin hi (-inf / +inf when no finite value is), so that a new
    value's bin lies in [lo, hi] iff ``range_lo <= x < range_hi``. Grids whose
    bins reach 2**52 in magnitude are left out of ``use`` (the search compares
    floored quotients with bins as float64, exact below 2**52)."""
    use = use & np.all((np.abs(lo) < 2**52) & (np.abs(hi) < 2**52 - 1), axis=1).astype(np.uint8)
    range_lo, range_hi = _binning.range_bounds(
        widths, offsets, lo, hi, np.ascontiguousarray(cmin, dtype=np.float64),
        np.ascontiguousarray(cmax, dtype=np.float64), np.ascontiguousarray(use, dtype=np.uint8))
    return use, range_lo, range_hi


def _bit_length(v):
    """int.bit_length of each entry of a uint64 array (int64 result)."""
    v = np.asarray(v, dtype=np.uint64).copy()
    n = np.zeros(v.shape, dtype=np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        big = v >= np.uint64(1 << s)
        n += big * s
        v = np.where(big, v >> np.uint64(s), v)
    return n + (v > 0)


def _key_bits(lo, hi, n_words):
    """Bits of each grid's packed key (single-word grids), -1 for multi-word grids: an
    int64 (R,) array."""
    span = hi.astype(np.uint64) - lo.astype(np.uint64)  # modulo 2**64, as pack_layout
    bits = _bit_length(span).sum(axis=1)
    return np.where(np.asarray(n_words) == 1, bits, -1).astype(np.int64)


# Dense transform index (uint32 id + 1 per possible key) for single-word grids of
# at most INDEX_MAX_BITS key bits and at least one bin per INDEX_PER_BIN possible
# keys: 4 * INDEX_PER_BIN bytes per bin at most, about what the hash table takes.
INDEX_MAX_BITS = 24
INDEX_PER_BIN = 8


def _dense_index(lo, hi, n_words, n_bins, keys_of, key_bits=None):
    """Per grid the dense index of its fitted keys, or None (``keys_of(r)``: grid r's
    keys in local id order; ``key_bits``: the grids' _key_bits, when already computed)."""
    if key_bits is None:
        key_bits = _key_bits(lo, hi, n_words)
    bits = np.asarray(key_bits, dtype=np.int64)
    n_bins = np.asarray(n_bins, dtype=np.int64)
    small = (bits >= 0) & (bits <= INDEX_MAX_BITS)
    dense = small & ((np.int64(1) << np.where(small, bits, 0))
                     <= INDEX_PER_BIN * np.maximum(n_bins, 8))
    out = [None] * bits.shape[0]
    for r in np.flatnonzero(dense).tolist():
        index = np.zeros(1 << int(bits[r]), dtype=np.uint32)
        index[keys_of(r).astype(np.intp)] = np.arange(1, int(n_bins[r]) + 1, dtype=np.uint32)
        out[r] = index
    return out


# Direct tables (one 8-byte slot per possible key: no hashing or probing) for
# single-word grids whose keys have at most DIRECT_MAX_BITS bits and at most
# DIRECT_PER_ROW possible values per training row; the smallest first while
# all of them together take at most DIRECT_BYTES_PER_ENTRY bytes per entry
# of Z (a sixth of Z's bytes in float64).
DIRECT_MAX_BITS = 20
DIRECT_PER_ROW = 2
DIRECT_BYTES_PER_ENTRY = 2


def _direct_bits(lo, hi, n_words, n_samples, key_bits=None, enabled=True):
    """Key bits of the grids fitted in a direct table, -1 for the others (``key_bits``:
    the grids' _key_bits, when already computed; none if not ``enabled``)."""
    R, d = lo.shape
    out = np.full(R, -1, dtype=np.int32)
    if not enabled:
        return out
    if key_bits is None:
        key_bits = _key_bits(lo, hi, n_words)
    bits = np.array(key_bits, dtype=np.int64)
    bits[bits < 0] = DIRECT_MAX_BITS + 1  # multi-word grids never
    budget = max(DIRECT_BYTES_PER_ENTRY * n_samples * R, 2**16)
    # the smallest first, while each fits and all of them together stay in the budget
    order = np.argsort(bits, kind="stable")
    b = np.minimum(bits[order], DIRECT_MAX_BITS + 1)
    ok = ((b <= DIRECT_MAX_BITS) & ((np.int64(1) << b) <= max(DIRECT_PER_ROW * n_samples, 64))
          & (np.cumsum(np.int64(8) << b) <= budget))
    n_ok = int(np.argmin(ok)) if not ok.all() else R
    out[order[:n_ok]] = b[:n_ok]
    return out


# Relative fit cost of a grid per training row, in units of one threshold
# compare, used only to split the grids among fit's threads into contiguous runs
# of equal cost (contract: the tables are the same for any split, so these
# weights change speed, never output). A direct table is cheap while it fits in
# L2 (COST_L2_BYTES) and costs more beyond; a hash table costs the most; keys by
# division cost per column. The weights come from asv_benches/binning.py runs.
COST_GRID = 3.0
COST_DIRECT = 5.0
COST_DIRECT_L2 = 75.0
COST_L2_BYTES = 2 << 20
COST_HASH = 200.0
COST_DIVISION_COLUMN = 8.0


def _grid_costs(thr_ptr, use_thr, direct, n_words, d):
    """Estimated relative fit cost of each grid (see COST_GRID)."""
    direct = np.asarray(direct, dtype=np.int64)
    use_thr = np.asarray(use_thr).astype(bool)
    n_thr = np.diff(np.asarray(thr_ptr, dtype=np.int64)).astype(np.float64)
    keys = np.where(use_thr, n_thr, COST_DIVISION_COLUMN * d * np.asarray(n_words, np.float64))
    x = (np.float64(8) * np.exp2(np.maximum(direct, 0).astype(np.float64))) / COST_L2_BYTES
    table = np.where(direct >= 0, COST_DIRECT + COST_DIRECT_L2 * np.minimum(x * x, 1.5),
                     COST_HASH)
    cost = COST_GRID + keys + table
    return cost


def _grid_bounds(cost, n_chunks):
    """Split grids 0 .. R - 1 into ``n_chunks`` (<= R) contiguous non-empty runs of
    about equal total ``cost``: run c is ``bounds[c] .. bounds[c + 1] - 1``."""
    R = len(cost)
    n_chunks = max(1, min(int(n_chunks), R))
    prefix = np.concatenate(([0.0], np.cumsum(np.asarray(cost, dtype=np.float64))))
    total = prefix[-1]
    bounds = np.zeros(n_chunks + 1, dtype=np.int64)
    bounds[-1] = R
    for c in range(1, n_chunks):
        # the prefix closest to c / n_chunks of the total, leaving room for
        # one grid per run on either side
        target = c * total / n_chunks
        j = int(np.searchsorted(prefix, target))  # prefix[j - 1] < target <= prefix[j]
        if j > 0 and target - prefix[j - 1] <= prefix[j] - target:
            j -= 1
        bounds[c] = min(max(j, bounds[c - 1] + 1), R - (n_chunks - c))
    return bounds


def _grid_layout(widths, offsets, lo, hi, cmin, cmax, exact, thresholds=True):
    """The :class:`_binning.GridTables` layout of the grids (tables not yet set):
    packed-key layout, thresholds (``_thresholds``) and, in exact mode, the range
    bounds transform needs (``_range_bounds``)."""
    word, shift, n_words = _binning.pack_layout(lo, hi)[:3]
    thr = _thresholds(widths, offsets, lo, hi, cmin, cmax, shift, n_words, enabled=thresholds)
    if exact:
        use, range_lo, range_hi = _range_bounds(widths, offsets, lo, hi, cmin, cmax, thr[1])
        assert np.array_equal(use, thr[1])  # _thresholds already left out the huge bins
    else:
        range_lo = range_hi = np.zeros(widths.shape)
    return _binning.GridTables(widths, offsets, cmin, cmax, lo, hi, thr + (range_lo, range_hi))


def _restore_grid_tables(state):
    """A pickled :class:`_binning.GridTables` (its ``state()``), every field checked.

    The layout, thresholds, range bounds, bucketed tables and dense index are derived
    again from the primary arrays; a damaged or foreign state raises ValueError.
    Version 2 holds each grid's keys in local id order; version 1 (earlier releases)
    also its hashed slot table, which is checked against the keys and then dropped.
    """
    try:
        if not isinstance(state, dict) or state.get("version") not in (1, 2):
            raise ValueError("not a version-1 or version-2 state")
        widths, offsets = state["widths"], state["offsets"]
        cmin, cmax = state["cmin"], state["cmax"]
        for name, a, ndim in (("widths", widths, 2), ("offsets", offsets, 2),
                              ("cmin", cmin, 1), ("cmax", cmax, 1)):
            if not isinstance(a, np.ndarray) or a.dtype != np.float64 or a.ndim != ndim:
                raise ValueError(f"{name} must be a {ndim}-D float64 array")
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{name} must be finite")
        if widths.shape != offsets.shape or widths.shape[0] < 1 or widths.shape[1] < 1:
            raise ValueError("widths and offsets must have the same shape (n_grids, d)")
        if cmin.shape != (widths.shape[1],) or cmax.shape != cmin.shape:
            raise ValueError("cmin and cmax must have length d")
        if not (np.all(widths > 0) and np.all(cmin <= cmax)):
            raise ValueError("widths must be positive and cmin <= cmax")
        with np.errstate(all="ignore"):
            qlo = np.floor((cmin - offsets) / widths)
            qhi = np.floor((cmax - offsets) / widths)
        if not np.all((qlo >= INT64_LOW) & (qhi < INT64_HIGH)):
            raise ValueError("training bins outside int64")
        lo, hi = qlo.astype(np.int64), qhi.astype(np.int64)
        grids = _grid_layout(widths, offsets, lo, hi, cmin, cmax, exact=True)
        keys = state["keys"]
        if not isinstance(keys, list):
            raise ValueError("keys must be a list")
        if state["version"] == 1:
            _binning.check_v1_slots(grids, state["grid_ptr"], state["slots"], keys)
        _binning.tables_from_keys(grids, state["grid_ptr"], list(keys))
        n_bins = np.diff(grids.grid_ptr)
        grids.set_index(_dense_index(lo, hi, grids.n_words, n_bins, grids.keys_by_id))
        return grids
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        raise ValueError(f"damaged or foreign RandomBinning grid tables: {exc}") from exc


def _check_grid_ptr(grid_ptr, n_cols):
    gp = np.asarray(grid_ptr)
    if gp.ndim != 1 or gp.shape[0] < 2 or gp.dtype.kind not in "iu":
        raise ValueError(
            f"grid_ptr must be a 1-D integer array of length R + 1 >= 2, got {grid_ptr!r}"
        )
    gp = np.ascontiguousarray(gp, dtype=np.int64)
    if gp[0] != 0 or gp[-1] != n_cols or np.any(np.diff(gp) < 0):
        raise ValueError(
            f"grid_ptr must be non-decreasing from 0 to the number of columns {n_cols}, "
            f"got first {int(gp[0])} and last {int(gp[-1])}"
        )
    return gp


def column_structure(Z, grid_ptr, n_jobs=None, *, _paths=None):
    """The :class:`RBColumns` of a CSR matrix whose columns are grouped by grid.

    Count (bincount of the column indices), cumsum, fill (parallel over blocks
    of grids, rows in increasing order): O(nnz), no sort. Raises ValueError if
    ``grid_ptr`` does not span Z's columns, if a row has more than one entry
    in some grid, or if the stored values are not all equal.
    """
    if not sp.issparse(Z):
        raise ValueError(f"Z must be a scipy sparse matrix, got {type(Z).__name__}")
    if Z.format != "csr":
        Z = Z.tocsr()
    n_rows, n_cols = Z.shape
    gp = _check_grid_ptr(grid_ptr, n_cols)
    if not Z.has_sorted_indices:
        Z = Z.sorted_indices()
    n_threads = _threads_for(effective_n_threads(n_jobs), Z.nnz + n_rows,
                             _DEFAULT_PATHS if _paths is None else _paths)
    idx = np.promote_types(Z.indptr.dtype, Z.indices.dtype)
    if idx not in (np.dtype(np.int32), np.dtype(np.int64)):
        idx = np.dtype(np.int64)
    indptr = np.ascontiguousarray(Z.indptr, dtype=idx)
    indices = np.ascontiguousarray(Z.indices, dtype=idx)
    row, grid = _binning.check_grid_rows(indptr, indices, gp, n_threads)
    if row >= 0:
        raise ValueError(
            f"row {row} has more than one entry in grid {grid}: not a random binning "
            "grid structure (at most one entry per row per grid)"
        )
    data = Z.data
    if data.shape[0] > 0:
        value = data[0]
        if not np.all(data == value):
            raise ValueError(
                "Z's stored values are not all equal: not a random binning matrix "
                "(exact mode gives the constant 1/sqrt(n_grids))"
            )
        value = float(value)
    else:
        value = 1.0 / np.sqrt(np.float64(gp.shape[0] - 1))
    counts = np.bincount(indices, minlength=n_cols) if indices.shape[0] else np.zeros(n_cols, np.int64)
    col_ptr = np.zeros(n_cols + 1, dtype=np.int64)
    np.cumsum(counts, out=col_ptr[1:])
    next_pos = col_ptr[:-1].copy()
    rows = np.empty(indices.shape[0], dtype=np.int32 if n_rows < 2**31 else np.int64)
    _binning.csc_fill_general(indptr, indices, next_pos, gp, rows, n_threads)
    return RBColumns(col_ptr, rows, gp, value, n_rows)


# ---------------------------------------------------------------------------------------
# The grid draw, and the features that do not vary over the training rows
# ---------------------------------------------------------------------------------------
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


def _available_memory():
    """Bytes of memory available to a new allocation: MemAvailable of /proc/meminfo
    where it exists, else the physical memory (os.sysconf), else None (unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


#: get_feature_names_out names at most this many columns (hashed mode may ask for 2**62).
MAX_FEATURE_NAMES = 1 << 26

#: The most grid entries (n_grids x n_features_in) a fit draws: every feature's width and
#: offset are drawn, in order (docs/design.md contract 2), at about 60 ns an entry, so
#: beyond this a fit would run for many minutes before any binning; it is refused.
MAX_DRAW_ENTRIES = 1 << 33

#: Bytes per (grid, varying feature) of the fit's grid arrays (widths, offsets, inverse
#: widths, bin bounds, key layout, range bounds, threshold scratch).
GRID_BYTES_PER_ENTRY = 96


def _fit_memory(n_rows, n_grids, n_varying, copy_bytes, out_bytes_per_entry):
    """A lower estimate of the bytes a fit or transform needs at its peak: the grid
    arrays, the dense copy of the varying columns, and Z's arrays (``out_bytes_per_entry``
    per row and grid: indices, values and the kernels' scratch). The tables come on
    top (they depend on the bins found, from a few bytes per grid to about 15 bytes per
    bin during fit and (key bits + 1) / 8 + 0.7 after: _binning's design notes)."""
    return (GRID_BYTES_PER_ENTRY * n_grids * max(n_varying, 1) + copy_bytes
            + out_bytes_per_entry * n_rows * n_grids + 8 * (n_rows + n_grids))


#: Estimates below this many bytes are not compared with the memory available (reading
#: /proc/meminfo costs about as much as binning a few hundred rows).
MEMORY_CHECK_FLOOR = 64 << 20


def _check_memory(estimate, what, n_grids):
    """ValueError before any work when ``estimate`` exceeds the memory available."""
    if estimate < MEMORY_CHECK_FLOOR:
        return
    available = _available_memory()
    if available is not None and estimate > available:
        raise ValueError(
            f"{what} with n_grids={n_grids} needs an estimated {estimate / 2**30:.3g} GiB "
            f"(a lower bound), more than the {available / 2**30:.3g} GiB of memory "
            "available: use fewer rows or a smaller n_grids"
        )


def _drop_constants(X, n_grids, n_varying, rule):
    """Whether exact mode leaves the constant features out of its tables (``rule``: see
    :class:`_Paths`). Either way Z is the same; leaving them out costs a dense copy of
    the varying features (sparse X is copied anyway) and saves the (R, d) grid arrays."""
    n, d = X.shape
    if n_varying == d or rule == "never":
        return False
    if rule == "always" or sp.issparse(X):
        return True
    return 8 * n * n_varying <= GRID_BYTES_PER_ENTRY * n_grids * (d - n_varying)


def _sparse_extremes(X):
    """``(cols, cmin, cmax)`` of CSR X (canonical): the columns holding a stored entry,
    increasing, and their minima and maxima, the implicit zeros of a column with fewer
    than N entries counted as 0. Every other column is 0 in every row. Wide X (d > nnz +
    N): O(nnz log nnz) time, O(nnz) memory, nothing of length d (issue 31 item 8:
    X.min(axis=0) went through a CSC copy with an indptr of d + 1 entries); else one
    CSC copy, O(nnz + d)."""
    n, d = X.shape
    idx = X.indices
    if idx.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
    if d <= idx.shape[0] + n:  # not wide: a CSC copy, O(nnz + d), no sort
        C = X.tocsc()
        C.sort_indices()
        counts = np.diff(C.indptr)
        cols = np.flatnonzero(counts).astype(np.int64)
        starts = C.indptr[:-1][cols]
        v = np.asarray(C.data, dtype=np.float64)
    else:  # wide: sort the stored entries by column, O(nnz log nnz), nothing of length d
        order = np.argsort(idx, kind="stable")
        c = idx[order]
        v = np.asarray(X.data, dtype=np.float64)[order]
        starts = np.flatnonzero(np.concatenate(([True], c[1:] != c[:-1])))
        cols = c[starts].astype(np.int64)
    cmin = np.minimum.reduceat(v, starts)
    cmax = np.maximum.reduceat(v, starts)
    part = np.diff(np.append(starts, v.shape[0])) < n  # some rows hold an implicit 0
    cmin[part] = np.minimum(cmin[part], 0.0)
    cmax[part] = np.maximum(cmax[part], 0.0)
    return cols, cmin, cmax


def _extremes(X, n_threads):
    """Column minima and maxima of X (dense, or sparse with implicit zeros as 0); raises
    the ValueError naming the first non-finite entry of dense X (check_X did sparse).
    Arrays of length d: for wide sparse X, see :func:`_sparse_extremes`."""
    if sp.issparse(X):
        cols, pmin, pmax = _sparse_extremes(X)
        cmin = np.zeros(X.shape[1])
        cmax = np.zeros(X.shape[1])
        cmin[cols] = pmin
        cmax[cols] = pmax
        return cmin, cmax
    cmin, cmax, bad = _binning.scan_columns(X, n_threads)
    if bad >= 0:
        raise_non_finite(X, bad)
    return cmin, cmax


def _sparse_take(X, cols):
    """Dense ``X[:, cols]`` of CSR X in O(nnz + N len(cols)) (scipy's column indexing
    allocates an array of length d)."""
    n = X.shape[0]
    cols = np.asarray(cols, dtype=np.int64)
    uniq, inverse = np.unique(cols, return_inverse=True)
    out = np.zeros((n, uniq.shape[0]))
    if uniq.shape[0] and X.nnz:
        idx = X.indices
        pos = np.minimum(np.searchsorted(uniq, idx), uniq.shape[0] - 1)
        hit = uniq[pos] == idx
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(X.indptr))
        out[rows[hit], pos[hit]] = X.data[hit]
    if uniq.shape[0] != cols.shape[0] or np.any(uniq != cols):
        out = np.ascontiguousarray(out[:, inverse.ravel()])
    return out


def _take_columns(X, cols=None):
    """X[:, cols] as a C-ordered float64 array (X itself when it is dense and cols is all
    of it)."""
    if sp.issparse(X):
        if cols is None:
            return np.ascontiguousarray(X.toarray())
        if X.shape[1] <= X.nnz + X.shape[0]:  # not wide: scipy's O(nnz + d) indexing
            return np.ascontiguousarray(X[:, cols].toarray())
        return _sparse_take(X, cols)
    if cols is None or (cols.shape[0] == X.shape[1]):
        return X
    return np.ascontiguousarray(X[:, cols])


def _bin_range(widths, offsets, cmin, cmax):
    """Bins of the column extremes (the bounds of every bin, x -> bin being monotone) and
    the columns where some bin does not fit in int64."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        qlo = np.floor((cmin - offsets) / widths)
        qhi = np.floor((cmax - offsets) / widths)
    ok = (qlo >= INT64_LOW) & (qlo < INT64_HIGH) & (qhi >= INT64_LOW) & (qhi < INT64_HIGH)
    return qlo, qhi, ~np.all(ok, axis=0)


def _raise_bad_bins(X, cols, widths, offsets, sigma=None, param=None):
    """Raise the ValueError naming the first (row, column), then grid, whose bin does not
    fit in int64, among columns ``cols`` of X (``widths``/``offsets``: those columns).
    At fit, ``sigma`` is the value used and ``param`` the parameter that gave it (the
    advice differs when it was already sigma='scale')."""
    cols = np.asarray(cols, dtype=np.int64)
    found = _binning.first_bad_bin(_take_columns(X, cols), np.ascontiguousarray(widths),
                                   np.ascontiguousarray(offsets),
                                   np.ones(cols.shape[0], dtype=np.uint8))
    if found is None:  # cannot happen (monotone bins); keep a clear message
        raise ValueError("X values too large to bin")
    i, j, r, value = found
    found = (i, int(cols[j]), r, value)
    if sigma is None:
        raise_too_large(*found)
    try:
        raise_too_large(*found)
    except ValueError as exc:  # at fit: the cause is a sigma too small for X
        if isinstance(param, str):  # sigma="scale" gave it: the values are outliers
            advice = ("sigma='scale' took it from the median distance between rows, far "
                      "below these values: scale or clip the features (e.g. "
                      "sklearn.preprocessing.RobustScaler), or give a larger sigma")
        else:
            advice = "use a larger sigma, e.g. sigma='scale'"
        raise ValueError(
            f"{exc}; sigma is too small for the size of these values "
            f"({_describe_sigma(sigma)}): {advice}"
        ) from None


def _drop_entries(Z, rows, grids, grid_ptr):
    """Z without its entries of the given (row, grid) pairs (rows' entries stay sorted)."""
    n, D = Z.shape
    R = grid_ptr.shape[0] - 1
    entry_row = np.repeat(np.arange(n, dtype=np.int64), np.diff(Z.indptr))
    entry_grid = np.searchsorted(grid_ptr, Z.indices, side="right") - 1
    keep = ~np.isin(entry_row * R + entry_grid, np.unique(rows * R + grids))
    nnz = int(keep.sum())
    idx = index_dtype(D, nnz)
    indptr = np.zeros(n + 1, dtype=idx)
    np.cumsum(np.bincount(entry_row[keep], minlength=n), out=indptr[1:])
    out = sp.csr_matrix((Z.data[keep], Z.indices[keep].astype(idx), indptr), shape=(n, D),
                        copy=False)
    out.has_sorted_indices = True
    return out


class RandomBinning(ChecksummedState, TransformerMixin, BaseEstimator):
    """Random binning features for the Laplacian kernel.

    The kernel is the L1 Laplacian ``k(x, y) = exp(-||x - y||_1 / sigma)``
    (scikit-learn's ``laplacian_kernel`` with ``gamma = 1 / sigma``), or with
    a per-feature sigma ``exp(-sum_j |x_j - y_j| / sigma_j)``. Z has exactly
    ``n_grids`` entries of value ``1/sqrt(n_grids)`` per training row and
    ``Z @ Z.T`` estimates the kernel matrix without bias.

    Parameters
    ----------
    n_grids : int, default=64
        R, the number of random grids.
    sigma : "scale", float or array of shape (n_features_in_,), default="scale"
        Kernel bandwidth, positive; one per input feature if an array. Widths
        are drawn ``delta[r, j] ~ Gamma(shape 2, scale sigma_j)``. ``"scale"``
        computes it from the training rows: a fixed multiple (0.5) of
        ``rbcd.median_l1_distance(X)``, the median L1 distance of sampled pairs of
        rows, the same for every ``random_state``. To tune
        around it, search a few multipliers of that distance::

            d = rbcd.median_l1_distance(X)
            for c in (0.25, 0.5, 1, 2, 4):
                RandomBinning(sigma=c * d)

        A smaller sigma gives finer grids (more, smaller bins: a narrower kernel);
        a larger one coarser grids. The value used is stored as ``sigma_``.
    kernel : {"laplacian"}, default="laplacian"
        The only kernel.
    n_features : int or None, default=None
        None: exact mode. One column per distinct non-empty bin of every grid
        on the training data, numbered by first appearance (grid by grid).
        In ``transform``, a bin never seen in fit contributes no entry, so a
        new row may have fewer than R entries (none if far from all training
        data). The fitted tables hold only the bin vectors (packed), no
        training rows: O(D) memory.
        m: hashed mode. Column = a fixed 64-bit hash of (grid, bin vector)
        modulo m (docs/design.md contract 5); stateless, every row of any data gets
        its R grids' columns, entries that collide within a row are summed
        (stored value k / sqrt(R)). For streaming and distributed use.
    dtype : numpy.float32 or numpy.float64, default=numpy.float64
        dtype of Z's values. Binning always runs in float64 (float32 input
        converts exactly).
    n_jobs : int or None, default=None
        Threads of the binning kernels (None: the OpenMP default, honouring
        threadpoolctl limits; -1: all cores). The output does not depend on it.
    random_state : None, int, SeedSequence, Generator or RandomState
        Seeds the grid draw.
    device : "cpu" or "cuda", default "cpu"
        "cuda": fit and transform on one GPU through CuPy (the ``rbcd[cuda]`` extra, exact
        mode only; docs/gpu.md): the same grids, the same Z bit for bit, returned as a
        cupyx.scipy.sparse CSR matrix; X may be numpy, CuPy or any array with
        ``__cuda_array_interface__``. ``to_cpu()`` gives the equal CPU binning.

    Attributes
    ----------
    widths_, offsets_ : ndarray (n_grids, n_features_in_)
        delta[r, j] and u[r, j].
    n_bins_ : int64 ndarray (n_grids,)
        Non-empty bins of each grid on the training data.
    grid_ptr_ : int64 ndarray (n_grids + 1,) or None
        Column boundaries of the grids, ``concatenate([[0], cumsum(n_bins_)])``
        (None in hashed mode, where grids share columns).
    n_features_out_ : int
        D, the number of columns of Z (m in hashed mode).
    kappa_per_grid_ : ndarray (n_grids,)
        kappa_r = 1 / nu_r, nu_r = (largest bin count) / N (paper, Def. 1).
    kappa_ : float
        Mean of ``kappa_per_grid_``. Near N (every training row alone in its
        bins) or near 1 (every row in one bin) the grids are degenerate and fit
        warns (:class:`DegenerateBinningWarning`).
    sigma_ : float or ndarray (n_features_in_,)
        The numeric sigma the grids were drawn with (the value ``"scale"`` gave,
        or the given number or array as float64).
    n_features_in_ : int
        d.

    Notes
    -----
    Bins are ``floor((x_j - u[r, j]) / delta[r, j])`` in float64 (true
    division semantics, bit for bit as ``rbcd_ref``); a non-finite value, or a
    bin outside int64, is a ValueError naming its row and column.

    ``fit_transform`` writes the CSR arrays directly (``indptr = R * arange(N + 1)``,
    int32 indices while nnz < 2**31) and is parallel over grids: each thread
    builds the hash tables of a block of grids, so Z does not depend on
    ``n_jobs``. ``transform`` is parallel over rows. With AVX-512 the bins are
    computed with a reciprocal multiply that is checked to have the same floor
    as the division (the few lanes near a bin edge are divided); the output is
    identical either way.

    Sparse and wide input: X may be a scipy sparse CSR or CSC matrix (an implicit
    zero is the value 0). In exact mode, features that are constant over the
    training rows (every all-zero column of sparse data, say) put every training row
    in the same bin, so the tables key on the varying features only and the fitted
    state, time and memory grow with their number, not with d: for the constant
    ones only the value, an interval around it inside its bin in every grid, and
    the generator's state are kept (``widths_`` and ``offsets_`` are drawn again
    when read). A new row that leaves such an interval has its bins in that
    feature computed again; in each grid where it left the training value's bin it
    gets no entry (a bin unseen in fit). Hashed mode keeps the (R, d) arrays (its
    hash covers every feature's bin).

    Memory: Z (12 bytes per entry in float64 / int32) plus, during fit, the
    tables: about 20 to 35 bytes per distinct bin (8 per 64-bit key word). With
    grids so fine that almost every training point has its own bin (D close
    to N * R, ``kappa_`` close to N) the tables are as large as Z; such grids
    also give a useless kernel estimate (fit warns, ``DegenerateBinningWarning``):
    increase sigma. A fit (or transform) whose estimated memory (a lower bound: grid
    arrays, the dense copy of the varying features, Z) exceeds the memory available
    (MemAvailable of /proc/meminfo) is refused before the work starts.

    Examples
    --------
    >>> import numpy as np
    >>> from rbcd import RandomBinning
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> rb = RandomBinning(n_grids=32, sigma=2.0, random_state=0)
    >>> Z = rb.fit_transform(X)
    >>> Z.shape[0], Z.nnz == 100 * 32
    (100, True)
    """

    def __init__(self, n_grids=64, sigma="scale", kernel="laplacian", n_features=None,
                 dtype=np.float64, n_jobs=None, random_state=None, device="cpu"):
        self.n_grids = n_grids
        self.sigma = sigma
        self.kernel = kernel
        self.n_features = n_features
        self.dtype = dtype
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.device = device

    _parameter_constraints = {
        "n_grids": POSITIVE_INT,
        "sigma": SIGMA,
        "kernel": [StrOptions({"laplacian"})],
        "n_features": [Interval(Integral, 1, 2**63 - 1, closed="both"), None],
        "dtype": "no_validation",  # check_output_dtype: float32 or float64
        "n_jobs": N_JOBS,
        # what rbcd._random.make_generator takes (docs/design.md contract 2)
        "random_state": RANDOM_STATE,
        "device": [StrOptions({"cpu", "cuda"})],  # "cuda": rbcd.cuda (docs/gpu.md)
    }

    # ------------------------------------------------------------------ checks
    def _resolve_sigma(self, X):
        """The numeric sigma of the kernel for training data X: a positive float, or a
        positive float64 array of length d (docs/design.md contract 1). ``sigma="scale"`` is
        :func:`rbcd._scale.scale_sigma` of X (its sampled pairs do not touch the grids'
        stream)."""
        if isinstance(self.sigma, str):
            if self.sigma != "scale":
                raise ValueError(f"sigma must be a positive number, an array or 'scale', "
                                 f"got {self.sigma!r}")
            with np.errstate(all="ignore"):  # non-finite X is reported by _bounds
                return float(scale_sigma(X))
        return check_sigma(self.sigma, X.shape[1])

    def _check_params(self, X):
        """The checked parameters; sigma is None for "scale" (resolved by the caller)."""
        n_grids = check_int(self.n_grids, "n_grids", low=1)
        check_kernel(self.kernel)
        if self.n_features is not None:
            check_int(self.n_features, "n_features", low=1)
            if int(self.n_features) >= 2**63:
                raise ValueError(f"n_features must be < 2**63, got {self.n_features}")
        dtype = check_output_dtype(self.dtype)
        sigma = None if isinstance(self.sigma, str) else self._resolve_sigma(X)
        if isinstance(self.sigma, str) and self.sigma != "scale":
            self._resolve_sigma(X)  # the error
        n_threads = effective_n_threads(self.n_jobs)
        return n_grids, sigma, dtype, n_threads

    def _check_fit_memory(self, X, n_grids, varying, dtype, mode):
        """Refuse, before the work, a fit that cannot fit in the memory available."""
        n, d = X.shape
        exact = self.n_features is None
        n_var = varying.shape[0]
        if not (exact and _drop_constants(X, n_grids, n_var, "auto")):
            n_var = d
        copy = 0 if (not sp.issparse(X) and n_var == d) else 8 * n * n_var
        idx = 4 if n * n_grids < 2**31 else 8
        if not exact:  # Z (indices, values) and the hashed transform's scratch
            per_entry = (2 * idx + dtype.itemsize + 4) if mode != "fit" else 0
        elif mode == "fit":
            per_entry = 0
        else:  # ids / indices and values; the columns add rows and labels
            per_entry = idx + dtype.itemsize + (idx + 4 if mode == "columns" else 0)
        if n_var == d:
            copy += 16 * n_grids * d  # the (R, d) draw itself
        _check_memory(_fit_memory(n, n_grids, n_var, copy, per_entry),
                      f"RandomBinning.fit on {n} rows x {d} features ({n_var} varying)",
                      n_grids)

    def _draw(self, X, paths, mode="fit"):
        """Validate X and the parameters, draw the grids (contract 2) and bound the bins.

        Exact mode keeps only the columns of the features that vary over the training
        rows (:class:`_ConstantColumns`), when the draw can be repeated. Returns ``(XV,
        widths, offsets, lo, hi, cmin, cmax, sigma, dtype, n_threads, constant)``: XV
        the dense varying columns (a zero column if none varies) and the arrays for them.
        """
        X = check_X(self, X, reset=True)
        n_samples, d = X.shape
        n_grids, sigma, dtype, n_threads = self._check_params(X)
        n_threads = _threads_for(n_threads, n_samples * n_grids * d, paths)
        if n_samples >= 2**32 - 1:
            raise ValueError(f"at most 2**32 - 2 samples are supported, got {n_samples}")
        sparse = sp.issparse(X)
        if sparse:  # O(nnz): nothing of length d (issue 31 item 8)
            present, pmin, pmax = _sparse_extremes(X)
            vary = pmin < pmax
            varying = present[vary]
            cmin = cmax = None
        else:
            cmin, cmax = _extremes(X, n_threads)
            varying = np.flatnonzero(cmin < cmax).astype(np.int64)
        self._check_fit_memory(X, n_grids, varying, dtype, mode)
        if n_grids * d > MAX_DRAW_ENTRIES:
            raise ValueError(
                f"drawing the grids takes n_grids x n_features_in = {n_grids} x {d} random "
                f"widths and offsets (docs/design.md contract 2 draws every feature's, "
                f"in order), more than {MAX_DRAW_ENTRIES:.3g}: use fewer grids, or drop the "
                "features that are zero in every row first (for sparse X: "
                "X[:, np.unique(X.indices)])"
            )
        if isinstance(self.sigma, str):
            # the L1 distances over the varying columns only: the running sums of
            # rbcd._scale add exact zeros for the others, so the value is the same
            sigma = self._resolve_sigma(_take_columns(X, varying) if varying.shape[0]
                                        else np.zeros((n_samples, 1)))
        rng = make_generator(self.random_state)
        constant = None
        if (self.n_features is None and _GridDraw.can_repeat(rng)
                and _drop_constants(X, n_grids, varying.shape[0], paths.constants)):
            draw = _GridDraw(rng, sigma, n_grids, d)
            if sparse:  # constant: the stored columns that do not vary; the others are 0
                const, value = present[~vary], np.ascontiguousarray(pmin[~vary])
                cmin_v, cmax_v = pmin[vary], pmax[vary]
            else:
                const = np.flatnonzero(~(cmin < cmax)).astype(np.int64)
                value = np.ascontiguousarray(cmin[const])
                cmin_v, cmax_v = cmin[varying], cmax[varying]
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
                                        zero_rest=sparse)
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
                _raise_bad_bins(X, cols, *draw.columns(cols), sigma, self.sigma)
        else:
            if sparse:
                cmin, cmax = _extremes(X, n_threads)  # (R, d) arrays follow anyway
            # docs/design.md contract 2: widths first, then offsets
            widths = rng.gamma(2.0, sigma, size=(n_grids, d))
            offsets = rng.uniform(0.0, 1.0, size=(n_grids, d)) * widths
            XV = _take_columns(X)
            cmin_v, cmax_v = cmin, cmax
            qlo, qhi, bad = _bin_range(widths, offsets, cmin, cmax)
            if bad.any():
                cols = np.flatnonzero(bad)
                _raise_bad_bins(X, cols, widths[:, cols], offsets[:, cols], sigma,
                                self.sigma)
        return (XV, widths, offsets, qlo.astype(np.int64), qhi.astype(np.int64), cmin_v,
                cmax_v, sigma, dtype, n_threads, constant)

    # ------------------------------------------------------------------ fit
    def _fit(self, X, mode, paths=None):
        """Fit; ``mode`` is "fit", "Z" (also return training ids) or "columns".
        ``paths``: a :class:`_Paths` (tests force a code path; None: the default).
        Returns the dense varying columns of X (what the kernels bin), the training ids,
        the column counts and the thread count."""
        paths = _DEFAULT_PATHS if paths is None else paths
        (X, widths, offsets, lo, hi, cmin, cmax, sigma, dtype, n_threads,
         constant) = self._draw(X, paths, mode)
        n_samples = X.shape[0]
        R = widths.shape[0]
        exact = self.n_features is None
        grids = _grid_layout(widths, offsets, lo, hi, cmin, cmax, exact, paths.thresholds)
        nnz = n_samples * R
        idx = index_dtype(0, nnz)  # D <= nnz for the training rows
        ids = _binning.empty(nnz if (exact and mode != "fit") else 0, idx)
        # bits of each single-word key: the bits used in its one word (pack_layout)
        key_bits = np.where(grids.n_words == 1, grids.top_bits, -1).astype(np.int64)
        direct = _direct_bits(lo, hi, grids.n_words, n_samples, key_bits, paths.direct)
        bounds = _grid_bounds(_grid_costs(grids.thr_ptr, grids.use_thr, direct, grids.n_words,
                                          X.shape[1]), n_threads)
        n_bins, max_count, dirs, offs, ents, counts = _binning.fit_tables(
            X, grids, direct, ids, mode == "columns", bounds, paths)
        self._constant_columns = constant
        self._widths, self._offsets = (None, None) if constant is not None else (widths, offsets)
        self.n_bins_ = n_bins
        nu = max_count / n_samples  # paper Definition 1: nu_r = largest bin count / N
        self.kappa_per_grid_ = 1.0 / nu
        self.kappa_ = float(np.mean(self.kappa_per_grid_))
        self.sigma_ = sigma
        self._dtype_ = dtype
        _warn_if_degenerate(self.kappa_, n_samples, sigma, self.sigma)
        if exact:
            self.grid_ptr_ = np.zeros(R + 1, dtype=np.int64)
            np.cumsum(n_bins, out=self.grid_ptr_[1:])
            self.n_features_out_ = int(self.grid_ptr_[-1])
            grids.set_tables(self.grid_ptr_, dirs, offs, ents, False)
            grids.set_index(_dense_index(lo, hi, grids.n_words, n_bins, grids.keys_by_id,
                                         key_bits))
            self._tables = grids
        else:
            self.grid_ptr_ = None
            self.n_features_out_ = int(self.n_features)
            self._tables = None
            del dirs, offs, ents
        return X, ids, counts, n_threads

    @fit_context
    def fit(self, X, y=None, *, _paths=None):
        """Draw the grids and build the per-grid bin tables of X.

        Parameters
        ----------
        X : array-like or scipy sparse CSR / CSC matrix (n_samples, n_features)
            Any real dtype; an implicit zero of sparse X is the value 0 (Z is the
            dense input's, bit for bit).
        y : ignored

        Returns
        -------
        self
        """
        if self.device == "cuda":
            from ..cuda import binning as cuda_binning
            return cuda_binning.fit(self, X, cuda_binning.get_xp("cuda"))
        self._fit(X, "fit", _paths)
        return self

    @fit_context
    def fit_transform(self, X, y=None, return_columns=False, *, _paths=None):
        """Fit and return Z of the training rows (equal to ``fit(X).transform(X)``).

        In exact mode the CSR arrays are written directly: ``indptr = R * arange(N + 1)``
        and row i's columns at ``indices[i * R:(i + 1) * R]``.

        Parameters
        ----------
        X : array-like or scipy sparse CSR / CSC matrix (n_samples, n_features)
            Any real dtype; an implicit zero of sparse X is the value 0 (Z is the
            dense input's, bit for bit).
        y : ignored
        return_columns : bool, default=False
            Also return the :class:`RBColumns` of Z (exact mode only), built in the
            same pass: the column-major structure the solvers take (``columns=``).

        Returns
        -------
        Z : scipy.sparse.csr_matrix (n_samples, n_features_out_)
        columns : RBColumns
            Only with ``return_columns=True``; describes exactly this Z.
        """
        if self.device == "cuda":  # Z as a cupyx CSR; the columns: a rbcd.cuda.GridLayout
            from ..cuda import binning as cuda_binning
            return cuda_binning.fit_transform(self, X, cuda_binning.get_xp("cuda"),
                                              return_columns)
        paths = _DEFAULT_PATHS if _paths is None else _paths
        if return_columns:
            return self._columns_of_training(X, paths)
        if self.n_features is not None:
            X, _, _, n_threads = self._fit(X, "fit", paths)
            return self._transform_hashed(X, n_threads, paths)
        X, ids, _, n_threads = self._fit(X, "Z", paths)
        return self._training_Z(X.shape[0], ids, n_threads)

    def _training_Z(self, n_samples, ids, n_threads):
        R = self.n_bins_.shape[0]
        data = _binning.empty(ids.shape[0], self._dtype_)
        _binning.finish_training(ids, self.grid_ptr_, data, float(self._value()), n_threads)
        indptr = np.arange(0, n_samples * R + 1, R, dtype=ids.dtype)
        Z = sp.csr_matrix((data, ids, indptr), shape=(n_samples, self.n_features_out_), copy=False)
        Z.has_sorted_indices = True
        return Z

    def _fit_transform_columns(self, X, *, _paths=None):
        """``fit_transform(X, return_columns=True)`` (kept for callers of the old name)."""
        return self.fit_transform(X, return_columns=True, _paths=_paths)

    def _columns_of_training(self, X, paths):
        """Fit and return ``(Z, RBColumns)`` built in one go (exact mode only).

        The CSC structure comes from the bin counts of fit (cumsum) and one
        fill pass over Z's indices, parallel over blocks of grids; grid r's
        entries are the block ``r * N:(r + 1) * N``.
        """
        if self.n_features is not None:
            raise ValueError(
                "the grid column structure needs exact mode (n_features=None); "
                "hashed columns are shared between grids"
            )
        X, ids, counts, n_threads = self._fit(X, "columns", paths)
        n_samples = X.shape[0]
        R = self.n_bins_.shape[0]
        Z = self._training_Z(n_samples, ids, n_threads)
        col_ptr = np.zeros(counts.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=col_ptr[1:])
        del counts
        rows = _binning.empty(ids.shape[0], np.int32 if n_samples < 2**31 else np.int64)
        labels = _binning.training_labels(Z.indices, self.grid_ptr_, n_samples, n_threads)
        if labels is None:  # a grid of 2**31 bins or more: fill from Z's indices
            next_pos = col_ptr[:-1].copy()
            _binning.csc_fill_training(Z.indices, next_pos, R, self.grid_ptr_, rows, n_threads)
            del next_pos
        else:
            _binning.csc_from_labels(labels, col_ptr, self.grid_ptr_, n_samples, rows, n_threads)
        value = float(np.asarray(self._value(), dtype=self._dtype_))
        return Z, RBColumns(col_ptr, rows, self.grid_ptr_.copy(), value, n_samples,
                            grid_labels=labels)

    def _value(self):
        return np.float64(1.0) / np.sqrt(np.float64(self.n_bins_.shape[0]))

    def to_cpu(self):
        """This binning with device="cpu": a device fit's tables rebuilt on the host (the
        same Z for any X); a CPU-fitted binning is returned as it is."""
        from ..cuda.binning import to_cpu
        return to_cpu(self)

    @property
    def widths_(self):
        """delta[r, j], shape (n_grids, n_features_in_) (drawn again on each access when
        some features are constant over the training rows: the fitted state keeps only
        how to draw them)."""
        return self._drawn_grids()[0]

    @property
    def offsets_(self):
        """u[r, j], shape (n_grids, n_features_in_) (see ``widths_``)."""
        return self._drawn_grids()[1]

    def _drawn_grids(self):
        state = self.__dict__
        constant = state.get("_constant_columns")
        if constant is not None:
            return constant.draw.columns()
        if state.get("_widths") is not None:
            return state["_widths"], state["_offsets"]
        if "widths_" in state:  # a pickle of an earlier version
            return state["widths_"], state["offsets_"]
        raise AttributeError("this RandomBinning is not fitted: no widths_ / offsets_")

    # ------------------------------------------------------------------ transform
    def transform(self, X, *, _paths=None):
        """Z, the CSR random binning features of X (sorted indices).

        Exact mode: a bin never seen in fit gives no entry. Hashed mode: the
        documented hash, duplicates within a row summed.
        """
        check_is_fitted(self, "n_bins_")
        if "_cuda_tables" in self.__dict__:  # fitted with device="cuda": Z as a cupyx CSR
            from ..cuda import binning as cuda_binning
            return cuda_binning.transform(self, X, cuda_binning.get_xp("cuda"))
        paths = _DEFAULT_PATHS if _paths is None else _paths
        X = check_X(self, X, reset=False)
        n_threads = _threads_for(effective_n_threads(self.n_jobs),
                                 X.shape[0] * X.shape[1] * self.n_bins_.shape[0], paths)
        R = self.n_bins_.shape[0]
        n, d = X.shape
        idx = 4 if n * R < 2**31 else 8
        constant = self.__dict__.get("_constant_columns")
        n_copy = d if constant is None else max(constant.varying.shape[0], 1)
        _check_memory(_fit_memory(n, R, 0, 8 * n * n_copy if sp.issparse(X) else 0,
                                  2 * idx + 8 + 4),
                      f"RandomBinning.transform of {n} rows", R)
        if self.grid_ptr_ is not None:  # the mode of the fit, not of later set_params
            # dense X: the non-finite check of every column (check_X did sparse X, whose
            # extremes are those of its varying columns only: nothing of length d)
            cmin, cmax = (None, None) if sp.issparse(X) else _extremes(X, n_threads)
            return self._transform_exact(X, cmin, cmax, n_threads, paths)
        cmin, cmax = _extremes(X, n_threads)
        widths, offsets = self._drawn_grids()
        _, _, bad = _bin_range(widths, offsets, cmin, cmax)
        if bad.any():
            cols = np.flatnonzero(bad)
            _raise_bad_bins(X, cols, widths[:, cols], offsets[:, cols])
        return self._transform_hashed(_take_columns(X), n_threads, paths)

    def _transform_exact(self, X, cmin, cmax, n_threads, paths):
        grids = getattr(self, "_tables", None)
        if not isinstance(grids, _binning.GridTables):
            raise ValueError("this RandomBinning has no fitted grid tables (damaged state?)")
        R = grids.n_grids
        D = self.n_features_out_
        if D != int(grids.grid_ptr[-1]):
            raise ValueError("n_features_out_ does not match the fitted grid tables")
        constant = self.__dict__.get("_constant_columns")
        # cmin / cmax: None for sparse X, whose varying columns' extremes are taken from
        # their dense copy (nothing of length d)
        if constant is None:
            if grids.n_features_in != X.shape[1]:
                raise ValueError("the fitted grid tables do not match n_features_in_")
            miss_rows = np.zeros(0, dtype=np.int64)
            XV = _take_columns(X)
            if cmin is None:
                cmin, cmax = _extremes(XV, n_threads)
            _, _, bad = _bin_range(grids.widths, grids.offsets, cmin, cmax)
            if bad.any():
                cols = np.flatnonzero(bad)
                _raise_bad_bins(X, cols, grids.widths[:, cols], grids.offsets[:, cols])
        else:
            constant.check(X.shape[1], grids.n_features_in)
            varying = constant.varying
            miss_rows, miss_grids, bad_const = constant.misses(X)
            if varying.shape[0]:
                XV = _take_columns(X, varying)
                if cmin is None:
                    vmin, vmax = _extremes(XV, n_threads)
                else:
                    vmin, vmax = cmin[varying], cmax[varying]
                _, _, bad = _bin_range(grids.widths, grids.offsets, vmin, vmax)
                bad_var = varying[bad]
            else:
                XV = np.zeros((X.shape[0], 1))
                bad_var = varying
            if bad_var.shape[0] or bad_const.shape[0]:
                cols = np.union1d(bad_var, bad_const)
                _raise_bad_bins(X, cols, *constant.draw.columns(cols))
        X = XV
        n_samples = X.shape[0]
        tmp_idx = index_dtype(D, n_samples * R)
        out = _binning.empty(n_samples * R, tmp_idx)
        row_nnz = np.empty(n_samples, dtype=np.int64)
        _binning.transform_exact(grids, X, out, row_nnz, n_threads, paths)
        nnz = int(row_nnz.sum())
        idx = index_dtype(D, nnz)
        if nnz == n_samples * R and out.dtype == idx:
            indices = out
            indptr = np.arange(0, nnz + 1, R, dtype=idx)
        else:
            indptr = np.zeros(n_samples + 1, dtype=idx)
            np.cumsum(row_nnz, out=indptr[1:])
            if out.dtype == idx:
                # rows packed in place (no second array; the tail past nnz stays unused)
                _binning.compact_rows_inplace(out, row_nnz, R, indptr, n_threads)
                indices = out[:nnz]
            else:
                indices = _binning.empty(nnz, idx)
                _binning.compact_rows(out, row_nnz, R, indptr, indices, n_threads)
            del out
        data = _constant_data(nnz, self._value(), self._dtype_, n_threads)
        Z = sp.csr_matrix((data, indices, indptr), shape=(n_samples, D), copy=False)
        Z.has_sorted_indices = True
        if miss_rows.shape[0]:  # new rows that left a constant feature's training bin
            Z = _drop_entries(Z, miss_rows, miss_grids, grids.grid_ptr)
        return Z

    def _transform_hashed(self, X, n_threads, paths):
        """Hashed Z of dense X (bins already checked to fit in int64)."""
        n_samples = X.shape[0]
        widths, offsets = self._drawn_grids()
        R = widths.shape[0]
        m = int(self.n_features_out_)
        out = _binning.empty(n_samples * R, np.int32 if m <= 2**31 else np.int64)
        mult = _binning.empty(n_samples * R, np.int32)
        row_nnz = np.empty(n_samples, dtype=np.int64)
        _binning.transform_hashed(X, widths, offsets, np.uint64(m), out,
                                  mult, row_nnz, n_threads, paths)
        nnz = int(row_nnz.sum())
        idx = index_dtype(m, nnz)
        if nnz == n_samples * R and out.dtype == idx:
            del mult  # no collision in any row: every multiplicity is 1
            indices = out
            indptr = np.arange(0, nnz + 1, R, dtype=idx)
            data = _constant_data(nnz, self._value(), self._dtype_, n_threads)
        else:
            indptr = np.zeros(n_samples + 1, dtype=idx)
            np.cumsum(row_nnz, out=indptr[1:])
            indptr64 = indptr.astype(np.int64, copy=False)
            indices = _binning.empty(nnz, idx)
            _binning.compact_rows(out, row_nnz, R, indptr, indices, n_threads)
            del out
            data = _binning.empty(nnz, self._dtype_)
            _binning.compact_mult(mult, row_nnz, R, indptr64, float(np.sqrt(np.float64(R))),
                                  data, n_threads)
        Z = sp.csr_matrix((data, indices, indptr), shape=(n_samples, m), copy=False)
        Z.has_sorted_indices = True
        return Z

    # ------------------------------------------------------------------ feature names
    def get_feature_names_out(self, input_features=None):
        """Names of Z's columns, scikit-learn style: ``randombinning0``,
        ``randombinning1``, ... (``n_features_out_`` of them; a column is a bin of a grid,
        not a function of one input feature).

        Parameters
        ----------
        input_features : array-like of str or None
            Checked against ``feature_names_in_`` / ``n_features_in_`` when given.

        Returns
        -------
        ndarray of str objects (n_features_out_,)
        """
        check_is_fitted(self, "n_bins_")
        _check_feature_names_in(self, input_features, generate_names=False)
        n = int(self.n_features_out_)
        if n > MAX_FEATURE_NAMES:
            raise ValueError(
                f"Z has {n} columns (n_features={self.n_features}), more than the "
                f"{MAX_FEATURE_NAMES} this method names: use a smaller n_features"
            )
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(n)], dtype=object)

    # ------------------------------------------------------------------ diagnostics
    def predicted_speedup(self, n_threads):
        """Expected speedup of parallel randomized CD with tau threads (paper eq. 29):

            tau / (1 + (R - 1)(tau - 1) / (D - 1))

        R = n_grids non-zeros per row, D = n_features_out_ columns; 1.0 if D <= 1.
        """
        check_is_fitted(self, "n_bins_")
        tau = check_int(n_threads, "n_threads", low=1)
        R = self.n_bins_.shape[0]
        D = self.n_features_out_
        if D <= 1:
            return 1.0
        return tau / (1.0 + (R - 1) * (tau - 1) / (D - 1))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR / CSC, an implicit zero is the value 0
        try:
            tags.transformer_tags.preserves_dtype = [check_output_dtype(self.dtype).name]
        except ValueError:
            tags.transformer_tags.preserves_dtype = []
        return tags
