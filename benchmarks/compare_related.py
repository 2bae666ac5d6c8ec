"""The other papers' systems against their baselines, on small real and synthetic sets.

Part ``dsekl`` (Steenbergen et al., Table 1 protocol): sample min(1000, N) rows, half for
training and half for testing, ``--reps`` repetitions; DoublyStochasticKernelClassifier with
its defaults (and Algorithm 1's 1/t step, Algorithm 2 with 4 blocks, and an ablation with a
learned intercept) against scikit-learn's SVC (exact Gaussian kernel), with its defaults and
tuned by 2-fold grid search. Features are standardized on the training half.

Part ``srf`` (Yen et al., the central claim): test accuracy (R^2 for regression) against the
number of features of the model, for
  * SparseRandomFeatures with its defaults (64 Gaussian Fourier features per outer iteration,
    ``--srf-iters`` outer iterations; the model size is the number of kept features),
  * plain random Fourier features with an l2 solver (the paper's "RF", lambda N = 1:
    LogisticRegression(C=1) or Ridge(alpha=1)), D features,
  * plain random Fourier features with rbcd's l1 coordinate descent (CDClassifier /
    CDRegressor, alpha = 1 / N as SparseRandomFeatures, solver defaults), D drawn features,
    the model size is the number of non-zero weights,
  * the exact kernel machine (SVC(C=1) or KernelRidge(alpha=1)) with the same bandwidth,
all with sigma = 0.5 x the median L2 distance (rbcd's sigma="scale" rule).
Work is counted as well as timed: CD work is epochs x rows x working-set columns (every
epoch touches every stored entry once), which does not depend on the load of the machine.
Equal accuracy is a score within 0.005 of the best plain-RF (l2) score; the training work of
each of SRF and RF + l1 at equal accuracy is its cheapest run of the sweep that gets there
(``central_claim``). Everything runs on one thread (n_jobs=1, threadpool_limits(1)), so the
process time of SRF and RF + l1 is the CPU work of the fit, feature drawing and mapping
included; the two runs the work ratio compares are then fitted alternately ``--pairs`` times
in this process (``paired_timing``), and the ratio of the median CPU (and wall) times is
reported with it.

Accuracies and work counts are load-independent, one-thread CPU times nearly so. Wall times
are printed and written too, but they mean something only on a quiet machine: regenerate
them there with

    python benchmarks/compare_related.py --out docs/benchmarks

``--quick`` runs tiny sizes (a smoke run in seconds).
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import print_header, quiet, table  # noqa: E402


# ----------------------------------------------------------------------------- data
def dsekl_sets(quick):
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine, make_moons

    from rbcd.datasets import make_xor_blobs

    out = []
    X, y = load_breast_cancer(return_X_y=True)
    out.append(("breast cancer", X, y))
    X, y = load_digits(return_X_y=True)
    keep = (y == 3) | (y == 8)
    out.append(("digits 3 vs 8", X[keep], y[keep]))
    out.append(("digits (10 classes)", X, y))
    X, y = load_wine(return_X_y=True)
    out.append(("wine class 0 vs rest", X, (y == 0).astype(int)))
    out.append(("wine (3 classes)", X, y))
    X, y = make_moons(1000, noise=0.3, random_state=0)
    out.append(("moons (noise 0.3)", X, y))
    for std in (0.2, 0.5):
        X, y = make_xor_blobs(1000, std=std, random_state=0)
        out.append((f"XOR (std {std})", X, y))
    if quick:
        out = [out[0], out[1], out[6]]
    return out


def srf_sets(quick):
    from sklearn.datasets import load_breast_cancer, load_digits, make_friedman1

    from rbcd.datasets import make_xor_blobs

    out = []
    X, y = load_digits(return_X_y=True)
    out.append(("digits (10 classes)", X, y, True))
    X, y = load_breast_cancer(return_X_y=True)
    out.append(("breast cancer", X, y, True))
    X, y = make_xor_blobs(3000, std=0.5, random_state=0)
    out.append(("XOR (std 0.5)", X, y, True))
    X, y = make_friedman1(3000, noise=1.0, random_state=0)
    out.append(("friedman1", X, y, False))
    if quick:
        out = [(n, X[:400], y[:400], c) for n, X, y, c in out[1:3]]
    return out


def split_standardize(X, y, seed, classify, test_size=0.5, max_rows=None):
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(seed)
    if max_rows is not None and X.shape[0] > max_rows:
        rows = rng.choice(X.shape[0], max_rows, replace=False)
        X, y = X[rows], y[rows]
    Xa, Xb, ya, yb = train_test_split(X, y, test_size=test_size, random_state=seed,
                                      stratify=y if classify else None)
    sc = StandardScaler().fit(Xa)
    return sc.transform(Xa), sc.transform(Xb), ya, yb


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


# ----------------------------------------------------------------------------- DSEKL
def dsekl_with_intercept(X, y, seed, I=100, J=100, max_epochs=100, tol=1e-2):
    """The ablation: rbcd's DSEKL (same draws, kernel, sigma, lambda, AdaGrad) plus an
    intercept b in f_J = K_IJ A_J + b, unregularised, with its own AdaGrad accumulator and the
    summed gradient sum_i loss'(y_i f_i) y_i. Binary only. Returns a predict function."""
    from rbcd._random import make_generator
    from rbcd._scale import scale_sigma_l2
    from rbcd.related.dsekl import draw_epoch

    classes = np.unique(y)
    Y = np.where(y == classes[1], 1.0, -1.0)
    N = X.shape[0]
    sigma = scale_sigma_l2(X)
    Xs = X / sigma
    lam = 1.0 / N
    I, J = min(I, N), min(J, N)
    A, G, b, Gb = np.zeros(N), np.ones(N), 0.0, 1.0
    rng = make_generator(seed)

    def kern(P, Q):
        d2 = (P * P).sum(1)[:, None] + (Q * Q).sum(1)[None, :] - 2 * P @ Q.T
        return np.exp(-0.5 * np.maximum(d2, 0.0))

    for _ in range(max_epochs):
        perm, Jidx = draw_epoch(rng, N, I, J, 1)
        before = A.copy()
        for s in range(Jidx.shape[0]):
            B, Js = perm[s * I:(s + 1) * I], Jidx[s]
            Kb = kern(Xs[B], Xs[Js])
            r = np.where(Y[B] * (Kb @ A[Js] + b) < 1.0, -1.0, 0.0) * Y[B]
            g = Kb.T @ r + lam * A[Js]
            G[Js] += g * g
            A[Js] -= g / np.sqrt(G[Js])
            gb = r.sum()
            Gb += gb * gb
            b -= gb / np.sqrt(Gb)
        if np.linalg.norm(A - before) <= tol * np.linalg.norm(A):
            break
    return lambda Xt: classes[((J / N) * kern(Xt / sigma, Xs) @ A + b > 0).astype(int)]


