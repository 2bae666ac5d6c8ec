"""Each alternative code path against the default on one realistic workload (issue: keep
an alternative only where it is measured faster).

    python benchmarks/compare_paths.py [--n 400000] [--repeat 3]

Binning (RandomBinning.fit_transform + transform, X uniform on [0, 1)^16, R = 64, sigma = 1,
2 threads): the default paths against SIMD off, threshold keys off (division) and direct
tables off. Coordinate descent on the same Z (2 epochs, squared loss): grid mode with the
streamed step against per-bin column updates, and Hogwild with hardware transactions
(where the CPU has them) against atomic adds. Prints best-of-repeat seconds and the ratio
to the default; every path gives the same Z (and, for the grid step, the same iterates).
"""
import argparse
import sys
import time
import warnings

import numpy as np


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=400_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    from sklearn.exceptions import ConvergenceWarning

    from rbcd import CDRegressor, RandomBinning
    from rbcd.binning.random_binning import _Paths
    from rbcd.solvers._cd import rtm_available
    from rbcd.solvers._paths import forced_paths

    rng = np.random.default_rng(0)
    X = rng.uniform(size=(args.n, 16))
    Xnew = rng.uniform(size=(args.n // 2, 16))
    y = np.sin(4 * X[:, 0]) * X[:, 1]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "unknown CPU")
    print(f"CPU: {cpu}; N = {args.n}, d = 16, R = 64, sigma = 1, 2 threads, best of {args.repeat}")
    rows = []

    def binning(paths):
        rb = RandomBinning(n_grids=64, sigma=1.0, random_state=0, n_jobs=2)
        return (best(lambda: rb.fit_transform(X, _paths=paths), args.repeat),
                best(lambda: rb.transform(Xnew, _paths=paths), args.repeat))

    base = binning(_Paths())
    for name, paths in [("binning: SIMD off", _Paths(simd=False)),
                        ("binning: threshold keys off (division)", _Paths(thresholds=False)),
                        ("binning: direct tables off (hash tables)", _Paths(direct=False))]:
        t = binning(paths)
        rows.append((name, "fit_transform", base[0], t[0]))
        rows.append((name, "transform", base[1], t[1]))

    rb = RandomBinning(n_grids=64, sigma=1.0, random_state=0, n_jobs=2)
    Z, cols = rb.fit_transform(X, return_columns=True)

    def cd(parallel, **paths):
        est = CDRegressor(alpha=1e-4, tol=0.0, max_epochs=2, parallel=parallel, n_jobs=2,
                          random_state=0)
        with forced_paths(**paths), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return best(lambda: est.fit(Z, y, columns=cols), args.repeat)

    rows.append(("cd grid: per-bin updates (streamed step off)", "2 epochs",
                 cd("grid"), cd("grid", grid_stream=False)))
    if rtm_available():
        rows.append(("cd hogwild: atomic adds (transactions off)", "2 epochs",
                     cd("hogwild"), cd("hogwild", transactions="off")))
    else:
        print("(no RTM on this CPU: Hogwild uses atomic adds; no transaction row)")
    print(f"{'alternative path':48s} {'workload':14s} {'default s':>10s} {'alt s':>8s} {'alt/default':>12s}")
    for name, what, t0, t1 in rows:
        print(f"{name:48s} {what:14s} {t0:10.4f} {t1:8.4f} {t1 / t0:12.2f}")


if __name__ == "__main__":
    sys.exit(main())
