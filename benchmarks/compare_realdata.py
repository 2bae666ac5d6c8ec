"""rbcd against scikit-learn's kernel approximations and exact kernel machines on real data.

    python benchmarks/compare_realdata.py [DIR] [--sets a,b] [--bundled all|none|a,b] ...

DIR holds svmlight pairs NAME.train.svm / NAME.test.svm (``../shared/data/realdata.py DIR``
writes ten UCI and econometrics sets there; it needs apt-get and the ``rdata`` package, so it
belongs to the benchmark extra, never to the tests). A set is a classification task when
every training target is an integer and there are at most MAX_CLASSES distinct ones
(``--regression a,b`` / ``--classification a,b`` override this). Dense input: the sets are
small in d.

Beside them, scikit-learn's bundled sets, which need no download (``--bundled``, default all;
``--bundled none`` leaves them out, and without DIR they are the whole run): diabetes
(regression), digits, breast cancer and wine (classification), each raw (``sk-NAME``) and
standardized by a StandardScaler fitted on the training rows (``sk-NAME-scaled``); split by
``train_test_split(X, y, random_state=0)`` (75% / 25%). ``--sets`` selects among them too.

Per set, every configuration is fitted on the training rows and scored on the test rows
(accuracy, or RMSE for regression); its time is fit + predict, wall clock, one process:

* ``rbcd``: RBClassifier / RBRegressor with the library's defaults (sigma="scale" once the
  estimators accept it; before that sigma = rbcd._scale.scale_sigma(X_train), the same
  value), and the same at other n_grids (the accuracy-vs-time curve);
* ``rbcd-cv``: RBClassifierCV / RBRegressorCV with their default grid (rbcd.model_selection);
* ``rff``: RBFSampler + Ridge / RidgeClassifier, and ``nystroem``: Nystroem (RBF) +
  Ridge / RidgeClassifier, over gamma = g / (median squared L2 distance), n_components
  and alpha (each transformer fitted once per (g, n_components); its time is added to every
  alpha's ridge fit);
* ``exact-laplacian`` / ``exact-rbf``: SVC (classification) or KernelRidge (regression) on
  the exact kernel, where the training set has at most EXACT_MAX_N rows, over gamma and C
  (or alpha).

Reported per set: the best score of every family; the target (the peers' best accuracy minus
0.5 points, or their best RMSE plus 1%); and the time for each family's fastest
configuration that reaches it. Outputs (written atomically: a temporary file in the same
folder, then os.replace): ``realdata.json`` (every configuration), ``realdata_table.md``
(the table) and ``realdata_time.png`` (score against time per set) in --out.

Timings are only meaningful on a quiet machine; scores do not depend on load.
"""
import argparse
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

MAX_CLASSES = 50          # integer targets with more distinct values are regression
EXACT_MAX_N = 20_000      # exact kernel machines only up to this many training rows
PEERS = ("rff", "nystroem", "exact-laplacian", "exact-rbf")
RBCD = ("rbcd", "rbcd-cv")


# ----------------------------------------------------------------------------- data
@dataclass
class DataSet:
    name: str
    task: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


def task_of(y):
    """'classification' for integer targets with at most MAX_CLASSES values, else 'regression'."""
    y = np.asarray(y)
    if np.all(np.isfinite(y)) and np.all(y == np.round(y)) and np.unique(y).shape[0] <= MAX_CLASSES:
        return "classification"
    return "regression"


def load_sets(folder, names=None, regression=(), classification=()):
    """The svmlight pairs in ``folder`` (sorted by training rows, smallest first)."""
    from sklearn.datasets import load_svmlight_files

    found = sorted(f[: -len(".train.svm")] for f in os.listdir(folder) if f.endswith(".train.svm"))
    if names:
        missing = sorted(set(names) - set(found))
        if missing:
            raise SystemExit(f"no {', '.join(m + '.train.svm' for m in missing)} in {folder}")
        found = [n for n in found if n in names]
    sets = []
    for name in found:
        test = os.path.join(folder, name + ".test.svm")
        if not os.path.exists(test):
            raise SystemExit(f"{name}.train.svm has no {name}.test.svm in {folder}")
        # both files at once: one feature count and one index base for the pair
        Xtr, ytr, Xte, yte = load_svmlight_files([os.path.join(folder, name + ".train.svm"), test])
        task = ("regression" if name in regression else "classification" if name in classification
                else task_of(ytr))
        sets.append(DataSet(name, task, Xtr.toarray(), ytr, Xte.toarray(), yte))
    sets.sort(key=lambda s: s.X_train.shape[0])
    return sets


