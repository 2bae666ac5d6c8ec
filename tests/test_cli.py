"""The ``rbcd`` command line, run in-process through ``rbcd.__main__.main`` (plus one
subprocess smoke test of ``python -m rbcd``)."""
import os
import re
import subprocess
import sys

import joblib
import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from rbcd.__main__ import main
from rbcd.cli import detect_task, load_model
from rbcd.datasets import make_checkerboard, make_nonlinear_regression


def _assert_one_line_error(capsys, code, expected_code, pattern):
    out, err = capsys.readouterr()
    assert code == expected_code, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("rbcd: error: "), err
    assert re.search(pattern, lines[0]), lines[0]
    assert "Traceback" not in err


@pytest.fixture
def classification_files(tmp_path):
    X, y = make_checkerboard(1500, n_features=5, n_informative=2, n_cells=2, random_state=0)
    train, test = tmp_path / "train.svm", tmp_path / "test.svm"
    dump_svmlight_file(X[:1200], y[:1200], str(train))
    dump_svmlight_file(X[1200:], y[1200:], str(test))
    return train, test, X, y


@pytest.fixture
def regression_files(tmp_path):
    X, y = make_nonlinear_regression(1200, n_features=5, noise=0.05, random_state=1)
    train, test = tmp_path / "reg.svm", tmp_path / "reg_test.svm"
    dump_svmlight_file(X[:1000], y[:1000], str(train))
    dump_svmlight_file(X[1000:], y[1000:], str(test))
    return train, test, X, y


def _read_predictions(path):
    with open(path) as fh:
        return [line.rstrip("\n") for line in fh]


