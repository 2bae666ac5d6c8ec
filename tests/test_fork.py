"""Fork safety (issue 15): a process forked after rbcd has used OpenMP threads must not
hang in its first parallel call (GNU OpenMP's thread pool does not survive fork).

Every scenario runs in a fresh interpreter under a timeout, so a regression fails the
test instead of hanging CI; inside it, the forked child is joined with a shorter
timeout and killed if it is still running.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from rbcd._openmp_info import openmp_is_enabled

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")

TIMEOUT = 240  # seconds for a whole scenario (an interpreter start, two small fits)

_SCENARIO = r"""
import json, multiprocessing as mp, sys, warnings
import numpy as np
import rbcd
from rbcd._threads import effective_n_threads, forked_after_threads

rng = np.random.default_rng(0)
X = rng.random((3000, 4))   # large enough for every kernel to go parallel
y = (np.sin(6 * X[:, 0]) + X[:, 1] > 0.8).astype(int)

def fit_all(n_jobs):
    Z = rbcd.RandomBinning(n_grids=16, random_state=0, n_jobs=n_jobs).fit_transform(X)
    cg = rbcd.RBClassifier(n_grids=16, random_state=0, n_jobs=n_jobs).fit(X, y)
    cd = rbcd.RBClassifier(n_grids=16, random_state=0, n_jobs=n_jobs, solver="cd",
                           parallel="grid", max_epochs=5, tol=0.0).fit(X, y)
    return {"Z": [Z.indptr.tolist(), Z.indices.tolist()],
            "cg": cg.decision_function(X).tolist(),
            "cd": cd.decision_function(X).tolist()}

def child(q, n_jobs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_all(n_jobs)
        res["n"] = effective_n_threads(n_jobs)
        res["forked_after_threads"] = forked_after_threads()
    res["warnings"] = [str(w.message) for w in caught if w.category is RuntimeWarning]
    q.put(res)

def run_child(method, n_jobs):
    ctx = mp.get_context(method)
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q, n_jobs))
    p.start()
    try:
        res = q.get(timeout={child_timeout})
    except Exception:
        res = None
    p.join(10)
    if p.is_alive():
        p.kill()
        p.join()
    return res

if __name__ == "__main__":
{body}
"""


def _run(tmp_path, body, child_timeout=90):
    """Run the scenario with ``body`` as its main block, from a file (spawn and
    forkserver children import the child function from it)."""
    src = _SCENARIO.replace("{child_timeout}", str(child_timeout)).replace(
        "{body}", textwrap.indent(textwrap.dedent(body), "    "))
    script = tmp_path / "fork_scenario.py"
    script.write_text(src)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


@pytest.mark.skipif(not openmp_is_enabled(), reason="serial build: no OpenMP pool to lose")
def test_fork_after_threads_runs_serially_and_correctly(tmp_path):
    res = _run(tmp_path, """
        serial = fit_all(1)
        fit_all(2)                      # the parent starts libgomp's worker threads
        forked = run_child("fork", 2)   # hung before the fix
        print("RESULT " + json.dumps({"serial": serial, "forked": forked,
                                      "parent_flag": forked_after_threads()}))
    """)
    forked = res["forked"]
    assert forked is not None, "the forked child did not answer: it hung or crashed"
    assert forked["n"] == 1 and forked["forked_after_threads"] is True
    assert res["parent_flag"] is False
    # the child computed what one thread computes
    for key in ("Z", "cg", "cd"):
        assert forked[key] == res["serial"][key], key
    # it said once why it ignored n_jobs=2, and how to get threads back
    assert len(forked["warnings"]) == 1, forked["warnings"]
    assert "forked" in forked["warnings"][0] and "forkserver" in forked["warnings"][0]


@pytest.mark.skipif(not openmp_is_enabled(), reason="serial build: no OpenMP pool to lose")
def test_fork_before_threads_and_forkserver_keep_threads(tmp_path):
    res = _run(tmp_path, """
        before = run_child("fork", 2)   # the parent has not used threads yet
        fit_all(2)
        server = run_child("forkserver", 2)
        print("RESULT " + json.dumps({"before": before, "server": server}))
    """)
    for key in ("before", "server"):
        child = res[key]
        assert child is not None, f"{key}: the child did not answer"
        assert child["n"] == 2 and child["forked_after_threads"] is False, key
        assert child["warnings"] == [], key
    # a grandchild of a flagged child is flagged too (the pool is gone for good)
    res = _run(tmp_path, """
        fit_all(2)
        import os
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            fit_all(1)
            pid2 = os.fork()
            if pid2 == 0:
                os.write(w, str(int(forked_after_threads())).encode())
                os._exit(0)
            os.waitpid(pid2, 0)
            os._exit(0)
        os.waitpid(pid, 0)
        print("RESULT " + json.dumps({"grandchild": os.read(r, 1).decode()}))
    """)
    assert res["grandchild"] == "1"
