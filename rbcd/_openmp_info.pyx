"""Build-time OpenMP facts, readable from Python."""
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