BUNDLED = {"diabetes": "regression", "digits": "classification",
           "breast_cancer": "classification", "wine": "classification"}


def bundled_names(spec):
    """The bundled set names of ``--bundled`` ("all", "none" or a comma list of sk-NAME or
    sk-NAME-scaled)."""
    every = [f"sk-{b}{t}" for b in BUNDLED for t in ("", "-scaled")]
    if spec == "all":
        return every
    if spec in ("none", ""):
        return []
    names = [n for n in spec.split(",") if n]
    unknown = sorted(set(names) - set(every))
    if unknown:
        raise SystemExit(f"unknown bundled sets {unknown}; choose from {every}")
    return names


def load_bundled(names):
    """scikit-learn's bundled sets by name (``bundled_names``), split with random_state=0;
    the -scaled variants standardized on the training rows."""
    from sklearn import datasets
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    sets = []
    for name in names:
        base = name[len("sk-"):].removesuffix("-scaled")
        X, y = getattr(datasets, f"load_{base}")(return_X_y=True)
        Xtr, Xte, ytr, yte = train_test_split(np.asarray(X, dtype=np.float64), y, random_state=0)
        if name.endswith("-scaled"):
            sc = StandardScaler().fit(Xtr)
            Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
        sets.append(DataSet(name, BUNDLED[base], Xtr, ytr, Xte, yte))
    return sets


def score_of(task, y, pred):
    """Accuracy (classification) or RMSE (regression)."""
    if task == "classification":
        return float(np.mean(np.asarray(pred) == np.asarray(y)))
    return float(np.sqrt(np.mean((np.asarray(pred, dtype=float) - np.asarray(y, dtype=float)) ** 2)))


def better(task, a, b):
    """Is score a better than score b?"""
    return a > b if task == "classification" else a < b


def target_of(task, best):
    """The peers' best accuracy minus 0.5 points, or their best RMSE plus 1%."""
    return best - 0.005 if task == "classification" else best * 1.01


def reaches(task, score, target):
    return score >= target - 1e-12 if task == "classification" else score <= target + 1e-12


def median_sq_l2(X, n_pairs=2000, seed=0):
    """Median squared L2 distance of sampled pairs of distinct rows (the RBF peers' scale)."""
    n = X.shape[0]
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, n_pairs)
    j = (i + rng.integers(1, n, n_pairs)) % n
    m = float(np.median(np.sum((X[i] - X[j]) ** 2, axis=1)))
    return m if m > 0 else 1.0


