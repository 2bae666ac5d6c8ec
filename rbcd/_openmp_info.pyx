"""Build-time OpenMP facts, readable from Python, and a memory bandwidth probe."""
from cython.parallel cimport prange

from rbcd._openmp cimport omp_max_threads, openmp_enabled


def openmp_is_enabled():
    """True if the extensions were compiled with OpenMP."""
    return bool(openmp_enabled())


def max_threads():
    """omp_get_max_threads() of the calling thread (1 without OpenMP).

    This honours OMP_NUM_THREADS and threadpoolctl limits set in the calling
    thread.
    """
    return omp_max_threads()


# ---------------------------------------------------------------------------------------
# Memory bandwidth probe (benchmarks/compare_threads.py): STREAM's triad on this
# process's own OpenMP team, so that a stage's time can be set against what the machine
# streams with the same threads. Both loops use the same static schedule, so the thread
# that first touches a page in ``first_touch`` is the one the triad gives it to.

def first_touch(double[::1] a, double value, int n_threads):
    """a[:] = value, split across ``n_threads`` threads as :func:`stream_triad` splits
    it (static schedule): each page is placed by the thread that will stream it."""
    cdef Py_ssize_t i, n = a.shape[0]
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    if n == 0:
        return
    cdef double *ap = &a[0]
    with nogil:
        for i in prange(n, schedule="static", num_threads=n_threads):
            ap[i] = value


def stream_triad(double[::1] a, const double[::1] b, const double[::1] c, double s,
                 int n_threads):
    """a = b + s * c (STREAM's triad) on ``n_threads`` threads, static schedule.

    STREAM counts 3 * 8 bytes per element (two reads, one write; the write-allocate read
    of ``a`` not counted), and so does the benchmark that calls this."""
    cdef Py_ssize_t i, n = a.shape[0]
    if b.shape[0] != n or c.shape[0] != n:
        raise ValueError("stream_triad: a, b and c must have the same length")
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    if n == 0:
        return
    cdef double *ap = &a[0]
    cdef const double *bp = &b[0]
    cdef const double *cp = &c[0]
    with nogil:
        for i in prange(n, schedule="static", num_threads=n_threads):
            ap[i] = bp[i] + s * cp[i]


# ---------------------------------------------------------------------------------------
# Core throughput probe (benchmarks/compare_threads.py): work that touches no shared
# memory, so that its speedup at T threads is the most any kernel can get from T of this
# machine's cores (their clock under load, shared physical cores of a VM), the ceiling
# against which the stages' speedups are read.

from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free


cdef inline uint64_t _mix(uint64_t h) noexcept nogil:
    # a 64-bit finaliser (xor-shift, multiply, xor-shift): one dependent chain
    h ^= h >> 33
    h *= <uint64_t> 0xff51afd7ed558ccd
    h ^= h >> 29
    return h


cdef uint64_t _chain(Py_ssize_t steps, uint64_t seed, Py_ssize_t table_words) noexcept nogil:
    """``steps`` links of a dependent chain; with ``table_words`` (a power of two) each
    link also reads and increments a word of a private table of that size at the
    chain's value (a hash probe's access, at the latency of the cache that holds the
    table). Returns the chain's end, 0 if the table could not be allocated (core_work
    then raises)."""
    cdef uint64_t h = seed * <uint64_t> 0x9e3779b97f4a7c15 + 1
    cdef uint64_t mask
    cdef uint64_t *tab
    cdef Py_ssize_t k
    if table_words <= 0:
        for k in range(steps):
            h = _mix(h)
        return h
    tab = <uint64_t *> calloc(table_words, sizeof(uint64_t))
    if tab == NULL:
        return 0
    mask = <uint64_t> (table_words - 1)
    for k in range(steps):
        h = _mix(h ^ tab[h & mask])
        tab[h & mask] += 1
    free(tab)
    return h


def core_work(Py_ssize_t steps, int n_threads, Py_ssize_t table_words=0):
    """``steps`` links of dependent chains (see ``_chain``), split evenly over
    ``n_threads`` threads, one chain each: the time at T threads against 1 thread is the
    machine's compute speedup (no shared data; with ``table_words`` a private table per
    thread, e.g. 32,768 words = 256 KiB to stay in a core's L2). Returns the xor of the
    chains' ends (a checksum that keeps the work from being optimised away)."""
    cdef int t, bad = 0
    cdef Py_ssize_t per
    cdef uint64_t acc = 0, end
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    if steps < 0 or table_words < 0 or (table_words & (table_words - 1)) != 0:
        raise ValueError("core_work: steps >= 0 and table_words a power of two (or 0)")
    per = steps // n_threads
    with nogil:
        for t in prange(n_threads, schedule="static", num_threads=n_threads):
            end = _chain(per, <uint64_t> t, table_words)
            acc ^= end
            if end == 0 and table_words > 0:
                bad += 1
    if bad:
        raise MemoryError(f"core_work: cannot allocate a table of {table_words} words")
    return acc
