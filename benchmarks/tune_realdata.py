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
    p.add_argument("dir")
    p.add_argument("out")
    p.add_argument("--sets", default=None, help="comma-separated names (default: all)")
    p.add_argument("--factors", default="0.125,0.25,0.5,1,2")
    p.add_argument("--grids", default="64,128,256")
    p.add_argument("--alphas", default="0.01,0.1,1,10")
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--seeds", default="0")
    p.add_argument("--tol-curve", action="store_true",
                   help="tolerance and iteration curves at --factors[0], --grids[0], --alphas[0]")
    args = p.parse_args(argv)
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
                    Z = rb.fit_transform(ds.X_train)
                    Zt = rb.transform(ds.X_test)
                    for tol in (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 1e-4, 1e-6):
                        est = cls(alpha=a, tol=tol, n_jobs=1).fit(Z, ds.y_train, binning=rb)
                        emit(dict(base, kind="tol", factor=f, n_grids=R, alpha=a, seed=seed,
                                  tol=tol, n_iter=int(np.max(est.n_iter_)),
                                  score=score_of(ds.task, ds.y_test, est.predict(Zt)),
                                  train_score=score_of(ds.task, ds.y_train, est.predict(Z))))
                    prev = None
                    for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256):
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            est = cls(alpha=a, tol=1e-10, max_iter=k, n_jobs=1).fit(
                                Z, ds.y_train, binning=rb)
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
                        Z = rb.fit_transform(ds.X_train)
                        Zt = rb.transform(ds.X_test)
                        for a in alphas:
                            with warnings.catch_warnings():
                                warnings.simplefilter("ignore")
                                est = cls(alpha=a, tol=args.tol, n_jobs=1).fit(
                                    Z, ds.y_train, binning=rb)
                            emit(dict(base, kind="grid", factor=f, n_grids=R, alpha=a,
                                      seed=seed, tol=args.tol, D=int(Z.shape[1]),
                                      kappa=float(rb.kappa_), n_iter=int(np.max(est.n_iter_)),
                                      score=score_of(ds.task, ds.y_test, est.predict(Zt)),
                                      seconds=time.perf_counter() - t0))


if __name__ == "__main__":
    main()
