"""Random binning kernels: bins, exact per-grid hash tables, hashed columns,
CSR / CSC construction. Typed buffers only; ``rbcd.binning.random_binning`` validates.

Design
------
* Bins follow docs/design.md contract 3 to the bit: ``floor((x - u) / w)`` in float64
  with a true division. ``rbcd.binning.random_binning`` first runs :func:`scan_columns`
  (column min / max and the first non-finite entry, one pass over X). As
  ``x -> floor((x - u) / w)`` is monotone (IEEE subtraction, division by a
  positive number and floor all are), the bins of the column extremes bound
  every bin of the column: the int64 range check of every (row, grid, column)
  is done on those bounds, and the hot loops convert with a cast and never
  meet an out-of-range value.
* Exact mode keys each grid's table on the bin vector packed into ``W``
  64-bit words: field j holds ``b_j - lo[r, j]`` in ``bit_length(hi - lo)``
  bits (``lo``, ``hi`` the training bounds). The packing is injective, so
  comparing packed keys is comparing bin vectors: a 64-bit hash only picks
  the slot and every hit is verified against the stored key. A bin outside
  ``[lo, hi]`` in some dimension was never seen in fit (no entry, no lookup).
* Fitted tables (what transform reads; pickles hold the keys) are bucketed quotient
  tables (``rbcd/src/binning_table.h``): the bucket of a key (1 to 2 per bucket
  on average) is the top bits of a bijection of its widest word, mixed with a
  hash of the others, so a record keeps only the rest of the key and the local
  id + 1: ``ceil((key bits + 1) / 8)`` bytes. Bucket starts: a uint32 per 32
  buckets plus a byte per bucket. Every lookup compares the whole key (bucket
  and record bits: exact). Memory: about (key bits + 1) / 8 + 0.7 bytes per
  bin, e.g. 8.7 for a 63-bit key, 12.7 for a 2-word key of 90 bits (10-12 and
  20-23 with the plain keys, ids and uint32 directory of the previous layout).
* Fit tables are open addressing with linear probing at load <= 0.7, local ids
  numbering bins by first appearance in row order:
  - "pk" (single-word keys whose bits leave room for ids up to N, the common
    case): 8-byte slots ``key | (local id + 1) << used`` of any capacity (the slot
    of hash h is ``mulhi64(h, capacity)``), so a presized table holds exactly load
    0.7, with the bin counts in a uint32 array by id: 15-16 bytes per bin;
  - "fat" (other single-word keys): 12-byte slots of key and id + 1, any
    capacity (slots as pk), counts by id: about 21 bytes per bin presized;
  - multi-word keys: 8-byte slots ``(hash mod 2**32) << 32 | (local id + 1)`` (most
    misses settled without touching the keys; any capacity, slots as pk), keys and
    counts by id: about 31 bytes per bin presized for two words.
  A thread sweeps the rows once per group of its grids, a group holding at
  most MAX_WIDE fat or multi-word tables (pk and direct ones do not count), so
  that few wide tables are alive at once. At the end of a group each table's
  keys are laid out in id order, its probe structure freed, its largest bin
  count kept (the counts themselves only for the column structure), and the
  bucketed table built from the keys (table_finish); between groups and after
  fit the allocator's free pages are handed back (``rbcd_release_free_memory``).
* Threshold keys: for a single-word grid with few bins per column, the key
  is built without any division. ``x -> floor((x - u) / w)`` is monotone,
  so each bin k in (lo, hi] of a column has a smallest float64 ``t_k``
  reaching it, found at fit by bisection with the very same formula
  (``_plan._thresholds``); field j of the key is then the number of
  column-j thresholds x_j reaches, bit for bit the field of the division.
  With AVX-512, eight rows at a time (compare + masked add per threshold,
  over the row block transposed), with their hashes.
* Direct tables: a single-word grid whose keys have at most a few tens of
  thousands of values (``_plan._direct_bits``) is fitted in an array of
  one 8-byte slot per possible key (id + 1, count): no hash, no probe, no
  compare. At the end of fit its keys are exported to the bucketed format.
* Parallelism in fit, two modes with the same output. Grid mode: each thread owns a
  contiguous block of grids of about equal estimated cost (``bounds``; one table per
  grid, so the output does not depend on the thread count or the split) and
  sweeps the rows once per group of them (above), in blocks of ``ROW_BLOCK`` rows.
  Row-range mode (``fit_ranges``, from ``_plan.RANGES_MIN_THREADS`` threads): each
  thread sweeps its own range of rows for every grid of a group, in tables of its own
  (numbered by first appearance within the range); the ranges' tables are then merged
  per grid (``rbcd/src/binning_merge.h``: a bin's global id is its rank among the
  distinct bins ordered by their first (range, local id), which is the first
  appearance over all rows) and the ids of every range but the first rewritten. It
  reads X once in all and splits a heavy grid among the threads, at the price of the
  merge and the rewrite.
  In either mode (``sweep_rows``) the keys of a block are computed first and their
  slots prefetched, then probed in row order (memory-level parallelism); the block's
  local ids are staged grid by grid and copied to the row-major ids row by row. The
  next block's rows of X are prefetched while a block is transposed, and its lines of
  ids (for writing) while a block's ids are copied: between two blocks come the keys and
  probes, and the hardware prefetcher loses both streams (a sweep by itself cost twice as
  much without; benchmarks/fit_balance.py). Fine
  grids, where most rows open a new bin, are sized for all the sweep's rows after
  ``PRESIZE_ROWS`` rows instead of doubling (and rehashing) a large table
  many times.
* With AVX-512 (checked at run time) the bins of 8 columns are computed at
  once from ``(x - u) * (1 / w)``; lanes whose product is within 2**-50 |q|
  of an integer (or tiny, or huge) are redone with the true division, which
  makes the floor provably equal to the division's (see ``rbcd_floor8``).
* Transform is parallel over row blocks (tables read-only): per block and
  grid, keys (thresholds with range bounds where the grid has them), then a
  dense index lookup (``GridTables.build_index``) or the keys' buckets and
  records (``rbcd_ct_query``), the buckets' offsets prefetched, their starts read,
  the buckets' first records prefetched, the buckets scanned. Hashed mode is
  parallel over rows; with AVX-512 a row's bins and hashes are computed for
  eight grids per vector (four independent multiply chains at a time) and its
  columns sorted by rank (vector compares, no data-dependent branch) up to
  128 grids.
* Large tables live in 2 MiB-aligned blocks advised as huge pages (random
  probes otherwise miss the TLB); fitted tables are handed to numpy without
  a copy.
* State: :class:`GridTables` owns the fitted grids (a ``Layout`` for all grids
  and a ``GridTable`` per grid, pointing into arrays it holds); fit_tables and
  transform_exact take it instead of loose arrays. It pickles as its primary
  arrays (each grid's keys in id order) and is checked field by field on load
  (every key within its training bins, none repeated); the bucketed tables are
  rebuilt from the keys. A lookup scans at most one bucket of the directory,
  whose shape set_tables always checks.
* Interrupts: fit_tables looks at the signals (Ctrl-C) between row blocks from its
  thread 0 with the GIL, every INTERRUPT_PERIOD seconds; when a handler raises, every
  thread leaves at its next row block and the exception is raised once the tables are
  freed (``rbcd/src/binning_interrupt.h``; issue 31 item 10). transform's callers run
  it on row ranges (the rows are independent), so Python looks between them.
* Paths: every kernel takes a ``paths`` object (``_plan._Paths``): AVX-512
  where the CPU has it, threshold keys, direct tables / dense index. All give the
  same output bit for bit; tests force each one through it. C lives in
  ``rbcd/src/binning_keys.h`` (keys, hashes, sort: each AVX-512 path beside its
  scalar version) and ``rbcd/src/binning_alloc.h`` (table memory).
"""
from cython.parallel cimport prange, parallel
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc, qsort, realloc
from cython.view cimport array as cvarray
cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_New, PyCapsule_GetPointer, PyCapsule_Destructor
from libc.string cimport memcpy, memmove, memset
from cpython.mem cimport PyMem_RawMalloc, PyMem_RawCalloc, PyMem_RawFree
from cpython.exc cimport PyErr_CheckSignals
from cpython.ref cimport PyObject
from rbcd._openmp cimport omp_num_threads, omp_thread_num, thread_cpu_seconds
from rbcd.binning._grid cimport label_is_wide

import threading

import numpy as np

cnp.import_array()

cdef extern from "math.h" nogil:
    double floor_double "floor"(double x)
    double fabs(double x)

cdef extern from "binning_alloc.h" nogil:
    void *big_malloc "rbcd_big_malloc"(size_t nbytes) noexcept
    void *big_calloc "rbcd_big_calloc"(size_t n, size_t size) noexcept
    void *line_malloc "rbcd_line_malloc"(size_t nbytes) noexcept
    void *big_realloc "rbcd_big_realloc"(void *p, size_t nbytes) noexcept
    void release_free_memory "rbcd_release_free_memory"() noexcept

cdef extern from "binning_table.h" nogil:
    ctypedef struct CTable "rbcd_ctable":
        const uint32_t *dir
        const unsigned char *off
        const unsigned char *ent
        const int32_t *wbits
        int64_t n
        int W
        int bbits
        int E
        int dshift
    ctypedef struct CtArrays "rbcd_ct_arrays":
        uint32_t *dir
        unsigned char *off
        unsigned char *ent
        int64_t n_dir
        int64_t n_off
        int64_t n_ent
    uint64_t mulhi64 "rbcd_mulhi64"(uint64_t a, uint64_t b) noexcept
    void ct_geometry "rbcd_ct_geometry"(CTable *t, int64_t n, int W, const int32_t *wbits) noexcept
    uint32_t ct_start "rbcd_ct_start"(const CTable *t, uint64_t b) noexcept
    void ct_query1_avx512 "rbcd_ct_query1_avx512"(const CTable *t, const uint64_t *keys, int64_t n,
                                                  uint64_t *rec, int64_t stride,
                                                  uint64_t *bucket) noexcept
    uint64_t ct_query "rbcd_ct_query"(const CTable *t, const uint64_t *key, uint64_t *rec) noexcept
    int64_t ct_scan "rbcd_ct_scan"(const CTable *t, const uint64_t *rec, uint32_t p,
                                   uint32_t stop) noexcept
    int64_t ct_find "rbcd_ct_find"(const CTable *t, const uint64_t *key, uint64_t *rec) noexcept
    int ct_build "rbcd_ct_build"(const uint64_t *keys, int64_t n, int W, const int32_t *wbits,
                                 CtArrays *out) noexcept
    bint ct_ids_ok "rbcd_ct_ids_ok"(const CTable *t) noexcept
    void ct_keys "rbcd_ct_keys"(const CTable *t, uint64_t *out) noexcept
    int CT_PAD "RBCD_CT_PAD"
    int CT_DSHIFT "RBCD_CT_DSHIFT"

cdef extern from "binning_keys.h" nogil:
    ctypedef struct Thresholds "rbcd_thresholds":
        const int32_t *ej
        const double *et
        const uint64_t *ea
        Py_ssize_t n
    uint64_t GOLDEN "RBCD_GOLDEN"
    void prefetch "RBCD_PREFETCH"(const void *p) noexcept
    void prefetch_w "RBCD_PREFETCH_W"(const void *p) noexcept
    uint64_t mix64 "rbcd_mix64"(uint64_t z) noexcept
    uint64_t key_hash "rbcd_key_hash"(const uint64_t *key, int n_words) noexcept
    int64_t floor_to_int64 "rbcd_floor_to_int64"(double q) noexcept
    bint key_scalar "rbcd_key_scalar"(
        const double *x, const double *u, const double *w, const int64_t *lo,
        const int64_t *hi, const int32_t *word, const int64_t *shift, Py_ssize_t d,
        double *q, uint64_t *key) noexcept
    uint64_t thr_key "rbcd_thr_key"(
        const double *x, const int32_t *ej, const double *et, const uint64_t *ea,
        Py_ssize_t n_ent) noexcept
    void hash_grids "rbcd_hash_grids_scalar"(
        const int64_t *bins, Py_ssize_t R, Py_ssize_t d, uint64_t m, uint64_t *cols) noexcept
    void sort_u64 "rbcd_sort_u64"(uint64_t *v, Py_ssize_t n) noexcept
    bint key_avx512 "rbcd_key_avx512"(
        const double *x, const double *u, const double *w, const double *inv,
        const int64_t *lo, const int64_t *hi, const int32_t *word, const int64_t *shift,
        Py_ssize_t d, int n_words, uint64_t *key) noexcept
    int avx512_available "rbcd_avx512_available"() noexcept
    void hash_grids_avx512 "rbcd_hash_grids_avx512"(
        const double *x, Py_ssize_t d, Py_ssize_t R8, const double *uT, const double *wT,
        const double *invT, uint64_t *h) noexcept
    void rank_sort_avx512 "rbcd_rank_sort_avx512"(uint64_t *v, Py_ssize_t n, uint64_t *tmp) noexcept
    void thr_keys_avx512 "rbcd_thr_keys_avx512"(
        const double *xt, Py_ssize_t stride, Py_ssize_t n, Py_ssize_t d,
        const double *rlo, const double *rhi, Thresholds thr,
        uint64_t *keys, uint64_t *hashes, unsigned char *inside) noexcept


cdef extern from "binning_merge.h" nogil:
    ctypedef struct Merge "rbcd_merge":
        int W
        int pbits
        int64_t T
        const int64_t *base
        const uint64_t *keys
        uint32_t *counts
        uint64_t *hash
        uint32_t *order
        int64_t *part_off
        uint32_t *first
        uint32_t *gid
    ctypedef struct MergeSlot "rbcd_merge_slot":
        pass
    void merge_hash "rbcd_merge_hash"(Merge *m, int64_t t) noexcept
    int merge_partition "rbcd_merge_partition"(Merge *m, int64_t p, MergeSlot **slots,
                                               uint64_t *slots_cap) noexcept
    int64_t merge_count_new "rbcd_merge_count_new"(const Merge *m, int64_t q0, int64_t q1) noexcept
    void merge_number "rbcd_merge_number"(Merge *m, int64_t q0, int64_t q1, int64_t start) noexcept
    void merge_follow "rbcd_merge_follow"(Merge *m, int64_t q0, int64_t q1) noexcept
    void merge_output "rbcd_merge_output"(const Merge *m, int64_t q0, int64_t q1,
                                          uint64_t *out_keys, uint32_t *out_counts) noexcept
    int64_t merge_direct_range "rbcd_merge_direct"(
        const uint64_t *keys, const uint32_t *counts, int64_t n_pairs, uint32_t *id_of,
        uint32_t *gid, uint64_t *out_keys, uint32_t *out_counts, int64_t n) noexcept


cdef extern from "binning_interrupt.h" nogil:
    ctypedef struct rbcd_interrupt:
        int stop
        int enabled
        double period
        double next_look
        int finished
    double rbcd_monotonic() noexcept
    bint rbcd_stopped(const rbcd_interrupt *s) noexcept
    void rbcd_set_stop(rbcd_interrupt *s) noexcept
    bint rbcd_look_due(rbcd_interrupt *s) noexcept
    void rbcd_chunk_done(rbcd_interrupt *s) noexcept
    int rbcd_chunks_done(const rbcd_interrupt *s) noexcept
    void rbcd_nap() noexcept


cdef extern from "rbcd_team.h" nogil:
    ctypedef struct TeamBarrier "rbcd_team_barrier":
        pass
    void team_init "rbcd_team_init"(TeamBarrier *b) noexcept
    void team_wait "rbcd_team_wait"(TeamBarrier *b, int n) noexcept


cdef extern from "binning_plan.h" nogil:
    double first_reaching "rbcd_first_reaching"(double a, double b, double u, double w,
                                                double k, double guess) noexcept
    bint reaches "rbcd_reaches"(double x, double u, double w, double k) noexcept

ctypedef fused idx_t:
    int32_t
    int64_t

ctypedef fused row_t:
    int32_t
    int64_t

ctypedef fused val_t:
    float
    double


cdef enum:
    ROW_BLOCK = 256        # rows per block of the fit and transform loops (keys prefetched per block)
    INITIAL_CAPACITY = 64  # slots of a fresh table (grows by doubling)
    LABEL_BLOCK = 1024     # rows per block of training_labels (uint16 labels: 2 KiB, whole cache lines)
    MAX_GROUP = 256        # grids per sweep over the rows at most (their ids are staged per row block)
    # doubles between the columns of a transposed row block (xt): ROW_BLOCK and a cache line
    # more, so that a row's d stores into xt do not fall in the same few cache sets. With
    # the prefetches of transpose_block, 64 single-grid sweeps of 10^6 rows took 1.03-1.22 s
    # against 1.33-1.60 s with a stride of ROW_BLOCK (AMD EPYC, one thread, alternating)
    XT_STRIDE = ROW_BLOCK + 8
    MAX_WIDE = 8           # wide-slot tables (multi-word or fat) per sweep at most (see fit_grid_block)
    TOUCH_AHEAD = 4        # row blocks ahead at which fit's threads first touch ids (see fit_grid_block)
    PAGE_BYTES = 4096
    PRESIZE_ROWS = 8192    # rows after which a table is sized for all rows (multiple of ROW_BLOCK)
    RELEASE_BINS = 1 << 22 # bins (about 15 fit-table bytes each) from which fit hands free pages back
    REMAP_ROWS = 4096      # rows per block of the ids rewrite after a row-range merge
    PART_PER_THREAD = 4    # partitions per thread of a parallel merge at least (dynamic schedule)
    PART_PAIRS = 1 << 14   # pairs per partition at most, where PART_BITS allows (its slots: 512 KiB)
    PART_BITS = 12         # partitions of a parallel merge: at most 2**PART_BITS
    MERGE_DIRECT_BITS = 22 # a merge by one thread goes by key up to these key bits (16 MiB of ids)
    MERGE_DIRECT_KEYS_PER_PAIR = 4  # ... and up to this many possible keys per pair (see fit_ranges)
    TEAM_BLOCKS = 64       # row blocks per step of the grid mode's team (fit_grid_team) at most
    TEAM_MIN_BLOCKS = 8    # ... and at least: d small enough that that many fit TEAM_HALF_BYTES
    TEAM_HALF_BYTES = 1 << 22  # a step's transposed blocks at most (two steps are held)

cdef uint64_t LOW32 = 0xFFFFFFFF


# ----------------------------------------------------------------------------
# Small inline helpers
# ----------------------------------------------------------------------------

cdef inline bint thr_key_range(
    const double *x, Py_ssize_t d,
    const double *rlo,      # IN  (d,) smallest value in bin lo of each column
    const double *rhi,      # IN  (d,) smallest value past bin hi of each column
    const int32_t *ej, const double *et, const uint64_t *ea, Py_ssize_t n_ent,
    uint64_t *key,          # OUT
) noexcept nogil:
    """thr_key for a new row; False if some column lies outside the training bins."""
    cdef Py_ssize_t j
    for j in range(d):
        if not (x[j] >= rlo[j] and x[j] < rhi[j]):
            return False
    key[0] = thr_key(x, ej, et, ea, n_ent)
    return True


cdef inline void transpose_block(const double *X, Py_ssize_t d, Py_ssize_t i0, Py_ssize_t i1,
                                 Py_ssize_t n_rows, double *xt) noexcept nogil:
    """xt[j * XT_STRIDE + k] = X[i0 + k, j] for the rows i0 .. i1 - 1 (at most ROW_BLOCK),
    prefetching the next block's rows (below ``n_rows``): the block's keys and probes come
    between two transposes, long enough for the prefetcher to lose the stream."""
    cdef Py_ssize_t i, j
    cdef const double *xrow
    for i in range(i0, i1):
        xrow = X + i * d
        if i + ROW_BLOCK < n_rows:
            for j in range(0, d, 8):
                prefetch(xrow + ROW_BLOCK * d + j)
        for j in range(d):
            xt[j * XT_STRIDE + (i - i0)] = xrow[j]


cdef inline bint keys_equal(const uint64_t *a, const uint64_t *b, int n_words) noexcept nogil:
    cdef int k
    for k in range(n_words):
        if a[k] != b[k]:
            return False
    return True


cdef inline int64_t table_find(
    const uint64_t *slots,  # IN  capacity mask + 1 slots
    uint64_t mask,
    const uint64_t *keys,   # IN  n_bins * n_words packed keys
    int n_words,
    const uint64_t *key,    # IN  the key looked up
    uint64_t h,             # IN  key_hash(key)
    uint64_t pos,           # IN  the slot to probe from: h & mask, or a later slot of
                            #     the key's probe sequence
) noexcept nogil:
    """Local id of ``key`` in a table, or -1 if absent (verified, exact).

    At most capacity probes: a table without an empty slot (never built by fit,
    rejected by GridTables on load) ends the search instead of cycling."""
    cdef uint64_t tag = h >> 32, s, step
    cdef int64_t local
    for step in range(mask + 1):
        s = slots[pos]
        if s == 0:
            return -1
        if (s >> 32) == tag:
            local = <int64_t> (s & LOW32) - 1
            if keys_equal(keys + local * n_words, key, n_words):
                return local
        pos = (pos + 1) & mask
    return -1


