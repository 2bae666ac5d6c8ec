"""RBClassifierCV against GridSearchCV over RBClassifier with the same grid, folds and seed.

    python benchmarks/compare_cv.py                    # checkerboard, N = 2 * 10^4, d = 8, 5 folds
    python benchmarks/compare_cv.py --quick            # N = 2000 (a smoke run)
    python benchmarks/compare_cv.py --data DIR/NAME    # a real set: DIR/NAME.train.svm
    python benchmarks/compare_cv.py --classes 26       # a 26-class problem (make_classification)

Both search sigma = factor * scale_sigma(X) over --factors and alpha over --alphas (default:
RBClassifierCV's, per training row) with
--folds stratified folds, then refit the best on all rows. GridSearchCV bins and solves every
(sigma, alpha, fold) from scratch; RBClassifierCV bins once per (sigma, fold) and solves all
alphas (and classes) in one block CG. Prints both wall times (best of --repeat), their ratio
(target: RBClassifierCV faster, ratio > 1), and whether both chose the same candidate (they
must, up to the solver tolerance: the scores are compared too). n_jobs is the same for both
(GridSearchCV's own n_jobs stays 1: its parallelism over candidates is a different question).
"""
import os
import sys

import numpy as np

from _common import best_of, cpu_model, fmt_ratio, fmt_time, parser, print_header, quiet, resolve_n


def load(args):
    if args.data:
        from sklearn.datasets import load_svmlight_file

        X, y = load_svmlight_file(args.data + ".train.svm")
        return X.toarray(), y
    n = resolve_n(args)
    if args.classes > 2:
        from sklearn.datasets import make_classification

        return make_classification(n_samples=n, n_features=args.d, n_informative=min(args.d, 6),
                                   n_redundant=0, n_classes=args.classes,
                                   n_clusters_per_class=1, random_state=args.seed)
    from rbcd.datasets import make_checkerboard

    return make_checkerboard(n_samples=n, n_features=args.d, flip_y=0.05, random_state=args.seed)


def main(argv=None):
    p = parser(__doc__, n=20_000, quick_n=2_000, d=8, grids=64, repeat=1)
    p.add_argument("--data", default=None, help="DIR/NAME of a NAME.train.svm file")
    p.add_argument("--classes", type=int, default=2)
    p.add_argument("--factors", default="0.25,0.5,1,2")
    p.add_argument("--alphas", default=None,
                   help="comma-separated alphas (default: RBClassifierCV's, n_samples * "
                        "(1e-5, 1e-4, 1e-3, 1e-2))")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--tol", type=float, default=1e-3,
                   help="solver tol (default 1e-3, the recommended default)")
    p.add_argument("--n-jobs", type=int, default=None)
    args = p.parse_args(argv)
    quiet()
    print_header("RBClassifierCV vs GridSearchCV(RBClassifier)", args)
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    from rbcd._scale import scale_sigma
    from rbcd.model_selection import RBClassifierCV
    from rbcd.models import RBClassifier

    X, y = load(args)
    factors = [float(v) for v in args.factors.split(",")]
    if args.alphas:
        alphas = [float(v) for v in args.alphas.split(",")]
    else:
        from rbcd.model_selection import DEFAULT_ALPHAS_CG_PER_ROW

        alphas = [c * X.shape[0] for c in DEFAULT_ALPHAS_CG_PER_ROW]
    folds = StratifiedKFold(args.folds, shuffle=True, random_state=args.seed)
    print(f"data: {X.shape[0]} x {X.shape[1]}, {len(np.unique(y))} classes; "
          f"{len(factors)} sigmas x {len(alphas)} alphas x {args.folds} folds", flush=True)

    def ours():
        return RBClassifierCV(n_grids=args.grids, sigma_factors=factors, alphas=alphas,
                              cv=folds, tol=args.tol, n_jobs=args.n_jobs,
                              random_state=args.seed).fit(X, y)

    def theirs():
        base = RBClassifier(n_grids=args.grids, tol=args.tol, n_jobs=args.n_jobs,
                            random_state=args.seed)
        grid = {"sigma": [f * scale_sigma(X) for f in factors], "alpha": alphas}
        return GridSearchCV(base, grid, cv=folds).fit(X, y)

    t_ours, a = best_of(ours, args.repeat)
    t_gs, b = best_of(theirs, args.repeat)
    same = a.best_index_ == b.best_index_
    diff = float(np.max(np.abs(a.cv_results_["mean_test_score"] - b.cv_results_["mean_test_score"])))
    print(f"RBClassifierCV           {fmt_time(t_ours):>10}  best {a.best_params_} "
          f"score {a.best_score_:.4f}")
    print(f"GridSearchCV(RBClassifier){fmt_time(t_gs):>9}  best "
          f"{ {k: float(v) for k, v in b.best_params_.items()} } score {b.best_score_:.4f}")
    print(f"speedup (GridSearchCV time / RBClassifierCV time): {fmt_ratio(t_gs / t_ours)} "
          f"[target > 1]; same choice: {same}; largest mean-score difference {diff:.2e}")
    return 0 if (same or diff < 1e-3) else 1


if __name__ == "__main__":
    sys.exit(main())
