"""The ``rbcd`` command line: ``demo``, ``train`` and ``predict``.

::

    python -m rbcd demo [--n-samples 100000] [--n-jobs N] [--solver cg|cd] [--seed 0] [-v]
    python -m rbcd train DATA.svm --model MODEL.joblib [--test TEST.svm]
                         [--task auto|classification|regression] [--zero-based auto|yes|no]
                         [--n-grids R] [--sigma S|scale] [--solver cg|cd] [--loss ...]
                         [--alpha A] [--l1-ratio R] [--tol T] ... [-v]
                         [--class-weight balanced|LABEL:W,...] [--calibration ...]
    python -m rbcd predict MODEL.joblib DATA.svm [--output FILE] [--proba] [--zero-based ...]

Models are ``rbcd.RBClassifier`` / ``rbcd.RBRegressor``: random binning (X -> sparse Z),
then ridge by conjugate gradient or coordinate descent on Z.

**One set of defaults.** Every model option left out keeps the estimator's own default
(read from ``RBClassifier().get_params()`` and shown by ``--help``), so ``train`` fits
exactly what ``RBClassifier(...)`` fits in Python with the same arguments. The only
settings of the command line's own are ``--seed 0`` (runs are reproducible) and the demo's
example settings for its checkerboard, which it prints as the estimator it builds.

**Output.** Results go to stdout as labelled lines, a label and then ``name value`` pairs,
ending with one summary line such as
``result   test accuracy 0.9386  train accuracy 0.9712  D 10114  kappa 17.9  fit 1.23 s``.
``predict`` writes one prediction per line to stdout or ``--output`` and its summary to
stderr. Progress (the stages, and the estimator's own ``verbose`` output) goes to stderr
when stderr is a terminal, and is quiet otherwise; ``-v`` asks for it anyway (a summary per
stage), ``-vv`` for per-iteration lines. Warnings go to stderr, each distinct one once;
a degenerate binning (``kappa_`` close to N: every row alone in its bins; or close to 1:
every row in the same bin) gets a warning that says which sigma to try.

**svmlight files stay sparse.** Files are read with scikit-learn's ``load_svmlight_file``
into CSR and handed to the estimator as CSR when it accepts sparse input; otherwise they are
converted to a dense array in one place (:func:`model_input`), after an estimate of the
memory that needs (a file whose width would not fit is a clear error naming the width and
the memory, not an allocation of many GB). The index base follows scikit-learn's
``zero_based="auto"`` rule (zero-based when the file uses index 0, else libsvm's one-based
indices), or ``--zero-based yes|no``; ``predict`` reads files the way the model's training
file was read. Feature indices must fit scikit-learn's reader (at most 2^31 - 1); a larger
one is an error naming the line.

**Files.** The model (joblib, inside a dict marked as an rbcd model, see
:func:`save_model`) and the predictions are written atomically (:mod:`rbcd._io`): a
failed write (full disk, quota, Ctrl-C, SIGTERM) leaves the previous file, or none, never a
truncated one, and no temporary file (one left by SIGKILL is removed by the next write).
A device or pipe (``-o /dev/stdout``) is written in place. An output that is one of the
command's inputs (``train d.svm --model d.svm``, ``predict m.joblib t.svm -o t.svm``) is
refused, and an output that cannot be written is found before any work. The model's
state carries checksums (:mod:`rbcd._integrity`): a damaged file is an error, not other
predictions. A model file is a pickle: only load model files you trust.

**Errors** are one line on stderr, ``rbcd: error: ...``, with exit code 2 for usage errors
and 1 for data, model and file errors (``--debug`` shows the traceback instead); 130 after
Ctrl-C, 143 after SIGTERM.
"""
import argparse
import contextlib
import math
import os
import re
import sys
import time
import warnings

import numpy as np

PROG = "rbcd"
MODEL_FORMAT = "rbcd-model"
MODEL_VERSION = 1
MAX_CLASSES_AUTO = 20  # --task auto: integer labels with at most this many values -> classes
#: scikit-learn's svmlight reader keeps feature indices in a C int.
SVMLIGHT_MAX_INDEX = 2**31 - 1
#: A dense conversion may use at most this share of the available memory.
DENSE_MEMORY_SHARE = 0.5
#: Peak bytes per (grid, input feature) of fitting the binning on dense input (widths,
#: offsets, bin ranges and their scratch copies; measured, 256-356 bytes at d = 10^4-10^5).
BINNING_BYTES_PER_GRID_FEATURE = 256
#: Degenerate binning: kappa_ (N / the largest bin's count, averaged over the grids) at
#: least this share of N means most rows are alone in their bins in every grid.
KAPPA_HIGH_SHARE = 0.5
KAPPA_HIGH_MIN_ROWS = 20
#: kappa_ at most this means the largest bin of a grid holds over 90% of the rows.
KAPPA_LOW = 1.1

#: The demo's example settings for its checkerboard (passed to the estimator, and printed
#: with it): a bandwidth below the default 1.0 for cells of width 0.5, a lighter ridge, and
#: the looser tolerance that is enough for classification. Anything not here, and
#: everything in ``train``, is the estimator's default.
DEMO_SETTINGS = {
    "cg": {"sigma": 0.7, "alpha": 0.1, "tol": 1e-3},
    "cd": {"sigma": 0.7, "alpha": 1e-6, "l1_ratio": 0.0, "tol": 1e-2, "max_epochs": 10},
}


class UsageError(Exception):
    """Bad command line (exit code 2)."""


class CLIError(Exception):
    """Bad data, model or file (exit code 1)."""


class Terminated(BaseException):
    """SIGTERM arrived (exit code 143). A BaseException, like KeyboardInterrupt, so that
    it unwinds through every ``except Exception`` and the atomic writes remove their
    temporary files on the way out."""


@contextlib.contextmanager
def _sigterm_unwinds():
    """While the command runs, SIGTERM raises :class:`Terminated` in the main thread
    (Python's default would end the process at once, leaving a temporary file behind);
    the previous handler is restored afterwards. Elsewhere than the main thread, nothing
    changes."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _command_of(argv):
    """The subcommand named in ``argv`` (the first of demo/train/predict before any
    other positional argument), or None."""
    for token in argv:
        if token in COMMANDS:
            return token
        if not token.startswith("-"):
            return None
    return None


# ----------------------------------------------------------------------------- arguments
def _attach_dash_values(argv):
    """``argv`` with ``--class-weight -1:5,1:1`` passed as ``--class-weight=-1:5,1:1``:
    argparse takes a separate value that starts with '-' (other than a plain negative
    number) for an option and stops with "expected one argument", and class labels may be
    negative. Only a value after --class-weight that starts with '-' and a digit or '.'
    (no option does) is attached; nothing after ``--`` changes."""
    out = []
    tokens = iter(argv)
    for token in tokens:
        if token == "--":
            out.append(token)
            out.extend(tokens)
            break
        if token == "--class-weight":
            value = next(tokens, None)
            if value is not None and len(value) > 1 and value[0] == "-" \
                    and (value[1].isdigit() or value[1] == "."):
                out.append(f"{token}={value}")
                continue
            out.extend([token] if value is None else [token, value])
            continue
        out.append(token)
    return out


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: raise UsageError instead of printing usage."""

    def error(self, message):
        hint = getattr(self, "help_hint", None) or f"{self.prog} --help"
        raise UsageError(f"{message} (see '{hint}')")


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _seed(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _class_weight(text):
    """--class-weight: 'balanced', or 'LABEL:WEIGHT,...' (labels as in the data file)."""
    if text == "balanced":
        return text
    weights = {}
    for part in text.split(","):
        label, sep, weight = part.partition(":")
        try:
            label_value, value = float(label), float(weight)
        except ValueError:
            label_value = value = None
        if not sep or value is None or not (math.isfinite(value) and value >= 0) \
                or not math.isfinite(label_value):
            raise argparse.ArgumentTypeError(
                f"expected 'balanced' or LABEL:WEIGHT pairs separated by commas, with finite "
                f"non-negative weights (e.g. 1:5,-1:1), got {text!r}")
        key = int(label_value) if label_value == int(label_value) else label_value
        if key in weights:
            raise argparse.ArgumentTypeError(f"class {key} is given twice in {text!r}")
        weights[key] = value
    return weights


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
                f"expected a number in {left}{low:g}, {high:g}{right}, got {text!r}")
        return value
    return parse


