"""Random binning on an array module ``xp`` (cupy on a GPU; numpy in CI): the same contract
as the CPU binning (docs/design.md contracts 2-7), Z equal bit for bit.

Pipeline of a fit (docs/gpu.md):

1. Validate X on its device, column extremes and the finiteness check there; sigma="scale"
   from the CPU's own sampled pairs (rbcd._scale: the 2000 pairs are gathered to the host
   and summed as the CPU sums them); the grid draw on the host, exactly the CPU's
   (contract 2); the int64 range check of the extremes' bins (contract 3) with the CPU's
   error.
2. Per grid, the packed key of every row, with the CPU's bit layout
   (``rbcd.binning._binning.pack_layout``): field j = floor((x_j - u_j) / w_j) - lo_j.
3. First appearance (contract 4), exactly: sort the (key, row) pairs -- one uint64
   ``key << row_bits | row`` when it fits, else stable sorts of the key words, least
   significant first -- so that equal keys form segments whose first entry is their
   smallest row (a segmented minimum). Ranking the segments by that row numbers the bins
   by first appearance. No hash is involved: equal segments mean equal bin vectors.
4. The same sort gives the grid-sorted (CSC) layout: the rows of each bin, increasing,
   written to ``col_ptr[bin] + position in the segment``; the labels (R, N) int32 are the
   local bin of each row, grid-major.

Transform of new rows: per grid the fitted keys (in id order) and the new rows' keys are
sorted together (stable, fitted first), so a new row's segment starts with its fitted bin
if there is one; a row with a bin outside the training range of some column gets none
(contract 6).
"""
import copy
import functools
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import _check_feature_names

from . import _ops
from ._ops import get_xp  # noqa: F401 (the estimators' hooks take it from here)
from .._random import make_generator
from .._scale import DEFAULT_FACTOR, N_PAIRS, _pairs_for, _robust_median, range_scale
from .._validation import check_sample_weight, index_dtype

__all__ = ["GridLayout", "CudaTables", "fit_layout", "fit", "fit_transform", "transform",
           "transform_labels", "to_cpu", "check_X_xp"]


# ---------------------------------------------------------------------------------- input
def check_X_xp(xp, X, name="X"):
    """X as a C-contiguous float64 2-D array of ``xp`` (numpy, cupy, or anything with
    ``__cuda_array_interface__`` / the array protocol). Dense only."""
    if sp.issparse(X) or type(X).__module__.startswith("cupyx.scipy.sparse"):
        raise ValueError(f"device='cuda' needs dense {name}: sparse input is not supported")
    if _ops.is_numpy(xp):
        A = np.asarray(_ops.to_host(X))
    else:   # host input (a data frame, a list) through numpy first
        A = xp.asarray(X if _ops.on_gpu(X) else np.asarray(X))
    if A.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric, got dtype {A.dtype}")
    if A.ndim != 2:
        raise ValueError(f"Expected a 2D array for {name}, got {A.ndim}-D with shape {A.shape}")
    if A.shape[0] < 1:
        raise ValueError(f"{name} has 0 samples; at least 1 is required")
    if A.shape[1] < 1:
        raise ValueError(f"{name} has 0 features; at least 1 is required")
    return xp.ascontiguousarray(A, dtype=xp.float64)


def _extremes(xp, X, name="X"):
    """Column minima and maxima (host float64), after the finiteness check (the CPU's
    message: the first non-finite entry in row-major order). One pass over X
    (_ops.column_extremes); the entry named is looked for only when there is one."""
    cmin, cmax, finite = _ops.column_extremes(xp, X)
    if not finite:
        flat = int(xp.argmin(xp.isfinite(X).ravel()))
        i, j = divmod(flat, X.shape[1])
        value = float(X[i, j])
        raise ValueError(f"{name} contains NaN or infinity ({value!r}) at row {i}, column {j}")
    return np.asarray(cmin, dtype=np.float64), np.asarray(cmax, dtype=np.float64)


def _scale_sigma(xp, X, sample_weight=None):
    """sigma="scale" exactly as rbcd._scale.scale_sigma: the same pairs (drawn by
    ``sample_weight``, host or device, when given), the same running sums, on the host
    (2 * N_PAIRS rows are copied)."""
    if sample_weight is None:
        found = _unweighted_rows(X.shape[0])
    else:
        pairs = _pairs_for(X.shape[0], N_PAIRS, _ops.to_host(sample_weight))
        found = None if pairs is None else _pair_rows(*pairs)
    if found is None:
        return float(DEFAULT_FACTOR) * 1.0
    uniq, a, b = found
    rows = _ops.to_host(X[_ops.on_device(xp, uniq)])
    # huge or tiny rows: computed down by a power of two, as the CPU rule (_in_range: the
    # same power of two of the same rows)
    scale = range_scale(rows)
    if scale != 1.0:
        rows = rows / scale
    with np.errstate(all="ignore"):
        dist = np.cumsum(np.abs(rows[a] - rows[b]), axis=1)[:, -1]
    return float(DEFAULT_FACTOR) * _robust_median(dist, scale)


