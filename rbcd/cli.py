"""The ``rbcd`` command line: ``demo``, ``train`` and ``predict``.

::

    python -m rbcd demo [--n-samples 100000] [--n-jobs N] [--solver cg|cd] [--seed 0]
    python -m rbcd train DATA.svm --model MODEL.joblib [--n-grids 64] [--sigma 1.0]
                         [--solver cg|cd] [--loss ...] [--alpha A] [--l1-ratio R]
                         [--task auto|classification|regression] [--test TEST.svm] ...
    python -m rbcd predict MODEL.joblib DATA.svm [--output FILE]

Models are ``rbcd.RBClassifier`` / ``rbcd.RBRegressor``: random binning (X -> sparse Z),
then ridge by conjugate gradient or coordinate descent on Z, each stage timed
(``fit_time_``). They are saved with joblib inside a dict marked as an rbcd model (see
:func:`save_model`: format, format version, task, estimator, n_features).

Errors are reported as one line on stderr, ``rbcd: error: ...``, with exit code 2 for
usage errors and 1 for data and model errors (``--debug`` shows the traceback instead).
A model file is a pickle: only load model files you trust.
"""
import argparse
import math
import os
import sys
import time
import warnings

import numpy as np

PROG = "rbcd"
MODEL_FORMAT = "rbcd-model"
MODEL_VERSION = 1
MAX_CLASSES_AUTO = 20  # --task auto: integer labels with at most this many values -> classes


class UsageError(Exception):
    """Bad command line (exit code 2)."""


class CLIError(Exception):
    """Bad data, model or file (exit code 1)."""


