"""Coordinate descent kernels: serial, Hogwild and grid-block (docs/internals.md).

The solver minimizes (docs/design.md contract 8)

    P(w, b) = (1/S) sum_i s_i loss(p_i, y_i) + lam1 ||w||_1 + lam2/2 ||w||^2,   p = Z w + b

over a CSC matrix Z, one coordinate at a time (contract 9):

    g_j = (1/S) sum_i s_i loss'(p_i, y_i) z_ij + lam2 w_j,   M_j = beta h_j + lam2
    w_j <- soft_threshold(w_j - g_j / M_j, lam1 / M_j),      p += (w_j_new - w_j_old) Z[:, j]

Design: a ``CDProblem`` holds raw pointers to every array in a C struct (``Prob``); the
kernels are ``noexcept nogil`` functions of that struct, called once per epoch from Python
(the epoch loop, intercept step, objective and convergence check are separate calls, so
``linear.py`` stays readable and prints progress). The loss is an enum chosen once per fit;
inside a column loop it is a switch on a loop-invariant value, which gcc unswitches at -O3
(no function pointers, no Python dispatch). The squared loss, the hot case, has its own
loops and keeps the residual u = p - y instead of p, so a column pass reads one array.

State vector u: u_i = p_i - y_i for the squared loss, u_i = p_i for the others.

RB fast path: when every stored value of Z equals one constant (random binning: 1/sqrt(R)),
``data`` is NULL and the loops skip reading values (multiply by the constant once).
"""
import numpy as np

from cython.parallel cimport parallel, prange
from libc.math cimport NAN, exp, fabs, log1p
from libc.stdlib cimport free, malloc
from libc.stdint cimport int32_t, int64_t, uint16_t, uint64_t

from rbcd._openmp cimport atomic_add, omp_num_threads, omp_thread_num

from rbcd.binning._grid cimport (LABEL_MAX_BINS, LABEL_NARROW_LIMIT, label_is_wide, label_t,
                                label2_t, label_typecode)
# the losses' values and derivatives (shared with rbcd.dask._kernels)
from rbcd.solvers._losses cimport (logistic_deriv, logistic_value, sqhinge_deriv,
                                   sqhinge_value)

cdef extern from "cd_atomics.h" nogil:
    double atomic_exchange "rbcd_cd_exchange"(double *p, double v) noexcept
    long long fetch_add "rbcd_cd_fetch_add"(long long *p, long long v) noexcept
    void prefetch "rbcd_cd_prefetch"(const void *p) noexcept
    void prefetch_w "rbcd_cd_prefetch_w"(const void *p) noexcept

cdef extern from "cd_kernels.h" nogil:
    uint64_t mulhi "rbcd_mulhi64"(uint64_t x, uint64_t n) noexcept
    double gather_sum_i32 "rbcd_cd_gather_sum_i32"(const double *dv, const double *s,
                                                   const double *z, const int32_t *ind,
                                                   int64_t start, int64_t end) noexcept
    double gather_sum_i64 "rbcd_cd_gather_sum_i64"(const double *dv, const double *s,
                                                   const double *z, const int64_t *ind,
                                                   int64_t start, int64_t end) noexcept
    void column_add_i32 "rbcd_cd_column_add_i32"(double *u, const int32_t *ind,
                                                 const double *z, int64_t start, int64_t end,
                                                 double dz, double delta) noexcept
    void column_add_i64 "rbcd_cd_column_add_i64"(double *u, const int64_t *ind,
                                                 const double *z, int64_t start, int64_t end,
                                                 double dz, double delta) noexcept
    double logistic_move "rbcd_logistic_move"(double *ex, double p, double y,
                                              const double *f) noexcept

cdef extern from "rbcd_team.h" nogil:
    ctypedef struct TeamBarrier "rbcd_team_barrier":
        pass
    void team_init "rbcd_team_init"(TeamBarrier *b) noexcept
    void team_wait "rbcd_team_wait"(TeamBarrier *b, int n) noexcept

cdef extern from "cd_rtm.h" nogil:
    int rtm_usable "rbcd_rtm_usable"() noexcept
    int tx_add_i32 "rbcd_tx_add_i32"(double* u, const int32_t* ind, long long k0, long long k1,
                                     double dz, const double* z, double delta) noexcept
    int tx_add_i64 "rbcd_tx_add_i64"(double* u, const int64_t* ind, long long k0, long long k1,
                                     double dz, const double* z, double delta) noexcept


cpdef enum Loss:
    SQUARED = 0
    LOGISTIC = 1
    SQUARED_HINGE = 2

cpdef enum Selection:
    RANDOM = 0
    PERMUTATION = 1
    CYCLIC = 2

cpdef enum Mode:
    SERIAL = 0
    HOGWILD = 1
    GRID = 2

cpdef enum Check:
    DUALITY_GAP = 0
    SUBGRADIENT = 1

# Below this many stored entries a parallel region costs more than it saves (thread wake-up
# is microseconds when cores are idle, milliseconds when they are oversubscribed): such
# passes run on the calling thread. Results are unchanged (each column is summed alone).
cdef enum:
    PAR_MIN_ENTRIES = 32768
    # the per-epoch passes over the rows (the intercept's shift, the objective's sums) or
    # the weights (the norms) run on one thread below this many rows / columns (a 16th of
    # it for the logistic loss's rows, row_threads): at about a nanosecond a row or
    # column, a pass of fewer costs less than waking the sleeping threads
    # (about 64 us a region on the 2-vCPU VM; docs/benchmarks/threads.md). The intercept
    # step at N = 10^5 took 157 us a call on 2 threads against 98 us on one.
    ROW_PAR_MIN = 262144
    # coordinate look-ahead: the record of the coordinate LOOK steps ahead is prefetched,
    # its row indices LOOK / 2 steps ahead (its predictions are not prefetched: out-of-order
    # execution overlaps those misses)
    LOOK = 8
    GRID_CHUNK = 16
    GRID_CHUNK_ENTRIES = 4096
    # Hogwild threads claim the epoch's steps in chunks of this many from a shared counter,
    # so a thread that the OS preempts holds up at most one chunk, not half the epoch
    HOGWILD_CHUNK = 1024
    # in the threads' region of a streamed grid epoch (grid_team), a grid's new weights are
    # split among the threads from this many partial sums (bins x blocks x lanes, about a
    # microsecond per thousand): there no region has to start for them, and a thread left
    # waiting longer than the barrier's spin sleeps (rbcd_team.h)
    WEIGHT_TEAM_MIN = 4096
    # a column (a grid's bin) of at least this many rows moves the logistic state by its
    # two factors (two exps for the column), a shorter one by one exp per row
    FACTOR_MIN_ROWS = 3
    OBJ_BLOCK = 65536
    # the streamed step sums a grid's rows into STREAM_LANES partial sums per bin and row
    # block (row i of the block into lane i % STREAM_LANES) where those take at most one
    # double per STREAM_LANES_ROWS rows (stream_lanes): consecutive rows of one bin then add
    # to different addresses, which breaks the store-to-load chains of a popular bin
    STREAM_LANES = 4
    STREAM_LANES_ROWS = 8
    # a column block of the passes over the columns (objective norms, convergence scan)
    # ends at COL_BLOCK columns or before it would exceed COL_BLOCK_ENTRIES stored entries
    COL_BLOCK = 4096
    COL_BLOCK_ENTRIES = 32768

ctypedef fused idx_t:
    int32_t
    int64_t

# Hogwild's adds to u (CDProblem's ``tx`` argument; rbcd.solvers._paths.CDPaths.transactions):
# TX_AUTO hardware transactions where the CPU has them (cd_rtm.h), else atomic adds;
# TX_OFF atomic adds; TX_ABORT the transaction path with every transaction failing (tests its
# fallback on any CPU). All three lose no update.
TX_AUTO = 0
TX_OFF = 1
TX_ABORT = 2
_RTM_USABLE = bool(rtm_usable())


def rtm_available():
    """True when Hogwild's TX_AUTO uses hardware transactions on this CPU and build."""
    return _RTM_USABLE


def label_dtype(Py_ssize_t n_bins):
    """The numpy dtype of the grid labels of a grid of ``n_bins`` columns
    (rbcd/binning/_grid.pxd: uint16 under 65536 bins, else int32)."""
    return np.dtype(label_typecode(n_bins))


# ---------------------------------------------------------------------------------------
# Losses: value, derivative (d/dp), curvature bound. ``u`` is the state (p - y for squared).

cdef inline double loss_value(Loss loss, double u, double y) noexcept nogil:
    if loss == SQUARED:
        return 0.5 * u * u
    if loss == LOGISTIC:
        return logistic_value(u, y)
    return sqhinge_value(u, y)


cdef inline double loss_deriv(Loss loss, double u, double y) noexcept nogil:
    if loss == SQUARED:
        return u
    if loss == LOGISTIC:
        return logistic_deriv(u, y)
    return sqhinge_deriv(u, y)


cdef inline double loss_beta(Loss loss) noexcept nogil:
    if loss == SQUARED:
        return 1.0
    if loss == LOGISTIC:
        return 0.25
    return 2.0


def beta_of(Loss loss):
    """The curvature bound beta of ``loss`` (1 squared, 1/4 logistic, 2 squared hinge)."""
    return loss_beta(loss)


# ---------------------------------------------------------------------------------------
# SplitMix64 (docs/internals.md, "Random streams")

cdef inline uint64_t splitmix_next(uint64_t* state) noexcept nogil:
    cdef uint64_t z
    state[0] += <uint64_t>0x9E3779B97F4A7C15ULL
    z = state[0]
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef inline Py_ssize_t randbelow(uint64_t* state, Py_ssize_t n) noexcept nogil:
    # floor(next() n / 2^64): docs/internals.md, contract 10
    return <Py_ssize_t>mulhi(splitmix_next(state), <uint64_t>n)


cdef void fisher_yates(int64_t* perm, Py_ssize_t n, uint64_t* state) noexcept nogil:
    # for i in range(n - 1, 0, -1): j = randbelow(i + 1); perm[i], perm[j] = perm[j], perm[i]
    cdef Py_ssize_t i, j
    cdef int64_t t
    for i in range(n - 1, 0, -1):
        j = randbelow(state, i + 1)
        t = perm[i]
        perm[i] = perm[j]
        perm[j] = t


def splitmix_draws(uint64_t seed, Py_ssize_t n, Py_ssize_t bound):
    """``n`` draws of randbelow(bound) from SplitMix64(seed) (for tests)."""
    cdef uint64_t state = seed
    out = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] o = out
    cdef Py_ssize_t i
    for i in range(n):
        o[i] = randbelow(&state, bound)
    return out


# ---------------------------------------------------------------------------------------
# The problem struct and the column kernels

cdef struct ColRec:
    # everything a coordinate step reads about column j, in one 32-byte record (one cache
    # line fetch for a random coordinate instead of one per array)
    int64_t start              # indptr[j]
    int64_t end                # indptr[j + 1]
    double M                   # beta h_j + lam2
    double w                   # w_j


