"""rbcd.dask on a 2-worker LocalCluster against the single-process estimators.

    python benchmarks/compare_dask.py                  # N = 4 x 10^6, d = 8, R = 64
    python benchmarks/compare_dask.py --quick          # N = 10^5: a smoke run
    python benchmarks/compare_dask.py --n 1000000 --solvers cg --workers 2 --threads 1

Same data on both sides (make_X / make_regression_target of _common.py; the workers generate
their own rows of X from the same stream, so X never passes through the driver). Prints,
each beside its target:
  - fit and predict wall time of RBRegressor(solver="cg") and (solver="cd", a fixed number
    of epochs) in one process with --workers x --threads threads, and on the cluster;
    the ratio cluster / single process (targets: cg <= 1.5x, cd <= 2.5x)
  - peak resident memory of the single process (a child interpreter, less a child that
    only builds X), and of each worker during the fit (its high-water mark reset after X
    is loaded); target: each worker <= single / n_workers + a constant
  - the largest difference of the predictions (equal up to the solvers' rounding)
  - round-trip latency of a task (submit + gather, one per worker) and of an actor call,
    the constants of the cost model in docs/dask.md
  - the thread CPU time per stored entry of Z of the CG operator on the workers (with the
    grid labels and with scipy) and of the local RidgeCG operator (c_cg of docs/dask.md)

Run it on a quiet machine: the cluster and the single process are timed one after the other.
"""
import json
import os
import sys
import time

import numpy as np

from _common import (
    check,
    child_maxrss,
    fmt_bytes,
    fmt_ratio,
    fmt_time,
    make_regression_target,
    make_X,
    note,
    parser,
    print_header,
    resolve_n,
    table,
)

TARGET_CG = 1.5
TARGET_CD = 2.5


def x_rows(n, d, seed, lo, hi):
    """Rows lo:hi of make_X(n, d, seed): the same stream, advanced (random() takes one
    64-bit draw per double)."""
    bg = np.random.PCG64(np.random.SeedSequence([seed, n, d]))
    bg.advance(lo * d)
    return np.random.Generator(bg).random((hi - lo, d))


def model_params(solver, args):
    p = dict(n_grids=args.grids, sigma=args.sigma, solver=solver, random_state=args.seed)
    if solver == "cd":
        # cyclic: grids in the order 0 .. R-1 on both sides, so the iterates are the same
        # up to rounding after a fixed number of epochs
        p.update(alpha=args.cd_alpha, max_epochs=args.epochs, tol=0.0, selection="cyclic",
                 parallel="grid")
    return p


SINGLE = r"""
import time, warnings
import numpy as np
import rbcd
warnings.simplefilter("ignore")
y = _common.make_regression_target(X, {seed})
m = rbcd.RBRegressor(n_jobs={threads}, **{params!r})
cpu = {{}}
_fit_transform = rbcd.RandomBinning.fit_transform
def _timed(self, *a, **k):
    out = _fit_transform(self, *a, **k)
    cpu["binning"] = time.process_time() - c0
    return out
rbcd.RandomBinning.fit_transform = _timed
c0 = time.process_time()
t0 = time.perf_counter(); m.fit(X, y); t1 = time.perf_counter()
cpu["solver"] = time.process_time() - c0 - cpu["binning"]
pred = m.predict(X); t2 = time.perf_counter()
np.save({out!r}, pred)
extra = {{"fit": t1 - t0, "predict": t2 - t1, "n_iter": np.asarray(m.n_iter_).tolist(),
          "D": int(m.binning_.n_features_out_), "split": m.fit_time_, "cpu": cpu}}
"""


def run_single(args, solver, out):
    code = SINGLE.format(seed=args.seed, threads=args.workers * args.threads,
                         params=model_params(solver, args), out=out)
    peak, extra = child_maxrss(args.n, args.d, args.seed, code)
    base, _ = child_maxrss(args.n, args.d, args.seed, "y = _common.make_regression_target(X, %d)" % args.seed)
    return extra, peak, base


