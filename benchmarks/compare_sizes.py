"""rbcd with its defaults against kernel-machine peers, from a few hundred rows to 3 x 10^5.

Issue 29 ("Fast at every size and on a busy machine"): the sizes where users meet a library
first. For each data set, fit + predict time and test score of

- ``rbcd``: RBClassifier() / RBRegressor() with every default (n_jobs=None), and the same
  with n_jobs=1; their ratio is the threads' gain (must not be a loss: <= 1.1), measured
  by --pairs paired fits (the ratio of the best times; the JSON also holds the medians');
- ``SVC`` / ``SVR``: scikit-learn's exact RBF kernel machines, defaults (up to --svc-max rows);
- ``KRR-lap``: KernelRidge(kernel="laplacian"), the exact kernel rbcd approximates, with
  gamma = 1 / sigma of rbcd's median rule and alpha = rbcd's default penalty
  (up to --krr-max rows: it needs an N x N matrix);
- ``Nystroem`` / ``RBFSampler``: scikit-learn's kernel approximations (n_components
  --components) followed by RidgeClassifier / Ridge.

Data: scikit-learn's bundled sets, scaled (breast cancer, wine, digits, diabetes), and
synthetic sets at N in {300, 3,000, 30,000, 300,000} training rows (a quarter more held out
for the test): 2-class and 10-class classification, and regression, d = 8. ``--realdata DIR``
adds the real-data suite's sets of at most 5,000 training rows (issue 29's targets name them).

``--busy`` starts one busy-loop process per usable core for the whole run (a laptop busy
with other things). Every method's fits are timed in turns (one fit of each, repeated), so
slow drifts of the machine hit them alike; the time is the best of --repeat (rbcd's two
variants fit once more, untimed, before the turns: first-call costs are not a size's).

    python benchmarks/compare_sizes.py                 # idle machine
    python benchmarks/compare_sizes.py --busy          # one busy loop per core
    python benchmarks/compare_sizes.py --quick         # N <= 3,000, a smoke run
    python benchmarks/compare_sizes.py --realdata DIR  # also the suite's sets <= 5,000 rows
    python benchmarks/compare_sizes.py --out docs/benchmarks   # also writes sizes[_busy].md/json
"""
import multiprocessing as mp
import os
import signal
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

SIZES = (300, 3_000, 30_000, 300_000)
QUICK_SIZES = (300, 3_000)


def _spin(ready=None):
    if ready is not None:
        ready.set()
    while True:
        pass


class BusyCores:
    """One busy-loop process per usable core, for the lifetime of the context."""

    def __init__(self, n):
        self.n = n
        self.procs = []

    def __enter__(self):
        # a SIGTERM to this script must stop the loops too (daemon processes outlive a
        # parent that is killed): turn it into SystemExit, which runs __exit__
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        ctx = mp.get_context("spawn")
        ready = [ctx.Event() for _ in range(self.n)]
        self.procs = [ctx.Process(target=_spin, args=(r,), daemon=True) for r in ready]
        for p in self.procs:
            p.start()
        for r in ready:                 # every loop spinning (a spawned interpreter's start
            r.wait(60)                  # is itself work) before anything is timed
        time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.join()


# ----------------------------------------------------------------------------- data
def bundled_sets():
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, load_wine
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    for name, loader, task in (("breast cancer", load_breast_cancer, "clf"),
                               ("wine", load_wine, "clf"),
                               ("digits", load_digits, "clf"),
                               ("diabetes", load_diabetes, "reg")):
        X, y = loader(return_X_y=True)
        Xtr, Xte, ytr, yte = train_test_split(X, y, random_state=0)
        sc = StandardScaler().fit(Xtr)
        yield f"{name} (scaled)", task, sc.transform(Xtr), ytr, sc.transform(Xte), yte


#: the real-data suite's sets up to this many training rows join the run (--realdata)
REALDATA_MAX_N = 5_000


def realdata_sets(folder):
    """The svmlight pairs NAME.train.svm / NAME.test.svm of ``folder`` (what
    ../shared/data/realdata.py writes) with at most REALDATA_MAX_N training rows, dense, as
    given (the writer scales the features to [0, 1]), smallest first: compare_realdata's
    loader and task rule."""
    from compare_realdata import load_sets

    for ds in load_sets(folder):
        if ds.X_train.shape[0] <= REALDATA_MAX_N:
            yield (ds.name, "clf" if ds.task == "classification" else "reg", ds.X_train,
                   ds.y_train, ds.X_test, ds.y_test)