ctypedef struct Layout:
    # The fitted geometry of R grids over d columns, shared by fit and transform
    # (pointers into the arrays of a GridTables; docs/design.md contracts 2-4).
    const double *widths        # (R, d) delta[r, j]
    const double *offsets       # (R, d) u[r, j]
    const double *inv           # (R, d) 1 / widths (AVX-512 bins only)
    const int64_t *lo           # (R, d) smallest training bin of (r, j)
    const int64_t *hi           # (R, d) largest training bin of (r, j)
    const int32_t *word         # (R, d) key word of field j of grid r
    const int64_t *shift        # (R, d) bit offset of that field
    const int32_t *n_words      # (R,) 64-bit words of grid r's packed key
    const int32_t *top_bits     # (R,) bits used in the last word of grid r's key
    const int32_t *word_bits    # (R, max_words) bits used in each word of grid r's key
    const int64_t *thr_ptr      # (R + 1,) grid r's thresholds: thr_ptr[r] .. thr_ptr[r + 1] - 1
    const unsigned char *use_thr  # (R,) grid r's keys come from its thresholds
    const int32_t *ent_j        # column of each threshold (sorted by grid, column, bin)
    const double *ent_t         # the thresholds
    const uint64_t *ent_add     # 1 << shift of the threshold's field
    const double *range_lo      # (R, d) smallest value in bin lo (transform)
    const double *range_hi      # (R, d) smallest value past bin hi (transform)
    Py_ssize_t R
    Py_ssize_t d
    int max_words
    bint normal_widths          # every width within [2**-1000, 2**1000] (AVX-512 bins exact)


cdef inline Thresholds grid_thresholds(const Layout *L, Py_ssize_t r) noexcept nogil:
    """Grid r's thresholds (entries thr_ptr[r] .. thr_ptr[r + 1] - 1 of the layout)."""
    cdef Thresholds t
    cdef int64_t e0 = L.thr_ptr[r]
    t.ej = L.ent_j + e0
    t.et = L.ent_t + e0
    t.ea = L.ent_add + e0
    t.n = L.thr_ptr[r + 1] - e0
    return t


cdef inline bint grid_key(
    const Layout *L,
    Py_ssize_t r,          # the grid
    const double *x,       # IN  one row of X
    bint simd,             # AVX-512 bins (rbcd_key_avx512)
    double *q,             # scratch, length d
    uint64_t *key,         # OUT n_words[r] words
) noexcept nogil:
    """Packed key of one (row, grid) by division (rbcd_key_scalar in binning_keys.h):
    False if some bin lies outside the grid's training bins [lo, hi]."""
    cdef Py_ssize_t d = L.d, o = r * L.d
    if simd:
        return key_avx512(x, L.offsets + o, L.widths + o, L.inv + o, L.lo + o, L.hi + o,
                          L.word + o, L.shift + o, d, L.n_words[r], key)
    return key_scalar(x, L.offsets + o, L.widths + o, L.lo + o, L.hi + o, L.word + o,
                      L.shift + o, d, q, key)


ctypedef struct GridTable:
    # One fitted grid as transform reads it (docs/design.md contract 4).
    CTable tab                  # the bucketed table of its keys (binning_table.h)
    const uint32_t *index       # dense index (id + 1 per possible single-word key) or NULL
    int64_t n_bins
    int64_t col0                # grid_ptr[r], the grid's first column of Z


ctypedef struct Paths:
    # The code paths a kernel may take (all give the same output bit for bit).
    bint simd                   # AVX-512 allowed (and present: checked by the caller)
    bint thresholds             # threshold keys where the layout has them
    bint index                  # dense transform index / direct fit tables where planned


# ----------------------------------------------------------------------------
# Growing tables used during fit
# ----------------------------------------------------------------------------

cdef packed struct FatSlot:
    # 12 bytes, no padding (the key is read unaligned in an array of slots)
    uint64_t key        # packed key (single-word tables, during fit)
    uint32_t idp1       # local id + 1 (0 = empty)


ctypedef struct DirSlot:
    uint32_t idp1       # local id + 1 (0 = unseen)
    uint32_t count      # training rows of the bin


ctypedef struct Table:
    # One grid during fit. Exactly one of direct / pk / fat / slots is the
    # probe structure (see table_init); table_finish turns any of them into
    # the bucketed table ct (binning_table.h) that transform reads.
    uint64_t *slots     # multi-word keys: capacity slots (any capacity; slot of hash h:
                        # mulhi64(h, capacity)), 0 empty, else (h mod 2**32) << 32 |
                        # (local id + 1); keys in keys
    DirSlot *direct     # small key spaces: one slot per possible key
                        # (2**direct_bits), no hashing or probing
    int64_t direct_size
    uint64_t *pk        # single-word keys with room for the id ("packed"): capacity
                        # slots (any capacity; slot of hash h: mulhi64(h, capacity)),
                        # 0 empty, else key | (local id + 1) << used; counts in counts
    FatSlot *fat        # other single-word keys: capacity 12-byte slots of key and
                        # local id + 1 (any capacity, slots as pk); counts in counts
    uint64_t *keys      # n_bins * n_words packed keys, in local id order
    uint32_t *counts    # n_bins training rows per bin (N < 2**32 - 1)
    int64_t capacity    # slots of the probe structure (any number)
    int64_t n_bins
    int64_t keys_room   # bins that fit in keys / counts before a realloc
    int n_words
    const int32_t *wbits  # (n_words,) key bits of each key word (the bucketed table's geometry)
    int used            # key bits of the last key word (pk: the id sits above them)
    uint64_t kmask      # (1 << used) - 1 (pk)
    int failed          # 1 after an allocation failure
    int64_t max_count   # largest bin count, set at the end of fit
    CtArrays ct         # the fitted table, built by table_finish


cdef int table_init(Table *t, int n_words, const int32_t *wbits, int used, int direct_bits,
                    int64_t n_rows) noexcept nogil:
    """An empty fit table: direct when ``direct_bits >= 0``, else pk for a
    single-word key whose ``used`` bits leave room for ids up to ``n_rows``, else
    fat (single word) or slots + keys (several words)."""
    memset(t, 0, sizeof(Table))
    t.capacity = INITIAL_CAPACITY
    t.keys_room = INITIAL_CAPACITY // 2
    t.n_words = n_words
    t.wbits = wbits
    t.used = used
    if direct_bits >= 0:
        t.direct_size = (<int64_t> 1) << direct_bits
        t.direct = <DirSlot *> big_calloc(t.direct_size, sizeof(DirSlot))
        if t.direct == NULL:
            t.failed = 1
            return -1
        return 0
    if n_words == 1 and used + _bit_length(<uint64_t> n_rows) <= 64:
        t.kmask = ((<uint64_t> 1) << used) - 1
        t.pk = <uint64_t *> big_calloc(t.capacity, sizeof(uint64_t))
        t.counts = <uint32_t *> big_malloc(t.keys_room * sizeof(uint32_t))
        if t.pk == NULL or t.counts == NULL:
            t.failed = 1
            return -1
        return 0
    if n_words == 1:
        t.fat = <FatSlot *> big_calloc(t.capacity, sizeof(FatSlot))
        t.counts = <uint32_t *> big_malloc(t.keys_room * sizeof(uint32_t))
        if t.fat == NULL or t.counts == NULL:
            t.failed = 1
            return -1
        return 0
    t.slots = <uint64_t *> big_calloc(t.capacity, sizeof(uint64_t))
    t.keys = <uint64_t *> big_malloc(t.keys_room * n_words * sizeof(uint64_t))
    t.counts = <uint32_t *> big_malloc(t.keys_room * sizeof(uint32_t))
    if t.slots == NULL or t.keys == NULL or t.counts == NULL:
        t.failed = 1
        return -1
    return 0


cdef inline bint wide_table(int n_words, int used, int direct_bits, int64_t n_rows) noexcept nogil:
    """True if table_init gives this grid a wide fit table: slots + keys (multi-word
    keys) or fat slots (a single-word key without room for ids up to n_rows)."""
    if direct_bits >= 0:
        return False
    return n_words > 1 or used + _bit_length(<uint64_t> n_rows) > 64


cdef void table_free(Table *t) noexcept nogil:
    free(t.fat)
    t.fat = NULL
    free(t.direct)
    t.direct = NULL
    free(t.pk)
    t.pk = NULL
    free(t.slots)
    free(t.keys)
    free(t.counts)
    t.slots = NULL
    t.keys = NULL
    t.counts = NULL
    free(t.ct.dir)
    free(t.ct.off)
    free(t.ct.ent)
    t.ct.dir = NULL
    t.ct.off = NULL
    t.ct.ent = NULL


cdef int fat_resize(Table *t, int64_t new_cap) noexcept nogil:
    """Re-insert every entry of a fat table into ``new_cap`` slots (ids unchanged;
    any capacity: the slot of hash h is mulhi64(h, new_cap), as pk)."""
    cdef uint64_t cap = <uint64_t> new_cap, pos, key
    cdef uint64_t hs[16]
    cdef int64_t idx[16]
    cdef int64_t j, m, k
    cdef FatSlot *fat = <FatSlot *> big_calloc(new_cap, sizeof(FatSlot))
    if fat == NULL:
        return -1
    j = 0
    while j < t.capacity:
        m = 0
        while j < t.capacity and m < 16:
            # branch-free: the entry is kept only if the slot is occupied
            idx[m] = j
            key = t.fat[j].key  # a copy: the packed slot's key may be unaligned
            hs[m] = key_hash(&key, 1)
            prefetch(fat + mulhi64(hs[m], cap))
            m += (t.fat[j].idp1 != 0)
            j += 1
        for k in range(m):
            pos = mulhi64(hs[k], cap)
            while fat[pos].idp1 != 0:
                pos += 1
                if pos == cap:
                    pos = 0
            fat[pos] = t.fat[idx[k]]
    free(t.fat)
    t.fat = fat
    t.capacity = new_cap
    return 0


cdef int pk_resize(Table *t, int64_t new_cap) noexcept nogil:
    """Re-insert every entry of a pk table into ``new_cap`` slots (ids unchanged);
    hashes of 16 entries are computed and their new slots prefetched first."""
    cdef uint64_t cap = <uint64_t> new_cap, pos, s, key
    cdef uint64_t hs[16]
    cdef uint64_t vs[16]
    cdef int64_t j, m, k
    cdef uint64_t *pk = <uint64_t *> big_calloc(new_cap, sizeof(uint64_t))
    if pk == NULL:
        return -1
    j = 0
    while j < t.capacity:
        m = 0
        while j < t.capacity and m < 16:
            # branch-free: the entry is kept only if the slot is occupied
            s = t.pk[j]
            key = s & t.kmask
            vs[m] = s
            hs[m] = key_hash(&key, 1)
            prefetch(pk + mulhi64(hs[m], cap))
            m += (s != 0)
            j += 1
        for k in range(m):
            pos = mulhi64(hs[k], cap)
            while pk[pos] != 0:
                pos += 1
                if pos == cap:
                    pos = 0
            pk[pos] = vs[k]
    free(t.pk)
    t.pk = pk
    t.capacity = new_cap
    return 0


cdef int keys_from_fat(Table *t) noexcept nogil:
    """Keys in id order from the fat slots (which are freed)."""
    cdef int64_t j, n = t.n_bins
    # keys at index local + 1 (index 0 takes the empty slots' writes,
    # branch-free), moved down by one after the pass
    t.keys = <uint64_t *> big_malloc((n + 1) * sizeof(uint64_t))
    if t.keys == NULL:
        return -1
    for j in range(t.capacity):
        t.keys[t.fat[j].idp1] = t.fat[j].key
    memmove(t.keys, t.keys + 1, n * sizeof(uint64_t))
    free(t.fat)
    t.fat = NULL
    return 0


cdef int keys_from_pk(Table *t) noexcept nogil:
    """Keys in id order from the pk slots (which are freed)."""
    cdef int64_t j, n = t.n_bins
    cdef uint64_t s
    # keys at index local + 1 (index 0 takes the empty slots' writes)
    t.keys = <uint64_t *> big_malloc((n + 1) * sizeof(uint64_t))
    if t.keys == NULL:
        return -1
    for j in range(t.capacity):
        s = t.pk[j]
        t.keys[s >> t.used] = s & t.kmask
    memmove(t.keys, t.keys + 1, n * sizeof(uint64_t))
    free(t.pk)
    t.pk = NULL
    return 0


cdef int keys_from_direct(Table *t) noexcept nogil:
    """Keys and counts in id order from the slots of the seen keys (which are freed)."""
    cdef int64_t key, n = t.n_bins
    t.keys = <uint64_t *> big_malloc((n + 1) * sizeof(uint64_t))
    t.counts = <uint32_t *> big_malloc((n + 1) * sizeof(uint32_t))
    if t.keys == NULL or t.counts == NULL:
        return -1
    t.keys_room = n
    # keys[idp1 - 1] = key for the seen keys (index 0 takes the unseen ones'
    # writes, branch-free; moved down by one after the pass)
    for key in range(t.direct_size):
        t.keys[t.direct[key].idp1] = <uint64_t> key
        t.counts[t.direct[key].idp1] = t.direct[key].count
    memmove(t.keys, t.keys + 1, n * sizeof(uint64_t))
    memmove(t.counts, t.counts + 1, n * sizeof(uint32_t))
    free(t.direct)
    t.direct = NULL
    return 0


cdef inline int64_t direct_add(Table *t, uint64_t key) noexcept nogil:
    """Local id of ``key`` in a direct table, numbering it (next id) if new."""
    cdef DirSlot *e = t.direct + key
    if e.idp1 == 0:
        t.n_bins += 1
        e.idp1 = <uint32_t> t.n_bins
    e.count += 1
    return <int64_t> e.idp1 - 1


cdef int table_resize(Table *t, int64_t new_cap) noexcept nogil:
    """Re-insert every key into ``new_cap`` slots (ids unchanged).

    Hashes of 16 keys (read in id order) are computed and their new slots
    prefetched before the inserts, so the random writes overlap.
    """
    cdef uint64_t cap = <uint64_t> new_cap, pos
    cdef uint64_t hs[16]
    cdef int64_t base, local, m, k
    if t.fat != NULL:
        return fat_resize(t, new_cap)
    if t.pk != NULL:
        return pk_resize(t, new_cap)
    cdef uint64_t *slots = <uint64_t *> big_calloc(new_cap, sizeof(uint64_t))
    if slots == NULL:
        return -1
    base = 0
    while base < t.n_bins:
        m = t.n_bins - base if t.n_bins - base < 16 else 16
        for k in range(m):
            hs[k] = key_hash(t.keys + (base + k) * t.n_words, t.n_words)
            prefetch(slots + mulhi64(hs[k], cap))
        for k in range(m):
            local = base + k
            pos = mulhi64(hs[k], cap)
            while slots[pos] != 0:
                pos += 1
                if pos == cap:
                    pos = 0
            slots[pos] = ((hs[k] & LOW32) << 32) | <uint64_t> (local + 1)
        base += m
    free(t.slots)
    t.slots = slots
    t.capacity = new_cap
    return 0


cdef int table_grow(Table *t) noexcept nogil:
    """Double the slot array."""
    return table_resize(t, t.capacity * 2)


cdef int table_room(Table *t, int64_t room) noexcept nogil:
    """Room for ``room`` bins in counts (and keys, multi-word tables)."""
    cdef uint64_t *keys
    if room <= t.keys_room:
        return 0
    if t.slots != NULL:
        keys = <uint64_t *> big_realloc(t.keys, room * t.n_words * sizeof(uint64_t))
        if keys == NULL:
            return -1  # t.keys is still valid (and freed with the table)
        t.keys = keys
    cdef uint32_t *counts = <uint32_t *> big_realloc(t.counts, room * sizeof(uint32_t))
    if counts == NULL:
        return -1
    t.counts = counts
    t.keys_room = room
    return 0


cdef int table_presize(Table *t, int64_t rows_seen, int64_t n_rows) noexcept nogil:
    """Size the table for the bins expected over all rows.

    Only when most rows so far opened a new bin (fine grids): then the count
    keeps growing about linearly and extrapolating it (at most n_rows) saves
    a chain of doublings over a large table. Coarse grids saturate and keep
    the doubling. The table (any capacity) gets exactly the load 0.7 for the
    estimate, and its counts (and keys) room for it.
    """
    cdef int64_t est, cap
    if rows_seen <= 0 or 2 * t.n_bins <= rows_seen:
        return 0
    est = <int64_t> (<double> t.n_bins * (<double> n_rows / <double> rows_seen)) + 1
    if est > n_rows:
        est = n_rows
    cap = (10 * est + 6) // 7 + 1
    if table_room(t, est) != 0:
        return -1
    if cap > t.capacity:
        return table_resize(t, cap)
    return 0


cdef inline int64_t pk_add(Table *t, uint64_t key, uint64_t h) noexcept nogil:
    """Local id of single-word ``key`` in a pk table, inserting it (next id) if new;
    -1 on allocation failure."""
    cdef uint64_t pos, s, cap
    cdef int64_t local
    if 10 * (t.n_bins + 1) > 7 * t.capacity:  # load <= 0.7
        if pk_resize(t, t.capacity * 2) != 0:
            return -1
    cap = <uint64_t> t.capacity
    pos = mulhi64(h, cap)
    while True:
        s = t.pk[pos]
        if s == 0:
            break
        if (s & t.kmask) == key:
            local = <int64_t> (s >> t.used) - 1
            t.counts[local] += 1
            return local
        pos += 1
        if pos == cap:
            pos = 0
    # first appearance: the next local id
    if t.n_bins == t.keys_room:
        if table_room(t, 2 * t.keys_room) != 0:
            return -1
    local = t.n_bins
    t.pk[pos] = key | (<uint64_t> (local + 1) << t.used)
    t.counts[local] = 1
    t.n_bins += 1
    return local


cdef inline int64_t table_add(Table *t, const uint64_t *key, uint64_t h) noexcept nogil:
    """Local id of ``key`` (fat or slots table), inserting it (next id) if new;
    -1 on allocation failure."""
    cdef uint64_t cap, pos, tag = h & LOW32, s
    cdef int64_t local
    cdef FatSlot *f
    if 10 * (t.n_bins + 1) > 7 * t.capacity:  # load <= 0.7
        if table_grow(t) != 0:
            return -1
    if t.fat != NULL:
        # single-word keys: key and id in one slot (exact compare), any capacity
        cap = <uint64_t> t.capacity
        pos = mulhi64(h, cap)
        while True:
            f = t.fat + pos
            if f.idp1 == 0:
                break
            if f.key == key[0]:
                local = <int64_t> f.idp1 - 1
                t.counts[local] += 1
                return local
            pos += 1
            if pos == cap:
                pos = 0
        if t.n_bins == t.keys_room:
            if table_room(t, 2 * t.keys_room) != 0:
                return -1
        local = t.n_bins
        f = t.fat + pos
        f.key = key[0]
        f.idp1 = <uint32_t> (local + 1)
        t.counts[local] = 1
        t.n_bins += 1
        return local
    cap = <uint64_t> t.capacity
    pos = mulhi64(h, cap)
    while True:
        s = t.slots[pos]
        if s == 0:
            break
        if (s >> 32) == tag:
            local = <int64_t> (s & LOW32) - 1
            if keys_equal(t.keys + local * t.n_words, key, t.n_words):
                t.counts[local] += 1
                return local
        pos += 1
        if pos == cap:
            pos = 0
    # first appearance: the next local id
    if t.n_bins == t.keys_room:
        if table_room(t, 2 * t.keys_room) != 0:
            return -1
    local = t.n_bins
    memcpy(t.keys + local * t.n_words, key, t.n_words * sizeof(uint64_t))
    t.counts[local] = 1
    t.n_bins += 1
    t.slots[pos] = (tag << 32) | <uint64_t> (local + 1)
    return local


cdef int table_export(Table *t) noexcept nogil:
    """Keys and counts in id order, the probe structure freed (0, or -1 when the keys
    cannot be allocated). Afterwards the table holds only keys, counts and n_bins."""
    cdef int rc = 0
    if t.direct != NULL:
        rc = keys_from_direct(t)
    elif t.fat != NULL:
        rc = keys_from_fat(t)
    elif t.pk != NULL:
        rc = keys_from_pk(t)
    else:
        free(t.slots)
        t.slots = NULL
    return rc


cdef void table_finish(Table *t, bint keep_counts) noexcept nogil:
    """End of fit for one table: keys and counts in id order (table_export: the probe
    structure freed first where it can be), the largest bin count (then the counts freed
    unless ``keep_counts``), then the bucketed table t.ct (binning_table.h) and
    the keys freed. Afterwards the table holds only t.ct (and t.counts if kept).
    A table that holds keys and counts only (a merge of row ranges) takes the same path."""
    cdef int64_t local
    if t.failed:
        return
    if table_export(t) != 0:
        t.failed = 1
        return
    t.max_count = 0
    # max_count = counts.max()
    for local in range(t.n_bins):
        if t.counts[local] > t.max_count:
            t.max_count = t.counts[local]
    if not keep_counts:
        free(t.counts)
        t.counts = NULL
    if ct_build(t.keys, t.n_bins, t.n_words, t.wbits, &t.ct) != 0:
        t.failed = 1
        return
    free(t.keys)
    t.keys = NULL


