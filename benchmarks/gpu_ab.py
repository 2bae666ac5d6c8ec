"""Paired A/B of two trees' GPU fits (issue 32): binning (fit_layout) and CG (solve_ridge)
of compare_gpu's problem, timed as compare_gpu times them (synchronised), several fits per
size, in the process of one tree. Run it alternately for the two trees on one machine:

    python benchmarks/gpu_ab.py --tree /tmp/old --sizes 1e5 1e6 1e7 --reps 7
    python benchmarks/gpu_ab.py --sizes 1e5 1e6 1e7 --reps 7          # this checkout
    python benchmarks/gpu_ab.py --xp numpy --sizes 2000 --reps 2        # dry run, no GPU

``--tree``: the root of the other tree (its rbcd package is imported instead of this
checkout's; the compiled CPU modules may be copied from this checkout where only Python
and CUDA sources differ). Prints one JSON line per size: the median and every fit's time.
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tree", default=os.path.dirname(HERE))
    p.add_argument("--sizes", type=float, nargs="+", default=[1e5, 1e6])
    p.add_argument("--grids", type=int, default=64)
    p.add_argument("--d", type=int, default=16)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--tol", type=float, default=1e-3)
    p.add_argument("--xp", choices=["cupy", "numpy"], default="cupy")
    p.add_argument("--batch-words", type=int, default=None,
                   help="rbcd.cuda.binning.BATCH_WORDS for this run (default: the tree's)")
    a = p.parse_args()
    sys.path.insert(0, os.path.abspath(a.tree))
    from rbcd import RandomBinning
    from rbcd.cuda import _ops, binning as cb, cg as ccg
    from rbcd.models import _preconditioner
    if a.batch_words is not None:
        cb.BATCH_WORDS = a.batch_words
    xp = np if a.xp == "numpy" else _ops.cupy_module()

    def sync():
        if not _ops.is_numpy(xp):
            xp.cuda.get_current_stream().synchronize()

    def data(n, seed=0):   # compare_gpu's problem (X uniform, its target), made on xp
        if _ops.is_numpy(xp):
            X = np.random.default_rng(seed).uniform(size=(n, a.d))
        else:
            X = xp.random.RandomState(seed).random_sample((n, a.d), dtype=xp.float64)
        y = xp.sin(2 * np.pi * X[:, 0]) + 4 * (X[:, 1] - 0.5) * (X[:, 2] - 0.5)
        return X, y

    def fit(X, y, R):
        n = X.shape[0]
        est = RandomBinning(n_grids=R, random_state=0)
        sync()
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            layout = cb.fit_layout(est, X, xp)
        sync()
        t1 = time.perf_counter()
        pre = _preconditioner("auto", a.tol, (n, layout.n_columns), True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            coef, _, n_iter, _ = ccg.solve_ridge(xp, layout, y.reshape(n, 1), None, 1e-4 * n,
                                                 True, a.tol, None, pre, structured=True)
        sync()
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, int(n_iter[0]), float(np.abs(coef).sum())

    import rbcd
    where = os.path.dirname(os.path.dirname(os.path.abspath(rbcd.__file__)))
    X0, y0 = data(4000, 1)
    fit(X0, y0, 8)                  # kernel compilation, the memory pool
    for n in (int(v) for v in a.sizes):
        X, y = data(n)
        fit(X, y, a.grids)          # this size's first fit (allocations), not counted
        runs = [fit(X, y, a.grids) for _ in range(a.reps)]
        b = [r[0] for r in runs]
        c = [r[1] for r in runs]
        s = [r[0] + r[1] for r in runs]
        print(json.dumps(dict(tree=where, batch_words=cb.BATCH_WORDS, n=n, R=a.grids,
                              iters=runs[0][2],
                              coef_l1=runs[0][3], binning=float(np.median(b)),
                              cg=float(np.median(c)), total=float(np.median(s)),
                              binning_all=b, cg_all=c)), flush=True)
        del X, y


if __name__ == "__main__":
    main()