def _sigma(text):
    if text == "scale":
        return text
    try:
        return _float_in(0.0, low_open=True)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a positive number or 'scale', got {text!r}") from None


def _or_auto(parse, expected):
    """A type that takes 'auto' (the estimator's own rule, the default that --help shows)
    besides what ``parse`` takes."""
    def parse_or_auto(text):
        if text == "auto":
            return text
        try:
            return parse(text)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"expected {expected} or 'auto', "
                                             f"got {text!r}") from None
    return parse_or_auto


def _parallel(text):
    return None if text == "serial" else text


# Model options: (flag, estimator parameter, argparse keywords, help). Their argparse
# default is None, "not given": the estimator's own default applies (shown in --help).
_MODEL_OPTIONS = (
    ("--n-grids", "n_grids", {"type": _or_auto(_positive_int, "a positive integer")},
     "R, the number of random grids, or 'auto' (the estimator's rule)"),
    ("--sigma", "sigma", {"type": _sigma},
     "Laplacian kernel width, exp(-||x-y||_1/sigma), or 'scale' (from the data) where the "
     "estimator supports it"),
    ("--solver", "solver", {"choices": ("auto", "cg", "direct", "cd")},
     "auto: direct on small data, else cg; cg: ridge by conjugate gradient; direct: ridge "
     "by one Cholesky factorization (n x n or D x D); cd: coordinate descent (any loss and "
     "penalty)"),
    ("--loss", "loss", {"choices": ("squared", "logistic", "squared_hinge")},
     "cd loss (cg is always squared)"),
    ("--alpha", "alpha", {"type": _or_auto(_float_in(0.0), "a number in [0, inf)")},
     "regularization strength, or 'auto' (chosen by the fit)"),
    ("--linear", "linear", {"type": _or_auto(_float_in(0.0), "a number in [0, inf)")},
     "ridge solvers (auto, cg, direct) and --multi-class ovr only: weight of a linear "
     "kernel on the standardized features beside the random binning kernel, 0 = none "
     "('auto', up to 1,000 rows: classification chooses 0 or 1 with alpha, regression "
     "takes 1)"),
    ("--l1-ratio", "l1_ratio", {"type": _float_in(0.0, 1.0)},
     "cd only: L1 share of the penalty, 1 = lasso, 0 = ridge"),
    ("--max-epochs", "max_epochs", {"type": _positive_int}, "cd only: maximum epochs"),
    ("--max-iter", "max_iter", {"type": _positive_int},
     "cg, and auto where it runs cg: maximum iterations"),
    ("--tol", "tol", {"type": _float_in(0.0, low_open=True)},
     "stopping tolerance, in (0, inf)"),
    ("--parallel", "parallel", {"choices": ("auto", "grid", "hogwild", "serial")},
     "cd only: parallel mode (serial = one coordinate at a time)"),
)


def estimator_defaults():
    """``{parameter: default}`` of ``RBClassifier``, and the values its ``None`` defaults
    resolve to for each solver (``{"cg": {...}, "cd": {...}}``, empty when the estimator
    does not say). The command line's help is built from these; it repeats none of them."""
    from .models import RBClassifier

    params = RBClassifier().get_params()
    resolved = {}
    for solver in ("cg", "cd"):
        try:  # (solver, alpha, tol, loss) with the solver-dependent defaults filled in
            _, alpha, tol, loss = RBClassifier(solver=solver)._effective()
            resolved[solver] = {"alpha": alpha, "tol": tol, "loss": loss}
        except Exception:  # a private helper: the help just says less without it
            resolved = {}
            break
    return params, resolved


def _default_text(param, params, resolved, demo=None):
    """The ``(default: ...)`` of an option's help, from the estimator (and the demo)."""
    if demo is not None and any(param in demo[s] for s in demo):
        # the demo's "cg" settings are those of every solver but cd (auto, its default,
        # cg and direct: cmd_demo)
        names = {s: "auto, cg, direct" if s == "cg" else s for s in demo}
        values = {demo[s].get(param) for s in demo}
        if len(values) == 1:
            return f"the demo's {values.pop():g}"
        parts = [f"{demo[s][param]:g} for {names[s]}" for s in demo if param in demo[s]]
        parts += [f"the estimator's for {names[s]}" for s in demo if param not in demo[s]]
        return "the demo's " + "; ".join(parts)
    value = params.get(param)
    if value is None and resolved and param in resolved["cg"]:
        if param == "loss":
            return "None: squared for regression and cg, logistic for cd classification"
        return "None: " + ", ".join(
            (f"{resolved[s][param]:g}" if isinstance(resolved[s][param], (int, float))
             else str(resolved[s][param])) + f" for {s}" for s in resolved)
    if value is None:
        return "None, the estimator's rule"
    return f"{value}"


def _add_model_options(p, demo=None):
    params, resolved = estimator_defaults()
    for flag, param, kwargs, text in _MODEL_OPTIONS:
        if param not in params:  # the estimator lost the parameter: so does the CLI
            continue
        default = _default_text(param, params, resolved, demo).replace("%", "%%")
        p.add_argument(flag, dest=param, default=None, **kwargs,
                       help=f"{text} (default: {default})")


def _add_debug(p):
    # the top-level --debug, accepted after the command too (SUPPRESS: not given here does
    # not override a --debug before the command)
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the Python traceback on errors")


def _add_common(p):
    p.add_argument("--n-jobs", type=_nonzero_int, default=None,
                   help="threads (default: OpenMP's, OMP_NUM_THREADS or all usable cores, "
                        "less the cores other processes keep busy at the time; -1 = all, "
                        "-2 = all but one)")
    p.add_argument("--seed", type=_seed, default=0,
                   help="random_state of the estimator, a non-negative integer (default 0: "
                        "reproducible runs)")
    _add_debug(p)
    p.add_argument("--verbose", "-v", action="count", default=0,
                   help="progress on stderr even when it is not a terminal: -v a line per "
                        "stage, -vv also the estimator's own lines, per iteration")


_ZERO_BASED = {"auto": "auto", "yes": True, "no": False}


