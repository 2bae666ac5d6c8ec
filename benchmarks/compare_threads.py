"""Thread scaling of every stage (issue 33), set against the machine's own memory bandwidth.

    python benchmarks/compare_threads.py                         # N = 4e6, threads 1, 2, 4, ..
    python benchmarks/compare_threads.py --n-samples 200000 --threads 1,2 --out /tmp/thr
    python benchmarks/compare_threads.py --stages cg,cd-grid --repeat 3

Data: X uniform on [0, 1)^d (d = --d, default 16), N = --n-samples rows (default 4 x 10^6),
R = --n-grids (64) grids of kernel width --sigma (1). The issue's problem.

Stages, each timed at every thread count of --threads (default 1, 2, 4, ... up to the
usable cores, and the core count itself), ``n_jobs`` passed explicitly:

* ``binning``: ``RandomBinning(n_jobs=T).fit_transform(X)`` (the CSR matrix Z);
* ``fit``: ``RandomBinning(n_jobs=T).fit(X)``: the bin tables only, no Z (fit_transform's
  first kernel without its writes of Z's indices: set against ``binning``, what writing Z
  costs the fit's scaling; not in the default stages);
* ``binning-grids`` / ``binning-ranges``: ``binning`` with the fit's mode forced (the
  plan's private ``_paths``): the grid mode (each thread a run of grids over all rows) or
  the row-range mode (each thread a range of rows over all grids, then the merge), to set
  the plan's choice between them (rbcd.binning._plan.RANGES_MIN_THREADS) by measurement;
  not in the default stages;
* ``binning-team``: ``binning-grids`` with the grid mode's team path forced on (the
  threads walk the rows together: X read, and the threshold keys' blocks transposed, once
  for all threads; ``binning-grids`` forces it off): whether the plan should choose it
  (rbcd.binning._plan._fit_team; today it never does); not in the default stages;
* ``ranges-work``: ``binning`` in the row-range mode with T ranges on one thread: the
  mode's work at T threads, measurable where there are fewer cores than T (against
  ``binning-grids`` at 1 thread: how much more work the ranges' merges and ids rewrite
  add; its "speedup" column is below 1 by that factor); not in the default stages;
* ``binning-huge``: ``binning-grids`` with Z's arrays (and the fit's ids) on memory advised
  as 2 MiB pages (the library's own arrays are on 4 KiB pages: ``_binning.empty``); not in
  the default stages;
* ``touch`` / ``touch-huge``: the first touch by T threads of fresh memory of Z's size
  (its indices and data), on 4 KiB pages / advised as 2 MiB pages: the page faults that
  every fit and transform pays for its output, against which the binning stages' times
  can be set; not in the default stages;
* ``transpose``: Z's CSR -> CSC transpose as the solvers make it when Z comes without
  ``columns=`` (``rbcd.solvers._columns.to_csc``: scipy's on one thread); not in the
  default stages;
* ``core`` / ``core-l2``: no data at all: fixed work split over T threads, each one
  dependent chain of integer mixing (``rbcd._openmp_info.core_work``), with ``core-l2``
  also probing a private 256 KiB table at every link. Their speedups are the most that T
  of this machine's cores give (their clock under load; on a VM, how its CPUs map to
  physical cores): the ceiling to read the stages' speedups against; not in the
  default stages;
* ``transform``: ``transform(X)`` of that fitted binning (the same rows again);
* ``cg``: one RidgeCG iteration as the solver runs it on Z with its grid structure
  (``fit(Z, y, columns=...)``, as RBRegressor passes it), in a fit of 1 + k iterations
  (k = --iters, ``tol=0`` so that no target stops): the time between the ends of two
  successive ``cg_direction`` calls, the last kernel of an iteration (benchmarks/_probe.py),
  the best of the k. One iteration is Z @ p and Z^T (S (Z p - zbar.p)) over the grid
  labels plus the vector updates;
* ``cd-grid`` / ``cd-hogwild``: one epoch of ``CDRegressor(parallel="grid" / "hogwild",
  selection="random", tol=0)``, squared loss, lasso penalty at 1% of alpha_max, no
  intercept: one ``CDProblem.epoch`` call of a fit of 1 + k epochs, the best of them (the
  convergence checks between epochs are not part of it).

Every stage also records its kernel breakdown (the time in each compiled kernel the
Python layer calls, per iteration or epoch for the iterative stages; the rest of the
stage's wall time is Python/numpy glue) and the process's system CPU time and minor page
faults over the measurement, printed per thread count and written to threads.md and
threads.json: where a stage stops scaling, its breakdown says which kernel (or the glue,
or the kernel's page faults) holds it.

Bandwidth: STREAM's triad a = b + s c (rbcd._openmp_info.stream_triad, OpenMP, static
schedule, each array first touched by the threads that stream it) on arrays of max(N,
--triad-min) doubles, at every thread count, best of 5 (STREAM's 3 x 8 bytes per element).
Each stage has a byte model (the least its passes must move, printed with the table): the
"bound" of a stage at T threads is bytes / triad bandwidth at T threads, and the table
gives time / bound (1.0: the stage streams as fast as the triad; the issue's target for a
CG iteration at 16 threads is <= 2).

The rounds alternate the thread counts (round q: every stage at 1, 2, 4, ... threads),
and each time is the best of --repeat rounds, because a VM's speed drifts over seconds.
--out DIR writes DIR/threads.md (the markdown table, machine named) and
DIR/threads.json (every measurement, the options and the machine).
"""
import os
import platform
import sys
import time
import warnings

