"""rbcd's fits leave the BLAS thread team asleep (issue 18).

OpenBLAS's worker threads, once a BLAS call wakes them (``np.dot`` of two long vectors is
enough), busy-wait for new work for about 0.1 s on the cores that rbcd's OpenMP team is
about to use. Behind one such call at the start of a fit, a 2-thread coordinate descent
epoch ran slower than a 1-thread one on a 2-core machine. So the solvers reduce over rows
with numpy's own loops (``rbcd._threads.serial_dot``, ``einsum``), never with BLAS.

Each scenario runs in a fresh interpreter (threads' CPU time from /proc is per process):
after a warm-up fit (the first fit imports modules whose BLAS library starts its threads),
it fits with ``n_jobs=1``, so that no OpenMP worker exists, and reads the CPU time every
thread other than the main one used meanwhile. A control call (``np.dot``) shows that the
probe sees BLAS threads spin on this machine.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"),
                                reason="per-thread CPU times need Linux /proc")

_SCENARIO = r"""
import json, os, sys, threading, time
import numpy as np
import rbcd
from threadpoolctl import threadpool_info

def others_cpu():
    # clock ticks (utime + stime) of every thread but the main one
    main = threading.get_native_id()
    total = 0
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == main:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total

def probe(fn):
    time.sleep(0.4)          # let anything spinning from before go to sleep
    before = others_cpu()
    fn()
    time.sleep(0.4)          # a woken BLAS team spins on through this
    return others_cpu() - before

rng = np.random.default_rng(0)
X = rng.random((60000, 6))
y = np.sin(6 * X[:, 0]) + X[:, 1]
labels = np.digitize(y, [0.3, 1.0])           # three classes
blas_threads = max([d["num_threads"] for d in threadpool_info()
                    if d["user_api"] == "blas"], default=1)
fits = {
    "RBRegressor cd": lambda: rbcd.RBRegressor(solver="cd", n_jobs=1, random_state=0,
                                               max_epochs=20).fit(X, y),
    "RBRegressor cg": lambda: rbcd.RBRegressor(solver="cg", n_jobs=1, random_state=0).fit(X, y),
    "RBClassifier cd": lambda: rbcd.RBClassifier(solver="cd", n_jobs=1, random_state=0,
                                                 max_epochs=20).fit(X, labels),
    "RBClassifier cg": lambda: rbcd.RBClassifier(solver="cg", n_jobs=1,
                                                 random_state=0).fit(X, labels),
}
for fit in fits.values():      # warm-up: imports, and the BLAS library's thread start
    fit()
out = {"blas_threads": blas_threads,
       "control": probe(lambda: np.dot(np.ones(400000), np.ones(400000)))}
for name, fit in fits.items():
    out[name] = probe(fit)
print(json.dumps(out))
"""


def test_fits_do_not_wake_blas_threads():
    env = dict(os.environ)
    env.pop("OPENBLAS_NUM_THREADS", None)
    env.pop("OMP_NUM_THREADS", None)
    env["OPENBLAS_NUM_THREADS"] = "2"     # a BLAS team to wake, on any machine
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_SCENARIO)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    if res["blas_threads"] < 2 or res["control"] < 3:
        pytest.skip(f"the BLAS library here runs no thread team the probe can see "
                    f"(threads {res['blas_threads']}, control {res['control']} ticks)")
    woke = {k: v for k, v in res.items() if k not in ("blas_threads", "control") and v >= 3}
    # a woken team spins for ~0.1 s (10 ticks, like the control); 1-2 ticks is noise
    assert not woke, (f"these fits woke the BLAS threads (clock ticks of spinning; the "
                      f"control np.dot gave {res['control']}): {woke}")