def _rss(dask_worker=None):
    with open("/proc/self/status") as f:
        vals = dict(line.split(":", 1) for line in f if line.startswith(("VmHWM", "VmRSS")))
    return {k: int(v.split()[0]) * 1024 for k, v in vals.items()}


def _reset_peak(dask_worker=None):
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")   # resets VmHWM to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


class _Echo:
    def ping(self, x):
        return x


def latencies(client, reps):
    """Median seconds of a round trip: one trivial task per worker (submit + gather), and
    one actor call per worker (all at once, then all results)."""
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    payload = np.zeros(8)
    task = []
    for i in range(reps):
        t0 = time.perf_counter()
        futs = [client.submit(np.add, payload, i, workers=[w], pure=False) for w in workers]
        client.gather(futs)
        task.append(time.perf_counter() - t0)
    actors = [client.submit(_Echo, workers=[w], actor=True).result() for w in workers]
    act = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for f in [a.ping(payload) for a in actors]:
            f.result()
        act.append(time.perf_counter() - t0)
    return float(np.median(task)), float(np.median(act))


def _operator_cpu(block, P, zP, reps):
    """Thread CPU seconds per stored entry of one partition's share of the CG operator
    (median of ``reps``), measured in the task on its worker: load-independent enough
    to compare kernels on a busy machine (it still shares caches and memory bandwidth)."""
    from rbcd.dask.cg import block_operator

    if block.n == 0:
        return None
    block_operator(block, P, zP)
    times = []
    for _ in range(reps):
        t0 = time.thread_time()
        block_operator(block, P, zP)
        times.append(time.thread_time() - t0)
    entries = block.grid.indices.shape[0] if block.grid is not None else block.Z.nnz
    return float(np.median(times)) / entries


def operator_cpu_cluster(args, client, Xd, y):
    """Per-entry thread CPU time of the CG operator on the workers, with the grid labels
    (``columns=``, the local kernels) and without (scipy): the constant c_cg of docs/dask.md."""
    import rbcd.dask as rd
    from rbcd.dask._blocks import build_blocks, regression_targets

    Zd, cols = rd.RandomBinning(n_grids=args.grids, sigma=args.sigma,
                                random_state=args.seed).fit_transform(Xd, return_columns=True)
    D = int(cols.n_columns)
    P = np.random.default_rng(1).normal(size=(D, 1))
    zP = np.array([0.25])
    out = {}
    for name, c in (("labels", cols), ("scipy", None)):
        cluster = build_blocks(client, Zd, y, None, regression_targets, c)[0]
        per = client.gather([client.submit(_operator_cpu, b, P, zP, args.cpu_reps, pure=False)
                             for b in cluster.blocks])
        out[name] = float(np.median([v for v in per if v is not None]))
        del cluster
    return out


def operator_cpu_local(args, n_rows):
    """The same for the local RidgeCG operator (rbcd.solvers.cg._Products with the RBColumns,
    one thread) on the first ``n_rows`` rows: T = Z P - zP; Z^T T; 1^T T."""
    import rbcd
    from rbcd.solvers.cg import _Products

    X = x_rows(args.n, args.d, args.seed, 0, n_rows)
    Z, cols = rbcd.RandomBinning(n_grids=args.grids, sigma=args.sigma,
                                 random_state=args.seed).fit_transform(X, return_columns=True)
    op = _Products(Z, 1, columns=cols)
    P = np.random.default_rng(1).normal(size=(Z.shape[1], 1))
    times = []
    for _ in range(args.cpu_reps + 1):
        t0 = time.thread_time()
        T = op.dot(P)
        T -= 0.25
        op.tdot(T)
        T.sum(axis=0)
        times.append(time.thread_time() - t0)
    return float(np.median(times[1:])) / Z.nnz