def build_parser(command=None):
    """The argument parser. ``command``: the subcommand being run, the only one whose model
    options (and their defaults, read from the estimator, which imports scikit-learn) are
    built; None builds none (``rbcd --help`` lists the commands). ``rbcd --help`` and
    ``rbcd predict ...`` then do not import the estimators' modules before they need them."""
    def wants(name):
        return command == name

    parser = _Parser(
        prog=PROG,
        description="Random binning features + parallel coordinate descent / CG solvers.",
        epilog="Model files are pickles (joblib): only load model files you trust.",
    )
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback on errors")
    # an unknown option is reported by this parser: point at the command's own help
    parser.help_hint = f"{PROG} {command} --help" if command else None
    from . import __version__

    parser.add_argument("--version", action="version", version=f"rbcd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{demo,train,predict}",
                                parser_class=_Parser)

    demo = sub.add_parser(
        "demo", help="train on a generated checkerboard problem and report",
        description="Generate a checkerboard problem (X uniform in [0, 1)^8; the label is the "
                    "parity of the cells of a 2x2 checkerboard in 2 of the 8 dimensions, an "
                    "XOR; the other 6 dimensions are noise; a linear model scores ~50%), "
                    "train random binning features + a solver on it, and report the test "
                    "accuracy, timings, D, kappa, nnz and threads. The demo passes its own "
                    "example settings for this problem to the estimator (shown below and in "
                    "its output); options override them.")
    demo.add_argument("--n-samples", type=_positive_int, default=100_000,
                      help="training rows (default 100000)")
    demo.add_argument("--n-test", type=_positive_int, default=None,
                      help="test rows (default n_samples // 5, at least 1000)")
    demo.add_argument("--n-cells", type=_positive_int, default=2,
                      help="checkerboard cells per informative dimension (default 2; 4 is "
                           "much harder)")
    if wants("demo"):
        _add_model_options(demo, demo=DEMO_SETTINGS)
    _add_common(demo)

    train = sub.add_parser(
        "train", help="fit a model on an svmlight/libsvm file",
        description="Fit random binning features + a solver on DATA (svmlight/libsvm "
                    "format, kept sparse) and save the model with joblib. Model options "
                    "left out keep the estimator's defaults (rbcd.RBClassifier / "
                    "rbcd.RBRegressor).")
    train.add_argument("data", metavar="DATA", help="training data, svmlight/libsvm format")
    train.add_argument("--model", "-m", required=True, metavar="MODEL",
                       help="where to save the model (joblib; written atomically)")
    train.add_argument("--test", metavar="TEST", default=None,
                       help="optional test data, scored at the end")
    train.add_argument("--cv", action="store_true",
                       help="choose sigma (multipliers of the scale rule) and alpha by "
                            "leave-one-out (5 folds from 2,001 to 20,000 rows, or with "
                            "--solver cd) as rbcd.model_selection.RBClassifierCV "
                            "/ RBRegressorCV do with cv=None, then fit the best model on all "
                            "rows")
    train.add_argument("--task", choices=("auto", "classification", "regression"),
                       default="auto",
                       help=f"auto: classification when the labels are integers with at most "
                            f"{MAX_CLASSES_AUTO} distinct values (default auto)")
    train.add_argument("--zero-based", choices=tuple(_ZERO_BASED), default="auto",
                       help="feature indices of DATA start at 0 (yes) or 1 (no, libsvm); auto: "
                            "0 if the file uses index 0, else 1, scikit-learn's rule (default "
                            "auto). TEST and prediction files are read the same way.")
    if wants("train"):
        _add_model_options(train)
    train.add_argument("--class-weight", type=_class_weight, default=None,
                       metavar="balanced|LABEL:W,...",
                       help="classification: weights of the classes, 'balanced' (inverse to "
                            "their frequencies) or LABEL:WEIGHT pairs, e.g. 1:5,-1:1 (default: "
                            "none)")
    train.add_argument("--multi-class", choices=("ovr", "ovo"), default=None,
                       help="classification with more than two classes: one-vs-rest, or "
                            "one-vs-one (a ridge problem per pair of classes and a vote; "
                            "--solver auto, cg or direct) (default: the estimator's, ovr; "
                            "with --cv the search scores both and keeps the better)")
    train.add_argument("--calibration", choices=("train", "holdout", "none"), default=None,
                       help="classification: how predict --proba turns the scores of a model "
                            "without probabilities of its own into probabilities: fitted on "
                            "the training rows, on a held-out fifth, or none (no --proba) "
                            "(default: the estimator's, train)")
    _add_common(train)

    predict = sub.add_parser(
        "predict", help="predict with a saved model",
        description="Predict the rows of DATA (svmlight/libsvm; the labels in the file are "
                    "only used to report a score on stderr), one prediction per line.")
    predict.add_argument("model", metavar="MODEL", help="a model saved by 'rbcd train'")
    predict.add_argument("data", metavar="DATA", help="data, svmlight/libsvm format")
    predict.add_argument("--output", "-o", default=None, metavar="FILE",
                         help="write predictions here, atomically (default: stdout); a "
                              "device or pipe such as /dev/stdout is written in place. It must "
                              "not be MODEL or DATA")
    predict.add_argument("--proba", action="store_true",
                         help="classification: write each row's class probabilities instead "
                              "of its label, space-separated in the order of a first line "
                              "'# classes: ...'")
    predict.add_argument("--zero-based", choices=tuple(_ZERO_BASED), default=None,
                         help="index base of DATA (default: the base of the model's "
                              "training file)")
    predict.add_argument("--n-jobs", type=_nonzero_int, default=None, help="threads")
    _add_debug(predict)
    return parser


# ----------------------------------------------------------------------------- data
def _open_text(path):
    """The file as text lines, decompressed like scikit-learn's reader does."""
    if path.endswith(".gz"):
        import gzip

        return gzip.open(path, "rt", errors="replace")
    if path.endswith(".bz2"):
        import bz2

        return bz2.open(path, "rt", errors="replace")
    return open(path, errors="replace")


def _first_line(path):
    """The file's first non-blank line, stripped ("" if unreadable)."""
    try:
        with _open_text(path) as fh:
            for line in fh:
                if line.strip():
                    return line.strip()
    except (OSError, EOFError, ValueError):
        pass
    return ""


def _first_large_index(path, limit=SVMLIGHT_MAX_INDEX):
    """(line number, index) of the first feature index above ``limit``, or None."""
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            for token in line.split("#", 1)[0].split()[1:]:
                key = token.split(":", 1)[0]
                if key != "qid" and key.lstrip("+-").isdigit() and abs(int(key)) > limit:
                    return lineno, int(key)
    return None


def _first_bad_label(path):
    """(line number, label) of the first data line whose label is not a number, or None."""
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            tokens = line.split("#", 1)[0].split()
            if tokens:
                try:
                    float(tokens[0])
                except ValueError:
                    return lineno, tokens[0]
    return None


def _first_bad_row(X, y):
    """Index of the first row with a non-finite label or value, or None."""
    bad = ~np.isfinite(y)
    if not np.all(np.isfinite(X.data)):
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        bad[rows[~np.isfinite(X.data)]] = True
    hits = np.flatnonzero(bad)
    return int(hits[0]) if hits.size else None


def load_svmlight(path, n_features=None, zero_based="auto"):
    """CSR float64 X, float64 y and the index base of an svmlight/libsvm file.

    ``zero_based``: True (indices start at 0), False (libsvm's one-based indices) or
    "auto": zero-based when the file uses index 0, else one-based (scikit-learn's rule).
    The base that was used is returned, so that a model reads its prediction files the
    way it read its training file (a zero-based file that happens not to use column 0
    would otherwise be shifted by one column). ``n_features`` (the model's input width)
    widens X to that many columns (svmlight omits trailing zero features); a file that
    uses more columns is an error. X stays sparse: nothing here allocates more than the
    file's non-zeros. Every problem is a CLIError naming the file.

    Returns (X, y, zero_based).
    """
    import lzma
    import zlib

    import scipy.sparse as sp
    from sklearn.datasets import load_svmlight_file

    if not os.path.exists(path):
        raise CLIError(f"cannot read {path}: no such file")
    if os.path.isdir(path):
        raise CLIError(f"cannot read {path}: is a directory")
    try:
        # read the raw indices (as zero-based), then decide the base ourselves
        X, y = load_svmlight_file(path, zero_based=True, dtype=np.float64)
    except OverflowError:
        found = _first_large_index(path)
        where = f"line {found[0]} has feature index {found[1]}" if found else \
            "a feature index is too large"
        raise CLIError(f"{path}: {where}; the svmlight reader (scikit-learn's) takes "
                       f"indices up to {SVMLIGHT_MAX_INDEX} (2^31 - 1): number the features "
                       f"from 0 or 1 without gaps, or hash them into a smaller range") from None
    except (EOFError, zlib.error, lzma.LZMAError) as exc:
        raise CLIError(f"{path} is truncated or damaged: its compressed data ends early or "
                       f"does not decompress ({_one_line(exc)})") from None
    except OSError as exc:
        if exc.strerror is None and path.endswith((".gz", ".bz2")):  # BadGzipFile, bz2's
            raise CLIError(f"{path} is not a valid compressed file ({_one_line(exc)})") from None
        raise CLIError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        line = _first_line(path)
        expected = ("rbcd reads svmlight/libsvm files, one row per line as 'label "
                    "index:value ...' (in Python: sklearn.datasets.dump_svmlight_file "
                    "writes them)")
        if "," in line and ":" not in line:
            raise CLIError(f"{path} looks like a CSV file (its first line has commas and no "
                           f"index:value pairs); {expected}") from None
        if ":" not in line and len(line.split()) > 1:
            raise CLIError(f"{path} is neither svmlight/libsvm nor CSV: its first line is "
                           f"columns separated by spaces, with no index:value pairs; "
                           f"{expected}") from None
        try:
            bad = _first_bad_label(path)
        except (OSError, EOFError, ValueError):
            bad = None
        if bad is not None and ":" in bad[1]:   # an index:value pair where the label goes
            raise CLIError(f"{path}: line {bad[0]} has no label (it starts with the pair "
                           f"{bad[1]!r}); every line of an svmlight file starts with a "
                           f"label, a number (in a file to predict, any number, e.g. 0: it "
                           f"only serves the score)") from None
        if bad is not None:
            raise CLIError(f"{path}: line {bad[0]} has label {bad[1]!r}; labels in svmlight "
                           f"files must be numbers (number the classes, e.g. 0, 1, 2)") from None
        text = _one_line(exc)
        if len(text) > 160:
            text = text[:157] + "..."
        raise CLIError(f"{path} is not a valid svmlight/libsvm file: {text}") from None
    if X.shape[0] == 0:
        raise CLIError(f"{path} has no data rows")
    X = sp.csr_matrix(X)
    uses_zero = X.nnz > 0 and int(X.indices.min()) == 0
    if zero_based == "auto":
        zero_based = bool(uses_zero)
    if not zero_based:
        if uses_zero:
            raise CLIError(f"{path} uses feature index 0, but it is read with one-based "
                           f"(libsvm) indices (--zero-based no, or the model's training "
                           f"file was one-based)")
        X = sp.csr_matrix((X.data, X.indices - 1, X.indptr),
                          shape=(X.shape[0], max(X.shape[1] - 1, 0)))
    if n_features is not None:
        if X.shape[1] > n_features:
            # read zero-based, a file without index 0 is one column wider than read
            # one-based: when that would fit, its base may be the mistake
            hint = ("; it was read with zero-based indices and uses no index 0: if they "
                    "are one-based (libsvm), use --zero-based no"
                    if zero_based and not uses_zero and X.shape[1] - 1 <= n_features else "")
            raise CLIError(f"{path} has more features ({X.shape[1]}) than the model, which "
                           f"was trained on {n_features} features{hint}")
        X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))
    if X.shape[1] == 0:
        raise CLIError(f"{path} has no features")
    y = np.asarray(y, dtype=np.float64)
    bad = _first_bad_row(X, y)
    if bad is not None:
        raise CLIError(f"{path} contains non-finite values (nan or inf), first in data row "
                       f"{bad + 1}")
    X.sort_indices()
    return X, y, zero_based


