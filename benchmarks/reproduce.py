"""Reproduce the experiments of Wu et al., "Revisiting Random Binning Features" (KDD 2016),
Figures 3-6, at laptop scale, with rbcd.

Usage::

    python benchmarks/reproduce.py --out repro_out            # default run, ~10-15 min
    python benchmarks/reproduce.py --out repro_out --quick    # smoke run, ~2-3 min
    python benchmarks/reproduce.py --out repro_out --data FILE.svm [--max-rows 50000]
    python benchmarks/reproduce.py --out repro_out --threads 1,2,4 --panels sigma,grids \
        --datasets digits,diabetes

Writes into the --out directory only (created if needed; nothing else is written):

* ``fig3_sigma.png``    (a) train / test performance, train time and D vs sigma at fixed R
                        (paper Fig. 3); the black line is the best test performance of the
                        exact kernel (where N allows), the square RB's best.
* ``fig4_grids.png``    (b) the same vs R at the best sigma of (a) (paper Fig. 4).
* ``fig5_time.png``     (c) test performance vs train time: RB + CG (several R) against
                        scikit-learn RBFSampler + Ridge, Nystroem (laplacian) + Ridge (several
                        n_components), rbcd.RandomFourier (laplacian) + RidgeCG, the other
                        papers' systems at their defaults (SparseRandomFeatures, and DSEKL for
                        classification; Gaussian kernel, sigma="scale", no tuning) and the
                        exact laplacian KernelRidge where N_train <= 5000 (paper Fig. 5).
* ``fig6_speedup.png``  (d) coordinate-descent speedup vs threads for RB (Hogwild and grid
                        blocks) and dense random Fourier features (Hogwild), beside the
                        paper's eq. 29 prediction tau / (1 + (R - 1)(tau - 1)/(D - 1))
                        (R = non-zeros per row; for RF every row has D non-zeros, so ~1).
* ``results.md``        every number in Markdown tables, with the machine and settings.
* ``results.json``      the same, machine-readable.

Data (no downloads, no network): the generated checkerboard (4x4 cells in 2 of 8
dimensions; 2x2, an XOR, with --quick, whose smaller N cannot learn 4x4) and nonlinear
regression problems of ``rbcd.datasets`` and scikit-learn's bundled digits, breast_cancer and diabetes;
or ``--data FILE`` (svmlight/libsvm; classification or regression detected from the labels
as in ``rbcd train``), split 80/20. Real-valued features of the bundled and --data sets are
standardized with the training split's mean and standard deviation.

Performance is accuracy for classification and RMSE for regression. Ridge's alpha is the
same for every method on a data set (scikit-learn's convention, sum of squared errors +
alpha ||w||^2), so each method approximates the same kernel ridge problem. The base kernel
width sigma0 of a data set is the mean L1 distance between random pairs of training rows;
(a) sweeps sigma0 * 2^k. The Gaussian kernel of RBFSampler uses gamma = 1 / median of the
squared L2 distances between random pairs.

Timings are wall-clock seconds of ``fit`` (feature map + solver) on whatever machine runs
this: run it on a quiet machine. A panel that fails is reported in results.md, the others
still run.
"""
import argparse
import json
import os
import platform
import sys
import time
import traceback
import warnings


import numpy as np
import scipy.sparse as sp

from rbcd._io import atomic_write

# --------------------------------------------------------------------------------- settings
QUICK = dict(
    n_synthetic=2500, n_synthetic_test=1000, checker_cells=2, datasets=("checkerboard", "breast_cancer",
                                                       "diabetes"),
    sigma_exponents=(-3, -2, -1, 0, 1, 2), R_sigma=64, R_list=(8, 32, 128),
    rb_R_list=(8, 32, 128), components=(64, 256, 1024), exact_max_n=3000,
    srf_iters=(2, 6), dsekl_epochs=(1, 4),
    speed_n=50000, speed_R=64, speed_rf_D=128, speed_epochs=8, speed_repeats=1,
)
DEFAULT = dict(
    n_synthetic=20000, n_synthetic_test=5000, checker_cells=4, datasets=("checkerboard", "regression",
                                                        "digits", "breast_cancer",
                                                        "diabetes"),
    sigma_exponents=(-4, -3, -2, -1, 0, 1, 2, 3), R_sigma=128,
    R_list=(8, 16, 32, 64, 128, 256, 512), rb_R_list=(8, 16, 32, 64, 128, 256),
    components=(64, 128, 256, 512, 1024), exact_max_n=5000,
    srf_iters=(2, 5, 10, 20), dsekl_epochs=(3, 10, 30, 100),
    speed_n=1000000, speed_R=64, speed_rf_D=64, speed_epochs=12, speed_repeats=2,
)
CG_TOL = 1e-3  # the paper's CG tolerance (Sec. 5.2)
PANELS = ("sigma", "grids", "time", "speedup")
ALL_DATASETS = ("checkerboard", "regression", "digits", "breast_cancer", "diabetes")