class _Phases:
    """Per-phase measurements of a distributed fit, made by wrapping (in this process only)
    the three places where rbcd.dask talks to its workers: the binning
    (RandomBinning.fit_transform, waited for so that the phase ends with Z on the workers),
    the CG round trips (rbcd.dask._blocks.Cluster.map) and the CD solve (rbcd.dask.cd._Actors
    .solve: one call to the coordinating actor, which reports its messages to the other
    actors). For each phase: wall time, driver CPU time, each worker's CPU time
    (``client.run(time.process_time)``), round trips, bytes sent to and received from the
    workers (numpy payloads; CD: between the coordinating worker and the others)."""

    def __init__(self, client):
        self.client = client
        self.done = {}
        self.current = None

    def _cpu(self):
        return self.client.run(time.process_time)

    def start(self, name):
        self.current = {"name": name, "wall": time.perf_counter(), "driver": time.process_time(),
                        "workers": self._cpu(), "trips": 0, "sent": 0, "received": 0}

    def stop(self):
        c = self.current
        w1 = self._cpu()
        self.done[c["name"]] = {
            "wall": time.perf_counter() - c["wall"], "driver": time.process_time() - c["driver"],
            "workers": [w1[k] - c["workers"][k] for k in sorted(w1)],
            "trips": c["trips"], "sent": c["sent"], "received": c["received"]}
        self.current = None

    def count(self, trips, sent, received):
        if self.current is not None:
            self.current["trips"] += trips
            self.current["sent"] += sent
            self.current["received"] += received

    def install(self):
        """The wrappers; returns a function that removes them."""
        from distributed import wait

        import rbcd.dask.binning as B
        import rbcd.dask._blocks as CG
        import rbcd.dask.cd as CD

        orig = (B.RandomBinning.fit_transform, B._merge_partitions, CG.Cluster.map,
                CD._Actors.solve)
        phases = self

        def fit_transform(est, *a, **k):
            phases.start("binning")
            out = orig[0](est, *a, **k)
            wait(out[0] if isinstance(out, tuple) else out)
            phases.stop()
            phases.start("solver")
            return out

        def merge(summaries, rb, R):
            tables, counts, D = orig[1](summaries, rb, R)
            # the two round trips of the exact binning: summaries in, tables out
            phases.count(2, sum(t.nbytes for t in tables if t is not None),
                         _nbytes(summaries))
            return tables, counts, D

        def cmap(cluster, func, *args, fold=None):
            if fold is None:
                out = orig[2](cluster, func, *args)
                received = _nbytes(out)
            else:   # the partitions' results are folded as they come: count each one
                got = []

                def counted(acc, result):
                    got.append(_nbytes(result))
                    return fold(acc, result)

                out = orig[2](cluster, func, *args, fold=counted)
                received = sum(got)
            phases.count(1, _nbytes(args) * len(cluster.blocks), received)
            return out

        def solve(act, *args, **kwargs):
            out = orig[3](act, *args, **kwargs)
            # the driver's call to the coordinating actor, and its messages to the others
            m = out["messages"]
            phases.count(1 + m["round_trips"], m["sent"], m["received"] + _nbytes(out["w"]))
            return out

        B.RandomBinning.fit_transform = fit_transform
        B._merge_partitions = merge
        CG.Cluster.map = cmap
        CD._Actors.solve = solve

        def remove():
            (B.RandomBinning.fit_transform, B._merge_partitions, CG.Cluster.map,
             CD._Actors.solve) = orig

        return remove


