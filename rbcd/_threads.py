"""Resolve ``n_jobs`` into a thread count, the one place that does it."""
import os
from contextlib import contextmanager

from threadpoolctl import threadpool_limits

from ._openmp_info import max_threads, openmp_is_enabled


def _cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def effective_n_threads(n_jobs=None):
    """Number of OpenMP threads to use for ``n_jobs``.

    None: the OpenMP default of the calling thread (omp_get_max_threads(),
    which honours OMP_NUM_THREADS and threadpoolctl limits). A positive int:
    that many threads. A negative int counts back from the usable cores
    (-1 = all, -2 = all but one). 0 is an error. Without OpenMP, always 1.
    """
    if n_jobs is not None:
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int,)) and not hasattr(n_jobs, "__index__"):
            raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")
        n_jobs = int(n_jobs)
        if n_jobs == 0:
            raise ValueError("n_jobs == 0 has no meaning; use None, a positive or a negative integer")
    if not openmp_is_enabled():
        return 1
    if n_jobs is None:
        return max(1, max_threads())
    if n_jobs < 0:
        return max(1, _cpu_count() + 1 + n_jobs)
    return n_jobs


@contextmanager
def limit_blas(n=1):
    """Cap BLAS threads while our own OpenMP regions run (no oversubscription)."""
    with threadpool_limits(limits=n, user_api="blas"):
        yield
