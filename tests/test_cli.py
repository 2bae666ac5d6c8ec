"""The ``rbcd`` command line, run in-process through ``rbcd.__main__.main`` (plus
subprocess smoke tests of ``python -m rbcd``), and the atomic writes of rbcd._io."""
import errno
import os
import re
import stat
import subprocess
import sys

import joblib
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

import rbcd.cli as cli
from rbcd.__main__ import main
from rbcd._io import atomic_write
from rbcd.cli import detect_task, load_model, load_svmlight
from rbcd.datasets import make_checkerboard, make_nonlinear_regression

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _assert_one_line_error(capsys, code, expected_code, pattern):
    out, err = capsys.readouterr()
    assert code == expected_code, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("rbcd: error: "), err
    assert re.search(pattern, lines[0]), lines[0]
    assert "Traceback" not in err
    return lines[0]


def _line(out, label):
    """The labelled output line ``label ...`` (without the label)."""
    found = [ln[len(label):].strip() for ln in out.splitlines()
             if ln.split(" ", 1)[0] == label]
    assert len(found) == 1, (label, out)
    return found[0]


def _value(text, name):
    m = re.search(rf"(?:^|  ){re.escape(name)} ([^\s]+)", text)
    assert m, (name, text)
    return m.group(1)


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
                 *(["--alpha", "0.1"] if solver == "cg" else
                   ["--alpha", "1e-4", "--max-epochs", "30"])])
    out, err = capsys.readouterr()
    assert code == 0, err
    # stderr is not a terminal: no progress; only warnings, and no convergence warning (cd
    # classification stops once its decisions settle, well inside 30 epochs)
    assert all(ln.startswith("rbcd: warning: ") for ln in err.splitlines()), err
    assert "converge" not in err
    data = _line(out, "data")
    assert "classification, 2 classes (detected" in data
    assert _value(data, "rows") == "1200" and _value(data, "features") == "5"
    assert _value(data, "nnz") == str(5 * 1200)
    binning = _line(out, "binning")
    assert int(_value(binning, "nnz")) == 1200 * 32 and int(_value(binning, "D")) > 32
    solver_line = _line(out, "solver")
    assert solver_line.startswith("RidgeCGClassifier" if solver == "cg" else "CDClassifier")
    unit = "iterations" if solver == "cg" else "epochs"
    assert int(_value(solver_line, unit)) >= 1
    assert _line(out, "threads").startswith("1 ")
    test_acc = float(_value(_line(out, "test"), "accuracy"))
    assert test_acc > 0.8  # an XOR of 2 of 5 coordinates: a linear model scores ~0.5
    result = _line(out, "result")
    assert f"test accuracy {test_acc:.4f}" in result
    for name in ("D", "kappa", "fit", "threads"):
        _value(result, name)

    payload = load_model(str(model))
    assert payload["format"] == "rbcd-model" and payload["task"] == "classification"
    assert payload["n_features"] == 5
    est = payload["estimator"]
    assert type(est).__name__ == "RBClassifier" and est.binning_.n_features_out_ > 32
    assert _value(binning, "D") == str(est.binning_.n_features_out_)

    pred_file = tmp_path / "pred.txt"
    code = main(["predict", str(model), str(test), "--output", str(pred_file)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == "" and "accuracy" in err
    expected = est.predict(X[1200:])
    got = _read_predictions(pred_file)
    assert got == [str(int(v)) for v in expected]
    # the predictions score what train reported on the test file
    assert np.mean(np.array(got, dtype=int) == y[1200:]) == pytest.approx(test_acc, abs=1e-4)
    assert sorted(os.listdir(tmp_path)) == ["model.joblib", "pred.txt", "test.svm", "train.svm"]


def test_train_with_defaults_reports_the_direct_form_and_the_chosen_alpha(regression_files,
                                                                        tmp_path, capsys):
    # the defaults (solver="auto", alpha="auto") on 1,000 rows: one factorization of the
    # dual system, not "1 epoch"; and the penalty the fit chose, marked as chosen
    train, _, X, y = regression_files
    model = tmp_path / "model.joblib"
    assert main(["train", str(train), "--model", str(model), "--n-grids", "32",
                 "--n-jobs", "1"]) == 0
    out, _ = capsys.readouterr()
    solver_line = _line(out, "solver")
    est = load_model(str(model))["estimator"]
    assert est.solver_.solver_ == "dual"
    assert "direct solve (dual)" in solver_line and "epochs" not in solver_line
    assert _value(solver_line, "alpha") == f"{est.alpha_:g}"
    assert f"alpha {est.alpha_:g} (auto)" in solver_line
    # a given penalty is reported as given
    assert main(["train", str(train), "--model", str(model), "--n-grids", "32", "--n-jobs",
                 "1", "--alpha", "0.5", "--solver", "cg"]) == 0
    solver_line = _line(capsys.readouterr()[0], "solver")
    assert "alpha 0.5  " in solver_line and "(auto)" not in solver_line
    assert int(_value(solver_line, "iterations")) >= 1


def test_train_predict_roundtrip_regression_to_stdout(regression_files, tmp_path, capsys):
    train, test, X, y = regression_files
    model = tmp_path / "reg.joblib"
    code = main(["train", str(train), "-m", str(model), "--sigma", "1.0", "--n-grids", "64",
                 "--test", str(test)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "regression (detected" in _line(out, "data")
    _value(_line(out, "train"), "RMSE")
    rmse = float(_value(_line(out, "test"), "RMSE"))
    assert rmse < 0.5 * np.std(y)  # better than predicting the mean
    code = main(["predict", str(model), str(test)])
    out, err = capsys.readouterr()
    assert code == 0, err
    est = load_model(str(model))["estimator"]
    got = np.array([float(v) for v in out.split()])
    # the predictions of the file's rows (svmlight's %.16g moves X[1000:] by an ulp, which
    # the model's linear term sees), and their repr round-trips exactly
    from sklearn.datasets import load_svmlight_file
    X_file = load_svmlight_file(str(test), n_features=X.shape[1])[0]
    np.testing.assert_array_equal(got, est.predict(X_file))


def test_defaults_are_the_estimators(classification_files, regression_files, tmp_path, capsys):
    """Options left out keep the estimator's defaults; given ones are passed unchanged."""
    from rbcd import RBClassifier, RBRegressor

    train, _, _, _ = classification_files
    model = tmp_path / "m.joblib"
    assert main(["train", str(train), "-m", str(model)]) == 0
    capsys.readouterr()
    est = load_model(str(model))["estimator"]
    assert est.get_params() == RBClassifier(random_state=0).get_params()
    assert est.solver_.get_params()["tol"] == RBClassifier()._effective()[2]
    reg_train = regression_files[0]
    assert main(["train", str(reg_train), "-m", str(model), "--solver", "cd",
                 "--max-epochs", "3", "--tol", "1e-9"]) == 0
    capsys.readouterr()
    est = load_model(str(model))["estimator"]
    expected = RBRegressor(random_state=0, solver="cd", max_epochs=3, tol=1e-9).get_params()
    assert est.get_params() == expected
    # every given option reaches the estimator under its parameter name (cd's options
    # with cd, cg's with cg: one solver's option with another is refused)
    given = ["--n-grids", "7", "--sigma", "0.25", "--solver", "cd", "--loss",
             "squared_hinge", "--alpha", "0.5", "--l1-ratio", "0.25", "--max-epochs", "2",
             "--tol", "0.125", "--parallel", "serial", "--seed", "3", "--n-jobs", "1"]
    assert main(["train", str(train), "-m", str(model), *given]) == 0
    capsys.readouterr()
    params = load_model(str(model))["estimator"].get_params()
    assert {k: params[k] for k in ("n_grids", "sigma", "solver", "loss", "alpha", "l1_ratio",
                                   "max_epochs", "tol", "parallel",
                                   "random_state", "n_jobs")} == dict(
        n_grids=7, sigma=0.25, solver="cd", loss="squared_hinge", alpha=0.5, l1_ratio=0.25,
        max_epochs=2, tol=0.125, parallel=None, random_state=3, n_jobs=1)
    assert main(["train", str(train), "-m", str(model), "--n-grids", "7", "--solver", "cg",
                 "--max-iter", "9"]) == 0
    capsys.readouterr()
    assert load_model(str(model))["estimator"].get_params()["max_iter"] == 9
    # --help shows the estimator's defaults, read from it
    assert main(["train", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    defaults = RBClassifier().get_params()
    assert f"(default: {defaults['n_grids']})" in help_text
    assert f"(default: {defaults['l1_ratio']})" in help_text
    assert f"(default: {defaults['max_epochs']})" in help_text


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
    result = _line(out, "result")
    acc = float(_value(result, "test accuracy"))
    assert 0.8 < acc <= 1.0  # XOR of 2 of 8 coordinates: a linear model scores ~0.5
    assert re.search(r"fit [\d.]+ s", result) and _value(result, "threads") == "1"
    from rbcd.models import auto_n_grids

    assert _value(_line(out, "binning"), "nnz") == str(3000 * auto_n_grids(8, 3000))
    assert _value(_line(out, "binning"), "grids") == str(auto_n_grids(8, 3000))  # the choice
    assert re.search(r"time [\d.]+ s", _line(out, "solver"))
    data = _line(out, "data")
    assert "train 3000 rows" in data and "test 1000 rows" in data
    # the model line is the estimator the demo built, with its example settings
    model = _line(out, "model")
    assert model.startswith("RBClassifier(") and "sigma=0.7" in model
    assert "random_state=1" in model and "verbose" not in model


def test_demo_cd_solver(capsys):
    code = main(["demo", "--n-samples", "2000", "--solver", "cd", "--max-epochs", "3",
                 "--n-jobs", "2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    from rbcd._threads import effective_n_threads

    assert _line(out, "solver").startswith("CDClassifier")
    assert "max_epochs=3" in _line(out, "model") and "solver='cd'" in _line(out, "model")
    assert _value(_line(out, "result"), "threads") == str(effective_n_threads(2))
    assert float(_value(_line(out, "result"), "test accuracy")) > 0.75


# ----------------------------------------------------------------------------- progress
def test_progress_goes_to_stderr_when_asked_or_on_a_terminal(classification_files, tmp_path,
                                                              capsys, monkeypatch):
    train, _, _, _ = classification_files
    model = tmp_path / "m.joblib"
    args = ["train", str(train), "-m", str(model), "--n-grids", "8", "--solver", "cd",
            "--max-epochs", "2"]
    assert main(args) == 0
    quiet_out, err = capsys.readouterr()
    # not a terminal: quiet, but for the warning (2 epochs do not converge)
    assert [ln[:20] for ln in err.splitlines()] == ["rbcd: warning: Coord"]
    assert main(args + ["-v"]) == 0
    out, err = capsys.readouterr()
    assert "rbcd: reading" in err and "rbcd: fitting RBClassifier(" in err
    assert "rbcd: binning done" in err and "rbcd: saving" in err
    # -v: the stage lines once each (issue 31 item 17: the estimator's own summary lines
    # repeated them); -vv adds the estimator's lines, on stderr too
    assert "[rbcd CD]" not in err and "[RBClassifier]" not in err
    assert len([ln for ln in err.splitlines() if "binning done" in ln]) == 1
    assert main(args + ["-vv"]) == 0
    out, err = capsys.readouterr()
    assert "[rbcd CD]" in err or "[RBClassifier]" in err
    assert [ln.split()[0] for ln in out.splitlines()] == \
        [ln.split()[0] for ln in quiet_out.splitlines()]
    assert "[rbcd CD]" not in out and "[RBClassifier]" not in out

    class Terminal:
        def __init__(self, stream):
            self.stream = stream

        def isatty(self):
            return True

        def __getattr__(self, name):
            return getattr(self.stream, name)

    monkeypatch.setattr(sys, "stderr", Terminal(sys.stderr))
    assert main(args) == 0
    assert "rbcd: fitting" in capsys.readouterr().err


def test_warnings_teach_about_degenerate_binning(classification_files, tmp_path, capsys,
                                                 monkeypatch):
    train, _, _, _ = classification_files
    model = tmp_path / "m.joblib"
    assert main(["train", str(train), "-m", str(model), "--sigma", "1e-6",
                 "--n-grids", "4"]) == 0
    out, err = capsys.readouterr()
    kappa = float(_value(_line(out, "binning"), "kappa"))
    assert kappa == pytest.approx(1200)
    warn = [ln for ln in err.splitlines() if ln.startswith("rbcd: warning:")]
    assert len(warn) == 1 and "close to N = 1200" in warn[0]
    assert "sigma = 1e-06" in warn[0] and "larger sigma" in warn[0]
    assert main(["train", str(train), "-m", str(model), "--sigma", "1e6",
                 "--n-grids", "4"]) == 0
    out, err = capsys.readouterr()
    assert float(_value(_line(out, "binning"), "kappa")) == pytest.approx(1.0)
    assert "close to 1" in err and "smaller sigma" in err
    # a reasonable sigma: no warning
    assert main(["train", str(train), "-m", str(model), "--sigma", "0.5",
                 "--n-grids", "4"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert cli.binning_advice(10.0, 12, 1.0) is None  # too few rows to judge
    monkeypatch.setattr(cli, "_can_scale", lambda: True)  # once sigma="scale" exists
    assert "--sigma scale" in cli.binning_advice(99.0, 100, 0.01)
    assert "--sigma scale" in cli.binning_advice(1.0, 100, 100.0)
    assert cli.binning_advice(30.0, 1000, 1.0) is None


def test_repeated_warnings_are_shown_once():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            warnings.warn("did not  converge\n in 5 epochs")
        warnings.warn("another")
    assert cli._warning_lines(caught) == ["did not converge in 5 epochs (x3)", "another"]


# ----------------------------------------------------------------------------- errors
def test_usage_errors_exit_2(capsys):
    _assert_one_line_error(capsys, main([]), 2, "command is required")
    _assert_one_line_error(capsys, main(["train"]), 2, "required")
    _assert_one_line_error(capsys, main(["frobnicate"]), 2, "invalid choice")
    _assert_one_line_error(capsys, main(["demo", "--n-samples", "-5"]), 2, "positive integer")
    _assert_one_line_error(capsys, main(["demo", "--sigma", "0"]), 2, "--sigma")
    _assert_one_line_error(capsys, main(["demo", "--sigma", "wide"]), 2, "'scale'")
    _assert_one_line_error(capsys, main(["demo", "--n-jobs", "0"]), 2, "non-zero")
    _assert_one_line_error(capsys, main(["demo", "--solver", "cg", "--loss", "logistic"]),
                           2, "needs --solver cd")
    _assert_one_line_error(capsys, main(["demo", "--l1-ratio", "2"]), 2, "--l1-ratio")


def test_option_errors_found_before_any_work(classification_files, tmp_path, capsys):
    """Contradicting or unknown options are usage errors (exit 2, one line) raised before
    data are generated or read: no demo header, no model written; an unknown option points
    at the command's own help; --class-weight naming a label the data lack names the
    option; a CSV file gets a message that says so."""
    train, _, _, _ = classification_files
    model = tmp_path / "m.joblib"
    for argv, pattern in (
            (["demo", "--n-samples", "3000", "--solver", "cd", "--linear", "1"],
             "--linear 1 is for the ridge solvers"),
            # the demo's solver is the estimator's default, auto (its settings for cg
            # apply to every solver but cd), and the message names it
            (["demo", "--n-samples", "3000", "--loss", "logistic"],
             r"needs --solver cd \(auto solves"),
            (["train", str(train), "-m", str(model), "--bogus"],
             r"unrecognized arguments: --bogus \(see 'rbcd train --help'\)"),
            (["train", str(train), "-m", str(model), "--class-weight", "7:2"],
             r"--class-weight names 7, not a class of .*train.svm \(its classes: 0, 1\)")):
        code = main(argv)
        line = _assert_one_line_error(capsys, code, 2, pattern)
        assert "ValueError" not in line
    assert not model.exists()
    csv = tmp_path / "data.csv"
    np.savetxt(csv, np.arange(12.0).reshape(4, 3), delimiter=",")
    _assert_one_line_error(capsys, main(["train", str(csv), "-m", str(model)]), 1,
                           "looks like a CSV file")


def test_solver_choices_and_debug_after_the_command(classification_files, tmp_path, capsys):
    """--solver takes the estimator's four values (its default, auto, included), and
    --debug is accepted before or after the command."""
    train, test, _, _ = classification_files
    for solver, shown in (("auto", ""), ("direct", "direct solve"),
                          ("cg", "")):
        model = tmp_path / f"{solver}.joblib"
        assert main(["train", str(train), "-m", str(model), "--n-grids", "16",
                     "--solver", solver, "--debug"]) == 0
        assert shown in _line(capsys.readouterr().out, "solver")
        assert main(["predict", "--debug", str(model), str(test)]) == 0
        assert main(["--debug", "predict", str(model), str(test)]) == 0
        capsys.readouterr()


def test_train_and_demo_survive_a_reader_that_leaves(classification_files, tmp_path):
    """``rbcd train ... | head -1``: the reader closes stdout after one line; the command
    goes on, saves the model, and exits 0 (the rest of its output dropped)."""
    train, _, _, _ = classification_files
    model = tmp_path / "m.joblib"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for argv in (["train", str(train), "-m", str(model), "--n-grids", "16"],
                 ["demo", "--n-samples", "2000"]):
        proc = subprocess.Popen([sys.executable, "-m", "rbcd"] + argv, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, cwd=ROOT)
        first = proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=300) == 0, err
        assert first and "Traceback" not in err and "error" not in err, err
    assert load_model(str(model))["task"] == "classification"


def test_help_exits_0(capsys):
    assert main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert re.match(r"rbcd \d+\.\d+", capsys.readouterr().out)
    for command in ("demo", "train", "predict"):
        assert main([command, "--help"]) == 0
        assert "usage: rbcd " + command in capsys.readouterr().out


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
    nan = tmp_path / "nan.svm"
    nan.write_text("1 1:0.5\n0 2:nan\n1 1:2\n")
    _assert_one_line_error(capsys, main(["train", str(nan), "-m", str(model)]),
                           1, "non-finite.*row 2")
    nolabel = tmp_path / "nanlabel.svm"
    nolabel.write_text("1 1:0.5\n0 2:1\ninf 1:2\n")
    _assert_one_line_error(capsys, main(["train", str(nolabel), "-m", str(model)]),
                           1, "non-finite.*row 3")
    one_class = tmp_path / "one.svm"
    one_class.write_text("1 1:0.5\n1 2:1\n")
    _assert_one_line_error(capsys, main(["train", str(one_class), "-m", str(model)]),
                           1, "at least 2 classes")
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
    got = [int(v) for v in capsys.readouterr().out.split()]
    Xn = X[:20].copy()
    Xn[:, 3:] = 0.0
    assert got == list(load_model(str(model))["estimator"].predict(Xn))


def test_subprocess_python_m_rbcd(classification_files, tmp_path):
    train, test, _, _ = classification_files
    model = tmp_path / "m.joblib"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-m", "rbcd", "train", str(train), "-m", str(model),
                          "--n-grids", "16"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert "saved    " in run.stdout and re.search(r"threads 1\b", run.stdout)
    assert run.stderr == ""  # a pipe is not a terminal: no progress
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
    assert "index base 1 (auto)" in capsys.readouterr().out
    assert main(["train", str(zero), "-m", str(m0), "--n-grids", "8"]) == 0
    assert "index base 0 (auto)" in capsys.readouterr().out
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
    # ... unless predict is told the file's base
    assert main(["predict", str(m1), str(zero), "--zero-based", "yes"]) == 0
    assert capsys.readouterr().out == p1
    # --zero-based yes reads a file without index 0 as zero-based
    assert main(["train", str(nocol0), "-m", str(m0), "--n-grids", "8",
                 "--zero-based", "yes"]) == 0
    data = _line(capsys.readouterr().out, "data")
    assert "rows 50" in data and "features 4" in data and "index base 0 (yes)" in data
    assert main(["train", str(zero), "-m", str(m0), "--zero-based", "no"]) == 1
    assert "uses feature index 0" in capsys.readouterr().err


# ----------------------------------------------------------------------------- wide, sparse
def test_loader_keeps_svmlight_sparse(tmp_path):
    path = tmp_path / "wide.svm"
    path.write_text("1 3:0.5 1000000:2\n0 1:1\n1 2:-1.5\n0 999999:4 1000000:1\n")
    X, y, zero_based = load_svmlight(str(path))
    assert sp.issparse(X) and X.format == "csr" and X.dtype == np.float64
    assert zero_based is False and X.shape == (4, 1000000) and X.nnz == 6
    assert X[0, 2] == 0.5 and X[0, 999999] == 2.0 and X[3, 999998] == 4.0
    np.testing.assert_array_equal(y, [1, 0, 1, 0])
    # a model's width pads, without densifying
    X2, _, _ = load_svmlight(str(path), n_features=2 * 10**6, zero_based=False)
    assert X2.shape == (4, 2 * 10**6) and X2.nnz == 6


def test_model_input_densifies_in_one_place_with_a_memory_check(tmp_path, monkeypatch):
    from sklearn.linear_model import Ridge

    from rbcd import RBClassifier

    X = sp.random(5, 10**6, density=1e-5, format="csr", random_state=0)
    assert cli.model_input(Ridge(), X, "x") is X  # a sparse-capable estimator gets CSR
    if cli.accepts_sparse(RBClassifier()):
        assert cli.model_input(RBClassifier(), X, "x", fitting=True) is X
    monkeypatch.setattr(cli, "available_memory", lambda: 10**9)
    small = sp.random(5, 20, density=0.5, format="csr", random_state=0)
    dense = cli.to_dense(small, "x", n_grids=64)
    assert isinstance(dense, np.ndarray) and dense.flags.c_contiguous
    np.testing.assert_array_equal(dense, small.toarray())
    with pytest.raises(cli.CLIError, match=r"5 rows x 1000000 features.*64 grids.*1\.0 GB"):
        cli.to_dense(X, "x", n_grids=64)  # 40 MB of X + ~16 GB of binning state


def test_wide_file_is_a_clear_error_not_a_huge_allocation(tmp_path, capsys, monkeypatch):
    """Issue 15/17: a 4-row file with a feature index of 10^6 densified to 14 GB."""
    from rbcd import RBClassifier

    path = tmp_path / "wide.svm"
    path.write_text("1 3:0.5 1000000:2\n0 1:1\n1 2:-1.5\n0 7:4\n")
    model = tmp_path / "m.joblib"
    monkeypatch.setattr(cli, "available_memory", lambda: 4 * 10**9)
    code = main(["train", str(path), "-m", str(model)])
    if cli.accepts_sparse(RBClassifier()):  # sparse input: nothing to densify
        assert code == 0
        return
    line = _assert_one_line_error(capsys, code, 1, "4 rows x 1000000 features")
    assert "GB" in line and "available" in line and "5 of them used" in line
    assert not model.exists()


@pytest.mark.parametrize("index, shown", [(2**31, "2147483648"), (2**40 + 5, "1099511627781"),
                                          (2**63 - 1, "9223372036854775807"),
                                          (2**63, "9223372036854775808"),
                                          (2**64 + 1, "18446744073709551617")])
def test_huge_feature_indices_are_a_clear_error(tmp_path, capsys, index, shown):
    path = tmp_path / "huge.svm"
    path.write_text(f"1 1:0.5\n# a comment\n0 2:1 {index}:3\n")
    line = _assert_one_line_error(capsys, main(["train", str(path), "-m",
                                                str(tmp_path / "m")]), 1, "line 3")
    assert f"feature index {shown}" in line and "2147483647" in line
    assert "internal error" not in line


def test_largest_readable_index_reports_the_width(tmp_path, capsys):
    from rbcd import RBClassifier

    path = tmp_path / "edge.svm"
    path.write_text(f"1 1:0.5\n0 2:1 {2**31 - 1}:3\n")
    X, _, _ = load_svmlight(str(path))
    assert X.shape == (2, 2**31 - 1) and X.nnz == 3
    if not cli.accepts_sparse(RBClassifier()):
        _assert_one_line_error(capsys, main(["train", str(path), "-m", str(tmp_path / "m")]),
                               1, "2 rows x 2147483647 features")


# ----------------------------------------------------------------------------- atomic writes
def _listing(folder):
    return sorted(os.listdir(folder))


def test_atomic_write_replaces_only_on_success(tmp_path):
    target = tmp_path / "out.txt"
    with atomic_write(target) as fh:
        fh.write("first\n")
    assert target.read_text() == "first\n"
    os.chmod(target, 0o640)
    with atomic_write(target) as fh:
        fh.write("second\n")
    assert target.read_text() == "second\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640  # the target's permissions kept
    for exc in (OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()):
        with pytest.raises(type(exc)):
            with atomic_write(target, "wb") as fh:
                fh.write(b"partial ...")
                fh.flush()
                assert len(_listing(tmp_path)) == 2  # the temporary file is beside it
                raise exc
        assert target.read_text() == "second\n"
        assert _listing(tmp_path) == ["out.txt"]
    # a failure on a new path leaves no file at all
    with pytest.raises(ValueError):
        with atomic_write(tmp_path / "new.txt") as fh:
            fh.write("x")
            raise ValueError("writer failed")
    assert _listing(tmp_path) == ["out.txt"]
    with pytest.raises(ValueError, match="mode"):
        with atomic_write(target, "a"):
            pass
    # a symbolic link is written through, and stays a link
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "data.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with atomic_write(link) as fh:
        fh.write("new")
    assert link.is_symlink() and real.read_text() == "new"
    assert sorted(os.listdir(tmp_path / "real")) == ["data.txt"]


def test_atomic_write_failing_sync_keeps_previous(tmp_path, monkeypatch):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        with atomic_write(target, "wb") as fh:
            fh.write(b"new" * 1000)
    assert target.read_bytes() == b"old" and _listing(tmp_path) == ["out.bin"]


def test_failed_model_write_keeps_the_previous_model(classification_files, tmp_path, capsys,
                                                     monkeypatch):
    """Issue 15: a full disk left a truncated model at the target path."""
    train, test, _, _ = classification_files
    folder = tmp_path / "models"
    folder.mkdir()
    model = folder / "m.joblib"
    assert main(["train", str(train), "-m", str(model), "--n-grids", "8"]) == 0
    capsys.readouterr()
    before = model.read_bytes()

    def dump_half_then_fail(value, fh, *args, **kwargs):
        fh.write(b"\x80\x04 half a pickle")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(joblib, "dump", dump_half_then_fail)
    code = main(["train", str(train), "-m", str(model), "--n-grids", "16"])
    _assert_one_line_error(capsys, code, 1, "cannot write model file.*No space left.*unchanged")
    assert model.read_bytes() == before and _listing(folder) == ["m.joblib"]
    new = folder / "new.joblib"
    assert main(["train", str(train), "-m", str(new), "--n-grids", "16"]) == 1
    assert _listing(folder) == ["m.joblib"]
    capsys.readouterr()
    monkeypatch.undo()
    assert load_model(str(model))["estimator"].n_grids == 8


def test_failed_predictions_write_keeps_the_previous_file(classification_files, tmp_path,
                                                          capsys, monkeypatch):
    train, test, _, _ = classification_files
    model = tmp_path / "m.joblib"
    assert main(["train", str(train), "-m", str(model), "--n-grids", "8"]) == 0
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    pred = out_dir / "pred.txt"
    pred.write_text("previous predictions\n")
    capsys.readouterr()

    real_fsync = os.fsync
    calls = []

    def fail_once_data_written(fd):
        calls.append(fd)
        raise OSError(errno.EDQUOT, "Disk quota exceeded")

    monkeypatch.setattr(os, "fsync", fail_once_data_written)
    code = main(["predict", str(model), str(test), "--output", str(pred)])
    _assert_one_line_error(capsys, code, 1, "cannot write output file.*quota")
    assert calls and pred.read_text() == "previous predictions\n"
    assert _listing(out_dir) == ["pred.txt"]
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert main(["predict", str(model), str(test), "--output", str(pred)]) == 0
    assert len(pred.read_text().split()) == 300 and _listing(out_dir) == ["pred.txt"]


def test_benchmark_outputs_are_atomic(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import _common
    finally:
        sys.path.pop(0)
    target = tmp_path / "results.json"
    _common.write_json(str(target), {"a": 1})
    assert target.read_text() == '{"a": 1}'
    with pytest.raises(TypeError):  # json fails half-way through the object
        _common.write_json(str(target), {"a": 2, "b": object()})
    assert target.read_text() == '{"a": 1}' and _listing(tmp_path) == ["results.json"]
    _common.write_text(str(tmp_path / "t.md"), "# hi\n")
    assert (tmp_path / "t.md").read_text() == "# hi\n"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(1, 1))
    _common.save_figure(fig, str(tmp_path / "f.png"), dpi=20)
    plt.close(fig)
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
    assert _listing(tmp_path) == ["f.png", "results.json", "t.md"]


def test_reproduce_script_smoke(tmp_path, monkeypatch):
    """benchmarks/reproduce.py runs every panel end to end (tiny sizes) and writes its
    figures and tables into --out only."""
    import importlib.util
    import json

    path = os.path.join(ROOT, "benchmarks", "reproduce.py")
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
    assert sorted(os.listdir(out)) == ["fig3_sigma.png", "fig4_grids.png", "fig5_time.png",
                                       "fig6_speedup.png", "results.json", "results.md"]
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


def test_train_cv_chooses_sigma_and_alpha(classification_files, tmp_path, capsys):
    """--cv runs the CV estimator and fits the chosen sigma and alpha on all rows."""
    from rbcd.model_selection import RBClassifierCV

    train, test, _, _ = classification_files
    model = tmp_path / "m.joblib"
    assert main(["train", str(train), "-m", str(model), "--cv", "--n-grids", "8",
                 "--n-jobs", "1", "--test", str(test)]) == 0
    out = capsys.readouterr().out
    cv_line = _line(out, "cv")
    est = load_model(str(model))["estimator"]
    X, y, _ = load_svmlight(str(train))
    cv = RBClassifierCV(n_grids=8, n_jobs=1, random_state=0).fit(X.toarray(), y)
    assert est.get_params()["sigma"] == cv.best_estimator_.get_params()["sigma"]
    assert est.get_params()["alpha"] == cv.best_estimator_.get_params()["alpha"]
    assert est.get_params()["linear"] == cv.best_estimator_.get_params()["linear"]
    assert est.linear_ == cv.best_estimator_.linear_
    assert f"score {cv.best_score_:.4f}" in cv_line
    assert main(["train", str(train), "-m", str(model), "--cv", "--sigma", "1"]) == 2


def test_train_multi_class(tmp_path, capsys):
    """--multi-class sets the scheme; --cv searches with --class-weight and --multi-class
    and keeps the scheme it chose; a regression refuses --multi-class."""
    from rbcd.model_selection import RBClassifierCV

    rng = np.random.default_rng(0)
    X = rng.normal(size=(160, 3))
    y = (np.arange(160) % 4)
    X[:, 0] += y
    data = tmp_path / "mc.svm"
    dump_svmlight_file(X, y, str(data))
    model = tmp_path / "m.joblib"
    assert main(["train", str(data), "-m", str(model), "--multi-class", "ovo",
                 "--n-grids", "16", "--n-jobs", "1"]) == 0
    est = load_model(str(model))["estimator"]
    assert est.multi_class == "ovo" and est.solver_.pairs_.shape == (6, 2)
    assert main(["train", str(data), "-m", str(model), "--cv", "--n-grids", "16",
                 "--class-weight", "balanced", "--n-jobs", "1"]) == 0
    est = load_model(str(model))["estimator"]
    Xs, ys, _ = load_svmlight(str(data))
    cv = RBClassifierCV(n_grids=16, class_weight="balanced", n_jobs=1,
                        random_state=0).fit(Xs.toarray(), ys)
    for param in ("sigma", "alpha", "linear", "multi_class", "class_weight"):
        assert est.get_params()[param] == cv.best_estimator_.get_params()[param]
    np.testing.assert_array_equal(est.predict(Xs), cv.predict(Xs.toarray()))
    capsys.readouterr()
    reg = tmp_path / "r.svm"
    dump_svmlight_file(X, X[:, 1], str(reg))
    assert main(["train", str(reg), "-m", str(model), "--task", "regression",
                 "--multi-class", "ovo"]) == 2
    assert "--multi-class is for classification" in capsys.readouterr().err


# ------------------------------------------------------------------ issue 31
def _small_files(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.random((200, 3))
    data = tmp_path / "d.svm"
    dump_svmlight_file(X, (X[:, 0] > 0.5).astype(int), str(data))
    return data, X


def test_outputs_that_are_inputs_are_refused(tmp_path, capsys):
    # item 4: `train d.svm --model d.svm` and `predict ... -o DATA / -o MODEL` replaced the
    # input and exited 0
    data, _ = _small_files(tmp_path)
    before = data.read_bytes()
    code = main(["train", str(data), "--model", str(data), "--n-grids", "4"])
    _assert_one_line_error(capsys, code, 1, r"is the training data")
    link = tmp_path / "alias.svm"
    os.symlink(data, link)
    code = main(["train", str(data), "--model", str(link), "--n-grids", "4"])
    _assert_one_line_error(capsys, code, 1, r"is the training data")
    model = tmp_path / "m.joblib"
    assert main(["train", str(data), "--model", str(model), "--n-grids", "4"]) == 0
    saved = model.read_bytes()
    capsys.readouterr()
    for target, what in ((data, "data file"), (model, "model file")):
        code = main(["predict", str(model), str(data), "-o", str(target)])
        _assert_one_line_error(capsys, code, 1, f"is the {what}")
    assert data.read_bytes() == before and model.read_bytes() == saved


def test_non_regular_outputs_are_written_in_place(tmp_path, capsys):
    # item 4: the atomic rename replaced a device node and could not write /dev/stdout
    data, _ = _small_files(tmp_path)
    model = tmp_path / "m.joblib"
    assert main(["train", str(data), "--model", str(model), "--n-grids", "4"]) == 0
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    import threading

    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()), daemon=True)
    reader.start()
    code = main(["predict", str(model), str(data), "-o", str(fifo)])
    if reader.is_alive():  # nothing opened the pipe (the old rename replaced it): unblock
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)) if stat.S_ISFIFO(
                os.lstat(fifo).st_mode) else None
        except OSError as exc:  # ENXIO: the reader closed its end meanwhile, done reading
            if exc.errno != errno.ENXIO:
                raise
    reader.join(30)
    assert code == 0
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the pipe, not a renamed file
    assert len(got[0].splitlines()) == 200
    assert main(["predict", str(model), str(data), "-o", os.devnull]) == 0
    assert stat.S_ISCHR(os.lstat(os.devnull).st_mode)
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    proc = subprocess.run([sys.executable, "-m", "rbcd", "predict", str(model), str(data),
                           "-o", "/dev/stdout"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 200


def test_sigterm_during_a_write_removes_the_temporary_file(tmp_path):
    # item 6: a killed write left .NAME.*.tmp beside the target
    script = (
        "import os, signal, sys, time\n"
        "from rbcd._io import atomic_write\n"
        "from rbcd.cli import _sigterm_unwinds, Terminated\n"
        "try:\n"
        "    with _sigterm_unwinds():\n"
        "        with atomic_write(sys.argv[1]) as fh:\n"
        "            fh.write('partial')\n"
        "            os.kill(os.getpid(), signal.SIGTERM)\n"
        "            time.sleep(30)\n"
        "except Terminated:\n"
        "    sys.exit(143)\n")
    target = tmp_path / "out.txt"
    proc = subprocess.run([sys.executable, "-c", script, str(target)], cwd=ROOT, timeout=60)
    assert proc.returncode == 143
    assert os.listdir(tmp_path) == []


def test_stale_temporary_files_of_dead_writers_are_swept(tmp_path):
    # item 6: SIGKILL cannot be caught: the next write removes what a dead writer left,
    # and only that (a live writer's file and other names stay)
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True)
    dead = int(proc.stdout)
    stale = tmp_path / f".out.txt.{dead}-abcd1234.tmp"
    live = tmp_path / f".out.txt.{os.getppid()}-abcd1234.tmp"
    other = tmp_path / ".out.txt.notours.tmp"
    for f in (stale, live, other):
        f.write_text("x")
    with atomic_write(tmp_path / "out.txt") as fh:
        fh.write("ok\n")
    assert sorted(os.listdir(tmp_path)) == sorted(["out.txt", live.name, other.name])


def test_damaged_model_file_is_a_clear_error(tmp_path, capsys):
    # item 7: a flipped byte in a coefficient loaded and predicted other values
    data, _ = _small_files(tmp_path)
    model = tmp_path / "m.joblib"
    assert main(["train", str(data), "--model", str(model), "--n-grids", "4"]) == 0
    capsys.readouterr()
    raw = bytearray(model.read_bytes())
    coef = load_model(str(model))["estimator"].solver_.coef_
    at = bytes(raw).find(coef.tobytes()[:16])
    assert at > 0
    raw[at + 3] ^= 0x10
    model.write_bytes(bytes(raw))
    code = main(["predict", str(model), str(data)])
    _assert_one_line_error(capsys, code, 1, r"damaged rbcd model file.*checksum")


def test_usage_errors_before_the_data_are_read(tmp_path, capsys):
    # items 11 and 17: --seed -1 is a usage error; cg with a logistic loss is refused
    # before reading (the data file here does not even exist)
    missing = str(tmp_path / "missing.svm")
    code = main(["train", missing, "-m", str(tmp_path / "m.joblib"), "--seed", "-1"])
    _assert_one_line_error(capsys, code, 2, r"--seed: expected a non-negative integer")
    code = main(["train", missing, "-m", str(tmp_path / "m.joblib"), "--solver", "cg",
                 "--loss", "logistic"])
    _assert_one_line_error(capsys, code, 2, r"--loss logistic needs --solver cd")
    code = main(["train", missing, "-m", str(tmp_path / "m.joblib"), "--l1-ratio", "0.5"])
    _assert_one_line_error(capsys, code, 2, r"--l1-ratio 0.5 needs --solver cd")


def test_truncated_gzip_input_is_a_clear_error(tmp_path, capsys):
    import gzip

    data, _ = _small_files(tmp_path)
    gz = tmp_path / "d.svm.gz"
    gz.write_bytes(gzip.compress(data.read_bytes())[:300])
    code = main(["train", str(gz), "-m", str(tmp_path / "m.joblib")])
    line = _assert_one_line_error(capsys, code, 1, r"d.svm.gz is truncated or damaged")
    assert "internal error" not in line


def test_unwritable_model_is_found_before_the_fit(tmp_path, capsys, monkeypatch):
    data, _ = _small_files(tmp_path)

    def no_fit(*args, **kwargs):
        raise AssertionError("the fit ran before the model path was checked")

    monkeypatch.setattr(cli, "fit_model", no_fit)
    # /proc/self: a folder in which no one, root included, can create a file
    code = main(["train", str(data), "-m", "/proc/self/rbcd-model.joblib", "--n-grids", "4"])
    _assert_one_line_error(capsys, code, 1, r"cannot write model file")


def test_task_detection_follows_the_help(tmp_path, capsys):
    # item 17: two non-integer label values were taken as two classes
    rng = np.random.default_rng(0)
    X = rng.random((100, 2))
    half = tmp_path / "half.svm"
    dump_svmlight_file(X, np.where(X[:, 0] > 0.5, 2.5, 1.5), str(half))
    assert detect_task(np.array([1.5, 2.5, 1.5])) == "regression"
    assert detect_task(np.array([-1.0, 1.0, 1.0])) == "classification"
    model = tmp_path / "m.joblib"
    assert main(["train", str(half), "-m", str(model), "--n-grids", "4"]) == 0
    out = capsys.readouterr().out
    assert "regression (detected" in out
    train = _line(out, "train")   # regression: R^2, RMSE and MAE
    assert float(_value(train, "R^2")) > 0.5
    assert float(_value(train, "MAE")) <= float(_value(train, "RMSE"))
    code = main(["train", str(half), "-m", str(model), "--task", "classification"])
    _assert_one_line_error(capsys, code, 1, r"classification needs integer labels.*2\.5|1\.5")


def test_predict_proba_class_weight_and_calibration(tmp_path, capsys):
    data, X = _small_files(tmp_path)
    model = tmp_path / "m.joblib"
    assert main(["train", str(data), "-m", str(model), "--n-grids", "4",
                 "--class-weight", "0:3,1:1", "--calibration", "holdout"]) == 0
    capsys.readouterr()
    est = load_model(str(model))["estimator"]
    assert est.class_weight == {0: 3.0, 1: 1.0} and est.calibration == "holdout"
    assert main(["predict", str(model), str(data), "--proba"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "# classes: 0 1"
    proba = np.loadtxt(lines[1:])
    np.testing.assert_allclose(proba, est.predict_proba(X), rtol=1e-5, atol=1e-6)
    assert main(["train", str(data), "-m", str(model), "--n-grids", "4",
                 "--class-weight", "balanced", "--calibration", "none"]) == 0
    capsys.readouterr()
    code = main(["predict", str(model), str(data), "--proba"])
    _assert_one_line_error(capsys, code, 1, r"no probabilities.*--calibration none")
    code = main(["train", str(data), "-m", str(model), "--class-weight", "0:x"])
    _assert_one_line_error(capsys, code, 2, r"--class-weight")


@pytest.mark.parametrize("argv", [["--help"], ["predict", "--help"], ["--version"]])
def test_help_does_not_import_scikit_learn(argv):
    # item 17: every command spent ~2 s importing scikit-learn, --help included
    code = ("import sys, contextlib, io\n"
            "from rbcd.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert main({argv!r}) == 0\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# ------------------------------------------------------------------ QA pass: options, warnings
def test_cv_warnings_are_the_command_lines(tmp_path):
    # `train --cv` let the search's UserWarning through raw ("<frozen runpy>:88:
    # UserWarning: ..."): its warnings go through the fit's handling, once each, with the
    # place to extend the grids that the command line does not search
    data, _ = _small_files(tmp_path)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "rbcd", "train", str(data), "-m",
                           str(tmp_path / "m.joblib"), "--cv", "--n-grids", "8"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines and all(ln.startswith("rbcd: warning: ") for ln in lines), proc.stderr
    edge = [ln for ln in lines if "smallest of the grid" in ln]
    assert len(edge) == 1, proc.stderr
    assert "RBClassifierCV(sigma_factors=..., alphas=...) in Python" in edge[0]


def test_cv_and_fit_warnings_are_shown_once(tmp_path, capsys, monkeypatch):
    # a message of the search (its refit of the best model) and the same one of the
    # command's fit: one line, counted
    from rbcd.models import RBClassifier

    data, _ = _small_files(tmp_path)
    fit = RBClassifier.fit

    def warning_fit(self, X, y, **kwargs):
        import warnings
        warnings.warn("every fit says this", UserWarning)
        return fit(self, X, y, **kwargs)

    monkeypatch.setattr(RBClassifier, "fit", warning_fit)
    assert main(["train", str(data), "-m", str(tmp_path / "m.joblib"), "--cv",
                 "--n-grids", "8", "--n-jobs", "1"]) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "every fit says" in ln]
    assert len(lines) == 1, lines
    assert re.fullmatch(r"rbcd: warning: every fit says this \(x\d+\)", lines[0]), lines


@pytest.mark.parametrize("argv, pattern", [
    (["--multi-class", "ovo", "--solver", "cd"],
     r"--multi-class ovo needs --solver auto, cg or direct"),
    (["--solver", "cd", "--max-iter", "5"], r"--max-iter 5 needs --solver cg or auto \(cd"),
    (["--solver", "direct", "--max-iter", "5"], r"--max-iter 5 needs --solver cg or auto"),
    (["--solver", "cg", "--max-epochs", "5"], r"--max-epochs 5 needs --solver cd \(cg"),
    (["--max-epochs", "5"], r"--max-epochs 5 needs --solver cd \(auto"),
    (["--solver", "cg", "--parallel", "hogwild"], r"--parallel hogwild needs --solver cd"),
    (["--solver", "direct", "--parallel", "serial"], r"--parallel serial needs --solver cd"),
    (["--tol", "0"], r"--tol: expected a number in \(0, inf\)"),
])
def test_options_the_solver_ignores_are_usage_errors(tmp_path, capsys, argv, pattern):
    # refused before the data are read (the data file does not even exist): exit 2
    code = main(["train", str(tmp_path / "missing.svm"), "-m", str(tmp_path / "m.joblib"),
                 *argv])
    _assert_one_line_error(capsys, code, 2, pattern)


def test_solver_options_at_their_defaults_or_with_their_solver_are_accepted(tmp_path, capsys):
    # only an option given with a solver that ignores it is refused: left out (None, the
    # estimator's default) it never is, and auto takes cg's --max-iter
    for params in ({}, {"solver": "cd"}, {"solver": "cg"}, {"solver": "direct"},
                   {"max_iter": 5}, {"solver": "cg", "max_iter": 5},
                   {"solver": "cd", "max_epochs": 3, "parallel": None},
                   {"solver": "cd", "parallel": "hogwild"}, {"multi_class": "ovo"},
                   {"solver": "cd", "multi_class": "ovr"}):
        cli.check_options(params)
    with pytest.raises(cli.UsageError, match="--max-epochs"):
        cli.check_options({"max_epochs": 3}, default_solver="cg")
    data, _ = _small_files(tmp_path)
    assert main(["train", str(data), "-m", str(tmp_path / "m.joblib"), "--solver", "cd",
                 "--n-grids", "4", "--max-epochs", "3"]) == 0
    assert main(["demo", "--n-samples", "500", "--n-test", "100", "--max-epochs", "3"]) == 2
    # the demo's solver is the estimator's default, auto, as its model line shows
    assert "--max-epochs 3 needs --solver cd (auto" in capsys.readouterr().err
    assert main(["train", "--help"]) == 0
    assert "(0, inf)" in " ".join(capsys.readouterr().out.split())


def test_class_weight_repeated_and_negative_labels(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.random((200, 3))
    data = tmp_path / "pm.svm"
    dump_svmlight_file(X, np.where(X[:, 0] > 0.5, 1, -1), str(data))
    model = tmp_path / "m.joblib"
    code = main(["train", str(data), "-m", str(model), "--class-weight", "1:5,1:2"])
    _assert_one_line_error(capsys, code, 2, r"--class-weight: class 1 is given twice")
    # a value starting with '-' is the option's value, not an unknown option
    assert main(["train", str(data), "-m", str(model), "--n-grids", "4",
                 "--class-weight", "-1:5,1:1"]) == 0
    capsys.readouterr()
    assert load_model(str(model))["estimator"].class_weight == {-1: 5.0, 1: 1.0}
    assert cli._attach_dash_values(["train", "--class-weight", "-1:2", "--", "-1"]) == \
        ["train", "--class-weight=-1:2", "--", "-1"]
    assert cli._attach_dash_values(["--class-weight", "-v"]) == ["--class-weight", "-v"]


def test_dense_text_and_string_labels_are_clear_errors(tmp_path, capsys):
    model = tmp_path / "m.joblib"
    dense = tmp_path / "dense.txt"
    np.savetxt(dense, np.arange(12.0).reshape(4, 3))   # space-separated columns
    line = _assert_one_line_error(capsys, main(["train", str(dense), "-m", str(model)]), 1,
                                  r"dense.txt is neither svmlight/libsvm nor CSV")
    assert "label index:value" in line and "unpack" not in line
    words = tmp_path / "words.svm"
    words.write_text("1 1:0.5\nspam 2:1\n")
    line = _assert_one_line_error(capsys, main(["train", str(words), "-m", str(model)]), 1,
                                  r"words.svm: line 2 has label 'spam'")
    assert "must be numbers" in line and "convert" not in line


def test_feature_mismatch_hints_at_the_index_base(tmp_path, capsys):
    X, y = make_checkerboard(200, n_features=5, n_informative=2, n_cells=2, random_state=0)
    one = tmp_path / "one.svm"
    dump_svmlight_file(X, y, str(one), zero_based=False)
    model = tmp_path / "m.joblib"
    assert main(["train", str(one), "-m", str(model), "--n-grids", "4"]) == 0
    capsys.readouterr()
    code = main(["predict", str(model), str(one), "--zero-based", "yes"])
    _assert_one_line_error(capsys, code, 1,
                           r"more features \(6\) than the model.*use --zero-based no")
    # a file that is wider whatever its base: no hint
    wide = tmp_path / "wide.svm"
    dump_svmlight_file(np.hstack([X, X]), y, str(wide), zero_based=False)
    line = _assert_one_line_error(capsys, main(["predict", str(model), str(wide)]), 1,
                                  r"more features \(10\)")
    assert "zero-based" not in line


# ------------------------------------------------------------------ summary lines
def test_parallel_serial_is_shown_as_serial(classification_files, tmp_path, capsys):
    """--parallel serial is the library's parallel=None: the model line says serial (not
    a bare None, which reads as "not set"), and the cd solver line names the mode that
    ran, marked when parallel="auto" chose it."""
    train, _, _, _ = classification_files
    model = tmp_path / "m.joblib"
    common = ["train", str(train), "-m", str(model), "--solver", "cd", "--n-grids", "8",
              "--max-epochs", "3", "--n-jobs", "1"]
    assert main(common + ["--parallel", "serial"]) == 0
    out = capsys.readouterr().out
    model_line = _line(out, "model")
    assert "parallel=None (serial)" in model_line, model_line
    assert re.search(r"parallel=None[,)]", model_line) is None, model_line
    assert "  parallel serial  " in _line(out, "solver")
    assert load_model(str(model))["estimator"].get_params()["parallel"] is None
    # the default, auto, on a small problem runs serial CD: shown as auto's choice
    assert main(common) == 0
    out = capsys.readouterr().out
    assert "parallel" not in _line(out, "model")
    assert "  parallel serial (auto)  " in _line(out, "solver")
    assert main(common + ["--parallel", "grid"]) == 0
    out = capsys.readouterr().out
    assert "parallel='grid'" in _line(out, "model")
    assert "  parallel grid  " in _line(out, "solver")
    # the ridge solvers have no parallel mode: nothing about it
    assert main(["train", str(train), "-m", str(model), "--n-grids", "8", "--n-jobs", "1"]) == 0
    assert "parallel" not in _line(capsys.readouterr().out, "solver")


def test_demo_parallel_serial_is_shown_as_serial(capsys):
    assert main(["demo", "--n-samples", "1000", "--n-test", "1000", "--solver", "cd",
                 "--max-epochs", "2", "--parallel", "serial", "--n-jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "parallel=None (serial)" in _line(out, "model")
    assert "  parallel serial  " in _line(out, "solver")


def _three_classes(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 3))
    y = np.arange(240) % 3
    X[:, 0] += 2 * y
    data = tmp_path / "three.svm"
    dump_svmlight_file(X, y, str(data))
    return data


@pytest.mark.parametrize("solver", ["auto", "cg"])
def test_one_vs_one_solver_line_shows_the_pairs_alphas(tmp_path, capsys, solver):
    """multi_class="ovo" with alpha "auto" chooses one alpha per pair of classes
    (rbcd.solvers._ovo, the solver's alpha_ array): the solver line shows their range,
    marked as chosen per pair; a given alpha is shown as given."""
    data, model = _three_classes(tmp_path), tmp_path / "m.joblib"
    assert main(["train", str(data), "-m", str(model), "--multi-class", "ovo",
                 "--solver", solver, "--n-grids", "16", "--n-jobs", "1"]) == 0
    solver_line = _line(capsys.readouterr().out, "solver")
    est = load_model(str(model))["estimator"]
    alphas = np.asarray(est.alpha_)
    assert alphas.shape == (3,)
    low, high = f"{alphas.min():g}", f"{alphas.max():g}"
    shown = low if low == high else f"{low}..{high}"
    assert f"  alpha {shown} (auto, per pair of classes, 3 pairs)  " in solver_line, \
        solver_line
    assert main(["train", str(data), "-m", str(model), "--multi-class", "ovo",
                 "--solver", solver, "--alpha", "0.25", "--n-grids", "16",
                 "--n-jobs", "1"]) == 0
    solver_line = _line(capsys.readouterr().out, "solver")
    assert "  alpha 0.25  " in solver_line and "auto" not in solver_line, solver_line


def test_alpha_text():
    assert cli._alpha_text({"alpha": 0.5, "alpha_chosen": False}) == "alpha 0.5"
    assert cli._alpha_text({"alpha": np.float64(2.0), "alpha_chosen": True}) == \
        "alpha 2 (auto)"
    assert cli._alpha_text({"alpha": np.array([0.5, 0.03, 3.5]), "alpha_chosen": True,
                            "n_pairs": 3}) == "alpha 0.03..3.5 (auto, per pair of classes, 3 pairs)"
    assert cli._alpha_text({"alpha": np.array([1.0, 1.0]), "alpha_chosen": True,
                            "n_pairs": None}) == "alpha 1 (auto, 2 values)"
    assert cli._alpha_text({"alpha": np.array(0.5), "alpha_chosen": True}) == \
        "alpha 0.5 (auto)"
    assert cli._alpha_text({"alpha": "auto", "alpha_chosen": True}) == ""
    assert cli._alpha_text({"alpha": None}) == ""


# ------------------------------------------------------------------ QA of the command line
def test_auto_is_accepted_where_it_is_the_default(tmp_path, capsys):
    """--help shows "(default: auto)" for --alpha, --n-grids and --linear: 'auto' is a
    value of theirs (the estimator's own rule), not "expected a number"."""
    data, _ = _small_files(tmp_path)
    model = tmp_path / "m.joblib"
    assert main(["train", str(data), "-m", str(model), "--alpha", "auto", "--n-grids",
                 "auto", "--linear", "auto", "--n-jobs", "1"]) == 0
    params = load_model(str(model))["estimator"].get_params()
    assert (params["alpha"], params["n_grids"], params["linear"]) == ("auto", "auto", "auto")
    capsys.readouterr()
    # 'auto' with cd: the default, accepted (cd adds no linear term)
    assert main(["train", str(data), "-m", str(model), "--solver", "cd", "--linear", "auto",
                 "--n-grids", "4", "--max-epochs", "3"]) == 0
    capsys.readouterr()
    line = _assert_one_line_error(capsys, main(["train", str(data), "-m", str(model),
                                                "--alpha", "much"]), 2, r"--alpha")
    assert "or 'auto', got 'much'" in line
    assert main(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "regularization strength, or 'auto'" in text


def test_linear_help_names_the_ridge_solvers(capsys):
    """--linear is for the ridge solvers (auto, cg, direct: as check_options and the
    estimator say), not "cg only"; with --multi-class ovo, which fits no linear term,
    it is a usage error found before the data are read, not a ValueError after."""
    assert main(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    linear = text[text.index("--linear LINEAR "):text.index("--l1-ratio L1_RATIO ")]
    assert "cg only" not in linear and "ridge solvers (auto, cg, direct)" in linear


def test_linear_with_one_vs_one_is_a_usage_error(tmp_path, capsys):
    missing = tmp_path / "missing.svm"
    line = _assert_one_line_error(
        capsys, main(["train", str(missing), "-m", str(tmp_path / "m.joblib"),
                      "--linear", "1", "--multi-class", "ovo"]), 2,
        r"--linear 1 needs --multi-class ovr")
    assert "ValueError" not in line and "linear=" not in line


def test_demo_names_its_solver_and_refuses_too_few_rows(capsys):
    """The demo's solver is the estimator's default (auto, its model line has no
    solver=): its errors name it, and its help gives the example settings for auto,
    cg and direct. Training rows of one class are a usage error, not a ValueError."""
    line = _assert_one_line_error(capsys, main(["demo", "--parallel", "serial"]), 2,
                                  r"--parallel serial needs --solver cd \(auto solves")
    assert "(cg" not in line
    assert main(["demo", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "the demo's 0.1 for auto, cg, direct; 1e-06 for cd" in text
    code = main(["demo", "--n-samples", "1", "--n-test", "10"])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert "ValueError" not in err and "--n-samples 1 is too few" in err
    assert "Traceback" not in err


def test_binning_advice_knows_where_sigma_came_from(tmp_path, capsys):
    """A degenerate binning's advice is the command line's (options, not Python); with
    --sigma scale (the default) it does not advise --sigma scale; identical training
    rows get no sigma advice at all, whatever their number."""
    model = tmp_path / "m.joblib"
    X, y = make_checkerboard(200, n_features=3, n_informative=2, random_state=0)
    data = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(data))
    assert main(["train", str(data), "-m", str(model), "--sigma", "1e6",
                 "--n-grids", "4"]) == 0
    err = capsys.readouterr().err
    warn = [ln for ln in err.splitlines() if ln.startswith("rbcd: warning:")]
    assert len(warn) == 1, err
    assert "median_l1_distance" not in err and "sigma='scale'" not in err
    assert "try --sigma scale" in warn[0] and "--sigma 100000" in warn[0]
    for n in (3, 40):   # below and above the library's 20 rows
        same = tmp_path / f"same{n}.svm"
        dump_svmlight_file(np.ones((n, 3)), np.arange(n) % 2, str(same))
        assert main(["train", str(same), "-m", str(model), "--n-grids", "4"]) == 0
        err = capsys.readouterr().err
        warn = [ln for ln in err.splitlines() if ln.startswith("rbcd: warning:")]
        assert len(warn) == 1, err
        assert f"all {n} training rows are identical" in warn[0]
        assert "smaller sigma" not in err and "check X" not in err
    assert "try --sigma scale" not in cli.binning_advice(1.0, 100, 0.5, rule="scale")
    assert "from the data: --sigma scale" in cli.binning_advice(1.0, 100, 0.5, rule="scale")
    assert "--sigma 0.05" in cli.binning_advice(1.0, 100, 0.5, rule="scale")
    assert "--sigma 10" in cli.binning_advice(99.0, 100, 1.0, rule=1.0)
    assert cli.binning_advice(1.0, 1, 0.5) is None      # one row: always "degenerate"


def test_write_failures_on_devices(tmp_path, capsys):
    """A device or pipe is written in place: a failure there does not claim that "a
    previous file there is unchanged"."""
    data, _ = _small_files(tmp_path)
    model = tmp_path / "m.joblib"
    assert main(["train", str(data), "-m", str(model), "--n-grids", "4"]) == 0
    capsys.readouterr()
    if os.path.exists("/dev/full"):
        for argv, what in ((["predict", str(model), str(data), "-o", "/dev/full"],
                            "output file"),
                           (["train", str(data), "-m", "/dev/full", "--n-grids", "4"],
                            "model file")):
            line = _assert_one_line_error(capsys, main(argv), 1,
                                          rf"cannot write {what} /dev/full: No space")
            assert "previous file" not in line and "nothing was written" not in line
    # a regular file's failure still says that the previous file is kept
    assert "previous file there is unchanged" in cli._write_error(
        "output file", str(data), OSError(28, "No space left on device"))


@pytest.mark.skipif(not os.path.exists("/dev/stdout"), reason="needs /dev/stdout")
def test_a_pipe_whose_reader_left_ends_quietly(tmp_path):
    """predict -o /dev/stdout | head -1: the reader of the pipe has gone; as with stdout,
    the rest is dropped and the command succeeds (it was "cannot write output file
    /dev/stdout: Broken pipe (nothing was written; a previous file there is unchanged)",
    exit 1)."""
    data, _ = _small_files(tmp_path)
    model = tmp_path / "m.joblib"
    assert main(["train", str(data), "-m", str(model), "--n-grids", "2"]) == 0
    many = tmp_path / "many.svm"      # 60,000 lines of predictions: more than a pipe holds
    rng = np.random.default_rng(0)
    dump_svmlight_file(rng.random((60_000, 3)), np.zeros(60_000), str(many))
    env = dict(os.environ, PYTHONPATH=ROOT)
    for output in (["-o", "/dev/stdout"], []):
        proc = subprocess.Popen([sys.executable, "-m", "rbcd", "predict", str(model),
                                 str(many), *output], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        first = proc.stdout.readline()
        proc.stdout.close()           # head -1
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=300) == 0, err
        assert first.strip() in (b"0", b"1")
        assert "error" not in err and "Traceback" not in err, err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_stdout_write_failure_names_stdout(tmp_path):
    data, _ = _small_files(tmp_path)
    model = tmp_path / "m.joblib"
    assert main(["train", str(data), "-m", str(model), "--n-grids", "4"]) == 0
    env = dict(os.environ, PYTHONPATH=ROOT)
    for argv in (["predict", str(model), str(data)],
                 ["train", str(data), "-m", str(tmp_path / "n.joblib"), "--n-grids", "4"]):
        with open("/dev/full", "w") as full:
            proc = subprocess.run([sys.executable, "-m", "rbcd", *argv], stdout=full,
                                  stderr=subprocess.PIPE, text=True, env=env, timeout=300)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.strip().splitlines() == [
            "rbcd: error: cannot write to stdout: No space left on device"], proc.stderr


def test_debug_keeps_the_exit_codes(tmp_path, capsys):
    """--debug shows the traceback instead of the one-line error; the exit code stays
    2 for a usage error and 1 for a data error."""
    code = main(["--debug", "train", str(tmp_path / "d.svm")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" in err and "UsageError" in err
    code = main(["train", str(tmp_path / "missing.svm"), "-m", str(tmp_path / "m"),
                 "--debug"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" in err and "no such file" in err


def test_classification_options_with_regression(tmp_path, capsys, regression_files):
    """With --task regression, a classification option is refused before the data are
    read; with the task detected, the error says how to change it."""
    missing = tmp_path / "missing.svm"
    model = tmp_path / "m.joblib"
    for option in (["--class-weight", "balanced"], ["--calibration", "none"],
                   ["--multi-class", "ovo"], ["--loss", "logistic", "--solver", "cd"]):
        _assert_one_line_error(capsys, main(["train", str(missing), "-m", str(model),
                                             "--task", "regression", *option]), 2,
                               r"is (for|a) classification")
    train, _, _, _ = regression_files
    code = main(["train", str(train), "-m", str(model), "--class-weight", "balanced"])
    _assert_one_line_error(capsys, code, 2,
                           r"the task is regression \(detected from the labels of .*reg.svm: "
                           r"use --task classification")


def test_a_line_without_a_label_says_so(tmp_path, capsys):
    """A line that starts with an index:value pair has no label: saying its "label" is
    '1:0.5' and to "number the classes" misleads, above all for a file to predict."""
    data, _ = _small_files(tmp_path)
    model = tmp_path / "m.joblib"
    assert main(["train", str(data), "-m", str(model), "--n-grids", "4"]) == 0
    capsys.readouterr()
    unlabelled = tmp_path / "new.svm"
    unlabelled.write_text("1:0.5 2:0.3\n1:0.1 3:0.2\n")
    for argv in (["predict", str(model), str(unlabelled)],
                 ["train", str(unlabelled), "-m", str(tmp_path / "n.joblib")]):
        line = _assert_one_line_error(capsys, main(argv), 1,
                                      r"new.svm: line 1 has no label \(it starts with the "
                                      r"pair '1:0.5'\)")
        assert "number the classes" not in line
