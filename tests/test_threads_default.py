"""n_jobs=None on a busy machine (issue 29, "threads that never lose"): the default thread
count leaves out the cores that other work keeps busy at the moment of each stage
(rbcd._threads._other_runnable); an explicit n_jobs is always honoured, and the results
do not depend on the count."""
import os

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import rbcd
from rbcd import _threads
from rbcd._openmp_info import max_threads, openmp_is_enabled

needs_omp = pytest.mark.skipif(not openmp_is_enabled() or max_threads() < 2,
                               reason="needs OpenMP and at least 2 threads")


@needs_omp
def test_default_leaves_out_busy_cores(monkeypatch):
    n = max_threads()
    monkeypatch.setattr(_threads, "_cpu_count", lambda: n)
    monkeypatch.setattr(_threads, "_other_runnable", lambda: 0)
    assert _threads.effective_n_threads(None) == n
    monkeypatch.setattr(_threads, "_other_runnable", lambda: 1)
    assert _threads.effective_n_threads(None) == n - 1
    monkeypatch.setattr(_threads, "_other_runnable", lambda: n + 5)
    assert _threads.effective_n_threads(None) == 1
    monkeypatch.setattr(_threads, "_other_runnable", lambda: None)   # unknown: all
    assert _threads.effective_n_threads(None) == n
    # explicit counts are the user's, whatever the load
    monkeypatch.setattr(_threads, "_other_runnable", lambda: n + 5)
    assert _threads.effective_n_threads(2) == 2
    assert _threads.effective_n_threads(-1) == n
    # threadpoolctl limits still cap the default
    monkeypatch.setattr(_threads, "_other_runnable", lambda: 0)
    with threadpool_limits(1, user_api="openmp"):
        assert _threads.effective_n_threads(None) == 1


def test_other_runnable_reads_the_instant_count(monkeypatch, tmp_path):
    if not os.path.exists("/proc/loadavg"):
        assert _threads._other_runnable() is None
        return
    value = _threads._other_runnable()
    if _threads._cpu_count() != (os.cpu_count() or 0):
        assert value is None          # bound to some cores: the host's count is not ours
    else:
        assert isinstance(value, int) and value >= 0
    # a machine seen whole, with a stand-in /proc/loadavg: 5 runnable, the caller one
    fake = tmp_path / "loadavg"
    fake.write_text("0.50 0.40 0.30 5/321 4242\n")
    real_open = open
    monkeypatch.setattr(_threads, "_cpu_count", lambda: os.cpu_count())
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: real_open(
        fake if path == "/proc/loadavg" else path, *a, **k))
    monkeypatch.setattr(_threads, "_own_runnable", lambda: 0)
    assert _threads._other_runnable() == 4
    # this process's own runnable threads (spinning BLAS threads, say) are not "other work"
    monkeypatch.setattr(_threads, "_own_runnable", lambda: 3)
    assert _threads._other_runnable() == 1
    monkeypatch.setattr(_threads, "_own_runnable", lambda: 9)
    assert _threads._other_runnable() == 0
    fake.write_text("garbage\n")
    assert _threads._other_runnable() is None


@needs_omp
def test_results_do_not_depend_on_the_load(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.random((3000, 4))
    y = (np.sin(6 * X[:, 0]) + X[:, 1] > 0.8).astype(int)
    out = []
    for busy in (0, 64):
        monkeypatch.setattr(_threads, "_other_runnable", lambda b=busy: b)
        m = rbcd.RBClassifier(n_grids=1024, random_state=0).fit(X, y)  # above SERIAL_ENTRIES
        out.append(m.decision_function(X))
    np.testing.assert_array_equal(out[0], out[1])


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux /proc only")
def test_own_runnable_counts_a_working_thread_but_not_the_caller():
    import hashlib
    import threading

    assert _threads._own_runnable() >= 0
    done = threading.Event()

    def work():           # pbkdf2 releases the GIL: the thread runs (state R) meanwhile
        while not done.is_set():
            hashlib.pbkdf2_hmac("sha256", b"x", b"salt", 200_000)

    t = threading.Thread(target=work)
    t.start()
    try:
        seen = max(_threads._own_runnable() for _ in range(200))
    finally:
        done.set()
        t.join()
    assert seen >= 1