def available_memory():
    """Bytes of memory available to a new allocation, or None (rbcd._memory)."""
    from ._memory import available_memory as available

    return available()


def _fmt_bytes(n):
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0


def accepts_sparse(estimator):
    """True when ``estimator`` takes scipy sparse X (its scikit-learn input tags)."""
    try:
        return bool(estimator.__sklearn_tags__().input_tags.sparse)
    except AttributeError:
        return False


def to_dense(X, what, n_grids=0):
    """``X`` (CSR) as a dense C-contiguous float64 array, or a CLIError when it would not
    fit: the estimate is the dense array plus, for a fit (``n_grids`` > 0), the binning's
    per-(grid, feature) state, against :data:`DENSE_MEMORY_SHARE` of the available memory.
    """
    n, d = X.shape
    need_x = 8 * n * d
    need_bin = BINNING_BYTES_PER_GRID_FEATURE * n_grids * d
    need = need_x + need_bin
    avail = available_memory()
    if avail is not None and need > DENSE_MEMORY_SHARE * avail:
        used = np.unique(X.indices).size
        state = (f" + {_fmt_bytes(need_bin)} for the binning of {n_grids} grids x {d} "
                 f"features" if n_grids else "")
        raise CLIError(
            f"{what} is {n} rows x {d} features ({used} of them used); the model takes dense "
            f"input, which needs about {_fmt_bytes(need)} ({_fmt_bytes(need_x)} for the "
            f"dense array{state}), more than {DENSE_MEMORY_SHARE:.0%} of the "
            f"{_fmt_bytes(avail)} available. Number the features without gaps (svmlight "
            f"indices are column numbers), or use fewer rows")
    return np.ascontiguousarray(X.toarray(), dtype=np.float64)


def model_input(estimator, X, what, fitting=False):
    """X as ``estimator`` takes it, the one place the command line densifies: the CSR
    matrix itself when the estimator accepts sparse input, else :func:`to_dense`."""
    if accepts_sparse(estimator):
        return X
    n_grids = estimator.get_params().get("n_grids", 0) if fitting else 0
    if isinstance(n_grids, str):  # "auto": the estimator's own rule where it has one
        from .models import auto_n_grids

        resolve = getattr(estimator, "_n_grids", None)
        n_grids = (resolve(X.shape[1], X.shape[0]) if resolve is not None
                   else auto_n_grids(X.shape[1], X.shape[0]))
    return to_dense(X, what, int(n_grids or 0))


def detect_task(y):
    """'classification' when y holds integers with at most MAX_CLASSES_AUTO distinct values
    (as --help says; two non-integer values such as 1.5 and 2.5 are regression targets),
    else 'regression'."""
    values = np.unique(y)
    if np.all(values == np.round(values)) and values.size <= MAX_CLASSES_AUTO:
        return "classification"
    return "regression"


def check_class_labels(y, path):
    """Classification labels must be integers (svmlight labels are numbers; a classifier
    takes integer class labels): a CLIError naming the first other value otherwise."""
    bad = np.flatnonzero(y != np.round(y))
    if bad.size:
        raise CLIError(f"{path}: classification needs integer labels, but data row "
                       f"{int(bad[0]) + 1} has label {float(y[bad[0]])!r}; use --task "
                       f"regression, or number the classes")


def _labels(y):
    """Class labels as int64 when they are all integers (prettier output), else as is."""
    if np.all(y == np.round(y)) and np.all(np.abs(y) < 2**53):
        return y.astype(np.int64)
    return y


# ----------------------------------------------------------------------------- model
def make_model(task, params=None, n_jobs=None, random_state=0, verbose=0):
    """An unfitted ``RBClassifier`` / ``RBRegressor`` with ``params`` (the options given on
    the command line; every other parameter keeps the estimator's default).

    ``verbose`` is passed on when the estimator has that parameter.
    """
    from . import RBClassifier, RBRegressor

    params = dict(params or {})
    classification = task == "classification"
    loss = params.get("loss")
    cls = RBClassifier if classification else RBRegressor
    check_options(params)
    if not classification and loss not in (None, "squared"):
        raise UsageError(f"--loss {loss} is a classification loss; regression uses squared")
    model = cls(**params, n_jobs=n_jobs, random_state=random_state)
    if "verbose" in model.get_params():
        model.set_params(verbose=verbose)
    return model


def check_options(params, default_solver=None):
    """UsageError for model options that contradict each other whatever the data (run
    before the data are read): a loss, an L1 share, a linear term or a one-vs-one scheme
    that the chosen solver does not solve, and an option of one solver given with another,
    which would be ignored. ``params``: the options given on the command line (a key is
    present only when its option was given, whatever its value: ``--parallel serial`` is
    ``parallel=None``), ``multi_class`` included. ``default_solver``: the solver when none
    is given (None: the estimator's default)."""
    solver = params.get("solver", default_solver)
    if solver is None:  # the estimator's default
        from .models import RBClassifier

        solver = RBClassifier().get_params()["solver"]
    # cg, direct, auto: ridge, the squared loss and an L2 penalty; auto picks cg or a
    # direct form (rbcd.solvers._direct.plan), never cd
    ridge = solver != "cd"
    if params.get("multi_class") == "ovo" and not ridge:
        raise UsageError("--multi-class ovo needs --solver auto, cg or direct (one ridge "
                         "problem per pair of classes; cd is one-vs-rest)")
    # an option of one solver given with another would be ignored: cd's options with the
    # ridge solvers (auto included), cg's iteration cap with cd or direct (auto may run cg)
    for option, param in (("--max-epochs", "max_epochs"), ("--parallel", "parallel")):
        if ridge and param in params:
            value = "serial" if params[param] is None else params[param]
            raise UsageError(f"{option} {value} needs --solver cd ({solver} solves ridge, "
                             f"which does not use it)")
    if solver in ("cd", "direct") and "max_iter" in params:
        why = ("cd counts epochs: --max-epochs" if solver == "cd"
               else "direct factorizes, it does not iterate")
        raise UsageError(f"--max-iter {params['max_iter']} needs --solver cg or auto ({why})")
    loss = params.get("loss")
    if ridge and loss not in (None, "squared"):
        raise UsageError(f"--loss {loss} needs --solver cd ({solver} solves the squared loss)")
    l1_ratio = params.get("l1_ratio")
    if ridge and l1_ratio not in (None, 0.0, 1.0):
        raise UsageError(f"--l1-ratio {l1_ratio:g} needs --solver cd ({solver} solves ridge, "
                         f"an L2 penalty)")
    linear = params.get("linear")
    if not ridge and linear not in (None, 0.0, "auto"):
        raise UsageError(f"--linear {linear:g} is for the ridge solvers (cg, direct, auto); "
                         f"--solver cd takes --linear 0 only")
    if params.get("multi_class") == "ovo" and linear not in (None, 0.0, "auto"):
        raise UsageError(f"--linear {linear:g} needs --multi-class ovr (one-vs-one fits no "
                         f"linear term): leave out --linear, or use --linear 0")


