"""Paired A/B timing of the core kernels of two rbcd builds (for refactors that must not
change speed).

    PYTHONPATH=/path/to/tree_a python benchmarks/ab_core.py --out a.json
    PYTHONPATH=/path/to/tree_b python benchmarks/ab_core.py --out b.json
    python benchmarks/ab_core.py --compare a1.json b1.json a2.json b2.json ...

Run the two trees alternately (A B A B ...) on a quiet machine; --compare prints, per
operation, the median over runs of each tree's best-of-repeat time and the ratio B/A.
Operations (public API only, so that older builds run it too): RandomBinning.fit_transform
(1 and 2 threads), transform of new rows, one CD epoch (serial cyclic and grid mode on 1 and 2
threads), and a RidgeCG fit on the RB matrix.
"""
import argparse
import json
import os
import platform
import sys
import time
import warnings

import numpy as np


def best(fn, repeat):
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def cd_fit(Z, y, cols, **kw):
    from sklearn.exceptions import ConvergenceWarning

    from rbcd import CDRegressor

    est = CDRegressor(alpha=1e-4, tol=0.0, max_epochs=2, random_state=0, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        try:
            return est.fit(Z, y, columns=cols)
        except TypeError:  # builds before the public columns= keyword
            return est.fit(Z, y, binning=cols)


def run(n, repeat):
    from rbcd import RandomBinning, RidgeCG

    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, 16))
    Xnew = rng.uniform(size=(n // 2, 16))
    y = np.sin(4 * X[:, 0]) * X[:, 1] + 0.1 * rng.normal(size=n)
    res = {}
    for t in (1, 2):
        rb = RandomBinning(n_grids=64, sigma=1.0, random_state=0, n_jobs=t)
        res[f"fit_transform {t}t"] = best(lambda: rb.fit_transform(X), repeat)
        res[f"transform {t}t"] = best(lambda: rb.transform(Xnew), repeat)
    rb = RandomBinning(n_grids=64, sigma=1.0, random_state=0, n_jobs=2)
    try:
        Z, cols = rb.fit_transform(X, return_columns=True)
    except TypeError:
        Z, cols = rb._fit_transform_columns(X)
    res["cd 2 epochs serial cyclic"] = best(
        lambda: cd_fit(Z, y, cols, selection="cyclic", parallel=None, n_jobs=1), repeat)
    for t in (1, 2):
        res[f"cd 2 epochs grid {t}t"] = best(
            lambda: cd_fit(Z, y, cols, parallel="grid", n_jobs=t), repeat)
    for t in (1, 2):
        res[f"ridge cg fit {t}t (grid structure, 10 iterations)"] = best(
            lambda: RidgeCG(alpha=1.0, tol=0.0, max_iter=10, n_jobs=t).fit(Z, y, columns=cols),
            repeat)
    Zs = Z[: n // 4]
    res["ridge cg fit 2t (N/4 rows, plain CSR)"] = best(
        lambda: RidgeCG(alpha=1.0, tol=1e-6, n_jobs=2).fit(Zs, y[: n // 4]), repeat)
    return res


def compare(paths):
    runs = [json.load(open(p)) for p in paths]
    a, b = runs[0::2], runs[1::2]
    print(f"A = {a[0]['tree']}\nB = {b[0]['tree']}\nCPU: {a[0]['cpu']}; {len(a)} A/B pairs")
    print(f"{'operation':42s} {'A (s)':>9s} {'B (s)':>9s} {'B/A':>7s}")
    for op in a[0]["times"]:
        ta = np.median([r["times"][op] for r in a])
        tb = np.median([r["times"][op] for r in b])
        print(f"{op:42s} {ta:9.4f} {tb:9.4f} {tb / ta:7.3f}")


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=400_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out")
    p.add_argument("--compare", nargs="+")
    args = p.parse_args(argv)
    if args.compare:
        return compare(args.compare)
    import rbcd

    res = {"tree": os.path.dirname(os.path.dirname(os.path.abspath(rbcd.__file__))),
           "cpu": cpu_name(), "n": args.n, "times": run(args.n, args.repeat)}
    text = json.dumps(res, indent=1)
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.out)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
