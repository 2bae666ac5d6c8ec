"""Measure the accuracy of RBClassifier / RBRegressor defaults on the real-data suite.

Sweeps sigma = factor * median_l1_distance(X_train) (rbcd._scale), n_grids and alpha with the
ridge/CG solver, binning once per (factor, n_grids) and solving each alpha on the same Z
(RandomBinning + RidgeCG(Classifier) with the grid structure, exactly what RBClassifier /
RBRegressor do inside). With ``--tol-curve`` it also records, for one configuration, the test
score and the iteration count for a range of CG tolerances and for a range of iteration caps
(the k-th CG iterate is deterministic, so ``max_iter=k`` gives the accuracy-vs-iterations
curve).

    python benchmarks/tune_realdata.py DIR OUT.jsonl [--sets a,b] [--factors ...] ...

Writes one JSON object per line (appended as measured; the file is the evidence behind the
defaults in docs/benchmarks/realdata.md). Scores only: iteration counts, not timings, are
meaningful on a shared machine.
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_realdata import load_sets, score_of  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", nargs="?")
    p.add_argument("out", nargs="?")
    p.add_argument("--plot", nargs=2, metavar=("JSONL", "PNG"),
                   help="only plot the --tol-curve records of JSONL (test score against CG "
                        "iterations, one panel per set, the tolerances marked) into PNG")
    p.add_argument("--sets", default=None, help="comma-separated names (default: all)")
    p.add_argument("--factors", default="0.125,0.25,0.5,1,2")
    p.add_argument("--grids", default="64,128,256")
    p.add_argument("--alphas", default="0.01,0.1,1,10")
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--seeds", default="0")
    p.add_argument("--tol-curve", action="store_true",
                   help="tolerance and iteration curves at --factors[0], --grids[0], --alphas[0]")
    args = p.parse_args(argv)
    if args.plot:
        return plot_curves(*args.plot)
    if not (args.dir and args.out):
        p.error("DIR and OUT are required (unless --plot)")
    from rbcd import RandomBinning, RidgeCG, RidgeCGClassifier
    from rbcd._scale import median_l1_distance

    factors = [float(v) for v in args.factors.split(",")]
    grids = [int(v) for v in args.grids.split(",")]
    alphas = [float(v) for v in args.alphas.split(",")]
    seeds = [int(v) for v in args.seeds.split(",")]
    names = args.sets.split(",") if args.sets else None
    with open(args.out, "a") as out:
        def emit(rec):
            out.write(json.dumps(rec) + "\n")
            out.flush()
            print(rec, flush=True)

        for ds in load_sets(args.dir, names):
            med = median_l1_distance(ds.X_train)
            cls = RidgeCGClassifier if ds.task == "classification" else RidgeCG
            base = dict(set=ds.name, task=ds.task, n=ds.X_train.shape[0], d=ds.X_train.shape[1],
                        median_l1=med)
            if args.tol_curve:
                f, R, a = factors[0], grids[0], alphas[0]
                for seed in seeds:
                    rb = RandomBinning(n_grids=R, sigma=f * med, random_state=seed, n_jobs=1)
                    Z, cols = rb.fit_transform(ds.X_train, return_columns=True)
                    Zt = rb.transform(ds.X_test)
                    for tol in (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 1e-4, 1e-6):
                        est = cls(alpha=a, tol=tol, n_jobs=1)
                        est.fit(Z, ds.y_train, columns=cols)
                        emit(dict(base, kind="tol", factor=f, n_grids=R, alpha=a, seed=seed,
                                  tol=tol, n_iter=int(np.max(est.n_iter_)),
                                  score=score_of(ds.task, ds.y_test, est.predict(Zt)),
                                  train_score=score_of(ds.task, ds.y_train, est.predict(Z))))
                    prev = None
                    for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256):
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            est = cls(alpha=a, tol=1e-10, max_iter=k, n_jobs=1)
                            est.fit(Z, ds.y_train, columns=cols)
                        ptr = est.predict(Z)
                        changed = None if prev is None else float(np.mean(ptr != prev)) \
                            if ds.task == "classification" else None
                        prev = ptr
                        emit(dict(base, kind="iter", factor=f, n_grids=R, alpha=a, seed=seed,
                                  max_iter=k, n_iter=int(np.max(est.n_iter_)),
                                  score=score_of(ds.task, ds.y_test, est.predict(Zt)),
                                  train_changed=changed))
                        if np.max(est.n_iter_) < k:
                            break
                continue
            for seed in seeds:
                for R in grids:
                    for f in factors:
                        t0 = time.perf_counter()
                        rb = RandomBinning(n_grids=R, sigma=f * med, random_state=seed, n_jobs=1)
                        Z, cols = rb.fit_transform(ds.X_train, return_columns=True)
                        Zt = rb.transform(ds.X_test)
                        for a in alphas:
                            with warnings.catch_warnings():
                                warnings.simplefilter("ignore")
                                est = cls(alpha=a, tol=args.tol, n_jobs=1)
                                est.fit(Z, ds.y_train, columns=cols)
                            emit(dict(base, kind="grid", factor=f, n_grids=R, alpha=a,
                                      seed=seed, tol=args.tol, D=int(Z.shape[1]),
                                      kappa=float(rb.kappa_), n_iter=int(np.max(est.n_iter_)),
                                      score=score_of(ds.task, ds.y_test, est.predict(Zt)),
                                      seconds=time.perf_counter() - t0))


def plot_curves(jsonl, png):
    """Test score against CG iterations (the ``max_iter=k`` iterates), with the iteration
    count and score each ``tol`` stops at marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from compare_realdata import write_atomic

    recs = [json.loads(line) for line in open(jsonl)]
    sets = list(dict.fromkeys(r["set"] for r in recs if r["kind"] in ("iter", "tol")))
    cols = min(5, len(sets))
    rows = -(-len(sets) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.9 * rows), squeeze=False)
    for ax, name in zip(axes.ravel(), sets):
        rs = [r for r in recs if r["set"] == name]
        clf = rs[0]["task"] == "classification"
        k = 100 if clf else 1
        it = sorted((r for r in rs if r["kind"] == "iter"), key=lambda r: r["n_iter"])
        ax.plot([r["n_iter"] for r in it], [k * r["score"] for r in it], "o-", ms=3, color="C3",
                label="k-th CG iterate")
        for r in (r for r in rs if r["kind"] == "tol"):
            ax.plot(r["n_iter"], k * r["score"], "x", color="k", ms=6)
            ax.annotate(f"{r['tol']:g}", (r["n_iter"], k * r["score"]), fontsize=6,
                        textcoords="offset points", xytext=(2, 4))
        ax.set_xscale("log")
        r0 = rs[0]
        ax.set_title(f"{name} (N={r0['n']}, R={r0['n_grids']}, alpha={r0['alpha']:g})",
                     fontsize=8)
        ax.set_xlabel("CG iterations", fontsize=8)
        ax.set_ylabel("test accuracy (%)" if clf else "test RMSE", fontsize=8)
        last = k * it[-1]["score"] if it else None
        if last is not None:
            ax.set_ylim(last - 6, last + 3) if clf else ax.set_ylim(last * 0.97, last * 1.15)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[len(sets):]:
        ax.axis("off")
    axes.ravel()[0].legend(fontsize=7)
    fig.suptitle("Test score against CG iterations; x: where tol (annotated) stops", fontsize=9)
    fig.tight_layout()
    write_atomic(png, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)


if __name__ == "__main__":
    main()
