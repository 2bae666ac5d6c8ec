"""The plan of a binning: which code path and table each grid gets, how the grids are
split among threads, and what the work costs in memory (docs/design.md contracts 3-6).

Nothing here changes Z: every choice (threshold or division keys, direct or hashed
tables, the dense transform index, the split of the grids among threads) gives the
same Z bit for bit; the choices change speed and memory only. The memory estimates
refuse, before any work, a fit or transform that cannot fit in the memory available.
"""
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from . import _binning
from .._memory import available_memory
from .._threads import effective_n_threads
from .._validation import INT64_HIGH, INT64_LOW

#: rows x grids x columns below which a binning kernel runs on one thread: about a
#: millisecond of one thread's work, what a thread team's wake-up can cost beside other
#: processes (at 1 << 17 a 143-row transform of breast cancer woke a second thread)
SMALL_WORK = 1 << 22


@dataclass(frozen=True)
class _Paths:
    """The code paths the binning kernels may take (private; tests force each one).

    Every path gives the same Z bit for bit (docs/design.md contracts 3-6); the defaults
    let the data and the CPU choose. ``simd``: AVX-512 bins, threshold keys and rank
    sort where the CPU has them; ``thresholds``: threshold keys for the grids the plan
    gives them (``_thresholds``); ``direct``: direct fit tables and the dense transform
    index where the plan gives them (``_direct_bits``, ``_dense_bits``);
    ``simd_rows``: a transform block of fewer rows takes the scalar threshold keys and
    table queries even where ``simd`` holds (those AVX-512 kernels run eight rows to a
    vector: one row pays for eight); ``small_work``: below this much work (rows x grids x columns) one thread runs,
    as starting a parallel region costs more than the work. ``ranges``: the fit's row
    ranges (:func:`_fit_ranges`): None lets the plan choose, 0 is the grid mode (each
    thread fits a run of grids over all rows), k >= 1 the row-range mode with k ranges;
    ``merge_pairs``: the row-range mode merges a grid with at least this many range bins
    by all threads (0: every grid); ``merge_direct``: a grid that one thread merges goes
    by key where its keys are small enough (else by hash partitions). ``constants``: leave the
    features constant over the training rows out of the tables ("always", where the
    draw can be repeated), never, or "auto": for sparse X, or where the dense copy of
    the varying features costs less than the grid arrays of the constant ones
    (:func:`_drop_constants`). ``team``: the grid mode's team path (the threads read and
    transpose X once for all of them, ``_binning.fit_tables(team=True)``): None lets the
    plan choose (:func:`_fit_team`), True / False force it on (where the kernel can take
    it) or off.
    """

    simd: bool = True
    simd_rows: int = 2
    thresholds: bool = True
    direct: bool = True
    small_work: int = SMALL_WORK
    ranges: int = None
    merge_pairs: int = 1 << 16
    merge_direct: bool = True
    constants: str = "auto"
    team: bool = None


_DEFAULT_PATHS = _Paths()


def _threads_for(n_threads, work, paths=_DEFAULT_PATHS):
    """One thread for small inputs (the output is the same for any thread count)."""
    return 1 if work < paths.small_work else n_threads


def _jobs_for(n_jobs, work, paths=_DEFAULT_PATHS):
    """_threads_for(effective_n_threads(n_jobs), work, paths), the machine's load probed
    only where the work may use more than one thread (a transform of a few rows: none)."""
    if work < paths.small_work:
        return 1
    return effective_n_threads(n_jobs)


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


def _dense_bits(lo, hi, n_words, n_bins, key_bits=None):
    """Per grid the key bits of its dense transform index, -1 for none (``key_bits``: the
    grids' _key_bits, when already computed): an int64 (R,) array for
    ``GridTables.build_index``."""
    if key_bits is None:
        key_bits = _key_bits(lo, hi, n_words)
    bits = np.asarray(key_bits, dtype=np.int64)
    n_bins = np.asarray(n_bins, dtype=np.int64)
    small = (bits >= 0) & (bits <= INDEX_MAX_BITS)
    dense = small & ((np.int64(1) << np.where(small, bits, 0))
                     <= INDEX_PER_BIN * np.maximum(n_bins, 8))
    return np.ascontiguousarray(np.where(dense, bits, -1), dtype=np.int64)


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