def _estimator_verbose(level):
    """The estimator's ``verbose`` for a progress level: -v (1) shows the command line's
    own stage lines only (the estimator's summary lines would repeat them), -vv and more
    also the estimator's lines, per iteration (its verbose 2)."""
    return 0 if level <= 1 else level


def _given(args):
    """The model options given on the command line, as estimator parameters."""
    params = {}
    for _, param, _, _ in _MODEL_OPTIONS:
        value = getattr(args, param, None)
        if value is not None:
            params[param] = _parallel(value) if param == "parallel" else value
    return params


def _can_scale():
    """True when RandomBinning takes sigma="scale" (its parameter constraints say so)."""
    from .binning.random_binning import RandomBinning

    for c in getattr(RandomBinning, "_parameter_constraints", {}).get("sigma", ()):
        options = getattr(c, "options", ())
        if "scale" in options:
            return True
    return False


def binning_advice(kappa, n_rows, sigma, rule=None):
    """A warning (str) when the binning is degenerate, else None.

    kappa = N / (largest bin count), averaged over the grids (paper, Definition 1):
    close to N, almost every training row is alone in its bins, the features only
    memorize the training rows and new rows fall into empty bins; close to 1, almost all
    rows share one bin, the features cannot tell rows apart. ``sigma``: the bandwidth
    used (the fitted ``sigma_``); ``rule``: the estimator's ``sigma`` parameter, "scale"
    when the bandwidth came from the data (then --sigma scale is not advice: it was used).
    The advice names the --sigma values to try.
    """
    if n_rows < 2:   # one row is always alone, and always in the largest bin
        return None
    if isinstance(sigma, str):
        sigma_text, value = sigma, None
    else:
        value = float(np.mean(sigma))
        sigma_text = f"{value:g}"
    from_data = isinstance(rule, str) and rule == "scale"
    if from_data:
        sigma_text += " (from the data: --sigma scale)"
    scale = "--sigma scale (sigma from the data) or " if _can_scale() and not from_data else ""
    if n_rows >= KAPPA_HIGH_MIN_ROWS and kappa >= KAPPA_HIGH_SHARE * n_rows:
        tries = (f" (10x, then 100x: --sigma {10 * value:g}, --sigma {100 * value:g})"
                 if value is not None else " (10x, then 100x)")
        return (f"kappa {kappa:.1f} is close to N = {n_rows}: almost every training row is "
                f"alone in its bins, so the model memorizes the training rows and predicts "
                f"new rows poorly. sigma = {sigma_text} is far below the scale of the data; "
                f"try {scale}a larger sigma{tries}")
    if kappa <= KAPPA_LOW:
        tries = (f" (10x smaller: --sigma {value / 10:g})" if value is not None
                 else " (10x smaller)")
        return (f"kappa {kappa:.2f} is close to 1: almost all rows share one bin in every "
                f"grid, so the features cannot tell rows apart. sigma = {sigma_text} is far "
                f"above the scale of the data; try {scale}a smaller sigma{tries}")
    return None


def _is_kappa_warning(record):
    """True for the library's degenerate-binning warning about kappa_ (rbcd.binning's
    DegenerateBinningWarning), whose advice is Python (``sigma = c *
    rbcd.median_l1_distance(X)``): the command line gives its own, in options."""
    message = getattr(record, "message", None)
    return (type(message).__name__ == "DegenerateBinningWarning"
            and "kappa_" in str(message))


def _warning_lines(caught):
    """Distinct warning messages, once each, with a count when repeated. ``caught``:
    warning records (``catch_warnings(record=True)``) or message strings."""
    counts = {}
    for w in caught:
        text = " ".join(str(getattr(w, "message", w)).split())
        counts[text] = counts.get(text, 0) + 1
    return [text if k == 1 else f"{text} (x{k})" for text, k in counts.items()]


@contextlib.contextmanager
def _estimator_running(progress):
    """Around every fit of an estimator (the model's, the --cv search's): its warnings are
    recorded in the list yielded, not printed (the caller prints them once each as
    ``rbcd: warning: ...``, :func:`_warn`), and its verbose lines, progress too, go to the
    progress stream (stderr), not to the results on stdout."""
    to_progress = contextlib.redirect_stdout(progress.stream) if progress.level else \
        contextlib.nullcontext()
    with warnings.catch_warnings(record=True) as caught, to_progress:
        warnings.simplefilter("always")
        # for developers, not for someone running the command line
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        yield caught


def fit_model(model, X, y, progress, earlier=()):
    """Fit ``model`` (an RB estimator) on X (as :func:`model_input` gives it), with
    progress on the progress stream and warnings collected. ``earlier``: the warnings of
    the command's earlier steps (the --cv search; records or messages), counted with the
    fit's so that each distinct message is shown once.

    Returns ``info``: stage times (the model's ``fit_time_``), D, kappa, nnz(Z) (rows x R:
    one entry per grid and training row), the solver's name, iterations and effective
    alpha and tol, and the distinct warnings (the degenerate-binning advice included).
    """
    progress(f"fitting {_model_repr(model)} on {X.shape[0]} rows x {X.shape[1]} features")
    t0 = time.perf_counter()
    with _estimator_running(progress) as caught:
        model.fit(X, y)
    total = time.perf_counter() - t0
    times = getattr(model, "fit_time_", None) or {}
    t_bin = float(times.get("binning", float("nan")))
    t_solve = float(times.get("solver", total - t_bin))
    binning = model.binning_
    solver_params = model.solver_.get_params()
    # ridge (solver "auto", "cg" or "direct") counts iterations, or one factorization for a
    # direct form ("dual" / "primal", the fitted solver's ``solver_``); cd counts epochs
    form = getattr(model.solver_, "solver_", None)
    ridge = model.get_params()["solver"] != "cd"
    alpha = solver_params.get("alpha")
    info = {"binning_time": t_bin, "solve_time": t_solve, "total_time": total,
            "D": int(binning.n_features_out_), "kappa": float(binning.kappa_),
            "nnz": int(X.shape[0]) * int(binning.n_grids), "n_grids": int(binning.n_grids),
            "n_iter": int(np.max(model.n_iter_)), "solver": type(model.solver_).__name__,
            "unit": "epochs" if not ridge else "iterations",
            "direct": form if ridge and form in ("dual", "primal") else None,
            # alpha="auto": the penalty the fit chose (alpha_), marked as chosen
            "alpha": getattr(model, "alpha_", alpha) if isinstance(alpha, str) else alpha,
            "alpha_chosen": isinstance(alpha, str),
            # one-vs-one: one alpha per pair of classes (rbcd.solvers._ovo); the number of
            # pairs, None for a single problem
            "n_pairs": (None if getattr(model.solver_, "pairs_", None) is None
                        else int(len(model.solver_.pairs_))),
            # cd: the parallel mode that ran ("serial" for the library's None), and whether
            # parallel="auto" chose it
            "parallel": (None if ridge or not hasattr(model.solver_, "parallel_")
                         else model.solver_.parallel_ or "serial"),
            "parallel_chosen": model.get_params().get("parallel") == "auto",
            "tol": solver_params.get("tol"),
            "sigma": getattr(binning, "sigma_", model.get_params()["sigma"])}
    lines = _warning_lines(list(earlier) + [w for w in caught if not _is_kappa_warning(w)])
    # training rows that are all the same: no sigma tells them apart, so no sigma to advise
    # (the library says so from 20 rows on, in Python's words)
    lines = [line.replace("; check X", "; check the training data") for line in lines]
    advice = binning_advice(info["kappa"], X.shape[0], info["sigma"],
                            rule=model.get_params()["sigma"])
    if any("training rows are identical" in line for line in lines):
        advice = None
    elif advice and info["kappa"] <= KAPPA_LOW and not _some_feature_varies(X):
        advice = (f"all {X.shape[0]} training rows are identical (no feature varies), so "
                  f"they share one bin in every grid and no sigma can tell them apart; "
                  f"check the training data")
    if advice and not any("kappa" in line for line in lines):
        lines.append(advice)
    info["warnings"] = lines
    progress(f"binning done in {t_bin:.2f} s (D {info['D']}, kappa {info['kappa']:.1f}); "
             f"{info['solver']} done in {t_solve:.2f} s ({_solver_work(info)})")
    return info


def _some_feature_varies(X):
    """True when some column of X (CSR or dense) takes two values over the rows."""
    import scipy.sparse as sp

    if sp.issparse(X):
        X = sp.csc_matrix(X)
        return bool(np.any(X.max(axis=0).toarray() != X.min(axis=0).toarray()))
    X = np.asarray(X)
    return bool(np.any(X.max(axis=0) != X.min(axis=0)))