def run_dsekl(args):
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    from rbcd import DoublyStochasticKernelClassifier

    methods = ["SVC (defaults)", "SVC (tuned)", "DSEKL (defaults)", "DSEKL 1/t step (Alg. 1)",
               "DSEKL 4 blocks (Alg. 2)", "DSEKL + intercept (ablation)"]
    results = []
    for name, X, y in dsekl_sets(args.quick):
        acc = {m: [] for m in methods}
        fit_s = {m: [] for m in methods}
        kernel_evals = []
        for rep in range(args.reps):
            Xa, Xb, ya, yb = split_standardize(X, y, rep, True, max_rows=1000)
            d = Xa.shape[1]
            grid = {"C": [0.1, 1, 10, 100], "gamma": [g / d for g in (0.25, 0.5, 1, 2, 4)]}
            fits = {
                "SVC (defaults)": lambda: SVC(),
                "SVC (tuned)": lambda: GridSearchCV(SVC(), grid, cv=2),
                "DSEKL (defaults)": lambda: DoublyStochasticKernelClassifier(random_state=rep,
                                                                             n_jobs=1),
                "DSEKL 1/t step (Alg. 1)": lambda: DoublyStochasticKernelClassifier(
                    step="inverse_t", random_state=rep, n_jobs=1),
                "DSEKL 4 blocks (Alg. 2)": lambda: DoublyStochasticKernelClassifier(
                    n_blocks=4, random_state=rep, n_jobs=1),
            }
            for m, make in fits.items():
                est, t = timed(lambda: make().fit(Xa, ya))
                acc[m].append(est.score(Xb, yb))
                fit_s[m].append(t)
                if m == "DSEKL (defaults)":
                    kernel_evals.append(est.t_ * est.n_expansion_ * min(100, Xa.shape[0]))
            if len(np.unique(y)) == 2:
                m = "DSEKL + intercept (ablation)"
                pred, t = timed(lambda: dsekl_with_intercept(Xa, ya, rep))
                acc[m].append(float(np.mean(pred(Xb) == yb)))
                fit_s[m].append(t)
        row = dict(data=name, n_train=int(Xa.shape[0]), d=int(X.shape[1]),
                   n_classes=int(len(np.unique(y))), reps=args.reps,
                   accuracy={m: [float(np.mean(v)), float(np.std(v))] for m, v in acc.items() if v},
                   fit_seconds={m: float(np.mean(v)) for m, v in fit_s.items() if v},
                   dsekl_kernel_evaluations=float(np.mean(kernel_evals)))
        results.append(row)
        print(f"{name}: " + ", ".join(f"{m} {a[0]:.3f}" for m, a in row["accuracy"].items()),
              flush=True)
    rows = [[r["data"], r["n_train"]] + [
        f"{r['accuracy'][m][0]:.3f} ± {r['accuracy'][m][1]:.3f}" if m in r["accuracy"] else "-"
        for m in methods] for r in results]
    table(rows, ["data", "train rows"] + methods)
    return dict(methods=methods, results=results)