@pytest.mark.parametrize("solver", ["cg", "cd"])
def test_train_predict_roundtrip_classification(classification_files, tmp_path, capsys, solver):
    train, test, X, y = classification_files
    model = tmp_path / "model.joblib"
    code = main(["train", str(train), "--model", str(model), "--test", str(test),
                 "--solver", solver, "--n-grids", "32", "--sigma", "0.5", "--n-jobs", "1",
                 "--alpha", "0.1" if solver == "cg" else "1e-4", "--max-epochs", "30"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "classification, 2 classes" in out
    for field in ("binning", "solving", "train accuracy", "test accuracy", "D = ",
                  "kappa = ", "nnz = ", "threads = 1"):
        assert field in out, field
    test_acc = float(re.search(r"test accuracy (\d\.\d+)", out).group(1))
    assert test_acc > 0.8  # an XOR of 2 of 5 coordinates: a linear model scores ~0.5

    payload = load_model(str(model))
    assert payload["format"] == "rbcd-model" and payload["task"] == "classification"
    assert payload["n_features"] == 5
    est = payload["estimator"]
    assert type(est).__name__ == "RBClassifier" and est.binning_.n_features_out_ > 32

    pred_file = tmp_path / "pred.txt"
    code = main(["predict", str(model), str(test), "--output", str(pred_file)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "accuracy" in err
    expected = est.predict(X[1200:])
    got = _read_predictions(pred_file)
    assert got == [str(int(v)) for v in expected]
    # the predictions score what train reported on the test file
    assert np.mean(np.array(got, dtype=int) == y[1200:]) == pytest.approx(test_acc, abs=1e-4)


def test_train_predict_roundtrip_regression_to_stdout(regression_files, tmp_path, capsys):
    train, test, X, y = regression_files
    model = tmp_path / "reg.joblib"
    code = main(["train", str(train), "-m", str(model), "--sigma", "1.0", "--n-grids", "64",
                 "--test", str(test)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "regression (detected" in out
    assert "train RMSE" in out and "test RMSE" in out
    rmse = float(re.search(r"test RMSE ([\d.e+-]+)", out).group(1))
    assert rmse < 0.5 * np.std(y)  # better than predicting the mean
    code = main(["predict", str(model), str(test)])
    out, err = capsys.readouterr()
    assert code == 0, err
    est = load_model(str(model))["estimator"]
    got = np.array([float(v) for v in out.split()])
    np.testing.assert_array_equal(got, est.predict(X[1000:]))  # repr round-trips exactly


def test_task_detection_and_override(regression_files, tmp_path, capsys):
    assert detect_task(np.array([0.0, 1.0, 1.0])) == "classification"
    assert detect_task(np.array([-1.0, 1.0])) == "classification"
    assert detect_task(np.array([1.0, 2.0, 3.0, 7.0])) == "classification"
    assert detect_task(np.arange(50.0)) == "regression"
    assert detect_task(np.array([0.5, 1.5, 2.25])) == "regression"
    train, _, X, y = regression_files
    # regression labels rounded to 3 integer values: auto says classification,
    # --task regression forces a regressor
    ints = tmp_path / "ints.svm"
    dump_svmlight_file(X[:300], np.round(np.clip(y[:300], -1, 1)), str(ints))
    model = tmp_path / "m.joblib"
    assert main(["train", str(ints), "-m", str(model), "--n-grids", "8"]) == 0
    assert "classification, 3 classes" in capsys.readouterr().out
    assert load_model(str(model))["task"] == "classification"
    assert main(["train", str(ints), "-m", str(model), "--n-grids", "8",
                 "--task", "regression"]) == 0
    assert "regression (from --task)" in capsys.readouterr().out
    assert load_model(str(model))["task"] == "regression"


def test_demo_runs_and_reports(capsys):
    code = main(["demo", "--n-samples", "3000", "--n-jobs", "1", "--seed", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    acc = float(re.search(r"test accuracy:\s+(\d\.\d+)", out).group(1))
    assert 0.8 < acc <= 1.0  # XOR of 2 of 8 coordinates: a linear model scores ~0.5
    for pattern in (r"binning [\d.]+ s", r"solving [\d.]+ s", r"total [\d.]+ s",
                    r"D = \d+", r"kappa = [\d.]+", r"nnz = 192000", r"threads:\s+1\b",
                    r"3000 train / 1000 test"):
        assert re.search(pattern, out), pattern


def test_demo_cd_solver(capsys):
    code = main(["demo", "--n-samples", "2000", "--solver", "cd", "--max-epochs", "3",
                 "--n-jobs", "2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    from rbcd._threads import effective_n_threads

    assert "CDClassifier" in out
    assert re.search(rf"threads:\s+{effective_n_threads(2)}\n", out)
    assert float(re.search(r"test accuracy:\s+(\d\.\d+)", out).group(1)) > 0.75


# ----------------------------------------------------------------------------- errors
def test_usage_errors_exit_2(capsys):
    _assert_one_line_error(capsys, main([]), 2, "command is required")
    _assert_one_line_error(capsys, main(["train"]), 2, "required")
    _assert_one_line_error(capsys, main(["frobnicate"]), 2, "invalid choice")
    _assert_one_line_error(capsys, main(["demo", "--n-samples", "-5"]), 2, "positive integer")
    _assert_one_line_error(capsys, main(["demo", "--sigma", "0"]), 2, "--sigma")
    _assert_one_line_error(capsys, main(["demo", "--n-jobs", "0"]), 2, "non-zero")
    _assert_one_line_error(capsys, main(["demo", "--solver", "cg", "--loss", "logistic"]),
                           2, "needs --solver cd")


def test_help_exits_0(capsys):
    assert main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert re.match(r"rbcd \d+\.\d+", capsys.readouterr().out)


def test_missing_and_malformed_data_exit_1(classification_files, tmp_path, capsys):
    model = tmp_path / "m.joblib"
    _assert_one_line_error(capsys, main(["train", str(tmp_path / "nope.svm"), "-m", str(model)]),
                           1, "no such file")
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:0.5 2:abc\n0 qwerty\n")
    _assert_one_line_error(capsys, main(["train", str(bad), "-m", str(model)]),
                           1, "not a valid svmlight")
    empty = tmp_path / "empty.svm"
    empty.write_text("")
    code = main(["train", str(empty), "-m", str(model)])
    _assert_one_line_error(capsys, code, 1, "empty.svm")
    assert not model.exists()
    train, test, _, _ = classification_files
    _assert_one_line_error(capsys, main(["train", str(train), "-m", str(tmp_path / "no" / "m")]),
                           1, "does not exist")


def test_bad_model_files_exit_1(classification_files, tmp_path, capsys):
    _, test, _, _ = classification_files
    _assert_one_line_error(capsys, main(["predict", str(tmp_path / "none.joblib"), str(test)]),
                           1, "no such file")
    noise = tmp_path / "noise.joblib"
    noise.write_bytes(np.random.default_rng(0).bytes(500))
    _assert_one_line_error(capsys, main(["predict", str(noise), str(test)]),
                           1, "not an rbcd model")
    other = tmp_path / "other.joblib"
    joblib.dump({"weights": [1, 2, 3]}, other)
    _assert_one_line_error(capsys, main(["predict", str(other), str(test)]),
                           1, "not an rbcd model")
    from sklearn.linear_model import Ridge
    joblib.dump(Ridge(), other)
    _assert_one_line_error(capsys, main(["predict", str(other), str(test)]),
                           1, "not an rbcd model.*Ridge")


def test_feature_mismatch_and_unwritable_output(classification_files, tmp_path, capsys):
    train, test, X, y = classification_files
    model = tmp_path / "m.joblib"
    assert main(["train", str(train), "-m", str(model), "--n-grids", "8"]) == 0
    capsys.readouterr()
    wide = tmp_path / "wide.svm"
    dump_svmlight_file(np.hstack([X[:20], X[:20]]), y[:20], str(wide))
    _assert_one_line_error(capsys, main(["predict", str(model), str(wide)]),
                           1, r"more features \(10\) than the model.*5 features")
    # a test file wider than the training file is the same error at train time
    _assert_one_line_error(capsys, main(["train", str(train), "-m", str(model), "--test",
                                         str(wide), "--n-grids", "8"]), 1, "more features")
    _assert_one_line_error(
        capsys, main(["predict", str(model), str(test), "--output",
                      str(tmp_path / "missing_dir" / "p.txt")]), 1, "cannot write output")
    _assert_one_line_error(
        capsys, main(["predict", str(model), str(test), "--output", str(tmp_path)]),
        1, "is a directory")
    # a narrower file is fine: svmlight omits trailing zero features
    narrow = tmp_path / "narrow.svm"
    dump_svmlight_file(X[:20, :3], y[:20], str(narrow))
    assert main(["predict", str(model), str(narrow)]) == 0
    assert len(capsys.readouterr().out.split()) == 20


def test_subprocess_python_m_rbcd(classification_files, tmp_path):
    train, test, _, _ = classification_files
    model = tmp_path / "m.joblib"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-m", "rbcd", "train", str(train), "-m", str(model),
                          "--n-grids", "16"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert "model saved to" in run.stdout and "threads = 1" in run.stdout
    run = subprocess.run([sys.executable, "-m", "rbcd", "predict", str(model), str(test)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert len(run.stdout.split()) == 300
    run = subprocess.run([sys.executable, "-m", "rbcd", "predict", str(train), str(test)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("rbcd: error: ")


def test_index_base_is_kept_from_training_to_prediction(tmp_path, capsys):
    X, y = make_checkerboard(400, n_features=4, n_informative=2, n_cells=2, random_state=3)
    # libsvm's one-based indices train and predict like the zero-based file
    one, zero = tmp_path / "one.svm", tmp_path / "zero.svm"
    dump_svmlight_file(X, y, str(one), zero_based=False)
    dump_svmlight_file(X, y, str(zero), zero_based=True)
    m1, m0 = tmp_path / "m1.joblib", tmp_path / "m0.joblib"
    assert main(["train", str(one), "-m", str(m1), "--n-grids", "8"]) == 0
    assert main(["train", str(zero), "-m", str(m0), "--n-grids", "8"]) == 0
    capsys.readouterr()
    assert load_model(str(m1))["zero_based"] is False
    assert load_model(str(m0))["zero_based"] is True
    assert main(["predict", str(m1), str(one)]) == 0
    p1 = capsys.readouterr().out
    assert main(["predict", str(m0), str(zero)]) == 0
    assert capsys.readouterr().out == p1
    # a zero-based prediction file that never uses column 0 is not shifted
    Xz = X[:50].copy()
    Xz[:, 0] = 0.0
    nocol0 = tmp_path / "nocol0.svm"
    dump_svmlight_file(Xz, y[:50], str(nocol0), zero_based=True)
    assert main(["predict", str(m0), str(nocol0)]) == 0
    got = [int(v) for v in capsys.readouterr().out.split()]
    assert got == list(load_model(str(m0))["estimator"].predict(Xz))
    # index 0 in a file for a one-based model is an error, not a silent shift
    _assert_one_line_error(capsys, main(["predict", str(m1), str(zero)]), 1, "index 0")
    # --zero-based yes reads a file without index 0 as zero-based
    assert main(["train", str(nocol0), "-m", str(m0), "--n-grids", "8",
                 "--zero-based", "yes"]) == 0
    assert "50 rows x 4 features" in capsys.readouterr().out


def test_reproduce_script_smoke(tmp_path, monkeypatch):
    """benchmarks/reproduce.py runs every panel end to end (tiny sizes) and writes its
    figures and tables into --out only."""
    import importlib.util
    import json

    path = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks", "reproduce.py")
    spec = importlib.util.spec_from_file_location("rbcd_reproduce", path)
    repro = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(repro)
    tiny = dict(repro.QUICK, n_synthetic=300, n_synthetic_test=100, sigma_exponents=(-2, 0),
                R_sigma=8, R_list=(4, 8), rb_R_list=(4, 8), components=(16, 32),
                exact_max_n=400, speed_n=2000, speed_R=8, speed_rf_D=16, speed_epochs=3,
                speed_repeats=1, srf_iters=(1, 2), dsekl_epochs=(1,))
    monkeypatch.setattr(repro, "QUICK", tiny)
    out = tmp_path / "repro"
    code = repro.main(["--out", str(out), "--quick", "--datasets", "checkerboard,diabetes",
                       "--threads", "1,2"])
    assert code == 0
    for name in ("fig3_sigma.png", "fig4_grids.png", "fig5_time.png", "fig6_speedup.png",
                 "results.md", "results.json"):
        assert (out / name).stat().st_size > 0, name
    with open(out / "results.json") as fh:
        res = json.load(fh)
    assert res["errors"] == {}
    sigma = res["results"]["sigma"]
    assert [len(sigma[d]["rows"]) for d in ("checkerboard", "diabetes")] == [2, 2]
    assert len(sigma["diabetes"]["exact"]) == 2  # N <= exact_max_n: exact kernel line
    methods = res["results"]["time"]["checkerboard"]["methods"]
    assert set(methods) == {"RB + CG (rbcd)", "RandomFourier + RidgeCG",
                            "RBFSampler + Ridge", "Nystroem + Ridge",
                            "SparseRandomFeatures (l1 CD)", "DSEKL"}
    assert [len(methods["SparseRandomFeatures (l1 CD)"]), len(methods["DSEKL"])] == [2, 1]
    # DSEKL is a classifier: a regression data set has no DSEKL row
    assert "DSEKL" not in res["results"]["time"]["diabetes"]["methods"]
    assert all(0.0 <= r["test_perf"] <= 1.0 for r in methods["DSEKL"])
    modes = res["results"]["speedup"]["modes"]
    # eq. 29 for dense random Fourier features (R = D non-zeros per row) predicts no speedup
    assert all(r["predicted"] == pytest.approx(1.0) for r in modes["RF (dense), Hogwild"]["rows"])
    hog = modes["RB, Hogwild"]["rows"][1]
    assert hog["threads"] == 2 and 1.0 < hog["predicted"] <= 2.0
    # grid blocks are deterministic: the same objective for 1 and 2 threads
    grid = modes["RB, grid blocks"]["rows"]
    assert grid[0]["objective"] == pytest.approx(grid[1]["objective"], rel=1e-12)
    md = (out / "results.md").read_text()
    assert "## (a)" in md and "## (d)" in md and "exact test RMSE" in md
    assert sorted(os.listdir(tmp_path)) == ["repro"]
