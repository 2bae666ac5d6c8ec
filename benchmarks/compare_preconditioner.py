"""The rule of ``preconditioner="auto"`` (RBRegressor / RBClassifier, exact mode): CG
iterations and fit times with plain CG and with the projected Jacobi preconditioner.

    python benchmarks/compare_preconditioner.py                 # the sets below, a few minutes
    python benchmarks/compare_preconditioner.py --quick         # small sets: a smoke run
    python benchmarks/compare_preconditioner.py --realdata DIR  # also the suite's large sets

Each set is fitted twice with every default of the model but ``solver="cg"`` (so that the
small sets do not take the direct solve) and ``preconditioner``: None (plain CG) and
"jacobi" (projected off the grids' null directions, as "auto" gives it). ``alpha="auto"``
chooses the same penalty for both (leave-one-out on the training rows or a sample of
them, before CG), so the two fits solve the same system to the same tolerance. The
iteration counts do not depend on the machine; the times are single fits on one thread.
The rule picks Jacobi up to ``rbcd.models.AUTO_JACOBI_BINS_PER_ROW`` bins (columns of Z)
per training row; the last column says whether its choice needed the fewer iterations
(within 10%).

Sets: compare_sizes' synthetic problems (2 and 10 classes, regression) at --sizes rows and
sigma factors --sigmas x the median L1 distance (smaller factors: more bins per row); a
20-feature make_classification set (classes, and a smooth regression target on its
features); scikit-learn's bundled sets, scaled (many more bins than rows).
"""
import sys
import time
import warnings

import numpy as np

from _common import note, parser, print_header, table


def data_sets(args):
    """[(name, classification, Xtr, ytr, Xte, yte, sigma factor or None)]."""
    from compare_sizes import synthetic
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
    from sklearn.datasets import make_classification
    from sklearn.preprocessing import StandardScaler

    out = []
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    factors = [float(f) for f in args.sigmas.split(",")]
    for n in sizes:
        for kind in ("reg", "clf2", "clf10"):
            Xtr, ytr, Xte, yte = synthetic(kind, n)
            for f in factors:
                out.append((f"synthetic {kind}, x{f:g}", kind != "reg", Xtr, ytr, Xte, yte, f))
    n = max(sizes) * 2
    X, y = make_classification(n + n // 5, n_features=20, n_informative=10, random_state=0)
    yr = X[:, 0] * np.sin(X[:, 1]) + X[:, 2] ** 2
    out.append(("make_classification", True, X[:n], y[:n], X[n:], y[n:], None))
    out.append(("make_classification, regression", False, X[:n], yr[:n], X[n:], yr[n:],
                None))
    if not args.quick:
        for name, loader, clf in (("breast cancer", load_breast_cancer, True),
                                  ("digits", load_digits, True),
                                  ("diabetes", load_diabetes, False)):
            X, y = loader(return_X_y=True)
            X = StandardScaler().fit_transform(X)
            k = int(0.75 * X.shape[0])
            out.append((f"{name} (scaled)", clf, X[:k], y[:k], X[k:], y[k:], None))
    if args.realdata:
        from compare_realdata import load_sets

        for ds in load_sets(args.realdata):
            if ds.X_train.shape[0] >= args.realdata_min:
                out.append((ds.name, ds.task == "classification", ds.X_train, ds.y_train,
                            ds.X_test, ds.y_test, None))
    return out


def fit(model, pre, sigma, Xtr, ytr):
    """(fitted model, seconds, whether CG warned that it did not converge)."""
    kw = {} if sigma is None else {"sigma": sigma}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        m = model(random_state=0, n_jobs=1, solver="cg", preconditioner=pre, **kw).fit(Xtr, ytr)
        seconds = time.perf_counter() - t
    warned = any("converge" in str(w.message).lower() for w in caught)
    return m, seconds, warned


def main(argv=None):
    p = parser(__doc__.splitlines()[0], n=30_000, quick_n=3_000, repeat=1)
    p.add_argument("--sizes", default=None,
                   help="rows of the synthetic sets (default 10000,30000; 3000 with --quick)")
    p.add_argument("--sigmas", default="0.5,0.25",
                   help="sigma factors x the median L1 distance (default 0.5,0.25; 0.5 is "
                        "sigma='scale')")
    p.add_argument("--realdata", default=None, help="also the suite's sets in this folder")
    p.add_argument("--realdata-min", type=int, default=5000,
                   help="the suite's sets of at least this many training rows (default 5000)")
    args = p.parse_args(argv)
    if args.sizes is None:
        args.sizes = "3000" if args.quick else "10000,30000"
    print_header(__doc__.splitlines()[0], args)

    import rbcd
    from rbcd.models import AUTO_JACOBI_BINS_PER_ROW, _preconditioner

    rows, record = [], []
    for name, clf, Xtr, ytr, Xte, yte, factor in data_sets(args):
        model = rbcd.RBClassifier if clf else rbcd.RBRegressor
        sigma = None if factor is None else factor * rbcd.median_l1_distance(Xtr)
        res = {}
        for pre in (None, "jacobi"):
            m, seconds, warned = fit(model, pre, sigma, Xtr, ytr)
            res[pre] = (int(np.max(m.solver_.n_iter_)), seconds, float(m.score(Xte, yte)),
                        warned)
        n, D = Xtr.shape[0], int(m.binning_.n_features_out_)
        choice = _preconditioner("auto", m.solver_.tol, (n, D), True)
        it_plain, it_jac = res[None][0], res["jacobi"][0]
        best = min(it_plain, it_jac)
        ok = res[choice][0] <= 1.1 * best
        rows.append([name, f"{n:,}", f"{D / n:.1f}", f"{m.alpha_:.3g}",
                     f"{it_plain}{' (warned)' if res[None][3] else ''}",
                     f"{it_jac}{' (warned)' if res['jacobi'][3] else ''}",
                     f"{it_plain / max(it_jac, 1):.2f}x",
                     f"{res[None][1]:.2f} / {res['jacobi'][1]:.2f} s",
                     f"{res[None][2]:.4f} / {res['jacobi'][2]:.4f}",
                     f"{choice or 'plain'}: {'yes' if ok else 'NO'}"])
        record.append((D / n, it_plain, it_jac))
    table(rows, ["set", "N", "D / N", "alpha_", "plain CG it", "Jacobi it",
                 "ratio (plain / Jacobi)", "time plain / Jacobi", "score plain / Jacobi",
                 "rule's choice: fewest it"])
    near = [r for r in record if r[0] <= AUTO_JACOBI_BINS_PER_ROW]
    if near:
        ratios = np.array([a / max(b, 1) for _, a, b in near])
        found = (f"plain / Jacobi iterations on its {len(near)} Jacobi set(s): ratio min "
                 f"{ratios.min():.2f}x, median {np.median(ratios):.2f}x, max "
                 f"{ratios.max():.2f}x")
    else:
        found = "no set here has that few bins per row"
    note(f"target: the rule (Jacobi up to {AUTO_JACOBI_BINS_PER_ROW} bins per row) needs at "
         f"most 10% more iterations than the better choice; {found}. Scores differ only by "
         "where each run stops within the tolerance.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