import numpy as np

from _probe import KernelProbe
from _common import (
    cpu_model,
    fmt_bytes,
    fmt_ratio,
    fmt_time,
    make_X,
    make_regression_target,
    note,
    parser,
    print_header,
    quiet,
    ratio,
    table,
    usable_cpus,
    write_json,
    write_text,
)

STAGES = ("binning", "fit", "binning-grids", "binning-team", "binning-ranges", "ranges-work",
          "binning-huge",
          "touch", "touch-huge", "core", "core-l2", "transform", "cg", "cd-grid", "cd-hogwild",
          "transpose")
TITLES = {
    "binning": "binning (fit_transform)",
    "fit": "binning (fit: tables only)",
    "binning-grids": "binning (fit_transform, grid mode)",
    "binning-team": "binning (fit_transform, grid mode, team path)",
    "binning-ranges": "binning (fit_transform, row ranges)",
    "ranges-work": "binning (fit_transform, T row ranges on 1 thread)",
    "binning-huge": "binning (fit_transform, grid mode, Z on 2 MiB pages)",
    "touch": "first touch of Z's bytes (4 KiB pages)",
    "touch-huge": "first touch of Z's bytes (2 MiB pages)",
    "core": "core speed (ALU chains)",
    "core-l2": "core speed (L2 probe chains)",
    "transform": "binning (transform)",
    "cg": "RidgeCG iteration",
    "cd-grid": "CD epoch, grid mode",
    "cd-hogwild": "CD epoch, Hogwild",
    "transpose": "Z's transpose (solvers without columns=)",
}
# issue 33's targets at 16 threads against 1 (speedups), and for the CG iteration's time
# against its bandwidth bound
BINNING = ("binning", "fit", "binning-grids", "binning-team", "binning-ranges", "ranges-work",
           "binning-huge")                                             # wall time
TOUCH = ("touch", "touch-huge")                                        # wall time
CORE = {"core": (2**28, 0), "core-l2": (2**26, 2**15)}                 # (steps, table words)
OPTIONAL = ("fit", "binning-grids", "binning-team", "binning-ranges", "ranges-work",
            "binning-huge",
            "touch", "touch-huge", "core", "core-l2", "transpose")     # not by default