def run_dsekl_xor(args):
    """The DSEKL paper's Figure 2: test error on its XOR problem (N = 100 training points,
    std 0.2; here also 0.5) against J (I = 100) and against I (J = 100), for DSEKL (defaults
    otherwise), random kitchen sinks with the same number of features (J Gaussian random
    Fourier features, same sigma, hinge-loss LinearSVC) and the batch SVM (SVC defaults)."""
    from sklearn.svm import SVC, LinearSVC

    from rbcd import DoublyStochasticKernelClassifier, RandomFourier
    from rbcd.datasets import make_xor_blobs
    from rbcd.related.dsekl import resolve_sigma

    sizes = [1, 2, 5, 10, 20, 50, 100]
    out = []
    for std in (0.2, 0.5):
        err = {k: np.zeros((args.reps, len(sizes))) for k in ("J", "I", "RKS")}
        svc = np.zeros(args.reps)
        for rep in range(args.reps):
            X, y = make_xor_blobs(100, std=std, random_state=1000 + rep)
            Xt, yt = make_xor_blobs(1000, std=std, random_state=2000 + rep)
            svc[rep] = 1.0 - SVC().fit(X, y).score(Xt, yt)
            sigma = resolve_sigma("scale", X, "gaussian")
            for k, m in enumerate(sizes):
                for key, kw in (("J", dict(n_expansion=m)), ("I", dict(n_gradient=m))):
                    est = DoublyStochasticKernelClassifier(random_state=rep, n_jobs=1,
                                                           **kw).fit(X, y)
                    err[key][rep, k] = 1.0 - est.score(Xt, yt)
                rf = RandomFourier(n_components=m, sigma=sigma, random_state=rep, n_jobs=1).fit(X)
                lin = LinearSVC(C=1.0).fit(rf.transform(X), y)
                err["RKS"][rep, k] = 1.0 - lin.score(rf.transform(Xt), yt)
        out.append(dict(std=std, sizes=sizes, svc=float(svc.mean()),
                        **{f"error_vs_{k}": err[k].mean(axis=0).tolist() for k in err}))
        print(f"XOR std {std}: SVC error {svc.mean():.3f}")
        table([[m, f"{err['J'][:, k].mean():.3f}", f"{err['I'][:, k].mean():.3f}",
                f"{err['RKS'][:, k].mean():.3f}"] for k, m in enumerate(sizes)],
              ["J or I or D", "DSEKL vs J (I=100)", "DSEKL vs I (J=100)", "RKS, D features"])
    return out


# ----------------------------------------------------------------------------- SRF
def fit_srf(Xa, ya, T, loss, seed):
    """SparseRandomFeatures with its defaults, T outer iterations, on one thread."""
    from rbcd import SparseRandomFeatures

    return SparseRandomFeatures(n_iter=T, loss=loss, random_state=seed, n_jobs=1).fit(Xa, ya)


def fit_rf_l1(Xa, ya, D, sigma, classify, seed):
    """Plain random Fourier features (D, drawn and mapped: part of training, as SRF's) plus
    rbcd's l1 coordinate descent at alpha = 1/N and the solver's defaults, on one thread.
    Returns (transformer, solver)."""
    from rbcd import CDClassifier, CDRegressor, RandomFourier

    N = Xa.shape[0]
    rf = RandomFourier(n_components=D, sigma=sigma, random_state=seed, n_jobs=1).fit(Xa)
    Za = rf.transform(Xa)
    l1 = (CDClassifier(loss="logistic", alpha=1.0 / N, random_state=seed, n_jobs=1) if classify
          else CDRegressor(alpha=1.0 / N, random_state=seed, n_jobs=1))
    return rf, l1.fit(Za, ya)