# --------------------------------------------------------------------------------- data
class Dataset:
    def __init__(self, name, task, Xtr, ytr, Xte, yte, alpha, note=""):
        self.name, self.task, self.alpha, self.note = name, task, alpha, note
        self.Xtr, self.ytr, self.Xte, self.yte = Xtr, ytr, Xte, yte
        self.sigma0 = None
        self.best_sigma = None

    @property
    def classification(self):
        return self.task == "classification"

    def describe(self):
        d = self.Xtr.shape[1]
        return (f"{self.name}: {self.task}, {self.Xtr.shape[0]} train / {self.Xte.shape[0]} "
                f"test rows, d = {d}, alpha = {self.alpha:g}{', ' + self.note if self.note else ''}")


def _split(X, y, seed, test_fraction=0.2):
    rng = np.random.default_rng(seed)
    perm = rng.permutation(X.shape[0])
    n_test = max(1, int(round(test_fraction * X.shape[0])))
    te, tr = perm[:n_test], perm[n_test:]
    return X[tr], y[tr], X[te], y[te]


def _standardize(Xtr, Xte):
    mu = Xtr.mean(axis=0)
    sd = Xtr.std(axis=0)
    sd[sd == 0] = 1.0
    return (Xtr - mu) / sd, (Xte - mu) / sd


def load_datasets(cfg, args):
    """The list of Dataset objects for this run."""
    from rbcd.datasets import make_checkerboard, make_nonlinear_regression

    seed = args.seed
    out = []
    if args.data:
        from rbcd.cli import CLIError, _labels, detect_task, load_svmlight, to_dense

        try:
            X, y, _ = load_svmlight(args.data)
            X = to_dense(X, args.data)  # standardized below, as the sweeps need dense X
        except CLIError as exc:
            sys.exit(f"reproduce.py: error: {exc}")
        if args.max_rows and X.shape[0] > args.max_rows:
            keep = np.random.default_rng(seed).choice(X.shape[0], args.max_rows, replace=False)
            X, y = X[np.sort(keep)], y[np.sort(keep)]
        task = args.task if args.task != "auto" else detect_task(y)
        if task == "classification":
            y = _labels(y)
        Xtr, ytr, Xte, yte = _split(X, y, seed)
        Xtr, Xte = _standardize(Xtr, Xte)
        out.append(Dataset(os.path.basename(args.data), task, Xtr, ytr, Xte, yte,
                           alpha=args.alpha if args.alpha is not None else 1.0))
        return out
    n, nt = cfg["n_synthetic"], cfg["n_synthetic_test"]
    for name in (args.datasets or cfg["datasets"]):
        if name == "checkerboard":
            c = cfg["checker_cells"]
            X, y = make_checkerboard(n + nt, n_features=8, n_informative=2, n_cells=c,
                                     random_state=seed)
            out.append(Dataset(name, "classification", X[:n], y[:n], X[n:], y[n:],
                               alpha=0.1, note=f"{c}x{c} cells in 2 of 8 dims"))
        elif name == "regression":
            X, y = make_nonlinear_regression(n + nt, n_features=8, noise=0.1,
                                             random_state=seed)
            out.append(Dataset(name, "regression", X[:n], y[:n], X[n:], y[n:], alpha=0.1,
                               note="rbcd.datasets.make_nonlinear_regression, noise 0.1"))
        else:
            from sklearn import datasets as skd

            loader = {"digits": skd.load_digits, "breast_cancer": skd.load_breast_cancer,
                      "diabetes": skd.load_diabetes}[name]
            X, y = loader(return_X_y=True)
            task = "regression" if name == "diabetes" else "classification"
            Xtr, ytr, Xte, yte = _split(np.asarray(X, dtype=np.float64), y, seed)
            Xtr, Xte = _standardize(Xtr, Xte)
            out.append(Dataset(name, task, Xtr, ytr, Xte, yte, alpha=1.0,
                               note="scikit-learn bundled, standardized"))
    if args.alpha is not None:
        for ds in out:
            ds.alpha = args.alpha
    return out


def _pair_distances(X, seed, n_pairs=2000):
    rng = np.random.default_rng(seed)
    i = rng.integers(0, X.shape[0], n_pairs)
    j = rng.integers(0, X.shape[0], n_pairs)
    keep = i != j
    diff = X[i[keep]] - X[j[keep]]
    return np.abs(diff).sum(axis=1), (diff ** 2).sum(axis=1)


# --------------------------------------------------------------------------------- models
def score(ds, y_true, y_pred):
    if ds.classification:
        return float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))
    return float(np.sqrt(np.mean((np.asarray(y_true, float) - np.asarray(y_pred, float)) ** 2)))


def perf_name(ds):
    return "accuracy" if ds.classification else "RMSE"


def better(ds, a, b):
    """True if performance a is better than b."""
    return a > b if ds.classification else a < b