TARGET_SPEEDUP = {"binning": 10.0, "cd-grid": 10.0, "cd-hogwild": 10.0}
TARGET_CG_BOUND = 2.0
TRIAD_MIN = 2**22       # triad arrays of at least this many doubles (32 MiB each)
TRIAD_REPEAT = 5


def _rusage():
    """(system CPU seconds, minor page faults) of this process so far, all threads."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_stime, r.ru_minflt


def _threads(text):
    out = sorted({int(v) for v in text.split(",") if v})
    if not out or out[0] < 1:
        raise ValueError(f"--threads: positive integers, got {text!r}")
    return out


def _stages(text):
    out = [v for v in text.split(",") if v]
    bad = [v for v in out if v not in STAGES]
    if bad or not out:
        raise ValueError(f"--stages: unknown {bad} (choose from {', '.join(STAGES)})")
    return out


def default_threads(cores):
    """1, 2, 4, ... below the core count, and the core count."""
    out, t = [], 1
    while t < cores:
        out.append(t)
        t *= 2
    out.append(cores)
    return out


def _int(text):
    return int(float(text))


def main(argv=None):
    p = parser(__doc__.split("\n\n")[0], n=4 * 10**6, quick_n=20000, d=16, grids=64, repeat=1)
    p.add_argument("--n-samples", dest="n", type=_int, help="rows, the same as --n")
    p.add_argument("--n-grids", dest="grids", type=int, help="R, the same as --grids")
    p.add_argument("--sigma", type=float, default=1.0, help="kernel width (default 1)")
    p.add_argument("--threads", type=_threads, default=None,
                   help="thread counts, comma separated (default 1, 2, 4, ... up to the "
                        "usable cores, and the core count)")
    p.add_argument("--stages", type=_stages, default=[s for s in STAGES if s not in OPTIONAL],
                   help=f"stages to time, from {','.join(STAGES)} (default all but "
                        f"{', '.join(OPTIONAL)})")
    p.add_argument("--iters", type=int, default=2,
                   help="k: each CG / CD measurement is one fit of 1 + k iterations / "
                        "epochs, the best of its k iterations / 1 + k epochs (default 2)")
    p.add_argument("--triad-min", type=_int, default=TRIAD_MIN,
                   help=f"smallest triad array, doubles (default {TRIAD_MIN})")
    p.add_argument("--out", default=None, help="directory for threads.md and threads.json "
                   "(rewritten after every thread count, so a killed run leaves its results)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds: start no further thread count after this long (the "
                        "skipped ones are named in the output)")
    args = p.parse_args(argv)
    if args.n is None:
        args.n = args._n_quick if args.quick else args._n_default
    cores = usable_cpus()
    if args.threads is None:
        args.threads = default_threads(cores)
    args.iters = max(1, args.iters)
    print_header("Thread scaling of every stage against the machine's memory bandwidth "
                 "(issue 33)", args)
    quiet()
    warnings.simplefilter("ignore")
    if max(args.threads) > cores:
        print(f"NOTE    : {max(args.threads)} threads on {cores} usable CPUs: the larger "
              "counts are oversubscribed.\n")

    bench = _Bench(args)
    t_start = time.perf_counter()
    bench.setup()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    for q in range(max(1, args.repeat)):
        for T in args.threads:
            if args.budget and time.perf_counter() - t_start > args.budget:
                bench.skipped.append(f"round {q + 1}, {T} thread(s)")
                continue
            bench.triad(T)
            for stage in args.stages:
                bench.measure(stage, T)
                print(f"   round {q + 1}, {T} thread(s), {stage}: "
                      f"{fmt_time(bench.best[stage].get(T, float('nan')))}  "
                      f"[{time.perf_counter() - t_start:.0f} s]", flush=True)
            if args.out:  # what is measured so far survives a timeout
                bench.write(args.out, quiet=True)
    if bench.skipped:
        print(f"NOTE    : --budget {args.budget:g} s reached; skipped: "
              f"{'; '.join(bench.skipped)}")
    bench.report()
    if args.out:
        bench.write(args.out)
    return 0


class _Bench:
    """The data, the fitted binning, the per-stage byte models and the best times."""

    def __init__(self, args):
        self.args = args
        self.best = {s: {} for s in STAGES}           # stage -> T -> best time (s)
        self.units = {s: 1 for s in STAGES}           # iterations / epochs of the last difference
        self.bw = {}                                  # T -> triad bytes/s (best)
        self.bytes = {}                               # stage -> bytes moved (model)
        self.info = {}
        self.fits = []                                # (stage, T, wall, per-unit times) raw
        self.kernels = {}                             # stage -> T -> kernel breakdown
        self.skipped = []                             # thread counts left out by --budget

    # ------------------------------------------------------------------------- set-up
    def setup(self):
        import rbcd

        a = self.args
        t0 = time.perf_counter()
        self.X = make_X(a.n, a.d, a.seed)
        self.y = make_regression_target(self.X, a.seed)
        self.y -= self.y.mean()
        # the binning the solvers run on (the same Z for any n_jobs), with its grid structure
        self.rb = rbcd.RandomBinning(n_grids=a.grids, sigma=a.sigma, random_state=a.seed,
                                     n_jobs=max(a.threads))
        self.Z, self.cols = self.rb.fit_transform(self.X, return_columns=True)
        N, D = self.Z.shape
        nnz = self.Z.nnz
        labels = getattr(self.cols, "grid_labels", None)
        label_bytes = sum(int(np.asarray(l).nbytes) for l in labels) if labels else 0
        idx = self.Z.indices.itemsize
        csc_idx = np.asarray(self.cols.indices).itemsize
        z_bytes = self.Z.data.nbytes + self.Z.indices.nbytes + self.Z.indptr.nbytes
        x_bytes = self.X.nbytes
        # byte models: what each stage's passes must move at least
        self.bytes = {
            # read X, write Z (indices, data, indptr)
            "binning": x_bytes + z_bytes,
            "binning-grids": x_bytes + z_bytes,
            "binning-team": x_bytes + z_bytes,
            "binning-ranges": x_bytes + z_bytes,
            "ranges-work": x_bytes + z_bytes,
            "binning-huge": x_bytes + z_bytes,
            # written once (the first touch also zeroes each page in the kernel: not counted)
            "touch": self.Z.data.nbytes + self.Z.indices.nbytes,
            "touch-huge": self.Z.data.nbytes + self.Z.indices.nbytes,
            # no memory traffic: no bound
            "core": 0,
            "core-l2": 0,
            # read X (once per group of grids; counted once)
            "fit": x_bytes,
            "transform": x_bytes + z_bytes,
            # Z p and Z^T u over the labels (each read once per product; CSR/CSC indices
            # without them), and the row vectors: Z p written, read and written by the
            # centring, summed, read by Z^T (5 passes of N doubles)
            "cg": (2 * label_bytes if label_bytes else nnz * (idx + csc_idx)) + 5 * N * 8,
            # the streamed grid step: per grid one pass over u (read and write) that also
            # reads the pending grid's and the next grid's labels (each grid's labels read
            # twice); the convergence check's pass over the CSC row indices and u
            "cd-grid": (2 * label_bytes if label_bytes else nnz * csc_idx)
                       + a.grids * N * 16 + nnz * csc_idx + N * 8,
            # D coordinate steps: each reads its column's row indices and reads and writes
            # u on them (8 + 8 bytes per entry, counted as if streamed), and the check
            "cd-hogwild": nnz * (csc_idx + 16) + nnz * csc_idx + N * 8,
            # read the CSR indices (twice: count, scatter) and values, write the CSC ones
            "transpose": nnz * (2 * idx + 8) + nnz * (idx + 8),
        }
        self.info = {"N": N, "D": D, "nnz": int(nnz), "label_bytes": label_bytes,
                     "labels": bool(label_bytes), "csr_index_bytes": idx,
                     "csc_index_bytes": csc_idx, "X_bytes": x_bytes, "Z_bytes": z_bytes,
                     "setup_s": time.perf_counter() - t0}
        # the lasso penalty: 1% of alpha_max (no intercept), as benchmarks/compare_cd.py
        g = np.abs(self._Zt_y()) / N
        self.alpha = 0.01 * float(np.max(g)) if g.size else 1e-4
        self.rb_new = None
        print(f"data    : N = {N:,}, d = {a.d}, R = {a.grids}, sigma = {a.sigma}: D = {D:,}, "
              f"nnz = {nnz:,}, grid labels {'yes' if label_bytes else 'no'} "
              f"({label_bytes / 2**20:,.0f} MiB); set-up {self.info['setup_s']:.1f} s\n",
              flush=True)

    def _Zt_y(self):
        from rbcd.solvers.cg import _Products

        op = _Products(self.Z, max(self.args.threads), columns=self.cols)
        return op.tdot(self.y[:, None])[:, 0]

    # ------------------------------------------------------------------------- timing
    def triad(self, T):
        from rbcd._openmp_info import first_touch, stream_triad

        n = max(self.args.n, self.args.triad_min)
        arrays = [np.empty(n) for _ in range(3)]
        for x, v in zip(arrays, (0.0, 1.0, 2.0)):
            first_touch(x, v, T)
        a, b, c = arrays
        best = np.inf
        for _ in range(TRIAD_REPEAT):
            t0 = time.perf_counter()
            stream_triad(a, b, c, 3.0, T)
            best = min(best, time.perf_counter() - t0)
        if a[n // 2] != 7.0:
            raise RuntimeError("stream_triad computed a wrong value")
        self.bw[T] = max(self.bw.get(T, 0.0), 3 * 8 * n / best)
        del arrays, a, b, c

    def _touch(self, T, huge):
        """Seconds for T threads to write fresh memory of Z's size (indices and data) once,
        on 4 KiB pages or advised as 2 MiB pages (``_binning.empty``; the arrays freed
        after)."""
        from rbcd.binning import _binning

        n = (self.Z.data.nbytes + self.Z.indices.nbytes) // 8
        t0 = time.perf_counter()
        a = _binning.empty(n, np.float64, huge=huge)
        _binning.fill_constant(a, 1.0, T)
        t = time.perf_counter() - t0
        if a[n // 2] != 1.0:
            raise RuntimeError("fill_constant wrote a wrong value")
        del a
        return t

    @staticmethod
    def _core(T, steps, table_words):
        """Seconds for ``core_work(steps, T, table_words)`` (T threads, one chain each)."""
        from rbcd._openmp_info import core_work

        t0 = time.perf_counter()
        core_work(steps, T, table_words)
        return time.perf_counter() - t0

    def _binning_huge(self, T):
        """``binning-grids`` with every array the binning allocates through
        ``_binning.empty`` (the fit's ids, Z's data) advised as 2 MiB pages: the library's
        module attribute swapped for the one measurement, then restored."""
        import rbcd
        from rbcd.binning import _binning
        from rbcd.binning._plan import _Paths

        a = self.args
        plain = _binning.empty
        _binning.empty = lambda n, dtype, huge=True: plain(n, dtype, huge=huge)
        try:
            rb = rbcd.RandomBinning(n_grids=a.grids, sigma=a.sigma, random_state=a.seed,
                                    n_jobs=T)
            t0 = time.perf_counter()
            Z = rb.fit_transform(self.X, _paths=_Paths(ranges=0, team=False))
            t = time.perf_counter() - t0
        finally:
            _binning.empty = plain
        del Z, rb
        return t

    def _keep(self, stage, T, t, units=1):
        if t == t and t > 0 and t < self.best[stage].get(T, np.inf):
            self.best[stage][T] = t
            self.units[stage] = units

    def measure(self, stage, T):
        """Time ``stage`` at T threads under a KernelProbe (benchmarks/_probe.py): binning
        and transform by their wall time; a CG iteration as the time between the ends of
        two successive ``cg_direction`` calls (the last kernel of an iteration) of one fit
        of 1 + k iterations, a CD epoch as one ``CDProblem.epoch`` call of a fit of 1 + k
        epochs; the best of the k (or 1 + k) in either case. The kernels' own times are
        kept as the stage's breakdown (``self.kernels``)."""
        import rbcd
        from rbcd.binning._plan import _Paths

        a = self.args
        k = a.iters
        ru0 = _rusage()
        with KernelProbe() as probe:
            t0 = time.perf_counter()
            if stage in TOUCH:
                units = [self._touch(T, huge=stage == "touch-huge")]
            elif stage == "transpose":
                # what RidgeCG / the CD solvers do with a Z given without columns=
                from rbcd.solvers._columns import to_csc

                C = to_csc(self.Z, T)
                units = [time.perf_counter() - t0]
                del C
            elif stage in CORE:
                units = [self._core(T, *CORE[stage]) for _ in range(3)]
            elif stage == "binning-huge":
                units = [self._binning_huge(T)]
            elif stage in BINNING:
                rb = rbcd.RandomBinning(n_grids=a.grids, sigma=a.sigma, random_state=a.seed,
                                        n_jobs=1 if stage == "ranges-work" else T)
                if stage == "fit":
                    Z = rb.fit(self.X)
                elif stage == "binning":
                    Z = rb.fit_transform(self.X)
                else:
                    Z = rb.fit_transform(self.X, _paths=_Paths(
                        ranges=T if stage in ("binning-ranges", "ranges-work") else 0,
                        team=stage == "binning-team"))
                units = [time.perf_counter() - t0]
                del Z, rb  # (freeing Z is not part of the time)
            elif stage == "transform":
                self.rb.set_params(n_jobs=T)
                Z = self.rb.transform(self.X)
                units = [time.perf_counter() - t0]
                del Z
            elif stage == "cg":
                est = rbcd.RidgeCG(alpha=1.0, tol=0.0, max_iter=1 + k, n_jobs=T)
                if "solver" in est.get_params():
                    est.set_params(solver="cg")  # never a direct solve
                est.fit(self.Z, self.y, columns=self.cols)
                units = probe.periods("cg_direction")
            else:
                est = rbcd.CDRegressor(alpha=self.alpha, l1_ratio=1.0, fit_intercept=False,
                                       max_epochs=1 + k, tol=0.0, selection="random",
                                       parallel="grid" if stage == "cd-grid" else "hogwild",
                                       n_jobs=T, random_state=a.seed)
                est.fit(self.Z, self.y, columns=self.cols)
                units = probe.durations("CDProblem.epoch")
            wall = time.perf_counter() - t0
        if stage in BINNING or stage in TOUCH or stage == "transform":
            wall = units[0]
        elif stage in CORE:
            wall = min(units)
        sys_s, faults = (b - a for a, b in zip(ru0, _rusage()))
        self.fits.append({"stage": stage, "threads": T, "wall_s": wall, "units_s": units})
        if units:
            self._keep(stage, T, min(units), len(units))
        per_unit = max(1, len(units)) if stage in ("cg", "cd-grid", "cd-hogwild") else 1
        self.kernels.setdefault(stage, {})
        # the kernels of the best round (per iteration / epoch for the iterative stages)
        if units and min(units) <= self.best[stage].get(T, np.inf):
            self.kernels[stage][T] = {
                "wall_s": wall / per_unit,
                # over the whole measurement (a fit of 1 + k units for CG / CD)
                "sys_s": sys_s, "minor_faults": int(faults),
                "kernels": {n: [c / per_unit, s / per_unit]
                            for n, (c, s) in probe.totals().items()},
            }

    # ------------------------------------------------------------------------- output
    def write(self, out, quiet=False):
        """DIR/threads.md and DIR/threads.json from what is measured so far."""
        md = self._markdown(*self._table_inputs(), self._summary())
        write_text(os.path.join(out, "threads.md"), md)
        write_json(os.path.join(out, "threads.json"), self.as_json(), indent=1)
        if not quiet:
            print(f"wrote {os.path.join(out, 'threads.md')} and threads.json")

    def _table_inputs(self):
        threads = sorted(self.bw)
        stages = [s for s in self.args.stages if self.best[s]]
        # speedups over the fewest threads (nan where that count has no time)
        base = {s: self.best[s].get(threads[0], float("nan")) for s in stages}
        return threads, stages, base

    def _summary(self):
        """The issue's targets at the largest thread count (from 16 threads on)."""
        threads, stages, base = self._table_inputs()
        summary = []
        top = threads[-1] if threads else 0
        for s in stages:
            t = self.best[s].get(top, float("nan"))
            sp = base[s] / t if t == t and t > 0 else float("nan")
            if s in TARGET_SPEEDUP and top >= 16:
                summary.append(f"{TITLES[s]}: {sp:.2f}x at {top} threads "
                               f"(target >= {TARGET_SPEEDUP[s]:.0f}x)")
            if s == "cg" and top >= 16:
                summary.append(f"{TITLES[s]}: {t / (self.bytes[s] / self.bw[top]):.2f} x "
                               f"bound at {top} threads (target <= {TARGET_CG_BOUND:.0f}x)")
        return summary

    def report(self):
        """Print the tables (times, speedups, time / bound; the byte models) and targets."""
        threads, stages, base = self._table_inputs()
        rows = []
        for T in threads:
            row = [str(T), f"{self.bw[T] / 1e9:.1f} GB/s"]
            for s in stages:
                t = self.best[s].get(T, float("nan"))
                sp = base[s] / t if t == t and t > 0 else float("nan")
                if self.bytes[s]:
                    bound = self.bytes[s] / self.bw[T]
                    row.append(f"{fmt_time(t)} ({fmt_ratio(sp)}; {t / bound:.2f} x bound)"
                               if t == t else "n/a")
                else:
                    row.append(f"{fmt_time(t)} ({fmt_ratio(sp)})" if t == t else "n/a")
            rows.append(row)
        print()
        table(rows, ["threads", "triad"] + [TITLES[s] for s in stages])
        if threads:
            table([[TITLES[s], fmt_bytes(self.bytes[s]),
                    f"{self.bytes[s] / self.bw[threads[0]] * 1e3:.1f} ms",
                    f"{self.bytes[s] / self.bw[threads[-1]] * 1e3:.1f} ms"]
                   for s in stages if self.bytes[s]],
                  ["stage", "bytes (model)", f"bound at {threads[0]} thread(s)",
                   f"bound at {threads[-1]} thread(s)"])
        for line in self._summary():
            print(line)
        for line in self._breakdown_lines():
            print(line)
        note("Each cell: the best time over the rounds, its speedup over the fewest "
             "threads, and time / bound, where bound = the stage's bytes (model above) / "
             "the triad bandwidth measured at that thread count in this run. CG iteration "
             "and CD epoch times are single iterations / epochs cut out of one fit "
             "(benchmarks/_probe.py). Hogwild's random accesses to u are counted as streamed bytes, so its "
             "bound is optimistic.")

    def _breakdown_lines(self, top=4):
        """Markdown: per stage and thread count, the wall time (per iteration / epoch for
        the iterative stages), the kernels that take most of it, and the glue."""
        lines = []
        for s in self.args.stages:
            per_T = self.kernels.get(s, {})
            if not per_T:
                continue
            if not lines:
                lines = ["", "Kernel breakdown (the best round; per iteration / epoch for the "
                         "iterative stages; glue = wall time outside the compiled kernels; "
                         "system time and page faults: the process's, all threads, over the "
                         "whole measurement):", ""]
            lines.append(f"- {TITLES[s]}:")
            for T, rec in sorted(per_T.items()):
                ks = list(rec["kernels"].items())
                inside = sum(v[1] for _, v in ks)
                parts = [f"{n} {fmt_time(v[1])}" + (f" x{v[0]:g}" if v[0] != 1 else "")
                         for n, v in ks[:top]]
                glue = max(0.0, rec["wall_s"] - inside)
                faults = (f"; system time {fmt_time(rec['sys_s'])}, "
                          f"{rec['minor_faults']:,} page faults (whole measurement)"
                          if "sys_s" in rec else "")
                lines.append(f"  - {T} thread(s): wall {fmt_time(rec['wall_s'])}; "
                             + "".join(p + "; " for p in parts) + f"glue {fmt_time(glue)}"
                             + faults)
        return lines

    def _markdown(self, threads, stages, base, summary):
        a, inf = self.args, self.info
        lines = [
            "# Thread scaling (benchmarks/compare_threads.py)",
            "",
            f"Machine: {cpu_model()}, {usable_cpus()} usable CPUs, "
            f"{platform.system()} {platform.release()}. X uniform on [0, 1)^{a.d}, "
            f"N = {inf['N']:,}, R = {a.grids}, sigma = {a.sigma}: D = {inf['D']:,}, "
            f"nnz = {inf['nnz']:,}. Best of {max(1, a.repeat)} round(s); CG / CD: "
            f"the best single iteration / epoch of fits of {1 + a.iters}.",
            "",
            "Speedups over " + (f"{threads[0]} thread" + ("s" if threads[0] > 1 else ""))
            + "; in brackets time / bound (bound = bytes / triad bandwidth at that "
            "thread count, measured in the same run).",
            "",
            "| threads | triad | " + " | ".join(TITLES[s] for s in stages) + " |",
            "|---|---|" + "---|" * len(stages),
        ]
        for T in threads:
            cells = []
            for s in stages:
                t = self.best[s].get(T, float("nan"))
                if t != t:
                    cells.append("n/a")
                    continue
                bound = f" ({t / (self.bytes[s] / self.bw[T]):.2f})" if self.bytes[s] else ""
                if T == threads[0]:
                    cells.append(f"{fmt_time(t)}{bound}")
                else:
                    cells.append(f"{fmt_ratio(ratio(base[s], t))}, {fmt_time(t)}{bound}")
            lines.append(f"| {T} | {self.bw[T] / 1e9:.1f} GB/s | " + " | ".join(cells) + " |")
        lines += ["", "Bytes per stage (the model the bound divides):", ""]
        for s in stages:
            if self.bytes[s]:
                lines.append(f"- {TITLES[s]}: {fmt_bytes(self.bytes[s])}")
        if summary:
            lines += [""] + [f"- {s}" for s in summary]
        lines += self._breakdown_lines()
        if self.skipped:
            lines += ["", f"Not measured (--budget reached): {'; '.join(self.skipped)}."]
        return "\n".join(lines) + "\n"

    def as_json(self):
        a = self.args
        return {
            "machine": {"cpu": cpu_model(), "usable_cpus": usable_cpus(),
                        "system": f"{platform.system()} {platform.release()}"},
            "options": {k: v for k, v in vars(a).items() if not k.startswith("_")},
            "data": self.info,
            "triad_bytes_per_s": {str(T): v for T, v in sorted(self.bw.items())},
            "bytes": self.bytes,
            "seconds": {s: {str(T): t for T, t in sorted(v.items())}
                        for s, v in self.best.items() if v},
            "units_measured": {s: self.units[s] for s in STAGES if self.best[s]},
            "kernels": {s: {str(T): v for T, v in sorted(d.items())}
                        for s, d in self.kernels.items()},
            "fits": self.fits,
            "skipped": self.skipped,
        }


if __name__ == "__main__":
    sys.exit(main())