def _pair_rows(i, j):
    """(rows, a, b): the sorted distinct rows of the pairs (i, j), and the pairs as
    positions in them."""
    uniq = np.unique(np.concatenate([i, j]))
    return uniq, np.searchsorted(uniq, i), np.searchsorted(uniq, j)


@functools.lru_cache(maxsize=16)
def _unweighted_rows(n):
    """_pair_rows of the unweighted pairs of n rows (None below two rows), cached as the
    pairs are (rbcd._scale._sampled_pairs); read-only."""
    pairs = _pairs_for(n, N_PAIRS)
    if pairs is None:
        return None
    out = _pair_rows(*pairs)
    for a in out:
        a.flags.writeable = False
    return out


def _raise_bad_bins(xp, X, cols, widths, offsets, sigma=None, param=None):
    """The CPU's error (rbcd.binning._input._raise_bad_bins); at fit ``sigma`` is the
    value used and ``param`` the estimator's sigma parameter (its advice differs when
    sigma="scale" gave the value)."""
    from ..binning._input import _raise_bad_bins as raise_cpu
    raise_cpu(_ops.to_host(X), cols, widths[:, cols], offsets[:, cols], sigma, param)


# ---------------------------------------------------------------------------------- names
def check_names(est, X):
    """The feature-name check of new rows X (before any conversion): scikit-learn's, a
    ValueError for other or reordered names, a UserWarning for an array after a data
    frame (or the reverse)."""
    _check_feature_names(est, X, reset=False)


def check_n_features(est, d, expected):
    """scikit-learn's feature-count error, naming ``est``."""
    if d != expected:
        raise ValueError(f"X has {d} features, but {type(est).__name__} is expecting "
                         f"{expected} features as input.")


def _bin_bounds(widths, offsets, cmin, cmax):
    from ..binning._input import _bin_range
    qlo, qhi, bad = _bin_range(widths, offsets, cmin, cmax)
    return qlo, qhi, bad


# ---------------------------------------------------------------------------------- state
class CudaTables:
    """The fitted state of a device binning (host arrays; device copies made on use).

    ``widths``, ``offsets`` (R, d); ``lo``, ``hi`` (R, d) int64 training bin bounds; ``cmin``,
    ``cmax`` (d,); ``grid_ptr`` (R + 1,) int64; ``keys`` list of R uint64 arrays (n_bins_r,
    n_words_r), each grid's packed keys in local id order (the CPU's layout, so that
    ``to_cpu`` hands them to the CPU tables unchanged).
    """

    def __init__(self, widths, offsets, lo, hi, cmin, cmax, grid_ptr, keys):
        self.widths = widths
        self.offsets = offsets
        self.lo = lo
        self.hi = hi
        self.cmin = cmin
        self.cmax = cmax
        self.grid_ptr = grid_ptr
        self.keys = keys
        self._device = {}

    def layout(self):
        from ..binning import _binning
        word, shift, n_words, top_bits = _binning.pack_layout(self.lo, self.hi)[:4]
        return word, shift, n_words, top_bits

    def device_arrays(self, xp):
        """(u, w, lo, hi, shift, keys) on xp (word, n_words on the host), cached per module;
        once fitted also, for the one-word grids (``single`` (R,) uint8), their keys sorted,
        concatenated grid after grid (``skeys`` uint64, ``koff`` (R + 1,) int64) with their
        local ids (``sids`` int32), for _ops.match_keys."""
        key = xp.__name__
        if key not in self._device:
            word, shift, n_words, _ = self.layout()
            arrays = dict(
                u=_ops.on_device(xp, self.offsets, np.float64),
                w=_ops.on_device(xp, self.widths, np.float64),
                lo=_ops.on_device(xp, self.lo, np.int64),
                hi=_ops.on_device(xp, self.hi, np.int64),
                shift=_ops.on_device(xp, shift, np.int64),
                word=word, n_words=n_words,
                keys=[_ops.on_device(xp, k, np.uint64) for k in (self.keys or [])],
            )
            if self.keys:
                single = np.asarray(n_words) == 1
                parts, ids = [], []
                for r, k in enumerate(self.keys):
                    k1 = k[:, 0] if single[r] else k[:0, 0]
                    order = np.argsort(k1, kind="stable")
                    parts.append(k1[order])
                    ids.append(order.astype(np.int32))
                koff = np.zeros(len(parts) + 1, dtype=np.int64)
                np.cumsum([p.shape[0] for p in parts], out=koff[1:])
                arrays.update(
                    single=_ops.on_device(xp, single.astype(np.uint8), np.uint8),
                    skeys=_ops.on_device(xp, np.concatenate(parts).astype(np.uint64), np.uint64),
                    sids=_ops.on_device(xp, np.concatenate(ids).astype(np.int32), np.int32),
                    koff=_ops.on_device(xp, koff, np.int64), any_single=bool(single.any()))
            self._device[key] = arrays
        return self._device[key]

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_device"] = {}
        return state