def clocked(fn):
    """(result, process seconds, wall seconds). Process time counts every thread of this
    process; the script runs everything on one thread (n_jobs=1 and threadpool_limits(1) for
    BLAS and OpenMP, see ``main``), so it is the CPU work of the fit, whatever else loads the
    machine."""
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def run_srf(args):
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.svm import SVC

    from rbcd import RandomFourier
    from rbcd.related.fourier import resolve_sigma

    iters = args.srf_iters
    Ds = args.rf_features
    results = []
    for name, X, y, classify in srf_sets(args.quick):
        Xa, Xb, ya, yb = split_standardize(X, y, args.seed, classify, test_size=0.3)
        if not classify:
            mu = ya.mean()
            ya, yb = ya - mu, yb - mu
        N = Xa.shape[0]
        sigma = float(resolve_sigma("scale", Xa, "gaussian")[0])
        gamma = 1.0 / (2.0 * sigma**2)
        loss = "logistic" if classify else "squared"
        exact, t_exact = timed(lambda: (SVC(C=1.0, gamma=gamma) if classify
                                        else KernelRidge(alpha=1.0, kernel="rbf", gamma=gamma)).fit(Xa, ya))
        row = dict(data=name, n_train=N, d=int(X.shape[1]), classify=classify, sigma=sigma,
                   metric="accuracy" if classify else "R^2",
                   exact=dict(score=float(exact.score(Xb, yb)), fit_seconds=t_exact),
                   srf=[], rf_l2=[], rf_l1=[])
        for T in iters:
            est, cpu, wall = clocked(lambda: fit_srf(Xa, ya, T, loss, args.seed))
            row["srf"].append(dict(n_iter=T, drawn=T * est.n_components_per_iter,
                                   features=int(est.n_features_), score=float(est.score(Xb, yb)),
                                   cd_work=float(np.sum(est.solver_work_history_)),
                                   cd_epochs=int(np.sum(est.solver_epochs_history_)),
                                   cpu_seconds=cpu, fit_seconds=wall))
        for D in Ds:
            rf = RandomFourier(n_components=D, sigma=sigma, random_state=args.seed, n_jobs=1).fit(Xa)
            Za, Zb = rf.transform(Xa), rf.transform(Xb)
            l2 = LogisticRegression(C=1.0, max_iter=2000) if classify else Ridge(alpha=1.0)
            l2, t = timed(lambda: l2.fit(Za, ya))
            row["rf_l2"].append(dict(features=D, score=float(l2.score(Zb, yb)), fit_seconds=t))
            (rf, l1), cpu, wall = clocked(lambda: fit_rf_l1(Xa, ya, D, sigma, classify, args.seed))
            nnz = int(np.sum(np.any(np.atleast_2d(l1.coef_) != 0, axis=0)))
            row["rf_l1"].append(dict(drawn=D, features=nnz, score=float(l1.score(rf.transform(Xb), yb)),
                                     cd_work=float(np.sum(l1.n_iter_) * N * D),
                                     cd_epochs=int(np.sum(l1.n_iter_)), cpu_seconds=cpu,
                                     fit_seconds=wall))
        row["claim"] = central_claim(row)
        row["paired"] = paired_timing(row, Xa, ya, loss, sigma, classify, args)
        results.append(row)
        print(f"== {name} (N = {N}, sigma = {sigma:.3g}, exact {row['metric']} "
              f"{row['exact']['score']:.4f})")
        table([[f"SRF T={r['n_iter']}", r["features"], f"{r['score']:.4f}", f"{r['cd_work']:.3g}",
                f"{r['cpu_seconds']:.3f}", f"{r['fit_seconds']:.3f}"] for r in row["srf"]]
              + [[f"RF+l2 D={r['features']}", r["features"], f"{r['score']:.4f}", "-", "-",
                  f"{r['fit_seconds']:.3f}"] for r in row["rf_l2"]]
              + [[f"RF+l1 D={r['drawn']}", r["features"], f"{r['score']:.4f}", f"{r['cd_work']:.3g}",
                  f"{r['cpu_seconds']:.3f}", f"{r['fit_seconds']:.3f}"] for r in row["rf_l1"]],
              ["model", "features", row["metric"], "CD work", "CPU s", "wall s"])
        print("claim:", row["claim"])
        print("paired:", row["paired"], flush=True)
    return dict(srf_iters=list(iters), rf_features=list(Ds), pairs=args.pairs, results=results)


def central_claim(row, slack=0.005):
    """The paper's claims, made measurable against the plain-RF (l2) model's best score.

    Equal accuracy: a score within ``slack`` of that best (the target). Model size: the
    fewest features with which plain RF (l2) reaches the target, the fewest kept features
    with which SparseRandomFeatures does, their ratio (None where SRF never gets there), and
    the fewest non-zero weights of plain RF with the l1 solver. Training work: for SRF and for
    plain RF + l1 each, the cheapest run of the sweep (least CD work, epochs x rows x
    working-set columns) that reaches the target, and the ratio RF+l1 / SRF of their CD
    work (above 1: SRF trains with less)."""
    best = max(r["score"] for r in row["rf_l2"])
    target = best - slack
    rf_n = min(r["features"] for r in row["rf_l2"] if r["score"] >= target)
    srf = [r for r in row["srf"] if r["score"] >= target]
    srf_n = min(r["features"] for r in srf) if srf else None
    l1 = [r for r in row["rf_l1"] if r["score"] >= target]
    out = dict(rf_best=best, target=target, rf_features=rf_n, srf_features=srf_n,
               ratio=(rf_n / srf_n) if srf_n else None,
               srf_best=max(r["score"] for r in row["srf"]),
               rf_l1_features=min(r["features"] for r in l1) if l1 else None,
               srf_work=None, rf_l1_work=None, work_ratio=None, srf_T=None, rf_l1_D=None)
    if srf:
        cheap = min(srf, key=lambda r: r["cd_work"])
        out.update(srf_work=cheap["cd_work"], srf_T=cheap["n_iter"])
    if l1:
        cheap = min(l1, key=lambda r: r["cd_work"])
        out.update(rf_l1_work=cheap["cd_work"], rf_l1_D=cheap["drawn"])
    if srf and l1:
        out["work_ratio"] = out["rf_l1_work"] / out["srf_work"]
    return out


