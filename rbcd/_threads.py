"""Resolve ``n_jobs`` into a thread count, the one place that does it.

Every rbcd kernel runs its OpenMP parallel regions with the count that
:func:`effective_n_threads` returns, so this module is also where rbcd is made safe
to use in a process created by ``fork``.

Fork safety
-----------
GNU OpenMP (libgomp, the runtime gcc builds link) keeps a pool of worker threads
after the first parallel region that uses more than one thread. ``fork`` copies only
the calling thread, but the child's libgomp still believes the pool exists, so the
child's first parallel region with more than one thread waits forever for workers
that are not there. Linux ``multiprocessing`` forks by default (``Pool``,
``Process``, ``concurrent.futures.ProcessPoolExecutor`` before Python 3.14), so a
script that fits an rbcd model and then starts a pool would hang in its workers.

rbcd avoids the hang: an ``os.register_at_fork`` hook marks a process forked after
this process had asked for more than one OpenMP thread, and in such a child
:func:`effective_n_threads` returns 1, whatever ``n_jobs`` says. A parallel region
with a single thread does not touch libgomp's pool, so the child runs serially and
correctly (the results are those of ``n_jobs=1``: identical for the binning, the CG
solver and the grid-block CD mode; Hogwild is serial coordinate descent). The first
time a request for more threads is cut to one, a ``RuntimeWarning`` says so.

To use several threads in worker processes, start them with the "spawn" or
"forkserver" method, which begin from a fresh interpreter::

    import multiprocessing as mp
    with mp.get_context("forkserver").Pool(4) as pool:   # or "spawn"
        ...

(``joblib``'s default loky backend already starts fresh workers.) A process that
forks before rbcd has used more than one thread is not affected.
"""
import os
import threading
from contextlib import contextmanager

import numpy as np
from threadpoolctl import ThreadpoolController

from ._openmp_info import max_threads, openmp_is_enabled
from ._warnings import warn as warn_user


class _ForkState:
    """What this process knows about its OpenMP thread pool (process state, set by
    :func:`effective_n_threads` and by the fork hook, read by nothing else).

    ``pool_may_exist``: this process asked OpenMP for more than one thread, so libgomp
    may hold a worker pool that a forked child would not inherit.
    ``forked_child``: this process was forked while ``pool_may_exist`` held in its
    parent (or an earlier ancestor): its parallel regions must use one thread.
    ``warned``: the one RuntimeWarning about that has been given in this process.
    """

    __slots__ = ("pool_may_exist", "forked_child", "warned")

    def __init__(self):
        self.pool_may_exist = False
        self.forked_child = False
        self.warned = False

    def after_fork_in_child(self):
        if self.pool_may_exist:
            self.forked_child = True
        self.warned = False


_FORK_STATE = _ForkState()
if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_FORK_STATE.after_fork_in_child)


def _cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _other_runnable():
    """Tasks of other processes that are running or waiting for a core now, or None
    where that is unknown: the runnable count of ``/proc/loadavg`` (Linux; its fourth
    field, an instant count, not an average) less this process's runnable threads (the
    caller, and BLAS or OpenMP threads that still spin after their last call: this
    process's own work, not a reason to use fewer threads). Only where this process may
    run on every core of the machine: in a container bound to some of the host's cores
    the count is the host's, and cannot be split between its cores and ours."""
    if _cpu_count() != (os.cpu_count() or 0):
        return None
    try:
        with open("/proc/loadavg", "rb") as f:
            field = f.read().split()[3]
        runnable = int(field.split(b"/")[0]) - 1
    except (OSError, IndexError, ValueError):
        return None
    if runnable <= 0:
        return 0
    return max(0, runnable - _own_runnable())


def _own_runnable():
    """This process's threads other than the caller in state R (``/proc/self/task``);
    read only when something is runnable besides the caller."""
    me = threading.get_native_id()
    n = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0
    for tid in tasks:
        if tid == str(me):
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:            # the thread ended meanwhile
            continue
        fields = stat[stat.rfind(b")") + 1:].split()
        if fields and fields[0] == b"R":
            n += 1
    return n


def forked_after_threads():
    """True in a process forked after its parent had used OpenMP threads: rbcd runs
    its kernels with one thread here (see the module's notes on fork safety)."""
    return _FORK_STATE.forked_child


def effective_n_threads(n_jobs=None):
    """Number of OpenMP threads to use for ``n_jobs``.

    None: the OpenMP default of the calling thread (omp_get_max_threads(),
    which honours OMP_NUM_THREADS and threadpoolctl limits), less the cores that other
    work keeps busy at this moment (:func:`_other_runnable`; at least 1): a thread team
    on cores that other processes use waits at every barrier for a thread the system
    has paused, and lost to one thread (docs/internals.md, "Threads on a busy
    machine"). Called per stage, so a fit follows the load it meets. A positive int:
    that many threads. A negative int counts back from the usable cores
    (-1 = all, -2 = all but one). 0 is an error. Without OpenMP, always 1.
    In a process forked after its parent used OpenMP threads, always 1
    (libgomp would hang; see the module docstring), with a RuntimeWarning
    the first time that cuts a request for more.
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
        n = max(1, max_threads())
        if n > 1:
            busy = _other_runnable()
            if busy is not None:
                n = max(1, min(n, _cpu_count() - busy))
    elif n_jobs < 0:
        n = max(1, _cpu_count() + 1 + n_jobs)
    else:
        n = n_jobs
    if n > 1:
        if _FORK_STATE.forked_child:
            if not _FORK_STATE.warned:
                _FORK_STATE.warned = True
                warn_user(
                    f"rbcd runs with 1 thread instead of {n} in this process: it was forked "
                    "after its parent had used OpenMP threads, and GNU OpenMP cannot start "
                    "threads in such a child (it would hang). Start worker processes with "
                    "multiprocessing's 'spawn' or 'forkserver' method to use threads in them.",
                    RuntimeWarning)
            return 1
        _FORK_STATE.pool_may_exist = True
    return n


def serial_dot(a, b):
    """a . b for 1-D float64 arrays, summed on the calling thread (a Python float).

    ``np.dot`` of long vectors goes to BLAS, and OpenBLAS's worker threads, once woken,
    busy-wait for new work for a while afterwards (about 0.1 s) on the cores that rbcd's
    OpenMP team is about to use: behind one such call at the start of a fit, a 2-thread
    coordinate descent epoch ran slower than a 1-thread one. numpy's ``einsum`` (without
    ``optimize``) sums the products itself. Use this for every reduction over rows in
    code that runs next to rbcd's parallel kernels.
    """
    return float(np.einsum("i,i->", a, b))


class _Blas:
    """The process's threadpoolctl controller, made on first use: making one inspects
    every loaded library (about a millisecond), applying a limit with it does not."""

    __slots__ = ("controller",)

    def __init__(self):
        self.controller = None

    def get(self):
        if self.controller is None:
            self.controller = ThreadpoolController()
        return self.controller


_BLAS = _Blas()


@contextmanager
def limit_blas(n=1):
    """Cap BLAS threads while our own OpenMP regions run (no oversubscription), or around
    the LAPACK calls of the direct ridge solves (one thread: rbcd.solvers._direct)."""
    with _BLAS.get().limit(limits=int(n), user_api="blas"):
        yield