cdef struct Prob:
    Py_ssize_t N
    Py_ssize_t D
    const int64_t* indptr      # (D + 1,)
    ColRec* rec                # (D,)
    const int32_t* ind32       # row indices, one of ind32 / ind64 is NULL
    const int64_t* ind64
    const double* data         # stored values, NULL when all equal ``zval``
    double zval
    const double* y            # (N,)
    const double* s            # (N,) sample weights, NULL when all 1
    double S                   # sum of the weights
    double* u                  # (N,) state: p - y (squared) or p
    double* dv                 # (N,) loss'(p_i, y_i); the same array as u for squared
    double* ex                 # (N,) exp(y_i p_i): the logistic loss with every y_i = +-1
                               # (cd_kernels.h, rbcd_logistic_move), else NULL
    Loss loss
    double lam1
    double lam2
    const int64_t* cblk        # (n_cblk + 1,) the column blocks of the passes over the
    Py_ssize_t n_cblk          # columns (column_blocks): fixed by the matrix, not by T


cdef struct Tx:
    # how one Hogwild thread makes its adds to u atomic
    int mode                   # TX_RTM: transactions of TX_BATCH adds; TX_CAS: one per add
    long long tries
    long long aborts


cdef enum:
    TX_CAS = 1
    TX_RTM = 2
    TX_FAIL = 3                # TX_RTM's control flow with every transaction aborting
    # adds per transaction: short enough to rarely conflict or overflow the transactional
    # buffer, long enough to spread the cost of starting and committing one
    TX_BATCH = 64
    TX_AHEAD = 16     # atomic adds: lines of u asked for this many adds ahead (_tx_adds)


cdef inline double col_grad(const Prob* P, Py_ssize_t j) noexcept nogil:
    """g_j = (1/S) sum_i s_i loss'(p_i, y_i) z_ij + lam2 w_j."""
    # (s * loss'(p, y) * z)[rows of column j].sum(), z left out when constant: loss'(p_i,
    # y_i) is kept up to date in dv, so the sum is the same for every loss; its summation
    # order is in rbcd/src/cd_kernels.h
    cdef double acc
    cdef const ColRec* rj = &P.rec[j]
    if P.ind64 != NULL:
        acc = gather_sum_i64(P.dv, P.s, P.data, P.ind64, rj.start, rj.end)
    else:
        acc = gather_sum_i32(P.dv, P.s, P.data, P.ind32, rj.start, rj.end)
    if P.data == NULL:
        acc = acc * P.zval
    return acc / P.S + P.lam2 * P.rec[j].w


cdef inline void _tx_adds(const Prob* P, const idx_t* ind, int64_t start, int64_t end,
                          double delta, Tx* tx) noexcept nogil:
    # u[ind[k]] += delta z_k, start <= k < end, in transactions of TX_BATCH adds; an aborted
    # batch is redone with atomic adds. After repeated aborts (more than a quarter of the
    # batches, once 256 have aborted) the thread stays on atomic adds.
    cdef int64_t k, kb, kk
    cdef double* u = P.u
    cdef const double* z = P.data
    cdef double dz = delta * P.zval
    cdef int ok
    # The atomic adds: a locked instruction waits for its line and keeps later loads
    # waiting, so the lines of u would come one at a time. Each add's line is asked for
    # TX_AHEAD adds earlier, owned (prefetch_w), so it is in this core's cache, writable,
    # when its add comes.
    if tx.mode != TX_RTM:
        for kk in range(start, min(end, start + TX_AHEAD)):
            prefetch_w(&u[ind[kk]])
    k = start
    while k < end:
        kb = min(end, k + TX_BATCH)
        if tx.mode == TX_RTM or tx.mode == TX_FAIL:
            if tx.mode == TX_FAIL:
                ok = 0
            elif idx_t is int32_t:
                ok = tx_add_i32(u, ind, k, kb, dz, z, delta)
            else:
                ok = tx_add_i64(u, ind, k, kb, dz, z, delta)
            tx.tries += 1
            if ok:
                k = kb
                continue
            tx.aborts += 1
            if tx.aborts > 256 and 4 * tx.aborts > tx.tries:
                tx.mode = TX_CAS
        if z == NULL:
            for kk in range(k, kb):
                if kk + TX_AHEAD < end:
                    prefetch_w(&u[ind[kk + TX_AHEAD]])
                atomic_add(&u[ind[kk]], dz)
        else:
            for kk in range(k, kb):
                if kk + TX_AHEAD < end:
                    prefetch_w(&u[ind[kk + TX_AHEAD]])
                atomic_add(&u[ind[kk]], delta * z[kk])
        k = kb


cdef inline void _col_axpy(const Prob* P, const idx_t* ind, Py_ssize_t j, double delta,
                           Tx* tx) noexcept nogil:
    # numpy: p[rows] += delta * z[rows, j]; dv[rows] = loss'(p[rows], y[rows])
    # (tx not NULL: atomic adds for Hogwild; for the squared loss dv is p - y itself).
    # Rows are distinct and independent, so the order is free: the plain loops run
    # backwards, from the rows the gradient's gather (forwards) touched last, which are
    # still in cache when the column's rows span more lines than the cache holds
    # (benchmarks/compare_cd.py); the squared loss's in groups (rbcd/src/cd_kernels.h)
    cdef int64_t k
    cdef int64_t start = P.rec[j].start
    cdef int64_t end = P.rec[j].end
    cdef double* u = P.u
    cdef double* dv = P.dv
    cdef const double* y = P.y
    cdef const double* z = P.data
    cdef Loss loss = P.loss
    cdef double dz
    cdef double f[2]
    cdef idx_t i
    if loss == SQUARED:
        if tx != NULL:
            _tx_adds(P, ind, start, end, delta, tx)
        elif idx_t is int32_t:
            column_add_i32(u, ind, z, start, end, delta * P.zval, delta)
        else:
            column_add_i64(u, ind, z, start, end, delta * P.zval, delta)
        return
    dz = delta * P.zval
    if P.ex != NULL and tx == NULL and z == NULL and end - start >= FACTOR_MIN_ROWS:
        # one pair of exps for the column instead of one exp per row
        f[0] = exp(dz)
        f[1] = exp(-dz)
        for k in range(end - 1, start - 1, -1):
            i = ind[k]
            u[i] += dz
            dv[i] = logistic_move(&P.ex[i], u[i], y[i], f)
        return
    for k in range(start, end):
        i = ind[k]
        if z != NULL:
            dz = delta * z[k]
        if tx != NULL:
            atomic_add(&u[i], dz)
            # (P.ex goes stale: Hogwild refreshes it after the epoch)
            dv[i] = loss_deriv(loss, u[i], y[i])
        else:
            u[i] += dz
            set_deriv(P, i)


def column_add(double[::1] u, indices, const double[::1] z, double delta, double zval):
    """The squared loss's adds of one column step, in place (for tests): u[indices] +=
    delta z, or delta zval when ``z`` is None; ``indices`` int32 or int64, distinct."""
    cdef Py_ssize_t n = indices.shape[0]
    cdef const int32_t[::1] i32
    cdef const int64_t[::1] i64
    cdef const double* zp = NULL
    if n == 0:
        return
    if z is not None:
        if z.shape[0] != n:
            raise ValueError("z and indices differ in length")
        zp = &z[0]
    if indices.dtype == np.int64:
        i64 = indices
        column_add_i64(&u[0], &i64[0], zp, 0, n, delta * zval, delta)
    else:
        i32 = indices
        column_add_i32(&u[0], &i32[0], zp, 0, n, delta * zval, delta)


cdef inline void set_deriv(const Prob* P, Py_ssize_t i) noexcept nogil:
    # dv[i] = loss'(p_i, y_i) from p_i, and the logistic state ex[i] = exp(y_i p_i) if kept
    # (the same value as loss_deriv: -y / (1 + exp(y p)))
    cdef double e
    if P.ex != NULL:
        e = exp(P.y[i] * P.u[i])
        P.ex[i] = e
        P.dv[i] = -P.y[i] / (1.0 + e)
    else:
        P.dv[i] = loss_deriv(P.loss, P.u[i], P.y[i])


