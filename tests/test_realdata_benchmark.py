"""benchmarks/compare_realdata.py, tune_realdata.py and compare_cv.py run end to end on tiny
data (they measure nothing here; the real data sets never enter the tests)."""
import json
import os
import subprocess
import sys

import numpy as np
from sklearn.datasets import dump_svmlight_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")


def _run(args, cwd):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable] + args, cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def _write_sets(folder):
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(120, 3))
    labels = (X[:, 0] + X[:, 1] > 1).astype(int) + (X[:, 2] > 0.5)    # 3 classes
    target = np.sin(4 * X[:, 0]) + X[:, 1] + 0.05 * rng.standard_normal(120)
    for name, y in (("tinyclf", labels), ("tinyreg", target)):
        dump_svmlight_file(X[:90], y[:90], os.path.join(folder, f"{name}.train.svm"))
        dump_svmlight_file(X[90:], y[90:], os.path.join(folder, f"{name}.test.svm"))


def test_compare_realdata_writes_table_json_and_plot(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    _write_sets(data)
    _run([os.path.join(BENCH, "compare_realdata.py"), str(data), "--out", str(out),
          "--gammas", "1", "--components", "16", "--peer-alphas", "1", "--svc-C", "1",
          "--krr-alphas", "0.1", "--rbcd-grids", "8", "--rbcd-params",
          '{"n_grids": 8, "tol": 0.001, "n_jobs": 1}', "--bundled", "none"], tmp_path)
    md = (out / "realdata_table.md").read_text()
    assert "| tinyclf | acc |" in md and "| tinyreg | RMSE |" in md
    records = json.loads((out / "realdata.json").read_text())["records"]
    methods = {(r["set"], r["method"]) for r in records}
    for name in ("tinyclf", "tinyreg"):
        for m in ("rbcd", "rbcd-cv", "rff", "nystroem", "exact-laplacian", "exact-rbf"):
            assert (name, m) in methods
    clf = [r["score"] for r in records if r["set"] == "tinyclf"]
    assert all(0.0 <= s <= 1.0 for s in clf)
    assert (out / "realdata_time.png").stat().st_size > 1000
    assert not [f for f in os.listdir(out) if f.startswith(".")]    # no temporary left
    # re-running rbcd only, reusing the peers, keeps their records
    _run([os.path.join(BENCH, "compare_realdata.py"), str(data), "--out", str(out),
          "--methods", "none", "--reuse", str(out / "realdata.json"), "--bundled", "none"], tmp_path)
    again = json.loads((out / "realdata.json").read_text())["records"]
    assert len(again) == len(records)


def test_compare_realdata_runs_bundled_sets_without_dir(tmp_path):
    # scikit-learn's bundled sets need no download: no DIR, two of them, raw and scaled
    out = tmp_path / "out"
    _run([os.path.join(BENCH, "compare_realdata.py"), "--out", str(out),
          "--bundled", "sk-wine,sk-wine-scaled", "--methods", "rbcd,exact-laplacian",
          "--svc-C", "1", "--gammas", "1", "--rbcd-grids", "8", "--rbcd-params",
          '{"n_grids": 8, "n_jobs": 1}'], tmp_path)
    records = json.loads((out / "realdata.json").read_text())["records"]
    assert {(r["set"], r["method"]) for r in records} >= {
        (n, m) for n in ("sk-wine", "sk-wine-scaled") for m in ("rbcd", "exact-laplacian")}
    # the split is train_test_split(random_state=0): 133 training rows of 178
    md = (out / "realdata_table.md").read_text()
    assert "| sk-wine-scaled | acc |" in md and "133" in md
    scaled = [r["score"] for r in records if r["set"] == "sk-wine-scaled" and r["method"] == "rbcd"]
    assert scaled and max(scaled) > 0.85  # a working classifier on the standardized set


def test_tune_realdata_sweep_and_curves(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _write_sets(data)
    grid, curve = tmp_path / "grid.jsonl", tmp_path / "tol.jsonl"
    _run([os.path.join(BENCH, "tune_realdata.py"), str(data), str(grid), "--factors", "0.5,1",
          "--grids", "8", "--alphas", "0.1,1"], tmp_path)
    recs = [json.loads(line) for line in grid.read_text().splitlines()]
    assert len(recs) == 2 * 2 * 2 and {r["set"] for r in recs} == {"tinyclf", "tinyreg"}
    _run([os.path.join(BENCH, "tune_realdata.py"), str(data), str(curve), "--tol-curve",
          "--sets", "tinyclf", "--factors", "0.5", "--grids", "8", "--alphas", "0.1"], tmp_path)
    kinds = [json.loads(line)["kind"] for line in curve.read_text().splitlines()]
    assert kinds.count("tol") == 7 and kinds.count("iter") >= 2
    _run([os.path.join(BENCH, "tune_realdata.py"), "--plot", str(curve),
          str(tmp_path / "curve.png")], tmp_path)
    assert (tmp_path / "curve.png").stat().st_size > 1000


def test_compare_cv_runs_and_agrees(tmp_path):
    out = _run([os.path.join(BENCH, "compare_cv.py"), "--n", "300", "--d", "3", "--grids", "8",
                "--folds", "2", "--factors", "1,2", "--alphas", "0.1,1", "--tol", "1e-10",
                "--n-jobs", "1"], tmp_path)
    assert "machine :" in out and "target" in out
    assert "same choice: True" in out