# ----------------------------------------------------------------------------- atomic output
def write_atomic(path, data, mode="w"):
    """Write ``data`` (str, or a callable taking a path) to path via a temporary file in the
    same folder and os.replace, so a reader never sees a partial file."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".",
                               suffix=os.path.splitext(path)[1])
    try:
        if callable(data):
            os.close(fd)
            data(tmp)
        else:
            with os.fdopen(fd, mode) as f:
                f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)   # mkstemp makes it 0600; give it a normal file's mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ----------------------------------------------------------------------------- configurations
def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def run_peers(ds, args, emit):
    """RBFSampler / Nystroem + ridge, and the exact kernel machines (N <= EXACT_MAX_N)."""
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.linear_model import Ridge, RidgeClassifier

    clf = ds.task == "classification"
    Ridge_ = RidgeClassifier if clf else Ridge
    sq = median_sq_l2(ds.X_train)
    for family, Transformer in (("rff", RBFSampler), ("nystroem", Nystroem)):
        if family not in args.methods:
            continue
        for g in args.gammas:
            # Nystroem cannot have more components than rows
            comps = sorted({min(m, ds.X_train.shape[0]) if family == "nystroem" else m
                            for m in args.components})
            for m in comps:
                tr = Transformer(gamma=g / sq, n_components=m, random_state=args.seed)
                (F, Ft), t_tr = _timed(lambda: (tr.fit_transform(ds.X_train), tr.transform(ds.X_test)))
                for a in args.peer_alphas:
                    est = Ridge_(alpha=a)
                    pred, t = _timed(lambda: est.fit(F, ds.y_train).predict(Ft))
                    emit(family, dict(gamma_factor=g, n_components=m, alpha=a),
                         score_of(ds.task, ds.y_test, pred), t_tr + t)
    if ds.X_train.shape[0] > EXACT_MAX_N:
        return
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel
    from sklearn.svm import SVC

    l1 = _median_l1(ds.X_train)
    for family, kernel, scale in (("exact-laplacian", laplacian_kernel, l1),
                                  ("exact-rbf", rbf_kernel, sq)):
        if family not in args.methods:
            continue
        for g in args.gammas:
            gamma = g / scale

            def gram(A, B=None, gamma=gamma, kernel=kernel):
                return kernel(A, B, gamma=gamma)

            for c in (args.svc_C if clf else args.krr_alphas):
                if clf:
                    def fit_predict(c=c, gram=gram):
                        est = SVC(C=c, kernel="precomputed")
                        est.fit(gram(ds.X_train), ds.y_train)
                        return est.predict(gram(ds.X_test, ds.X_train))
                    params = dict(gamma_factor=g, C=c)
                else:
                    def fit_predict(c=c, gram=gram):
                        est = KernelRidge(alpha=c, kernel="precomputed")
                        est.fit(gram(ds.X_train), ds.y_train)
                        return est.predict(gram(ds.X_test, ds.X_train))
                    params = dict(gamma_factor=g, alpha=c)
                pred, t = _timed(fit_predict)
                emit(family, params, score_of(ds.task, ds.y_test, pred), t)


def _median_l1(X):
    from rbcd._scale import median_l1_distance

    return median_l1_distance(X)


def _scale_supported():
    """Do the rbcd estimators accept sigma="scale" (and is it their default)?"""
    from rbcd import RBClassifier

    try:
        RBClassifier(sigma="scale", n_grids=2, random_state=0).fit(
            np.array([[0.0], [1.0], [2.0], [3.0]]), [0, 1, 0, 1])
    except Exception:  # noqa: BLE001 (any refusal means: not wired yet)
        return False
    return True


def run_rbcd(ds, args, emit):
    """rbcd's defaults at several n_grids, and the CV estimator."""
    from rbcd import RBClassifier, RBRegressor
    from rbcd._scale import scale_sigma

    clf = ds.task == "classification"
    Est = RBClassifier if clf else RBRegressor
    params = dict(args.rbcd_params)
    if "sigma" not in params and not args.scale:
        # sigma as the number sigma="scale" computes (its time is part of the fit's)
        params["sigma"] = None
    if args.alpha_per_row is not None:
        params["alpha"] = args.alpha_per_row * ds.X_train.shape[0]
    default_grids = params.get("n_grids", Est().n_grids)
    if isinstance(default_grids, str):  # n_grids="auto": the number it resolves to
        from rbcd.models import auto_n_grids
        default_grids = auto_n_grids(ds.X_train.shape[1], ds.X_train.shape[0])
    if "rbcd" in args.methods:
        for R in sorted(set(args.rbcd_grids) | {default_grids}):
            for seed in range(args.seed, args.seed + args.rbcd_seeds):
                p = dict(params, n_grids=R, random_state=seed)

                def fit_predict(p=p):
                    if p.get("sigma", "") is None:
                        p = dict(p, sigma=scale_sigma(ds.X_train))
                    est = Est(**p).fit(ds.X_train, ds.y_train)
                    return est.predict(ds.X_test), est

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    (pred, est), t = _timed(fit_predict)
                emit("rbcd", dict(n_grids=R, seed=seed, default=R == default_grids,
                                  n_iter=int(np.max(est.n_iter_))),
                     score_of(ds.task, ds.y_test, pred), t)
    if "rbcd-cv" in args.methods:
        try:
            from rbcd.model_selection import RBClassifierCV, RBRegressorCV
        except ImportError:
            print("  (rbcd.model_selection not available: rbcd-cv skipped)", flush=True)
            return
        CV = RBClassifierCV if clf else RBRegressorCV
        # the model parameters the CV estimator shares (n_grids, tol, ...) follow --rbcd-params
        shared = {k: v for k, v in params.items()
                  if k in CV().get_params() and k not in ("sigma", "random_state", "alpha")}
        est = CV(random_state=args.seed, **shared)

        def fit_predict():
            est.fit(ds.X_train, ds.y_train)
            return est.predict(ds.X_test)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pred, t = _timed(fit_predict)
        emit("rbcd-cv", dict(best_params=_plain(est.best_params_)),
             score_of(ds.task, ds.y_test, pred), t)