def synthetic(kind, n, seed=0, d=8):
    """n training rows and n // 4 test rows (at least 100) of a nonlinear problem."""
    rng = np.random.default_rng(seed)
    m = n + max(100, n // 4)
    X = rng.uniform(-1, 1, size=(m, d))
    f = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + X[:, 2] * X[:, 3] + 0.5 * X[:, 4] ** 2
    if kind == "clf2":
        y = (f + 0.3 * rng.standard_normal(m) > np.median(f)).astype(int)
    elif kind == "clf10":
        g = f + 0.8 * X[:, 5] + 0.2 * rng.standard_normal(m)
        y = np.searchsorted(np.quantile(g, np.linspace(0, 1, 11)[1:-1]), g)
    else:
        y = f + 0.1 * rng.standard_normal(m)
    return X[:n], y[:n], X[n:], y[n:]


def synthetic_sets(sizes):
    for n in sizes:
        for kind, task, label in (("clf2", "clf", "2 classes"), ("clf10", "clf", "10 classes"),
                                  ("reg", "reg", "regression")):
            Xtr, ytr, Xte, yte = synthetic(kind, n)
            yield f"synthetic {label}", task, Xtr, ytr, Xte, yte


# ----------------------------------------------------------------------------- methods
def methods(task, n, args, sigma):
    """[(name, factory)] for the data set: factory() returns an unfitted estimator."""
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import Ridge, RidgeClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import SVC, SVR

    import rbcd

    clf = task == "clf"
    RB = rbcd.RBClassifier if clf else rbcd.RBRegressor
    out = [("rbcd", lambda: RB(random_state=0)), ("rbcd n_jobs=1", lambda: RB(n_jobs=1, random_state=0))]
    if n <= args.svc_max:
        out.append(("SVC" if clf else "SVR", lambda: SVC() if clf else SVR()))
    if n <= args.krr_max and not clf:
        # the exact Laplacian kernel machine with rbcd's sigma and default penalty
        out.append(("KRR-lap", lambda: KernelRidge(kernel="laplacian", gamma=1.0 / sigma,
                                                   alpha=1e-4 * n)))
    lin = (lambda: RidgeClassifier(alpha=1.0)) if clf else (lambda: Ridge(alpha=1.0))
    k = min(args.components, n)
    out.append(("Nystroem", lambda: make_pipeline(Nystroem(n_components=k, random_state=0), lin())))
    out.append(("RBFSampler", lambda: make_pipeline(RBFSampler(n_components=args.components,
                                                               random_state=0), lin())))
    return out


def score(task, est, X, y):
    pred = est.predict(X)
    if task == "clf":
        return float(np.mean(pred == y))
    ss = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - float(np.sum((y - pred) ** 2)) / ss if ss > 0 else float("nan")


def run_set(name, task, Xtr, ytr, Xte, yte, args):
    from rbcd._scale import median_l1_distance

    n = Xtr.shape[0]
    sigma = 0.5 * median_l1_distance(Xtr)
    ms = methods(task, n, args, sigma)
    repeat = args.repeat if n < 100_000 else max(1, min(args.repeat, 2))
    best = {m: float("inf") for m, _ in ms}
    scores = {}
    for m, make in ms:                           # rbcd's first-call costs (imports) untimed
        if m.startswith("rbcd"):
            make().fit(Xtr, ytr).predict(Xte)
    for _ in range(repeat):                      # the methods in turns
        for m, make in ms:
            t0 = time.perf_counter()
            est = make().fit(Xtr, ytr)
            s = score(task, est, Xte, yte)
            best[m] = min(best[m], time.perf_counter() - t0)
            scores[m] = s
    threads = threads_ratio(dict(ms), Xtr, ytr, Xte,
                            args.pairs if n < 100_000 else max(1, min(args.pairs, 3)))
    rows = []
    peer = "SVC" if task == "clf" else "SVR"
    for m, _ in ms:
        rows.append(dict(data=name, n=n, task=task, method=m, time=best[m], score=scores[m],
                         vs_svm=C.ratio(best[m], best.get(peer, float("nan"))),
                         threads_ratio=threads[1] if m == "rbcd" else float("nan"),
                         threads_ratio_median=threads[0] if m == "rbcd" else float("nan")))
    return rows


def threads_ratio(makers, Xtr, ytr, Xte, pairs):
    """n_jobs=None against n_jobs=1 by ``pairs`` paired fits + predicts, the order
    alternating within each pair: (ratio of the medians, ratio of the best times). The
    best times are the reported ratio: other processes only add time, and on a busy machine
    a fit of 10-50 ms is paused by the scheduler in some runs and not in others, so the
    medians of 15 runs of the very same code spread 0.85-1.4x (docs/benchmarks/sizes.md)."""
    t = {"rbcd": [], "rbcd n_jobs=1": []}
    for i in range(pairs):
        for m in (("rbcd", "rbcd n_jobs=1") if i % 2 == 0 else ("rbcd n_jobs=1", "rbcd")):
            t0 = time.perf_counter()
            makers[m]().fit(Xtr, ytr).predict(Xte)
            t[m].append(time.perf_counter() - t0)
    a, b = np.array(t["rbcd"]), np.array(t["rbcd n_jobs=1"])
    return C.ratio(float(np.median(a)), float(np.median(b))), C.ratio(a.min(), b.min())


def print_rows(rows):
    print(f"{'data':28s} {'N':>8s} {'method':14s} {'fit+predict':>12s} {'score':>7s} "
          f"{'ratio vs SVM':>12s} {'threads':>8s}")
    for r in rows:
        th = "" if r["threads_ratio"] != r["threads_ratio"] else f"{r['threads_ratio']:.2f}x"
        vs = "" if r["vs_svm"] != r["vs_svm"] else f"{r['vs_svm']:.2f}x"
        print(f"{r['data']:28s} {r['n']:8d} {r['method']:14s} {C.fmt_time(r['time']):>12s} "
              f"{r['score']:7.4f} {vs:>12s} {th:>8s}", flush=True)


def markdown(rows, title, machine):
    lines = [f"# {title}", "", f"Machine: {machine}. `score`: accuracy (classification) or R^2.",
             "`threads`: rbcd with n_jobs=None over n_jobs=1, the ratio of the best times of "
             "--pairs paired fits (target <= 1.1).",
             "`vs SVM`: fit + predict time over SVC()/SVR() in the same run "
             "(target for classification up to 5,000 rows: <= 2.0, score >= SVC's - 0.01).", "",
             "| data | N | method | fit + predict | score | vs SVM | threads |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        th = "" if r["threads_ratio"] != r["threads_ratio"] else f"{r['threads_ratio']:.2f}x"
        vs = "" if r["vs_svm"] != r["vs_svm"] else f"{r['vs_svm']:.2f}x"
        lines.append(f"| {r['data']} | {r['n']:,} | {r['method']} | {C.fmt_time(r['time'])} | "
                     f"{r['score']:.4f} | {vs} | {th} |")
    return "\n".join(lines) + "\n"


def calibrate(args):
    """The constants of rbcd.solvers._direct's cost model, measured on this machine (one
    thread), and the crossover they imply against measured fits: for each N, the time of
    RidgeCG(solver="cg") and of the dual direct solve on RB features (R = 256, d = 8), and
    the form the model picks."""
    import scipy.linalg

    from rbcd import RandomBinning, RidgeCG
    from rbcd.solvers import _direct, _gram

    rows = []
    print(f"{'N':>6s} {'k':>3s} {'gram ns/cmp':>12s} {'potrf ns/flop':>14s} {'cg ns/entry':>12s} "
          f"{'cg it':>6s} {'cg fit':>10s} {'dual fit':>10s} {'faster':>7s} {'model':>7s}")
    for n in args.calibrate_sizes:
        Xtr, ytr, _, _ = synthetic("clf10", n)
        Z, cols = RandomBinning(n_grids=256, random_state=0, n_jobs=1).fit_transform(
            Xtr, return_columns=True)
        L = np.ascontiguousarray((Z.indices.reshape(n, 256).T - cols.grid_ptr[:-1, None])
                                 .astype(np.uint16))
        K = np.empty((n, n))
        t_gram, _ = C.best_of(lambda: _gram.gram_dual(L, 1 / 256, None, 0.0, None, K, 1), 3)
        A = np.eye(n) * n + K
        t_chol, _ = C.best_of(lambda: scipy.linalg.lapack.dpotrf(A.T, lower=0, overwrite_a=0), 3)
        for k in (1, 10):
            Y = np.eye(k)[ytr % k] * 2 - 1 if k > 1 else (ytr[:, None] > 4) * 2.0 - 1
            a = 1e-4 * n
            t_cg, m = C.best_of(lambda: RidgeCG(alpha=a, solver="cg", tol=1e-3, n_jobs=1).fit(
                Z, Y, columns=cols), args.repeat)
            it = int(np.max(m.n_iter_))
            t_dual, _ = C.best_of(lambda: RidgeCG(alpha=a, solver="direct", n_jobs=1).fit(
                Z, Y, columns=cols), args.repeat)
            per_entry = t_cg / max(it, 1) / (2.0 * n * 256 * k)
            pick = _direct.plan(n, Z.shape[1], 256, k, True)
            row = dict(n=n, k=k, gram=t_gram / (n * n * 256 / 2), potrf=t_chol / (n ** 3 / 3),
                       cg_entry=per_entry, cg_it=it, cg_fit=t_cg, dual_fit=t_dual,
                       faster="dual" if t_dual < t_cg else "cg", model=pick)
            rows.append(row)
            print(f"{n:6d} {k:3d} {row['gram'] * 1e9:12.3f} {row['potrf'] * 1e9:14.4f} "
                  f"{per_entry * 1e9:12.3f} {it:6d} {C.fmt_time(t_cg):>10s} "
                  f"{C.fmt_time(t_dual):>10s} {row['faster']:>7s} {pick:>7s}", flush=True)
    return rows


def main(argv=None):
    p = C.parser(__doc__, n=SIZES[-1], quick_n=QUICK_SIZES[-1], repeat=5)  # --n, --d, --grids unused
    p.add_argument("--busy", action="store_true", help="one busy-loop process per core")
    p.add_argument("--sizes", type=lambda s: tuple(int(v) for v in s.split(",")), default=None,
                   help="synthetic training sizes, comma-separated (default 300,3000,30000,300000)")
    p.add_argument("--no-bundled", action="store_true", help="skip scikit-learn's bundled sets")
    p.add_argument("--realdata", default=None, metavar="DIR",
                   help="also the real-data suite's sets of at most 5,000 training rows from DIR "
                        "(svmlight pairs written by ../shared/data/realdata.py)")
    p.add_argument("--svc-max", type=int, default=30_000, help="largest N for SVC/SVR")
    p.add_argument("--krr-max", type=int, default=5_000, help="largest N for KernelRidge")
    p.add_argument("--components", type=int, default=1000,
                   help="Nystroem / RBFSampler components (default 1000)")
    p.add_argument("--pairs", type=int, default=15,
                   help="paired n_jobs=None / n_jobs=1 fits for the threads ratio (3 at "
                        ">= 100,000 rows; default 15)")
    p.add_argument("--out", default=None, help="directory for sizes[_busy].md / .json")
    p.add_argument("--calibrate", action="store_true",
                   help="measure the constants of solver='auto''s cost model instead")
    p.add_argument("--calibrate-sizes", type=lambda s: tuple(int(v) for v in s.split(",")),
                   default=(500, 1000, 2000, 4000, 8000))
    args = p.parse_args(argv)
    if args.calibrate:
        C.print_header("compare_sizes --calibrate: the direct solves' cost model", args)
        warnings.simplefilter("ignore")
        return calibrate(args)
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    C.print_header("compare_sizes: rbcd defaults vs kernel machines, by size"
                   + (" (busy: one spinning process per core)" if args.busy else ""), args)
    warnings.simplefilter("ignore")
    sets = [] if args.no_bundled else list(bundled_sets())
    if args.realdata:
        sets += list(realdata_sets(args.realdata))
    sets += list(synthetic_sets(sizes))
    rows = []
    busy = BusyCores(C.usable_cpus()) if args.busy else None
    try:
        if busy:
            busy.__enter__()
        for spec in sets:
            new = run_set(*spec, args)
            print_rows(new)
            rows += new
    finally:
        if busy:
            busy.__exit__(None, None, None)
    worst = max((r["threads_ratio"] for r in rows if r["threads_ratio"] == r["threads_ratio"]),
                default=float("nan"))
    print(f"\nthreads ratio (n_jobs=None / n_jobs=1), worst: {worst:.2f}x (target <= 1.1)")
    small = [r for r in rows if r["method"] == "rbcd" and r["task"] == "clf" and r["n"] <= 5000
             and r["vs_svm"] == r["vs_svm"]]
    if small:
        print(f"classification <= 5,000 rows, time ratio vs SVC, worst: "
              f"{max(r['vs_svm'] for r in small):.2f}x (target <= 2.0)")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        stem = "sizes_busy" if args.busy else "sizes"
        machine = f"{C.usable_cpus()} usable CPUs, {C.cpu_model()}"
        C.write_text(os.path.join(args.out, stem + ".md"),
                     markdown(rows, "compare_sizes" + (" --busy" if args.busy else ""), machine))
        C.write_json(os.path.join(args.out, stem + ".json"), dict(machine=machine, rows=rows),
                     indent=1)
    return rows


if __name__ == "__main__":
    main()
