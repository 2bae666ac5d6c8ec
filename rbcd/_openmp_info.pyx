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