def _plain(d):
    return {k: (float(v) if isinstance(v, (np.floating, float)) else
                int(v) if isinstance(v, (np.integer, int)) else str(v)) for k, v in d.items()}


# ----------------------------------------------------------------------------- summary
def summarize(records, sets):
    """Per set: best score per family, the target, time to it per family, and speedups."""
    rows = []
    for ds_name, task, n, d in sets:
        recs = [r for r in records if r["set"] == ds_name]
        fam = {}
        for r in recs:
            fam.setdefault(r["method"], []).append(r)
        peers = [r for f in PEERS for r in fam.get(f, [])]
        if not peers:
            continue
        best_peer = max(peers, key=lambda r: r["score"]) if task == "classification" else \
            min(peers, key=lambda r: r["score"])
        target = target_of(task, best_peer["score"])
        row = dict(set=ds_name, task=task, n=n, d=d, best_peer=best_peer["score"],
                   best_peer_method=best_peer["method"], target=target, best={}, time={})
        for f, rs in fam.items():
            b = max(rs, key=lambda r: r["score"]) if task == "classification" else \
                min(rs, key=lambda r: r["score"])
            row["best"][f] = b["score"]
            ok = [r["seconds"] for r in rs if reaches(task, r["score"], target)]
            row["time"][f] = min(ok) if ok else None
        defaults = [r["score"] for r in fam.get("rbcd", []) if r["params"].get("default")]
        row["rbcd_default"] = float(np.mean(defaults)) if defaults else None
        peer_times = [row["time"][f] for f in PEERS if row["time"].get(f) is not None]
        rt = row["time"].get("rbcd")
        row["speedup"] = (min(peer_times) / rt) if (peer_times and rt) else None
        rows.append(row)
    return rows


