"""How evenly the fit's grid mode splits its work among T threads (issue 33).

    python benchmarks/fit_balance.py                          # N = 10^6, d = 16, R = 64
    python benchmarks/fit_balance.py --n 4000000 --threads 2,4,8,16,32 --json out.json

The grid mode of the binning fit (rbcd/binning/_binning.pyx, fit_tables) gives thread c
the contiguous run of grids ``bounds[c] .. bounds[c + 1] - 1``, cut where an estimated
cost per grid (rbcd.binning._plan._grid_costs) sums to equal parts. The thread with the
most work decides the fit's time, so the split's balance caps the speedup at
``T * mean / max`` of the threads' work.

Each thread's work is read from its own CPU clock (``fit_tables(chunk_cpu=...)``), so the
split of any T can be measured on a machine with fewer cores than T (the threads then
take turns; their caches are shared more than on T cores, so the figures are the work of
each chunk as this machine does it, not times on a T-core machine). The script

* fits once with one chunk for all grids (the work of one thread) and once with one
  chunk per grid: every grid's own cost (CPU seconds), set against the plan's estimate
  (their correlation, and the heaviest grid against the mean), and what a sweep over the
  rows costs by itself (each chunk sweeps all rows once per group of its grids: reading
  and transposing X, writing its part of every row's ids): the grids' costs alone less
  their one-chunk fit, over R - 1;
* for each T of --threads: the plan's split, measured (a fit with those T chunks) and
  modelled (a sweep and the grids' own work, their costs less a sweep), and the best
  contiguous split of that model (what a perfect estimate would give): ``balance`` =
  mean / max of the chunks' work (1.0: even), ``work`` = the chunks' total against the
  one-chunk fit's, and ``cap`` = T x balance / work, the most speedup that split allows.

OMP_THREAD_LIMIT is set to the usable CPUs (unless set), so that T chunks run a few at a
time instead of T threads taking turns on fewer cores.

The fits are the library's own: ``_binning.fit_tables`` is wrapped for the run to swap
in the bounds and read the chunk clocks (the library's module attribute, restored after).
"""
import json
import os
import sys

import numpy as np

from _common import cpu_model, make_X, parser, print_header, resolve_n, table, usable_cpus