# The fit's row-range mode (_binning.fit_ranges): every thread bins its own range of
# rows for every grid, and the ranges' tables are merged. It reads X once in all, where
# the grid mode's threads each read all of X once per group of grids, and it splits a
# heavy grid's work among the threads, where the grid mode gives a grid to one thread
# (docs/benchmarks/threads.md: at 16 threads those two bound the grid mode's tables at
# about 4.6x). It pays the merge and a rewrite of the ids of all ranges but the first:
# on the project's 2-vCPU AMD EPYC (N = 10^6, d = 16, R = 64, sigma 1) its fit_tables did
# about the grid mode's work with one range, 1.6-2.0x with 16 ranges (later, the whole
# fit_transform's user CPU: 2.4x, and 1.8x since the merge by key), and was slower on 2
# threads (0.28-0.32 s against 0.24-0.29 s); where every row has a bin of its own
# (100,000 rows, sigma 0.05, 512 grids) the merges add 30-45%. Measured on a 16-core Xeon
# VM (docs/benchmarks/threads.md, runs 6 and 8; N = 4 x 10^6, R = 64): the modes tie at
# 16 threads (fit_transform 693 / 714 ms against the grid mode's 690 / 731 ms) and the
# grid mode wins at 4 and 8, so the threshold is 16; that the row-range mode wins above
# 16 threads (where the grid mode's heaviest grid bounds it harder) is still a model.
RANGES_MIN_THREADS = 16
RANGE_MIN_ROWS = 1 << 14


def _fit_ranges(n_threads, n_rows, paths=_DEFAULT_PATHS):
    """The row ranges of a fit on ``n_threads`` threads: 0 for the grid mode, else one
    range per thread (the plan's rule; ``paths.ranges`` overrides it)."""
    if paths.ranges is not None:
        return int(paths.ranges)
    if n_threads < RANGES_MIN_THREADS or n_rows < n_threads * RANGE_MIN_ROWS:
        return 0
    return int(n_threads)


# The grid mode's team path (fit_tables(team=True)): with T threads the plain grid mode
# reads and transposes X T times, and on a 16-core Xeon VM a sweep over the rows cost 29 ns
# a row with 16 sweeping at once against 13-16 ns alone (docs/benchmarks/threads.md, run
# 12). The team reads X once, at the price of a barrier a step and of waiting for the
# slowest thread at every step. On the project's 2-vCPU AMD EPYC it is 3-8% slower than
# the plain grid mode on 2 threads (no contention there to remove); on many cores it is
# unmeasured (no lent machine after it was built), so the plan does not choose it: only
# ``paths.team=True`` (tests, compare_threads.py's binning-team stage) runs it.


def _fit_team(paths=_DEFAULT_PATHS):
    """Whether the grid mode takes its team path: ``paths.team`` where set, else never
    (see above)."""
    return bool(paths.team) if paths.team is not None else False


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
        grids.build_index(_dense_bits(lo, hi, grids.n_words, n_bins))
        return grids
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        raise ValueError(f"damaged or foreign RandomBinning grid tables: {exc}") from exc


def _available_memory():
    """Bytes of memory available to a new allocation, or None (rbcd._memory; a module
    attribute of its own so that tests can patch the binning's view alone)."""
    return available_memory()

#: Bytes per (grid, varying feature) of the fit's grid arrays (widths, offsets, inverse
#: widths, bin bounds, key layout, range bounds, threshold scratch).
GRID_BYTES_PER_ENTRY = 96