def markdown(rows, header):
    fmt = lambda v, t: "-" if v is None else (f"{100 * v:.1f}%" if t == "classification" else f"{v:.4g}")  # noqa: E731
    sec = lambda v: "never" if v is None else f"{v:.3g} s"  # noqa: E731

    def gap(r):
        # the yardstick: points of accuracy below, or % of RMSE above, the best peer
        d = r["rbcd_default"]
        if d is None:
            return "-"
        if r["task"] == "classification":
            return f"{100 * (r['best_peer'] - d):+.1f} pt"
        return f"{100 * (d / r['best_peer'] - 1):+.1f}%"
    lines = [header, "",
             "| set | task | N | d | best peer | target | rbcd default | gap | rbcd-cv | "
             "rbcd time | rbcd-cv time | fastest peer time | speedup |",
             "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        t = r["task"]
        peer_t = [(r["time"][f], f) for f in PEERS if r["time"].get(f) is not None]
        fastest = min(peer_t) if peer_t else (None, "")
        lines.append(
            f"| {r['set']} | {'acc' if t == 'classification' else 'RMSE'} | {r['n']} | {r['d']} | "
            f"{fmt(r['best_peer'], t)} ({r['best_peer_method']}) | {fmt(r['target'], t)} | "
            f"{fmt(r['rbcd_default'], t)} | {gap(r)} | {fmt(r['best'].get('rbcd-cv'), t)} | "
            f"{sec(r['time'].get('rbcd'))} | {sec(r['time'].get('rbcd-cv'))} | "
            f"{sec(fastest[0])} {fastest[1]} | "
            f"{'-' if r['speedup'] is None else format(r['speedup'], '.2g') + 'x'} |")
    lines += ["", "best peer: the best test score over the peers' grids (rff, nystroem, "
              "exact-laplacian, exact-rbf); target: that minus 0.5 points (accuracy) or plus 1% "
              "(RMSE); rbcd default: the default model (mean over --rbcd-seeds); gap: its accuracy points below or RMSE % above the best peer (the issue's target: at most 1 point or 2%); times: fit + "
              "predict of each family's fastest configuration that reaches the target (rbcd: "
              "the default model at any n_grids of --rbcd-grids); speedup: fastest peer time / "
              "rbcd time."]
    sp_ = [r["speedup"] for r in rows if r["speedup"]]
    if sp_:
        lines += ["", f"Geometric mean speedup to the target over {len(sp_)} sets: "
                  f"{np.exp(np.mean(np.log(sp_))):.3g}x (sets where rbcd never reaches it: "
                  f"{sum(1 for r in rows if r['time'].get('rbcd') is None)})."]
    return "\n".join(lines) + "\n"


def plot(records, rows, path):
    """Score against time (fit + predict) per set: every configuration, and each family's
    frontier (best score reached within a time)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(rows)
    cols = min(5, n)
    nrows = -(-n // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.4 * cols, 3.0 * nrows), squeeze=False)
    colours = {"rbcd": "C3", "rbcd-cv": "C1", "rff": "C0", "nystroem": "C2",
               "exact-laplacian": "C4", "exact-rbf": "C5"}
    for ax, row in zip(axes.ravel(), rows):
        clf = row["task"] == "classification"
        for fam, c in colours.items():
            rs = sorted((r for r in records if r["set"] == row["set"] and r["method"] == fam),
                        key=lambda r: r["seconds"])
            if not rs:
                continue
            t = np.array([r["seconds"] for r in rs])
            s = np.array([r["score"] for r in rs]) * (100 if clf else 1)
            front = np.maximum.accumulate(s) if clf else np.minimum.accumulate(s)
            if fam == "rbcd-cv":
                ax.scatter(t, s, s=60, marker="*", color=c, zorder=3)
                continue
            ax.scatter(t, s, s=6, color=c, alpha=0.35)
            ax.step(t, front, where="post", color=c)
        ax.axhline(row["target"] * (100 if clf else 1), color="k", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_title(f"{row['set']} (N={row['n']}, d={row['d']})", fontsize=9)
        ax.set_xlabel("fit + predict (s)", fontsize=8)
        ax.set_ylabel("test accuracy (%)" if clf else "test RMSE", fontsize=8)
        lo = row["target"] * (100 if clf else 1)
        if clf:
            ax.set_ylim(lo - 8, min(100, row["best_peer"] * 100 + 2))
        else:
            ax.set_ylim(row["best_peer"] * 0.98, lo * 1.1)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    from matplotlib.lines import Line2D

    present = {r["method"] for r in records}
    handles = [Line2D([], [], color=c, marker="*" if fam == "rbcd-cv" else None,
                      ls="" if fam == "rbcd-cv" else "-", label=fam)
               for fam, c in colours.items() if fam in present]
    handles.append(Line2D([], [], color="k", ls="--", lw=0.8, label="target"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8)
    fig.suptitle("Test score against fit + predict time; lines: each family's best score "
                 "within a time", fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)


# ----------------------------------------------------------------------------- main
def _floats(s):
    return [float(v) for v in s.split(",")]


def _ints(s):
    return [int(v) for v in s.split(",")]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", nargs="?", default=None,
                   help="folder of NAME.train.svm / NAME.test.svm pairs (optional: without it "
                        "only the bundled sets run)")
    p.add_argument("--sets", default=None,
                   help="comma-separated set names (default: all in DIR and all --bundled)")
    p.add_argument("--bundled", default="all",
                   help="scikit-learn's bundled sets beside DIR's: all (default), none, or a "
                        "comma list of sk-NAME / sk-NAME-scaled (NAME: diabetes, digits, "
                        "breast_cancer, wine)")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks"),
                   help="output folder (default docs/benchmarks)")
    p.add_argument("--methods", default=",".join(RBCD + PEERS),
                   help="comma-separated families (default: all)")
    p.add_argument("--regression", default="", help="sets to treat as regression")
    p.add_argument("--classification", default="", help="sets to treat as classification")
    p.add_argument("--gammas", type=_floats, default=_floats("0.3,1,3,10"),
                   help="peer kernel scale multipliers g: gamma = g / median distance "
                        "(squared L2 for RBF, L1 for Laplacian)")
    p.add_argument("--components", type=_ints, default=_ints("256,1024"),
                   help="RBFSampler / Nystroem n_components")
    p.add_argument("--peer-alphas", type=_floats, default=_floats("0.01,0.1,1,10"),
                   help="Ridge / RidgeClassifier alpha")
    p.add_argument("--svc-C", type=_floats, default=_floats("1,10,100"), help="SVC C")
    p.add_argument("--krr-alphas", type=_floats, default=_floats("0.01,0.1,1"),
                   help="KernelRidge alpha")
    p.add_argument("--rbcd-grids", type=_ints, default=_ints("32,64,128,256"),
                   help="n_grids of the rbcd curve (the default n_grids is always included)")
    p.add_argument("--rbcd-seeds", type=int, default=1, help="grid seeds per rbcd point")
    p.add_argument("--rbcd-params", type=json.loads, default={},
                   help='extra RBClassifier/RBRegressor parameters as JSON, e.g. \'{"tol": 1e-3}\'')
    p.add_argument("--alpha-per-row", type=float, default=None, metavar="C",
                   help="rbcd's alpha = C * training rows (the recommended default rule, "
                        "until the models have it)")
    p.add_argument("--scale", choices=("auto", "yes", "no"), default="auto",
                   help='pass sigma="scale" (yes), the number it computes (no), or "scale" '
                        "when the estimators accept it (auto, default)")
    p.add_argument("--reuse", action="append", default=[], metavar="JSON",
                   help="a realdata.json of an earlier run (repeatable): its records of the "
                        "sets run now, for the methods not in --methods, join the table (e.g. "
                        "re-run rbcd only, keeping the peers; --methods none only merges)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    args.methods = [m for m in args.methods.split(",") if m and m != "none"]
    unknown = set(args.methods) - set(RBCD + PEERS)
    if unknown:
        p.error(f"unknown methods {sorted(unknown)}; choose from {RBCD + PEERS}")
    return args


def main(argv=None):
    args = parse_args(argv)
    args.scale = {"yes": True, "no": False}.get(args.scale)
    if args.scale is None:
        args.scale = _scale_supported()
    if args.scale:
        args.rbcd_params.setdefault("sigma", "scale")
    chosen = args.sets.split(",") if args.sets else None
    bundled = bundled_names(args.bundled)
    if chosen:
        bundled = [b for b in bundled if b in chosen]
        chosen = [c for c in chosen if c not in bundled] or None
        if chosen and args.dir is None:
            raise SystemExit(f"sets {chosen} are not bundled and no DIR was given")
    sets = []
    if args.dir is not None and (chosen or not args.sets):
        sets = load_sets(args.dir, chosen,
                         [s for s in args.regression.split(",") if s],
                         [s for s in args.classification.split(",") if s])
    sets += load_bundled(bundled)
    if not sets:
        raise SystemExit("no sets to run: give DIR or --bundled")
    import rbcd

    header = (f"Real-data comparison on {_cpu()} ({os.cpu_count()} logical CPUs), "
              f"rbcd {getattr(rbcd, '__version__', '?')}, Python {platform.python_version()}; "
              f"rbcd parameters {json.dumps(args.rbcd_params) or '{}'}"
              f"{'' if args.alpha_per_row is None else f', alpha = {args.alpha_per_row:g} * N'}"
              f"{'' if args.scale else ' (sigma = rbcd._scale.scale_sigma(X_train), a number)'}.")
    print(header, flush=True)
    records = []
    names = {ds.name for ds in sets}
    for path in args.reuse:
        with open(path) as f:
            records += [r for r in json.load(f)["records"]
                        if r["set"] in names and r["method"] not in args.methods]
    json_path = os.path.join(args.out, "realdata.json")
    for ds in sets:
        print(f"{ds.name}: {ds.task}, {ds.X_train.shape[0]} x {ds.X_train.shape[1]}, "
              f"{ds.X_test.shape[0]} test rows", flush=True)

        def emit(method, params, score, seconds, ds=ds):
            rec = dict(set=ds.name, task=ds.task, method=method, params=params,
                       score=score, seconds=seconds)
            records.append(rec)
            print(f"  {method:16s} {score:.4f} {seconds:8.3f}s {params}", flush=True)

        run_rbcd(ds, args, emit)
        run_peers(ds, args, emit)
        write_atomic(json_path, json.dumps(dict(header=header, records=records), indent=1))
    meta = [(ds.name, ds.task, ds.X_train.shape[0], ds.X_train.shape[1]) for ds in sets]
    rows = summarize(records, meta)
    md = markdown(rows, header)
    print(md)
    write_atomic(os.path.join(args.out, "realdata_table.md"), md)
    if rows:
        plot(records, rows, os.path.join(args.out, "realdata_time.png"))
    return rows


def _cpu():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    main()
