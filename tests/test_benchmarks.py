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


@pytest.mark.parametrize("module", ["binning", "cd", "cg", "end_to_end", "threads", "sizes"])
def test_asv_benchmarks_run(module, tmp_path):
    out = _run([sys.executable, "-c", ASV_DRIVER.format(root=ROOT, module=module)], tmp_path,
               env={"RBCD_ASV_SMOKE": "1000", "OMP_NUM_THREADS": "2"})
    assert "ran" in out


TINY = ["--n", "1500", "--d", "4", "--grids", "8", "--repeat", "1"]


@pytest.mark.parametrize("script, extra", [
    ("compare_binning.py", ["--ref-n", "200"]),
    ("compare_cd.py", ["--epochs", "2"]),
    ("compare_ridge.py", []),
    ("compare_preconditioner.py", ["--quick", "--sizes", "1500", "--sigmas", "0.5"]),
    ("compare_sizes.py", ["--sizes", "300", "--no-bundled", "--svc-max", "300",
                          "--components", "50"]),
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


def test_compare_threads_runs(tmp_path):
    """compare_threads.py times every stage at 1 and 2 threads and writes the markdown
    table, the kernel breakdown and the JSON: a CG iteration as the periods between the
    ends of successive cg_direction calls of one fit of 1 + k iterations (k of them), a CD
    epoch as each CDProblem.epoch call (1 + k of them)."""
    import json

    out_dir = tmp_path / "out"
    out = _run([sys.executable, os.path.join(ROOT, "benchmarks", "compare_threads.py")] + TINY
               + ["--threads", "1,2", "--iters", "2", "--triad-min", "1000",
                  "--out", str(out_dir)], tmp_path)
    assert "machine :" in out and "versions:" in out and "x bound" in out
    md = (out_dir / "threads.md").read_text()
    assert "| threads | triad |" in md and "\n| 1 | " in md and "\n| 2 | " in md
    assert "binning (fit_transform)" in md
    data = json.loads((out_dir / "threads.json").read_text())
    assert sorted(data["triad_bytes_per_s"]) == ["1", "2"]
    assert all(v > 0 for v in data["triad_bytes_per_s"].values())
    assert set(data["seconds"]) >= {"binning", "transform"}
    assert all(t > 0 for t in data["seconds"]["binning"].values())
    fits = {(f["stage"], f["threads"]): f for f in data["fits"]}
    assert {s for s, _ in fits} == {"binning", "transform", "cg", "cd-grid", "cd-hogwild"}
    for T in (1, 2):
        assert len(fits["cg", T]["units_s"]) == 2
        assert len(fits["cd-grid", T]["units_s"]) == 3
        assert all(0 < u <= fits["cg", T]["wall_s"] for u in fits["cg", T]["units_s"])
        assert data["seconds"]["cg"][str(T)] == min(fits["cg", T]["units_s"])
    kernels = data["kernels"]["cg"]["1"]["kernels"]
    assert {"labels_matmat", "labels_tmatmat", "cg_step", "cg_dot", "cg_direction",
            "grid_center"} <= set(kernels)
    assert "CDProblem.epoch" in data["kernels"]["cd-hogwild"]["2"]["kernels"]
    assert "fit_tables" in data["kernels"]["binning"]["1"]["kernels"]
    assert "Kernel breakdown" in md and "glue" in md
    assert data["data"]["N"] == 1500 and data["data"]["labels"]
    # the tables-only stage (not a default one): fit_tables without Z's kernels
    out_dir = tmp_path / "fit"
    _run([sys.executable, os.path.join(ROOT, "benchmarks", "compare_threads.py")] + TINY
         + ["--threads", "1", "--stages", "fit", "--triad-min", "1000",
            "--out", str(out_dir)], tmp_path)
    data = json.loads((out_dir / "threads.json").read_text())
    kernels = data["kernels"]["fit"]["1"]["kernels"]
    assert "fit_tables" in kernels and "finish_training" not in kernels
    assert data["seconds"]["fit"]["1"] == data["kernels"]["fit"]["1"]["wall_s"] > 0
    # the machine's ceiling and the first-touch stages: no byte bound for the ceiling,
    # system time and page faults recorded for every stage
    out_dir = tmp_path / "probes"
    _run([sys.executable, os.path.join(ROOT, "benchmarks", "compare_threads.py")] + TINY
         + ["--threads", "1,2", "--stages", "core,touch,touch-huge,binning-huge",
            "--triad-min", "1000", "--out", str(out_dir)], tmp_path)
    data = json.loads((out_dir / "threads.json").read_text())
    for stage in ("core", "touch", "touch-huge", "binning-huge"):
        assert all(data["seconds"][stage][T] > 0 for T in ("1", "2")), stage
        rec = data["kernels"][stage]["2"]
        assert rec["sys_s"] >= 0 and rec["minor_faults"] >= 0, stage
    assert data["bytes"]["core"] == 0 and data["bytes"]["touch"] > 0
    assert "fill_constant" in data["kernels"]["touch"]["1"]["kernels"]
    assert "fit_tables" in data["kernels"]["binning-huge"]["1"]["kernels"]
    md = (out_dir / "threads.md").read_text()
    assert "system time" in md and "page faults" in md
    # the solvers' transpose (not a default stage)
    out_dir = tmp_path / "transpose"
    _run([sys.executable, os.path.join(ROOT, "benchmarks", "compare_threads.py")] + TINY
         + ["--threads", "1,2", "--stages", "transpose", "--triad-min", "1000",
            "--out", str(out_dir)], tmp_path)
    data = json.loads((out_dir / "threads.json").read_text())
    assert all(data["seconds"]["transpose"][T] > 0 for T in ("1", "2"))
    assert data["bytes"]["transpose"] > 0
    row1 = next(line for line in md.splitlines() if line.startswith("| 1 | "))
    assert row1.split(" | ")[2].endswith("ms") or row1.split(" | ")[2].endswith(" s")


def _chain_reference(steps, seed, table_words):
    """_openmp_info._chain in Python integers (mod 2**64)."""
    m = (1 << 64) - 1

    def mix(h):
        h ^= h >> 33
        h = (h * 0xFF51AFD7ED558CCD) & m
        return h ^ (h >> 29)

    h = (seed * 0x9E3779B97F4A7C15 + 1) & m
    tab = [0] * table_words
    for _ in range(steps):
        if table_words:
            h = mix(h ^ tab[h & (table_words - 1)])
            tab[h & (table_words - 1)] = (tab[h & (table_words - 1)] + 1) & m
        else:
            h = mix(h)
    return h


def test_core_work_probe():
    """core_work runs one chain per thread, steps // T links each (with or without a
    private table), and returns the xor of their ends; it refuses bad arguments."""
    from rbcd._openmp_info import core_work

    for T in (1, 2, 3):
        for words in (0, 4, 64):
            expect = 0
            for t in range(T):
                expect ^= _chain_reference(1000 // T, t, words)
            assert core_work(1000, T, words) == expect, (T, words)
    with pytest.raises(ValueError, match="n_threads"):
        core_work(10, 0)
    with pytest.raises(ValueError, match="power of two"):
        core_work(10, 1, 3)
    with pytest.raises(ValueError, match="steps"):
        core_work(-1, 1)
    with pytest.raises(MemoryError, match="table"):
        core_work(10, 2, 1 << 62)  # (calloc refuses: the byte count overflows)


def test_empty_arrays_on_either_page_size():
    """_binning.empty gives writable, 64-byte aligned arrays of the dtype asked for, on
    4 KiB pages or advised as 2 MiB pages (huge=True: 2 MiB aligned from 2 MiB on)."""
    import numpy as np

    from rbcd.binning import _binning

    for huge in (False, True):
        for n, dtype in ((0, np.float64), (5, np.int32), (3 << 18, np.float64)):
            a = _binning.empty(n, dtype, huge=huge)
            assert a.dtype == np.dtype(dtype) and a.shape == (n,)
            if n:
                a[:] = 7
                assert np.all(a == 7) and a.ctypes.data % 64 == 0
                if huge and a.nbytes >= 1 << 21:
                    assert a.ctypes.data % (1 << 21) == 0


def test_stream_triad_probe():
    """The bandwidth probe computes STREAM's triad on any thread count, and refuses
    mismatched arrays."""
    import numpy as np

    from rbcd._openmp_info import first_touch, stream_triad

    n = 10007
    b = np.empty(n)
    first_touch(b, 1.5, 2)
    assert np.all(b == 1.5)
    c = np.arange(n, dtype=np.float64)
    for T in (1, 2, 3):
        a = np.full(n, np.nan)
        stream_triad(a, b, c, 0.25, T)
        np.testing.assert_array_equal(a, b + 0.25 * c)
    with pytest.raises(ValueError, match="same length"):
        stream_triad(np.empty(3), np.empty(4), np.empty(3), 1.0, 1)
    with pytest.raises(ValueError, match="n_threads"):
        stream_triad(np.empty(3), np.empty(3), np.empty(3), 1.0, 0)


def test_compare_sizes_reads_the_small_real_sets(tmp_path, monkeypatch):
    """--realdata DIR: the svmlight pairs of DIR up to REALDATA_MAX_N training rows, as
    classification where the targets are few integers, else regression."""
    import numpy as np
    from sklearn.datasets import dump_svmlight_file

    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import compare_sizes
    finally:
        sys.path.pop(0)
    rng = np.random.default_rng(0)
    for name, n, y in (("cls", 40, rng.integers(0, 3, 50)), ("reg", 40, rng.normal(size=50)),
                       ("big", 45, rng.integers(0, 2, 55))):
        X = rng.uniform(size=(y.shape[0], 3))
        dump_svmlight_file(X[:n], y[:n], str(tmp_path / f"{name}.train.svm"))
        dump_svmlight_file(X[n:], y[n:], str(tmp_path / f"{name}.test.svm"))
    monkeypatch.setattr(compare_sizes, "REALDATA_MAX_N", 40)
    sets = {s[0]: s for s in compare_sizes.realdata_sets(str(tmp_path))}
    assert sorted(sets) == ["cls", "reg"]
    name, task, Xtr, ytr, Xte, yte = sets["cls"]
    assert task == "clf" and Xtr.shape == (40, 3) and Xte.shape == (10, 3)
    assert isinstance(Xtr, np.ndarray) and set(np.unique(ytr)) <= {0.0, 1.0, 2.0}
    assert sets["reg"][1] == "reg"


def test_compare_search_runs(tmp_path):
    """compare_search.py fits the defaults, the searches and the tuned exact machines on a
    bundled set and prints the gaps and the time ratio against GridSearchCV over SVC."""
    import json

    out_dir = tmp_path / "out"
    out = _run([sys.executable, os.path.join(ROOT, "benchmarks", "compare_search.py"),
                "--quick", "--sets", "sk-wine-scaled", "--out", str(out_dir)], tmp_path)
    assert "machine :" in out and "versions:" in out
    assert "gap default" in out and "cv / gs-svc" in out and "(target <= 1.0)" in out
    data = json.loads((out_dir / "search.json").read_text())
    (row,) = data["rows"]
    assert row["name"] == "sk-wine-scaled" and row["task"] == "clf" and len(row["splits"]) == 1
    assert 0.5 < row["rbcd"] <= 1.0 and 0.5 < row["rbcd-cv"] <= 1.0 and row["cv_over_gs_svc"] > 0
    assert "| sk-wine-scaled |" in (out_dir / "search.md").read_text()


def test_compare_search_regression_time_against_the_kernel_ridge_grid(tmp_path):
    """Regression has no gs-svc: the search's time is put over the exact-lap KernelRidge
    GridSearchCV's fit time, printed as "krr"."""
    import json

    out_dir = tmp_path / "out"
    out = _run([sys.executable, os.path.join(ROOT, "benchmarks", "compare_search.py"),
                "--quick", "--sets", "sk-diabetes-scaled", "--out", str(out_dir)], tmp_path)
    assert "over the exact-lap KernelRidge grid's time, worst:" in out
    (row,) = json.loads((out_dir / "search.json").read_text())["rows"]
    assert row["task"] == "reg" and row["exact-lap_t"] > 0
    assert row["cv_over_krr"] == pytest.approx(row["rbcd-cv_t"] / row["exact-lap_t"])
    assert row["cv_over_gs_svc"] != row["cv_over_gs_svc"]        # nan: no gs-svc
    assert "krr" in (out_dir / "search.md").read_text().split("| sk-diabetes-scaled |")[1]


def test_fit_balance_runs(tmp_path):
    """fit_balance.py reads every chunk's work from its thread's CPU clock: one entry per
    chunk of the plan's split, the grids' own costs, and balances in (0, 1]."""
    import json

    out = tmp_path / "balance.json"
    text = _run([sys.executable, os.path.join(ROOT, "benchmarks", "fit_balance.py"),
                 "--n", "3000", "--d", "4", "--grids", "12", "--threads", "2,4",
                 "--json", str(out)], tmp_path)
    assert "balance" in text and "a sweep over the rows" in text
    data = json.loads(out.read_text())
    assert len(data["per_grid_cpu_s"]) == 12 and len(data["estimate"]) == 12
    assert all(c > 0 for c in data["per_grid_cpu_s"]) and data["one_chunk_cpu_s"] > 0
    for T in ("2", "4"):
        rec = data["threads"][T]
        assert len(rec["chunk_cpu_s"]) == len(rec["bounds"]) - 1 == int(T)
        assert rec["bounds"][0] == 0 and rec["bounds"][-1] == 12
        assert 0 < rec["balance_measured"] <= 1 and 0 < rec["balance_best"] <= 1
        assert rec["work"] > 0


def test_fit_tables_chunk_clocks():
    """fit_tables(chunk_cpu=...) gives every chunk of the grid mode its thread's CPU
    seconds (the fit itself unchanged), and refuses an array of the wrong length."""
    import numpy as np

    import rbcd
    from rbcd.binning import _binning
    from rbcd.binning._plan import _Paths

    X = np.random.default_rng(0).random((4000, 5))
    seen = {}
    plain = _binning.fit_tables

    def wrapped(X_, grids, direct, ids, want_counts, bounds, paths, n_ranges=0, n_threads=1,
                merge_pairs=0, chunk_cpu=None, team=False):
        cpu = np.full(3, np.nan)
        b = np.array([0, 2, 5, len(direct)], dtype=np.int64)
        out = plain(X_, grids, direct, ids, want_counts, b, paths, n_ranges, n_threads,
                    merge_pairs, chunk_cpu=cpu, team=team)
        seen["cpu"] = cpu
        with pytest.raises(ValueError, match="chunk_cpu"):
            plain(X_, grids, direct, ids, want_counts, b, paths, n_ranges, n_threads,
                  merge_pairs, chunk_cpu=np.zeros(2))
        return out

    Z0 = rbcd.RandomBinning(n_grids=9, random_state=1).fit_transform(X, _paths=_Paths(ranges=0))
    _binning.fit_tables = wrapped
    try:
        Z1 = rbcd.RandomBinning(n_grids=9, random_state=1).fit_transform(
            X, _paths=_Paths(ranges=0))
    finally:
        _binning.fit_tables = plain
    assert np.all(np.isfinite(seen["cpu"])) and np.all(seen["cpu"] >= 0)
    assert (Z0 != Z1).nnz == 0 and np.array_equal(Z0.indices, Z1.indices)