def _solver_work(info):
    """``iterations 18`` / ``epochs 54``, or ``direct solve (dual)`` for a factorization."""
    if info.get("direct"):
        return f"direct solve ({info['direct']})"
    return f"{info['unit']} {info['n_iter']}"


def _model_repr(model):
    """``RBClassifier(sigma=0.7, ...)``: the parameters that differ from the defaults
    (scikit-learn's repr), without ``verbose``, which only says how much to print."""
    from sklearn.base import clone

    quiet = clone(model)
    if "verbose" in quiet.get_params():
        quiet.set_params(verbose=0)
    text = " ".join(repr(quiet).split())
    if "parallel" in quiet.get_params() and quiet.get_params()["parallel"] is None:
        # the library's None is serial coordinate descent, --parallel serial: say so
        text = re.sub(r"\bparallel=None\b", "parallel=None (serial)", text)
    return text


def save_model(path, estimator, task, n_features, extra=None):
    """Save a fitted estimator with the marks :func:`load_model` checks, atomically: a
    failed write leaves the previous file at ``path`` (or none)."""
    import pickle

    import joblib

    from . import __version__
    from ._io import atomic_write

    from ._integrity import state_digest

    payload = {"format": MODEL_FORMAT, "format_version": MODEL_VERSION,
               "rbcd_version": __version__, "task": task, "n_features": int(n_features),
               "estimator": estimator}
    if extra:
        payload.update(extra)
    # the estimator checks its own state when it is loaded (rbcd._integrity); this covers
    # the fields around it (task, n_features, the index base) that predict relies on
    payload["checksum"] = state_digest(_checked_fields(payload))
    try:
        with atomic_write(path, "wb") as fh:
            joblib.dump(payload, fh)
    except OSError as exc:
        raise CLIError(_write_error("model file", path, exc)) from None
    except pickle.PicklingError as exc:
        raise CLIError(f"cannot save the model to {path}: {_one_line(exc)}") from None


def _checked_fields(payload):
    return {k: v for k, v in payload.items() if k not in ("estimator", "checksum")}


def load_model(path):
    """The dict saved by :func:`save_model`, or CLIError if ``path`` is not one, or is
    damaged: the estimator's state and the fields around it carry checksums
    (:mod:`rbcd._integrity`), verified here."""
    import joblib

    from ._integrity import CorruptedStateError, state_digest

    if not os.path.exists(path):
        raise CLIError(f"cannot read model file {path}: no such file")
    if os.path.isdir(path):
        raise CLIError(f"cannot read model file {path}: is a directory")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            payload = joblib.load(path)
    except CorruptedStateError as exc:
        raise CLIError(f"{path} is a damaged rbcd model file: {_one_line(exc)}") from None
    except OSError as exc:
        raise CLIError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    except Exception as exc:  # unpickling random bytes raises anything
        raise CLIError(f"{path} is damaged or not an rbcd model file (it cannot be "
                       f"unpickled: {type(exc).__name__})") from None
    if not (isinstance(payload, dict) and payload.get("format") == MODEL_FORMAT):
        raise CLIError(f"{path} is not an rbcd model file (it holds a "
                       f"{type(payload).__name__}, not a model saved by 'rbcd train')")
    version = payload.get("format_version")
    if version != MODEL_VERSION:
        raise CLIError(f"{path} is an rbcd model of format version {version}; this rbcd "
                       f"reads version {MODEL_VERSION}")
    if not hasattr(payload.get("estimator"), "predict") or "n_features" not in payload:
        raise CLIError(f"{path} is a damaged rbcd model file (no estimator)")
    expected = payload.get("checksum")
    if expected is not None and expected != state_digest(_checked_fields(payload)):
        raise CLIError(f"{path} is a damaged rbcd model file: its fields do not match the "
                       f"checksum written with them (train the model again)")
    if payload.get("task") not in ("classification", "regression") or \
            not isinstance(payload.get("n_features"), int) or payload["n_features"] < 1:
        raise CLIError(f"{path} is a damaged rbcd model file (task or n_features)")
    return payload


# ----------------------------------------------------------------------------- output
def _score(task, y_true, y_pred):
    """[("accuracy", value)], or [("R^2", ...), ("RMSE", ...), ("MAE", ...)] for
    regression (R^2 is 1 - SSE / the total sum of squares about the mean; NaN when the
    targets are constant)."""
    if task == "classification":
        return [("accuracy", float(np.mean(y_true == y_pred)))]
    err = np.asarray(y_true, float) - np.asarray(y_pred, float)
    sse = float(np.sum(err ** 2))
    sst = float(np.sum((np.asarray(y_true, float) - np.mean(y_true)) ** 2))
    r2 = 1.0 - sse / sst if sst > 0 else float("nan")
    return [("R^2", r2), ("RMSE", float(np.sqrt(np.mean(err ** 2)))),
            ("MAE", float(np.mean(np.abs(err))))]


def _fmt_score(scores):
    return "  ".join(f"{name} {value:.4f}" if name in ("accuracy", "R^2") else
                     f"{name} {value:.4g}" for name, value in scores)


def _write_error(what, path, exc):
    """The message of a failed write of ``what`` (the model file, the output file) to
    ``path``: an atomic write to a file leaves the previous file (rbcd._io); a device
    or pipe is written in place, so nothing can be said of what it received."""
    from ._io import is_special_file

    text = f"cannot write {what} {path}: {exc.strerror or exc}"
    if is_special_file(path):
        return text
    return text + " (nothing was written; a previous file there is unchanged)"