def fit_rb(ds, R, sigma, seed, with_train=True):
    """rbcd.RBClassifier / RBRegressor (random binning + ridge by CG); the measurements."""
    from rbcd import RBClassifier, RBRegressor

    cls = RBClassifier if ds.classification else RBRegressor
    model = cls(n_grids=R, sigma=sigma, solver="cg", alpha=ds.alpha, tol=CG_TOL,
                random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        model.fit(ds.Xtr, ds.ytr)
        t_total = time.perf_counter() - t0
    t_bin = float(model.fit_time_["binning"])
    res = dict(R=R, sigma=sigma, D=int(model.binning_.n_features_out_),
               kappa=float(model.binning_.kappa_), nnz=int(ds.Xtr.shape[0]) * R,
               bin_time=t_bin, solve_time=float(model.fit_time_["solver"]),
               train_time=t_total, n_iter=int(np.max(model.n_iter_)))
    if with_train:
        res["train_perf"] = score(ds, ds.ytr, model.predict(ds.Xtr))
    res["test_perf"] = score(ds, ds.yte, model.predict(ds.Xte))
    return res


def fit_exact(ds, sigma):
    """Exact laplacian kernel ridge (scikit-learn KernelRidge), one-vs-rest +-1 targets
    and argmax for classification (the RidgeClassifier convention)."""
    from sklearn.kernel_ridge import KernelRidge

    t0 = time.perf_counter()
    kr = KernelRidge(alpha=ds.alpha, kernel="laplacian", gamma=1.0 / sigma)
    if ds.classification:
        classes = np.unique(ds.ytr)
        Y = np.where(ds.ytr[:, None] == classes[None, :], 1.0, -1.0)
        kr.fit(ds.Xtr, Y)
        t = time.perf_counter() - t0

        def predict(X):
            P = kr.predict(X)
            if len(classes) == 2:  # one-vs-rest on 2 classes: column 1 decides
                return classes[(P[:, 1] > P[:, 0]).astype(int)]
            return classes[np.argmax(P, axis=1)]
    else:
        mean = ds.ytr.mean()
        kr.fit(ds.Xtr, ds.ytr - mean)
        t = time.perf_counter() - t0

        def predict(X):
            return kr.predict(X) + mean
    return dict(sigma=sigma, train_time=t, train_perf=score(ds, ds.ytr, predict(ds.Xtr)),
                test_perf=score(ds, ds.yte, predict(ds.Xte)))


def fit_dense_features(ds, method, n_components, sigma, gamma_rbf, seed):
    """A dense feature map + a ridge solver, timed end to end (fit of map, transform, fit)."""
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.linear_model import Ridge, RidgeClassifier

    from rbcd import RandomFourier, RidgeCG, RidgeCGClassifier

    t0 = time.perf_counter()
    if method == "RBFSampler + Ridge":
        fmap = RBFSampler(gamma=gamma_rbf, n_components=n_components, random_state=seed)
        solver = (RidgeClassifier if ds.classification else Ridge)(alpha=ds.alpha)
    elif method == "Nystroem + Ridge":
        fmap = Nystroem(kernel="laplacian", gamma=1.0 / sigma,
                        n_components=min(n_components, ds.Xtr.shape[0]), random_state=seed)
        solver = (RidgeClassifier if ds.classification else Ridge)(alpha=ds.alpha)
    elif method == "RandomFourier + RidgeCG":
        fmap = RandomFourier(n_components=n_components, kernel="laplacian", sigma=sigma,
                             random_state=seed)
        solver = (RidgeCGClassifier if ds.classification else RidgeCG)(alpha=ds.alpha,
                                                                      tol=CG_TOL)
    else:
        raise ValueError(method)
    F = fmap.fit_transform(ds.Xtr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        solver.fit(F, ds.ytr)
    t = time.perf_counter() - t0
    return dict(method=method, n_components=n_components, train_time=t,
                test_perf=score(ds, ds.yte, solver.predict(fmap.transform(ds.Xte))))


def fit_baseline(ds, method, size, seed):
    """The other systems of the source papers, timed end to end (fit, then score), each at
    its defaults, the ones docs/benchmarks/related.md measures against its own baselines
    (Gaussian kernel, sigma="scale" from the training rows; no tuning), as RBFSampler has
    its own kernel and gamma here. RB's sigma is not used: it is RB's Laplacian
    width, tuned for RB, and far from these methods' scale on some sets.

    "SparseRandomFeatures (l1 CD)": Yen et al.'s Algorithm 1 with ``size`` outer
    iterations of 64 random Fourier features each (alpha = 1/N, warm-started CD: 3 epochs
    per iteration, 10 in the last); the label is the number of features it keeps.
    "DSEKL": doubly stochastic empirical kernel learning (classification only; I = J = 100,
    AdaGrad, lambda = 1/N, no intercept), exactly ``size`` epochs (tol=0); the label is the
    number of epochs.
    """
    from rbcd import DoublyStochasticKernelClassifier, SparseRandomFeatures

    t0 = time.perf_counter()
    if method == "SparseRandomFeatures (l1 CD)":
        est = SparseRandomFeatures(n_iter=size,
                                   loss="logistic" if ds.classification else "squared",
                                   random_state=seed)
    elif method == "DSEKL":
        est = DoublyStochasticKernelClassifier(max_epochs=size, tol=0.0, random_state=seed)
    else:
        raise ValueError(method)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(ds.Xtr, ds.ytr)
    t = time.perf_counter() - t0
    label = int(est.n_features_history_[-1]) if method.startswith("Sparse") else size
    return dict(method=method, n_components=label, train_time=t,
                test_perf=score(ds, ds.yte, est.predict(ds.Xte)))


# --------------------------------------------------------------------------------- panels
def panel_sigma(datasets, cfg, args, log):
    """(a) performance and time vs sigma at fixed R (Fig. 3)."""
    R = cfg["R_sigma"]
    results = {}
    for ds in datasets:
        rows, exact = [], []
        for k in cfg["sigma_exponents"]:
            sigma = ds.sigma0 * 2.0 ** k
            res = fit_rb(ds, R, sigma, args.seed)
            rows.append(res)
            log(f"  [sigma] {ds.name}: sigma={sigma:.3g} D={res['D']} "
                f"train={res['train_perf']:.4g} test={res['test_perf']:.4g} "
                f"time={res['train_time']:.2f}s")
            if ds.Xtr.shape[0] <= cfg["exact_max_n"]:
                ex = fit_exact(ds, sigma)
                exact.append(ex)
                log(f"  [sigma] {ds.name}: exact kernel sigma={sigma:.3g} "
                    f"test={ex['test_perf']:.4g} time={ex['train_time']:.2f}s")
        best = rows[0]
        for r in rows[1:]:
            if better(ds, r["test_perf"], best["test_perf"]):
                best = r
        ds.best_sigma = best["sigma"]
        results[ds.name] = dict(R=R, rows=rows, exact=exact, best_sigma=ds.best_sigma)
    return results


def panel_grids(datasets, cfg, args, log):
    """(b) performance vs R at the best sigma of (a) (Fig. 4)."""
    results = {}
    for ds in datasets:
        rows = []
        for R in cfg["R_list"]:
            res = fit_rb(ds, R, ds.best_sigma, args.seed)
            rows.append(res)
            log(f"  [grids] {ds.name}: R={R} D={res['D']} train={res['train_perf']:.4g} "
                f"test={res['test_perf']:.4g} time={res['train_time']:.2f}s")
        results[ds.name] = dict(sigma=ds.best_sigma, rows=rows)
    return results


def panel_time(datasets, cfg, args, log):
    """(c) test performance vs train time for every method (Fig. 5)."""
    results = {}
    for ds in datasets:
        sigma = ds.best_sigma
        _, l2 = _pair_distances(ds.Xtr, args.seed + 1)
        gamma_rbf = 1.0 / float(np.median(l2))
        methods = {}
        rb = []
        for R in cfg["rb_R_list"]:
            res = fit_rb(ds, R, sigma, args.seed, with_train=False)
            res["n_components"] = R
            rb.append(res)
            log(f"  [time] {ds.name}: RB + CG R={R} test={res['test_perf']:.4g} "
                f"time={res['train_time']:.2f}s")
        methods["RB + CG (rbcd)"] = rb
        for method in ("RandomFourier + RidgeCG", "RBFSampler + Ridge", "Nystroem + Ridge"):
            rows = []
            for m in cfg["components"]:
                if m * ds.Xtr.shape[0] > 4e8:  # keep dense feature matrices under ~3 GB
                    continue
                if method == "Nystroem + Ridge" and m > ds.Xtr.shape[0]:
                    continue
                res = fit_dense_features(ds, method, m, sigma, gamma_rbf, args.seed)
                rows.append(res)
                log(f"  [time] {ds.name}: {method} m={m} test={res['test_perf']:.4g} "
                    f"time={res['train_time']:.2f}s")
            methods[method] = rows
        baselines = [("SparseRandomFeatures (l1 CD)", cfg["srf_iters"])]
        if ds.classification:
            baselines.append(("DSEKL", cfg["dsekl_epochs"]))
        for method, sizes in baselines:
            rows = []
            for size in sizes:
                res = fit_baseline(ds, method, size, args.seed)
                rows.append(res)
                log(f"  [time] {ds.name}: {method} size={res['n_components']} "
                    f"test={res['test_perf']:.4g} time={res['train_time']:.2f}s")
            methods[method] = rows
        exact = None
        if ds.Xtr.shape[0] <= cfg["exact_max_n"]:
            exact = fit_exact(ds, sigma)
            log(f"  [time] {ds.name}: exact KernelRidge test={exact['test_perf']:.4g} "
                f"time={exact['train_time']:.2f}s")
        results[ds.name] = dict(sigma=sigma, gamma_rbf=gamma_rbf, methods=methods, exact=exact)
    return results


def _speed_data(cfg, args, datasets):
    """A problem large enough for threads to matter: the --data file, or a checkerboard."""
    if args.data:
        ds = datasets[0]
        X, y = ds.Xtr, ds.ytr
        name = ds.name
        sigma = ds.best_sigma or ds.sigma0 / 4
    else:
        from rbcd.datasets import make_checkerboard

        X, y = make_checkerboard(cfg["speed_n"], n_features=8, n_informative=2, n_cells=4,
                                 random_state=args.seed)
        name = "checkerboard"
        sigma = 0.7
    y = np.asarray(y, dtype=np.float64)
    values = np.unique(y)
    if values.size == 2:
        y = np.where(y == values[1], 1.0, -1.0)
    return name, X, y, sigma


def _time_cd(Z, y, mode, n_threads, epochs, seed, columns=None):
    """Seconds per epoch and the final objective of squared-loss ridge CD.

    Two fits, of 1 and of ``epochs`` epochs (tol = 0, so all epochs run); the difference
    of their times divided by ``epochs - 1`` is the time of an epoch without the per-fit
    setup (CSC conversion, constants), which is what the threads speed up.
    """
    from rbcd import CDRegressor

    def run(n_epochs):
        est = CDRegressor(loss="squared", alpha=1e-6, l1_ratio=0.0, max_epochs=n_epochs,
                          tol=0.0, parallel=mode, n_jobs=n_threads, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            est.fit(Z, y, columns=columns)
            t = time.perf_counter() - t0
        return t, int(np.max(est.n_iter_)), float(np.ravel(est.objective_history_)[-1])

    t1, n1, _ = run(1)
    tE, nE, obj = run(epochs)
    per_epoch = tE / max(1, nE)
    if nE > n1:
        # setup excluded; if timing noise swamps the difference, keep the plain average
        diff = (tE - t1) / (nE - n1)
        if diff > 0.25 * per_epoch:
            per_epoch = diff
    return per_epoch, obj


def panel_speedup(datasets, cfg, args, log):
    """(d) CD speedup vs threads for RB (Hogwild, grid) and dense RF (Hogwild) (Fig. 6)."""
    from rbcd import RandomBinning, RandomFourier

    name, X, y, sigma = _speed_data(cfg, args, datasets)
    R, D_rf, epochs = cfg["speed_R"], cfg["speed_rf_D"], cfg["speed_epochs"]
    binning = RandomBinning(n_grids=R, sigma=sigma, random_state=args.seed)
    # the column structure is built once and handed to every fit, so that the timed fits
    # differ only in their epochs (rebuilding it per fit costs seconds, with a large variance)
    Z, columns = binning._fit_transform_columns(X)
    D = int(binning.n_features_out_)
    F = sp.csc_matrix(RandomFourier(n_components=D_rf, kernel="laplacian", sigma=sigma,
                                    random_state=args.seed).fit_transform(X))
    threads = args.threads
    setups = [
        ("RB, Hogwild", Z, "hogwild", columns, dict(R=R, D=D)),
        ("RB, grid blocks", Z, "grid", columns, dict(R=R, D=D)),
        ("RF (dense), Hogwild", F, "hogwild", None, dict(R=D_rf, D=D_rf)),
    ]
    results = dict(data=name, n=int(X.shape[0]), sigma=sigma, epochs=epochs, modes={})
    for label, M, mode, bn, shape in setups:
        rows = []
        for tau in threads:
            times, objs = [], []
            for rep in range(cfg["speed_repeats"]):
                t, obj = _time_cd(M, y, mode, tau, epochs, args.seed, columns=bn)
                times.append(t)
                objs.append(obj)
            Rr, Dd = shape["R"], shape["D"]
            pred = tau / (1.0 + (Rr - 1) * (tau - 1) / (Dd - 1)) if Dd > 1 else 1.0
            rows.append(dict(threads=tau, epoch_time=min(times), objective=objs[0],
                             predicted=pred))
            log(f"  [speedup] {label}: threads={tau} epoch={min(times):.3f}s "
                f"objective={objs[0]:.6g} eq29={pred:.3f}")
        base = rows[0]["epoch_time"] * rows[0]["threads"]  # normalized to one thread
        t1 = next((r["epoch_time"] for r in rows if r["threads"] == 1), None)
        for r in rows:
            r["speedup"] = (t1 if t1 is not None else base) / r["epoch_time"]
        results["modes"][label] = dict(rows=rows, **shape)
    return results


# --------------------------------------------------------------------------------- output
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_sweep(results, datasets, key, xlabel, path, title, logx=2):
    plt = _plt()
    names = [ds.name for ds in datasets if ds.name in results]
    fig, axes = plt.subplots(len(names), 4, figsize=(15, 3.0 * len(names)), squeeze=False)
    for row, name in enumerate(names):
        ds = next(d for d in datasets if d.name == name)
        res = results[name]
        xs = [r[key] for r in res["rows"]]
        ax = axes[row]
        ax[0].plot(xs, [r["train_perf"] for r in res["rows"]], "o-", color="tab:blue")
        ax[0].set_ylabel(f"{name}\ntrain {perf_name(ds)}")
        ax[1].plot(xs, [r["test_perf"] for r in res["rows"]], "o-", color="tab:red", label="RB")
        ax[1].set_ylabel(f"test {perf_name(ds)}")
        best = res["rows"][0]
        for r in res["rows"]:
            if better(ds, r["test_perf"], best["test_perf"]):
                best = r
        ax[1].plot([best[key]], [best["test_perf"]], "s", color="k", fillstyle="none",
                   markersize=11, label="RB best")
        exact = res.get("exact") or []
        if exact:
            ex_best = max(e["test_perf"] for e in exact) if ds.classification else \
                min(e["test_perf"] for e in exact)
            ax[1].axhline(ex_best, color="k", lw=1.2, label="exact kernel (best)")
        ax[1].legend(fontsize=7)
        ax[2].plot(xs, [r["train_time"] for r in res["rows"]], "o-", color="tab:green",
                   label="total")
        ax[2].plot(xs, [r["bin_time"] for r in res["rows"]], "x--", color="tab:olive",
                   label="binning")
        ax[2].set_ylabel("train time (s)")
        ax[2].legend(fontsize=7)
        ax[3].plot(xs, [r["D"] for r in res["rows"]], "o-", color="tab:purple")
        ax[3].set_ylabel("D (columns)")
        ax[3].set_yscale("log")
        for a in ax:
            a.set_xscale("log", base=logx)
            a.grid(alpha=0.3)
            a.set_xlabel(xlabel)
    fig.suptitle(title)
    fig.tight_layout()
    with atomic_write(path, "wb") as fh:  # a failed write keeps the previous figure
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)


def plot_time(results, datasets, path):
    plt = _plt()
    names = [ds.name for ds in datasets if ds.name in results]
    ncol = min(3, len(names))
    nrow = (len(names) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.2 * ncol, 4.0 * nrow), squeeze=False)
    styles = {"RB + CG (rbcd)": ("o-", "tab:red"), "RandomFourier + RidgeCG": ("^-", "tab:blue"),
              "RBFSampler + Ridge": ("v-", "tab:cyan"), "Nystroem + Ridge": ("d-", "tab:green"),
              "SparseRandomFeatures (l1 CD)": ("s--", "tab:purple"),
              "DSEKL": ("x--", "tab:brown")}
    for k, name in enumerate(names):
        ds = next(d for d in datasets if d.name == name)
        ax = axes[k // ncol][k % ncol]
        res = results[name]
        for method, rows in res["methods"].items():
            if not rows:
                continue
            st, color = styles.get(method, ("o-", None))
            ax.plot([r["train_time"] for r in rows], [r["test_perf"] for r in rows], st,
                    color=color, label=method)
            for r in rows:
                ax.annotate(str(r["n_components"]), (r["train_time"], r["test_perf"]),
                            fontsize=6, xytext=(2, 2), textcoords="offset points")
        if res.get("exact"):
            ax.plot([res["exact"]["train_time"]], [res["exact"]["test_perf"]], "k*",
                    markersize=12, label="exact KernelRidge")
        ax.set_xscale("log")
        ax.set_xlabel("train time (s)")
        ax.set_ylabel(f"test {perf_name(ds)}")
        ax.set_title(f"{name} (sigma = {res['sigma']:.3g})", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for k in range(len(names), nrow * ncol):
        axes[k // ncol][k % ncol].axis("off")
    fig.suptitle("Test performance vs train time (labels: R for RB, n_components otherwise)")
    fig.tight_layout()
    with atomic_write(path, "wb") as fh:  # a failed write keeps the previous figure
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)


def plot_speedup(results, path):
    plt = _plt()
    modes = results["modes"]
    fig, axes = plt.subplots(1, len(modes), figsize=(5 * len(modes), 4), squeeze=False)
    for ax, (label, res) in zip(axes[0], modes.items()):
        tau = [r["threads"] for r in res["rows"]]
        ax.plot(tau, [r["speedup"] for r in res["rows"]], "o-", color="tab:red",
                label="measured")
        if "grid" in label:
            ax.plot(tau, tau, ":", color="gray", label="ideal (conflict-free blocks)")
        else:
            ax.plot(tau, [r["predicted"] for r in res["rows"]], "s--", color="k",
                    label="eq. 29 prediction")
            ax.plot(tau, tau, ":", color="gray", label="ideal")
        ax.set_xlabel("threads")
        ax.set_ylabel("speedup over 1 thread")
        ax.set_title(f"{label}\nR = {res['R']} nnz/row, D = {res['D']}", fontsize=10)
        ax.set_xticks(tau)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Coordinate descent speedup ({results['data']}, N = {results['n']}, "
                 f"{results['epochs']} epochs)")
    fig.tight_layout()
    with atomic_write(path, "wb") as fh:  # a failed write keeps the previous figure
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(v) for v in r) + " |")
    return "\n".join(lines)


def write_markdown(path, all_results, datasets, cfg, args, machine, errors, elapsed):
    md = ["# rbcd: reproduction of Wu et al. (KDD 2016), Figures 3-6", ""]
    md.append(f"Mode: {'quick' if args.quick else 'default'}; seed {args.seed}; "
              f"total time {elapsed:.0f} s.  ")
    md.append(f"Machine: {machine}  ")
    md.append(f"CG tolerance {CG_TOL:g} (the paper's). Performance: accuracy (classification), "
              f"RMSE (regression).")
    md.append("")
    md.append("## Data")
    md.append("")
    for ds in datasets:
        md.append(f"- {ds.describe()}, sigma0 = {ds.sigma0:.3g}")
    md.append("")
    res = all_results.get("sigma")
    if res:
        md += ["## (a) Performance vs sigma at fixed R (Fig. 3)", "", "![fig3](fig3_sigma.png)", ""]
        for name, r in res.items():
            ds = next(d for d in datasets if d.name == name)
            exact = {round(e["sigma"], 12): e for e in r["exact"]}
            rows = []
            for x in r["rows"]:
                e = exact.get(round(x["sigma"], 12))
                rows.append([x["sigma"], x["D"], x["kappa"], x["train_perf"], x["test_perf"],
                             x["bin_time"], x["train_time"], x["n_iter"],
                             e["test_perf"] if e else "-", e["train_time"] if e else "-"])
            md += [f"**{name}**, R = {r['R']}, best sigma = {r['best_sigma']:.4g}", "",
                   _table(["sigma", "D", "kappa", f"train {perf_name(ds)}",
                           f"test {perf_name(ds)}", "binning s", "train s", "CG iters",
                           f"exact test {perf_name(ds)}", "exact s"], rows), ""]
    res = all_results.get("grids")
    if res:
        md += ["## (b) Performance vs R at fixed sigma (Fig. 4)", "", "![fig4](fig4_grids.png)", ""]
        for name, r in res.items():
            ds = next(d for d in datasets if d.name == name)
            rows = [[x["R"], x["D"], x["kappa"], x["nnz"], x["train_perf"], x["test_perf"],
                     x["bin_time"], x["train_time"]] for x in r["rows"]]
            md += [f"**{name}**, sigma = {r['sigma']:.4g}", "",
                   _table(["R", "D", "kappa", "nnz", f"train {perf_name(ds)}",
                           f"test {perf_name(ds)}", "binning s", "train s"], rows), ""]
    res = all_results.get("time")
    if res:
        md += ["## (c) Test performance vs train time (Fig. 5)", "", "![fig5](fig5_time.png)", "",
               "SparseRandomFeatures (l1 CD) and DSEKL are the other source papers' systems at "
               "their defaults (Gaussian kernel, sigma=\"scale\", no tuning; not RB's sigma); their "
               "size column is the number of kept features (SRF, after "
               f"{', '.join(map(str, cfg['srf_iters']))} outer iterations of 64 features) or of "
               f"epochs (DSEKL: {', '.join(map(str, cfg['dsekl_epochs']))}). "
               "[related.md](related.md) measures them against their own baselines. On the "
               "checkerboard (2 informative dimensions of 8) both stay near chance at these "
               "defaults: one bandwidth from the median distance over all 8 dimensions is far "
               "wider than the cells.", ""]
        for name, r in res.items():
            ds = next(d for d in datasets if d.name == name)
            rows = []
            for method, mrows in r["methods"].items():
                for x in mrows:
                    rows.append([method, x["n_components"], x["test_perf"], x["train_time"]])
            if r["exact"]:
                rows.append(["exact KernelRidge (laplacian)", "-", r["exact"]["test_perf"],
                             r["exact"]["train_time"]])
            md += [f"**{name}**, sigma = {r['sigma']:.4g}, RBFSampler gamma = "
                   f"{r['gamma_rbf']:.3g}", "",
                   _table(["method", "R / n_components", f"test {perf_name(ds)}", "train s"],
                          rows), ""]
    res = all_results.get("speedup")
    if res:
        md += ["## (d) Coordinate descent speedup vs threads (Fig. 6)", "",
               "![fig6](fig6_speedup.png)", "",
               f"Data: {res['data']}, N = {res['n']}, sigma = {res['sigma']:.3g}, squared loss, "
               f"alpha = 1e-6 (ridge), tol = 0; seconds per epoch = (time of a {res['epochs']}-epoch "
               f"fit - time of a 1-epoch fit) / {res['epochs'] - 1} (setup excluded; the plain "
               f"average when timing noise makes that difference implausibly small), best of "
               f"{cfg['speed_repeats']}; objective after {res['epochs']} epochs. Eq. 29: tau / (1 + (R - 1)(tau - 1)/(D - 1)) with R "
               f"= non-zeros per row. Grid blocks are conflict-free (no eq. 29 penalty).", ""]
        rows = []
        for label, m in res["modes"].items():
            for x in m["rows"]:
                rows.append([label, m["R"], m["D"], x["threads"], x["epoch_time"], x["speedup"],
                             x["predicted"] if "grid" not in label else "-", x["objective"]])
        md += [_table(["mode", "nnz/row", "D", "threads", "s / epoch", "speedup",
                       "eq. 29", "final objective"], rows), ""]
    if errors:
        md += ["## Panels that failed", ""]
        for panel, msg in errors.items():
            md.append(f"- {panel}: `{msg}`")
        md.append("")
    with atomic_write(path) as fh:
        fh.write("\n".join(md))


def _machine():
    import rbcd
    from rbcd._openmp_info import openmp_is_enabled
    from rbcd._threads import effective_n_threads

    return (f"{platform.platform()}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}, rbcd {rbcd.__version__} (OpenMP "
            f"{'on' if openmp_is_enabled() else 'off'}, {effective_n_threads(None)} threads)")


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


# --------------------------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Reproduce the random binning paper's Figures 3-6 at laptop scale.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n")[1])
    p.add_argument("--out", required=True,
                   help="output directory (created; plots, results.md, results.json)")
    p.add_argument("--quick", action="store_true", help="small sizes, ~2-3 minutes")
    p.add_argument("--data", default=None, metavar="FILE.svm",
                   help="use this svmlight/libsvm file instead of the built-in data")
    p.add_argument("--datasets", default=None,
                   help=f"comma-separated subset of the built-in data sets "
                        f"({','.join(ALL_DATASETS)}; default: all but regression with --quick)")
    p.add_argument("--task", choices=("auto", "classification", "regression"), default="auto",
                   help="task of --data (default: detected from the labels)")
    p.add_argument("--max-rows", type=int, default=None,
                   help="subsample --data to this many rows")
    p.add_argument("--alpha", type=float, default=None,
                   help="ridge alpha for every data set (default: 0.1 synthetic, 1.0 others)")
    p.add_argument("--threads", default="1,2",
                   help="comma-separated thread counts for (d) (default 1,2)")
    p.add_argument("--panels", default=",".join(PANELS),
                   help=f"comma-separated subset of {','.join(PANELS)} (default all)")
    p.add_argument("--seed", type=int, default=0, help="seed for data, grids and solvers")
    args = p.parse_args(argv)
    try:
        args.threads = sorted({int(t) for t in args.threads.split(",") if t.strip()})
    except ValueError:
        p.error(f"--threads must be comma-separated integers, got {args.threads!r}")
    if not args.threads or min(args.threads) < 1:
        p.error("--threads needs positive integers")
    if args.datasets is not None:
        args.datasets = [s.strip() for s in args.datasets.split(",") if s.strip()]
        unknown = set(args.datasets) - set(ALL_DATASETS)
        if unknown or not args.datasets:
            p.error(f"unknown data sets {sorted(unknown)}; choose from {', '.join(ALL_DATASETS)}")
    args.panels = [s.strip() for s in args.panels.split(",") if s.strip()]
    unknown = set(args.panels) - set(PANELS)
    if unknown:
        p.error(f"unknown panels {sorted(unknown)}; choose from {', '.join(PANELS)}")
    return args


def main(argv=None):
    args = parse_args(argv)
    cfg = QUICK if args.quick else DEFAULT
    t_start = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t_start:7.1f}s] {msg}", flush=True)

    machine = _machine()
    log(machine)
    datasets = load_datasets(cfg, args)
    os.makedirs(args.out, exist_ok=True)
    for ds in datasets:
        l1, _ = _pair_distances(ds.Xtr, args.seed)
        ds.sigma0 = float(np.mean(l1))
        ds.best_sigma = ds.sigma0 / 4  # used if panel (a) is skipped
        log(ds.describe() + f", sigma0 = {ds.sigma0:.3g}")

    all_results, errors = {}, {}
    steps = [
        ("sigma", panel_sigma, lambda r: plot_sweep(
            r, datasets, "sigma", "sigma", os.path.join(args.out, "fig3_sigma.png"),
            f"Random binning + CG vs sigma (R = {cfg['R_sigma']})")),
        ("grids", panel_grids, lambda r: plot_sweep(
            r, datasets, "R", "R (grids)", os.path.join(args.out, "fig4_grids.png"),
            "Random binning + CG vs R (sigma = best of (a))")),
        ("time", panel_time, lambda r: plot_time(r, datasets,
                                                 os.path.join(args.out, "fig5_time.png"))),
        ("speedup", panel_speedup, lambda r: plot_speedup(
            r, os.path.join(args.out, "fig6_speedup.png"))),
    ]
    for name, run, plot in steps:
        if name not in args.panels:
            continue
        log(f"panel {name} ...")
        try:
            res = run(datasets, cfg, args, log)
            all_results[name] = res
            plot(res)
        except Exception as exc:  # keep the other panels going; the error is reported
            errors[name] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
            log(f"panel {name} FAILED: {errors[name]}")
            traceback.print_exc()
    elapsed = time.perf_counter() - t_start
    write_markdown(os.path.join(args.out, "results.md"), all_results, datasets, cfg, args,
                   machine, errors, elapsed)
    with atomic_write(os.path.join(args.out, "results.json")) as fh:
        json.dump(_jsonable(dict(machine=machine, quick=args.quick, seed=args.seed,
                                 results=all_results, errors=errors, elapsed=elapsed)),
                  fh, indent=1)
    log(f"done in {elapsed:.0f} s; wrote {args.out}/results.md and the figures")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