def _contiguous_split(cost, T):
    """The contiguous split of ``cost`` into T non-empty runs whose largest sum is
    smallest (binary search on that sum, greedy fill), as bounds."""
    cost = np.asarray(cost, dtype=np.float64)
    R = cost.shape[0]
    T = max(1, min(int(T), R))

    def runs_for(cap):
        bounds, acc = [0], 0.0
        for r, c in enumerate(cost):
            if acc + c > cap and r > bounds[-1]:
                bounds.append(r)
                acc = 0.0
            acc += c
        bounds.append(R)
        return bounds

    lo, hi = float(cost.max()), float(cost.sum())
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if len(runs_for(mid)) - 1 <= T:
            hi = mid
        else:
            lo = mid
    bounds = runs_for(hi)
    # split further (the largest runs first) until there are exactly T runs
    while len(bounds) - 1 < T:
        sizes = np.diff(bounds)
        k = int(np.argmax(np.where(sizes > 1, sizes, 0)))
        bounds.insert(k + 1, bounds[k] + sizes[k] // 2)
    return np.asarray(bounds, dtype=np.int64)


def _balance(work):
    work = np.asarray(work, dtype=np.float64)
    return float(work.mean() / work.max()) if work.size and work.max() > 0 else float("nan")


class _Wrapped:
    """``_binning.fit_tables`` with the bounds replaced and the chunk clocks kept."""

    def __init__(self):
        from rbcd.binning import _binning

        self.mod = _binning
        self.plain = _binning.fit_tables
        self.bounds = None          # None: the plan's
        self.seen = None            # (plan's bounds, bounds used, chunk CPU seconds,
                                    #  the plan's cost estimate per grid)

    def __call__(self, X, grids, direct, ids, want_counts, bounds, paths, n_ranges=0,
                 n_threads=1, merge_pairs=0, chunk_cpu=None, team=False):
        from rbcd.binning._plan import _grid_costs

        use = np.asarray(bounds if self.bounds is None else self.bounds, dtype=np.int64)
        cpu = np.full(use.shape[0] - 1, np.nan)
        # the ids' pages faulted in beforehand: with fewer cores than chunks, the chunks
        # that run first would otherwise pay for all of them
        ids[:] = 0
        out = self.plain(X, grids, direct, ids, want_counts, use, paths, n_ranges, n_threads,
                         merge_pairs, chunk_cpu=cpu, team=team)
        est = _grid_costs(grids.thr_ptr, grids.use_thr, direct, grids.n_words, X.shape[1])
        self.seen = (np.asarray(bounds, dtype=np.int64), use, cpu, est)
        return out

    def __enter__(self):
        self.mod.fit_tables = self
        return self

    def __exit__(self, *exc):
        self.mod.fit_tables = self.plain


def main(argv=None):
    p = parser(__doc__.splitlines()[0], n=10**6, quick_n=10**5, repeat=1)
    p.add_argument("--sigma", type=float, default=1.0, help="kernel width (default 1)")
    p.add_argument("--threads", default="2,4,8,16,32",
                   help="thread counts whose split to measure (default 2,4,8,16,32)")
    p.add_argument("--json", default=None, help="write the figures to this file")
    args = p.parse_args(argv)
    n = resolve_n(args)
    threads = sorted({int(t) for t in args.threads.split(",") if t})
    print_header("The grid-mode fit's split of work among threads (issue 33)", args)

    os.environ.setdefault("OMP_THREAD_LIMIT", str(usable_cpus()))  # before OpenMP starts
    import rbcd
    from rbcd.binning._plan import _Paths, _grid_bounds

    X = make_X(n, args.d, args.seed)
    R = args.grids

    def fit(T, bounds=None):
        rb = rbcd.RandomBinning(n_grids=R, sigma=args.sigma, random_state=args.seed,
                                n_jobs=T)
        with _Wrapped() as w:
            w.bounds = bounds
            rb.fit_transform(X, _paths=_Paths(ranges=0, team=False))  # the plain grid mode
        return w.seen

    # one thread's work, then every grid's own cost (one chunk per grid)
    one = min(float(fit(1, np.array([0, R]))[2][0]) for _ in range(2))  # (first: warm-up)
    _, _, per_grid, est = fit(1, np.arange(R + 1))
    if not np.all(np.isfinite(per_grid)) or np.any(per_grid < 0):
        sys.exit("this platform has no per-thread CPU clock")
    corr = float(np.corrcoef(est, per_grid)[0, 1]) if np.std(est) > 0 else float("nan")
    print(f"grids   : {R}, one chunk each: CPU {per_grid.sum():.3f} s in all; per grid "
          f"mean {per_grid.mean() * 1e3:.1f} ms, min {per_grid.min() * 1e3:.1f} ms, "
          f"max {per_grid.max() * 1e3:.1f} ms (max / mean {per_grid.max() / per_grid.mean():.2f})")
    sweep = (per_grid.sum() - one) / max(R - 1, 1)
    print(f"one chunk for all grids: CPU {one:.3f} s; a sweep over the rows by itself about "
          f"{sweep * 1e3:.1f} ms ({sweep / n * 1e9:.0f} ns a row), so one grid alone costs "
          f"{(per_grid.mean() - sweep) * 1e3:.1f} ms in a group")
    print(f"estimate: the plan's cost per grid takes {len(np.unique(np.round(est, 6)))} "
          f"distinct value(s); correlation with the measured costs "
          f"{'n/a (all equal)' if corr != corr else f'{corr:.2f}'}\n")

    rows, record = [], {"machine": {"cpu": cpu_model(), "usable_cpus": usable_cpus()},
                        "one_chunk_cpu_s": one, "sweep_cpu_s": sweep,
                        "options": {"n": n, "d": args.d, "grids": R, "sigma": args.sigma},
                        "per_grid_cpu_s": per_grid.tolist(), "estimate": list(map(float, est)),
                        "threads": {}}
    for T in threads:
        plan_bounds = _grid_bounds(est, T)
        measured = fit(T, plan_bounds)[2]
        # a chunk's work modelled as one sweep and its grids' own work (each grid's cost
        # alone less the sweep it paid)
        own = np.maximum(per_grid - sweep, 0.0)
        modelled = sweep + np.add.reduceat(own, plan_bounds[:-1])
        best = _contiguous_split(own, T)
        best_work = sweep + np.add.reduceat(own, best[:-1])
        Tn = plan_bounds.shape[0] - 1
        b_meas, b_mod, b_best = _balance(measured), _balance(modelled), _balance(best_work)
        work = float(measured.sum()) / one
        rows.append([str(T), str(Tn), f"{b_meas:.2f}", f"{work:.2f}x",
                     f"{Tn * b_meas / work:.1f}x", f"{b_mod:.2f}", f"{b_best:.2f}",
                     f"{measured.max() * 1e3:.0f} / {measured.mean() * 1e3:.0f} ms"])
        record["threads"][str(T)] = {
            "bounds": plan_bounds.tolist(), "chunk_cpu_s": measured.tolist(),
            "modelled_s": modelled.tolist(), "best_bounds": best.tolist(),
            "balance_measured": b_meas, "balance_modelled": b_mod, "balance_best": b_best,
            "work": work}
    table(rows, ["threads", "chunks", "balance", "work", "cap", "balance from grid costs",
                 "balance, best contiguous split", "max / mean chunk"])
    print("\nbalance = mean / max of the chunks' CPU seconds (the plan's split); work = their "
          "total / one chunk's; cap = chunks x balance / work, the most speedup the split "
          "allows (before the cores' own scaling). The last balances: the plan's split "
          "from the grids' own costs, and the best contiguous split of those.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