# ----------------------------------------------------------------------------- arguments
class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: raise UsageError instead of printing usage."""

    def error(self, message):
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _nonzero_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-zero integer, got {text!r}") from None
    if value == 0:
        raise argparse.ArgumentTypeError("expected a non-zero integer (-1 = all cores), got 0")
    return value


def _float_in(low, high=math.inf, low_open=False):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        too_low = value <= low if low_open else value < low
        if not math.isfinite(value) or too_low or value > high:
            left = "(" if low_open else "["
            right = "]" if math.isfinite(high) else ")"
            raise argparse.ArgumentTypeError(
                f"expected a number in {left}{low}, {high}{right}, got {text!r}")
        return value
    return parse


def _add_common(p):
    p.add_argument("--n-jobs", type=_nonzero_int, default=None,
                   help="threads (default: all usable cores / OMP_NUM_THREADS; -1 = all)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def _add_model_options(p, n_grids=64, sigma=1.0, alpha_default="1.0 for cg, 1e-4 for cd",
                       epochs_default=100, tol_default="1e-3 for cg, 1e-4 for cd"):
    p.add_argument("--n-grids", type=_positive_int, default=n_grids,
                   help=f"R, number of random grids (default {n_grids})")
    p.add_argument("--sigma", type=_float_in(0.0, low_open=True), default=sigma,
                   help=f"Laplacian kernel width, exp(-||x-y||_1/sigma) (default {sigma})")
    p.add_argument("--solver", choices=("cg", "cd"), default="cg",
                   help="cg: ridge by conjugate gradient; cd: coordinate descent (default cg)")
    p.add_argument("--loss", choices=("squared", "logistic", "squared_hinge"), default=None,
                   help="cd loss (default: squared for regression, logistic for "
                        "classification; cg is always squared)")
    p.add_argument("--alpha", type=_float_in(0.0), default=None,
                   help=f"regularization (default {alpha_default})")
    p.add_argument("--l1-ratio", type=_float_in(0.0, 1.0), default=0.0,
                   help="cd only: L1 share of the penalty, 0 = ridge, 1 = lasso (default 0)")
    p.add_argument("--max-epochs", type=_positive_int, default=epochs_default,
                   help=f"cd only: maximum epochs (default {epochs_default})")
    p.add_argument("--max-iter", type=_positive_int, default=None,
                   help="cg only: iterations (default: rbcd.RidgeCG's rule)")
    p.add_argument("--tol", type=_float_in(0.0, low_open=True), default=None,
                   help=f"stopping tolerance (default {tol_default})")
    p.add_argument("--parallel", choices=("auto", "grid", "hogwild", "serial"), default="auto",
                   help="cd only: parallel mode (default auto: grid blocks with >1 thread)")


def build_parser():
    parser = _Parser(
        prog=PROG,
        description="Random binning features + parallel coordinate descent / CG solvers.",
        epilog="Model files are pickles (joblib): only load model files you trust.",
    )
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback on errors")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"rbcd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{demo,train,predict}",
                                parser_class=_Parser)

    demo = sub.add_parser(
        "demo", help="train on a generated checkerboard problem and report",
        description="Generate a checkerboard problem (X uniform in [0, 1)^8; the label is the "
                    "parity of the cells of a 2x2 checkerboard in 2 of the 8 dimensions, an "
                    "XOR; the other 6 dimensions are noise; a linear model scores ~50%%), "
                    "train random binning features + a solver on it, and report the test "
                    "accuracy, timings, D, kappa, nnz and threads.")
    demo.add_argument("--n-samples", type=_positive_int, default=100_000,
                      help="training rows (default 100000)")
    demo.add_argument("--n-test", type=_positive_int, default=None,
                      help="test rows (default n_samples // 5, at least 1000)")
    demo.add_argument("--n-cells", type=_positive_int, default=2,
                      help="checkerboard cells per informative dimension (default 2; 4 is "
                           "much harder: ~0.8-0.9 at 100000 rows)")
    _add_model_options(demo, n_grids=64, sigma=0.7, alpha_default="0.1 for cg, 1e-6 for cd",
                       epochs_default=10, tol_default="1e-3 for cg, 1e-2 for cd")
    _add_common(demo)
    demo.add_argument("--verbose", "-v", action="count", default=0, help="solver progress")

    train = sub.add_parser(
        "train", help="fit a model on an svmlight/libsvm file",
        description="Fit random binning features + a solver on DATA (svmlight/libsvm "
                    "format) and save the model with joblib.")
    train.add_argument("data", metavar="DATA", help="training data, svmlight/libsvm format")
    train.add_argument("--model", "-m", required=True, metavar="MODEL",
                       help="where to save the model (joblib)")
    train.add_argument("--test", metavar="TEST", default=None,
                       help="optional test data, scored at the end")
    train.add_argument("--task", choices=("auto", "classification", "regression"),
                       default="auto",
                       help=f"auto: classification when the labels are integers with at most "
                            f"{MAX_CLASSES_AUTO} distinct values (default auto)")
    train.add_argument("--zero-based", choices=("auto", "yes", "no"), default="auto",
                       help="feature indices of DATA start at 0 (yes) or 1 (no, libsvm); auto: "
                            "0 if the file uses index 0 (default). Prediction files are read "
                            "the same way.")
    _add_model_options(train)
    _add_common(train)
    train.add_argument("--verbose", "-v", action="count", default=0,
                       help="solver progress (per-epoch lines for cd)")

    predict = sub.add_parser(
        "predict", help="predict with a saved model",
        description="Predict the rows of DATA (svmlight/libsvm; the labels in the file are "
                    "only used to report a score on stderr), one prediction per line.")
    predict.add_argument("model", metavar="MODEL", help="a model saved by 'rbcd train'")
    predict.add_argument("data", metavar="DATA", help="data, svmlight/libsvm format")
    predict.add_argument("--output", "-o", default=None, metavar="FILE",
                         help="write predictions here (default: stdout)")
    predict.add_argument("--n-jobs", type=_nonzero_int, default=None, help="threads")
    return parser


# ----------------------------------------------------------------------------- data
def load_svmlight(path, n_features=None, zero_based="auto"):
    """Dense float64 X, float64 y and the index base from an svmlight/libsvm file.

    ``zero_based``: True (indices start at 0), False (libsvm's 1-based indices) or "auto":
    zero-based when the file uses index 0, else one-based (scikit-learn's rule). The base
    that was used is returned, so that a model reads its prediction files the way it read
    its training file (a zero-based file that happens not to use column 0 would otherwise
    be shifted by one column). ``n_features`` (the model's input width) pads X with zero
    columns (svmlight omits trailing zero features); a file that uses more columns is an
    error. Every problem is a CLIError.

    Returns (X, y, zero_based).
    """
    from sklearn.datasets import load_svmlight_file

    if not os.path.exists(path):
        raise CLIError(f"cannot read {path}: no such file")
    if os.path.isdir(path):
        raise CLIError(f"cannot read {path}: is a directory")
    try:
        # read the raw indices (as zero-based), then decide the base ourselves
        X, y = load_svmlight_file(path, zero_based=True, dtype=np.float64)
    except OSError as exc:
        raise CLIError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise CLIError(f"{path} is not a valid svmlight/libsvm file: {_one_line(exc)}") from None
    if X.shape[0] == 0:
        raise CLIError(f"{path} has no data rows")
    X = X.tocsr()
    uses_zero = X.nnz > 0 and int(X.indices.min()) == 0
    if zero_based == "auto":
        zero_based = bool(uses_zero)
    if not zero_based:
        if uses_zero:
            raise CLIError(f"{path} uses feature index 0, but the model reads one-based "
                           f"(libsvm) indices like its training file")
        X = X[:, 1:]
    if n_features is not None:
        if X.shape[1] > n_features:
            raise CLIError(f"{path} has more features ({X.shape[1]}) than the model, which "
                           f"was trained on {n_features} features")
        if X.shape[1] < n_features:
            X = X.toarray()
            X = np.hstack([X, np.zeros((X.shape[0], n_features - X.shape[1]))])
    Xd = X.toarray() if hasattr(X, "toarray") else X
    if Xd.shape[1] == 0:
        raise CLIError(f"{path} has no features")
    if not np.all(np.isfinite(Xd)) or not np.all(np.isfinite(y)):
        raise CLIError(f"{path} contains non-finite values (nan or inf)")
    return np.ascontiguousarray(Xd), np.asarray(y, dtype=np.float64), zero_based


def detect_task(y):
    """'classification' when y holds integers with few distinct values, else 'regression'."""
    values = np.unique(y)
    if values.size <= 2:
        return "classification"
    if np.all(values == np.round(values)) and values.size <= MAX_CLASSES_AUTO:
        return "classification"
    return "regression"


def _labels(y):
    """Class labels as int64 when they are all integers (prettier output), else as is."""
    if np.all(y == np.round(y)) and np.all(np.abs(y) < 2**53):
        return y.astype(np.int64)
    return y


# ----------------------------------------------------------------------------- model
def make_model(task, n_grids, sigma, solver="cg", loss=None, alpha=None, l1_ratio=0.0,
               max_epochs=100, max_iter=None, tol=None, parallel="auto", n_jobs=None,
               random_state=0, verbose=0):
    """An unfitted ``RBClassifier`` / ``RBRegressor`` for the command line's options.

    The estimators' own defaults, except the CG tolerance: tol 1e-3 for cg (the paper's
    CG tolerance, enough for prediction) and 1e-4 for cd; alpha 1.0 for cg and 1e-4 for cd.
    """
    from . import RBClassifier, RBRegressor

    classification = task == "classification"
    if solver not in ("cg", "cd"):
        raise UsageError(f"unknown solver {solver!r}; use cg or cd")
    if solver == "cg" and loss not in (None, "squared"):
        raise UsageError(f"--loss {loss} needs --solver cd (cg solves the squared loss)")
    if solver == "cd" and not classification and loss not in (None, "squared"):
        raise UsageError(f"--loss {loss} is a classification loss; regression uses squared")
    cls = RBClassifier if classification else RBRegressor
    return cls(n_grids=n_grids, sigma=sigma, solver=solver,
               loss=None if solver == "cg" else loss,
               alpha=alpha, l1_ratio=l1_ratio, max_epochs=max_epochs, max_iter=max_iter,
               tol=(1e-3 if solver == "cg" else 1e-4) if tol is None else tol,
               parallel=None if parallel == "serial" else parallel, n_jobs=n_jobs,
               random_state=random_state, verbose=verbose if solver == "cd" else 0)


def _effective_alpha(model):
    if model.alpha is not None:
        return model.alpha
    return 1.0 if model.solver == "cg" else 1e-4


def fit_model(model, X, y, log=None):
    """Fit ``model`` (an RB estimator), reporting the binning and solver stages.

    Returns ``info``, a dict with the stage times (the model's ``fit_time_``), D, kappa,
    nnz(Z) (= rows x R: every training row has one entry per grid) and the iterations.
    """
    log = log or (lambda *a, **k: None)
    kind = {"cg": "ridge by conjugate gradient", "cd": "coordinate descent"}[model.solver]
    log(f"fitting: binning (n_grids={model.n_grids}, sigma={model.sigma:g}), then "
        f"{kind} (alpha={_effective_alpha(model):g})...")
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    total = time.perf_counter() - t0
    times = getattr(model, "fit_time_", None) or {}
    t_bin = float(times.get("binning", float("nan")))
    t_solve = float(times.get("solver", total - t_bin))
    binning = model.binning_
    D = int(binning.n_features_out_)
    kappa = float(binning.kappa_)
    nnz = int(X.shape[0]) * int(model.n_grids)
    n_iter = int(np.max(model.n_iter_))
    unit = "iterations" if model.solver == "cg" else "epochs"
    log(f"binning: done in {t_bin:.2f} s: D = {D}, kappa = {kappa:.1f}, nnz = {nnz}")
    log(f"solving ({type(model.solver_).__name__}): done in {t_solve:.2f} s ({unit}: {n_iter})")
    for w in caught:
        log(f"warning: {' '.join(str(w.message).split())}")
    return {"binning_time": t_bin, "solve_time": t_solve, "total_time": t_bin + t_solve,
            "D": D, "kappa": kappa, "nnz": nnz, "n_iter": n_iter}


def save_model(path, estimator, task, n_features, extra=None):
    """Save a fitted estimator with the marks :func:`load_model` checks."""
    import joblib

    from . import __version__

    payload = {"format": MODEL_FORMAT, "format_version": MODEL_VERSION,
               "rbcd_version": __version__, "task": task, "n_features": int(n_features),
               "estimator": estimator}
    if extra:
        payload.update(extra)
    try:
        joblib.dump(payload, path)
    except OSError as exc:
        raise CLIError(f"cannot write model file {path}: {exc.strerror or exc}") from None


def load_model(path):
    """The dict saved by :func:`save_model`, or CLIError if ``path`` is not one."""
    import joblib

    if not os.path.exists(path):
        raise CLIError(f"cannot read model file {path}: no such file")
    if os.path.isdir(path):
        raise CLIError(f"cannot read model file {path}: is a directory")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            payload = joblib.load(path)
    except OSError as exc:
        raise CLIError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    except Exception as exc:  # unpickling random bytes raises anything
        raise CLIError(f"{path} is not an rbcd model file (cannot be loaded: "
                       f"{type(exc).__name__})") from None
    if not (isinstance(payload, dict) and payload.get("format") == MODEL_FORMAT):
        raise CLIError(f"{path} is not an rbcd model file (it holds a "
                       f"{type(payload).__name__}, not a model saved by 'rbcd train')")
    version = payload.get("format_version")
    if version != MODEL_VERSION:
        raise CLIError(f"{path} is an rbcd model of format version {version}; this rbcd "
                       f"reads version {MODEL_VERSION}")
    if not hasattr(payload.get("estimator"), "predict") or "n_features" not in payload:
        raise CLIError(f"{path} is a damaged rbcd model file (no estimator)")
    return payload


def _score_line(task, y_true, y_pred):
    if task == "classification":
        return f"accuracy {np.mean(y_true == y_pred):.4f}"
    rmse = float(np.sqrt(np.mean((np.asarray(y_true, float) - y_pred) ** 2)))
    return f"RMSE {rmse:.4g}"


def _threads_line(n_jobs):
    from ._openmp_info import openmp_is_enabled
    from ._threads import effective_n_threads

    n = effective_n_threads(n_jobs)
    omp = "OpenMP" if openmp_is_enabled() else "no OpenMP: serial kernels"
    return n, f"threads: {n} ({omp})"


def _printer(stream):
    def log(*args, end="\n"):
        print(*args, end=end, file=stream, flush=True)
    return log


# ----------------------------------------------------------------------------- commands
def cmd_demo(args, out):
    from .datasets import make_checkerboard

    log = _printer(out)
    n_test = args.n_test if args.n_test is not None else max(1000, args.n_samples // 5)
    n_threads, threads = _threads_line(args.n_jobs)
    if args.n_cells < 2:
        raise UsageError("--n-cells must be at least 2")
    c = args.n_cells
    log(f"rbcd demo: checkerboard (parity of {c}x{c} cells in 2 of 8 dimensions, 6 noise "
        f"dimensions), {args.n_samples} train / {n_test} test rows, seed {args.seed}")
    t0 = time.perf_counter()
    X, y = make_checkerboard(args.n_samples + n_test, n_features=8, n_informative=2,
                             n_cells=c, random_state=args.seed)
    Xtr, ytr, Xte, yte = X[:args.n_samples], y[:args.n_samples], X[args.n_samples:], y[args.n_samples:]
    log(f"data generated in {time.perf_counter() - t0:.2f} s")
    log(threads)
    # demo defaults, tuned on this problem: the CG ridge alpha is a sum-of-squares
    # penalty, the CD alpha multiplies a mean loss (so ~ alpha_cg / N)
    alpha = args.alpha
    if alpha is None:
        alpha = 0.1 if args.solver == "cg" else 1e-6
    tol = args.tol
    if tol is None:
        tol = 1e-3 if args.solver == "cg" else 1e-2
    model = make_model(
        "classification", args.n_grids, args.sigma, solver=args.solver, loss=args.loss,
        alpha=alpha, l1_ratio=args.l1_ratio, max_epochs=args.max_epochs,
        max_iter=args.max_iter, tol=tol, parallel=args.parallel, n_jobs=args.n_jobs,
        random_state=args.seed, verbose=args.verbose)
    info = fit_model(model, Xtr, ytr, log=log)
    t0 = time.perf_counter()
    test_acc = float(np.mean(model.predict(Xte) == yte))
    t_pred = time.perf_counter() - t0
    train_acc = float(np.mean(model.predict(Xtr[:n_test]) == ytr[:n_test]))
    log("")
    log(f"test accuracy:  {test_acc:.4f}   (train accuracy on {min(n_test, args.n_samples)} "
        f"rows: {train_acc:.4f}; a linear model scores ~0.5)")
    log(f"time:           binning {info['binning_time']:.2f} s + solving "
        f"{info['solve_time']:.2f} s = total {info['total_time']:.2f} s "
        f"(predicting {n_test} rows: {t_pred:.2f} s)")
    log(f"features:       D = {info['D']} columns from R = {args.n_grids} grids, "
        f"kappa = {info['kappa']:.1f}, nnz = {info['nnz']}")
    log(f"solver:         {type(model).__name__}(solver={args.solver!r}) -> "
        f"{type(model.solver_).__name__}, alpha = {_effective_alpha(model):g}")
    log(f"threads:        {n_threads}")
    return 0


def _check_writable(path, what):
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise CLIError(f"cannot write {what} {path}: is a directory")
    if not os.path.isdir(directory):
        raise CLIError(f"cannot write {what} {path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise CLIError(f"cannot write {what} {path}: permission denied")


def cmd_train(args, out):
    log = _printer(out)
    _check_writable(args.model, "model file")
    t_start = time.perf_counter()
    X, y, zero_based = load_svmlight(
        args.data, zero_based={"auto": "auto", "yes": True, "no": False}[args.zero_based])
    Xte = yte = None
    if args.test is not None:
        Xte, yte, _ = load_svmlight(args.test, n_features=X.shape[1], zero_based=zero_based)
    task = detect_task(y) if args.task == "auto" else args.task
    if task == "classification":
        y = _labels(y)
        if yte is not None:
            yte = _labels(yte)
        n_classes = np.unique(y).size
        if n_classes < 2:
            raise CLIError(f"{args.data}: classification needs at least 2 classes, "
                           f"the labels hold only {np.unique(y)[0]}")
        what = f"classification, {n_classes} classes"
    else:
        what = "regression"
    how = "detected; --task to change" if args.task == "auto" else "from --task"
    log(f"rbcd train: {args.data}: {X.shape[0]} rows x {X.shape[1]} features, "
        f"{what} ({how})")
    n_threads, threads = _threads_line(args.n_jobs)
    log(threads)
    model = make_model(
        task, args.n_grids, args.sigma, solver=args.solver, loss=args.loss, alpha=args.alpha,
        l1_ratio=args.l1_ratio, max_epochs=args.max_epochs, max_iter=args.max_iter,
        tol=args.tol, parallel=args.parallel, n_jobs=args.n_jobs, random_state=args.seed,
        verbose=args.verbose)
    info = fit_model(model, X, y, log=log)
    log(f"train {_score_line(task, y, model.predict(X))}")
    if Xte is not None:
        log(f"test {_score_line(task, yte, model.predict(Xte))} ({args.test}, {Xte.shape[0]} rows)")
    save_model(args.model, model, task, X.shape[1],
               extra={"train_file": os.path.abspath(args.data), "fit_info": info,
                      "zero_based": zero_based})
    log(f"summary: {task}, wall time {time.perf_counter() - t_start:.2f} s including I/O (binning "
        f"{info['binning_time']:.2f} s, solving {info['solve_time']:.2f} s), D = {info['D']}, "
        f"kappa = {info['kappa']:.1f}, nnz = {info['nnz']}, threads = {n_threads}")
    log(f"model saved to {args.model}")
    return 0


def _format_predictions(pred, task):
    if task == "classification" and pred.dtype.kind in "iub":
        return [str(int(v)) for v in pred]
    if task == "classification" and np.all(pred == np.round(pred)):
        return [str(int(v)) for v in pred]
    return [repr(float(v)) for v in pred]


def cmd_predict(args, out):
    payload = load_model(args.model)
    if args.output is not None:
        _check_writable(args.output, "output file")
    n_features = payload["n_features"]
    X, y, _ = load_svmlight(args.data, n_features=n_features,
                            zero_based=payload.get("zero_based", "auto"))
    est = payload["estimator"]
    if args.n_jobs is not None:  # the binning's transform and the solver's products
        for part in (est, getattr(est, "binning_", None), getattr(est, "solver_", None)):
            if part is not None and "n_jobs" in part.get_params():
                part.set_params(n_jobs=args.n_jobs)
    t0 = time.perf_counter()
    pred = np.asarray(est.predict(X))
    elapsed = time.perf_counter() - t0
    lines = "\n".join(_format_predictions(pred, payload["task"])) + "\n"
    if args.output is None:
        out.write(lines)
        out.flush()
    else:
        try:
            with open(args.output, "w") as fh:
                fh.write(lines)
        except OSError as exc:
            raise CLIError(f"cannot write output file {args.output}: "
                           f"{exc.strerror or exc}") from None
    task = payload["task"]
    yl = _labels(y) if task == "classification" else y
    where = "" if args.output is None else f" to {args.output}"
    print(f"rbcd predict: {X.shape[0]} predictions{where} in {elapsed:.2f} s; "
          f"{_score_line(task, yl, pred)} against the labels in {args.data}",
          file=sys.stderr)
    return 0


COMMANDS = {"demo": cmd_demo, "train": cmd_train, "predict": cmd_predict}


def main(argv=None, out=None):
    """Run ``rbcd`` with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    0 on success, 2 for a usage error, 1 for a data / model / file error; errors are
    one line on stderr, ``rbcd: error: ...``.
    """
    out = sys.stdout if out is None else out
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    debug = "--debug" in argv
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version
            return int(exc.code or 0) if not isinstance(exc.code, str) else 2
        if args.command is None:
            raise UsageError(f"a command is required: demo, train or predict (see '{PROG} --help')")
        return COMMANDS[args.command](args, out)
    except UsageError as exc:
        if debug:
            raise
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except CLIError as exc:
        if debug:
            raise
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, MemoryError, OSError) as exc:
        if debug:
            raise
        print(f"{PROG}: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: still one line, the traceback with --debug
        if debug:
            raise
        print(f"{PROG}: error: internal error, {type(exc).__name__}: {_one_line(exc)} "
              f"(run with --debug for the traceback)", file=sys.stderr)
        return 1


def _one_line(exc):
    return " ".join(str(exc).split())