cdef inline void touch_rows(idx_t *ids, Py_ssize_t N, Py_ssize_t R, Py_ssize_t g,
                            Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    """First touch of the pages of ids rows i0 .. i1 - 1 (clipped to N): one word per page,
    in column g.

    Every fit thread writes every page of ids (a row holds all grids), so fresh
    pages would be faulted by all threads at once. Instead the thread owning
    grid g touches a row block's pages a few blocks before they are written;
    no other thread writes column g, and this one writes it later.
    """
    cdef Py_ssize_t step = PAGE_BYTES // (R * <Py_ssize_t> sizeof(idx_t))
    cdef Py_ssize_t i = i0
    if step < 1:
        step = 1
    while i < i1 and i < N:
        ids[i * R + g] = 0
        i = i + step


# Seconds between two looks of a kernel's thread 0 at the signals (binning_interrupt.h):
# each look takes the GIL, which another Python thread may hold for up to its switch
# interval (5 ms), so looks stay rare; a Ctrl-C ends the kernel within about this long.
cdef double INTERRUPT_PERIOD = 0.02


cdef void interrupt_init(rbcd_interrupt *it) noexcept:
    """A fresh interrupt state; thread 0 looks at the signals only where the caller is
    Python's main thread (no other thread runs signal handlers)."""
    it.stop = 0
    it.finished = 0
    it.enabled = threading.current_thread() is threading.main_thread()
    it.period = INTERRUPT_PERIOD
    it.next_look = rbcd_monotonic() + INTERRUPT_PERIOD


cdef void look_at_signals(rbcd_interrupt *it, PyObject *caught) noexcept nogil:
    """Thread 0, when a look is due: run the pending signal handlers (with the GIL); if
    one raised, keep its exception in ``caught`` (a list) and stop every thread."""
    if not rbcd_look_due(it):
        return
    with gil:
        try:
            PyErr_CheckSignals()
        except BaseException as exc:
            (<list> caught).append(exc)
            rbcd_set_stop(it)


cdef void wait_for_chunks(rbcd_interrupt *it, PyObject *caught, Py_ssize_t n_chunks) noexcept nogil:
    """Thread 0 after its last chunk: keep looking at the signals until every chunk is
    done or the kernel stops (the others may run long after thread 0's share)."""
    while rbcd_chunks_done(it) < n_chunks and not rbcd_stopped(it):
        look_at_signals(it, caught)
        rbcd_nap()


ctypedef struct FitJob:
    # What every fit thread reads: the training rows and the layout.
    const Layout *L
    const double *X             # (N, d) C order
    Py_ssize_t N
    const int32_t *direct_bits  # (R,) key bits of a direct table, -1 for a hash table
    bint simd                   # AVX-512 bins of division keys
    bint vec                    # AVX-512 threshold keys (over a transposed row block)
    bint thresholds             # threshold keys where the layout has them
    bint keep_counts            # keep each table's bin counts after fit (want_counts)
    rbcd_interrupt *interrupt   # Ctrl-C: thread 0 looks, every thread stops (see above)
    PyObject *caught            # a list: the exception a signal handler raised


ctypedef struct Scratch:
    # One fit thread's buffers for a row block (sweep_rows).
    double *q           # (d,) the quotients of one row (division keys)
    uint64_t *keys      # (ROW_BLOCK * max_words) the block's keys for one grid
    uint64_t *hashes    # (ROW_BLOCK,) their hashes
    double *xt          # (d * XT_STRIDE) the block transposed (threshold keys, AVX-512);
                        # zeroed so that the unused lanes of a short last block hold
                        # finite values
    int64_t *stage      # (ROW_BLOCK * max_group) local ids of a block, grid-major
                        # (stage[(r - ga) * ROW_BLOCK + k]); copied to ids row by row
                        # after the block, so that each cache line of ids is written in
                        # one burst
    const double *shared_xt   # NULL, or the team's transposed blocks (fit_grid_team): row
    Py_ssize_t shared_row0    # block i0 of the sweep is at shared_xt + (i0 - shared_row0)
                              # / ROW_BLOCK * d * XT_STRIDE, transposed as xt would be
    Py_ssize_t span0          # the rows the sweep's tables number, span0 .. span1 - 1, of
    Py_ssize_t span1          # which a sweep may cover a part (presize: PRESIZE_ROWS)


cdef int scratch_init(Scratch *s, Py_ssize_t d, int max_words, Py_ssize_t max_group) noexcept nogil:
    """Allocate a thread's scratch (0, or -1 when it cannot; scratch_free frees either way)."""
    s.q = <double *> PyMem_RawMalloc(d * sizeof(double))
    s.keys = <uint64_t *> PyMem_RawMalloc(ROW_BLOCK * max_words * sizeof(uint64_t))
    s.hashes = <uint64_t *> PyMem_RawMalloc(ROW_BLOCK * sizeof(uint64_t))
    s.xt = <double *> PyMem_RawCalloc(d * XT_STRIDE, sizeof(double))
    s.stage = <int64_t *> PyMem_RawMalloc(ROW_BLOCK * max_group * sizeof(int64_t))
    s.shared_xt = NULL
    s.shared_row0 = 0
    s.span0 = 0
    s.span1 = 0
    if s.q == NULL or s.keys == NULL or s.hashes == NULL or s.xt == NULL or s.stage == NULL:
        return -1
    return 0


cdef void scratch_free(Scratch *s) noexcept nogil:
    PyMem_RawFree(s.q)
    PyMem_RawFree(s.keys)
    PyMem_RawFree(s.hashes)
    PyMem_RawFree(s.xt)
    PyMem_RawFree(s.stage)


cdef Py_ssize_t group_end(const FitJob *job, Py_ssize_t ga, Py_ssize_t g1) noexcept nogil:
    """The end of the group of grids that starts at ga (at most g1): at most MAX_GROUP
    grids, of which at most MAX_WIDE have wide fit tables (multi-word keys: slots, keys
    and counts, about 30-40 bytes per bin; fat: about 21). pk and direct tables (at most
    about 15 bytes per bin) do not count."""
    cdef Py_ssize_t gb = ga
    cdef int n_wide = 0
    while gb < g1 and gb - ga < MAX_GROUP:
        if wide_table(job.L.n_words[gb], job.L.top_bits[gb], job.direct_bits[gb], job.N):
            if n_wide == MAX_WIDE:
                break
            n_wide = n_wide + 1
        gb = gb + 1
    return gb


cdef void sweep_rows(
    const FitJob *job,
    Table *gt,                # IN/OUT the tables of grids ga .. gb - 1 (gt[r - ga]), initialised
    idx_t *ids,               # OUT (N * R) local id of (i, r) at i * R + r, or NULL
    Py_ssize_t ga,            # the group's grids: ga .. gb - 1
    Py_ssize_t gb,
    Py_ssize_t row0,          # the rows: row0 .. row1 - 1, in blocks of ROW_BLOCK from row0
    Py_ssize_t row1,
    Scratch *s,
    Py_ssize_t toucher,       # this thread's number and the number of threads that first
    Py_ssize_t n_touchers,    # touch the fresh pages of ids (touch_rows; 0: none)
) noexcept nogil:
    """One sweep over rows row0 .. row1 - 1 for a group of grids: each row's local id in
    each grid's table, numbered by first appearance (the tables number the rows s.span0
    .. s.span1 - 1, of which this sweep takes row0 .. row1; sized for all of them after
    PRESIZE_ROWS). Leaves early, tables unfinished, when the interrupt stops the kernel;
    a failed table is marked and skipped. With s.shared_xt the blocks' transposes are
    read there instead of made here."""
    cdef const Layout *L = job.L
    cdef const double *X = job.X
    cdef Py_ssize_t N = job.N, d = L.d, R = L.R
    cdef bint simd = job.simd, vec = job.vec, thresholds = job.thresholds
    cdef const int32_t *n_words = L.n_words
    cdef const unsigned char *use_thr = L.use_thr
    cdef Py_ssize_t i0, i1, i, r, k, tb, kc, kk, g, n_g
    cdef int W
    cdef Table *t
    cdef uint64_t *key
    cdef double *q = s.q
    cdef uint64_t *keys = s.keys
    cdef uint64_t *hashes = s.hashes
    cdef const double *xt = s.xt
    cdef int64_t *stage = s.stage
    cdef bint xt_ready
    cdef Thresholds thr
    cdef int64_t *srow
    cdef bint looks = omp_thread_num() == 0  # thread 0 looks at the signals
    i0 = row0
    while i0 < row1:
        if looks:
            look_at_signals(job.interrupt, job.caught)
        if rbcd_stopped(job.interrupt):
            break  # interrupted: fit_tables frees the tables and raises
        i1 = i0 + ROW_BLOCK if i0 + ROW_BLOCK < row1 else row1
        xt_ready = False
        if s.shared_xt != NULL:
            xt = s.shared_xt + (i0 - s.shared_row0) // ROW_BLOCK * (d * XT_STRIDE)
            xt_ready = True
        if ids != NULL and n_touchers > 1:
            tb = i0 // ROW_BLOCK + TOUCH_AHEAD
            if tb % n_touchers == toucher:
                touch_rows(ids, N, R, ga, tb * ROW_BLOCK, (tb + 1) * ROW_BLOCK)
        for r in range(ga, gb):
            t = &gt[r - ga]
            if t.failed:
                continue
            W = n_words[r]
            if thresholds and use_thr[r]:
                # single-word keys from the grid's thresholds (exact:
                # bins are monotone in x)
                thr = grid_thresholds(L, r)
                if vec:
                    if not xt_ready:
                        transpose_block(X, d, i0, i1, N, s.xt)
                        xt_ready = True
                    thr_keys_avx512(xt, XT_STRIDE, i1 - i0, d, NULL, NULL, thr,
                                    keys, hashes, NULL)
                else:
                    for i in range(i0, i1):
                        k = i - i0
                        keys[k] = thr_key(X + i * d, thr.ej, thr.et, thr.ea, thr.n)
                        hashes[k] = key_hash(keys + k, 1)
            else:
                for i in range(i0, i1):
                    k = i - i0
                    key = keys + k * W
                    if not grid_key(L, r, X + i * d, simd, q, key):
                        t.failed = 2  # cannot happen: [lo, hi] bounds the training bins
                        break
                    hashes[k] = key_hash(key, W)
                if t.failed:
                    continue
            # the block's slots prefetched, then probed in row order
            # (first appearance numbering)
            srow = stage + (r - ga) * ROW_BLOCK
            if t.direct != NULL:
                for k in range(i1 - i0):
                    prefetch(t.direct + keys[k])
                for k in range(i1 - i0):
                    srow[k] = direct_add(t, keys[k])
                continue
            if t.pk != NULL:
                for k in range(i1 - i0):
                    prefetch(t.pk + mulhi64(hashes[k], <uint64_t> t.capacity))
                if i0 - s.span0 == PRESIZE_ROWS:
                    if table_presize(t, PRESIZE_ROWS, s.span1 - s.span0) != 0:
                        t.failed = 1
                        continue
                for k in range(i1 - i0):
                    srow[k] = pk_add(t, keys[k], hashes[k])
                    if srow[k] < 0:
                        t.failed = 1
                        break
                continue
            for k in range(i1 - i0):
                if t.fat != NULL:
                    prefetch(t.fat + mulhi64(hashes[k], <uint64_t> t.capacity))
                else:
                    prefetch(t.slots + mulhi64(hashes[k], <uint64_t> t.capacity))
            if i0 - s.span0 == PRESIZE_ROWS:
                if table_presize(t, PRESIZE_ROWS, s.span1 - s.span0) != 0:
                    t.failed = 1
                    continue
            for k in range(i1 - i0):
                srow[k] = table_add(t, keys + k * W, hashes[k])
                if srow[k] < 0:
                    t.failed = 1
                    break
        if ids != NULL:
            # ids[i, ga:gb] = stage[:, i - i0], 16 rows at a time, the next block's lines
            # of these grids asked for meanwhile (a few grids write a part of every row's
            # lines: each row's write would otherwise wait for its line)
            n_g = gb - ga
            kc = 0
            while kc < i1 - i0:
                kk = kc + 16 if kc + 16 < i1 - i0 else i1 - i0
                if i1 + kk <= row1:
                    for k in range(kc, kk):
                        prefetch_w(&ids[(i1 + k) * R + ga])
                        prefetch_w(&ids[(i1 + k) * R + gb - 1])
                for g in range(n_g):
                    srow = stage + g * ROW_BLOCK
                    for k in range(kc, kk):
                        ids[(i0 + k) * R + ga + g] = <idx_t> srow[k]
                kc = kk
        i0 = i1


ctypedef void (*Sweep32)(const FitJob *job, Table *gt, int32_t *ids, Py_ssize_t ga,
                         Py_ssize_t gb, Py_ssize_t row0, Py_ssize_t row1, Scratch *s,
                         Py_ssize_t toucher, Py_ssize_t n_touchers) noexcept nogil
ctypedef void (*Sweep64)(const FitJob *job, Table *gt, int64_t *ids, Py_ssize_t ga,
                         Py_ssize_t gb, Py_ssize_t row0, Py_ssize_t row1, Scratch *s,
                         Py_ssize_t toucher, Py_ssize_t n_touchers) noexcept nogil
# sweep_rows is called through these constant pointers (once per group and thread), so that
# the compiler does not inline it: inlined into fit_grid_block and fit_ranges, its probe
# loops lost registers to their callers' variables and the grid-mode fit_transform took
# 3-4% longer than before the split (paired runs on the 2-vCPU AMD EPYC, N = 10^6, d = 16,
# R = 64, sigma 1, one thread); called through them, whole-process paired medians 0.98x
# (1 thread) and 0.99x (2 threads) of the single function's.
cdef Sweep32 SWEEP32 = &sweep_rows[int32_t]
cdef Sweep64 SWEEP64 = &sweep_rows[int64_t]


cdef void fit_grid_block(
    const FitJob *job,
    Table *tables,            # IN/OUT (R,) tables, only g0 .. g1 - 1 touched
    idx_t *ids,               # OUT (N * R) local id of (i, r) at i * R + r, or NULL
    Py_ssize_t g0,            # this thread's grids: g0 .. g1 - 1
    Py_ssize_t g1,
    Py_ssize_t toucher,       # this thread's number and the number of threads: the row
    Py_ssize_t n_touchers,    # blocks whose fresh ids pages this thread touches first
) noexcept nogil:
    """The grid mode of fit_tables: this thread's grids, over all rows. One sweep over
    the rows per group of them (group_end): X is read once per group, and each row
    block's ids are written row by row from the stage. A group's tables are created at
    its start and finished (exported to their compact form) at its end, so a group
    bounds the fit tables alive at once; a thread of pk and direct tables only sweeps
    once."""
    cdef const Layout *L = job.L
    cdef Py_ssize_t N = job.N, r, ga, gb
    cdef Scratch s
    cdef Py_ssize_t max_group = g1 - g0 if g1 - g0 < MAX_GROUP else MAX_GROUP
    if scratch_init(&s, L.d, L.max_words, max_group) != 0:
        for r in range(g0, g1):
            tables[r].failed = 1
    else:
        ga = g0
        while ga < g1:
            gb = group_end(job, ga, g1)
            for r in range(ga, gb):
                table_init(&tables[r], L.n_words[r], L.word_bits + r * L.max_words,
                           L.top_bits[r], job.direct_bits[r], N)
            s.span0 = 0
            s.span1 = N
            if idx_t is int32_t:
                SWEEP32(job, &tables[ga], ids, ga, gb, 0, N, &s, toucher,
                        n_touchers if ga == g0 else 0)
            else:
                SWEEP64(job, &tables[ga], ids, ga, gb, 0, N, &s, toucher,
                        n_touchers if ga == g0 else 0)
            if rbcd_stopped(job.interrupt):
                break
            for r in range(ga, gb):
                table_finish(&tables[r], job.keep_counts)
            if gb < g1:
                release_free_memory()  # the group's fit tables, before the next group's
            ga = gb
    scratch_free(&s)


ctypedef struct FitTeam:
    # What the threads of the grid mode's team path share (fit_grid_team).
    TeamBarrier bar
    double *xt                # (2, blocks, d * XT_STRIDE): two steps' transposed row blocks
                              # (NULL: none shared; the threads transpose their own, if any)
    Py_ssize_t blocks         # row blocks per step (TEAM_MIN_BLOCKS .. TEAM_BLOCKS)
    int stop[2]               # thread 0's decision, before the barrier that ends a step


cdef Py_ssize_t team_blocks(Py_ssize_t d) noexcept nogil:
    """Row blocks per step of the team path for X of d columns with shared transposes
    (its two steps' transposes within 2 TEAM_HALF_BYTES); 0 where fewer than
    TEAM_MIN_BLOCKS fit (then the threads transpose their own blocks)."""
    cdef Py_ssize_t b = TEAM_HALF_BYTES // (max(d, 1) * XT_STRIDE * <Py_ssize_t> sizeof(double))
    if b < TEAM_MIN_BLOCKS:
        return 0
    return b if b < TEAM_BLOCKS else TEAM_BLOCKS


cdef bint team_fits(const FitJob *job, const int64_t *bounds, Py_ssize_t n_chunks) noexcept nogil:
    """Whether the grid mode's team path can fit these chunks (fit_tables' ``team``): more
    than one chunk, each chunk one sweep (group_end)."""
    cdef Py_ssize_t c
    if n_chunks < 2:
        return False
    for c in range(n_chunks):
        if group_end(job, bounds[c], bounds[c + 1]) != bounds[c + 1]:
            return False
    return True


def team_applies(GridTables grids, const int32_t[::1] direct_bits, Py_ssize_t n_rows,
                 const int64_t[::1] bounds):
    """Whether fit_tables(team=True) takes the team path for this layout, these chunks
    and ``n_rows`` rows (for tests and benchmarks; the same rule as fit_tables)."""
    cdef FitJob job
    if direct_bits.shape[0] != grids.L.R or bounds.shape[0] < 2 or bounds[0] != 0 \
            or bounds[bounds.shape[0] - 1] != grids.L.R:
        raise ValueError("direct_bits and bounds must match the grids")
    job.L = &grids.L
    job.N = n_rows
    job.direct_bits = &direct_bits[0]
    return team_fits(&job, &bounds[0], bounds.shape[0] - 1)


cdef void team_transpose(const FitJob *job, double *dst, Py_ssize_t step, Py_ssize_t blocks,
                         Py_ssize_t tid, Py_ssize_t nt) noexcept nogil:
    """This thread's share of a step's transposes: block j of the step (rows step * blocks
    * ROW_BLOCK + j * ROW_BLOCK ..) for j = tid, tid + nt, ..., into dst + j * d *
    XT_STRIDE, as transpose_block writes s.xt."""
    cdef Py_ssize_t d = job.L.d, N = job.N, j = tid, i0, i1
    while j < blocks:
        i0 = (step * blocks + j) * ROW_BLOCK
        if i0 >= N:
            break
        i1 = i0 + ROW_BLOCK if i0 + ROW_BLOCK < N else N
        transpose_block(job.X, d, i0, i1, N, dst + j * d * XT_STRIDE)
        j += nt


cdef void fit_grid_team(
    const FitJob *job,
    Table *tables,            # IN/OUT (R,) tables
    idx_t *ids,               # OUT (N * R) local id of (i, r) at i * R + r, or NULL
    const int64_t *bounds,    # (n_chunks + 1,) chunk c: grids bounds[c] .. bounds[c + 1] - 1
    Py_ssize_t n_chunks,      # each chunk one group (group_end); every thread of the region
    FitTeam *team,            # calls this
    double *chunk_cpu,        # OUT (n_chunks,) or NULL, as fit_tables' chunk_cpu
) noexcept nogil:
    """The grid mode with X read once for all threads (fit_tables' team path).

    In the grid mode every thread sweeps all rows for its grids, so with T threads X is
    read and transposed T times; with 16 threads sweeping at once a sweep cost twice what
    it costs alone (docs/benchmarks/threads.md, run 12). Here the threads of the region
    walk the rows together, a step of team.blocks row blocks at a time: during step s each
    thread transposes its share of step s + 1's blocks (team_transpose) into one half of
    team.xt while it sweeps its chunks' grids over step s's rows from the other half
    (sweep_rows with s.shared_xt); one barrier ends the step, so a half is rewritten only
    after every thread is done with it. Only the AVX-512 threshold keys read transposed
    blocks; where they do not run (team.xt NULL) the steps still keep the threads
    together, so that a block of X comes from memory once and from the shared cache for
    the other threads. Thread t takes the chunks c = t, t + T, ... (T the region's
    threads). Each grid's table still numbers its rows in row order, step
    after step, from the same keys: tables and ids are the grid mode's, bit for bit.

    Interrupts: thread 0 looks at the signals in its sweeps and, before each barrier,
    writes whether the kernel stops into team.stop[s % 2]; every thread reads it after the
    barrier, so all leave at the same step (thread 0 writes that entry again only after the
    next barrier, which every thread reaches after reading it)."""
    cdef const Layout *L = job.L
    cdef Py_ssize_t N = job.N, d = L.d
    cdef Py_ssize_t tid = omp_thread_num(), nt = omp_num_threads()
    cdef Py_ssize_t step_rows = team.blocks * ROW_BLOCK
    cdef Py_ssize_t n_steps = (N + step_rows - 1) // step_rows
    cdef Py_ssize_t half = team.blocks * d * XT_STRIDE
    cdef Py_ssize_t n_mine = 0, m, c, r, st, row1
    cdef bint stopped = False
    cdef double c0 = thread_cpu_seconds()
    cdef Scratch *scr
    c = tid
    while c < n_chunks:
        n_mine += 1
        c += nt
    scr = <Scratch *> PyMem_RawCalloc(n_mine if n_mine > 0 else 1, sizeof(Scratch))
    cdef unsigned char *ok = <unsigned char *> PyMem_RawCalloc(n_mine if n_mine > 0 else 1, 1)
    for m in range(n_mine):
        c = tid + m * nt
        if scr == NULL or ok == NULL or scratch_init(&scr[m], d, L.max_words,
                                                     bounds[c + 1] - bounds[c]) != 0:
            for r in range(bounds[c], bounds[c + 1]):
                tables[r].failed = 1
            continue
        ok[m] = 1
        for r in range(bounds[c], bounds[c + 1]):
            table_init(&tables[r], L.n_words[r], L.word_bits + r * L.max_words,
                       L.top_bits[r], job.direct_bits[r], N)
        scr[m].span0 = 0
        scr[m].span1 = N
    if team.xt != NULL:
        team_transpose(job, team.xt, 0, team.blocks, tid, nt)
    team_wait(&team.bar, <int> nt)
    for st in range(n_steps):
        if st + 1 < n_steps and team.xt != NULL:
            team_transpose(job, team.xt + ((st + 1) % 2) * half, st + 1, team.blocks, tid, nt)
        row1 = (st + 1) * step_rows if (st + 1) * step_rows < N else N
        for m in range(n_mine):
            if ok == NULL or not ok[m]:
                continue
            c = tid + m * nt
            scr[m].shared_xt = team.xt + (st % 2) * half if team.xt != NULL else NULL
            scr[m].shared_row0 = st * step_rows
            if idx_t is int32_t:
                SWEEP32(job, &tables[bounds[c]], ids, bounds[c], bounds[c + 1], st * step_rows,
                        row1, &scr[m], c, n_chunks)
            else:
                SWEEP64(job, &tables[bounds[c]], ids, bounds[c], bounds[c + 1], st * step_rows,
                        row1, &scr[m], c, n_chunks)
        if tid == 0:
            team.stop[st % 2] = 1 if rbcd_stopped(job.interrupt) else 0
        team_wait(&team.bar, <int> nt)
        if team.stop[st % 2]:
            stopped = True
            break
    for m in range(n_mine):
        c = tid + m * nt
        if ok != NULL and ok[m] and not stopped:
            for r in range(bounds[c], bounds[c + 1]):
                table_finish(&tables[r], job.keep_counts)
        if chunk_cpu != NULL:
            chunk_cpu[c] = thread_cpu_seconds() - c0 if n_mine == 1 and c0 >= 0 else -1.0
        if scr != NULL:
            scratch_free(&scr[m])
    PyMem_RawFree(scr)
    PyMem_RawFree(ok)


# ----------------------------------------------------------------------------
# Row-range fit (fit_tables with n_ranges > 1): every thread sweeps its own rows for
# every grid, then the ranges' tables are merged (rbcd/src/binning_merge.h)
# ----------------------------------------------------------------------------

ctypedef struct MergeWork:
    # Reusable merge buffers (grown, never shrunk, within one fit): the pair arrays of a
    # merge (binning_merge.h) and one thread's partition slots. Fresh pages for every
    # grid's merge would cost a page fault per 4 KiB.
    uint64_t *keys      # (key_words,) the pairs' keys
    uint32_t *counts    # (pairs_cap,) each, as rbcd_merge's arrays of the same names
    uint64_t *hash
    uint32_t *order
    uint32_t *first
    int64_t pairs_cap   # pairs the arrays above hold
    int64_t key_words   # words keys holds
    int64_t *part_off
    int64_t part_cap
    MergeSlot *slots
    uint64_t slots_cap
    uint32_t *id_of     # (id_of_cap,) a direct merge's global id + 1 per key, all 0
    int64_t id_of_cap   # between merges


cdef void work_free(MergeWork *w) noexcept nogil:
    free(w.keys)
    free(w.counts)
    free(w.hash)
    free(w.order)
    free(w.first)
    free(w.part_off)
    free(w.slots)
    free(w.id_of)
    memset(w, 0, sizeof(MergeWork))


cdef int work_room(MergeWork *w, int64_t M, int W, int64_t n_off) noexcept nogil:
    """Room in w for M pairs of W-word keys and n_off partition offsets (0, or -1)."""
    if M > w.pairs_cap or M * W > w.key_words:
        free(w.keys)
        free(w.counts)
        free(w.hash)
        free(w.order)
        free(w.first)
        w.pairs_cap = M if M > w.pairs_cap else w.pairs_cap
        w.key_words = M * W if M * W > w.key_words else w.key_words
        w.keys = <uint64_t *> big_malloc(w.key_words * sizeof(uint64_t) + 1)
        w.counts = <uint32_t *> big_malloc(w.pairs_cap * sizeof(uint32_t) + 1)
        w.hash = <uint64_t *> big_malloc(w.pairs_cap * sizeof(uint64_t) + 1)
        w.order = <uint32_t *> big_malloc(w.pairs_cap * sizeof(uint32_t) + 1)
        w.first = <uint32_t *> big_malloc(w.pairs_cap * sizeof(uint32_t) + 1)
        if (w.keys == NULL or w.counts == NULL or w.hash == NULL or w.order == NULL
                or w.first == NULL):
            work_free(w)
            return -1
    if n_off > w.part_cap:
        free(w.part_off)
        w.part_off = <int64_t *> malloc(n_off * sizeof(int64_t))
        w.part_cap = n_off if w.part_off != NULL else 0
        if w.part_off == NULL:
            return -1
    return 0


ctypedef struct GridMerge:
    # The merge of one grid's range tables (binning_merge.h): its arrays lie in a
    # MergeWork, except base and gid, which the ids rewrite needs after the merge.
    Merge m
    int64_t *base       # (T + 1) owned: the pairs of range t start at base[t]
    int64_t M           # pairs (the ranges' bins summed)
    int64_t n_bins      # the grid's bins (new pairs)


cdef void merge_free(GridMerge *g) noexcept nogil:
    free(g.base)
    free(g.m.gid)
    memset(g, 0, sizeof(GridMerge))


cdef int merge_base(GridMerge *g, const Table *rt, Py_ssize_t stride,
                    Py_ssize_t T) noexcept nogil:
    """g cleared, then the offsets of its ranges' pairs (g.base, T + 1 entries: range t's
    pairs start at base[t]) and their number g.M; rt[t * stride] is the grid's table of
    range t. 0, or -1 when the allocation fails."""
    cdef Py_ssize_t t
    memset(g, 0, sizeof(GridMerge))
    g.base = <int64_t *> malloc((T + 1) * sizeof(int64_t))
    if g.base == NULL:
        return -1
    g.base[0] = 0
    for t in range(T):
        g.base[t + 1] = g.base[t] + rt[t * stride].n_bins
    g.M = g.base[T]
    return 0


cdef int merge_alloc(GridMerge *g, MergeWork *w, const Table *rt, Py_ssize_t stride,
                     Py_ssize_t T, int W, int pbits) noexcept nogil:
    """A grid's merge over the buffers of w; rt[t * stride] is its table of range t
    (exported: keys and counts in local id order). 0, or -1 when an allocation fails."""
    cdef int64_t M
    if merge_base(g, rt, stride, T) != 0:
        return -1
    M = g.M
    g.m.gid = <uint32_t *> big_malloc(M * sizeof(uint32_t) + 1)
    if g.m.gid == NULL or work_room(w, M, W, T * (((<int64_t> 1) << pbits) + 1)) != 0:
        return -1
    g.m.W = W
    g.m.pbits = pbits
    g.m.T = T
    g.m.base = g.base
    g.m.keys = w.keys
    g.m.counts = w.counts
    g.m.hash = w.hash
    g.m.order = w.order
    g.m.first = w.first
    g.m.part_off = w.part_off
    return 0


cdef void merge_gather(GridMerge *g, Table *t, Py_ssize_t r) noexcept nogil:
    """Step 1 for range r: its table's keys and counts (exported) copied to the pairs
    (and freed from the table), then hashed (and sorted by partition)."""
    cdef int64_t b = g.base[r], n = g.base[r + 1] - g.base[r]
    cdef int W = g.m.W
    if n > 0:
        memcpy(<uint64_t *> g.m.keys + b * W, t.keys, n * W * sizeof(uint64_t))
        memcpy(g.m.counts + b, t.counts, n * sizeof(uint32_t))
    free(t.keys)
    free(t.counts)
    t.keys = NULL
    t.counts = NULL
    merge_hash(&g.m, r)


cdef int merge_result(GridMerge *g, Table *out) noexcept nogil:
    """Room for the merged keys and counts in the grid's table ``out`` (n_bins set)."""
    cdef int W = g.m.W
    out.keys = <uint64_t *> big_malloc(g.n_bins * W * sizeof(uint64_t) + 1)
    out.counts = <uint32_t *> big_malloc(g.n_bins * sizeof(uint32_t) + 1)
    if out.keys == NULL or out.counts == NULL:
        return -1
    out.n_bins = g.n_bins
    out.keys_room = g.n_bins
    return 0


cdef int merge_serial(GridMerge *g, MergeWork *w, Table *rt, Py_ssize_t stride, Py_ssize_t T,
                      Table *out) noexcept nogil:
    """A whole merge on this thread, in partitions of at most PART_PAIRS pairs where
    PART_BITS allows (their slots stay in cache). 0, or -1."""
    cdef Py_ssize_t t, p
    cdef int pbits = 0
    cdef int64_t M = pairs_of(rt, stride, T, 0)
    while pbits < PART_BITS and (M >> pbits) > PART_PAIRS:
        pbits += 1
    if merge_alloc(g, w, rt, stride, T, out.n_words, pbits) != 0:
        return -1
    for t in range(T):
        merge_gather(g, &rt[t * stride], t)
    for p in range((<Py_ssize_t> 1) << pbits):
        if merge_partition(&g.m, p, &w.slots, &w.slots_cap) != 0:
            return -1
    g.n_bins = merge_count_new(&g.m, 0, g.M)
    merge_number(&g.m, 0, g.M, 0)
    merge_follow(&g.m, 0, g.M)
    if merge_result(g, out) != 0:
        return -1
    merge_output(&g.m, 0, g.M, out.keys, out.counts)
    return 0


cdef int merge_direct(GridMerge *g, MergeWork *w, Table *rt, Py_ssize_t stride, Py_ssize_t T,
                      int bits, Table *out) noexcept nogil:
    """A whole merge on this thread by key (rbcd_merge_direct), for a grid of single-word
    keys below 2**bits: the same ids, keys and counts as merge_serial. The ranges'
    exported keys and counts are freed as they are merged. 0, or -1."""
    cdef Py_ssize_t t
    cdef int64_t M, k, size = (<int64_t> 1) << bits
    cdef Table *r
    if merge_base(g, rt, stride, T) != 0:
        return -1
    M = g.M
    g.m.W = 1
    g.m.T = T
    g.m.base = g.base
    g.m.gid = <uint32_t *> big_malloc(M * sizeof(uint32_t) + 1)
    if g.m.gid == NULL or work_room(w, M, 1, 0) != 0:
        return -1
    if size > w.id_of_cap:
        free(w.id_of)
        w.id_of_cap = 0
        w.id_of = <uint32_t *> calloc(size, sizeof(uint32_t))  # fresh zero pages
        if w.id_of == NULL:
            return -1
        w.id_of_cap = size
    g.n_bins = 0
    for t in range(T):
        r = &rt[t * stride]
        g.n_bins = merge_direct_range(r.keys, r.counts, r.n_bins, w.id_of,
                                      g.m.gid + g.base[t], w.keys, w.counts, g.n_bins)
        free(r.keys)
        free(r.counts)
        r.keys = NULL
        r.counts = NULL
    for k in range(g.n_bins):
        w.id_of[w.keys[k]] = 0
    if merge_result(g, out) != 0:
        return -1
    memcpy(out.keys, w.keys, g.n_bins * sizeof(uint64_t))
    memcpy(out.counts, w.counts, g.n_bins * sizeof(uint32_t))
    return 0


cdef int merge_parallel(GridMerge *g, MergeWork *works, Table *rt, Py_ssize_t stride,
                        Py_ssize_t T, Table *out, int n_threads) noexcept nogil:
    """A whole merge by every thread (works: n_threads + 1 buffers, the last for the
    pairs, thread i's slots in works[i]): ranges, then partitions (at least
    PART_PER_THREAD per thread, and enough for at most PART_PAIRS pairs each up to
    2**PART_BITS of them), then pair blocks. 0, or -1."""
    cdef Py_ssize_t t, p, c, n_p
    cdef Py_ssize_t n_c = n_threads
    cdef int fails = 0, pbits = 1
    cdef int64_t *start
    cdef MergeWork *mine
    cdef int64_t M = pairs_of(rt, stride, T, 0)
    while pbits < PART_BITS and (((<int64_t> 1) << pbits) < PART_PER_THREAD * n_threads
                                 or (M >> pbits) > PART_PAIRS):
        pbits += 1
    n_p = (<Py_ssize_t> 1) << pbits
    if merge_alloc(g, &works[n_threads], rt, stride, T, out.n_words, pbits) != 0:
        return -1
    start = <int64_t *> malloc((n_c + 1) * sizeof(int64_t))
    if start == NULL:
        return -1
    for t in prange(T, schedule="dynamic", num_threads=n_threads):
        merge_gather(g, &rt[t * stride], t)
    for p in prange(n_p, schedule="dynamic", num_threads=n_threads):
        mine = &works[omp_thread_num()]
        if merge_partition(&g.m, p, &mine.slots, &mine.slots_cap) != 0:
            fails += 1
    if fails:
        free(start)
        return -1
    # pair block c: c * M // n_c .. (c + 1) * M // n_c - 1; start[c + 1]: its new pairs
    start[0] = 0
    for c in prange(n_c, schedule="static", num_threads=n_threads):
        start[c + 1] = merge_count_new(&g.m, c * g.M // n_c, (c + 1) * g.M // n_c)
    for c in range(n_c):
        start[c + 1] += start[c]
    g.n_bins = start[n_c]
    for c in prange(n_c, schedule="static", num_threads=n_threads):
        merge_number(&g.m, c * g.M // n_c, (c + 1) * g.M // n_c, start[c])
    free(start)
    if merge_result(g, out) != 0:
        return -1
    for c in prange(n_c, schedule="static", num_threads=n_threads):
        merge_follow(&g.m, c * g.M // n_c, (c + 1) * g.M // n_c)
        merge_output(&g.m, c * g.M // n_c, (c + 1) * g.M // n_c, out.keys, out.counts)
    return 0


cdef void remap_rows(idx_t *ids, Py_ssize_t R, Py_ssize_t ga, Py_ssize_t gb,
                     const GridMerge *gm, const int64_t *row_start, Py_ssize_t T,
                     Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    """ids of rows i0 .. i1 - 1 in grids ga .. gb - 1: each range's local id replaced by
    the grid's global id (gm[r - ga]: the pair base[t] + local's gid)."""
    cdef Py_ssize_t t = 0, i, r
    cdef idx_t *e
    cdef const GridMerge *g
    while t + 1 < T and row_start[t + 1] <= i0:
        t += 1
    for i in range(i0, i1):
        while row_start[t + 1] <= i:
            t += 1
        for r in range(ga, gb):
            g = &gm[r - ga]
            e = &ids[i * R + r]
            e[0] = <idx_t> g.m.gid[g.base[t] + e[0]]


cdef int fit_ranges(FitJob *job, Table *tables, idx_t *ids, Py_ssize_t T, int n_threads,
                    int64_t merge_pairs, int direct_merge_bits) except -1:
    """The row-range mode of fit_tables: rows cut into T ranges (range t: rows
    t * N // T .. (t + 1) * N // T - 1), n_threads threads. Per group of grids
    (group_end): every range swept for every grid of the group in a table of its own
    (its thread reads only its rows of X and writes only its rows of ids), the ranges'
    tables merged per grid (binning_merge.h: by one thread for a grid of fewer pairs
    than both ``merge_pairs`` and its share of the group's (the pairs over the threads),
    several grids at once; by all threads over hash partitions for the others; 0: all of
    them), the ids of ranges 1 .. T - 1 rewritten to the global ids, and the grids'
    tables finished. The merges are not interrupted (thread 0 looks at the signals in
    the sweeps). A grid that one thread merges is merged by key (merge_direct) where its
    keys are single words of at most ``direct_merge_bits`` bits (-1: none) and its key
    space is at most MERGE_DIRECT_KEYS_PER_PAIR times its pairs (the array of ids by
    key, 4 bytes a key, then takes at most 16 bytes a pair: less than the hash merge's
    own arrays), the others by hash partitions. The same tables and ids as the grid
    mode, bit for bit (first appearance over all rows). Returns 0; a failed table is marked in
    ``tables``; after an interrupt it returns early (the caller raises)."""
    cdef const Layout *L = job.L
    cdef Py_ssize_t N = job.N, R = L.R
    cdef Py_ssize_t ga = 0, gb, ng, t, k, r, b, n_blocks, i0
    cdef int fails
    cdef int64_t big             # pairs from which a grid is merged by every thread
    cdef Table *rt = NULL
    cdef GridMerge *gm = NULL
    cdef Scratch *scr = NULL     # (T,) one per range
    cdef MergeWork *works = NULL # (n_threads + 1,) the threads' merge buffers, and the pairs'
                                 # of the merge by all threads
    cdef int64_t *row_start = <int64_t *> malloc((T + 1) * sizeof(int64_t))
    works = <MergeWork *> PyMem_RawCalloc(n_threads + 1, sizeof(MergeWork))
    if row_start == NULL or works == NULL:
        free(row_start)
        PyMem_RawFree(works)
        raise MemoryError("cannot allocate the bin tables")
    for t in range(T + 1):
        row_start[t] = (<int64_t> t * N) // T
    try:
        while ga < R and not rbcd_stopped(job.interrupt):
            gb = group_end(job, ga, R)
            ng = gb - ga
            rt = <Table *> PyMem_RawCalloc(T * ng, sizeof(Table))
            gm = <GridMerge *> PyMem_RawCalloc(ng, sizeof(GridMerge))
            scr = <Scratch *> PyMem_RawCalloc(T, sizeof(Scratch))
            if rt == NULL or gm == NULL or scr == NULL:
                raise MemoryError("cannot allocate the bin tables")
            job.interrupt.finished = 0
            for t in prange(T, nogil=True, schedule="static", chunksize=1, num_threads=n_threads):
                if scratch_init(&scr[t], L.d, L.max_words, ng) != 0:
                    for k in range(ng):
                        rt[t * ng + k].failed = 1
                else:
                    for k in range(ng):
                        table_init(&rt[t * ng + k], L.n_words[ga + k],
                                   L.word_bits + (ga + k) * L.max_words, L.top_bits[ga + k],
                                   job.direct_bits[ga + k], row_start[t + 1] - row_start[t])
                    scr[t].span0 = row_start[t]
                    scr[t].span1 = row_start[t + 1]
                    if idx_t is int32_t:
                        SWEEP32(job, &rt[t * ng], ids, ga, gb, row_start[t], row_start[t + 1],
                                &scr[t], 0, 0)
                    else:
                        SWEEP64(job, &rt[t * ng], ids, ga, gb, row_start[t], row_start[t + 1],
                                &scr[t], 0, 0)
                scratch_free(&scr[t])
                rbcd_chunk_done(job.interrupt)
                if omp_thread_num() == 0 and t + omp_num_threads() >= T:
                    wait_for_chunks(job.interrupt, job.caught, T)  # thread 0's last range
            if rbcd_stopped(job.interrupt):
                break
            with nogil:
                for k in prange(T * ng, schedule="dynamic", num_threads=n_threads):
                    if rt[k].failed == 0 and table_export(&rt[k]) != 0:
                        rt[k].failed = 1
                # a failed range table (sweep or export) fails its grid
                for k in range(T * ng):
                    if rt[k].failed and tables[ga + k % ng].failed == 0:
                        tables[ga + k % ng].failed = rt[k].failed
                for k in range(ng):
                    tables[ga + k].n_words = L.n_words[ga + k]
                    tables[ga + k].wbits = L.word_bits + (ga + k) * L.max_words
                # grids of at most their share of the group's pairs: one thread each
                # (several at once); then the others (merge_pairs == 0: all), each by every
                # thread
                big = 0
                for k in range(ng):
                    big += pairs_of(rt, ng, T, k)
                big = big // n_threads + 1
                if big < merge_pairs or merge_pairs == 0:
                    big = merge_pairs
                for k in prange(ng, schedule="dynamic", num_threads=n_threads):
                    if tables[ga + k].failed == 0 and pairs_of(rt, ng, T, k) < big:
                        if (L.n_words[ga + k] == 1 and L.top_bits[ga + k] <= direct_merge_bits
                                and ((<int64_t> 1) << L.top_bits[ga + k])
                                <= MERGE_DIRECT_KEYS_PER_PAIR * pairs_of(rt, ng, T, k)):
                            if merge_direct(&gm[k], &works[omp_thread_num()], &rt[k], ng, T,
                                            L.top_bits[ga + k], &tables[ga + k]) != 0:
                                tables[ga + k].failed = 1
                        elif merge_serial(&gm[k], &works[omp_thread_num()], &rt[k], ng, T,
                                          &tables[ga + k]) != 0:
                            tables[ga + k].failed = 1
                for k in range(ng):
                    if tables[ga + k].failed == 0 and pairs_of(rt, ng, T, k) >= big:
                        if merge_parallel(&gm[k], works, &rt[k], ng, T, &tables[ga + k],
                                          n_threads) != 0:
                            tables[ga + k].failed = 1
                fails = 0
                for k in range(ng):
                    fails += tables[ga + k].failed != 0
                if ids != NULL and T > 1 and fails == 0:
                    n_blocks = (N - row_start[1] + REMAP_ROWS - 1) // REMAP_ROWS
                    for b in prange(n_blocks, schedule="static", num_threads=n_threads):
                        i0 = row_start[1] + b * REMAP_ROWS
                        remap_rows(ids, R, ga, gb, gm, row_start, T, i0,
                                   i0 + REMAP_ROWS if i0 + REMAP_ROWS < N else N)
                for k in range(ng):
                    merge_free(&gm[k])
                for k in range(T * ng):
                    table_free(&rt[k])
                for k in prange(ng, schedule="dynamic", num_threads=n_threads):
                    table_finish(&tables[ga + k], job.keep_counts)
            PyMem_RawFree(rt)
            PyMem_RawFree(gm)
            PyMem_RawFree(scr)
            rt = NULL
            gm = NULL
            scr = NULL
            if gb < R:
                with nogil:
                    release_free_memory()  # the group's fit tables, before the next group's
            ga = gb
    finally:
        if gm != NULL:
            for k in range(ng):
                merge_free(&gm[k])
            PyMem_RawFree(gm)
        if rt != NULL:
            for k in range(T * ng):
                table_free(&rt[k])
            PyMem_RawFree(rt)
        PyMem_RawFree(scr)
        for k in range(n_threads + 1):
            work_free(&works[k])
        PyMem_RawFree(works)
        free(row_start)
    return 0


cdef inline int64_t pairs_of(const Table *rt, Py_ssize_t ng, Py_ssize_t T, Py_ssize_t k) noexcept nogil:
    """The pairs of grid k of a group: its range tables' bins summed."""
    cdef int64_t n = 0
    cdef Py_ssize_t t
    for t in range(T):
        n += rt[t * ng + k].n_bins
    return n


# ----------------------------------------------------------------------------
# Python-facing kernels
# ----------------------------------------------------------------------------

def avx512_cpu():
    """True if this CPU runs the AVX-512 paths (avx512f and avx512dq, checked at run time)."""
    return bool(avx512_available())


def normal_widths(const double[:, ::1] widths):
    """True if every width lies within [2**-1000, 2**1000], so that 1 / w is a
    normal number and the AVX-512 bins (rbcd_floor8 in binning_keys.h) are exact."""
    cdef Py_ssize_t r, j
    for r in range(widths.shape[0]):
        for j in range(widths.shape[1]):
            if not (widths[r, j] >= 9.332636185032189e-302 and widths[r, j] <= 1.0715086071862673e+301):
                return False
    return True


def scan_columns(const double[:, ::1] X, int n_threads):
    """Column minima and maxima of X and the first non-finite entry.

    Returns ``(cmin, cmax, bad)``: float64 arrays of length d and the flat
    index ``i * d + j`` of the first (row-major) non-finite entry, or -1. The
    minima / maxima are only meaningful when ``bad == -1``.
    """
    cdef Py_ssize_t N = X.shape[0], d = X.shape[1]
    cdef Py_ssize_t n_chunks = min(max(1, n_threads) * 4, N) if N > 0 else 1
    cdef double[:, ::1] mins = np.full((n_chunks, d), np.inf)
    cdef double[:, ::1] maxs = np.full((n_chunks, d), -np.inf)
    cdef int64_t[::1] bad = np.full(n_chunks, -1, dtype=np.int64)
    cdef Py_ssize_t c, i, j, start, stop
    cdef double v
    cdef const double *row
    cdef double *mn
    cdef double *mx
    for c in prange(n_chunks, nogil=True, schedule="static", num_threads=max(1, n_threads)):
        start = c * N // n_chunks
        stop = (c + 1) * N // n_chunks
        mn = &mins[c, 0]
        mx = &maxs[c, 0]
        for i in range(start, stop):
            row = &X[i, 0]
            # mn = minimum(mn, X[i]); mx = maximum(mx, X[i]); stop at NaN / inf
            for j in range(d):
                v = row[j]
                if v - v != 0.0:
                    if bad[c] < 0:
                        bad[c] = i * d + j
                if v < mn[j]:
                    mn[j] = v
                if v > mx[j]:
                    mx[j] = v
            if bad[c] >= 0:
                break
    cdef int64_t first = -1
    for c in range(n_chunks):
        if bad[c] >= 0:
            first = bad[c]
            break
    return np.min(np.asarray(mins), axis=0), np.max(np.asarray(maxs), axis=0), int(first)


def first_bad_bin(const double[:, ::1] X, const double[:, ::1] widths,
                  const double[:, ::1] offsets, const unsigned char[::1] columns):
    """(row, column, grid, value) of the first bin outside [-2**63, 2**63).

    Row-major in (row, column), then the lowest grid; only the flagged
    columns are examined. Error path, serial. Returns None if none is bad.
    """
    cdef Py_ssize_t N = X.shape[0], d = X.shape[1], R = widths.shape[0]
    cdef Py_ssize_t i, j, r
    cdef double q
    for i in range(N):
        for j in range(d):
            if not columns[j]:
                continue
            for r in range(R):
                q = (X[i, j] - offsets[r, j]) / widths[r, j]
                q = floor_double(q)
                if not (q >= -9223372036854775808.0 and q < 9223372036854775808.0):
                    return int(i), int(j), int(r), float(q)
    return None


def pack_layout(const int64_t[:, ::1] lo, const int64_t[:, ::1] hi):
    """Bit layout of the packed keys: word and shift of every (grid, column).

    Field j of grid r gets ``bit_length(hi - lo)`` bits, packed greedily into
    64-bit words (a field never straddles two words). Returns ``(word, shift,
    n_words, top_bits, word_bits)`` with shapes (R, d), (R, d), (R,), (R,), (R, W): int32,
    int64, int32, int32, int32 (top_bits: the bits used in the last word of the key;
    word_bits[r, k]: the bits used in word k of grid r's key, 0 past its last word,
    W = the largest n_words).
    """
    cdef Py_ssize_t R = lo.shape[0], d = lo.shape[1], r, j
    word_arr = np.zeros((R, d), dtype=np.int32)
    shift_arr = np.zeros((R, d), dtype=np.int64)
    n_words_arr = np.ones(R, dtype=np.int32)
    top_arr = np.zeros(R, dtype=np.int32)
    cdef int32_t[::1] top = top_arr
    cdef int32_t[:, ::1] word = word_arr
    cdef int64_t[:, ::1] shift = shift_arr
    cdef int32_t[::1] n_words = n_words_arr
    cdef uint64_t span
    cdef int bits, cur_word, cur_shift
    for r in range(R):
        cur_word = 0
        cur_shift = 0
        for j in range(d):
            span = <uint64_t> hi[r, j] - <uint64_t> lo[r, j]
            bits = 0
            while span:
                bits += 1
                span >>= 1
            word[r, j] = cur_word
            if bits == 0:
                continue  # one bin in this column: the field is always 0
            if cur_shift + bits > 64:
                cur_word += 1
                cur_shift = 0
            word[r, j] = cur_word
            shift[r, j] = cur_shift
            cur_shift += bits
        n_words[r] = cur_word + 1
        top[r] = cur_shift
    wbits_arr = np.zeros((R, int(n_words_arr.max()) if R else 1), dtype=np.int32)
    cdef int32_t[:, ::1] wbits = wbits_arr
    for r in range(R):
        for j in range(d):
            span = <uint64_t> hi[r, j] - <uint64_t> lo[r, j]
            if span:
                bits = _bit_length(span) + <int> shift[r, j]
                if bits > wbits[r, word[r, j]]:
                    wbits[r, word[r, j]] = bits
    return word_arr, shift_arr, n_words_arr, top_arr, wbits_arr


def pair_l1(const double[:, ::1] X, const int64_t[::1] i, const int64_t[::1] j):
    """(dist, m): the L1 distances of the row pairs (i[p], j[p]) of X, each a running sum
    over the columns in increasing order, one term at a time (``rbcd._scale``'s contract:
    bit for bit ``cumsum(abs(X[i] - X[j]), axis=1)[:, -1]``), and m the largest magnitude
    of an entry of those rows (rbcd._scale's range check; 0.0 with no entry). Indices are
    the caller's to check."""
    cdef Py_ssize_t n = i.shape[0], d = X.shape[1], p, c
    cdef double acc, m = 0.0, fa, fb
    if j.shape[0] != n:
        raise ValueError("i and j must have the same length")
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] ov = out
    cdef const double *a
    cdef const double *b
    if d == 0:
        out[:] = 0.0
        return out, 0.0
    with nogil:
        for p in range(n):
            a = &X[i[p], 0]
            b = &X[j[p], 0]
            acc = 0.0
            for c in range(d):
                acc = acc + fabs(a[c] - b[c])
                fa = fabs(a[c])
                fb = fabs(b[c])
                if fa > m:
                    m = fa
                if fb > m:
                    m = fb
            ov[p] = acc
    return out, m


def first_reaching_array(const double[::1] a, const double[::1] b, const double[::1] u,
                         const double[::1] w, const double[::1] k, const double[::1] guess):
    """Per entry the smallest float64 t in (a, b] with ``floor((t - u) / w) >= k``
    (``rbcd_first_reaching`` of binning_plan.h; the caller guarantees the bracket:
    not reached at a, reached at b). ``guess`` only speeds the search up."""
    cdef Py_ssize_t n = a.shape[0], e
    if not (b.shape[0] == u.shape[0] == w.shape[0] == k.shape[0] == guess.shape[0] == n):
        raise ValueError("all arrays must have the same length")
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] ov = out
    with nogil:
        for e in range(n):
            ov[e] = first_reaching(a[e], b[e], u[e], w[e], k[e], guess[e])
    return out


def thresholds(const double[:, ::1] widths, const double[:, ::1] offsets,
               const int64_t[:, ::1] lo, const int64_t[:, ::1] hi, const double[::1] cmin,
               const double[::1] cmax, const int64_t[:, ::1] shift,
               const unsigned char[::1] use):
    """The thresholds of the grids with ``use[r]`` (``_plan._thresholds``):
    for every column j and bin k in (lo[r, j], hi[r, j]] the smallest float64 t in
    (cmin[j], cmax[j]] with ``floor((t - u) / w) >= k`` (binning_plan.h), in the order
    grid, column, bin. Returns ``(thr_ptr, ent_j, ent_t, ent_add)``: int64 (R + 1,),
    int32, float64 and uint64 (``1 << shift[r, j]``) arrays of the entries."""
    cdef Py_ssize_t R = widths.shape[0], d = widths.shape[1], r, j, e
    cdef int64_t kk
    cdef double u, w, k
    thr_ptr_arr = np.zeros(R + 1, dtype=np.int64)
    cdef int64_t[::1] thr_ptr = thr_ptr_arr
    for r in range(R):
        thr_ptr[r + 1] = thr_ptr[r]
        if use[r]:
            for j in range(d):
                thr_ptr[r + 1] += hi[r, j] - lo[r, j]
    cdef Py_ssize_t n_ent = thr_ptr[R]
    ent_j_arr = np.empty(n_ent, dtype=np.int32)
    ent_t_arr = np.empty(n_ent, dtype=np.float64)
    ent_add_arr = np.empty(n_ent, dtype=np.uint64)
    cdef int32_t[::1] ent_j = ent_j_arr
    cdef double[::1] ent_t = ent_t_arr
    cdef uint64_t[::1] ent_add = ent_add_arr
    with nogil:
        for r in range(R):
            if not use[r]:
                continue
            e = thr_ptr[r]
            for j in range(d):
                u = offsets[r, j]
                w = widths[r, j]
                for kk in range(lo[r, j] + 1, hi[r, j] + 1):
                    k = <double> kk
                    ent_j[e] = <int32_t> j
                    ent_t[e] = first_reaching(cmin[j], cmax[j], u, w, k, u + k * w)
                    ent_add[e] = (<uint64_t> 1) << shift[r, j]
                    e += 1
    return thr_ptr_arr, ent_j_arr, ent_t_arr, ent_add_arr


def range_bounds(const double[:, ::1] widths, const double[:, ::1] offsets,
                 const int64_t[:, ::1] lo, const int64_t[:, ::1] hi, const double[::1] cmin,
                 const double[::1] cmax, const unsigned char[::1] use):
    """Per (grid, column) of the grids with ``use[r]`` the smallest float64 in bin lo and
    the smallest past bin hi (-inf / +inf where no finite value is; the others' stay
    -inf / +inf), so that a value's bin lies in [lo, hi] iff ``range_lo <= x < range_hi``
    (``_plan._range_bounds``). Returns ``(range_lo, range_hi)``, (R, d)."""
    cdef Py_ssize_t R = widths.shape[0], d = widths.shape[1], r, j
    cdef double u, w, k, big = np.finfo(np.float64).max
    range_lo_arr = np.full((R, d), -np.inf)
    range_hi_arr = np.full((R, d), np.inf)
    cdef double[:, ::1] rlo = range_lo_arr
    cdef double[:, ::1] rhi = range_hi_arr
    with nogil:
        for r in range(R):
            if not use[r]:
                continue
            for j in range(d):
                u = offsets[r, j]
                w = widths[r, j]
                k = <double> lo[r, j]  # reached at cmin; below every finite value?
                if not reaches(-big, u, w, k):
                    rlo[r, j] = first_reaching(-big, cmin[j], u, w, k, u + k * w)
                k = <double> hi[r, j] + 1.0  # not reached at cmax; by some finite value?
                if reaches(big, u, w, k):
                    rhi[r, j] = first_reaching(cmax[j], big, u, w, k, u + k * w)
    return range_lo_arr, range_hi_arr


def fit_tables(const double[:, ::1] X, GridTables grids, const int32_t[::1] direct_bits,
               idx_t[::1] ids, bint want_counts, const int64_t[::1] bounds, paths,
               Py_ssize_t n_ranges=0, int n_threads=1, int64_t merge_pairs=0,
               double[::1] chunk_cpu=None, bint team=False):
    """Build the exact per-grid bin tables of the training rows (docs/design.md contract 4).

    grids : the layout of the grids (widths, offsets, training bounds, packed-key layout,
        thresholds), its tables not yet set. Grids with thresholds compute their
        (single-word) keys from them when ``paths.thresholds``.
    direct_bits : (R,) grids with ``direct_bits[r] >= 0`` (single-word keys below
        ``2**direct_bits[r]``) are fitted in a direct table instead of a hash table.
    ids : (N * R,) OUT, or length 0 for none: local id of row i in grid r
        at ``i * R + r`` (numbered by first appearance in row order).
    bounds : (n_chunks + 1,) the grid mode: thread c fits grids ``bounds[c] .. bounds[c + 1]
        - 1`` over all rows (0 = bounds[0] < bounds[1] < ... < bounds[-1] = R; see
        ``_plan._grid_bounds``). Must be ``[0, R]`` in the row-range mode.
    paths : ``_plan._Paths`` (its ``simd`` and ``thresholds``).
    n_ranges : 0 for the grid mode; else the row-range mode (fit_ranges): the rows cut
        into ``n_ranges`` ranges, every range fitted for every grid by one of
        ``n_threads`` threads, the ranges' tables merged (a grid of at least
        ``merge_pairs`` range bins by all threads) and the ids rewritten.
    chunk_cpu : (n_chunks,) OUT, or None: in the grid mode, the CPU seconds of the thread
        that fitted each chunk's grids (its own clock: the chunk's work, also when there
        are more threads than cores), for benchmarks/fit_balance.py; -1 where the
        platform has no per-thread clock. Not filled in the row-range mode. In the
        team path a chunk's entry is its thread's CPU seconds where that thread has one
        chunk, else -1.
    team : the grid mode's team path (fit_grid_team: the threads walk the rows together,
        so that X comes from memory once for all of them, and the AVX-512 threshold keys'
        transposes are made once, where X is narrow enough) where it applies: more than
        one chunk, every chunk one sweep (group_end; team_applies says). Elsewhere the
        plain grid mode runs. The same output either way.

    Returns ``(n_bins, max_count, dirs, offs, ents, counts)``: int64 (R,) arrays,
    lists of the per-grid arrays of the bucketed tables (binning_table.h: uint32
    dir, uint8 offsets, uint8 records), and the concatenated
    int64 bin counts in column order (None unless want_counts).
    Identical for every thread count and either mode: bins are numbered by first
    appearance over all rows (a grid's table is built by one thread in the grid mode;
    the merge of the row-range mode keeps that numbering, binning_merge.h).
    """
    cdef Py_ssize_t N = X.shape[0], d = X.shape[1], R = grids.L.R
    cdef Py_ssize_t r, c, n_chunks, k
    cdef int64_t[::1] counts_v
    cdef int64_t total = 0
    cdef int64_t[::1] nb_v
    cdef int64_t[::1] mc_v
    cdef FitJob job
    cdef FitTeam fteam
    cdef bint team_path = False
    if d != grids.L.d:
        raise ValueError(f"X has {d} columns, the grids {grids.L.d}")
    if ids.shape[0] != 0 and ids.shape[0] != N * R:
        raise ValueError("ids must have length N * R or 0")
    cdef idx_t *ids_ptr = &ids[0] if ids.shape[0] != 0 else NULL
    if direct_bits.shape[0] != R:
        raise ValueError("direct_bits must have length R")
    for r in range(R):
        if direct_bits[r] >= 0 and (grids.L.n_words[r] != 1 or direct_bits[r] > 30):
            raise ValueError("direct tables need single-word grids of at most 30 bits")
    n_chunks = bounds.shape[0] - 1
    if n_chunks < 1 or bounds[0] != 0 or bounds[n_chunks] != R:
        raise ValueError("bounds must run from 0 to R")
    if n_ranges < 0 or (n_ranges > 0 and (n_chunks != 1 or n_threads < 1)):
        raise ValueError("the row-range mode needs bounds [0, R] and n_threads >= 1")
    if chunk_cpu is not None and chunk_cpu.shape[0] != n_chunks:
        raise ValueError("chunk_cpu must have one entry per chunk of bounds")
    cdef double *cpu_ptr = &chunk_cpu[0] if chunk_cpu is not None else NULL
    cdef double c0
    for c in range(n_chunks):
        if bounds[c + 1] <= bounds[c]:
            raise ValueError("bounds must be strictly increasing")
    job.L = &grids.L
    job.X = &X[0, 0] if N > 0 else NULL
    job.N = N
    job.direct_bits = &direct_bits[0]
    job.vec = bool(paths.simd) and avx512_available()
    job.simd = job.vec and grids.L.normal_widths
    job.thresholds = bool(paths.thresholds)
    job.keep_counts = want_counts
    cdef rbcd_interrupt interrupt
    interrupt_init(&interrupt)
    caught = []
    job.interrupt = &interrupt
    job.caught = <PyObject *> caught
    cdef Table *tables = <Table *> PyMem_RawCalloc(R, sizeof(Table))
    if tables == NULL:
        raise MemoryError("cannot allocate the bin tables")
    try:
        team_path = n_ranges == 0 and team and team_fits(&job, &bounds[0], n_chunks)
        if n_ranges > 0:
            fit_ranges(&job, tables, ids_ptr, n_ranges, n_threads, merge_pairs,
                       MERGE_DIRECT_BITS if paths.merge_direct else -1)
        elif team_path:
            # shared transposes where the AVX-512 threshold keys run and X is narrow enough
            fteam.blocks = team_blocks(d) if job.vec and job.thresholds else 0
            fteam.xt = NULL
            if fteam.blocks > 0:
                fteam.xt = <double *> PyMem_RawCalloc(2 * fteam.blocks * d * XT_STRIDE,
                                                      sizeof(double))
                if fteam.xt == NULL:
                    raise MemoryError("cannot allocate the bin tables")
            else:
                fteam.blocks = TEAM_BLOCKS
            team_init(&fteam.bar)
            fteam.stop[0] = 0
            fteam.stop[1] = 0
            try:
                # the fit's threads (at most one a chunk), each its chunks c = t, t + T, ...
                with nogil, parallel(num_threads=max(1, min(n_chunks, n_threads))):
                    fit_grid_team(&job, tables, ids_ptr, &bounds[0], n_chunks, &fteam,
                                  cpu_ptr)
            finally:
                PyMem_RawFree(fteam.xt)
        else:
            for c in prange(n_chunks, nogil=True, schedule="static", chunksize=1,
                            num_threads=n_chunks):
                c0 = thread_cpu_seconds() if cpu_ptr != NULL else 0.0
                fit_grid_block(&job, tables, ids_ptr, bounds[c], bounds[c + 1], c, n_chunks)
                if cpu_ptr != NULL:
                    cpu_ptr[c] = thread_cpu_seconds() - c0 if c0 >= 0 else -1.0
                rbcd_chunk_done(&interrupt)
                if omp_thread_num() == 0 and c + omp_num_threads() >= n_chunks:
                    wait_for_chunks(&interrupt, job.caught, n_chunks)  # thread 0's last chunk
        if caught:  # Ctrl-C (or another signal handler's exception): nothing is kept
            raise caught[0]
        for r in range(R):
            if tables[r].failed == 2:
                raise RuntimeError("internal error: a training bin fell outside its bounds")
            if tables[r].failed:
                raise MemoryError("not enough memory for the bin tables")
        n_bins = np.empty(R, dtype=np.int64)
        max_count = np.empty(R, dtype=np.int64)
        nb_v = n_bins
        mc_v = max_count
        dirs = []
        offs = []
        ents = []
        total = 0
        for r in range(R):
            nb_v[r] = tables[r].n_bins
            total += tables[r].n_bins
        counts = np.empty(total, dtype=np.int64) if want_counts else None
        counts_v = counts if want_counts else np.empty(0, dtype=np.int64)
        total = 0
        for r in range(R):
            # hand the table storage to numpy (no copy); the arrays free it
            dirs.append(_adopt(tables[r].ct.dir, tables[r].ct.n_dir, np.uint32))
            tables[r].ct.dir = NULL
            offs.append(_adopt(tables[r].ct.off, tables[r].ct.n_off, np.uint8))
            tables[r].ct.off = NULL
            ents.append(_adopt(tables[r].ct.ent, tables[r].ct.n_ent, np.uint8))
            tables[r].ct.ent = NULL
            mc_v[r] = tables[r].max_count
            if want_counts:
                for k in range(tables[r].n_bins):
                    counts_v[total + k] = tables[r].counts[k]
            total += tables[r].n_bins
            table_free(&tables[r])  # free as we go
    finally:
        for r in range(R):
            table_free(&tables[r])
        PyMem_RawFree(tables)
        if total >= RELEASE_BINS:
            with nogil:
                release_free_memory()  # the fit tables' pages (see binning_alloc.h)
    return n_bins, max_count, dirs, offs, ents, counts


_FORMATS = {
    np.dtype(np.int32): "i", np.dtype(np.int64): "q", np.dtype(np.uint64): "Q",
    np.dtype(np.float32): "f", np.dtype(np.float64): "d",
}


def empty(Py_ssize_t n, dtype, bint huge=False):
    """An uninitialised 1-D array, 64-byte aligned (numpy owns and frees it).

    Unlike ``numpy.empty`` the block is not advised as huge pages. On the
    project's 2-vCPU VMs a process's first touch of fresh 2 MiB pages costs far
    more than the 4 KiB page faults it saves: a whole process of one
    fit_transform and one transform (N = 10^6, R = 64, 1 thread) took 1.78x as
    long with Z's arrays on huge pages (system time 3.3 s against 1.0 s). On the
    16-core Xeon VM huge pages saved 20% on 1 thread and nothing on 16
    (docs/benchmarks/threads.md). ``huge=True`` advises them all the same (2 MiB
    aligned, ``rbcd_big_malloc``): for compare_threads.py, which measures both.
    """
    dt = np.dtype(dtype)
    fmt = _FORMATS[dt]
    cdef Py_ssize_t itemsize = dt.itemsize
    cdef void *ptr
    cdef cvarray arr
    if n <= 0:
        return np.empty(0, dtype=dt)
    # (big_malloc aligns and advises blocks of 2 MiB and more; below that it is malloc)
    ptr = (big_malloc(n * itemsize) if huge and n * itemsize >= (1 << 21)
           else line_malloc(n * itemsize))
    if ptr == NULL:
        raise MemoryError(f"cannot allocate {n * itemsize} bytes")
    arr = cvarray(shape=(n,), itemsize=itemsize, format=fmt, mode="c", allocate_buffer=False)
    arr.data = <char *> ptr
    arr.callback_free_data = free
    out = np.asarray(arr)
    if out.dtype != dt:  # a platform where the format char maps elsewhere
        return np.empty(n, dtype=dt)  # (the cvarray frees ptr when collected)
    return out


cdef void _free_capsule(object capsule) noexcept:
    free(PyCapsule_GetPointer(capsule, NULL))


cdef object _adopt(void *ptr, Py_ssize_t n, dtype):
    """A numpy array of ``n`` items of ``dtype`` (uint8, uint32 or uint64) owning the
    malloc'd ``ptr`` (freed with the array, through a capsule as its base: a few
    hundred nanoseconds, which matters at one call per table)."""
    cdef cnp.npy_intp dims = n
    cdef int typenum
    dt = np.dtype(dtype)
    if n == 0:
        free(ptr)
        return np.empty(0, dtype=dt)
    typenum = dt.num
    base = PyCapsule_New(ptr, NULL, <PyCapsule_Destructor> _free_capsule)  # frees ptr
    out = cnp.PyArray_SimpleNewFromData(1, &dims, typenum, ptr)
    cnp.set_array_base(out, base)
    return out


def fill_constant(val_t[::1] data, double value, int n_threads):
    """data[:] = value (cast to data's dtype), in parallel blocks."""
    cdef Py_ssize_t n = data.shape[0], n_chunks = 64, c, k, start, stop
    cdef val_t v = <val_t> value
    if n < n_chunks:
        n_chunks = 1
    for c in prange(n_chunks, nogil=True, schedule="static", num_threads=max(1, n_threads)):
        start = c * n // n_chunks
        stop = (c + 1) * n // n_chunks
        # data[start:stop] = v
        for k in range(start, stop):
            data[k] = v


def row_starts(Py_ssize_t n_rows, Py_ssize_t R, dtype, int n_threads):
    """``np.arange(0, n_rows * R + 1, R, dtype=dtype)`` (the indptr of a CSR matrix with R
    entries a row), written in parallel blocks. numpy allocates it, as np.arange would
    (the same page advice); only the fill is parallel."""
    out = np.empty(n_rows + 1, dtype=dtype)
    _fill_row_starts(out, R, n_threads)
    return out


def _fill_row_starts(idx_t[::1] out, Py_ssize_t R, int n_threads):
    cdef Py_ssize_t n = out.shape[0], n_chunks = 64, c, k, start, stop
    if n < (1 << 16):
        n_chunks = 1
    for c in prange(n_chunks, nogil=True, schedule="static", num_threads=max(1, n_threads)):
        start = c * n // n_chunks
        stop = (c + 1) * n // n_chunks
        for k in range(start, stop):
            out[k] = <idx_t> (k * R)


def finish_training(idx_t[::1] ids, const int64_t[::1] grid_ptr, val_t[::1] data,
                    double value, int n_threads):
    """Z's training arrays in one parallel pass over the rows:
    ``ids[i * R + r] += grid_ptr[r]`` (local ids to global columns, in place) and
    ``data[:] = value`` (cast to data's dtype; the first touch of its pages)."""
    cdef Py_ssize_t R = grid_ptr.shape[0] - 1
    cdef Py_ssize_t N = ids.shape[0] // R if R > 0 else 0
    cdef Py_ssize_t i, r
    cdef idx_t *row
    cdef val_t *drow
    cdef val_t v = <val_t> value
    if data.shape[0] != ids.shape[0] or N * R != ids.shape[0]:
        raise ValueError("ids and data must both have length N * R")
    for i in prange(N, nogil=True, schedule="static", num_threads=max(1, n_threads)):
        row = &ids[i * R]
        drow = &data[i * R]
        for r in range(R):
            row[r] = row[r] + <idx_t> grid_ptr[r]
            drow[r] = v


def transform_exact(GridTables grids, const double[:, ::1] X, idx_t[::1] out,
                    int64_t[::1] row_nnz, int n_threads, paths):
    """Columns of new rows through the fitted tables (bins unseen in fit: no entry).

    Grids with thresholds (when ``paths.thresholds``) build single-word keys from
    them, with ``range_lo[r, j] <= x_j < range_hi[r, j]`` deciding whether the row's
    bin lies within the training bins (see ``_plan._range_bounds``); the
    others divide. A grid with a dense index (when ``paths.direct``) looks its keys
    up there (uint32, id + 1 per possible key, 0 for none) instead of in its table.
    Parallel over blocks of ROW_BLOCK rows; per block, grid by grid: keys, their
    buckets' bounds prefetched and read, the buckets' first entries prefetched, the
    buckets scanned (binning_table.h).

    out : (N * R,) OUT, row i's columns left-packed, sorted, at i * R ...
    row_nnz : (N,) OUT, number of columns of row i.
    """
    if not grids.fitted:
        raise ValueError("the grid tables are not fitted")
    cdef const Layout *L = &grids.L
    cdef const GridTable *G = grids.grids
    cdef Py_ssize_t N = X.shape[0], d = X.shape[1], R = L.R
    if d != L.d:
        raise ValueError(f"X has {d} columns, the grids {L.d}")
    if out.shape[0] < N * R or row_nnz.shape[0] < N:
        raise ValueError("out must have length N * R and row_nnz length N")
    cdef Py_ssize_t b, n_blocks = (N + ROW_BLOCK - 1) // ROW_BLOCK
    cdef Py_ssize_t i0, i1, n, k, r, e0, cnt
    cdef int max_words = L.max_words, W
    cdef bint xt_ready, vec = bool(paths.simd) and avx512_available()
    cdef bint simd = vec and L.normal_widths
    cdef bint use_thresholds = bool(paths.thresholds), use_index = bool(paths.direct)
    # the kernels vectorised over rows run for blocks of at least simd_rows rows (a
    # few rows would fill one of a vector's eight lanes each); the scalar ones give the
    # same keys and ids (contract 3)
    cdef Py_ssize_t simd_rows = max(1, int(paths.simd_rows))
    cdef bint vec_rows
    cdef double *q
    cdef double *xt
    cdef uint64_t *keys
    cdef uint64_t *hashes
    cdef uint64_t *recs
    cdef unsigned char *inside
    cdef int64_t *stage
    cdef const CTable *tab
    cdef const uint32_t *index
    cdef uint32_t p0, p1
    cdef uint64_t span
    cdef int64_t local
    cdef int32_t[::1] failed = np.zeros(1, dtype=np.int32)
    if N == 0:
        return
    q = NULL
    xt = NULL
    keys = NULL
    hashes = NULL
    recs = NULL
    inside = NULL
    stage = NULL
    with nogil, parallel(num_threads=max(1, n_threads)):
        q = <double *> PyMem_RawMalloc(d * sizeof(double))
        xt = <double *> PyMem_RawCalloc(d * XT_STRIDE, sizeof(double))
        keys = <uint64_t *> PyMem_RawMalloc(ROW_BLOCK * max_words * sizeof(uint64_t))
        hashes = <uint64_t *> PyMem_RawMalloc(ROW_BLOCK * sizeof(uint64_t))
        # recs[k * max_words ..]: the record key bits of row i0 + k (rbcd_ct_query)
        recs = <uint64_t *> PyMem_RawMalloc(ROW_BLOCK * max_words * sizeof(uint64_t))
        inside = <unsigned char *> PyMem_RawMalloc(ROW_BLOCK * sizeof(unsigned char))
        # stage[r * ROW_BLOCK + k]: local id of row i0 + k in grid r, or -1
        stage = <int64_t *> PyMem_RawMalloc(ROW_BLOCK * R * sizeof(int64_t))
        if (q == NULL or xt == NULL or keys == NULL or hashes == NULL or recs == NULL
                or inside == NULL or stage == NULL):
            failed[0] = 1
        else:
            for b in prange(n_blocks, schedule="static"):
                i0 = b * ROW_BLOCK
                i1 = i0 + ROW_BLOCK if i0 + ROW_BLOCK < N else N
                n = i1 - i0
                vec_rows = vec and n >= simd_rows
                xt_ready = False
                for r in range(R):
                    W = L.n_words[r]
                    e0 = L.thr_ptr[r]
                    if use_thresholds and L.use_thr[r] and vec_rows:
                        if not xt_ready:
                            transpose_block(&X[0, 0], d, i0, i1, N, xt)
                            xt_ready = True
                        thr_keys_avx512(xt, XT_STRIDE, n, d, L.range_lo + r * d, L.range_hi + r * d,
                                        grid_thresholds(L, r), keys, NULL, inside)
                    elif use_thresholds and L.use_thr[r]:
                        for k in range(n):
                            inside[k] = thr_key_range(&X[i0 + k, 0], d, L.range_lo + r * d,
                                                      L.range_hi + r * d, L.ent_j + e0,
                                                      L.ent_t + e0, L.ent_add + e0,
                                                      L.thr_ptr[r + 1] - e0, keys + k)
                    else:
                        for k in range(n):
                            inside[k] = grid_key(L, r, &X[i0 + k, 0], simd, q, keys + k * W)
                    index = G[r].index if use_index else NULL
                    if index != NULL:
                        for k in range(n):
                            if inside[k]:
                                prefetch(index + keys[k])
                        for k in range(n):
                            stage[r * ROW_BLOCK + k] = -1
                            if inside[k]:
                                stage[r * ROW_BLOCK + k] = <int64_t> index[keys[k]] - 1
                        continue
                    tab = &G[r].tab
                    # the buckets (hashes[k]) and records of the keys, the buckets'
                    # offsets prefetched ...
                    if vec_rows and W == 1:
                        ct_query1_avx512(tab, keys, n, recs, max_words, hashes)
                        for k in range(n):
                            if inside[k]:
                                prefetch(tab.off + hashes[k])
                    else:
                        for k in range(n):
                            if inside[k]:
                                hashes[k] = ct_query(tab, keys + k * W, recs + k * max_words)
                                prefetch(tab.off + hashes[k])
                    # ... the bucket bounds read (stage := start | stop << 32) and
                    # the first entries prefetched ...
                    for k in range(n):
                        stage[r * ROW_BLOCK + k] = -1
                        if inside[k]:
                            p0 = ct_start(tab, hashes[k])
                            p1 = ct_start(tab, hashes[k] + 1)
                            stage[r * ROW_BLOCK + k] = <int64_t> (<uint64_t> p0 | (<uint64_t> p1 << 32))
                            prefetch(tab.ent + <uint64_t> p0 * <uint64_t> tab.E)
                    # ... then the buckets scanned (exact key compare)
                    for k in range(n):
                        if inside[k]:
                            span = <uint64_t> stage[r * ROW_BLOCK + k]
                            stage[r * ROW_BLOCK + k] = ct_scan(tab, recs + k * max_words,
                                                               <uint32_t> (span & LOW32),
                                                               <uint32_t> (span >> 32))
                # row by row: the columns found, in grid order (sorted);
                # branch-free (a miss writes a slot that a later column or
                # the row's end leaves unused)
                for k in range(n):
                    cnt = 0
                    for r in range(R):
                        local = stage[r * ROW_BLOCK + k]
                        out[(i0 + k) * R + cnt] = <idx_t> (G[r].col0 + local)
                        cnt = cnt + (local >= 0)
                    row_nnz[i0 + k] = cnt
        PyMem_RawFree(q)
        PyMem_RawFree(xt)
        PyMem_RawFree(keys)
        PyMem_RawFree(hashes)
        PyMem_RawFree(recs)
        PyMem_RawFree(inside)
        PyMem_RawFree(stage)
    if failed[0]:
        raise MemoryError("cannot allocate thread buffers")


def transform_hashed(const double[:, ::1] X, const double[:, ::1] widths,
                     const double[:, ::1] offsets, uint64_t n_features,
                     idx_t[::1] out, int32_t[::1] mult, int64_t[::1] row_nnz,
                     int n_threads, paths):
    """Hashed-mode columns (docs/design.md contract 5): per row sorted, duplicates merged.

    out : (N * R,) OUT columns of row i left-packed at i * R ...
    mult : (N * R,) OUT how many grids landed in that column.
    row_nnz : (N,) OUT distinct columns of row i.
    paths : ``_plan._Paths`` (its ``simd``).
    Bins must be known to fit in int64 (checked by the caller).
    """
    cdef Py_ssize_t N = X.shape[0], d = X.shape[1], R = widths.shape[0]
    cdef Py_ssize_t i, r, j, cnt
    cdef const double *x
    cdef const double *u
    cdef const double *w
    cdef uint64_t *cols
    cdef uint64_t *tmp
    cdef int64_t *bins
    cdef bint vec = bool(paths.simd) and avx512_available()
    cdef bint simd = vec and normal_widths(widths)
    cdef int32_t[::1] failed = np.zeros(1, dtype=np.int32)
    # the SIMD path hashes eight grids per vector from transposed, padded parameters
    cdef Py_ssize_t R8 = (R + 31) // 32 * 32
    uT_arr = np.zeros((d, R8))
    wT_arr = np.ones((d, R8))
    invT_arr = np.ones((d, R8))
    if simd:
        uT_arr[:, :R] = np.asarray(offsets).T
        wT_arr[:, :R] = np.asarray(widths).T
        invT_arr[:, :R] = 1.0 / np.asarray(widths).T
    cdef double[:, ::1] uT = uT_arr
    cdef double[:, ::1] wT = wT_arr
    cdef double[:, ::1] invT = invT_arr
    cols = NULL
    tmp = NULL
    bins = NULL
    with nogil, parallel(num_threads=max(1, n_threads)):
        cols = <uint64_t *> PyMem_RawMalloc(R8 * sizeof(uint64_t))
        tmp = <uint64_t *> PyMem_RawMalloc(R * sizeof(uint64_t))
        bins = <int64_t *> PyMem_RawMalloc(R * d * sizeof(int64_t))
        if cols == NULL or tmp == NULL or bins == NULL:
            failed[0] = 1
        else:
            for i in prange(N, schedule="static"):
                x = &X[i, 0]
                if simd:
                    # cols[r] = hash(r, bins of grid r) % n_features
                    hash_grids_avx512(x, d, R8, &uT[0, 0], &wT[0, 0], &invT[0, 0], cols)
                    for r in range(R):
                        cols[r] = cols[r] % n_features
                else:
                    for r in range(R):
                        u = &offsets[r, 0]
                        w = &widths[r, 0]
                        # bins[r] = floor((X[i] - offsets[r]) / widths[r])
                        for j in range(d):
                            bins[r * d + j] = floor_to_int64((x[j] - u[j]) / w[j])
                    # cols[r] = hash(r, bins[r]) % n_features
                    hash_grids(bins, R, d, n_features, cols)
                if vec and R <= 128:
                    rank_sort_avx512(cols, R, tmp)
                else:
                    sort_u64(cols, R)
                # unique columns with their multiplicities
                cnt = 0
                for r in range(R):
                    if cnt > 0 and <uint64_t> out[i * R + cnt - 1] == cols[r]:
                        mult[i * R + cnt - 1] += 1
                    else:
                        out[i * R + cnt] = <idx_t> cols[r]
                        mult[i * R + cnt] = 1
                        cnt = cnt + 1
                row_nnz[i] = cnt
        PyMem_RawFree(cols)
        PyMem_RawFree(tmp)
        PyMem_RawFree(bins)
    if failed[0]:
        raise MemoryError("cannot allocate thread buffers")


def compact_rows(const idx_t[::1] src, const int64_t[::1] row_nnz, Py_ssize_t stride,
                 const row_t[::1] indptr, row_t[::1] dst, int n_threads):
    """dst[indptr[i]:indptr[i+1]] = src[i*stride : i*stride + row_nnz[i]]."""
    cdef Py_ssize_t N = row_nnz.shape[0], i, k, base, start
    for i in prange(N, nogil=True, schedule="static", num_threads=max(1, n_threads)):
        base = i * stride
        start = indptr[i]
        for k in range(row_nnz[i]):
            dst[start + k] = <row_t> src[base + k]


def compact_rows_inplace(idx_t[::1] buf, const int64_t[::1] row_nnz, Py_ssize_t stride,
                         const row_t[::1] indptr, int n_threads):
    """In place: buf[indptr[i]:indptr[i+1]] = buf[i*stride : i*stride + row_nnz[i]].

    Parallel over chunks of rows, each compacted to its own start (a forward copy:
    destinations never pass their sources), then the chunks moved down in order
    (each destination ends before the next chunk's source begins).
    """
    cdef Py_ssize_t N = row_nnz.shape[0], c, i, k, pos, s0, s1
    cdef Py_ssize_t n_chunks = max(1, min(4 * max(1, n_threads), N))
    cdef Py_ssize_t itemsize = sizeof(idx_t)
    if N == 0:
        return
    for c in prange(n_chunks, nogil=True, schedule="static", num_threads=max(1, n_threads)):
        s0 = c * N // n_chunks
        s1 = (c + 1) * N // n_chunks
        pos = s0 * stride
        for i in range(s0, s1):
            for k in range(row_nnz[i]):
                buf[pos + k] = buf[i * stride + k]
            pos = pos + row_nnz[i]
    with nogil:
        for c in range(1, n_chunks):
            s0 = c * N // n_chunks
            s1 = (c + 1) * N // n_chunks
            if indptr[s1] > indptr[s0]:
                memmove(&buf[indptr[s0]], &buf[s0 * stride], (indptr[s1] - indptr[s0]) * itemsize)


def compact_mult(const int32_t[::1] mult, const int64_t[::1] row_nnz, Py_ssize_t stride,
                 const int64_t[::1] indptr, double scale_denominator,
                 val_t[::1] data, int n_threads):
    """data[indptr[i] + k] = float64(mult[i*stride + k]) / scale_denominator, cast."""
    cdef Py_ssize_t N = row_nnz.shape[0], i, k, base, start
    for i in prange(N, nogil=True, schedule="static", num_threads=max(1, n_threads)):
        base = i * stride
        start = indptr[i]
        for k in range(row_nnz[i]):
            data[start + k] = <val_t> (<double> mult[base + k] / scale_denominator)


def training_labels(const idx_t[::1] ids, const int64_t[::1] grid_ptr, Py_ssize_t n_rows,
                    int n_threads):
    """Grid-major bins of the training rows from Z's row-major columns.

    ids : (n_rows * R,) global column of (i, r) at i * R + r.
    Returns a list of R arrays (``rbcd.solvers._cd.label_arrays``, the layout the streamed grid
    step reads): entry i of array r is ``ids[i * R + r] - grid_ptr[r]``. Parallel over
    blocks of rows.
    """
    cdef Py_ssize_t R = grid_ptr.shape[0] - 1, r, b, i, i0, i1
    cdef Py_ssize_t n_blocks = (n_rows + LABEL_BLOCK - 1) // LABEL_BLOCK
    if ids.shape[0] != n_rows * R:
        raise ValueError("ids must have length n_rows * R")
    from rbcd.solvers._cd import label_targets  # the layout the CD grid step reads
    cdef uint64_t[::1] ptr
    cdef unsigned char[::1] wide
    targets = label_targets(grid_ptr, n_rows)
    if targets is None:
        return None
    out, ptr, wide = targets
    cdef uint16_t *lab16
    cdef int32_t *lab32
    for b in prange(n_blocks, nogil=True, schedule="static", num_threads=max(1, n_threads)):
        i0 = b * LABEL_BLOCK
        i1 = i0 + LABEL_BLOCK if i0 + LABEL_BLOCK < n_rows else n_rows
        for r in range(R):
            # labels[r][i0:i1] = ids[i0 * R + r :: R] - grid_ptr[r]
            if wide[r]:
                lab32 = <int32_t *> ptr[r]
                for i in range(i0, i1):
                    lab32[i] = <int32_t> (ids[i * R + r] - grid_ptr[r])
            else:
                lab16 = <uint16_t *> ptr[r]
                for i in range(i0, i1):
                    lab16[i] = <uint16_t> (ids[i * R + r] - grid_ptr[r])
    return out


def _label_addresses(labels, grid_ptr, Py_ssize_t n_rows):
    """(addresses, wide flags) of the grid labels (:func:`label_table`, layout only);
    ValueError when they do not have the ``_grid.pxd`` layout for these grids."""
    ptr, wide, bad, problem = label_table(labels, grid_ptr, n_rows, False)
    if problem:
        raise ValueError("label arrays must be uint16 (int32 for a grid of 65536 bins or "
                         "more) arrays of n_rows entries, one per grid")
    return ptr, wide


def label_table(labels, const int64_t[::1] grid_ptr, Py_ssize_t n_rows, bint check_range):
    """The solvers' view of grid labels: ``(ptrs, wide, bad_grid, problem)``.

    ``ptrs`` (uintp) and ``wide`` (uint8, 1 for int32) are what the label kernels read.
    ``problem`` is 0 when the labels have the ``_grid.pxd`` layout for these grids (one
    C-contiguous array of n_rows entries per grid: uint16 below LABEL_NARROW_LIMIT bins,
    else int32) and, with ``check_range``, no label exceeds its grid's bin count (the
    sentinel); 1 for a layout error, 2 for a label out of range, ``bad_grid`` the first
    such grid (-1 for a wrong number of arrays). One C pass, O(N R): per-grid Python took
    about 1 ms per fit at 256 grids, more than a small fit's solve."""
    cdef Py_ssize_t R = grid_ptr.shape[0] - 1, g, i
    cdef int64_t nb, bad = -1
    cdef uint16_t *l16
    cdef int32_t *l32
    ptr_arr = np.zeros(max(R, 1), dtype=np.uintp)
    wide_arr = np.zeros(max(R, 1), dtype=np.uint8)
    if len(labels) != R:
        return ptr_arr, wide_arr, -1, 1
    cdef uintptr_t[::1] ptr = ptr_arr
    cdef unsigned char[::1] wide = wide_arr
    for g in range(R):
        a = labels[g]
        if label_is_wide(grid_ptr[g + 1] - grid_ptr[g]):
            if not _is_vector(a, _I32, n_rows):
                return ptr_arr, wide_arr, g, 1
            wide[g] = 1
        elif not _is_vector(a, _U16, n_rows):
            return ptr_arr, wide_arr, g, 1
        ptr[g] = <uintptr_t> cnp.PyArray_DATA(<cnp.ndarray> a)
    if not check_range:
        return ptr_arr, wide_arr, -1, 0
    with nogil:
        for g in range(R):
            nb = grid_ptr[g + 1] - grid_ptr[g]
            if wide[g]:
                l32 = <int32_t *> ptr[g]
                for i in range(n_rows):
                    if l32[i] < 0 or l32[i] > nb:
                        bad = g
                        break
            else:
                l16 = <uint16_t *> ptr[g]
                for i in range(n_rows):
                    if l16[i] > nb:
                        bad = g
                        break
            if bad >= 0:
                break
    return ptr_arr, wide_arr, bad, (2 if bad >= 0 else 0)


def csc_from_labels(labels, const int64_t[::1] col_ptr, const int64_t[::1] grid_ptr,
                    Py_ssize_t n_rows, row_t[::1] rows, int n_threads):
    """Row indices of the columns of training Z from its grid-major labels
    (``training_labels``): rows[col_ptr[j]:col_ptr[j + 1]] lists, increasing, the
    rows in column j. Parallel over grids; a grid's bins are filled from one
    sequential read of its labels (its cursors stay in cache)."""
    cdef Py_ssize_t R = grid_ptr.shape[0] - 1, g, i, nb, k
    cdef int64_t *cur
    cdef uint16_t *lab16
    cdef int32_t *lab32
    cdef int32_t[::1] failed = np.zeros(1, dtype=np.int32)
    ptr_arr, wide_arr = _label_addresses(labels, grid_ptr, n_rows)
    cdef uintptr_t[::1] ptr = ptr_arr
    cdef unsigned char[::1] wide = wide_arr
    for g in prange(R, nogil=True, schedule="dynamic", num_threads=max(1, min(n_threads, R))):
        nb = grid_ptr[g + 1] - grid_ptr[g]
        cur = <int64_t *> malloc((nb + 1) * sizeof(int64_t))
        if cur == NULL:
            failed[0] = 1
        else:
            for k in range(nb):
                cur[k] = col_ptr[grid_ptr[g] + k]
            # for each row: rows[cur[label]++] = i
            if wide[g]:
                lab32 = <int32_t *> ptr[g]
                for i in range(n_rows):
                    rows[cur[lab32[i]]] = <row_t> i
                    cur[lab32[i]] += 1
            else:
                lab16 = <uint16_t *> ptr[g]
                for i in range(n_rows):
                    rows[cur[lab16[i]]] = <row_t> i
                    cur[lab16[i]] += 1
            free(cur)
    if failed[0]:
        raise MemoryError("cannot allocate the column cursors")


def csc_fill_training(const idx_t[::1] ids, int64_t[::1] next_pos, Py_ssize_t R,
                      const int64_t[::1] grid_ptr, row_t[::1] rows, int n_threads):
    """Row indices of the columns of training Z (exactly one entry per row and grid).

    ids : (N * R,) global column of (i, r) at i * R + r.
    next_pos : (D,) IN/OUT, starts as the column pointer; advanced as filled.
    rows : (N * R,) OUT, the CSC row indices (increasing within a column).
    Parallel over blocks of grids (a grid's columns are one thread's).
    """
    cdef Py_ssize_t N = ids.shape[0] // R if R > 0 else 0
    cdef Py_ssize_t n_chunks = min(max(1, n_threads), R), c
    for c in prange(n_chunks, nogil=True, schedule="static", chunksize=1,
                    num_threads=n_chunks):
        _csc_fill_block(&ids[0], &next_pos[0], N, R, c * R // n_chunks,
                        (c + 1) * R // n_chunks, &rows[0])


cdef void _csc_fill_block(const idx_t *ids, int64_t *next_pos, Py_ssize_t N,
                          Py_ssize_t R, Py_ssize_t g0, Py_ssize_t g1,
                          row_t *rows) noexcept nogil:
    cdef Py_ssize_t i0, i1, i, r
    cdef int64_t col
    i0 = 0
    while i0 < N:
        i1 = i0 + ROW_BLOCK if i0 + ROW_BLOCK < N else N
        for r in range(g0, g1):
            # for i in block: rows[next_pos[ids[i, r]]++] = i
            for i in range(i0, i1):
                col = ids[i * R + r]
                rows[next_pos[col]] = <row_t> i
                next_pos[col] += 1
        i0 = i1


def structure_mismatch(const int64_t[::1] z_indptr, const idx_t[::1] z_indices,
                       const int64_t[::1] col_ptr, const row_t[::1] rows):
    """Whether a CSR matrix and a CSC structure hold exactly the same entries (positions).

    z_indptr, z_indices : the CSR rows, column ids increasing within each row.
    col_ptr, rows : the CSC columns, row ids of each column (increasing within a column).
    Returns ``(-1, -1)`` when they agree, else ``(row, column)`` of an entry that one holds
    and the other does not. O(nnz + N + D) time, N cursors of scratch: the columns are
    walked in increasing order, and each row's next CSR entry must be the column met.
    """
    cdef Py_ssize_t N = z_indptr.shape[0] - 1, D = col_ptr.shape[0] - 1, j, i
    cdef int64_t p, c, bad_row = -1, bad_col = -1
    if N < 0 or D < 0:
        raise ValueError("indptr arrays must not be empty")
    if z_indptr[N] > z_indices.shape[0] or col_ptr[D] > rows.shape[0]:
        raise ValueError("indptr arrays point past their indices")
    cdef int64_t *cur = <int64_t *> PyMem_RawMalloc(max(N, 1) * sizeof(int64_t))
    if cur == NULL:
        raise MemoryError("cannot allocate the row cursors")
    with nogil:
        for i in range(N):
            cur[i] = z_indptr[i]
        for j in range(D):
            for p in range(col_ptr[j], col_ptr[j + 1]):
                i = rows[p]
                if i < 0 or i >= N:
                    bad_row = i
                    bad_col = j
                    break
                c = cur[i]
                if c >= z_indptr[i + 1] or z_indices[c] != j:
                    bad_row = i
                    bad_col = j
                    break
                cur[i] = c + 1
            if bad_row != -1 or bad_col != -1:
                break
        if bad_col == -1:
            for i in range(N):
                if cur[i] != z_indptr[i + 1]:  # the CSR row has an entry left over
                    bad_row = i
                    bad_col = z_indices[cur[i]]
                    break
    PyMem_RawFree(cur)
    return int(bad_row), int(bad_col)


def labels_mismatch(labels, const int64_t[::1] col_ptr, const row_t[::1] rows,
                    const int64_t[::1] grid_ptr, Py_ssize_t n_rows):
    """Whether grid labels (``_grid.pxd`` layout, checked by the caller: R arrays of
    n_rows uint16 / int32) describe the CSC structure: label[i] of grid r is j - grid_ptr[r]
    for the column j of grid r holding row i, the grid's bin count where none does.

    Returns ``(-1, -1, -1)`` when they agree, else ``(grid, row, label)`` of a label that
    does not (for a label past the sentinel, or a row labelled with a bin whose column does
    not hold it, ``row`` is the first such row). O(N R + nnz).
    """
    cdef Py_ssize_t R = grid_ptr.shape[0] - 1, g, i
    cdef int64_t j, p, nb, lab, n_set, lo_, hi_, mid, bad_g = -1, bad_i = -1, bad_l = -1
    cdef uint16_t *l16
    cdef int32_t *l32
    cdef bint w
    ptr_arr, wide_arr = _label_addresses(labels, grid_ptr, n_rows)
    cdef uintptr_t[::1] ptr = ptr_arr
    cdef unsigned char[::1] wide = wide_arr
    with nogil:
        for g in range(R):
            nb = grid_ptr[g + 1] - grid_ptr[g]
            w = wide[g]
            l16 = <uint16_t *> ptr[g]
            l32 = <int32_t *> ptr[g]
            # every entry of the grid's columns is labelled with its bin
            for j in range(grid_ptr[g], grid_ptr[g + 1]):
                for p in range(col_ptr[j], col_ptr[j + 1]):
                    i = rows[p]
                    lab = l32[i] if w else l16[i]
                    if lab != j - grid_ptr[g]:
                        bad_g = g
                        bad_i = i
                        bad_l = lab
                        break
                if bad_g >= 0:
                    break
            if bad_g >= 0:
                break
            # and no other row is: as many labels below the sentinel as entries
            n_set = 0
            for i in range(n_rows):
                lab = l32[i] if w else l16[i]
                if lab < 0 or lab > nb:
                    bad_g = g
                    bad_i = i
                    bad_l = lab
                    break
                n_set += lab < nb
            if bad_g >= 0:
                break
            if n_set != col_ptr[grid_ptr[g + 1]] - col_ptr[grid_ptr[g]]:
                bad_g = g
                for i in range(n_rows):  # the first row labelled where its column is not
                    lab = l32[i] if w else l16[i]
                    if lab < nb:
                        j = grid_ptr[g] + lab
                        lo_ = col_ptr[j]  # binary search of i in the column's rows
                        hi_ = col_ptr[j + 1]
                        while lo_ < hi_:
                            mid = (lo_ + hi_) // 2
                            if rows[mid] < i:
                                lo_ = mid + 1
                            else:
                                hi_ = mid
                        if lo_ == col_ptr[j + 1] or rows[lo_] != i:
                            bad_i = i
                            bad_l = lab
                            break
                break
    return int(bad_g), int(bad_i), int(bad_l)


def check_grid_rows(const idx_t[::1] indptr, const idx_t[::1] indices,
                    const int64_t[::1] grid_ptr, int n_threads):
    """First row with two entries in one grid, as (row, grid); (-1, -1) if none.

    Row entries must be sorted by column (so a repeated grid is adjacent).
    """
    cdef Py_ssize_t N = indptr.shape[0] - 1, R = grid_ptr.shape[0] - 1
    cdef Py_ssize_t n_chunks = min(max(1, n_threads) * 4, N) if N > 0 else 1
    cdef int64_t[::1] bad_row = np.full(n_chunks, -1, dtype=np.int64)
    cdef int64_t[::1] bad_grid = np.full(n_chunks, -1, dtype=np.int64)
    cdef Py_ssize_t c, i, k, lo_, hi_, mid, g, prev
    cdef int64_t col
    for c in prange(n_chunks, nogil=True, schedule="static", num_threads=max(1, n_threads)):
        for i in range(c * N // n_chunks, (c + 1) * N // n_chunks):
            prev = -1
            for k in range(indptr[i], indptr[i + 1]):
                col = indices[k]
                # g = searchsorted(grid_ptr, col, side="right") - 1
                lo_ = 0
                hi_ = R + 1
                while hi_ - lo_ > 1:
                    mid = (lo_ + hi_) // 2
                    if grid_ptr[mid] <= col:
                        lo_ = mid
                    else:
                        hi_ = mid
                g = lo_
                if g == prev:
                    bad_row[c] = i
                    bad_grid[c] = g
                    break
                prev = g
            if bad_row[c] >= 0:
                break
    for c in range(n_chunks):
        if bad_row[c] >= 0:
            return int(bad_row[c]), int(bad_grid[c])
    return -1, -1


def csc_fill_general(const idx_t[::1] indptr, const idx_t[::1] indices,
                     int64_t[::1] next_pos, const int64_t[::1] grid_ptr,
                     row_t[::1] rows, int n_threads):
    """Row indices of the columns of any CSR matrix, rows increasing per column.

    Parallel over blocks of grids: thread c fills the columns of its grids,
    scanning every row in order.
    """
    cdef Py_ssize_t N = indptr.shape[0] - 1, R = grid_ptr.shape[0] - 1
    cdef Py_ssize_t n_chunks = min(max(1, n_threads), max(R, 1)), c, i, k
    cdef int64_t col, col_lo, col_hi
    for c in prange(n_chunks, nogil=True, schedule="static", chunksize=1,
                    num_threads=n_chunks):
        col_lo = grid_ptr[c * R // n_chunks]
        col_hi = grid_ptr[(c + 1) * R // n_chunks]
        for i in range(N):
            # rows[next_pos[col]++] = i for the row's columns in [col_lo, col_hi)
            for k in range(indptr[i], indptr[i + 1]):
                col = indices[k]
                if col >= col_lo and col < col_hi:
                    rows[next_pos[col]] = <row_t> i
                    next_pos[col] += 1


# ----------------------------------------------------------------------------
# The fitted grids
# ----------------------------------------------------------------------------

cdef object _array(value, dtype, shape, name):
    """``value`` as a C-contiguous array of exactly this dtype and shape, or ValueError."""
    if not isinstance(value, np.ndarray) or value.dtype != np.dtype(dtype):
        got = value.dtype if isinstance(value, np.ndarray) else type(value).__name__
        raise ValueError(f"grid tables: {name} must be a {np.dtype(dtype).name} array, got {got}")
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"grid tables: {name} must have shape {tuple(shape)}, got {value.shape}")
    return np.ascontiguousarray(value)


cdef int _U8 = cnp.NPY_UINT8
cdef int _U32 = cnp.NPY_UINT32
cdef int _U16 = cnp.NPY_UINT16
cdef int _I32 = cnp.NPY_INT32


cdef inline bint _is_vector(object a, int typenum, Py_ssize_t n):
    """Whether ``a`` is a C-contiguous 1-D array of n items of the native dtype of
    ``typenum`` (what :func:`_array` would return unchanged; cheap, for per-grid use)."""
    cdef cnp.ndarray v
    if not cnp.PyArray_Check(a):
        return False
    v = <cnp.ndarray> a
    return (cnp.PyArray_TYPE(v) == typenum and cnp.PyArray_NDIM(v) == 1
            and cnp.PyArray_DIM(v, 0) == n and cnp.PyArray_IS_C_CONTIGUOUS(v)
            and cnp.PyArray_ISNOTSWAPPED(v))


cdef class GridTables:
    """The fitted grids of an exact-mode RandomBinning: one typed owner for the
    layout (widths, offsets, training bin bounds, packed-key layout, thresholds)
    and one table per grid (docs/design.md contract 4).

    Built in two steps by ``random_binning``: the layout (``__init__``), then, after
    ``fit_tables``, the tables (``set_tables``). The C view (``Layout`` and one
    ``GridTable`` per grid) points into the arrays this object holds, so it lives
    exactly as long as they do.

    Pickles as its primary arrays (``state``: widths, offsets, the training column
    extremes, grid_ptr and each grid's keys in id order); everything else is derived again
    on load by ``_plan._restore_grid_tables``, which checks every field:
    a damaged or foreign state raises ValueError.
    """
    cdef Layout L
    cdef GridTable *grids
    cdef readonly bint fitted
    cdef readonly object widths, offsets, cmin, cmax, lo, hi, inv
    cdef readonly object word, shift, n_words, top_bits, word_bits
    cdef readonly object thr_ptr, use_thr, ent_j, ent_t, ent_add, range_lo, range_hi
    cdef readonly object grid_ptr, dirs, offs, ents, index
    cdef readonly object safe_lo, safe_hi

    def __cinit__(self):
        self.grids = NULL
        self.fitted = False

    def __dealloc__(self):
        PyMem_RawFree(self.grids)

    def __init__(self, widths, offsets, cmin, cmax, lo, hi, thresholds):
        """Layout of R grids over d columns. ``thresholds`` is
        ``(thr_ptr, use_thr, ent_j, ent_t, ent_add, range_lo, range_hi)`` as built by
        ``_plan._thresholds`` and ``_range_bounds``."""
        cdef Py_ssize_t R, d, r, e, n_ent
        if not isinstance(widths, np.ndarray) or widths.ndim != 2 or widths.shape[0] < 1:
            raise ValueError("grid tables: widths must be a 2-D array with at least one grid")
        R, d = widths.shape
        self.widths = _array(widths, np.float64, (R, d), "widths")
        self.offsets = _array(offsets, np.float64, (R, d), "offsets")
        self.cmin = _array(cmin, np.float64, (d,), "cmin")
        self.cmax = _array(cmax, np.float64, (d,), "cmax")
        self.lo = _array(lo, np.int64, (R, d), "lo")
        self.hi = _array(hi, np.int64, (R, d), "hi")
        if not np.all(self.lo <= self.hi):
            raise ValueError("grid tables: lo must not exceed hi")
        if not (np.all(np.isfinite(self.widths)) and np.all(self.widths > 0)):
            raise ValueError("grid tables: widths must be finite and positive")
        # per column, values in [safe_lo, safe_hi] bin within int64 in every grid: their
        # quotients (x - u) / w stay within about 2**62 in magnitude (u within a width of
        # 0, every rounding relative 2**-53), and x - u does not overflow (|x| at most
        # half of what the largest |u| of the column leaves below the largest double), so
        # transform's check of every grid's bins (_input._bin_range, O(R d)) is needed only
        # for data outside (O(d) to test)
        with np.errstate(over="ignore"):
            reach = self.widths * 2.0 ** 62
            room = 0.5 * (np.finfo(np.float64).max - np.max(np.abs(self.offsets), axis=0))
            self.safe_lo = np.maximum(np.max(self.offsets - reach, axis=0), -room)
            self.safe_hi = np.minimum(np.min(self.offsets + reach, axis=0), room)
        (self.word, self.shift, self.n_words, self.top_bits,
         self.word_bits) = pack_layout(self.lo, self.hi)
        # a subnormal width's reciprocal overflows to inf: the products a * inf are inf or
        # nan, never within the checked range, so those lanes take the true division
        # (binning_keys.h, rbcd_floor8_of); no warning for the user's tiny-valued data
        with np.errstate(over="ignore"):
            self.inv = np.ascontiguousarray(1.0 / self.widths)
        if len(thresholds) != 7:
            raise ValueError("grid tables: thresholds must have 7 parts")
        thr_ptr, use_thr, ent_j, ent_t, ent_add, range_lo, range_hi = thresholds
        self.thr_ptr = _array(thr_ptr, np.int64, (R + 1,), "thr_ptr")
        self.use_thr = _array(use_thr, np.uint8, (R,), "use_thr")
        n_ent = int(self.thr_ptr[R])
        if self.thr_ptr[0] != 0 or np.any(np.diff(self.thr_ptr) < 0):
            raise ValueError("grid tables: thr_ptr must be non-decreasing from 0")
        self.ent_j = _array(ent_j, np.int32, (n_ent,), "ent_j")
        self.ent_t = _array(ent_t, np.float64, (n_ent,), "ent_t")
        self.ent_add = _array(ent_add, np.uint64, (n_ent,), "ent_add")
        self.range_lo = _array(range_lo, np.float64, (R, d), "range_lo")
        self.range_hi = _array(range_hi, np.float64, (R, d), "range_hi")
        if n_ent and (self.ent_j.min() < 0 or self.ent_j.max() >= d):
            raise ValueError("grid tables: threshold columns must lie in [0, d)")
        if np.any((self.use_thr != 0) & (self.n_words != 1)):
            raise ValueError("grid tables: threshold keys need single-word grids")
        # sorted by column within a grid (the vector path walks columns in order): a
        # decrease only where a grid's entries start
        falls = np.flatnonzero(np.diff(self.ent_j) < 0) + 1
        if falls.shape[0] and not np.all(np.isin(falls, self.thr_ptr)):
            raise ValueError("grid tables: thresholds must be sorted by column")
        self._fill_layout()

    cdef void _fill_layout(self):
        cdef const double[:, ::1] w = self.widths
        cdef const double[:, ::1] u = self.offsets
        cdef const double[:, ::1] inv = self.inv
        cdef const int64_t[:, ::1] lo = self.lo
        cdef const int64_t[:, ::1] hi = self.hi
        cdef const int32_t[:, ::1] word = self.word
        cdef const int64_t[:, ::1] shift = self.shift
        cdef const int32_t[::1] n_words = self.n_words
        cdef const int32_t[::1] top_bits = self.top_bits
        cdef const int32_t[:, ::1] word_bits = self.word_bits
        cdef const int64_t[::1] thr_ptr = self.thr_ptr
        cdef const unsigned char[::1] use_thr = self.use_thr
        cdef const int32_t[::1] ent_j = self.ent_j
        cdef const double[::1] ent_t = self.ent_t
        cdef const uint64_t[::1] ent_add = self.ent_add
        cdef const double[:, ::1] rlo = self.range_lo
        cdef const double[:, ::1] rhi = self.range_hi
        cdef Py_ssize_t r
        self.L.R = w.shape[0]
        self.L.d = w.shape[1]
        self.L.widths = &w[0, 0]
        self.L.offsets = &u[0, 0]
        self.L.inv = &inv[0, 0]
        self.L.lo = &lo[0, 0]
        self.L.hi = &hi[0, 0]
        self.L.word = &word[0, 0]
        self.L.shift = &shift[0, 0]
        self.L.n_words = &n_words[0]
        self.L.top_bits = &top_bits[0]
        self.L.word_bits = &word_bits[0, 0]
        self.L.thr_ptr = &thr_ptr[0]
        self.L.use_thr = &use_thr[0]
        self.L.ent_j = &ent_j[0] if ent_j.shape[0] else NULL
        self.L.ent_t = &ent_t[0] if ent_t.shape[0] else NULL
        self.L.ent_add = &ent_add[0] if ent_add.shape[0] else NULL
        self.L.range_lo = &rlo[0, 0]
        self.L.range_hi = &rhi[0, 0]
        self.L.max_words = 1
        for r in range(self.L.R):
            if n_words[r] > self.L.max_words:
                self.L.max_words = n_words[r]
        self.L.normal_widths = normal_widths(self.widths)

    def set_tables(self, grid_ptr, dirs, offs, ents, bint check):
        """The fitted tables: ``grid_ptr`` (R + 1,) int64 column boundaries and per
        grid the bucketed table of binning_table.h: ``offs[r]`` uint8 (2**bbits + 2,),
        the buckets' offsets then dshift, ``dirs[r]`` uint32 (2**(bbits - dshift) + 1,)
        and ``ents[r]`` uint8 (n_bins * E + RBCD_CT_PAD,), the records. Dense indexes:
        ``build_index``.

        Shapes and dtypes are always checked; with ``check`` also the bucket starts'
        contract (from 0 to n_bins, non-decreasing: every lookup ends within the
        records) and every record's id within the grid's bins."""
        cdef Py_ssize_t R = self.L.R, r
        cdef GridTable *G
        cdef int64_t nb, nbins_r
        cdef const int64_t[::1] nbv
        cdef const int64_t[::1] gpv
        gp = _array(grid_ptr, np.int64, (R + 1,), "grid_ptr")
        gpv = gp
        if gp[0] != 0 or np.any(np.diff(gp) < 0):
            raise ValueError("grid tables: grid_ptr must be non-decreasing from 0")
        if not (isinstance(dirs, list) and isinstance(offs, list) and isinstance(ents, list)
                and len(dirs) == R and len(offs) == R and len(ents) == R):
            raise ValueError(f"grid tables: dirs, offs and ents must be lists of {R} arrays")
        n_bins = np.diff(gp)
        if np.any(n_bins >= <int64_t> LOW32):
            raise ValueError("grid tables: a grid has too many bins")
        nbv = n_bins
        G = <GridTable *> PyMem_RawCalloc(max(R, 1), sizeof(GridTable))
        if G == NULL:
            raise MemoryError("cannot allocate the grid tables")
        try:
            dirs, offs, ents = list(dirs), list(offs), list(ents)
            for r in range(R):
                nbins_r = nbv[r]
                ct_geometry(&G[r].tab, nbins_r, self.L.n_words[r],
                            self.L.word_bits + r * self.L.max_words)
                nb = (<int64_t> 1) << G[r].tab.bbits
                if not _is_vector(offs[r], _U8, nb + 2):
                    offs[r] = _array(offs[r], np.uint8, (nb + 2,), f"offs[{r}]")
                G[r].tab.off = <const unsigned char *> cnp.PyArray_DATA(<cnp.ndarray> offs[r])
                G[r].tab.dshift = G[r].tab.off[nb + 1]
                if G[r].tab.dshift > min(CT_DSHIFT, G[r].tab.bbits):
                    raise ValueError(f"grid tables: offs[{r}] ends with a bad dshift")
                if not _is_vector(dirs[r], _U32, (nb >> G[r].tab.dshift) + 1):
                    dirs[r] = _array(dirs[r], np.uint32, ((nb >> G[r].tab.dshift) + 1,),
                                     f"dirs[{r}]")
                if not _is_vector(ents[r], _U8, nbins_r * G[r].tab.E + CT_PAD):
                    ents[r] = _array(ents[r], np.uint8, (nbins_r * G[r].tab.E + CT_PAD,),
                                     f"ents[{r}]")
                G[r].tab.dir = <const uint32_t *> cnp.PyArray_DATA(<cnp.ndarray> dirs[r])
                G[r].tab.ent = <const unsigned char *> cnp.PyArray_DATA(<cnp.ndarray> ents[r])
                G[r].n_bins = nbins_r
                G[r].col0 = gpv[r]
                G[r].index = NULL
                if check:
                    starts = (dirs[r][np.arange(nb + 1) >> G[r].tab.dshift].astype(np.int64)
                              + offs[r][:nb + 1])
                    if starts[0] != 0 or starts[nb] != n_bins[r] or np.any(np.diff(starts) < 0):
                        raise ValueError(f"grid tables: dirs[{r}] and offs[{r}] must rise from 0 "
                                         "to the grid's bins")
                    if not ct_ids_ok(&G[r].tab):
                        raise ValueError(f"grid tables: ents[{r}] holds ids beyond the grid's bins")
        except BaseException:
            PyMem_RawFree(G)
            raise
        PyMem_RawFree(self.grids)
        self.grids = G
        self.grid_ptr, self.dirs, self.offs, self.ents = gp, dirs, offs, ents
        self.index = [None] * R
        self.fitted = True

    def build_index(self, const int64_t[::1] bits, int n_threads=1):
        """Build and set the dense transform indexes of the grids with ``bits[r] >= 0``
        (their single-word keys have at most ``bits[r]`` bits; -1: none) in one pass:
        one zeroed uint32 buffer, grid r's index a view of 2**bits[r] entries of it, entry
        = local id + 1 of that key or 0 (built here from the fitted tables themselves, so
        nothing needs checking; no Python objects per grid but the views). The grids are
        filled in parallel, each by one thread (each its own slice of the buffer, first
        touched by that thread); the result does not depend on n_threads."""
        cdef Py_ssize_t R = self.L.R, r
        cdef int64_t total = 0, n_keys = 0, k
        if not self.fitted:
            raise ValueError("the grid tables are not fitted")
        if bits.shape[0] != R:
            raise ValueError(f"bits must have length {R}")
        off_np = np.zeros(R + 1, dtype=np.int64)      # grid r's slice of the buffer
        koff_np = np.zeros(R + 1, dtype=np.int64)     # and of the keys' scratch
        cdef int64_t[::1] off = off_np, koff = koff_np
        for r in range(R):
            off[r + 1] = off[r]
            koff[r + 1] = koff[r]
            if bits[r] < 0:
                continue
            if self.L.n_words[r] != 1 or bits[r] > 30:
                raise ValueError("dense indexes need single-word grids of at most 30 bits")
            if self.grids[r].n_bins > (<int64_t> 1) << bits[r]:
                raise ValueError(f"grid {r} has more bins than 2**{bits[r]} keys")
            off[r + 1] += (<int64_t> 1) << bits[r]
            koff[r + 1] += self.grids[r].n_bins
        total = off[R]
        n_keys = koff[R]
        buf = np.zeros(max(total, 1), dtype=np.uint32)
        keys = empty(max(n_keys, 1), np.uint64)
        bad_np = np.zeros(max(R, 1), dtype=np.uint8)
        cdef uint32_t[::1] bv = buf
        cdef uint64_t[::1] kv = keys
        cdef unsigned char[::1] bad = bad_np
        cdef uint64_t key
        with nogil:
            for r in prange(R, schedule="dynamic", num_threads=max(1, n_threads)):
                if bits[r] < 0:
                    continue
                ct_keys(&self.grids[r].tab, &kv[koff[r]])
                for k in range(self.grids[r].n_bins):
                    key = kv[koff[r] + k]
                    if key >> bits[r]:
                        bad[r] = 1
                        break
                    bv[off[r] + <Py_ssize_t> key] = <uint32_t> (k + 1)
        for r in range(R):
            if bad[r]:
                raise ValueError(f"grid {r}: a key beyond 2**{bits[r]}")
        index = [None] * R
        for r in range(R):
            if bits[r] >= 0:
                index[r] = buf[off[r]:off[r + 1]]
        for r in range(R):
            self.grids[r].index = NULL
            if index[r] is not None:
                self.grids[r].index = <const uint32_t *> cnp.PyArray_DATA(<cnp.ndarray> index[r])
        self.index = index

    def keys_by_id(self, Py_ssize_t r):
        """Grid r's packed keys in local id order, a uint64 (n_bins * n_words,) array."""
        if not self.fitted:
            raise ValueError("the grid tables are not fitted")
        if not 0 <= r < self.L.R:
            raise IndexError(r)
        out = np.empty(self.grids[r].n_bins * self.L.n_words[r], dtype=np.uint64)
        cdef uint64_t[::1] ov = out
        if ov.shape[0]:
            with nogil:
                ct_keys(&self.grids[r].tab, &ov[0])
        return out

    @property
    def n_grids(self):
        return self.L.R

    @property
    def n_features_in(self):
        return self.L.d

    def state(self):
        """The primary arrays (everything else derives from them), as pickled:
        version 2 keeps each grid's keys in local id order (the bucketed tables and
        dense indexes are rebuilt from them on load)."""
        if not self.fitted:
            raise ValueError("the grid tables are not fitted")
        return {"version": 2, "widths": self.widths, "offsets": self.offsets,
                "cmin": self.cmin, "cmax": self.cmax, "grid_ptr": self.grid_ptr,
                "keys": [self.keys_by_id(r) for r in range(self.L.R)]}

    def nbytes(self):
        """Bytes of every array this object holds."""
        total = 0
        for a in (self.widths, self.offsets, self.cmin, self.cmax, self.lo, self.hi, self.inv,
                  self.word, self.shift, self.n_words, self.top_bits, self.word_bits, self.thr_ptr, self.use_thr,
                  self.ent_j, self.ent_t, self.ent_add, self.range_lo, self.range_hi,
                  self.grid_ptr):
            if a is not None:
                total += a.nbytes
        for group in (self.dirs, self.offs, self.ents, self.index):
            for a in group or ():
                if a is not None:
                    total += a.nbytes
        return total

    def __reduce__(self):
        from ._plan import _restore_grid_tables
        return (_restore_grid_tables, (self.state(),))


def tables_from_keys(GridTables gt, grid_ptr, keys):
    """Set ``gt``'s tables from each grid's packed keys in local id order (a loaded
    state), every key checked first: ValueError unless each key's fields lie within
    the training bins of its columns (no stray bits) and no key repeats."""
    cdef Py_ssize_t R = gt.L.R, r
    cdef int64_t n
    cdef int W
    cdef CtArrays ct
    cdef const uint64_t[::1] kv
    gp = _array(grid_ptr, np.int64, (R + 1,), "grid_ptr")
    if gp[0] != 0 or np.any(np.diff(gp) < 0):
        raise ValueError("grid tables: grid_ptr must be non-decreasing from 0")
    if not (isinstance(keys, list) and len(keys) == R):
        raise ValueError(f"grid tables: keys must be a list of {R} arrays")
    n_bins = np.diff(gp)
    if np.any(n_bins >= <int64_t> LOW32):
        raise ValueError("grid tables: a grid has too many bins")
    dirs, offs, ents = [], [], []
    for r in range(R):
        W = gt.L.n_words[r]
        n = n_bins[r]
        k = _array(keys[r], np.uint64, (int(n) * W,), f"keys[{r}]")
        _check_keys(gt, r, k, n)
        kv = k
        if ct_build(&kv[0] if n else NULL, n, W, gt.L.word_bits + r * gt.L.max_words, &ct) != 0:
            raise MemoryError("cannot allocate the grid tables")
        dirs.append(_adopt(ct.dir, ct.n_dir, np.uint32))
        offs.append(_adopt(ct.off, ct.n_off, np.uint8))
        ents.append(_adopt(ct.ent, ct.n_ent, np.uint8))
    gt.set_tables(gp, dirs, offs, ents, True)
    # no key repeats: every key is found under its own id (a repeated key would be
    # found under the first of its ids)
    for r in range(R):
        if not _keys_found(gt, r, keys[r]):
            raise ValueError(f"grid tables: keys[{r}] repeats a key")


cdef bint _keys_found(GridTables gt, Py_ssize_t r, keys_arr):
    cdef const uint64_t[::1] keys = keys_arr
    cdef const CTable *t = &gt.grids[r].tab
    cdef int W = t.W
    cdef int64_t local
    rec_arr = np.zeros(W + 1, dtype=np.uint64)
    cdef uint64_t[::1] rec = rec_arr
    for local in range(t.n):
        if ct_find(t, &keys[local * W], &rec[0]) != local:
            return False
    return True


cdef _check_keys(GridTables gt, Py_ssize_t r, keys_arr, int64_t n_bins):
    """ValueError unless every key of grid r has its fields within the training bins
    of their columns and no bit outside them."""
    cdef const uint64_t[::1] keys = keys_arr
    cdef const Layout *L = &gt.L
    cdef Py_ssize_t d = L.d, j
    cdef int W = L.n_words[r]
    cdef int64_t local
    cdef uint64_t span, field
    cdef Py_ssize_t jj, n_fields
    cdef const uint64_t *key
    # the key's words rebuilt from its fields (W words: any number of them), and the
    # columns that have a field (span > 0: at most 64 W of them, so the check is
    # O(n_bins W) per grid, not O(n_bins d) for a wide X with few varying columns)
    rebuilt_arr = np.zeros(max(W, 1), dtype=np.uint64)
    cdef uint64_t[::1] rebuilt = rebuilt_arr
    fields_arr = np.flatnonzero(np.asarray(gt.hi)[r] != np.asarray(gt.lo)[r]).astype(np.intp)
    cdef const Py_ssize_t[::1] fields = fields_arr
    n_fields = fields.shape[0]
    for local in range(n_bins):
        key = &keys[local * W]
        # every field within the training bins of its column, no stray bits
        for j in range(W):
            rebuilt[j] = 0
        for jj in range(n_fields):
            j = fields[jj]
            span = <uint64_t> L.hi[r * d + j] - <uint64_t> L.lo[r * d + j]
            field = key[L.word[r * d + j]] >> L.shift[r * d + j]
            if L.shift[r * d + j] + _bit_length(span) < 64:
                field &= ((<uint64_t> 1) << _bit_length(span)) - 1
            if field > span:
                raise ValueError(f"grid tables: keys[{r}] has a bin outside the training bins")
            rebuilt[L.word[r * d + j]] |= field << L.shift[r * d + j]
        for j in range(W):
            if rebuilt[j] != key[j]:
                raise ValueError(f"grid tables: keys[{r}] has bits outside its fields")


def check_v1_slots(GridTables gt, grid_ptr, slots, keys):
    """ValueError unless a version-1 state's slot tables (the hashed layout of
    earlier releases: capacity a power of two, load <= 0.7, slot = hash tag << 32
    | (local id + 1)) are ones fit could have built for these keys: each id in
    exactly one slot and each key found by its own probe sequence. (The keys
    themselves are checked by tables_from_keys.)"""
    cdef Py_ssize_t R = gt.L.R, r
    gp = _array(grid_ptr, np.int64, (R + 1,), "grid_ptr")
    if not (isinstance(slots, list) and isinstance(keys, list)
            and len(slots) == R and len(keys) == R):
        raise ValueError(f"grid tables: slots and keys must be lists of {R} arrays")
    n_bins = np.diff(gp)
    for r in range(R):
        s = _array(slots[r], np.uint64, (slots[r].shape[0] if isinstance(slots[r], np.ndarray)
                                         and slots[r].ndim == 1 else -1,), f"slots[{r}]")
        k = _array(keys[r], np.uint64, (int(n_bins[r]) * int(gt.n_words[r]),), f"keys[{r}]")
        _check_keys(gt, r, k, int(n_bins[r]))
        _check_v1_table(gt, r, s, k, int(n_bins[r]))


cdef _check_v1_table(GridTables gt, Py_ssize_t r, slots_arr, keys_arr, int64_t n_bins):
    """ValueError unless grid r's version-1 slot table is one fit could have built."""
    cdef const uint64_t[::1] slots = slots_arr
    cdef const uint64_t[::1] keys = keys_arr
    cdef int W = gt.L.n_words[r]
    cdef int64_t cap = slots.shape[0], k, n_full = 0, local
    cdef uint64_t s, h
    cdef const uint64_t *key
    if cap < 1 or (cap & (cap - 1)) != 0:
        raise ValueError(f"grid tables: slots[{r}] length {cap} is not a power of two")
    if 10 * n_bins > 7 * cap:
        raise ValueError(f"grid tables: slots[{r}] holds {cap} slots for {n_bins} bins "
                         "(load above 0.7: no room for a probe to end)")
    if n_bins >= <int64_t> LOW32:
        raise ValueError(f"grid tables: grid {r} has too many bins")
    seen = np.zeros(n_bins + 1, dtype=np.uint8)
    cdef unsigned char[::1] seen_v = seen
    for k in range(cap):
        s = slots[k]
        if s == 0:
            continue
        n_full += 1
        local = <int64_t> (s & LOW32)
        if local < 1 or local > n_bins or seen_v[local]:
            raise ValueError(f"grid tables: slots[{r}] holds a bad or repeated id")
        seen_v[local] = 1
    if n_full != n_bins:
        raise ValueError(f"grid tables: slots[{r}] holds {n_full} ids for {n_bins} bins")
    for local in range(n_bins):
        key = &keys[local * W]
        h = key_hash(key, W)
        if table_find(&slots[0], <uint64_t> cap - 1, &keys[0], W, key, h,
                      h & (<uint64_t> cap - 1)) != local:
            raise ValueError(f"grid tables: slots[{r}] do not lead to key {local}")


cdef inline int _bit_length(uint64_t v) noexcept nogil:
    cdef int bits = 0
    while v:
        bits += 1
        v >>= 1
    return bits


def _ct_check(keys_arr, wbits_arr, probes_arr):
    """Test hook for binning_table.h: build the bucketed table of ``keys_arr``
    (uint64 (n, W), distinct, word k within ``wbits_arr[k]`` bits) and return
    ``(keys_out, found, buckets, recs, buckets_vec, recs_vec, dshift)``: its keys exported in
    id order, the id found by lookup of each of ``probes_arr`` (uint64 (m, W), each
    word within its bits; -1 if absent), and each key's bucket and first record word
    from rbcd_ct_query and (single-word keys on an AVX-512 CPU, else None)
    rbcd_ct_query1_avx512, and the table's dshift."""
    keys = np.ascontiguousarray(keys_arr, dtype=np.uint64)
    probes = np.ascontiguousarray(probes_arr, dtype=np.uint64)
    wb = np.ascontiguousarray(wbits_arr, dtype=np.int32)
    cdef int64_t n = keys.shape[0], m = probes.shape[0], k
    if probes.ndim != 2 or probes.shape[1] != keys.shape[1]:
        raise ValueError("probes must have the keys' words")
    cdef int W = keys.shape[1]
    if wb.shape[0] != W or W < 1:
        raise ValueError("one bit count per key word")
    cdef const uint64_t[:, ::1] kv = keys
    cdef const uint64_t[:, ::1] pv = probes
    cdef const int32_t[::1] wv = wb
    cdef CtArrays ct
    cdef CTable t
    if ct_build(&kv[0, 0] if n else NULL, n, W, &wv[0], &ct) != 0:
        raise MemoryError("cannot build the table")
    dirs = _adopt(ct.dir, ct.n_dir, np.uint32)
    offs = _adopt(ct.off, ct.n_off, np.uint8)
    ents = _adopt(ct.ent, ct.n_ent, np.uint8)
    cdef const uint32_t[::1] dv = dirs
    cdef const unsigned char[::1] ov = offs
    cdef const unsigned char[::1] ev = ents
    ct_geometry(&t, n, W, &wv[0])
    t.dir = &dv[0]
    t.off = &ov[0]
    t.ent = &ev[0]
    t.dshift = ov[ov.shape[0] - 1]
    out = np.zeros((n, W), dtype=np.uint64)
    found = np.full(m, -2, dtype=np.int64)
    buckets = np.zeros(n, dtype=np.uint64)
    recs = np.zeros((n, W + 1), dtype=np.uint64)
    cdef uint64_t[:, ::1] outv = out
    cdef int64_t[::1] fv = found
    cdef uint64_t[::1] bv = buckets
    cdef uint64_t[:, ::1] rv = recs
    if not ct_ids_ok(&t):
        raise ValueError("ids out of range")
    if n:
        ct_keys(&t, &outv[0, 0])
        for k in range(m):
            fv[k] = ct_find(&t, &pv[k, 0], &rv[0, 0])
        for k in range(n):
            bv[k] = ct_query(&t, &kv[k, 0], &rv[k, 0])
    buckets_vec = recs_vec = None
    cdef uint64_t[::1] bvv
    cdef uint64_t[:, ::1] rvv
    if W == 1 and avx512_available():
        buckets_vec = np.zeros(n, dtype=np.uint64)
        recs_vec = np.zeros((n, 2), dtype=np.uint64)
        bvv = buckets_vec
        rvv = recs_vec
        if n:
            ct_query1_avx512(&t, &kv[0, 0], n, &rvv[0, 0], 2, &bvv[0])
        recs_vec = recs_vec[:, 0]
    return out, found, buckets, recs[:, 0].copy(), buckets_vec, recs_vec, int(t.dshift)