#: Bytes per grid beyond its (grid, feature) arrays: the fitted grid's numpy arrays (keys,
#: bucketed tables, dense index: about 100 bytes of header each, a capsule each), its C
#: structs and its entries in the per-grid vectors. Measured about 1.3 KB a grid at 100
#: to 2,000 rows x 3 features and 10**5 to 10**6 grids, where the estimate without it
#: was 4.9 to 6.5 times below the peak (issue 31 item 9: n_grids=10**7 at 4x).
GRID_BYTES_FIXED = 2048

#: Bytes per (grid, feature) of the plan's temporaries on top of GRID_BYTES_PER_ENTRY
#: (the threshold and range-bound searches' masks and spans): the fit of 100 rows x
#: 20,000 features, 64 grids, peaked 7% above the estimate without them (twice that here:
#: the peak varies by a few percent from run to run).
GRID_BYTES_TRANSIENT = 32

#: Rows of the kernels' row block (_binning's ROW_BLOCK): each thread keeps a block of
#: rows transposed (8 bytes per value) and the block's ids for its grids.
SCRATCH_ROWS = 256


def _thread_scratch(n_threads, n_rows, n_cols, n_grids, transform):
    """Bytes of the binning kernels' per-thread scratch: the transposed row block (d
    values per row, all SCRATCH_ROWS of them: calloc may serve it from the heap, every
    page touched), and the staged ids of the block (fit: for at most 256 grids at once;
    transform: for every grid)."""
    rows = SCRATCH_ROWS
    staged = int(n_grids) if transform else min(int(n_grids), 256)
    return int(n_threads) * (8 * max(int(n_cols), 1) * (rows + 2)
                             + 8 * SCRATCH_ROWS * staged)


def _fit_memory(n_rows, n_grids, n_varying, copy_bytes, out_bytes_per_entry):
    """A lower estimate of the bytes a fit or transform needs at its peak: the grid
    arrays, the dense copy of the varying columns, and Z's arrays (``out_bytes_per_entry``
    per row and grid: indices, values and the kernels' scratch); the callers add each
    grid's objects and the threads' scratch. The tables come on top (they depend on the bins found, from a few bytes per grid to about 15 bytes per
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



def check_fit_memory(X, n_grids, n_varying, dtype, mode, exact, n_threads=1):
    """Refuse, before the work, a fit that cannot fit in the memory available (``mode``:
    "fit", "Z" or "columns", as RandomBinning._fit; ``n_varying``: the features that vary
    over the training rows; ``n_threads``: the kernels' threads, each with its scratch)."""
    n, d = X.shape
    n_var = n_varying
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
    copy += GRID_BYTES_FIXED * n_grids  # the fitted grids' objects
    copy += GRID_BYTES_TRANSIENT * n_grids * max(n_var, 1)
    copy += _thread_scratch(min(n_threads, n_grids), n, n_var, n_grids, transform=False)
    if not exact and mode != "fit":  # fit_transform: the hashed transform's scratch
        copy += _thread_scratch(n_threads, n, d, n_grids, transform=True)
    _check_memory(_fit_memory(n, n_grids, n_var, copy, per_entry),
                  f"RandomBinning.fit on {n} rows x {d} features ({n_var} varying)",
                  n_grids)


def check_transform_memory(X, n_grids, n_copy, n_threads=1):
    """Refuse, before the work, a transform of X that cannot fit in the memory available
    (``n_copy``: the columns binned, copied dense from sparse X; ``n_threads``: the
    kernels' threads, each with its scratch)."""
    n = X.shape[0]
    idx = 4 if n * n_grids < 2**31 else 8
    scratch = _thread_scratch(n_threads, n, n_copy, n_grids, transform=True)
    _check_memory(_fit_memory(n, n_grids, 0, (8 * n * n_copy if sp.issparse(X) else 0)
                              + scratch, 2 * idx + 8 + 4),
                  f"RandomBinning.transform of {n} rows", n_grids)
