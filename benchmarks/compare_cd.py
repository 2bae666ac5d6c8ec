"""Coordinate descent epochs against scikit-learn's Lasso, and the parallel speedups.

    python benchmarks/compare_cd.py                    # N = 10^6, d = 16, R = 64, sigma = 1
    python benchmarks/compare_cd.py --quick            # N = 10^5
    python benchmarks/compare_cd.py --epochs 5 --repeat 2 --alpha-ratio 0.1

On one RB matrix Z (CSR, with a CSC copy for scikit-learn) and a centred regression
target, the problem is the Lasso, 1/(2N) ||y - Z w||^2 + alpha ||w||_1, no intercept:
exactly sklearn.linear_model.Lasso(alpha, fit_intercept=False). Prints:
  - the serial epoch time of rbcd's CDRegressor vs Lasso's (random and cyclic selection)
  - the 2-thread speedup of the Hogwild and grid-block modes
  - Hogwild's 2-thread speedup on RB features vs on dense random Fourier features with
    as many non-zeros per row (the paper's Fig. 6 contrast), beside eq. 29's prediction
    tau / (1 + (R - 1)(tau - 1) / (D - 1)), R = non-zeros per row, D = columns.

Epoch time = (T(k epochs) - T(1 epoch)) / (k - 1), each T the best of --repeat fits with
tol = 0: this removes what a fit does once (input validation and copies, column structure,
scikit-learn's final duality gap) from both libraries alike.
"""
import sys

import numpy as np
import scipy.sparse as sp

from _common import (
    best_of,
    check,
    fmt_ratio,
    fmt_time,
    make_regression_target,
    note,
    parser,
    predicted_speedup,
    print_header,
    quiet,
    ratio,
    rb_matrix,
    resolve_n,
    table,
)

TARGET_GRID_2T = 1.7
TARGET_HOGWILD_2T = 1.7
TARGET_SERIAL_VS_LASSO = 0.8  # issue: serial epoch at most 0.8x sklearn Lasso's


def lasso_objective(Z, y, w, alpha):
    r = y - Z @ w
    return float(0.5 * (r @ r) / Z.shape[0] + alpha * np.abs(w).sum())