def _silence_stdout():
    """Point stdout at os.devnull, so that later writes and the interpreter's last flush
    of what is left in its buffer do not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _write_out(stream, text):
    """Write and flush ``text``; if the reader of the stream has gone (``rbcd train ... |
    head``), the rest of the command's output is dropped and the command goes on (a
    model is still saved): stdout then points at os.devnull. Any other failure (a full
    disk, ``> /dev/full``) is a CLIError naming the stream."""
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        if stream is sys.stdout:
            _silence_stdout()
    except OSError as exc:
        name = "stdout" if stream is sys.stdout else getattr(stream, "name", "the output")
        if stream is sys.stdout:
            _silence_stdout()
        raise CLIError(f"cannot write to {name}: {exc.strerror or exc}") from None


class _Report:
    """Labelled result lines on stdout: ``label   name value  name value ...``."""

    def __init__(self, stream):
        self.stream = stream

    def __call__(self, label, *pairs):
        text = "  ".join(str(p) for p in pairs if p not in (None, ""))
        _write_out(self.stream, f"{label:<8} {text}".rstrip() + "\n")


class _Progress:
    """Stage lines on stderr: shown when ``level`` > 0 (``-v``, or stderr is a terminal)."""

    def __init__(self, verbose, stream=None):
        self.stream = sys.stderr if stream is None else stream
        tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.level = int(verbose) if verbose else (1 if tty else 0)

    def __call__(self, message):
        if self.level:
            print(f"{PROG}: {message}", file=self.stream, flush=True)


def _warn(lines):
    for line in lines:
        print(f"{PROG}: warning: {line}", file=sys.stderr, flush=True)


def _threads(n_jobs):
    from ._openmp_info import openmp_is_enabled
    from ._threads import effective_n_threads

    n = effective_n_threads(n_jobs)
    return n, "OpenMP" if openmp_is_enabled() else "no OpenMP: serial kernels"


def _fit_lines(report, info, n_threads, omp):
    report("threads", f"{n_threads} ({omp})")
    report("binning", f"grids {info['n_grids']}", f"D {info['D']}", f"kappa {info['kappa']:.1f}",
           f"nnz {info['nnz']}",
           f"time {info['binning_time']:.2f} s")
    parallel = info.get("parallel")
    report("solver", info["solver"], _solver_work(info),
           (f"parallel {parallel}{' (auto)' if info.get('parallel_chosen') else ''}"
            if parallel else ""),
           _alpha_text(info),
           f"tol {info['tol']:g}" if isinstance(info["tol"], (int, float)) else "",
           f"time {info['solve_time']:.2f} s")


def _alpha_text(info):
    """``alpha 0.1`` (``alpha 0.1 (auto)`` when the fit chose it), or for a one-vs-one
    model whose pairs chose their own (alpha "auto", one per pair of classes:
    rbcd.solvers._ovo) their range, ``alpha 0.03..3.5 (auto, per pair of classes, 3
    pairs)``; "" when there is no number to show. A given alpha is shown as given (with
    one-vs-one, in the whole training set's units, as the estimator takes it)."""
    alpha = info.get("alpha")
    chosen = info.get("alpha_chosen")
    if isinstance(alpha, (int, float, np.number)) and not isinstance(alpha, bool):
        return f"alpha {float(alpha):g}{' (auto)' if chosen else ''}"
    values = np.ravel(np.asarray(alpha, dtype=object))
    try:
        values = values.astype(np.float64)
    except (TypeError, ValueError):
        return ""
    if values.size == 0 or not np.all(np.isfinite(values)):
        return ""
    if values.size == 1:
        return f"alpha {float(values[0]):g}{' (auto)' if chosen else ''}"
    low, high = float(values.min()), float(values.max())
    shown = f"{low:g}" if f"{low:g}" == f"{high:g}" else f"{low:g}..{high:g}"
    pairs = info.get("n_pairs")
    per = (f"per pair of classes, {pairs} pairs" if pairs else f"{values.size} values")
    return f"alpha {shown} ({'auto, ' if chosen else ''}{per})"


# ----------------------------------------------------------------------------- commands
def cmd_demo(args, out):
    from .datasets import make_checkerboard

    report, progress = _Report(out), _Progress(args.verbose)
    if args.n_cells < 2:
        raise UsageError("--n-cells must be at least 2")
    n_test = args.n_test if args.n_test is not None else max(1000, args.n_samples // 5)
    given = _given(args)
    check_options(given)   # the solver left out is the estimator's (auto), as in train
    n_threads, omp = _threads(args.n_jobs)
    c = args.n_cells
    _write_out(out, f"rbcd demo: a checkerboard, the parity of {c}x{c} cells in 2 of 8 "
                    f"dimensions (6 are noise); a linear model scores about 0.5\n")
    t0 = time.perf_counter()
    X, y = make_checkerboard(args.n_samples + n_test, n_features=8, n_informative=2,
                             n_cells=c, random_state=args.seed)
    Xtr, ytr = X[:args.n_samples], y[:args.n_samples]
    if np.unique(ytr).size < 2:   # a classifier needs both colours of the board
        raise UsageError(f"--n-samples {args.n_samples} is too few: the training rows drawn "
                         f"are all of one class (of the checkerboard's 2); use more rows, "
                         f"e.g. --n-samples 1000")
    Xte, yte = X[args.n_samples:], y[args.n_samples:]
    report("data", f"train {args.n_samples} rows", f"test {n_test} rows", f"seed {args.seed}",
           f"generated in {time.perf_counter() - t0:.2f} s")
    solver = given.get("solver", "cg")
    params = {**DEMO_SETTINGS["cd" if solver == "cd" else "cg"], **given}
    model = make_model("classification", params, n_jobs=args.n_jobs, random_state=args.seed,
                       verbose=_estimator_verbose(progress.level))
    report("model", _model_repr(model))
    info = fit_model(model, Xtr, ytr, progress)
    _warn(info["warnings"])
    _fit_lines(report, info, n_threads, omp)
    t0 = time.perf_counter()
    test_acc = float(np.mean(model.predict(Xte) == yte))
    t_pred = time.perf_counter() - t0
    n_check = min(n_test, args.n_samples)
    train_acc = float(np.mean(model.predict(Xtr[:n_check]) == ytr[:n_check]))
    report("predict", f"{n_test} rows", f"time {t_pred:.2f} s")
    report("result", f"test accuracy {test_acc:.4f}",
           f"train accuracy {train_acc:.4f} (first {n_check} rows)",
           f"D {info['D']}", f"kappa {info['kappa']:.1f}", f"fit {info['total_time']:.2f} s",
           f"threads {n_threads}")
    return 0


def _same_file(a, b):
    """True when paths ``a`` and ``b`` name the same file (the same inode when both exist,
    else the same resolved path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _check_writable(path, what, inputs=()):
    """Refuse, before any work, an output that would replace one of the ``inputs`` (the
    data, the model) or that cannot be written: for a regular file (or a new one) by
    creating and removing a temporary file of :mod:`rbcd._io`'s naming where the write will
    create its own (permission bits and read-only file systems included, which
    ``os.access`` does not see for root). A device or pipe (``/dev/stdout``) is written
    in place, so only its permission is checked."""
    import tempfile

    from ._io import is_special_file

    for kind, other in inputs:
        if other is not None and _same_file(path, other):
            raise CLIError(f"{what} {path} is the {kind}: writing it would replace the "
                           f"input; choose another path")
    if is_special_file(path):
        if not os.access(path, os.W_OK):
            raise CLIError(f"cannot write {what} {path}: permission denied")
        return
    target = os.path.realpath(path) if os.path.islink(path) else path
    directory = os.path.dirname(os.path.abspath(target)) or "."
    if os.path.isdir(target):
        raise CLIError(f"cannot write {what} {path}: is a directory")
    if not os.path.isdir(directory):
        raise CLIError(f"cannot write {what} {path}: directory {directory} does not exist")
    if os.path.exists(target) and not os.access(target, os.W_OK):
        raise CLIError(f"cannot write {what} {path}: permission denied")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.{os.getpid()}-",
                                     suffix=".tmp", dir=directory)
    except OSError as exc:
        raise CLIError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(probe)


def _cross_validate(model, task, X, y, args, report, progress):
    """``train --cv``: the CV estimator over sigma multipliers and alphas, with the options
    that it shares with ``model``; returns ``model`` with the chosen sigma and alpha (and
    the linear term's weight, rbcd.model_selection), and the search's warning messages,
    to be shown with the fit's (:func:`fit_model`'s ``earlier``)."""
    from .model_selection import RBClassifierCV, RBRegressorCV

    cls = RBClassifierCV if task == "classification" else RBRegressorCV
    given = _given(args)
    shared = {k: v for k, v in model.get_params().items()
              if k in cls().get_params() and k in given}
    if task == "classification":   # --class-weight and --multi-class: the search's too
        shared["class_weight"] = model.class_weight
        if getattr(args, "multi_class", None) is not None:
            shared["multi_class"] = args.multi_class
    for fixed in ("sigma", "alpha"):
        if fixed in given:
            raise UsageError(f"--cv chooses {fixed}; leave out --{fixed}")
    cv = cls(**shared, n_jobs=args.n_jobs, random_state=args.seed,
             verbose=_estimator_verbose(progress.level))
    progress("cross-validating sigma and alpha")
    t0 = time.perf_counter()
    Xcv = model_input(cv, X, args.data, fitting=True)
    with _estimator_running(progress) as caught:
        cv.fit(Xcv, y)
    # the search's advice to extend its grids names the Python parameters: the command
    # line searches the default grids only, so say where they can be changed
    grids = (f" ({PROG} train --cv searches the default grids; other grids: "
             f"rbcd.model_selection.{cls.__name__}(sigma_factors=..., alphas=...) in Python).")
    messages = [str(w.message) for w in caught]
    messages = [m.rstrip(".") + grids if "alphas" in m or "sigma_factors" in m else m
                for m in messages]
    best = cv.best_params_
    report("cv", *(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                   for k, v in sorted(best.items())),
           f"score {cv.best_score_:.4f}", f"candidates {len(cv.cv_results_['params'])}",
           f"time {time.perf_counter() - t0:.2f} s")
    chosen = cv.best_estimator_.get_params()
    # the linear term's weight the search chose with them, unless --linear gave one, and
    # the multi-class scheme it chose (one-vs-one: rbcd.solvers._ovo)
    extra = {} if "linear" in given else {"linear": chosen["linear"]}
    if "multi_class" in chosen:
        extra["multi_class"] = chosen["multi_class"]
    return model.set_params(sigma=chosen["sigma"], alpha=chosen["alpha"], **extra), messages


def _check_task_options(args, task):
    """UsageError for a classification option (--class-weight, --calibration,
    --multi-class, a classification --loss) given with a regression ``task``."""
    if task == "classification":
        return
    how = ("" if args.task != "auto" else
           f" (detected from the labels of {args.data}: use --task classification if they "
           f"are classes)")
    for option in ("class_weight", "calibration", "multi_class"):
        if getattr(args, option) is not None:
            raise UsageError(f"--{option.replace('_', '-')} is for classification; the task "
                             f"is {task}{how}")
    loss = getattr(args, "loss", None)
    if loss not in (None, "squared"):
        raise UsageError(f"--loss {loss} is a classification loss; regression uses "
                         f"squared{how}")


def cmd_train(args, out):
    report, progress = _Report(out), _Progress(args.verbose)
    multi_class = {} if args.multi_class is None else {"multi_class": args.multi_class}
    check_options({**_given(args), **multi_class})
    if args.task != "auto":   # the options of the other task are refused before any work
        _check_task_options(args, args.task)
    _check_writable(args.model, "model file",
                    inputs=(("training data", args.data), ("test data", args.test)))
    t_start = time.perf_counter()
    progress(f"reading {args.data}")
    X, y, zero_based = load_svmlight(args.data, zero_based=_ZERO_BASED[args.zero_based])
    Xte = yte = None
    if args.test is not None:
        progress(f"reading {args.test}")
        Xte, yte, _ = load_svmlight(args.test, n_features=X.shape[1], zero_based=zero_based)
    task = detect_task(y) if args.task == "auto" else args.task
    if task == "classification":
        check_class_labels(y, args.data)
        y = _labels(y)
        if yte is not None:
            yte = _labels(yte)
        classes = np.unique(y)
        if classes.size < 2:
            raise CLIError(f"{args.data}: classification needs at least 2 classes, "
                           f"the labels hold only {classes[0]}")
        if isinstance(args.class_weight, dict):
            unknown = [c for c in args.class_weight if c not in set(classes.tolist())]
            if unknown:
                raise UsageError(f"--class-weight names {', '.join(map(str, unknown))}, not "
                                 f"a class of {args.data} (its classes: "
                                 f"{', '.join(map(str, classes.tolist()))})")
        what = f"classification, {classes.size} classes"
    else:
        what = "regression"
    how = "detected; --task to change" if args.task == "auto" else "from --task"
    base = f"index base {0 if zero_based else 1} ({args.zero_based})"
    report("data", args.data, f"rows {X.shape[0]}", f"features {X.shape[1]}",
           f"nnz {X.nnz}", f"{what} ({how})", base)
    n_threads, omp = _threads(args.n_jobs)
    params = _given(args)
    _check_task_options(args, task)
    for option in ("class_weight", "calibration", "multi_class"):
        value = getattr(args, option)
        if value is not None:
            params[option] = None if value == "none" else value
    model = make_model(task, params, n_jobs=args.n_jobs, random_state=args.seed,
                       verbose=_estimator_verbose(progress.level))
    cv_warnings = []
    if args.cv:
        model, cv_warnings = _cross_validate(model, task, X, y, args, report, progress)
    report("model", _model_repr(model))
    Xfit = model_input(model, X, args.data, fitting=True)
    info = fit_model(model, Xfit, y, progress, earlier=cv_warnings)
    _warn(info["warnings"])
    _fit_lines(report, info, n_threads, omp)
    train_score = _score(task, y, model.predict(Xfit))
    report("train", _fmt_score(train_score))
    test_score = None
    if Xte is not None:
        test_score = _score(task, yte, model.predict(model_input(model, Xte, args.test)))
        report("test", _fmt_score(test_score), f"rows {Xte.shape[0]}", f"file {args.test}")
    progress(f"saving {args.model}")
    save_model(args.model, model, task, X.shape[1],
               extra={"train_file": os.path.abspath(args.data), "fit_info": info,
                      "zero_based": zero_based})
    report("saved", args.model)
    scores = ([f"test {_fmt_score(test_score[:2])}"] if test_score else []) + \
        [f"train {_fmt_score(train_score[:2])}"]
    report("result", *scores, f"D {info['D']}", f"kappa {info['kappa']:.1f}",
           f"fit {info['total_time']:.2f} s",
           f"wall {time.perf_counter() - t_start:.2f} s", f"threads {n_threads}")
    return 0


def _format_predictions(pred, task):
    if task == "classification" and pred.dtype.kind in "iub":
        return [str(int(v)) for v in pred]
    if task == "classification" and np.all(pred == np.round(pred)):
        return [str(int(v)) for v in pred]
    return [repr(float(v)) for v in pred]


def cmd_predict(args, out):
    from ._io import atomic_write

    if args.output is not None:  # before the model is loaded, which may be the output
        _check_writable(args.output, "output file",
                        inputs=(("model file", args.model), ("data file", args.data)))
    payload = load_model(args.model)
    est = payload["estimator"]
    if args.proba:
        if payload["task"] != "classification":
            raise UsageError("--proba is for classification models; this model is a "
                             "regression model")
        if not hasattr(est, "predict_proba"):
            raise CLIError(f"{args.model} has no probabilities: it was trained with "
                           f"--calibration none (train it again without it)")
    n_features = payload["n_features"]
    zero_based = payload.get("zero_based", "auto") if args.zero_based is None \
        else _ZERO_BASED[args.zero_based]
    X, y, _ = load_svmlight(args.data, n_features=n_features, zero_based=zero_based)
    if args.n_jobs is not None:  # the binning's transform and the solver's products
        for part in (est, getattr(est, "binning_", None), getattr(est, "solver_", None)):
            if part is not None and "n_jobs" in part.get_params():
                part.set_params(n_jobs=args.n_jobs)
    t0 = time.perf_counter()
    if args.proba:
        proba = np.asarray(est.predict_proba(model_input(est, X, args.data)))
        pred = np.asarray(est.classes_)[np.argmax(proba, axis=1)]
        header = "# classes: " + " ".join(_format_predictions(np.asarray(est.classes_),
                                                              "classification"))
        lines = "\n".join([header] + [" ".join(f"{p:.6g}" for p in row) for row in proba]) + "\n"
    else:
        pred = np.asarray(est.predict(model_input(est, X, args.data)))
        lines = "\n".join(_format_predictions(pred, payload["task"])) + "\n"
    elapsed = time.perf_counter() - t0
    if args.output is None:
        _write_out(out, lines)
    else:
        try:
            with atomic_write(args.output) as fh:
                fh.write(lines)
        except BrokenPipeError:
            # only a pipe (-o /dev/stdout | head) breaks: its reader has gone, as with
            # stdout (_write_out) the rest is dropped
            pass
        except OSError as exc:
            raise CLIError(_write_error("output file", args.output, exc)) from None
    task = payload["task"]
    yl = _labels(y) if task == "classification" else y
    where = "stdout" if args.output is None else args.output
    print(f"{PROG} predict: {X.shape[0]} predictions to {where}  "
          f"{_fmt_score(_score(task, yl, pred))} (against the labels in {args.data})  "
          f"time {elapsed:.2f} s", file=sys.stderr)
    return 0


COMMANDS = {"demo": cmd_demo, "train": cmd_train, "predict": cmd_predict}


def main(argv=None, out=None):
    """Run ``rbcd`` with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    0 on success, 2 for a usage error, 1 for a data / model / file error; errors are
    one line on stderr, ``rbcd: error: ...``.
    """
    out = sys.stdout if out is None else out
    argv = _attach_dash_values(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        parser = build_parser(_command_of(argv))
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version
            return int(exc.code or 0) if not isinstance(exc.code, str) else 2
        if args.command is None:
            raise UsageError(f"a command is required: demo, train or predict (see '{PROG} --help')")
        with _sigterm_unwinds():
            return COMMANDS[args.command](args, out)
    except Terminated:
        print(f"{PROG}: terminated", file=sys.stderr)
        return 143
    except UsageError as exc:
        return _fail(exc, 2, debug)
    except CLIError as exc:
        return _fail(exc, 1, debug)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, MemoryError, OSError) as exc:
        return _fail(exc, 1, debug, f"{type(exc).__name__}: ")
    except Exception as exc:  # a bug: still one line, the traceback with --debug
        return _fail(exc, 1, debug, f"internal error, {type(exc).__name__}: ",
                     " (run with --debug for the traceback)")


def _fail(exc, code, debug, prefix="", suffix=""):
    """Report ``exc`` (being handled) on stderr and return the exit ``code``: one line,
    ``rbcd: error: ...``, or with --debug the traceback instead; the exit code is the
    same either way (2 for a usage error, 1 otherwise)."""
    if debug:
        import traceback

        traceback.print_exc()
    else:
        print(f"{PROG}: error: {prefix}{_one_line(exc)}{suffix}", file=sys.stderr)
    return code


def _one_line(exc):
    return " ".join(str(exc).split())