def paired_timing(row, Xa, ya, loss, sigma, classify, args):
    """CPU and wall time of the two runs the work ratio compares (SRF at srf_T, plain RF +
    l1 at rf_l1_D), fitted alternately ``args.pairs`` times in this process on one thread:
    a load that comes and goes hits both alike. Medians, and the ratio RF+l1 / SRF of the
    medians (above 1: SRF trains faster). None where either never reaches the target."""
    c = row["claim"]
    if c["srf_T"] is None or c["rf_l1_D"] is None or args.pairs < 1:
        return None
    runs = {"srf": ([], []), "rf_l1": ([], [])}
    for _ in range(args.pairs):
        for key, fn in (("srf", lambda: fit_srf(Xa, ya, c["srf_T"], loss, args.seed)),
                        ("rf_l1", lambda: fit_rf_l1(Xa, ya, c["rf_l1_D"], sigma, classify,
                                                    args.seed))):
            _, cpu, wall = clocked(fn)
            runs[key][0].append(cpu)
            runs[key][1].append(wall)
    med = {k: (float(np.median(v[0])), float(np.median(v[1]))) for k, v in runs.items()}
    return dict(srf_T=c["srf_T"], rf_l1_D=c["rf_l1_D"],
                srf_cpu=med["srf"][0], srf_wall=med["srf"][1],
                rf_l1_cpu=med["rf_l1"][0], rf_l1_wall=med["rf_l1"][1],
                cpu_ratio=med["rf_l1"][0] / med["srf"][0],
                wall_ratio=med["rf_l1"][1] / med["srf"][1])