def main(argv=None):
    p = parser(__doc__.split("\n\n")[0], n=10**6, quick_n=10**5, repeat=3)
    p.add_argument("--sigma", type=float, default=1.0, help="kernel width (default 1.0)")
    p.add_argument("--epochs", type=int, default=4,
                   help="k, epochs of the long fit (default 4; >= 2)")
    p.add_argument("--alpha-ratio", type=float, default=0.01,
                   help="alpha as a fraction of alpha_max (default 0.01)")
    p.add_argument("--rf-components", type=int, default=None,
                   help="random Fourier features for the Fig. 6 contrast (default: --grids, "
                        "i.e. as many non-zeros per row as RB)")
    p.add_argument("--no-rf", action="store_true", help="skip the random Fourier contrast")
    args = p.parse_args(argv)
    n = resolve_n(args)
    k = max(2, args.epochs)
    rep = args.repeat
    print_header("CDRegressor epochs vs sklearn Lasso; parallel speedups", args)
    quiet()

    import rbcd
    from sklearn.linear_model import Lasso

    rb, Z, X = rb_matrix(n, args.d, args.grids, args.sigma, args.seed, n_jobs=None)
    y = make_regression_target(X, args.seed)
    y = y - y.mean()
    Zc = Z.tocsc()
    Zc.sort_indices()
    N, D = Z.shape
    alpha_max = float(np.max(np.abs(Zc.T @ y))) / N
    alpha = args.alpha_ratio * alpha_max
    print(f"Z: {N:,} x {D:,} RB matrix (R = {args.grids}, sigma = {args.sigma}), nnz = {Z.nnz:,}; "
          f"alpha = {args.alpha_ratio} * alpha_max = {alpha:.3e}; k = {k} epochs\n")

    def cd(parallel, n_jobs, selection="random", epochs=1):
        return rbcd.CDRegressor(loss="squared", alpha=alpha, l1_ratio=1.0, fit_intercept=False,
                                max_epochs=epochs, tol=0.0, selection=selection,
                                parallel=parallel, n_jobs=n_jobs, random_state=args.seed)

    def lasso(selection, epochs):
        return Lasso(alpha=alpha, fit_intercept=False, max_iter=epochs, tol=0.0,
                     selection=selection, random_state=args.seed)

    def epoch_time(make, fit):
        """(per-epoch time, one-off overhead, estimator after k epochs)."""
        t1, _ = best_of(lambda: fit(make(1)), rep)
        tk, est = best_of(lambda: fit(make(k)), rep)
        per = (tk - t1) / (k - 1)
        if per <= 0:  # below timer noise (tiny --n): report n/a rather than a made-up ratio
            return float("nan"), t1, est
        return per, t1 - per, est

    # The column structure (CSC view + grid check) is built once here and passed to every
    # rbcd fit, as RBRegressor does; a fitted RandomBinning would also do, rebuilding it
    # in every fit (one-off cost, cancelled by the differential timing anyway).
    try:
        from rbcd.binning.random_binning import column_structure

        binning = column_structure(Z, rb.grid_ptr_)
    except ImportError:
        binning = rb

    def fit_rb(est):
        return est.fit(Z, y, columns=binning)

    def fit_sk(est):
        return est.fit(Zc, y)

    results, rows = {}, []

    def record(key, label, per, over, est, M=Z):
        results[key] = per
        obj = lasso_objective(M, y, np.ravel(est.coef_), alpha) if est is not None else float("nan")
        rows.append([label, fmt_time(per), fmt_time(over), f"{obj:.8e}"])

    for sel in ("random", "cyclic"):
        per, over, est = epoch_time(lambda e, s=sel: cd(None, 1, s, e), fit_rb)
        record(f"rbcd_{sel}", f"rbcd CDRegressor serial, {sel}", per, over, est)
        per, over, est = epoch_time(lambda e, s=sel: lasso(s, e), fit_sk)
        record(f"sk_{sel}", f"sklearn Lasso, {sel}", per, over, est)
    for mode in ("hogwild", "grid"):
        for t in (1, 2):
            per, over, est = epoch_time(lambda e, m=mode, t=t: cd(m, t, "random", e), fit_rb)
            record(f"{mode}{t}", f"rbcd CDRegressor {mode}, n_jobs={t}", per, over, est)

    rf_info = None
    if not args.no_rf:
        n_rf = args.rf_components or args.grids
        F = rf_features(rbcd, X, n_rf, args.sigma, args.seed)
        kind = "rbcd.RandomFourier(kernel='laplacian')" if F is not None else "dense Gaussian"
        if F is None:
            F = np.random.default_rng(args.seed).standard_normal((N, n_rf)) / np.sqrt(n_rf)
        F_csr = sp.csr_matrix(F)
        del F
        alpha_rf = args.alpha_ratio * float(np.max(np.abs(F_csr.T @ y))) / N

        def cd_rf(t, epochs):
            return rbcd.CDRegressor(loss="squared", alpha=alpha_rf, l1_ratio=1.0,
                                    fit_intercept=False, max_epochs=epochs, tol=0.0,
                                    selection="random", parallel="hogwild", n_jobs=t,
                                    random_state=args.seed)

        for t in (1, 2):
            per, over, est = epoch_time(lambda e, t=t: cd_rf(t, e), lambda est: est.fit(F_csr, y))
            results[f"rf{t}"] = per
            r = y - F_csr @ np.ravel(est.coef_)
            obj = 0.5 * (r @ r) / N + alpha_rf * np.abs(est.coef_).sum()
            rows.append([f"rbcd hogwild on {n_rf} random Fourier features (CSR), n_jobs={t}",
                         fmt_time(per), fmt_time(over), f"{obj:.8e}"])
        rf_info = (kind, n_rf, F_csr.nnz)
        del F_csr

    table(rows, ["run", "per epoch", "one-off", f"objective after {k} epochs"])

    r = results
    pred_rb = predicted_speedup(2, args.grids, D)
    vs_rand = ratio(r["rbcd_random"], r["sk_random"])
    vs_cyc = ratio(r["rbcd_cyclic"], r["sk_cyclic"])
    s_grid = ratio(r["grid1"], r["grid2"])
    out = [
        ["rbcd serial epoch / Lasso epoch (random)", fmt_ratio(vs_rand),
         f"<= {TARGET_SERIAL_VS_LASSO}x", check(vs_rand, TARGET_SERIAL_VS_LASSO, False)],
        ["rbcd serial epoch / Lasso epoch (cyclic)", fmt_ratio(vs_cyc),
         f"<= {TARGET_SERIAL_VS_LASSO}x", check(vs_cyc, TARGET_SERIAL_VS_LASSO, False)],
        ["hogwild on RB: speedup 2 threads over 1", fmt_ratio(ratio(r["hogwild1"], r["hogwild2"])),
         f">= {TARGET_HOGWILD_2T}x (eq. 29: {pred_rb:.3f}x)",
         check(ratio(r["hogwild1"], r["hogwild2"]), TARGET_HOGWILD_2T, True)],
        ["grid blocks on RB: speedup 2 threads over 1", fmt_ratio(s_grid),
         f">= {TARGET_GRID_2T}x (no conflicts)", check(s_grid, TARGET_GRID_2T, True)],
    ]
    if rf_info is not None:
        kind, n_rf, nnz_rf = rf_info
        pred_rf = predicted_speedup(2, n_rf, n_rf)
        s_rb, s_rf = ratio(r["hogwild1"], r["hogwild2"]), ratio(r["rf1"], r["rf2"])
        out += [
            [f"hogwild on dense RF ({n_rf} columns): speedup 2 over 1", fmt_ratio(s_rf),
             f"eq. 29: {pred_rf:.3f}x", ""],
            ["hogwild speedup RB / speedup RF (Fig. 6 contrast)", fmt_ratio(ratio(s_rb, s_rf)),
             f"eq. 29: {pred_rb / pred_rf:.3f}x", ""],
        ]
    table(out, ["ratio", "measured", "target / prediction", ""])
    note("epoch times exclude one-off work (see the one-off column: T(1 epoch) minus one epoch). "
         "scikit-learn's Lasso validates and may copy its input and computes a duality gap at "
         "its last iteration; both happen in T(1) and T(k) alike and cancel. rbcd's epoch "
         "includes its per-epoch convergence check. The Lasso runs on a CSC copy of Z, and rbcd "
         "on Z with its column structure (rbcd.binning.random_binning.column_structure), both made "
         "beforehand (not timed). Hogwild on dense features: every coordinate touches every "
         "row, so eq. 29 predicts no speedup (R = D).")
    if rf_info is not None:
        print(f"RF contrast features: {rf_info[0]}, {N:,} x {rf_info[1]}, nnz = {rf_info[2]:,} "
              f"(RB nnz = {Z.nnz:,}).")
    return 0


def rf_features(rbcd, X, n_components, sigma, seed):
    """Dense random Fourier features of X from rbcd.RandomFourier, or None if unavailable."""
    try:
        RandomFourier = rbcd.RandomFourier
    except (AttributeError, ImportError):
        return None
    rf = RandomFourier(n_components=n_components, kernel="laplacian", sigma=sigma, n_jobs=None,
                       random_state=seed)
    return rf.fit_transform(X)


if __name__ == "__main__":
    sys.exit(main())