class GridLayout:
    """The training matrix Z of a device fit, by its grid structure (no CSR needed).

    ``labels`` (R, N) int32: row i's bin in grid r, local id (grid-major). ``col_ptr`` (D + 1,)
    int64 and ``rows`` (R N,) int32: the CSC layout, grid r's entries at [r N, (r + 1) N),
    each column's rows increasing (equal to the CPU's RBColumns). ``piece_*``: the CSC
    entries cut into pieces of at most _ops.PIECE entries inside one column, for the
    atomic-free Z^T U (one warp per piece, then one thread per column). ``value``: every
    stored value, 1/sqrt(R). ``dtype``: the dtype of Z's values (the binning's ``dtype``):
    RidgeCG(device="cuda") fitted on the layout gives coefficients of that dtype, as the
    CPU solver fitted on that Z does.
    """

    def __init__(self, xp, labels, grid_ptr, col_ptr, rows, value, dtype=np.float64):
        self.xp = xp
        self.dtype = np.dtype(dtype)   # Z's value dtype (the binning's): the solver's output
        self.labels = labels
        self.grid_ptr_host = np.asarray(grid_ptr, dtype=np.int64)
        self.grid_ptr = _ops.on_device(xp, self.grid_ptr_host, np.int64)
        self.col_ptr = col_ptr
        self.rows = rows
        self.value = float(value)
        self.n_rows = int(labels.shape[1])
        self.n_grids = int(labels.shape[0])
        self.n_columns = int(self.grid_ptr_host[-1])
        cp = _ops.to_host(col_ptr).astype(np.int64)
        counts = np.diff(cp)
        n_pieces = -(-counts // _ops.PIECE)
        piece_ptr = np.zeros(counts.shape[0] + 1, dtype=np.int64)
        np.cumsum(n_pieces, out=piece_ptr[1:])
        col = np.repeat(np.arange(counts.shape[0], dtype=np.int64), n_pieces)
        start = cp[col] + _ops.PIECE * (np.arange(col.shape[0], dtype=np.int64) - piece_ptr[col])
        end = np.minimum(start + _ops.PIECE, cp[col + 1])
        self.piece_ptr = _ops.on_device(xp, piece_ptr, np.int64)
        self.piece_start = _ops.on_device(xp, start, np.int64)
        self.piece_end = _ops.on_device(xp, end, np.int64)
        # the pieces in the order of their first rows, for rb_piece_sums' warps
        if start.shape[0]:
            self.piece_order = _stable_argsort(xp, rows[self.piece_start]).astype(xp.int64)
        else:
            self.piece_order = xp.zeros(0, dtype=xp.int64)

    @property
    def shape(self):
        return (self.n_rows, self.n_columns)

    def dot(self, W):
        """Z @ W, W (D, k) -> (N, k)."""
        return _ops.zdot(self.xp, self.labels, self.grid_ptr, W, self.value)

    def tdot(self, U):
        """Z^T @ U, U (N, k) -> (D, k): piece sums over the grid-sorted layout, then column
        sums. No atomics: the sums do not depend on scheduling."""
        part = _ops.piece_sums(self.xp, self.rows, self.piece_start, self.piece_end, U,
                               self.piece_order)
        return _ops.segment_sums(self.xp, part, self.piece_ptr, self.value)

    def dot_into(self, W, out):
        """dot(W) written into ``out`` (N, k): nothing allocated (a CUDA graph's step)."""
        return _ops.zdot(self.xp, self.labels, self.grid_ptr, W, self.value, out=out)

    def tdot_into(self, U, part, out):
        """tdot(U) written into ``out`` (D, k), its piece sums into ``part`` (number of
        pieces, k): nothing allocated (a CUDA graph's step); the same sums as tdot."""
        _ops.piece_sums(self.xp, self.rows, self.piece_start, self.piece_end, U,
                        self.piece_order, out=part)
        return _ops.segment_sums(self.xp, part, self.piece_ptr, self.value, out=out)

    def to_rbcolumns(self):
        """The CPU's RBColumns of this Z (host copies)."""
        from ..binning.columns import RBColumns
        rows = _ops.to_host(self.rows)
        return RBColumns(_ops.to_host(self.col_ptr).astype(np.int64),
                         rows.astype(np.int32 if self.n_rows < 2**31 else np.int64),
                         self.grid_ptr_host.copy(), self.value, self.n_rows)


# ---------------------------------------------------------------------------------- keys
def _stable_argsort(xp, a):
    if _ops.is_numpy(xp):
        return np.argsort(a, kind="stable")
    return xp.argsort(a)  # cupy's argsort is stable


def _grid_words(xp, X, u, w, lo, hi, word, shift, n_words):
    """Packed key words (n_words, n) uint64 of one grid, and inside (n,) bool: every bin
    within [lo, hi] (the generic path: any number of words, any module)."""
    if _ops.is_numpy(xp):
        with np.errstate(all="ignore"):
            b = np.floor((X - u) / w)
    else:
        b = xp.floor((X - u) / w)
    b = b.astype(xp.int64)
    ok = (b >= lo) & (b <= hi)
    inside = xp.all(ok, axis=1)
    field = xp.where(ok, b - lo, 0).astype(xp.uint64) << shift.astype(xp.uint64)
    words = xp.empty((int(n_words), X.shape[0]), dtype=xp.uint64)
    word = np.asarray(word)
    for k in range(int(n_words)):
        cols = np.flatnonzero(word == k)
        if cols.shape[0] == 0:
            words[k] = 0
        else:  # the fields of one word have disjoint bits: their sum is their OR
            words[k] = xp.sum(field[:, _ops.on_device(xp, cols)], axis=1, dtype=xp.uint64)
    return words, inside


def _row_bits(n):
    return max(1, int(n - 1).bit_length())


def _combines(n, r, n_words, top_bits):
    """Whether grid r's (key, row) pairs fit one uint64 word (key << row_bits | row)."""
    return int(n_words[r]) == 1 and int(top_bits[r]) + _row_bits(n) <= 64


def _sorted_words(xp, X, dev, r):
    """Grid r's (key << row_bits | row) words, sorted (its pairs fit one word)."""
    pairs = _ops.grid_keys(xp, X, dev["u"][r], dev["w"][r], dev["lo"][r], dev["hi"][r],
                           dev["shift"][r], _row_bits(X.shape[0]), fit=True)
    return xp.sort(pairs)


def _sorted_pairs(xp, X, dev, r, n_words, top_bits, combine):
    """Rows of X sorted by (key of grid r, row): (row_s (n,) int64, words_s (W, n) uint64)."""
    n = X.shape[0]
    row_bits = _row_bits(n)
    W = int(n_words[r])
    if combine and _combines(n, r, n_words, top_bits):
        s = _sorted_words(xp, X, dev, r)
        row_s = (s & xp.uint64((1 << row_bits) - 1)).astype(xp.int64)
        return row_s, (s >> xp.uint64(row_bits))[None, :]
    words, _ = _grid_words(xp, X, dev["u"][r], dev["w"][r], dev["lo"][r], dev["hi"][r],
                           dev["word"][r], dev["shift"][r], W)
    perm = xp.arange(n, dtype=xp.int64)
    for k in reversed(range(W)):  # least significant word first; stable keeps row order
        perm = perm[_stable_argsort(xp, words[k][perm])]
    return perm, words[:, perm]


def _segments(xp, words_s):
    """Segment starts (n_seg,) and segment id of every position (n,) of sorted key words."""
    n = words_s.shape[1]
    new = xp.empty(n, dtype=xp.bool_)
    new[:1] = True
    if n > 1:
        new[1:] = xp.any(words_s[:, 1:] != words_s[:, :-1], axis=0)
    seg_start = xp.flatnonzero(new)
    seg_id = xp.cumsum(new.astype(xp.int64)) - 1
    return seg_start, seg_id


def number_grid(xp, row_s, words_s):
    """First-appearance numbering of one grid from its (key, row)-sorted rows.

    Returns ``(labels (n,) int32, col_ptr (n_bins + 1,) int64, rows_csc (n,) int32,
    keys_by_id (n_bins, W) uint64, max_count)``: labels[i] = the bin of row i, numbered by
    first appearance; rows_csc the rows of bin 0, then bin 1, ..., increasing in each."""
    n = row_s.shape[0]
    seg_start, seg_id = _segments(xp, words_s)
    n_bins = int(seg_start.shape[0])
    first_row = row_s[seg_start]            # the segmented minimum: sorted by (key, row)
    col_of_seg = xp.empty(n_bins, dtype=xp.int64)
    col_of_seg[_stable_argsort(xp, first_row)] = xp.arange(n_bins, dtype=xp.int64)
    lab_sorted = col_of_seg[seg_id]
    labels = xp.empty(n, dtype=xp.int32)
    labels[row_s] = lab_sorted.astype(xp.int32)
    seg_len = xp.diff(xp.concatenate([seg_start, xp.asarray([n], dtype=seg_start.dtype)]))
    counts = xp.empty(n_bins, dtype=xp.int64)
    counts[col_of_seg] = seg_len
    col_ptr = xp.zeros(n_bins + 1, dtype=xp.int64)
    col_ptr[1:] = xp.cumsum(counts)
    dest = col_ptr[lab_sorted] + (xp.arange(n, dtype=xp.int64) - seg_start[seg_id])
    rows_csc = xp.empty(n, dtype=xp.int32)
    rows_csc[dest] = row_s.astype(xp.int32)
    keys = xp.empty((n_bins, words_s.shape[0]), dtype=xp.uint64)
    keys[col_of_seg] = words_s[:, seg_start].T
    return labels, col_ptr, rows_csc, keys, int(seg_len.max())


#: sorted words (rows x grids) of one batch of grids at most: where rows are few, several
#: grids share one sort, one scan and one set of array operations (at 10^6 rows a grid's
#: dozens of small steps cost the host more time than the GPU's work on them)
BATCH_WORDS = 1 << 24


#: bits of a narrow sort word (rb_batch_keys32): a batch whose grids' key ranges and rows
#: fit them is sorted as uint32, four radix passes over 4-byte words instead of eight over
#: 8-byte ones (the sort was a quarter to a third of a fit at 10^6-10^7 rows)
NARROW_BITS = 32


def _narrow(batch, top_bits, row_bits):
    """The bases (G,) int64 of a batch's narrow words, or None where they do not fit
    NARROW_BITS: grid q's keys take the values base[q] .. base[q] + 2^top_bits[q] - 1 (the
    running sum of the grids' key ranges), the row below them."""
    span = np.array([1 << int(top_bits[r]) for r in batch], dtype=object)
    total = int(span.sum())
    if (total - 1).bit_length() + int(row_bits) > NARROW_BITS:
        return None
    base = np.zeros(len(batch), dtype=np.int64)
    np.cumsum(span[:-1].astype(np.int64), out=base[1:])
    return base


def _batches(fast, n, top_bits, row_bits):
    """Runs of consecutive grids of ``fast`` (increasing) to fit together: at most
    BATCH_WORDS // n grids, whose words fit a narrow word (:func:`_narrow`) or else one
    uint64 (grid q of a batch at bit key_bits + row_bits, key_bits the batch's widest key).
    Narrow and wide grids do not share a run: a second narrow sort costs less than one
    wide one."""
    g_max = max(1, BATCH_WORDS // max(int(n), 1))
    out, cur = [], []
    for r in fast:
        if cur and r == cur[-1] + 1 and len(cur) < g_max:
            narrow = _narrow(cur, top_bits, row_bits) is not None
            if narrow and _narrow(cur + [r], top_bits, row_bits) is not None:
                cur.append(r)
                continue
            key_bits = max(int(top_bits[q]) for q in cur + [r])
            if (not narrow and _narrow([r], top_bits, row_bits) is None
                    and len(cur).bit_length() + key_bits + row_bits <= 64):
                cur.append(r)
                continue
        if cur:
            out.append(cur)
        cur = [r]
    if cur:
        out.append(cur)
    return out


#: consecutive one-grid batches whose keys one pass over X computes (rb_batch_keys without
#: the grid on top): where rows are many, each grid is sorted alone, and reading X once per
#: grid made its keys cost about as much as its sort (10^7 x 16: X is 1.28 GB a pass)
KEY_GROUP = 4


def _key_group(xp, X, dev, r, single, row_bits, top_bits):
    """{grid: its (n,) key << row_bits | row words} for grid r and the next one-grid
    batches after it (``single``: the grids that form a batch alone), at most KEY_GROUP
    consecutive grids of the same width, from one pass over X: narrow (uint32, base 0)
    where the grid's keys and rows fit NARROW_BITS (:func:`_narrow`), else uint64."""
    narrow = _narrow([r], top_bits, row_bits) is not None
    g = 1
    while (g < KEY_GROUP and r + g in single
           and (_narrow([r + g], top_bits, row_bits) is not None) == narrow):
        g += 1
    words = _ops.batch_keys(xp, X, dev["u"][r:r + g], dev["w"][r:r + g], dev["lo"][r:r + g],
                            dev["shift"][r:r + g], row_bits, None,
                            base=np.zeros(g, dtype=np.int64) if narrow else None)
    return {r + q: words[q] for q in range(g)}


def _batch_front(xp, X, dev, batch, top_bits, row_bits, words=None):
    """The queued half of a batch: ``(s, key_bits, flags, seg, count)``, its sorted words
    and segment scan (:func:`_segment_ids`). One grid: its words ``key << row_bits | row``
    (``words``: unsorted, when computed ahead by :func:`_key_group`); several: the words
    ``q << (key_bits + row_bits) | key << row_bits | row`` of grid q of the batch sorted
    together (a grid's segments never meet another's); key_bits: the batch's widest key."""
    key_bits = max(int(top_bits[r]) for r in batch)
    if len(batch) == 1:
        if words is None:
            s = _sorted_words(xp, X, dev, batch[0])
        else:   # narrow words (key << row_bits | row, base 0) widen by a cast
            s = xp.sort(words)
            if s.dtype != xp.uint64:
                s = s.astype(xp.uint64)
        return (s, key_bits) + _segment_ids(xp, s, row_bits)
    r0, r1 = batch[0], batch[-1] + 1
    base = _narrow(batch, top_bits, row_bits)
    words = _ops.batch_keys(xp, X, dev["u"][r0:r1], dev["w"][r0:r1], dev["lo"][r0:r1],
                            dev["shift"][r0:r1], row_bits, key_bits,
                            base=base)
    s = xp.sort(words.reshape(-1))
    del words
    if base is not None:
        s = _ops.widen_batch(xp, s, base, row_bits, key_bits)
    return (s, key_bits) + _segment_ids(xp, s, row_bits)


def _number_batch(xp, s, flags, seg, n_seg, row_bits, key_bits, G, n, labels, rows):
    """First-appearance numbering of G grids from their words sorted together (see
    :func:`_batch_front`; a grid sorted alone: G = 1, its words without a grid on top,
    key_bits its key's): the numbering of :func:`number_grid` per grid, in a few passes
    (rb_seg_starts, rb_seg_heads, the columns' argsort, rb_seg_order, a scan of the
    counts, rb_number_batch) whatever G.

    Writes ``labels`` (G, n) int32 and ``rows`` (G n,) int32 (grid q's CSC rows at
    [q n, (q + 1) n)) in place. Returns, all on the device, ``(col_ptr (n_seg + 1,) int64``
    (the batch's columns, grid after grid, into ``rows``), ``seg_off (G + 1,)`` (grid q's
    columns are seg_off[q] .. seg_off[q + 1] - 1), ``keys (n_seg,) uint64`` in column
    order, ``counts (n_seg,) int64`` in column order)."""
    start = _ops.seg_starts(xp, flags, seg, n_seg)
    # columns: grid after grid, and within a grid by first appearance (each segment's
    # head is its smallest row)
    order_key, g_of_seg, key, length = _ops.seg_heads(xp, s, start, n, row_bits, key_bits)
    rank, counts, keys, seg_off = _ops.seg_order(xp, _stable_argsort(xp, order_key),
                                                 g_of_seg, key, length, G)
    col_ptr = xp.zeros(n_seg + 1, dtype=xp.int64)
    col_ptr[1:] = xp.cumsum(counts)
    # every sorted position p: its row i goes to its column's place in the CSC rows, and
    # its column's local id to the row's label
    _ops.number_batch(xp, s, seg, start, rank, col_ptr, g_of_seg, seg_off, n, row_bits,
                      labels.reshape(-1), rows)
    return col_ptr, seg_off, keys, counts


def _segment_ids(xp, s, row_bits):
    """(flags, seg, count): segment starts and the segment of each position of the sorted
    words s; ``count.get()`` is the last segment's number (bins - 1), fetched without
    waiting for work queued later (_ops.last_async)."""
    flags = _ops.seg_flags(xp, s, row_bits)
    seg = xp.cumsum(flags, dtype=xp.int32)
    seg -= 1
    return flags, seg, _ops.last_async(xp, seg)


# ---------------------------------------------------------------------------------- fit
def _prepare(est, X, xp, sample_weight=None):
    """Validate, extremes, sigma (``sample_weight``: for sigma="scale"), the grid draw
    (contract 2) and the range check."""
    from ..binning._draw import _warn_if_degenerate  # noqa: F401 (used by fit)
    if est.n_features is not None:
        raise ValueError("device='cuda' supports exact mode only (n_features=None); "
                         "hashed mode runs on the CPU")
    _check_feature_names(est, X, reset=True)     # a data frame's names, as the CPU's fit
    X = check_X_xp(xp, X)
    n, d = X.shape
    if n >= 2**31 - 1:
        raise ValueError(f"device='cuda' supports at most 2**31 - 2 samples, got {n}")
    # the weights are checked whenever given, as the CPU's fit does (they are used by
    # sigma="scale" only)
    sample_weight = check_sample_weight(_ops.host_value(sample_weight), n)
    n_grids, sigma, dtype, _ = est._check_params(X)
    cmin, cmax = _extremes(xp, X)
    if isinstance(est.sigma, str):
        sigma = _scale_sigma(xp, X, sample_weight)
    rng = make_generator(est.random_state)
    # docs/design.md contract 2: widths first, then offsets (the CPU's draw, on the host)
    widths = rng.gamma(2.0, sigma, size=(n_grids, d))
    offsets = rng.uniform(0.0, 1.0, size=(n_grids, d)) * widths
    qlo, qhi, bad = _bin_bounds(widths, offsets, cmin, cmax)
    if bad.any():
        _raise_bad_bins(xp, X, np.flatnonzero(bad), widths, offsets, sigma, est.sigma)
    return X, widths, offsets, qlo.astype(np.int64), qhi.astype(np.int64), cmin, cmax, sigma, dtype


def fit_layout(est, X, xp, *, combine=True, sample_weight=None):
    """Fit ``est`` (a RandomBinning) on X with module xp; returns the GridLayout of Z.

    Sets the CPU estimator's fitted attributes (n_bins_, grid_ptr_, n_features_out_,
    kappa_per_grid_, kappa_, sigma_, widths_/offsets_, n_features_in_) and the device state
    ``_cuda_tables``. ``combine``: sort one (key << row_bits | row) word where it fits
    (False: always the stable sorts of the key words; tests force both).
    ``sample_weight``: the rows' weights for sigma="scale" (RandomBinning.fit).
    """
    from ..binning._draw import _warn_if_degenerate
    X, widths, offsets, lo, hi, cmin, cmax, sigma, dtype = _prepare(est, X, xp,
                                                                    sample_weight)
    n, d = X.shape
    R = widths.shape[0]
    tables = CudaTables(widths, offsets, lo, hi, cmin, cmax, None, None)
    dev = tables.device_arrays(xp)
    _, _, n_words, top_bits = tables.layout()
    labels = xp.empty((R, n), dtype=xp.int32)
    rows = xp.empty(n * R, dtype=xp.int32)
    col_ptrs, keys = [], []
    n_bins = np.zeros(R, dtype=np.int64)
    max_count = np.zeros(R, dtype=np.int64)
    # Single-word grids go in batches of consecutive grids (_batches: one sort and one set
    # of array operations for several grids where rows are few), pipelined: a batch's bin
    # count reaches the host while the GPU already runs the next batch's keys, sort and
    # segment scan (queued before the count is asked for), so the GPU does not idle while
    # the host issues the batch's small steps. The multi-word grids take number_grid.
    row_bits = _row_bits(n)
    fast = [r for r in range(R) if combine and _combines(n, r, n_words, top_bits)]
    batches = _batches(fast, n, top_bits, row_bits)
    first = {b[0]: j for j, b in enumerate(batches)}
    single = {b[0] for b in batches if len(b) == 1}
    queued = {}
    ahead = {}           # one-grid batches' words computed with an earlier grid's (_key_group)
    done = []            # per batch or grid, in grid order: what the host needs after the loop

    def queue(j):
        if j < len(batches):
            b = batches[j]
            words = None
            if len(b) == 1:
                if b[0] not in ahead:
                    ahead.update(_key_group(xp, X, dev, b[0], single, row_bits, top_bits))
                words = ahead.pop(b[0])
            queued[j] = _batch_front(xp, X, dev, b, top_bits, row_bits, words)

    queue(0)
    r = 0
    while r < R:
        if r in first:
            j = first[r]
            batch = batches[j]
            front = queued.pop(j)
            queue(j + 1)
            G = len(batch)
            s, key_bits, flags, seg, count = front
            cp, seg_off, keys_sorted, bin_counts = _number_batch(
                xp, s, flags, seg, count.get() + 1, row_bits, key_bits, G, n,
                labels[r:r + G], rows[r * n:(r + G) * n])
            done.append(("batch", G, seg_off, keys_sorted, bin_counts))
            del front
            col_ptrs.append(cp[:-1] + r * n)
            r += G
        else:
            row_s, words_s = _sorted_pairs(xp, X, dev, r, n_words, top_bits, combine)
            lab, cp, rc, kb, mc = number_grid(xp, row_s, words_s)
            del row_s, words_s
            labels[r] = lab
            rows[r * n:(r + 1) * n] = rc
            done.append(("grid", cp.shape[0] - 1, kb, mc))
            col_ptrs.append(cp[:-1] + r * n)
            r += 1
    # the per-grid results to the host, once (no synchronisation per grid in the loop)
    r = 0
    for item in done:
        if item[0] == "grid":
            n_bins[r] = item[1]
            keys.append(np.ascontiguousarray(_ops.to_host(item[2])))
            max_count[r] = int(item[3])
            r += 1
        else:
            G = item[1]
            ks = _ops.to_host(item[3])
            bc = _ops.to_host(item[4])
            # (a grid alone owns all of its batch's columns: no copy of its offsets)
            off = (np.array([0, ks.shape[0]], dtype=np.int64) if G == 1
                   else _ops.to_host(item[2]).astype(np.int64))
            n_bins[r:r + G] = np.diff(off)
            max_count[r:r + G] = np.maximum.reduceat(bc, off[:-1])
            keys.extend(np.ascontiguousarray(ks[off[q]:off[q + 1]].reshape(-1, 1))
                        for q in range(G))
            r += G
    grid_ptr = np.zeros(R + 1, dtype=np.int64)
    np.cumsum(n_bins, out=grid_ptr[1:])
    col_ptr = xp.concatenate(col_ptrs + [xp.asarray([n * R], dtype=xp.int64)])
    tables.grid_ptr = grid_ptr
    tables.keys = keys
    tables._device = {}
    value = np.float64(1.0) / np.sqrt(np.float64(R))
    # the CPU estimator's fitted attributes
    est._constant_columns = None
    est._widths, est._offsets = widths, offsets
    est._tables = None
    est._cuda_tables = tables
    est.n_bins_ = n_bins
    est.kappa_per_grid_ = 1.0 / (max_count / n)
    est.kappa_ = float(np.mean(est.kappa_per_grid_))
    est.sigma_ = sigma
    est._dtype_ = dtype
    est.grid_ptr_ = grid_ptr
    est.n_features_out_ = int(grid_ptr[-1])
    est.n_features_in_ = d
    _warn_if_degenerate(est.kappa_, n, sigma, est.sigma,
                        identical=bool(np.all(np.asarray(cmin) == np.asarray(cmax))))
    return GridLayout(xp, labels, grid_ptr, col_ptr, rows, value, dtype)


def fit(est, X, xp, sample_weight=None):
    fit_layout(est, X, xp, sample_weight=sample_weight)
    return est


def csr_arrays(xp, labels, grid_ptr, n_columns, value, dtype):
    """(data, indices, indptr) of Z from grid labels (R, n) (-1: no entry), as the CPU
    writes them: sorted columns, index dtype by rbcd._validation.index_dtype."""
    R, n = labels.shape
    gp = _ops.on_device(xp, np.asarray(grid_ptr)[:-1], np.int64)
    lab = labels.T                                    # (n, R): row-major entries
    present = lab >= 0
    nnz = int(present.sum())
    idx = index_dtype(n_columns, nnz)
    if nnz == n * R:
        indices = (lab.astype(xp.int64) + gp[None, :]).astype(idx).ravel()
        indptr = xp.arange(0, nnz + 1, R, dtype=idx) if R else xp.zeros(n + 1, dtype=idx)
    else:
        indices = (lab.astype(xp.int64) + gp[None, :])[present].astype(idx)
        indptr = xp.zeros(n + 1, dtype=idx)
        indptr[1:] = xp.cumsum(present.sum(axis=1)).astype(idx)
    value = np.asarray(value, dtype=np.float64)
    data = xp.full(nnz, float(value), dtype=np.dtype(dtype))
    return data, indices, indptr


def _sparse_csr(xp, data, indices, indptr, shape):
    if _ops.is_numpy(xp):
        Z = sp.csr_matrix((data, indices, indptr), shape=shape, copy=False)
    else:
        import cupyx.scipy.sparse as csp
        Z = csp.csr_matrix((data, indices, indptr), shape=shape)
    Z.has_sorted_indices = True
    return Z


def fit_transform(est, X, xp, return_columns=False, sample_weight=None):
    """Z of the training rows (a cupyx CSR on a GPU), and with ``return_columns`` its
    GridLayout (the device column structure RidgeCG(device='cuda') takes as ``columns``)."""
    layout = fit_layout(est, X, xp, sample_weight=sample_weight)
    data, indices, indptr = csr_arrays(xp, layout.labels, est.grid_ptr_, est.n_features_out_,
                                       est._value(), est._dtype_)
    Z = _sparse_csr(xp, data, indices, indptr, (layout.n_rows, est.n_features_out_))
    return (Z, layout) if return_columns else Z


# ---------------------------------------------------------------------------------- transform
def match_grid(xp, fit_keys, words, inside):
    """Local bin ids (m,) int32 of new rows in one grid (-1: no fitted bin), exactly:
    the fitted keys (n_bins, W) in id order and the new rows' words (W, m) sorted together,
    fitted first among equals (stable), so a segment that holds a fitted key starts with it."""
    n_fit = fit_keys.shape[0]
    m = words.shape[1]
    allw = xp.concatenate([fit_keys.T.astype(xp.uint64), words], axis=1)
    perm = xp.arange(n_fit + m, dtype=xp.int64)
    for k in reversed(range(allw.shape[0])):
        perm = perm[_stable_argsort(xp, allw[k][perm])]
    seg_start, seg_id = _segments(xp, allw[:, perm])
    first = perm[seg_start][seg_id]
    lab_sorted = xp.where(first < n_fit, first, -1).astype(xp.int32)
    out = xp.empty(n_fit + m, dtype=xp.int32)
    out[perm] = lab_sorted
    lab = out[n_fit:]
    return xp.where(inside, lab, -1).astype(xp.int32)


def transform_labels(est, X, xp, names=True):
    """Grid labels (R, m) int32 of new rows X (-1 where a row has no fitted bin). names=False:
    X's feature names were checked by the caller (a model's predict, in its own name)."""
    tables = est.__dict__.get("_cuda_tables")
    if not isinstance(tables, CudaTables):
        raise ValueError("this RandomBinning was not fitted with device='cuda'")
    if names:
        check_names(est, X)
    X = check_X_xp(xp, X)
    m, d = X.shape
    check_n_features(est, d, tables.widths.shape[1])
    cmin, cmax = _extremes(xp, X)
    _, _, bad = _bin_bounds(tables.widths, tables.offsets, cmin, cmax)
    if bad.any():
        _raise_bad_bins(xp, X, np.flatnonzero(bad), tables.widths, tables.offsets)
    dev = tables.device_arrays(xp)
    R = tables.widths.shape[0]
    labels = xp.empty((R, m), dtype=xp.int32)
    # the one-word grids (the usual case) all in one pass: a binary search per row and grid
    # among the fitted keys, sorted (_ops.match_keys); the others by match_grid's sort
    if dev["any_single"]:
        _ops.match_keys(xp, X, dev["u"], dev["w"], dev["lo"], dev["hi"], dev["shift"],
                        dev["single"], dev["skeys"], dev["sids"], dev["koff"], labels)
    for r in range(R):
        W = int(dev["n_words"][r])
        if W == 1:
            continue
        words, inside = _grid_words(xp, X, dev["u"][r], dev["w"][r], dev["lo"][r],
                                    dev["hi"][r], dev["word"][r], dev["shift"][r], W)
        labels[r] = match_grid(xp, dev["keys"][r], words, inside)
    return labels


def transform(est, X, xp, names=True):
    """Z of new rows (a cupyx CSR on a GPU): a bin never seen in fit gives no entry.
    ``names``: as in :func:`transform_labels`."""
    labels = transform_labels(est, X, xp, names)
    data, indices, indptr = csr_arrays(xp, labels, est.grid_ptr_, est.n_features_out_,
                                       est._value(), est._dtype_)
    return _sparse_csr(xp, data, indices, indptr, (labels.shape[1], est.n_features_out_))


# ---------------------------------------------------------------------------------- to_cpu
def to_cpu(est):
    """A CPU RandomBinning (device='cpu') equal to a device-fitted one: the CPU tables are
    built from the fitted keys (the CPU's own pickled form, every key checked)."""
    tables = est.__dict__.get("_cuda_tables")
    if not isinstance(tables, CudaTables):
        return est
    from ..binning._plan import _restore_grid_tables
    out = copy.copy(est)
    out.__dict__ = {k: v for k, v in est.__dict__.items() if k != "_cuda_tables"}
    out.device = "cpu"
    state = {"version": 2, "widths": np.ascontiguousarray(tables.widths),
             "offsets": np.ascontiguousarray(tables.offsets),
             "cmin": np.ascontiguousarray(tables.cmin), "cmax": np.ascontiguousarray(tables.cmax),
             "grid_ptr": np.ascontiguousarray(tables.grid_ptr),
             "keys": [np.ascontiguousarray(k).ravel() for k in tables.keys]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out._tables = _restore_grid_tables(state)
    return out
