"""The benchmark code runs: every asv benchmark and every comparison script, on tiny sizes.

These check that benchmarks/ and asv_benches/ do not rot as the API moves; they measure
nothing. Each runs in a subprocess (fresh module state, the size switch read at import).
"""
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Calls what asv would call (setup_cache, then setup and each time_/peakmem_/track_
# method for every parameter combination), without asv, at N / 1000.
ASV_DRIVER = textwrap.dedent(
    """
    import importlib, inspect, itertools, sys
    sys.path.append({root!r})  # asv_benches/ from the checkout, rbcd as installed
    mod = importlib.import_module("asv_benches." + {module!r})
    ran = 0
    for cname, cls in sorted(vars(mod).items()):
        if not inspect.isclass(cls) or cls.__module__ != mod.__name__:
            continue
        methods = [m for m in dir(cls) if m.startswith(("time_", "peakmem_", "track_"))]
        if not methods:
            continue
        obj = cls()
        cache = (obj.setup_cache(),) if hasattr(cls, "setup_cache") else ()
        for combo in itertools.product(*getattr(cls, "params", ())):
            args = cache + combo
            try:
                obj.setup(*args)
            except NotImplementedError:
                continue
            for m in methods:
                value = getattr(obj, m)(*args)
                if m.startswith("track_"):
                    assert value == value and value is not None, (cname, m, combo, value)
                ran += 1
    assert ran > 0
    print("ran", ran)
    """
)


def _run(args, cwd, env=None, timeout=600):
    # cwd: a scratch directory, so that ``rbcd`` is the installed package, not the checkout
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=full_env,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize("module", ["binning", "cd", "cg", "end_to_end"])
def test_asv_benchmarks_run(module, tmp_path):
    out = _run([sys.executable, "-c", ASV_DRIVER.format(root=ROOT, module=module)], tmp_path,
               env={"RBCD_ASV_SMOKE": "1000", "OMP_NUM_THREADS": "2"})
    assert "ran" in out


TINY = ["--n", "1500", "--d", "4", "--grids", "8", "--repeat", "1"]


@pytest.mark.parametrize("script, extra", [
    ("compare_binning.py", ["--ref-n", "200"]),
    ("compare_cd.py", ["--epochs", "2"]),
    ("compare_ridge.py", []),
    # a 2-worker LocalCluster of processes: the optional dask extra
    pytest.param("compare_dask.py", ["--epochs", "2", "--latency-reps", "3"],
                 marks=pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                          reason="needs rbcd[dask] (distributed)")),
])
def test_comparison_scripts_run(script, extra, tmp_path):
    out = _run([sys.executable, os.path.join(ROOT, "benchmarks", script)] + TINY + extra,
               tmp_path)
    assert "machine :" in out and "versions:" in out
    assert "ratio" in out and "target" in out