# ----------------------------------------------------------------------------- output
def plot_srf(srf, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    res = srf["results"]
    cols = min(2, len(res))
    rows = -(-len(res) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
    for ax, r in zip(axes.flat, res):
        for key, label, style in (("srf", "Sparse RF (kept features)", "o-"),
                                  ("rf_l2", "RF + l2 (D features)", "s--"),
                                  ("rf_l1", "RF + l1 CD (non-zero weights)", "^:")):
            pts = sorted((p["features"], p["score"]) for p in r[key] if p["features"] > 0)
            if pts:
                ax.plot(*zip(*pts), style, label=label)
        ax.axhline(r["exact"]["score"], color="k", lw=0.8, label="exact kernel")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("features in the model")
        ax.set_ylabel(f"test {r['metric']}")
        ax.set_title(f"{r['data']} (N = {r['n_train']})")
        lo = min(p["score"] for k in ("srf", "rf_l2") for p in r[k])
        ax.set_ylim(max(lo, r["exact"]["score"] - 0.15), None)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(res):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def findings(out):
    """The measured statements of the summary, computed from the results."""
    lines = []
    if "dsekl" in out:
        res = out["dsekl"]["results"]
        acc = lambda r, m: r["accuracy"][m][0]  # noqa: E731
        gaps = [(acc(r, "SVC (defaults)") - acc(r, "DSEKL (defaults)"), r["data"]) for r in res]
        worst = max(gaps)
        lines.append(f"- DSEKL with its defaults against SVC with its defaults, test accuracy in "
                     f"points (largest gap {100 * worst[0]:.1f}, {worst[1]}): "
                     + ", ".join(f"{d}: {-100 * g + 0.0:+.1f}" for g, d in gaps) + ".")
        rel = [(acc(r, "DSEKL + intercept (ablation)") - acc(r, "DSEKL (defaults)"), r["data"])
               for r in res if "DSEKL + intercept (ablation)" in r["accuracy"]]
        if rel:
            lines.append("- A learned intercept (the ablation) changes the accuracy by "
                         + ", ".join(f"{d}: {100 * g:+.1f}" for g, d in rel)
                         + " points (DoublyStochasticKernelClassifier has no intercept, as the paper).")
        t = [(acc(r, "DSEKL 1/t step (Alg. 1)") - acc(r, "DSEKL (defaults)"), r["data"]) for r in res]
        lines.append("- Algorithm 1's 1/t step against AdaGrad (Algorithm 2's step, the default), "
                     "same epoch budget: " + ", ".join(f"{d}: {100 * g:+.1f}" for g, d in t) + " points.")
    for r in out.get("dsekl_xor", []):
        lines.append(f"- XOR (std {r['std']}, N = 100): DSEKL's test error is "
                     f"{min(r['error_vs_J']):.3f}-{max(r['error_vs_J']):.3f} for J from "
                     f"{r['sizes'][0]} to {r['sizes'][-1]} and {min(r['error_vs_I']):.3f}-"
                     f"{max(r['error_vs_I']):.3f} over I (batch SVC {r['svc']:.3f}); random "
                     f"kitchen sinks with D = {r['sizes'][0]} features: {r['error_vs_RKS'][0]:.3f}. "
                     "Prediction uses the full expansion, so small I or J only make training "
                     "noisier; the paper's Figure 2 advantage of RKS at small sizes does not appear.")
    if "srf" in out:
        for r in out["srf"]["results"]:
            c = r["claim"]
            if c["srf_features"] is None:
                lines.append(f"- {r['data']}: Sparse Random Features never reaches the best plain-RF "
                             f"{r['metric']} ({c['rf_best']:.4f}, {c['rf_features']} features) within "
                             f"0.005; its best is {c['srf_best']:.4f}. The claim does not hold here.")
                continue
            l1_best = max(r["rf_l1"], key=lambda p: p["score"])
            l1 = (f"; plain RF with the l1 solver never gets there (its best: {l1_best['score']:.4f}"
                  f" with D = {l1_best['drawn']})" if c["rf_l1_features"] is None else
                  f"; plain RF with the l1 solver gets there with {c['rf_l1_features']} non-zero "
                  "weights")
            size = (f"{c['ratio']:.1f}x fewer" if c["ratio"] >= 1 else f"{1 / c['ratio']:.1f}x more")
            lines.append(f"- {r['data']}: Sparse Random Features reaches plain RF's {r['metric']} "
                         f"({c['rf_best']:.4f} - 0.005) with {c['srf_features']} features, plain RF "
                         f"(l2) needs {c['rf_features']} ({size} for SRF){l1}.")
            if c.get("work_ratio") is not None:
                w = c["work_ratio"]
                text = (f"  Training work at that accuracy (cheapest run of each): SRF (T = "
                        f"{c['srf_T']}) {c['srf_work']:.3g} CD operations, plain RF + l1 (D = "
                        f"{c['rf_l1_D']}) {c['rf_l1_work']:.3g}: SRF does "
                        + (f"{w:.1f}x less" if w >= 1 else f"{1 / w:.1f}x more") + " work")
                pt = r.get("paired")
                if pt:
                    text += (f"; one-thread CPU time, median of {out['srf'].get('pairs', '?')} "
                             f"paired runs: SRF {pt['srf_cpu']:.3f} s, RF + l1 {pt['rf_l1_cpu']:.3f} s "
                             f"(RF + l1 / SRF = {pt['cpu_ratio']:.2f}; wall* {pt['wall_ratio']:.2f})")
                lines.append(text + ".")
        held, missed = [], []
        for r in out["srf"]["results"]:
            ratio = r["claim"]["ratio"]
            if ratio is None:
                missed.append(f"{r['data']} (never reaches it)")
            elif ratio >= 10:
                held.append(f"{r['data']} ({ratio:.0f}x)")
            else:
                missed.append(f"{r['data']} ({ratio:.1f}x)" if ratio >= 1 else
                              f"{r['data']} ({1 / ratio:.1f}x more features)")
        lines.append("- The paper's claim of 10-100x fewer features than plain random features "
                     "at the same accuracy: " + (f"holds on {', '.join(held)}" if held else
                                                  "holds on none of these sets")
                     + (f"; does not hold on {', '.join(missed)}" if missed else "") + ".")
    return lines


def write_markdown(out, path, figure):
    lines = ["# The related papers' systems: DSEKL and Sparse Random Features", "",
             f"Generated by `python benchmarks/compare_related.py` ({out['machine']}; every fit "
             "on one thread: n_jobs=1, BLAS and OpenMP limited to 1).",
             "Accuracies and work counts do not depend on the load of the machine; the columns",
             "marked * are wall times of this run and mean something only on a quiet machine",
             "(regenerate them there with `--out docs/benchmarks`); the columns marked † are",
             "one-thread CPU times, much less sensitive to the load than wall times but not",
             "immune to it (shared caches, clock frequency)."
             + (f" Load average (1, 5, 15 min) when this run started: "
                f"{', '.join(f'{v:.1f}' for v in out['load_average_at_start'])}"
                if "load_average_at_start" in out else "")
             + (f"; when it ended: {', '.join(f'{v:.1f}' for v in out['load_average_at_end'])}"
                if "load_average_at_end" in out else "")
             + (f"; the run took {out['run_seconds']:.0f} s." if "run_seconds" in out else ".")
             + (f" ({out['load_note']})." if "load_note" in out else ""), "",
             "## Summary (computed from the tables below)", ""] + findings(out) + [""]
    if "dsekl" in out:
        d = out["dsekl"]
        lines += ["## DSEKL against an exact-kernel SVM (the DSEKL paper's Table 1 protocol)", "",
                  "min(1000, N) rows sampled, half for training and half for testing, "
                  f"{d['results'][0]['reps']} repetitions (mean ± std of the test accuracy); "
                  "features standardized on the training half. SVC (tuned): 2-fold grid "
                  "search over C in {0.1, 1, 10, 100} and gamma in {0.25 ... 4} / d. DSEKL: "
                  "every parameter at its default (Gaussian kernel, sigma = 0.35 x median L2 "
                  "distance, lambda = 1/N, I = J = 100, AdaGrad, at most 100 epochs) unless the "
                  "column says otherwise. The ablation adds an unregularised intercept with its "
                  "own AdaGrad step to the same algorithm (binary sets only).", ""]
        hdr = ["data", "train rows"] + d["methods"]
        lines += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
        for r in d["results"]:
            cells = [r["data"], str(r["n_train"])] + [
                f"{r['accuracy'][m][0]:.3f} ± {r['accuracy'][m][1]:.3f}" if m in r["accuracy"]
                else "-" for m in d["methods"]]
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", "Fit time* (s, mean over repetitions) and DSEKL's kernel evaluations "
                  "(steps x I x J, load-independent):", ""]
        hdr = ["data"] + d["methods"] + ["DSEKL kernel evaluations"]
        lines += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
        for r in d["results"]:
            cells = [r["data"]] + [f"{r['fit_seconds'][m]:.3f}" if m in r["fit_seconds"] else "-"
                                   for m in d["methods"]] + [f"{r['dsekl_kernel_evaluations']:.3g}"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    if "dsekl_xor" in out:
        lines += ["## DSEKL on its paper's XOR problem (Figure 2)", "",
                  "N = 100 training and 1000 test points, mean test error over "
                  f"{out['dsekl']['results'][0]['reps'] if 'dsekl' in out else 'the'} "
                  "repetitions. DSEKL with its defaults except the size varied (J with I = 100, "
                  "I with J = 100); RKS: D Gaussian random Fourier features with DSEKL's "
                  "bandwidth and a hinge-loss LinearSVC(C=1); batch: SVC defaults.", ""]
        for r in out["dsekl_xor"]:
            lines += [f"XOR std {r['std']}, batch SVC error {r['svc']:.3f}:", "",
                      "| J, I or D | DSEKL, varying J | DSEKL, varying I | RKS, D features |",
                      "|---|---|---|---|"]
            for k, m in enumerate(r["sizes"]):
                lines.append(f"| {m} | {r['error_vs_J'][k]:.3f} | {r['error_vs_I'][k]:.3f} | "
                             f"{r['error_vs_RKS'][k]:.3f} |")
            lines.append("")
    if "srf" in out:
        s = out["srf"]
        lines += ["## Sparse Random Features: accuracy against the number of features", "",
                  f"![features]({figure})", "",
                  "SparseRandomFeatures with its defaults (64 Gaussian random Fourier features per "
                  f"outer iteration, T in {s['srf_iters']}; 3 CD epochs per iteration, 10 in the "
                  "last), plain random Fourier features with "
                  "an l2 solver (the paper's RF: LogisticRegression(C=1) / Ridge(alpha=1), i.e. "
                  "lambda N = 1) and with rbcd's l1 coordinate descent (alpha = 1/N, the "
                  f"solver's defaults), D in {s['rf_features']}; the exact kernel machine "
                  "(SVC(C=1) / KernelRidge(alpha=1)) for reference. One bandwidth for all: "
                  "0.5 x the median L2 distance. 70% of the rows train, 30% test. CD work = "
                  "epochs x rows x working-set columns, summed over SRF's solves (load-"
                  "independent). SRF and RF + l1 run on one thread (n_jobs=1, BLAS and OpenMP "
                  "limited to 1), so their CPU time (process time, marked †) is the work of the "
                  "fit; it includes drawing and mapping the random features for both.", "",
                  "The claims, measured. Equal accuracy is a score within 0.005 of the best "
                  "plain-RF (l2) score. Model size: the fewest features with which each model "
                  "gets there. Training work: for SRF and for RF + l1 each, the cheapest run of "
                  "the sweep that gets there; work ratio = RF+l1 / SRF CD work (above 1: SRF "
                  f"trains with less). Those two runs are then fitted alternately {s.get('pairs', '?')} "
                  "times in one process (paired, so a changing load hits both alike); CPU ratio "
                  "and wall ratio* are RF+l1 / SRF of the medians.", ""]
        hdr = ["data", "metric", "exact kernel", "best RF+l2", "RF+l2 features", "SRF features",
               "size ratio", "RF+l1 non-zeros", "best SRF", "SRF T", "SRF CD work", "RF+l1 D",
               "RF+l1 CD work", "work ratio", "SRF CPU s†", "RF+l1 CPU s†", "CPU ratio†",
               "wall ratio*"]
        lines += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
        for r in s["results"]:
            c = r["claim"]
            pt = r.get("paired") or {}
            fmt = (lambda v, f="{:.3g}": "never" if v is None else f.format(v))
            pfmt = (lambda k, f="{:.3f}": f.format(pt[k]) if k in pt else "-")
            lines.append("| " + " | ".join([
                r["data"], r["metric"], f"{r['exact']['score']:.4f}", f"{c['rf_best']:.4f}",
                str(c["rf_features"]), fmt(c["srf_features"], "{}"), fmt(c["ratio"], "{:.1f}x"),
                fmt(c["rf_l1_features"], "{}"), f"{c['srf_best']:.4f}",
                fmt(c.get("srf_T"), "{}"), fmt(c.get("srf_work")), fmt(c.get("rf_l1_D"), "{}"),
                fmt(c.get("rf_l1_work")), fmt(c.get("work_ratio"), "{:.2f}"),
                pfmt("srf_cpu"), pfmt("rf_l1_cpu"), pfmt("cpu_ratio", "{:.2f}"),
                pfmt("wall_ratio", "{:.2f}")]) + " |")
        for r in s["results"]:
            lines += ["", f"### {r['data']} (N = {r['n_train']}, d = {r['d']}, sigma = {r['sigma']:.3g})",
                      "", f"| model | features | test {r['metric']} | CD epochs | CD work | CPU s† | fit s* |",
                      "|---|---|---|---|---|---|---|"]
            for p in r["srf"]:
                lines.append(f"| SRF T = {p['n_iter']} ({p['drawn']} drawn) | {p['features']} | "
                             f"{p['score']:.4f} | {p['cd_epochs']} | {p['cd_work']:.3g} | "
                             f"{p['cpu_seconds']:.3f} | {p['fit_seconds']:.3f} |")
            for p in r["rf_l2"]:
                lines.append(f"| RF + l2, D = {p['features']} | {p['features']} | {p['score']:.4f} "
                             f"| - | - | - | {p['fit_seconds']:.3f} |")
            for p in r["rf_l1"]:
                lines.append(f"| RF + l1 CD, D = {p['drawn']} | {p['features']} | {p['score']:.4f} "
                             f"| {p['cd_epochs']} | {p['cd_work']:.3g} | {p['cpu_seconds']:.3f} | "
                             f"{p['fit_seconds']:.3f} |")
            lines.append(f"| exact kernel | {r['n_train']} (rows) | {r['exact']['score']:.4f} | - "
                         f"| - | - | {r['exact']['fit_seconds']:.3f} |")
    lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", choices=["dsekl", "dsekl-xor", "srf", "all"], default="all")
    p.add_argument("--reps", type=int, default=None, help="DSEKL repetitions (default 10)")
    p.add_argument("--srf-iters", type=int, nargs="+", default=None,
                   help="outer iterations T of SparseRandomFeatures (default 1 2 4 8 16 32)")
    p.add_argument("--rf-features", type=int, nargs="+", default=None,
                   help="D of plain random features (default 16 ... 4096)")
    p.add_argument("--pairs", type=int, default=None,
                   help="paired one-thread timings of SRF and RF + l1 at equal accuracy (default 5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    p.add_argument("--out", default=None,
                   help="directory for related.json, related.md and related_features.png")
    p.add_argument("--render", default=None, metavar="JSON",
                   help="only rewrite related.md and the figure in --out from a related.json")
    args = p.parse_args(argv)
    if args.render:
        with open(args.render) as f:
            out = json.load(f)
        outdir = args.out or os.path.dirname(os.path.abspath(args.render))
        if "srf" in out:
            plot_srf(out["srf"], os.path.join(outdir, "related_features.png"))
        write_markdown(out, os.path.join(outdir, "related.md"), "related_features.png")
        print(f"wrote {outdir}/related.md")
        return
    if args.reps is None:
        args.reps = 1 if args.quick else 10
    if args.pairs is None:
        args.pairs = 1 if args.quick else 5
    if args.srf_iters is None:
        # both sweeps step by about sqrt(2), so that the cheapest run reaching the target is
        # charged at a resolution of 1.5x for either method, not 2x
        args.srf_iters = [1, 2] if args.quick else [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
    if args.rf_features is None:
        args.rf_features = [16, 64] if args.quick else [16, 24, 32, 48, 64, 96, 128, 192, 256, 384,
                                                          512, 768, 1024, 1536, 2048, 3072, 4096]
    print_header("compare_related: DSEKL vs SVC, Sparse Random Features vs random features", args)
    quiet()
    warnings.filterwarnings("ignore", category=UserWarning)
    from _common import cpu_model, usable_cpus

    t_start = time.perf_counter()
    out = dict(machine=f"{usable_cpus()} usable CPUs, {cpu_model()}",
               load_average_at_start=list(os.getloadavg()))
    # One thread for everything (rbcd's n_jobs=1 above, BLAS and OpenMP here): DSEKL's and
    # SRF's results do not depend on the thread count, and on a shared machine idle OpenMP
    # and BLAS threads waiting for a busy CPU made fits many times slower and their times
    # meaningless; on one thread process time is the work of a fit.
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        if args.part in ("dsekl", "all"):
            out["dsekl"] = run_dsekl(args)
        if args.part in ("dsekl-xor", "all"):
            out["dsekl_xor"] = run_dsekl_xor(args)
        if args.part in ("srf", "all"):
            out["srf"] = run_srf(args)
    out["load_average_at_end"] = list(os.getloadavg())
    out["run_seconds"] = time.perf_counter() - t_start
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "related.json"), "w") as f:
            json.dump(out, f, indent=1)
        if "srf" in out:
            plot_srf(out["srf"], os.path.join(args.out, "related_features.png"))
        write_markdown(out, os.path.join(args.out, "related.md"), "related_features.png")
        print(f"wrote {args.out}/related.md")


if __name__ == "__main__":
    main()
