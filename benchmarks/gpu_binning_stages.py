"""Where a GPU binning fit spends its time (issue 32): the stages of rbcd.cuda.binning's
loop over batches of grids (as fit_layout forms them), each timed after a device
synchronisation, on the compare_gpu problem.

    python benchmarks/gpu_binning_stages.py --n 1e7 --grids 64        # on a GPU
    python benchmarks/gpu_binning_stages.py --xp numpy --n 20000       # dry run

Stages of one batch or grid (docs/gpu.md): ``keys`` (rb_batch_keys: the packed (grid,)
key, row words; a grid alone gets its words with the next KEY_GROUP - 1 such grids'),
``sort`` (xp.sort of those words), ``number``
(_segment_ids and _number_batch: segments, first-appearance ranks, labels
and CSC rows written into the layout, keys by id), ``store`` (its keys and largest bins to
the host; fit_layout does this once after the loop). The
synchronisations add a little to the whole; ``fit_layout`` is also timed as the estimator
runs it (no synchronisation inside), which is the figure compare_gpu reports.
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import compare_gpu  # noqa: E402 (its problem and sync)
from rbcd import RandomBinning  # noqa: E402
from rbcd.cuda import _ops, binning as cb  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=float, default=1e7)
    p.add_argument("--d", type=int, default=16)
    p.add_argument("--grids", type=int, default=64)
    p.add_argument("--xp", choices=["cupy", "numpy"], default="cupy")
    a = p.parse_args()
    xp = np if a.xp == "numpy" else _ops.cupy_module()
    n = int(a.n)

    def sync():
        compare_gpu.sync(xp)

    X = compare_gpu.make_data(xp, n, a.d, 0)[0]   # the benchmark's X
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cb.fit_layout(RandomBinning(n_grids=4, random_state=0), X[:2000], xp)  # warm-up
        est = RandomBinning(n_grids=a.grids, random_state=0)
        sync()
        t0 = time.perf_counter()
        layout = cb.fit_layout(est, X, xp)
        sync()
        whole = time.perf_counter() - t0
    # the CG iteration's pieces on this layout (issue 32: the iteration against its two
    # label passes), each synchronised; k = 1
    from rbcd.cuda import cg as ccg

    def clock_mean(f, reps=5):
        f()
        sync()
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        sync()
        return (time.perf_counter() - t0) / reps

    P = xp.ones((layout.n_columns, 1))
    T = xp.ones((n, 1))
    y = X[:, 0] * 2.0 - 1.0
    cg_steps = {
        "Z p (layout.dot)": clock_mean(lambda: layout.dot(P)),
        "Z^T u (layout.tdot)": clock_mean(lambda: layout.tdot(T)),
        "T.sum(axis=0)": clock_mean(lambda: T.sum(axis=0)),
        "col_sums(T)": clock_mean(lambda: _ops.col_sums(xp, T)),
        "T - c": clock_mean(lambda: T - P[:1, :]),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for it in (2, 12):
            cg_steps[f"solve_ridge, {it} iterations"] = clock_mean(
                lambda: ccg.solve_ridge(xp, layout, y.reshape(n, 1), None, 1e-4 * n, True, 0.0,
                                        it, "jacobi", structured=True), reps=1)
    # solve_ridge's stopping decision A/B (issue 32): host_lag=1, the device keeps the
    # active mask and the host reads it one iteration late (never waiting for the iteration
    # it has just queued); host_lag=0, the host waits for every iteration's summary and
    # decides itself. Per iteration: the difference of 32 and 2 iterations (tol 0), and
    # one full solve (tol 1e-6) over its iterations (its setup included).
    # graph=True: the same loop, pairs of iterations replayed from a CUDA graph (one launch
    # per two iterations instead of about a dozen kernels and library calls each)
    ab = {}
    loops = {1: dict(host_lag=1), 0: dict(host_lag=0), "graph": dict(graph=True)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Y1 = y.reshape(n, 1)
        for lag, how in loops.items():
            try:
                run = {}
                for it in (2, 32):
                    run[it] = clock_mean(lambda: ccg.solve_ridge(
                        xp, layout, Y1, None, 1e-4 * n, True, 0.0, it, "jacobi",
                        structured=True, **how), reps=3)
                full = {}

                def solve():
                    full["out"] = ccg.solve_ridge(xp, layout, Y1, None, 1e-4 * n, True, 1e-6,
                                                  None, "jacobi", structured=True, **how)
                t_full = clock_mean(solve, reps=1)
            except Exception as exc:  # (the graph loop is new: report it, keep the rest)
                if lag != "graph":
                    raise
                print(f"  graph=True failed: {type(exc).__name__}: {exc}")
                ab[lag] = (float("nan"), float("nan"), 0, None)
                continue
            ab[lag] = ((run[32] - run[2]) / 30, t_full, int(full["out"][2].max()), full["out"])
    # the solve's fixed cost (issue 32, N = 10^6: about 3.5 ms a solve on an H200, against
    # 0.5-0.65 ms an iteration): solve_ridge with max_iter=0 (the set-up, the first
    # direction and the result copies), mean of 10; and where its host time goes: the
    # Python functions by their own time over 10 such calls (cProfile; a wait for the
    # device shows as the call that waits)
    import cProfile
    import io
    import pstats

    def setup_only():
        ccg.solve_ridge(xp, layout, Y1, None, 1e-4 * n, True, 1e-6, 0, "jacobi",
                        structured=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_setup = clock_mean(setup_only, reps=10)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(10):
            setup_only()
        sync()
        prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(14)
    setup_profile = [line for line in buf.getvalue().splitlines()
                     if line.strip() and not line.startswith(("   Ordered", "   List"))]
    same = all(np.asarray(a).tobytes() == np.asarray(b).tobytes()
               for a, b in zip(ab[0][3][:3], ab[1][3][:3]))
    graph_out = ab["graph"][3]
    same_graph = graph_out is not None and all(
        np.asarray(a).tobytes() == np.asarray(b).tobytes()
        for a, b in zip(ab[1][3][:3], graph_out[:3]))
    graph_ran = graph_out is not None and bool(graph_out[3].get("graph"))
    layout = P = T = None   # (freed; the timing lambdas above hold their cells)
    # the same fit's stages, synchronised one by one
    stages = dict(prepare=0.0, keys=0.0, sort=0.0, number=0.0, store=0.0)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Xc, widths, offsets, lo, hi, cmin, cmax, sigma, dtype = cb._prepare(est, X, xp)
    tables = cb.CudaTables(widths, offsets, lo, hi, cmin, cmax, None, None)
    dev = tables.device_arrays(xp)
    _, _, n_words, top_bits = tables.layout()
    R = widths.shape[0]
    labels = xp.empty((R, n), dtype=xp.int32)
    rows = xp.empty(n * R, dtype=xp.int32)
    sync()
    stages["prepare"] += time.perf_counter() - t
    row_bits = cb._row_bits(n)
    generic = 0
    fast = [r for r in range(R) if cb._combines(n, r, n_words, top_bits)]
    batches = cb._batches(fast, n, top_bits, row_bits)
    first = {b[0]: b for b in batches}
    single = {b[0] for b in batches if len(b) == 1}
    ahead = {}
    narrow = 0
    r = 0
    while r < R:
        t = time.perf_counter()
        batch = first.get(r)
        if batch is not None and len(batch) > 1:   # fit_layout's batch of grids
            G = len(batch)
            key_bits = max(int(top_bits[q]) for q in batch)
            base = cb._narrow(batch, top_bits, row_bits)
            narrow += base is not None
            words = _ops.batch_keys(xp, Xc, dev["u"][r:r + G], dev["w"][r:r + G],
                                    dev["lo"][r:r + G], dev["shift"][r:r + G], row_bits,
                                    key_bits, base=base)
            sync()
            t1 = time.perf_counter()
            s = xp.sort(words.reshape(-1))
            del words
            if base is not None:
                s = _ops.widen_batch(xp, s, base, row_bits, key_bits)
            sync()
            t2 = time.perf_counter()
            flags, seg, count = cb._segment_ids(xp, s, row_bits)
            cp, seg_off, kb, mc = cb._number_batch(
                xp, s, flags, seg, count.get() + 1, row_bits, key_bits, G, n,
                labels[r:r + G], rows[r * n:(r + G) * n])
            del s, flags, seg
        elif batch is not None:                    # one grid (keys with the next few: _key_group)
            G = 1
            if r not in ahead:
                ahead.update(cb._key_group(xp, Xc, dev, r, single, row_bits, top_bits))
            pairs = ahead.pop(r)
            narrow += pairs.dtype != xp.uint64
            sync()
            t1 = time.perf_counter()
            s = xp.sort(pairs)
            del pairs
            if s.dtype != xp.uint64:
                s = s.astype(xp.uint64)
            sync()
            t2 = time.perf_counter()
            flags, seg, count = cb._segment_ids(xp, s, row_bits)
            cp, seg_off, kb, mc = cb._number_batch(
                xp, s, flags, seg, count.get() + 1, row_bits, int(top_bits[r]), 1, n,
                labels[r:r + 1], rows[r * n:(r + 1) * n])
            del s, flags, seg
        else:
            G = 1
            generic += 1
            row_s, words_s = cb._sorted_pairs(xp, Xc, dev, r, n_words, top_bits, True)
            t1 = t2 = time.perf_counter()
            lab, cp, rc, kb, mc = cb.number_grid(xp, row_s, words_s)
            labels[r] = lab
            rows[r * n:(r + 1) * n] = rc
        sync()
        t3 = time.perf_counter()
        _ops.to_host(kb)
        _ops.to_host(mc)
        sync()
        t4 = time.perf_counter()
        stages["keys"] += t1 - t
        stages["sort"] += t2 - t1
        stages["number"] += t3 - t2
        stages["store"] += t4 - t3
        r += G
    # the steps of "prepare", each synchronised (the column extremes as fit takes them, and
    # as two cupy reductions over the rows' axis, the earlier code)
    from rbcd.cuda import binning as _b

    def clock(f):
        sync()
        t0 = time.perf_counter()
        f()
        sync()
        return time.perf_counter() - t0

    steps = {
        "check_X_xp": clock(lambda: _b.check_X_xp(xp, X)),
        "column_extremes": clock(lambda: _ops.column_extremes(xp, X)),
        "isfinite.all + min/max(axis=0)": clock(
            lambda: (bool(xp.isfinite(X).all()), _ops.to_host(X.min(axis=0)),
                     _ops.to_host(X.max(axis=0)))),
        "_check_params": clock(lambda: est._check_params(X)),
        "sigma='scale'": clock(lambda: _b._scale_sigma(xp, X)),
    }
    total = sum(stages.values())
    print(f"gpu_binning_stages: N = {n:,}, d = {a.d}, R = {a.grids} ({generic} grid(s) on the "
          f"generic multi-word path, their keys and sort counted in 'keys')")
    print(f"  fit_layout as the estimator runs it ({len(batches)} batch(es) of grids, "
          f"{narrow} of them sorted as narrow words, BATCH_WORDS {cb.BATCH_WORDS}): "
          f"{whole:.3f} s; the same batches, synchronised "
          f"stage by stage: {total:.3f} s")
    for k, v in stages.items():
        print(f"  {k:8s} {v:.4f} s  ({100 * v / total:4.1f}%)  {1e3 * v / R:.3f} ms per grid, "
              f"{1e3 * v / len(batches):.3f} ms per batch")
    print("  CG pieces on this layout (mean of 5 calls; solve_ridge: one call):")
    for k, v in cg_steps.items():
        print(f"    {k:32s} {1e3 * v:8.2f} ms")
    per_it = (cg_steps["solve_ridge, 12 iterations"] - cg_steps["solve_ridge, 2 iterations"]) / 10
    print(f"    {'one CG iteration (difference)':32s} {1e3 * per_it:8.2f} ms")
    print("  solve_ridge stopping decision A/B (host_lag=1: device mask, host reads it one "
          "iteration late; host_lag=0: host waits for every iteration):")
    for lag in (1, 0, "graph"):
        d_it, t_full, its, _ = ab[lag]
        name = "graph=True " if lag == "graph" else f"host_lag={lag}"
        print(f"    {name}: {1e3 * d_it:7.3f} ms per iteration (32 - 2 iterations); "
              f"full solve (tol 1e-6) {1e3 * t_full:8.2f} ms / {its} iterations = "
              f"{1e3 * t_full / max(its, 1):7.3f} ms per iteration")
    print(f"    host_lag=1 vs 0: {ab[0][0] / ab[1][0] if ab[1][0] > 0 else float('nan'):.2f}x "
          f"per iteration; coef, intercept, n_iter bit for bit equal: {same}")
    print(f"    graph=True vs host_lag=1: "
          f"{ab[1][0] / ab['graph'][0] if ab['graph'][0] > 0 else float('nan'):.2f}x per "
          f"iteration, full solve {ab[1][1] / ab['graph'][1]:.2f}x; a captured graph ran: "
          f"{graph_ran}; coef, intercept, n_iter bit for bit equal: {same_graph}")
    print(f"  solve_ridge set-up alone (max_iter=0, mean of 10): {1e3 * t_setup:.2f} ms; "
          "its host time by function (10 calls, cProfile, by own time):")
    for line in setup_profile[:24]:
        print("    " + line)
    print("  steps of prepare (each on its own):")
    for k, v in steps.items():
        print(f"    {k:32s} {1e3 * v:8.2f} ms")


if __name__ == "__main__":
    main()