def _nbytes(obj):
    """Bytes of the numpy arrays in a (nested) tuple / list / dict (the payload)."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(v) for v in obj)
    return 8 if isinstance(obj, (int, float)) else 0


def run_cluster(args, solver, client, Xd, y):
    import rbcd.dask as rd

    client.run(_reset_peak)
    before = client.run(_rss)
    m = rd.RBRegressor(n_jobs=None, **model_params(solver, args))
    phases = _Phases(client)
    remove = phases.install()
    try:
        t0 = time.perf_counter()
        m.fit(Xd, y)
        t1 = time.perf_counter()
        phases.stop()
    finally:
        remove()
    # the fit's peak, read before predict: the fit's blocks are released asynchronously,
    # so a predict right after the fit can overlap them (its peak is reported apart)
    after_fit = client.run(_rss)
    t1p = time.perf_counter()
    pred = m.predict(Xd).compute()
    t2 = time.perf_counter()
    after = client.run(_rss)
    peaks = {w: after_fit[w]["VmHWM"] for w in after_fit}
    base = {w: before[w]["VmRSS"] for w in before}
    return dict(fit=t1 - t0, predict=t2 - t1p, n_iter=np.asarray(m.n_iter_).tolist(),
                D=int(m.binning_.n_features_out_), split=m.fit_time_, phases=phases.done,
                peak_with_predict={w: after[w]["VmHWM"] - base[w] for w in after}), \
        peaks, base, pred


def phase_rows(solver, single, dist):
    """Table rows of the per-phase breakdown (module docstring)."""
    rows = []
    for part in ("binning", "solver"):
        ph = dist["phases"][part]
        cpu_local = single["cpu"][part]
        wmax = max(ph["workers"]) if ph["workers"] else 0.0
        rows.append([solver, part, fmt_time(single["split"][part]), fmt_time(cpu_local),
                     fmt_time(ph["wall"]), fmt_time(ph["driver"]),
                     " ".join(fmt_time(v) for v in ph["workers"]),
                     fmt_ratio((wmax + ph["driver"]) / max(cpu_local / 2, 1e-9)),
                     str(ph["trips"]), fmt_bytes(ph["sent"]), fmt_bytes(ph["received"])])
    return rows


def main():
    p = parser(__doc__, n=4 * 10**6, quick_n=10**5, d=8, grids=64, repeat=1)
    p.add_argument("--sigma", type=float, default=1.0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="threads per worker (default 1)")
    p.add_argument("--partitions", type=int, default=None,
                   help="row partitions of X (default: one per worker)")
    p.add_argument("--solvers", default="cg,cd")
    p.add_argument("--epochs", type=int, default=10, help="CD epochs (tol=0)")
    p.add_argument("--cd-alpha", type=float, default=1e-4)
    p.add_argument("--latency-reps", type=int, default=200)
    p.add_argument("--cpu-reps", type=int, default=5,
                   help="repetitions of the per-entry CPU time of the CG operator (0: skip)")
    args = p.parse_args()
    n = resolve_n(args)
    print_header("rbcd.dask vs one process", args)

    import dask.array as da
    from distributed import Client, LocalCluster

    X_check = x_rows(min(n, 1000), args.d, args.seed, 0, min(n, 1000))
    assert np.array_equal(X_check, make_X(min(n, 1000), args.d, args.seed)), "stream mismatch"
    y = make_regression_target(make_X(n, args.d, args.seed), args.seed)

    parts = args.partitions or args.workers
    step = -(-n // parts)
    bounds = [(lo, min(lo + step, n)) for lo in range(0, n, step)]
    import rbcd

    # worker processes and the single-process child import the rbcd this script imported
    root = os.path.dirname(os.path.dirname(os.path.abspath(rbcd.__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    rows = []
    results = {}
    singles = {}
    with LocalCluster(n_workers=args.workers, threads_per_worker=args.threads, processes=True,
                      memory_limit=0, dashboard_address=None) as cluster, Client(cluster) as client:
        import dask

        blocks = [da.from_delayed(dask.delayed(x_rows)(n, args.d, args.seed, lo, hi),
                                  shape=(hi - lo, args.d), dtype=np.float64) for lo, hi in bounds]
        Xd = da.concatenate(blocks).persist()
        from distributed import wait

        wait(Xd)
        client.run(lambda: __import__("rbcd.dask.models"))   # imports are not the fit's cost
        t_task, t_actor = latencies(client, args.latency_reps)
        for solver in args.solvers.split(","):
            results[solver] = run_cluster(args, solver, client, Xd, y)
        cpu = operator_cpu_cluster(args, client, Xd, y) if args.cpu_reps > 0 else None
    for solver in args.solvers.split(","):
        out = os.path.join("/tmp", f"rbcd_compare_dask_{os.getpid()}_{solver}.npy")
        single, peak, base = run_single(args, solver, out)
        singles[solver] = single
        local_pred = np.load(out)
        os.remove(out)
        dist, peaks, wbase, pred = results[solver]
        target = TARGET_CG if solver == "cg" else TARGET_CD
        r_fit = dist["fit"] / single["fit"]
        rows.append([solver, "fit", fmt_time(single["fit"]), fmt_time(dist["fit"]),
                     fmt_ratio(r_fit), f"<= {target}x {check(r_fit, target, False)}"])
        for part in ("binning", "solver"):
            a, b = single["split"][part], dist["split"][part]
            rows.append([solver, f"  fit: {part}", fmt_time(a), fmt_time(b), fmt_ratio(b / a), ""])
        rows.append([solver, "predict", fmt_time(single["predict"]), fmt_time(dist["predict"]),
                     fmt_ratio(dist["predict"] / single["predict"]), ""])
        single_mem = peak - base
        for w in sorted(peaks):
            extra = peaks[w] - wbase[w]
            bound = single_mem / args.workers
            rows.append([solver, f"peak +RSS fit {w[-6:]}", fmt_bytes(single_mem),
                         fmt_bytes(extra), fmt_ratio(extra / max(bound, 1)),
                         "<= 1/n_workers of single + const"])
        worst = max(dist["peak_with_predict"].values())
        rows.append([solver, "peak +RSS fit+predict", fmt_bytes(single_mem), fmt_bytes(worst),
                     fmt_ratio(worst / max(single_mem / args.workers, 1)), "largest worker"])
        diff = float(np.max(np.abs(pred - local_pred)))
        rows.append([solver, "max |pred diff|", "", f"{diff:.3g}", "", ""])
        rows.append([solver, "iterations / D", f"{single['n_iter']} / {single['D']}",
                     f"{dist['n_iter']} / {dist['D']}", "", ""])
    table(rows, ["solver", "what", "1 process", "cluster", "ratio", "target"])
    prow = []
    for solver in args.solvers.split(","):
        prow += phase_rows(solver, singles[solver], results[solver][0])
    table(prow, ["solver", "phase", "1 proc wall", "1 proc CPU", "cluster wall", "driver CPU",
                 "worker CPU", "CPU ratio", "round trips", "sent", "received"])
    note("Per phase of the cluster fit: the CPU time of the driver and of each worker "
         "(process CPU time: load-independent), the round trips between driver and workers "
         "(task gathers and actor calls), and the numpy bytes sent and received. CPU ratio: "
         "(largest worker CPU + driver CPU) / (single-process CPU / 2), the ratio a quiet "
         "2-core machine would show if the single process used both threads fully.")
    print(f"round trip: task (submit + gather, one per worker) {t_task * 1e3:.2f} ms, "
          f"actor call {t_actor * 1e3:.2f} ms (median of {args.latency_reps})")
    note("peak +RSS: the high-water mark of resident memory less the resident memory before "
         "the fit (workers: reset after X was loaded, read after the fit, and again after "
         "predict, which can overlap the fit's blocks while dask releases them; single "
         "process: fit and predict, a child that only builds X and y is subtracted). The "
         "single process runs "
         f"{args.workers * args.threads} threads; each worker {args.threads}.")
    summary = {"task_rtt": t_task, "actor_rtt": t_actor,
               "phases": {sv: results[sv][0]["phases"] for sv in args.solvers.split(",")},
               "single_cpu": {sv: singles[sv]["cpu"] for sv in args.solvers.split(",")}}
    if cpu is not None:
        cpu["local"] = operator_cpu_local(args, bounds[0][1] - bounds[0][0])
        print(f"CG operator, thread CPU time per stored entry of Z (median of {args.cpu_reps}; "
              f"one partition per task): workers with columns= {cpu['labels'] * 1e9:.2f} ns, "
              f"workers without (scipy) {cpu['scipy'] * 1e9:.2f} ns, local RidgeCG operator "
              f"(one thread, first partition's rows) {cpu['local'] * 1e9:.2f} ns")
        summary["cg_operator_cpu_per_entry"] = cpu
    print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