cdef inline int row_threads(const Prob* P, int T) noexcept nogil:
    # threads for a pass over the rows of a few ns a row: T from ROW_PAR_MIN rows, from a
    # 16th of that for the logistic loss (an exp or a log a row)
    if P.N >= (ROW_PAR_MIN // 16 if P.loss == LOGISTIC else ROW_PAR_MIN):
        return T
    return 1


cdef void shift_rows(const Prob* P, double delta, int T) noexcept nogil:
    # numpy: p += delta (if delta != 0), then loss' (and the logistic state) from p afresh;
    # elementwise, in parallel blocks of OBJ_BLOCK rows
    cdef Py_ssize_t q, i, lo, hi
    for q in prange((P.N + OBJ_BLOCK - 1) // OBJ_BLOCK, num_threads=row_threads(P, T),
                    schedule="static"):
        lo = q * OBJ_BLOCK
        hi = min(P.N, (q + 1) * OBJ_BLOCK)
        if delta != 0.0:
            for i in range(lo, hi):
                P.u[i] += delta
        refresh_derivs(P, lo, hi)


cdef void refresh_derivs(const Prob* P, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    # numpy: dv[lo:hi] = loss'(p[lo:hi], y[lo:hi]), ex[lo:hi] = exp(y p) from p afresh
    # (nothing to do for the squared loss)
    cdef Py_ssize_t i
    if P.loss == SQUARED:
        return
    for i in range(lo, hi):
        set_deriv(P, i)


cdef inline double soft_threshold(double v, double t) noexcept nogil:
    # sign(v) max(|v| - t, 0)
    if v > t:
        return v - t
    if v < -t:
        return v + t
    return 0.0


cdef inline double step_value(const Prob* P, double wj, double g, double Mj) noexcept nogil:
    """The new w_j of a coordinate step (contract 9) from w_j, g_j and M_j."""
    if Mj == 0.0:
        return 0.0
    return soft_threshold(wj - g / Mj, P.lam1 / Mj)


cdef inline void cd_step(const Prob* P, Py_ssize_t j, Tx* tx) noexcept nogil:
    """One coordinate step on column j (contract 9); updates w_j and the state u."""
    cdef ColRec* rj = &P.rec[j]
    cdef double wj = rj.w
    cdef double g = col_grad(P, j)
    cdef double Mj = rj.M
    cdef double new, old, delta
    new = step_value(P, wj, g, Mj)
    if tx != NULL:
        old = atomic_exchange(&rj.w, new)
    else:
        old = wj
        rj.w = new
    delta = new - old
    if delta != 0.0:
        if P.ind64 != NULL:
            _col_axpy(P, P.ind64, j, delta, tx)
        else:
            _col_axpy(P, P.ind32, j, delta, tx)


cdef inline void _prefetch_indices(const Prob* P, Py_ssize_t j) noexcept nogil:
    # the first row indices of column j (its record was prefetched earlier)
    if P.ind64 != NULL:
        prefetch(&P.ind64[P.rec[j].start])
    else:
        prefetch(&P.ind32[P.rec[j].start])


cdef void run_draws(const Prob* P, uint64_t* state, Py_ssize_t count, Tx* tx) noexcept nogil:
    """``count`` steps on j = randbelow(D) drawn from ``state``, in draw order.

    Draws are taken LOOK steps ahead into a ring (the same sequence, consumed in the same
    order) so that each coordinate's record and first row indices are prefetched.
    """
    cdef Py_ssize_t ring[LOOK]
    cdef Py_ssize_t it, j, n0 = count if count < LOOK else LOOK
    for it in range(n0):
        ring[it] = randbelow(state, P.D)
        prefetch(&P.rec[ring[it]])
    for it in range(count):
        j = ring[it % LOOK]
        if it + LOOK < count:
            ring[it % LOOK] = randbelow(state, P.D)
            prefetch(&P.rec[ring[it % LOOK]])
        if it + LOOK // 2 < count:
            _prefetch_indices(P, ring[(it + LOOK // 2) % LOOK])
        cd_step(P, j, tx)


cdef void hogwild_worker(const Prob* P, uint64_t* state, const int64_t* order,
                         long long* next_step, bint atomic, int txmode,
                         long long* stats) noexcept nogil:
    """One Hogwild thread: claims chunks of the epoch's D steps until none are left.

    ``state`` not NULL: each claimed step is a draw from this thread's own stream;
    otherwise the steps are order[lo:hi] (order NULL: the coordinates lo..hi-1).
    """
    cdef long long lo, hi
    cdef uint64_t local = state[0] if state != NULL else 0  # private copy: the threads'
    cdef Tx tx                                              # states share a cache line
    tx.mode = txmode
    tx.tries = 0
    tx.aborts = 0
    while True:
        lo = fetch_add(next_step, HOGWILD_CHUNK)
        if lo >= P.D:
            break
        hi = min(lo + HOGWILD_CHUNK, <long long>P.D)
        if state != NULL:
            run_draws(P, &local, hi - lo, &tx if atomic else NULL)
        else:
            run_order(P, order, lo, hi, &tx if atomic else NULL)
    if state != NULL:
        state[0] = local
    stats[0] = tx.tries
    stats[1] = tx.aborts


cdef void run_order(const Prob* P, const int64_t* order, Py_ssize_t lo, Py_ssize_t hi,
                    Tx* tx) noexcept nogil:
    """Steps on order[lo], ..., order[hi - 1] (order NULL: lo, ..., hi - 1), with prefetch."""
    cdef Py_ssize_t it
    for it in range(lo, hi):
        if it + LOOK < hi:
            prefetch(&P.rec[order[it + LOOK] if order != NULL else it + LOOK])
        if it + LOOK // 2 < hi:
            _prefetch_indices(P, order[it + LOOK // 2] if order != NULL else it + LOOK // 2)
        cd_step(P, order[it] if order != NULL else it, tx)


cdef struct Moves:
    # a streamed grid's moves, by bin: dz[b] = (w_new - w_old) zval, dz[bins] = 0 (rows
    # without an entry); with the logistic state (P.ex; else NULL) the factors
    # fac[2b] = exp(dz[b]), fac[2b + 1] = exp(-dz[b]) for a moved bin of at least
    # FACTOR_MIN_ROWS rows, 1 and 1 for an unmoved bin (its rows are multiplied by 1, which
    # changes nothing: no branch on the move), 0 and 0 for a short moved bin (its rows take
    # a fresh exp): the rule of the per-bin step (_col_axpy), so both give the same bits
    double* dz
    double* fac


cdef inline void set_move(const Prob* P, const Moves* mv, Py_ssize_t c, double d,
                          int64_t n_rows) noexcept nogil:
    # bin c of the visited grid moves by d; n_rows: its column's stored entries
    mv.dz[c] = d
    if mv.fac != NULL:
        if d == 0.0:
            mv.fac[2 * c] = 1.0
            mv.fac[2 * c + 1] = 1.0
        elif n_rows >= FACTOR_MIN_ROWS:
            mv.fac[2 * c] = exp(d)
            mv.fac[2 * c + 1] = exp(-d)
        else:
            mv.fac[2 * c] = 0.0
            mv.fac[2 * c + 1] = 0.0


cdef inline double _move_row(const Prob* P, const Moves* mv, Py_ssize_t l,
                             Py_ssize_t i) noexcept nogil:
    # p_i += dz[l] and loss'(p_i, y_i), for the losses other than squared: by the bin's
    # factors (unmoved bins too: factors 1), else only if the bin moved, by a fresh exp.
    # Returns the new dv[i] (the caller's partial sum adds it from a register instead of
    # reading back the store)
    cdef double d = mv.dz[l]
    cdef double g
    if mv.fac != NULL and mv.fac[2 * l] != 0.0:
        P.u[i] += d
        g = logistic_move(&P.ex[i], P.u[i], P.y[i], &mv.fac[2 * l])
        P.dv[i] = g
        return g
    if d != 0.0:
        P.u[i] += d
        set_deriv(P, i)
    return P.dv[i]


cdef void _stream_pass(const Prob* P, const label_t* lab_prev, const Moves* mv,
                       const label2_t* lab, double* part, Py_ssize_t nb, int lanes,
                       Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    # rows a..b-1, in order: the pending grid's update u_i += dz[lab_prev[i]] (and the
    # loss' refresh) if lab_prev is not NULL; then, if lab is not NULL, the next grid's partial
    # sums: row i adds s_i loss'(p_i, y_i) to lane (i - a) % lanes, part[lane nb + lab[i]]
    # (lanes 1 or STREAM_LANES; part[:lanes nb] zeroed first)
    cdef Py_ssize_t i, m
    cdef double x0, x1, x2, x3
    cdef double* u = P.u
    cdef double* dv = P.dv
    cdef const double* s = P.s
    cdef const double* dz_prev = mv.dz
    cdef Loss loss = P.loss
    cdef Py_ssize_t lmask = lanes - 1
    if lab != NULL:
        for i in range(lanes * nb):
            part[i] = 0.0
    if lab_prev != NULL and lab != NULL:
        if loss == SQUARED and s == NULL and lanes == STREAM_LANES:
            # the hot loop, unrolled by the lanes: rows a + 4m + l go to lane l
            i = a
            while i + 4 <= b:
                x0 = u[i] + dz_prev[lab_prev[i]]
                x1 = u[i + 1] + dz_prev[lab_prev[i + 1]]
                x2 = u[i + 2] + dz_prev[lab_prev[i + 2]]
                x3 = u[i + 3] + dz_prev[lab_prev[i + 3]]
                u[i] = x0
                u[i + 1] = x1
                u[i + 2] = x2
                u[i + 3] = x3
                part[lab[i]] += x0
                part[nb + lab[i + 1]] += x1
                part[2 * nb + lab[i + 2]] += x2
                part[3 * nb + lab[i + 3]] += x3
                i = i + 4
            m = 0
            while i < b:
                u[i] += dz_prev[lab_prev[i]]
                part[m * nb + lab[i]] += u[i]
                i = i + 1
                m = m + 1
        elif loss == SQUARED:
            for i in range(a, b):
                u[i] += dz_prev[lab_prev[i]]
                part[((i - a) & lmask) * nb + lab[i]] += u[i] if s == NULL else s[i] * u[i]
        else:
            for i in range(a, b):
                x0 = _move_row(P, mv, lab_prev[i], i)
                part[((i - a) & lmask) * nb + lab[i]] += x0 if s == NULL else s[i] * x0
    elif lab_prev != NULL:
        if loss == SQUARED:
            for i in range(a, b):
                u[i] += dz_prev[lab_prev[i]]
        else:
            for i in range(a, b):
                _move_row(P, mv, lab_prev[i], i)
    elif lab != NULL:
        if s == NULL:
            for i in range(a, b):
                part[((i - a) & lmask) * nb + lab[i]] += dv[i]
        else:
            for i in range(a, b):
                part[((i - a) & lmask) * nb + lab[i]] += s[i] * dv[i]


cdef void _weights_from_partials(const Prob* P, Py_ssize_t a, Py_ssize_t b, Py_ssize_t lo,
                                 const double* part, Py_ssize_t stride, int lanes,
                                 Py_ssize_t n_blocks, const Moves* mv) noexcept nogil:
    # bins a..b-1 of the grid at column lo: g_j from the block partial sums (added in block
    # order; a block of STREAM_LANES lanes gives (l0 + l1) + (l2 + l3)), then w_j as
    # cd_step, and its move in mv (set_move)
    cdef Py_ssize_t j, q
    cdef ColRec* rj
    cdef const double* pq
    cdef double acc, wj, g, Mj, new
    for j in range(a, b):
        acc = 0.0
        for q in range(n_blocks):
            pq = part + q * lanes * stride + (j - lo)
            if lanes == STREAM_LANES:
                acc += (pq[0] + pq[stride]) + (pq[2 * stride] + pq[3 * stride])
            else:
                acc += pq[0]
        rj = &P.rec[j]
        wj = rj.w
        g = (acc * P.zval) / P.S + P.lam2 * wj
        Mj = rj.M
        new = step_value(P, wj, g, Mj)
        rj.w = new
        set_move(P, mv, j - lo, (new - wj) * P.zval, rj.end - rj.start)


cdef void stream_blocks(const Prob* P, const label_t* lab_prev, const Moves* mv,
                        const label2_t* lab, double* part, Py_ssize_t nb, int lanes,
                        Py_ssize_t block, Py_ssize_t q0, Py_ssize_t q1) noexcept nogil:
    """_stream_pass over the row blocks q0..q1-1 of ``block`` rows, block q writing the
    partial sums part[q lanes nb : (q + 1) lanes nb]. The blocks are fixed by N (not by the
    threads) and independent of each other: any split of them among threads gives the same
    sums."""
    cdef Py_ssize_t q
    for q in range(q0, q1):
        _stream_pass(P, lab_prev, mv, lab, part + q * lanes * nb if lab != NULL else NULL,
                     nb, lanes, q * block, min(P.N, (q + 1) * block))


cdef inline Py_ssize_t part_stride(Py_ssize_t n_bins) noexcept nogil:
    """Doubles between two row blocks' partial sums of a grid of n_bins bins (its n_bins + 1
    labels, the last for rows without an entry), rounded up to whole 64-byte cache lines:
    blocks summed by different threads never share a line (the buffer is 64-byte aligned)."""
    return (n_bins + 1 + 7) // 8 * 8


cdef inline int stream_lanes(Py_ssize_t n_blocks, Py_ssize_t n_bins, Py_ssize_t N) noexcept nogil:
    """Lanes of a streamed grid's partial sums: STREAM_LANES while they take at most one
    double per STREAM_LANES_ROWS rows (a grid of a few hundred bins; its zeroing and
    reduction stay a small part of the pass over the rows), else 1. A property of the
    problem (N, the grid's bins, the row blocks fixed by N): the same for every T."""
    if STREAM_LANES * n_blocks * part_stride(n_bins) * STREAM_LANES_ROWS <= N:
        return STREAM_LANES
    return 1


cdef void stream_weights(const Prob* P, Py_ssize_t lo, Py_ssize_t hi, const double* part,
                         int lanes, Py_ssize_t n_blocks, Moves* mv, int tid,
                         int nt) noexcept nogil:
    """Thread tid's share (of nt) of the new weights of the bins lo..hi-1 from the row
    blocks' partial sums (reading u, not writing it); mv.dz[j - lo] = (w_new - w_old) zval,
    and the logistic state's factors where they save exps (Moves). One thread (tid 0) below
    WEIGHT_TEAM_MIN partial sums, else contiguous runs of bins, whole cache lines of dz
    each; every bin's weight is computed alone, so the split does not change it."""
    cdef Py_ssize_t n = hi - lo, a, b
    cdef Py_ssize_t nb = part_stride(n)
    if nt == 1 or n * n_blocks * lanes < WEIGHT_TEAM_MIN:
        if tid == 0:
            set_move(P, mv, n, 0.0, 0)  # rows without an entry in the grid (label hi - lo)
            _weights_from_partials(P, lo, hi, lo, part, nb, lanes, n_blocks, mv)
        return
    if tid == 0:
        set_move(P, mv, n, 0.0, 0)
    a = lo if tid == 0 else lo + (n * tid // nt) // 8 * 8
    b = hi if tid == nt - 1 else lo + (n * (tid + 1) // nt) // 8 * 8
    _weights_from_partials(P, a, b, lo, part, nb, lanes, n_blocks, mv)


cdef void _fill_labels(const int64_t* indptr, const idx_t* ind, label_t* lab, Py_ssize_t N,
                       Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    # lab[i] = j - lo for the rows i of the columns lo <= j < hi (one grid), hi - lo for rows
    # without an entry in the grid
    cdef Py_ssize_t i, j
    cdef int64_t k
    if indptr[hi] - indptr[lo] < N:  # else (at most one entry per row) every row is covered
        for i in range(N):
            lab[i] = <label_t>(hi - lo)
    for j in range(lo, hi):
        for k in range(indptr[j], indptr[j + 1]):
            lab[ind[k]] = <label_t>(j - lo)


def label_arrays(grid_ptr, Py_ssize_t n_rows):
    """Uninitialised label arrays, one per grid, in the layout the streamed grid step
    reads: uint16 for a grid with fewer than 65536 bins, else int32, n_rows entries
    each, in one allocation (huge pages where the OS gives them) with each array
    64-byte aligned. None when there are no rows or grids, or a grid has 2**31 - 1
    bins or more."""
    out = _label_layout(grid_ptr, n_rows)
    return None if out is None else out[0]


cdef object _label_layout(grid_ptr, Py_ssize_t n_rows):
    """``(arrays, ptrs, wide)`` of :func:`label_arrays` (see :func:`label_targets`), or
    None; the arrays are slices of one uint16 and one int32 view of the buffer (a slice
    per grid: this runs once per fit, with hundreds of grids)."""
    widths = np.diff(np.asarray(grid_ptr))
    if widths.shape[0] == 0 or n_rows == 0 or int(widths.max()) >= LABEL_MAX_BINS:
        return None
    wide = (widths >= LABEL_NARROW_LIMIT).astype(np.uint8)
    sizes = (n_rows * np.where(wide, 4, 2) + 63) // 64 * 64
    starts = np.zeros(widths.shape[0], dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    buf = np.empty(int(sizes.sum()) + 64, dtype=np.uint8)
    base = int(buf.ctypes.data)  # 16-byte aligned at least: each start a multiple of 4
    starts += (-base) % 64
    as16 = buf[:buf.shape[0] // 4 * 4].view(np.uint16)
    as32 = buf[:buf.shape[0] // 4 * 4].view(np.int32)
    cdef const int64_t[::1] st = starts
    cdef const unsigned char[::1] wv = wide
    cdef Py_ssize_t g, n_grids = st.shape[0], k
    out = []
    for g in range(n_grids):
        k = st[g]
        out.append(as32[k // 4:k // 4 + n_rows] if wv[g] else as16[k // 2:k // 2 + n_rows])
    return out, (starts + base).astype(np.uint64), wide


def label_targets(grid_ptr, Py_ssize_t n_rows):
    """``label_arrays`` with what a filling kernel needs: ``(out, ptrs, wide)``, the
    arrays' addresses (uint64) and whether each is int32 (uint8), or None."""
    return _label_layout(grid_ptr, n_rows)


def grid_labels(indptr, indices, grid_ptr, Py_ssize_t n_rows, int n_threads):
    """The bin of every row in every grid, for the streamed grid step: a list of R arrays.

    Entry i of array g is j - grid_ptr[g] for the column j of grid g holding row i, or the
    grid's bin count when row i has no entry in grid g: uint16 for a grid with fewer than
    65536 bins, else int32. The caller has checked the grid structure (at most one entry per
    row per grid, row indices in range). None when there are no rows or no grids.
    """
    cdef const int64_t[::1] ip = indptr
    cdef const int64_t[::1] gp = grid_ptr
    cdef const int32_t[::1] i32
    cdef const int64_t[::1] i64
    cdef Py_ssize_t g, n_grids = gp.shape[0] - 1
    cdef bint wide_rows = indices.dtype == np.int64
    cdef uint64_t[::1] ptr
    cdef unsigned char[::1] wide
    targets = label_targets(grid_ptr, n_rows)
    if targets is None:
        return None
    out, ptr, wide = targets
    dummy = np.zeros(1, dtype=indices.dtype)
    if wide_rows:
        i64 = indices if indices.shape[0] else dummy
    else:
        i32 = indices if indices.shape[0] else dummy
    with nogil:
        for g in prange(n_grids, num_threads=max(1, n_threads), schedule="dynamic"):
            if not wide[g] and wide_rows:
                _fill_labels(&ip[0], &i64[0], <uint16_t*>ptr[g], n_rows, gp[g], gp[g + 1])
            elif not wide[g]:
                _fill_labels(&ip[0], &i32[0], <uint16_t*>ptr[g], n_rows, gp[g], gp[g + 1])
            elif wide_rows:
                _fill_labels(&ip[0], &i64[0], <int32_t*>ptr[g], n_rows, gp[g], gp[g + 1])
            else:
                _fill_labels(&ip[0], &i32[0], <int32_t*>ptr[g], n_rows, gp[g], gp[g + 1])
    return out


# ---------------------------------------------------------------------------------------
# Epoch functions, one per mode (docs/design.md, "Parallel coordinate descent"; paper Algorithm 1
# and 2). Each runs one epoch on the state P: D coordinate steps (eq. 24-27), or R grid
# blocks in grid mode, in the order of the schedule S.

cdef struct Sched:
    # the order of an epoch's steps: selection rule, the problem's SplitMix64 stream, and a
    # permutation buffer (D entries; R in grid mode) reshuffled per epoch for PERMUTATION
    Selection sel
    uint64_t* rng
    int64_t* perm


cdef struct Grids:
    # the grid structure of a random binning Z (docs/design.md, "Parallel coordinate descent"):
    # grid r owns columns grid_ptr[r] .. grid_ptr[r + 1] - 1, which touch disjoint rows
    Py_ssize_t n_grids
    const int64_t* grid_ptr    # (n_grids + 1,)
    int64_t par_min            # a grid runs on several threads from this many entries
    # the streamed step's buffers (grid_stream_epoch; set when grid labels are given)
    const uint64_t* label_ptr  # (n_grids,) addresses of the label arrays (_grid.pxd)
    const unsigned char* label_wide  # (n_grids,) 1 where a grid's labels are int32
    Moves mv                   # the visited grid's moves (max bins + 1 entries each)
    double* part               # block partial sums (stream_lanes lanes per block)
    Py_ssize_t cap             # a grid takes them while n_blocks part_stride(bins) <= cap
    Py_ssize_t block           # rows per block (fixed by N: results for any thread count)
    int64_t* order             # (n_grids,) the epoch's grid sequence
    long long* claims          # (n_grids,) chunks of a grid's bin steps claimed (grid_team)


cdef void serial_epoch(const Prob* P, Sched* S) noexcept nogil:
    """D steps on one thread, in the order of S: the iterates of rbcd_ref (contract 10)."""
    if S.sel == RANDOM:
        run_draws(P, S.rng, P.D, NULL)
    elif S.sel == PERMUTATION:
        fisher_yates(S.perm, P.D, S.rng)
        run_order(P, S.perm, 0, P.D, NULL)
    else:
        run_order(P, NULL, 0, P.D, NULL)


cdef void hogwild_epoch(const Prob* P, Sched* S, uint64_t* thread_states, int T, int txmode,
                        long long* stats) noexcept nogil:
    """Paper Algorithm 2: T threads claim chunks of the epoch's D steps (draws from their own
    streams thread_states[t] for RANDOM, else stretches of the permutation or of 0..D-1),
    update w_j by atomic exchange and add to u atomically (txmode: hardware transactions
    with an atomic-add fallback, or atomic adds). stats (T, 2): transactions started and
    aborted per thread."""
    cdef long long next_step = 0
    cdef Py_ssize_t t
    cdef bint atomic = T > 1   # one thread: no concurrent writer, plain adds suffice
    if S.sel == PERMUTATION:
        fisher_yates(S.perm, P.D, S.rng)
    for t in prange(T, num_threads=T, schedule="static", chunksize=1):
        hogwild_worker(P, &thread_states[t] if S.sel == RANDOM else NULL,
                       S.perm if S.sel == PERMUTATION else NULL, &next_step, atomic, txmode,
                       &stats[2 * t])
    if atomic and P.loss != SQUARED:
        # a thread may have stored loss'(p_i) computed before another thread's add to p_i
        # landed: recompute dv from the final p once per epoch
        for t in prange(T, num_threads=T, schedule="static", chunksize=1):
            refresh_derivs(P, (P.N * t) // T, (P.N * (t + 1)) // T)


cdef inline Py_ssize_t next_grid(Sched* S, Py_ssize_t it, Py_ssize_t n_grids) noexcept nogil:
    # the it-th grid of the epoch (S.perm reshuffled by the caller for PERMUTATION)
    if S.sel == RANDOM:
        return randbelow(S.rng, n_grids)
    if S.sel == PERMUTATION:
        return S.perm[it]
    return it


cdef void grid_epoch(const Prob* P, const Grids* G, Sched* S, int T) noexcept nogil:
    """R grid blocks, each grid's bins updated from the same p (disjoint rows: exact block
    coordinate descent), in parallel chunks of GRID_CHUNK bins for grids of at least
    par_min entries. The same iterates for any T."""
    cdef Py_ssize_t it, r
    cdef int64_t lo, hi
    if S.sel == PERMUTATION:
        fisher_yates(S.perm, G.n_grids, S.rng)
    for it in range(G.n_grids):
        r = next_grid(S, it, G.n_grids)
        lo = G.grid_ptr[r]
        hi = G.grid_ptr[r + 1]
        grid_bin_steps(P, lo, hi,
                       1 if hi - lo < 2 or P.indptr[hi] - P.indptr[lo] < G.par_min else T)


cdef inline Py_ssize_t bin_chunks(const Prob* P, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    # the chunks of contiguous bins that threads share of one grid's bin steps: about
    # GRID_CHUNK_ENTRIES stored entries and at least GRID_CHUNK bins each
    return min((hi - lo + GRID_CHUNK - 1) // GRID_CHUNK,
               max((P.indptr[hi] - P.indptr[lo]) // GRID_CHUNK_ENTRIES, 1))


cdef void grid_bin_steps(const Prob* P, Py_ssize_t lo, Py_ssize_t hi, int T) noexcept nogil:
    """The steps of the bins lo..hi-1 of one grid, each on its own column: their rows are
    disjoint, so any order and any split across threads gives the same iterates. The split:
    contiguous chunks of bins, each about GRID_CHUNK_ENTRIES stored entries and at least
    GRID_CHUNK bins (a chunk's claim from the shared counter costs a cache-line transfer,
    which must stay small next to the chunk's steps)."""
    cdef Py_ssize_t c, n_chunks
    cdef Py_ssize_t n_bins = hi - lo
    if T == 1 or n_bins < 2:
        run_order(P, NULL, lo, hi, NULL)
        return
    n_chunks = bin_chunks(P, lo, hi)
    for c in prange(n_chunks, num_threads=T, schedule="dynamic"):
        run_order(P, NULL, lo + (n_bins * c) // n_chunks, lo + (n_bins * (c + 1)) // n_chunks,
                  NULL)


cdef void grid_stream_epoch(const Prob* P, Grids* G, Sched* S, int T) noexcept nogil:
    """grid_epoch as streams over the rows with the grid labels (constant stored values):
    the update of a grid and the partial sums of the next one share one pass over u
    (docs/internals.md, "Grid mode"). On T threads one parallel region runs the whole
    epoch (grid_team), where some grid has enough entries to share; else one thread. The
    same iterates as grid_epoch, for any T."""
    cdef Py_ssize_t it, r
    cdef int64_t lo, hi
    cdef bint team = False
    cdef TeamBarrier bar
    if S.sel == PERMUTATION:
        fisher_yates(S.perm, G.n_grids, S.rng)
    for it in range(G.n_grids):
        G.order[it] = next_grid(S, it, G.n_grids)
        G.claims[it] = 0
    if T > 1:
        for r in range(G.n_grids):
            lo = G.grid_ptr[r]
            hi = G.grid_ptr[r + 1]
            if hi - lo >= 2 and P.indptr[hi] - P.indptr[lo] >= G.par_min:
                team = True
                break
    team_init(&bar)
    if not team:
        grid_team(P, G, 0, 1, &bar)
        return
    with parallel(num_threads=T):
        grid_team(P, G, omp_thread_num(), omp_num_threads(), &bar)


cdef void grid_team(const Prob* P, Grids* G, int tid, int nt, TeamBarrier* bar) noexcept nogil:
    """Thread tid's part (of nt, the team of the epoch's region) of a streamed grid epoch
    over the grids G.order: every thread walks the same grids and phases, each phase's work
    split among the threads (row blocks, bins, chunks of bins) and closed by a barrier of
    the team (rbcd_team.h: it spins briefly before it sleeps, where the wait of a new
    region or an OpenMP barrier under the passive wait policy pays a wake-up; about 128
    phases an epoch at R = 64). Every split is of work whose results do not depend on who
    does it (disjoint rows, partial sums at places fixed by the row blocks, bins computed
    alone), so nt = 1 and any nt give the same iterates."""
    cdef Py_ssize_t it, r
    cdef Py_ssize_t prev = -1  # a streamed grid whose dz is computed but not yet applied
    cdef Py_ssize_t n_blocks = (P.N + G.block - 1) // G.block
    cdef int64_t lo, hi
    cdef int Tg, lanes
    cdef double* part
    for it in range(G.n_grids):
        r = G.order[it]
        lo = G.grid_ptr[r]
        hi = G.grid_ptr[r + 1]
        if hi - lo < 2:  # one bin: a single coordinate step
            if prev >= 0:
                stream_pair(P, G, prev, -1, NULL, 0, 1, n_blocks, tid, nt)
                team_wait(bar, nt)
                prev = -1
            if tid == 0:
                run_order(P, NULL, lo, hi, NULL)
            team_wait(bar, nt)
            continue
        # Every grid streams (on one thread too, it beats per-column steps: the rows are
        # read in order); a grid below par_min entries runs on one thread. The row blocks
        # are fixed by N, so the iterates do not depend on the thread count.
        Tg = nt if P.indptr[hi] - P.indptr[lo] >= G.par_min else 1
        # block partial sums while they cost a fraction of a pass over the rows
        part = G.part if n_blocks * part_stride(hi - lo) <= G.cap else NULL
        if part == NULL:
            # about one row per bin: the bins' own steps (one gather and one add per bin)
            # beat a column pass for the weights plus a row pass for the moves; the same
            # bits (the streamed step would sum each bin over its column here, too). Split
            # across threads in chunks of contiguous bins (team_bin_steps)
            if prev >= 0:
                stream_pair(P, G, prev, -1, NULL, 0, 1, n_blocks, tid, nt)
                team_wait(bar, nt)
                prev = -1
            if tid < Tg:
                team_bin_steps(P, lo, hi, &G.claims[it], Tg)
            team_wait(bar, nt)
            continue
        # apply the pending grid and sum this one in one pass, then the new weights
        lanes = stream_lanes(n_blocks, hi - lo, P.N)
        stream_pair(P, G, prev, r, part, part_stride(hi - lo), lanes, n_blocks, tid, Tg)
        team_wait(bar, nt)
        stream_weights(P, lo, hi, part, lanes, n_blocks, &G.mv, tid, nt)
        team_wait(bar, nt)
        prev = r
    if prev >= 0:
        stream_pair(P, G, prev, -1, NULL, 0, 1, n_blocks, tid, nt)


cdef void team_bin_steps(const Prob* P, Py_ssize_t lo, Py_ssize_t hi, long long* claim,
                         int T) noexcept nogil:
    """One of T threads' steps of the bins lo..hi-1 of one grid (grid_bin_steps' chunks,
    claimed from the counter ``claim``, zero at the start of the epoch); T = 1: all of them."""
    cdef Py_ssize_t n_bins = hi - lo
    cdef long long c, n_chunks
    if T == 1 or n_bins < 2:
        run_order(P, NULL, lo, hi, NULL)
        return
    n_chunks = bin_chunks(P, lo, hi)
    while True:
        c = fetch_add(claim, 1)
        if c >= n_chunks:
            break
        run_order(P, NULL, lo + (n_bins * c) // n_chunks, lo + (n_bins * (c + 1)) // n_chunks,
                  NULL)


cdef inline void stream_pair(const Prob* P, const Grids* G, Py_ssize_t prev, Py_ssize_t r,
                             double* part, Py_ssize_t nb, int lanes, Py_ssize_t n_blocks,
                             int tid, int T) noexcept nogil:
    # thread tid's share (of T; none for tid >= T) of the row blocks' stream_blocks, for the
    # label widths of grids prev and r (-1: none)
    cdef bint wp = prev >= 0 and G.label_wide[prev]
    cdef bint wr = r >= 0 and G.label_wide[r]
    cdef const void* a = <const void*>G.label_ptr[prev] if prev >= 0 else NULL
    cdef const void* b = <const void*>G.label_ptr[r] if r >= 0 else NULL
    cdef Py_ssize_t q0 = n_blocks * tid // T, q1 = n_blocks * (tid + 1) // T
    if tid >= T:
        return
    if not wp and not wr:
        stream_blocks(P, <const uint16_t*>a, &G.mv, <const uint16_t*>b, part, nb, lanes,
                      G.block, q0, q1)
    elif not wp:
        stream_blocks(P, <const uint16_t*>a, &G.mv, <const int32_t*>b, part, nb, lanes,
                      G.block, q0, q1)
    elif not wr:
        stream_blocks(P, <const int32_t*>a, &G.mv, <const uint16_t*>b, part, nb, lanes,
                      G.block, q0, q1)
    else:
        stream_blocks(P, <const int32_t*>a, &G.mv, <const int32_t*>b, part, nb, lanes,
                      G.block, q0, q1)


cdef void _row_sums(const Prob* P, Py_ssize_t a, Py_ssize_t b, double* out) noexcept nogil:
    # rows a..b-1, in order: out[0] = sum s_i loss(p_i, y_i); for the squared loss also
    # out[1] = sum s_i u_i^2 and out[2] = -sum s_i u_i y_i (u = p - y)
    cdef Py_ssize_t i
    cdef double acc = 0.0, uu = 0.0, uy = 0.0, w
    for i in range(a, b):
        w = 1.0 if P.s == NULL else P.s[i]
        acc += w * loss_value(P.loss, P.u[i], P.y[i])
        if P.loss == SQUARED:
            uu += w * P.u[i] * P.u[i]
            uy -= w * P.u[i] * P.y[i]
    out[0] = acc
    out[1] = uu
    out[2] = uy


cdef void _norm_sums(const Prob* P, Py_ssize_t a, Py_ssize_t b, double* out) noexcept nogil:
    # out[0] = sum |w_j|, out[1] = sum w_j^2 over columns a..b-1, in order
    cdef Py_ssize_t j
    cdef double l1 = 0.0, l2 = 0.0
    for j in range(a, b):
        l1 += fabs(P.rec[j].w)
        l2 += P.rec[j].w * P.rec[j].w
    out[0] = l1
    out[1] = l2


# ---------------------------------------------------------------------------------------
# Objective and convergence (docs/design.md contract 8; paper eq. 23), free functions of the state

cdef double intercept_grad(const Prob* P) noexcept nogil:
    # numpy: (s * loss'(p, y)).sum() / S
    cdef Py_ssize_t i
    cdef double acc = 0.0
    cdef const double* s = P.s
    cdef const double* dv = P.dv
    if s == NULL:
        for i in range(P.N):
            acc += dv[i]
    else:
        for i in range(P.N):
            acc += s[i] * dv[i]
    return acc / P.S


cdef Py_ssize_t column_blocks(const int64_t* indptr, Py_ssize_t D, int64_t* out) noexcept nogil:
    """The column blocks of the passes over the columns: block q holds the columns
    out[q] .. out[q + 1] - 1, each block as many columns as fit within COL_BLOCK columns
    and COL_BLOCK_ENTRIES stored entries (at least one). Returns the number of blocks;
    ``out`` NULL only counts them, else receives n + 1 boundaries. Blocks of a fixed
    matrix, so that block sums come out the same for every thread count."""
    cdef Py_ssize_t n = 0, a = 0, b
    if out != NULL:
        out[0] = 0
    while a < D:
        b = a + 1
        while b < D and b - a < COL_BLOCK and indptr[b + 1] - indptr[a] <= COL_BLOCK_ENTRIES:
            b += 1
        n += 1
        if out != NULL:
            out[n] = b
        a = b
    return n


cdef void row_sums(const Prob* P, Py_ssize_t rb, int T, double* out) noexcept nogil:
    # out = [sum s loss, sum s u^2, -sum s u y], summed in fixed blocks of rb rows (partial
    # sums added in block order): the same for every thread count. The rows go in the
    # streamed grid step's blocks when it has them, so that each thread reads the rows it
    # owns there.
    cdef Py_ssize_t q, k
    cdef Py_ssize_t nbr = (P.N + rb - 1) // rb
    cdef double* part = <double*>malloc((3 * nbr + 1) * sizeof(double))
    for k in range(3):
        out[k] = 0.0
    if part == NULL:
        return
    for q in prange(nbr, num_threads=row_threads(P, T), schedule="static"):
        _row_sums(P, q * rb, min(P.N, (q + 1) * rb), &part[3 * q])
    for q in range(nbr):
        for k in range(3):
            out[k] += part[3 * q + k]
    free(part)


cdef void _scan_block(const Prob* P, int check, Py_ssize_t a, Py_ssize_t b, double* score,
                      double* out) noexcept nogil:
    # columns a..b-1, in order: score[j] = |g_j| (gap) or the subgradient v_j; out[0] = the
    # largest score, out[1] = sum |w_j|, out[2] = sum w_j^2 (the order of _norm_sums)
    cdef Py_ssize_t j
    cdef double gj, wj, v, vmax = 0.0, l1 = 0.0, l2 = 0.0
    for j in range(a, b):
        gj = col_grad(P, j)
        wj = P.rec[j].w
        l1 += fabs(wj)
        l2 += wj * wj
        v = fabs(gj) if check == DUALITY_GAP else violation(P, j, gj)
        score[j] = v
        if v > vmax:
            vmax = v
    out[0] = vmax
    out[1] = l1
    out[2] = l2


cdef double scan_columns(const Prob* P, int check, double* score, int T,
                         double* norms) noexcept nogil:
    """One pass over all columns, block by block (column_blocks): the scores (|g_j| for
    the gap, v_j for the subgradient) into score[j], their maximum (returned), and
    norms = [||w||_1, ||w||^2] summed as objective_sums sums them (the same bits). One
    read of each column record serves the gradient and the norms."""
    cdef Py_ssize_t q
    cdef double vmax = 0.0
    cdef double* part = <double*>malloc((3 * P.n_cblk + 1) * sizeof(double))
    norms[0] = 0.0
    norms[1] = 0.0
    if part == NULL:
        return NAN
    for q in prange(P.n_cblk, num_threads=T, schedule="dynamic"):
        _scan_block(P, check, P.cblk[q], P.cblk[q + 1], score, &part[3 * q])
    for q in range(P.n_cblk):
        if part[3 * q] > vmax:
            vmax = part[3 * q]
        norms[0] += part[3 * q + 1]
        norms[1] += part[3 * q + 2]
    free(part)
    return vmax


cdef void objective_sums(const Prob* P, Py_ssize_t rb, int T, double* out) noexcept nogil:
    # out = [sum s loss, sum s u^2, -sum s u y, ||w||_1, ||w||^2]: row_sums, then the norms
    # over the column blocks (partial sums added in block order): the same for every T
    cdef Py_ssize_t q
    cdef double* part = <double*>malloc((2 * P.n_cblk + 1) * sizeof(double))
    row_sums(P, rb, T, out)
    out[3] = 0.0
    out[4] = 0.0
    if part == NULL:
        return
    for q in prange(P.n_cblk, num_threads=T if P.D >= ROW_PAR_MIN else 1, schedule="static"):
        _norm_sums(P, P.cblk[q], P.cblk[q + 1], &part[2 * q])
    for q in range(P.n_cblk):
        out[3] += part[2 * q]
        out[4] += part[2 * q + 1]
    free(part)


cdef inline double violation(const Prob* P, Py_ssize_t j, double gj) noexcept nogil:
    # minimum-norm subgradient |g_j + lam1 sign(w_j)|, or max(|g_j| - lam1, 0) at w_j = 0
    cdef double wj = P.rec[j].w, v
    if wj > 0:
        return fabs(gj + P.lam1)
    if wj < 0:
        return fabs(gj - P.lam1)
    v = fabs(gj) - P.lam1
    return v if v > 0 else 0.0


cdef double check_result(const Prob* P, int check, bint fit_intercept, double vmax,
                         const double* sums, bint lower) noexcept nogil:
    """The convergence value from the largest score ``vmax`` (dn = max_j |g_j| for the gap)
    and the objective's sums at the same state (objective_sums).

    ``lower`` False: the value itself (vmax over all columns). ``lower`` True: vmax over a
    few columns only, and the result a certified lower bound on the full value. Subgradient:
    the max of v_j over the listed columns (and |g_b|) is <= the full max. Gap: dn >= dn_s
    (the listed columns' max), so the full check's dual scaling c = min(1, lam1 / dn) lies
    in (0, c_s], c_s = min(1, lam1 / dn_s); the gap is a convex quadratic in c
    (``gap_at``), and its minimum over [0, c_s] bounds it."""
    cdef double rn2, ry, l1, l2, c, A, v
    if check == DUALITY_GAP:
        # Rn2 = (1/S) sum s r^2, ry = (1/S) sum s r y (r = y - p = -u)
        rn2 = sums[1] / P.S
        ry = sums[2] / P.S
        l1 = sums[3]
        l2 = sums[4]
        c = P.lam1 / vmax if vmax > P.lam1 else 1.0
        if lower:
            # argmin over [0, c] of gap_at: A (1 + c^2) - c ry + const
            A = 0.5 * (rn2 + P.lam2 * l2)
            v = ry / (2.0 * A) if A > 0 else c
            c = c if v > c else (0.0 if v < 0 else v)
        return gap_at(c, rn2, ry, l1, l2, P.lam1, P.lam2)
    if fit_intercept:
        v = fabs(intercept_grad(P))
        if v > vmax:
            vmax = v
    return vmax


cdef double listed_scores(const Prob* P, int check, const int64_t* cols, Py_ssize_t n,
                          double* score, int T) noexcept nogil:
    # the scores of the columns cols[0..n-1] into score[k] (as scan_columns), their max
    cdef Py_ssize_t k
    cdef double vmax = 0.0
    cdef int64_t entries = 0
    for k in range(n):
        entries += P.rec[cols[k]].end - P.rec[cols[k]].start
    # the columns' gradients in parallel (each summed alone: the same for any T)
    for k in prange(n, num_threads=T if entries >= PAR_MIN_ENTRIES else 1,
                    schedule="guided"):
        score[k] = col_grad(P, cols[k])
    for k in range(n):
        score[k] = fabs(score[k]) if check == DUALITY_GAP else violation(P, cols[k], score[k])
        if score[k] > vmax:
            vmax = score[k]
    return vmax


cdef inline double gap_at(double c, double rn2, double ry, double l1, double l2, double lam1,
                         double lam2) noexcept nogil:
    """The duality gap of the squared loss at the dual point theta = c r (r = y - p; docs/design.md
    contract 8, the dual of paper eq. 23): with Rn2 = (1/S) sum s r^2, ry = (1/S) sum s r y,

        gap(c) = 1/2 Rn2 (1 + c^2) + lam1 ||w||_1 - c ry + 1/2 lam2 (1 + c^2) ||w||^2,

    a convex quadratic in c. The convergence test evaluates it at c = min(1, lam1 / dn),
    dn = max_j |g_j| (``check_value``)."""
    return (0.5 * rn2 * (1.0 + c * c) + lam1 * l1 - c * ry
            + 0.5 * lam2 * (1.0 + c * c) * l2)


# ---------------------------------------------------------------------------------------

cdef class CDProblem:
    """One coordinate descent problem (one target / one one-vs-rest class).

    Holds the arrays (so the raw pointers in ``P`` stay valid) and the random streams.
    Parameters are validated by ``rbcd.solvers.cd``; this class trusts them.
    """
    cdef Prob P
    cdef Grids G                    # grid structure and streamed-step buffers (grid modes)
    cdef object _keep               # the arrays behind the pointers
    cdef object rec_buf             # bytes behind P.rec (64-byte aligned records)
    cdef public object u_arr
    cdef object dv_arr              # loss'(p, y) (N,); u_arr itself for the squared loss
    cdef object ex_arr              # exp(y p) (N,) for the logistic loss with y = +-1, or None
    cdef public double b
    cdef double beta
    cdef bint fit_intercept
    cdef Selection selection
    cdef uint64_t rng
    cdef object thread_states       # uint64 (T,) Hogwild streams
    cdef public object tx_stats     # int64 (T, 2): the last Hogwild epoch's transactions,
                                    # started and aborted, per thread
    cdef object perm_arr            # int64 permutation (D, or R in grid mode)
    cdef object grid_ptr            # int64 (R + 1,) or None
    cdef object scratch             # float64 (D,)
    cdef object grid_delta          # float64 (max bins per grid + 1,) the grid's moves dz
    cdef object grid_labels         # R arrays (N,), uint16 / int32: bin of each row, or None
    cdef object grid_order          # int64 (R,) the epoch's grid sequence
    cdef object grid_claims         # longlong (R,) the chunks claimed per grid (grid_team)
    cdef object grid_label_ptr      # uint64 (R,) addresses of the label arrays
    cdef object grid_label_wide     # uint8 (R,) 1 where a grid's labels are int32
    cdef object grid_part           # float64 block partial sums of the streamed grid step
    cdef Py_ssize_t grid_block
    cdef int64_t grid_par_min       # a grid runs on several threads from this many entries
    cdef double max_partials        # streamed step: block partial sums while they need at
                                    # most max_partials * N doubles, else the bins' own steps
    cdef int txmode                 # Hogwild adds: TX_RTM, TX_CAS or TX_FAIL
    cdef double sums[5]             # objective_sums at the current state when sums_ok
    cdef bint sums_ok

    def __init__(self, indptr, indices, data, double zval, y, s, double S, M, int loss,
                 double lam1, double lam2, bint fit_intercept, int selection,
                 uint64_t seed, grid_ptr=None, grid_labels=None, int64_t grid_par_min=32768,
                 double max_partials=2.0, int tx=TX_AUTO):
        """Arrays as validated by rbcd.solvers.cd. ``grid_labels`` None: no streamed grid
        step (per-bin updates). The last three arguments are the path choices of
        rbcd.solvers._paths.CDPaths; they never change the iterates (grid mode) or lose an
        update (Hogwild)."""
        cdef const int64_t[::1] indptr_v = indptr
        cdef const double[::1] y_v = y
        cdef const double[::1] M_v = M
        cdef unsigned char[::1] rb
        cdef Py_ssize_t j, off
        cdef const double[::1] data_v
        cdef const double[::1] s_v
        cdef const int32_t[::1] i32
        cdef const int64_t[::1] i64
        N = y.shape[0]
        D = indptr.shape[0] - 1
        self.u_arr = _aligned_zeros(N)  # 64-byte aligned: grid mode's row blocks split on lines
        cdef double[::1] u_v = self.u_arr
        # column records, aligned to 64 bytes so that a record never straddles a cache line
        self.rec_buf = np.zeros(max(D, 1) * sizeof(ColRec) + 64, dtype=np.uint8)
        rb = self.rec_buf
        off = (64 - (<size_t>&rb[0]) % 64) % 64
        self.P.rec = <ColRec*>&rb[off]
        for j in range(D):
            self.P.rec[j].start = indptr_v[j]
            self.P.rec[j].end = indptr_v[j + 1]
            self.P.rec[j].M = M_v[j]
            self.P.rec[j].w = 0.0
        self.P.N = N
        self.P.D = D
        self.P.indptr = &indptr_v[0]
        n_cblk = column_blocks(&indptr_v[0], D, NULL)
        cblk = np.zeros(n_cblk + 1, dtype=np.int64)
        cdef int64_t[::1] cblk_v = cblk
        column_blocks(&indptr_v[0], D, &cblk_v[0])
        self.P.cblk = &cblk_v[0]
        self.P.n_cblk = n_cblk
        self._keep = (indptr, indices, data, y, s, M, cblk)
        self.P.ind32 = NULL
        self.P.ind64 = NULL
        if indices.dtype == np.int64:
            i64 = indices
            self.P.ind64 = &i64[0] if i64.shape[0] > 0 else NULL
        else:
            i32 = indices
            self.P.ind32 = &i32[0] if i32.shape[0] > 0 else NULL
        if self.P.ind32 == NULL and self.P.ind64 == NULL:
            # no stored entries: every column loop is empty, any valid pointer does
            dummy = np.zeros(1, dtype=np.int64)
            self._keep = self._keep + (dummy,)
            i64 = dummy
            self.P.ind64 = &i64[0]
        if data is None:
            self.P.data = NULL
        else:
            data_v = data
            self.P.data = &data_v[0] if data_v.shape[0] > 0 else NULL
        self.P.zval = zval
        self.P.y = &y_v[0]
        if s is None:
            self.P.s = NULL
        else:
            s_v = s
            self.P.s = &s_v[0]
        self.P.S = S
        self.P.u = &u_v[0]
        cdef double[::1] dv_v
        if loss == SQUARED:
            self.dv_arr = self.u_arr
        else:
            self.dv_arr = _aligned_zeros(N)
        dv_v = self.dv_arr
        self.P.dv = &dv_v[0]
        cdef double[::1] ex_v
        self.ex_arr = None
        self.P.ex = NULL
        if loss == LOGISTIC and N > 0 and bool(np.all(np.abs(np.asarray(y)) == 1.0)):
            self.ex_arr = _aligned_zeros(N)
            ex_v = self.ex_arr
            self.P.ex = &ex_v[0]
        self.P.loss = <Loss>loss
        self.P.lam1 = lam1
        self.P.lam2 = lam2
        self.beta = loss_beta(<Loss>loss)
        self.fit_intercept = fit_intercept
        self.selection = <Selection>selection
        self.rng = seed
        self.b = 0.0
        self.grid_ptr = grid_ptr
        n_perm = D if grid_ptr is None else grid_ptr.shape[0] - 1
        self.perm_arr = np.arange(n_perm, dtype=np.int64)
        self.scratch = np.zeros(D, dtype=np.float64)
        self.thread_states = np.zeros(0, dtype=np.uint64)
        self.tx_stats = np.zeros((0, 2), dtype=np.int64)
        self.grid_delta = None
        self.grid_labels = grid_labels
        self.grid_part = None
        self.grid_order = None
        self.grid_claims = None
        self.grid_par_min = grid_par_min
        self.max_partials = max_partials
        cdef const int64_t[::1] gpv
        self.G.n_grids = 0
        self.G.grid_ptr = NULL
        self.G.par_min = grid_par_min
        self.G.label_ptr = NULL
        self.G.label_wide = NULL
        self.G.mv.dz = NULL
        self.G.mv.fac = NULL
        self.G.part = NULL
        self.G.cap = 0
        self.G.block = 0
        self.G.order = NULL
        if grid_ptr is not None:
            gpv = grid_ptr
            self.G.n_grids = gpv.shape[0] - 1
            self.G.grid_ptr = &gpv[0]
        if tx == TX_ABORT:
            self.txmode = TX_FAIL
        elif tx == TX_AUTO and _RTM_USABLE:
            self.txmode = TX_RTM
        else:
            self.txmode = TX_CAS
        # u = p - y at w = 0, b = 0 for the squared loss; p = 0 otherwise
        if self.P.loss == SQUARED:
            self.u_arr[:] = -np.asarray(y)
        refresh_derivs(&self.P, 0, N)

    def set_thread_seeds(self, seeds):
        """Hogwild streams, one uint64 seed per thread."""
        self.thread_states = np.array(seeds, dtype=np.uint64)

    @property
    def w_arr(self):
        """A copy of the current coefficients w (D,)."""
        out = np.empty(self.P.D, dtype=np.float64)
        cdef double[::1] o = out
        cdef Py_ssize_t j
        for j in range(self.P.D):
            o[j] = self.P.rec[j].w
        return out

    def start_from(self, w0, double b0):
        """Warm start: w = w0, b = b0, and the state rebuilt: p = Z w0 + b0 (u = p - y)."""
        cdef const double[::1] w0v = np.ascontiguousarray(w0, dtype=np.float64)
        cdef Py_ssize_t j, i
        cdef double* u = self.P.u
        self.sums_ok = False
        for j in range(self.P.D):
            self.P.rec[j].w = w0v[j]
        self.b = b0
        with nogil:
            for i in range(self.P.N):
                u[i] = 0.0
            for j in range(self.P.D):
                # p += w_j Z[:, j], columns in increasing order
                if self.P.rec[j].w != 0.0:
                    if self.P.ind64 != NULL:
                        _col_axpy(&self.P, self.P.ind64, j, self.P.rec[j].w, NULL)
                    else:
                        _col_axpy(&self.P, self.P.ind32, j, self.P.rec[j].w, NULL)
            for i in range(self.P.N):
                u[i] += b0  # p += b
                if self.P.loss == SQUARED:
                    u[i] -= self.P.y[i]
            refresh_derivs(&self.P, 0, self.P.N)

    def intercept_grad(self):
        """g_b = (1/S) sum_i s_i loss'(p_i, y_i) at the current point."""
        return intercept_grad(&self.P)

    def intercept_step(self, int n_threads=1):
        """b <- b - g_b / beta, p += delta_b (exact for the squared loss); the loss' and the
        logistic state from p afresh (elementwise, in parallel row blocks)."""
        cdef double g, delta, b_new
        cdef int T = self._pass_threads(n_threads)
        self.sums_ok = False
        with nogil:
            g = intercept_grad(&self.P)
            b_new = self.b - g / self.beta
            delta = b_new - self.b
            if delta != 0.0:
                shift_rows(&self.P, delta, T)
        self.b = b_new

    def epoch(self, int mode, int n_threads):
        """D coordinate steps (R grid blocks in grid mode), drawn per ``selection``: one
        call of the mode's epoch function (``serial_epoch``, ``hogwild_epoch``,
        ``grid_epoch`` or ``grid_stream_epoch``) on this problem's state.

        The logistic state exp(y p) (cd_kernels.h) is moved by factors during the epoch and
        computed afresh from p once per epoch: by the intercept step, or here without one."""
        cdef int T = self._pass_threads(n_threads)
        self._epoch(mode, n_threads)
        if self.P.ex != NULL and not self.fit_intercept and not (
                mode == HOGWILD and n_threads > 1):  # (Hogwild's threads refreshed it)
            with nogil:
                shift_rows(&self.P, 0.0, T)

    cdef _epoch(self, int mode, int n_threads):
        cdef Prob* P = &self.P
        cdef Sched S
        cdef int64_t[::1] perm = self.perm_arr
        cdef uint64_t[::1] ts
        cdef long long[:, ::1] txs
        cdef int T = max(1, n_threads)
        self.sums_ok = False
        if P.D == 0:
            return
        S.sel = self.selection
        S.rng = &self.rng
        S.perm = &perm[0]
        if mode == SERIAL:
            if (S.sel == CYCLIC and P.data == NULL and self.grid_ptr is not None
                    and self._grid_labels_ready()):
                # cyclic order over RB columns = grid after grid, each grid's bins in order;
                # a grid's bins touch disjoint rows, so updating them one after another or
                # all from the same predictions is the same step: the streamed grid step
                with nogil:
                    grid_stream_epoch(P, &self.G, &S, 1)
                return
            with nogil:
                serial_epoch(P, &S)
        elif mode == HOGWILD:
            if S.sel == RANDOM and self.thread_states.shape[0] < T:
                raise ValueError("Hogwild needs one seed per thread (set_thread_seeds)")
            ts = self.thread_states if S.sel == RANDOM else np.zeros(T, dtype=np.uint64)
            self.tx_stats = np.zeros((T, 2), dtype=np.int64)
            txs = self.tx_stats
            with nogil:
                hogwild_epoch(P, &S, &ts[0], T, self.txmode, &txs[0, 0])
        else:
            if self.grid_ptr is None:
                raise ValueError("grid mode needs the grid structure (grid_ptr)")
            if P.data == NULL and self._grid_labels_ready():
                with nogil:
                    grid_stream_epoch(P, &self.G, &S, T)
                return
            with nogil:
                grid_epoch(P, &self.G, &S, T)

    cdef bint _grid_labels_ready(self):
        # the streamed grid step's buffers in G, sized on first use; False: no labels given
        cdef Py_ssize_t n_blocks
        cdef uint64_t[::1] lp
        cdef unsigned char[::1] lw
        cdef double[:, ::1] dz
        cdef double[::1] part
        cdef int64_t[::1] order
        cdef long long[::1] claims
        if self.grid_labels is None or self.P.N == 0:
            return False
        if self.grid_part is not None:
            return True
        from rbcd.binning._binning import _label_addresses   # (no import cycle at load)
        gp = np.asarray(self.grid_ptr)
        self.grid_label_ptr, self.grid_label_wide = _label_addresses(
            self.grid_labels, np.ascontiguousarray(gp, dtype=np.int64), self.P.N)
        widths = np.diff(gp)
        max_bins = int(widths.max())
        # the moves dz (row 0; [max_bins]: sentinel, 0) and the logistic factors (rows 1, 2,
        # read as one array of pairs)
        self.grid_delta = np.zeros((3 if self.P.ex != NULL else 1, max_bins + 1),
                                   dtype=np.float64)
        # row blocks, fixed by N alone: a power of two of them (1 .. 16, about 16384 rows or
        # more each, so that 2, 4, 8, 16 threads share them evenly), each a multiple of 8 rows
        # (u is 64-byte aligned: no two blocks share a cache line)
        n_blocks = 1
        while n_blocks < 16 and self.P.N >= 2 * n_blocks * 16384:
            n_blocks *= 2
        self.grid_block = ((self.P.N + n_blocks - 1) // n_blocks + 7) // 8 * 8
        n_blocks = (self.P.N + self.grid_block - 1) // self.grid_block
        cap = int(self.max_partials * self.P.N)
        need = [stream_lanes(n_blocks, int(w), self.P.N) * n_blocks * part_stride(int(w))
                for w in widths if n_blocks * part_stride(int(w)) <= cap]
        self.grid_part = _aligned_zeros(max(max(need, default=0), 1))
        self.grid_order = np.zeros(max(len(widths), 1), dtype=np.int64)
        self.grid_claims = np.zeros(max(len(widths), 1), dtype=np.longlong)
        lp = self.grid_label_ptr
        lw = self.grid_label_wide
        dz = self.grid_delta
        part = self.grid_part
        order = self.grid_order
        claims = self.grid_claims
        self.G.label_ptr = &lp[0]
        self.G.label_wide = &lw[0]
        self.G.mv.dz = &dz[0, 0]
        if self.P.ex != NULL:
            self.G.mv.fac = &dz[1, 0]
        self.G.part = &part[0]
        self.G.cap = cap  # the rule (one lane's partial sums); the buffer holds the lanes
        self.G.block = self.grid_block
        self.G.order = &order[0]
        self.G.claims = &claims[0]
        return True

    def objective(self, int n_threads=1):
        """P(w, b) = (1/S) sum s_i loss(p_i, y_i) + lam1 ||w||_1 + lam2/2 ||w||^2 (its sums
        in fixed blocks, so the value does not depend on ``n_threads``). Free after a
        ``convergence`` or ``lower_bound`` at the same state, which keep the sums."""
        cdef double* out = self.sums
        cdef int T = self._pass_threads(n_threads)
        if not self.sums_ok:
            with nogil:
                objective_sums(&self.P, self._row_block(), T, out)
            self.sums_ok = True
        return out[0] / self.P.S + self.P.lam1 * out[3] + 0.5 * self.P.lam2 * out[4]

    def gradients(self, int n_threads):
        """g (D,), g_j = (1/S) sum_i s_i loss'(p_i, y_i) z_ij + lam2 w_j, a parallel pass."""
        cdef double[::1] g = self.scratch
        cdef Py_ssize_t j
        cdef int T = self._pass_threads(n_threads)
        with nogil:
            for j in prange(self.P.D, num_threads=T, schedule="guided"):
                g[j] = col_grad(&self.P, j)
        return np.asarray(g).copy()

    cdef Py_ssize_t _row_block(self) noexcept nogil:
        # rows per block of the objective's sums: the streamed grid step's blocks when it
        # has them (each thread reads the rows it owns there), else OBJ_BLOCK
        return self.grid_block if self.grid_block > 0 else OBJ_BLOCK

    cdef int _pass_threads(self, int n_threads):
        if self.P.D == 0 or self.P.indptr[self.P.D] < PAR_MIN_ENTRIES:
            return 1
        return max(1, n_threads)

    def convergence(self, int check, int n_threads):
        """The raw convergence value: duality gap, or largest minimum-norm subgradient.

        Checked after the intercept step (docs/internals.md, "Convergence"). Leaves the
        per-column score (|g_j| for the gap, the subgradient v_j otherwise) in ``scores()``,
        and the objective's sums (``objective`` is then free): one pass over the columns
        for both (``scan_columns``).
        """
        cdef double[::1] g = self.scratch
        cdef int T = self._pass_threads(n_threads)
        cdef double vmax, out
        cdef double norms[2]
        if self.P.D == 0:
            g = np.zeros(1)
        with nogil:
            vmax = scan_columns(&self.P, check, &g[0], T, norms)
            if not self.sums_ok:
                row_sums(&self.P, self._row_block(), T, self.sums)
                self.sums[3] = norms[0]
                self.sums[4] = norms[1]
                self.sums_ok = True
            out = check_result(&self.P, check, self.fit_intercept, vmax, self.sums, False)
        return out

    def scores(self):
        """Per-column scores of the last full ``convergence`` call (a view)."""
        return self.scratch

    def lower_bound(self, int check, cols, int n_threads=1):
        """A certified lower bound on ``convergence(check)`` from the columns ``cols`` only
        (``check_result``). Cost: the columns' entries plus O(N + D) (the objective's sums,
        kept for ``objective``)."""
        cdef const int64_t[::1] cv = cols
        cdef int T = self._pass_threads(n_threads)
        cdef Py_ssize_t n = cv.shape[0]
        gbuf = np.empty(max(n, 1), dtype=np.float64)
        cdef double[::1] g = gbuf
        cdef double vmax, out
        if n == 0:
            cv = np.zeros(1, dtype=np.int64)
        with nogil:
            if not self.sums_ok:
                objective_sums(&self.P, self._row_block(), T, self.sums)
                self.sums_ok = True
            vmax = listed_scores(&self.P, check, &cv[0], n, &g[0], T)
            out = check_result(&self.P, check, self.fit_intercept, vmax, self.sums, True)
        return out

    def predictions(self):
        """p = Z w + b on the training rows."""
        if self.P.loss == SQUARED:
            return self.u_arr + np.asarray(<object>self._keep[3])
        return self.u_arr.copy()


cdef inline bint _ranks_below(const double* sc, int64_t a, int64_t b) noexcept nogil:
    # column a ranks below column b: a smaller score, or an equal score and a larger index
    return sc[a] < sc[b] or (sc[a] == sc[b] and a > b)


cdef void _sift_down(const double* sc, int64_t* heap, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    # restore the min-heap order (heap[0] ranks lowest) below position i
    cdef Py_ssize_t c
    cdef int64_t v = heap[i]
    while 2 * i + 1 < n:
        c = 2 * i + 1
        if c + 1 < n and _ranks_below(sc, heap[c + 1], heap[c]):
            c += 1
        if not _ranks_below(sc, heap[c], v):
            break
        heap[i] = heap[c]
        i = c
    heap[i] = v


def top_columns(const double[::1] scores, Py_ssize_t k):
    """The k highest-ranked columns by score (ties: the smaller index first), best first.

    One pass with a k-entry min-heap: O(D) when most scores fall below the k-th, as after
    a few epochs; numpy's argpartition + argsort cost several times more on large D.
    """
    cdef Py_ssize_t D = scores.shape[0], n = 0, i, m
    k = max(0, min(k, D))
    out = np.empty(k, dtype=np.int64)
    if k == 0:
        return out
    cdef int64_t[::1] heap = out
    cdef const double* sc = &scores[0]
    cdef int64_t j, t
    with nogil:
        for j in range(D):
            if n < k:
                heap[n] = j
                n += 1
                if n == k:
                    for i in range(k // 2 - 1, -1, -1):
                        _sift_down(sc, &heap[0], k, i)
            elif _ranks_below(sc, heap[0], j):
                heap[0] = j
                _sift_down(sc, &heap[0], k, 0)
        # heap sort: repeatedly move the lowest-ranked to the end, leaving best first
        for m in range(k - 1, 0, -1):
            t = heap[0]
            heap[0] = heap[m]
            heap[m] = t
            _sift_down(sc, &heap[0], m, 0)
    return out


def _aligned_zeros(Py_ssize_t n):
    """float64 zeros (n,) starting on a 64-byte boundary."""
    buf = np.zeros(n + 8, dtype=np.float64)
    off = (-(buf.ctypes.data % 64) // 8) % 8
    return buf[off:off + n]


def column_sums(indptr, indices, data, double zval, v, int n_threads):
    """out_j = sum_i v_i z_ij over the stored entries of column j (CSC), a parallel pass."""
    cdef const int64_t[::1] ip = indptr
    cdef const double[::1] vv = v
    cdef Py_ssize_t D = ip.shape[0] - 1
    out = np.zeros(D, dtype=np.float64)
    cdef double[::1] o = out
    cdef const double[::1] dv
    cdef const double* dp = NULL
    cdef int T = max(1, n_threads)
    if indices.shape[0] < PAR_MIN_ENTRIES:
        T = 1
    if data is not None:
        dv = data
        if dv.shape[0] > 0:
            dp = &dv[0]
    if indices.shape[0] == 0 or D == 0:
        return out
    if indices.dtype == np.int64:
        _column_sums[int64_t](&ip[0], indices, dp, zval, &vv[0], &o[0], D, T)
    else:
        _column_sums[int32_t](&ip[0], indices, dp, zval, &vv[0], &o[0], D, T)
    return out


cdef void _column_sums(const int64_t* ip, const idx_t[::1] ind, const double* data, double zval,
                       const double* v, double* out, Py_ssize_t D, int T):
    cdef Py_ssize_t j
    cdef int64_t k
    cdef double acc
    with nogil:
        for j in prange(D, num_threads=T, schedule="guided"):
            # numpy: out[j] = (v[rows] * z[rows, j]).sum()
            acc = 0.0
            if data == NULL:
                for k in range(ip[j], ip[j + 1]):
                    acc = acc + v[ind[k]]
                out[j] = acc * zval
            else:
                for k in range(ip[j], ip[j + 1]):
                    acc = acc + v[ind[k]] * data[k]
                out[j] = acc


def column_sq_sums(indptr, indices, data, double zval, s, int n_threads):
    """S h_j = sum_i s_i z_ij^2 over the stored entries of column j (``s`` of length N)."""
    if data is None:
        return column_sums(indptr, indices, None, zval * zval, s, n_threads)
    return column_sums(indptr, indices, np.square(data), 1.0, s, n_threads)


def duality_gap(double c, double rn2, double ry, double l1, double l2, double lam1,
                double lam2):
    """``gap_at`` for Python callers (rbcd.solvers._stopping, the distributed solver): the
    squared loss's duality gap at the dual scaling c from Rn2, ry, ||w||_1 and ||w||^2."""
    return gap_at(c, rn2, ry, l1, l2, lam1, lam2)
